//! The arithmetic published storage benchmarks do around their measurements, so that no reader
//! redoes it by hand: what a RAID group delivers, what links carry, what lower latency buys an
//! application, what data reduction to expect. Pure formulas; `iocurve size` prints them.

pub use crate::result::LinkUse;

/// A RAID level and its write penalty: back-end I/Os per front-end write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Raid {
    /// Striping: one write is one disk write.
    Raid0,
    /// Mirroring (RAID 1, RAID 10): two disk writes.
    Raid1,
    /// Single parity (RAID 5, and per group RAID 50): read data and parity, write both.
    Raid5,
    /// Double parity (RAID 6, and per group RAID 60): read data and two parities, write all three.
    Raid6,
    /// NetApp's RAID-DP: double parity written in full stripes, penalty 2.
    RaidDp,
}

impl Raid {
    pub fn parse(s: &str) -> Option<Raid> {
        Some(match s.to_ascii_lowercase().replace(['-', '_', ' '], "").as_str() {
            "0" | "raid0" => Raid::Raid0,
            "1" | "10" | "raid1" | "raid10" => Raid::Raid1,
            "5" | "50" | "raid5" | "raid50" => Raid::Raid5,
            "6" | "60" | "raid6" | "raid60" => Raid::Raid6,
            "dp" | "raiddp" => Raid::RaidDp,
            _ => return None,
        })
    }

    /// The fewest disks a group of this level has (RAID 1: a pair; RAID 5: two data disks
    /// and parity; RAID 6 and RAID-DP: two data disks and two parities, RAID-DP one less).
    pub fn min_disks(self) -> u32 {
        match self {
            Raid::Raid0 => 1,
            Raid::Raid1 => 2,
            Raid::Raid5 | Raid::RaidDp => 3,
            Raid::Raid6 => 4,
        }
    }

    /// Back-end disk I/Os per front-end write.
    pub fn write_penalty(self) -> f64 {
        match self {
            Raid::Raid0 => 1.0,
            Raid::Raid1 | Raid::RaidDp => 2.0,
            Raid::Raid5 => 4.0,
            Raid::Raid6 => 6.0,
        }
    }
}

/// Front-end IOPS a RAID group of `disks` disks of `disk_iops` each delivers at read share
/// `read` (0 to 1): every read costs one disk I/O, every write `P` of them, so
/// IOPS = n·I / (R + P·W). (Not the common "raw·R + raw·W/P", which gives the wrong answer
/// for every mix but pure reads and pure writes.)
pub fn raid_iops(disks: u32, disk_iops: f64, read: f64, raid: Raid) -> f64 {
    disks as f64 * disk_iops / (read + raid.write_penalty() * (1.0 - read))
}

/// The disks a RAID group needs for `iops` front-end IOPS: the formula above solved for n,
/// rounded up.
/// None when more than [`MAX_DISKS`] would be needed: no group is that large, so the inputs
/// are wrong (issue 36: `--iops 1e300` printed 4'294'967'295 disks).
pub fn raid_disks_for(iops: f64, disk_iops: f64, read: f64, raid: Raid) -> Option<u32> {
    let n = (iops * (read + raid.write_penalty() * (1.0 - read)) / disk_iops - 1e-9).ceil();
    (n <= MAX_DISKS as f64).then(|| (n as u32).max(raid.min_disks()))
}

/// The most disks `size raid` computes with: far beyond any array's group.
pub const MAX_DISKS: u32 = 1_000_000;

pub use iocurve_plan::links::{LINKS, Link, parse_link};

/// What `count` links of one type carry: nominal both ways as vendors count it (Gbit/s × 2
/// directions, in GB/s), and usable per direction (MB/s).
pub fn links(count: u32, link: &Link) -> (f64, f64) {
    (count as f64 * link.nominal_gbit / 8.0 * 2.0, count as f64 * link.usable_mbps)
}

