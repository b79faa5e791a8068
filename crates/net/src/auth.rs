//! The token every call carries, compared in constant time.

use std::path::Path;
use std::sync::Arc;

use subtle::ConstantTimeEq;
use tonic::{Request, Status};

use crate::NetError;

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

/// The interceptor of the agent: a call without the right token is refused before it runs,
/// and audited with its peer (the trail rate-limits a flood of them: see
/// [`crate::agent::audit`]). A call with it marks its connection as no longer a stranger's
/// (see [`crate::agent::listen`]).
pub fn checker(
    token: Arc<String>,
    audit: Arc<crate::agent::audit::Audit>,
) -> impl Fn(Request<()>) -> Result<Request<()>, Status> + Clone {
    move |req: Request<()>| {
        let given = req.metadata().get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("");
        let given = given.strip_prefix("Bearer ").unwrap_or("");
        if bool::from(given.as_bytes().ct_eq(token.as_bytes())) {
            if let Some(t) = crate::agent::listen::ticket_of(&req) {
                t.authenticated();
            }
            Ok(req)
        } else {
            // The method is not known here (an interceptor sees no path): the trail says the
            // token was wrong, and from where.
            audit.refused("token", "any", &crate::agent::audit::Peer::of(&req), "wrong or missing token");
            Err(Status::unauthenticated("wrong or missing token"))
        }
    }
}

/// The interceptor of the client: adds the token to every call. Cloneable, so that calls to
/// many agents (and several calls to one) go out at once.
#[derive(Clone)]
pub struct Bearer(tonic::metadata::MetadataValue<tonic::metadata::Ascii>);

impl Bearer {
    pub fn new(token: &str) -> Result<Bearer, NetError> {
        format!("Bearer {token}")
            .parse()
            .map(Bearer)
            .map_err(|_| NetError::Input("the token holds characters that cannot travel in a header".into()))
    }
}

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        req.metadata_mut().insert("authorization", self.0.clone());
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
}
