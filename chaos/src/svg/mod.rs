//! An SVG timeline of a run, written by hand (no crate), for a person to read: who held what while
//! which fault was active.
//!
//! From the top: a legend; one row per fault's label; the lanes, one per resource, or (with
//! `client_lanes`) one per client within each resource, so that back-to-back holds of different
//! clients never merge into one bar; with [`Annotations::refusals`], a rate panel on the same time
//! axis (acquisitions and refusals by reason per 100 ms, and the p99 acquire latency); the time
//! axis. Faults are translucent bands under lanes and panel (holds and bars keep their colours),
//! and restores are dashed markers. With [`Annotations::transitions`], a zoomed strip around each transition shows every
//! single hold. A hold spans its safe interval `[acquired, min(released, validity_end)]`; the part
//! of a hold that ran past its validity is hatched red (`class="expired"`).
//!
//! One concern per file, each building only on those before it: `canvas` (the elements, escaping),
//! `layout` (settings, annotations, sizes, colours, the time scale and axis), `lanes`, `legend`,
//! `rates` (the rate panel), `zoom` (the strips); this file puts them together.

mod canvas;
mod lanes;
mod layout;
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
use layout::{axis, step, Scale, AXIS, FAULT, LEFT, PANEL_GAP, RESTORE, RIGHT, ROW};
pub use layout::{Annotations, Marker, Refusal, RefusalKind, SvgOptions, BUCKET, ZOOM_AFTER, ZOOM_BEFORE};
use legend::legend;
use rates::rate_panel;
pub use rates::{rates, Rates};
use zoom::zooms;

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
