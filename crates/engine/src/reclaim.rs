//! The passes of a reclaim step (issue 40): a region of each target written, trimmed, or read,
//! once, in blocks of one size with a few in flight, each I/O timed. Like preconditioning, a
//! pass is a few large I/Os that need no ring: one thread per I/O in flight, blocking calls
//! (pwrite, BLKDISCARD or a punched hole, pread), claiming the blocks in order.
//!
//! The threads are not scoped: one blocked in the kernel on storage that stopped answering is
//! left behind after `stuck_after` (the pass fails), not waited for.

use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use iocurve_plan::DataPattern;
use iocurve_stats::LatencyHistogram;

use crate::buffer::BufferPool;
use crate::data::{DataGen, Pool};
use crate::ops::Dir;
use crate::rng::Rng;
use crate::{EngineError, Target};

/// One target's part of a pass: `[start, start + len)`.
pub struct Region<'a> {
    pub target: &'a Target,
    pub start: u64,
    pub len: u64,
}

/// What a pass did.
#[derive(Debug, Clone, Default)]
pub struct PassFigures {
    pub ops: u64,
    pub bytes: u64,
    pub elapsed: Duration,
    /// Latency of every I/O, ns.
    pub hist: LatencyHistogram,
    /// Reads only: blocks that came back all zeros (a trimmed block the storage zeroes).
    pub zero_blocks: u64,
    /// Set when the pass stopped at `stop`: the figures are of what it did.
    pub stopped: bool,
}

struct Shared {
    /// (target index, offset, length) of every block, in order.
    blocks: Vec<(usize, u64, u64)>,
    next: AtomicUsize,
    done_bytes: AtomicU64,
    halt: AtomicBool,
    failed: Mutex<Option<EngineError>>,
    /// Each thread's figures as it finished.
    figures: Mutex<Vec<PassFigures>>,
    running: AtomicUsize,
}

