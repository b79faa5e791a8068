//! fio jobs to an iocurve plan. A job becomes a workload of one step: `numjobs` workers of
//! `iodepth` each (`--ramp` turns it into a curve). Jobs fio runs at the same time (no
//! `stonewall` or `wait_for` between them) become one workload when they differ only in their
//! files, else one concurrent step (`together`, each job its `numjobs` as its share); jobs at a
//! rate or verifying cannot run so and are refused.

use std::path::Path;

use super::{FioJob, Notice, SizeOr};
use crate::error::PlanError;
use crate::keys::PlanFile;
use crate::model::{Arrival, Backend, OnError, Pattern};
use crate::options::WorkloadKeys;
use crate::spec::{BlockSizeSpec, WorkingSetSpec};

/// The file jobs without `filename` share (fio would lay out NAME.N.0 per job and clone).
const SCRATCH: &str = "iocurve-fio.scratch";

/// One job's load before jobs that run together are merged.
struct Load<'a> {
    job: &'a FioJob,
    keys: WorkloadKeys,
    targets: Vec<String>,
    workers: u32,
}

/// The plan, and for each of its workloads the index of the job it came from (the first of
/// jobs merged).
pub fn plan(jobs: &[FioJob], source: &str, notices: &mut Vec<Notice>) -> Result<(PlanFile, Vec<usize>), PlanError> {
    let mut scratch_size: Option<u64> = None;
    let mut loads = Vec::new();
    let mut scratch_noted = false;
    for job in jobs {
        // fio opens a name as written; iocurve would expand `*`, `?` and `[` into every match
        // (`filename=/dev/sd*` would be every disk): refused, lenient or not.
        if let Some(g) = job.filenames.iter().chain(job.directory.as_ref()).find(|f| crate::is_glob(f)) {
            let option = if job.filenames.contains(g) { "filename" } else { "directory" };
            let (file, line) = job.origin(option);
            return Err(PlanError::new(
                &file,
                Some(line),
                Some(option.into()),
                format!(
                    "`{g}`: fio opens this name as written, iocurve would expand its *, ? or [ into every file that matches; rename the file, or write a plan"
                ),
            ));
        }
        let targets = targets(job);
        if job.filenames.is_empty() && !scratch_noted {
            scratch_noted = true;
            notices.push(note(job, "filename", "", &format!(
                "none given: fio would lay out a file per job and clone ({}.N.0); iocurve runs every such job on one scratch file, {}, created for the run and removed after it unless --keep",
                job.name, targets[0]
            ), false));
        }
        let (keys, file_size) = workload(job, targets.len() as u64, notices);
        if let Some(s) = file_size {
            scratch_size = Some(scratch_size.map_or(s, |m| m.max(s)));
        }
        let workers = if keys.rate.is_some() { 1 } else { job.numjobs };

        loads.push(Load { job, keys, targets, workers });
    }

    // The shared scratch file is created at the largest size any job asks for: a job that asks
    // for all of it has the whole target as its working set.
    if let Some(size) = scratch_size {
        for l in loads.iter_mut().filter(|l| l.job.filenames.is_empty()) {
            if l.keys.working_set == Some(WorkingSetSpec::Range { start: 0, end: size }) {
                l.keys.working_set = Some(WorkingSetSpec::Backend);
            }
        }
    }

    // `wait_for` names a job before this one (fio refuses other names too).
    for (i, job) in jobs.iter().enumerate() {
        if let Some(name) = &job.wait_for
            && !jobs[..i].iter().any(|j| &j.name == name)
        {
            let (file, line) = job.origin("wait_for");
            return Err(PlanError::new(
                &file,
                Some(line),
                Some("wait_for".into()),
                format!("`{name}` is no job before {}: name one of the jobs above it", job.name),
            ));
        }
    }

    let merged = at_once(loads, notices);

    // One target list for the plan.
    let mut all: Vec<String> = Vec::new();
    for l in &merged {
        for t in &l.targets {
            if !all.contains(t) {
                all.push(t.clone());
            }
        }
    }
    // Jobs on files of their own: a target group per set of files, each workload on its own
    // (`target_groups`), as fio runs each job on its files.
    let mut sets: Vec<Vec<String>> = Vec::new();
    if merged.iter().any(|l| l.targets != merged[0].targets) {
        for l in &merged {
            if !sets.contains(&l.targets) {
                sets.push(l.targets.clone());
            }
        }
    }
    let group_of = |targets: &Vec<String>| sets.iter().position(|s| s == targets).map(|k| format!("files-{}", k + 1));

    let mut workloads: Vec<WorkloadKeys> = Vec::new();
    let from: Vec<usize> =
        merged.iter().map(|l| jobs.iter().position(|j| std::ptr::eq(j, l.job)).unwrap_or(0)).collect();
    for l in merged {
        let mut k = l.keys;
        let mut name = sanitize(&l.job.name);
        let base = name.clone();
        let mut n = 2;
        while workloads.iter().any(|w| w.name.as_deref() == Some(name.as_str())) {
            name = format!("{base}-{n}");
            n += 1;
        }
        k.name = Some(name);
        if k.rate.is_none() {
            k.ramp = Some(vec![l.workers]);
        }
        if let Some(g) = group_of(&l.targets) {
            k.target_groups = Some(vec![g]);
        }
        workloads.push(k);
    }
    let stem = Path::new(source).file_stem().map_or("fio".into(), |s| s.to_string_lossy().into_owned());
    let plan = PlanFile {
        name: Some(stem),
        description: Some(format!("imported from the fio job file {source}")),
        targets: sets.is_empty().then_some(all),
        groups: (!sets.is_empty()).then(|| {
            sets.iter()
                .enumerate()
                .map(|(k, t)| crate::keys::GroupKeys {
                    name: Some(format!("files-{}", k + 1)),
                    weight: Some(1),
                    targets: t.clone(),
                })
                .collect()
        }),
        // fio lays out missing files at the job's size; so does the plan.
        scratch_size,
        workloads,
        ..Default::default()
    };
    Ok((plan, from))
}

