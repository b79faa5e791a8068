//! `iocurve size` for installations (issue 42): what links carry and how long a block takes on
//! one, mirrored writes, the throughput a curve carries at a latency, what a throughput costs.
//! The formulas are `iocurve_analysis::sizing` and `::economics`; here their inputs are read
//! (from options or a stored run) and the results printed with them.

use std::path::Path;

use iocurve_analysis::economics::{self, Offer};
use iocurve_analysis::sizing::{self, Link};
use iocurve_analysis::{RunResult, WorkloadResult};
use iocurve_report::format;

use crate::CliError;
use crate::cli::{DbArgs, EconomicsAt, SizeCommand};
use crate::stored_run::{curve, pick, step_labels, stored, stored_with};

/// `size links … --carrying MBPS --block SIZE`: the links' share in use, a block's time on one.
pub fn links_use(count: u32, l: &Link, carrying: Option<f64>, block: Option<u64>) {
    if let Some(mbps) = carrying {
        let (nominal, usable) = sizing::link_share(count, l, mbps);
        let nominal_mbps = f64::from(count) * l.nominal_gbit * 1000.0 / 8.0;
        crate::outln!(
            "{} MB/s a direction is {nominal:.1} % of the nominal {} and {usable:.1} % of the usable {}{}",
            format::group(mbps.round() as u64),
            format::mbps(nominal_mbps),
            format::mbps(f64::from(count) * l.usable_mbps),
            if usable > 100.0 {
                " — more than the links carry: check the figure (or a cache on this side)"
            } else {
                ""
            }
        );
    }
    if let Some(bytes) = block {
        let ms = sizing::transfer_ms(bytes, l);
        crate::outln!(
            "one block of {} ({} B) crosses one {} link in {} at {} (payload time only: switches, protocol and the array add to it)",
            iocurve_plan::format_size(bytes),
            format::group(bytes),
            l.name,
            ms_words(ms),
            format::mbps(l.usable_mbps)
        );
    }
}

/// A time in ms, to three decimals below 10 ms (`0.164 ms`).
fn ms_words(ms: f64) -> String {
    if ms < 10.0 { format!("{ms:.3} ms") } else { format::latency(ms * 1000.0) }
}

/// `size replication`: the writes the arrays process when a share of them is mirrored.
pub fn replication(
    mirrored_pct: f64,
    iops: Option<f64>,
    mbps: Option<f64>,
    run: Option<(i64, Option<String>, DbArgs)>,
) -> Result<(), CliError> {
    let share = mirrored_pct / 100.0;
    let (value, in_mbps, from) = match (iops, mbps, run) {
        (Some(v), _, _) => (v, false, String::new()),
        (None, Some(v), _) => (v, true, String::new()),
        (None, None, Some((id, name, db))) => {
            let result = stored(&db.db, id)?;
            let w = pick(&result, id, name.as_deref(), |w| w.read_pct < 100.0, "writing workload")?;
            let (v, seq) = maximum_writes(w, id)?;
            (v, seq, format!("run {id} {}, the writes of its maximum: ", w.name))
        }
        (None, None, None) => unreachable!("clap requires --iops, --mbps or --run"),
    };
    let processed = sizing::replicated(value, share);
    let (front, back) = if in_mbps {
        (format::mbps(value), format!("{} ({} MB/s)", format::mbps(processed), format::mbps_number(processed)))
    } else {
        (format!("{} IOPS", format::iops(value)), format!("{} IOPS", format::iops(processed)))
    };
    crate::outln!(
        "{from}{front} of front-end writes, {mirrored_pct} % mirrored synchronously: {back} processed  (= {front} × (1 + {share}))",
        back = back.replace(" IOPS", " write IOPS")
    );
    Ok(())
}

/// The write throughput of `w`'s maximum step: IOPS for random, MB/s for sequential workloads.
fn maximum_writes(w: &WorkloadResult, id: i64) -> Result<(f64, bool), CliError> {
    let seq = w.kind == "sequential";
    let step = w.maximum.and_then(|p| w.steps.get(p.step)).ok_or_else(|| {
        CliError::Usage(format!(
            "run {id} {} has no maximum (no step to compare, or too noisy): give --iops or --mbps",
            w.name
        ))
    })?;
    Ok(if seq { (step.write.mbps, true) } else { (step.write.iops, false) })
}

/// `size at-latency`: the throughput the run's curve carries at a mean latency.
pub fn at_latency(db: &Path, id: i64, name: Option<&str>, latency_ms: f64) -> Result<(), CliError> {
    let result = stored(db, id)?;
    let w = pick(&result, id, name, |_| true, "workload")?;
    let seq = w.kind == "sequential";
    let labels = step_labels(w, seq);
    let tput = |i: usize| if seq { w.steps[i].mbps } else { w.steps[i].iops };
    let points: Vec<(f64, f64, &str)> =
        curve(w).into_iter().map(|i| (tput(i), w.steps[i].lat_us.mean, labels[i].as_str())).collect();
    let (t, around) = sizing::throughput_at(&points, latency_ms * 1000.0)
        .map_err(|e| CliError::Usage(format!("run {id} {} at {latency_ms} ms mean: {e}", w.name)))?;
    let figure = if seq { format::mbps(t) } else { format!("{} IOPS", format::iops(t)) };
    crate::outln!(
        "run {id} {} carries {figure} at {latency_ms} ms mean latency ({})",
        w.name,
        if around.len() == 1 { format!("its step {}", around[0]) } else { format!("between {}", around.join(" and ")) }
    );
    Ok(())
}

