//! The data of written blocks: what a storage array with inline compression and deduplication
//! gets from us.
//!
//! A block is cut into 4 KiB chunks (the last one shorter for 512 B … 2 KiB blocks). Each chunk
//! starts with random bytes and ends with zeros: `compress` is the zero share, so a compressor
//! reaches about 1 / (1 − compress) (0.4 → 1.67:1, the published "60 % random, 40 % constant"
//! block). The first 16 bytes of every chunk are a stamp that makes it unique, so no two written
//! chunks are alike unless `dedupe` asks for it:
//!
//! - `dedupe = 1` (every unit unique): buffers are filled with random bytes once per step; each
//!   write only restamps its chunks with a tag unique to the write and the chunk's own offset
//!   (two stores per chunk, no copy).
//! - `dedupe = R > 1`: each dedupe unit gets a content id — a fresh one with probability 1/R,
//!   otherwise one of the thread's recent fresh ids — and its bytes are a function of the id
//!   alone: a body from a table that is the same on every thread and host (fixed seed), and
//!   stamps derived from the id. Written units per unique unit is R in expectation; the cost is
//!   one copy of the block per write.

use std::sync::Arc;

use iocurve_plan::DataPattern;

use crate::rng::Rng;

/// Stamp unit: every chunk of a block starts with its own 16-byte stamp.
pub const CHUNK: usize = 4096;
const STAMP: usize = 16;
/// How many recent fresh content ids a duplicate may repeat.
const RECENT: usize = 64;
/// Size of the table of bodies of deduplicable units.
const BODY_TABLE_BYTES: usize = 4 << 20;
/// Seed of the body table: the same everywhere, so a content id means the same bytes on every
/// thread, host and run.
const BODY_SEED: u64 = 0x696f_6375_7276_6521;

/// Random bytes at the head of a chunk of `len` bytes; the rest is zero. Never less than the
/// stamp, so compress close to 1 still writes unique chunks.
pub fn random_len(len: usize, compress: f64) -> usize {
    let r = ((1.0 - compress) * len as f64).ceil() as usize;
    r.clamp(STAMP.min(len), len)
}

/// Gives a random-filled buffer the compressibility of the pattern: zeroes every chunk's tail.
pub fn shape(buf: &mut [u8], compress: f64) {
    if compress > 0.0 {
        for c in buf.chunks_mut(CHUNK) {
            let keep = random_len(c.len(), compress);
            c[keep..].fill(0);
        }
    }
}

/// Stamps every chunk of `block` (written at byte `offset`) with `tag` and the chunk's own
/// offset. Bytes 0..8 of a chunk hold the tag, bytes 8..16 the offset: a reader can tell where a
/// chunk was meant to land.
#[inline]
pub fn stamp(block: &mut [u8], tag: u64, offset: u64) {
    for (i, unit) in block.chunks_mut(CHUNK).enumerate() {
        unit[..8].copy_from_slice(&tag.to_le_bytes());
        unit[8..16].copy_from_slice(&(offset + (i as u64) * CHUNK as u64).to_le_bytes());
    }
}

/// A 64-bit mix (splitmix64's finaliser): spreads ids over all bits.
#[inline]
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Bodies of deduplicable units: `count` units of `unit` bytes, shaped for compress.
#[derive(Debug)]
pub struct BodyTable {
    bytes: Vec<u8>,
    unit: usize,
    count: usize,
}

impl BodyTable {
    pub fn new(pattern: &DataPattern, unit: usize) -> BodyTable {
        let count = (BODY_TABLE_BYTES / unit).clamp(2, 1024);
        let mut bytes = vec![0u8; count * unit];
        Rng::new(BODY_SEED ^ unit as u64).fill(&mut bytes);
        for body in bytes.chunks_mut(unit) {
            shape(body, pattern.compress);
        }
        BodyTable { bytes, unit, count }
    }

    fn body(&self, id: u64) -> &[u8] {
        let k = (mix(id ^ BODY_SEED) % self.count as u64) as usize;
        &self.bytes[k * self.unit..(k + 1) * self.unit]
    }
}

/// Fills written blocks with the workload's data pattern; one per I/O thread.
pub struct DataGen {
    compress: f64,
    /// None when every unit is unique (`dedupe = 1`).
    dedupe: Option<Dedupe>,
    nonce: u64,
    written: u64,
}

struct Dedupe {
    /// 1 / dedupe: the share of units with fresh content.
    fresh_share: f64,
    bodies: Arc<BodyTable>,
    recent: [u64; RECENT],
    recent_len: usize,
    recent_next: usize,
}

impl DataGen {
    /// `bodies` is needed (and shared by all threads) when the pattern deduplicates.
    pub fn new(pattern: &DataPattern, bodies: Option<Arc<BodyTable>>, rng: &mut Rng) -> DataGen {
        let dedupe = bodies.filter(|_| pattern.dedupe > 1.0).map(|bodies| Dedupe {
            fresh_share: 1.0 / pattern.dedupe,
            bodies,
            recent: [0; RECENT],
            recent_len: 0,
            recent_next: 0,
        });
        DataGen { compress: pattern.compress, dedupe, nonce: rng.next_u64(), written: 0 }
    }

