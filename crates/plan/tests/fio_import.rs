//! The fio import's own decisions, without fio: what a job becomes in the plan, what is merged,
//! what is refused and how it is reported (file, line, option), and that the printed plan is
//! the plan that runs.

use std::path::{Path, PathBuf};

use iocurve_plan::fio::{self, FioImport};
use iocurve_plan::{Backend, OnError, Overrides, Pattern, PlanError, WorkingSet, parse_str};

fn corpus(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fio-corpus").join(name)
}

fn import(path: &Path, lenient: bool) -> Result<FioImport, PlanError> {
    fio::import_env(path, lenient, &|k: &str| (k == "IOC_DIR").then(|| "/data".to_string()))
}

fn text(t: &str, lenient: bool) -> Result<FioImport, PlanError> {
    fio::import_str(t, "job.fio", lenient)
}

#[test]
fn a_classic_job_becomes_one_step_of_its_numjobs_and_iodepth() {
    let i = import(&corpus("basic.fio"), false).unwrap();
    let plan = i.resolve("basic.fio", &Overrides::default()).unwrap();
    assert_eq!(plan.groups[0].targets, ["/data/iocurve-fio.scratch"]);
    assert_eq!(i.plan.scratch_size, Some(4 << 20));
    let w = &plan.workloads[0];
    assert_eq!(w.name, "randread");
    assert_eq!((w.read_pct, w.pattern, w.queue_depth), (100.0, Pattern::Random, 16));
    assert_eq!(w.ramp, [2], "numjobs = 2 workers");
    assert_eq!(w.bs[0].bytes, 4096);
    assert!(w.direct);
    assert_eq!(w.backend, Backend::Libaio, "libaio → libaio");
    assert_eq!(w.working_set, WorkingSet::Backend, "the whole scratch file, made at size");
    assert_eq!((w.warmup_s, w.intervals), (0.0, 3));
    assert!((w.interval_s * 3.0 - 1.0).abs() < 1e-12, "runtime=1 in 3 intervals");
    assert_eq!(w.on_error, OnError::StopTarget, "fio ends a job at its first error");
    // libaio is iocurve's own libaio (issue 38): nothing to note.
    assert!(i.warning().is_none_or(|w| !w.contains("ioengine")), "{:?}", i.warning());
    // An engine iocurve has no back-end of its own for is noted as mapped, once for the
    // [global] line that sets it.
    let text = std::fs::read_to_string(corpus("basic.fio")).unwrap().replace("ioengine=libaio", "ioengine=posixaio");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("basic.fio"), text).unwrap();
    let w = import(&dir.path().join("basic.fio"), false).unwrap().warning().unwrap();
    assert_eq!(w.matches("ioengine=posixaio").count(), 1, "{w}");
    assert!(w.contains("basic.fio:3: ioengine=posixaio: iocurve's nearest back-end, io_uring"), "{w}");
}

#[test]
fn jobs_fio_runs_together_on_different_devices_become_one_workload() {
    let i = import(&corpus("concurrent.fio"), false).unwrap();
    let plan = i.resolve("concurrent.fio", &Overrides::default()).unwrap();
    assert_eq!(plan.workloads.len(), 1);
    assert_eq!(plan.workloads[0].ramp, [2]);
    assert_eq!(plan.groups[0].targets, ["/data/a.dat", "/data/b.dat"]);
    assert!(i.warning().unwrap().contains("as one workload of 2 workers"), "{:?}", i.warning());
}

/// Issue 41: jobs fio runs at the same time that differ become one concurrent step, each job
/// with its numjobs as its share; one at a rate cannot, and is refused unless lenient.
#[test]
fn jobs_fio_runs_together_that_differ_become_a_concurrent_step() {
    let t = "[global]\nfilename=/data/x\nsize=1m\n[reader]\nrw=randread\nnumjobs=3\n[writer]\nrw=randwrite\n";
    let i = text(t, false).unwrap();
    assert!(i.warning().unwrap().contains("as concurrent step reader-together"), "{:?}", i.warning());
    let plan = i.resolve("job.fio", &Overrides::default()).unwrap();
    let units = plan.units();
    assert_eq!(units.len(), 1, "one step of both");
    let (step, members) = &units[0];
    assert_eq!(step.name, "reader-together");
    let names: Vec<&str> = members.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names, ["reader", "writer"]);
    assert_eq!(step.ramp, [4], "their workers together");
    assert_eq!(iocurve_plan::Workload::member_workers(members, 4), [3, 1], "each its numjobs");
    // A job at a rate runs alone: refused where fio runs it with others.
    let rated = t.replace("rw=randwrite\n", "rw=randwrite\nrate_iops=100\n");
    let e = text(&rated, false).unwrap_err();
    assert!(e.message.contains("at the same time") && e.message.contains("--fio-lenient"), "{e}");
    let plan = text(&rated, true).unwrap().resolve("job.fio", &Overrides::default()).unwrap();
    let names: Vec<&str> = plan.workloads.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names, ["reader", "writer"], "one after another");
    // With stonewall they are one after another in fio too: nothing to refuse.
    let t = t.replace("[writer]\n", "[writer]\nstonewall\n");
    let w = text(&t, false).unwrap().warning().unwrap();
    assert!(!w.contains("at the same time"), "{w}");
}

