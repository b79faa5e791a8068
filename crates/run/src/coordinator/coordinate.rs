//! A step on every agent at once: one start moment on every clock, the agents' events followed
//! (heartbeats, lost agents, Ctrl-C), their intervals merged as they arrive.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How a step's end says that no host is left: the run ends with exit code 3 (hosts were lost),
/// not as the tool failing ([`all_lost`]).
const ALL_LOST: &str = "every agent was lost";

/// True for a step's abort reason that says every host was lost.
pub(crate) fn all_lost(why: &str) -> bool {
    why.starts_with(ALL_LOST)
}

use iocurve_engine::{StepObserver, StepProgress};
use iocurve_plan::{Fault, TargetGroup, Workload};
use iocurve_stats::{Drain, ErrorCounts, HostClock, HostRecord, IntervalStats, IoCpu, StepRecord, UNKNOWN_TARGET};

use super::client::{Remote, failed, measure_clocks, refusal, wire_groups};
use super::merge::{IntervalMerger, Part};
use iocurve_net::{NetError, pb, unix_ns, wire};

/// How long an agent gets to take a step's request: it answers at once (opening targets that
/// are open already), the step itself starts at the agreed moment.
const REQUEST_DEADLINE: Duration = Duration::from_secs(5);

/// Pings per agent to measure its clock before and after every step.
const CLOCK_PINGS: usize = 4;

/// An agent's clock that moved more than this (beyond the measurements' own uncertainty)
/// since it was last measured gets a warning.
const CLOCK_MOVED_NS: i64 = 1_000_000;

/// How long an agent gets to take a Stop (it sets a flag and answers).
pub(crate) const STOP_DEADLINE: Duration = Duration::from_secs(2);

/// A step on every agent: the merged record (with each host's own in `per_host`). The records
/// count every interval but hold the figures of only the last [`iocurve_stats::steady::WINDOW`]
/// ([`StepRecord::count_interval`]): the observer stored them, and `Store::fill_intervals` gives
/// the list back.
pub struct MultiStep {
    pub merged: StepRecord,
    /// Agents lost during the step, by index.
    pub lost: Vec<usize>,
    /// The same agents: who, when and why, for the run's record of its hosts.
    pub losses: Vec<Lost>,
    /// The longest any agent took from the request to being set up (ns): the next step's lead
    /// is sized from it.
    pub setup_ns: i64,
}

/// An agent lost during a step.
#[derive(Debug, Clone, PartialEq)]
pub struct Lost {
    /// As given (`HOST:PORT`).
    pub address: String,
    /// Seconds into the step (0: before it started).
    pub into_step_s: f64,
    /// Why the coordinator gave it up.
    pub why: String,
}

/// The parameters of a step sent to every agent.
pub struct StepSpec<'a> {
    pub workload: &'a Workload,
    pub workers: u32,
    /// A rate step: the IOPS of the whole run, shared out among the agents.
    pub rate_iops: Option<f64>,
    /// Per agent, its target groups (with the plan's weights).
    pub targets: &'a [Vec<TargetGroup>],
    pub scratch_size: u64,
    /// The run's key for the lock on file targets it writes (`iocurve_engine::safety::lock`).
    pub run_key: u32,
    /// `--verify-journal`: agents journal the step's verifying writes.
    pub verify_journal: bool,
    pub threads: u32,
    pub backend: &'a str,
    pub faults: &'a [Fault],
    /// How long before the start the agents get the request (covers connection set-up).
    pub lead: Duration,
    /// A lost agent ends the step with an error (else the others carry on).
    pub abort_on_host_loss: bool,
    /// An agent that sends nothing (its progress events are its heartbeat) for this long once
    /// its step should have started is lost.
    pub silence: Duration,
    /// The hosts the step is planned on: all the hosts the run started its steps with, lost
    /// ones included (the step's record keeps it beside the hosts that ran it).
    pub planned_hosts: u32,
}

