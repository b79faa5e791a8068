//! `iocurve size` (issue 19, sizing arithmetic): every subcommand's help example, run as
//! printed, gives the result its help promises, and bad input names what was wrong.

use crate::util::*;

#[test]
fn every_help_example_gives_what_it_promises() {
    let dir = tempfile::tempdir().unwrap();
    for sub in ["raid", "links", "speedup", "reduction"] {
        let help = stdout(&iocurve(dir.path(), &["size", sub, "--help"]));
        let example = help.lines().find(|l| l.starts_with("Example: ")).unwrap_or_else(|| panic!("{sub}: {help}"));
        let (cmd, promise) = example.trim_start_matches("Example: ").split_once("  →  ").unwrap();
        let args: Vec<&str> = cmd.split_whitespace().skip(1).collect();
        let o = iocurve(dir.path(), &args);
        assert!(o.status.success(), "{cmd}: {}", stderr(&o));
        assert!(stdout(&o).contains(promise.trim()), "{cmd}: promised {promise:?}, printed {}", stdout(&o));
    }
}

#[test]
fn the_published_figures() {
    let dir = tempfile::tempdir().unwrap();
    let out = |a: &[&str]| stdout(&iocurve(dir.path(), a));
    assert!(
        out(&["size", "raid", "--level", "6", "--iops", "5000", "--disk-iops", "200", "--read-pct", "70"])
            .contains("63 disks (they give 5'040 IOPS)")
    );
    assert!(
        out(&["size", "raid", "--level", "dp", "--disks", "10", "--disk-iops", "100", "--read-pct", "50"])
            .contains(": 667 IOPS")
    );
    assert!(out(&["size", "links", "4", "25GbE"]).contains("11.9 GB/s usable per direction"));
    assert!(out(&["size", "reduction", "--compress", "0.4"]).contains("1.66:1 expected"));
}

#[test]
fn bad_input_says_what_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    for (args, says) in [
        (&["size", "links", "2", "40G"][..], "`40G` is not a link type iocurve knows"),
        (
            &["size", "raid", "--level", "7", "--disks", "3", "--disk-iops", "1", "--read-pct", "50"][..],
            "not a RAID level",
        ),
        (
            &["size", "raid", "--level", "5", "--disks", "3", "--disk-iops", "100", "--read-pct", "120"][..],
            "percentage",
        ),
        (&["size", "reduction", "--compress", "1.5"][..], "compress is 1.5"),
        (&["size", "speedup", "--io-share", "40", "--from-ms", "0", "--to-ms", "1"][..], "positive"),
    ] {
        let o = iocurve(dir.path(), args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
}
