//! Regressions of the `agents` subject (its helpers are `crate::agents`).

use crate::agents::*;
use crate::util::cluster::*;
use crate::util::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Issue 15, finding 6: the clock offset was measured once, at connection, so an agent's clock
/// stepped +200 ms mid-run started its steps 200 ms off while the reported spread (computed
/// with the same stale offset) stayed below 1.1 ms. Offsets are now measured before and after
/// every step: the step the clock moved in is flagged, the next ones start together again on
/// the fresh offset, and each step keeps every agent's offset.
#[test]
fn regression_a_clock_stepped_mid_run_is_caught_and_the_next_steps_start_together() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let (_a, mut hosts) = file_agents(dir.path(), &c, &["a"]);
    let d = dir.path().join("b");
    std::fs::create_dir(&d).unwrap();
    // Agent b's wall clock follows a file, read again every second (libfaketime); its
    // monotonic clock, which times the I/Os, is left alone.
    let offset = dir.path().join("b-offset");
    std::fs::write(&offset, "+0\n").unwrap();
    let mut cmd = Command::new(bin());
    cmd.env("LD_PRELOAD", "/usr/$LIB/faketime/libfaketime.so.1")
        .env("FAKETIME_TIMESTAMP_FILE", &offset)
        .env("FAKETIME_CACHE_DURATION", "1")
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
    let b = AgentProc::spawn(cmd, None, &d, &c, &format!("{}/*", d.display()), &[]);
    hosts.push((b.addr.clone(), d.join("t.dat")));
    let rr = "[[workloads]]\nname = \"rr\"\nramp = [1, 2]\nwarmup_s = 0\nintervals = 12\ninterval_s = 0.25\n";
    hosts_plan(dir.path(), &hosts, rr);
    let mut coord = Watched::spawn(coordinator(dir.path(), &c, &["plan.toml", "--size", "16m", "--json", "r.json"]));
    // Connected (the first step starts 0.5 s later and lasts 3 s): into it, b's clock steps
    // 200 ms ahead (b sees it within a second).
    coord.wait_for("clock offset", std::time::Duration::from_secs(30));
    std::thread::sleep(std::time::Duration::from_millis(1000));
    std::fs::write(&offset, "+0.2\n").unwrap();
    let (code, out) = coord.finish();
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains(&format!("agent {}'s clock moved +", b.addr)), "warned between the steps: {out}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let s = steps(&r, 0);
    let host = |step: &Value, addr: &str| {
        step["hosts"].as_array().unwrap().iter().find(|h| h["host"] == addr).cloned().unwrap()
    };
    let moved = s[0]["flags"].as_array().unwrap().iter().find(|f| f["code"] == "clock_moved").expect("flagged");
    assert!(moved["message"].as_str().unwrap().contains(&b.addr), "{moved}");
    let during = f(&host(&s[0], &b.addr)["clock_moved_ms"]);
    assert!((150.0..250.0).contains(&during), "moved about 200 ms during the first step: {during}");
    let next = host(&s[1], &b.addr);
    assert!((150.0..250.0).contains(&f(&next["clock_offset_ms"])), "the fresh offset: {next}");
    assert!(f(&host(&s[1], &hosts[0].0)["clock_offset_ms"]).abs() < 50.0);
    let codes: Vec<&str> = s[1]["flags"].as_array().unwrap().iter().map(|f| f["code"].as_str().unwrap()).collect();
    // The `start_spread` flag (over 2.5 ms here) and the 5 ms once asserted are how close the
    // starts are, a figure (bench/scale-agents); the stale offset started them 200 ms apart.
    assert!(!codes.contains(&"clock_moved"), "{codes:?}");
    assert!(f(&s[1]["start_spread_us"]) < 100_000.0, "{}", s[1]["start_spread_us"]);
}

