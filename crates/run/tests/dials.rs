//! How the coordinator dials its agents, on real agents served in this process over loopback
//! (plain text, token): its dials must never look like a flood to an agent's door, and a dial
//! the door cut is dialled again (issue 35, finding 2).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use iocurve_net::agent::{AgentConfig, serve};
use iocurve_run::coordinator::client::{self, ClientConfig};

const TOKEN: &str = "a-token-of-more-than-sixteen-characters";

/// An agent on loopback allowed `dir/*`; returns its address and its shutdown.
async fn agent(dir: &Path) -> (String, tokio::sync::oneshot::Sender<()>) {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let (addr_tx, addr_rx) = tokio::sync::oneshot::channel::<SocketAddr>();
    let cfg = AgentConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        token: TOKEN.into(),
        tls: None,
        allow: vec![format!("{}/*", dir.display())],
        allow_write: Vec::new(),
        max_scratch: None,
        lease: Duration::from_secs(3),
        state_dir: dir.to_path_buf(),
        metrics: None,
        one_run: None,
        remove_scratch: false,
        claim_expiry: iocurve_net::agent::CLAIM_EXPIRY,
        audit: std::sync::Arc::new(iocurve_net::agent::audit::Audit::off()),
        simulated: None,
        relay: None,
    };
    tokio::spawn(async move {
        serve(cfg, |a| addr_tx.send(a).unwrap(), async { rx.await.unwrap_or(()) }).await.unwrap();
    });
    (addr_rx.await.unwrap().to_string(), tx)
}

fn config() -> ClientConfig {
    ClientConfig {
        token: TOKEN.into(),
        ca_pem: None,
        identity: None,
        insecure: true,
        tls_name: None,
        per_host_tokens: false,
        max_skew: Duration::from_secs(1),
        delegation: None,
    }
}

/// A relay to `to` that resets the first `cut` connections once their first bytes arrive — as
/// an agent's door evicts a connection not yet authenticated when a flood fills it — and
/// relays the others. Returns its address and the count of connections it took.
async fn cutting_relay(to: String, cut: usize) -> (String, Arc<AtomicUsize>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let taken = Arc::new(AtomicUsize::new(0));
    let count = taken.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            if count.fetch_add(1, Ordering::SeqCst) < cut {
                let _ = s.readable().await;
                // Linger 0: the close sends a reset, as the door's cut does. (Deprecated for
                // the blocking close a non-zero linger brings; zero closes at once.)
                #[allow(deprecated)]
                s.set_linger(Some(Duration::ZERO)).unwrap();
                drop(s);
                continue;
            }
            let to = to.clone();
            tokio::spawn(async move {
                let mut up = tokio::net::TcpStream::connect(to).await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut s, &mut up).await;
            });
        }
    });
    (addr, taken)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// Issue 35, finding 2: an agent's door now evicts the oldest unauthenticated connection when a
/// flood fills it, so a coordinator's own connection may be cut before its hello is answered;
/// that was the end of that agent for the run ("cannot reach agent", or a refusal). Now the
/// coordinator dials again, with a growing pause, within its deadline.
#[test]
fn regression_a_dial_cut_before_the_hello_is_dialled_again() {
    runtime().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let (a, _stop) = agent(dir.path()).await;
        let (relay, taken) = cutting_relay(a, 3).await;
        let stop = AtomicBool::new(false);
        let t = std::time::Instant::now();
        let r = client::connect_all(std::slice::from_ref(&relay), &config(), 2, &stop).await.unwrap();
        assert!(r[0].is_ok(), "connected after 3 cut dials: {:?}", r[0].as_ref().err());
        assert_eq!(taken.load(Ordering::SeqCst), 4, "three cut, the fourth relayed");
        // 50 + 100 + 200 ms of pauses, and some room for a slow machine.
        assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
    });
}

/// Issue 35, finding 2: an agent counts the connections from one address that are not
/// authenticated yet (8 at most since then, 16 before), so the coordinator's own dials to one
/// agent, all at once, looked like a flood: beyond the cap they were refused. Now it dials one
/// agent a few at a time, and all 24 connect.
#[test]
fn regression_many_dials_to_one_agent_at_once_all_connect() {
    runtime().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let (a, _stop) = agent(dir.path()).await;
        let stop = AtomicBool::new(false);
        let addrs = vec![a; 24];
        let r = client::connect_all(&addrs, &config(), 2, &stop).await.unwrap();
        let failed: Vec<_> = r.iter().filter_map(|r| r.as_ref().err()).collect();
        assert!(failed.is_empty(), "{} of 24 failed: {failed:?}", failed.len());
    });
}
