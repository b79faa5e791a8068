//! Think time of closed-loop workers, as fio's `thinktime`, `thinktime_blocks` and
//! `thinktime_spin` do it: a worker issues `blocks` I/Os (at most its queue depth at a time),
//! lets them finish, then thinks (a draw of the think time; the first `spin_ns` of it the I/O
//! thread stays on the CPU) and starts its next `blocks`. A worker thus does exactly `blocks`
//! I/Os per think whatever its depth (fio 3.33 measured the same: 941 IOPS at iodepth 8,
//! `thinktime=1ms`), and a depth-1 worker at most one I/O per latency + think.
//!
//! Kept per I/O thread, over the workers whose slots it drives (psync gives each slot a thread
//! of its own: each of a worker's I/Os then thinks on its own).

use iocurve_plan::Think;

use crate::rng::Rng;

/// Not thinking.
const NONE: u64 = u64::MAX;

pub(crate) struct Thinking {
    think: Think,
    /// The local worker of each slot, and the slots of each local worker.
    of_slot: Vec<u32>,
    slots_of: Vec<Vec<u32>>,
    /// Per local worker: the I/Os issued since its last think, and until when it thinks (and
    /// spins).
    issued: Vec<u32>,
    until: Vec<u64>,
    spin_until: Vec<u64>,
    /// Per slot: held back until its worker's next think ends.
    parked: Vec<bool>,
    next_wake: u64,
}

impl Thinking {
    /// For slots of the workers `worker` (one entry per slot).
    pub fn new(think: Think, worker: &[u32]) -> Self {
        let mut ids: Vec<u32> = Vec::new();
        let mut of_slot = Vec::with_capacity(worker.len());
        let mut slots_of: Vec<Vec<u32>> = Vec::new();
        for (slot, w) in worker.iter().enumerate() {
            let k = match ids.iter().position(|x| x == w) {
                Some(k) => k,
                None => {
                    ids.push(*w);
                    slots_of.push(Vec::new());
                    ids.len() - 1
                }
            };
            of_slot.push(k as u32);
            slots_of[k].push(slot as u32);
        }
        let n = ids.len();
        Thinking {
            think,
            of_slot,
            slots_of,
            issued: vec![0; n],
            until: vec![NONE; n],
            spin_until: vec![0; n],
            parked: vec![false; worker.len()],
            next_wake: NONE,
        }
    }

    /// Whether `slot` may take its worker's next I/O now (counted), or waits for the next think
    /// to end (held): at a step's start.
    pub fn take(&mut self, slot: usize) -> bool {
        let k = self.of_slot[slot] as usize;
        if self.issued[k] < self.think.blocks {
            self.issued[k] += 1;
            true
        } else {
            self.parked[slot] = true;
            false
        }
    }

    /// The I/O of `slot` completed at `now` (its `busy` flag already cleared): true when the
    /// slot is to be reissued at once (counted), false when it waits; the worker's last I/O
    /// of its `blocks` back starts its think.
    pub fn completed(&mut self, slot: usize, now: u64, busy: &[bool], rng: &mut Rng) -> bool {
        if self.take(slot) {
            return true;
        }
        let k = self.of_slot[slot] as usize;
        if self.until[k] == NONE && self.slots_of[k].iter().all(|&s| !busy[s as usize]) {
            // 53 random bits: uniform in [0, 1).
            let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            let t = self.think.time.draw_ns(u);
            self.until[k] = now + t;
            self.spin_until[k] = now + self.think.spin_ns.min(t);
            self.next_wake = self.next_wake.min(self.until[k]);
        }
        false
    }

    /// When the next think ends (None: none under way).
    #[inline]
    pub fn next_wake(&self) -> Option<u64> {
        (self.next_wake != NONE).then_some(self.next_wake)
    }

    /// Until when a think under way at `now` keeps the thread on the CPU (None: none).
    pub fn spinning(&self, now: u64) -> Option<u64> {
        if self.think.spin_ns == 0 {
            return None;
        }
        self.spin_until.iter().zip(&self.until).filter(|&(&s, &u)| u != NONE && s > now).map(|(&s, _)| s).min()
    }

