//! Each target's part of an interval (schema v25, issue 42): written with the interval, read
//! back with it (with its histogram) or as figures (without).

use iocurve_stats::{DeviceIo, LatencyHistogram, Sample, TargetFigures, TargetStats};
use rusqlite::{Connection, params};

/// A lone target's part is the interval itself: its row keeps its counters and its device's,
/// not a second copy of the interval's histogram and samples (an empty `hist`, which reading
/// fills from the interval's).
pub(crate) fn add(tx: &Connection, interval_id: i64, targets: &[TargetStats]) -> rusqlite::Result<()> {
    let lone = targets.len() == 1;
    let mut it = tx.prepare_cached(
        "INSERT INTO interval_targets (interval_id, target, read_ops, read_bytes, write_ops, write_bytes, trim_ops, trim_bytes, errors, lat_mean_ns, hist,
                                       dev_reads, dev_read_sectors, dev_writes, dev_write_sectors, dev_discards, dev_discard_sectors)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
    )?;
    let mut ss = tx.prepare_cached(
        "INSERT INTO target_samples (interval_id, target, idx, ops, bytes, lat_sum_ns, lat_max_ns, errors) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?;
    for t in targets {
        let d = t.device;
        let dev = |f: fn(&DeviceIo) -> u64| d.as_ref().map(|d| f(d) as i64);
        it.execute(params![
            interval_id,
            t.target,
            t.read_ops as i64,
            t.read_bytes as i64,
            t.write_ops as i64,
            t.write_bytes as i64,
            t.trim_ops as i64,
            t.trim_bytes as i64,
            t.errors as i64,
            t.hist.mean_ns(),
            if lone { Vec::new() } else { t.hist.to_compressed_bytes() },
            dev(|d| d.reads),
            dev(|d| d.read_sectors),
            dev(|d| d.writes),
            dev(|d| d.write_sectors),
            dev(|d| d.discards),
            dev(|d| d.discard_sectors),
        ])?;
        for (i, s) in t.samples.iter().enumerate().filter(|_| !lone) {
            ss.execute(params![
                interval_id,
                t.target,
                i as i64,
                s.ops as i64,
                s.bytes as i64,
                s.lat_sum_ns as i64,
                s.lat_max_ns as i64,
                s.errors as i64
            ])?;
        }
    }
    Ok(())
}

/// One stored row: the target's stats but its histogram, and the histogram's bytes.
fn rows(conn: &Connection, interval_id: i64) -> rusqlite::Result<Vec<(TargetStats, Vec<u8>, f64)>> {
    let mut st = conn.prepare_cached(
        "SELECT target, read_ops, read_bytes, write_ops, write_bytes, trim_ops, trim_bytes, errors, lat_mean_ns, hist,
                dev_reads, dev_read_sectors, dev_writes, dev_write_sectors, dev_discards, dev_discard_sectors
         FROM interval_targets WHERE interval_id = ?1 ORDER BY target",
    )?;
    let n = |r: &rusqlite::Row, i: usize| r.get::<_, i64>(i).map(|v| v.max(0) as u64);
    let list = st.query_map([interval_id], |r| {
        let device = match r.get::<_, Option<i64>>(10)? {
            None => None,
            Some(_) => Some(DeviceIo {
                reads: n(r, 10)?,
                read_sectors: n(r, 11)?,
                writes: n(r, 12)?,
                write_sectors: n(r, 13)?,
                discards: n(r, 14)?,
                discard_sectors: n(r, 15)?,
            }),
        };
        let t = TargetStats {
            target: r.get(0)?,
            read_ops: n(r, 1)?,
            read_bytes: n(r, 2)?,
            write_ops: n(r, 3)?,
            write_bytes: n(r, 4)?,
            trim_ops: n(r, 5)?,
            trim_bytes: n(r, 6)?,
            errors: n(r, 7)?,
            device,
            ..TargetStats::empty()
        };
        Ok((t, r.get::<_, Vec<u8>>(9)?, r.get::<_, f64>(8)?))
    })?;
    let mut out: Vec<(TargetStats, Vec<u8>, f64)> = list.collect::<rusqlite::Result<_>>()?;
    let mut ss = conn.prepare_cached(
        "SELECT target, ops, bytes, lat_sum_ns, lat_max_ns, errors FROM target_samples WHERE interval_id = ?1 ORDER BY target, idx",
    )?;
    let samples = ss.query_map([interval_id], |r| {
        Ok((
            r.get::<_, u32>(0)?,
            Sample { ops: n(r, 1)?, bytes: n(r, 2)?, lat_sum_ns: n(r, 3)?, lat_max_ns: n(r, 4)?, errors: n(r, 5)? },
        ))
    })?;
    // Both in target order: one pass.
    let mut at = 0;
    for x in samples {
        let (target, s) = x?;
        while at < out.len() && out[at].0.target < target {
            at += 1;
        }
        if let Some(t) = out.get_mut(at).filter(|t| t.0.target == target) {
            t.0.samples.push(s);
        }
    }
    Ok(out)
}

/// The targets' parts of `interval` (its own stats, read before), with their histograms. Err: a
/// histogram that does not decode (the message says so).
pub(crate) fn of_interval(
    conn: &Connection,
    interval_id: i64,
    interval: &iocurve_stats::IntervalStats,
) -> Result<Vec<TargetStats>, String> {
    let mut out = Vec::new();
    for (mut t, hist, _) in rows(conn, interval_id).map_err(|e| e.to_string())? {
        if hist.is_empty() {
            // A lone target: the interval's own figures.
            t.hist = interval.combined_hist();
            t.samples = interval.samples.clone();
        } else {
            t.hist =
                LatencyHistogram::from_bytes(&hist).map_err(|e| format!("target {}'s histogram: {e}", t.target))?;
        }
        out.push(t);
    }
    Ok(out)
}

/// The targets' figures of an interval (no histogram decoded; a lone target's samples are the
/// interval's).
pub(crate) fn figures_of(
    conn: &Connection,
    interval_id: i64,
    samples: &[iocurve_stats::Sample],
) -> rusqlite::Result<Vec<TargetFigures>> {
    Ok(rows(conn, interval_id)?
        .into_iter()
        .map(|(mut t, hist, mean)| {
            if hist.is_empty() {
                t.samples = samples.to_vec();
            }
            TargetFigures { lat_mean_ns: mean, ..TargetFigures::of(&t) }
        })
        .collect())
}
