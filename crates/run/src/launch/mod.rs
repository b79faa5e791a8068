//! `run --launch ssh`: the coordinator starts an agent on every host itself, over the user's
//! own OpenSSH (their keys, agent and config), runs, and stops them again.
//!
//! Per host, all hosts at once: a probe (machine, and an `iocurve` of this very build there?),
//! a copy of this binary into a private `iocurve-launch.*` directory when there is none, checked
//! by its SHA-256 before it runs, then `iocurve agent --launched` with the host's credentials on
//! its standard input: a certificate naming the host and a token of its own, from a CA made
//! for this run in memory (`iocurve_net::certs::RunCredentials`). Nothing long-lived reaches a
//! host: no file holds a key or a token, the copy removes itself as soon as it runs, and every
//! agent ends when the run ends — its standard input closes, or its coordinator's connection
//! does — or when the credentials expire.

pub mod hostlist;
pub mod remote;
pub mod slurm;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use iocurve_net::certs::{HostCredentials, RunCredentials};
use iocurve_net::launched;

use crate::{Cancel, Error, Observer};
use remote::{LocalBinary, Use};

/// How agents are started.
#[derive(Clone, Debug, PartialEq)]
pub enum Method {
    /// `ssh [OPTIONS] HOST COMMAND`: the words of the ssh command (`ssh`, or what `--ssh`
    /// gives, e.g. `ssh -F lab.conf`).
    Ssh { command: Vec<String> },
    /// `srun --nodes=1 --ntasks=1 --nodelist=HOST --overlap COMMAND` inside the allocation the
    /// coordinator runs in: the words of the srun command (`srun`, or what `--srun` gives).
    Srun { command: Vec<String> },
}

impl Method {
    /// Its name in messages: ssh, srun.
    pub fn name(&self) -> &'static str {
        match self {
            Method::Ssh { .. } => "ssh",
            Method::Srun { .. } => "srun",
        }
    }

    fn words(&self) -> &[String] {
        match self {
            Method::Ssh { command } | Method::Srun { command } => command,
        }
    }
}

/// `run --launch`: where and how.
#[derive(Clone, Debug)]
pub struct LaunchOptions {
    pub method: Method,
    /// The hosts, as the channel reaches them; empty: the plan's `[[hosts]]` addresses.
    pub hosts: Vec<String>,
    /// The `iocurve` a host may have (a name on its PATH, or a path): used when it is this
    /// build, else a copy of this binary is.
    pub remote_binary: String,
    /// The port every agent listens on; 0: a free one each.
    pub port: u16,
    /// How long the run's credentials (and so its agents) live at most.
    pub lifetime: Duration,
}

/// The credentials the coordinator holds for a launched run: the per-run CA, its client
/// certificate and the cluster token (per-host tokens derive from it).
#[derive(Clone)]
pub struct Issued {
    pub token: String,
    pub ca_pem: String,
    pub client_cert_pem: String,
    pub client_key_pem: String,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Issued { .. }")
    }
}

/// How long each part of a start may take before the host counts as failed: the probe and
/// the agent's start (SSH's own connect timeout is 10 s), and the copy, which also gets a
/// second per 10 MB of binary.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);
const START_TIMEOUT: Duration = Duration::from_secs(30);
const COPY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the agents get to end once their standard input closed, before the channel is
/// killed (which ends them too).
const STOP_GRACE: Duration = Duration::from_secs(10);

/// One running agent.
struct Agent {
    host: String,
    child: Child,
    /// Closing it tells the agent the run is over.
    stdin: Option<ChildStdin>,
    /// The last lines the agent wrote to its standard error (for when it fails).
    stderr: Arc<Mutex<Vec<String>>>,
}

/// Agents started for a run; stopped (and what was copied removed) by [`Launch::stop`], or on
/// drop.
pub struct Launch {
    method: Method,
    agents: Vec<Agent>,
    /// Copies whose agent never started (it removes its own copy when it does): removed at
    /// the stop.
    leftovers: Vec<(String, String)>,
    stopped: bool,
}

/// What [`start`] gives the run: the agents' addresses (HOST:PORT) by host, the hosts that
/// failed with why, and the credentials to reach the agents with.
pub struct Started {
    pub launch: Launch,
    pub addresses: Vec<(String, String)>,
    pub failed: Vec<(String, String)>,
    pub issued: Issued,
}

