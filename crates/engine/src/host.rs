//! Facts about the load host, and its CPU counters.

use iocurve_stats::CpuTimes;
pub use iocurve_stats::HostFacts;

fn read_trim(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

pub fn facts() -> HostFacts {
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    HostFacts {
        hostname: read_trim("/proc/sys/kernel/hostname").unwrap_or_else(|| "unknown".into()),
        kernel: read_trim("/proc/sys/kernel/osrelease").unwrap_or_else(|| "unknown".into()),
        cpu_model,
        cores: cores(),
        smt: read_trim("/sys/devices/system/cpu/smt/active").map(|a| a == "1"),
        governor: governors(),
    }
}

/// The frequency governors of the host's CPUs, each once, in CPU order (None: no cpufreq).
fn governors() -> Option<String> {
    let mut seen: Vec<String> = Vec::new();
    for k in 0..cores().max(1) {
        if let Some(g) = read_trim(&format!("/sys/devices/system/cpu/cpu{k}/cpufreq/scaling_governor"))
            && !seen.contains(&g)
        {
            seen.push(g);
        }
    }
    (!seen.is_empty()).then(|| seen.join(","))
}

pub fn cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

pub fn cpu_times() -> Option<CpuTimes> {
    let mut t = std::fs::read_to_string("/proc/stat").ok().and_then(|t| CpuTimes::parse_proc_stat(&t))?;
    // iocurve's own process, all its threads (0: not readable, said as unknown).
    t.own = std::fs::read_to_string("/proc/self/stat").ok().and_then(|s| CpuTimes::parse_own(&s)).unwrap_or(0);
    Some(t)
}

/// `/proc/diskstats` as it reads now (None: not readable, e.g. a container without it).
pub fn diskstats() -> Option<String> {
    std::fs::read_to_string("/proc/diskstats").ok()
}

/// The CPU time the calling thread has used, in ns.
pub fn own_cpu_ns() -> Option<u64> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes only into `ts`.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0;
    ok.then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// Sleeps until `t` on one absolute timer of the monotonic clock (`Instant`'s), as
/// [`sleep_until_ns`] does. Returns at once when `t` has passed, and never before `t`.
pub fn sleep_until(t: std::time::Instant) {
    let now = std::time::Instant::now();
    if now >= t {
        return;
    }
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes only into `ts`.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) } != 0 {
        std::thread::sleep(t - now);
        return;
    }
    // The monotonic clock read just after `now`: `t` on it is at least as far ahead.
    let ahead = i64::try_from((t - now).as_nanos()).unwrap_or(i64::MAX);
    sleep_until_ns(
        libc::CLOCK_MONOTONIC,
        ts.tv_sec.saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec).saturating_add(ahead),
    );
    // A clock that could not be slept on: the plain way (never an early start).
    std::thread::sleep(t.saturating_duration_since(std::time::Instant::now()));
}

/// Sleeps until `clock` (CLOCK_MONOTONIC, CLOCK_REALTIME) reads `at_ns`, on one absolute timer
/// with a timer slack of 1 ns meanwhile: a thread of normal priority (an agent without
/// CAP_SYS_NICE) would otherwise wake up to 50 µs late, the kernel's default slack (real-time
/// threads have none), and an agent spinning for the moment instead would take the CPU its
/// neighbours need to wake on time. The thread's own slack is given back after (its later
/// sleeps are as they were). A signal does not end the sleep early; a failing timer ends it at
/// once (the caller checks its clock).
pub fn sleep_until_ns(clock: libc::clockid_t, at_ns: i64) {
    let at = libc::timespec { tv_sec: (at_ns / 1_000_000_000) as libc::time_t, tv_nsec: (at_ns % 1_000_000_000) as _ };
    // SAFETY: prctl reads and sets only this thread's timer slack.
    let slack = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
    // SAFETY: as above.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    // SAFETY: an absolute sleep with a valid timespec and no remainder (an interrupted one is
    // simply called again).
    while unsafe { libc::clock_nanosleep(clock, libc::TIMER_ABSTIME, &at, std::ptr::null_mut()) } == libc::EINTR {}
    if slack > 0 {
        // SAFETY: as above.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, slack as libc::c_ulong, 0, 0, 0) };
    }
}

