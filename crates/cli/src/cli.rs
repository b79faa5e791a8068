//! Every option of iocurve, defined once. `--help` is generated from these doc comments; a
//! test checks the table (unique names, every option documented).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub use crate::flags::{DataFlags, WorkloadFlags};

#[derive(Debug, Parser)]
#[command(
    name = "iocurve",
    version,
    about = "Measure how a storage system behaves as load grows: IOPS, MB/s and latency over a ramp of parallelism, with speed, optimum and maximum per workload.",
    long_about = None,
    after_help = "Exit codes: 0 clean; 1 the tool or host failed; 2 bad input (nothing ran); 3 the run finished but the storage failed I/Os or a step completed no I/O; 4 verification found lost, corrupted or misplaced blocks; 129 hung up (SIGHUP); 130 interrupted."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a plan file, a built-in suite, or (no arguments) the quick suite on a scratch file.
    Run(Box<RunArgs>),
    /// List the built-in suites.
    Suites,
    /// Print a built-in suite as TOML, to start a custom plan from; or, with --from-fio, the
    /// plan a fio job file becomes (`iocurve plan --from-fio job.fio > plan.toml`); or, with
    /// --from-trace, a plan whose workload mimics a production trace.
    Plan {
        /// The suite to print (see `iocurve suites`).
        #[arg(long, default_value = "quick", conflicts_with_all = ["from_fio", "from_trace"])]
        suite: String,
        /// A trace to mimic (blktrace, fio I/O log or CSV, as `run --replay` reads it): one
        /// workload with the trace's read and trim shares, size mix per direction, pattern,
        /// skew (a zoned distribution), working set, mean rate and arrival, each key commented
        /// with the figure it came from (`iocurve plan --from-trace sdb > plan.toml`).
        #[arg(long, value_name = "TRACE", conflicts_with = "from_fio")]
        from_trace: Option<PathBuf>,
        /// A fio job file to translate: the plan `iocurve run job.fio` runs, with the options
        /// iocurve does not honour listed as comments on top.
        #[arg(long, value_name = "JOB_FILE")]
        from_fio: Option<PathBuf>,
        /// With --from-fio: options that would change what is measured become warnings instead
        /// of errors (see `run --fio-lenient`).
        #[arg(long, requires = "from_fio")]
        fio_lenient: bool,
    },
    /// Describe a production trace before replaying it (blktrace, fio I/O log or CSV, as
    /// `run --replay` reads it): I/Os, duration, mean and peak IOPS; per direction its share,
    /// mean size, size mix and sequential share; the skew (what the busiest 1, 10 and 20 % of the
    /// touched 4 KiB blocks carry); the inter-arrival times (mean, p50, p99, CV); per device its
    /// I/Os and span; and what was left out. Exit code 2 for a trace it cannot read.
    Trace {
        /// The trace (a blktrace capture by its device, `dir/sdb`, or any of its per-CPU files).
        file: PathBuf,
        /// Print the figures as JSON (the trace's statistics, its format and what was left out).
        #[arg(long)]
        json: bool,
    },
    /// List the stored runs: id, date, label, plan, host, targets, status, maximum per workload.
    Runs {
        #[command(flatten)]
        db: DbArgs,
        /// Print the list as JSON (an array, one object per run, oldest first) for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Print the shell completion script for bash, zsh, fish, elvish or powershell
    /// (e.g. `iocurve completions bash > /etc/bash_completion.d/iocurve`).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write the man pages (iocurve.1 and one per subcommand, from the same option table as
    /// `--help`) into a directory, or print iocurve.1 without -o.
    Man {
        /// Directory to write iocurve.1, iocurve-run.1, … into.
        #[arg(short = 'o', long = "output", value_name = "DIR")]
        output: Option<PathBuf>,
    },
    /// Print a stored run's summary, as printed after the run (also for killed runs).
    Show {
        /// Run id (see `iocurve runs`).
        run: i64,
        #[command(flatten)]
        db: DbArgs,
        #[command(flatten)]
        sla: SlaArgs,
    },
    /// Compare stored runs with a baseline: per workload, the change of throughput and latency
    /// in percent ("809'000 IOPS -> 431'000 IOPS, -47 %").
    Compare {
        /// The baseline run id.
        baseline: i64,
        /// Runs to compare with it.
        #[arg(required = true)]
        runs: Vec<i64>,
        /// Which point of each workload to compare.
        #[arg(long, value_enum, default_value = "maximum")]
        at: AtArg,
        /// The throughput loss the change is expected to bring, in percent (75 for 3 of 4
        /// controllers removed): each change is set against it ("-61 % (expected -75 %: 14
        /// points better)").
        #[arg(long = "expected-loss", value_name = "PCT", value_parser = parse_pct)]
        expected_loss: Option<f64>,
        #[command(flatten)]
        db: DbArgs,
        #[command(flatten)]
        sla: SlaArgs,
    },
    /// Write the HTML report of stored runs: one self-contained file (charts, tables, no network
    /// needed). Several runs make a comparison report against the first.
    Report {
        /// Run ids (see `iocurve runs`); the first is the baseline of a comparison.
        #[arg(required = true)]
        runs: Vec<i64>,
        /// Where to write the report.
        #[arg(short = 'o', long = "output", value_name = "FILE.html")]
        output: PathBuf,
        #[command(flatten)]
        db: DbArgs,
        #[command(flatten)]
        sla: SlaArgs,
    },
    /// Export a stored run: json (the same document as `run --json`), csv (steps to FILE, samples
    /// to FILE's name with `-samples`), fio-dir (a directory of fio JSON files, one per step, as
    /// fio-plot reads them), fio-json (fio's JSON layout in one file, one job per step),
    /// histograms (every recorded latency bucket per step, merged and per host, as CSV) or
    /// problems (every problem of the final verification pass, as CSV).
    Export {
        /// Run id (see `iocurve runs`).
        run: i64,
        /// Output format.
        #[arg(long, value_enum)]
        format: ExportFormat,
        /// Where to write.
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: PathBuf,
        #[command(flatten)]
        db: DbArgs,
        #[command(flatten)]
        sla: SlaArgs,
    },
    /// Write every block of the targets once (large sequential writes, many in flight, with the
    /// data pattern), so that backend tests measure allocated, steady-state storage. Resumes an
    /// interrupted pass.
    Precondition(PreconditionArgs),
    /// Serve steps for a coordinator (`run --hosts`) on this host's targets: gRPC over TLS, a
    /// token on every call, only targets the --allow list permits, the write-safety rules
    /// applied here.
    Agent(AgentArgs),
    /// Write the deployment files of a platform for this binary: `iocurve deploy kubernetes`.
    Deploy {
        #[command(subcommand)]
        command: DeployCommand,
    },
    /// Certificates for a test cluster: `iocurve certs init DIR`.
    Certs {
        #[command(subcommand)]
        command: CertsCommand,
    },
    /// Read back every block a verifying run wrote and check it against the last acknowledged
    /// write: lost, corrupted (torn) and misplaced blocks, with the first examples (every one
    /// with --problems). Exit code 4 when it finds any; 2 for a missing, damaged or busy map.
    Verify(VerifyArgs),
    /// The arithmetic around published benchmarks: RAID group IOPS, link throughput and use,
    /// the speed-up lower latency buys, the data reduction to expect, mirrored writes, the
    /// throughput at a latency, what a throughput costs.
    Size {
        #[command(subcommand)]
        command: SizeCommand,
    },
    /// Show what a storage array would make of the data iocurve writes: compression ratio (zstd
    /// and lz4 at their fast levels, block by block) and dedupe ratio, expected against achieved.
    Datacheck {
        /// Block size (default 4k).
        #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
        bs: Option<u64>,
        /// How much data to generate (default 256m).
        #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
        size: Option<u64>,
        /// Measure this file or device instead (e.g. a target after a run that wrote it fully).
        #[arg(long, value_name = "PATH")]
        file: Option<PathBuf>,
        #[command(flatten)]
        data: DataFlags,
    },
    /// Mark an event of a run ("controller B pulled"): sent to the run running now on this host
    /// (from another terminal; only your own runs take it), or, with --at or --events, added to
    /// a stored run. Marks are drawn on every timeline of the report, listed by `show`, in the
    /// JSON and in live metrics.
    #[command(after_help = MARK_HELP)]
    Mark {
        /// What happened: one line, at most 200 characters.
        #[arg(required_unless_present = "events")]
        text: Option<String>,
        /// The run: which of the runs running now on this host (when several), or the stored run
        /// --at and --events add to.
        #[arg(long, value_name = "ID")]
        run: Option<i64>,
        /// When it happened, for a stored run: `2026-11-30T04:12:03Z` (or with an offset),
        /// `+SECONDS` after the run's start, `@SECONDS` since 1970.
        #[arg(long, value_name = "TIME", requires = "run", allow_hyphen_values = true)]
        at: Option<String>,
        /// A file of events to add to the stored run --run, one a line: its time (as --at),
        /// then its text, apart by a space, tab or comma; `#` comments.
        #[arg(long, value_name = "FILE", requires = "run", conflicts_with_all = ["text", "at"])]
        events: Option<PathBuf>,
        /// The UTC offset of the times written without one (`+01:00`, `-05:00`): an array's
        /// log in local time.
        #[arg(long, value_name = "OFFSET", allow_hyphen_values = true)]
        utc_offset: Option<String>,
        /// Seconds added to every time read: the run's clock minus the clock that wrote the
        /// times (a log whose clock ran 2.5 s ahead of the coordinator's: -2.5).
        #[arg(long, value_name = "S", default_value_t = 0.0, allow_hyphen_values = true)]
        shift_s: f64,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Store the array's own figures beside a run: a CSV its GUI or CLI exported (a time column,
    /// then any columns: controller CPU, cache hit ratio, back-end MB/s …), drawn under the
    /// run's timeline in the report; with --iops or --mbps every step is set against the
    /// array's front-end figure over the same seconds. A column imported again is replaced.
    #[command(after_help = ARRAY_HELP)]
    Array {
        /// The run (see `iocurve runs`).
        #[arg(long, value_name = "ID")]
        run: i64,
        /// The CSV: a header naming the columns, a line per moment (`,`, `;` or tab apart).
        file: PathBuf,
        /// The column of the times (default: the first): RFC 3339, `+SECONDS` after the run's
        /// start, `@SECONDS` or Unix seconds.
        #[arg(long, value_name = "NAME")]
        time_column: Option<String>,
        /// The column of the array's front-end IOPS: each step's IOPS is set against it.
        #[arg(long, value_name = "COLUMN")]
        iops: Option<String>,
        /// The column of the array's front-end MB/s (10^6 bytes): each step's MB/s against it.
        #[arg(long, value_name = "COLUMN")]
        mbps: Option<String>,
        /// The UTC offset of times written without one (`+01:00`).
        #[arg(long, value_name = "OFFSET", allow_hyphen_values = true)]
        utc_offset: Option<String>,
        /// Seconds added to every time: the run's clock minus the array's (an array clock 2.5 s
        /// ahead: -2.5).
        #[arg(long, value_name = "S", default_value_t = 0.0, allow_hyphen_values = true)]
        shift_s: f64,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Delete a stored run and everything recorded for it.
    Delete {
        /// Run id (see `iocurve runs`).
        run: i64,
        #[command(flatten)]
        db: DbArgs,
    },
}

const ARRAY_HELP: &str = "Examples:
  iocurve array --run 12 dorado-perf.csv --iops \"Total IOPS\" --utc-offset +01:00
  iocurve array --run 12 ctrl.csv --time-column Timestamp --mbps \"FE MB/s\" --shift-s -2.5

The times are put on the run's clock (the coordinator's): give the array's offset from it with
--shift-s (e.g. from `chronyc tracking` or an NTP query of both); a step is compared over its
measured seconds without the first and the last (EDGE 1 s), so an offset below a second does
not mix steps.";

const MARK_HELP: &str = "Examples:
  iocurve mark \"controller B pulled\"                      the run running now
  iocurve mark --run 12 --at 2026-11-30T04:12:03Z \"controller B pulled\"
  iocurve mark --run 12 --at +312.5 \"rebuild started\"     312.5 s after the run began
  iocurve mark --run 12 --events array-events.log --utc-offset +01:00

The running run stores a mark as it comes, on its own clock (the coordinator's). It listens on
a socket in $XDG_RUNTIME_DIR/iocurve (else /tmp/iocurve-UID), mode 0700, and takes marks only
from your user; from another host: ssh COORDINATOR iocurve mark TEXT.";

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ExportFormat {
    /// The full result document, as `run --json` writes it.
    Json,
    /// Steps and samples as CSV (columns in the README).
    Csv,
    /// One fio --output-format=json file per step, in the directory layout of fio-plot's
    /// bench-fio (OUTPUT/WORKLOAD/BS/RW-IODEPTH-NUMJOBS.json), with the step's per-second fio
    /// logs beside it (RW-iodepth-QD-numjobs-N_iops.1.log, _lat, _bw; not for mixed
    /// workloads) for fio-plot's timeline (-g): point fio-plot's -i at OUTPUT/WORKLOAD/BS.
    FioDir,
    /// fio's --output-format=json layout in one file, one job per step (tools that add a
    /// file's jobs up, as fio-plot does, misread it: use fio-dir for those).
    FioJson,
    /// Every step's recorded latency histogram as CSV rows (latency_ns, count), merged and per
    /// host: for percentiles of your own.
    Histograms,
    /// Every second's latency histogram as CSV (a row per bucket: lat_from_ns, lat_to_ns,
    /// count, and the second's slowest I/O), every direction together: for per-second
    /// percentiles of your own.
    Seconds,
    /// Each target's per-second figures in every step as CSV (target, its LUN, IOPS, MB/s,
    /// latency, errors): per path and per LUN during a failover.
    Targets,
    /// Every problem the run's final verification pass (`--verify-final`) found, as CSV: the
    /// same columns as `iocurve verify --problems`.
    Problems,
    /// The key figures of every workload as CSV (speed, optimum, maximum, the second value,
    /// min latency, SLA maximum; block size and read share beside them): a row per workload,
    /// for a spreadsheet's block size × read share pivot.
    Overview,
    /// vdbench's flatfile.html layout (plain text: a header of column names, then a line per
    /// interval and an avg_1-N line per step, whitespace-separated) for vdbench's parseflat
    /// and the tools vdbench users have; columns in the README.
    Flatfile,
}

/// How `run --launch` starts agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LaunchHow {
    /// Over OpenSSH (`--ssh` names the command).
    Ssh,
    /// With srun, inside the Slurm allocation this runs in (salloc, sbatch): an agent per node
    /// of the allocation (per task when the job asked for tasks), or on --hosts among its nodes
    /// (`--srun` names the command).
    Slurm,
    /// Agents already waiting in Kubernetes pods (`deploy kubernetes --indexed`, `iocurve agent
    /// --enrol`): each pod shows its service-account token, checked against --pod-keys, and
    /// gets this run's credentials; --hosts names the pods' DNS names, --client-cert and
    /// --client-key the certificate their --client-ca trusts.
    Pods,
}

/// How `--relay-every N` groups the hosts of a launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RelayBy {
    /// N hosts at a time, in the order given.
    Order,
    /// Each leaf switch's hosts apart (Slurm's tree topology, `scontrol show topology`), N at
    /// a time: a relay drives only agents behind its own switch. With --launch slurm.
    Switch,
}

