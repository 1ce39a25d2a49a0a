//! An SVG timeline of a run, written by hand (no crate): one lane per resource with a bar per
//! hold, faults shaded as labelled translucent rectangles, so a reader can see at a glance
//! who held what while which fault was active.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::time::Duration;

use crate::history::{FaultWindow, LockRecord};

/// Layout settings for [`timeline`].
#[derive(Debug, Clone)]
pub struct SvgOptions {
    /// Width of the drawing area for time, in pixels.
    pub width: u32,
    /// Height of one resource lane, in pixels.
    pub lane_height: u32,
    /// Title shown at the top.
    pub title: String,
}

impl Default for SvgOptions {
    fn default() -> Self {
        SvgOptions {
            width: 1200,
            lane_height: 28,
            title: "quorlock chaos run".into(),
        }
    }
}

const LEFT: f64 = 140.0;
const TOP: f64 = 40.0;
const RIGHT: f64 = 20.0;
const AXIS: f64 = 30.0;
const FAULT_LABEL_ROW: f64 = 14.0;

/// Renders holders per resource over `[0, run_end]` with `faults` shaded.
///
/// Bars span the safe interval `[acquired, min(released, validity_end)]`; the part of a
/// hold that ran past its validity is drawn hatched red (`class="expired"`).
pub fn timeline(
    records: &[LockRecord],
    faults: &[FaultWindow],
    run_end: Duration,
    opts: &SvgOptions,
) -> String {
    let resources: Vec<&str> = records
        .iter()
        .map(|r| r.resource.as_str())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let lane = f64::from(opts.lane_height.max(8));
    let width = f64::from(opts.width.max(200));
    let lanes = resources.len().max(1) as f64;
    let fault_rows = faults.len() as f64 * FAULT_LABEL_ROW;
    let height = TOP + fault_rows + lanes * lane + AXIS;
    let total = LEFT + width + RIGHT;
    let end_s = run_end.as_secs_f64().max(1e-3);
    let x = |t: Duration| LEFT + (t.as_secs_f64().min(end_s) / end_s) * width;
    let lanes_top = TOP + fault_rows;

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{total:.0}" height="{height:.0}" viewBox="0 0 {total:.0} {height:.0}" font-family="sans-serif" font-size="11">"#
    );
    svg.push_str(
        "<defs><pattern id=\"expired\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" \
         patternTransform=\"rotate(45)\"><rect width=\"3\" height=\"6\" fill=\"#d62728\"/></pattern></defs>\n",
    );
    let _ = writeln!(svg, r##"<rect width="100%" height="100%" fill="#ffffff"/>"##);
    let _ = writeln!(
        svg,
        r#"<text x="{LEFT}" y="18" font-size="14" font-weight="bold">{}</text>"#,
        escape(&opts.title)
    );

    // Lanes.
    for (i, resource) in resources.iter().enumerate() {
        let y = lanes_top + i as f64 * lane;
        let fill = if i % 2 == 0 { "#f4f4f4" } else { "#fbfbfb" };
        let _ = writeln!(
            svg,
            r#"<rect class="lane" x="{LEFT}" y="{y:.1}" width="{width:.1}" height="{lane:.1}" fill="{fill}"/>"#
        );
        let _ = writeln!(
            svg,
            r#"<text class="resource" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LEFT - 6.0,
            y + lane * 0.65,
            escape(resource)
        );
    }

    // Holds.
    for record in records {
        let Some((start, safe_end)) = record.safe_interval() else {
            continue;
        };
        let Some(i) = resources.iter().position(|r| *r == record.resource) else {
            continue;
        };
        let y = lanes_top + i as f64 * lane + 3.0;
        let h = lane - 6.0;
        let x0 = x(start);
        let x1 = x(safe_end.min(run_end)).max(x0 + 1.0);
        let tip = format!(
            "client {} token {} acquired {:.3}s safe until {:.3}s{}",
            record.client,
            record.token,
            start.as_secs_f64(),
            safe_end.min(run_end).as_secs_f64(),
            record
                .fencing
                .map(|f| format!(" fencing {f}"))
                .unwrap_or_default()
        );
        let _ = writeln!(
            svg,
            r##"<rect class="hold" x="{x0:.1}" y="{y:.1}" width="{:.1}" height="{h:.1}" fill="{}" stroke="#333" stroke-width="0.5"><title>{}</title></rect>"##,
            x1 - x0,
            client_color(record.client),
            escape(&tip)
        );
        if let Some(released) = record.released {
            if released > safe_end {
                let x2 = x(released.min(run_end)).max(x1 + 1.0);
                let _ = writeln!(
                    svg,
                    r#"<rect class="expired" x="{x1:.1}" y="{y:.1}" width="{:.1}" height="{h:.1}" fill="url(#expired)"><title>client {} held past its validity</title></rect>"#,
                    x2 - x1,
                    record.client
                );
            }
        }
    }

    // Faults on top, translucent, each with its label in its own row above the lanes.
    for (i, fault) in faults.iter().enumerate() {
        let x0 = x(fault.start);
        let x1 = x(fault.end.max(fault.start)).max(x0 + 1.0);
        let label_y = TOP + i as f64 * FAULT_LABEL_ROW + 10.0;
        let _ = writeln!(
            svg,
            r##"<rect class="fault" x="{x0:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#ff7f0e" fill-opacity="0.18" stroke="#ff7f0e" stroke-opacity="0.6"><title>{}</title></rect>"##,
            TOP + i as f64 * FAULT_LABEL_ROW,
            x1 - x0,
            height - AXIS - TOP - i as f64 * FAULT_LABEL_ROW,
            escape(&fault.label)
        );
        let _ = writeln!(
            svg,
            r##"<text class="fault-label" x="{:.1}" y="{label_y:.1}" fill="#a04000">{}</text>"##,
            x0 + 2.0,
            escape(&fault.label)
        );
    }

    // Time axis with about ten ticks.
    let axis_y = height - AXIS + 4.0;
    let _ = writeln!(
        svg,
        r##"<line x1="{LEFT}" y1="{axis_y:.1}" x2="{:.1}" y2="{axis_y:.1}" stroke="#333"/>"##,
        LEFT + width
    );
    let step = tick_step(end_s);
    let ticks = (end_s / step + 1e-9).floor() as u32;
    for k in 0..=ticks {
        let t = f64::from(k) * step;
        let tx = LEFT + (t / end_s) * width;
        let _ = writeln!(
            svg,
            r##"<line x1="{tx:.1}" y1="{axis_y:.1}" x2="{tx:.1}" y2="{:.1}" stroke="#333"/><text x="{tx:.1}" y="{:.1}" text-anchor="middle">{t:.1}s</text>"##,
            axis_y + 4.0,
            axis_y + 16.0
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// A round tick spacing giving at most about ten ticks over `span` seconds.
fn tick_step(span: f64) -> f64 {
    let raw = span / 10.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if raw <= m * magnitude {
            return m * magnitude;
        }
    }
    10.0 * magnitude
}

/// A distinct, stable color per client (golden-angle hues).
fn client_color(client: usize) -> String {
    let hue = (client as f64 * 137.508) % 360.0;
    format!("hsl({hue:.0},60%,55%)")
}

/// Escapes text for XML content and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_control() && c != '\n' && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn hold(client: usize, resource: &str, acquired: u64, validity_end: u64, released: u64) -> LockRecord {
        let mut r = LockRecord::invoked(client, resource, ms(acquired));
        r.token = format!("tok{client}");
        r.acquired = Some(ms(acquired));
        r.validity_end = Some(ms(validity_end));
        r.released = Some(ms(released));
        r
    }

    /// Checks that tags nest properly and returns the names of all opened elements.
    fn well_formed(svg: &str) -> Vec<String> {
        let mut stack: Vec<String> = Vec::new();
        let mut names = Vec::new();
        let mut rest = svg;
        while let Some(open) = rest.find('<') {
            let text = &rest[..open];
            assert!(!text.contains('>'), "stray '>' in text {text:?}");
            assert!(
                text.split('&')
                    .skip(1)
                    .all(|e| ["amp;", "lt;", "gt;", "quot;", "apos;"]
                        .iter()
                        .any(|p| e.starts_with(p))),
                "bad entity in {text:?}"
            );
            let close = rest[open..].find('>').expect("unterminated tag") + open;
            let tag = &rest[open + 1..close];
            assert!(!tag.contains('<'), "'<' inside tag {tag:?}");
            assert_eq!(tag.matches('"').count() % 2, 0, "unbalanced quotes in {tag:?}");
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(stack.pop().as_deref(), Some(name.trim()), "mismatched </{name}>");
            } else {
                let name = tag
                    .split_whitespace()
                    .next()
                    .unwrap()
                    .trim_end_matches('/')
                    .to_string();
                names.push(name.clone());
                if !tag.ends_with('/') {
                    stack.push(name);
                }
            }
            rest = &rest[close + 1..];
        }
        assert!(rest.trim().is_empty());
        assert!(stack.is_empty(), "unclosed elements {stack:?}");
        names
    }

    #[test]
    fn timeline_is_well_formed_and_has_lanes_holds_and_faults() {
        let records = vec![
            hold(0, "orders:<1>", 100, 900, 500),
            hold(1, "orders:<1>", 600, 1500, 1400),
            hold(2, "users & co", 200, 400, 700), // held past validity
            LockRecord::invoked(3, "users & co", ms(300)), // failed attempt: no bar
        ];
        let faults = vec![FaultWindow {
            start: ms(300),
            end: ms(800),
            label: "kill m1 \"and\" m2".into(),
        }];
        let svg = timeline(&records, &faults, ms(2000), &SvgOptions::default());
        let names = well_formed(&svg);
        assert_eq!(names.first().map(String::as_str), Some("svg"));
        assert_eq!(svg.matches(r#"class="lane""#).count(), 2);
        assert_eq!(svg.matches(r#"class="hold""#).count(), 3);
        assert_eq!(svg.matches(r#"class="expired""#).count(), 1);
        assert_eq!(svg.matches(r#"class="fault""#).count(), 1);
        assert!(svg.contains("orders:&lt;1&gt;"));
        assert!(svg.contains("users &amp; co"));
        assert!(svg.contains("kill m1 &quot;and&quot; m2"));
        assert!(svg.contains("fill-opacity=\"0.18\""));
        assert!(svg.contains(">2.0s</text>"));
    }

    #[test]
    fn an_empty_run_still_renders() {
        let svg = timeline(&[], &[], Duration::ZERO, &SvgOptions::default());
        well_formed(&svg);
        assert!(!svg.contains(r#"class="hold""#));
    }

    #[test]
    fn the_well_formedness_check_can_fail() {
        let bad = std::panic::catch_unwind(|| well_formed("<svg><g></svg>"));
        assert!(bad.is_err());
    }

    #[test]
    fn tick_steps_are_round() {
        assert_eq!(tick_step(30.0), 5.0);
        assert_eq!(tick_step(2.0), 0.2);
        assert_eq!(tick_step(100.0), 10.0);
    }
}