#[test]
fn refusals_are_listed_in_one_block_with_file_line_and_option() {
    let e = import(&corpus("lenient.fio"), false).unwrap_err();
    let m = e.to_string();
    for want in ["lenient.fio:7: rw=randread:8", "lenient.fio:12: rw=write:4k"] {
        assert!(m.contains(want), "{want} in {m}");
    }
    // A think time is imported now (issue 39), not refused.
    assert!(!m.contains("thinktime"), "{m}");
    assert!(m.contains("--fio-lenient runs without them"), "{m}");
    let i = import(&corpus("lenient.fio"), true).unwrap();
    let w = i.warning().unwrap();
    assert!(w.contains("thread: iocurve always drives I/O from threads"), "{w}");
    let plan = i.resolve("lenient.fio", &Overrides::default()).unwrap();
    let holes = &plan.workloads[1];
    assert!(holes.direct, "buffered=0 is O_DIRECT");
    assert_eq!((holes.warmup_s, holes.intervals), (0.5, 3));
    let think = &plan.workloads[2];
    assert_eq!((think.backend, think.queue_depth, think.ramp.as_slice()), (Backend::Null, 2, &[3][..]));
    assert_eq!(think.think.map(|t| (t.time, t.blocks)), Some((iocurve_plan::ThinkTime::Fixed(100_000), 1)));
    assert!(!plan.workloads[0].direct, "fio's default is buffered I/O");
}

#[test]
fn sizes_offsets_and_files() {
    // Jobs on different files: a target group per set of files, each workload on its own (issue
    // 41; they were refused, or all ran on all files).
    let i = import(&corpus("offsets.fio"), false).unwrap();
    let plan = i.resolve("offsets.fio", &Overrides::default()).unwrap();
    let files: Vec<&[String]> = plan.groups.iter().map(|g| g.targets.as_slice()).collect();
    assert!(files.len() >= 2, "{files:?}");
    for w in &plan.workloads {
        assert_eq!(w.target_groups.len(), 1, "{}", w.name);
    }
    let first = plan.groups.iter().find(|g| g.name == plan.workloads[0].target_groups[0]).unwrap();
    assert!(
        first.targets.iter().all(|t| ["/data/offsets.dat", "/data/one.dat", "/data/t:wo.dat"].contains(&t.as_str()))
    );
    // `--target` replaces them all: every workload on the given target.
    let o = Overrides { targets: vec!["/dev/x".into()], ..Default::default() };
    assert!(i.resolve("offsets.fio", &o).unwrap().workloads.iter().all(|w| w.target_groups.is_empty()));
    assert_eq!(plan.workloads[0].working_set, WorkingSet::Range { start: 2 << 20, end: 3 << 20 });
    // fio splits size over the job's files.
    assert_eq!(plan.workloads[1].working_set, WorkingSet::Range { start: 0, end: 1 << 20 });
    assert_eq!(i.plan.scratch_size, Some(8 << 20), "filesize");
    // Percentages need the file's size, known only where the file is.
    let e = text("[j]\nfilename=/data/x\nsize=50%\n", false).unwrap_err();
    assert!(e.message.contains("give size in bytes"), "{e}");
    let i = text("[j]\nfilename=/data/x\nsize=100%\n", false).unwrap();
    assert_eq!(i.plan.workloads[0].working_set, Some(iocurve_plan::WorkingSetSpec::Backend));
}

#[test]
fn wait_for_and_stonewall_order_the_jobs() {
    let i = import(&corpus("include.fio"), false).unwrap();
    let plan = i.resolve("include.fio", &Overrides::default()).unwrap();
    let w: Vec<(&str, u64, f64)> =
        plan.workloads.iter().map(|w| (w.name.as_str(), w.bs[0].bytes, w.read_pct)).collect();
    assert_eq!(w, [("first", 64 << 10, 0.0), ("second", 128 << 10, 100.0), ("third", 16 << 10, 100.0)]);
    assert_eq!(plan.workloads[0].backend, Backend::Psync, "from the included file");
}

#[test]
fn mistakes_are_clear_errors() {
    let cases: &[(&str, usize, &str)] = &[
        ("[j]\nrw=randomread\n", 2, "not a fio rw mode"),
        ("[j]\ndirect\n", 2, "needs a value"),
        ("[j]\nbs=1.5k\n", 2, "no fractions"),
        ("[j]\nbs=4kk\n", 2, "unknown unit"),
        ("[j]\nnumjobs=0\n", 2, "from 1 to"),
        ("[j]\nrwmixread=150\nrw=randrw\n", 2, "percentage"),
        ("[j]\nbssplit=4k/60:8k/60\n", 2, "more than 100"),
        ("[j]\nkb_base=1023\n", 2, "1024 or 1000"),
        ("[global]\nbs=4k\n", 0, "no job section"),
    ];
    for &(t, line, want) in cases {
        let e = text(t, true).unwrap_err();
        assert!(e.to_string().contains(want), "{t:?}: {e}");
        if line > 0 {
            assert_eq!(e.line, Some(line), "{t:?}: {e}");
        }
    }
    // An option iocurve does not know is refused, with a guess.
    let e = text("[j]\niodepht=4\n", false).unwrap_err();
    assert!(e.message.contains("iodepht=4") && e.message.contains("did you mean `iodepth`"), "{e}");
}

