//! Values as a plan writes them where a key takes more than one form: a byte size (`"4k"` or
//! 4096), a block size or weighted mix, a working set, a byte.

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::fmt;

use crate::size::parse_size;

pub(crate) fn opt_size_out<S: serde::Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(n) => s.serialize_str(&crate::format_size(*n)),
        None => s.serialize_none(),
    }
}

pub(crate) fn opt_byte<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u8>, D::Error> {
    let v = i64::deserialize(d)?;
    u8::try_from(v)
        .map(Some)
        .map_err(|_| de::Error::custom(format!("`{v}` is not a byte: give 0 to 255, or 0x00 to 0xff")))
}

pub(crate) fn opt_size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    size_from_value(SizeValue::deserialize(d)?).map(Some)
}

/// A byte size as written in a plan: `"4k"` or a plain integer.
fn size_from_value<E: de::Error>(v: SizeValue) -> Result<u64, E> {
    match v {
        SizeValue::Int(n) if n >= 0 => Ok(n as u64),
        SizeValue::Int(n) => Err(E::custom(format!("size {n} is negative"))),
        SizeValue::Str(s) => parse_size(&s).map_err(E::custom),
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum SizeValue {
    Int(i64),
    Str(String),
}

/// `bs`: one size or a weighted mix.
#[derive(Debug, Clone, PartialEq)]
pub enum BlockSizeSpec {
    One(u64),
    /// (size, weight) pairs.
    Mix(Vec<(u64, u32)>),
}

impl<'de> Deserialize<'de> for BlockSizeSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = BlockSizeSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(r#"a block size ("8k", 4096) or a weighted mix ({ "4k" = 70, "64k" = 30 })"#)
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Self::Value, E> {
                size_from_value(SizeValue::Int(n)).map(BlockSizeSpec::One)
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Self::Value, E> {
                Ok(BlockSizeSpec::One(n))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                parse_size(s).map(BlockSizeSpec::One).map_err(E::custom)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut mix = Vec::new();
                while let Some((k, w)) = map.next_entry::<String, i64>()? {
                    let size = parse_size(&k).map_err(de::Error::custom)?;
                    let w = u32::try_from(w).map_err(|_| {
                        de::Error::custom(format!("weight {w} of block size `{k}` must be 0 to 4294967295"))
                    })?;
                    mix.push((size, w));
                }
                Ok(BlockSizeSpec::Mix(mix))
            }
        }
        d.deserialize_any(V)
    }
}

impl Serialize for BlockSizeSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            BlockSizeSpec::One(n) => s.serialize_str(&crate::format_size(*n)),
            BlockSizeSpec::Mix(v) => {
                let mut m = s.serialize_map(Some(v.len()))?;
                for (size, w) in v {
                    m.serialize_entry(&crate::format_size(*size), w)?;
                }
                m.end()
            }
        }
    }
}

/// `working_set`: `"frontend"`, `"backend"` or `{ start = …, end = … }`.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkingSetSpec {
    Frontend,
    Backend,
    Range { start: u64, end: u64 },
}

impl<'de> Deserialize<'de> for WorkingSetSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = WorkingSetSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(r#""frontend", "backend" or a byte range { start = "0", end = "10g" }"#)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                match s {
                    "frontend" => Ok(WorkingSetSpec::Frontend),
                    "backend" => Ok(WorkingSetSpec::Backend),
                    other => Err(E::custom(format!(
                        "unknown working set `{other}`: use \"frontend\", \"backend\" or {{ start = \"0\", end = \"10g\" }}"
                    ))),
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let (mut start, mut end) = (None, None);
                while let Some(k) = map.next_key::<String>()? {
                    let v: SizeValue = map.next_value()?;
                    match k.as_str() {
                        "start" => start = Some(size_from_value(v)?),
                        "end" => end = Some(size_from_value(v)?),
                        other => {
                            return Err(de::Error::custom(format!(
                                "unknown key `{other}` in working_set: use start and end"
                            )));
                        }
                    }
                }
                match (start, end) {
                    (Some(start), Some(end)) => Ok(WorkingSetSpec::Range { start, end }),
                    _ => Err(de::Error::custom("a working_set range needs both start and end")),
                }
            }
        }
        d.deserialize_any(V)
    }
}

impl Serialize for WorkingSetSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            WorkingSetSpec::Frontend => s.serialize_str("frontend"),
            WorkingSetSpec::Backend => s.serialize_str("backend"),
            WorkingSetSpec::Range { start, end } => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("start", &crate::format_size(*start))?;
                m.serialize_entry("end", &crate::format_size(*end))?;
                m.end()
            }
        }
    }
}
