//! The data of written blocks: what they contain (compressibility and dedupability as asked,
//! [`data`]), the random generator that makes them and the offsets ([`rng`]), and the
//! page-aligned buffers O_DIRECT needs ([`buffer`]). Pure: no I/O, no clocks.

pub mod buffer;
pub mod data;
pub mod rng;
