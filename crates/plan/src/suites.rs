//! Built-in suites: embedded TOML plans, parsed by the same code as plan files, so that
//! `iocurve plan --suite NAME` prints exactly what runs.

use crate::{Overrides, Plan, PlanError, parse_str};

#[derive(Debug)]
pub struct Suite {
    pub name: &'static str,
    pub toml: &'static str,
}

pub const SUITES: &[Suite] = &[
    Suite { name: "quick", toml: include_str!("suites/quick.toml") },
    Suite { name: "frontend-backend", toml: include_str!("suites/frontend-backend.toml") },
    Suite { name: "blocksize-sweep", toml: include_str!("suites/blocksize-sweep.toml") },
    Suite { name: "oltp", toml: include_str!("suites/oltp.toml") },
];

/// The default suite of `iocurve run`.
pub const DEFAULT_SUITE: &str = "quick";

pub fn find(name: &str) -> Result<&'static Suite, PlanError> {
    SUITES.iter().find(|s| s.name == name).ok_or_else(|| {
        let names: Vec<&str> = SUITES.iter().map(|s| s.name).collect();
        let hint = crate::error::did_you_mean(name, names.iter().copied())
            .map(|s| format!(" (did you mean `{s}`?)"))
            .unwrap_or_default();
        PlanError::new(
            "command line",
            None,
            Some("--suite".into()),
            format!("unknown suite `{name}`{hint}; the suites are: {} (see `iocurve suites`)", names.join(", ")),
        )
    })
}

pub fn load(name: &str, overrides: &Overrides) -> Result<Plan, PlanError> {
    let suite = find(name)?;
    parse_str(suite.toml, &format!("suite:{}", suite.name), overrides)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Pattern, WorkingSet};

    #[test]
    fn every_suite_parses_and_has_unique_descriptive_names() {
        for s in SUITES {
            let p = load(s.name, &Overrides::default()).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(p.name, s.name);
            assert!(!p.description.is_empty());
            for w in &p.workloads {
                assert!(w.name.contains(w.working_set.label()), "{} says its working set", w.name);
                // Mixed and OLTP workloads are random by convention; sequential ones always say so.
                assert_eq!(w.name.contains("-seq-"), w.pattern == Pattern::Sequential, "{} says its pattern", w.name);
            }
        }
    }

    #[test]
    fn quick_has_exactly_the_ten_workloads() {
        let p = load("quick", &Overrides::default()).unwrap();
        let names: Vec<&str> = p.workloads.iter().map(|w| w.name.as_str()).collect();
        let mut expected = Vec::new();
        for ws in ["frontend", "backend"] {
            for n in ["random-read-4k", "random-write-4k", "seq-read-1m", "seq-write-1m", "mixed-70-8k"] {
                expected.push(format!("{ws}-{n}"));
            }
        }
        assert_eq!(names, expected);
        let mixed = &p.workloads[4];
        assert_eq!((mixed.read_pct, mixed.pattern, mixed.bs[0].bytes), (70.0, Pattern::Random, 8192));
        assert!(matches!(p.workloads[0].working_set, WorkingSet::Frontend { blocks: 1000 }));
        assert!(p.workloads.iter().all(|w| w.ramp == [1, 2, 4, 8, 16, 32]));
        // "About two minutes": the plan itself, without target preparation.
        assert!((100.0..=150.0).contains(&p.total_seconds()), "{}", p.total_seconds());
    }

    #[test]
    fn the_other_suites_match_their_descriptions() {
        let fb = load("frontend-backend", &Overrides::default()).unwrap();
        assert_eq!(fb.workloads.len(), 10);
        assert!(fb.workloads.iter().all(|w| w.ramp.last() == Some(&128) && w.intervals == 3 && w.interval_s == 20.0));
        let sweep = load("blocksize-sweep", &Overrides::default()).unwrap();
        assert_eq!(sweep.workloads.len(), 18);
        assert!(sweep.workloads.iter().all(|w| w.ramp.last() == Some(&512)));
        let oltp = load("oltp", &Overrides::default()).unwrap();
        let mixes: Vec<f64> = oltp.workloads.iter().map(|w| w.read_pct).collect();
        assert_eq!(mixes, vec![60.0, 70.0]);
    }

    #[test]
    fn unknown_suite_suggests() {
        let e = find("quik").unwrap_err();
        assert!(e.to_string().contains("did you mean `quick`"), "{e}");
    }
}
