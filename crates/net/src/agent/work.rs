//! The agent's blocking work: a step with its events streamed to the coordinator, and a
//! precondition pass over its targets.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use iocurve_engine::keeper::{Flushed, KeptMap, MapKeeper};
use iocurve_engine::precondition::{self, PreConfig, PreProgress, PreState};
use iocurve_engine::{StepConfig, StepObserver, StepProgress, TargetSet, host, run_step};
use iocurve_plan::{Backend, Fault, Workload};
use iocurve_stats::{CpuUsage, IntervalStats, StepRecord};
use tokio::sync::mpsc;
use tonic::Status;

use crate::{pb, unix_ns, wire};

/// Preconditions every target in turn, streaming each one's state; how the pass ended.
pub(super) fn precondition_blocking(
    targets: &TargetSet,
    cfg: &PreConfig,
    resume: &[pb::PreconditionResume],
    stop: &AtomicBool,
    stuck_after: Duration,
    map: Option<&iocurve_engine::verify::GenMap>,
    tx: &mpsc::Sender<Result<pb::PreconditionEvent, Status>>,
) -> pb::PreconditionDone {
    let (mut notes, mut warnings) = (Vec::new(), Vec::new());
    let fail = |e: iocurve_engine::EngineError, notes: Vec<String>, warnings: Vec<String>| pb::PreconditionDone {
        interrupted: true,
        error: e.to_string(),
        input: e.is_input_error(),
        notes,
        warnings,
    };
    for (i, t) in targets.targets.iter().enumerate() {
        let bs = precondition::write_size(t.size, t.logical_block, cfg.bs);
        let n = precondition::chunks(t.size, bs);
        // A scratch file created now is new: whatever the coordinator kept is of another file.
        let from = resume
            .iter()
            .find(|r| r.target == i as u32 && r.path == t.path.display().to_string() && r.bs == bs && !t.created)
            .and_then(|r| PreState::parse(&r.state_json, n))
            .unwrap_or_default();
        let send = |p: &PreProgress, complete: bool| {
            let event = pb::PreconditionProgress {
                target: i as u32,
                path: t.path.display().to_string(),
                bs,
                state_json: p.state.to_json(),
                done_bytes: p.done_bytes,
                total_bytes: p.total_bytes,
                session_bytes: p.session_bytes,
                elapsed_s: p.elapsed.as_secs_f64(),
                complete,
            };
            let e = pb::PreconditionEvent { event: Some(pb::precondition_event::Event::Progress(event)) };
            if tx.blocking_send(Ok(e)).is_err() {
                // The coordinator is gone: stop writing.
                stop.store(true, Ordering::Relaxed);
            }
        };
        let mut last = None;
        let cfg = PreConfig { bs, ..*cfg };
        let pass = precondition::target_pass(t, &cfg, &from, stop, Duration::from_secs(1), stuck_after, &mut |p| {
            send(p, false);
            last = Some(p.clone());
        });
        // Whatever the pass wrote holds no header of a verifying write: the blocks the run's map
        // knew of this target are unknown now, not lost (a later read would call them lost).
        let wrote = last.as_ref().is_some_and(|p| p.session_bytes > 0);
        if wrote && let Some(map) = map {
            let path = t.path.display().to_string();
            let n = map.forget_target(&path);
            if n > 0 {
                notes.push(format!(
                    "verification: preconditioning wrote over {path}: the {n} blocks the map knew are forgotten (unknown, not lost)"
                ));
            }
        }
        let pass = match pass {
            Ok(p) => p,
            Err(e) => return fail(e, notes, warnings),
        };
        notes.extend(pass.notes);
        warnings.extend(pass.warnings);
        if let Some(p) = last {
            send(&PreProgress { state: pass.state, ..p }, pass.complete);
        }
        if !pass.complete {
            return pb::PreconditionDone { interrupted: true, notes, warnings, ..Default::default() };
        }
    }
    pb::PreconditionDone { notes, warnings, ..Default::default() }
}

