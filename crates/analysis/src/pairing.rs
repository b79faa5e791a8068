//! Which workload of one run stands beside which of another. A workload is identified by its
//! settings, not by its name (issue 37, finding 2: names followed neither overrides nor
//! settings, and `compare` paired by name): workloads pair by their settings first; what is
//! left pairs by label (the same name, other settings: not like with like, said so), then by
//! the settings but block size and queue depth when that leaves one on each side (a run at 8k
//! against one at 4k).

use crate::result::{RunResult, WorkloadResult};

/// How a pair was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairedBy {
    /// The same settings.
    Settings,
    /// The same label, other settings.
    Label,
    /// The same settings but block size or queue depth, the only such workload on each side.
    SettingsButSize,
    /// On one side only.
    Alone,
}

#[derive(Debug, Clone, Copy)]
pub struct Pair<'a> {
    pub baseline: Option<&'a WorkloadResult>,
    pub run: Option<&'a WorkloadResult>,
    pub by: PairedBy,
}

impl Pair<'_> {
    /// The label a row goes by: the baseline's, else the run's.
    pub fn label(&self) -> &str {
        self.baseline.or(self.run).map_or("", |w| w.name.as_str())
    }

    /// The run's label where it differs from the baseline's.
    pub fn run_label(&self) -> Option<&str> {
        match (self.baseline, self.run) {
            (Some(b), Some(r)) if b.name != r.name => Some(r.name.as_str()),
            _ => None,
        }
    }
}

/// The workloads of both runs in pairs: the baseline's order, then those only the run has.
pub fn pairs<'a>(baseline: &'a RunResult, run: &'a RunResult) -> Vec<Pair<'a>> {
    let (b, r) = (&baseline.workloads, &run.workloads);
    let mut with: Vec<Option<(usize, PairedBy)>> = vec![None; b.len()];
    let mut taken = vec![false; r.len()];
    let same = |x: &WorkloadResult, y: &WorkloadResult| x.settings.known() && x.settings == y.settings;
    let near = |x: &WorkloadResult, y: &WorkloadResult| x.settings.known() && x.settings.access == y.settings.access;
    // The same settings under the same name first: two workloads of one plan may share their
    // settings (apart in back-end, say), and each keeps its own partner.
    let same_name = |x: &WorkloadResult, y: &WorkloadResult| x.name == y.name;
    pass(b, r, &mut with, &mut taken, |x, y| (same(x, y) && same_name(x, y)).then_some(PairedBy::Settings));
    pass(b, r, &mut with, &mut taken, |x, y| same(x, y).then_some(PairedBy::Settings));
    pass(b, r, &mut with, &mut taken, |x, y| {
        same_name(x, y).then_some(if same(x, y) { PairedBy::Settings } else { PairedBy::Label })
    });
    for i in 0..b.len() {
        if with[i].is_some() {
            continue;
        }
        let left: Vec<usize> = (0..b.len()).filter(|&k| with[k].is_none() && near(&b[k], &b[i])).collect();
        let right: Vec<usize> = (0..r.len()).filter(|&j| !taken[j] && near(&b[i], &r[j])).collect();
        if let ([_], [j]) = (left.as_slice(), right.as_slice()) {
            (with[i], taken[*j]) = (Some((*j, PairedBy::SettingsButSize)), true);
        }
    }
    let mut out: Vec<Pair> = b
        .iter()
        .zip(&with)
        .map(|(bw, p)| match p {
            Some((j, by)) => Pair { baseline: Some(bw), run: Some(&r[*j]), by: *by },
            None => Pair { baseline: Some(bw), run: None, by: PairedBy::Alone },
        })
        .collect();
    out.extend(r.iter().zip(&taken).filter(|(_, t)| !**t).map(|(rw, _)| Pair {
        baseline: None,
        run: Some(rw),
        by: PairedBy::Alone,
    }));
    out
}

/// Pairs each baseline workload still alone with the first run workload still alone that
/// `fits` it, as `fits` says.
fn pass(
    b: &[WorkloadResult],
    r: &[WorkloadResult],
    with: &mut [Option<(usize, PairedBy)>],
    taken: &mut [bool],
    fits: impl Fn(&WorkloadResult, &WorkloadResult) -> Option<PairedBy>,
) {
    for (i, bw) in b.iter().enumerate() {
        if with[i].is_some() {
            continue;
        }
        if let Some((j, by)) = (0..r.len()).filter(|&j| !taken[j]).find_map(|j| fits(bw, &r[j]).map(|by| (j, by))) {
            (with[i], taken[j]) = (Some((j, by)), true);
        }
    }
}

