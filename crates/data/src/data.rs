//! The data of written blocks: what a storage array with inline compression and deduplication
//! gets from us. The pattern's promise must hold however an array looks at the data —
//! compression per 4 KiB … 128 KiB unit or across a whole stream, deduplication at 512 B …
//! 32 KiB, fixed or variable — since an array that can reduce our data further than the plan
//! says skips work, and every write figure is then inflated.
//!
//! Layout: every 512-byte sector of a block holds `r` bytes of fresh random data and the
//! constant share (`compress` of it, zeros or the pattern's constant byte), so no sector is
//! ever all constant and every compression unit sees the same ratio, 512 / r. Sectors take
//! turns: even ones put their random bytes first, odd ones last, so the constant shares of a
//! pair meet in one run (a compressor pays its per-match cost once per 1 KiB, which keeps its
//! ratio within a few percent of 512 / r even at 4:1). The first 16 bytes of every 4 KiB
//! chunk are a stamp: a tag unique to the write (or to the dedupe unit's content) and the
//! chunk's own offset, so a reader can tell where a chunk was meant to land.
//!
//! Fresh data for every write, cheaply: the random share of a sector is a window of a shared
//! random [`Pool`] XORed with a 128-bit key unique to the write and the sector. Windows move
//! through the pool write after write; the keys make every sector differ from every other sector
//! ever written (across writes, threads, hosts and runs: keys derive from 128 bits of the
//! kernel's random source per generator), and no compressor finds repeats, since equal pool
//! windows never meet equal keys — not even in blocks or dedupe units larger than the pool. The
//! cost is one XOR-copy of the random share and one mix per sector: measured 6–8 % cheaper than
//! drawing every sector's random share from a wyrand stream (BENCHMARKS.md).
//!
//! - `dedupe = 1` (every unit unique): each write gets a new key.
//! - `dedupe = R > 1`: each dedupe unit gets a content id — a fresh one with probability 1/R,
//!   otherwise one of the thread's recent fresh ids — and its bytes are a function of the id
//!   alone (pool window and key derived from the id). Written units per unique unit is R in
//!   expectation, at the unit and at every finer granularity (a repeated unit repeats all of
//!   its sectors; a fresh unit's sectors are as unique as unique data).

use std::sync::Arc;

use iocurve_plan::DataPattern;

use crate::rng::Rng;

/// Stamp unit: every chunk of a block starts with its own 16-byte stamp.
pub const CHUNK: usize = 4096;
/// The unit of fresh data and of the constant share: the smallest unit any array looks at.
pub const SECTOR: usize = iocurve_plan::DATA_SECTOR;
/// How many recent fresh content ids a duplicate may repeat.
const RECENT: usize = 64;
/// Size of the shared random pool.
const POOL_BYTES: usize = 1 << 20;

/// A 64-bit mix (splitmix64's finaliser): spreads ids over all bits.
#[inline]
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// 128 bits from the kernel's random source, or from the clock and pid where it is missing.
fn seed128() -> [u64; 2] {
    let mut b = [0u8; 16];
    // SAFETY: getrandom writes at most the buffer's length.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    let mut rng = Rng::seed_from(0x6461_7461);
    let fallback = [rng.next_u64(), rng.next_u64()];
    if n == 16 {
        [
            u64::from_le_bytes(b[..8].try_into().expect("8 bytes")),
            u64::from_le_bytes(b[8..].try_into().expect("8 bytes")),
        ]
    } else {
        fallback
    }
}

/// Random words shared by the threads of a step (or of a preconditioning pass), and the run's
/// seed for write keys.
#[derive(Debug)]
pub struct Pool {
    words: Vec<u64>,
    seed: [u64; 2],
}

impl Pool {
    /// A pool with fresh random contents and a fresh seed.
    pub fn new() -> Pool {
        let seed = seed128();
        let mut rng = Rng::new(seed[0] ^ seed[1].rotate_left(29));
        let words = (0..POOL_BYTES / 8).map(|_| rng.next_u64()).collect();
        Pool { words, seed }
    }

