//! The signals quorlock catches and forwards to the command: SIGINT (Ctrl-C), SIGTERM, SIGHUP.
//!
//! They are caught from the start, before the lock is taken, so that an interrupted wait or run
//! always gets the chance to release the lock instead of leaving it to expire with its TTL.

use std::io;

use nix::sys::signal::Signal;
use tokio::signal::unix::{signal, Signal as Stream, SignalKind};

/// The stop signals, caught for the life of the process.
#[derive(Debug)]
pub struct Signals {
    interrupt: Stream,
    terminate: Stream,
    hangup: Stream,
}

impl Signals {
    /// Starts catching SIGINT, SIGTERM and SIGHUP.
    ///
    /// # Errors
    /// When a handler cannot be installed.
    pub fn catch() -> io::Result<Self> {
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }

    /// Waits for the next caught signal.
    pub async fn recv(&mut self) -> Signal {
        // A stream yields `None` only once it can never deliver again; the others still listen.
        tokio::select! {
            Some(()) = self.interrupt.recv() => Signal::SIGINT,
            Some(()) = self.terminate.recv() => Signal::SIGTERM,
            Some(()) = self.hangup.recv() => Signal::SIGHUP,
            else => std::future::pending().await,
        }
    }
}
