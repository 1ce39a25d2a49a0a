//! The paths one chaos run had before it was split into layers, kept so that code written
//! against them still builds: [`run`] and its progress are in [`drive`](crate::drive), the
//! options and report in [`run`](crate::run), the judgement in [`verdict`](crate::verdict),
//! and the renderings in [`report`](crate::report). New code names those modules.

pub use crate::drive::{run, run_with_progress, Progress, PROGRESS_INTERVAL};
pub use crate::run::{BackendChoice, RunOptions, RunReport, Verdict};
pub use crate::verdict::judge;
