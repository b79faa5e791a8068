//! The agent's audit trail: every call that acts (targets, steps, passes, Stop, EndAfter) with
//! its outcome, and every refusal (wrong token, another coordinator's agent, a path outside the
//! allow list), with the peer's address and, under mutual TLS, its certificate. On by default,
//! on standard error and in `--audit-log FILE` (issue 35, finding 5: accepted calls were INFO
//! under a default level of WARN, logs named IP:port only, refusals outside the allow list were
//! not refusals, and the refused-token counter flushed only on the next refusal).
//!
//! One JSON object per line, prefixed `iocurve-audit ` on standard error. A flood of refusals
//! is written as its first [`PER_WINDOW`] lines per kind and [`WINDOW`], then as one summary
//! line per kind at the end of each window.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::json;

use crate::NetError;

/// How often refusal counts are written out, at the latest.
pub const WINDOW: Duration = Duration::from_secs(10);
/// Refusals of one kind written one by one per window; the rest are counted.
pub const PER_WINDOW: u64 = 10;
/// Accepted calls written one by one per window: a run makes a few per step; a token holder
/// calling in a loop must not fill the disk.
pub const ACCEPTED_PER_WINDOW: u64 = 100;
/// Distinct peers remembered per kind and window (a flood from many addresses must not grow
/// memory without bound): beyond it the count says "at least".
const PEERS_KEPT: usize = 1024;

pub struct Audit {
    stderr: bool,
    file: Option<std::sync::Arc<Mutex<std::fs::File>>>,
    /// Which agent of the process wrote a line, where one process serves several (the
    /// simulated agents of `iocurve agent --simulate`): the lines' `agent` field.
    label: Option<String>,
    window: Mutex<BTreeMap<&'static str, Flood>>,
    /// A failed write to the file is said once.
    file_failed: std::sync::atomic::AtomicBool,
}

#[derive(Default)]
struct Flood {
    written: u64,
    counted: u64,
    peers: HashSet<std::net::IpAddr>,
}

/// Who called: the address, and the certificate where the connection carried one.
pub struct Peer {
    pub addr: Option<SocketAddr>,
    pub identity: Option<String>,
    /// The relay's delegation the call came through (issue 46): its run key and end.
    pub delegation: Option<crate::delegation::Delegated>,
}

impl Peer {
    pub fn of<T>(req: &tonic::Request<T>) -> Peer {
        let addr = super::listen::ticket_of(req).map(|t| t.peer()).or_else(|| req.remote_addr());
        // The agent does its own TLS (see `binding`): the coordinator's chain is kept with the
        // connection's session.
        let certs = super::listen::session_of(req).and_then(|s| s.peer_certificates.clone());
        let identity = certs.and_then(|certs| certs.first().map(identity));
        let delegation = req.extensions().get::<crate::delegation::Delegated>().copied();
        Peer { addr, identity, delegation }
    }

    /// The same caller again (for lines written after the call).
    pub(super) fn of_call(call: &super::Call) -> Peer {
        Peer { addr: call.peer.addr, identity: call.peer.identity.clone(), delegation: call.delegated }
    }
}

/// A certificate as a reader can check it: its subject's common name and the start of its
/// SHA-256 fingerprint (`openssl x509 -fingerprint -sha256` shows the same digits).
pub fn identity(cert: &tokio_rustls::rustls::pki_types::CertificateDer<'_>) -> String {
    let digest = crate::delegation::certificate_digest(cert.as_ref());
    let fp: String = digest[..8].iter().map(|b| format!("{b:02X}")).collect();
    let cn = x509_parser::parse_x509_certificate(cert.as_ref())
        .ok()
        .and_then(|(_, c)| c.subject().iter_common_name().next().and_then(|cn| cn.as_str().ok().map(str::to_string)));
    match cn {
        Some(cn) => format!("CN={} sha256:{fp}", crate::printable(&cn)),
        None => format!("sha256:{fp}"),
    }
}

