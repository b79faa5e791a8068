//! `run --launch ssh|slurm`: the coordinator starts an agent on every host itself — over the
//! user's own OpenSSH (their keys, agent and config), or with srun inside a Slurm allocation —
//! runs, and stops them again.
//!
//! Per host, up to [`MAX_STARTING`] hosts at once: a probe (machine, and an `iocurve` of this
//! very build there?), a copy of this binary into a private `iocurve-launch.*` directory when
//! there is none, checked by its SHA-256 on the host before it runs and kept only while its
//! session lasts, then `iocurve agent --launched` with the host's credentials on its standard
//! input: a certificate naming the host and a token of its own, from a CA made for this run in
//! memory (`iocurve_net::certs::RunCredentials`). Nothing long-lived reaches a host: no file
//! holds a key or a token, the copy removes itself as soon as it runs, and every agent ends
//! when the run ends — its standard input closes, or its coordinator's connection does — or
//! when the credentials expire.

pub mod hostlist;
pub mod pods;

pub use pods::Pods;
pub mod remote;
pub mod slurm;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use iocurve_net::certs::{HostCredentials, RunCredentials};
use iocurve_net::launched;

use crate::events::RunEvent;
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
    /// `--launch pods`: agents already waiting in Kubernetes pods (`iocurve agent --enrol`),
    /// enrolled by their pods' tokens (see [`pods`]).
    Pods(Arc<pods::Pods>),
}

impl Method {
    /// Its name in messages: ssh, srun.
    pub fn name(&self) -> &'static str {
        match self {
            Method::Ssh { .. } => "ssh",
            Method::Srun { .. } => "srun",
            Method::Pods(_) => "pods",
        }
    }

    fn words(&self) -> &[String] {
        match self {
            Method::Ssh { command } | Method::Srun { command } => command,
            Method::Pods(_) => &[],
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
    /// `remote_binary` was asked for (`--remote-binary`): a host where it is not used says so.
    pub remote_binary_given: bool,
    /// The port every agent listens on; 0: a free one each.
    pub port: u16,
    /// How long the run's credentials (and so its agents) live at most.
    pub lifetime: Duration,
    /// A relay per this many hosts (issue 46): the first host of each group runs one beside
    /// its agent; 0: none, the coordinator drives every agent.
    pub relay_every: u32,
    /// Groups of relays apart per leaf switch of Slurm's tree topology (`--relay-by switch`),
    /// rather than in the hosts' order alone.
    pub relay_by_switch: bool,
}

/// The credentials the coordinator holds for a launched run: the per-run CA, its client
/// certificate and the cluster token (per-host tokens derive from it).
#[derive(Clone)]
pub struct Issued {
    pub token: String,
    pub ca_pem: String,
    pub client_cert_pem: String,
    pub client_key_pem: String,
    /// The run's credentials themselves, CA key and all, where relays' grants are to be minted
    /// from them (`relay_every`, issue 46); else they go with the launch.
    pub run: Option<Arc<RunCredentials>>,
}

impl Issued {
    /// What the coordinator keeps of the run's credentials; all of them where relays' grants
    /// are to be minted (`for_relays`).
    pub fn of(creds: RunCredentials, for_relays: bool) -> Issued {
        Issued {
            token: creds.token.clone(),
            ca_pem: creds.ca_pem.clone(),
            client_cert_pem: creds.client_cert_pem.clone(),
            client_key_pem: creds.client_key_pem.clone(),
            run: for_relays.then(|| Arc::new(creds)),
        }
    }
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Issued { .. }")
    }
}

/// How long the probe and the agent's start may take before the host counts as failed (SSH's
/// own connect timeout is 10 s).
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// A copy that sends nothing more for this long has stalled.
const COPY_STALL: Duration = Duration::from_secs(60);
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
    /// A group's relay (`--relay-every`), not one of the run's hosts.
    relay: bool,
}

/// Agents started for a run; stopped by [`Launch::stop`], or on drop.
pub struct Launch {
    agents: Vec<Agent>,
    stopped: bool,
}

