//! TLS on both ends done here rather than by tonic, for the one thing tonic's TLS does not give:
//! each connection's TLS exporter (RFC 8446 §7.5, RFC 5705), which binds the token to that
//! connection. A coordinator never sends its token over TLS (issue 35, finding 3: whoever
//! passed the certificate check, an impostor with a host's old key among them, received it);
//! it sends [`proof`], an HMAC of this connection's exporter keyed with the token. The agent
//! computes the same from its side of the connection: a proof taken from one connection, or
//! received by an impostor on its own, opens nothing on any other.
//!
//! The agent's side: [`server_config`] and [`accept`] (handshakes on the connections its front
//! door admitted, [`crate::agent::listen`]), each connection's [`Session`] reaching the calls as
//! [`Bound`] connect info. The coordinator's side: [`client_config`] and [`Connector`], for
//! `Endpoint::connect_with_connector`, which keeps the exporter of the channel's connection in
//! a [`SessionSlot`] for [`crate::auth::Credentials`] to prove the token with.
//!
//! TLS 1.3 only, on both ends: its exporter is bound to the whole handshake (a TLS 1.2 one is
//! only with the extended master secret).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore, ServerConfig};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::transport::server::Connected;

use crate::NetError;

/// The exporter's label (RFC 8446 §7.5: labels of private use start with `EXPORTER-`).
pub const EXPORTER_LABEL: &[u8] = b"EXPORTER-iocurve-token-proof";

/// What the HMAC of a proof covers besides the exporter: names the purpose and the protocol,
/// so that a tag made for anything else never passes as a proof.
const PROOF_LABEL: &[u8] = b"iocurve token proof, protocol 8\0";

/// The scheme of the `authorization` header that carries a proof (a bare token is `Bearer`).
pub const PROOF_SCHEME: &str = "Proof ";

/// A connection's exporter value: 32 bytes, as long as the HMAC's key block needs nothing more.
pub type Exporter = [u8; 32];

/// The proof of `token` on the connection whose exporter is `exporter`: HMAC-SHA-256 keyed
/// with the token over [`PROOF_LABEL`] and the exporter, as 64 hex digits. It shows that the
/// sender holds the token and is the TLS peer of this very connection, and gives away neither.
pub fn proof(token: &str, exporter: &Exporter) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, token.as_bytes());
    let mut ctx = ring::hmac::Context::with_key(&key);
    ctx.update(PROOF_LABEL);
    ctx.update(exporter);
    ctx.sign().as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// The exporter value of an established TLS connection (either side).
fn exporter_of<D>(conn: &rustls::ConnectionCommon<D>) -> io::Result<Exporter> {
    conn.export_keying_material([0u8; 32], EXPORTER_LABEL, None)
        .map_err(|e| io::Error::other(format!("TLS exporter unavailable: {e}")))
}

/// What the agent knows of one TLS connection.
pub struct Session {
    /// This connection's exporter value: what a proof must be made over.
    pub exporter: Exporter,
    /// The coordinator's certificate chain, when it presented one (mutual TLS).
    pub peer_certificates: Option<Arc<Vec<CertificateDer<'static>>>>,
}

/// The connect info of a TLS connection: that of the connection underneath (`inner`: the
/// front door's [`crate::agent::listen::PeerInfo`]) and the TLS session's.
#[derive(Clone)]
pub struct Bound<I> {
    pub inner: I,
    pub session: Arc<Session>,
}

/// The TLS session a call came on, on a connection whose own connect info is `I` (the agent's
/// front door's `PeerInfo`); None in plain text (and in process).
pub fn session_of<I: Send + Sync + 'static, T>(req: &tonic::Request<T>) -> Option<Arc<Session>> {
    req.extensions().get::<Bound<I>>().map(|b| b.session.clone())
}

/// The certificates of a PEM text, at least one (`what` names it in errors).
pub(crate) fn pem_certs(pem: &str, what: &str) -> Result<Vec<CertificateDer<'static>>, NetError> {
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| NetError::Input(format!("{what}: not a PEM certificate ({e})")))?;
    if certs.is_empty() {
        return Err(NetError::Input(format!("{what}: no certificate in it")));
    }
    Ok(certs)
}

pub(crate) fn pem_key(pem: &str, what: &str) -> Result<PrivateKeyDer<'static>, NetError> {
    PrivateKeyDer::from_pem_slice(pem.as_bytes())
        .map_err(|e| NetError::Input(format!("{what}: no private key in it ({e})")))
}

