//! JSON request bodies, as libmodsecurity v3 parses them
//! (`src/request_body_processor/json.cc` and `json.h`, on top of yajl 2).
//!
//! # Argument names
//!
//! v3 keeps a stack of containers, each named when it opens by
//! `getCurrentKey()`: `json` for the outermost one, else the pending object
//! key (which is then consumed), else `""` inside an array or `empty-key`
//! inside an object. A scalar's name is the concatenation, for every open
//! container, of its name followed by `.` (object) or `.array_N` (array, `N`
//! the index of the element being read), then the pending key when the
//! innermost container is an object:
//!
//! | body | `ARGS` |
//! | --- | --- |
//! | `{"a":[1,2],"b":{"c":"x"}}` | `json.a.array_0=1`, `json.a.array_1=2`, `json.b.c=x` |
//! | `[1,[2,3],{"k":4}]` | `json.array_0=1`, `json.array_1.array_0=2`, `json.array_1.array_1=3`, `json.array_2.k=4` |
//! | `"s"` (a top-level scalar) | `json=s` |
//! | `{"":1}` | `json.empty-key=1` |
//! | `{}`, `[]`, `{"a":{}}` | nothing |
//!
//! Values: strings unescaped (yajl's decoder, including its handling of
//! broken surrogates), numbers verbatim as written (`1.50e+3`), `true`,
//! `false`, and `null` as the empty string. JSON arguments go to `ARGS` only
//! ([`ArgSource::Json`]).
//!
//! # Errors (`REQBODY_ERROR`)
//!
//! The grammar, the accepted UTF-8 (yajl's structural check: overlong forms
//! and encoded surrogates pass) and the messages are yajl 2's: `REQBODY_ERROR_MSG`
//! is `JSON parsing error: ` + yajl's `lexical error: ...`/`parse error: ...`
//! text, including its trailing newline. Arguments found before the error
//! stay. An empty body is not an error (v3 only reports errors for non-empty
//! bodies); whitespace only is (`premature EOF`).
//!
//! * Nesting deeper than `SecRequestBodyJsonDepthLimit` (objects and arrays
//!   count alike) cancels parsing: `parse error: client cancelled parse via
//!   callback return value` + `\n. Parsing depth limit exceeded`.
//! * `SecArgumentsLimit` reached: the next argument cancels parsing, which is
//!   an error too (unlike urlencoded data, where arguments are just skipped).
//!
//! # Why our own tokenizer
//!
//! `serde_json` builds values (allocations per node), recurses (its 128-level
//! limit is far below v3's 10000) and rejects input yajl accepts (lone
//! surrogates, overlong UTF-8). The streaming parser here is yajl's state
//! machine with an explicit stack: linear time, no recursion, no allocation
//! once the scratch buffers have grown, and argument names built in place.
//! Memory is proportional to the nesting depth (bounded by the depth limit).

use std::io::Write;

use super::output::{ArgLimit, ArgSource, BodyResult, BodySink};

const ERR_PREFIX: &str = "JSON parsing error: ";
const DEPTH_SUFFIX: &str = ". Parsing depth limit exceeded";

#[derive(Clone, Copy, Debug)]
struct Frame {
    array: bool,
    /// Where this container's segment starts in `Scratch::path`.
    seg_start: usize,
    /// Length of its name (the start of the `.array_N` / `.` suffix).
    name_len: usize,
    /// Next element index (arrays).
    counter: u64,
}

/// yajl's parser states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Start,
    ParseComplete,
    MapStart,
    MapSep,
    MapNeedVal,
    MapGotVal,
    MapNeedKey,
    ArrayStart,
    ArrayGotVal,
    ArrayNeedVal,
}

/// Reusable buffers of the JSON processor.
#[derive(Debug, Default)]
pub struct Scratch {
    /// The rendered names of the open containers.
    path: Vec<u8>,
    frames: Vec<Frame>,
    states: Vec<State>,
    /// The pending object key (decoded).
    key: Vec<u8>,
    /// A decoded string value.
    value: Vec<u8>,
}

