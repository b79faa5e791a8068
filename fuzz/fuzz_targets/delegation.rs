//! A relay's delegation (issue 46): any bytes as the delegation metadata a child agent takes
//! from a peer (`iocurve_net::delegation::Delegation::parse`), and through the child's whole
//! check (`delegation::check`) with any proof. Never panics; a delegation that parses encodes
//! to the very bytes it came as; the check passes only with the key minted for those bytes.
#![no_main]

use iocurve_net::delegation::{Child, Delegation, certificate_digest, check, key, mint};
use libfuzzer_sys::fuzz_target;

const TOKEN: &str = "the-child's-token-of-enough-length-01234";
const CERT: &[u8] = b"a relay certificate";

fuzz_target!(|data: &[u8]| {
    let parsed = Delegation::parse(data);
    if let Ok(d) = &parsed {
        assert_eq!(d.encode(), data, "parsed, but encodes to other bytes");
    }
    let exporter = [7u8; 32];
    let child = |name| Child { name: Some(name), token: TOKEN, mutual_tls: true };
    // A proof made of the input itself: refused unless it is the right one (it never is).
    let wrong = String::from_utf8_lossy(data);
    let name = parsed.as_ref().map_or("lg1", |d| d.child.as_str());
    let now = parsed.as_ref().map_or(0, |d| d.not_before_unix);
    assert!(check(&child(name), data, &wrong, &exporter, Some(CERT), now).is_err());
    // The right proof passes exactly when the bytes parse and name this certificate.
    let right = iocurve_net::binding::proof(&key(TOKEN, data), &exporter);
    let r = check(&child(name), data, &right, &exporter, Some(CERT), now);
    match &parsed {
        Ok(d) if d.relay_certificate == certificate_digest(CERT) => assert_eq!(r.as_ref(), Ok(d)),
        _ => assert!(r.is_err()),
    }
    // Minting a parsed one again gives the same bytes and a key that opens it.
    if let Ok(d) = parsed {
        let m = mint(&d, TOKEN);
        assert_eq!(m.delegation, data);
        assert_eq!(m.key, key(TOKEN, data));
    }
});
