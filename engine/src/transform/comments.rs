//! Comment handling for SQL, C, HTML and shell-like payloads:
//! `removeComments`, `replaceComments`, `removeCommentsChar`.

use super::bytes::has_pair;
use memchr::{memchr, memchr3, memmem};

/// `removeComments` needs a `/*`, `<!--`, `--` or `#` to do anything.
#[inline]
pub(super) fn remove_unchanged(input: &[u8]) -> bool {
    memchr(b'#', input).is_none() && !has_pair(input, b'/', b'*') && !has_pair(input, b'-', b'-')
}

/// `removeComments` (v3):
///
/// * `/* ... */` and `<!-- ... -->` are removed; an unterminated one is
///   replaced by **one space** at the end;
/// * `--` and `#` outside a comment **end the value** (everything from them
///   on is dropped, nothing is added);
/// * quirk: the byte right after a closing `*/` or `-->` is copied without
///   being examined, so `/*a*/#b` keeps `#b`, and a comment closed at the
///   very end of the value leaves a **NUL byte** (v3 copies its string's
///   terminator): `a/*b*/` -> `a\0`;
/// * inside a comment, `*/` and `-->` both close it, whichever opened it.
pub(super) fn remove(input: &[u8], out: &mut Vec<u8>) {
    let n = input.len();
    let at = |k: usize| input.get(k).copied().unwrap_or(0);
    out.reserve(n);
    let mut i = 0;
    let mut in_comment = false;
    while i < n {
        if !in_comment {
            let c = input[i];
            if c == b'/' && at(i + 1) == b'*' && i + 1 < n {
                in_comment = true;
                i += 2;
            } else if c == b'<' && input.get(i + 1..i + 4) == Some(&b"!--"[..]) {
                in_comment = true;
                i += 4;
            } else if (c == b'-' && i + 1 < n && input[i + 1] == b'-') || c == b'#' {
                break;
            } else {
                out.push(c);
                i += 1;
            }
        } else if input[i] == b'*' && i + 1 < n && input[i + 1] == b'/' {
            in_comment = false;
            out.push(at(i + 2));
            i += 3;
        } else if input[i] == b'-' && input.get(i + 1..i + 3) == Some(&b"->"[..]) {
            in_comment = false;
            out.push(at(i + 3));
            i += 4;
        } else {
            i += 1;
        }
    }
    if in_comment {
        out.push(b' ');
    }
}

/// `replaceComments` needs a `/*`.
#[inline]
pub(super) fn replace_unchanged(input: &[u8]) -> bool {
    !has_pair(input, b'/', b'*')
}

/// `replaceComments`: each `/* ... */` becomes one space; an unterminated
/// `/*` and everything after it become one space. `--`, `#` and HTML
/// comments are left alone, and so is a `*/` without an opening `/*`.
pub(super) fn replace(input: &[u8], out: &mut Vec<u8>) {
    out.reserve(input.len());
    let mut rest = input;
    while let Some(open) = memmem::find(rest, b"/*") {
        out.extend_from_slice(&rest[..open]);
        out.push(b' ');
        match memmem::find(&rest[open + 2..], b"*/") {
            Some(close) => rest = &rest[open + 2 + close + 2..],
            None => return,
        }
    }
    out.extend_from_slice(rest);
}

/// `removeCommentsChar` needs one of `/ * < -` next to its partner, or `#`;
/// looking for the first bytes is enough for a cheap test.
#[inline]
pub(super) fn remove_char_unchanged(input: &[u8]) -> bool {
    memchr3(b'*', b'-', b'#', input).is_none()
}

