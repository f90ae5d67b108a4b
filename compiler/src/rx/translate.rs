//! PCRE (non-UTF mode) pattern text → regex-syntax pattern text.
//!
//! ModSecurity hands `@rx` patterns to PCRE without `PCRE_UTF8`, so a pattern
//! is a string of *bytes* and every escape denotes a byte. regex-syntax reads
//! the same text differently in a handful of places; this module is a small
//! scanner that understands PCRE's lexical structure (escapes, `\Q..\E`,
//! character classes, group openers, quantifiers, `(?x)` comments) and
//! rewrites the pattern so that regex-syntax, in byte mode (`(?sm-u)`), means
//! exactly what PCRE means:
//!
//! * `\x{HH}` is a code point for regex-syntax but a byte for PCRE: every
//!   numeric escape (`\xH`, `\xHH`, `\x{H..}`, `\0oo`, `\o{..}`, `\cX`, `\e`,
//!   and octal `\ddd` inside a class) is re-emitted as `\xHH`. A value above
//!   0xFF is an error, as in PCRE's non-UTF mode.
//! * A literal non-ASCII character of the pattern (UTF-8 in the `&str`) is the
//!   byte sequence PCRE sees, so it is emitted byte by byte (`é+` repeats only
//!   the last byte, as in PCRE).
//! * Character classes are re-emitted in a canonical form, because regex-syntax
//!   gives meaning to text that is literal in PCRE: `[` nests a class, `&&`,
//!   `--` and `~~` are set operations. PCRE's rules for `]` first, `-` at the
//!   edges or next to `\d`, POSIX `[:name:]`, and octal digits apply.
//! * `\v`, `\h` (PCRE: vertical / horizontal white space) and `\N` are
//!   expanded; `\<`, `\>` (PCRE: literal `<`, `>`; regex-syntax: word
//!   boundaries) become literals; `{` that does not start a valid `{n}`,
//!   `{n,}` or `{n,m}` quantifier is a literal in PCRE and is escaped.
//! * `\Q...\E` is translated by escaping the quoted text; `(?#...)` comments
//!   and, under `(?x)`, white space and `#` comments are dropped; `(?<name>`
//!   and `(?'name'` become `(?P<name>`.
//! * PCRE-only constructs (lookaround, backreferences, atomic groups,
//!   possessive quantifiers, recursion, conditionals, `\G`, `\K`, ...) are
//!   reported as [`RxError::Unsupported`] with their byte range in the
//!   original pattern: the linear-time engines cannot run them, and naming
//!   the construct is more useful than regex-syntax's generic message.
//!
//! The output only contains ASCII, never contains raw white space or `#`
//! (so it means the same whether or not regex-syntax's `x` flag is on), and
//! every output byte remembers the range of original bytes it came from
//! ([`OffsetMap`]), so that regex-syntax errors can be reported against the
//! text the rule author wrote.
//!
//! Known deviations that remain (documented rather than rejected, because
//! they only show up in contrived patterns): PCRE's multi-line `^` does not
//! match after a newline that ends the subject while regex-syntax's does; a
//! hyphen between a character and a class escape (`[a-\d]`) is taken as a
//! literal, as PCRE1 does (PCRE2 rejects it); `{,n}` is a literal as in PCRE1
//! and PCRE2 before 10.43; with `(?-m)` PCRE's `$` also matches before a
//! final newline while regex-syntax's only matches at the very end.

use super::RxError;
use std::ops::Range;

/// Flags every pattern is compiled with: DOTALL (`s`), MULTILINE (`m`), as in
/// libmodsecurity v3 and Coraza, and byte semantics (`-u`: ASCII `\w\d\s\b`,
/// ASCII-only case folding, `.` and negated classes match any byte).
pub const FLAGS_PREFIX: &str = "(?sm-u)";

/// For every byte of the translated text, the range of original pattern bytes
/// it was produced from.
#[derive(Debug, Clone)]
pub(crate) struct OffsetMap {
    src: Vec<(usize, usize)>,
    pattern_len: usize,
}

impl OffsetMap {
    /// Maps a byte range of the translated text back to the original pattern.
    ///
    /// A non-empty range maps to the union of the original ranges of its first
    /// and last bytes; an empty range maps to the construct at that position,
    /// or to the (empty) end of the pattern.
    pub(crate) fn to_original(&self, r: Range<usize>) -> Range<usize> {
        let start = match self.src.get(r.start) {
            Some(&(s, _)) => s,
            None => self.pattern_len,
        };
        if r.end <= r.start {
            // regex-syntax reports some errors at a position (an empty span,
            // e.g. a repetition operator with nothing before it): point at
            // the whole construct found there.
            return match self.src.get(r.start) {
                Some(&(s, e)) => s..e,
                None => start..start,
            };
        }
        let end = match r.end.checked_sub(1).and_then(|i| self.src.get(i)) {
            Some(&(_, e)) => e,
            None => self.pattern_len,
        };
        start..end.max(start)
    }
}

