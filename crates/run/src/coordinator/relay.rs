//! The relay's side of a relay tree (issue 46; docs/relays.md): an agent started with
//! `--relay` drives a group of agents for its coordinator with the coordinator's own code —
//! dialling under the grant the coordinator minted, clocks, one start moment, the intervals
//! merged exactly — and streams the group's merged intervals up as one agent streams its own,
//! each saying how many hosts it merges; before its `Done`, each agent's step summed up (a
//! `HostSummary` event per agent: the coordinator's row of that host), and the intervals of
//! the agents the coordinator asks for in full as they come (`HostInterval` events).
//!
//! Injected faults go through, on every target or on one, replays (each agent its share of the
//! trace), I/O logs (the group's as one, before its `Done`), and the precondition and
//! verification passes (`passes`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use iocurve_engine::replay::ReplayIo;
use iocurve_engine::{StepObserver, StepProgress};
use iocurve_net::agent::relay::{RelayHandler, StepEvents};
use iocurve_net::{NetError, pb, unix_ns, wire};
use iocurve_plan::TargetGroup;
use iocurve_stats::{CpuMean, CpuUsage, IntervalStats, StepRecord};
use tonic::Status;

mod passes;
mod up;

use up::Up;

use super::client::{self, CONNECT_DEADLINE, ClientConfig, Remote};
use super::clock::{ClockVerdict, check_clock_against};
use super::coordinate::{Relayed, StepSpec, run_step};

/// The code of a note that carries a relay's warning of a step (an agent of its group set up
/// late, a clock that moved) to its coordinator.
pub const RELAY_WARNING: &str = "relay_warning";

/// The most agents one relay drives: its group is to be about 32 (docs/relays.md); a request
/// for more is a mistake, or a relay's memory and connections asked for by someone else.
pub const MAX_CHILDREN: usize = 256;

/// Pings per child when the relay joins (as the coordinator does when it connects).
const JOIN_PINGS: usize = 8;

/// A child silent this long once its step should have started is lost (as for a coordinator).
const CHILD_SILENCE: Duration = Duration::from_secs(10);

/// The relay's lead when its coordinator asks for a step at once (start moment 0).
const AT_ONCE_LEAD: Duration = Duration::from_millis(200);

/// How often a relay pings its agents to keep its claim on them (a third of the agents' default
/// claim expiry), as the coordinator pings its own.
const CLAIM_KEEPING: Duration = Duration::from_secs(20);

/// Events a relay queues for a coordinator that does not read them: beyond, its group's step
/// stops (a step's events are a few a second).
const MAX_QUEUED: usize = 4096;

/// And beyond that, per agent whose intervals go up in full, this many of its intervals (a
/// coordinator that far behind is as good as gone).
const QUEUED_IN_FULL: usize = 16;

/// How long a child gets to answer the relay's EndAfter: well within the coordinator's wait
/// for the relay's answer.
const CHILD_END_DEADLINE: Duration = Duration::from_secs(1);

/// The group a coordinator's `Relay` call made, for its run.
struct Group {
    remotes: Vec<Remote>,
    /// Each child's target groups.
    groups: Vec<Vec<TargetGroup>>,
    /// Each child's `workers_scale` (uneven hosts): its share of the step's workers.
    scales: Vec<f64>,
    run_key: u32,
    /// The earliest end of its delegations (Unix s): the group acts no longer.
    not_after_unix: u64,
    /// The relay's [`Relay::epoch`] when it was made: a `leave` after it ends it.
    epoch: u64,
    /// What the task keeping the claims pings (it holds them weakly): the group gone, their
    /// connections close at once and the agents are free for another coordinator. A lost
    /// agent leaves it with the group.
    pinged: Arc<std::sync::Mutex<Vec<client::Client>>>,
}

impl Group {
    /// Agents lost (by their places) sit out the rest of the run, as with the coordinator: gone
    /// from the group and from what keeps its claims (a host that came back is not the relay's
    /// to keep).
    fn forget(&mut self, lost: impl Iterator<Item = usize>) {
        let n = self.remotes.len();
        let mut lost: Vec<usize> = lost.filter(|&i| i < n).collect();
        lost.sort_unstable();
        lost.dedup();
        for i in lost.into_iter().rev() {
            self.remotes.remove(i);
            self.groups.remove(i);
            self.scales.remove(i);
        }
        *self.pinged.lock().unwrap_or_else(|e| e.into_inner()) =
            self.remotes.iter().map(|r| r.client.clone()).collect();
    }

