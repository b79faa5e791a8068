//! The coordinator's hosts: agents (`run --hosts`) — connected before any I/O (token, TLS,
//! protocol, clock offset, targets accepted) — or, for a local run, one in-process agent on the
//! targets the run opened. Either way each step runs through the same coordinator (start at
//! one moment, stream, merge) and lands in the same recorder and analysis.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::coordinator::Lost;
use crate::coordinator::client::{self, ClientConfig, MultiStep, Remote, StepSpec};
use crate::coordinator::clock::{ClockVerdict, check_clock};
use crate::events::RunEvent;
use iocurve_analysis::TargetInfo;
use iocurve_engine::keeper::KeptMap;
use iocurve_engine::precondition::PreState;
use iocurve_engine::{StepObserver, TargetSet};
use iocurve_net::agent::InProcess;
use iocurve_net::{auth, certs, pb};
use iocurve_plan::{Fault, Plan, TargetGroup, Workload};
use iocurve_stats::{FinalVerification, VerifyCounts};
use iocurve_store::{Precondition, Store, StoredProblem};

use crate::{Cancel, Error, Observer, precondition};

/// How the coordinator reaches its agents and what losing one does (`run --hosts`).
#[derive(Clone, Debug, Default)]
pub struct AgentOptions {
    /// HOST:PORT of every agent, each on the plan's targets; empty: the plan's `[[hosts]]`.
    pub addresses: Vec<String>,
    /// The agents' token.
    pub token_file: Option<PathBuf>,
    /// The CA that signed the agents' certificates (None only with `insecure`).
    pub ca: Option<PathBuf>,
    /// The coordinator's certificate and key, for agents that require mutual TLS.
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
    /// Plain text instead of TLS.
    pub insecure: bool,
    /// The name every agent's certificate must carry, instead of the name it is reached at.
    pub tls_name: Option<String>,
    /// Send each agent its own host's token, derived from the token file.
    pub token_per_host: bool,
    /// Agents whose clock is further off are refused.
    pub max_skew_ms: u64,
    /// Losing an agent ends the run (else the others carry on and the step is flagged).
    pub abort_on_host_loss: bool,
    /// Start the agents first (`run --launch`); the launch fills in `addresses` (or the
    /// plan's `[[hosts]]`), `issued` and `unreachable`.
    pub launch: Option<crate::launch::LaunchOptions>,
    /// Credentials made for this run (by the launch), instead of the files above.
    pub issued: Option<crate::launch::Issued>,
    /// Hosts lost before any connection (address, why): launches that failed.
    pub unreachable: Vec<(String, String)>,
    /// Keep trying agents that cannot be reached yet for this long before counting them lost
    /// (agents that start beside the coordinator: a Kubernetes Job, a batch script).
    pub wait_for_agents: Duration,
    /// Relays (issue 46, `run --launch --relay-every`): each relay's address and the addresses
    /// of the agents it drives; the coordinator dials the relays, not those agents. Filled by
    /// the launch, whose credentials (`issued`) mint their grants.
    pub relays: Vec<(String, Vec<String>)>,
    /// What mints the relays' grants: the launch's credentials, or a hand-started cluster's CA
    /// and token (`--relays`).
    pub relay_credentials: Option<Arc<iocurve_net::certs::RunCredentials>>,
    /// Hand-started relays (`run --relays`, agents started with `iocurve agent --relay`), each
    /// to drive the next `relay_every` hosts in the order given; the runner groups them.
    pub relay_addresses: Vec<String>,
    pub relay_every: u32,
    /// The cluster CA's key, to mint the relays' certificates with (default: ca.key beside
    /// `ca`).
    pub relay_ca_key: Option<PathBuf>,
    /// `run --host-intervals`: the hosts behind relays whose every interval is kept
    /// ([`Cluster::host_intervals`]).
    pub host_intervals: Vec<String>,
    /// Where the relays' groups lie among the hosts, every group planned (those of relays that
    /// did not start too): a host-count sweep counts whole groups by them; empty: each of
    /// `relays` in turn.
    pub relay_places: crate::launch::RelayPlaces,
}

/// An agent that sends nothing — its progress events, four a second, are its heartbeat — for
/// this long is lost.
const AGENT_SILENCE: Duration = Duration::from_secs(10);

/// How often the coordinator pings its agents to keep its claim on them (a third of the
/// agents' default claim expiry).
const CLAIM_KEEPING: Duration = Duration::from_secs(20);

/// A replay's shares in one step request (an agent's, or a relay's agents'): what an agent reads
/// (`MAX_REQUEST_BYTES`), less a MiB for the rest of the request.
const MAX_REPLAY_BYTES: usize = iocurve_net::agent::MAX_REQUEST_BYTES - (1 << 20);

pub struct Cluster {
    rt: tokio::runtime::Runtime,
    remotes: Vec<Remote>,
    /// Per agent that is a relay, the agents of its group it reached (address, Hello, clock
    /// offset from this host's, round trip from the relay); empty for an agent.
    children: Vec<Vec<(String, pb::HelloReply, i64, i64)>>,
    /// Per agent, its target paths.
    targets: Vec<Vec<TargetGroup>>,
    /// Per agent behind a relay (by address), its target paths (a fault on one of them goes to
    /// its relay) and its `workers_scale` (its relay gives it its share) (issue 46).
    child_hosts: std::collections::HashMap<String, (Vec<TargetGroup>, f64)>,
    /// Per agent, its `workers_scale` (`[[hosts]]`; 1 for `--hosts`).
    scales: Vec<f64>,
    /// Per agent, its place in the hosts as listed (a relay: its group's last place, the groups
    /// one after another in their relays' order, those of relays that did not start counted): a
    /// host-count sweep's step of N runs on the first N listed that are still with the run,
    /// never on another in a lost one's place (through relays, on the relays whose groups lie
    /// within the first N).
    listed: Vec<usize>,
    /// Per agent, its targets as it opened them (its own paths, and which are fresh).
    facts: Vec<Vec<pb::TargetFacts>>,
    /// Agents lost before the first step (address, why): the run went on without them.
    unreachable: Vec<(String, String)>,
    scratch_size: u64,
    /// The run's key for the advisory lock on file targets it writes: every agent of the run
    /// shares it, so that they may write one file together and another run may not
    /// (`iocurve_engine::safety::lock`).
    run_key: u32,
    /// `run --verify-journal` ([`Cluster::journal_verifying_writes`]).
    verify_journal: bool,
    /// `run --write-iolog` ([`Cluster::write_iolog`]).
    write_iolog: bool,
    /// `run --host-intervals` ([`Cluster::host_intervals`]): the hosts behind relays whose
    /// intervals the coordinator keeps in full, by address.
    in_full: std::collections::HashSet<String>,
    abort_on_host_loss: bool,
    /// How long the agents get between the first step's request and its start; later steps
    /// size theirs from the round trips and the agents' last set-up (see `step_lead`).
    lead: Duration,
    /// The longest set-up of the last step (ns) and its workers.
    last_setup: Option<(i64, u32)>,
    silence: Duration,
}

