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
}
