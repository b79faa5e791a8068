//! Which blocks a random workload favours: the `distribution` key (uniform, zipf, pareto,
//! normal, zoned, hot bands; the laws and their sampling are `iocurve-access`) and the
//! `hot_layout` key (the hot region in one piece, or scattered over the working set).

use serde::{Deserialize, Serialize};

/// An access distribution as written in a plan (`"zipf:1.2"`, `"zoned:60/10:30/20:10/70"`),
/// stored as that text.
#[derive(Debug, Clone, PartialEq)]
pub struct Distribution(pub iocurve_access::Distribution);

impl Default for Distribution {
    fn default() -> Self {
        Distribution(iocurve_access::Distribution { law: iocurve_access::Law::Uniform, centre: None })
    }
}

impl Distribution {
    pub fn is_uniform(&self) -> bool {
        self.0.is_uniform()
    }
}

impl std::fmt::Display for Distribution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::str::FromStr for Distribution {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        s.parse().map(Distribution)
    }
}

impl Serialize for Distribution {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.to_string())
    }
}

impl<'de> Deserialize<'de> for Distribution {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Where the hot region of a skewed distribution lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case", try_from = "String")]
pub enum HotLayout {
    /// In one piece from the centre (the start unless the distribution names one): what tiering
    /// arrays notice and move.
    #[default]
    Contiguous,
    /// Spread over the working set by a seeded permutation of its blocks (fio hashes its
    /// zipf, pareto and normal offsets the same way): the same law, no hot extent.
    Scattered,
}

impl HotLayout {
    pub fn is_contiguous(&self) -> bool {
        *self == HotLayout::Contiguous
    }

    pub fn access(self) -> iocurve_access::Layout {
        match self {
            HotLayout::Contiguous => iocurve_access::Layout::Contiguous,
            HotLayout::Scattered => iocurve_access::Layout::Scattered,
        }
    }
}

/// How a host's workers are placed on its targets (issue 42): every I/O to any target (by the
/// groups' weights), each worker on one path, or each worker on one target group (a controller).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case", try_from = "String")]
pub enum Placement {
    /// Each I/O picks a group by weight, then a target in it.
    #[default]
    Spread,
    /// Worker k drives the k-th target (round-robin over every path the workload uses): a
    /// worker per path, as a multipath driver's round-robin gives each path its share.
    Paths,
    /// Worker k drives the k-th target group (round-robin over the groups, a target in it per
    /// I/O): targets tagged with their controller, the load spread over controllers.
    Groups,
}

impl Placement {
    pub fn is_spread(&self) -> bool {
        *self == Placement::Spread
    }
}

impl TryFrom<String> for Placement {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        match s.as_str() {
            "spread" => Ok(Placement::Spread),
            "paths" => Ok(Placement::Paths),
            "groups" => Ok(Placement::Groups),
            _ => Err(format!("unknown placement `{s}`: use spread, paths or groups")),
        }
    }
}

impl TryFrom<String> for HotLayout {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        match s.as_str() {
            "contiguous" => Ok(HotLayout::Contiguous),
            "scattered" => Ok(HotLayout::Scattered),
            _ => Err(format!("unknown hot_layout `{s}`: use contiguous or scattered")),
        }
    }
}
