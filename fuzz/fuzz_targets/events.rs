//! A file of events (`iocurve mark --events FILE`, issue 44): any text read as marks, each line
//! a mark or a refusal with its number, never a panic; every time either way (a timestamp with
//! or without an offset, `+S`, `@S`), and a mark's time printed back reads as the same instant.
//! The same text as the array's CSV (`iocurve array`): its series or the lines refused.
#![no_main]

use iocurve_stats::array::read_array_csv;
use iocurve_stats::date::{parse_timestamp, parse_utc_offset};
use iocurve_stats::marks::{MARK_CHARS, read_events};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let lines = text.lines().count();
    for offset in [None, Some(3600)] {
        let e = read_events(text, "f", 1_795_300_000_000_000_000, offset);
        assert!(e.marks.len() + e.refused.len() <= lines);
        for (n, _) in &e.refused {
            assert!((1..=lines).contains(n), "line {n} of {lines}");
        }
        for m in &e.marks {
            assert!(!m.text.is_empty() && m.text.chars().count() <= MARK_CHARS && !m.text.contains('\n'));
            // What the mark says of its time reads back to its millisecond.
            let back = parse_timestamp(&m.at, None).expect("a mark's own time reads");
            assert_eq!(back / 1_000_000, m.at_unix_ns.max(0) / 1_000_000, "{}", m.at);
        }
    }
    match read_array_csv(text, 1_795_300_000_000_000_000, Some(0), None) {
        Ok(csv) => {
            for s in &csv.series {
                assert!(s.points.windows(2).all(|p| p[0].0 <= p[1].0), "in time order");
                assert!(s.points.iter().all(|p| p.1.is_finite()));
            }
        }
        Err(refused) => assert!(refused.iter().all(|(n, _)| (1..=lines.max(1)).contains(n)), "{refused:?}"),
    }
    let _ = parse_timestamp(text, Some(0));
    let _ = parse_utc_offset(text);
});
