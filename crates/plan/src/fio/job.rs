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

    fn flag(&self, key: &str) -> R<bool> {
        Ok(self.parse(key, value::boolean)?.unwrap_or(false))
    }

    fn resolve(&self, notices: &mut Vec<Notice>, seen: &mut BTreeSet<(String, usize)>) -> R<FioJob> {
        self.classify(notices, seen)?;
        let kb_base = self
            .parse("kb_base", |v| match v.trim() {
                "1024" => Ok(1024),
                "1000" => Ok(1000),
                _ => Err(format!("`{v}`: kb_base is 1024 or 1000")),
            })?
            .unwrap_or(1024);
        let mut note_size = |e: &Entry, v: &str, bytes: u64| {
            if seen.insert((e.file.clone(), e.line)) {
                notices.push(Notice {
                    file: e.file.clone(),
                    line: e.line,
                    option: e.key.clone(),
                    value: v.into(),
                    instead: format!(
                        "read as {bytes} bytes, as fio does under kb_base={kb_base} (fio issue #1618); write the size in bytes to be unambiguous"
                    ),
                    refused: false,
                });
            }
        };
        let (rw, modifier) = match self.text("rw") {
            None => ("read".to_string(), None),
            Some((e, v)) => {
                let (mode, m) = v.split_once(':').map_or((v, None), |(a, b)| (a, Some(b)));
                let mode = match mode.trim() {
                    "read" | "write" | "randread" | "randwrite" | "randrw" => mode.trim().to_string(),
                    "rw" | "readwrite" => "rw".into(),
                    "trim" | "randtrim" | "trimwrite" | "randtrimwrite" => {
                        return Err(self.err(
                            e,
                            format!(
                                "`{v}`: iocurve issues no trims; use read, write, randread, randwrite, rw or randrw"
                            ),
                        ));
                    }
                    other => {
                        return Err(self.err(
                            e,
                            format!("`{other}` is not a fio rw mode: read, write, randread, randwrite, rw or randrw"),
                        ));
                    }
                };
                (mode, m.map(|m| (e.clone(), m.trim().to_string())))
            }
        };
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
        let read_pct = match rw.as_str() {
            "read" | "randread" => 100.0,
            "write" | "randwrite" => 0.0,
            _ => read_pct,
        };

        // Block sizes per direction: bssplit wins; otherwise whichever of bs and bsrange came
        // last (they set the same fields in fio).
        let mut bs: [Vec<(u64, f64)>; 2] = [vec![(DEFAULT_BS, 100.0)], vec![(DEFAULT_BS, 100.0)]];
        let mut bs_range = [(DEFAULT_BS, DEFAULT_BS); 2];
        let plain = self.last("bs");
        let ranged = self.last("bsrange");
        let from_range = match (plain, ranged) {
            (Some((i, _)), Some((j, _))) => j > i,
            (None, Some(_)) => true,
            _ => false,
        };
        if let Some((_, e)) = if from_range { ranged } else { plain } {
            let v = e.value.as_deref().unwrap_or("");
            let dirs = value::per_direction(v).map_err(|m| self.err(e, m))?;
            for d in 0..2 {
                let Some(text) = &dirs[d] else { continue };
                if from_range {
                    let ((lo, hi), amb) = value::range(text, kb_base).map_err(|m| self.err(e, m))?;
                    if amb {
                        note_size(e, v, lo);
                    }
                    if !lo.is_power_of_two() {
                        return Err(self.err(e, format!("`{text}`: fio aligns a range's sizes to its low end only when that is a power of two; use one")));
                    }
                    let n = hi / lo;
                    if n > 1024 {
                        return Err(self.err(
                            e,
                            format!(
                                "`{text}` spans {n} block sizes; iocurve mixes at most 1024: narrow it or use bssplit"
                            ),
                        ));
                    }
                    bs[d] = (1..=n).map(|k| (k * lo, 100.0 / n as f64)).collect();
                    bs_range[d] = (lo, n * lo);
                } else {
                    let s = value::size(text, kb_base).map_err(|m| self.err(e, m))?;
                    if s.ambiguous {
                        note_size(e, v, s.bytes);
                    }
                    if s.bytes == 0 {
                        return Err(self.err(e, "a block size of 0"));
                    }
                    bs[d] = vec![(s.bytes, 100.0)];
                    bs_range[d] = (s.bytes, s.bytes);
                }
            }
        }
        if let Some((_, e)) = self.last("bssplit") {
            let v = e.value.as_deref().unwrap_or("");
            let dirs = value::per_direction(v).map_err(|m| self.err(e, m))?;
            for d in 0..2 {
                let Some(text) = &dirs[d] else { continue };
                let (split, amb) = value::bssplit(text, kb_base).map_err(|m| self.err(e, m))?;
                if amb {
                    note_size(e, v, split[0].0);
                }
                bs_range[d] = (
                    split.iter().map(|s| s.0).min().unwrap_or(DEFAULT_BS),
                    split.iter().map(|s| s.0).max().unwrap_or(DEFAULT_BS),
                );
                bs[d] = split;
            }
        }

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

        let mut size_of = |key: &str| -> R<Option<SizeOr>> {
            match self.text(key) {
                None => Ok(None),
                Some((e, v)) => {
                    let (s, amb) = value::size_or_percent(v, kb_base).map_err(|m| self.err(e, m))?;
                    if let (true, SizeOr::Bytes(b)) = (amb, s) {
                        note_size(e, v, b);
                    }
                    Ok(Some(s))
                }
            }
        };
        let size = size_of("size")?;
        let offset = size_of("offset")?;
        let filesize = match size_of("filesize")? {
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
        let name = self.text("name").map_or(self.section.name.clone(), |(_, v)| v.trim().to_string());

        Ok(FioJob {
            name,
            file: self.section.file.clone(),
            line: self.section.line,
            rw,
            modifier,
            read_pct,
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
            rate_bytes: self.per_direction_number("rate", |v| value::size(v, kb_base).map(|s| s.bytes as f64))?,
            poisson: self.text("rate_process").is_some_and(|(_, v)| v.trim() == "poisson"),
            continue_on_error: self.text("continue_on_error").map(|(_, v)| v.trim().to_string()),
            verify: self.text("verify").map(|(_, v)| v.trim().to_string()),
            random_distribution: self.text("random_distribution").map(|(_, v)| v.trim().to_string()),
            percentage_random: self.parse("percentage_random", value::int)?,
            origins: self
                .entries
                .iter()
                .filter_map(|e| options::lookup(&e.key).map(|k| (k.canonical.to_string(), e.file.clone(), e.line)))
                .collect(),
        })
    }

    /// A per-direction rate: the read value and the write value.
    fn per_direction_number(
        &self,
        key: &str,
        f: impl Fn(&str) -> Result<f64, String>,
    ) -> R<Option<(Entry, [Option<f64>; 2])>> {
        let Some((e, v)) = self.text(key) else { return Ok(None) };
        let dirs = value::per_direction(v).map_err(|m| self.err(e, m))?;
        let mut out = [None, None];
        for d in 0..2 {
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
            let (instead, refused) = match k.kind {
                Kind::Mapped | Kind::Output => continue,
                Kind::Ignored(why) => (why, false),
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
