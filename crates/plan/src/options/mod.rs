//! The one definition of every workload key: a row each (the `workload_keys!` macro of
//! `declare.rs`) gives its field in [`WorkloadKeys`] (plan files, `[defaults]`, flags), its field
//! in [`Workload`] (resolved), its command-line flag, help text and built-in default, and its
//! check. The clap flags of `iocurve run` (and the data flags of `precondition` and
//! `datacheck`), the built-in defaults, the option names in error messages and the README's
//! option table (checked by a test) all come from here; values given as flags are read by the
//! same deserializer as plan files, so a flag and a key cannot disagree.
//!
//! Adding a workload key: its row here, the code that uses it, its README rows (a test holds
//! them to this table) and the CHANGELOG. A rule between keys goes into
//! `resolve::workload::cross_checks`. Code that builds a `Workload` takes the keys it does not
//! set from `Workload::default()`, the table's defaults.

pub(crate) mod checks;

use crate::declare::ensure;
use crate::error::PlanError;
use crate::model::{
    Arrival, Backend, BlockSize, DataPattern, OnError, Overload, Pattern, Remap, Split, SteadyState, WorkingSet,
};
use crate::pace::{Bursts, Think, ThinkTime};
use crate::skew::{Distribution, HotLayout, Placement};
use crate::spec::{BlockSizeSpec, WorkingSetSpec};

/// How a flag's text becomes the key's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagKind {
    /// A number (`4`, `0.4`, `0xa5`).
    Number,
    /// Text, as a plan file's string (`8k`, `io_uring`, `stop-target`).
    Text,
    /// Comma-separated numbers (`1,2,4,8`).
    List,
    /// A flag without a value that sets the key to this.
    Switch(bool),
}

/// One workload key.
#[derive(Debug, Clone, Copy)]
pub struct WorkloadOption {
    /// As spelled in a plan file.
    pub key: &'static str,
    /// The command-line flag without `--` (None: plan files only).
    pub flag: Option<&'static str>,
    pub kind: FlagKind,
    /// The flag's value in `--help` (`N`, `SIZE`, …).
    pub value_name: &'static str,
    /// The flag's help (the first sentence is the short help).
    pub help: &'static str,
    /// The built-in default as a TOML value (None: none, or worked out per workload, as the
    /// help says).
    pub default: Option<&'static str>,
}

use FlagKind::{List, Number, Switch, Text};