fn roots(pem: &str, what: &str) -> Result<RootCertStore, NetError> {
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(pem_certs(pem, what)?);
    if added == 0 {
        return Err(NetError::Input(format!("{what}: no usable CA certificate in it")));
    }
    Ok(roots)
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn tls_error(e: rustls::Error) -> NetError {
    NetError::Input(format!("TLS set-up failed: {e}"))
}

/// The agent's TLS: its certificate and key, and with `client_ca` mutual TLS (a coordinator
/// must present a certificate that CA signed, and only that CA: after `certs rotate` the old
/// CA's certificates are refused).
pub fn server_config(cert_pem: &str, key_pem: &str, client_ca: Option<&str>) -> Result<Arc<ServerConfig>, NetError> {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(tls_error)?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => builder.with_client_cert_verifier(
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots(ca, "--client-ca")?), provider())
                .build()
                .map_err(|e| NetError::Input(format!("--client-ca: {e}")))?,
        ),
    };
    let mut config = builder
        .with_single_cert(pem_certs(cert_pem, "--tls-cert")?, pem_key(key_pem, "--tls-key")?)
        .map_err(tls_error)?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// The coordinator's TLS: the CA the agents' certificates must come from (only it), and the
/// coordinator's own certificate for agents that demand one.
pub fn client_config(ca_pem: &str, identity: Option<(&str, &str)>) -> Result<Arc<ClientConfig>, NetError> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(tls_error)?
        .with_root_certificates(roots(ca_pem, "--ca")?);
    let mut config = match identity {
        Some((cert, key)) => builder
            .with_client_auth_cert(pem_certs(cert, "--client-cert")?, pem_key(key, "--client-key")?)
            .map_err(tls_error)?,
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// A TLS connection the agent accepted, with its session for the calls on it.
pub struct Secured<IO> {
    tls: tokio_rustls::server::TlsStream<IO>,
    session: Arc<Session>,
}

impl<IO: Connected> Connected for Secured<IO> {
    type ConnectInfo = Bound<IO::ConnectInfo>;

    fn connect_info(&self) -> Self::ConnectInfo {
        Bound { inner: self.tls.get_ref().0.connect_info(), session: self.session.clone() }
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncRead for Secured<IO> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tls).poll_read(cx, buf)
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Secured<IO> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tls).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tls).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tls).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tls).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tls.is_write_vectored()
    }
}

/// The longest a TLS handshake may take here. The front door cuts a silent stranger sooner;
/// this bounds a connection from elsewhere too.
const HANDSHAKE: Duration = Duration::from_secs(10);

/// Does the TLS handshake of every connection `incoming` yields, several at once (a slow or
/// silent peer holds up no other), and yields those that succeed, each with its session. A
/// failed handshake (a certificate refused, a peer that is not TLS) goes to `refused` with the
/// address `peer` names and why (the agent's audit trail), and is dropped. The task ends when
/// the returned stream is dropped or `incoming` ends.
pub fn accept<S, IO>(
    incoming: S,
    config: Arc<ServerConfig>,
    refused: impl Fn(Option<std::net::SocketAddr>, String) + Send + 'static,
    peer: fn(&IO) -> Option<std::net::SocketAddr>,
) -> ReceiverStream<Result<Secured<IO>, io::Error>>
where
    S: Stream<Item = Result<IO, io::Error>> + Send + 'static,
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(async move {
        let mut incoming = std::pin::pin!(incoming);
        let mut handshakes = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                io = incoming.next() => match io {
                    Some(Ok(io)) => {
                        let addr = peer(&io);
                        let accept = acceptor.accept(io);
                        handshakes.spawn(async move {
                            let secured = async {
                                let tls = tokio::time::timeout(HANDSHAKE, accept).await.map_err(|_| {
                                    io::Error::new(io::ErrorKind::TimedOut, "TLS handshake took too long")
                                })??;
                                let session = Session {
                                    exporter: exporter_of(tls.get_ref().1)?,
                                    peer_certificates: tls.get_ref().1.peer_certificates().map(|c| {
                                        Arc::new(c.iter().map(|c| c.clone().into_owned()).collect())
                                    }),
                                };
                                Ok::<_, io::Error>(Secured { tls, session: Arc::new(session) })
                            };
                            secured.await.map_err(|e| (addr, e))
                        });
                    }
                    Some(Err(e)) => tracing::debug!(error = %e, "accept failed"),
                    None => break,
                },
                Some(done) = handshakes.join_next(), if !handshakes.is_empty() => match done {
                    Ok(Ok(secured)) => {
                        if tx.send(Ok(secured)).await.is_err() {
                            break;
                        }
                    }
                    // A coordinator certificate the agent does not trust, a stranger that is
                    // not TLS: refusals for the trail (rate-limited there).
                    Ok(Err((addr, e))) => refused(addr, format!("TLS handshake failed: {e}")),
                    Err(e) => tracing::debug!(error = %e, "TLS handshake task failed"),
                },
                _ = tx.closed() => break,
            }
        }
    });
    ReceiverStream::new(rx)
}

