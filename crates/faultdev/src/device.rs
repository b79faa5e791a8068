//! The fault modes and the queue of data requests.
//!
//! The thread that reads requests from the kernel never does disk I/O and never waits: it puts
//! every data request on the image (read, write, fsync, fallocate) in a queue and goes on, so
//! the control file keeps answering while data requests are held. Worker threads take requests
//! from the queue when the mode lets them and answer them under the mode in force at that
//! moment: a request held by `stall` is served under whatever mode ends the stall.

use std::collections::VecDeque;
use std::fmt;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::str::FromStr;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::fuse::{self, Channel};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// Reads and writes reach the image.
    #[default]
    Pass,
    /// Every data request fails with EIO.
    Eio,
    /// Writes (and fsync, fallocate) fail with EIO; reads pass.
    EioWrites,
    /// Reads that touch bytes `from..to` of the image fail with EIO; everything else passes:
    /// a range of bad sectors.
    EioReads { from: u64, to: u64 },
    /// Writes are acknowledged with their full length but never reach the image.
    DropWrites,
    /// Every data request is answered this long after it arrived (or after the stall that held
    /// it ended), then served as in `Pass`.
    Delay(Duration),
    /// No data request is answered until the mode changes.
    Stall,
}

impl FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Mode, String> {
        let s = s.trim();
        Ok(match s {
            "pass" => Mode::Pass,
            "eio" => Mode::Eio,
            "eio-writes" => Mode::EioWrites,
            "drop-writes" => Mode::DropWrites,
            "stall" => Mode::Stall,
            _ if s.starts_with("eio-reads=") => {
                let range = &s["eio-reads=".len()..];
                let parsed =
                    range.split_once('-').and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?)));
                match parsed {
                    Some((from, to)) if from < to => Mode::EioReads { from, to },
                    _ => return Err(format!("`{s}`: eio-reads=FROM-TO takes byte offsets, FROM below TO")),
                }
            }
            _ => match s.strip_prefix("delay=").map(str::parse::<u64>) {
                Some(Ok(ms)) => Mode::Delay(Duration::from_millis(ms)),
                _ => {
                    return Err(format!(
                        "unknown mode `{s}`: pass, eio, eio-writes, eio-reads=FROM-TO, drop-writes, delay=MS or stall"
                    ));
                }
            },
        })
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Mode::Pass => write!(f, "pass"),
            Mode::Eio => write!(f, "eio"),
            Mode::EioWrites => write!(f, "eio-writes"),
            Mode::EioReads { from, to } => write!(f, "eio-reads={from}-{to}"),
            Mode::DropWrites => write!(f, "drop-writes"),
            Mode::Delay(d) => write!(f, "delay={}", d.as_millis()),
            Mode::Stall => write!(f, "stall"),
        }
    }
}

/// A data request on the image.
#[derive(Debug, PartialEq)]
pub enum Op {
    Read { size: u32 },
    Write { data: Vec<u8> },
    Fsync,
    Fallocate { len: u64, mode: i32 },
}

struct Pending {
    unique: u64,
    offset: u64,
    op: Op,
    /// When the request's delay starts: its arrival, or the end of the stall that held it.
    since: Instant,
}

/// How a request is answered.
#[derive(Debug, PartialEq)]
pub enum Answer {
    Data(Vec<u8>),
    /// Written (or, if `dropped`, acknowledged without writing) this many bytes.
    Written {
        size: u32,
        dropped: bool,
    },
    Done {
        dropped: bool,
    },
    Failed(i32),
}

#[derive(Default)]
struct State {
    mode: Mode,
    queue: VecDeque<Pending>,
    /// Requests taken from the queue and not yet answered.
    busy: u64,
    served: u64,
    failed: u64,
    dropped: u64,
    stopping: bool,
}

/// Bytes of a page of the volatile write cache.
const PAGE: u64 = 4096;

/// Cached pages by page number.
type Pages = std::collections::BTreeMap<u64, Vec<u8>>;

pub struct Device {
    pub chan: Channel,
    image: File,
    pub size: u64,
    state: Mutex<State>,
    changed: Condvar,
    /// A volatile write cache (`--volatile-cache`): written pages acknowledged and kept here
    /// until a flush (fsync) writes them to the image; lost when the daemon is killed, as a
    /// power cut loses a disk's or array's unprotected cache. None: writes reach the image at
    /// once.
    cache: Option<Mutex<Pages>>,
}

impl Device {
    pub fn new(chan: Channel, image: File, size: u64, mode: Mode) -> Device {
        Device {
            chan,
            image,
            size,
            state: Mutex::new(State { mode, ..State::default() }),
            changed: Condvar::new(),
            cache: None,
        }
    }

