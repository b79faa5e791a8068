//! fio job files: any text through the import as `iocurve run job.fio` reads it (sections,
//! comments, includes, `${VAR}`, sizes under kb_base, the comma rule, bssplit, rw modes), strict
//! and lenient, then the plan it becomes through the plan resolver. Must never panic; a plan it
//! prints with `plan --from-fio` must parse back to the same plan.
#![no_main]

use iocurve_plan::{Overrides, fio, parse_str};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // Includes resolve against the working directory: only names without a path are read, so
    // the fuzzer cannot make the import read the machine's files.
    if text.contains("include") && (text.contains('/') || text.contains("..")) {
        return;
    }
    for lenient in [false, true] {
        let Ok(import) = fio::import_str(text, "fuzz.fio", lenient) else { continue };
        let _ = import.warning();
        let Ok(plan) = import.resolve("fuzz.fio", &Overrides::default()) else { continue };
        let toml = import.to_toml("fuzz.fio");
        let again = parse_str(&toml, "printed.toml", &Overrides::default())
            .unwrap_or_else(|e| panic!("the printed plan does not parse: {e}\n{toml}"));
        assert_eq!(iocurve_plan::Plan { source: plan.source.clone(), ..again }, plan, "{toml}");
    }
});
