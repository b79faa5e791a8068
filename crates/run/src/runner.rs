//! The run: plan → hosts → steps → store → analysis. Every workload's steps go through the
//! cluster (one in-process agent, or the remote ones), each finished interval is stored as it
//! comes (the recorder), each step analysed and handed to the observers, the result assembled.
//! The result is complete even when the run is cancelled or a step fails: nothing finished is
//! lost.

use crate::search::Search;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use iocurve_analysis::{
    AgentHost, FEWER_HOSTS, HostInfo, HostLoss, RunResult, SCHEMA_VERSION, Sla, Status, StepResult, TargetInfo,
    Thresholds, WorkloadResult, fewer_hosts_message,
};
use iocurve_engine::{StepObserver, host};
use iocurve_plan::{Pattern, Plan, TargetGroup, Workload, format_size};
use iocurve_store::{NewRun, Store, StoreError};

pub use crate::cluster::AgentOptions;
use crate::cluster::Cluster;
use crate::launch::{self, LaunchOptions};
use crate::recorder::Recorder;
use crate::setup::{choose_backend, open_targets, target_infos};
use crate::status::{conclude_verification, settle_status, storage_verdict};
use crate::threads::{self, AutoThreads};
use crate::{Cancel, Error, Observer, Observers, StepAt, time, verification};
use iocurve_plan::{Availability, ThreadModel};

/// The scratch file a run uses when the plan names no target.
pub const DEFAULT_SCRATCH: &str = "iocurve-scratch.dat";

/// A plan that names no target runs on [`DEFAULT_SCRATCH`] (`run --dry-run` shows it too).
pub fn default_target(plan: &mut Plan) {
    if plan.groups.is_empty() {
        plan.groups = vec![TargetGroup { name: "targets".into(), weight: 1, targets: vec![DEFAULT_SCRATCH.into()] }];
    }
}

/// The checks of a plan a run makes before it opens anything; `--dry-run` makes them too
/// (issue 36: it passed an SLA search without bounds, which the run refused at once).
pub fn check_plan(plan: &Plan) -> Result<(), Error> {
    verification::check_plan(plan)?;
    if let Some(w) = plan.workloads.iter().find(|w| w.sla_search)
        && !sla_of(plan).is_set()
    {
        return Err(Error::Usage(format!(
            "workload {}: sla_search looks for the highest rate within SLA bounds, but none is set: give --sla-mean-ms and/or --sla-p99-ms (or sla_mean_ms / sla_p99_ms in the plan)",
            w.name
        )));
    }
    Ok(())
}

/// What a run needs besides its plan and hosts.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// A free-form label stored with the run.
    pub label: String,
    /// The results database (created when missing).
    pub db: PathBuf,
    /// Size of the scratch files created for targets that do not exist; None: 1 GiB, or less
    /// when the disk has less room (each agent sizes its own to its own disk).
    pub size: Option<u64>,
    /// Keep scratch files after the run.
    pub keep: bool,
    /// Targets that may be written although they carry a signature or were not made by iocurve.
    pub allow_write: Vec<PathBuf>,
    /// Where verifying runs keep the map of acknowledged writes (local runs).
    pub verify_map: PathBuf,
    /// Read every written block back after the workloads.
    pub verify_final: bool,
    /// Journal every verifying write before it is issued (`--verify-journal`), so that a pass
    /// after a crash of this host explains the blocks being written.
    pub verify_journal: bool,
    /// How long the passes (preconditioning, the final verification) wait for a write or read
    /// before they take the storage for stopped (`--stuck-after-s`; default 30 s).
    pub stuck_after_s: Option<f64>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            label: String::new(),
            db: iocurve_store::DEFAULT_DB.into(),
            size: None,
            keep: false,
            allow_write: Vec::new(),
            verify_map: "iocurve-verify.map".into(),
            verify_final: false,
            verify_journal: false,
            stuck_after_s: None,
        }
    }
}

/// Where the I/O runs.
#[derive(Clone, Debug)]
pub enum Hosts {
    /// This host, in this process.
    Local,
    /// Agents (`iocurve agent`), all at once; this process coordinates.
    Agents(Box<AgentOptions>),
}

/// A run's end: its result (as stored and as `--json` writes it), its id in the store, and what
/// ended it early or made it fail, if anything did.
pub struct Outcome {
    pub result: RunResult,
    pub run_id: Option<i64>,
    pub error: Option<Error>,
}

impl Outcome {
    /// Why a run that ended without error did not go clean (exit code 3 or 4, and why).
    pub fn verdict(&self) -> Option<(u8, String)> {
        storage_verdict(&self.result)
    }
}

/// A plan to run on its hosts, heard by its observers, stopped by its [`Cancel`].
pub struct Runner<'o> {
    plan: Plan,
    hosts: Hosts,
    options: RunOptions,
    observers: Observers<'o>,
    cancel: Cancel,
}

