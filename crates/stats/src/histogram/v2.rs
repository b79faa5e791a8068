//! The HdrHistogram V2 encoding (plain, and deflated in a zlib stream) read into and written
//! from a [`Sparse`] histogram directly, without the full histogram in between: what an agent
//! ships and the store keeps, byte for byte what `hdrhistogram`'s serializers write.
//!
//! The bytes are untrusted (an agent's, a store file's): the header's lengths are checked
//! against what was given, and its digits and lowest value against what iocurve writes (2 or 3
//! digits: at most 56,320 buckets whatever the range; 1 ns), before anything is allocated for
//! them. Everything read is sparse: nothing is allocated beyond what the bytes hold (a header
//! of another program's lowest value once went to `hdrhistogram`'s reader, which allocates
//! every bucket its header states: 442 KB for 40 bytes, repeated per target part of an
//! interval).

use std::io::Read;

use super::sparse::{Scheme, Sparse};

const COOKIE: u32 = 0x1c84_9313;
const COMPRESSED_COOKIE: u32 = 0x1c84_9314;
const HEADER: usize = 40;
/// More I/Os than one encoding's count can hold (2^63 − 1) is no measurement: refused, so that
/// adding two histograms up never overflows (hdrhistogram's percentile walk adds unchecked).
const TOO_MANY: &str = "its counts add up beyond 2^63 - 1";
/// The most significant digits read: iocurve writes 2 or 3; 5 would let 41 bytes ask for a
/// histogram of 6 million buckets.
const MAX_DIGITS: u32 = 3;
/// The most counts a compressed encoding may inflate to: 3 digits over the whole u64 range are
/// 56,320 buckets of at most 9 bytes each, under 0.6 MiB.
const MAX_INFLATED: usize = 1 << 20;

/// Reads either encoding.
pub(super) fn read(bytes: &[u8]) -> Result<Sparse, String> {
    let cookie = bytes.get(..4).map(|b| u32::from_be_bytes(b.try_into().expect("4 bytes")));
    match cookie {
        Some(COOKIE) => read_plain(bytes),
        Some(COMPRESSED_COOKIE) => {
            let len = bytes.get(4..8).map(|b| u32::from_be_bytes(b.try_into().expect("4 bytes")) as usize);
            let stream = len.and_then(|len| bytes.get(8..8 + len)).ok_or("the compressed stream is cut short")?;
            let mut plain = Vec::new();
            let mut inflated = flate2::read::ZlibDecoder::new(stream).take(HEADER as u64);
            inflated.read_to_end(&mut plain).map_err(|e| format!("the compressed stream does not inflate: {e}"))?;
            let payload = payload_len(&plain)?;
            if payload > MAX_INFLATED {
                return Err(format!("its header states {payload} bytes of counts (at most {MAX_INFLATED})"));
            }
            let mut rest = inflated.into_inner().take(payload as u64);
            rest.read_to_end(&mut plain).map_err(|e| format!("the compressed stream does not inflate: {e}"))?;
            read_plain(&plain)
        }
        _ => Err("not an HdrHistogram V2 encoding (its first 4 bytes)".into()),
    }
}

/// The payload's length a plain encoding's header states.
fn payload_len(plain: &[u8]) -> Result<usize, String> {
    if plain.len() < HEADER {
        return Err(format!("a header of {} bytes (40 expected)", plain.len()));
    }
    if u32::from_be_bytes(plain[..4].try_into().expect("4 bytes")) != COOKIE {
        return Err("the compressed stream holds no V2 encoding".into());
    }
    Ok(u32::from_be_bytes(plain[4..8].try_into().expect("4 bytes")) as usize)
}

fn read_plain(plain: &[u8]) -> Result<Sparse, String> {
    let payload = payload_len(plain)?;
    let digits = u32::from_be_bytes(plain[12..16].try_into().expect("4 bytes"));
    if digits > MAX_DIGITS {
        return Err(format!(
            "{digits} significant digits (iocurve's histograms have 2 or 3; at most {MAX_DIGITS} are read)"
        ));
    }
    let counts = plain[HEADER..]
        .get(..payload)
        .ok_or_else(|| format!("its header states {payload} bytes of counts, {} follow", plain.len() - HEADER))?;
    read_counts(parse_header(&plain[4..HEADER])?, counts)
}

/// The empty histogram a header (after its cookie) describes, refused where it is not one
/// iocurve writes (what `hdrhistogram`'s reader refuses among them: a normalizing offset, a
/// conversion ratio other than 1, a highest value below twice the lowest).
fn parse_header(h: &[u8]) -> Result<Sparse, String> {
    let u32_at = |k: usize| u32::from_be_bytes(h[k..k + 4].try_into().expect("4 bytes"));
    let u64_at = |k: usize| u64::from_be_bytes(h[k..k + 8].try_into().expect("8 bytes"));
    let (offset, digits, low, high, ratio) = (u32_at(4), u32_at(8), u64_at(12), u64_at(20), u64_at(28));
    if low != 1 {
        return Err(format!("its lowest discernible value is {low} ns (iocurve's histograms have 1 ns)"));
    }
    if offset != 0 || high < 2 || f64::from_bits(ratio) != 1.0 {
        return Err(format!(
            "a header iocurve does not write (normalizing offset {offset}, highest value {high}, conversion \
             ratio {})",
            f64::from_bits(ratio)
        ));
    }
    let scheme =
        u8::try_from(digits).ok().and_then(Scheme::new).ok_or_else(|| format!("{digits} significant digits"))?;
    Ok(Sparse::empty(scheme, high))
}

