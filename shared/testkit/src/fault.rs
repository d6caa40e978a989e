//! A fault proxy: a TCP proxy between an office and PostgreSQL that reads the frontend side of
//! the PostgreSQL wire protocol (v3) well enough to fail a connection at a chosen point.
//!
//! - [`FaultProxy::drop_after_commit`]: the next `COMMIT` (a simple `Query`, or an extended
//!   `Parse`/`Bind` of it) is forwarded to the server, then the connection is cut before any
//!   answer reaches the client — the server commits, the client never hears of it.
//! - [`FaultProxy::drop_before_commit`]: the next `COMMIT` is *not* forwarded; the connection is
//!   cut (the server rolls the transaction back).
//! - [`FaultProxy::drop_after_statement`]: the next execution (the `Sync` after a `Bind` of a
//!   prepared statement, or a simple `Query`) whose SQL contains a pattern is forwarded, then the
//!   connection is cut: a single-statement write whose answer is lost.
//! - [`FaultProxy::drop_after_messages`]: cut a connection after the n-th frontend message
//!   counted from now (that message forwarded).
//! - [`FaultProxy::delay`]: hold every frontend message for a while.
//! - [`FaultProxy::refuse`]: cut every live connection and refuse new ones (the database is
//!   unreachable), until turned off.
//!
//! Each `drop_*` fault is one-shot: it fires once, on whichever connection first meets it.
//! Messages: startup (with `SSLRequest`/`GSSENCRequest`, answered by the server) is untyped;
//! after it, every frontend message is a type byte and a big-endian length that counts itself.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// When a one-shot fault fires.
#[derive(Debug, Clone)]
enum Trigger {
    /// A `COMMIT` (of a transaction that ran a statement containing `of`, if given);
    /// `forward`: whether the server receives it first.
    Commit { forward: bool, of: Option<String> },
    /// The execution of a statement whose SQL contains this text.
    Statement(String),
    /// The n-th frontend message from now (1 = the next one).
    Messages(u64),
    /// The execution of a statement containing this text: cut before it, then refuse.
    RefuseAt(String),
}

#[derive(Debug, Default)]
struct Plan {
    upstream: Option<SocketAddr>,
    armed: Option<Trigger>,
    delay: Option<Duration>,
}

#[derive(Debug, Default)]
struct Shared {
    plan: Mutex<Plan>,
    refusing: AtomicBool,
    fired: AtomicU64,
    accepted: AtomicU64,
    /// Bumped to cut every live connection.
    generation: AtomicU64,
    cut: Notify,
}

/// A TCP proxy in front of PostgreSQL that fails connections on demand (see the module docs).
/// Dropping it stops accepting; live connections end with their peers.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut_all();
    }
}

