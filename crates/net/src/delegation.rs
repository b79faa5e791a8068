//! A relay's delegation (issue 46; the trust model: docs/relays.md): how a child agent knows
//! that a relay speaks for the coordinator, without any agent holding a secret that opens
//! another agent.
//!
//! For each child the coordinator mints a [`Delegation`] — the run, the relay's certificate
//! (its SHA-256), the child's name, a window of validity, a nonce — and the key the relay uses
//! towards that child, K = HMAC-SHA-256(the child's token, the delegation's bytes)
//! ([`Minted`]). The relay never learns the child's token. It calls the child over mutual TLS
//! with its per-run client certificate, sends the delegation's bytes in the metadata
//! [`METADATA`] and, in `authorization`, [`SCHEME`] and the proof of K bound to that TLS
//! session ([`crate::binding::proof`] with K for the token). The child ([`check`]) parses the
//! bytes (untrusted: strict, bounded), checks that they name it, that now is inside the window
//! and that the peer's certificate is the one named, computes K from its own token and checks
//! the proof in constant time. A delegation stolen from a relay is useless without the relay's
//! certificate key; K opens one child, for one run, until the window closes.

use subtle::ConstantTimeEq;

use crate::binding::Exporter;

/// The `authorization` scheme of a delegated call: `Delegated <proof>`.
pub const SCHEME: &str = "Delegated ";
/// The binary metadata that carries the delegation's bytes.
pub const METADATA: &str = "iocurve-delegation-bin";
/// The one encoding version there is.
const VERSION: u8 = 1;
/// Its purpose, encoded: bytes made for anything else never parse as a delegation.
const PURPOSE: &[u8] = b"iocurve relay delegation";
/// No delegation is longer (a name is at most 255 bytes): a peer sending megabytes is refused
/// before anything is parsed.
pub const MAX_BYTES: usize = 512;
/// Names are what a certificate names a host with: at most a DNS name's length.
const MAX_NAME: usize = 255;

/// What the coordinator delegates to one relay for one child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delegation {
    /// The run's key (what the run's requests carry as `run_key`): ownership of the child passes
    /// to the relay for this run only.
    pub run_key: u32,
    /// SHA-256 of the relay's client certificate (DER): the only peer that may present it.
    pub relay_certificate: [u8; 32],
    /// The child's name: the one its credentials were issued for (its certificate's common
    /// name), never an address.
    pub child: String,
    /// The window of validity, Unix seconds, both ends included.
    pub not_before_unix: u64,
    pub not_after_unix: u64,
    pub nonce: [u8; 16],
}

/// Why delegation bytes or a delegated call were refused: said to the caller and in the child's
/// audit trail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The bytes are no delegation of this version (too long, a field of the wrong length,
    /// bytes left over, another purpose).
    Malformed(&'static str),
    /// It names another agent.
    NotThisAgent,
    /// Now is outside its window.
    NotYetValid,
    Expired,
    /// The call came without a client certificate (no mutual TLS), or with another one than
    /// the delegation names.
    NoClientCertificate,
    WrongCertificate,
    /// The proof is not of the key this agent derives from its token and the delegation.
    WrongProof,
    /// This agent cannot take delegations: its certificate is the cluster's shared one (no name
    /// of its own), or it takes no client certificates (no `--client-ca`).
    NotPerHost,
    NoMutualTls,
    /// On a connection without TLS, or without the delegation's bytes.
    PlainText,
    Missing,
}

impl Refused {
    pub fn reason(self) -> String {
        match self {
            Refused::Malformed(why) => format!("a malformed relay delegation ({why})"),
            Refused::NotThisAgent => "a relay delegation for another agent".into(),
            Refused::NotYetValid => "a relay delegation not valid yet (check the hosts' clocks)".into(),
            Refused::Expired => "an expired relay delegation (its run is over)".into(),
            Refused::NoClientCertificate => "a relay delegation without the relay's client certificate".into(),
            Refused::WrongCertificate => "a relay delegation presented with another certificate than its relay's".into(),
            Refused::WrongProof => "a relay delegation whose proof does not match this agent's token".into(),
            Refused::NotPerHost => "a relay delegation to an agent with the cluster's shared certificate: relays need per-host credentials (`iocurve certs add-host NAME`, or `run --launch`)".into(),
            Refused::NoMutualTls => "a relay delegation to an agent without --client-ca: relays need mutual TLS".into(),
            Refused::PlainText => "a relay delegation in plain text: relays need mutual TLS".into(),
            Refused::Missing => format!("a delegated call without its delegation (metadata {METADATA})"),
        }
    }
}

