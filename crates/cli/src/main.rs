//! iocurve: measure how a storage system behaves as load grows. Thin glue: parse, dispatch,
//! map errors to exit codes. The work is in the library crates.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // A write past the file-size limit (ulimit -f) fails with EFBIG instead of killing the
    // process: the run then says so and removes its half-made scratch file (issue 36: SIGXFSZ
    // left a partial scratch file behind).
    // SAFETY: setting a signal's disposition to ignored, before any thread starts.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    iocurve::init_logging();
    iocurve::fit_tables_to_terminal();
    let cli = iocurve::cli::Cli::parse();
    let code = match iocurve::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            iocurve::errln!("error: {e}");
            e.exit_code()
        }
    };
    // An interruption by hangup, wherever it was noticed (the run, a pass, the agents' wait),
    // exits 129.
    if code == ExitCode::from(130) { iocurve::signals::interrupted_code() } else { code }
}