impl FaultProxy {
    /// A proxy on a loopback port; its upstream is set by [`FaultProxy::route`] (or
    /// [`FaultProxy::upstream`]) before the first connection.
    pub async fn start() -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port for the fault proxy");
        let addr = listener.local_addr().expect("bound address");
        let shared = Arc::new(Shared::default());
        let accept = tokio::spawn(accept_loop(listener, shared.clone()));
        FaultProxy {
            addr,
            shared,
            accept,
        }
    }

    /// The proxy's own address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Forward to `upstream` (a PostgreSQL server).
    pub fn upstream(&self, upstream: SocketAddr) {
        self.shared.plan.lock().expect("plan").upstream = Some(upstream);
    }

    /// Point a `postgres://user@host:port/db` URL at this proxy, forwarding to the host and port
    /// it named (for `spawn_office_with(spec, |c| proxy.route(&mut c.database.url))`).
    pub fn route(&self, url: &mut String) {
        self.router().route(url);
    }

    /// What [`FaultProxy::route`] needs, to be kept by a builder.
    pub fn router(&self) -> Router {
        Router {
            addr: self.addr,
            shared: self.shared.clone(),
        }
    }

    /// The next execution of a statement whose SQL contains `pattern` never reaches the
    /// server: the connection is cut there and from then on the proxy refuses (as
    /// [`FaultProxy::refuse`]) — the database becomes unreachable exactly at that write.
    pub fn refuse_at_statement(&self, pattern: &str) {
        self.arm(Trigger::RefuseAt(pattern.to_owned()));
    }

    /// The next `COMMIT` reaches the server, its answer never reaches the client.
    pub fn drop_after_commit(&self) {
        self.arm(Trigger::Commit {
            forward: true,
            of: None,
        });
    }

    /// The next `COMMIT` of a transaction that ran a statement containing `pattern` reaches the
    /// server, its answer never reaches the client (other transactions pass).
    pub fn drop_after_commit_of(&self, pattern: &str) {
        self.arm(Trigger::Commit {
            forward: true,
            of: Some(pattern.to_owned()),
        });
    }

    /// The next `COMMIT` never reaches the server; the connection is cut.
    pub fn drop_before_commit(&self) {
        self.arm(Trigger::Commit {
            forward: false,
            of: None,
        });
    }

    /// The next `COMMIT` of a transaction that ran a statement containing `pattern` never
    /// reaches the server; the connection is cut (the transaction rolls back).
    pub fn drop_before_commit_of(&self, pattern: &str) {
        self.arm(Trigger::Commit {
            forward: false,
            of: Some(pattern.to_owned()),
        });
    }

    /// The next execution of a statement whose SQL contains `pattern` reaches the server, its
    /// answer never reaches the client.
    pub fn drop_after_statement(&self, pattern: &str) {
        self.arm(Trigger::Statement(pattern.to_owned()));
    }

    /// Cut the connection that sends the `n`-th frontend message from now (`n` ≥ 1), after
    /// forwarding it.
    pub fn drop_after_messages(&self, n: u64) {
        assert!(n >= 1, "the first message is 1");
        self.arm(Trigger::Messages(n));
    }

    /// Disarm a one-shot fault that has not fired.
    pub fn disarm(&self) {
        self.shared.plan.lock().expect("plan").armed = None;
    }

    /// Hold every frontend message for `delay` (`None`: forward at once).
    pub fn delay(&self, delay: Option<Duration>) {
        self.shared.plan.lock().expect("plan").delay = delay;
    }

    /// Refuse: cut every live connection and close new ones at once; `false` lets them in again.
    pub fn refuse(&self, on: bool) {
        self.shared.refusing.store(on, Ordering::SeqCst);
        if on {
            self.cut_all();
        }
    }

    /// Cut every live connection now.
    pub fn cut_all(&self) {
        self.shared.generation.fetch_add(1, Ordering::SeqCst);
        self.shared.cut.notify_waiters();
    }

    /// How many one-shot faults have fired.
    pub fn fired(&self) -> u64 {
        self.shared.fired.load(Ordering::SeqCst)
    }

    /// How many connections were accepted (refused ones included).
    pub fn accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    fn arm(&self, trigger: Trigger) {
        self.shared.plan.lock().expect("plan").armed = Some(trigger);
    }
}

/// Routes database URLs through a [`FaultProxy`] (see [`FaultProxy::router`]).
#[derive(Debug, Clone)]
pub struct Router {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl Router {
    /// See [`FaultProxy::route`].
    pub fn route(&self, url: &mut String) {
        let (scheme, rest) = url.split_once("://").expect("a postgres url");
        let (userinfo, rest) = rest.rsplit_once('@').map_or(("", rest), |(u, r)| (u, r));
        let (hostport, path) = rest.split_once('/').unwrap_or((rest, ""));
        let upstream = resolve(hostport);
        self.shared.plan.lock().expect("plan").upstream = Some(upstream);
        let at = if userinfo.is_empty() { "" } else { "@" };
        *url = format!("{scheme}://{userinfo}{at}{}/{path}", self.addr);
    }
}

fn resolve(hostport: &str) -> SocketAddr {
    use std::net::ToSocketAddrs;
    hostport
        .to_socket_addrs()
        .expect("the upstream host resolves")
        .find(SocketAddr::is_ipv4)
        .or_else(|| hostport.to_socket_addrs().ok()?.next())
        .expect("the upstream host has an address")
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        if shared.refusing.load(Ordering::SeqCst) {
            drop(client);
            continue;
        }
        let upstream = shared.plan.lock().expect("plan").upstream;
        let Some(upstream) = upstream else {
            drop(client);
            continue;
        };
        tokio::spawn(serve(client, upstream, shared.clone()));
    }
}

