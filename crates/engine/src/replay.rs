//! A replay's share of a trace as one host issues it (issue 45): every I/O with its trace time
//! and its place in the host's target set, fitted to the targets (remapped where a target is
//! smaller than the trace's device, aligned for O_DIRECT), then dealt out to the host's I/O
//! threads. The intended issue time of an I/O is its trace time over the step's speed, from the
//! step's start: the open-loop scheduler issues it then (`arrival::Arrivals::replay`) and
//! measures its response time from then, so a replay that falls behind shows as lag and
//! response time instead of stretching.
//!
//! The share travels from the coordinator to the agent packed ([`encode`], [`decode`]):
//! variable-length integers, about ten bytes an I/O.

use std::sync::Arc;

use iocurve_plan::Remap;

use crate::EngineError;
use crate::ops::{Dir, IoOp};

/// The largest I/O a replay issues (a trace's larger ones are refused when it is read).
pub const MAX_IO_BYTES: u32 = 64 << 20;

/// The most I/Os one host's share may hold: about 10 bytes each on the wire, 24 in memory.
pub const MAX_SHARE_IOS: u64 = 6_000_000;

/// One I/O of a replay: its time in the trace (ns since the trace's first I/O) and what it
/// does, `op.target` an index into the host's target set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayIo {
    pub t_ns: u64,
    pub op: IoOp,
}

/// A host's share of a replay step.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayShare {
    /// In the trace's order (by time).
    pub ios: Vec<ReplayIo>,
    /// 1 = the trace's own timing, 2 = twice as fast.
    pub speed: f64,
    pub remap: Remap,
    /// Per target of the host: the end of the trace's highest I/O on the device it replays
    /// (the whole trace's, not this share's), which `scale` maps onto the target's size.
    pub spans: Vec<u64>,
}

/// What fitting a share to its targets did: the I/Os moved (remapped) and those aligned for
/// O_DIRECT.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fitted {
    pub remapped: u64,
    pub aligned: u64,
}

impl ReplayShare {
    /// The largest read or write (its buffer size).
    pub fn max_data_len(&self) -> u32 {
        max_data_len(&self.ios)
    }

    /// The mean rate the share is due at, IOPS: its I/Os over the time from the step's start to
    /// its last one (at least a millisecond).
    pub fn mean_iops(&self) -> f64 {
        let last = self.ios.last().map_or(0, |io| self.intended(io.t_ns)).max(1_000_000);
        self.ios.len() as f64 * 1e9 / last as f64
    }

    /// The intended issue time of a trace time at this speed, ns since the step's start.
    #[inline]
    pub fn intended(&self, t_ns: u64) -> u64 {
        (t_ns as f64 / self.speed) as u64
    }

    /// Fits every I/O to its target of `sizes` bytes: aligned to `align` bytes (offset down,
    /// length up: O_DIRECT refuses others) and, where it reaches beyond the target, remapped by
    /// `remap` (or refused). Refused too: an I/O larger than its target, a target index beyond
    /// the host's.
    pub fn fit(&mut self, sizes: &[u64], align: u64) -> Result<Fitted, EngineError> {
        let mut ios = std::mem::take(&mut self.ios);
        let fitted = self.fit_ios(&mut ios, sizes, align);
        self.ios = ios;
        fitted
    }

    /// [`ReplayShare::fit`] on `ios` (this share's, or a copy of them being made ready to run:
    /// fitted in place, not copied once more).
    pub fn fit_ios(&self, ios: &mut [ReplayIo], sizes: &[u64], align: u64) -> Result<Fitted, EngineError> {
        let align = align.max(1);
        let mut done = Fitted::default();
        for io in ios {
            let op = &mut io.op;
            let Some(&size) = sizes.get(op.target as usize) else {
                return Err(EngineError::Input(format!(
                    "the replay sends an I/O to target {} of a host with {}",
                    op.target + 1,
                    sizes.len()
                )));
            };
            // The aligned I/O covers every byte the trace's did.
            let offset = op.offset / align * align;
            let len = (op.offset + op.len as u64).div_ceil(align) * align - offset;
            if (offset, len) != (op.offset, op.len as u64) {
                done.aligned += 1;
            }
            let size = size / align * align;
            if len > size || len > MAX_IO_BYTES as u64 {
                return Err(EngineError::Input(format!(
                    "the trace has an I/O of {len} bytes, larger than its target ({size} bytes)"
                )));
            }
            let mut offset = offset;
            if offset + len > size {
                done.remapped += 1;
                let room = size - len;
                offset = match self.remap {
                    Remap::Modulo => offset % (room + align) / align * align,
                    Remap::Scale => {
                        let span = self.spans.get(op.target as usize).copied().unwrap_or(0).max(offset + len);
                        ((offset as u128 * (room as u128 + align as u128) / span as u128) as u64 / align * align)
                            .min(room)
                    }
                    Remap::Refuse => {
                        return Err(EngineError::Input(format!(
                            "the trace writes or reads at {} bytes, beyond the end of its target ({size} bytes): replay it with replay_remap = \"modulo\" or \"scale\", or on a target as large as the traced device",
                            op.offset
                        )));
                    }
                };
            }
            op.offset = offset;
            op.len = len as u32;
        }
        Ok(done)
    }

