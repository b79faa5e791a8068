//! Progress while running: a live line per step (indicatif) when stdout is a terminal, one
//! plain line per finished step otherwise (logs, CI, pipes).

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use iocurve_analysis::StepResult;
use iocurve_engine::StepProgress;
use iocurve_report::format;

pub struct Progress {
    bar: Option<ProgressBar>,
    last: StepProgress,
    /// Planned seconds of the whole run, and of the steps already finished.
    total_s: f64,
    done_s: f64,
    label: String,
}

impl Progress {
    pub fn new(total_s: f64) -> Self {
        let bar = std::io::stdout().is_terminal().then(|| {
            let b = ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stdout());
            b.set_style(ProgressStyle::with_template("{spinner} {msg}").expect("valid template"));
            b.enable_steady_tick(Duration::from_millis(200));
            b
        });
        Self { bar, last: StepProgress::default(), total_s, done_s: 0.0, label: String::new() }
    }

    /// A step begins: `w`/`nw` workload, `k`/`n` step.
    pub fn start_step(&mut self, name: &str, w: usize, nw: usize, k: usize, n: usize, workers: u32) {
        let plural = if workers == 1 { "" } else { "s" };
        self.label = format!("[{w}/{nw}] {name} step {k}/{n}, {workers} worker{plural}");
        self.last = StepProgress::default();
        if let Some(b) = &self.bar {
            b.set_message(format!("{}: starting", self.label));
        }
    }

    pub fn update(&mut self, p: &StepProgress) {
        let dt = p.elapsed_s - self.last.elapsed_s;
        if dt <= 0.0 {
            return;
        }
        let ops = p.ops.saturating_sub(self.last.ops);
        let iops = ops as f64 / dt;
        let mbps = p.bytes.saturating_sub(self.last.bytes) as f64 / 1e6 / dt;
        let lat =
            if ops > 0 { p.lat_sum_ns.saturating_sub(self.last.lat_sum_ns) as f64 / ops as f64 / 1000.0 } else { 0.0 };
        self.last = *p;
        if let Some(b) = &self.bar {
            let phase = if p.warmup { "warm-up" } else { "measuring" };
            let eta = (self.total_s - self.done_s - p.elapsed_s).max(0.0);
            b.set_message(format!(
                "{}: {phase} {}/{}  {} IOPS  {}  {} µs  (ETA {})",
                self.label,
                format::duration(p.elapsed_s),
                format::duration(p.planned_s),
                format::iops(iops),
                format::mbps(mbps),
                format::lat_us(lat),
                format::duration(eta)
            ));
        }
    }

    pub fn finish_step(&mut self, planned_s: f64, s: &StepResult) {
        self.done_s += planned_s;
        let flags: Vec<&str> = s.flags.iter().map(|f| f.code.as_str()).collect();
        // A step without completions has no throughput or latency: never "0 IOPS @ 0.0 µs".
        let figures = if s.read.ops + s.write.ops == 0 {
            "no I/O completed".to_string()
        } else {
            format!(
                "{} IOPS, {}, {} µs mean, {} µs p99",
                format::iops(s.iops),
                format::mbps(s.mbps),
                format::lat_us(s.lat_us.mean),
                format::lat_us(s.lat_us.p99)
            )
        };
        let line = format!(
            "{}: {figures}{}  [ETA {}]",
            self.label,
            if flags.is_empty() { String::new() } else { format!("  ({})", flags.join(", ")) },
            format::duration((self.total_s - self.done_s).max(0.0)),
        );
        match &self.bar {
            Some(b) => b.println(line),
            None => crate::outln!("{line}"),
        }
    }

    /// Prints a block of text without garbling the live line.
    pub fn print(&self, text: &str) {
        match &self.bar {
            Some(b) => b.suspend(|| crate::out!("{text}")),
            None => crate::out!("{text}"),
        }
    }

    /// A warning on stderr, without garbling the live line.
    pub fn warn(&self, text: &str) {
        match &self.bar {
            Some(b) => b.suspend(|| crate::errln!("WARNING: {text}")),
            None => crate::errln!("WARNING: {text}"),
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