/// What the frontend pump decided about a message.
#[derive(Debug)]
enum Verdict {
    Forward,
    /// Forward it, then cut the connection without passing on any answer.
    ForwardThenCut,
    /// Cut the connection without forwarding it.
    Cut,
    /// Cut it without forwarding, then refuse every connection.
    CutAndRefuse,
}

async fn serve(client: TcpStream, upstream: SocketAddr, shared: Arc<Shared>) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let generation = shared.generation.load(Ordering::SeqCst);
    let (mut client_rd, mut client_wr) = client.into_split();
    let (mut server_rd, mut server_wr) = server.into_split();
    // Once set, nothing more reaches the client.
    let mute = Arc::new(AtomicBool::new(false));
    let done = Arc::new(Notify::new());

    let backend = {
        let mute = mute.clone();
        let done = done.clone();
        async move {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                tokio::select! {
                    n = server_rd.read(&mut buf) => {
                        let Ok(n) = n else { break };
                        if n == 0 || mute.load(Ordering::SeqCst) { if n == 0 { break } else { continue } }
                        if client_wr.write_all(&buf[..n]).await.is_err() { break; }
                    }
                    () = done.notified() => break,
                }
            }
            let _ = client_wr.shutdown().await;
        }
    };

    let frontend = {
        let shared = shared.clone();
        let mute = mute.clone();
        async move {
            let mut parser = Frontend::default();
            let mut buf = Vec::<u8>::with_capacity(64 * 1024);
            let mut chunk = vec![0u8; 64 * 1024];
            'read: loop {
                let n = match client_rd.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                buf.extend_from_slice(&chunk[..n]);
                while let Some(len) = parser.complete(&buf) {
                    let message: Vec<u8> = buf.drain(..len).collect();
                    let (verdict, delay) = {
                        let mut plan = shared.plan.lock().expect("plan");
                        (parser.judge(&message, &mut plan.armed), plan.delay)
                    };
                    if let Some(d) = delay {
                        tokio::time::sleep(d).await;
                    }
                    match verdict {
                        Verdict::Forward => {
                            if server_wr.write_all(&message).await.is_err() {
                                break 'read;
                            }
                        }
                        Verdict::ForwardThenCut => {
                            mute.store(true, Ordering::SeqCst);
                            shared.fired.fetch_add(1, Ordering::SeqCst);
                            let _ = server_wr.write_all(&message).await;
                            let _ = server_wr.flush().await;
                            // Let the server read (and act on) what it was sent before the
                            // connection closes; its answers are read and discarded meanwhile.
                            tokio::time::sleep(Duration::from_millis(200)).await;
                            break 'read;
                        }
                        Verdict::Cut => {
                            mute.store(true, Ordering::SeqCst);
                            shared.fired.fetch_add(1, Ordering::SeqCst);
                            break 'read;
                        }
                        Verdict::CutAndRefuse => {
                            mute.store(true, Ordering::SeqCst);
                            shared.fired.fetch_add(1, Ordering::SeqCst);
                            shared.refusing.store(true, Ordering::SeqCst);
                            shared.generation.fetch_add(1, Ordering::SeqCst);
                            shared.cut.notify_waiters();
                            break 'read;
                        }
                    }
                }
            }
            mute.store(true, Ordering::SeqCst);
            let _ = server_wr.shutdown().await;
        }
    };

    let cut = async {
        loop {
            let notified = shared.cut.notified();
            if shared.generation.load(Ordering::SeqCst) != generation {
                return;
            }
            notified.await;
        }
    };

    let backend = tokio::spawn(backend);
    tokio::select! {
        () = frontend => {}
        () = cut => { mute.store(true, Ordering::SeqCst); }
    }
    done.notify_one();
    let _ = backend.await;
}

