//! Ending a running step early, at an interval boundary: once its throughput is steady
//! (`steady_state = "snia"`). A step run by the engine alone decides it itself; a step run by
//! an agent — every step of `iocurve run`, local ones through the in-process agent — is ended
//! by the coordinator, which judges the hosts' merged intervals, through the agent's
//! [`StepEnd`].
//!
//! The I/O threads read the count of intervals to run at each boundary they pass. Lowering it
//! below an interval some thread has entered already would cut that interval off on that thread
//! only; so the count is raised to the furthest interval entered, and set again until no thread
//! is found beyond it after it was set (a thread that enters another interval later reads the
//! count first).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use crate::worker::Live;

/// The furthest interval a thread of `lives` has entered (counted from 1).
fn entered(lives: &[Live]) -> u32 {
    lives.iter().map(|l| l.entered.load(Ordering::Relaxed)).max().unwrap_or(0)
}

/// The furthest interval a running step has entered: its threads', or the count a step run
/// elsewhere keeps ([`StepEnd::attach_counted`]).
fn entered_of(r: &Running) -> u32 {
    entered(&r.lives).max(r.counted.as_ref().map_or(0, |c| c.load(Ordering::SeqCst)))
}

/// Sets the step to end after `want` intervals (at most `planned`), or after the furthest
/// interval a thread of `lives` has entered; returns the count it ends after.
pub(crate) fn end_after(rounds: &AtomicU32, lives: &[Live], want: u32, planned: u32) -> u32 {
    raise_until_stable(rounds, want, planned, || entered(lives))
}

/// Sets `rounds` to `want` (at most `planned`) or to the interval `entered` says the step is
/// in, then looks again, raising it until the step is found no further. SeqCst: a counted step
/// stores its interval, then loads `rounds`; this stores `rounds`, then loads the interval —
/// of a store and the other side's load, one sees the other.
fn raise_until_stable(rounds: &AtomicU32, want: u32, planned: u32, entered: impl Fn() -> u32) -> u32 {
    let mut end = want.max(entered()).min(planned);
    loop {
        rounds.store(end, Ordering::SeqCst);
        let now_entered = entered().min(planned);
        if now_entered <= end {
            return end;
        }
        end = now_entered;
    }
}

/// The running step as someone outside it may end it: the count its threads read, the threads,
/// and its planned intervals.
struct Running {
    rounds: Arc<AtomicU32>,
    lives: Arc<[Live]>,
    /// The interval a step without I/O threads is in (a simulated agent's, issue 46).
    counted: Option<Arc<AtomicU32>>,
    planned: u32,
}

#[derive(Default)]
struct State {
    /// The step requests name: an agent's start moment of the step.
    key: i64,
    running: Option<Running>,
}

/// An agent's handle on the step it runs, for the coordinator to end it once steady. A request
/// names its step (by its start moment), so one meant for a step that already ended never ends
/// the next.
#[derive(Default)]
pub struct StepEnd(Mutex<State>);

impl StepEnd {
    pub fn new() -> StepEnd {
        StepEnd::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next step to run is known by `key`.
    pub fn expect(&self, key: i64) {
        *self.state() = State { key, running: None };
    }

    /// Where step `key` is: the interval count it ends after, and the furthest interval one of
    /// its threads has entered (from 1). None when that step does not run.
    pub fn position(&self, key: i64) -> Option<(u32, u32)> {
        let s = self.state();
        let r = s.running.as_ref().filter(|_| s.key == key)?;
        Some((r.rounds.load(Ordering::Relaxed).min(r.planned), entered_of(r)))
    }

    /// Ends step `key` after `want` intervals, or later when a thread is past that already:
    /// the count it ends after. None when that step does not run (not yet, or no more). Meant
    /// to be called once per step: a count raised later may find threads already stopped at
    /// the lower one.
    pub fn end_after(&self, key: i64, want: u32) -> Option<u32> {
        let s = self.state();
        let r = s.running.as_ref().filter(|_| s.key == key)?;
        Some(raise_until_stable(&r.rounds, want, r.planned, || entered_of(r)))
    }

    pub(crate) fn attach(&self, rounds: Arc<AtomicU32>, lives: Arc<[Live]>, planned: u32) {
        self.state().running = Some(Running { rounds, lives, counted: None, planned });
    }

    /// Attaches a step that runs no I/O threads of this crate (a simulated agent's step, issue
    /// 46) until the guard drops: `rounds` is the count of intervals it ends after, `entered`
    /// the interval it is in (from 1), which it raises before reading `rounds` at a boundary.
    pub fn attach_counted(&self, rounds: Arc<AtomicU32>, entered: Arc<AtomicU32>, planned: u32) -> Attached<'_> {
        self.state().running = Some(Running { rounds, lives: Arc::from(Vec::new()), counted: Some(entered), planned });
        Attached(self)
    }

    pub(crate) fn detach(&self) {
        self.state().running = None;
    }
}

/// A step attached to its [`StepEnd`] until this is dropped (on every way out of the step).
pub struct Attached<'a>(&'a StepEnd);

impl<'a> Attached<'a> {
    pub(crate) fn new(end: &'a StepEnd, rounds: Arc<AtomicU32>, lives: Arc<[Live]>, planned: u32) -> Attached<'a> {
        end.attach(rounds, lives, planned);
        Attached(end)
    }
}

impl Drop for Attached<'_> {
    fn drop(&mut self) {
        self.0.detach();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counted_step_ends_at_the_interval_it_entered_at_the_latest() {
        let e = StepEnd::new();
        e.expect(9);
        let (rounds, entered) = (Arc::new(AtomicU32::new(10)), Arc::new(AtomicU32::new(0)));
        {
            let _a = e.attach_counted(rounds.clone(), entered.clone(), 10);
            entered.store(4, Ordering::SeqCst);
            assert_eq!(e.position(9), Some((10, 4)));
            assert_eq!(e.end_after(9, 2), Some(4), "not before the interval it is in");
            assert_eq!(rounds.load(Ordering::SeqCst), 4);
            assert_eq!(e.end_after(9, 40), Some(10), "never beyond the plan");
        }
        assert_eq!(e.end_after(9, 5), None, "detached when the guard dropped");
    }

    #[test]
    fn a_request_ends_only_its_own_step_and_never_before_an_interval_a_thread_entered() {
        let e = StepEnd::new();
        e.expect(7);
        assert_eq!(e.end_after(7, 5), None, "not running yet");
        let lives: Arc<[Live]> = (0..2).map(|_| Live::default()).collect();
        let rounds = Arc::new(AtomicU32::new(25));
        e.attach(rounds.clone(), lives.clone(), 25);
        assert_eq!(e.end_after(6, 5), None, "another step's request");
        assert_eq!(rounds.load(Ordering::Relaxed), 25);
        lives[1].entered.store(6, Ordering::Relaxed);
        assert_eq!(e.position(7), Some((25, 6)), "a query changes nothing");
        assert_eq!(e.end_after(7, 5), Some(6), "a thread is in interval 6 already");
        assert_eq!(rounds.load(Ordering::Relaxed), 6);
        assert_eq!(e.position(7), Some((6, 6)));
        let e2 = StepEnd::new();
        e2.expect(8);
        e2.attach(Arc::new(AtomicU32::new(25)), lives.clone(), 25);
        assert_eq!(e2.end_after(8, 40), Some(25), "never beyond the plan");
        e.detach();
        assert_eq!(e.end_after(7, 9), None, "ended");
    }
}
