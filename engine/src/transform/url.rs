//! URL-family transformations: `urlDecode`, `urlDecodeUni`, `urlEncode` and
//! `utf8toUnicode` (which produces `%uHHHH` escapes).

use super::bytes::{is_hex, low_byte_fullwidth, x2c};
use super::unicode_map::UnicodeMap;
use memchr::memchr2;

/// Neither URL decoder touches a value without `%` or `+`.
#[inline]
pub(super) fn decode_unchanged(input: &[u8]) -> bool {
    memchr2(b'%', b'+', input).is_none()
}

/// `urlDecode`: v3's `urldecode_nonstrict_inplace`.
///
/// * `+` becomes a space;
/// * `%HH` (two hex digits, either case) becomes the byte;
/// * any other `%` (invalid digits, or fewer than two bytes left) is kept as
///   is and decoding resumes at the next byte, so `%%41` gives `%A`.
///
/// Decoding is a single pass: `%2541` gives `%41`, not `A`.
///
/// Returns whether an invalid `%` escape was seen (the urlencoded body
/// processor reports it as `URLENCODED_ERROR`).
pub fn url_decode(input: &[u8], out: &mut Vec<u8>) -> bool {
    out.reserve(input.len());
    let mut invalid = false;
    let mut i = 0;
    while let Some(off) = memchr2(b'%', b'+', &input[i..]) {
        let p = i + off;
        out.extend_from_slice(&input[i..p]);
        if input[p] == b'+' {
            out.push(b' ');
            i = p + 1;
            continue;
        }
        match (input.get(p + 1), input.get(p + 2)) {
            (Some(&h), Some(&l)) if is_hex(h) && is_hex(l) => {
                out.push(x2c(h, l));
                i = p + 3;
            }
            _ => {
                out.push(b'%');
                invalid = true;
                i = p + 1;
            }
        }
    }
    out.extend_from_slice(&input[i..]);
    invalid
}

/// `urlDecodeUni`: `urlDecode` plus IIS's `%uHHHH`.
///
/// * `%u`/`%U` followed by four hex digits becomes **one byte**: with a
///   `SecUnicodeMapFile` map that has an entry for the code point, that
///   entry; otherwise the low byte (last two digits), with full-width ASCII
///   `%uFF01`-`%uFF5E` mapped to `0x21`-`0x7E` (see
///   [`low_byte_fullwidth`]). So `%u0041` and `%uFF21` give `A`, `%u2215`
///   gives `0x15`.
/// * `%u` without four hex digits after it is copied as the two bytes `%u`
///   and decoding resumes after them (so `%u%41` gives `%uA`).
/// * `%HH`, invalid `%` and `+` as in [`url_decode`].
pub(super) fn url_decode_uni(input: &[u8], out: &mut Vec<u8>, map: Option<&UnicodeMap>) {
    out.reserve(input.len());
    let n = input.len();
    let mut i = 0;
    while let Some(off) = memchr2(b'%', b'+', &input[i..]) {
        let p = i + off;
        out.extend_from_slice(&input[i..p]);
        if input[p] == b'+' {
            out.push(b' ');
            i = p + 1;
            continue;
        }
        let next = input.get(p + 1).copied();
        if matches!(next, Some(b'u' | b'U')) {
            if let Some(&[h0, h1, h2, h3]) = input.get(p + 2..p + 6) {
                if is_hex(h0) && is_hex(h1) && is_hex(h2) && is_hex(h3) {
                    let mapped = map.and_then(|m| {
                        let code = (u16::from(x2c(h0, h1)) << 8) | u16::from(x2c(h2, h3));
                        m.get(code)
                    });
                    out.push(mapped.unwrap_or_else(|| low_byte_fullwidth(h0, h1, h2, h3)));
                    i = p + 6;
                    continue;
                }
            }
            // Invalid or truncated `%u`: keep both bytes.
            out.extend_from_slice(&input[p..p + 2]);
            i = p + 2;
            continue;
        }
        if p + 2 < n {
            let (h, l) = (input[p + 1], input[p + 2]);
            if is_hex(h) && is_hex(l) {
                out.push(x2c(h, l));
                i = p + 3;
                continue;
            }
        }
        out.push(b'%');
        i = p + 1;
    }
    out.extend_from_slice(&input[i..]);
}

