//! fio job files in: `iocurve run job.fio` and `iocurve plan --from-fio job.fio`.
//!
//! A job file is read as fio reads it ([`ini`], [`value`]), its jobs resolved with fio's
//! defaults ([`job`]) and turned into an ordinary plan ([`translate`]) that goes through the
//! same resolution and checks as a TOML plan. What iocurve cannot honour is listed in one
//! block of [`Notice`]s; what would change the measured load is refused unless the import is
//! lenient.

mod ini;
mod job;
mod options;
mod translate;
mod value;

use std::path::Path;

use crate::error::PlanError;
use crate::keys::PlanFile;
use crate::resolve::Overrides;
use crate::resolved::Plan;

pub use value::SizeOr;

/// One job of the file, resolved as fio resolves it (before any mapping onto iocurve).
#[derive(Debug, Clone, PartialEq)]
pub struct FioJob {
    pub name: String,
    /// The section's file and line.
    pub file: String,
    pub line: usize,
    /// `read`, `write`, `randread`, `randwrite`, `rw`, `randrw`, `trim`, `randtrim`,
    /// `trimwrite` or `randtrimwrite`.
    pub rw: String,
    /// A `:N` after the mode, with its entry.
    pub modifier: Option<(ini::Entry, String)>,
    /// Share of reads (100 for read-only modes, 0 for write-only and trim modes).
    pub read_pct: f64,
    /// Share of trims the mode gives: 100 for `trim` and `randtrim`, 50 for `trimwrite` and
    /// `randtrimwrite` (fio trims each block, then writes it), else 0.
    pub trim_pct: f64,
    /// Block sizes with their shares in percent, for reads, writes and trims.
    pub bs: [Vec<(u64, f64)>; 3],
    /// Smallest and largest block size for reads, writes and trims (fio's
    /// `bs=(R) A-B, (W) C-D, (T) E-F`).
    pub bs_range: [(u64, u64); 3],
    pub numjobs: u32,
    pub iodepth: u32,
    pub nrfiles: u32,
    pub ioengine: String,
    pub direct: bool,
    pub size: Option<SizeOr>,
    pub offset: Option<SizeOr>,
    pub filesize: Option<u64>,
    pub directory: Option<String>,
    pub filenames: Vec<String>,
    pub runtime_s: Option<f64>,
    pub time_based: bool,
    pub ramp_s: f64,
    pub stonewall: bool,
    pub new_group: bool,
    pub wait_for: Option<String>,
    pub compress_pct: Option<f64>,
    pub dedupe_pct: Option<f64>,
    /// Per-job rate limits for reads, writes and trims, with the entry that set them.
    pub rate_iops: Option<(ini::Entry, [Option<f64>; 3])>,
    pub rate_bytes: Option<(ini::Entry, [Option<f64>; 3])>,
    pub poisson: bool,
    pub continue_on_error: Option<String>,
    pub verify: Option<String>,
    /// fio's trims of verified blocks (`trim_percentage`, `trim_backlog`, `trim_backlog_batch`,
    /// `trim_verify_zero`): each one set, with its value (a boolean as 0 or 1).
    pub verify_trim: Vec<(String, u64)>,
    pub random_distribution: Option<String>,
    /// `thinktime` and `thinktime_spin` in ns (fio's unit is µs), `thinktime_blocks`.
    pub thinktime_ns: Option<u64>,
    pub thinktime_spin_ns: Option<u64>,
    pub thinktime_blocks: Option<u64>,
    pub percentage_random: Option<u64>,
    /// Where each option in force was set (canonical name, file, line): notes point there.
    pub origins: Vec<(String, String, usize)>,
}

impl FioJob {
    /// The file and line that set `option` (canonical name), else the job's section.
    pub fn origin(&self, option: &str) -> (String, usize) {
        self.origins
            .iter()
            .rev()
            .find(|o| o.0 == option)
            .map_or_else(|| (self.file.clone(), self.line), |o| (o.1.clone(), o.2))
    }
}

/// One line of the warning block: an option iocurve does not honour (or refuses).
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    pub file: String,
    pub line: usize,
    pub option: String,
    pub value: String,
    /// What iocurve does instead (or why it refuses).
    pub instead: String,
    /// Changes what is measured: an error unless the import is lenient.
    pub refused: bool,
}

