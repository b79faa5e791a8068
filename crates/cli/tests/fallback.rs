//! io_uring unavailable → psync, said loudly and recorded.
//!
//! A test binary of its own: it disables io_uring machine-wide for a moment with the
//! `kernel.io_uring_disabled` sysctl, and `cargo test` runs test binaries one at a time, so no
//! other test sees it. The previous setting is restored on drop, also when the test fails.

mod util;

use util::*;

const SYSCTL: &str = "/proc/sys/kernel/io_uring_disabled";

struct Disabled(String);

impl Drop for Disabled {
    fn drop(&mut self) {
        let _ = std::fs::write(SYSCTL, &self.0);
    }
}

#[test]
fn io_uring_unavailable_falls_back_to_psync_loudly() {
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
