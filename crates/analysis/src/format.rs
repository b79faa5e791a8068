//! Numbers as storage engineers publish them: `8'144'312 IOPS @ 250 µs`, `205 GB/s @ 5'259 µs`.

/// Groups thousands with apostrophes: 8144312 → `8'144'312`.
pub fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push('\'');
        }
        out.push(c);
    }
    out
}

/// IOPS, rounded to whole I/Os.
pub fn iops(v: f64) -> String {
    group(v.round().max(0.0) as u64)
}

/// Latency in µs: whole microseconds from 10 µs up, one decimal below (null back-end, caches).
pub fn lat_us(v: f64) -> String {
    if v < 10.0 { format!("{v:.1}") } else { group(v.round() as u64) }
}

/// Throughput in decimal units: `812 MB/s`, `1.23 GB/s`, `205 GB/s`.
pub fn mbps(v: f64) -> String {
    let (x, unit) = if v >= 1000.0 { (v / 1000.0, "GB/s") } else { (v, "MB/s") };
    let digits = if x >= 100.0 {
        0
    } else if x >= 10.0 {
        1
    } else {
        2
    };
    format!("{x:.digits$} {unit}")
}

/// MB/s as a bare number for table columns: `45.7`, `812`, `56'966`.
pub fn mbps_number(v: f64) -> String {
    if v < 100.0 { format!("{v:.1}") } else { group(v.round() as u64) }
}

/// A rate step's target as planned: `100'000 IOPS`, or `450 MB/s` for sequential workloads.
/// A replay's speed without trailing zeros: `1`, `2.5`, `0.25` (as `2×` reads).
pub fn speed(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

pub fn target_rate(v: f64, sequential: bool) -> String {
    if sequential { format!("{} MB/s", mbps_number(v)) } else { format!("{} IOPS", iops(v)) }
}

/// A latency with its unit, as the published figures give it: µs up to 10 ms (`5'259 µs`),
/// ms beyond (`12.3 ms`, `168 ms`) — never `167'953 µs`.
pub fn latency(us: f64) -> String {
    let ms = us / 1000.0;
    if us < 10_000.0 {
        format!("{} µs", lat_us(us))
    } else if ms < 100.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{} ms", group(ms.round() as u64))
    }
}

/// The headline of a point: `8'144'312 IOPS @ 250 µs` (random) or `205 GB/s @ 5'259 µs`.
pub fn headline(iops_v: f64, mbps_v: f64, lat: f64, sequential: bool) -> String {
    if sequential {
        format!("{} @ {}", mbps(mbps_v), latency(lat))
    } else {
        format!("{} IOPS @ {}", iops(iops_v), latency(lat))
    }
}

/// Bytes in binary units, as sizes of devices are given: `512 B`, `1 GiB`, `1.5 TiB`.
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    let text = if u == 0 || v.fract() == 0.0 { format!("{v:.0}") } else { format!("{v:.1}") };
    format!("{text} {}", UNITS[u])
}

/// Seconds as `1:05` or `1:02:03`.
pub fn duration(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_forms() {
        assert_eq!(group(8144312), "8'144'312");
        assert_eq!(group(999), "999");
        assert_eq!(group(1000), "1'000");
        assert_eq!(group(0), "0");
        assert_eq!(headline(8_144_312.4, 0.0, 250.2, false), "8'144'312 IOPS @ 250 µs");
        assert_eq!(headline(0.0, 205_000.0, 5259.0, true), "205 GB/s @ 5'259 µs");
        // Issue 16, finding 3: sequential latencies read "120'000 µs"; beyond 10 ms, ms.
        assert_eq!(headline(0.0, 200.0, 120_000.0, true), "200 MB/s @ 120 ms");
        assert_eq!(headline(191.0, 0.0, 167_953.0, false), "191 IOPS @ 168 ms");
        assert_eq!(latency(9_999.4), "9'999 µs");
        assert_eq!(latency(12_345.0), "12.3 ms");
        assert_eq!(latency(1_234_567.0), "1'235 ms");
        assert_eq!(mbps(812.3), "812 MB/s");
        assert_eq!(mbps(1234.0), "1.23 GB/s");
        assert_eq!(mbps(45.678), "45.7 MB/s");
        assert_eq!(mbps_number(45.678), "45.7");
        assert_eq!(mbps_number(56_965.5), "56'966");
        assert_eq!(lat_us(0.44), "0.4");
        assert_eq!(duration(65.0), "1:05");
        assert_eq!(size(512), "512 B");
        assert_eq!(size(1 << 30), "1 GiB");
        assert_eq!(size(3 << 39), "1.5 TiB");
        assert_eq!(duration(3723.0), "1:02:03");
    }
}
