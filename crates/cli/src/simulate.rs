//! `iocurve agent --simulate N` (issue 46): N agents served from one process, each its own
//! listener, connection, state directory, host name and clock offset, whose steps are modelled
//! (`iocurve_net::agent::simulate`). What it is for: measuring a coordinator at hundreds or
//! thousands of hosts on one machine, which real agents (an I/O thread each) cannot reach.

use std::net::SocketAddr;
use std::process::ExitCode;

use iocurve_net::agent::simulate::Simulated;
use iocurve_net::agent::{AgentConfig, AgentTls};

use crate::CliError;

/// The largest clock offset a simulated agent runs with, either way (ns): within what the
/// coordinator measures and corrects, as real hosts' clocks kept by NTP are.
const MAX_OFFSET_NS: i64 = 10_000_000;

/// Agent `k`'s clock offset: spread over ±[`MAX_OFFSET_NS`], the same for `k` every time.
fn offset_ns(k: u32) -> i64 {
    let mut z = (k as u64).wrapping_add(0x9e37_79b9_7f4a_7c15).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z ^= z >> 31;
    (z % (2 * MAX_OFFSET_NS as u64 + 1)) as i64 - MAX_OFFSET_NS
}

/// Agent `k`'s address: --listen's port + k (port 0: a free port each).
fn address(listen: SocketAddr, k: u32) -> Result<SocketAddr, CliError> {
    if listen.port() == 0 {
        return Ok(listen);
    }
    let port = listen.port() as u32 + k;
    u16::try_from(port).map(|p| SocketAddr::new(listen.ip(), p)).map_err(|_| {
        CliError::Usage(format!(
            "--simulate: agent {k} would listen on port {port}, past 65535: start from a lower --listen port or simulate fewer"
        ))
    })
}

/// `--simulate-ca-key` (issue 46): each simulated agent a host of its own — its own loopback
/// address, certificate and token, issued here with the cluster's CA — and `relays` relays
/// beside them, so that `run --relays` can drive them through relays as it drives hosts
/// with `certs add-host` credentials.
pub struct OwnCredentials {
    creds: iocurve_net::certs::RunCredentials,
    relays: u32,
}

impl OwnCredentials {
    pub fn read(
        ca_key: &std::path::Path,
        client_ca: Option<&std::path::Path>,
        cluster_token: &str,
        relays: u32,
    ) -> Result<OwnCredentials, CliError> {
        let ca = client_ca.ok_or_else(|| CliError::Usage("--simulate-ca-key needs the CA: --client-ca FILE".into()))?;
        let ca_pem = iocurve_net::certs::read_pem(ca, "--client-ca")?;
        let key_pem = iocurve_net::certs::read_pem(ca_key, "--simulate-ca-key")?;
        // The agents' certificates last a week: a simulation is a bench, not a cluster.
        let expires = iocurve_net::unix_s() + 7 * 86_400;
        let creds = iocurve_net::certs::RunCredentials::of_cluster(&ca_pem, &key_pem, cluster_token, expires)
            .map_err(|e| CliError::Usage(format!("--simulate-ca-key: {e}")))?;
        Ok(OwnCredentials { creds, relays })
    }

    /// Agent or relay `k`'s host (`net` 1: agents, 2: relays).
    fn host(net: u8, k: u32) -> std::net::Ipv4Addr {
        std::net::Ipv4Addr::new(127, net, (k / 250) as u8, (k % 250 + 1) as u8)
    }

    /// The listening address, token and TLS of the host `ip` (on `port`).
    fn of(&self, ip: std::net::Ipv4Addr, port: u16) -> Result<(SocketAddr, String, AgentTls), CliError> {
        let h = self.creds.for_host(&ip.to_string()).map_err(|e| CliError::Runtime(format!("--simulate: {e}")))?;
        let tls = AgentTls { cert_pem: h.cert_pem, key_pem: h.key_pem, client_ca_pem: Some(h.client_ca_pem) };
        Ok((SocketAddr::new(ip.into(), port), h.token, tls))
    }
}

/// One agent of the process, like `base` but at `listen` with its own credentials, state
/// directory (--state-dir/LABEL) and audit label; what it is (simulated, a relay) is the
/// caller's to say.
fn member(
    base: &AgentConfig,
    label: &str,
    listen: SocketAddr,
    token: String,
    tls: Option<AgentTls>,
) -> Result<AgentConfig, CliError> {
    let state_dir = base.state_dir.join(label);
    std::fs::create_dir_all(&state_dir)
        .map_err(|e| CliError::Runtime(format!("--simulate: cannot create {}: {e}", state_dir.display())))?;
    Ok(AgentConfig {
        listen,
        token,
        tls,
        allow: base.allow.clone(),
        allow_write: base.allow_write.clone(),
        max_scratch: base.max_scratch,
        lease: base.lease,
        state_dir,
        metrics: None,
        one_run: None,
        remove_scratch: base.remove_scratch,
        claim_expiry: base.claim_expiry,
        audit: std::sync::Arc::new(base.audit.labelled(label)),
        simulated: None,
        relay: None,
    })
}

