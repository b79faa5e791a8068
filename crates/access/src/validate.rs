//! The rules every distribution must follow, shared by the parser and by `Access::new` (which
//! may be handed a value built in code): each broken rule becomes a sentence saying what is
//! wrong and what is allowed.

use crate::{Band, Distribution, Law, Zone, ZoneAbs};

/// At most this many zones or bands: fio's limit, and draws scan them in turn.
pub(crate) const MAX_ZONES: usize = 256;

/// Sums of percentages may miss their target by this much: decimal shares such as 33.3 do not
/// add up exactly in binary.
pub(crate) const SLACK: f64 = 1e-9;

pub(crate) const ZONED_EXAMPLE: &str = "zoned:60/10:30/20:10/70";
pub(crate) const ZONED_ABS_EXAMPLE: &str = "zoned_abs:60/20g:40/100g";
pub(crate) const BANDS_EXAMPLE: &str = "hotbands:50@0-10:20@40-45";

/// A law with one number and an optional centre.
pub(crate) struct Param {
    pub(crate) law: &'static str,
    pub(crate) name: &'static str,
    pub(crate) allowed: &'static str,
    pub(crate) example: &'static str,
    pub(crate) centred_example: &'static str,
    pub(crate) ok: fn(f64) -> bool,
}

pub(crate) const ZIPF: Param = Param {
    law: "zipf",
    name: "theta",
    allowed: "a value above 0 up to 10",
    example: "zipf:1.2",
    centred_example: "zipf:1.2:0.25",
    ok: |v| v > 0.0 && v <= 10.0,
};

pub(crate) const PARETO: Param = Param {
    law: "pareto",
    name: "h",
    allowed: "a value above 0 and below 1",
    example: "pareto:0.9",
    centred_example: "pareto:0.9:0.25",
    ok: |v| v > 0.0 && v < 1.0,
};

pub(crate) const NORMAL: Param = Param {
    law: "normal",
    name: "sigma",
    allowed: "a standard deviation above 0 up to 100 (percent of the working set)",
    example: "normal:5",
    centred_example: "normal:5:0.25",
    ok: |v| v > 0.0 && v <= 100.0,
};

impl Param {
    pub(crate) fn check(&self, value: f64) -> Result<(), String> {
        if (self.ok)(value) {
            Ok(())
        } else {
            Err(format!("{} {} is {value}; give {} ({})", self.law, self.name, self.allowed, self.example))
        }
    }

    pub(crate) fn check_centre(&self, centre: f64) -> Result<(), String> {
        if (0.0..=1.0).contains(&centre) {
            Ok(())
        } else {
            Err(format!(
                "{} centre is {centre}; give a share of the working set from 0 to 1 ({})",
                self.law, self.centred_example
            ))
        }
    }
}

/// The name a law is written with.
pub(crate) fn law_name(law: &Law) -> &'static str {
    match law {
        Law::Uniform => "uniform",
        Law::Zipf { .. } => "zipf",
        Law::Pareto { .. } => "pareto",
        Law::Normal { .. } => "normal",
        Law::Zoned(_) => "zoned",
        Law::ZonedAbs(_) => "zoned_abs",
        Law::HotBands(_) => "hotbands",
    }
}

pub(crate) fn no_centre(name: &str) -> String {
    format!("{name} takes no centre: a centre applies only to zipf, pareto and normal")
}

/// Checks every rule of the law and its centre.
pub(crate) fn validate(d: &Distribution) -> Result<(), String> {
    let param = match &d.law {
        Law::Zipf { theta } => Some((&ZIPF, *theta)),
        Law::Pareto { h } => Some((&PARETO, *h)),
        Law::Normal { sigma_pct } => Some((&NORMAL, *sigma_pct)),
        _ => None,
    };
    if let Some((param, value)) = param {
        param.check(value)?;
        return d.centre.map_or(Ok(()), |c| param.check_centre(c));
    }
    if d.centre.is_some() {
        return Err(no_centre(law_name(&d.law)));
    }
    match &d.law {
        Law::Zoned(zones) => check_zoned(zones),
        Law::ZonedAbs(zones) => check_zoned_abs(zones),
        Law::HotBands(bands) => check_bands(bands),
        _ => Ok(()),
    }
}

fn check_count(law: &str, noun: &str, count: usize, example: &str) -> Result<(), String> {
    match count {
        0 => Err(format!("{law} has no {noun}; give at least one ({example})")),
        c if c > MAX_ZONES => Err(format!("{law} has {c} {noun}; give at most {MAX_ZONES}")),
        _ => Ok(()),
    }
}

fn check_access(law: &str, index: usize, access: f64, example: &str) -> Result<(), String> {
    if (0.0..=100.0).contains(&access) {
        Ok(())
    } else {
        Err(format!(
            "{law} zone {index} access is {access}; give a percentage of the accesses from 0 to 100 ({example})"
        ))
    }
}