/// What a reader must know of the pairing: pairs whose labels differ, and workloads only one
/// run has. Empty when every workload pairs with one of its own name and settings.
pub fn notes(pairs: &[Pair]) -> Vec<String> {
    let mut out = Vec::new();
    for p in pairs {
        match (p.baseline, p.run, p.by) {
            (Some(b), Some(r), PairedBy::Settings) if b.name != r.name => out.push(format!(
                "{} (baseline) and {} (run) are one workload by their settings: compared under the baseline's name",
                b.name, r.name
            )),
            (Some(b), Some(r), PairedBy::SettingsButSize) => out.push(format!(
                "{} (baseline) and {} (run) differ only in block size or queue depth, the only such pair: compared as one workload",
                b.name, r.name
            )),
            (Some(b), Some(_), PairedBy::Label) if b.settings.known() => out.push(format!(
                "{}: the same name in both runs with other settings: not like with like",
                b.name
            )),
            (Some(b), None, _) => out.push(format!("{}: only in the baseline", b.name)),
            (None, Some(r), _) => out.push(format!("{}: only in the run", r.name)),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::Settings;

    fn w(name: &str, access: &str, bs: &str, qd: u32) -> WorkloadResult {
        let mut w = crate::compare::tests::workload(name, "random", (1.0, 1.0, 1.0));
        w.settings = Settings { access: access.into(), bs: bs.into(), queue_depth: qd };
        w
    }

    fn names(p: &[Pair]) -> Vec<(String, String, PairedBy)> {
        p.iter()
            .map(|p| {
                let n = |w: Option<&WorkloadResult>| w.map_or("-".to_string(), |w| w.name.clone());
                (n(p.baseline), n(p.run), p.by)
            })
            .collect()
    }

    /// Issue 37, finding 2: workloads pair by their settings, whatever their labels; the same
    /// label with other settings pairs as not like with like; a lone pair apart in block size
    /// pairs too; the rest stands alone.
    #[test]
    fn regression_workloads_pair_by_settings_not_by_name() {
        let base = crate::compare::tests::run(vec![
            w("a", "random, 100 % read", "4k", 1),
            w("b", "random, 0 % read", "4k", 1),
            w("c", "sequential, 100 % read", "1m", 1),
            w("d", "random, 70 % read", "8k", 1),
            w("e", "sequential, 0 % read", "1m", 1),
        ]);
        let run = crate::compare::tests::run(vec![
            w("b-renamed", "random, 0 % read", "4k", 1),
            w("a", "random, 100 % read", "4k", 1),
            w("c", "sequential, 100 % read", "256k", 1),
            w("d-8k-qd16", "random, 70 % read", "8k", 16),
            w("f", "random, 50 % read", "4k", 1),
        ]);
        let p = pairs(&base, &run);
        let s = |x: &str| x.to_string();
        assert_eq!(
            names(&p),
            [
                (s("a"), s("a"), PairedBy::Settings),
                (s("b"), s("b-renamed"), PairedBy::Settings),
                (s("c"), s("c"), PairedBy::Label),
                (s("d"), s("d-8k-qd16"), PairedBy::SettingsButSize),
                (s("e"), s("-"), PairedBy::Alone),
                (s("-"), s("f"), PairedBy::Alone),
            ]
        );
        assert_eq!(p[1].run_label(), Some("b-renamed"));
        let n = notes(&p);
        assert_eq!(n.len(), 5, "{n:?}");
        assert!(n[0].starts_with("b (baseline) and b-renamed (run) are one workload by their settings"), "{n:?}");
        assert_eq!(n[1], "c: the same name in both runs with other settings: not like with like");
        assert!(n[2].starts_with("d (baseline) and d-8k-qd16 (run) differ only in block size or queue depth"));
        assert_eq!(n[3..], [s("e: only in the baseline"), s("f: only in the run")]);

        // Two candidates apart in block size on a side: no guess.
        let run2 = crate::compare::tests::run(vec![
            w("x", "random, 70 % read", "4k", 1),
            w("y", "random, 70 % read", "64k", 1),
        ]);
        let p = pairs(&base, &run2);
        assert!(p.iter().filter(|p| p.by == PairedBy::SettingsButSize).count() == 0, "{:?}", names(&p));

        // Two workloads of one settings (apart in back-end, say): each keeps its own partner,
        // whatever the order.
        let base3 = crate::compare::tests::run(vec![
            w("sync", "random, 100 % read", "4k", 1),
            w("uring", "random, 100 % read", "4k", 1),
        ]);
        let run3 = crate::compare::tests::run(vec![
            w("uring", "random, 100 % read", "4k", 1),
            w("sync", "random, 100 % read", "4k", 1),
        ]);
        let p = pairs(&base3, &run3);
        assert_eq!(
            names(&p),
            [(s("sync"), s("sync"), PairedBy::Settings), (s("uring"), s("uring"), PairedBy::Settings)]
        );
        assert!(notes(&p).is_empty());

        // Documents without settings pair by name alone.
        let old = |n: &str| w(n, "", "", 0);
        let (x, y) = (
            crate::compare::tests::run(vec![old("a"), old("b")]),
            crate::compare::tests::run(vec![old("b"), old("a")]),
        );
        let p = pairs(&x, &y);
        assert_eq!(names(&p), [(s("a"), s("a"), PairedBy::Label), (s("b"), s("b"), PairedBy::Label)]);
    }
}
