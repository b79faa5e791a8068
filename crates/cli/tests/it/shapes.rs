//! Skewed access, block sizes per direction, think time and bursts (issue 39), checked the way
//! an outsider would: the offsets, sizes and times of the system calls of a psync run, traced
//! with strace — nothing from iocurve's own output — against the named law, computed here on
//! its own.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::util::cluster::{AgentProc, certs, coordinator, file_agents, hosts_plan};
use crate::util::*;

/// One read or write of the target as strace saw it.
#[derive(Debug, Clone, Copy)]
struct Call {
    /// Seconds since the epoch, at entry.
    t: f64,
    write: bool,
    len: u64,
    offset: u64,
}

/// The preads and pwrites of files named `name` in an strace log written with `-f -ttt -y -s 0`
/// (a call another thread interrupted comes in two lines, paired by thread).
fn calls(trace: &Path, name: &str) -> Vec<Call> {
    let text = std::fs::read_to_string(trace).unwrap();
    let mut pending: HashMap<String, (f64, bool, bool)> = HashMap::new();
    let mut out = Vec::new();
    for line in text.lines() {
        // `PID TIME CALL…`, the pid padded to a width (`2026  1795…`).
        let Some((pid, rest)) = line.trim_start().split_once(' ') else { continue };
        let Some((t, rest)) = rest.trim_start().split_once(' ') else { continue };
        let Ok(t) = t.parse::<f64>() else { continue };
        let (write, args) = if let Some(r) = rest.strip_prefix("pread64(") {
            (false, r)
        } else if let Some(r) = rest.strip_prefix("pwrite64(") {
            (true, r)
        } else if let Some(r) = rest.strip_prefix("<... pread64 resumed>") {
            let Some((t0, w, ours)) = pending.remove(pid) else { continue };
            if ours {
                out.extend(parse_tail(r).map(|(len, offset)| Call { t: t0, write: w, len, offset }));
            }
            continue;
        } else if let Some(r) = rest.strip_prefix("<... pwrite64 resumed>") {
            let Some((t0, w, ours)) = pending.remove(pid) else { continue };
            if ours {
                out.extend(parse_tail(r).map(|(len, offset)| Call { t: t0, write: w, len, offset }));
            }
            continue;
        } else {
            continue;
        };
        let ours = args.split(',').next().is_some_and(|fd| fd.ends_with(&format!("/{name}>")));
        if args.contains("<unfinished ...>") {
            pending.insert(pid.to_string(), (t, write, ours));
        } else if ours {
            out.extend(parse_tail(args).map(|(len, offset)| Call { t, write, len, offset }));
        }
    }
    out
}

/// `…, LEN, OFFSET) = RESULT`: the length and offset of a call that transferred it all.
fn parse_tail(s: &str) -> Option<(u64, u64)> {
    let (args, result) = s.rsplit_once(") = ")?;
    let mut parts = args.rsplit(", ");
    let offset = parts.next()?.trim().parse().ok()?;
    let len: u64 = parts.next()?.trim().parse().ok()?;
    (result.split_whitespace().next()?.parse::<u64>().ok()? == len).then_some((len, offset))
}

/// The strace command that traces `program`'s file reads and writes into `trace`.
fn strace(trace: &Path) -> Command {
    let mut c = Command::new("strace");
    c.args(["-f", "-qq", "-ttt", "-y", "-s", "0", "-e", "trace=pread64,pwrite64", "-o"]).arg(trace);
    c
}

/// An agent started under strace, in a process group of its own: dropped, the whole group is
/// killed (strace's tracee too), then strace waited for.
struct Group(AgentProc);

impl Drop for Group {
    fn drop(&mut self) {
        // SAFETY: a signal to the process group this test made for the traced agent.
        unsafe { libc::kill(-(self.0.child.id() as i32), libc::SIGKILL) };
    }
}

