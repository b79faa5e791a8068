//! A relay tree against a flat run (issue 46), on real agents served in this process over
//! loopback with the run's credentials: TLS with a certificate per host, mutual TLS, a token
//! per host, the relay's children called under delegations. Simulated agents stream the same
//! modelled intervals whoever drives them, so the coordinator's merged figures through a relay
//! must equal those of the coordinator driving every agent itself, bucket for bucket.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use iocurve_engine::StepObserver;
use iocurve_net::agent::simulate::Simulated;
use iocurve_net::agent::{AgentConfig, AgentTls, serve};
use iocurve_net::certs::RunCredentials;
use iocurve_net::pb;
use iocurve_plan::{TargetGroup, Workload};
use iocurve_run::coordinator::client::{self, ClientConfig, MultiStep, Remote, StepSpec};
use iocurve_run::coordinator::relay::{self, Relay};
use iocurve_stats::{CpuUsage, IntervalStats};

const CHILDREN: u32 = 4;
const RUN_KEY: u32 = 4242;

/// An agent in a runtime of its own, as if in a process of its own: killing it drops every
/// task and connection of it at once, as a host gone does.
struct Host {
    addr: String,
    kill: Option<std::sync::mpsc::Sender<()>>,
}

impl Host {
    fn kill(&mut self) {
        self.kill.take();
    }
}

/// The agent on `host` (a loopback address of its own: its certificate and token name it),
/// allowed `dir/**`; simulated as agent `sim`, or a relay.
fn agent(creds: &RunCredentials, host: &str, dir: &Path, sim: Option<u32>, relay: bool) -> Host {
    let own = creds.for_host(host).unwrap();
    let cfg = AgentConfig {
        listen: format!("{host}:0").parse().unwrap(),
        token: own.token.clone(),
        tls: Some(AgentTls { cert_pem: own.cert_pem, key_pem: own.key_pem, client_ca_pem: Some(own.client_ca_pem) }),
        allow: vec![format!("{}/**", dir.display())],
        allow_write: Vec::new(),
        max_scratch: None,
        lease: Duration::from_secs(5),
        state_dir: dir.to_path_buf(),
        metrics: None,
        one_run: None,
        remove_scratch: false,
        claim_expiry: iocurve_net::agent::CLAIM_EXPIRY,
        audit: Arc::new(iocurve_net::agent::audit::Audit::off()),
        // Clocks a few ms apart: the relay measures its children's itself.
        simulated: sim.map(|k| Simulated {
            index: k,
            offset_ns: (i64::from(k) - 2) * 3_000_000,
            latency_ns: 150_000 + u64::from(k) * 20_000,
        }),
        relay: relay.then(|| Arc::new(Relay::new()) as Arc<dyn iocurve_net::agent::relay::RelayHandler>),
    };
    let (kill, killed) = std::sync::mpsc::channel::<()>();
    let (addr_tx, addr_rx) = std::sync::mpsc::channel::<SocketAddr>();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        rt.spawn(async move {
            let _ = serve(cfg, |a| addr_tx.send(a).unwrap(), std::future::pending()).await;
        });
        // Until killed (the sender dropped): then every task of it goes at once.
        let _ = killed.recv();
        rt.shutdown_background();
    });
    Host { addr: addr_rx.recv().unwrap().to_string(), kill: Some(kill) }
}

fn coordinator(creds: &RunCredentials) -> ClientConfig {
    ClientConfig {
        token: creds.token.clone(),
        ca_pem: Some(creds.ca_pem.clone()),
        identity: Some((creds.client_cert_pem.clone(), creds.client_key_pem.clone())),
        insecure: false,
        tls_name: None,
        per_host_tokens: true,
        max_skew: Duration::from_secs(1),
        delegation: None,
    }
}

fn workload() -> Workload {
    let mut w = iocurve_plan::suites::load("quick", &Default::default()).unwrap().workloads.remove(0);
    (w.intervals, w.interval_s, w.warmup_s) = (3, 1.0, 0.0);
    w
}

/// Every merged interval, the hosts started as the step ran, and the hosts' rows summed up at
/// its end.
#[derive(Default)]
struct Merged {
    intervals: Vec<(u32, IntervalStats, CpuUsage)>,
    hosts_started: u32,
    summaries: Vec<(u32, String)>,
    /// Each host's intervals handed on as a host's without relays: (host, index, figures).
    host_intervals: Vec<(u32, u32, IntervalStats)>,
}

impl StepObserver for Merged {
    fn interval(&mut self, index: u32, stats: &IntervalStats, cpu: &CpuUsage, _: f64) {
        self.intervals.push((index, stats.clone(), *cpu));
    }
    fn host_started(&mut self, _: u32, _: &str, _: &str, _: i64, _: usize, _: u32) {
        self.hosts_started += 1;
    }
    fn host_summary(&mut self, host: u32, row: &iocurve_stats::HostRecord) {
        self.summaries.push((host, row.address.clone()));
    }
    fn host_interval(&mut self, host: u32, index: u32, stats: &IntervalStats, _: &CpuUsage, _: f64) {
        self.host_intervals.push((host, index, stats.clone()));
    }
}

/// A closed-loop step of `w` at 4 workers per host on `targets` (a relay's: none).
fn spec<'a>(w: &'a Workload, targets: &'a [Vec<TargetGroup>]) -> StepSpec<'a> {
    StepSpec {
        workload: w,
        workers: 4,
        host_workers: &[],
        members: &[],
        scales: &[],
        rate_iops: None,
        replay: None,
        relayed_replays: &[],
        replay_speed: None,
        replay_intended: (0.1, Vec::new()),
        targets,
        fault_targets: &[],
        relayed_hosts: &[],
        host_intervals: &[],
        scratch_size: 1 << 20,
        run_key: RUN_KEY,
        verify_journal: false,
        write_iolog: false,
        threads: 1,
        backend: "psync",
        faults: &[],
        lead: Duration::from_millis(400),
        abort_on_host_loss: false,
        silence: Duration::from_secs(10),
        planned_hosts: CHILDREN,
        relayed: None,
    }
}

