//! How a run ended: its status in the result and the database (`complete`, `interrupted`,
//! `aborted`, `failed`) with the reason, and the storage's verdict behind exit codes 3 and 4.

use iocurve_analysis::RunResult;
use iocurve_store::Store;

use crate::error::store_error;
use crate::{Error, Observer};

/// A run's end: its result (as stored and as `--json` writes it), its id in the store, and what
/// ended it early or made it fail, if anything did.
pub struct Outcome {
    pub result: RunResult,
    pub run_id: Option<i64>,
    pub error: Option<Error>,
}

impl Outcome {
    /// Why a run that ended without error did not go clean (exit code 3 or 4, and why).
    pub fn verdict(&self) -> Option<(u8, String)> {
        storage_verdict(&self.result)
    }
}

/// Stores a final verification pass with its problems and lets it decide the outcome: exit
/// code 4 when it found problems.
pub(crate) fn conclude_verification(
    outcome: &mut Outcome,
    store: &mut Store,
    found: iocurve_analysis::FinalVerification,
    rows: impl IntoIterator<Item = iocurve_store::StoredProblem>,
    obs: &mut dyn Observer,
) {
    let stored = match outcome.run_id {
        Some(id) => store.add_verification(id, &found, rows),
        None => Ok(()),
    };
    let problems = found.counts.problems();
    if problems > 0 {
        if let Err(e) = stored {
            // The problems decide the exit code; the store's failure is still said.
            obs.warning(&store_error(e).to_string());
        }
        outcome.error =
            Some(Error::Verification(format!("verification found {problems} problems: {}", found.counts.describe())));
    } else if let Err(e) = stored {
        outcome.error = Some(store_error(e));
    }
    outcome.result.final_verification = Some(found);
}

/// The status a finished run ends with, in its result and in the database, once everything
/// after the workloads (saving the map, the final verification) is done: `complete` with the
/// reason for exit code 3 or 4 (e.g. the problems verification found), `failed` with the error.
pub(crate) fn settle_status(outcome: &mut Outcome, store: &Store) {
    let r = &mut outcome.result;
    let reason = match &outcome.error {
        Some(Error::Verification(why)) => Some(why.clone()),
        Some(Error::Interrupted(why)) => {
            // Ctrl-C after the workloads (in the final verification pass).
            r.status = "interrupted".into();
            r.interrupted = true;
            Some(why.clone())
        }
        Some(e) => {
            if r.status == "complete" || r.status == "aborted" {
                // The policy's own abort keeps its status; any later failure is a failure.
                r.status =
                    if matches!(e, Error::Aborted(_) | Error::HostsLost(_)) { "aborted" } else { "failed" }.into();
            }
            Some(e.to_string())
        }
        None if r.interrupted => None,
        None => storage_verdict(r).map(|(_, why)| why),
    };
    if reason.is_none() {
        return;
    }
    r.status_reason = reason;
    if let Some(id) = outcome.run_id
        && let Err(e) = store.set_status(id, &r.status, r.status_reason.as_deref())
    {
        outcome.error.get_or_insert(store_error(e));
    }
}

/// Why a finished run did not go clean: verification problems seen on reads (exit 4), or I/O
/// errors and steps that completed no I/O (exit 3). None when it did.
pub fn storage_verdict(r: &RunResult) -> Option<(u8, String)> {
    // A concurrent step's members are counted in its total (issue 41: an error was counted
    // twice).
    let members: Vec<&String> = r.workloads.iter().flat_map(|w| &w.members).collect();
    let steps =
        r.workloads.iter().filter(|w| !members.contains(&&w.name)).flat_map(|w| w.steps.iter().map(move |s| (w, s)));
    let mut errors = 0u64;
    let mut no_io = Vec::new();
    let mut lost = Vec::new();
    let mut verify = 0u64;
    let mut stuck = 0u64;
    for (w, s) in steps {
        errors += s.errors + s.unmeasured_errors.iter().map(|e| e.count).sum::<u64>();
        stuck += s.stuck_ios;
        verify += s.verify.as_ref().map_or(0, |v| v.problems());
        if s.flags.iter().any(|f| f.code == "no_io") {
            no_io.push(format!("{} at {} workers", w.name, s.workers));
        }
        if s.flags.iter().any(|f| f.code == "host_lost") {
            lost.push(format!("{} at {} workers", w.name, s.workers));
        }
    }
    if verify > 0 {
        return Some((
            4,
            format!("verification found {verify} problems on reads during the run (see the steps' verify flags)"),
        ));
    }
    let mut why = Vec::new();
    if errors > 0 {
        why.push(format!("the storage failed {errors} I/Os"));
    }
    if stuck > 0 {
        why.push(format!("{stuck} I/Os never completed (stuck; see the steps' stuck flags)"));
    }
    if !no_io.is_empty() {
        why.push(format!("no I/O completed in {}", no_io.join(", ")));
    }
    let unreachable: Vec<&str> =
        r.host.agents.iter().filter(|a| a.lost.is_some()).map(|a| a.address.as_str()).collect();
    if !unreachable.is_empty() {
        why.push(format!("agents {} were lost before the first step", unreachable.join(", ")));
    }
    if !lost.is_empty() {
        why.push(format!("hosts were lost in {}", lost.join(", ")));
    }
    if let Some(v) = r.final_verification.as_ref().filter(|v| v.counts.unreadable > 0) {
        why.push(format!(
            "the final verification could not read {} blocks (read errors: neither proven nor lost; `iocurve verify` checks them again once the path is back)",
            v.counts.unreadable
        ));
    }
    (!why.is_empty()).then(|| (3, why.join("; ")))
}
