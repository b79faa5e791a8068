//! The coordinator's hosts: agents (`run --hosts`) — connected before any I/O (token, TLS,
//! protocol, clock offset, targets accepted) — or, for a local run, one in-process agent on the
//! targets the run opened. Either way each step runs through the same coordinator (start at
//! one moment, stream, merge) and lands in the same recorder and analysis.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use iocurve_analysis::TargetInfo;
use iocurve_engine::verify::GenMap;
use iocurve_engine::{StepObserver, TargetSet};
use iocurve_net::agent::InProcess;
use iocurve_net::client::{self, ClientConfig, MultiStep, Remote, StepSpec};
use iocurve_net::{NetError, auth, certs};
use iocurve_plan::{Fault, Plan, Workload};

use crate::CliError;
use crate::cli::{HostLoss, RunArgs};

impl From<NetError> for CliError {
    fn from(e: NetError) -> Self {
        match e {
            NetError::Input(m) => CliError::Usage(m),
            NetError::Failed(m) => CliError::Runtime(m),
            NetError::Aborted(m) => CliError::Aborted(m),
        }
    }
}

/// An agent that sends nothing — its progress events, four a second, are its heartbeat — for
/// this long is lost.
const AGENT_SILENCE: Duration = Duration::from_secs(10);

pub struct Cluster {
    rt: tokio::runtime::Runtime,
    remotes: Vec<Remote>,
    /// Per agent, its target paths.
    targets: Vec<Vec<String>>,
    scratch_size: u64,
    abort_on_host_loss: bool,
    /// How long the agents get between a step's request and its start.
    lead: Duration,
    silence: Duration,
}

/// How the coordinator reaches the agents, from the options (token, CA, client certificate).
fn client_config(args: &RunArgs) -> Result<ClientConfig, CliError> {
    let token_file = args.token_file.clone().ok_or_else(|| {
        CliError::Usage("--hosts needs the agents' token: --token-file FILE (or IOCURVE_TOKEN_FILE)".into())
    })?;
    let token = auth::read_token(&token_file)?;
    if args.insecure {
        crate::errln!("WARNING: --insecure: talking to the agents in plain text; the token travels unencrypted");
    }
    let ca_pem = match (&args.ca, args.insecure) {
        (Some(p), _) => Some(certs::read_pem(p, "--ca")?),
        (None, true) => None,
        (None, false) => {
            return Err(CliError::Usage(
                "--hosts talks TLS: give --ca (the CA that signed the agents' certificates, e.g. from `iocurve certs init`) or --insecure".into(),
            ));
        }
    };
    let identity = match (&args.client_cert, &args.client_key) {
        (Some(c), Some(k)) => Some((certs::read_pem(c, "--client-cert")?, certs::read_pem(k, "--client-key")?)),
        (None, None) => None,
        _ => return Err(CliError::Usage("--client-cert and --client-key go together".into())),
    };
    Ok(ClientConfig {
        token,
        ca_pem,
        identity,
        insecure: args.insecure,
        max_skew: Duration::from_millis(args.max_skew_ms),
    })
}