/// Starts an agent on every host, all at once. `allow(host)` is the allow list that host's
/// agent gets (the plan's targets there); `allow_write` is passed on as given; without `keep`
/// the agents remove the scratch files they create when they end.
pub fn start(
    opts: &LaunchOptions,
    hosts: &[String],
    allow: &dyn Fn(&str) -> Vec<String>,
    allow_write: &[PathBuf],
    keep: bool,
    cancel: &Cancel,
    obs: &mut dyn Observer,
) -> Result<Started, Error> {
    let t0 = Instant::now();
    let creds = RunCredentials::issue(opts.lifetime)?;
    let local = LocalBinary::current().map_err(Error::Runtime)?;
    let local = Arc::new(local);
    let mut handles = Vec::new();
    for host in hosts {
        let host_creds = creds.for_host(tls_host(host))?;
        let mut args = vec!["--launched".to_string()];
        if opts.port != 0 {
            args.extend(["--listen".into(), format!("0.0.0.0:{}", opts.port)]);
        }
        for a in allow(host) {
            args.extend(["--allow".into(), a]);
        }
        for w in allow_write {
            args.extend(["--allow-write".into(), w.display().to_string()]);
        }
        if !keep {
            args.push("--remove-scratch".into());
        }
        let (opts, host, local, cancel) = (opts.clone(), host.clone(), local.clone(), cancel.clone());
        handles.push(std::thread::spawn(move || {
            let t = Instant::now();
            let r = start_one(&opts, &host, &local, &host_creds, args, &cancel);
            (host, r, t.elapsed())
        }));
    }
    let mut launch = Launch { method: opts.method.clone(), agents: Vec::new(), leftovers: Vec::new(), stopped: false };
    let (mut addresses, mut failed) = (Vec::new(), Vec::new());
    let (mut copied, mut slowest) = (0, (String::new(), Duration::ZERO));
    for h in handles {
        let (host, r, took) = h.join().map_err(|_| Error::Runtime("a launch thread panicked".into()))?;
        match r {
            Ok(one) => {
                copied += usize::from(one.copied);
                if took > slowest.1 {
                    slowest = (host.clone(), took);
                }
                addresses.push((host.clone(), join_host_port(&host, one.port)));
                launch.agents.push(one.agent);
            }
            Err(f) => {
                if let Some(dir) = f.leftover {
                    launch.leftovers.push((host.clone(), dir));
                }
                failed.push((host, f.why));
            }
        }
    }
    if cancel.is_cancelled() {
        launch.stop(obs);
        return Err(Error::Interrupted("interrupted while starting the agents: nothing ran".into()));
    }
    let how = opts.method.name();
    if !addresses.is_empty() {
        let hours = opts.lifetime.as_secs_f64() / 3600.0;
        obs.note(&format!(
            "launched {} of {} agents over {how} in {:.2} s ({}; slowest {} {:.2} s); credentials for this run only, valid until it ends, at most {}",
            addresses.len(),
            hosts.len(),
            t0.elapsed().as_secs_f64(),
            match copied {
                0 => "no copy needed".to_string(),
                n => format!("copied this binary to {n} host{}", if n == 1 { "" } else { "s" }),
            },
            slowest.0,
            slowest.1.as_secs_f64(),
            if hours >= 1.0 { format!("{hours:.3} h").replace(".000 h", " h") } else { format!("{:.0} min", hours * 60.0) },
        ));
    }
    let issued = Issued {
        token: creds.token.clone(),
        ca_pem: creds.ca_pem.clone(),
        client_cert_pem: creds.client_cert_pem.clone(),
        client_key_pem: creds.client_key_pem.clone(),
    };
    Ok(Started { launch, addresses, failed, issued })
}

/// The name a host's certificate carries: the host without a `user@`.
pub fn tls_host(host: &str) -> &str {
    host.rsplit_once('@').map_or(host, |(_, h)| h)
}

/// `HOST:PORT` to dial (an IPv6 address in brackets), the `user@` dropped.
fn join_host_port(host: &str, port: u16) -> String {
    let h = tls_host(host);
    if h.contains(':') { format!("[{h}]:{port}") } else { format!("{h}:{port}") }
}

struct One {
    agent: Agent,
    port: u16,
    copied: bool,
}

struct Failure {
    why: String,
    /// A copy left on the host (its agent never ran to remove it).
    leftover: Option<String>,
}

impl From<String> for Failure {
    fn from(why: String) -> Failure {
        Failure { why, leftover: None }
    }
}

