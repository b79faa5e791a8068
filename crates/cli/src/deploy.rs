//! `iocurve deploy kubernetes`: the Kubernetes manifests for this binary, made to pass a
//! security review (issue 35, finding 7):
//!
//! - each agent is a one-pod StatefulSet of its own, so that each mounts a Secret of its own
//!   (its certificate for its pod's DNS name, its token from `certs add-host`) and the kubelet
//!   of a node fetches only the Secrets of the agents on it: pods of one StatefulSet share one
//!   template and so one Secret name, and a Secret of every agent's files mounted by every pod
//!   (even with a `subPathExpr` showing each container its own) would sit whole on every node;
//! - NetworkPolicies: the agent port from the coordinator only, the metrics port from the
//!   scraper only (`--scraper-namespace`, `--scraper-labels`), nothing to the coordinator, and
//!   from the coordinator only DNS and the agents;
//! - the metrics endpoint wants a token (a Secret of its own, not the agents' token);
//! - no pod gets a service-account token (iocurve never calls the Kubernetes API);
//! - the coordinator runs as a non-root user, every capability dropped, on a read-only root;
//!   the agents run as root in the container, for the device node only, with every capability
//!   dropped too; nothing is privileged: a host device comes from a device plugin;
//! - requests and limits on every container (the agent's memory limit is what its step budget
//!   reads, from its cgroup).
//!
//! Rendered here, from the options and the constants the binary itself uses, so that ports,
//! labels and the agent's options cannot drift from it; `deploy/kubernetes/` holds the default
//! rendering, and a test checks that it is what this binary renders.

use std::fmt::Write as _;
use std::path::Path;

use crate::CliError;

mod indexed;

/// The port agents listen on in the manifests (and the README's examples).
pub const AGENT_PORT: u16 = 7420;
/// The port of their live metrics (`--metrics`), annotated for Prometheus.
pub const METRICS_PORT: u16 = 9464;
/// Where an agent's raw block volume appears in its container, and so the plan's target.
pub const DEVICE_PATH: &str = "/dev/iocurve-data";
const AGENT_CREDENTIALS: &str = "/etc/iocurve/agent";
const METRICS_CREDENTIALS: &str = "/etc/iocurve/metrics";
const COORDINATOR_CREDENTIALS: &str = "/etc/iocurve/coordinator";
/// Where the coordinator's init container finds the Secret it copies.
const COORDINATOR_SECRET: &str = "/etc/iocurve/secret";
const STATE_DIR: &str = "/var/lib/iocurve";
const PLAN_DIR: &str = "/etc/iocurve/plan";
const RESULTS_DIR: &str = "/results";
/// The coordinator's user and group: not root, and not a user the image has (the image's
/// files are root's and read-only to it).
pub const COORDINATOR_UID: u32 = 65532;
/// The coordinator's requests and limits: a connection and a step's per-host records per agent.
const COORDINATOR_CPU: &str = "1";
const COORDINATOR_MEMORY: &str = "1Gi";

/// What the manifests are made for.
#[derive(Clone, Debug)]
pub struct K8sOptions {
    pub namespace: String,
    pub agents: u32,
    pub image: String,
    /// Size of each agent's raw block volume (a Kubernetes quantity: 100Gi).
    pub volume_size: String,
    pub storage_class: Option<String>,
    /// Host block devices instead of a volume, each by its path, from a device plugin.
    pub host_devices: Vec<String>,
    /// The device plugin's resource domain: a device is the resource DOMAIN/NAME.
    pub device_plugin_domain: String,
    /// Each agent's CPU and memory, requested and limit.
    pub agent_cpu: String,
    pub agent_memory: String,
    /// The scraper allowed to the metrics port: its namespace and its pods' labels.
    pub scraper_namespace: String,
    pub scraper_labels: String,
    /// The agents as one Indexed Job enrolled by their pods' tokens (see [`indexed`]).
    pub indexed: bool,
    /// With `indexed`: the issuer the pods' tokens must name.
    pub pod_issuer: Option<String>,
    /// With `indexed`: a relay pod per this many agents; 0: none.
    pub relay_every: u32,
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
            device_plugin_domain: a.device_plugin_domain.clone(),
            agent_cpu: a.agent_cpu.clone(),
            agent_memory: a.agent_memory.clone(),
            scraper_namespace: a.scraper_namespace.clone(),
            scraper_labels: a.scraper_labels.clone(),
            indexed: a.indexed,
            pod_issuer: a.pod_issuer.clone(),
            relay_every: a.relay_every.unwrap_or(0),
        }
    }
}

