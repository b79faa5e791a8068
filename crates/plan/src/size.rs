//! Byte sizes as storage people write them: `512`, `4k`, `8K`, `1m`, `64MiB`, `1g`, `2t`.
//! Suffixes are binary (k = 1024), as in fio and every block-size discussion.

pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!("`{text}` is not a size: expected a number with an optional unit, e.g. 4k, 1m, 10g"));
    }
    let n: u64 = num.parse().map_err(|_| format!("`{text}` is too large"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        other => {
            return Err(format!("`{text}` has an unknown unit `{other}`: use k, m, g or t (binary: 1k = 1024 bytes)"));
        }
    };
    n.checked_mul(1u64 << shift).ok_or_else(|| format!("`{text}` is too large"))
}

/// The shortest exact binary form: 4096 → `4k`, 1048576 → `1m`, 1000 → `1000`.
pub fn format_size(bytes: u64) -> String {
    for (shift, unit) in [(40, "t"), (30, "g"), (20, "m"), (10, "k")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_common_forms() {
        assert_eq!(parse_size("512").unwrap(), 512);
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("8K").unwrap(), 8192);
        assert_eq!(parse_size("1m").unwrap(), 1 << 20);
        assert_eq!(parse_size("64MiB").unwrap(), 64 << 20);
        assert_eq!(parse_size("1g").unwrap(), 1 << 30);
        assert_eq!(parse_size(" 2t ").unwrap(), 2 << 40);
    }

    #[test]
    fn rejects_bad_sizes_with_a_reason() {
        assert!(parse_size("k").unwrap_err().contains("not a size"));
        assert!(parse_size("4x").unwrap_err().contains("unknown unit"));
        assert!(parse_size("99999999999999999999").unwrap_err().contains("too large"));
        assert!(parse_size("99999999t").unwrap_err().contains("too large"));
        assert!(parse_size("-4k").is_err());
        assert!(parse_size("").is_err());
    }

    proptest! {
        #[test]
        fn format_then_parse_round_trips(n in 1u64..(1u64 << 50)) {
            prop_assert_eq!(parse_size(&format_size(n)).unwrap(), n);
        }

        #[test]
        fn never_panics(s in ".{0,12}") {
            let _ = parse_size(&s);
        }
    }
}
