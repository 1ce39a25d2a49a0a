//! `quorlock demo`: hands over to the demo, which lives in the `quorlock-chaos` binary.
//!
//! The demo starts and breaks local masters with the chaos harness, and the harness itself
//! depends on this crate, so the demo cannot be compiled into this binary without a dependency
//! cycle. When `quorlock-chaos` was built next to this binary (a workspace build), `quorlock demo`
//! runs it; otherwise it says how to run the demo from a source checkout. Its options are declared
//! here too, so `quorlock demo --help` is quorlock's own.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use crate::args::DemoArgs;
use crate::exit::{Failure, UNAVAILABLE, USAGE};

/// The shortest phase the demo takes.
const MIN_PHASE: std::time::Duration = std::time::Duration::from_millis(500);

/// The binary that carries the demo.
const DEMO_BINARY: &str = "quorlock-chaos";

/// Replaces this process with `quorlock-chaos demo ARGS...`.
///
/// # Errors
/// [`USAGE`] for a phase under 500ms; [`UNAVAILABLE`] when the demo binary is not next to this
/// one, or cannot be executed.
pub fn demo(args: DemoArgs) -> Failure {
    if args.phase < MIN_PHASE {
        return Failure::new(
            USAGE,
            format!(
                "--phase {} must be at least 500ms",
                crate::duration::show(args.phase)
            ),
        );
    }
    let Some(binary) = sibling() else {
        return Failure::new(
            UNAVAILABLE,
            format!(
                "the demo ships as the {DEMO_BINARY} binary of the source repository: run chaos/demo in a checkout (it installs redis-server when missing), or cargo run --release -p quorlock-chaos -- demo"
            ),
        );
    };
    let err = Command::new(&binary)
        .arg("demo")
        .arg("--svg")
        .arg(&args.svg)
        .arg("--phase")
        .arg(format!("{}ms", args.phase.as_millis()))
        .arg("--workers")
        .arg(args.workers.to_string())
        .exec();
    Failure::new(UNAVAILABLE, format!("cannot run {}: {err}", binary.display()))
}

/// `quorlock-chaos` in the directory of the running binary, if it is there.
fn sibling() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let candidate = exe.parent()?.join(DEMO_BINARY);
    candidate.is_file().then_some(candidate)
}
