//! Regressions of the `verify` subject (its helpers are `crate::verify`).

use crate::util::*;
use crate::verify::*;
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Issue 13, finding 8: the README's `iocurve run --verify --verify-final` stopped after 25 s
/// with "verifying workloads of one run share one block size" and exit 2, after running other
/// workloads. The check now comes before any I/O, and the README's example (with `--bs 4k`)
/// runs clean. Also: `verify` with a missing map is bad input (exit 2), not "lost writes".
#[test]
fn regression_the_readme_verify_example_runs_and_mixed_sizes_are_refused_first() {
    let dir = tempfile::tempdir().unwrap();
    let o = iocurve(dir.path(), &["run", "--verify", "--verify-final", "--size", "64m"]);
    input_error(&o, &["share one block size", "--bs"]);
    assert!(!dir.path().join("iocurve-scratch.dat").exists(), "nothing was prepared");
    let o = iocurve(
        dir.path(),
        &args(&["run", "--verify", "--verify-final", "--bs", "4k", "--size", "64m", "--ramp", "1"], FAST),
    );
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    let o = iocurve(dir.path(), &["verify", "--map", "missing.map", "iocurve-scratch.dat"]);
    input_error(&o, &["missing.map", "does not exist"]);
}

/// Issue 13, finding 5: `--verify-final` printed "found 14 problems" and exited 1, but the JSON,
/// the database, `show` and the report said nothing and the run was `complete`; only 5
/// examples were printed, with no way to get the full list. Now the pass is in the JSON
/// (`final_verification`, `status_reason`), the database (`export --format json`), `show`,
/// `runs` and the report; the run exits 4; and every problem is exported — the same blocks a
/// later `iocurve verify --problems` finds with the map the run saved.
#[test]
fn regression_the_final_verification_pass_is_stored_shown_and_every_problem_exported() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::File::create(d.join("f.dat")).unwrap().set_len(1 << 30).unwrap();
    let plan = r#"targets = ["f.dat"]