impl<'o> Runner<'o> {
    pub fn new(mut plan: Plan, hosts: Hosts, options: RunOptions) -> Runner<'o> {
        default_target(&mut plan);
        Runner { plan, hosts, options, observers: Observers::default(), cancel: Cancel::new() }
    }

    /// Adds an observer: it hears every event after the ones added before it.
    pub fn observe(mut self, o: &'o mut dyn Observer) -> Runner<'o> {
        self.observers.push(o);
        self
    }

    /// The cancel that stops this run (one of its own otherwise, that nobody sets).
    pub fn cancel(mut self, cancel: Cancel) -> Runner<'o> {
        self.cancel = cancel;
        self
    }

    /// Runs the plan. An error means nothing was stored (bad input, refused targets, agents
    /// unreachable): nothing ran. Otherwise the outcome holds the run as stored, with what ended
    /// it if anything did.
    pub fn run(self) -> Result<Outcome, Error> {
        check_plan(&self.plan)?;
        match self.hosts.clone() {
            Hosts::Local if !self.plan.hosts.is_empty() => Err(Error::Usage(format!(
                "plan {} names [[hosts]]: it runs on agents (give the agents' token and CA)",
                self.plan.source
            ))),
            Hosts::Local => self.run_local(),
            Hosts::Agents(agents) => self.run_on_agents(&agents),
        }
    }

    fn run_local(mut self) -> Result<Outcome, Error> {
        let (plan, backend_note) = choose_backend(self.plan.clone(), &mut self.observers);
        // Every step must fit this host before anything is opened or written.
        for w in &plan.workloads {
            let most = w.steps().iter().map(|s| s.workers).max().unwrap_or(1);
            iocurve_engine::budget::check_step(w, most, w.backend)?;
            iocurve_engine::budget::check_limits(w, most, w.backend)?;
            // A curve's or a search's rate steps after the ramp: max_outstanding slots each.
            if let Some(d) = w.curve_workload(1.0).or_else(|| w.sla_search_workload()) {
                iocurve_engine::budget::check_step(&d, d.max_outstanding, d.backend)?;
                iocurve_engine::budget::check_limits(&d, d.max_outstanding, d.backend)?;
            }
        }
        let obs = &mut self.observers;
        // Before any I/O: a map another run holds, or a damaged one, is bad input (exit code 2).
        let prepared = verification::prepare(&plan, &self.options.verify_map, obs)?;
        let targets = open_targets(&plan, &self.options, &self.cancel, obs)?;
        // After the targets, so that bad input is reported first (exit code 2).
        let mut store = open_store(&self.options.db)?;
        settle_abandoned(&store, obs);
        let verification = verification::open(&plan, &targets, prepared, self.options.verify_journal, obs)?;
        let mut infos = target_infos(&targets, &store);
        let targets = Arc::new(targets);
        let mut cluster = Cluster::local(targets.clone(), verification.as_ref().map(|v| v.kept.clone()))?;
        // The pass an agent runs, on the in-process agent.
        if plan.precondition
            && !cluster.precondition(&plan, &store, &mut infos, pass_stuck_after(&self.options), &self.cancel, obs)?
        {
            // Cancelled: the run still ends as every interrupted run does (summary, JSON, stored
            // status `interrupted`), with no workload run.
            obs.note("interrupted while preconditioning: no workload ran; the same command resumes it");
        }
        let sla = sla_of(&plan);
        let run = Run { plan: &plan, cluster: &mut cluster, store: &mut store, observers: obs, cancel: &self.cancel };
        let mut outcome = run.execute(infos.clone(), backend_note, &self.options.label, &sla);
        if let Some(v) = &verification {
            v.close_journal();
            final_verification(&self.options, &mut cluster, &plan, &infos, &mut outcome, &mut store, &self.cancel, obs);
        }
        settle_status(&mut outcome, &store);
        Ok(outcome)
    }

    /// A run on agents: the same plan, recorder and analysis, with every step run on all agents
    /// at once.
    fn run_on_agents(mut self, agents: &AgentOptions) -> Result<Outcome, Error> {
        let mut agents = agents.clone();
        // `--launch`: the agents are started first and stopped once the run is over, whatever
        // ended it (the launch stops them on drop too, should anything here panic).
        let mut launch = match agents.launch.take() {
            Some(l) => Some(self.launch(&l, &mut agents)?),
            None => None,
        };
        let r = self.run_with_agents(&agents);
        if let Some(l) = launch.as_mut() {
            l.stop(&mut self.observers);
        }
        r
    }

    /// Starts the agents of `run --launch` on its hosts (or the plan's `[[hosts]]`), each
    /// allowed the targets it is to use, and points `agents` at them.
    fn launch(&mut self, l: &LaunchOptions, agents: &mut AgentOptions) -> Result<launch::Launch, Error> {
        let srun = matches!(l.method, launch::Method::Srun { .. });
        if srun {
            launch::slurm::require_allocation().map_err(Error::Usage)?;
        }
        let from_plan = l.hosts.is_empty() && !self.plan.hosts.is_empty();
        let hosts: Vec<String> = if !l.hosts.is_empty() {
            l.hosts.clone()
        } else if from_plan {
            self.plan.hosts.iter().map(|h| h.address.clone()).collect()
        } else if srun {
            // An agent per task of the allocation.
            launch::slurm::allocation_hosts().map_err(Error::Usage)?
        } else {
            Vec::new()
        };
        if hosts.is_empty() {
            return Err(Error::Usage(
                "--launch starts agents on hosts: give --hosts 'lg[01-16]' or --hosts-file FILE (or [[hosts]] in the plan)"
                    .into(),
            ));
        }
        if l.port != 0 {
            // Two agents on one host cannot both listen on one port.
            launch::hostlist::check_unique(&hosts, "the hosts of a launch with --launch-port (two agents on one host need a port each: drop --launch-port)")
                .map_err(Error::Usage)?;
        }
        if from_plan {
            // The plan's addresses reach ssh as host names: the same rules as --hosts.
            for h in &hosts {
                launch::hostlist::check_host(h)
                    .map_err(|e| Error::Usage(format!("plan {}: [[hosts]] address: {e}", self.plan.source)))?;
            }
            launch::hostlist::check_unique(&hosts, &format!("the [[hosts]] of plan {}", self.plan.source))
                .map_err(Error::Usage)?;
        }
        // Agents end when their credentials expire: a run that would outlast them would lose
        // every host on the way.
        let planned = self.plan.total_seconds();
        if planned * 1.2 + 600.0 > l.lifetime.as_secs_f64() {
            return Err(Error::Usage(format!(
                "the plan takes about {}, and the agents' credentials last {}: give --launch-valid-h {:.0} or more",
                iocurve_report::format::duration(planned),
                iocurve_report::format::duration(l.lifetime.as_secs_f64()),
                ((planned * 1.2 + 600.0) / 3600.0).ceil()
            )));
        }
        let plan = &self.plan;
        let allow = |host: &str| -> Vec<String> {
            match plan.hosts.iter().find(|h| from_plan && h.address == host && !h.targets.is_empty()) {
                Some(h) => h.targets.clone(),
                None => plan.groups.iter().flat_map(|g| g.targets.iter().cloned()).collect(),
            }
        };
        // An agent's allow list holds absolute paths; a relative target would be refused on
        // every host after the launch.
        if let Some(t) = hosts.iter().flat_map(|h| allow(h)).find(|t| !t.starts_with('/')) {
            return Err(Error::Usage(format!(
                "target {t}: launched agents take absolute paths (a relative one would be relative to each host's login directory); give /path/{t}"
            )));
        }
        let started = launch::start(
            l,
            &hosts,
            &allow,
            &self.options.allow_write,
            self.options.keep,
            &self.cancel,
            &mut self.observers,
        )?;
        let launch::Started { mut launch, addresses, failed, issued } = started;
        if !failed.is_empty() {
            let list: Vec<String> = failed.iter().map(|(h, why)| format!("{h}: {why}")).collect();
            if agents.abort_on_host_loss || addresses.is_empty() {
                launch.stop(&mut self.observers);
                return Err(Error::Runtime(format!(
                    "could not start the agent on {} of {} hosts — {}{}",
                    failed.len(),
                    hosts.len(),
                    list.join("; "),
                    if addresses.is_empty() { "" } else { "; --on-host-loss abort: the run stops before any I/O" }
                )));
            }
            for l in &list {
                self.observers.warning(&format!(
                    "could not start the agent on {l}: the run goes on without it (--on-host-loss continue)"
                ));
            }
        }
        agents.unreachable = failed;
        agents.issued = Some(issued);
        if from_plan {
            let at: std::collections::HashMap<String, String> = addresses.into_iter().collect();
            self.plan.hosts.retain_mut(|h| match at.get(&h.address) {
                Some(a) => {
                    h.address = a.clone();
                    true
                }
                None => false,
            });
        } else {
            agents.addresses = addresses.into_iter().map(|(_, a)| a).collect();
        }
        Ok(launch)
    }

    fn run_with_agents(&mut self, agents: &AgentOptions) -> Result<Outcome, Error> {
        let plan = &self.plan;
        let obs = &mut self.observers;
        // Without a size each agent sizes its scratch files to its own free space.
        let size = self.options.size.unwrap_or(iocurve_engine::target::AUTO_SCRATCH_SIZE);
        let (mut cluster, mut infos) = Cluster::connect(plan, agents, size, &self.cancel, obs)?;
        if self.options.verify_journal {
            cluster.journal_verifying_writes();
        }
        let mut store = open_store(&self.options.db)?;
        settle_abandoned(&store, obs);
        if plan.precondition
            && !cluster.precondition(plan, &store, &mut infos, pass_stuck_after(&self.options), &self.cancel, obs)?
        {
            obs.note("interrupted while preconditioning: no workload ran; the same command resumes it");
        }
        let sla = sla_of(plan);
        let run = Run { plan, cluster: &mut cluster, store: &mut store, observers: obs, cancel: &self.cancel };
        let mut outcome = run.execute(infos.clone(), None, &self.options.label, &sla);
        final_verification(&self.options, &mut cluster, plan, &infos, &mut outcome, &mut store, &self.cancel, obs);
        settle_status(&mut outcome, &store);
        Ok(outcome)
    }
}