    /// The I/Os of thread `thread` of `threads`: every `threads`-th, from its own number on.
    pub fn for_thread(&self, thread: usize, threads: usize) -> Arc<[ReplayIo]> {
        every_nth(&self.ios, thread, threads)
    }
}

/// The largest read or write of `ios` (the buffer they need; a trim carries no data).
pub fn max_data_len(ios: &[ReplayIo]) -> u32 {
    ios.iter().filter(|i| i.op.dir != Dir::Trim).map(|i| i.op.len).max().unwrap_or(0)
}

/// Every `threads`-th of `ios`, from the `thread`-th on.
pub fn every_nth(ios: &[ReplayIo], thread: usize, threads: usize) -> Arc<[ReplayIo]> {
    ios.iter().skip(thread).step_by(threads.max(1)).copied().collect()
}

fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a variable-length integer at `*at`.
fn take(b: &[u8], at: &mut usize) -> Result<u64, String> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let Some(&byte) = b.get(*at) else { return Err("the replay share ends inside a number".into()) };
        *at += 1;
        v |= ((byte & 0x7f) as u64) << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("the replay share holds a number longer than 64 bits".into())
}

const MAGIC: &[u8; 4] = b"IOR1";

/// The share packed for a step request.
pub fn encode(s: &ReplayShare) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + s.ios.len() * 10);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&s.speed.to_le_bytes());
    out.push(match s.remap {
        Remap::Modulo => 0,
        Remap::Scale => 1,
        Remap::Refuse => 2,
    });
    put(&mut out, s.spans.len() as u64);
    for &x in &s.spans {
        put(&mut out, x);
    }
    put(&mut out, s.ios.len() as u64);
    let mut last = 0u64;
    for io in &s.ios {
        // Times in order: each as its gap to the one before.
        put(&mut out, io.t_ns.saturating_sub(last));
        last = io.t_ns.max(last);
        let dir = match io.op.dir {
            Dir::Read => 0,
            Dir::Write => 1,
            Dir::Trim => 2,
        };
        put(&mut out, ((io.op.target as u64) << 2) | dir);
        put(&mut out, io.op.offset);
        put(&mut out, io.op.len as u64);
    }
    out
}

