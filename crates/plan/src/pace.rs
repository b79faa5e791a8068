//! How a stream paces its I/Os beyond the closed loop and the rate schedule: think time between
//! a closed-loop stream's I/Os (fio's `thinktime`, `thinktime_blocks`, `thinktime_spin`) and
//! on/off bursts of a rate step. Written as text in plan files (`"500us"`, `"100us-900us"`,
//! `"exp:2ms"`, `"100ms/900ms"`) and stored as that text.

use serde::{Deserialize, Serialize};

/// The longest think time or burst phase: an hour.
pub const PACE_MAX_NS: u64 = 3_600_000_000_000;

/// A duration as written: a number with `ns`, `us` (or `µs`), `ms` or `s`; a bare number is
/// microseconds (fio's unit for `thinktime`).
pub fn parse_duration_ns(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale = match unit.trim() {
        "" | "us" | "µs" | "usec" => 1e3,
        "ns" | "nsec" => 1.0,
        "ms" | "msec" => 1e6,
        "s" | "sec" => 1e9,
        u => return Err(format!("`{text}`: unknown unit `{u}`; use ns, us, ms or s (a bare number is µs)")),
    };
    let v: f64 = num.parse().map_err(|_| format!("`{text}` is not a duration (e.g. 500us, 2ms, 0.5s)"))?;
    let ns = v * scale;
    if !ns.is_finite() || ns > PACE_MAX_NS as f64 {
        return Err(format!("`{text}` is longer than an hour"));
    }
    Ok(ns.round() as u64)
}

/// A duration in its shortest exact form (`500us`, `2ms`, `1500ns`).
pub fn format_duration_ns(ns: u64) -> String {
    for (unit, scale) in [("s", 1_000_000_000u64), ("ms", 1_000_000), ("us", 1_000)] {
        if ns >= scale && ns.is_multiple_of(scale) {
            return format!("{}{unit}", ns / scale);
        }
    }
    if ns >= 1_000 && ns.is_multiple_of(100) {
        return format!("{}us", ns as f64 / 1e3);
    }
    format!("{ns}ns")
}

/// A think time: how long a stream pauses before its next I/Os. Written as text, or as a number
/// of µs (`think_time = 500`, fio's way).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "TextOrMicros", into = "String")]
pub enum ThinkTime {
    /// Always this long (`500us`).
    Fixed(u64),
    /// Uniform between the two (`100us-900us`), fio's asked-for think-time range.
    Uniform(u64, u64),
    /// Exponentially distributed with this mean (`exp:2ms`): a user who thinks at random.
    Exponential(u64),
}

impl ThinkTime {
    /// The shortest a think can be, in ns.
    pub fn min_ns(self) -> u64 {
        match self {
            ThinkTime::Fixed(t) | ThinkTime::Uniform(t, _) => t,
            ThinkTime::Exponential(_) => 0,
        }
    }

    /// The mean think, in ns.
    pub fn mean_ns(self) -> f64 {
        match self {
            ThinkTime::Fixed(t) | ThinkTime::Exponential(t) => t as f64,
            ThinkTime::Uniform(a, b) => (a as f64 + b as f64) / 2.0,
        }
    }

    /// One think, in ns, from a uniform `u` in [0, 1).
    #[inline]
    pub fn draw_ns(self, u: f64) -> u64 {
        match self {
            ThinkTime::Fixed(t) => t,
            ThinkTime::Uniform(a, b) => a + ((b - a) as f64 * u) as u64,
            // Capped: an hour at the most, however far the tail reaches.
            ThinkTime::Exponential(m) => ((-(1.0 - u).ln()) * m as f64).min(PACE_MAX_NS as f64) as u64,
        }
    }
}

impl std::str::FromStr for ThinkTime {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        if t.starts_with('-') {
            return Err(format!("`{s}`: a think time cannot be negative; give e.g. 500us"));
        }
        if let Some(mean) = t.strip_prefix("exp:") {
            let m = parse_duration_ns(mean)?;
            return if m == 0 {
                Err(format!("`{s}`: the mean think time must be above 0"))
            } else {
                Ok(ThinkTime::Exponential(m))
            };
        }
        if let Some((a, b)) = t.split_once('-') {
            let (a, b) = (parse_duration_ns(a)?, parse_duration_ns(b)?);
            if a >= b {
                return Err(format!(
                    "`{s}`: a think-time range goes from the shorter to the longer (e.g. 100us-900us)"
                ));
            }
            return Ok(ThinkTime::Uniform(a, b));
        }
        let v = parse_duration_ns(t)?;
        if v == 0 {
            return Err(format!("`{s}`: a think time of 0 is none; leave think_time out"));
        }
        Ok(ThinkTime::Fixed(v))
    }
}

impl std::fmt::Display for ThinkTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            ThinkTime::Fixed(t) => write!(f, "{}", format_duration_ns(t)),
            ThinkTime::Uniform(a, b) => write!(f, "{}-{}", format_duration_ns(a), format_duration_ns(b)),
            ThinkTime::Exponential(m) => write!(f, "exp:{}", format_duration_ns(m)),
        }
    }
}

/// A think time as a plan file gives it.
#[derive(Deserialize)]
#[serde(untagged)]
enum TextOrMicros {
    Text(String),
    Micros(f64),
}

impl TryFrom<TextOrMicros> for ThinkTime {
    type Error = String;
    fn try_from(v: TextOrMicros) -> Result<Self, String> {
        match v {
            TextOrMicros::Text(s) => s.parse(),
            TextOrMicros::Micros(us) => format!("{us}us").parse(),
        }
    }
}

impl From<ThinkTime> for String {
    fn from(t: ThinkTime) -> String {
        t.to_string()
    }
}

