//! The README's set-up commands are what CI runs (#33: the README's first command,
//! `cargo run --release -- run`, failed on every fresh clone for days while CI, running a copy
//! of its own, stayed green). The README marks each command (`<!-- setup: NAME -->`);
//! `scripts/readme-command` reads them and `.ci/run` runs what it reads. These tests read the
//! README on their own and hold `.ci/run` to it.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The set-up section's marked commands in order, read here independently of the script:
/// (name, command), and every command line of the section with no marker above it (indented or
/// fenced: a command CI would not run).
fn setup_commands(readme: &str) -> (Vec<(String, String)>, Vec<String>) {
    let section = readme
        .split("\n## Set-up on a fresh machine\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("README: a section `## Set-up on a fresh machine`");
    let (mut marked, mut unmarked) = (Vec::new(), Vec::new());
    let mut name: Option<String> = None;
    let mut fenced = false;
    for line in section.lines() {
        if line.trim_start().starts_with("```") || line.trim_start().starts_with("~~~") {
            fenced = !fenced;
        } else if fenced {
            unmarked.push(line.to_string());
        } else if let Some(n) = line.strip_prefix("<!-- setup: ").and_then(|l| l.strip_suffix(" -->")) {
            name = Some(n.to_string());
        } else if line.trim().is_empty() {
        } else if let Some(cmd) = line.strip_prefix("    ") {
            match name.take() {
                Some(n) => marked.push((n, cmd.to_string())),
                None => unmarked.push(cmd.to_string()),
            }
        } else {
            name = None;
        }
    }
    (marked, unmarked)
}

/// A copy of what `.ci/run` needs, with a `cargo` and a `scripts/test` that log how they were
/// called (and fail when `fail` is their first word), run as CI runs it: (exit code, the log).
fn run_ci(readme: &str, fail: Option<&str>) -> (Option<i32>, Vec<String>) {
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    let bin = d.path().join("bin");
    for dir in [repo.join(".ci"), repo.join("scripts"), bin.clone()] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::copy(root().join(".ci/run"), repo.join(".ci/run")).unwrap();
    std::fs::copy(root().join("scripts/readme-command"), repo.join("scripts/readme-command")).unwrap();
    std::fs::write(repo.join("README.md"), readme).unwrap();
    let log = d.path().join("log");
    // Each fake logs its whole command line as the kernel has it (`bash scripts/test`), minus
    // the interpreter a `#!` line adds for cargo.
    let fake = |path: &Path, body: &str| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    fake(
        &bin.join("cargo"),
        r#"echo "cargo $*" >> "$CI_LOG"
[ "$1" = "$CI_FAIL" ] && exit 3
if [ "$1" = install ]; then
    mkdir -p "$CARGO_INSTALL_ROOT/bin"
    printf '#!/bin/sh\necho "iocurve $*" >> "$CI_LOG"\n' > "$CARGO_INSTALL_ROOT/bin/iocurve"
    chmod +x "$CARGO_INSTALL_ROOT/bin/iocurve"
fi
exit 0"#,
    );
    fake(
        &repo.join("scripts/test"),
        r#"tr '\0' ' ' < /proc/$$/cmdline | sed 's/ $//' >> "$CI_LOG"; echo >> "$CI_LOG""#,
    );
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new("bash")
        .arg(".ci/run")
        .current_dir(&repo)
        .env("PATH", path)
        .env("CI_LOG", &log)
        .env("CI_FAIL", fail.unwrap_or("-"))
        .output()
        .expect("bash runs .ci/run");
    let logged = std::fs::read_to_string(&log).unwrap_or_default().lines().map(str::to_string).collect();
    (out.status.code(), logged)
}

#[test]
fn ci_runs_the_readme_set_up_commands_as_written() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let (marked, unmarked) = setup_commands(&readme);
    let names: Vec<&str> = marked.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["main-job", "install", "tests"], "README: the set-up section's marked commands");
    assert!(unmarked.is_empty(), "README: set-up commands CI would not run (mark them): {unmarked:?}");
    // The main job runs the binary with no arguments but `run`: the embedded default suite.
    assert!(marked[0].1.ends_with(" run"), "README: the main job runs `iocurve run`: {}", marked[0].1);

    let (code, ran) = run_ci(&readme, None);
    let mut want: Vec<String> = marked.iter().map(|(_, c)| c.clone()).collect();
    want.insert(2, "iocurve show 1".into());
    assert_eq!((code, &ran), (Some(0), &want), "what .ci/run runs is what the README says");
    // A failing main job fails CI before anything else runs.
    let (code, ran) = run_ci(&readme, Some("run"));
    assert_ne!(code, Some(0));
    assert_eq!(ran, want[..1]);
    // So does a failing install line.
    let (code, ran) = run_ci(&readme, Some("install"));
    assert_ne!(code, Some(0));
    assert_eq!(ran, want[..2]);
}

#[test]
fn commands_in_the_set_up_section_without_a_marker_are_found() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let fenced = readme.replace(
        "<!-- setup: install -->",
        "```\nsudo apt-get install -y build-essential\n```\n\n<!-- setup: install -->",
    );
    assert_eq!(setup_commands(&fenced).1, ["sudo apt-get install -y build-essential"]);
    let indented = readme.replace("<!-- setup: install -->\n", "    make world\n\n<!-- setup: install -->\n");
    assert_eq!(setup_commands(&indented).1, ["make world"]);
    // A line of spaces between a marker and its command is a blank line.
    let spaced = readme.replace("<!-- setup: install -->\n", "<!-- setup: install -->\n    \n");
    assert_eq!(setup_commands(&spaced).0, setup_commands(&readme).0);
}

#[test]
fn a_missing_or_doubled_marker_fails_ci_with_a_clear_error() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let script = std::fs::read(root().join("scripts/readme-command")).unwrap();
    let read = |text: &str, name: &str| {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("scripts")).unwrap();
        std::fs::write(d.path().join("scripts/readme-command"), &script).unwrap();
        std::fs::write(d.path().join("README.md"), text).unwrap();
        let o = Command::new("bash").arg(d.path().join("scripts/readme-command")).arg(name).output().unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, out, _) = read(&readme, "main-job");
    assert_eq!((code, out.trim()), (Some(0), "cargo run --profile dist -- run"));

    let (code, out, err) = read(&readme.replace("<!-- setup: main-job -->", ""), "main-job");
    assert_eq!((code, out.as_str()), (Some(1), ""));
    assert!(err.contains("0 markers <!-- setup: main-job -->"), "{err}");

    let doubled = readme.replace("<!-- setup: tests -->", "<!-- setup: main-job -->");
    let (code, _, err) = read(&doubled, "main-job");
    assert_eq!(code, Some(1));
    assert!(err.contains("2 markers"), "{err}");

    let text_after = readme.replace("<!-- setup: main-job -->\n", "<!-- setup: main-job -->\nSome prose.\n");
    let (code, _, err) = read(&text_after, "main-job");
    assert_eq!(code, Some(1));
    assert!(err.contains("followed by 0 command lines"), "{err}");
}
