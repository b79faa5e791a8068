//! `iocurve certs`: a certificate authority for a cluster of agents, kept in one directory on
//! the coordinator's side. `init` makes the CA (its key kept, private), a shared agent
//! certificate, a coordinator (client) certificate and a token; `add-host NAME` issues an agent
//! certificate that names one host, so that the coordinator, which checks the name it dialled,
//! knows which host answers. Certificates are valid for a year (the CA for ten). Sites with a
//! PKI of their own bring its files instead.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, SanType};

use crate::NetError;

/// The name the shared agent certificate carries besides localhost and 127.0.0.1; a coordinator
/// given `--tls-name iocurve-agent` accepts it from any host.
pub const AGENT_NAME: &str = "iocurve-agent";

/// The CA's distinguished name (common name) as `init` made it. `rotate` makes a new CA whose
/// name adds a random tag, so that the old CA's certificates name an issuer the new one is not
/// (they fail as "unknown issuer", not as a bad signature). Issuing later rebuilds the issuer
/// from the name in [`CA_NAME_FILE`] (this one where there is none) and the kept key: the issuer
/// name and key identifier of a new certificate then match the CA certificate's.
const CA_NAME: &str = "iocurve test cluster CA";

/// Where the CA's common name is recorded, for issuing later.
const CA_NAME_FILE: &str = "ca.name";

/// How long certificates are valid, in days: a year for agents and coordinators, ten for the CA.
const LEAF_DAYS: i64 = 365;
const CA_DAYS: i64 = 3650;

/// The files `init` writes, by role.
pub struct CertFiles {
    pub ca: PathBuf,
    pub ca_key: PathBuf,
    pub agent_cert: PathBuf,
    pub agent_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    pub token: PathBuf,
}

impl CertFiles {
    pub fn in_dir(dir: &Path) -> CertFiles {
        CertFiles {
            ca: dir.join("ca.pem"),
            ca_key: dir.join("ca.key"),
            agent_cert: dir.join("agent.pem"),
            agent_key: dir.join("agent.key"),
            client_cert: dir.join("client.pem"),
            client_key: dir.join("client.key"),
            token: dir.join("token"),
        }
    }
}

fn err(e: rcgen::Error) -> NetError {
    NetError::Failed(format!("cannot make certificates: {e}"))
}

/// Sets a certificate's validity: from a day back (a host whose clock is a little behind
/// accepts it at once) to `days` from today (UTC).
fn valid_for(p: &mut CertificateParams, days: i64) {
    let today =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64 / 86_400);
    let date = |day: i64| {
        let (y, m, d) = iocurve_stats::date::civil_from_days(day);
        rcgen::date_time_ymd(y as i32, m as u8, d as u8)
    };
    p.not_before = date(today - 1);
    p.not_after = date(today + days);
}

fn ca_params(name: &str) -> Result<CertificateParams, NetError> {
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, name);
    valid_for(&mut ca, CA_DAYS);
    Ok(ca)
}

/// An agent (server) certificate for `names` (IP addresses among them become IP names).
fn agent_params(common_name: &str, names: &[String]) -> Result<CertificateParams, NetError> {
    let dns: Vec<String> = names.iter().filter(|n| n.parse::<IpAddr>().is_err()).cloned().collect();
    let mut agent = CertificateParams::new(dns).map_err(err)?;
    for n in names {
        if let Ok(ip) = n.parse::<IpAddr>() {
            agent.subject_alt_names.push(SanType::IpAddress(ip));
        }
    }
    agent.distinguished_name.push(DnType::CommonName, common_name);
    agent.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    valid_for(&mut agent, LEAF_DAYS);
    Ok(agent)
}

/// The shared agent certificate's names: `AGENT_NAME`, localhost, 127.0.0.1 and `names`.
fn shared_agent_names(names: &[String]) -> Vec<String> {
    let mut all = vec![AGENT_NAME.to_string(), "localhost".to_string(), "127.0.0.1".to_string()];
    all.extend(names.iter().cloned());
    all
}

/// A coordinator (client) certificate, its validity to be set.
fn client_params() -> Result<CertificateParams, NetError> {
    let mut client = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    client.distinguished_name.push(DnType::CommonName, "iocurve coordinator");
    client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    Ok(client)
}

