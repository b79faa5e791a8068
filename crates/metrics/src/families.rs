//! The metric families, taken from a snapshot of the state, and their two encodings: OpenMetrics
//! text (prometheus-client's encoder, classic histogram buckets) and Prometheus' protobuf format
//! (classic and native histogram buckets), chosen by what the scraper accepts.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::proto;
use crate::{BUCKETS_S, Io, NATIVE_SCHEMA, NATIVE_ZERO_THRESHOLD_S, State};

type Labels = Vec<(&'static str, String)>;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

#[derive(Clone, Debug)]
enum Value {
    Number(f64),
    Histogram(Box<Io>),
}

/// One metric family: `name` without the `_total` a counter's series carry.
#[derive(Clone, Debug)]
struct Family {
    name: &'static str,
    help: &'static str,
    kind: Kind,
    series: Vec<(Labels, Value)>,
}

#[derive(Default)]
struct Families(Vec<Family>);

impl Families {
    /// A family without series is left out.
    fn push(&mut self, name: &'static str, help: &'static str, kind: Kind, series: Vec<(Labels, Value)>) {
        if !series.is_empty() {
            self.0.push(Family { name, help, kind, series });
        }
    }

    fn numbers(&mut self, name: &'static str, help: &'static str, kind: Kind, series: &[(Labels, f64)]) {
        self.push(name, help, kind, series.iter().map(|(l, v)| (l.clone(), Value::Number(*v))).collect());
    }

    fn counter(&mut self, name: &'static str, help: &'static str, series: &[(Labels, f64)]) {
        self.numbers(name, help, Kind::Counter, series)
    }

    fn gauge(&mut self, name: &'static str, help: &'static str, series: &[(Labels, f64)]) {
        self.numbers(name, help, Kind::Gauge, series)
    }
}

/// Every family of the state, in the order they are served.
fn families(s: &State) -> Vec<Family> {
    let mut f = Families::default();
    let run = s.run.as_ref().map_or_else(String::new, |r| r.0.clone());
    let with_run = |mut l: Labels| {
        l.insert(0, ("run", run.clone()));
        l
    };
    if let Some((id, label, plan)) = &s.run {
        let l = vec![("run", id.clone()), ("label", label.clone()), ("plan", plan.clone())];
        f.gauge("iocurve_run_info", "The run these figures belong to (value 1).", &[(l, 1.0)]);
    }
    // A series per mark, its value its time: Grafana draws it as an annotation ("use series
    // value as timestamp"); `n` keeps two marks of one text apart.
    let marks: Vec<_> = s
        .marks
        .iter()
        .enumerate()
        .map(|(i, (at, text))| (with_run(vec![("n", (i + 1).to_string()), ("text", text.clone())]), *at))
        .collect();
    f.gauge("iocurve_mark_timestamp_seconds", "A mark of the run (iocurve mark): when it was set, Unix time.", &marks);
    let io_labels = |k: &crate::Series| {
        with_run(vec![("workload", k.workload.clone()), ("host", k.host.clone()), ("direction", k.direction.into())])
    };
    let ops: Vec<_> = s.io.iter().map(|(k, v)| (io_labels(k), v.ops as f64)).collect();
    f.counter("iocurve_io_ops", "I/Os completed in measured intervals (as stored).", &ops);
    let bytes: Vec<_> = s.io.iter().map(|(k, v)| (io_labels(k), v.bytes as f64)).collect();
    f.counter("iocurve_io_bytes", "Bytes transferred in measured intervals (as stored).", &bytes);
    let errors: Vec<_> = s
        .errors
        .iter()
        .map(|((k, errno), n)| {
            let mut l = io_labels(k);
            l.push(("errno", errno.to_string()));
            (l, *n as f64)
        })
        .collect();
    f.counter("iocurve_io_errors", "I/Os that failed in measured intervals, by errno.", &errors);
    let target = |i: usize| -> Vec<(Labels, f64)> {
        s.targets
            .iter()
            .map(|((wl, t), v)| (with_run(vec![("workload", wl.clone()), ("target", t.clone())]), v[i] as f64))
            .collect()
    };
    f.counter("iocurve_target_ops", "I/Os completed on each target (path) in measured intervals.", &target(0));
    f.counter("iocurve_target_bytes", "Bytes transferred on each target (path) in measured intervals.", &target(1));
    f.counter("iocurve_target_errors", "I/Os that failed on each target (path) in measured intervals.", &target(2));
    let latency: Vec<_> = s.io.iter().map(|(k, v)| (io_labels(k), Value::Histogram(Box::new(v.clone())))).collect();
    f.push("iocurve_io_latency_seconds", "Latency of I/Os completed in measured intervals.", Kind::Histogram, latency);
    let rate = |get: fn(&(u64, u64)) -> u64| -> Vec<(Labels, f64)> {
        s.rate
            .iter()
            .map(|((wl, host), v)| (with_run(vec![("workload", wl.clone()), ("host", host.clone())]), get(v) as f64))
            .collect()
    };
    f.counter(
        "iocurve_rate_due",
        "I/Os a rate step's schedule had due in measured intervals (issued, queued or dropped).",
        &rate(|v| v.0),
    );
    f.counter("iocurve_rate_dropped", "Due I/Os of rate steps not issued (overload = drop).", &rate(|v| v.1));
    let cpu: Vec<_> = s
        .cpu
        .iter()
        .flat_map(|(host, c)| {
            [("user", c.user), ("system", c.system), ("iowait", c.iowait)]
                .map(|(mode, pct)| (with_run(vec![("host", host.clone()), ("mode", mode.into())]), pct / 100.0))
        })
        .collect();
    f.gauge("iocurve_host_cpu_ratio", "Share of the host's CPU time in the last interval, by mode.", &cpu);
    if let Some(l) = &s.live {
        live(&mut f, l, &run);
    }
    // A step by its workers per host, a queue-depth ramp's by its depth and a rate step by its
    // target too.
    let step_labels = |(wl, workers, qd, hosts, target): &crate::StepKey| {
        let mut l = vec![("workload", wl.to_string()), ("workers", workers.to_string())];
        if *qd > 0 {
            l.push(("queue_depth", qd.to_string()));
        }
        if *hosts > 0 {
            l.push(("hosts", hosts.to_string()));
        }
        if !target.is_empty() {
            l.push(("target", target.to_string()));
        }
        with_run(l)
    };
    let step = |get: fn(&crate::StepFigures) -> f64| -> Vec<(Labels, f64)> {
        s.steps.iter().map(|(k, v)| (step_labels(k), get(v))).collect()
    };
    let rate_step = |get: fn(&crate::RateFigures) -> f64| -> Vec<(Labels, f64)> {
        s.steps.iter().filter_map(|(k, v)| Some((step_labels(k), get(v.rate.as_ref()?)))).collect()
    };
    f.gauge("iocurve_step_iops", "A finished step's IOPS, by its workers per host.", &step(|x| x.iops));
    f.gauge(
        "iocurve_step_throughput_bytes_per_second",
        "A finished step's throughput, by its workers per host.",
        &step(|x| x.bytes_per_second),
    );
    f.gauge(
        "iocurve_step_latency_mean_seconds",
        "A finished step's mean latency, by its workers per host.",
        &step(|x| x.latency_mean_s),
    );
    f.gauge(
        "iocurve_step_latency_p99_seconds",
        "A finished step's 99th percentile latency, by its workers per host.",
        &step(|x| x.latency_p99_s),
    );
    f.gauge(
        "iocurve_step_rate_achieved_ratio",
        "A finished rate step's completed I/Os per I/O its schedule had due (1: all).",
        &rate_step(|r| r.achieved_ratio),
    );
    f.gauge(
        "iocurve_step_rate_lag_p99_seconds",
        "A finished rate step's 99th percentile of submission minus intended issue time.",
        &rate_step(|r| r.lag_p99_s),
    );
    f.gauge(
        "iocurve_step_rate_sustained",
        "1 when a finished rate step kept up with its schedule, else 0.",
        &rate_step(|r| if r.sustained { 1.0 } else { 0.0 }),
    );
    f.0
}

/// The running step's gauges.
fn live(f: &mut Families, l: &crate::Live, run: &str) {
    let w = || vec![("run", run.to_string()), ("workload", l.workload.clone())];
    if l.steps > 0 {
        let (step, steps) = (l.step as f64, l.steps as f64);
        f.gauge("iocurve_ramp_step", "The running step's position in its ramp (from 1).", &[(w(), step)]);
        f.gauge("iocurve_ramp_steps", "Steps in the running workload's ramp.", &[(w(), steps)]);
    }
    f.gauge("iocurve_workers", "Workers per host of the running step.", &[(w(), l.workers as f64)]);
    if let Some(h) = l.hosts {
        f.gauge("iocurve_hosts", "Hosts the running step of a host-count sweep runs on.", &[(w(), h as f64)]);
    }
    if let Some(qd) = l.queue_depth {
        f.gauge(
            "iocurve_queue_depth",
            "Outstanding I/Os per worker of the running step of a queue-depth ramp or grid.",
            &[(w(), qd as f64)],
        );
    }
    let mut info = w();
    info.extend([("bs", l.bs.clone()), ("shape", l.shape.clone())]);
    f.gauge(
        "iocurve_workload_info",
        "The running workload's block sizes and what shapes its load (distribution, think time, bursts), as labels (value 1).",
        &[(info, 1.0)],
    );
    f.gauge(
        "iocurve_inflight_ios",
        "I/Os outstanding now, all hosts of the running step together.",
        &[(w(), l.inflight as f64)],
    );
    let warm = if l.warmup { 1.0 } else { 0.0 };
    f.gauge("iocurve_warmup", "1 while the running step warms up (not measured).", &[(w(), warm)]);
    f.gauge("iocurve_live_iops", "I/Os per second over the last quarter second.", &[(w(), l.iops)]);
    f.gauge(
        "iocurve_live_throughput_bytes_per_second",
        "Bytes per second over the last quarter second.",
        &[(w(), l.bytes_per_second)],
    );
    f.gauge("iocurve_live_latency_seconds", "Mean latency over the last quarter second.", &[(w(), l.latency_s)]);
    match l.target {
        Some(crate::Target::Iops(v)) => f.gauge(
            "iocurve_rate_target_iops",
            "The running rate step's target, I/Os per second (all hosts together).",
            &[(w(), v)],
        ),
        Some(crate::Target::BytesPerSecond(v)) => f.gauge(
            "iocurve_rate_target_bytes_per_second",
            "The running rate step's target, bytes per second (all hosts together).",
            &[(w(), v)],
        ),
        None => {}
    }
    if let Some(speed) = l.replay_speed {
        f.gauge(
            "iocurve_replay_speed",
            "The running replay step's speed over its trace's timing (2: twice as fast).",
            &[(w(), speed)],
        );
    }
    f.gauge(
        "iocurve_stall_seconds",
        "Longest stretch without any completion in the last interval (a stall).",
        &[(w(), l.stall_s)],
    );
}

#[derive(Debug)]
struct Snapshot(Vec<Family>);

/// The families as OpenMetrics text.
pub(crate) fn text(state: &State) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Snapshot(families(state))));
    let mut out = String::new();
    // Writing to a String cannot fail; a collector's error would be ours, and is logged.
    if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &registry) {
        tracing::error!(error = %e, "metrics: encoding failed");
    }
    out
}

