//! `iocurve agent`: the options turned into an agent, served until Ctrl-C or SIGTERM.

use std::process::ExitCode;

use iocurve_net::agent::{AgentConfig, AgentTls, serve_on};
use iocurve_net::{auth, certs, launched};

use crate::CliError;
use crate::cli::AgentArgs;

/// How long an agent told to end (SIGTERM, Ctrl-C, its coordinator's input closed, its
/// credentials expired) waits for its work to stop before it exits anyway.
const END_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

pub fn command(args: AgentArgs) -> Result<ExitCode, CliError> {
    if args.insecure && args.client_ca.is_some() {
        return Err(CliError::Usage(
            "--client-ca needs TLS: with --insecure no client certificate is checked; drop one of them".into(),
        ));
    }
    if !(args.lease_s >= 1.0 && args.lease_s <= 3600.0) {
        return Err(CliError::Usage(format!("--lease-s {} must be 1 to 3600 seconds", args.lease_s)));
    }
    if !(args.claim_expiry_s >= 1.0 && args.claim_expiry_s <= 86_400.0) {
        return Err(CliError::Usage(format!("--claim-expiry-s {} must be 1 to 86400 seconds", args.claim_expiry_s)));
    }
    let audit = std::sync::Arc::new(iocurve_net::agent::audit::Audit::new(args.audit_log.as_deref())?);
    // A launched agent removes its copy first: whatever happens next, nothing copied stays.
    if args.remove_binary {
        remove_own_copy()?;
    }
    // What it is told to use is checked before it takes a run's credentials: an enrolled pod
    // that then could not serve would be counted in and found lost.
    if !args.state_dir.is_dir() {
        return Err(CliError::Usage(format!("--state-dir {}: no such directory", args.state_dir.display())));
    }
    // The steps' figures as this agent measures them, labelled with its host name.
    let exporter = iocurve_metrics::Exporter::new();
    let metrics = crate::run::metrics_server(&args.metrics, &exporter, args.token_file.as_deref())?;
    iocurve_net::raise_open_file_limit();
    // A launched agent reads the run's credentials on its standard input (and ends when it
    // does); an enrolled one gets them from the coordinator that takes its pod's token.
    let (launched, listening, claim_within) = match &args.enrol {
        Some(token_file) => {
            let (e, l) = enrolled(&args, token_file, &audit)?;
            (Some(e.creds), Some(l), Some(e.claim_within))
        }
        None if args.launched => (Some(launched::read(&mut std::io::stdin().lock())?), None, None),
        None => (None, None, None),
    };
    let tied_to_input = args.launched;
    let (token, tls) = match &launched {
        Some(c) => {
            if iocurve_net::unix_ns() / 1_000_000_000 >= c.expires_unix as i64 {
                return Err(CliError::Usage("--launched: the credentials have expired already".into()));
            }
            let tls = AgentTls {
                cert_pem: c.cert_pem.clone(),
                key_pem: c.key_pem.clone(),
                client_ca_pem: Some(c.client_ca_pem.clone()),
            };
            (c.token.clone(), Some(tls))
        }
        None => manual_credentials(&args)?,
    };
    if args.allow.is_empty() && !args.relay {
        crate::errln!("WARNING: no --allow: this agent refuses every target");
    }
    let mut listen = args.listen.unwrap_or_else(|| std::net::SocketAddr::from(([0, 0, 0, 0], 0)));
    if args.launched && listen.ip() == std::net::Ipv4Addr::UNSPECIFIED {
        // A launched agent is dialled at whatever address its host was given, IPv6 too: all
        // addresses of both families where the host has IPv6.
        let v6 = std::net::SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, listen.port()));
        if std::net::TcpListener::bind(v6).is_ok() {
            listen = v6;
        }
    }
    let cfg = AgentConfig {
        listen,
        token,
        tls,
        allow: args.allow,
        allow_write: args.allow_write,
        max_scratch: args.max_scratch,
        lease: std::time::Duration::from_secs_f64(args.lease_s),
        state_dir: args.state_dir,
        metrics: None,
        // An enrolled pod may wait for the other pods' enrolments before its coordinator
        // dials it: as long as the coordinator said (the rest of its enrolment, and a minute).
        one_run: launched.as_ref().map(|_| claim_within.unwrap_or(iocurve_net::agent::UNCLAIMED)),
        remove_scratch: args.remove_scratch,
        claim_expiry: std::time::Duration::from_secs_f64(args.claim_expiry_s),
        audit,
        simulated: None,
        relay: args.relay.then(|| {
            std::sync::Arc::new(iocurve_run::coordinator::relay::Relay::new())
                as std::sync::Arc<dyn iocurve_net::agent::relay::RelayHandler>
        }),
    };
    if let Some(n) = args.simulate {
        if metrics.is_some() {
            return Err(CliError::Usage("--simulate serves no live metrics: drop --metrics".into()));
        }
        if n == 0 && args.simulate_relays.is_none() {
            return Err(CliError::Usage(
                "--simulate 0 serves relays alone: give --simulate-relays M (and --simulate-ca-key), or simulate 1 or more agents".into(),
            ));
        }
        if args.simulate_ca_key.is_some() && cfg.listen.port() == 0 {
            return Err(CliError::Usage(
                "--simulate-ca-key puts every simulated host on --listen's port, each at its own address: give a port (e.g. 127.0.0.1:21000), not 0".into(),
            ));
        }
        let own = match &args.simulate_ca_key {
            Some(key) => Some(crate::simulate::OwnCredentials::read(
                key,
                args.client_ca.as_deref(),
                &cfg.token,
                args.simulate_relays.unwrap_or(0),
            )?),
            None => None,
        };
        return crate::simulate::serve(cfg, n, args.simulate_latency_us, own, END_GRACE);
    }
    let cfg = AgentConfig { metrics: metrics.as_ref().map(|_| exporter), ..cfg };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Runtime(format!("cannot start the network runtime: {e}")))?;
    let expires = launched.as_ref().map(|c| c.expires_unix);
    rt.block_on(async {
        let shutdown = async {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            let input_closed = async {
                if tied_to_input { input_end().await } else { std::future::pending::<()>().await }
            };
            let expired = async {
                match expires {
                    Some(at) => {
                        let left = (at as i64 - iocurve_net::unix_ns() / 1_000_000_000).max(0) as u64;
                        tokio::time::sleep(std::time::Duration::from_secs(left)).await
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending::<()>().await } } => {}
                _ = input_closed => crate::errln!("standard input ended: the coordinator is gone; ending"),
                _ = expired => crate::errln!("the run's credentials expired; ending"),
            }
            // The agent ends within seconds whatever it is doing: it waits a moment for its
            // step to stop and its connections to close, not for a coordinator that will never
            // come back, nor for a blocking walk or preparation to finish (two agents walking
            // `/**/…` outlived SIGTERM by 25 minutes: issue 35, finding 1).
            // Forced, it exits 1 (what it was doing did not finish); a launched agent whose
            // coordinator is gone has nothing left to report and exits 0.
            let forced = if expires.is_some() { 0 } else { 1 };
            std::thread::spawn(move || {
                std::thread::sleep(END_GRACE);
                crate::errln!("still busy {} s after being told to end: ending now", END_GRACE.as_secs());
                std::process::exit(forced)
            });
        };
        let bound = |a: std::net::SocketAddr| {
            if tied_to_input {
                crate::outln!("{}", launched::ready_line(a.port()));
            } else {
                crate::outln!("iocurve agent listening on {a}");
            }
            if let Some(m) = &metrics {
                crate::outln!("live metrics on http://{}/metrics", m.addr());
            }
        };
        serve_on(cfg, listening, bound, shutdown).await
    })?;
    Ok(ExitCode::SUCCESS)
}