/// The CA kept in a `certs init` directory, to issue with (`command` names who needs it).
fn kept_issuer(files: &CertFiles, command: &str) -> Result<Issuer<'static, KeyPair>, NetError> {
    let key_pem = std::fs::read_to_string(&files.ca_key).map_err(|e| {
        NetError::Input(format!(
            "cannot read the CA key {} ({e}): {command} needs a directory made by `iocurve certs init` (which keeps it)",
            files.ca_key.display()
        ))
    })?;
    let ca_key = KeyPair::from_pem(&key_pem)
        .map_err(|e| NetError::Input(format!("{} holds no key: {e}", files.ca_key.display())))?;
    let name = std::fs::read_to_string(files.ca.with_file_name(CA_NAME_FILE))
        .ok()
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| CA_NAME.to_string());
    Ok(Issuer::new(ca_params(&name)?, ca_key))
}

/// Writes `text` to `p`; `secret` files are readable by their owner only, from the start.
fn write(p: &Path, text: &str, secret: bool) -> Result<(), NetError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(if secret { 0o600 } else { 0o644 })
        .open(p)
        .map_err(|e| NetError::Input(format!("cannot write {}: {e}", p.display())))?;
    f.write_all(text.as_bytes()).map_err(|e| NetError::Input(format!("cannot write {}: {e}", p.display())))
}

/// Writes a CA (certificate and key), a shared agent certificate (for `AGENT_NAME`, localhost,
/// 127.0.0.1 and `names`), a client certificate and a token into `dir`, which must not hold
/// them already.
pub fn init(dir: &Path, names: &[String]) -> Result<CertFiles, NetError> {
    let files = CertFiles::in_dir(dir);
    if files.ca.exists() || files.token.exists() {
        return Err(NetError::Input(format!(
            "{} already holds certificates: use another directory (or remove them)",
            dir.display()
        )));
    }
    std::fs::create_dir_all(dir).map_err(|e| NetError::Input(format!("cannot create {}: {e}", dir.display())))?;

    let NewCa { cert_pem: ca_pem, key_pem: ca_key_pem, issuer, .. } = new_ca(CA_NAME)?;

    let agent = agent_params(AGENT_NAME, &shared_agent_names(names))?;
    let agent_key = KeyPair::generate().map_err(err)?;
    let agent_cert = agent.signed_by(&agent_key, &issuer).map_err(err)?;

    let mut client = client_params()?;
    valid_for(&mut client, LEAF_DAYS);
    let client_key = KeyPair::generate().map_err(err)?;
    let client_cert = client.signed_by(&client_key, &issuer).map_err(err)?;

    let token = crate::auth::random_token()?;
    write(&dir.join(NAMES_FILE), &names_text(names), false)?;
    write(&files.ca, &ca_pem, false)?;
    write(&files.ca_key, &ca_key_pem, true)?;
    write(&files.agent_cert, &agent_cert.pem(), false)?;
    write(&files.agent_key, &agent_key.serialize_pem(), true)?;
    write(&files.client_cert, &client_cert.pem(), false)?;
    write(&files.client_key, &client_key.serialize_pem(), true)?;
    write(&files.token, &format!("{token}\n"), true)?;
    Ok(files)
}

/// Issues an agent certificate for host `name` (and `aliases`: further names or addresses of
/// the same host) with the CA kept in `dir`: `dir/hosts/NAME/agent.pem` and `agent.key`, and
/// the host's own token (`token`, derived from the cluster's: see [`crate::auth::host_token`]).
/// Returns the certificate's and the key's paths.
pub fn add_host(dir: &Path, name: &str, aliases: &[String]) -> Result<(PathBuf, PathBuf), NetError> {
    let files = CertFiles::in_dir(dir);
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return Err(NetError::Input(format!("`{name}` is not a host name")));
    }
    let issuer = kept_issuer(&files, "add-host")?;
    let host_dir = dir.join("hosts").join(name);
    if host_dir.join("agent.pem").exists() {
        return Err(NetError::Input(format!(
            "{} exists already: remove it to issue a new certificate for {name}",
            host_dir.join("agent.pem").display()
        )));
    }
    std::fs::create_dir_all(&host_dir)
        .map_err(|e| NetError::Input(format!("cannot create {}: {e}", host_dir.display())))?;
    let mut names = vec![name.to_string()];
    names.extend(aliases.iter().cloned());
    let params = agent_params(name, &names)?;
    let key = KeyPair::generate().map_err(err)?;
    let cert = params.signed_by(&key, &issuer).map_err(err)?;
    let (cert_path, key_path) = (host_dir.join("agent.pem"), host_dir.join("agent.key"));
    write(&cert_path, &cert.pem(), false)?;
    write(&key_path, &key.serialize_pem(), true)?;
    write(&host_dir.join(NAMES_FILE), &names_text(aliases), false)?;
    // The host's own token, for coordinators run with --token-per-host.
    let cluster_token = crate::auth::read_token(&files.token)?;
    write(&host_dir.join("token"), &format!("{}\n", crate::auth::host_token(&cluster_token, name)), true)?;
    Ok((cert_path, key_path))
}

