//! Reading stored runs back: the list, one run whole, its verification and problems.

use super::*;

/// What `runs` lists and a run's header shows.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    pub id: i64,
    pub label: String,
    pub plan_name: String,
    pub status: String,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub tool_version: String,
    pub hostname: String,
    pub backend: String,
    pub targets: String,
    /// The maximum of every workload, as JSON (`iocurve_analysis::Headline`, schema v12); None
    /// until the run ends, and for runs stored before v12 until they are listed once.
    pub headlines_json: Option<String>,
    /// Why a finished run is not clean (schema v9): a failure, or what its exit code 3 or 4
    /// stands for (e.g. problems its final verification found).
    pub status_reason: Option<String>,
}

/// One problem a final verification pass found.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredProblem {
    pub target: String,
    pub block: u64,
    /// `lost`, `corrupt` or `misplaced`.
    pub kind: String,
    /// The generation of the last acknowledged write.
    pub expected: u16,
    /// The (older) generation found, for a lost write with one.
    pub found_generation: Option<u16>,
    /// What the block holds, described.
    pub found: String,
}

/// A stored run, ready for the analysis.
#[derive(Debug, Clone)]
pub struct StoredRun {
    pub run: RunRow,
    pub host_json: String,
    pub targets_json: String,
    pub plan_json: String,
    /// The workloads in plan order.
    pub workloads: Vec<StoredWorkload>,
    /// The final verification pass, when the run had one (schema v9).
    pub verification: Option<FinalVerification>,
    /// Its reclaim steps' results, JSON, in order (schema v23).
    pub reclaims: Vec<String>,
    /// Its marks in time order (schema v26).
    pub marks: Vec<iocurve_stats::Mark>,
    /// The array's own figures imported beside it (schema v27).
    pub array: Vec<iocurve_stats::array::ArraySeries>,
}

#[derive(Debug, Clone)]
pub struct StoredWorkload {
    /// The resolved workload, as JSON.
    pub json: String,
    /// Its steps, with complete intervals only.
    pub steps: Vec<StepRecord>,
    /// Its data check (JSON rows; empty when none was measured).
    pub data_check: String,
    /// What the run noted on it beyond its figures (see `Store::set_workload_notes`).
    pub notes: Vec<String>,
}

/// The intervals of a step (`host` NULL) or of one of its hosts, in order; found through the
/// index `intervals_step_host` (schema v18).
pub(crate) const INTERVALS_OF: &str = "SELECT id, idx, duration_s, read_ops, read_bytes, write_ops, write_bytes, read_hist, write_hist, cpu_user, cpu_system, cpu_iowait, max_gap_ns, faults_injected,
        verify_checked, verify_lost, verify_corrupt, verify_misplaced, verify_examples, trim_ops, trim_bytes, trim_hist, cpu_steal, cpu_own
    FROM intervals WHERE step_id = ?1 AND host IS ?2 ORDER BY idx";

/// The figures of a step's intervals (or one host's), in order, without their histograms.
pub(crate) const FIGURES_OF: &str = "SELECT id, idx, duration_s, read_ops, read_bytes, write_ops, write_bytes, cpu_user, cpu_system, cpu_iowait, max_gap_ns, faults_injected, lat_mean_ns, trim_ops, trim_bytes, cpu_steal, cpu_own
    FROM intervals WHERE step_id = ?1 AND host IS ?2 ORDER BY idx";

/// The samples of one interval, in order; found through the index `samples_interval` (v18).
pub(crate) const SAMPLES_OF: &str = "SELECT ops, bytes, lat_sum_ns, lat_max_ns, errors, hist FROM samples WHERE step_id = ?1 AND interval_idx = ?2 AND host IS ?3 ORDER BY idx";

