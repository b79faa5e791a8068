//! `run --launch ssh`: agents started by the coordinator itself over real OpenSSH (an sshd per
//! network namespace), run, stopped — and nothing left on the hosts, also after Ctrl-C and
//! after the coordinator is killed.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::util::cluster::Watched;
use crate::util::one_at_a_time;
use crate::util::sshd::SshLab;
use crate::util::{bin, iocurve, shared_read_plan, stderr, stdout};

/// A plan with a `[[hosts]]` entry per lab host, each on a scratch file of its own in `data`.
fn per_host_plan(lab: &SshLab, intervals: u32) -> std::path::PathBuf {
    let d = lab.dir.path();
    std::fs::create_dir_all(d.join("data")).unwrap();
    let mut text = String::from("targets = [\"unused\"]\n");
    for (i, h) in lab.hosts.iter().enumerate() {
        text.push_str(&format!("[[hosts]]\naddress = \"{}\"\ntargets = [\"{}/data/h{i}.dat\"]\n", h.addr, d.display()));
    }
    text.push_str(&format!(
        "[[workloads]]\nname = \"mixed\"\nread_pct = 70\nramp = [1, 2]\nwarmup_s = 0.2\nintervals = {intervals}\ninterval_s = 0.5\n"
    ));
    let p = d.join("plan.toml");
    std::fs::write(&p, text).unwrap();
    p
}

fn launch_args<'a>(ssh: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec!["run", "plan.toml", "--launch", "ssh", "--ssh", ssh, "--size", "32m", "--db", "r.db"];
    a.extend_from_slice(extra);
    a
}

fn json(dir: &Path, name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap()
}

#[test]
fn ssh_launch_runs_a_plan_on_every_host_and_leaves_nothing_behind() {
    iocurve_testkit::needs_root!();
    let _one = one_at_a_time();
    let lab = SshLab::new(3);
    let d = lab.dir.path();
    per_host_plan(&lab, 2);
    let ssh = lab.ssh();
    let o = iocurve(d, &launch_args(&ssh, &["--json", "r.json"]));
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("launched 3 of 3 agents over ssh") && out.contains(") to 3 hosts"), "{out}");
    // The tests' binary carries debug info (over 40 MB): the copy's size is told, with the
    // shipping build beside it (#34).
    let big = std::fs::metadata(iocurve_testkit::bin()).unwrap().len() > 40_000_000;
    assert_eq!(format!("{out}{err}").contains("the shipping build is about 17 MB"), big, "{out}\n{err}");
    assert!(out.contains("stopped 3 agents"), "{out}");
    let r = json(d, "r.json");
    let agents = r["host"]["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 3, "every host's agent ran");
    for h in &lab.hosts {
        assert!(
            agents.iter().any(|a| a["address"].as_str().unwrap().starts_with(&format!("{}:", h.addr))),
            "{} in {agents:?}",
            h.addr
        );
    }
    for s in r["workloads"][0]["steps"].as_array().unwrap() {
        assert_eq!(s["host_count"], 3);
        let hosts = s["hosts"].as_array().unwrap();
        assert_eq!(hosts.len(), 3, "results per host");
        assert!(hosts.iter().all(|h| h["iops"].as_f64().unwrap() > 0.0), "every host did I/O: {hosts:?}");
    }
    // Nothing stays: no copy, no agent, and the scratch files the agents made are gone (the
    // run had no --keep).
    assert_eq!(lab.wait_clean(Duration::from_secs(5)), Vec::<String>::new());
    for i in 0..3 {
        assert!(!d.join(format!("data/h{i}.dat")).exists(), "scratch file h{i}.dat removed");
    }
}