/// Where `init` and `add-host` record the further names a certificate carries, one per line,
/// so that `rotate` issues the same names again.
const NAMES_FILE: &str = "names";

fn names_text(names: &[String]) -> String {
    names.iter().map(|n| format!("{n}\n")).collect()
}

fn read_names(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

/// Writes `text` to `p` in place of what it held: a new file beside it, renamed over it, so
/// that a reader sees the old file or the new one, never half of either.
fn replace(p: &Path, text: &str, secret: bool) -> Result<(), NetError> {
    let tmp = p.with_extension("rotating");
    let _ = std::fs::remove_file(&tmp);
    write(&tmp, text, secret)?;
    std::fs::rename(&tmp, p).map_err(|e| NetError::Input(format!("cannot replace {}: {e}", p.display())))
}

/// A new CA: its certificate, its key and the issuer they make.
struct NewCa {
    name: String,
    cert_pem: String,
    key_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

fn new_ca(name: &str) -> Result<NewCa, NetError> {
    let params = ca_params(name)?;
    let key = KeyPair::generate().map_err(err)?;
    let cert = params.self_signed(&key).map_err(err)?;
    Ok(NewCa {
        name: name.to_string(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        issuer: Issuer::new(params, key),
    })
}

/// What `rotate` renewed.
pub struct Rotated {
    /// Hosts whose own certificate and token were issued again.
    pub hosts: Vec<String>,
}

/// Replaces everything in `dir` (a directory `certs init` made) with new credentials from a new
/// CA: the CA itself (`ca.pem`, `ca.key`, a new key and name), the shared agent certificate (for
/// `AGENT_NAME`, localhost, 127.0.0.1, the names `init` recorded and `more`), the
/// coordinator's certificate, a new token, and every host's certificate (its recorded names)
/// and token (derived from the new one). Each with a new key and a year's validity; each file
/// replaced whole.
///
/// The old CA is trusted nowhere that has the new files: a coordinator with the new `ca.pem`
/// refuses every agent certificate the old CA signed (a host's old key in an impostor's hands
/// among them: issue 35, finding 3), an agent with the new `ca.pem` as `--client-ca` refuses the
/// old coordinator certificate, and the old token opens no agent that has its new token.
pub fn rotate(dir: &Path, more: &[String]) -> Result<Rotated, NetError> {
    let files = CertFiles::in_dir(dir);
    // Only a directory `certs init` made (it keeps the CA key): a site's own PKI is not ours to
    // replace.
    kept_issuer(&files, "rotate")?;
    let mut names = read_names(&dir.join(NAMES_FILE));
    for n in more {
        if !names.contains(n) {
            names.push(n.clone());
        }
    }
    let tag = crate::auth::random_token()?;
    let ca = new_ca(&format!("{CA_NAME} {}", &tag[..12]))?;
    let agent_key = KeyPair::generate().map_err(err)?;
    let agent_cert =
        agent_params(AGENT_NAME, &shared_agent_names(&names))?.signed_by(&agent_key, &ca.issuer).map_err(err)?;
    let mut client = client_params()?;
    valid_for(&mut client, LEAF_DAYS);
    let client_key = KeyPair::generate().map_err(err)?;
    let client_cert = client.signed_by(&client_key, &ca.issuer).map_err(err)?;
    let token = crate::auth::random_token()?;
    // Every host's new files first, in memory: a failure leaves the directory as it was.
    let mut hosts = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir.join("hosts")) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !e.path().join("agent.pem").exists() {
                continue;
            }
            let mut host_names = vec![name.clone()];
            host_names.extend(read_names(&e.path().join(NAMES_FILE)));
            let key = KeyPair::generate().map_err(err)?;
            let cert = agent_params(&name, &host_names)?.signed_by(&key, &ca.issuer).map_err(err)?;
            hosts.push((name, e.path(), cert.pem(), key.serialize_pem()));
        }
    }
    hosts.sort();
    replace(&files.agent_cert, &agent_cert.pem(), false)?;
    replace(&files.agent_key, &agent_key.serialize_pem(), true)?;
    replace(&files.client_cert, &client_cert.pem(), false)?;
    replace(&files.client_key, &client_key.serialize_pem(), true)?;
    replace(&dir.join(NAMES_FILE), &names_text(&names), false)?;
    for (name, host_dir, cert, key) in &hosts {
        replace(&host_dir.join("agent.pem"), cert, false)?;
        replace(&host_dir.join("agent.key"), key, true)?;
        replace(&host_dir.join("token"), &format!("{}\n", crate::auth::host_token(&token, name)), true)?;
    }
    // The CA after what it signed, the token last: a rotation cut short (a full disk) is
    // finished by running it again, which needs only a CA key, the old one or the new.
    replace(&dir.join(CA_NAME_FILE), &format!("{}\n", ca.name), false)?;
    replace(&files.ca, &ca.cert_pem, false)?;
    replace(&files.ca_key, &ca.key_pem, true)?;
    replace(&files.token, &format!("{token}\n"), true)?;
    Ok(Rotated { hosts: hosts.into_iter().map(|h| h.0).collect() })
}

