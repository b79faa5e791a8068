//! A step on every agent at once: one start moment on every clock, the agents' events followed
//! (heartbeats, lost agents, Ctrl-C), their intervals merged as they arrive.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How a step's end says that no host is left: the run ends with exit code 3 (hosts were lost),
/// not as the tool failing ([`all_lost`]).
const ALL_LOST: &str = "every agent was lost";

/// True for a step's abort reason that says every host was lost.
pub(crate) fn all_lost(why: &str) -> bool {
    why.starts_with(ALL_LOST)
}

use iocurve_engine::replay::ReplayIo;
use iocurve_engine::{StepObserver, StepProgress};
use iocurve_plan::{Fault, TargetGroup, Workload};
use iocurve_stats::{Drain, ErrorCounts, HostClock, HostRecord, IoCpu, StepRecord, UNKNOWN_TARGET};

use super::client::{Remote, failed, measure_clocks, refusal, wire_groups};
use super::merge::{IntervalMerger, Part};
use super::summaries::InFull;
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
    /// `run --write-iolog`: what each host that started the step issued.
    pub iolog: Vec<HostIoLog>,
    /// Through relays, per row of `merged.per_host`: its intervals as its relay sent them, where
    /// asked for in full (`run --host-intervals`); None (or no entry): its row is its step
    /// summed up.
    pub in_full: Vec<Option<Vec<InFull>>>,
    /// Per agent, the hosts a relay has left for the next step (its lost ones sit out the rest
    /// of the run); 0: not a relay, or not said.
    pub hosts_left: Vec<u32>,
}

/// One host's I/Os of a step (`run --write-iolog`).
#[derive(Debug, Clone, Default)]
pub struct HostIoLog {
    /// The host's index among the step's agents.
    pub host: usize,
    /// The host's start moment of the step, on the coordinator's clock (Unix ns): the I/Os'
    /// times count from here.
    pub started_unix_ns: i64,
    /// In time order, targets as the run's indexes.
    pub ios: Vec<ReplayIo>,
    /// I/Os the host issued but did not keep (beyond its log's capacity).
    pub left_out: u64,
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
    /// The step's workers per host, as its ramp gives them.
    pub workers: u32,
    /// What each agent runs: `workers`, or scaled by its `workers_scale` (uneven hosts).
    pub host_workers: &'a [u32],
    /// A concurrent step's members (each at this step) and their workers at scale 1; empty
    /// for a step of one workload.
    pub members: &'a [(Workload, u32)],
    /// Each agent's `workers_scale`, for the members' workers.
    pub scales: &'a [f64],
    /// A rate step: the IOPS of the whole run, shared out among the agents (a replay's: its
    /// mean, for the record; the agents get their shares of the trace instead).
    pub rate_iops: Option<f64>,
    /// A replay step: each agent's share of the trace, packed.
    pub replay: Option<&'a [Vec<u8>]>,
    /// A replay step through relays: each relay's agents' shares (by remote; empty for an
    /// agent of the coordinator's own, whose share is in `replay`).
    pub relayed_replays: &'a [Vec<Vec<u8>>],
    /// A replay step's speed.
    pub replay_speed: Option<f64>,
    /// A replay step: the bin length (s) and the I/Os its trace has due in each (all hosts).
    pub replay_intended: (f64, Vec<u64>),
    /// Per agent, its target groups (with the plan's weights).
    pub targets: &'a [Vec<TargetGroup>],
    /// Per agent, the targets a fault on one target is placed by: a relay's agents' (it opens
    /// none itself: `targets` has none for it); empty: `targets` (issue 46).
    pub fault_targets: &'a [Vec<TargetGroup>],
    /// Per agent that is a relay, its hosts still with the run in its order (address, the
    /// workers its relay gives it): its rows of them must name them and say so (issue 46);
    /// empty: not known (the rows are taken as the relay says).
    pub relayed_hosts: &'a [Vec<(String, u32)>],
    /// Per agent that is a relay, the addresses of its hosts asked for in full
    /// (`run --host-intervals`): it sends their every interval; empty: none.
    pub host_intervals: &'a [Vec<String>],
    pub scratch_size: u64,
    /// The run's key for the lock on file targets it writes (`iocurve_engine::safety::lock`).
    pub run_key: u32,
    /// `--verify-journal`: agents journal the step's verifying writes.
    pub verify_journal: bool,
    /// `--write-iolog`: agents send the I/Os the step issued.
    pub write_iolog: bool,
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
    /// A relay's step over its group (issue 46); None: the coordinator's own.
    pub relayed: Option<&'a Relayed>,
}

/// What a relay's step takes from its coordinator (issue 46): the moment, the children's places
/// among the run's hosts, and the judgement of steady state, made on every host's intervals.
pub struct Relayed {
    /// The step's start moment on the relay's clock (its coordinator's request).
    pub start_at: i64,
    /// The children are the run's hosts `first_host`, `first_host + 1`, … of `run_hosts`
    /// (their shares of a rate step's schedule).
    pub first_host: u32,
    pub run_hosts: u32,
    /// Each child's client and its key (its start moment on its clock), once the requests are
    /// out: the relay forwards its coordinator's `EndAfter` to them.
    pub(crate) keys: std::sync::Mutex<Vec<(super::client::Client, i64)>>,
    /// When every child had taken the step's request (Unix ns, the relay's clock), and the
    /// longest set-up of a child that started so far (ns): the relay's own set-up, for its
    /// coordinator to size the next step's lead from.
    pub(crate) dispatched_unix_ns: std::sync::atomic::AtomicI64,
    pub(crate) setup_ns: std::sync::atomic::AtomicI64,
}

impl Relayed {
    pub fn new(start_at: i64, first_host: u32, run_hosts: u32) -> Relayed {
        Relayed {
            start_at,
            first_host,
            run_hosts,
            keys: std::sync::Mutex::new(Vec::new()),
            dispatched_unix_ns: Default::default(),
            setup_ns: Default::default(),
        }
    }
}

impl StepSpec<'_> {
    /// The workers agent `h` runs.
    pub fn workers_of(&self, h: usize) -> u32 {
        self.host_workers.get(h).copied().unwrap_or(self.workers)
    }
}

