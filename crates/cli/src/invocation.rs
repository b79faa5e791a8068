//! How the user calls this very binary from where they are, for the commands iocurve suggests
//! (`next: iocurve report 1 -o run-1.html`). A fresh clone's first run is `cargo run --release
//! -- run`: its binary is `target/release/iocurve`, not on the PATH, and a hint that said
//! `iocurve report …` answered "command not found" (#33). So a hint names `iocurve` only when
//! the shell would find this binary under that name, else its path (relative to the working
//! directory when it lies below it), quoted for a POSIX shell.

use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::OnceLock;

/// The command that runs this binary from the current directory, e.g. `iocurve` or
/// `target/release/iocurve`, ready to paste into a shell.
pub fn command() -> &'static str {
    static COMMAND: OnceLock<String> = OnceLock::new();
    COMMAND.get_or_init(|| {
        let argv0 = std::env::args_os().next();
        let exe = std::env::current_exe().ok();
        let cwd = std::env::current_dir().ok();
        resolve(argv0.as_deref(), exe.as_deref(), std::env::var_os("PATH").as_deref(), cwd.as_deref())
    })
}

/// A command to suggest: `command()`, then `words`, then `--db FILE` unless `db` is the default
/// database (`iocurve report 3 -o run-3.html --db 'my runs.db'`). Each word is quoted where a
/// shell would split or expand it.
pub fn suggest(words: &[&str], db: &Path) -> String {
    let db = db.to_string_lossy();
    let named = (db != iocurve_store::DEFAULT_DB).then_some(["--db", &db]);
    let mut s = command().to_string();
    for w in words.iter().chain(named.iter().flatten()) {
        s.push(' ');
        s.push_str(&quote(w));
    }
    s
}

/// The pure part of [`command`]: `argv0` as the binary was started, `exe` the file it runs from
/// (`/proc/self/exe`), `path` the PATH variable, `cwd` the working directory.
fn resolve(argv0: Option<&OsStr>, exe: Option<&Path>, path: Option<&OsStr>, cwd: Option<&Path>) -> String {
    const NAME: &str = "iocurve";
    let Some(exe) = exe.filter(|e| e.is_absolute() && e.exists()) else {
        // No readable /proc (or the binary was replaced while running): the name is the best guess.
        return NAME.into();
    };
    // Started through a PATH search (a name without a slash): the same name finds it again.
    if let Some(a) = argv0
        && !a.is_empty()
        && !a.as_encoded_bytes().contains(&b'/')
    {
        return quote(&a.to_string_lossy());
    }
    let name = exe.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| NAME.into());
    if first_on_path(&name, path).is_some_and(|p| same_file(&p, exe)) {
        return quote(&name);
    }
    let below =
        cwd.and_then(|c| std::fs::canonicalize(c).ok()).and_then(|c| exe.strip_prefix(c).ok().map(Path::to_path_buf));
    let shown = match below {
        // In the working directory itself: `./iocurve` (a bare name would be searched on the PATH).
        Some(r) if r.components().count() == 1 => Path::new(".").join(r),
        Some(r) if r.components().count() > 1 => r,
        _ => exe.to_path_buf(),
    };
    quote(&shown.to_string_lossy())
}

/// The file a shell's PATH search finds for `name`: the first executable regular file.
fn first_on_path(name: &str, path: Option<&OsStr>) -> Option<std::path::PathBuf> {
    std::env::split_paths(path?)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(name))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0))
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// `s` as one word for a POSIX shell: as it is when it holds only characters no shell treats
/// specially, else in single quotes (a quote inside as `'\''`).
pub fn quote(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./:@%+=,".contains(c);
    if !s.is_empty() && s.chars().all(plain) { s.to_string() } else { format!("'{}'", s.replace('\'', r"'\''")) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn executable(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, b"#!/bin/sh\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn a_binary_started_by_cargo_run_is_named_by_its_path_below_the_working_directory() {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let exe = root.join("target/release/iocurve");
        executable(&exe);
        let argv0 = exe.as_os_str();
        let got = resolve(Some(argv0), Some(&exe), Some(OsStr::new("/usr/bin:/bin")), Some(&root));
        assert_eq!(got, "target/release/iocurve");
        // From elsewhere: the absolute path.
        let other = tempfile::tempdir().unwrap();
        let got = resolve(Some(argv0), Some(&exe), Some(OsStr::new("/usr/bin")), Some(other.path()));
        assert_eq!(got, exe.display().to_string());
        // In the working directory itself: `./iocurve`, which a shell runs (a bare name it would not).
        let got = resolve(Some(argv0), Some(&exe), None, Some(&root.join("target/release")));
        assert_eq!(got, "./iocurve");
    }

    #[test]
    fn a_binary_the_path_finds_is_named_by_its_name() {
        let d = tempfile::tempdir().unwrap();
        let bin = d.path().join("bin/iocurve");
        executable(&bin);
        let path = std::env::join_paths([Path::new("/nonexistent"), &d.path().join("bin")]).unwrap();
        // Started by its full path, but the PATH finds this very file: the name.
        assert_eq!(resolve(Some(bin.as_os_str()), Some(&bin), Some(&path), Some(Path::new("/"))), "iocurve");
        // Started by name: the shell found it.
        assert_eq!(resolve(Some(OsStr::new("iocurve")), Some(&bin), None, None), "iocurve");
        // Another iocurve first on the PATH (an older install): this binary's path, not the name.
        let older = d.path().join("old/iocurve");
        executable(&older);
        let path = std::env::join_paths([d.path().join("old"), d.path().join("bin")]).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let got = resolve(Some(bin.as_os_str()), Some(&bin), Some(&path), Some(elsewhere.path()));
        assert_eq!(got, bin.display().to_string());
    }

    #[test]
    fn paths_a_shell_would_split_are_quoted() {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let exe = root.join("my build's dir/iocurve");
        executable(&exe);
        let got = resolve(Some(exe.as_os_str()), Some(&exe), None, Some(&root));
        assert_eq!(got, r"'my build'\''s dir/iocurve'");
        assert_eq!(quote("run-1.html"), "run-1.html");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("$HOME"), "'$HOME'");
        assert_eq!(quote(""), "''");
    }

    #[test]
    fn without_a_binary_to_point_at_the_name_is_the_guess() {
        assert_eq!(resolve(None, None, None, None), "iocurve");
        assert_eq!(resolve(None, Some(Path::new("/nonexistent/iocurve")), None, None), "iocurve");
    }
}