/// Human names of the PCRE-only constructs, used in [`RxError::Unsupported`].
pub(crate) mod names {
    pub const LOOKAHEAD: &str = "lookahead `(?=...)`";
    pub const NEG_LOOKAHEAD: &str = "negative lookahead `(?!...)`";
    pub const LOOKBEHIND: &str = "lookbehind `(?<=...)`";
    pub const NEG_LOOKBEHIND: &str = "negative lookbehind `(?<!...)`";
    pub const NON_ATOMIC_LOOKAROUND: &str = "non-atomic lookaround `(?*...)`/`(?<*...)`";
    pub const BACKREF: &str = "backreference `\\N`";
    pub const BACKREF_G: &str = "backreference `\\g{...}`";
    pub const SUBROUTINE_G: &str = "subroutine call `\\g<...>`";
    pub const BACKREF_K: &str = "named backreference `\\k<name>`";
    pub const BACKREF_P: &str = "named backreference `(?P=name)`";
    pub const ATOMIC: &str = "atomic group `(?>...)`";
    pub const POSSESSIVE_STAR: &str = "possessive quantifier `*+`";
    pub const POSSESSIVE_PLUS: &str = "possessive quantifier `++`";
    pub const POSSESSIVE_QUESTION: &str = "possessive quantifier `?+`";
    pub const POSSESSIVE_BRACE: &str = "possessive quantifier `{n,m}+`";
    pub const RECURSION: &str = "recursion `(?R)`";
    pub const SUBROUTINE_NUM: &str = "subroutine call `(?N)`";
    pub const SUBROUTINE_NAME: &str = "subroutine call `(?&name)`";
    pub const SUBROUTINE_P: &str = "subroutine call `(?P>name)`";
    pub const BRANCH_RESET: &str = "branch reset group `(?|...)`";
    pub const CONDITIONAL: &str = "conditional group `(?(...)...)`";
    pub const CALLOUT: &str = "callout `(?C...)`";
    pub const VERB: &str = "backtracking control verb `(*...)`";
    pub const ESC_G: &str = "start-of-match anchor `\\G`";
    pub const ESC_K: &str = "match start reset `\\K`";
    pub const ESC_C: &str = "single code unit `\\C`";
    pub const ESC_R: &str = "newline sequence `\\R`";
    pub const ESC_X: &str = "extended grapheme cluster `\\X`";
    pub const ESC_Z: &str = "end-or-before-final-newline anchor `\\Z`";
    pub const UNICODE_PROPERTY: &str = "Unicode property `\\p{...}`/`\\P{...}`";
    pub const POSIX_COLLATING: &str = "POSIX collating element `[.x.]`/`[=x=]`";
    pub const OPTION_J: &str = "inline option `(?J)` (duplicate group names)";
    pub const OPTION_N: &str = "inline option `(?n)` (no auto capture)";
    pub const OPTION_XX: &str = "inline option `(?xx)` (extended-more)";
    pub const OPTION_CARET: &str = "inline option `(?^)` (reset options)";
    pub const OPTION_OTHER: &str = "PCRE inline option (`(?X)`, `(?a...)`, ...)";
}

/// Translates a PCRE pattern; see the module documentation.
pub fn translate(pattern: &str) -> Result<String, RxError> {
    translate_mapped(pattern).map(|(text, _)| text)
}

/// Like [`translate`], also returning the offset map of the output.
pub(crate) fn translate_mapped(pattern: &str) -> Result<(String, OffsetMap), RxError> {
    let mut t = Translator {
        pat: pattern.as_bytes(),
        pos: 0,
        out: String::with_capacity(pattern.len() + FLAGS_PREFIX.len() + 16),
        src: Vec::with_capacity(pattern.len() + FLAGS_PREFIX.len() + 16),
        extended: false,
        extended_stack: Vec::new(),
        last: Last::Other,
        quant_start: 0,
    };
    t.emit(FLAGS_PREFIX, 0..0);
    t.run()?;
    let map = OffsetMap {
        src: t.src,
        pattern_len: pattern.len(),
    };
    Ok((t.out, map))
}

fn unsupported(construct: &'static str, range: Range<usize>) -> RxError {
    RxError::Unsupported { construct, range }
}

fn invalid(message: &str, range: Range<usize>) -> RxError {
    RxError::Invalid {
        message: message.to_string(),
        range,
    }
}

/// What the previous token was, for telling a quantifier modifier (`?` lazy,
/// `+` possessive) from a new quantifier.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Last {
    /// A quantifier that may still take a `?` or `+` modifier.
    Quantifier,
    /// A quantifier with its lazy `?` modifier.
    LazyQuantifier,
    /// Anything else.
    Other,
}

/// PCRE (like Perl) rejects a quantifier applied to a quantifier (`a**`,
/// `a{2}{3}`, `a+?*`); regex-syntax would accept it, so a rule PCRE refuses
/// to load would silently compile here.
fn nested_quantifier(range: Range<usize>) -> RxError {
    invalid("quantifier does not follow a repeatable item", range)
}

/// One member of a PCRE character class, before ranges are formed.
enum ClassTok {
    /// A single byte (literal or escape).
    Byte(u8, Range<usize>),
    /// A set that cannot be a range endpoint: `\d`, `[:alpha:]`, `\H`...,
    /// already in regex-syntax class-item syntax.
    Set(String, Range<usize>),
    /// An unescaped `-`, which may form a range.
    Hyphen(Range<usize>),
}

const PCRE_SPACE_H: &[u8] = &[0x09, 0x20, 0xA0];
const PCRE_SPACE_V: &[u8] = &[0x0A, 0x0B, 0x0C, 0x0D, 0x85];

/// POSIX class names known to both PCRE and regex-syntax.
const POSIX_NAMES: &[&str] = &[
    "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print", "punct",
    "space", "upper", "word", "xdigit",
];

