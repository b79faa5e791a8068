//! The terminal as a run's observer: a live line per step (indicatif) when stdout is a
//! terminal, one plain line per finished step otherwise (logs, CI, pipes); the run's notes on
//! stdout, its warnings on stderr, each workload's report and the run's summary as they come.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use iocurve_analysis::{RunResult, StepResult, WorkloadResult};
use iocurve_engine::{StepObserver, StepProgress};
use iocurve_report::{format, terminal};
use iocurve_run::{Observer, RunEvent, StepAt};

#[derive(Default)]
pub struct Terminal {
    /// The live line, from the first step on (stdout a terminal only).
    bar: Option<ProgressBar>,
    last: StepProgress,
    /// Planned seconds of the whole run, and of the steps already finished.
    total_s: f64,
    done_s: f64,
    label: String,
}

impl Terminal {
    /// A line on stdout, without garbling the live line.
    pub fn line(&mut self, line: &str) {
        match &self.bar {
            Some(b) => b.suspend(|| crate::outln!("{line}")),
            None => crate::outln!("{line}"),
        }
    }

    /// For commands that only note and warn (`precondition`, `verify`).
    pub fn new() -> Self {
        Self::default()
    }

    /// For a run of `total_s` planned seconds: the ETA counts down from it.
    pub fn for_run(total_s: f64) -> Self {
        Self { total_s, ..Self::default() }
    }

    /// Prints a block of text without garbling the live line.
    fn print(&self, text: &str) {
        match &self.bar {
            Some(b) => b.suspend(|| crate::out!("{text}")),
            None => crate::out!("{text}"),
        }
    }
}

impl StepObserver for Terminal {
    fn progress(&mut self, p: &StepProgress) {
        let Some(r) = p.rates_since(&self.last) else { return };
        let (iops, mbps, lat) = (r.iops, r.bytes_per_second / 1e6, r.latency_ns / 1000.0);
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

    /// A warning on stderr, without garbling the live line.
    fn warning(&mut self, text: &str) {
        match &self.bar {
            Some(b) => b.suspend(|| crate::errln!("WARNING: {text}")),
            None => crate::errln!("WARNING: {text}"),
        }
    }
}

impl Observer for Terminal {
    fn event(&mut self, event: &RunEvent) {
        for line in crate::words::words(event) {
            self.line(&line);
        }
    }

    fn step_starting(&mut self, at: &StepAt) {
        self.done_s += at.rested_s;
        let plural = if at.workers == 1 { "" } else { "s" };
        let mut load = match at.rate {
            Some(r) => iocurve_report::format::target_rate(r, at.sequential),
            None => match at.queue_depth {
                Some(qd) => format!("{} worker{plural} × qd {qd}", at.workers),
                None => format!("{} worker{plural}", at.workers),
            },
        };
        if let Some(h) = at.hosts {
            load = format!("{load} on {h} host{}", if h == 1 { "" } else { "s" });
        }
        self.label = format!(
            "[{}/{}] {} step {}/{}, {load}",
            at.workload_index, at.workloads, at.workload, at.step_index, at.steps
        );
        self.last = StepProgress::default();
        if self.bar.is_none() && std::io::stdout().is_terminal() {
            let b = ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stdout());
            b.set_style(ProgressStyle::with_template("{spinner} {msg}").expect("valid template"));
            b.enable_steady_tick(Duration::from_millis(200));
            self.bar = Some(b);
        }
        if let Some(b) = &self.bar {
            b.set_message(format!("{}: starting", self.label));
        }
    }

    fn step_finished(&mut self, planned_s: f64, s: &StepResult) {
        self.done_s += planned_s;
        let flags: Vec<&str> = s.flags.iter().map(|f| f.code.as_str()).collect();
        // A step without completions has no throughput or latency: never "0 IOPS @ 0.0 µs".
        let figures = if s.ops() == 0 {
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

    fn workload_finished(&mut self, w: &WorkloadResult) {
        self.print(&terminal::workload_report(w));
    }

    fn run_finished(&mut self, r: &RunResult) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
        crate::out!("{}", terminal::run_summary(r));
    }

    fn lost(&self) -> Option<String> {
        crate::out::out_closed().then(|| {
            "standard output was closed during this step (a pipe's reader ended, or the disk is full): the run went on measuring and storing without printing".into()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found in review: the ETA counted `pause_s` in the run's planned time but never as done,
    /// so the last step of a paused ramp still showed the rest as time to go.
    #[test]
    fn the_eta_counts_the_rest_taken() {
        let mut t = Terminal::for_run(200.0);
        let at = |step_index, rested_s| StepAt {
            workload: "w",
            workload_index: 1,
            workloads: 1,
            step_index,
            steps: 2,
            workers: step_index as u32,
            queue_depth: None,
            hosts: None,
            members: &[],
            rate: None,
            sequential: false,
            replay_speed: None,
            rested_s,
            bs: "4k",
            shape: "",
        };
        t.step_starting(&at(1, 0.0));
        t.done_s += 70.0; // the first step's planned time, as step_finished adds it
        t.step_starting(&at(2, 60.0));
        assert_eq!(t.done_s, 130.0);
    }
}
