//! One run's steps, workload after workload: each step through the cluster (one in-process
//! agent, or the remote ones), each finished interval stored as it comes (the recorder), each
//! step analysed and handed to the observers, each workload's follow-ups queued after it, the
//! result assembled. The result is complete even when the run is cancelled or a step fails:
//! nothing finished is lost.
//!
//! A [`Session`] holds what the run carries from step to step; a workload's own state is its
//! [`Ramp`] and the few values beside it.

use std::time::Duration;

use iocurve_analysis::{
    AgentHost, DataCheckRow, FEWER_HOSTS, HostInfo, HostLoss, RunFacts, RunResult, Sla, Status, StepResult, TargetInfo,
    Thresholds, WorkloadResult, fewer_hosts_message,
};
use iocurve_engine::{StepObserver, host};
use iocurve_plan::{Availability, Pattern, Plan, ThreadModel, Workload, format_size};
use iocurve_stats::StepRecord;
use iocurve_store::{NewRun, Store};

use crate::cluster::Cluster;
use crate::error::store_error;
use crate::events::RunEvent;
use crate::ramp::{Ramp, follow_ups};
use crate::recorder::Recorder;
use crate::search::Search;
use crate::status::Outcome;
use crate::threads::{self, AutoThreads};
use crate::{Cancel, Error, Observer, Observers, StepAt, time};

/// A step's flag when the results database refused some of its intervals.
const NOT_STORED: &str = "not_stored";

/// A step's note when the I/O log lacks some of its I/Os (`--write-iolog`).
const IOLOG_LEFT_OUT: &str = "iolog_left_out";

/// The ramp's working set: what every step of the run uses.
pub(crate) struct Run<'a, 'o> {
    pub plan: &'a Plan,
    pub cluster: &'a mut Cluster,
    pub store: &'a mut Store,
    pub observers: &'a mut Observers<'o>,
    pub cancel: &'a Cancel,
    /// This host's targets, for the reclaim steps after the workloads (None on agents: the
    /// plan has none then).
    pub reclaim_on: Option<(&'a iocurve_engine::TargetSet, Duration)>,
    /// The replaying workloads' traces, read before anything was opened.
    pub replays: &'a crate::replay::Replays,
    /// `--write-iolog`: where every step's I/Os go.
    pub iolog: Option<crate::iolog::RunLog>,
}

/// One entry of the run's queue: a workload, the search it is (if one), what chose the threads
/// of the workload it follows (a curve or search starts from that), and a concurrent step's
/// members (empty for a workload alone).
type Queued = (Workload, Option<Search>, Option<threads::Seen>, Vec<Workload>);

/// A data check's key: data pattern, largest block size, dedupe unit.
type DataKey = (iocurve_plan::DataPattern, u64, u64);

/// What the run carries from step to step.
struct Session<'a, 'o> {
    plan: &'a Plan,
    cluster: &'a mut Cluster,
    store: &'a mut Store,
    observers: &'a mut Observers<'o>,
    cancel: &'a Cancel,
    sla: &'a Sla,
    th: Thresholds,
    target_infos: Vec<TargetInfo>,
    target_paths: Vec<String>,
    host: HostInfo,
    /// Every step is planned on the hosts the run starts its steps with (those lost before
    /// the first step are marked `lost` and took part in no step). A host lost later is
    /// marked in `host.agents[]`, and every step after it, on fewer hosts, says which and
    /// where (issue 35, finding 4).
    planned_hosts: u32,
    losses: Vec<(String, HostLoss)>,
    /// What ends the run early (the first one stands, but for a failed step).
    error: Option<Error>,
    output_cut_noted: bool,
    /// Measured once per data pattern and block size: a suite's frontend and backend variants
    /// write the same data.
    data_checks: Vec<(DataKey, Vec<DataCheckRow>)>,
    workloads: Vec<WorkloadResult>,
    /// The run in the store (None when the store refused it).
    run_id: Option<i64>,
    /// Where `iocurve mark` reaches the run (None: it could not be opened; the run said why).
    marks: Option<crate::marks::MarkEndpoint>,
    replays: &'a crate::replay::Replays,
    /// `--write-iolog` (None again once writing it failed: the run ends with that error).
    iolog: Option<crate::iolog::RunLog>,
}

/// Which workload a step belongs to.
struct WorkloadAt<'w> {
    w: &'w Workload,
    /// Its place in the run's queue (from 0), and the queue's length.
    index: usize,
    of: usize,
    workload_id: i64,
    /// A concurrent step's members, and their workloads' rows in the store.
    members: &'w [Workload],
    member_ids: Vec<i64>,
}