impl Collector for Snapshot {
    fn encode(&self, mut e: DescriptorEncoder) -> std::fmt::Result {
        for family in &self.0 {
            let kind = match family.kind {
                Kind::Counter => MetricType::Counter,
                Kind::Gauge => MetricType::Gauge,
                Kind::Histogram => MetricType::Histogram,
            };
            let mut m = e.encode_descriptor(family.name, family.help, None, kind)?;
            for (labels, value) in &family.series {
                let mut series = m.encode_family(labels)?;
                match (family.kind, value) {
                    (Kind::Counter, Value::Number(v)) => series.encode_counter::<NoLabelSet, f64, f64>(v, None)?,
                    (_, Value::Number(v)) => series.encode_gauge(v)?,
                    (_, Value::Histogram(io)) => {
                        // The encoder adds the buckets up itself: it takes each bucket's own count.
                        let mut below = 0;
                        let buckets: Vec<(f64, u64)> = BUCKETS_S
                            .iter()
                            .zip(io.buckets)
                            .chain(std::iter::once((&f64::INFINITY, io.latency_count)))
                            .map(|(&b, cumulative)| {
                                let own = cumulative.saturating_sub(below);
                                below = cumulative.max(below);
                                (b, own)
                            })
                            .collect();
                        series.encode_histogram::<NoLabelSet>(io.latency_sum_s, io.latency_count, &buckets, None)?
                    }
                }
            }
        }
        Ok(())
    }
}