/// A token (yajl_tok); strings and numbers as ranges of the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok {
    Eof,
    LBrace,
    RBrace,
    LBracket,
    RBracket,
    Colon,
    Comma,
    Str {
        start: usize,
        end: usize,
        escapes: bool,
    },
    Num {
        start: usize,
        end: usize,
    },
    True,
    False,
    Null,
}

/// yajl's lexical errors, with its messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LexErr {
    InvalidUtf8,
    InvalidEscapedChar,
    InvalidJsonChar,
    InvalidHexChar,
    InvalidChar,
    InvalidString,
    MissingExponent,
    MissingDecimal,
    MissingAfterMinus,
    Comment,
}

impl LexErr {
    fn text(self) -> &'static str {
        match self {
            LexErr::InvalidUtf8 => "invalid bytes in UTF8 string.",
            LexErr::InvalidEscapedChar => {
                "inside a string, '\\' occurs before a character which it may not."
            }
            LexErr::InvalidJsonChar => "invalid character inside string.",
            LexErr::InvalidHexChar => {
                "invalid (non-hex) character occurs after '\\u' inside string."
            }
            LexErr::InvalidChar => "invalid char in json text.",
            LexErr::InvalidString => "invalid string in json text.",
            LexErr::MissingExponent => "malformed number, a digit is required after the exponent.",
            LexErr::MissingDecimal => {
                "malformed number, a digit is required after the decimal point."
            }
            LexErr::MissingAfterMinus => {
                "malformed number, a digit is required after the minus sign."
            }
            LexErr::Comment => "probable comment found in input text, comments are not enabled.",
        }
    }
}

/// Why parsing stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    Lexical(LexErr),
    Parse(&'static str),
    /// A callback cancelled (argument limit); `depth` when the depth limit
    /// was the reason.
    Cancelled {
        depth: bool,
    },
}

const CANCELLED: &str = "client cancelled parse via callback return value";

