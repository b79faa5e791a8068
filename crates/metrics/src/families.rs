//! The metric families, encoded from a snapshot of the state with prometheus-client's
//! OpenMetrics text encoder (a collector: the figures are ours, kept as the run measured them).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::{BUCKETS_S, State};

type Labels = Vec<(&'static str, String)>;

#[derive(Debug)]
struct Snapshot(State);

pub(crate) fn encode(state: &State) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Snapshot(state.clone())));
    let mut out = String::new();
    // Writing to a String cannot fail; a collector's error would be ours, and is logged.
    if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &registry) {
        tracing::error!(error = %e, "metrics: encoding failed");
    }
    out
}

fn counter(e: &mut DescriptorEncoder, name: &str, help: &str, series: &[(Labels, f64)]) -> std::fmt::Result {
    if series.is_empty() {
        return Ok(());
    }
    let mut m = e.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in series {
        m.encode_family(labels)?.encode_counter::<NoLabelSet, f64, f64>(v, None)?;
    }
    Ok(())
}

fn gauge(e: &mut DescriptorEncoder, name: &str, help: &str, series: &[(Labels, f64)]) -> std::fmt::Result {
    if series.is_empty() {
        return Ok(());
    }
    let mut m = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in series {
        m.encode_family(labels)?.encode_gauge(v)?;
    }
    Ok(())
}