impl Store {
    /// A run's final verification pass, if it had one.
    /// The reclaim steps of a run, in order: each one's result JSON as stored.
    pub fn reclaims(&self, run_id: i64) -> Result<Vec<String>> {
        let mut st = self.sql(self.conn.prepare("SELECT result_json FROM reclaims WHERE run_id = ?1 ORDER BY idx"))?;
        let rows = st.query_map([run_id], |r| r.get::<_, String>(0));
        self.sql(rows.and_then(|m| m.collect()))
    }

    pub fn verification(&self, run_id: i64) -> Result<Option<FinalVerification>> {
        let r = self
            .conn
            .query_row(
                "SELECT map_path, bs, started_at, finished_at, checked, lost, corrupt, misplaced, unlisted, examples, unreadable
                 FROM run_verifications WHERE run_id = ?1",
                [run_id],
                |r| {
                    let examples: String = r.get(9)?;
                    Ok(FinalVerification {
                        map: r.get(0)?,
                        bs: r.get::<_, i64>(1)? as u64,
                        started_at: r.get(2)?,
                        finished_at: r.get(3)?,
                        counts: VerifyCounts {
                            checked: r.get::<_, i64>(4)? as u64,
                            lost: r.get::<_, i64>(5)? as u64,
                            corrupt: r.get::<_, i64>(6)? as u64,
                            misplaced: r.get::<_, i64>(7)? as u64,
                            unreadable: r.get::<_, i64>(10)? as u64,
                            examples: examples.lines().map(str::to_string).collect(),
                            // Only `iocurve verify` after a crash meets blocks in flight.
                            in_flight: 0,
                        },
                        unlisted: r.get::<_, i64>(8)? as u64,
                    })
                },
            )
            .optional();
        self.sql(r)
    }

    /// Hands every listed problem of a run's final verification to `each`, in the order found.
    pub fn verify_problems(&self, run_id: i64, mut each: impl FnMut(StoredProblem)) -> Result<()> {
        let mut st = self.sql(self.conn.prepare(
            "SELECT target, block, kind, expected, found_generation, found FROM verify_problems WHERE run_id = ?1 ORDER BY rowid",
        ))?;
        let rows = st.query_map([run_id], |r| {
            Ok(StoredProblem {
                target: r.get(0)?,
                block: r.get::<_, i64>(1)? as u64,
                kind: r.get(2)?,
                expected: r.get(3)?,
                found_generation: r.get(4)?,
                found: r.get(5)?,
            })
        });
        for p in self.sql(rows)? {
            each(self.sql(p)?);
        }
        Ok(())
    }

    fn row(r: &rusqlite::Row) -> rusqlite::Result<RunRow> {
        Ok(RunRow {
            id: r.get(0)?,
            label: r.get(1)?,
            plan_name: r.get(2)?,
            status: r.get(3)?,
            started_at: r.get(4)?,
            finished_at: r.get(5)?,
            tool_version: r.get(6)?,
            hostname: r.get(7)?,
            backend: r.get(8)?,
            targets: r.get(9)?,
            headlines_json: r.get(10)?,
            status_reason: r.get(11)?,
        })
    }

    const RUN_COLUMNS: &str = "id, label, plan_name, status, started_at, finished_at, tool_version, hostname, backend, targets, headlines_json, status_reason";

    pub fn runs(&self) -> Result<Vec<RunRow>> {
        let sql = format!("SELECT {} FROM runs ORDER BY id", Self::RUN_COLUMNS);
        let mut st = self.sql(self.conn.prepare(&sql))?;
        let rows = self.sql(st.query_map([], Self::row))?;
        rows.map(|r| self.sql(r)).collect()
    }

    pub fn run(&self, id: i64) -> Result<RunRow> {
        let sql = format!("SELECT {} FROM runs WHERE id = ?1", Self::RUN_COLUMNS);
        let r = self.conn.query_row(&sql, [id], Self::row).optional();
        self.sql(r)?.ok_or(StoreError::NoSuchRun(id))
    }

