//! Host loss between steps, on real agents served in this process over loopback (plain text,
//! token): an agent gone when the next step is sent is lost for that step, not the end of the
//! run (issue 15, finding 5: the coordinator's `?` on the step request failed the whole run).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use iocurve_engine::NoObserver;
use iocurve_net::NetError;
use iocurve_net::agent::{AgentConfig, serve};
use iocurve_plan::{TargetGroup, Workload};
use iocurve_run::coordinator::client::{self, ClientConfig, StepSpec};

const TOKEN: &str = "a-token-of-more-than-sixteen-characters";

/// An agent on loopback allowed `dir/*`; returns its address, its shutdown and its task.
async fn agent(dir: &Path) -> (String, tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
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
    let task = tokio::spawn(async move {
        serve(cfg, |a| addr_tx.send(a).unwrap(), async { rx.await.unwrap_or(()) }).await.unwrap();
    });
    (addr_rx.await.unwrap().to_string(), tx, task)
}

fn workload() -> Workload {
    let mut w = iocurve_plan::suites::load("quick", &Default::default()).unwrap().workloads.remove(0);
    (w.intervals, w.interval_s, w.warmup_s) = (2, 0.2, 0.0);
    w
}

fn groups(dir: &Path) -> Vec<TargetGroup> {
    vec![TargetGroup { name: "t".into(), weight: 1, targets: vec![dir.join("t.dat").display().to_string()] }]
}

#[test]
fn an_agent_gone_between_steps_is_lost_for_the_step_and_the_others_run_it() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (a, _a_stop, _a_task) = agent(da.path()).await;
        let (b, b_stop, b_task) = agent(db.path()).await;
        let cfg = ClientConfig {
            token: TOKEN.into(),
            ca_pem: None,
            identity: None,
            insecure: true,
            tls_name: None,
            per_host_tokens: false,
            max_skew: Duration::from_secs(1),
            delegation: None,
        };
        let stop = AtomicBool::new(false);
        let mut remotes: Vec<_> = client::connect_all(&[a.clone(), b.clone()], &cfg, 2, &stop)
            .await
            .unwrap()
            .into_iter()
            .map(Result::unwrap)
            .collect();
        let targets = vec![groups(da.path()), groups(db.path())];
        let opened = client::targets(&mut remotes, &targets, 1 << 20, false, false, 0, &stop).await.unwrap();
        assert!(opened.iter().all(Result::is_ok), "{opened:?}");

        // Agent b goes away between steps.
        b_stop.send(()).unwrap();
        b_task.await.unwrap();

        let w = workload();
        let mut spec = StepSpec {
            workload: &w,
            workers: 1,
            host_workers: &[],
            members: &[],
            scales: &[],
            rate_iops: None,
            replay: None,
            relayed_replays: &[],
            replay_speed: None,
            replay_intended: (0.1, Vec::new()),
            targets: &targets,
            fault_targets: &[],
            relayed_hosts: &[],
            host_intervals: &[],
            scratch_size: 1 << 20,
            run_key: 0,
            verify_journal: false,
            write_iolog: false,
            threads: 1,
            backend: "psync",
            faults: &[],
            lead: Duration::from_millis(200),
            abort_on_host_loss: false,
            silence: Duration::from_secs(5),
            planned_hosts: 2,
            relayed: None,
        };
        let m = client::run_step(&mut remotes, &spec, &mut NoObserver, &stop).await.expect("the step runs on a");
        assert_eq!(m.lost, [1]);
        assert_eq!(m.merged.hosts, 1, "the step ran on the agent left");
        assert_eq!(m.merged.intervals.len(), 2);
        assert!(m.merged.intervals.iter().all(|i| i.ops > 0), "agent a measured every interval");
        let note = m.merged.notes.iter().find(|(code, _)| code == "host_lost").expect("flagged");
        assert!(note.1.contains(&b) && note.1.contains("before the step started"), "{note:?}");
        assert_eq!(m.merged.per_host[1].lost_at_s, Some(0.0));
        // Issue 35, finding 4: the step knows it was planned on both, and the run learns why b
        // was lost, to mark it in its hosts.
        assert_eq!((m.merged.hosts, m.merged.planned_hosts), (1, 2));
        assert_eq!(m.losses.len(), 1);
        assert_eq!((m.losses[0].address.as_str(), m.losses[0].into_step_s), (b.as_str(), 0.0));
        assert!(m.losses[0].why.contains("did not take the step"), "{:?}", m.losses);

        // With --on-host-loss abort the run ends there, nothing of the step having run.
        spec.abort_on_host_loss = true;
        match client::run_step(&mut remotes, &spec, &mut NoObserver, &stop).await {
            Err(NetError::Aborted(why)) => {
                assert!(why.contains(&b) && why.contains("before the step started"), "{why}")
            }
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("ran despite --on-host-loss abort"),
        }
    });
}