impl Delegation {
    /// Its bytes: a version byte, then every field length-prefixed (two bytes, big-endian), so
    /// that no two field lists encode to the same bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![VERSION];
        let mut field = |b: &[u8]| {
            out.extend_from_slice(&(b.len() as u16).to_be_bytes());
            out.extend_from_slice(b);
        };
        field(PURPOSE);
        field(&self.run_key.to_be_bytes());
        field(&self.relay_certificate);
        field(self.child.as_bytes());
        field(&self.not_before_unix.to_be_bytes());
        field(&self.not_after_unix.to_be_bytes());
        field(&self.nonce);
        out
    }

    /// Parses bytes a peer sent: refuses anything [`Delegation::encode`] would not have made.
    pub fn parse(bytes: &[u8]) -> Result<Delegation, Refused> {
        if bytes.len() > MAX_BYTES {
            return Err(Refused::Malformed("longer than any delegation"));
        }
        let Some((&version, mut rest)) = bytes.split_first() else { return Err(Refused::Malformed("empty")) };
        if version != VERSION {
            return Err(Refused::Malformed("an unknown version"));
        }
        let mut field = |what: &'static str| -> Result<&[u8], Refused> {
            let (len, tail) = rest.split_first_chunk::<2>().ok_or(Refused::Malformed(what))?;
            let len = usize::from(u16::from_be_bytes(*len));
            let (value, tail) = tail.split_at_checked(len).ok_or(Refused::Malformed(what))?;
            rest = tail;
            Ok(value)
        };
        fn fixed<const N: usize>(v: &[u8], what: &'static str) -> Result<[u8; N], Refused> {
            v.try_into().map_err(|_| Refused::Malformed(what))
        }
        if field("purpose")? != PURPOSE {
            return Err(Refused::Malformed("another purpose"));
        }
        let run_key = u32::from_be_bytes(fixed(field("run key")?, "run key")?);
        let relay_certificate = fixed(field("certificate digest")?, "certificate digest")?;
        let child = field("agent name")?;
        if child.is_empty() || child.len() > MAX_NAME {
            return Err(Refused::Malformed("agent name"));
        }
        let child = std::str::from_utf8(child).map_err(|_| Refused::Malformed("agent name"))?.to_string();
        let not_before_unix = u64::from_be_bytes(fixed(field("not before")?, "not before")?);
        let not_after_unix = u64::from_be_bytes(fixed(field("not after")?, "not after")?);
        let nonce = fixed(field("nonce")?, "nonce")?;
        if !rest.is_empty() {
            return Err(Refused::Malformed("bytes after its last field"));
        }
        if not_after_unix < not_before_unix {
            return Err(Refused::Malformed("a window that ends before it begins"));
        }
        Ok(Delegation { run_key, relay_certificate, child, not_before_unix, not_after_unix, nonce })
    }
}

/// What a call accepted through a relay carries to the service (a request extension the agent's
/// interceptor sets): ownership and the run's requests are held to it, and the trail names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delegated {
    pub run_key: u32,
    pub not_after_unix: u64,
    /// The relay's certificate (SHA-256) the delegation names: only a call with the same run
    /// key *and* certificate is the same relay's (another holder of a child's token can mint a
    /// delegation for any run key it read).
    pub relay_certificate: [u8; 32],
}

impl Delegated {
    pub fn of(d: &Delegation) -> Delegated {
        Delegated { run_key: d.run_key, not_after_unix: d.not_after_unix, relay_certificate: d.relay_certificate }
    }

    /// Whether `other` is the same relay acting for the same run.
    pub fn same_relay_and_run(&self, other: &Delegated) -> bool {
        self.run_key == other.run_key && self.relay_certificate == other.relay_certificate
    }
}

/// The key a relay proves a delegation with: HMAC-SHA-256(the child's token, the delegation's
/// bytes), as 64 hex digits (it stands where a token stands in [`crate::binding::proof`]).
pub fn key(child_token: &str, delegation: &[u8]) -> String {
    let k = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, child_token.as_bytes());
    ring::hmac::sign(&k, delegation).as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// What the coordinator hands a relay for one child: the delegation's bytes and its key.
#[derive(Clone)]
pub struct Minted {
    pub delegation: Vec<u8>,
    pub key: String,
}

impl std::fmt::Debug for Minted {
    /// Never the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Minted {{ {} bytes, .. }}", self.delegation.len())
    }
}

