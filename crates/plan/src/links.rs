//! A host's links to the storage — Fibre Channel and Ethernet ports — and what they carry: the
//! limit the published tests name beside a throughput ("82 % of the host's links"). The plan
//! keys `links` and `[[hosts]] links` take `"2x32G FC"`, `"4 x 25GbE"` or `"32G"` (one link).

use serde::{Deserialize, Serialize};

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

/// `32G`, `32g fc`, `25GbE`, `100G Ethernet`, `10GE`, `25 Gb/s Ethernet`, `10 Gbit/s`. A bare
/// rate names the one type sold at it (`32G` FC, `25G` Ethernet).
pub fn parse_link(s: &str) -> Option<&'static Link> {
    let t = s.to_ascii_lowercase().replace([' ', '-', '_'], "").replace("/s", "");
    let digits: String = t.chars().take_while(char::is_ascii_digit).collect();
    let rest = &t[digits.len()..];
    let rest = rest.strip_prefix("gbit").or_else(|| rest.strip_prefix("gb")).or_else(|| rest.strip_prefix('g'))?;
    let ethernet = matches!(rest, "e" | "be" | "ethernet" | "eth" | "itethernet");
    let fc = matches!(rest, "fc" | "fibrechannel");
    let named = |kind: &str| LINKS.iter().find(|l| l.name == format!("{digits}G {kind}"));
    match (ethernet, fc, rest.is_empty()) {
        (true, _, _) => named("Ethernet"),
        (_, true, _) => named("FC"),
        (_, _, true) => {
            let mut at = LINKS.iter().filter(|l| l.name.split('G').next() == Some(digits.as_str()));
            match (at.next(), at.next()) {
                (Some(l), None) => Some(l),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Links per host past which a count is a typo (a director-class switch has a few hundred).
pub const MAX_LINKS: u32 = 1024;

/// `links = "2x32G FC"`: how many links of which type a host has.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostLinks {
    pub count: u32,
    /// A [`LINKS`] name (`32G FC`).
    pub link: String,
}

impl HostLinks {
    /// `2x32G FC`, `2 x 32G`, `2×25GbE`, `32G FC` (one link).
    pub fn parse(s: &str) -> Result<HostLinks, String> {
        let t = s.trim();
        let (count, kind) = match t.split_once(['x', 'X', '×', '*']) {
            Some((n, rest)) if !n.trim().is_empty() && n.trim().chars().all(|c| c.is_ascii_digit()) => {
                let n: u32 = n.trim().parse().ok().filter(|&n| n <= MAX_LINKS).ok_or_else(|| {
                    format!("`{s}`: more than {MAX_LINKS} links on one host; give the links of one host")
                })?;
                (n, rest.trim())
            }
            _ => (1, t),
        };
        if count == 0 {
            return Err(format!("`{s}`: a host has at least one link"));
        }
        let link = parse_link(kind).ok_or_else(|| {
            format!(
                "`{s}` is not a number of links of a type iocurve knows (e.g. \"2x32G FC\", \"4x25GbE\"): {}",
                LINKS.iter().map(|l| l.name).collect::<Vec<_>>().join(", ")
            )
        })?;
        Ok(HostLinks { count, link: link.name.to_string() })
    }

    /// Payload per direction of all the links, MB/s (None for a link type this build does not
    /// know: a plan stored by another version).
    pub fn usable_mbps(&self) -> Option<f64> {
        LINKS.iter().find(|l| l.name == self.link).map(|l| f64::from(self.count) * l.usable_mbps)
    }

    /// `2 × 32G FC`.
    pub fn describe(&self) -> String {
        format!("{} × {}", self.count, self.link)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_links_are_read_as_people_write_them() {
        let l = HostLinks::parse("2x32G FC").unwrap();
        assert_eq!((l.count, l.link.as_str(), l.usable_mbps()), (2, "32G FC", Some(6400.0)));
        assert_eq!(HostLinks::parse("4 x 25GbE").unwrap().describe(), "4 × 25G Ethernet");
        assert_eq!(HostLinks::parse("32G").unwrap().count, 1);
        assert_eq!(HostLinks::parse("2×16G FC").unwrap().usable_mbps(), Some(3200.0));
        // A bare rate is the one type sold at it; spelled-out rates.
        assert_eq!(HostLinks::parse("2x25G").unwrap().link, "25G Ethernet");
        assert_eq!(HostLinks::parse("2x 10 Gbit/s Ethernet").unwrap().link, "10G Ethernet");
        assert_eq!(HostLinks::parse("2x25 Gb/s Ethernet").unwrap().link, "25G Ethernet");
        assert_eq!(HostLinks::parse("32g fc").unwrap().link, "32G FC");
        for bad in ["", "0x32G", "2x33G", "two x 32G", "2x", "4294967295x32G", "-1x8G"] {
            assert!(HostLinks::parse(bad).is_err(), "{bad}");
        }
    }
}