/// The jobs as iocurve runs them: each wave of jobs fio runs at the same time (no `stonewall`
/// or `wait_for` between them) as one workload where they differ only in their files, as one
/// concurrent step where they can run so, else one after another (refused unless lenient).
fn at_once<'a>(loads: Vec<Load<'a>>, notices: &mut Vec<Notice>) -> Vec<Load<'a>> {
    // A step's name is no job's and no other step's (two waves led by jobs of one name).
    let mut taken: Vec<String> = loads.iter().map(|l| sanitize(&l.job.name)).collect();
    // Waves: the jobs fio runs at the same time.
    let mut waves: Vec<Vec<Load>> = Vec::new();
    for (i, l) in loads.into_iter().enumerate() {
        if i == 0 || l.job.stonewall || l.job.wait_for.is_some() {
            waves.push(Vec::new());
        }
        waves.last_mut().unwrap_or_else(|| unreachable!()).push(l);
    }
    let mut merged: Vec<Load> = Vec::new();
    for wave in waves {
        let same = wave.windows(2).all(|w| w[0].keys == w[1].keys);
        if wave.len() > 1 && same {
            let names: Vec<&str> = wave.iter().map(|l| l.job.name.as_str()).collect();
            let mut first = wave.into_iter();
            let mut m = first.next().unwrap_or_else(|| unreachable!());
            for l in first {
                m.workers += l.workers;
                // Each job keeps its own rate limit in fio: together they add up.
                if let (Some(r), Some(add)) = (m.keys.rate.as_mut(), &l.keys.rate) {
                    r[0] += add[0];
                    m.keys.max_outstanding =
                        Some(m.keys.max_outstanding.unwrap_or(0) + l.keys.max_outstanding.unwrap_or(0));
                }
                for t in l.targets {
                    if !m.targets.contains(&t) {
                        m.targets.push(t);
                    }
                }
            }
            let load = match &m.keys.rate {
                Some(r) => format!("at their summed rate, {}", r[0]),
                None => format!("of {} workers", m.workers),
            };
            notices.push(note(m.job, "stonewall", "", &format!(
                "fio runs jobs {} at the same time, each on its own files; iocurve runs them as one workload {load} over all their files",
                names.join(", ")
            ), false));
            merged.push(m);
        } else if wave.len() > 1
            // One way of opening the files for all (one descriptor each serves every member).
            && wave.iter().all(|l| l.keys.rate.is_none() && l.keys.verify != Some(true) && l.keys.direct == wave[0].keys.direct)
        {
            // A concurrent step: every job at once with its own workers (its share of their
            // sum, which is the step's).
            let total: u32 = wave.iter().map(|l| l.workers).sum();
            let names: Vec<&str> = wave.iter().map(|l| l.job.name.as_str()).collect();
            let base = format!("{}-together", sanitize(&wave[0].job.name));
            let mut step = base.clone();
            let mut n = 2;
            while taken.contains(&step) {
                step = format!("{base}-{n}");
                n += 1;
            }
            taken.push(step.clone());
            notices.push(note(wave[0].job, "stonewall", "", &format!(
                "fio runs jobs {} at the same time; iocurve runs them as concurrent step {step}, each job with its numjobs of the step's {total} workers, measured on its own and in total",
                names.join(", ")
            ), false));
            // Measured over the same seconds: a job that fio runs for another time (its own
            // runtime, ramp_time) runs the first job's here (refused unless lenient).
            let timing = |k: &WorkloadKeys| (k.warmup_s, k.intervals, k.interval_s);
            let first = timing(&wave[0].keys);
            for l in wave.iter().skip(1).filter(|l| timing(&l.keys) != first) {
                notices.push(note(l.job, "runtime", "", &format!(
                    "fio runs job {} for another time than job {} beside it; a concurrent step measures its members over the same seconds: give them one runtime and ramp_time, or --fio-lenient runs it for {}'s",
                    l.job.name, wave[0].job.name, wave[0].job.name
                ), true));
            }
            for mut l in wave {
                (l.keys.warmup_s, l.keys.intervals, l.keys.interval_s) = first;
                l.keys.together = Some(step.clone());
                l.keys.share = Some(l.workers as f64);
                l.workers = total;
                merged.push(l);
            }
        } else {
            for (i, l) in wave.into_iter().enumerate() {
                if i > 0 {
                    notices.push(note(l.job, "stonewall", "", &format!(
                        "fio runs job {} at the same time as the jobs before it in this file (no stonewall between them); iocurve runs jobs at a rate, verifying, or opening the files otherwise (direct=) one at a time: add stonewall to the job, or --fio-lenient runs the jobs one after another",
                        l.job.name
                    ), true));
                }
                merged.push(l);
            }
        }
    }

    merged
}