    /// The same device with a volatile write cache.
    pub fn with_volatile_cache(mut self) -> Device {
        self.cache = Some(Mutex::new(Pages::new()));
        self
    }

    /// Writes the cached pages to the image and empties the cache (a flush).
    fn flush_cache(&self) -> std::io::Result<()> {
        let Some(cache) = &self.cache else { return Ok(()) };
        let mut pages = cache.lock().unwrap();
        for (&page, data) in pages.iter() {
            let at = page * PAGE;
            let len = (data.len() as u64).min(self.size.saturating_sub(at)) as usize;
            self.image.write_all_at(&data[..len], at)?;
        }
        pages.clear();
        Ok(())
    }

    /// Puts a write into the cache, page by page (a partial page is filled from what the
    /// image holds).
    fn cache_write(&self, cache: &Mutex<Pages>, offset: u64, data: &[u8]) -> std::io::Result<()> {
        let mut pages = cache.lock().unwrap();
        let mut done = 0usize;
        while done < data.len() {
            let at = offset + done as u64;
            let (page, within) = (at / PAGE, (at % PAGE) as usize);
            let n = (PAGE as usize - within).min(data.len() - done);
            let cached = match pages.entry(page) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(e) => {
                    let mut whole = self.read_image(page * PAGE, PAGE as u32)?;
                    whole.resize(PAGE as usize, 0);
                    e.insert(whole)
                }
            };
            cached[within..within + n].copy_from_slice(&data[done..done + n]);
            done += n;
        }
        Ok(())
    }

    /// Pages in the volatile cache, not yet on the image (0 without a cache).
    pub fn cached_pages(&self) -> usize {
        self.cache.as_ref().map_or(0, |c| c.lock().unwrap().len())
    }

    /// Queues a data request (called by the reading thread; never blocks on I/O).
    pub fn submit(&self, unique: u64, offset: u64, op: Op) {
        let mut st = self.state.lock().unwrap();
        if st.stopping {
            st.failed += 1;
            drop(st);
            self.chan.err(unique, libc::EIO);
            return;
        }
        st.queue.push_back(Pending { unique, offset, op, since: Instant::now() });
        drop(st);
        self.changed.notify_one();
    }

    pub fn set_mode(&self, mode: Mode) {
        let mut st = self.state.lock().unwrap();
        // The held requests' delay counts from the end of the stall, so that `stall` then
        // `delay=MS` answers them MS after the switch, not at once.
        if st.mode == Mode::Stall && mode != Mode::Stall {
            let now = Instant::now();
            st.queue.iter_mut().for_each(|p| p.since = now);
        }
        st.mode = mode;
        drop(st);
        self.changed.notify_all();
    }

    /// One line: the mode and the counters. `held`: requests received and not yet answered.
    pub fn status(&self) -> String {
        let st = self.state.lock().unwrap();
        let cached = if self.cache.is_some() { format!(" cached={}", self.cached_pages()) } else { String::new() };
        format!(
            "mode={} served={} failed={} dropped={} held={}{cached}\n",
            st.mode,
            st.served,
            st.failed,
            st.dropped,
            st.queue.len() as u64 + st.busy
        )
    }

    /// Answers every held request with EIO, and every later one too; ends the workers.
    pub fn stop(&self) {
        let mut st = self.state.lock().unwrap();
        st.stopping = true;
        let held: Vec<Pending> = st.queue.drain(..).collect();
        st.failed += held.len() as u64;
        drop(st);
        self.changed.notify_all();
        for p in held {
            self.chan.err(p.unique, libc::EIO);
        }
    }

    /// A worker: takes requests as the mode allows and answers them.
    pub fn work(&self) {
        loop {
            let (p, mode) = {
                let mut st = self.state.lock().unwrap();
                loop {
                    if st.stopping {
                        return;
                    }
                    let due = match (st.queue.front(), st.mode) {
                        (None, _) | (Some(_), Mode::Stall) => None,
                        (Some(p), Mode::Delay(d)) => Some(p.since + d),
                        (Some(p), _) => Some(p.since),
                    };
                    match due {
                        None => st = self.changed.wait(st).unwrap(),
                        Some(due) => {
                            let now = Instant::now();
                            if due <= now {
                                break;
                            }
                            st = self.changed.wait_timeout(st, due - now).unwrap().0;
                        }
                    }
                }
                let p = st.queue.pop_front().unwrap();
                st.busy += 1;
                (p, st.mode)
            };
            let answer = self.perform(p.offset, &p.op, mode);
            {
                // Counted before the answer goes out: whoever sees its I/O complete and then
                // reads the counters finds it there.
                let mut st = self.state.lock().unwrap();
                st.busy -= 1;
                match answer {
                    Answer::Failed(_) => st.failed += 1,
                    Answer::Written { dropped: true, .. } | Answer::Done { dropped: true } => st.dropped += 1,
                    _ => st.served += 1,
                }
            }
            match answer {
                Answer::Data(d) => self.chan.ok(p.unique, &[&d]),
                Answer::Written { size, .. } => self.chan.ok(p.unique, &[&fuse::write_out(size)]),
                Answer::Done { .. } => self.chan.ok(p.unique, &[]),
                Answer::Failed(errno) => self.chan.err(p.unique, errno),
            }
        }
    }

    /// Serves one request under `mode`.
    pub fn perform(&self, offset: u64, op: &Op, mode: Mode) -> Answer {
        let write = !matches!(op, Op::Read { .. });
        match mode {
            Mode::Eio => return Answer::Failed(libc::EIO),
            Mode::EioWrites if write => return Answer::Failed(libc::EIO),
            Mode::EioReads { from, to } => {
                if let Op::Read { size } = op
                    && offset < to
                    && offset + *size as u64 > from
                {
                    return Answer::Failed(libc::EIO);
                }
            }
            Mode::DropWrites => match op {
                Op::Write { data } => return Answer::Written { size: data.len() as u32, dropped: true },
                Op::Fsync | Op::Fallocate { .. } => return Answer::Done { dropped: true },
                Op::Read { .. } => {}
            },
            _ => {}
        }
        let result = match op {
            Op::Read { size } => self.read(offset, *size).map(Answer::Data),
            Op::Write { data } => {
                if offset.checked_add(data.len() as u64).is_none_or(|end| end > self.size) {
                    // A disk has a fixed size; the image must not grow.
                    return Answer::Failed(libc::ENOSPC);
                }
                let written = match &self.cache {
                    Some(cache) => self.cache_write(cache, offset, data),
                    None => self.image.write_all_at(data, offset),
                };
                written.map(|()| Answer::Written { size: data.len() as u32, dropped: false })
            }
            // The image stands for the array, the daemon's page cache for its protected cache: a
            // flush that gets through is acknowledged without syncing the image to the host's
            // disk, whose latency under other load would make every flushing test slow and
            // uneven. A volatile cache is written to the image first.
            Op::Fsync => self.flush_cache().map(|()| Answer::Done { dropped: false }),
            Op::Fallocate { len, mode } => {
                // Discards and zeroes apply to what the device holds: the cache goes first.
                if let Err(e) = self.flush_cache() {
                    return Answer::Failed(e.raw_os_error().unwrap_or(libc::EIO));
                }
                // The loop device turns discards and write-zeroes into punched or zeroed ranges.
                // SAFETY: plain system call on an open descriptor.
                let r = unsafe { libc::fallocate(self.image.as_raw_fd(), *mode, offset as i64, *len as i64) };
                if r == 0 { Ok(Answer::Done { dropped: false }) } else { Err(std::io::Error::last_os_error()) }
            }
        };
        result.unwrap_or_else(|e| Answer::Failed(e.raw_os_error().unwrap_or(libc::EIO)))
    }

    /// What the device holds: the image, with the cached pages over it.
    fn read(&self, offset: u64, size: u32) -> std::io::Result<Vec<u8>> {
        let mut buf = self.read_image(offset, size)?;
        if let Some(cache) = &self.cache {
            let pages = cache.lock().unwrap();
            let end = offset + buf.len() as u64;
            for (&page, data) in pages.range(offset / PAGE..end.div_ceil(PAGE)) {
                let (from, to) = ((page * PAGE).max(offset), ((page + 1) * PAGE).min(end));
                let src = &data[(from - page * PAGE) as usize..(to - page * PAGE) as usize];
                buf[(from - offset) as usize..(to - offset) as usize].copy_from_slice(src);
            }
        }
        Ok(buf)
    }

    fn read_image(&self, offset: u64, size: u32) -> std::io::Result<Vec<u8>> {
        // Short at the end of the image, as a file is.
        let size = (size as u64).min(self.size.saturating_sub(offset)) as usize;
        let mut buf = vec![0u8; size];
        let mut done = 0;
        while done < size {
            match self.image.read_at(&mut buf[done..], offset + done as u64)? {
                0 => break,
                n => done += n,
            }
        }
        buf.truncate(done);
        Ok(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_print_alike() {
        for text in ["pass", "eio", "eio-writes", "drop-writes", "delay=250", "stall"] {
            let mode: Mode = text.parse().unwrap();
            assert_eq!(mode.to_string(), text);
        }
        assert_eq!(" stall\n".parse::<Mode>(), Ok(Mode::Stall));
        assert_eq!("delay=0".parse::<Mode>(), Ok(Mode::Delay(Duration::ZERO)));
        assert!("delay=".parse::<Mode>().is_err());
        assert!("delay=-1".parse::<Mode>().is_err());
        assert!("EIO".parse::<Mode>().unwrap_err().contains("unknown mode `EIO`"));
    }

    /// A device on a scratch image whose channel is /dev/null: `perform` alone, no kernel.
    fn device() -> (Device, std::path::PathBuf) {
        let path = std::env::temp_dir().join(format!(
            "faultdev-unit-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let image = File::options().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
        image.set_len(8192).unwrap();
        let null = File::options().write(true).open("/dev/null").unwrap();
        (Device::new(Channel::new(null), image, 8192, Mode::Pass), path)
    }

    #[test]
    fn each_mode_answers_as_it_says() {
        let (dev, path) = device();
        let write = |data: &[u8], mode| dev.perform(0, &Op::Write { data: data.to_vec() }, mode);
        let read = |mode| dev.perform(0, &Op::Read { size: 4 }, mode);
        assert_eq!(write(b"abcd", Mode::Pass), Answer::Written { size: 4, dropped: false });
        assert_eq!(read(Mode::Pass), Answer::Data(b"abcd".to_vec()));
        assert_eq!(write(b"wxyz", Mode::DropWrites), Answer::Written { size: 4, dropped: true });
        assert_eq!(read(Mode::DropWrites), Answer::Data(b"abcd".to_vec()));
        assert_eq!(write(b"wxyz", Mode::EioWrites), Answer::Failed(libc::EIO));
        assert_eq!(read(Mode::EioWrites), Answer::Data(b"abcd".to_vec()));
        assert_eq!(read(Mode::Eio), Answer::Failed(libc::EIO));
        // Bad sectors: a read touching the range fails, one beside it and every write pass.
        let bad = "eio-reads=2-3".parse::<Mode>().unwrap();
        assert_eq!(bad.to_string(), "eio-reads=2-3");
        assert_eq!(read(bad), Answer::Failed(libc::EIO));
        assert_eq!(dev.perform(3, &Op::Read { size: 1 }, bad), Answer::Data(b"d".to_vec()));
        assert!(matches!(write(b"wxyz", bad), Answer::Written { dropped: false, .. }));
        assert!("eio-reads=3-2".parse::<Mode>().is_err() && "eio-reads=x".parse::<Mode>().is_err());
        assert_eq!(dev.perform(0, &Op::Fsync, Mode::Eio), Answer::Failed(libc::EIO));
        // The image never grows; reads end at its end.
        assert_eq!(dev.perform(8190, &Op::Write { data: b"abcd".to_vec() }, Mode::Pass), Answer::Failed(libc::ENOSPC));
        assert_eq!(dev.perform(8190, &Op::Read { size: 4 }, Mode::Pass), Answer::Data(vec![0, 0]));
        std::fs::remove_file(path).unwrap();
    }

    /// The volatile write cache (issue 36, part 8): writes are acknowledged and read back from
    /// the cache, reach the image only at a flush, and are lost with the daemon.
    #[test]
    fn a_volatile_cache_keeps_writes_until_a_flush() {
        let (dev, path) = device();
        let dev = dev.with_volatile_cache();
        let on_image = |at: u64, n: usize| {
            let mut b = vec![0u8; n];
            File::open(&path).unwrap().read_exact_at(&mut b, at).unwrap();
            b
        };
        // Across the page boundary at 4096: two pages, the rest of each from the image.
        let w = dev.perform(4094, &Op::Write { data: b"wxyz".to_vec() }, Mode::Pass);
        assert_eq!(w, Answer::Written { size: 4, dropped: false });
        assert_eq!(dev.cached_pages(), 2);
        assert_eq!(dev.perform(4093, &Op::Read { size: 6 }, Mode::Pass), Answer::Data(b"\0wxyz\0".to_vec()));
        assert_eq!(on_image(4094, 4), vec![0; 4], "not on the image before a flush");
        assert!(dev.status().contains("cached=2"), "{}", dev.status());
        assert_eq!(dev.perform(0, &Op::Fsync, Mode::Pass), Answer::Done { dropped: false });
        assert_eq!((on_image(4094, 4), dev.cached_pages()), (b"wxyz".to_vec(), 0));
        // Written again and not flushed: a killed daemon (here: the device dropped) loses it.
        dev.perform(4094, &Op::Write { data: b"LOST".to_vec() }, Mode::Pass);
        drop(dev);
        assert_eq!(on_image(4094, 4), b"wxyz".to_vec());
        std::fs::remove_file(path).unwrap();
    }
}
