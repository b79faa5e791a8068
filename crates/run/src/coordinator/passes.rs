//! Passes over every agent's targets at once, outside the measured steps: preconditioning and
//! the final verification. The coordinator follows every agent's stream and keeps the results.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::client::{Remote, failed};
use super::coordinate::STOP_DEADLINE;
use iocurve_net::{NetError, pb, wire};

/// An agent's error of a pass, named: `agent A: verification: …`. A relay's names its agent
/// itself (the coordinator's own code ran there): said as it is, with the relay it came through
/// (not `agent R: verification: agent A: verification: …`).
fn pass_error(relay: Option<&str>, who: &str, what: &str, error: &str) -> String {
    let error = iocurve_net::printable(error);
    match relay.filter(|_| error.starts_with("agent ")) {
        Some(relay) => format!("{error} (through relay {relay})"),
        None => format!("{who}{what}{error}"),
    }
}

/// Each agent's address where it is a relay.
fn relays(remotes: &[Remote]) -> Vec<Option<String>> {
    remotes.iter().map(|r| r.relay.then(|| r.addr.clone())).collect()
}

/// How a precondition pass on the agents ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassEnd {
    /// Every target of every agent written and synced.
    Complete,
    /// Stopped (Ctrl-C) before that: the states streamed so far say where to resume.
    Interrupted,
}

/// Follows every agent's event stream at once until each has sent its last event (`handle`
/// returns true for it). `stop` (Ctrl-C) sends every agent `Stop` once and keeps reading, so
/// that each says where it stopped. An agent silent for `silence`, a stream that fails or ends
/// early, and an error from `handle` end it all.
async fn follow<E: Send + 'static>(
    remotes: &mut [Remote],
    streams: Vec<tonic::Streaming<E>>,
    what: &str,
    stop: &AtomicBool,
    silence: Duration,
    handle: &mut dyn FnMut(usize, E) -> Result<bool, NetError>,
) -> Result<(), NetError> {
    let n = streams.len();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(usize, Result<Option<E>, tonic::Status>)>(64);
    let mut readers = Vec::new();
    for (i, mut s) in streams.into_iter().enumerate() {
        let tx = tx.clone();
        readers.push(tokio::spawn(async move {
            loop {
                let m = s.message().await;
                let end = !matches!(m, Ok(Some(_)));
                if tx.send((i, m)).await.is_err() || end {
                    break;
                }
            }
        }));
    }
    drop(tx);
    let result = async {
        let mut done = vec![false; n];
        let mut deadline = vec![Instant::now() + silence; n];
        let mut stop_sent = false;
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        while !done.iter().all(|&d| d) {
            if !stop_sent && stop.load(Ordering::Relaxed) {
                stop_sent = true;
                for (h, r) in remotes.iter().enumerate() {
                    if !done[h] {
                        let mut client = r.client.clone();
                        tokio::spawn(async move {
                            let _ = tokio::time::timeout(STOP_DEADLINE, client.stop(pb::StopRequest {})).await;
                        });
                    }
                }
            }
            let msg = tokio::select! {
                m = rx.recv() => m,
                _ = tick.tick() => {
                    let now = Instant::now();
                    if let Some(h) = (0..n).find(|&h| !done[h] && now > deadline[h]) {
                        return Err(NetError::Failed(format!(
                            "agent {} was silent for {:.0} s during the {what}",
                            remotes[h].addr,
                            silence.as_secs_f64()
                        )));
                    }
                    continue;
                }
            };
            let Some((h, m)) = msg else { break };
            if done[h] {
                // The end of a stream whose last event was read.
                continue;
            }
            deadline[h] = Instant::now() + silence;
            match m {
                Ok(Some(e)) => done[h] = handle(h, e)?,
                Ok(None) => {
                    return Err(NetError::Failed(format!(
                        "agent {}: the {what} ended without a result",
                        remotes[h].addr
                    )));
                }
                Err(e) => return Err(failed(&remotes[h].addr, what, e)),
            }
        }
        Ok(())
    }
    .await;
    readers.iter().for_each(|r| r.abort());
    result
}

