//! Live metrics (issue 18), scraped by a real Prometheus every second: the counters' increase
//! over a run equals what the store holds (ops and bytes exactly, per direction; per host for
//! a two-agent run), a latency quantile from the histogram lands in the bucket of iocurve's
//! own p99, the figures are there while the run goes on, and every query of the shipped
//! Grafana dashboard returns data.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::cluster::{AgentProc, certs, coordinator, hosts_plan};
use crate::util::*;

/// A port nobody listens on now.
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub(crate) fn http_get(addr: &str, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let code = out.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, out.split_once("\r\n\r\n").map_or(String::new(), |(_, b)| b.to_string()))
}

pub(crate) fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Prometheus on a loopback port, scraping every second: `target` as job `iocurve`, and
/// `more` (scrape configs of its own) beside it; killed on drop.
pub(crate) struct Prometheus {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(target: &str, more: &str) -> Prometheus {
        Prometheus::start_with(target, more, &[])
    }

    /// With `flags` (e.g. a feature to enable) on Prometheus' command line.
    fn start_with(target: &str, more: &str, flags: &[&str]) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n  - job_name: iocurve\n    static_configs:\n      - targets: ['{target}']\n{more}"
        );
        std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
        let addr = format!("127.0.0.1:{}", free_port());
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", dir.path().join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .args(flags)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus runs (Debian package `prometheus`, installed by scripts/test)");
        let p = Prometheus { child, addr, _dir: dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(&p.addr).is_err() || http_get(&p.addr, "/-/ready").0 != 200 {
            assert!(Instant::now() < deadline, "prometheus did not become ready");
            std::thread::sleep(Duration::from_millis(200));
        }
        p
    }

    /// An instant query's result vector: (labels, value).
    fn query(&self, q: &str) -> Vec<(Value, f64)> {
        self.query_at(q, None)
    }

    /// An instant query at `time` (Unix seconds; None: now).
    fn query_at(&self, q: &str, time: Option<f64>) -> Vec<(Value, f64)> {
        let at = time.map_or(String::new(), |t| format!("&time={t}"));
        let (code, body) = http_get(&self.addr, &format!("/api/v1/query?query={}{at}", encode(q)));
        let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{q}: {e}: {body}"));
        assert_eq!((code, v["status"].as_str()), (200, Some("success")), "{q}: {body}");
        v["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["metric"].clone(), r["value"][1].as_str().unwrap().parse::<f64>().unwrap()))
            .collect()
    }

    /// One value by the label `by` (or "" for an unlabelled result).
    fn by(&self, q: &str, by: &str) -> std::collections::BTreeMap<String, f64> {
        self.query(q).into_iter().map(|(m, v)| (m[by].as_str().unwrap_or_default().to_string(), v)).collect()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sums over the store's intervals (merged ones: `host IS NULL`; else each host's own, by its
/// address): [(key, read_ops, write_ops, read_bytes, write_bytes)].
pub(crate) fn stored(dir: &Path, per_host: bool) -> Vec<(String, u64, u64, u64, u64)> {
    let q = if per_host {
        "SELECT sh.address, SUM(i.read_ops), SUM(i.write_ops), SUM(i.read_bytes), SUM(i.write_bytes) FROM intervals i JOIN step_hosts sh ON sh.step_id = i.step_id AND sh.host = i.host GROUP BY sh.address ORDER BY sh.address"
    } else {
        "SELECT '', SUM(read_ops), SUM(write_ops), SUM(read_bytes), SUM(write_bytes) FROM intervals WHERE host IS NULL"
    };
    let py = format!(
        "import sqlite3, json; c = sqlite3.connect('iocurve.db'); print(json.dumps(c.execute(\"{q}\").fetchall()))"
    );
    let o = Command::new("python3").args(["-c", &py]).current_dir(dir).output().unwrap();
    let rows: Vec<(String, u64, u64, u64, u64)> = serde_json::from_slice(&o.stdout).unwrap();
    rows
}

/// Waits until Prometheus has scraped the final figures: the series stop changing.
pub(crate) fn settled(p: &Prometheus, q: &str) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = f64::NAN;
    loop {
        let v = p.query(q).first().map_or(f64::NAN, |r| r.1);
        if v == last {
            return v;
        }
        assert!(Instant::now() < deadline, "{q} never settled");
        last = v;
        std::thread::sleep(Duration::from_millis(1500));
    }
}

pub(crate) const WORKLOAD: &str = "[[workloads]]\nname = \"mixed\"\nread_pct = 70\nramp = [1, 2]\nwarmup_s = 0.5\nintervals = 3\ninterval_s = 1\nbackend = \"psync\"\n";
/// Rate ramps after it (IOPS, and MB/s for a sequential one), so that the dashboard's rate
/// panels have data too.
pub(crate) const PACED: &str = "[[workloads]]\nname = \"paced\"\nrate = [200]\nwarmup_s = 0.5\nintervals = 2\ninterval_s = 1\nbackend = \"psync\"\n\
[[workloads]]\nname = \"streamed\"\npattern = \"sequential\"\nbs = \"64k\"\nrate = [5]\nwarmup_s = 0.5\nintervals = 2\ninterval_s = 1\nbackend = \"psync\"\n";

#[test]
fn a_run_scraped_by_prometheus_matches_the_store_and_the_dashboard_has_data() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let target = format!("127.0.0.1:{port}");
    let prom = Prometheus::start(&target, "");
    std::fs::write(dir.path().join("plan.toml"), format!("{WORKLOAD}{PACED}")).unwrap();
    let xdg = dir.path().join("xdg");
    std::fs::create_dir(&xdg).unwrap();
    let mut run = Command::new(bin())
        .args(["run", "plan.toml", "--target", "t.dat", "--size", "64m", "--buffered", "--json", "r.json"])
        .args(["--metrics", &port.to_string(), "--metrics-hold-s", "3"])
        .current_dir(dir.path())
        .env("XDG_RUNTIME_DIR", &xdg)
        .env("TMPDIR", &xdg)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Live: while the run goes on, Prometheus already has its workers and I/O rate.
    let deadline = Instant::now() + Duration::from_secs(20);
    while prom.query("iocurve_live_iops > 0").is_empty() {
        assert!(Instant::now() < deadline, "no live figures while the run went on");
        assert!(run.try_wait().unwrap().is_none(), "the run ended before Prometheus saw it");
        std::thread::sleep(Duration::from_millis(300));
    }
    // A mark from another terminal (issue 44): an annotation of the dashboard.
    let m = Command::new(bin())
        .args(["mark", "controller B pulled"])
        .current_dir(dir.path())
        .env("XDG_RUNTIME_DIR", &xdg)
        .env("TMPDIR", &xdg)
        .output()
        .unwrap();
    assert!(m.status.success(), "{}", stderr(&m));
    let o = run.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains(&format!("live metrics on http://{target}/metrics")), "{}", stdout(&o));

    // The final counts, as scraped during the hold after the run.
    settled(&prom, "sum(max_over_time(iocurve_io_ops_total[10m]))");
    let ops = prom.by("sum by (direction) (max_over_time(iocurve_io_ops_total[10m]))", "direction");
    let bytes = prom.by("sum by (direction) (max_over_time(iocurve_io_bytes_total[10m]))", "direction");
    let s = &stored(dir.path(), false)[0];
    assert!(s.1 > 0 && s.2 > 0, "the run did reads and writes: {s:?}");
    assert_eq!((ops["read"] as u64, ops["write"] as u64), (s.1, s.2), "ops as stored");
    assert_eq!((bytes["read"] as u64, bytes["write"] as u64), (s.3, s.4), "bytes as stored");

    // The p99 of the whole run from the histogram, against iocurve's own: one step's p99 from
    // its own buckets (the run's steps, summed), within the bucket that holds it.
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let step_p99: Vec<f64> = r["workloads"][0]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["read"]["lat_us"]["p99"].as_f64().unwrap() / 1e6)
        .collect();
    let q = "histogram_quantile(0.99, sum by (le) (max_over_time(iocurve_io_latency_seconds_bucket{direction=\"read\",workload=\"mixed\"}[10m])))";
    let est = prom.query(q)[0].1;
    let bucket = |v: f64| iocurve_metrics::BUCKETS_S.iter().position(|&b| v <= b).unwrap_or(usize::MAX);
    let (lo, hi) = step_p99.iter().fold((f64::MAX, 0.0f64), |(lo, hi), &p| (lo.min(p), hi.max(p)));
    assert!(
        bucket(est) >= bucket(lo) && bucket(est) <= bucket(hi),
        "Prometheus' p99 {est} s falls in the buckets of the steps' p99 {step_p99:?}"
    );
    // The steps' own figures, as they finished.
    let step_iops = prom.by("max_over_time(iocurve_step_iops{workload=\"mixed\"}[10m])", "workers");
    for s in r["workloads"][0]["steps"].as_array().unwrap() {
        let w = s["workers"].as_u64().unwrap().to_string();
        let want = s["iops"].as_f64().unwrap();
        assert!((step_iops[&w] - want).abs() <= want * 1e-9 + 1e-6, "step at {w} workers: {} vs {want}", step_iops[&w]);
    }
    assert_eq!(prom.by("max_over_time(iocurve_run_info[10m])", "run").keys().collect::<Vec<_>>(), ["1"]);

    every_dashboard_query_returns_data(&prom);
    // The dashboard's annotation query gives the mark at its time (ms, as Grafana takes it).
    let dash: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/grafana/iocurve.json")).unwrap(),
    )
    .unwrap();
    let expr = dash["annotations"]["list"][0]["expr"].as_str().unwrap().replace("$run", ".+");
    let marked = prom.query(&format!("last_over_time(({expr})[10m:1s])"));
    let at_ms = r["marks"][0]["at_unix_ns"].as_f64().unwrap() / 1e6;
    assert_eq!(marked.len(), 1, "{marked:?}");
    assert!((marked[0].1 - at_ms).abs() < 1.0, "the annotation at {} ms, the mark at {at_ms} ms", marked[0].1);
    assert_eq!(
        prom.by(&format!("last_over_time(({expr})[10m:1s])"), "text").keys().collect::<Vec<_>>(),
        ["controller B pulled"]
    );
}