async fn step(remotes: &mut [Remote], targets: &[Vec<TargetGroup>], w: &Workload) -> (MultiStep, Merged) {
    step_in_full(remotes, targets, w, &[]).await
}

/// A step whose relays send the intervals of the hosts `in_full` names (per agent) in full.
async fn step_in_full(
    remotes: &mut [Remote],
    targets: &[Vec<TargetGroup>],
    w: &Workload,
    in_full: &[Vec<String>],
) -> (MultiStep, Merged) {
    let mut obs = Merged::default();
    let stop = AtomicBool::new(false);
    let spec = StepSpec { host_intervals: in_full, ..spec(w, targets) };
    let m = client::run_step(remotes, &spec, &mut obs, &stop).await.expect("the step runs");
    (m, obs)
}

/// The latency buckets of a histogram, as (highest value equivalent, count).
fn buckets(h: &iocurve_stats::LatencyHistogram) -> Vec<(u64, u64)> {
    h.buckets().collect()
}

/// `n` simulated agents on 127.0.0.2, 127.0.0.3, …, each with its target group.
fn children(creds: &RunCredentials, dir: &Path, n: u32) -> Vec<(Host, Vec<TargetGroup>)> {
    (0..n).map(|k| child(creds, dir, k + 2, Some(k))).collect()
}

/// Agent on 127.0.0.`last` (simulated agent `sim`, or a real one on a file), with its target
/// group.
fn child(creds: &RunCredentials, dir: &Path, last: u32, sim: Option<u32>) -> (Host, Vec<TargetGroup>) {
    let host = format!("127.0.0.{last}");
    let d = dir.join(&host);
    std::fs::create_dir(&d).unwrap();
    let groups =
        vec![TargetGroup { name: "t".into(), weight: 1, targets: vec![d.join("t.dat").display().to_string()] }];
    (agent(creds, &host, &d, sim, false), groups)
}

/// The relay on 127.0.0.20 of `group`, and its children's targets opened through it.
async fn opened_through(creds: &RunCredentials, dir: &Path, group: &[(Host, Vec<TargetGroup>)]) -> (Host, Vec<Remote>) {
    let (relay, remote, _) = relay_of(creds, dir, "127.0.0.20", group).await;
    let mut remotes = vec![remote];
    let stop = AtomicBool::new(false);
    let opened = client::targets(&mut remotes, &[Vec::new()], 1 << 20, false, false, RUN_KEY, &stop).await.unwrap();
    assert!(opened[0].is_ok(), "{opened:?}");
    (relay, remotes)
}

/// The relay agent on `host`, made the relay of `group` (the run's hosts from `first` on) and
/// its children's targets opened through it.
async fn relay_of(
    creds: &RunCredentials,
    dir: &Path,
    host: &str,
    group: &[(Host, Vec<TargetGroup>)],
) -> (Host, Remote, Vec<pb::RelayedHost>) {
    let rd = dir.join(host);
    std::fs::create_dir(&rd).unwrap();
    let relay = agent(creds, host, &rd, None, true);
    let mut remote = client::connect(&relay.addr, &coordinator(creds), 4).await.unwrap();
    let names: Vec<String> = group.iter().map(|c| iocurve_net::auth::host_of(&c.0.addr).to_string()).collect();
    let grant = creds.relay_grant(host, &names, RUN_KEY, iocurve_net::unix_s() + 600).unwrap();
    let list: Vec<(String, Vec<TargetGroup>)> = group.iter().map(|(h, g)| (h.addr.clone(), g.clone())).collect();
    let hosts = relay::join(&mut remote, &grant, &creds.ca_pem, &list, RUN_KEY, Duration::from_secs(1)).await.unwrap();
    (relay, remote, hosts)
}

