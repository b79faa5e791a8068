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
    if to.write_fmt(args).and_then(|()| to.flush()).is_err() {
        // EPIPE, ENOSPC, EIO: whatever it was, nobody reads this stream any more.
        closed.store(true, Ordering::Relaxed);
    }
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
