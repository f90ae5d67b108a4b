//! libinjection's small HTML5 tokenizer (a subset of the HTML5 spec's
//! tokenization states, plus a few browser quirks), as the XSS detector uses
//! it. Tokens are ranges of the input; nothing is copied or allocated, and
//! every state scans forward, so a whole run is linear in the input.

/// What a token is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    DataText,
    TagNameOpen,
    TagNameClose,
    TagNameSelfClose,
    TagClose,
    AttrName,
    AttrValue,
    TagComment,
    Doctype,
}

/// Where tokenizing starts: in text, or inside a tag or attribute value
/// (as if the input were injected there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Start {
    Data,
    ValueNoQuote,
    ValueSingleQuote,
    ValueDoubleQuote,
    ValueBackQuote,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Eof,
    Data,
    TagOpen,
    EndTagOpen,
    TagName,
    TagNameClose,
    BeforeAttributeName,
    AttributeName,
    AfterAttributeName,
    BeforeAttributeValue,
    AttributeValueQuoted(u8),
    AttributeValueNoQuote,
    AfterAttributeValueQuoted,
    SelfClosingStartTag,
    BogusComment,
    /// `<% ... %>` (old IE and Safari).
    BogusComment2,
    MarkupDeclarationOpen,
    Comment,
    Cdata,
    Doctype,
}

/// HTML white space as libinjection sees it (NUL included: its
/// `h5_is_white` uses `strchr`, which finds the terminator).
fn is_white(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0)
}

pub(super) struct Tokenizer<'a> {
    s: &'a [u8],
    pos: usize,
    is_close: bool,
    state: State,
    /// The last token: kind and range.
    pub(super) kind: Kind,
    start: usize,
    len: usize,
}

impl<'a> Tokenizer<'a> {
    pub(super) fn new(s: &'a [u8], start: Start) -> Tokenizer<'a> {
        let state = match start {
            Start::Data => State::Data,
            Start::ValueNoQuote => State::BeforeAttributeName,
            Start::ValueSingleQuote => State::AttributeValueQuoted(b'\''),
            Start::ValueDoubleQuote => State::AttributeValueQuoted(b'"'),
            Start::ValueBackQuote => State::AttributeValueQuoted(b'`'),
        };
        Tokenizer {
            s,
            pos: 0,
            is_close: false,
            state,
            kind: Kind::DataText,
            start: 0,
            len: 0,
        }
    }

    /// The last token's bytes.
    pub(super) fn token(&self) -> &'a [u8] {
        let s: &'a [u8] = self.s;
        s.get(self.start..self.start.saturating_add(self.len))
            .unwrap_or(&[])
    }

    fn emit(&mut self, kind: Kind, start: usize, len: usize, next: State) -> bool {
        self.kind = kind;
        self.start = start;
        self.len = len;
        self.state = next;
        true
    }

    /// The first byte at or after `pos` that is not white space (its
    /// position in `self.pos`), or `None` at the end.
    ///
    /// As in libinjection, byte 0xFF also reads as the end: its
    /// `h5_skip_white` returns the byte as a signed `char` widened to `int`,
    /// which for 0xFF is -1, its end-of-input value.
    fn skip_white(&mut self) -> Option<u8> {
        while let Some(&c) = self.s.get(self.pos) {
            if !is_white(c) {
                return (c != 0xff).then_some(c);
            }
            self.pos += 1;
        }
        None
    }