fn refuse(notices: &mut Vec<Notice>, job: &FioJob, option: &str, value: &str, why: &str) {
    notices.push(note(job, option, value, why, true));
}

fn note(job: &FioJob, option: &str, value: &str, instead: &str, refused: bool) -> Notice {
    let (file, line) = job.origin(option);
    Notice { file, line, option: option.into(), value: value.into(), instead: instead.into(), refused }
}

/// A job's files: `filename` under `directory` — fio puts the directory in front of every
/// name, even an absolute one (`directory=/mnt/t` with `filename=/dev/sdb` is the file
/// /mnt/t/dev/sdb) — or the shared scratch file.
fn targets(job: &FioJob) -> Vec<String> {
    let dir = job.directory.as_deref().map(|d| d.split(':').next().unwrap_or(d));
    let under = |f: &str| match dir {
        Some(d) => format!("{}/{}", d.trim_end_matches('/'), f.trim_start_matches('/')),
        None => f.to_string(),
    };
    if job.filenames.is_empty() { vec![under(SCRATCH)] } else { job.filenames.iter().map(|f| under(f)).collect() }
}

/// Workload names become keys and file names in reports: letters, digits, `-`, `_`, `.`.
fn sanitize(name: &str) -> String {
    let s: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '-' }).collect();
    if s.is_empty() { "fio-job".into() } else { s }
}

