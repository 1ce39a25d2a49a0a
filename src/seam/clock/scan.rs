//! Test-only: keeps every read of the time in `src/` on the client's [`Clock`](super::Clock).
//!
//! The deterministic simulation gives each client a clock of its own and stops its timers while it
//! is paused; one read of tokio's clock (or a tokio timer) anywhere in the client would quietly
//! measure that code on another clock. This scan reads the crate's sources and fails on any text
//! that reads a clock or sets a timer, outside the files whose job that is and outside test code.

use std::path::{Path, PathBuf};

/// Text that reads a clock or sets a timer without the client's `Clock`. Besides these, any path
/// under `tokio::time::` other than the `Instant` type is refused.
const FORBIDDEN: [&str; 10] = [
    "Instant::now",
    "Instant::elapsed",
    ".elapsed()",
    "SystemTime::now",
    "std::time::Instant",
    "thread::sleep",
    "wait_timeout",
    "recv_timeout",
    "use tokio::time;",
    "use tokio::time as",
];

/// Files, relative to `src/`, whose job is a clock: the client's clock and this scan; the seam (the
/// environment's default clock); the redis-rs master (its timeouts bound real sockets, as any
/// master implementation's do); metrics (durations reported to dashboards, never a decision); the
/// property-test models of the kinds and of master knowledge (compiled for tests only).
const EXEMPT: [&str; 9] = [
    "seam/clock/mod.rs",
    "seam/clock/scan.rs",
    "seam/mod.rs",
    "seam/redis_rs.rs",
    "base/metrics.rs",
    "core/fencing/model.rs",
    "core/master/model.rs",
    "core/rwlock/model.rs",
    "core/semaphore/model.rs",
];

/// One use allowed in one file: the wall clock of a fair ticket, when no environment supplies one.
const ALLOWED: [(&str, &str); 1] = [("seam/token.rs", "SystemTime::now")];

/// Whether `line` names something under `tokio::time::` other than the `Instant` type.
fn tokio_time_other_than_instant(line: &str) -> bool {
    line.match_indices("tokio::time::").any(|(at, path)| {
        let rest = &line[at + path.len()..];
        // `Instant` itself, not a longer name that starts with it.
        let after = rest.strip_prefix("Instant");
        after.is_none_or(|after| after.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
    })
}

/// The lines of `source` that are not test code: an item under `#[cfg(test)]` (a module, a
/// function, a `mod x;` declaration) is left out, up to its closing brace or semicolon.
fn code_lines(source: &str) -> Vec<(usize, &str)> {
    let mut lines = Vec::new();
    let mut skipping = false;
    let mut depth = 0i64;
    let mut opened = false;
    for (i, line) in source.lines().enumerate() {
        let trimmed = line.trim_start();
        if !skipping && trimmed.starts_with("#[cfg(test)]") {
            (skipping, depth, opened) = (true, 0, false);
            continue;
        }
        if !skipping {
            lines.push((i + 1, line));
            continue;
        }
        if trimmed.starts_with("#[") || trimmed.starts_with("//") || trimmed.is_empty() {
            continue;
        }
        let opens = i64::try_from(line.matches('{').count()).unwrap_or(0);
        let closes = i64::try_from(line.matches('}').count()).unwrap_or(0);
        depth += opens - closes;
        opened |= opens > 0;
        if (opened && depth <= 0) || (!opened && trimmed.ends_with(';')) {
            skipping = false;
        }
    }
    lines
}

/// The forbidden uses in `source` (the file `name`, relative to `src/`), as `line: text`.
fn stray_reads(name: &str, source: &str) -> Vec<String> {
    code_lines(source)
        .into_iter()
        .filter(|(_, line)| !line.trim_start().starts_with("//"))
        .filter(|(_, line)| {
            let forbidden = FORBIDDEN
                .iter()
                .filter(|text| line.contains(*text))
                .any(|text| !ALLOWED.contains(&(name, text)));
            forbidden || tokio_time_other_than_instant(line)
        })
        .map(|(n, line)| format!("{n}: {}", line.trim()))
        .collect()
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {dir:?}: {e}"));
    for entry in entries {
        let path = entry
            .unwrap_or_else(|e| panic!("cannot list {dir:?}: {e}"))
            .path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_scan_finds_each_kind_of_stray_read() {
    let strays = [
        "let t = tokio::time::Instant::now();",
        "let t = std::time::Instant::now();",
        "let waited = started.elapsed();",
        ".unwrap_or_else(Instant::now)",
        ".map(Instant::elapsed)",
        "tokio::time::sleep(d).await;",
        "let _ = tokio::time::timeout_at(t, f).await;",
        "let mut every = tokio::time::interval(d);",
        "use tokio::time::{sleep, Instant};",
        "use tokio::time;",
        "use tokio::time as t;",
        "std::thread::sleep(d);",
        "let at = SystemTime::now();",
        "let (guard, _) = condvar.wait_timeout(guard, d);",
    ];
    for stray in strays {
        let source = format!("fn f() {{\n    {stray}\n}}\n");
        assert_eq!(
            stray_reads("x.rs", &source),
            vec![format!("2: {stray}")],
            "{stray}"
        );
    }
}

#[test]
fn the_scan_skips_comments_test_items_and_the_instant_type() {
    let fine = "use tokio::time::Instant;\n\
                // Instant::now() in a comment\n\
                fn valid_until(&self) -> tokio::time::Instant { self.at }\n\
                #[cfg(test)]\n\
                mod model;\n\
                #[cfg(test)]\n\
                fn len(&self) -> usize {\n    let _ = started.elapsed();\n    0\n}\n\
                #[cfg(test)]\n\
                mod tests {\n    fn g() {\n        tokio::time::sleep(d);\n    }\n}\n";
    assert!(
        stray_reads("x.rs", fine).is_empty(),
        "{:?}",
        stray_reads("x.rs", fine)
    );
    // Code after a test-only item is scanned again.
    let after = "#[cfg(test)]\nfn len() -> usize { 0 }\nfn f() {\n    let t = Instant::now();\n}\n";
    assert_eq!(stray_reads("x.rs", after), vec!["4: let t = Instant::now();"]);
    // An allowed use is allowed in its own file only.
    let wall = "fn wall() { let _ = SystemTime::now(); }\n";
    assert!(stray_reads("seam/token.rs", wall).is_empty());
    assert_eq!(stray_reads("mechanisms/lease.rs", wall).len(), 1);
}

/// Every read of the time and every timer of the client goes through [`Clock`](super::Clock), so
/// an environment's clock (the simulation's, per client) is never bypassed.
#[test]
fn no_code_outside_the_clock_reads_a_clock() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    assert!(
        files.len() > 20,
        "the crate's sources were not found under {root:?}"
    );
    let mut strays = Vec::new();
    for file in files {
        let name = file
            .strip_prefix(&root)
            .unwrap_or(&file)
            .to_string_lossy()
            .replace('\\', "/");
        if EXEMPT.contains(&name.as_str()) {
            continue;
        }
        let source = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("cannot read {file:?}: {e}"));
        strays.extend(
            stray_reads(&name, &source)
                .into_iter()
                .map(|s| format!("{name}:{s}")),
        );
    }
    assert!(strays.is_empty(), "read the time through `Clock`: {strays:#?}");
}