/// What losing an agent mid-run does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HostLoss {
    /// The other hosts carry on; the step is flagged `host_lost`.
    Continue,
    /// End the run (exit code 1), keeping what finished.
    Abort,
}

/// The point of each workload that `compare` uses.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum AtArg {
    /// The first step (1 worker): the latency of a lone request.
    Speed,
    /// The step with the highest throughput.
    Maximum,
    /// The last step up to which throughput grew faster than latency.
    Optimum,
    /// The best step within the SLA bounds (--sla-mean-ms / --sla-p99-ms or the plans').
    Sla,
}

/// SLA bounds: the SLA maximum is the highest throughput whose latency stays within them (a
/// latency equal to the bound counts as within).
#[derive(Debug, Args, Default)]
pub struct SlaArgs {
    /// SLA bound on mean latency in ms (overrides the plan's `sla_mean_ms`).
    #[arg(long = "sla-mean-ms", value_name = "MS", value_parser = parse_positive_ms)]
    pub mean_ms: Option<f64>,
    /// SLA bound on p99 latency in ms (overrides the plan's `sla_p99_ms`).
    #[arg(long = "sla-p99-ms", value_name = "MS", value_parser = parse_positive_ms)]
    pub p99_ms: Option<f64>,
}

fn parse_hold(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=3600.0).contains(&v) => Ok(v),
        _ => Err(format!("`{s}` is not 0 to 3600 seconds")),
    }
}

