//! Resources a step needs, checked before anything is allocated: an accepted plan must never
//! abort the process on a failed allocation (`--ramp 65536 --qd 4096` once asked for 512 GiB of
//! buffers and died with SIGABRT, leaving its scratch file and a run marked `running`).

use iocurve_plan::{Backend, Workload, format_size};

/// A memory amount for people: `1056.0 GiB`, `37 MiB`.
fn human(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
    } else {
        format!("{} MiB", bytes >> 20)
    }
}

use crate::EngineError;
use crate::backend::{ThreadModel, capabilities, io_threads};

/// Bytes of bookkeeping per outstanding I/O beside its buffer (operation, timestamps, claims).
const PER_SLOT: u64 = 128;
/// Threads the psync back-end may start (one per outstanding I/O).
const MAX_PSYNC_THREADS: u64 = 4096;

/// Memory a step of `w` at `workers` workers needs on one host: a buffer of the largest block
/// size (page-aligned) and its bookkeeping per outstanding I/O — on the null back-end, one
/// buffer per I/O thread (its slots share it) and the bookkeeping.
pub fn step_memory(w: &Workload, workers: u32, backend: Backend) -> u64 {
    let slots = workers as u64 * w.queue_depth as u64;
    let buffer = w.max_bs().div_ceil(4096) * 4096;
    let buffers = if backend == Backend::Null { io_threads(backend, workers, w.queue_depth, w.threads) } else { slots };
    buffers.saturating_mul(buffer).saturating_add(slots.saturating_mul(PER_SLOT))
}

/// Bytes this host can give: the kernel's MemAvailable, and the address-space limit if any.
fn available() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?.split_whitespace().nth(1)?.parse().ok()?;
    let mut avail = kib * 1024;
    // SAFETY: getrlimit into a zeroed struct.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) } == 0 && lim.rlim_cur != libc::RLIM_INFINITY {
        avail = avail.min(lim.rlim_cur);
    }
    Some(avail)
}

/// Refuses a step this host cannot hold: its buffers beyond 80 % of the available memory (or
/// the address-space limit), or more psync threads than it may start.
pub fn check_step(w: &Workload, workers: u32, backend: Backend) -> Result<(), EngineError> {
    let need = step_memory(w, workers, backend);
    if let Some(avail) = available()
        && need > avail / 10 * 8
    {
        return Err(EngineError::Input(format!(
            "workload {}: {workers} workers × queue depth {} × {} blocks need {} of I/O buffers, more than 80 % of the {} this host has available: lower the ramp (--ramp), the queue depth (--qd) or the block size",
            w.name,
            w.queue_depth,
            format_size(w.max_bs()),
            human(need),
            human(avail)
        )));
    }
    let threads = workers as u64 * w.queue_depth as u64;
    if capabilities(backend).threads == ThreadModel::PerIo && threads > MAX_PSYNC_THREADS {
        return Err(EngineError::Input(format!(
            "workload {}: the psync back-end runs one thread per outstanding I/O, and {workers} workers × queue depth {} = {threads} threads is more than {MAX_PSYNC_THREADS}: use io_uring, or lower --ramp or --qd",
            w.name, w.queue_depth
        )));
    }
    Ok(())
}

/// Refuses, before a run starts, a step whose I/O threads this process may not start (the pids
/// cgroup, RLIMIT_NPROC) or whose rings it may not open (RLIMIT_NOFILE). Only before the run:
/// mid-run, threads of earlier steps left blocked in the kernel take room, and a thread that
/// cannot start is a failure of the run (exit code 1), not bad input.
pub fn check_limits(w: &Workload, workers: u32, backend: Backend) -> Result<(), EngineError> {
    let caps = capabilities(backend);
    let threads = io_threads(backend, workers, w.queue_depth, w.threads);
    if let Some((room, limit)) = task_room()
        && threads > room
    {
        return Err(EngineError::Input(format!(
            "workload {}: a step of {workers} workers needs {threads} I/O threads, but only {room} more may start here ({limit}): lower --ramp{}, or raise the limit",
            w.name,
            if caps.threads == ThreadModel::PerIo { " or --qd, use io_uring" } else { " or --threads" }
        )));
    }
    if caps.descriptor_per_thread
        && let Some((room, limit)) = fd_room()
        && threads > room
    {
        return Err(EngineError::Input(format!(
            "workload {}: a step with {threads} io_uring threads needs a descriptor per ring, but only {room} more may be opened ({limit}): raise it (ulimit -n) or lower --threads",
            w.name
        )));
    }
    Ok(())
}

