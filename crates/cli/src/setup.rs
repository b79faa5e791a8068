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
/// (name, command), and every indented line of the section with no marker above it.
fn setup_commands(readme: &str) -> (Vec<(String, String)>, Vec<String>) {
    let section = readme
        .split("\n## Set-up on a fresh machine\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("README: a section `## Set-up on a fresh machine`");
    let (mut marked, mut unmarked) = (Vec::new(), Vec::new());
    let mut name: Option<String> = None;
    for line in section.lines() {
        if let Some(n) = line.strip_prefix("<!-- setup: ").and_then(|l| l.strip_suffix(" -->")) {
            name = Some(n.to_string());
        } else if let Some(cmd) = line.strip_prefix("    ") {
            match name.take() {
                Some(n) => marked.push((n, cmd.to_string())),
                None => unmarked.push(cmd.to_string()),
            }
        } else if !line.trim().is_empty() {
            name = None;
        }
    }
    (marked, unmarked)
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

    let out = Command::new("bash")
        .arg(root().join(".ci/run"))
        .env("IOCURVE_CI_PRINT", "1")
        .output()
        .expect("bash runs .ci/run");
    assert!(out.status.success(), ".ci/run failed: {}", String::from_utf8_lossy(&out.stderr));
    let ran: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect();
    let want: Vec<String> = marked.into_iter().map(|(_, c)| c).collect();
    assert_eq!(ran, want, "what .ci/run runs is what the README says");
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
    assert_eq!((code, out.trim()), (Some(0), "cargo run --release -- run"));

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
