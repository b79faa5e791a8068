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
use crate::backend::{ThreadModel, io_threads};

/// Bytes of bookkeeping per outstanding I/O beside its buffer (operation, timestamps, claims).
const PER_SLOT: u64 = 128;
/// Threads the psync back-end may start (one per outstanding I/O).
const MAX_PSYNC_THREADS: u64 = 4096;

/// Memory a step of `w` at `workers` workers needs on one host: a buffer of the largest block
/// size (page-aligned) and its bookkeeping per outstanding I/O — on the null back-end, one
/// buffer per I/O thread (its slots share it) and the bookkeeping.
pub fn step_memory(w: &Workload, workers: u32, backend: Backend) -> u64 {
    let slots = workers as u64 * w.queue_depth as u64;
    let buffer = w.max_data_bs().div_ceil(4096) * 4096;
    let buffers =
        if backend.facts().buffer_per_io { slots } else { io_threads(backend, workers, w.queue_depth, w.threads) };
    buffers.saturating_mul(buffer).saturating_add(slots.saturating_mul(PER_SLOT))
}

/// Bytes this process can give its buffers, and what says so: the kernel's MemAvailable, the
/// room its memory cgroup leaves (a container's limit: a node's MemAvailable says nothing of
/// it, and a step beyond it is killed by the OOM killer instead of refused), and the
/// address-space limit — whichever is least.
pub fn available() -> Option<(u64, String)> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?.split_whitespace().nth(1)?.parse().ok()?;
    let mut best = (kib * 1024, "MemAvailable".to_string());
    if let Some(room) = cgroup_memory_room()
        && room.0 < best.0
    {
        best = room;
    }
    // SAFETY: getrlimit into a zeroed struct.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: getrlimit writes only into `lim`, a live local.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) } == 0
        && lim.rlim_cur != libc::RLIM_INFINITY
        && lim.rlim_cur < best.0
    {
        best = (lim.rlim_cur, format!("RLIMIT_AS {}", human(lim.rlim_cur)));
    }
    Some(best)
}

/// The memory this process's cgroups still let it use, from the live files.
fn cgroup_memory_room() -> Option<(u64, String)> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    memory_room(&cgroups, &mountinfo, |p| std::fs::read_to_string(p).ok())
}

/// A limit at or above this is no limit (cgroup v1 writes 2^63 rounded down to a page).
const NO_LIMIT: u64 = 1 << 62;

/// The least room any memory cgroup of this process leaves, its own or an ancestor's (a pod's
/// limit sits on the pod's cgroup, a container's on its own): the limit minus what is charged
/// to it, less the inactive page cache the kernel reclaims before it kills (the working set,
/// as the kubelet counts it). cgroup v2 (`memory.max`, `memory.current`) and v1
/// (`memory.limit_in_bytes`, `memory.usage_in_bytes`). `cgroups` is /proc/self/cgroup,
/// `mountinfo` /proc/self/mountinfo (where each hierarchy is mounted, and which of its
/// directories the mount shows: a container sees its own cgroup as the mount's root);
/// `read` reads a file.
fn memory_room(cgroups: &str, mountinfo: &str, read: impl Fn(&str) -> Option<String>) -> Option<(u64, String)> {
    let mut best: Option<(u64, String)> = None;
    for line in cgroups.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(_), Some(ctrl), Some(path)) = (f.next(), f.next(), f.next()) else { continue };
        let v2 = ctrl.is_empty();
        // A cgroup outside this cgroup namespace shows as `/../…`: not in any mount here.
        if (!v2 && !ctrl.split(',').any(|c| c == "memory")) || path.split('/').any(|c| c == "..") {
            continue;
        }
        let Some((mountpoint, rel)) = cgroup_dir(mountinfo, v2, path) else { continue };
        let (limit_file, usage_file, inactive_key) = if v2 {
            ("memory.max", "memory.current", "inactive_file")
        } else {
            ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
        };
        // From the process's own cgroup up to the mount's root.
        let mut level = rel.as_str();
        loop {
            let dir = format!("{mountpoint}{level}");
            let dir = dir.trim_end_matches('/');
            let num = |f: &str| read(&format!("{dir}/{f}")).and_then(|s| s.trim().parse::<u64>().ok());
            if let (Some(limit), Some(usage)) = (num(limit_file), num(usage_file))
                && limit < NO_LIMIT
            {
                let inactive = read(&format!("{dir}/memory.stat"))
                    .and_then(|s| {
                        s.lines()
                            .find_map(|l| l.strip_prefix(inactive_key)?.strip_prefix(' ')?.trim().parse::<u64>().ok())
                    })
                    .unwrap_or(0);
                let used = usage.saturating_sub(inactive);
                let room = limit.saturating_sub(used);
                if best.as_ref().is_none_or(|b| room < b.0) {
                    let name = if level.is_empty() { "/" } else { level };
                    best = Some((
                        room,
                        format!("{limit_file} {} of cgroup {name}, {} of it in use", human(limit), human(used)),
                    ));
                }
            }
            match level.rfind('/') {
                Some(i) if !level.is_empty() => level = &level[..i],
                _ => break,
            }
        }
    }
    best
}

