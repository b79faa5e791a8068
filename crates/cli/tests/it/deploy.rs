//! `iocurve deploy kubernetes`: the manifests validate against the Kubernetes API schemas
//! (kubernetes-validate, offline, strict), `deploy/kubernetes/` is what this binary renders, and
//! the ports, labels, paths and options in them are the binary's own.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::util::{bin, input_error, iocurve, stderr, stdout};

const PYTHON: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/pyvenv/bin/python");
const COMMITTED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/kubernetes");
const COMMITTED_INDEXED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/kubernetes-indexed");

fn python() -> &'static str {
    assert!(Path::new(PYTHON).exists(), "{PYTHON} is missing: scripts/test installs kubernetes-validate there");
    PYTHON
}

/// Every document of a YAML file, as JSON (PyYAML, as kubectl's users read them).
fn documents(file: &Path) -> Vec<Value> {
    let o = Command::new(python())
        .args(["-c", "import sys, json, yaml\nprint(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))"])
        .arg(file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap()
}

fn validate(dir: &Path) {
    validate_for(dir, &["1.27.0", "1.30.0"]);
}

fn validate_for(dir: &Path, versions: &[&str]) {
    let files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 3, "{files:?}");
    for k8s in versions {
        let o = Command::new(python())
            .args(["-m", "kubernetes_validate", "--strict", "--quiet", "-k", k8s])
            .args(&files)
            .output()
            .unwrap();
        assert!(o.status.success(), "Kubernetes {k8s}: {}{}", stdout(&o), stderr(&o));
    }
}

fn kind<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter().find(|d| d["kind"] == kind).unwrap_or_else(|| panic!("a {kind}"))
}

/// Every document of a kind.
fn all<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

/// The object of that kind and name.
fn named<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("the {kind} {name}"))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect()
}

/// The long options a command's `--help` lists.
fn help_flags(command: &str) -> Vec<String> {
    let o = Command::new(bin()).args([command, "--help"]).output().unwrap();
    stdout(&o)
        .split(|c: char| c.is_whitespace() || c == ',' || c == '=' || c == '[' || c == '<')
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(String::from)
        .collect()
}

/// The value after `flag` in an argument list.
fn arg<'a>(args: &'a [String], flag: &str) -> &'a str {
    let i = args.iter().position(|a| a == flag).unwrap_or_else(|| panic!("{flag} in {args:?}"));
    &args[i + 1]
}