#[test]
fn a_step_through_a_relay_merges_what_the_flat_step_merges_bucket_for_bucket() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let creds = RunCredentials::issue(Duration::from_secs(3600)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let children = children(&creds, dir.path(), CHILDREN);
        let cfg = coordinator(&creds);
        let w = workload();
        let stop = AtomicBool::new(false);

        // Flat: the coordinator drives every agent.
        let addrs: Vec<String> = children.iter().map(|c| c.0.addr.clone()).collect();
        let mut remotes: Vec<Remote> =
            client::connect_all(&addrs, &cfg, 4, &stop).await.unwrap().into_iter().map(Result::unwrap).collect();
        let targets: Vec<Vec<TargetGroup>> = children.iter().map(|c| c.1.clone()).collect();
        let opened = client::targets(&mut remotes, &targets, 1 << 20, false, false, RUN_KEY, &stop).await.unwrap();
        assert!(opened.iter().all(Result::is_ok), "{opened:?}");
        let (flat, flat_obs) = step(&mut remotes, &targets, &w).await;
        // The agents are free for the relay once the coordinator's connections are gone.
        drop(remotes);
        tokio::time::sleep(Duration::from_millis(300)).await;

        // Through a relay: the coordinator drives a relay of three agents, and the fourth
        // itself (a relay's part weighs as its hosts: the CPU means differ per host).
        let (_relay, relay_remote, hosts) = relay_of(&creds, dir.path(), "127.0.0.20", &children[..3]).await;
        assert!(hosts.iter().all(|h| h.lost.is_empty()), "every child reached: {hosts:?}");
        assert_eq!(relay_remote.hosts, 3);
        // The relay measured its children's clocks (3 ms apart, as they are) itself.
        let offsets: Vec<i64> = hosts.iter().map(|h| h.offset_ns).collect();
        for pair in offsets.windows(2) {
            assert!((pair[1] - pair[0] - 3_000_000).abs() < 2_000_000, "offsets {offsets:?}");
        }
        let direct = client::connect(&addrs[3], &cfg, 4).await.unwrap();
        let mut tree_remotes = vec![relay_remote, direct];
        let relay_targets = vec![Vec::new(), targets[3].clone()];
        let opened =
            client::targets(&mut tree_remotes, &relay_targets, 1 << 20, false, false, RUN_KEY, &stop).await.unwrap();
        let facts = opened.into_iter().next().unwrap().unwrap();
        assert_eq!(facts.len(), 3, "one target per child: {facts:?}");
        assert!(facts.iter().zip(&addrs).all(|(f, a)| &f.host == a), "each fact names its agent: {facts:?}");
        let (tree, tree_obs) = step(&mut tree_remotes, &relay_targets, &w).await;

        assert_eq!((flat.merged.hosts, tree.merged.hosts), (CHILDREN, CHILDREN));
        assert!(flat.lost.is_empty() && tree.lost.is_empty());
        assert_eq!(flat_obs.intervals.len(), w.intervals as usize);
        assert_eq!(tree_obs.intervals.len(), flat_obs.intervals.len());
        for ((i, a, ca), (j, b, cb)) in flat_obs.intervals.iter().zip(&tree_obs.intervals) {
            assert_eq!(i, j);
            for (x, y) in [(&a.read, &b.read), (&a.write, &b.write), (&a.trim, &b.trim)] {
                assert_eq!((x.ops, x.bytes), (y.ops, y.bytes), "interval {i}");
                assert_eq!(buckets(&x.hist), buckets(&y.hist), "interval {i}: the tree's buckets are the flat ones");
            }
            assert_eq!(a.targets, b.targets, "interval {i}: each target's part");
            assert_eq!(a.samples, b.samples, "interval {i}: per-second samples");
            assert!((ca.user - 0.025).abs() < 1e-9, "the hosts' mean CPU: {ca:?}");
            assert!((ca.user - cb.user).abs() < 1e-9 && (ca.system - cb.system).abs() < 1e-9, "{ca:?} {cb:?}");
        }
        // Something to compare: every interval holds hundreds of buckets of every host's.
        assert!(
            flat_obs.intervals.iter().all(|(_, s, _)| buckets(&s.read.hist).len() + buckets(&s.write.hist).len() > 100)
        );
        // A row per host through the relay too, each the step of that host summed up (one
        // interval of the step's length): the flat step's host, bucket for bucket, on the
        // coordinator's clock (its offset through the relay within the measurements' round trips).
        let (a, b) = (&flat.merged.per_host, &tree.merged.per_host);
        assert_eq!(b.iter().map(|h| h.address.as_str()).collect::<Vec<_>>(), addrs, "a row per host, in order");
        assert!(
            tree_obs.summaries.iter().map(|(i, _)| *i).eq(0..4),
            "handed on at the step's end: {:?}",
            tree_obs.summaries
        );
        assert!(tree_obs.hosts_started == 0, "nothing per host as the step runs: the rows come summed up");
        for (x, y) in a.iter().zip(b) {
            assert_eq!(y.record.measured, 1, "{}: one row for the step", y.address);
            assert_eq!(y.record.intervals[0].duration_s, w.intervals as f64 * w.interval_s);
            for (p, q) in [(&x.record.total.read, &y.record.total.read), (&x.record.total.write, &y.record.total.write)]
            {
                assert_eq!((p.ops, p.bytes), (q.ops, q.bytes), "{}", y.address);
                assert_eq!(buckets(&p.hist), buckets(&q.hist), "{}: the host's buckets", y.address);
            }
            let apart = (x.clock.offset_ns - y.clock.offset_ns).abs();
            assert!(apart <= x.clock.rtt_ns + y.clock.rtt_ns + 1_000_000, "{}: {apart} ns apart", y.address);
            assert!(y.started_unix_ns > 0 && y.lost_at_s.is_none(), "{y:?}");
        }

        // The second host asked for in full (`run --host-intervals`): its every interval comes
        // as the flat step's host interval of that index, bucket for bucket, target parts and
        // per-second samples (its timeline) too; the others still summed up.
        let in_full = vec![vec![addrs[1].clone()], Vec::new()];
        let (full, full_obs) = step_in_full(&mut tree_remotes, &relay_targets, &w, &in_full).await;
        assert!(full.merged.notes.iter().all(|n| n.0 != "relay_summary"), "{:?}", full.merged.notes);
        let flat_1: Vec<_> = flat_obs.host_intervals.iter().filter(|h| h.0 == 1).collect();
        assert_eq!(flat_1.len(), w.intervals as usize);
        assert_eq!(full_obs.hosts_started, 1, "the host in full starts as a host without relays does");
        assert_eq!(full_obs.host_intervals.len(), w.intervals as usize, "its intervals, none of another host's");
        for ((h, i, a), (g, j, b)) in flat_1.iter().copied().zip(&full_obs.host_intervals) {
            assert_eq!((h, i), (g, j));
            for (x, y) in [(&a.read, &b.read), (&a.write, &b.write), (&a.trim, &b.trim)] {
                assert_eq!((x.ops, x.bytes), (y.ops, y.bytes), "interval {i}");
                assert_eq!(buckets(&x.hist), buckets(&y.hist), "interval {i}: the host's buckets");
            }
            assert_eq!(a.targets, b.targets, "interval {i}: its target's part, in the run's place");
            assert_eq!(a.samples, b.samples, "interval {i}: its per-second samples");
        }
        assert_eq!(full_obs.summaries.iter().map(|s| s.0).collect::<Vec<_>>(), [0, 2, 3], "the others summed up");
        let row = &full.merged.per_host[1];
        assert_eq!(row.address, addrs[1]);
        assert_eq!(row.record.measured, w.intervals as usize, "its row holds its intervals");
        assert_eq!(buckets(&row.record.total.read.hist), buckets(&a[1].record.total.read.hist));
    });
}

