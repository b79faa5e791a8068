//! `iocurve agent`: runs steps for an authenticated coordinator on the targets its own allow
//! list permits, with the engine's write-safety rules applied here, on this host. One step at a
//! time; a coordinator that goes away stops the step's I/O at once.
//!
//! A local run talks to the same service in-process ([`in_process`]): over an in-memory
//! connection, on the targets the run opened itself, so that local and multi-host runs share
//! one coordinator.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use iocurve_engine::keeper::KeptMap;
use iocurve_engine::safety::confine::Confinement;
use iocurve_engine::verify::{GenMap, MapLock, PROBLEM_LIST_CAP, watched_pass};
use iocurve_engine::{OpenOptions, TargetSet, host};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Server;
use tonic::{Request, Response, Status};

use crate::delegation::Delegated;
use crate::pb::agent_server::{Agent, AgentServer};
use crate::{NetError, PROTOCOL, pb, unix_ns, wire};

pub mod audit;
#[cfg(test)]
mod delegated_tests;
pub mod listen;
pub mod relay;
mod requests;
pub mod simulate;
mod work;

pub use requests::{
    MAX_MEMBERS, MAX_REQUEST_BYTES, member_requests, precondition_request, rate_share, replay_request, step_request,
    target_groups,
};
use work::{Step, precondition_blocking, run_blocking};

/// TLS material of an agent; without it the agent listens in plain text (`--insecure`).
#[derive(Clone)]
pub struct AgentTls {
    pub cert_pem: String,
    pub key_pem: String,
    /// Require client certificates signed by this CA (mutual TLS).
    pub client_ca_pem: Option<String>,
}

pub struct AgentConfig {
    pub listen: SocketAddr,
    pub token: String,
    pub tls: Option<AgentTls>,
    /// Glob patterns of the paths this agent may use as targets (matched on canonical paths).
    pub allow: Vec<String>,
    /// Paths this agent may write to despite the overridable safety rules.
    pub allow_write: Vec<PathBuf>,
    /// Bytes of scratch files this agent may create in its life (None: half the free space of
    /// the filesystem at each creation).
    pub max_scratch: Option<u64>,
    /// A coordinator silent this long is gone: its step stops at once.
    pub lease: Duration,
    /// Where the agent keeps its verification maps.
    pub state_dir: PathBuf,
    /// Live metrics of the steps this agent runs (`iocurve agent --metrics`).
    pub metrics: Option<iocurve_metrics::Exporter>,
    /// Serve one coordinator's run, then end (a launched or enrolled agent): the agent stops
    /// serving when the connection that owned it closes, or when no coordinator took it within
    /// this long ([`UNCLAIMED`] for a launched agent). None: it serves until told to end.
    pub one_run: Option<Duration>,
    /// Remove the scratch files this agent creates when it ends, as a local run does unless
    /// `--keep` (a launched agent of a run without `--keep`); else they stay for later runs.
    pub remove_scratch: bool,
    /// A coordinator that owns this agent loses it after this long without a call that acts
    /// while nothing runs (`--claim-expiry-s`): an idle connection no longer holds an agent
    /// for ever (issue 35, finding 6).
    pub claim_expiry: Duration,
    /// The audit trail (standard error, and `--audit-log FILE`).
    pub audit: Arc<audit::Audit>,
    /// One of the simulated agents of `iocurve agent --simulate N` (issue 46): steps are
    /// modelled, not run (see [`simulate`]).
    pub simulated: Option<simulate::Simulated>,
    /// `iocurve agent --relay` (issue 46): what a coordinator's `Relay` call makes of this agent
    /// (see [`relay`]); None: it refuses to be a relay.
    pub relay: Option<Arc<dyn relay::RelayHandler>>,
}

/// The default of [`AgentConfig::claim_expiry`].
pub const CLAIM_EXPIRY: Duration = Duration::from_secs(60);

/// How long a one-run agent waits for its coordinator: one that died between starting the
/// agent and reaching it leaves nothing running for longer.
pub const UNCLAIMED: Duration = Duration::from_secs(60);

/// What an in-process agent works on: the targets the local run opened (groups, weights,
/// scratch files and all) and its verification map (the run's `--verify-map`) with its file.
pub struct InProcess {
    pub targets: Arc<TargetSet>,
    pub verify: Option<KeptMap>,
}

struct Service {
    /// The allow list and scratch budget (None for an in-process agent, whose run opened its
    /// own targets).
    confine: Option<Arc<Confinement>>,
    allow_write: Vec<PathBuf>,
    /// Held while a step runs: one at a time.
    busy: Arc<tokio::sync::Mutex<()>>,
    /// The running step's stop flag (finish the interval, then end), for `Stop`.
    stop: Arc<std::sync::Mutex<Option<Arc<AtomicBool>>>>,
    /// The running step, for the coordinator to end once steady (`EndAfter`).
    end: Arc<iocurve_engine::StepEnd>,
    /// An in-process agent: its targets are given, not opened from requests.
    local: Option<Arc<InProcess>>,
    /// The back-ends this host has, probed once at the start. Each agent decides for itself:
    /// a coordinator without io_uring no longer forces psync on every agent, and an agent
    /// without it falls back instead of failing. (The in-process agent's run has resolved its
    /// back-ends already.)
    available: iocurve_plan::Availability,
    /// Where verification maps are kept, and the one in use (locked while held).
    state_dir: PathBuf,
    map: std::sync::Mutex<Option<AgentMap>>,
    /// Scratch files this agent created and no map has forgotten yet: the writes a map knows
    /// went with the file of that name they replace.
    created: std::sync::Mutex<std::collections::HashSet<String>>,
    /// The coordinator that owns this agent for its run: the connection that made the first
    /// call that acts (targets, steps, passes, stop), for as long as that connection lasts.
    owner: Arc<std::sync::Mutex<Option<Owner>>>,
    /// Live metrics of this agent's steps, labelled with its host name.
    metrics: Option<(iocurve_metrics::Exporter, String)>,
    /// Remove created scratch files at the end: the sets that created them are held here
    /// (opened without `keep`) until the agent ends, when dropping them removes the files.
    remove_scratch: bool,
    held: Arc<std::sync::Mutex<Vec<Held>>>,
    /// See [`RunLocks`].
    run_locks: Arc<std::sync::Mutex<Option<RunLocks>>>,
    audit: Arc<audit::Audit>,
    /// See [`AgentConfig::claim_expiry`].
    claim_expiry: Duration,
    /// Target requests opening or preparing targets now (nothing else marks that work).
    preparing: Arc<std::sync::atomic::AtomicUsize>,
    /// When the last step, pass or preparation ended: an owner's idle time counts from the
    /// later of this and its last call that acts, so that a long step does not leave its
    /// coordinator's claim expired the moment it ends (issue 35 review).
    work_ended: Arc<std::sync::Mutex<std::time::Instant>>,
    /// At most this many target requests open or prepare targets at once: walks and scratch
    /// files of many concurrent requests would otherwise multiply their bounds.
    openers: Arc<tokio::sync::Semaphore>,
    /// See [`AgentConfig::simulated`].
    simulated: Option<simulate::Simulated>,
    /// See [`AgentConfig::relay`].
    relay: Option<Arc<dyn relay::RelayHandler>>,
}

/// Holds [`Service::busy`] and marks the work's end in [`Service::work_ended`] when dropped.
struct Busy {
    _guard: tokio::sync::OwnedMutexGuard<()>,
    ended: Arc<std::sync::Mutex<std::time::Instant>>,
}

impl Drop for Busy {
    fn drop(&mut self) {
        *self.ended.lock().unwrap_or_else(|e| e.into_inner()) = std::time::Instant::now();
    }
}

struct Owner {
    connection: std::sync::Weak<listen::Ticket>,
    peer: SocketAddr,
    since: std::time::Instant,
    /// The owner's last call that acts.
    last_act: std::time::Instant,
    /// Its certificate, where it presented one: the trail's and the refusals' words.
    identity: Option<String>,
    /// A relay's delegation it owns the agent under: for that run only (another connection of
    /// the same relay's for that run takes over), and never after the delegation's end.
    run: Option<Delegated>,
}

/// An accepted call that acts: its name and caller, for the audit trail of its outcome.
struct Call {
    name: &'static str,
    peer: audit::Peer,
    /// The caller's connection (None for the in-process agent of a local run).
    connection: Option<std::sync::Weak<listen::Ticket>>,
    /// The relay's delegation the call came through (None: the coordinator itself).
    delegated: Option<Delegated>,
}

