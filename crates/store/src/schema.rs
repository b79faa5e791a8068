//! The schema, its migrations, and opening a database: created, migrated forward, or refused
//! when it is not ours or is newer than this iocurve.

use super::*;

/// Schema migrations, in order; `PRAGMA user_version` counts how many are applied.
pub(crate) const MIGRATIONS: &[&str] = &[
    SCHEMA_V1, SCHEMA_V2, SCHEMA_V3, SCHEMA_V4, SCHEMA_V5, SCHEMA_V6, SCHEMA_V7, SCHEMA_V8, SCHEMA_V9, SCHEMA_V10,
    SCHEMA_V11, SCHEMA_V12, SCHEMA_V13, SCHEMA_V14, SCHEMA_V15, SCHEMA_V16, SCHEMA_V17, SCHEMA_V18, SCHEMA_V19,
    SCHEMA_V20, SCHEMA_V21, SCHEMA_V22, SCHEMA_V23, SCHEMA_V24, SCHEMA_V25, SCHEMA_V26, SCHEMA_V27, SCHEMA_V28,
    SCHEMA_V29,
];

/// v29: a replay step's speed (issue 45); NULL: not a replay (its `rate_iops` is then the
/// trace's mean rate at that speed); and the I/Os its trace had due in each bin of the step
/// (`BIN_S;N,N,…`: 0.1 s, longer over steps of more than 2'000 s).
const SCHEMA_V29: &str = "
ALTER TABLE steps ADD COLUMN replay_speed REAL;
ALTER TABLE steps ADD COLUMN replay_intended TEXT;  -- BIN_S;N,N,…: the I/Os due in each bin
";

/// v28: each second's latency histogram (issue 44, part 4), with the step's merged samples
/// (`host` NULL; a host's own seconds keep none: the heat map and the per-second percentiles
/// are the step's, and a histogram per host and second would multiply the bytes by the hosts).
/// The sparse encoding of `iocurve_stats::seconds` (a format byte, then gap and count varints
/// per non-empty bucket); NULL: a second without I/Os, or stored before.
const SCHEMA_V28: &str = "
ALTER TABLE samples ADD COLUMN hist BLOB;
";

/// v27: the array's own figures beside a run (issue 44): each column of an imported CSV as a
/// series of (time on the run's clock, value); `kind` `iops` or `mbps` for the array's front-end
/// throughput, which iocurve checks its steps against.
const SCHEMA_V27: &str = "
CREATE TABLE array_points (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    series TEXT NOT NULL,                 -- the column's name
    kind TEXT NOT NULL,                   -- `iops`, `mbps` or empty
    at_unix_ns INTEGER NOT NULL,
    value REAL NOT NULL
);
CREATE INDEX array_points_run ON array_points(run_id, series, at_unix_ns);
";

/// v26: a run's marks (issue 44): timestamped events set while it ran (`iocurve mark`) or read
/// from a file of events after it, on the coordinator's clock.
const SCHEMA_V26: &str = "
CREATE TABLE marks (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    at_unix_ns INTEGER NOT NULL,
    text TEXT NOT NULL,
    source TEXT NOT NULL                  -- `live`, or `file NAME:LINE`
);
CREATE INDEX marks_run ON marks(run_id, at_unix_ns);
";

/// v25: figures per target (issue 42): each target's part of an interval (of the step's
/// merged intervals, `host` NULL) with its latency histogram and its block device's own
/// counters (`/proc/diskstats`, NULL: not read), its per-second samples; and the host CPU's
/// steal and iocurve's own share of it per interval (NULL: stored before, or not read).
const SCHEMA_V25: &str = "
CREATE TABLE interval_targets (
    interval_id INTEGER NOT NULL REFERENCES intervals(id) ON DELETE CASCADE,
    target INTEGER NOT NULL,              -- index into the run's targets
    read_ops INTEGER NOT NULL, read_bytes INTEGER NOT NULL,
    write_ops INTEGER NOT NULL, write_bytes INTEGER NOT NULL,
    trim_ops INTEGER NOT NULL, trim_bytes INTEGER NOT NULL,
    errors INTEGER NOT NULL,
    lat_mean_ns REAL NOT NULL,
    hist BLOB NOT NULL,                   -- every direction, ns (HdrHistogram V2, deflated)
    dev_reads INTEGER, dev_read_sectors INTEGER,      -- the device's requests completed, sectors
    dev_writes INTEGER, dev_write_sectors INTEGER,
    dev_discards INTEGER, dev_discard_sectors INTEGER,
    PRIMARY KEY (interval_id, target)
);
CREATE TABLE target_samples (
    interval_id INTEGER NOT NULL REFERENCES intervals(id) ON DELETE CASCADE,
    target INTEGER NOT NULL,
    idx INTEGER NOT NULL,                 -- sample within the interval
    ops INTEGER NOT NULL, bytes INTEGER NOT NULL,
    lat_sum_ns INTEGER NOT NULL, lat_max_ns INTEGER NOT NULL,
    errors INTEGER NOT NULL,
    PRIMARY KEY (interval_id, target, idx)
);
ALTER TABLE intervals ADD COLUMN cpu_steal REAL;
ALTER TABLE intervals ADD COLUMN cpu_own REAL;
";