/// A child lost mid-step: its relay goes on with the others and says so; a relay lost
/// mid-step: the coordinator goes on with the other relay's group, and names the relay and its
/// hosts.
#[test]
fn a_lost_child_and_a_lost_relay_lose_their_hosts_and_the_step_goes_on() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let creds = RunCredentials::issue(Duration::from_secs(3600)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut kids = children(&creds, dir.path(), CHILDREN);
        let (right, left) = kids.split_at_mut(2);
        let (_ra, a, _) = relay_of(&creds, dir.path(), "127.0.0.20", left).await;
        let (mut rb, b, _) = relay_of(&creds, dir.path(), "127.0.0.21", right).await;
        let stop = AtomicBool::new(false);
        let mut remotes = vec![b, a];
        let none = vec![Vec::new(), Vec::new()];
        let opened = client::targets(&mut remotes, &none, 1 << 20, false, false, RUN_KEY, &stop).await.unwrap();
        assert!(opened.iter().all(Result::is_ok), "{opened:?}");
        let mut w = workload();
        w.intervals = 5;

        // Child 127.0.0.5 (relay a's second) goes 2 s into the step.
        let lost_child = left[1].0.addr.clone();
        let ((m, obs), ()) = tokio::join!(step(&mut remotes, &none, &w), async {
            tokio::time::sleep(Duration::from_millis(2000)).await;
            left[1].0.kill();
        });
        assert!(m.lost.is_empty(), "no relay lost: {:?}", m.losses);
        assert_eq!(m.merged.hosts, CHILDREN);
        let note = m.merged.notes.iter().find(|(code, _)| code == "host_lost").expect("the lost child is flagged");
        assert!(note.1.contains(&lost_child), "{note:?}");
        // Relay a goes on with its one agent left; relay b with its two.
        assert_eq!(m.hosts_left, [2, 1]);
        // Each simulated agent that ended its step counted (the lost one said nothing), not
        // each relay, of every host.
        let sim = m.merged.notes.iter().find(|(code, _)| code == "simulated").expect("said");
        assert!(sim.1.starts_with("3 of 4 hosts"), "{sim:?}");
        assert_eq!(obs.intervals.len(), 5, "every interval merged");
        assert!(obs.intervals.last().unwrap().1.read.ops > 0);

        // Relay b goes 2 s into the next step: its two hosts with it.
        let rb_addr = rb.addr.clone();
        let ((m, obs), ()) = tokio::join!(step(&mut remotes, &none, &w), async {
            tokio::time::sleep(Duration::from_millis(2000)).await;
            rb.kill();
        });
        assert_eq!(m.lost, [0], "{:?}", m.losses);
        // The lost child was not there at the start: the step started on 3 hosts.
        assert_eq!((m.merged.hosts, m.merged.planned_hosts), (3, CHILDREN));
        assert_eq!(m.losses[0].address, rb_addr);
        let note =
            m.merged.notes.iter().find(|(code, m)| code == "host_lost" && m.contains(&rb_addr)).expect("flagged");
        assert!(note.1.contains("relay") && note.1.contains("2 hosts"), "{note:?}");
        assert_eq!(obs.intervals.len(), 5, "the other group's intervals go on");
    });
}

