//! Live metrics for Prometheus: what a run (or an agent) measured so far, served as OpenMetrics
//! text on `/metrics` ([`serve`]).
//!
//! Nothing here touches the I/O path. The exporter is fed finished intervals — the figures the
//! results database stores, so that a counter's increase over a run equals the stored totals —
//! and the progress events the terminal already gets four times a second. A scrape encodes a
//! snapshot taken under a short lock; a slow or absent scraper never holds the run.
//!
//! Names and units follow Prometheus' conventions: counters end in `_total`, times are
//! seconds, sizes bytes, ratios 0 to 1. Labels are limited to `run`, `workload`, `host`,
//! `direction`, `errno`, `mode` and `workers` (a step's results), so a run of W workloads on H
//! hosts has at most W × H × 2 × 27 I/O series (two counters, 23 buckets, sum and count), H × 3
//! CPU series and one error series per errno seen.

mod families;
mod serve;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use iocurve_stats::{CpuUsage, DirStats, IntervalStats};

pub use serve::{Server, response, serve};

/// Upper bounds of the latency buckets, in seconds: 1, 2 and 5 of every decade from 1 µs to
/// 10 s, the log scale latency charts of storage use.
pub const BUCKETS_S: [f64; 22] = [
    1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 0.1, 0.2, 0.5, 1.0, 2.0,
    5.0, 10.0,
];

/// The I/O of one workload on one host in one direction, since the run began.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Io {
    pub ops: u64,
    pub bytes: u64,
    /// Sum of the latencies, seconds.
    pub latency_sum_s: f64,
    /// Completions at or below each of [`BUCKETS_S`] (cumulative, as Prometheus wants them).
    pub buckets: [u64; BUCKETS_S.len()],
}

impl Io {
    fn add(&mut self, d: &DirStats) {
        self.ops += d.ops;
        self.bytes += d.bytes;
        self.latency_sum_s += d.hist.mean_ns() * d.hist.count() as f64 / 1e9;
        for (b, bound) in self.buckets.iter_mut().zip(BUCKETS_S) {
            *b += d.hist.count_at_or_below((bound * 1e9).round() as u64);
        }
    }
}

/// Where a series belongs: workload, host and direction (`read` or `write`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Series {
    pub workload: String,
    pub host: String,
    pub direction: &'static str,
}

/// The step running now and what it does, from the progress events.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Live {
    pub workload: String,
    /// Its position in the ramp (from 1) and the ramp's length (0: not known here, on an agent).
    pub step: u32,
    pub steps: u32,
    /// Workers per host.
    pub workers: u32,
    pub warmup: bool,
    /// Over the last progress period (a quarter of a second).
    pub iops: f64,
    pub bytes_per_second: f64,
    pub latency_s: f64,
    /// Longest stretch without any completion in the last interval, seconds.
    pub stall_s: f64,
    /// A rate step's target (all hosts together): IOPS, or bytes per second for a sequential
    /// workload. None for a closed-loop step.
    pub target: Option<Target>,
}

/// A rate step's target rate, in the unit its workload counts in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Target {
    Iops(f64),
    BytesPerSecond(f64),
}

impl Target {
    /// The figure as the step's label shows it (IOPS, or MB/s as plans give it).
    pub fn label(&self) -> String {
        match self {
            Target::Iops(v) => format!("{v:.0}"),
            Target::BytesPerSecond(v) => format!("{:.0}MB/s", v / 1e6),
        }
    }
}

/// A finished rate step: how well it kept to its schedule (issue 17).
#[derive(Clone, Debug, PartialEq)]
pub struct RateFigures {
    pub target: Target,
    /// Completed I/Os per due I/O (1 = all).
    pub achieved_ratio: f64,
    /// 99th percentile of submission − intended issue time, seconds.
    pub lag_p99_s: f64,
    /// Kept up (see the analysis' rule): 1, else 0.
    pub sustained: bool,
}

/// A finished step's figures.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepFigures {
    pub iops: f64,
    pub bytes_per_second: f64,
    pub latency_mean_s: f64,
    pub latency_p99_s: f64,
    /// A rate step's schedule figures.
    pub rate: Option<RateFigures>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct State {
    pub run: Option<(String, String, String)>,
    pub io: BTreeMap<Series, Io>,
    pub errors: BTreeMap<(Series, i32), u64>,
    pub cpu: BTreeMap<String, CpuUsage>,
    pub live: Option<Live>,
    /// Per workload, workers and target rate (empty for closed-loop steps, whose workers tell
    /// them apart): the finished step's figures.
    pub steps: BTreeMap<(String, u32, String), StepFigures>,
}

/// The figures a `/metrics` endpoint serves. Clones share them.
#[derive(Clone, Debug, Default)]
pub struct Exporter(Arc<Mutex<State>>);

