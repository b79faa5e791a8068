//! The relay's side of a relay tree (issue 46; docs/relays.md): an agent started with
//! `--relay` drives a group of agents for its coordinator with the coordinator's own code —
//! dialling under the grant the coordinator minted, clocks, one start moment, the intervals
//! merged exactly — and streams the group's merged intervals up as one agent streams its own,
//! each saying how many hosts it merges.
//!
//! What does not go through a relay yet is refused by name: faults, replays, I/O logs, the
//! precondition and verification passes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use iocurve_engine::{StepObserver, StepProgress};
use iocurve_net::agent::relay::{RelayHandler, StepEvents};
use iocurve_net::{NetError, pb, unix_ns, wire};
use iocurve_plan::{TargetGroup, Workload};
use iocurve_stats::{CpuUsage, IntervalStats, StepRecord};
use tokio::sync::mpsc;
use tonic::Status;

use super::client::{self, CONNECT_DEADLINE, ClientConfig, Remote};
use super::coordinate::{Relayed, STOP_DEADLINE, StepSpec, run_step};

/// The most agents one relay drives: its group is to be about 32 (docs/relays.md); a request
/// for more is a mistake, or a relay's memory and connections asked for by someone else.
pub const MAX_CHILDREN: usize = 256;

/// Pings per child when the relay joins (as the coordinator does when it connects).
const JOIN_PINGS: usize = 8;

/// A child silent this long once its step should have started is lost (as for a coordinator).
const CHILD_SILENCE: Duration = Duration::from_secs(10);

/// The relay's lead when its coordinator asks for a step at once (start moment 0).
const AT_ONCE_LEAD: Duration = Duration::from_millis(200);

/// The group a coordinator's `Relay` call made, for its run.
struct Group {
    remotes: Vec<Remote>,
    /// Each child's target groups.
    groups: Vec<Vec<TargetGroup>>,
    /// Each child's place among the run's hosts.
    host_numbers: Vec<u32>,
    run_key: u32,
}

/// The step the group runs now: its stop flag, and what `EndAfter` needs.
struct Running {
    stop: Arc<AtomicBool>,
    relayed: Arc<Relayed>,
}

/// What `iocurve agent --relay` hands its service (see [`RelayHandler`]).
#[derive(Default)]
pub struct Relay {
    group: Arc<tokio::sync::Mutex<Option<Group>>>,
    joined: AtomicBool,
    running: Arc<std::sync::Mutex<Option<Running>>>,
}

impl Relay {
    pub fn new() -> Relay {
        Relay::default()
    }
}

fn bad(why: String) -> Status {
    Status::invalid_argument(why)
}

/// A child's `ClientConfig`: the run's CA, the relay's certificate for the run, the child's
/// delegation; its certificate must name the host dialled.
fn child_config(req: &pb::RelayRequest, c: &pb::RelayChild) -> Result<ClientConfig, Status> {
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
    Ok(ClientConfig {
        token: String::new(),
        ca_pem: Some(req.ca_pem.clone()),
        identity: Some((req.cert_pem.clone(), req.key_pem.clone())),
        insecure: false,
        tls_name: None,
        per_host_tokens: false,
        max_skew: Duration::from_millis(if req.max_skew_ms == 0 { 100 } else { req.max_skew_ms }),
        delegation: Some(Arc::new(iocurve_net::delegation::Minted {
            delegation: c.delegation.clone(),
            key: c.key.clone(),
        })),
    })
}