/// What a relay cannot do is refused with what to do instead, before any child is asked: an
/// agent not started as a relay, a delegation of another run, what does not go through relays.
#[test]
fn what_a_relay_cannot_do_is_refused_by_name() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let creds = RunCredentials::issue(Duration::from_secs(3600)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let kids = children(&creds, dir.path(), 2);
        let list: Vec<(String, Vec<TargetGroup>)> = kids.iter().map(|(h, g)| (h.addr.clone(), g.clone())).collect();
        let names: Vec<String> = list.iter().map(|c| iocurve_net::auth::host_of(&c.0).to_string()).collect();
        let skew = Duration::from_secs(1);

        // Child 127.0.0.3 is no relay.
        let mut plain = client::connect(&kids[1].0.addr, &coordinator(&creds), 4).await.unwrap();
        let grant = creds.relay_grant("127.0.0.3", &names[..1], RUN_KEY, iocurve_net::unix_s() + 600).unwrap();
        let e = relay::join(&mut plain, &grant, &creds.ca_pem, &list[..1], RUN_KEY, skew).await.unwrap_err();
        assert!(e.to_string().contains("start it with `iocurve agent --relay`"), "{e}");
        drop(plain);

        let rd = dir.path().join("relay");
        std::fs::create_dir(&rd).unwrap();
        let _relay = agent(&creds, "127.0.0.20", &rd, None, true);
        let mut remote = client::connect(&_relay.addr, &coordinator(&creds), 4).await.unwrap();
        // A grant minted for another run.
        let other = creds.relay_grant("127.0.0.20", &names, RUN_KEY + 1, iocurve_net::unix_s() + 600).unwrap();
        let e = relay::join(&mut remote, &other, &creds.ca_pem, &list, RUN_KEY, skew).await.unwrap_err();
        assert!(e.to_string().contains(&format!("for run key {}, the group's for {RUN_KEY}", RUN_KEY + 1)), "{e}");
        // A grant that names another agent.
        let e = relay::join(&mut remote, &grant, &creds.ca_pem, &list, RUN_KEY, skew).await.unwrap_err();
        assert!(e.to_string().contains("its grant names no agent 127.0.0.3"), "{e}");

        let grant = creds.relay_grant("127.0.0.20", &names, RUN_KEY, iocurve_net::unix_s() + 600).unwrap();
        // A workers_scale no plan can give (at most 64).
        for bad in [f64::NAN, -1.0, 65.0] {
            let e = relay::join_uneven(&mut remote, &grant, &creds.ca_pem, &list, &[1.0, bad], RUN_KEY, skew)
                .await
                .unwrap_err();
            assert!(e.to_string().contains("agent 127.0.0.3") && e.to_string().contains("a workers_scale of"), "{e}");
        }
        let hosts = relay::join(&mut remote, &grant, &creds.ca_pem, &list, RUN_KEY, skew).await.unwrap();
        assert_eq!(hosts.len(), 2);
        let stop = AtomicBool::new(false);
        let mut remotes = vec![remote];
        // Targets of its own: its children have theirs.
        let own = vec![list[0].1.clone()];
        let e = client::targets(&mut remotes, &own, 1 << 20, false, false, RUN_KEY, &stop).await.unwrap_err();
        assert!(e.to_string().contains("send none"), "{e}");
        let none = vec![Vec::new()];
        let opened = client::targets(&mut remotes, &none, 1 << 20, false, false, RUN_KEY, &stop).await.unwrap();
        assert!(opened[0].is_ok(), "{opened:?}");
        // A replay goes to a relay as its agents' shares, one each: one share alone (an older
        // coordinator's), or a share too many or too few, is refused by name as bad input
        // (exit code 2), not taken for a relay lost.
        let w = workload();
        let mut spec = spec(&w, &none);
        let share = iocurve_engine::replay::encode(&iocurve_engine::replay::ReplayShare {
            ios: Vec::new(),
            speed: 1.0,
            remap: iocurve_plan::Remap::Modulo,
            spans: vec![1 << 20],
        });
        let one = [share.clone()];
        spec.replay = Some(&one);
        let Err(e) = client::run_step(&mut remotes, &spec, &mut iocurve_engine::NoObserver, &stop).await else {
            panic!("one share to a relay")
        };
        assert!(matches!(&e, iocurve_net::NetError::Input(m) if m.contains("one replay share for a relay: a relay takes its agents' shares (relayed_replays), one each")), "{e}");
        let three = [vec![share.clone(), share.clone(), share.clone()]];
        let none_own: [Vec<u8>; 1] = [Vec::new()];
        (spec.replay, spec.relayed_replays) = (Some(&none_own[..]), &three[..]);
        let Err(e) = client::run_step(&mut remotes, &spec, &mut iocurve_engine::NoObserver, &stop).await else {
            panic!("three shares for two agents")
        };
        assert!(matches!(&e, iocurve_net::NetError::Input(m) if m.contains("3 replay shares for this relay's 2 agents: one each")), "{e}");
        (spec.replay, spec.relayed_replays) = (None, &[]);
        // And the relay is free for the next step.
        let m = client::run_step(&mut remotes, &spec, &mut iocurve_engine::NoObserver, &stop).await.unwrap();
        assert_eq!(m.merged.hosts, 2);

        // Its coordinator on a new connection (a channel that reconnected, the same certificate)
        // keeps its group — at once: the relay lets a group go half a second after its
        // coordinator's connection closed (the old one's end reaches the relay within a few ms;
        // until then it is still the owner's, "in use").
        drop(remotes);
        let mut again = vec![client::connect(&_relay.addr, &coordinator(&creds), 4).await.unwrap()];
        let mut opened = Vec::new();
        for _ in 0..20 {
            opened = client::targets(&mut again, &none, 1 << 20, false, false, RUN_KEY, &stop).await.unwrap();
            if !matches!(&opened[..], [Err(e)] if e.contains("in use")) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(opened[0].as_ref().map(Vec::len), Ok(2), "{opened:?}");
        // The next run's coordinator of the same cluster (every coordinator of `certs init`
        // presents the same client certificate) right after, within the half second: the group
        // is not its run's, so the relay gives it up and serves the call as an agent's (no
        // targets of its own); the first run's calls hear that its group was let go.
        // (Connected first: a Hello and pings claim nothing, and the call comes at once, well
        // before the relay would let the group go of itself.)
        let mut next = vec![client::connect(&_relay.addr, &coordinator(&creds), 4).await.unwrap()];
        drop(again);
        let mut served = None;
        for _ in 0..20 {
            match client::targets(&mut next, &none, 1 << 20, false, false, RUN_KEY + 1, &stop).await {
                Ok(l) if matches!(&l[..], [Err(e)] if e.contains("in use")) => {
                    tokio::time::sleep(Duration::from_millis(10)).await
                }
                other => {
                    served = Some(other);
                    break;
                }
            }
        }
        let Some(served) = served else { panic!("the first run's connection still owned the relay after 20 tries") };
        let Err(e) = served else { panic!("another run's call reached the group: {served:?}") };
        assert!(e.to_string().contains("names no target groups"), "{e}");
        let lost = client::targets(&mut next, &none, 1 << 20, false, false, RUN_KEY, &stop).await.unwrap();
        assert!(matches!(&lost[..], [Err(e)] if e.contains("this relay let its group go")), "{lost:?}");
        drop(next);
        // Another coordinator (another certificate of the CA) that takes the relay once the
        // first is gone finds no group of the first's to drive: the relay let it go, and says so
        // to a call of its run (another run's it serves as an agent, with no targets of its own).
        tokio::time::sleep(Duration::from_millis(50)).await;
        let intruder = ClientConfig { identity: Some(creds.for_relay("another").unwrap()), ..coordinator(&creds) };
        let mut other = vec![client::connect(&_relay.addr, &intruder, 4).await.unwrap()];
        // (Unavailable: a loss of its hosts, not a refusal of the run.) Either the relay let the
        // group go already (half a second after), or the intruder's own call took the relay from
        // the gone owner and was answered as an agent's: its next call hears the group was let go.
        let mut lost = Vec::new();
        for _ in 0..2 {
            match client::targets(&mut other, &none, 1 << 20, false, false, RUN_KEY, &stop).await {
                Ok(l) => {
                    lost = l;
                    break;
                }
                Err(e) => assert!(e.to_string().contains("names no target groups"), "{e}"),
            }
        }
        assert!(matches!(&lost[..], [Err(e)] if e.contains("this relay let its group go")), "{lost:?}");
        let e = client::targets(&mut other, &none, 1 << 20, false, false, RUN_KEY + 1, &stop).await.unwrap_err();
        assert!(e.to_string().contains("names no target groups"), "{e}");
    });
}