impl Exporter {
    pub fn new() -> Exporter {
        Exporter::default()
    }

    fn with(&self, f: impl FnOnce(&mut State)) {
        // A panic elsewhere while the lock was held leaves figures that are still counts.
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut s);
    }

    /// The run these figures belong to: every series carries its id.
    pub fn run(&self, id: &str, label: &str, plan: &str) {
        self.with(|s| s.run = Some((id.to_string(), label.to_string(), plan.to_string())));
    }

    /// A finished interval of `workload` on `host`: its I/O adds to the counters, its CPU
    /// becomes the host's.
    pub fn interval(&self, workload: &str, host: &str, stats: &IntervalStats, cpu: &CpuUsage) {
        self.with(|s| {
            for (direction, d) in [("read", &stats.read), ("write", &stats.write)] {
                let key = Series { workload: workload.to_string(), host: host.to_string(), direction };
                for &(_, errno, n) in &d.errors.0 {
                    *s.errors.entry((key.clone(), errno)).or_default() += n;
                }
                s.io.entry(key).or_default().add(d);
            }
            s.cpu.insert(host.to_string(), *cpu);
        });
    }

    /// The longest stretch without a completion in the last interval (of every host: the
    /// merged interval's), for the running step.
    pub fn stall(&self, stats: &IntervalStats) {
        self.with(|s| {
            if let (Some(live), Some(gap)) = (s.live.as_mut(), stats.max_gap_ns) {
                live.stall_s = gap as f64 / 1e9;
            }
        });
    }

    /// What runs now; None between steps and after the run.
    pub fn live(&self, live: Option<Live>) {
        self.with(|s| {
            let stall_s =
                s.live.as_ref().filter(|l| live.as_ref().is_some_and(|n| n.step == l.step)).map_or(0.0, |l| l.stall_s);
            s.live = live.map(|l| Live { stall_s, ..l });
        });
    }

    /// A step ended: its figures stay, labelled with its workers (and a rate step's target).
    pub fn step(&self, workload: &str, workers: u32, f: StepFigures) {
        self.with(|s| {
            let target = f.rate.as_ref().map(|r| r.target.label()).unwrap_or_default();
            s.steps.insert((workload.to_string(), workers, target), f);
        });
    }

    /// The metrics as OpenMetrics text, from a snapshot.
    pub fn encode(&self) -> String {
        let snapshot = self.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        families::encode(&snapshot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(lat_ns: &[u64], bytes: u64) -> IntervalStats {
        let mut s = IntervalStats::default();
        for &l in lat_ns {
            s.read.record(l, bytes);
        }
        s.write.record(3_000_000, bytes);
        s.write.errors.add(0, 5, 2);
        s
    }

    fn line<'a>(text: &'a str, start: &str) -> &'a str {
        text.lines().find(|l| l.starts_with(start)).unwrap_or_else(|| panic!("no {start} in\n{text}"))
    }

    #[test]
    fn rate_steps_show_their_target_and_how_they_kept_to_it() {
        let e = Exporter::new();
        e.run("9", "", "rates");
        e.live(Some(Live {
            workload: "r".into(),
            workers: 64,
            target: Some(Target::Iops(50_000.0)),
            ..Live::default()
        }));
        let text = e.encode();
        assert_eq!(
            line(&text, "iocurve_rate_target_iops{"),
            "iocurve_rate_target_iops{run=\"9\",workload=\"r\"} 50000.0"
        );
        // Two rate steps of one workload, same workers: told apart by their targets.
        for (target, pct, sustained) in [(50_000.0, 99.9, true), (100_000.0, 71.5, false)] {
            let rate =
                RateFigures { target: Target::Iops(target), achieved_ratio: pct / 100.0, lag_p99_s: 0.002, sustained };
            e.step("r", 64, StepFigures { iops: target * pct / 100.0, rate: Some(rate), ..StepFigures::default() });
        }
        e.step("closed", 4, StepFigures { iops: 1000.0, ..StepFigures::default() });
        e.live(None);
        let text = e.encode();
        let sel = |t: &str| format!("{{run=\"9\",workload=\"r\",workers=\"64\",target=\"{t}\"}}");
        assert_eq!(
            line(&text, &format!("iocurve_step_rate_achieved_ratio{}", sel("100000"))).rsplit(' ').next(),
            Some("0.715")
        );
        assert!(line(&text, &format!("iocurve_step_rate_sustained{}", sel("50000"))).ends_with(" 1.0"));
        assert!(line(&text, &format!("iocurve_step_rate_sustained{}", sel("100000"))).ends_with(" 0.0"));
        assert!(line(&text, &format!("iocurve_step_iops{}", sel("50000"))).ends_with(" 49950.0"), "{text}");
        // A closed-loop step keeps its labels, and has no rate figures.
        assert!(text.contains("iocurve_step_iops{run=\"9\",workload=\"closed\",workers=\"4\"} 1000.0"), "{text}");
        assert!(!text.contains("iocurve_step_rate_sustained{run=\"9\",workload=\"closed\""));
        assert!(!text.contains("iocurve_rate_target_iops{"), "no target between steps");
        assert_eq!(Target::BytesPerSecond(200e6).label(), "200MB/s");
    }

    #[test]
    fn counters_add_up_intervals_and_buckets_are_cumulative() {
        let e = Exporter::new();
        e.run("7", "4 of 4 controllers", "quick");
        // 3 reads of 40 µs, 150 µs and 3 ms, twice; one 3 ms write each time.
        for _ in 0..2 {
            e.interval("w", "h1", &stats(&[40_000, 150_000, 3_000_000], 4096), &CpuUsage::default());
        }
        let text = e.encode();
        let sel = "{run=\"7\",workload=\"w\",host=\"h1\",direction=\"read\"}";
        assert_eq!(line(&text, &format!("iocurve_io_ops_total{sel}")), format!("iocurve_io_ops_total{sel} 6.0"));
        assert_eq!(
            line(&text, &format!("iocurve_io_bytes_total{sel}")),
            format!("iocurve_io_bytes_total{sel} 24576.0")
        );
        let bucket = |le: &str| {
            let l = line(
                &text,
                &format!(
                    "iocurve_io_latency_seconds_bucket{{le=\"{le}\",run=\"7\",workload=\"w\",host=\"h1\",direction=\"read\"}}"
                ),
            );
            l.rsplit(' ').next().unwrap().parse::<u64>().unwrap()
        };
        assert_eq!(
            [bucket("0.00002"), bucket("0.00005"), bucket("0.0002"), bucket("0.005"), bucket("+Inf")],
            [0, 2, 4, 6, 6]
        );
        assert!(
            text.contains(
                "iocurve_io_errors_total{run=\"7\",workload=\"w\",host=\"h1\",direction=\"write\",errno=\"5\"} 4.0"
            ),
            "{text}"
        );
        assert!(text.contains("iocurve_run_info{run=\"7\",label=\"4 of 4 controllers\",plan=\"quick\"} 1"), "{text}");
        assert!(text.trim_end().ends_with("# EOF"), "OpenMetrics text ends with # EOF");
        // The histogram's sum is the latencies' (HDR's precision: 3 significant digits).
        let sum: f64 =
            line(&text, &format!("iocurve_io_latency_seconds_sum{sel}")).rsplit(' ').next().unwrap().parse().unwrap();
        assert!((sum - 2.0 * 0.00319).abs() < 2.0 * 0.00319 * 1e-3, "{sum}");
    }

    #[test]
    fn a_scraper_that_never_reads_holds_neither_updates_nor_other_scrapes() {
        use std::io::{Read, Write};
        let e = Exporter::new();
        let server = serve("127.0.0.1:0", e.clone(), None).unwrap();
        // Connects and sends nothing: the endpoint gives it up after its deadline, meanwhile
        // the run's updates go on (they never wait for the endpoint).
        let _silent = std::net::TcpStream::connect(server.addr()).unwrap();
        let t = std::time::Instant::now();
        for _ in 0..1000 {
            e.interval("w", "h", &stats(&[1000], 512), &CpuUsage::default());
        }
        assert!(t.elapsed() < std::time::Duration::from_secs(1), "updates never wait: {:?}", t.elapsed());
        let t = std::time::Instant::now();
        let mut s = std::net::TcpStream::connect(server.addr()).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(t.elapsed() < std::time::Duration::from_secs(1), "nor other scrapes: {:?}", t.elapsed());
        assert!(
            out.contains("iocurve_io_ops_total{run=\"\",workload=\"w\",host=\"h\",direction=\"read\"} 1000.0"),
            "{out}"
        );
        // Two silent connections from one address hold its share: a third is closed at once
        // (other addresses keep theirs).
        let _second = std::net::TcpStream::connect(server.addr()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let mut third = std::net::TcpStream::connect(server.addr()).unwrap();
        third.set_read_timeout(Some(std::time::Duration::from_secs(1))).unwrap();
        let mut buf = [0u8; 16];
        match third.read(&mut buf) {
            Ok(0) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            other => panic!("closed at once, not held: {other:?}"),
        }
        drop((_silent, _second));
        std::thread::sleep(std::time::Duration::from_millis(100));
        let mut s = std::net::TcpStream::connect(server.addr()).unwrap();
        s.write_all(b"POST /stop HTTP/1.1\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 405"), "figures only: {out}");
    }
}