    /// Prepares a slot's buffer once per step: random bytes shaped for compress.
    pub fn prepare(&self, buf: &mut [u8], rng: &mut Rng) {
        rng.fill(buf);
        shape(buf, self.compress);
    }

    /// Fills `block` for one write at byte `offset` of its target.
    #[inline]
    pub fn fill(&mut self, block: &mut [u8], offset: u64, rng: &mut Rng) {
        self.written += 1;
        match &mut self.dedupe {
            None => {
                let tag = self.nonce ^ self.written.wrapping_mul(0x9e37_79b9_7f4a_7c15);
                stamp(block, tag, offset);
            }
            Some(d) => {
                let unit = d.bodies.unit;
                for (j, u) in block.chunks_mut(unit).enumerate() {
                    let fresh = d.recent_len == 0
                        || (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64) < d.fresh_share;
                    let id = if fresh {
                        let id =
                            mix(self.nonce ^ self.written.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ ((j as u64) << 48));
                        d.recent[d.recent_next] = id;
                        d.recent_next = (d.recent_next + 1) % RECENT;
                        d.recent_len = (d.recent_len + 1).min(RECENT);
                        id
                    } else {
                        d.recent[rng.below(d.recent_len as u64) as usize]
                    };
                    u.copy_from_slice(&d.bodies.body(id)[..u.len()]);
                    for (i, c) in u.chunks_mut(CHUNK).enumerate() {
                        c[..8].copy_from_slice(&id.to_le_bytes());
                        c[8..16].copy_from_slice(&mix(id ^ i as u64).to_le_bytes());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn every_chunk_carries_tag_and_its_offset() {
        let mut b = vec![0xaau8; 3 * 4096];
        stamp(&mut b, 7, 8192);
        for (i, u) in b.chunks(4096).enumerate() {
            assert_eq!(u64::from_le_bytes(u[..8].try_into().unwrap()), 7);
            assert_eq!(u64::from_le_bytes(u[8..16].try_into().unwrap()), 8192 + i as u64 * 4096);
            assert!(u[16..].iter().all(|x| *x == 0xaa), "the rest is untouched");
        }
    }

    #[test]
    fn small_blocks_get_one_stamp() {
        let mut b = vec![0u8; 512];
        stamp(&mut b, 1, 0);
        assert_eq!(b[0], 1);
    }

    #[test]
    fn shape_zeroes_the_constant_share_of_every_chunk() {
        let mut b = vec![0xffu8; 8192 + 512];
        shape(&mut b, 0.4);
        for c in b.chunks(4096) {
            let keep = random_len(c.len(), 0.4);
            assert_eq!(keep, (c.len() as f64 * 0.6).ceil() as usize);
            assert!(c[..keep].iter().all(|x| *x == 0xff) && c[keep..].iter().all(|x| *x == 0));
        }
        assert_eq!(random_len(4096, 0.99), 41);
        assert_eq!(random_len(512, 0.999), 16, "never less than the stamp");
    }

    fn units(pattern: DataPattern, bs: usize, writes: usize) -> (usize, usize) {
        let mut rng = Rng::new(3);
        let bodies = Arc::new(BodyTable::new(&pattern, pattern.dedupe_unit as usize));
        let mut g = DataGen::new(&pattern, Some(bodies), &mut rng);
        let mut buf = vec![0u8; bs];
        g.prepare(&mut buf, &mut rng);
        let mut seen = HashSet::new();
        let mut n = 0;
        for w in 0..writes {
            g.fill(&mut buf, (w * bs) as u64, &mut rng);
            for u in buf.chunks(pattern.dedupe_unit as usize) {
                seen.insert(u.to_vec());
                n += 1;
            }
        }
        (n, seen.len())
    }

    #[test]
    fn dedupe_ratio_is_what_was_asked() {
        for r in [1.0, 2.0, 4.0, 1.5] {
            let p = DataPattern { compress: 0.4, dedupe: r, dedupe_unit: 4096 };
            let (n, unique) = units(p, 16384, 20_000);
            let got = n as f64 / unique as f64;
            assert!((got / r - 1.0).abs() < 0.03, "dedupe {r}: {n} units, {unique} unique = {got:.3}");
        }
    }

    #[test]
    fn equal_ids_are_equal_bytes_and_compress_holds_in_dedupe_mode() {
        let p = DataPattern { compress: 0.75, dedupe: 4.0, dedupe_unit: 8192 };
        let mut rng = Rng::new(9);
        let bodies = Arc::new(BodyTable::new(&p, 8192));
        let mut g = DataGen::new(&p, Some(bodies), &mut rng);
        let mut buf = vec![0u8; 8192];
        for w in 0..100 {
            g.fill(&mut buf, w * 8192, &mut rng);
            for c in buf.chunks(4096) {
                assert!(c[1024..].iter().all(|x| *x == 0), "a quarter random, the rest constant");
                assert!(c[16..1024].iter().any(|x| *x != 0));
            }
        }
    }
}