/// `--on-host-loss abort` holds behind a relay: an agent of its group lost mid-step ends the
/// run after the step, its figures kept (the relay says its losses with the step's end; an
/// agent of the coordinator's own stops the others at once).
#[test]
fn a_child_lost_behind_a_relay_ends_the_run_under_abort() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let creds = RunCredentials::issue(Duration::from_secs(3600)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut kids = children(&creds, dir.path(), 2);
        let (_relay, mut remotes) = opened_through(&creds, dir.path(), &kids).await;
        let stop = AtomicBool::new(false);
        let none = vec![Vec::new()];
        let mut w = workload();
        w.intervals = 4;
        let lost = kids[1].0.addr.clone();
        let mut spec = spec(&w, &none);
        spec.abort_on_host_loss = true;
        let mut obs = Merged::default();
        let (m, ()) = tokio::join!(client::run_step(&mut remotes, &spec, &mut obs, &stop), async {
            tokio::time::sleep(Duration::from_millis(1600)).await;
            kids[1].0.kill();
        });
        let Ok(m) = m else { panic!("the step ends with what it measured") };
        let why = m.merged.aborted.expect("the run ends after this step");
        assert!(why.contains(&lost) && why.contains("--on-host-loss abort ends the run"), "{why}");
        assert_eq!(m.losses.len(), 1, "the agent, by its address: {:?}", m.losses);
        assert_eq!(m.losses[0].address, lost);
    });
}

/// Agents lost behind a relay before a step: one gone before `Targets` (the relay's reply names
/// it lost, and its group is one smaller), one gone between `Targets` and the step (the step
/// runs on the rest, and the relay's note counts its own group as its own, not as the run's).
#[test]
fn children_lost_before_a_step_are_said_and_the_step_runs_on_the_rest() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let creds = RunCredentials::issue(Duration::from_secs(3600)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut kids = children(&creds, dir.path(), 3);
        let (_relay, remote, hosts) = relay_of(&creds, dir.path(), "127.0.0.20", &kids).await;
        assert_eq!(hosts.len(), 3);
        let (gone_first, gone_next) = (kids[2].0.addr.clone(), kids[1].0.addr.clone());
        kids[2].0.kill();
        let stop = AtomicBool::new(false);
        let mut remotes = vec![remote];
        let none = vec![Vec::new()];
        let mut opened = Vec::new();
        // (The kill reaches the relay's connection to it within moments.)
        for _ in 0..50 {
            opened = client::targets(&mut remotes, &none, 1 << 20, false, false, RUN_KEY, &stop).await.unwrap();
            if !remotes[0].lost_behind.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(opened[0].as_ref().map(Vec::len), Ok(2), "{opened:?}");
        let lost: Vec<&str> = remotes[0].lost_behind.iter().map(|l| l.address.as_str()).collect();
        assert_eq!(lost, [gone_first.as_str()]);
        assert_eq!(remotes[0].hosts, 2);

        kids[1].0.kill();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let w = workload();
        let mut spec = spec(&w, &none);
        spec.planned_hosts = 3;
        let mut obs = Merged::default();
        let m = client::run_step(&mut remotes, &spec, &mut obs, &stop).await.expect("the step runs on the rest");
        assert!(m.lost.is_empty(), "the relay is not lost: {:?}", m.losses);
        assert_eq!(m.merged.hosts, 1, "{:?}", m.merged.notes);
        assert_eq!(m.hosts_left, [1]);
        let losses: Vec<&str> = m.losses.iter().map(|l| l.address.as_str()).collect();
        assert_eq!(losses, [gone_next.as_str()]);
        let note = m.merged.notes.iter().find(|(code, _)| code == "host_lost").expect("the lost child is flagged");
        assert!(
            note.1.contains(&gone_next)
                && note.1.contains("lost before the step started: the step ran on 1 of this relay's 2 agents"),
            "{note:?}"
        );
        assert_eq!(obs.intervals.len(), 3, "every interval of the one left");
    });
}

/// Clocks compose: a relay holds its agents to the coordinator's clock (their offset from the
/// relay plus the relay's from the coordinator), not only to its own. Here the relay is 80 ms
/// ahead of the coordinator (as measured), its agents 6 ms behind and 30 ms ahead of it: the
/// second is 110 ms off the coordinator's, past a bound of 100 ms, and is left out of the group.
#[test]
fn a_childs_clock_is_held_to_the_coordinators_through_its_relay() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let creds = RunCredentials::issue(Duration::from_secs(3600)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        // Simulated agent k's clock is (k - 2) × 3 ms off: -6 ms and +30 ms.
        let kids = [child(&creds, dir.path(), 2, Some(0)), child(&creds, dir.path(), 3, Some(12))];
        let rd = dir.path().join("relay");
        std::fs::create_dir(&rd).unwrap();
        let _relay = agent(&creds, "127.0.0.20", &rd, None, true);
        let mut remote = client::connect(&_relay.addr, &coordinator(&creds), 4).await.unwrap();
        remote.offset_ns = 80_000_000;
        let names: Vec<String> = kids.iter().map(|c| iocurve_net::auth::host_of(&c.0.addr).to_string()).collect();
        let grant = creds.relay_grant("127.0.0.20", &names, RUN_KEY, iocurve_net::unix_s() + 600).unwrap();
        let list: Vec<(String, Vec<TargetGroup>)> = kids.iter().map(|(h, g)| (h.addr.clone(), g.clone())).collect();
        let hosts =
            relay::join(&mut remote, &grant, &creds.ca_pem, &list, RUN_KEY, Duration::from_millis(100)).await.unwrap();
        assert!(hosts[0].lost.is_empty(), "74 ms off the coordinator's: {:?}", hosts[0].lost);
        let lost = &hosts[1].lost;
        assert!(
            lost.contains(&format!("agent {}'s clock is 1", kids[1].0.addr))
                && lost.contains("ms ahead of the coordinator's (through this relay), more than --max-skew-ms 100"),
            "{lost}"
        );
        assert_eq!(remote.hosts, 1);
    });
}

