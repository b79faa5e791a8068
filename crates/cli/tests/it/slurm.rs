//! `run --launch slurm`: agents started with srun inside a real Slurm allocation (a single-node
//! Slurm started by the test), one per task; nothing left afterwards, also when the
//! coordinator is killed.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::cluster::Watched;
use crate::util::one_at_a_time;
use crate::util::slurm::SlurmLab;
use crate::util::sshd::launched_agents;
use crate::util::{bin, shared_read_plan, stderr, stdout};

fn wait_until(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + within;
    while !done() {
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    true
}

#[test]
fn slurm_launch_starts_an_agent_per_task_of_the_allocation_and_leaves_nothing() {
    iocurve_testkit::needs_root!();
    let _one = one_at_a_time();
    let lab = SlurmLab::new(8);
    let d = lab.path();
    shared_read_plan(d, 2);
    let tmp = d.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    // Inside `salloc -n 3`: three tasks on the one node, so three agents. First with this binary
    // where it is (a shared filesystem), then copied to every task's node through srun.
    // And without tasks asked for (`-N 1`): Slurm counts a task per CPU (8 here), iocurve starts
    // one agent on the node.
    for (alloc, n, extra, copied) in [
        (["-n", "3"], 3usize, vec![], false),
        (["-n", "2"], 2, vec!["--remote-binary", "no-such-iocurve"], true),
        (["-N", "1"], 1, vec![], false),
    ] {
        let o = lab
            .command("salloc")
            .arg("--quiet")
            .args(alloc)
            .args([bin(), "run", "plan.toml", "--launch", "slurm", "--json", "r.json", "--db", "r.db"])
            .args(&extra)
            .env("TMPDIR", &tmp)
            .current_dir(d)
            .output()
            .unwrap();
        let (out, err) = (stdout(&o), stderr(&o));
        assert!(o.status.success(), "{alloc:?}: {out}\n{err}");
        assert!(out.contains(&format!("launched {n} of {n} agents over srun")), "{alloc:?}: {out}");
        assert_eq!(out.contains("copied this binary ("), copied, "{out}");
        let r: Value = serde_json::from_str(&std::fs::read_to_string(d.join("r.json")).unwrap()).unwrap();
        let agents = r["host"]["agents"].as_array().unwrap();
        assert_eq!(agents.len(), n, "{alloc:?}: {agents:?}");
        assert!(agents.iter().all(|a| a["address"].as_str().unwrap().starts_with(&format!("{}:", lab.node))));
        for s in r["workloads"][0]["steps"].as_array().unwrap() {
            assert_eq!(s["host_count"], n as u64, "{alloc:?}");
            assert!(s["hosts"].as_array().unwrap().iter().all(|h| h["iops"].as_f64().unwrap() > 0.0));
        }
        assert!(wait_until(Duration::from_secs(10), || launched_agents(d).is_empty()), "{:?}", launched_agents(d));
        assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0, "no copy left");
        assert!(
            wait_until(Duration::from_secs(10), || lab.jobs().is_empty()),
            "the allocation ended: {:?}",
            lab.jobs()
        );
    }
}