/// Probe, copy if needed, start; the agent's port once it listens.
fn start_one(
    opts: &LaunchOptions,
    host: &str,
    local: &LocalBinary,
    creds: &HostCredentials,
    mut args: Vec<String>,
    cancel: &Cancel,
) -> Result<One, Failure> {
    let probe = run_script(
        &opts.method,
        host,
        &remote::probe_script(&opts.remote_binary, local.size),
        None,
        PROBE_TIMEOUT,
        cancel,
    )?;
    let probe = remote::parse_probe(&probe)?;
    let (binary, copy_dir) = match remote::choose(&probe, local)? {
        Use::Remote(path) => (path, None),
        Use::Copy => {
            let timeout = COPY_TIMEOUT + Duration::from_secs(local.size / 10_000_000);
            let out = run_script(&opts.method, host, &remote::copy_script(), Some(&local.path), timeout, cancel)?;
            let (dir, sha) = remote::parse_copy(&out)?;
            if sha != local.sha256 {
                return Err(Failure {
                    why: format!(
                        "the copy of this iocurve in {dir} has SHA-256 {sha}, not {}: not started",
                        local.sha256
                    ),
                    leftover: Some(dir),
                });
            }
            args.insert(1, "--remove-binary".into());
            (format!("{dir}/iocurve"), Some(dir))
        }
    };
    let with_leftover = |why: String| Failure { why, leftover: copy_dir.clone() };
    let script = remote::start_script(&binary, &args);
    let mut child = channel_command(&opts.method, host, &script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| with_leftover(spawn_error(&opts.method, e)))?;
    let mut stdin = child.stdin.take();
    if let Some(s) = stdin.as_mut()
        && let Err(e) = s.write_all(launched::encode(creds).as_bytes()).and_then(|()| s.flush())
    {
        terminate(&mut child);
        return Err(with_leftover(format!("cannot hand the agent its credentials: {e}")));
    }
    let stderr = keep_tail(child.stderr.take());
    let (tx, rx) = mpsc::channel();
    if let Some(out) = child.stdout.take() {
        std::thread::spawn(move || {
            let mut lines = BufReader::new(out).lines();
            for line in lines.by_ref() {
                let Ok(line) = line else { break };
                if let Some(port) = launched::parse_ready(&line) {
                    let _ = tx.send(port);
                    break;
                }
            }
            // Nobody reads the rest; it must not fill the pipe and stall the agent.
            for _ in lines {}
        });
    }
    let until = Instant::now() + START_TIMEOUT;
    let port = loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(port) => break port,
            Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < until && !cancel.is_cancelled() => {
                if let Ok(Some(status)) = child.try_wait() {
                    std::thread::sleep(Duration::from_millis(50));
                    return Err(with_leftover(format!(
                        "the agent ended at its start ({status}): {}",
                        joined(&stderr).unwrap_or_else(|| "it said nothing".into())
                    )));
                }
            }
            _ => {
                terminate(&mut child);
                let why = if cancel.is_cancelled() {
                    "interrupted".to_string()
                } else {
                    format!(
                        "the agent did not say it listens within {} s{}",
                        START_TIMEOUT.as_secs(),
                        joined(&stderr).map(|s| format!(": {s}")).unwrap_or_default()
                    )
                };
                return Err(with_leftover(why));
            }
        }
    };
    Ok(One { agent: Agent { host: host.to_string(), child, stdin, stderr }, port, copied: copy_dir.is_some() })
}

/// The command that runs `script` on `host` through the channel.
fn channel_command(method: &Method, host: &str, script: &str) -> Command {
    let words = method.words();
    let mut c = Command::new(&words[0]);
    c.args(&words[1..]);
    match method {
        Method::Ssh { .. } => {
            // The user's options first (ssh takes the first value of an option); ours only
            // fill in what they left: never ask for a password (nobody answers), give up on
            // an unreachable host in 10 s, notice a dead connection in 15 s.
            c.args([
                "-o",
                "BatchMode=yes",
                "-o",
                "ConnectTimeout=10",
                "-o",
                "ServerAliveInterval=5",
                "-o",
                "ServerAliveCountMax=3",
                "-T",
                "--",
                host,
                &remote::sh(script),
            ]);
        }
        Method::Srun { .. } => {
            // One task on that node, sharing the allocation's CPUs with the other steps (the
            // agents and the probes run side by side), named for `squeue`.
            c.args([
                "--nodes=1",
                "--ntasks=1",
                &format!("--nodelist={host}"),
                "--overlap",
                "--quiet",
                "--job-name=iocurve-agent",
                "sh",
                "-c",
                script,
            ]);
        }
    }
    // Its own process group: Ctrl-C on the terminal reaches the coordinator, which stops the
    // run and then the agents in order, not every channel at once.
    std::os::unix::process::CommandExt::process_group(&mut c, 0);
    c
}

fn spawn_error(method: &Method, e: std::io::Error) -> String {
    match method {
        Method::Ssh { .. } => format!("cannot start `{}`: {e} (--ssh names the ssh command)", method.words()[0]),
        Method::Srun { .. } => format!("cannot start `{}`: {e} (--srun names the srun command)", method.words()[0]),
    }
}

