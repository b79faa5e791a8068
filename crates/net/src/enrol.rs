//! Enrolment of an agent in a Kubernetes pod (`iocurve agent --enrol`, `run --launch pods`,
//! issue 46): the pods of an Indexed Job share one template, so no Secret can be one pod's
//! alone; instead each agent gets the run's credentials from the coordinator when the run
//! starts, the way a launched agent reads them on its standard input.
//!
//! The agent listens on its port with a certificate it made itself and demands a client
//! certificate from the coordinator's CA (public: a ConfigMap). To a client that has one it
//! writes its pod's projected service-account token (`{"pod_token": …}`, one line); the
//! coordinator checks the token offline ([`crate::podtoken`]: the cluster's signature, the
//! audience, the pod's namespace, account and name against the host it dialled) and answers
//! with the host's credentials for this run ([`crate::launched::encode`]: a certificate naming
//! the host, from the run's own CA, and a token of its own) or `refused: WHY`; the agent says
//! `ok`. The agent then serves that one run with those credentials on the same port, as a
//! launched agent does, and ends with it.
//!
//! Why it holds: the token goes only to the holder of the coordinator's client key (TLS 1.3
//! client authentication signs the handshake, so the connection cannot be relayed); the
//! credentials go only over the connection the token came on, to whoever holds the server key
//! of that handshake — the pod whose kubelet wrote the token. A token taken from a pod names
//! that pod only, and expires within the hour. No pod ever holds another pod's key, and
//! nothing secret is in the manifests.

use std::io::{BufRead, BufReader, Read as _, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use tokio_rustls::rustls;
use tokio_rustls::rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};

use crate::NetError;
use crate::agent::audit::{Audit, Peer};
use crate::certs::HostCredentials;
use crate::launched;
use crate::podtoken::{MAX_TOKEN, PodKeys};

/// How long one enrolment may take, each way (a peer that says nothing frees its slot then).
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// A coordinator's TLS handshake takes milliseconds; a peer that has not finished its own in
/// this long frees its slot (strangers must not keep the coordinator out for long).
const HANDSHAKE: Duration = Duration::from_secs(2);

/// Enrolments under way at once on an agent: strangers that connect and say nothing hold at
/// most this many slots, each for [`HANDSHAKE`].
const AT_ONCE: usize = 8;