/// What `step` used of the links the stored `plan` gives its hosts (each `[[hosts]]` entry's
/// `links`, else the plan's). On several hosts, each host's MB/s (split into reads and writes
/// as the step's are) against its own links, and the busiest host is the figure: a sum over
/// hosts would hide the one at its limit. None when a host that ran the step has no known
/// links.
pub fn link_use(plan: &serde_json::Value, step: &crate::result::StepResult) -> Option<LinkUse> {
    let default = parse_links(&plan["links"]);
    let of_host = |addr: &str| host_links(plan, addr);
    let share = |mbps: f64, cap: f64| mbps / cap * 100.0;
    if step.host_results.len() > 1 {
        let (r, w) =
            if step.mbps > 0.0 { (step.read.mbps / step.mbps, step.write.mbps / step.mbps) } else { (0.0, 0.0) };
        let mut busiest: Option<LinkUse> = None;
        for h in &step.host_results {
            // A relay's row is its group's: no one host's links carry it.
            if h.hosts > 1 {
                return None;
            }
            let l = of_host(&h.host)?;
            let cap = l.usable_mbps()?;
            let u = LinkUse {
                links: format!("{} on {}, the busiest of {} hosts", l.describe(), h.host, step.host_results.len()),
                capacity_mbps: cap,
                read_pct: share(h.mbps * r, cap),
                write_pct: share(h.mbps * w, cap),
            };
            if busiest.as_ref().is_none_or(|b| u.pct() > b.pct()) {
                busiest = Some(u);
            }
        }
        return busiest;
    }
    let l = match step.host_results.first() {
        Some(h) => of_host(&h.host)?,
        // Several hosts without their figures (a run stored before they were kept): no share.
        None if step.hosts > 1 => return None,
        None => default?,
    };
    let cap = l.usable_mbps()?;
    Some(LinkUse {
        links: l.describe(),
        capacity_mbps: cap,
        read_pct: share(step.read.mbps, cap),
        write_pct: share(step.write.mbps, cap),
    })
}

fn parse_links(v: &serde_json::Value) -> Option<iocurve_plan::links::HostLinks> {
    serde_json::from_value(v.clone()).ok()
}

/// Agent `addr`'s links in the stored `plan`: its `[[hosts]]` entry's, else the plan's.
fn host_links(plan: &serde_json::Value, addr: &str) -> Option<iocurve_plan::links::HostLinks> {
    let own = plan["hosts"]
        .as_array()
        .and_then(|hs| hs.iter().find(|h| h["address"] == addr))
        .and_then(|h| parse_links(&h["links"]));
    own.or_else(|| parse_links(&plan["links"]))
}

/// What the links of the hosts that ran `step` carry together (usable MB/s per direction):
/// a host-count sweep's ceiling at that count. None when a host's links are not known, or a
/// row is a relay's group's (its hosts' rows not taken: which hosts' links it stands for is not
/// in it, and counting it as one host understated the ceiling).
pub fn links_ceiling(plan: &serde_json::Value, step: &crate::result::StepResult) -> Option<f64> {
    let mut sum = 0.0;
    for h in &step.host_results {
        if h.hosts > 1 {
            return None;
        }
        sum += host_links(plan, &h.host)?.usable_mbps()?;
    }
    (!step.host_results.is_empty()).then_some(sum)
}

/// The time one block of workload `name` takes to cross a link of its hosts, from the stored
/// `plan`: its block size (reads' and writes' alike) over the usable payload rate of the
/// fastest link any host has — the floor under every I/O, so under the mean of all hosts too
/// (the slowest host's would be a floor for its own I/Os only, and may lie above a mean the
/// faster hosts pull down). None when the workload mixes block sizes (a mean over a mix has no
/// one block to draw), or a host's links are unknown (it may have the fastest).
pub fn transfer_floor(plan: &serde_json::Value, name: &str) -> Option<crate::TransferFloor> {
    let w = plan["workloads"].as_array()?.iter().find(|w| w["name"] == name)?;
    let mut sizes: Vec<u64> = ["bs", "write_bs"]
        .iter()
        .filter_map(|k| w[*k].as_array())
        .flatten()
        .filter_map(|b| b["bytes"].as_u64())
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    let [bytes] = sizes[..] else { return None };
    let hosts: Vec<Option<iocurve_plan::links::HostLinks>> = match plan["hosts"].as_array() {
        Some(hs) if !hs.is_empty() => {
            hs.iter().map(|h| parse_links(&h["links"]).or_else(|| parse_links(&plan["links"]))).collect()
        }
        _ => vec![parse_links(&plan["links"])],
    };
    let mut fastest: Option<&Link> = None;
    for h in hosts {
        let name = h?.link;
        let l = LINKS.iter().find(|l| l.name == name)?;
        if fastest.is_none_or(|f| l.usable_mbps > f.usable_mbps) {
            fastest = Some(l);
        }
    }
    let l = fastest?;
    Some(crate::TransferFloor { us: transfer_ms(bytes, l) * 1000.0, bytes, link: l.name.to_string() })
}

