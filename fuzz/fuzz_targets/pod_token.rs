//! A Kubernetes pod's token as the coordinator checks it before it enrols the pod (issue 46):
//! any bytes as the token a pod sends (`PodKeys::verify`), any bytes as the claims of a token
//! the cluster's key did sign (so that the claims' reader is reached, not only the signature
//! check), and any bytes as the key set file (`PodKeys::from_jwks`). A hostile pod or a broken
//! file gets an error, never a panic, abort or huge allocation; a pod is taken only for the
//! host whose name its token bears.
#![no_main]

use std::sync::OnceLock;

use iocurve_fuzz::write_seeds;
use iocurve_net::podtoken::{PodKeys, base64url_encode as b64};
use libfuzzer_sys::fuzz_target;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};

const NOW: i64 = 1_800_000_000;
const HOST: &str = "iocurve-agent-3.iocurve-agent.lab.svc";

struct Issuer {
    pair: EcdsaKeyPair,
    keys: PodKeys,
    jwks: String,
}


fn issuer() -> &'static Issuer {
    static I: OnceLock<Issuer> = OnceLock::new();
    I.get_or_init(|| {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
        let p = pair.public_key().as_ref();
        let jwks = serde_json::json!({"keys": [{"use": "sig", "kty": "EC", "crv": "P-256", "kid": "k",
            "x": b64(&p[1..33]), "y": b64(&p[33..65])}]})
        .to_string();
        let keys = PodKeys::from_jwks(&jwks, Some("https://kubernetes.default.svc.cluster.local".into())).unwrap();
        Issuer { pair, keys, jwks }
    })
}

/// A token of the cluster's key over `claims` (any bytes).
fn signed(claims: &[u8]) -> String {
    let s = format!("{}.{}", b64(br#"{"alg":"ES256","kid":"k"}"#), b64(claims));
    let sig = issuer().pair.sign(&SystemRandom::new(), s.as_bytes()).unwrap();
    format!("{s}.{}", b64(sig.as_ref()))
}

/// The claims the kubelet writes for pod 3; a token of them; the key set.
fn seeds() -> Vec<(String, Vec<u8>)> {
    let claims = serde_json::json!({
        "aud": ["iocurve"], "exp": NOW + 3600, "iat": NOW, "nbf": NOW,
        "iss": "https://kubernetes.default.svc.cluster.local",
        "sub": "system:serviceaccount:lab:iocurve-agent",
        "kubernetes.io": {"namespace": "lab", "pod": {"name": "iocurve-agent-3-x7k2p", "uid": "u"},
            "serviceaccount": {"name": "iocurve-agent", "uid": "s"}},
    })
    .to_string();
    vec![
        ("claims".into(), [&[1u8][..], claims.as_bytes()].concat()),
        ("token".into(), [&[0u8][..], signed(claims.as_bytes()).as_bytes()].concat()),
        ("jwks".into(), [&[2u8][..], issuer().jwks.as_bytes()].concat()),
    ]
}

fuzz_target!(init: write_seeds("pod_token", seeds), |data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let checked = match mode % 3 {
        0 => std::str::from_utf8(rest).ok().map(|t| issuer().keys.verify(t, NOW)),
        1 => Some(issuer().keys.verify(&signed(rest), NOW)),
        _ => {
            if let Ok(k) = std::str::from_utf8(rest).map(|t| PodKeys::from_jwks(t, None))
                && let Ok(k) = k
            {
                assert!(!k.is_empty(), "a key set taken holds a key");
                assert!(k.verify(&signed(b"{}"), NOW).is_err(), "no claims, no pod");
            }
            None
        }
    };
    if let Some(Ok(c)) = checked
        && c.is_host(HOST).is_ok()
    {
        // Taken for pod 3 only: its name is the hostname, a dash and one part more.
        let rest = c.pod.strip_prefix("iocurve-agent-3-").expect("pod 3's name");
        assert!(!rest.is_empty() && !rest.contains('-'), "{}", c.pod);
        assert_eq!(c.namespace, "lab");
    }
});