/// How long a pass (preconditioning, the final verification) waits for a write or read before
/// it takes the storage for stopped: `--stuck-after-s`, as a step waits for its outstanding
/// I/O, else 30 s.
fn pass_stuck_after(options: &RunOptions) -> Duration {
    Duration::from_secs_f64(options.stuck_after_s.unwrap_or(iocurve_engine::PASS_STUCK_AFTER_S))
}

/// `--verify-final`: every host reads back every block its map knows, unless the run failed or
/// was interrupted; the pass's findings join the stored run.
#[allow(clippy::too_many_arguments)]
fn final_verification(
    options: &RunOptions,
    cluster: &mut Cluster,
    plan: &Plan,
    infos: &[TargetInfo],
    outcome: &mut Outcome,
    store: &mut Store,
    cancel: &Cancel,
    obs: &mut dyn Observer,
) {
    if !options.verify_final || outcome.error.is_some() || outcome.result.interrupted {
        return;
    }
    match cluster.verify_final(plan, infos, pass_stuck_after(options), cancel, obs) {
        Ok((found, rows)) => conclude_verification(outcome, store, found, rows, obs),
        Err(e) => outcome.error = Some(e),
    }
}

/// A step's flag when the results database refused some of its intervals.
const NOT_STORED: &str = "not_stored";

