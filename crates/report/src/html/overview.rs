//! The report's first page (issue 43): per run the summary that pastes into a document, its
//! parameters and key figures; the block size × read share matrices with their charts; and,
//! for a comparison, every run beside the baseline in one table that fits the page.

use iocurve_analysis::overview::{self as figures, Matrix};
use serde::Serialize;
use serde_json::{Value, json};

use super::{Group, PALETTE, ReportRun};
use crate::overview::{self, KEY_HEADERS};
use crate::terminal;

#[derive(Serialize)]
pub(super) struct OverviewView {
    pub title: String,
    pub opening: String,
    pub lines: Vec<String>,
    pub closing: Option<String>,
    /// The same as plain text, for the copy button and its own box.
    pub text: String,
    pub parameters: Vec<(String, String)>,
    pub key_headers: Vec<&'static str>,
    /// A row per workload: its cells, and whether it is cache-only (a frontend).
    pub keys: Vec<(Vec<String>, bool)>,
}

pub(super) fn overviews(runs: &[ReportRun]) -> Vec<OverviewView> {
    runs.iter()
        .map(|r| {
            let block = overview::summary_block(&r.title(), &r.result);
            OverviewView {
                title: r.title(),
                text: block.text(),
                opening: block.opening,
                lines: block.lines,
                closing: block.closing,
                parameters: overview::parameters(&r.result, &r.plan),
                key_headers: KEY_HEADERS.to_vec(),
                keys: overview::key_rows(&r.result).into_iter().map(|k| (k.cells.to_vec(), k.cache_only)).collect(),
            }
        })
        .collect()
}

/// A matrix as the report shows it: its tables, and (by `id`) the charts drawn from `data`.
#[derive(Serialize)]
pub(super) struct MatrixView {
    pub id: String,
    pub title: String,
    pub tables: Vec<(String, Vec<String>, Vec<Vec<String>>)>,
    /// Over block size: at least two block sizes.
    pub over_size: bool,
    /// The block sizes with several read shares: a chart each, the read, mixed and write
    /// curves together.
    pub together: Vec<String>,
    /// Workloads of an occupied cell, in words.
    pub left_out: Vec<String>,
}

/// The matrices of every run as views and as the data their charts draw: a curve per read
/// share over block size (IOPS, MB/s, min latency at each), and per block size the chart
/// series (`[group, series]` in the report's data) of its read shares.
pub(super) fn matrices(runs: &[ReportRun], groups: &[Group]) -> (Vec<MatrixView>, Vec<Value>) {
    let mut views = Vec::new();
    let mut data = Vec::new();
    for (ri, r) in runs.iter().enumerate() {
        for m in figures::matrices(&r.result) {
            let id = format!("m{}", views.len());
            let title = if runs.len() > 1 { format!("{}: {}", r.title(), m.title) } else { m.title.clone() };
            let tables = overview::matrix_tables(&r.result, &m)
                .into_iter()
                .filter(|t| t.rows.iter().any(|row| row[1..].iter().any(|c| c != "—")))
                .map(|t| (t.what.to_string(), t.header, t.rows))
                .collect();
            let series_of = |wi: usize| {
                let w = &r.result.workloads[wi];
                groups.iter().enumerate().find_map(|(gi, g)| {
                    g.members.iter().position(|&(mr, mw)| mr == ri && mw.name == w.name).map(|si| (gi, si))
                })
            };
            let together: Vec<(String, Vec<Value>)> = m
                .block_sizes
                .iter()
                .zip(&m.cells)
                .filter(|(_, row)| row.iter().flatten().count() > 1)
                .map(|((bs, _), row)| {
                    let refs = row
                        .iter()
                        .enumerate()
                        .filter_map(|(k, c)| {
                            let (gi, si) = series_of((*c)?)?;
                            Some(json!({"group": gi, "series": si, "label": Matrix::share_name(m.read_shares[k]),
                                "color": PALETTE[k % PALETTE.len()]}))
                        })
                        .collect();
                    (bs.clone(), refs)
                })
                .collect();
            // Every workload's series, for what an exported chart names (its `about`).
            let members: Vec<Value> = m
                .cells
                .iter()
                .flatten()
                .flatten()
                .filter_map(|&wi| series_of(wi))
                .map(|(gi, si)| json!({"group": gi, "series": si}))
                .collect();
            let mut d = matrix_data(&id, r, &m, &together);
            d["run"] = json!(ri);
            d["members"] = json!(members);
            data.push(d);
            views.push(MatrixView {
                id,
                title,
                tables,
                over_size: m.block_sizes.len() > 1,
                together: together.into_iter().map(|(bs, _)| bs).collect(),
                left_out: m.left_out.clone(),
            });
        }
    }
    (views, data)
}