/// The families in Prometheus' protobuf format, length-delimited.
pub(crate) fn protobuf(state: &State) -> Vec<u8> {
    let out: Vec<proto::MetricFamily> = families(state)
        .into_iter()
        .map(|family| {
            let (name, kind) = match family.kind {
                Kind::Counter => (format!("{}_total", family.name), proto::MetricType::Counter),
                Kind::Gauge => (family.name.to_string(), proto::MetricType::Gauge),
                Kind::Histogram => (family.name.to_string(), proto::MetricType::Histogram),
            };
            let metric = family
                .series
                .into_iter()
                .map(|(labels, value)| {
                    let label = labels
                        .into_iter()
                        .map(|(n, v)| proto::LabelPair { name: Some(n.to_string()), value: Some(v) })
                        .collect();
                    let mut m = proto::Metric { label, ..Default::default() };
                    match (family.kind, value) {
                        (Kind::Counter, Value::Number(v)) => m.counter = Some(proto::Counter { value: Some(v) }),
                        (_, Value::Number(v)) => m.gauge = Some(proto::Gauge { value: Some(v) }),
                        (_, Value::Histogram(io)) => m.histogram = Some(histogram(&io)),
                    }
                    m
                })
                .collect();
            proto::MetricFamily {
                name: Some(name),
                help: Some(family.help.to_string()),
                r#type: Some(kind as i32),
                metric,
            }
        })
        .collect();
    proto::delimited(&out)
}

