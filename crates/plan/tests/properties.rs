//! Property tests of the plan's parsers (issue 13, beside the fuzz targets in fuzz/): sizes
//! print and parse back for every u64 and never wrap, no text makes a parser panic, and every
//! workload a plan resolves to passes the check an agent applies to step requests.

use iocurve_plan::{Overrides, check_workload, format_size, parse_size, parse_str};
use proptest::prelude::*;

/// Plan keys and table headers, the real ones and a few near misses.
const KEYS: &[&str] = &[
    "name",
    "description",
    "sla_mean_ms",
    "sla_p99_ms",
    "precondition",
    "targets",
    "read_pct",
    "bs",
    "pattern",
    "working_set",
    "frontend_blocks",
    "queue_depth",
    "ramp",
    "warmup_s",
    "intervals",
    "interval_s",
    "direct",
    "backend",
    "threads",
    "compress",
    "dedupe",
    "dedupe_unit",
    "constant",
    "on_error",
    "verify",
    "kind",
    "share",
    "from_s",
    "to_s",
    "latency_ms",
    "weight",
    "address",
    "rampp",
];

/// Values of every type and edge a key may meet.
const VALUES: &[&str] = &[
    "0",
    "1",
    "-1",
    "3",
    "70",
    "100",
    "512",
    "4096",
    "4294967296",
    "18446744073709551615",
    "0.5",
    "0.99",
    "1e400",
    "inf",
    "-inf",
    "nan",
    "true",
    "\"w\"",
    "\"a b\"",
    "\"4k\"",
    "\"64k\"",
    "\"1000t\"",
    "\"99999999t\"",
    "\"random\"",
    "\"sequential\"",
    "\"frontend\"",
    "\"backend\"",
    "\"io_uring\"",
    "\"psync\"",
    "\"null\"",
    "\"stop-target\"",
    "\"eio\"",
    "\"latency\"",
    "\"stall\"",
    "\"torn-write\"",
    "\"/dev/loop9\"",
    "[]",
    "[0]",
    "[1, 2, 4]",
    "[4, 2]",
    "[\"/dev/loop9\"]",
    "{}",
    "{ start = \"1m\", end = \"2m\" }",
    "{ start = \"2m\", end = \"1m\" }",
    "{ start = 0 }",
    "{ \"4k\" = 3, \"64k\" = 1 }",
    "{ \"4k\" = 1, \"4096\" = 2 }",
    "{ \"4k\" = 0 }",
    "{ \"4k\" = -1 }",
];

const TABLES: &[&str] = &["[[workloads]]", "[defaults]", "[[faults]]", "[[groups]]", "[[hosts]]", "[defaults.x]"];

/// One line of a TOML-ish plan: a table header, a new named workload, or `key = value`.
fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => prop::sample::select(TABLES).prop_map(String::from),
        2 => (0u8..4).prop_map(|i| format!("[[workloads]]\nname = \"w{i}\"")),
        6 => (prop::sample::select(KEYS), prop::sample::select(VALUES)).prop_map(|(k, v)| format!("{k} = {v}")),
        1 => "\\PC{0,12}",
    ]
}

/// Workload keys with values that are mostly valid, and a few just out of range.
const WORKLOAD_VALUES: &[(&str, &[&str])] = &[
    ("read_pct", &["0", "30", "70", "100", "100.5"]),
    ("bs", &["\"4k\"", "8192", "\"1m\"", "{ \"4k\" = 3, \"64k\" = 1 }", "{ \"4k\" = 1, \"4096\" = 2 }", "\"1000\""]),
    ("pattern", &["\"random\"", "\"sequential\""]),
    (
        "working_set",
        &["\"frontend\"", "\"backend\"", "{ start = \"1m\", end = \"2m\" }", "{ start = 0, end = \"1t\" }"],
    ),
    ("frontend_blocks", &["1", "1000", "0"]),
    ("queue_depth", &["1", "4", "4096", "4097"]),
    ("ramp", &["[1]", "[1, 2, 4]", "[1, 65536]", "[2, 2]"]),
    ("warmup_s", &["0", "0.5", "86400"]),
    ("intervals", &["1", "3", "100000"]),
    ("interval_s", &["0.1", "1", "86400", "0.05"]),
    ("direct", &["true", "false"]),
    ("backend", &["\"io_uring\"", "\"psync\"", "\"null\""]),
    ("threads", &["0", "4", "1024"]),
    ("compress", &["0", "0.4", "0.99"]),
    ("dedupe", &["1", "2", "1000"]),
    ("dedupe_unit", &["512", "\"4k\"", "\"8k\""]),
    ("constant", &["0", "165", "255"]),
    ("on_error", &["\"continue\"", "\"stop-target\"", "\"abort\""]),
    ("verify", &["true", "false"]),
];

