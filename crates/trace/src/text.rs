//! Lines of a text trace, read one at a time with a bounded buffer (a line of a megabyte is an
//! error, not an allocation), numbered from 1, as UTF-8 without the line end.

use std::io::BufRead;

use crate::TraceError;

/// The longest line a text trace may have.
pub(crate) const MAX_LINE: usize = 1 << 20;

pub(crate) struct Lines<R> {
    r: R,
    buf: Vec<u8>,
    file: String,
    /// The number of the line last returned (1 for the first).
    pub number: u64,
}

impl<R: BufRead> Lines<R> {
    pub fn new(file: &str, r: R) -> Self {
        Lines { r, buf: Vec::new(), file: file.to_string(), number: 0 }
    }

    /// The next line, without its `\n` or `\r\n` (and without a byte-order mark on the first).
    pub fn next_line(&mut self) -> Result<Option<(u64, &str)>, TraceError> {
        self.buf.clear();
        let mut any = false;
        loop {
            let avail = match self.r.fill_buf() {
                Ok(a) => a,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(source) => return Err(TraceError::Io { file: self.file.clone(), source }),
            };
            if avail.is_empty() {
                break;
            }
            any = true;
            let (take, done) = match avail.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (avail.len(), false),
            };
            if self.buf.len() + take > MAX_LINE + 2 {
                return Err(TraceError::line(
                    &self.file,
                    self.number + 1,
                    format!(
                        "line longer than {MAX_LINE} bytes: is this a trace? (a binary file, or lines \
                         not ended by newlines)"
                    ),
                ));
            }
            self.buf.extend_from_slice(&avail[..take]);
            self.r.consume(take);
            if done {
                break;
            }
        }
        if !any {
            return Ok(None);
        }
        self.number += 1;
        let mut line: &[u8] = &self.buf;
        if self.number == 1 {
            line = line.strip_prefix(b"\xef\xbb\xbf").unwrap_or(line);
        }
        line = line.strip_suffix(b"\n").unwrap_or(line);
        line = line.strip_suffix(b"\r").unwrap_or(line);
        let number = self.number;
        std::str::from_utf8(line).map(|l| Some((number, l))).map_err(|e| {
            TraceError::line(
                &self.file,
                self.number,
                format!("not UTF-8 text (byte {} of the line): a text trace is UTF-8", e.valid_up_to() + 1),
            )
        })
    }
}

/// `s` quoted for a message, cut at 40 characters.
pub(crate) fn quote(s: &str) -> String {
    let cut: String = s.chars().take(40).collect();
    if cut.len() < s.len() { format!("{cut:?}…") } else { format!("{cut:?}") }
}

/// A decimal integer (digits only, no sign), None when it is not one or overflows.
pub(crate) fn uint(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_strip_ends_and_bom_and_count() {
        let mut l = Lines::new("f", &b"\xef\xbb\xbfa\r\n\nb"[..]);
        assert_eq!(l.next_line().unwrap(), Some((1, "a")));
        assert_eq!(l.next_line().unwrap(), Some((2, "")));
        assert_eq!(l.next_line().unwrap(), Some((3, "b")));
        assert_eq!(l.number, 3);
        assert_eq!(l.next_line().unwrap(), None);
    }

    #[test]
    fn a_line_too_long_is_an_error_not_an_allocation() {
        let long = vec![b'x'; MAX_LINE + 10];
        let mut l = Lines::new("f", &long[..]);
        let e = l.next_line().unwrap_err().to_string();
        assert!(e.starts_with("f:1: line longer than"), "{e}");
    }

    #[test]
    fn uint_refuses_signs_and_overflow() {
        assert_eq!(uint("42"), Some(42));
        assert_eq!(uint("+1"), None);
        assert_eq!(uint(""), None);
        assert_eq!(uint("18446744073709551616"), None);
    }
}