/// Pearson's chi-square of observed counts against expected probabilities, and the critical
/// value at p = 0.01 for its degrees of freedom (Wilson–Hilferty).
fn chi_square(observed: &[u64], p: &[f64]) -> (f64, f64) {
    let n: u64 = observed.iter().sum();
    let x: f64 = observed
        .iter()
        .zip(p)
        .map(|(&o, &p)| {
            let e = p * n as f64;
            (o as f64 - e).powi(2) / e
        })
        .sum();
    let k = (observed.len() - 1) as f64;
    let z = 2.326; // the standard normal's 99th percentile
    let crit = k * (1.0 - 2.0 / (9.0 * k) + z * (2.0 / (9.0 * k)).sqrt()).powi(3);
    (x, crit)
}

/// Zipf θ over `n` ranks: the probability of each.
fn zipf(n: usize, theta: f64) -> Vec<f64> {
    let w: Vec<f64> = (1..=n).map(|r| (r as f64).powf(-theta)).collect();
    let h: f64 = w.iter().sum();
    w.into_iter().map(|x| x / h).collect()
}

/// Counts and probabilities binned by rank: 0, 1, 2–3, 4–7, … (doubling).
fn by_doubling(positions: &[u64], p: &[f64]) -> (Vec<u64>, Vec<f64>) {
    let bin = |r: u64| if r == 0 { 0 } else { 64 - r.leading_zeros() as usize };
    let bins = bin(p.len() as u64 - 1) + 1;
    let mut obs = vec![0u64; bins];
    let mut exp = vec![0f64; bins];
    for &r in positions {
        obs[bin(r)] += 1;
    }
    for (r, &q) in p.iter().enumerate() {
        exp[bin(r as u64)] += q;
    }
    (obs, exp)
}

/// A psync run of `workload` on a 64 MiB file, traced: its calls on the file, and its JSON.
fn traced_run(dir: &Path, workload: &str) -> (Vec<Call>, Value) {
    std::fs::write(dir.join("p.toml"), format!("targets = [\"t.dat\"]\n{workload}")).unwrap();
    let trace = dir.join("trace.txt");
    let o = strace(&trace)
        .arg(bin())
        .args(["run", "p.toml", "--size", "64m", "--json", "r.json"])
        .current_dir(dir)
        .output()
        .unwrap();
    let r = ok_json(&o, &dir.join("r.json"));
    (working_set(calls(&trace, "t.dat")), r)
}

/// The workloads' calls: before the run, iocurve fills a scratch file it creates in 8 MiB
/// writes and stamps its identity just beyond its size.
fn working_set(calls: Vec<Call>) -> Vec<Call> {
    calls.into_iter().filter(|c| c.offset < 64 << 20 && c.len < 1 << 20).collect()
}

const BLOCKS_4K_64M: u64 = 16384;

#[test]
fn zipf_offsets_and_sizes_per_direction_as_the_system_calls_show_them() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let w = "[[workloads]]\nname = \"z\"\nbackend = \"psync\"\nread_pct = 70\nbs = \"4k\"\nwrite_bs = \"64k\"\ndistribution = \"zipf:1.2\"\nramp = [1]\nwarmup_s = 0\nintervals = 1\ninterval_s = 3\n";
    let (calls, r) = traced_run(dir.path(), w);
    assert!(calls.len() > 2_000, "{} calls traced", calls.len());
    // Sizes per direction: reads 4k, writes 64k, every one aligned to 4k.
    for c in &calls {
        assert_eq!(c.len, if c.write { 65536 } else { 4096 }, "{c:?}");
        assert_eq!(c.offset % 4096, 0, "{c:?}");
        assert!(c.offset + c.len <= 64 << 20, "{c:?}");
    }
    let reads = calls.iter().filter(|c| !c.write).count() as f64 / calls.len() as f64;
    assert!((0.66..=0.74).contains(&reads), "read share {reads}");
    // The positions where a 64k write still fits: 16384 − 16 + 1, rank 0 at the start.
    let n = (BLOCKS_4K_64M - 16 + 1) as usize;
    let positions: Vec<u64> = calls.iter().map(|c| c.offset / 4096).collect();
    let p = zipf(n, 1.2);
    let (obs, exp) = by_doubling(&positions, &p);
    let (x, crit) = chi_square(&obs, &exp);
    assert!(x < crit, "zipf 1.2: chi-square {x:.1} ≥ {crit:.1} (p < 0.01); observed {obs:?}, expected {exp:?}");
    // The hottest block takes its share: 1/H(n, 1.2) of the I/Os.
    let top = positions.iter().filter(|&&b| b == 0).count() as f64 / positions.len() as f64;
    assert!((top - p[0]).abs() < 0.02, "rank 0 took {top}, the law {}", p[0]);
    // The result names what shaped it, and has each direction apart.
    let wl = &r["workloads"][0];
    assert_eq!(wl["shape"], "distribution zipf:1.2");
    assert_eq!(wl["bs"], "4k r, 64k w");
    let s = &steps(&r, 0)[0];
    assert!((f(&s["write"]["mbps"]) / f(&s["write"]["iops"]) - 0.065536).abs() < 1e-6, "{s}");
    assert!((f(&s["read"]["mbps"]) / f(&s["read"]["iops"]) - 0.004096).abs() < 1e-6, "{s}");
}

