//! `deploy kubernetes --indexed` (issue 46): the agents as one Indexed Job of any size instead
//! of a StatefulSet per agent. Pods of one template cannot each mount a Secret of their own, so
//! these hold no key or token of their own (only the scrapers' read-only metrics token): each agent waits with its pod's projected service-account
//! token (audience `iocurve`, bound to the pod, renewed by the kubelet) and the coordinator's
//! public CA, and the coordinator (`run --launch pods`) enrols each pod by that token —
//! checked offline against the cluster's keys (`kubectl get --raw /openid/v1/jwks`, a
//! ConfigMap) and against the pod's DNS name — handing it this run's certificate and token
//! (`iocurve_net::enrol`). Stable names: an Indexed Job's pod I is `iocurve-agent-I`, under the
//! headless Service `iocurve-agent` (the pods' `subdomain`). A pod that fails is not started
//! again and the others go on (`backoffLimitPerIndex: 0`, `maxFailedIndexes` all): the run
//! counts it lost, as `--on-host-loss continue` does.

use std::fmt::Write as _;

use super::{
    AGENT_PORT, DEVICE_PATH, K8sOptions, METRICS_CREDENTIALS, METRICS_PORT, PLAN_DIR, STATE_DIR, affinity,
    agent_network_policy, agent_service, coordinator_identity_and_results, device_name, header, labels, list, q,
    resources,
};

/// Where an agent's pod token is projected, and the coordinator's CA (a ConfigMap) mounted.
const POD_TOKEN_DIR: &str = "/var/run/secrets/iocurve";
const COORDINATOR_CA_DIR: &str = "/etc/iocurve/ca";
/// Where the coordinator finds the cluster's service-account keys (a ConfigMap).
pub const CLUSTER_KEYS_DIR: &str = "/etc/iocurve/cluster";
/// The pod token's lifetime; the kubelet renews it at 80 % (the agent reads it at each try).
const POD_TOKEN_S: u32 = 3600;
/// A relay's requests and limits: merging its group's intervals (about 1 ms of CPU per agent
/// and interval, 0.4 MiB per agent: BENCHMARKS.md) and its connections.
const RELAY_CPU: &str = "1";
const RELAY_MEMORY: &str = "512Mi";
/// How long an agent waits to be enrolled before its pod fails.
const ENROL_WAIT_S: u32 = 3600;

/// The DNS name of agent `i`'s pod: hostname `iocurve-agent-I` (the Job's name and index) under
/// the headless Service.
pub fn agent_host(o: &K8sOptions, i: u32) -> String {
    format!("iocurve-agent-{i}.iocurve-agent.{}.svc", o.namespace)
}

/// Every agent's name as one `--hosts` range (`iocurve-agent-[0-63].iocurve-agent.NS.svc`).
pub fn agent_hosts(o: &K8sOptions) -> String {
    if o.agents == 1 {
        agent_host(o, 0)
    } else {
        format!("iocurve-agent-[0-{}].iocurve-agent.{}.svc", o.agents - 1, o.namespace)
    }
}

/// How many relay pods: one per `relay_every` agents.
fn relays(o: &K8sOptions) -> u32 {
    o.agents.div_ceil(o.relay_every.max(1))
}

/// Every relay pod's name as one `--relays` range.
fn relay_hosts(o: &K8sOptions) -> String {
    match relays(o) {
        1 => format!("iocurve-relay-0.iocurve-relay.{}.svc", o.namespace),
        n => format!("iocurve-relay-[0-{}].iocurve-relay.{}.svc", n - 1, o.namespace),
    }
}

/// The relay's command line in its container: an agent that serves as a relay, no target.
fn relay_args() -> Vec<String> {
    [
        "agent",
        "--enrol",
        &format!("{POD_TOKEN_DIR}/token"),
        "--client-ca",
        &format!("{COORDINATOR_CA_DIR}/ca.pem"),
        "--listen",
        &format!("0.0.0.0:{AGENT_PORT}"),
        "--enrol-wait-s",
        &ENROL_WAIT_S.to_string(),
        "--relay",
        "--state-dir",
        STATE_DIR,
    ]
    .iter()
    .map(|a| a.to_string())
    .collect()
}

/// The agent's command line in its container.
pub fn agent_args(o: &K8sOptions) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "agent".into(),
        "--enrol".into(),
        format!("{POD_TOKEN_DIR}/token"),
        "--client-ca".into(),
        format!("{COORDINATOR_CA_DIR}/ca.pem"),
        "--listen".into(),
        format!("0.0.0.0:{AGENT_PORT}"),
        "--enrol-wait-s".into(),
        ENROL_WAIT_S.to_string(),
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