fn parse_positive_ms(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("`{s}` is not a positive number of milliseconds")),
    }
}

/// The live metrics endpoint (`run` and `agent`).
#[derive(Debug, Args, Default)]
pub struct MetricsArgs {
    /// Serve live metrics for Prometheus on ADDR: `GET /metrics`, OpenMetrics text, figures
    /// only (nothing controls a run through it). A bare port (9464) listens on 127.0.0.1 only;
    /// give 0.0.0.0:9464 to be scraped from other hosts.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,

    /// With --metrics: scrapes must bring this token (`Authorization: Bearer TOKEN`;
    /// Prometheus' `authorization: {credentials_file: FILE}`), a read-only token of its own.
    #[arg(long = "metrics-token-file", value_name = "FILE", requires = "metrics")]
    pub metrics_token_file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct DbArgs {
    /// Results database (SQLite). Every run is stored there as it goes.
    #[arg(long, env = "IOCURVE_DB", default_value = iocurve_store::DEFAULT_DB, value_name = "FILE")]
    pub db: PathBuf,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Plan file (TOML). Without it, --suite (default: quick) runs.
    pub plan: Option<PathBuf>,

    /// Built-in suite to run instead of a plan file (see `iocurve suites`).
    #[arg(long, conflicts_with = "plan")]
    pub suite: Option<String>,

    /// Every host's links to the storage, e.g. "2x32G FC" or "4x25GbE" (plan key `links`, which
    /// this replaces; a `[[hosts]] links` entry still sets that host's own): the summary and the report give the maximum's share
    /// of them ("82 % of the host's links"; on several hosts, the busiest host's share). Types: 8G/16G/32G/64G FC, 10G/25G/100G Ethernet.
    #[arg(long, value_name = "LINKS")]
    pub links: Option<String>,

    /// Print what the run would do — targets (and the scratch files it would create), hosts,
    /// workloads, steps and duration — after the checks a run makes before it opens anything,
    /// and stop: nothing is opened, written or stored (write safety, free space and memory are
    /// checked when a run opens its targets).
    #[arg(long)]
    pub dry_run: bool,

    /// Read the plan file as a fio job file. Without it, a file is taken for one when its name
    /// ends in .fio or it starts with a [section] fio's way. Each job becomes a workload of one
    /// step (numjobs workers, iodepth each; --ramp makes it a curve); options iocurve cannot
    /// honour are listed in one warning block.
    #[arg(long, requires = "plan")]
    pub fio: bool,

    /// Run a fio job file even when some of its options would change what is measured in a
    /// way iocurve cannot reproduce (thinktime, fsync, zonemode, jobs fio runs at the same
    /// time, …): they are listed as warnings instead of refused.
    #[arg(long, requires = "plan")]
    pub fio_lenient: bool,

    /// Target file, block device or glob; repeatable; replaces the plan's targets. A path that
    /// does not exist is created as a scratch file of --size. Default: ./iocurve-scratch.dat.
    #[arg(long = "target", value_name = "PATH")]
    pub targets: Vec<String>,

    /// Size of scratch files created for targets that do not exist (default 1g, less when the
    /// disk has less room).
    #[arg(long, value_name = "SIZE", value_parser = parse_scratch_size_arg)]
    pub size: Option<u64>,

    /// Keep scratch files after the run (a later run reuses and may write them again).
    #[arg(long)]
    pub keep: bool,

    /// Allow writing to this device or file although it carries a signature (filesystem,
    /// volume manager, RAID, partition table) or is an existing file iocurve did not create;
    /// repeatable; name it exactly. A mounted, swap, held or busy target is never written.
    #[arg(long = "allow-write", value_name = "PATH")]
    pub allow_write: Vec<PathBuf>,

    /// The workload keys as flags (`--qd`, `--bs`, `--ramp`, …): iocurve_plan::options.
    #[command(flatten)]
    pub flags: WorkloadFlags,

    /// Run on these agents (`iocurve agent`) at once instead of this host, comma-separated
    /// HOST:PORT; every agent uses the plan's targets on its own host. With --launch: the hosts
    /// to start agents on, as ranges too (`load[01-16].lab`, `node[1-4,7]`).
    #[arg(long, value_name = "HOST:PORT,...")]
    pub hosts: Vec<String>,

    /// Start an agent on every host of --hosts (or --hosts-file, or the plan's [[hosts]])
    /// first, run, then stop them: `ssh` through your own OpenSSH (keys, agent, ~/.ssh/config;
    /// no password prompts); `slurm` with srun inside an allocation (an agent per node, per
    /// task when the job asked for tasks). Credentials are made for this run only; nothing stays on the hosts.
    #[arg(long, value_enum, value_name = "HOW")]
    pub launch: Option<LaunchHow>,

    /// With --launch: the hosts, one per line (ranges allowed; `#` comments).
    #[arg(long = "hosts-file", value_name = "FILE", requires = "launch", conflicts_with = "hosts")]
    pub hosts_file: Option<PathBuf>,

    /// With --launch ssh: the ssh command and its options, split at spaces (e.g.
    /// `ssh -F lab.conf -l root`).
    #[arg(long, env = "IOCURVE_SSH", default_value = "ssh", value_name = "COMMAND")]
    pub ssh: String,

    /// With --launch slurm: the srun command and its options, split at spaces (e.g.
    /// `srun --partition=io`).
    #[arg(long, env = "IOCURVE_SRUN", default_value = "srun", value_name = "COMMAND")]
    pub srun: String,

    /// With --launch: the iocurve a host may have, a name on its PATH or a path (default: iocurve
    /// on its PATH over ssh; this binary's own path with slurm, as on a shared filesystem). Used
    /// when it is this very build (same SHA-256), or on another machine architecture the same
    /// version; otherwise this binary is copied there (checked by its SHA-256 before it runs).
    #[arg(long = "remote-binary", value_name = "PATH", requires = "launch")]
    pub remote_binary: Option<String>,

    /// With --launch: the port every agent listens on (default: a free one each), e.g. the
    /// one a firewall lets through.
    #[arg(long = "launch-port", default_value_t = 0, value_name = "PORT", requires = "launch")]
    pub launch_port: u16,

    /// With --launch pods: the cluster's service-account keys, as `kubectl get --raw
    /// /openid/v1/jwks` prints them (a pod's token must be signed by one of them).
    #[arg(long = "pod-keys", value_name = "FILE", requires = "launch")]
    pub pod_keys: Option<PathBuf>,

    /// With --launch pods: the issuer the pods' tokens must name (`kubectl get --raw
    /// /.well-known/openid-configuration`, its `issuer`); without it any issuer of --pod-keys.
    #[arg(long = "pod-issuer", value_name = "URL", requires = "pod_keys")]
    pub pod_issuer: Option<String>,

    /// With --launch: hours the run's credentials are valid; agents end then at the latest.
    #[arg(long = "launch-valid-h", default_value_t = 24.0, value_name = "H", requires = "launch")]
    pub launch_valid_h: f64,

    /// Drive the hosts through relays, one per N hosts in the order given (or per leaf switch,
    /// N at a time, with --relay-by switch) (issue 46; about 32
    /// is the design's size). With --launch ssh or slurm the first host of each group also runs
    /// a relay agent; with --relays the relays are agents started with `iocurve agent --relay`
    /// (with --launch pods: relay pods, `agent --enrol --relay`). Each
    /// drives its group for this run under a delegation the coordinator mints for it and merges
    /// its intervals exactly. Closed-loop and rate steps, with injected faults and uneven hosts
    /// (workers_scale) if any, host-count sweeps of whole groups, replays, --write-iolog,
    /// --precondition and --verify-final.
    #[arg(long = "relay-every", value_name = "N", value_parser = clap::value_parser!(u32).range(2..=256))]
    pub relay_every: Option<u32>,

    /// With --relay-every N and --launch slurm: `switch` groups each leaf switch's nodes apart
    /// (Slurm's tree topology: TopologyPlugin=topology/tree and topology.conf), N at a time, so
    /// that a relay drives only agents behind its own switch; `order` (the default) takes N
    /// hosts at a time in their order.
    #[arg(long = "relay-by", value_enum, default_value_t = RelayBy::Order, value_name = "HOW", requires = "relay_every")]
    pub relay_by: RelayBy,

    /// With --relay-every N and agents started by hand: the relays (HOST:PORT, comma-separated
    /// or repeated), agents started with `iocurve agent --relay`, the first driving the first N
    /// hosts, the next the next N. The hosts need per-host credentials (`certs add-host`), the
    /// agents --client-ca, the coordinator --token-per-host and --client-cert. With --launch
    /// pods: the relay pods' DNS names (ranges too), agents started with `--enrol --relay`.
    #[arg(long = "relays", value_name = "HOST:PORT,...", value_delimiter = ',', requires = "relay_every")]
    pub relays: Vec<String>,

    /// With --relays: the cluster CA's key (`certs init` keeps it as ca.key), which mints each
    /// relay's certificate for the run; it stays in the coordinator. Default: ca.key beside --ca.
    #[arg(long = "relay-ca-key", value_name = "FILE", requires = "relays")]
    pub relay_ca_key: Option<PathBuf>,

    /// With --relay-every N: the hosts whose every interval the coordinator keeps, as it keeps
    /// every host's without relays (per-second timeline, per-interval rows in the results
    /// database), instead of one row per step summed up. Comma-separated: a host's HOST:PORT,
    /// its name, its hostname, or `all`. Each costs the coordinator a host's intervals, held
    /// until the step's end: ask for the hosts you look into, not for thousands.
    #[arg(long = "host-intervals", value_name = "HOST,...", value_delimiter = ',', requires = "relay_every")]
    pub host_intervals: Vec<String>,

    /// The agents' token (with --hosts).
    #[arg(long = "token-file", env = "IOCURVE_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<PathBuf>,

    /// CA that signed the agents' certificates (with --hosts).
    #[arg(long, env = "IOCURVE_CA", value_name = "FILE")]
    pub ca: Option<PathBuf>,

    /// Coordinator certificate, for agents that require mutual TLS.
    #[arg(long = "client-cert", value_name = "FILE")]
    pub client_cert: Option<PathBuf>,

    /// Coordinator key, with --client-cert.
    #[arg(long = "client-key", value_name = "FILE")]
    pub client_key: Option<PathBuf>,

    /// Talk to the agents without TLS (the token travels in plain text).
    #[arg(long)]
    pub insecure: bool,

    /// The name every agent's certificate must carry, instead of the host name or address each
    /// is reached at (e.g. iocurve-agent, for the one agent certificate of `certs init` on every
    /// host; `certs add-host NAME` issues one per host, which needs no --tls-name).
    #[arg(long = "tls-name", value_name = "NAME")]
    pub tls_name: Option<String>,

    /// Send each agent the token of its own host (`certs add-host` writes it to
    /// hosts/NAME/token), derived from --token-file, instead of --token-file itself: a token
    /// taken from one load host then opens no other.
    #[arg(long = "token-per-host")]
    pub token_per_host: bool,

    /// Refuse agents whose clock is further off than this, in ms (with --hosts; more than
    /// 50 ms gets a warning). Steps start together whatever the clocks say; clocks this far
    /// apart are not synchronized and may be stepped mid-run.
    #[arg(long = "max-skew-ms", default_value_t = 1000, value_name = "MS")]
    pub max_skew_ms: u64,

    /// With --hosts: keep trying agents that cannot be reached yet for up to S seconds before
    /// counting them lost (agents started beside the coordinator, as in a Kubernetes Job).
    #[arg(long = "wait-for-agents-s", default_value_t = 0, value_name = "S")]
    pub wait_for_agents_s: u64,

    /// What losing an agent mid-run does: continue (the others carry on; the step is flagged)
    /// or abort (end the run, exit code 1).
    #[arg(long = "on-host-loss", value_enum, default_value = "continue")]
    pub on_host_loss: HostLoss,

    /// Where verifying runs keep the map of acknowledged writes (saved at every interval end,
    /// with a checksum; a later run on the same targets continues with it; one run at a time:
    /// locked through FILE.lock).
    #[arg(long = "verify-map", default_value = "iocurve-verify.map", value_name = "FILE")]
    pub verify_map: PathBuf,

    /// After the workloads, read back every written block and check it (verifying runs); the
    /// result is stored with the run, every problem too (`export --format problems`).
    #[arg(long = "verify-final")]
    pub verify_final: bool,

    /// Journal every verifying write durably before it is issued (FILE.journal beside the map;
    /// one flush per batch of writes), so that `iocurve verify` after a crash of this host (a
    /// power cut, a kernel panic) explains the blocks being written: old, new or torn, not lost.
    /// Costs a flush of the journal's filesystem per batch: measure with it off.
    #[arg(long = "verify-journal")]
    pub verify_journal: bool,

    /// Run only the workloads whose name contains TEXT (e.g. random-read, backend).
    #[arg(long, value_name = "TEXT")]
    pub workload: Option<String>,

    /// Precondition every target before the workloads (plan key `precondition = true`); targets
    /// already preconditioned at their size are skipped.
    #[arg(long)]
    pub precondition: bool,

    /// Write the full result as JSON to FILE (also when the run is interrupted).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Write every I/O the run issues, on every host, to FILE as a fio version 3 I/O log (one
    /// file per target, times since the first step's start): replay the run with
    /// `iocurve run --replay FILE` or `fio --read_iolog=FILE`. Steps are added as they end.
    #[arg(long = "write-iolog", value_name = "FILE")]
    pub write_iolog: Option<PathBuf>,

    #[command(flatten)]
    pub metrics: MetricsArgs,

    /// With --metrics: keep serving this many seconds after the run ends, so that the last
    /// scrape sees the final figures (Ctrl-C ends the wait).
    #[arg(long = "metrics-hold-s", value_name = "S", default_value_t = 5.0, value_parser = parse_hold)]
    pub metrics_hold_s: f64,

    /// Name of the configuration under test ("L1C3S4, 3 of 4 controllers"), shown wherever runs
    /// are listed.
    #[arg(long, default_value = "", value_name = "TEXT")]
    pub label: String,

    /// Results database (SQLite); the run is stored there as it goes.
    #[arg(long, env = "IOCURVE_DB", default_value = iocurve_store::DEFAULT_DB, value_name = "FILE")]
    pub db: PathBuf,

    #[command(flatten)]
    pub sla: SlaArgs,
}

#[derive(Debug, Subcommand)]
pub enum SizeCommand {
    /// Front-end IOPS of a RAID group, or the disks it needs for a target.
    #[command(
        after_help = "IOPS = n·I / (R + P·W): n disks of I IOPS each, read share R, write share W = 1 − R, write penalty P (RAID 0: 1; RAID 1/10 and RAID-DP: 2; RAID 5/50: 4; RAID 6/60: 6). With --iops T: n = ⌈T·(R + P·W) / I⌉.

Example: iocurve size raid --level 6 --disks 16 --disk-iops 200 --read-pct 70  →  1'280 IOPS"
    )]
    Raid {
        /// RAID level: 0, 1, 10, 5, 50, 6, 60 or dp (RAID-DP).
        #[arg(long, value_parser = parse_raid)]
        level: iocurve_analysis::sizing::Raid,
        /// Disks in the group (all of them, parity included).
        #[arg(long, required_unless_present = "iops", conflicts_with = "iops")]
        disks: Option<u32>,
        /// Instead of --disks: the front-end IOPS wanted; prints the disks needed.
        #[arg(long, value_parser = parse_positive)]
        iops: Option<f64>,
        /// IOPS one disk delivers (e.g. 200 for 15k rpm, 80 for 7.2k rpm).
        #[arg(long = "disk-iops", value_parser = parse_positive)]
        disk_iops: f64,
        /// Share of reads in percent.
        #[arg(long = "read-pct", value_parser = parse_pct)]
        read_pct: f64,
    },
    /// Throughput of N links: as sold, and usable per direction.
    #[command(
        after_help = "Fibre Channel carries its standard's payload rate per direction (8G: 800 MB/s, 16G: 1,600, 32G: 3,200, 64G: 6,400); Ethernet TCP/IPv4 with MTU 1500 carries 1460 of every 1538 bytes on the wire (94.9 %). As sold: Gbit/s × 2 directions.

