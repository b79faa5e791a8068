//! A Kubernetes pod's identity, as `run --launch pods` checks it before it enrols an agent
//! (issue 46): the pod's projected service-account token (a JWT the kubelet writes into the
//! pod, signed by the cluster's service-account issuer, for the audience `iocurve`, bound to
//! the pod), checked offline against the issuer's public keys (the JSON Web Key Set the API
//! server publishes at `/openid/v1/jwks`, given as a file: iocurve never calls the Kubernetes
//! API).
//!
//! What is checked: the signature (RS256 or ES256, by a key of the set named by the token's
//! `kid`), the audience, the time (not expired, not yet valid, with [`SKEW_S`] of slack), the
//! issuer where one is given, and the pod the token names: its namespace, its service account
//! and its name against the host the coordinator dialled (see [`PodClaims::is_host`]). Tokens
//! come from the network: every part is bounded and read as untrusted.

use ring::signature;
use serde_json::Value;

/// The audience the agents' projected tokens are made for (`serviceAccountToken.audience`).
pub const AUDIENCE: &str = "iocurve";

/// The service account the agents' pods run as; a token of another account of the namespace
/// (any other pod's) enrols nothing.
pub const SERVICE_ACCOUNT: &str = "iocurve-agent";

/// Clocks of the coordinator and the API server may differ this much.
pub const SKEW_S: i64 = 60;

/// The longest a token may still be valid: a projected token asks for hours (the manifests
/// 3,600 s); one valid for days is not what the pods are given.
pub const MAX_LIFE_S: i64 = 2 * 86_400;

/// The longest token read (the kubelet's are about 1 KiB).
pub const MAX_TOKEN: usize = 16 * 1024;

/// The issuer's public keys.
pub struct PodKeys {
    keys: Vec<Key>,
    /// The token's `iss` must be this, where given.
    issuer: Option<String>,
}

struct Key {
    kid: String,
    public: Public,
}

enum Public {
    /// Modulus and exponent, big-endian.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// The uncompressed P-256 point (0x04 ‖ x ‖ y).
    P256(Vec<u8>),
}

/// Who a valid token says the pod is.
#[derive(Clone, Debug, PartialEq)]
pub struct PodClaims {
    pub namespace: String,
    pub pod: String,
    pub service_account: String,
}

/// Decodes base64url without padding (as JWTs and JWKs write it).
fn base64url(s: &str, what: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return Err(format!("{what} is not base64url (a `{}`)", c.escape_ascii())),
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    // 6 bits left over cannot end a byte string; 2 or 4 must be zero padding bits.
    if bits >= 6 || acc != 0 {
        return Err(format!("{what} is not base64url (its length or last character)"));
    }
    Ok(out)
}

/// Encodes base64url without padding: what an issuer writes (tests and fuzzing sign tokens
/// with it).
pub fn base64url_encode(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut s = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().fold(0u32, |a, &b| (a << 8) | u32::from(b)) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            s.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    s
}

fn text<'a>(v: &'a Value, key: &str, what: &str) -> Result<&'a str, String> {
    v.get(key).and_then(Value::as_str).ok_or_else(|| format!("{what} has no `{key}` string"))
}

impl PodKeys {
    /// The key set as `kubectl get --raw /openid/v1/jwks` prints it; keys of other kinds (or
    /// other curves) are skipped, a set with none usable is refused.
    pub fn from_jwks(jwks: &str, issuer: Option<String>) -> Result<PodKeys, String> {
        let v: Value = serde_json::from_str(jwks).map_err(|e| format!("not a JSON Web Key Set: {e}"))?;
        let list = v.get("keys").and_then(Value::as_array).ok_or("not a JSON Web Key Set: no `keys` list")?;
        let mut keys = Vec::new();
        for (i, k) in list.iter().enumerate() {
            let what = format!("keys[{i}]");
            // A key marked for encryption signs no token.
            if k.get("use").and_then(Value::as_str).is_some_and(|u| u != "sig") {
                continue;
            }
            let kid = k.get("kid").and_then(Value::as_str).unwrap_or("").to_string();
            let public = match k.get("kty").and_then(Value::as_str) {
                Some("RSA") => {
                    let n = base64url(text(k, "n", &what)?, &format!("{what}.n"))?;
                    let e = base64url(text(k, "e", &what)?, &format!("{what}.e"))?;
                    Public::Rsa { n, e }
                }
                Some("EC") if k.get("crv").and_then(Value::as_str) == Some("P-256") => {
                    let x = base64url(text(k, "x", &what)?, &format!("{what}.x"))?;
                    let y = base64url(text(k, "y", &what)?, &format!("{what}.y"))?;
                    if x.len() != 32 || y.len() != 32 {
                        return Err(format!("{what}: a P-256 key's x and y are 32 bytes each"));
                    }
                    Public::P256([&[4u8][..], &x, &y].concat())
                }
                _ => continue,
            };
            keys.push(Key { kid, public });
        }
        if keys.is_empty() {
            return Err("the key set holds no RSA or P-256 signing key".into());
        }
        Ok(PodKeys { keys, issuer })
    }