/// Runs one pass of `dir` over `regions` in blocks of `bs` (the last of a region shorter), `qd`
/// at a time. Writes carry incompressible, unique data. An I/O error ends the pass with it; so
/// does no I/O returning for `stuck_after`. `stop` ends it early with what was done. `progress`
/// hears the bytes done and the time taken about every `every`.
#[allow(clippy::too_many_arguments)]
pub fn pass(
    regions: &[Region],
    bs: u64,
    qd: u32,
    dir: Dir,
    stop: &AtomicBool,
    stuck_after: Duration,
    every: Duration,
    progress: &mut dyn FnMut(u64, Duration),
) -> Result<PassFigures, EngineError> {
    let mut blocks = Vec::new();
    for (ti, r) in regions.iter().enumerate() {
        let mut off = r.start;
        while off < r.start + r.len {
            let len = bs.min(r.start + r.len - off);
            blocks.push((ti, off, len));
            off += len;
        }
    }
    let threads = (qd as usize).clamp(1, blocks.len().max(1));
    let sh = Arc::new(Shared {
        blocks,
        next: AtomicUsize::new(0),
        done_bytes: AtomicU64::new(0),
        halt: AtomicBool::new(false),
        failed: Mutex::new(None),
        figures: Mutex::new(Vec::new()),
        running: AtomicUsize::new(threads),
    });
    // The threads' own descriptors: one left behind keeps its file open, not a number the
    // caller's close may hand to another file.
    let mut files = Vec::new();
    for r in regions {
        let f = r.target.file.try_clone().map_err(|e| EngineError::io(format!("{}", r.target.path.display()), e))?;
        files.push((Arc::new(f), r.target.kind == crate::TargetKind::BlockDevice, r.target.path.clone()));
    }
    let files = Arc::new(files);
    let started = Instant::now();
    for ti in 0..threads {
        let (w, files) = (sh.clone(), files.clone());
        let spawned = std::thread::Builder::new().name(format!("iocurve-reclaim{ti}")).spawn(move || {
            let mut fig = PassFigures::default();
            let mut rng = Rng::seed_from(ti as u64 ^ started.elapsed().as_nanos() as u64 ^ 0x5245_434c);
            // A trim carries no data: no buffer of the block size for it.
            let mut pool = BufferPool::new(1, if dir == Dir::Trim { 4096 } else { bs as usize });
            let mut data = DataGen::new(&DataPattern::default(), bs.min(4096) as usize, Pool::shared(), &mut rng);
            if dir == Dir::Write {
                data.prepare(pool.slice_mut(0), &mut rng);
            }
            while !w.halt.load(Ordering::Relaxed) {
                let i = w.next.fetch_add(1, Ordering::Relaxed);
                let Some(&(t, off, len)) = w.blocks.get(i) else { break };
                let (file, block_device, path) = &files[t];
                let fd: RawFd = file.as_raw_fd();
                let buf: &mut [u8] = if dir == Dir::Trim { &mut [] } else { &mut pool.slice_mut(0)[..len as usize] };
                if dir == Dir::Write {
                    data.fill(buf, off, &mut rng);
                }
                let t0 = Instant::now();
                let r = match dir {
                    Dir::Write => crate::fullio::write_all_at(fd, buf, off),
                    Dir::Read => crate::fullio::read_full_at(fd, buf, off).and_then(|n| {
                        if n as u64 == len {
                            Ok(())
                        } else {
                            Err(std::io::Error::new(
                                std::io::ErrorKind::UnexpectedEof,
                                format!("read {n} of {len} bytes"),
                            ))
                        }
                    }),
                    Dir::Trim => match crate::backend::trim_blocking(fd, *block_device, off, len as u32) {
                        n if n < 0 => Err(std::io::Error::from_raw_os_error(-n)),
                        _ => Ok(()),
                    },
                };
                let ns = t0.elapsed().as_nanos() as u64;
                if let Err(e) = r {
                    let what = match dir {
                        Dir::Write => "write",
                        Dir::Read => "read",
                        Dir::Trim => "trim",
                    };
                    let msg = format!("reclaim: {what} of {len} bytes at offset {off} of {} failed", path.display());
                    w.failed.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(EngineError::io(msg, e));
                    w.halt.store(true, Ordering::Relaxed);
                    break;
                }
                fig.hist.record(ns);
                fig.ops += 1;
                fig.bytes += len;
                if dir == Dir::Read && buf.iter().all(|&b| b == 0) {
                    fig.zero_blocks += 1;
                }
                w.done_bytes.fetch_add(len, Ordering::Relaxed);
            }
            w.figures.lock().unwrap_or_else(|p| p.into_inner()).push(fig);
            w.running.fetch_sub(1, Ordering::Release);
        });
        if let Err(e) = spawned {
            sh.halt.store(true, Ordering::Relaxed);
            sh.running.fetch_sub(threads - ti, Ordering::Release);
            return Err(EngineError::io(format!("reclaim: cannot start I/O thread {ti} of {threads}"), e));
        }
    }
    let (mut last, mut moved_at, mut stopped, mut told) = (0u64, Instant::now(), false, Instant::now());
    while sh.running.load(Ordering::Acquire) > 0 {
        std::thread::sleep(Duration::from_millis(10));
        let done = sh.done_bytes.load(Ordering::Relaxed);
        if told.elapsed() >= every {
            progress(done, started.elapsed());
            told = Instant::now();
        }
        if done != last {
            (last, moved_at) = (done, Instant::now());
        }
        if moved_at.elapsed() >= stuck_after {
            sh.halt.store(true, Ordering::Relaxed);
            return Err(EngineError::io(
                format!("reclaim: no I/O returned for {:.0} s", stuck_after.as_secs_f64()),
                std::io::Error::new(std::io::ErrorKind::TimedOut, "the storage stopped answering"),
            ));
        }
        if !stopped && stop.load(Ordering::Relaxed) {
            sh.halt.store(true, Ordering::Relaxed);
            stopped = true;
        }
    }
    let elapsed = started.elapsed();
    if let Some(e) = sh.failed.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(e);
    }
    let mut all = PassFigures { elapsed, stopped, ..Default::default() };
    for f in sh.figures.lock().unwrap_or_else(|p| p.into_inner()).iter() {
        all.ops += f.ops;
        all.bytes += f.bytes;
        all.zero_blocks += f.zero_blocks;
        all.hist.merge(&f.hist);
    }
    Ok(all)
}
