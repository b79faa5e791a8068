//! Which blocks a random workload touches, and how often.
//!
//! A random workload picks the block of each I/O from a working set of `n` blocks, the
//! *positions* `0..n`. This crate decides which position comes next. Three things shape it:
//!
//! - the **law** (the access distribution): how much more often some positions are picked than
//!   others;
//! - the **centre**: where in the working set the hottest positions lie;
//! - the **layout**: whether the hot positions sit next to each other or are spread over the
//!   whole working set.
//!
//! Every I/O stream of a run (every thread on every load host) builds the same [`Access`] from
//! the same seed, so the array sees *one* hot region, not one per stream; each stream then draws
//! from it with its own random generator.
//!
//! # Laws
//!
//! Written as in plan files, `name:parameter[:centre]`:
//!
//! - **`uniform`** (fio's `random` is accepted too): every position is equally likely.
//! - **`zipf:θ`** (0 < θ ≤ 10): rank the positions from the hottest (rank 0) to the coldest; rank
//!   `r` is picked with probability proportional to `1/(r+1)^θ`. The larger θ, the more the
//!   accesses crowd on the first ranks: with a million positions, the hottest 1 % get about
//!   36 % of the accesses at θ = 0.8, 68 % at θ = 1.0 and 91 % at θ = 1.2 (see the test
//!   `zipf::tests::hot_share_quoted_in_the_crate_doc`). The draws are exact, for every θ
//!   including 1 and for any size: rejection-inversion sampling (Hörmann and Derflinger, 1996),
//!   not the approximation fio uses, whose shape drifts from the law it names.
//! - **`pareto:h`** (0 < h < 1): fio's pareto. A share `max(h, 1-h)` of the accesses falls on the
//!   hottest `min(h, 1-h)` of the positions: `pareto:0.9` sends 90 % of the I/O to 10 % of the
//!   blocks, the "80/20 rule" is `pareto:0.8`. As for zipf, the hottest position is rank 0.
//! - **`normal:σ`** (0 < σ ≤ 100): a bell curve around the centre, σ its standard deviation in
//!   percent of the working set. The working set is a circle here: the part of the bell that
//!   falls past one end comes back at the other, so no position is lost and no end is favoured.
//! - **`zoned:a/r:a/r:…`**: fio's zoned. Zones follow each other from the start of the working
//!   set; a share `a` percent of the accesses falls uniformly in the next `r` percent of it.
//!   The shares must add up to 100; the ranges may add up to less than 100, and the rest of the
//!   working set is then never accessed. Up to 256 zones.
//! - **`zoned_abs:a/size:…`**: the same with zone sizes in bytes (`20g`, `512m`, `4096`; the
//!   suffixes are powers of 1024). The zones must fit in the working set.
//! - **`hotbands:A@S-E:…`**: hot bands in the manner of vdbench. A share `A` percent of the
//!   accesses falls uniformly in the band from `S` to `E` percent of the working set; the bands may
//!   not overlap and their shares add up to at most 100. The remaining accesses fall uniformly
//!   over the *whole* working set, bands included, so a cold position is still read now and
//!   then. `hotbands:50@0-10:20@40-45` sends half of the I/O to the first tenth, a fifth to
//!   a twentieth in the middle, and spreads the rest.
//!
//! # Centre
//!
//! zipf, pareto and normal take an optional centre, a share of the working set from 0 to 1:
//! `zipf:1.2:0.25` puts the hottest position a quarter of the way in, with the next ranks
//! following it upwards (wrapping past the end to the start). Without a centre the hottest
//! position of zipf and pareto is the first one, and the peak of normal is in the middle.
//!
//! # Layout
//!
//! - **contiguous** (the default): ranks follow positions, so the hot region is a run of
//!   neighbouring blocks. On a striped array a contiguous hot region may sit on a few stripes.
//! - **scattered**: positions are shuffled by a fixed permutation drawn from the run's seed, so
//!   the hot ranks land all over the working set. A permutation moves positions without merging
//!   any: every position keeps exactly the probability the law gives its rank, and a run
//!   touches as many distinct blocks as the law predicts. (Hashing positions modulo the size, as
//!   fio does, merges some positions and never reaches others, which changes both.) The same
//!   seed gives the same permutation on every host; another seed gives another.
//!
//! # Drawing positions
//!
//! [`Access::next`] takes a closure returning uniform 64-bit random numbers and costs O(1) on
//! average (O(zones) for zoned and hot bands), without allocating. [`Access::probability`] gives
//! the exact probability of a position, and [`Access::expected_distinct`] the number of distinct
//! positions a number of draws is expected to touch, for reports and tests.

