//! A run's events in words, as the terminal prints them: the one place their sentences are
//! made (the runner sends typed values, `iocurve_run::RunEvent`).

use iocurve_plan::format_size;
use iocurve_report::format;
use iocurve_run::RunEvent;

/// The agents a run started (`--launch`) and stopped.
fn launch(event: &RunEvent) -> String {
    match event {
        RunEvent::AgentsLaunched { launched, hosts, method, seconds, copy, slowest, slowest_s, lifetime_s } => {
            let hours = lifetime_s / 3600.0;
            let valid = if hours >= 1.0 {
                format!("{hours:.3} h").replace(".000 h", " h")
            } else {
                format!("{:.0} min", hours * 60.0)
            };
            format!(
                "launched {launched} of {hosts} agents over {method} in {seconds:.2} s ({copy}; slowest {slowest} {slowest_s:.2} s); credentials for this run only, valid until it ends, at most {valid}"
            )
        }
        RunEvent::AgentsStopped { count, relays } => {
            let plural = |n: usize| if n == 1 { "" } else { "s" };
            let relays = if *relays > 0 { format!(" and {relays} relay{}", plural(*relays)) } else { String::new() };
            format!("stopped {count} agent{}{relays}", plural(*count))
        }
        // `words` hands this function only the two above.
        _ => String::new(),
    }
}

