//! The coordinator's side: connects to agents (TLS and token), checks their protocol and clock
//! before any I/O, starts every agent's step at one moment, and merges their intervals exactly
//! as they arrive. A local run goes through here too, with one in-process agent.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use iocurve_engine::{StepObserver, StepProgress};
use iocurve_plan::{Fault, TargetGroup, Workload};
use iocurve_stats::{Drain, ErrorCounts, HostRecord, IntervalStats, StepRecord, UNKNOWN_TARGET};
use tonic::Request;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use crate::agent::{self, InProcess};
use crate::clock::{ClockEstimate, ClockVerdict, check_clock};
use crate::merge::{IntervalMerger, Part};
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
    /// An agent whose clock is further off than this is refused (see [`check_clock`]).
    pub max_skew: Duration,
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
    /// Where this agent's targets start in the run's list of targets: its errors name targets
    /// by their place in that list.
    pub target_offset: u32,
    /// The in-process agent of a local run.
    pub in_process: bool,
    /// The clock is further off than is comfortable, not so far that the agent is refused:
    /// for the caller to show.
    pub clock_warning: Option<String>,
    client: Client,
}

impl Remote {
    /// How messages name this agent: `agent HOST:PORT: `, nothing for the in-process one.
    fn who(&self) -> String {
        if self.in_process { String::new() } else { format!("agent {}: ", self.addr) }
    }
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

/// What a measured clock offset means for a run: agents' steps start at one moment whatever
/// their clocks say (each start is converted by the offset), but clocks that far apart are not
/// kept in step by NTP and may be stepped during the run, moving that agent's start.
/// Connects, says hello (protocol check) and measures the clock offset with `pings` pings.
pub async fn connect(addr: &str, cfg: &ClientConfig, pings: usize) -> Result<Remote, NetError> {
    let scheme = if cfg.insecure { "http" } else { "https" };
    let mut ep = Endpoint::from_shared(format!("{scheme}://{addr}"))
        .map_err(|e| NetError::Input(format!("host {addr} is not an address (HOST:PORT): {e}")))?
        .connect_timeout(Duration::from_secs(5))
        // The agent's heartbeat at the transport: an agent silent for ~3 s (pings unanswered,
        // e.g. a cut link) is lost. Its progress events are the other one (see `run_step`).
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
    let mut r = handshake(addr, channel, &cfg.token, pings, false).await?;
    match check_clock(addr, r.offset_ns, r.rtt_ns, cfg.max_skew) {
        ClockVerdict::Fine => {}
        ClockVerdict::Warn(m) => r.clock_warning = Some(m),
        ClockVerdict::Refuse(m) => return Err(NetError::Input(m)),
    }
    tracing::info!(agent = addr, host = %r.hello.hostname, offset_ns = r.offset_ns, rtt_ns = r.rtt_ns, "agent connected");
    Ok(r)
}

/// Starts the in-process agent of a local run and connects to it, as to any agent.
pub async fn connect_in_process(local: InProcess) -> Result<Remote, NetError> {
    let token = auth::random_token()?;
    let mut io = Some(agent::in_process(local, token.clone()));
    let channel = Endpoint::from_static("http://in-process")
        .connect_with_connector(tower::service_fn(move |_| {
            let io = io.take();
            async move {
                io.map(hyper_util::rt::TokioIo::new)
                    .ok_or_else(|| std::io::Error::other("the in-process agent takes one connection"))
            }
        }))
        .await
        .map_err(|e| NetError::Failed(format!("cannot start the in-process agent: {e}")))?;
    handshake("in-process", channel, &token, 1, true).await
}

/// Hello (protocol check) and `pings` pings for the clock offset.
async fn handshake(
    addr: &str,
    channel: Channel,
    token: &str,
    pings: usize,
    in_process: bool,
) -> Result<Remote, NetError> {
    let bearer: Bearer = Box::new(auth::bearer(Arc::new(token.to_string())));
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
    let mut clock = ClockEstimate::default();
    for _ in 0..pings.max(1) {
        let t0 = unix_ns();
        let r = client.ping(pb::PingRequest {}).await.map_err(|e| failed(addr, "ping", e))?.into_inner();
        clock.add(t0, r.agent_unix_ns, unix_ns());
    }
    let (offset_ns, rtt_ns) = clock.best();
    Ok(Remote {
        addr: addr.into(),
        hello,
        offset_ns,
        rtt_ns,
        target_offset: 0,
        in_process,
        clock_warning: None,
        client,
    })
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

/// Has every agent open its targets (`groups[i]` for agent i: allow list, safety rules) before
/// any I/O.
pub async fn targets(
    remotes: &mut [Remote],
    groups: &[Vec<TargetGroup>],
    scratch_size: u64,
    write: bool,
    unfilled: bool,
) -> Result<Vec<Vec<pb::TargetFacts>>, NetError> {
    let mut out = Vec::new();
    let mut offset = 0;
    for (r, g) in remotes.iter_mut().zip(groups) {
        let req = pb::TargetsRequest { groups: wire_groups(g), scratch_size, write, unfilled };
        let facts = r.client.targets(req).await.map_err(|e| failed(&r.addr, "targets", e))?.into_inner();
        r.target_offset = offset;
        offset += facts.targets.len() as u32;
        out.push(facts.targets);
    }
    Ok(out)
}

/// Target groups as a request carries them.
pub fn wire_groups(groups: &[TargetGroup]) -> Vec<pb::TargetGroup> {
    groups
        .iter()
        .map(|g| pb::TargetGroup { name: g.name.clone(), weight: g.weight, targets: g.targets.clone() })
        .collect()
}

/// A step on every agent: the merged record (with each host's own in `per_host`).
pub struct MultiStep {
    pub merged: StepRecord,
    /// Agents lost during the step, by index.
    pub lost: Vec<usize>,
}

/// The parameters of a step sent to every agent.
pub struct StepSpec<'a> {
    pub workload: &'a Workload,
    pub workers: u32,
    /// Per agent, its target groups (with the plan's weights).
    pub targets: &'a [Vec<TargetGroup>],
    pub scratch_size: u64,
    pub threads: u32,
    pub backend: &'a str,
    pub faults: &'a [Fault],
    /// How long before the start the agents get the request (covers connection set-up).
    pub lead: Duration,
    /// A lost agent ends the step with an error (else the others carry on).
    pub abort_on_host_loss: bool,
    /// An agent that sends nothing (its progress events are its heartbeat) for this long once
    /// its step should have started is lost.
    pub silence: Duration,
}

/// The coordinator's view of the agents while a step runs.
struct Hosts<'a> {
    spec: &'a StepSpec<'a>,
    addrs: Vec<String>,
    records: Vec<Option<StepRecord>>,
    started: Vec<i64>,
    /// Latest live totals per agent.
    progress: Vec<pb::Progress>,
    /// The agents' intervals until each is merged.
    merger: IntervalMerger,
    done: Vec<bool>,
    /// What each agent's step did with the I/Os outstanding at its end, and its notes.
    drain: Vec<Drain>,
    notes: Vec<Vec<(String, String)>>,
    unmeasured: Vec<ErrorCounts>,
    /// An agent's step ended by `on_error = abort`: why.
    aborted: Option<String>,
    /// Seconds into the step when an agent was lost.
    lost: Vec<Option<f64>>,
    /// Warnings for the observer, handed on from the step's loop.
    warnings: Vec<String>,
    /// When an agent counts as silent, unless it sends something before.
    deadline: Vec<Instant>,
    failure: Option<NetError>,
    t0: Instant,
}