/// A closed-loop stream's think time, resolved from `think_time`, `think_blocks` and
/// `think_spin`: after every `blocks` I/Os completed a worker lets its I/Os in flight finish,
/// then pauses for a think (the first `spin_ns` of it on the CPU, the rest asleep), then fills
/// its queue again — fio's `thinktime` with `thinktime_blocks` and `thinktime_spin`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Think {
    pub time: ThinkTime,
    pub blocks: u32,
    #[serde(default)]
    pub spin_ns: u64,
}

impl Think {
    /// For labels: `think 500us`, `think 100us-900us every 8 I/Os, 50us spinning`.
    pub fn describe(&self) -> String {
        let mut s = format!("think {}", self.time);
        if self.blocks > 1 {
            s.push_str(&format!(" every {} I/Os", self.blocks));
        }
        if self.spin_ns > 0 {
            s.push_str(&format!(", {} spinning", format_duration_ns(self.spin_ns)));
        }
        s
    }
}

/// On/off bursts of a rate step (`100ms/900ms`): I/Os arrive only during the on phases, at the
/// rate that keeps the step's mean at its target (a 10'000 IOPS step with 100 ms on, 900 ms off
/// issues at 100'000 IOPS for 100 ms of every second).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Bursts {
    pub on_ns: u64,
    pub off_ns: u64,
}

impl Bursts {
    /// How much faster than the mean I/Os arrive while on.
    pub fn peak_factor(&self) -> f64 {
        (self.on_ns + self.off_ns) as f64 / self.on_ns as f64
    }

    pub fn describe(&self) -> String {
        format!(
            "bursts {} on, {} off (×{:.3} the mean rate while on)",
            format_duration_ns(self.on_ns),
            format_duration_ns(self.off_ns),
            self.peak_factor()
        )
    }
}

impl std::str::FromStr for Bursts {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let Some((on, off)) = s.split_once('/') else {
            return Err(format!("`{s}`: give the on and off phases as ON/OFF, e.g. 100ms/900ms"));
        };
        let (on_ns, off_ns) = (parse_duration_ns(on)?, parse_duration_ns(off)?);
        if on_ns < 1_000_000 || off_ns < 1_000_000 {
            return Err(format!(
                "`{s}`: each phase of a burst lasts at least 1ms (shorter ones are lost in the scheduler's jitter)"
            ));
        }
        Ok(Bursts { on_ns, off_ns })
    }
}

impl std::fmt::Display for Bursts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", format_duration_ns(self.on_ns), format_duration_ns(self.off_ns))
    }
}

impl TryFrom<String> for Bursts {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<Bursts> for String {
    fn from(b: Bursts) -> String {
        b.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_and_print_back() {
        assert_eq!(parse_duration_ns("500"), Ok(500_000));
        assert_eq!(parse_duration_ns("500us"), Ok(500_000));
        assert_eq!(parse_duration_ns("2ms"), Ok(2_000_000));
        assert_eq!(parse_duration_ns("0.5s"), Ok(500_000_000));
        assert_eq!(parse_duration_ns("1.5us"), Ok(1_500));
        assert!(parse_duration_ns("2h").unwrap_err().contains("unknown unit"));
        assert!(parse_duration_ns("abc").is_err());
        assert!(parse_duration_ns("4000s").unwrap_err().contains("hour"));
        for ns in [1, 999, 1_000, 1_500, 250_000, 2_000_000, 3_000_000_000] {
            assert_eq!(parse_duration_ns(&format_duration_ns(ns)), Ok(ns), "{ns}");
        }
    }

    #[test]
    fn think_times_and_bursts_read_print_and_refuse() {
        for text in ["500us", "100us-900us", "exp:2ms", "1s"] {
            let t: ThinkTime = text.parse().unwrap();
            assert_eq!(t.to_string(), text);
        }
        assert_eq!("0.1ms".parse::<ThinkTime>(), Ok(ThinkTime::Fixed(100_000)));
        assert!("900us-100us".parse::<ThinkTime>().unwrap_err().contains("shorter to the longer"));
        assert!("0".parse::<ThinkTime>().unwrap_err().contains("leave think_time out"));
        assert!("exp:0".parse::<ThinkTime>().is_err());
        assert!("-5ms".parse::<ThinkTime>().unwrap_err().contains("cannot be negative"));
        // A number is µs, as fio's thinktime.
        #[derive(serde::Deserialize)]
        struct K {
            t: ThinkTime,
        }
        let k: K = toml::from_str("t = 500").unwrap();
        assert_eq!(k.t, ThinkTime::Fixed(500_000));
        let k: K = toml::from_str("t = 2.5").unwrap();
        assert_eq!(k.t, ThinkTime::Fixed(2_500));
        let b: Bursts = "100ms/900ms".parse().unwrap();
        assert_eq!((b.on_ns, b.off_ns, b.to_string()), (100_000_000, 900_000_000, "100ms/900ms".to_string()));
        assert!((b.peak_factor() - 10.0).abs() < 1e-12);
        assert!("100ms".parse::<Bursts>().unwrap_err().contains("ON/OFF"));
        assert!("100us/1ms".parse::<Bursts>().unwrap_err().contains("at least 1ms"));
    }

    #[test]
    fn draws_follow_the_think_time() {
        assert_eq!(ThinkTime::Fixed(7).draw_ns(0.3), 7);
        assert_eq!(ThinkTime::Uniform(100, 200).draw_ns(0.5), 150);
        let e = ThinkTime::Exponential(1_000_000);
        let n = 100_000;
        let mean = (0..n).map(|i| e.draw_ns((i as f64 + 0.5) / n as f64) as f64).sum::<f64>() / n as f64;
        assert!((mean / 1e6 - 1.0).abs() < 0.01, "{mean}");
    }
}