impl crate::RunResult {
    /// Sets every workload's [`LinkUse`] at its maximum, from the stored plan's links, and its
    /// transfer floor.
    pub fn with_link_use(mut self) -> Self {
        // A back-end that touches no storage (null) measures iocurve itself: nothing crosses a
        // link.
        let touches =
            |name: &str| iocurve_plan::Backend::parse(name).is_none_or(iocurve_plan::Backend::touches_storage);
        for w in self.workloads.iter_mut().filter(|w| touches(&w.backend)) {
            w.links = w.maximum.and_then(|p| w.steps.get(p.step)).and_then(|s| link_use(&self.plan, s));
            w.transfer_floor = transfer_floor(&self.plan, &w.name);
            // A host-count sweep: each count's ceiling, from the hosts that ran its maximum.
            if let Some(sweep) = w.host_sweep.as_mut() {
                for a in &mut sweep.by_hosts {
                    a.link_ceiling_mbps =
                        a.maximum.and_then(|p| w.steps.get(p.step)).and_then(|s| links_ceiling(&self.plan, s));
                }
            }
        }
        self
    }
}

/// Amdahl for storage (the method of IBM's "acceleration potential"): an application spends
/// share `f` of its time waiting for I/O; latency falls from `old` to `new`. Returns the
/// speed-up 1/((1−f) + f/k) with k = old/new, and the share of time saved.
pub fn speedup(f: f64, old: f64, new: f64) -> (f64, f64) {
    let k = old / new;
    let t = (1.0 - f) + f / k;
    (1.0 / t, 1.0 - t)
}

/// Where a measured curve carries `iops`: the mean latency there (µs), interpolated linearly
/// between the two steps around it on the way up (the first crossing: the lower-latency side
/// of a curve that bends back), and those steps. At or below the lightest step's load, that
/// step's latency (no claim below what was measured). `points` are (IOPS, mean µs, label) of
/// the measured steps in ramp order. Err: the curve never carried `iops`.
pub fn latency_at<'a>(points: &[(f64, f64, &'a str)], iops: f64) -> Result<(f64, Vec<&'a str>), String> {
    let Some(first) = points.first() else { return Err("the workload has no measured step".into()) };
    if iops <= first.0 {
        return Ok((first.1, vec![first.2]));
    }
    for w in points.windows(2) {
        let ((i0, l0, a), (i1, l1, b)) = (w[0], w[1]);
        if (i0..=i1).contains(&iops) && i1 > i0 {
            return Ok((l0 + (l1 - l0) * (iops - i0) / (i1 - i0), vec![a, b]));
        }
    }
    // The maximum as printed (rounded to whole IOPS) is carried too.
    let max = points.iter().map(|p| p.0).fold(0.0, f64::max);
    if iops < max + 0.5 {
        return latency_at(points, max);
    }
    Err(format!(
        "the curve never carried {iops:.0} IOPS: its highest step counted (measured, complete, sustained) did {max:.0}"
    ))
}

/// Synchronous mirroring (issue 42): every mirrored write is processed twice — by the array
/// that takes it and by its mirror — before it is acknowledged, so the arrays together process
/// the front-end writes × (1 + mirrored share). `mirrored` is a share, 0 to 1: 3.5 M front-end
/// write IOPS with half of them mirrored are 5.25 M processed. Reads are served once and do
/// not count.
pub fn replicated(front_end: f64, mirrored: f64) -> f64 {
    front_end * (1.0 + mirrored)
}

/// What `mbps` (MB/s, one direction) is of `count` links of one type: percent of their
/// nominal rate per direction (Gbit/s ÷ 8, as vendors sell it) and of their usable payload
/// ([`links`]). 11,500 MB/s of 4 × 32G FC: 71.9 % of 16 GB/s nominal, 89.8 % of 12.8 GB/s
/// usable — the second is how close to their limit they are.
pub fn link_share(count: u32, link: &Link, mbps: f64) -> (f64, f64) {
    let nominal = f64::from(count) * link.nominal_gbit * 1000.0 / 8.0;
    let usable = f64::from(count) * link.usable_mbps;
    (mbps / nominal * 100.0, mbps / usable * 100.0)
}

