//! The text forms of distributions and layouts, as written in plan files: parsing (with
//! errors that say what is wrong and what is allowed) and the canonical form, which parses back
//! to an equal value.

use crate::validate::{
    BANDS_EXAMPLE, MAX_ZONES, NORMAL, PARETO, Param, ZIPF, ZONED_ABS_EXAMPLE, ZONED_EXAMPLE, fmt_band, fmt_size,
    no_centre, validate,
};
use crate::{Band, Distribution, Law, Layout, Zone, ZoneAbs};
use std::fmt;
use std::str::FromStr;

const NAMES: &str = "use one of uniform (or random), zipf:θ, pareto:h, normal:σ, zoned:a/r:…, zoned_abs:a/size:…, \
                     hotbands:a@start-end:…";

impl FromStr for Distribution {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let d = parse(text)?;
        validate(&d)?;
        Ok(d)
    }
}

fn parse(text: &str) -> Result<Distribution, String> {
    let text = text.trim();
    let (name, rest) = match text.split_once(':') {
        Some((name, rest)) => (name.trim(), Some(rest)),
        None => (text, None),
    };
    let plain = |law| Ok(Distribution { law, centre: None });
    match name.to_ascii_lowercase().as_str() {
        "uniform" | "random" => match rest {
            None => plain(Law::Uniform),
            Some(_) => Err(format!(
                "{name} takes no parameters: write just `uniform` (a centre applies only to zipf, pareto and normal)"
            )),
        },
        "zipf" => parametric(&ZIPF, rest, |theta| Law::Zipf { theta }),
        "pareto" => parametric(&PARETO, rest, |h| Law::Pareto { h }),
        "normal" => parametric(&NORMAL, rest, |sigma_pct| Law::Normal { sigma_pct }),
        "zoned" => plain(Law::Zoned(fields("zoned", "zones", ZONED_EXAMPLE, rest, zone)?)),
        "zoned_abs" => plain(Law::ZonedAbs(fields("zoned_abs", "zones", ZONED_ABS_EXAMPLE, rest, zone_abs)?)),
        "hotbands" => plain(Law::HotBands(fields("hotbands", "bands", BANDS_EXAMPLE, rest, band)?)),
        "" => Err(format!("no distribution given; {NAMES}")),
        _ => Err(format!("unknown distribution `{name}`; {NAMES}")),
    }
}

/// A decimal number as Rust reads it (`1.2`, `.5`, `1e3`); the range checks refuse NaN and
/// infinities.
fn number(text: &str) -> Option<f64> {
    text.trim().parse().ok()
}

/// `name:value[:centre]`.
fn parametric(p: &Param, rest: Option<&str>, make: fn(f64) -> Law) -> Result<Distribution, String> {
    let needs = || format!("{} needs a {}: give {} ({})", p.law, p.name, p.allowed, p.example);
    let Some(rest) = rest else { return Err(needs()) };
    let mut parts = rest.split(':').map(str::trim);
    let value = match parts.next() {
        None | Some("") => return Err(needs()),
        Some(text) => number(text).ok_or_else(|| {
            format!("{} {} `{text}` is not a number; give {} ({})", p.law, p.name, p.allowed, p.example)
        })?,
    };
    let centre = match parts.next() {
        None => None,
        Some(text) => Some(number(text).ok_or_else(|| {
            format!(
                "{} centre `{text}` is not a number; give a share of the working set from 0 to 1 ({})",
                p.law, p.centred_example
            )
        })?),
    };
    if parts.next().is_some() {
        return Err(format!(
            "{} takes at most two fields, the {} and a centre ({}); got `{}:{rest}`",
            p.law, p.name, p.centred_example, p.law
        ));
    }
    Ok(Distribution { law: make(value), centre })
}

/// The `:`-separated fields of zoned, zoned_abs and hotbands, each read by `one(index, text)`.
fn fields<T>(
    law: &str,
    noun: &str,
    example: &str,
    rest: Option<&str>,
    one: fn(usize, &str) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    let rest = rest.map(str::trim).unwrap_or_default();
    if rest.is_empty() {
        return Err(format!("{law} has no {noun}; give at least one ({example})"));
    }
    if rest.contains(',') {
        return Err(format!(
            "{law} with commas gives reads, writes and trims separate {noun}, which is not supported; give one list \
             for all ({example})"
        ));
    }
    let count = rest.split(':').count();
    if count > MAX_ZONES {
        return Err(format!("{law} has {count} {noun}; give at most {MAX_ZONES}"));
    }
    rest.split(':').enumerate().map(|(i, text)| one(i + 1, text.trim())).collect()
}