/// The coordinator's command line in its container.
pub fn coordinator_args(o: &K8sOptions) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "run".into(),
        format!("{PLAN_DIR}/plan.toml"),
        "--launch".into(),
        "pods".into(),
        "--hosts".into(),
        agent_hosts(o),
        "--launch-port".into(),
        AGENT_PORT.to_string(),
        "--pod-keys".into(),
        format!("{CLUSTER_KEYS_DIR}/jwks.json"),
    ];
    if let Some(iss) = &o.pod_issuer {
        a.extend(["--pod-issuer".into(), iss.clone()]);
    }
    if o.relay_every > 0 {
        a.extend(["--relay-every".into(), o.relay_every.to_string(), "--relays".into(), relay_hosts(o)]);
    }
    // The certificate the agents' --client-ca trusts: only its holder sees their tokens.
    a.extend(coordinator_identity_and_results());
    a
}

/// `agents.yaml`: the agents' service account, the headless Service, the NetworkPolicy and the
/// Indexed Job.
pub fn agents_yaml(o: &K8sOptions) -> String {
    let ns = &o.namespace;
    let mut y = header(
        "iocurve agents: one Indexed Job (pod I is iocurve-agent-I) behind a headless Service; no\n# Secret: each pod is enrolled by its own service-account token when a run starts (see the\n# README, \"Agents on Kubernetes as an Indexed Job\"); a NetworkPolicy lets only the\n# coordinator reach them and only the scraper their metrics.",
    );
    let _ = write!(
        y,
        "apiVersion: v1
kind: ServiceAccount
metadata:
  name: {account}
  namespace: {ns}
  labels:
{l4}# Its token is never mounted; the pods get a projected one for the audience `iocurve` only,
# which the coordinator checks (and no Kubernetes API accepts: another audience).
automountServiceAccountToken: false
---
{service}---
{policy}---
",
        account = iocurve_net::podtoken::SERVICE_ACCOUNT,
        l4 = labels("agent", 4),
        service = agent_service(o),
        policy = agent_network_policy(o),
    );
    job(&mut y, o);
    if o.relay_every > 0 {
        relay_objects(&mut y, o);
    }
    y
}