/// Why a rate ramp ends after this step: a `stop_at_*` bound passed, or an overload ended it
/// (higher rates would only overload it sooner).
fn rate_ramp_ends(w: &iocurve_plan::Workload, s: &StepResult) -> Option<String> {
    let r = s.rate.as_ref()?;
    if s.flags.iter().any(|f| f.code == "overloaded") {
        return Some(format!("overload = abort-step ended the step at {:.0} IOPS", r.target_iops));
    }
    // Nothing completed although I/Os were due, or some never came back: a storage that
    // stopped answering passes any bound; higher rates would only wait it out again.
    let bounded = w.stop_at_mean_ms.is_some() || w.stop_at_p99_ms.is_some();
    if bounded && ((s.read.ops + s.write.ops == 0 && r.due > 0) || s.stuck_ios > 0) {
        return Some(format!(
            "at {:.0} IOPS the storage stopped answering (no completion or stuck I/Os)",
            r.target_iops
        ));
    }
    if s.read.ops + s.write.ops == 0 {
        return None;
    }
    w.stop_at(s.lat_us.mean / 1000.0, s.lat_us.p99 / 1000.0)
        .map(|why| format!("at {:.0} IOPS the {why}", r.target_iops))
}

/// The SLA bounds in force: the plan's, which the command line has already set over it.
fn sla_of(plan: &Plan) -> Sla {
    Sla { mean_ms: plan.sla_mean_ms, p99_ms: plan.sla_p99_ms }
}

/// The back-ends a host runs the plan's workloads on: each one's fallback where the host
/// lacks it.
fn backend_names(plan: &Plan, here: &Availability) -> String {
    let mut backends: Vec<&str> = plan.workloads.iter().map(|w| here.resolve(w.backend).0.name()).collect();
    backends.dedup();
    backends.join("+")
}

/// The coordinator's facts and, for a multi-host run, each agent's own.
fn host_info(facts: host::HostFacts, plan: &Plan, backend_note: Option<String>, cluster: &Cluster) -> HostInfo {
    let agents = cluster
        .agents()
        .map(|(address, h)| {
            let there = iocurve_net::wire::availability(h);
            let mut notes: Vec<String> =
                plan.workloads.iter().filter_map(|w| there.resolve_at(w.backend, "on this agent").1).collect();
            notes.sort();
            notes.dedup();
            AgentHost {
                address: address.to_string(),
                facts: iocurve_net::wire::host_facts(h),
                backend: backend_names(plan, &there),
                backend_note: (!notes.is_empty()).then(|| notes.join("; ")),
                lost: None,
                lost_mid_run: None,
            }
        })
        .chain(cluster.unreachable().iter().map(|(address, why)| AgentHost {
            address: address.clone(),
            lost: Some(why.clone()),
            ..Default::default()
        }))
        .collect();
    HostInfo { facts, backend: backend_names(plan, &Availability::everything()), backend_note, agents }
}

/// Marks agent `address` lost mid-run in the run's hosts (the first loss stands: an agent
/// sits out the rest of the run once lost).
fn mark_lost(host: &mut HostInfo, address: &str, loss: &HostLoss) {
    if let Some(a) = host.agents.iter_mut().find(|a| a.address == address && a.lost_mid_run.is_none()) {
        a.lost_mid_run = Some(loss.clone());
    }
}

/// The ramp's working set: what every step of the run uses.
struct Run<'a, 'o> {
    plan: &'a Plan,
    cluster: &'a mut Cluster,
    store: &'a mut Store,
    observers: &'a mut Observers<'o>,
    cancel: &'a Cancel,
}

