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