    /// How many keys the set holds.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Checks `token` at `now_unix` (seconds) and says which pod it names.
    pub fn verify(&self, token: &str, now_unix: i64) -> Result<PodClaims, String> {
        if token.len() > MAX_TOKEN {
            return Err(format!("the pod's token is longer than {MAX_TOKEN} bytes"));
        }
        let mut parts = token.trim().split('.');
        let (Some(h), Some(p), Some(s), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
            return Err("the pod's token is not a JWT (three parts joined by dots)".into());
        };
        let header: Value = serde_json::from_slice(&base64url(h, "the token's header")?)
            .map_err(|e| format!("the token's header is not JSON: {e}"))?;
        let signature = base64url(s, "the token's signature")?;
        let alg = text(&header, "alg", "the token's header")?;
        let kid = header.get("kid").and_then(Value::as_str).unwrap_or("");
        let signed = &token.trim().as_bytes()[..h.len() + 1 + p.len()];
        // Every key of the set with that id (or every key, for a token without one) is tried:
        // sets carry a key id once, but nothing forbids two.
        let candidates: Vec<&Key> = self.keys.iter().filter(|k| kid.is_empty() || k.kid == kid).collect();
        if candidates.is_empty() {
            return Err(format!(
                "the token was signed with key `{kid}`, which the key set does not hold (fetch it again: `kubectl get --raw /openid/v1/jwks`)"
            ));
        }
        let good = candidates.iter().any(|k| match (&k.public, alg) {
            (Public::Rsa { n, e }, "RS256") => signature::RsaPublicKeyComponents { n, e }
                .verify(&signature::RSA_PKCS1_2048_8192_SHA256, signed, &signature)
                .is_ok(),
            (Public::P256(point), "ES256") => {
                signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point)
                    .verify(signed, &signature)
                    .is_ok()
            }
            _ => false,
        });
        if !good {
            return Err(format!("the token's signature ({alg}) is not one of the cluster's keys"));
        }
        let claims: Value = serde_json::from_slice(&base64url(p, "the token's claims")?)
            .map_err(|e| format!("the token's claims are not JSON: {e}"))?;
        self.claims(&claims, now_unix)
    }

    fn claims(&self, c: &Value, now: i64) -> Result<PodClaims, String> {
        let audience = match c.get("aud") {
            Some(Value::String(a)) => a == AUDIENCE,
            Some(Value::Array(list)) => list.iter().any(|a| a.as_str() == Some(AUDIENCE)),
            _ => false,
        };
        if !audience {
            return Err(format!(
                "the token is not for the audience `{AUDIENCE}` (the pod's serviceAccountToken.audience)"
            ));
        }
        if let Some(want) = &self.issuer {
            let iss = c.get("iss").and_then(Value::as_str).unwrap_or("");
            if iss != want {
                return Err(format!("the token was issued by `{iss}`, not `{want}` (--pod-issuer)"));
            }
        }
        let time = |k: &str| c.get(k).and_then(Value::as_i64);
        let exp = time("exp").ok_or("the token has no expiry (`exp`)")?;
        if exp.saturating_add(SKEW_S) <= now {
            return Err(format!("the token expired {} s ago", now.saturating_sub(exp)));
        }
        // A projected token lives hours at most; one good for longer is no pod's.
        if exp.saturating_sub(now) > MAX_LIFE_S {
            return Err(format!(
                "the token is valid for {} s more: a pod's projected token lasts hours (serviceAccountToken.expirationSeconds), not {} days",
                exp.saturating_sub(now),
                MAX_LIFE_S / 86_400
            ));
        }
        if let Some(nbf) = time("nbf").or(time("iat"))
            && nbf.saturating_sub(SKEW_S) > now
        {
            return Err(format!("the token is valid only in {} s (are the clocks apart?)", nbf.saturating_sub(now)));
        }
        let k8s = c.get("kubernetes.io").ok_or("the token names no pod (no `kubernetes.io` claim)")?;
        let namespace = text(k8s, "namespace", "the token's kubernetes.io")?.to_string();
        let pod = k8s.get("pod").ok_or("the token is not bound to a pod (a projected token is)")?;
        let pod = text(pod, "name", "the token's pod")?.to_string();
        let service_account = k8s
            .get("serviceaccount")
            .map(|s| text(s, "name", "the token's serviceaccount"))
            .transpose()?
            .unwrap_or("")
            .to_string();
        if service_account != SERVICE_ACCOUNT {
            return Err(format!(
                "the token is service account `{service_account}`'s, not `{SERVICE_ACCOUNT}`'s (the agents' pods run as it)"
            ));
        }
        let sub = c.get("sub").and_then(Value::as_str).unwrap_or("");
        if sub != format!("system:serviceaccount:{namespace}:{SERVICE_ACCOUNT}") {
            return Err(format!("the token's subject `{sub}` is not the agents' service account"));
        }
        Ok(PodClaims { namespace, pod, service_account })
    }
}

