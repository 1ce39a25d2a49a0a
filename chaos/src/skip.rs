//! Skipping a test honestly. A test that cannot run here (no Docker engine, a server or
//! libfaketime not installed) says so through [`skip`], which either fails it, when the run
//! requires what is missing (`chaos/test` installs every server and, where Docker runs,
//! requires the engine), or records the skip where the run can show it: libtest hides what a
//! passing test prints, so each skip is also appended to the file `QUORLOCK_SKIP_LOG` names,
//! which `chaos/test` prints at its end. A test never returns early in silence.

use std::io::Write as _;

/// Set to `1` when every server (redis-server, both Valkey builds, libfaketime) must be
/// installed, so that a test that would skip for want of one fails instead. `CI=true` means
/// the same.
pub const REQUIRE_SERVERS_ENV: &str = "QUORLOCK_REQUIRE_SERVERS";

/// Set to `1` when the Docker engine with Compose v2 must work.
pub const REQUIRE_DOCKER_ENV: &str = "QUORLOCK_REQUIRE_DOCKER";

/// A file each skip is appended to, one line each.
pub const SKIP_LOG_ENV: &str = "QUORLOCK_SKIP_LOG";

/// What a skipped test needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// A server binary or libfaketime, which `chaos/ensure-servers` installs.
    Servers,
    /// The Docker engine with Compose v2.
    Docker,
}

impl Need {
    /// `true` if this run requires it, so that a skip must fail instead.
    pub fn required(self) -> bool {
        let set = |name: &str| std::env::var(name).is_ok_and(|v| v == "1");
        match self {
            Need::Servers => set(REQUIRE_SERVERS_ENV) || std::env::var("CI").is_ok_and(|v| v == "true"),
            Need::Docker => set(REQUIRE_DOCKER_ENV),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Need::Servers => "servers",
            Need::Docker => "docker",
        }
    }
}

/// Skips the calling test (or the part of it named by `what`) because `why`: panics when the run
/// requires `need`, else prints one line and appends it to the skip log.
///
/// # Panics
/// When `need` is required here: a skip would hide that the test did not run.
pub fn skip(need: Need, what: &str, why: &str) {
    let test = std::thread::current().name().unwrap_or("a test").to_owned();
    let line = format!("SKIPPED {test}: {what}: {why}");
    if need.required() {
        let env = match need {
            Need::Servers => REQUIRE_SERVERS_ENV,
            Need::Docker => REQUIRE_DOCKER_ENV,
        };
        panic!(
            "{line}; this run requires {} ({env}=1), so it cannot skip",
            need.name()
        );
    }
    eprintln!("{line}");
    if let Some(path) = std::env::var_os(SKIP_LOG_ENV) {
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| writeln!(f, "{line}"));
        if let Err(e) = appended {
            eprintln!("(could not record the skip in {}: {e})", path.to_string_lossy());
        }
    }
}
