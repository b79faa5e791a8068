//! iocurve's test support, a dev-only crate (never published, a dev-dependency only): run the
//! real binary, make loop devices, start the fault device, agents in network namespaces, SSH and
//! Slurm labs, read results. One definition of every fixture for every test binary.

pub mod browser;
pub mod cluster;
pub mod faultdev;
pub mod lane;
pub mod slurm;
pub mod sshd;
pub mod traces;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The `iocurve` binary under test: `IOCURVE_BIN`, else the one cargo built beside the running
/// test binary (`target/debug/deps/it-HASH` → `target/debug/iocurve`; cargo builds a package's
/// binaries before its integration tests).
pub fn bin() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("IOCURVE_BIN") {
            return p.to_string_lossy().into_owned();
        }
        let exe = std::env::current_exe().expect("the test binary's path");
        let beside = exe.parent().and_then(Path::parent).map(|d| d.join("iocurve"));
        match beside {
            Some(b) if b.exists() => b.display().to_string(),
            _ => panic!(
                "no iocurve binary beside {}: run the tests with cargo test -p iocurve, or set IOCURVE_BIN",
                exe.display()
            ),
        }
    })
}

/// Tests that measure time, or load the machine (several agents, a precondition pass, the null
/// back-end's busy loop), take this lock and run one at a time within their test binary: on two
/// cores a neighbour's load pushed a start-spread measurement, and an SLA search's response
/// times, past their bounds.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs iocurve in `dir` with `args`.
pub fn iocurve(dir: &Path, args: &[&str]) -> Output {
    Command::new(bin()).args(args).current_dir(dir).output().expect("iocurve runs")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Asserts success and returns the JSON result written to `json`.
pub fn ok_json(o: &Output, json: &Path) -> Value {
    assert!(o.status.success(), "iocurve failed ({:?}):\n{}\n{}", o.status, stdout(o), stderr(o));
    serde_json::from_str(&std::fs::read_to_string(json).expect("JSON result written")).expect("valid JSON")
}

/// Runs iocurve with `args` and `--json`, asserts success and returns the result.
pub fn run_json(dir: &Path, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["--json", "result.json"]);
    let o = iocurve(dir, &a);
    ok_json(&o, &dir.join("result.json"))
}

/// [`run_json`] for a short run on the test machine's own disk, which CI's parallel lanes share:
/// when the run ended 3 only because a single I/O stalled for seconds (every step that completed
/// nothing is flagged `stall`, no step counted an I/O error — the disk, not iocurve), runs once
/// more. CI of 5e4c9f5: one 8k write took 2.28 s and left a 1-worker step of 2 × 1 s with no
/// completion. A second stall, an error or any other failure still fails the test.
pub fn run_json_on_shared_disk(dir: &Path, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["--json", "result.json"]);
    let o = iocurve(dir, &a);
    if o.status.code() == Some(3) && only_stalled(&dir.join("result.json")) {
        eprintln!("a step completed nothing behind a stall of the shared disk; once more:\n{}", stdout(&o));
        return ok_json(&iocurve(dir, &a), &dir.join("result.json"));
    }
    ok_json(&o, &dir.join("result.json"))
}

/// Whether the result at `json` has a step that completed nothing, and every such step is
/// flagged `stall`, and no step counted an error (measured or not) or gave up a stuck I/O.
fn only_stalled(json: &Path) -> bool {
    let Some(r) = std::fs::read_to_string(json).ok().and_then(|t| serde_json::from_str::<Value>(&t).ok()) else {
        return false;
    };
    let steps: Vec<&Value> = r["workloads"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|w| w["steps"].as_array().into_iter().flatten())
        .collect();
    let has = |s: &Value, code: &str| s["flags"].as_array().is_some_and(|f| f.iter().any(|f| f["code"] == code));
    let empty: Vec<&&Value> = steps.iter().filter(|s| has(s, "no_io")).collect();
    let clean = |s: &Value| {
        s["errors"].as_u64() == Some(0)
            && s["unmeasured_errors"].as_array().is_none_or(Vec::is_empty)
            && s["stuck_ios"].as_u64().unwrap_or(0) == 0
    };
    !empty.is_empty() && empty.iter().all(|s| has(s, "stall")) && steps.iter().all(|s| clean(s))
}

/// Writes `toml` as `plan.toml` in `dir`, runs it with `extra` options and returns the result.
pub fn run_plan(dir: &Path, toml: &str, extra: &[&str]) -> Value {
    std::fs::write(dir.join("plan.toml"), toml).unwrap();
    let o = iocurve(dir, &args(&["run", "plan.toml", "--json", "plan.json"], extra));
    ok_json(&o, &dir.join("plan.json"))
}