workload_keys! {
    /// Workload name; say what it is (`backend-random-read-8k`). Not allowed in `[defaults]`.
    // Checked by the resolver for every workload, chosen by `--workload` or not (names are the
    // plan's): `resolve::workload::workload_name`.
    name: String
        => name: String = [value],
        table(None, Text, "NAME", None, "Workload name; say what it is (backend-random-read-8k).");
    /// Share of reads in percent: 100 = read only, 0 = write only, 70 = 70/30.
    read_pct: f64
        => read_pct: f64
            = [value |&v| ensure((0.0..=100.0).contains(&v), || format!("read_pct is {v}; it is a share of reads in percent, 0 to 100 (70 = 70 % reads, 30 % writes)"))],
        table(
            None, Number, "PCT", Some("100"),
            "Share of reads in percent: 100 = read only, 0 = write only.",
        );
    /// Share of trims in percent (discards on a block device, punched holes in a file), taken
    /// from the writes: reads `read_pct`, trims `trim_pct`, writes the rest.
    trim_pct: f64
        => trim_pct: f64 [serde(default, skip_serializing_if = "is_zero")]
            = [value |&v| ensure((0.0..=100.0).contains(&v), || format!("trim_pct is {v}; it is a share of trims in percent, 0 to 100 (with read_pct = 60, trim_pct = 10: 60 % reads, 10 % trims, 30 % writes)"))],
        table(
            None, Number, "PCT", Some("0"),
            "Share of trims in percent (discards on a device, punched holes in a file), taken from the writes: read_pct reads, trim_pct trims, the rest writes.",
        );
    /// Block size (`"8k"`, 4096) or a weighted mix (`{ "4k" = 70, "64k" = 30 }`).
    bs: BlockSizeSpec
        => bs: Vec<BlockSize> [doc = "Resolved, one entry per size with its weight; one entry for a fixed block size."] = [custom checks::block_sizes, checks::block_sizes_back],
        table(
            Some("bs"), Text, "SIZE", Some("\"4k\""),
            "Block size of every workload (e.g. 4k, 8k, 1m; binary units).",
        );
    /// Block size of writes when it differs from that of reads (`bs`): a size or a weighted
    /// mix, as `bs` (fio's `bs=4k,64k`).
    write_bs: BlockSizeSpec
        => write_bs: Vec<BlockSize> [serde(default, skip_serializing_if = "Vec::is_empty")] [doc = "Empty: writes take `bs` as reads do."]
            = [custom checks::write_block_sizes, checks::write_block_sizes_back],
        table(
            Some("write-bs"), Text, "SIZE", None,
            "Block size of writes when it differs from that of reads (bs then is the reads'), as bs: a size or a mix, e.g. 64k (fio's bs=4k,64k).",
        );
    /// Block size of trims when it differs from `bs`: a size or a weighted mix, as `bs` (fio's
    /// third `bs` value, `bs=4k,4k,1m`).
    trim_bs: BlockSizeSpec
        => trim_bs: Vec<BlockSize> [serde(default, skip_serializing_if = "Vec::is_empty")] [doc = "Empty: trims take `bs`."]
            = [custom checks::trim_block_sizes, checks::trim_block_sizes_back],
        table(
            None, Text, "SIZE", None,
            "Block size of trims when it differs from bs: a size or a mix, as bs (fio's bs=4k,4k,1m); on a device a multiple of its discard_granularity.",
        );
    /// `random` or `sequential`.
    pattern: Pattern
        => pattern: Pattern = [value],
        table(None, Text, "PATTERN", Some("\"random\""), "random or sequential.");
    /// How a random workload picks its blocks: `uniform`, `zipf:θ`, `pareto:h`, `normal:σ`
    /// (σ in percent of the working set), each with an optional centre (`zipf:1.2:0.25`),
    /// `zoned:60/10:30/20:10/70`, `zoned_abs:60/20g:40/100g` or `hotbands:40@10-11:20@50-52`.
    distribution: Distribution
        => distribution: Distribution [serde(default, skip_serializing_if = "Distribution::is_uniform")] = [value],
        table(
            Some("distribution"), Text, "LAW", Some("\"uniform\""),
            "How a random workload picks its blocks: uniform, zipf:THETA, pareto:H, normal:SIGMA_PCT (each with an optional centre, e.g. zipf:1.2:0.25), zoned:60/10:30/20:10/70 (60 % of I/Os in the first 10 % …), zoned_abs:60/20g:40/100g, or hotbands:40@10-11:20@50-52 (40 % of I/Os in 10–11 % of the working set …, the rest uniform). Every host and worker draws from the same law over the same hot region.",
        );
    /// `contiguous`: the hot region of a skewed distribution in one piece; `scattered`: spread
    /// over the working set by a permutation of its blocks seeded by `seed`.
    hot_layout: HotLayout
        => hot_layout: HotLayout [serde(default, skip_serializing_if = "HotLayout::is_contiguous")] = [value],
        table(
            Some("hot-layout"), Text, "LAYOUT", Some("\"contiguous\""),
            "Where a skewed distribution's hot blocks lie: contiguous (in one piece from the centre, what tiering arrays react to) or scattered (spread over the working set by a permutation seeded by --seed; fio's way for zipf, pareto and normal).",
        );
    /// `frontend` (first `frontend_blocks` blocks of each target, at most 1/8 of it),
    /// `backend` (whole target),
    /// or `{ start = "1g", end = "2g" }`.
    working_set: WorkingSetSpec
        => working_set: WorkingSet = [custom checks::working_set, checks::working_set_back],
        table(
            None, Text, "SET", Some("\"backend\""),
            "frontend (the first frontend_blocks blocks of each target, at most 1/8 of it), backend (whole target) or a byte range.",
        );
    /// Blocks per target in a frontend working set (default 1000).
    frontend_blocks: u64,
        table(
            None, Number, "N", Some("1000"),
            "Blocks per target in a frontend working set (at most 1/8 of a target).",
        );
    /// Outstanding I/Os per worker (default 1).
    queue_depth: u32
        => queue_depth: u32
            = [value |&v| ensure((1..=4096).contains(&v), || format!("queue_depth is {v}; it must be 1 to 4096 outstanding I/Os per worker"))],
        table(Some("qd"), Number, "N", Some("1"), "Outstanding I/Os per worker (queue depth).");
    /// Queue depths of a ramp over the outstanding I/Os per worker, increasing: each step runs
    /// one of them (the Iometer test: 4 workers, 1 … 512 outstanding each). With one worker
    /// count in `ramp` a queue-depth ramp; with several, a workers × queue-depth grid; with
    /// `ramp` only from a farther layer (or none) at 1 worker. Of `queue_depth` and `qd_ramp`
    /// the nearer layer wins (a `--qd` on the command line runs a plan's `qd_ramp` at that
    /// one depth).
    qd_ramp: Vec<u32>
        => qd_ramp: Vec<u32> [serde(default)] [doc = "Empty: every step at `queue_depth`. Else a step per depth (per worker count and depth: a grid); `queue_depth` is the first."] = [list |r| checks::qd_ramp(r)],
        table(
            Some("qd-ramp"), List, "LIST", None,
            "Queue depths of a ramp over the outstanding I/Os per worker, comma-separated and increasing (e.g. 1,2,4,8,16,32): at the one worker count of --ramp a queue-depth ramp, at several a workers × queue-depth grid (a step per cell, with speed, optimum and maximum along each axis); without --ramp beside it (on the command line, or in the same plan table) at 1 worker. Replaces --qd.",
        );
    /// Think time of a closed-loop worker: `500us`, a range `100us-900us` (uniform) or
    /// `exp:2ms` (exponential with that mean); a bare number is µs (fio's `thinktime`).
    think_time: ThinkTime
        => think: Option<Think> [serde(default, skip_serializing_if = "Option::is_none")] [doc = "With `think_blocks` and `think_spin`; None: no think time."]
            = [custom checks::think, checks::think_back],
        table(
            Some("think-time"), Text, "TIME", None,
            "Think time of each closed-loop worker: it issues think_blocks I/Os (queue_depth at a time at most), lets them finish, then pauses this long before the next ones: 500us, a range 100us-900us (uniform) or exp:2ms (exponential with that mean); a bare number is µs (fio's thinktime).",
        );
    /// I/Os a worker completes between thinks (default 1; fio's `thinktime_blocks`).
    think_blocks: u32,
        table(
            Some("think-blocks"), Number, "N", Some("1"),
            "I/Os a worker completes between two thinks (fio's thinktime_blocks).",
        );
    /// The part of each think spent on the CPU instead of asleep (fio's `thinktime_spin`).
    think_spin: String,
        table(
            Some("think-spin"), Text, "TIME", None,
            "The part of each think spent busy on the CPU rather than asleep, e.g. 50us (fio's thinktime_spin); at most the shortest think.",
        );
    /// Workers per host of each step, increasing.
    ramp: Vec<u32>
        => ramp: Vec<u32> = [value |r| checks::ramp(r)],
        table(
            Some("ramp"), List, "LIST", Some("[1, 2, 4, 8, 16, 32]"),
            "Worker counts of the ramp, comma-separated and increasing (e.g. 1,2,4,8).",
        );
    /// Host counts of a host-count sweep, increasing: the workload's ramp runs on the first 1,
    /// 2, 4 … hosts listed (`[[hosts]]` or `--hosts`, in their order), each count's steps
    /// compared with that many hosts planned (not as hosts lost).
    host_ramp: Vec<u32>
        => host_ramp: Vec<u32> [serde(default)] [doc = "Empty: every step on all the run's hosts."] = [list |r| checks::host_ramp(r)],
        table(
            Some("host-ramp"), List, "LIST", None,
            "Host counts of a host-count sweep, comma-separated and increasing (e.g. 1,2,4,8): the ramp runs on the first 1, then 2, 4 … hosts of --hosts or [[hosts]] in their order, with speed, optimum and maximum per host count.",
        );
    /// The concurrent step this workload runs in: every workload with the same `together` runs
    /// at one time, each step's workers shared out among them by `share` (fio's jobs without
    /// `stonewall`, vdbench's skew). Plan files only.
    together: String
        => together: Option<String> [serde(default, skip_serializing_if = "Option::is_none")] [doc = "None: a workload of its own."] = [optional |t| checks::name(t)],
        table(
            None, Text, "NAME", None,
            "Name of the concurrent step the workload runs in: every workload with this name runs at one time, each with its share of every step's workers; measured on its own and in total.",
        );
    /// Its share of a concurrent step's workers, against the other members' (default 1: equal
    /// shares); each member runs at least one worker.
    share: f64
        => share: f64 [serde(default = "crate::model::default_share")]
            = [value |&v| ensure(v > 0.0 && v <= 1e6, || format!("share is {v:?}; a member's share of a concurrent step's workers is above 0 up to 1e6 (80 and 20, or 0.8 and 0.2)"))],
        table(
            None, Number, "N", Some("1"),
            "A member's share of a concurrent step's workers against the others' (80 and 20: four fifths and one fifth; each at least one worker).",
        );
    /// The plan's target groups this workload uses (default: all, by their weights): a
    /// concurrent step's members on targets of their own.
    target_groups: Vec<String>
        => target_groups: Vec<String> [serde(default)] [doc = "Empty: every group of the plan."] = [list |g| checks::target_groups(g)],
        table(
            None, Text, "NAMES", None,
            "The plan's [[groups]] this workload uses, by name (default: all of them, by their weights): members of a concurrent step on targets of their own.",
        );
    /// How a host's workers are placed on its targets: `spread` (each I/O to any, by the
    /// groups' weights), `paths` (worker k on the k-th target: round-robin over the paths) or
    /// `groups` (worker k on the k-th target group: round-robin over controllers).
    placement: Placement
        => placement: Placement [serde(default, skip_serializing_if = "Placement::is_spread")] = [value],
        table(
            None, Text, "HOW", Some("\"spread\""),
            "How each host's workers are placed on its targets: spread (each I/O to any target, by the groups' weights), paths (worker k on the k-th target: round-robin over the paths) or groups (worker k on the k-th target group: round-robin over controllers); the balance per path, LUN, group and host says how evenly they carried it.",
        );
    /// Seconds of load before measuring each step (not counted).
    warmup_s: f64
        => warmup_s: f64
            = [value |&v| ensure((0.0..=86_400.0).contains(&v), || format!("warmup_s is {v}; it must be 0 to 86400 seconds"))],
        table(Some("warmup-s"), Number, "S", Some("5"), "Warm-up seconds before each step is measured.");
    /// Measurement intervals per step.
    intervals: u32
        => intervals: u32
            = [value |&v| ensure((1..=100_000).contains(&v), || format!("intervals is {v}; a step needs 1 to 100000 measurement intervals"))],
        table(Some("intervals"), Number, "K", Some("3"), "Measurement intervals per step.");
    /// Length of one interval in seconds.
    interval_s: f64
        => interval_s: f64
            = [value |&v| ensure((0.1..=86_400.0).contains(&v), || format!("interval_s is {v}; an interval lasts 0.1 to 86400 seconds"))],
        table(Some("interval-s"), Number, "S", Some("10"), "Length of one measurement interval in seconds.");
    /// Seconds of rest before each step but the first (default 0): the storage destages and
    /// settles, and the next load level starts from rest; nothing runs or is measured meanwhile.
    pause_s: f64
        => pause_s: f64 [serde(default)]
            = [value |&v| ensure((0.0..=86_400.0).contains(&v), || format!("pause_s is {v}; rest between steps 0 (none) to 86400 seconds"))],
        table(
            Some("pause-s"), Number, "S", Some("0"),
            "Seconds of rest before each step but the first: the storage destages and settles, and the next load level starts from rest; nothing runs or is measured meanwhile.",
        );
    /// O_DIRECT (default true); false = buffered I/O through the page cache.
    direct: bool
        => direct: bool = [value],
        table(
            Some("buffered"), Switch(false), "", Some("true"),
            "Buffered I/O through the page cache instead of O_DIRECT (plan key direct = false).",
        );
    /// `io_uring` (default), `libaio`, `psync` or `null`.
    backend: Backend
        => backend: Backend = [value],
        table(
            Some("backend"), Text, "NAME", Some("\"io_uring\""),
            "I/O back-end: io_uring (default), libaio (Linux native AIO, as fio's ioengine=libaio; asynchronous with O_DIRECT only), psync (one thread per outstanding I/O) or null (no I/O: measures iocurve itself). Where io_uring or libaio is missing, psync runs instead and the run says so.",
        );
    /// I/O threads for io_uring and null (0 = chosen by measurement); psync always uses one per I/O.
    threads: u32
        => threads: u32 [doc = "Resolved, 0 is chosen by the run step by step (`iocurve_run::threads`); an agent given 0 runs one per core."]
            = [value |&v| ensure(v <= 1024, || format!("threads is {v}; use 0 (chosen by measurement) to 1024"))],
        table(
            Some("threads"), Number, "N", Some("0"),
            "I/O threads for io_uring and null (0 = chosen by measurement: one to start, then as many as the CPU of the step before asks for, at most one per core).",
        );
    /// Share of every written block that is constant (0 = incompressible, 0.4 = the published
    /// "60 % random, 40 % constant" block, 1.66:1), 0 to 0.99; every 512-byte sector keeps 16
    /// random bytes at the least, so ratios top out at 32:1.
    compress: f64
        => data: DataPattern [serde(default)] [doc = "With `dedupe`, `dedupe_unit` and `constant` (resolved together here): what written blocks contain."]
            = [custom checks::data_pattern, checks::data_pattern_back],
        table(
            Some("compress"), Number, "F", Some("0"),
            "Constant share of every written block, 0 (incompressible) to 0.99; 0.4 = the published \"60 % random, 40 % constant\" block (1.66:1); ratios top out at 32:1.",
        );
    /// Written units per unique unit (1.0 = all unique, 2.0 = every unit twice on average).
    dedupe: f64,
        table(
            Some("dedupe"), Number, "R", Some("1"),
            "Written units per unique unit: 1 = all unique, 2 = every unit twice on average.",
        );
    /// Unit of deduplication (default: the largest size every block size, of reads and of
    /// writes, is a multiple of: the smallest where it divides the others); every block size must be a
    /// multiple of it.
    dedupe_unit: u64 [serde(default, deserialize_with = "crate::spec::opt_size")],
        table(
            Some("dedupe-unit"), Text, "SIZE", None,
            "Unit of deduplication (default: the largest size every block size of reads and writes is a multiple of; the smallest where it divides the others).",
        );
    /// The byte the constant share is made of: 0 (zeros, the default) or any byte 1–255
    /// (e.g. 0xa5), for arrays that treat runs of zeros specially.
    constant: u8 [serde(default, deserialize_with = "crate::spec::opt_byte")],
        table(
            Some("constant"), Number, "BYTE", Some("0"),
            "The byte the constant share is made of: 0 (zeros, default) or 1–255, e.g. 0xa5 (for arrays that detect runs of zeros).",
        );
    /// What an I/O error does: `continue` (count it, default), `stop-target` (no more I/O to
    /// that target in the step), `abort` (end the run, exit code 1).
    on_error: OnError
        => on_error: OnError [serde(default)] = [value],
        table(
            Some("on-error"), Text, "POLICY", Some("\"continue\""),
            "What an I/O error does: continue (count it; default), stop-target (no more I/O to that target in the step) or abort (end the run, exit code 1).",
        );
    /// Seconds an I/O still outstanding when its step ends (or is stopped) may take before it
    /// is cancelled and counted as stuck (default: the step's longest latency + 5 s; after
    /// Ctrl-C, 1 s).
    stuck_after_s: f64
        => stuck_after_s: Option<f64> [serde(default)] [doc = "None: the step's longest latency + 5 s."]
            = [optional |&s| ensure((0.1..=86_400.0).contains(&s), || format!("stuck_after_s is {s}; give 0.1 to 86400 seconds (how long outstanding I/Os may take after a step ends)"))],
        table(
            Some("stuck-after-s"), Number, "S", None,
            "Seconds I/Os still outstanding when a step ends may take before they are cancelled and counted as stuck (exit code 3); their age enters the latency figures. Default: the step's longest latency + 5 s. After Ctrl-C the wait is 1 s. On the command line it also bounds the precondition and final verification passes (no write or read returning for this long ends them) and the signature probe of a target to write (default 30 s).",
        );
    /// Verify: every written block carries a header, reads check it against the last
    /// acknowledged write (one block size per workload).
    verify: bool
        => verify: bool [serde(default)] = [value],
        table(
            Some("verify"), Switch(true), "", Some("false"),
            "Verify every workload: written blocks carry a header and reads check it against the last acknowledged write (plan key verify = true).",
        );
    /// Target rates of a rate ramp (open loop), increasing: IOPS, or MB/s (10^6 bytes/s) for a
    /// sequential workload, for the whole run (all hosts together). Replaces `ramp`.
    rate: Vec<f64>
        => rate: Vec<f64> [serde(default)] [doc = "Empty: a closed-loop ramp over `ramp` (and in runs stored before it existed)."] = [list |r| checks::rate(r)],
        table(
            Some("rate"), List, "LIST", None,
            "Target rates of an open-loop rate ramp, comma-separated and increasing, for all hosts together: IOPS, or MB/s for sequential workloads (e.g. 10000,50000,100000). Replaces the worker ramp; latency is measured from each I/O's intended issue time.",
        );
    /// How intended issue times of a rate step are spaced: `uniform` or `poisson`.
    arrival: Arrival
        => arrival: Arrival [serde(default)] = [value],
        table(
            Some("arrival"), Text, "KIND", Some("\"uniform\""),
            "How a rate step spaces intended issue times: uniform (evenly) or poisson (random, exponential gaps; reproducible with --seed).",
        );
    /// On/off bursts of every rate step (`100ms/900ms`): I/Os arrive only while on, at the rate
    /// that keeps the step's mean at its target.
    bursts: Bursts
        => bursts: Option<Bursts> [serde(default, skip_serializing_if = "Option::is_none")] = [optional |_| Ok(())],
        table(
            Some("bursts"), Text, "ON/OFF", None,
            "On/off bursts of every rate step, e.g. 100ms/900ms: I/Os arrive only during the on phases, faster by (on+off)/on, so the step's mean rate is its target (rate steps only).",
        );
    /// I/Os a rate step keeps in flight at most, per host.
    max_outstanding: u32
        => max_outstanding: u32 [serde(default = "crate::model::default_max_outstanding")]
            = [value |&v| ensure((1..=65_536).contains(&v), || format!("max_outstanding is {v}; a rate step keeps 1 to 65536 I/Os in flight per host"))],
        table(
            Some("max-outstanding"), Number, "N", Some("64"),
            "I/Os a rate step keeps in flight at most, per host.",
        );
    /// What a rate step does with an I/O that is due while `max_outstanding` are in flight:
    /// `queue`, `drop` or `abort-step`.
    overload: Overload
        => overload: Overload [serde(default)] = [value],
        table(
            Some("overload"), Text, "POLICY", Some("\"queue\""),
            "What a rate step does with an I/O that is due while max-outstanding are in flight: queue (issue it late; its response time grows honestly), drop (count it, do not issue it) or abort-step (end the step, marked unsustained).",
        );
    /// Seed of the arrival schedule (Poisson), of the offsets and of a scattered hot region: the
    /// same seed gives the same intended times and offsets.
    seed: u64
        => seed: u64 [serde(default = "crate::model::default_seed")] = [value],
        table(
            Some("seed"), Number, "N", Some("1"),
            "Seed of the Poisson arrival schedule, of the offsets each I/O thread draws (apart for every workload, step, host and thread) and of a scattered hot region: the same seed gives the same intended issue times and offsets.",
        );
    /// After the worker ramp, a rate ramp at these shares (percent) of its maximum throughput:
    /// the response-time curve (vdbench's `curve`).
    curve: Vec<f64>
        => curve: Vec<f64> [serde(default)] [doc = "Empty: no curve."] = [list |c| checks::curve(c)],
        table(
            Some("curve"), List, "PCTS", None,
            "After the worker ramp, drive the workload at these shares (percent, increasing, up to 100) of its maximum throughput: the response-time curve (e.g. 10,50,70,80,90,100), stored as workload NAME-curve.",
        );
    /// A rate ramp stops after the first step whose mean response time passes this (ms).
    stop_at_mean_ms: f64
        => stop_at_mean_ms: Option<f64> [serde(default)]
            = [optional |&ms| ensure(ms > 0.0 && ms <= 3_600_000.0, || format!("stop_at_mean_ms is {ms}; give a bound above 0 up to 3600000 ms"))],
        table(
            Some("stop-at-mean-ms"), Number, "MS", None,
            "A rate ramp (or curve) stops after the first step whose mean response time passes this many ms.",
        );
    /// A rate ramp stops after the first step whose p99 response time passes this (ms).
    stop_at_p99_ms: f64
        => stop_at_p99_ms: Option<f64> [serde(default)]
            = [optional |&ms| ensure(ms > 0.0 && ms <= 3_600_000.0, || format!("stop_at_p99_ms is {ms}; give a bound above 0 up to 3600000 ms"))],
        table(
            Some("stop-at-p99-ms"), Number, "MS", None,
            "A rate ramp (or curve) stops after the first step whose p99 response time passes this many ms.",
        );
    /// `snia`: every step ends once its last 5 intervals meet the SNIA steady-state rule
    /// (`intervals` is then the limit of rounds); `none` (default): every step runs all.
    steady_state: SteadyState
        => steady_state: SteadyState [serde(default)] = [value],
        table(
            Some("steady-state"), Text, "RULE", Some("\"none\""),
            "snia: each step ends once its last 5 intervals are in steady state by the SNIA rule (range within 20 % of the mean, best-fit excursion within 10 %); intervals is then the limit of rounds (at least 5, e.g. 25). none: every step runs all its intervals.",
        );
    /// After the worker ramp, find the highest rate sustained within the plan's SLA bounds by
    /// bisection on rate steps (`NAME-sla-search`).
    sla_search: bool
        => sla_search: bool [serde(default)] = [value],
        table(
            Some("sla-search"), Switch(true), "", Some("false"),
            "After the worker ramp, find the highest rate sustained within the SLA bounds (--sla-mean-ms, --sla-p99-ms) by bisection on rate steps between 0 and its maximum, to 2 % (workload NAME-sla-search; plan key sla_search = true).",
        );
    /// A trace to replay instead of generated I/Os: a blktrace capture (its base name, or one
    /// of its per-CPU files), a fio I/O log (v2, v3) or a CSV (time, offset, size, op). Every
    /// I/O is issued at its trace time (over `replay_speed`) through the open-loop scheduler.
    replay: String
        => replay: Option<String> [serde(default, skip_serializing_if = "Option::is_none")] = [optional |p| checks::replay(p)],
        table(
            Some("replay"), Text, "FILE", None,
            "Replay a trace instead of generated I/Os: a blktrace capture (base name or a per-CPU file), a fio I/O log (v2 or v3) or a CSV (time,offset,size,op); each I/O at its trace time (see --replay-speed), its response time measured from then (a path on the coordinator, relative to the working directory).",
        );
    /// Speeds of a replay, one step each (increasing): 1 = the trace's own timing, 2 = twice
    /// as fast.
    replay_speed: Vec<f64>
        => replay_speed: Vec<f64> [serde(default, skip_serializing_if = "Vec::is_empty")] [doc = "Empty: 1 (the trace's own timing)."] = [list |s| checks::replay_speed(s)],
        table(
            Some("replay-speed"), List, "LIST", None,
            "Speeds of a replay, one step each, comma-separated and increasing, 0.001 to 1000: 1 = the trace's own timing, 2 = twice as fast (its times halved), 0.5 = half; a sweep of speeds is the replay's ramp (default 1).",
        );
    /// Which target each device of a trace goes to: `DEV=N` pairs (N: the target's number, 1
    /// for the first listed, or its path as listed), separated by spaces or `;`; `*=N` for
    /// every device not named. Default: the devices in order of first appearance on targets
    /// 1, 2, ….
    replay_map: String
        => replay_map: Option<String> [serde(default, skip_serializing_if = "Option::is_none")] = [optional |m| checks::replay_map(m)],
        table(
            Some("replay-map"), Text, "MAP", None,
            "Which target each device of the trace goes to: DEV=N pairs separated by spaces or ; (N: the target's number in the order listed, or its path), *=N for every other device; e.g. \"8,16=1 8,32=2\" (default: the devices in order of first appearance on targets 1, 2, …).",
        );
    /// What a replay does with an I/O beyond the end of its target: `modulo` (the offset
    /// modulo the target's size), `scale` (offsets scaled by the target's size over the trace's
    /// span) or `refuse`.
    replay_remap: Remap
        => replay_remap: Remap [serde(default, skip_serializing_if = "is_default")] = [value],
        table(
            Some("replay-remap"), Text, "HOW", Some("\"modulo\""),
            "What a replay does with a trace's I/O beyond the end of its target: modulo (its offset modulo the target's size), scale (every offset scaled by the target's size over the trace's span on that device) or refuse (the run is refused); block sizes are kept.",
        );
    /// How a replay's I/Os are shared out among the run's hosts: `round-robin`, `device` or
    /// `process`.
    replay_split: Split
        => replay_split: Split [serde(default, skip_serializing_if = "is_default")] = [value],
        table(
            Some("replay-split"), Text, "HOW", Some("\"round-robin\""),
            "How a replay's I/Os are shared out among the run's hosts, each issuing its share at the common start: round-robin (I/O k to host k mod hosts), device (each trace device to one host) or process (each pid to one host).",
        );
}