/// Where each relay's group lies among the hosts, group after group in the relays' order (with
/// `--relay-by switch`, switch by switch): a relay's place for a host-count sweep is its
/// group's last (its group runs whole, once the count takes in its last host). The launch's or
/// the runner's, which count groups whose relay did not start; else each relay's in turn.
fn relay_places(args: &AgentOptions) -> crate::launch::RelayPlaces {
    if args.relay_places.lasts.len() == args.relays.len() && !args.relay_places.ends.is_empty() {
        return args.relay_places.clone();
    }
    let mut places = crate::launch::RelayPlaces::default();
    let mut end = 0usize;
    for r in &args.relays {
        end += r.1.len();
        places.ends.push(end);
        places.lasts.push(end.saturating_sub(1));
    }
    places
}

/// Every agent dialled; with `--wait-for-agents`, those not answering yet dialled again until
/// they do or the wait is over.
fn reach_agents(
    rt: &tokio::runtime::Runtime,
    args: &AgentOptions,
    cfg: &ClientConfig,
    addrs: &[String],
    cancel: &Cancel,
    obs: &mut dyn Observer,
) -> Result<Vec<Result<Remote, String>>, Error> {
    let stop = cancel.flag();
    let mut reached = rt.block_on(client::connect_all(addrs, cfg, 8, stop))?;
    let deadline = std::time::Instant::now() + args.wait_for_agents;
    let mut said = false;
    while std::time::Instant::now() < deadline && reached.iter().any(|r| r.is_err()) {
        let missing: Vec<usize> = (0..reached.len()).filter(|&i| reached[i].is_err()).collect();
        if !said {
            obs.event(&RunEvent::WaitingForAgents {
                seconds: args.wait_for_agents.as_secs_f64(),
                missing: missing.len(),
                total: addrs.len(),
            });
            said = true;
        }
        if cancel.sleep(Duration::from_secs(2)) {
            return Err(Error::Interrupted("interrupted while waiting for the agents; nothing ran".into()));
        }
        let again: Vec<String> = missing.iter().map(|&i| addrs[i].clone()).collect();
        for (i, r) in missing.into_iter().zip(rt.block_on(client::connect_all(&again, cfg, 8, stop))?) {
            reached[i] = r;
        }
    }
    Ok(reached)
}

/// The targets of every agent, named `ADDR:PATH`, as the agents opened them (a relay's by the
/// agent of its group each is on).
fn target_infos(remotes: &[Remote], facts: &[Vec<pb::TargetFacts>]) -> Vec<TargetInfo> {
    let mut out = Vec::new();
    for (r, list) in remotes.iter().zip(facts) {
        for f in list {
            let host = if f.host.is_empty() { &r.addr } else { &f.host };
            out.push(TargetInfo {
                path: format!("{host}:{}", f.path),
                kind: f.kind.clone(),
                size: f.size,
                logical_block: f.logical_block,
                group: f.group.clone(),
                scratch: f.scratch,
                preconditioned_at: None,
                lun: agent_lun(host, &f.lun),
                device: agent_queue(&f.queue_json),
            });
        }
    }
    out
}

/// Every agent's clock as the run starts (a relay's agents' as it measured them, from this
/// host's), and any warning about it.
fn said_clocks(remotes: &[Remote], children: &[Vec<(String, pb::HelloReply, i64, i64)>], obs: &mut dyn Observer) {
    for (r, group) in remotes.iter().zip(children) {
        obs.event(&RunEvent::AgentClock {
            addr: r.addr.clone(),
            hostname: r.hello.hostname.clone(),
            cores: r.hello.cores,
            offset_ms: r.offset_ns as f64 / 1e6,
            rtt_ms: r.rtt_ns as f64 / 1e6,
            relay_of: if r.relay { group.len() as u32 } else { 0 },
            through: None,
        });
        if let Some(w) = &r.clock_warning {
            obs.warning(w);
        }
        // A relay's agents: their clocks as it measured them, from this host's.
        for (addr, hello, offset_ns, rtt_ns) in group {
            obs.event(&RunEvent::AgentClock {
                addr: addr.clone(),
                hostname: hello.hostname.clone(),
                cores: hello.cores,
                offset_ms: *offset_ns as f64 / 1e6,
                // Its round trip to its relay, which measured it.
                rtt_ms: *rtt_ns as f64 / 1e6,
                relay_of: 0,
                through: Some(r.addr.clone()),
            });
            // Its relay refused it past --max-skew-ms off this host's clock; nearer, it is
            // warned of as an agent of this host's own would be (both measurements' round trips
            // uncertain).
            let rtt = rtt_ns.saturating_add(r.rtt_ns);
            if let ClockVerdict::Warn(w) = check_clock(addr, *offset_ns, rtt, Duration::from_secs(86_400)) {
                obs.warning(&w);
            }
        }
    }
}

/// What became of one relay's group: the relay, its agents reached (address, Hello, clock offset
/// from this host's, round trip from the relay) and those lost with why — or, the relay lost, all of them with why.
type RelayReach =
    Result<(Remote, Vec<(String, pb::HelloReply, i64, i64)>, Vec<(String, String)>), Vec<(String, String)>>;

