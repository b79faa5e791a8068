//! A concurrent step's total beside its members (issue 41): the total's steps keep in flight
//! what its members together keep, and it is identified by what its members are.

use crate::RunResult;

impl RunResult {
    /// Each concurrent step's total completed from its members (the workloads its `members`
    /// name): every step's I/Os in flight are the members' together (each keeps its own depth),
    /// and its settings and block sizes are theirs, joined.
    pub(crate) fn with_members(mut self) -> Self {
        let seen: Vec<(String, Vec<u64>, String, String)> = self
            .workloads
            .iter()
            .map(|w| {
                (
                    w.name.clone(),
                    w.steps.iter().map(|s| s.outstanding).collect(),
                    w.settings.access.clone(),
                    w.bs.clone(),
                )
            })
            .collect();
        for w in self.workloads.iter_mut().filter(|w| !w.members.is_empty()) {
            let members: Vec<&(String, Vec<u64>, String, String)> =
                w.members.iter().filter_map(|n| seen.iter().find(|(m, ..)| m == n)).collect();
            for (i, s) in w.steps.iter_mut().enumerate() {
                let sum: u64 = members.iter().filter_map(|(_, o, ..)| o.get(i)).sum();
                if sum > 0 {
                    s.outstanding = sum;
                }
            }
            let each: Vec<String> = members.iter().map(|(n, _, access, _)| format!("{n}: {access}")).collect();
            w.settings.access = format!("concurrent step of {}", each.join(" + "));
            w.bs = members.iter().map(|(n, _, _, bs)| format!("{n} {bs}")).collect::<Vec<_>>().join(" + ");
            w.settings.bs = w.bs.clone();
        }
        self
    }
}
