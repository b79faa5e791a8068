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
    /// The relays' addresses (`--simulate-relays`).
    relays: Vec<String>,
}

impl Simulated {
    fn start(dir: &std::path::Path, certs: &std::path::Path, n: u32) -> Simulated {
        Self::start_with(dir, certs, n, None)
    }

    /// With `relays`: each agent its own credentials (`--simulate-ca-key`) and that many relays.
    fn start_with(dir: &std::path::Path, certs: &std::path::Path, n: u32, relays: Option<u32>) -> Simulated {
        let st = dir.join("st");
        std::fs::create_dir(&st).unwrap();
        // Hosts of their own all listen on one port, each at its own address (port 0 is
        // refused there): one free now.
        let listen = match relays {
            Some(_) => format!(
                "127.0.0.1:{}",
                std::net::TcpListener::bind("127.1.0.1:0").unwrap().local_addr().unwrap().port()
            ),
            None => "127.0.0.1:0".into(),
        };
        let mut cmd = Command::new(bin());
        cmd.args(["agent", "--simulate", &n.to_string(), "--listen", &listen, "--token-file"])
            .arg(certs.join("token"))
            .args(["--tls-cert"])
            .arg(certs.join("agent.pem"))
            .arg("--tls-key")
            .arg(certs.join("agent.key"))
            .arg("--allow")
            .arg(format!("{}/**", st.display()))
            .arg("--state-dir")
            .arg(&st);
        if let Some(m) = relays {
            cmd.arg("--simulate-ca-key").arg(certs.join("ca.key")).arg("--client-ca").arg(certs.join("ca.pem"));
            cmd.args(["--simulate-relays", &m.to_string()]);
        }
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        // An agent that never says where it listens fails the test (60 s: a bound for a hang,
        // not a timing) instead of hanging it.
        let rx = lines_of(child.stdout.take().unwrap());
        let mut hosts = vec![(String::new(), PathBuf::new()); n as usize];
        let mut relay_at = vec![String::new(); relays.unwrap_or(0) as usize];
        for _ in 0..n + relays.unwrap_or(0) {
            let line = rx.recv_timeout(std::time::Duration::from_secs(60)).expect("every simulated agent listens");
            // "iocurve agent K listening on ADDR", "iocurve relay R listening on ADDR"
            let words: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(words.get(3), Some(&"listening"), "{line:?}");
            let k: usize = words[2].parse().unwrap();
            if words[1] == "relay" {
                relay_at[k] = words[5].to_string();
            } else {
                hosts[k] = (words[5].to_string(), st.join(format!("sim-{k}/t.dat")));
            }
        }
        Simulated { child, hosts, relays: relay_at }
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

/// Issue 46, part 2 measured through relays: simulated agents with credentials of their own
/// (each its loopback address, certificate and token, as `certs add-host` gives a host), driven
/// through relays started by hand (`run --relays`): every host runs every step, each has a row
/// of its own (its relay's summary of it), and the step is its hosts' figures together.
#[test]
fn simulated_agents_of_their_own_credentials_run_through_relays_started_by_hand() {
    let _one = crate::util::one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let certs = certs(dir.path());
    let sim = Simulated::start_with(dir.path(), &certs, 6, Some(2));
    assert!(sim.hosts.iter().all(|(a, _)| a.starts_with("127.1.0.")), "{:?}", sim.hosts);
    assert!(sim.relays.iter().all(|a| a.starts_with("127.2.0.")), "{:?}", sim.relays);
    hosts_plan(
        dir.path(),
        &sim.hosts,
        "[[workloads]]\nname = \"w\"\nread_pct = 70\nbackend = \"null\"\nramp = [1, 16]\nwarmup_s = 0\nintervals = 2\ninterval_s = 0.5\n",
    );
    let relays = sim.relays.join(",");
    let (client, key) = (certs.join("client.pem"), certs.join("client.key"));
    let mut args = vec!["plan.toml", "--size", "1m", "--json", "r.json", "--relay-every", "3", "--relays", &relays];
    args.extend(["--token-per-host", "--client-cert", client.to_str().unwrap(), "--client-key", key.to_str().unwrap()]);
    let o = coordinator(dir.path(), &certs, &args).output().unwrap();
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(o.status.success(), "{out}{err}");
    assert_eq!(out.matches(" (through relay ").count(), 6, "each host's clock, through its relay: {out}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(r["host"]["agents"].as_array().unwrap().len(), 6, "the hosts, not the relays");
    for s in r["workloads"][0]["steps"].as_array().unwrap() {
        assert_eq!(s["host_count"], 6, "{s}");
        let rows = s["hosts"].as_array().unwrap();
        let named: Vec<&str> = rows.iter().map(|h| h["host"].as_str().unwrap()).collect();
        assert_eq!(named, sim.hosts.iter().map(|h| h.0.as_str()).collect::<Vec<_>>(), "a row per host: {rows:?}");
        assert!(rows.iter().all(|h| h.get("hosts").is_none()), "each a host of its own: {rows:?}");
        let sum: f64 = rows.iter().map(|h| f(&h["iops"])).sum();
        assert!((sum - f(&s["iops"])).abs() / sum < 1e-6, "{sum} vs {}", s["iops"]);
        let said: Vec<&Value> = s["flags"].as_array().unwrap().iter().filter(|f| f["code"] == "simulated").collect();
        assert!(said[0]["message"].as_str().unwrap().contains("6 of 6 hosts are simulated"), "{}", said[0]);
    }
    // A host-count sweep through relays runs whole groups: 3 hosts (the first relay's), then 6;
    // a count inside a group is refused before any step, with the counts that would do.
    let sweep = "[[workloads]]\nname = \"w\"\nbackend = \"null\"\nramp = [4]\nhost_ramp = [3, 6]\nwarmup_s = 0\nintervals = 2\ninterval_s = 0.5\n";
    hosts_plan(dir.path(), &sim.hosts, sweep);
    let o = coordinator(dir.path(), &certs, &args).output().unwrap();
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(o.status.success(), "{out}{err}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let steps = r["workloads"][0]["steps"].as_array().unwrap();
    let counts: Vec<(u64, usize)> =
        steps.iter().map(|s| (s["host_count"].as_u64().unwrap(), s["hosts"].as_array().unwrap().len())).collect();
    assert_eq!(counts, [(3, 3), (6, 6)], "{steps:?}");
    let first: Vec<&str> = steps[0]["hosts"].as_array().unwrap().iter().map(|h| h["host"].as_str().unwrap()).collect();
    assert_eq!(first, sim.hosts[..3].iter().map(|h| h.0.as_str()).collect::<Vec<_>>(), "the first relay's group");
    for s in steps {
        let flags: Vec<&str> = s["flags"].as_array().unwrap().iter().filter_map(|f| f["code"].as_str()).collect();
        assert!(!flags.contains(&"fewer_hosts") && !flags.contains(&"host_lost"), "{flags:?}");
        let sum: f64 = s["hosts"].as_array().unwrap().iter().map(|h| f(&h["iops"])).sum();
        assert!((sum - f(&s["iops"])).abs() / sum < 1e-6, "{sum} vs {}", s["iops"]);
    }
    hosts_plan(dir.path(), &sim.hosts, &sweep.replace("[3, 6]", "[2, 6]"));
    // Refused by the run before any agent is dialled, and by the dry run alike.
    for dry in [false, true] {
        let args = if dry { [&args[..], &["--dry-run"]].concat() } else { args.clone() };
        let o = coordinator(dir.path(), &certs, &args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{}{}", stdout(&o), stderr(&o));
        assert!(
            stderr(&o).contains("host_ramp [2, 6] asks for 2 hosts, but through relays a step runs every host of a relay's group or none: give counts of whole groups (3, 6)"),
            "{}",
            stderr(&o)
        );
    }
}

/// A real agent started by hand at loopback address `ip` with the credentials `certs add-host
/// IP` issued and mutual TLS (`extra`: `--relay`, or its targets' `--allow`), killed on drop.
struct ByHand {
    child: Child,
    addr: String,
}

impl ByHand {
    fn start(dir: &std::path::Path, certs: &std::path::Path, ip: &str, extra: &[&str]) -> ByHand {
        let host = certs.join("hosts").join(ip);
        if !host.exists() {
            let o = crate::util::iocurve(dir, &["certs", "add-host", certs.to_str().unwrap(), ip]);
            assert!(o.status.success(), "{}", stderr(&o));
        }
        let mut child = Command::new(bin())
            .args(["agent", "--listen", &format!("{ip}:0"), "--token-file"])
            .arg(host.join("token"))
            .arg("--tls-cert")
            .arg(host.join("agent.pem"))
            .arg("--tls-key")
            .arg(host.join("agent.key"))
            .arg("--client-ca")
            .arg(certs.join("ca.pem"))
            .args(extra)
            .current_dir(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let rx = lines_of(child.stdout.take().unwrap());
        let line = rx.recv_timeout(std::time::Duration::from_secs(60)).expect("the agent says where it listens");
        let addr = line.trim().rsplit(' ').next().unwrap_or_default().to_string();
        assert!(addr.starts_with(ip), "{line:?}");
        ByHand { child, addr }
    }
}

/// The coordinator run with `args` once the relay it goes through has let go of the agents its
/// last run took (half a second after that run: within 30 s, a bound for a hang).
fn once_the_relay_lets_go(dir: &std::path::Path, certs: &std::path::Path, args: &[&str]) -> std::process::Output {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let o = coordinator(dir, certs, args).output().unwrap();
        if !stderr(&o).contains("in use by a relay") || std::time::Instant::now() > deadline {
            return o;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

impl ByHand {
    /// An agent at each of `ips` on a file of its own (`DIR/IP/t.dat`): their (address, file).
    fn on_files(dir: &std::path::Path, certs: &std::path::Path, ips: &[&str]) -> (Vec<(String, PathBuf)>, Vec<ByHand>) {
        let (mut hosts, mut agents) = (Vec::new(), Vec::new());
        for ip in ips {
            let d = dir.join(ip);
            std::fs::create_dir(&d).unwrap();
            let allow = format!("{}/*", d.display());
            let a = ByHand::start(dir, certs, ip, &["--allow", &allow]);
            hosts.push((a.addr.clone(), d.join("t.dat")));
            agents.push(a);
        }
        (hosts, agents)
    }
}

impl Drop for ByHand {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Issue 46: relays for a cluster of agents started by hand (`certs add-host` for each host,
/// `agent --relay` beside the first): the coordinator mints the relay's grant from the
/// cluster's CA key and token, and the agents do real I/O on their files through it.
#[test]
fn real_agents_started_by_hand_run_through_a_relay_started_by_hand() {
    let _one = crate::util::one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let certs = certs(dir.path());
    let (hosts, _agents) = ByHand::on_files(dir.path(), &certs, &["127.0.0.2", "127.0.0.3", "127.0.0.4"]);
    // The relay: a second agent on the first host, with that host's credentials.
    let relay = ByHand::start(dir.path(), &certs, "127.0.0.2", &["--relay"]);
    hosts_plan(
        dir.path(),
        &hosts,
        "[[workloads]]\nname = \"r\"\nread_pct = 70\nramp = [1, 2]\nwarmup_s = 0\nintervals = 2\ninterval_s = 0.5\n",
    );
    let (client, key) = (certs.join("client.pem"), certs.join("client.key"));
    let args = [
        "plan.toml",
        "--size",
        "4m",
        "--json",
        "r.json",
        "--relay-every",
        "3",
        "--relays",
        &relay.addr,
        "--token-per-host",
        "--client-cert",
        client.to_str().unwrap(),
        "--client-key",
        key.to_str().unwrap(),
    ];
    let o = coordinator(dir.path(), &certs, &args).output().unwrap();
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(o.status.success(), "{out}{err}");
    assert_eq!(out.matches(&format!(" (through relay {})", relay.addr)).count(), 3, "{out}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(r["host"]["agents"].as_array().unwrap().len(), 3);
    for s in r["workloads"][0]["steps"].as_array().unwrap() {
        assert_eq!(s["host_count"], 3, "{s}");
        // A row per host behind the relay (not the relay's group row), each its own figures on
        // this host's clock.
        let rows = s["hosts"].as_array().unwrap();
        let named: Vec<&str> = rows.iter().map(|h| h["host"].as_str().unwrap()).collect();
        assert_eq!(named, hosts.iter().map(|h| h.0.as_str()).collect::<Vec<_>>(), "{rows:?}");
        for h in rows {
            assert!(h.get("hosts").is_none() && f(&h["iops"]) > 0.0 && f(&h["lat_us"]["p99"]) > 0.0, "{h}");
            assert!(h["clock_offset_ms"].as_f64().unwrap().abs() < 100.0, "{h}");
        }
        // Real I/O, both ways, on the agents' own files.
        assert!(s["read"]["ops"].as_u64().unwrap() > 0 && s["write"]["ops"].as_u64().unwrap() > 0, "{s}");
    }
    // The hosts' rows add up to the step's merged figures bucket for bucket (each host's
    // intervals merged exactly at its relay, the hosts' at the coordinator), as stored.
    let o = crate::util::iocurve(dir.path(), &["export", "1", "--format", "histograms", "-o", "h.csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = std::fs::read_to_string(dir.path().join("h.csv")).unwrap();
    let mut merged = std::collections::BTreeMap::<(String, String, String), (u64, u64)>::new();
    for line in csv.lines().skip(1) {
        let c: Vec<&str> = line.split(',').collect();
        let key = (c[2].to_string(), c[5].to_string(), c[6].to_string());
        let count: u64 = c[7].parse().unwrap();
        let e = merged.entry(key).or_default();
        if c[4].is_empty() { e.0 += count } else { e.1 += count }
    }
    assert!(merged.len() > 10, "{csv}");
    for (k, (step, hosts)) in &merged {
        assert_eq!(step, hosts, "step {} {} bucket {}: merged {step}, the hosts' {hosts}", k.0, k.1, k.2);
    }
    // The relay lets its agents go with its coordinator (agents started by hand outlive the
    // run): a flat run takes them next (within 30 s: a bound for a hang; the relay lets go
    // half a second after), then a run through the same relay again, under a new grant.
    let flat = [
        "plan.toml",
        "--size",
        "4m",
        "--token-per-host",
        "--client-cert",
        client.to_str().unwrap(),
        "--client-key",
        key.to_str().unwrap(),
        "--on-host-loss",
        "abort",
    ];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let o = coordinator(dir.path(), &certs, &flat).output().unwrap();
        if o.status.success() {
            break;
        }
        assert!(stderr(&o).contains("in use by a relay"), "{}", stderr(&o));
        assert!(std::time::Instant::now() < deadline, "the relay still holds its agents: {}", stderr(&o));
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    // The second time with the second host's intervals in full (`--host-intervals`): its every
    // interval and second stored under it, as without relays; the others one row per step.
    let in_full = [&args[..], &["--host-intervals", "127.0.0.3"]].concat();
    let o = coordinator(dir.path(), &certs, &in_full).output().unwrap();
    assert!(o.status.success(), "a second run through the relay: {}{}", stdout(&o), stderr(&o));
    let py = "import sqlite3\nc = sqlite3.connect('iocurve.db')\n\
        run = c.execute('SELECT max(id) FROM runs').fetchone()[0]\n\
        q = 'SELECT h.address, count(DISTINCT i.id), min(i.duration_s), (SELECT count(*) FROM samples x JOIN steps y ON x.step_id = y.id JOIN workloads z ON y.workload_id = z.id WHERE z.run_id = ? AND x.host IS NOT NULL AND x.host = h.host AND x.step_id = h.step_id) FROM step_hosts h JOIN steps s ON h.step_id = s.id JOIN workloads w ON s.workload_id = w.id JOIN intervals i ON i.step_id = s.id AND i.host = h.host WHERE w.run_id = ? GROUP BY h.step_id, h.address ORDER BY h.step_id, h.address'\n\
        for r in c.execute(q, (run, run)): print(r[0], r[1], r[2], r[3] > 0)";
    let o = std::process::Command::new("python3").args(["-c", py]).current_dir(dir.path()).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = stdout(&o);
    let expected: String = (0..2)
        .flat_map(|_| {
            hosts.iter().map(|h| match h.0.starts_with("127.0.0.3:") {
                true => format!("{} 2 0.5 True\n", h.0),
                false => format!("{} 1 1.0 False\n", h.0),
            })
        })
        .collect();
    assert_eq!(rows, expected, "per step and host: intervals stored, the shortest, any per-second samples");
    // A name of no host of the run: said, before any step (exit 2).
    let nosuch = [&args[..], &["--host-intervals", "127.0.0.3,nosuch.example"]].concat();
    let o = once_the_relay_lets_go(dir.path(), &certs, &nosuch);
    assert_eq!(o.status.code(), Some(2), "{}{}", stdout(&o), stderr(&o));
    assert!(stderr(&o).contains("--host-intervals: nosuch.example is none of the run's hosts"), "{}", stderr(&o));
    // A fault on one host's target goes through two relays to that host alone: the coordinator
    // sends it to the relay of that host's group, the relay to that host (the other relay's
    // agents would refuse a target that is not theirs, and fail the run). Its row says so. And
    // uneven hosts: the second runs 4 times the workers (`workers_scale`), given by its relay.
    let second = ByHand::start(dir.path(), &certs, "127.0.0.4", &["--relay"]);
    let faulted = format!(
        "[[workloads]]\nname = \"r\"\nread_pct = 70\nramp = [1]\nwarmup_s = 0\nintervals = 2\ninterval_s = 0.5\n\
         [[faults]]\nkind = \"latency\"\nlatency_ms = 50\ntarget = \"{}\"\n",
        hosts[2].1.display()
    );
    let mut plan = String::from("targets = [\"unused\"]\n");
    for (k, (addr, target)) in hosts.iter().enumerate() {
        let scale = if k == 1 { 4 } else { 1 };
        plan += &format!(
            "[[hosts]]\naddress = \"{addr}\"\ntargets = [\"{}\"]\nworkers_scale = {scale}\n",
            target.display()
        );
    }
    std::fs::write(dir.path().join("plan.toml"), plan + &faulted).unwrap();
    let relays = format!("{},{}", relay.addr, second.addr);
    let mut two = args;
    (two[6], two[8]) = ("2", &relays);
    let o = once_the_relay_lets_go(dir.path(), &certs, &two);
    assert!(o.status.success(), "a fault on one target through two relays: {}{}", stdout(&o), stderr(&o));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let s = &r["workloads"][0]["steps"][0];
    let rows = s["hosts"].as_array().unwrap();
    let mean_ms = |i: usize| rows[i]["lat_us"]["mean"].as_f64().unwrap() / 1e3;
    assert_eq!(rows.len(), 3, "a row per host: {rows:?}");
    assert!(mean_ms(2) >= 50.0, "the third host's I/Os held 50 ms: {} ms", mean_ms(2));
    // (Their latency is the disk's, as the third's is beside its 50 ms: never held.)
    assert!(mean_ms(0) + 25.0 < mean_ms(2) && mean_ms(1) + 25.0 < mean_ms(2), "the others untouched: {rows:?}");
    let workers: Vec<u64> = rows.iter().map(|h| h["workers"].as_u64().unwrap()).collect();
    assert_eq!(workers, [1, 4, 1], "each host its share: {rows:?}");
    assert_eq!(s["outstanding"], 6 * s["queue_depth"].as_u64().unwrap(), "{s}");
    // A sweep whose first group's relay does not answer: that group's count has no host left
    // and is skipped, said; the next count runs on the other group alone, flagged as short of
    // its hosts (none takes the lost ones' places).
    let sweep =
        "[[workloads]]\nname = \"s\"\nramp = [1]\nhost_ramp = [2, 3]\nwarmup_s = 0\nintervals = 2\ninterval_s = 0.5\n";
    hosts_plan(dir.path(), &hosts, sweep);
    let dead = std::net::TcpListener::bind("127.0.0.9:0").unwrap().local_addr().unwrap().to_string();
    let relays = format!("{dead},{}", second.addr);
    (two[6], two[8]) = ("2", &relays);
    let o = once_the_relay_lets_go(dir.path(), &certs, &two);
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(3), "hosts lost before the first step: {out}{err}");
    assert!(
        err.contains(
            "workload s: none of the first 2 hosts is with the run any more: its steps on 2 hosts are skipped"
        ),
        "{out}{err}"
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let steps = r["workloads"][0]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1, "{steps:?}");
    assert_eq!(
        (steps[0]["host_count"].as_u64(), steps[0]["hosts"][0]["host"].as_str()),
        (Some(1), Some(hosts[2].0.as_str()))
    );
    let flags = steps[0]["flags"].as_array().unwrap();
    assert!(flags.iter().any(|f| f["code"] == "fewer_hosts"), "{}", steps[0]);
}

/// The coordinator's arguments for a run of `plan.toml` (its JSON in `r.json`) through relays
/// started by hand (`relays`, comma-separated) in groups of `every`, with per-host tokens and
/// the cluster's client certificate, then `extra`.
fn through_relays(certs: &std::path::Path, every: &str, relays: &str, extra: &[&str]) -> Vec<String> {
    let (client, key) = (certs.join("client.pem"), certs.join("client.key"));
    let mut args: Vec<String> = ["plan.toml", "--json", "r.json", "--relay-every", every, "--relays", relays]
        .iter()
        .map(|a| a.to_string())
        .collect();
    args.extend(["--token-per-host".to_string(), "--client-cert".to_string(), client.display().to_string()]);
    args.extend(["--client-key".to_string(), key.display().to_string()]);
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

/// Issue 46: a trace replayed through relays started by hand is split over the hosts behind
/// them as over hosts of the coordinator's own: three devices of a trace, split by device over
/// three agents in two relays' groups, each agent replaying its device's I/Os (a half, a third
/// and a sixth) from the common start, the step's due I/Os the whole trace's.
#[test]
fn a_trace_replays_through_relays_split_over_the_hosts_behind_them() {
    let _one = crate::util::one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let certs = certs(dir.path());
    let (hosts, mut agents) = ByHand::on_files(dir.path(), &certs, &["127.0.0.2", "127.0.0.3", "127.0.0.4"]);
    let first = ByHand::start(dir.path(), &certs, "127.0.0.2", &["--relay"]);
    let second = ByHand::start(dir.path(), &certs, "127.0.0.4", &["--relay"]);
    // 1200 I/Os over 2 s: devices d0, d1, d2 in the order they first appear, 600, 400, 200.
    let mut csv = String::from("time,device,offset,size,op\n");
    for k in 0..1200u64 {
        let dev = ["d0", "d0", "d0", "d1", "d1", "d2"][k as usize % 6];
        let op = if k % 2 == 0 { "R" } else { "W" };
        csv.push_str(&format!("{:.6},{dev},{},4096,{op}\n", k as f64 / 600.0, (k % 500) * 8192));
    }
    std::fs::write(dir.path().join("t.csv"), csv).unwrap();
    hosts_plan(
        dir.path(),
        &hosts,
        "[[workloads]]\nname = \"r\"\nreplay = \"t.csv\"\nreplay_split = \"device\"\nreplay_map = \"*=1\"\ninterval_s = 1\n",
    );
    let relays = format!("{},{}", first.addr, second.addr);
    let args = through_relays(&certs, "2", &relays, &["--size", "8m", "--buffered", "--write-iolog", "r.log"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = coordinator(dir.path(), &certs, &args).output().unwrap();
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(o.status.success(), "{out}{err}");
    assert_eq!(out.matches(" (through relay ").count(), 3, "{out}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let s = &r["workloads"][0]["steps"][0];
    assert_eq!(s["rate"]["due"].as_u64(), Some(1200), "{}", s["rate"]);
    let secs = f(&s["duration_s"]);
    let rows = s["hosts"].as_array().unwrap();
    let named: Vec<&str> = rows.iter().map(|h| h["host"].as_str().unwrap()).collect();
    assert_eq!(named, hosts.iter().map(|h| h.0.as_str()).collect::<Vec<_>>(), "{rows:?}");
    // Each host its device's share, issued on its schedule: all of it but those in flight or
    // still due at the end (a loaded machine's), never another host's.
    let unissued = s["rate"]["backlog"].as_u64().unwrap() + s["rate"]["dropped"].as_u64().unwrap();
    let mut done = 0.0;
    for (h, share) in rows.iter().zip([600.0, 400.0, 200.0]) {
        let ops = f(&h["iops"]) * secs;
        assert!(ops <= share + 0.5 && ops >= share - 64.0 - unissued as f64, "{ops} of {share}: {h}");
        done += ops;
    }
    assert!(done + unissued as f64 <= 1200.5, "{done} done, {unissued} not issued");
    // Reads and writes as the trace has them, on the agents' own files.
    assert!(s["read"]["ops"].as_u64().unwrap() > 0 && s["write"]["ops"].as_u64().unwrap() > 0, "{s}");
    // The run's I/O log (`--write-iolog`) through the relays: every host's I/Os on its own file
    // as the run names it, all the agents issued, on one clock from the step's start (the
    // trace's 2 s: the hosts started within milliseconds).
    let log = std::fs::read_to_string(dir.path().join("r.log")).unwrap();
    let names: Vec<String> = hosts.iter().map(|(a, p)| format!("{a}:{}", p.display())).collect();
    let (count, last) = crate::util::traces::logged_ios(&log, &names);
    assert!(count[0] <= 600 && count[1] <= 400 && count[2] <= 200, "{count:?}");
    assert_eq!(count.iter().sum::<u64>() + unissued, 1200, "{count:?}, {unissued} not issued");
    assert!((1_900_000..2_100_000).contains(&last), "{last} µs");
    // A host lost behind its relay during a replay's first speed: the next speed is split over
    // the two hosts left (devices d0 and d2 on the first, d1 on the third), the whole trace
    // still due (exit code 3: a host was lost).
    let db = dir.path().join("iocurve.db");
    let before = crate::util::cluster::stored_intervals(&db);
    let args = through_relays(&certs, "2", &relays, &["--size", "8m", "--buffered", "--replay-speed", "1,2"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = coordinator(dir.path(), &certs, &args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    crate::util::cluster::wait_for_intervals(&db, before);
    let _ = agents[1].child.kill();
    let o = run.wait_with_output().unwrap();
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(3), "{out}{err}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let s = &r["workloads"][0]["steps"][1];
    assert_eq!(s["rate"]["due"].as_u64(), Some(1200), "{}", s["rate"]);
    let rows = s["hosts"].as_array().unwrap();
    let named: Vec<&str> = rows.iter().map(|h| h["host"].as_str().unwrap()).collect();
    assert_eq!(named, [hosts[0].0.as_str(), hosts[2].0.as_str()], "{rows:?}");
    let (secs, unissued) =
        (f(&s["duration_s"]), s["rate"]["backlog"].as_u64().unwrap() + s["rate"]["dropped"].as_u64().unwrap());
    for (h, share) in rows.iter().zip([800.0, 400.0]) {
        let ops = f(&h["iops"]) * secs;
        assert!(ops <= share + 0.5 && ops >= share - 64.0 - unissued as f64, "{ops} of {share}: {h}");
    }
}

/// Issue 46: preconditioning and the final verification through a relay started by hand: each
/// agent writes its own file whole, the coordinator keeps each file's state under the agent's
/// name, and every block the run's verifying writes left is read back on every agent, the
/// counts added up over the group.
#[test]
fn passes_go_through_a_relay_started_by_hand() {
    let _one = crate::util::one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let certs = certs(dir.path());
    let (hosts, _agents) = ByHand::on_files(dir.path(), &certs, &["127.0.0.2", "127.0.0.3"]);
    let relay = ByHand::start(dir.path(), &certs, "127.0.0.2", &["--relay"]);
    hosts_plan(
        dir.path(),
        &hosts,
        "[[workloads]]\nname = \"v\"\nread_pct = 50\nverify = true\nramp = [2]\nwarmup_s = 0\nintervals = 2\ninterval_s = 0.5\n",
    );
    let (client, key) = (certs.join("client.pem"), certs.join("client.key"));
    let args = [
        "plan.toml",
        "--size",
        "1m",
        "--json",
        "r.json",
        "--precondition",
        "--verify-final",
        "--relay-every",
        "2",
        "--relays",
        &relay.addr,
        "--token-per-host",
        "--client-cert",
        client.to_str().unwrap(),
        "--client-key",
        key.to_str().unwrap(),
    ];
    let o = coordinator(dir.path(), &certs, &args).output().unwrap();
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(o.status.success(), "{out}{err}");
    // Each agent's file written whole, its state kept under its agent's name.
    let py = "import sqlite3\nfor r in sqlite3.connect('iocurve.db').execute('SELECT target, bytes_written, finished_at IS NOT NULL FROM preconditions ORDER BY target'): print(r[0], r[1], r[2])";
    let o = std::process::Command::new("python3").args(["-c", py]).current_dir(dir.path()).output().unwrap();
    let expected: String = hosts.iter().map(|h| format!("{}:{} 1048576 1\n", h.0, h.1.display())).collect();
    assert_eq!(stdout(&o), expected, "{}", stderr(&o));
    assert!(out.contains("precondition on 2 agents: every block of 2 targets once"), "{out}");
    // Every block the verifying writes reached, on both agents: more than one agent's 256 (the
    // random writes of a second reach most of them, on a machine ten times slower too).
    let said = "verification on 2 agents: 0 lost, 0 corrupted, 0 misplaced of ";
    let checked: u64 =
        out.split(said).nth(1).and_then(|t| t.split(' ').next()).and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!((257..=512).contains(&checked), "{out}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let map = r["final_verification"]["map"].as_str().unwrap();
    assert!(hosts.iter().all(|h| map.contains(&format!("{}:", h.0))) && !map.contains(&relay.addr), "{map}");
    // Writes dropped below the second agent (a fault on its file alone): found there, each
    // problem naming that agent's file, none the first's (exit code 4).
    let drop = format!("[[faults]]\nkind = \"drop-write\"\nshare = 0.05\ntarget = \"{}\"\n", hosts[1].1.display());
    let plan = std::fs::read_to_string(dir.path().join("plan.toml")).unwrap();
    std::fs::write(dir.path().join("plan.toml"), plan + &drop).unwrap();
    let o = once_the_relay_lets_go(dir.path(), &certs, &args);
    assert_eq!(o.status.code(), Some(4), "dropped writes found: {}{}", stdout(&o), stderr(&o));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let lost = r["final_verification"]["lost"].as_u64().unwrap();
    assert!(lost > 0, "{}", r["final_verification"]);
    let o = crate::util::iocurve(dir.path(), &["export", "2", "--format", "problems", "-o", "p.csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = std::fs::read_to_string(dir.path().join("p.csv")).unwrap();
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert_eq!(rows.len() as u64, lost, "one row per problem: {csv}");
    let second = format!("{}:{}", hosts[1].0, hosts[1].1.display());
    assert!(rows.iter().all(|r| r.contains(&second) && r.contains("lost")), "{csv}");
}

/// Issue 46: Ctrl-C during a precondition pass through a relay stops it on every agent, each
/// saying where it stopped (2 GiB each: ten seconds at this disk's 200 MB/s, where the first
/// progress line comes after one); the next run resumes each file there (the states are kept under each
/// agent's name, the resume mapped to each agent's own targets), and finishes them.
#[test]
fn ctrl_c_during_a_pass_through_a_relay_and_the_next_run_resumes() {
    let _one = crate::util::one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let certs = certs(dir.path());
    let (hosts, _agents) = ByHand::on_files(dir.path(), &certs, &["127.0.0.2", "127.0.0.3"]);
    let relay = ByHand::start(dir.path(), &certs, "127.0.0.2", &["--relay"]);
    hosts_plan(
        dir.path(),
        &hosts,
        "[[workloads]]\nname = \"w\"\nramp = [1]\nwarmup_s = 0\nintervals = 1\ninterval_s = 0.5\n",
    );
    let (client, key) = (certs.join("client.pem"), certs.join("client.key"));
    let args = [
        "plan.toml",
        "--size",
        "2g",
        "--precondition",
        "--relay-every",
        "2",
        "--relays",
        &relay.addr,
        "--token-per-host",
        "--client-cert",
        client.to_str().unwrap(),
        "--client-key",
        key.to_str().unwrap(),
    ];
    let mut child =
        coordinator(dir.path(), &certs, &args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let rx = lines_of(child.stdout.take().unwrap());
    // Once the pass is under way (a line of progress), not after a fixed time.
    let mut printed = Vec::new();
    loop {
        let line = rx.recv_timeout(std::time::Duration::from_secs(60)).expect("the pass says how far it is");
        let progress = line.contains(" of 2g (");
        printed.push(line);
        if progress {
            break;
        }
    }
    // SAFETY: kill only signals the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    printed.extend(rx.iter());
    let printed = printed.join("\n");
    assert_eq!(o.status.code(), Some(130), "{printed}{}", stderr(&o));
    assert!(printed.contains("interrupted while preconditioning"), "{printed}");
    let states = || {
        let py = "import sqlite3\nfor r in sqlite3.connect('iocurve.db').execute('SELECT target, bytes_written, finished_at IS NOT NULL FROM preconditions ORDER BY target'): print(r[0], r[1], r[2])";
        let o = std::process::Command::new("python3").args(["-c", py]).current_dir(dir.path()).output().unwrap();
        stdout(&o)
    };
    let before = states();
    let unfinished: Vec<&str> = before
        .lines()
        .filter(|l| l.ends_with(" 0") && !l.contains(" 0 0"))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert!(!unfinished.is_empty(), "a file stopped half-written: {before}");
    let o = once_the_relay_lets_go(dir.path(), &certs, &args);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    for t in &unfinished {
        assert!(out.contains(&format!("precondition {t}: resuming at ")), "{t}: {out}");
    }
    let expected: String = hosts.iter().map(|h| format!("{}:{} 2147483648 1\n", h.0, h.1.display())).collect();
    let after = states();
    // Written whole once: the bytes of the first run and the second add up to no more than the
    // file and a write in flight per agent (a resumed pass does not start over).
    assert_eq!(after.lines().count(), 2, "{after}");
    for (line, want) in after.lines().zip(expected.lines()) {
        let (name, rest) = line.split_once(' ').unwrap();
        assert_eq!(name, want.split(' ').next().unwrap());
        let written: u64 = rest.split(' ').next().unwrap().parse().unwrap();
        assert!((2 << 30..(2 << 30) + (64 << 20)).contains(&written), "{line}");
        assert!(line.ends_with(" 1"), "finished: {line}");
    }
}

/// `run --relays` says what is missing before anything runs (exit code 2): a relay per group,
/// each once and none a host, per-host tokens, TLS, the CA's own key, --relay-every without
/// relays; and a relay refuses to listen without TLS.
#[test]
fn relays_started_by_hand_are_refused_without_what_they_need() {
    let dir = tempfile::tempdir().unwrap();
    let certs = certs(dir.path());
    let hosts: Vec<(String, PathBuf)> =
        (2..6).map(|k| (format!("127.0.0.{k}:7420"), dir.path().join("t.dat"))).collect();
    hosts_plan(dir.path(), &hosts, "[[workloads]]\nname = \"w\"\nbackend = \"null\"\nramp = [1]\n");
    let (client, key) = (certs.join("client.pem"), certs.join("client.key"));
    let tls = ["--token-per-host", "--client-cert", client.to_str().unwrap(), "--client-key", key.to_str().unwrap()];
    let cases: [(Vec<&str>, &str); 9] = [
        (
            vec!["--relay-every", "4", "--relays", "127.0.0.9:7421", "--host-intervals", " , "],
            "--host-intervals names no host",
        ),
        (
            vec!["--relay-every", "2", "--relays", "127.0.0.9:7421,127.0.0.9:7421"],
            "host 127.0.0.9:7421 is given twice in the relays of --relays",
        ),
        (vec!["--relay-every", "2", "--relays", ","], "--relay-every N drives hosts through relays"),
        (vec!["--relay-every", "4", "--relays", "127.0.0.9:7421", "--insecure"], "--relays cannot go with --insecure"),
        (
            vec!["--relay-every", "2", "--relays", "127.0.0.9:7421"],
            "4 hosts in groups of 2 (--relay-every) make 2 groups, and 1 relays were given",
        ),
        (
            vec!["--relay-every", "2", "--relays", "127.0.0.9:7421,127.0.0.3:7420"],
            "--relays 127.0.0.3:7420 is one of the hosts",
        ),
        (vec!["--relay-every", "2"], "--relay-every N drives hosts through relays: with --launch"),
        (
            vec!["--relay-every", "4", "--relays", "127.0.0.9:7421", "--relay-ca-key", "/nonexistent/ca.key"],
            "cannot read the CA key /nonexistent/ca.key",
        ),
        (
            vec!["--relay-every", "4", "--relays", "127.0.0.9:7421", "--relay-ca-key", "CERT"],
            "the key is not the certificate's",
        ),
    ];
    for (extra, want) in cases {
        let extra: Vec<String> = extra
            .iter()
            .map(|a| if *a == "CERT" { certs.join("agent.key").display().to_string() } else { a.to_string() })
            .collect();
        let mut args: Vec<&str> = vec!["plan.toml"];
        args.extend(extra.iter().map(String::as_str));
        args.extend(tls);
        let o = coordinator(dir.path(), &certs, &args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{extra:?}: {}", stderr(&o));
    }
    // A relay takes its grant over TLS only.
    let o = crate::util::iocurve(
        dir.path(),
        &[
            "agent",
            "--relay",
            "--insecure",
            "--listen",
            "127.0.0.1:0",
            "--token-file",
            certs.join("token").to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("a relay needs TLS"), "{}", stderr(&o));
    // Without per-host tokens no delegation could be proven to an agent.
    let o = coordinator(dir.path(), &certs, &["plan.toml", "--relay-every", "4", "--relays", "127.0.0.9:7421"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--relays needs agents with per-host credentials and mutual TLS"), "{}", stderr(&o));
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
