//! Binary-to-text codecs: `hexEncode`, `hexDecode`, `sqlHexDecode`,
//! `base64Encode`, `base64Decode`, `base64DecodeExt`.

use super::bytes::{is_hex, x2c};

const HEX_LOWER: &[u8; 16] = b"0123456789abcdef";

/// `hexEncode`: two lower-case hex digits per byte.
pub(super) fn hex_encode(input: &[u8], out: &mut Vec<u8>) {
    out.reserve(input.len() * 2);
    for &b in input {
        out.extend_from_slice(&[
            HEX_LOWER[usize::from(b >> 4)],
            HEX_LOWER[usize::from(b & 15)],
        ]);
    }
}

/// `hexDecode`: every pair of bytes becomes one byte, **without validation**:
/// v3 runs its `x2c` arithmetic on whatever the bytes are (`zz` gives `S`,
/// `0x` gives `!`), and drops an odd last byte.
pub(super) fn hex_decode(input: &[u8], out: &mut Vec<u8>) {
    out.reserve(input.len() / 2);
    for pair in input.chunks_exact(2) {
        out.push(x2c(pair[0], pair[1]));
    }
}

/// `sqlHexDecode` as 3.0.9 behaves, loop quirks included:
///
/// * `0x`/`0X` followed by at least one pair of hex digits: every following
///   pair is decoded (`0x414243` -> `ABC`); an odd last digit is kept;
/// * the byte right after a decoded run is copied without being looked at,
///   so `0x41` + `0x42` gives `A0x4` (the second `0` is copied, and see the
///   next point for the final `2`);
/// * **the last byte of the value is dropped** unless it belongs to a
///   decoded run (`abc` -> `ab`, `a` -> empty): v3's loop condition
///   pre-increments its counter, so it stops one byte early;
/// * the result ends at the first NUL byte (from the input or decoded from
///   `0x00`).
///
/// Later v3 releases rewrote this transformation; the quirks above are
/// 3.0.9's.
pub(super) fn sql_hex_decode(input: &[u8], out: &mut Vec<u8>) {
    let n = input.len();
    // v3 reads the NUL terminator past the end of the value.
    let at = |k: usize| input.get(k).copied().unwrap_or(0);
    out.reserve(n);
    let mut p = 0;
    while p + 1 < n && input[p] != 0 {
        if input[p] == b'0'
            && (input[p + 1] | 0x20) == b'x'
            && is_hex(at(p + 2))
            && is_hex(at(p + 3))
        {
            p += 2;
            while is_hex(at(p)) && is_hex(at(p + 1)) {
                out.push(x2c(input[p], input[p + 1]));
                p += 2;
            }
        }
        let b = at(p);
        if b == 0 {
            break;
        }
        out.push(b);
        p += 1;
    }
    if let Some(z) = memchr::memchr(0, out) {
        out.truncate(z);
    }
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// `base64Encode`: standard alphabet, `=` padding, no line breaks.
pub(super) fn base64_encode(input: &[u8], out: &mut Vec<u8>) {
    out.reserve(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let b0 = u32::from(chunk[0]);
        let b1 = chunk.get(1).map_or(0, |&b| u32::from(b));
        let b2 = chunk.get(2).map_or(0, |&b| u32::from(b));
        let x = (b0 << 16) | (b1 << 8) | b2;
        out.push(B64[(x >> 18) as usize & 63]);
        out.push(B64[(x >> 12) as usize & 63]);
        out.push(if chunk.len() > 1 {
            B64[(x >> 6) as usize & 63]
        } else {
            b'='
        });
        out.push(if chunk.len() > 2 {
            B64[x as usize & 63]
        } else {
            b'='
        });
    }
}

/// The value of a base64 alphabet byte.
#[inline]
fn b64_value(b: u8) -> Option<u8> {
    match b {
        b'A'..=b'Z' => Some(b - b'A'),
        b'a'..=b'z' => Some(b - b'a' + 26),
        b'0'..=b'9' => Some(b - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

/// `base64Decode`: v3 3.0.9 calls the `mbedtls_base64_decode` it bundles,
/// on the value **up to its first NUL byte**, and returns an empty string
/// when mbedtls rejects the input. So:
///
/// * the input must be strictly valid: only the base64 alphabet, at most
///   two `=` and only at the end; spaces only right before a line break or at
///   the very end; `\n` and `\r\n` anywhere; anything else (a lone `\r`, a
///   space inside a line, `-`, `_`, a byte >= 0x80, a third `=`) makes the
///   result **empty**;
/// * only complete groups of four are decoded: a trailing partial group is
///   dropped silently (`QUJDRA` -> `ABC`, `QUI` -> empty).
pub(super) fn base64_decode(input: &[u8], out: &mut Vec<u8>) {
    let src = match memchr::memchr(0, input) {
        Some(z) => &input[..z],
        None => input,
    };
    let n = src.len();
    // Pass 1: validate, as mbedtls does.
    let mut i = 0;
    let mut pads = 0u32;
    let mut count = 0usize;
    while i < n {
        let mut spaces = 0;
        while i < n && src[i] == b' ' {
            i += 1;
            spaces += 1;
        }
        if i == n {
            break;
        }
        if src[i] == b'\r' && src.get(i + 1) == Some(&b'\n') {
            i += 1;
            continue;
        }
        if src[i] == b'\n' {
            i += 1;
            continue;
        }
        if spaces != 0 {
            return;
        }
        let is_pad = src[i] == b'=';
        if is_pad {
            pads += 1;
            if pads > 2 {
                return;
            }
        }
        match b64_value(src[i]) {
            Some(_) if pads != 0 => return,
            None if !is_pad => return,
            _ => {}
        }
        count += 1;
        i += 1;
    }
    if count == 0 {
        return;
    }
    // Pass 2: decode complete groups of four.
    out.reserve(count / 4 * 3);
    let mut keep = 3u32;
    let mut group = 0;
    let mut x: u32 = 0;
    for &b in src {
        if b == b'\r' || b == b'\n' || b == b' ' {
            continue;
        }
        if b == b'=' {
            keep -= 1;
        }
        x = (x << 6) | u32::from(b64_value(b).unwrap_or(0));
        group += 1;
        if group == 4 {
            group = 0;
            if keep > 0 {
                out.push((x >> 16) as u8);
            }
            if keep > 1 {
                out.push((x >> 8) as u8);
            }
            if keep > 2 {
                out.push(x as u8);
            }
        }
    }
}

/// `base64DecodeExt`, v3's "forgiving" decoder (`decode_forgiven_engine`):
///
/// * bytes outside the base64 alphabet are skipped (whitespace, `-`, `.`,
///   NUL, bytes >= 0x80, ...), `=` too;
/// * a trailing partial sextet group is decoded as far as it goes
///   (`QUJDRA` -> `ABCD`);
/// * but the result is **empty** when an `=` that is not followed by another
///   `=` comes right after the first sextet of a group (`QUJDR=`), and, by
///   a quirk of v3 (it compares the last sextet's *value* with the code of
///   `=`, 61, which is the value of `9`), when the value ends with `9` or
///   `=` right after such a sextet (`QUJD9`).
pub(super) fn base64_decode_ext(input: &[u8], out: &mut Vec<u8>) {
    const PAD: i32 = b'=' as i32;
    out.reserve(input.len() / 4 * 3 + 2);
    let mut sextets = 0usize;
    let mut cur: u8 = 0;
    // v3's `ch`: the raw `=`, or the table value of the last byte (negative
    // for bytes outside the alphabet).
    let mut last: i32 = 0;
    for (idx, &b) in input.iter().enumerate() {
        if b == b'=' {
            last = PAD;
            let next = input.get(idx + 1).copied().unwrap_or(0);
            if next != b'=' && sextets % 4 == 1 {
                out.clear();
                return;
            }
            continue;
        }
        let Some(v) = b64_value(b) else {
            last = -1;
            continue;
        };
        last = i32::from(v);
        match sextets % 4 {
            0 => cur = v << 2,
            1 => {
                out.push(cur | (v >> 4));
                cur = (v & 0x0f) << 4;
            }
            2 => {
                out.push(cur | (v >> 2));
                cur = (v & 0x03) << 6;
            }
            _ => out.push(cur | v),
        }
        sextets += 1;
    }
    if last == PAD && sextets % 4 == 1 {
        out.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::check;
    use super::super::Transform as T;

    #[test]
    fn hex_encode() {
        check(
            T::HexEncode,
            &[
                (b"", b""),
                (b"A", b"41"),
                (b"abc", b"616263"),
                (b"\0\x01\x7f\x80\xff", b"00017f80ff"),
                (b"Hello World!", b"48656c6c6f20576f726c6421"),
            ],
        );
    }

    #[test]
    fn hex_decode() {
        check(
            T::HexDecode,
            &[
                (b"", b""),
                (b"4", b""),
                (b"41", b"A"),
                (b"414", b"A"),
                (b"414243", b"ABC"),
                (b"4a4A", b"JJ"),
                (b"00ff", b"\0\xff"),
                (b"0x41", b"!A"),
                // No validation: v3's x2c arithmetic on any byte.
                (b"zz", b"S"),
                (b"gg", b"\x10"),
                (b"\n\n", b"z"),
                (b"  ", b"\xf0"),
                (b"\xff\xff", b"("),
                (b"\0\0", b"\xd0"),
                (b"01234567890a0", b"\x01\x23\x45\x67\x89\x0a"),
            ],
        );
    }

    #[test]
    fn sql_hex_decode() {
        check(
            T::SqlHexDecode,
            &[
                (b"", b""),
                (b"0x414243", b"ABC"),
                (b"0X414243", b"ABC"),
                (b"0x4142z", b"ABz"),
                (b"x0x414243y", b"xABCy"),
                (b"a0x41", b"aA"),
                (b"0x41 0x42", b"A B"),
                (b"0x414", b"A4"),
                (b"0x41a", b"Aa"),
                (b"0x41ab", b"A\xab"),
                (b"0x410x42", b"A0x4"),
                (b"select 0x41", b"select A"),
                // The last byte is dropped unless it was decoded.
                (b"abc", b"ab"),
                (b"a", b""),
                (b"ab", b"a"),
                (b"0x", b"0"),
                (b"0x4", b"0x"),
                (b"0x4g", b"0x4"),
                (b"0xg41", b"0xg4"),
                (b"00x41", b"0A"),
                // The result ends at the first NUL.
                (b"a\0bc", b"a"),
                (b"0x0041", b""),
                (b"A0x00", b"A"),
            ],
        );
    }

    #[test]
    fn base64_encode() {
        check(
            T::Base64Encode,
            &[
                (b"", b""),
                (b"f", b"Zg=="),
                (b"fo", b"Zm8="),
                (b"foo", b"Zm9v"),
                (b"foob", b"Zm9vYg=="),
                (b"fooba", b"Zm9vYmE="),
                (b"foobar", b"Zm9vYmFy"),
                (b"\0\xff\xfe", b"AP/+"),
            ],
        );
    }

    #[test]
    fn base64_decode() {
        check(
            T::Base64Decode,
            &[
                (b"", b""),
                (b"Zm9vYmFy", b"foobar"),
                (b"Zm9vYg==", b"foob"),
                (b"Zm9vYmE=", b"fooba"),
                (b"AP/+", b"\0\xff\xfe"),
                (b"QUJD", b"ABC"),
                // Incomplete last group: dropped.
                (b"QUJDRA", b"ABC"),
                (b"QUJDRA=", b"ABC"),
                (b"QUI", b""),
                (b"QQ", b""),
                // Line breaks and spaces before them are accepted.
                (b"QUJD\nQUJD", b"ABCABC"),
                (b"QUJD\r\nQUJD", b"ABCABC"),
                (b"QUJD  \nQUJD", b"ABCABC"),
                (b"QUJD   ", b"ABC"),
                (b"\n\nQUJD", b"ABC"),
                // Everything else invalid: empty result.
                (b"QUJD QUJD", b""),
                (b" QUJD", b""),
                (b"QUJD\rQUJD", b""),
                (b"QUJD\tQUJD", b""),
                (b"QU-D", b""),
                (b"QU_D", b""),
                (b"QUJD\xff", b""),
                (b"QQ===", b""),
                (b"QQ=A", b""),
                (b"=QUJD", b""),
                (b"====", b""),
                (b"=", b""),
                (b"==", b""),
                (b"QUJD!", b""),
                // Cut at the first NUL.
                (b"QUJD\0!!!", b"ABC"),
                (b"\0QUJD", b""),
            ],
        );
    }

    /// CRS regression tests of rules that apply `base64Decode`.
    #[test]
    fn base64_decode_crs() {
        check(
            T::Base64Decode,
            &[
                // 934100-8 and 934100-9: `_$$ND_FUNC$$_` (Node.js
                // serialisation), base64-encoded.
                (b"XyQkTkRfRlVOQyQkXwo=", b"_$$ND_FUNC$$_\n"),
            ],
        );
    }

    #[test]
    fn base64_decode_ext() {
        check(
            T::Base64DecodeExt,
            &[
                (b"", b""),
                (b"Zm9vYmFy", b"foobar"),
                (b"Zm9vYg==", b"foob"),
                (b"Zm9vYg", b"foob"),
                (b"Zm9vYmE=", b"fooba"),
                (b"QUJDRA", b"ABCD"),
                (b"QUI", b"AB"),
                (b"Q", b""),
                (b"Q U\tJ\nD", b"ABC"),
                (b"QU-JD", b"ABC"),
                (b"Q.U.J.D", b"ABC"),
                (b"QUJD\xffRA", b"ABCD"),
                (b"QUJD\0RA", b"ABCD"),
                (b"QUJD=RA", b"ABCD"),
                (b"=QUJD", b"ABC"),
                (b"QQ==", b"A"),
                (b"QQ=", b"A"),
                (b"QQ=x", b"A\x0c"),
                // `=` right after the first sextet of a group: empty.
                (b"QUJDR=", b""),
                (b"QUJDR=x", b""),
                (b"Q=", b""),
                (b"QUJDR==", b""),
                // v3's `9` quirk.
                (b"QUJD9", b""),
                (b"9", b""),
                (b"QUJD9a", b"ABC\xf5"),
                (b"QUJ9", b"AB}"),
            ],
        );
    }
}
