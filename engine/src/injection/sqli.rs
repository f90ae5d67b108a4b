//! libinjection's SQL injection detector, without heap allocation.
//!
//! The algorithm (Nick Galbreath's libinjection, as bundled with ModSecurity
//! v3.0.9): the input is tokenized as SQL in up to five settings (as is, as if
//! it followed a `'`, as if it followed a `"`; ANSI or MySQL comment rules),
//! runs of tokens are folded into at most five, their type letters form a
//! fingerprint such as `s&1c`, and the input is SQL injection when that
//! fingerprint is in libinjection's list and no false-positive rule clears it.
//!
//! Everything lives in a fixed-size [`State`] on the stack: eight tokens of at
//! most 31 bytes of text (libinjection's token size; longer values are
//! truncated exactly as there), positions and counters. Each pass is linear in
//! the input: every scan moves forward, and the folder looks at no more than
//! six tokens at a time.
//!
//! Where the C code reads one byte past the end of its NUL-terminated input
//! (ModSecurity passes `std::string::c_str()`), [`State::at`] returns 0.

use super::keywords::lookup;

/// Fingerprints have at most this many tokens.
const MAX_TOKENS: usize = 5;
/// libinjection's `stoken_t::val` size: 31 bytes of text and a NUL.
const VAL_SIZE: usize = 32;
/// Room for a fingerprint: five letters, or six when folding stops early on
/// an "evil" token (such a fingerprint then becomes `X`).
pub(super) const FINGERPRINT_SIZE: usize = 8;

// Token types: the letters of the fingerprint.
const T_KEYWORD: u8 = b'k';
const T_UNION: u8 = b'U';
const T_GROUP: u8 = b'B';
const T_EXPRESSION: u8 = b'E';
const T_SQLTYPE: u8 = b't';
const T_FUNCTION: u8 = b'f';
const T_BAREWORD: u8 = b'n';
const T_NUMBER: u8 = b'1';
const T_VARIABLE: u8 = b'v';
const T_STRING: u8 = b's';
const T_OPERATOR: u8 = b'o';
const T_LOGIC: u8 = b'&';
const T_COMMENT: u8 = b'c';
const T_COLLATE: u8 = b'A';
const T_LPAREN: u8 = b'(';
const T_RPAREN: u8 = b')';
const T_LBRACE: u8 = b'{';
const T_RBRACE: u8 = b'}';
const T_DOT: u8 = b'.';
const T_COMMA: u8 = b',';
const T_COLON: u8 = b':';
const T_SEMICOLON: u8 = b';';
const T_TSQL: u8 = b'T';
const T_UNKNOWN: u8 = b'?';
const T_EVIL: u8 = b'X';
const T_FINGERPRINT: u8 = b'F';
const T_BACKSLASH: u8 = b'\\';

/// One token: its type, its (truncated) text and, for strings, the quote
/// that opened and closed it (0 for none).
#[derive(Clone, Copy)]
struct Token {
    kind: u8,
    str_open: u8,
    str_close: u8,
    len: u8,
    val: [u8; VAL_SIZE],
}

impl Token {
    const EMPTY: Token = Token {
        kind: 0,
        str_open: 0,
        str_close: 0,
        len: 0,
        val: [0; VAL_SIZE],
    };

    fn text(&self) -> &[u8] {
        self.val.get(..usize::from(self.len)).unwrap_or(&[])
    }

    /// Byte `i` of the NUL-terminated text (0 at and after the end).
    fn byte(&self, i: usize) -> u8 {
        self.text().get(i).copied().unwrap_or(0)
    }

    /// Sets the text (truncated to 31 bytes).
    fn set_text(&mut self, text: &[u8]) {
        let n = text.len().min(VAL_SIZE - 1);
        self.val[..n].copy_from_slice(&text[..n]);
        self.val[n] = 0;
        self.len = n as u8;
    }

    /// Case-insensitive equality with an upper-case word.
    fn is(&self, upper: &[u8]) -> bool {
        eq_upper(self.text(), upper)
    }

    fn is_arithmetic_op(&self) -> bool {
        self.kind == T_OPERATOR
            && self.len == 1
            && matches!(self.val[0], b'*' | b'/' | b'-' | b'+' | b'%')
    }

    fn is_unary_op(&self) -> bool {
        if self.kind != T_OPERATOR {
            return false;
        }
        match self.text() {
            [c] => matches!(c, b'+' | b'-' | b'!' | b'~'),
            b"!!" => true,
            t @ [_, _, _] => eq_upper(t, b"NOT"),
            _ => false,
        }
    }
}

/// `text` upper-cased (ASCII) equals `upper`.
fn eq_upper(text: &[u8], upper: &[u8]) -> bool {
    text.len() == upper.len()
        && text
            .iter()
            .zip(upper)
            .all(|(&a, &b)| a.to_ascii_uppercase() == b)
}

/// libinjection's whitespace: `" \t\n\v\f\r\240"` and NUL.
fn is_white(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0xa0 | 0)
}

/// Bytes that end a bare word (NUL included, as `strchr` finds it).
fn ends_word(c: u8) -> bool {
    matches!(
        c,
        b' ' | b'['
            | b']'
            | b'{'
            | b'}'
            | b'<'
            | b'>'
            | b':'
            | b'\\'
            | b'?'
            | b'='
            | b'@'
            | b'!'
            | b'#'
            | b'~'
            | b'+'
            | b'-'
            | b'*'
            | b'/'
            | b'&'
            | b'|'
            | b'^'
            | b'%'
            | b'('
            | b')'
            | b','
            | b'\''
            | b';'
            | b'\t'
            | b'\n'
            | 0x0b
            | 0x0c
            | b'\r'
            | b'"'
            | 0xa0
            | 0
    )
}

