//! RFC 3339 timestamps (UTC) without a date-time dependency.

use std::time::{SystemTime, UNIX_EPOCH};

pub fn now_rfc3339() -> String {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    rfc3339(d.as_secs(), d.subsec_millis())
}

pub fn rfc3339(secs: u64, millis: u32) -> String {
    let rem = secs % 86_400;
    let (year, month, day) = iocurve_stats::date::civil_from_days((secs / 86_400) as i64);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z", rem / 3600, rem / 60 % 60, rem % 60)
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_dates() {
        assert_eq!(super::rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(super::rfc3339(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(super::rfc3339(1_795_300_000, 0), "2026-11-21T22:26:40.000Z");
    }
}
