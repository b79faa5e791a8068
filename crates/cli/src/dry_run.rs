//! `iocurve run --dry-run`: what a plan (TOML, fio job file or suite) would do — its targets,
//! hosts, workloads, steps and duration — resolved and checked exactly as the run would, with
//! nothing opened, created or stored.

use std::path::Path;

use iocurve_plan::{Pattern, Plan, format_size};
use iocurve_report::format;

/// The plan as the run would carry it out; `scratch_size` is what `--size` (or the plan) gives.
pub fn describe(plan: &Plan, scratch_size: Option<u64>, hosts: &[String]) -> String {
    let mut out = Vec::new();
    let n = plan.workloads.len();
    out.push(format!(
        "plan {} ({}): {n} workload{}, about {}",
        plan.name,
        plan.source,
        if n == 1 { "" } else { "s" },
        format::duration(plan.total_seconds())
    ));
    if !plan.description.is_empty() {
        out.push(format!("  {}", plan.description));
    }
    let on = if !hosts.is_empty() {
        format!("agents {}", hosts.join(", "))
    } else if !plan.hosts.is_empty() {
        // Uneven hosts say their scale: `b:7420 (workers × 0.25)`.
        let each = |h: &iocurve_plan::HostSpec| {
            if h.workers_scale == 1.0 {
                h.address.clone()
            } else {
                format!("{} (workers × {})", h.address, h.workers_scale)
            }
        };
        format!("agents {}", plan.hosts.iter().map(each).collect::<Vec<_>>().join(", "))
    } else {
        "this host".to_string()
    };
    out.push(format!("hosts: {on}"));
    let remote = if on == "this host" { String::new() } else { "each agent".to_string() };
    // Hosts of the plan that name their own targets use those, not the plan's (issue 37,
    // finding 5: the dry run listed the default scratch file instead).
    let own: Vec<&iocurve_plan::HostSpec> = plan.hosts.iter().filter(|h| !h.targets.is_empty()).collect();
    for h in &own {
        out.push(format!("targets of {}:", h.address));
        for t in &h.targets {
            out.push(format!("  {t}  — checked on that agent when the run starts"));
        }
    }
    let shared = own.len() < plan.hosts.len() || plan.hosts.is_empty();
    for g in plan.groups.iter().filter(|_| shared) {
        let weight = if plan.groups.len() > 1 { format!(" (weight {})", g.weight) } else { String::new() };
        // One group is the plan's targets; several are named (`targets targets:` read twice).
        let whose = match (own.is_empty(), plan.groups.len()) {
            (true, 1) => "targets:".to_string(),
            (true, _) => format!("target group {}{weight}:", g.name),
            (false, 1) => "targets of the other hosts:".to_string(),
            (false, _) => format!("target group {}{weight} of the other hosts:", g.name),
        };
        out.push(whose);
        for t in &g.targets {
            let what = if !remote.is_empty() {
                format!("checked on {remote} when the run starts")
            } else if iocurve_plan::is_glob(t) {
                "a glob, expanded when the run starts".to_string()
            } else if Path::new(t).exists() {
                "exists".to_string()
            } else {
                let size = scratch_size.map_or("1g (or less when the disk has less room)".to_string(), format_size);
                let how = if plan.scratch_unfilled() { "allocated" } else { "written once" };
                format!(
                    "missing: a scratch file of {size} would be created ({how}) and removed after the run unless --keep"
                )
            };
            out.push(format!("  {t}  — {what}"));
        }
    }
    if plan.precondition {
        out.push("precondition: every block of every target written once before the workloads".into());
    }
    for w in &plan.workloads {
        let kind = if w.pattern == Pattern::Sequential { "sequential" } else { "random" };
        let bs = iocurve_analysis::workload_block_sizes(w);
        out.push(format!(
            "workload {}: {kind}, {} % reads{}, bs {bs}, qd {}, {} working set, {}{}, {}",
            w.name,
            w.read_pct,
            if w.trims() { format!(", {} % trims", w.trim_pct) } else { String::new() },
            w.queue_depths().iter().map(u32::to_string).collect::<Vec<_>>().join(", "),
            w.working_set.label(),
            w.backend.name(),
            if w.direct { " O_DIRECT" } else { " buffered" },
            w.data.describe()
        ));
        // Distribution, think time, bursts: of the workload's worker ramp, and of its rate steps.
        let shape: Vec<String> = [false, true]
            .into_iter()
            .filter(|&rate| if rate { w.has_rate_steps() } else { w.rate.is_empty() })
            .flat_map(|rate| iocurve_analysis::shape(w, rate))
            .collect();
        // (A replay's says the same of both.)
        let mut shape = shape;
        shape.dedup();
        if !shape.is_empty() {
            out.push(format!("  {}", shape.join(", ")));
        }
        out.push(steps_line(w));
        // A member of a concurrent step: with whom, and its share of each step's workers.
        if let Some(g) = &w.together {
            let members = plan.members_of(g);
            let own: Vec<String> = w.ramp.iter().map(|&n| plan.workers_of(w, n).to_string()).collect();
            let others: Vec<&str> = members.iter().filter(|m| m.name != w.name).map(|m| m.name.as_str()).collect();
            out.push(format!(
                "  in concurrent step {g}, at one time with {}: its share {} of each step's workers runs {} of them (stored as {g} in total and as {} on its own)",
                others.join(", "),
                w.share,
                own.join(", "),
                w.name
            ));
        }
        if !w.curve.is_empty() {
            out.push(format!(
                "  then the response-time curve at {} % of its maximum ({} steps more)",
                w.curve.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", "),
                w.curve.len()
            ));
        }
        if w.sla_search {
            out.push(format!(
                "  then the SLA search: at most {} rate steps more, bisecting below its maximum",
                iocurve_plan::SLA_SEARCH_MAX_PROBES
            ));
        }
    }
    for r in &plan.reclaim {
        out.push(format!(
            "reclaim {}: after the workloads, writes, trims and reads back {} from offset {} of every target (at most what it has), bs {}, {} in flight; then waits up to {} s for {} % of the trimmed bytes to be free again, used space by {}",
            r.name,
            iocurve_plan::format_size(r.size),
            iocurve_plan::format_size(r.offset),
            iocurve_plan::format_size(r.bs),
            r.queue_depth,
            r.timeout_s,
            r.back_pct,
            r.probe.as_deref().map_or_else(
                || "the allocated size of a loop device's backing file or a file target".to_string(),
                |p| format!("the probe `{p}`")
            )
        ));
    }
    out.push(
        "nothing was opened, written or stored (--dry-run); write safety, free space and memory are checked when the run opens its targets".into(),
    );
    out.join("\n")
}