/// A precondition pass on every agent at once (`reqs[h]` for agent h). Each target's state goes
/// to `on_progress(h, …)` as the agents stream it, so that the caller keeps it; `stop` (Ctrl-C)
/// tells every agent to stop, which sends its last states and ends. An agent silent for
/// `silence` is lost, and so is the pass: it fails. Each agent's last word (its notes and
/// warnings) goes to `on_notes(h, …)`.
pub async fn precondition(
    remotes: &mut [Remote],
    reqs: Vec<pb::PreconditionRequest>,
    stop: &AtomicBool,
    silence: Duration,
    on_progress: &mut dyn FnMut(usize, &pb::PreconditionProgress),
    on_notes: &mut dyn FnMut(usize, &pb::PreconditionDone),
) -> Result<PassEnd, NetError> {
    let streams = start_precondition(remotes, reqs).await?;
    follow_precondition(remotes, streams, stop, silence, on_progress, on_notes).await
}

/// Every agent's precondition pass started (`reqs[h]` for agent h), in order: their streams.
pub async fn start_precondition(
    remotes: &mut [Remote],
    reqs: Vec<pb::PreconditionRequest>,
) -> Result<Vec<tonic::Streaming<pb::PreconditionEvent>>, NetError> {
    let mut streams = Vec::new();
    for (r, req) in remotes.iter_mut().zip(reqs) {
        streams.push(r.client.precondition(req).await.map_err(|e| failed(&r.addr, "precondition", e))?.into_inner());
    }
    Ok(streams)
}

/// The precondition passes [`start_precondition`] started, followed to their ends (see
/// [`precondition`]).
pub async fn follow_precondition(
    remotes: &mut [Remote],
    streams: Vec<tonic::Streaming<pb::PreconditionEvent>>,
    stop: &AtomicBool,
    silence: Duration,
    on_progress: &mut dyn FnMut(usize, &pb::PreconditionProgress),
    on_notes: &mut dyn FnMut(usize, &pb::PreconditionDone),
) -> Result<PassEnd, NetError> {
    let (who, relay) = (remotes.iter().map(|r| r.who()).collect::<Vec<_>>(), relays(remotes));
    let mut interrupted = false;
    follow(remotes, streams, "precondition pass", stop, silence, &mut |h, e: pb::PreconditionEvent| match e.event {
        Some(pb::precondition_event::Event::Progress(p)) => {
            on_progress(h, &p);
            Ok(false)
        }
        Some(pb::precondition_event::Event::Done(d)) => {
            on_notes(h, &d);
            if !d.error.is_empty() {
                // The engine's errors of a pass say what they are about.
                let what = if d.error.starts_with("precondition") { "" } else { "precondition: " };
                let msg = pass_error(relay[h].as_deref(), &who[h], what, &d.error);
                return Err(if d.input { NetError::Input(msg) } else { NetError::Failed(msg) });
            }
            interrupted |= d.interrupted;
            Ok(true)
        }
        None => Ok(false),
    })
    .await?;
    Ok(if interrupted || stop.load(Ordering::Relaxed) { PassEnd::Interrupted } else { PassEnd::Complete })
}

/// What one agent's verification pass found.
#[derive(Debug, Clone, Default)]
pub struct AgentPass {
    pub counts: iocurve_stats::VerifyCounts,
    pub unlisted: u64,
    /// The map file on the agent.
    pub map: String,
}

/// How the final verification pass ended on the agents.
#[derive(Debug, Clone)]
pub enum VerifyEnd {
    /// Every agent read back every block its map knows.
    Done(Vec<AgentPass>),
    /// Stopped (Ctrl-C), with an agent's word on why it could not finish sooner if it had one.
    Interrupted(Option<String>),
}

/// The final verification pass on every agent at once (`reqs[h]` for agent h): each agent
/// reads back every block its map knows. Problems go to `on_problem(h, …)` as they come;
/// `on_progress(h, done, total)` as the agents report it (four times a second).
pub async fn verify_pass(
    remotes: &mut [Remote],
    reqs: Vec<pb::VerifyPassRequest>,
    stop: &AtomicBool,
    silence: Duration,
    on_progress: &mut dyn FnMut(usize, u64, u64),
    on_problem: &mut dyn FnMut(usize, &pb::VerifyProblem),
) -> Result<VerifyEnd, NetError> {
    let streams = start_verify_pass(remotes, reqs).await?;
    follow_verify_pass(remotes, streams, stop, silence, on_progress, on_problem).await
}

