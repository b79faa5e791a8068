//! I/O back-ends. Like fio's `ioengine_ops`, a back-end only moves I/O: it queues, submits,
//! waits and hands back completions. It does no accounting and reads no clock — the worker loop
//! timestamps and records every I/O, so all back-ends are measured the same way.

use std::io;
use std::time::Duration;

use crate::ops::IoOp;

mod fault;
mod journaled;
mod null;
mod psync;
mod uring;

pub use fault::{ActiveFault, FaultBackend};
pub use journaled::Journaled;
pub use null::NullBackend;
pub use psync::PsyncBackend;
pub use uring::{UringBackend, probe_io_uring};

/// A completion: the slot it belongs to and the result (bytes transferred, or -errno).
pub type Completion = (u32, i32);

/// How a back-end uses threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadModel {
    /// One thread per outstanding I/O: each blocks in its system call (psync).
    PerIo,
    /// The workers' I/Os multiplexed onto a few threads (`threads`, default one per core).
    Shared,
}

/// What the engine needs to know of a back-end besides its `IoEngine`: the registry. A new
/// back-end is a file with its `IoEngine`, a row here and an arm where `step` builds it.
#[derive(Debug, Clone, Copy)]
pub struct Capabilities {
    pub kind: iocurve_plan::Backend,
    pub threads: ThreadModel,
    /// Each I/O thread holds a file descriptor of its own (a ring), counted against
    /// RLIMIT_NOFILE before a run.
    pub descriptor_per_thread: bool,
}

const REGISTRY: &[Capabilities] = &[
    Capabilities { kind: iocurve_plan::Backend::IoUring, threads: ThreadModel::Shared, descriptor_per_thread: true },
    Capabilities { kind: iocurve_plan::Backend::Psync, threads: ThreadModel::PerIo, descriptor_per_thread: false },
    Capabilities { kind: iocurve_plan::Backend::Null, threads: ThreadModel::Shared, descriptor_per_thread: false },
];

/// The capabilities of back-end `kind`.
pub fn capabilities(kind: iocurve_plan::Backend) -> Capabilities {
    *REGISTRY.iter().find(|c| c.kind == kind).expect("every back-end is registered (tested)")
}

/// The I/O threads a step of `workers` workers at queue depth `qd` runs on: one per outstanding
/// I/O, or `threads` (0: one per core) but no more than the workers.
pub fn io_threads(kind: iocurve_plan::Backend, workers: u32, qd: u32, threads: u32) -> u64 {
    match capabilities(kind).threads {
        ThreadModel::PerIo => workers as u64 * qd as u64,
        ThreadModel::Shared => {
            (if threads == 0 { crate::host::cores() as u64 } else { threads as u64 }).min(workers as u64)
        }
    }
}

/// Moves I/O for the worker loop. (`iocurve_plan::Backend` names which one a workload asks for.)
pub trait IoEngine {
    /// Queues one I/O for `slot`. `buf` must stay valid and untouched until the I/O completes.
    fn queue(&mut self, slot: u32, op: &IoOp, buf: *mut u8) -> io::Result<()>;

    /// Submits what is queued and waits until at least one I/O completed or a wake-up came.
    /// `timeout` is when the caller next needs to run (an interval boundary); a back-end may
    /// keep a wake-up it armed earlier for that same boundary instead of arming a new one.
    fn submit_and_wait(&mut self, timeout: Duration) -> io::Result<()>;

    /// As `submit_and_wait`, but returns within `timeout` however long a wake-up armed earlier
    /// lasts: a rate step waits so for its next due I/O, a wait that changes with every I/O.
    fn submit_and_wait_within(&mut self, timeout: Duration) -> io::Result<()> {
        self.wake_within(timeout)?;
        self.submit_and_wait(timeout)
    }

    /// Hands what is queued to the device now, without waiting. The worker loop uses it to
    /// reissue completed I/Os at once while others are still in the device: holding them back
    /// for one batched submission left virtio-blk with fewer in flight than asked for (15–25 %
    /// fewer IOPS at 32 outstanding). Back-ends that complete at once need not do anything.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// Moves every available completion into `out` (which the caller clears).
    fn reap(&mut self, out: &mut Vec<Completion>);

    /// Arms an extra wake-up within `d`, besides the one for the next interval boundary, for a
    /// wrapper that holds completions back (fault injection). Back-ends whose waits return by
    /// themselves need not do anything.
    fn wake_within(&mut self, _d: Duration) -> io::Result<()> {
        Ok(())
    }

    /// Asks for the I/O in `slot` to be cancelled (it is stuck: outstanding past its deadline).
    /// A cancelled I/O still completes, with -ECANCELED (or its real result, if it finished
    /// first); one the kernel cannot cancel (a request already in a device) completes when the
    /// device answers, or never. Back-ends whose I/Os complete by themselves need not do
    /// anything.
    fn cancel(&mut self, _slot: u32) -> io::Result<()> {
        Ok(())
    }

    /// Tells the back-end when the step's measurement (after warm-up) starts.
    fn start(&mut self, _measure_start: std::time::Instant) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_back_end_is_registered_once() {
        for b in [iocurve_plan::Backend::IoUring, iocurve_plan::Backend::Psync, iocurve_plan::Backend::Null] {
            assert_eq!(REGISTRY.iter().filter(|c| c.kind == b).count(), 1, "{b:?}");
            assert_eq!(capabilities(b).kind, b);
        }
        assert_eq!(io_threads(iocurve_plan::Backend::Psync, 3, 4, 0), 12);
        assert_eq!(io_threads(iocurve_plan::Backend::IoUring, 3, 4, 2), 2);
        assert_eq!(io_threads(iocurve_plan::Backend::Null, 1, 4, 8), 1);
    }
}
