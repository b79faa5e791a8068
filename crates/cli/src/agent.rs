//! `iocurve agent`: the options turned into an agent, served until Ctrl-C or SIGTERM.

use std::process::ExitCode;

use iocurve_net::agent::{AgentConfig, AgentTls, serve};
use iocurve_net::{auth, certs};

use crate::CliError;
use crate::cli::AgentArgs;

pub fn command(args: AgentArgs) -> Result<ExitCode, CliError> {
    let token = auth::read_token(&args.token_file)?;
    if args.insecure && args.client_ca.is_some() {
        return Err(CliError::Usage(
            "--client-ca needs TLS: with --insecure no client certificate is checked; drop one of them".into(),
        ));
    }
    raise_open_file_limit();
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
    if args.allow.is_empty() {
        crate::errln!("WARNING: no --allow: this agent refuses every target");
    }
    if !(args.lease_s >= 1.0 && args.lease_s <= 3600.0) {
        return Err(CliError::Usage(format!("--lease-s {} must be 1 to 3600 seconds", args.lease_s)));
    }
    let cfg = AgentConfig {
        listen: args.listen,
        token,
        tls,
        allow: args.allow,
        allow_write: args.allow_write,
        max_scratch: args.max_scratch,
        lease: std::time::Duration::from_secs_f64(args.lease_s),
        state_dir: args.state_dir,
        metrics: None,
    };
    if !cfg.state_dir.is_dir() {
        return Err(CliError::Usage(format!("--state-dir {}: no such directory", cfg.state_dir.display())));
    }
    // The steps' figures as this agent measures them, labelled with its host name.
    let exporter = iocurve_metrics::Exporter::new();
    let metrics = crate::run::metrics_server(&args.metrics, &exporter, Some(&args.token_file))?;
    let cfg = AgentConfig { metrics: metrics.as_ref().map(|_| exporter), ..cfg };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Runtime(format!("cannot start the network runtime: {e}")))?;
    rt.block_on(async {
        let shutdown = async {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending::<()>().await } } => {}
            }
        };
        let bound = |a: std::net::SocketAddr| {
            use std::io::Write;
            crate::outln!("iocurve agent listening on {a}");
            if let Some(m) = &metrics {
                crate::outln!("live metrics on http://{}/metrics", m.addr());
            }
            let _ = std::io::stdout().flush();
        };
        serve(cfg, bound, shutdown).await
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Raises this process's limit of open files to its hard limit: an agent holds a descriptor
/// per connection and per target, and the usual soft limit (1,024) is small for a host that
/// many coordinators and strangers can reach. The front door copes with running out anyway.
fn raise_open_file_limit() {
    let mut l = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: a valid out-pointer; then the limit as read with the soft value raised.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
            l.rlim_cur = l.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}
