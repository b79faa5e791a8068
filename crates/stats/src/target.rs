//! What one target (a file, a path to a LUN) did in an interval (issue 42, part 3): its I/Os,
//! bytes, latency and errors, its per-second samples, and what its block device counted over the
//! same interval (`/proc/diskstats`): the request sizes the device saw, which tell when the
//! kernel split iocurve's I/Os (`max_sectors_kb`).

use crate::LatencyHistogram;
use crate::sample::Sample;

/// What a target's block device is and how its queue takes requests (sysfs `queue/`): the facts
/// that explain why the device saw other request sizes than iocurve issued (the VSP PoC wrote
/// 1 MB and the array saw 256 KB: `max_sectors_kb`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeviceQueue {
    /// Its kernel name: the line of `/proc/diskstats` that counts its requests.
    pub device: String,
    /// The largest request the kernel sends it, KiB (larger I/Os are split).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sectors_kb: Option<u64>,
    /// The largest the hardware takes, KiB (`max_sectors_kb` may be raised to it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_hw_sectors_kb: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nr_requests: Option<u64>,
    /// The I/O scheduler in use (`none`, `mq-deadline`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotational: Option<bool>,
    /// The device holds the filesystem a file target is on (its counters count everything on it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub of_filesystem: bool,
}

impl DeviceQueue {
    /// `loop0: max_sectors_kb 64, nr_requests 128, scheduler none, not rotational`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(k) = self.max_sectors_kb {
            parts.push(format!("max_sectors_kb {k}"));
        }
        if let Some(n) = self.nr_requests {
            parts.push(format!("nr_requests {n}"));
        }
        if let Some(s) = &self.scheduler {
            parts.push(format!("scheduler {s}"));
        }
        if let Some(r) = self.rotational {
            parts.push(if r { "rotational" } else { "not rotational" }.to_string());
        }
        let on = if self.of_filesystem { " (its filesystem's device)" } else { "" };
        format!("{}{on}: {}", self.device, parts.join(", "))
    }

    /// The scheduler sysfs marks active: `none [mq-deadline] kyber` → `mq-deadline`.
    pub fn active_scheduler(line: &str) -> String {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
            .unwrap_or(line.trim())
            .to_string()
    }
}

/// A block device's own counters over an interval, from `/proc/diskstats`: requests completed
/// and 512-byte sectors moved, per direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceIo {
    pub reads: u64,
    pub read_sectors: u64,
    pub writes: u64,
    pub write_sectors: u64,
    pub discards: u64,
    pub discard_sectors: u64,
}

impl DeviceIo {
    /// The counters of one `/proc/diskstats` line's fields after the device name (kernel
    /// 4.18+ has discards; older lines leave them 0). None: not such a line.
    pub fn parse_fields(fields: &[&str]) -> Option<DeviceIo> {
        let at = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
        Some(DeviceIo {
            reads: at(0)?,
            read_sectors: at(2)?,
            writes: at(4)?,
            write_sectors: at(6)?,
            discards: at(11).unwrap_or(0),
            discard_sectors: at(13).unwrap_or(0),
        })
    }

    /// `/proc/diskstats`' counters of device `name` (`sda`, `loop3`, `nvme0n1p2`).
    pub fn of_device(diskstats: &str, name: &str) -> Option<DeviceIo> {
        diskstats.lines().find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 3 && f[2] == name).then(|| DeviceIo::parse_fields(&f[3..])).flatten()
        })
    }

    /// Every device's counters of one `/proc/diskstats` reading, by name: parsed once for all
    /// of a host's targets (a scan per target would be quadratic in the devices).
    pub fn table(diskstats: &str) -> std::collections::HashMap<String, DeviceIo> {
        diskstats
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() > 3).then(|| DeviceIo::parse_fields(&f[3..]).map(|d| (f[2].to_string(), d))).flatten()
            })
            .collect()
    }

    /// What happened between two readings (counters wrap only after 2^64; a device that was
    /// replaced between them counts from 0).
    pub fn between(a: &DeviceIo, b: &DeviceIo) -> DeviceIo {
        DeviceIo {
            reads: b.reads.saturating_sub(a.reads),
            read_sectors: b.read_sectors.saturating_sub(a.read_sectors),
            writes: b.writes.saturating_sub(a.writes),
            write_sectors: b.write_sectors.saturating_sub(a.write_sectors),
            discards: b.discards.saturating_sub(a.discards),
            discard_sectors: b.discard_sectors.saturating_sub(a.discard_sectors),
        }
    }

    pub fn add(&mut self, o: &DeviceIo) {
        self.reads = self.reads.saturating_add(o.reads);
        self.read_sectors = self.read_sectors.saturating_add(o.read_sectors);
        self.writes = self.writes.saturating_add(o.writes);
        self.write_sectors = self.write_sectors.saturating_add(o.write_sectors);
        self.discards = self.discards.saturating_add(o.discards);
        self.discard_sectors = self.discard_sectors.saturating_add(o.discard_sectors);
    }

    /// The mean size of the read requests the device completed, bytes (None: none).
    pub fn read_request_bytes(&self) -> Option<f64> {
        (self.reads > 0).then(|| self.read_sectors as f64 * 512.0 / self.reads as f64)
    }

    /// The mean size of the write requests the device completed, bytes (None: none).
    pub fn write_request_bytes(&self) -> Option<f64> {
        (self.writes > 0).then(|| self.write_sectors as f64 * 512.0 / self.writes as f64)
    }
}

