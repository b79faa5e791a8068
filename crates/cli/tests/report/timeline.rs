//! The whole run in time (issue 44) in a real Chromium: every workload's line on the run's
//! clock, each target's beside them, the marks as red lines there and on the step's own
//! timeline, and their table.

use serde_json::Value;

use crate::browser::Browser;
use crate::util::*;

/// Opaque pixels of `rgb` in the canvas of the chart `selector`.
fn pixels(b: &mut Browser, selector: &str, rgb: (u8, u8, u8)) -> u64 {
    let js = format!(
        "(() => {{ const c = document.querySelector({selector:?} + ' canvas'); if (!c) return -1;
           const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0;
           for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 200 && Math.abs(d[i] - {}) < 12 && Math.abs(d[i + 1] - {}) < 12 && Math.abs(d[i + 2] - {}) < 12) n++;
           return n; }})()",
        rgb.0, rgb.1, rgb.2
    );
    let v: Value = b.eval(&js);
    v.as_i64().map_or(0, |n| n.max(0) as u64)
}

/// Pixels of `rgb` in the chart with every other line hidden, then shown again as they were:
/// lines that coincide (a latency spike on one target sets the scale and flattens both) would
/// otherwise hide the one drawn first (CI of 4e0c354, a loaded machine: `target-lat`).
fn pixels_alone(b: &mut Browser, selector: &str, rgb: (u8, u8, u8)) -> u64 {
    let color = format!("#{:02x}{:02x}{:02x}", rgb.0, rgb.1, rgb.2);
    b.eval(&format!(
        "(() => {{ const u = document.querySelector({selector:?}).uplot;
           u.iocShown = u.series.map(s => s.show);
           u.series.forEach((s, i) => {{ if (i > 0 && (u.ioc.specs[i].color || '').toLowerCase() !== {color:?}) u.setSeries(i, {{show: false}}); }}); }})()"
    ));
    let n = pixels(b, selector, rgb);
    b.eval(&format!(
        "(() => {{ const u = document.querySelector({selector:?}).uplot;
           u.series.forEach((s, i) => {{ if (i > 0) u.setSeries(i, {{show: u.iocShown[i]}}); }}); }})()"
    ));
    n
}

#[test]
fn the_run_in_time_draws_every_workload_and_target_with_the_marks() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let plan = "targets = [\"a.dat\", \"b.dat\"]\n[[workloads]]\nname = \"reads\"\nread_pct = 100\nramp = [1, 2]\nwarmup_s = 0\nintervals = 3\ninterval_s = 0.5\n[[workloads]]\nname = \"writes\"\nread_pct = 0\nramp = [1]\nwarmup_s = 0\nintervals = 3\ninterval_s = 0.5\n";
    std::fs::write(d.join("p.toml"), plan).unwrap();
    let o = iocurve(d, &["run", "p.toml", "--size", "32m"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // A mark in the middle of the second step of `reads`: on the run's timeline and that step's.
    let o = iocurve(d, &["export", "1", "--format", "json", "-o", "r.json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: Value = serde_json::from_slice(&std::fs::read(d.join("r.json")).unwrap()).unwrap();
    let start = iocurve_stats::date::parse_timestamp(r["started_at"].as_str().unwrap(), None).unwrap();
    let second = &steps(&r, 0)[1];
    let mid = second["measured_from_unix_ns"].as_i64().unwrap() + 750_000_000;
    let at = format!("+{:.3}", (mid - start) as f64 / 1e9);
    let o = iocurve(d, &["mark", "--run", "1", "--at", &at, "controller B pulled"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // The array's CPU beside it, a point a second (Unix seconds), over the whole run.
    let mut csv = String::from("time,cpu\n");
    for k in 0..((mid - start) / 1_000_000_000 * 2 + 8) {
        csv += &format!("{},{}\n", start / 1_000_000_000 + k, 40 + k % 7);
    }
    std::fs::write(d.join("cpu.csv"), csv).unwrap();
    let o = iocurve(d, &["array", "--run", "1", "cpu.csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = iocurve(d, &["report", "1", "-o", "r.html"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = d.join("r.html");
    let mut b = Browser::launch();
    b.open(&page);
    assert!(b.errors().is_empty(), "no console errors: {:#?}", b.errors());
    // Throughput, latency, each target's throughput and latency: drawn, with their legends.
    let legends = b.eval(
        "Array.from(document.querySelectorAll('#timeline .chart[data-timeline]')).map(c => ({chart: c.dataset.timeline,
           names: Array.from(c.querySelectorAll('.legend .name')).map(e => e.textContent)}))",
    );
    let charts: Vec<&str> = legends.as_array().unwrap().iter().map(|l| l["chart"].as_str().unwrap()).collect();
    assert_eq!(charts, ["tput", "lat", "targets", "target-lat", "array"]);
    assert_eq!(legends[4]["names"], serde_json::json!(["cpu"]));
    assert_eq!(legends[0]["names"], serde_json::json!(["reads IOPS", "writes IOPS"]));
    let targets: Vec<String> =
        legends[2]["names"].as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_string()).collect();
    assert!(
        targets.len() == 2 && targets[0].ends_with("a.dat IOPS") && targets[1].ends_with("b.dat IOPS"),
        "{targets:?}"
    );
    const GREEN: (u8, u8, u8) = (0x2c, 0xa0, 0x2c);
    const PURPLE: (u8, u8, u8) = (0x94, 0x67, 0xbd);
    const MARK: (u8, u8, u8) = (0xd6, 0x27, 0x28);
    for c in ["tput", "lat", "targets", "target-lat", "array"] {
        let sel = format!("#timeline [data-timeline={c}]");
        assert!(pixels_alone(&mut b, &sel, GREEN) >= 20, "{c}: drawn");
        assert!(c == "array" || pixels_alone(&mut b, &sel, PURPLE) >= 20, "{c}: both lines drawn");
        assert!(pixels(&mut b, &sel, MARK) >= 40, "{c}: the mark's line");
    }
    let row = b.eval("Array.from(document.querySelectorAll('#timeline table.marks td')).map(e => e.textContent)");
    let row: Vec<&str> = row.as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(row[2..], ["reads step 2, 2 workers", "controller B pulled", "given"], "{row:?}");
    // The step's own timeline: the mark at the step it fell in, and none at the other.
    let choose = |b: &mut Browser, workers: &str| {
        b.eval(&format!(
            "(() => {{ const e = document.querySelector('section.group .step-select'); e.value = '{workers}'; e.dispatchEvent(new Event('change')); }})()"
        ));
    };
    let step_timeline = "section.group [data-chart=timeline]";
    choose(&mut b, "2");
    assert!(pixels(&mut b, step_timeline, MARK) >= 40, "the mark on step 2's timeline");
    choose(&mut b, "1");
    assert_eq!(pixels(&mut b, step_timeline, MARK), 0, "no mark on step 1's");
    // Each exports as SVG, its lines and the mark's text in it.
    let svgs = b.eval(
        "Array.from(document.querySelectorAll('#timeline .chart[data-timeline]')).map(c => { try { const t = iocurveExport.svg(c);
           return {paths: (t.match(/<path/g) || []).length, mark: t.includes('controller B pulled'), name: t.includes('run-timeline-')}; }
           catch (e) { return {error: String(e)}; } })",
    );
    for s in svgs.as_array().unwrap() {
        assert!(s["error"].is_null() && s["paths"].as_u64().unwrap() >= 1 && s["mark"] == true, "{s}");
    }
    assert!(b.errors().is_empty(), "{:#?}", b.errors());
}
