//! Multi-host runs: the agent service and the wire.
//!
//! An agent (`iocurve agent`) runs steps on its own targets for a coordinator that proves it
//! holds the token, over gRPC with TLS (mutual TLS optional), and streams every interval as it
//! finishes — histograms serialized, so that the coordinator (`iocurve_run::coordinator`)
//! merges them exactly. Here: the service and its front door, the protocol, tokens and
//! certificates, and the conversions at the wire. Nothing here measures or analyses: the engine
//! measures, the analysis judges.

pub mod agent;
pub mod auth;
pub mod binding;
pub mod certs;
pub mod delegation;
pub mod enrol;
pub mod launched;
pub mod podtoken;
pub mod wire;

/// The protocol version: both sides refuse a peer that speaks another.
/// 6: a frontend working set is capped at 1/8 of a target (agents derive it themselves).
/// 7: targets say whether they are fresh (an earlier precondition record does not apply), and
/// the passes carry their deadline (`stuck_after_s`) and their notes.
/// 8: over TLS a coordinator proves its token with an HMAC bound to the TLS session (see
/// [`binding`]) instead of sending it; an agent refuses the bare token there, and says the
/// coordinator is older (issue 35, finding 3). Requests that open targets carry the run's key
/// for the lock on file targets (`run_key`, issue 36).
/// 10: a step's workload may carry a distribution, a hot layout, writes' own block sizes, a think
/// time and bursts (issue 39): an older agent would ignore them and run a uniform closed loop.
/// 11: a workload may trim (`trim_pct`, `trim_bs`) and intervals carry trims apart (issue 40): an
/// older agent would write where it was asked to trim.
/// 14: an interval's samples carry each second's latency histogram (issue 44): an older agent
/// would send none, and its steps would lack the per-second percentiles and heat map.
/// 15: a step may be a replay, its share of the trace in `replay` (issue 45): an older agent
/// would ignore it and run the workload's closed loop.
/// 16: a step may ask for its I/O log (`write_iolog`, `IoLogPart` events before Done, issue 45):
/// an older agent would send none, and the run's log would lack its I/Os.
/// 17: an agent may serve as a relay (`Relay`), and a relay's intervals merge several hosts'
/// (`Interval.hosts`, issue 46): an older coordinator would weigh them as one host's.
/// 18: a relay may be asked for some of its agents' intervals in full (`host_intervals`,
/// `HostInterval` events, issue 46): an older relay would send none.
/// 19: a relay's replay step carries each of its agents' shares of the trace
/// (`relayed_replays`, issue 46): an older relay would refuse it.
pub const PROTOCOL: u32 = 19;

/// Generated from proto/agent.proto.
// Generated: an interval is the common message anyway; prost's decoders are as long as the
// messages.
#[allow(clippy::large_enum_variant, clippy::too_many_lines)]
pub mod pb {
    tonic::include_proto!("iocurve.agent.v1");
}

#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// Bad input: options, certificates, a refused target, a protocol mismatch (exit code 2).
    #[error("{0}")]
    Input(String),
    /// The network or an agent failed (exit code 1).
    #[error("{0}")]
    Failed(String),
    /// The run's own policy ended it: `on_error = abort` after an I/O error, or
    /// `--on-host-loss abort` after a lost agent (exit code 1, status `aborted`).
    #[error("{0}")]
    Aborted(String),
    /// Every agent was lost: the run cannot go on; what they measured before is kept (exit
    /// code 3, status `aborted`).
    #[error("{0}")]
    Lost(String),
    /// Ctrl-C (or SIGTERM) before any I/O: nothing ran (exit code 130).
    #[error("{0}")]
    Interrupted(String),
}

pub use iocurve_stats::date::unix_ns;

/// Now, in whole Unix seconds (0 before 1970): certificates' and delegations' windows.
pub fn unix_s() -> u64 {
    (unix_ns().max(0) / 1_000_000_000) as u64
}

/// Raises this process's limit of open files to its hard limit: an agent holds a descriptor
/// per connection and per target, and the usual soft limit (1,024) is small for a host that
/// many coordinators and strangers can reach (its front door copes with running out anyway); a
/// coordinator that launches agents holds a channel's pipes per host.
pub fn raise_open_file_limit() {
    let mut l = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: a valid out-pointer; then the limit as read with the soft value raised.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
            l.rlim_cur = l.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}

/// Text a peer sent, safe to print on a terminal or store: control characters (C0, DEL, C1 —
/// an escape sequence can move the cursor, clear the screen or rewrite the line before) become
/// `\xNN` / `\u{NNNN}`, and a backslash becomes `\\` so that the escaping cannot be forged.
/// An agent's impostor printed a fake "run complete" on the coordinator's terminal this way
/// (issue 35, finding 8). Tabs and newlines are escaped too: one message stays one line.
pub fn printable(s: &str) -> String {
    if !s.chars().any(|c| c.is_control() || c == '\\') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x100 && c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod printable_tests {
    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(super::printable("plain /dev/sdb é"), "plain /dev/sdb é");
        assert_eq!(super::printable("\x1b[2K\rrun complete\n"), "\\x1b[2K\\x0drun complete\\x0a");
        assert_eq!(super::printable("a\u{9b}31m\u{7f}"), "a\\x9b31m\\x7f");
        assert_eq!(super::printable("\\x1b"), "\\\\x1b", "an escape cannot be forged");
    }
}
