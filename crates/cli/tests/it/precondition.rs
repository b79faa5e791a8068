//! Preconditioning: every block written exactly once with the data pattern, resumable after an
//! interruption, and known to the runs that follow.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::*;

/// (bytes written over all sessions, finished) of the target's record.
fn record(db: &Path) -> (u64, bool) {
    let py = "import sqlite3, sys; r = sqlite3.connect(sys.argv[1]).execute('SELECT bytes_written, finished_at IS NOT NULL FROM preconditions').fetchone(); print(r[0], r[1])";
    let o = Command::new("python3").args(["-c", py]).arg(db).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let v: Vec<u64> = text.split_whitespace().map(|x| x.parse().unwrap()).collect();
    assert_eq!(v.len(), 2, "{text} {}", String::from_utf8_lossy(&o.stderr));
    (v[0], v[1] == 1)
}

/// Every 4 KiB chunk carries its own offset in its stamp, and every 512-byte sector the constant
/// share of compress 0.4 (even sectors lead with their random bytes, odd ones end with them).
fn check_blocks(path: &Path) {
    let mut data = std::fs::read(path).unwrap();
    // The scratch file's last 4 KiB are iocurve's stamp, beyond the data I/O touches.
    data.truncate(data.len() - 4096);
    let random = (512.0f64 * 0.6).ceil() as usize;
    for (i, c) in data.chunks(4096).enumerate() {
        let off = u64::from_le_bytes(c[8..16].try_into().unwrap());
        assert_eq!(off, i as u64 * 4096, "chunk {i} was written by preconditioning, at its own offset");
        for (j, s) in c.chunks(512).enumerate() {
            let (r, k) =
                if j % 2 == 0 { (&s[16..random], &s[random..]) } else { (&s[512 - random..], &s[..512 - random]) };
            assert!(k.iter().all(|&b| b == 0), "chunk {i} sector {j} has the constant share of compress 0.4");
            assert!(r.iter().any(|&b| b != 0), "chunk {i} sector {j} has its random share");
        }
    }
}

#[test]
fn precondition_writes_every_block_once_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let size: u64 = 128 << 20;
    // Small writes, one in flight: slow enough to interrupt after the first progress line.
    let cmd = ["precondition", "p.dat", "--size", "128m", "--bs", "4k", "--qd", "1", "--compress", "0.4"];
    let mut child = Command::new(bin())
        .args(cmd)
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let db = dir.path().join("iocurve.db");
    let deadline = Instant::now() + Duration::from_secs(30);
    // Interrupt once part of the target is written and the state saved.
    loop {
        std::thread::sleep(Duration::from_millis(100));
        if db.exists() && record(&db).0 > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "no progress saved");
        assert!(child.try_wait().unwrap().is_none(), "finished before it could be interrupted");
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(stdout(&o).contains("interrupted; the same command resumes"), "{}", stdout(&o));
    let (partial, finished) = record(&db);
    assert!(!finished && partial > 0 && partial < size, "{partial} of {size}");

    let o = iocurve(dir.path(), &cmd);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("resuming at"), "{}", stdout(&o));
    assert!(stdout(&o).contains("complete"), "{}", stdout(&o));
    let (total, finished) = record(&db);
    assert!(finished);
    assert_eq!(total, size, "both sessions together wrote every block exactly once");
    check_blocks(&dir.path().join("p.dat"));
}

#[test]
fn a_run_preconditions_its_targets_once_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let run =
        ["run", "--target", "r.dat", "--size", "64m", "--keep", "--precondition", "--workload", "backend-random-read"];
    let run = args(&args(&run, &["--ramp", "1", "--json", "r.json"]), FAST);
    let o = iocurve(dir.path(), &run);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("precondition r.dat: writing 64m in 1m blocks, 32 in flight"), "{out}");
    assert!(out.contains("preconditioned: r.dat at 20"), "the run says its target was preconditioned: {out}");
    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    assert!(result["targets"][0]["preconditioned_at"].is_string(), "{}", result["targets"]);
    assert_eq!(record(&dir.path().join("iocurve.db")), (64 << 20, true));

    let o = iocurve(dir.path(), &run);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("already done at"), "not written again: {}", stdout(&o));
    let o = iocurve(dir.path(), &["report", "2", "-o", "r.html"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read_to_string(dir.path().join("r.html")).unwrap().contains(", preconditioned 20"));
}

/// Issue 17, part 6: `precondition --until-steady` writes 4k random blocks in rounds after the
/// fill until the SNIA rule holds over the last 5 rounds, or the rounds run out; it says which,
/// with the window and both criteria against what is allowed.
#[test]
fn precondition_until_steady_runs_rounds_and_judges_the_last_five() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["precondition", "s.dat", "--size", "16m", "--until-steady", "--round-s", "0.2", "--max-rounds", "20"];
    let o = iocurve(dir.path(), &args);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let rounds = out.lines().filter(|l| l.trim_start().starts_with("round ") && l.contains("/20: ")).count();
    let last = out.lines().last().unwrap_or_default();
    assert!(last.contains(&format!("in steady state (SNIA) after {rounds} rounds — rounds ")), "{out}");
    assert!(last.contains("(allowed 20 %)") && last.contains("(allowed 10 %)"), "{last}");
    // The window: 5 rounds, the first that met the rule (the one that ended the phase).
    let window = last.split(" — rounds ").nth(1).and_then(|w| w.split(':').next()).unwrap();
    let (a, b) = window.split_once('–').unwrap();
    let (a, b): (usize, usize) = (a.parse().unwrap(), b.parse().unwrap());
    assert_eq!(b - a, 4, "{last}");
    if last.starts_with("precondition: in steady state") {
        // After the round running when the rule held (or at the limit, when it held only there).
        assert!(b <= rounds && rounds <= b + 2, "ends after the round running then: {out}");
    } else {
        assert_eq!((rounds, b), (20, 20), "only the round limit ends an unsteady phase: {out}");
    }
    // The rounds need the flag.
    let o = iocurve(dir.path(), &["precondition", "s.dat", "--round-s", "1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}
