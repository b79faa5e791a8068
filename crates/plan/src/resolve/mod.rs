//! From TOML text (and command-line overrides) to a validated [`Plan`]: the entry points, the
//! layers a workload key comes from (command line, workload, `[defaults]`, built-in) and where
//! an error about it points, the target groups. Workloads, faults and data patterns are checked
//! in [`workload`]; TOML's own errors are turned into plan errors in [`text`].

mod claims;
mod label;
mod text;
mod together;
pub(crate) mod workload;

use std::path::Path;

use text::toml_error;

use crate::error::PlanError;
use crate::keys::PlanFile;
use crate::links::HostLinks;
use crate::locate::{Seg, locate};
use crate::model::Fault;
use crate::options::{Workload, WorkloadKeys};
use crate::options::{builtin_defaults, cli_option};
use crate::resolved::{HostSpec, Plan, TargetGroup};

/// Values given on the command line; they win over the plan.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// Replace the plan's targets with these paths or globs.
    pub targets: Vec<String>,
    /// Workload keys given as options (`--qd` sets `queue_depth`, …).
    pub keys: WorkloadKeys,
    /// Keep only the workloads whose name contains this text.
    pub workload_filter: Option<String>,
}

/// A writing workload named `name` from command-line keys alone, resolved and checked as a
/// plan's would be (errors name the options): for commands that write without a plan
/// (`precondition`, `datacheck`).
pub fn writing_workload(name: &str, keys: WorkloadKeys) -> Result<Workload, PlanError> {
    let text = format!("[[workloads]]\nname = \"{name}\"\nread_pct = 0\n");
    let mut plan = parse_str(&text, name, &Overrides { keys, ..Default::default() })?;
    Ok(plan.workloads.remove(0))
}

pub fn load_file(path: &Path, overrides: &Overrides) -> Result<Plan, PlanError> {
    parse_str(&read_plan_text(path)?, &path.display().to_string(), overrides)
}

/// A plan file's text (TOML or a fio job file), read once — a plan may come through a pipe —
/// and at most 16 MiB (`/dev/zero` is not a plan).
pub fn read_plan_text(path: &Path) -> Result<String, PlanError> {
    use std::io::Read;
    const MAX: u64 = 16 << 20;
    let source = path.display().to_string();
    let bad = |m: String| PlanError::new(&source, None, None, m);
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX + 1).read_to_end(&mut bytes))
        .map_err(|e| bad(format!("cannot read the plan file: {e}")))?;
    if bytes.len() as u64 > MAX {
        return Err(bad("is larger than 16 MiB: not a plan file".into()));
    }
    String::from_utf8(bytes).map_err(|_| bad("is not UTF-8 text: not a plan file".into()))
}

/// Parses and resolves plan text; `source` names it in errors (a path or `suite:NAME`).
pub fn parse_str(text: &str, source: &str, overrides: &Overrides) -> Result<Plan, PlanError> {
    let file: PlanFile = toml::from_str(text).map_err(|e| toml_error(text, source, &e))?;
    Resolver { text, source, overrides, file: &file, as_given: true }.resolve()
}

impl Default for Workload {
    /// A workload of the built-in defaults alone (the table's), named `workload`: for code that
    /// sets a few keys and takes the others as a plan would, so that a new key touches no such
    /// code.
    fn default() -> Self {
        let text = "[[workloads]]\nname = \"workload\"\n";
        match parse_str(text, "the built-in defaults", &Overrides::default()) {
            Ok(mut plan) => plan.workloads.remove(0),
            Err(e) => unreachable!("the built-in defaults resolve (tested): {e}"),
        }
    }
}

/// Resolves a typed plan with command-line overrides (an imported fio job file).
pub(crate) fn resolve_with(file: &PlanFile, source: &str, overrides: &Overrides) -> Result<Plan, PlanError> {
    Resolver { text: "", source, overrides, file, as_given: true }.resolve()
}

/// Resolves a plan that is already typed (no text: errors name keys, not lines).
#[cfg(test)]
pub(crate) fn resolve_file(file: &PlanFile, source: &str) -> Result<Plan, PlanError> {
    Resolver { text: "", source, overrides: &Overrides::default(), file, as_given: true }.resolve()
}

