//! TLS from the command line against TLS-only `redis-server` masters with a CA made for the run:
//! `--tls-ca` (and `QUORLOCK_TLS_CA`) for a private CA, and `--tls-cert` / `--tls-key` for masters
//! that authenticate clients.

use super::tls_pki::{Pki, TlsMaster};
use super::{bare, code, output, stderr};

fn nodes(masters: &[TlsMaster]) -> String {
    masters.iter().map(TlsMaster::url).collect::<Vec<_>>().join(",")
}

/// `quorlock run --nodes <tls masters> --node-timeout 1s -w 5s tls -- true`, plus `extra` options.
fn run(masters: &[TlsMaster], extra: &[&std::ffi::OsStr]) -> tokio::process::Command {
    let mut cmd = bare();
    cmd.args([
        "run",
        "--nodes",
        &nodes(masters),
        "--node-timeout",
        "1s",
        "-w",
        "2s",
    ])
    .args(extra)
    .args(["tls", "--", "true"]);
    cmd
}

#[tokio::test]
async fn a_private_ca_from_a_flag_or_the_environment() {
    let pki = Pki::new();
    let masters: Vec<TlsMaster> = (0..3).map(|i| TlsMaster::start(&pki, i, false)).collect();
    let ca = pki.path("ca.crt");
    let out = output(run(&masters, &["--tls-ca".as_ref(), ca.as_os_str()])).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = output({
        let mut cmd = run(&masters, &[]);
        cmd.env("QUORLOCK_TLS_CA", &ca);
        cmd
    })
    .await;
    assert_eq!(code(&out), 0, "QUORLOCK_TLS_CA: {}", stderr(&out));
    // The system trust store does not know the CA: no master answers.
    let out = output(run(&masters, &[])).await;
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    // A CA file that cannot be read is a configuration error naming it.
    let missing = pki.path("missing.crt");
    let out = output(run(&masters, &["--tls-ca".as_ref(), missing.as_os_str()])).await;
    assert_eq!(code(&out), 78, "{}", stderr(&out));
    assert!(stderr(&out).contains("missing.crt"), "{}", stderr(&out));
}

#[tokio::test]
async fn client_certificates_for_masters_that_authenticate_clients() {
    let pki = Pki::new();
    let masters: Vec<TlsMaster> = (0..3).map(|i| TlsMaster::start(&pki, i, true)).collect();
    let (ca, cert, key) = (pki.path("ca.crt"), pki.path("client.crt"), pki.path("client.key"));
    let with_cert = [
        "--tls-ca".as_ref(),
        ca.as_os_str(),
        "--tls-cert".as_ref(),
        cert.as_os_str(),
        "--tls-key".as_ref(),
        key.as_os_str(),
    ];
    let out = output(run(&masters, &with_cert)).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = output(run(&masters, &with_cert[..2])).await;
    assert_eq!(code(&out), 75, "refused without a certificate: {}", stderr(&out));
    let out = output({
        let mut cmd = run(&masters, &with_cert[..2]);
        cmd.env("QUORLOCK_TLS_CERT", &cert).env("QUORLOCK_TLS_KEY", &key);
        cmd
    })
    .await;
    assert_eq!(code(&out), 0, "from the environment: {}", stderr(&out));
    let out = output(run(&masters, &with_cert[..4])).await;
    assert_eq!(code(&out), 64, "a certificate without its key: {}", stderr(&out));
}