/// Threads this process may still start, and the limit that says so: the pids controller of
/// its cgroup (v2 or v1), and RLIMIT_NPROC unless root (which it does not bind).
fn task_room() -> Option<(u64, String)> {
    let mut best: Option<(u64, String)> = None;
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    for line in cgroups.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(_), Some(ctrl), Some(path)) = (f.next(), f.next(), f.next()) else { continue };
        let dir = match ctrl {
            "" => format!("/sys/fs/cgroup{path}"),
            c if c.split(',').any(|x| x == "pids") => format!("/sys/fs/cgroup/pids{path}"),
            _ => continue,
        };
        let read = |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).ok().map(|s| s.trim().to_string());
        let (Some(max), Some(cur)) = (read("pids.max"), read("pids.current")) else { continue };
        let (Ok(max), Ok(cur)) = (max.parse::<u64>(), cur.parse::<u64>()) else { continue };
        let room = max.saturating_sub(cur);
        if best.as_ref().is_none_or(|b| room < b.0) {
            best = Some((room, format!("pids.max {max} of cgroup {path}, {cur} tasks in it")));
        }
    }
    // SAFETY: plain getters.
    if unsafe { libc::geteuid() } != 0 {
        let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut lim) } == 0 && lim.rlim_cur != libc::RLIM_INFINITY {
            // The user's processes and threads all count; this process's own are a lower bound.
            let own = std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count() as u64);
            let room = lim.rlim_cur.saturating_sub(own);
            if best.as_ref().is_none_or(|b| room < b.0) {
                best = Some((room, format!("RLIMIT_NPROC {}", lim.rlim_cur)));
            }
        }
    }
    best
}

/// Descriptors this process may still open, and RLIMIT_NOFILE.
fn fd_room() -> Option<(u64, String)> {
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: getrlimit into a zeroed struct.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 || lim.rlim_cur == libc::RLIM_INFINITY {
        return None;
    }
    let open = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
    Some((lim.rlim_cur.saturating_sub(open), format!("RLIMIT_NOFILE {}, {open} open", lim.rlim_cur)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_absurd_step_is_refused_with_its_product() {
        let w = iocurve_plan::writing_workload(
            "w",
            iocurve_plan::WorkloadKeys { queue_depth: Some(4096), ..Default::default() },
        )
        .unwrap();
        assert_eq!(step_memory(&w, 65536, Backend::IoUring), 65536 * 4096 * (4096 + PER_SLOT));
        // The null back-end: a buffer per I/O thread, bookkeeping per I/O.
        let threads = io_threads(Backend::Null, 65536, w.queue_depth, w.threads);
        assert_eq!(step_memory(&w, 65536, Backend::Null), threads * 4096 + 65536 * 4096 * PER_SLOT);
        let e = check_step(&w, 65536, Backend::IoUring).unwrap_err();
        assert!(e.is_input_error());
        let msg = e.to_string();
        assert!(msg.contains("65536 workers × queue depth 4096") && msg.contains("--ramp"), "{msg}");
        check_step(&w, 1, Backend::IoUring).unwrap();
        let e = check_step(&w, 2, Backend::Psync).unwrap_err();
        assert!(e.to_string().contains("threads"), "{e}");
    }
}