/// The frontend side of one connection, as far as the faults need it.
#[derive(Debug, Default)]
struct Frontend {
    /// Past the startup message: every message is typed.
    started: bool,
    /// Prepared statement name → whether its SQL is a `COMMIT` / matches the armed pattern
    /// (the SQL kept, for patterns armed after the `Parse`).
    statements: HashMap<String, String>,
    /// A `Bind` of a matching statement was seen: the next `Sync` fires.
    pending: Option<Verdict>,
    /// The SQL run since the transaction began (for commits scoped by a pattern).
    in_tx: Vec<String>,
}

impl Frontend {
    /// The length of the first complete message in `buf`, if there is one.
    fn complete(&self, buf: &[u8]) -> Option<usize> {
        let (at, extra) = if self.started { (1, 1) } else { (0, 0) };
        let len = buf.get(at..at + 4)?;
        let len = u32::from_be_bytes(len.try_into().ok()?) as usize + extra;
        (buf.len() >= len).then_some(len)
    }

    fn judge(&mut self, message: &[u8], armed: &mut Option<Trigger>) -> Verdict {
        if !self.started {
            // SSLRequest / GSSENCRequest keep the connection untyped; a startup message
            // (protocol 3.0) ends the untyped phase.
            if message.len() >= 8 && message[4..8] == 196_608u32.to_be_bytes() {
                self.started = true;
            }
            return Verdict::Forward;
        }
        let kind = message[0];
        let body = &message[5..];
        if let Some(Trigger::Messages(n)) = armed {
            if *n <= 1 {
                *armed = None;
                return Verdict::ForwardThenCut;
            }
            *n -= 1;
        }
        match kind {
            // Query: the SQL, NUL-terminated.
            b'Q' => {
                let sql = cstr(body, 0).0;
                if let Some(v) = fire(armed, sql, &self.in_tx) {
                    return v;
                }
                self.saw(sql);
            }
            // Parse: statement name, SQL, parameter types.
            b'P' => {
                let (name, at) = cstr(body, 0);
                let (sql, _) = cstr(body, at);
                self.statements.insert(name.to_owned(), sql.to_owned());
                if name.is_empty() {
                    if let Some(v) = fire(armed, sql, &self.in_tx) {
                        self.pending = Some(v);
                    }
                    self.saw(sql);
                }
            }
            // Bind: portal name, statement name, …
            b'B' => {
                let (_, at) = cstr(body, 0);
                let (statement, _) = cstr(body, at);
                if !statement.is_empty()
                    && let Some(sql) = self.statements.get(statement).cloned()
                {
                    if let Some(v) = fire(armed, &sql, &self.in_tx) {
                        self.pending = Some(v);
                    }
                    self.saw(&sql);
                }
            }
            // Sync: the extended-protocol batch is executed (and, outside a transaction block,
            // committed) now.
            b'S' => {
                if let Some(v) = self.pending.take() {
                    return v;
                }
            }
            _ => {}
        }
        Verdict::Forward
    }
}

impl Frontend {
    /// Keep track of the statements of the current transaction.
    fn saw(&mut self, sql: &str) {
        let head = sql.trim_start();
        let starts = |w: &str| head.len() >= w.len() && head[..w.len()].eq_ignore_ascii_case(w);
        if starts("BEGIN") || starts("START TRANSACTION") || starts("ROLLBACK") || is_commit(sql) {
            self.in_tx.clear();
        } else if self.in_tx.len() < 1024 {
            self.in_tx.push(sql.to_owned());
        }
    }
}

/// The verdict of the armed trigger on `sql` (run in a transaction that ran `in_tx`),
/// disarming it when it fires.
fn fire(armed: &mut Option<Trigger>, sql: &str, in_tx: &[String]) -> Option<Verdict> {
    let verdict = match armed.as_ref()? {
        Trigger::Commit { forward, of }
            if is_commit(sql)
                && of
                    .as_deref()
                    .is_none_or(|p| in_tx.iter().any(|s| s.contains(p))) =>
        {
            if *forward {
                Verdict::ForwardThenCut
            } else {
                Verdict::Cut
            }
        }
        Trigger::Statement(pattern) if sql.contains(pattern.as_str()) => Verdict::ForwardThenCut,
        Trigger::RefuseAt(pattern) if sql.contains(pattern.as_str()) => Verdict::CutAndRefuse,
        _ => return None,
    };
    *armed = None;
    Some(verdict)
}

