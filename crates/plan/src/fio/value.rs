//! fio's values: sizes under `kb_base`, times, percentages, the comma rule for per-direction
//! values, `bsrange` and `bssplit`.
//!
//! Sizes resolve exactly as fio 3.x's code does (checked with `fio --debug=parse`): under the
//! default `kb_base=1024`, `k`/`kb` are 1024 and `KiB` is 1000 (fio issue #1618); under
//! `kb_base=1000` it is the other way round. Where fio silently reads nonsense (`1.5k` as 1,
//! `4kk` as 4096), iocurve refuses the value instead of measuring something else.

/// A size in bytes or a share of the file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SizeOr {
    Bytes(u64),
    Percent(f64),
}

/// A resolved size and whether its suffix reads differently than most people expect.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Size {
    pub bytes: u64,
    /// `KiB`-style suffix under kb_base=1024 (decimal in fio), or `k` under kb_base=1000.
    pub ambiguous: bool,
}

pub fn size(v: &str, kb_base: u64) -> Result<Size, String> {
    let t = v.trim();
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        return u64::from_str_radix(hex, 16)
            .map(|bytes| Size { bytes, ambiguous: false })
            .map_err(|_| format!("`{v}` is not a hexadecimal size"));
    }
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!("`{v}` is not a size: a whole number with an optional unit (4k, 1m, 10g)"));
    }
    if unit.starts_with('.') {
        return Err(format!(
            "`{v}`: fio takes no fractions in sizes (it would read this as {num} bytes); write a whole number, e.g. in bytes or a smaller unit"
        ));
    }
    let n: u64 = num.parse().map_err(|_| format!("`{v}` is too large"))?;
    let lower = unit.to_ascii_lowercase();
    let (power, iec) = match lower.as_str() {
        "" | "b" => (0, false),
        "k" | "kb" => (1, false),
        "kib" => (1, true),
        "m" | "mb" => (2, false),
        "mib" => (2, true),
        "g" | "gb" => (3, false),
        "gib" => (3, true),
        "t" | "tb" => (4, false),
        "tib" => (4, true),
        "p" | "pb" => (5, false),
        "pib" => (5, true),
        // fio's zones of a zoned device (zonemode=zbd): sizes iocurve cannot know.
        "z" => {
            return Err(format!(
                "`{v}` counts zones of a zoned block device (zonemode=zbd): iocurve does not drive zoned devices zone by zone; give the size in bytes (k, m, g, t or p)"
            ));
        }
        _ => return Err(format!("`{v}` has an unknown unit `{unit}`: use k, m, g, t or p (with kb_base={kb_base})")),
    };
    // fio: the IEC form is the "other" base.
    let base: u64 = match (kb_base, iec) {
        (1000, false) | (1024, true) => 1000,
        _ => 1024,
    };
    let bytes = base.checked_pow(power).and_then(|m| n.checked_mul(m)).ok_or_else(|| format!("`{v}` is too large"))?;
    let ambiguous = power > 0 && ((kb_base == 1024 && iec) || (kb_base == 1000 && !iec));
    Ok(Size { bytes, ambiguous })
}

pub fn size_or_percent(v: &str, kb_base: u64) -> Result<(SizeOr, bool), String> {
    if let Some(p) = v.trim().strip_suffix('%') {
        let p: f64 = p.trim().parse().map_err(|_| format!("`{v}` is not a percentage"))?;
        if !(p > 0.0 && p <= 100.0) {
            return Err(format!("`{v}`: a percentage of the file is above 0 and at most 100"));
        }
        return Ok((SizeOr::Percent(p), false));
    }
    size(v, kb_base).map(|s| (SizeOr::Bytes(s.bytes), s.ambiguous))
}

/// A time in seconds; fio's default unit is seconds.
pub fn seconds(v: &str) -> Result<f64, String> {
    let t = v.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() || unit.starts_with('.') {
        return Err(format!("`{v}` is not a time: a whole number with an optional unit (30, 500ms, 2m, 1h)"));
    }
    let n: f64 = num.parse().map_err(|_| format!("`{v}` is too large"))?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" | "s" | "sec" => 1.0,
        "us" | "usec" => 1e-6,
        "ms" | "msec" => 1e-3,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        _ => return Err(format!("`{v}` has an unknown time unit `{unit}`: use us, ms, s, m, h or d")),
    };
    Ok(n * scale)
}

/// A time whose default unit is microseconds (`thinktime`), in ns.
pub fn micros(v: &str) -> Result<u64, String> {
    let t = v.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let unit = &t[split..];
    let s = if unit.is_empty() { seconds(&format!("{t}us"))? } else { seconds(t)? };
    if !(s * 1e9).is_finite() || s > 3600.0 {
        return Err(format!("`{v}` is longer than an hour"));
    }
    Ok((s * 1e9).round() as u64)
}

/// fio's integer options (`numjobs`, `iodepth`, …).
pub fn int(v: &str) -> Result<u64, String> {
    v.trim().parse().map_err(|_| format!("`{v}` is not a whole number"))
}