/// A packed share, checked: what a step request carries is not trusted (fuzzed through the
/// agent's request target).
pub fn decode(b: &[u8]) -> Result<ReplayShare, String> {
    if b.len() < 13 || &b[..4] != MAGIC {
        return Err("the replay share is not one this version packs".into());
    }
    let speed = f64::from_le_bytes(b[4..12].try_into().map_err(|_| "short replay share")?);
    if !(speed > 0.0 && speed <= 1000.0) {
        return Err(format!("the replay speed is {speed}: above 0 up to 1000"));
    }
    let remap = match b[12] {
        0 => Remap::Modulo,
        1 => Remap::Scale,
        2 => Remap::Refuse,
        x => return Err(format!("unknown remap {x} in the replay share")),
    };
    let mut at = 13;
    let n = take(b, &mut at)?;
    // Bounded by what the bytes can hold (one byte a number at the least) before allocating.
    if n > 65_536 || n as usize > b.len() {
        return Err(format!("the replay share names {n} targets"));
    }
    let spans = (0..n).map(|_| take(b, &mut at)).collect::<Result<Vec<_>, _>>()?;
    let n = take(b, &mut at)?;
    if n > MAX_SHARE_IOS || n as usize > (b.len() - at) / 4 + 1 {
        return Err(format!(
            "the replay share says {n} I/Os (at most {MAX_SHARE_IOS} a host, 4 bytes each at the least)"
        ));
    }
    let mut ios = Vec::with_capacity(n as usize);
    let mut t = 0u64;
    for _ in 0..n {
        t = t.checked_add(take(b, &mut at)?).ok_or("a replay time beyond 584 years")?;
        let td = take(b, &mut at)?;
        let dir = match td & 3 {
            0 => Dir::Read,
            1 => Dir::Write,
            2 => Dir::Trim,
            _ => return Err("an unknown direction in the replay share".into()),
        };
        let target = u32::try_from(td >> 2).map_err(|_| "a target beyond 2^32 in the replay share")?;
        let offset = take(b, &mut at)?;
        let len = take(b, &mut at)?;
        if len == 0 || len > MAX_IO_BYTES as u64 || offset.checked_add(len).is_none() {
            return Err(format!("an I/O of {len} bytes at {offset} in the replay share (1 byte to 64 MiB)"));
        }
        ios.push(ReplayIo { t_ns: t, op: IoOp { target, offset, len: len as u32, dir } });
    }
    if at != b.len() {
        return Err(format!("{} bytes after the replay share's I/Os", b.len() - at));
    }
    Ok(ReplayShare { ios, speed, remap, spans })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(t_ns: u64, target: u32, offset: u64, len: u32, dir: Dir) -> ReplayIo {
        ReplayIo { t_ns, op: IoOp { target, offset, len, dir } }
    }

    fn share(ios: Vec<ReplayIo>, remap: Remap) -> ReplayShare {
        ReplayShare { ios, speed: 2.0, remap, spans: vec![1 << 30, 4096] }
    }

    #[test]
    fn a_share_packs_and_unpacks_unchanged() {
        let s = share(
            vec![
                io(0, 0, 0, 4096, Dir::Read),
                io(10, 1, 512, 512, Dir::Write),
                io(10, 0, u64::MAX - (64 << 20), 64 << 20, Dir::Trim),
                io(u64::MAX / 2, 0, 8192, 1, Dir::Read),
            ],
            Remap::Scale,
        );
        let b = encode(&s);
        assert_eq!(decode(&b).unwrap(), s);
        // Every cut and every changed byte is an error or another share, never a panic.
        for cut in 0..b.len() {
            assert!(decode(&b[..cut]).is_err(), "{cut}");
        }
        for i in 0..b.len() {
            let mut c = b.clone();
            c[i] ^= 0xff;
            let _ = decode(&c);
        }
    }

    #[test]
    fn ios_beyond_a_target_are_remapped_as_named_and_aligned() {
        let sizes = [1 << 20, 1 << 20];
        let ios =
            vec![io(0, 0, 3 << 20, 4096, Dir::Read), io(1, 0, 1000, 3000, Dir::Write), io(2, 1, 4096, 4096, Dir::Read)];
        let mut m = share(ios.clone(), Remap::Modulo);
        let f = m.fit(&sizes, 512).unwrap();
        assert_eq!(f, Fitted { remapped: 1, aligned: 1 });
        // 3 MiB modulo (1 MiB − 4 KiB + 512 B).
        assert_eq!(m.ios[0].op.offset, (3u64 << 20) % ((1 << 20) - 4096 + 512) / 512 * 512);
        assert_eq!((m.ios[1].op.offset, m.ios[1].op.len), (512, 3584));
        assert_eq!(m.ios[2].op, ios[2].op);
        let mut s = share(ios.clone(), Remap::Scale);
        s.spans[0] = 4 << 20;
        s.fit(&sizes, 512).unwrap();
        // 3/4 of the way through a 4 MiB span: 3/4 into the target.
        let at = s.ios[0].op.offset as f64 / (1 << 20) as f64;
        assert!((0.74..0.76).contains(&at), "{at}");
        assert!(s.ios.iter().all(|i| i.op.offset + i.op.len as u64 <= 1 << 20));
        let e = share(ios.clone(), Remap::Refuse).fit(&sizes, 512).unwrap_err().to_string();
        assert!(e.contains("beyond the end of its target") && e.contains("replay_remap"), "{e}");
        let e = share(ios, Remap::Modulo).fit(&[1 << 20], 512).unwrap_err().to_string();
        assert!(e.contains("target 2 of a host with 1"), "{e}");
        let e = share(vec![io(0, 0, 0, 8192, Dir::Read)], Remap::Modulo).fit(&[4096], 512).unwrap_err().to_string();
        assert!(e.contains("larger than its target"), "{e}");
    }

    #[test]
    fn threads_take_every_nth_io() {
        let s = share((0..10).map(|k| io(k, 0, 0, 512, Dir::Read)).collect(), Remap::Modulo);
        let t: Vec<u64> = s.for_thread(1, 3).iter().map(|i| i.t_ns).collect();
        assert_eq!(t, vec![1, 4, 7]);
        assert_eq!(s.intended(10), 5);
    }
}
