//! What every example shares: the masters to use, from `QUORLOCK_NODES`, so that each example runs
//! against your own masters as well as against `docker compose up`.

use std::time::Duration;

use quorlock::Quorlock;

/// The five masters `docker compose up` starts (see docker-compose.yml).
const COMPOSE_NODES: &str =
    "redis://127.0.0.1:7001,redis://127.0.0.1:7002,redis://127.0.0.1:7003,redis://127.0.0.1:7004,redis://127.0.0.1:7005";

/// The masters' URLs: `QUORLOCK_NODES` (comma-separated), else those of `docker compose up`.
pub fn nodes() -> Vec<String> {
    let list = match std::env::var("QUORLOCK_NODES") {
        Ok(list) if !list.trim().is_empty() => list,
        _ => {
            eprintln!(
                "QUORLOCK_NODES is not set: using the masters of `docker compose up` ({COMPOSE_NODES}).\n\
                 Set it to your own, e.g. QUORLOCK_NODES=redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379"
            );
            COMPOSE_NODES.to_owned()
        }
    };
    list.split(',')
        .map(str::trim)
        .filter(|url| !url.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A client for [`nodes`], waiting at most a few seconds for any lock.
pub async fn connect() -> Result<Quorlock, quorlock::BuildError> {
    let nodes = nodes();
    println!("{} masters: {}", nodes.len(), nodes.join(", "));
    Quorlock::builder()
        .nodes(nodes)
        .wait(Duration::from_secs(5))
        .build()
        .await
}