/// Issue 11, finding 4: the allow list was matched as text on the raw path, so `..`, symlinks,
/// hard links and globs reached devices and files outside it. Each escape is refused now, and
/// the bytes outside are unchanged.
#[test]
fn regression_agent_allow_list_escapes_with_dotdot_symlinks_hard_links_and_globs() {
    iocurve_testkit::needs_root!();
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let d = dir.path().join("allowed");
    std::fs::create_dir(&d).unwrap();
    let agent = AgentProc::start(&d, &c, &format!("{}/*", d.display()), &["--max-scratch", "100m"]);
    let lo = Loop::new(32 << 20, &[]);
    let precious = dir.path().join("precious.dat");
    std::fs::write(&precious, vec![7u8; 1 << 20]).unwrap();
    let (dev_sha, file_sha) = (sha256(&lo.dev), sha256(&precious));
    std::os::unix::fs::symlink(&lo.dev, d.join("dev-link")).unwrap();
    std::os::unix::fs::symlink(&precious, d.join("file-link")).unwrap();
    std::fs::hard_link(&precious, d.join("hard")).unwrap();
    let write =
        "[[workloads]]\nname = \"w\"\nread_pct = 0\nramp = [1]\nwarmup_s = 0.1\nintervals = 1\ninterval_s = 0.3\n";
    let run = |target: PathBuf, size: &str| {
        hosts_plan(dir.path(), &[(agent.addr.as_str(), target)], write);
        coordinator(dir.path(), &c, &["plan.toml", "--size", size]).output().unwrap()
    };
    let dotdot = d.join(format!("../../../../../../..{}", lo.path()));
    for (target, needle) in [
        (dotdot, "outside this agent's allow list"),
        (d.join("dev-link"), "outside this agent's allow list"),
        (d.join("file-link"), "outside this agent's allow list"),
        (d.join("hard"), "hard links"),
        (d.join("../escaped.dat"), "outside this agent's allow list"),
        (d.join("../*.dat"), "outside this agent's allow list"),
        (d.join("*-link"), "outside this agent's allow list"),
        (PathBuf::from(format!("/proc/{}/root{}", agent.child.id(), precious.display())), "outside"),
        (dir.path().join("*.dat"), "outside this agent's allow list"),
        (PathBuf::from("/etc/passwd/x"), "outside this agent's allow list"),
        (PathBuf::from("/root/no-such-dir/x.dat"), "outside this agent's allow list"),
    ] {
        let o = run(target.clone(), "64m");
        let err = input_error(&o, &[needle]);
        assert!(!err.contains("precious.dat") || target.to_str().unwrap().contains("precious"), "{err}");
        assert!(!err.contains(&lo.path().to_string()) || target.to_str().unwrap().contains(lo.path()), "{err}");
        assert!(!err.contains("1048576") && !err.contains("1 MiB"), "no size of a file outside: {err}");
    }
    assert_eq!(sha256(&lo.dev), dev_sha, "the device outside the list is unchanged");
    assert_eq!(sha256(&precious), file_sha, "the file outside the list is unchanged");
    assert!(!dir.path().join("escaped.dat").exists(), "no scratch file outside the list");

    // Scratch files inside the list are capped by --max-scratch.
    let o = run(d.join("big.dat"), "256m");
    input_error(&o, &["scratch budget", "--max-scratch"]);
    assert!(!d.join("big.dat").exists());
    let o = run(d.join("small.dat"), "64m");
    assert!(o.status.success(), "{}", stderr(&o));
}

