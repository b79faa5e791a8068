//! Issue 44, part 4: latency per second and in the tail. A real run of a 70/30 mix on a scratch
//! file, with 1 ms added to 3 % of the I/Os in its second second: the terminal shows reads and
//! writes apart; every second's p99 as reported (samples CSV, JSON) is what a percentile
//! computed here, independently, from the exported per-second histograms gives; and the report
//! draws the heat map and the QoS plot with data in a real headless Chromium.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::browser::Browser;
use crate::util::*;

const PLAN: &str = r#"targets = ["s.dat"]
[[faults]]
kind = "latency"
latency_ms = 1
share = 0.03
from_s = 1
to_s = 2
[[workloads]]
name = "mixed"
read_pct = 70
bs = "8k"
ramp = [1, 4]
warmup_s = 0.1
intervals = 3
interval_s = 1
"#;

/// An exported bucket: lowest ns, highest ns, I/Os, the second's slowest I/O in ns.
type Bucket = (u64, u64, u64, u64);

/// A CSV of plain fields (none of these has a comma or quote) as maps by column name.
fn rows(text: &str) -> Vec<BTreeMap<String, String>> {
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().expect("a header").split(',').collect();
    lines.map(|l| head.iter().map(|h| h.to_string()).zip(l.split(',').map(str::to_string)).collect()).collect()
}

#[test]
fn each_second_s_p99_is_what_its_exported_histogram_gives_and_the_report_draws_it() {
    let _one = crate::util::one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("p.toml"), PLAN).unwrap();
    let o = iocurve(dir.path(), &["run", "p.toml", "--size", "64m"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // The terminal: reads and writes apart, each with its mean and p99, per step.
    let out = stdout(&o);
    assert!(out.contains("latency by direction"), "{out}");
    for col in ["read IOPS", "read mean µs", "read p99 µs", "write IOPS", "write mean µs", "write p99 µs"] {
        assert!(out.contains(col), "{col} in the terminal: {out}");
    }

    for (format, file) in [("seconds", "s.csv"), ("csv", "steps.csv"), ("json", "r.json")] {
        let o = iocurve(dir.path(), &["export", "1", "--format", format, "-o", file]);
        assert!(o.status.success(), "{format}: {}", stderr(&o));
    }
    let seconds = rows(&std::fs::read_to_string(dir.path().join("s.csv")).unwrap());
    let samples = rows(&std::fs::read_to_string(dir.path().join("steps-samples.csv")).unwrap());
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();

    // Each second's buckets in order, by (step, t_s).
    let mut hists: BTreeMap<(String, String), Vec<Bucket>> = BTreeMap::new();
    for r in &seconds {
        let n = |k: &str| r[k].parse::<u64>().unwrap_or_else(|e| panic!("{k} = {:?}: {e}", r[k]));
        hists.entry((r["step"].clone(), r["t_s"].clone())).or_default().push((
            n("lat_from_ns"),
            n("lat_to_ns"),
            n("count"),
            n("lat_max_ns"),
        ));
    }
    assert_eq!(hists.len(), samples.len(), "a histogram for every second: {} of {}", hists.len(), samples.len());
    assert_eq!(samples.len(), 2 * 3, "2 steps of 3 one-second samples");
    let mut checked = 0;
    for s in &samples {
        let h = &hists[&(s["step"].clone(), s["t_s"].clone())];
        let total: u64 = h.iter().map(|b| b.2).sum();
        assert_eq!(
            total.to_string(),
            s["ops"],
            "second {} of step {}: its histogram holds its I/Os",
            s["t_s"],
            s["step"]
        );
        // Independently: the bucket where the running count first reaches ⌈0.99 × total⌉,
        // its top, capped at the second's slowest I/O.
        let rank = (total as f64 * 0.99).ceil() as u64;
        let mut seen = 0;
        let bucket = h
            .iter()
            .find(|b| {
                seen += b.2;
                seen >= rank
            })
            .unwrap();
        assert!(h.windows(2).all(|w| w[0].1 < w[1].0), "buckets in order and apart");
        let p99_us = bucket.1.min(bucket.3) as f64 / 1e3;
        let reported: f64 = s["lat_p99_us"].parse().unwrap();
        assert!((p99_us - reported).abs() < 0.0015, "second {}: {p99_us} computed, {reported} reported", s["t_s"]);
        let step: usize = s["step"].parse().unwrap();
        let k = (s["t_s"].parse::<f64>().unwrap()).round() as usize;
        let json = &doc["workloads"][0]["steps"][step]["samples"][k];
        assert!((json["p99_us"].as_f64().unwrap() - p99_us).abs() < 1e-6, "the JSON's p99: {json}");
        if k == 1 {
            assert!(p99_us >= 1000.0, "the fault's second has a p99 of its 1 ms: {p99_us} µs");
        }
        checked += 1;
    }
    assert_eq!(checked, 6);

    // The report: the heat map of the chosen step and the QoS plot, drawn with data.
    super::report(dir.path(), &["1", "-o", "r.html"]);
    let page = dir.path().join("r.html");
    let mut b = Browser::launch();
    b.open(&page);
    super::assert_clean(&b, &page);
    super::assert_all_drawn(&mut b, 7);
    // Heat: cells in the heat map's shades (warm colours: red well above blue) inside the plot.
    let heat = "(() => { const c = document.querySelector('[data-chart=heatmap] canvas');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0;
        for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 200 && d[i] > 90 && d[i] - d[i + 2] > 60) n++;
        return { cells: n, data: c.toDataURL(), caption: document.querySelector('.heatmap-caption').textContent,
          hidden: document.querySelector('figure.heatmap').hidden }; })()";
    let before = b.eval(heat);
    assert!(before["cells"].as_u64().unwrap() > 2000, "the heat map has shaded cells: {}", before["cells"]);
    assert_eq!(before["hidden"], false);
    assert!(before["caption"].as_str().unwrap().contains("Latency heat map at"), "{}", before["caption"]);
    let qos = b.eval(
        "(() => { const el = document.querySelector('[data-chart=qos]'); return { lines: el.uplot.series.length - 1,
          ticks: el.uplot.axes[0].values(el.uplot, [0, 1, 2, 3, 6]),
          x: el.uplot.data[0] }; })()",
    );
    assert_eq!(qos["lines"], 2, "a line per step: {qos}");
    assert_eq!(qos["ticks"], serde_json::json!(["0", "90", "99", "99.9", "99.9999"]), "the nines axis");
    // Each line starts at 0 % and goes as far as its step's I/Os resolve (thousands: 99.9 %+).
    let x = qos["x"].as_array().unwrap();
    assert_eq!(x[0], 0, "{qos}");
    assert!(x.last().unwrap().as_f64().unwrap() >= 3.0, "{qos}");
    // The step selector redraws the heat map for the other step.
    let other = b.eval(
        "(() => { const e = document.querySelector('.step-select'); const v = e.value === '1' ? '4' : '1';
          e.value = v; e.dispatchEvent(new Event('change')); return v; })()",
    );
    let after = b.eval(heat);
    assert_ne!(before["data"], after["data"], "the heat map was redrawn");
    assert!(after["caption"].as_str().unwrap().contains(&format!("at {} worker", other.as_str().unwrap())));
    assert!(after["cells"].as_u64().unwrap() > 2000);
    assert!(b.errors().is_empty(), "{:#?}", b.errors());
    b.screenshot(&super::artifact("report-heatmap.png"));
}
