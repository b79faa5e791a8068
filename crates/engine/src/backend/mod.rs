//! I/O back-ends. Like fio's `ioengine_ops`, a back-end only moves I/O: it queues, submits,
//! waits and hands back completions. It does no accounting and reads no clock — the worker loop
//! timestamps and records every I/O, so all back-ends are measured the same way.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use crate::ops::IoOp;

mod fault;
mod journaled;
mod libaio;
mod null;
mod psync;
mod uring;

pub use fault::{ActiveFault, FaultBackend};
pub use journaled::Journaled;
pub use libaio::{LibaioBackend, aio_room_short, probe_libaio};
pub use null::NullBackend;
pub use psync::PsyncBackend;
pub use uring::{UringBackend, probe_io_uring};

/// A completion: the slot it belongs to and the result (bytes transferred, or -errno).
pub type Completion = (u32, i32);

pub use iocurve_plan::backend::ThreadModel;
use iocurve_plan::{Availability, Backend};

/// Whether each descriptor is a block device: its trims discard (BLKDISCARD, or io_uring's
/// block discard command); a file's punch holes.
pub(crate) fn block_devices(fds: &[RawFd]) -> Vec<bool> {
    fds.iter()
        .map(|&fd| {
            // SAFETY: a stat is plain data; all zeros is a valid value.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: fstat writes into a live local; a closed fd is only an error.
            unsafe { libc::fstat(fd, &mut st) == 0 && st.st_mode & libc::S_IFMT == libc::S_IFBLK }
        })
        .collect()
}

/// One trim with a blocking call on the calling thread: BLKDISCARD on a block device, a punched
/// hole (the size kept) in a file. The bytes trimmed (`len`), or -errno.
pub(crate) fn trim_blocking(fd: RawFd, block_device: bool, offset: u64, len: u32) -> i32 {
    // _IO(0x12, 119) of linux/fs.h.
    const BLKDISCARD: libc::c_ulong = 0x1277;
    let r = if block_device {
        let range: [u64; 2] = [offset, len as u64];
        // SAFETY: the ioctl reads two u64 from a live local.
        unsafe { libc::ioctl(fd, BLKDISCARD, range.as_ptr()) }
    } else {
        // SAFETY: fallocate takes plain integers.
        unsafe {
            libc::fallocate(
                fd,
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                offset as libc::off_t,
                len as libc::off_t,
            )
        }
    };
    if r < 0 { -io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO) } else { len as i32 }
}

/// Whether back-end `kind` can run on this host: Err says why not (its probe). Back-ends that
/// cannot be missing need no probe.
pub fn probe(kind: Backend) -> Result<(), String> {
    match kind {
        Backend::IoUring => probe_io_uring(),
        Backend::Libaio => probe_libaio(),
        Backend::Psync | Backend::Null => Ok(()),
    }
}

/// What this host can run: every back-end that may be missing, probed.
pub fn available() -> Availability {
    Availability::lacking(Backend::all().filter_map(|b| probe(b).err().map(|why| (b, why))))
}

/// What runs a step's I/O thread once its back-end is built: generic over the back-end, so
/// the worker loop is compiled for each (nothing on the hot path asks which one it has).
pub trait Drive {
    type Out;
    fn drive<E: IoEngine>(self, engine: E) -> Self::Out;
}

/// Builds back-end `kind` for an I/O thread of `slots` outstanding I/Os on `fds`, whose
/// buffers are `pool` (base, length), and runs `d` on it. When it cannot be built, `d` comes
/// back with the reason.
pub fn drive<D: Drive>(
    kind: Backend,
    slots: usize,
    fds: Vec<RawFd>,
    pool: (*mut u8, usize),
    d: D,
) -> Result<D::Out, (D, String)> {
    match kind {
        Backend::IoUring => match UringBackend::new(slots, &fds, pool) {
            Ok(b) => Ok(d.drive(b)),
            Err(e) => Err((d, format!("cannot set up io_uring: {e}"))),
        },
        Backend::Libaio => match LibaioBackend::new(slots, fds) {
            Ok(b) => Ok(d.drive(b)),
            Err(e) => Err((d, format!("cannot set up a native AIO context: {e}"))),
        },
        Backend::Psync => Ok(d.drive(PsyncBackend::new(fds))),
        Backend::Null => Ok(d.drive(NullBackend::new(slots))),
    }
}

/// The I/O threads a step of `workers` workers at queue depth `qd` runs on: one per outstanding
/// I/O, or `threads` (0: one per core) but no more than the workers.
pub fn io_threads(kind: Backend, workers: u32, qd: u32, threads: u32) -> u64 {
    match kind.facts().threads {
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
    fn io_threads_follow_the_thread_model() {
        assert_eq!(io_threads(Backend::Psync, 3, 4, 0), 12);
        assert_eq!(io_threads(Backend::IoUring, 3, 4, 2), 2);
        assert_eq!(io_threads(Backend::Libaio, 3, 4, 2), 2);
        assert_eq!(io_threads(Backend::Null, 1, 4, 8), 1);
    }

    /// Every back-end can be built and moves a null-sized step's worth of nothing: a probe
    /// that says a back-end is there means it can be driven.
    #[test]
    fn every_available_back_end_builds() {
        struct Nothing;
        impl Drive for Nothing {
            type Out = ();
            fn drive<E: IoEngine>(self, _e: E) {}
        }
        use std::os::fd::AsRawFd;
        let here = available();
        let mut pool = vec![0u8; 4096];
        let null = std::fs::File::open("/dev/null").unwrap();
        for b in Backend::all() {
            let r = drive(b, 4, vec![null.as_raw_fd()], (pool.as_mut_ptr(), pool.len()), Nothing);
            assert_eq!(r.is_ok(), here.runs(b), "{b:?}: {:?}", r.err().map(|e| e.1));
        }
    }
}
