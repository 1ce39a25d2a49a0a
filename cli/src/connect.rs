//! From the command line to a connected client: which masters, how to reach them, and how
//! patiently to wait.
//!
//! Masters come from `--nodes` or `--nodes-file` (or their variables, see `cmdline` for which
//! wins), with the password from the environment added where a URL has none (see `secrets`).
//! `--tls-ca`, `--tls-cert` and `--tls-key` are read here, and a file that cannot be read is a
//! configuration error naming it. `--wait` is the only bound on how long an acquire keeps trying:
//! the attempt count is lifted so a long wait is honoured. Every command settles its client before
//! it returns (`Masters::with_client`).

use std::future::Future;
use std::time::Duration;

use quorlock::{AcquireError, Guard, Quorlock, QuorlockBuilder};

use crate::args::{Hold, MasterArgs, NODES_ENV, NODES_FILE_ENV};
use crate::exit::{Failure, CONFIG};
use crate::secrets;

/// What every command needs to reach the masters.
#[derive(Debug, Clone)]
pub struct Masters {
    /// The options given.
    pub args: MasterArgs,
    /// `--restart-grace`, for the commands that take a lock.
    pub restart_grace: Option<Duration>,
    /// `--lock-delay`, for the commands that take a lock.
    pub lock_delay: Option<Duration>,
}

impl Masters {
    /// The master URLs, in order, with the environment's password where a URL has none.
    ///
    /// # Errors
    /// A [`CONFIG`] failure when no master is given, or the nodes file cannot be read.
    pub fn urls(&self) -> Result<Vec<String>, Failure> {
        let urls: Vec<String> = match (&self.args.nodes, &self.args.nodes_file) {
            (_, Some(file)) => secrets::nodes_file(file)?,
            (nodes, None) => nodes
                .as_deref()
                .unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|url| !url.is_empty())
                .map(str::to_owned)
                .collect(),
        };
        if urls.is_empty() {
            let origin = match &self.args.nodes_file {
                Some(file) => format!("{} lists none", file.display()),
                None => "none given".to_owned(),
            };
            return Err(Failure::new(
                CONFIG,
                format!(
                    "no Redis masters ({origin}): pass --nodes redis://host:port,... or --nodes-file FILE, or set {NODES_ENV} or {NODES_FILE_ENV} (an odd number, e.g. 3 or 5)"
                ),
            ));
        }
        Ok(match secrets::password() {
            Some(password) => urls
                .iter()
                .map(|url| secrets::with_password(url, &password))
                .collect(),
            None => urls,
        })
    }

    /// Connects to the masters; `wait` bounds how long an acquire keeps trying.
    ///
    /// # Errors
    /// A [`CONFIG`] failure for missing masters, an unreadable file, a bad URL or rejected
    /// credentials.
    pub async fn connect(&self, wait: Duration) -> Result<Quorlock, Failure> {
        let mut builder = Quorlock::builder()
            .nodes(self.urls()?)
            .wait(wait)
            .max_attempts(u32::MAX);
        if let Some(timeout) = self.args.node_timeout {
            builder = builder.node_timeout(timeout);
        }
        if let Some(grace) = self.restart_grace {
            builder = builder.restart_grace(grace);
        }
        if let Some(delay) = self.lock_delay {
            builder = builder.lock_delay(delay);
        }
        if let Some(prefix) = &self.args.key_prefix {
            builder = builder.key_prefix(prefix.clone());
        }
        Ok(self.tls(builder)?.build().await?)
    }

    /// The builder with the TLS files given.
    #[cfg(feature = "tls")]
    fn tls(&self, mut builder: QuorlockBuilder) -> Result<QuorlockBuilder, Failure> {
        if let Some(ca) = &self.args.tls_ca {
            builder = builder.tls_root_certificates(read("--tls-ca", ca)?);
        }
        if let (Some(cert), Some(key)) = (&self.args.tls_cert, &self.args.tls_key) {
            builder = builder.tls_client_certificate(read("--tls-cert", cert)?, read("--tls-key", key)?);
        }
        Ok(builder)
    }

    /// Without TLS support, any TLS file is a configuration error.
    #[cfg(not(feature = "tls"))]
    fn tls(&self, builder: QuorlockBuilder) -> Result<QuorlockBuilder, Failure> {
        let a = &self.args;
        if a.tls_ca.is_some() || a.tls_cert.is_some() || a.tls_key.is_some() {
            return Err(Failure::new(
                CONFIG,
                "this quorlock was built without TLS (the quorlock-cli `tls` feature); --tls-ca, --tls-cert and --tls-key need it",
            ));
        }
        Ok(builder)
    }

    /// Connects, runs `work` with the client, then waits for the lock traffic it left to tasks
    /// (the slower masters' share of an acquire or a release, the release of a failed or abandoned
    /// round: see [`Quorlock::settle`]) whatever the outcome, so the process exits with none of it
    /// cut off.
    ///
    /// # Errors
    /// As [`Masters::connect`], or `work`'s failure.
    pub async fn with_client<T, F, Fut>(&self, wait: Duration, work: F) -> Result<T, Failure>
    where
        F: FnOnce(Quorlock) -> Fut,
        Fut: Future<Output = Result<T, Failure>>,
    {
        let locks = self.connect(wait).await?;
        let outcome = work(locks.clone()).await;
        locks.settle().await;
        outcome
    }
}