#[test]
fn the_committed_manifests_are_what_this_binary_renders_and_they_validate() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("k8s");
    let o = iocurve(dir.path(), &["deploy", "kubernetes", "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    for name in ["namespace.yaml", "agents.yaml", "coordinator.yaml"] {
        let rendered = std::fs::read_to_string(out.join(name)).unwrap();
        let committed = std::fs::read_to_string(Path::new(COMMITTED).join(name)).unwrap_or_default();
        assert!(
            rendered == committed,
            "deploy/kubernetes/{name} differs from what this binary renders: run `iocurve deploy kubernetes -o deploy/kubernetes`"
        );
    }
    validate(&out);
    // Host devices instead of volumes, another namespace and size: valid too.
    let other = dir.path().join("other");
    let o = iocurve(
        dir.path(),
        &[
            "deploy",
            "kubernetes",
            "-o",
            other.to_str().unwrap(),
            "--namespace",
            "bench",
            "--agents",
            "16",
            "--host-device",
            "/dev/nvme1n1",
            "--host-device",
            "/dev/nvme2n1",
            "--storage-class",
            "fast",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    validate(&other);
    let docs = documents(&other.join("agents.yaml"));
    let sets = all(&docs, "StatefulSet");
    assert_eq!(sets.len(), 16, "one StatefulSet per agent");
    for sts in sets {
        let pod = &sts["spec"]["template"]["spec"];
        let c = &pod["containers"][0];
        assert_eq!(c["securityContext"]["privileged"], false, "host devices come from the device plugin");
        assert!(pod["volumes"].as_array().unwrap().iter().all(|v| v["hostPath"].is_null()), "no hostPath");
        for d in ["nvme1n1", "nvme2n1"] {
            assert_eq!(c["resources"]["limits"][format!("squat.ai/{d}")], 1, "the device plugin's resource");
        }
        assert!(
            pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"].is_array(),
            "one agent per node: two would share the node's devices"
        );
        let allowed: Vec<String> =
            strings(&c["args"]).windows(2).filter(|w| w[0] == "--allow").map(|w| w[1].clone()).collect();
        assert_eq!(allowed, ["/dev/nvme1n1", "/dev/nvme2n1"], "the agent allows exactly the named devices");
        assert!(sts["spec"]["volumeClaimTemplates"].is_null(), "no volume: the devices");
    }
    let ns = documents(&other.join("namespace.yaml"));
    assert_eq!(ns[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "baseline", "nothing privileged");
}

#[test]
fn the_manifests_use_the_binarys_own_options_ports_and_paths() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("k8s");
    let o = iocurve(dir.path(), &["deploy", "kubernetes", "-o", out.to_str().unwrap(), "--agents", "3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let agents = documents(&out.join("agents.yaml"));
    let (svc, sts) = (kind(&agents, "Service"), kind(&agents, "StatefulSet"));
    assert_eq!(all(&agents, "StatefulSet").len(), 3, "one StatefulSet per agent");
    let pod = &sts["spec"]["template"];
    let c = &pod["spec"]["containers"][0];
    let args = strings(&c["args"]);
    assert_eq!(args[0], "agent");
    // Every option the manifest gives the agent is one `iocurve agent --help` lists.
    let known = help_flags("agent");
    for a in args.iter().filter(|a| a.starts_with("--")) {
        assert!(known.contains(a), "{a} is not an option of `iocurve agent`: {known:?}");
    }
    // Ports: what the agent listens on is the container's, the Service's and the annotation's.
    let port = |v: &str| v.rsplit(':').next().unwrap().parse::<u64>().unwrap();
    let listen = port(arg(&args, "--listen"));
    let metrics = port(arg(&args, "--metrics"));
    let container_port = |name: &str| {
        c["ports"].as_array().unwrap().iter().find(|p| p["name"] == name).unwrap()["containerPort"].clone()
    };
    assert_eq!(container_port("agent"), listen);
    assert_eq!(container_port("metrics"), metrics);
    let svc_port = |name: &str| {
        svc["spec"]["ports"].as_array().unwrap().iter().find(|p| p["name"] == name).unwrap()["port"].clone()
    };
    assert_eq!(svc_port("agent"), listen);
    assert_eq!(pod["metadata"]["annotations"]["prometheus.io/port"], metrics.to_string());
    // Labels: the Service selects every agent's pod, each StatefulSet its own.
    for (k, v) in svc["spec"]["selector"].as_object().unwrap() {
        assert_eq!(&pod["metadata"]["labels"][k], v, "{k}");
    }
    assert_eq!(sts["spec"]["selector"]["matchLabels"], pod["metadata"]["labels"]);
    assert_eq!(sts["spec"]["serviceName"], svc["metadata"]["name"]);
    assert_eq!(svc["spec"]["clusterIP"], "None", "headless: a DNS name per pod");
    // Paths: the credentials the options name are in the Secret's volume, read-only for others.
    let mount = |name: &str| {
        c["volumeMounts"].as_array().unwrap().iter().find(|m| m["name"] == name).unwrap()["mountPath"]
            .as_str()
            .unwrap()
            .to_string()
    };
    for flag in ["--token-file", "--tls-cert", "--tls-key", "--client-ca"] {
        assert!(arg(&args, flag).starts_with(&format!("{}/", mount("credentials"))), "{flag}");
    }
    assert!(arg(&args, "--metrics-token-file").starts_with(&format!("{}/", mount("metrics-token"))));
    assert_eq!(arg(&args, "--state-dir"), mount("state"));
    let secret = pod["spec"]["volumes"].as_array().unwrap().iter().find(|v| v["name"] == "credentials").unwrap();
    assert_eq!(secret["secret"]["defaultMode"], 0o400, "a token others may read is refused");
    // The agent is allowed exactly its raw block volume, and the volume is Block.
    let device = c["volumeDevices"][0]["devicePath"].as_str().unwrap();
    assert_eq!(arg(&args, "--allow"), device);
    assert_eq!(sts["spec"]["volumeClaimTemplates"][0]["spec"]["volumeMode"], "Block");
    assert_eq!(c["securityContext"]["privileged"], false, "a volume needs no privilege");
    let ns = documents(&out.join("namespace.yaml"));
    assert_eq!(ns[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "baseline");

    // The coordinator: its options are `run`'s, it dials every pod on the agents' port, and it
    // runs the plan of the ConfigMap, whose targets are the agents' device.
    let coord = documents(&out.join("coordinator.yaml"));
    let job = &kind(&coord, "Job")["spec"]["template"]["spec"];
    let cargs = strings(&job["containers"][0]["args"]);
    assert_eq!(cargs[0], "run");
    let known = help_flags("run");
    for a in cargs.iter().filter(|a| a.starts_with("--")) {
        assert!(known.contains(a), "{a} is not an option of `iocurve run`");
    }
    let hosts: Vec<&str> = arg(&cargs, "--hosts").split(',').collect();
    assert_eq!(hosts.len(), 3);
    for (i, h) in hosts.iter().enumerate() {
        assert_eq!(*h, format!("iocurve-agent-{i}-0.iocurve-agent.iocurve.svc:{listen}"));
    }
    let plan_text = kind(&coord, "ConfigMap")["data"]["plan.toml"].as_str().unwrap().to_string();
    std::fs::write(dir.path().join("plan.toml"), &plan_text).unwrap();
    assert!(plan_text.contains(&format!("targets = [\"{device}\"]")), "{plan_text}");
    // `iocurve run` reads that plan (it stops at the agents' credentials, not at the plan).
    let o = iocurve(dir.path(), &["run", "plan.toml", "--hosts", "127.0.0.1:1"]);
    assert!(stderr(&o).contains("--token-file"), "the plan parsed: {}", stderr(&o));
}

/// Every container of a pod spec, init containers first.
fn containers(pod: &Value) -> Vec<&Value> {
    let list = |k: &str| pod[k].as_array().map(|a| a.iter().collect::<Vec<_>>()).unwrap_or_default();
    [list("initContainers"), list("containers")].concat()
}

/// Whether `selector` (matchLabels) selects a pod with `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    let m = selector["matchLabels"].as_object().unwrap();
    !m.is_empty() && m.iter().all(|(k, v)| &labels[k] == v)
}

/// Regression test for issue 35, finding 7: the manifests had no NetworkPolicy (the agent and
/// metrics ports open to every pod), metrics without a token, the service-account token
/// mounted, the coordinator as root, no requests or limits, one agent certificate and token
/// shared by every pod, and `--host-device` made the agent privileged. Checked on the parsed
/// objects of two renderings (a volume each; host devices with another scraper), both valid
/// for the API (the test above validates the same options' kinds).
#[test]
fn regression_the_manifests_pass_a_security_review() {
    let dir = tempfile::tempdir().unwrap();
    for (name, extra) in [
        ("volumes", vec![]),
        (
            "devices",
            vec![
                "--host-device",
                "/dev/nvme1n1",
                "--scraper-namespace",
                "obs",
                "--scraper-labels",
                "app=prom,team=storage",
            ],
        ),
    ] {
        let out = dir.path().join(name);
        let mut a = vec!["deploy", "kubernetes", "-o", out.to_str().unwrap(), "--agents", "3"];
        a.extend(extra.iter().copied());
        let o = iocurve(dir.path(), &a);
        assert!(o.status.success(), "{}", stderr(&o));
        validate(&out);
        let (scraper_ns, scraper): (&str, Value) = if name == "volumes" {
            ("monitoring", serde_json::json!({"app.kubernetes.io/name": "prometheus"}))
        } else {
            ("obs", serde_json::json!({"app": "prom", "team": "storage"}))
        };
        let agents = documents(&out.join("agents.yaml"));
        let coord = documents(&out.join("coordinator.yaml"));
        let job = &kind(&coord, "Job")["spec"]["template"];
        let job_labels = &job["metadata"]["labels"];
        let sets = all(&agents, "StatefulSet");
        assert_eq!(sets.len(), 3);

        // NetworkPolicy of the agents: selects every agent pod, denies egress, and admits the
        // agent port from the coordinator's pods only and the metrics port from the scraper only.
        let policy = named(&agents, "NetworkPolicy", "iocurve-agent");
        let p = &policy["spec"];
        assert_eq!(p["policyTypes"], serde_json::json!(["Ingress", "Egress"]));
        assert!(p["egress"].is_null(), "agents open no connection");
        let rules = p["ingress"].as_array().unwrap();
        assert_eq!(rules.len(), 2, "{rules:?}");
        let port_of = |r: &Value| {
            let ports = r["ports"].as_array().unwrap();
            assert_eq!(ports.len(), 1, "{r:?}");
            ports[0]["port"].as_u64().unwrap()
        };
        let from = |r: &Value| {
            let f = r["from"].as_array().unwrap();
            assert_eq!(f.len(), 1, "one peer: {r:?}");
            f[0].clone()
        };
        let agent_rule = rules.iter().find(|r| port_of(r) == 7420).expect("a rule for the agent port");
        let peer = from(agent_rule);
        assert!(peer["namespaceSelector"].is_null(), "this namespace only");
        assert!(selects(&peer["podSelector"], job_labels), "the coordinator's pods");
        let metrics_rule = rules.iter().find(|r| port_of(r) == 9464).expect("a rule for the metrics port");
        let peer = from(metrics_rule);
        assert_eq!(
            peer["namespaceSelector"]["matchLabels"],
            serde_json::json!({"kubernetes.io/metadata.name": scraper_ns})
        );
        assert_eq!(peer["podSelector"]["matchLabels"], scraper);

        // NetworkPolicy of the coordinator: nothing in; out only DNS and the agents' port.
        let cp = &named(&coord, "NetworkPolicy", "iocurve-coordinator")["spec"];
        assert!(selects(&cp["podSelector"], job_labels));
        assert_eq!(cp["policyTypes"], serde_json::json!(["Ingress", "Egress"]));
        assert!(cp["ingress"].is_null(), "nothing connects to the coordinator");
        let egress = cp["egress"].as_array().unwrap();
        assert_eq!(egress.len(), 2);
        assert!(egress[0]["to"].is_null() && egress[0]["ports"].as_array().unwrap().iter().all(|p| p["port"] == 53));
        assert_eq!(egress[1]["ports"][0]["port"], 7420);

        let mut hosts_from_pods = Vec::new();
        for (i, sts) in sets.iter().enumerate() {
            let pod = &sts["spec"]["template"];
            assert!(selects(&p["podSelector"], &pod["metadata"]["labels"]), "the policy covers agent {i}");
            assert!(!selects(&p["podSelector"], job_labels), "and not the coordinator");
            let spec = &pod["spec"];
            assert_eq!(spec["automountServiceAccountToken"], false, "no API token in agent {i}");
            assert_eq!(spec["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
            let c = &spec["containers"][0];
            let sc = &c["securityContext"];
            assert_eq!(sc["privileged"], false);
            assert_eq!(sc["allowPrivilegeEscalation"], false);
            assert_eq!(sc["readOnlyRootFilesystem"], true);
            assert_eq!(sc["capabilities"], serde_json::json!({"drop": ["ALL"]}), "no capability, none added");
            for k in ["requests", "limits"] {
                assert_eq!(c["resources"][k]["cpu"], "2", "{k}");
                assert_eq!(c["resources"][k]["memory"], "2Gi", "{k}");
            }
            // Metrics behind a token of its own Secret, private to the agent.
            let args = strings(&c["args"]);
            assert_eq!(arg(&args, "--metrics-token-file"), "/etc/iocurve/metrics/token");
            let volume = |n: &str| spec["volumes"].as_array().unwrap().iter().find(|v| v["name"] == n).unwrap().clone();
            assert_eq!(volume("metrics-token")["secret"]["secretName"], "iocurve-metrics");
            assert_eq!(volume("metrics-token")["secret"]["defaultMode"], 0o400);
            // Its own certificate and token: a Secret named for it, mounted by it alone.
            assert_eq!(sts["spec"]["replicas"], 1, "one pod: one Secret");
            assert_eq!(volume("credentials")["secret"]["secretName"], format!("iocurve-agent-{i}"));
            hosts_from_pods.push(format!(
                "{}-0.{}.{}.svc:7420",
                sts["metadata"]["name"].as_str().unwrap(),
                sts["spec"]["serviceName"].as_str().unwrap(),
                sts["metadata"]["namespace"].as_str().unwrap()
            ));
        }

        // The coordinator dials exactly those pods, each with its own token, and checks each
        // certificate against the name it dialled (no shared --tls-name).
        let spec = &job["spec"];
        let cargs = strings(&spec["containers"][0]["args"]);
        assert_eq!(arg(&cargs, "--hosts").split(',').collect::<Vec<_>>(), hosts_from_pods);
        assert!(cargs.contains(&"--token-per-host".to_string()));
        assert!(!cargs.contains(&"--tls-name".to_string()), "each agent proves its own name");
        // Not root, in every container, init container included.
        assert_eq!(spec["automountServiceAccountToken"], false);
        let psc = &spec["securityContext"];
        assert_eq!(psc["runAsNonRoot"], true);
        assert!(psc["runAsUser"].as_u64().unwrap() > 0 && psc["runAsGroup"].as_u64().unwrap() > 0);
        assert_eq!(psc["seccompProfile"]["type"], "RuntimeDefault");
        let all_containers = containers(spec);
        assert_eq!(all_containers.len(), 2, "the credentials copy and the coordinator");
        for c in all_containers {
            let sc = &c["securityContext"];
            assert!(sc["runAsUser"].is_null() || sc["runAsUser"].as_u64() != Some(0), "{c:?}");
            assert_eq!(sc["runAsNonRoot"], true);
            assert_eq!(sc["allowPrivilegeEscalation"], false);
            assert_eq!(sc["readOnlyRootFilesystem"], true);
            assert_eq!(sc["capabilities"], serde_json::json!({"drop": ["ALL"]}));
            for k in ["requests", "limits"] {
                assert!(c["resources"][k]["cpu"].is_string() && c["resources"][k]["memory"].is_string(), "{k}: {c:?}");
            }
        }
        // Nothing anywhere is privileged or reaches into the node.
        for f in ["namespace.yaml", "agents.yaml", "coordinator.yaml"] {
            let text = std::fs::read_to_string(out.join(f)).unwrap();
            for banned in ["privileged: true", "hostPath", "hostNetwork", "hostPID", "hostIPC"] {
                assert!(!text.contains(banned), "{f} says {banned}");
            }
        }
    }
}

/// The coordinator's init container copies its Secret so that the non-root coordinator can read
/// its token: run its own command (the paths moved into a temporary directory) on files as a
/// Secret with fsGroup leaves them (0440), and the copies are what `iocurve run` accepts.
#[test]
fn the_coordinators_credentials_copy_is_what_iocurve_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("k8s");
    let o = iocurve(dir.path(), &["deploy", "kubernetes", "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let coord = documents(&out.join("coordinator.yaml"));
    let init = &kind(&coord, "Job")["spec"]["template"]["spec"]["initContainers"][0];
    let command = strings(&init["command"]);
    let mount = |n: &str| {
        init["volumeMounts"].as_array().unwrap().iter().find(|m| m["name"] == n).unwrap()["mountPath"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (secret, creds) = (dir.path().join("secret"), dir.path().join("creds"));
    std::fs::create_dir(&secret).unwrap();
    std::fs::create_dir(&creds).unwrap();
    let o = iocurve(dir.path(), &["certs", "init", "certs"]);
    assert!(o.status.success(), "{}", stderr(&o));
    for f in ["ca.pem", "client.pem", "client.key", "token"] {
        let p = secret.join(f);
        std::fs::copy(dir.path().join("certs").join(f), &p).unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o440)).unwrap();
    }
    // The Secret as mounted is refused: group-readable.
    let o =
        iocurve(dir.path(), &["run", "--hosts", "127.0.0.1:1", "--token-file", secret.join("token").to_str().unwrap()]);
    input_error(&o, &["may be read by other users"]);
    let script = command
        .last()
        .unwrap()
        .replace(&mount("secret"), secret.to_str().unwrap())
        .replace(&mount("credentials"), creds.to_str().unwrap());
    let o = Command::new(&command[0]).args(&command[1..command.len() - 1]).arg(&script).output().unwrap();
    assert!(o.status.success(), "{script}: {}", stderr(&o));
    for f in ["ca.pem", "client.pem", "client.key", "token"] {
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(creds.join(f)).unwrap().permissions());
        assert_eq!(mode & 0o777, 0o400, "{f}");
    }
    // The copies are what the coordinator's options name, and they pass every check: the run
    // gets as far as dialling its agent (none listens there).
    let cargs = strings(&kind(&coord, "Job")["spec"]["template"]["spec"]["containers"][0]["args"]);
    let copy = |flag: &str| creds.join(Path::new(arg(&cargs, flag)).file_name().unwrap()).to_str().unwrap().to_string();
    let (token, ca, cert, key) = (copy("--token-file"), copy("--ca"), copy("--client-cert"), copy("--client-key"));
    let o = iocurve(
        dir.path(),
        &[
            "run",
            "--suite",
            "quick",
            "--hosts",
            "127.0.0.1:1",
            "--token-per-host",
            "--tls-name",
            "iocurve-agent",
            "--token-file",
            &token,
            "--ca",
            &ca,
            "--client-cert",
            &cert,
            "--client-key",
            &key,
        ],
    );
    assert!(stderr(&o).contains("cannot reach agent 127.0.0.1:1"), "{}", stderr(&o));
}

/// The README's loop makes each agent's Secret from `certs add-host` with the name the
/// coordinator dials: for every host of the Job's `--hosts`, that works, and gives every file the
/// agent's options name in its Secret's mount (ca.pem from the certificate directory).
#[test]
fn each_agent_pods_secret_is_made_by_certs_add_host_for_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("k8s");
    let o = iocurve(dir.path(), &["deploy", "kubernetes", "-o", out.to_str().unwrap(), "--agents", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = iocurve(dir.path(), &["certs", "init", "certs"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let coord = documents(&out.join("coordinator.yaml"));
    let cargs = strings(&kind(&coord, "Job")["spec"]["template"]["spec"]["containers"][0]["args"]);
    let agents = documents(&out.join("agents.yaml"));
    for (i, addr) in arg(&cargs, "--hosts").split(',').enumerate() {
        let host = addr.rsplit_once(':').unwrap().0;
        let o = iocurve(dir.path(), &["certs", "add-host", "certs", host]);
        assert!(o.status.success(), "{host}: {}", stderr(&o));
        let sts = named(&agents, "StatefulSet", &format!("iocurve-agent-{i}"));
        let args = strings(&sts["spec"]["template"]["spec"]["containers"][0]["args"]);
        for flag in ["--token-file", "--tls-cert", "--tls-key", "--client-ca"] {
            let file = Path::new(arg(&args, flag)).file_name().unwrap();
            let from =
                if file == "ca.pem" { dir.path().join("certs") } else { dir.path().join("certs/hosts").join(host) };
            assert!(from.join(file).is_file(), "{flag}: {}", from.join(file).display());
        }
    }
}

/// `--indexed` (issue 46): one Indexed Job of agents with no Secret of theirs, enrolled by their
/// pods' tokens; valid for Kubernetes 1.30 and 1.33 (`backoffLimitPerIndex` is 1.29's), the
/// committed rendering is this binary's, and names, ports, paths and options agree.
#[test]
fn the_indexed_job_manifests_validate_and_agree_with_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("k8s");
    let o = iocurve(dir.path(), &["deploy", "kubernetes", "--indexed", "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("the ConfigMaps iocurve-coordinator-ca and iocurve-cluster-keys"), "{}", stdout(&o));
    for name in ["namespace.yaml", "agents.yaml", "coordinator.yaml"] {
        let rendered = std::fs::read_to_string(out.join(name)).unwrap();
        let committed = std::fs::read_to_string(Path::new(COMMITTED_INDEXED).join(name)).unwrap_or_default();
        assert!(
            rendered == committed,
            "deploy/kubernetes-indexed/{name} differs from what this binary renders: run `iocurve deploy kubernetes --indexed -o deploy/kubernetes-indexed`"
        );
    }
    validate_for(&out, &["1.30.0", "1.33.0"]);
    let big = dir.path().join("big");
    let o = iocurve(
        dir.path(),
        &[
            "deploy",
            "kubernetes",
            "--indexed",
            "--agents",
            "1000",
            "--relay-every",
            "32",
            "--namespace",
            "lab",
            "--pod-issuer",
            "https://oidc.example",
            "-o",
            big.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    validate_for(&big, &["1.30.0"]);
    let agents = documents(&big.join("agents.yaml"));
    let (svc, job, sa) = (
        named(&agents, "Service", "iocurve-agent"),
        named(&agents, "Job", "iocurve-agent"),
        kind(&agents, "ServiceAccount"),
    );
    assert_eq!(all(&agents, "Job").len(), 2, "one object for every agent, one for every relay");
    let spec = &job["spec"];
    assert_eq!(
        (spec["completionMode"].as_str(), spec["completions"].as_u64(), spec["parallelism"].as_u64()),
        (Some("Indexed"), Some(1000), Some(1000))
    );
    assert_eq!(spec["backoffLimitPerIndex"], 0, "a failed pod is not started again");
    assert_eq!(spec["maxFailedIndexes"], 1000, "and the others go on");
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never");
    assert_eq!(pod["subdomain"], svc["metadata"]["name"], "pod I is iocurve-agent-I under the Service");
    assert_eq!(pod["serviceAccountName"], sa["metadata"]["name"]);
    assert_eq!(pod["automountServiceAccountToken"], false);
    for (k, v) in svc["spec"]["selector"].as_object().unwrap() {
        assert_eq!(&spec["template"]["metadata"]["labels"][k], v, "{k}");
    }
    // No Secret but the scrapers' read-only token; the pod's token for the audience iocurve.
    let volumes = pod["volumes"].as_array().unwrap();
    let secrets: Vec<&str> = volumes.iter().filter_map(|v| v["secret"]["secretName"].as_str()).collect();
    assert_eq!(secrets, ["iocurve-metrics"]);
    let token = volumes.iter().find(|v| v["name"] == "pod-token").unwrap();
    let projected = &token["projected"]["sources"][0]["serviceAccountToken"];
    assert_eq!(projected["audience"], "iocurve");
    let data = volumes.iter().find(|v| v["name"] == "data").unwrap();
    assert_eq!(data["ephemeral"]["volumeClaimTemplate"]["spec"]["volumeMode"], "Block", "a raw block volume per pod");
    let c = &pod["containers"][0];
    let args = strings(&c["args"]);
    let known = help_flags("agent");
    for a in args.iter().filter(|a| a.starts_with("--")) {
        assert!(known.contains(a), "{a} is not an option of `iocurve agent`: {known:?}");
    }
    let mount = |name: &str| {
        c["volumeMounts"].as_array().unwrap().iter().find(|m| m["name"] == name).unwrap()["mountPath"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(arg(&args, "--enrol"), format!("{}/{}", mount("pod-token"), projected["path"].as_str().unwrap()));
    assert!(arg(&args, "--client-ca").starts_with(&format!("{}/", mount("coordinator-ca"))));
    assert_eq!(arg(&args, "--allow"), c["volumeDevices"][0]["devicePath"].as_str().unwrap());
    // The coordinator dials exactly the pods' names, at the agents' port, with the keys mounted.
    let coordinator = documents(&big.join("coordinator.yaml"));
    let cjob = named(&coordinator, "Job", "iocurve-coordinator");
    let cc = &cjob["spec"]["template"]["spec"]["containers"][0];
    let cargs = strings(&cc["args"]);
    let known = help_flags("run");
    for a in cargs.iter().filter(|a| a.starts_with("--")) {
        assert!(known.contains(a), "{a} is not an option of `iocurve run`: {known:?}");
    }
    assert_eq!(arg(&cargs, "--launch"), "pods");
    assert_eq!(arg(&cargs, "--hosts"), "iocurve-agent-[0-999].iocurve-agent.lab.svc");
    // 32 relays of up to 32 agents (the last of 8): their Job, their names, the rules that let
    // the coordinator reach them and them the agents, and nothing else.
    let relay = named(&agents, "Job", "iocurve-relay");
    assert_eq!(relay["spec"]["completions"], 32);
    let relay_pod = &relay["spec"]["template"]["spec"];
    assert_eq!(relay_pod["subdomain"], named(&agents, "Service", "iocurve-relay")["metadata"]["name"]);
    assert_eq!(relay_pod["securityContext"]["runAsNonRoot"], true, "a relay opens no device");
    let rargs = strings(&relay_pod["containers"][0]["args"]);
    assert!(rargs.contains(&"--relay".to_string()) && !rargs.contains(&"--allow".to_string()), "{rargs:?}");
    assert_eq!(
        (arg(&cargs, "--relay-every"), arg(&cargs, "--relays")),
        ("32", "iocurve-relay-[0-31].iocurve-relay.lab.svc")
    );
    let component =
        |peer: &Value| peer["podSelector"]["matchLabels"]["app.kubernetes.io/component"].as_str().map(String::from);
    let peers = |v: &Value| v.as_array().unwrap().iter().map(component).collect::<Vec<_>>();
    let agent_in = peers(&named(&agents, "NetworkPolicy", "iocurve-agent")["spec"]["ingress"][0]["from"]);
    assert_eq!(agent_in, [Some("coordinator".into()), Some("relay".into())]);
    let relay_policy = &named(&agents, "NetworkPolicy", "iocurve-relay")["spec"];
    assert_eq!(peers(&relay_policy["ingress"][0]["from"]), [Some("coordinator".into())]);
    assert_eq!(peers(&relay_policy["egress"][1]["to"]), [Some("agent".into())]);
    let coordinator_out =
        peers(&named(&coordinator, "NetworkPolicy", "iocurve-coordinator")["spec"]["egress"][1]["to"]);
    assert_eq!(coordinator_out, [Some("agent".into()), Some("relay".into())]);
    assert_eq!(arg(&cargs, "--launch-port"), arg(&args, "--listen").rsplit(':').next().unwrap());
    assert_eq!(arg(&cargs, "--pod-issuer"), "https://oidc.example");
    let keys_at =
        cc["volumeMounts"].as_array().unwrap().iter().find(|m| m["name"] == "cluster-keys").unwrap()["mountPath"]
            .as_str()
            .unwrap()
            .to_string();
    assert!(arg(&cargs, "--pod-keys").starts_with(&format!("{keys_at}/")));
    assert_eq!(cc["resources"]["limits"]["cpu"], "1", "a thousand agents: one core (two above)");
    // The plan and the options are checked: too many agents, or an issuer that is no URL.
    for (extra, says) in [
        (&["--agents", "5000"][..], "give 1 to 4096"),
        (&["--pod-issuer", "kubernetes"][..], "an https:// URL"),
        (&["--relay-every", "32"][..], "4 agents make one group"),
    ] {
        let mut a = vec!["deploy", "kubernetes", "--indexed"];
        a.extend_from_slice(extra);
        let o = iocurve(dir.path(), &a);
        assert_eq!(o.status.code(), Some(2), "{extra:?}");
        assert!(stderr(&o).contains(says), "{}", stderr(&o));
    }
    let o = iocurve(dir.path(), &["deploy", "kubernetes", "--agents", "600"]);
    assert!(stderr(&o).contains("more as one Indexed Job: --indexed"), "{}", stderr(&o));
}
