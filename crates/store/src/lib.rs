//! The results database: one SQLite file (default `./iocurve.db`) holding every run, written as
//! the run goes. Each finished interval — its latency histograms, counters, errors, host CPU and
//! samples — is committed in one transaction, so a run killed with SIGKILL keeps every finished
//! interval and shows as incomplete (`status = 'running'` with no `finished_at`).
//!
//! The schema is plain SQL (see `SCHEMA_V1` and the README) so that pandas or the sqlite3 shell
//! can query it; histograms are HdrHistogram V2 blobs. Versions are tracked with
//! `PRAGMA user_version` and migrated forward on open. The store never formats or analyses.

use std::path::Path;

use iocurve_stats::{
    CpuUsage, ErrorCounts, HostRecord, IntervalStats, LatencyHistogram, Sample, StepRecord, UNKNOWN_TARGET,
};
use rusqlite::{Connection, OptionalExtension, params};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("results database {path}: {source}")]
    Sql { path: String, source: rusqlite::Error },
    #[error("results database {path}: {message}")]
    Invalid { path: String, message: String },
    #[error("no run {0} in the results database (see `iocurve runs`)")]
    NoSuchRun(i64),
}

type Result<T> = std::result::Result<T, StoreError>;

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::DatabaseBusy) | Some(rusqlite::ErrorCode::DatabaseLocked))
}

/// Schema migrations, in order; `PRAGMA user_version` counts how many are applied.
const MIGRATIONS: &[&str] =
    &[SCHEMA_V1, SCHEMA_V2, SCHEMA_V3, SCHEMA_V4, SCHEMA_V5, SCHEMA_V6, SCHEMA_V7, SCHEMA_V8, SCHEMA_V9, SCHEMA_V10];

/// v10: what became of the I/Os a step still had outstanding when it stopped issuing: completed
/// late, or given up as stuck (see `iocurve_stats::Drain`).
const SCHEMA_V10: &str = "
ALTER TABLE steps ADD COLUMN drain_late INTEGER NOT NULL DEFAULT 0;
ALTER TABLE steps ADD COLUMN drain_stuck INTEGER NOT NULL DEFAULT 0;
ALTER TABLE steps ADD COLUMN drain_stuck_age_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE steps ADD COLUMN drain_wait_ns INTEGER NOT NULL DEFAULT 0;
-- errors of I/Os completed outside the measured intervals (warm-up, after the stop):
-- target:errno:count per line
ALTER TABLE steps ADD COLUMN unmeasured_errors TEXT NOT NULL DEFAULT '';
";

/// v9: the final verification pass of a run (`--verify-final`) with every problem it found,
/// and why a finished run is not clean (`status_reason`).
const SCHEMA_V9: &str = "
ALTER TABLE runs ADD COLUMN status_reason TEXT;  -- NULL when clean
CREATE TABLE run_verifications (
    run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    map_path TEXT NOT NULL,
    bs INTEGER NOT NULL,                  -- the map's block size
    started_at TEXT NOT NULL,             -- RFC 3339 UTC
    finished_at TEXT NOT NULL,
    checked INTEGER NOT NULL,             -- blocks read back and checked
    lost INTEGER NOT NULL,
    corrupt INTEGER NOT NULL,
    misplaced INTEGER NOT NULL,
    unlisted INTEGER NOT NULL,            -- problems beyond the listed ones (a cap bounds memory)
    examples TEXT NOT NULL                -- the first problems, described, newline-separated
);
CREATE TABLE verify_problems (
    run_id INTEGER NOT NULL REFERENCES run_verifications(run_id) ON DELETE CASCADE,
    target TEXT NOT NULL,                 -- path
    block INTEGER NOT NULL,               -- block number (offset = block x block size)
    kind TEXT NOT NULL,                   -- lost | corrupt | misplaced
    expected INTEGER NOT NULL,            -- generation of the last acknowledged write
    found_generation INTEGER,             -- generation found (lost writes with an older one)
    found TEXT NOT NULL                   -- what the block holds, described
);
CREATE INDEX verify_problems_run ON verify_problems(run_id);
";

/// v8: what an array makes of a writing workload's data (a JSON list of data-check rows).
const SCHEMA_V8: &str = "
ALTER TABLE workloads ADD COLUMN data_check TEXT NOT NULL DEFAULT '';
";

/// v7: per-host results of multi-host steps. A host's own intervals and samples sit beside the
/// step's merged ones, told apart by `host` (NULL = the step, merged over its hosts).
const SCHEMA_V7: &str = "
CREATE TABLE step_hosts (
    step_id INTEGER NOT NULL REFERENCES steps(id) ON DELETE CASCADE,
    host INTEGER NOT NULL,                -- 0, 1, ... within the step
    address TEXT NOT NULL,                -- the agent as given (host:port)
    hostname TEXT NOT NULL,
    started_unix_ns INTEGER NOT NULL,     -- its I/O start on the coordinator's clock
    threads INTEGER NOT NULL,
    lost_at_s REAL,                       -- seconds into the step when it was lost; NULL if not
    PRIMARY KEY (step_id, host)
);
ALTER TABLE intervals ADD COLUMN host INTEGER;  -- NULL: merged over the step's hosts
ALTER TABLE samples ADD COLUMN host INTEGER;
";

/// v6: multi-host steps record how many hosts ran them (workers are per host).
const SCHEMA_V6: &str = "
ALTER TABLE steps ADD COLUMN hosts INTEGER NOT NULL DEFAULT 1;
ALTER TABLE steps ADD COLUMN notes TEXT NOT NULL DEFAULT '';  -- code<TAB>message per line (e.g. host_lost)
";

/// v5: verification figures per interval.
const SCHEMA_V5: &str = "
ALTER TABLE intervals ADD COLUMN verify_checked INTEGER NOT NULL DEFAULT 0;
ALTER TABLE intervals ADD COLUMN verify_lost INTEGER NOT NULL DEFAULT 0;
ALTER TABLE intervals ADD COLUMN verify_corrupt INTEGER NOT NULL DEFAULT 0;
ALTER TABLE intervals ADD COLUMN verify_misplaced INTEGER NOT NULL DEFAULT 0;
ALTER TABLE intervals ADD COLUMN verify_examples TEXT NOT NULL DEFAULT '';  -- newline-separated
";

