//! A simulated agent's step (issue 46, `iocurve agent --simulate N`): the control plane of a
//! thousand hosts measured on one machine. The agent is the real one — its listener, TLS, token
//! proof, claims, locks, target opening and audit trail — but its step runs no I/O threads: a
//! task waits for the agreed start on the agent's own (offset) clock, then streams the events a
//! real step streams (started, progress, one interval per interval of the workload, done), with
//! figures from a model of a storage system: latency grows with the I/Os outstanding, and
//! IOPS × mean latency = outstanding (Little's law), so the coordinator's analysis sees a
//! plausible curve. Each agent's figures differ a little (its index seeds them), as hosts do.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use iocurve_stats::{CpuUsage, IntervalStats};
use tokio::sync::mpsc;
use tonic::Status;

use crate::{pb, unix_ns, wire};

/// What makes one simulated agent differ from the others of its process.
#[derive(Clone, Copy, Debug)]
pub struct Simulated {
    /// Its place among the simulated agents (0, 1, …): its host name's suffix and its seed.
    pub index: u32,
    /// Its clock's offset from the process's (ns): what it answers to pings and reports as
    /// start times is the real clock plus this.
    pub offset_ns: i64,
    /// The modelled storage's latency at one I/O outstanding (ns).
    pub latency_ns: u64,
}

impl Simulated {
    /// The agent's clock.
    pub fn now(&self) -> i64 {
        unix_ns() + self.offset_ns
    }
}

/// A simulated agent's scratch file, whatever size the run asks for: never written, and
/// thousands of them share one disk.
pub const SCRATCH_BYTES: u64 = 1 << 20;

/// How often a simulated step says how far it is (a real step: four times a second).
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// The latency points of the model, as (share of I/Os in 1/100, multiple of the mean's base).
/// Their mean is 1.25 × the base.
const SHAPE: [(u64, f64); 4] = [(30, 0.5), (50, 1.0), (15, 2.0), (5, 6.0)];
const SHAPE_MEAN: f64 = 1.25;
/// How many distinct latencies each point spreads its I/Os over, evenly from 20 % below it to
/// 20 % above (the mean stays): a real interval's histogram holds hundreds to thousands of
/// buckets, and what a coordinator spends on a host's interval follows them (issue 46).
const SPREAD: u64 = 250;

/// What a simulated step needs of its request.
pub(super) struct SimStep {
    pub sim: Simulated,
    /// I/Os outstanding (workers × queue depth).
    pub outstanding: u64,
    pub bs: u64,
    pub read_pct: f64,
    pub warmup_s: f64,
    pub intervals: u32,
    pub interval_s: f64,
    /// The agreed start on this agent's clock (0: at once).
    pub start_at_unix_ns: i64,
    pub received_unix_ns: i64,
    pub host_target: u32,
}

/// The note every simulated step's `Done` carries: the coordinator turns the hosts' into one
/// flag of the step, so that no result, report or comparison passes modelled figures off as
/// measured ones.
pub const SIMULATED: &str = "simulated";

/// A call a simulated agent does not serve: refused by name, not done as something else.
pub fn refused(what: &str) -> Status {
    Status::invalid_argument(format!(
        "this is a simulated agent (iocurve agent --simulate): it models closed-loop steps of one block size on one target, not {what}; run the plan on real agents"
    ))
}

/// Why a simulated agent refuses a step it cannot model: what the model has no place for is
/// refused, not run as something else.
pub(super) fn unsupported(
    r: &pb::StepRequest,
    w: &iocurve_plan::Workload,
    faults: &[iocurve_plan::Fault],
) -> Option<Status> {
    let targets: usize = r.groups.iter().map(|g| g.targets.len()).sum();
    let what = if r.rate_iops != 0.0 {
        "a rate"
    } else if !r.replay.is_empty() {
        "a replay"
    } else if !r.members.is_empty() {
        "workloads at once"
    } else if w.verify {
        "verification"
    } else if r.write_iolog {
        "--write-iolog"
    } else if !faults.is_empty() {
        "injected faults"
    } else if w.trims() {
        "trims"
    } else if w.bs.len() != 1 || !w.write_bs.is_empty() || !w.trim_bs.is_empty() {
        "a mix of block sizes"
    } else if w.think.is_some() {
        "think time"
    } else if targets > 1 {
        "several targets on a host"
    } else {
        return None;
    };
    Some(refused(what))
}

