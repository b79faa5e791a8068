//! Multi-host runs with agents as real processes (on loopback, each with its own targets):
//! the aggregate is the exact sum of the hosts, steps start together, and every way in without
//! the right token, TLS, protocol or allowed target is refused before anything is written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::util::cluster::*;
use crate::util::*;
use serde_json::Value;

/// The value at percentile `p` of (latency, count) rows, as HdrHistogram defines it: the
/// first value whose cumulative count reaches `ceil(p / 100 × total)`.
pub(crate) fn percentile(rows: &BTreeMap<u64, u64>, p: f64) -> u64 {
    let total: u64 = rows.values().sum();
    let want = ((p / 100.0 * total as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for (&v, &n) in rows {
        seen += n;
        if seen >= want {
            return v;
        }
    }
    panic!("no rows")
}

/// `export --format histograms` rows: (step, host) → latency → count, both directions added.
pub(crate) fn histogram_rows(csv: &str) -> BTreeMap<(usize, String), BTreeMap<u64, u64>> {
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("run_id,workload,step,workers,host,direction,latency_ns,count"));
    let mut out: BTreeMap<(usize, String), BTreeMap<u64, u64>> = BTreeMap::new();
    for l in lines {
        let c: Vec<&str> = l.split(',').collect();
        let rows = out.entry((c[2].parse().unwrap(), c[4].to_string())).or_default();
        *rows.entry(c[6].parse().unwrap()).or_default() += c[7].parse::<u64>().unwrap();
    }
    out
}

#[test]
fn three_agents_in_their_own_namespaces_run_together_and_add_up_exactly() {
    iocurve_testkit::needs_root!();
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let mut agents = Vec::new();
    let mut hosts = Vec::new();
    let namespaces: Vec<Netns> = (1..=3).map(Netns::new).collect();
    // Two agents on a file of their own, the third on a loop device.
    let dev = Loop::new(64 << 20, &[]);
    for (name, ns) in ["a", "b", "c"].into_iter().zip(&namespaces) {
        let d = dir.path().join(name);
        std::fs::create_dir(&d).unwrap();
        let a = if name == "c" {
            AgentProc::start_in(Some(ns), &d, &c, dev.path(), &["--allow-write", dev.path()])
        } else {
            AgentProc::start_in(Some(ns), &d, &c, &format!("{}/*", d.display()), &[])
        };
        let target = if name == "c" { dev.dev.clone() } else { d.join("t.dat") };
        hosts.push((a.addr.clone(), target));
        agents.push(a);
    }
    plan(dir.path(), &hosts);
    let o = coordinator(dir.path(), &c, &["plan.toml", "--size", "64m", "--json", "r.json"]).output().unwrap();
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("per host × 3 hosts"), "{}", stdout(&o));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(r["targets"].as_array().unwrap().len(), 3, "each agent's target is listed");
    let mut spreads = Vec::new();
    for s in steps(&r, 0) {
        assert_eq!(s["host_count"], 3);
        let hosts = s["hosts"].as_array().unwrap();
        assert_eq!(hosts.len(), 3);
        let sum: f64 = hosts.iter().map(|h| f(&h["iops"])).sum();
        assert!((f(&s["iops"]) - sum).abs() < 1e-6 * sum, "aggregate IOPS = sum of hosts: {} vs {sum}", s["iops"]);
        let mb: f64 = hosts.iter().map(|h| f(&h["mbps"])).sum();
        assert!((f(&s["mbps"]) - mb).abs() < 1e-6 * mb);
        // Merged from the hosts' histograms: the aggregate's extremes are the hosts' extremes.
        let min = hosts.iter().map(|h| f(&h["lat_us"]["min"])).fold(f64::MAX, f64::min);
        let max = hosts.iter().map(|h| f(&h["lat_us"]["max"])).fold(0.0, f64::max);
        assert_eq!((f(&s["lat_us"]["min"]), f(&s["lat_us"]["max"])), (min, max));
        let spread = f(&s["start_spread_us"]);
        spreads.push(spread);
        // A hang/unit guard, not the figure (bench/scale-agents, BENCHMARKS.md "Figures that left
        // the tests"): 250 ms is over 10× the worst spread seen under load (13.7 ms), below the
        // 500 ms lead every start instant is sent with.
        assert!(spread < 250_000.0, "started within 250 ms of each other: {spread} µs");
        let outstanding = s["outstanding"].as_u64().unwrap();
        assert_eq!(outstanding, s["workers"].as_u64().unwrap() * 3, "workers are per host");
    }
    // Three agents and the coordinator share 2 cores with the other tests: one agent may be
    // scheduled some ms late at a start moment (CI of this stop: 13.7 ms once). A systematic
    // error (a clock offset applied the wrong way) would show in every step. 25 ms is over 10×
    // the median spread measured (bench/scale-agents); how close they start is that figure.
    assert!(spreads.iter().any(|&s| s < 25_000.0), "started within 25 ms of each other at least once: {spreads:?} µs");
    for (_, t) in &hosts {
        assert!(t.exists(), "each agent made its own target");
    }
    drop(agents);

    // Stored per host: the histograms exported for each host add up to the merged ones, and the
    // aggregate percentiles are those of the union of every value the hosts recorded.
    let o = iocurve(dir.path(), &["export", "1", "--format", "histograms", "-o", "h.csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = histogram_rows(&std::fs::read_to_string(dir.path().join("h.csv")).unwrap());
    let addrs: Vec<&str> = hosts.iter().map(|(a, _)| a.as_str()).collect();
    for (k, s) in steps(&r, 0).iter().enumerate() {
        let mut union: BTreeMap<u64, u64> = BTreeMap::new();
        for a in &addrs {
            let own = rows.get(&(k, a.to_string())).unwrap_or_else(|| panic!("step {k}: rows of host {a}"));
            for (&v, &n) in own {
                *union.entry(v).or_default() += n;
            }
        }
        assert_eq!(rows[&(k, String::new())], union, "step {k}: merged histogram = union of the hosts'");
        // Every completed I/O, and those outstanding at the step's end (late or stuck), whose
        // latency counts without being an operation of the step.
        assert_eq!(
            union.values().sum::<u64>(),
            s["read"]["ops"].as_u64().unwrap()
                + s["write"]["ops"].as_u64().unwrap()
                + s["late_ios"].as_u64().unwrap()
                + s["stuck_ios"].as_u64().unwrap()
        );
        for (key, p) in [("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p99_9", 99.9)] {
            let want = percentile(&union, p) as f64 / 1000.0;
            assert!(
                (f(&s["lat_us"][key]) - want).abs() < 1e-9,
                "step {k} {key}: {} vs {want} from the union",
                s["lat_us"][key]
            );
        }
    }

    // The stored run shows and reports each host beside the aggregate.
    let o = iocurve(dir.path(), &["show", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("per host:"), "{text}");
    for a in &addrs {
        assert!(text.matches(a).count() >= 2, "a row per step for {a}: {text}");
    }
    let o = iocurve(dir.path(), &["report", "1", "-o", "r.html"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(dir.path().join("r.html")).unwrap();
    assert!(page.contains("Per host"), "the report has the per-host table");
    for a in &addrs {
        assert!(page.contains(&format!("<td>{a}</td>")), "a per-host row for {a}");
    }
    let mut b = crate::browser::Browser::launch();
    b.open(&dir.path().join("r.html"));
    assert!(b.errors().is_empty(), "no console errors: {:#?}", b.errors());
    b.screenshot(&Path::new(env!("CARGO_TARGET_TMPDIR")).join("artifacts").join("report-hosts.png"));
    // Lines in the hosts' colours (blue, red, green; equal hosts' lines cover each other).
    let pixels = b.eval(
        r#"(() => {
  const c = document.querySelector('.host-timeline canvas');
  if (!c) return 0;
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  const want = [[0x1f, 0x77, 0xb4], [0xd6, 0x27, 0x28], [0x2c, 0xa0, 0x2c]];
  let n = 0;
  for (let i = 0; i < d.length; i += 4)
    if (d[i + 3] > 200 && want.some(w => Math.abs(d[i] - w[0]) < 12 && Math.abs(d[i + 1] - w[1]) < 12 && Math.abs(d[i + 2] - w[2]) < 12)) n++;
  return n;
})()"#,
    );
    assert!(pixels.as_u64().unwrap() >= 100, "the per-host timeline is drawn: {pixels} pixels");
    let legend =
        b.eval("Array.from(document.querySelectorAll('.host-timeline .legend .name')).map(e => e.textContent)");
    for a in &addrs {
        assert!(legend.as_array().unwrap().iter().any(|l| l.as_str() == Some(a)), "{a} in the legend: {legend}");
    }
}

#[test]
fn clocks_far_apart_are_refused_or_warned_and_steps_still_start_together() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let mut hosts = Vec::new();
    let mut agents = Vec::new();
    for (name, skew) in [("a", None), ("b", Some("+5s"))] {
        let d = dir.path().join(name);
        std::fs::create_dir(&d).unwrap();
        let allow = format!("{}/*", d.display());
        let a = match skew {
            Some(off) => AgentProc::start_skewed(off, &d, &c, &allow),
            None => AgentProc::start(&d, &c, &allow, &[]),
        };
        hosts.push((a.addr.clone(), d.join("t.dat")));
        agents.push(a);
    }
    plan(dir.path(), &hosts);
    let run = |extra: &[&str]| {
        coordinator(dir.path(), &c, &["plan.toml", "--size", "64m", "--json", "r.json"]).args(extra).output().unwrap()
    };
    // 5 s ahead, 1 s allowed: refused before anything is opened.
    let o = run(&[]);
    let err = input_error(&o, &["ahead", "--max-skew-ms 1000", "chrony or NTP"]);
    // About 5 s, as measured (4999.9 ms on a loaded machine, CI of stop 27/28).
    let said = format!("agent {}'s clock is ", hosts[1].0);
    let ms: f64 =
        err.split(&said).nth(1).and_then(|r| r.split(" ms").next()).and_then(|n| n.parse().ok()).unwrap_or(0.0);
    assert!((4900.0..5100.0).contains(&ms), "{err}");
    assert!(!hosts[0].1.exists() && !hosts[1].1.exists(), "no target was opened");
    // Allowed: a warning, and the steps start together all the same (starts are converted).
    let o = run(&["--max-skew-ms", "10000"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("WARNING") && stderr(&o).contains("ahead of this host's"), "{}", stderr(&o));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    for s in steps(&r, 0) {
        let spread = f(&s["start_spread_us"]);
        // Converted starts: an unconverted 5 s skew would show as 5 s; 250 ms is over 10× the
        // worst spread seen under load (how close they start is a figure in bench/scale-agents).
        assert!(spread < 250_000.0, "started within 250 ms of each other despite 5 s of skew: {spread} µs");
    }
    drop(agents);
}

/// A TCP relay that passes one connection through and keeps what the client sent.
pub(crate) fn recording_relay(to: String) -> (String, std::sync::Arc<std::sync::Mutex<Vec<u8>>>) {
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpListener, TcpStream};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let sent = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = sent.clone();
    std::thread::spawn(move || {
        let (mut client, _) = listener.accept().unwrap();
        let mut server = TcpStream::connect(&to).unwrap();
        let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
        let back = std::thread::spawn(move || {
            let _ = std::io::copy(&mut s2, &mut c2);
            let _ = c2.shutdown(Shutdown::Write);
        });
        let mut buf = [0u8; 16384];
        loop {
            match client.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    keep.lock().unwrap().extend_from_slice(&buf[..n]);
                    if server.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = server.shutdown(Shutdown::Write);
        let _ = back.join();
    });
    (addr, sent)
}

#[test]
fn a_replayed_session_is_rejected_and_runs_nothing() {
    iocurve_testkit::needs_root!();
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let dev = Loop::new(64 << 20, &[]);
    let agent = AgentProc::start(dir.path(), &c, dev.path(), &[]);
    // A genuine run through the relay: its bytes hold the token and a whole step request.
    let (relay, sent) = recording_relay(agent.addr.clone());
    let o = coordinator(
        dir.path(),
        &c,
        &["--hosts", &relay, "--target", dev.path(), "--workload", "backend-random-read-4k", "--ramp", "1"],
    )
    .args(["--warmup-s", "0.1", "--intervals", "1", "--interval-s", "0.3"])
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let recorded = sent.lock().unwrap().clone();
    assert!(recorded.len() > 1000, "the session was recorded: {} bytes", recorded.len());
    // Replayed byte for byte on a new connection: the agent's fresh handshake randomness makes
    // every recorded record useless, so nothing past the handshake is accepted.
    let before = sectors_read(dev.path());
    let mut s = std::net::TcpStream::connect(&agent.addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
    use std::io::{Read, Write};
    let _ = s.write_all(&recorded);
    let mut reply = Vec::new();
    let end = s.read_to_end(&mut reply);
    let timed_out =
        matches!(&end, Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut));
    assert!(!timed_out, "the agent closes the replayed connection instead of serving it");
    // The agent answered with a handshake of its own (a new ServerHello, 0x16) and nothing a
    // served call would bring: its whole answer is the handshake flight and an alert.
    assert_eq!(reply.first(), Some(&0x16), "a fresh handshake: {:x?}", &reply[..reply.len().min(8)]);
    assert!(reply.len() < 8192, "no more than a handshake came back: {} bytes", reply.len());
    std::thread::sleep(std::time::Duration::from_millis(1000));
    assert_eq!(sectors_read(dev.path()), before, "the replayed step request ran no I/O");
    drop(agent);
}

#[test]
fn an_agent_cut_off_from_its_coordinator_stops_within_the_lease() {
    iocurve_testkit::needs_root!();
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let ns = Netns::new(4);
    let dev = Loop::new(256 << 20, &[]);
    let agent = AgentProc::start_in(Some(&ns), dir.path(), &c, dev.path(), &["--lease-s", "3"]);
    let mut coord = long_read_run(dir.path(), &c, &agent, dev.path());
    // Cut the link: no FIN, no RST — only the keep-alive pings can tell.
    ns.cut();
    std::thread::sleep(std::time::Duration::from_millis(3500));
    let a = sectors_read(dev.path());
    std::thread::sleep(std::time::Duration::from_millis(1000));
    assert_eq!(sectors_read(dev.path()), a, "no I/O once the lease ran out");
    let _ = coord.kill();
    let _ = coord.wait();
}

/// Starts a coordinator running a long read-only step on `agent`'s loop device `dev`, and
/// checks that the agent reads from it.
pub(crate) fn long_read_run(dir: &Path, c: &Path, agent: &AgentProc, dev: &str) -> Child {
    plan(dir, &[(agent.addr.as_str(), PathBuf::from(dev))]);
    let text = std::fs::read_to_string(dir.join("plan.toml")).unwrap();
    let text = text.replace("read_pct = 70", "read_pct = 100").replace("intervals = 2", "intervals = 60");
    std::fs::write(dir.join("plan.toml"), text).unwrap();
    let coord = coordinator(dir, c, &["plan.toml"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2000));
    let before = sectors_read(dev);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(sectors_read(dev) > before, "the agent reads while connected to its coordinator");
    coord
}

/// Sectors read from a block device so far (/proc/diskstats).
pub(crate) fn sectors_read(dev: &str) -> u64 {
    let name = dev.trim_start_matches("/dev/");
    let stats = std::fs::read_to_string("/proc/diskstats").unwrap();
    let line = stats.lines().find(|l| l.split_whitespace().nth(2) == Some(name)).expect("the device is listed");
    line.split_whitespace().nth(5).unwrap().parse().unwrap()
}

#[test]
fn a_killed_agent_is_marked_lost_and_the_others_carry_on() {
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let (mut agents, hosts) = file_agents(dir.path(), &c, &["a", "b"]);
    let rr = "[[workloads]]\nname = \"rr\"\nramp = [1, 2]\nwarmup_s = 0.2\nintervals = 6\ninterval_s = 0.5\n";
    hosts_plan(dir.path(), &hosts, rr);
    // Carrying on after a lost host finishes the run, with exit code 3 (hosts were lost).
    for (policy, code) in [("continue", 3), ("abort", 1)] {
        let args = ["plan.toml", "--size", "64m", "--json", "r.json", "--on-host-loss", policy];
        let db = dir.path().join("iocurve.db");
        let before = stored_intervals(&db);
        let coord = coordinator(dir.path(), &c, &args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        // Into the first step (its first interval stored), then SIGKILL agent b.
        wait_for_intervals(&db, before);
        let mut b = agents.pop().unwrap();
        b.child.kill().unwrap();
        b.child.wait().unwrap();
        let o = coord.wait_with_output().unwrap();
        let out = format!("{}\n{}", stdout(&o), stderr(&o));
        assert_eq!(o.status.code(), Some(code), "{policy}: {out}");
        assert!(out.contains(&format!("agent {} lost", b.addr)), "{policy}: {out}");
        let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
        if policy == "abort" {
            // Issue 15, finding 5: the JSON had no step. The step is kept, as measured.
            assert_eq!(r["status"], "aborted", "{out}");
            let s = steps(&r, 0);
            assert_eq!(s.len(), 1, "the step the host was lost in is kept: {out}");
            assert!(!s[0]["intervals"].as_array().unwrap().is_empty());
        }
        if policy == "continue" {
            let s = steps(&r, 0);
            // Issue 15, finding 5: a false littles_law flag, and the maximum taken from steps
            // on one host and on two alike.
            assert!(!s[0]["flags"].as_array().unwrap().iter().any(|f| f["code"] == "littles_law"), "{}", s[0]["flags"]);
            let wl = &r["workloads"][0];
            // Issue 35, finding 4: the step after it, on 1 of the 2 hosts planned, was the
            // maximum. Neither counts now.
            assert!(wl["maximum"].is_null(), "no step ran whole on its planned hosts: {}", wl["maximum"]);
            assert!(wl["notes"][0].as_str().unwrap().contains("at 1, 2 workers lost a host"), "{}", wl["notes"]);
            assert!(s[1]["flags"].as_array().unwrap().iter().any(|f| f["code"] == "fewer_hosts"), "{}", s[1]["flags"]);
            let flag = s[0]["flags"].as_array().unwrap().iter().find(|f| f["code"] == "host_lost").expect("flagged");
            assert!(flag["message"].as_str().unwrap().contains(&b.addr), "{flag}");
            assert_eq!(s[0]["intervals"].as_array().unwrap().len(), 6, "every interval of the step was merged");
            assert_eq!(s[1]["hosts"].as_array().unwrap().len(), 1, "the next step runs on the agent left");
            // Lost from that second: its own figures end there, the other host's go on.
            let hosts = s[0]["hosts"].as_array().unwrap();
            let lost = hosts.iter().find(|h| h["host"] == b.addr.as_str()).expect("the lost host is listed");
            let kept = hosts.iter().find(|h| h["host"] != b.addr.as_str()).unwrap();
            let at = f(&lost["lost_at_s"]);
            assert!((0.2..2.5).contains(&at), "lost about 1 s into the step: {at}");
            assert!(kept.get("lost_at_s").is_none());
            let seconds = |h: &Value| h["samples"].as_array().unwrap().len();
            assert!(seconds(lost) < seconds(kept), "its timeline ends when it was lost: {lost}");
            assert!(seconds(lost) as f64 * 0.5 <= at + 0.5, "no figures of the lost host after {at} s");
            let o = iocurve(dir.path(), &["report", "1", "-o", "r.html"]);
            assert!(o.status.success(), "{}", stderr(&o));
            let page = std::fs::read_to_string(dir.path().join("r.html")).unwrap();
            assert!(page.contains("host_lost") && page.contains(&format!("at {at:.1} s")), "the report says so");
            // A restarted agent serves the next run.
            let d = dir.path().join("b");
            agents.push(AgentProc::start(&d, &c, &format!("{}/*", d.display()), &[]));
            let new_addr = agents[1].addr.clone();
            let t = std::fs::read_to_string(dir.path().join("plan.toml")).unwrap().replace(&b.addr, &new_addr);
            std::fs::write(dir.path().join("plan.toml"), t).unwrap();
        }
    }
}

#[test]
fn a_frozen_agent_misses_its_heartbeats_and_is_lost_while_the_other_carries_on() {
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let (agents, hosts) = file_agents(dir.path(), &c, &["a", "b"]);
    let rr = "[[workloads]]\nname = \"rr\"\nramp = [1]\nwarmup_s = 0.2\nintervals = 12\ninterval_s = 0.5\n";
    hosts_plan(dir.path(), &hosts, rr);
    let coord = coordinator(dir.path(), &c, &["plan.toml", "--size", "64m", "--json", "r.json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_intervals(&dir.path().join("iocurve.db"), 0);
    // Frozen, not dead: its connection stays open, only its heartbeats stop.
    let b = agents[1].child.id().to_string();
    assert!(Command::new("kill").args(["-STOP", &b]).status().unwrap().success());
    let o = coord.wait_with_output().unwrap();
    let _ = Command::new("kill").args(["-CONT", &b]).status();
    let out = format!("{}\n{}", stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(3), "finished, with a host lost: {out}");
    assert!(out.contains(&format!("agent {} lost", agents[1].addr)), "{out}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let s = &steps(&r, 0)[0];
    assert_eq!(s["intervals"].as_array().unwrap().len(), 12, "the other agent finished the step: {out}");
    let lost = s["hosts"].as_array().unwrap().iter().find(|h| h["host"] == agents[1].addr.as_str()).unwrap();
    assert!(f(&lost["lost_at_s"]) < 5.0, "noticed within a few seconds of missed heartbeats: {lost}");
}

#[test]
fn an_agent_whose_coordinator_dies_stops_its_io() {
    iocurve_testkit::needs_root!();
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let dev = Loop::new(256 << 20, &[]);
    let agent = AgentProc::start(dir.path(), &c, dev.path(), &["--lease-s", "3"]);
    let mut coord = long_read_run(dir.path(), &c, &agent, dev.path());
    coord.kill().unwrap(); // SIGKILL
    coord.wait().unwrap();
    // Within the lease (3 s) the agent has stopped: its device sees no more reads.
    std::thread::sleep(std::time::Duration::from_millis(3000));
    let a = sectors_read(dev.path());
    std::thread::sleep(std::time::Duration::from_millis(1000));
    assert_eq!(sectors_read(dev.path()), a, "no I/O after the coordinator is gone");
}

/// Issue 14: preconditioning was refused with --hosts. Two agents precondition their own
/// targets at once (the coordinator keeps each target's state under `ADDR:PATH`, as a local run
/// keeps its own), every block gets written, and the next run skips them.
#[test]
fn two_agents_precondition_their_targets_and_the_next_run_skips_them() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let (agents, hosts) = file_agents(dir.path(), &c, &["a", "b"]);
    let mut plan = String::from("precondition = true\ntargets = [\"unused\"]\n");
    plan.push_str(
        "[[workloads]]\nname = \"r\"\nread_pct = 100\nramp = [1]\nwarmup_s = 0.1\nintervals = 1\ninterval_s = 0.3\n",
    );
    for (addr, target) in &hosts {
        plan.push_str(&format!("[[hosts]]\naddress = \"{addr}\"\ntargets = [\"{}\"]\n", target.display()));
    }
    std::fs::write(dir.path().join("plan.toml"), plan).unwrap();
    let run = || coordinator(dir.path(), &c, &["plan.toml", "--size", "64m", "--json", "r.json"]).output().unwrap();
    let o = run();
    let r = ok_json(&o, &dir.path().join("r.json"));
    let out = stdout(&o);
    assert!(out.contains("precondition on 2 agents"), "{out}");
    for (addr, target) in &hosts {
        let key = format!("{addr}:{}", target.display());
        assert!(out.contains(&format!("precondition {key}: complete")), "{out}");
        let t = r["targets"].as_array().unwrap().iter().find(|t| t["path"] == key.as_str()).expect("listed");
        assert!(t["preconditioned_at"].is_string(), "{t}");
        // Created allocated but unwritten (zeros), then written once: no 4k block is left zero.
        // (The scratch file's stamp follows its 64 MiB.)
        let data = std::fs::read(target).unwrap();
        assert!(data.len() as u64 > 64 << 20);
        let zero = data[..64 << 20].chunks(4096).filter(|b| b.iter().all(|&x| x == 0)).count();
        assert_eq!(zero, 0, "{key}: every block written");
    }
    let mtimes: Vec<_> = hosts.iter().map(|(_, t)| std::fs::metadata(t).unwrap().modified().unwrap()).collect();
    let o = run();
    let r = ok_json(&o, &dir.path().join("r.json"));
    let out = stdout(&o);
    for (addr, target) in &hosts {
        assert!(out.contains(&format!("precondition {addr}:{}: already done at", target.display())), "{out}");
    }
    let again: Vec<_> = hosts.iter().map(|(_, t)| std::fs::metadata(t).unwrap().modified().unwrap()).collect();
    assert_eq!(mtimes, again, "nothing written again");
    assert!(r["targets"].as_array().unwrap().iter().all(|t| t["preconditioned_at"].is_string()));
    drop(agents);
}

/// Issue 14: verification was refused with --hosts. Each agent keeps its own map (in its state
/// directory, locked while in use), the workloads' reads check it, and `--verify-final` reads
/// back every block on every agent at once: a clean run is clean, writes an agent dropped are
/// found (exit code 4) and every problem names its agent and target.
#[test]
fn two_agents_verify_their_writes_and_the_final_pass_finds_dropped_ones() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let (agents, hosts) = file_agents(dir.path(), &c, &["a", "b"]);
    let plan = |faults: &str| {
        let mut p = String::from("targets = [\"unused\"]\n");
        p.push_str(faults);
        p.push_str("[[workloads]]\nname = \"w\"\nread_pct = 50\nbs = \"4k\"\nverify = true\nramp = [1]\nwarmup_s = 0\nintervals = 1\ninterval_s = 1\n");
        for (addr, target) in &hosts {
            p.push_str(&format!("[[hosts]]\naddress = \"{addr}\"\ntargets = [\"{}\"]\n", target.display()));
        }
        std::fs::write(dir.path().join("plan.toml"), p).unwrap();
    };
    let run = || {
        coordinator(dir.path(), &c, &["plan.toml", "--size", "64m", "--verify-final", "--json", "r.json"])
            .output()
            .unwrap()
    };
    plan("");
    let o = run();
    let r = ok_json(&o, &dir.path().join("r.json"));
    let fv = &r["final_verification"];
    assert!(fv["checked"].as_u64().unwrap() > 0, "{fv}");
    assert_eq!((fv["lost"].as_u64(), fv["corrupt"].as_u64(), fv["misplaced"].as_u64()), (Some(0), Some(0), Some(0)));
    for (addr, _) in &hosts {
        assert!(fv["map"].as_str().unwrap().contains(addr.as_str()), "each agent's map: {fv}");
    }
    for d in ["a", "b"] {
        let maps: Vec<_> = std::fs::read_dir(dir.path().join(d))
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("iocurve-verify-"))
            .collect();
        assert!(!maps.is_empty(), "agent {d} keeps its map in its state directory");
    }

    plan("[[faults]]\nkind = \"drop-write\"\nshare = 0.05\n");
    let o = run();
    assert_eq!(o.status.code(), Some(4), "dropped writes found: {}\n{}", stdout(&o), stderr(&o));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let lost = r["final_verification"]["lost"].as_u64().unwrap();
    assert!(lost > 0, "{}", r["final_verification"]);
    let o = iocurve(dir.path(), &["export", "2", "--format", "problems", "-o", "p.csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = std::fs::read_to_string(dir.path().join("p.csv")).unwrap();
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert_eq!(rows.len() as u64, lost, "one row per problem: {csv}");
    for row in rows {
        assert!(
            hosts.iter().any(|(addr, t)| row.contains(&format!("{addr}:{}", t.display()))),
            "the problem names its agent and target: {row}"
        );
        assert!(row.contains("lost"), "{row}");
    }
    drop(agents);
}

/// A TCP connection to `to` from the loopback address `from` (127.0.0.0/8 is all this host's):
/// strangers at many addresses, as an attack from many hosts would look.
pub(crate) fn connect_from(from: std::net::Ipv4Addr, to: &str) -> std::io::Result<std::net::TcpStream> {
    use std::os::fd::FromRawFd;
    let to: std::net::SocketAddrV4 = to.parse().unwrap();
    let sin = |a: std::net::Ipv4Addr, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(a).to_be() },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: a new socket, bound and connected with valid sockaddr_in values, then owned.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let s = std::net::TcpStream::from_raw_fd(fd);
        let local = sin(from, 0);
        if libc::bind(fd, (&local as *const libc::sockaddr_in).cast(), len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let remote = sin(*to.ip(), to.port());
        if libc::connect(fd, (&remote as *const libc::sockaddr_in).cast(), len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(s)
    }
}

/// CPU seconds a process has used (user and system).
pub(crate) fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap().split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}

/// Issue 17: a rate ramp on two agents. Each host issues its half of the run's one schedule:
/// the merged step had exactly the run's I/Os due, each host about half of them, and the step
/// was sustained.
#[test]
fn two_agents_share_one_rate_schedule() {
    // Whether two agents keep to a schedule is a measurement: one at a time with the other
    // heavy tests (it missed its rate once in a full CI run beside them).
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let (_agents, hosts) = file_agents(dir.path(), &c, &["a", "b"]);
    // What is tested is the schedule's split, not the disk: 64 in flight keep 1500 IOPS at up
    // to 42 ms per I/O (at 16 a shared virtual disk's 5.6 ms mean in a full run left the step
    // unsustained). Sustained means 99 % of the due I/Os completed in the measurement, so a
    // stall of 1 % of it at one end fails the step: 4 s measured bear 40 ms (1 s at 3000 IOPS
    // failed once in CI beside the fuzz smoke, and 2 s at 500 IOPS once, the host's CPU 100 %
    // busy and 20 I/Os late by up to 40 ms).
    let w = "[[workloads]]\nname = \"rated\"\nrate = [500, 1500]\nmax_outstanding = 64\nwarmup_s = 0.2\nintervals = 2\ninterval_s = 2.0\n";
    hosts_plan(dir.path(), &hosts, w);
    let o = coordinator(dir.path(), &c, &["plan.toml", "--size", "16m", "--json", "r.json"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}\n{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("at 1'500 IOPS: p99"), "{out}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    for (s, target) in steps(&r, 0).iter().zip([500.0, 1500.0]) {
        let rate = &s["rate"];
        assert_eq!(f(&rate["target_iops"]), target);
        // 4 s measured: the schedule's I/Os, all hosts together.
        assert!((f(&rate["due"]) - 4.0 * target).abs() <= 2.0, "{rate}");
        assert_eq!(rate["sustained"], true, "{s}");
        let per_host: Vec<f64> = s["hosts"].as_array().unwrap().iter().map(|h| f(&h["iops"])).collect();
        assert_eq!(per_host.len(), 2);
        for iops in per_host {
            assert!((iops - target / 2.0).abs() <= target * 0.02, "each host issues half of {target}: {iops}");
        }
    }
}

#[test]
fn a_coordinator_waits_for_agents_that_come_up_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let d = dir.path().join("late");
    std::fs::create_dir(&d).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    plan(dir.path(), &[(addr.clone(), d.join("t.dat"))]);
    let mut w = Watched::spawn(coordinator(
        dir.path(),
        &c,
        &["plan.toml", "--size", "16m", "--wait-for-agents-s", "60", "--on-host-loss", "abort"],
    ));
    w.wait_for("waiting up to 60 s for 1 of 1 agents", std::time::Duration::from_secs(30));
    // The agent comes up 2 s later, on the address the coordinator keeps trying.
    std::thread::sleep(std::time::Duration::from_secs(2));
    let mut agent = Command::new(bin())
        .args(["agent", "--listen", &addr, "--token-file"])
        .arg(c.join("token"))
        .args(["--allow", &format!("{}/*", d.display()), "--tls-cert"])
        .arg(c.join("agent.pem"))
        .arg("--tls-key")
        .arg(c.join("agent.key"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (code, text) = w.finish();
    let _ = agent.kill();
    let _ = agent.wait();
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("per host × 1 host") || text.contains("maximum"), "{text}");
}

/// Issue 17: `steady_state = "snia"` on two agents. The coordinator judges the merged intervals
/// (not each agent its own) and ends both hosts' steps after the same interval, without
/// calling the step interrupted.
#[test]
fn two_agents_end_a_steady_step_together() {
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let (_agents, hosts) = file_agents(dir.path(), &c, &["a", "b"]);
    // Each I/O held 5 ms: a throughput set by the delay, steady even on a loaded machine.
    let w = "[[faults]]\nkind = \"latency\"\nlatency_ms = 5\n[[workloads]]\nname = \"s\"\nbackend = \"null\"\nramp = [1]\nsteady_state = \"snia\"\nwarmup_s = 0.2\nintervals = 400\ninterval_s = 0.25\nthreads = 1\n";
    hosts_plan(dir.path(), &hosts, w);
    let t = std::time::Instant::now();
    let o = coordinator(dir.path(), &c, &["plan.toml", "--size", "16m", "--json", "r.json"]).output().unwrap();
    // The coordinator waits for every agent's end: one that was not told would run all 400
    // intervals (100 s). 60 s is far below that and over 10× a steady end (a few seconds).
    let took = t.elapsed();
    assert!(took < std::time::Duration::from_secs(60), "{took:?}");
    assert_eq!(o.status.code(), Some(0), "{}\n{}", stdout(&o), stderr(&o));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let s = &steps(&r, 0)[0];
    let n = s["intervals"].as_array().unwrap().len();
    let check = &s["steady_state"];
    // Ended once steady, a whole interval after the judgement at most later than on one host.
    let first = check["first_round"].as_u64().unwrap() as usize;
    assert!(check["steady"] == true && n <= first + 8, "{n} intervals: {check}");
    let flags = s["flags"].as_array().unwrap();
    // Each agent's own count is checked by the coordinator: `uneven_end` when they differ.
    assert!(!flags.iter().any(|f| f["code"] == "interrupted" || f["code"] == "uneven_end"), "{flags:?}");
    for h in s["hosts"].as_array().unwrap() {
        assert_eq!(h["samples"].as_array().unwrap().len(), n, "every host ran the same intervals: {h}");
    }
}

/// Issue 17: `overload = abort-step` on one agent (its target stalls) ends the step on every
/// agent, not on that one alone, and the rate ramp ends after it.
#[test]
fn an_overload_on_one_agent_ends_the_step_on_every_agent() {
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let (_agents, hosts) = file_agents(dir.path(), &c, &["a", "b"]);
    // 16 in flight at 100 IOPS: 160 ms of a slow disk before an overload (at 4 and 400 IOPS,
    // 10 ms, a loaded CI disk overloaded the warm-up before the stall began: no interval
    // stored), and 160 ms after the stall begins.
    let w = format!(
        "[[faults]]\nkind = \"stall\"\ntarget = \"{}\"\nfrom_s = 0.6\nto_s = 60\n[[workloads]]\nname = \"rated\"\nrate = [100, 200]\nmax_outstanding = 16\noverload = \"abort-step\"\nwarmup_s = 0.2\nintervals = 40\ninterval_s = 0.5\n",
        hosts[0].1.display()
    );
    hosts_plan(dir.path(), &hosts, &w);
    let t = std::time::Instant::now();
    let o = coordinator(dir.path(), &c, &["plan.toml", "--size", "16m", "--json", "r.json"]).output().unwrap();
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(out.contains("overload = abort-step ended the step"), "{out}\n{err}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    assert!(r["workloads"][0]["steps"].is_array(), "a stored step: {r}\n{out}\n{err}");
    let all = steps(&r, 0);
    assert_eq!(all.len(), 1, "the rate ramp ends after the overloaded step");
    let s = &all[0];
    assert!(s["flags"].as_array().unwrap().iter().any(|f| f["code"] == "overloaded"), "{s}");
    // The stall starts 0.6 s into the measurement: interval 0 ran on both hosts, interval 1
    // was cut off.
    for h in s["hosts"].as_array().unwrap() {
        assert!(h["samples"].as_array().unwrap().len() <= 2, "{h}");
    }
    // The coordinator waits for every agent's end: the healthy one, had it not been stopped,
    // would have run all 40 intervals (20 s) and sent as many samples — the sample counts above
    // tell that; this is a hang guard, over 10× the few seconds it takes. (The "no step
    // stored" failures under CI's load, with 400 intervals once and with 40 in a full run of
    // 2398405, were the warm-up's overload: 4 in flight at 400 IOPS bore 10 ms per I/O.)
    let took = t.elapsed();
    assert!(took < std::time::Duration::from_secs(60), "the healthy host stopped with the other: {took:?}");
}