/// What [`start`] gives the run: the agents' addresses (HOST:PORT) by host, the hosts that
/// failed with why, and the credentials to reach the agents with.
pub struct Started {
    pub launch: Launch,
    pub addresses: Vec<(String, String)>,
    pub failed: Vec<(String, String)>,
    pub issued: Issued,
    /// `relay_every`: each group's relay (its address) and its hosts (those started, in
    /// `addresses`' terms: HOST); a group whose relay did not start is in `failed`.
    pub relays: Vec<(String, Vec<String>)>,
    /// Where the groups end among the hosts, group after group (every group planned, those
    /// whose relay did not start too), and each of `relays`' group's last place: what a
    /// host-count sweep counts by ([`crate::AgentOptions::relay_ends`]).
    pub places: RelayPlaces,
}

/// Where relays' groups lie among the hosts (issue 46): a host-count sweep takes whole groups,
/// and no other group takes a lost one's place.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RelayPlaces {
    /// Every planned group's end (its last place + 1), in order.
    pub ends: Vec<usize>,
    /// Per relay kept, its group's last place.
    pub lasts: Vec<usize>,
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
    // Each agent holds its channel's three pipes for the whole run, and then a connection.
    iocurve_net::raise_open_file_limit();
    if let Method::Pods(p) = &opts.method {
        return pods::start(opts, p, hosts, cancel, obs);
    }
    if opts.relay_every > 0 && opts.port != 0 {
        return Err(Error::Usage(
            "--relay-every: a relay listens on a free port beside its host's agent; drop --launch-port".into(),
        ));
    }
    let creds = RunCredentials::issue(opts.lifetime)?;
    let local = LocalBinary::current().map_err(Error::Runtime)?;
    let local = Arc::new(local);
    let slots = Arc::new(Slots::new(MAX_STARTING));
    let mut handles = Vec::new();
    // The relays: the first host of every group runs one beside its agent.
    let groups = if opts.relay_every == 0 {
        Vec::new()
    } else {
        let topology = if opts.relay_by_switch { Some(slurm::leaf_switches().map_err(Error::Usage)?) } else { None };
        relay_groups(hosts, opts.relay_every as usize, topology.as_ref()).map_err(Error::Usage)?
    };
    for (g, group) in groups.iter().enumerate() {
        let host = &group[0];
        let host_creds = creds.for_host(tls_host(host))?;
        let args = vec!["--launched".to_string(), "--relay".to_string()];
        let (opts, host, local, cancel, slots) =
            (opts.clone(), host.clone(), local.clone(), cancel.clone(), slots.clone());
        handles.push((
            Some(g),
            std::thread::spawn(move || {
                let _slot = slots.take();
                let t = Instant::now();
                let r = start_one(&opts, &host, &local, &host_creds, args, &cancel);
                (host, r, t.elapsed())
            }),
        ));
    }
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
        let (opts, host, local, cancel, slots) =
            (opts.clone(), host.clone(), local.clone(), cancel.clone(), slots.clone());
        handles.push((
            None,
            std::thread::spawn(move || {
                let _slot = slots.take();
                let t = Instant::now();
                let r = start_one(&opts, &host, &local, &host_creds, args, &cancel);
                (host, r, t.elapsed())
            }),
        ));
    }
    let mut launch = Launch { agents: Vec::new(), stopped: false };
    let (mut addresses, mut failed) = (Vec::new(), Vec::new());
    let (mut copied, mut slowest) = (0, (String::new(), Duration::ZERO));
    let mut relay_at: Vec<Result<String, String>> = vec![Err(String::new()); groups.len()];
    for (relay, h) in handles {
        let (host, r, took) = h.join().map_err(|_| Error::Runtime("a launch thread panicked".into()))?;
        match r {
            Ok(one) => {
                copied += usize::from(one.copied);
                if let Some(r) = &one.remark {
                    obs.warning(&format!("{host}: {r}"));
                }
                if took > slowest.1 {
                    slowest = (host.clone(), took);
                }
                match relay {
                    Some(g) => relay_at[g] = Ok(join_host_port(&host, one.port)),
                    None => addresses.push((host.clone(), join_host_port(&host, one.port))),
                }
                launch.agents.push(Agent { relay: relay.is_some(), ..one.agent });
            }
            Err(why) => match relay {
                Some(g) => relay_at[g] = Err(why),
                None => failed.push((host, why)),
            },
        }
    }
    let (relays, places) = settle_relays(&groups, relay_at, |g| groups[g][0].clone(), &mut addresses, &mut failed);
    if cancel.is_cancelled() {
        launch.stop(obs);
        return Err(Error::Interrupted("interrupted while starting the agents: nothing ran".into()));
    }
    if copied > 0
        && let Some(w) = large_copy_warning(local.size)
    {
        obs.warning(&w);
    }
    let how = opts.method.name();
    if !addresses.is_empty() {
        obs.event(&RunEvent::AgentsLaunched {
            launched: addresses.len(),
            hosts: hosts.len(),
            method: how.to_string(),
            seconds: t0.elapsed().as_secs_f64(),
            copy: copy_note(copied, local.size),
            slowest: slowest.0.to_string(),
            slowest_s: slowest.1.as_secs_f64(),
            lifetime_s: opts.lifetime.as_secs_f64(),
        });
    }
    let issued = Issued::of(creds, opts.relay_every > 0);
    Ok(Started { launch, addresses, failed, issued, relays, places })
}

