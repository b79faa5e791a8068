//! The `/metrics` endpoint: a small HTTP/1.1 server on a thread of its own. Each scrape gets a
//! thread and deadlines, at most [`MAX_CLIENTS`] at once and [`MAX_PER_PEER`] per address
//! (more are closed at once), so that a stalled or hostile client costs a few seconds of one
//! thread and starves only itself, never another scraper and never the run; it serves figures
//! only and accepts nothing.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::{Exporter, Format, proto};

/// How long a client may take to send its request (a scraper sends it at once)…
const REQUEST_DEADLINE: Duration = Duration::from_secs(2);
/// …and to take the answer.
const ANSWER_DEADLINE: Duration = Duration::from_secs(5);
/// Scrapes answered at once for one address: a peer that holds connections open silently
/// starves only itself.
pub const MAX_PER_PEER: usize = 2;
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

/// A scrape's place among those answered at once, given back on drop.
struct Slot {
    ip: IpAddr,
    peers: Arc<std::sync::Mutex<HashMap<IpAddr, usize>>>,
    busy: Arc<AtomicUsize>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut p = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = p.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                p.remove(&self.ip);
            }
        }
        self.busy.fetch_sub(1, Ordering::SeqCst);
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
        let peers: Arc<std::sync::Mutex<HashMap<IpAddr, usize>>> = Arc::default();
        let mut last_warning: Option<Instant> = None;
        while !flag.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((stream, peer)) => {
                    let ip = peer.ip();
                    let admitted = {
                        let mut p = peers.lock().unwrap_or_else(|e| e.into_inner());
                        let n = p.entry(ip).or_default();
                        let ok = *n < MAX_PER_PEER && busy.load(Ordering::SeqCst) < MAX_CLIENTS;
                        if ok {
                            *n += 1;
                            busy.fetch_add(1, Ordering::SeqCst);
                        }
                        ok
                    };
                    if !admitted {
                        tracing::debug!(%peer, "metrics: too many scrapes at once, closed");
                        drop(stream);
                        // A flood of connections costs this thread a sleep each, not a core.
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    }
                    // Gives the slots back when the scrape ends, or when its thread never started
                    // (the closure holding it is dropped then).
                    let slot = Slot { ip, peers: peers.clone(), busy: busy.clone() };
                    let (exporter, token) = (exporter.clone(), token.clone());
                    let _ = std::thread::Builder::new().name("iocurve-scrape".into()).spawn(move || {
                        let _slot = slot;
                        if let Err(e) = answer(stream, &exporter, token.as_deref()) {
                            tracing::debug!(%peer, error = %e, "metrics: a scrape failed");
                        }
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => {
                    // EMFILE and the like: wait for descriptors rather than spin, and say so
                    // once a minute, not five times a second over the progress line.
                    if last_warning.is_none_or(|t| t.elapsed() >= Duration::from_secs(60)) {
                        tracing::warn!(error = %e, "metrics: accept failed");
                        last_warning = Some(Instant::now());
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
    })?;
    tracing::info!(addr = %local, "metrics endpoint listening");
    Ok(Server { addr: local, stop, thread: Some(thread) })
}

/// The whole HTTP response to a request head (untrusted bytes: fuzzed as `metrics_request`):
/// the figures for `GET /metrics` (with the token, when one is set; `HEAD` without the body) in
/// the format the request accepts ([`format`]), 401, 404 or 405 otherwise. `figures` is called
/// only for a request that gets them.
pub fn response(head: &[u8], token: Option<&str>, figures: impl FnOnce(Format) -> Vec<u8>) -> Vec<u8> {
    let line = head.split(|&b| b == b'\r' || b == b'\n').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (method, path) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    let path = path.split(|&b| b == b'?').next().unwrap_or_default();
    let (status, kind, body) = match (method, path) {
        (b"GET" | b"HEAD", b"/metrics") if token.is_some_and(|t| !authorized(head, t)) => {
            ("401 Unauthorized", "text/plain", b"this endpoint needs its token: Authorization: Bearer TOKEN\n".to_vec())
        }
        (b"GET" | b"HEAD", b"/metrics") => match format(head) {
            Format::Text => {
                ("200 OK", "application/openmetrics-text; version=1.0.0; charset=utf-8", figures(Format::Text))
            }
            Format::Protobuf => ("200 OK", proto::CONTENT_TYPE, figures(Format::Protobuf)),
        },
        (b"GET" | b"HEAD", _) => ("404 Not Found", "text/plain", b"iocurve serves /metrics only\n".to_vec()),
        _ => ("405 Method Not Allowed", "text/plain", b"GET /metrics\n".to_vec()),
    };
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if method != b"HEAD" {
        out.extend_from_slice(&body);
    }
    out
}

/// The format a request head's `Accept` prefers: Prometheus' protobuf format when it is offered
/// at least as high as any text type (a Prometheus with native histograms enabled asks so),
/// OpenMetrics text otherwise — also without an `Accept`.
pub fn format(head: &[u8]) -> Format {
    let text = String::from_utf8_lossy(head);
    let (mut protobuf, mut plain) = (0.0f64, 0.0f64);
    for line in text.lines().skip(1) {
        let Some((name, value)) = line.split_once(':') else { continue };
        if !name.trim().eq_ignore_ascii_case("accept") {
            continue;
        }
        for range in value.split(',') {
            let mut parts = range.split(';').map(str::trim);
            let kind = parts.next().unwrap_or_default().to_ascii_lowercase();
            // Protobuf only as Prometheus asks for it: this message, length-delimited.
            let (mut q, mut proto_ok, mut delimited) = (1.0f64, false, false);
            for p in parts {
                let Some((k, v)) = p.split_once('=') else { continue };
                let v = v.trim().trim_matches('"');
                match k.trim().to_ascii_lowercase().as_str() {
                    "q" => q = v.parse::<f64>().ok().filter(|q| (0.0..=1.0).contains(q)).unwrap_or(0.0),
                    "proto" => proto_ok = v == "io.prometheus.client.MetricFamily",
                    "encoding" => delimited = v == "delimited",
                    _ => {}
                }
            }
            match kind.as_str() {
                "application/vnd.google.protobuf" if proto_ok && delimited => protobuf = protobuf.max(q),
                "application/openmetrics-text" | "text/plain" | "text/*" | "application/*" | "*/*" => {
                    plain = plain.max(q)
                }
                _ => {}
            }
        }
    }
    if protobuf > 0.0 && protobuf >= plain { Format::Protobuf } else { Format::Text }
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
    let deadline = Instant::now() + REQUEST_DEADLINE;
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
    let out = response(&head, token, |f| exporter.encode_as(f));
    s.set_write_timeout(Some(ANSWER_DEADLINE))?;
    s.write_all(&out)?;
    s.flush()
}