#[test]
fn per_job_rates_become_the_runs_rate() {
    let i =
        text("[j]\nfilename=/data/x\nrw=randread\nrate_iops=500\nnumjobs=4\niodepth=2\nrate_process=poisson\n", false)
            .unwrap();
    let plan = i.resolve("job.fio", &Overrides::default()).unwrap();
    let w = &plan.workloads[0];
    assert_eq!(w.rate, [2000.0], "500 IOPS for each of 4 jobs");
    assert_eq!(w.max_outstanding, 4, "4 jobs of fio's default psync: one I/O each, iodepth=2 or not");
    assert_eq!(w.arrival, iocurve_plan::Arrival::Poisson);
    // A sequential job's rate is MB/s: 10 MB/s per job at 1 MiB... from bytes per second.
    let i = text("[j]\nfilename=/data/x\nrw=write\nbs=1m\nrate=10m\nnumjobs=2\n", false).unwrap();
    let plan = i.resolve("job.fio", &Overrides::default()).unwrap();
    assert!((plan.workloads[0].rate[0] - 2.0 * 10.0 * 1048576.0 / 1e6).abs() < 1e-9, "{:?}", plan.workloads[0].rate);
}

#[test]
fn the_printed_plan_is_the_plan_that_runs() {
    for name in [
        "basic.fio",
        "concurrent.fio",
        "include.fio",
        "lenient.fio",
        "mixed.fio",
        "offsets.fio",
        "split.fio",
        "trim.fio",
    ] {
        let i = import(&corpus(name), true).unwrap();
        let plan = i.resolve(name, &Overrides::default()).unwrap();
        let toml = i.to_toml(name);
        let again = parse_str(&toml, "printed.toml", &Overrides::default()).unwrap_or_else(|e| panic!("{e}\n{toml}"));
        // The whole plan (targets, scratch size, workloads), but where it was read from.
        assert_eq!(iocurve_plan::Plan { source: plan.source.clone(), ..again }, plan, "{name}");
    }
    // --ramp (an override) turns the one step into a curve.
    let i = import(&corpus("basic.fio"), false).unwrap();
    let keys = iocurve_plan::WorkloadKeys { ramp: Some(vec![1, 2, 4, 8]), ..Default::default() };
    let plan = i.resolve("basic.fio", &Overrides { keys, ..Default::default() }).unwrap();
    assert_eq!(plan.workloads[0].ramp, [1, 2, 4, 8]);
}

#[test]
fn fio_files_are_told_from_toml_plans() {
    assert!(fio::looks_like_fio(Path::new("x.fio"), ""));
    assert!(fio::looks_like_fio(Path::new("job"), "; c\n[global]\nbs=4k\n"));
    assert!(fio::looks_like_fio(Path::new("job.ini"), "[randread]\nrw=randread\n"));
    assert!(!fio::looks_like_fio(Path::new("plan.toml"), "name = \"x\"\n[[workloads]]\n"));
    assert!(!fio::looks_like_fio(Path::new("plan"), "[defaults]\nbs = \"4k\"\n"));
    assert!(!fio::looks_like_fio(Path::new("plan"), "[[workloads]]\nname = \"a\"\n"));
}

/// Found by the fuzz target: an unknown key with a control character, kept in the printed
/// plan's comment block, made the plan unparsable.
#[test]
fn control_characters_in_an_option_do_not_break_the_printed_plan() {
    let t = "[j]\nfilename=/data/x\nincl\u{2}ude=1\nruntime=1\n";
    let i = text(t, true).unwrap();
    let toml = i.to_toml("job.fio");
    let plan = parse_str(&toml, "printed.toml", &Overrides::default()).unwrap_or_else(|e| panic!("{e}\n{toml}"));
    assert_eq!(plan.workloads[0].name, "j");
    assert!(i.warning().unwrap().contains("incl\u{fffd}ude=1"), "{:?}", i.warning());
}

/// Found by the fuzz target (the CI run of stop 29): fio takes a block size twice in a split
/// (`bssplit=8k/50:8k/50`), the plan's mix is a map that names each size once. The import
/// kept both entries, its printed plan one: the plan that ran was not the plan printed.
#[test]
fn a_block_size_named_twice_in_a_split_is_one_size_with_both_shares() {
    let t = "[j]\nfilename=/data/x\nruntime=1\nrw=randrw\nbssplit=8k/30:4k/40:8k/30\n";
    let i = text(t, true).unwrap();
    let plan = i.resolve("job.fio", &Overrides::default()).unwrap();
    let bs: Vec<(u64, u32)> = plan.workloads[0].bs.iter().map(|b| (b.bytes, b.weight)).collect();
    assert_eq!(bs, [(8192, 6000), (4096, 4000)], "8k 60 %, 4k 40 %");
    let toml = i.to_toml("job.fio");
    let again = parse_str(&toml, "printed.toml", &Overrides::default()).unwrap_or_else(|e| panic!("{e}\n{toml}"));
    assert_eq!(again.workloads, plan.workloads, "{toml}");
    // The same in a plan: two names of one size are that size once, weights added.
    let p = parse_str(
        "targets = [\"/data/x\"]\n[[workloads]]\nname = \"w\"\nbs = { \"4k\" = 70, \"4096\" = 30, \"8k\" = 1 }\n",
        "plan.toml",
        &Overrides::default(),
    )
    .unwrap();
    let bs: Vec<(u64, u32)> = p.workloads[0].bs.iter().map(|b| (b.bytes, b.weight)).collect();
    assert_eq!(bs, [(4096, 100), (8192, 1)]);
    let e = parse_str(
        "targets = [\"/data/x\"]\n[[workloads]]\nname = \"w\"\nbs = { \"4k\" = 4294967295, \"4096\" = 1 }\n",
        "plan.toml",
        &Overrides::default(),
    )
    .unwrap_err();
    assert!(e.message.contains("add up to more than 4294967295"), "{e}");
}