/// The keys of one job (no name, no ramp) and the size its scratch files need.
fn workload(job: &FioJob, files: u64, notices: &mut Vec<Notice>) -> (WorkloadKeys, Option<u64>) {
    refuse_unhonoured(job, notices);

    let mut k = WorkloadKeys::default();
    let random = job.rw.starts_with("rand");
    k.pattern = Some(if random { Pattern::Random } else { Pattern::Sequential });
    k.read_pct = Some(job.read_pct);
    k.direct = Some(job.direct);

    // Block sizes of the directions the job uses (fio mixes reads with writes, or trims with
    // writes, never all three): the first one's as bs — reads', else writes', else trims' —
    // writes' as write_bs where they differ from the reads' (fio's `bs=4k,64k`), trims' as
    // trim_bs where they differ from the writes' (`trims` below).
    let writes = job.read_pct + job.trim_pct < 100.0;
    let dirs: Vec<usize> =
        [(0, job.read_pct > 0.0), (1, writes), (2, job.trim_pct > 0.0)].iter().filter(|d| d.1).map(|d| d.0).collect();
    // fio's randtrimwrite writes each trimmed range with the trim's offset and length: its
    // writes are the trims' sizes whatever the writes' own block size says.
    let size_dir = |d: usize| if d == 1 && job.rw == "randtrimwrite" { 2 } else { d };
    let split = merged_split(&job.bs[size_dir(dirs[0])]);
    k.bs = Some(mix(&split));
    let mut sizes: Vec<u64> = split.iter().map(|s| s.0).collect();
    if dirs[..] == [0, 1] && job.bs[0] != job.bs[1] {
        let writes = merged_split(&job.bs[1]);
        k.write_bs = Some(mix(&writes));
        sizes.extend(writes.iter().map(|s| s.0));
    }
    if job.trim_pct > 0.0 {
        trims(job, &mut k, notices);
    }
    // The dedupe unit defaults to the smallest block size; a range whose top is no multiple of
    // it (bsrange=4k-10k), or sizes per direction that are not, need their common divisor.
    let gcd = sizes.iter().fold(0, |a, &b| if a == 0 { b } else { gcd(a, b) });
    if sizes.iter().any(|s| s % sizes.iter().min().copied().unwrap_or(1) != 0) {
        k.dedupe_unit = Some(gcd);
    }
    let mean_bs: f64 = split.iter().map(|s| s.0 as f64 * s.1).sum::<f64>() / split.iter().map(|s| s.1).sum::<f64>();
    skew(job, &mut k, notices);
    think(job, &mut k, notices);

    engine(job, &mut k, notices);
    if let (false, Some(_), Some(SizeOr::Bytes(_))) = (job.time_based, job.runtime_s, job.size) {
        notices.push(note(
            job,
            "time_based",
            "",
            "not set: fio ends the job after one pass over size (or at runtime, whichever comes first); iocurve measures for the whole runtime",
            false,
        ));
    }

    // How long: fio's runtime, measured in intervals (at least 3, about 10 s each).
    k.warmup_s = Some(job.ramp_s);
    match job.runtime_s.filter(|&t| t > 0.0) {
        Some(t) => {
            let n = ((t / 10.0).round() as u32).max(3);
            k.intervals = Some(n);
            k.interval_s = Some(t / n as f64);
        }
        None => notices.push(note(
            job,
            "runtime",
            "",
            "none given: fio would run until `size` bytes are done (or, time_based, until stopped); iocurve measures each step for a time, here its default (3 intervals of 10 s)",
            false,
        )),
    }

    let file_size = working_set(job, files, &mut k, notices);

    // What is written and what an error does.
    if let Some(p) = job.compress_pct {
        k.compress = Some((p / 100.0).min(0.99));
    }
    if let Some(p) = job.dedupe_pct {
        k.dedupe = Some(100.0 / (100.0 - p.min(99.0)));
    }
    k.on_error = Some(match job.continue_on_error.as_deref() {
        None | Some("none" | "0") => OnError::StopTarget,
        Some(_) => OnError::Continue,
    });

    // A rate limit per job: the plan's rate is for the whole run.
    let used = |v: &[Option<f64>; 3]| -> Option<f64> {
        let vals: Vec<f64> = dirs.iter().filter_map(|&d| v[d]).collect();
        vals.first().copied().filter(|f| vals.iter().all(|x| x == f))
    };
    let mixed_rate = dirs.len() == 2 && (job.rate_iops.is_some() || job.rate_bytes.is_some());
    let both = if job.trim_pct > 0.0 { "writes and trims" } else { "reads and writes" };
    if mixed_rate {
        let key = if job.rate_iops.is_some() { "rate_iops" } else { "rate" };
        refuse(
            notices,
            job,
            key,
            "",
            &format!(
                "fio limits {both} each to the rate (a mixed job runs at up to twice it, whatever its mix); iocurve drives one rate for the mix"
            ),
        );
    }
    let different = format!("different rates for {both}: iocurve drives one rate");
    let rate_iops = match (&job.rate_iops, &job.rate_bytes) {
        (Some((e, v)), _) => used(v).or_else(|| {
            notices.push(note(job, &e.key, "", &different, true));
            None
        }),
        (None, Some((e, v))) => used(v).map(|b| b / mean_bs).or_else(|| {
            notices.push(note(job, &e.key, "", &different, true));
            None
        }),
        (None, None) => None,
    };
    if let Some(iops) = rate_iops.filter(|&r| r > 0.0 && !mixed_rate) {
        let total = iops * f64::from(job.numjobs);
        k.rate = Some(vec![if random { total } else { total * mean_bs / 1e6 }]);
        k.arrival = Some(if job.poisson { Arrival::Poisson } else { Arrival::Uniform });
        // The depth as imported (a synchronous engine's is 1), not the file's: it bounds the
        // I/Os in flight; a rate step issues each when due (its queue depth is 1).
        k.max_outstanding = Some(job.numjobs.saturating_mul(k.queue_depth.unwrap_or(1)));
        k.queue_depth = None;
    }
    (k, file_size)
}

