//! `run --launch pods` (issue 46): the agents already wait in Kubernetes pods (an Indexed Job
//! of `iocurve agent --enrol`, `deploy kubernetes --indexed`); the coordinator enrols each —
//! checks its pod's service-account token against the cluster's keys and the name it dialled,
//! and gives it this run's certificate and token (`iocurve_net::enrol`) — then drives them as
//! launched agents. Nothing is started or stopped here: the pods end with the run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use iocurve_net::certs::RunCredentials;
use iocurve_net::podtoken::PodKeys;

use super::{
    Issued, Launch, LaunchOptions, MAX_STARTING, Slots, Started, join_host_port, relay_groups, settle_relays, tls_host,
};
use crate::events::RunEvent;
use crate::{Cancel, Error, Observer};

/// What enrolling the pods takes.
pub struct Pods {
    /// The cluster's service-account keys (and issuer).
    pub keys: PodKeys,
    /// The coordinator's certificate and key (PEM), from the CA the agents' `--client-ca` names.
    pub client: (String, String),
    /// How long a pod not answering yet is tried again (`--wait-for-agents-s`).
    pub wait: Duration,
    /// With `relay_every`: the relay pods' DNS names (`--relays`, an Indexed Job of
    /// `iocurve agent --enrol --relay`), one per group of hosts in their order.
    pub relays: Vec<String>,
}

impl std::fmt::Debug for Pods {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pods {{ keys: {}, wait: {:?}, .. }}", self.keys.len(), self.wait)
    }
}

impl PartialEq for Pods {
    fn eq(&self, other: &Pods) -> bool {
        std::ptr::eq(self, other)
    }
}

/// What an enrolled pod waits for its coordinator's first call beyond the rest of the
/// enrolment: the coordinator's connecting to every pod.
const CLAIM_MARGIN: Duration = Duration::from_secs(60);

/// Pods not answering yet are tried again this often.
const AGAIN: Duration = Duration::from_secs(2);

/// Enrols every pod of `hosts`, [`MAX_STARTING`] at once.
pub fn start(
    opts: &LaunchOptions,
    pods: &Arc<Pods>,
    hosts: &[String],
    cancel: &Cancel,
    obs: &mut dyn Observer,
) -> Result<Started, Error> {
    let t0 = Instant::now();
    // Names a pod's token cannot match are refused before anything is dialled.
    for host in hosts {
        iocurve_net::podtoken::pod_host(tls_host(host)).map_err(Error::Usage)?;
    }
    let groups = if opts.relay_every == 0 {
        Vec::new()
    } else {
        let groups = relay_groups(hosts, opts.relay_every as usize, None).map_err(Error::Usage)?;
        if groups.len() != pods.relays.len() {
            return Err(Error::Usage(format!(
                "--relays: {} pods in groups of {} (--relay-every) make {} groups, and {} relay pods were given: give one per group",
                hosts.len(),
                opts.relay_every,
                groups.len(),
                pods.relays.len()
            )));
        }
        for r in &pods.relays {
            iocurve_net::podtoken::pod_host(tls_host(r)).map_err(Error::Usage)?;
            if hosts.contains(r) {
                return Err(Error::Usage(format!(
                    "--relays {r} is one of the hosts: a relay is a pod of its own (`agent --enrol --relay`)"
                )));
            }
        }
        super::hostlist::check_unique(&pods.relays, "--relays (each relay pod drives a group of its own)")
            .map_err(Error::Usage)?;
        groups
    };
    if opts.relay_every == 0 && !pods.relays.is_empty() {
        return Err(Error::Usage("--relays: relay pods drive groups of --relay-every N hosts: give it".into()));
    }
    let creds = RunCredentials::issue(opts.lifetime)?;
    // Every pod is tried until one deadline: the whole enrolment takes `wait` (and a last try)
    // however many pods there are, and the first pods enrolled wait no longer for their run.
    let until = t0 + pods.wait;
    let slots = Arc::new(Slots::new(MAX_STARTING));
    let mut handles = Vec::new();
    // Relays first (a relay of group g is `Some(g)`), then the hosts: as `--launch ssh` does.
    let named: Vec<(Option<usize>, &String)> =
        pods.relays.iter().enumerate().map(|(g, r)| (Some(g), r)).chain(hosts.iter().map(|h| (None, h))).collect();
    for (relay, host) in named {
        let host_creds = creds.for_host(tls_host(host))?;
        let (pods, host, cancel, slots, port) = (pods.clone(), host.clone(), cancel.clone(), slots.clone(), opts.port);
        let handle = std::thread::spawn(move || {
            let addr = join_host_port(&host, port);
            let r = loop {
                // A slot for each try, not for the wait between: pods still starting do not
                // hold up those that are up.
                let tried = {
                    let _slot = slots.take();
                    iocurve_net::enrol::enrol(
                        &addr,
                        tls_host(&host),
                        (&pods.client.0, &pods.client.1),
                        &pods.keys,
                        &host_creds,
                        // The coordinator dials once the last pod is enrolled (or the wait is
                        // over), and takes a moment to: what is left of the wait, and a minute.
                        until.saturating_duration_since(Instant::now()) + CLAIM_MARGIN,
                    )
                };
                match tried {
                    Ok(()) => break Ok(addr),
                    Err(f) if f.again && Instant::now() + AGAIN < until && !cancel.sleep(AGAIN) => {}
                    Err(f) => break Err(f.why),
                }
            };
            (host, r, t0.elapsed())
        });
        handles.push((relay, handle));
    }
    let (mut addresses, mut failed, mut slowest) = (Vec::new(), Vec::new(), (String::new(), Duration::ZERO));
    let mut relay_at: Vec<Result<String, String>> = vec![Err(String::new()); groups.len()];
    for (relay, h) in handles {
        let (host, r, took) = h.join().map_err(|_| Error::Runtime("an enrolment thread panicked".into()))?;
        // The slowest host to be enrolled (waits and tries included), as a launch names its
        // slowest host; relays are not hosts.
        if relay.is_none() && r.is_ok() && took > slowest.1 {
            slowest = (host.clone(), took);
        }
        match (relay, r) {
            (Some(g), r) => relay_at[g] = r,
            (None, Ok(addr)) => addresses.push((host, addr)),
            (None, Err(why)) => failed.push((host, why)),
        }
    }
    let (relays, places) = settle_relays(&groups, relay_at, |g| pods.relays[g].clone(), &mut addresses, &mut failed);
    if cancel.is_cancelled() {
        return Err(Error::Interrupted("interrupted while enrolling the pods: nothing ran".into()));
    }
    if !addresses.is_empty() {
        obs.event(&RunEvent::AgentsLaunched {
            launched: addresses.len(),
            hosts: hosts.len(),
            method: "pods".into(),
            seconds: t0.elapsed().as_secs_f64(),
            copy: "enrolled by their pods' service-account tokens".into(),
            slowest: slowest.0,
            slowest_s: slowest.1.as_secs_f64(),
            lifetime_s: opts.lifetime.as_secs_f64(),
        });
    }
    Ok(Started {
        launch: Launch { agents: Vec::new(), stopped: false },
        addresses,
        failed,
        issued: Issued::of(creds, opts.relay_every > 0),
        relays,
        places,
    })
}