/// The labels of a pod's DNS name, `HOSTNAME.SERVICE.NAMESPACE.svc[…]`; another form is refused.
pub fn pod_host(host: &str) -> Result<Vec<&str>, String> {
    let labels: Vec<&str> = host.split('.').collect();
    if labels.len() < 4 || labels[3] != "svc" || labels[..3].iter().any(|l| l.is_empty()) {
        return Err(format!(
            "{host}: --launch pods dials pods by their DNS names, HOSTNAME.SERVICE.NAMESPACE.svc (e.g. iocurve-agent-0.iocurve-agent.iocurve.svc)"
        ));
    }
    Ok(labels)
}

impl PodClaims {
    /// Whether the pod is the one at `host`, the name the coordinator dialled:
    /// `HOSTNAME.SERVICE.NAMESPACE.svc[…]`, where an Indexed Job's pod `JOB-I-xxxxx` has the
    /// hostname `JOB-I`. The pod's name is the hostname, a dash and one more part without a
    /// dash (so that `agent-1` is never `agent-10-x7k2p`), and its namespace the third label.
    pub fn is_host(&self, host: &str) -> Result<(), String> {
        let labels = pod_host(host)?;
        if labels[2] != self.namespace {
            return Err(format!("the token is a pod's of namespace {}, not {}", self.namespace, labels[2]));
        }
        let suffix = self.pod.strip_prefix(labels[0]).and_then(|r| r.strip_prefix('-'));
        match suffix {
            Some(s)
                if !s.is_empty()
                    && s.len() <= 10
                    && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()) =>
            {
                Ok(())
            }
            _ => Err(format!("the token is pod {}'s, whose hostname is not {}", self.pod, labels[0])),
        }
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use ring::rand::SystemRandom;
    use ring::signature::{EcdsaKeyPair, KeyPair};

    /// A test issuer: a P-256 key (ring makes those; the kubelet's keys are usually RSA,
    /// checked by the same code path's other arm in `an_rsa_token_…`).
    pub struct Issuer {
        pair: EcdsaKeyPair,
    }

    use super::base64url_encode as b64;

    impl Default for Issuer {
        fn default() -> Issuer {
            Issuer::new()
        }
    }

    impl Issuer {
        pub fn new() -> Issuer {
            let rng = SystemRandom::new();
            let pkcs8 = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
            Issuer {
                pair: EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
                    .unwrap(),
            }
        }

        pub fn jwks(&self) -> String {
            let point = self.pair.public_key().as_ref();
            serde_json::json!({"keys": [{"use": "sig", "kty": "EC", "crv": "P-256", "kid": "k1", "alg": "ES256",
                "x": b64(&point[1..33]), "y": b64(&point[33..65])}]})
            .to_string()
        }

