//! The token every call proves, compared in constant time: over TLS a proof bound to the
//! connection (see [`crate::binding`]), in plain text the token itself.

use std::path::Path;
use std::sync::Arc;

use subtle::ConstantTimeEq;
use tonic::{Request, Status};

use crate::{NetError, PROTOCOL, binding};

/// The shortest token accepted: 128 bits as hex (`iocurve certs init` writes 256).
pub const MIN_TOKEN_LEN: usize = 32;

/// Reads a token file: its first line, trimmed. Refused when others may read it (the token
/// opens every agent that holds it) or when it is shorter than [`MIN_TOKEN_LEN`].
pub fn read_token(path: &Path) -> Result<String, NetError> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path)
        .map_err(|e| NetError::Input(format!("cannot read token file {}: {e}", path.display())))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(NetError::Input(format!(
            "token file {} may be read by other users (mode {mode:03o}): a token is a secret; `chmod 600 {}`",
            path.display(),
            path.display()
        )));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| NetError::Input(format!("cannot read token file {}: {e}", path.display())))?;
    let token = text.lines().next().unwrap_or("").trim().to_string();
    if token.len() < MIN_TOKEN_LEN {
        return Err(NetError::Input(format!(
            "token file {} holds no token of at least {MIN_TOKEN_LEN} characters (`iocurve certs init DIR` writes one of 64)",
            path.display()
        )));
    }
    Ok(token)
}

/// The token of one agent host, derived from the cluster's token (HMAC-SHA-256 of the host
/// name, as hex): `certs add-host` gives each host its own, and a coordinator run with
/// `--token-per-host` sends each agent the one of the host it dials. A token taken from one
/// host opens no other, and the cluster's token never leaves the coordinator.
pub fn host_token(cluster_token: &str, host: &str) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, cluster_token.as_bytes());
    let tag = ring::hmac::sign(&key, format!("iocurve agent token:{host}").as_bytes());
    tag.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// The host part of an agent address (`HOST:PORT`, `[V6]:PORT`).
pub fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// A new token: 256 bits from the kernel's random source, as 64 hex digits.
pub fn random_token() -> Result<String, NetError> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| NetError::Failed(format!("cannot read /dev/urandom for a token: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Why a call's credentials were refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// No `authorization`, or not in a form this agent takes.
    Missing,
    /// The token (plain text) or the proof (TLS) does not match this agent's token.
    Wrong,
    /// The token itself over TLS, as a coordinator before protocol 8 sent it: that token went
    /// to whoever passed the certificate check (issue 35, finding 3).
    BareTokenOverTls,
    /// A proof on a plain-text connection, which has no TLS session to bind it to.
    ProofWithoutTls,
}

impl Refused {
    /// How the caller is told. The older coordinator's case is `FailedPrecondition`, whose
    /// message an older coordinator shows (it words `Unauthenticated` itself).
    pub fn status(self) -> Status {
        match self {
            Refused::Missing => Status::unauthenticated(
                "missing token: every call carries a proof of the token bound to its TLS session (or, in plain text, the token)",
            ),
            Refused::Wrong => Status::unauthenticated("wrong token: it does not match this agent's"),
            Refused::BareTokenOverTls => Status::failed_precondition(format!(
                "the coordinator sent its token itself over TLS, as iocurve before protocol 8 did: it runs an older iocurve; this agent (iocurve {}, protocol {PROTOCOL}) takes only a proof of the token bound to the TLS session: upgrade the coordinator to the agent's version",
                env!("CARGO_PKG_VERSION")
            )),
            Refused::ProofWithoutTls => Status::unauthenticated(
                "a token proof needs TLS: this agent listens in plain text (--insecure) and takes the token itself",
            ),
        }
    }

    /// For the log.
    pub fn reason(self) -> &'static str {
        match self {
            Refused::Missing => "missing token",
            Refused::Wrong => "wrong token",
            Refused::BareTokenOverTls => "the token itself over TLS (a coordinator older than protocol 8)",
            Refused::ProofWithoutTls => "a token proof in plain text",
        }
    }
}

/// Whether `req` carries the right credentials for `token`: over TLS a proof bound to the TLS
/// session it came on ([`binding::proof`] of that session's exporter; `I`: the connect info of
/// the connection under TLS), in plain text (and in process) the token itself. Compared in
/// constant time.
pub fn verify<I: Send + Sync + 'static, T>(req: &Request<T>, token: &str) -> Result<(), Refused> {
    let given = req.metadata().get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("");
    judge(given, binding::session_of::<I, T>(req).map(|s| s.exporter).as_ref(), token)
}

/// [`verify`] on the `authorization` value and the connection's exporter (None: no TLS).
fn judge(given: &str, exporter: Option<&binding::Exporter>, token: &str) -> Result<(), Refused> {
    let matches = |a: &str, b: &str| bool::from(a.as_bytes().ct_eq(b.as_bytes()));
    match (exporter, given.strip_prefix(binding::PROOF_SCHEME), given.strip_prefix("Bearer ")) {
        (Some(e), Some(p), _) => matches(p, &binding::proof(token, e)).then_some(()).ok_or(Refused::Wrong),
        (Some(_), None, Some(_)) => Err(Refused::BareTokenOverTls),
        (None, None, Some(t)) => matches(t, token).then_some(()).ok_or(Refused::Wrong),
        (None, Some(_), _) => Err(Refused::ProofWithoutTls),
        (_, None, None) => Err(Refused::Missing),
    }
}

