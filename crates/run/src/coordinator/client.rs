//! The coordinator's side: connects to agents (TLS and token), checks their protocol and clock
//! before any I/O, starts every agent's step at one moment, and merges their intervals exactly
//! as they arrive. A local run goes through here too, with one in-process agent.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use iocurve_plan::TargetGroup;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

use super::clock::{ClockEstimate, ClockVerdict, check_clock};
use iocurve_net::agent::{self, InProcess};
use iocurve_net::pb::agent_client::AgentClient;
use iocurve_net::{NetError, PROTOCOL, auth, binding, pb, unix_ns};

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
    /// The name every agent's certificate must carry; None: the host each is dialled at.
    pub tls_name: Option<String>,
    /// Send each agent the token of its own host, derived from `token` (`--token-per-host`).
    pub per_host_tokens: bool,
    /// An agent whose clock is further off than this is refused (see [`check_clock`]).
    pub max_skew: Duration,
    /// A relay's call to its child (issue 46): the child's delegation and its key, proved
    /// instead of a token (`identity` is then the relay's certificate for the run).
    pub delegation: Option<Arc<iocurve_net::delegation::Minted>>,
}

pub(crate) type Client = AgentClient<InterceptedService<Channel, auth::Credentials>>;

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
    /// How many targets it opened: an interval's target parts name no other.
    pub target_count: u32,
    /// The in-process agent of a local run.
    pub in_process: bool,
    /// How many hosts it stands for: 1 for an agent, its group's size for a relay (issue 46).
    pub hosts: u32,
    /// A relay (`relay::join` made it one).
    pub relay: bool,
    /// A relay's agents that could not open their targets (from its Targets reply): lost, for
    /// the caller to take out of its hosts.
    pub lost_behind: Vec<pb::HostLoss>,
    /// The clock is further off than is comfortable, not so far that the agent is refused:
    /// for the caller to show.
    pub clock_warning: Option<String>,
    pub(crate) client: Client,
}

impl Remote {
    /// How messages name this agent: `agent HOST:PORT: `, nothing for the in-process one.
    pub(crate) fn who(&self) -> String {
        if self.in_process { String::new() } else { format!("agent {}: ", self.addr) }
    }
}

pub(crate) fn failed(addr: &str, what: &str, e: tonic::Status) -> NetError {
    // What an agent says is escaped before anyone prints or stores it (issue 35, finding 8).
    let said = iocurve_net::printable(e.message());
    let msg = format!("agent {addr}: {what}: {said}");
    let detail = format!("{said}{}", iocurve_net::printable(&source_chain(&e)));
    if mentions_certificate(&detail) {
        // With TLS 1.3 an agent refuses the coordinator's certificate after the handshake:
        // the first call carries the alert. A mistake to fix, not a host gone.
        return NetError::Input(format!(
            "agent {addr} refused this coordinator's TLS certificate ({detail}): give --client-cert/--client-key signed by the CA the agent's --client-ca names"
        ));
    }
    match e.code() {
        // The words of an agent before protocol 8, which wants the token itself and so takes
        // no proof, right or wrong: likely an older iocurve (or the token is wrong).
        tonic::Code::Unauthenticated if e.message() == "wrong or missing token" => NetError::Input(format!(
            "agent {addr} refused this coordinator's token proof as an agent before protocol {PROTOCOL} does: it may run an older iocurve, which takes only the token itself; upgrade it to iocurve {} (or check the token: --token-file, --token-per-host)",
            env!("CARGO_PKG_VERSION")
        )),
        tonic::Code::Unauthenticated => NetError::Input(format!(
            "agent {addr} refused the token: give the agents' token with --token-file (with --token-per-host when each agent holds its own host's token from `certs add-host`)"
        )),
        _ if refusal(&e) => NetError::Input(msg),
        _ => NetError::Failed(msg),
    }
}

/// An answer that is the agent refusing what it was asked (bad input, a refused target, the
/// wrong token, another coordinator's run: Aborted), not the agent being gone: the run stops
/// whatever the host-loss policy.
pub(crate) fn refusal(e: &tonic::Status) -> bool {
    use tonic::Code::*;
    matches!(e.code(), InvalidArgument | FailedPrecondition | PermissionDenied | Unauthenticated | Aborted)
}

/// Connections this coordinator has being set up to one agent at once (TCP, TLS, hello): the
/// agent counts them against its cap of unauthenticated connections per address (8) and, when
/// that is full, evicts the oldest — this coordinator's own dials must never do that to each
/// other.
const DIALS_PER_AGENT: usize = iocurve_net::agent::listen::LIMITS.per_address / 4;

