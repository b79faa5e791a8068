//! The preconditioning state: the JSON an interrupted `iocurve precondition` saves in the
//! results database and reads back to resume (`{"watermark": N, "above": [...]}`). Whatever
//! the stored text, resuming from it must not crash and must finish the pass: every chunk of
//! the target written, as the command checks before it records the target as preconditioned.
#![no_main]

use std::sync::OnceLock;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use iocurve::parse_precondition_state;
use iocurve_engine::TargetSet;
use iocurve_engine::precondition::{PreConfig, PreState, chunks, precondition};
use iocurve_fuzz::{scratch_target, write_seeds};
use iocurve_plan::DataPattern;
use libfuzzer_sys::fuzz_target;

/// 16 chunks of 4 KiB.
const SIZE: u64 = 64 << 10;
const BS: u64 = 4096;

fn target() -> &'static TargetSet {
    static T: OnceLock<TargetSet> = OnceLock::new();
    T.get_or_init(|| scratch_target("precondition.dat", SIZE))
}

fn seeds() -> Vec<(String, Vec<u8>)> {
    [
        r#"{"watermark":0,"above":[]}"#,
        r#"{"watermark":3,"above":[5,9]}"#,
        r#"{"watermark":16,"above":[]}"#,
        r#"{"watermark":10,"above":[11,12,13,14,15]}"#,
        r#"{"above":[1,2],"watermark":0}"#,
    ]
    .iter()
    .enumerate()
    .map(|(i, s)| (format!("{i}.json"), s.as_bytes().to_vec()))
    .collect()
}

fuzz_target!(init: write_seeds("precondition_state", seeds), |data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let t = &target().targets[0];
    let n = chunks(t.size, BS);
    // What `iocurve precondition` resumes from (crates/run/src/precondition.rs); none: start over.
    let Some(state) = parse_precondition_state(text, n) else { return };
    let cfg = PreConfig { bs: BS, qd: 2, pattern: DataPattern::default(), dedupe_unit: 4096 };
    let stop = AtomicBool::new(false);
    let mut last: Option<PreState> = None;
    let mut progress = |p: &iocurve_engine::precondition::PreProgress| {
        assert!(p.done_bytes <= p.total_bytes, "progress beyond the target: {} of {}", p.done_bytes, p.total_bytes);
        last = Some(p.state.clone());
    };
    let end = precondition(t, &cfg, &state, &stop, Duration::from_secs(3600), Duration::from_secs(3600), &mut progress).expect("precondition");
    assert_eq!(end.written_chunks(), n, "resuming from {text} leaves the pass unfinished: {end:?}");
    assert_eq!(last.as_ref(), Some(&end), "the last progress report is the end state");
});
