//! The data pattern of written blocks, measured the way an array sees it on what the engine
//! actually wrote (preconditioning and random-write runs, on a file and on a loop device): read
//! back and measured independently of iocurve — 512-byte sector uniqueness and dedupe at every
//! unit by SHA-256 in Python, compression per 4 KiB … 128 KiB unit by Python's zlib, and over
//! the whole stream by the `zstd` binary with a 128 MiB long-range window (`--long=27`).
//! Issue 12: before it, "unique" data held 1 distinct sector in 8 and compress 0.4 gave 161:1
//! to `zstd --long`.

use std::path::Path;
use std::process::Command;

use crate::util::*;

/// What Python measures on the first `size` bytes of a file or device.
struct Measured {
    /// Written sectors per distinct sector.
    sector_dedupe: f64,
    /// Units per distinct unit, per unit size.
    dedupe: Vec<(usize, f64)>,
    /// zlib level 1 per unit, per unit size.
    zlib: Vec<(usize, f64)>,
    /// Bytes of the constant share that are `constant`, per byte written.
    constant_share: f64,
}

fn measure(path: &Path, size: u64, constant: u8) -> Measured {
    let script = r#"
import hashlib, sys, zlib
path, size, constant = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path, "rb") as f:
    data = f.read(size)
out = []
for unit in (512, 4096, 8192, 16384, 32768):
    n = len(data) // unit
    seen = {hashlib.sha256(data[i * unit:(i + 1) * unit]).digest() for i in range(n)}
    out.append(f"d {unit} {n / len(seen)}")
for unit in (4096, 8192, 32768, 131072):
    n = len(data) // unit * unit
    packed = sum(len(zlib.compress(data[i:i + unit], 1)) for i in range(0, n, unit))
    out.append(f"z {unit} {n / packed}")
out.append(f"c 0 {data.count(bytes([constant])) / len(data)}")
print("\n".join(out))
"#;
    let o = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(path)
        .arg(size.to_string())
        .arg(constant.to_string())
        .output()
        .expect("python3 runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut m = Measured { sector_dedupe: 0.0, dedupe: Vec::new(), zlib: Vec::new(), constant_share: 0.0 };
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let v: Vec<&str> = line.split_whitespace().collect();
        let (unit, x): (usize, f64) = (v[1].parse().unwrap(), v[2].parse().unwrap());
        match v[0] {
            "d" if unit == 512 => {
                m.sector_dedupe = x;
                m.dedupe.push((unit, x));
            }
            "d" => m.dedupe.push((unit, x)),
            "z" => m.zlib.push((unit, x)),
            _ => m.constant_share = x,
        }
    }
    m
}

/// Whole-stream ratio of the first `size` bytes by `zstd -1 --long=27` (128 MiB window).
fn zstd_long(path: &Path, size: u64) -> f64 {
    let cmd = format!("head -c {size} {} | zstd -q -1 --long=27 -c | wc -c", path.display());
    let o = Command::new("sh").arg("-c").arg(&cmd).output().expect("sh runs");
    assert!(o.status.success(), "{cmd}: {}", String::from_utf8_lossy(&o.stderr));
    let packed: f64 = String::from_utf8_lossy(&o.stdout).trim().parse().expect("a byte count");
    size as f64 / packed
}

fn within(got: f64, expected: f64, tolerance: f64) -> bool {
    (got / expected - 1.0).abs() <= tolerance
}

/// The ratio the data promises for `compress` (512 / random bytes per 512-byte sector).
fn expected(compress: f64) -> f64 {
    512.0 / ((1.0 - compress) * 512.0).ceil().max(16.0)
}

/// Checks what unique data (dedupe 1) with `compress` promises, on `size` bytes of `path`.
fn check_unique(what: &str, path: &Path, size: u64, compress: f64) {
    let m = measure(path, size, 0);
    let e = expected(compress);
    assert_eq!(m.sector_dedupe, 1.0, "{what}: every 512-byte sector written is unique");
    for (unit, d) in &m.dedupe {
        assert_eq!(*d, 1.0, "{what}: no unit of {unit} bytes repeats");
    }
    for (unit, z) in &m.zlib {
        // zlib pays more per unit than the fast compressors arrays use (Huffman tables, about
        // 100 bytes per 4 KiB unit): never more than asked, within 10 % below. The ±5 % promise
        // is checked by zstd over the whole stream here, and per unit by datacheck's tests.
        assert!(*z <= e * 1.05 && *z >= e * 0.90, "{what}: zlib per {unit}: {z:.3} vs {e:.3}");
    }
    let long = zstd_long(path, size);
    assert!(within(long, e, 0.05), "{what}: zstd --long over the whole stream: {long:.3} vs {e:.3}");
}

