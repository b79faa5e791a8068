//! iocurve: measure how a storage system behaves as load grows. Thin glue: parse, dispatch,
//! map errors to exit codes. The work is in the library crates.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    iocurve::init_logging();
    iocurve::fit_tables_to_terminal();
    let cli = iocurve::cli::Cli::parse();
    match iocurve::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            iocurve::errln!("error: {e}");
            e.exit_code()
        }
    }
}
