//! An SVG timeline of a run, written by hand (no crate), for a person to read: who held what while
//! which fault was active.
//!
//! From the top: a legend; one row per fault's label; the lanes, one per resource, or (with
//! `client_lanes`) one per client within each resource, so that back-to-back holds of different
//! clients never merge into one bar; with [`Annotations::refusals`], a rate panel on the same time
//! axis (acquisitions and refusals by reason per 100 ms, and the p99 acquire latency); the time
//! axis. Faults are shaded translucent bands over lanes and panel, and restores are dashed
//! markers. With [`Annotations::transitions`], a zoomed strip around each transition shows every
//! single hold. A hold spans its safe interval `[acquired, min(released, validity_end)]`; the part
//! of a hold that ran past its validity is hatched red (`class="expired"`).

mod canvas;
mod lanes;
mod legend;
mod rates;
#[cfg(test)]
mod tests;
mod zoom;

use std::fmt::Write as _;
use std::time::Duration;

use crate::history::{FaultWindow, LockRecord};
use canvas::{escape, Canvas};
use lanes::Lanes;
use legend::legend;
use rates::rate_panel;
pub use rates::{rates, Rates};
use zoom::zooms;

/// Layout settings for [`timeline`] and [`picture`].
#[derive(Debug, Clone)]
pub struct SvgOptions {
    /// Width of the drawing area for time, in pixels.
    pub width: u32,
    /// Height of one resource lane, in pixels (a client lane is half of it).
    pub lane_height: u32,
    /// Title shown at the top.
    pub title: String,
    /// One lane per client within each resource, instead of one per resource.
    pub client_lanes: bool,
}

impl Default for SvgOptions {
    fn default() -> Self {
        SvgOptions {
            width: 1200,
            lane_height: 28,
            title: "quorlock chaos run".into(),
            client_lanes: false,
        }
    }
}

/// A moment worth a marker: a restore, or a transition to zoom into.
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    /// When, from the run's start.
    pub at: Duration,
    /// What happened, e.g. `"masters 0, 1, 2 restored"`.
    pub label: String,
}

/// Why an attempt was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalKind {
    /// Another client held the lock: the lock doing its job.
    Contention,
    /// Too few masters answered to grant anyone the lock.
    NoMajority,
}

/// A refused attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// When the refusal came back, from the run's start.
    pub at: Duration,
    /// Why.
    pub kind: RefusalKind,
}

/// What [`picture`] draws beyond the holds and the faults.
#[derive(Debug, Clone, Default)]
pub struct Annotations {
    /// Restores, drawn as dashed markers across lanes and panel.
    pub restores: Vec<Marker>,
    /// Transitions to zoom into, one strip each.
    pub transitions: Vec<Marker>,
    /// Every refusal; `Some` draws the rate panel.
    pub refusals: Option<Vec<Refusal>>,
}

/// The width of one bucket of the rate panel.
pub const BUCKET: Duration = Duration::from_millis(100);
/// A zoomed strip shows this long before its transition...
pub const ZOOM_BEFORE: Duration = Duration::from_millis(80);
/// ...and this long after it.
pub const ZOOM_AFTER: Duration = Duration::from_millis(170);

const LEFT: f64 = 150.0;
const RIGHT: f64 = 20.0;
const ROW: f64 = 14.0;
const AXIS: f64 = 30.0;
const PANEL: f64 = 56.0;
const PANEL_GAP: f64 = 8.0;
const ZOOM_LANE: f64 = 11.0;
const ZOOM_GAP: f64 = 24.0;
const FAULT: &str = "#ff7f0e";
const ACQUIRED: &str = "#2ca02c";
const CONTENTION: &str = "#9e9e9e";
const NO_MAJORITY: &str = "#d62728";
const P99: &str = "#1f77b4";
const RESTORE: &str = "#1a7f37";

/// The holds of `records` per resource over `[0, run_end]`, with `faults` shaded.
pub fn timeline(
    records: &[LockRecord],
    faults: &[FaultWindow],
    run_end: Duration,
    opts: &SvgOptions,
) -> String {
    picture(records, faults, run_end, opts, &Annotations::default())
}

