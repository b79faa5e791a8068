//! `iocurve certs init DIR`: a certificate authority, an agent (server) certificate and a
//! coordinator (client) certificate for a test cluster, and a random token. Production sites
//! bring their own PKI; these files are for labs and CI.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, SanType};

use crate::NetError;

/// The name the agent certificate carries; clients check it whatever address they dial.
pub const AGENT_NAME: &str = "iocurve-agent";

/// The files `init` writes, by role.
pub struct CertFiles {
    pub ca: PathBuf,
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

/// Writes a CA, an agent certificate (for `AGENT_NAME`, localhost, 127.0.0.1 and `names`), a
/// client certificate and a token into `dir`, which must not hold them already.
pub fn init(dir: &Path, names: &[String]) -> Result<CertFiles, NetError> {
    let files = CertFiles::in_dir(dir);
    if files.ca.exists() || files.token.exists() {
        return Err(NetError::Input(format!(
            "{} already holds certificates: use another directory (or remove them)",
            dir.display()
        )));
    }
    std::fs::create_dir_all(dir).map_err(|e| NetError::Input(format!("cannot create {}: {e}", dir.display())))?;

    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "iocurve test cluster CA");
    let ca_key = KeyPair::generate().map_err(err)?;
    let ca_cert = ca.self_signed(&ca_key).map_err(err)?;
    let issuer = Issuer::new(ca, ca_key);

    let mut sans = vec![AGENT_NAME.to_string(), "localhost".to_string()];
    sans.extend(names.iter().filter(|n| n.parse::<IpAddr>().is_err()).cloned());
    let mut agent = CertificateParams::new(sans).map_err(err)?;
    agent.subject_alt_names.push(SanType::IpAddress("127.0.0.1".parse().expect("an address")));
    for n in names {
        if let Ok(ip) = n.parse::<IpAddr>() {
            agent.subject_alt_names.push(SanType::IpAddress(ip));
        }
    }
    agent.distinguished_name.push(DnType::CommonName, AGENT_NAME);
    agent.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let agent_key = KeyPair::generate().map_err(err)?;
    let agent_cert = agent.signed_by(&agent_key, &issuer).map_err(err)?;

    let mut client = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    client.distinguished_name.push(DnType::CommonName, "iocurve coordinator");
    client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let client_key = KeyPair::generate().map_err(err)?;
    let client_cert = client.signed_by(&client_key, &issuer).map_err(err)?;

    let token = crate::auth::random_token()?;
    let write = |p: &Path, text: &str, secret: bool| -> Result<(), NetError> {
        std::fs::write(p, text).map_err(|e| NetError::Input(format!("cannot write {}: {e}", p.display())))?;
        if secret {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| NetError::Input(format!("cannot restrict {}: {e}", p.display())))?;
        }
        Ok(())
    };
    write(&files.ca, &ca_cert.pem(), false)?;
    write(&files.agent_cert, &agent_cert.pem(), false)?;
    write(&files.agent_key, &agent_key.serialize_pem(), true)?;
    write(&files.client_cert, &client_cert.pem(), false)?;
    write(&files.client_key, &client_key.serialize_pem(), true)?;
    write(&files.token, &format!("{token}\n"), true)?;
    Ok(files)
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
