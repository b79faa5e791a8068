//! `iocurve deploy kubernetes`: the Kubernetes manifests for this binary — agents as a
//! StatefulSet behind a headless Service, each on a raw block volume of its own (no privilege)
//! or on host devices named one by one (privileged: plain Kubernetes has no finer grant for a
//! host's device), and the coordinator as a Job that writes its results database to a volume.
//! Rendered here, from the options and the constants the binary itself uses, so that ports,
//! labels and the agent's options cannot drift from it; `deploy/kubernetes/` holds the default
//! rendering, and a test checks that it is what this binary renders.

use std::fmt::Write as _;
use std::path::Path;

use crate::CliError;

/// The port agents listen on in the manifests (and the README's examples).
pub const AGENT_PORT: u16 = 7420;
/// The port of their live metrics (`--metrics`), annotated for Prometheus.
pub const METRICS_PORT: u16 = 9464;
/// Where an agent's raw block volume appears in its container, and so the plan's target.
pub const DEVICE_PATH: &str = "/dev/iocurve-data";
const AGENT_CREDENTIALS: &str = "/etc/iocurve/agent";
const COORDINATOR_CREDENTIALS: &str = "/etc/iocurve/coordinator";
const STATE_DIR: &str = "/var/lib/iocurve";
const PLAN_DIR: &str = "/etc/iocurve/plan";
const RESULTS_DIR: &str = "/results";

/// What the manifests are made for.
#[derive(Clone, Debug)]
pub struct K8sOptions {
    pub namespace: String,
    pub agents: u32,
    pub image: String,
    /// Size of each agent's raw block volume (a Kubernetes quantity: 100Gi).
    pub volume_size: String,
    pub storage_class: Option<String>,
    /// Host block devices instead of a volume, each by its path.
    pub host_devices: Vec<String>,
}

impl From<&crate::cli::K8sArgs> for K8sOptions {
    fn from(a: &crate::cli::K8sArgs) -> K8sOptions {
        K8sOptions {
            namespace: a.namespace.clone(),
            agents: a.agents,
            image: a.image.clone(),
            volume_size: a.volume_size.clone(),
            storage_class: a.storage_class.clone(),
            host_devices: a.host_devices.clone(),
        }
    }
}

impl K8sOptions {
    fn check(&self) -> Result<(), CliError> {
        let dns_label = |s: &str| {
            !s.is_empty()
                && s.len() <= 63
                && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !s.starts_with('-')
                && !s.ends_with('-')
        };
        if !dns_label(&self.namespace) {
            return Err(CliError::Usage(format!(
                "--namespace {}: a Kubernetes namespace is a DNS label (a-z, 0-9, -; at most 63)",
                self.namespace
            )));
        }
        if !(1..=512).contains(&self.agents) {
            return Err(CliError::Usage(format!("--agents {}: give 1 to 512", self.agents)));
        }
        if self.image.is_empty() || self.image.chars().any(char::is_whitespace) {
            return Err(CliError::Usage(format!("--image `{}` is not an image reference", self.image)));
        }
        let quantity = |q: &str| {
            let digits = q.trim_end_matches(|c: char| c.is_ascii_alphabetic());
            !digits.is_empty()
                && digits.bytes().all(|b| b.is_ascii_digit())
                && ["", "Ki", "Mi", "Gi", "Ti", "Pi", "k", "M", "G", "T", "P"].contains(&&q[digits.len()..])
        };
        if !quantity(&self.volume_size) {
            return Err(CliError::Usage(format!(
                "--volume-size {}: a Kubernetes quantity like 100Gi or 2Ti",
                self.volume_size
            )));
        }
        if let Some(sc) = &self.storage_class
            && !dns_label(sc.split('.').next().unwrap_or(""))
        {
            return Err(CliError::Usage(format!("--storage-class {sc}: not a storage class name")));
        }
        for d in &self.host_devices {
            if !d.starts_with("/dev/") || d.contains("..") || d.chars().any(|c| c.is_whitespace() || c == '"') {
                return Err(CliError::Usage(format!("--host-device {d}: a device path under /dev/")));
            }
        }
        Ok(())
    }

