//! The live progress line: rewritten in place on a terminal, silent otherwise, so a piped demo
//! prints only its phase results and summary.

use std::io::{IsTerminal, Write};

/// Where the progress line goes (stdout).
#[derive(Debug)]
pub struct Progress {
    live: bool,
}

impl Progress {
    /// A progress line that is live only when stdout is a terminal.
    pub fn new() -> Self {
        Self {
            live: std::io::stdout().is_terminal(),
        }
    }

    /// Replaces the current line with `line` (on a terminal only).
    pub fn update(&self, line: &str) {
        if self.live {
            let mut out = std::io::stdout().lock();
            let _ = write!(out, "\r\x1b[2K{line}");
            let _ = out.flush();
        }
    }

    /// Replaces the current line with `line` for good and moves on.
    pub fn finish(&self, line: &str) {
        if self.live {
            print!("\r\x1b[2K");
        }
        println!("{line}");
    }
}