/// A Prometheus with native histograms enabled asks for the protobuf format and gets the latency
/// as native histograms: their counts hold every measured I/O, a quantile from them lies within
/// one native bucket (4.4 %) of iocurve's own, and the dashboard works on them as well.
#[test]
fn a_prometheus_with_native_histograms_gets_them_and_the_dashboard_works_on_them() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let target = format!("127.0.0.1:{port}");
    let prom = Prometheus::start_with(&target, "", &["--enable-feature=native-histograms"]);
    std::fs::write(dir.path().join("plan.toml"), format!("{WORKLOAD}{PACED}")).unwrap();
    let o = Command::new(bin())
        .args(["run", "plan.toml", "--target", "t.dat", "--size", "64m", "--buffered", "--json", "r.json"])
        .args(["--metrics", &port.to_string(), "--metrics-hold-s", "3"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let sel = "iocurve_io_latency_seconds{workload=\"mixed\",direction=\"read\"}";
    // This Prometheus' range functions drop native histograms: they are read at the last
    // scrape that had them.
    let last = settled(&prom, "max_over_time(timestamp(iocurve_io_ops_total{workload=\"mixed\"})[10m:1s])");
    let at = |q: &str| prom.query_at(q, Some(last)).first().unwrap_or_else(|| panic!("{q} at {last}: no data")).1;
    // Scraped as protobuf: the native histogram is there, the classic buckets are not.
    // (Over the whole run: by now the series are stale, and an instant query finds none.)
    assert!(!prom.query("count_over_time(iocurve_io_ops_total[10m])").is_empty());
    assert!(
        prom.query("count_over_time(iocurve_io_latency_seconds_bucket[10m])").is_empty(),
        "classic buckets ingested: not protobuf"
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let steps = r["workloads"][0]["steps"].as_array().unwrap();
    let ops: u64 = steps.iter().map(|s| s["read"]["ops"].as_u64().unwrap()).sum();
    let late: u64 = steps.iter().map(|s| s["late_ios"].as_u64().unwrap()).sum();
    let count = at(&format!("histogram_count(sum({sel}))")) as u64;
    // Every measured read, and the late I/Os a step's end adds to its latency figures.
    assert!((ops..=ops + late).contains(&count), "{count} latencies for {ops} reads and {late} late I/Os");
    let step_p99: Vec<f64> = steps.iter().map(|s| s["read"]["lat_us"]["p99"].as_f64().unwrap() / 1e6).collect();
    let est = at(&format!("histogram_quantile(0.99, sum({sel}))"));
    let (lo, hi) = step_p99.iter().fold((f64::MAX, 0.0f64), |(lo, hi), &p| (lo.min(p), hi.max(p)));
    let width = 2f64.powf(1.0 / 16.0);
    assert!(
        est >= lo / width && est <= hi * width,
        "Prometheus' p99 {est} s is within one native bucket of the steps' p99 {step_p99:?}"
    );
    every_dashboard_query_returns_data(&prom);
}

/// Every query of the shipped dashboard returns data from the run `prom` scraped.
pub(crate) fn every_dashboard_query_returns_data(prom: &Prometheus) {
    let dash: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/grafana/iocurve.json")).unwrap(),
    )
    .expect("the dashboard is valid JSON");
    let mut exprs = Vec::new();
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            exprs.push((p["title"].as_str().unwrap_or("").to_string(), t["expr"].as_str().unwrap().to_string()));
        }
    }
    assert!(exprs.len() >= 8, "the dashboard has its panels: {exprs:?}");
    for (title, expr) in exprs {
        // The variables as Grafana would fill them: all runs, workloads and hosts, a range that
        // covers the run.
        let q = expr
            .replace("$run", ".+")
            .replace("$workload", ".+")
            .replace("$host", ".+")
            .replace("$__rate_interval", "10m")
            .replace("$__range", "10m");
        let q = format!("last_over_time(({q})[10m:1s])");
        assert!(!prom.query(&q).is_empty(), "dashboard panel {title:?}: {expr} returns no data");
    }
}

