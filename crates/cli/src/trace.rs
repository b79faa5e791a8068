//! `iocurve trace FILE`: what a production trace did, before replaying it (issue 45, part 4);
//! and `iocurve plan --from-trace FILE`: the plan whose one workload mimics it with iocurve's
//! workload model, every key commented with the figure of the trace it came from.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use iocurve_plan::format_size;
use iocurve_report::format;
use iocurve_trace::{DirStats, Limits, Trace, TraceDir, TraceStats};

use crate::CliError;

/// A trace that cannot be read is bad input (exit code 2), as for `run --replay`.
fn read(path: &Path) -> Result<Trace, CliError> {
    iocurve_trace::read_trace(path, &Limits::default()).map_err(|e| CliError::Usage(e.to_string()))
}

/// `iocurve trace FILE [--json]`.
pub fn command(path: &Path, json: bool) -> Result<ExitCode, CliError> {
    let trace = read(path)?;
    let stats = trace.stats();
    if json {
        let mut doc = serde_json::to_value(&stats)
            .map_err(|e| CliError::Runtime(format!("cannot write the trace's figures as JSON: {e}")))?;
        if let Some(o) = doc.as_object_mut() {
            o.insert("file".into(), path.display().to_string().into());
            o.insert("format".into(), serde_json::to_value(trace.format).unwrap_or_default());
            let left: serde_json::Map<String, serde_json::Value> =
                trace.left_out.iter().map(|(r, n)| (r.clone(), (*n).into())).collect();
            o.insert("left_out".into(), left.into());
        }
        crate::outln!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
    } else {
        crate::out!("{}", describe(&path.display().to_string(), &trace, &stats));
    }
    Ok(ExitCode::SUCCESS)
}

/// `iocurve plan --from-trace FILE`.
pub fn plan_command(path: &Path) -> Result<ExitCode, CliError> {
    let trace = read(path)?;
    crate::out!("{}", plan_toml(&path.display().to_string(), &trace, &trace.stats()));
    Ok(ExitCode::SUCCESS)
}

fn pct(v: f64) -> String {
    format!("{v:.1} %")
}

/// Seconds as people read a trace's length: `9.99 s` under a minute, `1:05` beyond.
fn seconds(s: f64) -> String {
    if s < 60.0 { format!("{s:.2} s") } else { format::duration(s) }
}

fn ns(v: f64) -> String {
    format::latency(v / 1000.0)
}

/// What a coefficient of variation of the gaps says about the arrivals.
fn arrivals_word(cv: f64) -> &'static str {
    if cv < 0.8 {
        "<1: evener than random arrivals"
    } else if cv <= 1.25 {
        "≈1: random (Poisson) arrivals"
    } else {
        ">1: bursty"
    }
}

fn size_mix(d: &DirStats) -> String {
    let mut parts: Vec<String> =
        d.sizes.iter().map(|s| format!("{} {}", format_size(s.size.into()), pct(s.share_pct))).collect();
    if d.other_sizes_pct > 0.0 {
        parts.push(format!("other {}", pct(d.other_sizes_pct)));
    }
    parts.join(", ")
}

