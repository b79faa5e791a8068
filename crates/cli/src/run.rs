//! `iocurve run`: the command line to a plan, its hosts and options; the run itself is the
//! runner's (`iocurve_run::Runner`), heard by the terminal; then the JSON result, the stored
//! run's id and the exit code.

use std::path::Path;
use std::process::ExitCode;

use iocurve_plan::{Overrides, Plan, suites};
use iocurve_report::write_json;
use iocurve_run::launch::{LaunchOptions, Method, hostlist};
use iocurve_run::live::LiveMetrics;
use iocurve_run::{AgentOptions, Hosts, Outcome, RunOptions, Runner};

use crate::CliError;
use crate::cli::{HostLoss, LaunchHow, MetricsArgs, RelayBy, RunArgs};
use crate::invocation;
use crate::terminal::Terminal;

pub fn run(args: RunArgs) -> Result<ExitCode, CliError> {
    let plan = load_plan(&args)?;
    // The final pass reads the targets back: after a back-end that touches no storage (null)
    // nothing was written there.
    if args.verify_final
        && let Some(w) = plan.workloads.iter().find(|w| w.writes() && !w.backend.touches_storage())
    {
        return Err(CliError::Usage(format!(
            "--verify-final: workload {} writes with the {} back-end, which puts nothing on the targets to read back; use io_uring, libaio or psync",
            w.name,
            w.backend.name()
        )));
    }
    // Issue 36, finding 7: with no verifying workload the pass had nothing to read back and
    // the run said nothing of it.
    if args.verify_final && !plan.workloads.iter().any(|w| w.verify) {
        return Err(CliError::Usage(
            "--verify-final reads back what verifying workloads wrote, but no workload of this run verifies: add --verify (or verify = true in the plan)".into(),
        ));
    }
    if args.verify_journal && !plan.workloads.iter().any(|w| w.verify) {
        return Err(CliError::Usage(
            "--verify-journal journals the writes of verifying workloads, but no workload of this run verifies: add --verify (or verify = true in the plan)".into(),
        ));
    }
    // The journal names each write's block and generation; a trim leaves a block whose content
    // no generation describes, which a pass after a crash would call lost.
    if args.verify_journal
        && let Some(w) = plan.workloads.iter().find(|w| w.verify && w.trims())
    {
        return Err(CliError::Usage(format!(
            "--verify-journal cannot journal trims, and workload {} verifies and trims (trim_pct = {}): drop --verify-journal, or its trims",
            w.name, w.trim_pct
        )));
    }
    // (`--relays ""` names no relay: refused, not run flat.)
    if args.relay_every.is_some() && args.launch.is_none() && !args.relays.iter().any(|r| !r.trim().is_empty()) {
        return Err(CliError::Usage(
            "--relay-every N drives hosts through relays: with --launch (a relay started beside the first host of each group) or with --relays HOST:PORT,... (relays started by hand with `iocurve agent --relay`)".into(),
        ));
    }
    if !args.relays.is_empty() && matches!(args.launch, Some(LaunchHow::Ssh | LaunchHow::Slurm)) {
        return Err(CliError::Usage(
            "--relays names relays started by hand or relay pods (--launch pods); --launch ssh and slurm start their relays themselves: drop --relays".into(),
        ));
    }
    // Relay pods get the run's own credentials when they are enrolled: no CA key mints theirs.
    if args.relay_ca_key.is_some() && args.launch.is_some() {
        return Err(CliError::Usage(
            "--relay-ca-key is for relays started by hand; with --launch the run makes its relays' credentials: drop it".into(),
        ));
    }
    if !args.host_intervals.is_empty() && args.host_intervals.iter().all(|h| h.trim().is_empty()) {
        return Err(CliError::Usage(
            "--host-intervals names no host: give HOST:PORT, a host's name or hostname (comma-separated), or all"
                .into(),
        ));
    }
    if args.relay_by == RelayBy::Switch && args.launch != Some(LaunchHow::Slurm) {
        return Err(CliError::Usage(
            "--relay-by switch places relays by Slurm's topology: with --launch slurm (elsewhere, list the hosts switch by switch and give --relay-every the hosts per switch)".into(),
        ));
    }
    if args.dry_run {
        // What the run would refuse before opening anything, the dry run refuses too.
        iocurve_run::check_plan(&plan)?;
        // Agents' addresses as the run dials them (comma-separated); with --launch the hosts are
        // names and ranges to start agents on, checked by the launch.
        let given = if args.launch.is_some() { Vec::new() } else { args.hosts.clone() };
        let addresses = given.iter().flat_map(|h| h.split(',')).map(str::trim).filter(|h| !h.is_empty());
        let addresses: Vec<&str> = addresses.collect();
        for host in addresses.iter().copied().chain(plan.hosts.iter().map(|h| h.address.as_str())) {
            iocurve_run::coordinator::client::endpoint(host).map_err(iocurve_run::Error::from)?;
        }
        // A host-count sweep against the agents listed (a launch's hosts are the launch's).
        if args.launch.is_none() {
            let agents = if addresses.is_empty() { plan.hosts.len() } else { addresses.len() };
            plan.check_sweeps(agents).map_err(iocurve_run::Error::Usage)?;
            // Through relays started by hand: whole groups of --relay-every, in the hosts' order.
            if let Some(every) = args.relay_every.filter(|_| !args.relays.is_empty()) {
                let places = iocurve_run::launch::RelayPlaces::in_order(agents, every as usize);
                plan.check_sweeps_in_groups(&places.ends).map_err(iocurve_run::Error::Usage)?;
            }
        }
        let mut plan = plan;
        iocurve_run::default_target(&mut plan);
        // A replay's trace is read as the run reads it: a bad one is refused here too.
        let replays = iocurve_run::replay::load(&mut plan)?;
        crate::outln!("{}", crate::dry_run::describe(&plan, args.size.or(plan.scratch_size), &args.hosts));
        for w in &plan.workloads {
            if let Some(l) = replays.get(&w.name) {
                crate::outln!("{}", crate::dry_run::replay_line(w, l));
            }
        }
        if let Some(path) = &args.write_iolog {
            // Refused as the run refuses it (the targets' own names once they are open).
            let mut others = iocurve_run::iolog::run_files(&plan, &args.db, &args.verify_map);
            others.extend(args.json.iter().map(|j| ("the --json result", j.clone())));
            iocurve_run::iolog::check(path, &others)?;
            iocurve_run::iolog::check_names(plan.groups.iter().flat_map(|g| &g.targets).map(String::as_str))?;
            crate::outln!(
                "every I/O would be written to {} as a fio version 3 I/O log (step by step, as each ends)",
                path.display()
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    // A result that cannot be written is bad input, found before any I/O, not after the run.
    if let Some(path) = &args.json {
        check_output(path, "--json")?;
    }
    // (The run checks the log against its other files; the JSON result is the command line's.)
    if let (Some(json), Some(log)) = (&args.json, &args.write_iolog) {
        iocurve_run::iolog::check(log, &[("the --json result", json.clone())])?;
    }
    // Before the targets: a Ctrl-C while a scratch file is prepared then ends the run cleanly,
    // removing the file, instead of killing the process halfway.
    let cancel = crate::signals::install();
    let mut terminal = Terminal::for_run(plan.total_seconds());
    let hosts = if args.hosts.is_empty() && plan.hosts.is_empty() && args.launch.is_none() {
        if !args.relays.is_empty() {
            return Err(CliError::Usage(
                "--relays drives agents: give the hosts (--hosts HOST:PORT,... or [[hosts]] in the plan)".into(),
            ));
        }
        Hosts::Local
    } else {
        Hosts::Agents(Box::new(agents(&args)?))
    };
    let options = RunOptions {
        label: args.label.clone(),
        db: args.db.clone(),
        size: args.size.or(plan.scratch_size),
        keep: args.keep,
        allow_write: args.allow_write.clone(),
        verify_map: args.verify_map.clone(),
        verify_final: args.verify_final,
        verify_journal: args.verify_journal,
        stuck_after_s: args.flags.keys()?.stuck_after_s,
        write_iolog: args.write_iolog.clone(),
    };
    let exporter = iocurve_metrics::Exporter::new();
    let server = metrics_server(&args.metrics, &exporter, args.token_file.as_deref())?;
    // Made only with an endpoint to feed: it reads the host's facts.
    let mut live = server.as_ref().map(|_| LiveMetrics::new(exporter));
    let mut runner = Runner::new(plan, hosts, options).observe(&mut terminal).cancel(cancel.clone());
    if let (Some(s), Some(live)) = (&server, live.as_mut()) {
        crate::outln!("live metrics on http://{}/metrics", s.addr());
        runner = runner.observe(live);
    }
    let outcome = runner.run()?;
    let interrupted = cancel.is_cancelled();
    // The result is written and its id printed first; then the endpoint stays for the scrapes
    // that fetch the final figures.
    let code = finish(outcome, &args);
    if let Some(s) = &server
        && args.metrics_hold_s > 0.0
        && !interrupted
    {
        crate::outln!(
            "serving the final figures on http://{}/metrics for {} s (Ctrl-C ends it)",
            s.addr(),
            args.metrics_hold_s
        );
        cancel.sleep(std::time::Duration::from_secs_f64(args.metrics_hold_s));
    }
    code
}

/// The metrics endpoint of `--metrics` (None without it); a bare port listens on 127.0.0.1
/// only.
pub fn metrics_server(
    args: &MetricsArgs,
    exporter: &iocurve_metrics::Exporter,
    secret: Option<&Path>,
) -> Result<Option<iocurve_metrics::Server>, CliError> {
    let Some(addr) = args.metrics.as_deref() else { return Ok(None) };
    let token = match &args.metrics_token_file {
        Some(f) => {
            let t = iocurve_net::auth::read_token(f)?;
            // Scrapes send it in plain HTTP: a token that also opens agents would travel with
            // every scrape.
            if let Some(other) = secret.filter(|p| iocurve_net::auth::read_token(p).is_ok_and(|o| o == t)) {
                return Err(CliError::Usage(format!(
                    "--metrics-token-file {}: the same token as {}; scrapes send it in plain HTTP, so give the endpoint a read-only token of its own (e.g. `head -c 32 /dev/urandom | base64 > FILE`, mode 600)",
                    f.display(),
                    other.display()
                )));
            }
            Some(t)
        }
        None => None,
    };
    let listen = if addr.parse::<u16>().is_ok() { format!("127.0.0.1:{addr}") } else { addr.to_string() };
    iocurve_metrics::serve(&listen, exporter.clone(), token).map(Some).map_err(|e| {
        CliError::Usage(format!(
            "--metrics {addr}: cannot listen on {listen} ({e}); give a free port (9464) or HOST:PORT of this host"
        ))
    })
}

fn agents(args: &RunArgs) -> Result<AgentOptions, CliError> {
    let launch = args.launch.map(|how| launch_options(how, args)).transpose()?;
    if args.pod_keys.is_some() && args.launch != Some(LaunchHow::Pods) {
        return Err(CliError::Usage("--pod-keys is for --launch pods".into()));
    }
    if launch.is_some() {
        // Pods are enrolled by the coordinator's own certificate (the one their --client-ca
        // trusts); the rest of a launch's credentials are its own.
        let pods = args.launch == Some(LaunchHow::Pods);
        for (given, flag) in [
            (args.client_cert.is_some() && !pods, "--client-cert"),
            (args.client_key.is_some() && !pods, "--client-key"),
            (args.insecure, "--insecure"),
            (args.tls_name.is_some(), "--tls-name"),
            (args.token_per_host, "--token-per-host"),
        ] {
            if given {
                return Err(CliError::Usage(format!(
                    "{flag} is for agents started by hand; --launch makes this run's own certificates and tokens"
                )));
            }
        }
    }
    // HOST:PORT lists are comma-separated; a launch's host list takes ranges (`n[1-4,7]`)
    // and is split by the launch, brackets and all.
    let addresses = if launch.is_some() {
        Vec::new()
    } else {
        args.hosts
            .iter()
            .flat_map(|h| h.split(','))
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .map(String::from)
            .collect()
    };
    Ok(AgentOptions {
        addresses,
        token_file: args.token_file.clone(),
        ca: args.ca.clone(),
        client_cert: args.client_cert.clone(),
        client_key: args.client_key.clone(),
        insecure: args.insecure,
        tls_name: args.tls_name.clone(),
        token_per_host: args.token_per_host,
        max_skew_ms: args.max_skew_ms,
        abort_on_host_loss: args.on_host_loss == HostLoss::Abort,
        launch,
        issued: None,
        unreachable: Vec::new(),
        wait_for_agents: std::time::Duration::from_secs(args.wait_for_agents_s),
        relays: Vec::new(),
        relay_credentials: None,
        // (Relay pods are the launch's: enrolled with the agents.)
        relay_addresses: if args.launch.is_some() {
            Vec::new()
        } else {
            args.relays.iter().map(|r| r.trim().to_string()).filter(|r| !r.is_empty()).collect()
        },
        relay_every: args.relay_every.unwrap_or(0),
        relay_ca_key: args.relay_ca_key.clone(),
        relay_places: Default::default(),
        host_intervals: args.host_intervals.iter().map(|h| h.trim().to_string()).filter(|h| !h.is_empty()).collect(),
    })
}

/// `--launch pods`: the pods to enrol, the cluster's keys and the coordinator's certificate.
fn pods_options(hosts: Vec<String>, args: &RunArgs) -> Result<LaunchOptions, CliError> {
    let (Some(keys), Some(cert), Some(key)) = (&args.pod_keys, &args.client_cert, &args.client_key) else {
        return Err(CliError::Usage(
            "--launch pods needs --pod-keys FILE (`kubectl get --raw /openid/v1/jwks`) and --client-cert/--client-key (the certificate the agents' --client-ca trusts)".into(),
        ));
    };
    // Relay pods: an Indexed Job of their own, enrolled as the agents are.
    let relays = if args.relays.is_empty() {
        Vec::new()
    } else {
        hostlist::expand(&args.relays.join(",")).map_err(|e| CliError::Usage(format!("--relays: {e}")))?
    };
    if args.relay_every.is_some() && relays.is_empty() {
        return Err(CliError::Usage(
            "--relay-every with --launch pods: give --relays, the relay pods' DNS names (`deploy kubernetes --indexed --relay-every N` renders them)".into(),
        ));
    }
    if args.remote_binary.is_some() {
        return Err(CliError::Usage("--remote-binary: pods run their image's iocurve; drop it".into()));
    }
    let jwks = std::fs::read_to_string(keys)
        .map_err(|e| CliError::Usage(format!("--pod-keys {}: cannot read it: {e}", keys.display())))?;
    let pod_keys = iocurve_net::podtoken::PodKeys::from_jwks(&jwks, args.pod_issuer.clone())
        .map_err(|e| CliError::Usage(format!("--pod-keys {}: {e}", keys.display())))?;
    let client =
        (iocurve_net::certs::read_pem(cert, "--client-cert")?, iocurve_net::certs::read_pem(key, "--client-key")?);
    if !(args.launch_valid_h > 0.0 && args.launch_valid_h <= 24.0 * 365.0) {
        return Err(CliError::Usage(format!(
            "--launch-valid-h {} must be more than 0 and at most a year",
            args.launch_valid_h
        )));
    }
    Ok(LaunchOptions {
        method: Method::Pods(std::sync::Arc::new(iocurve_run::launch::Pods {
            keys: pod_keys,
            client,
            wait: std::time::Duration::from_secs(args.wait_for_agents_s),
            relays,
        })),
        hosts,
        remote_binary: String::new(),
        remote_binary_given: false,
        port: if args.launch_port == 0 { crate::deploy::AGENT_PORT } else { args.launch_port },
        lifetime: std::time::Duration::from_secs_f64(args.launch_valid_h * 3600.0),
        relay_every: args.relay_every.unwrap_or(0),
        relay_by_switch: false,
    })
}

/// `--launch` and the options that go with it.
fn launch_options(how: LaunchHow, args: &RunArgs) -> Result<LaunchOptions, CliError> {
    let hosts = match (&args.hosts_file, args.hosts.is_empty()) {
        (Some(f), _) => hostlist::read_file(f).map_err(CliError::Usage)?,
        (None, false) => {
            hostlist::expand(&args.hosts.join(",")).map_err(|e| CliError::Usage(format!("--hosts: {e}")))?
        }
        (None, true) => Vec::new(),
    };
    let (flag, given) = match how {
        LaunchHow::Ssh => ("--ssh", &args.ssh),
        LaunchHow::Slurm => ("--srun", &args.srun),
        LaunchHow::Pods => return pods_options(hosts, args),
    };
    let command: Vec<String> = given.split_whitespace().map(String::from).collect();
    if command.is_empty() {
        return Err(CliError::Usage(format!("{flag} is empty: give the command, e.g. `ssh -F lab.conf` or `srun`")));
    }
    let remote_binary = match (&args.remote_binary, how) {
        (Some(b), _) if b.starts_with('~') => {
            return Err(CliError::Usage(format!(
                "--remote-binary {b}: give an absolute path or a name on the host's PATH (`~` is not expanded)"
            )));
        }
        (Some(b), _) => b.clone(),
        (None, LaunchHow::Ssh) => "iocurve".into(),
        // Clusters share their filesystems: this very binary is usually there on every node.
        (None, _) => std::env::current_exe()
            .map_err(|e| CliError::Runtime(format!("cannot find this iocurve's binary: {e}")))?
            .display()
            .to_string(),
    };
    if !(args.launch_valid_h > 0.0 && args.launch_valid_h <= 24.0 * 365.0) {
        return Err(CliError::Usage(format!(
            "--launch-valid-h {} must be more than 0 and at most a year",
            args.launch_valid_h
        )));
    }
    Ok(LaunchOptions {
        method: match how {
            LaunchHow::Ssh => Method::Ssh { command },
            _ => Method::Srun { command },
        },
        hosts,
        remote_binary,
        remote_binary_given: args.remote_binary.is_some(),
        port: args.launch_port,
        lifetime: std::time::Duration::from_secs_f64(args.launch_valid_h * 3600.0),
        relay_every: args.relay_every.unwrap_or(0),
        relay_by_switch: args.relay_by == RelayBy::Switch,
    })
}

/// What `iocurve run --replay FILE` runs without a plan: one workload replaying the trace over
/// the whole target, measured in intervals of about a second.
const REPLAY_PLAN: &str = "name = \"replay\"\ndescription = \"The trace given with --replay, at each --replay-speed\"\n[defaults]\nwarmup_s = 0\ninterval_s = 1\n[[workloads]]\nname = \"replay\"\nworking_set = \"backend\"\n";

/// The plan (a TOML plan, a fio job file or a suite) with the command line's keys; the SLA
/// options win over the plan's bounds, which are part of the resolved plan that is stored, so
/// `show` reproduces what the run printed.
fn load_plan(args: &RunArgs) -> Result<Plan, CliError> {
    let o =
        Overrides { targets: args.targets.clone(), keys: args.flags.keys()?, workload_filter: args.workload.clone() };
    let mut plan = match (&args.plan, &args.suite) {
        (Some(path), _) => {
            // Read once: a plan may come through a pipe (`<(…)`, /dev/stdin).
            let text = iocurve_plan::read_plan_text(path)?;
            let source = path.display().to_string();
            if args.fio || iocurve_plan::fio::looks_like_fio(path, &text) {
                let import = iocurve_plan::fio::import_text(&text, path, args.fio_lenient)?;
                // Before the plan's checks: a size fio read its own way explains their error.
                if let Some(w) = import.warning() {
                    crate::errln!("{w}");
                }
                import.resolve(&source, &o)?
            } else if args.fio_lenient {
                return Err(CliError::Usage(format!(
                    "--fio-lenient is for fio job files, and {source} reads as a TOML plan; add --fio to read it as a job file"
                )));
            } else {
                iocurve_plan::parse_str(&text, &source, &o)?
            }
        }
        (None, Some(name)) => suites::load(name, &o)?,
        // `--replay FILE` alone: that trace, not the quick suite's ten workloads.
        (None, None) if o.keys.replay.is_some() => iocurve_plan::parse_str(REPLAY_PLAN, "replay", &o)?,
        (None, None) => suites::load(suites::DEFAULT_SUITE, &o)?,
    };
    plan.precondition |= args.precondition;
    if let Some(l) = &args.links {
        plan.links =
            Some(iocurve_plan::links::HostLinks::parse(l).map_err(|m| CliError::Usage(format!("--links {m}")))?);
    }
    plan.sla_mean_ms = args.sla.mean_ms.or(plan.sla_mean_ms);
    plan.sla_p99_ms = args.sla.p99_ms.or(plan.sla_p99_ms);
    Ok(plan)
}

/// Checks that `path` can be written the way the result will be (a temporary file beside it,
/// renamed over it), leaving nothing behind.
fn check_output(path: &Path, option: &str) -> Result<(), CliError> {
    if path.is_dir() {
        return Err(CliError::Usage(format!("{option} {}: that is a directory; name a file", path.display())));
    }
    // A device, a pipe or a symlink is written in place (`iocurve_report::write_output`): it
    // must take writes itself; it is opened, not truncated.
    if !iocurve_report::replaced_by_rename(path) {
        return std::fs::OpenOptions::new().write(true).open(path).map(drop).map_err(|e| {
            CliError::Usage(format!("{option} {}: cannot write there ({e}); choose another path", path.display()))
        });
    }
    let tmp = path.with_extension("json.tmp");
    match std::fs::OpenOptions::new().write(true).create(true).truncate(true).open(&tmp) {
        Ok(_) => {
            let _ = std::fs::remove_file(&tmp);
            Ok(())
        }
        Err(e) => Err(CliError::Usage(format!(
            "{option} {}: cannot write there ({e}); choose a path in a writable directory",
            path.display()
        ))),
    }
}

fn finish(outcome: Outcome, args: &RunArgs) -> Result<ExitCode, CliError> {
    let code = match &outcome.error {
        Some(e) => e.exit_code(),
        None if outcome.result.interrupted => crate::signals::interrupted_code(),
        None => match outcome.verdict() {
            Some((code, why)) => {
                crate::errln!("exit code {code}: the run finished, but {why}");
                ExitCode::from(code)
            }
            None => ExitCode::SUCCESS,
        },
    };
    if let Some(path) = &args.json {
        write_json(&outcome.result, path)
            .map_err(|e| CliError::Runtime(format!("cannot write the JSON result to {}: {e}", path.display())))?;
    }
    if let Some(id) = outcome.run_id {
        // The next commands as they run from here: this binary as the shell finds it, the
        // database named when it is not the default.
        let id = id.to_string();
        let next = |words: &[&str]| format!("`{}`", invocation::suggest(words, &args.db));
        if let Some(iocurve_run::Error::StoreRefused(_)) = &outcome.error {
            // Said as it is: the database holds the run up to where it refused writes.
            crate::outln!(
                "stored in part as run {id} in {}: the database refused writes before the run ended; it holds the steps above up to that point ({})",
                args.db.display(),
                next(&["show", &id])
            );
        } else {
            crate::outln!("stored as run {id} in {} ({})", args.db.display(), next(&["show", &id]));
        }
        crate::outln!(
            "next: {} (charts), {} (impact), {}",
            next(&["report", &id, "-o", &format!("run-{id}.html")]),
            next(&["compare", &id, "OTHER"]),
            next(&["export", &id, "--format", "csv", "-o", &format!("run-{id}.csv")]),
        );
    }
    match outcome.error {
        Some(e) => Err(e),
        None => Ok(code),
    }
}
