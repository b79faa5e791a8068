//! The schedule of a rate step: when each I/O is meant to be issued (its intended issue time),
//! independent of when the storage lets it go. Latency is measured from these times, so a
//! stall delays the schedule's I/Os and shows in their response time instead of vanishing from
//! it (no coordinated omission).
//!
//! The run's schedule is one sequence at the run's rate, dealt out to streams: every I/O
//! thread of every host is one stream. Uniform arrivals interleave exactly (stream k of N gets
//! the times (k + jN) / rate); Poisson streams are independent Poisson processes at rate / N,
//! whose superposition is a Poisson process at the run's rate. Each stream is seeded from the
//! plan's seed and its number, so the same plan gives the same intended times.
//!
//! On/off bursts (`bursts = "100ms/900ms"`) run the schedule on a clock that stands still while
//! off: it is made at the rate that keeps the mean at the target (×(on+off)/on) in "on time",
//! and each on-time instant maps to the wall time of the same point of its on phase. The step
//! starts with an on phase.

use std::sync::{Arc, Mutex};

use iocurve_plan::{Arrival, Bursts, Overload};

use crate::rng::Rng;

/// The highest rate a step may be driven at (IOPS, all hosts): beyond it no host keeps up, and
/// a schedule that fine would only cost time to walk.
pub const MAX_IOPS: f64 = 1e9;

/// Which part of the run's schedule one I/O thread issues.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateShare {
    /// IOPS of the whole run (every host together).
    pub iops: f64,
    /// This host's place among the run's hosts, and their number.
    pub host: u32,
    pub hosts: u32,
}

/// The intended issue times of one stream, in ns since the step's start (warm-up included).
#[derive(Debug, Clone)]
pub struct Arrivals {
    kind: Arrival,
    /// Mean gap of this stream, in ns.
    gap_ns: f64,
    /// Uniform: the stream's offset and the index of its next time.
    offset_ns: f64,
    index: u64,
    /// Poisson: the next time, accumulated. (With bursts, this and the uniform times are on
    /// the on-time clock.)
    next_ns: f64,
    rng: Rng,
    /// On and off phases in ns.
    bursts: Option<(f64, f64)>,
    /// A replay: this stream's I/Os (`index` the next) and the speed their trace times are
    /// divided by.
    replay: Option<(Arc<[crate::replay::ReplayIo]>, f64)>,
}

impl Arrivals {
    /// Stream `stream` of `streams` of a schedule at `iops` (> 0).
    pub fn new(kind: Arrival, iops: f64, stream: u64, streams: u64, seed: u64) -> Self {
        let streams = streams.max(1);
        let gap_ns = 1e9 * streams as f64 / iops;
        let mut rng = Rng::new(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ stream.wrapping_mul(0xd1b5_4a32_d192_ed03));
        let offset_ns = 1e9 * stream as f64 / iops;
        let next_ns = match kind {
            Arrival::Uniform => offset_ns,
            Arrival::Poisson => exponential(&mut rng, gap_ns),
        };
        Arrivals { kind, gap_ns, offset_ns, index: 0, next_ns, rng, bursts: None, replay: None }
    }

    /// A replay's stream: `ios` at their trace times over `speed` (never due once all went).
    pub fn replay(ios: Arc<[crate::replay::ReplayIo]>, speed: f64) -> Self {
        let mut a = Arrivals::new(Arrival::Uniform, 1.0, 0, 1, 0);
        a.next_ns = ios.first().map_or(f64::INFINITY, |io| io.t_ns as f64 / speed);
        a.replay = Some((ios, speed));
        a
    }

    /// A replay's next I/O (None: not a replay, or every I/O went).
    #[inline]
    pub fn op(&self) -> Option<crate::ops::IoOp> {
        self.replay.as_ref().and_then(|(ios, _)| ios.get(self.index as usize)).map(|io| io.op)
    }

    /// The same schedule in on/off bursts of the same mean rate.
    pub fn with_bursts(mut self, bursts: Option<Bursts>) -> Self {
        if let Some(b) = bursts {
            let f = 1.0 / b.peak_factor();
            self.gap_ns *= f;
            self.offset_ns *= f;
            self.next_ns *= f;
            self.bursts = Some((b.on_ns as f64, b.off_ns as f64));
        }
        self
    }

