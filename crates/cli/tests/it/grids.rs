//! Queue-depth ramps and grids (issue 41) on real storage: a device below iocurve that answers
//! every request after a fixed delay (the FUSE fault device under a loop device), so a cell of
//! W workers × Q outstanding must complete about W × Q / delay I/Os a second — and the device's
//! own counters must have seen every I/O iocurve counted.

use iocurve_testkit::faultdev::FaultDev;
use iocurve_testkit::*;

/// Each cell of a 2 × 2 grid on a device with 10 ms per request completes what its
/// outstanding I/Os allow (the device serves them at once), and the cells' reads add up to the
/// reads the loop device counted.
#[test]
fn a_grid_s_cells_keep_their_depth_on_a_slow_device() {
    needs_root!();
    let _one = one_at_a_time();
    let fd = FaultDev::start(64 << 20);
    fd.set("delay=10");
    let dir = tempfile::tempdir().unwrap();
    let dev = fd.path().to_string();
    let name = fd.device().file_name().unwrap().to_string_lossy().to_string();
    let reads = || -> u64 {
        let stat = std::fs::read_to_string(format!("/sys/block/{name}/stat")).unwrap();
        stat.split_whitespace().next().unwrap().parse().unwrap()
    };
    let before = reads();
    let r = run_plan(
        dir.path(),
        &format!(
            "targets = [\"{dev}\"]\n[[workloads]]\nname = \"grid\"\nread_pct = 100\nramp = [1, 2]\nqd_ramp = [1, 4]\nwarmup_s = 0\nintervals = 2\ninterval_s = 0.5\n"
        ),
        &[],
    );
    let after = reads();
    let mut counted = 0;
    for s in steps(&r, 0) {
        let outstanding = s["outstanding"].as_f64().unwrap();
        let expected = outstanding / 0.010;
        let (iops, mean_us) = (f(&s["iops"]), f(&s["lat_us"]["mean"]));
        // At most what the delay allows (a loaded machine answers later, never sooner), every
        // request at least the delay, and by Little's law the cell's I/Os in flight.
        assert!(iops <= expected * 1.1, "{iops} IOPS, at most {expected}: {s}");
        assert!(mean_us >= 10_000.0, "{s}");
        let in_flight = iops * mean_us / 1e6;
        assert!((in_flight - outstanding).abs() <= 0.15 * outstanding, "{in_flight} in flight, not {outstanding}: {s}");
        counted += s["read"]["ops"].as_u64().unwrap();
    }
    // The device saw every read iocurve counted (and those of the warm-ups and drains).
    assert!(after - before >= counted, "device {} reads, iocurve {counted}", after - before);
    // A cell against a run of that cell alone: the same load, the same figures.
    let cell = &steps(&r, 0)[3];
    assert_eq!((cell["workers"].as_u64(), cell["queue_depth"].as_u64()), (Some(2), Some(4)));
    let alone = run_plan(
        dir.path(),
        &format!(
            "targets = [\"{dev}\"]\n[[workloads]]\nname = \"cell\"\nread_pct = 100\nramp = [2]\nqueue_depth = 4\nwarmup_s = 0\nintervals = 2\ninterval_s = 0.5\n"
        ),
        &[],
    );
    // The same I/Os in flight, each taking the device's time (IOPS themselves follow a loaded
    // machine's delays).
    let in_flight = |s: &serde_json::Value| f(&s["iops"]) * f(&s["lat_us"]["mean"]) / 1e6;
    let (in_grid, by_itself) = (in_flight(cell), in_flight(&steps(&alone, 0)[0]));
    assert!((in_grid - by_itself).abs() <= 0.15 * by_itself, "{in_grid} in flight in the grid, {by_itself} alone");
    assert!(f(&steps(&alone, 0)[0]["lat_us"]["mean"]) >= 10_000.0);
    fd.set("pass");
}