/// `--relay-every 2` (issue 46): the first host of each pair runs a relay beside its agent, the
/// coordinator drives the two relays, every host runs the plan, and nothing stays behind.
#[test]
fn ssh_launch_through_relays_runs_every_host_and_leaves_nothing_behind() {
    iocurve_testkit::needs_root!();
    let _one = one_at_a_time();
    let lab = SshLab::new(4);
    let _routed = lab.routed();
    let d = lab.dir.path();
    per_host_plan(&lab, 2);
    let ssh = lab.ssh();
    let o = iocurve(d, &launch_args(&ssh, &["--json", "r.json", "--relay-every", "2", "--write-iolog", "io.log"]));
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("launched 4 of 4 agents over ssh"), "{out}");
    assert!(out.contains("stopped 4 agents and 2 relays"), "{out}");
    // Each relay and each agent behind it with its clock (the agents' as their relay measured
    // them).
    assert_eq!(out.matches(" of 2 agents (").count(), 2, "{out}");
    assert_eq!(out.matches(" (through relay ").count(), 4, "{out}");
    let r = json(d, "r.json");
    let agents = r["host"]["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 4, "every host's agent, not the relays: {agents:?}");
    for h in &lab.hosts {
        assert!(
            agents.iter().any(|a| a["address"].as_str().unwrap().starts_with(&format!("{}:", h.addr))),
            "{}",
            h.addr
        );
    }
    for s in r["workloads"][0]["steps"].as_array().unwrap() {
        assert_eq!(s["host_count"], 4, "{s}");
        assert!(s["iops"].as_f64().unwrap() > 0.0);
        // A row per host, its relay's summary of it: the agents, in the order of the run's.
        let hosts = s["hosts"].as_array().unwrap();
        let rows: Vec<&str> = hosts.iter().map(|h| h["host"].as_str().unwrap()).collect();
        let listed: Vec<&str> = agents.iter().map(|a| a["address"].as_str().unwrap()).collect();
        assert_eq!(rows, listed, "{hosts:?}");
        assert!(hosts.iter().all(|h| h.get("hosts").is_none() && h["iops"].as_f64().unwrap() > 0.0), "{hosts:?}");
    }
    // Each host's target by its own agent.
    let targets = r["targets"].as_array().unwrap();
    for (i, h) in lab.hosts.iter().enumerate() {
        let name = format!("data/h{i}.dat");
        assert!(
            targets.iter().any(|t| {
                let p = t["path"].as_str().unwrap();
                p.starts_with(&format!("{}:", h.addr)) && p.ends_with(&name)
            }),
            "{name} on {}: {targets:?}",
            h.addr
        );
    }
    // The run's I/O log through the relays: every host's I/Os, each on its own target as the
    // run names it, in time order.
    let log = std::fs::read_to_string(d.join("io.log")).unwrap();
    let ios: Vec<Vec<&str>> = log.lines().map(|l| l.split(' ').collect::<Vec<_>>()).filter(|f| f.len() == 5).collect();
    for (i, h) in lab.hosts.iter().enumerate() {
        let (name, host) = (format!("data/h{i}.dat"), format!("{}:", h.addr));
        let on = ios.iter().filter(|f| f[1].starts_with(&host) && f[1].ends_with(&name)).count();
        assert!(on > 0, "no I/O of {name} on {} in the log: {}", h.addr, &log[..log.len().min(2000)]);
    }
    let times: Vec<u64> = ios.iter().map(|f| f[0].parse().unwrap()).collect();
    assert!(times.windows(2).all(|t| t[0] <= t[1]), "in time order");
    assert_eq!(lab.wait_clean(Duration::from_secs(5)), Vec::<String>::new());
}

/// A relay killed mid-run (issue 46): its two hosts are lost with it, each marked so in the
/// run's hosts, and the run goes on with the other relay's (exit code 3: hosts were lost).
#[test]
fn ssh_launch_loses_a_killed_relays_hosts_and_goes_on() {
    iocurve_testkit::needs_root!();
    let _one = one_at_a_time();
    let lab = SshLab::new(4);
    let _routed = lab.routed();
    let d = lab.dir.path();
    per_host_plan(&lab, 8);
    let ssh = lab.ssh();
    let mut cmd = std::process::Command::new(bin());
    cmd.args(launch_args(&ssh, &["--json", "r.json", "--relay-every", "2"])).current_dir(d);
    let mut w = Watched::spawn(cmd);
    w.wait_for("step 1/2", Duration::from_secs(60));
    let relay =
        crate::util::sshd::launched_agents(d).into_iter().find(|p| p.contains(" --relay")).expect("a relay runs");
    let pid: i32 = relay.split_whitespace().nth(1).unwrap().trim_end_matches(':').parse().unwrap();
    // SAFETY: a signal to a relay process this test's run started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let (code, text) = w.finish();
    assert_eq!(code, Some(3), "{text}");
    assert!(text.contains("(its 2 hosts) lost"), "{text}");
    let r = json(d, "r.json");
    let agents = r["host"]["agents"].as_array().unwrap();
    let lost: Vec<&Value> = agents.iter().filter(|a| !a["lost_mid_run"].is_null()).collect();
    assert_eq!(lost.len(), 2, "the relay's two hosts: {agents:?}");
    assert!(lost.iter().all(|a| a["lost_mid_run"]["why"].as_str().unwrap().contains("its relay")), "{lost:?}");
    let steps = r["workloads"][0]["steps"].as_array().unwrap();
    assert_eq!(steps.last().unwrap()["host_count"], 2, "the other relay's hosts go on");
    assert_eq!(lab.wait_clean(Duration::from_secs(10)), Vec::<String>::new());
}

