//! quorlock with its default features, used as a dependent uses it: one real acquire and release on
//! a master this program starts for itself, and the refusal of `rediss://` URLs without the `tls`
//! feature (the check of `rediss_urls_need_the_tls_feature` in tests/tls.rs, which
//! `cargo test --workspace` never runs: the CLI turns `tls` on there).
//!
//! The master's keyspace is read over a plain TCP connection, not through a Redis client crate: a
//! client crate here could add features to the library's own `redis` dependency, and the build
//! would no longer be exactly the one a dependent gets. Exits non-zero (a panic) if any check fails.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use quorlock::Quorlock;

/// A `redis-server` child, killed when this is dropped (at the end of `main`, or by a panic).
struct Master {
    child: Child,
    port: u16,
}

impl Master {
    /// Starts a master with no persistence on a free port, and waits until it answers PING.
    fn start() -> Master {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .expect("start redis-server (is it installed?)");
        let master = Master { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while master.try_command(&["PING"]).flatten().as_deref() != Some("PONG") {
            assert!(
                Instant::now() < deadline,
                "redis-server on port {port} did not answer PING"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        master
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Sends one command and returns its reply; panics if the master cannot be reached.
    fn command(&self, args: &[&str]) -> Option<String> {
        self.try_command(args)
            .unwrap_or_else(|| panic!("no reply to {args:?} from the master"))
    }

    /// One command in RESP, on a connection of its own. The reply: `Some(Some(text))` for a status
    /// or a bulk string, `Some(None)` for a nil, `None` if there was no usable reply; panics on an
    /// error reply.
    fn try_command(&self, args: &[&str]) -> Option<Option<String>> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        let mut request = format!("*{}\r\n", args.len());
        for arg in args {
            request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
        }
        stream.write_all(request.as_bytes()).ok()?;
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        let line = line.trim_end();
        match line.as_bytes().first()? {
            b'+' => Some(Some(line[1..].to_owned())),
            b'$' if line == "$-1" => Some(None),
            b'$' => {
                let len: usize = line[1..].parse().ok()?;
                let mut bulk = vec![0; len + 2];
                std::io::Read::read_exact(&mut reader, &mut bulk).ok()?;
                bulk.truncate(len);
                Some(Some(String::from_utf8(bulk).ok()?))
            }
            _ => panic!("unexpected reply to {args:?}: {line}"),
        }
    }
}

impl Drop for Master {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    // Without the `tls` feature a rediss:// master is refused at build(), naming the feature.
    let err = Quorlock::builder()
        .node("rediss://127.0.0.1:6380")
        .build()
        .await
        .expect_err("a rediss:// URL without the tls feature must be refused");
    assert!(err.to_string().contains("`tls` cargo feature"), "{err}");
    println!("ok: rediss:// refused without the tls feature ({err})");

    let master = Master::start();
    // A master without `appendfsync always` that started less than the longest TTL ago is kept
    // out of every majority (it may have lost keys in a restart). This one was started above, empty,
    // and no client has used it before: nothing was there to lose, so the grace is not waited out.
    let locks = Quorlock::builder()
        .node(master.url())
        .enforce_restart_grace(false)
        .build()
        .await
        .expect("build a client for one master");
    let guard = locks
        .acquire("quorlock-dependent", Duration::from_secs(10))
        .await
        .expect("acquire on a free master");
    // No key prefix by default: the key is the resource name, and its value our token.
    assert_eq!(guard.key(), "quorlock-dependent");
    let held = master.command(&["GET", guard.key()]);
    assert_eq!(
        held.as_deref(),
        Some(guard.token()),
        "the key on the master while held"
    );
    println!("ok: acquired, the key holds our token on the master");

    let key = guard.key().to_owned();
    let released = guard.release().await.expect("release");
    assert_eq!((released.held, released.masters), (1, 1), "{released:?}");
    locks.settle().await;
    assert_eq!(
        master.command(&["GET", &key]),
        None,
        "the key on the master after release"
    );
    println!("ok: released, the key is gone from the master");
}
