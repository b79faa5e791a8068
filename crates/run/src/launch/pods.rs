//! `run --launch pods` (issue 46): the agents already wait in Kubernetes pods (an Indexed Job
//! of `iocurve agent --enrol`, `deploy kubernetes --indexed`); the coordinator enrols each —
//! checks its pod's service-account token against the cluster's keys and the name it dialled,
//! and gives it this run's certificate and token (`iocurve_net::enrol`) — then drives them as
//! launched agents. Nothing is started or stopped here: the pods end with the run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use iocurve_net::certs::RunCredentials;
use iocurve_net::podtoken::PodKeys;

use super::{Issued, Launch, LaunchOptions, MAX_STARTING, Slots, Started, join_host_port, tls_host};
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
    let creds = RunCredentials::issue(opts.lifetime)?;
    let slots = Arc::new(Slots::new(MAX_STARTING));
    let mut handles = Vec::new();
    for host in hosts {
        let host_creds = creds.for_host(tls_host(host))?;
        let (pods, host, cancel, slots, port) = (pods.clone(), host.clone(), cancel.clone(), slots.clone(), opts.port);
        handles.push(std::thread::spawn(move || {
            let _slot = slots.take();
            let t = Instant::now();
            let addr = join_host_port(&host, port);
            let until = Instant::now() + pods.wait;
            let r = loop {
                match iocurve_net::enrol::enrol(
                    &addr,
                    tls_host(&host),
                    (&pods.client.0, &pods.client.1),
                    &pods.keys,
                    &host_creds,
                ) {
                    Ok(()) => break Ok(addr),
                    Err(f) if f.again && Instant::now() + AGAIN < until && !cancel.sleep(AGAIN) => {}
                    Err(f) => break Err(f.why),
                }
            };
            (host, r, t.elapsed())
        }));
    }
    let (mut addresses, mut failed, mut slowest) = (Vec::new(), Vec::new(), (String::new(), Duration::ZERO));
    for h in handles {
        let (host, r, took) = h.join().map_err(|_| Error::Runtime("an enrolment thread panicked".into()))?;
        match r {
            Ok(addr) => {
                if took > slowest.1 {
                    slowest = (host.clone(), took);
                }
                addresses.push((host, addr));
            }
            Err(why) => failed.push((host, why)),
        }
    }
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
        issued: Issued::of(creds, false),
        relays: Vec::new(),
    })
}
