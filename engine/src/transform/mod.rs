//! Every ModSecurity v3 transformation (`t:...`), byte for byte.
//!
//! # Which v3
//!
//! The reference is **libmodsecurity 3.0.9 as Debian 12 ships it**
//! (`3.0.9-1+deb12u2`, which adds the upstream fixes for CVE-2023-38285 and
//! CVE-2026-30923 to `removeNulls`, `replaceNulls`, `removeWhitespace`,
//! `removeCommentsChar` and `hexDecode`). It is the v3 that the project's peer
//! harness (`shared/peers/modsec`) runs, so it is the one we can check
//! against. The expected values of the unit tests were obtained by running
//! that library's transformation code on the same inputs, except where a
//! test's comment says that it was derived from reading the source.
//!
//! Later upstream releases (3.0.13 and up) rewrote several transformations.
//! Where we know that this changed results, the function's documentation
//! says so (`htmlEntityDecode`, `sqlHexDecode`, `cssDecode`). We follow 3.0.9
//! everywhere, quirks included: the project compares its verdicts with that
//! library, and a decoder "fixed" on our side alone would be an evasion or a
//! false positive away from it. Moving to a newer reference means changing
//! those functions and their tests together.
//!
//! # Contract
//!
//! [`apply`] writes into a caller-owned buffer that is reused across calls and
//! reports whether the value changed, so that an unchanged value (the common
//! case: most values have nothing to decode) costs one scan and no copy. Each
//! transformation is written as two functions: a cheap test that proves the
//! input is left unchanged (for instance "no `%` and no `+`" for
//! `urlDecode`), and the full algorithm. When the cheap test cannot decide,
//! the full algorithm runs and its output is compared with the input.
//!
//! C-isms of v3 that matter here: "whitespace" is the C locale's `isspace`
//! (`\t \n \v \f \r` and space, never NBSP unless a transformation adds it),
//! letters are ASCII letters, and several transformations read the NUL
//! terminator that follows the value in v3's buffers (we read a `0` past the
//! end in those places, and say so).

mod case;
mod cmdline;
mod comments;
mod encoding;
mod escape;
mod hash;
mod path;
mod unicode_map;
mod url;
mod whitespace;

pub use unicode_map::UnicodeMap;
/// v3's `urldecode_nonstrict_inplace`, shared with the urlencoded body processor.
pub use url::url_decode;
pub use waf_compiler::names::Transform;

/// Applies `t` to `input`.
///
/// Returns `true` and writes the result into `out` (which the function clears
/// first) when the result differs from `input`; returns `false` when the
/// result equals `input`, in which case `out` is left empty and the caller
/// reuses `input`. No allocation happens except growing `out`.
///
/// `urlDecodeUni` runs as v3 does without `SecUnicodeMapFile` (the engine
/// does not load unicode maps yet).
#[inline]
pub fn apply(t: Transform, input: &[u8], out: &mut Vec<u8>) -> bool {
    apply_with_map(t, input, out, None)
}

/// [`apply`], with the unicode map of `SecUnicodeMapFile` (only
/// `urlDecodeUni` uses it: v3 consults the map for `%uHHHH` before falling
/// back to the low byte).
pub fn apply_with_map(
    t: Transform,
    input: &[u8],
    out: &mut Vec<u8>,
    map: Option<&UnicodeMap>,
) -> bool {
    out.clear();
    if unchanged(t, input) {
        return false;
    }
    full(t, input, out, map);
    if out.as_slice() == input {
        out.clear();
        false
    } else {
        true
    }
}

/// The cheap test: `true` only when `t` certainly leaves `input` unchanged.
/// `false` means "run the full algorithm and compare".
#[inline]
fn unchanged(t: Transform, input: &[u8]) -> bool {
    use Transform as T;
    match t {
        T::None => true,
        T::Base64Decode | T::Base64DecodeExt | T::Base64Encode => input.is_empty(),
        T::CmdLine => cmdline::unchanged(input),
        T::CompressWhitespace => whitespace::compress_unchanged(input),
        T::CssDecode => escape::css_unchanged(input),
        T::EscapeSeqDecode => escape::escape_seq_unchanged(input),
        T::HexDecode | T::HexEncode | T::SqlHexDecode => input.is_empty(),
        T::HtmlEntityDecode => escape::html_unchanged(input),
        T::JsDecode => escape::js_unchanged(input),
        T::Length | T::Md5 | T::Sha1 => false,
        T::Lowercase => case::lowercase_unchanged(input),
        T::NormalisePath => path::unchanged(input, false),
        T::NormalisePathWin => path::unchanged(input, true),
        T::ParityEven7bit | T::ParityOdd7bit => input.is_empty(),
        T::ParityZero7bit => input.is_ascii(),
        T::RemoveComments => comments::remove_unchanged(input),
        T::RemoveCommentsChar => comments::remove_char_unchanged(input),
        T::RemoveNulls | T::ReplaceNulls => whitespace::nulls_unchanged(input),
        T::RemoveWhitespace => whitespace::remove_unchanged(input),
        T::ReplaceComments => comments::replace_unchanged(input),
        T::Trim => whitespace::trim_unchanged(input, true, true),
        T::TrimLeft => whitespace::trim_unchanged(input, true, false),
        T::TrimRight => whitespace::trim_unchanged(input, false, true),
        T::Uppercase => case::uppercase_unchanged(input),
        T::UrlDecode => url::decode_unchanged(input),
        T::UrlDecodeUni => url::decode_unchanged(input),
        T::UrlEncode => url::encode_unchanged(input),
        T::Utf8ToUnicode => url::utf8_unchanged(input),
    }
}

