//! Sizes and numbers: `parse_size` on any text (a size that parses prints back to the same
//! number), and the command line's numeric options (`--ramp 1,2,4`, `--qd`, `--bs 4k`,
//! `--constant 0xa5`, `--sla-mean-ms`, …) through the real option parser, then as overrides of
//! the quick suite through the plan resolver, as `iocurve run` takes them.
#![no_main]

use clap::Parser;
use iocurve::cli::{Cli, Command};
use iocurve_plan::{Overrides, format_size, parse_size, suites};
use libfuzzer_sys::fuzz_target;

const OPTIONS: &[&str] = &[
    "--ramp",
    "--qd",
    "--bs",
    "--size",
    "--warmup-s",
    "--intervals",
    "--interval-s",
    "--threads",
    "--compress",
    "--dedupe",
    "--dedupe-unit",
    "--constant",
    "--sla-mean-ms",
    "--sla-p99-ms",
    "--stuck-after-s",
];

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(n) = parse_size(text)
    {
        let printed = format_size(n);
        assert_eq!(parse_size(&printed), Ok(n), "{text:?} parsed to {n}, printed as {printed:?}");
    }
    // The first byte picks the option, the rest is its value.
    let Some((&pick, rest)) = data.split_first() else { return };
    let Ok(value) = std::str::from_utf8(rest) else { return };
    let option = OPTIONS[pick as usize % OPTIONS.len()];
    let Ok(cli) = Cli::try_parse_from(["iocurve", "run", "--backend", "null", option, value]) else { return };
    let Command::Run(a) = cli.command else { panic!("`iocurve run` parsed as another command") };
    // The keys `iocurve run` overrides with these options, read from the table of options as
    // `iocurve run` reads them (crates/cli/src/flags.rs).
    let Ok(keys) = a.flags.keys() else { return };
    let _ = suites::load(suites::DEFAULT_SUITE, &Overrides { keys, ..Default::default() });
});
