//! A TCP proxy of our own in front of each master, so network faults (latency, blackhole,
//! reset, partitions between client groups and masters) can be injected without root,
//! iptables or tc, and switched at runtime.
//!
//! Each [`Proxy`] forwards one listening port on 127.0.0.1 to one target. A [`ProxyGroup`]
//! holds one proxy per (client group, master); a partition is "blackhole the proxies of one
//! group for some masters".

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::cluster::Cluster;
use crate::credentials::Credentials;
use crate::error::HarnessError;

/// How a proxy treats traffic; switchable at runtime with [`Proxy::set_mode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProxyMode {
    /// Forward bytes unchanged.
    #[default]
    PassThrough,
    /// Forward every chunk after this delay, in each direction (order is kept; delays do
    /// not accumulate). New connections are also delayed by it before connecting upstream.
    Latency(Duration),
    /// Accept and read, but never forward and never answer. Bytes read meanwhile are lost,
    /// so connections that lost bytes are reset when the mode changes again (their request
    /// / response stream is no longer consistent), like a TCP connection that timed out.
    Blackhole,
    /// Reset every connection (RST) and reset new ones right after accepting them.
    Reset,
}

/// What connections made from now on are forwarded to, and a count of the repoints that reset
/// the connections already open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Route {
    target: SocketAddr,
    resets: u64,
}

/// What becomes of the connections already open when a proxy is repointed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// They are reset, as when the server behind a name goes away.
    Reset,
    /// They stay with the old target, as behind a load balancer that keeps them.
    Keep,
}

/// One TCP proxy from a local port to a target address.
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    route: watch::Sender<Route>,
    mode: watch::Sender<ProxyMode>,
    active: Arc<AtomicUsize>,
    accepted: Arc<AtomicU64>,
    dropped: Arc<AtomicU64>,
    accept_task: JoinHandle<()>,
}

impl Proxy {
    /// Starts a proxy on a free port of 127.0.0.1 forwarding to `target`.
    pub async fn start(target: SocketAddr) -> Result<Proxy, HarnessError> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| HarnessError::io("binding a proxy port on 127.0.0.1", e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| HarnessError::io("reading the proxy's address", e))?;
        let (mode, mode_rx) = watch::channel(ProxyMode::PassThrough);
        let (route, route_rx) = watch::channel(Route { target, resets: 0 });
        let active = Arc::new(AtomicUsize::new(0));
        let accepted = Arc::new(AtomicU64::new(0));
        let dropped = Arc::new(AtomicU64::new(0));
        let accept_task = tokio::spawn(accept_loop(
            listener,
            route_rx,
            mode_rx,
            Counters {
                active: active.clone(),
                accepted: accepted.clone(),
                dropped: dropped.clone(),
            },
        ));
        Ok(Proxy {
            addr,
            route,
            mode,
            active,
            accepted,
            dropped,
            accept_task,
        })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The address traffic is forwarded to.
    pub fn target(&self) -> SocketAddr {
        self.route.borrow().target
    }

    /// Forwards new connections to `target` from now on, as a name that moves to another server
    /// (a failover, a replaced pod); what becomes of the open ones is `existing`'s.
    pub fn repoint(&self, target: SocketAddr, existing: Existing) {
        self.route.send_modify(|route| {
            route.target = target;
            if existing == Existing::Reset {
                route.resets += 1;
            }
        });
    }

    /// Switches the mode; existing connections follow it immediately.
    pub fn set_mode(&self, mode: ProxyMode) {
        self.mode.send_replace(mode);
    }

    /// The current mode.
    pub fn mode(&self) -> ProxyMode {
        *self.mode.borrow()
    }

    /// Number of client connections currently open through this proxy.
    pub fn active_connections(&self) -> usize {
        self.active.load(Ordering::SeqCst)
    }

