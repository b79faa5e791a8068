//! Agents' front door, as an ordinary user: an agent refuses to start without TLS unless told
//! `--insecure`, and every way in without the right token, TLS, protocol or allowed target is
//! refused before anything is written (agents as real processes on loopback). The multi-host
//! runs are in `it/agents.rs`.

use crate::util::cluster::*;
use crate::util::*;
use std::path::Path;
use std::process::Command;

#[test]
fn an_agent_needs_tls_or_an_explicit_insecure() {
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let token = c.join("token").display().to_string();
    let o = iocurve(dir.path(), &["agent", "--listen", "127.0.0.1:0", "--token-file", &token]);
    input_error(&o, &["--tls-cert", "--insecure"]);
    // Issue 15, finding 7: a 16-character or world-readable token was accepted without a word.
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(dir.path().join("short"), "0123456789abcdef\n").unwrap();
    std::fs::set_permissions(dir.path().join("short"), std::fs::Permissions::from_mode(0o600)).unwrap();
    let o = iocurve(dir.path(), &["agent", "--listen", "127.0.0.1:0", "--token-file", "short", "--insecure"]);
    input_error(&o, &["at least 32 characters"]);
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = iocurve(dir.path(), &["agent", "--listen", "127.0.0.1:0", "--token-file", &token, "--insecure"]);
    input_error(&o, &["may be read by other users", "chmod 600"]);
    let o = iocurve(dir.path(), &["run", "--hosts", "127.0.0.1:9", "--token-file", &token, "--insecure"]);
    input_error(&o, &["may be read by other users"]);
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    // --insecure silently ignored --client-ca.
    let ca = c.join("ca.pem").display().to_string();
    let o = iocurve(
        dir.path(),
        &["agent", "--listen", "127.0.0.1:0", "--token-file", &token, "--insecure", "--client-ca", &ca],
    );
    input_error(&o, &["--client-ca needs TLS"]);
    let o = iocurve(dir.path(), &["certs", "init", "certs"]);
    input_error(&o, &["already holds certificates"]);
}

#[test]
fn the_wrong_token_tls_protocol_or_target_is_refused_before_any_io() {
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let d = dir.path().join("a");
    std::fs::create_dir(&d).unwrap();
    let agent = AgentProc::start(&d, &c, &format!("{}/*", d.display()), &[]);
    let target = d.join("t.dat");
    let run = |extra: &[&str], target: &Path| {
        plan(dir.path(), &[(agent.addr.as_str(), target.to_path_buf())]);
        let mut cmd = Command::new(bin());
        cmd.args(["run", "plan.toml", "--size", "64m"]).args(extra).current_dir(dir.path());
        cmd.output().unwrap()
    };
    let ca = c.join("ca.pem").display().to_string();
    let token = c.join("token").display().to_string();

    std::fs::write(dir.path().join("wrong"), "0123456789abcdef0123456789abcdef\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path().join("wrong"), std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let o = run(&["--ca", &ca, "--token-file", "wrong"], &target);
    input_error(&o, &["refused the token"]);

    // A plain connection to a TLS agent is refused, and the run says what to change.
    let o = run(&["--insecure", "--token-file", &token], &target);
    input_error(&o, &["drop --insecure"]);

    let outside = dir.path().join("elsewhere.dat");
    let o = run(&["--ca", &ca, "--token-file", &token], &outside);
    input_error(&o, &["outside this agent's allow list"]);

    let o = run(&["--token-file", &token], &target);
    input_error(&o, &["--ca"]);

    assert!(!target.exists() && !outside.exists(), "nothing was created or written");

    // Calls without a token, and from another protocol version, straight at the agent.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        use iocurve_net::pb;
        let ca_pem = std::fs::read_to_string(c.join("ca.pem")).unwrap();
        let tls = iocurve_net::binding::client_config(&ca_pem, None).unwrap();
        let (connector, session) = iocurve_net::binding::Connector::new(tls, iocurve_net::certs::AGENT_NAME).unwrap();
        let ch = tonic::transport::Endpoint::from_shared(format!("http://{}", agent.addr))
            .unwrap()
            .connect_with_connector(connector)
            .await
            .unwrap();
        let mut bare = pb::agent_client::AgentClient::new(ch.clone());
        let e = bare.ping(pb::PingRequest {}).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated, "no token: {e}");
        let tok = std::fs::read_to_string(c.join("token")).unwrap().trim().to_string();
        let mut with =
            pb::agent_client::AgentClient::with_interceptor(ch, iocurve_net::auth::Credentials::proof(&tok, session));
        let e = with.hello(pb::HelloRequest { protocol: 99, version: "9.9.9".into() }).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::FailedPrecondition);
        assert!(e.message().contains("protocol mismatch") && e.message().contains("same iocurve version"), "{e}");
    });
}

/// Issue 35, finding 6: recorded plain-text bytes sent again 2 s later ran the step again. An
/// agent without TLS listens on loopback only (reached from elsewhere through an SSH tunnel).
#[test]
fn regression_an_agent_without_tls_listens_on_loopback_only() {
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let token = c.join("token").display().to_string();
    for listen in ["0.0.0.0:0", "[::]:0"] {
        let child = Command::new(bin())
            .args(["agent", "--listen", listen, "--token-file", &token, "--insecure"])
            .current_dir(dir.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let o = wait_within(
            child,
            std::time::Duration::from_secs(60),
            &format!("an agent without TLS listened on {listen}"),
        );
        input_error(&o, &["--insecure listens only on loopback", "SSH tunnel"]);
    }
}
