//! Marks (shared/DESIGN.md "mark"): timestamped events of a run, set while it runs (`iocurve
//! mark TEXT`) or read from a file of events after it (`iocurve mark --run ID --events FILE`),
//! drawn on every timeline. Pure: the words of a mark and the reading of an events file.

use serde::{Deserialize, Serialize};

use crate::date::{parse_timestamp, rfc3339_ns};

/// The longest mark, in characters: a line on a chart, not a log.
pub const MARK_CHARS: usize = 200;
/// Marks a run keeps at most: each is a line on every timeline and a series in live metrics.
pub const MARKS_PER_RUN: usize = 1000;
/// The largest events file read: a day of an array's event log at one line a second, and more.
pub const EVENTS_FILE_BYTES: u64 = 16 << 20;

/// One mark of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// When, in ns since the Unix epoch on the coordinator's clock (the run's clock: agents'
    /// offsets against it are measured before every step).
    pub at_unix_ns: i64,
    /// The same, RFC 3339 UTC (ms).
    pub at: String,
    pub text: String,
    /// `live` (sent to the running coordinator) or `file NAME:LINE` (imported).
    pub source: String,
}

impl Mark {
    /// A mark, its text checked: printable, one line, at most [`MARK_CHARS`].
    pub fn new(at_unix_ns: i64, text: &str, source: &str) -> Result<Mark, String> {
        Ok(Mark { at_unix_ns, at: rfc3339_ns(at_unix_ns), text: mark_text(text)?, source: source.to_string() })
    }
}

/// The text of a mark, trimmed; refused when empty, over [`MARK_CHARS`] or holding control
/// characters (a newline would break the events file, the terminal line and the chart label).
pub fn mark_text(text: &str) -> Result<String, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("a mark needs a text (`iocurve mark \"controller B pulled\"`)".into());
    }
    if let Some(c) = t.chars().find(|c| c.is_control()) {
        return Err(format!("a mark is one line of printable text; it holds {c:?}"));
    }
    let n = t.chars().count();
    if n > MARK_CHARS {
        return Err(format!("a mark is at most {MARK_CHARS} characters; this one has {n}"));
    }
    Ok(t.to_string())
}

/// What an events file gave: its marks, and the lines it could not read, each with its number.
#[derive(Debug, Default, PartialEq)]
pub struct Events {
    pub marks: Vec<Mark>,
    /// `(line, why)`.
    pub refused: Vec<(usize, String)>,
}

/// Reads an events file: one event a line, its time first, then its text, apart by a space, a
/// tab or a comma (`2026-11-30T04:12:03Z controller B pulled`, `2026-11-30 05:12:03,"controller
/// B pulled"`). Times are RFC 3339 (a space for the `T` too) with `Z` or an offset, or without
/// one in `assumed_offset_s`; `+SECONDS` is that long after `start_unix_ns` (the run's start);
/// `@SECONDS` is Unix time. Empty lines, lines starting with `#` and a first line `time,text`
/// (a CSV header) are skipped.
pub fn read_events(text: &str, name: &str, start_unix_ns: i64, assumed_offset_s: Option<i64>) -> Events {
    let mut out = Events::default();
    // A spreadsheet's "CSV UTF-8" starts with a byte order mark.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') || (n == 1 && is_header(l)) {
            continue;
        }
        match event(l, start_unix_ns, assumed_offset_s) {
            Ok((at, words)) => match Mark::new(at, &words, &format!("file {name}:{n}")) {
                Ok(m) => out.marks.push(m),
                Err(e) => out.refused.push((n, e)),
            },
            Err(e) => out.refused.push((n, e)),
        }
    }
    out
}

/// `time,text` (any case, any of the separators).
fn is_header(l: &str) -> bool {
    let l = l.to_ascii_lowercase();
    let words: Vec<&str> = l.split([',', '\t', ' ', ';']).filter(|w| !w.is_empty()).collect();
    matches!(words.first(), Some(&("time" | "timestamp" | "date")))
}

/// A time as an events file or `--at` gives it: `+SECONDS` after `start_unix_ns`, `@SECONDS`
/// (Unix time) or a timestamp ([`parse_timestamp`]); in ns since the epoch.
pub fn parse_when(t: &str, start_unix_ns: i64, assumed_offset_s: Option<i64>) -> Result<i64, String> {
    let seconds = |t: &str| -> Result<i64, String> {
        match t.parse::<f64>() {
            Ok(v) if v.is_finite() && (0.0..4e9).contains(&v) => Ok((v * 1e9).round() as i64),
            _ => Err(format!("`{t}` is no number of seconds")),
        }
    };
    if let Some(r) = t.strip_prefix('+') {
        Ok(start_unix_ns.saturating_add(seconds(r)?))
    } else if let Some(r) = t.strip_prefix('@') {
        seconds(r)
    } else {
        parse_timestamp(t, assumed_offset_s)
    }
}

/// One line's time and text.
fn event(l: &str, start_unix_ns: i64, assumed: Option<i64>) -> Result<(i64, String), String> {
    let (at, rest) = if l.starts_with(['+', '@']) {
        let (t, rest) = split_first(l);
        (parse_when(t, start_unix_ns, assumed)?, rest)
    } else {
        // The date and the time may be apart by a space: try the longer reading first.
        let (date, after) = split_first(l);
        let (time, rest) = split_first(after);
        let (stamp, rest) = if date.len() == 10 && time.len() >= 8 && time.as_bytes().get(2) == Some(&b':') {
            (format!("{date} {time}"), rest)
        } else {
            (date.to_string(), after)
        };
        let (stamp, rest) = whole_time(stamp, rest);
        (parse_timestamp(&stamp, assumed)?, rest)
    };
    let text = rest.trim_start_matches([',', '\t', ';', ' ']).trim();
    // A CSV field in quotes, its doubled quotes single.
    let text = match text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
        Some(q) => q.replace("\"\"", "\""),
        None => text.to_string(),
    };
    if text.is_empty() {
        return Err("no text after the time".into());
    }
    Ok((at, text))
}

