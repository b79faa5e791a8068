//! Sections to jobs: each job section takes the `[global]` entries read before it, then its
//! own (a later value wins, as in fio), and every value is resolved the way fio resolves it.

use std::collections::BTreeSet;

use super::ini::{Entry, Section};
use super::options::{self, Kind};
use super::value::{self, SizeOr};
use super::{FioJob, Notice};
use crate::error::{PlanError, did_you_mean};

/// fio's defaults where iocurve's differ.
const DEFAULT_BS: u64 = 4096;
const DEFAULT_ENGINE: &str = "psync";

/// Resolves every job section; notes on options are added to `notices` once per line.
pub fn resolve(sections: &[Section], notices: &mut Vec<Notice>) -> Result<Vec<FioJob>, PlanError> {
    let mut globals: Vec<Entry> = Vec::new();
    let mut jobs = Vec::new();
    let mut seen = BTreeSet::new();
    for s in sections {
        if s.is_global() {
            globals.extend(s.entries.iter().cloned());
            continue;
        }
        let entries: Vec<Entry> = globals.iter().chain(&s.entries).cloned().collect();
        let job = Job { section: s, entries: &entries };
        jobs.push(job.resolve(notices, &mut seen)?);
    }
    if jobs.is_empty() {
        let file = sections.first().map_or("the job file", |s| s.file.as_str());
        return Err(PlanError::new(file, None, None, "has no job section: add a [job] after [global]"));
    }
    Ok(jobs)
}

struct Job<'a> {
    section: &'a Section,
    entries: &'a [Entry],
}

type R<T> = Result<T, PlanError>;

/// Where a job's sizes are noted when fio's kb_base makes them ambiguous: once per line.
struct SizeNotes<'n> {
    notices: &'n mut Vec<Notice>,
    seen: &'n mut BTreeSet<(String, usize)>,
}

impl SizeNotes<'_> {
    /// A size is read under the kb_base in force where it is written, as fio parses in order.
    fn note(&mut self, e: &Entry, v: &str, bytes: u64, kb: u64) {
        if self.seen.insert((e.file.clone(), e.line)) {
            self.notices.push(Notice {
                file: e.file.clone(),
                line: e.line,
                option: e.key.clone(),
                value: v.into(),
                instead: format!(
                    "read as {bytes} bytes, as fio does under kb_base={kb} (fio issue #1618); write the size in bytes to be unambiguous"
                ),
                refused: false,
            });
        }
    }
}