/// Streams a step's events to the coordinator. A closed stream — the coordinator is gone:
/// killed, or silent past the lease (HTTP/2 keep-alive pings unanswered) — stops the step's I/O
/// at once.
struct Streamer<'a> {
    tx: &'a mpsc::Sender<Result<pb::StepEvent, Status>>,
    abort: &'a AtomicBool,
    /// Saves the verification map at every interval end (after flushing the targets), so that
    /// a killed agent loses at most an interval of acknowledged writes.
    keeper: Option<MapKeeper>,
    /// When the request came, and when the step was set up (0: not waited for a start).
    received_unix_ns: i64,
    ready_unix_ns: &'a std::sync::atomic::AtomicI64,
    /// The agreed start moment (Unix ns; 0: none), and when this thread opened the gate for it.
    start_at_unix_ns: i64,
    woke_unix_ns: &'a std::sync::atomic::AtomicI64,
    /// This agent's live metrics (its exporter and host name), the step's live figures and
    /// the last progress they came from.
    metrics: Option<(&'a iocurve_metrics::Exporter, &'a str)>,
    gauges: iocurve_metrics::LiveGauges,
    began: &'a AtomicBool,
}

impl Streamer<'_> {
    fn send(&self, event: pb::step_event::Event) {
        if self.tx.blocking_send(Ok(pb::StepEvent { event: Some(event) })).is_err() {
            self.abort.store(true, Ordering::Relaxed);
        }
    }
}

impl StepObserver for Streamer<'_> {
    fn started(&mut self, rec: &StepRecord) {
        self.began.store(true, Ordering::Relaxed);
        // When its latest I/O thread woke for the moment (the engine's), not this report's time.
        let started_unix_ns = rec.started_unix_ns.unwrap_or_else(unix_ns);
        self.send(pb::step_event::Event::Started(pb::Started {
            started_unix_ns,
            threads: rec.threads as u32,
            sample_s: rec.sample_s,
            received_unix_ns: self.received_unix_ns,
            ready_unix_ns: self.ready_unix_ns.load(Ordering::Relaxed),
            moment_unix_ns: rec.moment_unix_ns.unwrap_or(started_unix_ns),
            hosts: 0,
        }));
        if self.start_at_unix_ns != 0 {
            tracing::debug!(
                // When the latest I/O thread woke, and when this thread opened the gate (about
                // GATE_LEAD_NS before the moment), both from the moment.
                started_after_ns = started_unix_ns - self.start_at_unix_ns,
                gate_after_ns = self.woke_unix_ns.load(Ordering::Relaxed) - self.start_at_unix_ns,
                "step started"
            );
        }
    }

    fn progress(&mut self, p: &StepProgress) {
        if self.tx.is_closed() {
            if !self.abort.swap(true, Ordering::Relaxed) {
                tracing::warn!("coordinator gone: step stopped");
            }
            return;
        }
        // Live totals, and the heartbeat the coordinator watches. Never waits: a progress
        // event that does not fit is dropped, the next one carries the totals.
        let event = pb::step_event::Event::Progress(wire::progress_to(p));
        let _ = self.tx.try_send(Ok(pb::StepEvent { event: Some(event) }));
        if let Some((e, _)) = self.metrics {
            self.gauges.progress(p, e);
        }
    }

    fn interval(&mut self, index: u32, stats: &IntervalStats, cpu: &CpuUsage, duration_s: f64) {
        if let Some(k) = &mut self.keeper {
            k.request();
            if let Some(e) = k.take_error() {
                tracing::warn!("{e}");
            }
        }
        self.send(pb::step_event::Event::Interval(wire::interval_to(index, stats, cpu, duration_s)));
        if let Some((e, host)) = self.metrics {
            e.interval(&self.gauges.live.workload, host, stats, cpu);
            e.stall(stats);
        }
    }
}