/// The counts' numbers: zig-zag LEB128-64b9B, a negative one skipping that many empty buckets.
fn numbers(mut payload: &[u8]) -> impl Iterator<Item = Result<i64, String>> {
    std::iter::from_fn(move || {
        if payload.is_empty() {
            return None;
        }
        let Some((zz, used)) = varint(payload) else {
            payload = &[];
            return Some(Err("its last count is cut short".to_string()));
        };
        payload = &payload[used..];
        Some(Ok(((zz >> 1) as i64) ^ -((zz & 1) as i64)))
    })
}

/// The counts read into `sparse` (as `hdrhistogram` reads them, and refused where it refuses
/// them).
fn read_counts(mut sparse: Sparse, payload: &[u8]) -> Result<Sparse, String> {
    let len = sparse.scheme.counts_len(sparse.highest);
    let mut index = 0usize;
    for n in numbers(payload) {
        let n = n?;
        if n < 0 {
            let zeros = n.checked_neg().and_then(|z| usize::try_from(z).ok());
            index = zeros.and_then(|z| index.checked_add(z)).ok_or("a run of empty buckets beyond any histogram")?;
        } else {
            if n > 0 {
                if index >= len {
                    return Err(format!("a count in bucket {index}, beyond the {len} its range holds"));
                }
                sparse.counts.push((index as u32, n as u64));
                sparse.total = add_count(sparse.total, n as u64)?;
            }
            // A zero count steps past its bucket: after runs up to usize::MAX it would wrap,
            // and the buckets be out of order (hdrhistogram's reader refuses it as well).
            index = index.checked_add(1).ok_or("a run of empty buckets beyond any histogram")?;
        }
    }
    // Kept while a coordinator waits for every host's interval: no room left over from growing.
    sparse.counts.shrink_to_fit();
    Ok(sparse)
}

fn add_count(total: u64, n: u64) -> Result<u64, String> {
    total.checked_add(n).filter(|&t| t <= i64::MAX as u64).ok_or_else(|| TOO_MANY.to_string())
}

/// One LEB128-64b9B number: eight 7-bit groups, then a ninth byte whole. None when cut short.
fn varint(b: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for k in 0..8 {
        let byte = *b.get(k)?;
        value |= u64::from(byte & 0x7f) << (7 * k);
        if byte & 0x80 == 0 {
            return Some((value, k + 1));
        }
    }
    Some((value | u64::from(*b.get(8)?) << 56, 9))
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    for _ in 0..8 {
        if v < 0x80 {
            out.push(v as u8);
            return;
        }
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_number(out: &mut Vec<u8>, n: i64) {
    put_varint(out, ((n << 1) ^ (n >> 63)) as u64);
}

/// The plain encoding.
pub(super) fn write(s: &Sparse) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + 2 * s.counts.len() + 8);
    out.extend_from_slice(&COOKIE.to_be_bytes());
    out.extend_from_slice(&[0; 4]); // the payload's length, below
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&u32::from(s.scheme.digits).to_be_bytes());
    out.extend_from_slice(&1u64.to_be_bytes());
    // A header that could not hold the last bucket would be refused by every reader.
    let needed = s.counts.last().map_or(2, |&(i, _)| s.scheme.highest_equivalent(s.scheme.value_for(i as usize)));
    let highest = if s.counts.last().is_some_and(|&(i, _)| i as usize >= s.scheme.counts_len(s.highest)) {
        needed
    } else {
        s.highest
    };
    out.extend_from_slice(&highest.to_be_bytes());
    out.extend_from_slice(&1.0f64.to_be_bytes());
    if s.counts.is_empty() {
        // As `hdrhistogram` writes an empty histogram: its first bucket, empty.
        put_number(&mut out, 0);
    }
    let mut next = 0usize;
    for &(i, c) in &s.counts {
        let zeros = i as usize - next;
        // One empty bucket is written as a zero count, a run of them as its negative length.
        match zeros {
            0 => {}
            1 => put_number(&mut out, 0),
            _ => put_number(&mut out, -(zeros as i64)),
        }
        put_number(&mut out, i64::try_from(c).unwrap_or(i64::MAX));
        next = i as usize + 1;
    }
    let payload = (out.len() - HEADER) as u32;
    out[4..8].copy_from_slice(&payload.to_be_bytes());
    out
}

/// The plain encoding deflated (zlib, default level), behind its own cookie and length.
pub(super) fn write_compressed(s: &Sparse) -> Vec<u8> {
    use std::io::Write;
    let plain = write(s);
    let mut out = Vec::with_capacity(8 + plain.len() / 2);
    out.extend_from_slice(&COMPRESSED_COOKIE.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    let mut z = flate2::write::ZlibEncoder::new(out, flate2::Compression::default());
    z.write_all(&plain).expect("deflating into a Vec cannot fail");
    let mut out = z.finish().expect("deflating into a Vec cannot fail");
    let len = (out.len() - 8) as u32;
    out[4..8].copy_from_slice(&len.to_be_bytes());
    out
}
