//! Calls through a relay (issue 46, docs/relays.md) on a real agent over mutual TLS on loopback:
//! the delegation opens its child for its run, from its relay's certificate only, and nothing
//! else; ownership passes to the relay for that run; the trail names the delegation.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tonic::transport::Endpoint;

use super::{AgentConfig, AgentTls, audit::Audit, serve};
use crate::auth::Credentials;
use crate::binding;
use crate::certs::RunCredentials;
use crate::delegation::{Delegation, Minted, certificate_digest, mint};
use crate::pb;
use crate::pb::agent_client::AgentClient;

const RUN_KEY: u32 = 4242;

fn der(pem: &str) -> Vec<u8> {
    binding::pem_certs(pem, "a test certificate").unwrap()[0].as_ref().to_vec()
}

fn now() -> u64 {
    crate::unix_s()
}

type Client = AgentClient<tonic::service::interceptor::InterceptedService<tonic::transport::Channel, Credentials>>;

/// A client of the agent at `addr` (its certificate names `name`) with the client certificate
/// `identity`, its calls carrying `creds(slot)`.
async fn client(
    addr: SocketAddr,
    ca: &str,
    name: &str,
    identity: (&str, &str),
    creds: impl FnOnce(binding::SessionSlot) -> Credentials,
) -> Client {
    let config = binding::client_config(ca, Some(identity)).unwrap();
    let (connector, slot) = binding::Connector::new(config, name).unwrap();
    let channel =
        Endpoint::from_shared(format!("http://{addr}")).unwrap().connect_with_connector(connector).await.unwrap();
    AgentClient::with_interceptor(channel, creds(slot))
}

fn delegated(m: &Minted) -> impl FnOnce(binding::SessionSlot) -> Credentials {
    let minted = Arc::new(m.clone());
    move |session| Credentials::Delegated { minted, session }
}

fn targets(dir: &std::path::Path, run_key: u32) -> pb::TargetsRequest {
    pb::TargetsRequest {
        groups: vec![pb::TargetGroup {
            name: "t".into(),
            weight: 1,
            targets: vec![dir.join("t.dat").display().to_string()],
        }],
        scratch_size: 1 << 20,
        write: true,
        unfilled: true,
        run_key,
    }
}

/// A real agent for `child` allowed `dir/*`, its trail in `log`: its address, its stop and its
/// task.
async fn start_agent(
    dir: &std::path::Path,
    child: &crate::certs::HostCredentials,
    log: &std::path::Path,
) -> (SocketAddr, tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<Result<(), crate::NetError>>) {
    let (addr_tx, addr_rx) = tokio::sync::oneshot::channel::<SocketAddr>();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let cfg = AgentConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        token: child.token.clone(),
        tls: Some(AgentTls {
            cert_pem: child.cert_pem.clone(),
            key_pem: child.key_pem.clone(),
            client_ca_pem: Some(child.client_ca_pem.clone()),
        }),
        allow: vec![format!("{}/*", dir.display())],
        allow_write: Vec::new(),
        max_scratch: None,
        lease: Duration::from_secs(10),
        state_dir: dir.to_path_buf(),
        metrics: None,
        one_run: None,
        remove_scratch: false,
        claim_expiry: super::CLAIM_EXPIRY,
        audit: Arc::new(Audit::new(Some(log)).unwrap()),
        simulated: None,
        relay: None,
    };
    let agent = tokio::spawn(serve(cfg, |a| addr_tx.send(a).unwrap(), async { stop_rx.await.unwrap_or(()) }));
    (addr_rx.await.unwrap(), stop_tx, agent)
}

/// A run's credentials, agent lg7 started with its own, and the client certificate of relay lg1.
struct Lg7 {
    dir: tempfile::TempDir,
    run: RunCredentials,
    child: crate::certs::HostCredentials,
    relay_cert: String,
    relay_key: String,
    /// lg7's audit trail.
    log: std::path::PathBuf,
    addr: SocketAddr,
    stop_tx: tokio::sync::oneshot::Sender<()>,
    agent: tokio::task::JoinHandle<Result<(), crate::NetError>>,
}

async fn lg7_and_its_relay() -> Lg7 {
    let dir = tempfile::tempdir().unwrap();
    let run = RunCredentials::issue(Duration::from_secs(3600)).unwrap();
    let child = run.for_host("lg7.lab").unwrap();
    let (relay_cert, relay_key) = run.for_relay("lg1.lab").unwrap();
    let log = dir.path().join("audit.log");
    let (addr, stop_tx, agent) = start_agent(dir.path(), &child, &log).await;
    Lg7 { dir, run, child, relay_cert, relay_key, log, addr, stop_tx, agent }
}