/// The coordinator's view of the agents while a step runs.
struct Hosts<'a> {
    spec: &'a StepSpec<'a>,
    addrs: Vec<String>,
    records: Vec<Option<StepRecord>>,
    started: Vec<i64>,
    /// Latest live totals per agent.
    progress: Vec<pb::Progress>,
    /// The agents' intervals until each is merged.
    merger: IntervalMerger,
    done: Vec<bool>,
    /// What each agent's step did with the I/Os outstanding at its end, and its notes.
    drain: Vec<Drain>,
    /// Each agent's own word on whether its step ran to its end (a step that ended once
    /// steady, `steady_state = "snia"`, ran fewer intervals without being interrupted).
    interrupted: Vec<bool>,
    notes: Vec<Vec<(String, String)>>,
    unmeasured: Vec<ErrorCounts>,
    /// CPU each agent's I/O threads used over the measured intervals.
    io_cpu: Vec<Option<IoCpu>>,
    /// An agent's step ended by `on_error = abort`: why.
    aborted: Option<String>,
    /// Seconds into the step when an agent was lost.
    lost: Vec<Option<f64>>,
    /// Why each lost agent was given up.
    why: Vec<String>,
    /// Warnings for the observer, handed on from the step's loop.
    warnings: Vec<String>,
    /// When an agent counts as silent, unless it sends something before.
    deadline: Vec<Instant>,
    failure: Option<NetError>,
    t0: Instant,
}

impl Hosts<'_> {
    /// Agent `h` is gone (killed, cut off, silent): the others carry on unless told otherwise.
    fn lose(&mut self, h: usize, why: &str) {
        if self.done[h] {
            return;
        }
        self.done[h] = true;
        let into = self.t0.elapsed().as_secs_f64() - self.spec.lead.as_secs_f64();
        let at = into.max(0.0);
        self.lost[h] = Some(at);
        self.why[h] = why.to_string();
        let addr = &self.addrs[h];
        let when = if into <= 0.0 { "before the step started".to_string() } else { format!("{at:.1} s into the step") };
        if self.spec.abort_on_host_loss {
            // Like `on_error = abort`: the others stop now, what they measured is kept, and the
            // run ends after this step.
            self.aborted.get_or_insert(format!("agent {addr} lost {when} ({why}); --on-host-loss abort ends the run"));
        } else {
            tracing::warn!(agent = %addr, at_s = at, why, "agent lost; the others carry on");
            self.warnings.push(format!("agent {addr} lost {when} ({why}); the others carry on"));
        }
    }

    /// The agents lost, by index.
    fn lost_indices(&self) -> Vec<usize> {
        self.lost.iter().enumerate().filter_map(|(i, l)| l.map(|_| i)).collect()
    }

    /// The agents lost: who, when, why.
    fn losses(&self) -> Vec<Lost> {
        let lost = |(i, l): (usize, &Option<f64>)| {
            l.map(|at| Lost { address: self.addrs[i].clone(), into_step_s: at, why: self.why[i].clone() })
        };
        self.lost.iter().enumerate().filter_map(lost).collect()
    }

    /// The agents' live totals added up; the step is as far as its furthest agent.
    fn live(&self, intervals_done: u32) -> StepProgress {
        let p = &self.progress;
        let elapsed_s = p.iter().map(|p| p.elapsed_s).fold(0.0, f64::max);
        StepProgress {
            elapsed_s,
            planned_s: self.spec.workload.step_seconds(),
            warmup: p.iter().any(|p| p.warmup) || elapsed_s < self.spec.workload.warmup_s,
            ops: p.iter().map(|p| p.ops).sum(),
            bytes: p.iter().map(|p| p.bytes).sum(),
            lat_sum_ns: p.iter().map(|p| p.lat_sum_ns).sum(),
            intervals_done,
            // An agent done (or lost) has nothing out any more, whatever it said last.
            inflight: p.iter().zip(&self.done).filter(|(_, done)| !**done).map(|(p, _)| p.inflight).sum(),
        }
    }
}

/// Errors of agent `h` name its targets by their place in the run's list.
fn shift_targets(s: &mut IntervalStats, offset: u32) {
    for d in [&mut s.read, &mut s.write] {
        for e in &mut d.errors.0 {
            if e.0 != UNKNOWN_TARGET {
                e.0 += offset;
            }
        }
    }
}