/// The trims of a trim mode: `trim` and `randtrim` trim only (their sizes are bs already);
/// `trimwrite` and `randtrimwrite` trim each block and then write it, which iocurve mixes at a
/// share instead (noted).
fn trims(job: &FioJob, k: &mut WorkloadKeys, notices: &mut Vec<Notice>) {
    let size = |split: &[(u64, f64)]| split.iter().map(|s| crate::format_size(s.0)).collect::<Vec<_>>().join(":");
    let sorted = |d: usize| {
        let mut s = merged_split(&job.bs[d]);
        s.sort_by_key(|s| s.0);
        s
    };
    let (w, t) = (sorted(1), sorted(2));
    // The option that set the block sizes, for the notes on them.
    let bs_option =
        ["bssplit", "bsrange", "bs"].into_iter().find(|o| job.origins.iter().any(|x| x.0 == *o)).unwrap_or("bs");
    let pct = match job.rw.as_str() {
        "randtrimwrite" => {
            if w != t {
                notices.push(note(job, bs_option, "", &format!(
                    "fio's randtrimwrite writes each trimmed range at the trim's offset and length: its writes are {} as its trims, the writes' block size ({}) goes unused, as in fio",
                    size(&t), size(&w)
                ), false));
            }
            notices.push(note(job, "rw", &job.rw, "fio trims a random block and then writes it; iocurve mixes trims and writes at trim_pct = 50 (as many of each), each at a random offset of its own, instead of writing each block right after trimming it", false));
            50.0
        }
        "trimwrite" => {
            // fio trims a block, then writes from where its writes are up to until they reach
            // the next trim's offset: as many bytes trimmed as written, in I/Os trims take
            // the share mean write / (mean write + mean trim) — half with one size.
            let mean =
                |s: &[(u64, f64)]| s.iter().map(|s| s.0 as f64 * s.1).sum::<f64>() / s.iter().map(|s| s.1).sum::<f64>();
            let pct = if w == t { 50.0 } else { (100.0 * mean(&w) / (mean(&w) + mean(&t)) * 100.0).round() / 100.0 };
            if w != t {
                k.trim_bs = Some(mix(&merged_split(&job.bs[2])));
                // With the same sizes (the same mix: fio seeds both draws alike) each write
                // follows its trim; trims whose sizes are all whole multiples of one write size
                // are trimmed, then written in pieces. Anything else falls out of step in fio
                // (measured, fio 3.33: bs=64k,64k,4k trims twice, then only writes; so do writes
                // of a mix).
                let in_step = w.len() == 1 && t.iter().all(|t| t.0 % w[0].0 == 0);
                if in_step {
                    let pieces = match t[..] {
                        [(one, _)] => format!(
                            "each {} block and then writes it in {} writes of {}",
                            size(&t),
                            one / w[0].0,
                            size(&w)
                        ),
                        _ => format!("each block ({}) and then writes it in writes of {}", size(&t), size(&w)),
                    };
                    notices.push(note(
                        job,
                        bs_option,
                        "",
                        &format!("fio trims {pieces}: iocurve's trim_pct = {pct} trims as many bytes as it writes"),
                        false,
                    ));
                } else {
                    refuse(
                        notices,
                        job,
                        bs_option,
                        "",
                        &format!(
                            "rw=trimwrite with trims of {} and writes of {}: fio trims a block, then writes up to the next trim's offset, and stops trimming once trims and writes fall out of step (trims smaller than the writes or no whole multiple of them, or writes of a mix); give trims and writes the same size, or trims whole multiples of one write size (bs=4k,4k,64k)",
                            size(&t),
                            size(&w)
                        ),
                    );
                }
            }
            notices.push(note(job, "rw", &job.rw, &format!(
                "fio trims each block and then writes it, in order; iocurve mixes trims and writes at trim_pct = {pct} (as many bytes trimmed as written) instead of trimming each block right before writing it"
            ), false));
            pct
        }
        _ => 100.0,
    };
    k.trim_pct = Some(pct);
}