/// v4: running through faults — errors per target, the longest stall and injected faults per
/// interval. NULL in rows stored before.
const SCHEMA_V4: &str = "
ALTER TABLE interval_errors ADD COLUMN target INTEGER;   -- index into the run's targets
ALTER TABLE intervals ADD COLUMN max_gap_ns INTEGER;     -- longest time without a completion
ALTER TABLE intervals ADD COLUMN faults_injected INTEGER NOT NULL DEFAULT 0;
";

/// v3: preconditioning state per target, so that `iocurve precondition` resumes where it
/// stopped and runs know their targets were preconditioned.
const SCHEMA_V3: &str = "
CREATE TABLE preconditions (
    target TEXT NOT NULL,                 -- canonical path
    size INTEGER NOT NULL,                -- bytes preconditioned (the whole target)
    bs INTEGER NOT NULL,                  -- write size
    data_json TEXT NOT NULL,              -- the data pattern written
    state_json TEXT NOT NULL,             -- written chunks: {\"watermark\": N, \"above\": [...]}
    bytes_written INTEGER NOT NULL,       -- by every session together
    started_at TEXT NOT NULL,
    finished_at TEXT,                     -- NULL until every chunk is written
    PRIMARY KEY (target, size)
);
";

/// The preconditioning record of a target.
#[derive(Debug, Clone, PartialEq)]
pub struct Precondition {
    pub target: String,
    pub size: u64,
    pub bs: u64,
    pub data_json: String,
    pub state_json: String,
    pub bytes_written: u64,
    pub started_at: String,
    pub finished_at: Option<String>,
}

/// v2: the headline per workload, written when a run ends, so that `iocurve runs` lists
/// hundreds of runs without re-analysing each. NULL for runs stored before (or killed).
const SCHEMA_V2: &str = "
ALTER TABLE runs ADD COLUMN summary TEXT;     -- `name 123'456 IOPS @ 250 µs; ...` (maxima)
";

const SCHEMA_V1: &str = "
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    label TEXT NOT NULL DEFAULT '',
    plan_name TEXT NOT NULL,
    status TEXT NOT NULL,                 -- running (or killed) | complete | interrupted | failed
    started_at TEXT NOT NULL,             -- RFC 3339 UTC
    finished_at TEXT,
    tool_version TEXT NOT NULL,
    hostname TEXT NOT NULL,
    backend TEXT NOT NULL,
    targets TEXT NOT NULL,                -- comma-separated paths
    host_json TEXT NOT NULL,              -- the result document's `host`
    targets_json TEXT NOT NULL,           -- its `targets`
    plan_json TEXT NOT NULL               -- its `plan` (as resolved)
);
CREATE TABLE workloads (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,                 -- position in the plan
    name TEXT NOT NULL,
    workload_json TEXT NOT NULL           -- the resolved workload
);
CREATE TABLE steps (
    id INTEGER PRIMARY KEY,
    workload_id INTEGER NOT NULL REFERENCES workloads(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    workers INTEGER NOT NULL,             -- per host
    queue_depth INTEGER NOT NULL,
    threads INTEGER NOT NULL,
    interval_s REAL NOT NULL,
    sample_s REAL NOT NULL,
    interrupted INTEGER                   -- NULL while running
);
CREATE TABLE intervals (
    id INTEGER PRIMARY KEY,
    step_id INTEGER NOT NULL REFERENCES steps(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    duration_s REAL NOT NULL,
    read_ops INTEGER NOT NULL, read_bytes INTEGER NOT NULL,
    write_ops INTEGER NOT NULL, write_bytes INTEGER NOT NULL,
    read_hist BLOB NOT NULL,              -- latency in ns, HdrHistogram V2 encoding
    write_hist BLOB NOT NULL,
    cpu_user REAL NOT NULL, cpu_system REAL NOT NULL, cpu_iowait REAL NOT NULL
);
CREATE TABLE interval_errors (
    interval_id INTEGER NOT NULL REFERENCES intervals(id) ON DELETE CASCADE,
    direction TEXT NOT NULL,              -- read | write
    errno INTEGER NOT NULL,               -- 0 = short transfer
    count INTEGER NOT NULL
);
CREATE TABLE samples (
    step_id INTEGER NOT NULL REFERENCES steps(id) ON DELETE CASCADE,
    interval_idx INTEGER NOT NULL,
    idx INTEGER NOT NULL,                 -- sample within the interval
    ops INTEGER NOT NULL, bytes INTEGER NOT NULL,
    lat_sum_ns INTEGER NOT NULL, lat_max_ns INTEGER NOT NULL,
    errors INTEGER NOT NULL
);
CREATE INDEX workloads_run ON workloads(run_id);
CREATE INDEX steps_workload ON steps(workload_id);
CREATE INDEX intervals_step ON intervals(step_id);
CREATE INDEX samples_step ON samples(step_id);
CREATE INDEX errors_interval ON interval_errors(interval_id);
";

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
    /// The maximum per workload in the published form (schema v2); None until the run ends.
    pub summary: Option<String>,
    /// Why a finished run is not clean (schema v9): a failure, or what its exit code 3 or 4
    /// stands for (e.g. problems its final verification found).
    pub status_reason: Option<String>,
}

/// The final verification pass of a run (`--verify-final`, schema v9).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StoredVerification {
    pub map_path: String,
    pub bs: u64,
    pub started_at: String,
    pub finished_at: String,
    pub checked: u64,
    pub lost: u64,
    pub corrupt: u64,
    pub misplaced: u64,
    /// Problems found but not listed in `verify_problems` (beyond the cap that bounds memory).
    pub unlisted: u64,
    /// The first problems, described.
    pub examples: Vec<String>,
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
    pub verification: Option<StoredVerification>,
}

#[derive(Debug, Clone)]
pub struct StoredWorkload {
    /// The resolved workload, as JSON.
    pub json: String,
    /// Its steps, with complete intervals only.
    pub steps: Vec<StepRecord>,
    /// Its data check (JSON rows; empty when none was measured).
    pub data_check: String,
}

pub struct Store {
    conn: Connection,
    path: String,
}

