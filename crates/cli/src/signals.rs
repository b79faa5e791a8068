//! Ctrl-C: the first one cancels the run at once — the step drops its unfinished interval, waits
//! briefly for outstanding I/Os, and the run ends with its summary, JSON and stored status;
//! the second ends the process at once (exit code 130).
//!
//! SIGHUP (the terminal closed, the ssh connection dropped) ends the run the same way — JSON,
//! status and scratch removal as after Ctrl-C — with exit code 129 instead of 130. Before
//! issue 36 it killed the process like SIGKILL: no JSON, the status left `running`, the
//! scratch file left behind.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use iocurve_run::Cancel;

/// The process's one cancel, set by the handler.
static CANCEL: OnceLock<Cancel> = OnceLock::new();
static PRESSES: AtomicU32 = AtomicU32::new(0);
static HUNG_UP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(signal: libc::c_int) {
    // Only async-signal-safe calls here: atomics (OnceLock::get is one load), write and _exit.
    if signal == libc::SIGHUP {
        HUNG_UP.store(true, Ordering::SeqCst);
    }
    if PRESSES.fetch_add(1, Ordering::SeqCst) >= 1 {
        // SAFETY: _exit is async-signal-safe; the process ends here.
        unsafe { libc::_exit(if HUNG_UP.load(Ordering::SeqCst) { 129 } else { 130 }) };
    }
    if let Some(c) = CANCEL.get() {
        c.cancel();
    }
    let msg =
        b"\ninterrupted: stopping now; finished intervals are kept (Ctrl-C again to exit at once, without a summary)\n";
    // SAFETY: write(2) is async-signal-safe; the buffer is static. After a hangup it fails
    // (EIO or EPIPE), which is fine: the message is for whoever still reads stderr.
    unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
}

/// True once SIGHUP arrived: the interrupted command exits 129, not 130.
pub fn hung_up() -> bool {
    HUNG_UP.load(Ordering::SeqCst)
}

/// The exit code of a command that ended because it was interrupted: 129 after a hangup,
/// 130 after Ctrl-C or SIGTERM.
pub fn interrupted_code() -> std::process::ExitCode {
    std::process::ExitCode::from(if hung_up() { 129 } else { 130 })
}

/// Installs the handler for SIGINT, SIGTERM and SIGHUP; returns the cancel it sets.
pub fn install() -> Cancel {
    let cancel = CANCEL.get_or_init(Cancel::new).clone();
    // SAFETY: installing a handler that only touches atomics and calls write/_exit.
    unsafe {
        libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_sigint as *const () as libc::sighandler_t);
        // Under nohup SIGHUP is ignored, and stays so: the user asked for the run to outlive
        // the terminal.
        if libc::signal(libc::SIGHUP, libc::SIG_IGN) != libc::SIG_IGN {
            libc::signal(libc::SIGHUP, on_sigint as *const () as libc::sighandler_t);
        }
    }
    cancel
}
