//! io_uring unavailable → psync, said loudly and recorded.
//!
//! A test binary of its own: it disables io_uring machine-wide for a moment with the
//! `kernel.io_uring_disabled` sysctl, and `cargo test` runs test binaries one at a time, so no
//! other test sees it. The previous setting is restored on drop, also when the test fails.

use iocurve_testkit::cluster::{AgentProc, certs, coordinator};
use iocurve_testkit::*;

const SYSCTL: &str = "/proc/sys/kernel/io_uring_disabled";
const AIO_MAX: &str = "/proc/sys/fs/aio-max-nr";

/// A sysctl set for a moment: the previous value comes back on drop, also when the test fails.
struct Sysctl(&'static str, String);

impl Sysctl {
    fn set(path: &'static str, value: &str) -> Sysctl {
        let before = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let guard = Sysctl(path, before.trim().to_string());
        std::fs::write(path, value).unwrap_or_else(|e| panic!("set {path} to {value} (needs root): {e}"));
        guard
    }
}

impl Drop for Sysctl {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0, &self.1);
    }
}

/// A local run of `backend-random-read-4k` with `extra` options while `sysctl` is set to
/// `value`: `missing` is not available, psync runs instead, said loudly and recorded.
fn falls_back_to_psync(sysctl: &'static str, value: &str, extra: &[&str], missing: &str) {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let run = ["run", "--size", "64m", "--workload", "backend-random-read-4k", "--ramp", "1,2", "--json", "f.json"];
    let o = {
        let _set = Sysctl::set(sysctl, value);
        iocurve(dir.path(), &args(&args(&run, extra), FAST))
    };
    let err = stderr(&o);
    assert!(err.contains(&format!("WARNING: {missing} is not available here (")), "{err}");
    let r = ok_json(&o, &dir.path().join("f.json"));
    assert_eq!(r["host"]["backend"], "psync");
    assert_eq!(r["workloads"][0]["backend"], "psync");
    assert!(r["host"]["backend_note"].as_str().unwrap().contains("falling back to psync"));
    check_steps(&r, 4096);
}

#[test]
fn io_uring_unavailable_falls_back_to_psync_loudly() {
    iocurve_testkit::needs_root!();
    falls_back_to_psync(SYSCTL, "2", &[], "io_uring");
}

/// Issue 14: io_uring was probed on the coordinator only: a coordinator without it forced psync
/// on every agent, an agent without it failed the run. Now each agent decides for itself.
#[test]
fn an_agent_without_io_uring_falls_back_on_its_own_and_says_so() {
    iocurve_testkit::needs_root!();
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let d = dir.path().join("a");
    std::fs::create_dir(&d).unwrap();
    // The agent probes at its start: started while io_uring is disabled, it has none for good,
    // while the coordinator (started after) has it.
    let agent = {
        let _set = Sysctl::set(SYSCTL, "2");
        AgentProc::start(&d, &c, &format!("{}/*", d.display()), &[])
    };
    let target = d.join("t.dat");
    let o = coordinator(
        dir.path(),
        &c,
        &args(
            &[
                "--hosts",
                &agent.addr,
                "--target",
                target.to_str().unwrap(),
                "--size",
                "64m",
                "--workload",
                "backend-random-read-4k",
                "--ramp",
                "1,2",
                "--json",
                "f.json",
            ],
            FAST,
        ),
    )
    .output()
    .unwrap();
    drop(agent);
    let r = ok_json(&o, &dir.path().join("f.json"));
    let err = stderr(&o);
    assert!(!err.contains("io_uring is not available here"), "the coordinator has io_uring: {err}");
    let a = &r["host"]["agents"][0];
    assert_eq!(a["backend"], "psync", "{a}");
    assert!(a["backend_note"].as_str().unwrap().contains("io_uring is not available on this agent"), "{a}");
    check_steps(&r, 4096);
    assert!(stdout(&o).contains("io_uring is not available on this agent"), "{}", stdout(&o));
}

/// Issue 38, part 3: libaio where the host has no room for an AIO context (fs.aio-max-nr 0,
/// as a locked-down host sets it) runs on psync, said as io_uring's fallback is.
#[test]
fn libaio_unavailable_falls_back_to_psync_loudly() {
    iocurve_testkit::needs_root!();
    falls_back_to_psync(AIO_MAX, "0", &["--backend", "libaio"], "libaio");
}

/// Issue 38, outside attack: a libaio ramp whose largest step needs more AIO events than
/// `fs.aio-max-nr` leaves is refused before anything runs (exit 2), with every way out.
#[test]
fn a_libaio_step_beyond_the_aio_limit_is_refused_before_the_run() {
    iocurve_testkit::needs_root!();
    let _one = one_at_a_time();
    let used: u64 = std::fs::read_to_string("/proc/sys/fs/aio-nr").unwrap().trim().parse().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let o = {
        let _set = Sysctl::set(AIO_MAX, &(used + 10).to_string());
        let run =
            ["run", "--size", "16m", "--workload", "backend-random-read-4k", "--backend", "libaio", "--ramp", "1,16"];
        iocurve(dir.path(), &args(&run, FAST))
    };
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("16 I/Os in flight") && err.contains("fs.aio-max-nr"), "{err}");
    assert!(err.contains("lower --ramp, --qd or --max-outstanding"), "{err}");
    assert!(!format!("{}{err}", stdout(&o)).contains("IOPS"), "no step ran: {}", stdout(&o));
}
