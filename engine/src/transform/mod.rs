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

mod bytes;
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

pub(crate) use bytes::{is_c_space, is_hex, x2c};
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
/// `urlDecodeUni` runs as v3 does without `SecUnicodeMapFile` (transactions
/// use [`apply_with_map`] with the ruleset's map).
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

#[cfg(test)]
mod tests;