/// The text `iocurve trace` prints.
pub(crate) fn describe(file: &str, trace: &Trace, s: &TraceStats) -> String {
    let mut o = String::new();
    let fmt = trace.format.map_or_else(|| "trace".to_string(), |f| format!("{f} trace"));
    let _ = writeln!(o, "{file}: {fmt}, {} I/Os over {}", format::group(s.ios), seconds(s.duration_s));
    // A trace shorter than a second has no busiest second to speak of (found by an outside test:
    // a peak below the mean).
    let peak = if s.duration_s < 1.0 {
        "no peak second (it lasts under a second)".to_string()
    } else {
        format!("peak {} IOPS (its busiest second)", format::group(s.peak_iops))
    };
    let _ = writeln!(o, "  rate: mean {} IOPS, {peak}", format::iops(s.mean_iops));
    for d in &s.dirs {
        let _ = writeln!(
            o,
            "  {:<5}  {} of I/Os ({}), mean size {}, sequential {}",
            d.dir.name(),
            pct(d.share_pct),
            format::group(d.ios),
            format::size(d.mean_size.round() as u64),
            pct(d.sequential_pct)
        );
        let _ = writeln!(o, "         sizes: {}", size_mix(d));
    }
    let k = &s.skew;
    let _ = writeln!(
        o,
        "  skew: of the {} 4 KiB blocks I/Os start in, the busiest 1 % carry {} of the I/Os, 10 %: {}, 20 %: {}",
        format::group(k.blocks_touched),
        pct(k.busiest_1pct),
        pct(k.busiest_10pct),
        pct(k.busiest_20pct)
    );
    if let Some(ia) = &s.inter_arrival {
        let _ = writeln!(
            o,
            "  inter-arrival: mean {}, p50 {}, p99 {}, CV {:.2} ({})",
            ns(ia.mean_ns),
            ns(ia.p50_ns as f64),
            ns(ia.p99_ns as f64),
            ia.cv,
            arrivals_word(ia.cv)
        );
    }
    for d in &s.devices {
        let _ = writeln!(
            o,
            "  device {}: {} I/Os ({} r, {} w, {} t), {}, offsets {} to {} (span {})",
            d.name,
            format::group(d.ios),
            format::group(d.reads),
            format::group(d.writes),
            format::group(d.trims),
            format::size(d.bytes),
            format::group(d.lowest_offset),
            format::group(d.highest_end),
            format::size(d.span_bytes)
        );
    }
    if trace.left_out.is_empty() {
        let _ = writeln!(o, "  left out: nothing (every event was an I/O)");
    } else {
        let list: Vec<String> = trace.left_out.iter().map(|(r, n)| format!("{r} {}", format::group(*n))).collect();
        let _ = writeln!(o, "  left out (not I/Os, not replayed): {}", list.join(", "));
    }
    o
}

/// A number for TOML without trailing zeros (two decimals at most): `70`, `12.5`.
fn num(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A direction's size mix as a `bs` value: its top sizes (rounded to 512 bytes, the unit every
/// size of a plan is a multiple of) weighted by their whole-percent shares; the sizes past the
/// top ones are left out. One size is written bare (`"4k"`).
fn bs_value(d: &DirStats) -> String {
    let mut mix: Vec<(u64, u64)> = Vec::new();
    for s in &d.sizes {
        let bytes = (u64::from(s.size).div_ceil(512) * 512).max(512);
        let weight = s.share_pct.round() as u64;
        match mix.iter_mut().find(|m| m.0 == bytes) {
            Some(m) => m.1 += weight,
            None => mix.push((bytes, weight)),
        }
    }
    mix.retain(|m| m.1 > 0);
    if mix.is_empty() {
        // Every named size under 0.5 %: the most frequent one stands for them.
        mix.push((d.sizes.first().map_or(4096, |s| (u64::from(s.size).div_ceil(512) * 512).max(512)), 1));
    }
    if mix.len() == 1 {
        return format!("\"{}\"", format_size(mix[0].0));
    }
    let parts: Vec<String> = mix.iter().map(|(b, w)| format!("\"{}\" = {w}", format_size(*b))).collect();
    format!("{{ {} }}", parts.join(", "))
}

/// A TOML line with its comment aligned.
fn key(o: &mut String, line: String, comment: &str) {
    let _ = writeln!(o, "{line:<34} # {comment}");
}

/// The share of all I/Os that are sequential (each direction's sequential share, weighted).
fn sequential_pct(s: &TraceStats) -> f64 {
    if s.ios == 0 {
        return 0.0;
    }
    s.dirs.iter().map(|d| d.sequential_pct * d.ios as f64).sum::<f64>() / s.ios as f64
}

/// The zoned distribution the skew figures give, or None when the I/Os are spread about
/// evenly over the touched blocks (the busiest 20 % carry under 25 %).
fn zoned(s: &TraceStats) -> Option<String> {
    let k = &s.skew;
    if k.busiest_20pct < 25.0 || k.blocks_touched < 100 {
        return None;
    }
    // Cumulative shares rounded, so the zones' shares add up to exactly 100.
    let (c1, c2, c3) = (k.busiest_1pct.round(), k.busiest_10pct.round(), k.busiest_20pct.round());
    Some(format!("zoned:{}/1:{}/9:{}/10:{}/80", c1, c2 - c1, c3 - c2, 100.0 - c3))
}

/// The plan `iocurve plan --from-trace` prints.
pub(crate) fn plan_toml(file: &str, trace: &Trace, s: &TraceStats) -> String {
    let base = Path::new(file).file_stem().map_or_else(|| "trace".into(), |n| n.to_string_lossy().into_owned());
    let name: String =
        base.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' }).collect();
    let name = format!("trace-{name}");
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# A plan that mimics the trace {file} ({}, {} I/Os over {}), written by `iocurve plan --from-trace`.",
        trace.format.map_or_else(|| "trace".to_string(), |f| f.to_string()),
        format::group(s.ios),
        seconds(s.duration_s)
    );
    let _ = writeln!(o, "# Its workload draws I/Os with the trace's mix, sizes, skew and rate; it does not repeat the");
    let _ = writeln!(o, "# trace's I/Os (`iocurve run --replay {file}` does). Each key says which figure it came from");
    let _ = writeln!(o, "# (`iocurve trace {file}` prints them all).");
    let _ = writeln!(o, "name = {}", toml_str(&name));
    let _ = writeln!(o, "description = {}", toml_str(&format!("Mimics the trace {file}")));
    o.push_str("\n[[workloads]]\n");
    let _ = writeln!(o, "name = {}", toml_str(&name));
    workload_keys(&mut o, file, s);
    o
}