/// The outsider review of the import (helper report, issue 19): each finding, as fio 3.33 does it.
mod review {
    use super::*;

    fn plan_of(t: &str, lenient: bool) -> iocurve_plan::Plan {
        text(t, lenient).unwrap().resolve("job.fio", &Overrides::default()).unwrap()
    }

    #[test]
    fn buffered_jobs_are_warned_and_buffered_libaio_is_synchronous() {
        let i = text("[j]\nfilename=/data/x\nrw=randread\nioengine=libaio\niodepth=32\nruntime=1\n", false).unwrap();
        let w = i.warning().unwrap();
        assert!(w.contains("may measure the page cache") && w.contains("add direct=1"), "{w}");
        assert!(w.contains("without direct=1, Linux's AIO blocks in io_submit"), "{w}");
        // fio runs buffered libaio at its iodepth (blocking in io_submit): no "fio caps" claim.
        assert!(!w.contains("caps the queue depth"), "{w}");
        let p = i.resolve("job.fio", &Overrides::default()).unwrap();
        assert_eq!((p.workloads[0].backend, p.workloads[0].queue_depth), (Backend::Psync, 1));
        // With O_DIRECT, libaio is asynchronous: libaio at the job's depth, no cache note.
        let i = text("[j]\nfilename=/data/x\nrw=randread\nioengine=libaio\niodepth=32\ndirect=1\nruntime=1\n", false)
            .unwrap();
        assert!(i.warning().is_none_or(|w| !w.contains("page cache")));
        let p = i.resolve("job.fio", &Overrides::default()).unwrap();
        assert_eq!((p.workloads[0].backend, p.workloads[0].queue_depth), (Backend::Libaio, 32));
    }

    #[test]
    fn rates_of_mixed_jobs_are_refused_and_rates_of_merged_jobs_add_up() {
        let e = text("[j]\nfilename=/data/x\nrw=randrw\nrate_iops=1000\n", false).unwrap_err();
        assert!(e.message.contains("rate_iops") && e.message.contains("reads and writes each"), "{e}");
        assert!(plan_of("[j]\nfilename=/data/x\nrw=randrw\nrate_iops=1000\n", true).workloads[0].rate.is_empty());
        let p = plan_of(
            "[global]\nrw=randread\nrate_iops=1000\nruntime=2\ntime_based\n[a]\nfilename=/data/a\n[b]\nfilename=/data/b\n",
            false,
        );
        assert_eq!((p.workloads[0].rate.as_slice(), p.workloads[0].max_outstanding), (&[2000.0][..], 2));
    }

    #[test]
    fn sizes_are_read_under_the_kb_base_in_force_where_they_are_written() {
        let p = plan_of("[global]\nfilename=/data/x\nsize=1g\nbs=512k\n[j1]\nkb_base=1000\nrw=read\n", false);
        assert_eq!(p.workloads[0].bs[0].bytes, 512 << 10, "fio: bs=(R) 524kB");
        assert_eq!(p.workloads[0].working_set, WorkingSet::Range { start: 0, end: 1 << 30 });
    }

    #[test]
    fn an_empty_slot_keeps_the_value_set_before_and_an_empty_value_is_refused() {
        let i = text("[global]\nfilename=/data/x\nbs=64k\n[j]\nrw=write\nbs=8k,\n", false).unwrap();
        assert_eq!((i.jobs[0].bs_range[0], i.jobs[0].bs_range[1]), ((8192, 8192), (65536, 65536)));
        let i = text("[j]\nfilename=/data/x\nbs=64k\nbs=8k,,16k\n", false).unwrap();
        assert_eq!((i.jobs[0].bs_range[0], i.jobs[0].bs_range[1]), ((8192, 8192), (65536, 65536)));
        for t in ["[j]\nbs=\n", "[j]\nbs=,\n", "[j]\nbsrange=\n", "[j]\nfilename=\n"] {
            let e = text(t, true).unwrap_err();
            assert!(e.message.contains("has no value") && e.line == Some(2), "{t:?}: {e}");
        }
    }

    #[test]
    fn the_directory_goes_in_front_of_every_filename() {
        let p = plan_of("[j]\ndirectory=/mnt/t\nfilename=/dev/sdb\nsize=1m\n", false);
        assert_eq!(p.groups[0].targets, ["/mnt/t/dev/sdb"], "fio: a file under the directory");
    }

    #[test]
    fn bsrange_keeps_its_top_size_as_fio_draws_it() {
        let p = plan_of("[j]\nfilename=/data/x\nrw=randread\nbsrange=4k-10k\n", false);
        let mix: Vec<(u64, u32)> = p.workloads[0].bs.iter().map(|b| (b.bytes, b.weight)).collect();
        assert_eq!(mix, [(4096, 4000), (8192, 4000), (10240, 2000)]);
    }

