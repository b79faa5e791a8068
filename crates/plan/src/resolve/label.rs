//! A workload's name is a label that follows the command line's overrides (issue 37, finding
//! 2: `run --bs 8k --workload random-read` stored and compared workloads named
//! `…-random-read-4k`). Where the name states a value an override changes — a block size
//! (`4k`), a queue depth (`qd16`), and, for the keys that have no option yet but may get one,
//! the reads (`read`, `write`, `mixed-70`), the pattern (`random`, `seq`) or the working set
//! (`frontend`, `backend`) — that word is restated; where it states none, the new value is
//! added at the end. Names parted by `-`, compared without case. A workload is identified by
//! its settings, not by this label.

use crate::model::Pattern;
use crate::options::WorkloadKeys;
use crate::size::format_size;
use crate::spec::{BlockSizeSpec, WorkingSetSpec};

fn changed<T: PartialEq>(new: &Option<T>, old: &Option<T>) -> bool {
    new.is_some() && new != old
}

/// `name` with every value `cli` changes against `plan` (the workload's own keys over the
/// defaults) restated.
pub(super) fn follow(name: &str, plan: &WorkloadKeys, cli: &WorkloadKeys) -> String {
    if cli.name.is_some() {
        return name.to_string();
    }
    let mut words: Vec<String> = name.split('-').map(str::to_string).collect();
    if changed(&cli.bs, &plan.bs) {
        let old = plan.bs.as_ref().map(bs_words).unwrap_or_default();
        restate(&mut words, &old, &bs_words(cli.bs.as_ref().unwrap()));
    }
    if changed(&cli.read_pct, &plan.read_pct) {
        // A share is stated as `mixed-70`, `70-30` (reads-writes, as oltp names do) or `mixed`.
        let olds: Vec<Vec<String>> = match plan.read_pct {
            Some(p) if p > 0.0 && p < 100.0 => {
                vec![read_words(p), vec![format!("{p}"), format!("{}", 100.0 - p)], vec!["mixed".into()]]
            }
            Some(p) => vec![read_words(p)],
            None => Vec::new(),
        };
        let old = olds.into_iter().find(|o| position(&words, o).is_some()).unwrap_or_default();
        restate(&mut words, &old, &read_words(cli.read_pct.unwrap()));
    }
    if changed(&cli.pattern, &plan.pattern) {
        // `seq` and `sequential`, `random` and `rand` alike.
        let olds: &[&str] = match plan.pattern {
            Some(Pattern::Sequential) => &["seq", "sequential"],
            Some(Pattern::Random) => &["random", "rand"],
            None => &[],
        };
        let new = match cli.pattern.unwrap() {
            Pattern::Sequential => "seq",
            Pattern::Random => "random",
        };
        let old = olds.iter().find(|o| position(&words, &[o.to_string()]).is_some());
        restate(&mut words, &old.map(|o| vec![o.to_string()]).unwrap_or_default(), &[new.to_string()]);
    }
    if changed(&cli.working_set, &plan.working_set) {
        let old = plan.working_set.as_ref().map(working_set_words).unwrap_or_default();
        restate(&mut words, &old, &working_set_words(cli.working_set.as_ref().unwrap()));
    }
    if changed(&cli.queue_depth, &plan.queue_depth) {
        let old = plan.queue_depth.map(|q| vec![format!("qd{q}")]).unwrap_or_default();
        restate(&mut words, &old, &[format!("qd{}", cli.queue_depth.unwrap())]);
    }
    words.join("-")
}

fn bs_words(b: &BlockSizeSpec) -> Vec<String> {
    match b {
        BlockSizeSpec::One(b) => vec![format_size(*b)],
        BlockSizeSpec::Mix(m) => {
            vec![m.iter().map(|(b, w)| format!("{}_{w}", format_size(*b))).collect::<Vec<_>>().join("_")]
        }
    }
}

fn read_words(pct: f64) -> Vec<String> {
    match pct {
        p if p >= 100.0 => vec!["read".into()],
        p if p <= 0.0 => vec!["write".into()],
        p => vec!["mixed".into(), format!("{p}")],
    }
}

fn working_set_words(w: &WorkingSetSpec) -> Vec<String> {
    match w {
        WorkingSetSpec::Frontend => vec!["frontend".into()],
        WorkingSetSpec::Backend => vec!["backend".into()],
        WorkingSetSpec::Range { start, end } => vec![format!("range_{}_{}", format_size(*start), format_size(*end))],
    }
}