/// The model's base latency (ns) at `outstanding` I/Os: flat to 8, then growing with the queue
/// as a device's saturated service does.
fn base_latency_ns(sim: &Simulated, outstanding: u64) -> f64 {
    let jitter = 1.0 + (splitmix(sim.index as u64) % 200) as f64 / 10_000.0;
    sim.latency_ns as f64 * (1.0 + outstanding.saturating_sub(8) as f64 / 8.0) * jitter / SHAPE_MEAN
}

/// One interval of the model: `seconds` samples of `interval_s` together, `index` seeding the
/// small variation between intervals.
pub(super) fn interval(s: &SimStep, index: u32) -> IntervalStats {
    let spp = iocurve_engine::samples_per_interval(s.interval_s) as usize;
    let sample_s = s.interval_s / spp as f64;
    let base = base_latency_ns(&s.sim, s.outstanding);
    let vary = 1.0 + (splitmix((s.sim.index as u64) << 32 | index as u64) % 100) as f64 / 5_000.0;
    // Little's law: IOPS = outstanding / mean latency; at least one I/O a sample (a latency
    // longer than the sample would complete none: the model is not for that).
    let per_sample = ((s.outstanding as f64 * sample_s * 1e9 / (base * SHAPE_MEAN * vary)).round() as u64).max(1);
    let counts = shares(per_sample);
    let mut stats = IntervalStats::with_samples(spp);
    for (&(_, times), n) in SHAPE.iter().zip(counts) {
        let exact = base * times * vary;
        let lat = exact as u64;
        let reads = (n as f64 * s.read_pct.clamp(0.0, 100.0) / 100.0).round() as u64;
        for (dir, k) in [(&mut stats.read, reads), (&mut stats.write, n - reads)] {
            if k == 0 {
                continue;
            }
            // The interval's histogram at once (its samples are alike).
            let k_all = k.saturating_mul(spp as u64);
            spread(&mut dir.hist, exact, k_all);
            dir.ops = dir.ops.saturating_add(k_all);
            dir.bytes = dir.bytes.saturating_add(k_all.saturating_mul(s.bs));
        }
        for si in 0..spp {
            let sample = &mut stats.samples[si];
            sample.ops = sample.ops.saturating_add(n);
            sample.bytes = sample.bytes.saturating_add(n.saturating_mul(s.bs));
            sample.lat_sum_ns = sample.lat_sum_ns.saturating_add(n.saturating_mul(lat));
            if n > 0 {
                // The histogram's longest: its spread is over all the interval's I/Os.
                sample.lat_max_ns = sample.lat_max_ns.max(spread_max(exact, n.saturating_mul(spp as u64)));
            }
            stats.seconds.record_n(si, lat, n);
        }
    }
    // The longest time without a completion: the mean latency over the I/Os outstanding.
    stats.max_gap_ns = Some((base * SHAPE_MEAN * vary / s.outstanding.max(1) as f64) as u64);
    stats.fill_one_target(s.host_target);
    stats
}

/// `k` I/Os of latency `lat` (ns) spread over up to [`SPREAD`] latencies around it.
fn spread(hist: &mut iocurve_stats::LatencyHistogram, lat: f64, k: u64) {
    let m = k.min(SPREAD);
    for j in 0..m {
        hist.record_n(spread_at(lat, j, m) as u64, k / m + u64::from(j < k % m));
    }
}

fn spread_at(lat: f64, j: u64, m: u64) -> f64 {
    lat * (0.8 + 0.4 * (j as f64 + 0.5) / m as f64)
}

/// The longest latency [`spread`] records for `n` I/Os.
fn spread_max(lat: f64, n: u64) -> u64 {
    let m = n.clamp(1, SPREAD);
    spread_at(lat, m - 1, m) as u64
}