impl Hosts<'_> {
    /// Agent `h` is gone (killed, cut off, silent): the others carry on unless told otherwise.
    fn lose(&mut self, h: usize, why: &str) {
        if self.done[h] {
            return;
        }
        self.done[h] = true;
        let at = (self.t0.elapsed().as_secs_f64() - self.spec.lead.as_secs_f64()).max(0.0);
        let addr = &self.addrs[h];
        if self.spec.abort_on_host_loss {
            self.failure.get_or_insert(NetError::Aborted(format!(
                "agent {addr} lost {at:.1} s into the step ({why}); --on-host-loss abort ends the run"
            )));
        } else {
            tracing::warn!(agent = %addr, at_s = at, why, "agent lost; the others carry on");
            self.warnings.push(format!("agent {addr} lost {at:.1} s into the step ({why}); the others carry on"));
            self.lost[h] = Some(at);
        }
    }

    /// The agents' live totals added up; the step is as far as its furthest agent.
    fn live(&self, intervals_done: u32) -> StepProgress {
        let p = &self.progress;
        let elapsed_s = p.iter().map(|p| p.elapsed_s).fold(0.0, f64::max);
        StepProgress {
            elapsed_s,
            planned_s: self.spec.workload.step_seconds(),
            warmup: p.iter().any(|p| p.warmup) || elapsed_s < self.spec.workload.warmup_s,
            ops: p.iter().map(|p| p.ops).sum(),
            bytes: p.iter().map(|p| p.bytes).sum(),
            lat_sum_ns: p.iter().map(|p| p.lat_sum_ns).sum(),
            intervals_done,
        }
    }
}

