//! How a launched agent (`iocurve agent --launched`, started by `run --launch`) gets its
//! credentials: one JSON line on its standard input — certificate, key, the CA of the
//! coordinator's certificate, token, expiry — written by the coordinator through the launch
//! channel (SSH, srun). Nothing is written to the host's disk. The input then stays open: it is
//! the agent's tie to its coordinator, and its end (the coordinator exited or was killed, the
//! channel died) ends the agent.

use std::io::BufRead;

use crate::NetError;
use crate::certs::HostCredentials;

/// The longest credentials line read: certificates and keys take about 2 KiB.
pub const MAX_LINE: usize = 64 * 1024;

/// The line that says where a launched agent listens, the first it prints on its standard
/// output: `iocurve-launched port=PORT pid=PID`.
pub const READY_PREFIX: &str = "iocurve-launched port=";

/// The credentials as the one line the agent reads.
pub fn encode(c: &HostCredentials) -> String {
    encode_claim(c, None)
}

/// [`encode`], with how long the agent is to wait for its coordinator's first call where that
/// is not [`crate::agent::UNCLAIMED`] (an enrolled pod's, [`crate::enrol`]).
pub fn encode_claim(c: &HostCredentials, claim_within_s: Option<u64>) -> String {
    let mut v = serde_json::json!({
        "cert_pem": c.cert_pem,
        "key_pem": c.key_pem,
        "client_ca_pem": c.client_ca_pem,
        "token": c.token,
        "expires_unix": c.expires_unix,
    });
    if let Some(s) = claim_within_s {
        v["claim_within_s"] = s.into();
    }
    format!("{v}\n")
}

/// Reads the credentials line: at most [`MAX_LINE`] bytes, every field present and of its type.
pub fn read(input: &mut impl BufRead) -> Result<HostCredentials, NetError> {
    let mut line = Vec::new();
    std::io::Read::take(&mut *input, MAX_LINE as u64 + 1)
        .read_until(b'\n', &mut line)
        .map_err(|e| NetError::Input(format!("cannot read the credentials on standard input: {e}")))?;
    if line.is_empty() {
        return Err(NetError::Input(
            "--launched: standard input ended before the credentials came (`run --launch` writes them; an agent started by hand takes --token-file and --tls-cert instead)".into(),
        ));
    }
    if line.len() > MAX_LINE {
        return Err(NetError::Input(format!("--launched: the credentials line is longer than {MAX_LINE} bytes")));
    }
    let v: serde_json::Value = serde_json::from_slice(&line)
        .map_err(|e| NetError::Input(format!("--launched: the credentials line is not JSON: {e}")))?;
    let text = |k: &str| -> Result<String, NetError> {
        v.get(k)
            .and_then(|x| x.as_str())
            .map(str::to_string)
            .ok_or_else(|| NetError::Input(format!("--launched: the credentials lack `{k}`")))
    };
    let c = HostCredentials {
        cert_pem: text("cert_pem")?,
        key_pem: text("key_pem")?,
        client_ca_pem: text("client_ca_pem")?,
        token: text("token")?,
        expires_unix: v
            .get("expires_unix")
            .and_then(|x| x.as_u64())
            .ok_or_else(|| NetError::Input("--launched: the credentials lack `expires_unix`".into()))?,
    };
    if c.token.len() < crate::auth::MIN_TOKEN_LEN {
        return Err(NetError::Input("--launched: the token is too short".into()));
    }
    for (k, pem) in [("cert_pem", &c.cert_pem), ("key_pem", &c.key_pem), ("client_ca_pem", &c.client_ca_pem)] {
        if !pem.contains("-----BEGIN") {
            return Err(NetError::Input(format!("--launched: `{k}` is not PEM")));
        }
    }
    Ok(c)
}

/// What the directory a coordinator copies its binary into is called on a host
/// (`$TMPDIR/iocurve-launch.XXXXXXXX`, made by mktemp); the copy inside is `iocurve`.
pub const COPY_DIR_PREFIX: &str = "iocurve-launch.";

/// The ready line for `port`.
pub fn ready_line(port: u16) -> String {
    format!("{READY_PREFIX}{port} pid={}", std::process::id())
}