/// Ok when resolving a plan could have given `w` and `faults`: an agent checks every step
/// request with it before it acts, so that it runs only what a plan could have asked for (found
/// by fuzzing, issue 13: an agent took any workload that parsed, and `"bs": []`,
/// `"queue_depth": 0` or `"intervals": 4294967295` panicked its I/O threads, idled the step or
/// aborted the agent on a failed allocation). The workload's keys are resolved again by the
/// same rows and rules as a plan's; errors name the key, from `source`.
pub fn check_workload(w: &Workload, faults: &[Fault], source: &str) -> Result<(), PlanError> {
    let mut keys = w.keys();
    // A member's target groups are the request's, which the engine checks them against: the
    // plan the workload is checked in here has none of them.
    keys.target_groups = None;
    // An SLA search's rate steps (`NAME-sla-search`) are chosen as it runs, so its `rate` is
    // empty: checked as the workload that asked for them (found by an outside test: its bursts
    // were refused as "no rate steps" by every agent).
    if w.bursts.is_some() && !w.has_rate_steps() {
        keys.sla_search = Some(true);
    }
    let file = PlanFile {
        workloads: vec![keys],
        faults: Some(faults.iter().map(Fault::keys).collect()),
        ..Default::default()
    };
    // Resolved once already: a replay's keys hold what its trace gave them.
    Resolver { text: "", source, overrides: &Overrides::default(), file: &file, as_given: false }.resolve().map(|_| ())
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Origin {
    Cli,
    Workload(usize),
    Defaults,
    Builtin,
}

struct Resolver<'a> {
    text: &'a str,
    source: &'a str,
    overrides: &'a Overrides,
    file: &'a PlanFile,
    /// The plan as a user wrote it (not a workload resolved before, as an agent checks it):
    /// keys that would be ignored are refused.
    as_given: bool,
}