impl Audit {
    /// An agent's audit: standard error, and `file` (appended, created private) if given.
    pub fn new(file: Option<&Path>) -> Result<Audit, NetError> {
        let file = match file {
            Some(p) => {
                use std::os::unix::fs::OpenOptionsExt;
                let f = std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .mode(0o600)
                    // The log is written as root on many hosts: never through a planted link.
                    .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                    .open(p)
                    .map_err(|e| {
                        NetError::Input(format!("--audit-log {}: cannot open it for appending: {e}", p.display()))
                    })?;
                Some(std::sync::Arc::new(Mutex::new(f)))
            }
            None => None,
        };
        Ok(Audit { stderr: true, file, label: None, window: Mutex::default(), file_failed: Default::default() })
    }

    /// No trail: the in-process agent of a local run (its one caller is the run itself).
    pub fn off() -> Audit {
        Audit { stderr: false, file: None, label: None, window: Mutex::default(), file_failed: Default::default() }
    }

    /// The same trail (standard error and file) for another agent of this process, its lines
    /// marked `agent: label`, with a flood window of its own.
    pub fn labelled(&self, label: &str) -> Audit {
        Audit {
            stderr: self.stderr,
            file: self.file.clone(),
            label: Some(label.to_string()),
            window: Mutex::default(),
            file_failed: Default::default(),
        }
    }