/// A delegation of run [`RUN_KEY`] for `child`, to the relay whose certificate is `cert`, valid
/// from a minute ago to `not_after`.
fn delegation_for(child: &str, not_after: u64, cert: &str) -> Delegation {
    Delegation {
        run_key: RUN_KEY,
        relay_certificate: certificate_digest(&der(cert)),
        child: child.into(),
        not_before_unix: now() - 60,
        not_after_unix: not_after,
        nonce: crate::delegation::nonce().unwrap(),
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

#[test]
fn a_relay_opens_its_child_for_its_run_and_nothing_else() {
    runtime().block_on(async {
        let Lg7 { dir, run, child, relay_cert, relay_key, log, addr, stop_tx, agent } = lg7_and_its_relay().await;
        let good = mint(&delegation_for("lg7.lab", now() + 600, &relay_cert), &child.token);
        let relay = (relay_cert.as_str(), relay_key.as_str());
        let coordinator = (run.client_cert_pem.as_str(), run.client_key_pem.as_str());

        // The relay, with its delegation: its run's targets open; another run's do not, and
        // that request claims nothing.
        let mut r = client(addr, &run.ca_pem, "lg7.lab", relay, delegated(&good)).await;
        r.hello(pb::HelloRequest { protocol: crate::PROTOCOL, version: String::new() }).await.expect("hello");
        let opened = r.targets(targets(dir.path(), RUN_KEY)).await.expect("its run's targets");
        assert_eq!(opened.get_ref().targets.len(), 1);
        let e = r.targets(targets(dir.path(), RUN_KEY + 1)).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e}");
        assert!(e.message().contains("for run key 4242, not for the request's run key 4243"), "{e}");
        // A step that would start after the delegation ends.
        let late = pb::StepRequest {
            run_key: RUN_KEY,
            groups: targets(dir.path(), RUN_KEY).groups,
            start_at_unix_ns: (now() as i64 + 3600) * 1_000_000_000,
            ..Default::default()
        };
        let e = r.run_step(late).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e}");
        assert!(e.message().contains("would start after this relay's delegation ends"), "{e}");

        // The same delegation and key from the coordinator's certificate: refused (a delegation
        // stolen from the relay is useless without the relay's key).
        let mut stolen = client(addr, &run.ca_pem, "lg7.lab", coordinator, delegated(&good)).await;
        let e = stolen.hello(pb::HelloRequest::default()).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated);
        assert!(e.message().contains("another certificate than its relay's"), "{e}");

        // One for another child, one expired, one whose key was derived from another token.
        let for_lg8 = mint(&delegation_for("lg8.lab", now() + 600, &relay_cert), &child.token);
        let expired = mint(&delegation_for("lg7.lab", now() - 1, &relay_cert), &child.token);
        let other_token =
            mint(&delegation_for("lg7.lab", now() + 600, &relay_cert), &run.for_host("lg8.lab").unwrap().token);
        for (m, says) in
            [(&for_lg8, "for another agent"), (&expired, "expired"), (&other_token, "proof does not match")]
        {
            let mut c = client(addr, &run.ca_pem, "lg7.lab", relay, delegated(m)).await;
            let e = c.hello(pb::HelloRequest::default()).await.unwrap_err();
            assert_eq!(e.code(), tonic::Code::Unauthenticated, "{says}: {e}");
            assert!(e.message().contains(says), "{says}: {e}");
        }

        // The coordinator itself, with the token's proof, while the relay owns the agent for its
        // run: one owner at a time.
        let token = child.token.clone();
        let mut direct =
            client(addr, &run.ca_pem, "lg7.lab", coordinator, move |s| Credentials::proof(&token, s)).await;
        let e = direct.targets(targets(dir.path(), RUN_KEY)).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::Aborted, "{e}");
        assert!(e.message().contains("in use by a relay (CN=iocurve relay lg1.lab"), "{e}");

        // Review of issue 46's delegations, finding 1: another holder of the child's token (and
        // of a certificate from the CA) minted a delegation of the relay's run key for its own
        // certificate and took the agent as "the same relay on a new connection". Only the
        // same run key *and* certificate is the same relay.
        let thief = mint(&delegation_for("lg7.lab", now() + 600, &run.client_cert_pem), &child.token);
        let mut t = client(addr, &run.ca_pem, "lg7.lab", coordinator, delegated(&thief)).await;
        let e = t.targets(targets(dir.path(), RUN_KEY)).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::Aborted, "{e}");

        // The relay again on a new connection, for the same run: it takes over from its old one.
        let mut again = client(addr, &run.ca_pem, "lg7.lab", relay, delegated(&good)).await;
        again.targets(targets(dir.path(), RUN_KEY)).await.expect("the same run on a new connection");

        stop_tx.send(()).unwrap();
        agent.await.unwrap().unwrap();
        let trail = std::fs::read_to_string(&log).unwrap();
        let lines: Vec<serde_json::Value> = trail.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let accepted: Vec<_> = lines.iter().filter(|l| l["outcome"] == "accepted").collect();
        // The relay's two calls of its run; the calls of another run and the step that would
        // start too late were refused before they claimed anything.
        assert_eq!(accepted.len(), 2, "{trail}");
        for l in accepted {
            assert_eq!(l["delegation"]["run_key"], RUN_KEY, "{l}");
            assert!(l["certificate"].as_str().unwrap().starts_with("CN=iocurve relay lg1.lab"), "{l}");
        }
        let refused = |rule: &str| lines.iter().filter(|l| l["rule"] == rule).count();
        assert_eq!(refused("delegation"), 6, "another run, a late step and 4 bad delegations: {trail}");
        assert_eq!(refused("owner"), 2, "the coordinator and the thief: {trail}");
        assert_eq!(trail.matches("a relay took this agent for run key 4242").count(), 1, "{trail}");
        assert_eq!(trail.matches("called on a new connection").count(), 1, "{trail}");
    });
}