/// Two agents scraped as one run through the coordinator, and each agent scraped itself (its
/// endpoint behind a read-only token): every host's counters equal what the store keeps of that
/// host, both ways.
#[test]
fn a_two_agent_run_matches_the_store_host_by_host() {
    let _one = crate::util::one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let token = dir.path().join("metrics-token");
    std::fs::write(&token, "a-read-only-token-for-prometheus-scrapes").unwrap();
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let mut agents = Vec::new();
    let mut hosts = Vec::new();
    let mut scraped = Vec::new();
    for name in ["a", "b"] {
        let d = dir.path().join(name);
        std::fs::create_dir(&d).unwrap();
        let m = format!("127.0.0.1:{}", free_port());
        let extra = ["--metrics", m.as_str(), "--metrics-token-file", token.to_str().unwrap()];
        let a = AgentProc::start(&d, &c, &format!("{}/*", d.display()), &extra);
        hosts.push((a.addr.clone(), d.join("t.dat")));
        scraped.push((a.addr.clone(), m));
        agents.push(a);
    }
    // Without the token an agent's endpoint answers nothing but 401.
    let (code, body) = http_get(&scraped[0].1, "/metrics");
    assert_eq!(code, 401, "{body}");
    hosts_plan(dir.path(), &hosts, WORKLOAD);
    let port = free_port();
    let agents_job = format!(
        "  - job_name: agents\n    authorization:\n      credentials_file: {}\n    static_configs:\n      - targets: ['{}', '{}']\n",
        token.display(),
        scraped[0].1,
        scraped[1].1
    );
    let prom = Prometheus::start(&format!("127.0.0.1:{port}"), &agents_job);
    let o = coordinator(
        dir.path(),
        &c,
        &["plan.toml", "--size", "64m", "--buffered", "--metrics", &port.to_string(), "--metrics-hold-s", "3"],
    )
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    settled(&prom, "sum(max_over_time(iocurve_io_ops_total[10m]))");
    let ops = prom.query("sum by (host, direction) (max_over_time(iocurve_io_ops_total[10m]))");
    let bytes = prom.query("sum by (host, direction) (max_over_time(iocurve_io_bytes_total[10m]))");
    let get = |v: &[(Value, f64)], key: &str, host: &str, dir: &str| {
        v.iter().find(|(m, _)| m[key] == host && m["direction"] == dir).map_or(0, |r| r.1 as u64)
    };
    // What each agent served itself, by the endpoint Prometheus scraped.
    let own_ops = prom.query("sum by (instance, direction) (max_over_time(iocurve_io_ops_total{job=\"agents\"}[10m]))");
    let own_bytes =
        prom.query("sum by (instance, direction) (max_over_time(iocurve_io_bytes_total{job=\"agents\"}[10m]))");
    let rows = stored(dir.path(), true);
    assert_eq!(rows.len(), 2, "{rows:?}");
    for (host, ro, wo, rb, wb) in rows {
        assert!(ro > 0 && wo > 0, "{host}: reads and writes");
        assert_eq!((get(&ops, "host", &host, "read"), get(&ops, "host", &host, "write")), (ro, wo), "{host}: ops");
        assert_eq!(
            (get(&bytes, "host", &host, "read"), get(&bytes, "host", &host, "write")),
            (rb, wb),
            "{host}: bytes as stored"
        );
        let m = &scraped.iter().find(|(a, _)| *a == host).unwrap().1;
        assert_eq!(
            (get(&own_ops, "instance", m, "read"), get(&own_ops, "instance", m, "write")),
            (ro, wo),
            "agent {host}'s own endpoint: ops as stored"
        );
        assert_eq!(
            (get(&own_bytes, "instance", m, "read"), get(&own_bytes, "instance", m, "write")),
            (rb, wb),
            "agent {host}'s own endpoint: bytes as stored"
        );
    }
    drop(agents);
}