/// `removeCommentsChar`: deletes the comment *markers* `/*`, `*/`, `<!--`,
/// `-->`, `--` and `#`, keeping what is between them (`a/*b*/c` -> `abc`).
/// Markers are matched left to right without overlap (`/*/` -> `/`).
pub(super) fn remove_char(input: &[u8], out: &mut Vec<u8>) {
    out.reserve(input.len());
    let mut i = 0;
    while i < input.len() {
        let rest = &input[i..];
        let skip = if rest.starts_with(b"/*") || rest.starts_with(b"*/") {
            2
        } else if rest.starts_with(b"<!--") {
            4
        } else if rest.starts_with(b"-->") {
            3
        } else if rest.starts_with(b"--") {
            2
        } else if rest[0] == b'#' {
            1
        } else {
            out.push(rest[0]);
            1
        };
        i += skip;
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::check;
    use super::super::Transform as T;

    #[test]
    fn remove_comments() {
        check(
            T::RemoveComments,
            &[
                (b"", b""),
                (b"abc", b"abc"),
                (b"a/*b*/c", b"ac"),
                (b"a/*b*/cd", b"acd"),
                (b"a/**/b", b"ab"),
                (b"a<!--b-->c", b"ac"),
                (b"a<!--b*/c", b"ac"),
                (b"a/*b-->c", b"ac"),
                // Closed at the very end: v3 copies the NUL terminator.
                (b"a/*b*/", b"a\0"),
                (b"a<!--b-->", b"a\0"),
                // The byte after the close is copied unexamined.
                (b"a/*b*/#c", b"a#c"),
                (b"a/*b*//*c*/d", b"a/*c*/d"),
                (b"/*a*//*b*/", b"/*b*/"),
                // Unterminated: one space.
                (b"a/*b", b"a "),
                (b"a/*", b"a "),
                (b"a<!--b", b"a "),
                (b"a/*b*", b"a "),
                // `--` and `#` end the value.
                (b"a--b", b"a"),
                (b"a#b", b"a"),
                (b"#", b""),
                (b"a-b", b"a-b"),
                (b"a-", b"a-"),
                (b"a/b*c", b"a/b*c"),
                (b"a/", b"a/"),
                (b"a<!-b", b"a<!-b"),
                (b"a<!-", b"a<!-"),
                (b"1 OR 1=1-- -", b"1 OR 1=1"),
                (b"a/*b-->", b"a\0"),
                (b"a/*b--", b"a "),
            ],
        );
    }

    #[test]
    fn replace_comments() {
        check(
            T::ReplaceComments,
            &[
                (b"", b""),
                (b"abc", b"abc"),
                (b"a/*b*/c", b"a c"),
                (b"a/**/b", b"a b"),
                (b"a/*b*/c/*d*/e", b"a c e"),
                (b"a/*b", b"a "),
                (b"/*", b" "),
                (b"a/*b*/", b"a "),
                (b"a/*/b", b"a "),
                (b"a/*/b*/", b"a "),
                (b"a*/b", b"a*/b"),
                (b"a--b#c<!--d-->", b"a--b#c<!--d-->"),
                (b"/*a/*b*/c*/", b" c*/"),
                (b"a/b*c", b"a/b*c"),
            ],
        );
    }

    /// CRS regression tests of rules that apply `replaceComments`.
    #[test]
    fn replace_comments_crs() {
        check(
            T::ReplaceComments,
            &[
                // 942160-4.
                (
                    b"BENChmARk(2999/**/999,Md5(NoW()",
                    b"BENChmARk(2999 999,Md5(NoW()",
                ),
                // 933210-8.
                (
                    b"define('x', 'sys' . 'tem');(x)/* comment */('uname');",
                    b"define('x', 'sys' . 'tem');(x) ('uname');",
                ),
                // 933210-12.
                (
                    b"(/* comment */system)(ls/* comment */);",
                    b"( system)(ls );",
                ),
            ],
        );
    }

    #[test]
    fn remove_comments_char() {
        check(
            T::RemoveCommentsChar,
            &[
                (b"", b""),
                (b"abc", b"abc"),
                (b"a/*b*/c", b"abc"),
                (b"a<!--b-->c", b"abc"),
                (b"a--b", b"ab"),
                (b"a#b#", b"ab"),
                (b"a---b", b"a-b"),
                (b"a--->b", b"a->b"),
                (b"a-->b", b"ab"),
                (b"/*/", b"/"),
                (b"*/*", b"*"),
                (b"a/b*c-d<!e", b"a/b*c-d<!e"),
                (b"<!-", b"<!-"),
                (b"\0#\0", b"\0\0"),
                (b"1/**/union/**/select", b"1unionselect"),
            ],
        );
    }
}
