//! What a storage array makes of a stream of written blocks, at every granularity arrays use:
//! compression per 4 KiB, 8 KiB, 32 KiB and 128 KiB unit (zstd level 1, and lz4 per 4 KiB, the
//! fast settings inline compression uses) and over the whole stream with a long-range
//! compressor (zstd with a 128 MiB window and long-distance matching), and deduplication of
//! fixed units of 512 B, 4 KiB, 8 KiB, 16 KiB, 32 KiB and the pattern's own unit. Each figure
//! sits beside what the data pattern promises, in one table.

use std::collections::HashSet;
use std::hash::Hasher;
use std::io::Write;

use iocurve_analysis::DataCheckRow as Row;
use iocurve_plan::DataPattern;

use crate::Error;

/// Compression units, in bytes.
pub const COMPRESS_UNITS: [usize; 4] = [4096, 8192, 32768, 131072];
/// Dedupe units, in bytes (the pattern's own unit is added when it is not among them).
pub const DEDUPE_UNITS: [usize; 5] = [512, 4096, 8192, 16384, 32768];
/// Bytes are measured in spans that hold whole units of every size: the largest compression unit,
/// or the least common multiple with the pattern's dedupe unit (up to this much).
const SPAN: usize = 131072;
const MAX_SPAN: usize = 64 << 20;

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Counts the bytes a writer is given (the whole-stream compressor's output).
struct Counter(u64);

impl Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

struct Dedupe {
    unit: usize,
    units: u64,
    seen: HashSet<u64>,
}

pub struct Meter {
    pattern: DataPattern,
    /// The pattern's dedupe unit.
    unit: usize,
    pub bytes: u64,
    /// Bytes measured at a time (holds whole units of every size).
    span: usize,
    pending: Vec<u8>,
    zstd: zstd::bulk::Compressor<'static>,
    compressed: [u64; 4],
    lz4: u64,
    stream: Option<zstd::stream::write::Encoder<'static, Counter>>,
    dedupe: Vec<Dedupe>,
}

fn runtime(what: &str) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::Runtime(format!("{what}: {e}"))
}

impl Meter {
    /// `bytes`: about how much will be measured; the whole-stream compressor's window (128 MiB,
    /// as `zstd --long=27`) shrinks to fit a smaller stream, which finds the same and keeps the
    /// memory of a run's 16 MiB sample small.
    pub fn new(pattern: DataPattern, unit: usize, bytes: u64) -> Result<Meter, Error> {
        let zstd = zstd::bulk::Compressor::new(1).map_err(runtime("zstd"))?;
        let mut stream = zstd::stream::write::Encoder::new(Counter(0), 1).map_err(runtime("zstd"))?;
        stream.long_distance_matching(true).map_err(runtime("zstd --long"))?;
        let window = (64 - bytes.max(1).leading_zeros()).clamp(20, 27);
        stream.window_log(window).map_err(runtime("zstd --long"))?;
        let mut units: Vec<usize> = DEDUPE_UNITS.to_vec();
        let lcm = if unit == 0 { SPAN } else { SPAN / gcd(SPAN, unit) * unit };
        let span = if lcm <= MAX_SPAN { lcm } else { SPAN };
        if unit > 0 && !units.contains(&unit) && span.is_multiple_of(unit) {
            units.push(unit);
            units.sort_unstable();
        }
        let dedupe = units.into_iter().map(|unit| Dedupe { unit, units: 0, seen: HashSet::new() }).collect();
        Ok(Meter {
            pattern,
            unit,
            bytes: 0,
            span,
            pending: Vec::with_capacity(span),
            zstd,
            compressed: [0; 4],
            lz4: 0,
            stream: Some(stream),
            dedupe,
        })
    }

    /// Adds bytes in write order (any length; they are measured in whole units).
    pub fn add(&mut self, mut bytes: &[u8]) -> Result<(), Error> {
        while !bytes.is_empty() {
            let take = (self.span - self.pending.len()).min(bytes.len());
            self.pending.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.pending.len() == self.span {
                self.measure()?;
            }
        }
        Ok(())
    }

    /// Measures the pending span (whole units of each size only; a short rest is left out).
    fn measure(&mut self) -> Result<(), Error> {
        let span = std::mem::take(&mut self.pending);
        if span.len() < COMPRESS_UNITS[0] {
            return Ok(());
        }
        let whole = span.len() / COMPRESS_UNITS[0] * COMPRESS_UNITS[0];
        self.bytes += whole as u64;
        for (i, unit) in COMPRESS_UNITS.iter().enumerate() {
            for u in span[..whole].chunks_exact(*unit) {
                self.compressed[i] += self.zstd.compress(u).map_err(runtime("zstd"))?.len() as u64;
            }
            // Units that do not fit the short last span count as stored uncompressed.
            self.compressed[i] += (whole % unit) as u64;
        }
        for u in span[..whole].chunks_exact(COMPRESS_UNITS[0]) {
            self.lz4 += lz4_flex::block::compress(u).len() as u64;
        }
        if let Some(s) = self.stream.as_mut() {
            s.write_all(&span[..whole]).map_err(runtime("zstd --long"))?;
        }
        for d in &mut self.dedupe {
            for u in span[..whole].chunks_exact(d.unit) {
                let mut h = std::hash::DefaultHasher::new();
                h.write(u);
                d.seen.insert(h.finish());
                d.units += 1;
            }
        }
        self.pending = span;
        self.pending.clear();
        Ok(())
    }