/// Where the cgroup `path` (as /proc/self/cgroup names it) of the v2 hierarchy, or of v1's
/// memory hierarchy, is in this mount namespace: the mount point, and the path below it
/// ("" for the mount's root). None when no mount shows it.
fn cgroup_dir(mountinfo: &str, v2: bool, path: &str) -> Option<(String, String)> {
    for line in mountinfo.lines() {
        // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL…] - FSTYPE SOURCE SUPER-OPTIONS
        let Some((left, right)) = line.split_once(" - ") else { continue };
        let left: Vec<&str> = left.split(' ').collect();
        let right: Vec<&str> = right.split(' ').collect();
        let (Some(root), Some(mountpoint), Some(fstype)) = (left.get(3), left.get(4), right.first()) else { continue };
        let ours = if v2 {
            *fstype == "cgroup2"
        } else {
            *fstype == "cgroup" && right.get(2).is_some_and(|o| o.split(',').any(|c| c == "memory"))
        };
        if !ours {
            continue;
        }
        let root = unescape(root);
        let rel = if root == "/" {
            path.trim_end_matches('/').to_string()
        } else if path == root {
            String::new()
        } else if let Some(rest) = path.strip_prefix(&root).filter(|r| r.starts_with('/')) {
            rest.to_string()
        } else {
            continue;
        };
        return Some((unescape(mountpoint).trim_end_matches('/').to_string(), rel));
    }
    None
}