/// Bytes `urlEncode` leaves alone: ASCII letters, digits and `*`.
#[inline]
fn url_safe(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'*'
}

#[inline]
pub(super) fn encode_unchanged(input: &[u8]) -> bool {
    input.iter().all(|&b| url_safe(b))
}

/// `urlEncode`: letters, digits and `*` are kept, space becomes `+`, every
/// other byte becomes `%hh` with **lower-case** hex digits (v3's `c2x`).
/// Note that `-`, `.`, `_` and `~` are encoded too.
pub(super) fn url_encode(input: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(input.len() + input.len() / 2);
    for &b in input {
        if url_safe(b) {
            out.push(b);
        } else if b == b' ' {
            out.push(b'+');
        } else {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        }
    }
}

/// `utf8toUnicode` changes only bytes >= 0x80 and NUL bytes.
#[inline]
pub(super) fn utf8_unchanged(input: &[u8]) -> bool {
    input.is_ascii() && memchr::memchr(0, input).is_none()
}

#[inline]
fn is_cont(b: u8) -> bool {
    b & 0xc0 == 0x80
}

/// Appends `%u` and the code point in lower-case hex, zero-padded to four
/// digits (C's `%x` plus v3's padding; five or six digits above U+FFFF).
fn push_code_point(out: &mut Vec<u8>, d: u32) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.extend_from_slice(b"%u");
    let digits = if d > 0xfffff {
        6
    } else if d > 0xffff {
        5
    } else {
        4
    };
    for k in (0..digits).rev() {
        out.push(HEX[((d >> (4 * k)) & 0xf) as usize]);
    }
}