/// A workload's ramp as it runs.
struct Ramping {
    ramp: Ramp,
    /// `threads = 0` where the threads share the I/Os: chosen step by step from what the
    /// threads of the step before used (threads.rs).
    auto: Option<AutoThreads>,
    /// The steps kept so far.
    steps: Vec<StepResult>,
    /// A concurrent step's: each member's steps kept so far.
    member_steps: Vec<Vec<StepResult>>,
    /// Why a rate ramp ended before its last step (stop_at_*, an overload), and what the run
    /// changed of the plan (a frontend capped on a small target).
    notes: Vec<String>,
}

/// What a step means for what runs next.
enum StepEnd {
    /// The ramp goes on (or ends by itself: a rate ramp's stop rule drops its steps left).
    Next,
    /// The run stops after this step (an error, the store, an abort).
    StopRun,
}

impl Run<'_, '_> {
    pub(crate) fn execute(
        self,
        target_infos: Vec<TargetInfo>,
        backend_note: Option<String>,
        label: &str,
        sla: &Sla,
    ) -> Outcome {
        let Run { plan, cluster, store, observers, cancel, reclaim_on, replays, iolog } = self;
        let host = host_info(host::facts(), plan, backend_note, cluster);
        let planned_hosts = cluster.hosts();
        let mut s = Session {
            plan,
            cluster,
            store,
            observers,
            cancel,
            sla,
            th: Thresholds::default(),
            target_paths: target_infos.iter().map(|t| t.path.clone()).collect(),
            target_infos,
            host,
            planned_hosts,
            losses: Vec::new(),
            error: None,
            output_cut_noted: false,
            data_checks: Vec::new(),
            workloads: Vec::new(),
            run_id: None,
            marks: None,
            replays,
            iolog,
        };
        let started_unix_ns = iocurve_stats::date::unix_ns();
        let started_at = iocurve_stats::date::rfc3339_ns(started_unix_ns);
        let run_id = s.begin(label, &started_at);
        s.run_id = run_id;
        if let Some(id) = run_id {
            match crate::marks::MarkEndpoint::start(s.store.path(), id, &plan.name, started_unix_ns) {
                Ok(m) => s.marks = Some(m),
                Err(e) => s.observers.event(&RunEvent::NoMarks(e)),
            }
        }
        // A workload with a curve adds its rate ramp right after it, once its maximum is known;
        // one with sla_search adds its search after it, a bisection over rate steps.
        // A concurrent step runs at the place of its first member.
        let mut queue: Vec<Queued> = plan.units().into_iter().map(|(w, members)| (w, None, None, members)).collect();
        let mut next = 0;
        while let Some(run_id) = run_id
            && next < queue.len()
        {
            let (w, search, seen, members) = queue[next].clone();
            let at = WorkloadAt {
                w: &w,
                index: next,
                of: queue.len(),
                workload_id: 0,
                members: &members,
                member_ids: Vec::new(),
            };
            next += 1;
            let (follow, stop) = s.run_workload(run_id, at, search, seen);
            for (k, q) in follow.into_iter().enumerate() {
                queue.insert(next + k, q);
            }
            if stop || s.cancel.is_cancelled() {
                break;
            }
        }
        let mut reclaims = Vec::new();
        if let (Some(run_id), Some((targets, stuck_after))) = (run_id, reclaim_on)
            && !plan.reclaim.is_empty()
            && s.error.is_none()
            && !s.cancel.is_cancelled()
        {
            let (done, error) = crate::reclaim::run_all(plan, targets, s.cancel.flag(), stuck_after, s.observers);
            for (i, r) in done.iter().enumerate() {
                if let Err(e) = s.store.add_reclaim(run_id, i as u32, &serde_json::to_string(r).unwrap_or_default()) {
                    s.error.get_or_insert(store_error(e));
                }
            }
            reclaims = done;
            if let Some(e) = error {
                s.error.get_or_insert(e);
            }
        }
        if let Some(log) = s.iolog.take()
            && let Err(e) = log.finish()
        {
            s.error.get_or_insert(e);
        }
        s.finish(started_at, reclaims)
    }
}