/// The agent's side: waits on `listen` until a coordinator holding a certificate of
/// `client_ca_pem` takes the pod's token (read from `token_file` at each attempt: the kubelet
/// renews it) and gives this run's credentials, or `wait` is over. Every attempt goes to the
/// audit trail (refusals rate-limited there, as the agent's calls are).
/// Gives the credentials and the listening socket, for the run to be served on.
pub fn wait(
    listen: SocketAddr,
    client_ca_pem: &str,
    token_file: &Path,
    wait: Duration,
    audit: &Audit,
) -> Result<(Enrolled, TcpListener), NetError> {
    // A certificate of its own, only for this exchange: the coordinator knows the pod by its
    // token, not by this.
    let own = rcgen::generate_simple_self_signed(vec!["iocurve-enrol".to_string()])
        .map_err(|e| NetError::Failed(format!("cannot make the enrolment certificate: {e}")))?;
    let mut config =
        (*crate::binding::server_config(&own.cert.pem(), &own.signing_key.serialize_pem(), Some(client_ca_pem))?)
            .clone();
    config.alpn_protocols.clear();
    let config = Arc::new(config);
    // The token must be there before anyone is told to come.
    read_pod_token(token_file)?;
    let listener = TcpListener::bind(listen).map_err(|e| NetError::Input(format!("cannot listen on {listen}: {e}")))?;
    listener.set_nonblocking(true).map_err(|e| NetError::Failed(format!("listening socket: {e}")))?;
    let local = listener.local_addr().map_err(|e| NetError::Failed(format!("listening socket: {e}")))?;
    audit.note(&format!("waiting on {local} for a coordinator to enrol this pod"), None);
    let until = Instant::now() + wait;
    let (tx, rx) = mpsc::channel::<Enrolled>();
    let busy = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let got = std::thread::scope(|scope| {
        loop {
            if let Ok(c) = rx.try_recv() {
                return Ok(c);
            }
            if Instant::now() >= until {
                return Err(NetError::Failed(format!(
                    "no coordinator enrolled this pod within {} s (--enrol-wait-s)",
                    wait.as_secs()
                )));
            }
            let (stream, peer) = match listener.accept() {
                Ok(s) => s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
                Err(e) => {
                    audit.note(&format!("accept failed: {e}"), None);
                    std::thread::sleep(Duration::from_millis(200));
                    continue;
                }
            };
            if busy.load(std::sync::atomic::Ordering::Relaxed) >= AT_ONCE {
                drop(stream);
                continue;
            }
            busy.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let (config, tx, slot) = (config.clone(), tx.clone(), busy.clone());
            // A thread that cannot be made drops the connection (the coordinator tries again).
            let made = std::thread::Builder::new().spawn_scoped(scope, move || {
                let who = Peer { addr: Some(peer), identity: None, delegation: None };
                match answer(stream, config, token_file) {
                    Ok(c) => {
                        audit.accepted("enrol", &who, "enrolled for one run: its credentials came");
                        let _ = tx.send(c);
                    }
                    Err(why) => audit.refused("enrol", "enrol", &who, &why),
                }
                slot.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            });
            if made.is_err() {
                busy.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    })?;
    // The same socket serves the run: the coordinator dials again at once.
    Ok((got, listener))
}

fn read_pod_token(path: &Path) -> Result<String, NetError> {
    let t = std::fs::read_to_string(path)
        .map_err(|e| NetError::Input(format!("--enrol {}: cannot read the pod's token: {e}", path.display())))?;
    let t = t.trim().to_string();
    if t.is_empty() || t.len() > MAX_TOKEN {
        return Err(NetError::Input(format!(
            "--enrol {}: not a projected service-account token (empty, or over {MAX_TOKEN} bytes)",
            path.display()
        )));
    }
    Ok(t)
}

/// One coordinator's attempt, on the agent: TLS (its client certificate checked), the token
/// out, the credentials in.
fn answer(stream: TcpStream, config: Arc<rustls::ServerConfig>, token_file: &Path) -> Result<Enrolled, String> {
    stream.set_nonblocking(false).map_err(|e| e.to_string())?;
    // A peer that drips a byte at a time meets no read timeout: the handshake ends after
    // [`HANDSHAKE`], the whole exchange after [`TIMEOUT`], whatever it sends.
    let t0 = Instant::now();
    let sock = Deadline { sock: stream, until: t0 + HANDSHAKE };
    let conn = rustls::ServerConnection::new(config).map_err(|e| e.to_string())?;
    let mut tls = rustls::StreamOwned::new(conn, sock);
    // The handshake completes here: a client without the CA's certificate gets nothing.
    while tls.conn.is_handshaking() {
        tls.conn.complete_io(&mut tls.sock).map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                format!("TLS: no handshake within {} s", HANDSHAKE.as_secs())
            }
            _ => format!("TLS: {e}"),
        })?;
    }
    tls.sock.until = t0 + TIMEOUT;
    let token = read_pod_token(token_file).map_err(|e| e.to_string())?;
    let line = format!("{}\n", serde_json::json!({ "pod_token": token }));
    tls.write_all(line.as_bytes()).and_then(|()| tls.flush()).map_err(|e| format!("sending the token: {e}"))?;
    let mut line = Vec::new();
    BufReader::new(&mut tls)
        .take(launched::MAX_LINE as u64 + 1)
        .read_until(b'\n', &mut line)
        .map_err(|e| format!("waiting for the credentials: {e}"))?;
    if let Some(why) = line.strip_prefix(b"refused:") {
        let why = String::from_utf8_lossy(why);
        return Err(format!("the coordinator says: {}", why.trim()));
    }
    // How long the coordinator may take to dial again: it enrols every pod first.
    let claim_within = serde_json::from_slice::<serde_json::Value>(&line)
        .ok()
        .and_then(|v| v.get("claim_within_s").and_then(serde_json::Value::as_u64))
        .map_or(crate::agent::UNCLAIMED, |s| Duration::from_secs(s.clamp(1, MAX_CLAIM_WITHIN_S)));
    let creds = launched::read(&mut line.as_slice()).map_err(|e| e.to_string())?;
    if crate::unix_ns() / 1_000_000_000 >= creds.expires_unix as i64 {
        let _ = tls.write_all(b"refused: the credentials have expired\n");
        return Err("the credentials have expired already".into());
    }
    tls.write_all(b"ok\n").and_then(|()| tls.flush()).map_err(|e| format!("confirming: {e}"))?;
    tls.conn.send_close_notify();
    let _ = tls.conn.complete_io(&mut tls.sock);
    Ok(Enrolled { creds, claim_within })
}