/// v24: uneven hosts (issue 41): the workers each host of a multi-host step ran (its
/// `workers_scale` of the step's; NULL in steps stored before: the step's own), and the I/Os a
/// step kept in flight where not its workers × queue depth on each host (a concurrent step's
/// member on uneven hosts; NULL: that).
const SCHEMA_V24: &str = "
ALTER TABLE step_hosts ADD COLUMN workers INTEGER;
ALTER TABLE steps ADD COLUMN outstanding INTEGER;
";

/// v23: trims (issue 40), a direction of their own beside reads and writes: per interval their
/// count, bytes and latency histogram (NULL: none), errors with direction `trim`, trim IOPS in
/// `step_summary`; and the reclaim steps of a run (`[[reclaim]]`): a region written, trimmed
/// and read back, and how long the storage took to give its space back.
const SCHEMA_V23: &str = "
ALTER TABLE intervals ADD COLUMN trim_ops INTEGER NOT NULL DEFAULT 0;
ALTER TABLE intervals ADD COLUMN trim_bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE intervals ADD COLUMN trim_hist BLOB;  -- NULL: no trims
DROP VIEW step_summary;
CREATE VIEW step_summary AS
SELECT w.run_id, w.idx AS workload_idx, w.name AS workload, s.idx AS step, s.id AS step_id,
       s.workers, s.queue_depth, s.hosts, s.rate_iops, s.interrupted, s.measured_from_unix_ns,
       COUNT(i.id) AS intervals, SUM(i.duration_s) AS duration_s,
       SUM(i.read_ops + i.write_ops + i.trim_ops) / SUM(i.duration_s) AS iops,
       SUM(CASE WHEN i.read_ops + i.write_ops = 0 AND i.read_bytes + i.write_bytes = 0 THEN i.trim_bytes
                ELSE i.read_bytes + i.write_bytes END) / SUM(i.duration_s) / 1e6 AS mb_per_s,
       SUM(i.read_ops) / SUM(i.duration_s) AS read_iops,
       SUM(i.write_ops) / SUM(i.duration_s) AS write_iops,
       SUM(i.trim_ops) / SUM(i.duration_s) AS trim_iops
FROM steps s
JOIN workloads w ON w.id = s.workload_id
JOIN intervals i ON i.step_id = s.id AND i.host IS NULL
GROUP BY s.id;
CREATE TABLE reclaims (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,                 -- the reclaim step's place in the run
    result_json TEXT NOT NULL             -- iocurve_analysis::ReclaimResult
);
CREATE INDEX reclaims_run ON reclaims(run_id);
";

/// v22: the maximum's noise band is capped and a too noisy top step leaves it undecided (issue
/// 37, finding 1): the maxima `runs` keeps with each run are computed again, by the new rule,
/// when next listed.
const SCHEMA_V22: &str = "
UPDATE runs SET headlines_json = NULL;
";

/// v21: which process writes a run (`HOST PID START`, [`crate::owner`]), so that the next run
/// settles the status of one whose process is gone (issue 36, finding 5: it stayed `running`).
const SCHEMA_V21: &str = "
ALTER TABLE runs ADD COLUMN owner TEXT;
";

/// v20: blocks a final pass could not read (read errors), a class of their own beside lost,
/// corrupt and misplaced (issue 36, finding 3); their rows in `verify_problems` have kind
/// `unreadable`.
const SCHEMA_V20: &str = "
ALTER TABLE run_verifications ADD COLUMN unreadable INTEGER NOT NULL DEFAULT 0;
";