impl Collector for Snapshot {
    fn encode(&self, mut e: DescriptorEncoder) -> std::fmt::Result {
        let s = &self.0;
        let run = s.run.as_ref().map_or_else(String::new, |r| r.0.clone());
        let with_run = |mut l: Labels| {
            l.insert(0, ("run", run.clone()));
            l
        };
        if let Some((id, label, plan)) = &s.run {
            let l = vec![("run", id.clone()), ("label", label.clone()), ("plan", plan.clone())];
            gauge(&mut e, "iocurve_run_info", "The run these figures belong to (value 1).", &[(l, 1.0)])?;
        }
        let io_labels = |k: &crate::Series| {
            with_run(vec![
                ("workload", k.workload.clone()),
                ("host", k.host.clone()),
                ("direction", k.direction.into()),
            ])
        };
        let ops: Vec<_> = s.io.iter().map(|(k, v)| (io_labels(k), v.ops as f64)).collect();
        counter(&mut e, "iocurve_io_ops", "I/Os completed in measured intervals (as stored).", &ops)?;
        let bytes: Vec<_> = s.io.iter().map(|(k, v)| (io_labels(k), v.bytes as f64)).collect();
        counter(&mut e, "iocurve_io_bytes", "Bytes transferred in measured intervals (as stored).", &bytes)?;
        let errors: Vec<_> = s
            .errors
            .iter()
            .map(|((k, errno), n)| {
                let mut l = io_labels(k);
                l.push(("errno", errno.to_string()));
                (l, *n as f64)
            })
            .collect();
        counter(&mut e, "iocurve_io_errors", "I/Os that failed in measured intervals, by errno.", &errors)?;
        if !s.io.is_empty() {
            let mut m = e.encode_descriptor(
                "iocurve_io_latency_seconds",
                "Latency of I/Os completed in measured intervals.",
                None,
                MetricType::Histogram,
            )?;
            for (k, v) in &s.io {
                // The encoder adds the buckets up itself: it takes each bucket's own count.
                let mut below = 0;
                let buckets: Vec<(f64, u64)> = BUCKETS_S
                    .iter()
                    .zip(v.buckets)
                    .chain(std::iter::once((&f64::INFINITY, v.ops)))
                    .map(|(&b, cumulative)| {
                        let own = cumulative.saturating_sub(below);
                        below = cumulative.max(below);
                        (b, own)
                    })
                    .collect();
                let l = io_labels(k);
                m.encode_family(&l)?.encode_histogram::<NoLabelSet>(v.latency_sum_s, v.ops, &buckets, None)?;
            }
        }
        let cpu: Vec<_> = s
            .cpu
            .iter()
            .flat_map(|(host, c)| {
                [("user", c.user), ("system", c.system), ("iowait", c.iowait)]
                    .map(|(mode, pct)| (with_run(vec![("host", host.clone()), ("mode", mode.into())]), pct / 100.0))
            })
            .collect();
        gauge(&mut e, "iocurve_host_cpu_ratio", "Share of the host's CPU time in the last interval, by mode.", &cpu)?;
        if let Some(l) = &s.live {
            let w = || with_run(vec![("workload", l.workload.clone())]);
            if l.steps > 0 {
                let (step, steps) = (l.step as f64, l.steps as f64);
                gauge(
                    &mut e,
                    "iocurve_ramp_step",
                    "The running step's position in its ramp (from 1).",
                    &[(w(), step)],
                )?;
                gauge(&mut e, "iocurve_ramp_steps", "Steps in the running workload's ramp.", &[(w(), steps)])?;
            }
            gauge(&mut e, "iocurve_workers", "Workers per host of the running step.", &[(w(), l.workers as f64)])?;
            let warm = if l.warmup { 1.0 } else { 0.0 };
            gauge(&mut e, "iocurve_warmup", "1 while the running step warms up (not measured).", &[(w(), warm)])?;
            gauge(&mut e, "iocurve_live_iops", "I/Os per second over the last quarter second.", &[(w(), l.iops)])?;
            gauge(
                &mut e,
                "iocurve_live_throughput_bytes_per_second",
                "Bytes per second over the last quarter second.",
                &[(w(), l.bytes_per_second)],
            )?;
            gauge(
                &mut e,
                "iocurve_live_latency_seconds",
                "Mean latency over the last quarter second.",
                &[(w(), l.latency_s)],
            )?;
            match l.target {
                Some(crate::Target::Iops(v)) => gauge(
                    &mut e,
                    "iocurve_rate_target_iops",
                    "The running rate step's target, I/Os per second (all hosts together).",
                    &[(w(), v)],
                )?,
                Some(crate::Target::BytesPerSecond(v)) => gauge(
                    &mut e,
                    "iocurve_rate_target_bytes_per_second",
                    "The running rate step's target, bytes per second (all hosts together).",
                    &[(w(), v)],
                )?,
                None => {}
            }
            gauge(
                &mut e,
                "iocurve_stall_seconds",
                "Longest stretch without any completion in the last interval (a stall).",
                &[(w(), l.stall_s)],
            )?;
        }
        // A step by its workers per host, a rate step by its target too.
        let step_labels = |wl: &str, workers: u32, target: &str| {
            let mut l = vec![("workload", wl.to_string()), ("workers", workers.to_string())];
            if !target.is_empty() {
                l.push(("target", target.to_string()));
            }
            with_run(l)
        };
        let step = |f: fn(&crate::StepFigures) -> f64| -> Vec<(Labels, f64)> {
            s.steps.iter().map(|((wl, workers, target), v)| (step_labels(wl, *workers, target), f(v))).collect()
        };
        let rate_step = |f: fn(&crate::RateFigures) -> f64| -> Vec<(Labels, f64)> {
            s.steps
                .iter()
                .filter_map(|((wl, workers, target), v)| Some((step_labels(wl, *workers, target), f(v.rate.as_ref()?))))
                .collect()
        };
        gauge(&mut e, "iocurve_step_iops", "A finished step's IOPS, by its workers per host.", &step(|f| f.iops))?;
        gauge(
            &mut e,
            "iocurve_step_throughput_bytes_per_second",
            "A finished step's throughput, by its workers per host.",
            &step(|f| f.bytes_per_second),
        )?;
        gauge(
            &mut e,
            "iocurve_step_latency_mean_seconds",
            "A finished step's mean latency, by its workers per host.",
            &step(|f| f.latency_mean_s),
        )?;
        gauge(
            &mut e,
            "iocurve_step_latency_p99_seconds",
            "A finished step's 99th percentile latency, by its workers per host.",
            &step(|f| f.latency_p99_s),
        )?;
        gauge(
            &mut e,
            "iocurve_step_rate_achieved_ratio",
            "A finished rate step's completed I/Os per I/O its schedule had due (1: all).",
            &rate_step(|r| r.achieved_ratio),
        )?;
        gauge(
            &mut e,
            "iocurve_step_rate_lag_p99_seconds",
            "A finished rate step's 99th percentile of submission minus intended issue time.",
            &rate_step(|r| r.lag_p99_s),
        )?;
        gauge(
            &mut e,
            "iocurve_step_rate_sustained",
            "1 when a finished rate step kept up with its schedule, else 0.",
            &rate_step(|r| if r.sustained { 1.0 } else { 0.0 }),
        )?;
        Ok(())
    }
}