    /// Number of client connections this proxy has accepted since it started, in any mode.
    pub fn accepted_connections(&self) -> u64 {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Total bytes (both directions) this proxy has swallowed in blackhole mode.
    pub fn blackholed_bytes(&self) -> u64 {
        self.dropped.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // Connection tasks end when the mode sender goes away.
        self.accept_task.abort();
    }
}

/// One proxy per (client group, master), so client groups can be partitioned separately.
#[derive(Debug)]
pub struct ProxyGroup {
    credentials: Credentials,
    proxies: Vec<Vec<Proxy>>,
}

impl ProxyGroup {
    /// Starts `groups` sets of proxies in front of every master of `cluster`.
    ///
    /// Proxies target the master's port, so they keep working across restarts.
    pub async fn start(cluster: &Cluster, groups: usize) -> Result<ProxyGroup, HarnessError> {
        let targets: Vec<SocketAddr> = (0..cluster.len())
            .map(|i| SocketAddr::from(([127, 0, 0, 1], cluster.port(i))))
            .collect();
        ProxyGroup::start_for(&targets, groups, cluster.options().credentials()).await
    }

    /// Starts `groups` sets of proxies in front of arbitrary `targets`.
    pub async fn start_for(
        targets: &[SocketAddr],
        groups: usize,
        credentials: Credentials,
    ) -> Result<ProxyGroup, HarnessError> {
        if groups == 0 || targets.is_empty() {
            return Err(HarnessError::InvalidOptions(format!(
                "a proxy group needs at least one group and one target, got {groups} groups and {} targets",
                targets.len()
            )));
        }
        let mut proxies = Vec::with_capacity(groups);
        for _ in 0..groups {
            let mut row = Vec::with_capacity(targets.len());
            for target in targets {
                row.push(Proxy::start(*target).await?);
            }
            proxies.push(row);
        }
        Ok(ProxyGroup { credentials, proxies })
    }

    /// Number of client groups.
    pub fn groups(&self) -> usize {
        self.proxies.len()
    }

    /// Number of masters behind each group.
    pub fn masters(&self) -> usize {
        self.proxies.first().map_or(0, Vec::len)
    }

    /// The URLs clients of `group` use, one per master, with credentials.
    ///
    /// # Panics
    /// If `group >= groups()`, like slice indexing.
    pub fn urls(&self, group: usize) -> Vec<String> {
        self.proxies[group]
            .iter()
            .map(|p| self.credentials.url("127.0.0.1", p.port()))
            .collect()
    }

    /// The proxy between `group` and `master`.
    pub fn proxy(&self, group: usize, master: usize) -> Result<&Proxy, HarnessError> {
        let row = self.proxies.get(group).ok_or(HarnessError::NoSuchGroup {
            group,
            groups: self.groups(),
        })?;
        row.get(master).ok_or(HarnessError::NoSuchMaster {
            index: master,
            len: row.len(),
        })
    }

    /// Sets the mode of the proxy between `group` and `master`.
    pub fn set_mode(&self, group: usize, master: usize, mode: ProxyMode) -> Result<(), HarnessError> {
        self.proxy(group, master)?.set_mode(mode);
        Ok(())
    }

    /// Sets the mode of every group's proxy to `master` (a fault at the master's side).
    pub fn set_master_mode(&self, master: usize, mode: ProxyMode) -> Result<(), HarnessError> {
        for group in 0..self.groups() {
            self.set_mode(group, master, mode)?;
        }
        Ok(())
    }

    /// Cuts `group` off from `masters` (blackholes those proxies); other groups are unaffected.
    pub fn partition(&self, group: usize, masters: &[usize]) -> Result<(), HarnessError> {
        for &master in masters {
            self.set_mode(group, master, ProxyMode::Blackhole)?;
        }
        Ok(())
    }