/// Notes on the options of `job` that iocurve does not honour: refused unless lenient.
fn refuse_unhonoured(job: &FioJob, notices: &mut Vec<Notice>) {
    if let Some((e, m)) = &job.modifier {
        notices.push(Notice {
            file: e.file.clone(),
            line: e.line,
            option: e.key.clone(),
            value: format!("{}:{m}", job.rw),
            instead: "iocurve picks a new offset for every random I/O and never skips ahead in a sequential one".into(),
            refused: true,
        });
    }
    if let Some(v) = job.verify.as_deref().filter(|v| !matches!(*v, "0" | "null" | "none")) {
        refuse(
            notices,
            job,
            "verify",
            v,
            "iocurve's verify is its own (block headers against the last acknowledged write, not fio's checksums): set verify = true in the plan instead",
        );
    }
    // fio's trim_percentage & co. trim blocks that a verifying job has written (fio trims only
    // with verify, trim_percentage and trim_backlog all set, in a job that writes): a load
    // behind its verify, not a mix. Translated to trim_pct it would be another load; where
    // fio trims, refused with the way out (the plan's trim_pct), else ignored as fio does.
    let verifying = job.verify.as_deref().is_some_and(|v| !matches!(v, "0" | "null" | "none"));
    let set = |name: &str| job.verify_trim.iter().any(|o| o.0 == name && o.1 > 0);
    let fio_trims = verifying && job.read_pct + job.trim_pct < 100.0 && set("trim_percentage") && set("trim_backlog");
    for (option, v) in job.verify_trim.iter().filter(|o| o.1 > 0) {
        if fio_trims {
            refuse(
                notices,
                job,
                option,
                &v.to_string(),
                "fio trims a share of the blocks it has written, behind its verify; iocurve does not trim behind its verify: it mixes trims into the load with the plan's trim_pct (fio's rw=randtrimwrite) — drop the trim_* options",
            );
        } else {
            notices.push(note(job, option, &v.to_string(), "fio trims written blocks only while verifying, with verify, trim_percentage and trim_backlog all set: this job trims nothing, nor does iocurve (trims in the load are the plan's trim_pct, fio's rw=randtrim)", false));
        }
    }
    if let Some(p) = job.percentage_random.filter(|&p| p != 100 && job.rw.starts_with("rand")) {
        refuse(notices, job, "percentage_random", &p.to_string(), "iocurve's random workloads are random throughout");
    }
    if job.nrfiles > 1 {
        refuse(
            notices,
            job,
            "nrfiles",
            &job.nrfiles.to_string(),
            "iocurve runs on the files named by filename; name them",
        );
    }
    if job.directory.as_deref().is_some_and(|d| d.contains(':')) {
        refuse(
            notices,
            job,
            "directory",
            job.directory.as_deref().unwrap_or(""),
            "iocurve uses one directory; the first is taken",
        );
    }
}

/// The engine: iocurve's back-end of the same name where there is one, else the nearest, and
/// the queue depth it takes.
fn engine(job: &FioJob, k: &mut WorkloadKeys, notices: &mut Vec<Notice>) {
    // The engine: iocurve's back-end of the same name where there is one, else the nearest.
    let (backend, nearest) = match Backend::of_fio(&job.ioengine) {
        // Linux's native AIO is asynchronous only with O_DIRECT: buffered, io_submit blocks
        // and the job does one I/O at a time — synchronous I/O, as psync does it.
        Some(b) if b.facts().direct_only && !job.direct => {
            notices.push(note(
                job,
                "ioengine",
                &job.ioengine,
                "without direct=1, Linux's AIO blocks in io_submit (one I/O at a time): iocurve's psync back-end at queue depth 1 does the same",
                false,
            ));
            (Backend::Psync, false)
        }
        Some(b) => (b, job.ioengine != b.name()),
        None if job.ioengine == "posixaio" => (Backend::IoUring, true),
        None if job.ioengine == "mmap" => (Backend::Psync, true),
        None => {
            refuse(
                notices,
                job,
                "ioengine",
                &job.ioengine,
                "not an engine for block storage that iocurve can stand in for; io_uring is used",
            );
            (Backend::IoUring, false)
        }
    };
    if nearest {
        notices.push(note(
            job,
            "ioengine",
            &job.ioengine,
            &format!("iocurve's nearest back-end, {}, is used", backend.name()),
            false,
        ));
    }
    let depth_one = backend.facts().threads == crate::ThreadModel::PerIo;
    // fio runs a synchronous engine at depth 1 whatever iodepth says; buffered libaio keeps its
    // depth in fio (the note above says why psync at 1 stands for it).
    let synchronous = Backend::of_fio(&job.ioengine).is_none_or(|b| b.facts().threads == crate::ThreadModel::PerIo);
    k.backend = Some(backend);
    k.queue_depth = Some(if depth_one && job.iodepth > 1 && !synchronous {
        1
    } else if depth_one && job.iodepth > 1 {
        notices.push(note(
            job,
            "iodepth",
            &job.iodepth.to_string(),
            &format!("fio caps the queue depth of the synchronous engine {} at 1; so does the import", job.ioengine),
            false,
        ));
        1
    } else {
        job.iodepth
    });

    if !job.direct && job.read_pct > 0.0 && backend.touches_storage() {
        notices.push(note(
            job,
            "direct",
            "",
            "buffered I/O (fio's default): fio drops the file's cached pages before the job (invalidate=1), iocurve does not, and the scratch file it writes first stays cached — reads may measure the page cache, not the storage: add direct=1",
            false,
        ));
    }
}

