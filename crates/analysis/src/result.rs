//! The result document (`--json`). Later versions extend it compatibly: fields are only added.
//! Units: latency in microseconds, throughput in I/Os per second and MB/s (10^6 bytes).

use iocurve_stats::{CpuUsage, HostFacts};
use serde::{Deserialize, Serialize};

pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunResult {
    pub schema_version: u32,
    pub tool_version: String,
    /// RFC 3339, UTC.
    pub started_at: String,
    pub finished_at: String,
    /// True when the run stopped before the plan was complete: every status but `complete`
    /// ([`Status::ended_early`]).
    pub interrupted: bool,
    /// A [`Status`]: `complete`, `interrupted`, `aborted`, `failed` (then with
    /// `status_reason`) or `incomplete` (killed, or still running); empty in documents written
    /// before it existed.
    #[serde(default)]
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_reason: Option<String>,
    pub host: HostInfo,
    /// The SLA bounds the `sla_maximum`s were found with, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sla: Option<Sla>,
    pub targets: Vec<TargetInfo>,
    /// The plan as resolved (every default filled in).
    pub plan: serde_json::Value,
    pub workloads: Vec<WorkloadResult>,
    /// The final verification pass (`--verify-final`), when the run had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_verification: Option<FinalVerification>,
    /// The reclaim steps after the workloads (`[[reclaim]]`, issue 40).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reclaims: Vec<ReclaimResult>,
    /// Its marks (issue 44), in time order: set while it ran (`iocurve mark`) or imported after.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub marks: Vec<iocurve_stats::Mark>,
    /// The array's own figures imported beside the run (`iocurve array`), on its clock.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub array: Vec<iocurve_stats::array::ArraySeries>,
    /// Each step's throughput against the array's front-end series over the same seconds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub array_checks: Vec<ArrayCheck>,
}

/// How a run ended (shared/DESIGN.md §4a): the one word its own JSON, `runs`, `runs --json`,
/// `show`, `export` and the report give (issue 38, finding 4: an aborted run said
/// `"interrupted": false` in its own JSON and `true` in its export).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Complete,
    /// Ctrl-C, SIGTERM or a hangup.
    Interrupted,
    /// `on_error = "abort"`, or the hosts were lost.
    Aborted,
    /// The tool or host failed.
    Failed,
    /// The process died without saying, or is still running.
    Incomplete,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Complete => "complete",
            Status::Interrupted => "interrupted",
            Status::Aborted => "aborted",
            Status::Failed => "failed",
            Status::Incomplete => "incomplete",
        }
    }

    /// From the store's word: a run still marked `running` was killed or is going on.
    pub fn stored(s: &str) -> Status {
        match s {
            "complete" => Status::Complete,
            "interrupted" => Status::Interrupted,
            "aborted" => Status::Aborted,
            "failed" => Status::Failed,
            _ => Status::Incomplete,
        }
    }

    /// The plan did not run to its end.
    pub fn ended_early(self) -> bool {
        self != Status::Complete
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostInfo {
    /// `hostname`, `kernel`, `cpu_model`, `cores`.
    #[serde(flatten)]
    pub facts: HostFacts,
    /// The back-ends that actually ran (`io_uring`, `psync`, `null`; `+`-joined when workloads
    /// used different ones).
    pub backend: String,
    /// Why the back-end differs from the plan's, when it does (e.g. io_uring unavailable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_note: Option<String>,
    /// A multi-host run: the hosts that ran the I/O, each with its own facts and the back-end
    /// it actually used (the fields above then describe the coordinator).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<AgentHost>,
}

/// One agent of a multi-host run as it described itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentHost {
    /// As given (`HOST:PORT`).
    pub address: String,
    #[serde(flatten)]
    pub facts: HostFacts,
    pub backend: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_note: Option<String>,
    /// Lost before the first step (unreachable, or its targets failed to open) and left out
    /// of the run with `--on-host-loss continue`: why. Its facts are then unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost: Option<String>,
    /// Lost while the run went on: when, in which step, why. The steps after it ran on fewer
    /// hosts than planned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_mid_run: Option<HostLoss>,
}

/// An agent lost during a run's steps.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostLoss {
    /// When the coordinator gave it up (RFC 3339, UTC, the coordinator's clock).
    pub at: String,
    /// The workload of the step it was lost in, and that workload's position in the run (0: the
    /// first).
    pub workload: String,
    pub workload_index: usize,
    /// The step's position in its workload's ramp (0: the first), and its workers per host.
    pub step: usize,
    pub workers: u32,
    /// Seconds into the step (0: before the step started: it did not take it).
    pub into_step_s: f64,
    /// Why: killed, cut off, silent, refused the step.
    pub why: String,
}