/// The interceptor of the client: adds the credentials to every call. Cloneable, so that calls
/// to many agents (and several calls to one) go out at once.
#[derive(Clone)]
pub enum Credentials {
    /// The token itself: plain text (`--insecure`) and the in-process agent, where there is no
    /// TLS session to bind a proof to.
    Bearer(tonic::metadata::MetadataValue<tonic::metadata::Ascii>),
    /// A proof of the token bound to the TLS session of the channel's connection.
    Proof { token: Arc<str>, session: binding::SessionSlot },
    /// A relay's call to one of its children (issue 46): the delegation's bytes, and a proof of
    /// its key bound to the TLS session (see [`crate::delegation`]).
    Delegated { minted: Arc<crate::delegation::Minted>, session: binding::SessionSlot },
}

impl Credentials {
    /// The token itself, for plain text.
    pub fn bearer(token: &str) -> Result<Credentials, NetError> {
        format!("Bearer {token}")
            .parse()
            .map(Credentials::Bearer)
            .map_err(|_| NetError::Input("the token holds characters that cannot travel in a header".into()))
    }

    /// Proofs of `token` on the connection `session` follows (from [`binding::Connector`]).
    pub fn proof(token: &str, session: binding::SessionSlot) -> Credentials {
        Credentials::Proof { token: token.into(), session }
    }
}

impl tonic::service::Interceptor for Credentials {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        let value = match self {
            Credentials::Delegated { minted, session } => {
                let exporter = session
                    .exporter()
                    .ok_or_else(|| Status::unavailable("no TLS session to prove the delegation on yet"))?;
                req.metadata_mut().insert_bin(
                    crate::delegation::METADATA,
                    tonic::metadata::MetadataValue::from_bytes(&minted.delegation),
                );
                format!("{}{}", crate::delegation::SCHEME, binding::proof(&minted.key, &exporter))
                    .parse()
                    .map_err(|_| Status::internal("a proof that cannot travel in a header"))?
            }
            Credentials::Bearer(v) => v.clone(),
            Credentials::Proof { token, session } => {
                let exporter = session
                    .exporter()
                    .ok_or_else(|| Status::unavailable("no TLS session to prove the token on yet"))?;
                format!("{}{}", binding::PROOF_SCHEME, binding::proof(token, &exporter))
                    .parse()
                    .map_err(|_| Status::internal("a proof that cannot travel in a header"))?
            }
        };
        req.metadata_mut().insert("authorization", value);
        Ok(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_tokens_differ_per_host_and_are_stable() {
        let a = host_token("cluster-token-of-enough-length-0123", "lg1.lab");
        assert_eq!(a.len(), 64);
        assert_eq!(a, host_token("cluster-token-of-enough-length-0123", "lg1.lab"));
        assert_ne!(a, host_token("cluster-token-of-enough-length-0123", "lg2.lab"));
        assert_ne!(a, host_token("another-cluster-token-0123456789ab", "lg1.lab"));
        assert_eq!(host_of("lg1.lab:7420"), "lg1.lab");
        assert_eq!(host_of("[2001:db8::1]:7420"), "2001:db8::1");
        assert_eq!(host_of("10.0.0.1:1"), "10.0.0.1");
    }

    /// Issue 35, finding 3: the token itself went to whoever passed the certificate check. Over
    /// TLS only a proof bound to the connection's exporter passes; one made on another
    /// connection (another exporter), the bare token, and a proof in plain text are refused.
    #[test]
    fn regression_over_tls_only_a_proof_of_this_session_passes() {
        let token = "cluster-token-of-enough-length-0123";
        let here: binding::Exporter = [7; 32];
        let mut elsewhere = here;
        elsewhere[0] = 8;
        let proof = |e: &binding::Exporter| format!("Proof {}", binding::proof(token, e));
        assert_eq!(judge(&proof(&here), Some(&here), token), Ok(()));
        assert_eq!(judge(&proof(&elsewhere), Some(&here), token), Err(Refused::Wrong), "replayed from another session");
        let other_token = format!("Proof {}", binding::proof("another-token-of-enough-length-0123", &here));
        assert_eq!(judge(&other_token, Some(&here), token), Err(Refused::Wrong));
        assert_eq!(judge(&format!("Bearer {token}"), Some(&here), token), Err(Refused::BareTokenOverTls));
        assert_eq!(judge("", Some(&here), token), Err(Refused::Missing));
        assert_eq!(judge("Proof ", Some(&here), token), Err(Refused::Wrong));
        assert_eq!(judge(&binding::proof(token, &here), Some(&here), token), Err(Refused::Missing), "no scheme");
        // Plain text: the token itself, never a proof.
        assert_eq!(judge(&format!("Bearer {token}"), None, token), Ok(()));
        assert_eq!(judge("Bearer wrong", None, token), Err(Refused::Wrong));
        assert_eq!(judge(&proof(&here), None, token), Err(Refused::ProofWithoutTls));
        assert_eq!(judge("", None, token), Err(Refused::Missing));
        // An older coordinator is told to upgrade, in a code whose message it shows.
        let s = Refused::BareTokenOverTls.status();
        assert_eq!(s.code(), tonic::Code::FailedPrecondition);
        assert!(s.message().contains("older iocurve") && s.message().contains("upgrade the coordinator"), "{s}");
        // Never the words of an agent before protocol 8, by which a coordinator knows one.
        for r in [Refused::Missing, Refused::Wrong, Refused::ProofWithoutTls] {
            assert_ne!(r.status().message(), "wrong or missing token");
        }
    }
}