struct Translator<'p> {
    pat: &'p [u8],
    pos: usize,
    out: String,
    src: Vec<(usize, usize)>,
    /// Whether PCRE's `x` (extended) option is on at `pos`.
    extended: bool,
    /// `extended` of the enclosing groups, pushed at `(` and popped at `)`.
    extended_stack: Vec<bool>,
    last: Last,
    quant_start: usize,
}

impl<'p> Translator<'p> {
    fn emit(&mut self, s: &str, r: Range<usize>) {
        self.out.push_str(s);
        for _ in 0..s.len() {
            self.src.push((r.start, r.end));
        }
    }

    fn at(&self, i: usize) -> Option<u8> {
        self.pat.get(i).copied()
    }

    /// End (exclusive) of the construct that runs up to and including the next
    /// `)` at or after `from`, or the end of the pattern.
    fn through_close_paren(&self, from: usize) -> usize {
        let from = from.min(self.pat.len());
        match memchr::memchr(b')', &self.pat[from..]) {
            Some(i) => from + i + 1,
            None => self.pat.len(),
        }
    }

    /// End of a run of ASCII digits starting at `from`.
    fn digits_end(&self, mut i: usize) -> usize {
        while self.at(i).is_some_and(|b| b.is_ascii_digit()) {
            i += 1;
        }
        i
    }

    fn run(&mut self) -> Result<(), RxError> {
        while let Some(b) = self.at(self.pos) {
            if self.extended {
                // PCRE's extended mode: unescaped white space outside classes
                // is ignored and `#` starts a comment that runs to a newline.
                if matches!(b, b' ' | b'\t' | b'\n' | b'\x0B' | b'\x0C' | b'\r') {
                    self.pos += 1;
                    continue;
                }
                if b == b'#' {
                    self.pos = match memchr::memchr(b'\n', &self.pat[self.pos..]) {
                        Some(i) => self.pos + i + 1,
                        None => self.pat.len(),
                    };
                    continue;
                }
            }
            match b {
                b'\\' => self.escape()?,
                b'[' => self.class()?,
                b'(' => self.group_open()?,
                b')' => {
                    if let Some(x) = self.extended_stack.pop() {
                        self.extended = x;
                    }
                    self.emit(")", self.pos..self.pos + 1);
                    self.pos += 1;
                    self.last = Last::Other;
                }
                b'*' | b'+' | b'?' => self.quantifier(b)?,
                b'{' => self.brace()?,
                b'|' | b'^' | b'$' | b'.' => {
                    let s = match b {
                        b'|' => "|",
                        b'^' => "^",
                        b'$' => "$",
                        _ => ".",
                    };
                    self.emit(s, self.pos..self.pos + 1);
                    self.pos += 1;
                    self.last = Last::Other;
                }
                _ => {
                    self.literal(b, self.pos..self.pos + 1);
                    self.pos += 1;
                }
            }
        }
        Ok(())
    }

    /// Emits a byte that must match literally (outside a class).
    fn literal(&mut self, b: u8, r: Range<usize>) {
        let s = if b.is_ascii_alphanumeric() || b == b'_' {
            (b as char).to_string()
        } else if b.is_ascii() && regex_syntax::is_meta_character(b as char) {
            format!("\\{}", b as char)
        } else if b.is_ascii_graphic() {
            (b as char).to_string()
        } else {
            // Space, control bytes and bytes >= 0x80 (never raw white space in
            // the output, so regex-syntax's `x` flag cannot change its meaning).
            format!("\\x{b:02X}")
        };
        self.emit(&s, r);
        self.last = Last::Other;
    }

    /// `*`, `+`, `?`. Right after a quantifier, `?` makes it lazy (fine in
    /// both dialects) and `+` makes it possessive (PCRE-only).
    fn quantifier(&mut self, b: u8) -> Result<(), RxError> {
        let p = self.pos;
        if self.last == Last::LazyQuantifier {
            return Err(nested_quantifier(p..p + 1));
        }
        if self.last == Last::Quantifier {
            if b == b'?' {
                self.emit("?", p..p + 1);
                self.pos += 1;
                self.last = Last::LazyQuantifier;
                return Ok(());
            }
            if b == b'+' {
                let name = match self.at(self.quant_start) {
                    Some(b'*') => names::POSSESSIVE_STAR,
                    Some(b'+') => names::POSSESSIVE_PLUS,
                    Some(b'?') => names::POSSESSIVE_QUESTION,
                    _ => names::POSSESSIVE_BRACE,
                };
                return Err(unsupported(name, self.quant_start..p + 1));
            }
            return Err(nested_quantifier(p..p + 1));
        }
        let s = match b {
            b'*' => "*",
            b'+' => "+",
            _ => "?",
        };
        self.emit(s, p..p + 1);
        self.pos += 1;
        self.last = Last::Quantifier;
        self.quant_start = p;
        Ok(())
    }