    /// `n` consecutive pool words starting at word `at` (wrapping the start so they fit).
    #[inline]
    fn window(&self, at: usize, n: usize) -> &[u64] {
        let start = if at + n <= self.words.len() { at } else { 0 };
        &self.words[start..start + n]
    }
}

impl Pool {
    /// The process's pool, made at the first call (about a millisecond): steps share it, so no
    /// step pays for it between its synchronized start and its first I/O. Keys stay unique
    /// per step, since every generator mixes its own thread's seed into them.
    pub fn shared() -> Arc<Pool> {
        static SHARED: std::sync::OnceLock<Arc<Pool>> = std::sync::OnceLock::new();
        SHARED.get_or_init(|| Arc::new(Pool::new())).clone()
    }
}

impl Default for Pool {
    fn default() -> Self {
        Pool::new()
    }
}

/// Writes `dst.len()` bytes of `src ^ key` (the key alternating its two words), little-endian.
#[inline]
fn xor_copy(dst: &mut [u8], src: &[u64], key: [u64; 2]) {
    let mut words = dst.chunks_exact_mut(8);
    let mut i = 0;
    for (d, s) in (&mut words).zip(src) {
        d.copy_from_slice(&(s ^ key[i & 1]).to_le_bytes());
        i += 1;
    }
    let tail = words.into_remainder();
    if !tail.is_empty() {
        let last = (src[i] ^ key[i & 1]).to_le_bytes();
        tail.copy_from_slice(&last[..tail.len()]);
    }
}

/// Pool words one sector's random share takes.
#[inline]
fn words_for(bytes: usize) -> usize {
    bytes.div_ceil(8)
}

/// Lays out sector `s` (its turn): writes the constant share and returns the random share.
/// The constant share is written every time: a buffer may have held the other turn before.
#[inline]
fn random_share(sector: &mut [u8], s: usize, r: usize, constant: u8) -> &mut [u8] {
    let n = r.min(sector.len());
    let len = sector.len();
    if s.is_multiple_of(2) {
        sector[n..].fill(constant);
        &mut sector[..n]
    } else {
        sector[..len - n].fill(constant);
        &mut sector[len - n..]
    }
}

/// Fills written blocks with the workload's data pattern; one per I/O thread.
pub struct DataGen {
    /// Random bytes per sector.
    r: usize,
    constant: u8,
    pool: Arc<Pool>,
    /// This generator's own share of the key space (the run's seed, mixed with the thread).
    nonce: [u64; 2],
    written: u64,
    /// Next pool word to use.
    at: usize,
    /// None when every unit is unique (`dedupe = 1`).
    dedupe: Option<Dedupe>,
    /// Stamps carry a tag (workload writes) or 0 (scratch preparation).
    tagged: bool,
}

struct Dedupe {
    /// 1 / dedupe: the share of units with fresh content.
    fresh_share: f64,
    unit: usize,
    recent: [u64; RECENT],
    recent_len: usize,
    recent_next: usize,
}

impl DataGen {
    /// `pool` is shared by all threads; `rng` (the thread's own) makes this generator's keys
    /// differ from every other thread's.
    pub fn new(pattern: &DataPattern, unit: usize, pool: Arc<Pool>, rng: &mut Rng) -> DataGen {
        let dedupe = (pattern.dedupe > 1.0).then(|| Dedupe {
            fresh_share: 1.0 / pattern.dedupe,
            unit: unit.max(SECTOR),
            recent: [0; RECENT],
            recent_len: 0,
            recent_next: 0,
        });
        // The process's seed, the thread's, and 128 fresh bits from the kernel: unique per
        // generator, whatever the clocks and pids of other threads, hosts and runs.
        let thread = [rng.next_u64(), rng.next_u64()];
        let fresh = seed128();
        let nonce =
            [mix(pool.seed[0] ^ thread[0] ^ fresh[0]), mix(pool.seed[1] ^ thread[1].rotate_left(17) ^ fresh[1])];
        let at = (thread[0] as usize) % pool.words.len();
        DataGen {
            r: pattern.random_per_sector(),
            constant: pattern.constant,
            pool,
            nonce,
            written: 0,
            at,
            dedupe,
            tagged: true,
        }
    }