    /// The wall time of an on-time instant.
    #[inline]
    fn wall(&self, on_time: f64) -> f64 {
        match self.bursts {
            None => on_time,
            Some((on, off)) => {
                let phases = (on_time / on).floor();
                phases * (on + off) + (on_time - phases * on)
            }
        }
    }

    /// The on time that has passed by a wall time.
    fn on_time(&self, wall: f64) -> f64 {
        match self.bursts {
            None => wall,
            Some((on, off)) => {
                let periods = (wall / (on + off)).floor();
                periods * on + (wall - periods * (on + off)).min(on)
            }
        }
    }

    /// The stream of I/O thread `thread` of `threads` on the host of `share`.
    pub fn for_thread(kind: Arrival, share: &RateShare, thread: usize, threads: usize, seed: u64) -> Self {
        let hosts = share.hosts.max(1) as u64;
        // Interleaved by host first: host h's threads take streams h, h + hosts, …
        let stream = share.host as u64 + hosts * thread as u64;
        Arrivals::new(kind, share.iops, stream, hosts * threads.max(1) as u64, seed)
    }

    /// The intended issue time of the next I/O, in ns since the step's start.
    #[inline]
    pub fn peek(&self) -> u64 {
        self.wall(self.next_ns) as u64
    }

    /// Skips every intended time before `end_ns`, handing each to `each` as (time, 1). A
    /// million are walked one by one; the rest of a schedule that far behind go as one batch
    /// at the middle of their span, counted by the rate (exact for uniform arrivals). Returns
    /// how many were skipped.
    pub fn skip_until(&mut self, end_ns: u64, each: &mut dyn FnMut(u64, u64)) -> u64 {
        let mut n = 0u64;
        while self.peek() < end_ns {
            if n >= 1_000_000
                && let Some((ios, speed)) = &self.replay
            {
                // The rest before `end_ns` found in the sorted times at once.
                let from = self.index as usize;
                let end = end_ns as f64 * *speed;
                let rest = ios[from..].partition_point(|io| (io.t_ns as f64) < end) as u64;
                each(((self.next_ns + end_ns as f64) / 2.0) as u64, rest);
                self.index += rest;
                self.next_ns = ios.get(self.index as usize).map_or(f64::INFINITY, |io| io.t_ns as f64 / *speed);
                return n + rest;
            }
            if n >= 1_000_000 {
                let from = self.next_ns;
                let end = self.on_time(end_ns as f64);
                let rest = ((end - from) / self.gap_ns).ceil().max(1.0);
                self.index += rest as u64;
                self.next_ns = match self.kind {
                    Arrival::Uniform => self.uniform_time(),
                    Arrival::Poisson => from + rest * self.gap_ns,
                };
                each(self.wall((from + end) / 2.0) as u64, rest as u64);
                return n + rest as u64;
            }
            each(self.peek(), 1);
            self.advance();
            n += 1;
        }
        n
    }

    /// The uniform time of the current index: from the index, not by adding gaps, so that no
    /// rounding error accumulates.
    fn uniform_time(&self) -> f64 {
        self.offset_ns + self.index as f64 * self.gap_ns
    }

    /// Moves on to the next intended time.
    #[inline]
    pub fn advance(&mut self) {
        if let Some((ios, speed)) = &self.replay {
            self.index += 1;
            self.next_ns = ios.get(self.index as usize).map_or(f64::INFINITY, |io| io.t_ns as f64 / *speed);
            return;
        }
        match self.kind {
            Arrival::Uniform => {
                self.index += 1;
                self.next_ns = self.uniform_time();
            }
            Arrival::Poisson => self.next_ns += exponential(&mut self.rng, self.gap_ns),
        }
    }
}

/// Where an I/O thread of a rate step takes its intended issue times from.
pub(crate) enum Source {
    /// Its own part of the run's schedule: threads with many slots (io_uring, null), which
    /// issue an I/O whenever one of their slots is free.
    Own(Arrivals),
    /// The host's part, shared by its threads of one slot each (psync): a thread that is free
    /// claims the next time, so an I/O waits only while every thread is busy — not behind the
    /// one I/O of the thread it happened to be dealt to.
    Shared(Arc<Mutex<SharedSchedule>>),
}

