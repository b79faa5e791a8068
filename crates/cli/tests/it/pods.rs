//! `run --launch pods` and `iocurve agent --enrol` (issue 46), as in a Kubernetes Indexed Job:
//! real agents wait with a pod token each (signed here by a test issuer, as a kubelet signs
//! them), the coordinator dials the pods' DNS names (an /etc/hosts of its own, bind-mounted in a
//! mount namespace: needs root), enrols those whose token names them and runs on them; the pod
//! whose token names another is refused and the run goes on without it.

use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};

use iocurve_net::podtoken::base64url_encode as b64;

use crate::util::{bin, iocurve, one_at_a_time, stderr, stdout};

/// The cluster's service-account issuer: its key set, and the tokens it writes into pods.
struct Issuer(EcdsaKeyPair);

impl Issuer {
    fn new() -> Issuer {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        Issuer(EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap())
    }

    fn jwks(&self) -> String {
        let p = self.0.public_key().as_ref();
        serde_json::json!({"keys": [{"use": "sig", "kty": "EC", "crv": "P-256", "kid": "k", "alg": "ES256",
            "x": b64(&p[1..33]), "y": b64(&p[33..65])}]})
        .to_string()
    }

    /// The projected token of pod `pod` in namespace `lab`, audience iocurve.
    fn token(&self, pod: &str) -> String {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        let claims = serde_json::json!({
            "aud": ["iocurve"], "exp": now + 3600, "iat": now, "nbf": now,
            "iss": "https://kubernetes.default.svc.cluster.local",
            "sub": "system:serviceaccount:lab:iocurve-agent",
            "kubernetes.io": {"namespace": "lab", "pod": {"name": pod, "uid": "u"},
                "serviceaccount": {"name": "iocurve-agent", "uid": "s"}},
        });
        let signed = format!("{}.{}", b64(br#"{"alg":"ES256","kid":"k"}"#), b64(claims.to_string().as_bytes()));
        let sig = self.0.sign(&SystemRandom::new(), signed.as_bytes()).unwrap();
        format!("{signed}.{}", b64(sig.as_ref()))
    }
}

/// An enrolling agent at `ip:port` holding pod `pod`'s token; its standard error in a file.
fn pod(d: &Path, issuer: &Issuer, pod: &str, ip: &str, port: u16) -> Child {
    pod_with(d, issuer, pod, ip, port, &["--allow", &format!("{}/**", d.display())])
}

fn pod_with(d: &Path, issuer: &Issuer, pod: &str, ip: &str, port: u16, extra: &[&str]) -> Child {
    let token = d.join(format!("{pod}.token"));
    std::fs::write(&token, issuer.token(pod)).unwrap();
    let log = std::fs::File::create(d.join(format!("{pod}.log"))).unwrap();
    // A relay dials its agents by their names: it reads the /etc/hosts of the run's namespace.
    let mut cmd = if extra.contains(&"--relay") {
        let mut c = Command::new("unshare");
        c.args(["-m", "sh", "-c", "mount --bind hosts /etc/hosts && exec \"$0\" \"$@\"", bin()]);
        c
    } else {
        Command::new(bin())
    };
    let child = cmd
        .args(["agent", "--enrol"])
        .arg(&token)
        .args(["--client-ca", "certs/ca.pem", "--listen", &format!("{ip}:{port}"), "--enrol-wait-s", "120"])
        .args(extra)
        .args(["--state-dir", "."])
        .current_dir(d)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while TcpStream::connect((ip, port)).is_err() {
        assert!(t0.elapsed() < Duration::from_secs(20), "the agent of {pod} listens");
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

fn exited(child: &mut Child, within: Duration) -> Option<std::process::ExitStatus> {
    let t0 = Instant::now();
    while t0.elapsed() < within {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

/// The plan of `n` pods, each on a file of its own (on one machine here), named as `--hosts`
/// would name them.
fn plan(d: &Path, n: usize) {
    let mut plan = String::from("targets = [\"unused\"]\n");
    for i in 0..n {
        plan.push_str(&format!(
            "[[hosts]]\naddress = \"iocurve-agent-{i}.iocurve-agent.lab.svc\"\ntargets = [\"{}/p{i}.dat\"]\n",
            d.display()
        ));
    }
    plan.push_str("[[workloads]]\nname = \"mixed\"\nread_pct = 70\nramp = [1, 2]\nwarmup_s = 0\nintervals = 1\ninterval_s = 0.3\n");
    std::fs::write(d.join("plan.toml"), plan).unwrap();
}

/// A directory with the coordinator's certificates (`certs init`) and the cluster's key set, a
/// test issuer, and a free port for every pod.
fn lab() -> (tempfile::TempDir, Issuer, u16) {
    let dir = tempfile::tempdir().unwrap();
    assert!(iocurve(dir.path(), &["certs", "init", "certs"]).status.success());
    let issuer = Issuer::new();
    std::fs::write(dir.path().join("jwks.json"), issuer.jwks()).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    (dir, issuer, port)
}

/// `run plan.toml --launch pods …` in a mount namespace whose /etc/hosts names the pods.
fn hosts(d: &Path, names: &str) {
    std::fs::write(d.join("hosts"), format!("127.0.0.1 localhost\n{names}")).unwrap();
}

fn run_pods(d: &Path, port: u16, extra: &str) -> std::process::Output {
    let run = format!(
        "mount --bind hosts /etc/hosts && exec {} run plan.toml --launch pods --launch-port {port} --pod-keys jwks.json --pod-issuer https://kubernetes.default.svc.cluster.local --client-cert certs/client.pem --client-key certs/client.key --size 8m --json r.json --db r.db {extra}",
        bin()
    );
    Command::new("unshare").args(["-m", "sh", "-c", &run]).current_dir(d).output().unwrap()
}

/// Relay pods (an Indexed Job of `agent --enrol --relay`) are enrolled as the agents are, and
/// drive their groups: the run goes through them, and every pod ends with it.
#[test]
fn relay_pods_are_enrolled_and_drive_their_groups() {
    iocurve_testkit::needs_root!();
    let _one = one_at_a_time();
    let (dir, issuer, port) = lab();
    let d = dir.path();
    hosts(
        d,
        "127.0.0.1 iocurve-agent-0.iocurve-agent.lab.svc\n127.0.0.2 iocurve-agent-1.iocurve-agent.lab.svc\n127.0.0.4 iocurve-relay-0.iocurve-relay.lab.svc\n",
    );
    let mut pods = [
        pod(d, &issuer, "iocurve-agent-0-abcde", "127.0.0.1", port),
        pod(d, &issuer, "iocurve-agent-1-fghij", "127.0.0.2", port),
        pod_with(d, &issuer, "iocurve-relay-0-klmno", "127.0.0.4", port, &["--relay"]),
    ];
    plan(d, 2);
    let o = run_pods(d, port, "--relay-every 2 --relays iocurve-relay-[0-0].iocurve-relay.lab.svc");
    let said = format!("{}{}", stdout(&o), stderr(&o));
    assert!(o.status.success(), "{said}");
    assert!(said.contains("launched 2 of 2 agents over pods"), "{said}");
    assert!(said.contains("(through relay iocurve-relay-0.iocurve-relay.lab.svc:"), "{said}");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(d.join("r.json")).unwrap()).unwrap();
    let steps = r["workloads"][0]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    assert!(steps.iter().all(|s| s["iops"].as_f64().unwrap_or(0.0) > 0.0), "{steps:?}");
    for p in &mut pods {
        let s = exited(p, Duration::from_secs(30));
        assert!(s.is_some_and(|s| s.success()), "{s:?}");
    }
}

#[test]
fn pods_shown_their_own_token_are_enrolled_and_run_and_an_impostor_is_not() {
    iocurve_testkit::needs_root!();
    let _one = one_at_a_time();
    let (dir, issuer, port) = lab();
    let d = dir.path();
    let mut pods = [
        pod(d, &issuer, "iocurve-agent-0-abcde", "127.0.0.1", port),
        pod(d, &issuer, "iocurve-agent-1-fghij", "127.0.0.2", port),
        // At pod 2's name, with pod 0's token.
        pod(d, &issuer, "iocurve-agent-0-zzzzz", "127.0.0.3", port),
    ];
    hosts(
        d,
        "127.0.0.1 iocurve-agent-0.iocurve-agent.lab.svc\n127.0.0.2 iocurve-agent-1.iocurve-agent.lab.svc\n127.0.0.3 iocurve-agent-2.iocurve-agent.lab.svc\n",
    );
    plan(d, 3);
    let o = run_pods(d, port, "");
    let (out, err) = (stdout(&o), stderr(&o));
    // Exit code 3: the run finished, one host lost before the first step.
    assert_eq!(o.status.code(), Some(3), "{out}\n{err}");
    let said = format!("{out}{err}");
    assert!(said.contains("launched 2 of 3 agents over pods"), "{said}");
    let refused = "iocurve-agent-2.iocurve-agent.lab.svc: not enrolled: the token is pod iocurve-agent-0-zzzzz's, whose hostname is not iocurve-agent-2";
    assert!(said.contains(&format!("could not start the agent on {refused}: the run goes on without it")), "{said}");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(d.join("r.json")).unwrap()).unwrap();
    let agents = r["host"]["agents"].as_array().unwrap();
    let lost: Vec<bool> = agents.iter().map(|a| a["lost"].is_string()).collect();
    assert_eq!(lost, [false, false, true], "{agents:?}");
    assert!(agents[2]["lost"].as_str().unwrap().starts_with("not enrolled: the token is pod iocurve-agent-0-zzzzz's"));
    let steps = r["workloads"][0]["steps"].as_array().unwrap();
    assert!(
        steps.iter().all(|s| s["ios"].as_u64().unwrap_or(0) > 0 || s["iops"].as_f64().unwrap_or(0.0) > 0.0),
        "{steps:?}"
    );
    // The enrolled agents served that one run and ended; the impostor still waits.
    for (i, p) in pods.iter_mut().enumerate().take(2) {
        let s = exited(p, Duration::from_secs(30));
        let log = std::fs::read_to_string(d.join(if i == 0 {
            "iocurve-agent-0-abcde.log"
        } else {
            "iocurve-agent-1-fghij.log"
        }))
        .unwrap();
        assert!(s.is_some_and(|s| s.success()), "{s:?}: {log}");
        assert!(log.contains(r#""call":"enrol","detail":"enrolled for one run: its credentials came","event":"call","outcome":"accepted""#), "{log}");
    }
    assert!(pods[2].try_wait().unwrap().is_none(), "the impostor was enrolled by nobody");
    let _ = pods[2].kill();
    let _ = pods[2].wait();
    let log = std::fs::read_to_string(d.join("iocurve-agent-0-zzzzz.log")).unwrap();
    assert!(
        log.contains(r#""outcome":"refused","peer":"127.0.0.1:"#)
            && log.contains(
                "the coordinator says: the token is pod iocurve-agent-0-zzzzz's, whose hostname is not iocurve-agent-2"
            ),
        "{log}"
    );
}