/// Issue 11, part 5: the lease covers preparation too. A coordinator killed while an agent
/// fills a scratch file stops the filling, and the half-written file is removed.
#[test]
fn regression_an_agent_stops_preparing_a_scratch_file_when_its_coordinator_dies() {
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let d = dir.path().join("a");
    std::fs::create_dir(&d).unwrap();
    let agent = AgentProc::start(&d, &c, &format!("{}/*", d.display()), &["--lease-s", "2"]);
    let target = d.join("big.dat");
    hosts_plan(
        dir.path(),
        &[(agent.addr.as_str(), target.clone())],
        "[[workloads]]\nname = \"r\"\nread_pct = 100\nramp = [1]\nwarmup_s = 0.1\nintervals = 1\ninterval_s = 0.3\n",
    );
    // Large enough that filling takes seconds, small enough for the agent's scratch budget
    // (half the free space) on whatever disk the test runs on: CI once had less than 32 GiB.
    let free = iocurve_engine::target::free_space(dir.path()).expect("free space of the test directory");
    let size_mib = ((free / 4) >> 20).min(16 << 10);
    assert!(size_mib >= 1024, "this test needs at least 4 GiB free in {}", dir.path().display());
    let size = format!("{size_mib}m");
    let log = std::fs::File::create(dir.path().join("coord.log")).unwrap();
    let mut coord =
        coordinator(dir.path(), &c, &["plan.toml", "--size", &size]).stdout(Stdio::null()).stderr(log).spawn().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let allocated = |p: &Path| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(p).map_or(0, |m| m.blocks() * 512)
    };
    // fallocate reserves the whole file at once: wait for the size, then for data to flow.
    while std::fs::metadata(&target).map_or(0, |m| m.len()) == 0 {
        assert!(
            std::time::Instant::now() < deadline && coord.try_wait().unwrap().is_none(),
            "the agent never started the scratch file; coordinator said:\n{}",
            std::fs::read_to_string(dir.path().join("coord.log")).unwrap_or_default()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    coord.kill().unwrap();
    coord.wait().unwrap();
    let gone = std::time::Instant::now() + std::time::Duration::from_secs(8);
    while target.exists() {
        assert!(
            std::time::Instant::now() < gone,
            "the half-prepared scratch file is still there 8 s after the coordinator died ({} bytes allocated)",
            allocated(&target)
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Issue 14: weighted target groups collapsed into one group on agents, so "75 % on the local
/// LUN, 25 % on the mirrored one" ran 50/50 on every host. Every I/O fails (an injected EIO, so
/// nothing but the pick is measured) and the errors per target show the split each agent made.
#[test]
fn regression_weighted_target_groups_keep_their_weights_on_every_agent() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    for name in ["l.dat", "m.dat"] {
        std::fs::write(shared.join(name), vec![7u8; 4 << 20]).unwrap();
    }
    let allow = format!("{}/*", shared.display());
    let agents: Vec<AgentProc> = ["a", "b"]
        .iter()
        .map(|n| {
            let d = dir.path().join(n);
            std::fs::create_dir(&d).unwrap();
            AgentProc::start(&d, &c, &allow, &[])
        })
        .collect();
    let plan = format!(
        "[[groups]]\nname = \"local\"\nweight = 3\ntargets = [\"{l}\"]\n\
         [[groups]]\nname = \"mirror\"\nweight = 1\ntargets = [\"{m}\"]\n\
         [[workloads]]\nname = \"r\"\nread_pct = 100\nbs = \"4k\"\nramp = [4]\nwarmup_s = 0\nintervals = 2\ninterval_s = 0.5\nbackend = \"psync\"\n\
         [[faults]]\nkind = \"eio\"\n",
        l = shared.join("l.dat").display(),
        m = shared.join("m.dat").display()
    );
    std::fs::write(dir.path().join("plan.toml"), plan).unwrap();
    let hosts = agents.iter().map(|a| a.addr.as_str()).collect::<Vec<_>>().join(",");
    let o = coordinator(dir.path(), &c, &["plan.toml", "--hosts", &hosts, "--json", "r.json"]).output().unwrap();
    assert_eq!(o.status.code(), Some(3), "every I/O failed: exit 3\n{}\n{}", stdout(&o), stderr(&o));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let targets = r["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 4, "two targets on each agent: {targets:?}");
    for t in targets {
        let want = if t["path"].as_str().unwrap().ends_with("l.dat") { "local" } else { "mirror" };
        assert_eq!(t["group"], want, "each target keeps its group: {t}");
    }
    // Each agent's own host facts and back-end, beside the coordinator's.
    let listed = r["host"]["agents"].as_array().unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");
    for (l, a) in listed.iter().zip(&agents) {
        assert_eq!(l["address"], a.addr.as_str());
        assert_eq!(l["backend"], "psync");
        assert!(l["cores"].as_u64().unwrap() >= 1 && !l["kernel"].as_str().unwrap().is_empty(), "{l}");
    }
    let s = &steps(&r, 0)[0];
    for a in &agents {
        let count = |file: &str| -> u64 {
            s["errors_by_target"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["target"] == format!("{}:{}", a.addr, shared.join(file).display()))
                .map(|e| e["count"].as_u64().unwrap())
                .sum()
        };
        let (l, m) = (count("l.dat"), count("m.dat"));
        assert!(l + m > 1000, "agent {}: enough I/O to tell the split: {l} + {m}", a.addr);
        let ratio = l as f64 / m as f64;
        assert!((2.6..3.4).contains(&ratio), "agent {}: 3:1 by weight, got {l}:{m} ({ratio:.2})", a.addr);
    }
}

/// Issue 14: an agent made its scratch files 1 GiB whatever its disk held (the coordinator, which
/// cannot see the agent's disks, chose the size). Without --size the agent now takes 1 GiB or half
/// its own free space, shared evenly by the files it makes, as a local run does.
#[test]
fn regression_an_agent_sizes_scratch_files_to_its_own_free_space() {
    iocurve_testkit::needs_root!();
    let _one = one_at_a_time();
    struct Mount(PathBuf);
    impl Drop for Mount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let d = dir.path().join("small");
    std::fs::create_dir(&d).unwrap();
    let o = Command::new("mount").args(["-t", "tmpfs", "-o", "size=300m", "tmpfs"]).arg(&d).output().unwrap();
    assert!(o.status.success(), "mount a 300 MiB tmpfs (needs root): {}", stderr(&o));
    let _mount = Mount(d.clone());
    let agent = AgentProc::start(&d, &c, &format!("{}/*", d.display()), &[]);
    let (t, u) = (d.join("t.dat").display().to_string(), d.join("u.dat").display().to_string());
    let run = |hosts: &[&str], json: &str| {
        let mut a = hosts.to_vec();
        a.extend(["--target", &t, "--target", &u, "--buffered", "--workload", "backend-random-read-4k"]);
        a.extend(["--ramp", "1", "--backend", "psync", "--json", json]);
        let o = if hosts.is_empty() {
            iocurve(dir.path(), &args(&[&["run"], a.as_slice()].concat(), FAST))
        } else {
            coordinator(dir.path(), &c, &args(&a, FAST)).output().unwrap()
        };
        let r = ok_json(&o, &dir.path().join(json));
        let sizes: Vec<u64> = r["targets"].as_array().unwrap().iter().map(|t| t["size"].as_u64().unwrap()).collect();
        sizes
    };
    let on_agent = run(&["--hosts", &agent.addr], "agent.json");
    // Two files share half of 300 MiB: 75 MiB each, less the stamp, in whole MiB (the agent made
    // the first half the free space and the second half of what was left).
    assert_eq!(on_agent, [74 << 20, 74 << 20], "each file's share of half the free space");
    // Issue 14, part 2: the same rule on this host, from the same engine code (a local run had
    // a rule of its own).
    assert_eq!(run(&[], "local.json"), on_agent);
    drop(agent);
}

/// Issue 15, findings 4 and 5: an agent stopped (SIGSTOP) at connection time hung the run for
/// 640 s and the first SIGTERM did nothing; an unreachable agent ended the run even with
/// `--on-host-loss continue`. Now connecting has a deadline, SIGTERM ends the wait at once,
/// and with `continue` the run goes on with the agents it could reach and says which it lost.
#[test]
fn regression_agents_lost_at_connection_time_neither_hang_nor_end_the_run() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let (agents, mut hosts) = file_agents(dir.path(), &c, &["a", "b"]);
    let stopped = &agents[1];
    assert!(Command::new("kill").args(["-STOP", &stopped.child.id().to_string()]).status().unwrap().success());
    // Nothing listens on port 1 of loopback: refused at once.
    hosts.push(("127.0.0.1:1".into(), dir.path().join("c.dat")));
    let rr = "[[workloads]]\nname = \"rr\"\nramp = [1, 2]\nwarmup_s = 0\nintervals = 2\ninterval_s = 0.3\n";
    hosts_plan(dir.path(), &hosts, rr);

    // SIGTERM while the coordinator waits for the stopped agent: it ends at once, nothing ran.
    let coord = coordinator(dir.path(), &c, &["plan.toml", "--size", "16m", "--on-host-loss", "abort"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let sent = std::time::Instant::now();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(coord.id() as i32, libc::SIGTERM) };
    let o = coord.wait_with_output().unwrap();
    // At once, not at the stopped agent's 10 s connection deadline.
    assert!(sent.elapsed() < std::time::Duration::from_secs(5), "ended {:?} after SIGTERM", sent.elapsed());
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(stderr(&o).contains("interrupted while connecting"), "{}", stderr(&o));
    assert!(!dir.path().join("a/t.dat").exists(), "nothing was prepared");

    // --on-host-loss abort: the stopped agent's deadline ends the run before any I/O.
    let t = std::time::Instant::now();
    let o = coordinator(dir.path(), &c, &["plan.toml", "--size", "16m", "--on-host-loss", "abort"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    // The 10 s deadline ends the run rather than a hang: room for a machine ten times slower.
    assert!(t.elapsed() < std::time::Duration::from_secs(60), "the deadline holds: {:?}", t.elapsed());
    assert!(stderr(&o).contains("before any I/O"), "{}", stderr(&o));

    // --on-host-loss continue: the run goes on with agent a, and says which agents it lost.
    let t = std::time::Instant::now();
    let o = coordinator(dir.path(), &c, &["plan.toml", "--size", "16m", "--json", "r.json"]).output().unwrap();
    let _ = Command::new("kill").args(["-CONT", &stopped.child.id().to_string()]).status();
    let out = format!("{}\n{}", stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(3), "finished without two agents: {out}");
    // A hang guard: the 10 s deadline and two short steps, with room for a slow machine.
    assert!(t.elapsed() < std::time::Duration::from_secs(60), "{:?}", t.elapsed());
    assert!(out.contains("did not answer within 10 s") && out.contains("127.0.0.1:1"), "{out}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let listed = r["host"]["agents"].as_array().unwrap();
    let lost: Vec<&str> =
        listed.iter().filter(|a| a.get("lost").is_some()).map(|a| a["address"].as_str().unwrap()).collect();
    assert_eq!(lost, [stopped.addr.as_str(), "127.0.0.1:1"], "{listed:?}");
    assert!(r["status_reason"].as_str().unwrap().contains("lost before the first step"), "{}", r["status_reason"]);
    let s = steps(&r, 0);
    assert_eq!(s.len(), 2);
    for step in s {
        assert_eq!(step["hosts"].as_array().unwrap().len(), 1, "every step ran on agent a alone");
        assert!(f(&step["iops"]) > 0.0);
    }
    assert!(r["workloads"][0]["maximum"].is_object(), "one host throughout: like with like");
}

/// Issue 15, finding 3: 1,100 idle connections at `ulimit -n 1024` made the agent spin at
/// 100 % CPU and a real run hang; connections that never sent a byte were held forever. Now
/// strangers get a few connections per address (8 since issue 35, finding 2, the newest
/// kept) and 10 s to make an authenticated call, and running out of descriptors backs off.
#[test]
fn regression_strangers_cannot_starve_an_agent_of_connections_or_cpu() {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let (_a, hosts) = file_agents(dir.path(), &c, &["a"]);
    // This test holds hundreds of sockets itself.
    let mut l = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: valid pointers to an rlimit.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut l);
        l.rlim_cur = l.rlim_max.min(8192);
        libc::setrlimit(libc::RLIMIT_NOFILE, &l);
    }
    // The agent under attack may hold 64 descriptors.
    let d = dir.path().join("b");
    std::fs::create_dir(&d).unwrap();
    let mut cmd = Command::new(bin());
    // SAFETY: setrlimit is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            let l = libc::rlimit { rlim_cur: 64, rlim_max: 64 };
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
            Ok(())
        });
    }
    let agent = AgentProc::spawn(cmd, None, &d, &c, &format!("{}/*", d.display()), &[]);
    hosts_plan(
        dir.path(),
        &[(agent.addr.as_str(), d.join("t.dat"))],
        "[[workloads]]\nname = \"rr\"\nramp = [1]\nwarmup_s = 0\nintervals = 1\ninterval_s = 0.3\n",
    );
    let run = || coordinator(dir.path(), &c, &["plan.toml", "--size", "16m"]).output().unwrap();

    // 200 connections from one address, each with a byte of a TLS handshake: 8 are held
    // and the rest closed at once; a coordinator elsewhere is served meanwhile.
    // A stranger that connects and sends a byte, then nothing (one that sends nothing at all
    // is cut after a second: `regression_a_silent_connection_is_cut_within_seconds`): watched
    // from its own thread, which learns when the agent closes it.
    let mut idle = connect_from([127, 0, 0, 3].into(), &agent.addr).unwrap();
    std::io::Write::write_all(&mut idle, &[0x16]).unwrap();
    let idle_watch = std::thread::spawn(move || {
        let since = std::time::Instant::now();
        idle.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
        let mut buf = [0u8; 64];
        let got = idle.read(&mut buf).map_err(|e| e.kind());
        (got, since.elapsed())
    });
    let one: Vec<_> = (0..200)
        .filter_map(|_| connect_from([127, 0, 0, 2].into(), &agent.addr).ok())
        .inspect(|mut s| std::io::Write::write_all(&mut s, &[0x16]).unwrap())
        .collect();
    // Of the 200, 8 are held open and the rest were closed at once (as soon as the agent has
    // taken them all in: within 5 s, well before the 10 s that ends the 8).
    let open = || {
        one.iter()
            .filter(|s| {
                s.set_nonblocking(true).unwrap();
                matches!(s.peek(&mut [0u8; 1]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
            })
            .count()
    };
    let since = std::time::Instant::now();
    while open() != 8 && since.elapsed() < std::time::Duration::from_secs(5) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(open(), 8, "connections from one address still open");
    let o = run();
    assert!(o.status.success(), "a coordinator is served while one address holds 200 connections: {}", stderr(&o));

    // Strangers at 20 addresses, 8 each: more than the agent has descriptors (their connects
    // queue in the kernel's backlog, so they come from a thread of their own).
    let addr = agent.addr.clone();
    let strangers = std::thread::spawn(move || {
        (0..20u8)
            .flat_map(|i| (0..8).map(move |_| i))
            .filter_map(|i| connect_from([127, 0, 1, 10 + i].into(), &addr).ok())
            .collect::<Vec<_>>()
    });
    std::thread::sleep(std::time::Duration::from_millis(500));
    let before = cpu_seconds(agent.child.id());
    std::thread::sleep(std::time::Duration::from_secs(2));
    let used = cpu_seconds(agent.child.id()) - before;
    assert!(used < 0.5, "the agent out of descriptors used {used:.2} CPU seconds in 2 s (it spun before)");
    // Held until now: the agent stayed out of descriptors while it was measured.
    let many = strangers.join().unwrap();
    assert!(many.len() > 64, "{} strangers connected", many.len());
    drop(many);

    // The idle stranger that sent a byte was cut 10 s after it connected.
    let (got, after) = idle_watch.join().unwrap();
    // Closed (reset: the door's cut), not answered.
    assert!(
        matches!(got, Ok(0) | Err(std::io::ErrorKind::ConnectionReset)),
        "closed, not answered: {got:?} after {after:?}"
    );
    assert!(
        // Not before its 10 s deadline; the upper end only guards against the 30 s read timeout.
        (std::time::Duration::from_secs(8)..std::time::Duration::from_secs(25)).contains(&after),
        "cut after {after:?}"
    );
    // Its siblings went with it (dropped here): the agent serves the next run at once.
    let o = run();
    assert!(o.status.success(), "{}", stderr(&o));
    let _ = hosts;
}

/// Issue 15, finding 7: anyone holding the token could Stop another coordinator's step or have
/// the agent create files while it ran. One coordinator now owns an agent for its run: the
/// calls of a second one are refused, and the first run finishes untouched.
#[test]
fn regression_a_second_coordinator_can_neither_stop_nor_use_an_agent_in_use() {
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let (agents, hosts) = file_agents(dir.path(), &c, &["a"]);
    let rr = "[[workloads]]\nname = \"rr\"\nramp = [1]\nwarmup_s = 0\nintervals = 16\ninterval_s = 0.5\n";
    hosts_plan(dir.path(), &hosts, rr);
    let mut first =
        Watched::spawn(coordinator(dir.path(), &c, &["plan.toml", "--size", "16m", "--json", "first.json"]));
    // The first coordinator has opened its targets: the agent is its own.
    first.wait_for("clock offset", std::time::Duration::from_secs(30));

    // A second run with the same token: refused, and its scratch file is not created.
    let other = dir.path().join("a/other.dat");
    hosts_plan(&dir.path().join("a"), &[(agents[0].addr.as_str(), other.clone())], rr);
    let o = coordinator(dir.path(), &c, &["a/plan.toml", "--size", "16m"]).output().unwrap();
    input_error(&o, &["in use by the coordinator at"]);
    assert!(!other.exists(), "no file was created for the second coordinator");

    // Its Stop is refused too.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    use iocurve_net::pb;
    rt.block_on(async {
        let tls = tonic::transport::ClientTlsConfig::new()
            .ca_certificate(tonic::transport::Certificate::from_pem(std::fs::read_to_string(c.join("ca.pem")).unwrap()))
            .domain_name("iocurve-agent");
        let ch = tonic::transport::Endpoint::from_shared(format!("https://{}", agents[0].addr))
            .unwrap()
            .tls_config(tls)
            .unwrap()
            .connect()
            .await
            .unwrap();
        let tok = std::fs::read_to_string(c.join("token")).unwrap().trim().to_string();
        let mut client =
            pb::agent_client::AgentClient::with_interceptor(ch, iocurve_net::auth::Bearer::new(&tok).unwrap());
        let e = client.stop(pb::StopRequest {}).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::Aborted, "{e}");
        assert!(e.message().contains("in use"), "{e}");
    });

    let (code, out) = first.finish();
    assert_eq!(code, Some(0), "{out}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("first.json")).unwrap()).unwrap();
    assert_eq!(steps(&r, 0)[0]["intervals"].as_array().unwrap().len(), 16, "the first run was not stopped");
    // Once it ended, the agent serves the next coordinator.
    let o = coordinator(dir.path(), &c, &["a/plan.toml", "--size", "16m"]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

/// Issue 15, finding 7: one agent key pair on every host, certificates valid until the year
/// 4096, the CA key discarded, and the coordinator checking the fixed name `iocurve-agent`, so
/// a certificate proved nothing about which host answered. Now `certs init` keeps the CA key,
/// `certs add-host NAME` issues a certificate naming one host, certificates last a year, and the
/// coordinator checks the name it dialled.
#[test]
fn regression_an_agent_certificate_proves_which_host_answers() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    assert_eq!(
        std::fs::metadata(c.join("ca.key")).unwrap().permissions().mode() & 0o777,
        0o600,
        "the CA key is kept, private"
    );
    let end =
        Command::new("openssl").args(["x509", "-noout", "-enddate", "-in"]).arg(c.join("agent.pem")).output().unwrap();
    let year: i32 = String::from_utf8_lossy(&end.stdout).split_whitespace().rev().nth(1).unwrap().parse().unwrap();
    assert!((2026..=2028).contains(&year), "valid for a year: {}", String::from_utf8_lossy(&end.stdout));

    // A certificate for 127.0.0.1 alone, and one for another host.
    for host in ["127.0.0.1", "lg2.lab"] {
        let o = iocurve(dir.path(), &["certs", "add-host", "certs", host]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let o = iocurve(dir.path(), &["certs", "add-host", "certs", "lg2.lab"]);
    input_error(&o, &["exists already"]);
    let d = dir.path().join("a");
    std::fs::create_dir(&d).unwrap();
    let allow = format!("{}/*", d.display());
    let cluster_token = c.join("token").display().to_string();
    let agent_with = |host: &str, token: &str, extra: &[&str]| {
        let h = c.join("hosts").join(host);
        let mut cmd = Command::new(bin());
        cmd.args(["agent", "--listen", "127.0.0.1:0", "--token-file", token])
            .args(extra)
            .args(["--allow", &allow, "--tls-cert"])
            .arg(h.join("agent.pem"))
            .arg("--tls-key")
            .arg(h.join("agent.key"))
            .current_dir(&d)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
        AgentProc { child, addr: line.trim().rsplit(' ').next().unwrap().to_string() }
    };
    let rr = "[[workloads]]\nname = \"rr\"\nramp = [1]\nwarmup_s = 0\nintervals = 1\ninterval_s = 0.2\n";
    // The host's own certificate: served.
    let right = agent_with("127.0.0.1", &cluster_token, &[]);
    hosts_plan(dir.path(), &[(right.addr.as_str(), d.join("t.dat"))], rr);
    let o = coordinator(dir.path(), &c, &["plan.toml", "--size", "16m"]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    drop(right);
    // An agent that demands a coordinator certificate refuses a run without one: that stops
    // the run (it used to count as a lost host, exit 3).
    let ca = c.join("ca.pem").display().to_string();
    let strict = agent_with("127.0.0.1", &cluster_token, &["--client-ca", &ca]);
    hosts_plan(dir.path(), &[(strict.addr.as_str(), d.join("t.dat"))], rr);
    let o = coordinator(dir.path(), &c, &["plan.toml", "--size", "16m"]).output().unwrap();
    input_error(&o, &["--client-cert"]);
    let (cert, key) = (c.join("client.pem").display().to_string(), c.join("client.key").display().to_string());
    let o = coordinator(dir.path(), &c, &["plan.toml", "--size", "16m", "--client-cert", &cert, "--client-key", &key])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    drop(strict);
    // Another host's certificate on this address: refused whatever the host-loss policy.
    let wrong = agent_with("lg2.lab", &cluster_token, &[]);
    hosts_plan(dir.path(), &[(wrong.addr.as_str(), d.join("t.dat"))], rr);
    let o =
        coordinator(dir.path(), &c, &["plan.toml", "--size", "16m", "--on-host-loss", "continue"]).output().unwrap();
    input_error(&o, &["certificate was refused", "certs add-host"]);
    // Unless the run says which name to expect.
    let o = coordinator(dir.path(), &c, &["plan.toml", "--size", "16m", "--tls-name", "lg2.lab"]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    drop(wrong);

    // Per-host tokens: an agent holding only its own host's token serves a coordinator run
    // with --token-per-host (which derives it from the cluster's token)...
    let own_token = |host: &str| {
        let t = c.join("hosts").join(host).join("token");
        assert_eq!(std::fs::metadata(&t).unwrap().permissions().mode() & 0o777, 0o600);
        t.display().to_string()
    };
    let own = agent_with("127.0.0.1", &own_token("127.0.0.1"), &[]);
    hosts_plan(dir.path(), &[(own.addr.as_str(), d.join("t.dat"))], rr);
    let o = coordinator(dir.path(), &c, &["plan.toml", "--size", "16m", "--token-per-host"]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    // ...and refuses the cluster's token itself.
    let o = coordinator(dir.path(), &c, &["plan.toml", "--size", "16m"]).output().unwrap();
    input_error(&o, &["refused the token"]);
    drop(own);
    // Another host's token opens nothing here.
    let stolen = agent_with("127.0.0.1", &own_token("lg2.lab"), &[]);
    hosts_plan(dir.path(), &[(stolen.addr.as_str(), d.join("t.dat"))], rr);
    let o = coordinator(dir.path(), &c, &["plan.toml", "--size", "16m", "--token-per-host"]).output().unwrap();
    input_error(&o, &["refused the token"]);
}

/// Issue 15, finding 2: a stall of an hour (or a long latency fault) held every completion,
/// and once its coordinator went away the agent said "running another step" until restarted.
/// Held completions are given up when the step is aborted: the agent serves the next
/// coordinator within its lease and the step's bounded drain.
#[test]
fn regression_an_agent_stalled_by_a_fault_is_free_again_after_its_coordinator_dies() {
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let d = dir.path().join("a");
    std::fs::create_dir(&d).unwrap();
    let agent = AgentProc::start(&d, &c, &format!("{}/*", d.display()), &["--lease-s", "2"]);
    let hosts = [(agent.addr.as_str(), d.join("t.dat"))];
    let stalled = "[[workloads]]\nname = \"rr\"\nramp = [4]\nwarmup_s = 0\nintervals = 60\ninterval_s = 0.5\n\
                   [[faults]]\nkind = \"stall\"\nfrom_s = 0.3\nto_s = 3600\n";
    hosts_plan(dir.path(), &hosts, stalled);
    let mut coord = Watched::spawn(coordinator(dir.path(), &c, &["plan.toml", "--size", "16m"]));
    // Connected; the step starts 0.5 s later and stalls 0.3 s into it: well into the stall,
    // the coordinator dies.
    coord.wait_for("clock offset", std::time::Duration::from_secs(30));
    std::thread::sleep(std::time::Duration::from_millis(2000));
    coord.child.kill().unwrap();
    let _ = coord.finish();
    let killed = std::time::Instant::now();
    let quick = "[[workloads]]\nname = \"rr\"\nramp = [1]\nwarmup_s = 0\nintervals = 1\ninterval_s = 0.2\n";
    hosts_plan(dir.path(), &hosts, quick);
    loop {
        let o = coordinator(dir.path(), &c, &["plan.toml", "--size", "16m"]).output().unwrap();
        if o.status.success() {
            break;
        }
        assert!(
            // The 2 s lease and the bounded drain free it; "until restarted" never would.
            killed.elapsed() < std::time::Duration::from_secs(60),
            "the agent is still taken 60 s after its coordinator died: {}",
            stderr(&o)
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    let free = killed.elapsed();
    // A hang guard as above (the 2 s lease plus a drain; over 10× their few seconds).
    assert!(free < std::time::Duration::from_secs(60), "free again {free:?} after the coordinator died");
}

/// Issue 14, one path: a kept scratch file that is not written through (here recreated by a
/// null back-end run after the earlier file was preconditioned) was taken as preconditioned on
/// an agent — the coordinator judged by the earlier record alone, while a local run knew the
/// file was new. Local runs and agents now run one pass, told by each host which files are
/// fresh: every block is written again.
#[test]
fn regression_an_unwritten_scratch_file_on_an_agent_is_not_taken_as_preconditioned() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let (agents, hosts) = file_agents(dir.path(), &c, &["a"]);
    let (addr, target) = &hosts[0];
    let key = format!("{addr}:{}", target.display());
    let workload = |backend: &str| {
        format!(
            "[[workloads]]\nname = \"r\"\nread_pct = 100\nramp = [1]\nwarmup_s = 0\nintervals = 1\ninterval_s = 0.3\nbackend = \"{backend}\"\n"
        )
    };
    let run = |extra: &[&str]| {
        let o = coordinator(dir.path(), &c, &args(&["plan.toml", "--size", "64m", "--json", "r.json"], extra))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
        stdout(&o)
    };
    let zero_blocks = || {
        let data = std::fs::read(target).unwrap();
        data[..64 << 20].chunks(4096).filter(|b| b.iter().all(|&x| x == 0)).count()
    };
    hosts_plan(dir.path(), &hosts, &workload("psync"));
    let out = run(&["--precondition"]);
    assert!(out.contains(&format!("precondition {key}: complete")), "{out}");
    assert_eq!(zero_blocks(), 0);
    // The file goes; a null back-end run makes a new one, allocated but not written.
    std::fs::remove_file(target).unwrap();
    hosts_plan(dir.path(), &hosts, &workload("null"));
    run(&[]);
    assert_eq!(zero_blocks(), 16384, "the new file is unwritten");
    hosts_plan(dir.path(), &hosts, &workload("psync"));
    let out = run(&["--precondition"]);
    assert!(!out.contains("already done"), "the earlier file's record does not apply: {out}");
    assert!(out.contains(&format!("precondition {key}: complete")), "{out}");
    assert_eq!(zero_blocks(), 0, "every block written");
    drop(agents);
}

/// Idle connections to `to`, `per` from each address of `from`, held the way an attacker
/// keeping a door full would: every 200 ms, those the server closed are opened again. Stopped
/// (and every connection closed) on drop.
pub(crate) struct Flood {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<usize>>,
    opened: std::sync::mpsc::Receiver<()>,
}

impl Flood {
    pub(crate) fn start(to: &str, from: Vec<std::net::Ipv4Addr>, per: usize) -> Flood {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (tx, opened) = std::sync::mpsc::channel();
        let (flag, to) = (stop.clone(), to.to_string());
        let thread = std::thread::spawn(move || {
            let slots: Vec<std::net::Ipv4Addr> = from.iter().flat_map(|a| std::iter::repeat_n(*a, per)).collect();
            let mut held: Vec<Option<std::net::TcpStream>> = slots.iter().map(|a| connect_from(*a, &to).ok()).collect();
            let _ = tx.send(());
            let mut reopened = 0;
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(std::time::Duration::from_millis(200));
                for (s, a) in held.iter_mut().zip(&slots) {
                    let closed = s.as_ref().is_none_or(|s| {
                        s.set_nonblocking(true).unwrap();
                        !matches!(s.peek(&mut [0u8; 1]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
                    });
                    if closed {
                        *s = connect_from(*a, &to).ok();
                        reopened += 1;
                    }
                }
            }
            reopened
        });
        Flood { stop, thread: Some(thread), opened }
    }

    /// Waits until every connection was opened once.
    pub(crate) fn wait_opened(&self) {
        self.opened.recv_timeout(std::time::Duration::from_secs(60)).expect("the flood's connections opened");
    }

    /// Stops the flood: how many connections it opened again after the server closed them.
    pub(crate) fn stop(mut self) -> usize {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The addresses of a flood from many networks: `n` /24s of 127.0.0.0/8 (127.0.N.1 from
/// N = `first`), one address each.
pub(crate) fn networks(first: u8, n: u8) -> Vec<std::net::Ipv4Addr> {
    (first..first + n).map(|i| std::net::Ipv4Addr::new(127, 0, i, 1)).collect()
}

/// Issue 35, finding 2: 8 addresses × 16 idle TCP connections filled the agent's 128 places
/// for unauthenticated connections and every coordinator, right token and certificate
/// included, got UNAVAILABLE. Now a newcomer evicts the oldest stranger of its address, its
/// network or the fullest network, and idle ones are cut after a second: under the same flood,
/// from the coordinator's own /24 (127.0.0.2-9 beside 127.0.0.1), and from 64 more /24s, held
/// up by opening every cut connection again, a real run connects and finishes.
#[test]
fn regression_an_idle_flood_from_many_addresses_does_not_lock_the_coordinator_out() {
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let (agents, hosts) = file_agents(dir.path(), &c, &["a"]);
    hosts_plan(
        dir.path(),
        &hosts,
        "[[workloads]]\nname = \"rr\"\nramp = [1]\nwarmup_s = 0\nintervals = 1\ninterval_s = 0.3\n",
    );
    let eight: Vec<_> = (2..10).map(|i| std::net::Ipv4Addr::new(127, 0, 0, i)).collect();
    let same_net = Flood::start(&agents[0].addr, eight, 16);
    let many_nets = Flood::start(&agents[0].addr, networks(10, 64), 2);
    same_net.wait_opened();
    many_nets.wait_opened();
    for attempt in 1..=3 {
        let t = std::time::Instant::now();
        let o = coordinator(dir.path(), &c, &["plan.toml", "--size", "16m"]).output().unwrap();
        assert!(o.status.success(), "run {attempt} under the flood: {}", stderr(&o));
        eprintln!("run {attempt} under a flood of 256 idle connections from 72 addresses: {:?}", t.elapsed());
    }
    // The flood was held up throughout: the agent cut its connections and they came back.
    let (a, b) = (same_net.stop(), many_nets.stop());
    assert!(a > 0 && b > 0, "connections opened again: {a}, {b}");
}

/// Issue 35, finding 2: a connection that sent nothing held one of the agent's places for its
/// whole first-call deadline (10 s), so idle connections were cheap to keep. Now one that has
/// sent no byte within a second is cut (the bounds leave room for a slow machine), while one
/// that sent a byte keeps its 10 s to authenticate.
#[test]
fn regression_a_silent_connection_is_cut_within_seconds() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let (agents, _hosts) = file_agents(dir.path(), &c, &["a"]);
    let watch = |mut s: std::net::TcpStream| {
        std::thread::spawn(move || {
            let since = std::time::Instant::now();
            s.set_read_timeout(Some(std::time::Duration::from_secs(40))).unwrap();
            let got = s.read(&mut [0u8; 64]).map_err(|e| e.kind());
            (got, since.elapsed())
        })
    };
    let silent = watch(connect_from([127, 0, 40, 1].into(), &agents[0].addr).unwrap());
    let mut speaking = connect_from([127, 0, 41, 1].into(), &agents[0].addr).unwrap();
    // The first byte of a TLS record, and nothing more.
    speaking.write_all(&[0x16]).unwrap();
    let speaking = watch(speaking);
    let cut = |got: &Result<usize, std::io::ErrorKind>| matches!(got, Ok(0) | Err(std::io::ErrorKind::ConnectionReset));
    let (got, after) = silent.join().unwrap();
    assert!(cut(&got), "the silent connection was closed: {got:?} after {after:?}");
    let secs = after.as_secs_f64();
    assert!((0.5..6.0).contains(&secs), "the silent connection was cut after {secs:.2} s (1 s to 1.25 s on time)");
    let (got, after) = speaking.join().unwrap();
    assert!(cut(&got), "{got:?} after {after:?}");
    let secs = after.as_secs_f64();
    assert!((8.0..30.0).contains(&secs), "the connection that spoke was cut after {secs:.2} s (10 s on time)");
}
