//! A fio job file as fio reads it: sections, `key=value` lines, comments, `include` and
//! `${VAR}`. Behaviour follows fio 3.x's own parser (checked against `fio --debug=parse`), not
//! its manual where the two differ:
//!
//! - `;` and `#` start a comment anywhere in a line, not only at its start;
//! - a section whose name starts with `global` holds defaults for the jobs after it;
//! - `include FILE` splices FILE in: a relative name is looked up in the working directory
//!   first, then beside the including file; `${VAR}` is not expanded in it;
//! - `${VAR}` in a value is replaced by the environment variable (an unset one by nothing); a
//!   plain `$VAR` is left as it is, as fio does.
//!
//! Where fio misreads silently — a space after `=` (`bs = 4k` is 4 bytes to fio 3.x) — or
//! computes what iocurve does not (`$pagesize`, `$((…))`), the line is refused. Includes are
//! regular files of at most 1 MiB, at most 256 of them in all.

use std::path::{Path, PathBuf};

use crate::error::PlanError;

/// One `key[=value]` line.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub key: String,
    /// None for a bare key (`time_based`).
    pub value: Option<String>,
    /// The file and line it came from (an included file names itself).
    pub file: String,
    pub line: usize,
}

/// A `[name]` section with its entries in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    pub name: String,
    pub file: String,
    pub line: usize,
    pub entries: Vec<Entry>,
}

impl Section {
    /// fio treats every section whose name starts with `global` as the global section.
    pub fn is_global(&self) -> bool {
        self.name.starts_with("global")
    }
}

/// Include depth past which a chain of includes is taken for a loop.
const MAX_INCLUDE_DEPTH: usize = 16;
/// Includes read in all (fan-out: ten includes of ten includes of … is a denial of service).
const MAX_INCLUDES: usize = 256;
/// The largest job file or include read.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// Reads a job file and its includes into sections; `env` looks up `${VAR}`.
pub fn read(path: &Path, env: &dyn Fn(&str) -> Option<String>) -> Result<Vec<Section>, PlanError> {
    let mut reader = Reader { env, sections: Vec::new(), stack: Vec::new(), includes: 0 };
    reader.file(path, None)?;
    Ok(reader.sections)
}

/// Parses job file text (no includes resolved relative to a directory other than `dir`).
pub fn parse_text(
    text: &str,
    source: &str,
    dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Section>, PlanError> {
    let mut reader = Reader { env, sections: Vec::new(), stack: Vec::new(), includes: 0 };
    reader.text(text, source, dir)?;
    Ok(reader.sections)
}

struct Reader<'e> {
    env: &'e dyn Fn(&str) -> Option<String>,
    sections: Vec<Section>,
    /// The files being read, outermost first: an include of one of them is a loop.
    stack: Vec<PathBuf>,
    includes: usize,
}

