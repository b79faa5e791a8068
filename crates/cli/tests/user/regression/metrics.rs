//! Regressions of the `metrics` subject.
use crate::util::cluster::certs;
use crate::util::*;
use std::process::Command;

/// Found in review: the agents' token was accepted as the metrics token, and every scrape
/// then sent it in plain HTTP.
#[test]
fn regression_the_agents_token_is_refused_as_the_metrics_token() {
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let token = c.join("token");
    let o = Command::new(bin())
        .args(["agent", "--listen", "127.0.0.1:0", "--insecure", "--allow", "/nonexistent/*"])
        .arg("--token-file")
        .arg(&token)
        .args(["--metrics", "127.0.0.1:0", "--metrics-token-file"])
        .arg(&token)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("a read-only token of its own"), "{}", stderr(&o));
    let o = iocurve(
        dir.path(),
        &["run", "--hosts", "127.0.0.1:1", "--token-file", token.to_str().unwrap(), "--insecure"]
            .into_iter()
            .chain(["--metrics", "127.0.0.1:0", "--metrics-token-file", token.to_str().unwrap()])
            .collect::<Vec<_>>(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("a read-only token of its own"), "{}", stderr(&o));
}
