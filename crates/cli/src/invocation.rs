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
fn command() -> &'static str {
    static COMMAND: OnceLock<String> = OnceLock::new();
    COMMAND.get_or_init(|| {
        let argv0 = std::env::args_os().next();
        let exe = std::env::current_exe().ok();
        let cwd = std::env::current_dir().ok();
        resolve(argv0.as_deref(), exe.as_deref(), std::env::var_os("PATH").as_deref(), cwd.as_deref())
    })
}

/// A command to suggest: `command()`, then `words`, then `--db FILE` unless `db` is the default
/// database and `IOCURVE_DB` names none (`iocurve report 3 -o run-3.html --db 'my runs.db'`).
/// Each word is quoted where a shell would split or expand it.
pub fn suggest(words: &[&str], db: &Path) -> String {
    let named = db_words(db, std::env::var_os("IOCURVE_DB").is_some_and(|v| !v.is_empty()));
    let mut s = command().to_string();
    for w in words.iter().copied().chain(named.iter().map(String::as_str)) {
        s.push(' ');
        s.push_str(&quote(w));
    }
    s
}

/// `--db FILE` for a suggested command. The default database is left out only while
/// `IOCURVE_DB` is unset: with it set, a bare command would read that one instead. A relative
/// name starting with `-` gets `./`, lest it read as an option.
fn db_words(db: &Path, env_set: bool) -> Vec<String> {
    if db == Path::new(iocurve_store::DEFAULT_DB) && !env_set {
        return Vec::new();
    }
    let db = db.to_string_lossy();
    let db = if db.starts_with('-') { format!("./{db}") } else { db.into_owned() };
    vec!["--db".into(), db]
}

/// The pure part of [`command`]: `argv0` as the binary was started, `exe` the file it runs from
/// (`/proc/self/exe`), `path` the PATH variable, `cwd` the working directory.
fn resolve(argv0: Option<&OsStr>, exe: Option<&Path>, path: Option<&OsStr>, cwd: Option<&Path>) -> String {
    const NAME: &str = "iocurve";
    let Some(exe) = exe.filter(|e| e.is_absolute() && e.exists()) else {
        // No readable /proc (or the binary was replaced while running): the name is the best guess.
        return NAME.into();
    };
    // A name whose PATH search finds this very file: the one the user typed (a link's name,
    // when they called it through one), else the file's own. A name the PATH does not lead back
    // here (`exec -a`, `env PATH=… iocurve`) is not trusted.
    let typed = argv0.filter(|a| !a.is_empty() && !a.as_encoded_bytes().contains(&b'/'));
    for name in typed.into_iter().chain(exe.file_name()) {
        if first_on_path(name, path).is_some_and(|p| same_file(&p, exe)) {
            return quote(&name.to_string_lossy());
        }
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
fn first_on_path(name: &OsStr, path: Option<&OsStr>) -> Option<std::path::PathBuf> {
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
/// specially (a hint stays readable), else quoted as the launcher quotes its scripts' words.
fn quote(s: &str) -> String {
    // No `=`: `v=1/iocurve show 1` would be an assignment to a shell.
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./:@%+,".contains(c);
    if !s.is_empty() && s.chars().all(plain) { s.to_string() } else { iocurve_run::launch::remote::quote(s) }
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
        assert_eq!(resolve(Some(OsStr::new("iocurve")), Some(&bin), Some(&path), None), "iocurve");
        // Through a link of another name on the PATH: that name.
        std::os::unix::fs::symlink(&bin, d.path().join("bin/ioc")).unwrap();
        assert_eq!(resolve(Some(OsStr::new("ioc")), Some(&bin), Some(&path), None), "ioc");
        // A name the PATH does not lead back here (`exec -a iocurve`, `env PATH=…`): the path.
        assert_eq!(resolve(Some(OsStr::new("iocurve")), Some(&bin), None, None), bin.display().to_string());
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
        assert_eq!(quote("v=1/iocurve"), "'v=1/iocurve'");
    }

    #[test]
    fn the_database_is_named_unless_a_bare_command_finds_it() {
        assert!(db_words(Path::new("iocurve.db"), false).is_empty());
        // IOCURVE_DB names another: a bare `show 1` would read that one.
        assert_eq!(db_words(Path::new("iocurve.db"), true), ["--db", "iocurve.db"]);
        assert_eq!(db_words(Path::new("./iocurve.db"), false), ["--db", "./iocurve.db"]);
        assert_eq!(db_words(Path::new("--dash.db"), false), ["--db", "./--dash.db"]);
        assert_eq!(db_words(Path::new("/srv/runs.db"), false), ["--db", "/srv/runs.db"]);
    }

    #[test]
    fn without_a_binary_to_point_at_the_name_is_the_guess() {
        assert_eq!(resolve(None, None, None, None), "iocurve");
        assert_eq!(resolve(None, Some(Path::new("/nonexistent/iocurve")), None, None), "iocurve");
    }
}
