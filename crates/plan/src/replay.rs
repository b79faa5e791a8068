//! A replay's device map (`replay_map`): which target each device of a trace goes to. Pure: the
//! runner applies it to the trace's devices and the plan's targets.

/// Where a mapped device goes: a target's number (1 = the first listed) or its path as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MapTo {
    Number(u32),
    Path(String),
}

/// One `DEV=TARGET` pair; `*` as the device stands for every device not named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapEntry {
    pub device: String,
    pub to: MapTo,
}

/// Reads `8,16=1 8,32=/dev/sdc; *=2`: pairs separated by spaces or `;` (device names such as
/// blkparse's `8,16` carry commas, so a comma separates nothing).
pub fn parse_map(text: &str) -> Result<Vec<MapEntry>, String> {
    let mut out: Vec<MapEntry> = Vec::new();
    for pair in text.split(|c: char| c == ';' || c.is_whitespace()).filter(|p| !p.is_empty()) {
        let Some((device, to)) = pair.split_once('=') else {
            return Err(format!(
                "replay_map: `{pair}` is not DEV=TARGET (e.g. 8,16=1 for the trace's device 8,16 on the first target)"
            ));
        };
        if device.is_empty() || to.is_empty() {
            return Err(format!("replay_map: `{pair}` names no device or no target (DEV=TARGET)"));
        }
        let to = match to.parse::<u32>() {
            Ok(0) => return Err(format!("replay_map: `{pair}`: targets are numbered from 1 (the first listed)")),
            Ok(n) => MapTo::Number(n),
            Err(_) => MapTo::Path(to.to_string()),
        };
        if out.iter().any(|e| e.device == device) {
            return Err(format!("replay_map: device {device} is mapped twice"));
        }
        out.push(MapEntry { device: device.to_string(), to });
    }
    if out.is_empty() {
        return Err("replay_map is empty: give DEV=TARGET pairs, e.g. \"8,16=1 8,32=2\"".into());
    }
    Ok(out)
}

/// The target (index into `targets`, as listed) of each of the trace's `devices`: by the map,
/// else a device named as a target on it and the others in order on the targets left. Refused: a device with no target, a target
/// number or path the plan does not list.
pub fn assign(devices: &[String], targets: &[String], map: Option<&[MapEntry]>) -> Result<Vec<u32>, String> {
    let index = |to: &MapTo| -> Result<u32, String> {
        match to {
            MapTo::Number(n) if (*n as usize) <= targets.len() => Ok(n - 1),
            MapTo::Number(n) => Err(format!(
                "replay_map names target {n}, but the plan lists {} target{}",
                targets.len(),
                if targets.len() == 1 { "" } else { "s" }
            )),
            MapTo::Path(p) => targets.iter().position(|t| t == p).map(|i| i as u32).ok_or_else(|| {
                format!(
                    "replay_map names target {p}, which the plan does not list (its targets: {})",
                    targets.join(", ")
                )
            }),
        }
    };
    let Some(map) = map else {
        if devices.len() > targets.len() {
            let example = if targets.len() > 1 { format!("{}=1 *=2", devices[0]) } else { "*=1".to_string() };
            return Err(format!(
                "the trace has {} devices ({}) and the plan {} target{}: say where each goes with replay_map (e.g. \"{example}\")",
                devices.len(),
                some(devices),
                targets.len(),
                if targets.len() == 1 { "" } else { "s" },
            ));
        }
        // A device named as a target goes to it (a run's own I/O log replayed on its targets:
        // found by an outside test, whose first I/O was on its second target); the others in
        // order on the targets left.
        let named: Vec<Option<usize>> = devices.iter().map(|d| targets.iter().position(|t| t == d)).collect();
        let mut free = (0..targets.len()).filter(|i| !named.contains(&Some(*i)));
        return Ok(named.iter().map(|n| n.or_else(|| free.next()).unwrap_or(0) as u32).collect());
    };
    for e in map.iter().filter(|e| e.device != "*") {
        if !devices.contains(&e.device) {
            return Err(format!(
                "replay_map names device {}, which the trace does not have (its devices: {})",
                e.device,
                some(devices)
            ));
        }
    }
    let other = map.iter().find(|e| e.device == "*").map(|e| index(&e.to)).transpose()?;
    devices
        .iter()
        .map(|d| match map.iter().find(|e| &e.device == d) {
            Some(e) => index(&e.to),
            None => other.ok_or_else(|| {
                format!(
                    "replay_map says nothing of the trace's device {d}: map it (`{d}=N`) or every other device (`*=N`)"
                )
            }),
        })
        .collect()
}