/// The faults agent `h` injects, as JSON: those on every target, and those on one of its
/// targets — a fault on one host's target (a failing path of that host) leaves the others
/// alone. A fault whose target no host names goes to every agent, which refuses it by name.
fn faults_for(faults: &[Fault], targets: &[Vec<TargetGroup>], h: usize) -> String {
    let names = |k: usize| targets.get(k).into_iter().flatten().flat_map(|g| g.targets.iter());
    // A glob names its targets only once the agent expands it: the agent decides.
    let has = |k: usize, p: &str| names(k).any(|t| t == p || iocurve_plan::is_glob(t));
    let mine: Vec<&Fault> = faults
        .iter()
        .filter(|f| match &f.target {
            None => true,
            Some(p) => has(h, p) || !(0..targets.len()).any(|k| has(k, p)),
        })
        .collect();
    if mine.is_empty() { String::new() } else { serde_json::to_string(&mine).unwrap_or_default() }
}

/// Ends every agent's step after the same interval count, `want` at the least: asks each agent
/// first how far its threads are (changing nothing), then tells all of them the count after
/// the furthest interval any thread has entered — on several hosts a whole interval later, for
/// the request to arrive in (one host's own threads are kept together by the agent). A count
/// raised again later could find some threads stopped at the lower one already, so it is set
/// once. Returns the largest count an agent acknowledged; None when none was set (no agent ran
/// the step any more, or the plan's own end comes first).
async fn end_steps(agents: Vec<(super::client::Client, i64)>, want: u32, planned: u32) -> Option<u32> {
    let ask = |query: bool, intervals: u32| {
        let calls: Vec<_> = agents
            .iter()
            .map(|(client, key)| {
                let mut client = client.clone();
                let req = pb::EndAfterRequest { start_at_unix_ns: *key, intervals, query };
                tokio::spawn(async move { tokio::time::timeout(STOP_DEADLINE, client.end_after(req)).await })
            })
            .collect();
        async move {
            let mut replies = Vec::new();
            for c in calls {
                // An agent that cannot be told runs its planned intervals; the hosts' counts
                // then differ, which the step's notes say.
                if let Ok(Ok(Ok(reply))) = c.await
                    && reply.get_ref().running
                {
                    replies.push(reply.into_inner());
                }
            }
            replies
        }
    };
    let furthest = ask(true, 0).await.iter().map(|r| r.entered).max()?;
    let margin = u32::from(agents.len() > 1);
    let want = want.max(furthest + margin);
    if want >= planned {
        return None;
    }
    ask(false, want).await.iter().map(|r| r.intervals).max()
}

