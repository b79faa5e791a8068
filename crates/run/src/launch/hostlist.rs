//! Host lists as HPC people write them: `load[01-32].lab`, `node[1-4,7]`, `r[1-2]n[1-3]`,
//! comma-separated, or a host file (one entry per line, `#` comments). Ranges keep the width of
//! a zero-padded start (`[01-32]` gives load01 … load32).

/// More hosts than any run of iocurve drives: a typo like `[1-100000]` is refused, not expanded.
pub const MAX_HOSTS: usize = 4096;

/// Expands a list (`a,b[1-3],c`) into host names, in order. Names given twice are refused.
pub fn expand(spec: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for part in split_top(spec)? {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        expand_one(part, &mut out)?;
    }
    if out.is_empty() {
        return Err(format!("`{spec}` names no host"));
    }
    check_unique(&out, &format!("`{spec}`"))?;
    Ok(out)
}

/// The host names of a host file: one list (as [`expand`] takes) per line; blank lines and
/// `#` comments skipped. Errors name the line.
pub fn read_file(path: &std::path::Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read host file {}: {e}", path.display()))?;
    let mut all = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let hosts = expand(line).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))?;
        all.extend(hosts);
        if all.len() > MAX_HOSTS {
            return Err(format!("{}: more than {MAX_HOSTS} hosts", path.display()));
        }
    }
    if all.is_empty() {
        return Err(format!("host file {} names no host", path.display()));
    }
    check_unique(&all, &path.display().to_string())?;
    Ok(all)
}

/// Splits at commas outside brackets.
fn split_top(spec: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in spec.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&spec[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err(format!("`{spec}`: brackets do not pair up (one level: `node[1-4,7]`)"));
        }
    }
    if depth != 0 {
        return Err(format!("`{spec}`: a `[` is not closed"));
    }
    parts.push(&spec[start..]);
    Ok(parts)
}

/// Expands one name with any number of bracketed ranges into `out`.
fn expand_one(pattern: &str, out: &mut Vec<String>) -> Result<(), String> {
    let Some(open) = pattern.find('[') else {
        if pattern.contains(']') {
            return Err(format!("`{pattern}`: a `]` without its `[`"));
        }
        check_host(pattern)?;
        out.push(pattern.to_string());
        return Ok(());
    };
    let close = open + pattern[open..].find(']').ok_or_else(|| format!("`{pattern}`: a `[` is not closed"))?;
    let (head, body, tail) = (&pattern[..open], &pattern[open + 1..close], &pattern[close + 1..]);
    for n in range_items(pattern, body)? {
        if out.len() >= MAX_HOSTS {
            return Err(format!("`{pattern}` names more than {MAX_HOSTS} hosts"));
        }
        expand_one(&format!("{head}{n}{tail}"), out)?;
    }
    Ok(())
}

/// The numbers of one bracket body (`01-32`, `1-4,7`), as text with the start's padding.
fn range_items(pattern: &str, body: &str) -> Result<Vec<String>, String> {
    let mut items = Vec::new();
    for piece in body.split(',') {
        let piece = piece.trim();
        let (a, b) = piece.split_once('-').unwrap_or((piece, piece));
        let bad = || format!("`{pattern}`: `[{body}]` is not a list of numbers and ranges like [01-32] or [1-4,7]");
        if a.is_empty()
            || b.is_empty()
            || !a.bytes().all(|c| c.is_ascii_digit())
            || !b.bytes().all(|c| c.is_ascii_digit())
        {
            return Err(bad());
        }
        let (lo, hi): (u64, u64) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
        if lo > hi {
            return Err(format!("`{pattern}`: the range {a}-{b} runs backwards"));
        }
        if hi - lo >= MAX_HOSTS as u64 {
            return Err(format!("`{pattern}`: the range {a}-{b} names more than {MAX_HOSTS} hosts"));
        }
        let width = if a.len() > 1 && a.starts_with('0') { a.len() } else { 0 };
        items.extend((lo..=hi).map(|n| format!("{n:0width$}")));
    }
    Ok(items)
}