impl Store {
    /// Opens (creating if needed) and migrates the database at `path`.
    pub fn open(path: &Path) -> Result<Store> {
        Self::open_at(path, MIGRATIONS.len())
    }

    /// Opens a results database that must exist already (read commands never create one).
    pub fn open_existing(path: &Path) -> Result<Store> {
        if !path.is_file() {
            return Err(StoreError::Invalid {
                path: path.display().to_string(),
                message: "no such results database (runs are stored where `iocurve run` ran, ./iocurve.db by default; give --db or IOCURVE_DB)".into(),
            });
        }
        Self::open(path)
    }

    /// Opens with the first `version` migrations applied (all but in migration tests).
    fn open_at(path: &Path, version: usize) -> Result<Store> {
        let p = path.display().to_string();
        // Busy errors that SQLite reports without waiting (switching to WAL, lock upgrades
        // while another process creates the schema) are retried for up to 30 s.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut pause = std::time::Duration::from_millis(5);
        loop {
            let conn = Connection::open(path).map_err(|source| StoreError::Sql { path: p.clone(), source })?;
            let mut store = Store { conn, path: p.clone() };
            match store.init(version) {
                Err(StoreError::Sql { source, .. }) if is_busy(&source) && std::time::Instant::now() < deadline => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(std::time::Duration::from_millis(200));
                }
                Err(e) => return Err(e),
                Ok(()) => return Ok(store),
            }
        }
    }

    fn sql<T>(&self, r: rusqlite::Result<T>) -> Result<T> {
        r.map_err(|source| StoreError::Sql { path: self.path.clone(), source })
    }

    fn init(&mut self, version: usize) -> Result<()> {
        // Processes that open one database at once wait for each other (creation, migration).
        let r = self.conn.execute_batch("PRAGMA busy_timeout = 30000;");
        self.sql(r)?;
        self.check_ours()?;
        // WAL: readers (`iocurve runs` in another terminal) never block the writing run.
        let r = self.conn.pragma_update(None, "journal_mode", "WAL");
        self.sql(r)?;
        // synchronous = NORMAL: in WAL mode a commit survives a killed process (what a killed
        // run needs) without an fsync per interval; those fsyncs would land on the storage
        // under test in the middle of the measurement when the database lives there. Only a
        // power loss can cost the last commits.
        let r = self
            .conn
            .execute_batch("PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 5000; PRAGMA synchronous = NORMAL;");
        self.sql(r)?;
        self.migrate(version)
    }

    /// Refuses a file that is not an iocurve database (another program's SQLite file, or no
    /// SQLite at all) before anything is changed in it.
    fn check_ours(&self) -> Result<()> {
        let invalid = |message: String| StoreError::Invalid { path: self.path.clone(), message };
        let not_ours =
            |e: rusqlite::Error| invalid(format!("is not an iocurve results database ({e}); give another --db"));
        // One read transaction: the version and the tables as one snapshot, never half of a
        // migration another process is applying.
        let snapshot = self.conn.unchecked_transaction().map_err(not_ours)?;
        let count = |sql: &str| snapshot.query_row(sql, [], |r| r.get::<_, i64>(0)).map_err(not_ours);
        let version = count("PRAGMA user_version")?;
        let tables = count("SELECT count(*) FROM sqlite_master WHERE type = 'table'")?;
        let has_runs = count("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'runs'")? > 0;
        if (version == 0 && tables > 0) || (version > 0 && !has_runs) {
            return Err(invalid(format!(
                "is an SQLite database of another program ({tables} tables, none of iocurve's); it was left untouched: give another --db"
            )));
        }
        Ok(())
    }

    /// Applies the migrations up to `target` (all of them normally; fewer in tests). Each runs
    /// in an immediate transaction that reads the version again, so processes creating one
    /// database at once apply every migration exactly once.
    fn migrate(&mut self, target: usize) -> Result<()> {
        let r = self.conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0));
        let version = self.sql(r)? as usize;
        if version > MIGRATIONS.len() {
            return Err(StoreError::Invalid {
                path: self.path.clone(),
                message: format!(
                    "schema version {version} is newer than this iocurve knows ({}): use a newer iocurve or another --db",
                    MIGRATIONS.len()
                ),
            });
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().take(target).skip(version) {
            let path = self.path.clone();
            let tx = self
                .conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(|source| StoreError::Sql { path: path.clone(), source })?;
            let now: i64 = tx
                .query_row("PRAGMA user_version", [], |r| r.get(0))
                .map_err(|source| StoreError::Sql { path: path.clone(), source })?;
            if now as usize > i {
                // Another process applied it meanwhile.
                continue;
            }
            tx.execute_batch(sql)
                .and_then(|_| tx.pragma_update(None, "user_version", (i + 1) as i64))
                .and_then(|_| tx.commit())
                .map_err(|source| StoreError::Sql { path, source })?;
        }
        Ok(())
    }

    pub fn schema_version(&self) -> Result<i64> {
        let r = self.conn.query_row("PRAGMA user_version", [], |r| r.get(0));
        self.sql(r)
    }

    pub fn begin_run(&self, r: &NewRun) -> Result<i64> {
        let x = self.conn.execute(
            "INSERT INTO runs (label, plan_name, status, started_at, tool_version, hostname, backend, targets, host_json, targets_json, plan_json)
             VALUES (?1, ?2, 'running', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![r.label, r.plan_name, r.started_at, r.tool_version, r.hostname, r.backend, r.targets, r.host_json, r.targets_json, r.plan_json],
        );
        self.sql(x)?;
        Ok(self.conn.last_insert_rowid())
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
            "INSERT INTO steps (workload_id, idx, workers, queue_depth, threads, interval_s, sample_s, hosts) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![workload_id, idx as i64, rec.workers, rec.queue_depth, rec.threads as i64, rec.interval_s, rec.sample_s, rec.hosts],
        );
        self.sql(x)?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Records that host number `host` of a multi-host step started.
    pub fn add_step_host(
        &self,
        step_id: i64,
        host: u32,
        address: &str,
        hostname: &str,
        started_unix_ns: i64,
        threads: usize,
    ) -> Result<()> {
        let x = self.conn.execute(
            "INSERT INTO step_hosts (step_id, host, address, hostname, started_unix_ns, threads) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![step_id, host, address, hostname, started_unix_ns, threads as i64],
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
                                    verify_checked, verify_lost, verify_corrupt, verify_misplaced, verify_examples, host)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)",
            params![
                step_id, idx, duration_s,
                stats.read.ops as i64, stats.read.bytes as i64, stats.write.ops as i64, stats.write.bytes as i64,
                stats.read.hist.to_bytes(), stats.write.hist.to_bytes(),
                cpu.user, cpu.system, cpu.iowait,
                stats.max_gap_ns.map(|g| g as i64), stats.faults_injected as i64,
                stats.verify.checked as i64, stats.verify.lost as i64, stats.verify.corrupt as i64,
                stats.verify.misplaced as i64, stats.verify.examples.join("\n"), host
            ],
        )
        .map_err(wrap)?;
        let interval_id = tx.last_insert_rowid();
        for (dir, errors) in [("read", &stats.read.errors), ("write", &stats.write.errors)] {
            for &(target, errno, count) in &errors.0 {
                tx.execute(
                    "INSERT INTO interval_errors (interval_id, direction, errno, count, target) VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![interval_id, dir, errno, count as i64, target],
                )
                .map_err(wrap)?;
            }
        }
        {
            let mut st = tx
                .prepare_cached("INSERT INTO samples (step_id, interval_idx, idx, ops, bytes, lat_sum_ns, lat_max_ns, errors, host) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)")
                .map_err(wrap)?;
            for (i, s) in stats.samples.iter().enumerate() {
                st.execute(params![
                    step_id,
                    idx,
                    i as i64,
                    s.ops as i64,
                    s.bytes as i64,
                    s.lat_sum_ns as i64,
                    s.lat_max_ns as i64,
                    s.errors as i64,
                    host
                ])
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
            "UPDATE steps SET interrupted = ?1, notes = ?2, drain_late = ?3, drain_stuck = ?4, drain_stuck_age_ns = ?5, drain_wait_ns = ?6, unmeasured_errors = ?7 WHERE id = ?8",
            params![
                rec.interrupted,
                text.join("\n"),
                rec.drain.late as i64,
                rec.drain.stuck as i64,
                rec.drain.stuck_age_ns as i64,
                rec.drain.wait_ns as i64,
                rec.unmeasured_errors.0.iter().map(|(t, e, n)| format!("{t}:{e}:{n}")).collect::<Vec<_>>().join("\n"),
                step_id
            ],
        );
        self.sql(x)?;
        for (i, h) in rec.per_host.iter().enumerate() {
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

    /// Marks a run finished: `complete`, `interrupted` or `failed`, with its summary line.
    pub fn finish_run(&self, run_id: i64, status: &str, finished_at: &str, summary: &str) -> Result<()> {
        let x = self.conn.execute(
            "UPDATE runs SET status = ?1, finished_at = ?2, summary = ?3 WHERE id = ?4",
            params![status, finished_at, summary, run_id],
        );
        self.sql(x).map(drop)
    }

    /// Stores the summary line of a run stored before schema v2.
    pub fn set_summary(&self, run_id: i64, summary: &str) -> Result<()> {
        let x = self.conn.execute("UPDATE runs SET summary = ?1 WHERE id = ?2", params![summary, run_id]);
        self.sql(x).map(drop)
    }

    /// Sets a finished run's status and why it is not clean (None: it is).
    pub fn set_status(&self, run_id: i64, status: &str, reason: Option<&str>) -> Result<()> {
        let x = self
            .conn
            .execute("UPDATE runs SET status = ?1, status_reason = ?2 WHERE id = ?3", params![status, reason, run_id]);
        self.sql(x).map(drop)
    }

    /// Stores a run's final verification pass with every listed problem, in one transaction.
    pub fn add_verification(
        &mut self,
        run_id: i64,
        v: &StoredVerification,
        problems: impl IntoIterator<Item = StoredProblem>,
    ) -> Result<()> {
        let path = self.path.clone();
        let wrap = |source| StoreError::Sql { path: path.clone(), source };
        let tx = self.conn.transaction().map_err(wrap)?;
        tx.execute(
            "INSERT OR REPLACE INTO run_verifications (run_id, map_path, bs, started_at, finished_at, checked, lost, corrupt, misplaced, unlisted, examples)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            params![
                run_id, v.map_path, v.bs as i64, v.started_at, v.finished_at, v.checked as i64, v.lost as i64,
                v.corrupt as i64, v.misplaced as i64, v.unlisted as i64, v.examples.join("\n")
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

    /// A run's final verification pass, if it had one.
    pub fn verification(&self, run_id: i64) -> Result<Option<StoredVerification>> {
        let r = self
            .conn
            .query_row(
                "SELECT map_path, bs, started_at, finished_at, checked, lost, corrupt, misplaced, unlisted, examples
                 FROM run_verifications WHERE run_id = ?1",
                [run_id],
                |r| {
                    let examples: String = r.get(9)?;
                    Ok(StoredVerification {
                        map_path: r.get(0)?,
                        bs: r.get::<_, i64>(1)? as u64,
                        started_at: r.get(2)?,
                        finished_at: r.get(3)?,
                        checked: r.get::<_, i64>(4)? as u64,
                        lost: r.get::<_, i64>(5)? as u64,
                        corrupt: r.get::<_, i64>(6)? as u64,
                        misplaced: r.get::<_, i64>(7)? as u64,
                        unlisted: r.get::<_, i64>(8)? as u64,
                        examples: examples.lines().map(str::to_string).collect(),
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
            summary: r.get(10)?,
            status_reason: r.get(11)?,
        })
    }

    const RUN_COLUMNS: &str = "id, label, plan_name, status, started_at, finished_at, tool_version, hostname, backend, targets, summary, status_reason";

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

    /// Deletes a run and everything stored for it.
    pub fn delete(&self, id: i64) -> Result<()> {
        self.run(id)?;
        let x = self.conn.execute("DELETE FROM runs WHERE id = ?1", [id]);
        self.sql(x).map(drop)
    }

    /// The preconditioning record of `target` at `size`, if any.
    pub fn precondition(&self, target: &str, size: u64) -> Result<Option<Precondition>> {
        let r = self
            .conn
            .query_row(
                "SELECT target, size, bs, data_json, state_json, bytes_written, started_at, finished_at
                 FROM preconditions WHERE target = ?1 AND size = ?2",
                params![target, size as i64],
                |r| {
                    Ok(Precondition {
                        target: r.get(0)?,
                        size: r.get::<_, i64>(1)? as u64,
                        bs: r.get::<_, i64>(2)? as u64,
                        data_json: r.get(3)?,
                        state_json: r.get(4)?,
                        bytes_written: r.get::<_, i64>(5)? as u64,
                        started_at: r.get(6)?,
                        finished_at: r.get(7)?,
                    })
                },
            )
            .optional();
        self.sql(r)
    }

    /// Creates or replaces the preconditioning record of a target.
    pub fn save_precondition(&self, p: &Precondition) -> Result<()> {
        let x = self.conn.execute(
            "INSERT OR REPLACE INTO preconditions (target, size, bs, data_json, state_json, bytes_written, started_at, finished_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                p.target,
                p.size as i64,
                p.bs as i64,
                p.data_json,
                p.state_json,
                p.bytes_written as i64,
                p.started_at,
                p.finished_at
            ],
        );
        self.sql(x).map(drop)
    }

    /// Loads a run with every complete interval, rebuilt as the engine handed them over.
    pub fn load(&self, id: i64) -> Result<StoredRun> {
        let run = self.run(id)?;
        let r = self.conn.query_row("SELECT host_json, targets_json, plan_json FROM runs WHERE id = ?1", [id], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?))
        });
        let (host_json, targets_json, plan_json) = self.sql(r)?;
        let mut workloads = Vec::new();
        let mut st = self.sql(
            self.conn.prepare("SELECT id, workload_json, data_check FROM workloads WHERE run_id = ?1 ORDER BY idx"),
        )?;
        let wl: Vec<(i64, String, String)> =
            self.sql(st.query_map([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).and_then(|m| m.collect()))?;
        for (wid, json, data_check) in wl {
            workloads.push(StoredWorkload { json, steps: self.load_steps(wid)?, data_check });
        }
        let verification = self.verification(id)?;
        Ok(StoredRun { run, host_json, targets_json, plan_json, workloads, verification })
    }

    fn load_steps(&self, workload_id: i64) -> Result<Vec<StepRecord>> {
        let mut st = self.sql(self.conn.prepare(
            "SELECT id, workers, queue_depth, threads, interval_s, sample_s, interrupted, hosts, notes,
                    drain_late, drain_stuck, drain_stuck_age_ns, drain_wait_ns, unmeasured_errors FROM steps WHERE workload_id = ?1 ORDER BY idx",
        ))?;
        let rows = st.query_map([workload_id], |r| {
            let mut rec = StepRecord::new(r.get(1)?, r.get(2)?, r.get::<_, i64>(3)? as usize, r.get(4)?, r.get(5)?);
            rec.hosts = r.get(7)?;
            let notes: String = r.get(8)?;
            rec.notes =
                notes.lines().filter_map(|l| l.split_once('\t').map(|(c, m)| (c.to_string(), m.to_string()))).collect();
            rec.drain = iocurve_stats::Drain {
                late: r.get::<_, i64>(9)? as u64,
                stuck: r.get::<_, i64>(10)? as u64,
                stuck_age_ns: r.get::<_, i64>(11)? as u64,
                wait_ns: r.get::<_, i64>(12)? as u64,
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
            for (stats, cpu, duration_s) in self.load_intervals(step_id, None)? {
                rec.push_interval(stats, cpu, duration_s);
            }
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
            "SELECT host, address, hostname, started_unix_ns, threads, lost_at_s FROM step_hosts WHERE step_id = ?1 ORDER BY host",
        ))?;
        let rows = st.query_map([step_id], |r| {
            Ok((
                r.get::<_, u32>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, Option<f64>>(5)?,
            ))
        });
        let rows: Vec<_> = self.sql(rows.and_then(|m| m.collect::<rusqlite::Result<Vec<_>>>()))?;
        let mut hosts = Vec::new();
        for (host, address, hostname, started_unix_ns, threads, lost_at_s) in rows {
            let mut record =
                StepRecord::new(step.workers, step.queue_depth, threads as usize, step.interval_s, step.sample_s);
            for (stats, cpu, duration_s) in self.load_intervals(step_id, Some(host))? {
                record.push_interval(stats, cpu, duration_s);
            }
            record.interrupted = step.interrupted || lost_at_s.is_some();
            hosts.push(HostRecord { address, hostname, started_unix_ns, lost_at_s, record });
        }
        Ok(hosts)
    }

    /// The intervals of a step (`host` None) or of one of its hosts, in order, as the engine
    /// handed them over.
    fn load_intervals(&self, step_id: i64, host: Option<u32>) -> Result<Vec<(IntervalStats, CpuUsage, f64)>> {
        let invalid = |m: String| StoreError::Invalid { path: self.path.clone(), message: m };
        let mut st = self.sql(self.conn.prepare(
            "SELECT id, idx, duration_s, read_ops, read_bytes, write_ops, write_bytes, read_hist, write_hist, cpu_user, cpu_system, cpu_iowait, max_gap_ns, faults_injected,
                    verify_checked, verify_lost, verify_corrupt, verify_misplaced, verify_examples
             FROM intervals WHERE step_id = ?1 AND host IS ?2 ORDER BY idx",
        ))?;
        let rows = st.query_map(params![step_id, host], |r| {
            let mut stats = IntervalStats::default();
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
            let cpu = CpuUsage { user: r.get(9)?, system: r.get(10)?, iowait: r.get(11)? };
            let hists: (Vec<u8>, Vec<u8>) = (r.get(7)?, r.get(8)?);
            Ok((r.get::<_, i64>(0)?, r.get::<_, u32>(1)?, r.get::<_, f64>(2)?, stats, cpu, hists))
        });
        let rows: Vec<_> = self.sql(rows.and_then(|m| m.collect::<rusqlite::Result<Vec<_>>>()))?;
        let mut out = Vec::new();
        for (interval_id, idx, duration_s, mut stats, cpu, (rh, wh)) in rows {
            stats.read.hist = LatencyHistogram::from_bytes(&rh).map_err(invalid)?;
            stats.write.hist = LatencyHistogram::from_bytes(&wh).map_err(invalid)?;
            let mut es = self.sql(self.conn.prepare_cached(
                "SELECT direction, errno, count, target FROM interval_errors WHERE interval_id = ?1",
            ))?;
            let errs = es.query_map([interval_id], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, i32>(1)?, r.get::<_, i64>(2)?, r.get::<_, Option<u32>>(3)?))
            });
            for (dir, errno, count, target) in self.sql(errs.and_then(|m| m.collect::<rusqlite::Result<Vec<_>>>()))? {
                let counts: &mut ErrorCounts =
                    if dir == "write" { &mut stats.write.errors } else { &mut stats.read.errors };
                counts.add(target.unwrap_or(UNKNOWN_TARGET), errno, count as u64);
            }
            let mut ss = self.sql(self.conn.prepare_cached(
                "SELECT ops, bytes, lat_sum_ns, lat_max_ns, errors FROM samples WHERE step_id = ?1 AND interval_idx = ?2 AND host IS ?3 ORDER BY idx",
            ))?;
            let samples = ss.query_map(params![step_id, idx, host], |r| {
                Ok(Sample {
                    ops: r.get::<_, i64>(0)? as u64,
                    bytes: r.get::<_, i64>(1)? as u64,
                    lat_sum_ns: r.get::<_, i64>(2)? as u64,
                    lat_max_ns: r.get::<_, i64>(3)? as u64,
                    errors: r.get::<_, i64>(4)? as u64,
                })
            });
            stats.samples = self.sql(samples.and_then(|m| m.collect()))?;
            out.push((stats, cpu, duration_s));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 13, finding 6: 14 of 30 processes that created one database at once failed
    /// ("table runs already exists", "duplicate column name").
    #[test]
    fn regression_thirty_openers_of_a_new_database_all_succeed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("race.db");
        let gate = std::sync::Barrier::new(30);
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..30)
                .map(|_| {
                    s.spawn(|| {
                        gate.wait();
                        Store::open(&path).map(|st| st.schema_version().unwrap())
                    })
                })
                .collect();
            for h in handles {
                assert_eq!(h.join().unwrap().unwrap(), MIGRATIONS.len() as i64);
            }
        });
    }

    #[test]
    fn a_foreign_file_is_refused_and_left_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("notes.txt");
        std::fs::write(&text, vec![b'x'; 8192]).unwrap();
        let Err(e) = Store::open(&text) else { panic!("a text file opened as a database") };
        assert!(e.to_string().contains("not an iocurve results database"), "{e}");
        assert_eq!(std::fs::read(&text).unwrap(), vec![b'x'; 8192]);
        let other = dir.path().join("other.db");
        {
            let c = Connection::open(&other).unwrap();
            c.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);").unwrap();
        }
        let before = std::fs::read(&other).unwrap();
        let Err(e) = Store::open(&other) else { panic!("a foreign database opened") };
        assert!(e.to_string().contains("another program"), "{e}");
        assert_eq!(std::fs::read(&other).unwrap(), before, "not switched to WAL, nothing added");
        let Err(e) = Store::open_existing(&dir.path().join("typo.db")) else { panic!("a missing database opened") };
        assert!(e.to_string().contains("no such results database"), "{e}");
        assert!(!dir.path().join("typo.db").exists(), "not created");
    }

    fn interval(lat: u64, n: u64) -> IntervalStats {
        let mut s = IntervalStats::with_samples(2);
        for i in 0..n {
            s.read.record(lat + i, 4096);
            s.samples[(i % 2) as usize].record(lat + i, 4096);
        }
        s.write.record(lat * 2, 8192);
        s.write.errors.add(0, 5, 2);
        s
    }

    #[test]
    fn a_run_round_trips_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let mut st = Store::open(&dir.path().join("r.db")).unwrap();
        assert_eq!(st.schema_version().unwrap(), MIGRATIONS.len() as i64);
        let run = st
            .begin_run(&NewRun { label: "4 controllers".into(), plan_name: "quick".into(), ..Default::default() })
            .unwrap();
        let wl = st.begin_workload(run, 0, "w", "{}").unwrap();
        let proto = StepRecord::new(4, 2, 1, 1.0, 0.5);
        let step = st.begin_step(wl, 0, &proto).unwrap();
        let cpu = CpuUsage { user: 10.0, system: 5.0, iowait: 1.0 };
        let ivs = [interval(1000, 50), interval(3000, 70)];
        for (i, s) in ivs.iter().enumerate() {
            st.add_interval(step, None, i as u32, s, &cpu, 1.0).unwrap();
        }
        st.end_step(step, &StepRecord::new(1, 1, 1, 1.0, 1.0)).unwrap();
        st.finish_run(run, "complete", "t", "w 1 IOPS").unwrap();

        let back = st.load(run).unwrap();
        assert_eq!(back.run.label, "4 controllers");
        assert_eq!(back.run.status, "complete");
        assert_eq!(back.run.summary.as_deref(), Some("w 1 IOPS"));
        let rec = &back.workloads[0].steps[0];
        let mut expected = proto.clone();
        for s in ivs {
            expected.push_interval(s, cpu, 1.0);
        }
        assert_eq!(rec.intervals, expected.intervals, "figures, samples and CPU come back");
        assert_eq!(rec.total, expected.total, "histograms, counters and errors come back exactly");
        assert!(!rec.interrupted);
    }

    #[test]
    fn a_multi_host_step_keeps_every_host_apart_from_the_merged_figures() {
        let dir = tempfile::tempdir().unwrap();
        let mut st = Store::open(&dir.path().join("r.db")).unwrap();
        let run = st.begin_run(&NewRun::default()).unwrap();
        let wl = st.begin_workload(run, 0, "w", "{}").unwrap();
        let mut merged = StepRecord::new(4, 1, 2, 1.0, 1.0);
        merged.hosts = 2;
        let step = st.begin_step(wl, 0, &merged).unwrap();
        st.add_step_host(step, 0, "a:7420", "alpha", 1_000, 2).unwrap();
        st.add_step_host(step, 1, "b:7420", "beta", 1_400, 2).unwrap();
        let mut hosts = [StepRecord::new(4, 1, 2, 1.0, 1.0), StepRecord::new(4, 1, 2, 1.0, 1.0)];
        for k in 0..2u32 {
            let parts = [interval(1000 + 10 * k as u64, 50), interval(7000, 20 + k as u64)];
            let mut all = IntervalStats::default();
            for (h, p) in parts.iter().enumerate() {
                // Host b is lost after the first interval.
                if h == 1 && k == 1 {
                    continue;
                }
                st.add_interval(step, Some(h as u32), k, p, &CpuUsage::default(), 1.0).unwrap();
                hosts[h].push_interval(p.clone(), CpuUsage::default(), 1.0);
                all.merge(p);
            }
            st.add_interval(step, None, k, &all, &CpuUsage::default(), 1.0).unwrap();
            merged.push_interval(all, CpuUsage::default(), 1.0);
        }
        let [a, b] = hosts;
        merged.per_host = vec![
            HostRecord {
                address: "a:7420".into(),
                hostname: "alpha".into(),
                started_unix_ns: 1_000,
                lost_at_s: None,
                record: a,
            },
            HostRecord {
                address: "b:7420".into(),
                hostname: "beta".into(),
                started_unix_ns: 1_400,
                lost_at_s: Some(1.2),
                record: b,
            },
        ];
        st.end_step(step, &merged).unwrap();
        let back = st.load(run).unwrap();
        let rec = &back.workloads[0].steps[0];
        assert_eq!(rec.hosts, 2);
        assert_eq!(rec.total, merged.total, "the merged intervals alone make the step's total");
        assert_eq!(rec.intervals, merged.intervals);
        assert_eq!(rec.per_host.len(), 2);
        for (got, want) in rec.per_host.iter().zip(&merged.per_host) {
            assert_eq!(
                (&got.address, &got.hostname, got.started_unix_ns),
                (&want.address, &want.hostname, want.started_unix_ns)
            );
            assert_eq!(got.lost_at_s, want.lost_at_s);
            assert_eq!(got.record.total, want.record.total);
            assert_eq!(got.record.intervals, want.record.intervals);
        }
        assert!(rec.per_host[1].record.interrupted, "a lost host's record is cut short");
    }

    /// A run with one workload, one step and one stored interval; nothing ended.
    fn one_interval_run(dir: &Path) -> (Store, i64) {
        let mut st = Store::open(&dir.join("r.db")).unwrap();
        let run = st.begin_run(&NewRun::default()).unwrap();
        let wl = st.begin_workload(run, 0, "w", "{}").unwrap();
        let step = st.begin_step(wl, 0, &StepRecord::new(1, 1, 1, 1.0, 1.0)).unwrap();
        st.add_interval(step, None, 0, &interval(10, 5), &CpuUsage::default(), 1.0).unwrap();
        (st, run)
    }

    #[test]
    fn an_unfinished_step_keeps_its_finished_intervals() {
        let dir = tempfile::tempdir().unwrap();
        let (st, run) = one_interval_run(dir.path());
        // No end_step, no finish_run: as after SIGKILL.
        drop(st);
        let st = Store::open(&dir.path().join("r.db")).unwrap();
        let back = st.load(run).unwrap();
        assert_eq!(back.run.status, "running");
        assert_eq!(back.run.finished_at, None);
        let rec = &back.workloads[0].steps[0];
        assert_eq!(rec.intervals.len(), 1);
        assert!(rec.interrupted);
    }

    #[test]
    fn delete_cascades_and_unknown_runs_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let (st, run) = one_interval_run(dir.path());
        st.delete(run).unwrap();
        let n: i64 = st.conn.query_row("SELECT count(*) FROM samples", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 0, "samples went with the run");
        assert!(st.runs().unwrap().is_empty());
        assert!(matches!(st.delete(run), Err(StoreError::NoSuchRun(_))));
        assert!(st.load(99).unwrap_err().to_string().contains("iocurve runs"));
    }

    #[test]
    fn migration_from_the_first_schema_keeps_every_run() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("v1.db");
        let cpu = CpuUsage { user: 1.0, system: 2.0, iowait: 3.0 };
        let proto = StepRecord::new(2, 4, 1, 1.0, 0.5);
        let ivs = [interval(700, 30), interval(900, 40)];
        let run = {
            // A database as iocurve wrote it with schema v1 (only v1 statements touch it).
            let st = Store::open_at(&p, 1).unwrap();
            assert_eq!(st.schema_version().unwrap(), 1);
            let run = st.begin_run(&NewRun { label: "before v2".into(), ..Default::default() }).unwrap();
            let wl = st.begin_workload(run, 0, "w", "{\"name\":\"w\"}").unwrap();
            st.conn
                .execute(
                    "INSERT INTO steps (workload_id, idx, workers, queue_depth, threads, interval_s, sample_s) VALUES (?1, 0, ?2, ?3, ?4, ?5, ?6)",
                    params![wl, proto.workers, proto.queue_depth, proto.threads as i64, proto.interval_s, proto.sample_s],
                )
                .unwrap();
            let step = st.conn.last_insert_rowid();
            // Intervals as v1 wrote them: its columns only, errors without a target.
            for (i, s) in ivs.iter().enumerate() {
                st.conn
                    .execute(
                        "INSERT INTO intervals (step_id, idx, duration_s, read_ops, read_bytes, write_ops, write_bytes, read_hist, write_hist, cpu_user, cpu_system, cpu_iowait)
                         VALUES (?1, ?2, 1.0, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                        params![
                            step, i as i64,
                            s.read.ops as i64, s.read.bytes as i64, s.write.ops as i64, s.write.bytes as i64,
                            s.read.hist.to_bytes(), s.write.hist.to_bytes(), cpu.user, cpu.system, cpu.iowait
                        ],
                    )
                    .unwrap();
                let id = st.conn.last_insert_rowid();
                for &(_, errno, count) in &s.write.errors.0 {
                    st.conn
                        .execute(
                            "INSERT INTO interval_errors (interval_id, direction, errno, count) VALUES (?1, 'write', ?2, ?3)",
                            params![id, errno, count as i64],
                        )
                        .unwrap();
                }
                for (k, x) in s.samples.iter().enumerate() {
                    st.conn
                        .execute(
                            "INSERT INTO samples (step_id, interval_idx, idx, ops, bytes, lat_sum_ns, lat_max_ns, errors) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                            params![step, i as i64, k as i64, x.ops as i64, x.bytes as i64, x.lat_sum_ns as i64, x.lat_max_ns as i64, x.errors as i64],
                        )
                        .unwrap();
                }
            }
            st.conn.execute("UPDATE steps SET interrupted = 0 WHERE id = ?1", [step]).unwrap();
            st.conn.execute("UPDATE runs SET status = 'complete', finished_at = 't' WHERE id = ?1", [run]).unwrap();
            run
        };
        let st = Store::open(&p).unwrap();
        assert_eq!(st.schema_version().unwrap(), MIGRATIONS.len() as i64);
        let back = st.load(run).unwrap();
        assert_eq!((back.run.label.as_str(), back.run.status.as_str()), ("before v2", "complete"));
        assert_eq!(back.run.summary, None, "no summary yet: `runs` computes it once");
        assert_eq!(back.workloads.len(), 1);
        assert_eq!(back.workloads[0].json, "{\"name\":\"w\"}");
        let mut expected = proto.clone();
        for mut s in ivs {
            // What v1 did not record comes back as unknown.
            for e in &mut s.write.errors.0 {
                e.0 = UNKNOWN_TARGET;
            }
            expected.push_interval(s, cpu, 1.0);
        }
        let rec = &back.workloads[0].steps[0];
        assert_eq!(rec.intervals, expected.intervals, "figures, samples and CPU survive the migration");
        assert_eq!(rec.total, expected.total, "histograms, counters and errors survive the migration");
        st.set_summary(run, "w 1 IOPS").unwrap();
        assert_eq!(st.run(run).unwrap().summary.as_deref(), Some("w 1 IOPS"));
    }

    #[test]
    fn precondition_records_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let st = Store::open(&dir.path().join("r.db")).unwrap();
        assert_eq!(st.precondition("/dev/x", 1 << 30).unwrap(), None);
        let mut p = Precondition {
            target: "/dev/x".into(),
            size: 1 << 30,
            bs: 1 << 20,
            data_json: "{}".into(),
            state_json: "{\"watermark\":3,\"above\":[5]}".into(),
            bytes_written: 4 << 20,
            started_at: "t0".into(),
            finished_at: None,
        };
        st.save_precondition(&p).unwrap();
        assert_eq!(st.precondition("/dev/x", 1 << 30).unwrap().as_ref(), Some(&p));
        p.finished_at = Some("t1".into());
        st.save_precondition(&p).unwrap();
        assert_eq!(st.precondition("/dev/x", 1 << 30).unwrap(), Some(p));
        assert_eq!(st.precondition("/dev/x", 1 << 29).unwrap(), None, "another size is another record");
    }

    #[test]
    fn migration_from_an_empty_file_and_refusal_of_newer_schemas() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.db");
        {
            let mut st = Store::open(&p).unwrap();
            st.begin_run(&NewRun { label: "kept".into(), ..Default::default() }).unwrap();
            // Re-running the migrations is a no-op that keeps the data.
            st.migrate(MIGRATIONS.len()).unwrap();
            assert_eq!(st.runs().unwrap()[0].label, "kept");
            st.conn.pragma_update(None, "user_version", 99).unwrap();
        }
        let e = Store::open(&p).err().expect("a newer schema is refused");
        assert!(e.to_string().contains("newer than this iocurve"), "{e}");
        std::fs::write(dir.path().join("junk.db"), b"this is not a database at all, not even close").unwrap();
        assert!(Store::open(&dir.path().join("junk.db")).is_err());
    }

    /// Issue 13, finding 5: the final verification pass was stored nowhere. A v8 database
    /// migrates (its runs have no verification and no reason), and a run's pass with every
    /// problem round-trips and goes with the run.
    #[test]
    fn regression_final_verification_is_stored_and_a_v8_database_migrates() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("v8.db");
        let old = {
            let st = Store::open_at(&p, 8).unwrap();
            assert_eq!(st.schema_version().unwrap(), 8);
            let run = st.begin_run(&NewRun { label: "v8".into(), ..Default::default() }).unwrap();
            st.finish_run(run, "complete", "t", "w 1 IOPS").unwrap();
            run
        };
        let mut st = Store::open(&p).unwrap();
        assert_eq!(st.schema_version().unwrap(), MIGRATIONS.len() as i64);
        let back = st.run(old).unwrap();
        assert_eq!((back.label.as_str(), back.status.as_str(), back.status_reason), ("v8", "complete", None));
        assert_eq!(st.verification(old).unwrap(), None);

        let run = st.begin_run(&NewRun::default()).unwrap();
        let v = StoredVerification {
            map_path: "m.map".into(),
            bs: 4096,
            started_at: "t0".into(),
            finished_at: "t1".into(),
            checked: 100,
            lost: 2,
            corrupt: 1,
            misplaced: 0,
            unlisted: 0,
            examples: vec!["a block 3: lost".into(), "a block 9: corrupted".into()],
        };
        let problems = vec![
            StoredProblem {
                target: "a".into(),
                block: 3,
                kind: "lost".into(),
                expected: 4,
                found_generation: Some(3),
                found: "generation 3".into(),
            },
            StoredProblem {
                target: "a".into(),
                block: 9,
                kind: "corrupt".into(),
                expected: 1,
                found_generation: None,
                found: "checksum mismatch".into(),
            },
            StoredProblem {
                target: "b".into(),
                block: 1 << 40,
                kind: "lost".into(),
                expected: 0x7fff,
                found_generation: None,
                found: "no write of this map".into(),
            },
        ];
        st.add_verification(run, &v, problems.clone()).unwrap();
        st.set_status(run, "complete", Some("verification found 3 problems")).unwrap();
        assert_eq!(st.verification(run).unwrap(), Some(v));
        let mut got = Vec::new();
        st.verify_problems(run, |p| got.push(p)).unwrap();
        assert_eq!(got, problems, "every problem, in the order found");
        assert_eq!(st.run(run).unwrap().status_reason.as_deref(), Some("verification found 3 problems"));
        st.delete(run).unwrap();
        let n: i64 = st.conn.query_row("SELECT count(*) FROM verify_problems", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 0, "problems went with the run");
    }
}
