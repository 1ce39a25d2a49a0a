//! The legend: what each colour, hatch, band and marker of the timeline means.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::canvas::Canvas;
use super::lanes::Lanes;
use super::layout::{
    client_color, Annotations, SvgOptions, ACQUIRED, CONTENTION, FAULT, LEFT, NO_MAJORITY, P99, RESTORE,
    RIGHT, ROW,
};

/// The legend: returns how many rows it took.
pub(super) fn legend(
    c: &mut Canvas,
    lanes: &Lanes,
    opts: &SvgOptions,
    notes: &Annotations,
    top: f64,
    total: f64,
) -> f64 {
    let mut items: Vec<(String, &str)> = Vec::new();
    if opts.client_lanes {
        let clients: BTreeSet<usize> = lanes.lanes.iter().filter_map(|(_, c)| *c).collect();
        items.extend(clients.iter().map(|&k| (format!("client {k}"), "hold")));
        items.push((String::new(), "break"));
    } else {
        items.push(("a hold (colour: its client)".into(), "hold"));
    }
    items.push(("held past validity".into(), "expired"));
    items.push(("fault active (masters down)".into(), "fault"));
    if !notes.restores.is_empty() {
        items.push(("masters restored".into(), "restore"));
    }
    if notes.refusals.is_some() {
        items.push(("acquired / 100 ms".into(), "acquired"));
        items.push(("refused: contention (lock held)".into(), "contention"));
        items.push(("refused: no majority".into(), "no-majority"));
        items.push(("p99 acquire latency".into(), "p99"));
    }
    let _ = writeln!(c.out, r#"<g class="legend">"#);
    let (mut lx, mut row) = (LEFT, 0.0);
    let mut client = 0;
    for (label, kind) in &items {
        let w = 22.0 + label.len() as f64 * 6.2;
        if *kind == "break" {
            lx = LEFT;
            row += 1.0;
            continue;
        }
        if lx + w > total - RIGHT {
            lx = LEFT;
            row += 1.0;
        }
        let y = top + row * ROW;
        let swatch = match *kind {
            "hold" if opts.client_lanes => {
                client += 1;
                format!(
                    r##"fill="{}" stroke="#333" stroke-width="0.3""##,
                    client_color(lanes_client(lanes, client - 1))
                )
            }
            "hold" => r##"fill="hsl(200,60%,55%)" stroke="#333" stroke-width="0.3""##.into(),
            "expired" => r#"fill="url(#expired)""#.into(),
            "fault" => format!(r#"fill="{FAULT}" fill-opacity="0.3" stroke="{FAULT}""#),
            "acquired" => format!(r#"fill="{ACQUIRED}""#),
            "contention" => format!(r#"fill="{CONTENTION}""#),
            "no-majority" => format!(r#"fill="{NO_MAJORITY}""#),
            _ => String::new(),
        };
        match *kind {
            "restore" => {
                let _ = writeln!(
                    c.out,
                    r#"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{RESTORE}" stroke-width="1.5" stroke-dasharray="4,2"/>"#,
                    lx + 6.0,
                    y,
                    lx + 6.0,
                    y + 10.0
                );
            }
            "p99" => {
                let _ = writeln!(
                    c.out,
                    r#"<line x1="{lx:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{P99}" stroke-width="2"/>"#,
                    y + 5.0,
                    lx + 14.0,
                    y + 5.0
                );
            }
            _ => {
                let _ = writeln!(
                    c.out,
                    r#"<rect x="{lx:.1}" y="{y:.1}" width="14" height="10" {swatch}/>"#
                );
            }
        }
        c.text("legend-label", lx + 18.0, y + 9.0, "start", "#333", label);
        lx += w;
    }
    let _ = writeln!(c.out, "</g>");
    row + 1.0
}

/// The `k`th client of the lanes, in order.
fn lanes_client(lanes: &Lanes, k: usize) -> usize {
    let clients: BTreeSet<usize> = lanes.lanes.iter().filter_map(|(_, c)| *c).collect();
    clients.into_iter().nth(k).unwrap_or(k)
}
