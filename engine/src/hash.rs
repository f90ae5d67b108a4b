//! The engine's one fast byte-string hash, eight bytes at a time.
//!
//! Used where collisions are resolved by comparing the bytes anyway (the
//! cross-transaction cache, collection indexes), so it needs speed and a
//! good spread, not resistance to chosen inputs: an adversary who collides
//! keys only lengthens a probe sequence bounded by the request limits.

const K: u64 = 0x9E37_79B9_7F4A_7C15;

#[inline(always)]
fn words(b: &[u8], map: impl Fn(u64) -> u64) -> u64 {
    let mut h: u64 = (b.len() as u64).wrapping_mul(K);
    let mut chunks = b.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = (h ^ map(u64::from_le_bytes(w)))
            .wrapping_mul(K)
            .rotate_left(29);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        // The last eight bytes (overlapping the previous word) when there
        // are that many; else (the whole key is shorter) two overlapping
        // four-byte reads, or its first, middle and last bytes: every byte
        // is in the word, and the length is in `h` already. A copy into a
        // buffer would be a `memcpy` call, and a loop over the bytes was
        // the slowest part of hashing CRS's short `TX` and header names.
        let n = rest.len();
        let w = match b.get(b.len().wrapping_sub(8)..) {
            Some(last) if b.len() >= 8 => {
                let mut w = [0u8; 8];
                w.copy_from_slice(last);
                u64::from_le_bytes(w)
            }
            _ if n >= 4 => {
                let (mut lo, mut hi) = ([0u8; 4], [0u8; 4]);
                lo.copy_from_slice(&rest[..4]);
                hi.copy_from_slice(&rest[n - 4..]);
                u64::from(u32::from_le_bytes(lo)) | u64::from(u32::from_le_bytes(hi)) << 32
            }
            _ => u64::from(rest[0]) | u64::from(rest[n / 2]) << 8 | u64::from(rest[n - 1]) << 16,
        };
        h = (h ^ map(w)).wrapping_mul(K).rotate_left(29);
    }
    avalanche(h)
}

/// A folded multiply (the high and low halves of a 128-bit product,
/// xored): the high half depends on every bit of `h`, so the low bits an
/// index uses do too. The rounds above only carry a change upwards (a
/// product's low bits ignore its factors' high bits), so without it the
/// bucket bits ignored a word's last bytes: `field100`..`field199`
/// (arguments that differ in their last characters) shared one index slot,
/// and a form of 650 such arguments probed ~80 slots per insert.
#[inline(always)]
fn avalanche(h: u64) -> u64 {
    let m = u128::from(h) * u128::from(0xff51_afd7_ed55_8ccd_u64);
    (m as u64) ^ ((m >> 64) as u64)
}

/// The hash of `b`.
pub(crate) fn bytes(b: &[u8]) -> u64 {
    words(b, |w| w)
}

/// The hash of `b` with ASCII letters lowercased: keys equal under
/// `eq_ignore_ascii_case` hash the same.
pub(crate) fn bytes_ascii_nocase(b: &[u8]) -> u64 {
    words(b, ascii_lowercase_word)
}

/// The eight bytes of `w` with `A`-`Z` turned into `a`-`z` (SWAR: a byte
/// is upper case when its high bit is clear, it is at least 0x41 and below
/// 0x5b; adding to the low seven bits sets bit 7 at those thresholds).
#[inline(always)]
fn ascii_lowercase_word(w: u64) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let low = w & LOW7;
    let ge_a = low + 0x3f3f_3f3f_3f3f_3f3f;
    let gt_z = low + 0x2525_2525_2525_2525;
    let upper = ge_a & !gt_z & !w & HIGH;
    w | (upper >> 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys that differ only in their last bytes spread over an index's
    /// buckets (the low bits, what `Collection` and the caches use).
    #[test]
    fn keys_differing_in_their_last_bytes_spread() {
        for (prefix, n) in [("field", 1000), ("json.items.", 1000), ("a", 200)] {
            let mask = 2047usize;
            let mut per_bucket = vec![0u32; mask + 1];
            for i in 0..n {
                let key = format!("{prefix}{i}");
                per_bucket[bytes_ascii_nocase(key.as_bytes()) as usize & mask] += 1;
            }
            let worst = per_bucket.iter().copied().max().unwrap_or(0);
            assert!(worst <= 6, "{prefix}N: {worst} keys in one bucket");
        }
    }

    #[test]
    fn lowercasing_words_agrees_with_the_standard_library() {
        for b in 0..=255u8 {
            for pos in 0..8 {
                let mut bytes = [b'Q', 0xc1, b'z', b'@', b'[', 0xff, b'a', b'Z'];
                bytes[pos] = b;
                let got = ascii_lowercase_word(u64::from_le_bytes(bytes)).to_le_bytes();
                assert_eq!(got, bytes.map(|c| c.to_ascii_lowercase()), "{bytes:?}");
            }
        }
    }

    #[test]
    fn case_folded_hashes_agree_on_case_insensitive_equals() {
        let keys: [&[u8]; 6] = [
            b"",
            b"a",
            b"User-Agent",
            b"uSER-aGENT",
            b"x\xc9Y",
            b"X\xc9y",
        ];
        for a in keys {
            for b in keys {
                if a.eq_ignore_ascii_case(b) {
                    assert_eq!(bytes_ascii_nocase(a), bytes_ascii_nocase(b));
                }
            }
        }
        assert_ne!(bytes(b"User-Agent"), bytes(b"user-agent"));
        // Keys shorter than a word: each byte counts, wherever it is.
        for len in 1..8 {
            let base = vec![b'a'; len];
            for pos in 0..len {
                let mut other = base.clone();
                other[pos] = b'b';
                assert_ne!(bytes(&base), bytes(&other), "{len} bytes, at {pos}");
                assert_ne!(bytes_ascii_nocase(&base), bytes_ascii_nocase(&other));
                other[pos] = b'A';
                assert_eq!(bytes_ascii_nocase(&base), bytes_ascii_nocase(&other));
            }
        }
        assert_ne!(bytes_ascii_nocase(b"ab"), bytes_ascii_nocase(b"ab\0"));
    }
}