/// v19: the hosts each step was planned on (the hosts the run started its steps with), so that
/// a step after a host was lost — on fewer hosts, with no loss of its own — is told apart from
/// the steps on all of them (issue 35, finding 4). Steps stored before get the most hosts any
/// step of their run ran on: the hosts it started with, unless the very first step lost one
/// before it began.
const SCHEMA_V19: &str = "
ALTER TABLE steps ADD COLUMN planned_hosts INTEGER;  -- NULL only if written by no iocurve
UPDATE steps SET planned_hosts = (
    SELECT MAX(s2.hosts) FROM steps s2 JOIN workloads w2 ON w2.id = s2.workload_id
    WHERE w2.run_id = (SELECT w.run_id FROM workloads w WHERE w.id = steps.workload_id)
);
";

/// v18: a step's intervals and samples found by host and index, not by scanning the whole
/// step: every run reads each step's intervals back at its end (issue 21), one interval at a
/// time, and a step's samples looked up per interval by step alone cost intervals² row visits
/// (a day of 1 s intervals: some 7.5·10⁹). The new indexes begin with `step_id`, so they
/// replace the old ones. And each interval's mean latency, so that reading a step's figures
/// back needs no histogram decoded (two of some 200 KiB each per interval).
const SCHEMA_V18: &str = "
ALTER TABLE intervals ADD COLUMN lat_mean_ns REAL;  -- NULL: stored before v18 (the histograms have it)
DROP INDEX intervals_step;
DROP INDEX samples_step;
CREATE INDEX intervals_step_host ON intervals(step_id, host, idx);
CREATE INDEX samples_interval ON samples(step_id, host, interval_idx, idx);
";

/// v17: the CPU the step's I/O threads used (the busiest one, all together), from which the
/// analysis flags a step iocurve may have limited and a run chooses its threads.
const SCHEMA_V17: &str = "
ALTER TABLE steps ADD COLUMN io_cpu_busiest REAL;  -- NULL: not measured (stored before v17)
ALTER TABLE steps ADD COLUMN io_cpu_total REAL;
";

/// v16: when each step's measured intervals began, on the wall clock: samples get absolute
/// times and fio exports real timestamps. And a view of one row per step with its throughput,
/// for SQL without joining and summing the intervals by hand (latency figures come from the
/// histogram blobs, which SQL cannot read: `iocurve export` has them).
const SCHEMA_V16: &str = "
ALTER TABLE steps ADD COLUMN measured_from_unix_ns INTEGER;  -- NULL: a step stored before v16
CREATE VIEW step_summary AS
SELECT w.run_id, w.idx AS workload_idx, w.name AS workload, s.idx AS step, s.id AS step_id,
       s.workers, s.queue_depth, s.hosts, s.rate_iops, s.interrupted, s.measured_from_unix_ns,
       COUNT(i.id) AS intervals, SUM(i.duration_s) AS duration_s,
       SUM(i.read_ops + i.write_ops) / SUM(i.duration_s) AS iops,
       SUM(i.read_bytes + i.write_bytes) / SUM(i.duration_s) / 1e6 AS mb_per_s,
       SUM(i.read_ops) / SUM(i.duration_s) AS read_iops,
       SUM(i.write_ops) / SUM(i.duration_s) AS write_iops
FROM steps s
JOIN workloads w ON w.id = s.workload_id
JOIN intervals i ON i.step_id = s.id AND i.host IS NULL
GROUP BY s.id;
";

/// v15: the I/Os a fault changed that completed in no measured interval (after the step stopped
/// issuing): part of the step's count of injected faults.
const SCHEMA_V15: &str = "
ALTER TABLE steps ADD COLUMN drain_faults INTEGER NOT NULL DEFAULT 0;
";

/// v14: what a run knows about a workload beyond its steps' figures (a rate ramp ended by a
/// bound, an SLA search's answer): lines the analysis of the stored steps adds to its notes.
const SCHEMA_V14: &str = "
ALTER TABLE workloads ADD COLUMN notes TEXT NOT NULL DEFAULT '';  -- newline-separated
";