/// Where: fio's size is the job's total over its files, from offset. Returns the size the
/// scratch files need.
fn working_set(job: &FioJob, files: u64, k: &mut WorkloadKeys, notices: &mut Vec<Notice>) -> Option<u64> {
    // Where: fio's size is the job's total over its files, from offset.
    let mut file_size = job.filesize;
    let offset = match job.offset {
        None => 0,
        Some(SizeOr::Bytes(b)) => b,
        Some(SizeOr::Percent(p)) => {
            refuse(
                notices,
                job,
                "offset",
                &format!("{p}%"),
                "iocurve needs byte offsets (the file sizes are known only on the hosts); give offset in bytes",
            );
            0
        }
    };
    k.working_set = Some(match job.size {
        Some(SizeOr::Bytes(b)) => {
            let per = b / files.max(1);
            file_size = Some(file_size.unwrap_or(0).max(offset + per));
            WorkingSetSpec::Range { start: offset, end: offset + per }
        }
        Some(SizeOr::Percent(p)) if p >= 100.0 && offset == 0 => WorkingSetSpec::Backend,
        Some(SizeOr::Percent(p)) => {
            refuse(
                notices,
                job,
                "size",
                &format!("{p}%"),
                "iocurve needs byte sizes (the file sizes are known only on the hosts); give size in bytes",
            );
            WorkingSetSpec::Backend
        }
        None if offset > 0 => {
            refuse(
                notices,
                job,
                "offset",
                &offset.to_string(),
                "without size, iocurve cannot end the working set at the file's end: give size too",
            );
            WorkingSetSpec::Backend
        }
        None => WorkingSetSpec::Backend,
    });
    file_size
}

/// fio takes a size twice in a split (`bssplit=8k/50:8k/50`); the plan's mix names each once.
fn merged_split(sizes: &[(u64, f64)]) -> Vec<(u64, f64)> {
    let mut split: Vec<(u64, f64)> = Vec::new();
    for &(size, share) in sizes {
        match split.iter_mut().find(|s| s.0 == size) {
            Some(s) => s.1 += share,
            None => split.push((size, share)),
        }
    }
    split
}

/// A split as the plan's block size: one size, or a mix weighted by the shares.
fn mix(split: &[(u64, f64)]) -> BlockSizeSpec {
    if split.len() == 1 {
        BlockSizeSpec::One(split[0].0)
    } else if split.windows(2).all(|w| w[0].1 == w[1].1) {
        BlockSizeSpec::Mix(split.iter().map(|s| (s.0, 1)).collect())
    } else {
        BlockSizeSpec::Mix(split.iter().map(|s| (s.0, (s.1 * 100.0).round() as u32)).collect())
    }
}

/// fio's `random_distribution` with fio's meaning: zipf, pareto and normal hashed over the file
/// (`hot_layout = "scattered"`), zoned in order; fio's normal made of its own parts.
fn skew(job: &FioJob, k: &mut WorkloadKeys, notices: &mut Vec<Notice>) {
    let Some(v) = job.random_distribution.as_deref() else { return };
    if !job.rw.starts_with("rand") {
        if v.trim() != "random" {
            notices.push(note(job, "random_distribution", v, "the job is sequential: ignored, as fio does", false));
        }
        return;
    }
    let text = v.trim().replacen("zoned_abs=", "zoned_abs:", 1);
    // One set per direction (`zoned:…,…`): iocurve has one law per workload.
    let mut dirs = text.split(',').map(str::trim).filter(|d| !d.is_empty());
    let first = dirs.next().unwrap_or("random").to_string();
    // The sets after the first come without the law's name (`zoned:60/10:40/90,50/50:50/50`).
    let zones = first.split_once(':').map_or("", |(_, z)| z).to_string();
    if dirs.any(|d| d != first && d != zones) {
        refuse(
            notices,
            job,
            "random_distribution",
            v,
            "different zones for reads and writes: iocurve draws every I/O of a workload from one law; give one set of zones",
        );
        return;
    }
    // fio's defaults where the value is left out: zipf 1.1, pareto 0.2, normal 0.
    let first = match first.as_str() {
        "zipf" => "zipf:1.1".to_string(),
        "pareto" => "pareto:0.2".to_string(),
        "normal" => "normal:0".to_string(),
        _ => first,
    };
    let parsed = match first.strip_prefix("normal:") {
        Some(rest) => fio_normal(rest),
        None => first.parse::<iocurve_access::Distribution>(),
    };
    let d = match parsed {
        Ok(d) => d,
        Err(why) => {
            refuse(notices, job, "random_distribution", v, &why);
            return;
        }
    };
    if d.is_uniform() {
        return;
    }
    use iocurve_access::Law;
    let hashed = matches!(d.law, Law::Zipf { .. } | Law::Pareto { .. } | Law::Normal { .. });
    if hashed {
        k.hot_layout = Some(crate::HotLayout::Scattered);
    }
    let mut what = match &d.law {
        Law::Zipf { .. } => "zipf drawn exactly (fio's generator approximates the law: axboe/fio#1991), its blocks scattered over the working set as fio's hash does".to_string(),
        Law::Normal { sigma_pct } => format!(
            "fio's normal (the mean of 12 uniform draws plus a uniform deviation of the given width) is a normal law with σ = {sigma_pct:.3} % of the working set, scattered as fio's hash does"
        ),
        _ if hashed => "scattered over the working set as fio's hash does".to_string(),
        _ => "the zones in order from the start of the working set, as fio lays them".to_string(),
    };
    if job.numjobs > 1 {
        what.push_str(&format!(
            "; fio seeds each of its {} jobs' hot region apart, iocurve gives the whole array one",
            job.numjobs
        ));
    }
    notices.push(note(job, "random_distribution", v, &format!("distribution = \"{d}\": {what}"), false));
    k.distribution = Some(crate::Distribution(d));
}

