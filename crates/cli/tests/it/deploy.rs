//! `iocurve deploy kubernetes`: the manifests validate against the Kubernetes API schemas
//! (kubernetes-validate, offline, strict), `deploy/kubernetes/` is what this binary renders, and
//! the ports, labels, paths and options in them are the binary's own.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::util::{bin, iocurve, stderr, stdout};

const PYTHON: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/pyvenv/bin/python");
const COMMITTED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/kubernetes");

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
    let files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 3, "{files:?}");
    for k8s in ["1.27.0", "1.30.0"] {
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
    let pod = &kind(&docs, "StatefulSet")["spec"]["template"]["spec"];
    assert_eq!(pod["containers"][0]["securityContext"]["privileged"], true, "host devices need it");
    assert!(
        pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"].is_array(),
        "one agent per node: two would share the node's devices"
    );
    let ns = documents(&other.join("namespace.yaml"));
    assert_eq!(ns[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "privileged");
    let allowed: Vec<String> =
        strings(&pod["containers"][0]["args"]).windows(2).filter(|w| w[0] == "--allow").map(|w| w[1].clone()).collect();
    assert_eq!(allowed, ["/dev/nvme1n1", "/dev/nvme2n1"], "the agent allows exactly the named devices");
}

#[test]
fn the_manifests_use_the_binarys_own_options_ports_and_paths() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("k8s");
    let o = iocurve(dir.path(), &["deploy", "kubernetes", "-o", out.to_str().unwrap(), "--agents", "3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let agents = documents(&out.join("agents.yaml"));
    let (svc, sts) = (kind(&agents, "Service"), kind(&agents, "StatefulSet"));
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
    // Labels: the Service and the StatefulSet select the pods the template makes.
    assert_eq!(svc["spec"]["selector"], pod["metadata"]["labels"]);
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
    assert_eq!(arg(&args, "--state-dir"), mount("state"));
    let secret = pod["spec"]["volumes"].as_array().unwrap().iter().find(|v| v["name"] == "credentials").unwrap();
    assert_eq!(secret["secret"]["defaultMode"], 0o400, "a token others may read is refused");
    // The agent is allowed exactly its raw block volume, and the volume is Block.
    let device = c["volumeDevices"][0]["devicePath"].as_str().unwrap();
    assert_eq!(arg(&args, "--allow"), device);
    assert_eq!(sts["spec"]["volumeClaimTemplates"][0]["spec"]["volumeMode"], "Block");
    assert!(c["securityContext"]["privileged"].is_null(), "a volume needs no privilege");
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
        assert_eq!(*h, format!("iocurve-agent-{i}.iocurve-agent.iocurve.svc:{listen}"));
    }
    let plan_text = kind(&coord, "ConfigMap")["data"]["plan.toml"].as_str().unwrap().to_string();
    std::fs::write(dir.path().join("plan.toml"), &plan_text).unwrap();
    assert!(plan_text.contains(&format!("targets = [\"{device}\"]")), "{plan_text}");
    // `iocurve run` reads that plan (it stops at the agents' credentials, not at the plan).
    let o = iocurve(dir.path(), &["run", "plan.toml", "--hosts", "127.0.0.1:1"]);
    assert!(stderr(&o).contains("--token-file"), "the plan parsed: {}", stderr(&o));
}