/// `--enrol`: the run's credentials from the coordinator that took the pod's token.
fn enrolled(
    args: &AgentArgs,
    token_file: &std::path::Path,
    audit: &iocurve_net::agent::audit::Audit,
) -> Result<(iocurve_net::enrol::Enrolled, std::net::TcpListener), CliError> {
    let (Some(listen), Some(ca)) = (args.listen, &args.client_ca) else {
        return Err(CliError::Usage("--enrol needs --listen ADDR:PORT and --client-ca FILE".into()));
    };
    let ca = certs::read_pem(ca, "--client-ca")?;
    let wait = std::time::Duration::from_secs(args.enrol_wait_s);
    Ok(iocurve_net::enrol::wait(listen, &ca, token_file, wait, audit)?)
}

/// The token and TLS material of an agent started by hand.
fn manual_credentials(args: &AgentArgs) -> Result<(String, Option<AgentTls>), CliError> {
    let Some(token_file) = &args.token_file else {
        return Err(CliError::Usage("give --token-file FILE (or IOCURVE_TOKEN_FILE)".into()));
    };
    let token = auth::read_token(token_file)?;
    let tls = match (&args.tls_cert, &args.tls_key, args.insecure) {
        (Some(c), Some(k), false) => Some(AgentTls {
            cert_pem: certs::read_pem(c, "--tls-cert")?,
            key_pem: certs::read_pem(k, "--tls-key")?,
            client_ca_pem: args.client_ca.as_ref().map(|p| certs::read_pem(p, "--client-ca")).transpose()?,
        }),
        (None, None, true) => {
            crate::errln!("WARNING: --insecure: listening without TLS; the token travels in plain text");
            None
        }
        (_, _, true) => return Err(CliError::Usage("--insecure and --tls-cert/--tls-key exclude each other".into())),
        _ => {
            return Err(CliError::Usage(
                "an agent listens with TLS: give --tls-cert and --tls-key (e.g. from `iocurve certs init DIR`), or --insecure".into(),
            ));
        }
    };
    Ok((token, tls))
}

