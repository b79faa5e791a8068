//! What the fuzz targets share: where they keep their files, the scratch target the engine
//! works on, and seed inputs made by the code under test itself (so that they follow its
//! formats as they change).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use iocurve_engine::{OpenOptions, TargetSet};
use iocurve_plan::TargetGroup;

/// A directory of this process for the targets' files: under `IOCURVE_FUZZ_TMP` (scripts/fuzz
/// points it into fuzz/target, which it removes afterwards), else the system's temporary
/// directory. On a real filesystem: the engine opens its targets with O_DIRECT.
pub fn work_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = std::env::var_os("IOCURVE_FUZZ_TMP").map_or_else(std::env::temp_dir, PathBuf::from);
        std::fs::create_dir_all(&base).expect("fuzz work directory");
        // Kept for the life of the process (libFuzzer exits without running destructors).
        tempfile::Builder::new().prefix("iocurve-fuzz-").tempdir_in(&base).expect("fuzz work directory").keep()
    })
}

/// A directory for small files written and read on every input: a tmpfs when there is one
/// (saving a verification map syncs it, which on a disk costs milliseconds), else [`work_dir`].
pub fn fast_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let shm = Path::new("/dev/shm");
        tempfile::Builder::new()
            .prefix("iocurve-fuzz-")
            .tempdir_in(shm)
            .map(tempfile::TempDir::keep)
            .unwrap_or_else(|_| work_dir().to_path_buf())
    })
}

/// A scratch file of `size` bytes opened for writing as a run opens its targets (created by
/// iocurve, unfilled: nothing here reads it back), once per process and size.
pub fn scratch_target(name: &str, size: u64) -> TargetSet {
    let path = work_dir().join(name);
    let groups = vec![TargetGroup { name: "targets".into(), weight: 1, targets: vec![path.display().to_string()] }];
    let opts =
        OpenOptions { write: true, scratch_size: size, keep: true, scratch_unfilled: true, ..Default::default() };
    TargetSet::open(&groups, &opts).unwrap_or_else(|e| panic!("fuzz scratch target {}: {e}", path.display()))
}

/// Writes seed inputs when `IOCURVE_FUZZ_SEEDS` names a directory (scripts/fuzz does so before
/// each run, into the target's corpus), then goes on as usual.
pub fn write_seeds(target: &str, seeds: impl FnOnce() -> Vec<(String, Vec<u8>)>) {
    let Some(dir) = std::env::var_os("IOCURVE_FUZZ_SEEDS") else { return };
    let dir = PathBuf::from(dir);
    std::fs::create_dir_all(&dir).expect("seed directory");
    for (name, bytes) in seeds() {
        std::fs::write(dir.join(format!("seed-{target}-{name}")), bytes).expect("seed file");
    }
}