/// One target's part of an interval. Recorded by the I/O threads only when a host drives
/// several targets (one target's figures are the interval's own, filled in once per interval).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TargetStats {
    /// The target's place in the run's list of targets (on several hosts: after the targets
    /// of the hosts before it).
    pub target: u32,
    pub read_ops: u64,
    pub read_bytes: u64,
    pub write_ops: u64,
    pub write_bytes: u64,
    pub trim_ops: u64,
    pub trim_bytes: u64,
    /// Latency of its completed I/Os, every direction, ns.
    pub hist: LatencyHistogram,
    /// Its failed I/Os (by errno: the interval's `errors`, which name their target).
    pub errors: u64,
    /// Per-second samples, as the interval's.
    pub samples: Vec<Sample>,
    /// Its block device's own counters over the interval (a file's: its filesystem's device,
    /// shared with whatever else is on it). None: not read (no device, no `/proc/diskstats`).
    pub device: Option<DeviceIo>,
}

impl TargetStats {
    /// An empty part to merge into: its histogram holds no memory until it does (issue 46).
    pub fn empty() -> TargetStats {
        TargetStats {
            target: 0,
            read_ops: 0,
            read_bytes: 0,
            write_ops: 0,
            write_bytes: 0,
            trim_ops: 0,
            trim_bytes: 0,
            hist: LatencyHistogram::empty(),
            errors: 0,
            samples: Vec::new(),
            device: None,
        }
    }

    /// A target's part as an I/O thread records it: its latency to 2 significant digits
    /// ([`LatencyHistogram::coarse`]).
    pub fn new(target: u32, samples: usize) -> TargetStats {
        TargetStats {
            target,
            hist: LatencyHistogram::coarse(),
            samples: vec![Sample::default(); samples],
            ..TargetStats::empty()
        }
    }

    pub fn ops(&self) -> u64 {
        self.read_ops.saturating_add(self.write_ops).saturating_add(self.trim_ops)
    }

    /// Bytes moved: as [`crate::IntervalStats::bytes`], a trim's only for trims alone.
    pub fn bytes(&self) -> u64 {
        if self.read_ops == 0 && self.write_ops == 0 {
            self.trim_bytes
        } else {
            self.read_bytes.saturating_add(self.write_bytes)
        }
    }

    pub fn reset(&mut self) {
        let (target, n) = (self.target, self.samples.len());
        self.hist.reset();
        // Not `mem::take` or `..Default::default()`: each would allocate and zero a full
        // histogram only to drop it, at every interval boundary of every I/O thread.
        let hist = std::mem::replace(&mut self.hist, LatencyHistogram::empty());
        let mut samples = std::mem::take(&mut self.samples);
        samples.clear();
        samples.resize(n, Sample::default());
        *self = TargetStats { target, hist, samples, ..TargetStats::empty() };
    }

