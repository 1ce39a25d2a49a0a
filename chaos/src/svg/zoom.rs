//! Zoomed strips: a short window around each transition, wide enough that every single hold of
//! every client shows, with the refusals that came back meanwhile.

use std::fmt::Write as _;
use std::time::Duration;

use super::canvas::Canvas;
use super::lanes::Lanes;
use super::layout::{
    axis, Annotations, RefusalKind, Scale, AXIS, CONTENTION, FAULT, LEFT, NO_MAJORITY, ROW, ZOOM_AFTER,
    ZOOM_BEFORE, ZOOM_GAP, ZOOM_LANE,
};
use crate::history::{FaultWindow, LockRecord};

/// The zoomed strips from `top`, side by side, three to a row (their fault bands in `under`):
/// returns the drawing's height.
#[allow(clippy::too_many_arguments)]
pub(super) fn zooms(
    under: &mut Canvas,
    c: &mut Canvas,
    records: &[LockRecord],
    faults: &[FaultWindow],
    notes: &Annotations,
    lanes: &Lanes,
    top: f64,
    width: f64,
) -> f64 {
    let per_row = notes.transitions.len().min(3);
    let strip = (width - ZOOM_GAP * (per_row as f64 - 1.0)) / per_row as f64;
    c.text(
        "zoom-heading",
        LEFT,
        top + 10.0,
        "start",
        "#000",
        &format!(
            "Zoomed in: {} ms around each change, every hold of every client",
            (ZOOM_BEFORE + ZOOM_AFTER).as_millis()
        ),
    );
    let lanes_h = lanes.lanes.len().max(1) as f64 * ZOOM_LANE;
    let strip_h = ROW + lanes_h + 10.0 + AXIS;
    let mut bottom = top + ROW;
    for (k, at) in notes.transitions.iter().enumerate() {
        let (row, col) = (k / per_row, k % per_row);
        let y = top + ROW + 4.0 + row as f64 * (strip_h + 8.0);
        let left = LEFT + col as f64 * (strip + ZOOM_GAP);
        let centre = at.at.as_secs_f64();
        let x = Scale {
            left,
            width: strip,
            from: (centre - ZOOM_BEFORE.as_secs_f64()).max(0.0),
            to: centre + ZOOM_AFTER.as_secs_f64(),
        };
        let _ = writeln!(c.out, r#"<g class="zoom">"#);
        c.text(
            "zoom-title",
            left,
            y + 10.0,
            "start",
            "#000",
            &format!("{} (at {:.2}s)", at.label, centre),
        );
        let lanes_top = y + ROW;
        let lanes_bottom = lanes_top + lanes_h;
        let (from, to) = (Duration::from_secs_f64(x.from), Duration::from_secs_f64(x.to));
        for fault in faults.iter().filter(|f| f.end >= from && f.start <= to) {
            let (x0, x1) = (x.at(fault.start), x.at(fault.end));
            under.rect_attrs(
                "fault",
                x0,
                lanes_top,
                (x1 - x0).max(1.0),
                lanes_bottom + 8.0 - lanes_top,
                &format!(r#"fill="{FAULT}" fill-opacity="0.16""#),
                Some(&fault.label),
            );
        }
        lanes.draw_sized(c, records, &x, lanes_top, ZOOM_LANE, col == 0);
        if col == 0 {
            c.text(
                "zoom-row-label",
                LEFT - 6.0,
                lanes_bottom + 7.0,
                "end",
                "#555",
                "refused",
            );
        }
        for refusal in notes
            .refusals
            .iter()
            .flatten()
            .filter(|r| r.at >= from && r.at <= to)
        {
            let rx = x.at(refusal.at);
            let colour = match refusal.kind {
                RefusalKind::Contention => CONTENTION,
                RefusalKind::NoMajority => NO_MAJORITY,
            };
            let _ = writeln!(
                c.out,
                r#"<line class="zoom-refusal" x1="{rx:.1}" y1="{:.1}" x2="{rx:.1}" y2="{:.1}" stroke="{colour}"/>"#,
                lanes_bottom + 1.0,
                lanes_bottom + 7.0
            );
        }
        let cx = x.secs(centre);
        let _ = writeln!(
            c.out,
            r##"<line class="zoom-at" x1="{cx:.1}" y1="{lanes_top:.1}" x2="{cx:.1}" y2="{:.1}" stroke="#000" stroke-dasharray="2,2"/>"##,
            lanes_bottom + 8.0
        );
        axis(c, &x, lanes_bottom + 10.0, centre, 0.05, |t| {
            let ms = ((t - centre) * 1e3).round();
            if ms == 0.0 {
                "0".to_owned()
            } else {
                format!("{ms:+.0}ms")
            }
        });
        let _ = writeln!(c.out, "</g>");
        bottom = bottom.max(y + strip_h);
    }
    bottom + 6.0
}
