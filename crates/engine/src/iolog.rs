//! What a step issued, for `run --write-iolog` (issue 45, part 4: any run replayable by iocurve
//! and by fio). Each I/O thread notes every I/O it hands to the back-end, with the time since
//! the step's start, in a buffer of its own; full buffers (and the last, when the thread ends)
//! go to the step's [`IoLog`] under one lock, so the issuing path takes no lock per I/O. The
//! log keeps at most [`MAX_LOGGED_IOS`] I/Os a step on a host and counts the rest.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::ops::IoOp;
use crate::replay::ReplayIo;

/// The most I/Os a host's log keeps of one step (24 bytes each in memory, about 10 on the
/// wire): 144 MB at most. The rest are counted as left out, and the step says so.
pub const MAX_LOGGED_IOS: usize = crate::replay::MAX_SHARE_IOS as usize;

/// I/Os a thread notes before handing them on.
const BATCH: usize = 4096;

/// The I/Os of one step on one host.
#[derive(Debug, Default)]
pub struct IoLog {
    ios: Mutex<Vec<ReplayIo>>,
    left_out: AtomicU64,
    cap: usize,
}

impl IoLog {
    pub fn new() -> Arc<IoLog> {
        Self::with_cap(MAX_LOGGED_IOS)
    }

    /// A log that keeps at most `cap` I/Os (tests).
    pub fn with_cap(cap: usize) -> Arc<IoLog> {
        Arc::new(IoLog { ios: Mutex::new(Vec::new()), left_out: AtomicU64::new(0), cap })
    }

    fn add(&self, batch: &mut Vec<ReplayIo>) {
        let mut ios = self.ios.lock().unwrap_or_else(|p| p.into_inner());
        let room = self.cap.saturating_sub(ios.len()).min(batch.len());
        ios.extend_from_slice(&batch[..room]);
        self.left_out.fetch_add((batch.len() - room) as u64, Ordering::Relaxed);
        batch.clear();
    }

    /// The I/Os noted so far in the order of their times, and how many were left out.
    pub fn take(&self) -> (Vec<ReplayIo>, u64) {
        let mut ios = std::mem::take(&mut *self.ios.lock().unwrap_or_else(|p| p.into_inner()));
        // Each thread's are in order already: a stable sort of runs is quick.
        ios.sort_by_key(|io| io.t_ns);
        (ios, self.left_out.swap(0, Ordering::Relaxed))
    }
}

/// A thread's own buffer; hands what it holds to the log when full and when dropped.
pub(crate) struct IoLogBuf {
    log: Arc<IoLog>,
    buf: Vec<ReplayIo>,
}

impl IoLogBuf {
    pub(crate) fn new(log: Arc<IoLog>) -> IoLogBuf {
        IoLogBuf { log, buf: Vec::with_capacity(BATCH) }
    }

    #[inline]
    pub(crate) fn note(&mut self, t_ns: u64, op: IoOp) {
        self.buf.push(ReplayIo { t_ns, op });
        if self.buf.len() >= BATCH {
            self.log.add(&mut self.buf);
        }
    }
}

impl Drop for IoLogBuf {
    fn drop(&mut self) {
        self.log.add(&mut self.buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Dir;

    fn op(offset: u64) -> IoOp {
        IoOp { target: 0, offset, len: 4096, dir: Dir::Read }
    }

    #[test]
    fn threads_buffers_reach_the_log_in_time_order_and_the_excess_is_counted() {
        let log = IoLog::with_cap(BATCH + 10);
        let mut a = IoLogBuf::new(log.clone());
        let mut b = IoLogBuf::new(log.clone());
        for k in 0..BATCH as u64 {
            a.note(2 * k, op(k));
        }
        for k in 0..20u64 {
            b.note(2 * k + 1, op(k));
        }
        drop(b);
        drop(a);
        let (ios, left_out) = log.take();
        assert_eq!((ios.len(), left_out), (BATCH + 10, 10));
        assert!(ios.windows(2).all(|p| p[0].t_ns <= p[1].t_ns));
        // The first thread's full buffer went first, whole; then the second's first ten.
        assert_eq!(ios.iter().filter(|io| io.t_ns % 2 == 1).count(), 10);
        assert_eq!(log.take(), (Vec::new(), 0));
    }
}