    /// Moves to the next token; false at the end of the input.
    pub(super) fn next_token(&mut self) -> bool {
        let s = self.s;
        let len = s.len();
        loop {
            match self.state {
                State::Eof => return false,
                State::Data => match memchr::memchr(b'<', &s[self.pos.min(len)..]) {
                    None => {
                        let n = len.saturating_sub(self.pos);
                        self.state = State::Eof;
                        if n == 0 {
                            return false;
                        }
                        return self.emit(Kind::DataText, self.pos, n, State::Eof);
                    }
                    Some(0) => {
                        self.pos += 1;
                        self.state = State::TagOpen;
                    }
                    Some(i) => {
                        let start = self.pos;
                        self.pos += i + 1;
                        return self.emit(Kind::DataText, start, i, State::TagOpen);
                    }
                },
                State::TagOpen => {
                    let Some(&c) = s.get(self.pos) else {
                        return false;
                    };
                    match c {
                        b'!' => {
                            self.pos += 1;
                            self.state = State::MarkupDeclarationOpen;
                        }
                        b'/' => {
                            self.pos += 1;
                            self.is_close = true;
                            self.state = State::EndTagOpen;
                        }
                        b'?' => {
                            self.pos += 1;
                            self.state = State::BogusComment;
                        }
                        b'%' => {
                            self.pos += 1;
                            self.state = State::BogusComment2;
                        }
                        // NUL: an IE-ism, ignored
                        b'a'..=b'z' | b'A'..=b'Z' | 0 => self.state = State::TagName,
                        _ => {
                            if self.pos == 0 {
                                self.state = State::Data;
                            } else {
                                // "<" followed by something else: text
                                return self.emit(Kind::DataText, self.pos - 1, 1, State::Data);
                            }
                        }
                    }
                }
                State::EndTagOpen => {
                    let Some(&c) = s.get(self.pos) else {
                        return false;
                    };
                    if c == b'>' {
                        self.state = State::Data;
                    } else if c.is_ascii_alphabetic() {
                        self.state = State::TagName;
                    } else {
                        self.is_close = false;
                        self.state = State::BogusComment;
                    }
                }
                State::TagName => {
                    let start = self.pos;
                    let mut p = start;
                    while let Some(&c) = s.get(p) {
                        if c == 0 {
                            // NULs are allowed (and ignored) in tag names
                            p += 1;
                        } else if is_white(c) {
                            self.pos = p + 1;
                            return self.emit(
                                Kind::TagNameOpen,
                                start,
                                p - start,
                                State::BeforeAttributeName,
                            );
                        } else if c == b'/' {
                            self.pos = p + 1;
                            return self.emit(
                                Kind::TagNameOpen,
                                start,
                                p - start,
                                State::SelfClosingStartTag,
                            );
                        } else if c == b'>' {
                            if self.is_close {
                                self.pos = p + 1;
                                self.is_close = false;
                                return self.emit(Kind::TagClose, start, p - start, State::Data);
                            }
                            self.pos = p;
                            return self.emit(
                                Kind::TagNameOpen,
                                start,
                                p - start,
                                State::TagNameClose,
                            );
                        } else {
                            p += 1;
                        }
                    }
                    return self.emit(Kind::TagNameOpen, start, len - start, State::Eof);
                }
                State::TagNameClose => {
                    // at a '>'
                    self.is_close = false;
                    let start = self.pos;
                    self.pos += 1;
                    let next = if self.pos < len {
                        State::Data
                    } else {
                        State::Eof
                    };
                    return self.emit(Kind::TagNameClose, start, 1, next);
                }
                State::BeforeAttributeName => match self.skip_white() {
                    None => return false,
                    Some(b'/') => {
                        self.pos += 1;
                        self.state = State::SelfClosingStartTag;
                    }
                    Some(b'>') => {
                        let start = self.pos;
                        self.pos += 1;
                        return self.emit(Kind::TagNameClose, start, 1, State::Data);
                    }
                    Some(_) => self.state = State::AttributeName,
                },
                State::AttributeName => {
                    let start = self.pos;
                    let mut p = start + 1;
                    while let Some(&c) = s.get(p) {
                        let next = if is_white(c) {
                            State::AfterAttributeName
                        } else if c == b'/' {
                            State::SelfClosingStartTag
                        } else if c == b'=' {
                            State::BeforeAttributeValue
                        } else if c == b'>' {
                            self.pos = p;
                            return self.emit(
                                Kind::AttrName,
                                start,
                                p - start,
                                State::TagNameClose,
                            );
                        } else {
                            p += 1;
                            continue;
                        };
                        self.pos = p + 1;
                        return self.emit(Kind::AttrName, start, p - start, next);
                    }
                    self.pos = len;
                    return self.emit(Kind::AttrName, start, len.saturating_sub(start), State::Eof);
                }
                State::AfterAttributeName => match self.skip_white() {
                    None => return false,
                    Some(b'/') => {
                        self.pos += 1;
                        self.state = State::SelfClosingStartTag;
                    }
                    Some(b'=') => {
                        self.pos += 1;
                        self.state = State::BeforeAttributeValue;
                    }
                    Some(b'>') => self.state = State::TagNameClose,
                    Some(_) => self.state = State::AttributeName,
                },
                State::BeforeAttributeValue => match self.skip_white() {
                    None => {
                        self.state = State::Eof;
                        return false;
                    }
                    Some(q @ (b'"' | b'\'' | b'`')) => self.state = State::AttributeValueQuoted(q),
                    Some(_) => self.state = State::AttributeValueNoQuote,
                },
                State::AttributeValueQuoted(q) => {
                    // Skip the opening quote, unless the input starts in
                    // the value (then there is none).
                    if self.pos > 0 {
                        self.pos += 1;
                    }
                    let start = self.pos.min(len);
                    return match memchr::memchr(q, &s[start..]) {
                        None => self.emit(Kind::AttrValue, start, len - start, State::Eof),
                        Some(i) => {
                            self.pos = start + i + 1;
                            self.emit(Kind::AttrValue, start, i, State::AfterAttributeValueQuoted)
                        }
                    };
                }
                State::AttributeValueNoQuote => {
                    let start = self.pos;
                    let mut p = start;
                    while let Some(&c) = s.get(p) {
                        if is_white(c) {
                            self.pos = p + 1;
                            return self.emit(
                                Kind::AttrValue,
                                start,
                                p - start,
                                State::BeforeAttributeName,
                            );
                        } else if c == b'>' {
                            self.pos = p;
                            return self.emit(
                                Kind::AttrValue,
                                start,
                                p - start,
                                State::TagNameClose,
                            );
                        }
                        p += 1;
                    }
                    return self.emit(
                        Kind::AttrValue,
                        start,
                        len.saturating_sub(start),
                        State::Eof,
                    );
                }
                State::AfterAttributeValueQuoted => {
                    let Some(&c) = s.get(self.pos) else {
                        return false;
                    };
                    if is_white(c) {
                        self.pos += 1;
                        self.state = State::BeforeAttributeName;
                    } else if c == b'/' {
                        self.pos += 1;
                        self.state = State::SelfClosingStartTag;
                    } else if c == b'>' {
                        let start = self.pos;
                        self.pos += 1;
                        return self.emit(Kind::TagNameClose, start, 1, State::Data);
                    } else {
                        self.state = State::BeforeAttributeName;
                    }
                }
                State::SelfClosingStartTag => {
                    let Some(&c) = s.get(self.pos) else {
                        return false;
                    };
                    if c == b'>' {
                        // "/>", the '/' being just before
                        let start = self.pos.saturating_sub(1);
                        self.pos += 1;
                        return self.emit(Kind::TagNameSelfClose, start, 2, State::Data);
                    }
                    self.state = State::BeforeAttributeName;
                }
                State::BogusComment => {
                    let start = self.pos.min(len);
                    return match memchr::memchr(b'>', &s[start..]) {
                        None => {
                            self.pos = len;
                            self.emit(Kind::TagComment, start, len - start, State::Eof)
                        }
                        Some(i) => {
                            self.pos = start + i + 1;
                            self.emit(Kind::TagComment, start, i, State::Data)
                        }
                    };
                }
                State::BogusComment2 => {
                    // ends at "%>"
                    let start = self.pos.min(len);
                    let mut p = start;
                    loop {
                        match memchr::memchr(b'%', &s[p..]) {
                            Some(i) if p + i + 1 < len => {
                                let at = p + i;
                                if s[at + 1] != b'>' {
                                    p = at + 1;
                                    continue;
                                }
                                self.pos = at + 2;
                                return self.emit(Kind::TagComment, start, at - start, State::Data);
                            }
                            _ => {
                                self.pos = len;
                                return self.emit(Kind::TagComment, start, len - start, State::Eof);
                            }
                        }
                    }
                }
                State::MarkupDeclarationOpen => {
                    let rest = &s[self.pos.min(len)..];
                    if rest.len() >= 7 && rest[..7].eq_ignore_ascii_case(b"DOCTYPE") {
                        self.state = State::Doctype;
                    } else if rest.starts_with(b"[CDATA[") {
                        self.pos += 7;
                        self.state = State::Cdata;
                    } else if rest.starts_with(b"--") {
                        self.pos += 2;
                        self.state = State::Comment;
                    } else {
                        self.state = State::BogusComment;
                    }
                }
                State::Comment => return self.comment(),
                State::Cdata => {
                    // ends at "]]>"
                    let start = self.pos.min(len);
                    let mut p = start;
                    loop {
                        match memchr::memchr(b']', &s[p..]) {
                            Some(i) if p + i + 3 <= len => {
                                let at = p + i;
                                if s[at + 1] == b']' && s[at + 2] == b'>' {
                                    self.pos = at + 3;
                                    return self.emit(
                                        Kind::DataText,
                                        start,
                                        at - start,
                                        State::Data,
                                    );
                                }
                                p = at + 1;
                            }
                            _ => {
                                return self.emit(Kind::DataText, start, len - start, State::Eof);
                            }
                        }
                    }
                }
                State::Doctype => {
                    let start = self.pos.min(len);
                    return match memchr::memchr(b'>', &s[start..]) {
                        None => self.emit(Kind::Doctype, start, len - start, State::Eof),
                        Some(i) => {
                            self.pos = start + i + 1;
                            self.emit(Kind::Doctype, start, i, State::Data)
                        }
                    };
                }
            }
        }
    }

    /// `<!-- ... -->`: ends at `-->` or `--!>` (NULs after the first `-`
    /// ignored), or at the end of the input.
    fn comment(&mut self) -> bool {
        let s = self.s;
        let len = s.len();
        let start = self.pos.min(len);
        let mut p = start;
        loop {
            let dash = match memchr::memchr(b'-', &s[p..]) {
                Some(i) if p + i + 3 <= len => p + i,
                _ => return self.emit(Kind::TagComment, start, len - start, State::Eof),
            };
            let mut q = dash + 1;
            while q < len && s[q] == 0 {
                q += 1;
            }
            if q == len {
                return self.emit(Kind::TagComment, start, len - start, State::Eof);
            }
            if s[q] != b'-' && s[q] != b'!' {
                p = dash + 1;
                continue;
            }
            q += 1;
            if q == len {
                return self.emit(Kind::TagComment, start, len - start, State::Eof);
            }
            if s[q] != b'>' {
                p = dash + 1;
                continue;
            }
            self.pos = q + 1;
            return self.emit(Kind::TagComment, start, dash - start, State::Data);
        }
    }
}