    /// Ends the stream and returns the table.
    pub fn finish(mut self) -> Result<Vec<Row>, Error> {
        if !self.pending.is_empty() {
            self.measure()?;
        }
        let streamed = match self.stream.take() {
            Some(s) => s.finish().map_err(runtime("zstd --long"))?.0,
            None => 0,
        };
        let ratio = |compressed: u64| self.bytes as f64 / compressed.max(1) as f64;
        let c = self.pattern.expected_compression();
        // A dedupe ratio rests on how many units drew fresh content: with n units, each fresh
        // with p = 1/R, its relative standard deviation is about √((R − 1) / n). Three of them,
        // or 5 %, whichever is wider, before a row counts as broken.
        let n = (self.bytes / self.unit.max(1) as u64).max(1) as f64;
        let sampling = (3.0 * ((self.pattern.dedupe - 1.0) / n).sqrt()).max(Row::TOLERANCE);
        let tol =
            |dedupe_bound: bool| if dedupe_bound && self.pattern.dedupe > 1.0 { sampling } else { Row::TOLERANCE };
        // Duplicate units inside one compression unit (or anywhere, for a long-range
        // compressor) compress away too: beyond the dedupe unit the most any compressor may
        // find is both reductions together.
        let both = c * self.pattern.dedupe;
        let mut rows = Vec::new();
        for (i, unit) in COMPRESS_UNITS.iter().enumerate() {
            let beyond = self.pattern.dedupe > 1.0 && *unit > self.unit;
            rows.push(Row {
                kind: "compression".into(),
                method: "zstd -1".into(),
                unit: Some(*unit as u64),
                expected: if beyond { both } else { c },
                at_most: beyond,
                achieved: ratio(self.compressed[i]),
                tolerance: tol(beyond),
            });
        }
        rows.push(Row {
            kind: "compression".into(),
            method: "lz4".into(),
            unit: Some(COMPRESS_UNITS[0] as u64),
            expected: c,
            at_most: false,
            achieved: ratio(self.lz4),
            tolerance: Row::TOLERANCE,
        });
        rows.push(Row {
            kind: "compression".into(),
            method: "zstd --long".into(),
            unit: None,
            expected: both,
            // A long-range compressor is no exact deduplicator (it samples for matches): with
            // dedupe, both reductions together are the most it may find, not a target.
            at_most: self.pattern.dedupe > 1.0,
            achieved: ratio(streamed),
            tolerance: tol(true),
        });
        for d in &self.dedupe {
            // A repeated unit repeats all its finer units too: the ratio holds at the unit and
            // below; coarser units can only be less alike.
            let at_most = d.unit > self.unit;
            rows.push(Row {
                kind: "deduplication".into(),
                method: "fixed units".into(),
                unit: Some(d.unit as u64),
                expected: self.pattern.dedupe,
                at_most,
                achieved: d.units as f64 / d.seen.len().max(1) as f64,
                tolerance: tol(true),
            });
        }
        Ok(rows)
    }
}

/// Bytes of a workload's data a run measures before its first step: enough for each ratio to
/// within a percent or two, about a tenth of a second of CPU and 10 MiB of memory (the
/// whole-stream compressor's window).
const SAMPLE_BYTES: u64 = 8 << 20;

/// The data check of a writing workload, on a sample of what the engine will write (the same
/// generator, consecutive offsets, the largest block size).
pub fn sample(w: &iocurve_plan::Workload) -> Result<Vec<Row>, Error> {
    generate(w, SAMPLE_BYTES)
}

/// Measures `size` bytes of blocks filled exactly as the engine fills them (one generator,
/// consecutive offsets, the largest block size).
pub fn generate(w: &iocurve_plan::Workload, size: u64) -> Result<Vec<Row>, Error> {
    use iocurve_engine::data::{DataGen, Pool};
    use iocurve_engine::rng::Rng;
    let bs = w.max_bs() as usize;
    let unit = w.dedupe_unit() as usize;
    let mut rng = Rng::seed_from(size);
    let mut data = DataGen::new(&w.data, unit, std::sync::Arc::new(Pool::new()), &mut rng);
    let mut buf = vec![0u8; bs];
    data.prepare(&mut buf, &mut rng);
    let mut meter = Meter::new(w.data, unit, size)?;
    for i in 0..(size / bs as u64).max(1) {
        data.fill(&mut buf, i * bs as u64, &mut rng);
        meter.add(&buf)?;
    }
    meter.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_data_compresses_and_dedupes_at_every_unit() {
        let p = DataPattern { compress: 0.0, dedupe: 1.0, dedupe_unit: 4096, constant: 0 };
        let mut m = Meter::new(p, 4096, 1 << 20).unwrap();
        m.add(&vec![7u8; 1 << 20]).unwrap();
        let rows = m.finish().unwrap();
        assert!(rows.iter().filter(|r| r.kind == "compression").all(|r| r.achieved > 50.0), "{rows:?}");
        let d512 = rows.iter().find(|r| r.kind == "deduplication" && r.unit == Some(512)).unwrap();
        assert_eq!(d512.achieved, 2048.0);
        assert!(!d512.holds(), "constant data breaks the promise of unique data");
    }

    #[test]
    fn the_table_names_every_unit() {
        let p = DataPattern { compress: 0.4, dedupe: 2.0, dedupe_unit: 8192, constant: 0 };
        let mut m = Meter::new(p, 8192, 300_000).unwrap();
        m.add(&vec![1u8; 300_000]).unwrap();
        let t = iocurve_report::terminal::data_check(&m.finish().unwrap(), 8192);
        for needle in ["per 4k", "per 128k", "whole stream", "per 512", "per 8k (its unit)", "≤ 2.00:1"] {
            assert!(t.contains(needle), "{needle} in\n{t}");
        }
    }
}