/// Serves `n` simulated agents like `base` (each its own host with `own`, and relays beside
/// them) until Ctrl-C or SIGTERM; told to end, waits `grace` for their steps to stop (the
/// agent's own grace, passed in), then exits regardless.
pub fn serve(
    base: AgentConfig,
    n: u32,
    latency_us: u64,
    own: Option<OwnCredentials>,
    grace: std::time::Duration,
) -> Result<ExitCode, CliError> {
    // Every address first: a bad range is refused before anything listens.
    // (Hosts of their own all listen on --listen's port, each at its own address.)
    let addrs = match own {
        Some(_) => vec![base.listen; n as usize],
        None => (0..n).map(|k| address(base.listen, k)).collect::<Result<Vec<_>, _>>()?,
    };
    let mut configs = Vec::with_capacity(n as usize);
    for (k, listen) in (0..n).zip(addrs) {
        let (listen, token, tls) = match &own {
            Some(o) => {
                let (a, t, tls) = o.of(OwnCredentials::host(1, k), base.listen.port())?;
                (a, t, Some(tls))
            }
            None => (listen, base.token.clone(), base.tls.clone()),
        };
        // Each agent's lines say which it is (`"agent": "sim-K"`).
        configs.push(AgentConfig {
            simulated: Some(Simulated { index: k, offset_ns: offset_ns(k), latency_ns: latency_us * 1000 }),
            ..member(&base, &format!("sim-{k}"), listen, token, tls)?
        });
    }
    // The relays: real agents that serve as relays, with no targets of their own.
    for r in 0..own.as_ref().map_or(0, |o| o.relays) {
        let Some(o) = &own else { break };
        let (listen, token, tls) = o.of(OwnCredentials::host(2, r), base.listen.port())?;
        configs.push(AgentConfig {
            allow: Vec::new(),
            allow_write: Vec::new(),
            relay: Some(std::sync::Arc::new(iocurve_run::coordinator::relay::Relay::new())),
            ..member(&base, &format!("relay-{r}"), listen, token, Some(tls))?
        });
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Runtime(format!("cannot start the network runtime: {e}")))?;
    rt.block_on(async move {
        let (end, ended) = tokio::sync::watch::channel(false);
        let mut agents = tokio::task::JoinSet::new();
        for (k, cfg) in (0u32..).zip(configs) {
            let mut ended = ended.clone();
            let name = if k < n { format!("agent {k}") } else { format!("relay {}", k - n) };
            agents.spawn(async move {
                let bound = move |a: SocketAddr| crate::outln!("iocurve {name} listening on {a}");
                iocurve_net::agent::serve(cfg, bound, async move {
                    let _ = ended.wait_for(|e| *e).await;
                })
                .await
            });
        }
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        let signalled = async {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending::<()>().await } } => {}
            }
        };
        tokio::pin!(signalled);
        // One agent that stops serving before the signal (its port taken, a failure) ends them
        // all: a simulation of fewer hosts than asked measures the wrong thing.
        let first_error = tokio::select! {
            _ = &mut signalled => None,
            r = agents.join_next() => Some(match r {
                Some(Ok(Err(e))) => CliError::from(e),
                Some(Ok(Ok(()))) => CliError::Runtime("--simulate: a simulated agent stopped serving: ending them all".into()),
                Some(Err(e)) => CliError::Runtime(format!("--simulate: a simulated agent failed ({e}): ending them all")),
                None => CliError::Runtime("--simulate: no agent left".into()),
            }),
        };
        let _ = end.send(true);
        // As a single agent does: a few seconds for the steps to stop, then out regardless.
        std::thread::spawn(move || {
            std::thread::sleep(grace);
            crate::errln!("still busy {} s after being told to end: ending now", grace.as_secs());
            std::process::exit(1)
        });
        while agents.join_next().await.is_some() {}
        match first_error {
            Some(e) => Err(e),
            None => Ok(ExitCode::SUCCESS),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_stay_within_ten_ms_and_differ_and_ports_stop_at_65535() {
        let offsets: Vec<i64> = (0..1000).map(offset_ns).collect();
        assert!(offsets.iter().all(|o| o.abs() <= MAX_OFFSET_NS));
        assert!(offsets.iter().any(|&o| o > 5_000_000) && offsets.iter().any(|&o| o < -5_000_000));
        assert_eq!(offset_ns(7), offset_ns(7));
        let l: SocketAddr = "127.0.0.1:65530".parse().unwrap();
        assert_eq!(address(l, 5).unwrap().port(), 65535);
        let e = address(l, 6).unwrap_err().to_string();
        assert!(e.contains("past 65535"), "{e}");
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        assert_eq!(address(any, 9).unwrap().port(), 0);
    }
}