/// The data-pattern keys: the flags `precondition` and `datacheck` share with `run`.
pub const DATA_KEYS: &[&str] = &["compress", "dedupe", "dedupe_unit", "constant"];

/// A share that is 0 (`trim_pct` left out of a workload's JSON when it does not trim).
fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

/// A key at its default (left out of a workload's JSON, so that runs stored before it existed
/// read the same).
fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// The option of `key`.
pub fn option(key: &str) -> Option<&'static WorkloadOption> {
    WORKLOAD_OPTIONS.iter().find(|o| o.key == key)
}

/// The command-line option that sets `key`, for error messages.
pub fn cli_option(key: &str) -> String {
    match option(key).and_then(|o| o.flag) {
        Some(flag) => format!("--{flag}"),
        None => "a command-line option".into(),
    }
}

/// Values used when neither the command line, the workload nor `[defaults]` sets a key.
pub fn builtin_defaults() -> WorkloadKeys {
    let mut table = toml::Table::new();
    for o in WORKLOAD_OPTIONS {
        if let Some(d) = o.default {
            let v: toml::Table = toml::from_str(&format!("v = {d}")).expect("a default is a TOML value (tested)");
            table.insert(o.key.into(), v["v"].clone());
        }
    }
    toml::Value::Table(table).try_into().expect("the defaults are valid keys (tested)")
}