impl RelayPlaces {
    /// Groups of `every` of `hosts` hosts at a time, in their order, every relay kept.
    pub fn in_order(hosts: usize, every: usize) -> RelayPlaces {
        let every = every.max(1);
        let ends: Vec<usize> = (1..=hosts.div_ceil(every)).map(|g| (g * every).min(hosts)).collect();
        RelayPlaces { lasts: ends.iter().map(|e| e - 1).collect(), ends }
    }
}

/// Each group with its relay's address; a group whose relay did not start (`relay_at[g]` an
/// error) is lost with it, as its hosts would be: they leave `addresses` for `failed`, the
/// relay of group `g` named by `relay_of(g)`.
fn settle_relays(
    groups: &[Vec<String>],
    relay_at: Vec<Result<String, String>>,
    relay_of: impl Fn(usize) -> String,
    addresses: &mut Vec<(String, String)>,
    failed: &mut Vec<(String, String)>,
) -> (Vec<(String, Vec<String>)>, RelayPlaces) {
    let (mut relays, mut places, mut end) = (Vec::new(), RelayPlaces::default(), 0usize);
    for (g, (group, at)) in groups.iter().zip(relay_at).enumerate() {
        end += group.len();
        places.ends.push(end);
        match at {
            Ok(addr) => {
                relays.push((addr, group.clone()));
                places.lasts.push(end.saturating_sub(1));
            }
            Err(why) => {
                addresses.retain(|(h, _)| !group.contains(h));
                for h in group {
                    if !failed.iter().any(|(f, _)| f == h) {
                        failed.push((
                            h.clone(),
                            format!("the relay of its group on {} did not start: {why}", relay_of(g)),
                        ));
                    }
                }
            }
        }
    }
    (relays, places)
}

