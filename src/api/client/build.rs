//! Building a client: the settings checked once, one connection per master prepared and pinged
//! concurrently, and each master's identity and persistence read before the first lock.
//!
//! Unreachable masters are only warned about (a majority may come up later); rejected credentials,
//! a master listed twice, or one server under two names are errors, since they can never be right.

use std::sync::Arc;

use tracing::warn;

use super::{Inner, Quorlock};
use crate::base::error::{BuildError, NodeErrorKind};
use crate::base::names::Names;
use crate::core::round::same_server_twice;
use crate::mechanisms::background::Background;
use crate::mechanisms::coalesce::LocalQueue;
use crate::mechanisms::config::{QuorlockBuilder, Source};
use crate::mechanisms::health::{check_at_build, refresh_in_background, Health};
use crate::mechanisms::pubsub::Waits;
use crate::mechanisms::watchdog::Watchdog;
use crate::seam::link::{Link, Masters};
use crate::seam::redis_rs::Node;
use crate::seam::token::Entropy;
use crate::seam::Master;

impl Quorlock {
    /// Starts a builder with every setting at its documented default.
    pub fn builder() -> QuorlockBuilder {
        QuorlockBuilder::default()
    }
}

impl QuorlockBuilder {
    /// Checks every setting, prepares one connection per master and pings each once.
    ///
    /// # Errors
    /// [`BuildError`] naming the bad setting, an unparseable or duplicate URL, one server under two
    /// names ([`BuildError::SameServer`]), or a master that rejected the credentials. An
    /// unreachable master is only warned about.
    pub async fn build(self) -> Result<Quorlock, BuildError> {
        let config = Arc::new(self.config()?);
        let mut links: Vec<Link> = Vec::with_capacity(self.sources.len());
        for (index, source) in self.sources.iter().enumerate() {
            let master: Arc<dyn Master> = match source {
                Source::Url(url) => Arc::new(Node::open(
                    url,
                    config.connect_timeout,
                    config.tls_root_certificates.as_deref(),
                    config.tls_client_certificate.as_ref(),
                )?),
                Source::Custom(master) => Arc::clone(master),
            };
            if let Some(first) = links.iter().find(|l| l.addr() == master.addr()) {
                return Err(BuildError::DuplicateNode {
                    addr: master.addr().to_owned(),
                    first: first.index(),
                    second: index,
                });
            }
            links.push(Link::new(index, master, config.node_timeout));
        }
        if links.len().is_multiple_of(2) {
            warn!(
                masters = links.len(),
                "an even number of masters tolerates no more failures than one fewer; prefer an odd number"
            );
        }
        let connect_timeout = config.connect_timeout;
        let pings = links
            .iter()
            .map(|link| async move { (link, link.ping(connect_timeout).await) });
        for (link, result) in crate::mechanisms::fanout::all(pings).await {
            match result {
                Ok(()) => {}
                Err(NodeErrorKind::Auth(message)) => {
                    return Err(BuildError::Auth {
                        node: link.index(),
                        addr: link.addr().to_owned(),
                        message: message.to_string(),
                    });
                }
                Err(kind) => {
                    warn!(node = link.index(), addr = link.addr(), error = %kind, "master not usable at build (unreachable, or answering with errors); it counts as a no until it answers")
                }
            }
        }
        let masters = Arc::new(Masters::new(links));
        let health = Arc::new(Health::new(masters.len(), &config));
        let names = Names::new(&config.key_prefix);
        check_at_build(&health, &masters, &names).await;
        refresh_in_background(&health, &masters, &names);
        same_server(&masters, &health)?;
        let entropy = match &self.environment {
            Some(environment) => Entropy::Custom(Arc::clone(environment)),
            None => Entropy::Os,
        };
        let inner = Inner {
            waits: Waits::new(
                &masters,
                config.connect_timeout,
                config.clock.clone(),
                &entropy.id(),
            ),
            watchdog: Watchdog::new(&masters, &health, &names, Arc::clone(&config)),
            names,
            queue: LocalQueue::default(),
            background: Background::new(),
            entropy,
            masters,
            health,
            config,
        };
        Ok(Quorlock {
            inner: Arc::new(inner),
        })
    }
}

/// Refuses two URLs of one server: their addresses differ (a host name and an address, two
/// names), but the same `run_id` answered on both, and that server would vote twice. Masters that
/// did not answer at build cannot be compared.
fn same_server(masters: &Masters, health: &Health) -> Result<(), BuildError> {
    let ids: Vec<Option<String>> = masters.iter().map(|link| health.verified_run_id(link)).collect();
    match same_server_twice(&ids) {
        Some((first, second)) => Err(BuildError::SameServer {
            first,
            first_addr: masters.addr(first).to_owned(),
            second,
            second_addr: masters.addr(second).to_owned(),
            run_id: ids.get(second).cloned().flatten().unwrap_or_default(),
        }),
        None => Ok(()),
    }
}