/// The first devices of a trace by name, and how many more (a trace of thousands of devices
/// named them all in one message: an outside test's finding).
fn some(devices: &[String]) -> String {
    const SHOWN: usize = 8;
    let first = devices.iter().take(SHOWN).map(String::as_str).collect::<Vec<_>>().join(" ");
    match devices.len().saturating_sub(SHOWN) {
        0 => first,
        more => format!("{first} … and {more} more"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn pairs_separate_by_space_or_semicolon_and_keep_commas_in_names() {
        let m = parse_map("8,16=1; 8,32=/dev/sdc  *=2").unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m[0], MapEntry { device: "8,16".into(), to: MapTo::Number(1) });
        assert_eq!(m[1].to, MapTo::Path("/dev/sdc".into()));
        for bad in ["", " ; ", "8,16", "=1", "8,16=", "8,16=0", "a=1 a=2"] {
            assert!(parse_map(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn devices_go_in_order_or_by_the_map() {
        let t = s(&["/dev/a", "/dev/b"]);
        assert_eq!(assign(&s(&["x", "y"]), &t, None).unwrap(), vec![0, 1]);
        let e = assign(&s(&["x", "y", "z"]), &t, None).unwrap_err();
        assert!(e.contains("3 devices") && e.contains("replay_map"), "{e}");
        let m = parse_map("y=1 *=/dev/b").unwrap();
        assert_eq!(assign(&s(&["x", "y", "z"]), &t, Some(&m)).unwrap(), vec![1, 0, 1]);
        let m = parse_map("y=3").unwrap();
        assert!(assign(&s(&["y"]), &t, Some(&m)).unwrap_err().contains("lists 2 targets"));
        let m = parse_map("q=1").unwrap();
        assert!(assign(&s(&["y"]), &t, Some(&m)).unwrap_err().contains("does not have"));
        let m = parse_map("x=1").unwrap();
        assert!(assign(&s(&["x", "y"]), &t, Some(&m)).unwrap_err().contains("nothing of the trace's device y"));
        let m = parse_map("x=/dev/q").unwrap();
        assert!(assign(&s(&["x"]), &t, Some(&m)).unwrap_err().contains("does not list"));
    }

    /// Found by an outside test: a run's own log, whose first I/O was on its second target,
    /// replayed onto its targets swapped them; a device named as a target goes to it.
    #[test]
    fn a_device_named_as_a_target_goes_to_it() {
        let t = s(&["/d/m1", "/d/m2", "/d/m3"]);
        assert_eq!(assign(&s(&["/d/m2", "/d/m1"]), &t, None).unwrap(), vec![1, 0]);
        assert_eq!(assign(&s(&["x", "/d/m1", "y"]), &t, None).unwrap(), vec![1, 0, 2]);
    }

    /// Found by an outside test: a trace of 5000 devices named every one in the error.
    #[test]
    fn a_trace_of_thousands_of_devices_is_named_by_its_first() {
        let many: Vec<String> = (0..5000).map(|k| format!("d{k}")).collect();
        let e = assign(&many, &s(&["/dev/a"]), None).unwrap_err();
        assert!(e.contains("5000 devices (d0 d1 d2 d3 d4 d5 d6 d7 … and 4992 more)"), "{e}");
        assert!(e.len() < 300, "{e}");
    }
}