/// A schedule shared by the threads of one host, and how many of them have no I/O out (free:
/// waiting for their time, late to wake, or not started yet).
pub(crate) struct SharedSchedule {
    arrivals: Arrivals,
    idle: u32,
}

impl SharedSchedule {
    /// The schedule of `threads` threads, all free.
    pub fn new(arrivals: Arrivals, threads: usize) -> Arc<Mutex<SharedSchedule>> {
        Arc::new(Mutex::new(SharedSchedule { arrivals, idle: threads as u32 }))
    }
}

fn lock(m: &Mutex<SharedSchedule>) -> std::sync::MutexGuard<'_, SharedSchedule> {
    // A poisoned lock only means a thread panicked; the schedule itself stays consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A rate step's pacing in one I/O thread: its source of intended times, what it does when no
/// slot is free, and the slots free to take the next due I/O.
pub(crate) struct RateMode {
    source: Source,
    pub overload: Overload,
    pub free: Vec<u32>,
    /// A shared schedule: the time this thread claimed, and whether every thread was busy when
    /// it came due.
    claimed: Option<(u64, bool)>,
    /// A replay's I/O of the claimed time.
    claimed_op: Option<crate::ops::IoOp>,
    /// Since when this thread's slot is free (ns since the step start): a time due before it
    /// found this thread busy.
    free_since: u64,
    /// The same schedule again, walked only to count what was due in each interval (issued
    /// then, later or never): the thread's own, or the host's on thread 0 of a shared one.
    counter: Option<Arrivals>,
}

impl RateMode {
    pub fn new(source: Source, overload: Overload, counter: Option<Arrivals>) -> Self {
        RateMode { source, overload, free: Vec::new(), claimed: None, claimed_op: None, free_since: 0, counter }
    }

    /// The intended times before `until` not counted yet, those at or after `from` counted:
    /// the I/Os due in that span, whether issued in it, later or never. Called as time passes,
    /// so that each is counted in the interval its intended time falls in (0 on a thread that
    /// keeps no count). A counter more than a million times behind (a thread blocked that long)
    /// counts the rest by the rate, as [`Arrivals::skip_until`] does: exact for uniform
    /// arrivals, within about √N for Poisson ones.
    pub fn count_due(&mut self, from: u64, until: u64) -> u64 {
        let Some(c) = &mut self.counter else { return 0 };
        // Those before `from` (the warm-up) are passed over first: a batch never straddles it.
        c.skip_until(from, &mut |_, _| {});
        let mut n = 0;
        c.skip_until(until, &mut |_, k| n += k);
        n
    }

    /// A thread with one slot of a shared schedule: it takes a time only while its slot is free.
    pub fn shared(&self) -> bool {
        matches!(self.source, Source::Shared(_))
    }

    /// The next intended time of this thread at `now`; a shared schedule's is claimed here.
    pub fn next_due(&mut self, now: u64) -> u64 {
        match &mut self.source {
            Source::Own(a) => a.peek(),
            Source::Shared(m) => {
                if let Some((due, _)) = self.claimed {
                    return due;
                }
                let mut sh = lock(m);
                let due = sh.arrivals.peek();
                self.claimed_op = sh.arrivals.op();
                sh.arrivals.advance();
                // Late only when it came due while this thread was busy and no other thread is
                // free now (one that is was free then too, only late to wake or to start): every
                // thread was busy when it came due.
                let late = due < self.free_since && due < now && sh.idle <= 1;
                self.claimed = Some((due, late));
                due
            }
        }
    }

    /// A replay's I/O of the time `next_due` gave (None: not a replay).
    pub fn due_op(&self) -> Option<crate::ops::IoOp> {
        match &self.source {
            Source::Own(a) => a.op(),
            Source::Shared(_) => self.claimed_op,
        }
    }