impl Reader<'_> {
    fn file(&mut self, path: &Path, from: Option<(&str, usize)>) -> Result<(), PlanError> {
        let (source, line) = from.map_or((path.display().to_string(), None), |(f, l)| (f.to_string(), Some(l)));
        let what = if from.is_some() { "the included file" } else { "the fio job file" };
        let fail = |m: String| PlanError::new(&source, line, from.map(|_| "include".to_string()), m);
        if from.is_some() {
            self.includes += 1;
            if self.includes > MAX_INCLUDES {
                return Err(fail(format!("more than {MAX_INCLUDES} includes in all: is this a loop of includes?")));
            }
            // A FIFO would hang the read, a device never end it.
            if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
                return Err(fail(format!("{what} {} is not a regular file (or cannot be read)", path.display())));
            }
        }
        let mut text = Vec::new();
        use std::io::Read;
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut text))
            .map_err(|e| fail(format!("cannot read {what} {}: {e}", path.display())))?;
        if text.len() as u64 > MAX_FILE_BYTES {
            return Err(fail(format!("{what} {} is larger than 1 MiB: not a job file", path.display())));
        }
        let text = String::from_utf8(text).map_err(|_| {
            PlanError::new(&path.display().to_string(), None, None, "is not UTF-8 text: is this a fio job file?")
        })?;
        let canonical = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        if self.stack.contains(&canonical) || self.stack.len() >= MAX_INCLUDE_DEPTH {
            return Err(PlanError::new(
                &source,
                line,
                Some("include".into()),
                format!("{} includes itself (directly or through other files): remove the loop", path.display()),
            ));
        }
        self.stack.push(canonical);
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let r = self.text(&text, &path.display().to_string(), &dir);
        self.stack.pop();
        r
    }

    fn text(&mut self, text: &str, source: &str, dir: &Path) -> Result<(), PlanError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let content = strip_comment(raw).trim();
            if content.is_empty() {
                continue;
            }
            if let Some(rest) = content.strip_prefix("include").filter(|r| r.starts_with(char::is_whitespace)) {
                // As fio: no ${VAR} here; a relative name from the working directory first.
                let name = rest.trim();
                let path = if Path::new(name).is_absolute() || Path::new(name).exists() {
                    PathBuf::from(name)
                } else {
                    dir.join(name)
                };
                self.file(&path, Some((source, line)))?;
                continue;
            }
            if let Some(name) = content.strip_prefix('[') {
                let Some(name) = name.strip_suffix(']') else {
                    return Err(PlanError::new(
                        source,
                        Some(line),
                        None,
                        format!("`{content}`: a section needs a closing ]"),
                    ));
                };
                let name = name.trim();
                if name.is_empty() {
                    return Err(PlanError::new(source, Some(line), None, "a section needs a name: [name]"));
                }
                self.sections.push(Section { name: name.into(), file: source.into(), line, entries: Vec::new() });
                continue;
            }
            let (key, value) = match content.split_once('=') {
                Some((k, v)) if v.starts_with(char::is_whitespace) => {
                    return Err(PlanError::new(
                        source,
                        Some(line),
                        Some(k.trim().into()),
                        format!(
                            "a space after `=`: fio 3.x misreads it (`bs = 4k` as 4 bytes) or refuses it; write {}={}",
                            k.trim(),
                            v.trim()
                        ),
                    ));
                }
                Some((k, v)) => (k.trim(), Some(self.expand(v.trim(), source, line)?)),
                None => (content, None),
            };
            let Some(section) = self.sections.last_mut() else {
                return Err(PlanError::new(
                    source,
                    Some(line),
                    Some(key.into()),
                    "option outside of a [section]: put it under [global] or a [job] (fio refuses it too)",
                ));
            };
            section.entries.push(Entry { key: key.into(), value, file: source.into(), line });
        }
        Ok(())
    }

    /// `${VAR}` from the environment; an unset variable becomes empty, as in fio.
    fn expand(&self, v: &str, source: &str, line: usize) -> Result<String, PlanError> {
        let mut out = String::with_capacity(v.len());
        let mut rest = v;
        while let Some(at) = rest.find("${") {
            out.push_str(&rest[..at]);
            let Some(end) = rest[at..].find('}') else {
                return Err(PlanError::new(source, Some(line), None, format!("`{v}`: `${{` without a closing `}}`")));
            };
            let name = &rest[at + 2..at + end];
            out.push_str(&(self.env)(name).unwrap_or_default());
            rest = &rest[at + end + 1..];
        }
        out.push_str(rest);
        for keyword in ["$pagesize", "$mb_memory", "$ncpus", "$(("] {
            if out.contains(keyword) {
                return Err(PlanError::new(
                    source,
                    Some(line),
                    None,
                    format!(
                        "`{v}`: fio's {keyword} is computed on the host fio runs on; iocurve does not: write the value"
                    ),
                ));
            }
        }
        Ok(out)
    }
}

