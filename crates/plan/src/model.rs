//! The values a resolved key takes (patterns, policies, block sizes, working sets, the data
//! pattern, faults): what the rows of `options` resolve to, and what the engine reads.

pub use crate::backend::Backend;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Pattern {
    Random,
    Sequential,
}

/// What an I/O error does to a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case", try_from = "String")]
pub enum OnError {
    /// Count it and go on (the storage under test may be failing over).
    #[default]
    Continue,
    /// No more I/O to the failing target for the rest of the step.
    StopTarget,
    /// End the run (exit code 1); the finished intervals are kept.
    Abort,
}

impl OnError {
    pub fn parse(s: &str) -> Option<OnError> {
        match s {
            "continue" => Some(OnError::Continue),
            "stop-target" => Some(OnError::StopTarget),
            "abort" => Some(OnError::Abort),
            _ => None,
        }
    }
}

/// How a rate step spaces the intended issue times of its I/Os.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case", try_from = "String")]
pub enum Arrival {
    /// Evenly: one I/O every 1/rate seconds.
    #[default]
    Uniform,
    /// A Poisson process: exponentially distributed gaps with mean 1/rate, from the seed.
    Poisson,
}

impl Arrival {
    pub fn name(self) -> &'static str {
        match self {
            Arrival::Uniform => "uniform",
            Arrival::Poisson => "poisson",
        }
    }
}

impl TryFrom<String> for Arrival {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        match s.as_str() {
            "uniform" => Ok(Arrival::Uniform),
            "poisson" => Ok(Arrival::Poisson),
            _ => Err(format!("unknown arrival `{s}`: use uniform or poisson")),
        }
    }
}

/// `name()` and a `TryFrom<String>` (what serde reads it by) for a plan enum spelled in kebab
/// case: one table of variants and names, and a refusal that lists them.
macro_rules! kebab_names {
    ($t:ident, $what:literal, { $($v:ident => $n:literal),+ $(,)? }) => {
        impl $t {
            pub fn name(self) -> &'static str {
                match self {
                    $($t::$v => $n),+
                }
            }
        }

        impl TryFrom<String> for $t {
            type Error = String;
            fn try_from(s: String) -> Result<Self, String> {
                match s.as_str() {
                    $($n => Ok($t::$v),)+
                    _ => {
                        let names = [$($n),+];
                        let (last, rest) = names.split_last().unwrap_or((&"", &[]));
                        Err(format!("unknown {} `{s}`: use {} or {last}", $what, rest.join(", ")))
                    }
                }
            }
        }
    };
}

/// What a replay does with a trace's I/O beyond the end of the target it goes to (a trace of
/// a larger LUN on a smaller one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case", try_from = "String")]
pub enum Remap {
    /// Its offset modulo the target's size (the hot spots keep their distances; regions of
    /// the trace fold onto each other).
    #[default]
    Modulo,
    /// Its offset scaled by the target's size over the trace's span on that device (the layout
    /// shrinks as a whole; neighbouring I/Os move closer).
    Scale,
    /// None: a trace that reaches beyond a target is refused.
    Refuse,
}

kebab_names!(Remap, "replay_remap", { Modulo => "modulo", Scale => "scale", Refuse => "refuse" });

/// How a replay's I/Os are shared out among the run's hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case", try_from = "String")]
pub enum Split {
    /// I/O k to host k mod hosts: every host a thinned copy of the whole trace.
    #[default]
    RoundRobin,
    /// Each trace device to one host (the devices in order of first appearance, dealt out in
    /// turn): a trace recorded on several hosts' LUNs replays with each LUN's I/Os on one host.
    Device,
    /// Each process (pid) of the trace to one host, dealt out in turn.
    Process,
}

kebab_names!(Split, "replay_split", { RoundRobin => "round-robin", Device => "device", Process => "process" });

/// What a rate step does with an I/O that is due while `max_outstanding` I/Os are in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case", try_from = "String")]
pub enum Overload {
    /// Keep it: it is issued as soon as an I/O completes, and its response time (from when it
    /// was due) grows with the backlog.
    #[default]
    Queue,
    /// Do not issue it; count it as dropped.
    Drop,
    /// End the step at once; it is marked unsustained.
    AbortStep,
}

kebab_names!(Overload, "overload policy", { Queue => "queue", Drop => "drop", AbortStep => "abort-step" });

/// Intervals the SNIA steady-state rule judges: `iocurve_stats::steady::WINDOW` (the plan crate
/// depends on no other; a test in the engine holds the two equal).
pub const STEADY_WINDOW: u32 = 5;

/// When a step ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case", try_from = "String")]
pub enum SteadyState {
    /// After all its intervals.
    #[default]
    None,
    /// Once its last 5 intervals meet the SNIA steady-state rule, or after all its intervals.
    Snia,
}

impl TryFrom<String> for SteadyState {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        match s.as_str() {
            "none" => Ok(SteadyState::None),
            "snia" => Ok(SteadyState::Snia),
            _ => Err(format!("unknown steady_state `{s}`: use snia or none")),
        }
    }
}

/// What an injected fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// The I/O fails with EIO (not sent to the storage).
    Eio,
    /// The completion is held back by `latency_ms`.
    Latency,
    /// No completion at all during the window: everything completes at its end.
    Stall,
    /// A write is acknowledged but never sent to the storage.
    DropWrite,
    /// Only the first half of a write reaches the storage; it is acknowledged in full.
    TornWrite,
    /// A write lands one block away from where it was meant to; acknowledged as asked.
    MisdirectWrite,
}