Example: iocurve size links 32 32G  →  256 GB/s as sold (32 Gbit/s × 2 directions), 102 GB/s usable per direction"
    )]
    Links {
        /// How many links (1 to 1024).
        #[arg(value_parser = clap::value_parser!(u32).range(1..=1024))]
        count: u32,
        /// The link type: 8G, 16G, 32G, 64G (FC), 10GbE, 25GbE, 100GbE.
        link: String,
        /// MB/s (decimal, one direction) the links carry: their share of the nominal rate per
        /// direction and of the usable payload.
        #[arg(long, value_name = "MBPS", value_parser = parse_positive)]
        carrying: Option<f64>,
        /// A block size (e.g. 256k): the time one block takes to cross one link at its usable
        /// payload rate — a floor under any latency through it. Payload time only, without
        /// switch, protocol and array latency, which is why vendors' rules of thumb are higher.
        #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
        block: Option<u64>,
    },
    /// Synchronously mirrored writes: what the arrays process for a front-end write load.
    #[command(
        after_help = "Processed = front-end writes × (1 + mirrored share): a synchronously mirrored write is written by the array that takes it and by its mirror before it is acknowledged. Reads are served once.

With --run: the run's maximum write throughput (the writes of the workload's maximum step: IOPS for random, MB/s for sequential workloads).

