//! The agents' clocks, pure: the offset estimate from pings (the ping with the smallest round
//! trip wins: its midpoint is the surest) and the verdict on an offset.

use std::time::Duration;

/// Pings' (sent, agent's clock, received) in ns since the Unix epoch, reduced to the one with
/// the smallest round trip.
#[derive(Debug, Clone, Copy)]
pub struct ClockEstimate {
    offset_ns: i64,
    rtt_ns: i64,
}

impl Default for ClockEstimate {
    fn default() -> Self {
        ClockEstimate { offset_ns: 0, rtt_ns: i64::MAX }
    }
}

impl ClockEstimate {
    pub fn add(&mut self, sent_ns: i64, agent_ns: i64, received_ns: i64) {
        let rtt = received_ns.saturating_sub(sent_ns);
        // Our clock stepped back during the ping: no measurement.
        if (0..self.rtt_ns).contains(&rtt) {
            self.rtt_ns = rtt;
            self.offset_ns = agent_ns.saturating_sub(sent_ns / 2 + received_ns / 2);
        }
    }

    /// (agent clock minus ours, round trip) of the best ping; (0, i64::MAX) before any.
    pub fn best(&self) -> (i64, i64) {
        (self.offset_ns, self.rtt_ns)
    }
}

#[derive(Debug, PartialEq)]
pub enum ClockVerdict {
    Fine,
    /// Worth a warning: more than [`SKEW_WARNING`] off.
    Warn(String),
    /// More off than the bound: refused.
    Refuse(String),
}

/// Clocks further apart than this get a warning (NTP keeps a LAN within a few ms).
pub const SKEW_WARNING: Duration = Duration::from_millis(50);

/// Judges an agent's clock offset. Only the part the measurement is sure of counts: the true
/// offset lies within half the round trip of the estimate.
pub fn check_clock(addr: &str, offset_ns: i64, rtt_ns: i64, max: Duration) -> ClockVerdict {
    check_clock_against(addr, offset_ns, rtt_ns, max, "this host's")
}

/// [`check_clock`] against `whose` clock: a relay holds its agents to the coordinator's too
/// (their offset from the relay plus the relay's from the coordinator, each measurement's
/// half round trip uncertain).
pub fn check_clock_against(addr: &str, offset_ns: i64, rtt_ns: i64, max: Duration, whose: &str) -> ClockVerdict {
    let sure = offset_ns.unsigned_abs().saturating_sub(rtt_ns.max(0) as u64 / 2);
    let side = if offset_ns > 0 { "ahead of" } else { "behind" };
    let what = format!("agent {addr}'s clock is {:.1} ms {side} {whose}", offset_ns.unsigned_abs() as f64 / 1e6);
    if sure > max.as_nanos() as u64 {
        ClockVerdict::Refuse(format!(
            "{what}, more than --max-skew-ms {}: synchronize the clocks (chrony or NTP) or raise --max-skew-ms",
            max.as_millis()
        ))
    } else if sure > SKEW_WARNING.as_nanos() as u64 {
        ClockVerdict::Warn(format!(
            "{what}: steps still start together (each start is converted), but clocks this far apart may be stepped during the run; synchronize them (chrony or NTP)"
        ))
    } else {
        ClockVerdict::Fine
    }
}

/// The lead for a step: how long before its start moment the agents get the request. Enough
/// for the request to arrive (two round trips of the slowest agent) and for the slowest agent
/// to set the step up — its set-up of the previous step, scaled to this step's workers and
/// doubled (the step grows along the ramp) — plus 20 ms; `first` when there is no previous step
/// to go by; at most 10 s. A lead too short starts late agents late (the step says so); one too
/// long only waits.
pub fn step_lead(max_rtt_ns: i64, previous: Option<(i64, u32)>, workers: u32, first: Duration) -> Duration {
    let Some((setup_ns, prev_workers)) = previous else { return first };
    let scale = workers.max(1) as f64 / prev_workers.max(1) as f64;
    let setup = setup_ns.max(0) as f64 * scale.max(1.0) * 2.0;
    let ns = 2.0 * max_rtt_ns.max(0) as f64 + setup + 20e6;
    Duration::from_nanos(ns.min(10e9) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lead_follows_round_trips_and_the_last_set_up() {
        let first = Duration::from_millis(500);
        assert_eq!(step_lead(1_000_000, None, 4, first), first, "nothing to go by yet");
        // 1 ms round trips, 10 ms of set-up at 4 workers, now 8: 2 + 40 + 20 ms.
        assert_eq!(step_lead(1_000_000, Some((10_000_000, 4)), 8, first), Duration::from_millis(62));
        // Fewer workers than before: the set-up is not scaled down.
        assert_eq!(step_lead(0, Some((10_000_000, 8)), 1, first), Duration::from_millis(40));
        assert_eq!(step_lead(0, Some((60_000_000_000, 1)), 512, first), Duration::from_secs(10), "capped");
    }

    #[test]
    fn the_ping_with_the_smallest_round_trip_gives_the_offset() {
        let mut c = ClockEstimate::default();
        // Agent 5 ms ahead; a slow ping (asymmetric: late reply) would say otherwise.
        c.add(1_000_000, 1_000_000 + 5_000_000 + 1_000, 1_002_000);
        c.add(10_000_000, 10_000_000 + 5_000_000 + 9_000_000, 10_030_000);
        c.add(20_000_000, 20_000_000 + 5_000_000 + 100, 20_000_200);
        assert_eq!(c.best(), (5_000_000, 200));
        // A clock stepped back mid-ping is no measurement (and cannot overflow the arithmetic).
        c.add(i64::MAX, i64::MIN, 0);
        assert_eq!(c.best(), (5_000_000, 200));
    }

    #[test]
    fn only_the_certain_part_of_an_offset_counts_against_the_bounds() {
        let max = Duration::from_millis(1000);
        let ms = 1_000_000;
        assert_eq!(check_clock("a", 0, 100_000, max), ClockVerdict::Fine);
        assert_eq!(check_clock("a", -49 * ms, 0, max), ClockVerdict::Fine);
        assert!(matches!(check_clock("a", 60 * ms, 0, max), ClockVerdict::Warn(m) if m.contains("60.0 ms ahead")));
        // 60 ms measured over a 40 ms round trip: only 40 ms are certain.
        assert_eq!(check_clock("a", 60 * ms, 40 * ms, max), ClockVerdict::Fine);
        assert!(
            matches!(check_clock("a", -1500 * ms, 0, max), ClockVerdict::Refuse(m) if m.contains("1500.0 ms behind") && m.contains("--max-skew-ms 1000"))
        );
        assert!(matches!(check_clock("a", 1500 * ms, 1200 * ms, max), ClockVerdict::Warn(_)));
    }
}