#[test]
fn ssh_launch_takes_host_ranges_and_host_files() {
    iocurve_testkit::needs_root!();
    let _one = one_at_a_time();
    let lab = SshLab::new(2);
    let d = lab.dir.path();
    // One existing file every agent reads: nothing is created, so the agents may share it.
    shared_read_plan(d, 2);
    // 10.N.A.2 and 10.N.B.2 as a range: the lab's hosts are on consecutive networks.
    let (a, b) = (&lab.hosts[0].addr, &lab.hosts[1].addr);
    let octets = |s: &str| s.split('.').map(String::from).collect::<Vec<_>>();
    let (oa, ob) = (octets(a), octets(b));
    assert_eq!(ob[2].parse::<u32>().unwrap(), oa[2].parse::<u32>().unwrap() + 1, "consecutive networks");
    let range = format!("{}.{}.[{}-{}].2", oa[0], oa[1], oa[2], ob[2]);
    std::fs::write(d.join("hosts.txt"), format!("# the lab\n{a}\n{b}  # the second\n")).unwrap();
    let ssh = lab.ssh();
    for hosts in [vec!["--hosts", range.as_str()], vec!["--hosts-file", "hosts.txt"]] {
        let mut args = launch_args(&ssh, &["--json", "r.json"]);
        args.extend(hosts.iter().copied());
        let o = iocurve(d, &args);
        assert!(o.status.success(), "{hosts:?}: {}\n{}", stdout(&o), stderr(&o));
        let r = json(d, "r.json");
        assert_eq!(r["host"]["agents"].as_array().unwrap().len(), 2, "{hosts:?}");
        assert_eq!(lab.wait_clean(Duration::from_secs(5)), Vec::<String>::new());
    }
    assert!(d.join("shared.dat").exists(), "a target the agents did not create stays");
}