/// `run --launch --relay-every` (issue 46): every relay dialled and made the relay of its
/// group for this run, under a grant minted from the run's credentials (its delegations end
/// with them).
async fn reach_relays(
    args: &AgentOptions,
    cfg: &ClientConfig,
    hosts: &[(String, Vec<TargetGroup>, f64)],
    run_key: u32,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<Vec<RelayReach>, Error> {
    let Some(run) = &args.relay_credentials else {
        return Err(Error::Usage(
            "relays need credentials to mint their grants with: --relay-every goes with --launch or --relays".into(),
        ));
    };
    // The delegations last as long as the run's credentials (`--launch-valid-h`, which the
    // launch holds to the plan's length and a margin; a hand-started cluster's: see the
    // runner): a run slower than its plan (scratch files to fill, steps' set-up) keeps its
    // relays; launched agents end then anyway.
    let not_after = run.expires_unix;
    let addrs: Vec<String> = args.relays.iter().map(|(r, _)| r.clone()).collect();
    let reached = client::connect_all(&addrs, cfg, 8, stop).await?;
    // Every relay joins its group at once: a group with an agent that does not answer takes
    // the connection deadline, the others do not wait for it.
    let mut joins = Vec::new();
    for ((relay, group), r) in args.relays.iter().zip(reached) {
        let mut remote = match r {
            Ok(r) => r,
            Err(why) => {
                joins.push((relay, group, Err(why)));
                continue;
            }
        };
        let list: Vec<(String, Vec<TargetGroup>)> = group
            .iter()
            .map(|c| (c.clone(), hosts.iter().find(|h| &h.0 == c).map(|h| h.1.clone()).unwrap_or_default()))
            .collect();
        // Each host its `workers_scale`: its relay gives it its share of every step's workers.
        let scales: Vec<f64> = group.iter().map(|c| hosts.iter().find(|h| &h.0 == c).map_or(1.0, |h| h.2)).collect();
        let names: Vec<String> = group.iter().map(|c| auth::host_of(c).to_string()).collect();
        let grant = run.relay_grant(auth::host_of(relay), &names, run_key, not_after)?;
        let (ca, skew) = (run.ca_pem.clone(), cfg.max_skew);
        let join = tokio::spawn(async move {
            let answers =
                crate::coordinator::relay::join_uneven(&mut remote, &grant, &ca, &list, &scales, run_key, skew).await;
            (remote, list, answers)
        });
        joins.push((relay, group, Ok(join)));
    }
    let all = async {
        let mut out = Vec::new();
        for (relay, group, join) in joins {
            let all_lost =
                |why: &str| -> Vec<(String, String)> { group.iter().map(|c| (c.clone(), why.to_string())).collect() };
            let (remote, list, answers) = match join {
                Err(why) => {
                    out.push(Err(all_lost(&format!("its relay {relay} could not be reached: {why}"))));
                    continue;
                }
                Ok(join) => join.await.map_err(|e| Error::Runtime(format!("joining relay {relay}: {e}")))?,
            };
            match answers {
                Ok(answers) => {
                    let (mut reached, mut lost) = (Vec::new(), Vec::new());
                    for ((addr, _), a) in list.iter().zip(answers) {
                        if a.lost.is_empty() {
                            let offset = a.offset_ns.saturating_add(remote.offset_ns);
                            reached.push((addr.clone(), a.hello.unwrap_or_default(), offset, a.rtt_ns));
                        } else {
                            lost.push((addr.clone(), format!("its relay {relay} could not reach it: {}", a.lost)));
                        }
                    }
                    out.push(Ok((remote, reached, lost)));
                }
                Err(e @ iocurve_net::NetError::Input(_)) => return Err(e.into()),
                Err(e) => out.push(Err(all_lost(&format!("its relay {relay} failed: {e}")))),
            }
        }
        Ok(out)
    };
    tokio::select! {
        r = all => r,
        _ = client::until_stopped(stop) => Err(Error::Interrupted("interrupted while the relays reached their agents; nothing ran".into())),
    }
}

/// How the coordinator reaches the agents, from the options (token, CA, client certificate).
fn client_config(args: &AgentOptions, obs: &mut dyn Observer) -> Result<ClientConfig, Error> {
    if let Some(i) = &args.issued {
        // A launched run: its own CA, mutual TLS, each agent its host's token.
        return Ok(ClientConfig {
            token: i.token.clone(),
            ca_pem: Some(i.ca_pem.clone()),
            identity: Some((i.client_cert_pem.clone(), i.client_key_pem.clone())),
            insecure: false,
            tls_name: None,
            per_host_tokens: true,
            max_skew: Duration::from_millis(args.max_skew_ms),
            delegation: None,
        });
    }
    let token_file = args.token_file.clone().ok_or_else(|| {
        Error::Usage("--hosts needs the agents' token: --token-file FILE (or IOCURVE_TOKEN_FILE)".into())
    })?;
    let token = auth::read_token(&token_file)?;
    if args.insecure {
        obs.warning("--insecure: talking to the agents in plain text; the token travels unencrypted");
    }
    let ca_pem = match (&args.ca, args.insecure) {
        (Some(p), _) => Some(certs::read_pem(p, "--ca")?),
        (None, true) => None,
        (None, false) => {
            return Err(Error::Usage(
                "--hosts talks TLS: give --ca (the CA that signed the agents' certificates, e.g. from `iocurve certs init`) or --insecure".into(),
            ));
        }
    };
    let identity = match (&args.client_cert, &args.client_key) {
        (Some(c), Some(k)) => Some((certs::read_pem(c, "--client-cert")?, certs::read_pem(k, "--client-key")?)),
        (None, None) => None,
        _ => return Err(Error::Usage("--client-cert and --client-key go together".into())),
    };
    Ok(ClientConfig {
        token,
        ca_pem,
        identity,
        insecure: args.insecure,
        tls_name: args.tls_name.clone(),
        per_host_tokens: args.token_per_host,
        max_skew: Duration::from_millis(args.max_skew_ms),
        delegation: None,
    })
}

/// The coordinator's runtime. With the in-process agent it runs on the calling thread, only
/// while a step runs: merging a few messages a second needs no thread of its own, and the I/O
/// threads keep the cores. With remote agents one thread keeps answering their keep-alive
/// pings between steps too, so that no agent takes the coordinator for gone meanwhile.
fn runtime(remote: bool) -> Result<tokio::runtime::Runtime, Error> {
    let mut b = if remote {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(1);
        b
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    b.enable_all().build().map_err(|e| Error::Runtime(format!("cannot start the network runtime: {e}")))
}

impl Cluster {
    /// The agents that run the I/O, each with the facts it gave (none for a local run: the
    /// coordinator's own host runs it).
    pub fn agents(&self) -> impl Iterator<Item = (&str, &iocurve_net::pb::HelloReply)> {
        // A relay's: the agents of its group, which run the I/O.
        self.remotes.iter().zip(&self.children).filter(|(r, _)| !r.in_process).flat_map(|(r, group)| {
            let own = group.is_empty().then_some((r.addr.as_str(), &r.hello));
            own.into_iter().chain(group.iter().map(|(a, h, _, _)| (a.as_str(), h)))
        })
    }

    /// Agents lost before the first step (address, why), with `--on-host-loss continue`.
    pub fn unreachable(&self) -> &[(String, String)] {
        &self.unreachable
    }

    /// A local run: one in-process agent on the targets the run opened (and its verification
    /// map).
    pub fn local(targets: Arc<TargetSet>, verify: Option<KeptMap>) -> Result<Cluster, Error> {
        let rt = runtime(false)?;
        let mut remotes = vec![rt.block_on(client::connect_in_process(InProcess { targets, verify }))?];
        // The same request as an agent's: the in-process agent answers with the run's targets.
        let never = std::sync::atomic::AtomicBool::new(false);
        let facts = rt
            .block_on(client::targets(&mut remotes, &[Vec::new()], 0, false, false, 0, &never))?
            .into_iter()
            .collect::<Result<Vec<_>, String>>()
            .map_err(Error::Runtime)?;
        Ok(Cluster {
            rt,
            remotes,
            children: vec![Vec::new()],
            targets: vec![Vec::new()],
            child_hosts: Default::default(),
            scales: vec![1.0],
            listed: vec![0],
            facts,
            unreachable: Vec::new(),
            scratch_size: 0,
            run_key: 0,
            // The in-process agent has the run's own journal (in `verify`).
            verify_journal: false,
            write_iolog: false,
            in_full: Default::default(),
            abort_on_host_loss: true,
            // Nothing to cross and no other host to start with: the step starts once it is set
            // up.
            lead: Duration::ZERO,
            last_setup: None,
            // The engine itself: it is not lost, however long a stalled device holds it.
            silence: Duration::from_secs(86_400),
        })
    }

    /// The cores of the smallest host (from each agent's Hello): the most I/O threads a step
    /// chosen by iocurve runs.
    pub fn cores(&self) -> usize {
        self.hellos().map(|h| h.cores as usize).filter(|&c| c > 0).min().unwrap_or(1)
    }

    /// The Hello of every host that runs I/O: an agent's own, a relay's agents' (the in-process
    /// agent's too).
    fn hellos(&self) -> impl Iterator<Item = &pb::HelloReply> {
        self.remotes.iter().zip(&self.children).flat_map(|(r, group)| {
            let own = group.is_empty().then_some(&r.hello);
            own.into_iter().chain(group.iter().map(|c| &c.1))
        })
    }

    /// Every agent runs back-end `b` itself (one that lacks it runs its fallback).
    pub fn runs_everywhere(&self, b: iocurve_plan::Backend) -> bool {
        self.hellos().all(|h| iocurve_net::wire::availability(h).runs(b))
    }

    /// Connects to every agent and has each open the plan's targets; nothing runs yet. Returns
    /// the cluster and every agent's targets as the agents opened them.
    pub fn connect(
        plan: &Plan,
        args: &AgentOptions,
        scratch_size: u64,
        cancel: &Cancel,
        obs: &mut dyn Observer,
    ) -> Result<(Cluster, Vec<TargetInfo>), Error> {
        let cfg = client_config(args, obs)?;
        let rt = runtime(true)?;
        // --hosts: every agent on the plan's groups, weights and all. [[hosts]] with targets of
        // its own: that host's targets as one group; without: the plan's groups.
        let host_groups = |targets: &[String]| -> Vec<TargetGroup> {
            if targets.is_empty() {
                plan.groups.clone()
            } else {
                vec![TargetGroup { name: "targets".into(), weight: 1, targets: targets.to_vec() }]
            }
        };
        let hosts: Vec<(String, Vec<TargetGroup>, f64)> = if args.addresses.is_empty() {
            plan.hosts.iter().map(|h| (h.address.clone(), host_groups(&h.targets), h.workers_scale)).collect()
        } else {
            args.addresses.iter().map(|a| (a.clone(), plan.groups.clone(), 1.0)).collect()
        };
        plan.check_sweeps(hosts.len()).map_err(Error::Usage)?;
        let places = relay_places(args);
        if !args.relays.is_empty() {
            plan.check_sweeps_in_groups(&places.ends).map_err(Error::Usage)?;
        }
        let keep_going = !args.abort_on_host_loss;
        let stop = cancel.flag();
        let mut unreachable = args.unreachable.clone();
        // An agent that cannot be reached, or fails opening its targets, is lost: with
        // `--on-host-loss continue` the run goes on with the others (and says so), else it
        // stops before any I/O.
        let mut lose = |obs: &mut dyn Observer, addr: &str, why: String| -> Result<(), Error> {
            if !keep_going {
                return Err(Error::Runtime(format!("{why}; --on-host-loss abort: the run stops before any I/O")));
            }
            obs.warning(&format!("{why}: the run goes on without agent {addr} (--on-host-loss continue)"));
            unreachable.push((addr.to_string(), why));
            Ok(())
        };
        let run_key = iocurve_engine::safety::lock::RunKey::draw().0;
        // Per agent (a relay: per host of its group), its address and Hello.
        let mut children: Vec<Vec<(String, pb::HelloReply, i64, i64)>> = Vec::new();
        let (mut remotes, mut targets, mut scales, mut listed) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut child_hosts = std::collections::HashMap::new();
        if args.relays.is_empty() {
            let addrs: Vec<String> = hosts.iter().map(|h| h.0.clone()).collect();
            let reached = reach_agents(&rt, args, &cfg, &addrs, cancel, obs)?;
            for (i, ((addr, groups, scale), r)) in hosts.iter().zip(reached).enumerate() {
                match r {
                    Ok(r) => {
                        remotes.push(r);
                        targets.push(groups.clone());
                        scales.push(*scale);
                        listed.push(i);
                    }
                    Err(why) => lose(obs, addr, why)?,
                }
            }
            children = remotes.iter().map(|_| Vec::new()).collect();
        } else {
            let through = rt.block_on(reach_relays(args, &cfg, &hosts, run_key, stop))?;
            child_hosts = hosts.iter().map(|h| (h.0.clone(), (h.1.clone(), h.2))).collect();
            let lasts = places.lasts.clone();
            for (i, r) in through.into_iter().enumerate() {
                match r {
                    Ok((remote, group, lost)) => {
                        for (addr, why) in lost {
                            lose(obs, &addr, why)?;
                        }
                        if group.is_empty() {
                            continue;
                        }
                        remotes.push(remote);
                        targets.push(Vec::new());
                        scales.push(1.0);
                        listed.push(lasts.get(i).copied().unwrap_or(i));
                        children.push(group);
                    }
                    Err(lost) => {
                        for (addr, why) in lost {
                            lose(obs, &addr, why)?;
                        }
                    }
                }
            }
        }
        // The coordinator keeps its claim on every agent while it waits on others (a slow
        // host's preparation, a pause between steps): an agent lets go of an owner that has
        // been silent for its claim expiry (60 s by default) with nothing running. The task
        // ends with the run's runtime.
        let clients: Vec<_> = remotes.iter().map(|r| r.client.clone()).collect();
        rt.spawn(async move {
            loop {
                tokio::time::sleep(CLAIM_KEEPING).await;
                for c in &clients {
                    let mut c = c.clone();
                    let _ = tokio::time::timeout(Duration::from_secs(5), c.ping(pb::PingRequest {})).await;
                }
            }
        });
        let opened = rt.block_on(client::targets(
            &mut remotes,
            &targets,
            scratch_size,
            plan.writes(),
            plan.scratch_unfilled(),
            run_key,
            stop,
        ))?;
        let mut facts: Vec<Vec<pb::TargetFacts>> = Vec::new();
        for (i, r) in opened.into_iter().enumerate().rev() {
            match r {
                Ok(f) => facts.push(f),
                Err(why) => {
                    // A relay's: each of its agents, not the relay, is a host lost.
                    if remotes[i].relay {
                        for c in &children[i] {
                            lose(obs, &c.0, format!("through relay {}: {why}", remotes[i].addr))?;
                        }
                    } else {
                        lose(obs, &remotes[i].addr, why)?;
                    }
                    remotes.remove(i);
                    targets.remove(i);
                    scales.remove(i);
                    listed.remove(i);
                    children.remove(i);
                }
            }
        }
        facts.reverse();
        // A relay's agents that could not open their targets are lost as agents are.
        for (r, group) in remotes.iter_mut().zip(&mut children) {
            for l in std::mem::take(&mut r.lost_behind) {
                group.retain(|c| c.0 != l.address);
                lose(obs, &l.address, format!("through relay {}: {}", r.addr, l.why))?;
            }
        }
        if remotes.is_empty() {
            return Err(Error::Runtime("no agent could be reached: nothing ran".into()));
        }
        let target_infos = target_infos(&remotes, &facts);
        said_clocks(&remotes, &children, obs);
        let cluster = Cluster {
            rt,
            remotes,
            children,
            targets,
            child_hosts,
            scales,
            listed,
            facts,
            unreachable,
            scratch_size,
            run_key,
            verify_journal: false,
            write_iolog: false,
            in_full: Default::default(),
            abort_on_host_loss: args.abort_on_host_loss,
            lead: Duration::from_millis(500),
            last_setup: None,
            silence: AGENT_SILENCE,
        };
        Ok((cluster, target_infos))
    }

    /// Agents journal the verifying writes of every step from now on (`run --verify-journal`).
    pub fn journal_verifying_writes(&mut self) {
        self.verify_journal = true;
    }

    /// Every host sends the I/Os of every step from now on, for the run's I/O log
    /// (`run --write-iolog`; [`crate::coordinator::client::MultiStep::iolog`]).
    pub fn write_iolog(&mut self) {
        self.write_iolog = true;
    }

    /// `run --host-intervals`: the hosts behind relays whose every interval is kept, as a host's
    /// is without relays, instead of its step summed up. Each of `names` is `all`, a host's
    /// address, its host name as given (the address without its port) or its hostname as it
    /// says (a name several hosts share names them all); a name of no host of the run (reached
    /// or not) is bad input. Hosts not behind a relay have theirs kept anyway.
    pub fn host_intervals(&mut self, names: &[String]) -> Result<(), String> {
        let all = names.iter().any(|n| n == "all");
        // (Names as DNS has them: in any case.)
        let names_it = |n: &str, addr: &str, hostname: &str| {
            n.eq_ignore_ascii_case(addr)
                || n.eq_ignore_ascii_case(auth::host_of(addr))
                || n.eq_ignore_ascii_case(hostname)
        };
        let own = self.remotes.iter().filter(|r| !r.relay).map(|r| (r.addr.as_str(), r.hello.hostname.as_str()));
        let behind = self.children.iter().flatten().map(|c| (c.0.as_str(), c.1.hostname.as_str()));
        let unreached = self.unreachable.iter().map(|u| (u.0.as_str(), ""));
        let hosts: Vec<(&str, &str, bool)> =
            own.chain(unreached).map(|(a, n)| (a, n, false)).chain(behind.map(|(a, n)| (a, n, true))).collect();
        if let Some(n) = names.iter().find(|n| *n != "all" && !hosts.iter().any(|h| names_it(n, h.0, h.1))) {
            let listed: Vec<&str> = hosts.iter().map(|h| h.0).take(8).collect();
            let more = if hosts.len() > 8 { ", …" } else { "" };
            return Err(format!(
                "--host-intervals: {} is none of the run's hosts ({}{more}): name a host by its address, its name or its hostname, or say all",
                iocurve_net::printable(n),
                listed.join(", ")
            ));
        }
        self.in_full = hosts
            .iter()
            .filter(|h| h.2 && (all || names.iter().any(|n| names_it(n, h.0, h.1))))
            .map(|h| h.0.to_string())
            .collect();
        Ok(())
    }

    /// Preconditions every host's targets at once (`run --precondition`, local or on agents):
    /// the same pass on the in-process agent of a local run as on remote ones. The coordinator
    /// keeps each target's state in its results database — under its canonical path for a
    /// local run (as `iocurve precondition` does), under `ADDR:PATH` on agents: a target done
    /// before is skipped, an interrupted pass resumes where it stopped, and a scratch file
    /// created now or left half-prepared owes nothing to an earlier record. No write returning
    /// for `stuck_after` on a host ends it with an error (the states so far are kept). Returns
    /// false when Ctrl-C stopped it; fills in `preconditioned_at` of `infos`.
    pub fn precondition(
        &mut self,
        plan: &Plan,
        store: &Store,
        infos: &mut [TargetInfo],
        stuck_after: Duration,
        cancel: &Cancel,
        obs: &mut dyn Observer,
    ) -> Result<bool, Error> {
        let (pattern, unit) = plan.precondition_pattern();
        let cfg = precondition::run_config(pattern, unit);
        let data_json = serde_json::to_string(&cfg.pattern).unwrap_or_default();
        let w = plan.workloads.iter().find(|w| w.writes()).or(plan.workloads.first());
        let workload_json = serde_json::to_string(&w).unwrap_or_default();
        let local = self.remotes.iter().all(|r| r.in_process);
        let mut passes: Vec<Vec<PassTarget>> = Vec::new();
        let mut keys = vec![String::new(); infos.len()];
        let mut reqs = Vec::new();
        for (h, r) in self.remotes.iter().enumerate() {
            let first = r.target_offset as usize;
            let mut own = Vec::new();
            let mut resume = Vec::new();
            for (i, f) in self.facts[h].iter().enumerate() {
                let Some(t) = infos.get(first + i) else { break };
                // How results name it, and the key its record is kept under.
                let key =
                    if r.in_process { precondition::key_of(std::path::Path::new(&f.path)) } else { t.path.clone() };
                keys[first + i] = key.clone();
                let bs = iocurve_engine::precondition::write_size(t.size, t.logical_block, cfg.bs);
                let n = iocurve_engine::precondition::chunks(t.size, bs);
                let pass = precondition::Pass { key: &key, name: &t.path, size: t.size, bs, data_json: &data_json };
                let state = match precondition::start_pass(store, &pass, f.scratch, !f.fresh, obs)? {
                    // Done before: the agent writes none of it.
                    None => {
                        own.push(PassTarget::new(f, t, None));
                        PreState { watermark: n, above: Vec::new() }
                    }
                    Some((state, record)) => {
                        if local {
                            obs.event(&RunEvent::PreconditionWriting {
                                target: t.path.clone(),
                                size: t.size,
                                bs,
                                in_flight: cfg.qd,
                                data: cfg.pattern.describe(),
                            });
                        }
                        own.push(PassTarget::new(f, t, Some(record)));
                        state
                    }
                };
                resume.push(pb::PreconditionResume {
                    target: i as u32,
                    bs,
                    state_json: state.to_json(),
                    path: f.path.clone(),
                });
            }
            passes.push(own);
            reqs.push(pb::PreconditionRequest {
                groups: client::wire_groups(&self.targets[h]),
                scratch_size: self.scratch_size,
                workload_json: workload_json.clone(),
                bs: cfg.bs,
                qd: cfg.qd,
                resume,
                stuck_after_s: stuck_after.as_secs_f64(),
                run_key: self.run_key,
            });
        }
        if !local {
            obs.event(&RunEvent::PreconditionOnAgents {
                // The hosts: a relay stands for its group's.
                agents: self.hosts() as usize,
                targets: infos.len(),
                bs: cfg.bs,
                in_flight: cfg.qd,
                data: cfg.pattern.describe(),
            });
        }
        // One target: its progress lines need no name.
        let named = !local || infos.len() > 1;
        let mut save_error = None;
        let mut on_progress = |h: usize, p: &pb::PreconditionProgress| {
            // A target the agent did not report at connection (a glob matching other files now)
            // has no record here: its state is not kept, and a later run starts it over.
            let Some(PassTarget { path, name, record: Some((before, record)), shown, started }) =
                passes.get_mut(h).and_then(|r| r.get_mut(p.target as usize))
            else {
                return;
            };
            if *path != p.path {
                return;
            }
            *started = true;
            // A pass repeats its last progress while it syncs, and at its end with `complete`.
            if std::mem::replace(shown, p.done_bytes) != p.done_bytes {
                obs.event(&RunEvent::PreconditionProgress {
                    who: if named { name.clone() } else { String::new() },
                    done: p.done_bytes,
                    total: p.total_bytes,
                    session: p.session_bytes,
                    elapsed_s: p.elapsed_s,
                });
            }
            record.state_json = p.state_json.clone();
            record.bytes_written = *before + p.session_bytes;
            if p.complete {
                record.finished_at = Some(crate::time::now_rfc3339());
                obs.event(&RunEvent::PreconditionComplete { target: name.clone() });
            }
            if let Err(e) = store.save_precondition(record) {
                save_error.get_or_insert(e);
            }
        };
        let mut told: Vec<(bool, String)> = Vec::new();
        let who: Vec<String> = self.remotes.iter().map(|r| r.who()).collect();
        let mut on_notes = |h: usize, d: &pb::PreconditionDone| {
            let clean = iocurve_net::printable;
            told.extend(d.notes.iter().map(|n| (false, format!("{}{}", who[h], clean(n)))));
            told.extend(d.warnings.iter().map(|w| (true, format!("{}{}", who[h], clean(w)))));
        };
        let end = self.rt.block_on(client::precondition(
            &mut self.remotes,
            reqs,
            cancel.flag(),
            self.silence,
            &mut on_progress,
            &mut on_notes,
        ));
        for (warning, line) in &told {
            if *warning { obs.warning(line) } else { obs.event(&RunEvent::PassNote(line.clone())) }
        }
        let end = end?;
        if let Some(e) = save_error {
            return Err(e.into());
        }
        for (t, key) in infos.iter_mut().zip(&keys) {
            t.preconditioned_at = store.precondition(key, t.size).ok().flatten().and_then(|r| r.finished_at);
        }
        let complete = end == client::PassEnd::Complete;
        if !complete {
            // The targets it was writing when it stopped; those it never reached wait their turn.
            for t in passes
                .iter()
                .flatten()
                .filter(|t| t.started && t.record.as_ref().is_some_and(|r| r.1.finished_at.is_none()))
            {
                obs.event(&RunEvent::PreconditionInterrupted { target: t.name.clone() });
            }
        }
        Ok(complete)
    }

    /// The final verification pass (`run --verify-final`) on every host at once, the
    /// in-process agent of a local run like remote ones: each reads back every block its map
    /// knows (a local run's `--verify-map`, an agent's own map of its targets). A pass no read
    /// of which returns for `stuck_after` ends with an error; Ctrl-C ends it within about a
    /// second. The counts add up over the hosts; every problem names its target as results do.
    pub fn verify_final(
        &mut self,
        plan: &Plan,
        infos: &[TargetInfo],
        stuck_after: Duration,
        cancel: &Cancel,
        obs: &mut dyn Observer,
    ) -> Result<(FinalVerification, Vec<StoredProblem>), Error> {
        let Some(w) = plan.workloads.iter().find(|w| w.verify) else {
            return Err(Error::Usage("no workload verifies: nothing to read back".into()));
        };
        let bs = w.bs[0].bytes;
        let started_at = crate::time::now_rfc3339();
        let reqs = self
            .targets
            .iter()
            .map(|g| pb::VerifyPassRequest {
                groups: client::wire_groups(g),
                bs,
                stuck_after_s: stuck_after.as_secs_f64(),
                run_key: self.run_key,
            })
            .collect();
        let offsets: Vec<usize> = self.remotes.iter().map(|r| r.target_offset as usize).collect();
        let addrs: Vec<String> = self.remotes.iter().map(|r| r.addr.clone()).collect();
        let who: Vec<String> =
            self.remotes.iter().map(|r| if r.in_process { String::new() } else { r.addr.clone() }).collect();
        let mut problems = Vec::new();
        let mut on_problem = |h: usize, p: &pb::VerifyProblem| {
            let target = infos
                .get(offsets[h] + p.target as usize)
                .map_or_else(|| format!("{}:target {}", addrs[h], p.target), |t| t.path.clone());
            problems.push(StoredProblem {
                target,
                block: p.block,
                // What an agent says is escaped before it is stored (issue 35, finding 8).
                kind: iocurve_net::printable(&p.kind),
                expected: p.expected as u16,
                found_generation: (p.found_generation != 0).then_some(p.found_generation as u16),
                found: iocurve_net::printable(&p.found),
            });
        };
        // The hosts say how far they are four times a second; a line a second each is shown.
        let mut shown = vec![std::time::Instant::now(); self.remotes.len()];
        let mut reached = vec![(0u64, 0u64); self.remotes.len()];
        let mut on_progress = |h: usize, done: u64, total: u64| {
            reached[h] = (done, total);
            if shown[h].elapsed() >= Duration::from_secs(1) {
                shown[h] = std::time::Instant::now();
                obs.event(&RunEvent::VerifyProgress { who: who[h].clone(), done, total });
            }
        };
        let passes = self.rt.block_on(client::verify_pass(
            &mut self.remotes,
            reqs,
            cancel.flag(),
            self.silence,
            &mut on_progress,
            &mut on_problem,
        ))?;
        let passes = match passes {
            client::VerifyEnd::Done(p) => p,
            client::VerifyEnd::Interrupted(why) => {
                let (done, total) = reached.iter().fold((0, 0), |a, r| (a.0 + r.0, a.1 + r.1));
                return Err(Error::Interrupted(match why {
                    Some(why) => format!("verification {why}"),
                    None => format!(
                        "verification interrupted by Ctrl-C after {} of {}; nothing is recorded as verified",
                        iocurve_plan::format_size(done),
                        iocurve_plan::format_size(total)
                    ),
                }));
            }
        };
        let mut counts = VerifyCounts::default();
        for p in &passes {
            counts.merge(&p.counts);
        }
        let unlisted: u64 = passes.iter().map(|p| p.unlisted).sum();
        if self.remotes.iter().all(|r| r.in_process) {
            crate::verification::tell_counts("verification", &counts, unlisted, "", obs);
        } else {
            let heading = format!("verification on {} agents", self.hosts());
            crate::verification::tell_counts(&heading, &counts, unlisted, " per host", obs);
        }
        let fv = FinalVerification {
            map: self
                .remotes
                .iter()
                .zip(&passes)
                // A relay's pass names each of its agents' maps itself.
                .map(|(r, p)| if r.in_process || r.relay { p.map.clone() } else { format!("{}:{}", r.addr, p.map) })
                .collect::<Vec<_>>()
                .join(", "),
            bs,
            started_at,
            finished_at: crate::time::now_rfc3339(),
            counts,
            unlisted,
        };
        Ok((fv, problems))
    }

    /// The `workers_scale` of each host `step` runs on (a host-count sweep's: the first listed).
    pub fn scales_of(&self, step: &iocurve_plan::RampStep) -> Vec<f64> {
        let n = step.hosts.map_or(self.remotes.len(), |h| self.listed.iter().filter(|&&i| i < h as usize).count());
        self.scales[..n].to_vec()
    }

    /// The `workers_scale` of every host `step` runs on, those behind relays each its own.
    pub fn host_scales_of(&self, step: &iocurve_plan::RampStep) -> Vec<f64> {
        let n = self.scales_of(step).len();
        (0..n)
            .flat_map(|i| match self.remotes[i].relay {
                true => self.children[i].iter().map(|c| self.child_hosts.get(&c.0).map_or(1.0, |h| h.1)).collect(),
                false => vec![self.scales[i]],
            })
            .collect()
    }

    /// The hosts a step runs on now: those of the run less those lost so far.
    pub fn hosts(&self) -> u32 {
        self.remotes.iter().map(|r| r.hosts.max(1)).sum()
    }

    /// Runs one step on every agent; returns the merged record, each host's own inside it, with
    /// only the last few intervals' figures held (see [`MultiStep`]): `obs` must store them.
    /// `planned_hosts`: the hosts the run started its steps with (the record keeps it). A
    /// concurrent step: `w` times and names it, its members (at the step, with their workers
    /// at scale 1) run.
    pub fn run_step(
        &mut self,
        (w, members, replay): (&Workload, &[(Workload, u32)], crate::replay::ReplayAt),
        step: iocurve_plan::RampStep,
        planned_hosts: u32,
        faults: &[Fault],
        obs: &mut dyn StepObserver,
        cancel: &Cancel,
    ) -> Result<MultiStep, Error> {
        let workers = step.workers;
        // A host-count sweep's step on the first `hosts` listed that are still with the run (a
        // lost one leaves the step on fewer, flagged: no other host takes its place). They are
        // the first of `remotes`, which keeps the listed order.
        let n = self.scales_of(&step).len();
        // Each host its share of a closed-loop step's workers (`workers_scale`); a rate step's
        // schedule is shared out evenly whatever the hosts' sizes.
        // (A concurrent step's host runs each member's share scaled: their sum.)
        let share = |s: f64| crate::coordinator::host_share(workers, members, step.rate.is_some(), s);
        let host_workers: Vec<u32> = self.scales.iter().take(n).map(|&s| share(s)).collect();
        // Each relay's hosts still with the run, in its order, and the share each runs (its
        // relay gives it): what the relay's rows of them must say.
        let relayed_hosts: Vec<Vec<(String, u32)>> = (0..n)
            .map(|i| match self.remotes[i].relay {
                true => self.children[i]
                    .iter()
                    .map(|c| (c.0.clone(), share(self.child_hosts.get(&c.0).map_or(1.0, |h| h.1))))
                    .collect(),
                false => Vec::new(),
            })
            .collect();
        // Each relay's hosts asked for in full.
        let host_intervals: Vec<Vec<String>> = match self.in_full.is_empty() {
            true => Vec::new(),
            false => (0..n)
                .map(|i| {
                    let group = self.children.get(i).into_iter().flatten();
                    group.filter(|c| self.in_full.contains(&c.0)).map(|c| c.0.clone()).collect()
                })
                .collect(),
        };
        // A replay's share for each host, packed: the trace split over the hosts behind relays
        // as over the coordinator's own, a relay given its agents' shares in its group's order.
        let (shares, relayed_replays) = match replay {
            Some((l, speed)) => {
                let behind: Vec<usize> =
                    (0..n).map(|i| if self.remotes[i].relay { self.children[i].len() } else { 1 }).collect();
                let mut all = l.shares(w, speed, behind.iter().sum())?.into_iter();
                let (mut own, mut relayed) = (Vec::with_capacity(n), Vec::with_capacity(n));
                for (i, &k) in behind.iter().enumerate() {
                    let parts: Vec<Vec<u8>> = all.by_ref().take(k).collect();
                    // What an agent (or a relay) reads in one request, its share's or its
                    // agents': more is refused here, by name, not taken for a host lost.
                    let bytes: usize = parts.iter().map(Vec::len).sum();
                    if bytes > MAX_REPLAY_BYTES {
                        let (who, mib) = (&self.remotes[i].addr, |b: usize| b as f64 / (1 << 20) as f64);
                        return Err(Error::Usage(match self.remotes[i].relay {
                            true => format!(
                                "workload {}: the trace's shares of relay {who}'s {k} hosts come to {:.1} MiB in one request: at most {:.0} MiB a relay; use smaller groups (--relay-every) or replay a part of the trace",
                                w.name,
                                mib(bytes),
                                mib(MAX_REPLAY_BYTES)
                            ),
                            false => format!(
                                "workload {}: agent {who}'s share of the trace comes to {:.1} MiB in one request: at most {:.0} MiB a host; replay on more hosts or a part of the trace",
                                w.name,
                                mib(bytes),
                                mib(MAX_REPLAY_BYTES)
                            ),
                        }));
                    }
                    if !self.remotes[i].relay {
                        own.push(parts.into_iter().next().unwrap_or_default());
                        relayed.push(Vec::new());
                        continue;
                    }
                    own.push(Vec::new());
                    relayed.push(parts);
                }
                (Some(own), relayed)
            }
            None => (None, Vec::new()),
        };
        // A relay stands for its agents' targets (those still with the run) when a fault on one
        // target is placed; it places the fault among them itself.
        let fault_targets: Vec<Vec<TargetGroup>> = if self.remotes.iter().any(|r| r.relay) {
            (0..n)
                .map(|i| match self.remotes[i].relay {
                    true => self.children[i]
                        .iter()
                        .flat_map(|c| self.child_hosts.get(&c.0).into_iter().flat_map(|h| h.0.clone()))
                        .collect(),
                    false => self.targets[i].clone(),
                })
                .collect()
        } else {
            Vec::new()
        };
        let spec = StepSpec {
            workload: w,
            workers,
            host_workers: &host_workers,
            members,
            scales: &self.scales[..n],
            rate_iops: match replay {
                Some((l, speed)) => Some(l.mean_iops(speed)),
                None => step.rate.map(|r| w.rate_iops(r)),
            },
            replay: shares.as_deref(),
            relayed_replays: &relayed_replays,
            replay_speed: replay.map(|(_, s)| s),
            replay_intended: replay.map_or((0.1, Vec::new()), |(l, s)| l.intended_bins(s)),
            targets: &self.targets[..n],
            fault_targets: &fault_targets,
            relayed_hosts: &relayed_hosts,
            host_intervals: &host_intervals,
            scratch_size: self.scratch_size,
            run_key: self.run_key,
            verify_journal: self.verify_journal,
            write_iolog: self.write_iolog,
            threads: w.threads,
            backend: w.backend.name(),
            faults,
            lead: if self.lead.is_zero() {
                Duration::ZERO
            } else {
                crate::coordinator::clock::step_lead(
                    self.remotes.iter().map(|r| r.rtt_ns).max().unwrap_or(0),
                    self.last_setup,
                    workers,
                    self.lead,
                )
            },
            abort_on_host_loss: self.abort_on_host_loss,
            silence: self.silence,
            planned_hosts,
            relayed: None,
        };
        let mut m = self.rt.block_on(client::run_step(&mut self.remotes[..n], &spec, obs, cancel.flag()))?;
        self.last_setup = Some((m.setup_ns, workers));
        // A relay's lost agents sit out the rest of the run in it.
        for (r, &left) in self.remotes.iter_mut().zip(&m.hosts_left) {
            if left > 0 {
                r.hosts = left;
            }
        }
        self.hosts_behind_relays(&mut m);
        // A lost agent sits out the rest of the run (its figures so far are kept).
        for &i in m.lost.iter().rev() {
            self.remotes.remove(i);
            self.children.remove(i);
            self.targets.remove(i);
            self.scales.remove(i);
            self.listed.remove(i);
            self.facts.remove(i);
        }
        Ok(m)
    }
}

impl Cluster {
    /// The run's record of its hosts names the hosts, not their relays: a relay lost is each of
    /// its agents lost with it, and agents lost behind a relay leave its group.
    fn hosts_behind_relays(&mut self, m: &mut MultiStep) {
        let mut losses = Vec::with_capacity(m.losses.len());
        for l in std::mem::take(&mut m.losses) {
            let relay = m.lost.iter().copied().find(|&i| self.remotes[i].relay && self.remotes[i].addr == l.address);
            match relay {
                Some(i) => losses.extend(self.children[i].iter().map(|c| Lost {
                    address: c.0.clone(),
                    into_step_s: l.into_step_s,
                    why: format!("its relay {} was lost: {}", l.address, l.why),
                })),
                None => {
                    for group in &mut self.children {
                        group.retain(|c| c.0 != l.address);
                    }
                    losses.push(l);
                }
            }
        }
        m.losses = losses;
    }
}

/// A target of a precondition pass, as the coordinator follows it.
struct PassTarget {
    /// Its path on its host, as the host's events name it.
    path: String,
    /// How results and messages name it.
    name: String,
    /// Its record and the bytes it had written before this pass (None: done before, nothing to
    /// write).
    record: Option<(u64, Precondition)>,
    /// The bytes done in the last progress line shown.
    shown: u64,
    /// Its host reported progress on it.
    started: bool,
}

impl PassTarget {
    fn new(f: &pb::TargetFacts, t: &TargetInfo, record: Option<Precondition>) -> PassTarget {
        PassTarget {
            path: f.path.clone(),
            name: t.path.clone(),
            record: record.map(|r| (r.bytes_written, r)),
            shown: u64::MAX,
            started: false,
        }
    }
}

/// The LUN an agent's target is: a WWID is the same LUN from every host (one array's LUN seen
/// by several load hosts); any other identity (a file, a loop device) is the host's own.
fn agent_lun(addr: &str, lun: &str) -> Option<String> {
    let lun = iocurve_net::printable(lun);
    match lun.as_str() {
        "" => None,
        l if l.starts_with("wwid ") => Some(lun),
        l => Some(format!("{addr} {l}")),
    }
}

/// An agent's target's device queue, if it sent one that reads as one (its strings made
/// printable: they are shown).
fn agent_queue(json: &str) -> Option<iocurve_stats::DeviceQueue> {
    let mut q: iocurve_stats::DeviceQueue = serde_json::from_str(json).ok()?;
    q.device = iocurve_net::printable(&q.device);
    q.scheduler = q.scheduler.map(|s| iocurve_net::printable(&s));
    Some(q)
}