fn check_access_sum(law: &str, total: f64, example: &str) -> Result<(), String> {
    if (total - 100.0).abs() <= SLACK {
        Ok(())
    } else {
        Err(format!("{law} accesses add up to {total} percent; they must add up to 100 ({example})"))
    }
}

fn check_zoned(zones: &[Zone]) -> Result<(), String> {
    check_count("zoned", "zones", zones.len(), ZONED_EXAMPLE)?;
    for (i, z) in zones.iter().enumerate() {
        check_access("zoned", i + 1, z.access_pct, ZONED_EXAMPLE)?;
        if !(z.range_pct > 0.0 && z.range_pct <= 100.0) {
            return Err(format!(
                "zoned zone {} range is {}; give a percentage of the working set above 0 up to 100 ({ZONED_EXAMPLE})",
                i + 1,
                z.range_pct
            ));
        }
    }
    check_access_sum("zoned", zones.iter().map(|z| z.access_pct).sum(), ZONED_EXAMPLE)?;
    let range: f64 = zones.iter().map(|z| z.range_pct).sum();
    if range > 100.0 + SLACK {
        return Err(format!(
            "zoned ranges add up to {range} percent of the working set; they may add up to at most 100 (the rest \
             is never accessed) ({ZONED_EXAMPLE})"
        ));
    }
    Ok(())
}

fn check_zoned_abs(zones: &[ZoneAbs]) -> Result<(), String> {
    check_count("zoned_abs", "zones", zones.len(), ZONED_ABS_EXAMPLE)?;
    let mut bytes = 0u64;
    for (i, z) in zones.iter().enumerate() {
        check_access("zoned_abs", i + 1, z.access_pct, ZONED_ABS_EXAMPLE)?;
        if z.bytes == 0 {
            return Err(format!("zoned_abs zone {} size is 0 bytes; give a size above 0 ({ZONED_ABS_EXAMPLE})", i + 1));
        }
        bytes = bytes
            .checked_add(z.bytes)
            .ok_or_else(|| "zoned_abs zones add up to more than 2^64 bytes; no working set is that large".to_owned())?;
    }
    check_access_sum("zoned_abs", zones.iter().map(|z| z.access_pct).sum(), ZONED_ABS_EXAMPLE)
}

fn check_bands(bands: &[Band]) -> Result<(), String> {
    check_count("hotbands", "bands", bands.len(), BANDS_EXAMPLE)?;
    for (i, b) in bands.iter().enumerate() {
        if !(b.access_pct > 0.0 && b.access_pct <= 100.0) {
            return Err(format!(
                "hot band {} ({}) share is {} percent; give a share of the accesses above 0 up to 100 ({BANDS_EXAMPLE})",
                i + 1,
                fmt_band(b),
                b.access_pct
            ));
        }
        if !(b.start_pct >= 0.0 && b.start_pct < b.end_pct && b.end_pct <= 100.0) {
            let what = if b.start_pct >= b.end_pct { "is empty or reversed" } else { "lies outside 0-100" };
            return Err(format!(
                "hot band {} ({}) {what}: give 0 <= start < end <= 100, in percent of the working set ({BANDS_EXAMPLE})",
                i + 1,
                fmt_band(b)
            ));
        }
    }
    let total: f64 = bands.iter().map(|b| b.access_pct).sum();
    if total > 100.0 + SLACK {
        return Err(format!(
            "hot band shares add up to {total} percent; they may add up to at most 100 (the rest is spread over the \
             whole working set) ({BANDS_EXAMPLE})"
        ));
    }
    let mut order: Vec<&Band> = bands.iter().collect();
    order.sort_by(|a, b| a.start_pct.total_cmp(&b.start_pct));
    for pair in order.windows(2) {
        if pair[0].end_pct > pair[1].start_pct {
            return Err(format!(
                "hot bands {} and {} overlap; bands may not overlap ({BANDS_EXAMPLE})",
                fmt_band(pair[0]),
                fmt_band(pair[1])
            ));
        }
    }
    Ok(())
}

/// A band as written: `A@S-E`.
pub(crate) fn fmt_band(b: &Band) -> String {
    format!("{}@{}-{}", b.access_pct, b.start_pct, b.end_pct)
}

/// Bytes with the largest binary suffix that divides them exactly (`20g`, `4k`, `4097`).
pub(crate) fn fmt_size(bytes: u64) -> String {
    if bytes > 0 {
        for (shift, suffix) in [(40, 't'), (30, 'g'), (20, 'm'), (10, 'k')] {
            if bytes.trailing_zeros() >= shift {
                return format!("{}{suffix}", bytes >> shift);
            }
        }
    }
    bytes.to_string()
}
