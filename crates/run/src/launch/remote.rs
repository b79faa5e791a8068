//! What the coordinator asks of a host through the launch channel: the shell scripts it runs
//! there (probe, copy, clean-up, start) and how their answers read. Pure: the channel runs them.

use iocurve_net::launched::COPY_DIR_PREFIX;

/// `s` as one word for a POSIX shell.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r#"'\''"#))
}

/// The script as one command for a login shell of any kind: `sh -c '…'`.
pub fn sh(script: &str) -> String {
    format!("sh -c {}", quote(script))
}

/// This coordinator's binary, as a host's is compared with it.
#[derive(Clone, Debug)]
pub struct LocalBinary {
    pub path: std::path::PathBuf,
    pub sha256: String,
    /// What `iocurve --version` prints: `iocurve 0.1.0`.
    pub version: String,
    /// `uname -m` of this host's build (x86_64, aarch64).
    pub arch: String,
    pub size: u64,
}

impl LocalBinary {
    pub fn current() -> Result<LocalBinary, String> {
        let path = std::env::current_exe().map_err(|e| format!("cannot find this iocurve's binary: {e}"))?;
        let bytes = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Ok(LocalBinary {
            sha256: sha256_hex(&bytes),
            size: bytes.len() as u64,
            path,
            version: format!("iocurve {}", env!("CARGO_PKG_VERSION")),
            arch: std::env::consts::ARCH.to_string(),
        })
    }
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes).as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Asks the host for its machine and the `iocurve` it has (`remote_binary`: a path, or a
/// name looked up on its PATH): `arch=`, then `path=`, `version=` and, when its size is
/// `local_size` (else it cannot be this build, and hashing it is time lost), `sha=`.
pub fn probe_script(remote_binary: &str, local_size: u64) -> String {
    format!(
        "echo \"arch=$(uname -m)\"; b=$(command -v {b} 2>/dev/null) && [ -f \"$b\" ] && [ -x \"$b\" ] && \
         echo \"path=$b\" && echo \"version=$(\"$b\" --version 2>/dev/null | head -n 1)\" && \
         [ \"$(wc -c < \"$b\")\" -eq {local_size} ] && echo \"sha=$(sha256sum \"$b\" | cut -d ' ' -f 1)\"; true",
        b = quote(remote_binary)
    )
}

/// A host's answer to the probe.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Probe {
    pub arch: String,
    pub path: Option<String>,
    pub sha256: Option<String>,
    pub version: Option<String>,
}

pub fn parse_probe(out: &str) -> Result<Probe, String> {
    let mut p = Probe::default();
    for line in out.lines() {
        match line.split_once('=') {
            Some(("arch", v)) => p.arch = v.trim().to_string(),
            Some(("path", v)) => p.path = Some(v.trim().to_string()),
            Some(("sha", v)) => p.sha256 = Some(v.trim().to_string()).filter(|s| s.len() == 64),
            Some(("version", v)) => p.version = Some(v.trim().to_string()).filter(|s| !s.is_empty()),
            _ => {}
        }
    }
    if p.arch.is_empty() {
        return Err(format!("the host did not say what machine it is (`uname -m`); it answered {:?}", tail(out)));
    }
    Ok(p)
}

/// Which binary a host runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Use {
    /// The host's own: the same build as this one, or the same version built for its machine.
    Remote(String),
    /// A copy of this one.
    Copy,
}

/// The host's `iocurve` when it is this very build (same SHA-256); on another machine
/// architecture, its `iocurve` of the same version; otherwise a copy of this one — which a host
/// of another architecture cannot run.
pub fn choose(p: &Probe, local: &LocalBinary) -> Result<Use, String> {
    if let (Some(path), Some(sha)) = (&p.path, &p.sha256)
        && *sha == local.sha256
    {
        return Ok(Use::Remote(path.clone()));
    }
    if p.arch == local.arch {
        return Ok(Use::Copy);
    }
    match (&p.path, &p.version) {
        (Some(path), Some(v)) if *v == local.version => Ok(Use::Remote(path.clone())),
        _ => Err(format!(
            "the host is {} and this iocurve is built for {}: install {} there (on its PATH, or give --remote-binary PATH){}",
            p.arch,
            local.arch,
            local.version,
            match (&p.path, &p.version) {
                (Some(path), Some(v)) => format!("; its {path} is {v}"),
                _ => String::new(),
            }
        )),
    }
}

