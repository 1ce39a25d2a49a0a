//! `quorlock-chaos herd`: the hand-off on one hot key in the simulation, for each number of waiting
//! processes asked for, plain and fair: the masters' commands per hand-off and its latency, as one
//! table (the one BENCHMARKS.md reports).

use std::process::ExitCode;

use clap::Args;
use quorlock_chaos::sim::herd::{run_herd, HerdConfig};

/// Arguments of `herd`.
#[derive(Debug, Args)]
pub struct HerdArgs {
    /// The numbers of waiting processes, e.g. 1,16,256.
    #[arg(long, value_delimiter = ',', default_value = "1,16,256")]
    waiters: Vec<usize>,
    /// The seed (the same seed gives the same table).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Each client's max_attempts (default: the library's, 100, under which waiters of a long
    /// herd give up before their wait ends).
    #[arg(long)]
    max_attempts: Option<u32>,
    /// The control: clients without the hand-off queue, so every release wakes every waiting
    /// process (the herd as it was before the queue).
    #[arg(long)]
    without_queue: bool,
    /// Real processes instead of the simulation: this `quorlock` CLI binary, run W times at once
    /// against five fresh local masters (plain locks only).
    #[arg(long, value_name = "CLI")]
    pub real: Option<std::path::PathBuf>,
}

impl HerdArgs {
    /// The numbers of waiting processes asked for.
    pub fn waiters(&self) -> &[usize] {
        &self.waiters
    }
}

/// Prints the table; exit 0, or 1 when two holds overlapped or a waiter was never served.
pub fn run(args: HerdArgs) -> ExitCode {
    println!("| kind | waiting processes W | SET/EVAL/EVALSHA per hand-off | PUBLISH per hand-off | hand-off p50 (ms) | hand-off max (ms) |");
    println!("|---|---|---|---|---|---|");
    let mut ok = true;
    for fair in [false, true] {
        for &waiters in &args.waiters {
            let config = HerdConfig {
                waiters,
                fair,
                seed: args.seed,
                max_attempts: args.max_attempts,
                without_queue: args.without_queue,
            };
            match run_herd(config) {
                Ok(out) => {
                    ok &= out.overlaps == 0 && out.acquisitions == waiters;
                    println!(
                        "| {} | {waiters} | {:.1} | {:.2} | {:.0} | {:.0} |",
                        if fair { "fair" } else { "plain" },
                        out.acquire_side_per_handoff,
                        out.published_per_handoff,
                        out.handoff_p50_ms,
                        out.handoff_max_ms,
                    );
                    if out.overlaps > 0 || out.acquisitions != waiters {
                        eprintln!(
                            "herd W={waiters}: {} of {waiters} served, {} overlapping holds; {} gave up, first: {}",
                            out.acquisitions,
                            out.overlaps,
                            out.gave_up.0,
                            out.gave_up.1.as_deref().unwrap_or("-")
                        );
                    }
                }
                Err(e) => {
                    eprintln!("herd W={waiters}: {e}");
                    return ExitCode::from(crate::HARNESS_FAILED);
                }
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::CHECKS_FAILED)
    }
}