/// The lines `event` reads as, in order.
pub fn words(event: &RunEvent) -> Vec<String> {
    use RunEvent as E;
    match event {
        E::Header { version, plan, host, targets } => header(version, plan, host, targets),
        E::PreparingScratch { count, size, filled, reclaim_only } => {
            let how = if *filled {
                "written fully once, so reads hit allocated blocks"
            } else if *reclaim_only {
                "allocated, not written: the reclaim steps write their own regions"
            } else {
                "allocated, not written: the null back-end touches no block"
            };
            vec![format!("preparing {count} scratch file(s) of {} ({how})", format_size(*size))]
        }
        E::TargetNote(note) | E::FollowUp(note) => vec![note.clone()],
        E::WorkloadNote { workload, note } => vec![format!("{workload}: {note}")],
        E::Rest { workload, seconds } => {
            vec![format!("{workload}: {seconds} s of rest before the next step (pause_s)")]
        }
        E::InterruptedWhilePreconditioning => {
            vec!["interrupted while preconditioning: no workload ran; the same command resumes it".into()]
        }
        E::Mark { mark, after_start_s } => {
            vec![format!(
                "mark at {} ({:.1} s into the run): {}",
                &mark.at[11..23.min(mark.at.len())],
                after_start_s,
                mark.text
            )]
        }
        E::NoMarks(why) => vec![format!("this run takes no marks (`iocurve mark`): {why}")],
        E::StaleRunsSettled { ids } => {
            let ids: Vec<String> = ids.iter().map(i64::to_string).collect();
            vec![format!(
                "runs {} of this host were still marked running, but their processes are gone: marked interrupted",
                ids.join(", ")
            )]
        }
        E::AgentsLaunched { .. } | E::AgentsStopped { .. } => vec![launch(event)],
        E::WaitingForAgents { seconds, missing, total } => {
            vec![format!(
                "waiting up to {seconds:.0} s for {missing} of {total} agents to come up (--wait-for-agents-s)"
            )]
        }
        E::AgentClock { addr, hostname, cores, offset_ms, rtt_ms, relay_of, through } => {
            let who = match (relay_of, through) {
                (0, None) => format!("agent {addr}"),
                (0, Some(relay)) => format!("agent {addr} (through relay {relay})"),
                (n, _) => format!("relay {addr} of {n} agents"),
            };
            vec![format!(
                "{who} ({hostname}, {cores} cores): clock offset {offset_ms:+.3} ms, round trip {rtt_ms:.3} ms"
            )]
        }
        E::PreconditionWriting { target, size, bs, in_flight, data } => vec![format!(
            "precondition {target}: writing {} in {} blocks, {in_flight} in flight, data {data}",
            format_size(*size),
            format_size(*bs)
        )],
        E::PreconditionOnAgents { agents, targets, bs, in_flight, data } => vec![format!(
            "precondition on {agents} agents: every block of {targets} targets once, {} writes, {in_flight} in flight, data {data}",
            format_size(*bs)
        )],
        E::PreconditionProgress { who, done, total, session, elapsed_s } => {
            let rate = *session as f64 / elapsed_s.max(1e-3);
            let eta = if rate > 0.0 { (total - done.min(total)) as f64 / rate } else { f64::INFINITY };
            let who = if who.is_empty() { String::new() } else { format!("{who}: ") };
            vec![format!(
                "  {who}{} of {} ({:.0} %), {}, ETA {}",
                format_size(*done),
                format_size(*total),
                100.0 * *done as f64 / (*total).max(1) as f64,
                format::mbps(rate / 1e6),
                if eta.is_finite() { format::duration(eta) } else { "—".into() }
            )]
        }
        E::PreconditionSkipped { target, at } => vec![format!("precondition {target}: already done at {at}, skipped")],
        E::PreconditionResuming { target, at, size, before } => vec![format!(
            "precondition {target}: resuming at {} of {} ({} written before)",
            format_size(*at),
            format_size(*size),
            format_size(*before)
        )],
        E::PreconditionComplete { target } => vec![format!("precondition {target}: complete")],
        E::ReclaimStarting { name, bytes, targets, probe } => vec![format!(
            "reclaim {name}: writing, trimming and reading back {} on {targets} target{}; used space: {}",
            iocurve_analysis::format::size(*bytes),
            if *targets == 1 { "" } else { "s" },
            if probe.is_empty() {
                "not measured (no probe: a device that is not a loop device; give probe = \"…\")"
            } else {
                probe
            }
        )],
        E::ReclaimPass { name, pass, bytes, seconds, mean_us } => vec![format!(
            "reclaim {name}: {pass} {} in {seconds:.1} s ({}), mean {}",
            iocurve_analysis::format::size(*bytes),
            iocurve_analysis::format::mbps(if *seconds > 0.0 { *bytes as f64 / 1e6 / seconds } else { 0.0 }),
            iocurve_analysis::format::latency(*mean_us)
        )],
        E::ReclaimWaiting { name, want, timeout_s } => vec![format!(
            "reclaim {name}: waiting up to {timeout_s:.0} s for {} of the trimmed space to be free again",
            iocurve_analysis::format::size(*want)
        )],
        E::PreconditionInterrupted { target } => {
            vec![format!("precondition {target}: interrupted; the same command resumes where it stopped")]
        }
        E::PassNote(note) => vec![format!("  {note}")],
        E::SteadyPrecondition { round_s, max_rounds } => vec![format!(
            "precondition: 4k random writes, 32 in flight, in rounds of {round_s} s until the IOPS of the last 5 are steady (SNIA), at most {max_rounds} rounds"
        )],
        E::SteadyRound { index, max, iops } => vec![format!("  round {index}/{max}: {} IOPS", format::iops(*iops))],
        E::MapNew { path, bs } => vec![format!("verification: map {path} (blocks of {})", format_size(*bs))],
        E::MapContinued { path, known } => {
            vec![format!("verification: continuing with {path} ({known} blocks written before)")]
        }
        E::MapForgotten { target, blocks } => vec![format!(
            "verification: {target} is a new scratch file: the {blocks} blocks written to the earlier one are forgotten (keep scratch files with --keep)"
        )],
        E::Journaling { path } => vec![format!(
            "verification: journaling every verifying write in {path} before it is issued (one flush per batch of writes)"
        )],
        E::VerifyProgress { who, done, total } => {
            let who = if who.is_empty() { String::new() } else { format!(" {who}") };
            vec![format!("  verify{who}: {} of {}", format_size(*done), format_size(*total))]
        }
        E::VerifyFound { heading, counts, unlisted, cap, cap_scope } => {
            let mut out = vec![format!("{heading}: {}", counts.describe())];
            out.extend(counts.examples.iter().map(|e| format!("  ! {e}")));
            // The examples are of problems and unreadable blocks alike.
            let more = (counts.problems() + counts.unreadable).saturating_sub(counts.examples.len() as u64);
            if more > 0 {
                let what = if counts.unreadable > 0 { "problems and unreadable blocks" } else { "problems" };
                out.push(format!("  … {more} more {what}"));
            }
            if *unlisted > 0 {
                out.push(format!("  ({unlisted} problems beyond the first {cap}{cap_scope} are counted, not listed)"));
            }
            out
        }
    }
}

