//! TLS masters (`rediss://`): real `redis-server` processes listening with TLS only, on a
//! certificate signed by a throwaway CA made for the test (with the `openssl` command).
//!
//! Run with `cargo test --features tls --test tls`. Without the feature, the test checks that a
//! `rediss://` URL is refused with a message naming the feature.

#[cfg(not(feature = "tls"))]
#[tokio::test]
async fn rediss_urls_need_the_tls_feature() {
    let err = quorlock::Quorlock::builder()
        .node("rediss://127.0.0.1:6380")
        .build()
        .await
        .expect_err("refused");
    assert!(err.to_string().contains("`tls` cargo feature"), "{err}");
}

#[cfg(feature = "tls")]
mod with_tls {
    use std::net::TcpListener;
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, Stdio};
    use std::time::Duration;

    use quorlock::{NodeErrorKind, Quorlock};

    /// A throwaway CA and a server certificate for 127.0.0.1 signed by it.
    struct Pki {
        dir: PathBuf,
    }

    impl Pki {
        fn new() -> Self {
            let dir =
                std::env::temp_dir().join(format!("quorlock-tls-{}-{}", std::process::id(), rand_suffix()));
            std::fs::create_dir_all(&dir).expect("temp dir");
            let run = |args: &[&str]| {
                let out = Command::new("openssl")
                    .args(args)
                    .current_dir(&dir)
                    .output()
                    .expect("run openssl (is it installed?)");
                assert!(
                    out.status.success(),
                    "openssl {args:?}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            };
            run(&[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
                "-days",
                "1",
                "-subj",
                "/CN=quorlock test CA",
            ]);
            run(&[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
                "-subj",
                "/CN=localhost",
            ]);
            std::fs::write(
                dir.join("ext.cnf"),
                "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n",
            )
            .expect("write ext");
            run(&[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                "server.crt",
                "-days",
                "1",
                "-extfile",
                "ext.cnf",
            ]);
            Self { dir }
        }

        fn path(&self, name: &str) -> PathBuf {
            self.dir.join(name)
        }

        fn ca_pem(&self) -> Vec<u8> {
            std::fs::read(self.path("ca.crt")).expect("read CA")
        }
    }

    impl Drop for Pki {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    fn rand_suffix() -> u64 {
        use std::time::{SystemTime, UNIX_EPOCH};
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    }

    /// One `redis-server` with TLS only (`--port 0`), killed on drop.
    struct TlsMaster {
        child: Child,
        port: u16,
    }

    impl TlsMaster {
        fn start(pki: &Pki, index: usize) -> Self {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("free port")
                .port();
            let dir = pki.path(&format!("m{index}"));
            std::fs::create_dir_all(&dir).expect("dir");
            let p = |name: &str| pki.path(name).display().to_string();
            let child = Command::new("redis-server")
                .args(["--port", "0", "--tls-port", &port.to_string()])
                .args(["--tls-cert-file", &p("server.crt")])
                .args(["--tls-key-file", &p("server.key")])
                .args(["--tls-ca-cert-file", &p("ca.crt")])
                .args(["--tls-auth-clients", "no", "--save", ""])
                .args(["--appendonly", "yes", "--appendfsync", "always"])
                .args(["--dir", &dir.display().to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn redis-server");
            Self { child, port }
        }

        fn url(&self) -> String {
            format!("rediss://127.0.0.1:{}", self.port)
        }
    }

    impl Drop for TlsMaster {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    async fn wait_ready(master: &TlsMaster, ca: &[u8]) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let locks = Quorlock::builder()
                .node(master.url())
                .tls_root_certificates(ca.to_vec())
                .build()
                .await
                .expect("build");
            if let Ok(g) = locks.try_acquire("ready", Duration::from_secs(1)).await {
                g.release().await.expect("release");
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "TLS master on {} never became ready",
                master.port
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn assert_exists(path: &Path) {
        assert!(path.exists(), "{} missing", path.display());
    }

    #[tokio::test]
    async fn locks_and_fencing_work_over_tls_with_a_private_ca() {
        let pki = Pki::new();
        assert_exists(&pki.path("server.crt"));
        let masters: Vec<TlsMaster> = (0..3).map(|i| TlsMaster::start(&pki, i)).collect();
        let ca = pki.ca_pem();
        for m in &masters {
            wait_ready(m, &ca).await;
        }
        let urls: Vec<String> = masters.iter().map(TlsMaster::url).collect();
        let build = || async {
            Quorlock::builder()
                .nodes(urls.clone())
                .node_timeout(Duration::from_millis(500))
                .tls_root_certificates(ca.clone())
                .build()
                .await
                .expect("build")
        };
        let a = build().await;
        let b = build().await;
        let guard = a
            .try_acquire("orders:42", Duration::from_secs(5))
            .await
            .expect("acquire over TLS");
        let err = b
            .try_acquire("orders:42", Duration::from_secs(5))
            .await
            .expect_err("excluded");
        assert!(err.is_contended(), "{err}");
        // Release returns once a majority confirmed.
        assert!(guard.release().await.expect("release").held >= 2);
        let fenced = b
            .lock("orders:42", Duration::from_secs(5))
            .fenced()
            .acquire()
            .await
            .expect("fenced acquire over TLS");
        assert!(fenced.fencing_token().is_some());
        fenced.release().await.expect("release");

        // Without the private CA, the system trust store rejects the certificate: no master
        // answers.
        let untrusting = Quorlock::builder()
            .nodes(urls.clone())
            .node_timeout(Duration::from_millis(500))
            .build()
            .await
            .expect("build");
        let err = untrusting
            .try_acquire("orders:42", Duration::from_secs(5))
            .await
            .expect_err("an untrusted certificate must fail the handshake");
        assert!(
            err.failures()
                .iter()
                .all(|f| matches!(f.kind, NodeErrorKind::Connection(_) | NodeErrorKind::Timeout)),
            "{err}"
        );
    }
}
