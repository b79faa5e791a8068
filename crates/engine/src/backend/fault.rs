//! Fault injection around a real back-end, for tests and demonstrations: EIO, added latency,
//! a full stall, and writes that are acknowledged but dropped, torn (only the first half
//! written) or misdirected (written one block away). Every other I/O passes through unchanged.
//!
//! Without faults the wrapper only forwards (one branch per call). With faults it reads a
//! clock — its own, never the worker's timestamps — to place I/Os in the faults' windows and
//! to release held completions.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use iocurve_plan::{Fault, FaultKind};

use super::{Completion, IoEngine};
use crate::ops::IoOp;
use crate::rng::Rng;

/// A fault as the engine applies it: the window in ns since the measurement start, the target
/// as an index.
#[derive(Debug, Clone)]
pub struct ActiveFault {
    pub kind: FaultKind,
    pub share: f64,
    pub from_ns: u64,
    pub to_ns: u64,
    pub target: Option<u32>,
    pub latency_ns: u64,
}

impl ActiveFault {
    /// `target` is the index of the fault's target among the step's targets, if it names one.
    pub fn new(f: &Fault, target: Option<u32>) -> ActiveFault {
        ActiveFault {
            kind: f.kind,
            share: f.share,
            from_ns: (f.from_s * 1e9) as u64,
            to_ns: f.to_s.map_or(u64::MAX, |t| (t * 1e9) as u64),
            target,
            latency_ns: (f.latency_ms * 1e6) as u64,
        }
    }

    fn covers(&self, t_ns: u64, op: &IoOp) -> bool {
        (self.from_ns..self.to_ns).contains(&t_ns) && self.target.is_none_or(|t| t == op.target)
    }
}

/// What was done to the I/O in a slot, to be undone at its completion.
#[derive(Clone, Copy, Default)]
enum Mark {
    #[default]
    None,
    /// Torn: the storage got `sent` bytes; the completion says the full length.
    Torn { full: u32, sent: u32 },
    /// Completes no earlier than this (ns since the measurement start).
    Delay(u64),
}

pub struct FaultBackend<B> {
    inner: B,
    faults: Arc<[ActiveFault]>,
    /// Clock origin: the measurement start (after warm-up) of the step, once known.
    origin: Option<Instant>,
    rng: Rng,
    marks: Vec<Mark>,
    /// A fault changed the I/O in this slot: counted when its completion is handed on, so the
    /// count matches what the worker records.
    hit: Vec<bool>,
    /// Completions made up here (EIO, dropped writes), handed out at the next reap.
    ready: Vec<Completion>,
    /// Completions held back: (release at ns, completion).
    held: Vec<(u64, Completion)>,
    /// I/Os handed to the inner back-end and not yet reaped from it.
    inner_inflight: usize,
    scratch: Vec<Completion>,
    injected: Arc<AtomicU64>,
}

impl<B: IoEngine> FaultBackend<B> {
    /// `injected` counts every I/O a fault changed.
    pub fn new(inner: B, faults: Arc<[ActiveFault]>, slots: usize, injected: Arc<AtomicU64>) -> Self {
        FaultBackend {
            inner,
            faults,
            origin: None,
            rng: Rng::seed_from(slots as u64 ^ 0xfa17),
            marks: vec![Mark::None; slots],
            hit: vec![false; slots],
            ready: Vec::new(),
            held: Vec::new(),
            inner_inflight: 0,
            scratch: Vec::new(),
            injected,
        }
    }

    /// Nanoseconds since the measurement start (0 before it).
    fn now_ns(&self) -> u64 {
        self.origin.and_then(|o| Instant::now().checked_duration_since(o)).map_or(0, |d| d.as_nanos() as u64)
    }

    /// Faults apply to the measurement only, never to the warm-up.
    fn in_warmup(&self) -> bool {
        self.origin.is_none_or(|o| Instant::now() < o)
    }

    fn hit(&mut self, f: &ActiveFault) -> bool {
        f.share >= 1.0 || (self.rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64) < f.share
    }

    fn count(&mut self, slot: u32) {
        self.hit[slot as usize] = true;
    }

    /// Hands a completion on, counting it when a fault changed its I/O.
    fn hand_on(&mut self, c: Completion, out: &mut Vec<Completion>) {
        if std::mem::take(&mut self.hit[c.0 as usize]) {
            self.injected.fetch_add(1, Ordering::Relaxed);
        }
        out.push(c);
    }

    /// When a completion reaped now may be handed on: stalls and delays hold it back.
    fn release_at(&self, slot: u32, now: u64) -> u64 {
        let mut at = match self.marks[slot as usize] {
            Mark::Delay(t) => t,
            _ => 0,
        };
        for f in self.faults.iter() {
            if f.kind == FaultKind::Stall && (f.from_ns..f.to_ns).contains(&now) {
                at = at.max(f.to_ns);
            }
        }
        at
    }
}

