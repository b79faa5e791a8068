//! The run: plan → hosts → steps → store → analysis. What a run needs before its steps (the
//! store, the targets, the back-end, the agents) and after them (the final verification, the
//! verdict); the steps themselves are `execute`'s.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use iocurve_analysis::{Sla, TargetInfo};
use iocurve_engine::StepObserver;
use iocurve_net::auth;
use iocurve_plan::{Plan, TargetGroup};
use iocurve_store::Store;

pub use crate::cluster::AgentOptions;
use crate::cluster::Cluster;
use crate::events::RunEvent;
use crate::execute::Run;
use crate::launch::{self, LaunchOptions};
use crate::options::{Hosts, RunOptions};
use crate::setup::{choose_backend, open_targets, target_infos};
use crate::status::{Outcome, conclude_verification, settle_status};
use crate::{Cancel, Error, Observer, Observers, verification};

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
    // A reclaim step overwrites and trims its region: what a verifying workload wrote there
    // would be reported lost.
    if let (Some(r), Some(w)) = (plan.reclaim.first(), plan.workloads.iter().find(|w| w.verify)) {
        return Err(Error::Usage(format!(
            "reclaim {} overwrites and trims its region, and workload {} verifies what it writes: run the reclaim step in a plan of its own",
            r.name, w.name
        )));
    }
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

/// A plan to run on its hosts, heard by its observers, stopped by its [`Cancel`].
pub struct Runner<'o> {
    plan: Plan,
    hosts: Hosts,
    options: RunOptions,
    observers: Observers<'o>,
    cancel: Cancel,
    /// The replaying workloads' traces, read by `run` before anything is opened.
    replays: crate::replay::Replays,
}