    /// Prepares a slot's buffer once per step (every `fill` writes all bytes of its block; this
    /// only keeps a buffer that is never filled from holding stale data).
    pub fn prepare(&self, buf: &mut [u8], _rng: &mut Rng) {
        buf.fill(self.constant);
    }

    /// The key of the next write, unique to it.
    #[inline]
    fn next_key(&mut self) -> [u64; 2] {
        self.written += 1;
        let n = self.written.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        [mix(self.nonce[0] ^ n), mix(self.nonce[1].wrapping_add(n))]
    }

    /// Scratch preparation: the same fresh data, but stamps carry tag 0, so a reader tells
    /// preparation from a workload's writes (a workload's tags are never 0).
    pub fn untagged(mut self) -> DataGen {
        self.tagged = false;
        self
    }

    /// Fills `block` for one write at byte `offset` of its target.
    #[inline]
    pub fn fill(&mut self, block: &mut [u8], offset: u64, rng: &mut Rng) {
        if self.dedupe.is_some() {
            self.fill_dedupe(block, rng);
        } else {
            let key = self.next_key();
            let r = self.r;
            let per = words_for(r);
            // Sectors take turns by their place on the target, so that 512-byte writes pair up too.
            let first = (offset / SECTOR as u64) as usize;
            for (s, sector) in block.chunks_mut(SECTOR).enumerate() {
                // Every sector its own key: a block larger than the pool meets pool windows
                // again, never under the same key.
                let m = mix(key[0] ^ (s as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
                let src = self.pool.window(self.at, per);
                let share = random_share(sector, first + s, r, self.constant);
                xor_copy(share, src, [key[0] ^ m, key[1] ^ m.rotate_left(32)]);
                self.at = (self.at + per) % self.pool.words.len();
                if s.is_multiple_of(CHUNK / SECTOR) && share.len() >= 16 {
                    // The stamp leads the random share (the chunk's head, for aligned chunks):
                    // a tag unique to the chunk's write (never 0; 0 marks preparation) and the
                    // chunk's offset.
                    let tag = if self.tagged { m | 1 } else { 0 };
                    let chunk_off = offset + (s * SECTOR) as u64;
                    share[..8].copy_from_slice(&tag.to_le_bytes());
                    share[8..16].copy_from_slice(&chunk_off.to_le_bytes());
                }
            }
        }
    }

    fn fill_dedupe(&mut self, block: &mut [u8], rng: &mut Rng) {
        let Some(d) = self.dedupe.as_mut() else { return };
        let unit = d.unit;
        let (r, constant) = (self.r, self.constant);
        let per = words_for(r);
        let sectors_per_unit = unit.div_ceil(SECTOR);
        let span = per * sectors_per_unit;
        let room = self.pool.words.len().saturating_sub(span).max(1);
        for u in block.chunks_mut(unit) {
            let fresh =
                d.recent_len == 0 || (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64) < d.fresh_share;
            let id = if fresh {
                self.written += 1;
                let id = mix(self.nonce[0] ^ self.written.wrapping_mul(0x9e37_79b9_7f4a_7c15));
                d.recent[d.recent_next] = id;
                d.recent_next = (d.recent_next + 1) % RECENT;
                d.recent_len = (d.recent_len + 1).min(RECENT);
                id
            } else {
                d.recent[rng.below(d.recent_len as u64) as usize]
            };
            // The unit's bytes are a function of its id alone: its pool window and its key.
            let key = [mix(id ^ self.nonce[1]), mix(id.rotate_left(32) ^ 0x6465_6475_7065)];
            let base = (mix(id) as usize) % room;
            // Turns counted within the unit: its bytes must not depend on where it lands.
            for (s, sector) in u.chunks_mut(SECTOR).enumerate() {
                // Every sector its own key (a unit larger than the pool meets windows again).
                let m = mix(key[0] ^ (s as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
                let share = random_share(sector, s, r, constant);
                xor_copy(share, self.pool.window(base + s * per, per), [key[0] ^ m, key[1] ^ m.rotate_left(32)]);
                if s.is_multiple_of(CHUNK / SECTOR) && share.len() >= 16 {
                    share[..8].copy_from_slice(&(m | 1).to_le_bytes());
                    share[8..16].copy_from_slice(&mix(m ^ id).to_le_bytes());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn pattern(compress: f64, dedupe: f64, unit: u64) -> DataPattern {
        DataPattern { compress, dedupe, dedupe_unit: unit, constant: 0 }
    }

    fn writes(p: DataPattern, bs: usize, n: usize, mut each: impl FnMut(&[u8])) {
        let pool = Arc::new(Pool::new());
        let mut rng = Rng::new(3);
        let mut g = DataGen::new(&p, p.dedupe_unit as usize, pool, &mut rng);
        let mut buf = vec![0u8; bs];
        g.prepare(&mut buf, &mut rng);
        for w in 0..n {
            g.fill(&mut buf, (w * bs) as u64, &mut rng);
            each(&buf);
        }
    }

    #[test]
    fn every_sector_of_every_write_is_unique() {
        for (bs, c) in [(512, 0.0), (4096, 0.0), (4096, 0.75), (65536, 0.4), (8192, 0.99)] {
            let mut seen = HashSet::new();
            let mut n = 0;
            writes(pattern(c, 1.0, 4096), bs, 2000, |b| {
                for s in b.chunks(SECTOR) {
                    seen.insert(s.to_vec());
                    n += 1;
                }
            });
            assert_eq!(seen.len(), n, "bs {bs} compress {c}: every 512-byte sector unique");
        }
    }

    #[test]
    fn blocks_and_dedupe_units_larger_than_the_pool_repeat_no_sector() {
        // 8 MiB blocks pass the 1 MiB pool eight times in one write.
        let mut seen = HashSet::new();
        let mut n = 0;
        writes(pattern(0.0, 1.0, 4096), 8 << 20, 3, |b| {
            for s in b.chunks(SECTOR) {
                seen.insert(s.to_vec());
                n += 1;
            }
        });
        assert_eq!(seen.len(), n, "8 MiB blocks: every sector unique");
        // Dedupe units of 2 MiB: repeated units are whole repeats, new ones all unique.
        let (mut sectors, mut units) = (HashSet::new(), HashSet::new());
        let (mut ns, mut nu) = (0usize, 0usize);
        writes(pattern(0.4, 2.0, 2 << 20), 2 << 20, 40, |b| {
            units.insert(b.to_vec());
            nu += 1;
            for s in b.chunks(SECTOR) {
                sectors.insert(s.to_vec());
                ns += 1;
            }
        });
        let (per_unit, per_sector) = (nu as f64 / units.len() as f64, ns as f64 / sectors.len() as f64);
        assert!(
            (per_sector - per_unit).abs() < 1e-9,
            "512 B dedupes exactly as the 2 MiB unit: {per_sector} vs {per_unit}"
        );
    }

    #[test]
    fn short_last_sectors_do_not_panic() {
        let pool = Arc::new(Pool::new());
        let mut rng = Rng::new(5);
        let mut g = DataGen::new(&pattern(0.0, 1.0, 4096), 4096, pool, &mut rng);
        for len in [1, 15, 16, 17, 500, 4096 + 7] {
            let mut b = vec![0u8; len];
            g.fill(&mut b, 0, &mut rng);
        }
    }

    #[test]
    fn untagged_stamps_carry_tag_zero_and_tagged_never() {
        let pool = Arc::new(Pool::new());
        let mut rng = Rng::new(6);
        let p = pattern(0.0, 1.0, 4096);
        let mut prep = DataGen::new(&p, 4096, pool.clone(), &mut rng).untagged();
        let mut work = DataGen::new(&p, 4096, pool, &mut rng);
        let (mut a, mut b) = (vec![0u8; 16384], vec![0u8; 16384]);
        prep.fill(&mut a, 0, &mut rng);
        work.fill(&mut b, 0, &mut rng);
        for (x, y) in a.chunks(CHUNK).zip(b.chunks(CHUNK)) {
            assert_eq!(x[..8], [0; 8]);
            assert_ne!(y[..8], [0; 8]);
            assert_eq!(x[8..16], y[8..16], "both carry the chunk's offset");
        }
    }

    #[test]
    fn every_chunk_carries_its_offset_and_sectors_their_constant_share() {
        let p = DataPattern { constant: 0xa5, ..pattern(0.4, 1.0, 4096) };
        let r = p.random_per_sector();
        assert_eq!(r, 308);
        writes(p, 3 * 4096, 3, |b| {
            for (i, s) in b.chunks(SECTOR).enumerate() {
                let (random, constant) = if i % 2 == 0 { (&s[16..r], &s[r..]) } else { (&s[512 - r..], &s[..512 - r]) };
                assert!(constant.iter().all(|x| *x == 0xa5), "the constant share is the constant byte");
                assert!(random.iter().any(|x| *x != 0xa5));
            }
        });
        let mut offsets = Vec::new();
        writes(pattern(0.0, 1.0, 4096), 2 * 4096, 2, |b| {
            for c in b.chunks(CHUNK) {
                offsets.push(u64::from_le_bytes(c[8..16].try_into().unwrap()));
            }
        });
        assert_eq!(offsets, vec![0, 4096, 8192, 12288]);
    }

    #[test]
    fn random_share_never_drops_below_sixteen_bytes() {
        assert_eq!(pattern(0.0, 1.0, 512).random_per_sector(), 512);
        assert_eq!(pattern(0.99, 1.0, 512).random_per_sector(), 16);
        assert_eq!(pattern(0.99, 1.0, 512).expected_compression(), 32.0);
        assert!((pattern(0.4, 1.0, 512).expected_compression() - 512.0 / 308.0).abs() < 1e-12);
    }

    #[test]
    fn dedupe_ratio_is_what_was_asked_at_the_unit_and_finer() {
        for (r, unit, bs) in [(2.0, 4096, 16384), (4.0, 8192, 8192), (1.5, 4096, 4096)] {
            let mut units = HashSet::new();
            let mut sectors = HashSet::new();
            let (mut nu, mut ns) = (0usize, 0usize);
            writes(pattern(0.4, r, unit as u64), bs, 40_000 * unit / bs, |b| {
                for u in b.chunks(unit) {
                    units.insert(u.to_vec());
                    nu += 1;
                }
                for s in b.chunks(SECTOR) {
                    sectors.insert(s.to_vec());
                    ns += 1;
                }
            });
            let got = nu as f64 / units.len() as f64;
            let fine = ns as f64 / sectors.len() as f64;
            assert!((got / r - 1.0).abs() < 0.03, "dedupe {r} per {unit}: {got:.3}");
            assert!(fine <= got * 1.001, "no more at 512 B than at the unit: {fine:.3} vs {got:.3}");
        }
    }

    #[test]
    fn equal_ids_are_equal_bytes_and_compress_holds_in_dedupe_mode() {
        let r = pattern(0.75, 1.0, 512).random_per_sector();
        writes(pattern(0.75, 4.0, 8192), 8192, 100, |b| {
            for (i, s) in b.chunks(SECTOR).enumerate() {
                let (random, constant) = if i % 2 == 0 { (&s[16..r], &s[r..]) } else { (&s[512 - r..], &s[..512 - r]) };
                assert!(constant.iter().all(|x| *x == 0), "a quarter random, the rest constant");
                assert!(random.iter().any(|x| *x != 0));
            }
        });
    }
}
