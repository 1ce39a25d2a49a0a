//! The client's one monotonic clock: every validity, deadline, renewal, backoff and wait reads
//! the time and sets its timers here, never on tokio directly.
//!
//! By default this is tokio's clock (so a paused tokio clock drives everything, at no cost over
//! calling tokio). An application that supplies an [`Environment`] supplies the clock too: the
//! deterministic simulation gives each client a clock of its own rate whose timers stop while the
//! client is paused, as a process stopped by GC or `SIGSTOP` would see it. Keeping every read of
//! the time behind this one type is what makes that substitution complete.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;

use crate::seam::{Environment, Timer};

/// The clock a client measures time on.
#[derive(Clone, Default)]
pub(crate) enum Clock {
    /// Tokio's clock.
    #[default]
    Tokio,
    /// The clock of an environment given by the application.
    Custom(Arc<dyn Environment>),
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Clock::Tokio => f.write_str("Clock::Tokio"),
            Clock::Custom(_) => f.write_str("Clock::Custom"),
        }
    }
}

/// A timeout ran out before the future it bounded completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Elapsed;

impl Clock {
    /// The clock of `environment`, or tokio's when there is none.
    pub(crate) fn of(environment: Option<&Arc<dyn Environment>>) -> Clock {
        environment.map_or(Clock::Tokio, |environment| Clock::Custom(Arc::clone(environment)))
    }

    /// Now, on this clock.
    pub(crate) fn now(&self) -> Instant {
        match self {
            Clock::Tokio => Instant::now(),
            Clock::Custom(environment) => environment.now(),
        }
    }

    /// A timer done once this clock reads `deadline`.
    pub(crate) fn sleep_until(&self, deadline: Instant) -> Sleep {
        match self {
            Clock::Tokio => Sleep::Tokio(Box::pin(tokio::time::sleep_until(deadline))),
            Clock::Custom(environment) => Sleep::Custom(environment.sleep_until(deadline)),
        }
    }

    /// A timer done once `delay` has passed on this clock.
    pub(crate) fn sleep(&self, delay: Duration) -> Sleep {
        self.sleep_until(self.deadline(delay))
    }

    /// `delay` from now, saturating far in the future instead of overflowing.
    pub(crate) fn deadline(&self, delay: Duration) -> Instant {
        let now = self.now();
        now.checked_add(delay)
            .unwrap_or_else(|| now + Duration::from_secs(86_400 * 365 * 30))
    }

    /// Runs `future` until it completes or this clock reads `deadline`, whichever comes first
    /// (the future is polled first, so one ready at the deadline still counts).
    pub(crate) async fn timeout_at<F: Future>(
        &self,
        deadline: Instant,
        future: F,
    ) -> Result<F::Output, Elapsed> {
        let timer = self.sleep_until(deadline);
        tokio::select! {
            biased;
            out = future => Ok(out),
            () = timer => Err(Elapsed),
        }
    }

    /// Runs `future` for at most `delay` on this clock.
    pub(crate) async fn timeout<F: Future>(&self, delay: Duration, future: F) -> Result<F::Output, Elapsed> {
        self.timeout_at(self.deadline(delay), future).await
    }
}

/// A timer of a [`Clock`], re-armable like tokio's.
pub(crate) enum Sleep {
    /// On tokio's clock.
    Tokio(Pin<Box<tokio::time::Sleep>>),
    /// On an environment's clock.
    Custom(Timer),
}

