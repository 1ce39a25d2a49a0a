//! Everything quorlock itself says on stderr, in one voice: `quorlock: ...` for errors,
//! `quorlock: warning: ...` for warnings (the library's among them, see `logging`), and the one
//! status line drawn in place while waiting for a lock (see `waiting`).
//!
//! The status line has no newline; any other line erases it first, so a warning never lands in the
//! middle of it. `-q` silences warnings, notes and the status line; errors always print.

use std::io::Write;
use std::sync::{Mutex, PoisonError};

/// What has been said so far.
#[derive(Debug)]
struct State {
    quiet: bool,
    status_shown: bool,
}

static STATE: Mutex<State> = Mutex::new(State {
    quiet: false,
    status_shown: false,
});

fn state() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Silences warnings, notes and the status line (`-q`).
pub fn set_quiet(quiet: bool) {
    state().quiet = quiet;
}

/// Whether `-q` was given.
pub fn quiet() -> bool {
    state().quiet
}

/// Prints `quorlock: MESSAGE`, always.
pub fn error(message: &str) {
    line(&mut state(), &format!("quorlock: {}", one_line(message)));
}

/// Prints `quorlock: warning: MESSAGE`, unless quiet.
pub fn warning(message: &str) {
    let mut state = state();
    if !state.quiet {
        line(&mut state, &format!("quorlock: warning: {}", one_line(message)));
    }
}

/// Prints `quorlock: LEVEL: MESSAGE` for the debug and trace output of `-v`.
pub fn verbose(level: &str, message: &str) {
    line(&mut state(), &format!("quorlock: {level}: {}", one_line(message)));
}

/// Prints `quorlock: MESSAGE` for information a person at a terminal wants, unless quiet.
pub fn note(message: &str) {
    let mut state = state();
    if !state.quiet {
        line(&mut state, &format!("quorlock: {}", one_line(message)));
    }
}

/// Draws the status line in place of the previous one, unless quiet.
pub fn status(text: &str) {
    let mut state = state();
    if state.quiet {
        return;
    }
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "\r\x1b[2K{text}");
    let _ = err.flush();
    state.status_shown = true;
}

/// Erases the status line, if one is shown.
pub fn clear_status() {
    clear(&mut state());
}

fn clear(state: &mut State) {
    if state.status_shown {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K");
        let _ = err.flush();
        state.status_shown = false;
    }
}

fn line(state: &mut State, text: &str) {
    clear(state);
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{text}");
}

/// A message on one line: a multi-line cause would break log scrapers and `2>` redirections.
fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_line() {
        assert_eq!(one_line("a\nb  c\r\n"), "a b c");
    }
}