/// [`timeline`], with the restores, rate panel and zoomed strips of `notes`.
pub fn picture(
    records: &[LockRecord],
    faults: &[FaultWindow],
    run_end: Duration,
    opts: &SvgOptions,
    notes: &Annotations,
) -> String {
    let lanes = Lanes::of(records, opts);
    let width = f64::from(opts.width.max(200));
    let end_s = run_end.as_secs_f64().max(1e-3);
    let total = LEFT + width + RIGHT;
    // Fault bands go under everything else, so that holds and bars keep their colours.
    let mut under = Canvas::default();
    let mut c = Canvas::default();

    let legend_top = 28.0;
    let legend_rows = legend(&mut c, &lanes, opts, notes, legend_top, total);
    let faults_top = legend_top + legend_rows * ROW + 6.0;
    let marker_rows = if notes.restores.is_empty() { 0.0 } else { 1.0 };
    let lanes_top = faults_top + (faults.len() as f64 + marker_rows) * ROW;
    let x = Scale {
        left: LEFT,
        width,
        from: 0.0,
        to: end_s,
    };
    let lanes_bottom = lanes.draw(&mut c, records, &x, lanes_top, true);
    let mut bottom = lanes_bottom;
    if let Some(refusals) = &notes.refusals {
        bottom = rate_panel(&mut c, records, refusals, run_end, &x, bottom + PANEL_GAP);
    }
    for (i, fault) in faults.iter().enumerate() {
        let row_y = faults_top + i as f64 * ROW;
        let (x0, x1) = (
            x.at(fault.start),
            x.at(fault.end.max(fault.start)).max(x.at(fault.start) + 1.0),
        );
        under.rect_attrs(
            "fault",
            x0,
            row_y,
            x1 - x0,
            bottom - row_y,
            &format!(r#"fill="{FAULT}" fill-opacity="0.16" stroke="{FAULT}" stroke-opacity="0.6""#),
            Some(&fault.label),
        );
        c.text(
            "fault-label",
            x0 + 2.0,
            row_y + 10.0,
            "start",
            "#a04000",
            &fault.label,
        );
    }
    let marker_y = faults_top + faults.len() as f64 * ROW;
    for restore in &notes.restores {
        let mx = x.at(restore.at);
        let _ = writeln!(
            c.out,
            r#"<line class="restore" x1="{mx:.1}" y1="{marker_y:.1}" x2="{mx:.1}" y2="{bottom:.1}" stroke="{RESTORE}" stroke-width="1.5" stroke-dasharray="5,3"><title>{}</title></line>"#,
            escape(&restore.label)
        );
        c.text(
            "restore-label",
            mx + 3.0,
            marker_y + 10.0,
            "start",
            RESTORE,
            &restore.label,
        );
    }
    axis(&mut c, &x, bottom + 4.0, 0.0, step(end_s), |t| format!("{t:.1}s"));
    let mut height = bottom + AXIS;
    if !notes.transitions.is_empty() {
        height = zooms(
            &mut under,
            &mut c,
            records,
            faults,
            notes,
            &lanes,
            height + 8.0,
            width,
        );
    }

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{total:.0}" height="{height:.0}" viewBox="0 0 {total:.0} {height:.0}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="11">"#
    );
    svg.push_str(
        "<defs><pattern id=\"expired\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" \
         patternTransform=\"rotate(45)\"><rect width=\"3\" height=\"6\" fill=\"#d62728\"/></pattern></defs>\n",
    );
    let _ = writeln!(svg, r##"<rect width="100%" height="100%" fill="#ffffff"/>"##);
    let _ = writeln!(
        svg,
        r#"<text class="title" x="{LEFT}" y="18" font-size="14" font-weight="bold">{}</text>"#,
        escape(&opts.title)
    );
    svg.push_str(&under.out);
    svg.push_str(&c.out);
    svg.push_str("</svg>\n");
    svg
}

/// A linear map from seconds in `[from, to]` to pixels in `[left, left + width]`.
struct Scale {
    left: f64,
    width: f64,
    from: f64,
    to: f64,
}

impl Scale {
    fn at(&self, t: Duration) -> f64 {
        self.secs(t.as_secs_f64())
    }

    fn secs(&self, s: f64) -> f64 {
        let span = (self.to - self.from).max(1e-9);
        self.left + ((s.clamp(self.from, self.to) - self.from) / span) * self.width
    }
}

/// A time axis at `y` with ticks every `step` seconds of `x` from `origin`, labelled by `label`.
fn axis(c: &mut Canvas, x: &Scale, y: f64, origin: f64, step: f64, label: impl Fn(f64) -> String) {
    let _ = writeln!(
        c.out,
        r##"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#333"/>"##,
        x.left,
        x.left + x.width
    );
    let first = ((x.from - origin) / step - 1e-9).ceil() as i64;
    let last = ((x.to - origin) / step + 1e-9).floor() as i64;
    for k in first..=last {
        let t = origin + k as f64 * step;
        let tx = x.secs(t);
        let _ = writeln!(
            c.out,
            r##"<line x1="{tx:.1}" y1="{y:.1}" x2="{tx:.1}" y2="{:.1}" stroke="#333"/><text x="{tx:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            y + 4.0,
            y + 16.0,
            escape(&label(t))
        );
    }
}

/// A round tick spacing giving at most about ten ticks over `span` seconds.
fn step(span: f64) -> f64 {
    let raw = span / 10.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if raw <= m * magnitude {
            return m * magnitude;
        }
    }
    10.0 * magnitude
}

/// Client colours, none of them the green, grey, red or blue of the rate panel nor the orange of a
/// fault.
const CLIENT_COLOURS: [&str; 10] = [
    "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#393b79", "#7b4173", "#5254a3", "#8c6d31",
    "#6b6ecf",
];

/// A distinct, stable colour per client (golden-angle hues past the palette).
fn client_color(client: usize) -> String {
    match CLIENT_COLOURS.get(client) {
        Some(colour) => (*colour).to_owned(),
        None => format!("hsl({:.0},45%,45%)", (client as f64 * 137.508) % 360.0),
    }
}