/// A child that accepts the relay's TCP connection and then says nothing (a hung host, a
/// stopped agent: its kernel still accepts) is lost by its deadline, said by name; the relay's
/// other agent is its group.
#[test]
fn a_child_that_never_answers_is_lost_at_the_join() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let creds = RunCredentials::issue(Duration::from_secs(3600)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let kids = children(&creds, dir.path(), 1);
        // Accepts, keeps every connection open, reads and writes nothing.
        let silent = std::net::TcpListener::bind("127.0.0.9:0").unwrap();
        let silent_addr = silent.local_addr().unwrap().to_string();
        let held = std::thread::spawn(move || silent.incoming().take(4).map(Result::unwrap).collect::<Vec<_>>());
        let rd = dir.path().join("relay");
        std::fs::create_dir(&rd).unwrap();
        let _relay = agent(&creds, "127.0.0.20", &rd, None, true);
        let mut remote = client::connect(&_relay.addr, &coordinator(&creds), 4).await.unwrap();
        let mut list: Vec<(String, Vec<TargetGroup>)> = kids.iter().map(|(h, g)| (h.addr.clone(), g.clone())).collect();
        list.push((silent_addr.clone(), kids[0].1.clone()));
        let names: Vec<String> = list.iter().map(|c| iocurve_net::auth::host_of(&c.0).to_string()).collect();
        let grant = creds.relay_grant("127.0.0.20", &names, RUN_KEY, iocurve_net::unix_s() + 600).unwrap();
        let t0 = std::time::Instant::now();
        let hosts =
            relay::join(&mut remote, &grant, &creds.ca_pem, &list, RUN_KEY, Duration::from_secs(1)).await.unwrap();
        assert!(hosts[0].lost.is_empty(), "{:?}", hosts[0].lost);
        assert!(hosts[1].lost.contains("did not answer within 10 s"), "{:?}", hosts[1].lost);
        assert!(t0.elapsed() < Duration::from_secs(60), "by its deadline, not never: {:?}", t0.elapsed());
        assert_eq!(remote.hosts, 1);
        // The group steps on the one that answered.
        let stop = AtomicBool::new(false);
        let mut remotes = vec![remote];
        let none = vec![Vec::new()];
        let opened = client::targets(&mut remotes, &none, 1 << 20, false, false, RUN_KEY, &stop).await.unwrap();
        assert_eq!(opened[0].as_ref().map(Vec::len), Ok(1), "{opened:?}");
        drop(held);
    });
}

/// Two real agents on files (127.0.0.2 and .3) behind the relay on 127.0.0.20, their targets
/// opened through it, and a workload of two intervals of 0.5 s.
async fn two_real_through(
    creds: &RunCredentials,
    dir: &Path,
) -> ([(Host, Vec<TargetGroup>); 2], Host, Vec<Remote>, Workload) {
    let kids = [child(creds, dir, 2, None), child(creds, dir, 3, None)];
    let (relay, remotes) = opened_through(creds, dir, &kids).await;
    let mut w = workload();
    (w.intervals, w.interval_s) = (2, 0.5);
    (kids, relay, remotes, w)
}

/// Injected faults go through a relay to its agents (issue 46): real agents on files, every
/// I/O held back 5 ms — each agent's latency and the merged count of faults say each applied
/// them. A fault on one target reaches the agent that has it, and that agent alone.
#[test]
fn injected_faults_reach_the_agents_behind_a_relay() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let creds = RunCredentials::issue(Duration::from_secs(3600)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (kids, _relay, mut remotes, w) = two_real_through(&creds, dir.path()).await;
        let stop = AtomicBool::new(false);
        let none = vec![Vec::new()];
        let faults = [iocurve_plan::Fault {
            kind: iocurve_plan::FaultKind::Latency,
            share: 1.0,
            from_s: 0.0,
            to_s: None,
            target: None,
            latency_ms: 5.0,
        }];
        let mut spec = spec(&w, &none);
        spec.faults = &faults;
        spec.planned_hosts = 2;
        let mut obs = Merged::default();
        let m = client::run_step(&mut remotes, &spec, &mut obs, &stop).await.expect("the step runs");
        assert_eq!(m.merged.hosts, 2);
        assert_eq!(obs.intervals.len(), 2);
        for (_, s, _) in &obs.intervals {
            let (ops, mean_us) = (s.read.ops + s.write.ops, s.read.hist.mean_ns() / 1e3);
            assert!(ops > 0 && s.faults_injected >= ops, "every I/O delayed: {} of {ops}", s.faults_injected);
            assert!(mean_us >= 5000.0, "5 ms a request at least: {mean_us} µs");
            // 8 workers on the two agents, 0.5 s, ≥ 5 ms each: at most 800 I/Os.
            assert!(ops <= 800, "{ops}");
        }
        // A fault on the first agent's target: the coordinator sends it to the relay that
        // stands for that agent (here the only one), and the relay to that agent alone — its
        // target's I/Os take 5 ms, the other's take what a file on this disk takes.
        let one = [iocurve_plan::Fault { target: Some(kids[0].1[0].targets[0].clone()), ..faults[0].clone() }];
        let routes = vec![kids.iter().flat_map(|k| k.1.clone()).collect::<Vec<_>>()];
        (spec.faults, spec.fault_targets) = (&one, &routes);
        let mut obs = Merged::default();
        client::run_step(&mut remotes, &spec, &mut obs, &stop).await.expect("a fault on one target goes through");
        for (_, s, _) in &obs.intervals {
            let [first, second] = &s.targets[..] else { panic!("a part per target: {:?}", s.targets) };
            let (slow, fast) = (first.hist.mean_ns() / 1e3, second.hist.mean_ns() / 1e3);
            assert!(first.read_ops > 0 && slow >= 5000.0, "the first agent's target held 5 ms: {slow} µs");
            // (Its latency is the disk's: on a loaded machine it may be long too, never held.)
            assert!(second.read_ops > 0 && fast < slow, "the second agent's target untouched: {fast} µs");
            // Every I/O on the first target delayed, none on the second (a fault counts when it
            // is injected: up to the 4 I/Os in flight at the interval's end count in it too).
            let delayed = first.read_ops + first.write_ops;
            assert!((delayed..=delayed + 4).contains(&s.faults_injected), "{} of {delayed}", s.faults_injected);
        }
        // A fault on a target no agent has goes to every agent, which refuses it by name: bad
        // input (exit code 2), not the relay lost, and the relay free for the next step.
        let nowhere = [iocurve_plan::Fault { target: Some("/nowhere.dat".into()), ..faults[0].clone() }];
        spec.faults = &nowhere;
        let Err(e) = client::run_step(&mut remotes, &spec, &mut iocurve_engine::NoObserver, &stop).await else {
            panic!("a fault on a target no agent has")
        };
        assert!(matches!(&e, iocurve_net::NetError::Input(m) if m.contains("/nowhere.dat")), "{e}");
        spec.faults = &faults;
        assert!(client::run_step(&mut remotes, &spec, &mut iocurve_engine::NoObserver, &stop).await.is_ok());
    });
}

