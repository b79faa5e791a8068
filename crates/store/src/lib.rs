//! The results database: one SQLite file (default `./iocurve.db`) holding every run, written as
//! the run goes. Each finished interval — its latency histograms, counters, errors, host CPU and
//! samples — is committed in one transaction, so a run killed with SIGKILL keeps every finished
//! interval and shows as incomplete (`status = 'running'` with no `finished_at`).
//!
//! The schema is plain SQL (see `SCHEMA_V1` and the README) so that pandas or the sqlite3 shell
//! can query it; histograms are HdrHistogram V2 blobs (deflate-compressed, the standard encoding, since v12). Versions are tracked with
//! `PRAGMA user_version` and migrated forward on open. The store never formats or analyses.

use std::path::Path;

use iocurve_stats::{
    CpuUsage, ErrorCounts, FinalVerification, HostClock, HostRecord, IntervalRecord, IntervalStats, LatencyHistogram,
    Sample, SecondHist, StepRecord, UNKNOWN_TARGET, VerifyCounts,
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

impl StoreError {
    /// A path where no database can be opened or made (missing directory, a directory, no
    /// permission, read-only): the user's input, unlike a busy or failing database.
    pub fn is_bad_path(&self) -> bool {
        match self {
            StoreError::Invalid { .. } => true,
            StoreError::Sql { source, .. } => matches!(
                source.sqlite_error_code(),
                Some(
                    rusqlite::ErrorCode::CannotOpen
                        | rusqlite::ErrorCode::ReadOnly
                        | rusqlite::ErrorCode::PermissionDenied
                )
            ),
            StoreError::NoSuchRun(_) => false,
        }
    }
}

/// The results database when none is named (`--db`, `IOCURVE_DB`): `iocurve.db` in the working
/// directory.
pub const DEFAULT_DB: &str = "iocurve.db";

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::DatabaseBusy) | Some(rusqlite::ErrorCode::DatabaseLocked))
}

mod marks;
mod owner;
mod precondition;
mod read;
mod readonly;
mod room;
mod schema;
mod targets;
mod write;

pub use precondition::Precondition;
pub use read::{RunRow, StoredProblem, StoredRun, StoredWorkload};
pub use write::NewRun;

pub struct Store {
    conn: Connection,
    path: String,
    /// Room kept beside the database for the writes that end a run ([`Store::keep_room`]).
    room: room::Room,
}

impl Store {
    fn sql<T>(&self, r: rusqlite::Result<T>) -> Result<T> {
        r.map_err(|source| StoreError::Sql { path: self.path.clone(), source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::MIGRATIONS;

    /// Issue 36, finding 5: a run whose process ended while the database could take none of its
    /// last writes stayed `running` for ever. The next run settles it (its process is gone);
    /// a run of a live process, and one of another host, stay as they are.
    #[test]
    fn regression_a_run_whose_process_is_gone_is_settled_by_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let st = Store::open(&dir.path().join("r.db")).unwrap();
        let gone = st.begin_run(&NewRun::default()).unwrap();
        let live = st.begin_run(&NewRun::default()).unwrap();
        let other = st.begin_run(&NewRun::default()).unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let me = crate::owner::this_process();
        let host = me.split(' ').next().unwrap().to_string();
        let set = |id: i64, owner: String| {
            st.conn.execute("UPDATE runs SET owner = ?1 WHERE id = ?2", rusqlite::params![owner, id]).unwrap();
        };
        set(gone, format!("{host} {pid} 1"));
        set(other, format!("another-host {pid} 1"));
        assert_eq!(st.settle_abandoned().unwrap(), vec![gone]);
        let status = |id: i64| st.run(id).unwrap().status;
        assert_eq!(
            (status(gone), status(live), status(other)),
            ("interrupted".into(), "running".into(), "running".into())
        );
        assert!(st.run(gone).unwrap().status_reason.unwrap().contains("its process ended"));
    }

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
            s.seconds.record((i % 2) as usize, lat + i);
        }
        s.write.record(lat * 2, 8192);
        s.write.errors.add(0, 5, 2);
        // Two targets' parts (schema v25): the reads on one, the write and its errors on the
        // other, whose device counted its requests.
        let mut a = iocurve_stats::TargetStats::new(0, 2);
        let mut b = iocurve_stats::TargetStats::new(3, 2);
        for i in 0..n {
            a.read_ops += 1;
            a.read_bytes += 4096;
            a.hist.record(lat + i);
            a.samples[(i % 2) as usize].record(lat + i, 4096);
        }
        (b.write_ops, b.write_bytes, b.errors) = (1, 8192, 2);
        b.hist.record(lat * 2);
        b.samples[0].record(lat * 2, 8192);
        b.device = Some(iocurve_stats::DeviceIo { writes: 2, write_sectors: 16, ..Default::default() });
        s.targets = vec![a, b];
        s
    }