fn toml_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn dir(s: &TraceStats, d: TraceDir) -> Option<&DirStats> {
    s.dirs.iter().find(|x| x.dir == d)
}

/// The direction keys: shares and block sizes.
fn mix_keys(o: &mut String, s: &TraceStats) {
    let share = |d| dir(s, d).map_or(0.0, |x| x.share_pct);
    key(o, format!("read_pct = {}", num(share(TraceDir::Read))), "the trace's reads, in percent of its I/Os");
    if let Some(t) = dir(s, TraceDir::Trim) {
        key(o, format!("trim_pct = {}", num(t.share_pct)), "the trace's trims (discards), in percent of its I/Os");
    }
    let Some(first) = s.dirs.first() else { return };
    let bs = bs_value(first);
    let what = |d: &DirStats| {
        let other = if d.other_sizes_pct > 0.0 {
            format!("; the other sizes ({}) are left out", pct(d.other_sizes_pct))
        } else {
            String::new()
        };
        format!("the {}s' sizes, weighted by their share: {}{other}", d.dir.name(), size_mix(d))
    };
    let alike: Vec<String> =
        s.dirs.iter().skip(1).filter(|d| bs_value(d) == bs).map(|d| format!("{}s'", d.dir.name())).collect();
    let also = if alike.is_empty() { String::new() } else { format!(" (the {} alike)", alike.join(" and ")) };
    key(o, format!("bs = {bs}"), &format!("{}{also}", what(first)));
    for (d, k) in [(TraceDir::Write, "write_bs"), (TraceDir::Trim, "trim_bs")] {
        if let Some(x) = dir(s, d).filter(|x| x.dir != first.dir) {
            let v = bs_value(x);
            if v != bs {
                key(o, format!("{k} = {v}"), &what(x));
            }
        }
    }
}

/// Where the I/Os go: pattern, distribution, working set.
fn place_keys(o: &mut String, s: &TraceStats, sequential: bool) {
    let seq = sequential_pct(s);
    let p = if sequential { "sequential" } else { "random" };
    key(
        o,
        format!("pattern = \"{p}\""),
        &format!("{} of the I/Os start where the last of their device and direction ended", pct(seq)),
    );
    let k = &s.skew;
    if !sequential {
        match zoned(s) {
            Some(z) => key(
                o,
                format!("distribution = \"{z}\""),
                &format!(
                    "the busiest 1 %, 10 %, 20 % of the {} touched 4 KiB blocks carry {}, {}, {} of the I/Os: the same shares on the same fractions of the working set (the hot zones in one piece at its start; the trace touched {} of its span, a longer one touches more)",
                    format::group(k.blocks_touched),
                    pct(k.busiest_1pct),
                    pct(k.busiest_10pct),
                    pct(k.busiest_20pct),
                    pct(touched_pct(s))
                ),
            ),
            None if k.blocks_touched < 100 => key(
                o,
                "distribution = \"uniform\"".into(),
                &format!("the trace touched {} 4 KiB blocks: too few to tell a skew", format::group(k.blocks_touched)),
            ),
            None => key(
                o,
                "distribution = \"uniform\"".into(),
                &format!(
                    "the busiest 20 % of the {} touched 4 KiB blocks carry {} of the I/Os: no hot spot worth a skewed law",
                    format::group(k.blocks_touched),
                    pct(k.busiest_20pct)
                ),
            ),
        }
    }
    let (start, end) = span(s);
    if end > start {
        let devices = if s.devices.len() > 1 {
            format!(" of its {} devices (the same range on every target)", s.devices.len())
        } else {
            String::new()
        };
        key(
            o,
            format!("working_set = {{ start = \"{}\", end = \"{}\" }}", format_size(start), format_size(end)),
            &format!("the span of the trace's offsets{devices}: {}", format::size(end - start)),
        );
        let _ = writeln!(
            o,
            "# (a target needs at least {} for it: a scratch file made with --size {})",
            format::size(end),
            format_size(end.div_ceil(1 << 20) << 20)
        );
    }
}