/// The relays' groups of `hosts`: `every` at a time in their order; or, given the leaf
/// switches, each switch's hosts apart — switches in the order of their first host — `every` at
/// a time, so that no relay drives agents behind another switch. A node Slurm lists under two
/// leaf switches goes with the first.
pub fn relay_groups(
    hosts: &[String],
    every: usize,
    topology: Option<&slurm::Topology>,
) -> Result<Vec<Vec<String>>, String> {
    let every = every.max(1);
    let Some(topology) = topology else { return Ok(hosts.chunks(every).map(<[String]>::to_vec).collect()) };
    let mut switch_of: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for (k, (_, nodes)) in topology.switches.iter().enumerate() {
        for n in nodes {
            switch_of.entry(n.as_str()).or_insert(k);
        }
    }
    let mut by_switch: Vec<(usize, Vec<String>)> = Vec::new();
    for h in hosts {
        let Some(&k) = switch_of.get(tls_host(h)) else {
            let skipped = if topology.skipped.is_empty() {
                String::new()
            } else {
                format!("; switches skipped: {}", topology.skipped.join(", "))
            };
            return Err(format!(
                "--relay-by switch: host {h} is under no leaf switch of `scontrol show topology` (hosts are matched by Slurm's node names: give --hosts as Slurm names the nodes, or list the node in topology.conf; or drop --relay-by switch{skipped})"
            ));
        };
        match by_switch.iter_mut().find(|(s, _)| *s == k) {
            Some((_, on)) => on.push(h.clone()),
            None => by_switch.push((k, vec![h.clone()])),
        }
    }
    Ok(by_switch.into_iter().flat_map(|(_, on)| on.chunks(every).map(<[String]>::to_vec).collect::<Vec<_>>()).collect())
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
    /// Why the host's own binary was not used although `--remote-binary` named it.
    remark: Option<String>,
}

/// How many hosts are started at once: each start holds a few processes and pipes, and copies
/// share the coordinator's bandwidth.
const MAX_STARTING: usize = 32;

/// A counting semaphore for [`MAX_STARTING`].
struct Slots(Mutex<usize>, std::sync::Condvar);

struct Slot<'a>(&'a Slots);

impl Slots {
    fn new(n: usize) -> Slots {
        Slots(Mutex::new(n), std::sync::Condvar::new())
    }

    fn take(&self) -> Slot<'_> {
        let mut free = self.0.lock().unwrap_or_else(|e| e.into_inner());
        while *free == 0 {
            free = self.1.wait(free).unwrap_or_else(|e| e.into_inner());
        }
        *free -= 1;
        Slot(self)
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        *self.0.0.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.0.1.notify_one();
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
) -> Result<One, String> {
    let probe = run_script(
        &opts.method,
        host,
        &remote::probe_script(&opts.remote_binary, local.size),
        None,
        PROBE_TIMEOUT,
        cancel,
    )?;
    let probe = remote::parse_probe(&probe)?;
    let mut guard = None;
    let mut remark = None;
    let binary = match remote::choose(&probe, local)? {
        Use::Remote(path) => path,
        Use::Copy => {
            if opts.remote_binary_given {
                remark = Some(match (&probe.path, &probe.version) {
                    (Some(p), v) => format!(
                        "{p} there is another build ({}); copied this one",
                        v.as_deref().unwrap_or("no version")
                    ),
                    (None, _) => format!(
                        "--remote-binary {} is not there (or not executable); copied this binary",
                        opts.remote_binary
                    ),
                });
            }
            let (dir, g) = copy(&opts.method, host, local, cancel)?;
            guard = Some(g);
            args.insert(1, "--remove-binary".into());
            format!("{dir}/iocurve")
        }
    };
    let started = start_agent(&opts.method, host, &binary, &args, creds, cancel);
    let copied = guard.is_some();
    // The agent removed its copy as it started; if it did not start, the copy's session
    // removes it as this closes its input.
    if let Some(g) = guard {
        g.release();
    }
    let (agent, port) = started?;
    Ok(One { agent, port, copied, remark })
}