    /// `{`: a quantifier if it is `{n}`, `{n,}` or `{n,m}` (PCRE1 / PCRE2 <
    /// 10.43 syntax), otherwise a literal brace (PCRE), which regex-syntax
    /// would reject, so it is escaped.
    fn brace(&mut self) -> Result<(), RxError> {
        let p = self.pos;
        match self.quantifier_end(p) {
            Some(end) => {
                if self.last != Last::Other {
                    return Err(nested_quantifier(p..end));
                }
                let text = String::from_utf8_lossy(&self.pat[p..end]).into_owned();
                self.emit(&text, p..end);
                self.pos = end;
                self.last = Last::Quantifier;
                self.quant_start = p;
            }
            None => {
                self.emit("\\{", p..p + 1);
                self.pos += 1;
                self.last = Last::Other;
            }
        }
        Ok(())
    }

    fn quantifier_end(&self, p: usize) -> Option<usize> {
        let d1 = self.digits_end(p + 1);
        if d1 == p + 1 {
            return None;
        }
        match self.at(d1)? {
            b'}' => Some(d1 + 1),
            b',' => {
                let d2 = self.digits_end(d1 + 1);
                (self.at(d2)? == b'}').then_some(d2 + 1)
            }
            _ => None,
        }
    }

    /// Parses a PCRE escape at `start` (a backslash) that stands for a single
    /// byte. Returns the byte and the end of the escape, or `None` if the
    /// escape is not a single-byte one. `\b` (backspace) and octal `\1`..`\7`
    /// only count inside a class; outside they are a word boundary and a
    /// backreference.
    fn byte_escape(&self, start: usize, in_class: bool) -> Result<Option<(u8, usize)>, RxError> {
        let Some(c) = self.at(start + 1) else {
            return Ok(None);
        };
        let simple = |v: u8| Ok(Some((v, start + 2)));
        match c {
            b'a' => simple(0x07),
            b'e' => simple(0x1B),
            b'f' => simple(0x0C),
            b'n' => simple(0x0A),
            b'r' => simple(0x0D),
            b't' => simple(0x09),
            b'b' if in_class => simple(0x08),
            b'8' | b'9' if in_class => simple(c),
            // `\0` plus up to two more octal digits; inside a class any
            // `\ddd` (up to three octal digits) is octal.
            b'0' => self.octal_digits(start, start + 2, 2),
            b'1'..=b'7' if in_class => self.octal_digits(start, start + 1, 3),
            b'o' => {
                if self.at(start + 2) != Some(b'{') {
                    return Err(invalid("missing opening brace after \\o", start..start + 2));
                }
                self.braced_number(start, start + 3, 8, "\\o{")
            }
            b'x' => {
                if self.at(start + 2) == Some(b'{') {
                    return self.braced_number(start, start + 3, 16, "\\x{");
                }
                // Up to two hex digits; none at all means NUL in PCRE.
                let mut v: u32 = 0;
                let mut i = start + 2;
                while i < start + 4 {
                    match self.at(i).and_then(|d| (d as char).to_digit(16)) {
                        Some(d) => v = v * 16 + d,
                        None => break,
                    }
                    i += 1;
                }
                Ok(Some((v as u8, i)))
            }
            b'c' => match self.at(start + 2) {
                Some(k) if (0x20..=0x7E).contains(&k) => {
                    Ok(Some((k.to_ascii_uppercase() ^ 0x40, start + 3)))
                }
                Some(_) => Err(invalid(
                    "\\c must be followed by a printable ASCII character",
                    start..start + 3,
                )),
                None => Err(invalid("\\c at end of pattern", start..start + 2)),
            },
            _ => Ok(None),
        }
    }

    fn octal_digits(
        &self,
        start: usize,
        first: usize,
        max: usize,
    ) -> Result<Option<(u8, usize)>, RxError> {
        let mut v: u32 = 0;
        let mut i = first;
        while i < first + max {
            match self.at(i) {
                Some(d @ b'0'..=b'7') => v = v * 8 + u32::from(d - b'0'),
                _ => break,
            }
            i += 1;
        }
        if v > 0xFF {
            return Err(invalid(
                "octal value is greater than \\377 in non-UTF mode",
                start..i,
            ));
        }
        Ok(Some((v as u8, i)))
    }

    /// `\x{...}` / `\o{...}`: digits in `radix` up to `}`. PCRE in non-UTF mode
    /// reads the value as one byte, so it must be at most 0xFF.
    fn braced_number(
        &self,
        start: usize,
        first: usize,
        radix: u32,
        what: &str,
    ) -> Result<Option<(u8, usize)>, RxError> {
        let mut v: u32 = 0;
        let mut i = first;
        while let Some(d) = self.at(i).and_then(|d| (d as char).to_digit(radix)) {
            v = v.saturating_mul(radix).saturating_add(d);
            i += 1;
        }
        if i == first || self.at(i) != Some(b'}') {
            let end = (i + 1).min(self.pat.len());
            return Err(invalid(
                &format!("{what}...}} must contain digits and be closed by }}"),
                start..end,
            ));
        }
        if v > 0xFF {
            return Err(invalid(
                &format!(
                    "character value in {what}...}} is too large: PCRE in non-UTF mode \
                     (ModSecurity) allows at most 0xff"
                ),
                start..i + 1,
            ));
        }
        Ok(Some((v as u8, i + 1)))
    }

    /// End of `\p{..}`/`\pX` style escapes (also used for `\g`/`\k` forms).
    fn delimited_end(&self, from: usize, close: u8) -> usize {
        let from = from.min(self.pat.len());
        match memchr::memchr(close, &self.pat[from..]) {
            Some(i) => from + i + 1,
            None => self.pat.len(),
        }
    }