/// The line up to its first `;` or `#`.
fn strip_comment(line: &str) -> &str {
    line.find([';', '#']).map_or(line, |i| &line[..i])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Vec<Section> {
        let env = |k: &str| (k == "BS").then(|| "16k".to_string());
        parse_text(text, "job.fio", Path::new("."), &env).unwrap()
    }

    #[test]
    fn comments_anywhere_globals_and_bare_keys() {
        let s = parse(
            "; head\n[global] # g\nbs=${BS} ; c\nsize=${NOPE}4m\n[global-2]\n[job]\ntime_based\nrw=randread # x\n",
        );
        assert_eq!(s.len(), 3);
        assert!(s[0].is_global() && s[1].is_global() && !s[2].is_global());
        assert_eq!(s[0].entries[0].value.as_deref(), Some("16k"));
        assert_eq!(s[0].entries[1].value.as_deref(), Some("4m"));
        assert_eq!(s[2].entries[0], Entry { key: "time_based".into(), value: None, file: "job.fio".into(), line: 7 });
        assert_eq!(s[2].entries[1].value.as_deref(), Some("randread"));
    }

    #[test]
    fn what_fio_misreads_or_computes_is_refused() {
        let env = |_: &str| None;
        let e = parse_text("[j]\nbs = 4k\n", "f.fio", Path::new("."), &env).unwrap_err();
        assert!(e.message.contains("write bs=4k"), "{e}");
        let e = parse_text("[j]\nbs=$pagesize\n", "f.fio", Path::new("."), &env).unwrap_err();
        assert!(e.message.contains("$pagesize"), "{e}");
        // A space before `=` is fine for fio too; a byte-order mark is not an option.
        let s = parse_text("\u{feff}[j]\nbs =4k\n", "f.fio", Path::new("."), &env).unwrap();
        assert_eq!((s[0].name.as_str(), s[0].entries[0].value.as_deref()), ("j", Some("4k")));
    }

    #[test]
    fn errors_name_the_line() {
        let env = |_: &str| None;
        let e = parse_text("size=1m\n[j]\n", "f.fio", Path::new("."), &env).unwrap_err();
        assert_eq!(e.line, Some(1));
        let e = parse_text("[j\n", "f.fio", Path::new("."), &env).unwrap_err();
        assert!(e.message.contains("closing ]"), "{e}");
        let e = parse_text("[j]\nbs=${X\n", "f.fio", Path::new("."), &env).unwrap_err();
        assert_eq!(e.line, Some(2));
    }

    #[test]
    fn includes_are_relative_to_the_including_file_and_loops_are_refused() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("sub/inc.fio"), "bs=8k\n").unwrap();
        std::fs::write(d.path().join("sub/main.fio"), "[global]\ninclude inc.fio\n[j]\nrw=read\n").unwrap();
        let env = |_: &str| None;
        let s = read(&d.path().join("sub/main.fio"), &env).unwrap();
        assert_eq!(s[0].entries[0].key, "bs");
        assert!(s[0].entries[0].file.ends_with("inc.fio"));
        // Not a regular file: refused before it is read (a FIFO would hang the read).
        std::fs::write(d.path().join("dev.fio"), "[j]\ninclude /dev/zero\n").unwrap();
        let e = read(&d.path().join("dev.fio"), &env).unwrap_err();
        assert!(e.message.contains("not a regular file"), "{e}");
        // Fan-out: each file includes the next ten times.
        for i in 0..6 {
            std::fs::write(d.path().join(format!("f{i}.fio")), format!("include f{}.fio\n", i + 1).repeat(10)).unwrap();
        }
        std::fs::write(d.path().join("f6.fio"), "bs=4k\n").unwrap();
        std::fs::write(d.path().join("fan.fio"), "[j]\ninclude f0.fio\n").unwrap();
        let e = read(&d.path().join("fan.fio"), &env).unwrap_err();
        assert!(e.message.contains("more than 256 includes"), "{e}");
        std::fs::write(d.path().join("loop.fio"), "[j]\ninclude loop.fio\n").unwrap();
        let e = read(&d.path().join("loop.fio"), &env).unwrap_err();
        assert!(e.message.contains("includes itself"), "{e}");
        let e = read(&d.path().join("missing.fio"), &env).unwrap_err();
        assert!(e.message.contains("cannot read"), "{e}");
    }
}