/// fio's boolean options take 0 or 1.
pub fn boolean(v: &str) -> Result<bool, String> {
    match v.trim() {
        "1" | "true" | "on" | "yes" => Ok(true),
        "0" | "false" | "off" | "no" => Ok(false),
        _ => Err(format!("`{v}` is not a boolean: use 1 or 0")),
    }
}

/// fio's comma rule for per-direction values (read, write, trim): a value not followed by a
/// comma also applies to the directions after it; an empty one keeps the default.
/// `8k` → all three; `8k,32k` → 8k, 32k, 32k; `8k,32k,` → 8k, 32k, default; `,8k` → default,
/// 8k, 8k.
pub fn per_direction(v: &str) -> Result<[Option<String>; 3], String> {
    let parts: Vec<&str> = v.split(',').map(str::trim).collect();
    if parts.len() > 3 {
        return Err(format!("`{v}`: at most three comma-separated values (read, write, trim)"));
    }
    let mut out: [Option<String>; 3] = Default::default();
    for (i, p) in parts.iter().enumerate() {
        if !p.is_empty() {
            out[i] = Some(p.to_string());
        }
    }
    if let Some(last) = parts.last().filter(|p| !p.is_empty()) {
        for o in out.iter_mut().skip(parts.len()) {
            *o = Some(last.to_string());
        }
    }
    Ok(out)
}

/// `4k-64k` (fio also accepts `:` between the ends).
pub fn range(v: &str, kb_base: u64) -> Result<((u64, u64), bool), String> {
    let (a, b) = v.split_once(['-', ':']).ok_or_else(|| format!("`{v}` is not a range: write MIN-MAX, e.g. 4k-64k"))?;
    let (a, b) = (size(a, kb_base)?, size(b, kb_base)?);
    if a.bytes == 0 || a.bytes > b.bytes {
        return Err(format!("`{v}`: the range's low end must be above 0 and at most its high end"));
    }
    Ok(((a.bytes, b.bytes), a.ambiguous || b.ambiguous))
}

/// The sizes fio draws for `bsrange=LO-HI` and their shares: LO plus a uniform draw below HI,
/// rounded down to a multiple of LO and capped at HI (fio 3.x, measured: `4k-10k` gives 4k
/// and 8k 40 % each and 10k 20 %; `4k-16k` 25 % each). Only a power-of-two LO rounds.
pub fn range_mix(lo: u64, hi: u64) -> Result<Vec<(u64, f64)>, String> {
    if !lo.is_power_of_two() {
        return Err(format!(
            "{lo}-{hi}: fio aligns a range's sizes to its low end only when that is a power of two; use one"
        ));
    }
    let below = (hi - 1) / lo; // multiples of lo under hi
    if below + 1 > 1024 {
        return Err(format!(
            "{lo}-{hi} spans {} block sizes; iocurve mixes at most 1024: narrow it or use bssplit",
            below + 1
        ));
    }
    let share = lo as f64 / hi as f64 * 100.0;
    let mut mix: Vec<(u64, f64)> = (1..=below).map(|k| (k * lo, share)).collect();
    let rest = 100.0 - share * below as f64;
    if rest > 1e-9 {
        mix.push((hi, rest));
    }
    Ok(mix)
}

