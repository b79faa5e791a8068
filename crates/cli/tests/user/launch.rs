//! `run --launch ssh`, as an ordinary user: its options and the plan's hosts are checked
//! before anything starts, and a launched agent needs its credentials and removes only a launch
//! copy. Launches over a real sshd per network namespace are in `it/launch.rs`.

use crate::util::{bin, iocurve, stderr};

#[test]
fn launch_options_are_checked_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let abs = format!("{}/t.dat", d.display());
    for (args, want) in [
        (vec!["--launch", "ssh", "--target", abs.as_str()], "--launch starts agents on hosts"),
        (vec!["--launch", "ssh", "--hosts", "lg1:7420", "--target", abs.as_str()], "without a port"),
        (vec!["--launch", "ssh", "--hosts", "lg[1-3", "--target", abs.as_str()], "not closed"),
        (vec!["--launch", "ssh", "--hosts", "lg[1-2],lg1", "--target", abs.as_str()], "given twice"),
        (vec!["--launch", "ssh", "--hosts", "lg1", "--target", "rel.dat"], "launched agents take absolute paths"),
        (
            vec!["--launch", "ssh", "--hosts", "lg1", "--insecure", "--target", abs.as_str()],
            "--launch makes this run's own",
        ),
        (vec!["--launch", "ssh", "--hosts", "lg1", "--ssh", " ", "--target", abs.as_str()], "--ssh is empty"),
        (vec!["--hosts-file", "h.txt"], "--launch"),
        (vec!["--launch", "ssh", "--hosts", "root@", "--target", abs.as_str()], "no host name"),
        (
            vec!["--launch", "ssh", "--hosts", "lg1", "--remote-binary", "~/bin/iocurve", "--target", abs.as_str()],
            "`~` is not expanded",
        ),
        (
            vec!["--launch", "ssh", "--hosts", "lg1", "--launch-valid-h", "0.01", "--target", abs.as_str()],
            "give --launch-valid-h",
        ),
        // Two agents on one host are two to a coordinator, one to a relay (it knows its agents
        // by their hosts' names), however the user is spelled.
        (
            vec!["--launch", "ssh", "--hosts", "root@lg1,lg1,lg2", "--relay-every", "3", "--target", abs.as_str()],
            "host lg1 is given twice in the hosts of a run with --relay-every",
        ),
        (
            vec![
                "--launch",
                "ssh",
                "--hosts",
                "lg1,lg2",
                "--relay-every",
                "2",
                "--relay-by",
                "switch",
                "--target",
                abs.as_str(),
            ],
            "--relay-by switch places relays by Slurm's topology: with --launch slurm",
        ),
    ] {
        let mut a = vec!["run", "--db", "r.db"];
        a.extend(args.iter().copied());
        let o = iocurve(d, &a);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{args:?}: {} should say {want:?}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"));
    }
}

#[test]
fn the_plans_hosts_follow_the_same_rules_as_hosts_given_on_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (hosts, want) in [
        ("[[hosts]]\naddress = \"lg1.lab:7420\"\n", "without a port"),
        ("[[hosts]]\naddress = \"lg1;touch x\"\n", "letters, digits"),
        ("[[hosts]]\naddress = \"lg1\"\n[[hosts]]\naddress = \"lg1\"\n", "given twice"),
    ] {
        std::fs::write(
            d.join("plan.toml"),
            format!("targets = [\"{}/t.dat\"]\n{hosts}[[workloads]]\nname = \"w\"\nramp = [1]\n", d.display()),
        )
        .unwrap();
        let o = iocurve(d, &["run", "plan.toml", "--launch", "ssh", "--db", "r.db"]);
        assert_eq!(o.status.code(), Some(2), "{hosts}: {}", stderr(&o));
        assert!(stderr(&o).contains("[[hosts]]") && stderr(&o).contains(want), "{hosts}: {}", stderr(&o));
        assert!(!d.join("x").exists());
    }
}