/// The run's header: what ran where, on what, so that any copy of the output says it.
fn header(
    version: &str,
    plan: &str,
    host: &iocurve_analysis::HostInfo,
    targets: &[iocurve_analysis::TargetInfo],
) -> Vec<String> {
    let f = &host.facts;
    let mut out = vec![
        format!("iocurve {version}, plan {plan}"),
        format!(
            "  host     {} ({}, {} cores, kernel {}{}), back-end {}",
            f.hostname,
            f.cpu_model,
            f.cores,
            f.kernel,
            f.cpu_extras(),
            host.backend
        ),
    ];
    for a in &host.agents {
        out.push(format!(
            "  agent    {} = {} ({}, {} cores), back-end {}",
            a.address, a.facts.hostname, a.facts.cpu_model, a.facts.cores, a.backend
        ));
    }
    // A run may have thousands of targets: the first few name it.
    const SHOWN: usize = 4;
    let named: Vec<String> =
        targets.iter().take(SHOWN).map(|t| format!("{} ({}, {})", t.path, t.kind, format_size(t.size))).collect();
    let more = match targets.len().saturating_sub(SHOWN) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    out.push(format!("  targets  {}{more}", named.join(", ")));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sentences the runner used to format where things happened, word for word (scripts
    /// and tests read some of them).
    #[test]
    fn events_read_as_the_runner_wrote_them() {
        let one = |e: RunEvent| words(&e).join("\n");
        assert_eq!(
            one(RunEvent::Rest { workload: "w".into(), seconds: 0.6 }),
            "w: 0.6 s of rest before the next step (pause_s)"
        );
        assert_eq!(
            one(RunEvent::PreparingScratch { count: 1, size: 64 << 20, filled: true, reclaim_only: false }),
            "preparing 1 scratch file(s) of 64m (written fully once, so reads hit allocated blocks)"
        );
        assert_eq!(
            one(RunEvent::VerifyProgress { who: "a:1".into(), done: 1 << 20, total: 2 << 20 }),
            "  verify a:1: 1m of 2m"
        );
        assert_eq!(one(RunEvent::VerifyProgress { who: String::new(), done: 0, total: 4096 }), "  verify: 0 of 4k");
        assert_eq!(
            one(RunEvent::PreconditionProgress {
                who: "t.dat".into(),
                done: 1 << 20,
                total: 4 << 20,
                session: 1 << 20,
                elapsed_s: 1.0
            }),
            "  t.dat: 1m of 4m (25 %), 1.05 MB/s, ETA 0:03"
        );
        assert_eq!(one(RunEvent::AgentsStopped { count: 1, relays: 0 }), "stopped 1 agent");
        assert_eq!(one(RunEvent::AgentsStopped { count: 4, relays: 2 }), "stopped 4 agents and 2 relays");
        assert_eq!(one(RunEvent::AgentsStopped { count: 2, relays: 1 }), "stopped 2 agents and 1 relay");
        assert_eq!(
            one(RunEvent::StaleRunsSettled { ids: vec![3, 4] }).split(':').next(),
            Some("runs 3, 4 of this host were still marked running, but their processes are gone")
        );
        let launched = RunEvent::AgentsLaunched {
            launched: 2,
            hosts: 2,
            method: "ssh".into(),
            seconds: 1.5,
            copy: "no copy needed".into(),
            slowest: "h2".into(),
            slowest_s: 1.25,
            lifetime_s: 7200.0,
        };
        assert_eq!(
            one(launched),
            "launched 2 of 2 agents over ssh in 1.50 s (no copy needed; slowest h2 1.25 s); credentials for this run only, valid until it ends, at most 2 h"
        );
        let mut counts = iocurve_stats::VerifyCounts { checked: 10, lost: 3, ..Default::default() };
        counts.examples = vec!["block 1 of t: lost".into()];
        let found = RunEvent::VerifyFound {
            heading: "verification".into(),
            counts: Box::new(counts),
            unlisted: 5,
            cap: 1_000_000,
            cap_scope: " per host".into(),
        };
        let lines = words(&found);
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert_eq!(lines[1], "  ! block 1 of t: lost");
        assert_eq!(lines[2], "  … 2 more problems");
        assert_eq!(lines[3], "  (5 problems beyond the first 1000000 per host are counted, not listed)");
    }
}
