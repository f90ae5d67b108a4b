//! libinjection's XSS detector (as bundled with ModSecurity v3.0.9), without
//! heap allocation: the input is tokenized as HTML in five starting states
//! (text, and inside an unquoted, `'`, `"` or `` ` `` attribute value), and it is
//! XSS when a token is a doctype, a blacklisted tag, an event-handler or
//! otherwise dangerous attribute, a URL attribute whose value starts with a
//! dangerous scheme, or a suspicious comment.

use super::html5::{Kind, Start, Tokenizer};

/// How an attribute is dangerous.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Attr {
    None,
    /// Always.
    Black,
    /// When its value is a `javascript:`, `data:`... URL.
    Url,
    /// Style: always.
    Style,
    /// Its value names an attribute (SVG `attributeName`).
    Indirect,
}

/// Tags that are XSS by themselves (besides anything starting with `svg` or
/// `xsl`).
const BLACK_TAGS: &[&[u8]] = &[
    b"APPLET",
    b"BASE",
    b"COMMENT",
    b"EMBED",
    b"FRAME",
    b"FRAMESET",
    b"HANDLER",
    b"IFRAME",
    b"IMPORT",
    b"ISINDEX",
    b"LINK",
    b"LISTENER",
    b"META",
    b"NOSCRIPT",
    b"OBJECT",
    b"SCRIPT",
    b"STYLE",
    b"VMLFRAME",
    b"XML",
    b"XSS",
];

/// Dangerous attributes (besides `on*`, `xmlns*` and `xlink*`).
const BLACK_ATTRS: &[(&[u8], Attr)] = &[
    (b"ACTION", Attr::Url),
    (b"ATTRIBUTENAME", Attr::Indirect),
    (b"BY", Attr::Url),
    (b"BACKGROUND", Attr::Url),
    (b"DATAFORMATAS", Attr::Black),
    (b"DATASRC", Attr::Black),
    (b"DYNSRC", Attr::Url),
    (b"FILTER", Attr::Style),
    (b"FORMACTION", Attr::Url),
    (b"FOLDER", Attr::Url),
    (b"FROM", Attr::Url),
    (b"HANDLER", Attr::Url),
    (b"HREF", Attr::Url),
    (b"LOWSRC", Attr::Url),
    (b"POSTER", Attr::Url),
    (b"SRC", Attr::Url),
    (b"STYLE", Attr::Style),
    (b"TO", Attr::Url),
    (b"VALUES", Attr::Url),
    (b"XLINK:HREF", Attr::Url),
];

/// URL schemes that are XSS (`JAVA` covers `javascript:`).
const BLACK_SCHEMES: &[&[u8]] = &[b"DATA", b"VIEW-SOURCE", b"JAVA", b"VBSCRIPT"];

/// libinjection's `cstrcasecmp_with_null`: `s` without its NUL bytes,
/// upper-cased (ASCII), equals `upper`.
fn eq_upper_skip_nul(upper: &[u8], s: &[u8]) -> bool {
    let mut want = upper.iter();
    for &c in s {
        if c == 0 {
            continue;
        }
        if want.next() != Some(&c.to_ascii_uppercase()) {
            return false;
        }
    }
    want.next().is_none()
}

fn starts_with_ci(s: &[u8], upper: &[u8]) -> bool {
    s.len() >= upper.len()
        && s.iter()
            .zip(upper)
            .all(|(&a, &b)| a.to_ascii_uppercase() == b)
}

/// `s` is `upper` (case-insensitive), NUL bytes in `s` ignored.
fn is_name(upper: &[u8], s: &[u8], s_has_nul: bool) -> bool {
    if s_has_nul {
        eq_upper_skip_nul(upper, s)
    } else {
        s.len() == upper.len() && s.eq_ignore_ascii_case(upper)
    }
}

fn is_black_tag(s: &[u8]) -> bool {
    if s.len() < 3 {
        return false;
    }
    let has_nul = memchr::memchr(0, s).is_some();
    BLACK_TAGS.iter().any(|t| is_name(t, s, has_nul))
        || starts_with_ci(s, b"SVG")
        || starts_with_ci(s, b"XSL")
}

fn black_attr(s: &[u8]) -> Attr {
    if s.len() < 2 {
        return Attr::None;
    }
    if s.len() >= 5 {
        // any on* event handler (ModSecurity 3.0.9's libinjection has no
        // list of event names)
        if starts_with_ci(s, b"ON") {
            return Attr::Black;
        }
        // xmlns can create arbitrary tags
        let head = &s[..5];
        if eq_upper_skip_nul(b"XMLNS", head) || eq_upper_skip_nul(b"XLINK", head) {
            return Attr::Black;
        }
    }
    let has_nul = memchr::memchr(0, s).is_some();
    BLACK_ATTRS
        .iter()
        .find(|(name, _)| is_name(name, s, has_nul))
        .map_or(Attr::None, |&(_, a)| a)
}

/// libinjection's `html_decode_char_at`: the character at the start of `s`
/// (an `&#...;` / `&#x...;` reference decoded) and how many bytes it takes.
/// Bytes past the end read as NUL, which is what the C code sees.
fn decode_char(s: &[u8]) -> (i32, usize) {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let Some(&first) = s.first() else {
        return (-1, 0);
    };
    if first != b'&' || s.len() < 2 {
        return (i32::from(first), 1);
    }
    if s[1] != b'#' {
        return (i32::from(b'&'), 1);
    }
    let amp = (i32::from(b'&'), 1);
    let (radix, mut i) = if matches!(at(2), b'x' | b'X') {
        (16, 3)
    } else {
        (10, 2)
    };
    let Some(mut val) = char::from(at(i)).to_digit(radix) else {
        return amp;
    };
    i += 1;
    while i < s.len() {
        let c = s[i];
        if c == b';' {
            return (val as i32, i + 1);
        }
        let Some(d) = char::from(c).to_digit(radix) else {
            return (val as i32, i);
        };
        val = val * radix + d;
        if val > 0x0010_00FF {
            return amp;
        }
        i += 1;
    }
    (val as i32, i)
}

