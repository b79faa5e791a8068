//! The agent's front door. Until a peer makes a call with the right token it gets little: a
//! few connections per address, a bounded number in all, and [`Limits::first_call`] from its
//! TCP connection to that call, TLS handshake included — a peer that stays silent, stalls its
//! handshake or sends nothing authenticated is cut off then. Accept errors for want of file
//! descriptors or memory back off instead of spinning (issue 15, finding 3: 1,100 idle
//! connections at `ulimit -n 1024` had the agent spin at 100 % CPU and a real run hang).

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Sleep;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::Connected;

/// What the front door admits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections at once, authenticated or not.
    pub connections: usize,
    /// Connections at once that have not yet made an authenticated call.
    pub unauthenticated: usize,
    /// Of those, from one address.
    pub unauthenticated_per_peer: usize,
    /// From the TCP connection to the first authenticated call.
    pub first_call: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            connections: 512,
            unauthenticated: 128,
            unauthenticated_per_peer: 16,
            first_call: Duration::from_secs(10),
        }
    }
}

#[derive(Default)]
struct Counts {
    total: usize,
    unauthenticated: usize,
    per_peer: HashMap<IpAddr, usize>,
}

/// What counts as one peer: an IPv4 address, or an IPv6 /64 (a host may hold a whole /64).
fn peer_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => IpAddr::V6(std::net::Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
    }
}

struct Gate {
    limits: Limits,
    counts: Mutex<Counts>,
}

impl Gate {
    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A ticket for a new connection from `peer`, or None when it is one too many.
    fn admit(self: &Arc<Self>, peer: SocketAddr) -> Option<Arc<Ticket>> {
        let mut c = self.counts();
        let from_peer = c.per_peer.get(&peer_key(peer.ip())).copied().unwrap_or(0);
        if c.total >= self.limits.connections
            || c.unauthenticated >= self.limits.unauthenticated
            || from_peer >= self.limits.unauthenticated_per_peer
        {
            return None;
        }
        c.total += 1;
        c.unauthenticated += 1;
        *c.per_peer.entry(peer_key(peer.ip())).or_default() += 1;
        Some(Arc::new(Ticket { gate: self.clone(), peer, authenticated: AtomicBool::new(false) }))
    }

    fn release_unauthenticated(&self, c: &mut Counts, ip: IpAddr) {
        c.unauthenticated -= 1;
        let key = peer_key(ip);
        if let Some(n) = c.per_peer.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                c.per_peer.remove(&key);
            }
        }
    }
}

/// A connection's place at the door, given back when the connection ends.
pub struct Ticket {
    gate: Arc<Gate>,
    peer: SocketAddr,
    authenticated: AtomicBool,
}

impl Ticket {
    /// The connection carried a call with the right token: it is no longer a stranger's, and
    /// its first-call deadline no longer applies.
    pub fn authenticated(&self) {
        if !self.authenticated.swap(true, Ordering::AcqRel) {
            let mut c = self.gate.counts();
            self.gate.release_unauthenticated(&mut c, self.peer.ip());
        }
    }

    pub fn peer(&self) -> SocketAddr {
        self.peer
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut c = self.gate.counts();
        c.total -= 1;
        if !self.authenticated.load(Ordering::Acquire) {
            self.gate.release_unauthenticated(&mut c, self.peer.ip());
        }
    }
}

/// What a call learns of its connection (`Request::extensions`, directly or inside
/// `binding::Bound`).
#[derive(Clone)]
pub struct PeerInfo {
    pub ticket: Arc<Ticket>,
}

/// An admitted TCP connection: reads fail once the first-call deadline passes without an
/// authenticated call, which ends the TLS handshake or the HTTP/2 connection.
pub struct Guarded {
    io: TcpStream,
    ticket: Arc<Ticket>,
    deadline: Pin<Box<Sleep>>,
}

impl Connected for Guarded {
    type ConnectInfo = PeerInfo;

    fn connect_info(&self) -> PeerInfo {
        PeerInfo { ticket: self.ticket.clone() }
    }
}

impl Guarded {
    /// The first-call deadline, checked (and its timer armed) on every read, write and flush:
    /// a stranger that never reads, so that the connection's writes back up and it is read no
    /// more, is cut all the same.
    fn expired(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        if self.ticket.authenticated.load(Ordering::Acquire) || self.deadline.as_mut().poll(cx).is_pending() {
            return None;
        }
        tracing::warn!(peer = %self.ticket.peer, "connection cut: no authenticated call within the deadline");
        Some(io::Error::new(io::ErrorKind::TimedOut, "no authenticated call in time"))
    }
}

