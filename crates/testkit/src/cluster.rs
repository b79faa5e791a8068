//! A test cluster: agents as real processes (on loopback or in network namespaces of their
//! own), its certificates and token, and the coordinator that drives them.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::{bin, iocurve, stderr};

/// A network namespace joined to this one by a veth pair: its own host on 10.77.N.2, reached
/// from here through 10.77.N.1. Removed on drop.
pub struct Netns {
    pub name: String,
    pub outer: String,
    pub addr: String,
}

pub fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).output().expect("ip runs");
    assert!(o.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

impl Netns {
    /// The address namespace `n` of this test process gives its host.
    pub fn address(n: u32) -> String {
        format!("10.77.{}.2", (std::process::id() % 10_000 % 50) * 5 + n)
    }

    pub fn new(n: u32) -> Netns {
        let id = std::process::id() % 10_000;
        Self::with_net(&format!("{id}n{n}"), &format!("10.77.{}", (id % 50) * 5 + n))
    }

    /// A namespace named after `tag` (a few characters, unique in this test process) on the
    /// /24 network `net` (`10.78.5`): its host is `net.2`.
    pub fn with_net(tag: &str, net: &str) -> Netns {
        let name = format!("iocv{tag}");
        let (outer, inner) = (format!("iv{tag}o"), format!("iv{tag}i"));
        ip(&["netns", "add", &name]);
        ip(&["link", "add", &outer, "type", "veth", "peer", "name", &inner]);
        ip(&["link", "set", &inner, "netns", &name]);
        ip(&["addr", "add", &format!("{net}.1/24"), "dev", &outer]);
        ip(&["link", "set", &outer, "up"]);
        ip(&["netns", "exec", &name, "ip", "addr", "add", &format!("{net}.2/24"), "dev", &inner]);
        ip(&["netns", "exec", &name, "ip", "link", "set", &inner, "up"]);
        ip(&["netns", "exec", &name, "ip", "link", "set", "lo", "up"]);
        Netns { name, outer, addr: format!("{net}.2") }
    }

    /// Cuts the link: no packet passes, no connection is closed.
    pub fn cut(&self) {
        ip(&["link", "set", &self.outer, "down"]);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.outer]).output();
        let _ = Command::new("ip").args(["netns", "del", &self.name]).output();
    }
}

/// An `iocurve agent` on a free port (on loopback, or in a namespace), stopped on drop.
pub struct AgentProc {
    pub child: Child,
    pub addr: String,
}

impl AgentProc {
    pub fn start(dir: &Path, certs: &Path, allow: &str, extra: &[&str]) -> AgentProc {
        Self::start_in(None, dir, certs, allow, extra)
    }