/// A replay's trace as the run will play it: its format, I/Os, devices and where they go, and
/// each step's length.
pub fn replay_line(w: &iocurve_plan::Workload, l: &iocurve_run::replay::Loaded) -> String {
    let t = &l.trace;
    let format = t.format.map_or("trace".to_string(), |f| f.to_string());
    let mut devices: Vec<String> =
        t.devices.iter().zip(&l.targets).take(10).map(|(d, &k)| format!("{d} → target {}", k + 1)).collect();
    if t.devices.len() > 10 {
        devices.push(format!("and {} devices more", t.devices.len() - 10));
    }
    let speeds = if w.replay_speed.is_empty() { vec![1.0] } else { w.replay_speed.clone() };
    let steps: Vec<String> = speeds
        .iter()
        .map(|&s| format!("{}× {}", format::speed(s), format::duration(l.span_ns(s) as f64 / 1e9)))
        .collect();
    let left: Vec<String> = t.left_out.iter().map(|(why, n)| format!("{n} {why}")).collect();
    let left = if left.is_empty() { String::new() } else { format!("; left out (no I/O): {}", left.join(", ")) };
    format!(
        "replay {} ({format}): {} I/Os over {:.3} s, {} % reads, {} % trims{left}; {}; offsets beyond a target: {}; split over hosts: {}; steps {}",
        l.path,
        t.ios.len(),
        t.duration_ns() as f64 / 1e9,
        w.read_pct,
        w.trim_pct,
        devices.join(", "),
        w.replay_remap.name(),
        w.replay_split.name(),
        steps.join(", ")
    )
}

/// A workload's steps in one line: `  steps (workers): 1, 2, 4 — each …`; a grid's cells
/// `1×1, 1×4`, a host-count sweep's ramp at each count `on 2 hosts: 1, 2`.
fn steps_line(w: &iocurve_plan::Workload) -> String {
    let all = w.steps();
    let label = |s: &iocurve_plan::RampStep| match s.rate {
        _ if s.speed.is_some() => format!("{}×", format::speed(s.speed.unwrap_or(1.0))),
        Some(r) => format!("{r} {}", if w.pattern == Pattern::Sequential { "MB/s" } else { "IOPS" }),
        None if w.ramps_queue_depth() => format!("{}×{}", s.workers, s.queue_depth),
        None => s.workers.to_string(),
    };
    // A host-count sweep: the ramp at each count, `on 2 hosts: 1, 2, 4`.
    let steps: Vec<String> = if w.host_ramp.is_empty() {
        all.iter().map(label).collect()
    } else {
        w.host_ramp
            .iter()
            .map(|&n| {
                let at: Vec<String> = all.iter().filter(|s| s.hosts == Some(n)).map(label).collect();
                format!("on {n} host{}: {}", if n == 1 { "" } else { "s" }, at.join(", "))
            })
            .collect()
    };
    if w.replay.is_some() {
        return format!("  steps (replay speeds): {}, each as long as the trace at its speed", steps.join(", "));
    }
    let unit = match (w.rate.is_empty(), w.is_grid(), w.ramps_queue_depth()) {
        (false, _, _) => "rate",
        (true, true, _) => "workers × queue depth, a grid",
        (true, false, true) => "workers × queue depth",
        (true, false, false) => "workers",
    };
    format!(
        "  steps ({unit}): {} — each {} s warm-up + {} × {} s, about {} in all",
        steps.join(if w.host_ramp.is_empty() { ", " } else { "; " }),
        w.warmup_s,
        w.intervals,
        w.interval_s,
        format::duration(w.seconds_of(w.steps().len()))
    )
}