/// Reads a PEM file for TLS, naming the option it came from on failure.
pub fn read_pem(path: &Path, option: &str) -> Result<String, NetError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| NetError::Input(format!("cannot read {option} {}: {e}", path.display())))?;
    if !text.contains("-----BEGIN") {
        return Err(NetError::Input(format!("{option} {} is not a PEM file", path.display())));
    }
    Ok(text)
}

/// Credentials that live for one run (`run --launch`): a CA made in memory, never written
/// anywhere, a coordinator certificate from it, a cluster token, and per host an agent
/// certificate naming that host with its own token. Each agent gets only its own key and
/// token; the CA's key and the cluster token stay in the coordinator's memory and go with it.
pub struct RunCredentials {
    pub ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
    pub client_cert_pem: String,
    pub client_key_pem: String,
    /// The cluster token the per-host tokens derive from (see [`crate::auth::host_token`]).
    pub token: String,
    /// Unix seconds after which every certificate of the run is invalid and every launched
    /// agent exits.
    pub expires_unix: u64,
}

impl std::fmt::Debug for RunCredentials {
    /// Never a key or the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RunCredentials {{ expires_unix: {}, .. }}", self.expires_unix)
    }
}

/// What one launched agent receives: its certificate and key, the CA its coordinator's
/// certificate must come from, its token and the moment it all expires.
#[derive(Clone)]
pub struct HostCredentials {
    pub cert_pem: String,
    pub key_pem: String,
    pub client_ca_pem: String,
    pub token: String,
    pub expires_unix: u64,
}

impl std::fmt::Debug for HostCredentials {
    /// Never the key or the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostCredentials {{ expires_unix: {}, .. }}", self.expires_unix)
    }
}

/// Validity from an hour back (a host whose clock is a little behind accepts it at once) to
/// `expires_unix`, to the second.
fn valid_until(p: &mut CertificateParams, now_unix: u64, expires_unix: u64) {
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    p.not_before = epoch + std::time::Duration::from_secs(now_unix.saturating_sub(3600));
    p.not_after = epoch + std::time::Duration::from_secs(expires_unix);
}