/// A latency histogram with both bucket layouts: the classic buckets (cumulative) and the native
/// ones (sparse: spans of consecutive buckets, each count as the difference to the previous).
fn histogram(io: &Io) -> proto::Histogram {
    let bucket = BUCKETS_S
        .iter()
        .zip(io.buckets)
        .map(|(&b, c)| proto::Bucket { cumulative_count: Some(c), upper_bound: Some(b) });
    let (mut spans, mut deltas) = (Vec::<proto::BucketSpan>::new(), Vec::new());
    let (mut next, mut last_count) = (None::<i32>, 0i64);
    for (&index, &count) in &io.native {
        match next {
            Some(n) if n == index => {
                if let Some(s) = spans.last_mut() {
                    s.length = Some(s.length.unwrap_or(0) + 1);
                }
            }
            // The first span's offset is its first index; a later one's, the gap before it.
            _ => spans.push(proto::BucketSpan { offset: Some(next.map_or(index, |n| index - n)), length: Some(1) }),
        }
        deltas.push(count as i64 - last_count);
        last_count = count as i64;
        next = Some(index + 1);
    }
    if spans.is_empty() {
        // No observation yet: an empty span says "native" all the same.
        spans.push(proto::BucketSpan { offset: Some(0), length: Some(0) });
    }
    proto::Histogram {
        sample_count: Some(io.latency_count),
        sample_sum: Some(io.latency_sum_s),
        bucket: bucket.collect(),
        schema: Some(NATIVE_SCHEMA),
        zero_threshold: Some(NATIVE_ZERO_THRESHOLD_S),
        zero_count: Some(io.zero),
        positive_span: spans,
        positive_delta: deltas,
    }
}
