//! Live metrics for Prometheus: what a run (or an agent) measured so far, served on `/metrics`
//! ([`serve`]) as OpenMetrics text, or in Prometheus' protobuf format to a scraper that asks for
//! it — the format that carries native histograms.
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
//! CPU series and one error series per errno seen. A native histogram is one series of at most
//! one bucket per [`NATIVE_SCHEMA`] step between 1 ns and the longest latency seen (about 16 per
//! power of two: some 200 for latencies from 10 µs to 100 ms).

mod families;
pub mod proto;
mod serve;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use iocurve_stats::{CpuUsage, DirStats, IntervalStats, StepProgress};

pub use serve::{Server, format, response, serve};

/// Upper bounds of the latency buckets, in seconds: 1, 2 and 5 of every decade from 1 µs to
/// 10 s, the log scale latency charts of storage use.
pub const BUCKETS_S: [f64; 22] = [
    1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 0.1, 0.2, 0.5, 1.0, 2.0,
    5.0, 10.0,
];

/// Native histogram buckets: every power of two is divided into 2^4 = 16, so a bucket is 4.4 %
/// wide (a quantile from it is within 2.2 % of the truth), where the classic ones span 2 to 2.5×.
pub const NATIVE_SCHEMA: i32 = 4;
/// Latencies at or below this (1 ns, the histograms' resolution) count in the zero bucket.
pub const NATIVE_ZERO_THRESHOLD_S: f64 = 1e-9;

/// The native bucket that holds a latency of `s` seconds (above the zero threshold): bucket i
/// spans (2^((i-1)/16), 2^(i/16)].
pub fn native_index(s: f64) -> i32 {
    (s.log2() * f64::from(1u32 << NATIVE_SCHEMA)).ceil() as i32
}

/// The I/O of one workload on one host in one direction, since the run began.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Io {
    pub ops: u64,
    pub bytes: u64,
    /// Latencies recorded: the completions, and the late I/Os a step's last interval adds at
    /// its end (see `iocurve_stats::Drain`).
    pub latency_count: u64,
    /// Sum of the latencies, seconds.
    pub latency_sum_s: f64,
    /// Latencies at or below each of [`BUCKETS_S`] (cumulative, as Prometheus wants them).
    pub buckets: [u64; BUCKETS_S.len()],
    /// Latencies per native bucket ([`native_index`]), and at or below the zero threshold.
    pub native: BTreeMap<i32, u64>,
    pub zero: u64,
}

impl Io {
    fn add(&mut self, d: &DirStats) {
        self.ops += d.ops;
        self.bytes += d.bytes;
        self.latency_count += d.hist.count();
        self.latency_sum_s += d.hist.mean_ns() * d.hist.count() as f64 / 1e9;
        for (b, bound) in self.buckets.iter_mut().zip(BUCKETS_S) {
            *b += d.hist.count_at_or_below((bound * 1e9).round() as u64);
        }
        for (ns, n) in d.hist.buckets() {
            let s = ns as f64 / 1e9;
            if s <= NATIVE_ZERO_THRESHOLD_S {
                self.zero += n;
            } else {
                *self.native.entry(native_index(s)).or_default() += n;
            }
        }
    }
}

/// The encodings a scrape can get.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics text, classic histogram buckets.
    Text,
    /// Prometheus' protobuf format ([`proto::CONTENT_TYPE`]), classic and native buckets.
    Protobuf,
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
    /// Outstanding I/Os per worker of a step of a queue-depth ramp or grid (`qd_ramp`); None
    /// where the workload has one queue depth.
    pub queue_depth: Option<u32>,
    /// The hosts a host-count sweep's step runs on (`host_ramp`); None: all the run's.
    pub hosts: Option<u32>,
    /// Its block sizes and what shapes its load (distribution, think time, bursts; empty for a
    /// uniform closed loop), for `iocurve_workload_info`.
    pub bs: String,
    pub shape: String,
    pub warmup: bool,
    /// Over the last progress period (a quarter of a second).
    pub iops: f64,
    pub bytes_per_second: f64,
    pub latency_s: f64,
    /// Longest stretch without any completion in the last interval, seconds.
    pub stall_s: f64,
    /// I/Os outstanding at the last progress event (every host of the step).
    pub inflight: u64,
    /// A rate step's target (all hosts together): IOPS, or bytes per second for a sequential
    /// workload. None for a closed-loop step.
    pub target: Option<Target>,
    /// A replay's step: its speed over the trace's timing (`target` its mean rate).
    pub replay_speed: Option<f64>,
}

