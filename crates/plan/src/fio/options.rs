//! The one table of the fio options iocurve knows: which it maps onto plan keys, which only
//! shape fio's output, which it cannot honour (a note says what it does instead) and which
//! would change what is measured in a way it cannot reproduce (refused unless
//! `--fio-lenient`). An option fio knows but this table does not is refused too: measuring
//! something else silently is the one thing an import must not do.

/// What iocurve does with a fio option.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// Read by the import and turned into plan keys.
    Mapped,
    /// Only changes fio's output or bookkeeping; iocurve reports everything anyway.
    Output,
    /// Not honoured; the text says what iocurve does instead.
    Ignored(&'static str),
    /// Would change the measured load; the text says why.
    Refused(&'static str),
}

/// (names, kind, bare allowed): the first name is the canonical one, the others fio's aliases.
type Row = (&'static [&'static str], Kind, bool);

const TABLE: &[Row] = &[
    (&["name"], Kind::Mapped, false),
    (&["description"], Kind::Mapped, false),
    (&["rw", "readwrite"], Kind::Mapped, false),
    (&["rwmixread"], Kind::Mapped, false),
    (&["rwmixwrite"], Kind::Mapped, false),
    (&["bs", "blocksize"], Kind::Mapped, false),
    (&["bsrange", "blocksize_range"], Kind::Mapped, false),
    (&["bssplit"], Kind::Mapped, false),
    (&["numjobs"], Kind::Mapped, false),
    (&["iodepth"], Kind::Mapped, false),
    (&["size"], Kind::Mapped, false),
    (&["offset", "fileoffset"], Kind::Mapped, false),
    (&["filesize"], Kind::Mapped, false),
    (&["filename"], Kind::Mapped, false),
    (&["directory"], Kind::Mapped, false),
    (&["nrfiles", "nr_files"], Kind::Mapped, false),
    (&["runtime", "timeout"], Kind::Mapped, false),
    (&["time_based"], Kind::Mapped, true),
    (&["ramp_time"], Kind::Mapped, false),
    (&["stonewall", "wait_for_previous"], Kind::Mapped, true),
    (&["new_group"], Kind::Mapped, true),
    (&["wait_for"], Kind::Mapped, false),
    (&["direct"], Kind::Mapped, false),
    (&["buffered"], Kind::Mapped, false),
    (&["ioengine"], Kind::Mapped, false),
    (&["kb_base"], Kind::Mapped, false),
    (&["buffer_compress_percentage"], Kind::Mapped, false),
    (&["dedupe_percentage"], Kind::Mapped, false),
    (&["rate_iops"], Kind::Mapped, false),
    (&["rate"], Kind::Mapped, false),
    (&["rate_process"], Kind::Mapped, false),
    (&["continue_on_error"], Kind::Mapped, false),
    (&["verify"], Kind::Mapped, false),
    (&["random_distribution"], Kind::Mapped, false),
    (&["percentage_random"], Kind::Mapped, false),
    (&["thread"], Kind::Ignored("iocurve always drives I/O from threads of one process"), true),
    (&["group_reporting"], Kind::Output, true),
    (&["stats"], Kind::Output, false),
    // Bare, fio names the logs after the job (its examples write `write_bw_log` alone).
    (&["write_bw_log"], Kind::Output, true),
    (&["write_lat_log"], Kind::Output, true),
    (&["write_iops_log"], Kind::Output, true),
    (&["write_hist_log"], Kind::Output, true),
    (&["log_avg_msec"], Kind::Output, false),
    (&["log_hist_msec"], Kind::Output, false),
    (&["log_max_value"], Kind::Output, false),
    (&["log_offset"], Kind::Output, false),
    (&["per_job_logs"], Kind::Output, false),
    (&["percentile_list"], Kind::Output, false),
    (&["clat_percentiles"], Kind::Output, false),
    (&["lat_percentiles"], Kind::Output, false),
    (&["slat_percentiles"], Kind::Output, false),
    (&["significant_figures"], Kind::Output, false),
    (&["unified_rw_reporting"], Kind::Output, false),
    (&["disable_lat"], Kind::Output, false),
    (&["disable_clat"], Kind::Output, false),
    (&["disable_slat"], Kind::Output, false),
    (&["disable_bw_measurement", "disable_bw"], Kind::Output, false),
    (&["gtod_reduce"], Kind::Output, false),
    (&["bwavgtime"], Kind::Output, false),
    (&["iopsavgtime"], Kind::Output, false),
    (&["clocksource"], Kind::Output, false),
    (&["randrepeat"], Kind::Output, false),
    (&["norandommap"], Kind::Output, true),
    (&["random_generator"], Kind::Output, false),
    (&["refill_buffers"], Kind::Output, true),
    (&["scramble_buffers"], Kind::Output, false),
    (&["invalidate"], Kind::Output, false),
    (&["fallocate"], Kind::Output, false),
    (&["create_on_open"], Kind::Output, false),
    (&["allow_file_create"], Kind::Output, false),
    (&["overwrite"], Kind::Output, false),
    (&["exitall"], Kind::Output, true),
    (&["exitall_on_error"], Kind::Output, true),
    (&["startdelay"], Kind::Ignored("iocurve starts every step at once (pause_s rests before each step)"), false),
    (&["loops"], Kind::Ignored("iocurve measures each step for a time, not for a number of passes"), false),
    (&["io_size", "io_limit"], Kind::Ignored("iocurve measures each step for a time, not for an amount of I/O"), false),
    (&["number_ios"], Kind::Ignored("iocurve measures each step for a time, not for a number of I/Os"), false),
    (&["cpus_allowed"], Kind::Ignored("iocurve places its own I/O threads"), false),
    (&["cpumask"], Kind::Ignored("iocurve places its own I/O threads"), false),
    (&["cpus_allowed_policy"], Kind::Ignored("iocurve places its own I/O threads"), false),
    (&["numa_cpu_nodes"], Kind::Ignored("iocurve places its own I/O threads"), false),
    (&["numa_mem_policy"], Kind::Ignored("iocurve places its own I/O threads"), false),
    (&["nice"], Kind::Ignored("iocurve runs at the priority it was started with"), false),
    (&["prio"], Kind::Ignored("iocurve runs at the priority it was started with"), false),
    (&["prioclass"], Kind::Ignored("iocurve runs at the priority it was started with"), false),
    (&["hipri"], Kind::Ignored("iocurve's io_uring back-end chooses its own ring setup"), true),
    (&["fixedbufs"], Kind::Ignored("iocurve's io_uring back-end registers its buffers itself"), true),
    (&["registerfiles"], Kind::Ignored("iocurve's io_uring back-end registers its files itself"), true),
    (&["sqthread_poll"], Kind::Ignored("iocurve's io_uring back-end chooses its own ring setup"), true),
    (&["iodepth_batch", "iodepth_batch_submit"], Kind::Ignored("iocurve submits as I/Os become due"), false),
    (&["iodepth_batch_complete_min", "iodepth_batch_complete"], Kind::Ignored("iocurve reaps as I/Os complete"), false),
    (&["iodepth_batch_complete_max"], Kind::Ignored("iocurve reaps as I/Os complete"), false),
    (&["iodepth_low"], Kind::Ignored("iocurve refills the queue as I/Os complete"), false),
    (&["mem", "iomem"], Kind::Ignored("iocurve allocates page-aligned buffers itself"), false),
    (&["lockmem"], Kind::Ignored("iocurve does not lock memory"), false),
    (&["end_fsync"], Kind::Ignored("no fsync after the step: iocurve measures the intervals only"), false),
    (&["fsync_on_close"], Kind::Ignored("no fsync on close: iocurve measures the intervals only"), false),
    (&["pre_read"], Kind::Ignored("iocurve does not pre-read; warm_up_s loads the cache the same way"), false),
    (&["unlink"], Kind::Ignored("iocurve removes the scratch files it created unless --keep"), false),
    (&["unlink_each_loop"], Kind::Ignored("iocurve removes the scratch files it created unless --keep"), false),
    (&["allow_mounted_write"], Kind::Ignored("iocurve's own write safety applies: --allow-write PATH"), false),
    (&["exec_prerun"], Kind::Ignored("iocurve runs no commands from a job file"), false),
    (&["exec_postrun"], Kind::Ignored("iocurve runs no commands from a job file"), false),
    (
        &["buffer_compress_chunk"],
        Kind::Ignored("iocurve mixes constant and random bytes in every 512-byte sector"),
        false,
    ),
    (&["thinktime"], Kind::Mapped, false),
    (&["thinktime_blocks"], Kind::Mapped, false),
    (&["thinktime_spin"], Kind::Mapped, false),
    (&["fsync"], Kind::Refused("iocurve issues no fsync between writes"), false),
    (&["fdatasync"], Kind::Refused("iocurve issues no fdatasync between writes"), false),
    (&["sync"], Kind::Refused("iocurve does not open targets O_SYNC"), false),
    (&["write_barrier"], Kind::Refused("iocurve issues no barrier writes"), false),
    (&["zonemode"], Kind::Refused("iocurve does not drive zoned devices by zone"), false),
    (&["zoned"], Kind::Refused("iocurve does not drive zoned devices by zone"), false),
    (&["zonesize"], Kind::Refused("iocurve does not drive zoned devices by zone"), false),
    (&["zonerange"], Kind::Refused("iocurve does not drive zoned devices by zone"), false),
    (&["zoneskip"], Kind::Refused("iocurve does not drive zoned devices by zone"), false),
    (&["do_verify"], Kind::Refused("iocurve's verify is its own (block headers, not fio's checksums)"), false),
    (&["verify_pattern"], Kind::Refused("iocurve's verify is its own (block headers, not fio's checksums)"), false),
    (&["offset_increment"], Kind::Refused("iocurve's workers share one working set"), false),
    (&["openfiles"], Kind::Refused("iocurve keeps every target open"), false),
    (&["file_service_type"], Kind::Refused("iocurve picks a target per I/O by weight"), false),
    (&["rate_min"], Kind::Refused("iocurve does not end a job below a minimum rate"), false),
    (&["rate_cycle"], Kind::Refused("iocurve does not end a job below a minimum rate"), false),
    (&["flow"], Kind::Refused("iocurve does not couple the rates of jobs"), false),
    (&["flow_id"], Kind::Refused("iocurve does not couple the rates of jobs"), false),
    (&["serialize_overlap"], Kind::Refused("iocurve does not serialise overlapping I/Os"), false),
    (&["zero_buffers"], Kind::Refused("iocurve writes its own data pattern (compress, dedupe)"), true),
    (&["buffer_pattern"], Kind::Refused("iocurve writes its own data pattern (compress, dedupe)"), false),
    (&["bs_unaligned", "blocksize_unaligned"], Kind::Refused("iocurve aligns every I/O to its block size"), true),
    (&["blockalign", "ba"], Kind::Refused("iocurve aligns every I/O to its block size"), false),
    (&["rw_sequencer"], Kind::Refused("iocurve does not repeat offsets"), false),
    (&["ioscheduler"], Kind::Refused("iocurve does not change the device's I/O scheduler"), false),
    (&["cgroup"], Kind::Refused("iocurve does not run in a cgroup of its own"), false),
    (&["io_submit_mode"], Kind::Refused("iocurve submits from its I/O threads"), false),
    // fio's trims of written blocks while verifying: read into the job, refused where they
    // trim (translate says why), noted where fio ignores them.
    (&["trim_percentage"], Kind::Mapped, false),
    (&["trim_backlog"], Kind::Mapped, false),
    (&["trim_backlog_batch"], Kind::Mapped, false),
    (&["trim_verify_zero"], Kind::Mapped, false),
];

pub struct Known {
    pub canonical: &'static str,
    pub kind: Kind,
    pub bare: bool,
}

/// The row of `name` (an alias resolves to its canonical name).
pub fn lookup(name: &str) -> Option<Known> {
    TABLE.iter().find(|(names, _, _)| names.contains(&name)).map(|&(names, kind, bare)| Known {
        canonical: names[0],
        kind,
        bare,
    })
}

/// Every name the table knows, for "did you mean".
pub fn names() -> impl Iterator<Item = &'static str> {
    TABLE.iter().flat_map(|(names, _, _)| names.iter().copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_aliases_resolve() {
        let mut all: Vec<&str> = names().collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "a name is in the table twice");
        assert_eq!(lookup("readwrite").unwrap().canonical, "rw");
        assert_eq!(lookup("blocksize").unwrap().canonical, "bs");
        assert!(lookup("no_such_option").is_none());
    }
}