/// `size economics`.
pub fn economics(c: SizeCommand) -> Result<(), CliError> {
    let SizeCommand::Economics {
        cost,
        power_w,
        capacity_tb,
        rack_units,
        iops,
        run,
        workload,
        at,
        load_iops,
        headroom_pct,
        db,
        sla,
    } = c
    else {
        unreachable!("called for `size economics` only")
    };
    let (iops, from) = match (iops, run) {
        (Some(v), _) => (v, String::new()),
        (None, Some(id)) => {
            let result = stored_with(&db.db, id, &sla)?;
            offered_iops(&result, id, workload.as_deref(), at)?
        }
        (None, None) => unreachable!("clap requires --iops or --run (group `throughput`)"),
    };
    let o = Offer { iops, cost, power_w, capacity_tb, rack_units };
    // Refused before anything is printed.
    let fleet = load_iops.map(|load| fleet(&o, load, headroom_pct)).transpose()?;
    crate::outln!("{from}{} IOPS:", format::iops(iops));
    let e = economics::economics(&o);
    let mut any = false;
    let mut line = |label: &str, parts: Vec<String>| {
        if !parts.is_empty() {
            crate::outln!("  {label:<6} {}", parts.join(", "));
            any = true;
        }
    };
    let kio = |v: Option<f64>, what: &str| v.map(|v| format!("{} {what}", amount(v)));
    line(
        "cost",
        [kio(e.cost_per_tb, "per TB"), kio(e.cost_per_kiops, "per 1'000 IOPS")].into_iter().flatten().collect(),
    );
    line(
        "power",
        [kio(e.watts_per_tb, "W per TB"), kio(e.watts_per_kiops, "W per 1'000 IOPS")].into_iter().flatten().collect(),
    );
    line(
        "space",
        e.iops_per_rack_unit.map(|v| format!("{} IOPS per rack unit", format::iops(v))).into_iter().collect(),
    );
    if let Some(f) = fleet {
        crate::outln!("{f}");
    } else if !any {
        crate::outln!("  give --cost, --power-w, --capacity-tb, --rack-units or --load-iops for figures");
    }
    Ok(())
}

/// The arrays a load needs at a headroom, and what they take together, in words.
fn fleet(o: &Offer, load: f64, headroom_pct: f64) -> Result<String, CliError> {
    let f = economics::fleet(o, load, headroom_pct / 100.0).ok_or_else(|| {
        CliError::Usage(format!(
            "--load-iops {}: that needs more than {} arrays; check --load-iops and the array's IOPS",
            if load >= 1e9 { format!("{load:e}") } else { format::iops(load) },
            format::group(economics::MAX_ARRAYS)
        ))
    })?;
    let mut together: Vec<String> = Vec::new();
    together.extend(f.cost.map(|v| format!("{} in cost", amount(v))));
    together.extend(f.power_w.map(|v| format!("{} W", amount(v))));
    together.extend(f.rack_units.map(|v| format!("{} rack units", amount(v))));
    Ok(format!(
        "  {} IOPS with each array at most at {headroom_pct} % of its maximum: {} array{}  (= ⌈{} / ({headroom_pct} % × {})⌉){}",
        format::iops(load),
        f.arrays,
        if f.arrays == 1 { "" } else { "s" },
        format::iops(load),
        format::iops(o.iops),
        if together.is_empty() { String::new() } else { format!(": {}", together.join(", ")) }
    ))
}

/// An amount in the published form: whole and grouped from 100 up and for whole numbers
/// (`750'000`, `12`), two decimals otherwise (`1.80`).
fn amount(v: f64) -> String {
    if v >= 100.0 || v.fract() == 0.0 { format::group(v.round() as u64) } else { format!("{v:.2}") }
}

/// The IOPS of a stored run's workload to price: its maximum or SLA maximum, and where from.
fn offered_iops(result: &RunResult, id: i64, name: Option<&str>, at: EconomicsAt) -> Result<(f64, String), CliError> {
    let w = pick(result, id, name, |_| true, "workload")?;
    let (p, what) = match at {
        EconomicsAt::Maximum => (w.maximum, "maximum"),
        EconomicsAt::Sla if result.sla.is_none() => {
            return Err(CliError::Usage(
                "--at sla needs SLA bounds: give --sla-mean-ms and/or --sla-p99-ms (or set sla_mean_ms in the plan)"
                    .into(),
            ));
        }
        EconomicsAt::Sla => (w.sla_maximum, "SLA maximum"),
    };
    let p = p.ok_or_else(|| {
        CliError::Usage(format!("run {id} {} has no {what} (no step qualifies, or too noisy to tell)", w.name))
    })?;
    Ok((p.iops, format!("run {id} {}, its {what}: ", w.name)))
}