impl Session<'_, '_> {
    /// The run into the store (None when the store refused it: the run ends with its error).
    fn begin(&mut self, label: &str, started_at: &str) -> Option<i64> {
        let new_run = NewRun {
            label: label.to_string(),
            plan_name: self.plan.name.clone(),
            started_at: started_at.to_string(),
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            hostname: self.host.facts.hostname.clone(),
            backend: self.host.backend.clone(),
            targets: self.target_paths.join(", "),
            host_json: serde_json::to_string(&self.host).unwrap_or_default(),
            targets_json: serde_json::to_string(&self.target_infos).unwrap_or_default(),
            plan_json: serde_json::to_value(self.plan).unwrap_or_default().to_string(),
        };
        self.observers.event(&RunEvent::Header {
            version: env!("CARGO_PKG_VERSION").to_string(),
            plan: self.plan.name.clone(),
            host: Box::new(self.host.clone()),
            targets: self.target_infos.clone(),
        });
        match self.store.begin_run(&new_run) {
            Ok(id) => {
                tracing::info!(run = id, plan = %self.plan.source, targets = self.target_infos.len(), "run started");
                // Room for the writes that end the run, should the database's filesystem fill.
                self.store.keep_room();
                self.observers.run_started(id, label, &self.plan.name);
                Some(id)
            }
            Err(e) => {
                self.error = Some(store_error(e));
                None
            }
        }
    }

    /// Runs one workload's ramp; returns what follows it in the queue, and whether the run
    /// stops after it.
    fn run_workload(
        &mut self,
        run_id: i64,
        mut at: WorkloadAt,
        search: Option<Search>,
        seen: Option<threads::Seen>,
    ) -> (Vec<Queued>, bool) {
        let w = at.w;
        at.workload_id =
            match self.store.begin_workload(run_id, at.index, &w.name, &crate::together::stored_json(w, at.members)) {
                Ok(id) => id,
                Err(e) => {
                    self.error = Some(store_error(e));
                    return (Vec::new(), true);
                }
            };
        // A concurrent step's members: each a workload of its own in the store, beside it.
        for m in at.members {
            match self.store.begin_workload(run_id, at.index, &m.name, &serde_json::to_string(m).unwrap_or_default()) {
                Ok(id) => at.member_ids.push(id),
                Err(e) => {
                    self.error = Some(store_error(e));
                    return (Vec::new(), true);
                }
            }
        }
        // What a concurrent step writes is its members' data: each checked as a workload alone.
        let mut member_checks = Vec::new();
        for (m, &id) in at.members.iter().zip(&at.member_ids) {
            let Some(rows) = self.data_check(m, id) else { return (Vec::new(), true) };
            member_checks.push(rows);
        }
        let data_check = if at.members.is_empty() {
            let Some(rows) = self.data_check(w, at.workload_id) else { return (Vec::new(), true) };
            rows
        } else {
            Vec::new()
        };
        let mut notes: Vec<String> = Vec::new();
        if let Some(note) = frontend_note(w, &self.target_infos) {
            self.observers.event(&RunEvent::WorkloadNote { workload: w.name.clone(), note: note.clone() });
            notes.push(note);
        }
        // A replay: what its trace held that is no I/O, and hosts its split leaves idle.
        if let Some(l) = self.replays.get(&w.name) {
            for note in l.notes(w, self.cluster.hosts() as usize) {
                self.observers.event(&RunEvent::WorkloadNote { workload: w.name.clone(), note: note.clone() });
                notes.push(note);
            }
        }
        // (Not when an agent runs another back-end instead: its threads' figures would be that
        // back-end's; it gets 0, one per core, as before.)
        let shared = w.backend.facts().threads == ThreadModel::Shared && self.cluster.runs_everywhere(w.backend);
        // (Not for a concurrent step: each member's threads are its own.)
        let auto = (w.threads == 0 && shared && at.members.is_empty())
            .then(|| AutoThreads::following(self.cluster.cores(), seen));
        let mut r = Ramping {
            ramp: Ramp::new(w, search),
            auto,
            steps: Vec::new(),
            member_steps: vec![Vec::new(); at.members.len()],
            notes,
        };
        let (mut stop_run, mut skipped) = (false, None);
        while let Some((si, step)) = r.ramp.next_step() {
            // A host-count sweep's count none of whose hosts is left (lost, or a relay lost with
            // its whole group): no host takes their place, so its steps are skipped, said once.
            if let Some(n) = step.hosts
                && self.cluster.scales_of(&step).is_empty()
            {
                if skipped != Some(n) {
                    skipped = Some(n);
                    self.observers.warning(&format!(
                        "workload {}: none of the first {n} hosts is with the run any more: its steps on {n} hosts are skipped",
                        w.name
                    ));
                }
                continue;
            }
            if si > 0 && w.pause_s > 0.0 {
                self.observers.event(&RunEvent::Rest { workload: w.name.clone(), seconds: w.pause_s });
                self.cancel.sleep(Duration::from_secs_f64(w.pause_s));
            }
            if self.cancel.is_cancelled() {
                break;
            }
            match self.run_step(&at, si, step, &mut r) {
                StepEnd::Next => {}
                StepEnd::StopRun => {
                    stop_run = true;
                    break;
                }
            }
        }
        if r.steps.is_empty() {
            return (Vec::new(), stop_run);
        }
        let seen = r.auto.as_ref().and_then(AutoThreads::last);
        let member_steps = std::mem::take(&mut r.member_steps);
        let follow = self.finish_workload(&at, r.steps, data_check, r.notes, r.ramp.search(), stop_run);
        self.finish_members(&at, member_steps, member_checks);
        (follow.into_iter().map(|(f, search)| (f, search, seen, Vec::new())).collect(), stop_run)
    }