impl RunCredentials {
    /// New credentials valid for `lifetime` from now.
    pub fn issue(lifetime: std::time::Duration) -> Result<RunCredentials, NetError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|_| NetError::Failed("this host's clock is before 1970".into()))?
            .as_secs();
        let expires_unix = now + lifetime.as_secs().max(60);
        let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, "iocurve run CA");
        valid_until(&mut ca, now, expires_unix);
        let ca_key = KeyPair::generate().map_err(err)?;
        let ca_cert = ca.self_signed(&ca_key).map_err(err)?;
        let issuer = Issuer::new(ca, ca_key);
        let mut client = client_params()?;
        valid_until(&mut client, now, expires_unix);
        let client_key = KeyPair::generate().map_err(err)?;
        let client_cert = client.signed_by(&client_key, &issuer).map_err(err)?;
        Ok(RunCredentials {
            ca_pem: ca_cert.pem(),
            issuer,
            client_cert_pem: client_cert.pem(),
            client_key_pem: client_key.serialize_pem(),
            token: crate::auth::random_token()?,
            expires_unix,
        })
    }

    /// A hand-started cluster's credentials (`certs init`, issue 46): its CA (certificate and
    /// key) and its cluster token, to mint relays' certificates and delegations with, as a
    /// launch's own do, valid until `expires_unix`. The CA's key stays in this process.
    pub fn of_cluster(
        ca_pem: &str,
        ca_key_pem: &str,
        cluster_token: &str,
        expires_unix: u64,
    ) -> Result<RunCredentials, NetError> {
        let bad = |why: String| NetError::Input(format!("the cluster's CA: {why}"));
        let der = crate::binding::pem_certs(ca_pem, "the cluster's CA")?
            .into_iter()
            .next()
            .ok_or_else(|| bad("no certificate".into()))?;
        let (_, cert) =
            x509_parser::parse_x509_certificate(der.as_ref()).map_err(|e| bad(format!("not a certificate: {e}")))?;
        // What `certs init` makes: a CA named by its common name alone. The issuer must carry
        // the same name for what it signs to chain to the certificate the agents trust.
        let name = cert.subject().iter_common_name().next().and_then(|cn| cn.as_str().ok()).unwrap_or_default();
        if !cert.is_ca() || cert.subject() != cert.issuer() {
            return Err(bad(
                "its first certificate is no CA of its own (give the ca.pem of `iocurve certs init`)".into()
            ));
        }
        if name.is_empty() || cert.subject().iter().count() != 1 {
            return Err(bad("not one made by `iocurve certs init` (its subject is not a common name alone)".into()));
        }
        let key = KeyPair::from_pem(ca_key_pem).map_err(|e| bad(format!("the key is no key: {e}")))?;
        if key.public_key_raw() != cert.public_key().subject_public_key.data.as_ref() {
            return Err(bad(
                "the key is not the certificate's (give the ca.key of the same `certs init` directory)".into()
            ));
        }
        Ok(RunCredentials {
            ca_pem: ca_pem.to_string(),
            issuer: Issuer::new(ca_params(name)?, key),
            client_cert_pem: String::new(),
            client_key_pem: String::new(),
            token: cluster_token.to_string(),
            expires_unix,
        })
    }

    /// The credentials of the agent on `host` (the name or address the coordinator dials).
    pub fn for_host(&self, host: &str) -> Result<HostCredentials, NetError> {
        let now = crate::unix_s();
        let mut params = agent_params(host, &[host.to_string()])?;
        valid_until(&mut params, now, self.expires_unix);
        let key = KeyPair::generate().map_err(err)?;
        let cert = params.signed_by(&key, &self.issuer).map_err(err)?;
        Ok(HostCredentials {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            client_ca_pem: self.ca_pem.clone(),
            token: crate::auth::host_token(&self.token, host),
            expires_unix: self.expires_unix,
        })
    }
}