/// The lexer, over the body followed by the single space yajl's
/// `yajl_complete_parse` feeds to finish the last token.
struct Lexer<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Lexer<'_> {
    /// The byte at `i`: the body, then one virtual space, then nothing.
    fn at(&self, i: usize) -> Option<u8> {
        match i.cmp(&self.b.len()) {
            std::cmp::Ordering::Less => Some(self.b[i]),
            std::cmp::Ordering::Equal => Some(b' '),
            std::cmp::Ordering::Greater => None,
        }
    }

    fn next(&mut self) -> Result<Tok, LexErr> {
        loop {
            let Some(c) = self.at(self.pos) else {
                return Ok(Tok::Eof);
            };
            self.pos += 1;
            return Ok(match c {
                b'{' => Tok::LBrace,
                b'}' => Tok::RBrace,
                b'[' => Tok::LBracket,
                b']' => Tok::RBracket,
                b',' => Tok::Comma,
                b':' => Tok::Colon,
                b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r' | b' ' => continue,
                b't' => self.literal(b"rue", Tok::True)?,
                b'f' => self.literal(b"alse", Tok::False)?,
                b'n' => self.literal(b"ull", Tok::Null)?,
                b'"' => match self.string()? {
                    Some(t) => t,
                    None => Tok::Eof,
                },
                b'-' | b'0'..=b'9' => {
                    self.pos -= 1;
                    self.number()?
                }
                b'/' => {
                    self.pos -= 1;
                    return Err(LexErr::Comment);
                }
                _ => return Err(LexErr::InvalidChar),
            });
        }
    }

    fn literal(&mut self, rest: &[u8], tok: Tok) -> Result<Tok, LexErr> {
        for &want in rest {
            match self.at(self.pos) {
                None => return Ok(Tok::Eof),
                Some(c) if c == want => self.pos += 1,
                Some(_) => return Err(LexErr::InvalidString),
            }
        }
        Ok(tok)
    }

    /// After the opening quote. `None`: the input ended inside the string.
    fn string(&mut self) -> Result<Option<Tok>, LexErr> {
        let start = self.pos;
        let mut escapes = false;
        loop {
            let Some(c) = self.at(self.pos) else {
                return Ok(None);
            };
            self.pos += 1;
            match c {
                b'"' => {
                    return Ok(Some(Tok::Str {
                        start,
                        end: self.pos - 1,
                        escapes,
                    }))
                }
                b'\\' => {
                    escapes = true;
                    let Some(e) = self.at(self.pos) else {
                        return Ok(None);
                    };
                    self.pos += 1;
                    if e == b'u' {
                        for _ in 0..4 {
                            let Some(h) = self.at(self.pos) else {
                                return Ok(None);
                            };
                            if !h.is_ascii_hexdigit() {
                                return Err(LexErr::InvalidHexChar);
                            }
                            self.pos += 1;
                        }
                    } else if !matches!(e, b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') {
                        self.pos -= 1;
                        return Err(LexErr::InvalidEscapedChar);
                    }
                }
                0x00..=0x1f => {
                    self.pos -= 1;
                    return Err(LexErr::InvalidJsonChar);
                }
                0x80..=0xff => {
                    // yajl_lex_utf8_char: lead byte, then continuation bytes.
                    let more = match c {
                        0xc0..=0xdf => 1,
                        0xe0..=0xef => 2,
                        0xf0..=0xf7 => 3,
                        _ => return Err(LexErr::InvalidUtf8),
                    };
                    for _ in 0..more {
                        let Some(n) = self.at(self.pos) else {
                            return Ok(None);
                        };
                        self.pos += 1;
                        if n >> 6 != 0b10 {
                            return Err(LexErr::InvalidUtf8);
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn number(&mut self) -> Result<Tok, LexErr> {
        let start = self.pos;
        let digit = |c: Option<u8>| c.is_some_and(|c| c.is_ascii_digit());
        let mut c = self.at(self.pos);
        self.pos += 1;
        if c == Some(b'-') {
            c = self.at(self.pos);
            self.pos += 1;
        }
        if c == Some(b'0') {
            c = self.at(self.pos);
            self.pos += 1;
        } else if digit(c) {
            loop {
                c = self.at(self.pos);
                self.pos += 1;
                if !digit(c) {
                    break;
                }
            }
        } else {
            self.pos -= 1;
            return Err(LexErr::MissingAfterMinus);
        }
        if c == Some(b'.') {
            let mut read = 0;
            loop {
                c = self.at(self.pos);
                self.pos += 1;
                if !digit(c) {
                    break;
                }
                read += 1;
            }
            if read == 0 {
                self.pos -= 1;
                return Err(LexErr::MissingDecimal);
            }
        }
        if matches!(c, Some(b'e' | b'E')) {
            c = self.at(self.pos);
            self.pos += 1;
            if matches!(c, Some(b'+' | b'-')) {
                c = self.at(self.pos);
                self.pos += 1;
            }
            if digit(c) {
                loop {
                    c = self.at(self.pos);
                    self.pos += 1;
                    if !digit(c) {
                        break;
                    }
                }
            } else {
                self.pos -= 1;
                return Err(LexErr::MissingExponent);
            }
        }
        // One byte too far, as yajl.
        self.pos -= 1;
        Ok(Tok::Num {
            start,
            end: self.pos.min(self.b.len()),
        })
    }
}

/// Parses a JSON body; arguments go to `sink`, errors to `out`.
pub fn parse<S: BodySink + ?Sized>(
    body: &[u8],
    depth_limit: u64,
    args: &mut ArgLimit,
    scratch: &mut Scratch,
    sink: &mut S,
    out: &mut BodyResult,
) {
    scratch.path.clear();
    scratch.frames.clear();
    scratch.states.clear();
    scratch.key.clear();
    scratch.value.clear();
    if body.is_empty() {
        return;
    }
    let mut p = Parser {
        body,
        depth_limit,
        args,
        sc: scratch,
        sink,
        skipped: 0,
    };
    let result = p.run();
    out.args_skipped += p.skipped;
    if let Err(stop) = result {
        let msg = &mut out.error_detail;
        msg.clear();
        match stop {
            Stop::Lexical(e) => {
                msg.push_str("lexical error: ");
                msg.push_str(e.text());
                msg.push('\n');
            }
            Stop::Parse(text) => {
                msg.push_str("parse error: ");
                msg.push_str(text);
                msg.push('\n');
            }
            Stop::Cancelled { depth } => {
                msg.push_str("parse error: ");
                msg.push_str(CANCELLED);
                msg.push('\n');
                if depth {
                    msg.push_str(DEPTH_SUFFIX);
                }
            }
        }
        out.reqbody_error = true;
        out.reqbody_error_msg.clear();
        out.reqbody_error_msg
            .extend_from_slice(ERR_PREFIX.as_bytes());
        out.reqbody_error_msg
            .extend_from_slice(out.error_detail.as_bytes());
    }
}

struct Parser<'a, 'b, S: ?Sized> {
    body: &'a [u8],
    depth_limit: u64,
    args: &'b mut ArgLimit,
    sc: &'b mut Scratch,
    sink: &'b mut S,
    skipped: usize,
}

/// What `getCurrentKey()` returns.
enum CurrentKey {
    Json,
    Empty,
    EmptyKey,
    Key,
}

impl<S: BodySink + ?Sized> Parser<'_, '_, S> {
    fn run(&mut self) -> Result<(), Stop> {
        let mut lx = Lexer {
            b: self.body,
            pos: 0,
        };
        self.sc.states.push(State::Start);
        loop {
            let Some(&state) = self.sc.states.last() else {
                return Err(Stop::Parse("premature EOF"));
            };
            match state {
                State::ParseComplete => {
                    return match lx.next() {
                        Ok(Tok::Eof) => Ok(()),
                        _ => Err(Stop::Parse("trailing garbage")),
                    };
                }
                State::Start | State::MapNeedVal | State::ArrayNeedVal | State::ArrayStart => {
                    let tok = lx.next().map_err(Stop::Lexical)?;
                    let mut push = None;
                    match tok {
                        Tok::Eof => break,
                        Tok::Str {
                            start,
                            end,
                            escapes,
                        } => {
                            let raw = &self.body[start..end];
                            if escapes {
                                decode_string(raw, &mut self.sc.value);
                                let v = std::mem::take(&mut self.sc.value);
                                let r = self.add_argument(&v);
                                self.sc.value = v;
                                r?;
                            } else {
                                self.add_argument(raw)?;
                            }
                        }
                        Tok::Num { start, end } => {
                            let raw = &self.body[start..end];
                            self.add_argument(raw)?;
                        }
                        Tok::True => self.add_argument(b"true")?,
                        Tok::False => self.add_argument(b"false")?,
                        Tok::Null => self.add_argument(b"")?,
                        Tok::LBrace => {
                            self.start_container(false)?;
                            push = Some(State::MapStart);
                        }
                        Tok::LBracket => {
                            self.start_container(true)?;
                            push = Some(State::ArrayStart);
                        }
                        Tok::RBracket if state == State::ArrayStart => {
                            self.end_container();
                            self.sc.states.pop();
                            continue;
                        }
                        Tok::RBracket | Tok::RBrace | Tok::Colon | Tok::Comma => {
                            return Err(Stop::Parse("unallowed token at this point in JSON text"));
                        }
                    }
                    let next = match state {
                        State::Start => State::ParseComplete,
                        State::MapNeedVal => State::MapGotVal,
                        _ => State::ArrayGotVal,
                    };
                    self.set_state(next);
                    if let Some(s) = push {
                        self.sc.states.push(s);
                    }
                }
                State::MapStart | State::MapNeedKey => match lx.next().map_err(Stop::Lexical)? {
                    Tok::Eof => break,
                    Tok::Str {
                        start,
                        end,
                        escapes,
                    } => {
                        let raw = &self.body[start..end];
                        if escapes {
                            decode_string(raw, &mut self.sc.key);
                        } else {
                            self.sc.key.clear();
                            self.sc.key.extend_from_slice(raw);
                        }
                        self.set_state(State::MapSep);
                    }
                    Tok::RBrace if state == State::MapStart => {
                        self.end_container();
                        self.sc.states.pop();
                    }
                    _ => return Err(Stop::Parse("invalid object key (must be a string)")),
                },
                State::MapSep => match lx.next().map_err(Stop::Lexical)? {
                    Tok::Eof => break,
                    Tok::Colon => self.set_state(State::MapNeedVal),
                    _ => {
                        return Err(Stop::Parse(
                            "object key and value must be separated by a colon (':')",
                        ))
                    }
                },
                State::MapGotVal => match lx.next().map_err(Stop::Lexical)? {
                    Tok::Eof => break,
                    Tok::RBrace => {
                        self.end_container();
                        self.sc.states.pop();
                    }
                    Tok::Comma => self.set_state(State::MapNeedKey),
                    _ => {
                        return Err(Stop::Parse(
                            "after key and value, inside map, I expect ',' or '}'",
                        ))
                    }
                },
                State::ArrayGotVal => match lx.next().map_err(Stop::Lexical)? {
                    Tok::Eof => break,
                    Tok::RBracket => {
                        self.end_container();
                        self.sc.states.pop();
                    }
                    Tok::Comma => self.set_state(State::ArrayNeedVal),
                    _ => return Err(Stop::Parse("after array element, I expect ',' or ']'")),
                },
            }
        }
        // The input ended: complete only after a whole top-level value.
        if self.sc.states.last() == Some(&State::ParseComplete) {
            Ok(())
        } else {
            Err(Stop::Parse("premature EOF"))
        }
    }

    fn set_state(&mut self, s: State) {
        if let Some(top) = self.sc.states.last_mut() {
            *top = s;
        }
    }

    /// v3 `getCurrentKey()`: which name the next container or value gets.
    fn current_key(&mut self) -> CurrentKey {
        match self.sc.frames.last() {
            None => CurrentKey::Json,
            Some(f) if self.sc.key.is_empty() => {
                if f.array {
                    CurrentKey::Empty
                } else {
                    CurrentKey::EmptyKey
                }
            }
            Some(_) => CurrentKey::Key,
        }
    }

    /// Appends the name `current_key()` chose to the path, consuming a key.
    fn push_key(&mut self, k: CurrentKey) {
        let sc = &mut *self.sc;
        match k {
            CurrentKey::Json => sc.path.extend_from_slice(b"json"),
            CurrentKey::Empty => {}
            CurrentKey::EmptyKey => sc.path.extend_from_slice(b"empty-key"),
            CurrentKey::Key => {
                sc.path.extend_from_slice(&sc.key);
                sc.key.clear();
            }
        }
    }

    fn start_container(&mut self, array: bool) -> Result<(), Stop> {
        let k = self.current_key();
        let seg_start = self.sc.path.len();
        self.push_key(k);
        let name_len = self.sc.path.len() - seg_start;
        self.sc.frames.push(Frame {
            array,
            seg_start,
            name_len,
            counter: 0,
        });
        self.render_suffix();
        if self.sc.frames.len() as u64 > self.depth_limit {
            return Err(Stop::Cancelled { depth: true });
        }
        Ok(())
    }

    fn end_container(&mut self) {
        if let Some(f) = self.sc.frames.pop() {
            self.sc.path.truncate(f.seg_start);
        }
        self.bump_array();
    }

    /// The innermost container, if an array, moves to its next element.
    fn bump_array(&mut self) {
        if let Some(f) = self.sc.frames.last_mut() {
            if f.array {
                f.counter += 1;
                self.render_suffix();
            }
        }
    }

    /// Rewrites the innermost container's suffix (`.` or `.array_N`).
    fn render_suffix(&mut self) {
        let sc = &mut *self.sc;
        if let Some(f) = sc.frames.last() {
            sc.path.truncate(f.seg_start + f.name_len);
            if f.array {
                // Writing to a Vec cannot fail.
                let _ = write!(sc.path, ".array_{}", f.counter);
            } else {
                sc.path.push(b'.');
            }
        }
    }

    /// v3 `JSON::addArgument`.
    fn add_argument(&mut self, value: &[u8]) -> Result<(), Stop> {
        let base = self.sc.path.len();
        let in_array = self.sc.frames.last().is_some_and(|f| f.array);
        if !in_array {
            let k = self.current_key();
            self.push_key(k);
        }
        let admitted = self.args.admit();
        if admitted {
            self.sink.arg(ArgSource::Json, &self.sc.path, value);
        } else {
            self.skipped += 1;
        }
        self.sc.path.truncate(base);
        if in_array {
            self.bump_array();
        }
        if admitted {
            Ok(())
        } else {
            Err(Stop::Cancelled { depth: false })
        }
    }
}

/// yajl's `yajl_string_decode`, byte for byte (including its handling of a
/// high surrogate not followed by `\u`: `?`, and the next byte is dropped).
fn decode_string(s: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let at = |i: usize| s.get(i).copied().unwrap_or(b'"');
    let hex4 = |i: usize| -> u32 {
        (0..4).fold(0u32, |acc, k| {
            let d = (at(i + k) as char).to_digit(16).unwrap_or(0);
            (acc << 4) | d
        })
    };
    let mut beg = 0;
    let mut end = 0;
    while end < s.len() {
        if s[end] != b'\\' {
            end += 1;
            continue;
        }
        out.extend_from_slice(&s[beg..end]);
        end += 1;
        match at(end) {
            b'r' => out.push(b'\r'),
            b'n' => out.push(b'\n'),
            b'\\' => out.push(b'\\'),
            b'/' => out.push(b'/'),
            b'"' => out.push(b'"'),
            b'f' => out.push(b'\x0c'),
            b'b' => out.push(b'\x08'),
            b't' => out.push(b'\t'),
            b'u' => {
                let mut cp = hex4(end + 1);
                end += 4;
                let mut lone = false;
                if cp & 0xFC00 == 0xD800 {
                    end += 1;
                    if at(end) == b'\\' && at(end + 1) == b'u' {
                        let low = hex4(end + 2);
                        cp = ((cp & 0x3F) << 10) | ((((cp >> 6) & 0xF) + 1) << 16) | (low & 0x3FF);
                        end += 5;
                    } else {
                        lone = true;
                    }
                }
                if lone {
                    out.push(b'?');
                } else if cp == 0 {
                    out.push(0);
                } else {
                    push_utf8(cp, out);
                }
            }
            // The lexer admits no other escape.
            _ => out.push(b'?'),
        }
        end += 1;
        beg = end;
    }
    if beg < s.len() {
        out.extend_from_slice(&s[beg..]);
    }
}

/// yajl's `Utf32toUtf8` (no validity checks; beyond 0x1FFFFF: `?`).
fn push_utf8(cp: u32, out: &mut Vec<u8>) {
    if cp < 0x80 {
        out.push(cp as u8);
    } else if cp < 0x800 {
        out.push(0xC0 | (cp >> 6) as u8);
        out.push(0x80 | (cp & 0x3F) as u8);
    } else if cp < 0x10000 {
        out.push(0xE0 | (cp >> 12) as u8);
        out.push(0x80 | ((cp >> 6) & 0x3F) as u8);
        out.push(0x80 | (cp & 0x3F) as u8);
    } else if cp < 0x200000 {
        out.push(0xF0 | (cp >> 18) as u8);
        out.push(0x80 | ((cp >> 12) & 0x3F) as u8);
        out.push(0x80 | ((cp >> 6) & 0x3F) as u8);
        out.push(0x80 | (cp & 0x3F) as u8);
    } else {
        out.push(b'?');
    }
}

#[cfg(test)]
mod tests;