        pub fn sign(&self, claims: &Value) -> String {
            let head = b64(br#"{"alg":"ES256","kid":"k1"}"#);
            let body = b64(claims.to_string().as_bytes());
            let signed = format!("{head}.{body}");
            let sig = self.pair.sign(&SystemRandom::new(), signed.as_bytes()).unwrap();
            format!("{signed}.{}", b64(sig.as_ref()))
        }

        /// The claims the kubelet writes for pod `pod` of `namespace`, valid from `now`.
        pub fn pod_claims(namespace: &str, pod: &str, now: i64) -> Value {
            serde_json::json!({
                "aud": ["iocurve"], "exp": now + 3600, "iat": now, "nbf": now,
                "iss": "https://kubernetes.default.svc.cluster.local",
                "sub": format!("system:serviceaccount:{namespace}:iocurve-agent"),
                "kubernetes.io": {"namespace": namespace, "pod": {"name": pod, "uid": "u-1"},
                    "serviceaccount": {"name": "iocurve-agent", "uid": "u-2"}},
            })
        }
    }

    const HOST: &str = "iocurve-agent-3.iocurve-agent.lab.svc";

    #[test]
    fn base64url_round_trips_and_refuses_what_is_not() {
        for n in 0..40usize {
            let bytes: Vec<u8> = (0..n).map(|i| (i * 37 + 11) as u8).collect();
            assert_eq!(base64url(&b64(&bytes), "x").unwrap(), bytes);
        }
        assert!(base64url("a", "x").is_err(), "6 bits end no byte");
        assert!(base64url("ab=", "x").is_err());
        assert!(base64url("aB", "x").is_err(), "non-zero padding bits");
    }

    #[test]
    fn a_pods_token_names_its_pod_and_what_is_not_its_is_refused() {
        let issuer = Issuer::new();
        let keys =
            PodKeys::from_jwks(&issuer.jwks(), Some("https://kubernetes.default.svc.cluster.local".into())).unwrap();
        let now = 1_800_000_000;
        let good = Issuer::pod_claims("lab", "iocurve-agent-3-x7k2p", now);
        let c = keys.verify(&issuer.sign(&good), now).unwrap();
        assert_eq!(c.pod, "iocurve-agent-3-x7k2p");
        c.is_host(HOST).unwrap();
        // Another index, a longer one with the same start, another namespace, another form.
        for (pod, ns, host) in [
            ("iocurve-agent-4-x7k2p", "lab", HOST),
            ("iocurve-agent-30-x7k2p", "lab", HOST),
            ("iocurve-agent-3-x7k2p", "other", HOST),
            ("iocurve-agent-3-x7k2p", "lab", "iocurve-agent-3.lab"),
            ("iocurve-agent-3-", "lab", HOST),
        ] {
            let c = PodClaims { namespace: ns.into(), pod: pod.into(), service_account: SERVICE_ACCOUNT.into() };
            assert!(c.is_host(host).is_err(), "{pod} {ns} {host}");
        }
        let refused = |claims: Value, at: i64, says: &str| {
            let e = keys.verify(&issuer.sign(&claims), at).unwrap_err();
            assert!(e.contains(says), "{e} (wanted {says})");
        };
        refused(good.clone(), now + 3600 + SKEW_S + 1, "expired");
        let mut c = good.clone();
        c["exp"] = serde_json::json!(i64::MAX);
        refused(c, now, "valid for");
        let mut c = good.clone();
        c["exp"] = serde_json::json!(i64::MIN);
        refused(c, now, "expired");
        let mut c = good.clone();
        c["nbf"] = serde_json::json!(i64::MIN);
        c["iat"] = serde_json::json!(i64::MAX);
        assert!(keys.verify(&issuer.sign(&c), now).is_ok(), "nbf first, and far in the past");
        refused(good.clone(), now - SKEW_S - 5, "valid only in");
        let mut c = good.clone();
        c["aud"] = serde_json::json!(["https://kubernetes.default.svc"]);
        refused(c, now, "audience");
        let mut c = good.clone();
        c["iss"] = serde_json::json!("https://other");
        refused(c, now, "issued by `https://other`");
        let mut c = good.clone();
        c["kubernetes.io"]["serviceaccount"]["name"] = serde_json::json!("default");
        refused(c, now, "service account `default`");
        let mut c = good.clone();
        c["kubernetes.io"].as_object_mut().unwrap().remove("pod");
        refused(c, now, "not bound to a pod");
        // Another issuer's signature, a tampered body, garbage.
        let e = keys.verify(&Issuer::new().sign(&good), now).unwrap_err();
        assert!(e.contains("signature"), "{e}");
        let t = issuer.sign(&good);
        let mut parts: Vec<&str> = t.split('.').collect();
        let other = b64(Issuer::pod_claims("lab", "iocurve-agent-4-x7k2p", now).to_string().as_bytes());
        parts[1] = &other;
        assert!(keys.verify(&parts.join("."), now).unwrap_err().contains("signature"));
        for bad in ["", "a.b", "a.b.c.d", "!!.!!.!!", &"a".repeat(MAX_TOKEN + 1)] {
            assert!(keys.verify(bad, now).is_err(), "{bad}");
        }
    }

