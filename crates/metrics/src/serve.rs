//! The `/metrics` endpoint: a small HTTP/1.1 server on a thread of its own. Its connections
//! pass a [`Door`] of their own ([`LIMITS`]): until a request brings the token (or, without a
//! token, until its request is complete) a connection is a stranger's, a few per address and
//! per network, the oldest evicted when a newer one comes, cut when it sends nothing within a
//! second or no request within [`REQUEST_DEADLINE`] (issue 35, finding 2: 4 addresses × 2
//! silent connections kept every scraper out). Each scrape gets a thread and deadlines, so that
//! a stalled or hostile client costs a few seconds of one thread, never another scraper and
//! never the run; it serves figures only and accepts nothing.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use iocurve_door::{Door, Held, Limits};

use crate::{Exporter, Format, proto};

/// How long a client may take to send its request (a scraper sends it at once)…
const REQUEST_DEADLINE: Duration = Duration::from_secs(2);
/// …and to take the answer.
const ANSWER_DEADLINE: Duration = Duration::from_secs(5);
/// A request head longer than this is not a scrape.
const MAX_REQUEST: usize = 8192;

/// The endpoint's door. A scraper (Prometheus) keeps no connection open between scrapes: it
/// connects, sends its request at once and takes the answer.
pub const LIMITS: Limits = Limits {
    // Scrapes answered at once.
    connections: 16,
    unauthenticated: 8,
    per_network: 4,
    per_address: 2,
    silent: Duration::from_secs(1),
    first_call: REQUEST_DEADLINE,
};

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
        let door = Door::new("metrics", LIMITS);
        let mut last_warning: Option<Instant> = None;
        while !flag.load(Ordering::Relaxed) {
            // Silent and slow strangers are cut here, at least every 20 ms.
            door.sweep();
            match listener.accept() {
                Ok((stream, peer)) => {
                    // None: every place is held by scrapes that brought the token (the door
                    // reset this one and says so); a flood of them costs this thread a sleep
                    // each, not a core.
                    let Some(held) = door.admit(stream, peer) else {
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    };
                    let (exporter, token) = (exporter.clone(), token.clone());
                    // A thread that never started drops the closure, and the connection with it.
                    let _ = std::thread::Builder::new().name("iocurve-scrape".into()).spawn(move || {
                        if let Err(e) = answer(held, &exporter, token.as_deref()) {
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

fn answer(mut held: Held<TcpStream>, exporter: &Exporter, token: Option<&str>) -> io::Result<()> {
    let ticket = held.ticket().clone();
    let s = held.io_mut();
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
        // The door cutting this connection ends a read here with 0.
        match s.read(&mut buf)? {
            0 => return Ok(()),
            n => {
                ticket.heard();
                head.extend_from_slice(&buf[..n]);
            }
        }
    }
    // A scrape that brings the token (or any complete request, without one) is no stranger's:
    // the door neither counts nor cuts it while it is answered.
    if token.is_none_or(|t| authorized(&head, t)) {
        ticket.authenticated();
    }
    let out = response(&head, token, |f| exporter.encode_as(f));
    s.set_write_timeout(Some(ANSWER_DEADLINE))?;
    s.write_all(&out)?;
    s.flush()
}
