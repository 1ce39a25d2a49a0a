//! What the timeline is drawn from and with: its public settings and annotations, the layout's
//! sizes and colours, the time scale and its axis. Every other part of `svg` builds on this file.

use std::fmt::Write as _;
use std::time::Duration;

use super::canvas::{escape, Canvas};

/// Layout settings for [`super::timeline`] and [`super::picture`].
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

/// What [`super::picture`] draws beyond the holds and the faults.
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

pub(super) const LEFT: f64 = 150.0;
pub(super) const RIGHT: f64 = 20.0;
pub(super) const ROW: f64 = 14.0;
pub(super) const AXIS: f64 = 30.0;
pub(super) const PANEL: f64 = 56.0;
pub(super) const PANEL_GAP: f64 = 8.0;
pub(super) const ZOOM_LANE: f64 = 11.0;
pub(super) const ZOOM_GAP: f64 = 24.0;
pub(super) const FAULT: &str = "#ff7f0e";
pub(super) const ACQUIRED: &str = "#2ca02c";
pub(super) const CONTENTION: &str = "#9e9e9e";
pub(super) const NO_MAJORITY: &str = "#d62728";
pub(super) const P99: &str = "#1f77b4";
pub(super) const RESTORE: &str = "#1a7f37";

/// A linear map from seconds in `[from, to]` to pixels in `[left, left + width]`.
pub(super) struct Scale {
    pub(super) left: f64,
    pub(super) width: f64,
    pub(super) from: f64,
    pub(super) to: f64,
}

impl Scale {
    pub(super) fn at(&self, t: Duration) -> f64 {
        self.secs(t.as_secs_f64())
    }

    pub(super) fn secs(&self, s: f64) -> f64 {
        let span = (self.to - self.from).max(1e-9);
        self.left + ((s.clamp(self.from, self.to) - self.from) / span) * self.width
    }
}

/// A time axis at `y` with ticks every `step` seconds of `x` from `origin`, labelled by `label`.
pub(super) fn axis(c: &mut Canvas, x: &Scale, y: f64, origin: f64, step: f64, label: impl Fn(f64) -> String) {
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
pub(super) fn step(span: f64) -> f64 {
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
pub(super) fn client_color(client: usize) -> String {
    match CLIENT_COLOURS.get(client) {
        Some(colour) => (*colour).to_owned(),
        None => format!("hsl({:.0},45%,45%)", (client as f64 * 137.508) % 360.0),
    }
}