/// Φ, the standard normal's distribution function (Abramowitz and Stegun 7.1.26: within
/// 1.5e-7, plenty for counts of thousands).
fn phi(x: f64) -> f64 {
    let z = x.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * z);
    let poly =
        t * (0.254_829_592 + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erfc = poly * (-z * z).exp();
    if x >= 0.0 { 1.0 - erfc / 2.0 } else { erfc / 2.0 }
}

/// The positions of a traced 2 s psync run of 4k reads drawn from `law` (and `layout`).
fn positions_of(law: &str, layout: &str) -> Vec<u64> {
    let dir = tempfile::tempdir().unwrap();
    let w = format!(
        "[[workloads]]\nname = \"law\"\nbackend = \"psync\"\ndistribution = \"{law}\"\nhot_layout = \"{layout}\"\nramp = [1]\nwarmup_s = 0\nintervals = 1\ninterval_s = 2\n"
    );
    let (calls, r) = traced_run(dir.path(), &w);
    assert!(calls.len() > 1_000, "{law}: {} calls", calls.len());
    assert!(r["workloads"][0]["shape"].as_str().unwrap().contains(law), "{}", r["workloads"][0]["shape"]);
    calls.iter().map(|c| c.offset / 4096).collect()
}

#[test]
fn pareto_normal_hot_bands_and_a_scattered_zipf_as_the_system_calls_show_them() {
    let _one = one_at_a_time();
    let n = BLOCKS_4K_64M;
    // pareto:0.9, fio's: v = ⌊n·u^p⌋ with p = ln 0.9 / ln 0.1, the hot end first (rank n−1−v).
    let pos = positions_of("pareto:0.9", "contiguous");
    let q = 1.0 / (0.9f64.ln() / 0.1f64.ln());
    let below = |k: u64| 1.0 - ((n - k) as f64 / n as f64).powf(q); // P(rank < k)
    let p: Vec<f64> = (0..n).map(|k| below(k + 1) - below(k)).collect();
    let (obs, exp) = by_doubling(&pos, &p);
    let (x, crit) = chi_square(&obs, &exp);
    assert!(x < crit, "pareto 0.9: chi-square {x:.1} ≥ {crit:.1}; observed {obs:?}, expected {exp:?}");
    // normal:5 around the middle: counts by distance from it in σ.
    let pos = positions_of("normal:5", "contiguous");
    let edges = [f64::NEG_INFINITY, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, f64::INFINITY];
    let (mu, sigma) = (0.5 * n as f64, 0.05 * n as f64);
    let mut obs = vec![0u64; edges.len() - 1];
    for &b in &pos {
        // A position covers [b, b + 1): its middle's distance.
        let z = (b as f64 + 0.5 - mu) / sigma;
        obs[edges.windows(2).position(|e| z >= e[0] && z < e[1]).unwrap()] += 1;
    }
    let exp: Vec<f64> = edges.windows(2).map(|e| phi(e[1]) - phi(e[0])).collect();
    let (x, crit) = chi_square(&obs, &exp);
    assert!(x < crit, "normal 5 %: chi-square {x:.1} ≥ {crit:.1}; observed {obs:?}, expected {exp:?}");
    // hotbands: 40 % in 10–11 %, 20 % in 50–52 %, the other 40 % over all of it.
    let pos = positions_of("hotbands:40@10-11:20@50-52", "contiguous");
    let band = |s: f64, e: f64| ((s * n as f64).floor() as u64, (e * n as f64).ceil() as u64);
    let (b1, b2) = (band(0.10, 0.11), band(0.50, 0.52));
    let mut obs = [0u64; 3];
    for &b in &pos {
        obs[if (b1.0..b1.1).contains(&b) {
            0
        } else if (b2.0..b2.1).contains(&b) {
            1
        } else {
            2
        }] += 1;
    }
    let share = |b: (u64, u64)| (b.1 - b.0) as f64 / n as f64;
    let exp = [0.4 + 0.4 * share(b1), 0.2 + 0.4 * share(b2), 0.4 * (1.0 - share(b1) - share(b2))];
    let (x, crit) = chi_square(&obs, &exp);
    assert!(x < crit, "hot bands: chi-square {x:.1} ≥ {crit:.1}; observed {obs:?}, expected {exp:?}");
    // zipf:1.2 scattered: as many distinct blocks as the law says (a permutation keeps every
    // block's share), and the hottest blocks spread over the file, not in one run.
    let pos = positions_of("zipf:1.2", "scattered");
    let p = zipf(n as usize, 1.2);
    let draws = pos.len() as f64;
    let expected: f64 = p.iter().map(|q| 1.0 - (1.0 - q).powf(draws)).sum();
    let distinct = pos.iter().collect::<std::collections::HashSet<_>>().len() as f64;
    assert!((distinct / expected - 1.0).abs() < 0.05, "{distinct} distinct blocks, the law expects {expected:.0}");
    let mut counts: HashMap<u64, u64> = HashMap::new();
    for &b in &pos {
        *counts.entry(b).or_default() += 1;
    }
    let mut hot: Vec<(u64, u64)> = counts.into_iter().map(|(b, c)| (c, b)).collect();
    hot.sort_unstable_by(|a, b| b.cmp(a));
    let top: Vec<u64> = hot.iter().take(8).map(|h| h.1).collect();
    let span = top.iter().max().unwrap() - top.iter().min().unwrap();
    assert!(span > 1_000, "the 8 hottest blocks {top:?} lie within {span} blocks");
    // The hottest takes its rank-0 share.
    let share = hot[0].0 as f64 / draws;
    assert!((share - p[0]).abs() < 0.03, "the hottest block took {share}, rank 0's share is {}", p[0]);
}

