//! io_uring unavailable → psync, said loudly and recorded.
//!
//! A test binary of its own: it disables io_uring machine-wide for a moment with the
//! `kernel.io_uring_disabled` sysctl, and `cargo test` runs test binaries one at a time, so no
//! other test sees it. The previous setting is restored on drop, also when the test fails.

use iocurve_testkit::cluster::{AgentProc, certs, coordinator};
use iocurve_testkit::*;

const SYSCTL: &str = "/proc/sys/kernel/io_uring_disabled";

struct Disabled(String);

impl Drop for Disabled {
    fn drop(&mut self) {
        let _ = std::fs::write(SYSCTL, &self.0);
    }
}

#[test]
fn io_uring_unavailable_falls_back_to_psync_loudly() {
    iocurve_testkit::needs_root!();
    let _one = one_at_a_time();
    let before = std::fs::read_to_string(SYSCTL).expect("kernel with the io_uring_disabled sysctl (6.6+)");
    let guard = Disabled(before.trim().to_string());
    std::fs::write(SYSCTL, "2").expect("disable io_uring (needs root)");
    let dir = tempfile::tempdir().unwrap();
    let o = iocurve(
        dir.path(),
        &args(
            &["run", "--size", "64m", "--workload", "backend-random-read-4k", "--ramp", "1,2", "--json", "f.json"],
            FAST,
        ),
    );
    drop(guard);
    let err = stderr(&o);
    assert!(err.contains("WARNING: io_uring is not available"), "{err}");
    let r = ok_json(&o, &dir.path().join("f.json"));
    assert_eq!(r["host"]["backend"], "psync");
    assert_eq!(r["workloads"][0]["backend"], "psync");
    assert!(r["host"]["backend_note"].as_str().unwrap().contains("falling back to psync"));
    check_steps(&r, 4096);
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
        let before = std::fs::read_to_string(SYSCTL).expect("kernel with the io_uring_disabled sysctl (6.6+)");
        let _guard = Disabled(before.trim().to_string());
        std::fs::write(SYSCTL, "2").expect("disable io_uring (needs root)");
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
    let _one = one_at_a_time();
    const AIO_MAX: &str = "/proc/sys/fs/aio-max-nr";
    struct Restore(String);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = std::fs::write(AIO_MAX, &self.0);
        }
    }
    let guard = Restore(std::fs::read_to_string(AIO_MAX).unwrap().trim().to_string());
    std::fs::write(AIO_MAX, "0").expect("set fs.aio-max-nr (needs root)");
    let dir = tempfile::tempdir().unwrap();
    let o = iocurve(
        dir.path(),
        &args(
            &[
                "run",
                "--size",
                "64m",
                "--workload",
                "backend-random-read-4k",
                "--backend",
                "libaio",
                "--ramp",
                "1,2",
                "--json",
                "f.json",
            ],
            FAST,
        ),
    );
    drop(guard);
    let err = stderr(&o);
    assert!(err.contains("WARNING: libaio is not available here ("), "{err}");
    let r = ok_json(&o, &dir.path().join("f.json"));
    assert_eq!(r["host"]["backend"], "psync");
    assert_eq!(r["workloads"][0]["backend"], "psync");
    assert!(r["host"]["backend_note"].as_str().unwrap().contains("falling back to psync"));
    check_steps(&r, 4096);
}

/// Issue 38, outside attack: a libaio ramp whose largest step needs more AIO events than
/// `fs.aio-max-nr` leaves is refused before anything runs (exit 2), with every way out.
#[test]
fn a_libaio_step_beyond_the_aio_limit_is_refused_before_the_run() {
    iocurve_testkit::needs_root!();
    let _one = one_at_a_time();
    const AIO_MAX: &str = "/proc/sys/fs/aio-max-nr";
    struct Restore(String);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = std::fs::write(AIO_MAX, &self.0);
        }
    }
    let guard = Restore(std::fs::read_to_string(AIO_MAX).unwrap().trim().to_string());
    let used: u64 = std::fs::read_to_string("/proc/sys/fs/aio-nr").unwrap().trim().parse().unwrap();
    std::fs::write(AIO_MAX, (used + 10).to_string()).expect("set fs.aio-max-nr (needs root)");
    let dir = tempfile::tempdir().unwrap();
    let o = iocurve(
        dir.path(),
        &args(
            &["run", "--size", "16m", "--workload", "backend-random-read-4k", "--backend", "libaio", "--ramp", "1,16"],
            FAST,
        ),
    );
    drop(guard);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("16 I/Os in flight") && err.contains("fs.aio-max-nr"), "{err}");
    assert!(err.contains("lower --ramp, --qd or --max-outstanding"), "{err}");
    assert!(!format!("{}{err}", stdout(&o)).contains("IOPS"), "no step ran: {}", stdout(&o));
}
