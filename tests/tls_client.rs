//! Client certificates (mutual TLS): `rediss://` masters that require a certificate signed by
//! their CA (`tls-auth-clients yes`) take locks from a client built with
//! `tls_client_certificate`, and refuse one without it.
//!
//! Run with `cargo test --features tls --test tls_client`.

#[cfg(feature = "tls")]
mod tls_pki;

#[cfg(feature = "tls")]
mod with_tls {
    use std::time::Duration;

    use quorlock::{NodeErrorKind, Quorlock, QuorlockBuilder};

    use crate::tls_pki::{Pki, TlsMaster};

    fn builder(pki: &Pki, masters: &[TlsMaster]) -> QuorlockBuilder {
        Quorlock::builder()
            .nodes(masters.iter().map(TlsMaster::url))
            .node_timeout(Duration::from_millis(500))
            .connect_timeout(Duration::from_secs(5))
            .tls_root_certificates(pki.read("ca.crt"))
    }

    #[tokio::test]
    async fn masters_that_authenticate_clients_take_locks_only_with_a_certificate() {
        let pki = Pki::new();
        let masters: Vec<TlsMaster> = (0..3).map(|i| TlsMaster::start(&pki, i, true)).collect();

        let with_cert = builder(&pki, &masters)
            .tls_client_certificate(pki.read("client.crt"), pki.read("client.key"))
            .build()
            .await
            .expect("build");
        let shown = format!("{:?}", with_cert.config());
        assert!(!shown.contains("PRIVATE KEY"), "Debug shows the key: {shown}");
        let guard = with_cert
            .acquire("mtls", Duration::from_secs(5))
            .await
            .expect("acquire with a client certificate");
        assert!(guard.release().await.expect("release").held >= 2);

        let without = builder(&pki, &masters).build().await.expect("build");
        let err = without
            .try_acquire("mtls", Duration::from_secs(5))
            .await
            .expect_err("a master that authenticates clients must refuse one without a certificate");
        assert!(
            err.failures()
                .iter()
                .all(|f| matches!(f.kind, NodeErrorKind::Connection(_) | NodeErrorKind::Timeout)),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_key_that_is_not_pem_is_refused_at_build() {
        let pki = Pki::new();
        let master = TlsMaster::start(&pki, 0, true);
        let err = Quorlock::builder()
            .node(master.url())
            .tls_client_certificate(pki.read("client.crt"), b"not a key".to_vec())
            .build()
            .await
            .expect_err("refused");
        assert!(
            err.to_string().contains("private key"),
            "says what is wrong: {err}"
        );
        assert!(
            !err.to_string().contains("not a key"),
            "never echoes the key: {err}"
        );
    }
}