#[test]
fn a_launched_agent_needs_its_credentials_and_removes_only_a_launch_copy() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // No credentials on its input: a clear error, exit code 2.
    let o = std::process::Command::new(bin())
        .args(["agent", "--launched", "--allow", "/nonexistent/*"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("standard input ended before the credentials came"), "{}", stderr(&o));
    // Garbage instead: named.
    let mut c = std::process::Command::new(bin())
        .args(["agent", "--launched"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    c.stdin.take().unwrap().write_all(b"{\"token\": 5}\n").unwrap();
    let o = c.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("the credentials lack"), "{}", stderr(&o));
    // --remove-binary from anywhere but a launch copy refuses, and removes nothing.
    let copy = d.join("bin/iocurve");
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    std::fs::copy(bin(), &copy).unwrap();
    // A test thread that forks while the copy is open for writing holds it until its child
    // execs: "Text file busy" for a moment (CI of stop 28). Try again then.
    let o = (0..100)
        .find_map(|_| {
            match std::process::Command::new(&copy)
                .args(["agent", "--launched", "--remove-binary"])
                .stdin(std::process::Stdio::null())
                .output()
            {
                Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    None
                }
                r => Some(r.unwrap()),
            }
        })
        .expect("the copy became executable");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("is not a copy `run --launch` made"), "{}", stderr(&o));
    assert!(copy.exists(), "nothing removed");
    // Hand-made credentials do not mix with --launched.
    let o = iocurve(d, &["agent", "--launched", "--token-file", "t", "--listen", "127.0.0.1:0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// `run --launch pods` and `agent --enrol` (issue 46): what they need is asked for, and a key set
/// that is none, or pods named otherwise than an Indexed Job's, are refused before anything
/// waits.
#[test]
fn pods_options_are_checked_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assert!(iocurve(d, &["certs", "init", "certs"]).status.success());
    std::fs::write(d.join("empty.json"), r#"{"keys": []}"#).unwrap();
    std::fs::write(d.join("one.json"), r#"{"keys": [{"kty": "RSA", "n": "AQAB", "e": "AQAB"}]}"#).unwrap();
    let abs = format!("{}/t.dat", d.display());
    let pods = |extra: &[&str]| {
        let mut a = vec!["run", "--db", "r.db", "--launch", "pods", "--target", abs.as_str()];
        a.extend_from_slice(extra);
        a.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let cert = ["--client-cert", "certs/client.pem", "--client-key", "certs/client.key"];
    for (args, want) in [
        (pods(&["--hosts", "a.b.c.svc"]), "--launch pods needs --pod-keys FILE"),
        (pods(&["--hosts", "a.b.c.svc", "--pod-keys", "one.json"]), "--launch pods needs"),
        (
            pods(&[&["--hosts", "a.b.c.svc", "--pod-keys", "one.json", "--token-per-host"][..], &cert[..]].concat()),
            "--token-per-host is for agents started by hand",
        ),
        (
            pods(&[&["--hosts", "lg1.lab", "--pod-keys", "one.json"][..], &cert[..]].concat()),
            "dials pods by their DNS names",
        ),
        (pods(&[&["--hosts", "a.b.c.svc", "--pod-keys", "nothing.json"][..], &cert[..]].concat()), "cannot read it"),
        (
            pods(&[&["--hosts", "a.b.c.svc", "--pod-keys", "empty.json"][..], &cert[..]].concat()),
            "no RSA or P-256 signing key",
        ),
        (
            pods(
                &[&["--hosts", "a.b.c.svc,d.b.c.svc", "--pod-keys", "one.json", "--relay-every", "2"][..], &cert[..]]
                    .concat(),
            ),
            "--relay-every with --launch pods: give --relays",
        ),
        (
            pods(
                &[
                    &["--hosts", "a.b.c.svc,d.b.c.svc,e.b.c.svc", "--pod-keys", "one.json", "--relay-every", "2"][..],
                    &["--relays", "r.relay.c.svc"],
                    &cert[..],
                ]
                .concat(),
            ),
            "3 pods in groups of 2 (--relay-every) make 2 groups, and 1 relay pods were given",
        ),
        (
            pods(
                &[
                    &["--hosts", "a.b.c.svc,d.b.c.svc", "--pod-keys", "one.json", "--relay-every", "2"][..],
                    &["--relays", "relay1:7420"],
                    &cert[..],
                ]
                .concat(),
            ),
            "`relay1:7420` is not a host",
        ),
        (
            pods(
                &[
                    &["--hosts", "a.b.c.svc,d.b.c.svc", "--pod-keys", "one.json", "--relay-every", "2"][..],
                    &["--relays", "relay1.lab"],
                    &cert[..],
                ]
                .concat(),
            ),
            "relay1.lab: --launch pods dials pods by their DNS names",
        ),
        (
            pods(
                &[
                    &["--hosts", "a.b.c.svc,d.b.c.svc,e.b.c.svc", "--pod-keys", "one.json", "--relay-every", "2"][..],
                    &["--relays", "r.relay.c.svc,r.relay.c.svc"],
                    &cert[..],
                ]
                .concat(),
            ),
            "host r.relay.c.svc is given twice",
        ),
        (
            pods(
                &[
                    &["--hosts", "a.b.c.svc,d.b.c.svc", "--pod-keys", "one.json", "--relay-every", "2"][..],
                    &["--relays", "a.b.c.svc"],
                    &cert[..],
                ]
                .concat(),
            ),
            "--relays a.b.c.svc is one of the hosts",
        ),
        (
            pods(
                &[
                    &["--hosts", "a.b.c.svc,d.b.c.svc", "--pod-keys", "one.json", "--relay-every", "2"][..],
                    &["--relays", "r.relay.c.svc", "--relay-ca-key", "certs/ca.key"],
                    &cert[..],
                ]
                .concat(),
            ),
            "--relay-ca-key is for relays started by hand",
        ),
        (
            vec!["run", "--db", "r.db", "--pod-keys", "one.json", "--target", abs.as_str()]
                .into_iter()
                .map(String::from)
                .collect(),
            "--launch <HOW>",
        ),
    ] {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = iocurve(d, &a);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{args:?}: {} should say {want:?}", stderr(&o));
    }
    // A pod's agent needs the CA it checks the coordinator by, and its port.
    for (args, want) in [
        (&["agent", "--enrol", "token", "--listen", "127.0.0.1:0"][..], "--client-ca"),
        (&["agent", "--enrol", "token", "--client-ca", "certs/ca.pem"][..], "--listen"),
        (
            &[
                "agent",
                "--enrol",
                "token",
                "--client-ca",
                "certs/ca.pem",
                "--listen",
                "127.0.0.1:0",
                "--token-file",
                "t",
            ][..],
            "cannot be used with",
        ),
        (
            &["agent", "--enrol", "missing", "--client-ca", "certs/ca.pem", "--listen", "127.0.0.1:0"][..],
            "cannot read the pod's token",
        ),
    ] {
        let o = iocurve(d, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{args:?}: {} should say {want:?}", stderr(&o));
    }
}