#[test]
fn ssh_launch_leaves_nothing_after_ctrl_c_or_a_killed_coordinator() {
    iocurve_testkit::needs_root!();
    let _one = one_at_a_time();
    let lab = SshLab::new(2);
    let d = lab.dir.path();
    per_host_plan(&lab, 30);
    let ssh = lab.ssh();
    // Killed while the binary is on its way: the partial copy goes with its session.
    {
        let mut cmd = std::process::Command::new(bin());
        cmd.args(launch_args(&ssh, &[])).current_dir(d);
        let mut child = cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap();
        let copying = || lab.hosts.iter().any(|h| std::fs::read_dir(&h.tmp).unwrap().next().is_some());
        let until = std::time::Instant::now() + Duration::from_secs(60);
        while !copying() {
            assert!(std::time::Instant::now() < until, "a copy starts");
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(lab.wait_clean(Duration::from_secs(10)), Vec::<String>::new(), "killed while copying");
    }
    for signal in [libc::SIGINT, libc::SIGKILL] {
        let mut cmd = std::process::Command::new(bin());
        cmd.args(launch_args(&ssh, &[])).current_dir(d);
        let mut w = Watched::spawn(cmd);
        w.wait_for("step 1/2", Duration::from_secs(60));
        assert_eq!(crate::util::sshd::launched_agents(d).len(), 2, "both agents run");
        // SAFETY: a signal to the coordinator this test started.
        unsafe { libc::kill(w.child.id() as i32, signal) };
        let (code, text) = w.finish();
        if signal == libc::SIGINT {
            assert_eq!(code, Some(130), "{text}");
            assert!(text.contains("stopped 2 agents"), "{text}");
        }
        // Killed, the coordinator stops nothing itself: its agents see their input end.
        assert_eq!(lab.wait_clean(Duration::from_secs(10)), Vec::<String>::new(), "after signal {signal}");
        for i in 0..2 {
            assert!(!d.join(format!("data/h{i}.dat")).exists(), "signal {signal}: scratch file h{i}.dat removed");
        }
    }
}

#[test]
fn ssh_launch_names_hosts_that_fail_and_applies_the_host_loss_policy() {
    iocurve_testkit::needs_root!();
    let _one = one_at_a_time();
    let mut lab = SshLab::new(2);
    let d = lab.dir.path().to_path_buf();
    let d = d.as_path();
    let good = lab.hosts[0].addr.clone();
    // A host whose sshd is down: ssh fails at once (connection refused).
    lab.hosts[1].stop_sshd();
    let gone = lab.hosts[1].addr.clone();
    let gone = gone.as_str();
    std::fs::create_dir_all(d.join("data")).unwrap();
    std::fs::write(
        d.join("plan.toml"),
        format!(
            "targets = [\"{}/data/t.dat\"]\n[[workloads]]\nname = \"mixed\"\nread_pct = 70\nramp = [1]\nwarmup_s = 0.1\nintervals = 2\ninterval_s = 0.3\n",
            d.display()
        ),
    )
    .unwrap();
    let ssh = lab.ssh();
    let hosts = format!("{good},{gone}");
    // continue: the run goes on with the good host and ends with exit code 3 (a host lost).
    let mut args = launch_args(&ssh, &["--json", "r.json", "--hosts", &hosts]);
    let o = iocurve(d, &args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{}\n{err}", stdout(&o));
    assert!(err.contains(&format!("could not start the agent on {gone}: ssh failed")), "{err}");
    let r = json(d, "r.json");
    let agents = r["host"]["agents"].as_array().unwrap();
    let lost: Vec<&Value> = agents.iter().filter(|a| a["lost"].is_string()).collect();
    assert_eq!((agents.len(), lost.len()), (2, 1), "{agents:?}");
    assert_eq!(lost[0]["address"], gone, "the host that failed is listed as lost: {agents:?}");
    assert!(r["workloads"][0]["steps"][0]["iops"].as_f64().unwrap() > 0.0);
    assert_eq!(lab.wait_clean(Duration::from_secs(5)), Vec::<String>::new());
    // abort: nothing runs, the good host's agent is stopped again.
    args.extend(["--on-host-loss", "abort"]);
    let o = iocurve(d, &args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("could not start the agent on 1 of 2 hosts") && err.contains(gone), "{err}");
    assert!(err.contains("--on-host-loss abort: the run stops before any I/O"), "{err}");
    assert_eq!(lab.wait_clean(Duration::from_secs(5)), Vec::<String>::new());
    // An agent that cannot start (its port is sshd's): named with what it said, at once.
    let t = std::time::Instant::now();
    let o = iocurve(d, &launch_args(&ssh, &["--hosts", &good, "--launch-port", "22"]));
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("the agent ended at its start (exit status: 2)") && err.contains("cannot listen on"), "{err}");
    // Below the 30 s start timeout it would otherwise wait out; an ssh start takes about 1 s.
    assert!(t.elapsed() < Duration::from_secs(20), "not after the start timeout: {:?}", t.elapsed());
    assert_eq!(lab.wait_clean(Duration::from_secs(5)), Vec::<String>::new());
    // A host that refuses the key: named, with what ssh said.
    let o = iocurve(d, &launch_args("ssh -o IdentityFile=/nonexistent -o IdentitiesOnly=yes", &["--hosts", &good]));
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("{good}: ssh failed")), "{err}");
}

#[test]
fn ssh_launch_uses_the_hosts_own_binary_when_it_is_this_build_and_never_removes_it() {
    iocurve_testkit::needs_root!();
    let _one = one_at_a_time();
    let lab = SshLab::new(1);
    let d = lab.dir.path();
    per_host_plan(&lab, 2);
    let own = d.join("opt/iocurve");
    std::fs::create_dir_all(own.parent().unwrap()).unwrap();
    std::fs::copy(bin(), &own).unwrap();
    let ssh = lab.ssh();
    let o = iocurve(d, &launch_args(&ssh, &["--remote-binary", own.to_str().unwrap()]));
    let out = stdout(&o);
    assert!(o.status.success(), "{out}\n{}", stderr(&o));
    assert!(out.contains("launched 1 of 1 agents over ssh") && out.contains("no copy needed"), "{out}");
    assert!(own.exists(), "the host's own iocurve stays");
    assert_eq!(lab.wait_clean(Duration::from_secs(5)), Vec::<String>::new());
}