/// Errors of agent `h` name its targets by their place in the run's list.
fn shift_targets(s: &mut IntervalStats, offset: u32) {
    for d in [&mut s.read, &mut s.write] {
        for e in &mut d.errors.0 {
            if e.0 != UNKNOWN_TARGET {
                e.0 += offset;
            }
        }
    }
}

/// Runs a step on every agent at one moment and merges the intervals as they arrive: interval
/// `k` goes to `obs` (each host's part first, then the merged one) once every host still there
/// reported it. `stop` (Ctrl-C) asks every agent to end its step at once (the unfinished
/// interval is dropped).
pub async fn run_step(
    remotes: &mut [Remote],
    spec: &StepSpec<'_>,
    obs: &mut dyn StepObserver,
    stop: &AtomicBool,
) -> Result<MultiStep, NetError> {
    let w = spec.workload;
    let json = serde_json::to_string(w).map_err(|e| NetError::Failed(e.to_string()))?;
    let faults_json =
        if spec.faults.is_empty() { String::new() } else { serde_json::to_string(spec.faults).unwrap_or_default() };
    let start_at = unix_ns() + spec.lead.as_nanos() as i64;
    let mut streams = Vec::new();
    for (r, targets) in remotes.iter_mut().zip(spec.targets) {
        let req = pb::StepRequest {
            workload_json: json.clone(),
            workers: spec.workers,
            groups: wire_groups(targets),
            start_at_unix_ns: start_at + r.offset_ns,
            scratch_size: spec.scratch_size,
            threads: spec.threads,
            backend: spec.backend.into(),
            faults_json: faults_json.clone(),
        };
        let s = r.client.run_step(req).await.map_err(|e| failed(&r.addr, "step", e))?.into_inner();
        streams.push(s);
    }
    let n = remotes.len();
    let intervals = w.intervals as usize;
    let t0 = Instant::now();
    let mut st = Hosts {
        spec,
        addrs: remotes.iter().map(|r| r.addr.clone()).collect(),
        records: vec![None; n],
        started: vec![0; n],
        progress: vec![pb::Progress::default(); n],
        merger: IntervalMerger::new(intervals, n),
        done: vec![false; n],
        drain: vec![Drain::default(); n],
        notes: vec![Vec::new(); n],
        unmeasured: vec![ErrorCounts::default(); n],
        aborted: None,
        lost: vec![None; n],
        warnings: Vec::new(),
        deadline: vec![t0 + spec.lead + spec.silence; n],
        failure: None,
        t0,
    };
    let mut merged: Option<StepRecord> = None;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(usize, Result<Option<pb::StepEvent>, tonic::Status>)>(64);
    let mut readers = Vec::new();
    for (i, mut s) in streams.into_iter().enumerate() {
        let tx = tx.clone();
        readers.push(tokio::spawn(async move {
            loop {
                let m = s.message().await;
                let end = !matches!(m, Ok(Some(_)));
                if tx.send((i, m)).await.is_err() || end {
                    break;
                }
            }
        }));
    }
    drop(tx);
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut stop_sent = false;
    // A single in-process agent is the local run itself: no per-host figures to keep apart.
    let per_host = !(n == 1 && remotes[0].in_process);
    while !st.done.iter().all(|&d| d) {
        for m in st.warnings.drain(..) {
            obs.warning(&m);
        }
        if !stop_sent && (stop.load(Ordering::Relaxed) || st.aborted.is_some()) {
            stop_sent = true;
            for (h, r) in remotes.iter_mut().enumerate() {
                if !st.done[h] {
                    // Best effort: an agent that cannot be told is lost anyway.
                    let _ = r.client.stop(pb::StopRequest {}).await;
                }
            }
        }
        let msg = tokio::select! {
            m = rx.recv() => m,
            _ = tick.tick() => {
                let now = Instant::now();
                for (h, reader) in readers.iter().enumerate() {
                    if !st.done[h] && now > st.deadline[h] {
                        let why = format!("silent for {:.0} s", spec.silence.as_secs_f64());
                        st.lose(h, &why);
                        // Dropping its stream tells the agent, if it still listens, to stop.
                        reader.abort();
                    }
                }
                obs.progress(&st.live(st.merger.merged() as u32));
                continue;
            }
        };
        let Some((h, m)) = msg else { break };
        if st.done[h] {
            continue;
        }
        st.deadline[h] = Instant::now() + spec.silence;
        let event = match m {
            Ok(Some(e)) => e.event,
            Err(e) => {
                st.lose(h, e.message());
                None
            }
            Ok(None) => {
                st.lose(h, "the stream ended without a result");
                None
            }
        };
        match event {
            Some(pb::step_event::Event::Started(s)) => {
                st.started[h] = s.started_unix_ns - remotes[h].offset_ns;
                st.records[h] =
                    Some(StepRecord::new(spec.workers, w.queue_depth, s.threads as usize, w.interval_s, s.sample_s));
                if merged.is_none() {
                    // Workers are per host, as published; the host count goes beside them.
                    let mut rec =
                        StepRecord::new(spec.workers, w.queue_depth, s.threads as usize, w.interval_s, s.sample_s);
                    rec.hosts = n as u32;
                    obs.started(&rec);
                    merged = Some(rec);
                }
                if per_host {
                    let r = &remotes[h];
                    obs.host_started(h as u32, &r.addr, &r.hello.hostname, st.started[h], s.threads as usize);
                }
            }
            Some(pb::step_event::Event::Progress(p)) => st.progress[h] = p,
            Some(pb::step_event::Event::Interval(i)) => {
                let (idx, mut stats, cpu, dur) = wire::interval_from(&i)
                    .map_err(|e| NetError::Failed(format!("agent {}: bad interval: {e}", remotes[h].addr)))?;
                shift_targets(&mut stats, remotes[h].target_offset);
                st.merger.add(h, idx as usize, Part { stats, cpu, duration_s: dur });
            }
            Some(pb::step_event::Event::Done(d)) => {
                st.done[h] = true;
                st.drain[h] = Drain { late: d.late, stuck: d.stuck, stuck_age_ns: d.stuck_age_ns, wait_ns: d.wait_ns };
                st.notes[h] = d.notes.iter().map(|n| (n.code.clone(), n.message.clone())).collect();
                for e in &d.unmeasured_errors {
                    let t = if e.target == UNKNOWN_TARGET { e.target } else { e.target + remotes[h].target_offset };
                    st.unmeasured[h].add(t, e.errno, e.count);
                }
                if !d.error.is_empty() {
                    let msg = format!("{}{}", remotes[h].who(), d.error);
                    st.failure.get_or_insert(if d.input { NetError::Input(msg) } else { NetError::Failed(msg) });
                }
                if d.aborted && st.aborted.is_none() {
                    // on_error = abort on this host: the others stop now too, and the run ends
                    // after this step with what every host measured.
                    st.aborted = Some(format!("{}{}", remotes[h].who(), d.abort_reason));
                }
            }
            None => {}
        }
        // Hand on, in order, every interval all hosts still there reported.
        let lost: Vec<bool> = st.lost.iter().map(Option::is_some).collect();
        for m in st.merger.ready(&lost) {
            for (k, p) in m.parts {
                if per_host {
                    obs.host_interval(k as u32, m.index as u32, &p.stats, &p.cpu, p.duration_s);
                }
                if let Some(r) = st.records[k].as_mut() {
                    r.push_interval(p.stats, p.cpu, p.duration_s);
                }
            }
            obs.interval(m.index as u32, &m.all, &m.cpu, w.interval_s);
            if let Some(merged) = merged.as_mut() {
                merged.push_interval(m.all, m.cpu, w.interval_s);
            }
        }
    }
    for r in readers {
        r.abort();
    }
    for m in st.warnings.drain(..) {
        obs.warning(&m);
    }
    if let Some(f) = st.failure {
        return Err(f);
    }
    if st.lost.iter().all(Option::is_some) {
        return Err(NetError::Failed("every agent was lost during the step".into()));
    }
    let mut merged = merged.ok_or_else(|| NetError::Failed("no agent started the step".into()))?;
    merged.interrupted = merged.intervals.len() < intervals;
    merged.aborted = st.aborted.take();
    for (h, d) in st.drain.iter().enumerate() {
        merged.drain.merge(d);
        merged.unmeasured_errors.merge(&st.unmeasured[h]);
        for (code, message) in &st.notes[h] {
            let message = if per_host { format!("{}: {message}", remotes[h].addr) } else { message.clone() };
            merged.notes.push((code.clone(), message));
        }
    }
    for (i, at) in st.lost.iter().enumerate() {
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
    if per_host {
        merged.per_host = st
            .records
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                let mut record =
                    r.unwrap_or_else(|| StepRecord::new(spec.workers, w.queue_depth, 0, w.interval_s, 1.0));
                record.interrupted = record.intervals.len() < intervals;
                record.drain = st.drain[i];
                record.unmeasured_errors = st.unmeasured[i].clone();
                record.notes = st.notes[i].clone();
                HostRecord {
                    address: remotes[i].addr.clone(),
                    hostname: remotes[i].hello.hostname.clone(),
                    started_unix_ns: st.started[i],
                    lost_at_s: st.lost[i],
                    record,
                }
            })
            .collect();
    }
    let lost = st.lost.iter().enumerate().filter_map(|(i, l)| l.map(|_| i)).collect();
    Ok(MultiStep { merged, lost })
}

