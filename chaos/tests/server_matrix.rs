//! The server matrix cannot forget a test: every test file of the workspace (`tests/*.rs`,
//! `chaos/tests/*.rs`, `cli/tests/*.rs`) is listed exactly once in `chaos/server-matrix`, either
//! to run on every server or kept to Redis 7.0 with a reason, and every file listed exists.
//! `chaos/test` builds its Valkey passes from the same file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the chaos crate sits in the repository")
        .to_path_buf()
}

/// Each listed file with its entry: `valkey`, or `redis` and its reason.
fn entries() -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(repo().join("chaos/server-matrix")).expect("chaos/server-matrix");
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|line| {
            let mut words = line.split_whitespace();
            let kind = words.next().unwrap_or_default().to_owned();
            let file = words.next().unwrap_or_default().to_owned();
            let reason = words.collect::<Vec<_>>().join(" ");
            (kind, file, reason)
        })
        .collect()
}

/// Every test file of the workspace, as a path from the repository's root.
fn test_files() -> Vec<String> {
    let mut files = Vec::new();
    for dir in ["tests", "chaos/tests", "cli/tests"] {
        for entry in std::fs::read_dir(repo().join(dir)).expect(dir) {
            let path = entry.expect("a directory entry").path();
            if path.extension().is_some_and(|e| e == "rs") {
                let name = path.file_name().expect("a file name").to_string_lossy();
                files.push(format!("{dir}/{name}"));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn every_test_file_is_in_the_matrix_or_kept_to_redis_with_a_reason() {
    let mut listed: BTreeMap<String, usize> = BTreeMap::new();
    for (kind, file, reason) in entries() {
        assert!(
            kind == "valkey" || kind == "redis",
            "chaos/server-matrix: {file}: the entry must start with valkey or redis, not {kind:?}"
        );
        if kind == "redis" {
            assert!(
                reason.split_whitespace().count() >= 3,
                "chaos/server-matrix: {file} is kept to Redis without a reason"
            );
        } else {
            assert!(
                reason.is_empty(),
                "chaos/server-matrix: {file}: a valkey entry takes no reason"
            );
        }
        assert!(
            repo().join(&file).is_file(),
            "chaos/server-matrix lists {file}, which does not exist"
        );
        *listed.entry(file).or_default() += 1;
    }
    let twice: Vec<&String> = listed.iter().filter(|(_, n)| **n > 1).map(|(f, _)| f).collect();
    assert!(
        twice.is_empty(),
        "chaos/server-matrix lists these more than once: {twice:?}"
    );
    let missing: Vec<String> = test_files()
        .into_iter()
        .filter(|f| !listed.contains_key(f))
        .collect();
    assert!(
        missing.is_empty(),
        "these test files are in neither the Valkey matrix nor the Redis-only list of chaos/server-matrix: {missing:?}"
    );
}

#[test]
fn the_matrix_runs_only_tests_that_chaos_test_can_name() {
    // chaos/test turns `tests/X.rs` into the root crate's `--test X` and `chaos/tests/X.rs` into
    // the chaos crate's; it has no pass for the CLI's tests.
    for (kind, file, _) in entries() {
        if kind == "valkey" {
            assert!(
                file.starts_with("tests/") || file.starts_with("chaos/tests/"),
                "chaos/server-matrix: {file} cannot run in a Valkey pass"
            );
        }
    }
}