/// `n` I/Os over the model's latency points by their shares, summing to `n` (largest
/// remainder: truncating each share lost the slow tail of a small count).
fn shares(n: u64) -> [u64; SHAPE.len()] {
    let mut out = SHAPE.map(|(share, _)| n.saturating_mul(share) / 100);
    let mut left = n - out.iter().sum::<u64>();
    let mut by_remainder: Vec<usize> = (0..SHAPE.len()).collect();
    // Ties to the slower point: the tail is what a small count must not lose.
    by_remainder.sort_by_key(|&i| std::cmp::Reverse((n.saturating_mul(SHAPE[i].0) % 100, i)));
    for i in by_remainder {
        if left == 0 {
            break;
        }
        out[i] += 1;
        left -= 1;
    }
    out
}

/// Runs the step: streams its events to `tx` until its last interval, a stop, the end the
/// coordinator set through `end`, or the coordinator gone (its stream closed).
pub(super) async fn run(
    s: SimStep,
    tx: &mpsc::Sender<Result<pb::StepEvent, Status>>,
    stop: &AtomicBool,
    end: &iocurve_engine::StepEnd,
    began: &AtomicBool,
) -> pb::Done {
    let send = |e: pb::step_event::Event| {
        let tx = tx.clone();
        async move { tx.send(Ok(pb::StepEvent { event: Some(e) })).await.is_ok() }
    };
    let ready = s.sim.now();
    // The start moment on the real clock.
    let start = if s.start_at_unix_ns == 0 { unix_ns() } else { s.start_at_unix_ns.saturating_sub(s.sim.offset_ns) };
    loop {
        let left = start.saturating_sub(unix_ns());
        if left <= 0 {
            break;
        }
        if stop.load(Ordering::Relaxed) || tx.is_closed() {
            return pb::Done {
                interrupted: true,
                error: "the step was called off before it started".into(),
                ..Default::default()
            };
        }
        tokio::time::sleep(Duration::from_nanos(left.min(50_000_000) as u64)).await;
    }
    let rounds = Arc::new(AtomicU32::new(s.intervals));
    let entered = Arc::new(AtomicU32::new(0));
    let _attached = end.attach_counted(rounds.clone(), entered.clone(), s.intervals);
    let spp = iocurve_engine::samples_per_interval(s.interval_s);
    // The set-up heartbeat ends here, as a real step's does at its start.
    began.store(true, Ordering::Relaxed);
    let now = s.sim.now();
    if !send(pb::step_event::Event::Started(pb::Started {
        started_unix_ns: now,
        threads: 1,
        sample_s: s.interval_s / spp as f64,
        received_unix_ns: s.received_unix_ns,
        ready_unix_ns: ready,
        moment_unix_ns: now,
        hosts: 0,
    }))
    .await
    {
        return pb::Done { interrupted: true, ..Default::default() };
    }
    // (f64 to i64 saturates: a boundary beyond the year 2262 is never reached.)
    let boundary = |i: u32| start.saturating_add(((s.warmup_s + i as f64 * s.interval_s) * 1e9) as i64);
    let (mut ops, mut bytes, mut lat_sum) = (0u64, 0u64, 0u64);
    let mut i = 0u32;
    let mut interrupted = false;
    loop {
        // Interval i + 1 begins: said before the count it ends after is read.
        entered.store(i + 1, Ordering::SeqCst);
        if i >= rounds.load(Ordering::SeqCst) {
            break;
        }
        let until = boundary(i + 1);
        loop {
            let now = unix_ns();
            if now >= until {
                break;
            }
            if stop.load(Ordering::Relaxed) || tx.is_closed() {
                interrupted = true;
                break;
            }
            tokio::time::sleep(Duration::from_nanos(((until - now) as u64).min(PROGRESS_EVERY.as_nanos() as u64)))
                .await;
            let elapsed_s = (unix_ns() - start) as f64 / 1e9;
            let _ = tx.try_send(Ok(pb::StepEvent {
                event: Some(pb::step_event::Event::Progress(pb::Progress {
                    elapsed_s,
                    warmup: elapsed_s < s.warmup_s,
                    ops,
                    bytes,
                    lat_sum_ns: lat_sum,
                    inflight: s.outstanding,
                })),
            }));
        }
        if interrupted {
            break;
        }
        let stats = interval(&s, i);
        ops = ops.saturating_add(stats.ops());
        bytes = bytes.saturating_add(stats.bytes());
        lat_sum = stats.samples.iter().fold(lat_sum, |a, x| a.saturating_add(x.lat_sum_ns));
        // Hosts differ a little here too: a merge that weighed them wrongly would show.
        let user = 0.01 * f64::from(1 + s.sim.index % 4);
        let cpu = CpuUsage { user, system: 0.01, ..Default::default() };
        if !send(pb::step_event::Event::Interval(wire::interval_to(i, &stats, &cpu, s.interval_s))).await {
            interrupted = true;
            break;
        }
        i += 1;
    }
    pb::Done {
        interrupted,
        notes: vec![pb::Note {
            code: SIMULATED.into(),
            message: "a simulated agent (iocurve agent --simulate): its figures are modelled, not measured".into(),
        }],
        ..Default::default()
    }
}