/// Makes a private directory `$TMPDIR/iocurve-launch.XXXXXXXX`, writes the first `size` bytes
/// of standard input to `iocurve` there and checks their SHA-256 against `sha256`; says
/// `dir=DIR` once the copy is whole and right, then waits for its input to end. Its end, for
/// whatever reason — the coordinator done with it, killed, the connection lost, a short or
/// damaged copy — removes the directory: a copy lives only while its coordinator holds the
/// session (the agent started from it has removed it by then).
pub fn copy_script(size: u64, sha256: &str) -> String {
    format!(
        "umask 077; d=$(mktemp -d \"${{TMPDIR:-/tmp}}/{COPY_DIR_PREFIX}XXXXXXXX\") || exit 1; \
         trap 'rm -rf \"$d\"' EXIT; trap 'exit 1' HUP INT TERM PIPE; \
         head -c {size} > \"$d/iocurve\" || exit 1; \
         s=$(sha256sum \"$d/iocurve\" | cut -d ' ' -f 1); \
         if [ \"$s\" != {sha} ]; then echo \"the copy has SHA-256 $s, not {sha} ({size} bytes sent): removed, not started\" >&2; exit 3; fi; \
         chmod 700 \"$d/iocurve\" && echo \"dir=$d\" || exit 1; \
         cat > /dev/null",
        sha = quote(sha256)
    )
}

/// A directory the copy made: absolute, named `iocurve-launch.*`, no `..`.
pub fn is_copy_dir(d: &str) -> bool {
    let p = std::path::Path::new(d);
    p.is_absolute()
        && !d.split('/').any(|c| c == "..")
        && p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(COPY_DIR_PREFIX) && n.len() > 15)
}

/// Starts the agent with `args` (already its words), replacing the shell.
pub fn start_script(binary: &str, args: &[String]) -> String {
    let mut s = format!("exec {} agent", quote(binary));
    for a in args {
        s.push(' ');
        s.push_str(&quote(a));
    }
    s
}