/// The dials to `addr` going on now, process-wide.
fn dial_slots(addr: &str) -> Arc<tokio::sync::Semaphore> {
    static SLOTS: std::sync::OnceLock<
        std::sync::Mutex<std::collections::HashMap<String, Arc<tokio::sync::Semaphore>>>,
    > = std::sync::OnceLock::new();
    let mut slots = SLOTS.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    slots.entry(addr.to_string()).or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(DIALS_PER_AGENT))).clone()
}

/// Time kept back from [`CONNECT_DEADLINE`] for the last attempt after a cut one.
const LAST_ATTEMPT: Duration = Duration::from_secs(3);

/// Dials again after a connection closed before the hello was answered, without a reset seen
/// (a cut at the agent's door looks so once the TLS handshake is done; so does a plain-text
/// coordinator at a TLS agent, a mistake reported after these few quick attempts).
const CLOSED_RETRIES: usize = 3;

/// Connects, says hello (protocol check) and measures the clock offset with `pings` pings.
/// A connection the agent cut before the hello was answered (its door evicts the oldest
/// connection not yet authenticated to let a newer one in, when a flood fills it) is dialled
/// again, after 50 ms, 100 ms, … up to 1 s: while [`CONNECT_DEADLINE`] leaves time for it after
/// a reset, [`CLOSED_RETRIES`] times after a close.
pub async fn connect(addr: &str, cfg: &ClientConfig, pings: usize) -> Result<Remote, NetError> {
    let until = tokio::time::Instant::now() + CONNECT_DEADLINE.saturating_sub(LAST_ATTEMPT);
    let slots = dial_slots(addr);
    let mut pause = Duration::from_millis(50);
    let mut closed = 0;
    loop {
        let attempt = {
            // Closed never: the semaphore lives in a static map.
            let _slot = slots.acquire().await;
            connect_once(addr, cfg, pings).await
        };
        let again = match &attempt {
            Err(Attempt { cut: Cut::Reset, .. }) => true,
            Err(Attempt { cut: Cut::Closed, .. }) => {
                closed += 1;
                closed <= CLOSED_RETRIES
            }
            _ => false,
        };
        match attempt {
            Err(Attempt { error, .. }) if again && tokio::time::Instant::now() + pause < until => {
                tracing::debug!(agent = addr, %error, "the agent cut the connection before it was authenticated: dialling again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            r => return r.map_err(|a| a.error),
        }
    }
}

/// A failed connection attempt, and whether the agent may have cut it before the hello was
/// answered.
struct Attempt {
    error: NetError,
    cut: Cut,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Cut {
    /// Not cut: refused, unreachable, a mistake.
    No,
    /// Reset by the agent before the hello was answered: what its door's cut sends.
    Reset,
    /// Closed before the hello was answered, no reset seen (hyper reports a cut HTTP/2
    /// connection as "canceled", without its cause).
    Closed,
}

impl From<NetError> for Attempt {
    fn from(error: NetError) -> Attempt {
        Attempt { error, cut: Cut::No }
    }
}

/// Whether an error, or one of its causes, is a connection reset by the peer. h2 wraps the
/// I/O error without giving it as a source, and says it in words then.
fn reset_by_peer(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && matches!(io.kind(), std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted)
        {
            return true;
        }
        if e.to_string().to_lowercase().contains("connection reset") {
            return true;
        }
        cur = e.source();
    }
    false
}

/// An agent's address as the coordinator dials it; bad input (exit 2) when it is none. The
/// one parse for the run and `--dry-run` (issue 36: `--hosts a:b:c:d` passed the dry run).
pub fn endpoint(addr: &str) -> Result<Endpoint, NetError> {
    Endpoint::from_shared(format!("http://{addr}"))
        .map_err(|e| NetError::Input(format!("host {addr} is not an address (HOST:PORT): {e}")))
}

async fn connect_once(addr: &str, cfg: &ClientConfig, pings: usize) -> Result<Remote, Attempt> {
    // TLS is done by our own connector, not tonic's (the URI stays http://): every call proves
    // the token with the TLS exporter of the connection it goes on, and sends no token (see
    // `iocurve_net::binding`). Plain text has no exporter: the token itself.
    let ep = endpoint(addr)?
        // The agent's heartbeat at the transport: an agent silent for ~3 s (pings unanswered,
        // e.g. a cut link) is lost. Its progress events are the other one (see `run_step`).
        .http2_keep_alive_interval(Duration::from_secs(1))
        .keep_alive_timeout(Duration::from_secs(2))
        .keep_alive_while_idle(true);
    let token = if cfg.per_host_tokens { auth::host_token(&cfg.token, auth::host_of(addr)) } else { cfg.token.clone() };
    let (channel, credentials) = if cfg.insecure {
        // TCP within 5 s (the TLS connector bounds its own TCP as long: `binding::TCP_CONNECT`).
        (ep.connect_timeout(binding::TCP_CONNECT).connect().await, auth::Credentials::bearer(&token)?)
    } else {
        let ca = cfg.ca_pem.as_ref().ok_or_else(|| {
            NetError::Input(
                "agents are reached over TLS: give --ca (the CA that signed their certificates) or --insecure".into(),
            )
        })?;
        let setup = |e: NetError| NetError::Input(format!("TLS set-up for {addr} failed: {e}"));
        let tls =
            binding::client_config(ca, cfg.identity.as_ref().map(|(c, k)| (c.as_str(), k.as_str()))).map_err(setup)?;
        // The certificate must name the host dialled (or `--tls-name`): a certificate then
        // proves which host answers, not only that some agent of the CA does.
        let name = cfg.tls_name.clone().unwrap_or_else(|| auth::host_of(addr).to_string());
        let (connector, session) = binding::Connector::new(tls, &name).map_err(setup)?;
        let credentials = match &cfg.delegation {
            Some(minted) => auth::Credentials::Delegated { minted: minted.clone(), session },
            None => auth::Credentials::proof(&token, session),
        };
        (ep.connect_with_connector(connector).await, credentials)
    };
    let channel = channel.map_err(|e| {
        let why = format!("{e}{}", source_chain(&e));
        let cut = if reset_by_peer(&e) { Cut::Reset } else { Cut::No };
        Attempt { cut, error: if mentions_certificate(&why) {
            // Reached, and refused: a certificate for another host or from another CA is a
            // mistake to fix, not a host gone.
            NetError::Input(format!(
                "agent {addr}: its TLS certificate was refused ({why}): it must be signed by --ca and name the host as dialled (`iocurve certs add-host DIR HOST`), or give --tls-name NAME; after `iocurve certs rotate` an agent still running with its old files is refused until it has its new ones"
            ))
        } else {
            NetError::Failed(format!("cannot reach agent {addr}: {why}"))
        } }
    })?;
    let mut r = handshake(addr, channel, credentials, pings, false, cfg.insecure).await?;
    match check_clock(addr, r.offset_ns, r.rtt_ns, cfg.max_skew) {
        ClockVerdict::Fine => {}
        ClockVerdict::Warn(m) => r.clock_warning = Some(m),
        ClockVerdict::Refuse(m) => return Err(NetError::Input(m).into()),
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
    handshake("in-process", channel, auth::Credentials::bearer(&token)?, 1, true, false).await.map_err(|a| a.error)
}

/// An agent's self-description reaches terminals, the store and reports: escaped where it
/// arrives, once (an impostor printed a fake "run complete" through its host name: issue 35,
/// finding 8) — from the agent itself, or from the relay that reached it.
pub(crate) fn escape_hello(hello: &mut pb::HelloReply) {
    let clean = |s: &mut String| *s = iocurve_net::printable(s);
    for field in [&mut hello.version, &mut hello.hostname, &mut hello.kernel, &mut hello.cpu_model, &mut hello.governor]
    {
        clean(field);
    }
    for u in &mut hello.unavailable {
        clean(&mut u.backend);
        clean(&mut u.reason);
    }
}

/// Hello (protocol check) and `pings` pings for the clock offset.
async fn handshake(
    addr: &str,
    channel: Channel,
    credentials: auth::Credentials,
    pings: usize,
    in_process: bool,
    insecure: bool,
) -> Result<Remote, Attempt> {
    let mut client = AgentClient::with_interceptor(channel, credentials);
    let mut hello = client
        .hello(pb::HelloRequest { protocol: PROTOCOL, version: env!("CARGO_PKG_VERSION").into() })
        .await
        .map_err(|e| {
            // Reset or closed before the hello was answered: maybe cut at the agent's door, to
            // be dialled again.
            let reset = reset_by_peer(&e);
            let error = failed(addr, "hello", e);
            let cut = match &error {
                NetError::Failed(_) if reset => Cut::Reset,
                NetError::Failed(_) => Cut::Closed,
                _ => Cut::No,
            };
            Attempt { cut, error: match error {
            // The connection (and its TLS handshake) succeeded and the first call was cut: the
            // agent refused this coordinator — a plain-text coordinator at a TLS agent, or,
            // with TLS 1.3, a missing or untrusted client certificate, which shows only now and
            // often without its alert. A mistake to fix, not a host gone.
            NetError::Failed(why) => NetError::Input(format!(
                "{why}: the agent closed the connection at the first call; {}",
                if insecure {
                    "it may speak TLS (drop --insecure and give --ca)"
                } else {
                    "an agent started with --client-ca refuses a coordinator without a certificate it trusts (give --client-cert and --client-key)"
                }
            )),
            other => other,
        } }
        })?
        .into_inner();
    escape_hello(&mut hello);
    if hello.protocol != PROTOCOL {
        return Err(Attempt::from(NetError::Input(format!(
            "protocol mismatch: agent {addr} (iocurve {}) speaks protocol {}, this coordinator (iocurve {}) speaks {PROTOCOL}; run the same iocurve version on both",
            hello.version,
            hello.protocol,
            env!("CARGO_PKG_VERSION")
        ))));
    }
    let (offset_ns, rtt_ns) = measure_clock(&mut client, pings).await.map_err(|e| failed(addr, "ping", e))?;
    Ok(Remote {
        addr: addr.into(),
        hello,
        offset_ns,
        rtt_ns,
        target_offset: 0,
        target_count: 0,
        in_process,
        hosts: 1,
        relay: false,
        lost_behind: Vec::new(),
        clock_warning: None,
        client,
    })
}

/// An agent's clock offset now (agent minus ours) and the round trip that bounds it, from
/// `pings` pings: the one with the smallest round trip wins.
pub(crate) async fn measure_clock(client: &mut Client, pings: usize) -> Result<(i64, i64), tonic::Status> {
    let mut clock = ClockEstimate::default();
    for _ in 0..pings.max(1) {
        let t0 = unix_ns();
        let r = client.ping(pb::PingRequest {}).await?.into_inner();
        clock.add(t0, r.agent_unix_ns, unix_ns());
    }
    Ok(clock.best())
}

/// Agents whose clocks are measured at once.
const CLOCK_CONCURRENCY: usize = 4;

/// The clocks of the agents `ask` names, all at once, each within `deadline` (None where not
/// asked or not answered).
pub(crate) async fn measure_clocks(
    remotes: &[Remote],
    ask: &[bool],
    pings: usize,
    deadline: Duration,
) -> Vec<Option<(i64, i64)>> {
    // A few at a time: pings to many agents at once queue behind each other on the
    // coordinator's own CPU, and every microsecond a ping waits is uncertainty in an offset.
    let slots = Arc::new(tokio::sync::Semaphore::new(CLOCK_CONCURRENCY));
    let calls: Vec<_> = remotes
        .iter()
        .zip(ask)
        .map(|(r, &ask)| {
            let mut client = r.client.clone();
            let slots = slots.clone();
            ask.then(|| {
                // The deadline covers the wait for a slot too: a few agents that do not answer
                // hold up the others by one deadline, not one each.
                tokio::spawn(tokio::time::timeout(deadline, async move {
                    let _slot = slots.acquire_owned().await;
                    measure_clock(&mut client, pings).await
                }))
            })
        })
        .collect();
    let mut out = Vec::new();
    for c in calls {
        out.push(match c {
            Some(c) => c.await.ok().and_then(Result::ok).and_then(Result::ok),
            None => None,
        });
    }
    out
}

/// Whether a TLS error is about a certificate (rustls says "certificate", its alerts
/// "BadCertificate", "CertificateRequired", "UnknownCA" and the like).
fn mentions_certificate(why: &str) -> bool {
    let w = why.to_lowercase();
    w.contains("certificate") || w.contains("unknownca") || w.contains("unknown ca")
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

/// How long reaching an agent may take: TCP, TLS, hello and the clock pings. An agent stopped
/// (SIGSTOP, a hung host) accepts the TCP connection in its kernel and then says nothing.
pub const CONNECT_DEADLINE: Duration = Duration::from_secs(10);

/// Waits until `stop` is set (Ctrl-C, SIGTERM): the other side of a `select!` with a wait that
/// a user must be able to end.
pub async fn until_stopped(stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Connects to every agent at once, each within [`CONNECT_DEADLINE`]. An agent that cannot be
/// reached is lost (`Err` with why, in its place): the caller decides whether the run goes on
/// without it. Refusals — the wrong token, another protocol, a clock too far off, bad TLS
/// material — end the connecting for all: they are mistakes to fix, not hosts gone. `stop`
/// ends the wait.
pub async fn connect_all(
    addrs: &[String],
    cfg: &ClientConfig,
    pings: usize,
    stop: &AtomicBool,
) -> Result<Vec<Result<Remote, String>>, NetError> {
    let calls: Vec<_> = addrs
        .iter()
        .map(|addr| {
            let (addr, cfg) = (addr.clone(), cfg.clone());
            tokio::spawn(async move { tokio::time::timeout(CONNECT_DEADLINE, connect(&addr, &cfg, pings)).await })
        })
        .collect();
    let all = async {
        let mut out = Vec::new();
        for (addr, call) in addrs.iter().zip(calls) {
            out.push(match call.await.map_err(|e| NetError::Failed(format!("connecting to {addr}: {e}")))? {
                Ok(Ok(r)) => Ok(r),
                Ok(Err(NetError::Failed(why))) => Err(why),
                Ok(Err(e)) => return Err(e),
                Err(_) => Err(format!(
                    "agent {addr} did not answer within {} s (TCP, TLS, hello and clock pings): is it stopped or overloaded?",
                    CONNECT_DEADLINE.as_secs()
                )),
            });
        }
        Ok(out)
    };
    tokio::select! {
        r = all => r,
        _ = until_stopped(stop) => Err(NetError::Interrupted("interrupted while connecting to the agents; nothing ran".into())),
    }
}

/// Has every agent open its targets (`groups[i]` for agent i: allow list, safety rules) before
/// any I/O, all at once. Opening may create and fill scratch files, so there is no deadline but
/// the transport's: an agent that stops answering its HTTP/2 pings is lost (`Err` with why, in
/// its place). A refused target ends it for all. `stop` ends the wait (the agents stop filling
/// scratch files when their request goes away).
pub async fn targets(
    remotes: &mut [Remote],
    groups: &[Vec<TargetGroup>],
    scratch_size: u64,
    write: bool,
    unfilled: bool,
    run_key: u32,
    stop: &AtomicBool,
) -> Result<Vec<Result<Vec<pb::TargetFacts>, String>>, NetError> {
    let calls: Vec<_> = remotes
        .iter()
        .zip(groups)
        .map(|(r, g)| {
            let req = pb::TargetsRequest { groups: wire_groups(g), scratch_size, write, unfilled, run_key };
            let mut client = r.client.clone();
            tokio::spawn(async move {
                // An agent whose last coordinator just exited may not have seen its connection
                // close yet: "in use" is asked again for a second.
                let mut tries = 0;
                loop {
                    match client.targets(req.clone()).await {
                        Err(e) if e.code() == tonic::Code::Aborted && tries < 5 => {
                            tries += 1;
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                        other => return other,
                    }
                }
            })
        })
        .collect();
    let all = async {
        let mut out = Vec::new();
        let mut offset = 0;
        for (r, call) in remotes.iter_mut().zip(calls) {
            let answer = call.await.map_err(|e| NetError::Failed(format!("opening targets on {}: {e}", r.addr)))?;
            out.push(match answer {
                Ok(facts) => {
                    let reply = facts.into_inner();
                    let mut facts = reply.targets;
                    // A relay's lost agents: never more than it stands for, escaped.
                    r.lost_behind = reply
                        .lost
                        .into_iter()
                        .take(r.hosts as usize)
                        .map(|l| pb::HostLoss {
                            address: iocurve_net::printable(&l.address),
                            into_step_s: 0.0,
                            why: iocurve_net::printable(&l.why),
                        })
                        .collect();
                    r.hosts = r.hosts.saturating_sub(r.lost_behind.len() as u32).max(1);
                    for f in &mut facts {
                        for s in [&mut f.path, &mut f.kind, &mut f.group, &mut f.host] {
                            *s = iocurve_net::printable(s);
                        }
                    }
                    r.target_offset = offset;
                    r.target_count = facts.len() as u32;
                    offset += facts.len() as u32;
                    Ok(facts)
                }
                Err(e) if refusal(&e) => return Err(failed(&r.addr, "targets", e)),
                Err(e) => Err(format!(
                    "agent {}: opening the targets failed: {}",
                    r.addr,
                    iocurve_net::printable(e.message())
                )),
            });
        }
        Ok(out)
    };
    tokio::select! {
        r = all => r,
        _ = until_stopped(stop) => Err(NetError::Interrupted("interrupted while the agents opened their targets; nothing ran".into())),
    }
}

/// Target groups as a request carries them.
pub fn wire_groups(groups: &[TargetGroup]) -> Vec<pb::TargetGroup> {
    groups
        .iter()
        .map(|g| pb::TargetGroup { name: g.name.clone(), weight: g.weight, targets: g.targets.clone() })
        .collect()
}

pub use super::coordinate::{MultiStep, Relayed, StepSpec, run_step};
pub use super::passes::{
    AgentPass, PassEnd, VerifyEnd, follow_precondition, follow_verify_pass, precondition, start_precondition,
    start_verify_pass, verify_pass,
};
