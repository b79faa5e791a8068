//! The plan file as typed (phase one: validation of shape only, no syscalls).
//!
//! [`WorkloadKeys`] (made from the rows of `options.rs`) holds every workload key: `[defaults]`,
//! each `[[workloads]]` entry and the command-line overrides are values of it.

use serde::{Deserialize, Serialize};

use crate::model::FaultKind;
use crate::options::WorkloadKeys;
pub use crate::spec::{BlockSizeSpec, WorkingSetSpec};
use crate::spec::{opt_size, opt_size_out};

/// Top level of a plan file.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PlanFile {
    /// Free-form name of the plan (shown in reports).
    pub name: Option<String>,
    pub description: Option<String>,
    /// SLA bound on mean latency in ms: the SLA maximum is the best step within it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sla_mean_ms: Option<f64>,
    /// SLA bound on p99 latency in ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sla_p99_ms: Option<f64>,
    /// Write every block of every target once before the workloads (skipped for targets already
    /// preconditioned at their size).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precondition: Option<bool>,
    /// Agents to run on (`iocurve agent`), each with its own targets or the plan's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hosts: Option<Vec<HostKeys>>,
    /// Size of the scratch files made for targets that do not exist (`--size` wins; default
    /// 1g, or less when the disk has less room).
    #[serde(
        skip_serializing_if = "Option::is_none",
        default,
        deserialize_with = "opt_size",
        serialize_with = "opt_size_out"
    )]
    pub scratch_size: Option<u64>,
    /// Every host's links to the storage (`"2x32G FC"`, `"4x25GbE"`): the report gives the
    /// maximum's share of them. `[[hosts]] links` sets one host's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub links: Option<String>,
    /// The vendor's figures per workload, `[claims.NAME]` (see [`crate::claims::ClaimKeys`]):
    /// the results set the measurement beside them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claims: Option<std::collections::BTreeMap<String, crate::claims::ClaimKeys>>,
    /// Faults to inject into every step (see [`FaultKeys`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub faults: Option<Vec<FaultKeys>>,
    /// Target paths or globs, all in one group. Exclusive with `groups`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub targets: Option<Vec<String>>,
    /// Weighted target groups: each I/O picks a group by weight, then a target in it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<GroupKeys>>,
    /// Reclaim steps after the workloads (`[[reclaim]]`, see [`crate::ReclaimKeys`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reclaim: Option<Vec<crate::ReclaimKeys>>,
    /// Values for every workload that does not set the key itself.
    #[serde(default, skip_serializing_if = "WorkloadKeys::is_empty")]
    pub defaults: WorkloadKeys,
    #[serde(default)]
    pub workloads: Vec<WorkloadKeys>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GroupKeys {
    pub name: Option<String>,
    pub weight: Option<u32>,
    pub targets: Vec<String>,
}

/// An agent of a multi-host run: `[[hosts]]` in a plan.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HostKeys {
    /// `HOST:PORT` of its `iocurve agent`.
    pub address: String,
    /// Its targets (paths on that host); default: the plan's targets.
    pub targets: Option<Vec<String>>,
    /// Its links to the storage (`"2x32G FC"`); default: the plan's `links`.
    pub links: Option<String>,
    /// Its workers against a step's: `0.25` runs a quarter of each step's workers (at least
    /// one) — a small host beside a big one. Default 1.
    pub workers_scale: Option<f64>,
}

/// A fault to inject (tests and demonstrations): `[[faults]]` in a plan.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FaultKeys {
    /// `eio`, `latency`, `stall`, `drop-write`, `torn-write` or `misdirect-write`.
    pub kind: FaultKind,
    /// Share of the I/Os in the window that get the fault (default 1; not for `stall`).
    pub share: Option<f64>,
    /// Window start, in seconds after the measurement of each step begins (default 0).
    pub from_s: Option<f64>,
    /// Window end (default: the end of the step).
    pub to_s: Option<f64>,
    /// Only I/Os to this target (default: all).
    pub target: Option<String>,
    /// Added latency in ms (`latency` only).
    pub latency_ms: Option<f64>,
}
