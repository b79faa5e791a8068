//! Host CPU load from the aggregate `cpu` line of `/proc/stat` (the engine reads the file; this
//! module only parses and differences it).

/// Cumulative CPU times in clock ticks, as in `/proc/stat`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
    /// This process's own CPU time (`/proc/self/stat` utime + stime), same ticks; 0: unknown.
    pub own: u64,
}

impl CpuTimes {
    /// Parses the first (`cpu `, all CPUs) line of `/proc/stat` content.
    pub fn parse_proc_stat(text: &str) -> Option<CpuTimes> {
        let line = text.lines().find(|l| l.starts_with("cpu "))?;
        let v: Vec<u64> = line.split_whitespace().skip(1).map_while(|f| f.parse().ok()).collect();
        if v.len() < 4 {
            return None;
        }
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        Some(CpuTimes {
            user: at(0),
            nice: at(1),
            system: at(2),
            idle: at(3),
            iowait: at(4),
            irq: at(5),
            softirq: at(6),
            steal: at(7),
            own: 0,
        })
    }

    /// The CPU time of a process from its `/proc/PID/stat` (utime + stime, clock ticks): the
    /// fields after the command's closing parenthesis (a command may hold spaces and parens).
    pub fn parse_own(stat: &str) -> Option<u64> {
        let rest = &stat[stat.rfind(')')? + 1..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        // After ")": state is field 3 of the line, utime 14, stime 15.
        let utime: u64 = f.get(11)?.parse().ok()?;
        let stime: u64 = f.get(12)?.parse().ok()?;
        Some(utime + stime)
    }

    fn total(&self) -> u64 {
        self.user + self.nice + self.system + self.idle + self.iowait + self.irq + self.softirq + self.steal
    }
}

/// CPU load between two readings, in percent of all CPUs of the host.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CpuUsage {
    pub user: f64,
    pub system: f64,
    pub iowait: f64,
    /// Time the hypervisor gave this (virtual) host's CPUs to others: a shared load host.
    #[serde(default)]
    pub steal: f64,
    /// iocurve's own process (all its threads); None where not measured (stored before, or
    /// not readable). The rest of `busy()` is other processes' and the kernel's.
    #[serde(default)]
    pub own: Option<f64>,
}

/// What iocurve's own I/O threads spent on a CPU over a step's measured intervals, in CPU
/// seconds per second: the busiest thread's share (1.0: it never waited, so iocurve, not the
/// storage, may have set the pace) and all of them together (how many cores they needed).
/// On several hosts, the most any one host's threads spent.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct IoCpu {
    pub busiest: f64,
    pub total: f64,
}

impl IoCpu {
    /// From each thread's share of the time it ran on a CPU (None: no thread measured).
    pub fn from_shares(shares: impl IntoIterator<Item = f64>) -> Option<IoCpu> {
        let shares: Vec<f64> = shares.into_iter().collect();
        if shares.is_empty() {
            return None;
        }
        Some(IoCpu { busiest: shares.iter().copied().fold(0.0, f64::max), total: shares.iter().sum() })
    }

    /// The hosts of a multi-host step: the most any one spent.
    pub fn max(a: Option<IoCpu>, b: Option<IoCpu>) -> Option<IoCpu> {
        match (a, b) {
            (Some(a), Some(b)) => Some(IoCpu { busiest: a.busiest.max(b.busiest), total: a.total.max(b.total) }),
            (a, b) => a.or(b),
        }
    }
}

impl CpuUsage {
    pub fn between(a: &CpuTimes, b: &CpuTimes) -> CpuUsage {
        let total = b.total().saturating_sub(a.total());
        if total == 0 {
            return CpuUsage::default();
        }
        let pct = |x: u64, y: u64| 100.0 * y.saturating_sub(x) as f64 / total as f64;
        CpuUsage {
            user: pct(a.user + a.nice, b.user + b.nice),
            // irq and softirq are work the kernel does for our I/O: count them as system.
            system: pct(a.system + a.irq + a.softirq, b.system + b.irq + b.softirq),
            iowait: pct(a.iowait, b.iowait),
            steal: pct(a.steal, b.steal),
            own: (a.own > 0 && b.own > 0).then(|| pct(a.own, b.own)),
        }
    }

    /// What other processes (and the kernel's work for them) used: the busy share beyond
    /// iocurve's own. None where iocurve's own is not known.
    pub fn others(&self) -> Option<f64> {
        self.own.map(|own| (self.busy() - own).max(0.0))
    }

    /// Share of the host that was busy (not idle, not waiting for I/O).
    pub fn busy(&self) -> f64 {
        self.user + self.system
    }

    /// The mean of several (a step's intervals): see [`CpuMean`].
    pub fn mean<'a>(all: impl IntoIterator<Item = &'a CpuUsage>) -> CpuUsage {
        all.into_iter()
            .fold(CpuMean::default(), |mut m, c| {
                m.add(c);
                m
            })
            .mean()
    }
}