    /// The group for a call of run `run_key`, while its delegations last.
    fn check(&self, run_key: u32) -> Result<(), Status> {
        if run_key != self.run_key {
            return Err(Status::permission_denied("this relay's group is for another run"));
        }
        if iocurve_net::unix_s() > self.not_after_unix {
            return Err(Status::failed_precondition("this relay's delegations have ended: its group acts no longer"));
        }
        Ok(())
    }
}

/// The step or pass the group runs now: its stop flag, and what a step's `EndAfter` needs.
struct Running {
    stop: Arc<AtomicBool>,
    relayed: Option<Arc<Relayed>>,
}

/// What `iocurve agent --relay` hands its service (see [`RelayHandler`]).
#[derive(Default)]
pub struct Relay {
    group: Arc<tokio::sync::Mutex<Option<Group>>>,
    joined: AtomicBool,
    running: Arc<std::sync::Mutex<Option<Running>>>,
    /// Counts the `leave`s: a group made before one is gone.
    epoch: Arc<std::sync::atomic::AtomicU64>,
    /// Wakes the task keeping a group's claims when its group goes: its connections close at
    /// once, not at its next round.
    left: Arc<tokio::sync::Notify>,
    /// The run key of the group this relay has (+1; 0: none), and of the one it let go last.
    run: std::sync::atomic::AtomicU64,
    left_run: std::sync::atomic::AtomicU64,
}

impl Relay {
    pub fn new() -> Relay {
        Relay::default()
    }

    /// The group, held for a step or pass of run `run_key` (no other meanwhile), while it has
    /// an agent left and its delegations last.
    fn held_group(&self, run_key: u32) -> Result<tokio::sync::OwnedMutexGuard<Option<Group>>, Status> {
        let guard = self
            .group
            .clone()
            .try_lock_owned()
            .map_err(|_| Status::resource_exhausted("this relay is running a step or a pass"))?;
        match guard.as_ref() {
            None => return Err(Status::failed_precondition("this relay has no group")),
            // Every agent of its group lost: the coordinator loses the relay with them.
            Some(g) if g.remotes.is_empty() => return Err(Status::unavailable("this relay has no agent left")),
            Some(g) => g.check(run_key)?,
        }
        Ok(guard)
    }
}

/// How far off the children's clocks may be (from the relay's, and from the coordinator's).
fn max_skew(req: &pb::RelayRequest) -> Duration {
    Duration::from_millis(if req.max_skew_ms == 0 { 100 } else { req.max_skew_ms })
}

fn bad(why: String) -> Status {
    Status::invalid_argument(why)
}

/// A child's `ClientConfig`: the run's CA, the relay's certificate for the run, the child's
/// delegation; its certificate must name the host dialled. With the delegation's end.
fn child_config(req: &pb::RelayRequest, c: &pb::RelayChild) -> Result<(ClientConfig, u64), Status> {
    let d = iocurve_net::delegation::Delegation::parse(&c.delegation)
        .map_err(|e| bad(format!("agent {}: its delegation: {}", c.address, e.reason())))?;
    if d.run_key != req.run_key {
        return Err(bad(format!(
            "agent {}: its delegation is for run key {}, the group's for {}",
            c.address, d.run_key, req.run_key
        )));
    }
    if c.key.len() != 64 || !c.key.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad(format!("agent {}: a delegation's key is 64 hex digits", c.address)));
    }
    client::endpoint(&c.address).map_err(|e| bad(e.to_string()))?;
    let cfg = ClientConfig {
        token: String::new(),
        ca_pem: Some(req.ca_pem.clone()),
        identity: Some((req.cert_pem.clone(), req.key_pem.clone())),
        insecure: false,
        tls_name: None,
        per_host_tokens: false,
        max_skew: max_skew(req),
        delegation: Some(Arc::new(iocurve_net::delegation::Minted {
            delegation: c.delegation.clone(),
            key: c.key.clone(),
        })),
    };
    Ok((cfg, d.not_after_unix))
}

/// What a relay does not take in a step request: refused by name, before any child is asked.
fn unsupported(r: &pb::StepRequest) -> Option<&'static str> {
    if !r.replay.is_empty() {
        // A coordinator of this protocol sends a relay its agents' shares (`relayed_replays`).
        Some("one replay share for a relay: a relay takes its agents' shares (relayed_replays), one each")
    } else if !r.groups.is_empty() {
        Some("target groups in the step: a relay's children have theirs from the Relay call")
    } else {
        None
    }
}