#[test]
fn zoned_offsets_fall_in_their_zones_as_the_system_calls_show_them() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let w = "[[workloads]]\nname = \"zoned\"\nbackend = \"psync\"\ndistribution = \"zoned:60/10:30/20:10/70\"\nramp = [1]\nwarmup_s = 0\nintervals = 1\ninterval_s = 2\n";
    let (calls, _) = traced_run(dir.path(), w);
    assert!(calls.len() > 1_000, "{} calls", calls.len());
    let n = BLOCKS_4K_64M as f64;
    let mut zones = [0u64; 3];
    for c in &calls {
        let b = (c.offset / 4096) as f64;
        zones[if b < 0.1 * n {
            0
        } else if b < 0.3 * n {
            1
        } else {
            2
        }] += 1;
    }
    let (x, crit) = chi_square(&zones, &[0.6, 0.3, 0.1]);
    assert!(x < crit, "zones {zones:?}: chi-square {x:.1} ≥ {crit:.1}");
}

#[test]
fn think_time_caps_a_depth_one_stream_as_the_system_calls_show_it() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    // Fixed: no two reads closer than the think; at most one per (latency + 5 ms).
    let w = "[[workloads]]\nname = \"think\"\nbackend = \"psync\"\nthink_time = \"5ms\"\nramp = [1]\nwarmup_s = 0\nintervals = 1\ninterval_s = 2\n";
    let (calls, r) = traced_run(dir.path(), w);
    let gaps: Vec<f64> = calls.windows(2).map(|c| c[1].t - c[0].t).collect();
    assert!(gaps.len() > 100, "{} calls", calls.len());
    let min = gaps.iter().copied().fold(f64::MAX, f64::min);
    assert!(min >= 0.00499, "two reads {min} s apart with a think of 5 ms");
    let iops = f(&steps(&r, 0)[0]["iops"]);
    assert!(iops <= 200.0 && iops > 50.0, "{iops} IOPS at a 5 ms think");
    assert_eq!(r["workloads"][0]["shape"], "think 5ms");
    // What a read and its tracing add to a think on this machine now: the fixed think's mean
    // gap past its 5 ms (a loaded CI machine's strace added 4 ms a call: a clean run of 86379b9).
    let overhead = (gaps.iter().sum::<f64>() / gaps.len() as f64 - 0.005).max(0.0);
    // A range: every gap at least its low end, the mean near its middle.
    let dir = tempfile::tempdir().unwrap();
    let w = "[[workloads]]\nname = \"range\"\nbackend = \"psync\"\nthink_time = \"2ms-8ms\"\nramp = [1]\nwarmup_s = 0\nintervals = 1\ninterval_s = 3\n";
    let (calls, _) = traced_run(dir.path(), w);
    let gaps: Vec<f64> = calls.windows(2).map(|c| c[1].t - c[0].t).collect();
    let min = gaps.iter().copied().fold(f64::MAX, f64::min);
    let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
    assert!(min >= 0.00199, "a gap of {min} s under a think of 2 to 8 ms");
    // The mean near the range's middle: 5 ms and what a read adds, as the fixed think measured it
    // a moment before (1 ms more for the load's change between the two runs); a think drawn at
    // either end of the range would be 3 ms off.
    let most = 0.0065 + overhead + 0.001;
    assert!(
        (0.0049..most).contains(&mean),
        "mean gap {mean} s under a think of 2 to 8 ms (mean 5 ms; a read adds {overhead} s)"
    );
}