impl Job<'_> {
    /// The last entry setting `canonical` (under any of its names), with its position.
    fn last(&self, canonical: &str) -> Option<(usize, &Entry)> {
        self.entries
            .iter()
            .enumerate()
            .rev()
            .find(|(_, e)| options::lookup(&e.key).is_some_and(|k| k.canonical == canonical))
    }

    fn err(&self, e: &Entry, msg: impl Into<String>) -> PlanError {
        PlanError::new(&e.file, Some(e.line), Some(e.key.clone()), msg)
    }

    fn text(&self, key: &str) -> Option<(&Entry, &str)> {
        self.last(key).map(|(_, e)| (e, e.value.as_deref().unwrap_or("1")))
    }

    fn parse<T>(&self, key: &str, f: impl Fn(&str) -> Result<T, String>) -> R<Option<T>> {
        match self.text(key) {
            None => Ok(None),
            Some((e, v)) => f(v).map(Some).map_err(|m| self.err(e, m)),
        }
    }

    /// The kb_base in force at `e`: the last one set before it (fio parses in order).
    fn kb_at(&self, e: &Entry) -> R<u64> {
        let at = self.entries.iter().position(|x| std::ptr::eq(x, e)).unwrap_or(self.entries.len());
        let set =
            self.entries[..at].iter().rev().find(|x| options::lookup(&x.key).is_some_and(|k| k.canonical == "kb_base"));
        match set {
            None => Ok(1024),
            Some(k) => match k.value.as_deref().map(str::trim) {
                Some("1024") => Ok(1024),
                Some("1000") => Ok(1000),
                v => Err(self.err(k, format!("`{}`: kb_base is 1024 or 1000", v.unwrap_or("")))),
            },
        }
    }

    fn flag(&self, key: &str) -> R<bool> {
        Ok(self.parse(key, value::boolean)?.unwrap_or(false))
    }

    fn resolve(&self, notices: &mut Vec<Notice>, seen: &mut BTreeSet<(String, usize)>) -> R<FioJob> {
        self.classify(notices, seen)?;
        self.check_kb_base()?;
        let mut notes = SizeNotes { notices, seen };
        let (rw, modifier) = self.rw_mode()?;
        let read_pct = self.read_pct(&rw)?;
        let trim_pct = match rw.as_str() {
            "trim" | "randtrim" => 100.0,
            "trimwrite" | "randtrimwrite" => 50.0,
            _ => 0.0,
        };

        let (bs, bs_range) = self.block_sizes(&mut notes)?;

        let positive = |key: &str, max: u64| -> R<Option<u32>> {
            match self.text(key) {
                None => Ok(None),
                Some((e, v)) => match value::int(v) {
                    Ok(n) if (1..=max).contains(&n) => Ok(Some(n as u32)),
                    _ => Err(self.err(e, format!("`{v}`: {key} is a whole number from 1 to {max}"))),
                },
            }
        };
        let numjobs = positive("numjobs", 4096)?.unwrap_or(1);
        let iodepth = positive("iodepth", 65536)?.unwrap_or(1);
        let nrfiles = positive("nrfiles", 1 << 20)?.unwrap_or(1);

        let size = self.size_of("size", &mut notes)?;
        let offset = self.size_of("offset", &mut notes)?;
        let filesize = match self.size_of("filesize", &mut notes)? {
            Some(SizeOr::Percent(_)) => {
                let (e, v) = self.text("filesize").unwrap_or_else(|| unreachable!());
                return Err(self.err(e, format!("`{v}`: filesize is a size, not a percentage")));
            }
            Some(SizeOr::Bytes(b)) => Some(b),
            None => None,
        };

        let directory = self.text("directory").map(|(_, v)| v.to_string());
        let filenames = match self.text("filename") {
            Some((_, v)) => split_filenames(v),
            None => Vec::new(),
        };
        let runtime_s = self.parse("runtime", value::seconds)?;
        let ramp_s = self.parse("ramp_time", value::seconds)?.unwrap_or(0.0);
        let direct = match (self.last("direct"), self.last("buffered")) {
            (Some((i, _)), Some((j, _))) if j > i => !self.flag("buffered")?,
            (Some(_), _) => self.flag("direct")?,
            (None, Some(_)) => !self.flag("buffered")?,
            (None, None) => false,
        };
        let ioengine = self.text("ioengine").map_or(DEFAULT_ENGINE.to_string(), |(_, v)| v.trim().to_string());
        let wait_for = self.text("wait_for").map(|(_, v)| v.trim().to_string());
        // fio names a job by its own section's `name=`; one in [global] renames none.
        let name = self
            .section
            .entries
            .iter()
            .rev()
            .find(|e| e.key == "name")
            .and_then(|e| e.value.clone())
            .unwrap_or_else(|| self.section.name.clone());

        Ok(FioJob {
            name,
            file: self.section.file.clone(),
            line: self.section.line,
            rw,
            modifier,
            read_pct,
            trim_pct,
            bs,
            bs_range,
            numjobs,
            iodepth,
            nrfiles,
            ioengine,
            direct,
            size,
            offset,
            filesize,
            directory,
            filenames,
            runtime_s,
            time_based: self.flag("time_based")?,
            ramp_s,
            stonewall: self.flag("stonewall")?,
            new_group: self.flag("new_group")?,
            wait_for,
            compress_pct: self.parse("buffer_compress_percentage", percent)?,
            dedupe_pct: self.parse("dedupe_percentage", percent)?,
            rate_iops: self.per_direction_number("rate_iops", |v| value::int(v).map(|n| n as f64))?,
            rate_bytes: match self.last("rate") {
                Some((_, e)) => {
                    let kb = self.kb_at(e)?;
                    self.per_direction_number("rate", |v| value::size(v, kb).map(|s| s.bytes as f64))?
                }
                None => None,
            },
            poisson: self.text("rate_process").is_some_and(|(_, v)| v.trim() == "poisson"),
            continue_on_error: self.text("continue_on_error").map(|(_, v)| v.trim().to_string()),
            verify: self.text("verify").map(|(_, v)| v.trim().to_string()),
            verify_trim: self.verify_trim()?,
            random_distribution: self.text("random_distribution").map(|(_, v)| v.trim().to_string()),
            percentage_random: self.parse("percentage_random", value::int)?,
            thinktime_ns: self.parse("thinktime", value::micros)?,
            thinktime_spin_ns: self.parse("thinktime_spin", value::micros)?,
            thinktime_blocks: self.parse("thinktime_blocks", value::int)?,
            origins: self
                .entries
                .iter()
                .filter_map(|e| options::lookup(&e.key).map(|k| (k.canonical.to_string(), e.file.clone(), e.line)))
                .collect(),
        })
    }

    /// `kb_base`, where set, is 1024 or 1000.
    fn check_kb_base(&self) -> R<()> {
        if let Some((_, e)) = self.last("kb_base") {
            self.kb_at(e)?;
            self.parse("kb_base", |v| {
                if matches!(v.trim(), "1024" | "1000") {
                    Ok(())
                } else {
                    Err(format!("`{v}`: kb_base is 1024 or 1000"))
                }
            })?;
        }
        Ok(())
    }

    /// The `rw` mode (read, write, randread, randwrite, rw, randrw, trim, randtrim, trimwrite,
    /// randtrimwrite) and its `:` modifier.
    fn rw_mode(&self) -> R<(String, Option<(Entry, String)>)> {
        Ok(match self.text("rw") {
            None => ("read".to_string(), None),
            Some((e, v)) => {
                let (mode, m) = v.split_once(':').map_or((v, None), |(a, b)| (a, Some(b)));
                let mode = match mode.trim() {
                    "read" | "write" | "randread" | "randwrite" | "randrw" | "trim" | "randtrim" | "trimwrite"
                    | "randtrimwrite" => mode.trim().to_string(),
                    "rw" | "readwrite" => "rw".into(),
                    other => {
                        return Err(self.err(
                            e,
                            format!(
                                "`{other}` is not a fio rw mode: read, write, randread, randwrite, rw, randrw, trim, randtrim, trimwrite or randtrimwrite"
                            ),
                        ));
                    }
                };
                (mode, m.map(|m| (e.clone(), m.trim().to_string())))
            }
        })
    }

    /// The share of reads: 100 or 0 for one-way modes (0 for the trim modes: fio's rwmixread
    /// mixes reads and writes only), else `rwmixread` / `rwmixwrite`, the one written last
    /// winning (50 when neither is).
    fn read_pct(&self, rw: &str) -> R<f64> {
        let read_pct = match (self.last("rwmixread"), self.last("rwmixwrite")) {
            (None, None) => 50.0,
            (r, w) => {
                let pct = |e: &Entry| {
                    let v = e.value.as_deref().unwrap_or("");
                    value::int(v)
                        .ok()
                        .filter(|&n| n <= 100)
                        .map(|n| n as f64)
                        .ok_or_else(|| self.err(e, format!("`{v}` is not a percentage from 0 to 100")))
                };
                match (r, w) {
                    (Some((i, re)), Some((j, we))) => {
                        if i > j {
                            pct(re)?
                        } else {
                            100.0 - pct(we)?
                        }
                    }
                    (Some((_, re)), None) => pct(re)?,
                    (None, Some((_, we))) => 100.0 - pct(we)?,
                    (None, None) => unreachable!(),
                }
            }
        };
        Ok(match rw {
            "read" | "randread" => 100.0,
            "write" | "randwrite" | "trim" | "randtrim" | "trimwrite" | "randtrimwrite" => 0.0,
            _ => read_pct,
        })
    }

    /// Block sizes per direction (reads, writes, trims) and their range.
    #[allow(clippy::type_complexity)]
    fn block_sizes(&self, notes: &mut SizeNotes) -> R<([Vec<(u64, f64)>; 3], [(u64, u64); 3])> {
        // Block sizes per direction, in file order: `bs` and `bsrange` set the same fields in
        // fio (the later wins, direction by direction: an empty slot keeps what was set);
        // `bssplit`, where set, wins over both.
        let mut bs: [Vec<(u64, f64)>; 3] = std::array::from_fn(|_| vec![(DEFAULT_BS, 100.0)]);
        let mut bs_range = [(DEFAULT_BS, DEFAULT_BS); 3];
        let mut split: [Option<Vec<(u64, f64)>>; 3] = [None, None, None];
        for e in self.entries {
            let Some(k) = options::lookup(&e.key).map(|k| k.canonical) else { continue };
            if !matches!(k, "bs" | "bsrange" | "bssplit") {
                continue;
            }
            let kb = self.kb_at(e)?;
            let v = e.value.as_deref().unwrap_or("");
            let dirs = value::per_direction(v).map_err(|m| self.err(e, m))?;
            for d in 0..3 {
                let Some(text) = &dirs[d] else { continue };
                match k {
                    "bsrange" => {
                        let ((lo, hi), amb) = value::range(text, kb).map_err(|m| self.err(e, m))?;
                        if amb {
                            notes.note(e, v, lo, kb);
                        }
                        bs[d] = value::range_mix(lo, hi).map_err(|m| self.err(e, m))?;
                        bs_range[d] = (lo, hi);
                    }
                    "bs" => {
                        let s = value::size(text, kb).map_err(|m| self.err(e, m))?;
                        if s.ambiguous {
                            notes.note(e, v, s.bytes, kb);
                        }
                        if s.bytes == 0 {
                            return Err(self.err(e, "a block size of 0"));
                        }
                        bs[d] = vec![(s.bytes, 100.0)];
                        bs_range[d] = (s.bytes, s.bytes);
                    }
                    _ => {
                        let (sizes, amb) = value::bssplit(text, kb).map_err(|m| self.err(e, m))?;
                        if amb {
                            notes.note(e, v, sizes[0].0, kb);
                        }
                        split[d] = Some(sizes);
                    }
                }
            }
        }
        for d in 0..3 {
            if let Some(sizes) = split[d].take() {
                bs_range[d] = (
                    sizes.iter().map(|s| s.0).min().unwrap_or(DEFAULT_BS),
                    sizes.iter().map(|s| s.0).max().unwrap_or(DEFAULT_BS),
                );
                bs[d] = sizes;
            }
        }
        Ok((bs, bs_range))
    }

    /// A size (or a percentage) option, read under the kb_base in force where it is written.
    fn size_of(&self, key: &str, notes: &mut SizeNotes) -> R<Option<SizeOr>> {
        match self.text(key) {
            None => Ok(None),
            Some((e, v)) => {
                let kb = self.kb_at(e)?;
                let (s, amb) = value::size_or_percent(v, kb).map_err(|m| self.err(e, m))?;
                if let (true, SizeOr::Bytes(b)) = (amb, s) {
                    notes.note(e, v, b, kb);
                }
                Ok(Some(s))
            }
        }
    }

    /// fio's trims of verified blocks: each option set (canonical name) with its value.
    fn verify_trim(&self) -> R<Vec<(String, u64)>> {
        let mut out = Vec::new();
        for key in ["trim_percentage", "trim_backlog", "trim_backlog_batch", "trim_verify_zero"] {
            let n = match key {
                "trim_percentage" => self.parse(key, |v| percent(v).map(|p| p as u64))?,
                "trim_verify_zero" => self.parse(key, value::boolean)?.map(u64::from),
                _ => self.parse(key, value::int)?,
            };
            if let Some(n) = n {
                out.push((key.to_string(), n));
            }
        }
        Ok(out)
    }

    /// A per-direction rate: the read, write and trim values.
    fn per_direction_number(
        &self,
        key: &str,
        f: impl Fn(&str) -> Result<f64, String>,
    ) -> R<Option<(Entry, [Option<f64>; 3])>> {
        let Some((e, v)) = self.text(key) else { return Ok(None) };
        let dirs = value::per_direction(v).map_err(|m| self.err(e, m))?;
        let mut out = [None, None, None];
        for d in 0..3 {
            if let Some(t) = &dirs[d] {
                out[d] = Some(f(t).map_err(|m| self.err(e, m))?);
            }
        }
        Ok(Some((e.clone(), out)))
    }

    /// Unknown keys, bare keys that need values, and the notes of the table.
    fn classify(&self, notices: &mut Vec<Notice>, seen: &mut BTreeSet<(String, usize)>) -> R<()> {
        for e in self.entries {
            let Some(k) = options::lookup(&e.key) else {
                let hint = did_you_mean(&e.key, options::names())
                    .map(|s| format!(" (did you mean `{s}`?)"))
                    .unwrap_or_default();
                if !seen.insert((e.file.clone(), e.line)) {
                    continue;
                }
                notices.push(Notice {
                    file: e.file.clone(),
                    line: e.line,
                    option: e.key.clone(),
                    value: e.value.clone().unwrap_or_default(),
                    instead: format!("not an option iocurve can reproduce{hint}"),
                    refused: true,
                });
                continue;
            };
            if e.value.is_none() && !k.bare {
                return Err(self.err(e, format!("`{}` needs a value: {}=VALUE (fio refuses it too)", e.key, e.key)));
            }
            if e.value.as_deref().is_some_and(|v| v.trim_matches([',', ' ']).is_empty()) {
                return Err(self.err(
                    e,
                    format!(
                        "`{}=` has no value: fio refuses it too (failed parsing); remove the line or give a value",
                        e.key
                    ),
                ));
            }
            let (instead, refused) = match k.kind {
                Kind::Mapped | Kind::Output => continue,
                Kind::Ignored(why) => (why, false),
                // Set to 0 (off), it changes nothing: `thinktime=0`, `thinktime=0ms`, `fsync=0`.
                Kind::Refused(_) if e.value.as_deref().is_some_and(is_off) => continue,
                Kind::Refused(why) => (why, true),
            };
            if seen.insert((e.file.clone(), e.line)) {
                notices.push(Notice {
                    file: e.file.clone(),
                    line: e.line,
                    option: e.key.clone(),
                    value: e.value.clone().unwrap_or_default(),
                    instead: instead.into(),
                    refused,
                });
            }
        }
        Ok(())
    }
}