    /// `\` outside a class.
    fn escape(&mut self) -> Result<(), RxError> {
        let start = self.pos;
        let Some(c) = self.at(start + 1) else {
            return Err(invalid("\\ at end of pattern", start..start + 1));
        };
        let r2 = start..start + 2;
        match c {
            b'1'..=b'9' => {
                // PCRE: outside a class `\1`..`\9` are always backreferences;
                // `\10` and up are backreferences when that many groups exist
                // and octal otherwise. Both readings are rejected here (a
                // multi-digit escape is reported as a backreference too).
                let end = self.digits_end(start + 1);
                return Err(unsupported(names::BACKREF, start..end));
            }
            b'd' | b'D' | b'w' | b'W' | b's' | b'S' => {
                let s = format!("\\{}", c as char);
                self.emit(&s, r2);
                self.pos += 2;
                self.last = Last::Other;
                return Ok(());
            }
            b'b' | b'B' | b'A' | b'z' => {
                let s = format!("\\{}", c as char);
                self.emit(&s, r2);
                self.pos += 2;
                self.last = Last::Other;
                return Ok(());
            }
            b'h' | b'H' | b'v' | b'V' => {
                // PCRE: horizontal / vertical white space. regex-syntax's `\v`
                // is only VT (0x0B), so expand to explicit byte classes.
                let set = if matches!(c, b'h' | b'H') {
                    PCRE_SPACE_H
                } else {
                    PCRE_SPACE_V
                };
                let s = byte_set_class(set, c.is_ascii_uppercase());
                self.emit(&s, r2);
                self.pos += 2;
                self.last = Last::Other;
                return Ok(());
            }
            b'N' => {
                // PCRE: any character except newline, whatever `(?s)` says.
                self.emit("[^\\n]", r2);
                self.pos += 2;
                self.last = Last::Other;
                return Ok(());
            }
            b'R' => return Err(unsupported(names::ESC_R, r2)),
            b'X' => return Err(unsupported(names::ESC_X, r2)),
            b'C' => return Err(unsupported(names::ESC_C, r2)),
            b'G' => return Err(unsupported(names::ESC_G, r2)),
            b'K' => return Err(unsupported(names::ESC_K, r2)),
            b'Z' => return Err(unsupported(names::ESC_Z, r2)),
            b'p' | b'P' => {
                let end = if self.at(start + 2) == Some(b'{') {
                    self.delimited_end(start + 3, b'}')
                } else {
                    (start + 3).min(self.pat.len())
                };
                return Err(unsupported(names::UNICODE_PROPERTY, start..end));
            }
            b'g' => {
                return Err(match self.at(start + 2) {
                    Some(b'{') => {
                        unsupported(names::BACKREF_G, start..self.delimited_end(start + 3, b'}'))
                    }
                    Some(b'<') => unsupported(
                        names::SUBROUTINE_G,
                        start..self.delimited_end(start + 3, b'>'),
                    ),
                    Some(b'\'') => unsupported(
                        names::SUBROUTINE_G,
                        start..self.delimited_end(start + 3, b'\''),
                    ),
                    Some(b'+' | b'-') => {
                        unsupported(names::BACKREF_G, start..self.digits_end(start + 3))
                    }
                    _ => unsupported(names::BACKREF_G, start..self.digits_end(start + 2)),
                });
            }
            b'k' => {
                let end = match self.at(start + 2) {
                    Some(b'<') => self.delimited_end(start + 3, b'>'),
                    Some(b'\'') => self.delimited_end(start + 3, b'\''),
                    Some(b'{') => self.delimited_end(start + 3, b'}'),
                    _ => start + 2,
                };
                return Err(unsupported(names::BACKREF_K, start..end));
            }
            b'Q' => {
                // Quote: everything up to `\E` (or the end) is literal.
                let body = start + 2;
                let (body_end, next) = match memchr::memmem::find(&self.pat[body..], b"\\E") {
                    Some(i) => (body + i, body + i + 2),
                    None => (self.pat.len(), self.pat.len()),
                };
                for i in body..body_end {
                    let b = self.pat[i];
                    self.literal(b, i..i + 1);
                }
                self.pos = next;
                return Ok(());
            }
            b'E' => {
                // A stray `\E` is ignored by PCRE.
                self.pos += 2;
                return Ok(());
            }
            b'u' | b'U' | b'l' | b'L' | b'F' => {
                return Err(invalid(
                    "PCRE does not support \\F, \\L, \\l, \\U, or \\u",
                    r2,
                ));
            }
            _ => {}
        }
        if let Some((v, end)) = self.byte_escape(start, false)? {
            self.literal(v, start..end);
            self.pos = end;
            return Ok(());
        }
        if c.is_ascii_alphanumeric() {
            // Unknown letter escape: PCRE rejects it too; let regex-syntax
            // produce its error message (mapped back to this position).
            let s = format!("\\{}", c as char);
            self.emit(&s, r2);
            self.pos += 2;
            self.last = Last::Other;
            return Ok(());
        }
        // Any other escaped byte (punctuation, `\<`, `\>`, non-ASCII) is that
        // byte, literally. Note `\<`/`\>` are word boundaries in regex-syntax
        // but plain `<`/`>` in PCRE.
        self.literal(c, r2);
        self.pos += 2;
        Ok(())
    }

