//! Reclaim steps (`[[reclaim]]`, issue 40): a region of every target written, trimmed and read
//! back, and the storage's used space watched until the trimmed space is back — what a thin
//! LUN does with the blocks a file system deletes. Their keys, defaults and checks.

use serde::{Deserialize, Serialize};

use crate::size::format_size;
use crate::spec::{opt_size, opt_size_out};

/// `[[reclaim]]` as written in a plan.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ReclaimKeys {
    /// Its name in the results (default `reclaim`, `reclaim-2` …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Bytes written and trimmed on each target (default 1g, at most what the target has
    /// from `offset`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "opt_size",
        serialize_with = "opt_size_out"
    )]
    pub size: Option<u64>,
    /// Where the region starts on each target (default 0).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "opt_size",
        serialize_with = "opt_size_out"
    )]
    pub offset: Option<u64>,
    /// Size of each write, trim and read (default 1m).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "opt_size",
        serialize_with = "opt_size_out"
    )]
    pub bs: Option<u64>,
    /// I/Os in flight in each pass (default 8).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_depth: Option<u32>,
    /// A shell command that prints the storage's used bytes (a size, `12g` or `12884901888`);
    /// default: the allocated size of a loop device's backing file or of a file target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe: Option<String>,
    /// Seconds between probes while waiting for the space (default 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub poll_s: Option<f64>,
    /// Seconds to wait for the space after the trims (default 600).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<f64>,
    /// Share of the trimmed bytes that must be free again, in percent (default 90).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub back_pct: Option<f64>,
}

/// A reclaim step resolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reclaim {
    pub name: String,
    pub size: u64,
    pub offset: u64,
    pub bs: u64,
    pub queue_depth: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<String>,
    pub poll_s: f64,
    pub timeout_s: f64,
    pub back_pct: f64,
}

impl ReclaimKeys {
    /// The step resolved as the `index`th `[[reclaim]]` (for its default name); Err names the key
    /// and what is wrong with it.
    pub fn resolve(&self, index: usize) -> Result<Reclaim, (&'static str, String)> {
        let name = self
            .name
            .clone()
            .unwrap_or_else(|| if index == 0 { "reclaim".into() } else { format!("reclaim-{}", index + 1) });
        crate::options::checks::name(&name).map_err(|m| ("name", m))?;
        let r = Reclaim {
            name,
            size: self.size.unwrap_or(1 << 30),
            offset: self.offset.unwrap_or(0),
            bs: self.bs.unwrap_or(1 << 20),
            queue_depth: self.queue_depth.unwrap_or(8),
            probe: self.probe.clone(),
            poll_s: self.poll_s.unwrap_or(1.0),
            timeout_s: self.timeout_s.unwrap_or(600.0),
            back_pct: self.back_pct.unwrap_or(90.0),
        };
        if r.bs == 0 || !r.bs.is_multiple_of(512) || r.bs > 1 << 30 {
            return Err(("bs", format!("bs is {}; give a multiple of 512 up to 1g, e.g. bs = \"1m\"", r.bs)));
        }
        if r.size < r.bs {
            return Err((
                "size",
                format!(
                    "size {} is smaller than bs {}: the region holds at least one block",
                    format_size(r.size),
                    format_size(r.bs)
                ),
            ));
        }
        if !r.offset.is_multiple_of(512) {
            return Err(("offset", format!("offset {} is not a multiple of 512", r.offset)));
        }
        if !(1..=256).contains(&r.queue_depth) {
            return Err(("queue_depth", format!("queue_depth is {}; give 1 to 256 I/Os in flight", r.queue_depth)));
        }
        if !(r.poll_s >= 0.01 && r.poll_s <= 3600.0) {
            return Err(("poll_s", format!("poll_s is {}; give 0.01 to 3600 seconds between probes", r.poll_s)));
        }
        if !(r.timeout_s >= 0.0 && r.timeout_s <= 7.0 * 86400.0) {
            return Err((
                "timeout_s",
                format!("timeout_s is {}; give 0 to 604800 seconds to wait for the space", r.timeout_s),
            ));
        }
        if !(r.back_pct > 0.0 && r.back_pct <= 100.0) {
            return Err((
                "back_pct",
                format!(
                    "back_pct is {}; give the share of the trimmed bytes that must be free again, above 0 up to 100",
                    r.back_pct
                ),
            ));
        }
        if r.probe.as_deref().is_some_and(|p| p.trim().is_empty()) {
            return Err((
                "probe",
                "probe is empty: give a command that prints the used bytes, or leave probe out".into(),
            ));
        }
        Ok(r)
    }
}

impl Reclaim {
    /// The region on a target of `size` bytes: (start, length in whole blocks); Err when the
    /// target cannot hold one block of it from its offset.
    pub fn region(&self, size: u64) -> Result<(u64, u64), String> {
        let room = size.saturating_sub(self.offset);
        let len = self.size.min(room) / self.bs * self.bs;
        if len == 0 {
            return Err(format!(
                "reclaim {}: the target has {} from offset {}, less than one block of {}",
                self.name,
                format_size(room),
                format_size(self.offset),
                format_size(self.bs)
            ));
        }
        Ok((self.offset, len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_refusals() {
        let r = ReclaimKeys::default().resolve(0).unwrap();
        assert_eq!((r.name.as_str(), r.size, r.bs, r.queue_depth, r.back_pct), ("reclaim", 1 << 30, 1 << 20, 8, 90.0));
        assert_eq!(ReclaimKeys::default().resolve(1).unwrap().name, "reclaim-2");
        let bad = |k: ReclaimKeys| k.resolve(0).unwrap_err().0;
        assert_eq!(bad(ReclaimKeys { bs: Some(1000), ..Default::default() }), "bs");
        assert_eq!(bad(ReclaimKeys { size: Some(4096), ..Default::default() }), "size");
        assert_eq!(bad(ReclaimKeys { queue_depth: Some(0), ..Default::default() }), "queue_depth");
        assert_eq!(bad(ReclaimKeys { back_pct: Some(0.0), ..Default::default() }), "back_pct");
        assert_eq!(bad(ReclaimKeys { poll_s: Some(f64::NAN), ..Default::default() }), "poll_s");
        assert_eq!(bad(ReclaimKeys { probe: Some(" ".into()), ..Default::default() }), "probe");
        assert_eq!(bad(ReclaimKeys { name: Some("a b/c".into()), ..Default::default() }), "name");
    }

    #[test]
    fn the_region_fits_the_target_in_whole_blocks() {
        let r = ReclaimKeys { size: Some(10 << 20), offset: Some(1 << 20), ..Default::default() }.resolve(0).unwrap();
        assert_eq!(r.region(100 << 20).unwrap(), (1 << 20, 10 << 20));
        assert_eq!(r.region((5 << 20) + 4096).unwrap(), (1 << 20, 4 << 20));
        assert!(r.region(1 << 20).unwrap_err().contains("less than one block"));
    }
}
