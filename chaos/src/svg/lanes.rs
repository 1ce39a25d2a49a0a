//! The lanes of the timeline: one per resource, or one per client within each resource, each
//! hold a bar over its safe interval, the part held past its validity hatched.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::time::Duration;

use super::canvas::Canvas;
use super::layout::{client_color, Scale, SvgOptions};
use crate::history::LockRecord;

/// The lanes: one per resource, or one per client within each resource.
pub(super) struct Lanes {
    /// `(resource, client)` per lane, in drawing order; `client` is `None` for a resource lane.
    pub(super) lanes: Vec<(String, Option<usize>)>,
    height: f64,
}

impl Lanes {
    pub(super) fn of(records: &[LockRecord], opts: &SvgOptions) -> Self {
        let lanes: Vec<(String, Option<usize>)> = if opts.client_lanes {
            let pairs: BTreeSet<(&str, usize)> =
                records.iter().map(|r| (r.resource.as_str(), r.client)).collect();
            pairs.into_iter().map(|(r, c)| (r.to_owned(), Some(c))).collect()
        } else {
            let names: BTreeSet<&str> = records.iter().map(|r| r.resource.as_str()).collect();
            names.into_iter().map(|r| (r.to_owned(), None)).collect()
        };
        let lane = f64::from(opts.lane_height.max(8));
        Self {
            lanes,
            height: if opts.client_lanes {
                (lane / 2.0).max(6.0)
            } else {
                lane
            },
        }
    }

    fn index(&self, record: &LockRecord) -> Option<usize> {
        self.lanes
            .iter()
            .position(|(r, c)| *r == record.resource && c.is_none_or(|c| c == record.client))
    }

    /// Draws the lanes from `top` with their holds in `x`'s window, and returns the bottom.
    /// `labels`: resource and client names in the left margin.
    pub(super) fn draw(
        &self,
        c: &mut Canvas,
        records: &[LockRecord],
        x: &Scale,
        top: f64,
        labels: bool,
    ) -> f64 {
        self.draw_sized(c, records, x, top, self.height, labels)
    }

    /// As [`Lanes::draw`], each lane `lane` high.
    pub(super) fn draw_sized(
        &self,
        c: &mut Canvas,
        records: &[LockRecord],
        x: &Scale,
        top: f64,
        lane: f64,
        labels: bool,
    ) -> f64 {
        let mut previous: Option<&str> = None;
        let mut group = 0usize;
        for (i, (resource, client)) in self.lanes.iter().enumerate() {
            let y = top + i as f64 * lane;
            if previous.is_some_and(|p| p != resource) {
                group += 1;
            }
            let fill = if group.is_multiple_of(2) {
                "#f4f4f4"
            } else {
                "#fbfbfb"
            };
            // Translucent: the fault bands below show through.
            c.rect_attrs(
                "lane",
                x.left,
                y,
                x.width,
                lane,
                &format!(r#"fill="{fill}" fill-opacity="0.6""#),
                None,
            );
            if labels {
                if previous != Some(resource.as_str()) {
                    let _ = writeln!(
                        c.out,
                        r##"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#bbbbbb"/>"##,
                        8.0,
                        x.left + x.width
                    );
                    c.text(
                        "resource",
                        8.0,
                        y + lane.min(14.0) * 0.8,
                        "start",
                        "#000",
                        resource,
                    );
                }
                if let Some(client) = client {
                    let _ = writeln!(
                        c.out,
                        r#"<text class="client" x="{:.1}" y="{:.1}" text-anchor="end" font-size="{:.0}" fill="{}">client {client}</text>"#,
                        x.left - 6.0,
                        y + lane * 0.8,
                        (lane * 0.85).clamp(7.0, 11.0),
                        client_color(*client)
                    );
                }
            }
            previous = Some(resource.as_str());
        }
        let (from, to) = (Duration::from_secs_f64(x.from), Duration::from_secs_f64(x.to));
        for record in records {
            let (Some((start, safe_end)), Some(i)) = (record.safe_interval(), self.index(record)) else {
                continue;
            };
            if safe_end < from || start > to {
                continue;
            }
            let y = top + i as f64 * lane + 1.0;
            let h = (lane - 2.0).max(1.0);
            let x0 = x.at(start);
            let x1 = x.at(safe_end).max(x0 + 1.0);
            let tip = format!(
                "client {} token {} acquired {:.3}s safe until {:.3}s{}",
                record.client,
                record.token,
                start.as_secs_f64(),
                safe_end.as_secs_f64(),
                record
                    .fencing
                    .map(|f| format!(" fencing {f}"))
                    .unwrap_or_default()
            );
            c.rect_attrs(
                "hold",
                x0,
                y,
                x1 - x0,
                h,
                &format!(
                    r##"fill="{}" stroke="#333" stroke-width="0.3""##,
                    client_color(record.client)
                ),
                Some(&tip),
            );
            if let Some(released) = record.released.filter(|r| *r > safe_end) {
                let x2 = x.at(released).max(x1 + 1.0);
                let why = format!("client {} held past its validity", record.client);
                c.rect_attrs(
                    "expired",
                    x1,
                    y,
                    x2 - x1,
                    h,
                    r#"fill="url(#expired)""#,
                    Some(&why),
                );
            }
        }
        top + self.lanes.len().max(1) as f64 * lane
    }
}