    /// What the data a writing workload makes compresses and deduplicates to, measured once per
    /// data pattern and block size and kept with the workload; None when the run must stop.
    fn data_check(&mut self, w: &Workload, workload_id: i64) -> Option<Vec<DataCheckRow>> {
        // Trims write no data.
        if w.write_pct() <= 0.0 {
            return Some(Vec::new());
        }
        let key = (w.data, w.max_bs(), w.dedupe_unit());
        let rows = match self.data_checks.iter().find(|(k, _)| *k == key) {
            Some((_, rows)) => rows.clone(),
            None => match crate::datameter::sample(w) {
                Ok(rows) => {
                    self.data_checks.push((key, rows.clone()));
                    rows
                }
                Err(e) => {
                    self.error = Some(e);
                    return None;
                }
            },
        };
        if !rows.is_empty()
            && let Err(e) = self.store.set_data_check(workload_id, &serde_json::to_string(&rows).unwrap_or_default())
        {
            self.error = Some(store_error(e));
            return None;
        }
        Some(rows)
    }

    /// Runs step `si` of a workload on the cluster, stores and analyses it, and says what runs
    /// next.
    fn run_step(&mut self, at: &WorkloadAt, si: usize, step: iocurve_plan::RampStep, r: &mut Ramping) -> StepEnd {
        let w = at.w;
        // A concurrent step's members at this step; the step counts the workers they run (one
        // each at the least: more than a ramp point below the number of members).
        let members = crate::together::at_step(at.members, &step);
        let step = if members.is_empty() {
            step
        } else {
            iocurve_plan::RampStep { workers: members.iter().map(|(_, n)| n).sum(), ..step }
        };
        let workers = step.workers;
        let (bs, shape) =
            (iocurve_analysis::workload_block_sizes(w), iocurve_analysis::shape(w, step.rate.is_some()).join(", "));
        let member_names: Vec<String> = at.members.iter().map(|m| m.name.clone()).collect();
        self.observers.step_starting(&StepAt {
            workload: &w.name,
            workload_index: at.index + 1,
            workloads: at.of,
            step_index: si + 1,
            steps: r.ramp.len(),
            workers,
            queue_depth: w.ramps_queue_depth().then_some(step.queue_depth),
            hosts: step.hosts,
            members: &member_names,
            rate: step.rate.or_else(|| step.speed.zip(self.replays.get(&w.name)).map(|(s, l)| l.mean_iops(s))),
            // (A replay's mean is in I/Os whatever its sizes.)
            sequential: w.pattern == Pattern::Sequential && step.speed.is_none(),
            replay_speed: step.speed,
            rested_s: if si > 0 { w.pause_s } else { 0.0 },
            bs: &bs,
            shape: &shape,
        });
        tracing::info!(workload = %w.name, workers, "step started");
        // A replay's step: its trace at the step's speed.
        let replay = step.speed.zip(self.replays.get(&w.name)).map(|(s, l)| (l.clone(), s));
        let load = threads::Load {
            outstanding: workers as u64 * step.queue_depth as u64,
            iops: match &replay {
                Some((l, s)) => l.mean_iops(*s),
                None => step.rate.map_or(0.0, |r| w.rate_iops(r)),
            },
            rate: step.rate.is_some() || replay.is_some(),
        };
        // At the step's queue depth (a `qd_ramp` step), with its threads where they are chosen;
        // a replay's timed to its trace.
        let mut chosen = w.at_step(&step);
        if let Some((l, s)) = &replay {
            chosen = l.timed(&chosen, *s);
        }
        if let Some(a) = &r.auto {
            chosen.threads = a.next(workers, load) as u32;
        }
        let w_step = &chosen;
        let earlier = self.losses.len();
        let replay = replay.as_ref().map(|(l, s)| (&**l, *s));
        let (outcome, step_id, unstored, mut member_steps) = self.measure(at, si, step, (w_step, replay), &members);
        match outcome {
            Ok(mut rec) => {
                if !self.output_cut_noted
                    && let Some(why) = self.observers.lost()
                {
                    self.output_cut_noted = true;
                    rec.notes.push(("output_closed".into(), why));
                }
                // On fewer hosts than planned because of earlier losses: which, where.
                if rec.hosts < rec.planned_hosts && earlier > 0 {
                    let why = fewer_hosts_message(rec.hosts, rec.planned_hosts, &self.losses[..earlier]);
                    rec.notes.push((FEWER_HOSTS.into(), why));
                }
                let whole = unstored.is_none();
                // A concurrent step keeps in flight what its members keep, each at its depth.
                if !member_steps.is_empty() {
                    let each = |m: &crate::recorder::MemberStep| {
                        m.rec
                            .outstanding
                            .unwrap_or(m.rec.workers as u64 * m.rec.queue_depth as u64 * rec.hosts.max(1) as u64)
                    };
                    rec.outstanding = Some(member_steps.iter().map(each).sum());
                }
                if !self.read_back(w, workers, step_id, unstored, &mut rec) {
                    return StepEnd::StopRun;
                }
                // A concurrent step's members: read back as the step (only when all of it was
                // stored), and analysed each as a workload's step.
                if whole && !self.members_read_back(&rec, &mut member_steps) {
                    return StepEnd::StopRun;
                }
                if whole {
                    for (k, ms) in member_steps.iter().enumerate().filter(|(_, ms)| !ms.rec.intervals.is_empty()) {
                        let m = &at.members[k];
                        let s = iocurve_analysis::analyze_step_on(
                            &ms.rec,
                            m.pattern == Pattern::Sequential,
                            &self.th.for_workload(m),
                            &self.target_paths,
                        );
                        r.member_steps[k].push(s);
                    }
                }
                self.analysed(at, step, rec, load, r)
            }
            Err(e) => {
                tracing::warn!(workload = %w.name, workers, error = %e, "step failed");
                self.error = Some(e);
                StepEnd::StopRun
            }
        }
    }