/// The workload keys given as flags: `(key, values)` pairs as the command line gave them (one
/// value, a list's items, or none for a switch). Each value goes through the plan file's
/// deserializer; errors name the flag.
pub fn keys_from_flags(given: &[(&str, Vec<String>)]) -> Result<WorkloadKeys, PlanError> {
    let mut table = toml::Table::new();
    for (key, values) in given {
        let o = option(key).ok_or_else(|| PlanError::new("command line", None, None, format!("unknown key {key}")))?;
        let err = |msg: String| PlanError::new("command line", None, Some(cli_option(key)), msg);
        let one = || values.first().map(String::as_str).unwrap_or_default();
        let value = match o.kind {
            Switch(b) => toml::Value::Boolean(b),
            Text => toml::Value::String(one().to_string()),
            Number => number(one()).map_err(err)?,
            List => {
                toml::Value::Array(values.iter().map(|v| number(v.trim())).collect::<Result<Vec<_>, _>>().map_err(err)?)
            }
        };
        // Deserialized one key at a time: an error names its own flag.
        let mut single = toml::Table::new();
        single.insert(o.key.into(), value.clone());
        toml::Value::Table(single).try_into::<WorkloadKeys>().map_err(|e| err(e.message().trim().to_string()))?;
        table.insert(o.key.into(), value);
    }
    toml::Value::Table(table).try_into().map_err(|e| PlanError::new("command line", None, None, e.message().trim()))
}