#[test]
fn bursts_issue_only_while_on_as_the_system_calls_show_them() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let w = "[[workloads]]\nname = \"bursty\"\nbackend = \"psync\"\nrate = [500]\nbursts = \"100ms/400ms\"\nwarmup_s = 0\nintervals = 1\ninterval_s = 3\n";
    let (calls, r) = traced_run(dir.path(), w);
    // 3 s at a mean of 500 IOPS: about 1500, all in six 100 ms bursts of 2500 IOPS. (At 1000 IOPS
    // — 5000 in a burst — strace on a machine the suite loads could not keep up: 2'768 of 3'000
    // went out in the on phases in one CI run, the rest just after them.)
    assert!((1_250..=1_650).contains(&calls.len()), "{} calls", calls.len());
    // Where in its 500 ms period each call went out. The schedule's clock starts with the step,
    // not with the first call the trace shows (measured from that call, one CI run found only
    // 809 of 1,500 calls in the on phases): a period's on phase starts where the longest
    // stretch with no call ends.
    let mut phase: Vec<f64> = calls.iter().map(|c| c.t.rem_euclid(0.5)).collect();
    phase.sort_unstable_by(f64::total_cmp);
    let gap_after = |i: usize| (phase[(i + 1) % phase.len()] - phase[i]).rem_euclid(0.5);
    let longest = (0..phase.len()).max_by(|&a, &b| gap_after(a).total_cmp(&gap_after(b))).unwrap();
    let start = phase[(longest + 1) % phase.len()];
    let phase: Vec<f64> = phase.iter().map(|p| (p - start).rem_euclid(0.5)).collect();
    let on = phase.iter().filter(|&&p| p < 0.105).count();
    assert!(on as f64 >= 0.85 * calls.len() as f64, "{on} of {} calls in the on phases", calls.len());
    // What "only while on" means: nothing goes out in the middle of an off phase (a call there
    // splits the quiet stretch, and the longest left is shorter than 300 ms). A burst's last
    // I/Os may go out late when strace slows every call: they follow its on phase at once.
    let late = phase.iter().copied().fold(0.0, f64::max);
    assert!(late < 0.2, "a call {late} s into a period of 100 ms on, 400 ms off");
    let s = &steps(&r, 0)[0];
    assert_eq!(s["rate"]["sustained"], true, "{s}");
    let shape = r["workloads"][0]["shape"].as_str().unwrap();
    assert!(shape.starts_with("bursts 100ms on, 400ms off"), "{shape}");
}