impl std::fmt::Display for Notice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A line of an included file that is no option (an /etc file, say) is not echoed whole.
        let short = |t: &str| {
            if t.chars().count() > 40 {
                format!("{}…", t.chars().take(40).collect::<String>())
            } else {
                t.to_string()
            }
        };
        let opt = if self.value.is_empty() {
            short(&self.option)
        } else {
            format!("{}={}", short(&self.option), short(&self.value))
        };
        write!(f, "{}", printable(&format!("{}:{}: {opt}: {}", self.file, self.line, self.instead)))
    }
}

/// Control characters from a file or its name would garble a terminal and end a TOML comment.
fn printable(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { '\u{fffd}' } else { c }).collect()
}

/// A job file as a plan, with what the import could not honour.
#[derive(Debug, Clone)]
pub struct FioImport {
    pub jobs: Vec<FioJob>,
    pub plan: PlanFile,
    /// For each workload of the plan, the job (index in `jobs`) it came from.
    pub workload_jobs: Vec<usize>,
    /// Options not honoured, in file order (with `lenient`, the refused ones too).
    pub notices: Vec<Notice>,
}

impl FioImport {
    /// The warning block: one line per option, or nothing.
    pub fn warning(&self) -> Option<String> {
        if self.notices.is_empty() {
            return None;
        }
        let mut s = String::from("warning: iocurve does not honour these fio options:");
        for n in &self.notices {
            s.push_str(&format!("\n  {n}"));
        }
        Some(s)
    }

    /// The plan as TOML, with the job file and the warning block as comments on top.
    pub fn to_toml(&self, source: &str) -> String {
        let mut s = format!("# Imported from the fio job file {} by `iocurve plan --from-fio`.\n", printable(source));
        if let Some(w) = self.warning() {
            for line in w.lines() {
                s.push_str(&format!("# {line}\n"));
            }
        }
        s.push('\n');
        s.push_str(&toml::to_string(&self.plan).unwrap_or_else(|e| unreachable!("a plan serialises: {e}")));
        s
    }
}

/// Is this file a fio job file rather than a TOML plan? A `.fio` name, or a first line that
/// opens a single-bracket section other than the plan's `[defaults]` and is followed by
/// `key=value` lines fio's way (no quotes).
pub fn looks_like_fio(path: &Path, text: &str) -> bool {
    if path.extension().is_some_and(|e| e == "fio") {
        return true;
    }
    let mut lines = text.lines().map(|l| l.find([';', '#']).map_or(l, |i| &l[..i]).trim()).filter(|l| !l.is_empty());
    match lines.next() {
        Some(first) if first.starts_with('[') && !first.starts_with("[[") && first.ends_with(']') => {
            first != "[defaults]" && lines.next().is_none_or(|l| !l.contains('"'))
        }
        _ => false,
    }
}

/// Reads a job file (with its includes and `${VAR}`s from the environment).
pub fn import(path: &Path, lenient: bool) -> Result<FioImport, PlanError> {
    import_env(path, lenient, &|k: &str| std::env::var(k).ok())
}

/// A job file already read (from a pipe, say): includes relative to its directory, `${VAR}`
/// from the environment.
pub fn import_text(text: &str, path: &Path, lenient: bool) -> Result<FioImport, PlanError> {
    let env = |k: &str| std::env::var(k).ok();
    let source = path.display().to_string();
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let sections = ini::parse_text(text, &source, &dir, &env)?;
    from_sections(&sections, &source, lenient)
}

/// The same with `${VAR}`s looked up in `env`.
pub fn import_env(path: &Path, lenient: bool, env: &dyn Fn(&str) -> Option<String>) -> Result<FioImport, PlanError> {
    let sections = ini::read(path, env)?;
    from_sections(&sections, &path.display().to_string(), lenient)
}

/// The same from text (includes relative to the working directory): for fuzzing and tests.
pub fn import_str(text: &str, source: &str, lenient: bool) -> Result<FioImport, PlanError> {
    let env = |_: &str| None;
    let sections = ini::parse_text(text, source, Path::new("."), &env)?;
    from_sections(&sections, source, lenient)
}

