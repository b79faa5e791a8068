//! `run --launch slurm`: the hosts of the Slurm allocation the coordinator runs in (salloc,
//! sbatch): `SLURM_JOB_NODELIST` expanded by `scontrol show hostnames`, one agent per node — or
//! per task when the job asked for tasks (`-n`, `--ntasks-per-node`), each node as often as
//! `SLURM_TASKS_PER_NODE` gives it tasks. Without such a request Slurm counts a task per CPU,
//! which would be dozens of agents on one node's targets.

/// The allocation's job id; None outside one.
pub fn job_id() -> Option<String> {
    std::env::var("SLURM_JOB_ID").ok().filter(|j| !j.is_empty())
}

/// Refuses to go on outside an allocation: srun would then make a new job for every call.
pub fn require_allocation() -> Result<String, String> {
    let job = job_id().ok_or_else(|| {
        "--launch slurm runs inside a Slurm allocation (no SLURM_JOB_ID here): e.g. `salloc -N 4 --ntasks-per-node=1 iocurve run plan.toml --launch slurm`, or in an sbatch script".to_string()
    })?;
    if std::env::var_os("SLURM_HET_SIZE").is_some() {
        return Err(format!(
            "job {job} is heterogeneous: srun without --het-group reaches only its first component; give the nodes with --hosts and --srun 'srun --het-group=N', or use a plain allocation"
        ));
    }
    Ok(job)
}

/// Whether the job asked for tasks (then an agent per task), rather than Slurm's default of a
/// task per CPU. Inside a job step (`srun --pty bash`) the task counts are the step's, not the
/// job's: one agent per node then.
fn tasks_asked() -> bool {
    let set = |k: &str| std::env::var_os(k).is_some_and(|v| !v.is_empty());
    !set("SLURM_STEP_ID") && (set("SLURM_NTASKS_PER_NODE") || set("SLURM_NTASKS") || set("SLURM_NPROCS"))
}

/// One host entry per task of the allocation, in node order.
pub fn allocation_hosts() -> Result<Vec<String>, String> {
    let job = require_allocation()?;
    let list = std::env::var("SLURM_JOB_NODELIST")
        .or_else(|_| std::env::var("SLURM_NODELIST"))
        .map_err(|_| format!("job {job}: SLURM_JOB_NODELIST is not set"))?;
    let o = std::process::Command::new("scontrol")
        .args(["show", "hostnames", &list])
        .output()
        .map_err(|e| format!("cannot run `scontrol show hostnames` ({e}): is Slurm's client installed?"))?;
    if !o.status.success() {
        return Err(format!("`scontrol show hostnames {list}` failed: {}", String::from_utf8_lossy(&o.stderr).trim()));
    }
    let nodes: Vec<String> = String::from_utf8_lossy(&o.stdout).split_whitespace().map(String::from).collect();
    let tasks = match std::env::var("SLURM_TASKS_PER_NODE") {
        Ok(t) if tasks_asked() => tasks_per_node(&t)?,
        _ => vec![1; nodes.len()],
    };
    if tasks.len() != nodes.len() {
        return Err(format!(
            "job {job}: {} nodes ({list}) but tasks for {} (SLURM_TASKS_PER_NODE)",
            nodes.len(),
            tasks.len()
        ));
    }
    Ok(nodes.iter().zip(tasks).flat_map(|(n, t)| std::iter::repeat_n(n.clone(), t as usize)).collect())
}

/// `SLURM_TASKS_PER_NODE` (`2(x3),1`): the tasks of each node in order.
pub fn tasks_per_node(s: &str) -> Result<Vec<u32>, String> {
    let bad = || format!("SLURM_TASKS_PER_NODE `{s}` is not like `2(x3),1`");
    let mut out = Vec::new();
    for part in s.split(',') {
        let (n, times) = match part.split_once("(x") {
            Some((n, rest)) => (n, rest.strip_suffix(')').ok_or_else(bad)?.parse::<usize>().map_err(|_| bad())?),
            None => (part, 1),
        };
        let n: u32 = n.trim().parse().map_err(|_| bad())?;
        if times > super::hostlist::MAX_HOSTS || out.len() + times > super::hostlist::MAX_HOSTS {
            return Err(format!("SLURM_TASKS_PER_NODE `{s}`: more than {} nodes", super::hostlist::MAX_HOSTS));
        }
        out.extend(std::iter::repeat_n(n, times));
    }
    if out.iter().map(|&n| n as usize).sum::<usize>() > super::hostlist::MAX_HOSTS {
        return Err(format!("SLURM_TASKS_PER_NODE `{s}`: more than {} tasks", super::hostlist::MAX_HOSTS));
    }
    Ok(out)
}

/// The leaf switches of a cluster's tree topology: each with its nodes, in Slurm's order, and
/// those that could not be read (with why), for a host found under none to name.
#[derive(Debug, Default, PartialEq)]
pub struct Topology {
    pub switches: Vec<(String, Vec<String>)>,
    pub skipped: Vec<String>,
}

