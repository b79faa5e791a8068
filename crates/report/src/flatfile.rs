//! vdbench's `flatfile.html` layout (issue 43): plain text despite its name, a header line of
//! column names, then a line per interval, whitespace-separated, for the tools vdbench users
//! have (vdbench's own `parseflat`, spreadsheet imports, scripts).
//!
//! Only columns whose meaning is vdbench's are written, in vdbench's units: response times in
//! ms, MB/sec in vdbench's MB of 2^20 bytes (iocurve's own MB/s are 10^6), lunsize in GB of
//! 2^30. A vdbench column iocurve cannot fill exactly is left out, never written as zeros (see
//! the README, "Exports").
//!
//! As in vdbench, `Run` names the run definition (here the workload), `threads` tells its steps
//! apart (vdbench's threads are its outstanding I/Os: iocurve's workers × queue depth × hosts),
//! `Interval` counts each step's intervals from 1, and each step ends with an `avg_1-N` line.

use iocurve_analysis::{RunResult, StepResult, WorkloadResult};
use iocurve_stats::{IntervalRecord, StepRecord};

/// The columns, in order (names as vdbench writes them).
pub const FLAT_COLUMNS: &[&str] = &[
    "tod",
    "Run",
    "Interval",
    "reqrate",
    "rate",
    "MB/sec",
    "bytes/io",
    "resp",
    "resp_max",
    "xfersize",
    "threads",
    "rdpct",
    "seekpct",
    "lunsize",
    "cpu_used",
    "cpu_user",
    "cpu_kernel",
    "cpu_wait",
];

/// vdbench's MB.
const MIB: f64 = 1024.0 * 1024.0;

/// What one line says beyond the workload's and step's columns.
struct Figures {
    /// End of the interval (of the last, for an average) in ns since the Unix epoch.
    end_ns: Option<i64>,
    interval: String,
    iops: f64,
    bytes_per_s: f64,
    lat_mean_ns: f64,
    lat_max_ns: f64,
    cpu: iocurve_stats::CpuUsage,
}

/// The run as vdbench's flatfile: `records[w][i]` is what the store holds of
/// `run.workloads[w].steps[i]` (its intervals); a step without a record has its average line
/// only.
pub fn flatfile(run: &RunResult, records: &[Vec<StepRecord>]) -> String {
    // Each LUN once: paths of one LUN are one size.
    let lunsize = iocurve_analysis::overview::targets_size(&run.targets) as f64 / (1u64 << 30) as f64;
    let mut rows = Vec::new();
    for (wi, w) in run.workloads.iter().enumerate() {
        for (i, s) in w.steps.iter().enumerate() {
            let record = records.get(wi).and_then(|r| r.get(i));
            let lines = step_figures(s, record);
            for f in lines {
                rows.push(row(w, s, lunsize, &f));
            }
        }
    }
    // Without the wall-clock time of some step (stored before iocurve kept it), no `tod`.
    let tod = rows.iter().all(|r| !r[0].is_empty());
    let skip = usize::from(!tod);
    let header: Vec<String> = FLAT_COLUMNS[skip..].iter().map(|c| c.to_string()).collect();
    aligned(std::iter::once(header).chain(rows.into_iter().map(|r| r[skip..].to_vec())).collect())
}

/// Each interval's line of a step, then its average's.
fn step_figures(s: &StepResult, record: Option<&StepRecord>) -> Vec<Figures> {
    let intervals = record.map_or(&[][..], |r| &r.intervals[..]);
    let mut end_ns = s.measured_from_unix_ns;
    let mut lines: Vec<Figures> = intervals
        .iter()
        .enumerate()
        .map(|(k, iv)| {
            end_ns = end_ns.map(|t| t + (iv.duration_s * 1e9).round() as i64);
            interval_figures(k, iv, end_ns)
        })
        .collect();
    let max = lines.iter().map(|f| f.lat_max_ns).fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    lines.push(Figures {
        end_ns,
        interval: format!("avg_1-{}", intervals.len().max(s.intervals.len())),
        iops: s.iops,
        bytes_per_s: s.mbps * 1e6,
        lat_mean_ns: s.lat_us.mean * 1e3,
        // The slowest I/O of the step: of its intervals' (their samples' maxima, exact), or of
        // its histogram without them.
        lat_max_ns: max.unwrap_or(s.lat_us.max * 1e3),
        cpu: s.cpu,
    });
    lines
}

fn interval_figures(k: usize, iv: &IntervalRecord, end_ns: Option<i64>) -> Figures {
    let per_s = |x: u64| if iv.duration_s > 0.0 { x as f64 / iv.duration_s } else { 0.0 };
    Figures {
        end_ns,
        interval: (k + 1).to_string(),
        iops: per_s(iv.ops),
        bytes_per_s: per_s(iv.bytes),
        lat_mean_ns: iv.lat_mean_ns,
        lat_max_ns: iv.samples.iter().map(|x| x.lat_max_ns).max().unwrap_or(0) as f64,
        cpu: iv.cpu,
    }
}

/// One line's fields, in [`FLAT_COLUMNS`]' order (`tod` empty when not known).
fn row(w: &WorkloadResult, s: &StepResult, lunsize: f64, f: &Figures) -> Vec<String> {
    vec![
        f.end_ns.map(tod).unwrap_or_default(),
        word(&w.name),
        f.interval.clone(),
        s.rate.as_ref().map_or_else(|| "max".to_string(), |r| format!("{:.0}", r.target_iops)),
        format!("{:.2}", f.iops),
        format!("{:.2}", f.bytes_per_s / MIB),
        format!("{:.0}", if f.iops > 0.0 { f.bytes_per_s / f.iops } else { 0.0 }),
        // vdbench writes 3 decimals; a fourth keeps 2 digits of an 8 µs latency.
        format!("{:.4}", f.lat_mean_ns / 1e6),
        format!("{:.4}", f.lat_max_ns / 1e6),
        iocurve_plan::parse_size(&w.bs).map_or_else(|_| word(&w.bs), |b| b.to_string()),
        s.outstanding.to_string(),
        format!("{}", w.read_pct),
        if w.kind == "sequential" { "0" } else { "100" }.to_string(),
        format!("{lunsize:.3}"),
        format!("{:.1}", f.cpu.user + f.cpu.system),
        format!("{:.1}", f.cpu.user),
        format!("{:.1}", f.cpu.system),
        format!("{:.1}", f.cpu.iowait),
    ]
}

/// The time of day in UTC, `HH:MM:SS.mmm`, as vdbench's `tod` column writes it.
fn tod(unix_ns: i64) -> String {
    let ms = unix_ns.div_euclid(1_000_000);
    let day_ms = ms.rem_euclid(86_400_000);
    let s = day_ms / 1000;
    format!("{:02}:{:02}:{:02}.{:03}", s / 3600, s / 60 % 60, s % 60, day_ms % 1000)
}

/// A field without whitespace: the file's columns are whitespace-separated.
fn word(text: &str) -> String {
    let w: String = text.chars().map(|c| if c.is_whitespace() { '_' } else { c }).collect();
    if w.is_empty() { "-".into() } else { w }
}

/// The lines with every column right-aligned to its widest field, as vdbench writes them.
fn aligned(lines: Vec<Vec<String>>) -> String {
    let cols = lines.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..cols).map(|c| lines.iter().map(|l| l[c].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for l in &lines {
        let fields: Vec<String> = l.iter().zip(&widths).map(|(f, &w)| format!("{f:>w$}")).collect();
        out.push_str(&fields.join(" "));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests;