Example: iocurve size replication --mirrored-pct 50 --iops 3500000  →  5'250'000 write IOPS",
        group(clap::ArgGroup::new("writes").required(true).args(["iops", "mbps", "run"]))
    )]
    Replication {
        /// Share of the writes that are mirrored synchronously, in percent.
        #[arg(long = "mirrored-pct", value_parser = parse_pct)]
        mirrored_pct: f64,
        /// Front-end write IOPS (a plain number: 3500000, or 3.5e6).
        #[arg(long, value_parser = parse_positive)]
        iops: Option<f64>,
        /// Front-end write throughput, MB/s (decimal).
        #[arg(long, value_parser = parse_positive)]
        mbps: Option<f64>,
        /// Take the front-end writes from this stored run's maximum (see `iocurve runs`).
        #[arg(long)]
        run: Option<i64>,
        /// With --run: the workload (a part of its name; needed when the run has several
        /// writing workloads).
        #[arg(long, requires = "run")]
        workload: Option<String>,
        #[command(flatten)]
        db: DbArgs,
    },
    /// The throughput a stored run's curve carries at a mean latency ("IOPS at 1 ms").
    #[command(
        name = "at-latency",
        after_help = "The throughput where the measured curve (its steps in ramp order) first reaches the mean latency, linear between the two steps around it: IOPS for random, MB/s for sequential workloads. The inverse of `speedup --run --at-iops`. Below the lightest step's latency nothing is known, and a latency the curve never reached has no answer (the storage was not pushed that far): both are said, exit code 2.

Example: iocurve size at-latency --run 3 --latency-ms 1"
    )]
    AtLatency {
        /// The stored run (see `iocurve runs`).
        #[arg(long)]
        run: i64,
        /// The workload (a part of its name; needed when the run has several).
        #[arg(long)]
        workload: Option<String>,
        /// The mean latency, ms.
        #[arg(long = "latency-ms", value_parser = parse_positive)]
        latency_ms: f64,
        #[command(flatten)]
        db: DbArgs,
    },
    /// What an array's throughput costs: per TB and per 1,000 IOPS, and the arrays a load needs.
    #[command(
        after_help = "Cost and power per TB (--capacity-tb) and per 1,000 IOPS, IOPS per rack unit; each figure where its inputs are given. With --load-iops: the arrays that serve the load with each at most at --headroom-pct of its maximum, ⌈load / (headroom × maximum)⌉, and their cost, power and rack units together.

With --run: the throughput is the stored run's maximum (or, --at sla, its SLA maximum) of the workload.

Example: iocurve size economics --cost 250000 --iops 1000000 --load-iops 1500000  →  3 arrays",
        group(clap::ArgGroup::new("throughput").required(true).args(["iops", "run"]))
    )]
    Economics {
        /// The array's price (any currency).
        #[arg(long, value_parser = parse_positive)]
        cost: Option<f64>,
        /// Its power draw, W.
        #[arg(long = "power-w", value_parser = parse_positive)]
        power_w: Option<f64>,
        /// Its usable capacity, TB (decimal).
        #[arg(long = "capacity-tb", value_parser = parse_positive)]
        capacity_tb: Option<f64>,
        /// The rack units it takes.
        #[arg(long = "rack-units", value_parser = parse_positive)]
        rack_units: Option<f64>,
        /// Its maximum IOPS (or take it from --run).
        #[arg(long, value_parser = parse_positive)]
        iops: Option<f64>,
        /// Take the IOPS from this stored run (see `iocurve runs`).
        #[arg(long)]
        run: Option<i64>,
        /// With --run: the workload (a part of its name; needed when the run has several).
        #[arg(long, requires = "run")]
        workload: Option<String>,
        /// With --run: which figure is the array's throughput.
        #[arg(long, value_enum, default_value = "maximum", requires = "run")]
        at: EconomicsAt,
        /// A load to serve, IOPS: how many arrays it needs.
        #[arg(long = "load-iops", value_parser = parse_positive)]
        load_iops: Option<f64>,
        /// With --load-iops: the share of each array's maximum it may run at, in percent
        /// (headroom for a failed controller, rebuilds, growth).
        #[arg(long = "headroom-pct", default_value_t = 50.0, value_parser = parse_share_pct)]
        headroom_pct: f64,
        #[command(flatten)]
        db: DbArgs,
        #[command(flatten)]
        sla: SlaArgs,
    },
    /// What lower latency buys an application that spends part of its time in I/O.
    #[command(
        after_help = "Speed-up = 1 / ((1 − f) + f / k), k = old latency / new latency, f the share of time the application waits for I/O; time saved = 1 − ((1 − f) + f / k).

With a stored run instead of --to-ms: the new latency is the measured curve's mean latency at the application's load (--at-iops), interpolated between the two steps around it.