/// How a precondition pass on the agents ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassEnd {
    /// Every target of every agent written and synced.
    Complete,
    /// Stopped (Ctrl-C) before that: the states streamed so far say where to resume.
    Interrupted,
}

/// Follows every agent's event stream at once until each has sent its last event (`handle`
/// returns true for it). `stop` (Ctrl-C) sends every agent `Stop` once and keeps reading, so
/// that each says where it stopped. An agent silent for `silence`, a stream that fails or ends
/// early, and an error from `handle` end it all.
async fn follow<E: Send + 'static>(
    remotes: &mut [Remote],
    streams: Vec<tonic::Streaming<E>>,
    what: &str,
    stop: &AtomicBool,
    silence: Duration,
    handle: &mut dyn FnMut(usize, E) -> Result<bool, NetError>,
) -> Result<(), NetError> {
    let n = streams.len();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(usize, Result<Option<E>, tonic::Status>)>(64);
    let mut readers = Vec::new();
    for (i, mut s) in streams.into_iter().enumerate() {
        let tx = tx.clone();
        readers.push(tokio::spawn(async move {
            loop {
                let m = s.message().await;
                let end = !matches!(m, Ok(Some(_)));
                if tx.send((i, m)).await.is_err() || end {
                    break;
                }
            }
        }));
    }
    drop(tx);
    let result = async {
        let mut done = vec![false; n];
        let mut deadline = vec![Instant::now() + silence; n];
        let mut stop_sent = false;
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        while !done.iter().all(|&d| d) {
            if !stop_sent && stop.load(Ordering::Relaxed) {
                stop_sent = true;
                for (h, r) in remotes.iter_mut().enumerate() {
                    if !done[h] {
                        let _ = r.client.stop(pb::StopRequest {}).await;
                    }
                }
            }
            let msg = tokio::select! {
                m = rx.recv() => m,
                _ = tick.tick() => {
                    let now = Instant::now();
                    if let Some(h) = (0..n).find(|&h| !done[h] && now > deadline[h]) {
                        return Err(NetError::Failed(format!(
                            "agent {} was silent for {:.0} s during the {what}",
                            remotes[h].addr,
                            silence.as_secs_f64()
                        )));
                    }
                    continue;
                }
            };
            let Some((h, m)) = msg else { break };
            if done[h] {
                // The end of a stream whose last event was read.
                continue;
            }
            deadline[h] = Instant::now() + silence;
            match m {
                Ok(Some(e)) => done[h] = handle(h, e)?,
                Ok(None) => {
                    return Err(NetError::Failed(format!(
                        "agent {}: the {what} ended without a result",
                        remotes[h].addr
                    )));
                }
                Err(e) => return Err(failed(&remotes[h].addr, what, e)),
            }
        }
        Ok(())
    }
    .await;
    readers.iter().for_each(|r| r.abort());
    result
}