/// The leaf switches of the cluster's tree topology (`scontrol show topology`: the switches of
/// level 0) with their nodes: relays placed one per switch (`--relay-by switch`), so that each
/// relay's agents share its switch.
pub fn leaf_switches() -> Result<Topology, String> {
    let o = std::process::Command::new("scontrol")
        .args(["show", "topology"])
        // Older Slurm cuts each switch's line at 512 characters unless told otherwise: a cut
        // list would drop nodes, or end a name early.
        .env("SLURM_TOPO_LEN", "1048576")
        .output()
        .map_err(|e| format!("cannot run `scontrol show topology` ({e}): is Slurm's client installed?"))?;
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    parse_leaf_switches(&text).map_err(|e| match o.status.code() {
        Some(0) => e,
        _ => format!("{e} (scontrol ended with {}; is the Slurm controller reachable?)", o.status),
    })
}

/// [`leaf_switches`] from the text of `scontrol show topology` (a line per switch:
/// `SwitchName=s0 Level=0 LinkSpeed=1 Nodes=tux[0-31]`). A leaf switch without nodes is left
/// out; one whose nodes do not read as a host list is skipped (with why), not the whole topology:
/// only the job's hosts need a switch.
pub fn parse_leaf_switches(text: &str) -> Result<Topology, String> {
    let mut t = Topology::default();
    for line in text.lines() {
        let field = |k: &str| line.split_whitespace().find_map(|f| f.strip_prefix(k)?.strip_prefix('='));
        let (Some(name), Some("0")) = (field("SwitchName"), field("Level")) else {
            continue;
        };
        match field("Nodes").filter(|n| !n.is_empty()).map(super::hostlist::expand) {
            None => {}
            Some(Ok(nodes)) => t.switches.push((name.to_string(), nodes)),
            Some(Err(e)) => t.skipped.push(format!("{name} ({e})")),
        }
    }
    if t.switches.is_empty() {
        let said = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("nothing").trim();
        let skipped = if t.skipped.is_empty() { String::new() } else { format!("; skipped: {}", t.skipped.join(", ")) };
        return Err(format!(
            "--relay-by switch places a relay per leaf switch, but `scontrol show topology` names none with nodes (it said: {said}{skipped}): Slurm needs TopologyPlugin=topology/tree and a topology.conf; or drop --relay-by switch to group the hosts in their order"
        ));
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaf_switches_come_from_the_tree_topology() {
        let text = "SwitchName=s0 Level=0 LinkSpeed=1 Nodes=tux[00-02]\n\
                    SwitchName=s1 Level=0 LinkSpeed=1 Nodes=tux[03-04],gpu1\n\
                    SwitchName=s2 Level=1 LinkSpeed=1 Nodes=tux[00-04],gpu1 Switches=s[0-1]\n";
        let s = parse_leaf_switches(text).unwrap().switches;
        assert_eq!(
            s,
            [
                ("s0".to_string(), vec!["tux00".to_string(), "tux01".into(), "tux02".into()]),
                ("s1".to_string(), vec!["tux03".to_string(), "tux04".into(), "gpu1".into()]),
            ]
        );
        let e = parse_leaf_switches("No topology information available\n").unwrap_err();
        assert!(
            e.contains("(it said: No topology information available)") && e.contains("TopologyPlugin=topology/tree"),
            "{e}"
        );
        // One switch that does not read, or has no nodes, leaves the others usable.
        let t = parse_leaf_switches(
            "SwitchName=s0 Level=0 Nodes=tux[3-1]\nSwitchName=s1 Level=0 Nodes=\nSwitchName=s2 Level=0 Nodes=a1",
        )
        .unwrap();
        assert_eq!(t.switches, [("s2".to_string(), vec!["a1".to_string()])]);
        assert_eq!(t.skipped.len(), 1);
        assert!(t.skipped[0].starts_with("s0 (") && t.skipped[0].contains("backwards"), "{:?}", t.skipped);
        let e = parse_leaf_switches("SwitchName=s0 Level=0 Nodes=tux[3-1]").unwrap_err();
        assert!(e.contains("names none with nodes") && e.contains("skipped: s0 ("), "{e}");
    }

    #[test]
    fn tasks_per_node_expand() {
        assert_eq!(tasks_per_node("3").unwrap(), [3]);
        assert_eq!(tasks_per_node("2(x3),1").unwrap(), [2, 2, 2, 1]);
        assert_eq!(tasks_per_node("1(x2)").unwrap(), [1, 1]);
        for bad in ["", "x", "2(x", "2(x3", "2(y3)", "-1", "1(x100000)", "100000"] {
            assert!(tasks_per_node(bad).is_err(), "{bad}");
        }
    }
}