    /// Puts every proxy back to pass-through.
    pub fn heal(&self) {
        for proxy in self.proxies.iter().flatten() {
            proxy.set_mode(ProxyMode::PassThrough);
        }
    }
}

/// What a proxy counts, shared with its accept loop.
struct Counters {
    active: Arc<AtomicUsize>,
    accepted: Arc<AtomicU64>,
    dropped: Arc<AtomicU64>,
}

async fn accept_loop(
    listener: TcpListener,
    route_rx: watch::Receiver<Route>,
    mode_rx: watch::Receiver<ProxyMode>,
    counters: Counters,
) {
    let Counters {
        active,
        accepted,
        dropped,
    } = counters;
    loop {
        let client = match listener.accept().await {
            Ok((client, _)) => client,
            Err(_) => {
                // Typically EMFILE under load; back off instead of spinning.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        accepted.fetch_add(1, Ordering::SeqCst);
        let _ = client.set_nodelay(true);
        let mode = *mode_rx.borrow();
        if mode == ProxyMode::Reset {
            reset(&client);
            continue;
        }
        let mode_rx = mode_rx.clone();
        let mut route_rx = route_rx.clone();
        let route = *route_rx.borrow_and_update();
        let active = active.clone();
        let dropped = dropped.clone();
        tokio::spawn(async move {
            active.fetch_add(1, Ordering::SeqCst);
            serve(client, (route, route_rx), mode_rx, dropped).await;
            active.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

/// Makes the next close of `stream` send RST instead of FIN.
fn reset(stream: &TcpStream) {
    let _ = stream.set_zero_linger();
}

/// Per-connection state shared by the two directions.
struct Conn {
    /// Bytes were dropped by a blackhole; the connection must die when the mode changes.
    tainted: AtomicBool,
    /// Set when either direction decides to reset the connection.
    abort: watch::Sender<bool>,
    /// The proxy's count of blackholed bytes.
    dropped: Arc<AtomicU64>,
}

impl Conn {
    fn swallowed(&self, bytes: usize) {
        self.tainted.store(true, Ordering::SeqCst);
        self.dropped
            .fetch_add(u64::try_from(bytes).unwrap_or(u64::MAX), Ordering::SeqCst);
    }
}

async fn serve(
    client: TcpStream,
    (route, mut route_rx): (Route, watch::Receiver<Route>),
    mut mode_rx: watch::Receiver<ProxyMode>,
    dropped: Arc<AtomicU64>,
) {
    let target = route.target;
    let mut mode = *mode_rx.borrow_and_update();
    if mode == ProxyMode::Blackhole {
        match swallow_until_mode_changes(&client, &mut mode_rx, &dropped).await {
            Swallowed::Nothing(new_mode) if new_mode != ProxyMode::Reset => mode = new_mode,
            Swallowed::Nothing(_) | Swallowed::Bytes => {
                // Bytes were lost (the stream is no longer consistent) or resets are on.
                reset(&client);
                return;
            }
            Swallowed::Gone => return,
        }
    }
    if let ProxyMode::Latency(delay) = mode {
        tokio::time::sleep(delay).await;
    }
    let upstream = match TcpStream::connect(target).await {
        Ok(upstream) => upstream,
        Err(_) => {
            reset(&client);
            return;
        }
    };
    let _ = upstream.set_nodelay(true);
    let (abort, _) = watch::channel(false);
    let conn = Arc::new(Conn {
        tainted: AtomicBool::new(false),
        abort,
        dropped,
    });
    let (client_r, client_w) = client.into_split();
    let (upstream_r, upstream_w) = upstream.into_split();
    let up = pump(client_r, upstream_w, mode_rx.clone(), conn.clone());
    let down = pump(upstream_r, client_w, mode_rx, conn.clone());
    let pumps = async { tokio::join!(up, down) };
    tokio::pin!(pumps);
    // A repoint that resets the open connections aborts this one; the pumps then return.
    let repointed = async {
        while route_rx.changed().await.is_ok() {
            if route_rx.borrow_and_update().resets != route.resets {
                conn.abort.send_replace(true);
                return;
            }
        }
        std::future::pending::<()>().await;
    };
    let (up_halves, down_halves) = tokio::select! {
        halves = &mut pumps => halves,
        () = repointed => pumps.await,
    };
    // Both directions are done; the halves are dropped here, closing both sockets (with
    // RST if a pump asked for it via zero linger).
    drop((up_halves, down_halves));
}

/// What happened while a connection accepted during a blackhole was held.
enum Swallowed {
    /// The mode changed to this before the client sent anything.
    Nothing(ProxyMode),
    /// The mode changed after the client's bytes were dropped.
    Bytes,
    /// The client went away or the proxy was dropped.
    Gone,
}

/// Reads and drops everything from `client` until the mode stops being a blackhole.
async fn swallow_until_mode_changes(
    client: &TcpStream,
    mode_rx: &mut watch::Receiver<ProxyMode>,
    counter: &AtomicU64,
) -> Swallowed {
    let mut buf = vec![0u8; 16 * 1024];
    let mut dropped = false;
    let count = |n: usize| {
        counter.fetch_add(u64::try_from(n).unwrap_or(u64::MAX), Ordering::SeqCst);
    };
    loop {
        tokio::select! {
            readable = client.readable() => {
                if readable.is_err() {
                    return Swallowed::Gone;
                }
                match client.try_read(&mut buf) {
                    Ok(0) => return Swallowed::Gone,
                    Ok(n) => {
                        count(n);
                        dropped = true;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => return Swallowed::Gone,
                }
            }
            changed = mode_rx.changed() => {
                if changed.is_err() {
                    return Swallowed::Gone;
                }
                let mode = *mode_rx.borrow_and_update();
                if mode != ProxyMode::Blackhole {
                    // Bytes that arrived before the change were sent into the blackhole.
                    let late = drain(|b| client.try_read(b));
                    count(late);
                    dropped |= late > 0;
                    return if dropped { Swallowed::Bytes } else { Swallowed::Nothing(mode) };
                }
            }
        }
    }
}

/// Copies one direction until EOF, an error, or a reset decision. Returns the halves so the
/// caller closes the sockets only after both directions are finished.
async fn pump(
    mut src: OwnedReadHalf,
    mut dst: OwnedWriteHalf,
    mut mode_rx: watch::Receiver<ProxyMode>,
    conn: Arc<Conn>,
) -> (OwnedReadHalf, OwnedWriteHalf) {
    let mut abort_rx = conn.abort.subscribe();
    let mut buf = vec![0u8; 16 * 1024];
    let mut queue: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
    let mut src_open = true;
    let abort = |src: &OwnedReadHalf, dst: &OwnedWriteHalf| {
        reset(src.as_ref());
        reset(dst.as_ref());
        conn.abort.send_replace(true);
    };
    loop {
        if *abort_rx.borrow_and_update() {
            reset(src.as_ref());
            reset(dst.as_ref());
            return (src, dst);
        }
        if !src_open && queue.is_empty() {
            let _ = dst.shutdown().await;
            return (src, dst);
        }
        let mode = *mode_rx.borrow_and_update();
        let next_due = queue.front().map(|(due, _)| *due);
        tokio::select! {
            read = src.read(&mut buf), if src_open => match read {
                Ok(0) => src_open = false,
                Err(_) => {
                    abort(&src, &dst);
                    return (src, dst);
                }
                Ok(n) => match mode {
                    ProxyMode::PassThrough if queue.is_empty() => {
                        if dst.write_all(&buf[..n]).await.is_err() {
                            abort(&src, &dst);
                            return (src, dst);
                        }
                    }
                    ProxyMode::PassThrough => queue.push_back((Instant::now(), buf[..n].to_vec())),
                    ProxyMode::Latency(delay) => {
                        queue.push_back((Instant::now() + delay, buf[..n].to_vec()));
                    }
                    ProxyMode::Blackhole => conn.swallowed(n),
                    ProxyMode::Reset => {
                        abort(&src, &dst);
                        return (src, dst);
                    }
                },
            },
            _ = sleep_until_due(next_due), if next_due.is_some() => {
                if let Some((_, chunk)) = queue.pop_front() {
                    if mode == ProxyMode::Blackhole {
                        conn.swallowed(chunk.len());
                    } else if dst.write_all(&chunk).await.is_err() {
                        abort(&src, &dst);
                        return (src, dst);
                    }
                }
            }
            changed = mode_rx.changed() => {
                let new_mode = *mode_rx.borrow_and_update();
                if mode == ProxyMode::Blackhole {
                    // Bytes that arrived before the change were sent into the blackhole.
                    let late = drain(|b| src.try_read(b));
                    if late > 0 {
                        conn.swallowed(late);
                    }
                }
                let lost_bytes = conn.tainted.load(Ordering::SeqCst);
                if changed.is_err()
                    || new_mode == ProxyMode::Reset
                    || (new_mode != ProxyMode::Blackhole && lost_bytes)
                {
                    abort(&src, &dst);
                    return (src, dst);
                }
            }
            _ = abort_rx.changed() => {}
        }
    }
}

/// Reads and drops whatever is readable right now; returns how many bytes were dropped.
fn drain(mut try_read: impl FnMut(&mut [u8]) -> std::io::Result<usize>) -> usize {
    let mut buf = [0u8; 4096];
    let mut dropped = 0;
    while let Ok(n) = try_read(&mut buf) {
        if n == 0 {
            break;
        }
        dropped += n;
    }
    dropped
}

async fn sleep_until_due(due: Option<Instant>) {
    if let Some(due) = due {
        tokio::time::sleep_until(due).await;
    }
}