/// `--write-iolog` through a relay (issue 46): the group's log is one, each agent's I/Os on
/// its own target (by its place among the group's), in time order from the group's start, at
/// least every I/O the step measured and at most those in flight more.
#[test]
fn a_relays_io_log_holds_its_agents_ios_on_their_targets() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let creds = RunCredentials::issue(Duration::from_secs(3600)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (_kids, _relay, mut remotes, w) = two_real_through(&creds, dir.path()).await;
        let stop = AtomicBool::new(false);
        let none = vec![Vec::new()];
        let mut spec = spec(&w, &none);
        (spec.write_iolog, spec.planned_hosts) = (true, 2);
        let m =
            client::run_step(&mut remotes, &spec, &mut iocurve_engine::NoObserver, &stop).await.expect("the step runs");
        let [log] = &m.iolog[..] else { panic!("one log for the relay's group: {}", m.iolog.len()) };
        assert_eq!(log.left_out, 0);
        assert!(log.ios.windows(2).all(|p| p[0].t_ns <= p[1].t_ns), "in time order");
        let on = |t: u32| log.ios.iter().filter(|io| io.op.target == t).count() as u64;
        assert!(on(0) > 0 && on(1) > 0 && on(0) + on(1) == log.ios.len() as u64, "both agents' targets, no other");
        // Every I/O the step measured (no warm-up), and at most the 8 workers' in flight more.
        let measured = m.merged.total.ops();
        let logged = log.ios.len() as u64;
        assert!((measured..=measured + 8).contains(&logged), "{logged} logged, {measured} measured");
        // Within the step's second from the group's start (a loaded machine's late start aside,
        // and an agent's start a few ms after the group's).
        let last = log.ios.last().unwrap().t_ns;
        assert!(last < 3_100_000_000, "{last} ns");
    });
}

/// A concurrent step (two workloads at once) goes through a relay (issue 46): each agent runs
/// both members, the merged intervals keep each member's part, and each host's row is its step
/// summed up.
#[test]
fn a_concurrent_step_goes_through_a_relay() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let creds = RunCredentials::issue(Duration::from_secs(3600)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (kids, _relay, mut remotes, w) = two_real_through(&creds, dir.path()).await;
        let stop = AtomicBool::new(false);
        let none = vec![Vec::new()];
        let (mut reads, mut writes) = (w.clone(), w.clone());
        (reads.name, writes.name, writes.read_pct) = ("reads".into(), "writes".into(), 0.0);
        let members = [(reads, 1), (writes, 1)];
        let mut spec = spec(&w, &none);
        (spec.workers, spec.members, spec.planned_hosts) = (2, &members, 2);
        let mut obs = Merged::default();
        let m = client::run_step(&mut remotes, &spec, &mut obs, &stop).await.expect("the step runs");
        assert_eq!((m.merged.hosts, obs.intervals.len()), (2, 2));
        for (_, s, _) in &obs.intervals {
            let [r, wr] = &s.members[..] else { panic!("a part per member: {}", s.members.len()) };
            assert!(r.read.ops > 0 && r.write.ops == 0, "the reading member: {:?}", (r.read.ops, r.write.ops));
            assert!(wr.write.ops > 0 && wr.read.ops == 0, "the writing member: {:?}", (wr.read.ops, wr.write.ops));
            assert_eq!((s.read.ops, s.write.ops), (r.read.ops, wr.write.ops), "the step is its members' sum");
        }
        let rows: Vec<(&str, u32, u64)> = m
            .merged
            .per_host
            .iter()
            .map(|h| (h.address.as_str(), h.record.workers, h.record.total.read.ops + h.record.total.write.ops))
            .collect();
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert!(rows.iter().zip(&kids).all(|(r, k)| r.0 == k.0.addr && r.1 == 2 && r.2 > 0), "{rows:?}");
        for h in &m.merged.per_host {
            assert_eq!(
                (h.record.measured, h.record.intervals[0].duration_s),
                (1, 1.0),
                "the step summed up: {}",
                h.address
            );
        }
    });
}