    fn group_open(&mut self) -> Result<(), RxError> {
        let p = self.pos;
        let push = |t: &mut Self| {
            t.extended_stack.push(t.extended);
            t.last = Last::Other;
        };
        match self.at(p + 1) {
            Some(b'?') => {}
            Some(b'*') => {
                if self
                    .at(p + 2)
                    .is_some_and(|b| b.is_ascii_alphabetic() || b == b':')
                {
                    return Err(unsupported(names::VERB, p..self.through_close_paren(p + 2)));
                }
                self.emit("(", p..p + 1);
                self.pos += 1;
                push(self);
                return Ok(());
            }
            _ => {
                self.emit("(", p..p + 1);
                self.pos += 1;
                push(self);
                return Ok(());
            }
        }
        let r3 = p..(p + 3).min(self.pat.len());
        match self.at(p + 2) {
            Some(b'#') => {
                // Comment: up to the first `)`, no escapes.
                match memchr::memchr(b')', &self.pat[p..]) {
                    Some(i) => self.pos = p + i + 1,
                    None => return Err(invalid("missing ) after (?# comment", p..self.pat.len())),
                }
                Ok(())
            }
            Some(b':') => {
                self.emit("(?:", r3);
                self.pos = p + 3;
                push(self);
                Ok(())
            }
            Some(b'=') => Err(unsupported(names::LOOKAHEAD, r3)),
            Some(b'!') => Err(unsupported(names::NEG_LOOKAHEAD, r3)),
            Some(b'*') => Err(unsupported(names::NON_ATOMIC_LOOKAROUND, r3)),
            Some(b'>') => Err(unsupported(names::ATOMIC, r3)),
            Some(b'|') => Err(unsupported(names::BRANCH_RESET, r3)),
            Some(b'(') => Err(unsupported(names::CONDITIONAL, r3)),
            Some(b'C') => Err(unsupported(
                names::CALLOUT,
                p..self.through_close_paren(p + 3),
            )),
            Some(b'&') => Err(unsupported(
                names::SUBROUTINE_NAME,
                p..self.through_close_paren(p + 3),
            )),
            Some(b'R') if self.at(p + 3) == Some(b')') => {
                Err(unsupported(names::RECURSION, p..p + 4))
            }
            Some(b'0'..=b'9') => Err(unsupported(
                names::SUBROUTINE_NUM,
                p..self.through_close_paren(p + 2),
            )),
            Some(b'+' | b'-') if self.at(p + 3).is_some_and(|b| b.is_ascii_digit()) => Err(
                unsupported(names::SUBROUTINE_NUM, p..self.through_close_paren(p + 3)),
            ),
            Some(b'<') => match self.at(p + 3) {
                Some(b'=') => Err(unsupported(names::LOOKBEHIND, p..p + 4)),
                Some(b'!') => Err(unsupported(names::NEG_LOOKBEHIND, p..p + 4)),
                Some(b'*') => Err(unsupported(names::NON_ATOMIC_LOOKAROUND, p..p + 4)),
                _ => self.named_group(p, p + 3, b'>'),
            },
            Some(b'\'') => self.named_group(p, p + 3, b'\''),
            Some(b'P') => match self.at(p + 3) {
                Some(b'<') => self.named_group(p, p + 4, b'>'),
                Some(b'=') => Err(unsupported(
                    names::BACKREF_P,
                    p..self.through_close_paren(p + 4),
                )),
                Some(b'>') => Err(unsupported(
                    names::SUBROUTINE_P,
                    p..self.through_close_paren(p + 4),
                )),
                _ => {
                    // Let regex-syntax report it.
                    self.emit("(?P", p..(p + 3).min(self.pat.len()));
                    self.pos = p + 3;
                    push(self);
                    Ok(())
                }
            },
            _ => self.flags(p),
        }
    }

    /// `(?<name>`, `(?'name'`, `(?P<name>`: a named capture group. The name
    /// runs from `name_start` to `close`; emitted as `(?P<name>`.
    fn named_group(&mut self, p: usize, name_start: usize, close: u8) -> Result<(), RxError> {
        let from = name_start.min(self.pat.len());
        let Some(i) = memchr::memchr(close, &self.pat[from..]) else {
            return Err(invalid(
                "syntax error in subpattern name (missing terminator?)",
                p..self.pat.len(),
            ));
        };
        let name_end = from + i;
        let name = &self.pat[from..name_end];
        // PCRE: a name is 1 to 32 word characters, not starting with a digit.
        let valid = !name.is_empty()
            && name.len() <= 32
            && !name[0].is_ascii_digit()
            && name.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_');
        if !valid {
            return Err(invalid(
                "group name must be 1 to 32 ASCII letters, digits or underscores, \
                 not starting with a digit",
                from..name_end + 1,
            ));
        }
        self.emit("(?P<", p..from);
        let name = String::from_utf8_lossy(name).into_owned();
        self.emit(&name, from..name_end);
        self.emit(">", name_end..name_end + 1);
        self.pos = name_end + 1;
        self.extended_stack.push(self.extended);
        self.last = Last::Other;
        Ok(())
    }