/// A host as a launch takes it: `[user@]name`, where name is a DNS name (labels of letters,
/// digits, `-` and `_`, at most 63 each), an IPv4 or an IPv6 address — no port (the agents
/// listen where `--launch-port` says), nothing a shell or ssh would read as more.
pub fn check_host(name: &str) -> Result<(), String> {
    let bad = |why: &str| Err(format!("`{name}` is not a host: {why}"));
    let (user, host) = match name.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, name),
    };
    if let Some(u) = user
        && (u.is_empty()
            || u.starts_with('-')
            || !u.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')))
    {
        return bad("the user before `@` is letters, digits, `.`, `-`, `_`");
    }
    if host.is_empty() {
        return bad("no host name");
    }
    if host.contains(':') {
        if host.parse::<std::net::Ipv6Addr>().is_ok() {
            return Ok(());
        }
        if host.matches(':').count() == 1 && host.rsplit(':').next().is_some_and(|p| p.parse::<u16>().is_ok()) {
            return bad(
                "with --launch, hosts are names or addresses without a port (the agents listen where --launch-port says)",
            );
        }
        return bad("not an IPv6 address");
    }
    if host.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return match host.parse::<std::net::Ipv4Addr>() {
            Ok(_) => Ok(()),
            Err(_) => bad("not an IPv4 address"),
        };
    }
    if host.len() > 253 {
        return bad("longer than 253 characters");
    }
    for label in host.split('.') {
        if label.is_empty() || label.len() > 63 {
            return bad("a DNS name is labels of 1 to 63 characters between dots");
        }
        if label.starts_with('-') || label.ends_with('-') {
            return bad("a label starts and ends with a letter or digit");
        }
        if !label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return bad("letters, digits, `-`, `_` and dots only");
        }
    }
    Ok(())
}

/// Refuses a host given twice.
pub fn check_unique(hosts: &[String], whence: &str) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    match hosts.iter().find(|h| !seen.insert(h.as_str())) {
        Some(d) => Err(format!("host {d} is given twice in {whence}")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_expand_with_their_padding() {
        assert_eq!(expand("load[01-03].lab").unwrap(), ["load01.lab", "load02.lab", "load03.lab"]);
        assert_eq!(expand("node[1-3,7]").unwrap(), ["node1", "node2", "node3", "node7"]);
        assert_eq!(expand("n[8-10]").unwrap(), ["n8", "n9", "n10"]);
        assert_eq!(expand("r[1-2]n[1-2]").unwrap(), ["r1n1", "r1n2", "r2n1", "r2n2"]);
        assert_eq!(expand("a, b[1-2] ,10.0.0.5").unwrap(), ["a", "b1", "b2", "10.0.0.5"]);
        assert_eq!(expand("root@lg1").unwrap(), ["root@lg1"]);
        assert_eq!(expand("fd00:200:1::2,fd00:1:2:3:4:5:6:7").unwrap(), ["fd00:200:1::2", "fd00:1:2:3:4:5:6:7"]);
        assert_eq!(expand("node_01.cluster").unwrap(), ["node_01.cluster"]);
        assert_eq!(expand("lg[001-100]").unwrap().len(), 100);
        assert_eq!(expand("lg[001-100]").unwrap()[99], "lg100");
    }

    #[test]
    fn mistakes_are_named() {
        for (spec, want) in [
            ("", "names no host"),
            ("a[1-3", "not closed"),
            ("a]1", "pair up"),
            ("a[[1]]", "pair up"),
            ("a[3-1]", "backwards"),
            ("a[x-2]", "not a list of numbers"),
            ("a[1-]", "not a list of numbers"),
            ("a[1-100000]", "more than 4096"),
            ("a[1-64]b[1-64]c[1-2]", "more than 4096"),
            ("a,a", "given twice"),
            ("a[1-2],a2", "given twice"),
            ("-oProxyCommand=x", "starts and ends"),
            ("a;rm", "letters, digits"),
            ("a b", "letters, digits"),
            ("root@", "no host name"),
            ("@lg1", "the user before"),
            ("a..b", "labels of 1 to 63"),
            ("1.2.3.4.5", "not an IPv4 address"),
            ("lg1:7420", "without a port"),
            ("fe80::1::2", "not an IPv6 address"),
            ("-lg1", "starts and ends"),
        ] {
            let e = expand(spec).unwrap_err();
            assert!(e.contains(want), "{spec:?}: {e:?} should say {want:?}");
        }
    }

    #[test]
    fn host_files_take_comments_and_name_the_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("hosts");
        std::fs::write(&f, "# the lab\nlg[1-2]\n\nlg9  # spare\n").unwrap();
        assert_eq!(read_file(&f).unwrap(), ["lg1", "lg2", "lg9"]);
        std::fs::write(&f, "lg1\nlg[2-\n").unwrap();
        let e = read_file(&f).unwrap_err();
        assert!(e.contains(":2:"), "{e}");
        std::fs::write(&f, "# nothing\n").unwrap();
        assert!(read_file(&f).unwrap_err().contains("names no host"));
    }

    proptest::proptest! {
        /// Any range expands to exactly its count of distinct names, in order.
        #[test]
        fn ranges_expand_to_their_count(lo in 0u64..500, len in 1u64..200, pad in proptest::bool::ANY) {
            let hi = lo + len - 1;
            let a = if pad { format!("{lo:04}") } else { lo.to_string() };
            let hosts = expand(&format!("h[{a}-{hi}]x")).unwrap();
            proptest::prop_assert_eq!(hosts.len() as u64, len);
            let first = if pad { format!("h{lo:04}x") } else { format!("h{lo}x") };
            proptest::prop_assert_eq!(&hosts[0], &first);
        }
    }
}
