//! The timeline's tests: well-formed SVG, what each part draws, the rates, and the demo's picture
//! rendered to PNG (under `target/svg-pictures/`) to be looked at.

use std::time::Duration;

use rand::{RngExt, SeedableRng};

use super::*;
use crate::history::{FaultWindow, LockRecord};
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
    assert!(svg.contains(">2.0s</text>"));
    assert!(svg.contains(r#"class="legend""#));
    assert!(!svg.contains("rate-panel") && !svg.contains(r#"class="zoom""#));
}

#[test]
fn an_empty_run_still_renders() {
    let svg = timeline(&[], &[], Duration::ZERO, &SvgOptions::default());
    well_formed(&svg);
    assert!(!svg.contains(r#"class="hold""#));
    let svg = picture(
        &[],
        &[],
        Duration::ZERO,
        &demo_options(),
        &Annotations {
            refusals: Some(Vec::new()),
            transitions: vec![Marker {
                at: Duration::ZERO,
                label: "start".into(),
            }],
            ..Annotations::default()
        },
    );
    well_formed(&svg);
}

#[test]
fn the_well_formedness_check_can_fail() {
    let bad = std::panic::catch_unwind(|| well_formed("<svg><g></svg>"));
    assert!(bad.is_err());
}

#[test]
fn tick_steps_are_round() {
    assert_eq!(step(30.0), 5.0);
    assert_eq!(step(2.0), 0.2);
    assert_eq!(step(100.0), 10.0);
}

#[test]
fn rates_count_per_bucket_and_take_the_p99_by_nearest_rank() {
    let mut records: Vec<LockRecord> = (0..100)
        .map(|i| {
            let mut r = hold(0, "r", 150, 10_000, 160);
            r.invoked = ms(150) - ms(i + 1);
            r
        })
        .collect();
    records.push(hold(1, "r", 20, 10_000, 30));
    records.push(LockRecord::invoked(2, "r", ms(40)));
    let refusals = [
        Refusal {
            at: ms(10),
            kind: RefusalKind::Contention,
        },
        Refusal {
            at: ms(250),
            kind: RefusalKind::NoMajority,
        },
        Refusal {
            at: ms(260),
            kind: RefusalKind::NoMajority,
        },
    ];
    let r = rates(&records, &refusals, ms(299));
    assert_eq!(r.acquired, vec![1, 100, 0]);
    assert_eq!(r.contention, vec![1, 0, 0]);
    assert_eq!(r.no_majority, vec![0, 0, 2]);
    assert_eq!(r.p99, vec![Some(Duration::ZERO), Some(ms(99)), None]);
}

fn demo_options() -> SvgOptions {
    SvgOptions {
        title: "quorlock demo: 8 workers, 5 masters; 2 killed, then a 3rd, then restored".into(),
        client_lanes: true,
        ..SvgOptions::default()
    }
}

/// A run shaped like the demo's: 8 clients over 2 resources, four phases of 3 s (all up; 2 of
/// 5 masters down, slower; no majority, only refusals; restored), seeded.
fn demo_run(seed: u64) -> (Vec<LockRecord>, Vec<FaultWindow>, Annotations, Duration) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (kill, kill_more, healed, end) = (ms(3000), ms(6000), ms(9000), ms(12_000));
    let mut records = Vec::new();
    let mut refusals = Vec::new();
    for (which, resource) in ["invoices", "orders"].iter().enumerate() {
        let mut t = ms(5);
        let mut turn = 0;
        while t < end {
            let client = which + 2 * (turn % 4);
            turn += 1 + rng.random_range(0..2);
            if t >= kill_more && t < healed {
                for c in [0, 2, 4, 6] {
                    let kind = RefusalKind::NoMajority;
                    refusals.push(Refusal { at: t + ms(c), kind });
                }
                t += ms(100);
                continue;
            }
            let slow = t >= kill && t < kill_more;
            let latency = ms(rng.random_range(1..if slow { 25 } else { 6 }));
            let mut r = hold(client, resource, (t + latency).as_millis() as u64, 0, 0);
            r.invoked = t;
            r.validity_end = Some(t + latency + ms(1900));
            r.released = Some(t + latency + ms(3));
            records.push(r);
            for _ in 0..rng.random_range(0..3) {
                let at = t + ms(rng.random_range(0..6));
                refusals.push(Refusal {
                    at,
                    kind: RefusalKind::Contention,
                });
            }
            t += latency + ms(3) + ms(rng.random_range(1..8));
        }
    }
    let window = |start, label: &str| FaultWindow {
        start,
        end: healed,
        label: label.into(),
    };
    let faults = vec![
        window(kill, "master 0 killed"),
        window(kill, "master 1 killed"),
        window(kill_more, "master 2 killed: no majority"),
    ];
    let marker = |at, label: &str| Marker {
        at,
        label: label.into(),
    };
    let notes = Annotations {
        restores: vec![marker(healed, "masters 0, 1, 2 restored")],
        transitions: vec![
            marker(kill, "masters 0, 1 killed"),
            marker(kill_more, "master 2 killed"),
            marker(healed, "masters restored"),
        ],
        refusals: Some(refusals),
    };
    (records, faults, notes, end)
}

#[test]
fn the_demo_picture_has_client_lanes_a_legend_a_rate_panel_restores_and_zooms() {
    let (records, faults, notes, end) = demo_run(7);
    let svg = picture(&records, &faults, end, &demo_options(), &notes);
    well_formed(&svg);
    assert_eq!(
        svg.matches(r#"class="lane""#).count(),
        8 * 4,
        "8 client lanes, in 3 zooms too"
    );
    assert_eq!(
        svg.matches(r#"class="client""#).count(),
        8 * 2,
        "labelled in the overview and the first zoom"
    );
    let legend = &svg[svg.find(r#"<g class="legend">"#).expect("a legend")..];
    let legend = &legend[..legend.find("</g>").expect("closed")];
    for label in [
        "client 0",
        "client 7",
        "held past validity",
        "fault active (masters down)",
        "masters restored",
        "acquired / 100 ms",
        "refused: contention (lock held)",
        "refused: no majority",
        "p99 acquire latency",
    ] {
        assert!(legend.contains(label), "legend lacks {label:?}");
    }
    assert_eq!(svg.matches(r#"class="rate-panel""#).count(), 1);
    assert!(svg.matches(r#"class="rate-acquired""#).count() > 80);
    assert!(svg.matches(r#"class="rate-no-majority""#).count() >= 29);
    assert!(svg.matches(r#"class="rate-contention""#).count() > 50);
    assert!(svg.contains(r#"class="rate-p99""#));
    for name in ["acquired / 100 ms", "refused / 100 ms", "p99 acquire latency"] {
        assert!(svg.contains(&format!(">{name}</text>")), "panel {name:?}");
    }
    assert_eq!(svg.matches(r#"<line class="restore""#).count(), 1);
    assert!(svg.contains(">masters 0, 1, 2 restored</text>"));
    assert_eq!(svg.matches(r#"<g class="zoom">"#).count(), 3);
    assert!(svg.contains("masters 0, 1 killed (at 3.00s)"));
    assert!(svg.contains(">-50ms</text>") && svg.contains(">0</text>") && svg.contains(">+150ms</text>"));
    assert!(svg.contains(r#"class="zoom-refusal""#));
}

/// Renders `svg` to a PNG under `target/svg-pictures/` and returns its path and size.
fn render(svg: &str, name: &str) -> (std::path::PathBuf, u32, u32) {
    let mut opt = resvg::usvg::Options::default();
    opt.fontdb_mut().load_system_fonts();
    let tree = resvg::usvg::Tree::from_data(svg.as_bytes(), &opt).expect("resvg reads the SVG");
    let size = tree.size().to_int_size();
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height()).expect("a pixmap");
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut pixmap.as_mut(),
    );
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/svg-pictures");
    std::fs::create_dir_all(&dir).expect("picture dir");
    let path = dir.join(name);
    pixmap.save_png(&path).expect("write the PNG");
    (path, size.width(), size.height())
}

#[test]
fn the_demo_picture_renders_to_png() {
    let (records, faults, notes, end) = demo_run(7);
    let svg = picture(&records, &faults, end, &demo_options(), &notes);
    let (path, width, height) = render(&svg, "demo-seed-7.png");
    assert_eq!(width, 1370);
    assert!(height > 500, "{height}");
    let png = std::fs::read(&path).expect("read the PNG");
    assert_eq!(&png[1..4], b"PNG");
    let plain = timeline(&records, &faults, end, &SvgOptions::default());
    render(&plain, "timeline-seed-7.png");
}