/// Mints `d` for the child whose token is `child_token` (the coordinator's side).
pub fn mint(d: &Delegation, child_token: &str) -> Minted {
    let delegation = d.encode();
    Minted { key: key(child_token, &delegation), delegation }
}

/// A fresh nonce.
pub fn nonce() -> Result<[u8; 16], crate::NetError> {
    let mut n = [0u8; 16];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut n)
        .map_err(|_| crate::NetError::Failed("no randomness for a delegation's nonce".into()))?;
    Ok(n)
}

/// SHA-256 of a certificate's DER bytes.
pub fn certificate_digest(der: &[u8]) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, der);
    d.as_ref().try_into().expect("SHA-256 is 32 bytes")
}

/// What the child knows of itself and of the call, for [`check`].
pub struct Child<'a> {
    /// Its own name (its certificate's common name); None: the cluster's shared certificate.
    pub name: Option<&'a str>,
    pub token: &'a str,
    /// Whether it takes client certificates (mutual TLS).
    pub mutual_tls: bool,
}

/// Checks a delegated call on the child: `bytes` from [`METADATA`], `proof` after [`SCHEME`],
/// the TLS session's exporter and the peer's certificate (DER), at `now_unix`. The order of the
/// checks is the trust model's; the proof is compared in constant time.
pub fn check(
    child: &Child<'_>,
    bytes: &[u8],
    proof: &str,
    exporter: &Exporter,
    peer_certificate: Option<&[u8]>,
    now_unix: u64,
) -> Result<Delegation, Refused> {
    let Some(name) = child.name else { return Err(Refused::NotPerHost) };
    if !child.mutual_tls {
        return Err(Refused::NoMutualTls);
    }
    let d = Delegation::parse(bytes)?;
    if d.child != name {
        return Err(Refused::NotThisAgent);
    }
    if now_unix < d.not_before_unix {
        return Err(Refused::NotYetValid);
    }
    if now_unix > d.not_after_unix {
        return Err(Refused::Expired);
    }
    let cert = peer_certificate.ok_or(Refused::NoClientCertificate)?;
    if !bool::from(certificate_digest(cert).ct_eq(&d.relay_certificate)) {
        return Err(Refused::WrongCertificate);
    }
    let expected = crate::binding::proof(&key(child.token, bytes), exporter);
    if !bool::from(proof.as_bytes().ct_eq(expected.as_bytes())) {
        return Err(Refused::WrongProof);
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const TOKEN: &str = "child-token-of-enough-length-0123456789";
    const CERT: &[u8] = b"the relay's certificate, DER";

    fn delegation() -> Delegation {
        Delegation {
            run_key: 0xdead_beef,
            relay_certificate: certificate_digest(CERT),
            child: "lg7.lab".into(),
            not_before_unix: 1_000,
            not_after_unix: 2_000,
            nonce: [9; 16],
        }
    }

    fn child() -> Child<'static> {
        Child { name: Some("lg7.lab"), token: TOKEN, mutual_tls: true }
    }

    /// What the relay sends for `m` on the session `e`.
    fn proof_of(m: &Minted, e: &Exporter) -> String {
        crate::binding::proof(&m.key, e)
    }

    #[test]
    fn a_minted_delegation_opens_its_child_on_any_session_of_its_relay() {
        let m = mint(&delegation(), TOKEN);
        let e = [3; 32];
        assert_eq!(check(&child(), &m.delegation, &proof_of(&m, &e), &e, Some(CERT), 1_500), Ok(delegation()));
        // Both ends of the window are in it.
        for now in [1_000, 2_000] {
            assert!(check(&child(), &m.delegation, &proof_of(&m, &e), &e, Some(CERT), now).is_ok());
        }
        // Never the key in a debug line.
        assert!(!format!("{m:?}").contains(&m.key));
    }

    /// Each check of the trust model refuses on its own.
    #[test]
    fn every_check_refuses_what_it_guards() {
        let m = mint(&delegation(), TOKEN);
        let e = [3; 32];
        let p = proof_of(&m, &e);
        let c = child();
        assert_eq!(check(&c, &m.delegation, &p, &e, Some(CERT), 999), Err(Refused::NotYetValid));
        assert_eq!(check(&c, &m.delegation, &p, &e, Some(CERT), 2_001), Err(Refused::Expired));
        assert_eq!(check(&c, &m.delegation, &p, &e, None, 1_500), Err(Refused::NoClientCertificate));
        assert_eq!(check(&c, &m.delegation, &p, &e, Some(b"the coordinator's"), 1_500), Err(Refused::WrongCertificate));
        // Replayed from another TLS session.
        assert_eq!(check(&c, &m.delegation, &proof_of(&m, &[4; 32]), &e, Some(CERT), 1_500), Err(Refused::WrongProof));
        // Minted with another agent's token (a relay cannot derive one child's key from another's).
        let other = mint(&delegation(), "another-token-of-enough-length-0123456");
        assert_eq!(
            check(&c, &other.delegation, &proof_of(&other, &e), &e, Some(CERT), 1_500),
            Err(Refused::WrongProof)
        );
        // The token itself as the key.
        assert_eq!(
            check(&c, &m.delegation, &crate::binding::proof(TOKEN, &e), &e, Some(CERT), 1_500),
            Err(Refused::WrongProof)
        );
        // A delegation for lg8 presented to lg7, even with lg7's key for lg8's bytes.
        let mut for_other = delegation();
        for_other.child = "lg8.lab".into();
        let m8 = mint(&for_other, TOKEN);
        assert_eq!(check(&c, &m8.delegation, &proof_of(&m8, &e), &e, Some(CERT), 1_500), Err(Refused::NotThisAgent));
        // Agents that cannot take one.
        let shared = Child { name: None, ..child() };
        assert_eq!(check(&shared, &m.delegation, &p, &e, Some(CERT), 1_500), Err(Refused::NotPerHost));
        let no_mtls = Child { mutual_tls: false, ..child() };
        assert_eq!(check(&no_mtls, &m.delegation, &p, &e, Some(CERT), 1_500), Err(Refused::NoMutualTls));
        for r in [Refused::NotPerHost, Refused::Malformed("x"), Refused::Expired] {
            assert!(!r.reason().is_empty());
        }
    }

    #[test]
    fn bytes_that_encode_did_not_make_are_refused() {
        let good = delegation().encode();
        assert_eq!(Delegation::parse(&good), Ok(delegation()));
        let mut longer = good.clone();
        longer.push(0);
        assert_eq!(Delegation::parse(&longer), Err(Refused::Malformed("bytes after its last field")));
        assert_eq!(Delegation::parse(&[]), Err(Refused::Malformed("empty")));
        assert_eq!(Delegation::parse(&vec![1; MAX_BYTES + 1]), Err(Refused::Malformed("longer than any delegation")));
        let mut v2 = good.clone();
        v2[0] = 2;
        assert_eq!(Delegation::parse(&v2), Err(Refused::Malformed("an unknown version")));
        let mut backwards = delegation();
        backwards.not_after_unix = 999;
        assert!(Delegation::parse(&backwards.encode()).is_err());
        let mut nameless = delegation();
        nameless.child.clear();
        assert_eq!(Delegation::parse(&nameless.encode()), Err(Refused::Malformed("agent name")));
        for cut in 0..good.len() {
            assert!(Delegation::parse(&good[..cut]).is_err(), "cut at {cut}");
        }
    }

    proptest! {
        /// Any delegation survives its encoding; any change to one of its bytes makes the check
        /// refuse it (the key is over all of them).
        #[test]
        fn encoding_round_trips_and_every_byte_is_covered(
            run_key: u32, child in "[a-z0-9.-]{1,40}", nb in 0u64..u64::MAX / 2,
            len in 0u64..1_000_000, nonce: [u8; 16], at: prop::sample::Index, flip in 1u8..=255,
        ) {
            let d = Delegation {
                run_key, relay_certificate: certificate_digest(CERT), child: child.clone(),
                not_before_unix: nb, not_after_unix: nb + len, nonce,
            };
            let m = mint(&d, TOKEN);
            prop_assert_eq!(Delegation::parse(&m.delegation), Ok(d.clone()));
            let c = Child { name: Some(&child), token: TOKEN, mutual_tls: true };
            let e = [5; 32];
            prop_assert_eq!(check(&c, &m.delegation, &proof_of(&m, &e), &e, Some(CERT), nb), Ok(d));
            let mut changed = m.delegation.clone();
            let i = at.index(changed.len());
            changed[i] ^= flip;
            prop_assert!(check(&c, &changed, &proof_of(&m, &e), &e, Some(CERT), nb).is_err());
        }

        /// Any bytes: refused or parsed, never a panic, and a parsed one encodes to the same bytes.
        #[test]
        fn any_bytes_parse_or_are_refused(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
            if let Ok(d) = Delegation::parse(&bytes) {
                prop_assert_eq!(d.encode(), bytes);
            }
        }
    }
}