/// Explains a field without its separator: a lone number is most likely a centre.
fn malformed(law: &str, index: usize, text: &str, form: &str, example: &str) -> String {
    if text.is_empty() {
        format!("{law} item {index} is empty; write each as {form} ({example})")
    } else if number(text).is_some() {
        format!("{} (`{text}`); write each item as {form} ({example})", no_centre(law))
    } else {
        format!("{law} item {index} `{text}` is not {form} ({example})")
    }
}

fn percent(law: &str, index: usize, what: &str, text: &str, example: &str) -> Result<f64, String> {
    number(text).ok_or_else(|| format!("{law} item {index}: {what} `{text}` is not a number ({example})"))
}

/// `access/range`, both in percent.
fn zone(index: usize, text: &str) -> Result<Zone, String> {
    let form = "access/range in percent";
    let Some((access, range)) = text.split_once('/') else {
        return Err(malformed("zoned", index, text, form, ZONED_EXAMPLE));
    };
    Ok(Zone {
        access_pct: percent("zoned", index, "access", access, ZONED_EXAMPLE)?,
        range_pct: percent("zoned", index, "range", range, ZONED_EXAMPLE)?,
    })
}

/// `access/size`, the access in percent, the size in bytes.
fn zone_abs(index: usize, text: &str) -> Result<ZoneAbs, String> {
    let form = "access/size (percent/bytes)";
    let Some((access, size)) = text.split_once('/') else {
        return Err(malformed("zoned_abs", index, text, form, ZONED_ABS_EXAMPLE));
    };
    Ok(ZoneAbs {
        access_pct: percent("zoned_abs", index, "access", access, ZONED_ABS_EXAMPLE)?,
        bytes: parse_size(size).map_err(|why| format!("zoned_abs item {index}: {why} ({ZONED_ABS_EXAMPLE})"))?,
    })
}

/// `share@start-end`, all in percent.
fn band(index: usize, text: &str) -> Result<Band, String> {
    let form = "share@start-end in percent";
    let Some((share, span)) = text.split_once('@') else {
        return Err(malformed("hotbands", index, text, form, BANDS_EXAMPLE));
    };
    let Some((start, end)) = span.split_once('-') else {
        return Err(format!("hot band {index} `{text}` has no start-end range; write it as {form} ({BANDS_EXAMPLE})"));
    };
    Ok(Band {
        access_pct: percent("hotbands", index, "share", share, BANDS_EXAMPLE)?,
        start_pct: percent("hotbands", index, "start", start, BANDS_EXAMPLE)?,
        end_pct: percent("hotbands", index, "end", end, BANDS_EXAMPLE)?,
    })
}

/// Bytes with an optional binary suffix: `4096`, `4k`, `20g`, `20G`, `20GiB`, `1tb`.
pub(crate) fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, suffix) = text.split_at(split);
    let not_a_size = || {
        format!(
            "size `{text}` is not a size; give bytes with an optional k, m, g or t suffix (powers of 1024), e.g. 20g"
        )
    };
    if digits.is_empty() {
        return Err(not_a_size());
    }
    let shift = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(not_a_size()),
    };
    let too_large = || format!("size `{text}` is too large; sizes go up to 16 EiB");
    let value: u64 = digits.parse().map_err(|_| too_large())?;
    value.checked_mul(1u64 << shift).ok_or_else(too_large)
}

impl fmt::Display for Distribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.law {
            Law::Uniform => f.write_str("uniform")?,
            Law::Zipf { theta } => write!(f, "zipf:{theta}")?,
            Law::Pareto { h } => write!(f, "pareto:{h}")?,
            Law::Normal { sigma_pct } => write!(f, "normal:{sigma_pct}")?,
            Law::Zoned(zones) => {
                f.write_str("zoned")?;
                for z in zones {
                    write!(f, ":{}/{}", z.access_pct, z.range_pct)?;
                }
            }
            Law::ZonedAbs(zones) => {
                f.write_str("zoned_abs")?;
                for z in zones {
                    write!(f, ":{}/{}", z.access_pct, fmt_size(z.bytes))?;
                }
            }
            Law::HotBands(bands) => {
                f.write_str("hotbands")?;
                for b in bands {
                    write!(f, ":{}", fmt_band(b))?;
                }
            }
        }
        // Rust writes a double in the shortest form that reads back to the same value.
        match self.centre {
            Some(c) => write!(f, ":{c}"),
            None => Ok(()),
        }
    }
}

impl FromStr for Layout {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "contiguous" => Ok(Layout::Contiguous),
            "scattered" => Ok(Layout::Scattered),
            _ => Err(format!("unknown layout `{}`; use contiguous or scattered", text.trim())),
        }
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layout::Contiguous => "contiguous",
            Layout::Scattered => "scattered",
        })
    }
}

#[cfg(test)]
pub(crate) mod tests;