impl HostLoss {
    /// In words, for flags and notes: `in rr at 4 workers, 1.2 s into the step (why)`.
    pub fn describe(&self) -> String {
        let when = if self.into_step_s > 0.0 {
            format!("{:.1} s into the step", self.into_step_s)
        } else {
            "before the step started".to_string()
        };
        format!("in {} at {} workers, {when}, at {} ({})", self.workload, self.workers, self.at, self.why)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TargetInfo {
    pub path: String,
    /// `file` or `block device`.
    pub kind: String,
    pub size: u64,
    pub logical_block: u64,
    pub group: String,
    /// A scratch file created by this run.
    pub scratch: bool,
    /// When every block of the target was last written by preconditioning (RFC 3339), if ever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preconditioned_at: Option<String>,
    /// What LUN it is (shared/DESIGN.md "target identity"): targets with the same are paths
    /// of one LUN. None: not known (runs stored before iocurve recorded it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lun: Option<String>,
    /// Its block device (a file's: its filesystem's) and that device's queue limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<iocurve_stats::DeviceQueue>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkloadResult {
    /// A label (it follows the command line's overrides); the workload is its `settings`.
    pub name: String,
    /// What identifies the workload: comparisons pair workloads by these, not by their names
    /// (empty in documents written before it existed: those pair by name).
    #[serde(default)]
    pub settings: Settings,
    /// `random` (headline IOPS) or `sequential` (headline MB/s).
    pub kind: String,
    /// `frontend`, `backend` or `range`.
    pub working_set: String,
    pub read_pct: f64,
    /// Share of trims in percent (taken from the writes); absent when it does not trim.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub trim_pct: f64,
    /// Block size, or the weighted mix (`4k:70,64k:30`), or each direction's (`4k r, 64k w,
    /// 1m t`).
    pub bs: String,
    pub queue_depth: u32,
    /// Its distribution, think time or bursts in words (`distribution zipf:1.2, think 500us`);
    /// empty for a uniform closed loop.
    #[serde(default)]
    pub shape: String,
    /// The back-end that ran this workload.
    pub backend: String,
    pub steps: Vec<StepResult>,
    pub speed: Option<Point>,
    pub optimum: Option<Point>,
    pub maximum: Option<Point>,
    /// Why there is no maximum though steps were compared: the top step too noisy to tell it
    /// from a lower-latency step (issue 37).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum_undecided: Option<Undecided>,
    /// The highest-throughput step within the SLA bounds (None without bounds or when no step
    /// stays within them).
    #[serde(default)]
    pub sla_maximum: Option<Point>,
    /// Why there is no SLA maximum though steps stay within the bounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sla_maximum_undecided: Option<Undecided>,
    /// What the SLA maximum is (closed or open loop) and whether to quote it (with SLA bounds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sla_answer: Option<SlaAnswer>,
    pub min_lat_us: Option<f64>,
    /// What written blocks contained (compressibility and dedupability).
    #[serde(default)]
    pub data: iocurve_plan::DataPattern,
    /// What an array makes of that data at every granularity, measured on a sample the engine
    /// generated (writing workloads only; empty in runs stored before it existed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data_check: Vec<DataCheckRow>,
    /// What a reader must know to read the figures right (e.g. steps kept out of the speed,
    /// optimum and maximum because a host was lost).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// A rate ramp's `stop_at_mean_ms` / `stop_at_p99_ms`: the bounds its response-time curve
    /// is drawn against.
    #[serde(default, skip_serializing_if = "Sla::is_unset")]
    pub stop_at: Sla,
    /// The maximum against the hosts' links, when the plan names them (`links`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links: Option<LinkUse>,
    /// The time one block takes to cross a host's link, where the plan names the links and the
    /// workload has one block size: a floor under its latency (issue 42).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer_floor: Option<TransferFloor>,
    /// The vendor's claim for this workload (`[claims.NAME]` in the plan) against what was
    /// measured (issue 42).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<ClaimResult>,
    /// A workers × queue-depth grid (`ramp` × `qd_ramp`): the figures along each axis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid: Option<Grid>,
    /// A host-count sweep (`host_ramp`): the figures at each host count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_sweep: Option<HostSweep>,
    /// A concurrent step's total: its members' names (each a workload of the result of its
    /// own, after it). Empty for any other workload.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<String>,
}

impl WorkloadResult {
    /// Whether its closed-loop steps ran at more than one queue depth (`qd_ramp`): its steps
    /// are told by workers and depth.
    pub fn ramps_queue_depth(&self) -> bool {
        let mut depths = self.steps.iter().filter(|s| s.rate.is_none()).map(|s| s.queue_depth);
        depths.next().is_some_and(|first| depths.any(|d| d != first))
    }
}

/// One row of a data check: a compressor or dedupe unit, the ratio the pattern promises, the
/// ratio found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataCheckRow {
    /// `compression` or `deduplication`.
    pub kind: String,
    /// `zstd -1`, `lz4`, `zstd --long` or `fixed units`.
    pub method: String,
    /// The unit in bytes; None for the whole stream.
    pub unit: Option<u64>,
    /// The promised ratio (with `at_most`: the most it may reach).
    pub expected: f64,
    pub at_most: bool,
    pub achieved: f64,
    /// How far `achieved` may be from `expected` (a share): 5 %, or three standard deviations
    /// of the sampling error when a dedupe ratio rests on few units.
    #[serde(default = "DataCheckRow::default_tolerance")]
    pub tolerance: f64,
}

impl DataCheckRow {
    /// The promise's own margin: within 5 %.
    pub const TOLERANCE: f64 = 0.05;

    fn default_tolerance() -> f64 {
        Self::TOLERANCE
    }

    /// True when the achieved ratio keeps the promise: within the tolerance of a target, or at
    /// most a bound (plus the tolerance).
    pub fn holds(&self) -> bool {
        if self.at_most {
            self.achieved <= self.expected * (1.0 + self.tolerance)
        } else {
            (self.achieved / self.expected - 1.0).abs() <= self.tolerance
        }
    }
}

/// Latency bounds for the SLA maximum; a step within every given bound qualifies. A latency
/// equal to the bound counts as within it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Sla {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<f64>,
}