/// The time one block of `bytes` takes to cross one link at its usable payload rate, ms: the
/// floor under any latency measured through that link (256 KiB on 16G FC: 0.164 ms). Payload
/// time only: switches, protocol exchanges and the array add to it, which is why vendors'
/// rules of thumb are higher.
pub fn transfer_ms(bytes: u64, link: &Link) -> f64 {
    bytes as f64 / (link.usable_mbps * 1e6) * 1000.0
}

/// Where a measured curve first reaches a mean latency of `lat_us`: the throughput there,
/// interpolated linearly between the two steps around it (in ramp order, the first crossing),
/// and those steps — the inverse of [`latency_at`] ("≈ 64,000 IOPS at 1 ms"). `points` are
/// (throughput, mean µs, label) of the measured steps in ramp order. Err, in words: the
/// lightest step already took longer (no throughput is known at that latency), or the curve
/// never reached it (its maximum was at a lower latency: the storage was not pushed that far).
pub fn throughput_at<'a>(points: &[(f64, f64, &'a str)], lat_us: f64) -> Result<(f64, Vec<&'a str>), String> {
    let Some(first) = points.first() else { return Err("the workload has no measured step".into()) };
    if lat_us < first.1 {
        return Err(format!(
            "even its lightest step ({}) took {} µs mean, more than {} µs: no throughput is known at that latency",
            first.2,
            crate::format::lat_us(first.1),
            crate::format::lat_us(lat_us)
        ));
    }
    if lat_us == first.1 {
        return Ok((first.0, vec![first.2]));
    }
    for w in points.windows(2) {
        let ((t0, l0, a), (t1, l1, b)) = (w[0], w[1]);
        if l0 <= lat_us && lat_us <= l1 && l1 > l0 {
            return Ok((t0 + (t1 - t0) * (lat_us - l0) / (l1 - l0), vec![a, b]));
        }
    }
    let top = points.iter().fold(first, |m, p| if p.0 > m.0 { p } else { m });
    Err(format!(
        "never reached {} µs: at its maximum ({}) it had {} µs",
        crate::format::lat_us(lat_us),
        top.2,
        crate::format::lat_us(top.1)
    ))
}

