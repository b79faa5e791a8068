//! `run --launch slurm` outside an allocation says how to get one. Launches in a real
//! single-node Slurm are in `it/slurm.rs`.

use std::process::Command;

use crate::util::{bin, shared_read_plan, stderr};

#[test]
fn slurm_launch_outside_an_allocation_says_how_to_get_one() {
    let dir = tempfile::tempdir().unwrap();
    shared_read_plan(dir.path(), 2);
    let o = Command::new(bin())
        .args(["run", "plan.toml", "--launch", "slurm", "--db", "r.db"])
        .env_remove("SLURM_JOB_ID")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("inside a Slurm allocation") && stderr(&o).contains("salloc"), "{}", stderr(&o));
}
