//! `iocurve size`: the arithmetic of `iocurve_analysis::sizing`, printed with its inputs.

use std::process::ExitCode;

use iocurve_analysis::sizing::{self, Raid};
use iocurve_report::format;

use crate::CliError;
use crate::cli::SizeCommand;
use crate::stored_run::{curve, pick, step_labels, stored};

pub fn command(c: SizeCommand) -> Result<ExitCode, CliError> {
    match c {
        SizeCommand::Raid { level, disks, iops, disk_iops, read_pct } => {
            let read = read_pct / 100.0;
            let p = level.write_penalty();
            let name = raid_name(level);
            match (disks, iops) {
                (Some(n), _) => {
                    if n < level.min_disks() || n > sizing::MAX_DISKS {
                        return Err(CliError::Usage(format!(
                            "--disks {n}: a {name} group has {} to {} disks",
                            level.min_disks(),
                            format::group(sizing::MAX_DISKS as u64)
                        )));
                    }
                    let got = sizing::raid_iops(n, disk_iops, read, level);
                    crate::outln!(
                        "{name}, {n} disks of {} IOPS, {read_pct} % reads: {} IOPS  (= {n} × {} / ({read:.2} + {p} × {:.2}))",
                        format::iops(disk_iops),
                        format::iops(got),
                        format::iops(disk_iops),
                        1.0 - read
                    );
                }
                (None, Some(t)) => {
                    let n = sizing::raid_disks_for(t, disk_iops, read, level).ok_or_else(|| {
                        CliError::Usage(format!(
                            "--iops {}: that needs more than {} disks of {} IOPS; check --iops and --disk-iops",
                            if t >= 1e9 { format!("{t:e}") } else { format::iops(t) },
                            format::group(sizing::MAX_DISKS as u64),
                            format::iops(disk_iops)
                        ))
                    })?;
                    crate::outln!(
                        "{name}, {} IOPS at {read_pct} % reads with disks of {} IOPS: {n} disks (they give {} IOPS)",
                        format::iops(t),
                        format::iops(disk_iops),
                        format::iops(sizing::raid_iops(n, disk_iops, read, level))
                    );
                }
                (None, None) => unreachable!("clap requires --disks or --iops"),
            }
        }
        SizeCommand::Links { count, link, carrying, block } => {
            let Some(l) = sizing::parse_link(&link) else {
                return Err(CliError::Usage(format!(
                    "`{link}` is not a link type iocurve knows: {}",
                    sizing::LINKS.iter().map(|l| l.name).collect::<Vec<_>>().join(", ")
                )));
            };
            let (nominal, usable) = sizing::links(count, l);
            crate::outln!(
                "{count} × {}: {nominal} GB/s as sold ({} Gbit/s × 2 directions), {} usable per direction ({} a link: {})",
                l.name,
                l.nominal_gbit,
                format::mbps(usable),
                format::mbps(l.usable_mbps),
                l.assumption
            );
            crate::capacity::links_use(count, l, carrying, block);
        }
        SizeCommand::Replication { mirrored_pct, iops, mbps, run, workload, db } => {
            crate::capacity::replication(mirrored_pct, iops, mbps, run.map(|id| (id, workload, db)))?;
        }
        SizeCommand::AtLatency { run, workload, latency_ms, db } => {
            crate::capacity::at_latency(&db.db, run, workload.as_deref(), latency_ms)?;
        }
        c @ SizeCommand::Economics { .. } => crate::capacity::economics(c)?,
        SizeCommand::Speedup { io_share, from_ms, to_ms, run, workload, at_iops, db } => {
            let to_ms = match (to_ms, run, at_iops) {
                (Some(t), _, _) => t,
                (None, Some(id), Some(iops)) => {
                    let (ms, said) = measured_latency(&db.db, id, workload.as_deref(), iops)?;
                    crate::outln!("{said}");
                    ms
                }
                _ => unreachable!("clap requires --to-ms or --run with --at-iops"),
            };
            let (s, saved) = sizing::speedup(io_share / 100.0, from_ms, to_ms);
            // A latency read off a curve has no business printing 17 digits.
            let to = format!("{:.4}", to_ms).trim_end_matches('0').trim_end_matches('.').to_string();
            let effect = if saved >= 0.0 {
                format!("{:.0} % less time, {s:.2}× as fast", saved * 100.0)
            } else {
                format!("{:.0} % more time, {:.2}× as slow: the new latency is higher", -saved * 100.0, 1.0 / s)
            };
            crate::outln!("{io_share} % of the time in I/O, latency {from_ms} ms → {to} ms: {effect}");
        }
        SizeCommand::Reduction { compress, dedupe, array_ratio, run, workload, db } => {
            let (data, checked) = match run {
                Some(id) => {
                    let result = stored(&db.db, id)?;
                    let w = pick(&result, id, workload.as_deref(), |w| w.read_pct < 100.0, "writing workload")?;
                    crate::outln!("run {id}, workload {}:", w.name);
                    (w.data, w.data_check.clone())
                }
                None => {
                    let keys = iocurve_plan::WorkloadKeys {
                        compress: Some(compress),
                        dedupe: Some(dedupe),
                        ..Default::default()
                    };
                    // The plan's own checks and messages.
                    (iocurve_plan::writing_workload("size", keys)?.data, Vec::new())
                }
            };
            let expected = sizing::expected_reduction(&data);
            crate::outln!(
                "{}: {expected:.2}:1 expected ({:.2}:1 compression × {}:1 dedupe)",
                data.describe(),
                data.expected_compression(),
                data.dedupe
            );
            // What the run's data check found on the engine's own data, the way an array
            // reduces it: unique units (fixed-unit dedupe), each compressed on its own (zstd -1
            // per unit).
            // Compression at the largest unit the check used up to the dedupe unit (arrays
            // compress in chunks of at most their block).
            let unit = data.dedupe_unit;
            let comp = checked
                .iter()
                .filter(|r| r.kind == "compression" && r.method == "zstd -1" && r.unit.is_some_and(|u| u <= unit))
                .max_by_key(|r| r.unit);
            let dedupe = checked.iter().find(|r| r.kind == "deduplication" && r.unit == Some(unit));
            match (comp, dedupe) {
                (Some(c), Some(d)) => {
                    let (cu, u) = (iocurve_plan::format_size(c.unit.unwrap_or(unit)), iocurve_plan::format_size(unit));
                    crate::outln!(
                        "the run's data check measured {:.2}:1 ({:.2}:1 compression by zstd -1 per {cu} unit × {:.2}:1 dedupe in {u} units)",
                        c.achieved * d.achieved,
                        c.achieved,
                        d.achieved
                    );
                }
                _ if run.is_some() => crate::outln!(
                    "the run's data check has no compression and dedupe rows at its {} unit (see `iocurve show` for what it measured)",
                    iocurve_plan::format_size(unit)
                ),
                _ => {}
            }
            if let Some(a) = array_ratio {
                crate::outln!("the array reports {a:.2}:1: {:.0} % of what the data allows", 100.0 * a / expected);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The mean latency (ms) the stored run's curve shows at `iops`, and a line saying where it
/// comes from.
fn measured_latency(db: &std::path::Path, id: i64, name: Option<&str>, iops: f64) -> Result<(f64, String), CliError> {
    let result = stored(db, id)?;
    let w = pick(&result, id, name, |_| true, "workload")?;
    let labels = step_labels(w, false);
    let points: Vec<(f64, f64, &str)> =
        curve(w).into_iter().map(|i| (w.steps[i].iops, w.steps[i].lat_us.mean, labels[i].as_str())).collect();
    let (lat_us, around) =
        sizing::latency_at(&points, iops).map_err(|e| CliError::Usage(format!("run {id} {}: {e}", w.name)))?;
    let ms = lat_us / 1000.0;
    let said = format!(
        "run {id} {} carries {} IOPS at {} mean ({})",
        w.name,
        format::iops(iops),
        format::latency(lat_us),
        if around.len() == 1 {
            format!("at or below its lightest step, {}", around[0])
        } else {
            format!("between {}", around.join(" and "))
        }
    );
    Ok((ms, said))
}

fn raid_name(r: Raid) -> &'static str {
    match r {
        Raid::Raid0 => "RAID 0",
        Raid::Raid1 => "RAID 1/10",
        Raid::Raid5 => "RAID 5",
        Raid::Raid6 => "RAID 6",
        Raid::RaidDp => "RAID-DP",
    }
}