/// Where `seq` stands in `words` (compared without case).
fn position(words: &[String], seq: &[String]) -> Option<usize> {
    if seq.is_empty() || seq.len() > words.len() {
        return None;
    }
    (0..=words.len() - seq.len())
        .find(|&i| words[i..i + seq.len()].iter().zip(seq).all(|(a, b)| a.eq_ignore_ascii_case(b)))
}

/// Replaces the words `old` with `new` where they stand; otherwise adds `new` at the end.
fn restate(words: &mut Vec<String>, old: &[String], new: &[String]) {
    if let Some(i) = position(words, old) {
        words.splice(i..i + old.len(), new.iter().cloned());
    } else {
        words.extend(new.iter().cloned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(f: impl FnOnce(&mut WorkloadKeys)) -> WorkloadKeys {
        let mut k = WorkloadKeys::default();
        f(&mut k);
        k
    }

    fn plan() -> WorkloadKeys {
        keys(|k| {
            k.bs = Some(BlockSizeSpec::One(4096));
            k.read_pct = Some(100.0);
            k.pattern = Some(Pattern::Random);
            k.working_set = Some(WorkingSetSpec::Backend);
            k.queue_depth = Some(1);
        })
    }

    #[test]
    fn the_words_a_name_states_follow_the_overrides() {
        let n = "backend-random-read-4k";
        assert_eq!(follow(n, &plan(), &keys(|k| k.bs = Some(BlockSizeSpec::One(8192)))), "backend-random-read-8k");
        assert_eq!(follow(n, &plan(), &keys(|k| k.queue_depth = Some(16))), "backend-random-read-4k-qd16");
        assert_eq!(follow("w-qd1", &plan(), &keys(|k| k.queue_depth = Some(16))), "w-qd16");
        assert_eq!(follow(n, &plan(), &keys(|k| k.read_pct = Some(70.0))), "backend-random-mixed-70-4k");
        assert_eq!(follow(n, &plan(), &keys(|k| k.read_pct = Some(0.0))), "backend-random-write-4k");
        assert_eq!(follow(n, &plan(), &keys(|k| k.pattern = Some(Pattern::Sequential))), "backend-seq-read-4k");
        assert_eq!(
            follow(n, &plan(), &keys(|k| k.working_set = Some(WorkingSetSpec::Frontend))),
            "frontend-random-read-4k"
        );
        // Several at once.
        let both = keys(|k| {
            k.bs = Some(BlockSizeSpec::One(1 << 20));
            k.pattern = Some(Pattern::Sequential);
        });
        assert_eq!(follow(n, &plan(), &both), "backend-seq-read-1m");
        // A mixed workload's share, stated or not.
        let mixed = keys(|k| k.read_pct = Some(70.0));
        assert_eq!(follow("backend-mixed-70-8k", &mixed, &keys(|k| k.read_pct = Some(50.0))), "backend-mixed-50-8k");
        assert_eq!(follow("oltp-mixed", &mixed, &keys(|k| k.read_pct = Some(100.0))), "oltp-read");
        // The oltp suite's `70-30` (reads-writes).
        assert_eq!(
            follow("backend-oltp-70-30-8k", &mixed, &keys(|k| k.read_pct = Some(100.0))),
            "backend-oltp-read-8k"
        );
        assert_eq!(
            follow("backend-oltp-70-30-8k", &mixed, &keys(|k| k.read_pct = Some(60.0))),
            "backend-oltp-mixed-60-8k"
        );
        // A name that states nothing gets the new value at its end.
        assert_eq!(follow("db", &plan(), &keys(|k| k.bs = Some(BlockSizeSpec::One(8192)))), "db-8k");
    }

    #[test]
    fn the_same_value_or_a_name_given_leaves_the_name() {
        let n = "backend-random-read-4k";
        assert_eq!(follow(n, &plan(), &keys(|k| k.bs = Some(BlockSizeSpec::One(4096)))), n);
        assert_eq!(follow(n, &plan(), &keys(|k| k.ramp = Some(vec![1, 2]))), n);
        let named = keys(|k| {
            k.name = Some(n.into());
            k.bs = Some(BlockSizeSpec::One(8192));
        });
        assert_eq!(follow(n, &plan(), &named), n);
    }
}
