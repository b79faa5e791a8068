//! The ramp: every workload's steps through the cluster, each finished interval stored as it
//! comes (the recorder), each step analysed and printed, the result assembled.

use super::*;

pub(super) struct Outcome {
    pub(super) result: RunResult,
    pub(super) run_id: Option<i64>,
    pub(super) error: Option<CliError>,
}

/// Feeds a running step to the progress line and the results database.
pub(super) struct Recorder<'a> {
    progress: &'a mut Progress,
    store: &'a mut Store,
    workload_id: i64,
    step_idx: usize,
    step_id: Option<i64>,
    /// The first store error; the run stops after the step.
    error: Option<StoreError>,
    /// The verification map, saved at every interval end so that a killed run keeps it.
    verification: Option<&'a verification::Verification>,
    map_error: Option<iocurve_engine::EngineError>,
}

impl StepObserver for Recorder<'_> {
    fn started(&mut self, rec: &StepRecord) {
        match self.store.begin_step(self.workload_id, self.step_idx, rec) {
            Ok(id) => self.step_id = Some(id),
            Err(e) => self.error = self.error.take().or(Some(e)),
        }
    }

    fn progress(&mut self, p: &StepProgress) {
        self.progress.update(p);
    }

    fn warning(&mut self, message: &str) {
        self.progress.warn(message);
    }

    fn host_started(&mut self, host: u32, address: &str, hostname: &str, started_unix_ns: i64, threads: usize) {
        if let (Some(step), None) = (self.step_id, &self.error)
            && let Err(e) = self.store.add_step_host(step, host, address, hostname, started_unix_ns, threads)
        {
            self.error = Some(e);
        }
    }

    fn host_interval(&mut self, host: u32, index: u32, stats: &IntervalStats, cpu: &CpuUsage, duration_s: f64) {
        if let (Some(step), None) = (self.step_id, &self.error)
            && let Err(e) = self.store.add_interval(step, Some(host), index, stats, cpu, duration_s)
        {
            self.error = Some(e);
        }
    }

    fn interval(&mut self, index: u32, stats: &IntervalStats, cpu: &CpuUsage, duration_s: f64) {
        if let (Some(step), None) = (self.step_id, &self.error)
            && let Err(e) = self.store.add_interval(step, None, index, stats, cpu, duration_s)
        {
            self.error = Some(e);
        }
        if let Some(v) = self.verification
            && self.map_error.is_none()
            && let Err(e) = v.map.save(&v.path)
        {
            self.map_error = Some(e);
        }
    }
}

/// The back-ends a host runs the plan's workloads on: io_uring becomes psync where it is not
/// available.
fn backend_names(plan: &Plan, io_uring: bool) -> String {
    let mut backends: Vec<&str> = plan
        .workloads
        .iter()
        .map(|w| if w.backend == Backend::IoUring && !io_uring { Backend::Psync } else { w.backend })
        .map(Backend::name)
        .collect();
    backends.dedup();
    backends.join("+")
}