/// The coordinator's runtime. With the in-process agent it runs on the calling thread, only
/// while a step runs: merging a few messages a second needs no thread of its own, and the I/O
/// threads keep the cores. With remote agents one thread keeps answering their keep-alive
/// pings between steps too, so that no agent takes the coordinator for gone meanwhile.
fn runtime(remote: bool) -> Result<tokio::runtime::Runtime, CliError> {
    let mut b = if remote {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(1);
        b
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    b.enable_all().build().map_err(|e| CliError::Runtime(format!("cannot start the network runtime: {e}")))
}

impl Cluster {
    /// A local run: one in-process agent on the targets the run opened (and its verification
    /// map).
    pub fn local(targets: Arc<TargetSet>, verify: Option<Arc<GenMap>>) -> Result<Cluster, CliError> {
        let rt = runtime(false)?;
        let remote = rt.block_on(client::connect_in_process(InProcess { targets, verify }))?;
        Ok(Cluster {
            rt,
            remotes: vec![remote],
            targets: vec![Vec::new()],
            scratch_size: 0,
            abort_on_host_loss: true,
            // Nothing to cross but memory.
            lead: Duration::from_millis(20),
            // The engine itself: it is not lost, however long a stalled device holds it.
            silence: Duration::from_secs(86_400),
        })
    }

    /// Connects to every agent and has each open the plan's targets; nothing runs yet. Returns
    /// the cluster and every agent's targets as the agents opened them.
    pub fn connect(plan: &Plan, args: &RunArgs, scratch_size: u64) -> Result<(Cluster, Vec<TargetInfo>), CliError> {
        if plan.precondition || plan.workloads.iter().any(|w| w.verify) {
            return Err(CliError::Usage(
                "preconditioning and verification run on one host for now: drop --hosts, or those options".into(),
            ));
        }
        let cfg = client_config(args)?;
        let rt = runtime(true)?;
        let plan_targets: Vec<String> = plan.groups.iter().flat_map(|g| g.targets.clone()).collect();
        // --hosts (every agent on the plan's targets) or the plan's [[hosts]].
        let hosts: Vec<(String, Vec<String>)> = if args.hosts.is_empty() {
            plan.hosts
                .iter()
                .map(|h| {
                    (h.address.clone(), if h.targets.is_empty() { plan_targets.clone() } else { h.targets.clone() })
                })
                .collect()
        } else {
            args.hosts.iter().map(|a| (a.clone(), plan_targets.clone())).collect()
        };
        let targets: Vec<Vec<String>> = hosts.iter().map(|h| h.1.clone()).collect();
        let (remotes, facts) = rt.block_on(async {
            let mut remotes = Vec::new();
            for (addr, _) in &hosts {
                remotes.push(client::connect(addr, &cfg, 8).await?);
            }
            let facts = client::targets(&mut remotes, &targets, scratch_size, plan.writes()).await?;
            Ok::<_, NetError>((remotes, facts))
        })?;
        // The targets of every agent, named `ADDR:PATH`, as the agents opened them.
        let mut target_infos = Vec::new();
        for (r, list) in remotes.iter().zip(facts) {
            for f in list {
                target_infos.push(TargetInfo {
                    path: format!("{}:{}", r.addr, f.path),
                    kind: f.kind,
                    size: f.size,
                    logical_block: f.logical_block,
                    group: "targets".into(),
                    scratch: f.scratch,
                    preconditioned_at: None,
                });
            }
        }
        for r in &remotes {
            crate::outln!(
                "agent {} ({}, {} cores): clock offset {:+.3} ms, round trip {:.3} ms",
                r.addr,
                r.hello.hostname,
                r.hello.cores,
                r.offset_ns as f64 / 1e6,
                r.rtt_ns as f64 / 1e6
            );
        }
        let cluster = Cluster {
            rt,
            remotes,
            targets,
            scratch_size,
            abort_on_host_loss: args.on_host_loss == HostLoss::Abort,
            lead: Duration::from_millis(500),
            silence: AGENT_SILENCE,
        };
        Ok((cluster, target_infos))
    }

    /// Runs one step on every agent; returns the merged record, each host's own inside it.
    pub fn run_step(
        &mut self,
        w: &Workload,
        workers: u32,
        faults: &[Fault],
        obs: &mut dyn StepObserver,
        stop: &AtomicBool,
    ) -> Result<MultiStep, CliError> {
        let spec = StepSpec {
            workload: w,
            workers,
            targets: &self.targets,
            scratch_size: self.scratch_size,
            threads: w.threads,
            backend: w.backend.name(),
            faults,
            lead: self.lead,
            abort_on_host_loss: self.abort_on_host_loss,
            silence: self.silence,
        };
        let m = self.rt.block_on(client::run_step(&mut self.remotes, &spec, obs, stop))?;
        // A lost agent sits out the rest of the run (its figures so far are kept).
        for &i in m.lost.iter().rev() {
            self.remotes.remove(i);
            self.targets.remove(i);
        }
        Ok(m)
    }
}