impl Sla {
    pub fn is_set(&self) -> bool {
        self.mean_ms.is_some() || self.p99_ms.is_some()
    }

    pub fn is_unset(&self) -> bool {
        !self.is_set()
    }

    /// Whether a step's latencies stay within the bounds.
    pub fn admits(&self, s: &StepResult) -> bool {
        self.mean_ms.is_none_or(|b| s.lat_us.mean <= b * 1000.0)
            && self.p99_ms.is_none_or(|b| s.lat_us.p99 <= b * 1000.0)
    }

    /// `mean ≤ 30 ms, p99 ≤ 50 ms`.
    pub fn describe(&self) -> String {
        let mut v = Vec::new();
        if let Some(b) = self.mean_ms {
            v.push(format!("mean ≤ {b} ms"));
        }
        if let Some(b) = self.p99_ms {
            v.push(format!("p99 ≤ {b} ms"));
        }
        v.join(", ")
    }
}

/// A workload's maximum as `iocurve runs` lists it: kept with the run when it ends, so that a
/// list of hundreds of runs needs no analysis, and formatted only when shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    pub workload: String,
    /// IOPS matter less than MB/s for it.
    pub sequential: bool,
    /// None when no step finished or the maximum is undecided.
    pub maximum: Option<Point>,
    /// The maximum was undecided: its top step too noisy (issue 37).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub undecided: bool,
}

/// Every workload's headline, in plan order.
pub fn headlines(workloads: &[WorkloadResult]) -> Vec<Headline> {
    workloads
        .iter()
        .map(|w| Headline {
            workload: w.name.clone(),
            sequential: w.kind == "sequential",
            maximum: w.maximum,
            undecided: w.maximum_undecided.is_some(),
        })
        .collect()
}

/// A workload's resolved settings, as comparisons match them (shared/DESIGN.md: a workload is
/// identified by its settings, not by its name).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Everything but the block size and queue depth: pattern, read share, working set, the
    /// data written, and how the load is driven (worker ramp, rate ramp, SLA search).
    pub access: String,
    /// Block size or weighted mix (`4k`, `4k:70,64k:30`).
    pub bs: String,
    /// I/Os each worker keeps in flight (0 for rate-driven steps, which keep what they need,
    /// and for a queue-depth ramp or grid, whose steps each have theirs).
    pub queue_depth: u32,
}

impl Settings {
    pub fn of(w: &iocurve_plan::Workload, rate_steps: bool) -> Settings {
        use iocurve_plan::WorkingSet;
        let seq = w.pattern == iocurve_plan::Pattern::Sequential;
        let mut access = vec![
            if seq { "sequential" } else { "random" }.to_string(),
            if w.trims() {
                format!("{} % read, {} % trim", w.read_pct, w.trim_pct)
            } else {
                format!("{} % read", w.read_pct)
            },
            match w.working_set {
                WorkingSet::Frontend { blocks } => format!("frontend of {blocks} blocks"),
                WorkingSet::Backend => "backend".into(),
                WorkingSet::Range { start, end } => {
                    format!("range {}..{}", iocurve_plan::format_size(start), iocurve_plan::format_size(end))
                }
            },
        ];
        if w.read_pct < 100.0 {
            let d = iocurve_plan::DataPattern { dedupe_unit: w.dedupe_unit(), ..w.data };
            access.push(format!(
                "data compress {} dedupe {} unit {} constant {}",
                d.compress, d.dedupe, d.dedupe_unit, d.constant
            ));
        }
        access.extend(shape(w, rate_steps));
        // A concurrent step's member: with whom, and its share of the workers.
        if let Some(g) = w.together.as_ref().filter(|_| !w.is_together_step()) {
            access.push(format!("in concurrent step {g} at share {}", w.share));
        }
        if !w.target_groups.is_empty() {
            access.push(format!("on groups {}", w.target_groups.join(", ")));
        }
        access.push(
            match (rate_steps, w.rate.is_empty()) {
                (false, _) if w.is_grid() => "workers × queue-depth grid",
                (false, _) if w.ramps_queue_depth() => "queue-depth ramp",
                (false, _) => "worker ramp",
                (true, false) => "rate ramp",
                (true, true) => "SLA search",
            }
            .into(),
        );
        Settings {
            access: access.join(", "),
            bs: workload_block_sizes(w),
            // A queue-depth ramp's depths are its steps', as a worker ramp's workers.
            queue_depth: if rate_steps || w.ramps_queue_depth() { 0 } else { w.queue_depth },
        }
    }

    /// Known (documents written before settings existed have none).
    pub fn known(&self) -> bool {
        !self.access.is_empty()
    }
}