/// Asserts a clean input error: exit code 2, the message has every `needle`, no panic.
/// Waits for a child at most `limit` (a bound for a hang, not a timing); kills it and panics
/// naming `what` when it is still running then.
pub fn wait_within(mut child: std::process::Child, limit: std::time::Duration, what: &str) -> Output {
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("{what} (still running after {limit:?})");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

pub fn input_error(o: &Output, needles: &[&str]) -> String {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "exit code 2 expected:\n{}\n{err}", stdout(o));
    assert!(!err.contains("panicked"), "no panic: {err}");
    for n in needles {
        assert!(err.contains(n), "error mentions `{n}`: {err}");
    }
    err
}

/// `plan.toml` in `dir`: a short random-read ramp (1 and 2 workers) with `intervals` intervals
/// of 0.3 s on `dir/shared.dat`, an existing 8 MiB file that any number of agents may share
/// (reading creates nothing).
pub fn shared_read_plan(dir: &Path, intervals: u32) {
    std::fs::write(dir.join("shared.dat"), vec![7u8; 8 << 20]).unwrap();
    std::fs::write(
        dir.join("plan.toml"),
        format!(
            "targets = [\"{}/shared.dat\"]\n[[workloads]]\nname = \"read\"\nread_pct = 100\nramp = [1, 2]\nwarmup_s = 0.1\nintervals = {intervals}\ninterval_s = 0.3\n",
            dir.display()
        ),
    )
    .unwrap();
}

/// Fast timing for tests: a short warm-up and two short intervals.
pub const FAST: &[&str] = &["--warmup-s", "0.1", "--intervals", "2", "--interval-s", "0.3"];

pub fn args<'a>(base: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
    base.iter().chain(extra).copied().collect()
}

/// A loop device over a sparse backing file, detached (and the file removed) on drop.
pub struct Loop {
    pub dev: PathBuf,
    pub backing: PathBuf,
    _dir: tempfile::TempDir,
}

impl Loop {
    pub fn new(size: u64, extra: &[&str]) -> Loop {
        let dir = tempfile::tempdir().unwrap();
        let backing = dir.path().join("backing.img");
        let f = std::fs::File::create(&backing).unwrap();
        f.set_len(size).unwrap();
        drop(f);
        let out = Command::new("losetup")
            .args(["--find", "--show"])
            .args(extra)
            .arg(&backing)
            .output()
            .expect("losetup runs (tests need root and util-linux)");
        assert!(out.status.success(), "losetup failed: {}", String::from_utf8_lossy(&out.stderr));
        let dev = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
        Loop { dev, backing, _dir: dir }
    }

    pub fn path(&self) -> &str {
        self.dev.to_str().unwrap()
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dev).output();
        let _ = Command::new("losetup").arg("-d").arg(&self.dev).output();
    }
}

pub fn sh(cmd: &str, args: &[&str]) -> Output {
    let o = Command::new(cmd).args(args).output().unwrap_or_else(|e| panic!("{cmd} runs: {e}"));
    assert!(o.status.success(), "{cmd} {args:?} failed: {}", String::from_utf8_lossy(&o.stderr));
    o
}

pub fn steps(result: &Value, workload: usize) -> &Vec<Value> {
    result["workloads"][workload]["steps"].as_array().expect("steps")
}

pub fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("number expected, got {v}"))
}

/// Checks the accounting of every step: bytes = ops × block size, Little's law within 10 %.
pub fn check_steps(result: &Value, bs: u64) {
    check_steps_within(result, bs, 0.10)
}

/// [`check_steps`] with Little's law within `tolerance` (a share): for steps of few, long I/Os,
/// whose I/Os straddling an interval's edges weigh more (their whole latency counts in the
/// interval they complete in) — the more, the more a loaded machine stretches them.
pub fn check_steps_within(result: &Value, bs: u64, tolerance: f64) {
    for w in result["workloads"].as_array().unwrap() {
        for s in w["steps"].as_array().unwrap() {
            for dir in ["read", "write"] {
                let ops = s[dir]["ops"].as_u64().unwrap();
                assert_eq!(s[dir]["bytes"].as_u64().unwrap(), ops * bs, "{} {dir}: bytes = ops × bs", w["name"]);
            }
            assert_eq!(s["errors"].as_u64(), Some(0), "{}: no I/O errors", w["name"]);
            let outstanding = f(&s["outstanding"]);
            let in_flight = f(&s["iops"]) * f(&s["lat_us"]["mean"]) / 1e6;
            assert!(
                (in_flight - outstanding).abs() / outstanding <= tolerance,
                "{} at {} workers: Little's law: IOPS × latency = {in_flight:.2}, outstanding {outstanding}",
                w["name"],
                s["workers"]
            );
        }
    }
}

/// Reads a file and returns its 4 KiB units that a workload's write stamped (bytes 8..16 = the
/// unit's own offset, bytes 0..8 a tag that is never 0; scratch preparation writes tag 0), as
/// offsets.
pub fn stamped_units(path: &Path) -> Vec<u64> {
    let data = std::fs::read(path).unwrap();
    data.chunks(4096)
        .enumerate()
        .filter(|(i, u)| {
            u.len() >= 16 && u64::from_le_bytes(u[8..16].try_into().unwrap()) == (*i as u64) * 4096 && u[..8] != [0; 8]
        })
        .map(|(i, _)| i as u64 * 4096)
        .collect()
}