impl Run<'_, '_> {
    fn execute(self, target_infos: Vec<TargetInfo>, backend_note: Option<String>, label: &str, sla: &Sla) -> Outcome {
        let Run { plan, cluster, store, observers, cancel } = self;
        let mut host = host_info(host::facts(), plan, backend_note, cluster);
        // Every step is planned on the hosts the run starts its steps with (those lost before
        // the first step are marked `lost` and took part in no step). A host lost later is
        // marked in `host.agents[]`, and every step after it, on fewer hosts, says which and
        // where (issue 35, finding 4).
        let planned_hosts = cluster.hosts();
        let mut losses: Vec<(String, HostLoss)> = Vec::new();
        let plan_json = serde_json::to_value(plan).unwrap_or_default();
        let started_at = time::now_rfc3339();
        let new_run = NewRun {
            label: label.to_string(),
            plan_name: plan.name.clone(),
            started_at: started_at.clone(),
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            hostname: host.facts.hostname.clone(),
            backend: host.backend.clone(),
            targets: target_infos.iter().map(|t| t.path.as_str()).collect::<Vec<_>>().join(", "),
            host_json: serde_json::to_string(&host).unwrap_or_default(),
            targets_json: serde_json::to_string(&target_infos).unwrap_or_default(),
            plan_json: plan_json.to_string(),
        };
        observers.note(&run_header(plan, &host, &target_infos));
        let th = Thresholds::default();
        let target_paths: Vec<String> = target_infos.iter().map(|t| t.path.clone()).collect();
        let mut workloads: Vec<WorkloadResult> = Vec::new();
        let mut error: Option<Error> = None;
        let run_id = match store.begin_run(&new_run) {
            Ok(id) => {
                tracing::info!(run = id, plan = %plan.source, targets = target_infos.len(), "run started");
                // Room for the writes that end the run, should the database's filesystem fill.
                store.keep_room();
                observers.run_started(id, label, &plan.name);
                Some(id)
            }
            Err(e) => {
                error = Some(store_error(e));
                None
            }
        };
        // A workload with a curve adds its rate ramp right after it, once its maximum is known.
        // A workload with sla_search adds its search after it, a bisection over rate steps.
        // The third part: what chose the threads of the workload a curve or search follows.
        let mut queue: Vec<(iocurve_plan::Workload, Option<Search>, Option<threads::Seen>)> =
            plan.workloads.iter().map(|w| (w.clone(), None, None)).collect();
        let mut output_cut_noted = false;
        let mut data_checks: Vec<((iocurve_plan::DataPattern, u64, u64), Vec<iocurve_analysis::DataCheckRow>)> =
            Vec::new();
        let mut next = 0;
        while next < queue.len() {
            let (wi, (w, mut search, seen)) = (next, queue[next].clone());
            let w = &w;
            let nw = queue.len();
            next += 1;
            let Some(run_id) = run_id else { break };
            let seq = w.pattern == Pattern::Sequential;
            let workload_id =
                match store.begin_workload(run_id, wi, &w.name, &serde_json::to_string(w).unwrap_or_default()) {
                    Ok(id) => id,
                    Err(e) => {
                        error = Some(store_error(e));
                        break;
                    }
                };
            // Measured once per data pattern and block size: a suite's frontend and backend
            // variants write the same data.
            let key = (w.data, w.max_bs(), w.dedupe_unit());
            let data_check = match data_checks.iter().find(|(k, _)| *k == key) {
                _ if !w.writes() => Vec::new(),
                Some((_, rows)) => rows.clone(),
                None => match crate::datameter::sample(w) {
                    Ok(rows) => {
                        data_checks.push((key, rows.clone()));
                        rows
                    }
                    Err(e) => {
                        error = Some(e);
                        break;
                    }
                },
            };
            if !data_check.is_empty()
                && let Err(e) =
                    store.set_data_check(workload_id, &serde_json::to_string(&data_check).unwrap_or_default())
            {
                error = Some(store_error(e));
                break;
            }
            let mut steps: Vec<StepResult> = Vec::new();
            let mut stop_run = false;
            // Why a rate ramp ended before its last step (stop_at_*, an overload), and what the
            // run changed of the plan (a frontend capped on a small target).
            let mut ramp_notes: Vec<String> = Vec::new();
            if let Some(note) = frontend_note(w, &target_infos) {
                observers.note(&format!("{}: {note}", w.name));
                ramp_notes.push(note);
            }
            // A search's steps are chosen as it goes, each from the one before.
            let mut ramp = match &search {
                Some(sr) => vec![iocurve_plan::RampStep { workers: w.max_outstanding, rate: Some(sr.first()) }],
                None => w.steps(),
            };
            // `threads = 0` where the threads share the I/Os: chosen step by step from what
            // the threads of the step before used (threads.rs).
            // (Not when an agent without io_uring runs psync instead: its threads' figures
            // would be a different back-end's; it gets 0, one per core, as before.)
            let shared = w.backend.facts().threads == ThreadModel::Shared && cluster.runs_everywhere(w.backend);
            let mut auto = (w.threads == 0 && shared).then(|| AutoThreads::following(cluster.cores(), seen));
            let mut si = 0;
            while si < ramp.len() {
                let step = ramp[si];
                si += 1;
                let si = si - 1;
                let workers = step.workers;
                if si > 0 && w.pause_s > 0.0 {
                    observers.note(&format!("{}: {} s of rest before the next step (pause_s)", w.name, w.pause_s));
                    cancel.sleep(Duration::from_secs_f64(w.pause_s));
                }
                if cancel.is_cancelled() {
                    break;
                }
                observers.step_starting(&StepAt {
                    workload: &w.name,
                    workload_index: wi + 1,
                    workloads: nw,
                    step_index: si + 1,
                    steps: ramp.len(),
                    workers,
                    rate: step.rate,
                    sequential: seq,
                    rested_s: if si > 0 { w.pause_s } else { 0.0 },
                });
                tracing::info!(workload = %w.name, workers, "step started");
                let mut rec = Recorder {
                    observers: &mut *observers,
                    store: &mut *store,
                    workload_id,
                    step_idx: si,
                    step_id: None,
                    error: None,
                };
                let load = threads::Load {
                    outstanding: workers as u64 * w.queue_depth as u64,
                    iops: step.rate.map_or(0.0, |r| w.rate_iops(r)),
                    rate: step.rate.is_some(),
                };
                let chosen;
                let w_step = match &auto {
                    Some(a) => {
                        chosen = iocurve_plan::Workload { threads: a.next(workers, load) as u32, ..w.clone() };
                        &chosen
                    }
                    None => w,
                };
                let earlier = losses.len();
                let outcome = cluster.run_step(w_step, step, planned_hosts, &plan.faults, &mut rec, cancel).map(|m| {
                    let start_ns = m.merged.measured_from_unix_ns.map(|t| t - (w_step.warmup_s * 1e9) as i64);
                    for l in m.losses {
                        let loss = HostLoss {
                            at: start_ns.map_or_else(time::now_rfc3339, |t| {
                                iocurve_stats::date::rfc3339_ns(t.saturating_add((l.into_step_s * 1e9) as i64))
                            }),
                            workload: w.name.clone(),
                            workload_index: wi,
                            step: si,
                            workers,
                            into_step_s: l.into_step_s,
                            why: l.why,
                        };
                        mark_lost(&mut host, &l.address, &loss);
                        losses.push((l.address, loss));
                    }
                    m.merged
                });
                let (step_id, store_err) = (rec.step_id, rec.error);
                // Stored as it happens: a run killed later still marks the loss.
                if losses.len() > earlier
                    && let Err(e) = store.set_host_json(run_id, &serde_json::to_string(&host).unwrap_or_default())
                {
                    error.get_or_insert(store_error(e));
                }
                // The store refused an interval (full, gone read-only): the step's measured
                // intervals after it are lost to the database, but those stored are kept — in the
                // result and the JSON too (issue 36, finding 5: the JSON had no workloads although
                // intervals were stored). The run ends after this step with the store's error.
                let mut unstored = None;
                let outcome = outcome.and_then(|r| match store_err {
                    Some(e) if step_id.is_some() => {
                        unstored = Some(e.to_string());
                        error.get_or_insert(store_error(e));
                        Ok(r)
                    }
                    Some(e) => Err(store_error(e)),
                    None => Ok(r),
                });
                match outcome {
                    Ok(mut r) => {
                        if !output_cut_noted && let Some(why) = observers.lost() {
                            output_cut_noted = true;
                            r.notes.push(("output_closed".into(), why));
                        }
                        // On fewer hosts than planned because of earlier losses: which, where.
                        if r.hosts < r.planned_hosts && earlier > 0 {
                            let why = fewer_hosts_message(r.hosts, r.planned_hosts, &losses[..earlier]);
                            r.notes.push((FEWER_HOSTS.into(), why));
                        }
                        // The step counted its intervals as they were stored; its list comes
                        // back from the store, so that a long step's memory stays flat (issue 21).
                        // Without it the step's figures would rest on its last few intervals:
                        // it is not analysed, and the run ends with the store's error.
                        let read_back = match (step_id, &unstored) {
                            // Nothing more can be written: what was stored is read back.
                            (Some(id), Some(why)) => {
                                let measured = r.measured;
                                let read = store.fill_stored_intervals(id, &mut r);
                                r.interrupted = true;
                                r.notes.push((
                                    NOT_STORED.into(),
                                    format!(
                                        "the results database refused further writes ({why}): {} of the {measured} intervals measured were stored; the step's intervals are those, its latency totals cover all {measured}",
                                        r.intervals.len()
                                    ),
                                ));
                                read
                            }
                            (Some(id), None) => store.end_step(id, &r).and_then(|()| store.fill_intervals(id, &mut r)),
                            (None, _) => Ok(()),
                        };
                        if let Err(e) = read_back {
                            tracing::warn!(workload = %w.name, workers, error = %e, "step not read back");
                            error = Some(store_error(e));
                            stop_run = true;
                            break;
                        }
                        if r.intervals.is_empty() && r.drain.stuck > 0 {
                            // No interval to flag: the step is not kept, so say it here.
                            observers.warning(&format!(
                                "{} at {workers} workers: {} I/Os were still outstanding {:.1} s after the stop (oldest {:.1} s) and were given up as stuck",
                                w.name,
                                r.drain.stuck,
                                r.drain.wait_ns as f64 / 1e9,
                                r.drain.stuck_age_ns as f64 / 1e9
                            ));
                        }
                        let s = iocurve_analysis::analyze_step_on(&r, seq, &th, &target_paths);
                        if let Some(a) = auto.as_mut() {
                            // The CPU went into the I/Os achieved, whatever a rate step's target.
                            let seen = threads::Load { iops: s.iops, ..load };
                            a.seen(r.threads, seen, r.io_cpu, !r.intervals.is_empty());
                        }
                        tracing::info!(workload = %w.name, workers, iops = s.iops, flags = s.flags.len(), "step finished");
                        observers.step_finished(w.step_seconds(), &s);
                        let ends = if search.is_some() { None } else { rate_ramp_ends(w, &s) };
                        if let (Some(sr), Some(rate)) = (search.as_mut(), step.rate) {
                            // A probe passes when it kept its schedule within the SLA.
                            let pass = !r.intervals.is_empty()
                                && s.rate.as_ref().is_some_and(|x| x.sustained)
                                && sla.admits(&s);
                            if let Some(next) = sr.next(rate, pass) {
                                ramp.push(iocurve_plan::RampStep { workers, rate: Some(next) });
                            }
                        }
                        if !r.intervals.is_empty() {
                            steps.push(s);
                        }
                        if let Some(why) = &r.aborted {
                            // Kept like every step: the run ends after it, with status `aborted`.
                            error.get_or_insert(if crate::coordinator::all_lost(why) {
                                Error::HostsLost(why.clone())
                            } else {
                                Error::Aborted(why.clone())
                            });
                        }
                        if error.is_some() {
                            stop_run = true;
                            break;
                        }
                        if let Some(why) = ends {
                            let left = ramp.len() - si - 1;
                            if left > 0 {
                                let why = format!("{why}: the {left} higher rate(s) did not run");
                                observers.note(&format!("{}: {why}", w.name));
                                ramp_notes.push(why);
                            }
                            break;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(workload = %w.name, workers, error = %e, "step failed");
                        error = Some(e);
                        stop_run = true;
                        break;
                    }
                }
            }
            if !steps.is_empty() {
                let mut r = iocurve_analysis::analyze_workload(w, steps, sla);
                r.data_check = data_check;
                // What the run, not the figures, knows about the workload: kept in the store
                // beside its steps (the analysis of a stored run cannot derive it).
                let mut said = ramp_notes;
                if let Some(sr) = &search {
                    let cut = stop_run || cancel.is_cancelled();
                    let line = sr.describe(&sla.describe(), if seq { "MB/s" } else { "IOPS" }, cut);
                    observers.note(&format!("{}: {line}", w.name));
                    said.push(line);
                }
                // An undecided maximum (its top step too noisy) still bounds the search and
                // scales the curve: the top step's throughput.
                let maximum = r.maximum.map(|p| if seq { p.mbps } else { p.iops }).or_else(|| {
                    r.maximum_undecided.as_ref().and_then(|u| r.steps.get(u.step)).map(|s| s.throughput(seq))
                });
                let going_on = !stop_run && !cancel.is_cancelled();
                let mut follow = Vec::new();
                match maximum.and_then(|m| w.curve_workload(m)) {
                    Some(curve) if going_on => {
                        observers.note(&format!(
                            "{}: the response-time curve follows as {}, at {} % of its maximum",
                            w.name,
                            curve.name,
                            w.curve.iter().map(|p| format!("{p}")).collect::<Vec<_>>().join(", ")
                        ));
                        follow.push((curve, None));
                    }
                    None if !w.curve.is_empty() => {
                        said.push("no maximum was measured: the response-time curve did not run".into())
                    }
                    _ => {}
                }
                match (maximum, w.sla_search_workload()) {
                    (Some(m), Some(s)) if going_on && m > 0.0 => {
                        observers.note(&format!(
                            "{}: the SLA search follows as {}, between 0 and the highest throughput its worker ramp measured",
                            w.name, s.name
                        ));
                        follow.push((s, Some(Search::new(m))));
                    }
                    (None, Some(_)) => said.push("no maximum was measured: the SLA search did not run".into()),
                    _ => {}
                }
                let seen = auto.as_ref().and_then(AutoThreads::last);
                for (k, (f, search)) in follow.into_iter().enumerate() {
                    queue.insert(wi + 1 + k, (f, search, seen));
                }
                if !said.is_empty()
                    && let Err(e) = store.set_workload_notes(workload_id, &said.join("\n"))
                {
                    error.get_or_insert(store_error(e));
                }
                r.notes.extend(said);
                observers.workload_finished(&r);
                workloads.push(r);
            }
            if stop_run || cancel.is_cancelled() {
                break;
            }
        }
        let interrupted = cancel.is_cancelled();
        let finished_at = time::now_rfc3339();
        let status = if matches!(error, Some(Error::Aborted(_) | Error::HostsLost(_))) {
            Status::Aborted
        } else if error.is_some() {
            Status::Failed
        } else if interrupted {
            Status::Interrupted
        } else {
            Status::Complete
        };
        if let Some(id) = run_id
            && let Err(e) = store.finish_run(
                id,
                status.as_str(),
                &finished_at,
                &serde_json::to_string(&iocurve_analysis::headlines(&workloads)).unwrap_or_default(),
            )
        {
            error.get_or_insert(store_error(e));
        }
        // A store that failed while the run was finished makes it a failure whatever it was.
        let status = match &error {
            Some(Error::Aborted(_) | Error::HostsLost(_)) => Status::Aborted,
            Some(_) => Status::Failed,
            None => status,
        };
        let ended_early = status.ended_early();
        let status = status.as_str();
        tracing::info!(run = run_id.unwrap_or_default(), status, reason = ?error.as_ref().map(|e| e.to_string()), "run finished");
        let result = RunResult {
            schema_version: SCHEMA_VERSION,
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            started_at,
            finished_at,
            // As the stored run says it (`show`, `export`): every end but complete.
            interrupted: ended_early,
            status: status.into(),
            status_reason: error.as_ref().map(|e| e.to_string()),
            host,
            sla: sla.is_set().then_some(*sla),
            targets: target_infos,
            plan: plan_json,
            workloads,
            // Set after the run, when `--verify-final` read everything back.
            final_verification: None,
        }
        .with_link_use()
        .with_sla_answers();
        observers.run_finished(&result);
        Outcome { result, run_id, error }
    }
}

/// Opens the results database (created when missing).
/// Runs of this host the database still marks `running` whose process is gone get their
/// status (`interrupted`) now (issue 36, finding 5); said, never fatal.
fn settle_abandoned(store: &Store, obs: &mut dyn Observer) {
    match store.settle_abandoned() {
        Ok(ids) if !ids.is_empty() => {
            let ids: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
            obs.note(&format!(
                "runs {} of this host were still marked running, but their processes are gone: marked interrupted",
                ids.join(", ")
            ));
        }
        Ok(_) => {}
        Err(e) => obs.warning(&format!("cannot settle the runs whose processes are gone: {e}")),
    }
}

pub fn open_store(path: &Path) -> Result<Store, Error> {
    // Not ours, from a newer iocurve, or a path where no database can be made (a directory,
    // a missing directory, no write permission): the user named the wrong file, before
    // anything was measured — bad input, exit code 2 (issue 36: it was 1).
    Store::open(path).map_err(|e| {
        match &e {
            iocurve_store::StoreError::Invalid { .. } => Error::Usage(e.to_string()),
            iocurve_store::StoreError::Sql { .. } if e.is_bad_path() => {
                Error::Usage(format!("{e} (choose another file with --db or IOCURVE_DB)"))
            }
            // Busy past its wait, an I/O error, a full disk: the database failed, not the input.
            _ => Error::Runtime(format!("{e} (choose another file with --db or IOCURVE_DB)")),
        }
    })
}

/// Opens an existing results database to change it (`delete`): it must exist.
pub fn open_existing_store(path: &Path) -> Result<Store, Error> {
    Store::open_existing(path).map_err(|e| Error::Usage(e.to_string()))
}

/// Opens the results database for reading only: it must exist, and it is never written
/// (read-only mounts, no write permission, a run writing it meanwhile: `Store::open_read`).
pub fn open_read_store(path: &Path) -> Result<Store, Error> {
    Store::open_read(path).map_err(|e| Error::Usage(e.to_string()))
}

pub(crate) fn store_error(e: StoreError) -> Error {
    Error::StoreRefused(format!("{e}: the run stops so that no measurement goes unrecorded"))
}

/// Where a frontend was capped to 1/8 of a small target: how much of which targets it covers.
fn frontend_note(w: &Workload, targets: &[TargetInfo]) -> Option<String> {
    let iocurve_plan::WorkingSet::Frontend { blocks } = w.working_set else { return None };
    let max_bs = w.bs.iter().map(|b| b.bytes).max()?;
    let capped: Vec<String> = targets
        .iter()
        .filter_map(|t| {
            let (_, end, capped) = w.working_set.extent(t.size, max_bs);
            let want = blocks.saturating_mul(max_bs);
            let share = if want >= t.size {
                "all".to_string()
            } else {
                format!("{:.0} %", want as f64 * 100.0 / t.size as f64)
            };
            capped.then(|| {
                format!(
                    "{blocks} blocks of {} would be {share} of {} ({}); it covers the first {}",
                    format_size(max_bs),
                    t.path,
                    format_size(t.size),
                    format_size(end)
                )
            })
        })
        .collect();
    (!capped.is_empty()).then(|| {
        format!(
            "frontend capped to at most 1/{} of a target (at least one block): {}",
            iocurve_plan::FRONTEND_MAX_FRACTION,
            capped.join("; ")
        )
    })
}

/// The run's header: what ran where, on what, so that any copy of the output says it.
fn run_header(plan: &Plan, host: &HostInfo, targets: &[TargetInfo]) -> String {
    let f = &host.facts;
    let mut out = format!(
        "iocurve {}, plan {}\n  host     {} ({}, {} cores, kernel {}), back-end {}",
        env!("CARGO_PKG_VERSION"),
        plan.name,
        f.hostname,
        f.cpu_model,
        f.cores,
        f.kernel,
        host.backend
    );
    for a in &host.agents {
        out.push_str(&format!(
            "\n  agent    {} = {} ({}, {} cores), back-end {}",
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
    out.push_str(&format!("\n  targets  {}{more}", named.join(", ")));
    out
}