/// A DNS label (RFC 1123): a-z, 0-9, -, at most 63, no - at either end.
fn dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A DNS subdomain: DNS labels joined by dots, at most 253.
fn dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(dns_label)
}

/// A label name or value, a resource name's last part: at most 63 of A-Z a-z 0-9 - _ ., and
/// alphanumeric at both ends (a label value may also be empty).
fn label_part(s: &str) -> bool {
    s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && s.bytes().next().is_none_or(|b| b.is_ascii_alphanumeric())
        && s.bytes().last().is_none_or(|b| b.is_ascii_alphanumeric())
}

/// A Kubernetes quantity of bytes like 100Gi or 2Ti.
fn byte_quantity(q: &str) -> bool {
    let digits = q.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && digits.bytes().any(|b| b != b'0')
        && ["", "Ki", "Mi", "Gi", "Ti", "Pi", "k", "M", "G", "T", "P"].contains(&&q[digits.len()..])
}

/// A quantity of CPU: 2, 1.5 or 500m, more than none.
fn cpu_quantity(q: &str) -> bool {
    let n = q.strip_suffix('m').unwrap_or(q);
    let (int, frac) = n.split_once('.').unwrap_or((n, ""));
    !int.is_empty()
        && int.bytes().all(|b| b.is_ascii_digit())
        && frac.bytes().all(|b| b.is_ascii_digit())
        && !(q.ends_with('m') && n.contains('.'))
        && !(n.contains('.') && frac.is_empty())
        && n.bytes().any(|b| b.is_ascii_digit() && b != b'0')
}

impl K8sOptions {
    fn check(&self) -> Result<(), CliError> {
        if !dns_label(&self.namespace) {
            return Err(CliError::Usage(format!(
                "--namespace {}: a Kubernetes namespace is a DNS label (a-z, 0-9, -; at most 63)",
                self.namespace
            )));
        }
        // A StatefulSet per agent is an object each; an Indexed Job is one, of any size the
        // coordinator handles (BENCHMARKS.md, "The coordinator at thousands of hosts").
        let most = if self.indexed { 4096 } else { 512 };
        if !(1..=most).contains(&self.agents) {
            return Err(CliError::Usage(format!(
                "--agents {}: give 1 to {most}{}",
                self.agents,
                if self.indexed { "" } else { " (more as one Indexed Job: --indexed)" }
            )));
        }
        if self.relay_every > 0 && self.agents < 2 * self.relay_every {
            return Err(CliError::Usage(format!(
                "--relay-every {}: {} agents make one group; relays pay from two groups on (give more --agents or drop --relay-every)",
                self.relay_every, self.agents
            )));
        }
        if let Some(iss) = &self.pod_issuer
            && (!iss.starts_with("https://") || iss.chars().any(|c| c.is_whitespace() || c == '"'))
        {
            return Err(CliError::Usage(format!(
                "--pod-issuer {iss}: an https:// URL, as `kubectl get --raw /.well-known/openid-configuration` gives it"
            )));
        }
        if self.image.is_empty() || self.image.chars().any(char::is_whitespace) {
            return Err(CliError::Usage(format!("--image `{}` is not an image reference", self.image)));
        }
        if !byte_quantity(&self.volume_size) {
            return Err(CliError::Usage(format!(
                "--volume-size {}: a Kubernetes quantity like 100Gi or 2Ti",
                self.volume_size
            )));
        }
        if let Some(sc) = &self.storage_class
            && !dns_subdomain(sc)
        {
            return Err(CliError::Usage(format!("--storage-class {sc}: not a storage class name")));
        }
        let mut names = Vec::new();
        for d in &self.host_devices {
            if !d.starts_with("/dev/") || d.contains("..") || d.chars().any(|c| c.is_whitespace() || c == '"') {
                return Err(CliError::Usage(format!("--host-device {d}: a device path under /dev/")));
            }
            let name = device_name(d);
            if name.is_empty() || !label_part(name) {
                return Err(CliError::Usage(format!(
                    "--host-device {d}: its file name `{name}` is no device-plugin resource name (A-Z, a-z, 0-9, -, _, .; at most 63)"
                )));
            }
            if names.contains(&name) {
                return Err(CliError::Usage(format!(
                    "--host-device {d}: another device has the file name `{name}`, and so the same resource {}/{name}",
                    self.device_plugin_domain
                )));
            }
            names.push(name);
        }
        if !dns_subdomain(&self.device_plugin_domain) || !self.device_plugin_domain.contains('.') {
            return Err(CliError::Usage(format!(
                "--device-plugin-domain {}: a domain name like squat.ai",
                self.device_plugin_domain
            )));
        }
        if !cpu_quantity(&self.agent_cpu) {
            return Err(CliError::Usage(format!("--agent-cpu {}: a CPU quantity like 2, 1.5 or 500m", self.agent_cpu)));
        }
        if !byte_quantity(&self.agent_memory) {
            return Err(CliError::Usage(format!(
                "--agent-memory {}: a Kubernetes quantity like 2Gi or 512Mi",
                self.agent_memory
            )));
        }
        if !dns_label(&self.scraper_namespace) {
            return Err(CliError::Usage(format!(
                "--scraper-namespace {}: a Kubernetes namespace is a DNS label (a-z, 0-9, -; at most 63)",
                self.scraper_namespace
            )));
        }
        scraper_labels(&self.scraper_labels)?;
        Ok(())
    }