/// Duplicates of the file targets a run writes on this agent, kept from one of its requests to
/// the next: the run's lock on each file lives with their open file description
/// (`iocurve_engine::safety::lock`), so that no other run takes a file between two steps.
/// Let go when the run's connection ends or another run opens targets here.
struct RunLocks {
    key: u32,
    connection: std::sync::Weak<listen::Ticket>,
    files: std::collections::HashMap<(u64, u64), std::fs::File>,
}

/// A target set kept until the agent ends (see [`Service::held`]), with the key of the run
/// that opened it: its write locks are that run's, let go of when the run is over
/// ([`release_held`]), not when the agent ends.
struct Held {
    run_key: u32,
    set: Arc<TargetSet>,
}

/// Lets go of the write locks held sets took for the runs `over` says are over: a scratch file
/// kept for removal refused every later run in the name of the run that created it (issue 45's
/// closing note: the next run was refused naming the agent's own pid).
fn release_held(held: &std::sync::Mutex<Vec<Held>>, over: impl Fn(u32) -> bool) {
    for h in held.lock().unwrap_or_else(|e| e.into_inner()).iter_mut() {
        if h.run_key == 0 || !over(h.run_key) {
            continue;
        }
        for t in h.set.targets.iter().filter(|t| t.kind == iocurve_engine::target::TargetKind::File) {
            iocurve_engine::safety::lock::unlock(&t.file, iocurve_engine::safety::lock::RunKey(h.run_key));
        }
        h.run_key = 0;
    }
}

/// Counts a target request in [`Service::preparing`] while it lives, and marks its end.
struct Preparing(Arc<std::sync::atomic::AtomicUsize>, Arc<std::sync::Mutex<std::time::Instant>>);

impl Preparing {
    fn new(n: &Arc<std::sync::atomic::AtomicUsize>, ended: &Arc<std::sync::Mutex<std::time::Instant>>) -> Preparing {
        n.fetch_add(1, Ordering::AcqRel);
        Preparing(n.clone(), ended.clone())
    }
}

impl Drop for Preparing {
    fn drop(&mut self) {
        *self.1.lock().unwrap_or_else(|e| e.into_inner()) = std::time::Instant::now();
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A verification map in use on this agent: one per set of targets and block size.
struct AgentMap {
    key: u64,
    kept: KeptMap,
    _lock: MapLock,
}

/// The key of a map: FNV-1a over the block size and the targets (path and size, in order).
fn map_key(bs: u64, list: &[(String, u64)]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    };
    eat(&bs.to_le_bytes());
    for (path, size) in list {
        eat(path.as_bytes());
        eat(&[0]);
        eat(&size.to_le_bytes());
    }
    h
}

/// Where the map of `key` is kept: `iocurve-verify-HOST-KEY.map` in the state directory. The
/// host's name is in it because state directories are often shared (a home directory on NFS,
/// the working directory of a Slurm job) while every host has its own map; a map of an earlier
/// version, named without it, is continued where it exists.
fn map_path(state_dir: &std::path::Path, key: u64) -> PathBuf {
    let host: String = host::facts()
        .hostname
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_') { c } else { '_' })
        .collect();
    let path = state_dir.join(format!("iocurve-verify-{host}-{key:016x}.map"));
    let legacy = state_dir.join(format!("iocurve-verify-{key:016x}.map"));
    if !path.exists() && legacy.exists() { legacy } else { path }
}

/// Sets its flag when dropped before being disarmed: an abandoned request cancels its work.
struct CancelOnDrop(Arc<AtomicBool>, bool);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.1 {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}

/// What a call asks of the targets, for the audit trail: the first 16 named, and how many.
fn targets_detail(groups: &[pb::TargetGroup], write: bool) -> String {
    // Bounded whatever was sent: a token holder's request must not fill the trail's disk.
    const SHOWN: usize = 16;
    const EACH: usize = 256;
    let all: Vec<&String> = groups.iter().flat_map(|g| g.targets.iter()).collect();
    let shown: Vec<String> = all
        .iter()
        .take(SHOWN)
        .map(|t| {
            let mut shown: String = t.chars().take(EACH).collect();
            if shown.len() < t.len() {
                shown.push('…');
            }
            shown
        })
        .collect();
    let more = if all.len() > SHOWN { format!(" and {} more", all.len() - SHOWN) } else { String::new() };
    format!("{} targets{}: {}{more}", all.len(), if write { " for writing" } else { "" }, shown.join(", "))
}

/// A target request's answer for a set of opened targets.
fn facts(set: &TargetSet) -> Vec<pb::TargetFacts> {
    set.targets
        .iter()
        .map(|t| pb::TargetFacts {
            path: t.path.display().to_string(),
            kind: t.kind.name().into(),
            size: t.size,
            logical_block: t.logical_block,
            scratch: t.created,
            group: set.groups.get(t.group).map(|g| g.name.clone()).unwrap_or_default(),
            fresh: t.fresh,
            lun: t.identity_key().unwrap_or_default(),
            queue_json: t.device_queue().and_then(|q| serde_json::to_string(&q).ok()).unwrap_or_default(),
            host: String::new(),
        })
        .collect()
}

impl Service {
    /// A remote request's target groups, checked before the trail records the call (the
    /// in-process agent's requests name none: its run opened the targets).
    fn check_groups(&self, groups: &[pb::TargetGroup]) -> Result<(), Status> {
        // A relay's children have their groups from the Relay call (its handler refuses any).
        if self.local.is_none() && self.joined_relay().is_none() {
            target_groups(groups)?;
        }
        Ok(())
    }

    /// The size of a scratch file the request asks for (0: chosen by the agent); a simulated
    /// agent's are [`simulate::SCRATCH_BYTES`].
    fn scratch_size(&self, asked: u64) -> u64 {
        if self.simulated.is_some() { simulate::SCRATCH_BYTES } else { asked }
    }

    /// The lock of a step or pass: one at a time.
    fn take_busy(&self) -> Result<Busy, Status> {
        let guard = self
            .busy
            .clone()
            .try_lock_owned()
            .map_err(|_| Status::resource_exhausted("this agent is running another step"))?;
        Ok(Busy { _guard: guard, ended: self.work_ended.clone() })
    }

    /// The relay handler, once a coordinator made this agent a group's relay: its targets,
    /// steps, stops and ends are the group's.
    fn joined_relay(&self) -> Option<&Arc<dyn relay::RelayHandler>> {
        self.relay.as_ref().filter(|r| r.joined())
    }

    /// A call of a run whose group this relay let go (its coordinator's connection had
    /// closed): its hosts are lost to that run, said as such, not served as an agent's call.
    fn check_let_go(&self, run_key: u32) -> Result<(), Status> {
        if self.relay.as_ref().is_some_and(|r| r.let_go(run_key)) {
            return Err(Status::unavailable(
                "this relay let its group go (its coordinator's connection had closed with no step running, or another coordinator took it): its hosts are lost to this run",
            ));
        }
        Ok(())
    }