/// The copy's session, open until the agent started from the copy: its end removes the copy
/// unless the agent already has (see [`remote::copy_script`]).
struct CopyGuard {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl CopyGuard {
    fn release(mut self) {
        self.stdin = None;
        if exited_by(&mut self.child, Instant::now() + Duration::from_secs(5)).is_none() {
            terminate(&mut self.child);
        }
    }
}

/// Copies this binary to `host` through the channel: its private directory there, once the
/// copy is complete and its SHA-256 checked on the host, and the session that keeps it.
/// A copy that stalls for [`COPY_STALL`] fails the host.
fn copy(method: &Method, host: &str, local: &LocalBinary, cancel: &Cancel) -> Result<(String, CopyGuard), String> {
    let mut child = channel_command(method, host, &remote::copy_script(local.size, &local.sha256))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| spawn_error(method, e))?;
    let sent = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let writer = {
        let (mut stdin, path, sent) = (child.stdin.take(), local.path.clone(), sent.clone());
        std::thread::spawn(move || {
            let mut f = std::fs::File::open(&path).ok()?;
            let mut buf = vec![0u8; 1 << 20];
            let to = stdin.as_mut()?;
            loop {
                let n = f.read(&mut buf).ok()?;
                if n == 0 {
                    break;
                }
                to.write_all(&buf[..n]).ok()?;
                sent.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
            }
            let _ = to.flush();
            // Kept open: the session waits for its end.
            stdin
        })
    };
    let stderr = keep_tail(child.stderr.take());
    let (tx, rx) = mpsc::channel();
    if let Some(out) = child.stdout.take() {
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if let Some(d) = line.strip_prefix("dir=") {
                    let _ = tx.send(d.trim().to_string());
                }
            }
        });
    }
    let (mut last, mut seen) = (Instant::now(), 0u64);
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(dir) if remote::is_copy_dir(&dir) => {
                let stdin = writer.join().ok().flatten();
                return Ok((dir, CopyGuard { child, stdin }));
            }
            Ok(dir) => {
                terminate(&mut child);
                return Err(format!("the copy went to {dir:?}, not a directory of its own"));
            }
            Err(mpsc::RecvTimeoutError::Timeout) if !matches!(child.try_wait(), Ok(Some(_))) => {}
            Err(_) => {
                let status = wait_briefly(&mut child);
                return Err(format!(
                    "the copy failed ({}): {}",
                    status.map_or("still running".into(), |s| s.to_string()),
                    joined(&stderr).unwrap_or_else(|| "the host said nothing".into())
                ));
            }
        }
        let now = sent.load(std::sync::atomic::Ordering::Relaxed);
        if now != seen {
            (last, seen) = (Instant::now(), now);
        }
        if cancel.is_cancelled() || last.elapsed() >= COPY_STALL {
            terminate(&mut child);
            return Err(if cancel.is_cancelled() {
                "interrupted".into()
            } else {
                format!(
                    "the copy stalled: {} of {} MB sent, nothing more for {} s",
                    seen / 1_000_000,
                    local.size / 1_000_000,
                    COPY_STALL.as_secs()
                )
            });
        }
    }
}

/// Waits up to 2 s for a channel that closed its output to end; its status if it did.
fn wait_briefly(child: &mut Child) -> Option<std::process::ExitStatus> {
    let status = exited_by(child, Instant::now() + Duration::from_secs(2));
    if status.is_none() {
        terminate(child);
    }
    status
}

/// The status of `child` once it ends, polled until `until`; None if it is still running then.
fn exited_by(child: &mut Child, until: Instant) -> Option<std::process::ExitStatus> {
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return Some(s),
            Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(20)),
            _ => return None,
        }
    }
}