/// A step as the agent runs it.
pub(super) struct Step<'a> {
    pub(super) r: &'a pb::StepRequest,
    /// When the request came (Unix ns).
    pub(super) received_unix_ns: i64,
    pub(super) w: &'a Workload,
    pub(super) backend: Backend,
    /// A concurrent step's members (workload, workers, back-end); empty: the step runs `w`.
    pub(super) members: &'a [(Workload, u32, Backend)],
    pub(super) targets: &'a TargetSet,
    pub(super) faults: &'a [Fault],
    /// A replay step's share of the trace.
    pub(super) replay: Option<&'a iocurve_engine::replay::ReplayShare>,
    /// `write_iolog`: where the step notes its I/Os.
    pub(super) iolog: Option<Arc<iocurve_engine::iolog::IoLog>>,
    /// The verification map of a verifying step (saved by the step), with its journal.
    pub(super) kept: Option<KeptMap>,
    pub(super) stop: &'a AtomicBool,
    /// Where the coordinator ends the step once steady.
    pub(super) end: &'a iocurve_engine::StepEnd,
    /// Hosts start together (an agent of a multi-host run, not a local run's own).
    pub(super) synchronized: bool,
    /// This agent's live metrics and its host name.
    pub(super) metrics: Option<(&'a iocurve_metrics::Exporter, &'a str)>,
    /// Set once the step started: the heartbeat of its set-up ends.
    pub(super) began: &'a AtomicBool,
}

/// Runs the step, streaming its events; returns how it ended.
pub(super) fn run_blocking(step: &Step, tx: &mpsc::Sender<Result<pb::StepEvent, Status>>) -> pb::Done {
    let Step { r, w, backend, targets, faults, stop, .. } = *step;
    let abort = Arc::new(AtomicBool::new(false));
    // Made now, not between the synchronized start and the first I/O.
    iocurve_engine::data::Pool::shared();
    // The engine sets everything up first, then waits here for the agreed moment, unless the
    // coordinator goes away (or stops the step) meanwhile.
    let ready = std::sync::atomic::AtomicI64::new(0);
    let called_off = AtomicBool::new(false);
    // This thread opens the gate a little before the agreed moment (the engine holds it at
    // real-time priority meanwhile, in a synchronized start); the I/O threads then wait for the
    // moment themselves, while this thread reports the start after them.
    // A local run's in-process agent starts at once: only agents of several hosts wait so.
    let synchronized = step.synchronized && r.start_at_unix_ns != 0;
    let woke = std::sync::atomic::AtomicI64::new(0);
    let start_at = || {
        ready.store(unix_ns(), Ordering::Relaxed);
        loop {
            if tx.is_closed() || stop.load(std::sync::atomic::Ordering::Relaxed) {
                called_off.store(true, Ordering::Relaxed);
                return None;
            }
            // The moment on the monotonic clock the threads sleep by: both clocks read together.
            let (mono, now) = (Instant::now(), unix_ns());
            let left = r.start_at_unix_ns.saturating_sub(now);
            if left <= GATE_LEAD_NS {
                woke.store(now, Ordering::Relaxed);
                return Some(mono + Duration::from_nanos(left.max(0) as u64));
            }
            if left > 60_000_000 {
                // In steps short enough to notice a coordinator gone.
                std::thread::sleep(Duration::from_millis(50));
            } else {
                // The wall clock's moment: a clock stepped meanwhile is followed.
                host::sleep_until_ns(libc::CLOCK_REALTIME, r.start_at_unix_ns - GATE_LEAD_NS);
            }
        }
    };
    let threads = if r.threads == 0 { host::cores() } else { r.threads as usize };
    let cfg = StepConfig {
        workload: w,
        workers: r.workers,
        backend,
        threads,
        targets,
        stop,
        faults,
        verify: step.kept.as_ref().map(|k| k.map.clone()),
        journal: step.kept.as_ref().and_then(|k| k.journal.clone()),
        abort: Some(abort.clone()),
        start_at: Some(&start_at),
        synchronized,
        rate: super::rate_share(r),
        replay: step.replay,
        host: r.host,
        // The coordinator judges steady state on every host's intervals together.
        end: Some(step.end),
        iolog: step.iolog.clone(),
    };
    let gauges = iocurve_metrics::LiveGauges::new(iocurve_metrics::Live {
        workload: w.name.clone(),
        // Its place in the ramp is the coordinator's to know.
        step: 0,
        steps: 0,
        workers: r.workers,
        ..Default::default()
    });
    let keeper = match &step.kept {
        Some(k) => match Flushed::of(targets).and_then(|f| MapKeeper::start(k.clone(), f)) {
            Ok(keeper) => Some(keeper),
            Err(e) => {
                return pb::Done {
                    interrupted: true,
                    error: format!("cannot start saving the verification map: {e}"),
                    ..Default::default()
                };
            }
        },
        None => None,
    };
    let mut streamer = Streamer {
        tx,
        abort: &abort,
        keeper,
        received_unix_ns: step.received_unix_ns,
        ready_unix_ns: &ready,
        start_at_unix_ns: r.start_at_unix_ns,
        woke_unix_ns: &woke,
        metrics: step.metrics,
        gauges,
        began: step.began,
    };
    if let Some((e, _)) = step.metrics {
        e.live(Some(streamer.gauges.live.clone()));
    }
    // A step called off before its start (the coordinator went away) ends in an error no one
    // reads.
    let ran = if step.members.is_empty() {
        run_step(&cfg, &mut streamer)
    } else {
        let members: Vec<iocurve_engine::together::Member> = step
            .members
            .iter()
            .map(|(w, workers, backend)| iocurve_engine::together::Member {
                workload: w,
                workers: *workers,
                backend: *backend,
            })
            .collect();
        iocurve_engine::together::run_members(&cfg, &members, &mut streamer)
    };
    if let Some((e, _)) = step.metrics {
        e.live(None);
    }
    // The map as the step left it, for the next step, run and final pass: flushed and saved
    // before the step says it is done (its descriptors of the targets closed with it).
    // As long as the step waits for a stuck I/O (`--stuck-after-s`), 30 s without it.
    let wait = w.stuck_after_s.filter(|s| s.is_finite() && *s > 0.0).map_or(MAP_SAVE_WAIT, Duration::from_secs_f64);
    let saved = streamer.keeper.take().map(|k| k.finish(wait)).unwrap_or(Ok(()));
    let mut done = step_done(ran, &called_off);
    if let Err(e) = saved
        && done.error.is_empty()
    {
        done.error = e;
    }
    done
}

