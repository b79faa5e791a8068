//! A run's marks (schema v26, issue 44): written as they come, by the running coordinator's
//! mark endpoint on a connection of its own, or imported after the run.

use iocurve_stats::Mark;
use iocurve_stats::marks::MARKS_PER_RUN;
use rusqlite::params;

use super::*;

impl Store {
    /// The database's path, as opened.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Adds marks to run `run_id` in one transaction; refused (nothing added) when the run would
    /// keep more than [`MARKS_PER_RUN`].
    pub fn add_marks(&mut self, run_id: i64, marks: &[Mark]) -> Result<()> {
        self.run(run_id)?;
        let have = self.marks(run_id)?.len();
        if have + marks.len() > MARKS_PER_RUN {
            let message = format!(
                "run {run_id} keeps at most {MARKS_PER_RUN} marks; it has {have}, and {} more would pass that",
                marks.len()
            );
            return Err(StoreError::Invalid { path: self.path.clone(), message });
        }
        let path = self.path.clone();
        let wrap = |source| StoreError::Sql { path: path.clone(), source };
        let tx = self.conn.transaction().map_err(wrap)?;
        {
            let mut st = tx
                .prepare_cached("INSERT INTO marks (run_id, at_unix_ns, text, source) VALUES (?1, ?2, ?3, ?4)")
                .map_err(wrap)?;
            for m in marks {
                st.execute(params![run_id, m.at_unix_ns, m.text, m.source]).map_err(wrap)?;
            }
        }
        tx.commit().map_err(wrap)
    }

    /// A run's marks in time order (those of one moment in the order they came).
    pub fn marks(&self, run_id: i64) -> Result<Vec<Mark>> {
        let mut st = self.sql(
            self.conn.prepare("SELECT at_unix_ns, text, source FROM marks WHERE run_id = ?1 ORDER BY at_unix_ns, id"),
        )?;
        let rows = st.query_map([run_id], |r| {
            let at: i64 = r.get(0)?;
            Ok(Mark { at_unix_ns: at, at: iocurve_stats::date::rfc3339_ns(at), text: r.get(1)?, source: r.get(2)? })
        });
        self.sql(rows.and_then(|m| m.collect()))
    }
}

impl Store {
    /// Sets the array's series of run `run_id` (issue 44): a series of a name stored before is
    /// replaced (a file imported again is one import), in one transaction.
    pub fn set_array(&mut self, run_id: i64, series: &[iocurve_stats::array::ArraySeries]) -> Result<()> {
        self.run(run_id)?;
        let path = self.path.clone();
        let wrap = |source| StoreError::Sql { path: path.clone(), source };
        let tx = self.conn.transaction().map_err(wrap)?;
        {
            let mut del =
                tx.prepare_cached("DELETE FROM array_points WHERE run_id = ?1 AND series = ?2").map_err(wrap)?;
            let mut ins = tx
                .prepare_cached(
                    "INSERT INTO array_points (run_id, series, kind, at_unix_ns, value) VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .map_err(wrap)?;
            for s in series {
                del.execute(params![run_id, s.name]).map_err(wrap)?;
                for &(at, v) in &s.points {
                    ins.execute(params![run_id, s.name, s.kind, at, v]).map_err(wrap)?;
                }
            }
        }
        tx.commit().map_err(wrap)
    }

    /// The array's series of a run, by name, each in time order.
    pub fn array(&self, run_id: i64) -> Result<Vec<iocurve_stats::array::ArraySeries>> {
        let mut st = self.sql(self.conn.prepare(
            "SELECT series, kind, at_unix_ns, value FROM array_points WHERE run_id = ?1 ORDER BY series, at_unix_ns",
        ))?;
        let rows = st.query_map([run_id], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?, r.get::<_, f64>(3)?))
        });
        let rows: Vec<(String, String, i64, f64)> = self.sql(rows.and_then(|m| m.collect()))?;
        let mut out: Vec<iocurve_stats::array::ArraySeries> = Vec::new();
        for (name, kind, at, v) in rows {
            match out.last_mut().filter(|s| s.name == name) {
                Some(s) => s.points.push((at, v)),
                None => out.push(iocurve_stats::array::ArraySeries { name, kind, points: vec![(at, v)] }),
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Marks come back in time order whoever wrote them (a second connection as the mark
    /// endpoint has), go with their run, and stop at the most a run keeps.
    #[test]
    fn marks_are_kept_in_time_order_and_go_with_their_run() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        let mut st = Store::open(&path).unwrap();
        let run = st.begin_run(&NewRun::default()).unwrap();
        let m = |at: i64, text: &str| Mark::new(at, text, "live").unwrap();
        st.add_marks(run, &[m(2_000_000_000, "controller B back")]).unwrap();
        // The endpoint's own connection, while the run's is open.
        let mut other = Store::open_existing(&path).unwrap();
        other.add_marks(run, &[m(1_000_000_000, "controller B pulled")]).unwrap();
        let back = st.marks(run).unwrap();
        assert_eq!(
            back.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(),
            ["controller B pulled", "controller B back"]
        );
        assert_eq!(back[0].at, "1970-01-01T00:00:01.000Z");
        assert!(matches!(st.add_marks(99, &[m(0, "x")]), Err(StoreError::NoSuchRun(99))));
        let many: Vec<Mark> = (0..MARKS_PER_RUN as i64).map(|i| m(i, "x")).collect();
        let e = st.add_marks(run, &many).unwrap_err().to_string();
        assert!(e.contains("at most 1000 marks; it has 2"), "{e}");
        assert_eq!(st.marks(run).unwrap().len(), 2, "nothing of a refused batch is kept");
        st.delete(run).unwrap();
        let n: i64 = st.conn.query_row("SELECT count(*) FROM marks", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 0);
    }

    /// The array's series come back by name in time order; one imported again replaces the
    /// one before; they go with their run.
    #[test]
    fn the_arrays_series_are_replaced_not_added() {
        use iocurve_stats::array::ArraySeries;
        let dir = tempfile::tempdir().unwrap();
        let mut st = Store::open(&dir.path().join("a.db")).unwrap();
        let run = st.begin_run(&NewRun::default()).unwrap();
        let s = |name: &str, kind: &str, pts: &[(i64, f64)]| ArraySeries {
            name: name.into(),
            kind: kind.into(),
            points: pts.to_vec(),
        };
        st.set_array(run, &[s("fe iops", "iops", &[(2, 20.0), (1, 10.0)]), s("cpu", "", &[(1, 40.0)])]).unwrap();
        st.set_array(run, &[s("fe iops", "iops", &[(3, 30.0)])]).unwrap();
        assert_eq!(st.array(run).unwrap(), [s("cpu", "", &[(1, 40.0)]), s("fe iops", "iops", &[(3, 30.0)])]);
        assert!(matches!(st.set_array(7, &[]), Err(StoreError::NoSuchRun(7))));
        st.delete(run).unwrap();
        let n: i64 = st.conn.query_row("SELECT count(*) FROM array_points", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 0);
    }
}