/// The contents of the file given to `option`.
#[cfg(feature = "tls")]
fn read(option: &str, path: &std::path::Path) -> Result<Vec<u8>, Failure> {
    std::fs::read(path)
        .map_err(|e| Failure::new(CONFIG, format!("cannot read {option} {}: {e}", path.display())))
}

/// Acquires `resource`, fenced when `fence` is set.
///
/// # Errors
/// As [`Quorlock::acquire`].
pub async fn take(
    locks: &Quorlock,
    resource: &str,
    ttl: Duration,
    fence: bool,
) -> Result<Guard, AcquireError> {
    if fence {
        locks.lock(resource, ttl).fenced().acquire().await
    } else {
        locks.acquire(resource, ttl).await
    }
}

/// Takes `hold` on `resource` for `ttl`, waiting as the client is configured to.
///
/// # Errors
/// As [`quorlock::Lock::acquire`].
pub async fn take_hold(
    locks: &Quorlock,
    resource: &str,
    ttl: Duration,
    hold: Hold,
) -> Result<Guard, AcquireError> {
    match hold {
        Hold::Permit(permits) => locks.acquire_permit(resource, permits, ttl).await,
        Hold::Shared => locks.acquire_read(resource, ttl).await,
        Hold::Exclusive { fence: false } => locks.acquire_write(resource, ttl).await,
        Hold::Exclusive { fence: true } => locks.write(resource, ttl).fenced().acquire().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masters(nodes: Option<&str>) -> Masters {
        Masters {
            args: MasterArgs {
                nodes: nodes.map(str::to_owned),
                ..MasterArgs::default()
            },
            restart_grace: None,
            lock_delay: None,
        }
    }

    #[test]
    fn urls_are_split_on_commas_and_trimmed() {
        if secrets::password().is_some() {
            return; // the environment would add a password
        }
        assert_eq!(
            masters(Some("redis://a:1, redis://b:2,,")).urls(),
            Ok(vec!["redis://a:1".to_owned(), "redis://b:2".to_owned()])
        );
    }

    #[test]
    fn no_masters_is_a_config_error_saying_how_to_give_them() {
        for nodes in [None, Some(""), Some(" , ")] {
            let err = masters(nodes).urls().expect_err("no masters");
            assert_eq!(err.code, CONFIG);
            assert!(err.message.contains("--nodes") && err.message.contains(NODES_ENV));
        }
    }
}