/// Starts `binary agent ARGS` on `host` with its credentials on its standard input; the agent
/// and its port once it says it listens.
fn start_agent(
    method: &Method,
    host: &str,
    binary: &str,
    args: &[String],
    creds: &HostCredentials,
    cancel: &Cancel,
) -> Result<(Agent, u16), String> {
    let script = remote::start_script(binary, args);
    let mut child = channel_command(method, host, &script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| spawn_error(method, e))?;
    let mut stdin = child.stdin.take();
    if let Some(s) = stdin.as_mut()
        && let Err(e) = s.write_all(launched::encode(creds).as_bytes()).and_then(|()| s.flush())
    {
        terminate(&mut child);
        return Err(format!("cannot hand the agent its credentials: {e}"));
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
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(port) => return Ok((Agent { host: host.to_string(), child, stdin, stderr, relay: false }, port)),
            Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < until && !cancel.is_cancelled() => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                // Its output closed before the ready line: the agent ended (or never ran).
                let status = wait_briefly(&mut child);
                let said = joined(&stderr).unwrap_or_else(|| "it said nothing".into());
                let hint = if said.contains("Permission denied") {
                    " (is the host's TMPDIR mounted noexec? give --remote-binary with an iocurve installed there)"
                } else {
                    ""
                };
                return Err(format!(
                    "the agent ended at its start ({}): {said}{hint}",
                    status.map_or("still running".into(), |s| s.to_string())
                ));
            }
            Err(_) => {
                terminate(&mut child);
                return Err(if cancel.is_cancelled() {
                    "interrupted".to_string()
                } else {
                    format!(
                        "the agent did not say it listens within {} s{}",
                        START_TIMEOUT.as_secs(),
                        joined(&stderr).map(|s| format!(": {s}")).unwrap_or_default()
                    )
                });
            }
        }
    }
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
                "--job-name=iocurve-agent",
                "sh",
                "-c",
                script,
            ]);
        }
        Method::Pods(_) => {}
    }
    // Its own process group: Ctrl-C on the terminal reaches the coordinator, which stops the
    // run and then the agents in order, not every channel at once.
    std::os::unix::process::CommandExt::process_group(&mut c, 0);
    c
}