fn matrix_data(id: &str, r: &ReportRun, m: &Matrix, together: &[(String, Vec<Value>)]) -> Value {
    let at = |wi: Option<usize>, f: &dyn Fn(&iocurve_analysis::WorkloadResult) -> Option<f64>| {
        wi.and_then(|i| f(&r.result.workloads[i])).map_or(Value::Null, |v| super::charts::sig(v, 4))
    };
    let curves: Vec<Value> = m
        .read_shares
        .iter()
        .enumerate()
        .map(|(k, &pct)| {
            let column: Vec<Option<usize>> = m.cells.iter().map(|row| row[k]).collect();
            json!({
                "label": Matrix::share_name(pct),
                "color": PALETTE[k % PALETTE.len()],
                "iops": column.iter().map(|&c| at(c, &|w| w.maximum.map(|p| p.iops))).collect::<Vec<_>>(),
                "mbps": column.iter().map(|&c| at(c, &|w| w.maximum.map(|p| p.mbps))).collect::<Vec<_>>(),
                "min_lat": column.iter().map(|&c| at(c, &|w| w.min_lat_us)).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "id": id,
        "title": m.title,
        "sequential": m.sequential,
        "unit": if m.sequential { "MB/s" } else { "IOPS" },
        "sizes": m.block_sizes.iter().map(|(s, _)| s).collect::<Vec<_>>(),
        "bytes": m.block_sizes.iter().map(|(_, b)| b).collect::<Vec<_>>(),
        "curves": curves,
        "together": together.iter().map(|(bs, refs)| json!({"bs": bs, "series": refs})).collect::<Vec<_>>(),
    })
}

/// A run's cell: its figure, its change against the baseline, and the change's class.
type GlanceCell = (String, String, &'static str);

/// Every run beside the baseline at one point, a column per run: what a four-run comparison
/// ("4, 3, 2, 1 controllers") prints on one page.
#[derive(Serialize)]
pub(super) struct GlanceView {
    pub at: &'static str,
    pub runs: Vec<String>,
    /// A row per workload (the baseline's, then those only a run has): its name as the impact
    /// tables give it, then the baseline's cell and each run's.
    pub rows: Vec<(String, Vec<GlanceCell>)>,
    /// How each run differs from the baseline in what it measured (empty: like with like).
    pub differ: Vec<String>,
}

pub(super) fn glance(runs: &[ReportRun]) -> Vec<GlanceView> {
    let Some((base, rest)) = runs.split_first().filter(|(_, rest)| !rest.is_empty()) else { return Vec::new() };
    let mut ats = vec![iocurve_analysis::At::Maximum, iocurve_analysis::At::Optimum];
    if runs.iter().any(|r| r.result.sla.is_some()) {
        ats.push(iocurve_analysis::At::Sla);
    }
    let differ: Vec<String> = rest
        .iter()
        .flat_map(|r| {
            iocurve_analysis::compare::differences(&base.result, &r.result)
                .into_iter()
                .map(move |d| format!("{}: {d}", r.title()))
        })
        .collect();
    ats.into_iter()
        .map(|at| {
            let per_run: Vec<Vec<iocurve_analysis::Impact>> =
                rest.iter().map(|r| iocurve_analysis::compare(&base.result, &r.result, at)).collect();
            // Rows by the label the impact tables give them, in the order they first come.
            let mut rows: Vec<(String, Vec<GlanceCell>)> = Vec::new();
            for (k, impacts) in per_run.iter().enumerate() {
                for i in impacts
                    .iter()
                    .filter(|i| i.baseline.is_some() || i.run.is_some() || i.baseline_undecided || i.run_undecided)
                {
                    let name = terminal::impact_workload(i);
                    let at_row = match rows.iter().position(|(n, _)| *n == name) {
                        Some(p) => p,
                        None => {
                            rows.push((name, vec![(String::new(), String::new(), ""); per_run.len() + 1]));
                            rows.len() - 1
                        }
                    };
                    let cells = &mut rows[at_row].1;
                    if cells[0].0.is_empty() {
                        cells[0].0 = terminal::impact_point(&i.baseline, i.in_mbps, i.baseline_undecided);
                    }
                    let row = super::views::impact_row(i);
                    let change = if i.baseline.is_some() && i.run.is_some() {
                        format!("{} · latency {}", row.throughput, terminal::impact_latency(i))
                    } else {
                        String::new()
                    };
                    cells[k + 1] = (row.run, change, row.throughput_class);
                }
            }
            for (_, cells) in &mut rows {
                for c in cells.iter_mut().filter(|c| c.0.is_empty()) {
                    c.0 = "—".into();
                }
            }
            GlanceView {
                at: at.name(),
                runs: runs.iter().map(ReportRun::title).collect(),
                rows,
                differ: differ.clone(),
            }
        })
        .collect()
}