/// A path of /proc/self/mountinfo, whose spaces, tabs, newlines and backslashes are octal
/// escapes (`\040`).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = (b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)))
            .then(|| b[i + 1..i + 4].iter().fold(0u32, |v, c| v * 8 + u32::from(c - b'0')))
            .and_then(|v| u8::try_from(v).ok());
        if let Some(c) = octal {
            out.push(c);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Refuses a step this host cannot hold: its buffers beyond 80 % of the available memory (or
/// the address-space limit), or more psync threads than it may start.
pub fn check_step(w: &Workload, workers: u32, backend: Backend) -> Result<(), EngineError> {
    let need = step_memory(w, workers, backend);
    if let Some((avail, why)) = available()
        && need > avail / 10 * 8
    {
        return Err(EngineError::Input(format!(
            "workload {}: {workers} workers × queue depth {} × {} blocks need {} of I/O buffers, more than 80 % of the {} this host has available ({why}): lower the ramp (--ramp), the queue depth (--qd) or the block size",
            w.name,
            w.queue_depth,
            format_size(w.max_data_bs()),
            human(need),
            human(avail)
        )));
    }
    let threads = workers as u64 * w.queue_depth as u64;
    if backend.facts().threads == ThreadModel::PerIo && threads > MAX_PSYNC_THREADS {
        return Err(EngineError::Input(format!(
            "workload {}: the psync back-end runs one thread per outstanding I/O, and {workers} workers × queue depth {} = {threads} threads is more than {MAX_PSYNC_THREADS}: use io_uring, or lower --ramp or --qd",
            w.name, w.queue_depth
        )));
    }
    Ok(())
}

/// Refuses a concurrent step (issue 41) this host cannot hold with all its members at once:
/// their buffers together beyond 80 % of the available memory, their I/O threads together
/// beyond what may start, their libaio events together beyond the kernel's room. Each member
/// alone passes its own checks as a step does.
pub fn check_members(members: &[(&Workload, u32, Backend)]) -> Result<(), EngineError> {
    for &(w, workers, backend) in members {
        check_step(w, workers, backend)?;
    }
    let names = members.iter().map(|(w, ..)| w.name.as_str()).collect::<Vec<_>>().join(" and ");
    let need: u64 = members.iter().map(|&(w, n, b)| step_memory(w, n, b)).fold(0, u64::saturating_add);
    if let Some((avail, why)) = available()
        && need > avail / 10 * 8
    {
        return Err(EngineError::Input(format!(
            "the concurrent step of {names} needs {} of I/O buffers with all its members at once, more than 80 % of the {} this host has available ({why}): lower the ramp, the members' queue depths or block sizes",
            human(need),
            human(avail)
        )));
    }
    let threads: u64 = members.iter().map(|&(w, n, b)| io_threads(b, n, w.queue_depth, w.threads)).sum();
    if let Some((room, limit)) = task_room()
        && threads > room
    {
        return Err(EngineError::Input(format!(
            "the concurrent step of {names} needs {threads} I/O threads with all its members at once, but only {room} more may start here ({limit}): lower the ramp or the members' --threads"
        )));
    }
    let aio: u64 = members
        .iter()
        .filter(|(_, _, b)| b.facts().aio_context)
        .map(|&(w, n, _)| n as u64 * w.queue_depth as u64)
        .sum();
    if aio > 0
        && let Some(limit) = crate::backend::aio_room_short(aio)
    {
        return Err(EngineError::Input(format!(
            "the concurrent step of {names} keeps {aio} libaio I/Os in flight, more events than the kernel's limit leaves ({limit}): lower the ramp, raise fs.aio-max-nr or use io_uring"
        )));
    }
    Ok(())
}

/// Refuses, before a run starts, a libaio step that needs more asynchronous I/O events than the
/// kernel's `fs.aio-max-nr` leaves (each context counts its slots). Only before the run: a
/// context that cannot be made mid-run (another process took the room) is a failure of the
/// step's I/O thread (exit code 1), as a thread that cannot start is.
pub fn check_aio_room(w: &Workload, workers: u32, backend: Backend) -> Result<(), EngineError> {
    let slots = workers as u64 * w.queue_depth as u64;
    if backend.facts().aio_context
        && let Some(limit) = crate::backend::aio_room_short(slots)
    {
        return Err(EngineError::Input(format!(
            "workload {}: {slots} I/Os in flight ({workers} workers at queue depth {}; a rate step's max_outstanding) need as many asynchronous I/O events, more than the kernel's limit leaves ({limit}): lower --ramp, --qd or --max-outstanding, raise the limit (sysctl fs.aio-max-nr=…), or use io_uring",
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
    let caps = backend.facts();
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
        // SAFETY: an all-zero rlimit is a valid value of the plain C struct.
        let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
        // SAFETY: getrlimit writes only into `lim`, a live local.
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
    // SAFETY: an all-zero rlimit is a valid value of the plain C struct.
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

    /// Found in review (issue 40): trims of 64m sized every I/O buffer at 64m, 16'384 times
    /// what 4k reads and writes need. A trim carries no data: buffers are of reads and writes.
    #[test]
    fn regression_trims_need_no_buffer() {
        let w = iocurve_plan::writing_workload(
            "w",
            iocurve_plan::WorkloadKeys {
                read_pct: Some(50.0),
                trim_pct: Some(10.0),
                trim_bs: Some(iocurve_plan::BlockSizeSpec::One(64 << 20)),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(step_memory(&w, 64, Backend::IoUring), 64 * (4096 + PER_SLOT));
    }

    /// A fake filesystem for [`memory_room`]: path → content.
    fn files(entries: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: std::collections::HashMap<String, String> =
            entries.iter().map(|(p, c)| (p.to_string(), c.to_string())).collect();
        move |p: &str| map.get(p).cloned()
    }

    /// Regression test for issue 35 finding 7: the budget read the node's MemAvailable only, so
    /// a container limited to 256 MiB on a 24 GiB node accepted a step of 1 GiB of buffers (and
    /// was killed by the OOM killer). cgroup v2, as a Kubernetes container sees it: its own
    /// cgroup is the mount's root (a cgroup namespace); the pod's limit, on a cgroup above,
    /// is not visible there, the container's is.
    #[test]
    fn regression_the_memory_budget_reads_the_cgroup_v2_limit() {
        let mountinfo = "30 1 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
        let read = files(&[
            ("/sys/fs/cgroup/memory.max", "268435456\n"),
            ("/sys/fs/cgroup/memory.current", "20971520\n"),
            (
                "/sys/fs/cgroup/memory.stat",
                "anon 1048576\nfile 19922944\ninactive_file 10485760\nactive_file 9437184\n",
            ),
        ]);
        let (room, why) = memory_room("0::/\n", mountinfo, read).unwrap();
        // 256 MiB less the working set: 20 MiB charged, 10 MiB of it reclaimable page cache.
        assert_eq!(room, (256 - 10) << 20);
        assert_eq!(why, "memory.max 256 MiB of cgroup /, 10 MiB of it in use");
        // No limit ("max"): nothing from the cgroup.
        let read = files(&[("/sys/fs/cgroup/memory.max", "max\n"), ("/sys/fs/cgroup/memory.current", "1\n")]);
        assert_eq!(memory_room("0::/\n", mountinfo, read), None);
    }

    /// Without a cgroup namespace (a host's systemd slice, cgroup v2): the process's own cgroup
    /// and every ancestor count, the least room wins, and the root (no memory.max) is skipped.
    #[test]
    fn the_tightest_ancestor_of_the_memory_cgroup_binds() {
        let mountinfo = "25 1 0:22 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let read = files(&[
            ("/sys/fs/cgroup/pod/memory.max", "1073741824"),
            ("/sys/fs/cgroup/pod/memory.current", "943718400"),
            ("/sys/fs/cgroup/pod/c1/memory.max", "max"),
            ("/sys/fs/cgroup/pod/c1/memory.current", "104857600"),
            ("/sys/fs/cgroup/memory.current", "1"),
        ]);
        let (room, why) = memory_room("0::/pod/c1\n", mountinfo, read).unwrap();
        assert_eq!(room, 124 << 20);
        assert_eq!(why, "memory.max 1.0 GiB of cgroup /pod, 900 MiB of it in use");
    }

    /// cgroup v1: the memory hierarchy, mounted with a container's cgroup as its root (no
    /// cgroup namespace: /proc/self/cgroup names the host's full path); 2^63 is no limit.
    #[test]
    fn the_memory_budget_reads_cgroup_v1_limits() {
        let mountinfo = "\
40 30 0:35 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu
41 30 0:36 /kubepods/pod1/ctr /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory
";
        let cgroups = "5:cpu:/kubepods/pod1/ctr\n4:memory:/kubepods/pod1/ctr\n0::/\n";
        let read = files(&[
            ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "536870912"),
            ("/sys/fs/cgroup/memory/memory.usage_in_bytes", "104857600"),
            ("/sys/fs/cgroup/memory/memory.stat", "cache 1\ninactive_file 7\ntotal_inactive_file 52428800\n"),
        ]);
        let (room, why) = memory_room(cgroups, mountinfo, read).unwrap();
        assert_eq!(room, (512 - 50) << 20);
        assert_eq!(why, "memory.limit_in_bytes 512 MiB of cgroup /, 50 MiB of it in use");
        let read = files(&[
            ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712"),
            ("/sys/fs/cgroup/memory/memory.usage_in_bytes", "1"),
        ]);
        assert_eq!(memory_room(cgroups, mountinfo, read), None);
    }

    /// Whatever the files hold, no panic: garbage, missing mounts, a cgroup outside the mount.
    #[test]
    fn odd_cgroup_files_give_no_budget_and_no_panic() {
        let read = |_: &str| Some("garbage".to_string());
        for (cg, mi) in [
            ("", ""),
            ("0::/x", "no separator here"),
            ("0::/x", "1 2 3 /elsewhere /sys/fs/cgroup rw - cgroup2 c rw"),
            ("4:memory:/a", "1 2 3 / /m\\777 rw - cgroup c rw,memory"),
            (":::", "- - -"),
            ("0::/../other", "1 2 3 / /sys/fs/cgroup rw - cgroup2 c rw"),
        ] {
            assert_eq!(memory_room(cg, mi, read), None, "{cg:?} {mi:?}");
        }
        assert_eq!(unescape("/a\\040b\\400\\0"), "/a b\\400\\0");
    }
}