/// Every agent's verification pass started (`reqs[h]` for agent h), in order: their streams.
pub async fn start_verify_pass(
    remotes: &mut [Remote],
    reqs: Vec<pb::VerifyPassRequest>,
) -> Result<Vec<tonic::Streaming<pb::VerifyPassEvent>>, NetError> {
    let mut streams = Vec::new();
    for (r, req) in remotes.iter_mut().zip(reqs) {
        streams.push(r.client.verify_pass(req).await.map_err(|e| failed(&r.addr, "verification", e))?.into_inner());
    }
    Ok(streams)
}

/// The verification passes [`start_verify_pass`] started, followed to their ends (see
/// [`verify_pass`]).
pub async fn follow_verify_pass(
    remotes: &mut [Remote],
    streams: Vec<tonic::Streaming<pb::VerifyPassEvent>>,
    stop: &AtomicBool,
    silence: Duration,
    on_progress: &mut dyn FnMut(usize, u64, u64),
    on_problem: &mut dyn FnMut(usize, &pb::VerifyProblem),
) -> Result<VerifyEnd, NetError> {
    let (who, relay) = (remotes.iter().map(|r| r.who()).collect::<Vec<_>>(), relays(remotes));
    let mut out = vec![AgentPass::default(); remotes.len()];
    let mut interrupted = false;
    let mut why = None;
    let on: Vec<String> =
        remotes.iter().map(|r| if r.in_process { String::new() } else { format!(" (agent {})", r.addr) }).collect();
    follow(remotes, streams, "verification pass", stop, silence, &mut |h, e: pb::VerifyPassEvent| match e.event {
        Some(pb::verify_pass_event::Event::Progress(p)) => {
            on_progress(h, p.done_bytes, p.total_bytes);
            Ok(false)
        }
        Some(pb::verify_pass_event::Event::Problems(ps)) => {
            ps.problems.iter().for_each(|p| on_problem(h, p));
            Ok(false)
        }
        Some(pb::verify_pass_event::Event::Done(d)) => {
            if d.interrupted && stop.load(Ordering::Relaxed) {
                // Stopped: what the agent says of it explains, it is no failure.
                interrupted = true;
                if !d.error.is_empty() {
                    why.get_or_insert_with(|| format!("{}{}", iocurve_net::printable(&d.error), on[h]));
                }
                return Ok(true);
            }
            if !d.error.is_empty() {
                let msg = pass_error(relay[h].as_deref(), &who[h], "verification: ", &d.error);
                return Err(if d.input { NetError::Input(msg) } else { NetError::Failed(msg) });
            }
            interrupted |= d.interrupted;
            out[h] = AgentPass {
                counts: d.counts.as_ref().map(wire::verify_from).unwrap_or_default(),
                unlisted: d.unlisted,
                map: iocurve_net::printable(&d.map),
            };
            Ok(true)
        }
        None => Ok(false),
    })
    .await?;
    Ok(if interrupted || stop.load(Ordering::Relaxed) { VerifyEnd::Interrupted(why) } else { VerifyEnd::Done(out) })
}

#[cfg(test)]
mod tests {
    use super::pass_error;

    /// Issue 46: a pass's error through a relay names the agent once, and the relay it came
    /// through (it said "agent R: precondition: agent A: precondition: …").
    #[test]
    fn a_pass_error_names_its_agent_once_and_its_relay() {
        let through = pass_error(
            Some("10.0.0.9:7421"),
            "agent 10.0.0.9:7421: ",
            "precondition: ",
            "agent 10.0.0.2:7420: precondition: /t.dat: EIO",
        );
        assert_eq!(through, "agent 10.0.0.2:7420: precondition: /t.dat: EIO (through relay 10.0.0.9:7421)");
        // A relay's own error (no agent named) and an agent's are named as before.
        let own = pass_error(Some("10.0.0.9:7421"), "agent 10.0.0.9:7421: ", "verification: ", "no agent left");
        assert_eq!(own, "agent 10.0.0.9:7421: verification: no agent left");
        assert_eq!(pass_error(None, "agent a:1: ", "verification: ", "agent b"), "agent a:1: verification: agent b");
    }
}
