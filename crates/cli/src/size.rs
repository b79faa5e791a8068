//! `iocurve size`: the arithmetic of `iocurve_analysis::sizing`, printed with its inputs.

use std::process::ExitCode;

use iocurve_analysis::sizing::{self, Raid};
use iocurve_report::format;

use crate::CliError;
use crate::cli::SizeCommand;

pub fn command(c: SizeCommand) -> Result<ExitCode, CliError> {
    match c {
        SizeCommand::Raid { level, disks, iops, disk_iops, read_pct } => {
            let read = read_pct / 100.0;
            let p = level.write_penalty();
            let name = raid_name(level);
            match (disks, iops) {
                (Some(n), _) => {
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
                    let n = sizing::raid_disks_for(t, disk_iops, read, level);
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
        SizeCommand::Links { count, link } => {
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
        }
        SizeCommand::Speedup { io_share, from_ms, to_ms } => {
            let (s, saved) = sizing::speedup(io_share / 100.0, from_ms, to_ms);
            crate::outln!(
                "{io_share} % of the time in I/O, latency {from_ms} ms → {to_ms} ms: {:.0} % less time, {s:.2}× as fast",
                saved * 100.0
            );
        }
        SizeCommand::Reduction { compress, dedupe, array_ratio } => {
            let keys =
                iocurve_plan::WorkloadKeys { compress: Some(compress), dedupe: Some(dedupe), ..Default::default() };
            // The plan's own checks and messages.
            let w = iocurve_plan::writing_workload("size", keys)?;
            let expected = sizing::expected_reduction(&w.data);
            crate::outln!(
                "{}: {expected:.2}:1 expected ({:.2}:1 compression × {dedupe}:1 dedupe)",
                w.data.describe(),
                w.data.expected_compression()
            );
            if let Some(a) = array_ratio {
                crate::outln!("the array reports {a:.2}:1: {:.0} % of what the data allows", 100.0 * a / expected);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
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