    /// The targets the agents use: their volume, or the host devices.
    fn targets(&self) -> Vec<String> {
        if self.host_devices.is_empty() { vec![DEVICE_PATH.to_string()] } else { self.host_devices.clone() }
    }
}

/// A host device's name for its device plugin: its file name.
fn device_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or("")
}

/// `--scraper-labels`: KEY=VALUE pairs, each key a label name with an optional DNS-subdomain
/// prefix (`app.kubernetes.io/name`).
fn scraper_labels(s: &str) -> Result<Vec<(String, String)>, CliError> {
    let bad = |why: &str| CliError::Usage(format!("--scraper-labels {s}: {why}"));
    let mut out = Vec::new();
    for pair in s.split(',') {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(bad(&format!("`{pair}` is not KEY=VALUE")));
        };
        let (prefix, name) = k.rsplit_once('/').map_or((None, k), |(p, n)| (Some(p), n));
        if name.is_empty() || !label_part(name) || prefix.is_some_and(|p| !dns_subdomain(p)) {
            return Err(bad(&format!("`{k}` is not a label name")));
        }
        if !label_part(v) {
            return Err(bad(&format!("`{v}` is not a label value (at most 63 of A-Z a-z 0-9 - _ .)")));
        }
        if out.iter().any(|(o, _)| o == k) {
            return Err(bad(&format!("`{k}` is given twice")));
        }
        out.push((k.to_string(), v.to_string()));
    }
    Ok(out)
}

/// A string as a YAML scalar: JSON's double-quoted form, which YAML reads the same.
fn q(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

fn labels(component: &str, indent: usize) -> String {
    let pad = " ".repeat(indent);
    format!("{pad}app.kubernetes.io/name: iocurve\n{pad}app.kubernetes.io/component: {component}\n")
}

/// The labels of agent `i`'s pod: the agents' and its own instance (its StatefulSet's selector).
fn agent_labels(i: u32, indent: usize) -> String {
    format!("{}{}app.kubernetes.io/instance: iocurve-agent-{i}\n", labels("agent", indent), " ".repeat(indent))
}

fn header(what: &str) -> String {
    format!(
        "# {what}\n# Rendered by `iocurve deploy kubernetes` (iocurve {}); render again with other options\n# (`iocurve deploy kubernetes --help`) rather than editing, so that it matches the binary.\n",
        env!("CARGO_PKG_VERSION")
    )
}

/// The DNS name of agent `i`'s pod (pod 0 of StatefulSet iocurve-agent-`i`, under the headless
/// Service): what the coordinator dials, and so the name its certificate (`certs add-host`)
/// and its token are for.
pub fn agent_host(o: &K8sOptions, i: u32) -> String {
    if o.indexed {
        return indexed::agent_host(o, i);
    }
    format!("iocurve-agent-{i}-0.iocurve-agent.{}.svc", o.namespace)
}

/// The agent's command line in its container.
pub fn agent_args(o: &K8sOptions) -> Vec<String> {
    if o.indexed {
        return indexed::agent_args(o);
    }
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
        "--metrics-token-file".into(),
        format!("{METRICS_CREDENTIALS}/token"),
    ];
    for t in o.targets() {
        a.extend(["--allow".into(), t]);
    }
    a
}