    #[test]
    fn key_sets_without_a_usable_key_are_refused() {
        for bad in ["", "{}", r#"{"keys": []}"#, r#"{"keys": [{"kty": "oct", "k": "AA"}]}"#] {
            assert!(PodKeys::from_jwks(bad, None).is_err(), "{bad}");
        }
        let e = PodKeys::from_jwks(r#"{"keys": [{"kty": "EC", "crv": "P-256", "x": "AA", "y": "AA"}]}"#, None);
        assert!(e.err().unwrap().contains("32 bytes"));
    }

    /// A 2048-bit RSA key made for this test alone (`openssl genpkey -algorithm RSA`): the
    /// kubelet's tokens are RS256 on most clusters.
    const RSA_ISSUER: &str = include_str!("../tests/fixtures/test-issuer-rsa.pem");

    #[test]
    fn an_rsa_token_is_checked_with_the_rsa_key() {
        use tokio_rustls::rustls::pki_types::PrivateKeyDer;
        let der = match crate::binding::pem_key(RSA_ISSUER, "test key").unwrap() {
            PrivateKeyDer::Pkcs8(k) => k.secret_pkcs8_der().to_vec(),
            _ => panic!("PKCS#8"),
        };
        let pair = signature::RsaKeyPair::from_pkcs8(&der).unwrap();
        let public = signature::RsaPublicKeyComponents::<Vec<u8>>::from(pair.public());
        let (n, e) = (b64(&public.n), b64(&public.e));
        let jwks = format!(
            r#"{{"keys": [{{"use": "sig", "kty": "RSA", "alg": "RS256", "kid": "r", "n": "{n}", "e": "{e}"}}]}}"#
        );
        let keys = PodKeys::from_jwks(&jwks, None).unwrap();
        let now = 1_800_000_000;
        let sign = |head: &[u8], claims: &Value| {
            let signed = format!("{}.{}", b64(head), b64(claims.to_string().as_bytes()));
            let mut sig = vec![0; pair.public().modulus_len()];
            pair.sign(&signature::RSA_PKCS1_SHA256, &SystemRandom::new(), signed.as_bytes(), &mut sig).unwrap();
            format!("{signed}.{}", b64(&sig))
        };
        let claims = Issuer::pod_claims("lab", "iocurve-agent-3-x7k2p", now);
        let c = keys.verify(&sign(br#"{"alg":"RS256","kid":"r"}"#, &claims), now).unwrap();
        assert_eq!(c.pod, "iocurve-agent-3-x7k2p");
        // The algorithm the header names must be the key's: RS256 with an RSA key only.
        let e = keys.verify(&sign(br#"{"alg":"ES256","kid":"r"}"#, &claims), now).unwrap_err();
        assert!(e.contains("signature (ES256)"), "{e}");
        let e = keys.verify(&sign(br#"{"alg":"none","kid":"r"}"#, &claims), now).unwrap_err();
        assert!(e.contains("signature"), "{e}");
        let e = keys.verify(&sign(br#"{"alg":"RS256","kid":"other"}"#, &claims), now).unwrap_err();
        assert!(e.contains("key `other`"), "{e}");
    }
}