/// What an agent's enrolment gives it: the run's credentials, and how long to wait for the
/// coordinator's first call (which comes once every pod is enrolled).
pub struct Enrolled {
    pub creds: HostCredentials,
    pub claim_within: Duration,
}

/// The longest an enrolled agent waits for its coordinator's first call, whatever the
/// coordinator says: a day.
pub const MAX_CLAIM_WITHIN_S: u64 = 86_400;

/// Why an enrolment failed, and whether trying again may help (nothing answered yet: a pod
/// still starting) or not (the pod was refused, or took the credentials and said otherwise).
#[derive(Debug)]
pub struct Failed {
    pub again: bool,
    pub why: String,
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

/// The coordinator's side: enrols the agent at `addr` (HOST:PORT), which must be the pod at
/// `host`, with `creds`; `client` is the coordinator's certificate and key (from the CA the
/// agents' `--client-ca` names).
pub fn enrol(
    addr: &str,
    host: &str,
    client: (&str, &str),
    keys: &PodKeys,
    creds: &HostCredentials,
    claim_within: Duration,
) -> Result<(), Failed> {
    let again = |why: String| Failed { again: true, why };
    let not = |why: String| Failed { again: false, why };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs = crate::binding::pem_certs(client.0, "--client-cert").map_err(|e| not(e.to_string()))?;
    let key = crate::binding::pem_key(client.1, "--client-key").map_err(|e| not(e.to_string()))?;
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| not(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(PodsOwnCertificate(provider)))
        .with_client_auth_cert(certs, key)
        .map_err(|e| not(format!("--client-cert/--client-key: {e}")))?;
    let sock: SocketAddr = std::net::ToSocketAddrs::to_socket_addrs(addr)
        .map_err(|e| again(format!("cannot resolve {addr}: {e}")))?
        .next()
        .ok_or_else(|| again(format!("{addr} resolves to no address")))?;
    let stream =
        TcpStream::connect_timeout(&sock, TIMEOUT).map_err(|e| again(format!("cannot connect to {addr}: {e}")))?;
    // However the pod drips its bytes, the enrolment ends within [`TIMEOUT`].
    let stream = Deadline { sock: stream, until: Instant::now() + TIMEOUT };
    let name = ServerName::try_from("iocurve-enrol").map_err(|e| not(e.to_string()))?;
    let conn = rustls::ClientConnection::new(Arc::new(config), name).map_err(|e| not(e.to_string()))?;
    let mut tls = rustls::StreamOwned::new(conn, stream);
    let mut reader = BufReader::new(&mut tls);
    let mut line = Vec::new();
    std::io::Read::take(&mut reader, MAX_TOKEN as u64 + 64)
        .read_until(b'\n', &mut line)
        .map_err(|e| again(format!("{addr}: no pod token came ({e}); is it an agent started with --enrol, and does its --client-ca hold the CA of --client-cert?")))?;
    let token = serde_json::from_slice::<serde_json::Value>(&line)
        .ok()
        .and_then(|v| v.get("pod_token").and_then(|t| t.as_str()).map(str::to_string))
        .ok_or_else(|| not(format!("{addr}: it did not send a pod token (is it an agent started with --enrol?)")))?;
    let checked =
        keys.verify(&token, crate::unix_ns() / 1_000_000_000).and_then(|claims| claims.is_host(host).map(|()| claims));
    let claims = match checked {
        Ok(c) => c,
        Err(why) => {
            let _ = tls.write_all(format!("refused: {why}\n").as_bytes()).and_then(|()| tls.flush());
            return Err(not(format!("not enrolled: {why}")));
        }
    };
    tls.write_all(launched::encode_claim(creds, Some(claim_within.as_secs().max(1))).as_bytes())
        .and_then(|()| tls.flush())
        .map_err(|e| not(format!("{addr}: sending the credentials: {e}")))?;
    let mut ok = String::new();
    BufReader::new(&mut tls).take(256).read_line(&mut ok).map_err(|e| not(format!("{addr}: no confirmation: {e}")))?;
    if ok.trim() != "ok" {
        return Err(not(format!("pod {}: {}", claims.pod, ok.trim())));
    }
    Ok(())
}

/// A socket whose reads and writes all end by `until`: each waits at most what is left, so a
/// peer cannot stretch the exchange by sending a byte at a time.
struct Deadline {
    sock: TcpStream,
    until: Instant,
}

impl Deadline {
    fn left(&self) -> std::io::Result<Duration> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "the peer took too long"));
        }
        Ok(left)
    }
}

