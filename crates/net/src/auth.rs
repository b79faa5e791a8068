//! The token every call carries, compared in constant time.

use std::path::Path;
use std::sync::Arc;

use subtle::ConstantTimeEq;
use tonic::{Request, Status};

use crate::NetError;

/// Reads a token file: its first line, trimmed; at least 16 characters.
pub fn read_token(path: &Path) -> Result<String, NetError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| NetError::Input(format!("cannot read token file {}: {e}", path.display())))?;
    let token = text.lines().next().unwrap_or("").trim().to_string();
    if token.len() < 16 {
        return Err(NetError::Input(format!(
            "token file {} holds no token of at least 16 characters (`iocurve certs init DIR` writes one)",
            path.display()
        )));
    }
    Ok(token)
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

/// The interceptor of the agent: a call without the right token is refused before it runs.
pub fn checker(token: Arc<String>) -> impl Fn(Request<()>) -> Result<Request<()>, Status> + Clone {
    move |req: Request<()>| {
        let given = req.metadata().get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("");
        let given = given.strip_prefix("Bearer ").unwrap_or("");
        if bool::from(given.as_bytes().ct_eq(token.as_bytes())) {
            Ok(req)
        } else {
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
