//! Byte-level helpers shared by the decoders, with v3's
//! `src/utils/string.{h,cc}` semantics.
//!
//! A leaf: it imports nothing from the transformations, so that every
//! decoder (and the unicode-map parser) can use it without a module depending
//! back on the one that declares it.

/// Whether `a` is immediately followed by `b` somewhere in `input`. Cheaper
/// than a substring search for the short values transformations see.
#[inline]
pub(super) fn has_pair(input: &[u8], a: u8, b: u8) -> bool {
    memchr::memchr_iter(a, input).any(|p| input.get(p + 1) == Some(&b))
}

/// v3's `VALID_HEX` / C `isxdigit` in the C locale.
#[inline]
pub(crate) fn is_hex(b: u8) -> bool {
    b.is_ascii_hexdigit()
}

/// v3's `ISODIGIT`.
#[inline]
pub(super) fn is_octal(b: u8) -> bool {
    (b'0'..=b'7').contains(&b)
}

/// C `isspace` in the C locale: `\t \n \v \f \r` and space.
#[inline]
pub(crate) fn is_c_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ')
}

/// v3's `xsingle2c`: the value of one hex digit. It does not validate: v3
/// calls it on any byte in places (`hexDecode`), and the arithmetic wraps in
/// an `unsigned char`, which is reproduced here.
#[inline]
pub(super) fn xsingle(b: u8) -> u8 {
    if b >= b'A' {
        (b & 0xdf).wrapping_sub(b'A').wrapping_add(10)
    } else {
        b.wrapping_sub(b'0')
    }
}

/// v3's `x2c`: two hex digits to a byte, with the same unchecked, wrapping
/// arithmetic as [`xsingle`].
#[inline]
pub(crate) fn x2c(hi: u8, lo: u8) -> u8 {
    xsingle(hi).wrapping_mul(16).wrapping_add(xsingle(lo))
}

/// The low byte of a 16-bit escape (`%uHHHH`, `\uHHHH`, CSS `\HHHH`) as v3
/// computes it without a unicode map: the last two hex digits, plus `0x20`
/// when the first two digits are `ff`/`FF` (any case mix) and the low byte is
/// `0x01..=0x5e`, which maps full-width ASCII `U+FF01..U+FF5E` to
/// `0x21..=0x7e`. Everything else, `U+FF00` and `U+FF5F..` included, keeps
/// the bare low byte.
#[inline]
pub(super) fn low_byte_fullwidth(h0: u8, h1: u8, h2: u8, h3: u8) -> u8 {
    let b = x2c(h2, h3);
    if b > 0 && b < 0x5f && (h0 | 0x20) == b'f' && (h1 | 0x20) == b'f' {
        b + 0x20
    } else {
        b
    }
}
