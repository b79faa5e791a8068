//! The prepared sampler of one working set: a law's draw, rotated to its centre, then placed by
//! the layout.

use crate::normal::Normal;
use crate::numeric::{Sum, touched};
use crate::pareto::Pareto;
use crate::permute::Permutation;
use crate::rng::below;
use crate::segments::Segments;
use crate::validate::validate;
use crate::zipf::Zipf;
use crate::{Distribution, Law, Layout};

/// One working set's prepared sampler: built once per target per stream from the run's
/// distribution, layout and seed, then drawn from with the stream's own random numbers.
///
/// Streams that build it from the same arguments share its hot region and its scattering; a
/// clone is an independent sampler with the same hot region.
#[derive(Debug, Clone)]
pub struct Access {
    blocks: u64,
    law: Sampler,
    /// Where rank 0 of zipf and pareto sits (their centre); 0 for the other laws, whose centre
    /// (normal) or zones are part of the law.
    offset: u64,
    /// The scattered layout's permutation.
    scatter: Option<Permutation>,
}

/// The law's own draw: a rank (zipf, pareto) or a position before the layout.
#[derive(Debug, Clone)]
enum Sampler {
    Uniform,
    Zipf(Zipf),
    Pareto(Pareto),
    Normal(Normal),
    Segments(Segments),
}

impl Access {
    /// The sampler for a working set of `blocks` >= 1 positions of `unit` bytes each (`unit`
    /// places zoned_abs zones and is otherwise unused). `seed` is the run's seed, the same on
    /// every host: it decides the scattered layout's permutation.
    ///
    /// # Errors
    ///
    /// A sentence saying why: a distribution that breaks its rules, an empty working set,
    /// zoned_abs zones that need more bytes than `blocks · unit`, or a zone too small to cover a
    /// position of a working set this small.
    pub fn new(d: &Distribution, layout: Layout, blocks: u64, unit: u64, seed: u64) -> Result<Access, String> {
        validate(d)?;
        if blocks == 0 {
            return Err("the working set has no blocks, so there is no position to access; give at least 1".to_owned());
        }
        let law = match &d.law {
            Law::Uniform => Sampler::Uniform,
            Law::Zipf { theta } => Sampler::Zipf(Zipf::new(*theta, blocks)),
            Law::Pareto { h } => Sampler::Pareto(Pareto::new(*h, blocks)),
            Law::Normal { sigma_pct } => Sampler::Normal(Normal::new(*sigma_pct, d.centre.unwrap_or(0.5), blocks)),
            Law::Zoned(zones) => Sampler::Segments(Segments::zoned(zones, blocks)?),
            Law::ZonedAbs(zones) => Sampler::Segments(Segments::zoned_abs(zones, blocks, unit)?),
            Law::HotBands(bands) => Sampler::Segments(Segments::hot_bands(bands, blocks)),
        };
        let offset = match d.law {
            Law::Zipf { .. } | Law::Pareto { .. } => {
                // floor(c·n), with c = 1 the same as 0 (the circle closes).
                ((d.centre.unwrap_or(0.0) * blocks as f64).floor() as u64).min(blocks) % blocks
            }
            _ => 0,
        };
        let scatter = (layout == Layout::Scattered).then(|| Permutation::new(blocks, seed));
        Ok(Access { blocks, law, offset, scatter })
    }

    /// The next position, in `[0, blocks)`. `rand` returns uniformly distributed u64s.
    #[inline]
    pub fn next(&mut self, rand: &mut impl FnMut() -> u64) -> u64 {
        let drawn = match &mut self.law {
            Sampler::Uniform => below(rand, self.blocks),
            Sampler::Zipf(z) => z.sample(rand),
            Sampler::Pareto(p) => p.sample(rand),
            Sampler::Normal(g) => g.sample(rand),
            Sampler::Segments(s) => s.sample(rand),
        };
        let position = rotate(drawn, self.offset, self.blocks);
        match &self.scatter {
            Some(p) => p.apply(position),
            None => position,
        }
    }

    /// The exact probability that `next` returns `position` (0 outside the working set).
    #[must_use]
    pub fn probability(&self, position: u64) -> f64 {
        if position >= self.blocks {
            return 0.0;
        }
        let placed = match &self.scatter {
            Some(p) => p.invert(position),
            None => position,
        };
        // Undo the rotation: the rank `offset` places behind `placed`.
        let drawn = rotate(placed, self.blocks - self.offset, self.blocks);
        self.law.probability(drawn, self.blocks)
    }

    /// The number of distinct positions `draws` draws are expected to touch,
    /// `Σ 1 − (1 − pᵢ)^draws`. O(blocks) for zipf, pareto and normal; O(zones²) otherwise.
    #[must_use]
    pub fn expected_distinct(&self, draws: u64) -> f64 {
        let d = draws as f64;
        match &self.law {
            Sampler::Uniform => self.blocks as f64 * touched(1.0 / self.blocks as f64, d),
            Sampler::Segments(s) => s.expected_distinct(d),
            // Centre and layout only move probabilities between positions; the sum runs over
            // the law's own order.
            law => {
                let mut sum = Sum::default();
                for i in 0..self.blocks {
                    sum.add(touched(law.probability(i, self.blocks), d));
                }
                sum.value()
            }
        }
    }

    /// The number of positions in the working set.
    #[must_use]
    pub fn blocks(&self) -> u64 {
        self.blocks
    }
}

impl Sampler {
    fn probability(&self, drawn: u64, blocks: u64) -> f64 {
        match self {
            Sampler::Uniform => 1.0 / blocks as f64,
            Sampler::Zipf(z) => z.probability(drawn),
            Sampler::Pareto(p) => p.probability(drawn),
            Sampler::Normal(g) => g.probability(drawn),
            Sampler::Segments(s) => s.probability(drawn),
        }
    }
}

/// `(x + offset) mod n` for x, offset < n, without overflow.
#[inline]
fn rotate(x: u64, offset: u64, n: u64) -> u64 {
    let room = n - offset;
    if x >= room { x - room } else { x + offset }
}

#[cfg(test)]
mod tests;
