//! How the harness talks to a server while it operates on it: to a master through its published
//! loopback port (as an operator's `redis-cli` would), and to any container of the run with
//! `docker exec ... redis-cli`, which works even while the container is off every network (a
//! replica cut off from its master).

use std::time::Duration;

use super::super::clients::docker;
use super::super::Compose;
use crate::error::HarnessError;
use crate::server::connect;

/// How long one command to a master may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);

/// Sends `args` to master `i` through its published port and returns the reply.
///
/// # Errors
/// When the master cannot be reached or answers with an error.
pub(crate) async fn command<T: redis::FromRedisValue>(
    compose: &Compose,
    i: usize,
    args: &[&str],
) -> Result<T, HarnessError> {
    let url = compose.url(i);
    let mut conn = connect(&url, COMMAND_TIMEOUT)
        .await
        .map_err(|e| HarnessError::redis(format!("connecting to m{i} to run {}", args.join(" ")), e))?;
    let mut cmd = redis::cmd(args.first().copied().unwrap_or("PING"));
    for arg in args.iter().skip(1) {
        cmd.arg(*arg);
    }
    cmd.query_async(&mut conn)
        .await
        .map_err(|e| HarnessError::redis(format!("m{i}: {}", args.join(" ")), e))
}

/// Runs `redis-cli ARGS` inside `container` and returns its output, trimmed.
///
/// # Errors
/// When docker or redis-cli fails.
pub(crate) async fn cli(compose: &Compose, container: &str, args: &[&str]) -> Result<String, HarnessError> {
    docker(compose)
        .args(["exec", container, "redis-cli"])
        .args(args)
        .output()
        .await
        .map(|out| out.trim().to_string())
}

/// One `field:value` line of an `INFO` reply.
pub(crate) fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|line| line.trim().strip_prefix(field)?.strip_prefix(':'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_fields_are_read_by_exact_name() {
        let info = "# Replication\r\nrole:slave\r\nmaster_link_status:up\r\nslave_repl_offset:50\r\n";
        assert_eq!(info_field(info, "role"), Some("slave"));
        assert_eq!(info_field(info, "master_link_status"), Some("up"));
        assert_eq!(info_field(info, "slave_repl_offset"), Some("50"));
        assert_eq!(info_field(info, "master"), None);
        assert_eq!(info_field(info, "offset"), None);
    }
}
