//! Calendar dates from day counts, pure: for RFC 3339 timestamps in results and for the
//! validity of certificates, without a date-time dependency.

use std::time::{SystemTime, UNIX_EPOCH};

/// Nanoseconds since the Unix epoch on this host's clock (0 before 1970).
pub fn unix_ns() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}

/// `2026-11-26T06:10:00.123Z`: RFC 3339, UTC, milliseconds.
pub fn rfc3339(secs: u64, millis: u32) -> String {
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days((secs / 86_400) as i64);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z", rem / 3600, rem / 60 % 60, rem % 60)
}

/// [`rfc3339`] of a time in ns since the epoch (times before 1970 read as 1970).
pub fn rfc3339_ns(unix_ns: i64) -> String {
    let ns = unix_ns.max(0) as u64;
    rfc3339(ns / 1_000_000_000, (ns / 1_000_000 % 1000) as u32)
}

/// `Thu Nov 26 06:10:00 2026`: C's `ctime` layout in UTC, as fio writes its `time` field.
pub fn ctime(secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{} {} {day:2} {:02}:{:02}:{:02} {year}",
        DAYS[(days % 7) as usize],
        MONTHS[(month - 1) as usize],
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// The proleptic Gregorian (year, month, day) of a day count since 1970-01-01 (Howard
/// Hinnant's days-from-civil inverse).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Days since 1970-01-01 of a proleptic Gregorian date ([`civil_from_days`]'s inverse).
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A UTC offset as `+01:00`, `-0530`, `Z` or `+1` (hours): seconds east of UTC.
pub fn parse_utc_offset(s: &str) -> Result<i64, String> {
    let bad = || format!("`{s}` is no UTC offset (give `Z`, `+01:00`, `-05:30` or `+0200`)");
    if s == "Z" || s == "z" {
        return Ok(0);
    }
    let (sign, rest) = match s.as_bytes().first() {
        Some(b'+') => (1, &s[1..]),
        Some(b'-') => (-1, &s[1..]),
        _ => return Err(bad()),
    };
    let digits = |t: &str| !t.is_empty() && t.len() <= 2 && t.bytes().all(|b| b.is_ascii_digit());
    let (h, m) = match rest.split_once(':') {
        Some((h, m)) if digits(h) && m.len() == 2 && digits(m) => (h, m),
        None if rest.len() == 4 && rest.bytes().all(|b| b.is_ascii_digit()) => (&rest[..2], &rest[2..]),
        None if digits(rest) => (rest, "0"),
        _ => return Err(bad()),
    };
    let (h, m): (i64, i64) = (h.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?);
    if h > 23 || m > 59 {
        return Err(bad());
    }
    Ok(sign * (h * 3600 + m * 60))
}

/// A timestamp in ns since the Unix epoch from `2026-11-30T04:12:03.25Z` (RFC 3339: `T` or a
/// space between date and time, fractions to the ns, `Z` or an offset). A time without an offset
/// takes `assumed_offset_s` (seconds east of UTC); without one either it is refused: a log in
/// local time read as UTC would put every mark hours off.
pub fn parse_timestamp(s: &str, assumed_offset_s: Option<i64>) -> Result<i64, String> {
    let s = s.trim();
    let bad =
        |why: &str| format!("`{s}` is no timestamp: {why} (give `2026-11-30T04:12:03Z` or with an offset, `+01:00`)");
    let num = |t: &str, what: &str| -> Result<i64, String> {
        if t.is_empty() || t.len() > 4 || !t.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad(what));
        }
        t.parse::<i64>().map_err(|_| bad(what))
    };
    if s.len() < 19 || !s.as_bytes()[..19].is_ascii() {
        return Err(bad("too short for a date and a time"));
    }
    let (date, sep, rest) = (&s[..10], &s[10..11], &s[11..]);
    if sep != "T" && sep != "t" && sep != " " {
        return Err(bad("no `T` between date and time"));
    }
    let d: Vec<&str> = date.split('-').collect();
    let [y, mo, da] = d.as_slice() else { return Err(bad("the date is not YYYY-MM-DD")) };
    let (y, mo, da) = (num(y, "the year")?, num(mo, "the month")?, num(da, "the day")?);
    if !(1970..=9999).contains(&y) || !(1..=12).contains(&mo) || !(1..=31).contains(&da) {
        return Err(bad("no such date"));
    }
    let days_in = [
        31,
        if y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if da > days_in[(mo - 1) as usize] {
        return Err(bad("no such date"));
    }
    let (hh, mm, ss) = (num(&rest[..2], "the hour")?, num(&rest[3..5], "the minute")?, num(&rest[6..8], "the second")?);
    if &rest[2..3] != ":" || &rest[5..6] != ":" || hh > 23 || mm > 59 || ss > 60 {
        return Err(bad("the time is not HH:MM:SS"));
    }
    let mut tail = &rest[8..];
    let mut frac_ns = 0i64;
    if let Some(f) = tail.strip_prefix('.').or_else(|| tail.strip_prefix(',')) {
        let n = f.bytes().take_while(|b| b.is_ascii_digit()).count();
        if n == 0 || n > 9 {
            return Err(bad("a fraction of a second of 1 to 9 digits"));
        }
        frac_ns = f[..n].parse::<i64>().map_err(|_| bad("the fraction"))? * 10i64.pow(9 - n as u32);
        tail = &f[n..];
    }
    let offset = match tail.trim_start() {
        "" => assumed_offset_s.ok_or_else(|| {
            format!("`{s}` has no UTC offset: add one (`Z`, `+01:00`) or say which the file's times are in (--utc-offset +01:00)")
        })?,
        o => parse_utc_offset(o).map_err(|e| bad(&e))?,
    };
    let secs = days_from_civil(y, mo, da) * 86_400 + hh * 3600 + mm * 60 + ss.min(59) - offset;
    secs.checked_mul(1_000_000_000)
        .and_then(|ns| ns.checked_add(frac_ns))
        .filter(|ns| *ns >= 0)
        .ok_or_else(|| bad("outside 1970 to 2262"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }

    #[test]
    fn known_dates() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(rfc3339(1_795_300_000, 0), "2026-11-21T22:26:40.000Z");
        assert_eq!(rfc3339_ns(1_795_300_000_123_456_789), "2026-11-21T22:26:40.123Z");
        assert_eq!(ctime(0), "Thu Jan  1 00:00:00 1970");
        assert_eq!(ctime(1_795_300_000), "Sat Nov 21 22:26:40 2026");
    }

    #[test]
    fn timestamps_parse_with_their_offsets() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2024, 2, 29), 19_782);
        assert_eq!(parse_timestamp("2026-11-21T22:26:40Z", None), Ok(1_795_300_000_000_000_000));
        assert_eq!(parse_timestamp("2026-11-21 23:26:40.123+01:00", None), Ok(1_795_300_000_123_000_000));
        assert_eq!(parse_timestamp("2026-11-21T22:26:40.000000001z", None), Ok(1_795_300_000_000_000_001));
        assert_eq!(parse_timestamp("2026-11-21T17:26:40-0500", None), Ok(1_795_300_000_000_000_000));
        assert_eq!(parse_timestamp("2026-11-21 23:26:40", Some(3600)), Ok(1_795_300_000_000_000_000));
        let e = parse_timestamp("2026-11-21 23:26:40", None).unwrap_err();
        assert!(e.contains("no UTC offset") && e.contains("--utc-offset"), "{e}");
        for bad in [
            "2026-02-30T00:00:00Z",
            "2026-11-21T24:00:00Z",
            "2026-11-21",
            "yesterday at noon",
            "2026-11-21T22:26:40+25:00",
            "2026-11-21T22:26:40.Z",
            "2026-11-21T22:26:4Ö",
            "１２３４５６７８９０１２３４５６７８９０",
        ] {
            assert!(parse_timestamp(bad, Some(0)).is_err(), "{bad}");
        }
        assert_eq!(parse_utc_offset("+1"), Ok(3600));
        assert!(parse_utc_offset("+01:5").is_err());
    }

    proptest::proptest! {
        #[test]
        fn a_written_timestamp_reads_back(ms in 0i64..9_000_000_000_000) {
            let ns = ms * 1_000_000;
            proptest::prop_assert_eq!(parse_timestamp(&rfc3339_ns(ns), None), Ok(ns));
        }

        #[test]
        fn any_text_is_a_timestamp_or_an_error(s in "\\PC{0,40}") {
            let _ = parse_timestamp(&s, Some(0));
        }
    }
}
