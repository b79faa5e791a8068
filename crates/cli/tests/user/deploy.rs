//! `iocurve deploy kubernetes`: the manifests validate against the Kubernetes API schemas
//! (kubernetes-validate, offline, strict), `deploy/kubernetes/` is what this binary renders, and
//! the ports, labels, paths and options in them are the binary's own.
use crate::util::{iocurve, stderr};

#[test]
fn bad_deploy_options_are_named() {
    let dir = tempfile::tempdir().unwrap();
    for (args, want) in [
        (vec!["--namespace", "Not_A_Label"], "DNS label"),
        (vec!["--agents", "0"], "1 to 512"),
        (vec!["--volume-size", "lots"], "quantity"),
        (vec!["--host-device", "/etc/shadow"], "under /dev/"),
    ] {
        let mut a = vec!["deploy", "kubernetes"];
        a.extend(args.iter().copied());
        let o = iocurve(dir.path(), &a);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
    }
}