/// The step's I/O log as the events that carry it to the coordinator (at least one, which says
/// how many I/Os were left out).
pub(super) fn iolog_parts(log: &iocurve_engine::iolog::IoLog) -> Vec<pb::IoLogPart> {
    let (ios, left_out) = log.take();
    crate::wire::iolog_parts(&ios, left_out)
}

/// How long the step's end waits for the map's last save (a flush of the targets) unless the
/// workload says (`stuck_after_s`): as long as a pass waits for a read before it takes the
/// storage for stopped.
const MAP_SAVE_WAIT: Duration = Duration::from_secs(iocurve_engine::PASS_STUCK_AFTER_S as u64);

/// How a step ended, as `Done` says it.
fn step_done(ran: Result<StepRecord, iocurve_engine::EngineError>, called_off: &AtomicBool) -> pb::Done {
    match ran {
        Ok(rec) => wire::done_to(&rec),
        // Stopped (Ctrl-C, another host lost) or abandoned before the start: nothing ran, which
        // is no error.
        Err(_) if called_off.load(Ordering::Relaxed) => pb::Done { interrupted: true, ..Default::default() },
        Err(e) => pb::Done { interrupted: true, error: e.to_string(), input: e.is_input_error(), ..Default::default() },
    }
}

/// How long before the agreed moment an agent opens its step's gate: time for its I/O threads
/// to wake from it and go to sleep again until the moment, on a host shared by many agents too
/// (64 on 2 cores take about a millisecond). A stop within it no longer calls the step off: the
/// step starts and stops at once, with nothing measured.
const GATE_LEAD_NS: i64 = 5_000_000;