/// `4k/10:64k/50:32k` — sizes with percentages; entries without one share what the others
/// leave of 100 equally, as in fio. Returns (size, percent) pairs with zero shares dropped.
pub fn bssplit(v: &str, kb_base: u64) -> Result<(Vec<(u64, f64)>, bool), String> {
    let mut given = Vec::new();
    let mut ambiguous = false;
    for part in v.split(':').map(str::trim).filter(|p| !p.is_empty()) {
        let (s, p) = match part.split_once('/') {
            Some((s, p)) => {
                let p: f64 = p.trim().parse().map_err(|_| format!("`{part}`: the share after / is a percentage"))?;
                (s, Some(p))
            }
            None => (part, None),
        };
        let s = size(s, kb_base)?;
        ambiguous |= s.ambiguous;
        if s.bytes == 0 {
            return Err(format!("`{part}`: a block size of 0"));
        }
        given.push((s.bytes, p));
    }
    if given.is_empty() {
        return Err(format!("`{v}`: bssplit needs at least one size, e.g. 4k/70:64k/30"));
    }
    let stated: f64 = given.iter().filter_map(|g| g.1).sum();
    let open = given.iter().filter(|g| g.1.is_none()).count();
    if stated > 100.0 + 1e-9 || given.iter().any(|g| g.1.is_some_and(|p| p < 0.0)) {
        return Err(format!("`{v}`: the shares add up to {stated} %, more than 100"));
    }
    if open == 0 && (stated - 100.0).abs() > 1e-9 {
        return Err(format!("`{v}`: the shares add up to {stated} %, not 100"));
    }
    let rest = if open > 0 { (100.0 - stated) / open as f64 } else { 0.0 };
    let out: Vec<(u64, f64)> =
        given.into_iter().map(|(s, p)| (s, p.unwrap_or(rest))).filter(|&(_, p)| p > 0.0).collect();
    Ok((out, ambiguous))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The table `fio --debug=parse --parse-only` printed for `size=` under both bases (fio 3.33).
    #[test]
    fn sizes_resolve_as_fios_code_does() {
        let cases: &[(&str, u64, u64)] = &[
            ("4", 1024, 4),
            ("4k", 1024, 4096),
            ("4K", 1024, 4096),
            ("4kb", 1024, 4096),
            ("4KB", 1024, 4096),
            ("4KiB", 1024, 4000),
            ("4kib", 1024, 4000),
            ("4m", 1024, 4 << 20),
            ("4MiB", 1024, 4_000_000),
            ("4g", 1024, 4 << 30),
            ("4GiB", 1024, 4_000_000_000),
            ("4t", 1024, 4 << 40),
            ("4p", 1024, 4 << 50),
            ("4b", 1024, 4),
            ("0x1000", 1024, 4096),
            ("4k", 1000, 4000),
            ("4KB", 1000, 4000),
            ("4KiB", 1000, 4096),
            ("4MiB", 1000, 4 << 20),
            ("4m", 1000, 4_000_000),
            ("4GiB", 1000, 4 << 30),
            ("4t", 1000, 4_000_000_000_000),
        ];
        for &(v, base, want) in cases {
            assert_eq!(size(v, base).unwrap().bytes, want, "{v} under kb_base={base}");
        }
        assert!(size("4KiB", 1024).unwrap().ambiguous && !size("4k", 1024).unwrap().ambiguous);
        // Where fio reads nonsense silently, iocurve refuses.
        for bad in ["1.5k", "4kk", "4e", "k", "", "4KiBx", "99999999999999999999", "16e"] {
            assert!(size(bad, 1024).is_err(), "{bad}");
        }
    }

    #[test]
    fn times_default_to_seconds() {
        assert_eq!(seconds("10").unwrap(), 10.0);
        assert_eq!(seconds("2m").unwrap(), 120.0);
        assert_eq!(seconds("500ms").unwrap(), 0.5);
        assert_eq!(seconds("1h").unwrap(), 3600.0);
        assert!(seconds("1.5").is_err() && seconds("10x").is_err());
    }

    #[test]
    fn the_comma_rule() {
        let p = |v: &str| per_direction(v).unwrap().map(|o| o.unwrap_or_else(|| "-".into()));
        assert_eq!(p("8k"), ["8k", "8k", "8k"]);
        assert_eq!(p("8k,32k"), ["8k", "32k", "32k"]);
        assert_eq!(p("8k,32k,"), ["8k", "32k", "-"]);
        assert_eq!(p(",8k"), ["-", "8k", "8k"]);
        assert_eq!(p(",8k,"), ["-", "8k", "-"]);
        assert_eq!(p("8k,"), ["8k", "-", "-"]);
        assert!(per_direction("1,2,3,4").is_err());
    }

    #[test]
    fn bsrange_shares_as_fio_draws_them() {
        assert_eq!(range_mix(4096, 10240).unwrap(), vec![(4096, 40.0), (8192, 40.0), (10240, 20.0)]);
        assert_eq!(range_mix(4096, 16384).unwrap(), vec![(4096, 25.0), (8192, 25.0), (12288, 25.0), (16384, 25.0)]);
        assert_eq!(range_mix(4096, 4096).unwrap(), vec![(4096, 100.0)]);
        assert!(range_mix(3000, 9000).is_err() && range_mix(512, 1 << 30).is_err());
    }

    #[test]
    fn bssplit_shares_the_rest_equally() {
        let (v, _) = bssplit("4k/10:64k:32k/40", 1024).unwrap();
        assert_eq!(v, vec![(4096, 10.0), (65536, 50.0), (32768, 40.0)]);
        let (v, _) = bssplit("4k:8k", 1024).unwrap();
        assert_eq!(v, vec![(4096, 50.0), (8192, 50.0)]);
        assert!(bssplit("4k/60:8k/60", 1024).is_err());
        assert!(bssplit("4k/60:8k/30", 1024).is_err());
        let (v, _) = bssplit("4k/100:8k", 1024).unwrap();
        assert_eq!(v, vec![(4096, 100.0)]);
    }

    proptest! {
        #[test]
        fn sizes_never_panic(v in "\\PC{0,12}", base in prop::sample::select(vec![1000u64, 1024])) {
            let _ = size(&v, base);
            let _ = seconds(&v);
            let _ = bssplit(&v, base);
            let _ = range(&v, base);
        }

        #[test]
        fn every_multiple_round_trips(n in 0u64..1_000_000, unit in prop::sample::select(vec!["", "k", "m", "g"])) {
            let shift = match unit { "k" => 10, "m" => 20, "g" => 30, _ => 0 };
            prop_assert_eq!(size(&format!("{n}{unit}"), 1024).unwrap().bytes, n << shift);
        }
    }
}
