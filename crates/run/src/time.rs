//! The run's timestamps (RFC 3339, UTC) without a date-time dependency.

use std::time::{SystemTime, UNIX_EPOCH};

use iocurve_stats::date::rfc3339;

pub fn now_rfc3339() -> String {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    rfc3339(d.as_secs(), d.subsec_millis())
}