/// A value that switches an option off: 0 in any unit, or `none`.
fn is_off(v: &str) -> bool {
    let v = v.trim();
    v == "none" || value::seconds(v).is_ok_and(|s| s == 0.0) || value::size(v, 1024).is_ok_and(|s| s.bytes == 0)
}

fn percent(v: &str) -> Result<f64, String> {
    match value::int(v) {
        Ok(n) if n <= 100 => Ok(n as f64),
        _ => Err(format!("`{v}` is not a percentage from 0 to 100")),
    }
}

/// fio's `filename`: `:` separates files, `\:` is a colon in a name.
pub fn split_filenames(v: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = v.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&':') => {
                out.last_mut().unwrap_or_else(|| unreachable!()).push(':');
                chars.next();
            }
            ':' => out.push(String::new()),
            c => out.last_mut().unwrap_or_else(|| unreachable!()).push(c),
        }
    }
    out.into_iter().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filenames_split_on_colons_but_not_escaped_ones() {
        assert_eq!(split_filenames("/dev/sdb:/dev/sdc"), ["/dev/sdb", "/dev/sdc"]);
        assert_eq!(split_filenames(r"/tmp/a\:b:/tmp/c"), ["/tmp/a:b", "/tmp/c"]);
        assert!(split_filenames("::").is_empty());
    }
}