/// The last few lines of a host's output, for a message.
pub fn tail(out: &str) -> String {
    let lines: Vec<&str> = out.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(3)..].join(" / ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local() -> LocalBinary {
        LocalBinary {
            path: "/usr/bin/iocurve".into(),
            sha256: "a".repeat(64),
            version: "iocurve 0.1.0".into(),
            arch: "x86_64".into(),
            size: 1,
        }
    }

    #[test]
    fn quoting_survives_any_text() {
        for s in ["plain", "it's", "a b", "$(rm -rf /)", "`x`", "'", "\"\\", ""] {
            let o = std::process::Command::new("sh").arg("-c").arg(format!("printf %s {}", quote(s))).output().unwrap();
            assert_eq!(String::from_utf8(o.stdout).unwrap(), s);
        }
        let o = std::process::Command::new("sh").arg("-c").arg(sh("printf %s \"it's\"")).output().unwrap();
        assert_eq!(String::from_utf8(o.stdout).unwrap(), "it's");
    }

    #[test]
    fn the_host_binary_is_used_only_when_it_is_this_build() {
        let l = local();
        let same = Probe {
            arch: "x86_64".into(),
            path: Some("/opt/iocurve".into()),
            sha256: Some("a".repeat(64)),
            version: Some("iocurve 0.1.0".into()),
        };
        assert_eq!(choose(&same, &l).unwrap(), Use::Remote("/opt/iocurve".into()));
        // Same version, another build: a copy of this one.
        let other = Probe { sha256: Some("b".repeat(64)), ..same.clone() };
        assert_eq!(choose(&other, &l).unwrap(), Use::Copy);
        assert_eq!(choose(&Probe { arch: "x86_64".into(), ..Default::default() }, &l).unwrap(), Use::Copy);
        // Another machine: its own build of the same version, or nothing.
        let arm = Probe { arch: "aarch64".into(), ..other.clone() };
        assert_eq!(choose(&arm, &l).unwrap(), Use::Remote("/opt/iocurve".into()));
        let old = Probe { version: Some("iocurve 0.0.9".into()), ..arm };
        let e = choose(&old, &l).unwrap_err();
        assert!(e.contains("aarch64") && e.contains("iocurve 0.0.9") && e.contains("--remote-binary"), "{e}");
        let e = choose(&Probe { arch: "aarch64".into(), ..Default::default() }, &l).unwrap_err();
        assert!(e.contains("install iocurve 0.1.0"), "{e}");
    }

    #[test]
    fn answers_parse_and_mistakes_say_what_came() {
        let p = parse_probe(
            "arch=x86_64\npath=/usr/bin/iocurve\nsha=cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc\nversion=iocurve 0.1.0\n",
        )
        .unwrap();
        assert_eq!(p.path.as_deref(), Some("/usr/bin/iocurve"));
        assert_eq!(p.version.as_deref(), Some("iocurve 0.1.0"));
        assert_eq!(parse_probe("arch=aarch64\n").unwrap().path, None);
        assert!(parse_probe("Welcome to lg1!\n").unwrap_err().contains("Welcome"));
    }

    #[test]
    fn only_a_launch_directory_counts_as_a_copy() {
        assert!(is_copy_dir("/tmp/iocurve-launch.AbCdEf12"));
        for d in [
            "/",
            "/tmp",
            "tmp/iocurve-launch.AbCdEf12",
            "/tmp/iocurve-launch.",
            "/tmp/../iocurve-launch.AbCdEf12",
            "/home/x",
        ] {
            assert!(!is_copy_dir(d), "{d}");
        }
    }

    #[test]
    fn the_scripts_do_what_they_say_in_a_real_shell() {
        use std::io::{BufRead, Write};
        let dir = tempfile::tempdir().unwrap();
        let body = b"#!/bin/sh\necho copied\n";
        let sha = sha256_hex(body);
        let spawn = |script: &str| {
            std::process::Command::new("sh")
                .arg("-c")
                .arg(script)
                .env("TMPDIR", dir.path())
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        // A whole copy: its directory is said, private, and kept while the input is open; the
        // input's end removes it.
        let mut c = spawn(&copy_script(body.len() as u64, &sha));
        let mut input = c.stdin.take().unwrap();
        input.write_all(body).unwrap();
        input.flush().unwrap();
        let mut line = String::new();
        std::io::BufReader::new(c.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let d = line.trim().strip_prefix("dir=").unwrap().to_string();
        assert!(is_copy_dir(&d) && d.starts_with(dir.path().to_str().unwrap()), "{d}");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&d).unwrap().permissions().mode() & 0o777, 0o700, "private");
        assert_eq!(std::fs::read(format!("{d}/iocurve")).unwrap(), body);
        let size = body.len() as u64;
        let probe = |b: &str, size: u64| {
            let o = std::process::Command::new("sh").arg("-c").arg(probe_script(b, size)).output().unwrap();
            parse_probe(&String::from_utf8(o.stdout).unwrap()).unwrap()
        };
        let p = probe(&format!("{d}/iocurve"), size);
        assert_eq!(p.arch, std::env::consts::ARCH);
        assert_eq!(p.sha256.as_deref(), Some(sha.as_str()));
        // Another size: not this build, and not hashed.
        let p = probe(&format!("{d}/iocurve"), size + 1);
        assert_eq!((p.path.is_some(), p.sha256), (true, None));
        assert_eq!(probe("no-such-iocurve-here", 1).path, None);
        drop(input);
        assert!(c.wait().unwrap().success());
        assert!(!std::path::Path::new(&d).exists(), "removed when its session ends");
        // A copy cut short (the coordinator killed mid-copy), or damaged: nothing stays.
        for (sent, what) in [(&body[..5], "short"), (&b"#!/bin/sh\necho damaged\n"[..], "damaged")] {
            let mut c = spawn(&copy_script(body.len() as u64, &sha));
            let mut input = c.stdin.take().unwrap();
            input.write_all(sent).unwrap();
            drop(input);
            let o = c.wait_with_output().unwrap();
            assert_eq!(o.status.code(), Some(3), "{what}");
            assert!(String::from_utf8_lossy(&o.stderr).contains("removed, not started"), "{what}");
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "{what}: nothing left");
        }
    }
}