Example: iocurve size speedup --io-share 40 --from-ms 5 --to-ms 0.25  →  38 % less time, 1.61× as fast"
    )]
    Speedup {
        /// Share of the application's time spent waiting for I/O, in percent.
        #[arg(long = "io-share", value_parser = parse_pct)]
        io_share: f64,
        /// Latency now, ms.
        #[arg(long = "from-ms", value_parser = parse_positive)]
        from_ms: f64,
        /// Latency after, ms.
        #[arg(long = "to-ms", value_parser = parse_positive, required_unless_present = "run", conflicts_with = "run")]
        to_ms: Option<f64>,
        /// Take the latency after from this stored run's curve (see `iocurve runs`).
        #[arg(long, requires = "at_iops")]
        run: Option<i64>,
        /// With --run: the workload (a part of its name; needed when the run has several).
        #[arg(long, requires = "run")]
        workload: Option<String>,
        /// With --run: the application's load, IOPS.
        #[arg(long = "at-iops", value_parser = parse_positive, requires = "run")]
        at_iops: Option<f64>,
        #[command(flatten)]
        db: DbArgs,
    },
    /// The data reduction an array should reach on iocurve's data, and how far it got.
    #[command(
        after_help = "Expected = compression × dedupe: compression 512 / random bytes per 512-byte sector (--compress 0.4: 308 random bytes, 1.66:1), dedupe as given. `iocurve datacheck` measures what compressors make of the same data.

With --run: the pattern a stored run's workload wrote, and what its data check (the engine's own data through zstd, lz4 and fixed-unit dedupe) found.

Example: iocurve size reduction --compress 0.4 --dedupe 2 --array-ratio 3.0  →  3.32:1 expected"
    )]
    Reduction {
        /// The plan's `compress` (constant share of every block, 0 to 0.99).
        #[arg(long, default_value_t = 0.0, conflicts_with = "run")]
        compress: f64,
        /// The plan's `dedupe` (written units per unique unit, 1 to 1000).
        #[arg(long, default_value_t = 1.0, conflicts_with = "run")]
        dedupe: f64,
        /// The ratio the array reports for the data (e.g. 3.1 for 3.1:1).
        #[arg(long = "array-ratio", value_parser = parse_positive)]
        array_ratio: Option<f64>,
        /// Take the data pattern from this stored run's writing workload, and put what the
        /// run's data check measured beside the expectation.
        #[arg(long)]
        run: Option<i64>,
        /// With --run: the workload (a part of its name; needed when the run has several
        /// writing workloads).
        #[arg(long, requires = "run")]
        workload: Option<String>,
        #[command(flatten)]
        db: DbArgs,
    },
}

fn parse_raid(s: &str) -> Result<iocurve_analysis::sizing::Raid, String> {
    iocurve_analysis::sizing::Raid::parse(s)
        .ok_or_else(|| format!("`{s}` is not a RAID level: 0, 1, 10, 5, 50, 6, 60 or dp"))
}

fn parse_pct(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(v) if (0.0..=100.0).contains(&v) => Ok(v),
        _ => Err(format!("`{s}` is not a percentage from 0 to 100")),
    }
}

/// A share that must leave something: above 0 up to 100.
fn parse_share_pct(s: &str) -> Result<f64, String> {
    match parse_pct(s) {
        Ok(v) if v > 0.0 => Ok(v),
        _ => Err(format!("`{s}` is not a percentage above 0 up to 100")),
    }
}

/// Which figure of a stored run `size economics` prices.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum EconomicsAt {
    /// The highest throughput.
    Maximum,
    /// The best step within the SLA bounds (--sla-mean-ms / --sla-p99-ms or the plan's).
    Sla,
}

fn parse_positive(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("`{s}` is not a positive number")),
    }
}