    /// Whether any slot of the thread waits for its worker's think.
    pub fn any(&self) -> bool {
        self.parked.iter().any(|&p| p)
    }

    /// Every worker whose think ended by `now`: its held slots go to `issue`, up to its next
    /// `blocks` I/Os.
    pub fn wake(&mut self, now: u64, issue: &mut dyn FnMut(u32) -> std::io::Result<()>) -> std::io::Result<()> {
        if now < self.next_wake {
            return Ok(());
        }
        let mut next = NONE;
        for k in 0..self.until.len() {
            if self.until[k] > now {
                next = next.min(self.until[k]);
                continue;
            }
            self.until[k] = NONE;
            self.issued[k] = 0;
            for &s in &self.slots_of[k] {
                if self.parked[s as usize] && self.issued[k] < self.think.blocks {
                    self.parked[s as usize] = false;
                    self.issued[k] += 1;
                    issue(s)?;
                }
            }
        }
        self.next_wake = next;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iocurve_plan::ThinkTime;

    fn issue_all(t: &mut Thinking, now: u64) -> Vec<u32> {
        let mut issued = Vec::new();
        t.wake(now, &mut |s| {
            issued.push(s);
            Ok(())
        })
        .unwrap();
        issued
    }

    #[test]
    fn a_worker_does_its_blocks_then_thinks_once_they_are_back() {
        // Two workers of two slots each; think 1 ms after every 3 I/Os.
        let think = Think { time: ThinkTime::Fixed(1_000_000), blocks: 3, spin_ns: 0 };
        let mut t = Thinking::new(think, &[7, 7, 9, 9]);
        let mut rng = Rng::new(1);
        assert!(t.take(0) && t.take(1) && t.take(2) && t.take(3), "both start with their depth");
        let mut busy = vec![true; 4];
        busy[0] = false;
        assert!(t.completed(0, 10, &busy, &mut rng), "the third of three: reissued");
        busy[0] = true;
        busy[1] = false;
        assert!(!t.completed(1, 20, &busy, &mut rng), "three issued: the slot waits");
        assert_eq!(t.next_wake(), None, "slot 0 is still in flight");
        busy[0] = false;
        assert!(!t.completed(0, 30, &busy, &mut rng));
        assert_eq!(t.next_wake(), Some(1_000_030), "the think starts when the last I/O is back");
        assert!(t.any());
        assert!(issue_all(&mut t, 1_000_029).is_empty());
        assert_eq!(issue_all(&mut t, 1_000_030), vec![0, 1]);
        assert_eq!(t.next_wake(), None);
        assert!(!t.any());
        // The other worker was never held back.
        busy[2] = false;
        assert!(t.completed(2, 40, &busy, &mut rng));
    }

    #[test]
    fn a_deep_worker_does_exactly_its_blocks_per_think() {
        // Depth 8, one I/O per think (fio at iodepth 8 with thinktime_blocks 1).
        let think = Think { time: ThinkTime::Fixed(1_000), blocks: 1, spin_ns: 0 };
        let mut t = Thinking::new(think, &[0; 8]);
        let mut rng = Rng::new(1);
        let started: Vec<bool> = (0..8).map(|s| t.take(s)).collect();
        assert_eq!(started.iter().filter(|&&s| s).count(), 1, "one of eight slots starts");
        let mut busy = started.clone();
        busy[0] = false;
        assert!(!t.completed(0, 100, &busy, &mut rng));
        assert_eq!(t.next_wake(), Some(1_100));
        assert_eq!(issue_all(&mut t, 1_100).len(), 1, "one I/O after the think");
    }

    #[test]
    fn spinning_covers_the_first_part_of_a_think() {
        let think = Think { time: ThinkTime::Fixed(1_000), blocks: 1, spin_ns: 300 };
        let mut t = Thinking::new(think, &[0]);
        let mut rng = Rng::new(1);
        assert!(t.take(0));
        assert!(!t.completed(0, 100, &[false], &mut rng));
        assert_eq!(t.spinning(200), Some(400));
        assert_eq!(t.spinning(400), None);
        assert_eq!(t.next_wake(), Some(1_100));
    }
}