    /// The targets the agents use: their volume, or the host devices.
    fn targets(&self) -> Vec<String> {
        if self.host_devices.is_empty() { vec![DEVICE_PATH.to_string()] } else { self.host_devices.clone() }
    }
}

/// A string as a YAML scalar: JSON's double-quoted form, which YAML reads the same.
fn q(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

fn labels(component: &str, indent: usize) -> String {
    let pad = " ".repeat(indent);
    format!("{pad}app.kubernetes.io/name: iocurve\n{pad}app.kubernetes.io/component: {component}\n")
}

fn header(what: &str) -> String {
    format!(
        "# {what}\n# Rendered by `iocurve deploy kubernetes` (iocurve {}); render again with other options\n# (`iocurve deploy kubernetes --help`) rather than editing, so that it matches the binary.\n",
        env!("CARGO_PKG_VERSION")
    )
}

/// The agent's command line in its container.
pub fn agent_args(o: &K8sOptions) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "agent".into(),
        "--listen".into(),
        format!("0.0.0.0:{AGENT_PORT}"),
        "--token-file".into(),
        format!("{AGENT_CREDENTIALS}/token"),
        "--tls-cert".into(),
        format!("{AGENT_CREDENTIALS}/agent.pem"),
        "--tls-key".into(),
        format!("{AGENT_CREDENTIALS}/agent.key"),
        "--client-ca".into(),
        format!("{AGENT_CREDENTIALS}/ca.pem"),
        "--state-dir".into(),
        STATE_DIR.into(),
        "--metrics".into(),
        format!("0.0.0.0:{METRICS_PORT}"),
    ];
    for t in o.targets() {
        a.extend(["--allow".into(), t]);
    }
    a
}

/// The agents' addresses as the coordinator dials them: pod DNS names of the StatefulSet.
fn agent_hosts(o: &K8sOptions) -> String {
    (0..o.agents)
        .map(|i| format!("iocurve-agent-{i}.iocurve-agent.{}.svc:{AGENT_PORT}", o.namespace))
        .collect::<Vec<_>>()
        .join(",")
}

/// The coordinator's command line in its container.
pub fn coordinator_args(o: &K8sOptions) -> Vec<String> {
    vec![
        "run".into(),
        format!("{PLAN_DIR}/plan.toml"),
        "--hosts".into(),
        agent_hosts(o),
        "--ca".into(),
        format!("{COORDINATOR_CREDENTIALS}/ca.pem"),
        "--token-file".into(),
        format!("{COORDINATOR_CREDENTIALS}/token"),
        "--client-cert".into(),
        format!("{COORDINATOR_CREDENTIALS}/client.pem"),
        "--client-key".into(),
        format!("{COORDINATOR_CREDENTIALS}/client.key"),
        "--tls-name".into(),
        iocurve_net::certs::AGENT_NAME.into(),
        "--db".into(),
        format!("{RESULTS_DIR}/iocurve.db"),
        "--json".into(),
        format!("{RESULTS_DIR}/result.json"),
        // The Job may start before every agent pod is up.
        "--wait-for-agents-s".into(),
        "600".into(),
    ]
}

fn list(items: &[String], indent: usize) -> String {
    let pad = " ".repeat(indent);
    items.iter().map(|i| format!("{pad}- {}\n", q(i))).collect()
}

