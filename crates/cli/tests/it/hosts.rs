//! Uneven hosts and host-count sweeps (issue 41) on agents in network namespaces: every I/O
//! takes some milliseconds more (a latency fault), so by Little's law each host keeps
//! `IOPS × mean latency` I/Os in flight — the workers it was given — whatever the machine's speed.

use iocurve_testkit::cluster::*;
use iocurve_testkit::*;
use serde_json::Value;

/// Two agents, the second at half the workers (`workers_scale = 0.5`), a ramp of 2 and 4
/// workers on 1 host, then on 2: each host ran its own share (by Little's law and as stored),
/// the sweep's one-host steps are planned on one host (not hosts lost), and each count has its
/// figures, its links' ceiling and its scaling.
#[test]
fn a_host_sweep_over_uneven_hosts_runs_each_count_and_each_share() {
    needs_root!();
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let namespaces: Vec<Netns> = (1..=2).map(Netns::new).collect();
    let mut agents = Vec::new();
    let mut text = String::from("links = \"1x32G FC\"\n");
    for (name, ns) in ["a", "b"].into_iter().zip(&namespaces) {
        let d = dir.path().join(name);
        std::fs::create_dir(&d).unwrap();
        let a = AgentProc::start_in(Some(ns), &d, &c, &format!("{}/*", d.display()), &[]);
        let scale = if name == "b" { "workers_scale = 0.5\n" } else { "" };
        text.push_str(&format!("[[hosts]]\naddress = \"{}\"\ntargets = [\"{}/t.dat\"]\n{scale}", a.addr, d.display()));
        agents.push(a);
    }
    text.push_str(
        "[[workloads]]\nname = \"sweep\"\nread_pct = 100\nramp = [2, 4]\nhost_ramp = [1, 2]\nwarmup_s = 0.2\nintervals = 2\ninterval_s = 1\n\
         [[faults]]\nkind = \"latency\"\nlatency_ms = 5\n",
    );
    std::fs::write(dir.path().join("plan.toml"), text).unwrap();
    let o = coordinator(dir.path(), &c, &["plan.toml", "--size", "16m", "--json", "r.json"]).output().unwrap();
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("step 3/4, 2 workers on 2 hosts"), "{out}");
    assert!(out.contains("on 2 hosts: speed"), "{out}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let b = &agents[1].addr;
    let mut shares = Vec::new();
    for s in steps(&r, 0) {
        let (count, planned) = (s["host_count"].as_u64().unwrap(), s["planned_hosts"].as_u64().unwrap());
        assert_eq!(count, planned, "each step on the hosts planned for it: {s}");
        assert!(s["flags"].as_array().unwrap().iter().all(|f| f["code"] != "fewer_hosts"), "{s}");
        let mut in_all = 0;
        for h in s["hosts"].as_array().unwrap() {
            let workers = h["workers"].as_u64().unwrap();
            let want =
                if h["host"] == *b { s["workers"].as_u64().unwrap() / 2 } else { s["workers"].as_u64().unwrap() };
            assert_eq!(workers, want, "{h}");
            // Little's law on each host: its own workers in flight, not the step's.
            let in_flight = f(&h["iops"]) * f(&h["lat_us"]["mean"]) / 1e6;
            assert!(
                (in_flight - workers as f64).abs() <= 0.2 * workers as f64,
                "{in_flight} in flight, not {workers}: {h}"
            );
            in_all += workers;
            shares.push((count, workers));
        }
        assert_eq!(s["outstanding"].as_u64(), Some(in_all), "{s}");
    }
    assert_eq!(shares, [(1, 2), (1, 4), (2, 2), (2, 1), (2, 4), (2, 2)]);
    let sweep = &r["workloads"][0]["host_sweep"];
    assert_eq!(sweep["host_counts"], serde_json::json!([1, 2]));
    let (one, two) = (&sweep["by_hosts"][0], &sweep["by_hosts"][1]);
    // 5 ms a request and 1 s intervals keep a loaded machine's stalls a small share of an
    // interval, yet a count's maximum may still be undecided (its top step too noisy) or fall
    // on 2 workers (within the 4's noise, at a lower latency): both the designed answer, so
    // each is checked as the JSON has it.
    for axis in [one, two] {
        assert_ne!(axis["maximum"].is_object(), axis["maximum_undecided"].is_object(), "{axis}");
    }
    if two["maximum"].is_object() {
        assert!([2, 4].contains(&two["maximum"]["workers"].as_u64().unwrap()), "{two}");
        // Two hosts' links of one 32G FC each: 6'400 MB/s.
        assert_eq!(f(&two["link_ceiling_mbps"]), 6400.0, "{two}");
    }
    if one["maximum"].is_object() {
        assert_eq!(f(&one["scaling_pct"]), 100.0);
    }
    if one["maximum"].is_object() && two["maximum"].is_object() {
        // Linear scaling counts the hosts by what they ran (b is half a host): 2 hosts are 1.5
        // of the first count's host.
        let linear = f(&one["maximum"]["iops"]) * 1.5;
        let scaling = f(&two["scaling_pct"]);
        assert!((scaling - f(&two["maximum"]["iops"]) / linear * 100.0).abs() < 0.01, "{scaling} % of linear");
    }
    // The summary says what each host ran where the optimum or maximum is a step of both
    // hosts; a loaded machine may put them on one host (CI of 98a9a6f: 680 IOPS on 1 host,
    // 661 on 2), and then says so.
    let w = &r["workloads"][0];
    for label in ["optimum", "maximum"] {
        if w[label].is_null() {
            assert!(w["maximum_undecided"].is_object(), "{w}");
            assert!(out.lines().any(|l| l.trim_start().starts_with("maximum ") && l.contains(" undecided: ")), "{out}");
            continue;
        }
        let s = &w["steps"][w[label]["step"].as_u64().unwrap() as usize];
        let workers = s["workers"].as_u64().unwrap();
        let want = if s["host_count"] == 2 {
            let a = &agents[0].addr;
            format!(
                "({workers} workers per host at scale 1; {a} {workers}, {b} {} workers ({} in all))",
                workers / 2,
                workers * 3 / 2
            )
        } else {
            format!("({workers} workers on 1 host)")
        };
        let lines: Vec<&str> = out.lines().filter(|l| l.trim_start().starts_with(&format!("{label} "))).collect();
        assert!(!lines.is_empty() && lines.iter().all(|l| l.ends_with(&want)), "the {label} as {want}: {out}");
    }
    assert!(out.contains("(2 workers on 1 host)"), "{out}");
    drop(agents);

    // What was stored comes back: each host's workers, the sweep's figures.
    let shown = iocurve(dir.path(), &["show", "1"]);
    let text = stdout(&shown);
    assert!(text.contains("4 on 2 hosts"), "{text}");
    assert!(text.contains("on 2 hosts: speed"), "{text}");
    let o = iocurve(dir.path(), &["report", "1", "-o", "r.html"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(dir.path().join("r.html")).unwrap();
    assert!(html.contains("sweep @ 2 hosts"), "a series per host count");
}

/// A sweep beyond the hosts listed, or on one host alone, is refused before anything runs.
#[test]
fn a_host_sweep_beyond_the_hosts_is_refused() {
    needs_root!();
    let dir = tempfile::tempdir().unwrap();
    let plan = "[[workloads]]\nname = \"w\"\nhost_ramp = [1, 2]\n";
    std::fs::write(dir.path().join("plan.toml"), plan).unwrap();
    let o = iocurve(dir.path(), &["run", "plan.toml", "--backend", "null", "--size", "8m"]);
    input_error(&o, &["host_ramp [1, 2] sweeps the number of agents", "--hosts"]);
    let c = certs(dir.path());
    let (agents, hosts) = file_agents(dir.path(), &c, &["a"]);
    hosts_plan(dir.path(), &hosts, "[[workloads]]\nname = \"w\"\nhost_ramp = [1, 2]\n");
    let o = coordinator(dir.path(), &c, &["plan.toml", "--size", "8m"]).output().unwrap();
    input_error(&o, &["goes up to 2 hosts, but the run has 1"]);
    drop(agents);
}

/// A queue-depth ramp on agents runs as a local one does: each host keeps its workers × the
/// step's depth in flight (Little's law again, 2 ms a request).
#[test]
fn a_queue_depth_ramp_on_agents_keeps_each_depth_on_each_host() {
    needs_root!();
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let (agents, hosts) = file_agents(dir.path(), &c, &["a", "b"]);
    hosts_plan(
        dir.path(),
        &hosts,
        "[[workloads]]\nname = \"qd\"\nramp = [2]\nqd_ramp = [1, 4]\nwarmup_s = 0.2\nintervals = 2\ninterval_s = 0.5\n[[faults]]\nkind = \"latency\"\nlatency_ms = 2\n",
    );
    let o = coordinator(dir.path(), &c, &["plan.toml", "--size", "16m", "--json", "r.json"]).output().unwrap();
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("2 workers × qd 4"), "{}", stdout(&o));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let depths: Vec<u64> = steps(&r, 0).iter().map(|s| s["queue_depth"].as_u64().unwrap()).collect();
    assert_eq!(depths, [1, 4]);
    for s in steps(&r, 0) {
        let want = 2.0 * s["queue_depth"].as_f64().unwrap();
        for h in s["hosts"].as_array().unwrap() {
            let in_flight = f(&h["iops"]) * f(&h["lat_us"]["mean"]) / 1e6;
            assert!((in_flight - want).abs() <= 0.2 * want, "{in_flight} in flight, not {want}: {h}");
        }
    }
    drop(agents);
}

/// A concurrent step on agents runs as a local one does: each agent runs every member with its
/// share of its workers (and of its `workers_scale`), and each member keeps its own in flight
/// on every host (Little's law, 2 ms a request).
#[test]
fn a_concurrent_step_on_uneven_agents_runs_every_member_on_every_host() {
    needs_root!();
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let (agents, hosts) = file_agents(dir.path(), &c, &["a", "b"]);
    let mut text = String::new();
    for (k, (addr, target)) in hosts.iter().enumerate() {
        let scale = if k == 1 { "workers_scale = 0.5\n" } else { "" };
        text.push_str(&format!("[[hosts]]\naddress = \"{addr}\"\ntargets = [\"{}\"]\n{scale}", target.display()));
    }
    text.push_str(
        "[defaults]\nramp = [4]\nwarmup_s = 0.2\nintervals = 2\ninterval_s = 0.5\n\
         [[workloads]]\nname = \"oltp\"\nread_pct = 70\nqueue_depth = 2\ntogether = \"mix\"\nshare = 3\n\
         [[workloads]]\nname = \"scan\"\npattern = \"sequential\"\nbs = \"64k\"\ntogether = \"mix\"\n\
         [[faults]]\nkind = \"latency\"\nlatency_ms = 2\n",
    );
    std::fs::write(dir.path().join("plan.toml"), text).unwrap();
    let o = coordinator(dir.path(), &c, &["plan.toml", "--size", "16m", "--json", "r.json"]).output().unwrap();
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    // At 4 workers: oltp 3 of them at qd 2, scan 1; host b at half: oltp 2 (1.5 rounded), scan 1.
    let in_flight = |w: usize| {
        let s = &steps(&r, w)[0];
        f(&s["iops"]) * f(&s["lat_us"]["mean"]) / 1e6
    };
    for (w, want) in [(1, (3 * 2 + 2 * 2) as f64), (2, 2.0), (0, 12.0)] {
        let got = in_flight(w);
        assert!((got - want).abs() <= 0.2 * want, "workload {w}: {got} in flight, not {want}");
    }
    let total = &steps(&r, 0)[0];
    assert_eq!(total["host_count"], 2);
    // Each keeps what its hosts' shares keep: no step thinks time was lost (a busy machine
    // may flag its CPU, which is not this).
    for w in 0..3 {
        let s = &steps(&r, w)[0];
        assert!(s["flags"].as_array().unwrap().iter().all(|f| f["code"] != "littles_law"), "{s}");
    }
    assert_eq!(steps(&r, 1)[0]["outstanding"].as_u64(), Some(10));
    assert_eq!(total["outstanding"].as_u64(), Some(12));
    // Each host's workers are its members' together (found by an outside attack: host b showed
    // its scale of the step's, 2, where it ran oltp 2 and scan 1).
    let each: Vec<u64> = total["hosts"].as_array().unwrap().iter().map(|h| h["workers"].as_u64().unwrap()).collect();
    assert_eq!(each, [4, 3]);
    let sum: u64 = [1, 2].iter().map(|&w| steps(&r, w)[0]["read"]["ops"].as_u64().unwrap()).sum();
    assert_eq!(total["read"]["ops"].as_u64(), Some(sum), "the total is its members together");
    drop(agents);
}