/// The lowest offset and the highest end of all devices, on 512-byte boundaries.
fn span(s: &TraceStats) -> (u64, u64) {
    let start = s.devices.iter().filter(|d| d.ios > 0).map(|d| d.lowest_offset).min().unwrap_or(0) / 512 * 512;
    let end = s.devices.iter().map(|d| d.highest_end).max().unwrap_or(0).div_ceil(512) * 512;
    (start, end)
}

/// The share of the devices' spans (in 4 KiB blocks) the I/Os start in, in percent.
fn touched_pct(s: &TraceStats) -> f64 {
    let blocks: u64 = s.devices.iter().map(|d| d.span_bytes.div_ceil(4096)).sum::<u64>().max(1);
    (s.skew.blocks_touched as f64 * 100.0 / blocks as f64).min(100.0)
}

/// When the I/Os come: rate, arrival, bursts, I/Os in flight.
fn time_keys(o: &mut String, file: &str, s: &TraceStats, sequential: bool) {
    if s.mean_iops <= 0.0 {
        let _ = writeln!(o, "# The trace has no duration (one I/O, or all at one time): no rate to mimic, so the");
        let _ = writeln!(o, "# workload runs the worker ramp (closed loop) of the defaults.");
        return;
    }
    if sequential {
        let bytes: u64 = s.dirs.iter().map(|d| d.bytes).sum();
        let mbps = s.mean_iops * bytes as f64 / s.ios.max(1) as f64 / 1e6;
        key(
            o,
            format!("rate = [{}]", num(mbps.max(0.01))),
            &format!(
                "MB/s (a sequential workload's rate): the mean {} IOPS times the mean size",
                format::iops(s.mean_iops)
            ),
        );
    } else {
        key(o, format!("rate = [{}]", num(s.mean_iops.max(0.01))), "IOPS: the trace's mean rate (first I/O to last)");
    }
    let cv = s.inter_arrival.as_ref().map_or(0.0, |ia| ia.cv);
    let (arrival, why) = if cv >= 0.8 {
        ("poisson", format!("the gaps' CV is {cv:.2} ({}); Poisson's is 1, uniform's 0", arrivals_word(cv)))
    } else {
        ("uniform", format!("the gaps' CV is {cv:.2} ({}): evenly spaced is nearest", arrivals_word(cv)))
    };
    key(o, format!("arrival = \"{arrival}\""), &why);
    if cv > 1.25 {
        let _ = writeln!(
            o,
            "# The trace is bursty (CV {cv:.2}, peak second {} IOPS against a mean of {}). `bursts = \"ON/OFF\"`",
            format::group(s.peak_iops),
            format::iops(s.mean_iops)
        );
        let _ = writeln!(o, "# would need the lengths of its bursts and pauses, which these figures do not give: to");
        let _ = writeln!(o, "# meet its bursts as they came, replay it (`iocurve run --replay {file}`).");
    }
    // Enough in flight for the busiest second at 10 ms an I/O (Little's law), at least the
    // default 64.
    let need = (s.peak_iops as f64 * 0.01).ceil() as u32;
    let max_outstanding = need.max(64).next_power_of_two().min(65_536);
    key(
        o,
        format!("max_outstanding = {max_outstanding}"),
        &format!(
            "the busiest second ({} IOPS) at 10 ms an I/O needs {need} in flight; at least 64",
            format::group(s.peak_iops)
        ),
    );
}

fn workload_keys(o: &mut String, file: &str, s: &TraceStats) {
    let sequential = sequential_pct(s) > 50.0;
    mix_keys(o, s);
    place_keys(o, s, sequential);
    time_keys(o, file, s, sequential);
}
