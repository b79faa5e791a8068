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
    }
}

pub fn cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

pub fn cpu_times() -> Option<CpuTimes> {
    std::fs::read_to_string("/proc/stat").ok().and_then(|t| CpuTimes::parse_proc_stat(&t))
}

/// The calling thread at the lowest real-time priority (SCHED_FIFO 1) until dropped, then
/// back to the normal policy. The threads of a synchronized start (an agent's step) hold it
/// from before the start moment until their first I/O is out: many agents woken at one moment
/// on few cores otherwise start one after the other as the fair scheduler hands out time
/// slices, the first ones' I/O threads taking the time the last ones need to start (issue 15:
/// 64 agents on 2 cores started 10 ms apart). Held only for the few microseconds each takes;
/// the kernel's real-time throttling bounds it anyway.
#[derive(Debug)]
pub struct StartPriority(());

impl StartPriority {
    /// None when the thread may not (no CAP_SYS_NICE and RLIMIT_RTPRIO 0): it starts with the
    /// fair scheduler, as before.
    pub fn raise() -> Option<StartPriority> {
        let p = libc::sched_param { sched_priority: 1 };
        // SAFETY: changes only the calling thread's policy (0 = this thread on Linux); threads
        // it creates meanwhile get the normal policy (SCHED_RESET_ON_FORK).
        let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &p) };
        (r == 0).then_some(StartPriority(()))
    }
}

impl Drop for StartPriority {
    fn drop(&mut self) {
        let p = libc::sched_param { sched_priority: 0 };
        // SAFETY: as in raise; the normal policy needs no privilege.
        unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &p) };
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
            drop(raised);
            assert_eq!(policy(), libc::SCHED_OTHER);
        })
        .join()
        .unwrap();
    }
}