/// A pids cgroup (v1 `pids` controller or v2) limiting how many tasks its members may have:
/// makes thread creation fail for real. Removed on drop.
pub struct PidsLimit {
    pub dir: PathBuf,
}

impl PidsLimit {
    pub fn new(max: u32) -> PidsLimit {
        // One cgroup per limit: tests of one binary run in parallel in one process.
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("iocurve-test-{}-{n}", std::process::id());
        let base = if Path::new("/sys/fs/cgroup/pids").is_dir() { "/sys/fs/cgroup/pids" } else { "/sys/fs/cgroup" };
        let dir = Path::new(base).join(name);
        std::fs::create_dir_all(&dir).expect("create a pids cgroup (needs root)");
        std::fs::write(dir.join("pids.max"), max.to_string()).expect("set pids.max");
        PidsLimit { dir }
    }

    /// Makes `cmd` start inside the cgroup.
    pub fn apply(&self, cmd: &mut Command) {
        use std::os::unix::process::CommandExt;
        let procs = std::ffi::CString::new(self.dir.join("cgroup.procs").as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let n = libc::write(fd, b"0".as_ptr().cast(), 1);
                libc::close(fd);
                if n == 1 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
            });
        }
    }
}

impl Drop for PidsLimit {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// SHA-256 of a file or block device, read through `sha256sum`. For a device the kernel's
/// buffers are dropped first so that the bytes are read from the device, not a stale cache.
pub fn sha256(path: &Path) -> String {
    let p = path.to_str().unwrap();
    if std::fs::metadata(path).is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_block_device(&m.file_type())) {
        sh("blockdev", &["--flushbufs", p]);
    }
    let o = sh("sha256sum", &[p]);
    String::from_utf8_lossy(&o.stdout).split_whitespace().next().expect("sha256sum prints a digest").to_string()
}

/// Sectors written to a loop device since it was set up (`/sys/block/loopN/stat`, field 7).
pub fn sectors_written(lo: &Loop) -> u64 {
    let name = lo.dev.file_name().unwrap().to_str().unwrap();
    let stat = std::fs::read_to_string(format!("/sys/block/{name}/stat")).expect("block device statistics");
    stat.split_whitespace().nth(6).expect("field 7 of the statistics").parse().expect("a sector count")
}

/// The rows of `iocurve runs`' table as a pipe gets it (plain text, a line per row): the lines
/// whose first column, the id, holds a number.
pub fn runs_rows(out: &str) -> Vec<String> {
    out.lines()
        .filter(|l| l.split_whitespace().next().is_some_and(|id| id.parse::<i64>().is_ok()))
        .map(str::to_string)
        .collect()
}

/// Issue 38, finding 4: a run says how it ended alike in every view — its own JSON (`own`,
/// when it wrote one), `runs`, `runs --json`, `show` and `export --format json`: the status
/// (`complete`, `interrupted`, `aborted`, `failed`, `incomplete`), and `interrupted` true for
/// every status but complete. `db` is the database's path as `--db` takes it.
pub fn same_status_everywhere(dir: &Path, db: &str, id: i64, own: Option<&serde_json::Value>, expected: &str) {
    let ended_early = expected != "complete";
    if let Some(r) = own {
        assert_eq!(
            (r["status"].as_str(), r["interrupted"].as_bool()),
            (Some(expected), Some(ended_early)),
            "its own JSON"
        );
    }
    let id_s = id.to_string();
    let o = iocurve(dir, &["runs", "--json", "--db", db]);
    let listed: serde_json::Value =
        serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("runs --json: {e}: {}", stdout(&o)));
    let row = listed.as_array().and_then(|a| a.iter().find(|r| r["id"] == id)).cloned().unwrap_or_default();
    assert_eq!(row["status"], expected, "runs --json: {row}");
    let o = iocurve(dir, &["runs", "--db", db]);
    let rows = runs_rows(&stdout(&o));
    let row = rows.iter().find(|r| r.split_whitespace().next() == Some(id_s.as_str())).cloned().unwrap_or_default();
    assert!(row.split_whitespace().any(|w| w == expected), "runs: {row:?} in {}", stdout(&o));
    let o = iocurve(dir, &["show", &id_s, "--db", db]);
    let first = stdout(&o).lines().next().unwrap_or_default().to_string();
    assert!(first.starts_with(&format!("run {id}")) && first.contains(&format!(", {expected}")), "show: {first}");
    let out = dir.join(format!("status-{id}.json"));
    let o = iocurve(dir, &["export", &id_s, "--format", "json", "-o", out.to_str().unwrap(), "--db", db]);
    assert!(o.status.success(), "export: {}", stderr(&o));
    let e: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(
        (e["status"].as_str(), e["interrupted"].as_bool()),
        (Some(expected), Some(ended_early)),
        "export --format json"
    );
}