    #[test]
    fn plan_check_errors_point_at_the_job_files_line() {
        let e = text("[j]\nfilename=/data/x\nruntime=100d\n", false)
            .unwrap()
            .resolve("job.fio", &Overrides::default())
            .unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(3), Some("runtime")), "{e}");
        assert!(e.message.contains("intervals"), "{e}");
        let e = text("[j]\nfilename=/data/x\nioengine=io_uring\niodepth=70000\n", false).unwrap_err();
        assert!(e.to_string().contains("iodepth"), "{e}");
    }

    #[test]
    fn refused_options_set_to_off_change_nothing() {
        let t = "[j]\nfilename=/data/x\nthinktime=0\nfsync=0\nsync=0\ndo_verify=0\nzero_buffers=0\nruntime=1\n";
        assert!(text(t, false).is_ok());
    }

    #[test]
    fn a_name_in_global_renames_no_job_and_a_single_pass_is_noted() {
        let p = plan_of("[global]\nname=shared\nfilename=/data/x\n[a]\n[b]\nstonewall\n", false);
        let names: Vec<&str> = p.workloads.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        let i = text("[j]\nfilename=/data/x\nsize=1m\nruntime=10\n", false).unwrap();
        assert!(i.warning().unwrap().contains("fio ends the job after one pass over size"), "{:?}", i.warning());
    }

    #[test]
    fn the_printed_plan_keeps_the_scratch_size() {
        let i = text("[j]\nioengine=null\nrw=randread\nsize=64m\nruntime=1\n", false).unwrap();
        let toml = i.to_toml("job.fio");
        assert!(toml.contains("scratch_size = \"64m\""), "{toml}");
        let p = parse_str(&toml, "p.toml", &Overrides::default()).unwrap();
        assert_eq!(p.scratch_size, Some(64 << 20));
        assert!(p.scratch_unfilled(), "the null back-end writes no scratch file first");
    }
}

/// The second review of the import (issue 19).
mod review_two {
    use super::*;

    #[test]
    fn filenames_with_glob_characters_are_refused_lenient_or_not() {
        for lenient in [false, true] {
            let e = text("[j]\nfilename=/dev/sd*\nrw=randwrite\n", lenient).unwrap_err();
            assert_eq!((e.line, e.key.as_deref()), (Some(2), Some("filename")), "{e}");
            assert!(e.message.contains("as written"), "{e}");
        }
    }

    #[test]
    fn a_synchronous_rate_job_keeps_its_one_io_per_job() {
        let i =
            text("[j]\nfilename=/data/x\nioengine=psync\niodepth=32\nnumjobs=2\nrw=randread\nrate_iops=100\n", false)
                .unwrap();
        let p = i.resolve("job.fio", &Overrides::default()).unwrap();
        assert_eq!((p.workloads[0].max_outstanding, p.workloads[0].rate.as_slice()), (2, &[200.0][..]));
    }

    #[test]
    fn wait_for_names_a_job_before_and_zero_in_any_unit_is_off() {
        let e = text("[a]\nfilename=/data/x\n[b]\nwait_for=nope\n", false).unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(4), Some("wait_for")), "{e}");
        assert!(text("[j]\nfilename=/data/x\nthinktime=0ms\nruntime=1\n", false).is_ok());
    }

    #[test]
    fn the_scratch_size_is_checked_and_its_error_points_at_the_size_line() {
        let e = text("[j]\nrw=read\nsize=1k\n", false).unwrap().resolve("job.fio", &Overrides::default()).unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(3), Some("size")), "{e}");
        assert!(e.message.contains("at least 4k"), "{e}");
    }

    #[test]
    fn a_long_line_of_an_included_file_is_not_echoed_whole() {
        let long = "x".repeat(300);
        let e = text(&format!("[j]\nfilename=/data/x\n{long}=1\n"), false).unwrap_err();
        assert!(e.message.contains("xxxx…") && e.message.len() < 400, "{e}");
    }
}