/// What shapes a workload's load beyond pattern, mix and depth, in words (empty for a uniform
/// closed loop): its distribution (`distribution zipf:1.2 scattered`), its think time or its
/// bursts — the labels of its figures.
pub fn shape(w: &iocurve_plan::Workload, rate_steps: bool) -> Vec<String> {
    let mut out = Vec::new();
    // A replay's I/Os are its trace's (issue 45): where they came from, and what was done to
    // fit them.
    if let Some(trace) = &w.replay {
        let mut r = format!("replay of {trace}");
        if w.replay_remap != iocurve_plan::Remap::default() {
            r.push_str(&format!(" (offsets beyond a target: {})", w.replay_remap.name()));
        }
        out.push(r);
        return out;
    }
    if w.pattern == iocurve_plan::Pattern::Random && !w.distribution.is_uniform() {
        let layout = if w.hot_layout == iocurve_plan::HotLayout::Scattered { " scattered" } else { "" };
        out.push(format!("distribution {}{layout}", w.distribution));
    }
    if let Some(t) = &w.think
        && !rate_steps
    {
        out.push(t.describe());
    }
    if let Some(b) = &w.bursts
        && rate_steps
    {
        out.push(b.describe());
    }
    out
}

/// A workload's block sizes: `4k`, a mix, or with writes of their own `4k r, 64k w`.
pub fn workload_block_sizes(w: &iocurve_plan::Workload) -> String {
    if w.write_bs.is_empty() && w.trim_bs.is_empty() {
        return block_sizes(&w.bs);
    }
    let mut parts = Vec::new();
    if w.read_pct > 0.0 {
        parts.push(format!("{} r", block_sizes(&w.bs)));
    }
    if w.write_pct() > 0.0 {
        parts.push(format!("{} w", block_sizes(w.write_sizes())));
    }
    if w.trims() {
        parts.push(format!("{} t", block_sizes(w.trim_sizes())));
    }
    parts.join(", ")
}

/// A share that is 0 (`trim_pct` of a workload that does not trim).
fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

/// `4k`, or the weighted mix `4k:70,64k:30`.
pub fn block_sizes(bs: &[iocurve_plan::BlockSize]) -> String {
    use iocurve_plan::format_size;
    if bs.len() == 1 {
        format_size(bs[0].bytes)
    } else {
        bs.iter().map(|b| format!("{}:{}", format_size(b.bytes), b.weight)).collect::<Vec<_>>().join(",")
    }
}

/// What an SLA answer is, for the reader who must quote one (issue 37, finding 3: the worker
/// ramp's SLA maximum and the SLA search's answer were 64× apart with no word on which is
/// "how much load within my SLA").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlaAnswer {
    /// Open loop: I/Os arrive on a schedule (rate steps); closed loop: workers wait for theirs.
    pub open_loop: bool,
    /// The one to quote for "how much load stays within my SLA".
    pub quote: bool,
    /// The open-loop workload whose answer to quote instead (a closed loop's, when it ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follows: Option<String>,
    /// The same in one sentence.
    pub says: String,
}

impl RunResult {
    /// A closed-loop SLA answer names the open-loop one that follows it only when that ran (an
    /// interrupted run or one without a maximum has none).
    pub fn with_sla_answers(mut self) -> Self {
        // Each workload's name, and whether it has an SLA answer.
        let answered: Vec<(String, bool)> =
            self.workloads.iter().map(|w| (w.name.clone(), w.sla_answer.is_some())).collect();
        for a in self.workloads.iter_mut().filter_map(|w| w.sla_answer.as_mut()) {
            let Some(f) = a.follows.clone() else { continue };
            match answered.iter().find(|(n, _)| *n == f) {
                None => *a = SlaAnswer::of(false, None),
                Some((_, false)) => *a = SlaAnswer::none_sustained_after(&f),
                Some((_, true)) => {}
            }
        }
        self
    }
}

/// What every closed-loop SLA answer is, before what to quote instead.
const CLOSED_LOOP: &str =
    "closed loop: each worker waits for its I/O, so stalls slow the load instead of breaking the SLA — an upper bound";

impl SlaAnswer {
    /// A closed loop's answer when the open-loop one that followed sustained no rate within the
    /// bounds: nothing is known to stay within them.
    pub fn none_sustained_after(follower: &str) -> SlaAnswer {
        SlaAnswer {
            open_loop: false,
            quote: false,
            says: format!(
                "{CLOSED_LOOP}; the open-loop {follower} sustained no rate within the SLA, so no load is known to stay within it"
            ),
            follows: None,
        }
    }

    /// The answer of a workload's steps: open loop when they are rate steps. `follows` names the
    /// open-loop workload that follows a closed-loop one (its SLA search or curve), if any.
    pub fn of(open_loop: bool, follows: Option<&str>) -> SlaAnswer {
        let says = match (open_loop, follows) {
            (true, _) => "open loop: I/Os arrive on a schedule whatever the storage does, so its stalls count against the SLA — quote this one for how much load stays within the SLA".to_string(),
            (false, Some(name)) => format!("{CLOSED_LOOP}; quote the open-loop answer of {name} for how much load stays within the SLA"),
            (false, None) => format!("{CLOSED_LOOP}; for how much load stays within the SLA, run the open-loop search (sla_search = true) and quote that"),
        };
        SlaAnswer { open_loop, quote: open_loop, says, follows: follows.filter(|_| !open_loop).map(str::to_string) }
    }
}

/// A maximum the measurement cannot decide: its top step varied by more than the noise cap and
/// lower-latency steps lie within that spread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Undecided {
    /// The highest-throughput step (index into `steps`).
    pub step: usize,
    /// Its interval-to-interval spread (coefficient of variation).
    pub cv: f64,
    /// The steps within that spread at a lower latency.
    pub rivals: Vec<usize>,
    /// The same in words.
    pub reason: String,
}