    pub fn start_in(ns: Option<&Netns>, dir: &Path, certs: &Path, allow: &str, extra: &[&str]) -> AgentProc {
        let cmd = match ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", &ns.name, bin()]);
                c
            }
            None => Command::new(bin()),
        };
        Self::spawn(cmd, ns, dir, certs, allow, extra)
    }

    /// An agent on loopback whose wall clock runs `offset` (e.g. `+5s`) off this host's
    /// (libfaketime, preloaded into the agent itself: the `faketime` wrapper forks, and killing
    /// the wrapper left the agent running).
    pub fn start_skewed(offset: &str, dir: &Path, certs: &Path, allow: &str) -> AgentProc {
        let mut cmd = Command::new(bin());
        cmd.env("LD_PRELOAD", "/usr/$LIB/faketime/libfaketime.so.1").env("FAKETIME", offset);
        Self::spawn(cmd, None, dir, certs, allow, &[])
    }

    pub fn spawn(
        mut cmd: Command,
        ns: Option<&Netns>,
        dir: &Path,
        certs: &Path,
        allow: &str,
        extra: &[&str],
    ) -> AgentProc {
        let listen = format!("{}:0", ns.map_or("127.0.0.1", |n| n.addr.as_str()));
        cmd.args(["agent", "--listen", &listen, "--token-file"])
            .arg(certs.join("token"))
            .args(["--allow", allow])
            .args(extra)
            .current_dir(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if !extra.contains(&"--insecure") {
            cmd.arg("--tls-cert").arg(certs.join("agent.pem")).arg("--tls-key").arg(certs.join("agent.key"));
        }
        let mut child = cmd.spawn().expect("the agent starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let addr = line.trim().rsplit(' ').next().unwrap_or_default().to_string();
        assert!(addr.starts_with(listen.trim_end_matches('0')), "the agent says where it listens: {line:?}");
        AgentProc { child, addr }
    }
}

impl Drop for AgentProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A cluster's certificates: its shared agent certificate names loopback and the addresses
/// this test process's namespaces (see [`Netns::new`]) give their agents, which the
/// coordinator checks against the address it dials.
pub fn certs(dir: &Path) -> PathBuf {
    let c = dir.join("certs");
    let mut args = vec!["certs".to_string(), "init".into(), "certs".into()];
    for n in 0..5 {
        args.extend(["--name".into(), Netns::address(n)]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = iocurve(dir, &args);
    assert!(o.status.success(), "{}", stderr(&o));
    c
}

/// `plan.toml` in `dir`: a `[[hosts]]` entry per (agent address, its target), then `workload`.
pub fn hosts_plan<A: AsRef<str>>(dir: &Path, hosts: &[(A, PathBuf)], workload: &str) {
    let mut text = String::from("targets = [\"unused\"]\n");
    for (addr, target) in hosts {
        text.push_str(&format!("[[hosts]]\naddress = \"{}\"\ntargets = [\"{}\"]\n", addr.as_ref(), target.display()));
    }
    text.push_str(workload);
    std::fs::write(dir.join("plan.toml"), text).unwrap();
}

/// A short mixed workload on the given hosts.
pub fn plan<A: AsRef<str>>(dir: &Path, hosts: &[(A, PathBuf)]) {
    hosts_plan(
        dir,
        hosts,
        "[[workloads]]\nname = \"mixed\"\nread_pct = 70\nramp = [1, 2]\nwarmup_s = 0.2\nintervals = 2\ninterval_s = 0.5\n",
    );
}

/// Agents on loopback, one per name, each allowed its own directory `dir/NAME` and given the
/// target `dir/NAME/t.dat` there: the agents and their (address, target).
pub fn file_agents(dir: &Path, certs: &Path, names: &[&str]) -> (Vec<AgentProc>, Vec<(String, PathBuf)>) {
    let mut agents = Vec::new();
    let mut hosts = Vec::new();
    for name in names {
        let d = dir.join(name);
        std::fs::create_dir(&d).unwrap();
        let a = AgentProc::start(&d, certs, &format!("{}/*", d.display()), &[]);
        hosts.push((a.addr.clone(), d.join("t.dat")));
        agents.push(a);
    }
    (agents, hosts)
}

/// `iocurve run ARGS` in `dir` as the test cluster's coordinator (its CA and token).
pub fn coordinator(dir: &Path, certs: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(bin());
    cmd.arg("run")
        .args(args)
        .arg("--ca")
        .arg(certs.join("ca.pem"))
        .arg("--token-file")
        .arg(certs.join("token"))
        .current_dir(dir);
    cmd
}

/// The lines of a child's output as they come, read on a thread of their own: a test waits for
/// them with a deadline (`recv_timeout`) instead of hanging on a child that never writes.
pub fn lines_of(out: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    lines
}

/// A coordinator running in the background whose standard output is read as it comes (so that
/// a test can wait for a moment of the run instead of sleeping for it).
pub struct Watched {
    pub child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Watched {
    pub fn spawn(mut cmd: Command) -> Watched {
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("the coordinator starts");
        let lines = lines_of(child.stdout.take().unwrap());
        Watched { child, lines, seen: Vec::new() }
    }

    /// Waits until a line holds `needle` (at most `within`); panics with what came otherwise.
    pub fn wait_for(&mut self, needle: &str, within: std::time::Duration) {
        let until = std::time::Instant::now() + within;
        loop {
            let left = until.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let hit = line.contains(needle);
                    self.seen.push(line);
                    if hit {
                        return;
                    }
                }
                Err(e) => {
                    // The coordinator ended (or hangs): what it said on its error stream too.
                    let mut err = String::new();
                    if matches!(e, std::sync::mpsc::RecvTimeoutError::Disconnected)
                        && let Some(mut s) = self.child.stderr.take()
                    {
                        use std::io::Read;
                        let _ = s.read_to_string(&mut err);
                    }
                    panic!("no line with `{needle}` within {within:?}: {}\n{err}", self.seen.join("\n"))
                }
            }
        }
    }

    /// Waits for the end: (exit code, standard output and error together).
    pub fn finish(mut self) -> (Option<i32>, String) {
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut err);
        }
        let status = self.child.wait().unwrap();
        self.seen.extend(self.lines.iter());
        (status.code(), format!("{}\n{err}", self.seen.join("\n")))
    }
}

/// Intervals stored in the SQLite store at `db` (0 while it has none, or before it or its
/// tables exist), read with python3's sqlite3 (on every machine here; the sqlite3 shell is not),
/// read-only: a store not made yet is not made by it. Any other failure panics with what python
/// said, rather than reading as "none yet".
pub fn stored_intervals(db: &Path) -> u32 {
    let script = "import sqlite3, sys\n\
        try:\n    c = sqlite3.connect('file:' + sys.argv[1] + '?mode=ro', uri=True)\n    print(c.execute('SELECT count(*) FROM intervals').fetchone()[0])\n\
        except sqlite3.OperationalError as e:\n    print(0 if 'unable to open' in str(e) or 'no such table' in str(e) else sys.exit(str(e)))\n";
    let o = Command::new("python3").args(["-c", script]).arg(db).output().expect("python3 runs");
    let text = String::from_utf8_lossy(&o.stdout);
    match text.trim().parse() {
        Ok(n) if o.status.success() => n,
        _ => panic!("the intervals of {} not read: {text}{}", db.display(), String::from_utf8_lossy(&o.stderr)),
    }
}

/// Waits until the store at `db` holds more than `than` intervals: a run is in its step, with
/// one interval done, however long its set-up took on a loaded machine (a fixed sleep once
/// ended before a 64 MiB target was written). Panics after a minute.
pub fn wait_for_intervals(db: &Path, than: u32) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while stored_intervals(db) <= than {
        assert!(std::time::Instant::now() < deadline, "no interval stored in {} within a minute", db.display());
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
