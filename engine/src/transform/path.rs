//! `normalisePath` and `normalisePathWin`.

use super::bytes::has_pair;
use memchr::memchr;

/// The algorithm below only acts at the end of a segment that is empty
/// (`//`) or ends in `.` (`./`, or a final `.`), and the Windows variant also
/// on `\`. Without any of those the path is returned as it is: the
/// relative/absolute and trailing-slash handling only ever undo what the
/// segment rules did.
#[inline]
pub(super) fn unchanged(input: &[u8], win: bool) -> bool {
    input.last() != Some(&b'.')
        && (!win || memchr(b'\\', input).is_none())
        && !has_pair(input, b'.', b'/')
        && !has_pair(input, b'/', b'/')
}

/// `normalisePath` (`win == false`) and `normalisePathWin` (`win == true`),
/// as v3's `normalize_path_inplace`, which works segment by segment on the
/// value:
///
/// * `normalisePathWin` first turns every `\` into `/`;
/// * runs of `/` collapse to one (`a//b` -> `a/b`);
/// * `./` self-references are removed, a final `/.` too (`/a/./b/.` ->
///   `/a/b`), and a lone `.` becomes empty;
/// * `x/../` removes the previous segment; `..` cannot go above the root of
///   an absolute path (`/../a` -> `/a`); in a relative path a leading `..`
///   that has nothing to remove is kept (`../../a` stays), and so are the
///   `..` that follow it until a regular segment;
/// * quirk: a segment that *ends* in `..` counts as a back-reference
///   (`/a/b../c` -> `/a/c`, `/.../a` -> `/a`), and a value that ends in `..`
///   loses its last segment even without a slash before the dots (`ab..` ->
///   empty, `/a/b..` -> `/a`);
/// * a trailing `/` is kept only if the input had one, and is removed from
///   the result otherwise (`/a/..` -> empty, `/a/../` -> `/`);
/// * quirk of the Windows variant: `\` is converted one byte ahead of the
///   scan, so in a run of three or more backslashes one survives
///   (`a\\\b` -> `a\b`);
/// * a relative path never gains a leading `/`, and an absolute one keeps
///   it.
pub(super) fn normalise(input: &[u8], out: &mut Vec<u8>, win: bool) {
    if input.is_empty() {
        return;
    }
    // v3 works in place; `buf` is our copy of the input, `dst <= src`.
    out.extend_from_slice(input);
    let buf = out;
    let is_sep = |b: u8| b == b'/' || (win && b == b'\\');
    let end = buf.len() - 1;
    let relative = !is_sep(buf[0]);
    let trailing = is_sep(buf[end]);
    let mut src = 0usize;
    let mut dst = 0usize;
    let mut hitroot = false;
    let mut done = false;

    while !done && src <= end && dst <= end {
        if win {
            if buf[src] == b'\\' {
                buf[src] = b'/';
            }
            if src < end && buf[src + 1] == b'\\' {
                buf[src + 1] = b'/';
            }
        }

        // Normalise only at the end of a path segment (or of the input).
        let at_segment_end = if src == end {
            done = true;
            true
        } else {
            buf[src + 1] == b'/'
        };

        let mut copy = true;
        if at_segment_end && !(src != end && buf[src] == b'/') {
            if buf[src] == b'.' {
                if dst > 0 && buf[dst - 1] == b'.' {
                    // Back-reference `..`.
                    if relative && (hitroot || dst <= 2) {
                        // Nothing to remove: keep the `..` as it is.
                        hitroot = true;
                    } else {
                        // Remove the `..` and the segment before it.
                        let mut d = dst as isize - 3;
                        while d > 0 && buf[d as usize] != b'/' {
                            d -= 1;
                        }
                        if d <= 0 {
                            hitroot = true;
                            d = 0;
                            if !relative && src == end {
                                d = 1;
                            }
                        }
                        dst = d as usize;
                        if done {
                            copy = false;
                        } else {
                            src += 1;
                        }
                    }
                } else if dst == 0 {
                    // Relative self-reference at the start.
                    if done {
                        copy = false;
                    } else {
                        src += 1;
                    }
                } else if buf[dst - 1] == b'/' {
                    // Self-reference `/./`.
                    if done {
                        copy = false;
                    } else {
                        dst -= 1;
                        src += 1;
                    }
                }
            } else if dst > 0 {
                // A regular segment.
                hitroot = false;
            }
        }

        if copy {
            if buf[src] == b'/' {
                // Skip to the last of several slashes.
                while src < end && is_sep(buf[src + 1]) {
                    src += 1;
                }
                // A relative path does not start with a slash.
                if relative && dst == 0 {
                    src += 1;
                    continue;
                }
            }
            buf[dst] = buf[src];
            dst += 1;
            src += 1;
        }
    }

    if !trailing && dst > 0 && buf[dst - 1] == b'/' {
        dst -= 1;
    }
    buf.truncate(dst);
}