/// libinjection's `htmlencode_startswith`: `s`, with character references
/// decoded, leading controls/spaces skipped and NUL and LF ignored, starts
/// with `upper` (case-insensitive). A decoded value is compared by its low
/// byte, as the C code's `(char)` cast does.
fn html_starts_with(upper: &[u8], mut s: &[u8]) -> bool {
    let mut want = upper.iter();
    let mut first = true;
    while !s.is_empty() {
        let Some(&expected) = want.clone().next() else {
            return true;
        };
        let (mut c, used) = decode_char(s);
        s = s.get(used..).unwrap_or(&[]);
        if first && c <= 32 {
            continue;
        }
        first = false;
        if c == 0 || c == 10 {
            continue;
        }
        if (i32::from(b'a')..=i32::from(b'z')).contains(&c) {
            c -= 0x20;
        }
        if expected != c as u8 {
            return false;
        }
        want.next();
    }
    want.next().is_none()
}

fn is_black_url(s: &[u8]) -> bool {
    // skip leading controls, spaces and non-ASCII bytes
    let skip = s.iter().take_while(|&&c| c <= 32 || c >= 127).count();
    let s = &s[skip..];
    BLACK_SCHEMES
        .iter()
        .any(|scheme| html_starts_with(scheme, s))
}

fn is_black_comment(s: &[u8]) -> bool {
    // IE uses '`' as a tag end
    if s.contains(&b'`') {
        return true;
    }
    if s.len() > 3
        && ((s[0] == b'[' && starts_with_ci(&s[1..], b"IF")) || starts_with_ci(s, b"XML"))
    {
        // IE conditional comment, XML
        return true;
    }
    // IE's <?import, XML entity definitions
    s.len() > 5 && (eq_upper_skip_nul(b"IMPORT", &s[..6]) || eq_upper_skip_nul(b"ENTITY", &s[..6]))
}

/// libinjection's `libinjection_is_xss` for one starting state.
fn is_xss_from(input: &[u8], start: Start) -> bool {
    let mut h5 = Tokenizer::new(input, start);
    let mut attr = Attr::None;
    while h5.next_token() {
        let token = h5.token();
        if h5.kind != Kind::AttrValue {
            attr = Attr::None;
        }
        match h5.kind {
            Kind::Doctype => return true,
            Kind::TagNameOpen => {
                if is_black_tag(token) {
                    return true;
                }
            }
            Kind::AttrName => attr = black_attr(token),
            Kind::AttrValue => {
                match attr {
                    Attr::None => {}
                    Attr::Black | Attr::Style => return true,
                    Attr::Url => {
                        if is_black_url(token) {
                            return true;
                        }
                    }
                    Attr::Indirect => {
                        if black_attr(token) != Attr::None {
                            return true;
                        }
                    }
                }
                attr = Attr::None;
            }
            Kind::TagComment => {
                if is_black_comment(token) {
                    return true;
                }
            }
            Kind::DataText | Kind::TagNameClose | Kind::TagNameSelfClose | Kind::TagClose => {}
        }
    }
    false
}

/// `libinjection_xss`: XSS in any of the five starting states.
pub(super) fn detect(input: &[u8]) -> bool {
    [
        Start::Data,
        Start::ValueNoQuote,
        Start::ValueSingleQuote,
        Start::ValueDoubleQuote,
        Start::ValueBackQuote,
    ]
    .into_iter()
    .any(|start| is_xss_from(input, start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classics() {
        assert!(detect(b"<script>alert(1)</script>"));
        assert!(detect(b"<img src=x onerror=alert(1)>"));
        assert!(detect(b"<a href=\"javascript:alert(1)\">x</a>"));
        assert!(detect(b"<a href=\"&#106;avascript:alert(1)\">x</a>"));
        assert!(detect(b"\" onmouseover=alert(1) x=\""));
        assert!(detect(b"<!DOCTYPE html>"));
        assert!(detect(b"<svg/onload=alert(1)>"));
        assert!(detect(b"<!--[if IE]>x<![endif]-->"));
        assert!(!detect(b"just text"));
        assert!(!detect(b"a < b and c > d"));
        assert!(!detect(b"<b>bold</b>"));
        assert!(!detect(b""));
    }

    #[test]
    fn decoding() {
        assert_eq!(decode_char(b"&#106;x"), (106, 6));
        assert_eq!(decode_char(b"&#x6A;x"), (0x6a, 6));
        assert_eq!(decode_char(b"&#x6Ax"), (0x6a, 5));
        assert_eq!(decode_char(b"&#"), (i32::from(b'&'), 1));
        assert_eq!(decode_char(b"&#x"), (i32::from(b'&'), 1));
        assert_eq!(decode_char(b"&amp;"), (i32::from(b'&'), 1));
        assert_eq!(decode_char(b"&#99999999"), (i32::from(b'&'), 1));
        // low byte compared, as C's (char) cast
        assert!(html_starts_with(b"JAVA", b"&#x14A;ava"));
    }
}
