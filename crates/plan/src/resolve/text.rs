//! TOML's own errors as plan errors: the line, the key the bad value belongs to, and "did you
//! mean" for an unknown key.

use crate::error::{PlanError, did_you_mean};
use crate::locate::line_of;

/// Turns a TOML/serde error into a plan error with line and a "did you mean" for unknown keys.
pub(super) fn toml_error(text: &str, source: &str, e: &toml::de::Error) -> PlanError {
    let line = e.span().map(|s| line_of(text, s.start));
    // toml says nothing of a value cut off by the end of the text (`ramp =`; found by
    // tests/properties.rs).
    let msg = match e.message().trim() {
        "" => "a value is missing here, or is not valid TOML",
        m => m,
    };
    if let Some(rest) = msg.strip_prefix("unknown field `") {
        let name = rest.split('`').next().unwrap_or_default();
        let expected: Vec<&str> = rest.split('`').skip(2).step_by(2).collect();
        let hint = match did_you_mean(name, expected.iter().copied()) {
            Some(s) => format!(" (did you mean `{s}`?)"),
            None => format!("; known keys here: {}", expected.join(", ")),
        };
        return PlanError::new(source, line, Some(name.to_string()), format!("unknown key `{name}`{hint}"));
    }
    // A value of the wrong type: the error points at the value; name the key it belongs to.
    let key = e.span().and_then(|span| key_before(text, span.start));
    PlanError::new(source, line, key, msg.to_string())
}

/// The key of `key = value` on the line where `offset` (inside the value) lies, if the line
/// has one before it.
fn key_before(text: &str, offset: usize) -> Option<String> {
    let offset = offset.min(text.len());
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let prefix = &text[line_start..offset];
    let key = prefix[..prefix.find('=')?].trim().trim_matches('"');
    (!key.is_empty() && !key.starts_with('[')).then(|| key.to_string())
}
