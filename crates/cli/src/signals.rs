//! Ctrl-C: the first one cancels the run at once — the step drops its unfinished interval, waits
//! briefly for outstanding I/Os, and the run ends with its summary, JSON and stored status;
//! the second ends the process at once (exit code 130).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use iocurve_run::Cancel;

/// The process's one cancel, set by the handler.
static CANCEL: OnceLock<Cancel> = OnceLock::new();
static PRESSES: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_sigint(_: libc::c_int) {
    // Only async-signal-safe calls here: atomics (OnceLock::get is one load), write and _exit.
    if PRESSES.fetch_add(1, Ordering::SeqCst) >= 1 {
        unsafe { libc::_exit(130) };
    }
    if let Some(c) = CANCEL.get() {
        c.cancel();
    }
    let msg =
        b"\ninterrupted: stopping now; finished intervals are kept (Ctrl-C again to exit at once, without a summary)\n";
    // SAFETY: write(2) is async-signal-safe; the buffer is static.
    unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
}

/// Installs the handler for SIGINT and SIGTERM; returns the cancel it sets.
pub fn install() -> Cancel {
    let cancel = CANCEL.get_or_init(Cancel::new).clone();
    // SAFETY: installing a handler that only touches atomics and calls write/_exit.
    unsafe {
        libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_sigint as *const () as libc::sighandler_t);
    }
    cancel
}