/// The relays' headless Service, NetworkPolicy and Indexed Job: pods that hold no device, run
/// as a user, and are enrolled as the agents are.
fn relay_objects(y: &mut String, o: &K8sOptions) {
    let ns = &o.namespace;
    let n = relays(o);
    let uid = super::COORDINATOR_UID;
    let _ = write!(
        y,
        "---
{service}---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: iocurve-relay
  namespace: {ns}
  labels:
{l4}spec:
  podSelector:
    matchLabels:
{l6}  policyTypes: [\"Ingress\", \"Egress\"]
  # The relay port: the coordinator's pods only.
  ingress:
  - from:
    - podSelector:
        matchLabels:
{lc}    ports:
    - protocol: TCP
      port: {AGENT_PORT}
  # Out: the agents' names (DNS) and the agents' port, nothing else.
  egress:
  - ports:
    - protocol: UDP
      port: 53
    - protocol: TCP
      port: 53
  - to:
    - podSelector:
        matchLabels:
{la}    ports:
    - protocol: TCP
      port: {AGENT_PORT}
---
{head}  template:
    metadata:
      labels:
{l8}    spec:
      restartPolicy: Never
      # Relay K's DNS name: iocurve-relay-K.iocurve-relay.{ns}.svc, what the coordinator dials.
      subdomain: iocurve-relay
      serviceAccountName: {account}
      automountServiceAccountToken: false
      enableServiceLinks: false
      securityContext:
        # A relay opens no device: not root.
        runAsNonRoot: true
        runAsUser: {uid}
        runAsGroup: {uid}
        fsGroup: {uid}
        seccompProfile:
          type: RuntimeDefault
      containers:
      - name: relay
        image: {image}
        args:
{args}        ports:
        - name: agent
          containerPort: {AGENT_PORT}
{resources}        securityContext:
          runAsNonRoot: true
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities:
            drop: [\"ALL\"]
        volumeMounts:
{enrol_mounts}        - name: state
          mountPath: {STATE_DIR}
      volumes:
{enrol}      - name: state
        emptyDir: {{}}
",
        l4 = labels("relay", 4),
        l6 = labels("relay", 6),
        l8 = labels("relay", 8),
        lc = labels("coordinator", 10),
        la = labels("agent", 10),
        account = iocurve_net::podtoken::SERVICE_ACCOUNT,
        image = q(&o.image),
        args = list(&relay_args(), 8),
        resources = resources(RELAY_CPU, RELAY_MEMORY, &[], 8),
        service = super::headless_service(o, "iocurve-relay", "relay", false),
        head = job_head(
            o,
            "iocurve-relay",
            "relay",
            n,
            "A relay lost loses its group for the run; it is not started again."
        ),
        // With runAsUser and fsGroup the kubelet makes the token the relay's user's to read.
        enrol = enrol_volumes(0o400),
        enrol_mounts = enrol_mounts(),
    );
}

/// An Indexed Job's first lines, to its template: `n` pods, none started again.
fn job_head(o: &K8sOptions, name: &str, component: &str, n: u32, why: &str) -> String {
    format!(
        "apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: {ns}
  labels:
{l4}spec:
  completionMode: Indexed
  completions: {n}
  parallelism: {n}
  # {why}
  backoffLimitPerIndex: 0
  maxFailedIndexes: {n}
",
        ns = o.namespace,
        l4 = labels(component, 4),
    )
}

/// Where an enrolled pod's container finds its token and the coordinator's CA (the volumes of
/// [`enrol_volumes`]).
fn enrol_mounts() -> String {
    format!(
        "        - name: pod-token
          mountPath: {POD_TOKEN_DIR}
          readOnly: true
        - name: coordinator-ca
          mountPath: {COORDINATOR_CA_DIR}
          readOnly: true
"
    )
}

/// The volumes an enrolled pod needs: its projected token (file mode `mode`) and the CA of the
/// coordinator's certificate.
fn enrol_volumes(mode: u32) -> String {
    format!(
        "      - name: pod-token
        projected:
          defaultMode: {mode}
          sources:
          - serviceAccountToken:
              # For iocurve only, bound to this pod, renewed by the kubelet.
              audience: {audience}
              expirationSeconds: {POD_TOKEN_S}
              path: token
      - name: coordinator-ca
        configMap:
          # The CA of the coordinator's certificate (public): only its holder is shown the token.
          name: iocurve-coordinator-ca
",
        audience = iocurve_net::podtoken::AUDIENCE,
    )
}

fn job(y: &mut String, o: &K8sOptions) {
    let ns = &o.namespace;
    let n = o.agents;
    let devices: Vec<String> =
        o.host_devices.iter().map(|d| format!("{}/{}", o.device_plugin_domain, device_name(d))).collect();
    let _ = write!(
        y,
        "{head}  template:
    metadata:
      labels:
{l8}      annotations:
        prometheus.io/scrape: \"true\"
        prometheus.io/port: \"{METRICS_PORT}\"
        prometheus.io/path: /metrics
    spec:
      restartPolicy: Never
      # Pod I's DNS name: iocurve-agent-I.iocurve-agent.{ns}.svc, what the coordinator dials.
      subdomain: iocurve-agent
      serviceAccountName: {account}
      automountServiceAccountToken: false
      enableServiceLinks: false
{affinity}      securityContext:
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
{resources}{security}",
        account = iocurve_net::podtoken::SERVICE_ACCOUNT,
        l8 = labels("agent", 8),
        head = job_head(
            o,
            "iocurve-agent",
            "agent",
            n,
            "A pod that fails is not started again (a new pod would not be the run's) and the others go\n  # on: the run counts it lost, as --on-host-loss continue does (Kubernetes 1.29 or later).",
        ),
        affinity = affinity(o),
        image = q(&o.image),
        args = list(&agent_args(o), 8),
        resources = resources(&o.agent_cpu, &o.agent_memory, &devices, 8),
        security = super::agent_security(o),
    );
    if o.host_devices.is_empty() {
        let _ = write!(y, "        volumeDevices:\n        - name: data\n          devicePath: {}\n", q(DEVICE_PATH));
    }
    let _ = write!(
        y,
        "        volumeMounts:
{enrol_mounts}        - name: metrics-token
          mountPath: {METRICS_CREDENTIALS}
          readOnly: true
        - name: state
          mountPath: {STATE_DIR}
      volumes:
{enrol}      - name: metrics-token
        secret:
          # The scrapers' read-only token, the same on every agent.
          secretName: iocurve-metrics
          defaultMode: 256
      - name: state
        emptyDir: {{}}
",
        enrol = enrol_volumes(0o400),
        enrol_mounts = enrol_mounts(),
    );
    if o.host_devices.is_empty() {
        // A raw block volume of the pod's own, made with the pod and deleted with it.
        let _ = write!(
            y,
            "      - name: data
        ephemeral:
          volumeClaimTemplate:
            metadata:
              labels:
{l16}            spec:
              accessModes: [\"ReadWriteOnce\"]
              volumeMode: Block
{class}              resources:
                requests:
                  storage: {size}
",
            l16 = labels("agent", 16),
            class = o
                .storage_class
                .as_ref()
                .map(|c| format!("              storageClassName: {}\n", q(c)))
                .unwrap_or_default(),
            size = q(&o.volume_size)
        );
    }
}