/// A resolved fault, injected into every step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fault {
    pub kind: FaultKind,
    /// Share of I/Os in the window that get the fault, 0 < share ≤ 1.
    pub share: f64,
    /// Window in seconds after the measurement of the step begins.
    pub from_s: f64,
    /// None: to the end of the step.
    pub to_s: Option<f64>,
    /// Target path, or every target.
    pub target: Option<String>,
    pub latency_ms: f64,
}

impl TryFrom<String> for OnError {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        OnError::parse(&s).ok_or_else(|| format!("unknown policy `{s}`: use continue, stop-target or abort"))
    }
}

/// One block size of a workload with its weight in the mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockSize {
    pub bytes: u64,
    pub weight: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum WorkingSet {
    /// The first `blocks` blocks (of the workload's largest block size) of every target.
    Frontend { blocks: u64 },
    /// The whole target.
    Backend,
    /// An explicit byte range `[start, end)` of every target.
    Range { start: u64, end: u64 },
}

/// A frontend covers at most this fraction (1/8) of a target: 1000 blocks of 1 MiB are 98 % of
/// a 1 GiB scratch file, and a "cache" test over most of a small target is a backend test.
pub const FRONTEND_MAX_FRACTION: u64 = 8;

impl WorkingSet {
    /// The bytes `[start, end)` it covers on a target of `size` bytes with the workload's
    /// largest block size `max_bs`, and whether a frontend was capped to
    /// 1/[`FRONTEND_MAX_FRACTION`] of the target (whole blocks, never less than one). A range is
    /// returned as given: whether it fits is the caller's check.
    pub fn extent(&self, size: u64, max_bs: u64) -> (u64, u64, bool) {
        match *self {
            WorkingSet::Frontend { blocks } => {
                let want = blocks.saturating_mul(max_bs).min(size);
                let cap = (size / FRONTEND_MAX_FRACTION / max_bs.max(1) * max_bs).max(max_bs).min(size);
                if want > cap { (0, cap, true) } else { (0, want, false) }
            }
            WorkingSet::Backend => (0, size, false),
            WorkingSet::Range { start, end } => (start, end, false),
        }
    }

    pub fn label(&self) -> &'static str {
        match self {
            WorkingSet::Frontend { .. } => "frontend",
            WorkingSet::Backend => "backend",
            WorkingSet::Range { .. } => "range",
        }
    }
}

pub(crate) fn default_max_outstanding() -> u32 {
    64
}

pub(crate) fn default_seed() -> u64 {
    1
}

pub(crate) fn default_share() -> f64 {
    1.0
}

/// The data pattern of written blocks: how compressible and how deduplicable they are.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DataPattern {
    /// Share of each block that is constant, 0 ≤ compress < 1.
    pub compress: f64,
    /// Written dedupe units per unique unit, ≥ 1.
    pub dedupe: f64,
    /// Dedupe unit in bytes (0 in results stored before it existed: the block size).
    pub dedupe_unit: u64,
    /// The byte of the constant share (0 in results stored before it existed: zeros).
    #[serde(default)]
    pub constant: u8,
}

impl Default for DataPattern {
    fn default() -> Self {
        DataPattern { compress: 0.0, dedupe: 1.0, dedupe_unit: 0, constant: 0 }
    }
}

/// Written data is laid out per 512-byte sector (the finest unit an array deduplicates):
/// random bytes first, then the constant share.
pub const DATA_SECTOR: usize = 512;
/// Random bytes every sector keeps at the least (128 bits: no two sectors alike by chance), so
/// compression tops out at 32:1.
pub const MIN_RANDOM_PER_SECTOR: usize = 16;

impl DataPattern {
    /// Random bytes at the head of every 512-byte sector; the rest is constant.
    pub fn random_per_sector(&self) -> usize {
        let r = ((1.0 - self.compress) * DATA_SECTOR as f64).ceil() as usize;
        r.clamp(MIN_RANDOM_PER_SECTOR, DATA_SECTOR)
    }

    /// The compression ratio the data gives, for any compressor and any unit of whole sectors
    /// (4 KiB … the whole stream): 512 / random bytes per sector (0.4 → 1.66:1).
    pub fn expected_compression(&self) -> f64 {
        DATA_SECTOR as f64 / self.random_per_sector() as f64
    }

    /// `compress 0.4, dedupe 2 per 4k`, or `unique, incompressible` for the default.
    pub fn describe(&self) -> String {
        if self.compress == 0.0 && self.dedupe == 1.0 {
            return "unique, incompressible".into();
        }
        let mut v = Vec::new();
        if self.compress > 0.0 {
            v.push(format!("compress {} ({:.2}:1)", self.compress, self.expected_compression()));
        }
        if self.dedupe > 1.0 {
            v.push(format!("dedupe {}:1 per {}", self.dedupe, crate::format_size(self.dedupe_unit)));
        }
        if self.constant != 0 && self.compress > 0.0 {
            v.push(format!("constant byte {:#04x}", self.constant));
        }
        v.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names read back as their variants, and a name that is none says which are.
    #[test]
    fn kebab_names_round_trip_and_list_the_choices() {
        for o in [Overload::Queue, Overload::Drop, Overload::AbortStep] {
            assert_eq!(Overload::try_from(o.name().to_string()), Ok(o));
        }
        for s in [Split::RoundRobin, Split::Device, Split::Process] {
            assert_eq!(Split::try_from(s.name().to_string()), Ok(s));
        }
        assert_eq!(
            Overload::try_from("wait".to_string()),
            Err("unknown overload policy `wait`: use queue, drop or abort-step".to_string())
        );
        assert_eq!(
            Remap::try_from("wrap".to_string()),
            Err("unknown replay_remap `wrap`: use modulo, scale or refuse".to_string())
        );
    }
}