/// Agents run it as a local run does: an agent traced from outside draws from the same law,
/// with the sizes per direction; the other's think time caps it as the plan says.
#[test]
fn agents_draw_the_same_law_and_think_as_a_local_run_does() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let (_plain, mut hosts) = file_agents(dir.path(), &c, &["a"]);
    let traced_dir = dir.path().join("b");
    std::fs::create_dir(&traced_dir).unwrap();
    let trace = dir.path().join("agent.trace");
    let mut cmd = strace(&trace);
    cmd.arg(bin());
    // strace killed leaves its tracee running (an agent outlived every CI run): strace and the
    // agent in a process group of their own, which goes as a whole.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let traced = Group(AgentProc::spawn(cmd, None, &traced_dir, &c, &format!("{}/*", traced_dir.display()), &[]));
    let traced_addr = traced.0.addr.clone();
    hosts.push((traced_addr, traced_dir.join("t.dat")));
    let w = "[[workloads]]\nname = \"z\"\nbackend = \"psync\"\nread_pct = 50\nbs = \"4k\"\nwrite_bs = \"8k\"\ndistribution = \"zipf:0.8\"\nramp = [2]\nwarmup_s = 0\nintervals = 1\ninterval_s = 3\n\n[[workloads]]\nname = \"slow\"\nbackend = \"psync\"\nbs = \"16k\"\nthink_time = \"10ms\"\nramp = [1]\nwarmup_s = 0\nintervals = 1\ninterval_s = 2\n";
    hosts_plan(dir.path(), &hosts, w);
    let o = coordinator(dir.path(), &c, &["plan.toml", "--size", "64m", "--json", "r.json"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}\n{}", stdout(&o), stderr(&o));
    drop(traced);
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let calls = working_set(calls(&trace, "t.dat"));
    // The second workload reads 16k: the first's are its 4k reads and 8k writes.
    for c in &calls {
        assert!(matches!((c.write, c.len), (false, 4096) | (true, 8192) | (false, 16384)), "{c:?}");
    }
    let positions: Vec<u64> = calls.iter().filter(|c| c.len != 16384).map(|c| c.offset / 4096).collect();
    assert!(positions.len() > 2_000, "{} calls of the first workload on the traced agent", positions.len());
    let n = (BLOCKS_4K_64M - 2 + 1) as usize;
    let (obs, exp) = by_doubling(&positions, &zipf(n, 0.8));
    let (x, crit) = chi_square(&obs, &exp);
    assert!(x < crit, "zipf 0.8 on an agent: chi-square {x:.1} ≥ {crit:.1}; observed {obs:?}, expected {exp:?}");
    // Think time on every agent: each host at most 100 IOPS.
    let slow = &r["workloads"][1]["steps"][0];
    let per_host: Vec<f64> = slow["hosts"].as_array().unwrap().iter().map(|h| f(&h["iops"])).collect();
    assert_eq!(per_host.len(), 2, "{slow}");
    for iops in per_host {
        assert!(iops <= 100.0 && iops > 20.0, "{iops} IOPS on a host at a 10 ms think");
    }
}
