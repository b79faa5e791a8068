//! The coordinator's side: connects to agents (TLS and token), checks their protocol before any
//! I/O, measures each agent's clock offset, starts every agent's step at one moment, and merges
//! their intervals exactly as they arrive.

use std::sync::Arc;
use std::time::Duration;

use iocurve_engine::{StepObserver, StepProgress};
use iocurve_plan::Workload;
use iocurve_stats::{CpuUsage, IntervalStats, StepRecord};
use tonic::Request;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use crate::pb::agent_client::AgentClient;
use crate::{NetError, PROTOCOL, auth, certs, pb, unix_ns, wire};

/// How the coordinator reaches its agents.
#[derive(Clone)]
pub struct ClientConfig {
    pub token: String,
    /// CA that signed the agents' certificates; None with `insecure`.
    pub ca_pem: Option<String>,
    /// Client certificate and key, for agents that require mutual TLS.
    pub identity: Option<(String, String)>,
    /// Plain text, no TLS (`--insecure`).
    pub insecure: bool,
}

/// Adds the token to every call.
type Bearer = Box<dyn FnMut(Request<()>) -> Result<Request<()>, tonic::Status> + Send>;
type Client = AgentClient<InterceptedService<Channel, Bearer>>;

/// A connected agent.
pub struct Remote {
    pub addr: String,
    pub hello: pb::HelloReply,
    /// Agent clock minus coordinator clock, in ns, from the ping with the smallest round trip.
    pub offset_ns: i64,
    pub rtt_ns: i64,
    client: Client,
}

fn failed(addr: &str, what: &str, e: tonic::Status) -> NetError {
    let msg = format!("agent {addr}: {what}: {}", e.message());
    match e.code() {
        tonic::Code::Unauthenticated => {
            NetError::Input(format!("agent {addr} refused the token: give the agent's token with --token-file"))
        }
        tonic::Code::FailedPrecondition | tonic::Code::PermissionDenied | tonic::Code::InvalidArgument => {
            NetError::Input(msg)
        }
        _ => NetError::Failed(msg),
    }
}

/// Connects, says hello (protocol check) and measures the clock offset with `pings` pings.
pub async fn connect(addr: &str, cfg: &ClientConfig, pings: usize) -> Result<Remote, NetError> {
    let scheme = if cfg.insecure { "http" } else { "https" };
    let mut ep = Endpoint::from_shared(format!("{scheme}://{addr}"))
        .map_err(|e| NetError::Input(format!("host {addr} is not an address (HOST:PORT): {e}")))?
        .connect_timeout(Duration::from_secs(5))
        // An agent silent for ~3 s (pings unanswered) is lost.
        .http2_keep_alive_interval(Duration::from_secs(1))
        .keep_alive_timeout(Duration::from_secs(2))
        .keep_alive_while_idle(true);
    if !cfg.insecure {
        let ca = cfg.ca_pem.as_ref().ok_or_else(|| {
            NetError::Input(
                "agents are reached over TLS: give --ca (the CA that signed their certificates) or --insecure".into(),
            )
        })?;
        let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca)).domain_name(certs::AGENT_NAME);
        if let Some((cert, key)) = &cfg.identity {
            tls = tls.identity(Identity::from_pem(cert, key));
        }
        ep = ep.tls_config(tls).map_err(|e| NetError::Input(format!("TLS set-up for {addr} failed: {e}")))?;
    }
    let channel = ep
        .connect()
        .await
        .map_err(|e| NetError::Failed(format!("cannot reach agent {addr}: {e}{}", source_chain(&e))))?;
    let bearer: Bearer = Box::new(auth::bearer(Arc::new(cfg.token.clone())));
    let mut client = AgentClient::with_interceptor(channel, bearer);
    let hello = client
        .hello(pb::HelloRequest { protocol: PROTOCOL, version: env!("CARGO_PKG_VERSION").into() })
        .await
        .map_err(|e| failed(addr, "hello", e))?
        .into_inner();
    if hello.protocol != PROTOCOL {
        return Err(NetError::Input(format!(
            "protocol mismatch: agent {addr} (iocurve {}) speaks protocol {}, this coordinator (iocurve {}) speaks {PROTOCOL}; run the same iocurve version on both",
            hello.version,
            hello.protocol,
            env!("CARGO_PKG_VERSION")
        )));
    }
    let (mut offset_ns, mut rtt_ns) = (0, i64::MAX);
    for _ in 0..pings.max(1) {
        let t0 = unix_ns();
        let r = client.ping(pb::PingRequest {}).await.map_err(|e| failed(addr, "ping", e))?.into_inner();
        let t1 = unix_ns();
        if t1 - t0 < rtt_ns {
            rtt_ns = t1 - t0;
            offset_ns = r.agent_unix_ns - (t0 + t1) / 2;
        }
    }
    Ok(Remote { addr: addr.into(), hello, offset_ns, rtt_ns, client })
}