#[cfg(test)]
mod tests {
    use super::super::tests::check;
    use super::super::Transform as T;

    #[test]
    fn normalise_path() {
        check(
            T::NormalisePath,
            &[
                (b"", b""),
                (b"a", b"a"),
                (b"/", b"/"),
                (b"/a/b/c", b"/a/b/c"),
                (b"a/b/c", b"a/b/c"),
                (b"a/b/c/", b"a/b/c/"),
                (b"//", b"/"),
                (b"/a//b///c", b"/a/b/c"),
                (b"a//b", b"a/b"),
                (b"//a", b"/a"),
                (b"a//", b"a/"),
                (b".", b""),
                (b"./", b""),
                (b"./a", b"a"),
                (b"././a", b"a"),
                (b"/./a", b"/a"),
                (b"/a/./b", b"/a/b"),
                (b"/a/.", b"/a"),
                (b"/a/./", b"/a/"),
                (b"a/.", b"a"),
                (b"/.", b""),
                (b"..", b".."),
                (b"../", b"../"),
                (b"../a", b"../a"),
                (b"../../a", b"../../a"),
                (b"a/..", b""),
                (b"a/../", b""),
                (b"a/../b", b"b"),
                (b"a/b/../c", b"a/c"),
                (b"a/b/../../c", b"c"),
                (b"a/b/../../../c", b"../c"),
                (b"a/../../b", b"../b"),
                (b"/..", b""),
                (b"/../", b"/"),
                (b"/../a", b"/a"),
                (b"/a/..", b""),
                (b"/a/../", b"/"),
                (b"/a/../b", b"/b"),
                (b"/a/b/../c", b"/a/c"),
                (b"/a/b/../../../../c", b"/c"),
                (b"/a/b/..", b"/a"),
                (b"/a/b/../", b"/a/"),
                (b"...", b"..."),
                (b"/.../a", b"/a"),
                (b"a./b", b"a./b"),
                (b"a../b", b"a../b"),
                (b"ab..", b""),
                (b"/a/b..", b"/a"),
                (b"a.", b"a."),
                (b".a", b".a"),
                (b"/.a/", b"/.a/"),
                (b"a\\b", b"a\\b"),
                (b"a\\..\\b", b"a\\..\\b"),
                (b"/a/b../c", b"/a/c"),
                (b"xa../b", b"b"),
                (b"/a/./b/.", b"/a/b"),
                (b"a/../../b/..", b".."),
                (b"../../a/..", b"../.."),
                (b"../a/../b", b"../b"),
                (b"a/b/../../../c/../d", b"../d"),
                (b"/../../a", b"/a"),
                (b"a/./../b", b"b"),
                (b"./../a", b"../a"),
                (b".././a", b"../a"),
                (b"a/..b/c", b"a/..b/c"),
                (b"/a/.b./", b"/a/.b./"),
                (b"a/b/.../c", b"a/b/c"),
                (b"/etc/passwd\0", b"/etc/passwd\0"),
                (b"/a/\xff/../b", b"/a/b"),
            ],
        );
    }

    #[test]
    fn normalise_path_win() {
        check(
            T::NormalisePathWin,
            &[
                (b"", b""),
                (b"a", b"a"),
                (b"\\", b"/"),
                (b"a\\b", b"a/b"),
                (b"\\a\\b", b"/a/b"),
                (b"a\\b\\", b"a/b/"),
                (b"a\\\\b", b"a/b"),
                (b"a/\\b", b"a/b"),
                (b"a\\..\\b", b"b"),
                (b"\\..\\a", b"/a"),
                (b"c:\\windows\\..\\boot.ini", b"c:/boot.ini"),
                (b"..\\..\\a", b"../../a"),
                (b".\\a", b"a"),
                (b"a\\.", b"a"),
                (b"a\\", b"a/"),
                // Only the byte after the one being looked at is converted, so
                // the third of three backslashes survives.
                (b"a\\\\\\b", b"a\\b"),
                (b"a\\\\b", b"a/b"),
                (b"..", b".."),
            ],
        );
    }

    /// CRS regression tests of rules that apply `normalizePath` /
    /// `normalizePathWin`.
    #[test]
    fn normalise_path_crs() {
        check(
            T::NormalisePathWin,
            &[
                // 930120-1: `../../../../../boot.ini%00` (ARGS-decoded).
                (b"../../../../../boot.ini\0", b"../../../../../boot.ini\0"),
            ],
        );
    }
}