#[derive(Debug, Subcommand)]
pub enum CertsCommand {
    /// Write a CA, an agent certificate, a coordinator (client) certificate and a token into
    /// DIR (ca.pem, agent.pem, agent.key, client.pem, client.key, token).
    Init {
        /// Directory for the files (created if needed; must not hold them already).
        dir: PathBuf,
        /// Further host names or addresses the agent certificate is valid for (it always is for
        /// iocurve-agent, localhost and 127.0.0.1); repeatable.
        #[arg(long = "name", value_name = "NAME")]
        names: Vec<String>,
    },
    /// Issue an agent certificate for one host with the CA kept in DIR (by `certs init`):
    /// DIR/hosts/NAME/agent.pem and agent.key. The coordinator checks the name it dialled, so
    /// this certificate proves which host answers.
    AddHost {
        /// The directory `certs init` wrote.
        dir: PathBuf,
        /// The host's name (or address) as the coordinator dials it.
        name: String,
        /// Further names or addresses of the same host; repeatable.
        #[arg(long = "alias", value_name = "NAME")]
        aliases: Vec<String>,
    },
    /// Replace everything in DIR with new credentials from a new CA: the CA (ca.pem, ca.key),
    /// the shared agent certificate, the coordinator's certificate, a new token, and every
    /// host's certificate and token (hosts/NAME/), each with a new key, valid for a year, each
    /// file replaced whole. Nothing the old CA signed passes where the new files are: rotate
    /// when a key, token or host file leaked, or before the year is up, then give every agent
    /// its new ca.pem, certificate, key and token, restart it, and run the coordinator with
    /// the new files.
    Rotate {
        /// The directory `certs init` made.
        dir: PathBuf,
        /// Further names for the shared agent certificate (those given to `init` stay).
        #[arg(long = "name", value_name = "NAME")]
        names: Vec<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum DeployCommand {
    /// Kubernetes manifests: each agent a one-pod StatefulSet with a certificate and token of
    /// its own, behind a headless Service, on a raw block volume of its own (volumeMode: Block)
    /// or on --host-device paths (from a device plugin), never privileged; live metrics behind
    /// a token; NetworkPolicies (agents from the coordinator only, metrics from the scraper
    /// only); the coordinator, not root, as a Job writing its results database to a volume.
    /// The certificates and tokens come from Secrets (see the README).
    Kubernetes(K8sArgs),
}

#[derive(Debug, Args)]
pub struct K8sArgs {
    /// Write namespace.yaml, agents.yaml and coordinator.yaml into DIR (created if
    /// missing); without it they are printed as one stream.
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// The namespace of every object.
    #[arg(long, default_value = "iocurve", value_name = "NS")]
    pub namespace: String,
    /// Agents (pods of the StatefulSet); the coordinator dials each.
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub agents: u32,
    /// The container image of this iocurve (deploy/container/Containerfile builds one).
    #[arg(long, value_name = "IMAGE", default_value = concat!("iocurve:", env!("CARGO_PKG_VERSION")))]
    pub image: String,
    /// Size of each agent's raw block volume.
    #[arg(long = "volume-size", default_value = "100Gi", value_name = "QUANTITY")]
    pub volume_size: String,
    /// The storage class of the agents' volumes (the one under test); default: the
    /// cluster's default class.
    #[arg(long = "storage-class", value_name = "NAME")]
    pub storage_class: Option<String>,
    /// Use this host block device on every agent's node instead of a volume; repeatable. The
    /// pod asks a device plugin for it (resource DOMAIN/NAME, NAME the device's file name;
    /// see the README's recipe): plain Kubernetes grants a host device only to a privileged
    /// container, which these manifests never are.
    #[arg(long = "host-device", value_name = "/dev/…")]
    pub host_devices: Vec<String>,
    /// The resource domain of the device plugin that hands out --host-device (squat.ai:
    /// squat/generic-device-plugin's default).
    #[arg(long = "device-plugin-domain", default_value = "squat.ai", value_name = "DOMAIN")]
    pub device_plugin_domain: String,
    /// CPU of each agent, requested and its limit (a Kubernetes quantity: 2, 500m).
    #[arg(long = "agent-cpu", default_value = "2", value_name = "QUANTITY")]
    pub agent_cpu: String,
    /// Memory of each agent, requested and its limit; the agent refuses a step whose buffers
    /// do not fit it (it reads its cgroup's limit).
    #[arg(long = "agent-memory", default_value = "2Gi", value_name = "QUANTITY")]
    pub agent_memory: String,
    /// The namespace of the Prometheus that scrapes the agents' metrics: the only namespace
    /// the NetworkPolicy lets reach the metrics port.
    #[arg(long = "scraper-namespace", default_value = "monitoring", value_name = "NS")]
    pub scraper_namespace: String,
    /// The labels of the scraper's pods in that namespace (KEY=VALUE, comma-separated; the
    /// default is the label prometheus-operator and the Prometheus Helm chart give them).
    #[arg(long = "scraper-labels", default_value = "app.kubernetes.io/name=prometheus", value_name = "KEY=VALUE,…")]
    pub scraper_labels: String,
    /// The agents as one Indexed Job (up to 4096; Kubernetes 1.29 or later) with no Secret of
    /// theirs: the coordinator enrols each pod by its service-account token (`run --launch
    /// pods`), given the cluster's keys in the ConfigMap iocurve-cluster-keys. Without it: a
    /// StatefulSet per agent (up to 512), each with a Secret of its own.
    #[arg(long)]
    pub indexed: bool,
    /// With --indexed: the issuer the pods' tokens must name (`kubectl get --raw
    /// /.well-known/openid-configuration`, its `issuer`); without it any token the cluster's
    /// keys signed.
    #[arg(long = "pod-issuer", value_name = "URL", requires = "indexed")]
    pub pod_issuer: Option<String>,
    /// With --indexed: a relay per N agents (about 32 is the design's size), as a second Indexed
    /// Job (`iocurve-relay`, pods enrolled as the agents are) that the coordinator drives the
    /// agents through (`run --relay-every N --relays …`).
    #[arg(long = "relay-every", value_name = "N", value_parser = clap::value_parser!(u32).range(2..=256), requires = "indexed")]
    pub relay_every: Option<u32>,
}

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Address and port to listen on, e.g. 0.0.0.0:7420 (with --launched default: a free port,
    /// which the agent prints, on every address, IPv6 too where the host has it).
    #[arg(long, value_name = "ADDR:PORT", required_unless_present = "launched")]
    pub listen: Option<std::net::SocketAddr>,
    /// File holding the token every coordinator call must carry.
    #[arg(
        long = "token-file",
        env = "IOCURVE_TOKEN_FILE",
        value_name = "FILE",
        required_unless_present_any = ["launched", "enrol"]
    )]
    pub token_file: Option<PathBuf>,
    /// Started by `run --launch` (SSH, srun) for one run: reads its certificate, key, token and
    /// the coordinator's CA as one line on standard input (nothing on disk; mutual TLS always),
    /// prints `iocurve-launched port=PORT pid=PID`, serves that one coordinator and ends when
    /// its connection closes, when standard input ends (the coordinator or the channel is
    /// gone), when the credentials expire, or when no coordinator came within 60 s.
    #[arg(long, conflicts_with_all = ["token_file", "tls_cert", "tls_key", "client_ca", "insecure"])]
    pub launched: bool,
    /// With --launched: remove the agent's own binary, and the `iocurve-launch.*` directory
    /// the coordinator copied it into, as soon as it runs (the process keeps running from
    /// memory), so that nothing copied is left on the host even when the agent is killed.
    #[arg(long = "remove-binary", requires = "launched")]
    pub remove_binary: bool,
    /// In a Kubernetes pod (`deploy kubernetes --indexed`): the pod's projected
    /// service-account token (audience `iocurve`). The agent waits on --listen for a
    /// coordinator holding a certificate of --client-ca (`run --launch pods`), shows it this
    /// token, gets the run's certificate and token in return, serves that one run and ends
    /// with it. No key or token of the agent's is in the pod.
    #[arg(long, value_name = "TOKEN_FILE", requires_all = ["client_ca", "listen"], conflicts_with_all = ["token_file", "tls_cert", "tls_key", "insecure", "launched", "simulate"])]
    pub enrol: Option<PathBuf>,
    /// With --enrol: seconds to wait for a coordinator before ending with an error.
    #[arg(long = "enrol-wait-s", default_value_t = 3600, value_name = "S", requires = "enrol")]
    pub enrol_wait_s: u64,
    /// Remove the scratch files this agent creates when it ends (as a local run does without
    /// --keep); without it they stay for later runs.
    #[arg(long = "remove-scratch")]
    pub remove_scratch: bool,
    /// The agent's TLS certificate (PEM), e.g. agent.pem from `iocurve certs init`.
    #[arg(long = "tls-cert", value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// The agent's TLS key (PEM).
    #[arg(long = "tls-key", value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// Require coordinators to present a certificate signed by this CA (mutual TLS).
    #[arg(long = "client-ca", value_name = "FILE")]
    pub client_ca: Option<PathBuf>,
    /// Absolute paths (globs) this agent may use as targets; repeatable. Matched on the path
    /// the kernel resolves (after `..` and symlinks); `*` stays within one directory, `**`
    /// crosses them; files with several hard links are refused. Nothing else is touched.
    #[arg(long = "allow", value_name = "PATH-GLOB")]
    pub allow: Vec<String>,
    /// Bytes of scratch files this agent may create in its life (e.g. 20g). Default: each
    /// scratch file may take at most half the free space of its filesystem.
    #[arg(long = "max-scratch", value_name = "SIZE", value_parser = parse_budget_arg)]
    pub max_scratch: Option<u64>,
    /// Allow writing to this device or file although it carries a signature (filesystem,
    /// volume manager, RAID, partition table) or is an existing file iocurve did not create;
    /// repeatable; name it exactly. A mounted, swap, held or busy target is never written.
    #[arg(long = "allow-write", value_name = "PATH")]
    pub allow_write: Vec<PathBuf>,
    /// Listen without TLS (the token travels in plain text).
    #[arg(long)]
    pub insecure: bool,
    /// Seconds without the coordinator (connection closed, or keep-alive pings unanswered)
    /// after which a running step stops all I/O.
    #[arg(long = "lease-s", default_value_t = 10.0, value_name = "S")]
    pub lease_s: f64,
    /// Seconds after which the coordinator that owns this agent lets go of it if it made no
    /// call that acts (targets, step, pass, Stop) while nothing ran; another coordinator may
    /// then take it.
    #[arg(long = "claim-expiry-s", default_value_t = 60.0, value_name = "S")]
    pub claim_expiry_s: f64,
    /// Append the audit trail to this file too (one JSON object per line: every call that
    /// acts with its outcome, every refusal, the peer's address and certificate). It always
    /// goes to standard error, each line starting `iocurve-audit `.
    #[arg(long = "audit-log", value_name = "FILE")]
    pub audit_log: Option<PathBuf>,
    /// Where this agent keeps its verification maps (one per set of targets and block size,
    /// `iocurve-verify-HOST-HASH.map`, locked while in use); default: the directory it runs in.
    #[arg(long = "state-dir", default_value = ".", value_name = "DIR")]
    pub state_dir: PathBuf,
    /// Serve N simulated agents from this one process, to measure a coordinator (and its
    /// network) at hundreds or thousands of hosts on one machine: agent K listens on --listen's
    /// port + K (port 0: a free port each), keeps its maps in --state-dir/sim-K, calls itself
    /// HOST-simK, runs its clock up to ±10 ms off this host's, and models its steps instead of
    /// running I/O (latency --simulate-latency-us at one I/O outstanding, growing past 8; IOPS ×
    /// mean latency = outstanding), flagged `simulated` in every result. Everything else — TLS,
    /// token, claims, targets (allocated, never written), audit — is the real agent's. Closed-loop
    /// steps of one block size on one target only: a rate, a replay, workloads at once,
    /// verification, --write-iolog, faults, trims, block-size mixes, think time, several
    /// targets, preconditioning and verification passes are refused.
    /// (0 with --simulate-relays: the relays alone, the agents served by another process: one
    /// process holds at most its open-file limit of connections.)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=8192), conflicts_with = "launched")]
    pub simulate: Option<u32>,
    /// Serve as a relay (issue 46; docs/relays.md): a coordinator may make this agent the relay
    /// of a group of agents for one run, which it then drives (targets, steps, stops) under the
    /// delegations the coordinator minted, merging their intervals exactly. Its own targets are
    /// none while it is one. `run --launch --relay-every N` starts relays itself; `run --relays`
    /// names relays started by hand (per-host credentials from `certs add-host`, --client-ca).
    #[arg(long, conflicts_with = "simulate")]
    pub relay: bool,
    /// With --simulate: each simulated agent gets a certificate and token of its own, as a host
    /// with `certs add-host` credentials has (what relays need): issued with this CA key (the
    /// ca.key of `certs init`), the CA of --client-ca and the cluster token of --token-file.
    /// Agent K then listens at its own loopback address, 127.1.(K/250).(K%250+1), on --listen's
    /// port (its address is not used); --tls-cert and --tls-key are still given, for the
    /// process's own checks, but no simulated agent uses them.
    #[arg(long = "simulate-ca-key", value_name = "FILE", requires_all = ["simulate", "client_ca"])]
    pub simulate_ca_key: Option<PathBuf>,
    /// With --simulate-ca-key: also serve M relays (real agents started as with --relay, their
    /// own certificates too), relay R at 127.2.(R/250).(R%250+1) on --listen's port, for `run
    /// --relays` to drive the simulated agents through.
    #[arg(long = "simulate-relays", value_name = "M", requires = "simulate_ca_key", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub simulate_relays: Option<u32>,
    /// The latency a simulated agent models at one I/O outstanding, in µs (at most 1 s).
    #[arg(long = "simulate-latency-us", default_value_t = 1000, value_name = "US", requires = "simulate", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub simulate_latency_us: u64,