/// Bytes that end a `@variable` name (NUL included).
fn ends_var(c: u8) -> bool {
    matches!(
        c,
        b' ' | b'<'
            | b'>'
            | b':'
            | b'\\'
            | b'?'
            | b'='
            | b'@'
            | b'!'
            | b'#'
            | b'~'
            | b'+'
            | b'-'
            | b'*'
            | b'/'
            | b'&'
            | b'|'
            | b'^'
            | b'%'
            | b'('
            | b')'
            | b','
            | b'\''
            | b';'
            | b'\t'
            | b'\n'
            | 0x0b
            | 0x0c
            | b'\r'
            | b'`'
            | b'"'
            | 0
    )
}

/// Length of the prefix of `s` made of bytes accepted by `accept`. As in
/// libinjection's `strlenspn` (built on `strchr`), NUL is always accepted.
fn span(s: &[u8], accept: impl Fn(u8) -> bool) -> usize {
    s.iter().take_while(|&&c| c == 0 || accept(c)).count()
}

/// Position of the first `a` immediately followed by `b`.
fn find2(s: &[u8], a: u8, b: u8) -> Option<usize> {
    s.windows(2).position(|w| w[0] == a && w[1] == b)
}

/// Position of the first occurrence of `c`.
fn find1(s: &[u8], c: u8) -> Option<usize> {
    memchr::memchr(c, s)
}

/// Which parser a byte starts.
#[derive(Clone, Copy)]
enum Parser {
    White,
    Op1,
    Op2,
    Char,
    Other,
    String,
    Hash,
    Money,
    Dash,
    Number,
    Slash,
    Var,
    Word,
    BString,
    EString,
    NqString,
    QString,
    UString,
    XString,
    BWord,
    Backslash,
    Tick,
}

fn parser_for(c: u8) -> Parser {
    match c {
        0..=32 | 127 | 160 => Parser::White,
        b'!' | b'&' | b'*' | b':' | b'<' | b'=' | b'>' | b'|' => Parser::Op2,
        b'%' | b'+' | b'^' | b'~' => Parser::Op1,
        b'(' | b')' | b',' | b';' | b'{' | b'}' => Parser::Char,
        b'?' | b']' => Parser::Other,
        b'"' | b'\'' => Parser::String,
        b'#' => Parser::Hash,
        b'$' => Parser::Money,
        b'-' => Parser::Dash,
        b'.' | b'0'..=b'9' => Parser::Number,
        b'/' => Parser::Slash,
        b'@' => Parser::Var,
        b'B' | b'b' => Parser::BString,
        b'E' | b'e' => Parser::EString,
        b'N' | b'n' => Parser::NqString,
        b'Q' | b'q' => Parser::QString,
        b'U' | b'u' => Parser::UString,
        b'X' | b'x' => Parser::XString,
        b'[' => Parser::BWord,
        b'\\' => Parser::Backslash,
        b'`' => Parser::Tick,
        _ => Parser::Word,
    }
}

/// One tokenizing/folding pass over the input, and the whole detector.
pub(super) struct State<'a> {
    s: &'a [u8],
    /// The quote the input is pretended to follow (0, `'` or `"`).
    quote: u8,
    /// MySQL comment rules (`#` comments, `--x` is not a comment) instead of ANSI.
    mysql: bool,
    pos: usize,
    /// Index of the token being tokenized.
    current: usize,
    tokens: [Token; MAX_TOKENS + 3],
    stats_tokens: usize,
    stats_comment_ddx: usize,
    stats_comment_hash: usize,
    fingerprint: [u8; FINGERPRINT_SIZE],
    fingerprint_len: usize,
}

