//! Output that never kills a measurement. A closed standard output or error (`iocurve run | head`,
//! `> /dev/full`) makes the macros here fall silent instead of panicking as `println!` does: a
//! command that only prints finishes quietly, and a run keeps measuring and storing, and notes
//! in its stored steps that its output was cut.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

static OUT_CLOSED: AtomicBool = AtomicBool::new(false);
static ERR_CLOSED: AtomicBool = AtomicBool::new(false);

fn write(to: &mut dyn Write, closed: &AtomicBool, args: std::fmt::Arguments) {
    if closed.load(Ordering::Relaxed) {
        return;
    }
    let text = terminal_safe(args.to_string());
    if to.write_all(text.as_bytes()).and_then(|()| to.flush()).is_err() {
        // EPIPE, ENOSPC, EIO: whatever it was, nobody reads this stream any more.
        closed.store(true, Ordering::Relaxed);
    }
}

/// Text with every control character but newline and tab escaped (`\xNN`): nothing iocurve
/// prints may move the cursor, rewrite a line or clear the screen, whoever wrote the text (an
/// agent's host name, an error it sent, a path in the store; issue 35, finding 8). The live
/// progress line is drawn by indicatif, not through here.
fn terminal_safe(text: String) -> String {
    if !text.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return text;
    }
    text.split('\n')
        .map(|line| line.split('\t').map(iocurve_net::printable).collect::<Vec<_>>().join("\t"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Writes to standard output; silent once it failed.
pub fn out(args: std::fmt::Arguments) {
    write(&mut std::io::stdout().lock(), &OUT_CLOSED, args);
}

/// Writes to standard error; silent once it failed.
pub fn err(args: std::fmt::Arguments) {
    write(&mut std::io::stderr().lock(), &ERR_CLOSED, args);
}

/// True once standard output could not be written.
pub fn out_closed() -> bool {
    OUT_CLOSED.load(Ordering::Relaxed)
}

/// `print!` that never panics.
#[macro_export]
macro_rules! out {
    ($($t:tt)*) => { $crate::out::out(format_args!($($t)*)) };
}

/// `println!` that never panics.
#[macro_export]
macro_rules! outln {
    () => { $crate::out::out(format_args!("\n")) };
    ($($t:tt)*) => { $crate::out::out(format_args!("{}\n", format_args!($($t)*))) };
}

/// `eprintln!` that never panics.
#[macro_export]
macro_rules! errln {
    ($($t:tt)*) => { $crate::out::err(format_args!("{}\n", format_args!($($t)*))) };
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Full;
    impl Write for Full {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::from_raw_os_error(libc::ENOSPC))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Issue 35, finding 8: an impostor agent's text moved the cursor and printed a fake
    /// "run complete" on the coordinator's terminal.
    #[test]
    fn regression_control_characters_never_reach_the_terminal() {
        let mut v = Vec::new();
        let closed = AtomicBool::new(false);
        write(&mut v, &closed, format_args!("agent {}: said\tthis\n", "h\x1b[1A\x1b[2K\rrun complete"));
        assert_eq!(String::from_utf8(v).unwrap(), "agent h\\x1b[1A\\x1b[2K\\x0drun complete: said\tthis\n");
    }

    #[test]
    fn a_failed_stream_falls_silent() {
        let closed = AtomicBool::new(false);
        write(&mut Full, &closed, format_args!("x"));
        assert!(closed.load(Ordering::Relaxed));
        let mut v = Vec::new();
        write(&mut v, &closed, format_args!("y"));
        assert!(v.is_empty(), "nothing more is written once closed");
    }
}