    #[command(flatten)]
    pub metrics: MetricsArgs,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The targets the map was made for, in the same order.
    #[arg(required = true, value_name = "TARGET")]
    pub targets: Vec<String>,
    /// The verification map the run saved.
    #[arg(long, default_value = "iocurve-verify.map", value_name = "FILE")]
    pub map: PathBuf,
    /// Write every problem found to this CSV file (target, block, offset, kind, expected and
    /// found generation, what the block holds); created before the pass.
    #[arg(long, value_name = "FILE.csv")]
    pub problems: Option<PathBuf>,
    /// Give up (exit code 1) when no read returns for this many seconds: the storage stopped
    /// answering. Ctrl-C stops the pass within about a second.
    #[arg(long = "stuck-after-s", default_value_t = iocurve_engine::PASS_STUCK_AFTER_S, value_name = "S", value_parser = parse_stuck_after)]
    pub stuck_after_s: f64,
}

fn parse_stuck_after(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.1..=86_400.0).contains(&v) => Ok(v),
        _ => Err(format!("`{s}` is not 0.1 to 86400 seconds")),
    }
}

#[derive(Debug, Args)]
pub struct PreconditionArgs {
    /// Target files or block devices; a path that does not exist is created with --size (and
    /// kept).
    #[arg(required = true, value_name = "TARGET")]
    pub targets: Vec<String>,
    /// Size of files created for targets that do not exist (default 1g).
    #[arg(long, value_name = "SIZE", value_parser = parse_scratch_size_arg)]
    pub size: Option<u64>,
    /// Size of each write (default 1m).
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
    pub bs: Option<u64>,
    /// Writes in flight per target (default 32).
    #[arg(long, value_name = "N")]
    pub qd: Option<u32>,
    /// Give up (exit code 1) when no write returns for this many seconds: the storage stopped
    /// answering. What was written is saved; the same command resumes. Ctrl-C stops the pass
    /// within about a second.
    #[arg(long = "stuck-after-s", default_value_t = iocurve_engine::PASS_STUCK_AFTER_S, value_name = "S", value_parser = parse_stuck_after)]
    pub stuck_after_s: f64,
    /// Allow writing to this device or file although it carries a signature (filesystem,
    /// volume manager, RAID, partition table) or is an existing file iocurve did not create;
    /// repeatable; name it exactly. A mounted, swap, held or busy target is never written.
    #[arg(long = "allow-write", value_name = "PATH")]
    pub allow_write: Vec<PathBuf>,
    /// The verification map of verifying runs on these targets (as `run --verify-map`): the
    /// blocks of each target this pass writes over are forgotten in it (unknown, not lost), so
    /// that the next verifying run does not call them lost. Nothing happens without the file.
    #[arg(long = "verify-map", default_value = "iocurve-verify.map", value_name = "FILE")]
    pub verify_map: PathBuf,
    /// Then write 4k random blocks (32 in flight) in rounds until the IOPS of the last 5 rounds
    /// are in steady state by the SNIA rule (range within 20 % of their mean, best-fit excursion
    /// within 10 %), or --max-rounds ran out.
    #[arg(long)]
    pub until_steady: bool,
    /// With --until-steady: seconds per round (default 60, as the specification's rounds).
    #[arg(long, value_name = "S", default_value_t = 60.0, requires = "until_steady")]
    pub round_s: f64,
    /// With --until-steady: rounds at most (default 25).
    #[arg(long, value_name = "N", default_value_t = 25, requires = "until_steady")]
    pub max_rounds: u32,
    #[command(flatten)]
    pub data: DataFlags,
    #[command(flatten)]
    pub db: DbArgs,
}

/// A size that must hold something (a block size, an amount of data): 0 is refused.
fn parse_size_arg(s: &str) -> Result<u64, String> {
    match iocurve_plan::parse_size(s)? {
        0 => Err(format!("{s} is no size: give one above zero, e.g. 4k or 1g")),
        n => Ok(n),
    }
}

/// A scratch file's size: at least 4k, as the plan's `scratch_size` (issue 36, finding 7:
/// `--size 0` was taken).
fn parse_scratch_size_arg(s: &str) -> Result<u64, String> {
    match iocurve_plan::parse_size(s)? {
        n if n < 4096 => Err(format!("{n} bytes: a scratch file holds at least 4k, e.g. --size 10g")),
        n => Ok(n),
    }
}

/// A budget, where 0 means none at all.
fn parse_budget_arg(s: &str) -> Result<u64, String> {
    iocurve_plan::parse_size(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn option_table_is_consistent_and_documented() {
        let cmd = Cli::command();
        cmd.clone().debug_assert();
        for sub in cmd.get_subcommands() {
            // Each subcommand's own arguments (clap checks them only when it is used): two
            // flattened groups with one field name made `run` panic at its first use.
            sub.clone().debug_assert();
            assert!(sub.get_about().is_some(), "subcommand {} has help", sub.get_name());
            let mut seen = std::collections::HashSet::new();
            for arg in sub.get_arguments() {
                if arg.get_id() == "help" || arg.get_id() == "version" {
                    continue;
                }
                assert!(arg.get_help().is_some(), "option {} of {} has help", arg.get_id(), sub.get_name());
                if let Some(long) = arg.get_long() {
                    assert!(seen.insert(long.to_string()), "option --{long} of {} is unique", sub.get_name());
                }
            }
        }
    }

    #[test]
    fn overrides_parse() {
        let cli = Cli::try_parse_from([
            "iocurve",
            "run",
            "--ramp",
            "1,2,4",
            "--bs",
            "8k",
            "--backend",
            "null",
            "--target",
            "a",
            "--target",
            "b",
        ])
        .unwrap();
        let Command::Run(a) = cli.command else { panic!() };
        let k = a.flags.keys().unwrap();
        assert_eq!(k.ramp, Some(vec![1, 2, 4]));
        assert_eq!(k.bs, Some(iocurve_plan::BlockSizeSpec::One(8192)));
        assert_eq!(a.targets, vec!["a", "b"]);
        let Command::Run(a) = Cli::try_parse_from(["iocurve", "run", "--bs", "8q"]).unwrap().command else { panic!() };
        assert_eq!(a.flags.keys().unwrap_err().key.as_deref(), Some("--bs"));
        let twice = Cli::try_parse_from(["iocurve", "run", "--ramp", "1,4,16", "--ramp", "1"]).unwrap_err();
        assert_eq!(twice.kind(), clap::error::ErrorKind::ArgumentConflict, "{twice}");
        assert!(Cli::try_parse_from(["iocurve", "run", "p.toml", "--suite", "quick"]).is_err());
    }
}
