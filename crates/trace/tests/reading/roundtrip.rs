//! Traces written from random I/Os read back identical: CSV (every separator), fio v3 (times to
//! the microsecond), fio v2 (to the millisecond) and blktrace (any number of per-CPU files, either
//! byte order).

use iocurve_testkit::traces::{self, BlkOptions, Dir, Io};
use proptest::prelude::*;

use crate::{assert_trace, limits};

fn dir() -> impl Strategy<Value = Dir> {
    prop_oneof![Just(Dir::Read), Just(Dir::Write), Just(Dir::Trim)]
}

/// I/Os with times rounded to `unit` ns; `devices` names to pick from; offsets in sectors.
fn ios(unit: u64, devices: &'static [&'static str]) -> impl Strategy<Value = Vec<Io>> {
    prop::collection::vec(
        (0u64..5_000_000, 0..devices.len(), 0u64..(1 << 40), 1u32..=(1 << 21), dir(), 1u32..100_000),
        1..60,
    )
    .prop_map(move |v| {
        v.into_iter()
            .map(|(t, d, sector, len, dir, pid)| Io {
                t_ns: t * unit,
                device: devices[d].to_string(),
                offset: sector * 512,
                len,
                dir,
                pid,
            })
            .collect()
    })
}

fn sorted(mut v: Vec<Io>) -> Vec<Io> {
    v.sort_by_key(|io| io.t_ns);
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn csv_reads_back(ios in ios(1, &["sdb", "dm-0", "a,b"]), delim in prop_oneof![Just(','), Just(';'), Just('\t')]) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.csv");
        traces::write_csv(&p, &ios, delim);
        assert_trace(&iocurve_trace::read_trace(&p, &limits()).unwrap(), &ios, true);
    }

    #[test]
    fn fio_v3_reads_back(ios in ios(1000, &["/dev/sdb", "/tmp/f"])) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.log");
        // fio writes in time order.
        let ios = sorted(ios);
        traces::write_fio_v3(&p, &ios);
        assert_trace(&iocurve_trace::read_trace(&p, &limits()).unwrap(), &ios, false);
    }

    #[test]
    fn fio_v2_reads_back(ios in ios(1_000_000, &["/dev/sdb", "/tmp/f"])) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.log");
        let ios = sorted(ios);
        traces::write_fio_v2(&p, &ios);
        let t = iocurve_trace::read_trace(&p, &limits()).unwrap();
        // v2 times are the waits', milliseconds since the start: the first I/O's is the origin.
        assert_trace(&t, &ios, false);
    }

    #[test]
    fn blktrace_reads_back(ios in ios(1, &["8,0", "259,3", "4095,1048575"]), cpus in 1usize..5, big in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        let o = BlkOptions { big_endian: big, ..Default::default() };
        traces::write_blktrace_with(dir.path(), "dev", cpus, &ios, &o);
        let t = iocurve_trace::read_trace(&dir.path().join("dev"), &limits()).unwrap();
        // Equal times: the reader keeps CPU order, then file order; the writer put I/O i on CPU
        // i % cpus, so the expected order is by (time, cpu, index).
        let mut order: Vec<(usize, &Io)> = ios.iter().enumerate().collect();
        order.sort_by_key(|(i, io)| (io.t_ns, i % cpus, *i));
        let want: Vec<Io> = order.into_iter().map(|(_, io)| io.clone()).collect();
        assert_trace(&t, &want, true);
        prop_assert_eq!(t.left_out_count("complete (C)"), ios.len() as u64);
    }

    #[test]
    fn any_bytes_give_a_well_formed_trace_or_an_error(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        if let Ok(t) = iocurve_trace::parse("x", &bytes, &limits()) {
            well_formed(&t);
        }
    }

    #[test]
    fn text_near_the_formats_gives_a_well_formed_trace_or_an_error(
        text in "(fio version [23] iolog\n|time,offset,size,op\n|op;time_ns;size;offset;device\n)?([0-9a-zA-Z/ ,;.\"#-]{0,24}\n){0,8}"
    ) {
        match iocurve_trace::parse("x", text.as_bytes(), &limits()) {
            Ok(t) => well_formed(&t),
            Err(e) => prop_assert!(e.to_string().starts_with("x"), "{e}"),
        }
    }
}

/// What every trace read is, whatever its input.
fn well_formed(t: &iocurve_trace::Trace) {
    assert!(!t.ios.is_empty());
    assert_eq!(t.ios[0].t_ns, 0);
    assert!(t.ios.windows(2).all(|w| w[0].t_ns <= w[1].t_ns));
    let mut used = vec![false; t.devices.len()];
    for io in &t.ios {
        assert!(io.len > 0 && io.offset.checked_add(u64::from(io.len)).is_some());
        used[io.device as usize] = true;
    }
    assert!(used.iter().all(|u| *u));
    let s = t.stats();
    assert_eq!(s.dirs.iter().map(|d| d.ios).sum::<u64>(), s.ios);
}