mod access;
mod normal;
mod numeric;
mod pareto;
mod permute;
mod rng;
mod segments;
mod text;
mod validate;
mod zipf;

#[cfg(test)]
mod testutil;

pub use access::Access;

/// A law and its optional centre, as written in plan files (`zipf:1.2`, `zipf:1.2:0.25`).
///
/// Parse it with [`str::parse`] and write it back with `Display`; both check the values and say
/// what is wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct Distribution {
    /// How often each position is picked.
    pub law: Law,
    /// Where the hot region lies, a share of the working set from 0 to 1 (zipf, pareto and
    /// normal only); `None` for the law's default (the start for zipf and pareto, the middle for
    /// normal).
    pub centre: Option<f64>,
}

/// An access distribution; see the crate documentation for what each one means.
#[derive(Debug, Clone, PartialEq)]
pub enum Law {
    /// Every position equally likely.
    Uniform,
    /// Rank `r` with probability proportional to `1/(r+1)^theta`, 0 < theta <= 10.
    Zipf {
        /// The exponent.
        theta: f64,
    },
    /// fio's pareto, 0 < h < 1.
    Pareto {
        /// fio's parameter: a share `max(h, 1-h)` of the accesses on `min(h, 1-h)` of the positions.
        h: f64,
    },
    /// A bell curve on the circle of positions.
    Normal {
        /// The standard deviation in percent of the working set, 0 < σ <= 100.
        sigma_pct: f64,
    },
    /// fio's zoned: zones in order from the start of the working set.
    Zoned(Vec<Zone>),
    /// fio's zoned_abs: zones in order from the start, sized in bytes.
    ZonedAbs(Vec<ZoneAbs>),
    /// Hot bands over a uniform background.
    HotBands(Vec<Band>),
}

/// A zone of `zoned`: `access_pct` percent of the accesses fall in the next `range_pct` percent of
/// the working set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Zone {
    /// Share of the accesses, in percent (0 to 100; the zones' shares add up to 100).
    pub access_pct: f64,
    /// Share of the working set, in percent (above 0; the zones' ranges add up to at most 100).
    pub range_pct: f64,
}

/// A zone of `zoned_abs`: `access_pct` percent of the accesses fall in the next `bytes` bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ZoneAbs {
    /// Share of the accesses, in percent (0 to 100; the zones' shares add up to 100).
    pub access_pct: f64,
    /// Size of the zone in bytes (above 0).
    pub bytes: u64,
}

/// A hot band: `access_pct` percent of the accesses fall uniformly between `start_pct` and
/// `end_pct` percent of the working set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Band {
    /// Share of the accesses, in percent (above 0; the bands' shares add up to at most 100).
    pub access_pct: f64,
    /// Where the band starts, in percent of the working set (0 <= start < end).
    pub start_pct: f64,
    /// Where the band ends, in percent of the working set (start < end <= 100).
    pub end_pct: f64,
}

/// Where the hot positions lie: next to each other, or spread by a seeded permutation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// Ranks follow positions: the hot region is a run of neighbouring blocks.
    #[default]
    Contiguous,
    /// Positions shuffled by a permutation drawn from the run's seed.
    Scattered,
}

impl Distribution {
    /// Whether every position is equally likely (the law is `uniform`).
    #[must_use]
    pub fn is_uniform(&self) -> bool {
        matches!(self.law, Law::Uniform)
    }
}