#[test]
fn ssh_launch_refuses_a_copy_whose_hash_differs() {
    iocurve_testkit::needs_root!();
    let _one = one_at_a_time();
    let lab = SshLab::new(1);
    let d = lab.dir.path();
    per_host_plan(&lab, 2);
    // An "ssh" that runs the command here (in the host's TMPDIR) and puts a byte before what it
    // copies: a copy damaged on its way.
    let fake = d.join("fake-ssh");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/bash\nfor a; do last=$a; done\nexport TMPDIR={}\ncase \"$last\" in\n  *mktemp*) exec sh -c \"$last\" < <(printf x; exec cat) ;;\n  *) exec sh -c \"$last\" ;;\nesac\n",
            lab.hosts[0].tmp.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let o = iocurve(d, &launch_args(fake.to_str().unwrap(), &[]));
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("has SHA-256") && err.contains("removed, not started"), "{err}");
    // The damaged copy is removed again.
    assert_eq!(lab.wait_clean(Duration::from_secs(5)), Vec::<String>::new());
}

#[test]
fn ssh_launch_reaches_a_host_by_its_ipv6_address() {
    iocurve_testkit::needs_root!();
    let _one = one_at_a_time();
    let lab = SshLab::new(1);
    let d = lab.dir.path();
    shared_read_plan(d, 2);
    let ssh = lab.ssh();
    let v6 = lab.hosts[0].addr6.clone();
    let o = iocurve(d, &launch_args(&ssh, &["--hosts", &v6, "--json", "r.json"]));
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    let r = json(d, "r.json");
    let addr = r["host"]["agents"][0]["address"].as_str().unwrap().to_string();
    assert!(addr.starts_with(&format!("[{v6}]:")), "{addr}");
    assert_eq!(lab.wait_clean(Duration::from_secs(5)), Vec::<String>::new());
}

/// The start-up of a 16-host launch, for BENCHMARKS.md (run with `cargo test -p iocurve --test
/// it ssh_launch_16 -- --ignored --nocapture`; `IOCURVE_BENCH_BIN=target/release/iocurve`
/// launches with that binary instead of the test build).
#[test]
#[ignore]
fn ssh_launch_16_hosts_startup() {
    let _one = one_at_a_time();
    let lab = SshLab::new(16);
    let d = lab.dir.path();
    per_host_plan(&lab, 2);
    let ssh = lab.ssh();
    // Once copying this binary to every host, once with the hosts' own (the same build).
    let coordinator = std::env::var("IOCURVE_BENCH_BIN").map_or(bin().into(), |b| std::fs::canonicalize(b).unwrap());
    let own = d.join("opt/iocurve");
    std::fs::create_dir_all(own.parent().unwrap()).unwrap();
    std::fs::copy(&coordinator, &own).unwrap();
    let size = std::fs::metadata(&coordinator).unwrap().len();
    for extra in [vec![], vec!["--remote-binary", own.to_str().unwrap()]] {
        let mut args = launch_args(&ssh, &["--json", "r.json"]);
        args.extend(extra.iter().copied());
        let started = std::time::Instant::now();
        let o = std::process::Command::new(&coordinator).args(&args).current_dir(d).output().unwrap();
        let out = stdout(&o);
        assert!(o.status.success(), "{out}\n{}", stderr(&o));
        let r = json(d, "r.json");
        let spreads: Vec<f64> = r["workloads"][0]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["start_spread_us"].as_f64().unwrap())
            .collect();
        println!(
            "binary {:.0} MB: {}",
            size as f64 / 1e6,
            out.lines().find(|l| l.starts_with("launched")).unwrap_or("")
        );
        println!("  whole run {:.1} s; start spread per step (µs): {spreads:?}", started.elapsed().as_secs_f64());
        assert_eq!(lab.wait_clean(Duration::from_secs(10)), Vec::<String>::new());
    }
}