    /// Issue 21: a live step counts its intervals and keeps only the last few; the store gives
    /// it the whole list back at its end, as a step that held them would have it, and says so
    /// when the counts disagree.
    #[test]
    fn a_counted_step_gets_its_intervals_back_from_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let mut st = Store::open(&dir.path().join("r.db")).unwrap();
        let run = st.begin_run(&NewRun::default()).unwrap();
        let wl = st.begin_workload(run, 0, "w", "{}").unwrap();
        let (mut held, mut live) = (StepRecord::new(4, 2, 1, 1.0, 0.5), StepRecord::new(4, 2, 1, 1.0, 0.5));
        let step = st.begin_step(wl, 0, &live).unwrap();
        let cpu = CpuUsage { user: 10.0, system: 5.0, iowait: 1.0, steal: 2.5, own: Some(4.0) };
        for i in 0..12u32 {
            let s = interval(1000 + 100 * i as u64, 5 + i as u64);
            st.add_interval(step, None, i, &s, &cpu, 1.0).unwrap();
            held.push_interval(s.clone(), cpu, 1.0);
            live.count_interval(s, cpu, 1.0);
        }
        assert_eq!(live.intervals.len(), iocurve_stats::steady::WINDOW);
        st.end_step(step, &live).unwrap();
        st.fill_intervals(step, &mut live).unwrap();
        assert_eq!(live.intervals, held.intervals);
        assert_eq!(live.total, held.total);
        // Rows stored before v18 have no mean latency: it comes from their histograms, the same.
        st.conn.execute_batch("UPDATE intervals SET lat_mean_ns = NULL").unwrap();
        live.intervals.clear();
        st.fill_intervals(step, &mut live).unwrap();
        assert_eq!(live.intervals, held.intervals);

