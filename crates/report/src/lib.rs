//! Presentation: terminal tables and number formats in the published form, exports, the JSON
//! result and the self-contained HTML report. Pure functions of the result — they compute nothing the analysis did not.

pub mod export;
pub mod fio;
pub mod flatfile;
// The number formats live beside the analysis, whose words use them too; the runner quotes
// them without depending on the report.
pub use iocurve_analysis::format;
pub mod html;
pub mod overview;
pub mod terminal;

use std::path::Path;

use iocurve_analysis::RunResult;

/// Writes the full result document (`--json`; see [`write_output`]).
pub fn write_json(result: &RunResult, path: &Path) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(result).map_err(std::io::Error::other)?;
    write_output(path, (text + "\n").as_bytes(), "json.tmp")
}

/// Whether an output at `path` is written to a temporary file renamed over it: a regular file,
/// or none yet. Anything else the path names — a device such as /dev/null, a pipe, a symlink
/// such as /dev/stdout — is written in place: renaming over it would replace it with a file.
/// (Found 2026-11-27: `export -o /dev/null` left /dev/null a regular file, and every later
/// reader of /dev/null read what others had thrown away.)
pub fn replaced_by_rename(path: &Path) -> bool {
    std::fs::symlink_metadata(path).map_or(true, |m| m.file_type().is_file())
}

/// Writes a whole output file so that a reader never sees half of it: via a temporary file
/// (`path` with the extension `tmp_ext`) renamed over it, or in place where renaming would
/// replace what the path names ([`replaced_by_rename`]).
pub fn write_output(path: &Path, bytes: &[u8], tmp_ext: &str) -> std::io::Result<()> {
    if !replaced_by_rename(path) {
        use std::io::Write;
        return std::fs::File::create(path)?.write_all(bytes);
    }
    let tmp = path.with_extension(tmp_ext);
    let written = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        // A full disk or a rename refused: no half-written temporary file left beside the
        // output (issue 36, finding 5: a `.json.tmp` stayed).
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found 2026-11-27 (see [`replaced_by_rename`]): a symlink is written through, not
    /// replaced; a regular file or a new one is replaced whole.
    #[test]
    fn an_output_that_is_not_a_regular_file_is_written_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let (file, link, new) = (dir.path().join("file"), dir.path().join("link"), dir.path().join("new.json"));
        std::fs::write(&file, b"old, and longer than what replaces it").unwrap();
        std::os::unix::fs::symlink(&file, &link).unwrap();
        write_output(&link, b"through the link", "json.tmp").unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link stays a link");
        assert_eq!(std::fs::read(&file).unwrap(), b"through the link");

        write_output(&file, b"whole", "json.tmp").unwrap();
        write_output(&new, b"new", "json.tmp").unwrap();
        assert_eq!((std::fs::read(&file).unwrap(), std::fs::read(&new).unwrap()), (b"whole".to_vec(), b"new".to_vec()));
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left.len(), 3, "no temporary file left: {left:?}");
    }
}