#[tonic::async_trait]
impl RelayHandler for Relay {
    async fn join(&self, req: pb::RelayRequest) -> Result<pb::RelayReply, Status> {
        if req.children.is_empty() || req.children.len() > MAX_CHILDREN {
            return Err(bad(format!(
                "a relay drives 1 to {MAX_CHILDREN} agents, not {}: split the hosts into groups",
                req.children.len()
            )));
        }
        let (configs, ends): (Vec<ClientConfig>, Vec<u64>) =
            req.children.iter().map(|c| child_config(&req, c)).collect::<Result<Vec<_>, _>>()?.into_iter().unzip();
        let groups = req
            .children
            .iter()
            .map(|c| {
                iocurve_net::agent::target_groups(&c.groups)
                    .map_err(|e| bad(format!("agent {}: its target groups: {}", c.address, e.message())))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let scales = req
            .children
            .iter()
            .map(|c| match c.workers_scale {
                0.0 => Ok(1.0),
                s if s > 0.0 && s <= iocurve_plan::MAX_WORKERS_SCALE => Ok(s),
                s => Err(bad(format!(
                    "agent {}: a workers_scale of {s} (more than 0, at most {})",
                    c.address,
                    iocurve_plan::MAX_WORKERS_SCALE
                ))),
            })
            .collect::<Result<Vec<f64>, _>>()?;
        // The request is sound: the group this relay has (an earlier coordinator's, or this
        // one's before a new grant) goes, while no step runs — the relay is no group's until
        // the new one is made — and its connections close before the agents are dialled again,
        // or they would refuse the new certificate as still in use by the old one.
        if let Ok(mut g) = self.group.try_lock()
            && g.is_some()
        {
            self.joined.store(false, Ordering::Release);
            self.run.store(0, Ordering::Release);
            *g = None;
            drop(g);
            self.left.notify_waiters();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let epoch = self.epoch.load(Ordering::Acquire);
        let calls: Vec<_> = req
            .children
            .iter()
            .zip(configs)
            .map(|(c, cfg)| {
                let addr = c.address.clone();
                tokio::spawn(async move {
                    tokio::time::timeout(CONNECT_DEADLINE, client::connect(&addr, &cfg, JOIN_PINGS)).await
                })
            })
            .collect();
        let mut group = Group {
            remotes: Vec::new(),
            groups: Vec::new(),
            scales: Vec::new(),
            run_key: req.run_key,
            not_after_unix: ends.into_iter().min().unwrap_or(0),
            epoch,
            pinged: Arc::default(),
        };
        let mut hosts = Vec::new();
        for (((c, call), groups), scale) in req.children.iter().zip(calls).zip(groups).zip(scales) {
            let reached = match call.await {
                Ok(Ok(Ok(r))) => Ok(r),
                Ok(Ok(Err(e))) => Err(e.to_string()),
                Ok(Err(_)) => Err(format!("it did not answer within {} s", CONNECT_DEADLINE.as_secs())),
                Err(e) => Err(format!("connecting: {e}")),
            };
            // Held to the coordinator's clock too: each within the bound of the relay's would
            // let an agent be twice the bound off the coordinator's.
            let reached = reached.and_then(|r| {
                let offset = r.offset_ns.saturating_add(req.relay_offset_ns);
                let rtt = r.rtt_ns.max(0).saturating_add(req.relay_rtt_ns.max(0));
                match check_clock_against(
                    &c.address,
                    offset,
                    rtt,
                    max_skew(&req),
                    "the coordinator's (through this relay)",
                ) {
                    ClockVerdict::Refuse(why) => Err(why),
                    _ => Ok(r),
                }
            });
            match reached {
                Ok(r) => {
                    hosts.push(pb::RelayedHost {
                        hello: Some(r.hello.clone()),
                        offset_ns: r.offset_ns,
                        rtt_ns: r.rtt_ns,
                        lost: String::new(),
                    });
                    group.remotes.push(r);
                    group.groups.push(groups);
                    group.scales.push(scale);
                }
                Err(why) => {
                    tracing::warn!(agent = %c.address, why, "the relay could not reach its agent");
                    hosts.push(pb::RelayedHost { lost: iocurve_net::printable(&why), ..Default::default() });
                }
            }
        }
        // A step still running (its coordinator gone) holds the group until it ends.
        let mut slot =
            self.group.try_lock().map_err(|_| Status::resource_exhausted("this relay is running a step or a pass"))?;
        // A new epoch for the new group: what kept the earlier group's claims stops.
        if self.epoch.compare_exchange(epoch, epoch + 1, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return Err(Status::aborted("this relay was taken by another coordinator meanwhile"));
        }
        let epoch = epoch + 1;
        group.epoch = epoch;
        // The relay keeps its claim on its agents between steps, as a coordinator does on its
        // own (an agent lets an owner silent for its claim expiry go), until the group goes.
        group.pinged = Arc::new(std::sync::Mutex::new(group.remotes.iter().map(|r| r.client.clone()).collect()));
        let (epochs, until, clients) = (self.epoch.clone(), group.not_after_unix, Arc::downgrade(&group.pinged));
        let left = self.left.clone();
        tokio::spawn(async move {
            loop {
                // Woken when a group goes: this one's gone, its clients go now.
                tokio::select! {
                    _ = tokio::time::sleep(CLAIM_KEEPING) => {}
                    _ = left.notified() => {}
                }
                // Listening before the checks: a group dropped after them still wakes the round.
                let woken = left.notified();
                tokio::pin!(woken);
                woken.as_mut().enable();
                if epochs.load(Ordering::Acquire) != epoch || iocurve_net::unix_s() > until {
                    break;
                }
                let Some(clients) = clients.upgrade() else { break };
                let clients = clients.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let round = async {
                    for c in clients.iter() {
                        let mut c = c.clone();
                        let _ = tokio::time::timeout(Duration::from_secs(5), c.ping(pb::PingRequest {})).await;
                    }
                };
                tokio::select! {
                    _ = round => {}
                    _ = woken => {}
                }
            }
        });
        self.run.store(u64::from(group.run_key) + 1, Ordering::Release);
        self.left_run.store(0, Ordering::Release);
        *slot = Some(group);
        self.joined.store(true, Ordering::Release);
        // A leave between the epoch's change and now: it cleared nothing of this group yet.
        if self.epoch.load(Ordering::Acquire) != epoch {
            self.joined.store(false, Ordering::Release);
            *slot = None;
            return Err(Status::aborted("this relay was taken by another coordinator meanwhile"));
        }
        Ok(pb::RelayReply { hosts })
    }

    fn joined(&self) -> bool {
        self.joined.load(Ordering::Acquire)
    }

    fn leave(&self) {
        self.joined.store(false, Ordering::Release);
        self.left_run.store(self.run.swap(0, Ordering::AcqRel), Ordering::Release);
        let before = self.epoch.fetch_add(1, Ordering::AcqRel);
        self.stop();
        // Once a step still running ends (it was told to stop): its connections go with it.
        let (group, left) = (self.group.clone(), self.left.clone());
        tokio::spawn(async move {
            let mut g = group.lock().await;
            if g.as_ref().is_some_and(|g| g.epoch <= before) {
                *g = None;
            }
            drop(g);
            left.notify_waiters();
        });
    }

    fn let_go(&self, run_key: u32) -> bool {
        !self.joined() && self.left_run.load(Ordering::Acquire) == u64::from(run_key) + 1
    }

    fn group_run(&self) -> Option<u32> {
        let run = self.run.load(Ordering::Acquire);
        (self.joined() && run > 0).then(|| (run - 1) as u32)
    }

    fn running(&self) -> bool {
        self.running.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    async fn targets(&self, req: pb::TargetsRequest) -> Result<pb::TargetsReply, Status> {
        let mut guard =
            self.group.try_lock().map_err(|_| Status::resource_exhausted("this relay is running a step or a pass"))?;
        let g = guard.as_mut().ok_or_else(|| Status::failed_precondition("this relay has no group"))?;
        if !req.groups.is_empty() {
            return Err(bad("a relay's children open the groups of the Relay call: send none".into()));
        }
        g.check(req.run_key)?;
        let stop = AtomicBool::new(false);
        let opened =
            client::targets(&mut g.remotes, &g.groups, req.scratch_size, req.write, req.unfilled, req.run_key, &stop)
                .await
                .map_err(|e| status_of(&e))?;
        // An agent that could not open them is lost, as it would be to a coordinator; the others
        // go on (its place in the targets' list is nobody's).
        let (mut targets, mut lost) = (Vec::new(), Vec::new());
        for (i, (r, facts)) in g.remotes.iter().zip(opened).enumerate().rev() {
            match facts {
                Ok(facts) => targets
                    .push(facts.into_iter().map(|f| pb::TargetFacts { host: r.addr.clone(), ..f }).collect::<Vec<_>>()),
                Err(why) => lost.push((i, pb::HostLoss { address: r.addr.clone(), into_step_s: 0.0, why })),
            }
        }
        if targets.is_empty() {
            let why: Vec<String> = lost.iter().rev().map(|(_, l)| format!("agent {}: {}", l.address, l.why)).collect();
            return Err(Status::unavailable(format!(
                "no agent of this relay could open its targets — {}",
                why.join("; ")
            )));
        }
        g.forget(lost.iter().map(|(i, _)| *i));
        let targets = targets.into_iter().rev().flatten().collect();
        Ok(pb::TargetsReply { targets, lost: lost.into_iter().rev().map(|(_, l)| l).collect() })
    }

    async fn run_step(&self, req: pb::StepRequest, events: StepEvents) -> Result<(), Status> {
        let received_unix_ns = unix_ns();
        if let Some(what) = unsupported(&req) {
            // Bad input for this run, not a relay gone: the coordinator ends the step with it.
            return Err(bad(what.to_string()));
        }
        if req.host_intervals.len() > MAX_CHILDREN {
            return Err(bad(format!(
                "{} agents' intervals asked for in full: a relay drives at most {MAX_CHILDREN}",
                req.host_intervals.len()
            )));
        }
        // The request checked as an agent checks its own (workload, faults, members), before
        // any child is asked. Faults on every target go on to every child; one on one target
        // came here because one of this group's agents has it (the coordinator places it over
        // every relay's agents), and goes on to the agents that have it, as the coordinator
        // places it over its own (`faults_for`).
        let (w, _, faults) = iocurve_net::agent::step_request(&req)?;
        let members = iocurve_net::agent::member_requests(&req)?;
        let guard = self.held_group(req.run_key)?;
        // A replay: each agent its own share, as the coordinator split the trace over the hosts
        // behind the relays (no more and no fewer than the group's agents).
        let agents = guard.as_ref().map_or(0, |g| g.remotes.len());
        if !req.relayed_replays.is_empty() {
            if req.rate_iops != 0.0 || !req.members.is_empty() {
                return Err(
                    bad("a replay step has neither a rate nor members: its trace sets every I/O's time".into()),
                );
            }
            if req.relayed_replays.iter().any(Vec::is_empty) {
                return Err(bad("an empty replay share for an agent of this relay: every share has its header".into()));
            }
            if req.relayed_replays.len() != agents {
                return Err(bad(format!(
                    "{} replay shares for this relay's {agents} agents: one each, in the group's order",
                    req.relayed_replays.len()
                )));
            }
        }
        // The agents whose intervals go up in full, by their places (an address no longer of
        // the group — lost since the coordinator asked — names none).
        let forward: Vec<Option<String>> = guard.as_ref().map_or_else(Vec::new, |g| {
            g.remotes.iter().map(|r| req.host_intervals.iter().any(|a| a == &r.addr).then(|| r.addr.clone())).collect()
        });
        let start_at = if req.start_at_unix_ns == 0 {
            received_unix_ns + AT_ONCE_LEAD.as_nanos() as i64
        } else {
            req.start_at_unix_ns
        };
        // The children are the run's hosts from the request's `host` on.
        let relayed = Arc::new(Relayed::new(start_at, req.host, req.hosts.max(1)));
        let stop = Arc::new(AtomicBool::new(false));
        *self.running.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(Running { stop: stop.clone(), relayed: Some(relayed.clone()) });
        let running = self.running.clone();
        // The observer must never wait (it is called inside the step's loop): `Up` queues. A
        // coordinator gone, or one far behind, stops the group's step.
        let up = Up::new(events, stop.clone(), MAX_QUEUED + QUEUED_IN_FULL * forward.iter().flatten().count());
        // The step's observer is the coordinator's `dyn StepObserver` (not `Send`): the step is
        // driven from a blocking thread of its own, its connections' tasks on the runtime.
        let runtime = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || {
            runtime.block_on(async move {
                let mut guard = guard;
                let Some(g) = guard.as_mut() else { return };
                // Each child its share of the step's workers, as the coordinator gives its own
                // agents theirs.
                let host_workers: Vec<u32> = g
                    .scales
                    .iter()
                    .map(|&s| super::coordinate::host_share(req.workers, &members, req.rate_iops > 0.0, s))
                    .collect();
                let spec = StepSpec {
                    workload: &w,
                    workers: req.workers,
                    host_workers: &host_workers,
                    members: &members,
                    scales: &g.scales,
                    rate_iops: (req.rate_iops > 0.0).then_some(req.rate_iops),
                    replay: (!req.relayed_replays.is_empty()).then_some(&req.relayed_replays[..]),
                    relayed_replays: &[],
                    replay_speed: None,
                    replay_intended: (0.1, Vec::new()),
                    targets: &g.groups,
                    fault_targets: &[],
                    relayed_hosts: &[],
                    host_intervals: &[],
                    scratch_size: req.scratch_size,
                    run_key: req.run_key,
                    verify_journal: req.verify_journal,
                    write_iolog: req.write_iolog,
                    threads: req.threads,
                    backend: &req.backend,
                    faults: &faults,
                    lead: Duration::from_nanos(start_at.saturating_sub(unix_ns()).max(0) as u64),
                    abort_on_host_loss: false,
                    silence: CHILD_SILENCE,
                    planned_hosts: g.remotes.len() as u32,
                    relayed: Some(&relayed),
                };
                let warmup_ns = (w.warmup_s * 1e9) as i64;
                let mut obs = Upward {
                    up,
                    warnings: Vec::new(),
                    received_unix_ns,
                    warmup_ns,
                    relayed: relayed.clone(),
                    record: None,
                    sent_started: false,
                    parts: 0,
                    cpu: Vec::new(),
                    forward,
                    origin_unix_ns: None,
                };
                let result = run_step(&mut g.remotes, &spec, &mut obs, &stop).await;
                *running.lock().unwrap_or_else(|e| e.into_inner()) = None;
                let last = match result {
                    // Every child lost: the coordinator loses this relay's group (not the run).
                    Ok(m) if m.merged.aborted.as_deref().is_some_and(super::all_lost) => {
                        Err(Status::unavailable(m.merged.aborted.unwrap_or_default()))
                    }
                    Ok(mut m) => {
                        // What the group issued (`--write-iolog`), before its rows and its Done
                        // as an agent sends its own: one log, each agent's I/Os placed on the
                        // moment the group's start went up as, its targets by their places
                        // among the group's.
                        if req.write_iolog {
                            let origin = obs.origin_unix_ns.unwrap_or(start_at);
                            let (ios, left_out) = group_iolog(std::mem::take(&mut m.iolog), origin);
                            for part in wire::iolog_parts(&ios, left_out) {
                                obs.send(pb::step_event::Event::Iolog(part));
                            }
                        }
                        // A lost agent sits out the rest of the run, as with the coordinator (its
                        // targets keep their places: the coordinator's list of them stays).
                        g.forget(m.lost.iter().copied());
                        let lost = m
                            .losses
                            .iter()
                            .map(|l| pb::HostLoss {
                                address: l.address.clone(),
                                into_step_s: l.into_step_s,
                                why: l.why.clone(),
                            })
                            .collect();
                        // Each agent's step summed up, one event each before the Done: the
                        // coordinator's row of that host.
                        for (k, h) in m.merged.per_host.iter().enumerate() {
                            let cpu = obs.cpu.get(k).map(CpuMean::mean).unwrap_or_default();
                            let summary = wire::host_summary_to(h, w.interval_s, &cpu);
                            obs.send(pb::step_event::Event::Summary(summary));
                        }
                        let mut done = pb::Done { hosts: g.remotes.len() as u32, lost, ..wire::done_to(&m.merged) };
                        // What the relay would have told its user, for the coordinator's.
                        done.notes.extend(
                            obs.warnings.drain(..).map(|message| pb::Note { code: RELAY_WARNING.into(), message }),
                        );
                        Ok(done)
                    }
                    // Every child lost: the coordinator loses this relay's group.
                    Err(NetError::Lost(why)) => Err(Status::unavailable(why)),
                    Err(NetError::Aborted(why)) => {
                        Ok(pb::Done { aborted: true, abort_reason: why, interrupted: true, ..Default::default() })
                    }
                    Err(NetError::Input(why)) => Ok(pb::Done { error: why, input: true, ..Default::default() }),
                    Err(e) => Ok(pb::Done { error: e.to_string(), ..Default::default() }),
                };
                // Free for the next step before saying this one is done.
                drop(guard);
                obs.up.end(last.map(|d| pb::StepEvent { event: Some(pb::step_event::Event::Done(d)) }));
            })
        });
        Ok(())
    }

    fn stop(&self) -> bool {
        match &*self.running.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(r) => {
                r.stop.store(true, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    async fn end_after(&self, req: pb::EndAfterRequest) -> pb::EndAfterReply {
        let children = match &*self.running.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(Running { relayed: Some(r), .. }) if r.start_at == req.start_at_unix_ns => {
                r.keys.lock().unwrap_or_else(|e| e.into_inner()).clone()
            }
            _ => return pb::EndAfterReply::default(),
        };
        let calls: Vec<_> = children
            .into_iter()
            .map(|(mut client, key)| {
                let req = pb::EndAfterRequest { start_at_unix_ns: key, ..req };
                tokio::spawn(async move { tokio::time::timeout(CHILD_END_DEADLINE, client.end_after(req)).await })
            })
            .collect();
        // The group's answer is its furthest child's: the coordinator sets one count for all.
        let mut reply = pb::EndAfterReply::default();
        for c in calls {
            if let Ok(Ok(Ok(r))) = c.await
                && r.get_ref().running
            {
                let r = r.into_inner();
                reply.running = true;
                reply.intervals = reply.intervals.max(r.intervals);
                reply.entered = reply.entered.max(r.entered);
            }
        }
        reply
    }

    async fn precondition(
        &self,
        req: pb::PreconditionRequest,
        events: iocurve_net::agent::relay::PassEvents<pb::PreconditionEvent>,
    ) -> Result<(), Status> {
        self.precondition_pass(req, events).await
    }

    async fn verify_pass(
        &self,
        req: pb::VerifyPassRequest,
        events: iocurve_net::agent::relay::PassEvents<pb::VerifyPassEvent>,
    ) -> Result<(), Status> {
        self.verify_group(req, events).await
    }
}

/// The coordinator's side: makes the agent `relay` (started with `--relay`) the relay of
/// `children` (each: HOST:PORT, whose certificate names HOST, and its target groups) for run
/// `run_key` under `grant` (its delegations name the children's HOSTs). Returns each child's Hello and clock as the relay measured
/// them, or why it could not reach it; `relay` then stands for the children it reached.
pub async fn join(
    relay: &mut Remote,
    grant: &iocurve_net::certs::RelayGrant,
    ca_pem: &str,
    children: &[(String, Vec<TargetGroup>)],
    run_key: u32,
    max_skew: Duration,
) -> Result<Vec<pb::RelayedHost>, NetError> {
    join_uneven(relay, grant, ca_pem, children, &[], run_key, max_skew).await
}

/// [`join`] with each child's `workers_scale` (uneven hosts; none given: 1 each).
pub async fn join_uneven(
    relay: &mut Remote,
    grant: &iocurve_net::certs::RelayGrant,
    ca_pem: &str,
    children: &[(String, Vec<TargetGroup>)],
    scales: &[f64],
    run_key: u32,
    max_skew: Duration,
) -> Result<Vec<pb::RelayedHost>, NetError> {
    let mut list = Vec::with_capacity(children.len());
    for (k, (addr, groups)) in children.iter().enumerate() {
        let name = iocurve_net::auth::host_of(addr);
        let Some((_, minted)) = grant.children.iter().find(|(n, _)| n == name) else {
            return Err(NetError::Input(format!("relay {}: its grant names no agent {name}", relay.addr)));
        };
        list.push(pb::RelayChild {
            address: addr.clone(),
            delegation: minted.delegation.clone(),
            key: minted.key.clone(),
            groups: client::wire_groups(groups),
            workers_scale: scales.get(k).copied().unwrap_or(1.0),
        });
    }
    let req = pb::RelayRequest {
        cert_pem: grant.cert_pem.clone(),
        key_pem: grant.key_pem.clone(),
        ca_pem: ca_pem.to_string(),
        run_key,
        children: list,
        max_skew_ms: max_skew.as_millis() as u64,
        relay_offset_ns: relay.offset_ns,
        relay_rtt_ns: relay.rtt_ns,
    };
    let reply = relay.client.relay(req).await.map_err(|e| client::failed(&relay.addr, "relay", e))?.into_inner();
    if reply.hosts.len() != children.len() {
        return Err(NetError::Failed(format!(
            "relay {}: {} answers for {} agents",
            relay.addr,
            reply.hosts.len(),
            children.len()
        )));
    }
    relay.hosts = reply.hosts.iter().filter(|h| h.lost.is_empty()).count() as u32;
    relay.relay = true;
    // What a relay says is escaped before anyone prints or stores it, as an agent's is.
    let mut hosts = reply.hosts;
    for h in &mut hosts {
        h.lost = iocurve_net::printable(&h.lost);
        if let Some(hello) = h.hello.as_mut() {
            client::escape_hello(hello);
        }
    }
    Ok(hosts)
}

fn status_of(e: &NetError) -> Status {
    match e {
        NetError::Input(m) => Status::invalid_argument(m.clone()),
        other => Status::unavailable(other.to_string()),
    }
}

/// The group's agents' I/O logs as one, its times from `origin` (the group's start as the
/// coordinator has it, on this relay's clock): each agent's moved by how much later it started
/// (never before the origin), in time order; and the I/Os they left out.
fn group_iolog(logs: Vec<super::coordinate::HostIoLog>, origin: i64) -> (Vec<ReplayIo>, u64) {
    let mut ios = Vec::with_capacity(logs.iter().map(|l| l.ios.len()).sum());
    let mut left_out = 0u64;
    for l in logs {
        let later = l.started_unix_ns.saturating_sub(origin).max(0) as u64;
        left_out = left_out.saturating_add(l.left_out);
        ios.extend(l.ios.into_iter().map(|mut io| {
            io.t_ns = io.t_ns.saturating_add(later);
            io
        }));
    }
    ios.sort_by_key(|io| io.t_ns);
    (ios, left_out)
}

/// The group's step as one agent's: the first child's start, the merged intervals with how
/// many hosts each merges, the children's progress added up.
struct Upward {
    up: Up<pb::StepEvent>,
    /// The step's warnings, for its `Done`'s notes.
    warnings: Vec<String>,
    received_unix_ns: i64,
    warmup_ns: i64,
    relayed: Arc<Relayed>,
    /// The merged record's threads, sample length, start moment (the first child's) and the
    /// children that took the step, from the first child's start.
    record: Option<(u32, f64, i64, u32)>,
    sent_started: bool,
    /// Children's parts of the interval being handed on.
    parts: u32,
    /// Per child, its host CPU over the intervals handed on.
    cpu: Vec<CpuMean>,
    /// Per child, its address where its intervals go up in full (`host_intervals`).
    forward: Vec<Option<String>>,
    /// The group's start as it went up (its moment, or its first start): the I/O log's times
    /// count from here.
    origin_unix_ns: Option<i64>,
}

impl Upward {
    fn send(&self, e: pb::step_event::Event) {
        self.up.send(pb::StepEvent { event: Some(e) });
    }
}

impl StepObserver for Upward {
    fn started(&mut self, rec: &StepRecord) {
        let moment = rec.measured_from_unix_ns.map_or(0, |m| m - self.warmup_ns);
        self.record = Some((rec.threads as u32, rec.sample_s, moment, rec.hosts));
    }

    fn host_started(&mut self, _: u32, _: &str, _: &str, started_unix_ns: i64, threads: usize, _: u32) {
        if self.sent_started {
            return;
        }
        self.sent_started = true;
        let (threads, sample_s, moment_unix_ns, hosts) = self.record.unwrap_or((threads as u32, 1.0, 0, 1));
        // As the coordinator takes it (an agent's moment, else its start).
        self.origin_unix_ns = Some(if moment_unix_ns != 0 { moment_unix_ns } else { started_unix_ns });
        self.send(pb::step_event::Event::Started(pb::Started {
            started_unix_ns,
            threads,
            sample_s,
            received_unix_ns: self.received_unix_ns,
            // Ready once every child had the request and the first to start was set up: the
            // coordinator sizes the next step's lead from it (the children of one step set up
            // alike; the lead doubles the longest set-up anyway).
            ready_unix_ns: self
                .relayed
                .dispatched_unix_ns
                .load(Ordering::Relaxed)
                .saturating_add(self.relayed.setup_ns.load(Ordering::Relaxed)),
            moment_unix_ns,
            hosts: hosts.max(1),
        }));
    }

    fn progress(&mut self, p: &StepProgress) {
        self.send(pb::step_event::Event::Progress(wire::progress_to(p)));
    }

    fn host_interval(&mut self, k: u32, index: u32, stats: &IntervalStats, cpu: &CpuUsage, duration_s: f64) {
        self.parts += 1;
        let k = k as usize;
        if let Some(Some(address)) = self.forward.get(k) {
            let interval = Some(wire::interval_to(index, stats, cpu, duration_s));
            self.send(pb::step_event::Event::HostInterval(pb::HostInterval { address: address.clone(), interval }));
        }
        if self.cpu.len() <= k {
            self.cpu.resize(k + 1, CpuMean::default());
        }
        self.cpu[k].add(cpu);
    }

    fn interval(&mut self, index: u32, stats: &IntervalStats, cpu: &CpuUsage, duration_s: f64) {
        let mut i = wire::interval_to(index, stats, cpu, duration_s);
        i.hosts = std::mem::take(&mut self.parts).max(1);
        self.send(pb::step_event::Event::Interval(i));
    }

    fn warning(&mut self, message: &str) {
        tracing::warn!(relay = true, "{message}");
        self.warnings.push(message.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One step or pass at a time on a group: a second coordinator's call while one runs is
    /// refused as busy (not queued behind it), and a relay no coordinator gave a group refuses
    /// every call.
    #[tokio::test]
    async fn a_group_serves_one_step_or_pass_at_a_time() {
        let relay = Relay::new();
        let refused = |r: Result<tokio::sync::OwnedMutexGuard<Option<Group>>, Status>| r.err().expect("refused");
        assert_eq!(refused(relay.held_group(7)).code(), tonic::Code::FailedPrecondition);
        let held = relay.group.clone().try_lock_owned().unwrap();
        let busy = refused(relay.held_group(7));
        assert_eq!(busy.code(), tonic::Code::ResourceExhausted);
        assert_eq!(busy.message(), "this relay is running a step or a pass");
        drop(held);
        assert_eq!(refused(relay.held_group(7)).code(), tonic::Code::FailedPrecondition);
    }
}