/// The calling thread at the lowest real-time priority (SCHED_FIFO 1) until dropped, then
/// back to the policy it had. The threads of an agent's synchronized start hold it from before
/// the start moment (asleep): the thread that opens the step's gate until it has (a few
/// milliseconds before the moment), the I/O threads until their first I/Os are submitted:
/// many agents woken at one moment on few cores otherwise start one after the other as the
/// fair scheduler hands out time slices, the first ones' threads taking the time the last ones
/// need to start (issue 15: 64 agents on 2 cores started 10–30 ms apart). Held while running
/// only for that first work; the kernel's real-time throttling bounds it anyway.
#[derive(Debug)]
pub struct StartPriority {
    /// The thread raised, and the policy and priority it had.
    tid: libc::pid_t,
    policy: libc::c_int,
    priority: libc::c_int,
}

impl StartPriority {
    /// None when the thread may not (no CAP_SYS_NICE and RLIMIT_RTPRIO 0), or is real-time
    /// already (started with `chrt`): it starts as it is.
    pub fn raise() -> Option<StartPriority> {
        // SAFETY: gettid, and reads of the calling thread's policy and parameter.
        let (tid, policy, priority) = unsafe {
            let mut p = libc::sched_param { sched_priority: 0 };
            if libc::sched_getparam(0, &mut p) != 0 {
                return None;
            }
            (libc::gettid(), libc::sched_getscheduler(0), p.sched_priority)
        };
        let plain = policy & !libc::SCHED_RESET_ON_FORK;
        if policy < 0 || plain == libc::SCHED_FIFO || plain == libc::SCHED_RR {
            return None;
        }
        let p = libc::sched_param { sched_priority: 1 };
        // SAFETY: changes only this thread's policy; threads it creates meanwhile get the
        // normal policy (SCHED_RESET_ON_FORK).
        let r = unsafe { libc::sched_setscheduler(tid, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &p) };
        (r == 0).then_some(StartPriority { tid, policy, priority })
    }
}

impl Drop for StartPriority {
    /// Restores the thread that raised it, by its id: dropped on another thread, the guard
    /// still gives the right thread back its policy.
    fn drop(&mut self) {
        let p = libc::sched_param { sched_priority: self.priority };
        // SAFETY: as in raise, for the same thread; going back needs no privilege.
        unsafe { libc::sched_setscheduler(self.tid, self.policy, &p) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> i32 {
        // SAFETY: reads the calling thread's policy.
        let policy = unsafe { libc::sched_getscheduler(0) };
        policy & !libc::SCHED_RESET_ON_FORK
    }

    #[test]
    fn the_start_priority_ends_with_its_guard() {
        std::thread::spawn(|| {
            assert_eq!(policy(), libc::SCHED_OTHER);
            let raised = StartPriority::raise();
            // As root it is real-time; as any other user it stays normal (not permitted).
            assert_eq!(policy(), if raised.is_some() { libc::SCHED_FIFO } else { libc::SCHED_OTHER });
            // Real-time already: left as it is.
            assert!(raised.is_none() || StartPriority::raise().is_none());
            // Dropped on another thread, it still restores the thread that raised it.
            std::thread::scope(|s| s.spawn(move || drop(raised)).join().unwrap());
            assert_eq!(policy(), libc::SCHED_OTHER);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn the_policy_a_thread_had_is_given_back() {
        std::thread::spawn(|| {
            let p = libc::sched_param { sched_priority: 0 };
            // SAFETY: the calling thread's policy; SCHED_BATCH needs no privilege.
            assert_eq!(unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &p) }, 0);
            drop(StartPriority::raise());
            assert_eq!(policy(), libc::SCHED_BATCH);
        })
        .join()
        .unwrap();
    }
}
