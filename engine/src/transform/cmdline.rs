//! `cmdLine`: normalises shell and `cmd.exe` command lines so that rules see
//! through the usual quoting and escaping evasions (`c^md`, `w"h"o'am'i`,
//! `cat\ /etc/passwd`).

/// Bytes that make `cmdLine` do something other than copy: the deleted
/// ones, the space-like ones, and ASCII upper-case letters.
#[inline]
fn special(b: u8) -> bool {
    matches!(
        b,
        b'"' | b'\'' | b'\\' | b'^' | b' ' | b',' | b';' | b'\t' | b'\r' | b'\n'
    ) || b.is_ascii_uppercase()
}

/// A value without [`special`] bytes is returned unchanged. (A value with
/// only single spaces between words is unchanged too, but goes through the
/// full algorithm and the comparison.)
#[inline]
pub(super) fn unchanged(input: &[u8]) -> bool {
    !input.iter().any(|&b| special(b))
}

/// `cmdLine` (v3):
///
/// * `\ " ' ^` are deleted;
/// * each run of `space , ; \t \r \n` becomes one space (deleted bytes do
///   not end a run: `a ^ b` -> `a b`; `\v` and `\f` are not in the set);
/// * a space right before `/` or `(` is deleted (`cat /etc` -> `cat/etc`);
/// * ASCII letters are lower-cased.
pub(super) fn cmd_line(input: &[u8], out: &mut Vec<u8>) {
    out.reserve(input.len());
    let mut space = false;
    for &b in input {
        match b {
            b'"' | b'\'' | b'\\' | b'^' => {}
            b' ' | b',' | b';' | b'\t' | b'\r' | b'\n' => {
                if !space {
                    out.push(b' ');
                    space = true;
                }
            }
            b'/' | b'(' => {
                if space {
                    out.pop();
                }
                space = false;
                out.push(b);
            }
            _ => {
                out.push(b.to_ascii_lowercase());
                space = false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::check;
    use super::super::Transform as T;

    #[test]
    fn cmd_line() {
        check(
            T::CmdLine,
            &[
                (b"", b""),
                (b"whoami", b"whoami"),
                (b"ls -la", b"ls -la"),
                (b"WHOAMI", b"whoami"),
                (b"w\"h\"o'am'i", b"whoami"),
                (b"c^md", b"cmd"),
                (b"c\\at", b"cat"),
                (b"cat /etc/passwd", b"cat/etc/passwd"),
                (b"cat    /etc", b"cat/etc"),
                (b"echo (a)", b"echo(a)"),
                (b"a,b;c", b"a b c"),
                (b"a , ; b", b"a b"),
                (b"a\t\r\nb", b"a b"),
                (b"a ^ b", b"a b"),
                (b"a ^/b", b"a/b"),
                (b"a \"/b", b"a/b"),
                (b" /", b"/"),
                (b"  ", b" "),
                (b" ", b" "),
                (b"a ", b"a "),
                (b"a\x0bb\x0cc", b"a\x0bb\x0cc"),
                (b"\xc9A", b"\xc9a"),
                (b"a\0b", b"a\0b"),
                (b"/ /", b"//"),
                (b"( (", b"(("),
            ],
        );
    }

    /// CRS regression tests of rules that apply `cmdLine`.
    #[test]
    fn cmd_line_crs() {
        check(
            T::CmdLine,
            &[
                // 932120-5: `cmd=powershell C:\windows\system32\notepad.exe`.
                (
                    b"powershell C:\\windows\\system32\\notepad.exe",
                    b"powershell c:windowssystem32notepad.exe",
                ),
                // 932190-5: `;+cat+/e't'*/pa'?s'wd` from a JSON body.
                (b";+cat+/e't'*/pa'?s'wd", b" +cat+/et*/pa?swd"),
                // 932190-6: the same with backslashes.
                (b";+cat+/e\\t\\*/pa\\?s\\wd", b" +cat+/et*/pa?swd"),
                // 932160-1: `cat /etc/passwd`.
                (b"cat /etc/passwd", b"cat/etc/passwd"),
            ],
        );
    }
}