impl<B: IoEngine> IoEngine for FaultBackend<B> {
    fn queue(&mut self, slot: u32, op: &IoOp, buf: *mut u8) -> io::Result<()> {
        if self.faults.is_empty() || self.in_warmup() {
            self.inner_inflight += 1;
            return self.inner.queue(slot, op, buf);
        }
        let now = self.now_ns();
        let mut sent = *op;
        self.marks[slot as usize] = Mark::None;
        let faults = self.faults.clone();
        for f in faults.iter().filter(|f| f.covers(now, op)) {
            match f.kind {
                FaultKind::Eio if self.hit(f) => {
                    self.count(slot);
                    self.ready.push((slot, -libc::EIO));
                    return Ok(());
                }
                FaultKind::DropWrite if op.is_write() && self.hit(f) => {
                    self.count(slot);
                    self.ready.push((slot, op.len as i32));
                    return Ok(());
                }
                FaultKind::TornWrite if op.is_write() && op.len >= 1024 && self.hit(f) => {
                    self.count(slot);
                    // Half the block, on a boundary O_DIRECT can write: 4 KiB when the block
                    // allows (devices with 4 KiB sectors), else 512 bytes.
                    let unit = if op.len >= 8192 { 4096 } else { 512 };
                    sent.len = op.len / 2 / unit * unit;
                    self.marks[slot as usize] = Mark::Torn { full: op.len, sent: sent.len };
                }
                FaultKind::MisdirectWrite if op.is_write() && self.hit(f) => {
                    self.count(slot);
                    let len = op.len as u64;
                    sent.offset = if op.offset >= len { op.offset - len } else { op.offset + len };
                }
                FaultKind::Latency if self.hit(f) => {
                    self.count(slot);
                    self.marks[slot as usize] = Mark::Delay(now + f.latency_ns);
                }
                _ => {}
            }
        }
        self.inner_inflight += 1;
        self.inner.queue(slot, &sent, buf)
    }

    fn submit_and_wait(&mut self, timeout: Duration) -> io::Result<()> {
        if self.faults.is_empty() {
            return self.inner.submit_and_wait(timeout);
        }
        if !self.ready.is_empty() {
            return self.inner.flush();
        }
        let mut wait = timeout;
        if let Some(first) = self.held.iter().map(|h| h.0).min() {
            let now = self.now_ns();
            if first <= now {
                return self.inner.flush();
            }
            wait = wait.min(Duration::from_nanos(first - now));
        }
        if self.inner_inflight > 0 {
            // Only a held completion needs a wake-up before the boundary's.
            if wait < timeout {
                self.inner.wake_within(wait)?;
            }
            self.inner.submit_and_wait(wait)
        } else {
            // Everything in flight is held here: nothing can complete before the release.
            std::thread::sleep(wait);
            Ok(())
        }
    }

    fn submit_and_wait_within(&mut self, timeout: Duration) -> io::Result<()> {
        if self.faults.is_empty() {
            return self.inner.submit_and_wait_within(timeout);
        }
        self.wake_within(timeout)?;
        self.submit_and_wait(timeout)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }

    fn wake_within(&mut self, d: Duration) -> io::Result<()> {
        self.inner.wake_within(d)
    }

    fn cancel(&mut self, slot: u32) -> io::Result<()> {
        // A completion held back here (stall, latency) is given up at once: the I/O itself is
        // done, only its answer was withheld.
        if let Some(i) = self.held.iter().position(|h| (h.1).0 == slot) {
            self.held.swap_remove(i);
            self.ready.push((slot, -libc::ECANCELED));
            return Ok(());
        }
        self.inner.cancel(slot)
    }

    fn start(&mut self, measure_start: Instant) {
        self.origin = Some(measure_start);
        self.inner.start(measure_start);
    }

    fn reap(&mut self, out: &mut Vec<Completion>) {
        if self.faults.is_empty() {
            let before = out.len();
            self.inner.reap(out);
            self.inner_inflight -= out.len() - before;
            return;
        }
        self.scratch.clear();
        self.inner.reap(&mut self.scratch);
        self.inner_inflight -= self.scratch.len();
        let now = self.now_ns();
        for i in 0..self.scratch.len() {
            let (slot, mut res) = self.scratch[i];
            if let Mark::Torn { full, sent } = self.marks[slot as usize]
                && res == sent as i32
            {
                res = full as i32;
            }
            let at = self.release_at(slot, now);
            if at > now { self.held.push((at, (slot, res))) } else { self.hand_on((slot, res), out) }
        }
        for c in std::mem::take(&mut self.ready) {
            self.hand_on(c, out);
        }
        let mut i = 0;
        while i < self.held.len() {
            if self.held[i].0 <= now {
                let c = self.held.swap_remove(i).1;
                self.hand_on(c, out);
            } else {
                i += 1;
            }
        }
    }
}