/// Runs a step on every agent at one moment and merges the intervals as they arrive: interval
/// `k` goes to `obs` (each host's part first, then the merged one) once every host still there
/// reported it. `stop` (Ctrl-C) asks every agent to end its step at once (the unfinished
/// interval is dropped).
// Issue 38: still over the 150 lines `too_many_lines` allows; the step session with one handler per event (part 1) takes it apart.
#[allow(clippy::too_many_lines)]
pub async fn run_step(
    remotes: &mut [Remote],
    spec: &StepSpec<'_>,
    obs: &mut dyn StepObserver,
    stop: &AtomicBool,
) -> Result<MultiStep, NetError> {
    let w = spec.workload;
    let json = serde_json::to_string(w).map_err(|e| NetError::Failed(e.to_string()))?;
    // Every agent's clock again, right before the step: a clock stepped or drifted since the
    // last measurement would start its I/O off by that much, and the start spread computed
    // with the old offset could never show it (issue 15, finding 6).
    let mut clock_notes = Vec::new();
    let all = vec![true; remotes.len()];
    let before = tokio::select! {
        m = measure_clocks(remotes, &all, CLOCK_PINGS, REQUEST_DEADLINE) => m,
        _ = super::client::until_stopped(stop) => vec![None; remotes.len()],
    };
    for (r, m) in remotes.iter_mut().zip(before) {
        let Some((offset_ns, rtt_ns)) = m else {
            if !stop.load(Ordering::Relaxed) && !r.in_process {
                clock_notes.push(format!(
                    "agent {}'s clock could not be measured before the step: its last offset ({:+.3} ms) is used",
                    r.addr,
                    r.offset_ns as f64 / 1e6
                ));
            }
            continue;
        };
        let moved = offset_ns.saturating_sub(r.offset_ns);
        if moved.saturating_abs() > r.rtt_ns.max(rtt_ns).saturating_add(CLOCK_MOVED_NS) {
            clock_notes.push(format!(
                "agent {}'s clock moved {:+.1} ms against this host's since it was last measured: its step still starts with the others (offsets are measured before every step)",
                r.addr,
                moved as f64 / 1e6
            ));
        }
        (r.offset_ns, r.rtt_ns) = (offset_ns, rtt_ns);
    }
    let start_at = unix_ns() + spec.lead.as_nanos() as i64;
    // Every agent gets its request at once (one slow agent delays no other's), each within a
    // deadline: an agent that cannot take it is lost before the step starts.
    let mut calls = Vec::new();
    let hosts = remotes.len() as u32;
    // Each agent's start moment on its own clock: it names the step in later requests.
    let keys: Vec<i64> = remotes.iter().map(|r| start_at.saturating_add(r.offset_ns)).collect();
    for (h, (r, targets)) in remotes.iter().zip(spec.targets).enumerate() {
        let req = pb::StepRequest {
            workload_json: json.clone(),
            workers: spec.workers,
            groups: wire_groups(targets),
            start_at_unix_ns: keys[h],
            scratch_size: spec.scratch_size,
            threads: spec.threads,
            backend: spec.backend.into(),
            faults_json: faults_for(spec.faults, spec.targets, h),
            rate_iops: spec.rate_iops.unwrap_or(0.0),
            host: h as u32,
            hosts,
            run_key: spec.run_key,
            verify_journal: spec.verify_journal,
        };
        let mut client = r.client.clone();
        calls.push(tokio::spawn(async move { tokio::time::timeout(REQUEST_DEADLINE, client.run_step(req)).await }));
    }
    let n = remotes.len();
    let intervals = w.intervals as usize;
    let t0 = Instant::now();
    let mut st = Hosts {
        spec,
        addrs: remotes.iter().map(|r| r.addr.clone()).collect(),
        records: vec![None; n],
        started: vec![0; n],
        progress: vec![pb::Progress::default(); n],
        merger: IntervalMerger::new(intervals, n),
        done: vec![false; n],
        drain: vec![Drain::default(); n],
        interrupted: vec![true; n],
        notes: vec![Vec::new(); n],
        unmeasured: vec![ErrorCounts::default(); n],
        io_cpu: vec![None; n],
        aborted: None,
        lost: vec![None; n],
        why: vec![String::new(); n],
        warnings: Vec::new(),
        deadline: vec![t0 + spec.lead + spec.silence; n],
        failure: None,
        t0,
    };
    st.warnings.extend(clock_notes);
    let mut streams = Vec::new();
    for (h, call) in calls.into_iter().enumerate() {
        let answer = call.await.map_err(|e| NetError::Failed(format!("sending the step request: {e}")))?;
        match answer {
            Ok(Ok(s)) => streams.push(Some(s.into_inner())),
            Ok(Err(e)) if refusal(&e) => return Err(failed(&remotes[h].addr, "step", e)),
            Ok(Err(e)) => {
                st.lose(h, &format!("it did not take the step: {}", iocurve_net::printable(e.message())));
                streams.push(None);
            }
            Err(_) => {
                st.lose(h, &format!("it did not take the step within {} s", REQUEST_DEADLINE.as_secs()));
                streams.push(None);
            }
        }
    }
    if let Some(why) = st.aborted.take() {
        // `--on-host-loss abort`: nothing of this step ran; the others are not started.
        return Err(NetError::Aborted(why));
    }
    if st.done.iter().all(|&d| d) {
        return Err(NetError::Lost(format!("{ALL_LOST} before the step started: {}", st.warnings.join("; "))));
    }
    // The hosts the step runs on: those that took it.
    let hosts = streams.iter().filter(|s| s.is_some()).count() as u32;
    let mut merged: Option<StepRecord> = None;
    let mut setup_ns = 0i64;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(usize, Result<Option<pb::StepEvent>, tonic::Status>)>(64);
    let mut readers = Vec::new();
    for (i, s) in streams.into_iter().enumerate() {
        let Some(mut s) = s else {
            readers.push(tokio::spawn(async {}));
            continue;
        };
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
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut stop_sent = false;
    // `steady_state = "snia"`: judged here on the merged intervals; the interval count every
    // agent was told to end after, once steady.
    let snia = w.steady_state == iocurve_plan::SteadyState::Snia;
    let sequential = w.pattern == iocurve_plan::Pattern::Sequential;
    let mut ending: Option<tokio::task::JoinHandle<Option<u32>>> = None;
    // Intervals each agent reported: an agent's own count, whether merged or not.
    let mut reported = vec![0usize; n];
    // `overload = abort-step` ended the step on one agent: it ends on every agent (the run
    // goes on with the next step, or ends its rate ramp, as on one host).
    let mut overloaded = false;
    // A single in-process agent is the local run itself: no per-host figures to keep apart.
    let per_host = !(n == 1 && remotes[0].in_process);
    while !st.done.iter().all(|&d| d) {
        for m in st.warnings.drain(..) {
            obs.warning(&m);
        }
        if !stop_sent && (stop.load(Ordering::Relaxed) || st.aborted.is_some() || overloaded) {
            stop_sent = true;
            for (h, r) in remotes.iter().enumerate() {
                if !st.done[h] {
                    // At once to every agent, each within a deadline. Best effort: an agent
                    // that cannot be told falls silent and is lost anyway.
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
                for (h, reader) in readers.iter().enumerate() {
                    if !st.done[h] && now > st.deadline[h] {
                        let why = format!("silent for {:.0} s", spec.silence.as_secs_f64());
                        st.lose(h, &why);
                        // Dropping its stream tells the agent, if it still listens, to stop.
                        reader.abort();
                    }
                }
                obs.progress(&st.live(st.merger.merged() as u32));
                continue;
            }
        };
        let Some((h, m)) = msg else { break };
        if st.done[h] {
            continue;
        }
        st.deadline[h] = Instant::now() + spec.silence;
        let event = match m {
            Ok(Some(e)) => e.event,
            Err(e) => {
                st.lose(h, &iocurve_net::printable(e.message()));
                None
            }
            Ok(None) => {
                st.lose(h, "the stream ended without a result");
                None
            }
        };
        match event {
            Some(pb::step_event::Event::Started(s)) => {
                st.started[h] = s.started_unix_ns - remotes[h].offset_ns;
                if s.ready_unix_ns > 0 && s.received_unix_ns > 0 {
                    setup_ns = setup_ns.max(s.ready_unix_ns - s.received_unix_ns);
                    let late = s.ready_unix_ns.saturating_sub(start_at.saturating_add(remotes[h].offset_ns));
                    if late > 1_000_000 && per_host {
                        st.warnings.push(format!(
                            "agent {} was set up {:.1} ms after the step's start moment (its set-up took {:.1} ms): it started late; the next step gives more lead",
                            remotes[h].addr,
                            late as f64 / 1e6,
                            (s.ready_unix_ns - s.received_unix_ns) as f64 / 1e6
                        ));
                    }
                }
                // A host's own record only where the result lists hosts: a local run's would
                // repeat the step's, interval by interval, for the whole run (issue 21).
                if per_host {
                    let mut own =
                        StepRecord::new(spec.workers, w.queue_depth, s.threads as usize, w.interval_s, s.sample_s);
                    own.rate_iops = spec.rate_iops;
                    st.records[h] = Some(own);
                }
                if merged.is_none() {
                    // Workers are per host, as published; the host count goes beside them.
                    let mut rec =
                        StepRecord::new(spec.workers, w.queue_depth, s.threads as usize, w.interval_s, s.sample_s);
                    rec.hosts = hosts;
                    rec.planned_hosts = spec.planned_hosts.max(hosts);
                    rec.rate_iops = spec.rate_iops;
                    // The first host to start times the samples; the others' spread is
                    // reported beside the step.
                    rec.measured_from_unix_ns = Some(st.started[h] + (w.warmup_s * 1e9) as i64);
                    obs.started(&rec);
                    merged = Some(rec);
                }
                if per_host {
                    let r = &remotes[h];
                    obs.host_started(h as u32, &r.addr, &r.hello.hostname, st.started[h], s.threads as usize);
                }
            }
            Some(pb::step_event::Event::Progress(p)) => st.progress[h] = p,
            Some(pb::step_event::Event::Interval(i)) => {
                let (idx, mut stats, cpu, dur) = wire::interval_from(&i)
                    .map_err(|e| NetError::Failed(format!("agent {}: bad interval: {e}", remotes[h].addr)))?;
                shift_targets(&mut stats, remotes[h].target_offset);
                reported[h] += 1;
                st.merger.add(h, idx as usize, Part { stats, cpu, duration_s: dur });
            }
            Some(pb::step_event::Event::Done(d)) => {
                st.done[h] = true;
                st.drain[h] = Drain {
                    late: d.late,
                    stuck: d.stuck,
                    stuck_age_ns: d.stuck_age_ns,
                    wait_ns: d.wait_ns,
                    faults_injected: d.late_faults,
                };
                st.interrupted[h] = d.interrupted;
                st.io_cpu[h] = d.io_cpu.as_ref().and_then(wire::io_cpu_from);
                let clean = iocurve_net::printable;
                st.notes[h] = d.notes.iter().map(|n| (clean(&n.code), clean(&n.message))).collect();
                for e in &d.unmeasured_errors {
                    let t = if e.target == UNKNOWN_TARGET { e.target } else { e.target + remotes[h].target_offset };
                    st.unmeasured[h].add(t, e.errno, e.count);
                }
                if !d.error.is_empty() {
                    let msg = format!("{}{}", remotes[h].who(), clean(&d.error));
                    st.failure.get_or_insert(if d.input { NetError::Input(msg) } else { NetError::Failed(msg) });
                }
                if d.notes.iter().any(|n| n.code == iocurve_engine::step::OVERLOADED) {
                    overloaded = true;
                }
                if d.aborted && st.aborted.is_none() {
                    // on_error = abort on this host: the others stop now too, and the run ends
                    // after this step with what every host measured.
                    st.aborted = Some(format!("{}{}", remotes[h].who(), clean(&d.abort_reason)));
                }
            }
            None => {}
        }
        // Hand on, in order, every interval all hosts still there reported.
        let lost: Vec<bool> = st.lost.iter().map(Option::is_some).collect();
        for m in st.merger.ready(&lost) {
            for (k, p) in m.parts {
                if per_host {
                    obs.host_interval(k as u32, m.index as u32, &p.stats, &p.cpu, p.duration_s);
                }
                if let Some(r) = st.records[k].as_mut() {
                    r.count_interval(p.stats, p.cpu, p.duration_s);
                }
            }
            obs.interval(m.index as u32, &m.all, &m.cpu, w.interval_s);
            // Counted, not held: the observers stored the interval, and the list grows with
            // the step's length (issue 21); the runner reads it back at the step's end.
            if let Some(merged) = merged.as_mut() {
                merged.count_interval(m.all, m.cpu, w.interval_s);
            }
        }
        if snia
            && ending.is_none()
            && let Some(rec) = merged.as_ref()
            && rec.measured < intervals
            && rec.is_steady(sequential)
        {
            // The interval running now completes (as on one host), and every interval an
            // agent has entered already; then every agent ends. Told on the side: the agents'
            // events go on being read meanwhile.
            let agents: Vec<_> = remotes
                .iter()
                .zip(&keys)
                .zip(&st.done)
                .filter(|(_, done)| !**done)
                .map(|((r, key), _)| (r.client.clone(), *key))
                .collect();
            tracing::info!(workload = %w.name, workers = spec.workers, after = rec.measured, "steady state reached on every host together");
            let want = rec.measured as u32 + 1;
            ending = Some(tokio::spawn(end_steps(agents, want, w.intervals)));
        }
    }
    for r in readers {
        r.abort();
    }
    let ended_after = match ending {
        Some(h) => h.await.ok().flatten(),
        None => None,
    };
    // Intervals some hosts ran and others did not are in no merged interval: their injected
    // faults still count (with the drain), so that every lost write verification finds is an
    // injected one.
    for (h, _, part) in st.merger.left_over() {
        st.drain[h].faults_injected += part.stats.faults_injected;
    }
    // And after it: an offset that changed during the step says the agent's clock moved while
    // it ran (its start and timeline are off by up to that much).
    // (Not after Ctrl-C: the user wants the run to end.)
    let here: Vec<bool> = st.lost.iter().map(|l| l.is_none() && !stop.load(Ordering::Relaxed)).collect();
    let after = measure_clocks(remotes, &here, CLOCK_PINGS, REQUEST_DEADLINE).await;
    for m in st.warnings.drain(..) {
        obs.warning(&m);
    }
    if let Some(f) = st.failure {
        return Err(f);
    }
    let Some(mut merged) = merged else {
        return match st.aborted {
            Some(why) => Err(NetError::Aborted(why)),
            None if st.lost.iter().all(Option::is_some) => {
                Err(NetError::Lost(format!("{ALL_LOST} before it started the step")))
            }
            // Ctrl-C before the start moment: a step with nothing in it, as a local run
            // stopped before its first interval ends.
            None if stop.load(Ordering::Relaxed) => {
                let mut empty = StepRecord::new(spec.workers, w.queue_depth, 0, w.interval_s, 1.0);
                empty.rate_iops = spec.rate_iops;
                empty.interrupted = true;
                Ok(MultiStep { merged: empty, lost: st.lost_indices(), losses: st.losses(), setup_ns })
            }
            None => Err(NetError::Failed("no agent started the step".into())),
        };
    };
    if st.lost.iter().all(Option::is_some) && st.aborted.is_none() {
        // What they measured before is kept; the run cannot go on.
        st.aborted = Some(format!("{ALL_LOST} during the step: the run cannot go on"));
    }
    // Fewer intervals than planned: interrupted, unless every host ended its step once steady.
    let steady_end = w.steady_state == iocurve_plan::SteadyState::Snia;
    let all_ended = st.interrupted.iter().zip(&st.lost).all(|(&i, l)| !i && l.is_none());
    merged.interrupted = merged.measured < intervals && !(steady_end && all_ended);
    // (A step stopped otherwise — Ctrl-C, an abort, an overload — ends apart by its nature.)
    if let Some(end) = ended_after.filter(|_| !stop_sent) {
        let counts: Vec<String> = (0..n)
            .filter(|&h| st.lost[h].is_none() && reported[h] != end as usize)
            .map(|h| format!("{} ran {}", remotes[h].addr, reported[h]))
            .collect();
        if !counts.is_empty() {
            merged.notes.push((
                "uneven_end".into(),
                format!(
                    "steady after the hosts' merged intervals, the hosts were to end after interval {end}, but {}: the step keeps the {} intervals every host ran",
                    counts.join(", "),
                    merged.measured
                ),
            ));
        }
    }
    merged.aborted = st.aborted.take();
    for (h, d) in st.drain.iter().enumerate() {
        merged.drain.merge(d);
        merged.unmeasured_errors.merge(&st.unmeasured[h]);
        merged.io_cpu = IoCpu::max(merged.io_cpu, st.io_cpu[h]);
        for (code, message) in &st.notes[h] {
            let message = if per_host { format!("{}: {message}", remotes[h].addr) } else { message.clone() };
            merged.notes.push((code.clone(), message));
        }
    }
    for (i, at) in st.lost.iter().enumerate() {
        let Some(at) = at else { continue };
        let message = if st.started[i] == 0 {
            format!(
                "agent {} was lost before the step started: the step ran on {} hosts, not {n}",
                remotes[i].addr,
                st.started.iter().filter(|&&t| t != 0).count()
            )
        } else {
            format!(
                "agent {} lost {at:.1} s into the step: from then on the figures come from the other hosts, so this step mixes host counts and enters no speed, optimum or maximum",
                remotes[i].addr
            )
        };
        merged.notes.push(("host_lost".into(), message));
    }
    let lost = st.lost_indices();
    let losses = st.losses();
    if per_host {
        merged.per_host = st
            .records
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                let mut record =
                    r.unwrap_or_else(|| StepRecord::new(spec.workers, w.queue_depth, 0, w.interval_s, 1.0));
                record.interrupted =
                    record.measured < intervals && !(steady_end && !st.interrupted[i] && st.lost[i].is_none());
                record.drain = st.drain[i];
                record.unmeasured_errors = st.unmeasured[i].clone();
                record.io_cpu = st.io_cpu[i];
                record.notes = st.notes[i].clone();
                HostRecord {
                    address: remotes[i].addr.clone(),
                    hostname: remotes[i].hello.hostname.clone(),
                    started_unix_ns: st.started[i],
                    lost_at_s: st.lost[i],
                    clock: HostClock {
                        offset_ns: remotes[i].offset_ns,
                        rtt_ns: remotes[i].rtt_ns,
                        offset_after_ns: after[i].map(|m| m.0),
                        rtt_after_ns: after[i].map_or(0, |m| m.1),
                    },
                    record,
                }
            })
            .collect();
    }
    Ok(MultiStep { merged, lost, losses, setup_ns })
}