/// v13: rate (open-loop) steps: the run's target rate of each step, and per interval the
/// service time and lag beside the response time the interval's histograms hold.
const SCHEMA_V13: &str = "
ALTER TABLE steps ADD COLUMN rate_iops REAL;  -- NULL: a closed-loop step
CREATE TABLE interval_rates (
    interval_id INTEGER PRIMARY KEY REFERENCES intervals(id) ON DELETE CASCADE,
    service_hist BLOB NOT NULL,           -- completion - submission, ns (HdrHistogram V2, deflated)
    lag_hist BLOB NOT NULL,               -- submission - intended issue time, ns
    due INTEGER NOT NULL,                 -- I/Os the schedule had due in the interval
    dropped INTEGER NOT NULL,             -- due, not issued (overload = drop)
    backlog INTEGER NOT NULL,             -- due, still waiting when the measurement ended
    overloaded INTEGER NOT NULL           -- overload = abort-step ended the step
);
";

/// v12: the maximum of every workload as numbers (JSON, `iocurve_analysis::Headline`), instead
/// of v2's line formatted for `iocurve runs`: the figures are stored, the presentation is not.
/// Runs of before get theirs from their stored steps the first time they are listed. The old
/// column stays, no longer written: an older iocurve still finishing a run on this file when
/// a newer one migrated it must not fail to write its line.
const SCHEMA_V12: &str = "
ALTER TABLE runs ADD COLUMN headlines_json TEXT;  -- [{workload, sequential, maximum}]; NULL until the run ends
";

/// v11: each agent's clock around each step: its offset measured just before (with the round
/// trip that bounds it) and again after, so that a clock that moved during a run shows.
const SCHEMA_V11: &str = "
ALTER TABLE step_hosts ADD COLUMN offset_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE step_hosts ADD COLUMN offset_rtt_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE step_hosts ADD COLUMN offset_after_ns INTEGER;  -- NULL: not measured (lost host, older run)
ALTER TABLE step_hosts ADD COLUMN offset_after_rtt_ns INTEGER NOT NULL DEFAULT 0;
";

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
    read_hist BLOB NOT NULL,              -- latency in ns, HdrHistogram V2 encoding (compressed since v12)
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

impl Store {
    /// Opens (creating if needed) and migrates the database at `path`.
    pub fn open(path: &Path) -> Result<Store> {
        Self::open_at(path, MIGRATIONS.len()).map_err(|e| match e {
            // SQLite says only "unable to open database file": say why, when it is that the
            // file may not be written here (a read-only mount, no write permission).
            StoreError::Sql { path: p, source } if path.is_file() && !writable(path) => StoreError::Invalid {
                path: p,
                message: format!(
                    "cannot be written here ({source}: {}); this command changes the database, so run it where it may be written (the reading commands need no write access)",
                    std::io::Error::last_os_error()
                ),
            },
            e => e,
        })
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
    pub(crate) fn open_at(path: &Path, version: usize) -> Result<Store> {
        let p = path.display().to_string();
        // Busy errors that SQLite reports without waiting (switching to WAL, lock upgrades
        // while another process creates the schema) are retried for up to 30 s.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut pause = std::time::Duration::from_millis(5);
        loop {
            let conn = Connection::open(path).map_err(|source| StoreError::Sql { path: p.clone(), source })?;
            let mut store = Store { conn, path: p.clone(), room: Default::default() };
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
        // cache_size: a run only appends (a few pages per interval), and SQLite's default page
        // cache of 2 MiB fills as the database grows (a few KiB per interval) and stays: 1.5
        // MiB more resident memory an hour into a run than a minute in (issue 21). 512 KiB.
        let r = self.conn.execute_batch(
            "PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 5000; PRAGMA synchronous = NORMAL; PRAGMA cache_size = -512;",
        );
        self.sql(r)?;
        self.migrate(version)
    }

    /// Refuses a file that is not an iocurve database (another program's SQLite file, or no
    /// SQLite at all) before anything is changed in it.
    pub(crate) fn check_ours(&self) -> Result<()> {
        let invalid = |message: String| StoreError::Invalid { path: self.path.clone(), message };
        // Only a file SQLite cannot read as a database is "not ours": an error opening it (no
        // descriptor left, no permission, WAL's shared memory unavailable) is said as it is
        // (issue 36: with few descriptors a good database was called "not an iocurve results
        // database").
        let not_ours = |e: rusqlite::Error| match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt) => {
                invalid(format!("is not an iocurve results database ({e}); give another --db"))
            }
            _ => StoreError::Sql { path: self.path.clone(), source: e },
        };
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
    pub(crate) fn migrate(&mut self, target: usize) -> Result<()> {
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
}

/// True when this process may write the file (access(2) with W_OK, which also says EROFS for a
/// read-only mount); the reason is left in errno.
fn writable(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else { return false };
    // SAFETY: a valid C string.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}