impl Resolver<'_> {
    fn err(&self, path: &[Seg], key: String, msg: impl Into<String>) -> PlanError {
        PlanError::new(self.source, locate(self.text, path), Some(key), msg)
    }

    fn origin(&self, w: usize, key: &str) -> Origin {
        if self.overrides.keys.set_keys().contains(&key) {
            Origin::Cli
        } else if self.file.workloads[w].set_keys().contains(&key) {
            Origin::Workload(w)
        } else if self.file.defaults.set_keys().contains(&key) {
            Origin::Defaults
        } else {
            Origin::Builtin
        }
    }

    /// An error about `key` of workload `w`, located where its value came from.
    fn key_err(&self, w: usize, key: &'static str, msg: String) -> PlanError {
        match self.origin(w, key) {
            Origin::Cli => PlanError::new("command line", None, Some(cli_option(key)), msg),
            Origin::Workload(i) => {
                self.err(&[Seg::Key("workloads"), Seg::Index(i), Seg::Key(key)], format!("workloads[{i}].{key}"), msg)
            }
            Origin::Defaults => self.err(&[Seg::Key("defaults"), Seg::Key(key)], format!("defaults.{key}"), msg),
            Origin::Builtin => PlanError::new(self.source, None, Some(key.to_string()), msg),
        }
    }

    /// A replay takes its I/Os' sizes, directions, places and times from its trace and its steps
    /// from its speeds (issue 45; found by an outside test: `--suite quick --replay` ran ten
    /// replays of one trace, `--ramp` and `bs` were taken and ignored). Said where they are set
    /// for a replaying workload (its own table or the command line; `[defaults]` serve the
    /// others), and `--replay` replays one workload.
    fn replay_keys(&self, all: &[(usize, String, Workload)]) -> Result<(), PlanError> {
        if !self.as_given {
            return Ok(());
        }
        if self.overrides.keys.replay.is_some() && all.len() > 1 {
            let names: Vec<&str> = all.iter().map(|(_, _, w)| w.name.as_str()).take(4).collect();
            return Err(PlanError::new(
                "command line",
                None,
                Some("--replay".into()),
                format!(
                    "--replay replays its trace as one workload, and this plan runs {} ({}{}): give --replay without a plan or suite, choose one workload with --workload, or set replay = \"FILE\" on one workload of the plan",
                    all.len(),
                    names.join(", "),
                    if all.len() > names.len() { ", …" } else { "" }
                ),
            ));
        }
        // `--replay` on the one workload chosen of several (`--workload`): its own keys now.
        if self.overrides.keys.replay.is_some()
            && self.file.workloads.len() > 1
            && let [(i, _, w)] = all
        {
            self.replay_own_keys(*i, &w.name, Some(w.warmup_s))?;
        }
        Ok(())
    }

    /// A replaying workload's own keys that its trace decides (see [`Resolver::replay_keys`]):
    /// checked before the workload is resolved, so that no other rule speaks of a key the
    /// trace sets (found by an outside test: `write_bs` on a replay was "never written: lower
    /// read_pct").
    fn replay_own_keys(&self, i: usize, name: &str, warmup_s: Option<f64>) -> Result<(), PlanError> {
        const FROM_TRACE: [(&str, &str); 13] = [
            ("read_pct", "its reads' share comes from the trace"),
            ("trim_pct", "its trims' share comes from the trace"),
            ("bs", "its block sizes come from the trace"),
            ("write_bs", "its block sizes come from the trace"),
            ("trim_bs", "its block sizes come from the trace"),
            ("pattern", "its offsets come from the trace"),
            ("distribution", "its offsets come from the trace"),
            ("hot_layout", "its offsets come from the trace"),
            ("frontend_blocks", "its offsets come from the trace"),
            ("arrival", "its I/Os' times come from the trace"),
            ("ramp", "its steps are its speeds (replay_speed, --replay-speed)"),
            ("host_ramp", "its steps are its speeds (replay_speed, --replay-speed)"),
            ("intervals", "its steps last as long as the trace at each speed, in intervals of about interval_s"),
        ];
        let own = |key: &str| matches!(self.origin(i, key), Origin::Cli | Origin::Workload(_));
        if let Some(&(key, why)) = FROM_TRACE.iter().find(|(key, _)| own(key)) {
            return Err(self.key_err(
                i,
                key,
                format!("workload {name} replays a trace, and {why}: drop {key} (it would be ignored)"),
            ));
        }
        if warmup_s.is_some_and(|w| w > 0.0) && own("warmup_s") {
            return Err(self.key_err(
                i,
                "warmup_s",
                format!(
                    "workload {name} replays a trace, whose first seconds are part of it: no warm-up (warmup_s = 0), or cut the trace"
                ),
            ));
        }
        Ok(())
    }

    fn resolve(&self) -> Result<Plan, PlanError> {
        let groups = self.groups()?;
        if let Some(name) = &self.file.defaults.name {
            return Err(self.err(
                &[Seg::Key("defaults"), Seg::Key("name")],
                "defaults.name".into(),
                format!("`name` names one workload and cannot be a default (found \"{name}\"): move it into a [[workloads]] entry"),
            ));
        }
        // A plan of reclaim steps alone measures those.
        if self.file.workloads.is_empty() && self.file.reclaim.as_ref().is_none_or(Vec::is_empty) {
            return Err(PlanError::new(
                self.source,
                None,
                Some("workloads".into()),
                "the plan has no workloads: add at least one [[workloads]] table (or a [[reclaim]] step), or start from `iocurve plan --suite quick`",
            ));
        }
        let base = self.file.defaults.over(&builtin_defaults());
        // Each workload with its index, its name in the plan, its label (which follows the
        // command line's options) and its keys. `--workload` matches the name or the label and
        // chooses before anything is resolved: a workload not chosen cannot refuse the run.
        // Workload after workload as the plan lists them, so that errors come in its order: the
        // name, the workload's keys (a chosen workload's only), the name's uniqueness.
        let filter = self.overrides.workload_filter.as_deref();
        let mut all: Vec<(usize, String, String, Option<Workload>)> = Vec::new();
        for i in 0..self.file.workloads.len() {
            let own = self.file.workloads[i].over(&base);
            let mut keys = self.overrides.keys.over(&own);
            let name = self.workload_name(i, &keys)?;
            self.queue_depth_layers(i, &mut keys)?;
            let label = label::follow(&name, &own, &self.overrides.keys);
            let chosen = filter.is_none_or(|f| label.contains(f) || name.contains(f));
            // (`--replay` on a plan of several workloads is refused as a whole, after them.)
            let replay_of_its_own = !matches!(self.origin(i, "replay"), Origin::Cli) || self.file.workloads.len() == 1;
            if chosen && self.as_given && keys.replay.is_some() && replay_of_its_own {
                self.replay_own_keys(i, &name, keys.warmup_s)?;
            }
            let w = if chosen { Some(self.workload(i, &keys)?) } else { None };
            if all.iter().any(|(_, n, _, _)| *n == name) {
                return Err(self.err(
                    &[Seg::Key("workloads"), Seg::Index(i), Seg::Key("name")],
                    format!("workloads[{i}].name"),
                    format!("workload name `{name}` is used twice: names must be unique"),
                ));
            }
            all.push((i, name, label, w));
        }
        // Claims name workloads as the plan does; each goes with the label its workload runs as.
        let claims =
            self.claims(&all.iter().map(|(_, n, l, w)| (n.as_str(), l.as_str(), w.is_some())).collect::<Vec<_>>())?;
        if let Some(filter) = filter {
            let names: Vec<String> = all.iter().map(|(_, _, label, _)| label.clone()).collect();
            all.retain(|(_, _, _, w)| w.is_some());
            if all.is_empty() {
                return Err(PlanError::new(
                    "command line",
                    None,
                    Some("--workload".into()),
                    format!("no workload name contains `{filter}`; the workloads are: {}", names.join(", ")),
                ));
            }
        }
        let mut all: Vec<(usize, String, Workload)> = all
            .into_iter()
            .filter_map(|(i, planned, label, w)| w.map(|w| (i, planned, Workload { name: label, ..w })))
            .collect();
        // Of what runs, the options may have made two workloads one (the block size sweep run
        // with --bs): refused, not run twice under names that hide it.
        for k in 0..all.len() {
            if let Some(j) = (0..k).find(|&j| all[j].2.name == all[k].2.name) {
                let i = all[k].0;
                return Err(self.err(
                    &[Seg::Key("workloads"), Seg::Index(i), Seg::Key("name")],
                    format!("workloads[{i}].name"),
                    format!(
                        "with the command line's options, workloads `{}` and `{}` both become `{}`, the same workload twice: drop the option, or keep one of them with --workload and its name in the plan (e.g. --workload {})",
                        all[j].1, all[k].1, all[k].2.name, all[k].1
                    ),
                ));
            }
        }
        self.replay_keys(&all)?;
        // A curve or a search runs as a workload of its own name: no other may carry it.
        for (i, w) in all.iter().map(|(i, _, w)| (*i, w)) {
            let derived = [(!w.curve.is_empty(), "curve"), (w.sla_search, "sla-search")];
            for (_, suffix) in derived.iter().filter(|(on, _)| *on) {
                let name = format!("{}-{suffix}", w.name);
                if all.iter().any(|(_, _, o)| o.name == name) {
                    return Err(self.err(
                        &[Seg::Key("workloads"), Seg::Index(i), Seg::Key("name")],
                        format!("workloads[{i}].name"),
                        format!("workload `{}` runs its {suffix} as `{name}`, the name of another workload: rename one of them", w.name),
                    ));
                }
            }
        }
        // `--target` replaces the plan's targets and groups: every workload runs on them.
        if !self.overrides.targets.is_empty() {
            for (_, _, w) in &mut all {
                w.target_groups.clear();
            }
        }
        self.together(&all.iter().map(|(i, _, w)| (*i, w)).collect::<Vec<_>>(), &groups)?;
        let workloads: Vec<Workload> = all.into_iter().map(|(_, _, w)| w).collect();
        for (key, v) in [("sla_mean_ms", self.file.sla_mean_ms), ("sla_p99_ms", self.file.sla_p99_ms)] {
            if v.is_some_and(|v| !(v > 0.0 && v.is_finite())) {
                return Err(self.err(
                    &[Seg::Key(key)],
                    key.into(),
                    format!("{key} must be a positive number of milliseconds, e.g. {key} = 30"),
                ));
            }
        }
        let faults = self.faults()?;
        let reclaim = self.reclaim()?;
        let links = self.links(self.file.links.as_deref(), &[Seg::Key("links")], "links")?;
        let hosts = self.hosts(&workloads)?;
        if let Some(s) = self.file.scratch_size.filter(|&s| s < 4096) {
            return Err(self.err(
                &[Seg::Key("scratch_size")],
                "scratch_size".into(),
                format!("scratch_size is {s} bytes: a scratch file holds at least 4k, e.g. scratch_size = \"10g\""),
            ));
        }
        Ok(Plan {
            faults,
            reclaim,
            claims,
            hosts,
            links,
            scratch_size: self.file.scratch_size,
            sla_mean_ms: self.file.sla_mean_ms,
            precondition: self.file.precondition.unwrap_or(false),
            sla_p99_ms: self.file.sla_p99_ms,
            name: self.file.name.clone().unwrap_or_else(|| self.source.to_string()),
            description: self.file.description.clone().unwrap_or_default(),
            source: self.source.to_string(),
            groups,
            workloads,
        })
    }

    /// `[[hosts]]`: each agent checked (its links, its `workers_scale`), and no host with
    /// targets of its own where a workload names the plan's target groups.
    fn hosts(&self, workloads: &[Workload]) -> Result<Vec<HostSpec>, PlanError> {
        let mut hosts = Vec::new();
        for (i, h) in self.file.hosts.iter().flatten().enumerate() {
            let at = [Seg::Key("hosts"), Seg::Index(i), Seg::Key("links")];
            let workers_scale = h.workers_scale.unwrap_or(1.0);
            if !(workers_scale > 0.0 && workers_scale <= crate::resolved::MAX_WORKERS_SCALE) {
                return Err(self.err(
                &[Seg::Key("hosts"), Seg::Index(i), Seg::Key("workers_scale")],
                format!("hosts[{i}].workers_scale"),
                format!(
                    "workers_scale is {workers_scale}: a host runs its scale times each step's workers (at least one), above 0 up to {}, e.g. 0.25 for a host a quarter the size",
                    crate::resolved::MAX_WORKERS_SCALE
                ),
            ));
            }
            hosts.push(HostSpec {
                address: h.address.clone(),
                targets: h.targets.clone().unwrap_or_default(),
                links: self.links(h.links.as_deref(), &at, &format!("hosts[{i}].links"))?,
                workers_scale,
            });
        }
        // A host with targets of its own has one group of them (`targets`): the plan's groups
        // a workload names are not there.
        if let (Some(i), Some(w)) = (
            hosts.iter().position(|h: &HostSpec| !h.targets.is_empty()),
            workloads.iter().find(|w| !w.target_groups.is_empty()),
        ) {
            return Err(self.err(
            &[Seg::Key("hosts"), Seg::Index(i), Seg::Key("targets")],
            format!("hosts[{i}].targets"),
            format!(
                "workload {} uses target groups {:?}, but this host has targets of its own (one group): give the hosts the plan's [[groups]] (no targets of their own), or drop target_groups",
                w.name, w.target_groups
            ),
        ));
        }
        Ok(hosts)
    }

    /// `links = "2x32G FC"`, checked where it is written.
    fn links(&self, text: Option<&str>, at: &[Seg], key: &str) -> Result<Option<HostLinks>, PlanError> {
        text.map(|t| HostLinks::parse(t).map_err(|m| self.err(at, key.to_string(), m))).transpose()
    }

    /// A target that is the empty string names nothing (issue 36: `targets = [""]` passed
    /// `--dry-run`, and the run announced a scratch file before refusing it).
    fn no_empty_paths(&self, paths: &[String], at: &[Seg], key: &str) -> Result<(), PlanError> {
        match paths.iter().position(|p| p.trim().is_empty()) {
            Some(i) => Err(self.err(
                at,
                format!("{key}[{i}]"),
                "an empty path names nothing: name a file, block device or glob (e.g. \"/dev/sdb\", \"scratch.dat\")",
            )),
            None => Ok(()),
        }
    }

    fn groups(&self) -> Result<Vec<TargetGroup>, PlanError> {
        if !self.overrides.targets.is_empty() {
            if self.overrides.targets.iter().any(|t| t.trim().is_empty()) {
                return Err(PlanError::new(
                    "command line",
                    None,
                    Some("--target".into()),
                    "an empty path names nothing: give a file, block device or glob",
                ));
            }
            return Ok(vec![TargetGroup {
                name: "targets".into(),
                weight: 1,
                targets: self.overrides.targets.clone(),
            }]);
        }
        match (&self.file.targets, &self.file.groups) {
            (Some(_), Some(_)) => Err(self.err(
                &[Seg::Key("groups")],
                "groups".into(),
                "give either `targets` (one group) or `groups` (weighted groups), not both",
            )),
            (Some(t), None) => {
                if t.is_empty() {
                    return Err(self.err(
                        &[Seg::Key("targets")],
                        "targets".into(),
                        "`targets` is empty: name at least one file, device or glob",
                    ));
                }
                self.no_empty_paths(t, &[Seg::Key("targets")], "targets")?;
                Ok(vec![TargetGroup { name: "targets".into(), weight: 1, targets: t.clone() }])
            }
            (None, Some(groups)) => {
                if groups.is_empty() {
                    return Err(self.err(&[Seg::Key("groups")], "groups".into(), "`groups` is empty"));
                }
                let mut out: Vec<TargetGroup> = Vec::new();
                for (i, g) in groups.iter().enumerate() {
                    let at = |k: &'static str| [Seg::Key("groups"), Seg::Index(i), Seg::Key(k)];
                    let weight = g.weight.unwrap_or(1);
                    if weight == 0 {
                        return Err(self.err(
                            &at("weight"),
                            format!("groups[{i}].weight"),
                            "weight must be at least 1 (a group with weight 0 would never be used: remove it instead)",
                        ));
                    }
                    if g.targets.is_empty() {
                        return Err(self.err(
                            &at("targets"),
                            format!("groups[{i}].targets"),
                            "a group needs at least one target path or glob",
                        ));
                    }
                    self.no_empty_paths(&g.targets, &at("targets"), &format!("groups[{i}].targets"))?;
                    let name = g.name.clone().unwrap_or_else(|| format!("group{}", i + 1));
                    if out.iter().any(|o| o.name == name) {
                        return Err(self.err(
                            &at("name"),
                            format!("groups[{i}].name"),
                            format!("group name `{name}` is used twice"),
                        ));
                    }
                    out.push(TargetGroup { name, weight, targets: g.targets.clone() });
                }
                Ok(out)
            }
            // No targets: the caller supplies them (command line, or the default scratch file).
            (None, None) => Ok(Vec::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{BlockSize, Pattern, WorkingSet};

    #[test]
    fn links_of_the_plan_and_of_each_host() {
        let text = "links = \"2x32G FC\"\n[[hosts]]\naddress = \"a:7070\"\n[[hosts]]\naddress = \"b:7070\"\nlinks = \"4x25GbE\"\n[[workloads]]\nname = \"w\"\n";
        let plan = parse_str(text, "p.toml", &Overrides::default()).unwrap();
        assert_eq!(plan.links.as_ref().map(|l| l.describe()), Some("2 × 32G FC".into()));
        assert_eq!(plan.hosts[0].links, None, "the plan's");
        assert_eq!(plan.hosts[1].links.as_ref().map(|l| l.describe()), Some("4 × 25G Ethernet".into()));
        let e = parse_str(&text.replace("4x25GbE", "4x40GbE"), "p.toml", &Overrides::default()).unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(6), Some("hosts[1].links")), "{e}");
        assert!(e.message.contains("32G FC"), "the known types are listed: {e}");
    }

    #[test]
    fn the_default_workload_is_the_table_s_defaults() {
        let w = Workload::default();
        assert_eq!((w.name.as_str(), w.read_pct, w.queue_depth), ("workload", 100.0, 1));
        assert_eq!(w.ramp, [1, 2, 4, 8, 16, 32]);
        assert_eq!((w.warmup_s, w.intervals, w.interval_s, w.pause_s), (5.0, 3, 10.0, 0.0));
        assert_eq!(w.bs, vec![BlockSize { bytes: 4096, weight: 1 }]);
    }

    /// Issue 13, finding 9: type errors in plan files named the line but not the key.
    #[test]
    fn type_errors_name_the_key() {
        let e = parse_str("[[workloads]]\nname = \"w\"\nread_pct = \"lots\"\n", "p.toml", &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("p.toml:3: read_pct: invalid type"), "{e}");
        let e = parse_str("[[workloads]]\nname = \"w\"\nramp = [1, \"x\"]\n", "p.toml", &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("p.toml:3: ramp: invalid type"), "{e}");
    }

    /// Found by tests/properties.rs: a value cut off by the end of the text was an error with
    /// an empty message (`p.toml:3: ramp: `).
    #[test]
    fn a_missing_value_says_so() {
        for text in ["[[workloads]]\nname = \"w\"\nramp =", "[[workloads]]\nname = \"w\"\nramp="] {
            let e = parse_str(text, "p.toml", &Overrides::default()).unwrap_err();
            assert_eq!((e.line, e.key.as_deref()), (Some(3), Some("ramp")), "{e}");
            assert!(e.message.contains("missing"), "{e}");
        }
    }
    use proptest::prelude::*;

    fn parse(text: &str) -> Result<Plan, PlanError> {
        parse_str(text, "t.toml", &Overrides::default())
    }

    const GOOD: &str = r#"
name = "demo"
targets = ["/dev/loop9"]

[defaults]
ramp = [1, 2, 4]
interval_s = 2

[[workloads]]
name = "backend-random-read-8k"
bs = "8k"

[[workloads]]
name = "mixed"
read_pct = 70
bs = { "4k" = 3, "64k" = 1 }
pattern = "sequential"
working_set = { start = "1m", end = "2m" }
queue_depth = 4
ramp = [1, 8]
"#;

    #[test]
    fn resolves_layers_in_order() {
        let p = parse(GOOD).unwrap();
        assert_eq!(p.name, "demo");
        assert_eq!(p.groups[0].targets, vec!["/dev/loop9"]);
        let a = &p.workloads[0];
        assert_eq!(a.bs, vec![BlockSize { bytes: 8192, weight: 1 }]);
        assert_eq!(a.ramp, vec![1, 2, 4]);
        assert_eq!(a.interval_s, 2.0);
        assert_eq!(a.intervals, 3);
        assert!(a.direct);
        let b = &p.workloads[1];
        assert_eq!(b.bs.len(), 2);
        assert_eq!(b.ramp, vec![1, 8]);
        assert_eq!(b.working_set, WorkingSet::Range { start: 1 << 20, end: 2 << 20 });
        assert_eq!(b.pattern, Pattern::Sequential);
    }

    #[test]
    fn cli_overrides_win_and_filter() {
        let o = Overrides {
            targets: vec!["/tmp/x".into()],
            keys: WorkloadKeys { queue_depth: Some(16), ..Default::default() },
            workload_filter: Some("mixed".into()),
        };
        let p = parse_str(GOOD, "t.toml", &o).unwrap();
        assert_eq!(p.workloads.len(), 1);
        assert_eq!(p.workloads[0].queue_depth, 16);
        assert_eq!(p.groups[0].targets, vec!["/tmp/x"]);
    }

    /// Issue 37, finding 2: labels follow the command line; `--workload` matches the plan's name
    /// or the label, and it chooses before two workloads the options made one are refused.
    #[test]
    fn regression_labels_follow_options_and_the_filter_chooses_first() {
        let with = |keys: WorkloadKeys, filter: Option<&str>| {
            crate::suites::load(
                "quick",
                &Overrides { keys, workload_filter: filter.map(str::to_string), ..Default::default() },
            )
        };
        let reads = WorkloadKeys { read_pct: Some(100.0), ..Default::default() };
        let p = with(reads.clone(), Some("frontend-random-write")).unwrap();
        let names: Vec<&str> = p.workloads.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, ["frontend-random-read-4k"]);
        let e = with(reads, Some("frontend-random")).unwrap_err().to_string();
        assert!(
            e.contains("workloads `frontend-random-read-4k` and `frontend-random-write-4k` both become `frontend-random-read-4k`"),
            "{e}"
        );
        let p = with(
            WorkloadKeys { bs: Some(crate::BlockSizeSpec::One(8192)), ..Default::default() },
            Some("random-read-4k"),
        )
        .unwrap();
        let names: Vec<&str> = p.workloads.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, ["frontend-random-read-8k", "backend-random-read-8k"]);
        assert!(p.workloads.iter().all(|w| w.bs[0].bytes == 8192));
    }

    /// Issue 17: a rate ramp replaces the worker ramp; its keys are checked like every other.
    #[test]
    fn a_rate_ramp_gives_rate_steps_and_bad_rates_name_their_key() {
        let p = parse("[[workloads]]\nname = \"a\"\nrate = [1000, 2500.5]\nmax_outstanding = 16\narrival = \"poisson\"\noverload = \"drop\"\nseed = 7\n").unwrap();
        let w = &p.workloads[0];
        let steps = w.steps();
        assert_eq!(
            steps.iter().map(|s| (s.workers, s.rate)).collect::<Vec<_>>(),
            [(16, Some(1000.0)), (16, Some(2500.5))]
        );
        assert_eq!((w.arrival, w.overload, w.seed), (crate::Arrival::Poisson, crate::Overload::Drop, 7));
        assert_eq!(w.rate_iops(1000.0), 1000.0, "random: IOPS");
        let seq = parse("[[workloads]]\nname = \"s\"\npattern = \"sequential\"\nbs = \"1m\"\nrate = [100]\n").unwrap();
        assert_eq!(seq.workloads[0].rate_iops(100.0), 100e6 / 1048576.0, "sequential: MB/s over the block size");
        let closed = parse("[[workloads]]\nname = \"c\"\nramp = [1, 4]\n").unwrap();
        assert_eq!(
            closed.workloads[0].steps().iter().map(|s| (s.workers, s.rate)).collect::<Vec<_>>(),
            [(1, None), (4, None)]
        );
        for (text, key, words) in [
            ("rate = []", "rate", "empty"),
            ("rate = [0]", "rate", "above 0"),
            ("rate = [5000, 1000]", "rate", "increase"),
            ("rate = [1000]\nqueue_depth = 4", "queue_depth", "max_outstanding"),
            ("max_outstanding = 0", "max_outstanding", "1 to 65536"),
            ("arrival = \"bursty\"", "arrival", "uniform or poisson"),
            ("overload = \"panic\"", "overload", "queue, drop or abort-step"),
            ("curve = [0, 50]", "curve", "above 0 up to 100"),
            ("curve = [50, 10]", "curve", "increase"),
            ("curve = [50]\nrate = [100]", "curve", "use one of them"),
            ("stop_at_p99_ms = 0", "stop_at_p99_ms", "above 0"),
            ("steady_state = \"snia\"", "intervals", "at least 5"),
            ("steady_state = \"often\"", "steady_state", "snia or none"),
            ("curve = [50]\n[[workloads]]\nname = \"a-curve\"", "name", "the name of another workload"),
        ] {
            let e = parse(&format!("[[workloads]]\nname = \"a\"\n{text}\n")).unwrap_err();
            assert!(e.key.as_deref().is_some_and(|k| k.ends_with(key)) || e.message.contains(key), "{text}: {e}");
            assert!(e.message.contains(words), "{text}: {e}");
        }
    }

    #[test]
    fn unknown_key_has_line_and_suggestion() {
        let e = parse("[[workloads]]\nname = \"a\"\nrampp = [1]\n").unwrap_err();
        assert_eq!(e.line, Some(3));
        assert!(e.message.contains("did you mean `ramp`"), "{e}");
    }

    #[test]
    fn wrong_type_has_line() {
        let e = parse("[[workloads]]\nname = \"a\"\nqueue_depth = \"deep\"\n").unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
    }

    #[test]
    fn semantic_errors_name_line_and_key() {
        let e = parse("[[workloads]]\nname = \"a\"\n\n[[workloads]]\nname = \"b\"\nramp = []\n").unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(6), Some("workloads[1].ramp")), "{e}");
        let e = parse("[defaults]\ninterval_s = 0\n[[workloads]]\nname = \"a\"\n").unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(2), Some("defaults.interval_s")), "{e}");
        let e = parse("[[workloads]]\nname = \"a\"\nbs = \"1000\"\n").unwrap_err();
        assert!(e.message.contains("multiple of 512"), "{e}");
        let e = parse("[[workloads]]\nname = \"a\"\nramp = [4, 2]\n").unwrap_err();
        assert!(e.message.contains("increase"), "{e}");
        let e = parse("[[workloads]]\nname = \"a\"\n[[workloads]]\nname = \"a\"\n").unwrap_err();
        assert!(e.message.contains("used twice"), "{e}");
        let e = parse("").unwrap_err();
        assert!(e.message.contains("no workloads"), "{e}");
        let e = parse("[[workloads]]\nname = \"a\"\nworking_set = \"middle\"\n").unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
    }

    #[test]
    fn precondition_is_a_plan_key() {
        assert!(parse("precondition = true\n[[workloads]]\nname = \"a\"\n").unwrap().precondition);
        let p = parse("[[workloads]]\nname = \"a\"\n").unwrap();
        assert!(!p.precondition && !p.writes(), "a read-only plan without preconditioning writes nothing");
        let e = parse("precondition = 1\n[[workloads]]\nname = \"a\"\n").unwrap_err();
        assert_eq!(e.line, Some(1), "{e}");
    }

    #[test]
    fn sla_bounds_are_plan_keys() {
        let p = parse("sla_mean_ms = 30\nsla_p99_ms = 50.5\n[[workloads]]\nname = \"a\"\n").unwrap();
        assert_eq!((p.sla_mean_ms, p.sla_p99_ms), (Some(30.0), Some(50.5)));
        let e = parse("sla_mean_ms = -1\n[[workloads]]\nname = \"a\"\n").unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(1), Some("sla_mean_ms")), "{e}");
    }

    #[test]
    fn cli_errors_name_the_option() {
        let o = Overrides { keys: WorkloadKeys { queue_depth: Some(0), ..Default::default() }, ..Default::default() };
        let e = parse_str(GOOD, "t.toml", &o).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("--qd"));
        assert_eq!(e.source, "command line");
    }

    proptest! {
        /// Whatever the text, parsing returns a plan or an error; it never panics.
        #[test]
        fn arbitrary_text_never_panics(s in "\\PC{0,200}") {
            let _ = parse(&s);
        }

        #[test]
        fn arbitrary_key_values_never_panic(
            key in prop::sample::select(vec!["ramp", "bs", "queue_depth", "working_set", "read_pct", "interval_s", "backend", "threads"]),
            value in prop::sample::select(vec!["0", "-1", "1e400", "\"x\"", "[]", "[0]", "{}", "{ start = 5 }", "true", "99999999999999999999", "\"99999999t\""]),
        ) {
            let _ = parse(&format!("[[workloads]]\nname = \"a\"\n{key} = {value}\n"));
        }
    }
}