/// A notable step of a workload, repeating its figures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Index into `steps`.
    pub step: usize,
    pub workers: u32,
    /// Its outstanding I/Os per worker (0 in documents written before points said so).
    #[serde(default)]
    pub queue_depth: u32,
    pub iops: f64,
    pub mbps: f64,
    pub lat_us: f64,
    /// A rate step's target in IOPS (all hosts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_iops: Option<f64>,
}

/// A workers × queue-depth grid's figures along each axis (issue 41): at every worker count
/// the speed, optimum and maximum of its queue-depth ramp, at every depth those of its worker
/// ramp ("speed" is an axis's first point). The workload's own figures are over every cell.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Grid {
    /// The worker counts (rows) and queue depths (columns) its steps ran, increasing.
    pub workers: Vec<u32>,
    pub queue_depths: Vec<u32>,
    /// Along the queue depth: one per worker count.
    pub by_workers: Vec<Axis>,
    /// Along the workers: one per queue depth.
    pub by_queue_depth: Vec<Axis>,
}

/// One line of a grid: the steps at one worker count (or one depth), their figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Axis {
    /// The worker count (or queue depth) the line is at.
    pub at: u32,
    pub speed: Option<Point>,
    pub optimum: Option<Point>,
    pub maximum: Option<Point>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum_undecided: Option<Undecided>,
    /// A host count's: what the links of the hosts that ran its maximum carry together (MB/s,
    /// usable per direction), where the plan names them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_ceiling_mbps: Option<f64>,
    /// A host count's: its maximum throughput against linear scaling from the sweep's first
    /// count (100 %: twice the hosts, twice the throughput).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaling_pct: Option<f64>,
}

/// A host-count sweep's figures (`host_ramp`, issue 41): the workload's ramp at each count.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostSweep {
    pub host_counts: Vec<u32>,
    /// One per host count: its steps' speed, optimum and maximum.
    pub by_hosts: Vec<Axis>,
}