    /// `(?flags)` or `(?flags:`. PCRE and regex-syntax share `i m s x U`;
    /// PCRE-only options are reported; regex-syntax-only `u` and `R` are
    /// rejected since PCRE would reject them.
    fn flags(&mut self, p: usize) -> Result<(), RxError> {
        let mut i = p + 2;
        let mut negated = false;
        let mut extended = self.extended;
        let mut x_on = 0usize;
        while let Some(b) = self.at(i) {
            match b {
                b'-' => negated = true,
                b'i' | b'm' | b's' | b'U' => {}
                b'x' => {
                    if !negated {
                        x_on += 1;
                        if x_on > 1 {
                            return Err(unsupported(
                                names::OPTION_XX,
                                p..self.through_close_paren(p),
                            ));
                        }
                    }
                    extended = !negated;
                }
                b'J' => return Err(unsupported(names::OPTION_J, p..self.through_close_paren(p))),
                b'n' => return Err(unsupported(names::OPTION_N, p..self.through_close_paren(p))),
                b'^' => {
                    return Err(unsupported(
                        names::OPTION_CARET,
                        p..self.through_close_paren(p),
                    ))
                }
                b'X' | b'a' | b'r' => {
                    return Err(unsupported(
                        names::OPTION_OTHER,
                        p..self.through_close_paren(p),
                    ))
                }
                b'u' | b'R' => {
                    return Err(invalid(
                        "inline flags `u` and `R` are not PCRE syntax",
                        i..i + 1,
                    ))
                }
                _ => break,
            }
            i += 1;
        }
        match self.at(i) {
            Some(b')') => {
                let text = String::from_utf8_lossy(&self.pat[p..=i]).into_owned();
                self.emit(&text, p..i + 1);
                self.pos = i + 1;
                self.extended = extended;
                self.last = Last::Other;
            }
            Some(b':') => {
                let text = String::from_utf8_lossy(&self.pat[p..=i]).into_owned();
                self.emit(&text, p..i + 1);
                self.pos = i + 1;
                self.extended_stack.push(self.extended);
                self.extended = extended;
                self.last = Last::Other;
            }
            _ => {
                // Malformed: emit `(?` and let regex-syntax report the rest.
                self.emit("(?", p..p + 2);
                self.pos = p + 2;
                self.extended_stack.push(self.extended);
                self.last = Last::Other;
            }
        }
        Ok(())
    }

    /// A character class, re-emitted in canonical regex-syntax form.
    fn class(&mut self) -> Result<(), RxError> {
        let start = self.pos;
        let rest = &self.pat[start..];
        let word_assertion = if rest.starts_with(b"[[:<:]]") {
            Some("\\b{start}")
        } else if rest.starts_with(b"[[:>:]]") {
            Some("\\b{end}")
        } else {
            None
        };
        if let Some(s) = word_assertion {
            // PCRE's start/end-of-word assertions (= regex-syntax's, ASCII).
            self.emit(s, start..start + 7);
            self.pos = start + 7;
            self.last = Last::Other;
            return Ok(());
        }
        let mut i = start + 1;
        let negated = self.at(i) == Some(b'^');
        if negated {
            i += 1;
        }
        let open_end = i;
        let mut toks: Vec<ClassTok> = Vec::new();
        // PCRE: a `]` right after `[` or `[^` is a literal.
        let mut first = true;
        let close;
        loop {
            let Some(b) = self.at(i) else {
                return Err(invalid("unclosed character class", start..self.pat.len()));
            };
            match b {
                b']' if !first => {
                    close = i;
                    break;
                }
                b'\\' => {
                    i = self.class_escape(i, &mut toks, &mut first)?;
                    continue;
                }
                b'[' => {
                    if let Some((tok, end)) = self.posix_class(i)? {
                        toks.push(tok);
                        i = end;
                    } else {
                        toks.push(ClassTok::Byte(b'[', i..i + 1));
                        i += 1;
                    }
                }
                b'-' => {
                    toks.push(ClassTok::Hyphen(i..i + 1));
                    i += 1;
                }
                _ => {
                    toks.push(ClassTok::Byte(b, i..i + 1));
                    i += 1;
                }
            }
            first = false;
        }
        // Form ranges: a byte, a hyphen and a byte (an unescaped hyphen counts
        // as a byte there, as in PCRE: `[!--]` is `!` to `-`). Any other
        // hyphen is literal, as is one next to a set (`[\d-z]`, PCRE1).
        let mut body: Vec<(String, Range<usize>)> = Vec::new();
        let mut k = 0;
        while k < toks.len() {
            let end_byte = match toks.get(k + 2) {
                Some(ClassTok::Byte(hi, hr)) => Some((*hi, hr.clone())),
                Some(ClassTok::Hyphen(hr)) => Some((b'-', hr.clone())),
                _ => None,
            };
            match (&toks[k], toks.get(k + 1), end_byte) {
                (ClassTok::Byte(lo, lr), Some(ClassTok::Hyphen(_)), Some((hi, hr))) => {
                    let (lo, hi) = (*lo, hi);
                    if lo > hi {
                        return Err(invalid(
                            "range out of order in character class",
                            lr.start..hr.end,
                        ));
                    }
                    body.push((
                        format!("{}-{}", class_byte(lo), class_byte(hi)),
                        lr.start..hr.end,
                    ));
                    k += 3;
                }
                (ClassTok::Byte(b, r), _, _) => {
                    body.push((class_byte(*b), r.clone()));
                    k += 1;
                }
                (ClassTok::Hyphen(r), _, _) => {
                    body.push((class_byte(b'-'), r.clone()));
                    k += 1;
                }
                (ClassTok::Set(s, r), _, _) => {
                    body.push((s.clone(), r.clone()));
                    k += 1;
                }
            }
        }
        self.emit("[", start..start + 1);
        if negated {
            self.emit("^", start + 1..start + 2);
        }
        if body.is_empty() {
            // Only reachable via `\E`/empty `\Q\E` items; PCRE would keep
            // looking for members, but be safe: an empty class matches nothing.
            self.emit("\\x00&&\\xFF", start..open_end);
        }
        for (s, r) in body {
            self.emit(&s, r);
        }
        self.emit("]", close..close + 1);
        self.pos = close + 1;
        self.last = Last::Other;
        Ok(())
    }

