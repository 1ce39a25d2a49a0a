//! TLS masters for tests: a throwaway CA made with the `openssl` command for the run, a server
//! certificate for 127.0.0.1 and a client certificate signed by it, and `redis-server` processes
//! listening with TLS only, optionally requiring client certificates.
//!
//! Shared by the library's client-certificate test (`tests/tls_client.rs`) and the command's TLS
//! tests (`cli/tests/`).
#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A throwaway CA, a server certificate for 127.0.0.1 and a client certificate, all signed by it,
/// in a temporary directory removed on drop.
pub struct Pki {
    dir: PathBuf,
}

impl Pki {
    /// Makes the CA and both certificates.
    pub fn new() -> Self {
        let dir = std::env::temp_dir().join(format!(
            "quorlock-tls-pki-{}-{:x}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let pki = Self { dir };
        pki.openssl(&[
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
        pki.signed(
            "server",
            "/CN=localhost",
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
        );
        pki.signed(
            "client",
            "/CN=quorlock test client",
            "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n",
        );
        pki
    }

    /// `NAME.key` and `NAME.crt`, signed by the CA with the extensions `ext`.
    fn signed(&self, name: &str, subject: &str, ext: &str) {
        let (key, csr, crt, cnf) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.crt"),
            format!("{name}.cnf"),
        );
        self.openssl(&[
            "req", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &csr, "-subj", subject,
        ]);
        std::fs::write(self.path(&cnf), ext).expect("write extensions");
        self.openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            &crt,
            "-days",
            "1",
            "-extfile",
            &cnf,
        ]);
    }

    fn openssl(&self, args: &[&str]) {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(&self.dir)
            .output()
            .expect("run openssl (is it installed? chaos/ensure-servers installs it)");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A file of the PKI: `ca.crt`, `server.crt`, `server.key`, `client.crt`, `client.key`.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The contents of a file of the PKI.
    pub fn read(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.path(name)).expect("read a PKI file")
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One `redis-server` listening with TLS only (`--port 0`), killed on drop.
pub struct TlsMaster {
    child: Child,
    /// The TLS port on 127.0.0.1.
    pub port: u16,
}

impl TlsMaster {
    /// Starts master `index`; with `auth_clients`, it refuses clients without a certificate signed
    /// by the CA. Returns once it accepts TCP connections.
    pub fn start(pki: &Pki, index: usize, auth_clients: bool) -> Self {
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
            .args(["--tls-auth-clients", if auth_clients { "yes" } else { "no" }])
            .args(["--save", "", "--appendonly", "yes", "--appendfsync", "always"])
            .args(["--dir", &dir.display().to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        let master = Self { child, port };
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "TLS master on {port} never listened");
            std::thread::sleep(Duration::from_millis(20));
        }
        master
    }

    /// `rediss://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}", self.port)
    }
}

impl Drop for TlsMaster {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
