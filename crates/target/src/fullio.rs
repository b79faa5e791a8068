//! Whole transfers with positioned blocking I/O, for the paths that are not measured I/O
//! (scratch preparation, preconditioning, the verification pass): a signal (EINTR) retries, a
//! short transfer continues where it stopped, and a write the target takes no byte of is an
//! error instead of a loop that never ends. The measured I/O goes through the back-ends, where
//! a short transfer is a result to count, not to hide.

use std::io;
use std::os::fd::RawFd;

/// Writes all of `buf` at `off`.
/// Puts a rename of `path` on stable media: syncs the directory that holds it (best effort: a
/// filesystem that cannot sync a directory keeps the rename as it does every other).
pub fn sync_parent(path: &std::path::Path) {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

pub fn write_all_at(fd: RawFd, buf: &[u8], off: u64) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let at = offset(off, done)?;
        // SAFETY: the slice is valid for its length; the caller keeps fd open for the call.
        let r = unsafe { libc::pwrite(fd, buf[done..].as_ptr().cast(), buf.len() - done, at) };
        match r {
            r if r < 0 => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            0 => return Err(io::Error::new(io::ErrorKind::WriteZero, "the target took no more bytes")),
            r => done += r as usize,
        }
    }
    Ok(())
}

/// Reads into `buf` at `off` until it is full or the end of the target: the bytes read.
pub fn read_full_at(fd: RawFd, buf: &mut [u8], off: u64) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        let at = offset(off, got)?;
        // SAFETY: the slice is valid for its length; the caller keeps fd open for the call.
        let r = unsafe { libc::pread(fd, buf[got..].as_mut_ptr().cast(), buf.len() - got, at) };
        match r {
            r if r < 0 => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            0 => break,
            r => got += r as usize,
        }
    }
    Ok(got)
}

fn offset(off: u64, done: usize) -> io::Result<libc::off_t> {
    off.checked_add(done as u64)
        .and_then(|o| libc::off_t::try_from(o).ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("offset {off} + {done} is out of range")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_whole_buffer_goes_out_and_comes_back() {
        let f = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        write_all_at(f.as_raw_fd(), &data, 4096).unwrap();
        let mut back = vec![0u8; data.len() + 10];
        // The end of the file ends the read: the bytes there, no error.
        assert_eq!(read_full_at(f.as_raw_fd(), &mut back, 4096).unwrap(), data.len());
        assert_eq!(&back[..data.len()], &data[..]);
    }

    #[test]
    fn a_target_that_takes_no_bytes_is_an_error_not_a_loop() {
        // /dev/full fails writes with ENOSPC; a zero-length device would return 0. Either way
        // the call returns.
        let f = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        assert!(write_all_at(f.as_raw_fd(), &[1, 2, 3], 0).is_err());
        let r = std::fs::File::open("/dev/null").unwrap();
        let mut b = [0u8; 8];
        assert_eq!(read_full_at(r.as_raw_fd(), &mut b, 0).unwrap(), 0);
    }

    #[test]
    fn offsets_past_the_range_are_refused() {
        let f = tempfile::tempfile().unwrap();
        assert_eq!(write_all_at(f.as_raw_fd(), &[1], u64::MAX).unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }
}