/// Issue 17/18: a rate run's metrics carry each step's target and how it kept to its schedule
/// (achieved share, lag, sustained) — the figures of the result, exactly — the steps of one
/// workload told apart by their targets.
#[test]
fn a_rate_run_exports_its_targets_and_schedule_figures() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut cmd = Command::new(bin());
    cmd.args(["run", "--size", "16m", "--workload", "backend-random-read-4k", "--rate", "200,400"])
        .args(["--warmup-s", "0.1", "--intervals", "2", "--interval-s", "0.3", "--json", "r.json"])
        .args(["--metrics", &port.to_string(), "--metrics-hold-s", "5"])
        .current_dir(dir.path());
    let mut w = crate::util::cluster::Watched::spawn(cmd);
    w.wait_for("serving the final figures", Duration::from_secs(60));
    let (code, text) = http_get(&format!("127.0.0.1:{port}"), "/metrics");
    assert_eq!(code, 200);
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let steps = r["workloads"][0]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    for s in steps {
        let rate = &s["rate"];
        let target = format!("{:.0}", rate["target_iops"].as_f64().unwrap());
        let sel = format!("workers=\"{}\",target=\"{target}\"}}", s["workers"]);
        let value = |family: &str| -> f64 {
            let l = text
                .lines()
                .find(|l| l.starts_with(family) && l.contains("backend-random-read-4k") && l.contains(&sel))
                .unwrap_or_else(|| panic!("{family} of the {target} IOPS step in\n{text}"));
            l.rsplit(' ').next().unwrap().parse().unwrap()
        };
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
        assert!(close(value("iocurve_step_rate_achieved_ratio{"), rate["achieved_pct"].as_f64().unwrap() / 100.0));
        assert!(close(value("iocurve_step_rate_lag_p99_seconds{"), rate["lag_us"]["p99"].as_f64().unwrap() / 1e6));
        let sustained = if rate["sustained"] == true { 1.0 } else { 0.0 };
        assert_eq!(value("iocurve_step_rate_sustained{"), sustained);
        assert!(close(value("iocurve_step_iops{"), s["iops"].as_f64().unwrap()));
    }
    // The schedule's counters: every I/O due in a measured interval, as stored per interval.
    let _ = w.finish();
    let py = "import sqlite3, json; c = sqlite3.connect('iocurve.db'); print(json.dumps(c.execute('SELECT SUM(r.due), SUM(r.dropped) FROM interval_rates r JOIN intervals i ON i.id = r.interval_id WHERE i.host IS NULL').fetchone()))";
    let o = Command::new("python3").args(["-c", py]).current_dir(dir.path()).output().unwrap();
    let (due, dropped): (u64, u64) = serde_json::from_slice(&o.stdout).unwrap();
    assert!(due > 0, "{}", String::from_utf8_lossy(&o.stderr));
    let counter = |family: &str| -> u64 {
        let l = text.lines().find(|l| l.starts_with(family)).unwrap_or_else(|| panic!("{family} in\n{text}"));
        l.rsplit(' ').next().unwrap().parse::<f64>().unwrap() as u64
    };
    assert_eq!((counter("iocurve_rate_due_total{"), counter("iocurve_rate_dropped_total{")), (due, dropped));
}