/// The coordinator's facts and, for a multi-host run, each agent's own.
fn host_info(facts: host::HostFacts, plan: &Plan, backend_note: Option<String>, cluster: &remote::Cluster) -> HostInfo {
    let agents = cluster
        .agents()
        .map(|(address, h)| {
            let unavailable = (!h.io_uring_unavailable.is_empty()).then(|| h.io_uring_unavailable.clone());
            AgentHost {
                address: address.to_string(),
                facts: iocurve_net::wire::host_facts(h),
                backend: backend_names(plan, unavailable.is_none()),
                backend_note: unavailable.filter(|_| plan.workloads.iter().any(|w| w.backend == Backend::IoUring)).map(
                    |why| {
                        format!(
                            "io_uring is not available on this agent ({why}): psync, one thread per outstanding I/O"
                        )
                    },
                ),
                lost: None,
            }
        })
        .chain(cluster.unreachable().iter().map(|(address, why)| AgentHost {
            address: address.clone(),
            lost: Some(why.clone()),
            ..Default::default()
        }))
        .collect();
    HostInfo { facts, backend: backend_names(plan, true), backend_note, agents }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn execute(
    plan: &Plan,
    target_infos: Vec<TargetInfo>,
    cluster: &mut remote::Cluster,
    verification: Option<&verification::Verification>,
    backend_note: Option<String>,
    label: &str,
    sla: &Sla,
    store: &mut Store,
) -> Outcome {
    let host = host_info(host::facts(), plan, backend_note, cluster);
    let plan_json = serde_json::to_value(plan).unwrap_or_default();
    let started_at = time::now_rfc3339();
    let new_run = NewRun {
        label: label.to_string(),
        plan_name: plan.name.clone(),
        started_at: started_at.clone(),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        hostname: host.facts.hostname.clone(),
        backend: host.backend.clone(),
        targets: target_infos.iter().map(|t| t.path.as_str()).collect::<Vec<_>>().join(", "),
        host_json: serde_json::to_string(&host).unwrap_or_default(),
        targets_json: serde_json::to_string(&target_infos).unwrap_or_default(),
        plan_json: plan_json.to_string(),
    };
    let mut progress = Progress::new(plan.total_seconds());
    let th = Thresholds::default();
    let target_paths: Vec<String> = target_infos.iter().map(|t| t.path.clone()).collect();
    let mut workloads: Vec<WorkloadResult> = Vec::new();
    let mut error: Option<CliError> = None;
    let run_id = match store.begin_run(&new_run) {
        Ok(id) => {
            tracing::info!(run = id, plan = %plan.source, targets = target_infos.len(), "run started");
            Some(id)
        }
        Err(e) => {
            error = Some(store_error(e));
            None
        }
    };
    let nw = plan.workloads.len();
    let mut output_cut_noted = false;
    let mut data_checks: Vec<((iocurve_plan::DataPattern, u64, u64), Vec<iocurve_analysis::DataCheckRow>)> = Vec::new();
    for (wi, w) in plan.workloads.iter().enumerate() {
        let Some(run_id) = run_id else { break };
        let seq = w.pattern == Pattern::Sequential;
        let workload_id = match store.begin_workload(run_id, wi, &w.name, &serde_json::to_string(w).unwrap_or_default())
        {
            Ok(id) => id,
            Err(e) => {
                error = Some(store_error(e));
                break;
            }
        };
        // Measured once per data pattern and block size: a suite's frontend and backend
        // variants write the same data.
        let key = (w.data, w.max_bs(), w.dedupe_unit());
        let data_check = match data_checks.iter().find(|(k, _)| *k == key) {
            _ if !w.writes() => Vec::new(),
            Some((_, rows)) => rows.clone(),
            None => match crate::datameter::sample(w) {
                Ok(rows) => {
                    data_checks.push((key, rows.clone()));
                    rows
                }
                Err(e) => {
                    error = Some(e);
                    break;
                }
            },
        };
        if !data_check.is_empty()
            && let Err(e) = store.set_data_check(workload_id, &serde_json::to_string(&data_check).unwrap_or_default())
        {
            error = Some(store_error(e));
            break;
        }
        let mut steps: Vec<StepResult> = Vec::new();
        let mut stop_run = false;
        for (si, &workers) in w.ramp.iter().enumerate() {
            if signals::STOP.load(Ordering::Relaxed) {
                break;
            }
            progress.start_step(&w.name, wi + 1, nw, si + 1, w.ramp.len(), workers);
            let mut rec = Recorder {
                progress: &mut progress,
                store,
                workload_id,
                step_idx: si,
                step_id: None,
                error: None,
                verification,
                map_error: None,
            };
            let outcome = cluster.run_step(w, workers, &plan.faults, &mut rec, &signals::STOP).map(|m| m.merged);
            let (step_id, store_err, map_err) = (rec.step_id, rec.error, rec.map_error);
            let outcome = outcome.and_then(|r| match (store_err, map_err) {
                (Some(e), _) => Err(store_error(e)),
                (None, Some(e)) => Err(CliError::Engine(e)),
                (None, None) => Ok(r),
            });
            match outcome {
                Ok(mut r) => {
                    if crate::out::out_closed() && !output_cut_noted {
                        output_cut_noted = true;
                        r.notes.push((
                            "output_closed".into(),
                            "standard output was closed during this step (a pipe's reader ended, or the disk is full): the run went on measuring and storing without printing".into(),
                        ));
                    }
                    if let Some(id) = step_id
                        && let Err(e) = store.end_step(id, &r)
                    {
                        error = Some(store_error(e));
                    }
                    if r.intervals.is_empty() && r.drain.stuck > 0 {
                        // No interval to flag: the step is not kept, so say it here.
                        crate::errln!(
                            "WARNING: {} at {workers} workers: {} I/Os were still outstanding {:.1} s after the stop (oldest {:.1} s) and were given up as stuck",
                            w.name,
                            r.drain.stuck,
                            r.drain.wait_ns as f64 / 1e9,
                            r.drain.stuck_age_ns as f64 / 1e9
                        );
                    }
                    let s = iocurve_analysis::analyze_step_on(&r, seq, &th, &target_paths);
                    progress.finish_step(w.step_seconds(), &s);
                    if !r.intervals.is_empty() {
                        steps.push(s);
                    }
                    if let Some(why) = &r.aborted {
                        // Kept like every step: the run ends after it, with status `aborted`.
                        error.get_or_insert(CliError::Aborted(why.clone()));
                    }
                    if error.is_some() {
                        stop_run = true;
                        break;
                    }
                }
                Err(e) => {
                    error = Some(e);
                    stop_run = true;
                    break;
                }
            }
        }
        if !steps.is_empty() {
            let mut r = iocurve_analysis::analyze_workload(w, steps, sla);
            r.data_check = data_check;
            progress.print(&terminal::workload_report(&r));
            workloads.push(r);
        }
        if stop_run || signals::STOP.load(Ordering::Relaxed) {
            break;
        }
    }
    progress.finish();
    let interrupted = signals::STOP.load(Ordering::Relaxed);
    let finished_at = time::now_rfc3339();
    let status = if matches!(error, Some(CliError::Aborted(_))) {
        "aborted"
    } else if error.is_some() {
        "failed"
    } else if interrupted {
        "interrupted"
    } else {
        "complete"
    };
    if let Some(id) = run_id
        && let Err(e) = store.finish_run(id, status, &finished_at, &terminal::headlines(&workloads))
    {
        error.get_or_insert(store_error(e));
    }
    // A store that failed while the run was finished makes it a failure whatever it was.
    let status = match &error {
        Some(CliError::Aborted(_)) => "aborted",
        Some(_) => "failed",
        None => status,
    };
    tracing::info!(run = run_id.unwrap_or_default(), status, reason = ?error.as_ref().map(|e| e.to_string()), "run finished");
    let result = RunResult {
        schema_version: SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at,
        finished_at,
        interrupted,
        status: status.into(),
        status_reason: error.as_ref().map(|e| e.to_string()),
        host,
        sla: sla.is_set().then_some(*sla),
        targets: target_infos,
        plan: plan_json,
        workloads,
        // Set after the run, when `--verify-final` read everything back.
        final_verification: None,
    };
    crate::out!("{}", terminal::run_summary(&result));
    Outcome { result, run_id, error }
}