fn source_chain(e: &dyn std::error::Error) -> String {
    let mut out = String::new();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(&format!(": {s}"));
        cur = s.source();
    }
    out
}

/// Has every agent open its targets (`paths[i]` for agent i: allow list, safety rules) before
/// any I/O.
pub async fn targets(
    remotes: &mut [Remote],
    paths: &[Vec<String>],
    scratch_size: u64,
    write: bool,
) -> Result<Vec<Vec<pb::TargetFacts>>, NetError> {
    let mut out = Vec::new();
    for (r, p) in remotes.iter_mut().zip(paths) {
        let req = pb::TargetsRequest { targets: p.clone(), scratch_size, write };
        let facts = r.client.targets(req).await.map_err(|e| failed(&r.addr, "targets", e))?.into_inner();
        out.push(facts.targets);
    }
    Ok(out)
}

/// What one host did in a step.
#[derive(Debug, Clone)]
pub struct HostStep {
    pub addr: String,
    pub hostname: String,
    pub record: StepRecord,
    /// When its I/O started, on the coordinator's clock (Unix ns).
    pub started_unix_ns: i64,
}

/// A step on every agent: the merged record and each host's own.
pub struct MultiStep {
    pub merged: StepRecord,
    pub hosts: Vec<HostStep>,
    /// Latest minus earliest start across hosts, in µs.
    pub start_spread_us: f64,
    /// Agents lost during the step: (index, seconds into the step).
    pub lost: Vec<(usize, f64)>,
}

/// The parameters of a step sent to every agent.
pub struct StepSpec<'a> {
    pub workload: &'a Workload,
    pub workers: u32,
    /// Per agent, its target paths.
    pub targets: &'a [Vec<String>],
    pub scratch_size: u64,
    pub threads: u32,
    pub backend: &'a str,
    /// How long before the start the agents get the request (covers connection set-up).
    pub lead: Duration,
    /// A lost agent ends the step with an error (else the others carry on).
    pub abort_on_host_loss: bool,
}

