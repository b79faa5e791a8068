//! A relay's passes over its group (issue 46): preconditioning and the final verification run
//! on every agent of the group at once with the coordinator's own code (`super::super::passes`),
//! and go up as one agent's pass — each target by its place among the group's targets (as the
//! relay's `Targets` gave them), the group's progress and counts added up, its `Done` last. What
//! a flat coordinator does with an agent's pass (a silent agent fails it, Ctrl-C stops every
//! agent, the last states say where to resume) the relay does with its agents'.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use iocurve_net::agent::relay::PassEvents;
use iocurve_net::{NetError, pb, wire};
use iocurve_stats::VerifyCounts;
use tonic::Status;

use super::super::client::{self, VerifyEnd};
use super::up::Up;
use super::{MAX_QUEUED, Relay, Running};

/// How often the group's verification progress goes up (its agents say theirs four times a
/// second each).
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// An agent of the group silent this long during a pass (its pass says how far it is every
/// second, syncs included) fails it: within the coordinator's own wait for the relay (10 s), so
/// that the agent is named, not the relay.
const PASS_SILENCE: Duration = Duration::from_secs(7);

/// Problems per event up, as an agent batches them.
const PROBLEMS_PER_EVENT: usize = 1_000;

/// The group's agents' places among its targets: each one's first and how many.
fn places(remotes: &[client::Remote]) -> Vec<(u32, u32)> {
    remotes.iter().map(|r| (r.target_offset, r.target_count)).collect()
}

/// The relay's `running` while a pass runs: cleared when the pass ends, however it ends.
struct Ended(Arc<std::sync::Mutex<Option<Running>>>);

impl Drop for Ended {
    fn drop(&mut self) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// Runs a pass over the group: its callbacks are the coordinator's `dyn FnMut` (not `Send`), so
/// it is driven from a blocking thread of its own, its connections' tasks on the runtime (as a
/// relay's step is).
fn spawn_pass<P, F>(pass: P)
where
    P: FnOnce() -> F + Send + 'static,
    F: std::future::Future<Output = ()>,
{
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || runtime.block_on(pass()));
}

/// A pass's error as the coordinator reads an agent's (`input`: bad input, exit code 2).
fn error_of(e: &NetError) -> (String, bool) {
    (e.to_string(), matches!(e, NetError::Input(_)))
}

/// Why a pass its agents ended by themselves ended, when the relay's delegations (which its
/// agents end their passes by) ran out during it: not a Ctrl-C, and not for the coordinator to
/// take for one.
fn delegations_ended(not_after_unix: u64) -> Option<String> {
    (iocurve_net::unix_s() >= not_after_unix).then(|| {
        format!(
            "this relay's delegations ended during the pass (at Unix second {not_after_unix}), and its agents stopped with them: give the run longer credentials (--launch-valid-h with --launch)"
        )
    })
}

/// A pass over the group as it starts: the group held, its stop flag, where its events go up,
/// and what clears the relay's `running` when it ends.
struct Pass<E> {
    guard: tokio::sync::OwnedMutexGuard<Option<super::Group>>,
    stop: Arc<AtomicBool>,
    up: Up<E>,
    ended: Ended,
}