/// Issue 39: fio's random_distribution, per-direction block sizes and think time import with
/// fio's meaning.
#[test]
fn skew_sizes_per_direction_and_think_time_import_with_fio_s_meaning() {
    let one = |t: &str| {
        let i = text(t, false).unwrap_or_else(|e| panic!("{t}: {e}"));
        let plan = i.resolve("job.fio", &Overrides::default()).unwrap_or_else(|e| panic!("{t}: {e}"));
        (plan.workloads[0].clone(), i.warning().unwrap_or_default())
    };
    let base = "[j]\nfilename=/data/x\nruntime=1\nrw=randrw\nrwmixread=70\n";
    let (w, note) = one(&format!("{base}bs=4k,64k\nrandom_distribution=zipf:1.2\n"));
    assert_eq!((w.bs[0].bytes, w.write_bs[0].bytes), (4096, 65536));
    assert_eq!(w.distribution.to_string(), "zipf:1.2");
    assert_eq!(w.hot_layout, iocurve_plan::HotLayout::Scattered, "fio hashes zipf offsets");
    assert!(note.contains("drawn exactly") && note.contains("1991"), "{note}");
    let (w, _) = one(&format!("{base}bssplit=4k/50:8k/50,64k\n"));
    assert_eq!(w.bs.len(), 2);
    assert_eq!(w.write_bs.iter().map(|b| b.bytes).collect::<Vec<_>>(), [65536]);
    let (w, _) = one(&format!("{base}random_distribution=zoned:60/10:30/20:10/70\n"));
    assert_eq!(w.hot_layout, iocurve_plan::HotLayout::Contiguous, "fio's zones are in order");
    let (w, _) = one(&format!("{base}random_distribution=zoned_abs=60/1m:40/2m\n"));
    assert!(w.distribution.to_string().starts_with("zoned_abs:"), "{}", w.distribution);
    // fio's normal:5 is the mean of 12 uniform draws plus a 5 % wide deviation: σ 8.46 %.
    let (w, note) = one(&format!("{base}random_distribution=normal:5\n"));
    match &w.distribution.0.law {
        iocurve_access::Law::Normal { sigma_pct } => assert!((sigma_pct - 8.4575).abs() < 0.001, "{sigma_pct}"),
        l => panic!("{l:?}"),
    }
    assert!(note.contains("σ = 8.4"), "{note}");
    // Above 50, fio caps the deviation's width at half the range.
    let (w, _) = one(&format!("{base}random_distribution=normal:80\n"));
    match &w.distribution.0.law {
        iocurve_access::Law::Normal { sigma_pct } => assert!((sigma_pct - 16.667).abs() < 0.001, "{sigma_pct}"),
        l => panic!("{l:?}"),
    }
    // fio's defaults where no value is given.
    let (w, _) = one(&format!("{base}random_distribution=zipf\n"));
    assert_eq!(w.distribution.to_string(), "zipf:1.1");
    let (w, _) = one(&format!("{base}random_distribution=pareto\n"));
    assert_eq!(w.distribution.to_string(), "pareto:0.2");
    let (w, note) = one(&format!("{base}numjobs=4\nrandom_distribution=pareto:0.9\n"));
    assert!(w.distribution.to_string().starts_with("pareto:0.9"), "{}", w.distribution);
    assert!(note.contains("one"), "{note}");
    // Think time in µs (fio's unit), with its blocks and spin.
    let (w, _) =
        one("[j]\nfilename=/data/x\nruntime=1\nrw=randread\nthinktime=250\nthinktime_blocks=8\nthinktime_spin=50\n");
    let t = w.think.unwrap();
    assert_eq!((t.time, t.blocks, t.spin_ns), (iocurve_plan::ThinkTime::Fixed(250_000), 8, 50_000));
    let (w, _) = one("[j]\nfilename=/data/x\nruntime=1\nrw=randread\nthinktime=2ms\n");
    assert_eq!(w.think.unwrap().time, iocurve_plan::ThinkTime::Fixed(2_000_000));
    // The same zones for reads and writes are one law.
    let (w, _) = one(&format!("{base}random_distribution=zoned:60/10:40/90,60/10:40/90\n"));
    assert_eq!(w.distribution.to_string(), "zoned:60/10:40/90");
    // A sequential job's distribution is ignored, as fio does.
    let (w, note) = one("[j]\nfilename=/data/x\nruntime=1\nrw=read\nrandom_distribution=zipf:1.1\n");
    assert!(w.distribution.is_uniform());
    assert!(note.contains("ignored, as fio does"), "{note}");
    // Refused with the reason: zones per direction, think time under a rate limit, bad values.
    for (t, says) in [
        ("rw=randrw\nrandom_distribution=zoned:50/50:50/50,90/10:10/90\n", "different zones for reads and writes"),
        ("rw=randrw\nrandom_distribution=zoned:50/50:50/50,90/10:10/90,50/50:50/50\n", "different zones"),
        ("rw=randread\nrate_iops=100\nthinktime=10\n", "a think time inside a rate limit"),
        ("rw=randread\nrandom_distribution=zipf:0\n", "zipf"),
        ("rw=randread\nrandom_distribution=normal:150\n", "deviation of 0 to 100"),
    ] {
        let e = text(&format!("[j]\nfilename=/data/x\nruntime=1\n{t}"), false).unwrap_err().to_string();
        assert!(e.contains("random_distribution") || e.contains("thinktime"), "{t}: {e}");
        assert!(e.contains(says), "{t}: {e}");
    }
}

/// Issue 40: fio's trim modes, the trims' block sizes and fio's trims behind its verify.
mod trims {
    use super::*;

    fn one(t: &str) -> (iocurve_plan::Workload, String) {
        let i = text(&format!("[j]\nfilename=/data/x\nruntime=1\n{t}"), false).unwrap_or_else(|e| panic!("{t}: {e}"));
        let plan = i.resolve("job.fio", &Overrides::default()).unwrap_or_else(|e| panic!("{t}: {e}"));
        (plan.workloads[0].clone(), i.warning().unwrap_or_default())
    }

    fn note_of(t: &str) -> String {
        one(t).1
    }

    fn sizes(bs: &[iocurve_plan::BlockSize]) -> Vec<(u64, u32)> {
        bs.iter().map(|b| (b.bytes, b.weight)).collect()
    }