/// The data reduction an array should reach on iocurve's data: compression (`expected`, from
/// the data pattern) times deduplication.
pub fn expected_reduction(pattern: &iocurve_plan::DataPattern) -> f64 {
    pattern.expected_compression() * pattern.dedupe
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn link_use_is_the_busiest_hosts_share_of_its_own_links() {
        let step = |read: f64, write: f64, hosts: &[(&str, f64)]| {
            use iocurve_stats::{CpuUsage, IntervalStats, StepRecord};
            let mut st = IntervalStats::with_samples(1);
            st.read.record(1000, 4096);
            let mut rec = StepRecord::new(1, 1, 1, 1.0, 1.0);
            rec.push_interval(st, CpuUsage::default(), 1.0);
            let mut s = crate::analyze_step(&rec, false, &crate::Thresholds::default());
            (s.hosts, s.read.mbps, s.write.mbps, s.mbps) = (hosts.len().max(1) as u32, read, write, read + write);
            s.host_results = hosts
                .iter()
                .map(|&(host, mbps)| crate::HostStepResult {
                    host: host.into(),
                    hostname: host.into(),
                    workers: 1,
                    iops: 0.0,
                    mbps,
                    lat_us: Default::default(),
                    errors: 0,
                    started_at_us: 0.0,
                    lost_at_s: None,
                    clock_offset_ms: 0.0,
                    clock_moved_ms: None,
                    samples: Vec::new(),
                    hosts: 1,
                })
                .collect();
            s
        };
        let links = |t: &str| serde_json::to_value(iocurve_plan::links::HostLinks::parse(t).unwrap()).unwrap();
        // One host, 2 × 32G FC: 5,248 MB/s of reads is 82 % of 6,400.
        let plan = serde_json::json!({ "links": links("2x32G FC") });
        let u = link_use(&plan, &step(5248.0, 0.0, &[])).unwrap();
        assert_eq!((u.capacity_mbps, u.read_pct.round(), u.write_pct), (6400.0, 82.0, 0.0));
        assert_eq!(u.describe(|v| format!("{v}")), "82 % of the host's links (2 × 32G FC: 6400 a direction), reads");
        // Two hosts started by --launch with the plan's links, one carrying three quarters.
        let u = link_use(&plan, &step(0.0, 8000.0, &[("a:7070", 2000.0), ("b:7070", 6000.0)])).unwrap();
        assert_eq!((u.capacity_mbps, u.write_pct), (6400.0, 93.75));
        assert_eq!(u.links, "2 × 32G FC on b:7070, the busiest of 2 hosts");
        assert!(u.describe(|v| format!("{v}")).starts_with("94 % of a host's links"));
        // [[hosts]] with links of their own: the slow link is the limit, not the sum.
        let plan = serde_json::json!({ "links": links("2x32G FC"), "hosts": [{ "address": "a:7070" }, { "address": "b:7070", "links": links("1x16G FC") }] });
        let u = link_use(&plan, &step(3000.0, 0.0, &[("a:7070", 1500.0), ("b:7070", 1500.0)])).unwrap();
        assert_eq!((u.capacity_mbps, u.read_pct), (1600.0, 93.75));
        // Only the hosts that ran count: a third [[hosts]] entry that did not run is no capacity.
        // A host whose links are unknown: no share at all rather than a wrong one.
        let plan = serde_json::json!({ "hosts": [{ "address": "a:7070", "links": links("4x32G FC") }, { "address": "b:7070" }] });
        assert!(link_use(&plan, &step(2.0, 0.0, &[("a:7070", 1.0), ("b:7070", 1.0)])).is_none());
        assert!(link_use(&serde_json::json!({}), &step(1.0, 0.0, &[])).is_none());
        // A relay's row is its group's (issue 46): no one host's links carry it, so no share
        // (it was the group's MB/s against one host's links).
        let plan = serde_json::json!({ "links": links("2x32G FC") });
        let mut relayed = step(0.0, 8000.0, &[("a:7071", 2000.0), ("c:7071", 6000.0)]);
        relayed.host_results[1].hosts = 32;
        assert!(link_use(&plan, &relayed).is_none());
        // Nor a ceiling of the hosts' links: the group's row is not one host's 6'400 MB/s.
        assert_eq!(links_ceiling(&plan, &step(0.0, 8000.0, &[("a:7071", 2000.0), ("c:7071", 6000.0)])), Some(12800.0));
        assert_eq!(links_ceiling(&plan, &relayed), None);
    }

    #[test]
    fn latency_at_a_load_from_the_curve() {
        let c = [(1000.0, 100.0, "1"), (1900.0, 105.0, "2"), (3000.0, 200.0, "4"), (2800.0, 400.0, "8")];
        assert_eq!(latency_at(&c, 500.0).unwrap(), (100.0, vec!["1"]), "below the lightest step: its latency");
        let (l, around) = latency_at(&c, 2450.0).unwrap();
        assert!((l - 152.5).abs() < 1e-9 && around == ["2", "4"], "{l} {around:?}");
        // 2,900 IOPS is carried on the way up (between 2 and 4), not on the bend back.
        assert_eq!(latency_at(&c, 2900.0).unwrap().1, ["2", "4"]);
        assert!(latency_at(&c, 3001.0).unwrap_err().contains("did 3000"));
        // The maximum as printed, rounded: carried.
        assert_eq!(latency_at(&c, 3000.4).unwrap().0, 200.0);
        assert!(latency_at(&[], 1.0).is_err());
    }

    /// Issue 42: the seed's figures, each exact.
    #[test]
    fn replication_links_and_transfer_floor_of_the_seed() {
        // 3.5 M front-end write IOPS, 50 % mirrored: 5.25 M processed; 47 GB/s → 70.5 GB/s.
        assert_eq!(replicated(3_500_000.0, 0.5), 5_250_000.0);
        assert_eq!(replicated(47_000.0, 0.5), 70_500.0);
        assert_eq!(replicated(1000.0, 0.0), 1000.0, "nothing mirrored: as given");
        // 11,500 MB/s over 4 × 32G FC: 71.9 % of 16 GB/s nominal, 89.8 % of 12.8 GB/s usable.
        let (nominal, usable) = link_share(4, parse_link("32G FC").unwrap(), 11_500.0);
        assert_eq!((format!("{nominal:.1}"), format!("{usable:.1}")), ("71.9".into(), "89.8".into()));
        assert_eq!(nominal, 11_500.0 / 16_000.0 * 100.0);
        // 256 KiB on 16G FC: 262,144 B at 1,600 MB/s = 0.164 ms; 8G twice that.
        let t16 = transfer_ms(262_144, parse_link("16G").unwrap());
        assert_eq!(format!("{t16:.3}"), "0.164");
        assert!((t16 - 0.16384).abs() < 1e-12, "{t16}");
        assert_eq!(transfer_ms(262_144, parse_link("8G").unwrap()), 2.0 * t16);
    }

    /// Issue 42: the floor drawn under a workload's latency: its block on the hosts' links.
    #[test]
    fn transfer_floor_of_a_workload_on_the_plans_links() {
        let links = |t: &str| serde_json::to_value(iocurve_plan::links::HostLinks::parse(t).unwrap()).unwrap();
        let bs = |b: &[u64]| {
            serde_json::json!(b.iter().map(|b| serde_json::json!({"bytes": b, "weight": 1})).collect::<Vec<_>>())
        };
        let plan = serde_json::json!({ "links": links("2x16G FC"), "workloads": [
            { "name": "seq", "bs": bs(&[262_144]) },
            { "name": "mix", "bs": bs(&[4096, 65_536]) },
            { "name": "w64", "bs": bs(&[4096]), "write_bs": bs(&[65_536]) },
        ]});
        let f = transfer_floor(&plan, "seq").unwrap();
        assert_eq!((f.bytes, f.link.as_str()), (262_144, "16G FC"));
        assert!((f.us - 163.84).abs() < 1e-9, "{f:?}");
        assert_eq!(f.describe(), "transfer floor 164 µs (256 KiB on 16G FC)");
        assert_eq!(transfer_floor(&plan, "mix"), None, "a mix of block sizes: skipped");
        assert_eq!(transfer_floor(&plan, "w64"), None, "reads and writes of other sizes: skipped");
        assert_eq!(transfer_floor(&plan, "nothing"), None);
        // Hosts of two link types: the fastest, the floor under every I/O; one unknown: none.
        let mut hosts = plan.clone();
        hosts["hosts"] = serde_json::json!([{ "address": "a:1", "links": links("1x8G FC") }, { "address": "b:1" }]);
        assert_eq!(transfer_floor(&hosts, "seq").unwrap().link, "16G FC");
        hosts["links"] = serde_json::Value::Null;
        assert_eq!(transfer_floor(&hosts, "seq"), None);
        hosts["hosts"][1]["links"] = links("1x8G FC");
        assert!((transfer_floor(&hosts, "seq").unwrap().us - 2.0 * 163.84).abs() < 1e-9);
        assert_eq!(transfer_floor(&serde_json::json!({"workloads": plan["workloads"]}), "seq"), None, "no links");
    }

    /// Issue 42: the Unity test's "≈ 64,000 IOPS at 1 ms", read off the curve.
    #[test]
    fn throughput_at_a_latency_from_the_curve() {
        let c = [(40_000.0, 600.0, "1"), (60_000.0, 900.0, "2"), (70_000.0, 1200.0, "4")];
        let (t, around) = throughput_at(&c, 1000.0).unwrap();
        assert_eq!(format!("{t:.0}"), "63333");
        assert!((t - 190_000.0 / 3.0).abs() < 1e-6 && around == ["2", "4"], "{t} {around:?}");
        assert_eq!(throughput_at(&c, 600.0).unwrap(), (40_000.0, vec!["1"]), "at the lightest step: its own");
        assert_eq!(throughput_at(&c, 1200.0).unwrap().0, 70_000.0);
        let e = throughput_at(&c, 500.0).unwrap_err();
        assert!(e.contains("lightest step (1) took 600 µs"), "{e}");
        let e = throughput_at(&c, 5000.0).unwrap_err();
        assert_eq!(e, "never reached 5'000 µs: at its maximum (4) it had 1'200 µs");
        // A curve that bends back: the first crossing, on the way up.
        let bent = [(1000.0, 100.0, "1"), (3000.0, 200.0, "2"), (2800.0, 400.0, "4")];
        assert_eq!(throughput_at(&bent, 150.0).unwrap().0, 2000.0);
        assert!(throughput_at(&[], 1.0).is_err());
    }

    proptest! {
        #[test]
        fn interpolated_latency_lies_between_its_steps(a in 1.0f64..1e6, da in 1.0f64..1e6, la in 1.0f64..1e5, lb in 1.0f64..1e5, t in 0.0f64..=1.0) {
            let c = [(a, la, "a"), (a + da, lb, "b")];
            let (l, _) = latency_at(&c, a + t * da).unwrap();
            prop_assert!(l >= la.min(lb) - 1e-6 && l <= la.max(lb) + 1e-6);
        }
    }

    #[test]
    fn the_published_examples() {
        // RAID 6, 14+2 disks of 200 IOPS, 70 % reads: 3,200 / (0.7 + 6 × 0.3) = 1,280.
        assert!((raid_iops(16, 200.0, 0.7, Raid::Raid6) - 1280.0).abs() < 1e-9);
        // The wrong formula would say 3,200 × 0.7 + 3,200 × 0.3 / 6 = 2,400.
        assert_eq!(raid_disks_for(1280.0, 200.0, 0.7, Raid::Raid6), Some(16));
        assert_eq!(raid_disks_for(1281.0, 200.0, 0.7, Raid::Raid6), Some(17));
        // Issue 36: absurd targets are no disk count (it printed u32::MAX), tiny ones no
        // group smaller than the level allows.
        assert_eq!(raid_disks_for(1e300, 200.0, 0.7, Raid::Raid6), None);
        assert_eq!(raid_disks_for(1.0, 200.0, 0.7, Raid::Raid6), Some(4));
        // 32 × 32G FC: 256 GB/s as sold (both directions), 102.4 GB/s of payload each way.
        let (nominal, usable) = links(32, parse_link("32G FC").unwrap());
        assert_eq!((nominal, usable), (256.0, 102_400.0));
        // 40 % of the time in I/O, 5 ms → 0.25 ms: 38 % less time, 1.61× as fast.
        let (s, saved) = speedup(0.4, 5.0, 0.25);
        assert!((saved - 0.38).abs() < 1e-12 && (s - 1.0 / 0.62).abs() < 1e-12, "{s} {saved}");
        // compress 0.4 → 1.66:1; with dedupe 2, 3.32:1.
        let p = iocurve_plan::DataPattern { compress: 0.4, dedupe: 1.0, dedupe_unit: 4096, constant: 0 };
        assert_eq!(format!("{:.2}", expected_reduction(&p)), "1.66");
        assert_eq!(format!("{:.2}", expected_reduction(&iocurve_plan::DataPattern { dedupe: 2.0, ..p })), "3.32");
    }

    #[test]
    fn link_names_are_read_as_people_write_them() {
        for (text, name) in [
            ("32G", "32G FC"),
            ("16g fc", "16G FC"),
            ("25GbE", "25G Ethernet"),
            ("100G Ethernet", "100G Ethernet"),
            ("10GE", "10G Ethernet"),
        ] {
            assert_eq!(parse_link(text).map(|l| l.name), Some(name), "{text}");
        }
        for bad in ["", "32", "40G FC", "32T", "G"] {
            assert_eq!(parse_link(bad), None, "{bad}");
        }
        assert!((links(1, parse_link("10GE").unwrap()).1 - 1186.6).abs() < 0.1);
    }

    proptest! {
        #[test]
        fn raid_iops_and_disks_agree(disks in 1u32..2000, disk_iops in 50.0f64..1e6, read in 0.0f64..=1.0, level in 0usize..5) {
            let raid = [Raid::Raid0, Raid::Raid1, Raid::Raid5, Raid::Raid6, Raid::RaidDp][level];
            let iops = raid_iops(disks, disk_iops, read, raid);
            // Between the pure-write and pure-read figures, reads never cheaper than writes.
            prop_assert!(iops <= disks as f64 * disk_iops * (1.0 + 1e-12));
            prop_assert!(iops >= disks as f64 * disk_iops / raid.write_penalty() * (1.0 - 1e-12));
            // The disks for that many IOPS are at most the group's own.
            prop_assert!(raid_disks_for(iops, disk_iops, read, raid).unwrap() <= disks.max(raid.min_disks()));
        }

        #[test]
        fn speedup_is_bounded_by_the_share_in_io(f in 0.0f64..=1.0, old in 1e-6f64..10.0, k in 1.0f64..1e4) {
            let (s, saved) = speedup(f, old, old / k);
            prop_assert!(s >= 1.0 - 1e-12 && saved >= -1e-12);
            // Even infinitely fast storage saves at most the share of time spent in I/O.
            prop_assert!(saved <= f + 1e-12);
            prop_assert!((s - 1.0 / (1.0 - saved)).abs() <= 1e-9 * s);
        }
    }
}