impl Sleep {
    /// Re-arms the timer for `deadline` on `clock`.
    pub(crate) fn reset(&mut self, clock: &Clock, deadline: Instant) {
        match self {
            Sleep::Tokio(sleep) => sleep.as_mut().reset(deadline),
            Sleep::Custom(_) => *self = clock.sleep_until(deadline),
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match self.get_mut() {
            Sleep::Tokio(sleep) => sleep.as_mut().poll(cx),
            Sleep::Custom(timer) => timer.as_mut().poll(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clock running twice as fast as tokio's, from `origin`.
    struct Double(Instant);

    impl Environment for Double {
        fn fill(&self, bytes: &mut [u8]) {
            bytes.fill(7);
        }
        fn wall_clock_ms(&self) -> u64 {
            0
        }
        fn now(&self) -> Instant {
            self.0 + Instant::now().duration_since(self.0) * 2
        }
        fn sleep_until(&self, deadline: Instant) -> Timer {
            let real = self.0 + deadline.saturating_duration_since(self.0) / 2;
            Box::pin(tokio::time::sleep_until(real))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_custom_clock_drives_reads_timers_and_timeouts() {
        let origin = Instant::now();
        let clock = Clock::of(Some(&(Arc::new(Double(origin)) as Arc<dyn Environment>)));
        clock.sleep(Duration::from_secs(10)).await;
        assert_eq!(Instant::now() - origin, Duration::from_secs(5));
        assert_eq!(clock.now() - origin, Duration::from_secs(10));
        let never = std::future::pending::<()>();
        assert_eq!(clock.timeout(Duration::from_secs(4), never).await, Err(Elapsed));
        assert_eq!(Instant::now() - origin, Duration::from_secs(7));
        assert_eq!(clock.timeout(Duration::from_secs(4), async { 3 }).await, Ok(3));
    }

    #[tokio::test(start_paused = true)]
    async fn tokio_clock_resets_in_place_and_saturates_far_deadlines() {
        let clock = Clock::Tokio;
        let origin = clock.now();
        let mut timer = clock.sleep(Duration::from_secs(100));
        timer.reset(&clock, origin + Duration::from_secs(1));
        timer.await;
        assert_eq!(clock.now() - origin, Duration::from_secs(1));
        assert!(clock.deadline(Duration::MAX) > clock.now());
    }

    /// Calls that read tokio's clock, or set a timer on it, behind the client's back.
    const FORBIDDEN: [&str; 6] = [
        "Instant::now()",
        "tokio::time::sleep",
        "tokio::time::timeout",
        ".elapsed()",
        "tokio::pin!(time",
        "std::time::Instant",
    ];

    /// Files allowed to use tokio's clock: this one; the seam (the environment's default clock);
    /// the redis-rs master (its timeouts bound real sockets, as any master implementation's
    /// do); metrics (durations reported to dashboards, never a decision); the kinds' property-test
    /// models (`model.rs`, compiled for tests only).
    const EXEMPT: [&str; 5] = ["clock.rs", "seam.rs", "node.rs", "metrics.rs", "model.rs"];

    /// The forbidden calls in `source` outside its tests, as `line: text`.
    fn stray_reads(source: &str) -> Vec<String> {
        source
            .lines()
            .take_while(|line| !line.trim_start().starts_with("#[cfg(test)]"))
            .enumerate()
            .filter(|(_, line)| !line.trim_start().starts_with("//"))
            .filter(|(_, line)| FORBIDDEN.iter().any(|call| line.contains(call)))
            .map(|(i, line)| format!("{}: {}", i + 1, line.trim()))
            .collect()
    }

    fn sources(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    #[test]
    fn the_check_finds_a_stray_read_and_ignores_comments_and_tests() {
        let bad = "fn f() {\n    let t = tokio::time::Instant::now();\n}\n";
        assert_eq!(stray_reads(bad), vec!["2: let t = tokio::time::Instant::now();"]);
        let fine =
            "// Instant::now() in a comment\n#[cfg(test)]\nmod tests { fn g() { started.elapsed(); } }\n";
        assert!(stray_reads(fine).is_empty());
    }

    /// Every read of the time and every timer of the client goes through [`Clock`], so an
    /// environment's clock (the simulation's, per client) is never bypassed.
    #[test]
    fn no_code_outside_this_file_reads_tokio_clock() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        sources(&root, &mut files);
        assert!(
            files.len() > 20,
            "the crate's sources were not found under {root:?}"
        );
        let mut strays = Vec::new();
        for file in files {
            let name = file.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if EXEMPT.contains(&name) {
                continue;
            }
            let source = std::fs::read_to_string(&file).unwrap_or_default();
            strays.extend(
                stray_reads(&source)
                    .into_iter()
                    .map(|s| format!("{}:{s}", file.display())),
            );
        }
        assert!(strays.is_empty(), "read the time through `Clock`: {strays:#?}");
    }
}