impl RunCredentials {
    /// The client certificate and key of the relay on `relay` for this run: a name of its own
    /// ("iocurve relay HOST"), client authentication only, valid as long as the run's other
    /// credentials. Its SHA-256 is what the delegations of its children name
    /// ([`crate::delegation::Delegation::relay_certificate`]): the coordinator's own certificate
    /// would let any holder of a delegation act with it.
    pub fn for_relay(&self, relay: &str) -> Result<(String, String), NetError> {
        let now = crate::unix_s();
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        params.distinguished_name.push(DnType::CommonName, format!("iocurve relay {relay}"));
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        valid_until(&mut params, now, self.expires_unix);
        let key = KeyPair::generate().map_err(err)?;
        let cert = params.signed_by(&key, &self.issuer).map_err(err)?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

/// What one relay needs to drive its agents for one run: its client certificate and key for
/// the run, and per agent the delegation and its key (docs/relays.md). It never holds an
/// agent's token.
pub struct RelayGrant {
    pub relay: String,
    pub cert_pem: String,
    pub key_pem: String,
    /// Per agent (the name its credentials were issued for): what the relay proves itself with.
    pub children: Vec<(String, crate::delegation::Minted)>,
}

impl std::fmt::Debug for RelayGrant {
    /// Never a key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RelayGrant {{ relay: {}, {} agents, .. }}", self.relay, self.children.len())
    }
}

impl RunCredentials {
    /// The grant of the relay on `relay` over the agents `children` (the names their
    /// credentials were issued for, [`RunCredentials::for_host`]) for run `run_key`, valid from a
    /// minute ago (a child's clock a little behind) to `not_after_unix`, never beyond the run's
    /// credentials. Each delegation's key is derived from that agent's own token here, where
    /// the cluster token is.
    pub fn relay_grant(
        &self,
        relay: &str,
        children: &[String],
        run_key: u32,
        not_after_unix: u64,
    ) -> Result<RelayGrant, NetError> {
        let mut seen = std::collections::HashSet::new();
        if let Some(twice) = children.iter().find(|c| !seen.insert(c.as_str())) {
            return Err(NetError::Input(format!("relay {relay}: agent {twice} is named twice in its group")));
        }
        let now = crate::unix_s();
        let not_after_unix = not_after_unix.min(self.expires_unix);
        if not_after_unix <= now {
            return Err(NetError::Input(format!("relay {relay}: a delegation that ends before it begins")));
        }
        let (cert_pem, key_pem) = self.for_relay(relay)?;
        let digest = crate::delegation::certificate_digest(
            crate::binding::pem_certs(&cert_pem, "the relay certificate just issued")?[0].as_ref(),
        );
        let children = children
            .iter()
            .map(|child| {
                let d = crate::delegation::Delegation {
                    run_key,
                    relay_certificate: digest,
                    child: child.clone(),
                    not_before_unix: now.saturating_sub(60),
                    not_after_unix,
                    nonce: crate::delegation::nonce()?,
                };
                Ok((child.clone(), crate::delegation::mint(&d, &crate::auth::host_token(&self.token, child))))
            })
            .collect::<Result<_, NetError>>()?;
        Ok(RelayGrant { relay: relay.to_string(), cert_pem, key_pem, children })
    }
}

/// The common name of the first certificate in `cert_pem`: an agent's own name where its
/// credentials were issued for its host (`certs add-host NAME`, `run --launch`); None where
/// it has none or the cluster's shared one ([`AGENT_NAME`]), which names no host.
pub fn own_name(cert_pem: &str) -> Option<String> {
    let der = crate::binding::pem_certs(cert_pem, "").ok()?.into_iter().next()?;
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).ok()?;
    let cn = cert.subject().iter_common_name().next()?.as_str().ok()?.to_string();
    (cn != AGENT_NAME && !cn.is_empty()).then_some(cn)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `run --relays` mints relays' grants from the cluster's CA (`--ca`, `--relay-ca-key`): a
    /// leaf certificate given as the CA (with its own key), a key of another certificate and a
    /// file with no certificate are refused with what to give instead; `certs init`'s pair mints.
    #[test]
    fn only_the_clusters_own_ca_and_key_mint_relays() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("certs");
        let files = init(&d, &["lg0.lab".into()]).unwrap();
        let read = |p: &Path| std::fs::read_to_string(p).unwrap();
        let until = crate::unix_s() + 600;
        let refused = |ca: &str, key: &str| match RunCredentials::of_cluster(ca, key, "t", until) {
            Err(NetError::Input(m)) => m,
            Err(e) => panic!("not bad input: {e}"),
            Ok(_) => panic!("minted from {ca:.40}"),
        };
        let leaf = refused(&read(&files.agent_cert), &read(&files.agent_key));
        assert!(
            leaf.contains("its first certificate is no CA of its own (give the ca.pem of `iocurve certs init`)"),
            "{leaf}"
        );
        let other = refused(&read(&files.ca), &read(&files.client_key));
        assert!(other.contains("the key is not the certificate's"), "{other}");
        let none = refused("no certificate here", &read(&files.ca_key));
        assert_eq!(none, "the cluster's CA: no certificate in it");
        let creds = RunCredentials::of_cluster(&read(&files.ca), &read(&files.ca_key), "t", until).unwrap();
        assert!(creds.relay_grant("lg0.lab", &["lg1.lab".into()], 7, until).is_ok());
    }

    fn openssl(args: &[&str], cert: &Path) -> String {
        let o = std::process::Command::new("openssl").args(args).arg(cert).output().unwrap();
        format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
    }

    /// Issue 35, finding 3: `rotate` kept the CA, so a host's old key still passed the
    /// coordinator's certificate check after it. It makes a new CA now and issues everything
    /// from it: the old certificates fail against the new CA; the new ones (and those
    /// `add-host` issues later, from the new CA key) pass.
    #[test]
    fn regression_rotate_issues_everything_again_from_a_new_ca() {
        iocurve_testkit::needs_tool!("openssl");
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("certs");
        let files = init(&d, &["lg0.lab".into()]).unwrap();
        add_host(&d, "lg1.lab", &["10.0.0.1".into()]).unwrap();
        let read = |p: &Path| std::fs::read_to_string(p).unwrap();
        let host = d.join("hosts/lg1.lab");
        let secrets = [
            &files.ca_key,
            &files.agent_key,
            &files.client_key,
            &files.token,
            &host.join("agent.key"),
            &host.join("token"),
        ];
        let before: Vec<String> = secrets.iter().map(|p| read(p)).collect();
        let old = dir.path().join("old");
        std::fs::create_dir(&old).unwrap();
        for (from, to) in [(&files.ca, "ca.pem"), (&files.agent_cert, "agent.pem"), (&files.client_cert, "client.pem")]
        {
            std::fs::copy(from, old.join(to)).unwrap();
        }
        std::fs::copy(host.join("agent.pem"), old.join("host.pem")).unwrap();
        let r = rotate(&d, &["lg9.lab".into()]).unwrap();
        assert_eq!(r.hosts, ["lg1.lab"]);
        let after: Vec<String> = secrets.iter().map(|p| read(p)).collect();
        for (b, a) in before.iter().zip(&after) {
            assert_ne!(b, a, "every key and token is new");
        }
        assert_ne!(read(&files.ca), read(&old.join("ca.pem")), "a new CA");
        let token = crate::auth::read_token(&files.token).unwrap();
        assert_eq!(read(&host.join("token")).trim(), crate::auth::host_token(&token, "lg1.lab"), "host tokens follow");
        for p in secrets {
            assert_eq!(std::fs::metadata(p).unwrap().permissions().mode() & 0o777, 0o600, "{}", p.display());
        }
        // The same names as before, and the new one; signed by the new CA, and only by it.
        let shared = openssl(&["x509", "-noout", "-ext", "subjectAltName", "-in"], &files.agent_cert);
        for n in ["iocurve-agent", "localhost", "127.0.0.1", "lg0.lab", "lg9.lab"] {
            assert!(shared.contains(n), "{n}: {shared}");
        }
        let own = openssl(&["x509", "-noout", "-ext", "subjectAltName", "-in"], &host.join("agent.pem"));
        assert!(own.contains("lg1.lab") && own.contains("10.0.0.1"), "{own}");
        // Issued later from the new CA key, with the new CA's name.
        add_host(&d, "lg2.lab", &[]).unwrap();
        let verify = |ca: &Path, cert: &Path| openssl(&["verify", "-CAfile", ca.to_str().unwrap()], cert);
        for cert in [&files.agent_cert, &files.client_cert, &host.join("agent.pem"), &d.join("hosts/lg2.lab/agent.pem")]
        {
            let v = verify(&files.ca, cert);
            assert!(v.contains(": OK"), "{v}");
            assert!(!verify(&old.join("ca.pem"), cert).contains(": OK"), "the old CA does not vouch for it");
        }
        for cert in ["agent.pem", "client.pem", "host.pem"] {
            let v = verify(&files.ca, &old.join(cert));
            assert!(!v.contains(": OK"), "the old {cert} fails against the new CA: {v}");
        }
        let leftovers: Vec<_> =
            walk(&d).into_iter().filter(|p| p.extension().is_some_and(|e| e == "rotating")).collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        // Without the CA key: a clear refusal, nothing changed.
        std::fs::remove_file(&files.ca_key).unwrap();
        let e = rotate(&d, &[]).err().unwrap().to_string();
        assert!(e.contains("rotate needs a directory made by `iocurve certs init`"), "{e}");
        assert_eq!(crate::auth::read_token(&files.token).unwrap(), token);
    }

    fn walk(d: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(d).unwrap().flatten() {
            if e.path().is_dir() {
                out.extend(walk(&e.path()));
            } else {
                out.push(e.path());
            }
        }
        out
    }
}
