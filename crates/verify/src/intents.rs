//! The writes a journal names as in flight, as data: what both the map (a pass after a crash)
//! and the journal (which reads and writes them) use, below both.

use std::collections::HashMap;

/// A write about to be issued: block `block` of target `target` gets generation `gen_`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Intent {
    pub target: u32,
    pub block: u64,
    pub gen_: u16,
}

/// Whether a journaled write of generation `x` is one the map's generation `m` does not cover:
/// any other generation. (Not "newer": a block whose write failed is unknown, generation 0,
/// and its next write starts again at 1, whatever it had before.)
pub fn uncovered(x: u16, m: u16) -> bool {
    x != 0 && x != m
}

/// The writes a journal names as in flight: the last journaled generation of each block.
#[derive(Debug, Default)]
pub struct Intents {
    last: HashMap<(u32, u64), u16>,
    /// Bytes after the last whole batch (cut short by the crash, or damaged): not read.
    pub ignored_bytes: u64,
}

impl Intents {
    /// The generation block `block` of `target` was being written with, if the journal names it.
    pub fn get(&self, target: u32, block: u64) -> Option<u16> {
        self.last.get(&(target, block)).copied()
    }

    pub fn iter(&self) -> impl Iterator<Item = (u32, u64, u16)> + '_ {
        self.last.iter().map(|(&(t, b), &g)| (t, b, g))
    }

    pub fn len(&self) -> usize {
        self.last.len()
    }

    pub fn is_empty(&self) -> bool {
        self.last.is_empty()
    }

    /// Block `block` of `target` was last journaled with generation `gen_`.
    pub(crate) fn record(&mut self, target: u32, block: u64, gen_: u16) {
        self.last.insert((target, block), gen_);
    }
}
