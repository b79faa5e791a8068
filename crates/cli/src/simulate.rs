//! `iocurve agent --simulate N` (issue 46): N agents served from one process, each its own
//! listener, connection, state directory, host name and clock offset, whose steps are modelled
//! (`iocurve_net::agent::simulate`). What it is for: measuring a coordinator at hundreds or
//! thousands of hosts on one machine, which real agents (an I/O thread each) cannot reach.

use std::net::SocketAddr;
use std::process::ExitCode;

use iocurve_net::agent::AgentConfig;
use iocurve_net::agent::simulate::Simulated;

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

/// Serves `n` simulated agents like `base` until Ctrl-C or SIGTERM; told to end, waits `grace`
/// for their steps to stop (the agent's own grace, passed in), then exits regardless.
pub fn serve(base: AgentConfig, n: u32, latency_us: u64, grace: std::time::Duration) -> Result<ExitCode, CliError> {
    // Every address first: a bad range is refused before anything listens.
    let addrs = (0..n).map(|k| address(base.listen, k)).collect::<Result<Vec<_>, _>>()?;
    let mut configs = Vec::with_capacity(n as usize);
    for (k, listen) in (0..n).zip(addrs) {
        let state_dir = base.state_dir.join(format!("sim-{k}"));
        std::fs::create_dir_all(&state_dir)
            .map_err(|e| CliError::Runtime(format!("--simulate: cannot create {}: {e}", state_dir.display())))?;
        configs.push(AgentConfig {
            listen,
            token: base.token.clone(),
            tls: base.tls.clone(),
            allow: base.allow.clone(),
            allow_write: base.allow_write.clone(),
            max_scratch: base.max_scratch,
            lease: base.lease,
            state_dir,
            metrics: None,
            one_run: false,
            remove_scratch: base.remove_scratch,
            claim_expiry: base.claim_expiry,
            // Each agent's lines say which it is (`"agent": "sim-K"`).
            audit: std::sync::Arc::new(base.audit.labelled(&format!("sim-{k}"))),
            simulated: Some(Simulated { index: k, offset_ns: offset_ns(k), latency_ns: latency_us * 1000 }),
            relay: None,
        });
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Runtime(format!("cannot start the network runtime: {e}")))?;
    rt.block_on(async move {
        let (end, ended) = tokio::sync::watch::channel(false);
        let mut agents = tokio::task::JoinSet::new();
        for (k, cfg) in (0..n).zip(configs) {
            let mut ended = ended.clone();
            agents.spawn(async move {
                let bound = move |a: SocketAddr| crate::outln!("iocurve agent {k} listening on {a}");
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
