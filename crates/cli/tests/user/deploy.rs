//! `iocurve deploy kubernetes`: bad options are named. The manifests' validation against the
//! Kubernetes API schemas (kubernetes-validate, in the full lane's venv) is in `it/deploy.rs`.

use crate::util::{iocurve, stderr};

#[test]
fn bad_deploy_options_are_named() {
    let dir = tempfile::tempdir().unwrap();
    for (args, want) in [
        (vec!["--namespace", "Not_A_Label"], "DNS label"),
        (vec!["--agents", "0"], "1 to 512"),
        (vec!["--volume-size", "lots"], "quantity"),
        (vec!["--host-device", "/etc/shadow"], "under /dev/"),
        (vec!["--agent-cpu", "two"], "CPU quantity"),
        (vec!["--agent-memory", "lots"], "quantity"),
        (vec!["--scraper-labels", "prometheus"], "KEY=VALUE"),
        (vec!["--scraper-namespace", "Mon"], "DNS label"),
        (vec!["--host-device", "/dev/a/x", "--host-device", "/dev/b/x"], "same resource"),
    ] {
        let mut a = vec!["deploy", "kubernetes"];
        a.extend(args.iter().copied());
        let o = iocurve(dir.path(), &a);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
    }
}