/// A well-mixed 64-bit value of `x` (SplitMix64's finaliser).
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(outstanding: u64, interval_s: f64) -> SimStep {
        SimStep {
            sim: Simulated { index: 3, offset_ns: 0, latency_ns: 1_000_000 },
            outstanding,
            bs: 4096,
            read_pct: 70.0,
            warmup_s: 0.0,
            intervals: 2,
            interval_s,
            start_at_unix_ns: 0,
            received_unix_ns: 0,
            host_target: 0,
        }
    }

    #[test]
    fn a_modelled_interval_keeps_littles_law_the_mix_and_its_own_counts() {
        for (outstanding, interval_s) in [(1, 1.0), (4, 0.5), (64, 2.0), (512, 1.0)] {
            let s = step(outstanding, interval_s);
            let st = interval(&s, 0);
            let ops = st.ops();
            assert!(ops > 0);
            let iops = ops as f64 / interval_s;
            let mean_s = st.combined_hist().mean_ns() / 1e9;
            let little = iops * mean_s;
            assert!((little - outstanding as f64).abs() / (outstanding as f64) < 0.03, "{outstanding}: {little}");
            let reads = st.read.ops as f64 / ops as f64;
            assert!((reads - 0.7).abs() < 0.02, "{reads}");
            assert_eq!(st.samples.iter().map(|x| x.ops).sum::<u64>(), ops);
            assert_eq!(st.bytes(), ops * 4096);
            assert_eq!(st.targets.len(), 1);
        }
    }

    #[test]
    fn shares_add_up_to_the_count_and_keep_the_tail_of_small_counts() {
        for n in [0u64, 1, 3, 10, 19, 20, 99, 1000, 123_457] {
            let c = shares(n);
            assert_eq!(c.iter().sum::<u64>(), n, "{n}: {c:?}");
            for ((share, _), k) in SHAPE.iter().zip(c) {
                let exact = n as f64 * *share as f64 / 100.0;
                assert!((k as f64 - exact).abs() < 1.0, "{n}: {c:?}");
            }
        }
        // 10 I/Os a sample: the slow tail (5 %) rounds up where truncation dropped it.
        assert_eq!(shares(10), [3, 5, 1, 1]);
    }

    #[test]
    fn a_long_latency_still_completes_and_keeps_the_gap_below_the_latency() {
        let mut s = step(1, 1.0);
        s.sim.latency_ns = 1_000_000_000;
        let st = interval(&s, 0);
        assert!(st.ops() >= 1);
        let mut busy = step(2048, 1.0);
        busy.sim.latency_ns = 1_000_000;
        let st = interval(&busy, 0);
        assert!(st.max_gap_ns.unwrap() < 10_000_000, "{:?}", st.max_gap_ns);
    }

    #[test]
    fn latency_grows_with_the_queue_and_hosts_differ_a_little() {
        let a = interval(&step(1, 1.0), 0).combined_hist().mean_ns();
        let b = interval(&step(64, 1.0), 0).combined_hist().mean_ns();
        assert!(b > 4.0 * a, "{a} {b}");
        let mut other = step(1, 1.0);
        other.sim.index = 4;
        let c = interval(&other, 0).combined_hist().mean_ns();
        assert!(c != a && (c - a).abs() / a < 0.05, "{a} {c}");
    }
}