impl<'a> State<'a> {
    pub(super) fn new(s: &'a [u8]) -> State<'a> {
        State {
            s,
            quote: 0,
            mysql: false,
            pos: 0,
            current: 0,
            tokens: [Token::EMPTY; MAX_TOKENS + 3],
            stats_tokens: 0,
            stats_comment_ddx: 0,
            stats_comment_hash: 0,
            fingerprint: [0; FINGERPRINT_SIZE],
            fingerprint_len: 0,
        }
    }

    /// The fingerprint of the last pass.
    pub(super) fn fingerprint(&self) -> &[u8] {
        self.fingerprint.get(..self.fingerprint_len).unwrap_or(&[])
    }

    /// libinjection's `libinjection_is_sqli`: tries the input as is, then as
    /// if after a `'`, then as if after a `"`.
    pub(super) fn detect(&mut self) -> bool {
        if self.s.is_empty() {
            return false;
        }
        if self.pass_hits(0, false) {
            return true;
        }
        if self.reparse_as_mysql() && self.pass_hits(0, true) {
            return true;
        }
        if find1(self.s, b'\'').is_some() {
            if self.pass_hits(b'\'', false) {
                return true;
            }
            if self.reparse_as_mysql() && self.pass_hits(b'\'', true) {
                return true;
            }
        }
        if find1(self.s, b'"').is_some() && self.pass_hits(b'"', true) {
            return true;
        }
        false
    }

    fn reparse_as_mysql(&self) -> bool {
        self.stats_comment_ddx != 0 || self.stats_comment_hash != 0
    }

    fn pass_hits(&mut self, quote: u8, mysql: bool) -> bool {
        self.compute_fingerprint(quote, mysql);
        self.blacklisted() && self.not_whitelisted()
    }

    fn reset(&mut self, quote: u8, mysql: bool) {
        let s = self.s;
        *self = State::new(s);
        self.quote = quote;
        self.mysql = mysql;
    }

    /// `libinjection_sqli_fingerprint`.
    fn compute_fingerprint(&mut self, quote: u8, mysql: bool) {
        self.reset(quote, mysql);
        let tlen = self.fold();

        // PHP's "magic" backquote comment: an empty, unclosed `` ` `` last.
        if tlen > 2 {
            let last = &mut self.tokens[tlen - 1];
            if last.kind == T_BAREWORD
                && last.str_open == b'`'
                && last.len == 0
                && last.str_close == 0
            {
                last.kind = T_COMMENT;
            }
        }

        // The fingerprint is a C string: it ends at the first type 0 (none
        // is expected within `tlen`).
        let mut n = 0;
        while n < tlen && self.tokens[n].kind != 0 {
            self.fingerprint[n] = self.tokens[n].kind;
            n += 1;
        }
        self.fingerprint_len = n;

        if self.fingerprint().contains(&T_EVIL) {
            self.fingerprint = [0; FINGERPRINT_SIZE];
            self.fingerprint[0] = T_EVIL;
            self.fingerprint_len = 1;
            self.tokens[0].kind = T_EVIL;
            self.tokens[0].val = [0; VAL_SIZE];
            self.tokens[0].val[0] = T_EVIL;
            self.tokens[1].kind = 0;
        }
    }

    /// `libinjection_sqli_blacklist`: `0` + the upper-cased fingerprint is a
    /// type-`F` entry of the word table.
    fn blacklisted(&self) -> bool {
        let fp = self.fingerprint();
        if fp.is_empty() {
            return false;
        }
        let mut key = [0u8; FINGERPRINT_SIZE];
        key[0] = b'0';
        for (k, &c) in key[1..].iter_mut().zip(fp) {
            *k = c.to_ascii_uppercase();
        }
        lookup(&key[..=fp.len()]) == T_FINGERPRINT
    }

    /// `libinjection_sqli_not_whitelist`: false-positive rules for short
    /// fingerprints.
    fn not_whitelisted(&self) -> bool {
        let fp = self.fingerprint();
        let tlen = fp.len();
        let t0 = &self.tokens[0];
        let t1 = &self.tokens[1];

        if tlen > 1
            && fp[tlen - 1] == T_COMMENT
            && memchr::memmem::find(self.s, b"sp_password").is_some()
        {
            return true;
        }

        match tlen {
            2 => {
                if fp[1] == T_UNION {
                    // "1 union" alone is too common to flag.
                    return self.stats_tokens != 2;
                }
                if t1.byte(0) == b'#' {
                    return false;
                }
                if t0.kind == T_BAREWORD && t1.kind == T_COMMENT && t1.byte(0) != b'/' {
                    return false;
                }
                if t0.kind == T_NUMBER && t1.kind == T_COMMENT && t1.byte(0) == b'/' {
                    return true;
                }
                if t0.kind == T_NUMBER && t1.kind == T_COMMENT {
                    if self.stats_tokens > 2 {
                        return true;
                    }
                    // The byte after the number, read at the number's
                    // (truncated) length as libinjection does; C compares a
                    // signed char, so bytes >= 0x80 count as white space.
                    let n = usize::from(t0.len);
                    let c = self.at(n);
                    if c <= 32 || c >= 0x80 {
                        return true;
                    }
                    if c == b'/' && self.at(n + 1) == b'*' {
                        return true;
                    }
                    if c == b'-' && self.at(n + 1) == b'-' {
                        return true;
                    }
                    return false;
                }
                if t1.len > 2 && t1.byte(0) == b'-' {
                    return false;
                }
            }
            3 => {
                if fp == b"sos" || fp == b"s&s" {
                    let t2 = &self.tokens[2];
                    // ...foo' + 'bar...: no opening quote, no closing quote.
                    return t0.str_open == 0 && t2.str_close == 0 && t0.str_close == t2.str_open;
                } else if matches!(fp, b"s&n" | b"n&1" | b"1&1" | b"1&v" | b"1&s") {
                    if self.stats_tokens == 3 {
                        return false;
                    }
                } else if t1.kind == T_KEYWORD
                    && (t1.len < 5 || !t1.text().get(..4).is_some_and(|p| eq_upper(p, b"INTO")))
                {
                    // Only INTO OUTFILE / INTO DUMPFILE are SQLi here.
                    return false;
                }
            }
            _ => {}
        }
        true
    }

    /// Byte `i` of the input, 0 past the end (the C string's terminator).
    fn at(&self, i: usize) -> u8 {
        self.s.get(i).copied().unwrap_or(0)
    }

    fn cur(&mut self) -> &mut Token {
        &mut self.tokens[self.current]
    }

    /// Assigns the current token from `len` input bytes at `start`.
    fn assign(&mut self, kind: u8, start: usize, len: usize) {
        let s = self.s;
        let text = s.get(start..start.saturating_add(len)).unwrap_or(&[]);
        let t = self.cur();
        t.kind = kind;
        t.set_text(text);
    }

    fn assign_char(&mut self, kind: u8, c: u8) {
        let t = self.cur();
        t.kind = kind;
        t.set_text(&[c]);
    }

    // ------------------------------------------------------------------
    // Tokenizer: each parser starts at `self.pos`, fills the current token
    // (or not, for white space) and returns the position after it.

    /// `libinjection_sqli_tokenize`: the next token into `tokens[current]`;
    /// false at the end of the input.
    fn tokenize(&mut self) -> bool {
        let slen = self.s.len();
        if slen == 0 {
            return false;
        }
        *self.cur() = Token::EMPTY;

        // At the start, in a quote context, the input is the rest of a string.
        if self.pos == 0 && self.quote != 0 {
            self.pos = self.parse_string_core(0, self.quote, 0);
            self.stats_tokens += 1;
            return true;
        }

        while self.pos < slen {
            let c = self.s[self.pos];
            let next = match parser_for(c) {
                Parser::White => self.pos + 1,
                Parser::Op1 => self.parse_operator1(),
                Parser::Op2 => self.parse_operator2(),
                Parser::Char => {
                    self.assign_char(c, c);
                    self.pos + 1
                }
                Parser::Other => {
                    self.assign_char(T_UNKNOWN, c);
                    self.pos + 1
                }
                Parser::String => self.parse_string_core(self.pos, c, 1),
                Parser::Hash => self.parse_hash(),
                Parser::Money => self.parse_money(),
                Parser::Dash => self.parse_dash(),
                Parser::Number => self.parse_number(),
                Parser::Slash => self.parse_slash(),
                Parser::Var => self.parse_var(),
                Parser::Word => self.parse_word(),
                Parser::BString => self.parse_bxstring(|c| c == b'0' || c == b'1'),
                Parser::EString => self.parse_estring(),
                Parser::NqString => self.parse_nqstring(),
                Parser::QString => self.parse_qstring_core(0),
                Parser::UString => self.parse_ustring(),
                Parser::XString => self.parse_bxstring(|c| c.is_ascii_hexdigit()),
                Parser::BWord => self.parse_bword(),
                Parser::Backslash => self.parse_backslash(),
                Parser::Tick => self.parse_tick(),
            };
            // Every parser consumes at least one byte.
            self.pos = next.max(self.pos + 1);
            if self.tokens[self.current].kind != 0 {
                self.stats_tokens += 1;
                return true;
            }
        }
        false
    }

    fn parse_operator1(&mut self) -> usize {
        let c = self.s[self.pos];
        self.assign_char(T_OPERATOR, c);
        self.pos + 1
    }

    fn parse_operator2(&mut self) -> usize {
        let pos = self.pos;
        let slen = self.s.len();
        if pos + 1 >= slen {
            return self.parse_operator1();
        }
        if pos + 2 < slen && &self.s[pos..pos + 3] == b"<=>" {
            self.assign(T_OPERATOR, pos, 3);
            return pos + 3;
        }
        let kind = lookup(&self.s[pos..pos + 2]);
        if kind != 0 {
            self.assign(kind, pos, 2);
            return pos + 2;
        }
        if self.s[pos] == b':' {
            self.assign(T_COLON, pos, 1);
            return pos + 1;
        }
        self.parse_operator1()
    }

    /// `#`: an operator in ANSI SQL, a comment to the end of line in MySQL.
    fn parse_hash(&mut self) -> usize {
        self.stats_comment_hash += 1;
        if self.mysql {
            self.stats_comment_hash += 1;
            self.parse_eol_comment()
        } else {
            self.assign_char(T_OPERATOR, b'#');
            self.pos + 1
        }
    }

    fn parse_eol_comment(&mut self) -> usize {
        let pos = self.pos;
        let slen = self.s.len();
        match find1(&self.s[pos..], b'\n') {
            None => {
                self.assign(T_COMMENT, pos, slen - pos);
                slen
            }
            Some(i) => {
                self.assign(T_COMMENT, pos, i);
                pos + i + 1
            }
        }
    }

    /// `--` followed by white space or the end is a comment; `--x` is one
    /// only in ANSI mode; otherwise `-` is an operator.
    fn parse_dash(&mut self) -> usize {
        let pos = self.pos;
        let slen = self.s.len();
        let dash2 = self.at(pos + 1) == b'-' && pos + 1 < slen;
        if dash2 && (pos + 2 == slen || (pos + 2 < slen && is_white(self.s[pos + 2]))) {
            self.parse_eol_comment()
        } else if dash2 && !self.mysql {
            self.stats_comment_ddx += 1;
            self.parse_eol_comment()
        } else {
            self.assign_char(T_OPERATOR, b'-');
            pos + 1
        }
    }

    /// `/` or a `/* */` comment; nested `/*` and MySQL's `/*!` are "evil".
    fn parse_slash(&mut self) -> usize {
        let pos = self.pos;
        let slen = self.s.len();
        if pos + 1 == slen || self.s[pos + 1] != b'*' {
            return self.parse_operator1();
        }
        let body = &self.s[pos + 2..];
        let end = find2(body, b'*', b'/'); // offset in `body`
        let clen = match end {
            None => slen - pos,
            Some(e) => e + 4,
        };
        let mut kind = T_COMMENT;
        // A "/*" starting before the closing "*/" (it may share its '*').
        let nested = match end {
            Some(e) => find2(&body[..e + 1], b'/', b'*').is_some(),
            None => false,
        };
        if nested || (pos + 2 < slen && self.s[pos + 2] == b'!') {
            kind = T_EVIL;
        }
        self.assign(kind, pos, clen);
        pos + clen
    }

    /// `\N` is MySQL's NULL; any other backslash is its own token.
    fn parse_backslash(&mut self) -> usize {
        let pos = self.pos;
        if pos + 1 < self.s.len() && self.s[pos + 1] == b'N' {
            self.assign(T_NUMBER, pos, 2);
            pos + 2
        } else {
            self.assign_char(T_BACKSLASH, b'\\');
            pos + 1
        }
    }

    /// A string from `pos + offset` to the first unescaped `delim` (an
    /// odd run of backslashes or a doubled delimiter escapes it). `offset`
    /// 0 is the pretended string at the start of a quote context.
    fn parse_string_core(&mut self, pos: usize, delim: u8, offset: usize) -> usize {
        let s = self.s;
        let slen = s.len();
        let start = (pos + offset).min(slen);
        self.cur().str_open = if offset > 0 { delim } else { 0 };
        let mut from = start;
        loop {
            let q = match s.get(from..).and_then(|rest| find1(rest, delim)) {
                None => {
                    self.assign(T_STRING, start, slen - start);
                    self.cur().str_close = 0;
                    return slen;
                }
                Some(i) => from + i,
            };
            let backslashes = s[start..q]
                .iter()
                .rev()
                .take_while(|&&c| c == b'\\')
                .count();
            if backslashes % 2 == 1 {
                from = q + 1;
            } else if q + 1 < slen && s[q + 1] == s[q] {
                from = q + 2;
            } else {
                self.assign(T_STRING, start, q - start);
                self.cur().str_close = delim;
                return q + 1;
            }
        }
    }

    /// `E'...'` / `N'...'` strings, else a word.
    fn parse_estring(&mut self) -> usize {
        let pos = self.pos;
        if pos + 2 >= self.s.len() || self.s[pos + 1] != b'\'' {
            return self.parse_word();
        }
        self.parse_string_core(pos, b'\'', 2)
    }

    /// `U&'...'` strings, else a word.
    fn parse_ustring(&mut self) -> usize {
        let pos = self.pos;
        if pos + 2 < self.s.len() && self.s[pos + 1] == b'&' && self.s[pos + 2] == b'\'' {
            let end = self.parse_string_core(pos + 2, b'\'', 1);
            let t = self.cur();
            t.str_open = b'u';
            if t.str_close == b'\'' {
                t.str_close = b'u';
            }
            end
        } else {
            self.parse_word()
        }
    }

    /// Oracle's `q'Xtextx'` (at `self.pos + offset`; `offset` 1 for
    /// `nq'...'`), else a word.
    fn parse_qstring_core(&mut self, offset: usize) -> usize {
        let slen = self.s.len();
        let pos = self.pos + offset;
        if pos >= slen
            || !matches!(self.s[pos], b'q' | b'Q')
            || pos + 2 >= slen
            || self.s[pos + 1] != b'\''
        {
            return self.parse_word();
        }
        let open = self.s[pos + 2];
        // C's signed char: bytes >= 0x80 are below 33 too.
        if !(33..0x80).contains(&open) {
            return self.parse_word();
        }
        let close = match open {
            b'(' => b')',
            b'[' => b']',
            b'{' => b'}',
            b'<' => b'>',
            c => c,
        };
        let body = pos + 3;
        match find2(&self.s[body..], close, b'\'') {
            None => {
                self.assign(T_STRING, body, slen - body);
                let t = self.cur();
                t.str_open = b'q';
                t.str_close = 0;
                slen
            }
            Some(i) => {
                self.assign(T_STRING, body, i);
                let t = self.cur();
                t.str_open = b'q';
                t.str_close = b'q';
                body + i + 2
            }
        }
    }

    /// `N'...'` (MySQL national string) or Oracle's `nq'...'`.
    fn parse_nqstring(&mut self) -> usize {
        let pos = self.pos;
        if pos + 2 < self.s.len() && self.s[pos + 1] == b'\'' {
            return self.parse_estring();
        }
        self.parse_qstring_core(1)
    }

    /// `b'0101'` and `x'0aF9'` literals (numbers), else a word.
    fn parse_bxstring(&mut self, digit: impl Fn(u8) -> bool) -> usize {
        let pos = self.pos;
        let slen = self.s.len();
        if pos + 2 >= slen || self.s[pos + 1] != b'\'' {
            return self.parse_word();
        }
        let n = span(&self.s[pos + 2..], digit);
        if pos + 2 + n >= slen || self.s[pos + 2 + n] != b'\'' {
            return self.parse_word();
        }
        self.assign(T_NUMBER, pos, n + 3);
        pos + n + 3
    }

    /// SQL Server's `[bracketed name]`.
    fn parse_bword(&mut self) -> usize {
        let pos = self.pos;
        let slen = self.s.len();
        match find1(&self.s[pos..], b']') {
            None => {
                self.assign(T_BAREWORD, pos, slen - pos);
                slen
            }
            Some(i) => {
                self.assign(T_BAREWORD, pos, i + 1);
                pos + i + 1
            }
        }
    }

    /// A word, typed by the word table; a keyword before a `.` or `` ` ``
    /// inside it is split off (`SELECT.1`, ``SELECT`col` ``).
    fn parse_word(&mut self) -> usize {
        let pos = self.pos;
        let wlen = self.s[pos..].iter().take_while(|&&c| !ends_word(c)).count();
        self.assign(T_BAREWORD, pos, wlen);

        let t = self.tokens[self.current];
        for (i, &c) in t.text().iter().enumerate() {
            if c == b'.' || c == b'`' {
                let kind = lookup(&t.val[..i]);
                if kind != 0 && kind != T_BAREWORD {
                    *self.cur() = Token::EMPTY;
                    self.assign(kind, pos, i);
                    return pos + i;
                }
            }
        }
        if wlen < VAL_SIZE {
            let kind = lookup(t.text());
            self.cur().kind = if kind == 0 { T_BAREWORD } else { kind };
        }
        pos + wlen
    }

    /// MySQL's `` `quoted name` ``: a function if its text is one, else a word.
    fn parse_tick(&mut self) -> usize {
        let end = self.parse_string_core(self.pos, b'`', 1);
        let kind = lookup(self.tokens[self.current].text());
        self.cur().kind = if kind == T_FUNCTION {
            T_FUNCTION
        } else {
            T_BAREWORD
        };
        end
    }

    /// `@var`, `@@var`, ``@@`var` ``, `@'var'`.
    fn parse_var(&mut self) -> usize {
        let slen = self.s.len();
        let mut pos = self.pos + 1;
        if pos < slen && self.s[pos] == b'@' {
            pos += 1;
        }
        if pos < slen {
            let c = self.s[pos];
            if c == b'`' {
                self.pos = pos;
                let end = self.parse_tick();
                self.cur().kind = T_VARIABLE;
                return end;
            } else if c == b'\'' || c == b'"' {
                let end = self.parse_string_core(pos, c, 1);
                self.cur().kind = T_VARIABLE;
                return end;
            }
        }
        let n = self.s[pos.min(slen)..]
            .iter()
            .take_while(|&&c| !ends_var(c))
            .count();
        self.assign(T_VARIABLE, pos, n);
        pos + n
    }

    /// `$1,000.00` money, `$$ quoted $$` and `$tag$ quoted $tag$` strings.
    fn parse_money(&mut self) -> usize {
        let s = self.s;
        let pos = self.pos;
        let slen = s.len();
        if pos + 1 == slen {
            self.assign_char(T_BAREWORD, b'$');
            return slen;
        }
        let n = span(&s[pos + 1..], |c| {
            c.is_ascii_digit() || c == b'.' || c == b','
        });
        if n == 1 && s[pos + 1] == b'.' {
            // "$." is a word
            return self.parse_word();
        }
        if n > 0 {
            self.assign(T_NUMBER, pos, n + 1);
            return pos + n + 1;
        }
        if s[pos + 1] == b'$' {
            // $$ ... $$
            let body = pos + 2;
            return match find2(&s[body..], b'$', b'$') {
                None => {
                    self.assign(T_STRING, body, slen - body);
                    let t = self.cur();
                    t.str_open = b'$';
                    t.str_close = 0;
                    slen
                }
                Some(i) => {
                    self.assign(T_STRING, body, i);
                    let t = self.cur();
                    t.str_open = b'$';
                    t.str_close = b'$';
                    body + i + 2
                }
            };
        }
        // PostgreSQL's $tag$ ... $tag$
        let n = span(&s[pos + 1..], |c| c.is_ascii_alphabetic());
        if n == 0 || pos + n + 1 == slen || s[pos + n + 1] != b'$' {
            self.assign_char(T_BAREWORD, b'$');
            return pos + 1;
        }
        let tag = &s[pos..pos + n + 2];
        let body = pos + n + 2;
        match memchr::memmem::find(&s[body..], tag) {
            None => {
                self.assign(T_STRING, body, slen - body);
                let t = self.cur();
                t.str_open = b'$';
                t.str_close = 0;
                slen
            }
            Some(i) => {
                self.assign(T_STRING, body, i);
                let t = self.cur();
                t.str_open = b'$';
                t.str_close = b'$';
                body + i + tag.len()
            }
        }
    }

    /// Numbers: `0x..`, `0b..`, decimals, exponents, Oracle's `d`/`f`
    /// suffixes; a lone `.` is a dot; `1e` is a word.
    fn parse_number(&mut self) -> usize {
        let s = self.s;
        let slen = s.len();
        let start = self.pos;
        let mut pos = start;

        if s[pos] == b'0' && pos + 1 < slen {
            let digits: Option<fn(u8) -> bool> = match s[pos + 1] {
                b'x' | b'X' => Some(|c: u8| c.is_ascii_hexdigit()),
                b'b' | b'B' => Some(|c: u8| c == b'0' || c == b'1'),
                _ => None,
            };
            if let Some(digits) = digits {
                let n = span(&s[pos + 2..], digits);
                if n == 0 {
                    self.assign(T_BAREWORD, pos, 2);
                    return pos + 2;
                }
                self.assign(T_NUMBER, pos, n + 2);
                return pos + n + 2;
            }
        }

        while pos < slen && s[pos].is_ascii_digit() {
            pos += 1;
        }
        if pos < slen && s[pos] == b'.' {
            pos += 1;
            while pos < slen && s[pos].is_ascii_digit() {
                pos += 1;
            }
            if pos - start == 1 {
                self.assign_char(T_DOT, b'.');
                return pos;
            }
        }

        let mut have_e = false;
        let mut have_exp = false;
        if pos < slen && matches!(s[pos], b'e' | b'E') {
            have_e = true;
            pos += 1;
            if pos < slen && matches!(s[pos], b'+' | b'-') {
                pos += 1;
            }
            while pos < slen && s[pos].is_ascii_digit() {
                have_exp = true;
                pos += 1;
            }
        }

        // "1.2f" at the end, before white space or ';', or before 'u'
        // ("1fUNION" is "1f UNION"); "123FROM" is "123"
        if pos < slen
            && matches!(s[pos], b'd' | b'D' | b'f' | b'F')
            && (pos + 1 == slen || matches!(s[pos + 1], b';' | b'u' | b'U') || is_white(s[pos + 1]))
        {
            pos += 1;
        }

        let kind = if have_e && !have_exp {
            T_BAREWORD
        } else {
            T_NUMBER
        };
        self.assign(kind, start, pos - start);
        pos
    }

    // ------------------------------------------------------------------
    // Folder.

    /// Tokenizes into `tokens[at]`; comments are set aside (the last one
    /// is kept in `last_comment`). Returns whether a token was read.
    fn fetch(&mut self, at: usize, last_comment: &mut Token) -> bool {
        self.current = at;
        let more = self.tokenize();
        if more {
            if self.tokens[at].kind == T_COMMENT {
                *last_comment = self.tokens[at];
            } else {
                last_comment.kind = 0;
            }
        }
        more
    }

    /// `syntax_merge_words`: two words that form a known phrase
    /// (`UNION` `ALL`, `NOT` `IN`...) become one token.
    fn merge_words(&mut self, a: usize, b: usize) -> bool {
        let (ta, tb) = (self.tokens[a], self.tokens[b]);
        let word = |k| {
            matches!(
                k,
                T_KEYWORD
                    | T_BAREWORD
                    | T_OPERATOR
                    | T_UNION
                    | T_FUNCTION
                    | T_EXPRESSION
                    | T_TSQL
                    | T_SQLTYPE
            )
        };
        if !word(ta.kind) || !(word(tb.kind) || tb.kind == T_LOGIC) {
            return false;
        }
        let (la, lb) = (usize::from(ta.len), usize::from(tb.len));
        let total = la + lb + 1;
        if total >= VAL_SIZE {
            return false;
        }
        let mut phrase = [0u8; VAL_SIZE];
        phrase[..la].copy_from_slice(ta.text());
        phrase[la] = b' ';
        phrase[la + 1..total].copy_from_slice(tb.text());
        let kind = lookup(&phrase[..total]);
        if kind == 0 {
            return false;
        }
        let t = &mut self.tokens[a];
        t.kind = kind;
        t.set_text(&phrase[..total]);
        true
    }

    /// `libinjection_sqli_fold`: returns the number of tokens (at most 5, or
    /// 6 when it stops on an evil `{` token).
    fn fold(&mut self) -> usize {
        let mut last_comment = Token::EMPTY;
        // `pos`: where the next token goes; `left`: tokens already final.
        let mut pos: usize = 0;
        let mut left: usize = 0;
        let mut more;

        // Skip leading comments, '(', SQL types and unary operators.
        self.current = 0;
        loop {
            more = self.tokenize();
            let t = &self.tokens[0];
            if !(t.kind == T_COMMENT
                || t.kind == T_LPAREN
                || t.kind == T_SQLTYPE
                || t.is_unary_op())
                || !more
            {
                break;
            }
        }
        if !more {
            return 0;
        }
        pos += 1;

        loop {
            if pos >= MAX_TOKENS && self.five_token_special_case() {
                if pos > MAX_TOKENS {
                    self.tokens[1] = self.tokens[MAX_TOKENS];
                    pos = 2;
                } else {
                    pos = 1;
                }
                left = 0;
            }

            if !more || left >= MAX_TOKENS {
                left = pos;
                break;
            }

            // Two tokens.
            while more && pos <= MAX_TOKENS && pos - left < 2 {
                more = self.fetch(pos, &mut last_comment);
                if more && self.tokens[pos].kind != T_COMMENT {
                    pos += 1;
                }
            }
            if pos - left < 2 {
                left = pos;
                continue;
            }

            let (a, b) = (self.tokens[left], self.tokens[left + 1]);
            if (a.kind == T_STRING && b.kind == T_STRING)
                || (a.kind == T_SEMICOLON && b.kind == T_SEMICOLON)
            {
                // "foo" "bar" is one string; repeated ';' are one
                pos -= 1;
                continue;
            } else if (a.kind == T_OPERATOR || a.kind == T_LOGIC)
                && (b.is_unary_op() || b.kind == T_SQLTYPE)
            {
                pos -= 1;
                left = 0;
                continue;
            } else if (a.kind == T_LPAREN && b.is_unary_op()) || self.merge_words(left, left + 1) {
                // "( -" is "(", and word pairs that form a phrase merge
                pos -= 1;
                left = left.saturating_sub(1);
                continue;
            } else if a.kind == T_SEMICOLON
                && b.kind == T_FUNCTION
                && matches!(b.byte(0), b'I' | b'i')
                && matches!(b.byte(1), b'F' | b'f')
            {
                // T-SQL's "; IF ..." statement
                self.tokens[left + 1].kind = T_TSQL;
                continue;
            } else if (a.kind == T_BAREWORD || a.kind == T_VARIABLE)
                && b.kind == T_LPAREN
                && [
                    &b"USER_ID"[..],
                    b"USER_NAME",
                    b"DATABASE",
                    b"PASSWORD",
                    b"USER",
                    b"CURRENT_USER",
                    b"CURRENT_DATE",
                    b"CURRENT_TIME",
                    b"CURRENT_TIMESTAMP",
                    b"LOCALTIME",
                    b"LOCALTIMESTAMP",
                ]
                .iter()
                .any(|w| a.is(w))
            {
                // words that are functions when followed by '('
                self.tokens[left].kind = T_FUNCTION;
                continue;
            } else if a.kind == T_KEYWORD && (a.is(b"IN") || a.is(b"NOT IN")) {
                self.tokens[left].kind = if b.kind == T_LPAREN {
                    T_OPERATOR
                } else {
                    T_BAREWORD
                };
                continue;
            } else if a.kind == T_OPERATOR && (a.is(b"LIKE") || a.is(b"NOT LIKE")) {
                if b.kind == T_LPAREN {
                    // SELECT LIKE(...
                    self.tokens[left].kind = T_FUNCTION;
                }
            } else if a.kind == T_SQLTYPE
                && matches!(
                    b.kind,
                    T_BAREWORD
                        | T_NUMBER
                        | T_SQLTYPE
                        | T_LPAREN
                        | T_FUNCTION
                        | T_VARIABLE
                        | T_STRING
                )
            {
                self.tokens[left] = b;
                pos -= 1;
                left = 0;
                continue;
            } else if a.kind == T_COLLATE && b.kind == T_BAREWORD {
                // a collation name with '_' (searched as a C string) is a type
                if b.text().iter().take_while(|&&c| c != 0).any(|&c| c == b'_') {
                    self.tokens[left + 1].kind = T_SQLTYPE;
                    left = 0;
                }
            } else if a.kind == T_BACKSLASH {
                if b.is_arithmetic_op() {
                    // T-SQL parses '\%1' as '0 % 1'
                    self.tokens[left].kind = T_NUMBER;
                } else {
                    self.tokens[left] = b;
                    pos -= 1;
                }
                left = 0;
                continue;
            } else if (a.kind == T_LPAREN && b.kind == T_LPAREN)
                || (a.kind == T_RPAREN && b.kind == T_RPAREN)
            {
                pos -= 1;
                left = 0;
                continue;
            } else if a.kind == T_LBRACE && b.kind == T_BAREWORD {
                // MySQL/ODBC "{ ``.``.id }": blacklisted outright
                if b.len == 0 {
                    self.tokens[left + 1].kind = T_EVIL;
                    return left + 2;
                }
                // "{foo expr}": drop "{ foo"
                left = 0;
                pos -= 2;
                continue;
            } else if b.kind == T_RBRACE {
                pos -= 1;
                left = 0;
                continue;
            }

            // Three tokens.
            while more && pos <= MAX_TOKENS && pos - left < 3 {
                more = self.fetch(pos, &mut last_comment);
                if more && self.tokens[pos].kind != T_COMMENT {
                    pos += 1;
                }
            }
            if pos - left < 3 {
                left = pos;
                continue;
            }

            let (a, b, c) = (
                self.tokens[left],
                self.tokens[left + 1],
                self.tokens[left + 2],
            );
            let (ak, bk, ck) = (a.kind, b.kind, c.kind);
            if (ak == T_NUMBER && bk == T_OPERATOR && ck == T_NUMBER)
                || (ak == T_OPERATOR && bk != T_LPAREN && ck == T_OPERATOR)
                || (ak == T_LOGIC && ck == T_LOGIC)
                || (ak == T_VARIABLE
                    && bk == T_OPERATOR
                    && matches!(ck, T_VARIABLE | T_NUMBER | T_BAREWORD))
                || (matches!(ak, T_BAREWORD | T_NUMBER)
                    && bk == T_OPERATOR
                    && matches!(ck, T_NUMBER | T_BAREWORD))
                || (matches!(ak, T_BAREWORD | T_NUMBER | T_VARIABLE | T_STRING)
                    && bk == T_OPERATOR
                    && b.text().split(|&c| c == 0).next() == Some(&b"::"[..])
                    && ck == T_SQLTYPE)
                || (matches!(ak, T_BAREWORD | T_NUMBER | T_STRING | T_VARIABLE)
                    && bk == T_COMMA
                    && matches!(ck, T_NUMBER | T_BAREWORD | T_STRING | T_VARIABLE))
            {
                // "1+1", "a=b", "x::int", "1,2": one operand
                pos -= 2;
                left = 0;
                continue;
            } else if matches!(ak, T_EXPRESSION | T_GROUP | T_COMMA)
                && b.is_unary_op()
                && ck == T_LPAREN
            {
                // "SELECT + (", "LIMIT + (": drop the unary operator
                self.tokens[left + 1] = c;
                pos -= 1;
                left = 0;
                continue;
            } else if matches!(ak, T_KEYWORD | T_EXPRESSION | T_GROUP)
                && b.is_unary_op()
                && matches!(
                    ck,
                    T_NUMBER | T_BAREWORD | T_VARIABLE | T_STRING | T_FUNCTION
                )
            {
                // "select - 1"
                self.tokens[left + 1] = c;
                pos -= 1;
                left = 0;
                continue;
            } else if ak == T_COMMA
                && b.is_unary_op()
                && matches!(ck, T_NUMBER | T_BAREWORD | T_VARIABLE | T_STRING)
            {
                // ", -1" is ",1", and back up to fold "1,1"
                self.tokens[left + 1] = c;
                left = 0;
                pos = pos.saturating_sub(3);
                continue;
            } else if ak == T_COMMA && b.is_unary_op() && ck == T_FUNCTION {
                // "1,-sin(1)" is "1,sin(1)"
                self.tokens[left + 1] = c;
                pos -= 1;
                left = 0;
                continue;
            } else if ak == T_BAREWORD && bk == T_DOT && ck == T_BAREWORD {
                // database.table
                pos -= 2;
                left = 0;
                continue;
            } else if ak == T_EXPRESSION && bk == T_DOT && ck == T_BAREWORD {
                // "select . `foo`" is "select `foo`"
                self.tokens[left + 1] = c;
                pos -= 1;
                left = 0;
                continue;
            } else if ak == T_FUNCTION && bk == T_LPAREN && ck != T_RPAREN && a.is(b"USER") {
                // USER() takes no argument: "user(foo)" is a word
                self.tokens[left].kind = T_BAREWORD;
            }

            left += 1;
        }

        // Put back a trailing comment if there is room.
        if left < MAX_TOKENS && last_comment.kind == T_COMMENT {
            self.tokens[left] = last_comment;
            left += 1;
        }
        left.min(MAX_TOKENS)
    }

    /// With five (or six) tokens, four shapes restart folding from the
    /// start (`1,(1)`, `n=(n)`, `1),(1`, `n)=(n`).
    fn five_token_special_case(&self) -> bool {
        let k = |i: usize| self.tokens[i].kind;
        (k(0) == T_NUMBER
            && (k(1) == T_OPERATOR || k(1) == T_COMMA)
            && k(2) == T_LPAREN
            && k(3) == T_NUMBER
            && k(4) == T_RPAREN)
            || (k(0) == T_BAREWORD
                && k(1) == T_OPERATOR
                && k(2) == T_LPAREN
                && (k(3) == T_BAREWORD || k(3) == T_NUMBER)
                && k(4) == T_RPAREN)
            || (k(0) == T_NUMBER
                && k(1) == T_RPAREN
                && k(2) == T_COMMA
                && k(3) == T_LPAREN
                && k(4) == T_NUMBER)
            || (k(0) == T_BAREWORD
                && k(1) == T_RPAREN
                && k(2) == T_OPERATOR
                && k(3) == T_LPAREN
                && k(4) == T_BAREWORD)
    }
}

/// Detects SQL injection in `input`; on a hit, returns the fingerprint.
pub(super) fn detect(input: &[u8], fingerprint: &mut [u8; FINGERPRINT_SIZE]) -> Option<usize> {
    let mut st = State::new(input);
    if !st.detect() {
        return None;
    }
    let fp = st.fingerprint();
    fingerprint[..fp.len()].copy_from_slice(fp);
    Some(fp.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(input: &[u8]) -> Option<String> {
        let mut buf = [0u8; FINGERPRINT_SIZE];
        detect(input, &mut buf).map(|n| String::from_utf8_lossy(&buf[..n]).into_owned())
    }

    #[test]
    fn classics() {
        assert_eq!(fp(b"1' or '1'='1").as_deref(), Some("s&sos"));
        assert_eq!(
            fp(b"1 UNION SELECT password FROM users--").as_deref(),
            Some("1UEnk")
        );
        assert_eq!(fp(b"' OR 1=1--").as_deref(), Some("s&1c"));
        assert_eq!(fp(b"1;DROP TABLE users").as_deref(), Some("1;Tnn"));
        assert_eq!(fp(b"/*!50000select*/"), Some("X".into()));
        assert_eq!(fp(b"hello world"), None);
        assert_eq!(fp(b""), None);
        assert_eq!(fp(b"O'Reilly"), None);
    }

    #[test]
    fn no_panic_on_edges() {
        for s in [
            &b"$"[..],
            b"$$",
            b"$a",
            b"$a$",
            b"$.",
            b"0x",
            b"0b",
            b"1e",
            b".",
            b"@",
            b"@@",
            b"@`",
            b"q'",
            b"q'(",
            b"nq'",
            b"n'",
            b"u&'",
            b"x'",
            b"b'",
            b"/*",
            b"/*!",
            b"--",
            b"-",
            b"#",
            b"\\",
            b"\\N",
            b"[",
            b"`",
            b"'",
            b"\"",
            b"<=",
            b"<=>",
            b"{",
            b"{``",
            b"\xa0",
        ] {
            let _ = fp(s);
            let mut v = s.to_vec();
            v.insert(0, b' ');
            let _ = fp(&v);
        }
    }
}