/// A precondition pass on every agent at once (`reqs[h]` for agent h). Each target's state goes
/// to `on_progress(h, …)` as the agents stream it, so that the caller keeps it; `stop` (Ctrl-C)
/// tells every agent to stop, which sends its last states and ends. An agent silent for
/// `silence` is lost, and so is the pass: it fails.
pub async fn precondition(
    remotes: &mut [Remote],
    reqs: Vec<pb::PreconditionRequest>,
    stop: &AtomicBool,
    silence: Duration,
    on_progress: &mut dyn FnMut(usize, &pb::PreconditionProgress),
) -> Result<PassEnd, NetError> {
    let mut streams = Vec::new();
    for (r, req) in remotes.iter_mut().zip(reqs) {
        streams.push(r.client.precondition(req).await.map_err(|e| failed(&r.addr, "precondition", e))?.into_inner());
    }
    let addrs: Vec<String> = remotes.iter().map(|r| r.addr.clone()).collect();
    let mut interrupted = false;
    follow(remotes, streams, "precondition pass", stop, silence, &mut |h, e: pb::PreconditionEvent| match e.event {
        Some(pb::precondition_event::Event::Progress(p)) => {
            on_progress(h, &p);
            Ok(false)
        }
        Some(pb::precondition_event::Event::Done(d)) => {
            if !d.error.is_empty() {
                let msg = format!("agent {}: precondition: {}", addrs[h], d.error);
                return Err(if d.input { NetError::Input(msg) } else { NetError::Failed(msg) });
            }
            interrupted |= d.interrupted;
            Ok(true)
        }
        None => Ok(false),
    })
    .await?;
    Ok(if interrupted || stop.load(Ordering::Relaxed) { PassEnd::Interrupted } else { PassEnd::Complete })
}