    /// The step on the cluster, its intervals stored as they come: its record (or why there is
    /// none), its id in the store, and why the store refused intervals, if it did. Hosts lost
    /// during it are marked, in the store at once.
    fn measure(
        &mut self,
        at: &WorkloadAt,
        si: usize,
        step: iocurve_plan::RampStep,
        (w_step, replay): (&Workload, crate::replay::ReplayAt),
        members: &[(Workload, u32)],
    ) -> (Result<StepRecord, Error>, Option<i64>, Option<String>, Vec<crate::recorder::MemberStep>) {
        let w = at.w;
        let mut rec = Recorder {
            marks: self.marks.as_ref(),
            observers: &mut *self.observers,
            store: &mut *self.store,
            workload_id: at.workload_id,
            step_idx: si,
            step_id: None,
            members: crate::together::member_steps(members, &at.member_ids, &self.cluster.host_scales_of(&step)),
            error: None,
        };
        let earlier = self.losses.len();
        // A host-count sweep's step is planned on its count of hosts: its smaller steps are
        // not hosts lost.
        let planned = step.hosts.unwrap_or(self.planned_hosts);
        let outcome = self
            .cluster
            .run_step((w_step, members, replay), step, planned, &self.plan.faults, &mut rec, self.cancel)
            .map(|m| {
                let start_ns = m.merged.measured_from_unix_ns.map(|t| t - (w_step.warmup_s * 1e9) as i64);
                for l in m.losses {
                    let loss = HostLoss {
                        at: start_ns.map_or_else(time::now_rfc3339, |t| {
                            iocurve_stats::date::rfc3339_ns(t.saturating_add((l.into_step_s * 1e9) as i64))
                        }),
                        workload: w.name.clone(),
                        workload_index: at.index,
                        step: si,
                        workers: step.workers,
                        into_step_s: l.into_step_s,
                        why: l.why,
                    };
                    mark_lost(&mut self.host, &l.address, &loss);
                    self.losses.push((l.address, loss));
                }
                let mut merged = m.merged;
                if let Some(log) = self.iolog.as_mut() {
                    let left_out: u64 = m.iolog.iter().map(|h| h.left_out).sum();
                    if left_out > 0 {
                        merged.notes.push((
                            IOLOG_LEFT_OUT.into(),
                            format!(
                                "the I/O log lacks {left_out} of this step's I/Os: a host keeps at most {} a step",
                                iocurve_engine::iolog::MAX_LOGGED_IOS
                            ),
                        ));
                    }
                    if let Err(e) = log.add_step(m.iolog) {
                        self.error.get_or_insert(e);
                        self.iolog = None;
                    }
                }
                merged
            });
        let (step_id, store_err, member_steps) = (rec.step_id, rec.error, rec.members);
        // Stored as it happens: a run killed later still marks the loss.
        if self.losses.len() > earlier
            && let Some(run_id) = self.run_id
            && let Err(e) = self.store.set_host_json(run_id, &serde_json::to_string(&self.host).unwrap_or_default())
        {
            self.error.get_or_insert(store_error(e));
        }
        // The store refused an interval (full, gone read-only): the step's measured intervals
        // after it are lost to the database, but those stored are kept — in the result and the
        // JSON too (issue 36, finding 5: the JSON had no workloads although intervals were
        // stored). The run ends after this step with the store's error.
        let mut unstored = None;
        let outcome = outcome.and_then(|r| match store_err {
            Some(e) if step_id.is_some() => {
                unstored = Some(e.to_string());
                self.error.get_or_insert(store_error(e));
                Ok(r)
            }
            Some(e) => Err(store_error(e)),
            None => Ok(r),
        });
        (outcome, step_id, unstored, member_steps)
    }

