//! Figures per target, per LUN and per path (issue 42, part 3): what each target of a step did,
//! the paths of one LUN added up into the LUN's figures, how evenly the load spread over paths,
//! LUNs, groups and hosts, and when the kernel split iocurve's I/Os before the device saw them.

use crate::result::{Flag, StepResult, TargetInfo};

pub use crate::result::{Balance, DeviceSeen, LunStepResult, TargetStepResult};

/// The LUNs of a step's targets (by their identity), those with several paths or all of them
/// where a LUN identity is known; in the order of their first path.
pub fn luns(s: &StepResult, infos: &[TargetInfo]) -> Vec<LunStepResult> {
    let mut out: Vec<(LunStepResult, f64, Vec<f64>)> = Vec::new();
    for t in &s.targets {
        let Some(lun) = infos.iter().find(|i| i.path == t.target).and_then(|i| i.lun.clone()) else { continue };
        let at = match out.iter().position(|l| l.0.lun == lun) {
            Some(i) => i,
            None => {
                out.push((
                    LunStepResult {
                        lun,
                        paths: Vec::new(),
                        iops: 0.0,
                        mbps: 0.0,
                        lat_mean_us: 0.0,
                        errors: 0,
                        paths_balance_pct: None,
                    },
                    0.0,
                    Vec::new(),
                ));
                out.len() - 1
            }
        };
        let (l, lat_sum, per_path) = &mut out[at];
        l.paths.push(t.target.clone());
        l.iops += t.iops;
        l.mbps += t.mbps;
        l.errors += t.errors;
        *lat_sum += t.lat_us.mean * t.iops;
        per_path.push(t.iops);
    }
    out.into_iter()
        .map(|(mut l, lat_sum, per_path)| {
            l.lat_mean_us = if l.iops > 0.0 { lat_sum / l.iops } else { 0.0 };
            l.paths_balance_pct = (per_path.len() > 1).then(|| balance_of(&per_path));
            l
        })
        .collect()
}

fn balance_of(v: &[f64]) -> f64 {
    let max = v.iter().copied().fold(0.0, f64::max);
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    if max > 0.0 { min / max * 100.0 } else { 100.0 }
}

/// The balance over `units` (name, IOPS), when there are several.
fn balance(over: &str, units: &[(String, f64)]) -> Option<Balance> {
    if units.len() < 2 {
        return None;
    }
    let by = |f: fn(f64, f64) -> bool| units.iter().fold(&units[0], |a, b| if f(b.1, a.1) { b } else { a }).0.clone();
    Some(Balance {
        over: over.into(),
        units: units.len(),
        balance_pct: balance_of(&units.iter().map(|u| u.1).collect::<Vec<_>>()),
        lowest: by(|b, a| b < a),
        highest: by(|b, a| b > a),
    })
}

/// A step's balances over its paths, LUNs, target groups and hosts (each where it has several).
pub fn balances(s: &StepResult, infos: &[TargetInfo]) -> Vec<Balance> {
    let paths: Vec<(String, f64)> = s.targets.iter().map(|t| (t.target.clone(), t.iops)).collect();
    let luns: Vec<(String, f64)> = s.luns.iter().map(|l| (l.paths.join("+"), l.iops)).collect();
    let mut groups: Vec<(String, f64)> = Vec::new();
    for t in &s.targets {
        let Some(g) = infos.iter().find(|i| i.path == t.target).map(|i| i.group.clone()) else { continue };
        match groups.iter_mut().find(|x| x.0 == g) {
            Some(x) => x.1 += t.iops,
            None => groups.push((g, t.iops)),
        }
    }
    let hosts: Vec<(String, f64)> = s.host_results.iter().map(|h| (h.host.clone(), h.iops)).collect();
    [balance("paths", &paths), balance("luns", &luns), balance("groups", &groups), balance("hosts", &hosts)]
        .into_iter()
        .flatten()
        .collect()
}

/// A block device that saw smaller requests than iocurve issued: the kernel split them
/// (`max_sectors_kb`), so the storage measured another block size than the plan's. Only for
/// block device targets: a file's device also sees the filesystem's own requests.
pub fn split_flags(s: &StepResult, infos: &[TargetInfo]) -> Vec<Flag> {
    let mut out = Vec::new();
    for t in &s.targets {
        let Some(info) = infos.iter().find(|i| i.path == t.target) else { continue };
        let Some(q) = info.device.as_ref().filter(|q| !q.of_filesystem) else { continue };
        let Some(d) = &t.device else { continue };
        for (what, ours, seen) in
            [("read", t.read_kib, d.read_request_kib), ("wrote", t.write_kib, d.write_request_kib)]
        {
            let (Some(ours), Some(seen)) = (ours, seen) else { continue };
            // A quarter smaller on average: more than rounding or a few merged requests.
            if seen * 1.25 < ours {
                let limit = match q.max_sectors_kb {
                    Some(k) if (k as f64) < ours => format!(" (its max_sectors_kb is {k})"),
                    // Not max_sectors_kb: the segments a request may have, or a driver's own limit.
                    Some(k) => format!(
                        " (its max_sectors_kb is {k}: another of its queue's limits, such as max_segments, split them)"
                    ),
                    None => String::new(),
                };
                out.push(Flag {
                    code: "split".into(),
                    message: format!(
                        "iocurve {what} {} KiB per I/O on {}, but {} saw {} KiB per request on average{limit}: the kernel split the I/Os, and the storage measured smaller blocks than the plan's",
                        fmt_kib(ours),
                        t.target,
                        q.device,
                        fmt_kib(seen)
                    ),
                });
            }
        }
    }
    out
}