/// The mean host CPU of intervals added one by one, in constant memory (a relay follows each
/// of its agents over a step of any length): each share's mean, iocurve's own only where every
/// interval measured it; nothing (zeros) of none.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuMean {
    sum: CpuUsage,
    n: u32,
    /// An interval without iocurve's own share was added.
    own_unknown: bool,
}

impl CpuMean {
    pub fn add(&mut self, c: &CpuUsage) {
        let s = &mut self.sum;
        (s.user, s.system, s.iowait, s.steal) =
            (s.user + c.user, s.system + c.system, s.iowait + c.iowait, s.steal + c.steal);
        match c.own {
            Some(own) => s.own = Some(s.own.unwrap_or(0.0) + own),
            None => self.own_unknown = true,
        }
        self.n += 1;
    }

    pub fn mean(&self) -> CpuUsage {
        if self.n == 0 {
            return CpuUsage::default();
        }
        let (s, n) = (&self.sum, f64::from(self.n));
        CpuUsage {
            user: s.user / n,
            system: s.system / n,
            iowait: s.iowait / n,
            steal: s.steal / n,
            own: s.own.filter(|_| !self.own_unknown).map(|own| own / n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_differences_proc_stat() {
        let a = CpuTimes::parse_proc_stat("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4\n").unwrap();
        let b = CpuTimes::parse_proc_stat("cpu  160 0 80 850 60 0 0 0 0 0\n").unwrap();
        let u = CpuUsage::between(&a, &b);
        assert!((u.user - 40.0).abs() < 1e-9);
        assert!((u.system - 20.0).abs() < 1e-9);
        assert!((u.iowait - 6.666_666).abs() < 1e-3);
        assert!((u.busy() - 60.0).abs() < 1e-9);
    }

    #[test]
    fn steal_and_the_own_process_share() {
        let mut a = CpuTimes::parse_proc_stat("cpu  100 0 50 800 50 0 0 0 0 0\n").unwrap();
        let mut b = CpuTimes::parse_proc_stat("cpu  160 0 80 830 60 0 0 20 0 0\n").unwrap();
        assert_eq!(b.steal, 20);
        // A command with spaces and a parenthesis: the fields count from the last ')'.
        let stat = "4242 (io curve (x)) S 1 4242 4242 0 -1 4194304 100 0 0 0 30 12 0 0 20 0 9 0 1 2 3";
        assert_eq!(CpuTimes::parse_own(stat), Some(42));
        assert_eq!(CpuTimes::parse_own("garbage"), None);
        (a.own, b.own) = (10, 40);
        let u = CpuUsage::between(&a, &b);
        // 150 ticks passed: 20 stolen, 60 user + 30 system busy, 30 of them iocurve's.
        assert!((u.steal - 100.0 * 20.0 / 150.0).abs() < 1e-9, "{u:?}");
        assert!((u.own.unwrap() - 20.0).abs() < 1e-9, "{u:?}");
        assert!((u.others().unwrap() - 40.0).abs() < 1e-9, "{u:?}");
        b.own = 0;
        assert_eq!(CpuUsage::between(&a, &b).own, None, "not read: unknown, not 0");
    }

    /// The mean of intervals added one by one: each share's, iocurve's own only where every
    /// interval measured it; zeros of none.
    #[test]
    fn the_mean_of_intervals_knows_its_own_share_only_where_each_did() {
        let c = |user: f64, own: Option<f64>| CpuUsage { user, system: 2.0 * user, own, ..CpuUsage::default() };
        let m = CpuUsage::mean(&[c(10.0, Some(1.0)), c(20.0, Some(3.0))]);
        assert_eq!((m.user, m.system, m.own), (15.0, 30.0, Some(2.0)));
        assert_eq!(CpuUsage::mean(&[c(10.0, Some(1.0)), c(20.0, None)]).own, None);
        assert_eq!(CpuUsage::mean(&[c(20.0, None), c(10.0, Some(1.0))]).own, None);
        assert_eq!(CpuUsage::mean(&[]), CpuUsage::default());
    }

    #[test]
    fn rejects_garbage() {
        assert!(CpuTimes::parse_proc_stat("nothing here").is_none());
        assert!(CpuTimes::parse_proc_stat("cpu  1 2").is_none());
    }

    #[test]
    fn no_time_passed_is_zero_load() {
        let a = CpuTimes::default();
        assert_eq!(CpuUsage::between(&a, &a), CpuUsage::default());
    }

    #[test]
    fn io_threads_busiest_and_together_and_the_most_of_several_hosts() {
        assert_eq!(IoCpu::from_shares([]), None, "no thread measured");
        let one = IoCpu::from_shares([0.25, 0.5]).unwrap();
        assert_eq!(one, IoCpu { busiest: 0.5, total: 0.75 });
        let other = IoCpu { busiest: 0.9, total: 0.9 };
        assert_eq!(IoCpu::max(Some(one), Some(other)), Some(IoCpu { busiest: 0.9, total: 0.9 }));
        assert_eq!(IoCpu::max(None, Some(one)), Some(one), "a host that did not measure adds nothing");
        assert_eq!(IoCpu::max(None, None), None);
    }
}