    /// A concurrent step's members read back as the step was (`read_back`): each ended as the
    /// step did, its intervals' list from the store. False: the store failed, the run stops.
    fn members_read_back(&mut self, step: &StepRecord, members: &mut [crate::recorder::MemberStep]) -> bool {
        for m in members {
            m.rec.interrupted = step.interrupted;
            m.rec.aborted.clone_from(&step.aborted);
            let Some(id) = m.step_id else { continue };
            if let Err(e) = self.store.end_step(id, &m.rec).and_then(|()| self.store.fill_intervals(id, &mut m.rec)) {
                self.error = Some(store_error(e));
                return false;
            }
        }
        true
    }

    /// The step counted its intervals as they were stored; its list comes back from the
    /// store, so that a long step's memory stays flat (issue 21). Without it the step's figures
    /// would rest on its last few intervals: it is not analysed, and the run ends with the
    /// store's error (false).
    fn read_back(
        &mut self,
        w: &Workload,
        workers: u32,
        step_id: Option<i64>,
        unstored: Option<String>,
        r: &mut StepRecord,
    ) -> bool {
        let read_back = match (step_id, &unstored) {
            // Nothing more can be written: what was stored is read back.
            (Some(id), Some(why)) => {
                let measured = r.measured;
                let read = self.store.fill_stored_intervals(id, r);
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
            (Some(id), None) => self.store.end_step(id, r).and_then(|()| self.store.fill_intervals(id, r)),
            (None, _) => Ok(()),
        };
        if let Err(e) = read_back {
            tracing::warn!(workload = %w.name, workers, error = %e, "step not read back");
            self.error = Some(store_error(e));
            return false;
        }
        true
    }

    /// The step analysed and told; what it means for the ramp (a search's next probe, a rate
    /// ramp's stop rule) and for the run (an abort, an error).
    fn analysed(
        &mut self,
        at: &WorkloadAt,
        step: iocurve_plan::RampStep,
        r: StepRecord,
        load: threads::Load,
        ramping: &mut Ramping,
    ) -> StepEnd {
        let (w, workers) = (at.w, step.workers);
        if r.intervals.is_empty() && r.drain.stuck > 0 {
            // No interval to flag: the step is not kept, so say it here.
            self.observers.warning(&format!(
                "{} at {workers} workers: {} I/Os were still outstanding {:.1} s after the stop (oldest {:.1} s) and were given up as stuck",
                w.name,
                r.drain.stuck,
                r.drain.wait_ns as f64 / 1e9,
                r.drain.stuck_age_ns as f64 / 1e9
            ));
        }
        let s = iocurve_analysis::analyze_step_on(
            &r,
            w.pattern == Pattern::Sequential,
            &self.th.for_workload(w),
            &self.target_paths,
        );
        if let Some(a) = ramping.auto.as_mut() {
            // The CPU went into the I/Os achieved, whatever a rate step's target.
            let seen = threads::Load { iops: s.iops, ..load };
            a.seen(r.threads, seen, r.io_cpu, !r.intervals.is_empty());
        }
        tracing::info!(workload = %w.name, workers, iops = s.iops, flags = s.flags.len(), "step finished");
        self.observers.step_finished(w.step_seconds(), &s);
        // A search's probe passes when it kept its schedule within the SLA.
        let passed = !r.intervals.is_empty() && s.rate.as_ref().is_some_and(|x| x.sustained) && self.sla.admits(&s);
        let ends = ramping.ramp.measured(w, step, &s, passed);
        if !r.intervals.is_empty() {
            ramping.steps.push(s);
        }
        if let Some(why) = &r.aborted {
            // Kept like every step: the run ends after it, with status `aborted`.
            self.error.get_or_insert(if crate::coordinator::all_lost(why) {
                Error::HostsLost(why.clone())
            } else {
                Error::Aborted(why.clone())
            });
        }
        if self.error.is_some() {
            return StepEnd::StopRun;
        }
        if let Some(why) = ends {
            self.observers.event(&RunEvent::WorkloadNote { workload: w.name.clone(), note: why.clone() });
            ramping.notes.push(why);
        }
        StepEnd::Next
    }

    /// A workload's steps analysed together, told and kept; returns what follows it.
    fn finish_workload(
        &mut self,
        at: &WorkloadAt,
        steps: Vec<StepResult>,
        data_check: Vec<DataCheckRow>,
        ramp_notes: Vec<String>,
        search: Option<&Search>,
        stop_run: bool,
    ) -> Vec<(Workload, Option<Search>)> {
        let w = at.w;
        let mut r = iocurve_analysis::analyze_workload(w, steps, self.sla);
        r.data_check = data_check;
        r.members = at.members.iter().map(|m| m.name.clone()).collect();
        // What the run, not the figures, knows about the workload: kept in the store beside
        // its steps (the analysis of a stored run cannot derive it).
        let mut said = ramp_notes;
        if let Some(sr) = search {
            let cut = stop_run || self.cancel.is_cancelled();
            let unit = if w.pattern == Pattern::Sequential { "MB/s" } else { "IOPS" };
            let line = sr.describe(&self.sla.describe(), unit, cut);
            self.observers.event(&RunEvent::WorkloadNote { workload: w.name.clone(), note: line.clone() });
            said.push(line);
        }
        let follow = follow_ups(w, &r, !stop_run && !self.cancel.is_cancelled());
        for line in &follow.told {
            self.observers.event(&RunEvent::FollowUp(line.clone()));
        }
        said.extend(follow.kept);
        if !said.is_empty()
            && let Err(e) = self.store.set_workload_notes(at.workload_id, &said.join("\n"))
        {
            self.error.get_or_insert(store_error(e));
        }
        r.notes.extend(said);
        self.observers.workload_finished(&r);
        self.workloads.push(r);
        follow.next
    }

    /// A concurrent step's members, each analysed as a workload of its own over its steps, told
    /// and kept after the step's total.
    fn finish_members(&mut self, at: &WorkloadAt, steps: Vec<Vec<StepResult>>, checks: Vec<Vec<DataCheckRow>>) {
        for ((m, steps), check) in at.members.iter().zip(steps).zip(checks) {
            if steps.is_empty() {
                continue;
            }
            let mut r = iocurve_analysis::analyze_workload(m, steps, self.sla);
            r.data_check = check;
            self.observers.workload_finished(&r);
            self.workloads.push(r);
        }
    }

    /// The run's status into the store, and its result.
    fn finish(self, started_at: String, reclaims: Vec<iocurve_analysis::ReclaimResult>) -> Outcome {
        let Session {
            plan,
            store,
            observers,
            cancel,
            sla,
            host,
            target_infos,
            workloads,
            run_id,
            mut error,
            marks,
            ..
        } = self;
        // No mark after this: the endpoint closes (its socket goes), and the marks not yet told
        // are told before the summary.
        if let Some(m) = marks {
            let late = m.drain();
            drop(m);
            for (mark, after_start_s) in late {
                observers.event(&RunEvent::Mark { mark, after_start_s });
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
        tracing::info!(run = run_id.unwrap_or_default(), status = status.as_str(), reason = ?error.as_ref().map(|e| e.to_string()), "run finished");
        let facts = RunFacts {
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            started_at,
            finished_at,
            status,
            status_reason: error.as_ref().map(|e| e.to_string()),
            host,
            sla: *sla,
            targets: target_infos,
            plan: serde_json::to_value(plan).unwrap_or_default(),
            // Set after the run, when `--verify-final` read everything back.
            final_verification: None,
            reclaims,
            // Those set while it ran went to the store as they came (the mark endpoint).
            marks: run_id.and_then(|id| store.marks(id).ok()).unwrap_or_default(),
            // Imported after the run (`iocurve array`); none yet.
            array: Vec::new(),
        };
        let result = RunResult::assemble(facts, workloads);
        observers.run_finished(&result);
        Outcome { result, run_id, error }
    }
}

/// The back-ends a host runs the plan's workloads on: each one's fallback where the host
/// lacks it.
fn backend_names(plan: &Plan, here: &Availability) -> String {
    let mut backends: Vec<&str> = plan.workloads.iter().map(|w| here.resolve(w.backend).0.name()).collect();
    backends.dedup();
    if backends.is_empty() {
        // Reclaim steps alone: their passes make blocking calls.
        return "none (reclaim steps: blocking calls)".into();
    }
    backends.join("+")
}

/// The coordinator's facts and, for a multi-host run, each agent's own.
fn host_info(facts: host::HostFacts, plan: &Plan, backend_note: Option<String>, cluster: &Cluster) -> HostInfo {
    let agents = cluster
        .agents()
        .map(|(address, h)| {
            let there = iocurve_net::wire::availability(h);
            let notes = there.notes_at(plan.workloads.iter().map(|w| w.backend), "on this agent");
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