fn fmt_kib(k: f64) -> String {
    if (k - k.round()).abs() < 0.05 { format!("{k:.0}") } else { format!("{k:.1}") }
}

impl crate::RunResult {
    /// Each step's LUNs, balances and split warnings, from the run's targets' identities and
    /// devices (the per-target figures come with the step).
    pub fn with_luns(mut self) -> Self {
        let infos = self.targets.clone();
        for w in &mut self.workloads {
            for s in &mut w.steps {
                s.luns = luns(s, &infos);
                // A LUN of one path is its target: listed only where some LUN has several.
                if s.luns.iter().all(|l| l.paths.len() < 2) {
                    s.luns.clear();
                }
                s.balance = balances(s, &infos);
                let split = split_flags(s, &infos);
                s.flags.extend(split);
            }
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iocurve_stats::{CpuUsage, DeviceIo, IntervalStats, StepRecord, TargetStats};

    fn step(parts: &[(u32, u64, u64, Option<DeviceIo>)]) -> StepRecord {
        let mut st = IntervalStats::with_samples(1);
        for &(t, ops, bs, dev) in parts {
            let mut p = TargetStats::new(t, 1);
            for _ in 0..ops {
                st.write.record(1000, bs);
                p.write_ops += 1;
                p.write_bytes += bs;
                p.hist.record(100 * u64::from(t + 1)); // exact at 2 digits: below 256 ns, even ones to 512
            }
            p.device = dev;
            st.targets.push(p);
        }
        let mut rec = StepRecord::new(1, 1, 1, 2.0, 1.0);
        rec.push_interval(st, CpuUsage::default(), 2.0);
        rec
    }

    fn info(path: &str, lun: &str, group: &str, fs: bool) -> TargetInfo {
        TargetInfo {
            path: path.into(),
            kind: "block device".into(),
            size: 1 << 30,
            logical_block: 512,
            group: group.into(),
            scratch: false,
            preconditioned_at: None,
            lun: Some(lun.into()),
            device: Some(iocurve_stats::DeviceQueue {
                device: path.trim_start_matches("/dev/").into(),
                max_sectors_kb: Some(64),
                of_filesystem: fs,
                ..Default::default()
            }),
        }
    }

    #[test]
    fn targets_add_up_to_the_step_and_paths_of_one_lun_to_the_lun() {
        // 1 MiB writes; loop1 and loop2 are paths of one LUN, loop3 another; loop1's device
        // saw its 30 MiB in 480 requests (64 KiB each): split.
        let split = DeviceIo { writes: 480, write_sectors: 480 * 128, ..Default::default() };
        let rec = step(&[(0, 30, 1 << 20, Some(split)), (1, 10, 1 << 20, None), (2, 20, 1 << 20, None)]);
        let paths: Vec<String> = ["/dev/loop1", "/dev/loop2", "/dev/loop3"].map(String::from).to_vec();
        let mut s = crate::analyze_step_on(&rec, false, &crate::Thresholds::default(), &paths);
        s.targets = crate::step::targets_of(&rec, &paths);
        assert_eq!(s.targets.iter().map(|t| t.iops).sum::<f64>(), s.iops, "30 + 10 + 20 I/Os in 2 s");
        assert_eq!(s.targets[0].iops, 15.0);
        assert_eq!(s.targets[0].share_pct, 50.0);
        // (A target's latency is kept to 2 significant digits: within 1 %.)
        assert!((s.targets[2].lat_us.mean - 0.3).abs() < 0.003, "{}", s.targets[2].lat_us.mean);
        let d = s.targets[0].device.as_ref().unwrap();
        assert_eq!((d.requests_per_s, d.write_request_kib), (240.0, Some(64.0)));
        let infos = [
            info("/dev/loop1", "lun A", "ctl-a", false),
            info("/dev/loop2", "lun A", "ctl-b", false),
            info("/dev/loop3", "lun B", "ctl-a", false),
        ];
        s.luns = luns(&s, &infos);
        assert_eq!(s.luns.len(), 2);
        assert_eq!(s.luns[0].paths, ["/dev/loop1", "/dev/loop2"]);
        assert_eq!(s.luns[0].iops, 20.0, "the LUN is its paths added");
        assert!((s.luns[0].lat_mean_us - (15.0 * 0.1 + 5.0 * 0.2) / 20.0).abs() < 0.002, "{}", s.luns[0].lat_mean_us);
        assert_eq!(s.luns[0].paths_balance_pct, Some(5.0 / 15.0 * 100.0));
        let b = balances(&s, &infos);
        let over: Vec<(&str, f64)> = b.iter().map(|b| (b.over.as_str(), b.balance_pct)).collect();
        assert_eq!(
            over,
            [("paths", 5.0 / 15.0 * 100.0), ("luns", 10.0 / 20.0 * 100.0), ("groups", 5.0 / 25.0 * 100.0)]
        );
        assert_eq!((b[0].lowest.as_str(), b[0].highest.as_str()), ("/dev/loop2", "/dev/loop1"));
        let f = split_flags(&s, &infos);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].message.contains("wrote 1024 KiB per I/O on /dev/loop1, but loop1 saw 64 KiB"),
            "{}",
            f[0].message
        );
        assert!(f[0].message.contains("max_sectors_kb is 64"), "{}", f[0].message);
        // A file's device sees the filesystem's requests too: no claim about splitting.
        let fs = [info("/dev/loop1", "lun A", "g", true)];
        assert!(split_flags(&s, &fs).is_empty());
    }
}