/// `agents.yaml`: the headless Service and the StatefulSet.
pub fn agents_yaml(o: &K8sOptions) -> String {
    let ns = &o.namespace;
    let mut y = header("iocurve agents: a StatefulSet behind a headless Service, one pod per node where possible.");
    let _ = write!(
        y,
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: iocurve-agent\n  namespace: {ns}\n  labels:\n{l4}spec:\n  clusterIP: None\n  publishNotReadyAddresses: true\n  selector:\n{l4}  ports:\n  - name: agent\n    port: {AGENT_PORT}\n    targetPort: agent\n  - name: metrics\n    port: {METRICS_PORT}\n    targetPort: metrics\n---\n",
        l4 = labels("agent", 4)
    );
    let _ = write!(
        y,
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: iocurve-agent\n  namespace: {ns}\n  labels:\n{l4}spec:\n  serviceName: iocurve-agent\n  replicas: {n}\n  podManagementPolicy: Parallel\n  selector:\n    matchLabels:\n{l6}  template:\n    metadata:\n      labels:\n{l8}      annotations:\n        # Live metrics of every step this agent runs (issue 18's exporter).\n        prometheus.io/scrape: \"true\"\n        prometheus.io/port: \"{METRICS_PORT}\"\n        prometheus.io/path: /metrics\n    spec:\n{affinity}      securityContext:\n        # The runtime's default profile; it may forbid io_uring, and the agent then runs psync\n        # and says so. A profile that allows io_uring_setup/enter/register lifts that.\n        seccompProfile:\n          type: RuntimeDefault\n      containers:\n      - name: agent\n        image: {image}\n        args:\n{args}        ports:\n        - name: agent\n          containerPort: {AGENT_PORT}\n        - name: metrics\n          containerPort: {METRICS_PORT}\n        readinessProbe:\n          tcpSocket:\n            port: agent\n          periodSeconds: 5\n",
        n = o.agents,
        l4 = labels("agent", 4),
        l6 = labels("agent", 6),
        l8 = labels("agent", 8),
        affinity = affinity(o),
        image = q(&o.image),
        args = list(&agent_args(o), 8),
    );
    if o.host_devices.is_empty() {
        // A raw block volume: the device node is the pod's own; no privilege is needed.
        let _ = write!(
            y,
            "        securityContext:\n          runAsUser: 0\n          allowPrivilegeEscalation: false\n          readOnlyRootFilesystem: true\n          capabilities:\n            drop: [\"ALL\"]\n        volumeDevices:\n        - name: data\n          devicePath: {dev}\n        volumeMounts:\n        - name: credentials\n          mountPath: {AGENT_CREDENTIALS}\n          readOnly: true\n        - name: state\n          mountPath: {STATE_DIR}\n",
            dev = q(DEVICE_PATH)
        );
    } else {
        // Host devices: plain Kubernetes grants a container a host's device only when it is
        // privileged; the agent still touches nothing but the devices on its --allow list.
        let _ = write!(
            y,
            "        securityContext:\n          privileged: true\n          readOnlyRootFilesystem: true\n        volumeMounts:\n        - name: credentials\n          mountPath: {AGENT_CREDENTIALS}\n          readOnly: true\n        - name: state\n          mountPath: {STATE_DIR}\n"
        );
        for (i, d) in o.host_devices.iter().enumerate() {
            let _ = write!(y, "        - name: device-{i}\n          mountPath: {}\n", q(d));
        }
    }
    let _ = write!(
        y,
        "      volumes:\n      - name: credentials\n        secret:\n          secretName: iocurve-agent\n          # 0400: the agent refuses a token file others may read.\n          defaultMode: 256\n      - name: state\n        emptyDir: {{}}\n"
    );
    for (i, d) in o.host_devices.iter().enumerate() {
        let _ = write!(
            y,
            "      - name: device-{i}\n        hostPath:\n          path: {}\n          type: BlockDevice\n",
            q(d)
        );
    }
    if o.host_devices.is_empty() {
        let _ = write!(
            y,
            "  volumeClaimTemplates:\n  - metadata:\n      name: data\n    spec:\n      accessModes: [\"ReadWriteOnce\"]\n      volumeMode: Block\n{class}      resources:\n        requests:\n          storage: {size}\n",
            class = o.storage_class.as_ref().map(|c| format!("      storageClassName: {}\n", q(c))).unwrap_or_default(),
            size = q(&o.volume_size)
        );
    }
    y
}