/// Completes when standard input ends (read on a thread of its own: a blocking read).
async fn input_end() {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        use std::io::Read;
        let mut buf = [0u8; 256];
        let mut input = std::io::stdin().lock();
        while matches!(input.read(&mut buf), Ok(n) if n > 0) {}
        let _ = tx.send(());
    });
    let _ = rx.await;
}

/// `--remove-binary`: removes this process's own binary and the directory `run --launch`
/// copied it into. Only a file named `iocurve` in a directory named `iocurve-launch.*` is
/// removed: an agent started from anywhere else refuses instead of deleting it.
fn remove_own_copy() -> Result<(), CliError> {
    let exe = std::fs::read_link("/proc/self/exe")
        .map_err(|e| CliError::Runtime(format!("--remove-binary: cannot read /proc/self/exe: {e}")))?;
    let dir = exe.parent().filter(|d| {
        d.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(iocurve_net::launched::COPY_DIR_PREFIX))
    });
    let (Some(dir), Some("iocurve")) = (dir, exe.file_name().and_then(|n| n.to_str())) else {
        return Err(CliError::Usage(format!(
            "--remove-binary: {} is not a copy `run --launch` made (DIR/{}*/iocurve); nothing removed",
            exe.display(),
            iocurve_net::launched::COPY_DIR_PREFIX
        )));
    };
    // The copy's own session may have removed it already (its coordinator went away as this
    // started): gone is gone.
    let gone = |r: std::io::Result<()>| match r {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    };
    gone(std::fs::remove_file(&exe))
        .and_then(|()| gone(std::fs::remove_dir(dir)))
        .map_err(|e| CliError::Runtime(format!("--remove-binary: cannot remove {}: {e}", exe.display())))
}