    /// A step of a relay's group: the handler starts it on the children and sends their merged
    /// events; this agent counts as busy until the last of them is sent. A coordinator that
    /// drops the stream stops the group's step, as it stops an agent's.
    async fn relay_step(
        &self,
        relay: &Arc<dyn relay::RelayHandler>,
        r: pb::StepRequest,
    ) -> Result<Response<ReceiverStream<Result<pb::StepEvent, Status>>>, Status> {
        let guard = self.take_busy()?;
        let (inner_tx, mut inner_rx) = mpsc::channel(64);
        relay.run_step(r, inner_tx).await?;
        let (tx, rx) = mpsc::channel(64);
        let relay = relay.clone();
        tokio::spawn(async move {
            let (mut gone, mut guard) = (false, Some(guard));
            while let Some(e) = inner_rx.recv().await {
                // Free for the next step before saying this one is done, as an agent is: the
                // coordinator sends the next request as soon as it reads `Done`.
                if matches!(&e, Err(_) | Ok(pb::StepEvent { event: Some(pb::step_event::Event::Done(_)) })) {
                    guard.take();
                }
                if !gone && tx.send(e).await.is_err() {
                    gone = true;
                    relay.stop();
                }
            }
            drop(guard);
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    /// Nothing runs: no step, pass or target preparation.
    fn idle(&self) -> bool {
        self.busy.try_lock().is_ok() && self.preparing.load(Ordering::Acquire) == 0
    }

    /// Makes the caller's connection the owner of this agent, unless another live connection
    /// owns it: a second coordinator, even with the token, can neither stop the run's step
    /// nor have files created or written while it runs (issue 15, finding 7). An owner that
    /// made no call that acts for [`AgentConfig::claim_expiry`] while nothing ran has let go
    /// (issue 35, finding 6: one Stop kept an agent from its real run for as long as the
    /// squatter's connection stayed open). Audited either way, with the peer, `what` was asked
    /// and `detail`. A call through a relay acts for its delegation's run only: one that names
    /// another run (`run_key`) is refused before it claims anything.
    fn claim<T>(
        &self,
        req: &Request<T>,
        what: &'static str,
        detail: &str,
        run_key: Option<u32>,
    ) -> Result<Call, Status> {
        let peer = audit::Peer::of(req);
        let delegated = req.extensions().get::<Delegated>().copied();
        // One level of relays: another relay's delegated call never reaches a group.
        if delegated.is_some() && self.joined_relay().is_some() {
            let why = "this agent is a relay for a run: it takes no relay's delegated calls (one level of relays)";
            self.audit.refused("delegation", what, &peer, why);
            return Err(Status::permission_denied(why));
        }
        if let (Some(d), Some(asked)) = (delegated, run_key)
            && d.run_key != asked
        {
            let why =
                format!("this relay's delegation is for run key {}, not for the request's run key {asked}", d.run_key);
            self.audit.refused("delegation", what, &peer, &why);
            return Err(Status::permission_denied(why));
        }
        // The in-process agent of a local run has one connection, its own.
        let Some(ticket) = listen::ticket_of(req) else {
            return Ok(Call { name: what, peer, connection: None, delegated: None });
        };
        let mut owner = self.owner.lock().unwrap_or_else(|e| e.into_inner());
        let now_unix = crate::unix_s();
        if let Some(o) = owner.as_ref()
            && let Some(current) = o.connection.upgrade()
            && !Arc::ptr_eq(&current, &ticket)
            && !current.peer_closed()
        {
            let ended = *self.work_ended.lock().unwrap_or_else(|e| e.into_inner());
            let idle_for = o.last_act.max(ended).elapsed();
            let same_run = o.run.zip(delegated).is_some_and(|(a, b)| a.same_relay_and_run(&b));
            if o.run.is_some_and(|d| now_unix > d.not_after_unix) && self.idle() {
                self.audit.note("the relay's delegation it owned this agent under has ended", Some(&peer));
                *owner = None;
            } else if same_run {
                // The relay reconnected for the same run (its certificate, its run key): its new
                // connection owns the agent.
                self.audit.note("the relay owning this agent for its run called on a new connection", Some(&peer));
                let o = owner.as_mut().expect("checked above");
                (o.connection, o.peer) = (Arc::downgrade(&ticket), ticket.peer());
            } else if idle_for >= self.claim_expiry && self.idle() {
                self.audit.note(
                    &format!(
                        "the coordinator at {} made no call that acts for {:.0} s while nothing ran: it no longer owns this agent",
                        o.peer,
                        idle_for.as_secs_f64()
                    ),
                    Some(&peer),
                );
                *owner = None;
            } else {
                let by = match (o.run, &o.identity) {
                    (Some(d), id) => {
                        format!("a relay ({}) for run key {}", id.as_deref().unwrap_or("no certificate"), d.run_key)
                    }
                    (None, _) => "the coordinator".into(),
                };
                let why = format!(
                    "this agent is in use by {by} at {} (for {:.0} s): one coordinator at a time; wait for that run to end",
                    o.peer,
                    o.since.elapsed().as_secs_f64()
                );
                self.audit.refused("owner", what, &peer, &why);
                return Err(Status::aborted(why));
            }
        }
        let now = std::time::Instant::now();
        match owner.as_mut() {
            Some(o) if o.connection.upgrade().is_some_and(|c| !c.peer_closed()) && o.run == delegated => {
                o.last_act = now
            }
            _ => {
                let who = match delegated {
                    Some(d) => format!(
                        "a relay took this agent for run key {} (its delegation ends at Unix second {})",
                        d.run_key, d.not_after_unix
                    ),
                    None => "a coordinator took this agent for its run".into(),
                };
                // A group made for an earlier owner is not this one's to drive (its own new
                // connection, the same certificate, keeps it: a channel that reconnected). Every
                // coordinator of a `certs init` cluster presents the same client certificate, so
                // a call that names another run than the group's is another owner's too.
                let same_owner = owner.as_ref().is_some_and(|o| o.identity.is_some() && o.identity == peer.identity);
                let same_run = |relay: &Arc<dyn relay::RelayHandler>| {
                    run_key.is_none_or(|k| relay.group_run().is_none_or(|g| g == k))
                };
                if let Some(relay) = &self.relay
                    && relay.joined()
                    && !(same_owner && same_run(relay))
                {
                    relay.leave();
                    self.audit.note("the relay's group of its earlier coordinator is given up", Some(&peer));
                }
                self.audit.note(&who, Some(&peer));
                *owner = Some(Owner {
                    connection: Arc::downgrade(&ticket),
                    peer: ticket.peer(),
                    since: now,
                    last_act: now,
                    identity: peer.identity.clone(),
                    run: delegated,
                });
            }
        }
        self.audit.accepted(what, &peer, detail);
        Ok(Call { name: what, peer, connection: Some(Arc::downgrade(&ticket)), delegated })
    }

    /// Keeps the run's locks on the file targets it writes until its connection ends
    /// ([`RunLocks`]).
    fn keep_run_locks(&self, call: &Call, set: &TargetSet, how: Opening) {
        use std::os::unix::fs::MetadataExt;
        let Some(connection) = call.connection.clone() else { return };
        if !how.write || how.run_key == 0 {
            return;
        }
        let mut locks = self.run_locks.lock().unwrap_or_else(|e| e.into_inner());
        let same = locks.as_ref().is_some_and(|l| l.key == how.run_key && l.connection.ptr_eq(&connection));
        if !same {
            *locks = Some(RunLocks { key: how.run_key, connection, files: Default::default() });
        }
        let kept = locks.as_mut().expect("set above");
        for t in set.targets.iter().filter(|t| t.kind == iocurve_engine::target::TargetKind::File) {
            if let (Ok(m), Ok(dup)) = (t.file.metadata(), t.file.try_clone()) {
                kept.files.entry((m.dev(), m.ino())).or_insert(dup);
            }
        }
    }

    /// Work a relay started under its delegation (a step, a pass) stops when the delegation
    /// ends, as a Stop would stop it (a step's interval in progress finishes first).
    fn stop_when_delegation_ends(&self, call: &Call, flag: &Arc<AtomicBool>) {
        let Some(d) = call.delegated else { return };
        let audit = self.audit.clone();
        let peer = audit::Peer::of_call(call);
        raise_at_delegation_end(d.not_after_unix, Arc::downgrade(flag), move || {
            audit.note("the relay's delegation ended: its work here stops", Some(&peer));
        });
    }

    /// The audit line of a call's error: a refusal by the allow list, or a failure.
    fn audit_error(&self, call: &Call, e: &Status) {
        if e.code() == tonic::Code::PermissionDenied {
            self.audit.refused("allow_list", call.name, &call.peer, e.message());
        } else {
            self.audit.failed(call.name, &call.peer, e.message());
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn new(
        confine: Option<Confinement>,
        allow_write: Vec<PathBuf>,
        local: Option<InProcess>,
        state_dir: PathBuf,
        metrics: Option<iocurve_metrics::Exporter>,
        remove_scratch: bool,
        audit: Arc<audit::Audit>,
        claim_expiry: Duration,
        simulated: Option<simulate::Simulated>,
    ) -> Service {
        Service {
            audit,
            claim_expiry,
            preparing: Arc::default(),
            work_ended: Arc::new(std::sync::Mutex::new(std::time::Instant::now())),
            openers: Arc::new(tokio::sync::Semaphore::new(2)),
            remove_scratch,
            held: Arc::default(),
            run_locks: Arc::default(),
            metrics: metrics.map(|e| (e, iocurve_engine::host::facts().hostname)),
            state_dir,
            map: std::sync::Mutex::new(None),
            created: std::sync::Mutex::new(Default::default()),
            owner: Arc::new(std::sync::Mutex::new(None)),
            confine: confine.map(Arc::new),
            allow_write,
            busy: Arc::new(tokio::sync::Mutex::new(())),
            stop: Arc::new(std::sync::Mutex::new(None)),
            end: Arc::new(iocurve_engine::StepEnd::new()),
            // A local run chose its back-end before it started this agent; a simulated agent
            // runs none.
            available: if local.is_some() || simulated.is_some() {
                iocurve_plan::Availability::everything()
            } else {
                iocurve_engine::backend::available()
            },
            local: local.map(Arc::new),
            simulated,
            relay: None,
        }
    }

    /// The verification map of `targets` at block size `bs`, kept in the state directory:
    /// continued when it exists, new when it does not (`create`; else an error). Locked while
    /// this agent holds it. A scratch file created since forgets the blocks it replaced.
    /// `journal`: a step of a run with `--verify-journal` (the journal is started with the first
    /// such step and kept for as long as the map is).
    fn map_for(&self, targets: &TargetSet, bs: u64, create: bool, journal: bool) -> Result<KeptMap, Status> {
        targets.one_path_per_lun().map_err(|e| Status::failed_precondition(format!("a verifying step: {e}")))?;
        let list: Vec<(String, u64)> = targets.targets.iter().map(|t| (t.path.display().to_string(), t.size)).collect();
        let key = map_key(bs, &list);
        let mut slot = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if !matches!(&*slot, Some(m) if m.key == key) {
            // Another map's lock goes first.
            *slot = None;
            let path = map_path(&self.state_dir, key);
            let refuse = |e: iocurve_engine::EngineError| Status::failed_precondition(e.to_string());
            let lock = MapLock::acquire(&path).map_err(refuse)?;
            let map = if path.exists() {
                let map = GenMap::load(&path).map_err(refuse)?;
                // An agent that stopped without saving (killed, its host crashed) left a journal:
                // a pass explains the blocks it names, a step forgets them (below).
                if !create
                    && let iocurve_engine::journal::Found::Intents(i) =
                        iocurve_engine::journal::load(&path, &map).map_err(refuse)?
                {
                    map.explain_with(i);
                }
                map
            } else if create {
                iocurve_engine::journal::remove(&path);
                GenMap::new(bs, &list)
            } else {
                return Err(Status::failed_precondition(format!(
                    "this agent has no verification map of these targets with blocks of {bs} bytes: run verifying workloads on them first"
                )));
            };
            if !map.matches(bs, &list) {
                return Err(Status::failed_precondition(format!(
                    "verification map {} was made for other targets: remove it to start over",
                    path.display()
                )));
            }
            let mut map = map;
            // What each target is, for a later `iocurve verify` under other names.
            map.set_identities(targets.targets.iter().map(|t| t.identity_key()));
            *slot = Some(AgentMap { key, kept: KeptMap::new(Arc::new(map), path), _lock: lock });
        }
        let m = slot.as_mut().expect("set above");
        // A journal file beside the map that is not this agent's own running one is what an
        // earlier agent left when it stopped without saving.
        if create && m.kept.journal.is_none() {
            if let Some(note) = iocurve_engine::journal::resolve(&m.kept.path, &m.kept.map)
                .map_err(|e| Status::failed_precondition(e.to_string()))?
            {
                tracing::warn!("{note}");
            }
            m.kept.map.clear_explanation();
        }
        // A run without --verify-journal after one with it: the journal (empty once its last
        // step ended) goes.
        if create
            && !journal
            && let Some(j) = m.kept.journal.take()
        {
            j.close();
        }
        if journal && m.kept.journal.is_none() {
            let j = iocurve_engine::journal::Journal::create(&m.kept.path, &m.kept.map)
                .map_err(|e| Status::failed_precondition(e.to_string()))?;
            m.kept.journal = Some(Arc::new(j));
        }
        let mut created = self.created.lock().unwrap_or_else(|e| e.into_inner());
        for (i, t) in targets.targets.iter().enumerate() {
            if created.remove(&t.path.display().to_string()) {
                m.kept.map.forget(i as u32);
            }
        }
        Ok(m.kept.clone())
    }

    /// Targets that must exist, opened for reading (a verification pass).
    async fn open_existing(
        &self,
        call: &Call,
        groups: &[pb::TargetGroup],
        run_key: u32,
    ) -> Result<Arc<TargetSet>, Status> {
        let how = Opening { scratch_size: 0, write: false, unfilled: false, existing_only: true, run_key };
        self.open_with(call, groups, how).await
    }

    /// Opens the targets (allow list and safety rules first) on a blocking thread: opening may
    /// create and fill a scratch file, which must not hold up the runtime's threads.
    /// `unfilled`: scratch files are created allocated but not written (a precondition pass
    /// writes them anyway, the null back-end never touches them).
    async fn open_with(&self, call: &Call, groups: &[pb::TargetGroup], how: Opening) -> Result<Arc<TargetSet>, Status> {
        let _permit = self.openers.clone().acquire_owned().await;
        let _preparing = Preparing::new(&self.preparing, &self.work_ended);
        // A request of another run means the run that kept locks here is over (one
        // coordinator owns the agent at a time): its locks go before these targets open, or
        // this agent would refuse the new run in the name of the old one.
        {
            let mut locks = self.run_locks.lock().unwrap_or_else(|e| e.into_inner());
            if locks.as_ref().is_some_and(|l| l.key != how.run_key || l.connection.upgrade().is_none()) {
                *locks = None;
            }
        }
        // Every other run is over: this request's owns the agent.
        release_held(&self.held, |k| k != how.run_key);
        let r = self.open_unaudited(groups, how, call).await;
        match &r {
            Err(e) => self.audit_error(call, e),
            Ok(set) => self.keep_run_locks(call, set, how),
        }
        r
    }

    /// A relay's preparation (creating and filling scratch files) stops at its delegation's end.
    async fn open_unaudited(
        &self,
        groups: &[pb::TargetGroup],
        how: Opening,
        call: &Call,
    ) -> Result<Arc<TargetSet>, Status> {
        let Opening { scratch_size, write, unfilled, existing_only, run_key } = how;
        if let Some(local) = &self.local {
            return Ok(local.targets.clone());
        }
        let confine = self.confine.clone().ok_or_else(|| Status::internal("agent without an allow list"))?;
        if confine.is_empty() {
            return Err(Status::permission_denied(
                "this agent allows no targets: start it with --allow PATH-GLOB for the paths it may use",
            ));
        }
        let groups = target_groups(groups)?;
        let cancel = CancelOnDrop(Arc::new(AtomicBool::new(false)), true);
        if let Some(d) = call.delegated {
            let (audit, peer) = (self.audit.clone(), audit::Peer::of_call(call));
            raise_at_delegation_end(d.not_after_unix, Arc::downgrade(&cancel.0), move || {
                audit.note("the relay's delegation ended: its preparation of targets here stops", Some(&peer));
            });
        }
        let opts = OpenOptions {
            write,
            scratch_size,
            // Scratch files stay for the run's later steps (they are marked, so reusable); an
            // agent that removes them at its end holds the set that created them till then.
            keep: !self.remove_scratch,
            allow_write: self.allow_write.clone(),
            scratch_unfilled: unfilled,
            existing_only,
            run_key,
            // The probe's own deadline (30 s); the request going away ends its wait too.
            stuck_after: None,
            // 0: the agent chooses; any other size is the run's --size.
            size_given: scratch_size != 0 && scratch_size != iocurve_engine::target::AUTO_SCRATCH_SIZE,
            confine: Some(confine),
            cancel: Some(cancel.0.clone()),
        };
        // A coordinator that goes away while a scratch file is prepared drops this request:
        // the guard then stops the preparation (the lease covers preparation too).
        let cancel_on_drop = cancel;
        let opened = tokio::task::spawn_blocking(move || TargetSet::open(&groups, &opts))
            .await
            .map_err(|e| Status::internal(format!("opening the targets failed: {e}")))?;
        let mut cancel_on_drop = cancel_on_drop;
        cancel_on_drop.1 = false;
        let opened = opened.map(Arc::new);
        if let Ok(set) = &opened {
            let mut created = self.created.lock().unwrap_or_else(|e| e.into_inner());
            created.extend(set.targets.iter().filter(|t| t.created).map(|t| t.path.display().to_string()));
            if self.remove_scratch && set.targets.iter().any(|t| t.created) {
                self.held.lock().unwrap_or_else(|e| e.into_inner()).push(Held { run_key, set: set.clone() });
            }
        }
        opened.map_err(|e| {
            if matches!(e, iocurve_engine::EngineError::OutsideAllowList(_)) {
                Status::permission_denied(e.to_string())
            } else if e.is_input_error() {
                Status::failed_precondition(e.to_string())
            } else {
                Status::internal(e.to_string())
            }
        })
    }
}

/// What a request asks of the targets it opens.
#[derive(Clone, Copy, Debug)]
struct Opening {
    /// Size of scratch files to create (0: the agent chooses).
    scratch_size: u64,
    /// Some workload writes: the safety rules and the run's lock apply.
    write: bool,
    /// Scratch files allocated, not written (a precondition pass or the null back-end follows).
    unfilled: bool,
    /// A missing path is an error, not a scratch file to create (reading back).
    existing_only: bool,
    /// The run's key for the lock on file targets it writes (0: the agent's own).
    run_key: u32,
}

impl Opening {
    fn new(scratch_size: u64, write: bool, unfilled: bool, run_key: u32) -> Opening {
        Opening { scratch_size, write, unfilled, existing_only: false, run_key }
    }
}

#[tonic::async_trait]
impl Agent for Service {
    async fn hello(&self, req: Request<pb::HelloRequest>) -> Result<Response<pb::HelloReply>, Status> {
        let r = req.into_inner();
        if r.protocol != PROTOCOL {
            return Err(Status::failed_precondition(format!(
                "protocol mismatch: this agent (iocurve {}) speaks protocol {PROTOCOL}, the coordinator (iocurve {}) speaks {}; run the same iocurve version on both",
                env!("CARGO_PKG_VERSION"),
                r.version,
                r.protocol
            )));
        }
        let mut f = host::facts();
        if let Some(sim) = &self.simulated {
            // A host of its own to the coordinator, named as simulated.
            f.hostname = format!("{}-sim{}", f.hostname, sim.index);
        }
        Ok(Response::new(pb::HelloReply {
            protocol: PROTOCOL,
            version: env!("CARGO_PKG_VERSION").into(),
            hostname: f.hostname,
            kernel: f.kernel,
            cpu_model: f.cpu_model,
            cores: f.cores as u32,
            smt: f.smt,
            governor: f.governor.unwrap_or_default(),
            unavailable: crate::wire::unavailable_to(&self.available),
        }))
    }

    async fn ping(&self, req: Request<pb::PingRequest>) -> Result<Response<pb::PingReply>, Status> {
        // The owner's pings keep its claim, as its calls that act do: a coordinator waiting
        // for other hosts between its calls still holds this agent.
        if let Some(ticket) = listen::ticket_of(&req)
            && let Some(o) = self.owner.lock().unwrap_or_else(|e| e.into_inner()).as_mut()
            && o.connection.upgrade().is_some_and(|c| Arc::ptr_eq(&c, &ticket))
        {
            o.last_act = std::time::Instant::now();
        }
        let agent_unix_ns = self.simulated.as_ref().map_or_else(unix_ns, simulate::Simulated::now);
        Ok(Response::new(pb::PingReply { agent_unix_ns }))
    }

    async fn targets(&self, req: Request<pb::TargetsRequest>) -> Result<Response<pb::TargetsReply>, Status> {
        // Checked before the trail records it: a malformed request is refused without a line.
        self.check_let_go(req.get_ref().run_key)?;
        self.check_groups(&req.get_ref().groups)?;
        let call = self.claim(
            &req,
            "targets",
            &targets_detail(&req.get_ref().groups, req.get_ref().write),
            Some(req.get_ref().run_key),
        )?;
        let r = req.into_inner();
        if let Some(relay) = self.joined_relay() {
            return relay.targets(r).await.map(Response::new);
        }
        // A simulated agent writes nothing: its scratch files stay unfilled and small, whatever
        // --size says (thousands of them on one disk).
        let unfilled = r.unfilled || self.simulated.is_some();
        let size = self.scratch_size(r.scratch_size);
        let set = self.open_with(&call, &r.groups, Opening::new(size, r.write, unfilled, r.run_key)).await?;
        Ok(Response::new(pb::TargetsReply { targets: facts(&set), lost: Vec::new() }))
    }

    async fn stop(&self, req: Request<pb::StopRequest>) -> Result<Response<pb::StopReply>, Status> {
        // Nothing running claims nothing, as for an agent (issue 35, finding 6).
        if let Some(relay) = self.joined_relay()
            && relay.running()
        {
            self.claim(&req, "stop", "relay", None)?;
            return Ok(Response::new(pb::StopReply { running: relay.stop() }));
        }
        // Stop with nothing running changes nothing, so it claims nothing: it made a squatter's
        // connection the owner of an idle agent (issue 35, finding 6).
        if self.stop.lock().unwrap_or_else(|e| e.into_inner()).is_none() {
            self.audit.accepted("stop", &audit::Peer::of(&req), "nothing was running: nothing claimed");
            return Ok(Response::new(pb::StopReply { running: false }));
        }
        self.claim(&req, "stop", "", None)?;
        let running = match &*self.stop.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(flag) => {
                flag.store(true, Ordering::Relaxed);
                true
            }
            None => false,
        };
        Ok(Response::new(pb::StopReply { running }))
    }

    async fn end_after(&self, req: Request<pb::EndAfterRequest>) -> Result<Response<pb::EndAfterReply>, Status> {
        let detail = if req.get_ref().query { "query" } else { "" };
        self.claim(&req, "end_after", detail, None)?;
        let r = req.into_inner();
        if let Some(relay) = self.joined_relay() {
            return Ok(Response::new(relay.end_after(r).await));
        }
        let ends = if r.query {
            self.end.position(r.start_at_unix_ns)
        } else {
            self.end.end_after(r.start_at_unix_ns, r.intervals).zip(self.end.position(r.start_at_unix_ns).map(|p| p.1))
        };
        Ok(Response::new(match ends {
            Some((intervals, entered)) => pb::EndAfterReply { running: true, intervals, entered },
            None => pb::EndAfterReply::default(),
        }))
    }

    type PreconditionStream = ReceiverStream<Result<pb::PreconditionEvent, Status>>;

    async fn precondition(
        &self,
        req: Request<pb::PreconditionRequest>,
    ) -> Result<Response<Self::PreconditionStream>, Status> {
        // A relay that let its group go: its hosts are lost to that run (before the groups,
        // which a relay's call names none of).
        self.check_let_go(req.get_ref().run_key)?;
        // Checked before the trail records it: a malformed request is refused without a line.
        self.check_groups(&req.get_ref().groups)?;
        if self.simulated.is_some() {
            return Err(simulate::refused("preconditioning"));
        }
        if let Some(relay) = self.joined_relay() {
            self.claim(&req, "precondition", "relay", Some(req.get_ref().run_key))?;
            let guard = self.take_busy()?;
            let (tx, rx) = mpsc::channel(64);
            relay.precondition(req.into_inner(), tx).await?;
            let last = |e: &pb::PreconditionEvent| matches!(e.event, Some(pb::precondition_event::Event::Done(_)));
            return Ok(Response::new(relayed_pass(rx, guard, relay.clone(), last)));
        }
        let call = self.claim(
            &req,
            "precondition",
            &targets_detail(&req.get_ref().groups, true),
            Some(req.get_ref().run_key),
        )?;
        let r = req.into_inner();
        let cfg = precondition_request(&r)?;
        let stuck_after = requests::stuck_after(r.stuck_after_s);
        let guard = self.take_busy()?;
        tracing::info!(
            targets = r.groups.iter().map(|g| g.targets.len()).sum::<usize>(),
            bs = cfg.bs,
            qd = cfg.qd,
            "precondition requested"
        );
        let targets = self.open_with(&call, &r.groups, Opening::new(r.scratch_size, true, true, r.run_key)).await?;
        let stop = Arc::new(AtomicBool::new(false));
        *self.stop.lock().unwrap_or_else(|e| e.into_inner()) = Some(stop.clone());
        self.stop_when_delegation_ends(&call, &stop);
        let slot = self.stop.clone();
        let (tx, rx) = mpsc::channel(64);
        // The local run's map (a remote agent opens its own at the first verifying step).
        let map = self.local.as_ref().and_then(|l| l.verify.as_ref()).map(|k| k.map.clone());
        tokio::task::spawn_blocking(move || {
            let done = precondition_blocking(&targets, &cfg, &r.resume, &stop, stuck_after, map.as_deref(), &tx);
            drop(targets);
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = None;
            drop(guard);
            let _ =
                tx.blocking_send(Ok(pb::PreconditionEvent { event: Some(pb::precondition_event::Event::Done(done)) }));
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    type VerifyPassStream = ReceiverStream<Result<pb::VerifyPassEvent, Status>>;

    async fn verify_pass(
        &self,
        req: Request<pb::VerifyPassRequest>,
    ) -> Result<Response<Self::VerifyPassStream>, Status> {
        self.check_let_go(req.get_ref().run_key)?;
        // Checked before the trail records it: a malformed request is refused without a line.
        self.check_groups(&req.get_ref().groups)?;
        if self.simulated.is_some() {
            return Err(simulate::refused("a verification pass"));
        }
        if let Some(relay) = self.joined_relay() {
            self.claim(&req, "verification pass", "relay", Some(req.get_ref().run_key))?;
            let guard = self.take_busy()?;
            let (tx, rx) = mpsc::channel(64);
            relay.verify_pass(req.into_inner(), tx).await?;
            let last = |e: &pb::VerifyPassEvent| matches!(e.event, Some(pb::verify_pass_event::Event::Done(_)));
            return Ok(Response::new(relayed_pass(rx, guard, relay.clone(), last)));
        }
        let call = self.claim(
            &req,
            "verification pass",
            &targets_detail(&req.get_ref().groups, false),
            Some(req.get_ref().run_key),
        )?;
        let r = req.into_inner();
        if !(512..=64 << 20).contains(&r.bs) || !r.bs.is_multiple_of(512) {
            return Err(Status::invalid_argument(format!("blocks of {} bytes: a map has 512 bytes to 64 MiB", r.bs)));
        }
        let guard = self.take_busy()?;
        let targets = self.open_existing(&call, &r.groups, r.run_key).await?;
        // The local run's own map, or this agent's for these targets.
        let KeptMap { map, path, .. } = match self.local.as_ref().map(|l| l.verify.clone()) {
            Some(Some(run_map)) => run_map,
            Some(None) => return Err(Status::failed_precondition("this run keeps no verification map")),
            None => off_the_runtime(|| self.map_for(&targets, r.bs, false, false))?,
        };
        // A pass no read of which returns for this long ends: it neither hangs on storage that
        // stopped answering nor waits past a stop for a read the kernel holds.
        let stuck_after = requests::stuck_after(r.stuck_after_s);
        tracing::info!(map = %path.display(), "verification pass requested");
        let stop = Arc::new(AtomicBool::new(false));
        *self.stop.lock().unwrap_or_else(|e| e.into_inner()) = Some(stop.clone());
        self.stop_when_delegation_ends(&call, &stop);
        let slot = self.stop.clone();
        let (tx, rx) = mpsc::channel(64);
        tokio::task::spawn_blocking(move || {
            let send = |e: pb::verify_pass_event::Event| {
                if tx.blocking_send(Ok(pb::VerifyPassEvent { event: Some(e) })).is_err() {
                    // The coordinator is gone: stop reading.
                    stop.store(true, Ordering::Relaxed);
                }
            };
            // Four a second, also while a read is held: the coordinator's sign of life.
            let mut progress = |done_bytes: u64, total_bytes: u64| {
                send(pb::verify_pass_event::Event::Progress(pb::VerifyPassProgress { done_bytes, total_bytes }));
            };
            let watched = watched_pass(
                targets.clone(),
                map.clone(),
                PROBLEM_LIST_CAP,
                stop.clone(),
                stuck_after,
                Duration::from_millis(250),
                &mut progress,
            );
            let done = match watched {
                // Stuck, or a stop a read outlasted (the coordinator tells which by its stop).
                Ok(Err(u)) => pb::VerifyPassDone { error: u.describe(), interrupted: true, ..Default::default() },
                Ok(Ok(pass)) => {
                    for chunk in pass.problems.chunks(1000) {
                        let problems = chunk
                            .iter()
                            .map(|p| pb::VerifyProblem {
                                target: p.target,
                                block: p.block,
                                kind: p.kind().into(),
                                expected: p.expected as u32,
                                found_generation: p.found_generation().unwrap_or(0) as u32,
                                found: p.describe_found(|t| {
                                    map.targets
                                        .get(t as usize)
                                        .map_or_else(|| format!("target {t}"), |m| m.path.clone())
                                }),
                            })
                            .collect();
                        send(pb::verify_pass_event::Event::Problems(pb::VerifyProblems { problems }));
                    }
                    pb::VerifyPassDone {
                        counts: Some(wire::verify_to(&pass.counts)),
                        unlisted: pass.unlisted,
                        interrupted: pass.interrupted,
                        map: path.display().to_string(),
                        ..Default::default()
                    }
                }
                Err(e) => pb::VerifyPassDone {
                    error: e.to_string(),
                    input: e.is_input_error(),
                    interrupted: true,
                    ..Default::default()
                },
            };
            drop(targets);
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = None;
            drop(guard);
            send(pb::verify_pass_event::Event::Done(done));
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn relay(&self, req: Request<pb::RelayRequest>) -> Result<Response<pb::RelayReply>, Status> {
        let Some(relay) = self.relay.clone() else {
            return Err(Status::failed_precondition(
                "this agent is no relay: start it with `iocurve agent --relay` to drive a group of agents",
            ));
        };
        // One level: a relay's child acts for the relay's coordinator and drives nobody.
        if req.extensions().get::<Delegated>().is_some() {
            let why = "a relay's child cannot be made a relay (one level of relays)";
            self.audit.refused("delegation", "relay", &audit::Peer::of(&req), why);
            return Err(Status::permission_denied(why));
        }
        let detail = format!("{} agents", req.get_ref().children.len());
        let call = self.claim(&req, "relay", &detail, Some(req.get_ref().run_key))?;
        if call.connection.is_none() {
            return Err(Status::failed_precondition("the in-process agent of a local run is no relay"));
        }
        if !self.idle() {
            return Err(Status::resource_exhausted(
                "this agent is running a step: a relay's group changes between steps",
            ));
        }
        let answer = relay.join(req.into_inner()).await;
        if let Err(e) = &answer {
            self.audit.failed("relay", &call.peer, e.message());
        }
        answer.map(Response::new)
    }

    type RunStepStream = ReceiverStream<Result<pb::StepEvent, Status>>;

    async fn run_step(&self, req: Request<pb::StepRequest>) -> Result<Response<Self::RunStepStream>, Status> {
        let received_unix_ns = unix_ns();
        let detail = format!("{} workers; {}", req.get_ref().workers, targets_detail(&req.get_ref().groups, false));
        self.check_let_go(req.get_ref().run_key)?;
        self.check_groups(&req.get_ref().groups)?;
        if let Some(d) = req.extensions().get::<Delegated>()
            && req.get_ref().start_at_unix_ns.max(0) as u64 / 1_000_000_000 > d.not_after_unix
        {
            let why = "the step would start after this relay's delegation ends";
            self.audit.refused("delegation", "step", &audit::Peer::of(&req), why);
            return Err(Status::permission_denied(why));
        }
        let call = self.claim(&req, "step", &detail, Some(req.get_ref().run_key))?;
        let r = req.into_inner();
        if let Some(relay) = self.joined_relay() {
            return self.relay_step(relay, r).await;
        }
        let (w, mut backend, faults) = step_request(&r)?;
        if self.simulated.is_some()
            && let Some(refused) = simulate::unsupported(&r, &w, &faults)
        {
            return Err(refused);
        }
        let replay = replay_request(&r)?;
        let iolog = r.write_iolog.then(iocurve_engine::iolog::IoLog::new);
        // Said once, in the agent's Hello (the run's `host.agents[].backend_note`).
        backend = self.available.resolve(backend).0;
        // A concurrent step's members, each on its own back-end (or its fallback here).
        let members: Vec<(iocurve_plan::Workload, u32, iocurve_plan::Backend)> = member_requests(&r)?
            .into_iter()
            .map(|(m, workers)| {
                let b = self.available.resolve(m.backend).0;
                (m, workers, b)
            })
            .collect();
        let guard = self.take_busy()?;
        tracing::info!(workload = %w.name, workers = r.workers, backend = backend.name(), "step requested");
        // A back-end that touches no data (null): a scratch file a null-only run left
        // unwritten is fine for it (and not filled for it).
        let null = (!backend.touches_storage() && members.iter().all(|(_, _, b)| !b.touches_storage()))
            || self.simulated.is_some();
        let writes = w.writes() || members.iter().any(|(m, _, _)| m.writes());
        let size = self.scratch_size(r.scratch_size);
        let targets = self.open_with(&call, &r.groups, Opening::new(size, writes, null, r.run_key)).await?;
        // The map: the local run's own, or this agent's for these targets. The step saves it
        // at every interval end (after flushing the targets) and at its own.
        let kept = match (&self.local, w.verify) {
            (_, false) => None,
            (Some(local), true) => local.verify.clone(),
            (None, true) => Some(off_the_runtime(|| self.map_for(&targets, w.bs[0].bytes, true, r.verify_journal))?),
        };
        let stop = Arc::new(AtomicBool::new(false));
        *self.stop.lock().unwrap_or_else(|e| e.into_inner()) = Some(stop.clone());
        self.stop_when_delegation_ends(&call, &stop);
        let slot = self.stop.clone();
        self.end.expect(r.start_at_unix_ns);
        let end = self.end.clone();
        let (tx, rx) = mpsc::channel(64);
        let metrics = self.metrics.clone();
        let synchronized = self.local.is_none();
        // Setting up thousands of psync threads takes longer than the coordinator waits for a
        // word from an agent on a slow host (2,048 took 11 s here): until the step starts, a
        // heartbeat every second says this agent is alive and at work.
        let began = Arc::new(AtomicBool::new(false));
        {
            let (beat, began) = (tx.clone(), began.clone());
            tokio::spawn(async move {
                let mut every = tokio::time::interval(std::time::Duration::from_secs(1));
                every.tick().await;
                loop {
                    every.tick().await;
                    if began.load(Ordering::Relaxed) || beat.is_closed() {
                        break;
                    }
                    let setting_up = pb::Progress { warmup: true, ..Default::default() };
                    let _ =
                        beat.try_send(Ok(pb::StepEvent { event: Some(pb::step_event::Event::Progress(setting_up)) }));
                }
            });
        }
        if let Some(sim) = self.simulated {
            let s = simulate::SimStep {
                sim,
                outstanding: r.workers as u64 * w.queue_depth.max(1) as u64,
                bs: w.bs.first().map_or(4096, |b| b.bytes),
                read_pct: w.read_pct,
                warmup_s: w.warmup_s,
                intervals: w.intervals,
                interval_s: w.interval_s,
                start_at_unix_ns: r.start_at_unix_ns,
                received_unix_ns: received_unix_ns + sim.offset_ns,
                host_target: 0,
            };
            // A task, not a blocking thread: thousands of simulated agents in one process.
            tokio::spawn(async move {
                let done = simulate::run(s, &tx, &stop, &end, &began).await;
                began.store(true, Ordering::Relaxed);
                drop(targets);
                *slot.lock().unwrap_or_else(|e| e.into_inner()) = None;
                drop(guard);
                let _ = tx.send(Ok(pb::StepEvent { event: Some(pb::step_event::Event::Done(done)) })).await;
            });
            return Ok(Response::new(ReceiverStream::new(rx)));
        }
        tokio::task::spawn_blocking(move || {
            let step = Step {
                r: &r,
                received_unix_ns,
                w: &w,
                backend,
                members: &members,
                targets: &targets,
                faults: &faults,
                replay: replay.as_ref(),
                iolog: iolog.clone(),
                kept,
                stop: &stop,
                end: &end,
                synchronized,
                metrics: metrics.as_ref().map(|(e, host)| (e, host.as_str())),
                began: &began,
            };
            // It saves the map as the step left it, for the next step, run and final pass.
            let done = run_blocking(&step, &tx);
            // (A step that failed before it started: its heartbeat ends too.)
            began.store(true, Ordering::Relaxed);
            // Close the targets before saying Done: a device is held exclusively (O_EXCL) and
            // the next step opens it again as soon as the coordinator reads `Done`.
            drop(targets);
            // Free for the next step before saying this one is done: the coordinator sends
            // the next request as soon as it reads `Done`.
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = None;
            drop(guard);
            // What the step issued, before it says it is done (`Done` ends its stream).
            for part in iolog.as_deref().map(work::iolog_parts).unwrap_or_default() {
                let _ = tx.blocking_send(Ok(pb::StepEvent { event: Some(pb::step_event::Event::Iolog(part)) }));
            }
            let _ = tx.blocking_send(Ok(pb::StepEvent { event: Some(pb::step_event::Event::Done(done)) }));
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

/// A relay's pass over its group, as its coordinator reads it: this agent counts as busy until
/// the group's last event (`last`: its `Done`) is sent — free for the next call before it says
/// so, as after a step —, and a coordinator that drops the stream stops the pass (as it stops
/// an agent's).
fn relayed_pass<E: Send + 'static>(
    mut inner: mpsc::Receiver<Result<E, Status>>,
    guard: Busy,
    relay: Arc<dyn relay::RelayHandler>,
    last: fn(&E) -> bool,
) -> ReceiverStream<Result<E, Status>> {
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        let (mut gone, mut guard) = (false, Some(guard));
        while let Some(e) = inner.recv().await {
            if e.as_ref().map_or(true, last) {
                guard.take();
            }
            if !gone && tx.send(e).await.is_err() {
                gone = true;
                relay.stop();
            }
        }
        drop(guard);
    });
    ReceiverStream::new(rx)
}

/// Runs blocking work of a request handler (the map: loading it, or waiting for it while a
/// pass given up on stalled storage still holds it) without stalling a runtime thread. A
/// stalled thread left the connection's keep-alive pings unanswered, and the coordinator
/// dropped the agent ("it did not take the step: http2 error", KeepAliveTimedOut). Inline where
/// the runtime has one thread (tests).
fn off_the_runtime<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Serves until `shutdown` completes; `bound` learns the address listened on (port 0 picks a
/// free port).
pub async fn serve(
    cfg: AgentConfig,
    bound: impl FnOnce(SocketAddr),
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), NetError> {
    serve_on(cfg, None, bound, shutdown).await
}

/// [`serve`] on a socket already listening on `cfg.listen` (an enrolled agent's, which its
/// coordinator dials again at once: no moment where nothing listens).
pub async fn serve_on(
    cfg: AgentConfig,
    listening: Option<std::net::TcpListener>,
    bound: impl FnOnce(SocketAddr),
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), NetError> {
    // Plain text only where nobody else is on the path: the token crosses the connection as
    // it is, and recorded bytes replayed later re-ran a step (issue 35, finding 6).
    if cfg.tls.is_none() && !cfg.listen.ip().is_loopback() {
        return Err(NetError::Input(format!(
            "--insecure listens only on loopback (127.0.0.1 or ::1), not on {}: without TLS anyone on the path reads the token and can replay the calls; use TLS (`iocurve certs init DIR`), or listen on loopback and reach it through an SSH tunnel",
            cfg.listen
        )));
    }
    let confine = Confinement::new(&cfg.allow, cfg.max_scratch).map_err(NetError::Input)?;
    let audit = cfg.audit.clone();
    let mut service = Service::new(
        Some(confine),
        cfg.allow_write,
        None,
        cfg.state_dir,
        cfg.metrics,
        cfg.remove_scratch,
        audit.clone(),
        cfg.claim_expiry,
        cfg.simulated,
    );
    // A relay's grant (its key for the run, its agents' delegation keys) comes to it over TLS
    // only.
    if cfg.relay.is_some() && cfg.tls.is_none() {
        return Err(NetError::Input(
            "a relay needs TLS (its grant holds keys): give --tls-cert and --tls-key, not --insecure".into(),
        ));
    }
    service.relay = cfg.relay;
    if let Some(relay) = service.relay.clone() {
        tokio::spawn(release_relay(Arc::downgrade(&service.owner), relay, audit.clone()));
    }
    let owner = service.owner.clone();
    let held = service.held.clone();
    let step_stop = service.stop.clone();
    let one_run = cfg.one_run;
    let shutdown = async move {
        if let Some(unclaimed) = one_run {
            tokio::select! {
                _ = shutdown => {}
                why = run_over(owner, unclaimed) => tracing::info!("{why}: this agent served one run and ends"),
            }
        } else {
            shutdown.await
        }
        // A running step stops now (its interval finishes, its I/O ends), so that the server's
        // graceful end does not wait for the whole step.
        if let Some(flag) = &*step_stop.lock().unwrap_or_else(|e| e.into_inner()) {
            flag.store(true, Ordering::Relaxed);
        }
        // The scratch files this agent created go now (a step still running holds its set
        // until it ends).
        held.lock().unwrap_or_else(|e| e.into_inner()).clear();
    };
    let keys = Arc::new(listen::Keys {
        token: cfg.token,
        name: cfg.tls.as_ref().and_then(|t| crate::certs::own_name(&t.cert_pem)),
        mutual_tls: cfg.tls.as_ref().is_some_and(|t| t.client_ca_pem.is_some()),
    });
    // HTTP/2 pings find a silent coordinator (a cut link sends no FIN) within the lease.
    let third = cfg.lease / 3;
    let mut builder = Server::builder()
        .http2_keepalive_interval(Some(third))
        .http2_keepalive_timeout(Some(third))
        // A coordinator makes a few calls at a time; a peer opening thousands of streams on
        // one connection is refused at the HTTP/2 level.
        .max_concurrent_streams(64);
    // TLS is done here, not by tonic: the calls need each connection's exporter to check the
    // token proof against (see `binding`).
    let tls = match &cfg.tls {
        Some(t) => Some(crate::binding::server_config(&t.cert_pem, &t.key_pem, t.client_ca_pem.as_deref())?),
        None => None,
    };
    let listener = match listening {
        Some(l) => l
            .set_nonblocking(true)
            .and_then(|()| tokio::net::TcpListener::from_std(l))
            .map_err(|e| NetError::Failed(format!("listening socket: {e}")))?,
        None => tokio::net::TcpListener::bind(cfg.listen)
            .await
            .map_err(|e| NetError::Input(format!("cannot listen on {}: {e}", cfg.listen)))?,
    };
    let addr = listener.local_addr().map_err(|e| NetError::Failed(format!("listening socket: {e}")))?;
    bound(addr);
    audit.note(&format!("listening on {addr}{}", if cfg.tls.is_some() { "" } else { " without TLS" }), None);
    // A run's locks go with its connection (checked every second).
    let lock_keeper = {
        let (locks, held) = (service.run_locks.clone(), service.held.clone());
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(1));
            loop {
                every.tick().await;
                let mut l = locks.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(r) = l.as_ref().filter(|r| r.connection.upgrade().is_none()) {
                    // That run is over: the scratch files it created and this agent keeps
                    // (for removal at its end) let go of its locks with it.
                    let over = r.key;
                    *l = None;
                    drop(l);
                    release_held(&held, |k| k == over);
                }
            }
        })
    };
    // Refusals counted beyond the first few reach the trail at least every window.
    let flusher = {
        let audit = audit.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(audit::WINDOW);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                audit.flush();
            }
        })
    };
    let router = builder.add_service(tonic::service::interceptor::InterceptedService::new(
        AgentServer::new(service).max_decoding_message_size(MAX_REQUEST_BYTES),
        listen::checker(keys, audit.clone()),
    ));
    let incoming = listen::incoming(listener, listen::LIMITS);
    let served = match tls {
        Some(config) => {
            let peer = |g: &listen::Guarded| Some(tonic::transport::server::Connected::connect_info(g).ticket.peer());
            // A refused handshake (an untrusted certificate, a stranger not speaking TLS) is a
            // refusal for the trail (rate-limited there).
            let trail = audit.clone();
            let refused = move |addr, why: String| {
                trail.refused("tls", "handshake", &audit::Peer { addr, identity: None, delegation: None }, &why);
            };
            let secured = crate::binding::accept(incoming, config, refused, peer);
            router.serve_with_incoming_shutdown(secured, shutdown).await
        }
        None => router.serve_with_incoming_shutdown(incoming, shutdown).await,
    }
    .map_err(|e| NetError::Failed(format!("agent on {addr}: {e}")));
    flusher.abort();
    lock_keeper.abort();
    audit.flush();
    audit.note("ended", None);
    served
}

/// Completes when a one-run agent's run is over: the connection that owned it closed, or no
/// coordinator took it within `unclaimed`. Says which.
async fn run_over(owner: Arc<std::sync::Mutex<Option<Owner>>>, unclaimed: Duration) -> String {
    let start = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let o = owner.lock().unwrap_or_else(|e| e.into_inner());
        match o.as_ref() {
            Some(o) if o.connection.upgrade().is_none() => return "its coordinator's connection closed".into(),
            None if start.elapsed() >= unclaimed => {
                return format!("no coordinator took it within {} s", unclaimed.as_secs());
            }
            _ => {}
        }
    }
}

/// How long a relay's coordinator may be gone (its connection closed, no step running) before
/// the relay lets its group go: seen twice, not once. Short: the next run on these agents, flat
/// or through relays, comes as soon as this one ended (a coordinator whose connection broke
/// mid-run has lost this relay's hosts anyway).
const RELAY_RELEASE_AFTER: Duration = Duration::from_millis(500);

/// A relay's group goes with the coordinator that made it (issue 46): once the connection that
/// owns this agent has been closed for [`RELAY_RELEASE_AFTER`] while no step runs, the relay
/// lets its agents go — they serve other coordinators again at once — instead of keeping its
/// claims on them until its delegations end (agents started by hand outlive the run). Ends
/// with the agent (its owner's slot gone).
async fn release_relay(
    owner: std::sync::Weak<std::sync::Mutex<Option<Owner>>>,
    relay: Arc<dyn relay::RelayHandler>,
    audit: Arc<audit::Audit>,
) {
    let mut gone_since: Option<tokio::time::Instant> = None;
    loop {
        tokio::time::sleep(RELAY_RELEASE_AFTER / 2).await;
        let Some(owner) = owner.upgrade() else { return };
        // Held through the check and the leave: a claim between them (a new connection's)
        // would otherwise be undone (a claim takes the owner's lock, then the relay's).
        let o = owner.lock().unwrap_or_else(|e| e.into_inner());
        let gone = o.as_ref().is_none_or(|o| o.connection.upgrade().is_none_or(|c| c.peer_closed()));
        if !(gone && relay.joined() && !relay.running()) {
            gone_since = None;
            continue;
        }
        if gone_since.get_or_insert_with(tokio::time::Instant::now).elapsed() >= RELAY_RELEASE_AFTER {
            relay.leave();
            audit.note("the coordinator that made this agent a relay is gone: its group's agents are let go", None);
            gone_since = None;
        }
        drop(o);
    }
}

/// Raises `flag` once the wall clock is past `not_after_unix` (that whole second included),
/// then calls `said`; gives up as soon as the flag's work is over (nothing holds the flag any
/// more). The end of a delegation is a moment on the wall clock, which tokio's timers do not
/// follow (they count monotonic time: a clock stepped forward or a host suspended would move
/// the end later): the wall clock is read again at least every second.
fn raise_at_delegation_end(
    not_after_unix: u64,
    flag: std::sync::Weak<AtomicBool>,
    said: impl FnOnce() + Send + 'static,
) {
    let end_ns = (u128::from(not_after_unix) + 1) * 1_000_000_000;
    tokio::spawn(async move {
        loop {
            if flag.strong_count() == 0 {
                return;
            }
            let now = unix_ns().max(0) as u128;
            if now >= end_ns {
                break;
            }
            tokio::time::sleep(Duration::from_nanos((end_ns - now).min(1_000_000_000) as u64)).await;
        }
        if let Some(f) = flag.upgrade() {
            f.store(true, Ordering::Relaxed);
            said();
        }
    });
}

/// Starts an agent inside this process for a local run and returns the client end of its
/// in-memory connection. Everything else — token, protocol check, steps, streaming, merging —
/// is what a remote agent gets.
pub fn in_process(local: InProcess, token: String) -> tokio::io::DuplexStream {
    let (client, server) = tokio::io::duplex(1 << 20);
    let audit = Arc::new(audit::Audit::off());
    let service =
        Service::new(None, Vec::new(), Some(local), PathBuf::new(), None, false, audit.clone(), CLAIM_EXPIRY, None);
    let incoming = tokio_stream::once(Ok::<_, std::io::Error>(server));
    tokio::spawn(async move {
        let r = Server::builder()
            .add_service(tonic::service::interceptor::InterceptedService::new(
                AgentServer::new(service).max_decoding_message_size(MAX_REQUEST_BYTES),
                listen::checker(Arc::new(listen::Keys { token, name: None, mutual_tls: false }), audit),
            ))
            .serve_with_incoming(incoming)
            .await;
        if let Err(e) = r {
            tracing::error!("in-process agent: {e}");
        }
    });
    client
}

#[cfg(test)]
mod tests {
    /// Issue 20 review: hosts sharing a state directory (an NFS home, a Slurm job's directory)
    /// picked the same map file and locked each other out. Each host's map carries its name; a
    /// map named the old way is continued.
    #[test]
    fn regression_hosts_sharing_a_state_directory_keep_their_maps_apart() {
        let dir = tempfile::tempdir().unwrap();
        let host = iocurve_engine::host::facts().hostname;
        let p = super::map_path(dir.path(), 0xabc);
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("iocurve-verify-") && name.ends_with("-0000000000000abc.map"), "{name}");
        assert!(host.chars().filter(|c| c.is_ascii_alphanumeric()).all(|c| name.contains(c)), "{name} names {host}");
        assert_ne!(name, "iocurve-verify-0000000000000abc.map");
        let legacy = dir.path().join("iocurve-verify-0000000000000abc.map");
        std::fs::write(&legacy, b"").unwrap();
        assert_eq!(super::map_path(dir.path(), 0xabc), legacy, "an old map is continued");
        std::fs::write(&p, b"").unwrap();
        assert_eq!(super::map_path(dir.path(), 0xabc), p, "once the host's own exists it wins");
    }
}