impl Grid {
    /// The cell at `workers` × `queue_depth`: its step's index, if it ran.
    pub fn cell(steps: &[StepResult], workers: u32, queue_depth: u32) -> Option<usize> {
        steps.iter().position(|s| s.rate.is_none() && s.workers == workers && s.queue_depth == queue_depth)
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyStats {
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    pub stddev: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p99_9: f64,
    pub p99_99: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DirResult {
    pub ops: u64,
    pub bytes: u64,
    pub iops: f64,
    pub mbps: f64,
    pub lat_us: LatencyStats,
}

impl DirResult {
    /// Nothing in this direction (a step that never trims has an empty `trim`).
    pub fn is_empty(&self) -> bool {
        *self == DirResult::default()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalResult {
    pub iops: f64,
    pub mbps: f64,
    pub lat_mean_us: f64,
    pub cpu: CpuUsage,
}

/// One sample (a second of the step; shorter when intervals are shorter).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleResult {
    /// Start, in seconds since the measurement (after warm-up) began.
    pub t_s: f64,
    pub dur_s: f64,
    pub ops: u64,
    pub iops: f64,
    pub mbps: f64,
    pub lat_mean_us: f64,
    pub lat_max_us: f64,
    pub errors: u64,
    /// The second's own percentiles, from its histogram (issue 44): within 6.25 % above the
    /// true value (`iocurve_stats::seconds`), never above `lat_max_us`. Absent where the second
    /// kept no histogram (no I/O, stored before iocurve kept them, intervals over 120 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_9_us: Option<f64>,
    /// The second's latency histogram, every direction: its non-empty buckets as
    /// `[lowest ns, highest ns, count]` (both bounds inclusive), in order, so that a percentile
    /// can be computed from it independently. Empty where not kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lat_hist: Vec<[u64; 3]>,
}

/// One point of a step's exceedance (QoS) curve: the latency at a percentile.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct QosPoint {
    /// The percentile, 0 to 99.9999.
    pub pct: f64,
    pub lat_us: f64,
}

fn one() -> u32 {
    1
}

/// What one host of a multi-host run did in a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostStepResult {
    /// The agent's address as given (`host:port`).
    pub host: String,
    pub hostname: String,
    /// The workers it ran: the step's, or its share of them (`workers_scale`). 0 in documents
    /// written before hosts had their own.
    #[serde(default)]
    pub workers: u32,
    pub iops: f64,
    pub mbps: f64,
    pub lat_us: LatencyStats,
    pub errors: u64,
    /// When its I/O started, in µs after the earliest host's start.
    pub started_at_us: f64,
    /// Seconds into the step when the coordinator lost this host (absent when it finished).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_at_s: Option<f64>,
    /// Its clock minus the coordinator's, measured just before the step, in ms.
    #[serde(default)]
    pub clock_offset_ms: f64,
    /// How far its clock moved against the coordinator's during the step, beyond the
    /// measurements' uncertainty, in ms (absent when not measured again after the step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_moved_ms: Option<f64>,
    /// Its own per-second timeline.
    #[serde(default)]
    pub samples: Vec<SampleResult>,
    /// The hosts the row stands for: a relay's group (issue 46); 1 for a host of its own.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub hosts: u32,
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

pub use iocurve_stats::{FinalVerification, VerifyCounts};

/// One problem a verification pass found: a row of the problems CSV.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifyProblem {
    pub target: String,
    pub block: u64,
    /// Byte offset of the block in the target.
    pub offset: u64,
    /// `lost`, `corrupt` or `misplaced`.
    pub kind: String,
    /// The generation of the last acknowledged write.
    pub expected_generation: u16,
    /// The older generation found, for a lost write that has one.
    pub found_generation: Option<u16>,
    /// What the block holds: `generation 3`, `no write of this map`, `checksum mismatch`, `the
    /// write for f.dat block 7`.
    pub found: String,
}

/// Errors of one errno on one target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetErrorCount {
    /// The target's path (`unknown` for errors stored before they were counted per target).
    pub target: String,
    pub errno: i32,
    pub name: String,
    pub count: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorCount {
    pub errno: i32,
    /// Symbolic name (`EIO`); `short` for a transfer shorter than asked.
    pub name: String,
    pub count: u64,
}

/// One bucket of the latency histogram in the published form (share of I/Os per range).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyBucket {
    /// Lower bound in µs (inclusive).
    pub from_us: f64,
    /// Upper bound in µs (exclusive); None for the last, open bucket.
    pub to_us: Option<f64>,
    pub count: u64,
    pub pct: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Flag {
    /// `unsteady`, `transient`, `cpu_saturated`, `littles_law`, `errors`, `interrupted`.
    pub code: String,
    pub message: String,
}

/// CPU of iocurve's I/O threads, in % of one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct IoCpuResult {
    /// The busiest thread: near 100 % it never waited for the storage.
    pub busiest_pct: f64,
    /// All of them together (200 %: two cores' worth).
    pub total_pct: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepResult {
    /// Workers per host.
    pub workers: u32,
    /// Hosts that ran the step (1 for a local run).
    #[serde(default = "one", rename = "host_count")]
    pub hosts: u32,
    /// Hosts the step was planned on: all the hosts the run started its steps with. A step on
    /// fewer (a host lost earlier in the run) is flagged `fewer_hosts` and enters no speed,
    /// optimum or maximum. 0 in documents written before it existed (then unknown).
    #[serde(default)]
    pub planned_hosts: u32,
    /// Per host, in a multi-host run.
    #[serde(default, rename = "hosts", skip_serializing_if = "Vec::is_empty")]
    pub host_results: Vec<HostStepResult>,
    /// Latest minus earliest start across hosts, in µs (multi-host runs), from the agents' own
    /// timestamps and their clock offsets measured just before the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_spread_us: Option<f64>,
    /// How far off those offsets may be (half the round trip of the worst host's measurement),
    /// in µs: the true spread may be larger than `start_spread_us` by up to twice this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_uncertainty_us: Option<f64>,
    pub queue_depth: u32,
    /// workers × queue depth: I/Os kept in flight.
    pub outstanding: u64,
    pub threads: usize,
    /// CPU iocurve's I/O threads used over the measured intervals (the most of any one host).
    /// Absent for steps stored before iocurve measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_cpu: Option<IoCpuResult>,
    /// Measured seconds (complete intervals only).
    pub duration_s: f64,
    pub iops: f64,
    pub mbps: f64,
    pub lat_us: LatencyStats,
    pub read: DirResult,
    pub write: DirResult,
    /// Trims (discards, punched holes), apart from reads and writes; absent when none.
    #[serde(default, skip_serializing_if = "DirResult::is_empty")]
    pub trim: DirResult,
    pub intervals: Vec<IntervalResult>,
    /// Coefficient of variation of the interval throughput (stddev / mean).
    pub cv: f64,
    pub iops_min: f64,
    pub iops_max: f64,
    pub cpu: CpuUsage,
    pub errors: u64,
    pub errors_by_errno: Vec<ErrorCount>,
    #[serde(default)]
    pub errors_by_target: Vec<TargetErrorCount>,
    /// Longest time in s without any completion on the host (a stall when 1 s or more).
    #[serde(default)]
    pub longest_stall_s: f64,
    /// I/Os changed by fault injection (plans with `[[faults]]`).
    #[serde(default)]
    pub faults_injected: u64,
    /// I/Os still outstanding when the step stopped issuing that completed while it waited for
    /// them (their latency is in the last interval's figures).
    #[serde(default)]
    pub late_ios: u64,
    /// I/Os still outstanding after that wait: given up as stuck (cancelled, or their thread
    /// left blocked in the kernel). Their age is in the last interval's latency figures.
    #[serde(default)]
    pub stuck_ios: u64,
    /// Age of the oldest stuck I/O when it was given up, in s.
    #[serde(default)]
    pub stuck_age_s: f64,
    /// I/O errors outside the measured intervals (in the warm-up, or after the step stopped
    /// issuing): in no figure, but counted.
    #[serde(default)]
    pub unmeasured_errors: Vec<TargetErrorCount>,
    /// What reads of a verifying workload found (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<VerifyCounts>,
    pub lat_histogram: Vec<LatencyBucket>,
    /// The exceedance (QoS) curve of the step's I/Os, every direction (issue 44): the latency at
    /// each quarter of a nine from 0 % to 99.9999 %, as far as the step's I/O count resolves
    /// (1'000 I/Os reach 99.9 %). From the step's 3-digit histograms.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exceedance: Vec<QosPoint>,
    pub flags: Vec<Flag>,
    /// When the measured intervals began (the warm-up's end), in ns since the Unix epoch: a
    /// sample's wall-clock time is this plus its `t_s`. Absent for steps stored before v16.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_from_unix_ns: Option<i64>,
    pub samples: Vec<SampleResult>,
    /// A rate step: its target, how far it kept to it, and its service time and lag (its
    /// `lat_us` is the response time, from each I/O's intended issue time). Absent for
    /// closed-loop steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<RateResult>,
    /// The SNIA steady-state check of the interval throughputs (steps of 5 intervals or more):
    /// the first window of 5 that meets the rule (the one that ends a `steady_state = "snia"`
    /// step), else the last 5 (flagged `not_steady`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_state: Option<crate::steady::SteadyCheck>,
    /// Each target's part (issue 42): its figures and what its device counted. Empty for
    /// steps stored before iocurve kept them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<TargetStepResult>,
    /// The LUNs of its targets, where some LUN has several paths.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub luns: Vec<LunStepResult>,
    /// How evenly the I/Os spread over paths, LUNs, groups and hosts (each with several).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub balance: Vec<Balance>,
}

/// What a rate (open-loop) step asked for and what it got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateResult {
    /// The run's target in IOPS (all hosts together).
    pub target_iops: f64,
    /// I/Os the schedule had due in the measured intervals.
    pub due: u64,
    /// Completed I/Os per due I/O, in percent.
    pub achieved_pct: f64,
    /// Due I/Os not issued (`overload = drop`, or nowhere to go).
    pub dropped: u64,
    /// Due I/Os still waiting for a slot when the measurement ended.
    pub backlog: u64,
    /// Completion − submission, µs.
    pub service_us: LatencyStats,
    /// Submission − intended issue time, µs.
    pub lag_us: LatencyStats,
    /// Kept up: achieved ≥ 99 % of what was due, nothing dropped or left waiting, p99 lag
    /// below one interval, not ended by overload. Unsustained steps enter no optimum or
    /// maximum.
    pub sustained: bool,
    /// A replay step (issue 45): the speed its trace was played at (1 = its own timing);
    /// `target_iops` is the trace's mean rate at that speed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_speed: Option<f64>,
    /// A replay that fell behind its trace (an interval whose p99 lag passed
    /// [`crate::step::BEHIND_MS`]): from when and by how much. A replay never stretches: its
    /// I/Os keep their intended times, and being late shows here and in the response times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behind: Option<Behind>,
    /// A replay step: the rate its trace asked for in each sample (IOPS, all hosts), beside the
    /// samples' completed IOPS: where the two part, the replay fell behind (or the storage
    /// completed late).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intended_iops: Vec<f64>,
}

/// When and how far a replay fell behind its trace.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Behind {
    /// Seconds into the step's measurement when the first interval behind began.
    pub from_s: f64,
    /// Intervals behind, of the step's.
    pub intervals: usize,
    /// The worst p99 lag of an interval, µs.
    pub worst_lag_p99_us: f64,
    /// Of all the step's issued I/Os, the share issued later than `BEHIND_MS` after its
    /// intended time, percent.
    pub late_pct: f64,
}

