//! The agent's front door: the connections it serves pass an [`iocurve_door::Door`] of the
//! agent's own ([`LIMITS`]). Until a peer makes a call with the right token it is a stranger:
//! a few of them per address and per network, a bounded number in all, the oldest evicted when
//! a newer one comes; one byte within a second and that call within
//! [`Limits::first_call`] (TLS handshake included), or it is cut (issue 35, finding 2: idle
//! connections from 8 addresses locked every coordinator out). Accept errors for want of file
//! descriptors or memory back off instead of spinning (issue 15, finding 3: 1,100 idle
//! connections at `ulimit -n 1024` had the agent spin at 100 % CPU and a real run hang).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use iocurve_door::{Door, Held};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::Connected;

pub use iocurve_door::{Limits, Ticket};

/// The agent's door. A coordinator opens one connection per agent and keeps it (it paces its
/// dials to stay below [`Limits::per_address`]); its TLS ClientHello comes at once, and its
/// first call right after the handshake.
pub const LIMITS: Limits = Limits {
    // Authenticated connections are a coordinator's: one per run, and a few more while one
    // waits for another's run to end.
    connections: 512,
    unauthenticated: 128,
    per_network: 32,
    per_address: 8,
    silent: Duration::from_secs(1),
    first_call: Duration::from_secs(10),
};

/// How often the door cuts silent and slow strangers: the silent ones go within 1.25 s.
const SWEEP: Duration = Duration::from_millis(250);

/// What a call learns of its connection (`Request::extensions`, directly or inside
/// `binding::Bound`).
#[derive(Clone)]
pub struct PeerInfo {
    pub ticket: Arc<Ticket>,
}

/// An admitted TCP connection: reads and writes fail once the door cut it (evicted for a
/// newer stranger, silent, or not authenticated in time), which ends the TLS handshake or the
/// HTTP/2 connection.
pub struct Guarded {
    held: Held<TcpStream>,
}

impl Connected for Guarded {
    type ConnectInfo = PeerInfo;

    fn connect_info(&self) -> PeerInfo {
        PeerInfo { ticket: self.held.ticket().clone() }
    }
}

impl Guarded {
    fn cut_error(&self) -> io::Error {
        io::Error::new(io::ErrorKind::ConnectionAborted, "cut at the agent's door: not authenticated")
    }

    /// `polled` as it is, or the cut's error when the door cut the connection while it waited
    /// (the door wakes the task: a stranger that never reads, so that its writes back up, is cut
    /// all the same).
    fn or_cut<T>(&self, cx: &mut Context<'_>, polled: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match polled {
            Poll::Pending if self.held.ticket().watch(cx.waker()) => Poll::Ready(Err(self.cut_error())),
            other => other,
        }
    }
}