    /// The time the thread waits for, without claiming one: None while it holds no claim.
    pub fn waiting_for(&self) -> Option<u64> {
        match &self.source {
            Source::Own(a) => Some(a.peek()),
            Source::Shared(_) => self.claimed.map(|c| c.0),
        }
    }

    /// The time from `next_due` was issued or dropped.
    pub fn taken(&mut self) {
        match &mut self.source {
            Source::Own(a) => a.advance(),
            Source::Shared(_) => self.claimed = None,
        }
    }

    /// An I/O went out on a slot of this thread.
    pub fn issued(&mut self) {
        if let Source::Shared(m) = &self.source {
            let mut sh = lock(m);
            sh.idle = sh.idle.saturating_sub(1);
        }
    }

    /// A slot of this thread is free again at `now`.
    pub fn freed(&mut self, slot: u32, now: u64) {
        self.free.push(slot);
        self.free_since = now;
        if let Source::Shared(m) = &self.source {
            lock(m).idle += 1;
        }
    }

    /// Every slot was busy when the next I/O came due: for a thread's own schedule, no slot is
    /// free now; for a shared one, the thread claimed a time already past (no thread was free
    /// to claim it before it came due).
    pub fn overloaded(&self) -> bool {
        match &self.source {
            Source::Own(_) => self.free.is_empty(),
            Source::Shared(_) => self.claimed.is_some_and(|(_, late)| late),
        }
    }

    /// Skips every time before `end_ns` not issued (see [`Arrivals::skip_until`]).
    pub fn skip_until(&mut self, end_ns: u64, each: &mut dyn FnMut(u64, u64)) -> u64 {
        match &mut self.source {
            Source::Own(a) => a.skip_until(end_ns, each),
            Source::Shared(m) => {
                let mut sh = lock(m);
                let mut n = 0;
                self.claimed_op = None;
                if let Some((due, _)) = self.claimed.take()
                    && due < end_ns
                {
                    each(due, 1);
                    n += 1;
                }
                n + sh.arrivals.skip_until(end_ns, each)
            }
        }
    }
}