/// What a relay does not forward yet: refused by name, before any child is asked.
fn unsupported(r: &pb::StepRequest) -> Option<&'static str> {
    if !r.faults_json.is_empty() {
        Some("injected faults")
    } else if !r.replay.is_empty() {
        Some("a replay")
    } else if r.write_iolog {
        Some("an I/O log (--write-iolog)")
    } else if !r.groups.is_empty() {
        Some("target groups in the step (a relay's children have theirs from the Relay call)")
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
        let configs = req.children.iter().map(|c| child_config(&req, c)).collect::<Result<Vec<_>, _>>()?;
        let groups = req
            .children
            .iter()
            .map(|c| {
                iocurve_net::agent::target_groups(&c.groups)
                    .map_err(|e| bad(format!("agent {}: its target groups: {}", c.address, e.message())))
            })
            .collect::<Result<Vec<_>, _>>()?;
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
        let mut group =
            Group { remotes: Vec::new(), groups: Vec::new(), host_numbers: Vec::new(), run_key: req.run_key };
        let mut hosts = Vec::new();
        for (i, ((c, call), groups)) in req.children.iter().zip(calls).zip(groups).enumerate() {
            let reached = match call.await {
                Ok(Ok(Ok(r))) => Ok(r),
                Ok(Ok(Err(e))) => Err(e.to_string()),
                Ok(Err(_)) => Err(format!("it did not answer within {} s", CONNECT_DEADLINE.as_secs())),
                Err(e) => Err(format!("connecting: {e}")),
            };
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
                    group.host_numbers.push(req.first_host.saturating_add(i as u32));
                }
                Err(why) => {
                    tracing::warn!(agent = %c.address, why, "the relay could not reach its agent");
                    hosts.push(pb::RelayedHost { lost: iocurve_net::printable(&why), ..Default::default() });
                }
            }
        }
        *self.group.lock().await = Some(group);
        self.joined.store(true, Ordering::Release);
        Ok(pb::RelayReply { hosts })
    }

    fn joined(&self) -> bool {
        self.joined.load(Ordering::Acquire)
    }

    async fn targets(&self, req: pb::TargetsRequest) -> Result<pb::TargetsReply, Status> {
        let mut guard = self.group.lock().await;
        let g = guard.as_mut().ok_or_else(|| Status::failed_precondition("this relay has no group"))?;
        if !req.groups.is_empty() {
            return Err(bad("a relay's children open the groups of the Relay call: send none".into()));
        }
        if req.run_key != g.run_key {
            return Err(Status::permission_denied(format!(
                "this relay's group is for run key {}, not {}",
                g.run_key, req.run_key
            )));
        }
        let stop = AtomicBool::new(false);
        let opened =
            client::targets(&mut g.remotes, &g.groups, req.scratch_size, req.write, req.unfilled, req.run_key, &stop)
                .await
                .map_err(|e| status_of(&e))?;
        let mut targets = Vec::new();
        for (r, facts) in g.remotes.iter().zip(opened) {
            let facts = facts.map_err(|why| Status::unavailable(format!("agent {}: {why}", r.addr)))?;
            targets.extend(facts.into_iter().map(|f| pb::TargetFacts { host: r.addr.clone(), ..f }));
        }
        Ok(pb::TargetsReply { targets })
    }

    async fn run_step(&self, req: pb::StepRequest, events: StepEvents) -> Result<(), Status> {
        let received_unix_ns = unix_ns();
        if let Some(what) = unsupported(&req) {
            return Err(Status::unimplemented(format!("{what} does not go through relays yet: run it without relays")));
        }
        let w: Workload = serde_json::from_str(&req.workload_json).map_err(|e| bad(format!("workload: {e}")))?;
        let members = req
            .members
            .iter()
            .map(|m| serde_json::from_str::<Workload>(&m.workload_json).map(|w| (w, m.workers)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(format!("a member's workload: {e}")))?;
        let guard = self
            .group
            .clone()
            .try_lock_owned()
            .map_err(|_| Status::resource_exhausted("this relay is running another step"))?;
        let Some(first) = guard.as_ref().and_then(|g| g.host_numbers.first().copied()) else {
            return Err(Status::failed_precondition("this relay has no agent to run the step on"));
        };
        let start_at = if req.start_at_unix_ns == 0 {
            received_unix_ns + AT_ONCE_LEAD.as_nanos() as i64
        } else {
            req.start_at_unix_ns
        };
        let relayed = Arc::new(Relayed::new(start_at, first, req.hosts.max(1)));
        let stop = Arc::new(AtomicBool::new(false));
        *self.running.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(Running { stop: stop.clone(), relayed: relayed.clone() });
        let running = self.running.clone();
        // The observer must never wait (it is called inside the step's loop): it queues, and a
        // task sends on at the pace of the coordinator's stream. A coordinator gone stops the
        // group's step.
        let (up, mut queued) = mpsc::unbounded_channel::<Result<pb::StepEvent, Status>>();
        let gone = stop.clone();
        tokio::spawn(async move {
            let mut closed = false;
            while let Some(e) = queued.recv().await {
                if !closed && events.send(e).await.is_err() {
                    closed = true;
                    gone.store(true, Ordering::Relaxed);
                }
            }
        });
        // The step's observer is the coordinator's `dyn StepObserver` (not `Send`): the step is
        // driven from a blocking thread of its own, its connections' tasks on the runtime.
        let runtime = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || {
            runtime.block_on(async move {
                let mut guard = guard;
                let Some(g) = guard.as_mut() else { return };
                let spec = StepSpec {
                    workload: &w,
                    workers: req.workers,
                    host_workers: &[],
                    members: &members,
                    scales: &[],
                    rate_iops: (req.rate_iops > 0.0).then_some(req.rate_iops),
                    replay: None,
                    replay_speed: None,
                    replay_intended: (0.1, Vec::new()),
                    targets: &g.groups,
                    scratch_size: req.scratch_size,
                    run_key: req.run_key,
                    verify_journal: req.verify_journal,
                    write_iolog: false,
                    threads: req.threads,
                    backend: &req.backend,
                    faults: &[],
                    lead: Duration::from_nanos(start_at.saturating_sub(unix_ns()).max(0) as u64),
                    abort_on_host_loss: false,
                    silence: CHILD_SILENCE,
                    planned_hosts: g.remotes.len() as u32,
                    relayed: Some(&relayed),
                };
                let warmup_ns = (w.warmup_s * 1e9) as i64;
                let mut obs =
                    Upward { up: up.clone(), received_unix_ns, warmup_ns, record: None, sent_started: false, parts: 0 };
                let result = run_step(&mut g.remotes, &spec, &mut obs, &stop).await;
                *running.lock().unwrap_or_else(|e| e.into_inner()) = None;
                let last = match result {
                    Ok(m) => Ok(wire::done_to(&m.merged)),
                    // Every child lost: the coordinator loses this relay's group.
                    Err(NetError::Lost(why)) => Err(Status::unavailable(why)),
                    Err(NetError::Aborted(why)) => {
                        Ok(pb::Done { aborted: true, abort_reason: why, interrupted: true, ..Default::default() })
                    }
                    Err(NetError::Input(why)) => Ok(pb::Done { error: why, input: true, ..Default::default() }),
                    Err(e) => Ok(pb::Done { error: e.to_string(), ..Default::default() }),
                };
                let _ = up.send(last.map(|d| pb::StepEvent { event: Some(pb::step_event::Event::Done(d)) }));
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
            Some(r) if r.relayed.start_at == req.start_at_unix_ns => {
                r.relayed.keys.lock().unwrap_or_else(|e| e.into_inner()).clone()
            }
            _ => return pb::EndAfterReply::default(),
        };
        let calls: Vec<_> = children
            .into_iter()
            .map(|(mut client, key)| {
                let req = pb::EndAfterRequest { start_at_unix_ns: key, ..req };
                tokio::spawn(async move { tokio::time::timeout(STOP_DEADLINE, client.end_after(req)).await })
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
}

/// The coordinator's side: makes the agent `relay` (started with `--relay`) the relay of
/// `children` (each: HOST:PORT, whose certificate names HOST, and its target groups) for run
/// `run_key` under `grant` (its delegations name the children's HOSTs), the children being the
/// run's hosts from `first_host` on. Returns each child's Hello and clock as the relay measured
/// them, or why it could not reach it; `relay` then stands for the children it reached.
pub async fn join(
    relay: &mut Remote,
    grant: &iocurve_net::certs::RelayGrant,
    ca_pem: &str,
    children: &[(String, Vec<TargetGroup>)],
    run_key: u32,
    first_host: u32,
    max_skew: Duration,
) -> Result<Vec<pb::RelayedHost>, NetError> {
    let mut list = Vec::with_capacity(children.len());
    for (addr, groups) in children {
        let name = iocurve_net::auth::host_of(addr);
        let Some((_, minted)) = grant.children.iter().find(|(n, _)| n == name) else {
            return Err(NetError::Input(format!("relay {}: its grant names no agent {name}", relay.addr)));
        };
        list.push(pb::RelayChild {
            address: addr.clone(),
            delegation: minted.delegation.clone(),
            key: minted.key.clone(),
            groups: client::wire_groups(groups),
        });
    }
    let req = pb::RelayRequest {
        cert_pem: grant.cert_pem.clone(),
        key_pem: grant.key_pem.clone(),
        ca_pem: ca_pem.to_string(),
        run_key,
        children: list,
        max_skew_ms: max_skew.as_millis() as u64,
        first_host,
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
    Ok(reply.hosts)
}

fn status_of(e: &NetError) -> Status {
    match e {
        NetError::Input(m) => Status::invalid_argument(m.clone()),
        other => Status::unavailable(other.to_string()),
    }
}

/// The group's step as one agent's: the first child's start, the merged intervals with how
/// many hosts each merges, the children's progress added up.
struct Upward {
    up: mpsc::UnboundedSender<Result<pb::StepEvent, Status>>,
    received_unix_ns: i64,
    warmup_ns: i64,
    /// The merged record's threads, sample length, start moment (the first child's) and the
    /// children that took the step, from the first child's start.
    record: Option<(u32, f64, i64, u32)>,
    sent_started: bool,
    /// Children's parts of the interval being handed on.
    parts: u32,
}

impl Upward {
    fn send(&self, e: pb::step_event::Event) {
        let _ = self.up.send(Ok(pb::StepEvent { event: Some(e) }));
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
        self.send(pb::step_event::Event::Started(pb::Started {
            started_unix_ns,
            threads,
            sample_s,
            received_unix_ns: self.received_unix_ns,
            // Not said: the relay's set-up is its children's, which the coordinator cannot
            // size a lead from.
            ready_unix_ns: 0,
            moment_unix_ns,
            hosts: hosts.max(1),
        }));
    }

    fn progress(&mut self, p: &StepProgress) {
        self.send(pb::step_event::Event::Progress(pb::Progress {
            elapsed_s: p.elapsed_s,
            warmup: p.warmup,
            ops: p.ops,
            bytes: p.bytes,
            lat_sum_ns: p.lat_sum_ns,
            inflight: p.inflight,
        }));
    }

    fn host_interval(&mut self, _: u32, _: u32, _: &IntervalStats, _: &CpuUsage, _: f64) {
        self.parts += 1;
    }

    fn interval(&mut self, index: u32, stats: &IntervalStats, cpu: &CpuUsage, duration_s: f64) {
        let mut i = wire::interval_to(index, stats, cpu, duration_s);
        i.hosts = std::mem::take(&mut self.parts).max(1);
        self.send(pb::step_event::Event::Interval(i));
    }

    fn warning(&mut self, message: &str) {
        tracing::warn!(relay = true, "{message}");
    }
}
