//! Simulated agents (`iocurve agent --simulate N`, issue 46): many protocol-true agents in one
//! process, each a host of its own to the coordinator, for measuring the control plane at a
//! size no test machine has.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use crate::util::cluster::{certs, coordinator, hosts_plan, lines_of};
use crate::util::{bin, f, stderr, stdout};

/// `iocurve agent --simulate n` on free loopback ports: the process and each agent's (address,
/// target).
struct Simulated {
    child: Child,
    hosts: Vec<(String, PathBuf)>,
}

impl Simulated {
    fn start(dir: &std::path::Path, certs: &std::path::Path, n: u32) -> Simulated {
        let st = dir.join("st");
        std::fs::create_dir(&st).unwrap();
        let mut child = Command::new(bin())
            .args(["agent", "--simulate", &n.to_string(), "--listen", "127.0.0.1:0", "--token-file"])
            .arg(certs.join("token"))
            .args(["--tls-cert"])
            .arg(certs.join("agent.pem"))
            .arg("--tls-key")
            .arg(certs.join("agent.key"))
            .arg("--allow")
            .arg(format!("{}/**", st.display()))
            .arg("--state-dir")
            .arg(&st)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // An agent that never says where it listens fails the test (60 s: a bound for a hang,
        // not a timing) instead of hanging it.
        let rx = lines_of(child.stdout.take().unwrap());
        let mut hosts = vec![(String::new(), PathBuf::new()); n as usize];
        for _ in 0..n {
            let line = rx.recv_timeout(std::time::Duration::from_secs(60)).expect("every simulated agent listens");
            // "iocurve agent K listening on ADDR"
            let words: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(words.get(3), Some(&"listening"), "{line:?}");
            let k: usize = words[2].parse().unwrap();
            hosts[k] = (words[5].to_string(), st.join(format!("sim-{k}/t.dat")));
        }
        Simulated { child, hosts }
    }
}