/// The coordinator's view of the agents while a step runs: the step's session, one handler
/// per event of an agent's stream ([`Hosts::on_event`]), the intervals handed on in order
/// ([`Hosts::hand_on`]), the record concluded once every agent is done or lost.
struct Hosts<'a> {
    spec: &'a StepSpec<'a>,
    agents: Vec<Agent>,
    /// The step's start moment on this host's clock (ns since the epoch).
    start_at: i64,
    /// Each host's figures are kept apart (not for a local run's one in-process agent).
    per_host: bool,
    /// The hosts that took the step.
    running: u32,
    /// The step's merged record, from the first host's start on.
    merged: Option<StepRecord>,
    /// The longest any agent took from the request to being set up (ns).
    setup_ns: i64,
    /// Intervals each agent reported: an agent's own count, whether merged or not.
    reported: Vec<usize>,
    /// `overload = abort-step` ended the step on one agent: it ends on every agent.
    overloaded: bool,
    records: Vec<Option<StepRecord>>,
    /// Per agent, on this clock (Unix ns; 0: not started): when its latest I/O thread began,
    /// and its start moment (its schedule's zero).
    started: Vec<i64>,
    moments: Vec<i64>,
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
    /// `write_iolog`: each agent's I/Os so far, and those it left out.
    iolog: Vec<(Vec<ReplayIo>, u64)>,
    /// See [`MultiStep::hosts_left`].
    hosts_left: Vec<u32>,
    /// A relay's hosts that took the step, where fewer than its group (0: all of them).
    started_hosts: Vec<u32>,
    /// Agents lost behind relays, as their relays said.
    behind: Vec<Lost>,
    /// A step through relays (issue 46): every host's row is its step summed up, made at the
    /// step's end (`super::summaries`), not handed on interval by interval.
    relays: bool,
    /// Each relay's agents over the step, as it summed them up before its `Done`.
    summaries: Vec<Vec<pb::HostSummary>>,
    /// Each relay's intervals of its agents asked for in full (`host_intervals`), by address
    /// (every one asked for is there from the start), or why they cannot be taken.
    in_full: Vec<HashMap<String, Result<Vec<InFull>, String>>>,
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
        let (addr, named) = (&self.agents[h].addr, self.agents[h].named());
        let when = if into <= 0.0 { "before the step started".to_string() } else { format!("{at:.1} s into the step") };
        if self.spec.abort_on_host_loss {
            // Like `on_error = abort`: the others stop now, what they measured is kept, and the
            // run ends after this step.
            self.aborted.get_or_insert(format!("{named} lost {when} ({why}); --on-host-loss abort ends the run"));
        } else {
            tracing::warn!(agent = %addr, at_s = at, why, "agent lost; the others carry on");
            self.warnings.push(format!("{named} lost {when} ({why}); the others carry on"));
        }
    }

    /// The agents lost, by index.
    fn lost_indices(&self) -> Vec<usize> {
        self.lost.iter().enumerate().filter_map(|(i, l)| l.map(|_| i)).collect()
    }

    /// The agents lost: who, when, why.
    fn losses(&self) -> Vec<Lost> {
        let lost = |(i, l): (usize, &Option<f64>)| {
            l.map(|at| Lost { address: self.agents[i].addr.clone(), into_step_s: at, why: self.why[i].clone() })
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

impl<'a> Hosts<'a> {
    fn new(spec: &'a StepSpec<'a>, agents: Vec<Agent>, start_at: i64, per_host: bool, t0: Instant) -> Hosts<'a> {
        let n = agents.len();
        Hosts {
            relays: agents.iter().any(|a| a.relay),
            summaries: vec![Vec::new(); n],
            in_full: (0..n)
                .map(|h| {
                    let asked = spec.host_intervals.get(h).into_iter().flatten();
                    asked.map(|a| (a.clone(), Ok(Vec::new()))).collect()
                })
                .collect(),
            spec,
            agents,
            records: vec![None; n],
            started: vec![0; n],
            moments: vec![0; n],
            progress: vec![pb::Progress::default(); n],
            merger: IntervalMerger::new(spec.workload.intervals as usize, n),
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
            start_at,
            per_host,
            running: n as u32,
            merged: None,
            setup_ns: 0,
            reported: vec![0; n],
            overloaded: false,
            iolog: vec![(Vec::new(), 0); n],
            hosts_left: vec![0; n],
            started_hosts: vec![0; n],
            behind: Vec::new(),
        }
    }

    /// An event of agent `h`'s step.
    fn on_event(&mut self, h: usize, e: pb::step_event::Event, obs: &mut dyn StepObserver) -> Result<(), NetError> {
        match e {
            pb::step_event::Event::Started(s) => self.on_started(h, &s, obs),
            pb::step_event::Event::Progress(p) => self.progress[h] = p,
            pb::step_event::Event::Interval(i) => {
                let (idx, mut stats, cpu, dur) = wire::interval_from(&i)
                    .map_err(|e| NetError::Failed(format!("agent {}: bad interval: {e}", self.agents[h].addr)))?;
                // A concurrent step's interval has each member's part, and no other has any.
                if stats.members.len() != self.spec.members.len() {
                    return Err(NetError::Failed(format!(
                        "agent {}: bad interval: {} members' parts for a step of {}",
                        self.agents[h].addr,
                        stats.members.len(),
                        self.spec.members.len()
                    )));
                }
                let agent = &self.agents[h];
                // Its own targets only, in the total and in every member's part.
                let mut parts = stats.targets.iter().chain(stats.members.iter().flat_map(|m| m.targets.iter()));
                if let Some(t) = parts.find(|t| t.target >= agent.target_count) {
                    return Err(NetError::Failed(format!(
                        "agent {}: bad interval: a part of target {} of its {} targets",
                        agent.addr, t.target, agent.target_count
                    )));
                }
                wire::shift_targets(&mut stats, agent.target_offset);
                self.reported[h] += 1;
                // A relay's merge of its group: as many hosts as reported it, never more than
                // the group has.
                let hosts = i.hosts.min(agent.hosts).max(1);
                self.merger.add(h, idx as usize, Part { stats, cpu, duration_s: dur, hosts });
            }
            pb::step_event::Event::Done(d) => self.on_done(h, &d),
            pb::step_event::Event::Iolog(p) => self.on_iolog(h, &p)?,
            // A relay's agent over the step, for its row: kept, one more than it stands for at
            // most (so many are not taken: `summaries::rows`); an agent's, ignored.
            pb::step_event::Event::Summary(s) => {
                let agent = &self.agents[h];
                if agent.relay && self.summaries[h].len() <= agent.hosts as usize {
                    self.summaries[h].push(s);
                }
            }
            pb::step_event::Event::HostInterval(i) => self.on_host_interval(h, i),
        }
        Ok(())
    }

    /// An interval of one of relay `h`'s agents, asked for in full: checked as the relay's own
    /// intervals are, its targets made the run's, kept for the step's end (`super::summaries`
    /// takes them if they add up to the agent's summary). Of an agent not asked for, or beyond
    /// one more than the step's intervals, it is dropped; one that does not read leaves that
    /// agent's row summed up (said at the step's end), not the step failed: its intervals in
    /// full are something to look into, not the step's figures. Its seconds' histograms are
    /// dropped at once: a host's are not stored (the step's merged seconds are), and they are
    /// most of an interval's size.
    fn on_host_interval(&mut self, h: usize, i: pb::HostInterval) {
        let agent = &self.agents[h];
        let (intervals, members) = (self.spec.workload.intervals as usize, self.spec.members.len());
        let Some(Ok(kept)) = self.in_full[h].get_mut(&i.address) else { return };
        if !agent.relay || kept.len() > intervals {
            return;
        }
        let read = |i: &pb::HostInterval| -> Result<InFull, String> {
            let (index, mut stats, cpu, duration_s) = wire::interval_from(i.interval.as_ref().ok_or("no figures")?)?;
            if stats.members.len() != members {
                return Err(format!("{} members' parts for a step of {members}", stats.members.len()));
            }
            let mut parts = stats.targets.iter().chain(stats.members.iter().flat_map(|m| m.targets.iter()));
            if let Some(t) = parts.find(|t| t.target >= agent.target_count) {
                return Err(format!("a part of target {} of the relay's {}", t.target, agent.target_count));
            }
            wire::shift_targets(&mut stats, agent.target_offset);
            stats.seconds = Default::default();
            for m in &mut stats.members {
                m.seconds = Default::default();
            }
            Ok(InFull { index, stats, cpu, duration_s })
        };
        match read(&i) {
            Ok(one) => kept.push(one),
            Err(why) => {
                let why = format!("an interval that does not read: {}", iocurve_net::printable(&why));
                self.in_full[h].insert(i.address, Err(why));
            }
        }
    }

    /// A part of agent `h`'s I/O log: checked as everything an agent sends, its targets made
    /// the run's.
    fn on_iolog(&mut self, h: usize, p: &pb::IoLogPart) -> Result<(), NetError> {
        let agent = &self.agents[h];
        let bad = |e: String| NetError::Failed(format!("agent {}: bad I/O log: {e}", agent.addr));
        let part = iocurve_engine::replay::decode(&p.ios).map_err(bad)?;
        if let Some(io) = part.ios.iter().find(|io| io.op.target >= agent.target_count) {
            return Err(bad(format!("an I/O on target {} of its {} targets", io.op.target, agent.target_count)));
        }
        let (ios, left_out) = &mut self.iolog[h];
        // An agent's log holds what one host's may; a relay's, its group's hosts' (one log).
        let most = iocurve_engine::iolog::MAX_LOGGED_IOS.saturating_mul(agent.hosts.max(1) as usize);
        let room = most.saturating_sub(ios.len()).min(part.ios.len());
        *left_out += p.left_out.saturating_add((part.ios.len() - room) as u64);
        ios.extend(part.ios[..room].iter().map(|io| {
            let mut io = *io;
            io.op.target += agent.target_offset;
            io
        }));
        Ok(())
    }

    /// The hosts' I/O logs, of those that started the step.
    fn take_iolog(&mut self) -> Vec<HostIoLog> {
        let logs = std::mem::take(&mut self.iolog);
        logs.into_iter()
            .enumerate()
            .filter(|&(h, _)| self.started[h] != 0)
            .map(|(host, (ios, left_out))| HostIoLog { host, started_unix_ns: self.moments[host], ios, left_out })
            .collect()
    }

    /// Agent `h` started its step: when, on this host's clock, and how late its set-up was.
    fn on_started(&mut self, h: usize, s: &pb::Started, obs: &mut dyn StepObserver) {
        let (spec, w) = (self.spec, self.spec.workload);
        let agent = &self.agents[h];
        // A relay whose group lost agents before the start: the step runs on fewer hosts (said
        // once: a repeated Started changes nothing).
        if self.started[h] == 0 && s.hosts != 0 && s.hosts < agent.hosts {
            self.started_hosts[h] = s.hosts;
            self.running = self.running.saturating_sub(agent.hosts - s.hosts);
            if let Some(rec) = self.merged.as_mut() {
                rec.hosts = self.running;
            }
        }
        self.started[h] = s.started_unix_ns - agent.offset_ns;
        // An agent that does not say its moment: its start.
        self.moments[h] = if s.moment_unix_ns != 0 { s.moment_unix_ns } else { s.started_unix_ns } - agent.offset_ns;
        if s.ready_unix_ns > 0 && s.received_unix_ns > 0 {
            self.setup_ns = self.setup_ns.max(s.ready_unix_ns - s.received_unix_ns);
            if let Some(r) = spec.relayed {
                r.setup_ns.store(self.setup_ns, Ordering::Relaxed);
            }
            let late = s.ready_unix_ns.saturating_sub(self.start_at.saturating_add(agent.offset_ns));
            if late > 1_000_000 && self.per_host {
                self.warnings.push(format!(
                    "agent {} was set up {:.1} ms after the step's start moment (its set-up took {:.1} ms): it started late; the next step gives more lead",
                    agent.addr,
                    late as f64 / 1e6,
                    (s.ready_unix_ns - s.received_unix_ns) as f64 / 1e6
                ));
            }
        }
        // A host's own record only where the result lists hosts: a local run's would repeat
        // the step's, interval by interval, for the whole run (issue 21).
        if self.per_host {
            let mut own =
                StepRecord::new(spec.workers_of(h), w.queue_depth, s.threads as usize, w.interval_s, s.sample_s);
            // A relay's row is its group's.
            own.hosts = if self.started_hosts[h] != 0 { self.started_hosts[h] } else { agent.hosts.max(1) };
            own.rate_iops = spec.rate_iops;
            own.replay_speed = spec.replay_speed;
            self.records[h] = Some(own);
        }
        if self.merged.is_none() {
            // Workers are per host, as published; the host count goes beside them.
            let mut rec = StepRecord::new(spec.workers, w.queue_depth, s.threads as usize, w.interval_s, s.sample_s);
            rec.hosts = self.running;
            rec.planned_hosts = spec.planned_hosts.max(self.running);
            rec.rate_iops = spec.rate_iops;
            rec.replay_speed = spec.replay_speed;
            (rec.replay_bin_s, rec.replay_intended) = spec.replay_intended.clone();
            // The first host to report times the samples from its moment; the hosts' start
            // spread is reported beside the step.
            rec.measured_from_unix_ns = Some(self.moments[h] + (w.warmup_s * 1e9) as i64);
            obs.started(&rec);
            self.merged = Some(rec);
        }
        if self.per_host && !self.relays {
            let a = &self.agents[h];
            obs.host_started(h as u32, &a.addr, &a.hostname, self.started[h], s.threads as usize, spec.workers_of(h));
        }
    }

    /// Agent `h`'s step ended: what it did with its outstanding I/Os, its notes, an error, an
    /// overload or an abort that ends the step on every host.
    fn on_done(&mut self, h: usize, d: &pb::Done) {
        let agent = &self.agents[h];
        self.done[h] = true;
        self.drain[h] = Drain {
            late: d.late,
            stuck: d.stuck,
            stuck_age_ns: d.stuck_age_ns,
            wait_ns: d.wait_ns,
            faults_injected: d.late_faults,
        };
        self.interrupted[h] = d.interrupted;
        // A relay's group for the next step: never more than it had.
        self.hosts_left[h] = d.hosts.min(agent.hosts);
        // Its agents lost, for the run's record of its hosts: no more than it stands for.
        if agent.relay {
            let first = self.behind.len();
            self.behind.extend(d.lost.iter().take(agent.hosts as usize).map(|l| Lost {
                address: iocurve_net::printable(&l.address),
                into_step_s: if l.into_step_s.is_finite() { l.into_step_s.max(0.0) } else { 0.0 },
                why: format!("through relay {}: {}", agent.addr, iocurve_net::printable(&l.why)),
            }));
            // `--on-host-loss abort` holds behind relays too: the run ends after this step.
            if self.spec.abort_on_host_loss
                && let Some(l) = self.behind.get(first)
            {
                self.aborted.get_or_insert(format!(
                    "agent {} lost {:.1} s into the step ({}); --on-host-loss abort ends the run",
                    l.address, l.into_step_s, l.why
                ));
            }
        }
        self.io_cpu[h] = d.io_cpu.as_ref().and_then(wire::io_cpu_from);
        let clean = iocurve_net::printable;
        self.notes[h] = d.notes.iter().map(|n| (clean(&n.code), clean(&n.message))).collect();
        for e in &d.unmeasured_errors {
            let t = if e.target == UNKNOWN_TARGET { e.target } else { e.target + agent.target_offset };
            self.unmeasured[h].add(t, e.errno, e.count);
        }
        if !d.error.is_empty() {
            let msg = format!("{}{}", agent.who, clean(&d.error));
            self.failure.get_or_insert(if d.input { NetError::Input(msg) } else { NetError::Failed(msg) });
        }
        // `overload = abort-step` ended the step on one agent: it ends on every agent (the run
        // goes on with the next step, or ends its rate ramp, as on one host).
        if d.notes.iter().any(|n| n.code == iocurve_engine::step::OVERLOADED) {
            self.overloaded = true;
        }
        if d.aborted && self.aborted.is_none() {
            // on_error = abort on this host: the others stop now too, and the run ends after
            // this step with what every host measured.
            self.aborted = Some(format!("{}{}", agent.who, clean(&d.abort_reason)));
        }
    }

    /// Hands on, in order, every interval all hosts still there reported.
    fn hand_on(&mut self, obs: &mut dyn StepObserver) {
        let w = self.spec.workload;
        let lost: Vec<bool> = self.lost.iter().map(Option::is_some).collect();
        for m in self.merger.ready(&lost) {
            for (k, p) in m.parts {
                if self.per_host && !self.relays {
                    obs.host_interval(k as u32, m.index as u32, &p.stats, &p.cpu, p.duration_s);
                }
                if let Some(r) = self.records[k].as_mut() {
                    r.count_interval(p.stats, p.cpu, p.duration_s);
                }
            }
            obs.interval(m.index as u32, &m.all, &m.cpu, w.interval_s);
            // Counted, not held: the observers stored the interval, and the list grows with
            // the step's length (issue 21); the runner reads it back at the step's end.
            if let Some(merged) = self.merged.as_mut() {
                merged.count_interval(m.all, m.cpu, w.interval_s);
            }
        }
    }

    /// `steady_state = "snia"`, judged on the merged intervals: the interval count every agent
    /// is to end after (at the least), once steady.
    fn steady_end(&self) -> Option<u32> {
        let w = self.spec.workload;
        let rec = self.merged.as_ref()?;
        (w.steady_state == iocurve_plan::SteadyState::Snia
            && rec.measured < w.intervals as usize
            && rec.is_steady(w.pattern == iocurve_plan::Pattern::Sequential))
        .then_some(rec.measured as u32 + 1)
    }

    /// The step's record once every agent is done or lost. `after`: each agent's clock measured
    /// after the step; `ended_after`: the interval count the agents were told to end after once
    /// steady (not after a stop); `stopped`: Ctrl-C.
    fn conclude(
        mut self,
        after: &[Option<(i64, i64)>],
        ended_after: Option<u32>,
        stopped: bool,
    ) -> Result<MultiStep, NetError> {
        let (spec, w) = (self.spec, self.spec.workload);
        let n = self.agents.len();
        let intervals = w.intervals as usize;
        if let Some(f) = self.failure.take() {
            return Err(f);
        }
        let setup_ns = self.setup_ns;
        let Some(mut merged) = self.merged.take() else {
            return match self.aborted {
                Some(why) => Err(NetError::Aborted(why)),
                None if self.lost.iter().all(Option::is_some) => {
                    Err(NetError::Lost(format!("{ALL_LOST} before it started the step")))
                }
                // Ctrl-C before the start moment: a step with nothing in it, as a local run
                // stopped before its first interval ends.
                None if stopped => {
                    let mut empty = StepRecord::new(spec.workers, w.queue_depth, 0, w.interval_s, 1.0);
                    empty.rate_iops = spec.rate_iops;
                    empty.replay_speed = spec.replay_speed;
                    empty.interrupted = true;
                    Ok(MultiStep {
                        merged: empty,
                        lost: self.lost_indices(),
                        losses: self.losses(),
                        setup_ns,
                        iolog: Vec::new(),
                        hosts_left: Vec::new(),
                        in_full: Vec::new(),
                    })
                }
                None => Err(NetError::Failed("no agent started the step".into())),
            };
        };
        if self.lost.iter().all(Option::is_some) && self.aborted.is_none() {
            // What they measured before is kept; the run cannot go on.
            self.aborted = Some(format!("{ALL_LOST} during the step: the run cannot go on"));
        }
        // Fewer intervals than planned: interrupted, unless every host ended its step once steady.
        let steady_end = w.steady_state == iocurve_plan::SteadyState::Snia;
        let all_ended = self.interrupted.iter().zip(&self.lost).all(|(&i, l)| !i && l.is_none());
        merged.interrupted = merged.measured < intervals && !(steady_end && all_ended);
        // (A step stopped otherwise — Ctrl-C, an abort, an overload — ends apart by its nature.)
        if let Some(end) = ended_after {
            let counts: Vec<String> = (0..n)
                .filter(|&h| self.lost[h].is_none() && self.reported[h] != end as usize)
                .map(|h| format!("{} ran {}", self.agents[h].addr, self.reported[h]))
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
        merged.aborted = self.aborted.take();
        let mut simulated = 0;
        // A relay says each of its simulated agents apart, for its coordinator to count them.
        let relay = spec.relayed.is_some();
        for (h, d) in self.drain.iter().enumerate() {
            merged.drain.merge(d);
            merged.unmeasured_errors.merge(&self.unmeasured[h]);
            merged.io_cpu = IoCpu::max(merged.io_cpu, self.io_cpu[h]);
            for (code, message) in &self.notes[h] {
                // Said once for the step, with how many hosts: not once per simulated host.
                if code == iocurve_net::agent::simulate::SIMULATED && !relay {
                    simulated += 1;
                    continue;
                }
                let message =
                    if self.per_host { format!("{}: {message}", self.agents[h].addr) } else { message.clone() };
                merged.notes.push((code.clone(), message));
            }
        }
        if simulated > 0 {
            let n: u32 = self.agents.iter().map(|a| a.hosts.max(1)).sum();
            merged.notes.push((
                iocurve_net::agent::simulate::SIMULATED.into(),
                format!(
                    "{simulated} of {n} hosts are simulated agents (iocurve agent --simulate): their figures are modelled, not measured"
                ),
            ));
        }
        // Hosts, not connections: a relay stands for its group.
        let planned: u32 = self.agents.iter().map(|a| a.hosts.max(1)).sum();
        let ran: u32 = (0..self.agents.len())
            .filter(|&h| self.started[h] != 0)
            .map(|h| if self.started_hosts[h] != 0 { self.started_hosts[h] } else { self.agents[h].hosts.max(1) })
            .sum();
        for (i, at) in self.lost.iter().enumerate() {
            let Some(at) = at else { continue };
            let named = self.agents[i].named();
            let message = if self.started[i] == 0 && relay {
                // A relay counts its own group only: the step's hosts are its coordinator's to count.
                format!(
                    "{named} was lost before the step started: the step ran on {ran} of this relay's {planned} agents"
                )
            } else if self.started[i] == 0 {
                format!("{named} was lost before the step started: the step ran on {ran} hosts, not {planned}")
            } else {
                format!(
                    "{named} lost {at:.1} s into the step: from then on the figures come from the other hosts, so this step mixes host counts and enters no speed, optimum or maximum"
                )
            };
            merged.notes.push(("host_lost".into(), message));
        }
        let lost = self.lost_indices();
        let mut losses = self.losses();
        losses.append(&mut self.behind);
        let iolog = self.take_iolog();
        let hosts_left = std::mem::take(&mut self.hosts_left);
        let mut in_full = Vec::new();
        if self.per_host {
            let rows = self.host_records(after, merged.measured);
            (merged.per_host, in_full) = (rows.rows, rows.in_full);
            merged.notes.extend(rows.notes.into_iter().map(|n| ("relay_summary".to_string(), n)));
        }
        Ok(MultiStep { merged, lost, losses, setup_ns, iolog, hosts_left, in_full })
    }

    /// Each host's own record of the step, with its clock before and after it; through relays,
    /// each host's row summed up over the step (`super::summaries`).
    fn host_records(mut self, after: &[Option<(i64, i64)>], measured: usize) -> super::summaries::Rows {
        let (spec, w) = (self.spec, self.spec.workload);
        let steady_end = w.steady_state == iocurve_plan::SteadyState::Snia;
        let intervals = w.intervals as usize;
        let via: Vec<super::summaries::Via> = (0..self.agents.len())
            .map(|i| super::summaries::Via {
                through: wire::Through {
                    offset_ns: self.agents[i].offset_ns,
                    rtt_ns: self.agents[i].rtt_ns,
                    after: after.get(i).copied().flatten(),
                    target_offset: self.agents[i].target_offset,
                    target_count: self.agents[i].target_count,
                },
                summaries: std::mem::take(&mut self.summaries[i]),
                hosts: self.agents[i].hosts,
                workers: spec.workers_of(i),
                expected: spec.relayed_hosts.get(i).cloned().unwrap_or_default(),
                in_full: std::mem::take(&mut self.in_full[i]),
            })
            .collect();
        let relays = self.relays;
        let ended_steady: Vec<bool> =
            (0..self.agents.len()).map(|i| steady_end && !self.interrupted[i] && self.lost[i].is_none()).collect();
        let records: Vec<HostRecord> = std::mem::take(&mut self.records)
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                let mut record =
                    r.unwrap_or_else(|| StepRecord::new(spec.workers_of(i), w.queue_depth, 0, w.interval_s, 1.0));
                record.interrupted = record.measured < intervals && !ended_steady[i];
                record.drain = self.drain[i];
                record.unmeasured_errors = self.unmeasured[i].clone();
                record.io_cpu = self.io_cpu[i];
                record.notes = self.notes[i].clone();
                HostRecord {
                    address: self.agents[i].addr.clone(),
                    hostname: self.agents[i].hostname.clone(),
                    started_unix_ns: self.started[i],
                    lost_at_s: self.lost[i],
                    clock: HostClock {
                        offset_ns: self.agents[i].offset_ns,
                        rtt_ns: self.agents[i].rtt_ns,
                        offset_after_ns: after.get(i).copied().flatten().map(|m| m.0),
                        rtt_after_ns: after.get(i).copied().flatten().map_or(0, |m| m.1),
                    },
                    record,
                }
            })
            .collect();
        if relays {
            let steady = ended_steady.iter().any(|&e| e);
            super::summaries::rows(records, via, w, measured, steady)
        } else {
            super::summaries::Rows { rows: records, in_full: Vec::new(), notes: Vec::new() }
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
async fn end_steps(agents: Vec<(super::client::Client, i64)>, hosts: u32, want: u32, planned: u32) -> Option<u32> {
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
    // (Hosts, not connections: a relay's are several.)
    let margin = u32::from(hosts > 1);
    let want = want.max(furthest + margin);
    if want >= planned {
        return None;
    }
    ask(false, want).await.iter().map(|r| r.intervals).max()
}

/// What the coordinator keeps of an agent for a step (its clock measured right before it).
#[derive(Debug, Clone, Default)]
struct Agent {
    addr: String,
    /// "agent ADDR: " in front of what it says, or nothing for a local run's in-process agent.
    who: String,
    hostname: String,
    offset_ns: i64,
    rtt_ns: i64,
    target_offset: u32,
    target_count: u32,
    /// How many hosts it stands for (a relay: its group's).
    hosts: u32,
    relay: bool,
}

impl Agent {
    /// How messages name it: an agent, or a relay with its group.
    fn named(&self) -> String {
        match (self.relay, self.hosts) {
            (false, _) => format!("agent {}", self.addr),
            (true, 1) => format!("relay {} (its 1 host)", self.addr),
            (true, n) => format!("relay {} (its {n} hosts)", self.addr),
        }
    }

    fn of(r: &Remote) -> Agent {
        Agent {
            addr: r.addr.clone(),
            who: r.who(),
            // A relay's own figures are its group's: said where hosts are listed.
            hostname: if r.relay {
                format!("{} (relay of {} hosts)", r.hello.hostname, r.hosts)
            } else {
                r.hello.hostname.clone()
            },
            offset_ns: r.offset_ns,
            rtt_ns: r.rtt_ns,
            target_offset: r.target_offset,
            target_count: r.target_count,
            hosts: r.hosts.max(1),
            relay: r.relay,
        }
    }
}

/// Runs a step on every agent at one moment and merges the intervals as they arrive: interval
/// `k` goes to `obs` (each host's part first, then the merged one) once every host still there
/// reported it. `stop` (Ctrl-C) asks every agent to end its step at once (the unfinished
/// interval is dropped).
pub async fn run_step(
    remotes: &mut [Remote],
    spec: &StepSpec<'_>,
    obs: &mut dyn StepObserver,
    stop: &AtomicBool,
) -> Result<MultiStep, NetError> {
    let json = serde_json::to_string(spec.workload).map_err(|e| NetError::Failed(e.to_string()))?;
    let clock_deadline = match spec.relayed {
        Some(r) => Duration::from_nanos((r.start_at.saturating_sub(unix_ns()).max(0) / 2) as u64).min(REQUEST_DEADLINE),
        None => REQUEST_DEADLINE,
    };
    let clock_notes = clocks_before(remotes, stop, clock_deadline).await;
    let start_at = spec.relayed.map_or_else(|| unix_ns() + spec.lead.as_nanos() as i64, |r| r.start_at);
    // Each agent's start moment on its own clock: it names the step in later requests.
    let keys: Vec<i64> = remotes.iter().map(|r| start_at.saturating_add(r.offset_ns)).collect();
    if let Some(relayed) = spec.relayed {
        *relayed.keys.lock().unwrap_or_else(|e| e.into_inner()) =
            remotes.iter().zip(&keys).map(|(r, k)| (r.client.clone(), *k)).collect();
    }
    let calls = send_requests(remotes, spec, &json, &keys);
    let n = remotes.len();
    let per_host = !(n == 1 && remotes[0].in_process);
    let mut st = Hosts::new(spec, remotes.iter().map(Agent::of).collect(), start_at, per_host, Instant::now());
    st.warnings.extend(clock_notes);
    let streams = take_answers(&mut st, calls).await?;
    if let Some(r) = spec.relayed {
        r.dispatched_unix_ns.store(unix_ns(), Ordering::Relaxed);
    }
    if let Some(why) = st.aborted.take() {
        // `--on-host-loss abort`: nothing of this step ran; the others are not started.
        return Err(NetError::Aborted(why));
    }
    if st.done.iter().all(|&d| d) {
        return Err(NetError::Lost(format!("{ALL_LOST} before the step started: {}", st.warnings.join("; "))));
    }
    // The hosts the step runs on: those that took it (a relay: its group).
    st.running = streams.iter().zip(&st.agents).filter(|(s, _)| s.is_some()).map(|(_, a)| a.hosts.max(1)).sum();
    let (rx, readers) = read_streams(streams);
    let (stop_sent, ending) = follow(&mut st, remotes, &keys, rx, &readers, obs, stop).await?;
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
    let relays = st.relays && st.per_host;
    let mut m = st.conclude(&after, ended_after.filter(|_| !stop_sent), stop.load(Ordering::Relaxed))?;
    // Through relays every host's row is made at the step's end: handed on now, in order; a
    // host asked for in full as a host without relays is, interval by interval.
    if relays {
        let in_full = std::mem::take(&mut m.in_full);
        for (i, row) in m.merged.per_host.iter().enumerate() {
            match in_full.get(i).and_then(Option::as_ref) {
                Some(list) => {
                    let r = &row.record;
                    obs.host_started(i as u32, &row.address, &row.hostname, row.started_unix_ns, r.threads, r.workers);
                    for f in list {
                        obs.host_interval(i as u32, f.index, &f.stats, &f.cpu, f.duration_s);
                    }
                }
                None => obs.host_summary(i as u32, row),
            }
        }
    }
    Ok(m)
}

/// Every agent's clock again, right before the step: a clock stepped or drifted since the last
/// measurement would start its I/O off by that much, and the start spread computed with the old
/// offset could never show it (issue 15, finding 6). Returns what to warn of.
/// Within `deadline`: a relay, whose moment is fixed already, spends at most half its lead.
async fn clocks_before(remotes: &mut [Remote], stop: &AtomicBool, deadline: Duration) -> Vec<String> {
    let mut notes = Vec::new();
    let all = vec![true; remotes.len()];
    let before = tokio::select! {
        m = measure_clocks(remotes, &all, CLOCK_PINGS, deadline) => m,
        _ = super::client::until_stopped(stop) => vec![None; remotes.len()],
    };
    for (r, m) in remotes.iter_mut().zip(before) {
        let Some((offset_ns, rtt_ns)) = m else {
            if !stop.load(Ordering::Relaxed) && !r.in_process {
                notes.push(format!(
                    "agent {}'s clock could not be measured before the step: its last offset ({:+.3} ms) is used",
                    r.addr,
                    r.offset_ns as f64 / 1e6
                ));
            }
            continue;
        };
        let moved = offset_ns.saturating_sub(r.offset_ns);
        if moved.saturating_abs() > r.rtt_ns.max(rtt_ns).saturating_add(CLOCK_MOVED_NS) {
            notes.push(format!(
                "agent {}'s clock moved {:+.1} ms against this host's since it was last measured: its step still starts with the others (offsets are measured before every step)",
                r.addr,
                moved as f64 / 1e6
            ));
        }
        (r.offset_ns, r.rtt_ns) = (offset_ns, rtt_ns);
    }
    notes
}

/// An agent's answer to the step's request: its event stream, within the deadline.
type Call = tokio::task::JoinHandle<
    Result<Result<tonic::Response<tonic::Streaming<pb::StepEvent>>, tonic::Status>, tokio::time::error::Elapsed>,
>;

/// The workers a host at `workers_scale` `scale` runs in a step of `workers` per host: its share
/// of a closed-loop step's (a concurrent step's: each member's share of its own, their sum); a
/// rate step's schedule is shared out evenly whatever the hosts' sizes. The coordinator's for
/// its agents, a relay's for its own.
pub(crate) fn host_share(workers: u32, members: &[(Workload, u32)], rate: bool, scale: f64) -> u32 {
    match (rate, members.is_empty()) {
        (true, _) => workers,
        (false, true) => iocurve_plan::scaled_workers(workers, scale),
        (false, false) => members.iter().map(|(_, m)| iocurve_plan::scaled_workers(*m, scale)).sum(),
    }
}

/// A concurrent step's members as agent `h` runs them: each workload with its workers scaled by
/// the agent's `workers_scale`.
fn member_requests(spec: &StepSpec, h: usize) -> Vec<pb::Member> {
    let scale = spec.scales.get(h).copied().unwrap_or(1.0);
    spec.members
        .iter()
        .map(|(m, workers)| pb::Member {
            workload_json: serde_json::to_string(m).unwrap_or_default(),
            workers: iocurve_plan::scaled_workers(*workers, scale),
        })
        .collect()
}

/// Every agent gets its request at once (one slow agent delays no other's), each within a
/// deadline: an agent that cannot take it is lost before the step starts.
fn send_requests(remotes: &[Remote], spec: &StepSpec, json: &str, keys: &[i64]) -> Vec<Call> {
    // Each agent's place among the run's hosts: a relay stands for its group's (and places its
    // children itself); a relay's children are the run's hosts from its first on.
    let (mut next, hosts) =
        spec.relayed.map_or((0, remotes.iter().map(|r| r.hosts.max(1)).sum()), |r| (r.first_host, r.run_hosts));
    let mut calls = Vec::new();
    for (h, (r, targets)) in remotes.iter().zip(spec.targets).enumerate() {
        let host = next;
        next = next.saturating_add(r.hosts.max(1));
        let req = pb::StepRequest {
            workload_json: json.to_string(),
            workers: spec.workers_of(h),
            groups: wire_groups(targets),
            start_at_unix_ns: keys[h],
            scratch_size: spec.scratch_size,
            threads: spec.threads,
            backend: spec.backend.into(),
            faults_json: faults_for(
                spec.faults,
                if spec.fault_targets.is_empty() { spec.targets } else { spec.fault_targets },
                h,
            ),
            rate_iops: if spec.replay.is_some() { 0.0 } else { spec.rate_iops.unwrap_or(0.0) },
            replay: spec.replay.and_then(|r| r.get(h)).cloned().unwrap_or_default(),
            host,
            hosts,
            run_key: spec.run_key,
            verify_journal: spec.verify_journal,
            write_iolog: spec.write_iolog,
            members: member_requests(spec, h),
            host_intervals: spec.host_intervals.get(h).cloned().unwrap_or_default(),
            relayed_replays: spec.relayed_replays.get(h).cloned().unwrap_or_default(),
        };
        let mut client = r.client.clone();
        calls.push(tokio::spawn(async move { tokio::time::timeout(REQUEST_DEADLINE, client.run_step(req)).await }));
    }
    calls
}

/// The agents' answers: each one's stream, or None for an agent lost before the step started.
/// A refusal (bad input, another coordinator) ends the step with that error.
async fn take_answers(
    st: &mut Hosts<'_>,
    calls: Vec<Call>,
) -> Result<Vec<Option<tonic::Streaming<pb::StepEvent>>>, NetError> {
    let mut streams = Vec::new();
    for (h, call) in calls.into_iter().enumerate() {
        let answer = call.await.map_err(|e| NetError::Failed(format!("sending the step request: {e}")))?;
        match answer {
            Ok(Ok(s)) => streams.push(Some(s.into_inner())),
            Ok(Err(e)) if refusal(&e) => return Err(failed(&st.agents[h].addr, "step", e)),
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
    Ok(streams)
}

/// Agent `h`'s stream message: an event, the stream's end (None), or its failure.
type StreamMsg = (usize, Result<Option<pb::StepEvent>, tonic::Status>);

/// One reader per stream, all into one channel (a task that never sends for an agent without
/// one, so that readers stay indexed by host).
fn read_streams(
    streams: Vec<Option<tonic::Streaming<pb::StepEvent>>>,
) -> (tokio::sync::mpsc::Receiver<StreamMsg>, Vec<tokio::task::JoinHandle<()>>) {
    let (tx, rx) = tokio::sync::mpsc::channel::<StreamMsg>(64);
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
    (rx, readers)
}

/// Follows the agents' events until every agent is done or lost: a stop at once to every
/// agent on Ctrl-C, an abort or an overload; silent agents lost; progress four times a second;
/// every step's end once steady (`steady_state = "snia"`). Returns whether a stop was sent and
/// the task ending the agents' steps once steady.
async fn follow(
    st: &mut Hosts<'_>,
    remotes: &[Remote],
    keys: &[i64],
    mut rx: tokio::sync::mpsc::Receiver<StreamMsg>,
    readers: &[tokio::task::JoinHandle<()>],
    obs: &mut dyn StepObserver,
    stop: &AtomicBool,
) -> Result<(bool, Option<tokio::task::JoinHandle<Option<u32>>>), NetError> {
    let spec = st.spec;
    let w = spec.workload;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut stop_sent = false;
    let mut ending: Option<tokio::task::JoinHandle<Option<u32>>> = None;
    while !st.done.iter().all(|&d| d) {
        for m in st.warnings.drain(..) {
            obs.warning(&m);
        }
        if !stop_sent && (stop.load(Ordering::Relaxed) || st.aborted.is_some() || st.overloaded) {
            stop_sent = true;
            stop_all(remotes, &st.done);
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
        if let Some(e) = event {
            st.on_event(h, e, obs)?;
        }
        st.hand_on(obs);
        // A relay's coordinator judges steady state on every host's intervals, not the relay.
        if ending.is_none()
            && spec.relayed.is_none()
            && let Some(want) = st.steady_end()
        {
            // The interval running now completes (as on one host), and every interval an
            // agent has entered already; then every agent ends. Told on the side: the agents'
            // events go on being read meanwhile.
            let agents: Vec<_> = remotes
                .iter()
                .zip(keys)
                .zip(&st.done)
                .filter(|(_, done)| !**done)
                .map(|((r, key), _)| (r.client.clone(), *key))
                .collect();
            tracing::info!(workload = %w.name, workers = spec.workers, after = want - 1, "steady state reached on every host together");
            let hosts: u32 = st.agents.iter().map(|a| a.hosts.max(1)).sum();
            ending = Some(tokio::spawn(end_steps(agents, hosts, want, w.intervals)));
        }
    }
    Ok((stop_sent, ending))
}

/// A stop at once to every agent still running, each within a deadline. Best effort: an agent
/// that cannot be told falls silent and is lost anyway.
fn stop_all(remotes: &[Remote], done: &[bool]) {
    for (h, r) in remotes.iter().enumerate() {
        if !done[h] {
            let mut client = r.client.clone();
            tokio::spawn(async move {
                let _ = tokio::time::timeout(STOP_DEADLINE, client.stop(pb::StopRequest {})).await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iocurve_stats::{CpuUsage, IntervalStats};

    /// What a step's observer was told.
    #[derive(Default)]
    struct Told {
        started: usize,
        intervals: Vec<u32>,
        host_intervals: Vec<(u32, u32)>,
        warnings: Vec<String>,
    }

    impl StepObserver for Told {
        fn started(&mut self, _rec: &StepRecord) {
            self.started += 1;
        }
        fn interval(&mut self, index: u32, _s: &IntervalStats, _c: &iocurve_stats::CpuUsage, _d: f64) {
            self.intervals.push(index);
        }
        fn host_interval(&mut self, host: u32, index: u32, _s: &IntervalStats, _c: &iocurve_stats::CpuUsage, _d: f64) {
            self.host_intervals.push((host, index));
        }
        fn warning(&mut self, message: &str) {
            self.warnings.push(message.to_string());
        }
    }

    fn workload() -> Workload {
        let text = "[[workloads]]\nname = \"w\"\nintervals = 2\ninterval_s = 1\nwarmup_s = 0\n";
        iocurve_plan::parse_str(text, "plan.toml", &Default::default()).unwrap().workloads.remove(0)
    }

    fn spec(w: &Workload) -> StepSpec<'_> {
        StepSpec {
            workload: w,
            workers: 2,
            host_workers: &[],
            members: &[],
            scales: &[],
            rate_iops: None,
            replay: None,
            relayed_replays: &[],
            replay_speed: None,
            replay_intended: (0.1, Vec::new()),
            targets: &[],
            fault_targets: &[],
            relayed_hosts: &[],
            host_intervals: &[],
            scratch_size: 0,
            run_key: 0,
            verify_journal: false,
            write_iolog: false,
            threads: 0,
            backend: "io_uring",
            faults: &[],
            lead: Duration::ZERO,
            abort_on_host_loss: false,
            silence: Duration::from_secs(10),
            planned_hosts: 2,
            relayed: None,
        }
    }

    fn agents() -> Vec<Agent> {
        ["a:1", "b:1"]
            .iter()
            .map(|a| Agent { addr: a.to_string(), who: format!("agent {a}: "), ..Default::default() })
            .collect()
    }

    fn started() -> pb::step_event::Event {
        pb::step_event::Event::Started(pb::Started {
            started_unix_ns: 1_000,
            threads: 1,
            sample_s: 1.0,
            ..Default::default()
        })
    }

    fn interval(index: u32, ops: u64) -> pb::step_event::Event {
        let mut s = IntervalStats::with_samples(1);
        for _ in 0..ops {
            s.read.record(1000, 4096);
        }
        pb::step_event::Event::Interval(wire::interval_to(index, &s, &CpuUsage::default(), 1.0))
    }

    fn done() -> pb::step_event::Event {
        pb::step_event::Event::Done(pb::Done::default())
    }

    /// A relay's word is bounded by its group (issue 46): an interval claiming more hosts than
    /// the relay stands for weighs as its group, a repeated Started lowers the step's hosts
    /// once, and a Done's hosts left never exceed the group.
    #[test]
    fn a_relay_says_no_more_hosts_than_its_group_has() {
        let w = workload();
        let spec = spec(&w);
        let mut relays = agents();
        for a in &mut relays {
            (a.relay, a.hosts) = (true, 3);
        }
        let mut st = Hosts::new(&spec, relays, 0, true, Instant::now());
        st.running = 6;
        let mut told = Told::default();
        let two = || match started() {
            pb::step_event::Event::Started(s) => pb::step_event::Event::Started(pb::Started { hosts: 2, ..s }),
            _ => unreachable!(),
        };
        for _ in 0..3 {
            st.on_event(0, two(), &mut told).unwrap();
        }
        st.on_event(1, started(), &mut told).unwrap();
        assert_eq!(st.running, 5, "relay a started 2 of its 3 hosts, once");
        assert_eq!(st.merged.as_ref().unwrap().hosts, 5);
        let claiming = |h| match interval(0, 1) {
            pb::step_event::Event::Interval(i) => pb::step_event::Event::Interval(pb::Interval { hosts: h, ..i }),
            _ => unreachable!(),
        };
        st.on_event(0, claiming(1_000_000), &mut told).unwrap();
        st.on_event(1, claiming(0), &mut told).unwrap();
        let ready = st.merger.ready(&[false, false]);
        let weights: Vec<u32> = ready[0].parts.iter().map(|(_, p)| p.hosts).collect();
        assert_eq!(weights, [3, 1], "bounded by the group; 0 is one host");
        let done = pb::step_event::Event::Done(pb::Done { hosts: 99, ..Default::default() });
        st.on_event(0, done, &mut told).unwrap();
        assert_eq!(st.hosts_left[0], 3);
        assert_eq!(st.agents[0].named(), "relay a:1 (its 3 hosts)");
    }

    /// The step session fed events as two agents would send them, without gRPC: an interval
    /// is handed on once every host still there reported it; a host lost mid-step leaves the
    /// others' intervals going on, and the record says who was lost.
    #[test]
    fn intervals_are_handed_on_once_every_host_still_there_reported_them() {
        let w = workload();
        let spec = spec(&w);
        let mut st = Hosts::new(&spec, agents(), 0, true, Instant::now());
        let mut told = Told::default();
        for h in 0..2 {
            st.on_event(h, started(), &mut told).unwrap();
        }
        assert_eq!(told.started, 1, "one merged record, started by the first host");
        st.on_event(0, interval(0, 3), &mut told).unwrap();
        st.hand_on(&mut told);
        assert!(told.intervals.is_empty(), "host b has not reported interval 0 yet");
        st.on_event(1, interval(0, 2), &mut told).unwrap();
        st.hand_on(&mut told);
        assert_eq!(told.intervals, [0]);
        assert_eq!(told.host_intervals, [(0, 0), (1, 0)]);
        st.lose(1, "killed");
        st.on_event(0, interval(1, 3), &mut told).unwrap();
        st.hand_on(&mut told);
        assert_eq!(told.intervals, [0, 1], "host a alone carries interval 1");
        st.on_event(0, done(), &mut told).unwrap();
        assert!(st.done.iter().all(|&d| d));
        let m = st.conclude(&[None, None], None, false).unwrap();
        assert_eq!(m.merged.measured, 2);
        assert_eq!(m.lost, [1]);
        assert_eq!(m.losses[0].why, "killed");
        assert!(
            m.merged.notes.iter().any(|(c, n)| c == "host_lost" && n.starts_with("agent b:1 lost")),
            "{:?}",
            m.merged.notes
        );
        assert_eq!(m.merged.per_host.len(), 2);
        assert_eq!(m.merged.aborted, None);
    }

    /// An abort on one host, or an overload, ends the step on every host; an agent's error ends
    /// it with that error, named by the agent.
    #[test]
    fn an_abort_an_overload_and_an_error_are_taken_from_any_host() {
        let w = workload();
        let spec = spec(&w);
        let mut st = Hosts::new(&spec, agents(), 0, true, Instant::now());
        let mut told = Told::default();
        let abort = pb::Done { aborted: true, abort_reason: "on_error = abort: EIO".into(), ..Default::default() };
        st.on_event(0, pb::step_event::Event::Done(abort), &mut told).unwrap();
        assert_eq!(st.aborted.as_deref(), Some("agent a:1: on_error = abort: EIO"));
        let note = pb::Note { code: iocurve_engine::step::OVERLOADED.into(), message: "m".into() };
        let over = pb::Done { notes: vec![note], error: "disk gone".into(), ..Default::default() };
        st.on_event(1, pb::step_event::Event::Done(over), &mut told).unwrap();
        assert!(st.overloaded);
        match st.conclude(&[None, None], None, false) {
            Err(NetError::Failed(m)) => assert_eq!(m, "agent b:1: disk gone"),
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("an agent's error ends the step with it"),
        }
    }
}