impl Relay {
    /// The group, for a pass of run `run_key` (`what`, whose request names no targets: the
    /// agents have theirs from the `Relay` call): held while the pass runs (no step or other
    /// pass meanwhile), with its stop flag in `running` so that `Stop` reaches it, and where its
    /// events go up.
    async fn pass_group<E: Send + 'static>(
        &self,
        run_key: u32,
        groups: &[pb::TargetGroup],
        what: &str,
        events: PassEvents<E>,
    ) -> Result<Pass<E>, Status> {
        if !groups.is_empty() {
            return Err(super::bad(format!("a relay's agents {what} the groups of the Relay call: send none")));
        }
        let guard = self.held_group(run_key)?;
        let stop = Arc::new(AtomicBool::new(false));
        *self.running.lock().unwrap_or_else(|e| e.into_inner()) = Some(Running { stop: stop.clone(), relayed: None });
        let up = Up::new(events, stop.clone(), MAX_QUEUED);
        Ok(Pass { guard, stop, up, ended: Ended(self.running.clone()) })
    }

    /// `Precondition` over the group (see [`iocurve_net::agent::relay::RelayHandler`]). Every
    /// agent's pass is started before the coordinator has the group's stream (its wait for the
    /// relay's events runs from there); an agent that refuses refuses the group's.
    pub(super) async fn precondition_pass(
        &self,
        req: pb::PreconditionRequest,
        events: PassEvents<pb::PreconditionEvent>,
    ) -> Result<(), Status> {
        let Pass { mut guard, stop, up, ended } =
            self.pass_group(req.run_key, &req.groups, "precondition", events).await?;
        let g = guard.as_mut().ok_or_else(|| Status::failed_precondition("this relay has no group"))?;
        let places = places(&g.remotes);
        // Each agent its own targets, and where to resume each (by its own places).
        let reqs: Vec<pb::PreconditionRequest> = g
            .groups
            .iter()
            .zip(&places)
            .map(|(groups, &(first, count))| pb::PreconditionRequest {
                groups: client::wire_groups(groups),
                resume: req
                    .resume
                    .iter()
                    .filter(|r| (first..first.saturating_add(count)).contains(&r.target))
                    .map(|r| pb::PreconditionResume { target: r.target - first, ..r.clone() })
                    .collect(),
                ..req.clone()
            })
            .collect();
        let streams = client::start_precondition(&mut g.remotes, reqs).await.map_err(|e| super::status_of(&e))?;
        let not_after = g.not_after_unix;
        spawn_pass(move || async move {
            let Some(g) = guard.as_mut() else { return };
            let who: Vec<String> = g.remotes.iter().map(|r| r.who()).collect();
            let (mut notes, mut warnings) = (Vec::new(), Vec::new());
            let mut on_progress = |k: usize, p: &pb::PreconditionProgress| {
                // An agent's own targets only: a place beyond them is another agent's.
                let Some(&(first, _)) = places.get(k).filter(|(_, count)| p.target < *count) else { return };
                let p = pb::PreconditionProgress { target: first + p.target, ..p.clone() };
                up.send(pb::PreconditionEvent { event: Some(pb::precondition_event::Event::Progress(p)) });
            };
            let mut on_notes = |k: usize, d: &pb::PreconditionDone| {
                notes.extend(d.notes.iter().map(|n| format!("{}{n}", who[k])));
                warnings.extend(d.warnings.iter().map(|w| format!("{}{w}", who[k])));
            };
            let end = client::follow_precondition(
                &mut g.remotes,
                streams,
                &stop,
                PASS_SILENCE,
                &mut on_progress,
                &mut on_notes,
            )
            .await;
            let mut done = pb::PreconditionDone { notes, warnings, ..Default::default() };
            match end {
                Ok(end) => done.interrupted = end == client::PassEnd::Interrupted,
                Err(e) => (done.error, done.input) = error_of(&e),
            }
            if done.interrupted && done.error.is_empty() && !stop.load(Ordering::Relaxed) {
                done.error = delegations_ended(not_after).unwrap_or_default();
            }
            // Free for the next call before saying this one is done.
            drop((ended, guard));
            up.send(pb::PreconditionEvent { event: Some(pb::precondition_event::Event::Done(done)) });
        });
        Ok(())
    }

    /// `VerifyPass` over the group (see [`iocurve_net::agent::relay::RelayHandler`]), started
    /// as a precondition pass is.
    pub(super) async fn verify_group(
        &self,
        req: pb::VerifyPassRequest,
        events: PassEvents<pb::VerifyPassEvent>,
    ) -> Result<(), Status> {
        let Pass { mut guard, stop, up, ended } = self.pass_group(req.run_key, &req.groups, "verify", events).await?;
        let g = guard.as_mut().ok_or_else(|| Status::failed_precondition("this relay has no group"))?;
        let places = places(&g.remotes);
        let reqs: Vec<pb::VerifyPassRequest> = g
            .groups
            .iter()
            .map(|groups| pb::VerifyPassRequest { groups: client::wire_groups(groups), ..req.clone() })
            .collect();
        let streams = client::start_verify_pass(&mut g.remotes, reqs).await.map_err(|e| super::status_of(&e))?;
        let not_after = g.not_after_unix;
        spawn_pass(move || async move {
            let Some(g) = guard.as_mut() else { return };
            let addrs: Vec<String> = g.remotes.iter().map(|r| r.addr.clone()).collect();
            // Problems go up in batches, as an agent sends them; the group's progress is every
            // agent's last word added up, a few times a second.
            let pending = RefCell::new(Vec::new());
            let flush = || {
                let problems = std::mem::take(&mut *pending.borrow_mut());
                if !problems.is_empty() {
                    let ps = pb::VerifyProblems { problems };
                    up.send(pb::VerifyPassEvent { event: Some(pb::verify_pass_event::Event::Problems(ps)) });
                }
            };
            let mut reached = vec![(0u64, 0u64); places.len()];
            let mut sent = Instant::now() - PROGRESS_EVERY;
            let mut on_progress = |k: usize, done: u64, total: u64| {
                reached[k] = (done, total);
                if sent.elapsed() >= PROGRESS_EVERY {
                    sent = Instant::now();
                    flush();
                    let (done_bytes, total_bytes) =
                        reached.iter().fold((0u64, 0u64), |a, r| (a.0.saturating_add(r.0), a.1.saturating_add(r.1)));
                    let p = pb::VerifyPassProgress { done_bytes, total_bytes };
                    up.send(pb::VerifyPassEvent { event: Some(pb::verify_pass_event::Event::Progress(p)) });
                }
            };
            let mut on_problem = |k: usize, p: &pb::VerifyProblem| {
                // An agent's own targets only: a place beyond them is another agent's.
                let Some(&(first, _)) = places.get(k).filter(|(_, count)| p.target < *count) else { return };
                pending.borrow_mut().push(pb::VerifyProblem { target: first + p.target, ..p.clone() });
                if pending.borrow().len() >= PROBLEMS_PER_EVENT {
                    flush();
                }
            };
            let end = client::follow_verify_pass(
                &mut g.remotes,
                streams,
                &stop,
                PASS_SILENCE,
                &mut on_progress,
                &mut on_problem,
            )
            .await;
            flush();
            let done = match end {
                Ok(VerifyEnd::Done(passes)) => {
                    let mut counts = VerifyCounts::default();
                    passes.iter().for_each(|p| counts.merge(&p.counts));
                    pb::VerifyPassDone {
                        counts: Some(wire::verify_to(&counts)),
                        unlisted: passes.iter().fold(0u64, |a, p| a.saturating_add(p.unlisted)),
                        // Each agent's map where it keeps it: the coordinator names none of its own.
                        map: addrs
                            .iter()
                            .zip(&passes)
                            .map(|(a, p)| format!("{a}:{}", p.map))
                            .collect::<Vec<_>>()
                            .join(", "),
                        ..Default::default()
                    }
                }
                Ok(VerifyEnd::Interrupted(why)) => {
                    let why =
                        why.or_else(|| if stop.load(Ordering::Relaxed) { None } else { delegations_ended(not_after) });
                    pb::VerifyPassDone { interrupted: true, error: why.unwrap_or_default(), ..Default::default() }
                }
                Err(e) => {
                    let (error, input) = error_of(&e);
                    pb::VerifyPassDone { error, input, ..Default::default() }
                }
            };
            drop((ended, guard));
            up.send(pb::VerifyPassEvent { event: Some(pb::verify_pass_event::Event::Done(done)) });
        });
        Ok(())
    }
}