/// The plan the coordinator runs: random 4k reads and writes, then sequential 1m, on the
/// agents' targets, ramped.
fn plan_toml(o: &K8sOptions) -> String {
    let targets: Vec<String> = o.targets().iter().map(|t| q(t)).collect();
    format!(
        "# Edit the workloads; every agent runs them on its own targets at once.\ntargets = [{}]\n\n[[workloads]]\nname = \"random-read-4k\"\nread_pct = 100\nbs = \"4k\"\nramp = [1, 2, 4, 8, 16, 32]\n\n[[workloads]]\nname = \"random-write-4k\"\nread_pct = 0\nbs = \"4k\"\nramp = [1, 2, 4, 8, 16, 32]\n\n[[workloads]]\nname = \"sequential-read-1m\"\nread_pct = 100\nbs = \"1m\"\npattern = \"sequential\"\nramp = [1, 2, 4]\n",
        targets.join(", ")
    )
}

/// `coordinator.yaml`: the plan, the results volume and the Job.
pub fn coordinator_yaml(o: &K8sOptions) -> String {
    let ns = &o.namespace;
    let mut y =
        header("iocurve coordinator: a Job that runs the plan on every agent and keeps the results on a volume.");
    let plan: String =
        plan_toml(o).lines().map(|l| if l.is_empty() { "\n".to_string() } else { format!("    {l}\n") }).collect();
    let _ = write!(
        y,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: iocurve-plan\n  namespace: {ns}\n  labels:\n{l4}data:\n  plan.toml: |\n{plan}---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: iocurve-results\n  namespace: {ns}\n  labels:\n{l4}spec:\n  accessModes: [\"ReadWriteOnce\"]\n  resources:\n    requests:\n      storage: \"1Gi\"\n---\n",
        l4 = labels("coordinator", 4)
    );
    let _ = write!(
        y,
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: iocurve-coordinator\n  namespace: {ns}\n  labels:\n{l4}spec:\n  # A run is not retried: its results database says how far it got.\n  backoffLimit: 0\n  template:\n    metadata:\n      labels:\n{l8}    spec:\n      restartPolicy: Never\n      securityContext:\n        seccompProfile:\n          type: RuntimeDefault\n      containers:\n      - name: coordinator\n        image: {image}\n        args:\n{args}        securityContext:\n          runAsUser: 0\n          allowPrivilegeEscalation: false\n          readOnlyRootFilesystem: true\n          capabilities:\n            drop: [\"ALL\"]\n        volumeMounts:\n        - name: plan\n          mountPath: {PLAN_DIR}\n          readOnly: true\n        - name: credentials\n          mountPath: {COORDINATOR_CREDENTIALS}\n          readOnly: true\n        - name: results\n          mountPath: {RESULTS_DIR}\n      volumes:\n      - name: plan\n        configMap:\n          name: iocurve-plan\n      - name: credentials\n        secret:\n          secretName: iocurve-coordinator\n          # 0400: iocurve refuses a token file others may read.\n          defaultMode: 256\n      - name: results\n        persistentVolumeClaim:\n          claimName: iocurve-results\n",
        l4 = labels("coordinator", 4),
        l8 = labels("coordinator", 8),
        image = q(&o.image),
        args = list(&coordinator_args(o), 8),
    );
    y
}

/// `namespace.yaml`, labelled with the Pod Security level the agents need: root in the
/// container for the device node (`baseline`), privileged for host devices.
pub fn namespace_yaml(o: &K8sOptions) -> String {
    let level = if o.host_devices.is_empty() { "baseline" } else { "privileged" };
    format!(
        "{}apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {}\n  labels:\n    pod-security.kubernetes.io/enforce: {level}\n",
        header("The namespace of the iocurve objects."),
        o.namespace
    )
}

/// Agents on separate nodes: preferred on volumes, required on host devices (two agents on one
/// node would share its devices).
fn affinity(o: &K8sOptions) -> String {
    if o.host_devices.is_empty() {
        format!(
            "      # Load generators on separate nodes where the cluster has them.\n      affinity:\n        podAntiAffinity:\n          preferredDuringSchedulingIgnoredDuringExecution:\n          - weight: 100\n            podAffinityTerm:\n              topologyKey: kubernetes.io/hostname\n              labelSelector:\n                matchLabels:\n{}",
            labels("agent", 18)
        )
    } else {
        format!(
            "      # One agent per node: agents on one node would share its devices.\n      affinity:\n        podAntiAffinity:\n          requiredDuringSchedulingIgnoredDuringExecution:\n          - topologyKey: kubernetes.io/hostname\n            labelSelector:\n              matchLabels:\n{}",
            labels("agent", 16)
        )
    }
}

/// The rendered files, by name.
pub fn render(o: &K8sOptions) -> Result<Vec<(&'static str, String)>, CliError> {
    o.check()?;
    Ok(vec![
        ("namespace.yaml", namespace_yaml(o)),
        ("agents.yaml", agents_yaml(o)),
        ("coordinator.yaml", coordinator_yaml(o)),
    ])
}

/// `deploy kubernetes`: writes the files into `out` (created if missing), or prints them as one
/// stream without it.
pub fn kubernetes(o: &K8sOptions, out: Option<&Path>) -> Result<std::process::ExitCode, CliError> {
    let files = render(o)?;
    match out {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| CliError::Usage(format!("-o {}: cannot create it: {e}", dir.display())))?;
            for (name, text) in &files {
                let p = dir.join(name);
                std::fs::write(&p, text).map_err(|e| CliError::Usage(format!("cannot write {}: {e}", p.display())))?;
            }
            crate::outln!(
                "wrote {} into {}; then: kubectl apply -f {}/namespace.yaml, the Secrets (see the README), kubectl apply -f {}",
                files.iter().map(|f| f.0).collect::<Vec<_>>().join(", "),
                dir.display(),
                dir.display(),
                dir.display()
            );
        }
        None => {
            let all: Vec<&str> = files.iter().map(|f| f.1.as_str()).collect();
            crate::out!("{}", all.join("---\n"));
        }
    }
    Ok(std::process::ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The options as the command line gives them by default.
    fn defaults() -> K8sOptions {
        use clap::Parser;
        match crate::cli::Cli::try_parse_from(["iocurve", "deploy", "kubernetes"]).unwrap().command {
            crate::cli::Command::Deploy { command: crate::cli::DeployCommand::Kubernetes(a) } => K8sOptions::from(&a),
            _ => unreachable!(),
        }
    }

    #[test]
    fn the_plan_in_the_config_map_is_a_valid_plan() {
        for o in [defaults(), K8sOptions { host_devices: vec!["/dev/nvme1n1".into()], ..defaults() }] {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("plan.toml");
            std::fs::write(&p, plan_toml(&o)).unwrap();
            let plan = iocurve_plan::load_file(&p, &Default::default()).unwrap();
            assert_eq!(plan.workloads.len(), 3);
            assert_eq!(plan.groups[0].targets, o.targets());
        }
    }

    #[test]
    fn options_are_checked() {
        let bad = [
            K8sOptions { namespace: "Bad_NS".into(), ..defaults() },
            K8sOptions { agents: 0, ..defaults() },
            K8sOptions { image: "a b".into(), ..defaults() },
            K8sOptions { volume_size: "lots".into(), ..defaults() },
            K8sOptions { host_devices: vec!["/etc/passwd".into()], ..defaults() },
            K8sOptions { host_devices: vec!["/dev/../etc".into()], ..defaults() },
        ];
        for o in bad {
            assert!(render(&o).is_err(), "{o:?}");
        }
        assert!(render(&defaults()).is_ok());
    }

    #[test]
    fn the_coordinator_dials_every_pod_of_the_stateful_set() {
        let o = K8sOptions { agents: 3, namespace: "bench".into(), ..defaults() };
        let hosts = agent_hosts(&o);
        assert_eq!(
            hosts,
            "iocurve-agent-0.iocurve-agent.bench.svc:7420,iocurve-agent-1.iocurve-agent.bench.svc:7420,iocurve-agent-2.iocurve-agent.bench.svc:7420"
        );
        assert!(agents_yaml(&o).contains("replicas: 3\n"));
    }
}