/// The running step's live gauges, fed its progress events (four a second): the one place that
/// turns them into figures, for a run's coordinator and an agent alike.
#[derive(Clone, Debug, Default)]
pub struct LiveGauges {
    pub live: Live,
    last: StepProgress,
}

impl LiveGauges {
    /// A step begins (warm-up first): `live` says what it does.
    pub fn new(live: Live) -> LiveGauges {
        LiveGauges { live: Live { warmup: true, ..live }, last: StepProgress::default() }
    }

    /// A progress event: the rates since the previous one become the live figures.
    pub fn progress(&mut self, p: &StepProgress, exporter: &Exporter) {
        let Some(r) = p.rates_since(&self.last) else { return };
        (self.live.iops, self.live.bytes_per_second, self.live.latency_s) =
            (r.iops, r.bytes_per_second, r.latency_ns / 1e9);
        self.live.warmup = p.warmup;
        self.live.inflight = p.inflight;
        self.last = *p;
        exporter.live(Some(self.live.clone()));
    }
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

/// A finished step's labels: workload, workers, queue depth of a `qd_ramp` step (0: none),
/// hosts of a `host_ramp` step (0: none), target rate.
pub(crate) type StepKey = (String, u32, u32, u32, String);

#[derive(Clone, Debug, Default)]
pub(crate) struct State {
    pub run: Option<(String, String, String)>,
    pub io: BTreeMap<Series, Io>,
    pub errors: BTreeMap<(Series, i32), u64>,
    /// Rate steps, per workload and host: the I/Os their schedules had due, and dropped.
    pub rate: BTreeMap<(String, String), (u64, u64)>,
    pub cpu: BTreeMap<String, CpuUsage>,
    /// Per workload and target (path): I/Os, bytes and failed I/Os in measured intervals.
    pub targets: BTreeMap<(String, String), [u64; 3]>,
    pub live: Option<Live>,
    /// Per workload, workers, queue depth (0 where the workload has one) and target rate
    /// (empty for closed-loop steps, whose workers and depth tell them apart): the finished
    /// step's figures.
    pub steps: BTreeMap<StepKey, StepFigures>,
    /// The run's marks (`iocurve mark`): when (Unix seconds) and what, in the order they came.
    pub marks: Vec<(f64, String)>,
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
            for (direction, d) in [("read", &stats.read), ("write", &stats.write), ("trim", &stats.trim)] {
                // Trim series only for workloads that trim.
                if direction == "trim" && d.ops == 0 && d.errors.0.is_empty() {
                    continue;
                }
                let key = Series { workload: workload.to_string(), host: host.to_string(), direction };
                for &(_, errno, n) in &d.errors.0 {
                    *s.errors.entry((key.clone(), errno)).or_default() += n;
                }
                s.io.entry(key).or_default().add(d);
            }
            if let Some(r) = &stats.rate {
                let e = s.rate.entry((workload.to_string(), host.to_string())).or_default();
                (e.0, e.1) = (e.0 + r.due, e.1 + r.dropped);
            }
            s.cpu.insert(host.to_string(), *cpu);
        });
    }

    /// Each target's part of a finished interval of `workload` (every host's: the merged
    /// interval), by the run's target names.
    pub fn targets(&self, workload: &str, names: &[String], stats: &IntervalStats) {
        self.with(|s| {
            for t in &stats.targets {
                let name = names.get(t.target as usize).cloned().unwrap_or_else(|| format!("target {}", t.target));
                let e = s.targets.entry((workload.to_string(), name)).or_default();
                e[0] += t.ops();
                e[1] += t.bytes();
                e[2] += t.errors;
            }
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

    /// A mark of the run (`iocurve mark`) at `unix_s`: an annotation for dashboards.
    pub fn mark(&self, unix_s: f64, text: &str) {
        self.with(|s| s.marks.push((unix_s, text.to_string())));
    }

    /// What runs now; None between steps and after the run.
    pub fn live(&self, live: Option<Live>) {
        self.with(|s| {
            let stall_s =
                s.live.as_ref().filter(|l| live.as_ref().is_some_and(|n| n.step == l.step)).map_or(0.0, |l| l.stall_s);
            s.live = live.map(|l| Live { stall_s, ..l });
        });
    }

    /// A step ended: its figures stay, labelled with its workers (and the queue depth of a
    /// `qd_ramp` step, the hosts of a `host_ramp` step, a rate step's target).
    pub fn step(&self, workload: &str, at: &Live, f: StepFigures) {
        self.with(|s| {
            let target = f.rate.as_ref().map(|r| r.target.label()).unwrap_or_default();
            let key = (workload.to_string(), at.workers, at.queue_depth.unwrap_or(0), at.hosts.unwrap_or(0), target);
            s.steps.insert(key, f);
        });
    }

    /// The metrics as OpenMetrics text, from a snapshot.
    pub fn encode(&self) -> String {
        families::text(&self.snapshot())
    }

    /// The metrics in `format`, from a snapshot.
    pub fn encode_as(&self, format: Format) -> Vec<u8> {
        match format {
            Format::Text => self.encode().into_bytes(),
            Format::Protobuf => families::protobuf(&self.snapshot()),
        }
    }

    fn snapshot(&self) -> State {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
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
        e.live(Some(Live {
            workload: "r".into(),
            workers: 64,
            target: Some(Target::Iops(50_000.0)),
            replay_speed: Some(2.0),
            inflight: 17,
            bs: "4k r, 64k w".into(),
            shape: "distribution zipf:1.2, bursts 100ms on, 900ms off".into(),
            ..Live::default()
        }));
        let text = e.encode();
        assert_eq!(line(&text, "iocurve_inflight_ios{"), "iocurve_inflight_ios{run=\"9\",workload=\"r\"} 17.0");
        // What shapes the running workload (issue 39), as labels.
        assert_eq!(
            line(&text, "iocurve_workload_info{"),
            "iocurve_workload_info{run=\"9\",workload=\"r\",bs=\"4k r, 64k w\",shape=\"distribution zipf:1.2, bursts 100ms on, 900ms off\"} 1.0"
        );
        assert_eq!(
            line(&text, "iocurve_rate_target_iops{"),
            "iocurve_rate_target_iops{run=\"9\",workload=\"r\"} 50000.0"
        );
        // A replay's step (issue 45): its speed beside its mean rate.
        assert_eq!(line(&text, "iocurve_replay_speed{"), "iocurve_replay_speed{run=\"9\",workload=\"r\"} 2.0");
        // Two rate steps of one workload, same workers: told apart by their targets.
        for (target, pct, sustained) in [(50_000.0, 99.9, true), (100_000.0, 71.5, false)] {
            let rate =
                RateFigures { target: Target::Iops(target), achieved_ratio: pct / 100.0, lag_p99_s: 0.002, sustained };
            let at = Live { workers: 64, ..Live::default() };
            e.step("r", &at, StepFigures { iops: target * pct / 100.0, rate: Some(rate), ..StepFigures::default() });
        }
        e.step(
            "closed",
            &Live { workers: 4, ..Live::default() },
            StepFigures { iops: 1000.0, ..StepFigures::default() },
        );
        // Two steps of a queue-depth ramp at 4 workers (issue 41): told apart by their depths;
        // a host-count sweep's by their hosts.
        for (qd, iops) in [(8, 2000.0), (16, 3000.0)] {
            let at = Live { workers: 4, queue_depth: Some(qd), ..Live::default() };
            e.step("qd", &at, StepFigures { iops, ..StepFigures::default() });
        }
        for (hosts, iops) in [(1, 500.0), (2, 900.0)] {
            let at = Live { workers: 4, hosts: Some(hosts), ..Live::default() };
            e.step("sweep", &at, StepFigures { iops, ..StepFigures::default() });
        }
        // The schedule's counters add up every interval's due and dropped I/Os.
        for _ in 0..2 {
            let rate = iocurve_stats::RateStats { due: 100, dropped: 3, ..Default::default() };
            let stats = IntervalStats { rate: Some(Box::new(rate)), ..Default::default() };
            e.interval("r", "h", &stats, &CpuUsage::default());
        }
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
        assert!(
            text.contains("iocurve_step_iops{run=\"9\",workload=\"qd\",workers=\"4\",queue_depth=\"8\"} 2000.0"),
            "{text}"
        );
        assert!(
            text.contains("iocurve_step_iops{run=\"9\",workload=\"qd\",workers=\"4\",queue_depth=\"16\"} 3000.0"),
            "{text}"
        );
        for (hosts, iops) in [(1, "500.0"), (2, "900.0")] {
            let line =
                format!("iocurve_step_iops{{run=\"9\",workload=\"sweep\",workers=\"4\",hosts=\"{hosts}\"}} {iops}");
            assert!(text.contains(&line), "{line} in {text}");
        }
        assert!(!text.contains("iocurve_rate_target_iops{"), "no target between steps");
        assert!(text.contains("iocurve_rate_due_total{run=\"9\",workload=\"r\",host=\"h\"} 200.0"), "{text}");
        assert!(text.contains("iocurve_rate_dropped_total{run=\"9\",workload=\"r\",host=\"h\"} 6.0"), "{text}");
        assert_eq!(Target::BytesPerSecond(200e6).label(), "200MB/s");
    }

    /// Issue 44: a mark is a series whose value is its time, for a dashboard's annotations; two
    /// marks of one text stay two, a text's quotes and backslashes are escaped.
    #[test]
    fn marks_are_series_of_their_time() {
        let e = Exporter::new();
        e.run("5", "", "quick");
        e.mark(1_795_300_000.25, "controller B pulled");
        e.mark(1_795_300_010.0, "controller B pulled");
        e.mark(1_795_300_020.0, "path \"b\" \\ down");
        let text = e.encode();
        assert!(text.contains("# TYPE iocurve_mark_timestamp_seconds gauge"), "{text}");
        assert!(
            text.contains(
                "iocurve_mark_timestamp_seconds{run=\"5\",n=\"1\",text=\"controller B pulled\"} 1795300000.25"
            ),
            "{text}"
        );
        assert!(text.contains("n=\"2\",text=\"controller B pulled\"} 1795300010"), "{text}");
        assert!(text.contains("text=\"path \\\"b\\\" \\\\ down\"}"), "{text}");
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

    /// The families of a protobuf answer.
    fn decode(mut bytes: &[u8]) -> Vec<proto::MetricFamily> {
        use prost::Message;
        let mut out = Vec::new();
        while !bytes.is_empty() {
            out.push(proto::MetricFamily::decode_length_delimited(&mut bytes).expect("a length-delimited family"));
        }
        out
    }

    #[test]
    fn native_buckets_hold_each_latency_in_the_bucket_of_its_power_of_two_sixteenth() {
        let e = Exporter::new();
        e.run("3", "", "quick");
        // Reads of 40 µs (twice), 41 µs (the same 4.4 % bucket), 150 µs and 3 ms; a 3 ms write.
        e.interval("w", "h", &stats(&[40_000, 40_000, 41_000, 150_000, 3_000_000], 4096), &CpuUsage::default());
        let families = decode(&e.encode_as(Format::Protobuf));
        let names: Vec<_> = families.iter().map(|f| f.name.clone().unwrap()).collect();
        assert!(names.contains(&"iocurve_io_ops_total".to_string()), "counters carry _total: {names:?}");
        let h = families.iter().find(|f| f.name.as_deref() == Some("iocurve_io_latency_seconds")).unwrap();
        assert_eq!(h.r#type, Some(proto::MetricType::Histogram as i32));
        let read = h
            .metric
            .iter()
            .find(|m| m.label.iter().any(|l| l.value.as_deref() == Some("read")))
            .and_then(|m| m.histogram.clone())
            .unwrap();
        assert_eq!((read.schema, read.zero_threshold, read.zero_count), (Some(4), Some(1e-9), Some(0)));
        assert_eq!(read.sample_count, Some(5));
        // Spans and deltas back to (bucket, count).
        let mut got = Vec::new();
        let (mut index, mut count) = (0i32, 0i64);
        let mut deltas = read.positive_delta.iter();
        for span in &read.positive_span {
            index += span.offset.unwrap();
            for _ in 0..span.length.unwrap() {
                count += deltas.next().unwrap();
                got.push((index, count));
                index += 1;
            }
        }
        // Bucket i spans (2^((i-1)/16), 2^(i/16)] seconds: log2(40e-6) = -14.61, × 16 = -233.7.
        assert_eq!(got, vec![(-233, 3), (-203, 1), (-134, 1)], "{read:?}");
        for (i, v) in [(-233, 41e-6), (-203, 150e-6), (-134, 3e-3)] {
            assert!(2f64.powf((i - 1) as f64 / 16.0) < v && v <= 2f64.powf(i as f64 / 16.0), "{v} in bucket {i}");
        }
        // The classic buckets ride along, cumulative.
        let classic: Vec<_> =
            read.bucket.iter().map(|b| (b.upper_bound.unwrap(), b.cumulative_count.unwrap())).collect();
        assert!(classic.contains(&(5e-5, 3)) && classic.contains(&(5e-3, 5)), "{classic:?}");
        // A series without any latency yet is still a native histogram: an empty span.
        let write = h.metric.iter().find(|m| m.label.iter().any(|l| l.value.as_deref() == Some("write"))).unwrap();
        assert_eq!(write.histogram.as_ref().unwrap().positive_span.len(), 1);
        let empty = Exporter::new();
        empty.interval("w", "h", &IntervalStats::default(), &CpuUsage::default());
        let h = decode(&empty.encode_as(Format::Protobuf))
            .into_iter()
            .find(|f| f.name.as_deref() == Some("iocurve_io_latency_seconds"))
            .unwrap();
        let span = &h.metric[0].histogram.as_ref().unwrap().positive_span;
        assert_eq!((span[0].offset, span[0].length), (Some(0), Some(0)));
    }

    #[test]
    fn the_answer_is_in_the_format_the_scraper_prefers() {
        let with = |accept: &str| format(format!("GET /metrics HTTP/1.1\r\nAccept: {accept}\r\n\r\n").as_bytes());
        // What a Prometheus with native histograms enabled sends.
        let prometheus = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(with(prometheus), Format::Protobuf);
        assert_eq!(
            with("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
            Format::Text
        );
        assert_eq!(with("*/*"), Format::Text);
        assert_eq!(
            with(
                "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.2, text/plain;q=0.9"
            ),
            Format::Text,
            "text preferred"
        );
        assert_eq!(
            with("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily"),
            Format::Text,
            "no encoding"
        );
        assert_eq!(
            with(
                "application/vnd.google.protobuf; proto=\"io.prometheus.client.MetricFamily\"; encoding=\"delimited\""
            ),
            Format::Protobuf,
            "quoted parameters"
        );
        assert_eq!(with("application/vnd.google.protobuf;proto=other.Message"), Format::Text, "another message");
        assert_eq!(
            with("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text"),
            Format::Text
        );
        assert_eq!(format(b"GET /metrics HTTP/1.1\r\n\r\n"), Format::Text, "no Accept");
        let out = response(format!("GET /metrics HTTP/1.1\r\nAccept: {prometheus}\r\n\r\n").as_bytes(), None, |f| {
            assert_eq!(f, Format::Protobuf);
            vec![1, 2, 3]
        });
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains(&format!("Content-Type: {}\r\n", proto::CONTENT_TYPE)), "{text}");
        assert!(out.ends_with(&[1, 2, 3]) && text.contains("Content-Length: 3\r\n"), "{text}");
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
        // Waiting on the silent scraper would take its 2 s request deadline; 1000 updates take ms.
        assert!(t.elapsed() < std::time::Duration::from_secs(1), "updates never wait: {:?}", t.elapsed());
        let t = std::time::Instant::now();
        let mut s = std::net::TcpStream::connect(server.addr()).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        // Likewise: behind the silent scraper this scrape would wait its 2 s deadline.
        assert!(t.elapsed() < std::time::Duration::from_secs(1), "nor other scrapes: {:?}", t.elapsed());
        assert!(
            out.contains("iocurve_io_ops_total{run=\"\",workload=\"w\",host=\"h\",direction=\"read\"} 1000.0"),
            "{out}"
        );
        // Two silent connections from one address hold its share: a third takes the place of
        // the oldest, which is closed at once (crates/door: the newcomer is let in), and is cut
        // itself once silent for the endpoint's 1 s. (This read waited 1 s for the third to be
        // closed at once, racing that cut: it failed whenever the cut came a moment late.)
        let _second = std::net::TcpStream::connect(server.addr()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let mut third = std::net::TcpStream::connect(server.addr()).unwrap();
        let closed = |s: &mut std::net::TcpStream, within: u64| {
            s.set_read_timeout(Some(std::time::Duration::from_secs(within))).unwrap();
            match s.read(&mut [0u8; 16]) {
                Ok(0) => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
                other => panic!("closed, not held: {other:?}"),
            }
        };
        let mut oldest = _silent;
        closed(&mut oldest, 1);
        closed(&mut third, 5);
        drop((oldest, _second));
        std::thread::sleep(std::time::Duration::from_millis(100));
        let mut s = std::net::TcpStream::connect(server.addr()).unwrap();
        s.write_all(b"POST /stop HTTP/1.1\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 405"), "figures only: {out}");
    }
}