/// Runs `script` on `host` with `input` (a file) on its standard input; its standard output,
/// or why it failed (the channel's or the script's own words).
fn run_script(
    method: &Method,
    host: &str,
    script: &str,
    input: Option<&std::path::Path>,
    timeout: Duration,
    cancel: &Cancel,
) -> Result<String, String> {
    let mut child = channel_command(method, host, script)
        .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| spawn_error(method, e))?;
    if let (Some(path), Some(mut stdin)) = (input, child.stdin.take()) {
        let path = path.to_path_buf();
        std::thread::spawn(move || {
            if let Ok(mut f) = std::fs::File::open(&path) {
                let _ = std::io::copy(&mut f, &mut stdin);
            }
        });
    }
    let out = read_all(child.stdout.take());
    let err = read_all(child.stderr.take());
    let until = Instant::now() + timeout;
    let status = loop {
        if let Ok(Some(s)) = child.try_wait() {
            break s;
        }
        if Instant::now() >= until || cancel.is_cancelled() {
            terminate(&mut child);
            return Err(if cancel.is_cancelled() {
                "interrupted".into()
            } else {
                format!("no answer within {} s", timeout.as_secs())
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    if !status.success() {
        let said = remote::tail(&err);
        return Err(match (method, status.code()) {
            (Method::Ssh { .. }, Some(255)) => format!("ssh failed: {said}"),
            _ => format!("{} {status}: {said}", method.name()),
        });
    }
    Ok(out)
}

fn read_all(from: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut r) = from {
            let mut bytes = Vec::new();
            let _ = r.read_to_end(&mut bytes);
            s = String::from_utf8_lossy(&bytes).into_owned();
        }
        s
    })
}

/// Keeps the last 20 lines of `from` as they come.
fn keep_tail(from: Option<impl Read + Send + 'static>) -> Arc<Mutex<Vec<String>>> {
    let tail = Arc::new(Mutex::new(Vec::new()));
    if let Some(r) = from {
        let t = tail.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(r).lines() {
                let Ok(line) = line else { break };
                let mut t = t.lock().unwrap_or_else(|e| e.into_inner());
                if t.len() == 20 {
                    t.remove(0);
                }
                t.push(line);
            }
        });
    }
    tail
}

fn joined(tail: &Arc<Mutex<Vec<String>>>) -> Option<String> {
    let t = tail.lock().unwrap_or_else(|e| e.into_inner());
    let s = remote::tail(&t.join("\n"));
    (!s.is_empty()).then_some(s)
}

impl Launch {
    /// Ends every agent: closes its standard input, waits for it (at most [`STOP_GRACE`]),
    /// kills the channel of any still running, and removes copies whose agent never started.
    pub fn stop(&mut self, obs: &mut dyn Observer) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        for a in &mut self.agents {
            a.stdin = None;
        }
        let until = Instant::now() + STOP_GRACE;
        let mut unclean = Vec::new();
        for a in &mut self.agents {
            let status = loop {
                match a.child.try_wait() {
                    Ok(Some(s)) => break Some(s),
                    Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(20)),
                    _ => break None,
                }
            };
            match status {
                Some(s) if s.success() => {}
                Some(s) => unclean.push(format!(
                    "{} ({s}{})",
                    a.host,
                    joined(&a.stderr).map(|t| format!(": {t}")).unwrap_or_default()
                )),
                None => {
                    terminate(&mut a.child);
                    unclean.push(format!(
                        "{} (did not end within {} s: its channel was cut)",
                        a.host,
                        STOP_GRACE.as_secs()
                    ));
                }
            }
        }
        let never = Cancel::new();
        for (host, dir) in std::mem::take(&mut self.leftovers) {
            if let Some(script) = remote::remove_script(&dir)
                && let Err(e) = run_script(&self.method, &host, &script, None, PROBE_TIMEOUT, &never)
            {
                obs.warning(&format!("could not remove {dir} on {host}: {e}; remove it by hand"));
            }
        }
        if !unclean.is_empty() {
            obs.warning(&format!("agents that did not end cleanly: {}", unclean.join("; ")));
        } else if !self.agents.is_empty() {
            obs.note(&format!("stopped {} agent{}", self.agents.len(), if self.agents.len() == 1 { "" } else { "s" }));
        }
    }
}

/// Ends a channel: SIGTERM first (srun passes it on to its task, ssh closes its session), then
/// SIGKILL if it is still there 3 s later.
fn terminate(child: &mut Child) {
    // SAFETY: a signal to a child this process started and has not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

impl Drop for Launch {
    fn drop(&mut self) {
        struct Quiet;
        impl iocurve_engine::StepObserver for Quiet {}
        impl Observer for Quiet {}
        self.stop(&mut Quiet);
    }
}
