//! What a master can do natively, decided from the server it says it is.
//!
//! Valkey 8.1 added `SET key value IFEQ expected`, a compare-and-set, and Valkey 9.0 added
//! `DELIFEQ key value`, a compare-and-delete. Each does in one native command what quorlock's
//! extend and release scripts do in Lua, at a fraction of the master's CPU. Redis 8.4 has the same
//! pair (`SET ... IFEQ`, `DELEX key IFEQ value`), but no Redis 8.4 server is tested here, so Redis
//! keeps the scripts until one is. A master whose server or version cannot be read gets the
//! scripts: they work on every server.

/// The native commands a master offers for a plain lock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// `DELIFEQ key token`: release without a script.
    pub delifeq: bool,
    /// `SET key token IFEQ token PX ttl`: extend without a script.
    pub set_ifeq: bool,
}

/// A server as `INFO` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Server {
    /// `server_name:valkey`, with its `valkey_version`.
    Valkey(Version),
    /// No `server_name` (Redis), with its `redis_version`.
    Redis(Version),
    /// Neither could be read.
    Unknown,
}

/// A `major.minor.patch` version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u32, pub u32, pub u32);

impl Version {
    /// Reads `9.1.2` (missing parts are 0); `None` when the major part is not a number.
    pub fn parse(text: &str) -> Option<Self> {
        let mut parts = text.trim().split('.').map(|p| p.parse::<u32>().ok());
        let major = parts.next().flatten()?;
        let minor = parts.next().flatten().unwrap_or(0);
        let patch = parts.next().flatten().unwrap_or(0);
        Some(Self(major, minor, patch))
    }
}

impl Server {
    /// The server from `INFO`'s `server_name`, `valkey_version` and `redis_version` fields.
    pub fn from_info(
        server_name: Option<&str>,
        valkey_version: Option<&str>,
        redis_version: Option<&str>,
    ) -> Self {
        if server_name.is_some_and(|n| n.trim().eq_ignore_ascii_case("valkey")) {
            return valkey_version
                .and_then(Version::parse)
                .map_or(Server::Unknown, Server::Valkey);
        }
        redis_version
            .and_then(Version::parse)
            .map_or(Server::Unknown, Server::Redis)
    }

    /// What this server offers natively.
    pub fn capabilities(&self) -> Capabilities {
        match self {
            Server::Valkey(version) => Capabilities {
                delifeq: *version >= Version(9, 0, 0),
                set_ifeq: *version >= Version(8, 1, 0),
            },
            // Redis 8.4's `DELEX ... IFEQ` and `SET ... IFEQ` are not used until a test runs them.
            Server::Redis(_) | Server::Unknown => Capabilities::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn each_server_gets_what_its_version_has() {
        let valkey = |v| Server::from_info(Some("valkey"), Some(v), Some("7.2.4")).capabilities();
        assert_eq!(
            valkey("9.1.2"),
            Capabilities {
                delifeq: true,
                set_ifeq: true
            }
        );
        assert_eq!(
            valkey("9.0.0"),
            Capabilities {
                delifeq: true,
                set_ifeq: true
            }
        );
        assert_eq!(
            valkey("8.1.8"),
            Capabilities {
                delifeq: false,
                set_ifeq: true
            }
        );
        assert_eq!(valkey("8.0.2"), Capabilities::default());
        // Valkey reports redis_version 7.2.4 for compatibility: the server name decides.
        assert_eq!(
            Server::from_info(Some("valkey"), Some("9.1.2"), Some("7.2.4")),
            Server::Valkey(Version(9, 1, 2))
        );
        assert_eq!(
            Server::from_info(None, None, Some("7.0.15")).capabilities(),
            Capabilities::default()
        );
        assert_eq!(
            Server::from_info(None, None, Some("8.4.0")).capabilities(),
            Capabilities::default()
        );
        assert_eq!(
            Server::from_info(Some("valkey"), Some("garbage"), None),
            Server::Unknown
        );
        assert_eq!(
            Server::from_info(None, None, None).capabilities(),
            Capabilities::default()
        );
    }

    proptest! {
        /// A native command is only ever chosen for a Valkey new enough to have it.
        #[test]
        fn native_commands_only_where_the_server_has_them(
            name in prop::option::of(prop_oneof![Just("valkey"), Just("redis"), Just("VALKEY")]),
            major in 0u32..12, minor in 0u32..5, patch in 0u32..9,
        ) {
            let version = format!("{major}.{minor}.{patch}");
            let server = Server::from_info(name, Some(&version), Some(&version));
            let caps = server.capabilities();
            let valkey = name.is_some_and(|n| n.eq_ignore_ascii_case("valkey"));
            prop_assert_eq!(caps.delifeq, valkey && major >= 9);
            prop_assert_eq!(caps.set_ifeq, valkey && (major > 8 || (major == 8 && minor >= 1)));
        }
    }
}