/// How long the coordinator's connector waits for a TCP connection.
pub const TCP_CONNECT: Duration = Duration::from_secs(5);

/// The exporter of a channel's current connection, for the calls on it to prove the token
/// with. Set by [`Connector`] at every connection it makes; None before the first.
#[derive(Clone, Default)]
pub struct SessionSlot(Arc<Mutex<Option<Exporter>>>);

impl SessionSlot {
    pub fn exporter(&self) -> Option<Exporter> {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set(&self, e: Exporter) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
    }
}

/// The coordinator's connector for one agent (`Endpoint::connect_with_connector`, the
/// endpoint's URI in `http://HOST:PORT` form: the TLS is done here): TCP to the URI's
/// authority, TLS that checks the agent's certificate against the CA and `name`, then the
/// connection's exporter into the slot.
#[derive(Clone)]
pub struct Connector {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
    slot: SessionSlot,
}

impl Connector {
    /// A connector whose agents' certificates must name `name` (a host name or an address).
    pub fn new(config: Arc<ClientConfig>, name: &str) -> Result<(Connector, SessionSlot), NetError> {
        let name = ServerName::try_from(name.to_string())
            .map_err(|_| NetError::Input(format!("`{name}` is not a host name or address a certificate can name")))?;
        let slot = SessionSlot::default();
        Ok((Connector { config, name, slot: slot.clone() }, slot))
    }
}

impl tower::Service<tonic::codegen::http::Uri> for Connector {
    type Response = hyper_util::rt::TokioIo<tokio_rustls::client::TlsStream<TcpStream>>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: tonic::codegen::http::Uri) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let authority = uri
                .authority()
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("{uri}: no HOST:PORT")))?;
            // TCP alone is bounded here, as tonic bounds its own connector's: the TLS handshake and
            // the first call are the caller's deadline (an agent stopped with SIGSTOP accepts the
            // connection in its kernel and then says nothing).
            let tcp =
                tokio::time::timeout(TCP_CONNECT, TcpStream::connect(authority.as_str())).await.map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("no TCP connection within {} s", TCP_CONNECT.as_secs()),
                    )
                })??;
            tcp.set_nodelay(true)?;
            let tls = tokio_rustls::TlsConnector::from(this.config).connect(this.name, tcp).await?;
            if tls.get_ref().1.alpn_protocol() != Some(b"h2") {
                return Err(io::Error::other("the agent did not agree to HTTP/2 (ALPN h2)"));
            }
            this.slot.set(exporter_of(tls.get_ref().1)?);
            Ok(hyper_util::rt::TokioIo::new(tls))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known answer, computed apart from this code (Python's hmac module):
    /// hmac.new(b"t"*32, b"iocurve token proof, protocol 8\0" + bytes(range(32)), sha256).
    #[test]
    fn a_proof_is_the_hmac_of_label_and_exporter_keyed_with_the_token() {
        let exporter: Exporter = std::array::from_fn(|i| i as u8);
        let token = "t".repeat(32);
        assert_eq!(proof(&token, &exporter), KNOWN);
        // Another connection, another token: another proof; and never the token itself.
        let mut other = exporter;
        other[31] ^= 1;
        assert_ne!(proof(&token, &other), KNOWN);
        assert_ne!(proof(&"u".repeat(32), &exporter), KNOWN);
        assert!(!proof(&token, &exporter).contains(&token));
    }

    const KNOWN: &str = "60c470bb89543a4c944db2c2a17c0e736b0ae37c5b37d859fa305580ed245376";
}
