//! The workload flags of `run`, and the data flags `precondition` and `datacheck` share with it,
//! made from the plan crate's table of workload options (`iocurve_plan::options`): a flag's
//! name, value and help are written once, there, beside the plan key it sets.

use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use iocurve_plan::options::{DATA_KEYS, FlagKind, WORKLOAD_OPTIONS, keys_from_flags};
use iocurve_plan::{PlanError, WorkloadKeys};

/// The options of `keys` (None: every one with a flag).
fn options(
    keys: Option<&[&str]>,
) -> impl Iterator<Item = (&'static str, &'static iocurve_plan::options::WorkloadOption)> {
    WORKLOAD_OPTIONS
        .iter()
        .filter(move |o| keys.is_none_or(|k| k.contains(&o.key)))
        .filter_map(|o| o.flag.map(|f| (f, o)))
}

fn augment(mut cmd: Command, keys: Option<&[&str]>) -> Command {
    for (flag, o) in options(keys) {
        let arg = Arg::new(o.key).long(flag).help(o.help);
        cmd = cmd.arg(match o.kind {
            FlagKind::Switch(_) => arg.action(ArgAction::SetTrue),
            // Set, not the default Append of a list: `--ramp 1,4,16 --ramp 1` is refused like
            // any other option given twice, instead of running the ramp [1, 4, 16, 1].
            FlagKind::List => arg.value_name(o.value_name).value_delimiter(',').action(ArgAction::Set),
            FlagKind::Number | FlagKind::Text => arg.value_name(o.value_name).action(ArgAction::Set),
        });
    }
    cmd
}

fn given(m: &ArgMatches, keys: Option<&[&str]>) -> Vec<(&'static str, Vec<String>)> {
    let mut out = Vec::new();
    for (_, o) in options(keys) {
        match o.kind {
            FlagKind::Switch(_) => {
                if m.get_flag(o.key) {
                    out.push((o.key, Vec::new()));
                }
            }
            _ => {
                if let Some(v) = m.get_many::<String>(o.key) {
                    out.push((o.key, v.cloned().collect()));
                }
            }
        }
    }
    out
}

macro_rules! flag_set {
    ($(#[$doc:meta])* $name:ident, $keys:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default)]
        pub struct $name {
            /// (key, values) as given, in the table's order.
            pub given: Vec<(&'static str, Vec<String>)>,
        }

        impl $name {
            /// The workload keys the flags set, read as a plan file's values; errors name the flag.
            pub fn keys(&self) -> Result<WorkloadKeys, PlanError> {
                keys_from_flags(&self.given)
            }
        }

        impl FromArgMatches for $name {
            fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
                Ok($name { given: given(m, $keys) })
            }
            fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
                *self = Self::from_arg_matches(m)?;
                Ok(())
            }
        }

        impl Args for $name {
            fn augment_args(cmd: Command) -> Command {
                augment(cmd, $keys)
            }
            fn augment_args_for_update(cmd: Command) -> Command {
                augment(cmd, $keys)
            }
        }
    };
}

flag_set!(
    /// Every workload key that has a flag (`--qd`, `--bs`, `--ramp`, …).
    WorkloadFlags,
    None
);
flag_set!(
    /// The data pattern of written blocks (`--compress`, `--dedupe`, `--dedupe-unit`, `--constant`).
    DataFlags,
    Some(DATA_KEYS)
);

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use iocurve_plan::options::option;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        w: WorkloadFlags,
    }

    /// The README's two tables — options of `run` and keys of a workload — against the table
    /// they are written from: every flag beside its key, every key in order with its default.
    #[test]
    fn the_readme_tables_match_the_table_of_options() {
        let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
        let rows: Vec<Vec<String>> = readme
            .lines()
            .filter(|l| l.starts_with("| `"))
            .map(|l| l.trim_matches('|').split(" | ").map(|c| c.trim().to_string()).collect())
            .collect();
        let plain = |c: &str| c.replace(['`', '"'], "");
        for o in WORKLOAD_OPTIONS {
            if let Some(flag) = o.flag {
                let row = rows
                    .iter()
                    .find(|r| r[0].starts_with(&format!("`--{flag}")))
                    .unwrap_or_else(|| panic!("README: no option row for --{flag}"));
                assert!(row[1].starts_with(&format!("`{}", o.key)), "README: --{flag} sets {}, not {}", o.key, row[1]);
            }
        }
        // The key table: from its header to the first line that is not a row.
        let table = readme.split("| key | default | meaning |").nth(1).expect("README: the workload key table");
        let keys: Vec<Vec<String>> = table
            .lines()
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .map(|l| l.trim_matches('|').split(" | ").map(|c| c.trim().to_string()).collect())
            .collect();
        let names: Vec<String> = keys.iter().map(|r| plain(&r[0])).collect();
        let want: Vec<&str> = WORKLOAD_OPTIONS.iter().map(|o| o.key).collect();
        assert_eq!(names, want, "README: the workload key table lists every key, in the table's order");
        for r in &keys {
            let o = option(&plain(&r[0])).unwrap();
            if let Some(d) = o.default {
                assert_eq!(plain(&r[1]), plain(d), "README: the default of {}", o.key);
            }
        }
    }

    #[test]
    fn flags_come_from_the_table_and_read_as_plan_values() {
        let t =
            T::try_parse_from(["t", "--qd", "8", "--ramp", "1,2,4", "--buffered", "--constant", "0xa5", "--bs", "8k"])
                .unwrap();
        let k = t.w.keys().unwrap();
        assert_eq!(k.queue_depth, Some(8));
        assert_eq!(k.ramp, Some(vec![1, 2, 4]));
        assert_eq!(k.direct, Some(false));
        assert_eq!(k.constant, Some(0xa5));
        assert_eq!(k.bs, Some(iocurve_plan::BlockSizeSpec::One(8192)));
        let e = T::try_parse_from(["t", "--ramp", "1,4,16", "--ramp", "1"]).err().unwrap();
        assert_eq!(e.kind(), clap::error::ErrorKind::ArgumentConflict, "{e}");
        let bad = T::try_parse_from(["t", "--qd", "lots"]).unwrap().w.keys().unwrap_err();
        assert_eq!(bad.key.as_deref(), Some("--qd"));
    }
}