impl Drop for Simulated {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn simulated_agents_are_hosts_of_their_own_with_their_own_clocks_and_their_figures_add_up() {
    let _one = crate::util::one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let certs = certs(dir.path());
    let sim = Simulated::start(dir.path(), &certs, 6);
    hosts_plan(
        dir.path(),
        &sim.hosts,
        "[[workloads]]\nname = \"w\"\nread_pct = 70\nbackend = \"null\"\nramp = [1, 16]\nwarmup_s = 0\nintervals = 2\ninterval_s = 0.5\n",
    );
    let o = coordinator(dir.path(), &certs, &["plan.toml", "--size", "1m", "--json", "r.json"]).output().unwrap();
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let steps = r["workloads"][0]["steps"].as_array().unwrap();
    let mut offsets = Vec::new();
    for s in steps {
        let hosts = s["hosts"].as_array().unwrap();
        assert_eq!(hosts.len(), 6, "every simulated agent ran the step");
        let mut names: Vec<&str> = hosts.iter().map(|h| h["hostname"].as_str().unwrap()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 6, "each a host of its own: {names:?}");
        assert!(names.iter().all(|n| n.contains("-sim")), "{names:?}");
        // The step's figures are its hosts' together.
        let sum: f64 = hosts.iter().map(|h| f(&h["iops"])).sum();
        assert!((sum - f(&s["iops"])).abs() / sum < 1e-6, "{sum} vs {}", s["iops"]);
        // The model keeps Little's law: IOPS × mean latency = I/Os outstanding on every host.
        let outstanding = f(&s["outstanding"]);
        let little = f(&s["iops"]) * f(&s["lat_us"]["mean"]) / 1e6;
        assert!((little - outstanding).abs() / outstanding < 0.05, "{little} vs {outstanding}");
        let flags: Vec<&str> = s["flags"].as_array().unwrap().iter().filter_map(|f| f["code"].as_str()).collect();
        assert!(!flags.contains(&"host_lost") && !flags.contains(&"no_io"), "{flags:?}");
        // Never passed off as measured: one flag says so, with how many hosts.
        let said: Vec<&Value> = s["flags"].as_array().unwrap().iter().filter(|f| f["code"] == "simulated").collect();
        assert_eq!(said.len(), 1, "{flags:?}");
        assert!(said[0]["message"].as_str().unwrap().contains("6 of 6 hosts are simulated"), "{}", said[0]);
        offsets.extend(hosts.iter().map(|h| f(&h["clock_offset_ms"])));
    }
    // Each runs its own clock, up to 10 ms off this host's, and the coordinator measured it.
    assert!(offsets.iter().all(|o| o.abs() < 12.0), "{offsets:?}");
    let spread = offsets.iter().cloned().fold(f64::MIN, f64::max) - offsets.iter().cloned().fold(f64::MAX, f64::min);
    assert!(spread > 2.0, "offsets differ: {offsets:?}");
    // Latency grows with the queue, as the model says: twice the base at 16 outstanding (each
    // interval varies by up to 2 %, so not quite 2× every time).
    let (one, sixteen) = (f(&steps[0]["lat_us"]["mean"]), f(&steps[1]["lat_us"]["mean"]));
    assert!(sixteen > 1.8 * one, "{one} µs at 1, {sixteen} µs at 16");
}

#[test]
fn a_simulated_agent_refuses_what_it_cannot_model_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let certs = certs(dir.path());
    let sim = Simulated::start(dir.path(), &certs, 2);
    let refusals = [
        ("rate = [100]", None, "not a rate"),
        ("trim_pct = 20", None, "not trims"),
        ("bs = { \"4k\" = 70, \"64k\" = 30 }", None, "not a mix of block sizes"),
        ("[[faults]]\nkind = \"latency\"\nlatency_ms = 1", None, "not injected faults"),
        ("", Some("--precondition"), "not preconditioning"),
    ];
    for (key, flag, said) in refusals {
        let workload = format!(
            "[[workloads]]\nname = \"w\"\nread_pct = 50\nbackend = \"null\"\nwarmup_s = 0\nintervals = 1\ninterval_s = 0.5\n{key}\n"
        );
        hosts_plan(dir.path(), &sim.hosts, &workload);
        let mut args = vec!["plan.toml", "--size", "1m"];
        args.extend(flag);
        let o = coordinator(dir.path(), &certs, &args).output().unwrap();
        let text = format!("{}{}", stdout(&o), stderr(&o));
        assert_eq!(o.status.code(), Some(2), "{key}: {text}");
        assert!(text.contains("simulated agent") && text.contains(said), "{key}: {text}");
        assert!(!text.contains("panicked"), "{text}");
    }
    // A range past the last port is refused before anything listens.
    let o = Command::new(bin())
        .args(["agent", "--simulate", "10", "--listen", "127.0.0.1:65530", "--insecure", "--token-file"])
        .arg(certs.join("token"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("past 65535"), "{}", stderr(&o));
}

/// The coordinator ends a steady step on simulated agents as on real ones (`EndAfter` through
/// the step's interval counter): every host the same intervals, long before the planned 400.
#[test]
fn simulated_agents_end_a_steady_step_together() {
    let _one = crate::util::one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let certs = certs(dir.path());
    let sim = Simulated::start(dir.path(), &certs, 4);
    let w = "[[workloads]]\nname = \"s\"\nbackend = \"null\"\nramp = [4]\nsteady_state = \"snia\"\nwarmup_s = 0\nintervals = 400\ninterval_s = 0.2\n";
    hosts_plan(dir.path(), &sim.hosts, w);
    let t = std::time::Instant::now();
    let o = coordinator(dir.path(), &certs, &["plan.toml", "--size", "1m", "--json", "r.json"]).output().unwrap();
    // 400 intervals are 80 s; a steady end a few seconds: 40 s is neither.
    assert!(t.elapsed() < std::time::Duration::from_secs(40), "{:?}", t.elapsed());
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let s = &r["workloads"][0]["steps"][0];
    let n = s["intervals"].as_array().unwrap().len();
    assert!(s["steady_state"]["steady"] == true && n < 40, "{n}: {}", s["steady_state"]);
    let flags: Vec<&str> = s["flags"].as_array().unwrap().iter().filter_map(|f| f["code"].as_str()).collect();
    assert!(!flags.contains(&"interrupted") && !flags.contains(&"uneven_end"), "{flags:?}");
    for h in s["hosts"].as_array().unwrap() {
        assert_eq!(h["samples"].as_array().unwrap().len(), n, "every host ran the same intervals: {h}");
    }
}