    /// Loads a run with every complete interval, rebuilt as the engine handed them over.
    pub fn load(&self, id: i64) -> Result<StoredRun> {
        let run = self.run(id)?;
        let r = self.conn.query_row("SELECT host_json, targets_json, plan_json FROM runs WHERE id = ?1", [id], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?))
        });
        let (host_json, targets_json, plan_json) = self.sql(r)?;
        let mut workloads = Vec::new();
        let mut st = self.sql(self.conn.prepare(
            "SELECT id, workload_json, data_check, notes FROM workloads WHERE run_id = ?1 ORDER BY idx, id",
        ))?;
        let wl: Vec<(i64, String, String, String)> = self
            .sql(st.query_map([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))).and_then(|m| m.collect()))?;
        for (wid, json, data_check, notes) in wl {
            let notes = notes.lines().map(str::to_string).collect();
            workloads.push(StoredWorkload { json, steps: self.load_steps(wid)?, data_check, notes });
        }
        let verification = self.verification(id)?;
        let reclaims = self.reclaims(id)?;
        let marks = self.marks(id)?;
        let array = self.array(id)?;
        Ok(StoredRun { run, host_json, targets_json, plan_json, workloads, verification, reclaims, marks, array })
    }

    fn load_steps(&self, workload_id: i64) -> Result<Vec<StepRecord>> {
        let mut st = self.sql(self.conn.prepare(
            "SELECT id, workers, queue_depth, threads, interval_s, sample_s, interrupted, hosts, notes,
                    drain_late, drain_stuck, drain_stuck_age_ns, drain_wait_ns, unmeasured_errors, rate_iops, drain_faults, measured_from_unix_ns, io_cpu_busiest, io_cpu_total, COALESCE(planned_hosts, hosts), outstanding, replay_speed, replay_intended FROM steps WHERE workload_id = ?1 ORDER BY idx",
        ))?;
        let rows = st.query_map([workload_id], |r| {
            let mut rec = StepRecord::new(r.get(1)?, r.get(2)?, r.get::<_, i64>(3)? as usize, r.get(4)?, r.get(5)?);
            rec.hosts = r.get(7)?;
            rec.planned_hosts = r.get(19)?;
            rec.outstanding = r.get::<_, Option<i64>>(20)?.map(|n| n as u64);
            rec.rate_iops = r.get(14)?;
            rec.replay_speed = r.get(21)?;
            // (A number unreadable: left out of the intended line, not a run that cannot be read.)
            if let Some((bin, counts)) = r.get::<_, Option<String>>(22)?.as_deref().and_then(|t| t.split_once(';')) {
                rec.replay_bin_s = bin.parse().unwrap_or(0.1);
                rec.replay_intended = counts.split(',').filter_map(|n| n.trim().parse().ok()).collect();
            }
            rec.measured_from_unix_ns = r.get(16)?;
            if let (Some(busiest), Some(total)) = (r.get::<_, Option<f64>>(17)?, r.get::<_, Option<f64>>(18)?) {
                rec.io_cpu = Some(iocurve_stats::IoCpu { busiest, total });
            }
            let notes: String = r.get(8)?;
            rec.notes =
                notes.lines().filter_map(|l| l.split_once('\t').map(|(c, m)| (c.to_string(), m.to_string()))).collect();
            rec.drain = iocurve_stats::Drain {
                late: r.get::<_, i64>(9)? as u64,
                stuck: r.get::<_, i64>(10)? as u64,
                stuck_age_ns: r.get::<_, i64>(11)? as u64,
                wait_ns: r.get::<_, i64>(12)? as u64,
                faults_injected: r.get::<_, i64>(15)? as u64,
            };
            for line in r.get::<_, String>(13)?.lines() {
                let mut f = line.split(':').map(|x| x.parse::<i64>());
                if let (Some(Ok(t)), Some(Ok(e)), Some(Ok(n))) = (f.next(), f.next(), f.next()) {
                    rec.unmeasured_errors.add(t as u32, e as i32, n as u64);
                }
            }
            Ok((r.get::<_, i64>(0)?, rec, r.get::<_, Option<bool>>(6)?))
        });
        let rows: Vec<_> = self.sql(rows.and_then(|m| m.collect::<rusqlite::Result<Vec<_>>>()))?;
        let mut steps = Vec::new();
        for (step_id, mut rec, interrupted) in rows {
            self.each_interval(step_id, None, |stats, cpu, duration_s| rec.push_interval(stats, cpu, duration_s))?;
            // A step still marked running was cut off (killed run): only its finished intervals count.
            rec.interrupted = interrupted.unwrap_or(true);
            rec.per_host = self.load_hosts(step_id, &rec)?;
            if !rec.intervals.is_empty() {
                steps.push(rec);
            }
        }
        Ok(steps)
    }

    /// The hosts of a multi-host step, each with its own intervals.
    fn load_hosts(&self, step_id: i64, step: &StepRecord) -> Result<Vec<HostRecord>> {
        let mut st = self.sql(self.conn.prepare(
            "SELECT host, address, hostname, started_unix_ns, threads, lost_at_s, offset_ns, offset_rtt_ns, offset_after_ns, offset_after_rtt_ns, workers FROM step_hosts WHERE step_id = ?1 ORDER BY host",
        ))?;
        let rows = st.query_map([step_id], |r| {
            Ok((
                r.get::<_, u32>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, Option<f64>>(5)?,
                HostClock {
                    offset_ns: r.get(6)?,
                    rtt_ns: r.get(7)?,
                    offset_after_ns: r.get(8)?,
                    rtt_after_ns: r.get(9)?,
                },
                r.get::<_, Option<u32>>(10)?,
            ))
        });
        let rows: Vec<_> = self.sql(rows.and_then(|m| m.collect::<rusqlite::Result<Vec<_>>>()))?;
        let mut hosts = Vec::new();
        for (host, address, hostname, started_unix_ns, threads, lost_at_s, clock, workers) in rows {
            // Stored before hosts had their own (v24): the step's.
            let workers = workers.unwrap_or(step.workers);
            let mut record =
                StepRecord::new(workers, step.queue_depth, threads as usize, step.interval_s, step.sample_s);
            record.rate_iops = step.rate_iops;
            record.replay_speed = step.replay_speed;
            self.each_interval(step_id, Some(host), |stats, cpu, duration_s| {
                record.push_interval(stats, cpu, duration_s)
            })?;
            record.interrupted = step.interrupted || lost_at_s.is_some();
            hosts.push(HostRecord { address, hostname, started_unix_ns, lost_at_s, clock, record });
        }
        Ok(hosts)
    }

    /// The intervals of a step the database stopped taking (full, gone read-only) mid-step:
    /// those it holds, however many were measured (`measured` becomes their count).
    pub fn fill_stored_intervals(&self, step_id: i64, rec: &mut StepRecord) -> Result<()> {
        let read = |host: Option<u32>| -> Result<Vec<IntervalRecord>> {
            let mut list = Vec::new();
            self.each_figures(step_id, host, |r| list.push(r))?;
            Ok(list)
        };
        rec.intervals = read(None)?;
        rec.measured = rec.intervals.len();
        for (h, host) in rec.per_host.iter_mut().enumerate() {
            host.record.intervals = read(Some(h as u32))?;
            host.record.measured = host.record.intervals.len();
        }
        Ok(())
    }

    /// Gives a live step the intervals it counted but did not hold
    /// ([`StepRecord::count_interval`]): its own and each of its hosts' figures, as stored. Its
    /// totals it holds already.
    pub fn fill_intervals(&self, step_id: i64, rec: &mut StepRecord) -> Result<()> {
        let read = |host: Option<u32>, measured: usize| -> Result<Vec<IntervalRecord>> {
            let mut list = Vec::with_capacity(measured);
            self.each_figures(step_id, host, |r| list.push(r))?;
            if list.len() != measured {
                let who = host.map_or(String::new(), |h| format!(" host {h}"));
                return Err(StoreError::Invalid {
                    path: self.path.clone(),
                    message: format!("step {step_id}{who}: {} intervals stored, {measured} measured", list.len()),
                });
            }
            Ok(list)
        };
        rec.intervals = read(None, rec.measured)?;
        for (h, host) in rec.per_host.iter_mut().enumerate() {
            host.record.intervals = read(Some(h as u32), host.record.measured)?;
        }
        Ok(())
    }

    /// Hands the figures of a step's intervals (`host` None) or of one of its hosts' to `each`, in
    /// order, as [`IntervalRecord::of`] makes them: from their columns and samples, without a
    /// histogram decoded (only a row stored before v18, which has no mean latency, needs its
    /// histograms).
    fn each_figures(&self, step_id: i64, host: Option<u32>, mut each: impl FnMut(IntervalRecord)) -> Result<()> {
        let mut st = self.sql(self.conn.prepare(FIGURES_OF))?;
        let mut rows = self.sql(st.query(params![step_id, host]))?;
        while let Some(r) = self.sql(rows.next())? {
            let row = |r: &rusqlite::Row| -> rusqlite::Result<_> {
                let rec = IntervalRecord {
                    ops: (r.get::<_, i64>(3)? + r.get::<_, i64>(5)? + r.get::<_, i64>(13)?) as u64,
                    // A trim moves no data: MB/s are of reads and writes (of the bytes trimmed in
                    // an interval of trims alone), as `IntervalStats::bytes`.
                    bytes: match (r.get::<_, i64>(3)? + r.get::<_, i64>(5)?, r.get::<_, i64>(4)? + r.get::<_, i64>(6)?)
                    {
                        (0, 0) => r.get::<_, i64>(14)?,
                        (_, moved) => moved,
                    } as u64,
                    lat_mean_ns: 0.0,
                    samples: Vec::new(),
                    seconds: Vec::new(),
                    cpu: CpuUsage {
                        user: r.get(7)?,
                        system: r.get(8)?,
                        iowait: r.get(9)?,
                        steal: r.get::<_, Option<f64>>(15)?.unwrap_or(0.0),
                        own: r.get(16)?,
                    },
                    duration_s: r.get(2)?,
                    max_gap_ns: r.get::<_, Option<i64>>(10)?.unwrap_or(0) as u64,
                    faults_injected: r.get::<_, i64>(11)? as u64,
                    targets: Vec::new(),
                    lag_p99_ns: None,
                };
                Ok((r.get::<_, i64>(0)?, r.get::<_, u32>(1)?, r.get::<_, Option<f64>>(12)?, rec))
            };
            let (interval_id, idx, mean, mut rec) = self.sql(row(r))?;
            rec.lat_mean_ns = match mean {
                Some(m) => m,
                None => {
                    let invalid = |m: String| StoreError::Invalid { path: self.path.clone(), message: m };
                    let hists = self.conn.query_row(
                        "SELECT read_hist, write_hist, trim_hist FROM intervals WHERE id = ?1",
                        [interval_id],
                        |r| Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, Vec<u8>>(1)?, r.get::<_, Option<Vec<u8>>>(2)?)),
                    );
                    let (rh, wh, th) = self.sql(hists)?;
                    let mut stats = IntervalStats::empty();
                    stats.read.hist = LatencyHistogram::from_bytes(&rh).map_err(invalid)?;
                    stats.write.hist = LatencyHistogram::from_bytes(&wh).map_err(invalid)?;
                    if let Some(th) = th {
                        stats.trim.hist = LatencyHistogram::from_bytes(&th).map_err(invalid)?;
                    }
                    stats.lat_mean_ns()
                }
            };
            (rec.samples, rec.seconds) = self.samples_of(step_id, idx, host)?;
            rec.lag_p99_ns = self.lag_p99(interval_id)?;
            if host.is_none() {
                rec.targets = self.sql(crate::targets::figures_of(&self.conn, interval_id, &rec.samples))?;
            }
            each(rec);
        }
        Ok(())
    }

    /// A rate step's interval: its p99 lag (None: a closed-loop step's).
    fn lag_p99(&self, interval_id: i64) -> Result<Option<u64>> {
        let mut st =
            self.sql(self.conn.prepare_cached("SELECT lag_hist FROM interval_rates WHERE interval_id = ?1"))?;
        let lag: Option<Vec<u8>> = self.sql(st.query_row([interval_id], |r| r.get(0)).optional())?;
        let invalid = |m: String| StoreError::Invalid { path: self.path.clone(), message: m };
        lag.map(|b| LatencyHistogram::from_bytes(&b).map(|h| h.percentile_ns(99.0)).map_err(invalid)).transpose()
    }

    /// The samples of one interval of a step (`host` None) or of one of its hosts, in order.
    /// With them each one's latency histogram (v28): none where none was stored.
    fn samples_of(&self, step_id: i64, idx: u32, host: Option<u32>) -> Result<(Vec<Sample>, Vec<SecondHist>)> {
        let mut ss = self.sql(self.conn.prepare_cached(SAMPLES_OF))?;
        let samples = ss.query_map(params![step_id, idx, host], |r| {
            let s = Sample {
                ops: r.get::<_, i64>(0)? as u64,
                bytes: r.get::<_, i64>(1)? as u64,
                lat_sum_ns: r.get::<_, i64>(2)? as u64,
                lat_max_ns: r.get::<_, i64>(3)? as u64,
                errors: r.get::<_, i64>(4)? as u64,
            };
            Ok((s, r.get::<_, Option<Vec<u8>>>(5)?))
        });
        let rows: Vec<(Sample, Option<Vec<u8>>)> = self.sql(samples.and_then(|m| m.collect()))?;
        let invalid = |m: String| StoreError::Invalid {
            path: self.path.clone(),
            message: format!("step {step_id}, interval {idx}: {m}"),
        };
        let mut hists = Vec::new();
        if rows.iter().any(|(_, h)| h.is_some()) {
            for (_, h) in &rows {
                hists.push(SecondHist::decode(h.as_deref().unwrap_or_default()).map_err(invalid)?);
            }
        }
        let samples: Vec<Sample> = rows.into_iter().map(|(s, _)| s).collect();
        iocurve_stats::seconds::check(&samples, &hists).map_err(invalid)?;
        Ok((samples, hists))
    }

    /// Hands the intervals of a step (`host` None) or of one of its hosts to `each`, in order, as
    /// the engine handed them over: one at a time, so that reading a long step back holds one
    /// interval's histograms, not all of them (at 1 s intervals, an hour's would be 1.5 GB).
    fn each_interval(
        &self,
        step_id: i64,
        host: Option<u32>,
        mut each: impl FnMut(IntervalStats, CpuUsage, f64),
    ) -> Result<()> {
        let invalid = |m: String| StoreError::Invalid { path: self.path.clone(), message: m };
        let mut st = self.sql(self.conn.prepare(INTERVALS_OF))?;
        let mut rows = self.sql(st.query(params![step_id, host]))?;
        let row = |r: &rusqlite::Row| -> rusqlite::Result<_> {
            let mut stats = IntervalStats::empty();
            stats.read.ops = r.get::<_, i64>(3)? as u64;
            stats.read.bytes = r.get::<_, i64>(4)? as u64;
            stats.write.ops = r.get::<_, i64>(5)? as u64;
            stats.write.bytes = r.get::<_, i64>(6)? as u64;
            stats.max_gap_ns = r.get::<_, Option<i64>>(12)?.map(|g| g as u64);
            stats.faults_injected = r.get::<_, i64>(13)? as u64;
            stats.verify.checked = r.get::<_, i64>(14)? as u64;
            stats.verify.lost = r.get::<_, i64>(15)? as u64;
            stats.verify.corrupt = r.get::<_, i64>(16)? as u64;
            stats.verify.misplaced = r.get::<_, i64>(17)? as u64;
            let examples: String = r.get(18)?;
            stats.verify.examples = examples.lines().map(str::to_string).collect();
            stats.trim.ops = r.get::<_, i64>(19)? as u64;
            stats.trim.bytes = r.get::<_, i64>(20)? as u64;
            let cpu = CpuUsage {
                user: r.get(9)?,
                system: r.get(10)?,
                iowait: r.get(11)?,
                steal: r.get::<_, Option<f64>>(22)?.unwrap_or(0.0),
                own: r.get(23)?,
            };
            let hists: (Vec<u8>, Vec<u8>, Option<Vec<u8>>) = (r.get(7)?, r.get(8)?, r.get(21)?);
            Ok((r.get::<_, i64>(0)?, r.get::<_, u32>(1)?, r.get::<_, f64>(2)?, stats, cpu, hists))
        };
        while let Some(r) = self.sql(rows.next())? {
            let (interval_id, idx, duration_s, mut stats, cpu, (rh, wh, th)) = self.sql(row(r))?;
            stats.read.hist = LatencyHistogram::from_bytes(&rh).map_err(invalid)?;
            stats.write.hist = LatencyHistogram::from_bytes(&wh).map_err(invalid)?;
            if let Some(th) = th {
                stats.trim.hist = LatencyHistogram::from_bytes(&th).map_err(invalid)?;
            }
            let mut rs = self.sql(self.conn.prepare_cached(
                "SELECT service_hist, lag_hist, due, dropped, backlog, overloaded FROM interval_rates WHERE interval_id = ?1",
            ))?;
            let rate = rs
                .query_row([interval_id], |r| {
                    Ok((
                        r.get::<_, Vec<u8>>(0)?,
                        r.get::<_, Vec<u8>>(1)?,
                        r.get::<_, i64>(2)? as u64,
                        r.get::<_, i64>(3)? as u64,
                        r.get::<_, i64>(4)? as u64,
                        r.get::<_, bool>(5)?,
                    ))
                })
                .optional();
            if let Some((service, lag, due, dropped, backlog, overloaded)) = self.sql(rate)? {
                stats.rate = Some(Box::new(iocurve_stats::RateStats {
                    service: LatencyHistogram::from_bytes(&service).map_err(invalid)?,
                    lag: LatencyHistogram::from_bytes(&lag).map_err(invalid)?,
                    due,
                    dropped,
                    backlog,
                    overloaded,
                }));
            }
            let mut es = self.sql(self.conn.prepare_cached(
                "SELECT direction, errno, count, target FROM interval_errors WHERE interval_id = ?1",
            ))?;
            let errs = es.query_map([interval_id], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, i32>(1)?, r.get::<_, i64>(2)?, r.get::<_, Option<u32>>(3)?))
            });
            for (dir, errno, count, target) in self.sql(errs.and_then(|m| m.collect::<rusqlite::Result<Vec<_>>>()))? {
                let counts: &mut ErrorCounts = match dir.as_str() {
                    "write" => &mut stats.write.errors,
                    "trim" => &mut stats.trim.errors,
                    _ => &mut stats.read.errors,
                };
                counts.add(target.unwrap_or(UNKNOWN_TARGET), errno, count as u64);
            }
            let (samples, seconds) = self.samples_of(step_id, idx, host)?;
            if !seconds.is_empty() {
                stats.seconds = iocurve_stats::SecondHists::from_sparse(&seconds, samples.len());
            }
            stats.samples = samples;
            if host.is_none() {
                stats.targets = crate::targets::of_interval(&self.conn, interval_id, &stats).map_err(invalid)?;
            }
            each(stats, cpu, duration_s);
        }
        Ok(())
    }
}
