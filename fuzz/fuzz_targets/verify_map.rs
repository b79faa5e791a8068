//! The verification map file (`--verify-map`, `iocurve verify --map`): any bytes through
//! `GenMap::load` (the public load, whatever the format grows: checksums, locks). A map that
//! loads must be usable (every block's generation readable) and must save and load back the
//! same. The input also describes a map to build, fill, save and load again: what the engine
//! writes, it reads back.
#![no_main]

use iocurve_engine::verify::{GEN_MAX, GenMap};
use iocurve_fuzz::{fast_dir, write_seeds};
use libfuzzer_sys::fuzz_target;

fn path(name: &str) -> std::path::PathBuf {
    fast_dir().join(name)
}

fn built(bs: u64, targets: &[(String, u64)], gens: &[u8]) -> GenMap {
    let mut m = GenMap::new(bs, targets);
    // Identities on every other target: both kinds of entry go through save and load.
    m.set_identities(
        targets.iter().enumerate().map(|(i, (p, _))| (i % 2 == 0).then(|| format!("file {i}:{}", p.len()))),
    );
    for (ti, t) in m.targets.iter().enumerate() {
        for b in 0..t.blocks() {
            let g = gens.get((b as usize + ti * 7) % gens.len().max(1)).copied().unwrap_or(0);
            m.release(ti as u32, b, u16::from(g) * 129 % (GEN_MAX + 1));
        }
    }
    m
}

fn same(a: &GenMap, b: &GenMap) {
    assert_eq!((a.id, a.bs, a.targets.len()), (b.id, b.bs, b.targets.len()));
    for (ti, (x, y)) in a.targets.iter().zip(&b.targets).enumerate() {
        assert_eq!((&x.path, x.size, x.blocks(), &x.identity), (&y.path, y.size, y.blocks(), &y.identity));
        for blk in 0..x.blocks() {
            assert_eq!(a.get(ti as u32, blk), b.get(ti as u32, blk), "target {ti} block {blk}");
        }
    }
}

fn seeds() -> Vec<(String, Vec<u8>)> {
    let shapes: [(u64, Vec<(String, u64)>); 3] = [
        (4096, vec![("/dev/loop9".into(), 64 << 10)]),
        (512, vec![("a".into(), 8 << 10), ("/tmp/iocurve-scratch.dat".into(), 4 << 10)]),
        (65536, vec![("x".into(), 1 << 20), ("y".into(), 0), ("z".into(), 100_000)]),
    ];
    shapes
        .iter()
        .enumerate()
        .map(|(i, (bs, targets))| {
            let p = path(&format!("seed{i}.map"));
            built(*bs, targets, &[1, 2, 3, 0, 7, 200]).save(&p).expect("save a seed map");
            (format!("{i}.map"), std::fs::read(&p).expect("read a seed map"))
        })
        .collect()
}

fuzz_target!(init: write_seeds("verify_map", seeds), |data: &[u8]| {
    let input = path("input.map");
    std::fs::write(&input, data).expect("write the input");
    if let Ok(m) = GenMap::load(&input) {
        for (ti, t) in m.targets.iter().enumerate() {
            assert_eq!(t.blocks(), t.size / m.bs, "target {ti}: blocks of a loaded map");
            for blk in 0..t.blocks() {
                assert!(m.get(ti as u32, blk) <= GEN_MAX);
            }
        }
        let again = path("again.map");
        m.save(&again).expect("save a loaded map");
        same(&m, &GenMap::load(&again).expect("a saved map loads"));
    }
    // The input as a map to build: block size, targets (path, size) and generations.
    if data.len() < 3 {
        return;
    }
    let bs = 512u64 << (data[0] % 8);
    let n = (data[1] % 4) as usize;
    let rest = &data[2..];
    let targets: Vec<(String, u64)> = (0..n)
        .map(|i| {
            let b = rest.get(i).copied().unwrap_or(0);
            (String::from_utf8_lossy(&rest[..(b as usize % 8).min(rest.len())]).into_owned(), u64::from(b) * 700)
        })
        .collect();
    let m = built(bs, &targets, rest);
    let out = path("built.map");
    m.save(&out).expect("save a built map");
    same(&m, &GenMap::load(&out).expect("a saved map loads"));
});
