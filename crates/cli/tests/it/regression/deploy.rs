//! Issue 35, finding 7: what a Kubernetes deployment needs of the binary itself. The step
//! budget read the node's MemAvailable, so an agent in a pod with a memory limit accepted steps
//! its container could not hold and was killed by the OOM killer instead of refusing them.
//! (The manifests' own regression test is `deploy::regression_…`, beside the other manifest
//! tests.)

use std::io::Write as _;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{bin, input_error};

/// A memory cgroup of the test's own, removed when dropped (on failure too).
struct MemoryCgroup {
    dir: PathBuf,
    /// The limit file it set: `memory.max` (v2) or `memory.limit_in_bytes` (v1).
    limit_file: &'static str,
}

impl MemoryCgroup {
    /// A new cgroup at the root of the hierarchy that has the memory controller (v1's memory
    /// hierarchy where the machine mounts one, as this one does, else v2's), limited to
    /// `limit` bytes. At the root: on v2 a cgroup with processes may not hand controllers to
    /// its children, and the root may.
    fn new(limit: u64) -> MemoryCgroup {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let mount = |v1: bool| {
            mountinfo.lines().find_map(|l| {
                let (left, right) = l.split_once(" - ")?;
                let right: Vec<&str> = right.split(' ').collect();
                let ours = if v1 {
                    right[0] == "cgroup" && right.get(2)?.split(',').any(|o| o == "memory")
                } else {
                    right[0] == "cgroup2"
                };
                ours.then(|| PathBuf::from(left.split(' ').nth(4).unwrap()))
            })
        };
        let (root, limit_file) = match (mount(true), mount(false)) {
            (Some(v1), _) => (v1, "memory.limit_in_bytes"),
            (None, Some(v2)) => {
                let controllers = std::fs::read_to_string(v2.join("cgroup.controllers")).unwrap_or_default();
                assert!(
                    controllers.split_whitespace().any(|c| c == "memory"),
                    "cgroup v2 at {} has no memory controller ({controllers:?})",
                    v2.display()
                );
                // Children of the root get the memory controller (systemd usually has done this).
                let _ = std::fs::write(v2.join("cgroup.subtree_control"), "+memory");
                (v2, "memory.max")
            }
            (None, None) => panic!("no memory cgroup hierarchy mounted"),
        };
        let dir = root.join(format!("iocurve-budget-{}", std::process::id()));
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        let cg = MemoryCgroup { dir, limit_file };
        std::fs::write(cg.dir.join(limit_file), limit.to_string())
            .unwrap_or_else(|e| panic!("{limit_file} of {}: {e}", cg.dir.display()));
        cg
    }

    /// The cgroup's name as the process in it sees it in /proc/self/cgroup.
    fn name(&self) -> String {
        format!("/{}", self.dir.file_name().unwrap().to_string_lossy())
    }

    /// `command`, started inside this cgroup: the child writes "0" (itself) to cgroup.procs
    /// between fork and exec, so the binary runs in the cgroup from its first instruction.
    fn run(&self, mut command: Command) -> std::process::Output {
        let procs = std::fs::OpenOptions::new().write(true).open(self.dir.join("cgroup.procs")).unwrap();
        let fd = procs.as_raw_fd();
        // SAFETY: write(2) is async-signal-safe; the descriptor stays open until `output`
        // returns, as `procs` lives until then.
        unsafe {
            command.pre_exec(move || {
                if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let out = command.output().expect("iocurve runs in the cgroup");
        drop(procs);
        out
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        // Its only process has exited; the kernel may take a moment to let go of the cgroup.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let _ = writeln!(std::io::stderr(), "could not remove the test cgroup {}", self.dir.display());
    }
}

/// Regression test for issue 35, finding 7: the memory budget read the node's MemAvailable, not
/// the cgroup's. In a cgroup limited to 256 MiB, a step of 8 workers × queue depth 64 × 1 MiB
/// blocks (512 MiB of buffers) was accepted on this 24 GiB machine and its buffers ran into the
/// limit; now it is refused before anything is opened, naming the cgroup's limit.
#[test]
fn regression_the_step_budget_is_the_memory_cgroups_limit() {
    iocurve_testkit::needs_root!();
    let cg = MemoryCgroup::new(256 << 20);
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(bin());
    cmd.args([
        "run",
        "--target",
        "t.dat",
        "--size",
        "16m",
        "--workload",
        "backend-random-read-4k",
        "--ramp",
        "8",
        "--qd",
        "64",
        "--bs",
        "1m",
    ])
    .current_dir(dir.path());
    let o = cg.run(cmd);
    let err = input_error(&o, &["8 workers × queue depth 64 × 1m blocks need 512 MiB of I/O buffers"]);
    let why = format!("({} 256 MiB of cgroup {}, ", cg.limit_file, cg.name());
    assert!(err.contains(&why), "the refusal names the cgroup's limit `{why}`: {err}");
    // The room left: the limit less what the process has in use, a few MiB.
    let avail: u64 = err
        .split(" MiB this host has available")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the available memory in MiB: {err}"));
    assert!((200..=256).contains(&avail), "{avail} MiB available in a 256 MiB cgroup: {err}");
    assert!(!Path::new(&dir.path().join("t.dat")).exists(), "nothing was prepared");
}
