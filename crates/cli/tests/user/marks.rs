//! Marks (issue 44): `iocurve mark TEXT` from another terminal reaches the running run over a
//! socket only its user can reach, and `--at` / `--events` add marks to a stored run after the
//! fact; all of them in the store, the JSON, `show` and the report's timelines.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::util::*;

/// iocurve in `dir` with its sockets under `xdg` (both places `mark` looks: `$XDG_RUNTIME_DIR`
/// and `$TMPDIR`, so that other tests' runs are not seen).
fn with_xdg(dir: &Path, xdg: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .current_dir(dir)
        .env("XDG_RUNTIME_DIR", xdg)
        .env("TMPDIR", xdg)
        .output()
        .expect("iocurve runs")
}

const PLAN: &str = "targets = [\"m.dat\"]\n[[faults]]\nkind = \"latency\"\nlatency_ms = 1\n[[workloads]]\nname = \"w\"\nbackend = \"null\"\nramp = [1, 2]\nwarmup_s = 0\nintervals = 6\ninterval_s = 0.5\nthreads = 1\n";

/// A mark sent while the run runs is stored with it (`live`), on its clock, and shown under the
/// step that ran then; a peer that connects and says nothing, or says nonsense, holds nothing
/// up; the socket is the user's alone and goes with the run.
#[test]
fn a_mark_from_another_terminal_reaches_the_running_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let xdg = d.join("xdg");
    std::fs::create_dir(&xdg).unwrap();
    std::fs::write(d.join("plan.toml"), PLAN).unwrap();
    let run = Command::new(bin())
        .args(["run", "plan.toml", "--size", "16m", "--db", "r.db", "--json", "r.json"])
        .current_dir(d)
        .env("XDG_RUNTIME_DIR", &xdg)
        .env("TMPDIR", &xdg)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Until the run is up, no run is there to mark (a clear refusal, exit code 2).
    let started = Instant::now();
    let first = loop {
        let o = with_xdg(d, &xdg, &["mark", "controller B pulled"]);
        if o.status.success() {
            break o;
        }
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains("no run of yours is running on this host"), "{}", stderr(&o));
        assert!(started.elapsed() < Duration::from_secs(60), "the run never took a mark");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(stdout(&first).starts_with("marked run 1 at 20"), "{}", stdout(&first));
    let sockets: Vec<_> = std::fs::read_dir(xdg.join("iocurve")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(sockets.len(), 1, "{sockets:?}");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!((mode(&xdg.join("iocurve")), mode(&sockets[0])), (0o700, 0o600));
    // A peer that never writes: its deadline passes, the next mark goes through.
    let silent = UnixStream::connect(&sockets[0]).unwrap();
    // One that writes nonsense gets an answer saying so.
    let mut rude = UnixStream::connect(&sockets[0]).unwrap();
    rude.write_all(b"{\"mark\": 42}\n").unwrap();
    let o = with_xdg(d, &xdg, &["mark", "--run", "1", "path A down"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut answer = String::new();
    BufReader::new(&rude).read_line(&mut answer).unwrap();
    assert!(answer.contains("error"), "{answer}");
    drop(silent);
    // Bad marks are refused before anything is sent.
    let o = with_xdg(d, &xdg, &["mark", "two\nlines"]);
    input_error(&o, &["one line of printable text"]);
    let o = with_xdg(d, &xdg, &["mark", "--run", "7", "x"]);
    input_error(&o, &["run 7 is not running on this host; running: run 1 (plan plan"]);
    let out = wait_within(run, Duration::from_secs(120), "the run");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("): controller B pulled") && said.contains("): path A down"), "{said}");
    // The socket went with the run, and its directory, empty (a run leaves nothing behind); a
    // mark now has no run to go to.
    assert!(!xdg.join("iocurve").exists());
    input_error(&with_xdg(d, &xdg, &["mark", "late"]), &["no run of yours is running", "--at TIME"]);
    // A killed run's socket (nobody listens on it) is no run, and goes.
    std::fs::DirBuilder::new().mode(0o700).create(xdg.join("iocurve")).unwrap();
    let stale = xdg.join("iocurve").join("run-1-0.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    input_error(&with_xdg(d, &xdg, &["mark", "late"]), &["no run of yours is running"]);
    assert!(!stale.exists(), "the stale socket was removed");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(d.join("r.json")).unwrap()).unwrap();
    let marks = r["marks"].as_array().unwrap();
    let texts: Vec<&str> = marks.iter().map(|m| m["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["controller B pulled", "path A down"]);
    assert!(marks.iter().all(|m| m["source"] == "live"));
    // On the run's clock: after its start, before its end.
    let t = |m: &serde_json::Value| m["at_unix_ns"].as_i64().unwrap();
    let steps = steps(&r, 0);
    let first_step = steps[0]["measured_from_unix_ns"].as_i64().unwrap();
    let last = steps.last().unwrap();
    let end = last["measured_from_unix_ns"].as_i64().unwrap() + (f(&last["duration_s"]) * 1e9) as i64;
    assert!(marks.iter().all(|m| t(m) > first_step - 2_000_000_000 && t(m) < end + 1_000_000_000), "{marks:?}");
    let shown = stdout(&iocurve(d, &["show", "1", "--db", "r.db"]));
    assert!(shown.contains("\nmarks:\n") && shown.contains(": controller B pulled  [live]"), "{shown}");
}

/// The stored run 1 of `r.db` in `d`, as `export --format json` writes it.
fn exported(d: &Path) -> serde_json::Value {
    let o = iocurve(d, &["export", "1", "--db", "r.db", "--format", "json", "-o", "x.json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_str(&std::fs::read_to_string(d.join("x.json")).unwrap()).unwrap()
}

/// Marks after the fact: one at a time (`--at`), or a file of events in the ways logs write
/// time; a line that cannot be read adds nothing, an event outside the run is left out and
/// said, the same file twice adds nothing twice.
#[test]
fn marks_are_added_to_a_stored_run_from_a_file_of_events() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let xdg = d.join("xdg");
    std::fs::create_dir(&xdg).unwrap();
    std::fs::write(d.join("plan.toml"), PLAN.replace("intervals = 6", "intervals = 2")).unwrap();
    let o = with_xdg(d, &xdg, &["run", "plan.toml", "--size", "16m", "--db", "r.db"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = with_xdg(d, &xdg, &["mark", "--db", "r.db", "--run", "1", "--at", "+0.5", "rebuild started"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("(0.5 s into the run): rebuild started"), "{}", stdout(&o));
    // The run's start, to write the file's times from.
    let r = exported(d);
    let start_ns = iocurve_stats::date::parse_timestamp(r["started_at"].as_str().unwrap(), None).unwrap();
    // The second after the start's, written in UTC+01:00 without an offset (as an array's log
    // in local time): `2026-11-30 05:12:04.500`.
    let second = (start_ns / 1_000_000_000 + 1) as u64;
    let local = iocurve_stats::date::rfc3339(second + 3600, 500).replace('T', " ").replace('Z', "");
    let events = format!(
        "time,text\n# the array's log\n{local},\"controller A \"\"failed\"\"\"\n+1.5\tpath B up\n@1000 long ago\n"
    );
    std::fs::write(d.join("ev.log"), &events).unwrap();
    // Without the offset, that line cannot be read: nothing is added.
    let o = iocurve(d, &["mark", "--db", "r.db", "--run", "1", "--events", "ev.log"]);
    input_error(&o, &["ev.log:3: ", "has no UTC offset", "--utc-offset +01:00", "nothing was added"]);
    let o = iocurve(d, &["mark", "--db", "r.db", "--run", "1", "--events", "ev.log", "--utc-offset", "+01:00"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let said = stdout(&o);
    assert!(said.contains("added 2 mark(s) to run 1 from ev.log; 1 outside run 1"), "{said}");
    assert!(said.contains("(the first: file ev.log:5, 1970-01-01T00:16:40.000Z)"), "{said}");
    let again = iocurve(d, &["mark", "--db", "r.db", "--run", "1", "--events", "ev.log", "--utc-offset", "+01:00"]);
    assert!(
        stdout(&again).contains("added 0 mark(s)") && stdout(&again).contains("2 there already"),
        "{}",
        stdout(&again)
    );
    let r = exported(d);
    let marks: Vec<(String, String)> = r["marks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["text"].as_str().unwrap().into(), m["source"].as_str().unwrap().into()))
        .collect();
    assert_eq!(
        marks,
        [
            ("rebuild started".to_string(), "given".to_string()),
            ("controller A \"failed\"".into(), "file ev.log:3".into()),
            ("path B up".into(), "file ev.log:4".into())
        ]
    );
    // Each on the run's clock: 0.5 s and 1.5 s after its start, and the local time's.
    let t = |i: usize| r["marks"][i]["at_unix_ns"].as_i64().unwrap();
    assert_eq!((t(0) - start_ns, t(2) - start_ns), (500_000_000, 1_500_000_000));
    assert_eq!(t(1), second as i64 * 1_000_000_000 + 500_000_000);
    // --shift-s moves the file's clock onto the run's; garbage is refused plainly.
    input_error(
        &iocurve(d, &["mark", "--db", "r.db", "--run", "1", "--at", "+1", "x", "--shift-s", "nan"]),
        &["--shift-s"],
    );
    input_error(
        &iocurve(d, &["mark", "--db", "r.db", "--run", "1", "--at", "yesterday", "x"]),
        &["--at: `yesterday` is no timestamp"],
    );
    input_error(&iocurve(d, &["mark", "--db", "r.db", "--run", "1", "--events", "/"]), &["a directory, not a file"]);
    std::fs::write(d.join("bin.log"), b"\xff\xfe+1 x\n").unwrap();
    input_error(&iocurve(d, &["mark", "--db", "r.db", "--run", "1", "--events", "bin.log"]), &["not UTF-8 text"]);
    input_error(&iocurve(d, &["mark", "--db", "r.db", "--run", "9", "--at", "+1", "x"]), &["no run 9"]);
    // The report draws them on the run's timeline and lists them.
    let o = iocurve(d, &["report", "1", "--db", "r.db", "-o", "r.html"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(d.join("r.html")).unwrap();
    assert!(html.contains("<section id=\"timeline\">") && html.contains("<td>path B up</td>"), "the marks table");
}

/// A directory of the sockets that another user could reach (or made) is refused: the run goes
/// on without marks and says why, and `mark` says what to do.
#[test]
fn a_socket_directory_others_can_reach_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let xdg = d.join("xdg");
    std::fs::create_dir_all(xdg.join("iocurve")).unwrap();
    std::fs::set_permissions(xdg.join("iocurve"), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::write(d.join("plan.toml"), PLAN.replace("intervals = 6", "intervals = 1")).unwrap();
    let o = with_xdg(d, &xdg, &["run", "plan.toml", "--size", "16m", "--db", "r.db"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let said = stdout(&o) + &stderr(&o);
    assert!(said.contains("this run takes no marks") && said.contains("only you can reach"), "{said}");
    let o = with_xdg(d, &xdg, &["mark", "x"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("is not a directory of yours that only you can reach (owner uid"), "{}", stderr(&o));
}

/// The array's own figures (issue 44, part 3): a CSV of the array's front-end IOPS and a
/// controller's CPU, written on the array's clock in local time, stored beside the run, set
/// against each step over the same seconds — 10 % more than iocurve counted is said as +10 % —
/// and drawn on the run's timeline.
#[test]
fn the_arrays_figures_are_set_against_each_step() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let plan = PLAN.replace("intervals = 6\ninterval_s = 0.5", "intervals = 4\ninterval_s = 1");
    std::fs::write(d.join("plan.toml"), plan).unwrap();
    let o = iocurve(d, &["run", "plan.toml", "--size", "16m", "--db", "r.db"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r = exported(d);
    // The array counts 10 % more than iocurve (another host's load, say), a point in the middle
    // of each of iocurve's seconds, its clock an hour ahead in its own time zone (+01:00).
    let mut csv = String::from("Time;FE IOPS;Controller A CPU;Cache hit\n");
    for s in steps(&r, 0) {
        let from = s["measured_from_unix_ns"].as_i64().unwrap();
        for x in s["samples"].as_array().unwrap() {
            let at = from + ((f(&x["t_s"]) + 0.5) * 1e9) as i64;
            let (secs, ms) = ((at / 1_000_000_000) as u64, (at / 1_000_000 % 1000) as u32);
            let local = iocurve_stats::date::rfc3339(secs + 3600, ms).replace('T', " ").replace('Z', "");
            csv += &format!("{local};{:.0};42 %;N/A\n", f(&x["iops"]) * 1.1);
        }
    }
    std::fs::write(d.join("array.csv"), &csv).unwrap();
    let args = ["array", "--db", "r.db", "--run", "1", "array.csv", "--iops", "FE IOPS", "--utc-offset", "+01:00"];
    let o = iocurve(d, &args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("added 2 series") && stdout(&o).contains("cells that are not numbers left out"),
        "{}",
        stdout(&o)
    );
    let r = exported(d);
    let checks = r["array_checks"].as_array().unwrap();
    assert_eq!(checks.len(), 2, "{checks:?}");
    for c in checks {
        assert!((f(&c["diff_pct"]) - 10.0).abs() < 0.5, "{c}");
    }
    let shown = stdout(&iocurve(d, &["show", "1", "--db", "r.db"]));
    assert!(
        shown.contains("w step 1, 1 worker: iocurve ")
            && shown.contains("the array (FE IOPS)")
            && shown.contains("(+10.0 %)"),
        "{shown}"
    );
    // Imported again: replaced, not added.
    assert!(iocurve(d, &args).status.success());
    assert_eq!(exported(d)["array"][1]["points"].as_array().unwrap().len(), csv.lines().count() - 1);
    // Bad input: said with the line; a column that is not there; nothing outside the run.
    std::fs::write(d.join("bad.csv"), "t,x\n+1,2\nnoon,3\n").unwrap();
    input_error(
        &iocurve(d, &["array", "--db", "r.db", "--run", "1", "bad.csv"]),
        &["bad.csv:3: `noon` is no timestamp", "nothing was added"],
    );
    input_error(
        &iocurve(d, &[&args[..], &["--mbps", "MB/s"]].concat()),
        &["--mbps MB/s: no such column in array.csv (FE IOPS, Controller A CPU, Cache hit)"],
    );
    // Its local times read as UTC: an hour off, nothing within the run.
    let o = iocurve(d, &["array", "--db", "r.db", "--run", "1", "array.csv", "--utc-offset", "Z"]);
    input_error(&o, &["no figure of array.csv falls within run 1", "--utc-offset"]);
    let o = iocurve(d, &["report", "1", "--db", "r.db", "-o", "r.html"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(d.join("r.html")).unwrap();
    assert!(
        html.contains("data-timeline=\"array\"")
            && html.contains("The host against the array")
            && html.contains("<td>+10.0 %</td>")
    );
}