    #[test]
    fn trim_and_randtrim_trim_only_at_the_trims_size() {
        let (w, note) = one("rw=trim\n");
        assert_eq!((w.read_pct, w.trim_pct, w.pattern), (0.0, 100.0, Pattern::Sequential));
        assert_eq!((sizes(&w.bs), w.trim_bs.len()), (vec![(4096, 1)], 0), "trims take bs");
        assert!(!note.contains("rw=trim"), "nothing to note: {note}");
        let (w, _) = one("rw=randtrim\n");
        assert_eq!((w.read_pct, w.trim_pct, w.pattern), (0.0, 100.0, Pattern::Random));
        // Trims only: their size is bs (random trims aligned to it, as fio aligns them).
        let (w, _) = one("rw=randtrim\nbs=4k,4k,1m\n");
        assert_eq!((sizes(&w.bs), w.trim_bs.len(), w.trim_pct), (vec![(1 << 20, 1)], 0, 100.0));
        let (w, _) = one("rw=randtrim\nbssplit=4k,4k,8k/25:64k/75\n");
        assert_eq!(sizes(&w.bs), [(8192, 2500), (65536, 7500)]);
        assert!(w.trim_bs.is_empty());
    }

    #[test]
    fn trimwrite_mixes_trims_and_writes_half_and_half_and_says_so() {
        let (w, note) = one("rw=trimwrite\n");
        assert_eq!((w.read_pct, w.trim_pct, w.pattern), (0.0, 50.0, Pattern::Sequential));
        assert!(w.trim_bs.is_empty() && w.write_bs.is_empty());
        assert!(
            note.contains("rw=trimwrite: fio trims each block and then writes it")
                && note.contains("trim_pct = 50")
                && note.contains("instead of trimming each block right before writing it"),
            "{note}"
        );
        let (w, note) = one("rw=randtrimwrite\n");
        assert_eq!((w.read_pct, w.trim_pct, w.pattern), (0.0, 50.0, Pattern::Random));
        assert!(note.contains("rw=randtrimwrite: fio trims a random block and then writes it"), "{note}");
        // The same split for writes and trims (fio seeds both draws alike): one bs.
        let (w, _) = one("rw=trimwrite\nbssplit=4k,4k/50:16k/50,4k/50:16k/50\n");
        assert_eq!((sizes(&w.bs), w.trim_bs.len(), w.trim_pct), (vec![(4096, 1), (16384, 1)], 0, 50.0));
    }

    #[test]
    fn the_third_block_size_is_the_trims() {
        // fio trims 1m, then writes it in 256 writes of 4k: as many bytes trimmed as written.
        let (w, note) = one("rw=trimwrite\nbs=4k,4k,1m\n");
        assert_eq!((sizes(&w.bs), sizes(&w.trim_bs)), (vec![(4096, 1)], vec![(1 << 20, 1)]));
        assert_eq!((w.read_pct, w.trim_pct), (0.0, 0.39), "4k / (4k + 1m) of the I/Os");
        assert!(note.contains("bs: fio trims each 1m block and then writes it in 256 writes of 4k"), "{note}");
        // The comma rule: `bs=4k,64k` gives the trims 64k too.
        let (w, _) = one("rw=trimwrite\nbs=4k,16k\n");
        assert_eq!((sizes(&w.bs), w.trim_bs.len(), w.trim_pct), (vec![(16384, 1)], 0, 50.0));
        // bssplit's third direction.
        let (w, _) = one("rw=trimwrite\nbssplit=4k,4k,64k/50:128k/50\n");
        assert_eq!(sizes(&w.trim_bs), [(65536, 1), (131072, 1)]);
        assert_eq!(w.trim_pct, 4.0, "4k / (4k + 96k)");
        assert!(
            note_of("rw=trimwrite\nbssplit=4k,4k,64k/50:128k/50\n").contains(
                "fio trims each block (64k:128k) and then writes it in writes of 4k: iocurve's trim_pct = 4 "
            )
        );
        // bsrange's third direction.
        let (w, _) = one("rw=trimwrite\nbsrange=4k-4k,4k-4k,8k-16k\n");
        assert_eq!(sizes(&w.trim_bs), [(8192, 1), (16384, 1)]);
        // randtrimwrite writes each trimmed range at the trim's size: the writes' is unused.
        let (w, note) = one("rw=randtrimwrite\nbs=4k,16k,8k\n");
        assert_eq!((sizes(&w.bs), w.trim_bs.len(), w.write_bs.len(), w.trim_pct), (vec![(8192, 1)], 0, 0, 50.0));
        assert!(note.contains("the writes' block size (16k) goes unused, as in fio"), "{note}");
        // Trims smaller than the writes fall out of step in fio: refused, with the way out.
        let e = text("[j]\nfilename=/data/x\nrw=trimwrite\nbs=64k,64k,4k\n", false).unwrap_err();
        assert_eq!(
            (e.line, e.message.contains("job.fio:4: bs: rw=trimwrite with trims of 4k and writes of 64k")),
            (Some(4), true),
            "{e}"
        );
        assert!(e.message.contains("give trims and writes the same size"), "{e}");
        // So do writes of a mix; lenient, the trims keep their size and share of the bytes.
        let t = "[j]\nfilename=/data/x\nrw=trimwrite\nbssplit=4k,4k/50:8k/50,16k\n";
        let e = text(t, false).unwrap_err();
        assert!(e.message.contains("bssplit: rw=trimwrite with trims of 16k and writes of 4k:8k"), "{e}");
        let w = text(t, true).unwrap().resolve("job.fio", &Overrides::default()).unwrap().workloads[0].clone();
        assert_eq!((sizes(&w.trim_bs), w.trim_pct), (vec![(16384, 1)], 27.27), "6k / (6k + 16k)");
    }

