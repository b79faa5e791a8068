//! Regression tests of agents an ordinary user can run (loopback, no root).

use crate::util::cluster::{AgentProc, certs, coordinator, hosts_plan};
use crate::util::{stderr, stdout};

/// Issue 45's closing note, defect (A): an agent that removes its scratch files when it ends
/// (`--remove-scratch`, as every agent `run --launch` starts) kept the set that created one open
/// until then — with the creating run's write lock on it — so the next run writing that target
/// was refused "being written by" the agent's own pid. The lock now goes when its run is over.
#[test]
fn regression_a_scratch_file_an_agent_keeps_for_removal_does_not_lock_out_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let d = dir.path().join("a");
    std::fs::create_dir(&d).unwrap();
    let agent = AgentProc::start(&d, &c, &format!("{}/*", d.display()), &["--remove-scratch"]);
    let w = "[[workloads]]\nname = \"w\"\nread_pct = 0\nbackend = \"null\"\nramp = [1]\nwarmup_s = 0\nintervals = 1\ninterval_s = 0.3\n";
    hosts_plan(dir.path(), &[(agent.addr.clone(), d.join("t.dat"))], w);
    for run in 1..=3 {
        let o = coordinator(dir.path(), &c, &["plan.toml", "--size", "1m"]).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "run {run}: {}{}", stdout(&o), stderr(&o));
    }
    assert!(d.join("t.dat").exists(), "kept for removal at the agent's end");
    drop(agent);
}