/// An exponentially distributed gap with mean `mean_ns`.
fn exponential(rng: &mut Rng, mean_ns: f64) -> f64 {
    // Uniform in (0, 1]: 53 random bits, never 0 (ln 0 is infinite).
    let u = ((rng.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64;
    -u.ln() * mean_ns
}

#[cfg(test)]
mod tests {
    use super::*;

    fn times(a: &mut Arrivals, until_ns: u64) -> Vec<u64> {
        let mut v = Vec::new();
        while a.peek() < until_ns {
            v.push(a.peek());
            a.advance();
        }
        v
    }

    #[test]
    fn uniform_streams_interleave_into_the_run_s_schedule() {
        // 3 streams at 1000 IOPS for 1 s: together exactly every 1 ms, each once.
        let mut all: Vec<u64> =
            (0..3).flat_map(|k| times(&mut Arrivals::new(Arrival::Uniform, 1000.0, k, 3, 7), 1_000_000_000)).collect();
        all.sort_unstable();
        assert_eq!(all.len(), 1000);
        for (i, t) in all.iter().enumerate() {
            assert!((*t as i64 - i as i64 * 1_000_000).abs() <= 1, "time {i} is {t}");
        }
    }

    #[test]
    fn bursts_keep_the_mean_and_issue_only_while_on() {
        let b = Some(Bursts { on_ns: 100_000_000, off_ns: 900_000_000 });
        for kind in [Arrival::Uniform, Arrival::Poisson] {
            let t = times(&mut Arrivals::new(kind, 1000.0, 0, 1, 5).with_bursts(b), 10_000_000_000);
            // 10 s at a mean of 1000 IOPS (Poisson: σ of the count 100).
            assert!((t.len() as i64 - 10_000).abs() < 400, "{kind:?}: {}", t.len());
            assert!(t.iter().all(|x| x % 1_000_000_000 < 100_000_000), "{kind:?}: a time while off");
            // Every on phase has its share.
            for s in 0..10u64 {
                let n = t.iter().filter(|&&x| x / 1_000_000_000 == s).count();
                assert!((700..=1300).contains(&n), "{kind:?}: second {s} has {n}");
            }
        }
        let u = times(&mut Arrivals::new(Arrival::Uniform, 1000.0, 0, 1, 5).with_bursts(b), 2_000_000_000);
        // While on, ten times the mean rate: one every 0.1 ms.
        assert_eq!(u[1] - u[0], 100_000);
        assert_eq!(u[1000], 1_000_000_000, "the second on phase starts a period later");
        let mut skip = Arrivals::new(Arrival::Uniform, 1000.0, 0, 1, 5).with_bursts(b);
        let mut seen = 0;
        assert_eq!(skip.skip_until(2_500_000_000, &mut |_, n| seen += n), 3000);
        assert_eq!(seen, 3000);
    }

    #[test]
    fn uniform_times_do_not_drift_over_a_long_step() {
        let mut a = Arrivals::new(Arrival::Uniform, 3.0, 0, 1, 1);
        for _ in 0..3_000_000 {
            a.advance();
        }
        // 1 000 000 s at 3 IOPS: 3 000 000 gaps of 333 333 333.3 ns.
        assert_eq!(a.peek(), 1_000_000_000_000_000);
    }

    #[test]
    fn poisson_has_the_asked_rate_and_exponential_gaps_and_is_reproducible() {
        let mut a = Arrivals::new(Arrival::Poisson, 100_000.0, 0, 1, 42);
        let t = times(&mut a, 10_000_000_000);
        // 1 000 000 expected; the count's standard deviation is 1000.
        assert!((t.len() as i64 - 1_000_000).abs() < 5_000, "{}", t.len());
        let gaps: Vec<f64> = t.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        assert!((mean - 10_000.0).abs() < 100.0, "mean gap {mean}");
        // Exponential: P(gap > mean) = 1/e.
        let above = gaps.iter().filter(|&&g| g > 10_000.0).count() as f64 / gaps.len() as f64;
        assert!((above - (-1f64).exp()).abs() < 0.005, "share above the mean {above}");
        let again = times(&mut Arrivals::new(Arrival::Poisson, 100_000.0, 0, 1, 42), 10_000_000_000);
        assert_eq!(t, again, "the same seed gives the same schedule");
        let other = times(&mut Arrivals::new(Arrival::Poisson, 100_000.0, 0, 1, 43), 1_000_000);
        assert_ne!(t[..other.len().min(t.len())], other[..], "another seed, another schedule");
    }

    #[test]
    fn skipping_far_behind_counts_without_walking_every_time() {
        let mut a = Arrivals::new(Arrival::Uniform, MAX_IOPS, 0, 1, 1);
        // 100 s behind at 10^9 IOPS: 10^11 times, counted, not walked; each handed on once.
        let (mut seen, mut calls) = (0u64, 0u64);
        assert_eq!(a.skip_until(100_000_000_000, &mut |_, n| (seen, calls) = (seen + n, calls + 1)), 100_000_000_000);
        assert_eq!((seen, calls), (100_000_000_000, 1_000_001));
        assert!(a.peek() >= 100_000_000_000);
        let mut p = Arrivals::new(Arrival::Poisson, 1000.0, 0, 1, 1);
        let mut ages = Vec::new();
        let n = p.skip_until(1_000_000_000, &mut |due, _| ages.push(due));
        assert!((900..1100).contains(&n), "{n}");
        assert!(ages.windows(2).all(|w| w[0] <= w[1]) && ages.last() < Some(&1_000_000_000));
    }

    #[test]
    fn hosts_and_threads_share_one_schedule() {
        // 2 hosts × 2 threads at 4000 IOPS: every 250 µs, each time once.
        let mut all = Vec::new();
        for host in 0..2 {
            let share = RateShare { iops: 4000.0, host, hosts: 2 };
            for th in 0..2 {
                all.extend(times(&mut Arrivals::for_thread(Arrival::Uniform, &share, th, 2, 1), 1_000_000_000));
            }
        }
        all.sort_unstable();
        assert_eq!(all.len(), 4000);
        assert!(all.iter().enumerate().all(|(i, &t)| (t as i64 - i as i64 * 250_000).abs() <= 1));
    }
}