/// The port in a ready line, None for any other line.
pub fn parse_ready(line: &str) -> Option<u16> {
    line.trim().strip_prefix(READY_PREFIX)?.split(' ').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds() -> HostCredentials {
        let run = crate::certs::RunCredentials::issue(std::time::Duration::from_secs(3600)).unwrap();
        run.for_host("lg1.lab").unwrap()
    }

    #[test]
    fn a_bundle_reads_back_as_written() {
        let c = creds();
        let line = encode(&c);
        assert_eq!(line.matches('\n').count(), 1, "one line");
        let mut input = std::io::Cursor::new(format!("{line}and the input stays open").into_bytes());
        let back = read(&mut input).unwrap();
        assert_eq!(back.cert_pem, c.cert_pem);
        assert_eq!(back.key_pem, c.key_pem);
        assert_eq!(back.token, c.token);
        assert_eq!(back.expires_unix, c.expires_unix);
        // Nothing past the line was taken: the rest of the input is the lease.
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut input, &mut rest).unwrap();
        assert_eq!(rest, "and the input stays open");
    }

    #[test]
    fn bad_bundles_are_refused_with_a_reason() {
        let cases: [(&[u8], &str); 5] = [
            (b"", "ended before"),
            (b"not json\n", "not JSON"),
            (b"{\"cert_pem\":\"x\"}\n", "lack `key_pem`"),
            (
                b"{\"cert_pem\":\"-----BEGIN\",\"key_pem\":\"-----BEGIN\",\"client_ca_pem\":\"-----BEGIN\",\"token\":\"short\",\"expires_unix\":1}\n",
                "too short",
            ),
            (
                b"{\"cert_pem\":\"x\",\"key_pem\":\"-----BEGIN\",\"client_ca_pem\":\"-----BEGIN\",\"token\":\"0123456789abcdef0123456789abcdef\",\"expires_unix\":1}\n",
                "not PEM",
            ),
        ];
        for (input, want) in cases {
            let e = read(&mut std::io::Cursor::new(input)).unwrap_err().to_string();
            assert!(e.contains(want), "{e:?} should say {want:?}");
        }
        let long = vec![b'x'; MAX_LINE + 10];
        let e = read(&mut std::io::Cursor::new(long)).unwrap_err().to_string();
        assert!(e.contains("longer than"), "{e}");
    }

    #[test]
    fn ready_lines_parse() {
        assert_eq!(parse_ready(&ready_line(40123)), Some(40123));
        assert_eq!(parse_ready("iocurve agent listening on 0.0.0.0:7420"), None);
        assert_eq!(parse_ready("iocurve-launched port=x pid=1"), None);
    }

    #[test]
    fn host_credentials_name_their_host_and_expire_with_the_run() {
        iocurve_testkit::needs_tool!("openssl");
        let run = crate::certs::RunCredentials::issue(std::time::Duration::from_secs(7200)).unwrap();
        let a = run.for_host("lg1.lab").unwrap();
        let b = run.for_host("10.0.0.2").unwrap();
        assert_ne!(a.token, b.token, "each host its own token");
        assert_ne!(a.token, run.token, "the cluster token stays with the coordinator");
        assert_eq!(a.token, crate::auth::host_token(&run.token, "lg1.lab"));
        assert_ne!(a.key_pem, b.key_pem);
        assert!(!a.key_pem.contains(&run.client_key_pem), "no other key travels");
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        assert!((now + 7100..=now + 7300).contains(&a.expires_unix), "{} vs {now}", a.expires_unix);
        // As OpenSSL reads the certificate: it names its host and ends with the run's
        // credentials, to the minute (valid in 7,100 s, no longer in 7,300 s).
        let dir = tempfile::tempdir().unwrap();
        for (host, c) in [("lg1.lab", &a), ("10.0.0.2", &b)] {
            let pem = dir.path().join("agent.pem");
            std::fs::write(&pem, &c.cert_pem).unwrap();
            let openssl = |args: &[&str]| {
                std::process::Command::new("openssl").arg("x509").arg("-in").arg(&pem).args(args).output().unwrap()
            };
            let san = String::from_utf8(openssl(&["-noout", "-ext", "subjectAltName"]).stdout).unwrap();
            assert!(san.contains(host), "{host}: {san}");
            assert!(openssl(&["-noout", "-checkend", "7100"]).status.success(), "valid for the run");
            assert!(!openssl(&["-noout", "-checkend", "7300"]).status.success(), "and no longer");
        }
    }
}