fn is_commit(sql: &str) -> bool {
    let sql = sql.trim().trim_end_matches(';').trim();
    sql.eq_ignore_ascii_case("COMMIT")
        || sql.eq_ignore_ascii_case("END")
        || sql.eq_ignore_ascii_case("COMMIT TRANSACTION")
        || sql.eq_ignore_ascii_case("COMMIT WORK")
}

/// The NUL-terminated string at `at` and the offset after its NUL.
fn cstr(body: &[u8], at: usize) -> (&str, usize) {
    let rest = body.get(at..).unwrap_or_default();
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    (
        std::str::from_utf8(&rest[..end]).unwrap_or_default(),
        at + end + 1,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![kind];
        m.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
        m.extend_from_slice(body);
        m
    }

    fn started() -> Frontend {
        let mut f = Frontend::default();
        let mut startup = 8u32.to_be_bytes().to_vec();
        startup.extend_from_slice(&196_608u32.to_be_bytes());
        assert_eq!(f.complete(&startup), Some(8));
        assert!(matches!(f.judge(&startup, &mut None), Verdict::Forward));
        f
    }

    #[test]
    fn a_simple_commit_fires_once() {
        let mut f = started();
        let mut armed = Some(Trigger::Commit {
            forward: true,
            of: Some("ward.credentials".into()),
        });
        let begin = typed(b'Q', b"BEGIN\0");
        assert_eq!(f.complete(&begin), Some(begin.len()));
        assert!(matches!(f.judge(&begin, &mut armed), Verdict::Forward));
        let commit = typed(b'Q', b"COMMIT\0");
        // A transaction that did not touch the pattern commits unharmed.
        assert!(matches!(f.judge(&commit, &mut armed), Verdict::Forward));
        assert!(matches!(f.judge(&begin, &mut armed), Verdict::Forward));
        let parse = typed(b'P', b"s1\0UPDATE ward.credentials SET x = 1\0\0\0");
        assert!(matches!(f.judge(&parse, &mut armed), Verdict::Forward));
        let bind = typed(b'B', b"\0s1\0\0\0\0\0\0\0");
        assert!(matches!(f.judge(&bind, &mut armed), Verdict::Forward));
        assert!(matches!(
            f.judge(&commit, &mut armed),
            Verdict::ForwardThenCut
        ));
        assert!(armed.is_none());
        assert!(matches!(f.judge(&commit, &mut armed), Verdict::Forward));
    }

    #[test]
    fn a_prepared_statement_fires_at_the_sync_of_its_bind() {
        let mut f = started();
        let mut armed = None;
        let parse = typed(b'P', b"sqlx_s_1\0UPDATE ward.consents SET x = 1\0\0\0");
        assert!(matches!(f.judge(&parse, &mut armed), Verdict::Forward));
        armed = Some(Trigger::Statement("UPDATE ward.consents".into()));
        let bind = typed(b'B', b"\0sqlx_s_1\0\0\0\0\0\0\0");
        assert!(matches!(f.judge(&bind, &mut armed), Verdict::Forward));
        assert!(matches!(
            f.judge(&typed(b'E', b"\0\0\0\0\0"), &mut armed),
            Verdict::Forward
        ));
        assert!(matches!(
            f.judge(&typed(b'S', b""), &mut armed),
            Verdict::ForwardThenCut
        ));
    }

    #[test]
    fn partial_messages_wait_for_their_rest() {
        let f = started();
        let q = typed(b'Q', b"COMMIT\0");
        assert_eq!(f.complete(&q[..3]), None);
        assert_eq!(f.complete(&q[..q.len() - 1]), None);
        assert_eq!(f.complete(&q), Some(q.len()));
    }
}