/// Review of issue 46's delegations, finding 2: a relay's claim ends with its delegation, and
/// so does the work it started: a step it began before not-after is stopped at not-after, and
/// the coordinator then takes the agent.
#[test]
fn a_relay_s_claim_and_work_end_with_its_delegation() {
    runtime().block_on(async {
        let Lg7 { dir, run, child, relay_cert, relay_key, log, addr, stop_tx, agent } = lg7_and_its_relay().await;
        // `now()` is rounded down: the window is 3 to 4 s from here.
        let short = mint(&delegation_for("lg7.lab", now() + 3, &relay_cert), &child.token);
        let mut r = client(addr, &run.ca_pem, "lg7.lab", (&relay_cert, &relay_key), delegated(&short)).await;
        r.targets(targets(dir.path(), RUN_KEY)).await.expect("its run's targets");
        let token = child.token.clone();
        let coordinator = (run.client_cert_pem.as_str(), run.client_key_pem.as_str());
        let mut direct =
            client(addr, &run.ca_pem, "lg7.lab", coordinator, move |s| Credentials::proof(&token, s)).await;
        assert_eq!(direct.targets(targets(dir.path(), 7)).await.unwrap_err().code(), tonic::Code::Aborted);
        // A step of 100 one-second intervals (null back-end: no I/O), far longer than the
        // delegation's 3 s, unless the delegation's end stops it.
        let mut w = iocurve_plan::suites::load("quick", &Default::default()).unwrap().workloads.remove(0);
        (w.intervals, w.interval_s, w.warmup_s, w.backend) = (100, 1.0, 0.0, iocurve_plan::Backend::Null);
        let step = pb::StepRequest {
            workload_json: serde_json::to_string(&w).unwrap(),
            workers: 1,
            groups: targets(dir.path(), RUN_KEY).groups,
            start_at_unix_ns: crate::unix_ns() + 300_000_000,
            scratch_size: 1 << 20,
            threads: 1,
            backend: "null".into(),
            run_key: RUN_KEY,
            ..Default::default()
        };
        let mut events = r.run_step(step).await.expect("the step starts").into_inner();
        let intervals = tokio::time::timeout(Duration::from_secs(60), async {
            let mut intervals = 0;
            loop {
                match events.message().await {
                    Ok(Some(pb::StepEvent { event: Some(pb::step_event::Event::Done(d)) })) => break (intervals, d),
                    Ok(Some(pb::StepEvent { event: Some(pb::step_event::Event::Interval(_)) })) => intervals += 1,
                    Ok(Some(_)) => continue,
                    other => panic!("the step ended without its Done: {other:?}"),
                }
            }
        })
        .await
        .expect("stopped at the delegation's end, not run for its whole length");
        let (intervals, done) = intervals;
        assert!(intervals < 10 && done.interrupted, "{intervals} intervals, {done:?}");
        // The delegation is over and nothing runs: the coordinator takes the agent. (The step's
        // I/O threads let go of its targets' run lock just after its Done is sent: on a loaded
        // machine a call at once can still find the relay's run writing them, for a moment.)
        let mut taken = direct.targets(targets(dir.path(), 7)).await;
        for _ in 0..50 {
            match &taken {
                Err(e)
                    if e.code() == tonic::Code::FailedPrecondition
                        && e.message().contains("being written by another run") =>
                {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    taken = direct.targets(targets(dir.path(), 7)).await;
                }
                _ => break,
            }
        }
        taken.expect("free once the delegation ended");
        stop_tx.send(()).unwrap();
        agent.await.unwrap().unwrap();
        let trail = std::fs::read_to_string(&log).unwrap();
        assert!(trail.contains("the relay's delegation ended: its work here stops"), "{trail}");
        assert!(trail.contains("the relay's delegation it owned this agent under has ended"), "{trail}");
    });
}