    /// `[:name:]`, `[:^name:]`, `[.x.]`, `[=x=]` at `i` inside a class. Returns
    /// `None` if the text does not have that shape (then `[` is a literal).
    fn posix_class(&self, i: usize) -> Result<Option<(ClassTok, usize)>, RxError> {
        let Some(kind @ (b':' | b'.' | b'=')) = self.at(i + 1) else {
            return Ok(None);
        };
        let mut j = i + 2;
        if kind == b':' && self.at(j) == Some(b'^') {
            j += 1;
        }
        let name_start = j;
        while self.at(j).is_some_and(|b| b.is_ascii_alphanumeric()) {
            j += 1;
        }
        if self.at(j) != Some(kind) || self.at(j + 1) != Some(b']') {
            return Ok(None);
        }
        let range = i..j + 2;
        if kind != b':' {
            return Err(unsupported(names::POSIX_COLLATING, range));
        }
        let name = std::str::from_utf8(&self.pat[name_start..j]).unwrap_or("");
        if !POSIX_NAMES.contains(&name) {
            return Err(invalid("unknown POSIX class name", range));
        }
        let text = String::from_utf8_lossy(&self.pat[i..j + 2]).into_owned();
        Ok(Some((ClassTok::Set(text, range.clone()), range.end)))
    }

    /// `\` inside a class at `i`; pushes tokens and returns the new position.
    fn class_escape(
        &self,
        i: usize,
        toks: &mut Vec<ClassTok>,
        first: &mut bool,
    ) -> Result<usize, RxError> {
        let Some(c) = self.at(i + 1) else {
            return Err(invalid("unclosed character class", i..self.pat.len()));
        };
        let r2 = i..i + 2;
        match c {
            b'd' | b'D' | b'w' | b'W' | b's' | b'S' => {
                toks.push(ClassTok::Set(format!("\\{}", c as char), r2.clone()));
                *first = false;
                return Ok(i + 2);
            }
            b'h' | b'v' => {
                // A set, not bytes: it cannot be a range endpoint.
                let set = if c == b'h' {
                    PCRE_SPACE_H
                } else {
                    PCRE_SPACE_V
                };
                let text: String = set.iter().map(|&b| class_byte(b)).collect();
                toks.push(ClassTok::Set(text, r2.clone()));
                *first = false;
                return Ok(i + 2);
            }
            b'H' | b'V' => {
                let set = if c == b'H' {
                    PCRE_SPACE_H
                } else {
                    PCRE_SPACE_V
                };
                // A nested negated class: regex-syntax takes the union.
                toks.push(ClassTok::Set(byte_set_class(set, true), r2.clone()));
                *first = false;
                return Ok(i + 2);
            }
            b'Q' => {
                let body = i + 2;
                let (body_end, next) = match memchr::memmem::find(&self.pat[body..], b"\\E") {
                    Some(k) => (body + k, body + k + 2),
                    None => (self.pat.len(), self.pat.len()),
                };
                for k in body..body_end {
                    toks.push(ClassTok::Byte(self.pat[k], k..k + 1));
                }
                if body_end > body {
                    *first = false;
                }
                return Ok(next);
            }
            b'E' => return Ok(i + 2),
            b'p' | b'P' => {
                let end = if self.at(i + 2) == Some(b'{') {
                    self.delimited_end(i + 3, b'}')
                } else {
                    (i + 3).min(self.pat.len())
                };
                return Err(unsupported(names::UNICODE_PROPERTY, i..end));
            }
            b'u' | b'U' | b'l' | b'L' | b'F' => {
                return Err(invalid(
                    "PCRE does not support \\F, \\L, \\l, \\U, or \\u",
                    r2,
                ));
            }
            _ => {}
        }
        if let Some((v, end)) = self.byte_escape(i, true)? {
            toks.push(ClassTok::Byte(v, i..end));
            *first = false;
            return Ok(end);
        }
        if c.is_ascii_alphanumeric() {
            // `\B`, `\R`, `\X`, `\N`, `\G`, `\K`, ... and unknown letters.
            return Err(invalid("escape sequence is invalid in character class", r2));
        }
        toks.push(ClassTok::Byte(c, r2));
        *first = false;
        Ok(i + 2)
    }
}

/// A byte as a class member: alphanumerics as themselves, the rest as `\xHH`
/// (so that no byte can be mistaken for class syntax).
fn class_byte(b: u8) -> String {
    if b.is_ascii_alphanumeric() {
        (b as char).to_string()
    } else {
        format!("\\x{b:02X}")
    }
}

/// `[...]` / `[^...]` of the given bytes.
fn byte_set_class(set: &[u8], negated: bool) -> String {
    let mut s = String::from(if negated { "[^" } else { "[" });
    for &b in set {
        s.push_str(&class_byte(b));
    }
    s.push(']');
    s
}
