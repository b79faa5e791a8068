//! The array's own figures on the run's clock (issue 44): a CSV of timestamped columns (controller
//! CPU, cache hit ratio, back-end MB/s, any column) as the array's GUI or CLI exports it, read
//! into series. Pure: the reading; storing, drawing and checking are elsewhere.

use serde::{Deserialize, Serialize};

use crate::marks::parse_when;

/// The largest CSV read.
pub const ARRAY_FILE_BYTES: u64 = 64 << 20;
/// Columns kept at most.
pub const ARRAY_COLUMNS: usize = 64;

/// One column of the array's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArraySeries {
    /// The column's name, as its header says.
    pub name: String,
    /// What it counts where iocurve can compare it: `iops` or `mbps` (the array's front-end
    /// throughput); empty otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// (ns since the Unix epoch on the run's clock, value), in time order.
    pub points: Vec<(i64, f64)>,
}

/// What a CSV gave: its columns, and the cells left out (not numbers: `N/A`, empty).
#[derive(Debug, Default, PartialEq)]
pub struct ArrayCsv {
    pub series: Vec<ArraySeries>,
    pub skipped_cells: usize,
}

/// The fields of a CSV line (`,` `;` or tab, as the header has them; fields in double quotes
/// may hold the separator, a doubled quote is one).
fn fields(line: &str, sep: char) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            c if c == sep && !quoted => out.push(std::mem::take(&mut cur).trim().to_string()),
            c => cur.push(c),
        }
    }
    out.push(cur.trim().to_string());
    out
}

/// Reads a CSV of the array's figures: a header line naming the columns, then a line per
/// moment. The time is the column `time_column` (default: the first), in any form `--at` takes
/// (RFC 3339, `+S` after `start_unix_ns`, `@S`) or Unix seconds; times without an offset take
/// `assumed_offset_s`. Every other column is a series of numbers (cells that are not numbers
/// are left out and counted). Err: the lines that cannot be read (`(line, why)`), or the file's
/// own fault as line 1.
pub fn read_array_csv(
    text: &str,
    start_unix_ns: i64,
    assumed_offset_s: Option<i64>,
    time_column: Option<&str>,
) -> Result<ArrayCsv, Vec<(usize, String)>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'));
    let Some((hn, header)) = lines.next() else { return Err(vec![(1, "no header line naming the columns".into())]) };
    let sep = [',', ';', '\t'].into_iter().max_by_key(|&c| header.matches(c).count()).unwrap_or(',');
    let names = fields(header, sep);
    let tcol = match time_column {
        Some(t) => names
            .iter()
            .position(|n| n == t)
            .ok_or_else(|| vec![(hn + 1, format!("no column `{t}` in the header ({})", names.join(", ")))])?,
        None => 0,
    };
    if names.len() < 2 {
        return Err(vec![(hn + 1, format!("a time and at least one column of figures, apart by `{sep}`"))]);
    }
    if names.len() - 1 > ARRAY_COLUMNS {
        return Err(vec![(
            hn + 1,
            format!("{} columns: at most {ARRAY_COLUMNS} are kept; cut the file to those you need", names.len() - 1),
        )]);
    }
    let mut out = ArrayCsv {
        series: names
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != tcol)
            .map(|(_, n)| ArraySeries { name: n.clone(), kind: String::new(), points: Vec::new() })
            .collect(),
        skipped_cells: 0,
    };
    let mut refused = Vec::new();
    for (i, line) in lines {
        let f = fields(line, sep);
        let Some(t) = f.get(tcol) else { continue };
        // Unix seconds as a plain number, as many exports write them.
        let when = match t.parse::<f64>() {
            Ok(v) if v.is_finite() && v > 1e8 && v < 4e9 => Ok((v * 1e9).round() as i64),
            _ => parse_when(t, start_unix_ns, assumed_offset_s),
        };
        let at = match when {
            Ok(at) => at,
            Err(e) => {
                refused.push((i + 1, e));
                continue;
            }
        };
        let mut k = 0;
        for (j, cell) in f.iter().enumerate() {
            if j == tcol {
                continue;
            }
            if let Some(s) = out.series.get_mut(k) {
                match cell.trim_end_matches('%').trim().parse::<f64>() {
                    Ok(v) if v.is_finite() => s.points.push((at, v)),
                    _ => out.skipped_cells += 1,
                }
            }
            k += 1;
        }
    }
    if !refused.is_empty() {
        return Err(refused);
    }
    for s in &mut out.series {
        s.points.sort_by_key(|p| p.0);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const START: i64 = 1_795_300_000_000_000_000; // 2026-11-21T22:26:40Z

    #[test]
    fn an_arrays_export_reads_into_series() {
        let csv = "\u{feff}Time;Controller A CPU %;\"Front-end IOPS\";Cache hit\n2026-11-21 23:26:41;35 %;12000;N/A\n2026-11-21 23:26:42;\"40\";12500;97.5\n";
        let r = read_array_csv(csv, START, Some(3600), None).unwrap();
        let names: Vec<&str> = r.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["Controller A CPU %", "Front-end IOPS", "Cache hit"]);
        assert_eq!(r.series[1].points, [(START + 1_000_000_000, 12000.0), (START + 2_000_000_000, 12500.0)]);
        assert_eq!(r.series[0].points[0].1, 35.0);
        assert_eq!((r.series[2].points.len(), r.skipped_cells), (1, 1));
        // Unix seconds, a named time column that is not the first.
        let r = read_array_csv("iops,ts\n5,1795300001.5\n", START, None, Some("ts")).unwrap();
        assert_eq!(r.series[0].points, [(START + 1_500_000_000, 5.0)]);
    }

    #[test]
    fn bad_files_say_which_line() {
        assert_eq!(read_array_csv("", START, None, None).unwrap_err()[0].0, 1);
        let e = read_array_csv("t,x\n2026-11-21 23:26:41,1\n+1,2\nnoon,3\n", START, None, None).unwrap_err();
        assert_eq!(e.iter().map(|x| x.0).collect::<Vec<_>>(), [2, 4], "{e:?}");
        assert!(e[0].1.contains("no UTC offset"));
        let e = read_array_csv("t,x\n+1,2\n", START, None, Some("time")).unwrap_err();
        assert!(e[0].1.contains("no column `time` in the header (t, x)"), "{e:?}");
    }

    proptest::proptest! {
        #[test]
        fn any_text_reads_or_is_refused(s in "\\PC{0,300}") {
            let _ = read_array_csv(&s, START, Some(0), None);
        }
    }
}
