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
    use tokio_rustls::rustls::pki_types::CertificateDer;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    CertificateDer::pem_slice_iter(pem.as_bytes()).next().unwrap().unwrap().as_ref().to_vec()
}

fn now() -> u64 {
    crate::unix_ns() as u64 / 1_000_000_000
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

#[test]
fn a_relay_opens_its_child_for_its_run_and_nothing_else() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let run = RunCredentials::issue(Duration::from_secs(3600)).unwrap();
        let child = run.for_host("lg7.lab").unwrap();
        let (relay_cert, relay_key) = run.for_relay("lg1.lab").unwrap();
        let log = dir.path().join("audit.log");
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
            allow: vec![format!("{}/*", dir.path().display())],
            allow_write: Vec::new(),
            max_scratch: None,
            lease: Duration::from_secs(10),
            state_dir: dir.path().to_path_buf(),
            metrics: None,
            one_run: false,
            remove_scratch: false,
            claim_expiry: super::CLAIM_EXPIRY,
            audit: Arc::new(Audit::new(Some(&log)).unwrap()),
            simulated: None,
        };
        let agent = tokio::spawn(serve(cfg, |a| addr_tx.send(a).unwrap(), async { stop_rx.await.unwrap_or(()) }));
        let addr = addr_rx.await.unwrap();
        let for_child = |child: &str, not_after: u64, cert: &str| Delegation {
            run_key: RUN_KEY,
            relay_certificate: certificate_digest(&der(cert)),
            child: child.into(),
            not_before_unix: now() - 60,
            not_after_unix: not_after,
            nonce: crate::delegation::nonce().unwrap(),
        };
        let good = mint(&for_child("lg7.lab", now() + 600, &relay_cert), &child.token);
        let relay = (relay_cert.as_str(), relay_key.as_str());
        let coordinator = (run.client_cert_pem.as_str(), run.client_key_pem.as_str());

        // The relay, with its delegation: its run's targets open; another run's do not.
        let mut r = client(addr, &run.ca_pem, "lg7.lab", relay, delegated(&good)).await;
        r.hello(pb::HelloRequest { protocol: crate::PROTOCOL, version: String::new() }).await.expect("hello");
        let opened = r.targets(targets(dir.path(), RUN_KEY)).await.expect("its run's targets");
        assert_eq!(opened.get_ref().targets.len(), 1);
        let e = r.targets(targets(dir.path(), RUN_KEY + 1)).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e}");
        assert!(e.message().contains("for run key 4242, not for the request's run key 4243"), "{e}");

        // The same delegation and key from the coordinator's certificate: refused (a delegation
        // stolen from the relay is useless without the relay's key).
        let mut stolen = client(addr, &run.ca_pem, "lg7.lab", coordinator, delegated(&good)).await;
        let e = stolen.hello(pb::HelloRequest::default()).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated);
        assert!(e.message().contains("another certificate than its relay's"), "{e}");

        // One for another child, one expired, one whose key was derived from another token.
        let for_lg8 = mint(&for_child("lg8.lab", now() + 600, &relay_cert), &child.token);
        let expired = mint(&for_child("lg7.lab", now() - 1, &relay_cert), &child.token);
        let other_token =
            mint(&for_child("lg7.lab", now() + 600, &relay_cert), &run.for_host("lg8.lab").unwrap().token);
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

        // The relay again on a new connection, for the same run: it takes over from its old one.
        let mut again = client(addr, &run.ca_pem, "lg7.lab", relay, delegated(&good)).await;
        again.targets(targets(dir.path(), RUN_KEY)).await.expect("the same run on a new connection");

        stop_tx.send(()).unwrap();
        agent.await.unwrap().unwrap();
        let trail = std::fs::read_to_string(&log).unwrap();
        let lines: Vec<serde_json::Value> = trail.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let accepted: Vec<_> = lines.iter().filter(|l| l["outcome"] == "accepted").collect();
        // Two calls of its run, and the call for another run (accepted as a call, as one outside
        // the allow list is, then refused by the delegation's run key).
        assert_eq!(accepted.len(), 3, "{trail}");
        for l in accepted {
            assert_eq!(l["delegation"]["run_key"], RUN_KEY, "{l}");
            assert!(l["certificate"].as_str().unwrap().starts_with("CN=iocurve relay lg1.lab"), "{l}");
        }
        let refused_delegations = lines.iter().filter(|l| l["rule"] == "delegation").count();
        assert_eq!(refused_delegations, 5, "4 refused delegations and 1 run key: {trail}");
        assert!(trail.contains("a relay took this agent for run key 4242"), "{trail}");
    });
}