/// A time cut short by the fields' separators taken whole: a fraction after a comma
/// (`04:43:16,500`, as log4j and Python write it) and an offset after a space (`05:43:16
/// +01:00`); the rest is the text.
fn whole_time(mut stamp: String, mut rest: &str) -> (String, &str) {
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    if let Some(r) = rest.strip_prefix(',')
        && stamp.len() >= 8
        && !stamp.contains('.')
        && let n = digits(r)
        && (1..=9).contains(&n)
        && r[n..].starts_with([' ', '\t', ',', ';', 'Z', 'z', '+', '-'])
    {
        stamp.push('.');
        stamp.push_str(&r[..n]);
        let (offset, after) = split_first(&r[n..]);
        if crate::date::parse_utc_offset(offset).is_ok() && !r[n..].starts_with([' ', '\t', ',', ';']) {
            stamp.push_str(offset);
            rest = after;
        } else {
            rest = &r[n..];
        }
    }
    let trimmed = rest.trim_start_matches([' ', '\t']);
    let (offset, after) = split_first(trimmed);
    let offset_like = offset == "Z" || ((offset.len() == 5 || offset.len() == 6) && offset.starts_with(['+', '-']));
    if trimmed.len() < rest.len() && offset_like && crate::date::parse_utc_offset(offset).is_ok() {
        stamp.push_str(offset);
        rest = after;
    }
    (stamp, rest)
}

/// The first field of `s` (up to a space, tab, comma or semicolon) and what follows it.
fn split_first(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    match s.find([' ', '\t', ',', ';']) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const START: i64 = 1_795_300_000_000_000_000; // 2026-11-21T22:26:40Z

    #[test]
    fn an_events_file_reads_every_way_a_log_writes_time() {
        let text = "time,text\n# the failover\n2026-11-21T22:26:50Z controller B pulled\n\n2026-11-21 23:27:00+01:00,\"path \"\"b\"\" down\"\n+30\tcontroller B back\n@1795300040.5 rebuild\n2026-11-21 22:27:30 naive\n";
        let e = read_events(text, "ev.txt", START, None);
        let got: Vec<(i64, &str, &str)> =
            e.marks.iter().map(|m| ((m.at_unix_ns - START) / 1_000_000, m.text.as_str(), m.source.as_str())).collect();
        assert_eq!(
            got,
            [
                (10_000, "controller B pulled", "file ev.txt:3"),
                (20_000, "path \"b\" down", "file ev.txt:5"),
                (30_000, "controller B back", "file ev.txt:6"),
                (40_500, "rebuild", "file ev.txt:7"),
            ]
        );
        assert_eq!(e.refused.len(), 1);
        assert_eq!(e.refused[0].0, 8);
        assert!(e.refused[0].1.contains("no UTC offset"), "{:?}", e.refused);
        // With the file's offset said, the naive line reads.
        let e = read_events("2026-11-21 23:27:30 naive", "x", START, Some(3600));
        assert_eq!(e.marks[0].at_unix_ns - START, 50_000_000_000);
        assert_eq!(e.marks[0].at, "2026-11-21T22:27:30.000Z");
    }

    #[test]
    fn bad_lines_are_refused_with_their_number() {
        let e = read_events("2026-11-21T22:26:50Z\n+x y\n+10 a\u{7}b\n+5 ok\n+99999999999 far\n", "f", START, None);
        let lines: Vec<usize> = e.refused.iter().map(|r| r.0).collect();
        assert_eq!(lines, [1, 2, 3, 5], "{:?}", e.refused);
        assert_eq!(e.marks.len(), 1);
    }

    #[test]
    fn a_mark_is_one_short_printable_line() {
        assert_eq!(mark_text("  controller B pulled \n").unwrap(), "controller B pulled");
        assert!(mark_text(" ").is_err());
        assert!(mark_text("a\nb").is_err());
        assert!(mark_text(&"x".repeat(MARK_CHARS + 1)).is_err());
        assert!(mark_text(&"ü".repeat(MARK_CHARS)).is_ok());
    }

    /// Found in review: a byte order mark refused the whole file; a comma before the
    /// milliseconds (log4j, Python) and an offset after a space were read as the text.
    #[test]
    fn regression_logs_write_time_their_own_ways() {
        let e = read_events("\u{feff}time,text\r\n2026-11-21T22:26:50Z,x\r\n", "f", START, None);
        assert_eq!((e.marks.len(), e.refused.len()), (1, 0), "{:?}", e.refused);
        let e = read_events(
            "2026-11-22 00:26:50,500 INFO failover\n2026-11-21 23:26:51 +01:00 back\n2026-11-21T22:26:52,25Z z\n",
            "f",
            START,
            Some(7200),
        );
        let got: Vec<(i64, &str)> =
            e.marks.iter().map(|m| ((m.at_unix_ns - START) / 1_000_000, m.text.as_str())).collect();
        assert_eq!(got, [(10_500, "INFO failover"), (11_000, "back"), (12_250, "z")], "{:?}", e.refused);
    }

    proptest::proptest! {
        #[test]
        fn any_file_reads_to_marks_and_refusals(s in "\\PC{0,300}") {
            let e = read_events(&s, "f", START, Some(0));
            for m in &e.marks {
                proptest::prop_assert!(!m.text.is_empty() && m.text.chars().count() <= MARK_CHARS);
            }
        }
    }
}