impl StepResult {
    /// The I/Os that completed whole, every direction.
    pub fn ops(&self) -> u64 {
        self.read.ops + self.write.ops + self.trim.ops
    }

    /// The headline throughput: IOPS for random workloads, MB/s for sequential ones.
    pub fn throughput(&self, sequential: bool) -> f64 {
        if sequential { self.mbps } else { self.iops }
    }
}

/// A step's throughput against the links of the hosts that ran it: the busiest host's share,
/// which is the one that meets its links first.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LinkUse {
    /// `2 × 32G FC`; on several hosts `1 × 16G FC on b:7070, the busiest of 2 hosts`.
    pub links: String,
    /// Payload those links carry per direction, MB/s.
    pub capacity_mbps: f64,
    /// Reads (into the host) and writes (out of it) as percent of that.
    pub read_pct: f64,
    pub write_pct: f64,
}

impl LinkUse {
    /// The busier direction's share: the one that meets the limit first.
    pub fn pct(&self) -> f64 {
        self.read_pct.max(self.write_pct)
    }

    /// `82 % of the host's links (2 × 32G FC: 6.40 GB/s a direction), reads`.
    pub fn describe(&self, mbps: impl Fn(f64) -> String) -> String {
        let dir = if self.read_pct >= self.write_pct { "reads" } else { "writes" };
        let whose = if self.links.contains(" on ") { "a host's links" } else { "the host's links" };
        let over = if self.pct() > 100.0 {
            " — more than they carry: not all of it crossed them (a host cache?)"
        } else {
            ""
        };
        format!(
            "{:.0} % of {whose} ({}: {} a direction), {dir}{over}",
            self.pct(),
            self.links,
            mbps(self.capacity_mbps)
        )
    }
}

/// The time one block of a workload takes to cross one link of its hosts at the link's usable
/// payload rate ([`crate::sizing::transfer_ms`]): no I/O through that link completes faster.
/// Payload time only — switches, protocol and the array add to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransferFloor {
    /// The time, µs.
    pub us: f64,
    /// The block, bytes.
    pub bytes: u64,
    /// The link type (`16G FC`).
    pub link: String,
}

impl TransferFloor {
    /// `transfer floor 164 µs (256 KiB on 16G FC)`.
    pub fn describe(&self) -> String {
        format!(
            "transfer floor {} ({} on {})",
            crate::format::latency(self.us),
            crate::format::size(self.bytes),
            self.link
        )
    }
}

