//! The `/metrics` endpoint: a small HTTP/1.1 server on a thread of its own. Each scrape gets a
//! thread and a deadline, at most [`MAX_CLIENTS`] at once (more are closed at once), so that a
//! stalled or hostile client costs a few seconds of one thread, never another scrape and never
//! the run; it serves figures only and accepts nothing.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::Exporter;

/// How long a client may take to send its request, and to take the answer.
const CLIENT_DEADLINE: Duration = Duration::from_secs(5);
/// A request head longer than this is not a scrape.
const MAX_REQUEST: usize = 8192;
/// Scrapes answered at once.
pub const MAX_CLIENTS: usize = 8;

/// A running endpoint; dropping it stops it.
pub struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Where it listens (the port the system chose, for `:0`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Listens on `addr` and serves `exporter`'s figures on `GET /metrics`; with a `token`, only
/// to scrapes that bring it (`Authorization: Bearer TOKEN`).
pub fn serve(addr: &str, exporter: Exporter, token: Option<String>) -> io::Result<Server> {
    let token = Arc::new(token);
    let listener = TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    let local = listener.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let thread = std::thread::Builder::new().name("iocurve-metrics".into()).spawn(move || {
        let busy = Arc::new(AtomicUsize::new(0));
        while !flag.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((stream, peer)) => {
                    if busy.fetch_add(1, Ordering::SeqCst) >= MAX_CLIENTS {
                        busy.fetch_sub(1, Ordering::SeqCst);
                        tracing::debug!(%peer, "metrics: too many scrapes at once, closed");
                        continue;
                    }
                    let (exporter, done, token) = (exporter.clone(), busy.clone(), token.clone());
                    let spawned = std::thread::Builder::new().name("iocurve-scrape".into()).spawn(move || {
                        if let Err(e) = answer(stream, &exporter, token.as_deref()) {
                            tracing::debug!(%peer, error = %e, "metrics: a scrape failed");
                        }
                        done.fetch_sub(1, Ordering::SeqCst);
                    });
                    if spawned.is_err() {
                        busy.fetch_sub(1, Ordering::SeqCst);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => {
                    // EMFILE and the like: wait for descriptors rather than spin.
                    tracing::warn!(error = %e, "metrics: accept failed");
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
    })?;
    tracing::info!(addr = %local, "metrics endpoint listening");
    Ok(Server { addr: local, stop, thread: Some(thread) })
}

/// True when the request head carries `Authorization: Bearer TOKEN` (compared in constant time).
fn authorized(head: &[u8], token: &str) -> bool {
    let text = String::from_utf8_lossy(head);
    text.lines().any(|l| {
        let Some((name, value)) = l.split_once(':') else { return false };
        let Some(given) = value.trim().strip_prefix("Bearer ") else { return false };
        name.trim().eq_ignore_ascii_case("authorization")
            && given.len() == token.len()
            && given.bytes().zip(token.bytes()).fold(0u8, |d, (a, b)| d | (a ^ b)) == 0
    })
}

fn answer(mut s: TcpStream, exporter: &Exporter, token: Option<&str>) -> io::Result<()> {
    s.set_nonblocking(false)?;
    let deadline = Instant::now() + CLIENT_DEADLINE;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || head.len() > MAX_REQUEST {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "no complete request in time"));
        }
        s.set_read_timeout(Some(left))?;
        match s.read(&mut buf)? {
            0 => return Ok(()),
            n => head.extend_from_slice(&buf[..n]),
        }
    }
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (method, path) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    let path = path.split(|&b| b == b'?').next().unwrap_or_default();
    let (status, kind, body) = match (method, path) {
        (b"GET" | b"HEAD", b"/metrics") if token.is_some_and(|t| !authorized(&head, t)) => (
            "401 Unauthorized",
            "text/plain",
            "this endpoint needs its token: Authorization: Bearer TOKEN\n".to_string(),
        ),
        (b"GET" | b"HEAD", b"/metrics") => {
            ("200 OK", "application/openmetrics-text; version=1.0.0; charset=utf-8", exporter.encode())
        }
        (b"GET" | b"HEAD", _) => ("404 Not Found", "text/plain", "iocurve serves /metrics only\n".to_string()),
        _ => ("405 Method Not Allowed", "text/plain", "GET /metrics\n".to_string()),
    };
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if method != b"HEAD" {
        out.extend_from_slice(body.as_bytes());
    }
    s.set_write_timeout(Some(deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1))))?;
    s.write_all(&out)?;
    s.flush()
}