/// A number as the command line gives it: an integer (decimal or 0x hex) or a decimal fraction.
fn number(s: &str) -> Result<toml::Value, String> {
    let t = s.trim();
    let hex = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X"));
    if let Some(h) = hex {
        return i64::from_str_radix(h, 16).map(toml::Value::Integer).map_err(|_| format!("`{s}` is not a number"));
    }
    if let Ok(i) = t.parse::<i64>() {
        return Ok(toml::Value::Integer(i));
    }
    match t.parse::<f64>() {
        Ok(f) if f.is_finite() => Ok(toml::Value::Float(f)),
        _ => Err(format!("`{s}` is not a number")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lists_every_key_once_in_order() {
        let keys: Vec<&str> = WORKLOAD_OPTIONS.iter().map(|o| o.key).collect();
        let all = WorkloadKeys::all_keys();
        assert_eq!(keys, all, "one table row per WorkloadKeys field, in order");
        let mut flags: Vec<&str> = WORKLOAD_OPTIONS.iter().filter_map(|o| o.flag).collect();
        flags.sort_unstable();
        let n = flags.len();
        flags.dedup();
        assert_eq!(flags.len(), n, "every flag is unique");
        for k in DATA_KEYS {
            assert!(option(k).and_then(|o| o.flag).is_some(), "{k} has a flag");
        }
    }

    #[test]
    fn every_default_is_a_valid_value_of_its_key() {
        let d = builtin_defaults();
        for o in WORKLOAD_OPTIONS {
            assert_eq!(d.set_keys().contains(&o.key), o.default.is_some(), "{}", o.key);
        }
        assert_eq!(d.queue_depth, Some(1));
        assert_eq!(d.ramp, Some(vec![1, 2, 4, 8, 16, 32]));
        assert_eq!(d.bs, Some(crate::BlockSizeSpec::One(4096)));
        assert_eq!(d.direct, Some(true));
    }

    #[test]
    fn flags_read_as_plan_values_and_errors_name_the_flag() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let k = keys_from_flags(&[
            ("ramp", s(&["1", "4", "16"])),
            ("queue_depth", s(&["8"])),
            ("bs", s(&["8k"])),
            ("constant", s(&["0xa5"])),
            ("compress", s(&["0.4"])),
            ("dedupe", s(&["2"])),
            ("direct", vec![]),
            ("backend", s(&["psync"])),
            ("on_error", s(&["stop-target"])),
        ])
        .unwrap();
        assert_eq!(k.ramp, Some(vec![1, 4, 16]));
        assert_eq!(k.queue_depth, Some(8));
        assert_eq!(k.bs, Some(crate::BlockSizeSpec::One(8192)));
        assert_eq!(k.constant, Some(0xa5));
        assert_eq!(k.compress, Some(0.4));
        assert_eq!(k.dedupe, Some(2.0));
        assert_eq!(k.direct, Some(false));
        assert_eq!(k.backend, Some(crate::Backend::Psync));
        assert_eq!(k.on_error, Some(crate::OnError::StopTarget));
        for (key, v, flag) in [
            ("queue_depth", "-1", "--qd"),
            ("queue_depth", "lots", "--qd"),
            ("bs", "8q", "--bs"),
            ("backend", "spdk", "--backend"),
            ("constant", "256", "--constant"),
            ("ramp", "1,x", "--ramp"),
        ] {
            let e = keys_from_flags(&[(key, v.split(',').map(String::from).collect())]).unwrap_err();
            assert_eq!(e.key.as_deref(), Some(flag), "{key} {v}: {e}");
            assert!(!e.message.is_empty());
        }
    }
}