fn spawn_error(method: &Method, e: std::io::Error) -> String {
    let flag = match method {
        Method::Ssh { .. } => "--ssh",
        Method::Srun { .. } => "--srun",
        Method::Pods(_) => "--launch pods",
    };
    match e.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied => {
            format!("cannot start `{}`: {e} ({flag} names the command)", method.words()[0])
        }
        _ => format!("cannot start `{}`: {e}", method.words()[0]),
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
            let said = err.join().unwrap_or_default();
            return Err(if cancel.is_cancelled() {
                "interrupted".into()
            } else {
                // What the channel said meanwhile, e.g. srun waiting for the allocation's CPUs.
                format!(
                    "no answer within {} s{}",
                    timeout.as_secs(),
                    Some(remote::tail(&said)).filter(|t| !t.is_empty()).map(|t| format!(": {t}")).unwrap_or_default()
                )
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
                // The agent's audit trail is for its host's records: the tail keeps what says
                // why an agent failed.
                if line.starts_with("iocurve-audit ") {
                    continue;
                }
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
    /// Ends every agent: closes its standard input, waits for it (at most [`STOP_GRACE`]) and
    /// ends the channel of any still running. Copies are gone by then: each agent removed its
    /// own as it started, and a copy's session removed any whose agent never did.
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
            match exited_by(&mut a.child, until) {
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
        if !unclean.is_empty() {
            obs.warning(&format!("agents that did not end cleanly: {}", unclean.join("; ")));
        } else if !self.agents.is_empty() {
            let relays = self.agents.iter().filter(|a| a.relay).count();
            obs.event(&RunEvent::AgentsStopped { count: self.agents.len() - relays, relays });
        }
    }
}

/// Ends a channel: SIGTERM first (srun passes it on to its task, ssh closes its session), then
/// SIGKILL if it is still there 3 s later.
fn terminate(child: &mut Child) {
    // SAFETY: a signal to a child this process started and has not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    if exited_by(child, Instant::now() + Duration::from_secs(3)).is_some() {
        return;
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

/// How the launch line tells the copies: none, or to how many hosts and how large.
fn copy_note(copied: usize, size: u64) -> String {
    match copied {
        0 => "no copy needed".to_string(),
        n => format!("copied this binary ({:.1} MB) to {n} host{}", size as f64 / 1e6, if n == 1 { "" } else { "s" }),
    }
}

/// A binary this large carries debug info (release: 108 MB, line tables and the debug info of the
/// standard and C libraries) and is copied to every load host as it is; the shipping build, the
/// `dist` profile, is about 17 MB (#34).
const LARGE_COPY: u64 = 40_000_000;

fn large_copy_warning(size: u64) -> Option<String> {
    (size > LARGE_COPY).then(|| {
        format!(
            "this binary is {:.0} MB (a build with debug info) and each host got a copy: the shipping build is about 17 MB (cargo install --locked --path crates/cli --profile dist, or target/dist/iocurve)",
            size as f64 / 1e6
        )
    })
}

#[cfg(test)]
mod tests {
    /// `--relay-every 2`: in the hosts' order; by switch, each switch's hosts apart (a
    /// relay's agents behind its own switch), `user@` ignored, a host under no switch refused.
    #[test]
    fn relay_places_count_every_group_planned() {
        use super::{RelayPlaces, settle_relays};
        assert_eq!(RelayPlaces::in_order(7, 3), RelayPlaces { ends: vec![3, 6, 7], lasts: vec![2, 5, 6] });
        assert_eq!(RelayPlaces::in_order(0, 3), RelayPlaces::default());
        // The second group's relay did not start: its places stay, nobody's.
        let groups: Vec<Vec<String>> =
            [["a", "b"], ["c", "d"], ["e", "f"]].iter().map(|g| g.iter().map(|h| h.to_string()).collect()).collect();
        let mut addresses: Vec<(String, String)> =
            groups.iter().flatten().map(|h| (h.clone(), format!("{h}:7420"))).collect();
        let at = vec![Ok("a:7421".to_string()), Err("refused".to_string()), Ok("e:7421".to_string())];
        let mut failed = Vec::new();
        let (relays, places) = settle_relays(&groups, at, |g| groups[g][0].clone(), &mut addresses, &mut failed);
        assert_eq!(relays.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(), ["a:7421", "e:7421"]);
        assert_eq!(places, RelayPlaces { ends: vec![2, 4, 6], lasts: vec![1, 5] });
        assert_eq!(failed.iter().map(|f| f.0.as_str()).collect::<Vec<_>>(), ["c", "d"]);
    }

    #[test]
    fn relay_groups_follow_the_order_or_the_switches() {
        let hosts: Vec<String> = ["n1", "n2", "n3", "root@n4", "n5"].map(String::from).to_vec();
        let g = super::relay_groups(&hosts, 2, None).unwrap();
        assert_eq!(g, [vec!["n1", "n2"], vec!["n3", "root@n4"], vec!["n5"]]);
        let sw = |n: &str, nodes: &[&str]| (n.to_string(), nodes.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let topology = |switches: Vec<(String, Vec<String>)>| super::slurm::Topology { switches, skipped: Vec::new() };
        let t = topology(vec![sw("s1", &["n2", "n4"]), sw("s0", &["n1", "n3", "n5"]), sw("s9", &["n1"])]);
        let g = super::relay_groups(&hosts, 2, Some(&t)).unwrap();
        assert_eq!(g, [vec!["n1", "n3"], vec!["n5"], vec!["n2", "root@n4"]]);
        let mut t = topology(vec![sw("s1", &["n2", "n4"])]);
        t.skipped.push("s0 (a list that does not read)".into());
        let e = super::relay_groups(&hosts, 2, Some(&t)).unwrap_err();
        assert!(e.contains("host n1 is under no leaf switch") && e.contains("switches skipped: s0 ("), "{e}");
    }

    /// The launch line says how large the copies were, and a binary with debug info is named
    /// with the shipping build beside it (#34: the release binary was 127 MB).
    #[test]
    fn copies_are_told_with_their_size_and_a_large_one_names_the_shipping_build() {
        assert_eq!(super::copy_note(0, 17_354_096), "no copy needed");
        assert_eq!(super::copy_note(1, 17_354_096), "copied this binary (17.4 MB) to 1 host");
        assert_eq!(super::copy_note(16, 17_354_096), "copied this binary (17.4 MB) to 16 hosts");
        assert_eq!(super::large_copy_warning(17_354_096), None);
        let w = super::large_copy_warning(107_774_040).unwrap();
        assert!(w.starts_with("this binary is 108 MB") && w.contains("--profile dist"), "{w}");
    }
}