impl std::io::Read for Deadline {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.sock.set_read_timeout(Some(self.left()?))?;
        self.sock.read(buf)
    }
}

impl Write for Deadline {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.sock.set_write_timeout(Some(self.left()?))?;
        self.sock.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.sock.flush()
    }
}

/// The enrolment's server check: any certificate, its handshake signature verified with its
/// key (so that the connection is with that key's holder); who the pod is, its token says.
#[derive(Debug)]
struct PodsOwnCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for PodsOwnCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        // TLS 1.3 only (the config allows no other).
        Err(rustls::Error::PeerIncompatible(rustls::PeerIncompatible::Tls12NotOffered))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certs::RunCredentials;
    use crate::podtoken::tests::Issuer;

    const HOST: &str = "iocurve-agent-2.iocurve-agent.lab.svc";
    /// How long the tests' coordinator tells a pod to wait for its first call.
    const CLAIM: Duration = Duration::from_secs(77);

    struct Pod {
        dir: tempfile::TempDir,
        addr: String,
        done: std::thread::JoinHandle<Result<HostCredentials, NetError>>,
    }

    /// An agent's enrolment wait on loopback, its pod token written by `issuer` for `pod`.
    fn pod(issuer: &Issuer, pod: &str, ca: &str, wait: Duration) -> Pod {
        let dir = tempfile::tempdir().unwrap();
        let now = crate::unix_ns() / 1_000_000_000;
        std::fs::write(dir.path().join("token"), issuer.sign(&Issuer::pod_claims("lab", pod, now))).unwrap();
        // A free port, then listened on by the wait.
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let listen: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let (ca, token) = (ca.to_string(), dir.path().join("token"));
        let done = std::thread::spawn(move || wait_for(listen, &ca, &token, wait));
        // Until it listens.
        let t0 = Instant::now();
        while TcpStream::connect(listen).is_err() && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        Pod { dir, addr: listen.to_string(), done }
    }

    fn wait_for(listen: SocketAddr, ca: &str, token: &Path, w: Duration) -> Result<HostCredentials, NetError> {
        wait(listen, ca, token, w, &Audit::new(None).unwrap()).map(|(e, _)| {
            assert_eq!(e.claim_within, CLAIM, "as the coordinator said");
            e.creds
        })
    }

    #[test]
    fn the_pod_named_by_its_token_gets_its_credentials_and_no_other_does() {
        let issuer = Issuer::new();
        let keys = PodKeys::from_jwks(&issuer.jwks(), None).unwrap();
        let long = RunCredentials::issue(Duration::from_secs(3600)).unwrap();
        let run = RunCredentials::issue(Duration::from_secs(3600)).unwrap();
        let creds = run.for_host(HOST).unwrap();
        let client = (long.client_cert_pem.as_str(), long.client_key_pem.as_str());

        // Pod 3 answering at pod 2's name: refused, and it goes on waiting.
        let wrong = pod(&issuer, "iocurve-agent-3-abcde", &long.ca_pem, Duration::from_secs(30));
        let e = enrol(&wrong.addr, HOST, client, &keys, &creds, CLAIM).unwrap_err();
        assert!(e.why.contains("whose hostname is not iocurve-agent-2") && !e.again, "{e}");
        // A coordinator without the CA's certificate gets no token.
        let stranger = RunCredentials::issue(Duration::from_secs(3600)).unwrap();
        let e = enrol(&wrong.addr, HOST, (&stranger.client_cert_pem, &stranger.client_key_pem), &keys, &creds, CLAIM)
            .unwrap_err();
        assert!(e.why.contains("no pod token came"), "{e}");
        // Another cluster's keys: refused.
        let other = PodKeys::from_jwks(&Issuer::new().jwks(), None).unwrap();
        let right = pod(&issuer, "iocurve-agent-2-x7k2p", &long.ca_pem, Duration::from_secs(30));
        assert!(enrol(&right.addr, HOST, client, &other, &creds, CLAIM).unwrap_err().why.contains("signature"));
        // The right pod, the right keys: it has the credentials, byte for byte.
        enrol(&right.addr, HOST, client, &keys, &creds, CLAIM).unwrap();
        let got = right.done.join().unwrap().unwrap();
        assert_eq!(
            (got.cert_pem, got.key_pem, got.token),
            (creds.cert_pem.clone(), creds.key_pem.clone(), creds.token.clone())
        );
        drop(right.dir);
        // The wrong pod is still waiting; its wait ends when the time is over.
        drop(wrong);
    }

    #[test]
    fn a_pod_nobody_enrols_ends_its_wait_and_one_without_its_token_does_not_start() {
        let issuer = Issuer::new();
        let long = RunCredentials::issue(Duration::from_secs(3600)).unwrap();
        let p = pod(&issuer, "iocurve-agent-2-x7k2p", &long.ca_pem, Duration::from_millis(300));
        let e = p.done.join().unwrap().unwrap_err().to_string();
        assert!(e.contains("no coordinator enrolled this pod"), "{e}");
        let e = wait_for(
            "127.0.0.1:0".parse().unwrap(),
            &long.ca_pem,
            Path::new("/nonexistent/token"),
            Duration::from_secs(1),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("cannot read the pod's token"), "{e}");
    }

    #[test]
    fn strangers_that_say_nothing_do_not_keep_the_coordinator_out_and_a_dead_pod_is_tried_again() {
        let issuer = Issuer::new();
        let keys = PodKeys::from_jwks(&issuer.jwks(), None).unwrap();
        let long = RunCredentials::issue(Duration::from_secs(3600)).unwrap();
        let creds = RunCredentials::issue(Duration::from_secs(3600)).unwrap().for_host(HOST).unwrap();
        let p = pod(&issuer, "iocurve-agent-2-x7k2p", &long.ca_pem, Duration::from_secs(30));
        // More idle connections than there are slots: the newest are dropped, the first held.
        let idle: Vec<TcpStream> = (0..AT_ONCE + 4).map(|_| TcpStream::connect(&p.addr).unwrap()).collect();
        std::thread::sleep(Duration::from_millis(200));
        let t0 = Instant::now();
        let mut r = enrol(&p.addr, HOST, (&long.client_cert_pem, &long.client_key_pem), &keys, &creds, CLAIM);
        // Dropped for want of a slot: a coordinator tries again (as `--launch pods` does).
        while r.as_ref().is_err_and(|f| f.again) && t0.elapsed() < TIMEOUT * 2 {
            std::thread::sleep(Duration::from_millis(200));
            r = enrol(&p.addr, HOST, (&long.client_cert_pem, &long.client_key_pem), &keys, &creds, CLAIM);
        }
        r.unwrap();
        assert_eq!(p.done.join().unwrap().unwrap().token, creds.token);
        drop(idle);
        // A port where nothing answers, and one that closes at once: to be tried again.
        let gone = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = gone.local_addr().unwrap().to_string();
        drop(gone);
        let f = enrol(&addr, HOST, (&long.client_cert_pem, &long.client_key_pem), &keys, &creds, CLAIM).unwrap_err();
        assert!(f.again && f.why.contains("cannot connect"), "{f}");
        let rude = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = rude.local_addr().unwrap().to_string();
        let closer = std::thread::spawn(move || drop(rude.accept()));
        let f = enrol(&addr, HOST, (&long.client_cert_pem, &long.client_key_pem), &keys, &creds, CLAIM).unwrap_err();
        assert!(f.again, "{f}");
        closer.join().unwrap();
    }
}