/// The agents' addresses as the coordinator dials them.
fn agent_hosts(o: &K8sOptions) -> String {
    (0..o.agents).map(|i| format!("{}:{AGENT_PORT}", agent_host(o, i))).collect::<Vec<_>>().join(",")
}

/// The coordinator's command line in its container.
pub fn coordinator_args(o: &K8sOptions) -> Vec<String> {
    if o.indexed {
        return indexed::coordinator_args(o);
    }
    [
        "run".into(),
        format!("{PLAN_DIR}/plan.toml"),
        "--hosts".into(),
        agent_hosts(o),
        "--ca".into(),
        format!("{COORDINATOR_CREDENTIALS}/ca.pem"),
        "--token-file".into(),
        format!("{COORDINATOR_CREDENTIALS}/token"),
        // Each agent holds only its own pod's token (`certs add-host`), derived from this one,
        // which never leaves the coordinator; each agent's certificate names its pod.
        "--token-per-host".into(),
    ]
    .into_iter()
    .chain(coordinator_identity_and_results())
    .collect()
}

/// The end of the coordinator's command line in both renderings: its certificate (the one the
/// agents' --client-ca trusts), where the results go, and the wait for agent pods still
/// starting.
fn coordinator_identity_and_results() -> Vec<String> {
    vec![
        "--client-cert".into(),
        format!("{COORDINATOR_CREDENTIALS}/client.pem"),
        "--client-key".into(),
        format!("{COORDINATOR_CREDENTIALS}/client.key"),
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

/// An agent container's securityContext, in a StatefulSet or an Indexed Job alike.
fn agent_security(o: &K8sOptions) -> String {
    format!(
        "        securityContext:
          # Root in the container, for the device node only: the block device the pod is given
          # ({what}) is root's (0660, root:disk), and no user or group the pod could pick is
          # sure to own it; root without any capability opens it as its owner and can do
          # nothing else a user could not (no CAP_DAC_OVERRIDE, CAP_SYS_ADMIN or CAP_SYS_NICE:
          # steps then start without the real-time wake-up, slightly less together).
          runAsUser: 0
          runAsNonRoot: false
          privileged: false
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities:
            drop: [\"ALL\"]
",
        what = if o.host_devices.is_empty() { "its raw block volume" } else { "a host device, by the device plugin" },
    )
}

/// Requests equal to limits (the Guaranteed class: a load generator that is neither evicted
/// first nor squeezed by its neighbours), plus any device-plugin resources.
fn resources(cpu: &str, memory: &str, devices: &[String], indent: usize) -> String {
    let pad = " ".repeat(indent);
    let mut y = format!("{pad}resources:\n");
    for kind in ["requests", "limits"] {
        let _ = write!(y, "{pad}  {kind}:\n{pad}    cpu: {}\n{pad}    memory: {}\n", q(cpu), q(memory));
        for d in devices {
            let _ = writeln!(y, "{pad}    {d}: 1");
        }
    }
    y
}

/// The NetworkPolicy of the agents: the agent port from the coordinator's pods only, the
/// metrics port from the scraper's only, and no connection out (agents dial nothing).
fn agent_network_policy(o: &K8sOptions) -> String {
    let ns = &o.namespace;
    let scraper: String = scraper_labels(&o.scraper_labels)
        .unwrap_or_default()
        .iter()
        .map(|(k, v)| format!("          {k}: {}\n", q(v)))
        .collect();
    format!(
        "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: iocurve-agent
  namespace: {ns}
  labels:
{l4}spec:
  podSelector:
    matchLabels:
{l6}  policyTypes: [\"Ingress\", \"Egress\"]
  ingress:
  # The agent port: the coordinator's pods only{relays} (the kubelet's readiness probe comes
  # from the node, which NetworkPolicies do not restrict).
  - from:
    - podSelector:
        matchLabels:
{lc}{lr}    ports:
    - protocol: TCP
      port: {AGENT_PORT}
  # The metrics port: the scraper only (--scraper-namespace, --scraper-labels).
  - from:
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: {sns}
      podSelector:
        matchLabels:
{scraper}    ports:
    - protocol: TCP
      port: {METRICS_PORT}
  # No egress rule: an agent only answers, it opens no connection.
",
        l4 = labels("agent", 4),
        l6 = labels("agent", 6),
        lc = labels("coordinator", 10),
        relays = if o.relay_every > 0 { " and the relays'" } else { "" },
        lr = relay_peer(o),
        sns = o.scraper_namespace,
    )
}

/// The headless Service of the agents: a DNS name per pod (ready or not: a pod is dialled as
/// soon as it runs).
fn agent_service(o: &K8sOptions) -> String {
    headless_service(o, "iocurve-agent", "agent", true)
}

/// A headless Service named `name` for the pods of `component`: their agent port, and their
/// metrics port where they serve one.
fn headless_service(o: &K8sOptions, name: &str, component: &str, metrics: bool) -> String {
    let metrics = if metrics {
        format!("  - name: metrics\n    port: {METRICS_PORT}\n    targetPort: metrics\n")
    } else {
        String::new()
    };
    format!(
        "apiVersion: v1
kind: Service
metadata:
  name: {name}
  namespace: {ns}
  labels:
{l4}spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector:
{l4}  ports:
  - name: agent
    port: {AGENT_PORT}
    targetPort: agent
{metrics}",
        ns = o.namespace,
        l4 = labels(component, 4),
    )
}

/// `agents.yaml`: the headless Service, the agents' NetworkPolicy and one StatefulSet per agent.
pub fn agents_yaml(o: &K8sOptions) -> String {
    if o.indexed {
        return indexed::agents_yaml(o);
    }
    let mut y = header(
        "iocurve agents: one single-pod StatefulSet each (each with a Secret of its own), behind a\n# headless Service, one pod per node where possible; a NetworkPolicy lets only the coordinator\n# reach them and only the scraper their metrics.",
    );
    y.push_str(&agent_service(o));
    y.push_str("---\n");
    y.push_str(&agent_network_policy(o));
    let devices: Vec<String> =
        o.host_devices.iter().map(|d| format!("{}/{}", o.device_plugin_domain, device_name(d))).collect();
    for i in 0..o.agents {
        agent_statefulset(&mut y, o, i, &devices);
    }
    y
}

/// Agent `i`'s StatefulSet (with its volume claim where it gets a raw block volume).
fn agent_statefulset(y: &mut String, o: &K8sOptions, i: u32, devices: &[String]) {
    let ns = &o.namespace;
    let _ = write!(
        y,
        "---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: iocurve-agent-{i}
  namespace: {ns}
  labels:
{l4}spec:
  serviceName: iocurve-agent
  replicas: 1
  selector:
    matchLabels:
{l6}  template:
    metadata:
      labels:
{l8}      annotations:
        # Live metrics of every step this agent runs (issue 18's exporter). The scrape job must
        # bring the metrics token (`authorization: {{credentials_file: …}}`; see the README).
        prometheus.io/scrape: \"true\"
        prometheus.io/port: \"{METRICS_PORT}\"
        prometheus.io/path: /metrics
    spec:
      # iocurve never calls the Kubernetes API: no service-account token in the pod.
      automountServiceAccountToken: false
      enableServiceLinks: false
{affinity}      securityContext:
        # The runtime's default profile; it may forbid io_uring, and the agent then runs psync
        # and says so. A profile that allows io_uring_setup/enter/register lifts that.
        seccompProfile:
          type: RuntimeDefault
      containers:
      - name: agent
        image: {image}
        args:
{args}        ports:
        - name: agent
          containerPort: {AGENT_PORT}
        - name: metrics
          containerPort: {METRICS_PORT}
        readinessProbe:
          tcpSocket:
            port: agent
          periodSeconds: 5
{resources}{security}",
        l4 = agent_labels(i, 4),
        l6 = agent_labels(i, 6),
        l8 = agent_labels(i, 8),
        affinity = affinity(o),
        image = q(&o.image),
        args = list(&agent_args(o), 8),
        resources = resources(&o.agent_cpu, &o.agent_memory, devices, 8),
        security = agent_security(o),
    );
    if o.host_devices.is_empty() {
        // A raw block volume: the device node is the pod's own.
        let _ = write!(y, "        volumeDevices:\n        - name: data\n          devicePath: {}\n", q(DEVICE_PATH));
    }
    let _ = write!(
        y,
        "        volumeMounts:
        - name: credentials
          mountPath: {AGENT_CREDENTIALS}
          readOnly: true
        - name: metrics-token
          mountPath: {METRICS_CREDENTIALS}
          readOnly: true
        - name: state
          mountPath: {STATE_DIR}
      volumes:
      - name: credentials
        secret:
          # This agent's own: its certificate (for {host}), key and token, and the CA of the
          # coordinator's certificate.
          secretName: iocurve-agent-{i}
          # 0400: the agent refuses a token file others may read.
          defaultMode: 256
      - name: metrics-token
        secret:
          # The scrapers' read-only token, the same on every agent.
          secretName: iocurve-metrics
          defaultMode: 256
      - name: state
        emptyDir: {{}}
",
        host = agent_host(o, i),
    );
    if o.host_devices.is_empty() {
        let _ = write!(
            y,
            "  volumeClaimTemplates:
  - metadata:
      name: data
    spec:
      accessModes: [\"ReadWriteOnce\"]
      volumeMode: Block
{class}      resources:
        requests:
          storage: {size}
",
            class = o.storage_class.as_ref().map(|c| format!("      storageClassName: {}\n", q(c))).unwrap_or_default(),
            size = q(&o.volume_size)
        );
    }
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

/// The coordinator's NetworkPolicy: nothing reaches it; it reaches DNS and the agents' port.
fn coordinator_network_policy(o: &K8sOptions) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: iocurve-coordinator
  namespace: {ns}
  labels:
{l4}spec:
  podSelector:
    matchLabels:
{l6}  policyTypes: [\"Ingress\", \"Egress\"]
  # No ingress rule: nothing connects to the coordinator.
  egress:
  # The agents' names (the cluster's DNS, wherever it runs).
  - ports:
    - protocol: UDP
      port: 53
    - protocol: TCP
      port: 53
  - to:
    - podSelector:
        matchLabels:
{la}{lr}    ports:
    - protocol: TCP
      port: {AGENT_PORT}
",
        ns = o.namespace,
        l4 = labels("coordinator", 4),
        l6 = labels("coordinator", 6),
        la = labels("agent", 10),
        lr = relay_peer(o),
    )
}

/// With relays: their pods as a peer of a NetworkPolicy rule (beside the agents' or the
/// coordinator's), else nothing.
fn relay_peer(o: &K8sOptions) -> String {
    if o.relay_every == 0 {
        return String::new();
    }
    format!("    - podSelector:\n        matchLabels:\n{}", labels("relay", 10))
}

/// `coordinator.yaml`: the plan, the results volume, the NetworkPolicy and the Job.
pub fn coordinator_yaml(o: &K8sOptions) -> String {
    let ns = &o.namespace;
    let mut y =
        header("iocurve coordinator: a Job that runs the plan on every agent and keeps the results on a volume.");
    let plan: String =
        plan_toml(o).lines().map(|l| if l.is_empty() { "\n".to_string() } else { format!("    {l}\n") }).collect();
    let _ = write!(
        y,
        "apiVersion: v1
kind: ConfigMap
metadata:
  name: iocurve-plan
  namespace: {ns}
  labels:
{l4}data:
  plan.toml: |
{plan}---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: iocurve-results
  namespace: {ns}
  labels:
{l4}spec:
  accessModes: [\"ReadWriteOnce\"]
  resources:
    requests:
      storage: \"1Gi\"
---
{policy}---
",
        l4 = labels("coordinator", 4),
        policy = coordinator_network_policy(o),
    );
    let restricted = "          runAsNonRoot: true
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities:
            drop: [\"ALL\"]
";
    let _ = write!(
        y,
        "apiVersion: batch/v1
kind: Job
metadata:
  name: iocurve-coordinator
  namespace: {ns}
  labels:
{l4}spec:
  # A run is not retried: its results database says how far it got.
  backoffLimit: 0
  template:
    metadata:
      labels:
{l8}    spec:
      restartPolicy: Never
      # iocurve never calls the Kubernetes API: no service-account token in the pod.
      automountServiceAccountToken: false
      enableServiceLinks: false
      securityContext:
        # Not root: the coordinator only reads its plan and credentials and writes its results.
        runAsNonRoot: true
        runAsUser: {uid}
        runAsGroup: {uid}
        # The results volume is made writable for this group.
        fsGroup: {uid}
        seccompProfile:
          type: RuntimeDefault
      initContainers:
      # A Secret's files belong to root, and with fsGroup they are group-readable, which the
      # token check refuses (no access for group or others): a copy of them owned by the
      # coordinator's user, mode 0400, in memory, is what it reads.
      - name: credentials
        image: {image}
        command: [\"/bin/sh\", \"-ec\", \"cp {COORDINATOR_SECRET}/* {COORDINATOR_CREDENTIALS}/ && chmod 0400 {COORDINATOR_CREDENTIALS}/*\"]
{small}        securityContext:
{restricted}        volumeMounts:
        - name: secret
          mountPath: {COORDINATOR_SECRET}
          readOnly: true
        - name: credentials
          mountPath: {COORDINATOR_CREDENTIALS}
      containers:
      - name: coordinator
        image: {image}
        args:
{args}{resources}        securityContext:
{restricted}        volumeMounts:
        - name: plan
          mountPath: {PLAN_DIR}
          readOnly: true
        - name: credentials
          mountPath: {COORDINATOR_CREDENTIALS}
          readOnly: true
        - name: results
          mountPath: {RESULTS_DIR}
        # The results database's temporary files (the root filesystem is read-only).
        - name: tmp
          mountPath: /tmp
{keys_mount}      volumes:
      - name: plan
        configMap:
          name: iocurve-plan
      - name: secret
        secret:
          secretName: iocurve-coordinator
          # 0440 (with fsGroup): readable by the init container only, which copies it.
          defaultMode: 288
      - name: credentials
        emptyDir:
          medium: Memory
          sizeLimit: 1Mi
      - name: tmp
        emptyDir: {{}}
      - name: results
        persistentVolumeClaim:
          claimName: iocurve-results
{keys_volume}",
        l4 = labels("coordinator", 4),
        l8 = labels("coordinator", 8),
        uid = COORDINATOR_UID,
        image = q(&o.image),
        args = list(&coordinator_args(o), 8),
        small = resources("100m", "64Mi", &[], 8),
        resources = resources(coordinator_cpu(o), &coordinator_memory(o), &[], 8),
        keys_mount = if o.indexed {
            format!("        - name: cluster-keys\n          mountPath: {}\n          readOnly: true\n", indexed::CLUSTER_KEYS_DIR)
        } else {
            String::new()
        },
        keys_volume = if o.indexed {
            "      # The cluster's service-account keys (public): what the pods' tokens are checked against.\n      - name: cluster-keys\n        configMap:\n          name: iocurve-cluster-keys\n"
        } else {
            ""
        },
    );
    y
}

/// The coordinator's CPU: a core up to a thousand agents at 1 s intervals, two beyond
/// (BENCHMARKS.md, "The coordinator at thousands of hosts": about 1–2 ms per agent and interval).
fn coordinator_cpu(o: &K8sOptions) -> &'static str {
    if o.agents > 1000 { "2" } else { COORDINATOR_CPU }
}

/// The coordinator's memory: 1Gi, or half a MiB per agent beside 256 MiB where that is more
/// (measured 0.33–0.4 MiB per agent).
fn coordinator_memory(o: &K8sOptions) -> String {
    if o.agents > 1536 { format!("{}Mi", 256 + o.agents / 2) } else { COORDINATOR_MEMORY.to_string() }
}

/// `namespace.yaml`, labelled with the Pod Security level the agents need: `baseline` (root in
/// the container for the device node, which `restricted` refuses; the coordinator meets
/// `restricted`); nothing needs `privileged`.
pub fn namespace_yaml(o: &K8sOptions) -> String {
    format!(
        "{}apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {}\n  labels:\n    pod-security.kubernetes.io/enforce: baseline\n",
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
            let then = if o.indexed {
                "the ConfigMaps iocurve-coordinator-ca and iocurve-cluster-keys, the Secrets iocurve-coordinator and iocurve-metrics (see the README, \"Agents on Kubernetes as an Indexed Job\")".to_string()
            } else {
                format!(
                    "the Secrets (iocurve-coordinator, iocurve-metrics and one per agent, iocurve-agent-0 to iocurve-agent-{}: see the README)",
                    o.agents - 1
                )
            };
            crate::outln!(
                "wrote {} into {}; then: kubectl apply -f {}/namespace.yaml, {then}, kubectl apply -f {}",
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
            K8sOptions { volume_size: "0Gi".into(), ..defaults() },
            K8sOptions { host_devices: vec!["/etc/passwd".into()], ..defaults() },
            K8sOptions { host_devices: vec!["/dev/../etc".into()], ..defaults() },
            K8sOptions { host_devices: vec!["/dev/".into()], ..defaults() },
            K8sOptions { host_devices: vec!["/dev/a/x".into(), "/dev/b/x".into()], ..defaults() },
            K8sOptions { host_devices: vec!["/dev/x".into()], device_plugin_domain: "nodots".into(), ..defaults() },
            K8sOptions { agent_cpu: "0".into(), ..defaults() },
            K8sOptions { agent_cpu: "1.5m".into(), ..defaults() },
            K8sOptions { agent_cpu: "two".into(), ..defaults() },
            K8sOptions { agent_memory: "2GB".into(), ..defaults() },
            K8sOptions { scraper_namespace: "-x".into(), ..defaults() },
            K8sOptions { scraper_labels: "app".into(), ..defaults() },
            K8sOptions { scraper_labels: "a=b,a=c".into(), ..defaults() },
            K8sOptions { scraper_labels: "Bad_Prefix/x=y".into(), ..defaults() },
            K8sOptions { scraper_labels: "x=not valid".into(), ..defaults() },
            K8sOptions { scraper_labels: "".into(), ..defaults() },
        ];
        for o in bad {
            assert!(render(&o).is_err(), "{o:?}");
        }
        for good in [
            defaults(),
            K8sOptions { agent_cpu: "500m".into(), agent_memory: "512Mi".into(), ..defaults() },
            K8sOptions { agent_cpu: "1.5".into(), ..defaults() },
            K8sOptions { scraper_labels: "app=prometheus,prometheus=k8s,team.example/x=".into(), ..defaults() },
            K8sOptions { host_devices: vec!["/dev/mapper/lun-1".into()], ..defaults() },
        ] {
            assert!(render(&good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn the_coordinator_dials_every_agent_pod() {
        let o = K8sOptions { agents: 3, namespace: "bench".into(), ..defaults() };
        let hosts = agent_hosts(&o);
        assert_eq!(
            hosts,
            "iocurve-agent-0-0.iocurve-agent.bench.svc:7420,iocurve-agent-1-0.iocurve-agent.bench.svc:7420,iocurve-agent-2-0.iocurve-agent.bench.svc:7420"
        );
        let y = agents_yaml(&o);
        assert_eq!(y.matches("kind: StatefulSet\n").count(), 3);
        for i in 0..3 {
            assert!(y.contains(&format!("  name: iocurve-agent-{i}\n")), "{i}");
            assert!(y.contains(&format!("secretName: iocurve-agent-{i}\n")), "{i}");
        }
    }
}
