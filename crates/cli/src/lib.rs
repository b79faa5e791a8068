//! The `iocurve` binary: parse ([`cli`]) → dispatch → print. Each command turns its options
//! into calls of the library crates — a run into `iocurve_run::Runner`, heard by the
//! [`terminal`] — and its outcome into output and an exit code.

mod agent;
mod array;
mod capacity;
pub mod cli;
mod datacheck;
mod deploy;
mod dry_run;
pub mod flags;
mod invocation;
mod mark;
pub mod out;
mod precondition;
pub mod run;
#[cfg(test)]
mod setup;
mod show;
pub mod signals;
mod simulate;
mod size;
mod stored_run;
mod terminal;
mod trace;
mod verification;
mod words;

use std::process::ExitCode;

use cli::{Cli, Command};
use iocurve_plan::suites;
/// A command's error: the runner's, with its exit code.
pub use iocurve_run::Error as CliError;
/// The stored state of an interrupted precondition pass (public for the fuzz target `precondition_state`).
pub use iocurve_run::precondition::parse_state as parse_precondition_state;

/// `IOCURVE_LOG` as a filter: a bare level (`info`, `debug`) applies to iocurve's own crates
/// (the network libraries' debug output would drown it); anything else is `target=level` pairs
/// (tracing's `Targets` syntax).
fn log_filter(value: Option<&str>) -> String {
    const OURS: &[&str] = &[
        "iocurve",
        "iocurve_engine",
        "iocurve_target",
        "iocurve_verify",
        "iocurve_data",
        "iocurve_net",
        "iocurve_store",
        "iocurve_plan",
        "iocurve_analysis",
        "iocurve_report",
        "iocurve_run",
        "iocurve_metrics",
    ];
    match value.map(str::trim) {
        None | Some("") => "warn".into(),
        Some(v) if !v.contains(['=', ',']) => std::iter::once("warn".to_string())
            .chain(OURS.iter().map(|c| format!("{c}={v}")))
            .collect::<Vec<_>>()
            .join(","),
        Some(v) => v.to_string(),
    }
}

/// Logging to stderr, filtered by `IOCURVE_LOG` as [`log_filter`] reads it. The filter is
/// tracing's `Targets` (`target=level` pairs and a default level), not its `EnvFilter`: the
/// span and field matches `EnvFilter` adds need a regex engine, 316 KiB of the shipped binary
/// and a build of its own, for a syntax no one here used (#34). A filter that does not parse is
/// said once, on stderr, and `warn` applies.
pub fn init_logging() {
    use std::io::IsTerminal;
    use tracing_subscriber::filter::Targets;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let value = std::env::var("IOCURVE_LOG").ok();
    let filter = log_filter(value.as_deref()).parse::<Targets>().unwrap_or_else(|e| {
        eprintln!("iocurve: IOCURVE_LOG={:?} is not a log filter ({e}); logging at warn", value.unwrap_or_default());
        Targets::new().with_default(tracing::Level::WARN)
    });
    let ansi = std::io::stderr().is_terminal();
    let fmt = tracing_subscriber::fmt::layer().with_ansi(ansi).with_writer(std::io::stderr);
    let _ = tracing_subscriber::registry().with(fmt).with(filter).try_init();
}

/// Tables printed to a terminal fit its width (cut by columns); to a pipe or a file they are
/// plain text with whole rows (no box characters: scripts read them).
pub fn fit_tables_to_terminal() {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        iocurve_report::terminal::plain_tables(true);
        return;
    }
    let mut ws = libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: TIOCGWINSZ fills the winsize it is given, nothing else.
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) } == 0;
    if ok && ws.ws_col > 0 {
        iocurve_report::terminal::fit_tables_to(ws.ws_col as usize);
    }
}

