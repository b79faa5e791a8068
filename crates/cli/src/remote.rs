//! Multi-host runs from the coordinator's side (`run --hosts`): connects to every agent before
//! any I/O (token, TLS, protocol, clock offset, targets accepted), then runs each step on all
//! of them at one moment and hands the merged intervals to the same recorder and analysis as a
//! local run.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use iocurve_analysis::{HostStepResult, StepResult, TargetInfo, Thresholds, analyze_step};
use iocurve_engine::StepObserver;
use iocurve_net::client::{self, ClientConfig, MultiStep, Remote, StepSpec};
use iocurve_net::{NetError, auth, certs};
use iocurve_plan::{Plan, Workload};

use crate::CliError;
use crate::cli::{HostLoss, RunArgs};

impl From<NetError> for CliError {
    fn from(e: NetError) -> Self {
        match e {
            NetError::Input(m) => CliError::Usage(m),
            NetError::Failed(m) => CliError::Runtime(m),
        }
    }
}

pub struct Cluster {
    rt: tokio::runtime::Runtime,
    pub remotes: Vec<Remote>,
    /// Per agent, its target paths.
    targets: Vec<Vec<String>>,
    scratch_size: u64,
    abort_on_host_loss: bool,
    /// Every agent's targets, as they were opened before the run.
    pub target_infos: Vec<TargetInfo>,
}

/// How the coordinator reaches the agents, from the options (token, CA, client certificate).
fn client_config(args: &RunArgs) -> Result<ClientConfig, CliError> {
    let token_file = args.token_file.clone().ok_or_else(|| {
        CliError::Usage("--hosts needs the agents' token: --token-file FILE (or IOCURVE_TOKEN_FILE)".into())
    })?;
    let token = auth::read_token(&token_file)?;
    if args.insecure {
        eprintln!("WARNING: --insecure: talking to the agents in plain text; the token travels unencrypted");
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
    Ok(ClientConfig { token, ca_pem, identity, insecure: args.insecure })
}

impl Cluster {
    /// Connects to every agent and has each open the plan's targets; nothing runs yet.
    pub fn connect(plan: &Plan, args: &RunArgs, scratch_size: u64) -> Result<Cluster, CliError> {
        if plan.precondition || plan.workloads.iter().any(|w| w.verify) || !plan.faults.is_empty() {
            return Err(CliError::Usage(
                "preconditioning, verification and fault injection run on one host for now: drop --hosts, or those options".into(),
            ));
        }
        let cfg = client_config(args)?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| CliError::Runtime(format!("cannot start the network runtime: {e}")))?;
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
            println!(
                "agent {} ({}, {} cores): clock offset {:+.3} ms, round trip {:.3} ms",
                r.addr,
                r.hello.hostname,
                r.hello.cores,
                r.offset_ns as f64 / 1e6,
                r.rtt_ns as f64 / 1e6
            );
        }
        let abort_on_host_loss = args.on_host_loss == HostLoss::Abort;
        Ok(Cluster { rt, remotes, targets, scratch_size, abort_on_host_loss, target_infos })
    }

    /// Runs one step on every agent; returns the merged record and the per-host figures.
    pub fn run_step(
        &mut self,
        w: &Workload,
        workers: u32,
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
            lead: Duration::from_millis(500),
            abort_on_host_loss: self.abort_on_host_loss,
        };
        let m = self.rt.block_on(client::run_step(&mut self.remotes, &spec, obs, stop))?;
        // A lost agent sits out the rest of the run (its figures so far are kept).
        for &(i, _) in m.lost.iter().rev() {
            self.remotes.remove(i);
            self.targets.remove(i);
        }
        Ok(m)
    }
}

/// The per-host figures of a step, for its result.
pub fn host_results(m: &MultiStep, sequential: bool) -> Vec<HostStepResult> {
    let earliest = m.hosts.iter().map(|h| h.started_unix_ns).min().unwrap_or(0);
    m.hosts
        .iter()
        .map(|h| {
            let s: StepResult = analyze_step(&h.record, sequential, &Thresholds::default());
            HostStepResult {
                host: h.addr.clone(),
                hostname: h.hostname.clone(),
                iops: s.iops,
                mbps: s.mbps,
                lat_us: s.lat_us,
                errors: s.errors,
                started_at_us: (h.started_unix_ns - earliest) as f64 / 1000.0,
            }
        })
        .collect()
}
