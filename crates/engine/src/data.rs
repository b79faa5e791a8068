//! The data of written blocks. Buffers are filled with random bytes once; every write then
//! stamps each 4 KiB unit so that no two written units are alike (no accidental dedupe across
//! workers, steps and hosts) at the cost of two stores per unit.

/// Stamps every 4 KiB unit of `block` (written at byte `offset`) with `tag` and the unit's own
/// offset. Bytes 0..8 of a unit hold the tag, bytes 8..16 the offset: a reader can tell where a
/// unit was meant to land.
#[inline]
pub fn stamp(block: &mut [u8], tag: u64, offset: u64) {
    for (i, unit) in block.chunks_mut(4096).enumerate() {
        unit[..8].copy_from_slice(&tag.to_le_bytes());
        unit[8..16].copy_from_slice(&(offset + (i as u64) * 4096).to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_carries_tag_and_its_offset() {
        let mut b = vec![0xaau8; 3 * 4096];
        stamp(&mut b, 7, 8192);
        for (i, u) in b.chunks(4096).enumerate() {
            assert_eq!(u64::from_le_bytes(u[..8].try_into().unwrap()), 7);
            assert_eq!(u64::from_le_bytes(u[8..16].try_into().unwrap()), 8192 + i as u64 * 4096);
            assert!(u[16..].iter().all(|x| *x == 0xaa), "the rest is untouched");
        }
    }

    #[test]
    fn small_blocks_get_one_stamp() {
        let mut b = vec![0u8; 512];
        stamp(&mut b, 1, 0);
        assert_eq!(b[0], 1);
    }
}