/// `iocurve man`: the pages come from the same clap definition as `--help`.
fn man(dir: Option<&std::path::Path>) -> Result<ExitCode, CliError> {
    let cmd = <cli::Cli as clap::CommandFactory>::command();
    match dir {
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(cmd)
                .render(&mut page)
                .map_err(|e| CliError::Runtime(format!("cannot render the man page: {e}")))?;
            crate::out!("{}", String::from_utf8_lossy(&page));
        }
        Some(d) => {
            if !d.is_dir() {
                return Err(CliError::Usage(format!("-o {}: not a directory; create it first", d.display())));
            }
            clap_mangen::generate_to(cmd, d)
                .map_err(|e| CliError::Runtime(format!("cannot write the man pages into {}: {e}", d.display())))?;
            crate::outln!(
                "wrote the man pages into {} (read one with `man -l {}/iocurve.1`)",
                d.display(),
                d.display()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn dispatch(cli: Cli) -> Result<ExitCode, CliError> {
    match cli.command {
        Command::Run(args) => run::run(*args),
        Command::Suites => {
            for s in suites::SUITES {
                let plan = suites::load(s.name, &Default::default())?;
                let default = if s.name == suites::DEFAULT_SUITE { " (default)" } else { "" };
                crate::outln!(
                    "{}{default}\n    {}\n    {} workloads, about {} per target set",
                    s.name,
                    plan.description,
                    plan.workloads.len(),
                    iocurve_report::format::duration(plan.total_seconds())
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Plan { from_fio: Some(path), fio_lenient, .. } => {
            let import = iocurve_plan::fio::import(&path, fio_lenient)?;
            let source = path.display().to_string();
            // What runs must resolve: the same checks as `run job.fio`, before printing; the
            // warning block explains a size fio read its own way.
            if let Err(e) = import.resolve(&source, &Default::default()) {
                if let Some(w) = import.warning() {
                    crate::errln!("{w}");
                }
                return Err(e.into());
            }
            crate::out!("{}", import.to_toml(&source));
            Ok(ExitCode::SUCCESS)
        }
        Command::Plan { from_trace: Some(path), .. } => trace::plan_command(&path),
        Command::Plan { suite, .. } => {
            crate::out!("{}", suites::find(&suite)?.toml);
            Ok(ExitCode::SUCCESS)
        }
        Command::Completions { shell } => {
            let mut cmd = <cli::Cli as clap::CommandFactory>::command();
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut cmd, "iocurve", &mut out);
            crate::out!("{}", String::from_utf8_lossy(&out));
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { output } => man(output.as_deref()),
        Command::Precondition(args) => precondition::command(args),
        Command::Verify(args) => verification::command(args),
        Command::Size { command } => size::command(command),
        Command::Agent(args) => agent::command(args),
        Command::Deploy { command: cli::DeployCommand::Kubernetes(args) } => {
            deploy::kubernetes(&deploy::K8sOptions::from(&args), args.output.as_deref())
        }
        Command::Certs { command: cli::CertsCommand::Init { dir, names } } => {
            let f = iocurve_net::certs::init(&dir, &names)?;
            crate::outln!(
                "wrote {} and {} (CA, its key private), {} and {} (agent), {} and {} (coordinator), {} (token)",
                f.ca.display(),
                f.ca_key.display(),
                f.agent_cert.display(),
                f.agent_key.display(),
                f.client_cert.display(),
                f.client_key.display(),
                f.token.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Certs { command: cli::CertsCommand::Rotate { dir, names } } => {
            let r = iocurve_net::certs::rotate(&dir, &names)?;
            crate::outln!(
                "rotated in {}: a new CA (ca.pem, ca.key), agent.pem, agent.key, client.pem, client.key, token{} — give every agent its new ca.pem, certificate, key and token and restart it, then run coordinators with the new files; until then the two sides refuse each other, and nothing the old CA signed passes where the new files are",
                dir.display(),
                if r.hosts.is_empty() {
                    String::new()
                } else {
                    format!(
                        ", and for {} host(s) ({}) their certificate, key and token",
                        r.hosts.len(),
                        r.hosts.join(", ")
                    )
                }
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Certs { command: cli::CertsCommand::AddHost { dir, name, aliases } } => {
            let (cert, key) = iocurve_net::certs::add_host(&dir, &name, &aliases)?;
            crate::outln!(
                "wrote {} and {} for agent host {name}, and its own token beside them (copy them to that host with ca.pem; with `run --token-per-host` an agent needs only its own token)",
                cert.display(),
                key.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Datacheck { bs, size, file, data } => datacheck::datacheck(bs, size, file.as_deref(), &data),
        Command::Trace { file, json } => trace::command(&file, json),
        Command::Runs { db, json } => show::runs(&db.db, json),
        Command::Show { run, db, sla } => show::show(&db.db, run, &sla),
        Command::Delete { run, db } => show::delete(&db.db, run),
        Command::Array { run, file, time_column, iops, mbps, utc_offset, shift_s, db } => {
            let clock = mark::Clock::new(utc_offset.as_deref(), shift_s)?;
            let cols = array::Columns { time: time_column.as_deref(), iops: iops.as_deref(), mbps: mbps.as_deref() };
            array::import(&db.db, run, &file, &cols, &clock)
        }
        Command::Mark { text, run, at, events, utc_offset, shift_s, db } => {
            let clock = mark::Clock::new(utc_offset.as_deref(), shift_s)?;
            match (events, at) {
                (Some(file), _) => mark::import(&db.db, run.unwrap_or_default(), &file, &clock),
                (None, Some(at)) => {
                    mark::add(&db.db, run.unwrap_or_default(), &at, text.as_deref().unwrap_or(""), &clock)
                }
                (None, None) => mark::send(&db.db, run, text.as_deref().unwrap_or("")),
            }
        }
        Command::Export { run, format, output, db, sla } => show::export(&db.db, run, format, &output, &sla),
        Command::Report { runs, output, db, sla } => show::report(&db.db, &runs, &output, &sla),
        Command::Compare { baseline, runs, at, expected_loss, db, sla } => {
            show::compare(&db.db, baseline, &runs, (at, expected_loss), &sla)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_bare_log_level_is_for_iocurve_s_own_crates() {
        assert_eq!(super::log_filter(None), "warn");
        let f = super::log_filter(Some("debug"));
        assert!(f.starts_with("warn,") && f.contains("iocurve_engine=debug") && !f.contains("h2"), "{f}");
        assert_eq!(super::log_filter(Some("h2=trace,iocurve=info")), "h2=trace,iocurve=info");
    }

    /// The filters the README names parse as the `Targets` filter applies them (#34: it
    /// replaced `EnvFilter`), and one that does not parse is an error, not a silent `warn`.
    #[test]
    fn the_readme_s_log_filters_parse_and_a_bad_one_is_an_error() {
        use tracing::Level;
        use tracing_subscriber::filter::Targets;
        for (value, target, level, on) in [
            ("debug", "iocurve_target::target", Level::DEBUG, true),
            ("debug", "h2::codec", Level::DEBUG, false),
            ("info", "iocurve_run::runner", Level::INFO, true),
            ("iocurve_engine=debug", "iocurve_engine", Level::DEBUG, true),
            ("iocurve_engine=debug", "iocurve_run", Level::WARN, false),
            ("warn,h2=debug", "h2", Level::DEBUG, true),
            ("warn,h2=debug", "tonic", Level::WARN, true),
        ] {
            let t: Targets = super::log_filter(Some(value)).parse().unwrap_or_else(|e| panic!("{value}: {e}"));
            assert_eq!(t.would_enable(target, &level), on, "IOCURVE_LOG={value}: {target} at {level}");
        }
        assert!(super::log_filter(Some("iocurve=loud")).parse::<Targets>().is_err());
    }
}