        live.measured += 1;
        let e = st.fill_intervals(step, &mut live).unwrap_err().to_string();
        assert!(e.contains("12 intervals stored, 13 measured"), "{e}");
    }

    /// Issue 42: a lone target's part is the interval itself; its row keeps no second copy of
    /// the interval's histogram and samples, and reads back the same.
    #[test]
    fn a_lone_target_reads_back_as_the_interval_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let mut st = Store::open(&dir.path().join("r.db")).unwrap();
        let run = st.begin_run(&NewRun::default()).unwrap();
        let wl = st.begin_workload(run, 0, "w", "{}").unwrap();
        let mut held = StepRecord::new(1, 1, 1, 1.0, 0.5);
        let step = st.begin_step(wl, 0, &held).unwrap();
        let mut s = IntervalStats { targets: Vec::new(), ..interval(1000, 50) };
        s.fill_one_target(0);
        s.targets[0].device = Some(iocurve_stats::DeviceIo { reads: 50, read_sectors: 400, ..Default::default() });
        st.add_interval(step, None, 0, &s, &CpuUsage::default(), 1.0).unwrap();
        held.push_interval(s, CpuUsage::default(), 1.0);
        let blob: Vec<u8> = st.conn.query_row("SELECT hist FROM interval_targets", [], |r| r.get(0)).unwrap();
        assert!(blob.is_empty(), "no second copy of the histogram");
        let n: i64 = st.conn.query_row("SELECT count(*) FROM target_samples", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 0, "nor of the samples");
        st.end_step(step, &held).unwrap();
        let back = st.load(run).unwrap();
        let rec = &back.workloads[0].steps[0];
        assert_eq!(rec.total.targets, held.total.targets);
        assert_eq!(rec.intervals, held.intervals);
    }

    /// Found in review of issue 21: every run reads each step's intervals back at its end, one
    /// at a time, and the samples of each were found by their step alone: a scan of the whole
    /// step per interval (intervals² row visits; a day of 1 s intervals, some 7.5·10⁹). Both
    /// look-ups go straight to their rows, in order, without a sort.
    #[test]
    fn a_step_s_intervals_and_samples_are_found_by_index() {
        let dir = tempfile::tempdir().unwrap();
        let st = Store::open(&dir.path().join("r.db")).unwrap();
        let plan = |sql: &str, n: usize| -> String {
            let q = format!("EXPLAIN QUERY PLAN {sql}");
            let mut p = st.conn.prepare(&q).unwrap();
            let args: Vec<Option<i64>> = vec![Some(1); n];
            let rows = p.query_map(rusqlite::params_from_iter(args), |r| r.get::<_, String>(3)).unwrap();
            rows.map(|r| r.unwrap()).collect::<Vec<_>>().join("; ")
        };
        let intervals = plan(read::INTERVALS_OF, 2);
        assert!(intervals.contains("USING INDEX intervals_step_host (step_id=? AND host=?)"), "{intervals}");
        let figures = plan(read::FIGURES_OF, 2);
        assert!(figures.contains("USING INDEX intervals_step_host (step_id=? AND host=?)"), "{figures}");
        let samples = plan(read::SAMPLES_OF, 3);
        assert!(
            samples.contains("USING INDEX samples_interval (step_id=? AND host=? AND interval_idx=?)"),
            "{samples}"
        );
        for p in [&intervals, &figures, &samples] {
            assert!(!p.contains("TEMP B-TREE"), "no sort: {p}");
        }
    }

    /// Issue 21: reading a step back held every interval's decoded histograms at once (some
    /// 200 KiB each: `show` of a step of 1,200 intervals took 540 MB, a day of 1 s intervals
    /// would take 37 GB). It holds one interval's at a time.
    #[test]
    fn a_long_step_is_read_back_one_interval_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let mut st = Store::open(&dir.path().join("r.db")).unwrap();
        let run = st.begin_run(&NewRun::default()).unwrap();
        let wl = st.begin_workload(run, 0, "w", "{}").unwrap();
        let step = st.begin_step(wl, 0, &StepRecord::new(1, 1, 1, 1.0, 1.0)).unwrap();
        let cpu = CpuUsage::default();
        let s = interval(1000, 3);
        // 1,500 intervals: some 600 MB of histograms held at once by the reader before.
        for i in 0..1500 {
            st.add_interval(step, None, i, &s, &cpu, 1.0).unwrap();
        }
        st.end_step(step, &StepRecord::new(1, 1, 1, 1.0, 1.0)).unwrap();
        let peak_kib = || {
            let status = std::fs::read_to_string("/proc/self/status").unwrap();
            let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
            line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap()
        };
        // "5" resets the peak to the resident memory of now.
        std::fs::write("/proc/self/clear_refs", "5").unwrap();
        let before = peak_kib();
        let back = st.load(run).unwrap();
        let grew_mib = (peak_kib() - before) as f64 / 1024.0;
        assert_eq!(back.workloads[0].steps[0].intervals.len(), 1500);
        assert!(grew_mib < 100.0, "reading the step back took {grew_mib:.0} MiB more at its peak");
    }

    /// Issue 44: each second's histogram is stored with the step's samples (v28) and comes back
    /// as written; a host's own seconds keep none; a damaged one is a clear error.
    #[test]
    fn second_histograms_round_trip_and_damage_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut st = Store::open(&dir.path().join("r.db")).unwrap();
        let run = st.begin_run(&NewRun::default()).unwrap();
        let wl = st.begin_workload(run, 0, "w", "{}").unwrap();
        let step = st.begin_step(wl, 0, &StepRecord::new(4, 2, 1, 2.0, 1.0)).unwrap();
        let s = interval(40_000, 31);
        st.add_interval(step, None, 0, &s, &CpuUsage::default(), 2.0).unwrap();
        st.add_interval(step, Some(0), 0, &s, &CpuUsage::default(), 2.0).unwrap();
        st.end_step(step, &StepRecord::new(1, 1, 1, 1.0, 1.0)).unwrap();
        let stored: i64 =
            st.conn.query_row("SELECT count(*) FROM samples WHERE hist IS NOT NULL", [], |r| r.get(0)).unwrap();
        assert_eq!(stored, 2, "the step's two seconds, not the host's");
        let back = st.load(run).unwrap();
        let iv = &back.workloads[0].steps[0].intervals[0];
        assert_eq!(iv.seconds, s.seconds.to_sparse());
        assert_eq!(iv.seconds[0].count(), 16);
        assert_eq!(iv.seconds[1].count(), 15);
        st.conn.execute("UPDATE samples SET hist = X'0200' WHERE idx = 1 AND host IS NULL", []).unwrap();
        let e = st.load(run).unwrap_err().to_string();
        assert!(e.contains("interval 0") && e.contains("format 2"), "{e}");
        st.conn.execute("UPDATE samples SET hist = X'0102' WHERE idx = 1 AND host IS NULL", []).unwrap();
        let e = st.load(run).unwrap_err().to_string();
        assert!(e.contains("a histogram of 1 I/Os for a sample of 15"), "{e}");
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
        let mut proto = StepRecord::new(4, 2, 1, 1.0, 0.5);
        proto.measured_from_unix_ns = Some(1_795_300_000_123_456_789);
        let step = st.begin_step(wl, 0, &proto).unwrap();
        let cpu = CpuUsage { user: 10.0, system: 5.0, iowait: 1.0, steal: 2.5, own: Some(4.0) };
        // The second interval trims too (issue 40): its own counts, histogram and errors.
        let mut trimmed = interval(3000, 70);
        trimmed.trim.record(250_000, 1 << 20);
        trimmed.trim.record(350_000, 1 << 20);
        trimmed.trim.errors.add(0, 95, 1);
        let ivs = [interval(1000, 50), trimmed];
        for (i, s) in ivs.iter().enumerate() {
            st.add_interval(step, None, i as u32, s, &cpu, 1.0).unwrap();
        }
        st.end_step(step, &StepRecord::new(1, 1, 1, 1.0, 1.0)).unwrap();
        st.add_reclaim(run, 0, "{\"name\":\"thin\"}").unwrap();
        st.finish_run(run, "complete", "t", "[]").unwrap();

        let back = st.load(run).unwrap();
        assert_eq!(back.run.label, "4 controllers");
        assert_eq!(back.run.status, "complete");
        assert_eq!(back.run.headlines_json.as_deref(), Some("[]"));
        assert_eq!(back.reclaims, vec!["{\"name\":\"thin\"}".to_string()]);
        let rec = &back.workloads[0].steps[0];
        let mut expected = proto.clone();
        for s in ivs {
            expected.push_interval(s, cpu, 1.0);
        }
        assert_eq!(rec.intervals, expected.intervals, "figures, samples and CPU come back");
        assert_eq!(rec.total, expected.total, "histograms, counters and errors come back exactly");
        assert!(!rec.interrupted);
        assert_eq!(rec.measured_from_unix_ns, proto.measured_from_unix_ns);

        // The per-step view gives the step's throughput as the analysis computes it.
        let (n, iops, mbps, reads, from, trims): (i64, f64, f64, f64, i64, f64) = st
            .conn
            .query_row(
                "SELECT intervals, iops, mb_per_s, read_iops, measured_from_unix_ns, trim_iops FROM step_summary WHERE run_id = ?1 AND workload = 'w' AND step = 0",
                [run],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)),
            )
            .unwrap();
        let t = &expected.total;
        assert_eq!(n, 2);
        assert_eq!(t.trim.ops, 2);
        assert_eq!(trims, 1.0);
        assert_eq!(iops, (t.read.ops + t.write.ops + t.trim.ops) as f64 / 2.0);
        assert_eq!(mbps, (t.read.bytes + t.write.bytes) as f64 / 2.0 / 1e6, "a trim moves no data");
        assert_eq!(reads, t.read.ops as f64 / 2.0);
        assert_eq!(from, 1_795_300_000_123_456_789);
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
        st.add_step_host(step, 0, "a:7420", "alpha", 1_000, (2, 4)).unwrap();
        // An uneven host (issue 41): its own workers, a quarter of the step's.
        st.add_step_host(step, 1, "b:7420", "beta", 1_400, (2, 1)).unwrap();
        let mut hosts = [StepRecord::new(4, 1, 2, 1.0, 1.0), StepRecord::new(1, 1, 2, 1.0, 1.0)];
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
                clock: HostClock {
                    offset_ns: -250_000,
                    rtt_ns: 80_000,
                    offset_after_ns: Some(199_000_000),
                    rtt_after_ns: 70_000,
                },
                record: a,
            },
            HostRecord {
                address: "b:7420".into(),
                hostname: "beta".into(),
                started_unix_ns: 1_400,
                lost_at_s: Some(1.2),
                clock: HostClock { offset_ns: 3, rtt_ns: 9, offset_after_ns: None, rtt_after_ns: 0 },
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
                (&got.address, &got.hostname, got.started_unix_ns, got.clock),
                (&want.address, &want.hostname, want.started_unix_ns, want.clock)
            );
            assert_eq!(got.lost_at_s, want.lost_at_s);
            // A host's intervals are parts of the step's: their targets are kept with the step's.
            assert_eq!(got.record.total, IntervalStats { targets: Vec::new(), ..want.record.total.clone() });
            // Nor their seconds' histograms (v28: the step's alone).
            let parts: Vec<IntervalRecord> = want
                .record
                .intervals
                .iter()
                .map(|i| IntervalRecord { targets: Vec::new(), seconds: Vec::new(), ..i.clone() })
                .collect();
            assert_eq!(got.record.intervals, parts);
            assert_eq!(got.record.workers, want.record.workers, "each host's own workers");
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
        let cpu = CpuUsage { user: 1.0, system: 2.0, iowait: 3.0, ..Default::default() };
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
        assert_eq!(back.run.headlines_json, None, "no headlines yet: `runs` computes them once");
        assert_eq!(back.workloads.len(), 1);
        assert_eq!(back.workloads[0].json, "{\"name\":\"w\"}");
        let mut expected = proto.clone();
        for mut s in ivs {
            // What v1 did not record comes back as unknown.
            for e in &mut s.write.errors.0 {
                e.0 = UNKNOWN_TARGET;
            }
            s.targets.clear();
            // Nor did it keep seconds' histograms (v28).
            s.seconds = Default::default();
            expected.push_interval(s, cpu, 1.0);
        }
        let rec = &back.workloads[0].steps[0];
        assert_eq!(rec.intervals, expected.intervals, "figures, samples and CPU survive the migration");
        assert_eq!(rec.total, expected.total, "histograms, counters and errors survive the migration");
        st.set_headlines(run, "[]").unwrap();
        assert_eq!(st.run(run).unwrap().headlines_json.as_deref(), Some("[]"));
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

    /// Issue 35, finding 4: a step after a host was lost ran on fewer hosts with nothing to
    /// compare that with. Each step now keeps the hosts it was planned on; a v18 database gets
    /// the most hosts any step of the same run ran on, per run; and the run's `host` can be
    /// rewritten to mark a host lost mid-run.
    #[test]
    fn regression_steps_keep_their_planned_hosts_and_a_v18_database_migrates() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("v18.db");
        // A step is loaded with its intervals (one each).
        let one_interval = |st: &mut Store, step: i64| {
            // (Without the targets' parts of v25.)
            st.add_interval(
                step,
                None,
                0,
                &IntervalStats { targets: Vec::new(), seconds: Default::default(), ..interval(1000, 10) },
                &CpuUsage::default(),
                1.0,
            )
            .unwrap()
        };
        let (two, one) = {
            let mut st = Store::open_at(&p, 18).unwrap();
            let mut runs = Vec::new();
            for hosts in [&[2, 2, 1][..], &[1, 1][..]] {
                let run = st.begin_run(&NewRun::default()).unwrap();
                let wl = st.begin_workload(run, 0, "w", "{}").unwrap();
                for (i, h) in hosts.iter().enumerate() {
                    st.conn
                        .execute(
                            "INSERT INTO steps (workload_id, idx, workers, queue_depth, threads, interval_s, sample_s, hosts) VALUES (?1, ?2, 1, 1, 1, 1.0, 1.0, ?3)",
                            params![wl, i as i64, h],
                        )
                        .unwrap();
                    let step = st.conn.last_insert_rowid();
                    one_interval(&mut st, step);
                }
                runs.push(run);
            }
            (runs[0], runs[1])
        };
        let mut st = Store::open(&p).unwrap();
        let planned = |st: &Store, run| -> Vec<(u32, u32)> {
            st.load(run).unwrap().workloads[0].steps.iter().map(|s| (s.hosts, s.planned_hosts)).collect()
        };
        assert_eq!(planned(&st, two), [(2, 2), (2, 2), (1, 2)], "the step after the loss: 1 of 2 planned hosts");
        assert_eq!(planned(&st, one), [(1, 1), (1, 1)], "each run its own");
        // A new step keeps what it was planned on.
        let wl = st.begin_workload(one, 1, "v", "{}").unwrap();
        let mut rec = StepRecord::new(1, 1, 1, 1.0, 1.0);
        (rec.hosts, rec.planned_hosts) = (2, 3);
        let step = st.begin_step(wl, 0, &rec).unwrap();
        one_interval(&mut st, step);
        let back = st.load(one).unwrap();
        assert_eq!((back.workloads[1].steps[0].hosts, back.workloads[1].steps[0].planned_hosts), (2, 3));
        st.set_host_json(one, "{\"lost\":1}").unwrap();
        assert_eq!(st.load(one).unwrap().host_json, "{\"lost\":1}");
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
            // As v2 to v11 finished a run: with its line formatted for `iocurve runs`.
            st.conn
                .execute(
                    "UPDATE runs SET status = 'complete', finished_at = 't', summary = 'w 1 IOPS' WHERE id = ?1",
                    [run],
                )
                .unwrap();
            run
        };
        let mut st = Store::open(&p).unwrap();
        assert_eq!(st.schema_version().unwrap(), MIGRATIONS.len() as i64);
        let back = st.run(old).unwrap();
        assert_eq!((back.label.as_str(), back.status.as_str(), back.status_reason), ("v8", "complete", None));
        assert_eq!(back.headlines_json, None, "v12 stores figures, not the formatted line: computed when listed");
        assert_eq!(st.verification(old).unwrap(), None);

        let run = st.begin_run(&NewRun::default()).unwrap();
        let v = FinalVerification {
            map: "m.map".into(),
            bs: 4096,
            started_at: "t0".into(),
            finished_at: "t1".into(),
            counts: VerifyCounts {
                checked: 100,
                lost: 2,
                corrupt: 1,
                misplaced: 0,
                unreadable: 4,
                examples: vec!["a block 3: lost".into(), "a block 9: corrupted".into()],
                in_flight: 0,
            },
            unlisted: 0,
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