/// Runs a step on every agent at one moment and merges the intervals as they arrive: interval
/// `k` goes to `obs` once every host reported it. `stop` (Ctrl-C) ends the step on every agent
/// at its next interval boundary.
pub async fn run_step(
    remotes: &mut [Remote],
    spec: &StepSpec<'_>,
    obs: &mut dyn StepObserver,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<MultiStep, NetError> {
    let w = spec.workload;
    let json = serde_json::to_string(w).map_err(|e| NetError::Failed(e.to_string()))?;
    let start_at = unix_ns() + spec.lead.as_nanos() as i64;
    let mut streams = Vec::new();
    for (r, targets) in remotes.iter_mut().zip(spec.targets) {
        let req = pb::StepRequest {
            workload_json: json.clone(),
            workers: spec.workers,
            targets: targets.clone(),
            start_at_unix_ns: start_at + r.offset_ns,
            scratch_size: spec.scratch_size,
            threads: spec.threads,
            backend: spec.backend.into(),
        };
        let s = r.client.run_step(req).await.map_err(|e| failed(&r.addr, "step", e))?.into_inner();
        streams.push(s);
    }
    let n = remotes.len();
    let intervals = w.intervals as usize;
    // Per host: its record; per interval: the hosts' stats still to be merged.
    let mut hosts: Vec<Option<StepRecord>> = vec![None; n];
    let mut started = vec![0i64; n];
    let mut pending: Vec<Vec<Option<(IntervalStats, CpuUsage, f64)>>> = vec![vec![None; n]; intervals];
    let mut merged: Option<StepRecord> = None;
    let mut done = vec![false; n];
    let mut lost: Vec<Option<f64>> = vec![None; n];
    let mut failure: Option<NetError> = None;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(usize, Result<Option<pb::StepEvent>, tonic::Status>)>(64);
    for (i, mut s) in streams.into_iter().enumerate() {
        let tx = tx.clone();
        tokio::spawn(async move {
            loop {
                let m = s.message().await;
                let end = !matches!(m, Ok(Some(_)));
                if tx.send((i, m)).await.is_err() || end {
                    break;
                }
            }
        });
    }
    drop(tx);
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let t0 = std::time::Instant::now();
    let mut next_merge = 0usize;
    let mut stopping = false;
    loop {
        if !stopping && stop.load(std::sync::atomic::Ordering::Relaxed) {
            // Dropping the streams stops every agent at its next interval boundary.
            stopping = true;
        }
        let msg = tokio::select! {
            m = rx.recv() => m,
            _ = tick.tick() => {
                obs.progress(&StepProgress {
                    elapsed_s: t0.elapsed().as_secs_f64(),
                    planned_s: w.step_seconds() + spec.lead.as_secs_f64(),
                    warmup: false,
                    ops: merged.as_ref().map_or(0, |m| m.intervals.iter().map(|i| i.ops).sum()),
                    bytes: merged.as_ref().map_or(0, |m| m.intervals.iter().map(|i| i.bytes).sum()),
                    lat_sum_ns: 0,
                    intervals_done: next_merge as u32,
                });
                continue;
            }
        };
        let Some((h, m)) = msg else { break };
        let event = match m {
            Ok(Some(e)) => e.event,
            Ok(None) | Err(_) if done[h] => None,
            // The agent is gone (killed, cut off): the others carry on unless told otherwise.
            other => {
                let why = match other {
                    Err(e) => e.message().to_string(),
                    _ => "the stream ended without a result".into(),
                };
                let at = t0.elapsed().as_secs_f64() - spec.lead.as_secs_f64();
                done[h] = true;
                if spec.abort_on_host_loss {
                    failure.get_or_insert(NetError::Failed(format!(
                        "agent {} lost {at:.1} s into the step ({why}); --on-host-loss abort ends the run",
                        remotes[h].addr
                    )));
                } else {
                    eprintln!(
                        "WARNING: agent {} lost {at:.1} s into the step ({why}); the others carry on",
                        remotes[h].addr
                    );
                    lost[h] = Some(at.max(0.0));
                }
                None
            }
        };
        match event {
            Some(pb::step_event::Event::Started(s)) => {
                started[h] = s.started_unix_ns - remotes[h].offset_ns;
                hosts[h] =
                    Some(StepRecord::new(spec.workers, w.queue_depth, s.threads as usize, w.interval_s, s.sample_s));
                if merged.is_none() {
                    // Workers are per host, as published; the host count goes beside them.
                    let mut rec =
                        StepRecord::new(spec.workers, w.queue_depth, s.threads as usize, w.interval_s, s.sample_s);
                    rec.hosts = n as u32;
                    obs.started(&rec);
                    merged = Some(rec);
                }
            }
            Some(pb::step_event::Event::Interval(i)) => {
                let (idx, stats, cpu, dur) = wire::interval_from(&i)
                    .map_err(|e| NetError::Failed(format!("agent {}: bad interval: {e}", remotes[h].addr)))?;
                if let Some(slot) = pending.get_mut(idx as usize) {
                    slot[h] = Some((stats, cpu, dur));
                }
            }
            Some(pb::step_event::Event::Done(d)) => {
                done[h] = true;
                if !d.error.is_empty() {
                    let msg = format!("agent {}: {}", remotes[h].addr, d.error);
                    failure.get_or_insert(if d.input { NetError::Input(msg) } else { NetError::Failed(msg) });
                }
            }
            None => {}
        }
        // Hand on, in order, every interval all hosts still there reported.
        while next_merge < intervals
            && pending[next_merge].iter().zip(&lost).all(|(p, l)| p.is_some() || l.is_some())
            && lost.iter().any(Option::is_none)
        {
            let parts: Vec<_> = pending[next_merge].iter_mut().map(Option::take).collect();
            let reporting = parts.iter().filter(|p| p.is_some()).count().max(1) as f64;
            let mut all = IntervalStats::default();
            let mut cpu = CpuUsage::default();
            for (k, part) in parts.into_iter().enumerate() {
                let Some((s, c, d)) = part else { continue };
                all.merge(&s);
                cpu.user += c.user / reporting;
                cpu.system += c.system / reporting;
                cpu.iowait += c.iowait / reporting;
                if let Some(r) = hosts[k].as_mut() {
                    r.push_interval(s, c, d);
                }
            }
            obs.interval(next_merge as u32, &all, &cpu, w.interval_s);
            if let Some(m) = merged.as_mut() {
                m.push_interval(all, cpu, w.interval_s);
            }
            next_merge += 1;
        }
        if done.iter().all(|&d| d) {
            break;
        }
        if stopping {
            break;
        }
    }
    if let Some(f) = failure {
        return Err(f);
    }
    if lost.iter().all(Option::is_some) {
        return Err(NetError::Failed("every agent was lost during the step".into()));
    }
    let mut merged = merged.ok_or_else(|| NetError::Failed("no agent started the step".into()))?;
    merged.interrupted = merged.intervals.len() < intervals;
    for (i, at) in lost.iter().enumerate() {
        if let Some(at) = at {
            merged.notes.push((
                "host_lost".into(),
                format!(
                    "agent {} lost {at:.1} s into the step: from then on the figures come from the other hosts",
                    remotes[i].addr
                ),
            ));
        }
    }
    let spread = started.iter().max().unwrap_or(&0) - started.iter().min().unwrap_or(&0);
    let hosts = hosts
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let mut record = r.unwrap_or_else(|| StepRecord::new(spec.workers, w.queue_depth, 0, w.interval_s, 1.0));
            record.interrupted = record.intervals.len() < intervals;
            HostStep {
                addr: remotes[i].addr.clone(),
                hostname: remotes[i].hello.hostname.clone(),
                record,
                started_unix_ns: started[i],
            }
        })
        .collect();
    let lost = lost.iter().enumerate().filter_map(|(i, l)| l.map(|at| (i, at))).collect();
    Ok(MultiStep { merged, hosts, start_spread_us: spread as f64 / 1000.0, lost })
}