/// fio's `normal:DEV[:CENTRE]`: the mean of 12 uniform draws over the range (σ = 1/12 of it)
/// plus a uniform deviation DEV % wide (σ = DEV/√12 %; fio caps the width at half the range), a
/// normal law with σ = √(1/144 + (min(DEV, 50)/100)²/12) of the range.
fn fio_normal(rest: &str) -> Result<iocurve_access::Distribution, String> {
    let mut parts = rest.split(':');
    let dev: f64 = parts
        .next()
        .and_then(|d| d.trim().parse().ok())
        .filter(|d: &f64| (0.0..=100.0).contains(d))
        .ok_or_else(|| {
            format!(
                "`normal:{rest}`: fio's normal takes a deviation of 0 to 100 (e.g. normal:5); fix the value in the job"
            )
        })?;
    let sigma_pct = 100.0 * (1.0 / 144.0 + (dev.min(50.0) / 100.0).powi(2) / 12.0).sqrt();
    let centre = match parts.next() {
        None => None,
        Some(c) => Some(
            c.trim()
                .parse::<f64>()
                .ok()
                .filter(|c| (0.0..=1.0).contains(c))
                .ok_or_else(|| format!("`normal:{rest}`: the centre is a share of the range, 0 to 1"))?,
        ),
    };
    Ok(iocurve_access::Distribution { law: iocurve_access::Law::Normal { sigma_pct }, centre })
}

/// fio's `thinktime` (µs), `thinktime_blocks` and `thinktime_spin`.
fn think(job: &FioJob, k: &mut WorkloadKeys, notices: &mut Vec<Notice>) {
    let Some(t) = job.thinktime_ns.filter(|&t| t > 0) else {
        for (option, set) in [
            ("thinktime_blocks", job.thinktime_blocks.is_some()),
            ("thinktime_spin", job.thinktime_spin_ns.is_some_and(|s| s > 0)),
        ] {
            if set {
                notices.push(note(job, option, "", "without thinktime there is no think: ignored, as fio does", false));
            }
        }
        return;
    };
    if job.rate_iops.is_some() || job.rate_bytes.is_some() {
        refuse(
            notices,
            job,
            "thinktime",
            "",
            "a think time inside a rate limit: iocurve issues a rate step's I/Os when they are due; keep one of the two",
        );
        return;
    }
    k.think_time = Some(crate::ThinkTime::Fixed(t));
    if let Some(b) = job.thinktime_blocks {
        k.think_blocks = Some(b.clamp(1, u32::MAX as u64) as u32);
    }
    if let Some(s) = job.thinktime_spin_ns.filter(|&s| s > 0) {
        if s > t {
            notices.push(note(
                job,
                "thinktime_spin",
                "",
                "longer than thinktime: the whole think is spun, as fio does",
                false,
            ));
        }
        k.think_spin = Some(crate::pace::format_duration_ns(s.min(t)));
    }
    if job.iodepth > 1 {
        notices.push(note(
            job,
            "thinktime",
            "",
            "with iodepth above 1, a worker issues thinktime_blocks I/Os (iodepth at a time at most), lets them finish and thinks: exactly thinktime_blocks I/Os per think, as fio does",
            false,
        ));
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}