impl AsyncRead for Guarded {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if self.held.ticket().is_cut() {
            return Poll::Ready(Err(self.cut_error()));
        }
        let before = buf.filled().len();
        let polled = Pin::new(self.held.io_mut()).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.held.ticket().heard();
        }
        self.or_cut(cx, polled)
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if self.held.ticket().is_cut() {
            return Poll::Ready(Err(self.cut_error()));
        }
        let polled = Pin::new(self.held.io_mut()).poll_write(cx, buf);
        self.or_cut(cx, polled)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.held.ticket().is_cut() {
            return Poll::Ready(Err(self.cut_error()));
        }
        let polled = Pin::new(self.held.io_mut()).poll_flush(cx);
        self.or_cut(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(self.held.io_mut()).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.held.ticket().is_cut() {
            return Poll::Ready(Err(self.cut_error()));
        }
        let polled = Pin::new(self.held.io_mut()).poll_write_vectored(cx, bufs);
        self.or_cut(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.held.io().is_write_vectored()
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

/// The connections the agent serves, from `listener` through its [`Door`]. The accepting task
/// ends when the returned stream is dropped.
pub fn incoming(listener: TcpListener, limits: Limits) -> ReceiverStream<Result<Guarded, io::Error>> {
    let door = Door::new("agent", limits);
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(async move {
        let mut starved = Sparse::new(Duration::from_secs(5));
        let mut sweep = tokio::time::interval(SWEEP);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = sweep.tick() => {
                    door.sweep();
                    continue;
                }
                _ = tx.closed() => break,
            };
            match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    user_timeout(&stream);
                    // None: refused (and reset) when authenticated coordinators hold every
                    // place; the door says so.
                    let Some(held) = door.admit(stream, peer) else { continue };
                    if tx.send(Ok(Guarded { held })).await.is_err() {
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
                    door.sweep();
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

/// The TLS session a call on the agent came on; None in plain text (and in process).
pub fn session_of<T>(req: &tonic::Request<T>) -> Option<std::sync::Arc<crate::binding::Session>> {
    crate::binding::session_of::<PeerInfo, T>(req)
}

/// The interceptor of the agent: a call without the right credentials ([`crate::auth::verify`]) is refused
/// before it runs, and audited with its peer (the trail rate-limits a flood of them: see
/// [`super::audit`]). A call with them marks its connection as no longer a stranger's
/// (see [`ticket_of`]).
pub fn checker(
    keys: Arc<Keys>,
    audit: Arc<super::audit::Audit>,
) -> impl Fn(tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> + Clone {
    move |mut req: tonic::Request<()>| {
        let given = req.metadata().get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("");
        if let Some(proof) = given.strip_prefix(crate::delegation::SCHEME) {
            return match delegated(&req, proof, &keys) {
                Ok(d) => {
                    if let Some(t) = ticket_of(&req) {
                        t.authenticated();
                    }
                    req.extensions_mut().insert(d);
                    Ok(req)
                }
                Err(why) => {
                    let why = why.reason();
                    audit.refused("delegation", "any", &super::audit::Peer::of(&req), &why);
                    Err(tonic::Status::unauthenticated(why))
                }
            };
        }
        match crate::auth::verify::<PeerInfo, ()>(&req, &keys.token) {
            Ok(()) => {
                if let Some(t) = ticket_of(&req) {
                    t.authenticated();
                }
                Ok(req)
            }
            Err(why) => {
                // The method is not known here (an interceptor sees no path): the trail says what
                // was wrong with the credentials, and from where.
                let rule = if why == crate::auth::Refused::BareTokenOverTls { "protocol" } else { "token" };
                audit.refused(rule, "any", &super::audit::Peer::of(&req), why.reason());
                Err(why.status())
            }
        }
    }
}

/// What the agent's interceptor checks calls against: its token, and for calls through a relay
/// (issue 46, docs/relays.md) its own name and whether it takes client certificates.
pub struct Keys {
    pub token: String,
    /// Its certificate's name where that names this host (see [`crate::certs::own_name`]).
    pub name: Option<String>,
    pub mutual_tls: bool,
}

/// Checks a call made through a relay ([`crate::delegation::check`]) on its TLS session.
fn delegated(
    req: &tonic::Request<()>,
    proof: &str,
    keys: &Keys,
) -> Result<crate::delegation::Delegated, crate::delegation::Refused> {
    use crate::delegation::{Child, METADATA, Refused, check};
    let session = session_of(req).ok_or(Refused::PlainText)?;
    let bytes = req.metadata().get_bin(METADATA).ok_or(Refused::Missing)?;
    let bytes = bytes.to_bytes().map_err(|_| Refused::Malformed("not base64"))?;
    let child = Child { name: keys.name.as_deref(), token: &keys.token, mutual_tls: keys.mutual_tls };
    let peer = session.peer_certificates.as_ref().and_then(|c| c.first()).map(|c| c.as_ref());
    let d = check(&child, &bytes, proof, &session.exporter, peer, crate::unix_s())?;
    Ok(crate::delegation::Delegated::of(&d))
}