fn from_sections(sections: &[ini::Section], source: &str, lenient: bool) -> Result<FioImport, PlanError> {
    let mut notices = Vec::new();
    let jobs = job::resolve(sections, &mut notices)?;
    let (plan, workload_jobs) = translate::plan(&jobs, source, &mut notices)?;
    // A [global] option is noted once, not once per job.
    notices.sort_by(|a, b| (&a.file, a.line, &a.option, &a.instead).cmp(&(&b.file, b.line, &b.option, &b.instead)));
    notices.dedup();
    let refused: Vec<&Notice> = notices.iter().filter(|n| n.refused).collect();
    if !refused.is_empty() && !lenient {
        let first = refused[0];
        let list: Vec<String> = refused.iter().map(|n| format!("\n  {n}")).collect();
        return Err(PlanError::new(
            &first.file,
            Some(first.line),
            None,
            format!(
                "these fio options would change what is measured in a way iocurve cannot reproduce:{}\n(--fio-lenient runs without them; they are then listed as warnings)",
                list.join("")
            ),
        ));
    }
    Ok(FioImport { jobs, plan, workload_jobs, notices })
}

impl FioImport {
    /// The plan resolved and checked as a TOML plan would be, with the command line's
    /// overrides (`--ramp` turns a job's one step into a curve).
    pub fn resolve(&self, source: &str, overrides: &Overrides) -> Result<Plan, PlanError> {
        crate::resolve::resolve_with(&self.plan, source, overrides).map_err(|e| self.at_fio_line(e))
    }

    /// A plan check's error about `workloads[i].KEY`, pointed at the job file's line that set
    /// the value (the plan itself has no lines the user wrote).
    fn at_fio_line(&self, e: PlanError) -> PlanError {
        // The scratch size comes from the first job that sets a size.
        if e.key.as_deref() == Some("scratch_size")
            && let Some((job, option)) = self.jobs.iter().find_map(|j| {
                ["filesize", "size"].into_iter().find(|o| j.origins.iter().any(|x| x.0 == *o)).map(|o| (j, o))
            })
        {
            let (file, line) = job.origin(option);
            return PlanError::new(
                &file,
                Some(line),
                Some(option.into()),
                format!("job {} (as the plan's scratch_size): {}", job.name, e.message),
            );
        }
        let Some((i, key)) = e
            .key
            .as_deref()
            .and_then(|k| k.strip_prefix("workloads["))
            .and_then(|k| k.split_once("]."))
            .and_then(|(i, key)| Some((i.parse::<usize>().ok()?, key.to_string())))
        else {
            return e;
        };
        let Some(job) = self.workload_jobs.get(i).and_then(|&j| self.jobs.get(j)) else { return e };
        let options: &[&str] = match key.as_str() {
            "bs" | "dedupe_unit" | "write_bs" => &["bssplit", "bsrange", "bs"],
            "distribution" | "hot_layout" => &["random_distribution"],
            "think_time" | "think_blocks" | "think_spin" => &["thinktime", "thinktime_blocks", "thinktime_spin"],
            "queue_depth" => &["iodepth"],
            "ramp" => &["numjobs"],
            "intervals" | "interval_s" => &["runtime"],
            "warmup_s" => &["ramp_time"],
            "working_set" => &["size", "offset", "filesize"],
            "rate" | "max_outstanding" => &["rate_iops", "rate", "numjobs"],
            "compress" => &["buffer_compress_percentage"],
            "dedupe" => &["dedupe_percentage"],
            "read_pct" => &["rwmixread", "rwmixwrite"],
            "trim_pct" => &["rw"],
            "trim_bs" => &["bssplit", "bsrange", "bs"],
            _ => &[],
        };
        let Some(option) = options.iter().find(|o| job.origins.iter().any(|x| x.0 == **o)) else { return e };
        let (file, line) = job.origin(option);
        PlanError::new(
            &file,
            Some(line),
            Some(option.to_string()),
            format!("job {} (as the plan's {key}): {}", job.name, e.message),
        )
    }
}