    #[test]
    fn trims_of_verified_blocks_are_refused_where_fio_does_them() {
        let base = "[j]\nfilename=/data/x\nrw=randwrite\nruntime=1\n";
        let e = text(&format!("{base}verify=crc32c\ntrim_percentage=10\ntrim_backlog=16\n"), false).unwrap_err();
        let m = e.to_string();
        for want in
            ["job.fio:6: trim_percentage=10: fio trims a share", "job.fio:7: trim_backlog=16", "the plan's trim_pct"]
        {
            assert!(m.contains(want), "{want} in {m}");
        }
        // Lenient: no trims, as iocurve does not trim behind a verify.
        let i = text(&format!("{base}verify=crc32c\ntrim_percentage=10\ntrim_backlog=16\n"), true).unwrap();
        let plan = i.resolve("job.fio", &Overrides::default()).unwrap();
        assert_eq!(plan.workloads[0].trim_pct, 0.0);
        // Without verify (or trim_backlog, or writes) fio trims nothing: noted, not refused.
        for t in [
            "trim_percentage=10\ntrim_backlog=16\n",
            "verify=crc32c\ntrim_percentage=10\n",
            "verify=crc32c\ntrim_percentage=10\ntrim_backlog=16\nrw=randread\n",
        ] {
            let i = text(&format!("{base}{t}"), true).unwrap();
            let n = i.notices.iter().find(|n| n.option == "trim_percentage").unwrap_or_else(|| panic!("{t}"));
            assert!(!n.refused && n.instead.contains("fio trims written blocks only while verifying"), "{t}: {n}");
            assert_eq!(i.resolve("job.fio", &Overrides::default()).unwrap().workloads[0].trim_pct, 0.0);
        }
        assert!(text(&format!("{base}trim_percentage=10\ntrim_backlog=16\n"), false).is_ok());
        // Set to 0 it is fio's default: nothing to say.
        let i = text(&format!("{base}trim_percentage=0\n"), false).unwrap();
        assert!(i.warning().is_none_or(|w| !w.contains("trim")), "{:?}", i.warning());
        let e = text(&format!("{base}trim_percentage=200\n"), false).unwrap_err();
        assert!(e.message.contains("percentage") && e.line == Some(5), "{e}");
    }

    #[test]
    fn the_corpus_trims() {
        let i = import(&corpus("trim.fio"), false).unwrap();
        let plan = i.resolve("trim.fio", &Overrides::default()).unwrap();
        let w: Vec<(&str, f64, f64, u64, Vec<u64>)> = plan
            .workloads
            .iter()
            .map(|w| {
                (w.name.as_str(), w.read_pct, w.trim_pct, w.bs[0].bytes, w.trim_bs.iter().map(|b| b.bytes).collect())
            })
            .collect();
        assert_eq!(
            w,
            [
                ("trim", 0.0, 100.0, 4096, vec![]),
                ("randtrim", 0.0, 100.0, 65536, vec![]),
                ("trimwrite", 0.0, 5.88, 4096, vec![65536]),
                ("trimwrite-split", 0.0, 50.0, 4096, vec![]),
                ("trimwrite-mix", 0.0, 4.0, 4096, vec![65536, 131072]),
                ("randtrimwrite", 0.0, 50.0, 8192, vec![]),
            ]
        );
        let toml = i.to_toml("trim.fio");
        assert!(toml.contains("trim_pct = 5.88") && toml.contains("trim_bs = \"64k\""), "{toml}");
    }
}

/// Found importing fio's own examples (issue 41): a rate job's iodepth bounds what it keeps in
/// flight (it was refused as "queue_depth is 32, but a rate step…"), the log options fio takes
/// bare are taken bare, jobs at once for different times run for the first's only when
/// lenient, and zones are named as what they are.
#[test]
fn fio_s_own_examples_import() {
    let rated = "[j]\nfilename=/data/x\nsize=1m\nrw=randread\nrate_iops=500\niodepth=32\nioengine=libaio\ndirect=1\n";
    let plan = text(rated, false).unwrap().resolve("job.fio", &Overrides::default()).unwrap();
    let w = &plan.workloads[0];
    assert_eq!((w.queue_depth, w.max_outstanding, w.rate.as_slice()), (1, 32, &[500.0][..]));
    let logs = "[j]\nfilename=/data/x\nsize=1m\nrw=read\nwrite_bw_log\nwrite_lat_log\n";
    assert!(text(logs, false).is_ok());
    let timed =
        "[global]\nfilename=/data/x\nsize=1m\ntime_based\n[a]\nrw=randread\nruntime=30\n[b]\nrw=write\nruntime=10\n";
    let e = text(timed, false).unwrap_err();
    assert!(e.message.contains("for another time than job a"), "{e}");
    let plan = text(timed, true).unwrap().resolve("job.fio", &Overrides::default()).unwrap();
    assert_eq!(plan.workloads[0].intervals, plan.workloads[1].intervals, "b runs a's time");
    let zoned = "[j]\nfilename=/data/x\nrw=write\nsize=8z\n";
    assert!(text(zoned, true).unwrap_err().message.contains("zones of a zoned block device"));
}