impl AsyncRead for Guarded {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if let Some(e) = self.expired(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if let Some(e) = self.expired(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some(e) = self.expired(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// One warning per `every` for a kind of event that may come by the thousand, with the count
/// of those not logged.
struct Sparse {
    every: Duration,
    last: Option<Instant>,
    quiet: u64,
}

impl Sparse {
    fn new(every: Duration) -> Sparse {
        Sparse { every, last: None, quiet: 0 }
    }

    /// Whether to log now, and how many went unlogged before.
    fn due(&mut self) -> Option<u64> {
        if self.last.is_some_and(|t| t.elapsed() < self.every) {
            self.quiet += 1;
            return None;
        }
        self.last = Some(Instant::now());
        Some(std::mem::take(&mut self.quiet))
    }
}

/// The connections the agent serves, from `listener` through the door. The accepting task ends
/// when the returned stream is dropped.
pub fn incoming(listener: TcpListener, limits: Limits) -> ReceiverStream<Result<Guarded, io::Error>> {
    let gate = Arc::new(Gate { limits, counts: Mutex::default() });
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(async move {
        let mut refused = Sparse::new(Duration::from_secs(5));
        let mut starved = Sparse::new(Duration::from_secs(5));
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = tx.closed() => break,
            };
            match accepted {
                Ok((stream, peer)) => {
                    let Some(ticket) = gate.admit(peer) else {
                        if let Some(more) = refused.due() {
                            tracing::warn!(%peer, more, "connection refused: too many connections not yet authenticated");
                        }
                        drop(stream);
                        continue;
                    };
                    let _ = stream.set_nodelay(true);
                    user_timeout(&stream);
                    let deadline = Box::pin(tokio::time::sleep(limits.first_call));
                    if tx.send(Ok(Guarded { io: stream, ticket, deadline })).await.is_err() {
                        break;
                    }
                }
                Err(e) if out_of_resources(&e) => {
                    // The pending connection stays in the backlog; accepting again at once
                    // would fail again at once.
                    if let Some(more) = starved.due() {
                        tracing::warn!(error = %e, more, "cannot accept connections: backing off");
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                // The peer gave up before it was accepted (ECONNABORTED and the like).
                Err(e) => tracing::debug!(error = %e, "accept failed"),
            }
        }
    });
    ReceiverStream::new(rx)
}

/// Data this connection sent must be acknowledged within 30 s, or the kernel drops it: a peer
/// that stops reading (a zero window, probed forever otherwise) or vanishes does not hold its
/// connection.
fn user_timeout(stream: &TcpStream) {
    use std::os::fd::AsRawFd;
    let ms: libc::c_uint = 30_000;
    // SAFETY: setsockopt on a socket this process owns, with a valid option value.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_USER_TIMEOUT,
            (&ms as *const libc::c_uint).cast(),
            std::mem::size_of::<libc::c_uint>() as libc::socklen_t,
        );
    }
}

/// Accept errors that say the process or the system ran out of something.
fn out_of_resources(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM))
}

/// The admission ticket of the connection a call came on (None for the in-process agent).
pub fn ticket_of<T>(req: &tonic::Request<T>) -> Option<Arc<Ticket>> {
    let ext = req.extensions();
    ext.get::<PeerInfo>()
        .or_else(|| ext.get::<crate::binding::Bound<PeerInfo>>().map(|b| &b.inner))
        .map(|p| p.ticket.clone())
}

/// How the logs name the peer of a call.
pub fn peer_of<T>(req: &tonic::Request<T>) -> String {
    ticket_of(req).map_or_else(|| "in-process".into(), |t| t.peer().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_counts_strangers_per_address_and_frees_their_places() {
        let gate = Arc::new(Gate {
            limits: Limits { connections: 4, unauthenticated: 3, unauthenticated_per_peer: 2, ..Limits::default() },
            counts: Mutex::default(),
        });
        let a: SocketAddr = "10.0.0.1:1000".parse().unwrap();
        let b: SocketAddr = "10.0.0.2:1000".parse().unwrap();
        let a1 = gate.admit(a).unwrap();
        let a2 = gate.admit(a).unwrap();
        assert!(gate.admit(a).is_none(), "two strangers per address");
        let b1 = gate.admit(b).unwrap();
        assert!(gate.admit(b).is_none(), "three strangers in all");
        a1.authenticated();
        a1.authenticated();
        let b2 = gate.admit(b).unwrap();
        assert!(gate.admit(b).is_none(), "four connections in all");
        drop(a2);
        let a3 = gate.admit(a).unwrap();
        // IPv6: one /64 is one peer.
        let v6 = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert_eq!(peer_key(v6("[2001:db8::1]:1").ip()), peer_key(v6("[2001:db8::ffff:1]:1").ip()));
        assert_ne!(peer_key(v6("[2001:db8::1]:1").ip()), peer_key(v6("[2001:db8:0:1::1]:1").ip()));
        drop((a1, a3, b1, b2));
        let c = gate.counts();
        assert_eq!((c.total, c.unauthenticated, c.per_peer.len()), (0, 0, 0), "every place given back");
    }
}
