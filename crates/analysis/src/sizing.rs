//! The arithmetic published storage benchmarks do around their measurements, so that no reader
//! redoes it by hand: what a RAID group delivers, what links carry, what lower latency buys an
//! application, what data reduction to expect. Pure formulas; `iocurve size` prints them.

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
pub fn raid_disks_for(iops: f64, disk_iops: f64, read: f64, raid: Raid) -> u32 {
    (iops * (read + raid.write_penalty() * (1.0 - read)) / disk_iops - 1e-9).ceil().max(1.0) as u32
}

/// A link type and what it carries.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Link {
    pub name: &'static str,
    /// Nominal rate per direction as sold, Gbit/s.
    pub nominal_gbit: f64,
    /// Payload one direction carries, MB/s (10^6 bytes), and how that follows from the line.
    pub usable_mbps: f64,
    pub assumption: &'static str,
}

/// Fibre Channel: the payload rates of the standard (per direction). Ethernet: TCP over IPv4
/// with a 1500-byte MTU: 1460 bytes of payload per 1538 on the wire (preamble 8, header 14,
/// FCS 4, inter-frame gap 12, IP 20, TCP 20) — 94.9 % of the line rate.
pub const LINKS: &[Link] = &[
    Link { name: "8G FC", nominal_gbit: 8.0, usable_mbps: 800.0, assumption: "8.5 Gbaud, 8b/10b encoding" },
    Link { name: "16G FC", nominal_gbit: 16.0, usable_mbps: 1600.0, assumption: "14.025 Gbaud, 64b/66b encoding" },
    Link { name: "32G FC", nominal_gbit: 32.0, usable_mbps: 3200.0, assumption: "28.05 Gbaud, 64b/66b encoding" },
    Link { name: "64G FC", nominal_gbit: 64.0, usable_mbps: 6400.0, assumption: "28.9 Gbaud PAM4, 256b/257b encoding" },
    Link { name: "10G Ethernet", nominal_gbit: 10.0, usable_mbps: 10_000.0 / 8.0 * ETH, assumption: ETH_NOTE },
    Link { name: "25G Ethernet", nominal_gbit: 25.0, usable_mbps: 25_000.0 / 8.0 * ETH, assumption: ETH_NOTE },
    Link { name: "100G Ethernet", nominal_gbit: 100.0, usable_mbps: 100_000.0 / 8.0 * ETH, assumption: ETH_NOTE },
];

const ETH: f64 = 1460.0 / 1538.0;
const ETH_NOTE: &str = "TCP/IPv4, MTU 1500: 1460 payload bytes per 1538 on the wire";

/// `32G`, `32g fc`, `25GbE`, `100G Ethernet`, `10GE`.
pub fn parse_link(s: &str) -> Option<&'static Link> {
    let t = s.to_ascii_lowercase().replace([' ', '-', '_'], "");
    let digits: String = t.chars().take_while(char::is_ascii_digit).collect();
    let rest = &t[digits.len()..];
    let rest = rest.strip_prefix("gbit").or_else(|| rest.strip_prefix("gb")).or_else(|| rest.strip_prefix('g'))?;
    let ethernet = matches!(rest, "e" | "be" | "ethernet" | "eth" | "bit ethernet");
    let fc = matches!(rest, "" | "fc" | "fibrechannel");
    let want = format!(
        "{digits}G {}",
        if ethernet {
            "Ethernet"
        } else if fc {
            "FC"
        } else {
            return None;
        }
    );
    LINKS.iter().find(|l| l.name == want)
}

/// What `count` links of one type carry: nominal both ways as vendors count it (Gbit/s × 2
/// directions, in GB/s), and usable per direction (MB/s).
pub fn links(count: u32, link: &Link) -> (f64, f64) {
    (count as f64 * link.nominal_gbit / 8.0 * 2.0, count as f64 * link.usable_mbps)
}

/// Amdahl for storage (the method of IBM's "acceleration potential"): an application spends
/// share `f` of its time waiting for I/O; latency falls from `old` to `new`. Returns the
/// speed-up 1/((1−f) + f/k) with k = old/new, and the share of time saved.
pub fn speedup(f: f64, old: f64, new: f64) -> (f64, f64) {
    let k = old / new;
    let t = (1.0 - f) + f / k;
    (1.0 / t, 1.0 - t)
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
    fn the_published_examples() {
        // RAID 6, 14+2 disks of 200 IOPS, 70 % reads: 3,200 / (0.7 + 6 × 0.3) = 1,280.
        assert!((raid_iops(16, 200.0, 0.7, Raid::Raid6) - 1280.0).abs() < 1e-9);
        // The wrong formula would say 3,200 × 0.7 + 3,200 × 0.3 / 6 = 2,400.
        assert_eq!(raid_disks_for(1280.0, 200.0, 0.7, Raid::Raid6), 16);
        assert_eq!(raid_disks_for(1281.0, 200.0, 0.7, Raid::Raid6), 17);
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
            prop_assert!(raid_disks_for(iops, disk_iops, read, raid) <= disks);
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