/// What one agent's verification pass found.
#[derive(Debug, Clone, Default)]
pub struct AgentPass {
    pub counts: iocurve_stats::VerifyCounts,
    pub unlisted: u64,
    /// The map file on the agent.
    pub map: String,
}

/// The final verification pass on every agent at once (`reqs[h]` for agent h): each agent
/// reads back every block its map knows. Problems go to `on_problem(h, …)` as they come;
/// `on_progress(h, done, total)` about every second. Interrupted (Ctrl-C): None.
pub async fn verify_pass(
    remotes: &mut [Remote],
    reqs: Vec<pb::VerifyPassRequest>,
    stop: &AtomicBool,
    silence: Duration,
    on_progress: &mut dyn FnMut(usize, u64, u64),
    on_problem: &mut dyn FnMut(usize, &pb::VerifyProblem),
) -> Result<Option<Vec<AgentPass>>, NetError> {
    let mut streams = Vec::new();
    for (r, req) in remotes.iter_mut().zip(reqs) {
        streams.push(r.client.verify_pass(req).await.map_err(|e| failed(&r.addr, "verification", e))?.into_inner());
    }
    let addrs: Vec<String> = remotes.iter().map(|r| r.addr.clone()).collect();
    let mut out = vec![AgentPass::default(); remotes.len()];
    let mut interrupted = false;
    follow(remotes, streams, "verification pass", stop, silence, &mut |h, e: pb::VerifyPassEvent| match e.event {
        Some(pb::verify_pass_event::Event::Progress(p)) => {
            on_progress(h, p.done_bytes, p.total_bytes);
            Ok(false)
        }
        Some(pb::verify_pass_event::Event::Problems(ps)) => {
            ps.problems.iter().for_each(|p| on_problem(h, p));
            Ok(false)
        }
        Some(pb::verify_pass_event::Event::Done(d)) => {
            if !d.error.is_empty() {
                let msg = format!("agent {}: verification: {}", addrs[h], d.error);
                return Err(if d.input { NetError::Input(msg) } else { NetError::Failed(msg) });
            }
            interrupted |= d.interrupted;
            out[h] = AgentPass {
                counts: d.counts.as_ref().map(wire::verify_from).unwrap_or_default(),
                unlisted: d.unlisted,
                map: d.map,
            };
            Ok(true)
        }
        None => Ok(false),
    })
    .await?;
    Ok((!interrupted && !stop.load(Ordering::Relaxed)).then_some(out))
}
