//! A concurrent step's total beside its members (issue 41): the total's steps keep in flight
//! what its members together keep, and it is identified by what its members are.

use crate::RunResult;

/// What the total takes from a member: its name, each step's I/Os in flight, its settings, its
/// block sizes and its queue depth.
type Seen = (String, Vec<u64>, String, String, u32);

impl RunResult {
    /// Each concurrent step's total completed from its members (the workloads its `members`
    /// name): every step's I/Os in flight are the members' together (each keeps its own depth),
    /// its settings and block sizes are theirs, joined, and where their depths differ it has
    /// none of its own (0).
    pub(crate) fn with_members(mut self) -> Self {
        let seen: Vec<Seen> = self
            .workloads
            .iter()
            .map(|w| {
                let outstanding = w.steps.iter().map(|s| s.outstanding).collect();
                (w.name.clone(), outstanding, w.settings.access.clone(), w.bs.clone(), w.queue_depth)
            })
            .collect();
        for w in self.workloads.iter_mut().filter(|w| !w.members.is_empty()) {
            let members: Vec<&Seen> = w.members.iter().filter_map(|n| seen.iter().find(|(m, ..)| m == n)).collect();
            let mixed = members.windows(2).any(|p| p[0].4 != p[1].4);
            for (i, s) in w.steps.iter_mut().enumerate() {
                let sum: u64 = members.iter().filter_map(|(_, o, ..)| o.get(i)).sum();
                if sum > 0 {
                    s.outstanding = sum;
                }
                if mixed {
                    s.queue_depth = 0;
                }
            }
            if mixed {
                w.queue_depth = 0;
            }
            let each: Vec<String> = members.iter().map(|(n, _, access, ..)| format!("{n}: {access}")).collect();
            w.settings.access = format!("concurrent step of {}", each.join(" + "));
            w.bs = members.iter().map(|(n, _, _, bs, _)| format!("{n} {bs}")).collect::<Vec<_>>().join(" + ");
            w.settings.bs = w.bs.clone();
        }
        self
    }
}