/// `utf8toUnicode`, as 3.0.9's `Utf8ToUnicode::inplace` behaves:
///
/// * ASCII bytes other than NUL are copied;
/// * **NUL bytes are dropped** (v3 writes a byte for them without advancing
///   its output pointer, and the result is cut at the first NUL);
/// * a well-formed 2-, 3- or 4-byte sequence becomes `%u` + the code point in
///   lower-case hex, at least four digits (`é` -> `%u00e9`, U+1F600 ->
///   `%u1f600`); overlong forms and UTF-16 surrogates are converted too, and
///   then followed by a copy of their lead byte (`C0 80` -> `%u0000` `C0`);
///   lead bytes `F5`-`F7` are copied *before* their conversion;
/// * a lead byte `C0`-`F7` whose continuation bytes are missing or wrong is
///   **dropped**, and decoding resumes at the next byte (v3 compares against
///   the total length instead of the bytes left, then reads the NUL
///   terminator, which fails the continuation test);
/// * continuation bytes `80`-`BF` on their own and `F8`-`FF` are copied.
pub(super) fn utf8_to_unicode(input: &[u8], out: &mut Vec<u8>) {
    out.reserve(input.len() + input.len() / 2);
    let at = |k: usize| input.get(k).copied().unwrap_or(0);
    let mut i = 0;
    while i < input.len() {
        let c = input[i];
        let mut d: u32 = 0;
        let mut seq = 0usize;
        if c & 0x80 == 0 {
            if c != 0 {
                out.push(c);
            }
        } else if c & 0xe0 == 0xc0 {
            let b1 = at(i + 1);
            if is_cont(b1) {
                seq = 2;
                d = (u32::from(c & 0x1f) << 6) | u32::from(b1 & 0x3f);
                push_code_point(out, d);
            }
        } else if c & 0xf0 == 0xe0 {
            let (b1, b2) = (at(i + 1), at(i + 2));
            if is_cont(b1) && is_cont(b2) {
                seq = 3;
                d = (u32::from(c & 0x0f) << 12)
                    | (u32::from(b1 & 0x3f) << 6)
                    | u32::from(b2 & 0x3f);
                push_code_point(out, d);
            }
        } else if c & 0xf8 == 0xf0 {
            if c >= 0xf5 {
                out.push(c);
            }
            let (b1, b2, b3) = (at(i + 1), at(i + 2), at(i + 3));
            if is_cont(b1) && is_cont(b2) && is_cont(b3) {
                seq = 4;
                d = (u32::from(c & 0x07) << 18)
                    | (u32::from(b1 & 0x3f) << 12)
                    | (u32::from(b2 & 0x3f) << 6)
                    | u32::from(b3 & 0x3f);
                push_code_point(out, d);
            }
        } else {
            out.push(c);
        }
        if (0xd800..=0xdfff).contains(&d) {
            out.push(c);
        }
        let overlong = match seq {
            2 => d < 0x80,
            3 => d < 0x800,
            4 => d < 0x1_0000,
            _ => false,
        };
        if overlong {
            out.push(c);
        }
        i += seq.max(1);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{check, check_with_map};
    use super::super::{Transform as T, UnicodeMap};

    #[test]
    fn url_decode() {
        check(
            T::UrlDecode,
            &[
                (b"", b""),
                (b"abc", b"abc"),
                (b"a+b", b"a b"),
                (b"+++", b"   "),
                (b"%41%42%43", b"ABC"),
                (b"%41BC", b"ABC"),
                (b"%4a%4A", b"JJ"),
                (b"%00", b"\0"),
                (b"a%00b", b"a\0b"),
                (b"%ff%FE", b"\xff\xfe"),
                (b"%2b", b"+"),
                (b"%2541", b"%41"),
                (b"%%41", b"%A"),
                (b"%", b"%"),
                (b"%4", b"%4"),
                (b"a%", b"a%"),
                (b"a%4", b"a%4"),
                (b"%4g", b"%4g"),
                (b"%g4", b"%g4"),
                (b"%zz%41", b"%zzA"),
                (b"%u0041", b"%u0041"),
                (b"100%", b"100%"),
                (b"100% sure", b"100% sure"),
                (b"\xff%41\x00", b"\xffA\x00"),
                (b"%0d%0a", b"\r\n"),
                (b"%%%", b"%%%"),
                (b"%2B+%20", b"+  "),
            ],
        );
    }

    #[test]
    fn url_decode_uni() {
        check(
            T::UrlDecodeUni,
            &[
                (b"", b""),
                (b"abc", b"abc"),
                (b"a+b", b"a b"),
                (b"%41", b"A"),
                (b"%u0041", b"A"),
                (b"%U0041", b"A"),
                (b"%u0041%u0042", b"AB"),
                (b"%u00e9", b"\xe9"),
                (b"%u2215", b"\x15"),
                (b"%u1234", b"\x34"),
                (b"%uabcd", b"\xcd"),
                // Full-width ASCII.
                (b"%uff01", b"!"),
                (b"%uFF21", b"A"),
                (b"%uFf41", b"a"),
                (b"%ufF5e", b"~"),
                (b"%uff5f", b"\x5f"),
                (b"%uff60", b"\x60"),
                (b"%uff00", b"\0"),
                (b"%uffff", b"\xff"),
                (b"%ufe21", b"\x21"),
                (b"%uef21", b"\x21"),
                // Invalid and truncated %u: both bytes kept.
                (b"%u", b"%u"),
                (b"%u0", b"%u0"),
                (b"%u004", b"%u004"),
                (b"%u004g", b"%u004g"),
                (b"%ug041", b"%ug041"),
                (b"%u%41", b"%uA"),
                (b"%u%u0041", b"%uA"),
                (b"%uu0041", b"%uu0041"),
                (b"x%u00", b"x%u00"),
                // Plain %HH.
                (b"%", b"%"),
                (b"%4", b"%4"),
                (b"%4G", b"%4G"),
                (b"%%41", b"%A"),
                (b"%2541", b"%41"),
                (b"%25u0041", b"%u0041"),
                (b"%00%ff", b"\0\xff"),
                (b"a\0%41\xff", b"a\0A\xff"),
            ],
        );
    }

    /// Derived from the v3 source (`url_decode_uni.cc`, `ConfigUnicodeMap`),
    /// not from running v3: the reference harness has no map loaded.
    #[test]
    fn url_decode_uni_with_map() {
        // v3 presets these four entries whenever a map file is loaded.
        let map = UnicodeMap::parse(b"20127 00e9:65", 20127.0).expect("positive code page");
        check_with_map(
            T::UrlDecodeUni,
            &map,
            &[
                (b"%u3002", b"."),
                (b"%uff61", b"."),
                (b"%uff0e", b"."),
                (b"%u002e", b"."),
                (b"%u00e9", b"e"),
                (b"%u00E9", b"e"),
                // Unmapped code points fall back to the low byte.
                (b"%u00e8", b"\xe8"),
                (b"%uff21", b"A"),
                (b"%41", b"A"),
            ],
        );
    }

    #[test]
    fn url_encode() {
        check(
            T::UrlEncode,
            &[
                (b"", b""),
                (b"abcXYZ019*", b"abcXYZ019*"),
                (b"a b", b"a+b"),
                (b"-._~", b"%2d%2e%5f%7e"),
                (b"\0\xff", b"%00%ff"),
                (b"%+", b"%25%2b"),
                (b"/?a=1&b=2", b"%2f%3fa%3d1%26b%3d2"),
                (b"\xc3\xa9", b"%c3%a9"),
            ],
        );
    }

    #[test]
    fn utf8_to_unicode() {
        check(
            T::Utf8ToUnicode,
            &[
                (b"", b""),
                (b"abc", b"abc"),
                (b"\xc3\xa9", b"%u00e9"),
                (b"caf\xc3\xa9!", b"caf%u00e9!"),
                (b"\xe2\x82\xac", b"%u20ac"),
                (b"\xef\xbc\xa1", b"%uff21"),
                (b"\xf0\x9f\x98\x80", b"%u1f600"),
                (b"\xf4\x8f\xbf\xbf", b"%u10ffff"),
                (b"\xdf\xbf", b"%u07ff"),
                (b"\xc2\x80", b"%u0080"),
                // NUL bytes are dropped.
                (b"\0", b""),
                (b"a\0b", b"ab"),
                (b"\0\0\xc3\xa9\0", b"%u00e9"),
                // Overlong forms: converted, then the lead byte is copied.
                (b"\xc0\xaf", b"%u002f\xc0"),
                (b"\xc1\xbf", b"%u007f\xc1"),
                (b"\xc0\x80", b"%u0000\xc0"),
                (b"\xe0\x80\xaf", b"%u002f\xe0"),
                (b"\xf0\x80\x80\xaf", b"%u002f\xf0"),
                (b"\xf0\x8f\xbf\xbf", b"%uffff\xf0"),
                // Surrogates: converted, then the lead byte is copied.
                (b"\xed\xa0\x80", b"%ud800\xed"),
                (b"\xed\xbf\xbf", b"%udfff\xed"),
                // Lead bytes F5..F7: copied before the conversion.
                (b"\xf5\x80\x80\x80", b"\xf5%u140000"),
                (b"\xf7\xbf\xbf\xbf", b"\xf7%u1fffff"),
                (b"\xf5", b"\xf5"),
                // Truncated or broken sequences: the lead byte is dropped.
                (b"\xc3", b""),
                (b"a\xc3", b"a"),
                (b"\xc3a", b"a"),
                (b"\xe2\x82", b"\x82"),
                (b"\xe2\x82a", b"\x82a"),
                (b"\xf0\x9f\x98", b"\x9f\x98"),
                (b"\xf0\x9f\x98a", b"\x9f\x98a"),
                (b"\xc3\xc3\xa9", b"%u00e9"),
                // Stray continuation bytes and F8..FF are copied.
                (b"\x80", b"\x80"),
                (b"\xbf\xa9", b"\xbf\xa9"),
                (b"\xf8\x80\x80\x80\x80", b"\xf8\x80\x80\x80\x80"),
                (b"\xff\xfe", b"\xff\xfe"),
                (b"\xc3\xa9\0", b"%u00e9"),
            ],
        );
    }
}