#[test]
fn slurm_launch_leaves_nothing_when_the_coordinator_is_killed() {
    iocurve_testkit::needs_root!();
    let _one = one_at_a_time();
    let lab = SlurmLab::new(8);
    let d = lab.path();
    shared_read_plan(d, 40);
    // An allocation without a shell; the coordinator then runs in it as salloc's shell would,
    // with the job's variables, as this test's own child.
    let o = lab.command("salloc").args(["--no-shell", "-n", "2"]).output().unwrap();
    let said = format!("{}{}", stdout(&o), stderr(&o));
    let job = said
        .split_whitespace()
        .skip_while(|w| *w != "allocation")
        .nth(1)
        .unwrap_or_else(|| panic!("salloc names the job: {said}"))
        .to_string();
    let mut cmd = lab.command(bin());
    cmd.args(["run", "plan.toml", "--launch", "slurm", "--db", "r.db"])
        .env("SLURM_JOB_ID", &job)
        .env("SLURM_JOB_NODELIST", &lab.node)
        .env("SLURM_TASKS_PER_NODE", "2")
        .env("SLURM_NTASKS", "2")
        .current_dir(d);
    let mut w = Watched::spawn(cmd);
    w.wait_for("step 1/2", Duration::from_secs(60));
    assert_eq!(launched_agents(d).len(), 2, "both agents run");
    // SAFETY: a signal to the coordinator this test started.
    unsafe { libc::kill(w.child.id() as i32, libc::SIGKILL) };
    let _ = w.finish();
    assert!(wait_until(Duration::from_secs(10), || launched_agents(d).is_empty()), "{:?}", launched_agents(d));
    // The agents' job steps are gone; only the allocation itself is left, for scancel.
    let steps = |job: &str| {
        let o = lab.command("squeue").args(["-h", "-s", "-j", job]).output().unwrap();
        String::from_utf8_lossy(&o.stdout).lines().filter(|l| l.contains("iocurve")).count()
    };
    assert!(wait_until(Duration::from_secs(10), || steps(&job) == 0), "agent steps still listed");
    let _ = lab.command("scancel").arg(&job).status();
}

/// `--relay-every N --relay-by switch` (issue 46): relays placed by Slurm's tree topology, one
/// group per leaf switch — here the lab's one node behind switch `leaf0`: its agent and its relay
/// started by srun, the run through the relay, both stopped after it. A cluster without a
/// topology is refused. (How hosts are grouped by switch is `relay_groups`' unit test: the lab
/// has one node.)
#[test]
fn slurm_launch_places_a_relay_per_leaf_switch() {
    iocurve_testkit::needs_root!();
    let _one = one_at_a_time();
    let lab = SlurmLab::with_topology(8);
    let d = lab.path();
    shared_read_plan(d, 2);
    let o = lab.command("scontrol").args(["show", "topology"]).output().unwrap();
    assert!(stdout(&o).contains("SwitchName=leaf0 Level=0"), "{}{}", stdout(&o), stderr(&o));
    let o = lab
        .command("salloc")
        .args(["--quiet", "-N", "1"])
        .args([bin(), "run", "plan.toml", "--launch", "slurm", "--relay-every", "2", "--relay-by", "switch"])
        .args(["--json", "r.json", "--db", "r.db"])
        .current_dir(d)
        .output()
        .unwrap();
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("launched 1 of 1 agents over srun"), "{out}");
    assert!(out.contains(&format!("relay {}:", lab.node)) && out.contains(" of 1 agents ("), "{out}");
    assert!(out.contains("stopped 1 agent and 1 relay"), "{out}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(d.join("r.json")).unwrap()).unwrap();
    for s in r["workloads"][0]["steps"].as_array().unwrap() {
        assert_eq!(s["host_count"], 1, "{s}");
        assert!(s["iops"].as_f64().unwrap() > 0.0, "{s}");
    }
    assert!(wait_until(Duration::from_secs(10), || launched_agents(d).is_empty()), "{:?}", launched_agents(d));
    assert!(wait_until(Duration::from_secs(10), || lab.jobs().is_empty()), "{:?}", lab.jobs());
    drop(lab);

    // A cluster without a tree topology: refused before any agent starts (exit code 2).
    let lab = SlurmLab::new(8);
    let d = lab.path();
    shared_read_plan(d, 2);
    let o = lab
        .command("salloc")
        .args(["--quiet", "-N", "1"])
        .args([bin(), "run", "plan.toml", "--launch", "slurm", "--relay-every", "2", "--relay-by", "switch"])
        .args(["--db", "r.db"])
        .current_dir(d)
        .output()
        .unwrap();
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(
        err.contains("`scontrol show topology` names none with nodes") && err.contains("TopologyPlugin=topology/tree"),
        "{err}"
    );
    assert!(!out.contains("launched"), "{out}");
}