impl<'o> Runner<'o> {
    pub fn new(mut plan: Plan, hosts: Hosts, options: RunOptions) -> Runner<'o> {
        default_target(&mut plan);
        Runner {
            plan,
            hosts,
            options,
            observers: Observers::default(),
            cancel: Cancel::new(),
            replays: Default::default(),
        }
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
    pub fn run(mut self) -> Result<Outcome, Error> {
        check_plan(&self.plan)?;
        // A trace that cannot be read is bad input: found before anything is opened.
        self.replays = crate::replay::load(&mut self.plan)?;
        if let Some(path) = &self.options.write_iolog {
            let others = crate::iolog::run_files(&self.plan, &self.options.db, &self.options.verify_map);
            crate::iolog::check(path, &others)?;
            crate::iolog::check_names(self.plan.groups.iter().flat_map(|g| &g.targets).map(String::as_str))?;
        }
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
        let fits = |w: &iocurve_plan::Workload, workers: u32| -> Result<(), Error> {
            iocurve_engine::budget::check_step(w, workers, w.backend)?;
            iocurve_engine::budget::check_limits(w, workers, w.backend)?;
            iocurve_engine::budget::check_aio_room(w, workers, w.backend)?;
            Ok(())
        };
        // A host-count sweep needs agents to count: a local run is one host.
        plan.check_sweeps(0).map_err(Error::Usage)?;
        for w in &plan.workloads {
            // The most workers at the deepest queue: a grid's corner, whose memory and threads
            // are the most any step needs.
            let steps = w.steps();
            // (A concurrent step's member: its share of them.)
            let workers = plan.workers_of(w, steps.iter().map(|s| s.workers).max().unwrap_or(1));
            let deepest = steps.iter().map(|s| s.queue_depth).max().unwrap_or(w.queue_depth);
            let corner = iocurve_plan::RampStep { workers, queue_depth: deepest, hosts: None, rate: None, speed: None };
            fits(&w.at_step(&corner), workers)?;
            // A curve's or a search's rate steps after the ramp: max_outstanding slots each.
            if let Some(d) = w.curve_workload(1.0).or_else(|| w.sla_search_workload()) {
                fits(&d, d.max_outstanding)?;
            }
        }
        // A concurrent step's members together, at its largest step.
        for (step, members) in plan.units().iter().filter(|(_, m)| !m.is_empty()) {
            let most = step.ramp.iter().copied().max().unwrap_or(1);
            let at = crate::together::at_step(
                members,
                &iocurve_plan::RampStep { workers: most, queue_depth: 1, hosts: None, rate: None, speed: None },
            );
            let all: Vec<(&iocurve_plan::Workload, u32, iocurve_plan::Backend)> =
                at.iter().map(|(m, n)| (m, *n, m.backend)).collect();
            iocurve_engine::budget::check_members(&all)?;
        }
        // A replay that refuses to move I/Os beyond its targets, before they are made.
        self.replays.check_sizes(&plan, self.options.size.or(plan.scratch_size))?;
        let obs = &mut self.observers;
        // Before any I/O: a map another run holds, or a damaged one, is bad input (exit code 2).
        let prepared = verification::prepare(&plan, &self.options.verify_map, obs)?;
        let targets = open_targets(&plan, &self.options, &self.cancel, obs)?;
        // Before any I/O: what a reclaim step cannot do (a broken probe, a file system that
        // cannot punch holes) must not be found after hours of preconditioning and workloads.
        crate::reclaim::check(&plan, &targets)?;
        // After the targets, so that bad input is reported first (exit code 2).
        let mut store = open_store(&self.options.db)?;
        settle_abandoned(&store, obs);
        let verification = verification::open(&plan, &targets, prepared, self.options.verify_journal, obs)?;
        let mut infos = target_infos(&targets, &store);
        let targets = Arc::new(targets);
        let mut cluster = Cluster::local(targets.clone(), verification.as_ref().map(|v| v.kept.clone()))?;
        let iolog = open_iolog(&self.options, &mut cluster, &infos)?;
        // The pass an agent runs, on the in-process agent.
        if plan.precondition
            && !cluster.precondition(&plan, &store, &mut infos, pass_stuck_after(&self.options), &self.cancel, obs)?
        {
            // Cancelled: the run still ends as every interrupted run does (summary, JSON, stored
            // status `interrupted`), with no workload run.
            obs.event(&RunEvent::InterruptedWhilePreconditioning);
        }
        let sla = sla_of(&plan);
        crate::precondition::forget_if_trimmed(&plan, &targets, &store, obs);
        let run = Run {
            plan: &plan,
            cluster: &mut cluster,
            store: &mut store,
            observers: obs,
            cancel: &self.cancel,
            reclaim_on: Some((&targets, pass_stuck_after(&self.options))),
            replays: &self.replays,
            iolog,
        };
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
        if let Some(r) = self.plan.reclaim.first() {
            return Err(Error::Usage(format!(
                "reclaim {} runs on this host's own targets; agents do not run reclaim steps yet: run it without --hosts (and without [[hosts]] in the plan)",
                r.name
            )));
        }
        let mut agents = agents.clone();
        // `--launch`: the agents are started first and stopped once the run is over, whatever
        // ended it (the launch stops them on drop too, should anything here panic).
        let mut launch = match agents.launch.take() {
            Some(l) => Some(self.launch(&l, &mut agents)?),
            None => None,
        };
        if !agents.relay_addresses.is_empty() {
            self.hand_started_relays(&mut agents)?;
        }
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
        if l.relay_every > 0 {
            // A delegation names its agent by its host's name: two agents on one host would be
            // one to their relay.
            let names: Vec<String> = hosts.iter().map(|h| launch::tls_host(h).to_string()).collect();
            launch::hostlist::check_unique(
                &names,
                "the hosts of a run with --relay-every (a relay knows each agent by its host's name: one agent per host, e.g. one Slurm task per node)",
            )
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
                iocurve_analysis::format::duration(planned),
                iocurve_analysis::format::duration(l.lifetime.as_secs_f64()),
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
        // Groups in the hosts' order are known now: a sweep that does not take them whole is
        // refused before anything starts (by switch, once the topology is read).
        if l.relay_every > 0 && !l.relay_by_switch {
            let places = launch::RelayPlaces::in_order(hosts.len(), l.relay_every as usize);
            self.plan.check_sweeps_in_groups(&places.ends).map_err(Error::Usage)?;
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
        let launch::Started { mut launch, addresses, failed, issued, relays, places } = started;
        // Each relay's hosts as the coordinator names them: by their agents' addresses.
        let at: std::collections::HashMap<&str, &str> =
            addresses.iter().map(|(h, a)| (h.as_str(), a.as_str())).collect();
        // (A relay none of whose agents started has nothing to drive: its group's places stay
        // nobody's.)
        let mut kept = launch::RelayPlaces { ends: places.ends, lasts: Vec::new() };
        agents.relays = relays
            .iter()
            .zip(places.lasts)
            .filter_map(|((relay, group), last)| {
                let group: Vec<String> =
                    group.iter().filter_map(|h| at.get(h.as_str()).map(|a| a.to_string())).collect();
                (!group.is_empty()).then(|| {
                    kept.lasts.push(last);
                    (relay.clone(), group)
                })
            })
            .collect();
        agents.relay_places = kept;
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
        agents.relay_credentials = issued.run.clone();
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

    /// `run --relays` (issue 46): relays started by hand (`iocurve agent --relay`) over agents
    /// started by hand with per-host credentials (`certs add-host`), each relay driving the next
    /// `relay_every` hosts in the order given. The cluster's CA key and token mint the relays'
    /// grants, as a launch's own credentials do.
    fn hand_started_relays(&mut self, agents: &mut AgentOptions) -> Result<(), Error> {
        let every = agents.relay_every as usize;
        let hosts: Vec<String> = if agents.addresses.is_empty() {
            self.plan.hosts.iter().map(|h| h.address.clone()).collect()
        } else {
            agents.addresses.clone()
        };
        if every < 2 || hosts.is_empty() {
            return Err(Error::Usage(
                "--relays drives hosts in groups: give --relay-every N and the hosts (--hosts or [[hosts]])".into(),
            ));
        }
        let names: Vec<String> = hosts.iter().map(|h| auth::host_of(h).to_string()).collect();
        launch::hostlist::check_unique(
            &names,
            "the hosts of a run with --relays (a relay knows each agent by its host's name: one agent per host)",
        )
        .map_err(Error::Usage)?;
        let groups: Vec<&[String]> = hosts.chunks(every).collect();
        if groups.len() != agents.relay_addresses.len() {
            return Err(Error::Usage(format!(
                "--relays: {} hosts in groups of {every} (--relay-every) make {} groups, and {} relays were given: give one relay per group",
                hosts.len(),
                groups.len(),
                agents.relay_addresses.len()
            )));
        }
        launch::hostlist::check_unique(
            &agents.relay_addresses,
            "the relays of --relays (each drives a group of its own)",
        )
        .map_err(Error::Usage)?;
        if let Some(r) = agents.relay_addresses.iter().find(|r| hosts.contains(r)) {
            return Err(Error::Usage(format!(
                "--relays {r} is one of the hosts: a relay is a second agent (`iocurve agent --relay`) on a port of its own"
            )));
        }
        // A delegation's key derives from its agent's own token, and its agent takes it only
        // from a relay that shows a certificate of the cluster's CA (docs/relays.md).
        // The grant (the relay's key for the run, its agents' delegation keys) goes to the relay
        // over TLS only; a delegation names its agent, not a shared name.
        if agents.insecure || agents.tls_name.is_some() {
            return Err(Error::Usage(format!(
                "--relays cannot go with {}: a relay's grant travels over TLS only, to agents each of its own name",
                if agents.insecure { "--insecure" } else { "--tls-name" }
            )));
        }
        let (Some(ca), true, Some(_)) = (&agents.ca, agents.token_per_host, &agents.client_cert) else {
            return Err(Error::Usage(
                "--relays needs agents with per-host credentials and mutual TLS: --ca, --client-cert/--client-key and --token-per-host (`iocurve certs add-host NAME` for each host, agents started with --client-ca)".into(),
            ));
        };
        let token_file = agents.token_file.as_ref().ok_or_else(|| {
            Error::Usage("--relays needs the cluster's token: --token-file FILE (or IOCURVE_TOKEN_FILE)".into())
        })?;
        let key = agents.relay_ca_key.clone().unwrap_or_else(|| ca.with_file_name("ca.key"));
        let read = |p: &std::path::Path, what: &str| {
            std::fs::read_to_string(p).map_err(|e| {
                Error::Usage(format!(
                    "--relays: cannot read {what} {} ({e}){}",
                    p.display(),
                    if what == "the CA key" {
                        ": give --relay-ca-key FILE (the ca.key of `iocurve certs init`)"
                    } else {
                        ""
                    }
                ))
            })
        };
        let token = auth::read_token(token_file).map_err(|e| Error::Usage(format!("--relays: {e}")))?;
        // No launch bounds a hand-started run: its delegations last twice the plan and an hour,
        // long enough for a run slower than its plan, and end with it all the same; a day more
        // with a pass, whose length no plan says (a relay whose delegations end during one says
        // so).
        let passes = self.plan.precondition || self.options.verify_final;
        let expires =
            iocurve_net::unix_s() + (self.plan.total_seconds() * 2.0) as u64 + 3600 + if passes { 86_400 } else { 0 };
        let creds = iocurve_net::certs::RunCredentials::of_cluster(
            &read(ca, "the CA")?,
            &read(&key, "the CA key")?,
            &token,
            expires,
        )
        .map_err(|e| Error::Usage(format!("--relays: {e}")))?;
        agents.relays = agents.relay_addresses.iter().cloned().zip(groups.iter().map(|g| g.to_vec())).collect();
        agents.relay_places = launch::RelayPlaces::in_order(hosts.len(), every);
        agents.relay_credentials = Some(Arc::new(creds));
        Ok(())
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
        if !agents.host_intervals.is_empty() {
            cluster.host_intervals(&agents.host_intervals).map_err(Error::Usage)?;
        }
        let iolog = open_iolog(&self.options, &mut cluster, &infos)?;
        let mut store = open_store(&self.options.db)?;
        settle_abandoned(&store, obs);
        if plan.precondition
            && !cluster.precondition(plan, &store, &mut infos, pass_stuck_after(&self.options), &self.cancel, obs)?
        {
            obs.event(&RunEvent::InterruptedWhilePreconditioning);
        }
        crate::precondition::forget_agents_if_trimmed(plan, &infos, &store, obs);
        let sla = sla_of(plan);
        let run = Run {
            plan,
            cluster: &mut cluster,
            store: &mut store,
            observers: obs,
            cancel: &self.cancel,
            reclaim_on: None,
            replays: &self.replays,
            iolog,
        };
        let mut outcome = run.execute(infos.clone(), None, &self.options.label, &sla);
        final_verification(&self.options, &mut cluster, plan, &infos, &mut outcome, &mut store, &self.cancel, obs);
        settle_status(&mut outcome, &store);
        Ok(outcome)
    }
}

/// `--write-iolog FILE`: the log, created before any step (a path it cannot be is bad input),
/// and every host told to send its I/Os.
fn open_iolog(
    options: &RunOptions,
    cluster: &mut Cluster,
    infos: &[iocurve_analysis::TargetInfo],
) -> Result<Option<crate::iolog::RunLog>, Error> {
    let Some(path) = &options.write_iolog else { return Ok(None) };
    let log = crate::iolog::RunLog::create(path, infos)?;
    cluster.write_iolog();
    Ok(Some(log))
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

/// The SLA bounds in force: the plan's, which the command line has already set over it.
fn sla_of(plan: &Plan) -> Sla {
    Sla { mean_ms: plan.sla_mean_ms, p99_ms: plan.sla_p99_ms }
}

/// Runs of this host the database still marks `running` whose process is gone get their
/// status (`interrupted`) now (issue 36, finding 5); said, never fatal.
fn settle_abandoned(store: &Store, obs: &mut dyn Observer) {
    match store.settle_abandoned() {
        Ok(ids) if !ids.is_empty() => {
            obs.event(&RunEvent::StaleRunsSettled { ids });
        }
        Ok(_) => {}
        Err(e) => obs.warning(&format!("cannot settle the runs whose processes are gone: {e}")),
    }
}

/// Opens the results database (created when missing).
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
