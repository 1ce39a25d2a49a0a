//! Ctrl-C and SIGTERM as a future: commands that own containers or processes race their work
//! against it, so that a signal drops the work (and with it the guards that remove what it
//! started) instead of killing the program with everything still running.

use std::process::ExitCode;

use tokio::signal::unix::{signal, Signal, SignalKind};

/// Exit code after Ctrl-C (128 + SIGINT).
pub const INTERRUPTED: u8 = 130;
/// Exit code after SIGTERM (128 + 15).
pub const TERMINATED: u8 = 143;

/// SIGINT and SIGTERM, caught.
pub struct Signals {
    interrupt: Signal,
    terminate: Signal,
}

impl Signals {
    /// Catches both signals from now on.
    ///
    /// # Errors
    /// When the handlers cannot be installed.
    pub fn new() -> std::io::Result<Signals> {
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// Waits for either signal; the exit code it calls for.
    pub async fn recv(&mut self) -> ExitCode {
        tokio::select! {
            _ = self.interrupt.recv() => ExitCode::from(INTERRUPTED),
            _ = self.terminate.recv() => ExitCode::from(TERMINATED),
        }
    }
}