[[faults]]
kind = "drop-write"
from_s = 0.2
to_s = 0.4
[[workloads]]
name = "seq"
read_pct = 0
bs = "4k"
pattern = "sequential"
verify = true
ramp = [1]
warmup_s = 0
intervals = 1
interval_s = 0.6
"#;
    std::fs::write(d.join("v.toml"), plan).unwrap();
    let o = iocurve(
        d,
        &["run", "v.toml", "--allow-write", "f.dat", "--verify-final", "--verify-map", "v.map", "--json", "v.json"],
    );
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(4), "{out}\n{}", stderr(&o));
    let (lost, corrupt, misplaced, checked) = final_counts(&out);
    assert!(lost > 5 && corrupt == 0 && misplaced == 0, "more problems than examples: {out}");
    assert!(out.contains(&format!("{} more problems", lost - 5)), "the rest is announced: {out}");

    // The JSON result.
    let r: Value = serde_json::from_str(&std::fs::read_to_string(d.join("v.json")).unwrap()).unwrap();
    assert_eq!(r["status"], "complete", "the run itself completed");
    let reason = r["status_reason"].as_str().unwrap_or_else(|| panic!("a status reason: {r}"));
    assert!(reason.contains(&format!("verification found {lost} problems")), "{reason}");
    let fv = &r["final_verification"];
    assert_eq!((u(&fv["lost"]), u(&fv["corrupt"]), u(&fv["misplaced"]), u(&fv["checked"])), (lost, 0, 0, checked));
    assert_eq!(u(&fv["lost"]), u(&steps(&r, 0)[0]["faults_injected"]), "every dropped write");
    assert_eq!((fv["map"].as_str(), u(&fv["bs"]), u(&fv["unlisted"])), (Some("v.map"), 4096, 0));
    assert_eq!(fv["examples"].as_array().unwrap().len(), 5);

    // The database: the stored document, `show`, `runs`, the report.
    let o = iocurve(d, &["export", "1", "--format", "json", "-o", "e.json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let e: Value = serde_json::from_str(&std::fs::read_to_string(d.join("e.json")).unwrap()).unwrap();
    assert_eq!(e["final_verification"], *fv, "stored as the run reported it");
    assert_eq!((&e["status"], &e["status_reason"]), (&r["status"], &r["status_reason"]));
    let show = stdout(&iocurve(d, &["show", "1"]));
    assert!(show.contains(&format!("final verification: {lost} problems: {lost} lost")), "{show}");
    assert!(show.contains(&format!("verification found {lost} problems")), "the reason: {show}");
    assert!(show.contains("iocurve export 1 --format problems"), "where the rest is: {show}");
    let runs = stdout(&iocurve(d, &["runs"]));
    assert!(runs.contains(&format!("verify: {lost} problems")), "{runs}");
    let o = iocurve(d, &["report", "1", "-o", "r.html"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(d.join("r.html")).unwrap();
    assert!(html.contains(&format!("Final verification: {lost} problems")), "the report's section");
    assert!(html.contains(&format!("{lost} lost, 0 corrupted, 0 misplaced of {checked} checked blocks")));

    // Every problem: from the stored run, and the same blocks from a later pass.
    let o = iocurve(d, &["export", "1", "--format", "problems", "-o", "stored.csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let stored = problem_rows(&std::fs::read_to_string(d.join("stored.csv")).unwrap(), "f.dat");
    assert_eq!(stored.len() as u64, lost, "one row per problem");
    assert!(stored.iter().all(|(_, k, f)| k == "lost" && f == "no write of this map"), "{stored:?}");
    let mut blocks: Vec<u64> = stored.iter().map(|r| r.0).collect();
    blocks.dedup();
    assert_eq!(blocks.len() as u64, lost, "distinct blocks");
    let o = iocurve(d, &["verify", "f.dat", "--map", "v.map", "--problems", "later.csv"]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(stdout(&o).contains(&format!("wrote {lost} problems to later.csv")), "{}", stdout(&o));
    let later = problem_rows(&std::fs::read_to_string(d.join("later.csv")).unwrap(), "f.dat");
    assert_eq!(later, stored, "a later pass finds exactly the stored problems");

    // A run without a final pass has nothing to export: bad input.
    let o = iocurve(d, &args(&["run", "--target", "g.dat", "--size", "64m", "--ramp", "1"], FAST));
    assert!(o.status.success(), "{}", stderr(&o));
    let o = iocurve(d, &["export", "2", "--format", "problems", "-o", "none.csv"]);
    input_error(&o, &["run 2", "no final verification"]);
}

/// Issue 13, finding 5 (the full list): blocks changed behind iocurve's back after a clean
/// run are listed one by one, exactly, by `iocurve verify --problems`; a problems path that
/// cannot be written is bad input before anything is read.
#[test]
fn regression_verify_lists_exactly_the_blocks_changed_behind_its_back() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("t.dat"), vec![0u8; 256 << 10]).unwrap();
    let plan = r#"targets = ["t.dat"]
[[workloads]]
name = "seq"
read_pct = 0
bs = "4k"
pattern = "sequential"
verify = true
ramp = [1]
warmup_s = 0
intervals = 1
interval_s = 1
"#;
    std::fs::write(d.join("v.toml"), plan).unwrap();
    let o = iocurve(d, &["run", "v.toml", "--allow-write", "t.dat", "--verify-final", "--verify-map", "m.map"]);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}\n{}", stderr(&o));
    assert_eq!(final_counts(&out), (0, 0, 0, 64), "every block of the 256 KiB target written and clean: {out}");

    let bs = 4096;
    let mut data = std::fs::read(d.join("t.dat")).unwrap();
    data[5 * bs..6 * bs].fill(0); // lost
    data[60 * bs..61 * bs].fill(0); // lost
    data[20 * bs + 3000] ^= 1; // corrupted
    let thirty = data[30 * bs..31 * bs].to_vec();
    data[31 * bs..32 * bs].copy_from_slice(&thirty); // misplaced
    std::fs::write(d.join("t.dat"), &data).unwrap();

    let o = iocurve(d, &["verify", "t.dat", "--map", "m.map", "--problems", "/nonexistent-dir/p.csv"]);
    input_error(&o, &["--problems", "/nonexistent-dir/p.csv"]);
    assert!(!stdout(&o).contains("checked blocks"), "nothing was read");

    let o = iocurve(d, &["verify", "t.dat", "--map", "m.map", "--problems", "p.csv"]);
    assert_eq!(o.status.code(), Some(4), "{}\n{}", stdout(&o), stderr(&o));
    let rows = problem_rows(&std::fs::read_to_string(d.join("p.csv")).unwrap(), "t.dat");
    let want: Vec<(u64, String, String)> = [
        (5, "lost", "no write of this map"),
        (20, "corrupt", "checksum mismatch"),
        (31, "misplaced", "the write for t.dat block 30"),
        (60, "lost", "no write of this map"),
    ]
    .iter()
    .map(|&(b, k, f)| (b, k.to_string(), f.to_string()))
    .collect();
    assert_eq!(rows, want);
}

/// Issue 13, finding 6: the map had no checksum (one flipped byte → a false "lost write"). A
/// damaged map is bad input (exit code 2) for `verify` and for a run continuing it — before
/// the run touches anything.
#[test]
fn regression_a_flipped_byte_in_the_map_is_a_damaged_map_not_a_lost_write() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let run = ["run", "--target", "t.dat", "--size", "64m", "--bs", "4k", "--verify", "--verify-map", "m.map"];
    let o = iocurve(d, &args(&run, &args(&["--ramp", "1", "--keep"], FAST)));
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    let o = iocurve(d, &["verify", "t.dat", "--map", "m.map"]);
    assert!(o.status.success(), "clean before: {}\n{}", stdout(&o), stderr(&o));

    let mut map = std::fs::read(d.join("m.map")).unwrap();
    let at = map.len() - 1000;
    map[at] ^= 0x10;
    std::fs::write(d.join("m.map"), &map).unwrap();
    let o = iocurve(d, &["verify", "t.dat", "--map", "m.map"]);
    input_error(&o, &["m.map", "damaged"]);
    assert!(!stdout(&o).contains("lost"), "no finding: {}", stdout(&o));

    let before = std::fs::read(d.join("t.dat")).unwrap();
    let o = iocurve(d, &args(&run, &args(&["--ramp", "1"], FAST)));
    input_error(&o, &["m.map", "damaged"]);
    assert!(std::fs::read(d.join("t.dat")).unwrap() == before, "the target was not written");
    let runs = stdout(&iocurve(d, &["runs"]));
    assert_eq!(runs_rows(&runs).len(), 1, "no run was stored: {runs}");
    assert_eq!(std::fs::read(d.join("m.map")).unwrap(), map, "the damaged map is left as it was");
}

/// Issue 13, finding 6: two verifying runs in one directory shared the default map without a
/// lock, and one died mid-run. The second is now refused at once (exit code 2, naming the map
/// and the process holding it) before any I/O, and the first completes cleanly.
#[test]
fn regression_two_runs_on_one_map_the_second_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let common = ["--verify", "--bs", "4k", "--size", "64m", "--ramp", "1", "--verify-final"];
    let mut first = Command::new(bin())
        .args(args(
            &["run", "--target", "a.dat"],
            &args(&common, &["--warmup-s", "0", "--intervals", "3", "--interval-s", "1"]),
        ))
        .current_dir(d)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lock = d.join("iocurve-verify.map.lock");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !lock.exists() {
        assert!(Instant::now() < deadline, "the first run never took the map");
        assert!(first.try_wait().unwrap().is_none(), "the first run ended early");
        std::thread::sleep(Duration::from_millis(20));
    }
    let t = Instant::now();
    let o = iocurve(d, &args(&["run", "--target", "b.dat"], &args(&common, FAST)));
    let took = t.elapsed();
    let err = input_error(&o, &["iocurve-verify.map", "in use", &format!("process {}", first.id())]);
    // A hang guard: that it did not wait for the map is shown by the first run still going on.
    assert!(took < Duration::from_secs(10), "at once: {took:?}");
    assert!(!d.join("b.dat").exists(), "before any I/O: {err}");
    let o = iocurve(d, &["verify", "a.dat"]);
    input_error(&o, &["iocurve-verify.map", "in use"]);
    assert!(first.try_wait().unwrap().is_none(), "the first run goes on");

    let out = first.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "the first run completes cleanly: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(final_counts(&text).0 + final_counts(&text).1 + final_counts(&text).2, 0, "{text}");
    assert!(!lock.exists(), "the hold ended with the run");
    let runs = stdout(&iocurve(d, &["runs"]));
    let rows = runs_rows(&runs);
    assert_eq!(rows.len(), 1, "one run stored, complete: {runs}");
    assert!(rows[0].contains("complete") && rows[0].contains("verify: clean"), "{runs}");
}

/// Issue 36, finding 7: `iocurve verify` matched the map's targets by the text of their paths,
/// so a target under another name (renamed, a symlink, a LUN renamed by a reboot) was refused,
/// and the targets had to come in the map's order. The map keeps each target's identity now:
/// renamed files given in any order are found, and said to be the map's.
#[test]
fn regression_verify_finds_the_maps_targets_by_identity() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let o = iocurve(
        d,
        &args(
            &["run", "--target", "a.dat", "--target", "b.dat", "--size", "16m", "--keep", "--verify"],
            &["--verify-map", "m.map", "--bs", "4k", "--workload", "backend-random-write-4k", "--ramp", "1"],
        ),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::rename(d.join("a.dat"), d.join("renamed-a.dat")).unwrap();
    std::os::unix::fs::symlink(d.join("b.dat"), d.join("link-b")).unwrap();
    let o = iocurve(d, &["verify", "link-b", "renamed-a.dat", "--map", "m.map"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("renamed-a.dat is the map's a.dat") && out.contains("0 lost, 0 corrupted, 0 misplaced"),
        "{out}"
    );
    // Another file of the same size is not the map's target, whatever it is called.
    std::fs::copy(d.join("renamed-a.dat"), d.join("a.dat")).unwrap();
    let o = iocurve(d, &["verify", "a.dat", "b.dat", "--map", "m.map"]);
    input_error(&o, &["not among the targets given: a.dat", "file "]);
}

/// Found by comparing binaries from outside (issue 38's closing test): a run's preconditioning
/// wrote over every block a continued map knew, and the verifying reads after it called each a
/// lost write (3481 lost of 3481, exit 4) though nothing was lost. The pass now forgets what it
/// overwrote and says so; a second run skips the pass (done before) and keeps what it knows.
#[test]
fn regression_preconditioning_forgets_the_blocks_it_overwrites_instead_of_calling_them_lost() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = ["run", "--target", "t.dat", "--size", "16m", "--keep", "--ramp", "1", "--verify"];
    let o = iocurve(d, &args(&args(&base, FAST), &["--workload", "backend-random-write"]));
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    let o = iocurve(d, &args(&args(&base, FAST), &["--precondition", "--workload", "backend-random-read"]));
    assert!(o.status.success(), "exit {:?}: {}\n{}", o.status.code(), stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("verification: preconditioning wrote over t.dat: the "), "{out}");
    assert!(out.contains("blocks the map knew are forgotten (unknown, not lost)"), "{out}");
    // Written again, then preconditioned again: skipped, so what the map knows stays known and
    // is checked.
    let o = iocurve(d, &args(&args(&base, FAST), &["--workload", "backend-random-write"]));
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    let o = iocurve(d, &args(&args(&base, FAST), &["--precondition", "--workload", "backend-random-read"]));
    assert!(o.status.success(), "exit {:?}: {}\n{}", o.status.code(), stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("already done at") && !out.contains("are forgotten"), "{out}");
    assert!(out.contains("verified reads: 0 lost, 0 corrupted, 0 misplaced of "), "{out}");
}

/// The same with `iocurve precondition` on its own between two verifying runs (left open when
/// the run's own pass was fixed): it forgets, in the map of `--verify-map` (the run's default),
/// the blocks it wrote over; nothing is called lost.
#[test]
fn regression_iocurve_precondition_between_verifying_runs_forgets_what_it_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = ["run", "--target", "t.dat", "--size", "16m", "--keep", "--ramp", "1", "--verify"];
    let o = iocurve(d, &args(&args(&base, FAST), &["--workload", "backend-random-write"]));
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    let o = iocurve(d, &["precondition", "t.dat", "--allow-write", "t.dat"]);
    assert!(o.status.success(), "exit {:?}: {}\n{}", o.status.code(), stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("verification: preconditioning wrote over t.dat: the "), "{out}");
    assert!(out.contains("blocks iocurve-verify.map knew are forgotten (unknown, not lost)"), "{out}");
    // Before: exit 4, every block the map knew called lost.
    let o = iocurve(d, &args(&args(&base, FAST), &["--workload", "backend-random-read"]));
    assert_eq!(o.status.code(), Some(0), "{}\n{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("iocurve-verify.map (0 blocks written before)"), "{}", stdout(&o));
    // Done before, the pass writes nothing: what the map knows stays known.
    let o = iocurve(d, &["precondition", "t.dat", "--allow-write", "t.dat"]);
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    assert!(!stdout(&o).contains("are forgotten"), "{}", stdout(&o));
}