/// The coordinator's side: a grant minted from the run's credentials opens each agent of the
/// relay's group with the grant's certificate, and no agent outside it.
#[test]
fn a_relay_grant_opens_the_agents_of_its_group_and_no_other() {
    runtime().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let run = RunCredentials::issue(Duration::from_secs(3600)).unwrap();
        let (lg7, lg8) = (run.for_host("lg7.lab").unwrap(), run.for_host("lg8.lab").unwrap());
        let (d7, d8) = (dir.path().join("7"), dir.path().join("8"));
        std::fs::create_dir_all(&d7).unwrap();
        std::fs::create_dir_all(&d8).unwrap();
        let (a7, stop7, t7) = start_agent(&d7, &lg7, &dir.path().join("7.log")).await;
        let (a8, stop8, t8) = start_agent(&d8, &lg8, &dir.path().join("8.log")).await;
        let grant = run.relay_grant("lg1.lab", &["lg7.lab".into()], RUN_KEY, now() + 600).unwrap();
        assert!(!format!("{grant:?}").contains(&grant.children[0].1.key), "never a key in a debug line");
        let identity = (grant.cert_pem.as_str(), grant.key_pem.as_str());
        let m7 = &grant.children[0].1;
        let mut c7 = client(a7, &run.ca_pem, "lg7.lab", identity, delegated(m7)).await;
        c7.targets(targets(&d7, RUN_KEY)).await.expect("lg7 is in the relay's group");
        // lg8 is not in the group: lg7's delegation names lg7.
        let mut c8 = client(a8, &run.ca_pem, "lg8.lab", identity, delegated(m7)).await;
        let e = c8.targets(targets(&d8, RUN_KEY)).await.unwrap_err();
        assert!(e.message().contains("for another agent"), "{e}");
        // A group naming an agent twice, and a window already over, are refused.
        assert!(run.relay_grant("lg1.lab", &["a".into(), "a".into()], 1, now() + 60).is_err());
        assert!(run.relay_grant("lg1.lab", &["a".into()], 1, now() - 1).is_err());
        // Never beyond the run's credentials.
        let long = run.relay_grant("lg1.lab", &["a".into()], 1, u64::MAX).unwrap();
        let d = Delegation::parse(&long.children[0].1.delegation).unwrap();
        assert_eq!(d.not_after_unix, run.expires_unix);
        for (stop, task) in [(stop7, t7), (stop8, t8)] {
            stop.send(()).unwrap();
            task.await.unwrap().unwrap();
        }
    });
}

/// Review of issue 46's delegations (second, findings 1, 2 and 4): what stops a relay's work —
/// its step, its preparation of targets — at the delegation's end raises the work's flag once
/// the wall clock is past it, gives up when the work is over, and takes any end without
/// overflowing.
#[test]
fn the_delegation_s_end_raises_the_work_s_flag_and_gives_up_when_the_work_is_over() {
    runtime().block_on(async {
        let said = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = |said: &Arc<std::sync::atomic::AtomicUsize>| {
            let said = said.clone();
            move || {
                said.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        };
        // Over already; over within two seconds; never (u64::MAX: no overflow, no early end).
        let (over, soon, never) = (
            Arc::new(std::sync::atomic::AtomicBool::new(false)),
            Arc::new(std::sync::atomic::AtomicBool::new(false)),
            Arc::new(std::sync::atomic::AtomicBool::new(false)),
        );
        super::raise_at_delegation_end(now() - 1, Arc::downgrade(&over), count(&said));
        super::raise_at_delegation_end(now() + 1, Arc::downgrade(&soon), count(&said));
        super::raise_at_delegation_end(u64::MAX, Arc::downgrade(&never), count(&said));
        // Work that ended before its delegation: nothing is said.
        let ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
        super::raise_at_delegation_end(now() + 1, Arc::downgrade(&ended), count(&said));
        drop(ended);
        let t0 = std::time::Instant::now();
        while !soon.load(std::sync::atomic::Ordering::SeqCst) && t0.elapsed() < Duration::from_secs(30) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(over.load(std::sync::atomic::Ordering::SeqCst));
        assert!(soon.load(std::sync::atomic::Ordering::SeqCst), "raised at the end, not 30 s later");
        tokio::time::sleep(Duration::from_millis(1100)).await;
        assert!(!never.load(std::sync::atomic::Ordering::SeqCst));
        assert_eq!(said.load(std::sync::atomic::Ordering::SeqCst), 2, "the ended work's watch gave up");
    });
}