const FAULTS: &[&str] = &[
    "kind = \"eio\"\nshare = 0.5",
    "kind = \"latency\"\nlatency_ms = 20\nfrom_s = 1\nto_s = 2",
    "kind = \"stall\"\nfrom_s = 0.5\nto_s = 1",
    "kind = \"drop-write\"\ntarget = \"/dev/loop9\"",
    "kind = \"torn-write\"\nshare = 1",
    "kind = \"misdirect-write\"\nto_s = inf",
];

/// A plan of one to three workloads with some keys each, in `[defaults]` too, and faults: most
/// resolve, some are refused.
fn plan_text() -> impl Strategy<Value = String> {
    let keys = || {
        prop::collection::vec(
            prop::sample::select(WORKLOAD_VALUES)
                .prop_flat_map(|(k, vs)| prop::sample::select(vs).prop_map(move |v| format!("{k} = {v}"))),
            0..5,
        )
    };
    (keys(), prop::collection::vec(keys(), 1..4), prop::collection::vec(prop::sample::select(FAULTS), 0..3)).prop_map(
        |(defaults, workloads, faults)| {
            let mut t = String::from("targets = [\"/dev/loop9\"]\n[defaults]\n");
            defaults.iter().for_each(|l| t += &format!("{l}\n"));
            for (i, w) in workloads.iter().enumerate() {
                t += &format!("[[workloads]]\nname = \"w{i}\"\n");
                w.iter().for_each(|l| t += &format!("{l}\n"));
            }
            faults.iter().for_each(|f| t += &format!("[[faults]]\n{f}\n"));
            t
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// Every u64 prints to a size that parses back to it (the crate's own test stops at 2^50).
    #[test]
    fn every_u64_prints_and_parses_back(n in any::<u64>()) {
        prop_assert_eq!(parse_size(&format_size(n)), Ok(n));
    }

    /// A number with a unit is the number times the unit, or refused as too large: never
    /// wrapped.
    #[test]
    fn units_multiply_or_refuse(
        n in any::<u64>(),
        (unit, shift) in prop::sample::select(vec![("", 0u32), ("b", 0), ("k", 10), ("KiB", 10), ("m", 20), ("G", 30), ("tb", 40)]),
    ) {
        let text = format!("{n}{unit}");
        match n.checked_mul(1u64 << shift) {
            Some(v) => prop_assert_eq!(parse_size(&text), Ok(v)),
            None => prop_assert!(parse_size(&text).unwrap_err().contains("too large")),
        }
    }

    /// Whatever the text, parsing a size never panics, and a size that parses prints in its
    /// canonical form, which parses to the same number.
    #[test]
    fn sizes_parse_or_explain(s in prop_oneof!["\\PC{0,24}", "[ 0-9]{0,22}(|b|k|K|kb|KiB|m|mib|g|GB|t|TiB|x| k|kk)[ ]{0,2}"]) {
        match parse_size(&s) {
            Ok(n) => {
                let printed = format_size(n);
                prop_assert_eq!(parse_size(&printed), Ok(n));
                prop_assert_eq!(format_size(parse_size(&printed).unwrap()), printed);
            }
            Err(e) => prop_assert!(e.contains(&s), "the error names the text: {}", e),
        }
    }

    /// Plan text built from real keys and edge values (mostly invalid) resolves or is refused
    /// with a message, never a panic; and what resolves is what an agent accepts.
    #[test]
    fn toml_ish_plans_resolve_or_explain(text in prop_oneof![prop::collection::vec(line(), 0..16).prop_map(|l| l.join("\n")), plan_text()]) {
        match parse_str(&text, "p.toml", &Overrides::default()) {
            Ok(plan) => {
                for w in &plan.workloads {
                    if let Err(e) = check_workload(w, &plan.faults, "request") {
                        prop_assert!(false, "workload {} of a valid plan fails the agents' check: {}\n{}", w.name, e, text);
                    }
                }
            }
            Err(e) => prop_assert!(!e.message.is_empty()),
        }
    }
}
