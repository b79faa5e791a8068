//! Writing a run as it goes: runs, workloads, steps, every finished interval in one
//! transaction, the final verification pass.

use super::*;

/// A new run's description.
#[derive(Debug, Clone, Default)]
pub struct NewRun {
    pub label: String,
    pub plan_name: String,
    pub started_at: String,
    pub tool_version: String,
    pub hostname: String,
    pub backend: String,
    pub targets: String,
    pub host_json: String,
    pub targets_json: String,
    pub plan_json: String,
}

impl Store {
    pub fn begin_run(&self, r: &NewRun) -> Result<i64> {
        // With the process that writes it (v21), for a later run to settle it should this one
        // end without doing so. In the same statement: a write of its own made the run's last
        // writes miss the room a full filesystem leaves them.
        // (A database the tests hold at an older schema has no column for it.)
        let owner = (self.schema_version()? >= 21).then(crate::owner::this_process);
        let x = match owner {
            Some(owner) => self.conn.execute(
                "INSERT INTO runs (label, plan_name, status, started_at, tool_version, hostname, backend, targets, host_json, targets_json, plan_json, owner)
                 VALUES (?1, ?2, 'running', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                params![r.label, r.plan_name, r.started_at, r.tool_version, r.hostname, r.backend, r.targets, r.host_json, r.targets_json, r.plan_json, owner],
            ),
            None => self.conn.execute(
                "INSERT INTO runs (label, plan_name, status, started_at, tool_version, hostname, backend, targets, host_json, targets_json, plan_json)
                 VALUES (?1, ?2, 'running', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![r.label, r.plan_name, r.started_at, r.tool_version, r.hostname, r.backend, r.targets, r.host_json, r.targets_json, r.plan_json],
            ),
        };
        self.sql(x)?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Settles the runs still marked `running` whose process on this host is gone (killed, or
    /// ended while the database could take none of its last writes): `interrupted`, with the
    /// reason. Returns their ids. Runs of other hosts are left as they are.
    pub fn settle_abandoned(&self) -> Result<Vec<i64>> {
        let rows: rusqlite::Result<Vec<(i64, String)>> = (|| {
            let mut q =
                self.conn.prepare("SELECT id, owner FROM runs WHERE status = 'running' AND owner IS NOT NULL")?;
            let rows = q.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect()
        })();
        let mut settled = Vec::new();
        for (id, owner) in self.sql(rows)? {
            if crate::owner::is_gone(&owner) {
                self.set_status(
                    id,
                    "interrupted",
                    Some("its process ended without settling the run (killed, or the database could take none of its last writes); settled by a later run"),
                )?;
                settled.push(id);
            }
        }
        Ok(settled)
    }

    /// Replaces the run's `host` (JSON): a host lost mid-run is marked in it when it is lost, so
    /// that a run killed later still says so.
    pub fn set_host_json(&self, run_id: i64, host_json: &str) -> Result<()> {
        let x = self.conn.execute("UPDATE runs SET host_json = ?2 WHERE id = ?1", params![run_id, host_json]);
        self.sql(x).map(drop)
    }

    /// The run's notes on a workload (newline-separated), once it finished.
    pub fn set_workload_notes(&self, workload_id: i64, notes: &str) -> Result<()> {
        let x = self.conn.execute("UPDATE workloads SET notes = ?2 WHERE id = ?1", params![workload_id, notes]);
        self.sql(x).map(drop)
    }

    /// Records a workload's data check (JSON rows), measured before its first step.
    pub fn set_data_check(&self, workload_id: i64, json: &str) -> Result<()> {
        let x = self.conn.execute("UPDATE workloads SET data_check = ?2 WHERE id = ?1", params![workload_id, json]);
        self.sql(x).map(drop)
    }

    pub fn begin_workload(&self, run_id: i64, idx: usize, name: &str, workload_json: &str) -> Result<i64> {
        let x = self.conn.execute(
            "INSERT INTO workloads (run_id, idx, name, workload_json) VALUES (?1, ?2, ?3, ?4)",
            params![run_id, idx as i64, name, workload_json],
        );
        self.sql(x)?;
        Ok(self.conn.last_insert_rowid())
    }

    pub fn begin_step(&self, workload_id: i64, idx: usize, rec: &StepRecord) -> Result<i64> {
        let x = self.conn.execute(
            "INSERT INTO steps (workload_id, idx, workers, queue_depth, threads, interval_s, sample_s, hosts, rate_iops, measured_from_unix_ns, planned_hosts, outstanding, replay_speed, replay_intended) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            params![
                workload_id,
                idx as i64,
                rec.workers,
                rec.queue_depth,
                rec.threads as i64,
                rec.interval_s,
                rec.sample_s,
                rec.hosts,
                rec.rate_iops,
                rec.measured_from_unix_ns,
                rec.planned_hosts.max(rec.hosts),
                rec.outstanding.map(|n| n as i64),
                rec.replay_speed,
                rec.replay_speed.map(|_| {
                    let counts: Vec<String> = rec.replay_intended.iter().map(u64::to_string).collect();
                    format!("{};{}", rec.replay_bin_s, counts.join(","))
                })
            ],
        );
        self.sql(x)?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Records that host number `host` of a multi-host step started, with its I/O threads and
    /// the workers it runs (uneven hosts run their own share).
    pub fn add_step_host(
        &self,
        step_id: i64,
        host: u32,
        address: &str,
        hostname: &str,
        started_unix_ns: i64,
        (threads, workers): (usize, u32),
    ) -> Result<()> {
        let x = self.conn.execute(
            "INSERT INTO step_hosts (step_id, host, address, hostname, started_unix_ns, threads, workers) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![step_id, host, address, hostname, started_unix_ns, threads as i64, workers],
        );
        self.sql(x).map(drop)
    }

    /// Stores one finished interval in a single transaction: durable before this returns.
    /// `host` is None for the step's own (merged) interval, else the host it is the part of.
    pub fn add_interval(
        &mut self,
        step_id: i64,
        host: Option<u32>,
        idx: u32,
        stats: &IntervalStats,
        cpu: &CpuUsage,
        duration_s: f64,
    ) -> Result<()> {
        let path = self.path.clone();
        let wrap = |source| StoreError::Sql { path: path.clone(), source };
        let tx = self.conn.transaction().map_err(wrap)?;
        tx.execute(
            "INSERT INTO intervals (step_id, idx, duration_s, read_ops, read_bytes, write_ops, write_bytes, read_hist, write_hist, cpu_user, cpu_system, cpu_iowait, max_gap_ns, faults_injected,
                                    verify_checked, verify_lost, verify_corrupt, verify_misplaced, verify_examples, host, lat_mean_ns)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)",
            params![
                step_id, idx, duration_s,
                stats.read.ops as i64, stats.read.bytes as i64, stats.write.ops as i64, stats.write.bytes as i64,
                stats.read.hist.to_compressed_bytes(), stats.write.hist.to_compressed_bytes(),
                cpu.user, cpu.system, cpu.iowait,
                stats.max_gap_ns.map(|g| g as i64), stats.faults_injected as i64,
                stats.verify.checked as i64, stats.verify.lost as i64, stats.verify.corrupt as i64,
                stats.verify.misplaced as i64, stats.verify.examples.join("\n"), host, stats.lat_mean_ns()
            ],
        )
        .map_err(wrap)?;
        let interval_id = tx.last_insert_rowid();
        // Steal and iocurve's own share (v25) where read: NULL says not known.
        if cpu.steal > 0.0 || cpu.own.is_some() {
            tx.execute(
                "UPDATE intervals SET cpu_steal = ?1, cpu_own = ?2 WHERE id = ?3",
                params![cpu.steal, cpu.own, interval_id],
            )
            .map_err(wrap)?;
        }
        // Each target's part, once: with the step's merged interval (a host's own interval is
        // a part of it, its targets among the step's).
        if host.is_none() && !stats.targets.is_empty() {
            crate::targets::add(&tx, interval_id, &stats.targets).map_err(wrap)?;
        }
        // Trims (v23) only where there are some: the columns' defaults say none.
        if stats.trim.ops > 0 || stats.trim.hist.count() > 0 {
            tx.execute(
                "UPDATE intervals SET trim_ops = ?1, trim_bytes = ?2, trim_hist = ?3 WHERE id = ?4",
                params![
                    stats.trim.ops as i64,
                    stats.trim.bytes as i64,
                    stats.trim.hist.to_compressed_bytes(),
                    interval_id
                ],
            )
            .map_err(wrap)?;
        }
        if let Some(r) = &stats.rate {
            tx.execute(
                "INSERT INTO interval_rates (interval_id, service_hist, lag_hist, due, dropped, backlog, overloaded) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    interval_id,
                    r.service.to_compressed_bytes(),
                    r.lag.to_compressed_bytes(),
                    r.due as i64,
                    r.dropped as i64,
                    r.backlog as i64,
                    r.overloaded
                ],
            )
            .map_err(wrap)?;
        }
        for (dir, errors) in
            [("read", &stats.read.errors), ("write", &stats.write.errors), ("trim", &stats.trim.errors)]
        {
            for &(target, errno, count) in &errors.0 {
                tx.execute(
                    "INSERT INTO interval_errors (interval_id, direction, errno, count, target) VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![interval_id, dir, errno, count as i64, target],
                )
                .map_err(wrap)?;
            }
        }
        {
            // The seconds' histograms (v28) only where there are some, as trims: the column's
            // NULL says none.
            let hists = host.is_none() && stats.seconds.seconds() > 0;
            let mut st = tx
                .prepare_cached(if hists {
                    "INSERT INTO samples (step_id, interval_idx, idx, ops, bytes, lat_sum_ns, lat_max_ns, errors, host, hist) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
                } else {
                    "INSERT INTO samples (step_id, interval_idx, idx, ops, bytes, lat_sum_ns, lat_max_ns, errors, host) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
                })
                .map_err(wrap)?;
            for (i, s) in stats.samples.iter().enumerate() {
                // The step's seconds only (v28): see the schema.
                let hist = Some(stats.seconds.get(i).encode()).filter(|b| !b.is_empty());
                st.execute(
                    params![
                        step_id,
                        idx,
                        i as i64,
                        s.ops as i64,
                        s.bytes as i64,
                        s.lat_sum_ns as i64,
                        s.lat_max_ns as i64,
                        s.errors as i64,
                        host
                    ]
                    .iter()
                    .copied()
                    .chain(hists.then_some(&hist as &dyn rusqlite::ToSql))
                    .collect::<Vec<_>>()
                    .as_slice(),
                )
                .map_err(wrap)?;
            }
        }
        tx.commit().map_err(wrap)
    }

    /// Marks a step finished, with its record's notes (see `StepRecord::notes`) and the hosts it
    /// lost.
    pub fn end_step(&self, step_id: i64, rec: &StepRecord) -> Result<()> {
        let text: Vec<String> =
            rec.notes.iter().map(|(c, m)| format!("{}\t{}", c, m.replace(['\n', '\t'], " "))).collect();
        let x = self.conn.execute(
            "UPDATE steps SET interrupted = ?1, notes = ?2, drain_late = ?3, drain_stuck = ?4, drain_stuck_age_ns = ?5, drain_wait_ns = ?6, unmeasured_errors = ?7, drain_faults = ?9, io_cpu_busiest = ?10, io_cpu_total = ?11, outstanding = ?12 WHERE id = ?8",
            params![
                rec.interrupted,
                text.join("\n"),
                rec.drain.late as i64,
                rec.drain.stuck as i64,
                rec.drain.stuck_age_ns as i64,
                rec.drain.wait_ns as i64,
                rec.unmeasured_errors.0.iter().map(|(t, e, n)| format!("{t}:{e}:{n}")).collect::<Vec<_>>().join("\n"),
                step_id,
                rec.drain.faults_injected as i64,
                rec.io_cpu.map(|c| c.busiest),
                rec.io_cpu.map(|c| c.total),
                rec.outstanding.map(|n| n as i64)
            ],
        );
        self.sql(x)?;
        for (i, h) in rec.per_host.iter().enumerate() {
            let x = self.conn.execute(
                "UPDATE step_hosts SET offset_ns = ?1, offset_rtt_ns = ?2, offset_after_ns = ?3, offset_after_rtt_ns = ?4 WHERE step_id = ?5 AND host = ?6",
                params![
                    h.clock.offset_ns,
                    h.clock.rtt_ns,
                    h.clock.offset_after_ns,
                    h.clock.rtt_after_ns,
                    step_id,
                    i as i64
                ],
            );
            self.sql(x)?;
            if let Some(at) = h.lost_at_s {
                let x = self.conn.execute(
                    "UPDATE step_hosts SET lost_at_s = ?1 WHERE step_id = ?2 AND host = ?3",
                    params![at, step_id, i as i64],
                );
                self.sql(x)?;
            }
        }
        Ok(())
    }

    /// Marks a run finished: `complete`, `interrupted` or `failed`, with its headlines (JSON:
    /// the maximum of every workload, for `iocurve runs`).
    pub fn finish_run(&self, run_id: i64, status: &str, finished_at: &str, headlines_json: &str) -> Result<()> {
        let x = self.with_room(|| {
            self.conn.execute(
                "UPDATE runs SET status = ?1, finished_at = ?2, headlines_json = ?3 WHERE id = ?4",
                params![status, finished_at, headlines_json, run_id],
            )
        });
        self.sql(x).map(drop)
    }

    /// Stores the headlines of a run that has none (stored before schema v12, or killed).
    pub fn set_headlines(&self, run_id: i64, headlines_json: &str) -> Result<()> {
        let x = self.conn.execute("UPDATE runs SET headlines_json = ?1 WHERE id = ?2", params![headlines_json, run_id]);
        self.sql(x).map(drop)
    }

    /// Sets a finished run's status and why it is not clean (None: it is).
    pub fn set_status(&self, run_id: i64, status: &str, reason: Option<&str>) -> Result<()> {
        let x = self.with_room(|| {
            self.conn.execute(
                "UPDATE runs SET status = ?1, status_reason = ?2 WHERE id = ?3",
                params![status, reason, run_id],
            )
        });
        self.sql(x).map(drop)
    }

    /// Stores a reclaim step of a run (`[[reclaim]]`): its result as the analysis wrote it (JSON;
    /// the store keeps it, it does not read it).
    pub fn add_reclaim(&mut self, run_id: i64, idx: u32, result_json: &str) -> Result<()> {
        let x = self.conn.execute(
            "INSERT INTO reclaims (run_id, idx, result_json) VALUES (?1, ?2, ?3)",
            params![run_id, idx, result_json],
        );
        self.sql(x).map(drop)
    }

    /// Stores a run's final verification pass with every listed problem, in one transaction.
    pub fn add_verification(
        &mut self,
        run_id: i64,
        v: &FinalVerification,
        problems: impl IntoIterator<Item = StoredProblem>,
    ) -> Result<()> {
        let path = self.path.clone();
        let wrap = |source| StoreError::Sql { path: path.clone(), source };
        let tx = self.conn.transaction().map_err(wrap)?;
        tx.execute(
            "INSERT OR REPLACE INTO run_verifications (run_id, map_path, bs, started_at, finished_at, checked, lost, corrupt, misplaced, unlisted, examples, unreadable)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            params![
                run_id,
                v.map,
                v.bs as i64,
                v.started_at,
                v.finished_at,
                v.counts.checked as i64,
                v.counts.lost as i64,
                v.counts.corrupt as i64,
                v.counts.misplaced as i64,
                v.unlisted as i64,
                v.counts.examples.join("\n"),
                v.counts.unreadable as i64
            ],
        )
        .map_err(wrap)?;
        {
            let mut st = tx
                .prepare_cached("INSERT INTO verify_problems (run_id, target, block, kind, expected, found_generation, found) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")
                .map_err(wrap)?;
            for p in problems {
                st.execute(params![run_id, p.target, p.block as i64, p.kind, p.expected, p.found_generation, p.found])
                    .map_err(wrap)?;
            }
        }
        tx.commit().map_err(wrap)
    }

    /// Deletes a run and everything stored for it.
    pub fn delete(&self, id: i64) -> Result<()> {
        self.run(id)?;
        let x = self.conn.execute("DELETE FROM runs WHERE id = ?1", [id]);
        self.sql(x).map(drop)
    }
}