/// The full algorithm: always writes the complete result into `out` (empty on
/// entry).
fn full(t: Transform, input: &[u8], out: &mut Vec<u8>, map: Option<&UnicodeMap>) {
    use Transform as T;
    match t {
        T::None => out.extend_from_slice(input),
        T::Base64Decode => encoding::base64_decode(input, out),
        T::Base64DecodeExt => encoding::base64_decode_ext(input, out),
        T::Base64Encode => encoding::base64_encode(input, out),
        T::CmdLine => cmdline::cmd_line(input, out),
        T::CompressWhitespace => whitespace::compress(input, out),
        T::CssDecode => escape::css_decode(input, out),
        T::EscapeSeqDecode => escape::escape_seq_decode(input, out),
        T::HexDecode => encoding::hex_decode(input, out),
        T::HexEncode => encoding::hex_encode(input, out),
        T::HtmlEntityDecode => escape::html_entity_decode(input, out),
        T::JsDecode => escape::js_decode(input, out),
        T::Length => hash::length(input, out),
        T::Lowercase => case::lowercase(input, out),
        T::Md5 => hash::md5(input, out),
        T::NormalisePath => path::normalise(input, out, false),
        T::NormalisePathWin => path::normalise(input, out, true),
        T::ParityEven7bit => case::parity_even(input, out),
        T::ParityOdd7bit => case::parity_odd(input, out),
        T::ParityZero7bit => case::parity_zero(input, out),
        T::RemoveComments => comments::remove(input, out),
        T::RemoveCommentsChar => comments::remove_char(input, out),
        T::RemoveNulls => whitespace::remove_nulls(input, out),
        T::RemoveWhitespace => whitespace::remove(input, out),
        T::ReplaceComments => comments::replace(input, out),
        T::ReplaceNulls => whitespace::replace_nulls(input, out),
        T::Sha1 => hash::sha1(input, out),
        T::SqlHexDecode => encoding::sql_hex_decode(input, out),
        T::Trim => whitespace::trim(input, out, true, true),
        T::TrimLeft => whitespace::trim(input, out, true, false),
        T::TrimRight => whitespace::trim(input, out, false, true),
        T::Uppercase => case::uppercase(input, out),
        T::UrlDecode => {
            url::url_decode(input, out);
        }
        T::UrlDecodeUni => url::url_decode_uni(input, out, map),
        T::UrlEncode => url::url_encode(input, out),
        T::Utf8ToUnicode => url::utf8_to_unicode(input, out),
    }
}

// ---------------------------------------------------------------------------
// Helpers shared by the decoders: v3's `src/utils/string.{h,cc}` semantics.
// ---------------------------------------------------------------------------

/// Whether `a` is immediately followed by `b` somewhere in `input`. Cheaper
/// than a substring search for the short values transformations see.
#[inline]
fn has_pair(input: &[u8], a: u8, b: u8) -> bool {
    memchr::memchr_iter(a, input).any(|p| input.get(p + 1) == Some(&b))
}

/// v3's `VALID_HEX` / C `isxdigit` in the C locale.
#[inline]
pub(crate) fn is_hex(b: u8) -> bool {
    b.is_ascii_hexdigit()
}

/// v3's `ISODIGIT`.
#[inline]
fn is_octal(b: u8) -> bool {
    (b'0'..=b'7').contains(&b)
}

/// C `isspace` in the C locale: `\t \n \v \f \r` and space.
#[inline]
fn is_c_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ')
}

/// v3's `xsingle2c`: the value of one hex digit. It does not validate: v3
/// calls it on any byte in places (`hexDecode`), and the arithmetic wraps in
/// an `unsigned char`, which is reproduced here.
#[inline]
fn xsingle(b: u8) -> u8 {
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
fn low_byte_fullwidth(h0: u8, h1: u8, h2: u8, h3: u8) -> u8 {
    let b = x2c(h2, h3);
    if b > 0 && b < 0x5f && (h0 | 0x20) == b'f' && (h1 | 0x20) == b'f' {
        b + 0x20
    } else {
        b
    }
}

#[cfg(test)]
mod tests;