/// One pass of a reclaim step over its region.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PassResult {
    pub ops: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub iops: f64,
    pub mbps: f64,
    pub lat_us: LatencyStats,
}

/// The storage's used bytes at the moments that matter, as the probe said them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct UsedSpace {
    pub before: u64,
    pub after_write: u64,
    pub after_trim: u64,
    /// At the last probe (when the space was back, or when the wait ended).
    pub last: u64,
}

/// A reclaim step (`[[reclaim]]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReclaimResult {
    pub name: String,
    /// The targets whose regions it wrote and trimmed.
    pub targets: Vec<String>,
    /// Bytes of all the regions together.
    pub region_bytes: u64,
    pub bs: u64,
    pub queue_depth: u32,
    pub write: PassResult,
    pub trim: PassResult,
    /// Reads of the trimmed ranges.
    pub read: PassResult,
    /// Of those reads, the blocks that came back all zeros.
    pub zero_blocks: u64,
    /// What measured the used space (`allocated size of …`, `command: …`); empty: nothing could
    /// (a device other than a loop device, and no `probe`).
    pub probe: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used: Option<UsedSpace>,
    /// Seconds from the end of the trims until `back_pct` % of the trimmed bytes were free again
    /// (None: not within `timeout_s`, or not measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub back_after_s: Option<f64>,
    pub back_pct: f64,
    pub timeout_s: f64,
    /// (seconds since the trims ended, used bytes) of every probe after them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<(f64, u64)>,
    /// Set when a Ctrl-C ended it early: the figures are of what it did.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// What ended it before its end (a pass or the probe failed): the figures are of what it
    /// did before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A claim and what was measured against it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClaimResult {
    /// The claimed figures, as the plan gives them.
    pub claimed: iocurve_plan::Claim,
    /// Throughput compared in MB/s (else IOPS).
    pub in_mbps: bool,
    /// What the claim was set against: `at_latency`, `maximum` (a throughput alone, or a curve
    /// that never reached the claimed latency) or `speed` (a latency alone).
    pub against: String,
    /// The measured throughput against a throughput claim (IOPS or MB/s), None where the
    /// curve has none at the claimed latency.
    pub measured: Option<f64>,
    /// The measured mean latency, µs: the claimed one where the throughput was read at it, the
    /// maximum's or speed's otherwise.
    pub measured_lat_us: Option<f64>,
    /// The measurement as percent of the claim: throughput measured / claimed (100 or more:
    /// the claim holds); of a latency alone, latency measured / claimed (100 or less: holds).
    pub pct: Option<f64>,
    /// The claim holds.
    pub holds: bool,
    /// The same in words.
    pub says: String,
}

/// One target's part of a step: its path (a device node, a file), whichever LUN it leads to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetStepResult {
    /// Its path as the run names it (`ADDR:PATH` on agents).
    pub target: String,
    pub iops: f64,
    pub mbps: f64,
    /// Its completed I/Os' latency, µs.
    pub lat_us: LatencyStats,
    pub errors: u64,
    /// Its share of the step's I/Os, %.
    pub share_pct: f64,
    /// iocurve's mean read and write sizes on it, KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_kib: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_kib: Option<f64>,
    /// What its block device counted over the same intervals (a file's: its filesystem's
    /// device, with everything else on it). None: not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceSeen>,
    /// Its own per-second timeline (issue 44: which target slowed down, when), as the step's
    /// `samples`; empty for a step's only target (its timeline is the step's) and in documents
    /// written before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<SampleResult>,
}

/// A block device's own counts over a step (`/proc/diskstats`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceSeen {
    /// Requests it completed per second.
    pub requests_per_s: f64,
    /// Its mean read and write request sizes, KiB (None: no such requests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_request_kib: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_request_kib: Option<f64>,
}

/// One LUN's figures in a step: its paths' added up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LunStepResult {
    /// Its identity (shared/DESIGN.md "target identity"): `wwid naa.…`, a loop device's file.
    pub lun: String,
    /// The targets (paths) that lead to it.
    pub paths: Vec<String>,
    pub iops: f64,
    pub mbps: f64,
    /// Mean latency of its I/Os, every path's, µs.
    pub lat_mean_us: f64,
    pub errors: u64,
    /// How evenly its paths carried it (lowest path's IOPS / highest's, %); None: one path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paths_balance_pct: Option<f64>,
}

/// How evenly a step's I/Os spread over its paths, LUNs, groups or hosts: the lowest unit's
/// IOPS against the highest's (100 %: even; a failed path shows as 0 %).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Balance {
    /// `paths`, `luns`, `groups` or `hosts`.
    pub over: String,
    pub units: usize,
    pub balance_pct: f64,
    pub lowest: String,
    pub highest: String,
}

/// One step against one of the array's series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArrayCheck {
    pub workload: String,
    /// The step's index in its workload.
    pub step: usize,
    /// The array's series (`kind` `iops` or `mbps`).
    pub series: String,
    /// iocurve's figure over the same seconds (IOPS or MB/s, all hosts): its samples within the
    /// step, its ends left out (`array::EDGE_S`).
    pub host: f64,
    /// The mean of the array's points within the step, its ends left out (`array::EDGE_S`).
    pub array: f64,
    /// Its points averaged.
    pub points: usize,
    /// (array − host) / host, %.
    pub diff_pct: f64,
}