    pub fn merge(&mut self, o: &TargetStats) {
        self.read_ops = self.read_ops.saturating_add(o.read_ops);
        self.read_bytes = self.read_bytes.saturating_add(o.read_bytes);
        self.write_ops = self.write_ops.saturating_add(o.write_ops);
        self.write_bytes = self.write_bytes.saturating_add(o.write_bytes);
        self.trim_ops = self.trim_ops.saturating_add(o.trim_ops);
        self.trim_bytes = self.trim_bytes.saturating_add(o.trim_bytes);
        self.hist.merge(&o.hist);
        self.errors = self.errors.saturating_add(o.errors);
        if self.samples.len() < o.samples.len() {
            self.samples.resize(o.samples.len(), Sample::default());
        }
        for (a, b) in self.samples.iter_mut().zip(&o.samples) {
            a.merge(b);
        }
        match (&mut self.device, &o.device) {
            (Some(a), Some(b)) => a.add(b),
            (None, Some(b)) => self.device = Some(*b),
            _ => {}
        }
    }
}

/// Merges `other`'s targets into `into`, by target (both sorted by target, as they stay).
pub fn merge_targets(into: &mut Vec<TargetStats>, other: &[TargetStats]) {
    for t in other {
        match into.binary_search_by_key(&t.target, |x| x.target) {
            Ok(i) => into[i].merge(t),
            Err(i) => into.insert(i, t.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DISKSTATS: &str = "   7       0 loop0 120 3 9600 40 64 0 131072 900 0 1000 1000 2 0 16 1 0 0\n\
                              259       0 nvme0n1 5 0 40 1 0 0 0 0 0 1 1\n";

    #[test]
    fn diskstats_lines_give_requests_and_sectors() {
        let d = DeviceIo::of_device(DISKSTATS, "loop0").unwrap();
        assert_eq!((d.reads, d.read_sectors, d.writes, d.write_sectors), (120, 9600, 64, 131072));
        assert_eq!((d.discards, d.discard_sectors), (2, 16));
        // 131072 sectors in 64 requests: 1 MiB each.
        assert_eq!(d.write_request_bytes(), Some(1048576.0));
        assert_eq!(d.read_request_bytes(), Some(40960.0));
        let old = DeviceIo::of_device(DISKSTATS, "nvme0n1").unwrap();
        assert_eq!((old.reads, old.discards), (5, 0), "a line without discards (before 4.18)");
        assert_eq!(DeviceIo::of_device(DISKSTATS, "loop"), None, "names match whole");
        assert_eq!(DeviceIo::of_device("7 0 loop0 x y", "loop0"), None);
        let t = DeviceIo::table(DISKSTATS);
        assert_eq!((t.len(), t["loop0"]), (2, d));
    }

    #[test]
    fn device_counts_between_readings_and_added() {
        let a = DeviceIo { writes: 10, write_sectors: 80, ..Default::default() };
        let b = DeviceIo { writes: 30, write_sectors: 2128, ..Default::default() };
        let mut d = DeviceIo::between(&a, &b);
        assert_eq!(d.write_request_bytes(), Some(2048.0 * 512.0 / 20.0));
        assert_eq!(DeviceIo::between(&b, &a), DeviceIo::default(), "a replaced device counts from 0");
        d.add(&d.clone());
        assert_eq!((d.writes, d.write_sectors), (40, 4096));
        assert_eq!(d.read_request_bytes(), None);
    }

    #[test]
    fn targets_merge_by_target_and_stay_sorted() {
        let mut a = vec![TargetStats::new(0, 2), TargetStats::new(3, 2)];
        a[0].read_ops = 1;
        let mut b = TargetStats::new(1, 2);
        b.write_ops = 5;
        b.write_bytes = 5 << 12;
        b.samples[1].record(10, 4096);
        b.device = Some(DeviceIo { writes: 2, ..Default::default() });
        let mut c = TargetStats::new(0, 2);
        c.read_ops = 2;
        c.hist.record(100);
        merge_targets(&mut a, &[b.clone(), c]);
        assert_eq!(a.iter().map(|t| t.target).collect::<Vec<_>>(), vec![0, 1, 3]);
        assert_eq!(a[0].read_ops, 3);
        assert_eq!(a[0].hist.count(), 1);
        assert_eq!(a[1], b);
        merge_targets(&mut a, &[b]);
        assert_eq!(a[1].device.unwrap().writes, 4);
        assert_eq!(a[1].bytes(), 10 << 12);
        let mut r = a[1].clone();
        r.reset();
        assert_eq!(r, TargetStats::new(1, 2));
    }
}