#[test]
fn preconditioned_files_and_devices_keep_the_promise_of_unique_data() {
    iocurve_testkit::needs_root!();
    let dir = tempfile::tempdir().unwrap();
    let lo = Loop::new(32 << 20, &[]);
    for compress in ["0", "0.4", "0.75"] {
        let c: f64 = compress.parse().unwrap();
        let file = format!("p{compress}.dat");
        let o = iocurve(dir.path(), &["precondition", &file, "--size", "32m", "--bs", "4k", "--compress", compress]);
        assert!(o.status.success(), "{}", stderr(&o));
        check_unique(&format!("file, compress {compress}"), &dir.path().join(&file), 32 << 20, c);
        std::fs::remove_file(dir.path().join(&file)).unwrap();

        let o = iocurve(dir.path(), &["precondition", lo.path(), "--bs", "64k", "--compress", compress]);
        assert!(o.status.success(), "{}", stderr(&o));
        check_unique(&format!("loop device, compress {compress}"), &lo.dev, 32 << 20, c);
    }
}

#[test]
fn a_random_write_run_writes_fresh_data_at_every_granularity() {
    iocurve_testkit::needs_root!();
    let dir = tempfile::tempdir().unwrap();
    let lo = Loop::new(32 << 20, &[]);
    let file = dir.path().join("r.dat");
    for target in [file.to_str().unwrap(), lo.path()] {
        let o = iocurve(dir.path(), &["precondition", target, "--size", "32m", "--bs", "64k", "--compress", "0.4"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let run = args(
            &["run", "--target", target, "--workload", "backend-random-write-4k", "--ramp", "1", "--qd", "8"],
            &["--compress", "0.4", "--warmup-s", "0.2", "--intervals", "1", "--interval-s", "1.5", "--keep"],
        );
        let r = run_json(dir.path(), &run);
        let ops = r["workloads"][0]["steps"][0]["write"]["ops"].as_u64().unwrap();
        assert!(ops > 1000, "the run wrote ({ops} writes)");
        check_unique(&format!("random writes on {target}"), Path::new(target), 32 << 20, 0.4);
    }
}

#[test]
fn dedupe_holds_at_its_unit_and_no_more_at_finer_units() {
    let dir = tempfile::tempdir().unwrap();
    for (dedupe, unit, bs, mib) in [("2", 4096usize, "4k", 64u64), ("4", 8192, "64k", 128), ("2", 16384, "16k", 64)] {
        let r: f64 = dedupe.parse().unwrap();
        let bytes = mib << 20;
        let file = format!("d{dedupe}-{unit}.dat");
        let o = iocurve(
            dir.path(),
            &[
                "precondition",
                &file,
                "--size",
                &format!("{mib}m"),
                "--bs",
                bs,
                "--compress",
                "0.4",
                "--dedupe",
                dedupe,
                "--dedupe-unit",
                &unit.to_string(),
            ],
        );
        assert!(o.status.success(), "{}", stderr(&o));
        let m = measure(&dir.path().join(&file), bytes, 0);
        // Each unit draws fresh content with p = 1/R: over n units the ratio's relative standard
        // deviation is √((R − 1) / n); 5 % or four of them, whichever is wider (three, checked at
        // six units in three files a run, failed a clean CI run of edd5f21 at 3.6: 1.892 of 2
        // over 4,096 units).
        let n = bytes as f64 / unit as f64;
        let tol = (4.0 * ((r - 1.0) / n).sqrt()).max(0.05);
        for (u, d) in &m.dedupe {
            if *u <= unit {
                assert!(within(*d, r, tol), "dedupe {dedupe} per {unit}: {d:.3} at {u} bytes");
            } else {
                assert!(*d <= r * (1.0 + tol), "dedupe {dedupe} per {unit}: {d:.3} at {u} bytes, more than asked");
            }
        }
        // A long-range compressor finds both reductions, and no more; it samples for matches, so
        // it may miss a few duplicates (measured: 6 % short at worst).
        let long = zstd_long(&dir.path().join(&file), bytes);
        let both = expected(0.4) * r;
        assert!(
            long <= both * (1.0 + tol) && long >= both * 0.90,
            "dedupe {dedupe}: zstd --long {long:.3} vs {both:.3}"
        );
        std::fs::remove_file(dir.path().join(&file)).unwrap();
    }
}

#[test]
fn a_constant_byte_replaces_zeros_and_compresses_alike() {
    let dir = tempfile::tempdir().unwrap();
    let o = iocurve(
        dir.path(),
        &["precondition", "k.dat", "--size", "16m", "--bs", "8k", "--compress", "0.5", "--constant", "0xa5"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let m = measure(&dir.path().join("k.dat"), 16 << 20, 0xa5);
    assert!(m.constant_share >= 0.5, "half of every sector is 0xa5: {:.3}", m.constant_share);
    let zeros = measure(&dir.path().join("k.dat"), 16 << 20, 0).constant_share;
    assert!(zeros < 0.01, "no zero runs: {zeros:.4}");
    assert_eq!(m.sector_dedupe, 1.0);
    let long = zstd_long(&dir.path().join("k.dat"), 16 << 20);
    assert!(within(long, 2.0, 0.05), "zstd --long: {long:.3}");
    let o = iocurve(dir.path(), &["datacheck", "--constant", "0x1ff"]);
    input_error(&o, &["--constant", "0 to 255"]);
}