    fn write(&self, mut event: serde_json::Value) {
        if !self.stderr && self.file.is_none() {
            return;
        }
        event["time"] = json!(iocurve_stats::date::rfc3339_ns(crate::unix_ns()));
        if let Some(l) = &self.label {
            event["agent"] = json!(l);
        }
        let line = event.to_string();
        if self.stderr {
            // A closed standard error must not end the agent.
            let _ = writeln!(std::io::stderr().lock(), "iocurve-audit {line}");
        }
        if let Some(f) = &self.file {
            let mut f = f.lock().unwrap_or_else(|e| e.into_inner());
            if let Err(e) = writeln!(f, "{line}")
                && !self.file_failed.swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                let _ = writeln!(std::io::stderr().lock(), "iocurve agent: cannot write the audit log: {e}");
            }
        }
    }

    fn peer_fields(event: &mut serde_json::Value, peer: &Peer) {
        event["peer"] = json!(peer.addr.map(|a| a.to_string()).unwrap_or_else(|| "unknown".into()));
        if let Some(id) = &peer.identity {
            event["certificate"] = json!(id);
        }
        if let Some(d) = peer.delegation {
            event["delegation"] = json!({"run_key": d.run_key, "not_after_unix": d.not_after_unix});
        }
    }

    /// Whether a line of `kind` is written now (else it is counted for the window's summary).
    fn admit(&self, kind: &'static str, limit: u64, peer: &Peer) -> bool {
        let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
        let f = w.entry(kind).or_default();
        if f.written >= limit {
            f.counted += 1;
            if let Some(a) = peer.addr
                && f.peers.len() < PEERS_KEPT
            {
                f.peers.insert(a.ip());
            }
            return false;
        }
        f.written += 1;
        true
    }

    /// A call that acts was accepted (`detail`: what it asked, made printable).
    pub fn accepted(&self, call: &str, peer: &Peer, detail: &str) {
        if !self.admit("accepted", ACCEPTED_PER_WINDOW, peer) {
            return;
        }
        let mut e = json!({"event": "call", "call": call, "outcome": "accepted"});
        Self::peer_fields(&mut e, peer);
        if !detail.is_empty() {
            e["detail"] = json!(crate::printable(detail));
        }
        self.write(e);
    }

    /// A call that acts ended in an error that is not a refusal.
    pub fn failed(&self, call: &str, peer: &Peer, why: &str) {
        let mut e = json!({"event": "call", "call": call, "outcome": "failed", "reason": crate::printable(why)});
        Self::peer_fields(&mut e, peer);
        self.write(e);
    }

    /// A call refused: `kind` names the rule (`token`, `owner`, `allow_list`, `protocol`).
    /// Rate-limited per kind: see the module's comment.
    pub fn refused(&self, kind: &'static str, call: &str, peer: &Peer, why: &str) {
        if !self.admit(kind, PER_WINDOW, peer) {
            return;
        }
        let mut e =
            json!({"event": "call", "call": call, "outcome": "refused", "rule": kind, "reason": crate::printable(why)});
        Self::peer_fields(&mut e, peer);
        self.write(e);
    }

    /// Something the agent did on its own (took an idle agent back from its owner, ended).
    pub fn note(&self, what: &str, peer: Option<&Peer>) {
        let mut e = json!({"event": "agent", "what": crate::printable(what)});
        if let Some(p) = peer {
            Self::peer_fields(&mut e, p);
        }
        self.write(e);
    }

    /// Writes the refusals counted in the window that ends now, and starts the next.
    pub fn flush(&self) {
        let counted: Vec<(&'static str, u64, usize)> = {
            let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
            let out = w.iter().filter(|(_, f)| f.counted > 0).map(|(k, f)| (*k, f.counted, f.peers.len())).collect();
            w.clear();
            out
        };
        for (kind, count, peers) in counted {
            let peers = if peers >= PEERS_KEPT { json!(format!("at least {PEERS_KEPT}")) } else { json!(peers) };
            let (outcome, rule, limit) = if kind == "accepted" {
                ("accepted", None, ACCEPTED_PER_WINDOW)
            } else {
                ("refused", Some(kind), PER_WINDOW)
            };
            let mut e = json!({
                "event": "calls",
                "outcome": outcome,
                "count": count,
                "peers": peers,
                "note": format!("calls beyond the first {limit} of this kind in {} s, counted", WINDOW.as_secs()),
            });
            if let Some(rule) = rule {
                e["rule"] = json!(rule);
            }
            self.write(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(last: u8) -> Peer {
        Peer { addr: Some(SocketAddr::from(([10, 0, 0, last], 4000))), identity: None, delegation: None }
    }

    /// Issue 35, finding 5: a refusal flood is written as its first lines and a count per
    /// window, and the count reaches the log at the window's end, not at the next refusal.
    #[test]
    fn regression_a_refusal_flood_is_rate_limited_and_its_count_flushed() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("audit.log");
        let a = Audit { stderr: false, ..Audit::new(Some(&log)).unwrap() };
        for i in 0..250u32 {
            a.refused("token", "targets", &peer((i % 25) as u8), "wrong or missing token");
        }
        a.accepted("targets", &peer(1), "t\x1b[2Jx");
        let lines = |p: &Path| -> Vec<serde_json::Value> {
            std::fs::read_to_string(p).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
        };
        let before = lines(&log);
        assert_eq!(before.len(), PER_WINDOW as usize + 1, "the first {PER_WINDOW} and the accepted call");
        assert_eq!(before.last().unwrap()["detail"], "t\\x1b[2Jx", "control characters escaped");
        a.flush();
        let after = lines(&log);
        let summary = after.last().unwrap();
        assert_eq!(summary["event"], "calls");
        assert_eq!(summary["rule"], "token");
        assert_eq!(summary["count"], 240);
        assert_eq!(summary["peers"], 25);
        a.flush();
        assert_eq!(lines(&log).len(), after.len(), "an empty window writes nothing");
        a.refused("token", "targets", &peer(1), "again");
        assert_eq!(lines(&log).len(), after.len() + 1, "a new window writes its first refusals again");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&log).unwrap().permissions().mode() & 0o777, 0o600);
        std::os::unix::fs::symlink(&log, dir.path().join("link")).unwrap();
        assert!(Audit::new(Some(&dir.path().join("link"))).is_err(), "never written through a link");
    }

    /// Simulated agents of one process share a trail: each line says which agent wrote it,
    /// and one agent's flood does not silence another's lines.
    #[test]
    fn labelled_trails_share_the_file_and_name_their_agent() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("audit.log");
        let base = Audit { stderr: false, ..Audit::new(Some(&log)).unwrap() };
        let (a, b) = (base.labelled("sim-0"), base.labelled("sim-1"));
        for _ in 0..PER_WINDOW + 5 {
            a.refused("token", "targets", &peer(1), "wrong token");
        }
        b.accepted("targets", &peer(2), "t");
        let lines: Vec<serde_json::Value> =
            std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), PER_WINDOW as usize + 1);
        assert!(lines[..PER_WINDOW as usize].iter().all(|l| l["agent"] == "sim-0"));
        assert_eq!(lines.last().unwrap()["agent"], "sim-1");
    }
}
