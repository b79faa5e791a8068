//! Plan errors that say what was wrong, where, and how to fix it.

use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub struct PlanError {
    /// File name, `suite:NAME` for a built-in suite, or `command line`.
    pub source: String,
    pub line: Option<usize>,
    /// The key path (`workloads[2].ramp`) or CLI option (`--qd`) at fault, if any.
    pub key: Option<String>,
    pub message: String,
}

impl PlanError {
    pub fn new(source: &str, line: Option<usize>, key: Option<String>, message: impl Into<String>) -> Self {
        Self { source: source.to_string(), line, key, message: message.into() }
    }
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.source)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(key) = &self.key {
            write!(f, ": {key}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for PlanError {}

/// Levenshtein distance, for "did you mean".
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The closest candidate to `word`, if it is close enough to be a plausible typo.
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (distance(&word.to_ascii_lowercase(), c), c))
        .filter(|(d, c)| *d <= (c.len() / 3).max(2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        let keys = ["ramp", "queue_depth", "interval_s", "intervals"];
        assert_eq!(did_you_mean("rampp", keys), Some("ramp"));
        assert_eq!(did_you_mean("queue_deph", keys), Some("queue_depth"));
        assert_eq!(did_you_mean("interval", keys), Some("intervals"));
        assert_eq!(did_you_mean("colour", keys), None);
    }

    #[test]
    fn display_names_file_line_and_key() {
        let e = PlanError::new("p.toml", Some(7), Some("workloads[0].ramp".into()), "ramp is empty");
        assert_eq!(e.to_string(), "p.toml:7: workloads[0].ramp: ramp is empty");
    }
}
