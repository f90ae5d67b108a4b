//! `multipart/form-data` bodies, following libmodsecurity v3's
//! `src/request_body_processor/multipart.cc` (v3/master) state machine.
//!
//! # How v3 reads a multipart body (and so do we)
//!
//! * **Boundary** (`Multipart::init`, from `Content-Type`): the header must
//!   be at most 1024 bytes and start with `multipart/form-data`
//!   (case-insensitive); the word `boundary` (any case) followed somewhere by
//!   `=` may occur once. Between the media type and `boundary` only
//!   whitespace and one `;` may appear (no `;`: `MULTIPART_MISSING_SEMICOLON`);
//!   whitespace between `boundary` and `=` or after `=` sets
//!   `MULTIPART_BOUNDARY_WHITESPACE`; a value in double quotes sets
//!   `MULTIPART_BOUNDARY_QUOTED`; one quote only is an error, as are a value
//!   containing the word `boundary`, characters outside RFC 2046's set (a
//!   trailing `; param` after the value is tolerated and cut off) and an empty
//!   value. An empty value, quoted or not, makes v3 skip the body *silently*
//!   (no error, no flag) and so do we.
//! * **Lines**: the body is cut into lines of at most 4096 bytes
//!   (`MULTIPART_BUF_SIZE`); a longer line is processed in 4096-byte pieces
//!   (a `\r` never ends a piece), and only a piece that starts a line can be a
//!   boundary. `--BOUNDARY` + `\r\n` or `\n` starts a part, `--BOUNDARY--` +
//!   line ending ends the body; a final boundary without line ending at the
//!   very end of the body is accepted; `--BOUNDARY` followed by anything else
//!   is a fatal error. Any other line starting with `--` (or containing
//!   `--BOUNDARY`) sets `MULTIPART_UNMATCHED_BOUNDARY` to 1; every
//!   later real boundary sets it to 2 (v3's "opened and closed" marker, which
//!   its recommended rule `@eq 1` tolerates).
//! * **Part headers** until an empty line: `Name: value` (name bytes 33..=126,
//!   duplicates ignored), folding (a line starting with whitespace continues
//!   the previous header, `MULTIPART_HEADER_FOLDING`; other than space/tab:
//!   `MULTIPART_INVALID_HEADER_FOLDING`). Each line (folded ones rebuilt as
//!   `Name: value continued`) becomes a `MULTIPART_PART_HEADERS` entry keyed
//!   by the part's name. `Content-Disposition` must be `form-data` with
//!   `name=` and optional `filename=`/`filename*=` parameters (v3's quoting
//!   rules: `"` or `'` quotes, `\` escapes only the quote and `\`, a `'`
//!   quote or a `'` inside a value sets `MULTIPART_INVALID_QUOTING`).
//! * **Part data** until the next boundary line; the line ending before the
//!   boundary belongs to the boundary. A part with a non-empty `filename` is
//!   a file (`FILES`, `FILES_NAMES`, `FILES_SIZES`, `FILES_COMBINED_SIZE`),
//!   any other part an argument (`ARGS`, `ARGS_POST`). A boundary met before
//!   any data line of the current part is *not* a boundary: it sets
//!   `MULTIPART_INVALID_PART` and is read as a header or data line.
//! * **Line endings**: a bare `\n` ending a header or boundary line (or the
//!   line before a boundary) sets `MULTIPART_LF_LINE`; `MULTIPART_CRLF_LF_LINES`
//!   is set when both kinds were seen.
//! * **Errors**: v3 keeps *one* error message, the last one assigned, and any
//!   message means `REQBODY_ERROR` = 1. Errors in a part header do *not* stop
//!   parsing (v3 ignores their return value): the bad line is skipped and the
//!   part stays in its header section, so what follows is read as headers.
//!   Errors in boundary lines and over-long header lines stop parsing; v3 then
//!   always replaces the message by `Multipart: Final boundary missing.` (or
//!   `No boundaries found in payload.`) at completion, and so do we (the
//!   original message is kept in [`BodyResult::error_detail`]). When the final
//!   boundary is missing, no argument and no file is reported at all (v3
//!   returns before filling `ARGS`/`FILES`); `MULTIPART_PART_HEADERS` of the
//!   parts completed so far are reported.
//! * `MULTIPART_STRICT_ERROR` is, as in v3, the OR of: a processing error
//!   (any failure of the C-T checks or a fatal line error), `BOUNDARY_QUOTED`,
//!   `BOUNDARY_WHITESPACE`, `DATA_BEFORE`, `DATA_AFTER`, `HEADER_FOLDING`,
//!   `LF_LINE`, `MISSING_SEMICOLON`, `INVALID_QUOTING`, `INVALID_PART`,
//!   `INVALID_HEADER_FOLDING`, `FILE_LIMIT_EXCEEDED`. Not included:
//!   `UNMATCHED_BOUNDARY`, `CRLF_LF_LINES`, and errors in part headers (so a
//!   part header with an invalid character gives `REQBODY_ERROR` but not
//!   `MULTIPART_STRICT_ERROR`, exactly as v3).
//!
//! # Deviations from v3 (deliberate)
//!
//! * Multi-line form values keep their line breaks by default (v3 drops them
//!   through an assign-instead-of-append slip); see
//!   [`MultipartLineBreaks`] to get v3's bytes.
//! * A quoted `Content-Disposition` parameter without closing quote ends at
//!   the end of the header (v3 reads past the end of its string there, which
//!   is undefined behaviour).
//! * `SecUploadFileLimit` is only checked when configured (v3 checks it only
//!   when it stores files); files are never written anywhere.
//!
//! # Limits and cost
//!
//! Time is linear in the body: each byte is looked at a constant number of
//! times (boundary search with a prebuilt `memmem` finder, header lookups in
//! a hash index, folded headers appended in place). Memory is linear in the
//! body (part names and values are slices of the body or copies into reused
//! arenas) and nothing is allocated once the scratch buffers have grown. The
//! only size limits are v3's: a `Content-Type` of at most 1024 bytes, header
//! lines shorter than 4096 bytes, folded header values of at most 4096 bytes.
//! The number of parts and of headers per part is bounded by the body size
//! only (`SecRequestBodyLimit` upstream).

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::io::Write;

pub use super::output::MultipartFlags;
use super::output::{ArgLimit, ArgSource, BodyResult, BodySink, FileInfo};
use crate::transform::is_c_space as c_isspace;

/// v3's `MULTIPART_BUF_SIZE`: the longest line piece processed at once.
pub const BUF_SIZE: usize = 4096;
/// Longest `Content-Type` v3 accepts for a multipart body.
pub const MAX_CONTENT_TYPE_LEN: usize = 1024;

const ERR_PREFIX: &str = "Multipart parsing error: ";
const MIME_CHARSET_SPECIAL: &[u8] = b"!#$%&+-^_`{}~";
const ATTR_CHAR_SPECIAL: &[u8] = b"!#$&+-.^_`~";
const NONE: u32 = u32::MAX;

/// How the line breaks inside a multi-line multipart *form* value are kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MultipartLineBreaks {
    /// Keep them (`a\r\nb` stays `a\r\nb`), as ModSecurity v2 does and as v3
    /// evidently intends. The default: a WAF should see what the backend sees.
    #[default]
    Keep,
    /// Byte-exact v3: `Multipart::process_part_data` assigns (instead of
    /// appending) the held-back line ending, so every line break inside a
    /// form value is dropped (`a\r\nb` becomes `ab`). File sizes are not
    /// affected.
    DropLikeV3,
}

/// Multipart-specific settings (see [`BodyConfig`](super::BodyConfig)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MultipartConfig {
    pub line_breaks: MultipartLineBreaks,
    pub upload_file_limit: Option<usize>,
}

/// A range into one of the buffers; `of` never panics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Span {
    start: usize,
    end: usize,
}

impl Span {
    fn of(self, buf: &[u8]) -> &[u8] {
        buf.get(self.start..self.end).unwrap_or(&[])
    }
    fn is_empty(self) -> bool {
        self.end <= self.start
    }
    fn len(self) -> usize {
        self.end.saturating_sub(self.start)
    }
}

#[derive(Clone, Copy, Debug)]
struct HeaderRec {
    name: Span,
    value: Span,
    /// Next header with the same name hash.
    next: u32,
}

/// A `MULTIPART_PART_HEADERS` line waiting for its part's end.
#[derive(Clone, Copy, Debug)]
enum HeaderLine {
    /// The line as sent (a span of the body).
    Raw(Span),
    /// A folded header: `name: ` + the first `value_len` bytes of its value.
    Folded { header: u32, value_len: usize },
}

#[derive(Clone, Copy, Debug)]
enum ValueLoc {
    Body(Span),
    Joined(Span),
}

/// A completed part with a name.
#[derive(Clone, Copy, Debug)]
struct PartRec {
    file: bool,
    name: Span,
    filename: Span,
    value: ValueLoc,
}

/// The part being read.
#[derive(Clone, Copy, Debug)]
struct Part {
    file: bool,
    name: Span,
    filename: Span,
    last_header: Option<u32>,
    last_line: Option<HeaderLine>,
    /// The data read so far, a contiguous span of the body.
    data: Option<Span>,
    /// `MultipartLineBreaks::DropLikeV3`: the value in `Scratch::values`.
    joined: Span,
    /// A (virtual) temporary file was created (file-limit emulation).
    file_started: bool,
}

impl Part {
    fn new(values_len: usize) -> Self {
        Part {
            file: false,
            name: Span::default(),
            filename: Span::default(),
            last_header: None,
            last_line: None,
            data: None,
            joined: Span {
                start: values_len,
                end: values_len,
            },
            file_started: false,
        }
    }
}

/// Reusable buffers of the multipart processor.
#[derive(Debug, Default)]
pub struct Scratch {
    /// Part names and filenames (all parts of the request).
    names: Vec<u8>,
    parts: Vec<PartRec>,
    /// Form values in `DropLikeV3` mode.
    values: Vec<u8>,
    /// The current part's header names and values.
    hdr: Vec<u8>,
    headers: Vec<HeaderRec>,
    index: HashMap<u64, u32>,
    lines: Vec<HeaderLine>,
    line_buf: Vec<u8>,
    /// v3's error string (without the "Multipart parsing error: " prefix).
    err: Vec<u8>,
    hasher: RandomState,
}

impl Scratch {
    fn reset(&mut self) {
        self.names.clear();
        self.parts.clear();
        self.values.clear();
        self.clear_part();
        self.line_buf.clear();
        self.err.clear();
    }

    fn clear_part(&mut self) {
        self.hdr.clear();
        self.headers.clear();
        self.index.clear();
        self.lines.clear();
    }

    fn hash_name(&self, name: &[u8]) -> u64 {
        let mut h = self.hasher.build_hasher();
        let mut buf = [0u8; 64];
        for chunk in name.chunks(buf.len()) {
            let lower = &mut buf[..chunk.len()];
            lower.copy_from_slice(chunk);
            lower.make_ascii_lowercase();
            h.write(lower);
        }
        h.write_usize(name.len());
        h.finish()
    }

    /// Case-insensitive header lookup (v3's `MyEqual`).
    fn find_header(&self, name: &[u8]) -> Option<u32> {
        let mut cur = self
            .index
            .get(&self.hash_name(name))
            .copied()
            .unwrap_or(NONE);
        while let Some(h) = self.headers.get(cur as usize) {
            if h.name.of(&self.hdr).eq_ignore_ascii_case(name) {
                return Some(cur);
            }
            cur = h.next;
        }
        None
    }

    fn insert_header(&mut self, name: &[u8], value: &[u8]) -> u32 {
        let hash = self.hash_name(name);
        let n = Span {
            start: self.hdr.len(),
            end: self.hdr.len() + name.len(),
        };
        self.hdr.extend_from_slice(name);
        let v = Span {
            start: self.hdr.len(),
            end: self.hdr.len() + value.len(),
        };
        self.hdr.extend_from_slice(value);
        let idx = u32::try_from(self.headers.len()).unwrap_or(NONE - 1);
        let next = self.index.insert(hash, idx).unwrap_or(NONE);
        self.headers.push(HeaderRec {
            name: n,
            value: v,
            next,
        });
        idx
    }

    fn set_err(&mut self, msg: &[u8], quoted: &[u8]) {
        self.err.clear();
        self.err.extend_from_slice(msg);
        self.err.extend_from_slice(quoted);
    }
}

/// Parses a multipart body. `content_type` is the request's `Content-Type`
/// value (the caller skips the processor when the header is absent, as v3
/// does). Results go to `sink` and `out` (`out` is not cleared here).
pub fn parse<S: BodySink + ?Sized>(
    body: &[u8],
    content_type: &[u8],
    cfg: &MultipartConfig,
    args: &mut ArgLimit,
    scratch: &mut Scratch,
    sink: &mut S,
    out: &mut BodyResult,
) {
    scratch.reset();
    let mut flags = MultipartFlags::default();
    match init(content_type, &mut flags) {
        Ok(boundary) => {
            // v3 `process()` returns at once for an empty body, and
            // `multipart_complete` then has nothing to check.
            if !body.is_empty() {
                let mut m = Machine::new(body, boundary, cfg, scratch, sink, &mut flags, out);
                m.run();
                let complete = m.finish();
                if complete {
                    emit_parts(body, scratch, sink, args, out);
                }
            }
        }
        Err(Some(msg)) => {
            flags.error = true;
            scratch.set_err(msg.as_bytes(), b"");
        }
        Err(None) => {}
    }
    if !scratch.err.is_empty() {
        out.set_error(ERR_PREFIX, &scratch.err);
    }
    out.multipart = Some(flags);
}

/// v3 `Multipart::init`: the boundary, or the error message (`None`: v3
/// gives up silently). Sets the C-T flags; the caller sets `error`.
fn init<'a>(ct: &'a [u8], flags: &mut MultipartFlags) -> Result<&'a [u8], Option<&'static str>> {
    if ct.is_empty() {
        return Err(Some("Multipart: Content-Type header not available."));
    }
    if ct.len() > MAX_CONTENT_TYPE_LEN {
        return Err(Some("Multipart: Invalid boundary in C-T (length)."));
    }
    // From here on v3 works on the C string.
    let h = cstr(ct);
    if h.len() < 19 || !h[..19].eq_ignore_ascii_case(b"multipart/form-data") {
        return Err(Some("Multipart: Invalid MIME type."));
    }
    if count_boundary_params(h) > 1 {
        return Err(Some("Multipart: Multiple boundary parameters in C-T."));
    }
    let Some(bpos) = memchr::memmem::find(h, b"boundary") else {
        return if count_boundary_params(h) > 0 {
            Err(Some(
                "Multipart: Invalid boundary in C-T (case sensitivity).",
            ))
        } else {
            Err(Some("Multipart: Boundary not found in C-T."))
        };
    };
    let mut seen_semicolon = false;
    for &b in h.get(19..bpos).unwrap_or(&[]) {
        if !c_isspace(b) {
            if !seen_semicolon && b == b';' {
                seen_semicolon = true;
            } else {
                return Err(Some("Multipart: Invalid boundary in C-T (malformed)."));
            }
        }
    }
    if !seen_semicolon {
        flags.missing_semicolon = true;
    }
    let after = bpos + 8;
    let rest = h.get(after..).unwrap_or(&[]);
    let Some(eq) = memchr::memchr(b'=', rest) else {
        return Err(Some("Multipart: Invalid boundary in C-T (malformed)."));
    };
    for &b in &rest[..eq] {
        if c_isspace(b) {
            flags.boundary_whitespace = true;
        } else {
            return Err(Some("Multipart: Invalid boundary in C-T (parameter name)."));
        }
    }
    let val = &rest[eq + 1..];
    if val.first().is_some_and(|&b| c_isspace(b)) {
        flags.boundary_whitespace = true;
    }
    let len = val.len();
    let mut boundary;
    if len >= 2 && val[0] == b'"' && val[len - 1] == b'"' {
        boundary = &val[1..len - 1];
        if boundary.is_empty() {
            return Err(None);
        }
        flags.boundary_quoted = true;
    } else {
        if val.first() == Some(&b'"') || (len >= 2 && val[len - 1] == b'"') {
            return Err(Some("Multipart: Invalid boundary in C-T (quote)."));
        }
        boundary = val;
        if boundary.is_empty() {
            return Err(None);
        }
        flags.boundary_quoted = false;
    }
    if count_boundary_params(boundary) != 0 {
        return Err(Some("Multipart: Invalid boundary in C-T (content)."));
    }
    if !boundary_chars_valid(boundary) {
        // "Some frameworks ... include a charset= parameter after the
        // boundary": tolerated by cutting at the first ';'.
        if let Some(i) = memchr::memchr(b';', boundary) {
            boundary = &boundary[..i];
        }
    }
    if !boundary_chars_valid(boundary) {
        return Err(Some("Multipart: Invalid boundary in C-T (characters)."));
    }
    if boundary.is_empty() {
        return Err(Some("Multipart: Invalid boundary in C-T (empty)."));
    }
    Ok(boundary)
}

/// v3 `count_boundary_params`: occurrences of `boundary` (any case) that
/// have an `=` somewhere after them.
fn count_boundary_params(s: &[u8]) -> usize {
    let Some(last_eq) = memchr::memrchr(b'=', s) else {
        return 0;
    };
    let mut count = 0;
    let mut i = 0;
    while i + 8 <= s.len() {
        if s[i..i + 8].eq_ignore_ascii_case(b"boundary") {
            i += 8;
            if last_eq >= i {
                count += 1;
            }
        } else {
            i += 1;
        }
    }
    count
}

/// RFC 2046 boundary characters (v3 `boundary_characters_valid`): a space
/// is allowed except as the last character.
fn boundary_chars_valid(b: &[u8]) -> bool {
    b.iter().enumerate().all(|(i, &c)| {
        c.is_ascii_alphanumeric() || b"'()+_,-./:=?".contains(&c) || (c == b' ' && i + 1 != b.len())
    })
}

/// RFC 2616 token characters (v3 `is_token_char`).
fn is_token_char(c: u8) -> bool {
    c > 32 && c < 127 && !b"()<>@,;:\\\"/[]?=".contains(&c)
}

/// The bytes up to the first NUL: what v3's C-string functions see.
fn cstr(b: &[u8]) -> &[u8] {
    match memchr::memchr(0, b) {
        Some(i) => &b[..i],
        None => b,
    }
}

/// v3 `utils::string::chomp`: drops trailing CR/LF, unless the string
/// consists of nothing else (then it is left alone).
fn chomp(b: &[u8]) -> &[u8] {
    match b.iter().rposition(|&c| c != b'\n' && c != b'\r') {
        Some(i) => &b[..=i],
        None => b,
    }
}

struct Machine<'a, 'b, S: ?Sized> {
    body: &'a [u8],
    boundary: &'a [u8],
    finder: memchr::memmem::Finder<'a>,
    cfg: &'b MultipartConfig,
    sc: &'b mut Scratch,
    sink: &'b mut S,
    flags: &'b mut MultipartFlags,
    out: &'b mut BodyResult,
    /// The piece being read starts a line (`m_buf_contains_line`).
    buf_contains_line: bool,
    /// The last piece ended with a bare LF (`m_crlf_state_buf_end == 2`).
    prev_bare_lf: bool,
    part: Option<Part>,
    /// Reading the part's data, not its headers (`m_mpp_state == 1`).
    in_data: bool,
    /// A data line of the current part was read (`m_mpp_substate_part_data_read`).
    data_read: bool,
    is_complete: bool,
    boundary_count: usize,
    nfiles: usize,
    /// Unprocessed bytes at the end (`m_buf` at completion).
    remainder: Span,
}

/// A fatal error: parsing stops (v3 `process()` returns false).
struct Fatal;

impl<'a, 'b, S: BodySink + ?Sized> Machine<'a, 'b, S> {
    fn new(
        body: &'a [u8],
        boundary: &'a [u8],
        cfg: &'b MultipartConfig,
        sc: &'b mut Scratch,
        sink: &'b mut S,
        flags: &'b mut MultipartFlags,
        out: &'b mut BodyResult,
    ) -> Self {
        Machine {
            body,
            boundary,
            finder: memchr::memmem::Finder::new(boundary),
            cfg,
            sc,
            sink,
            flags,
            out,
            buf_contains_line: true,
            prev_bare_lf: false,
            part: None,
            in_data: false,
            data_read: false,
            is_complete: false,
            boundary_count: 0,
            nfiles: 0,
            remainder: Span::default(),
        }
    }

    fn fatal(&mut self, msg: &[u8], quoted: &[u8]) -> Fatal {
        self.flags.error = true;
        self.sc.set_err(msg, quoted);
        if self.out.error_detail.is_empty() {
            self.out
                .error_detail
                .push_str(&String::from_utf8_lossy(msg));
            self.out
                .error_detail
                .push_str(&String::from_utf8_lossy(quoted));
        }
        Fatal
    }

    /// v3 `Multipart::process` over the whole body.
    fn run(&mut self) {
        let body = self.body;
        let len = body.len();
        let mut pos = 0;
        while pos < len {
            let avail = (len - pos).min(BUF_SIZE);
            let window = &body[pos..pos + avail];
            // (piece length, last byte looked at, piece filled the buffer)
            let (n, c, overlong) = match memchr::memchr(b'\n', window) {
                Some(i) => (i + 1, b'\n', i + 1 == BUF_SIZE),
                None if avail == BUF_SIZE => {
                    if window[BUF_SIZE - 1] == b'\r' {
                        // v3 never takes `\r` as the buffer's last byte: the
                        // piece ends before it.
                        (BUF_SIZE - 1, b'\r', true)
                    } else {
                        (BUF_SIZE, window[BUF_SIZE - 1], true)
                    }
                }
                None => {
                    self.remainder = Span {
                        start: pos,
                        end: len,
                    };
                    return;
                }
            };
            let piece = Span {
                start: pos,
                end: pos + n,
            };
            if self.piece(piece, overlong).is_err() {
                self.remainder = piece;
                return;
            }
            pos += n;
            self.buf_contains_line = c == b'\n';
            self.prev_bare_lf = c == b'\n' && !(n >= 2 && body[pos - 2] == b'\r');
            if self.is_complete && pos < len {
                self.flags.data_after = true;
                return;
            }
        }
    }

    /// One line piece (v3's buffer processing).
    fn piece(&mut self, span: Span, overlong: bool) -> Result<(), Fatal> {
        let body = self.body;
        let chunk = span.of(body);
        let s = cstr(chunk);
        let blen = self.boundary.len();
        let mut processed = false;
        if self.buf_contains_line && s.len() > 3 && s[0] == b'-' && s[1] == b'-' {
            if s.get(2..2 + blen) == Some(self.boundary) {
                if self.prev_bare_lf {
                    self.flags.lf_line = true;
                }
                if !self.data_read && self.boundary_count > 0 {
                    // A boundary where part data should begin: not a boundary.
                    self.flags.invalid_part = true;
                } else {
                    if self.boundary_count > 0 {
                        self.flags.unmatched_boundary = 2;
                    }
                    let mut be = 2 + blen;
                    let mut is_final = false;
                    if s.get(be) == Some(&b'-') && s.get(be + 1) == Some(&b'-') {
                        is_final = true;
                        be += 2;
                        if self.is_complete {
                            return Err(
                                self.fatal(b"Multipart: Invalid boundary (final duplicate).", b"")
                            );
                        }
                    }
                    let ending = s.get(be..).unwrap_or(&[]);
                    if ending == b"\r\n" || ending == b"\n" {
                        if ending == b"\n" {
                            self.flags.lf_line = true;
                        } else {
                            self.flags.crlf_line = true;
                        }
                        self.process_boundary(is_final);
                        if is_final {
                            self.is_complete = true;
                        }
                        processed = true;
                        self.boundary_count += 1;
                    } else {
                        return Err(self.fatal(b"Multipart: Invalid boundary: ", s));
                    }
                }
            } else {
                if self.flags.boundary_quoted
                    && s.get(2) == Some(&b'"')
                    && s.get(3..3 + blen) == Some(self.boundary)
                {
                    return Err(self.fatal(b"Multipart: Invalid boundary (quotes).", b""));
                }
                let mut p = 2;
                while p < s.len() && c_isspace(s[p]) {
                    p += 1;
                }
                if p != 2 && s[p..].starts_with(self.boundary) {
                    return Err(self.fatal(b"Multipart: Invalid boundary (whitespace).", b""));
                }
                self.flags.unmatched_boundary = 1;
            }
        } else if self.buf_contains_line && self.contains_dashed_boundary(chunk) {
            self.flags.unmatched_boundary = 1;
        }

        if !processed {
            if self.part.is_none() {
                self.flags.data_before = true;
            } else if !self.in_data {
                if overlong {
                    return Err(
                        self.fatal(b"Multipart: Part header line over 4096 bytes long", b"")
                    );
                }
                self.part_header(span);
            } else {
                self.part_data(span);
            }
        }
        Ok(())
    }

    /// Whether `--BOUNDARY` occurs anywhere in the piece.
    fn contains_dashed_boundary(&self, chunk: &[u8]) -> bool {
        self.finder
            .find_iter(chunk)
            .any(|p| p >= 2 && chunk[p - 2] == b'-' && chunk[p - 1] == b'-')
    }

    /// v3 `process_part_header` for one complete line (ends with `\n`).
    /// Errors are recorded and the line skipped; parsing goes on.
    fn part_header(&mut self, span: Span) {
        let body = self.body;
        let chunk = span.of(body);
        let Some(part) = self.part.as_mut() else {
            return;
        };
        if memchr::memchr(0, chunk).is_some() {
            self.sc
                .set_err(b"Multipart: Nul byte in part headers.", b"");
            return;
        }
        let len = chunk.len();
        let mut term = 1;
        if len > 1 {
            if chunk[len - 2] == b'\r' {
                self.flags.crlf_line = true;
                term = 2;
            } else {
                self.flags.lf_line = true;
            }
        } else {
            self.flags.lf_line = true;
        }
        let line_len = len.saturating_sub(term);

        if chunk == b"\r\n" || chunk == b"\n" {
            // End of the part's headers.
            if let Some(l) = part.last_line.take() {
                self.sc.lines.push(l);
            }
            let Some(cd) = self.sc.find_header(b"Content-Disposition") else {
                self.sc
                    .set_err(b"Multipart: Part missing Content-Disposition header.", b"");
                return;
            };
            let Some(rec) = self.sc.headers.get(cd as usize).copied() else {
                return;
            };
            let value = rec.value.of(&self.sc.hdr);
            let has_filename_eq = memchr::memmem::find(value, b"filename=").is_some();
            let rc =
                parse_content_disposition(value, &mut self.sc.names, part, self.flags, self.sink);
            if let Err(rc) = rc {
                let value = rec.value.of(&self.sc.hdr);
                let err = &mut self.sc.err;
                err.clear();
                let _ = write!(
                    err,
                    "Multipart: Invalid Content-Disposition header ({rc}): "
                );
                err.extend_from_slice(value);
                return;
            }
            if part.name.is_empty() {
                self.sc.set_err(
                    b"Multipart: Content-Disposition header missing name field.",
                    b"",
                );
                return;
            }
            if !part.filename.is_empty() {
                // v3: catch parsers that would not understand this C-D.
                if !has_filename_eq {
                    self.sc.set_err(
                        b"Multipart: Invalid Content-Disposition header (filename).",
                        b"",
                    );
                    return;
                }
                part.file = true;
            } else {
                part.file = false;
            }
            self.in_data = true;
            self.data_read = false;
            part.last_header = None;
        } else if chunk.first().is_some_and(|&b| c_isspace(b)) {
            // Folding: continues the previous header.
            self.flags.header_folding = true;
            if !matches!(chunk.first(), Some(b'\t' | b' ')) {
                self.flags.invalid_header_folding = true;
            }
            let Some(h) = part.last_header else {
                self.sc
                    .set_err(b"Multipart: Invalid part header (folding error).", b"");
                return;
            };
            let mut i = 0;
            while i < len && c_isspace(chunk[i]) {
                if chunk[i] != b'\t' && chunk[i] != b' ' {
                    self.flags.invalid_header_folding = true;
                }
                i += 1;
            }
            let more = chomp(&chunk[i..]);
            let sc = &mut *self.sc;
            let Some(rec) = sc.headers.get_mut(h as usize) else {
                return;
            };
            if rec.value.end != sc.hdr.len() {
                // Not the newest value (cannot happen: only the latest header
                // can be folded); move it to the end to keep appends cheap.
                let old = rec.value;
                let start = sc.hdr.len();
                if old.end <= sc.hdr.len() && old.start <= old.end {
                    sc.hdr.extend_from_within(old.start..old.end);
                }
                rec.value = Span {
                    start,
                    end: sc.hdr.len(),
                };
            }
            sc.hdr.push(b' ');
            sc.hdr.extend_from_slice(more);
            rec.value.end = sc.hdr.len();
            let value_len = rec.value.len();
            if value_len > BUF_SIZE {
                sc.set_err(b"Multipart: Part header too long.", b"");
                return;
            }
            part.last_line = Some(HeaderLine::Folded {
                header: h,
                value_len,
            });
        } else {
            // A new header.
            if let Some(l) = part.last_line.take() {
                self.sc.lines.push(l);
            }
            let Some(colon) = memchr::memchr(b':', chunk) else {
                self.sc
                    .set_err(b"Multipart: Invalid part header (colon missing): ", chunk);
                return;
            };
            if colon == 0 {
                self.sc.set_err(
                    b"Multipart: Invalid part header (header name missing).",
                    b"",
                );
                return;
            }
            let name = &chunk[..colon];
            if name.iter().any(|&b| !(33..=126).contains(&b)) {
                self.sc.set_err(
                    b"Multipart: Invalid part header (contains invalid character).",
                    b"",
                );
                return;
            }
            let mut v = colon + 1;
            while v < len && (chunk[v] == b' ' || chunk[v] == b'\t') {
                v += 1;
            }
            let value = chomp(&chunk[v..]);
            if self.sc.find_header(name).is_some() {
                // v3: "Duplicate part header", ignored without an error.
                return;
            }
            let idx = self.sc.insert_header(name, value);
            part.last_header = Some(idx);
            part.last_line = (line_len > 0).then_some(HeaderLine::Raw(Span {
                start: span.start,
                end: span.start + line_len,
            }));
        }
    }

    /// v3 `process_part_data` for one piece of part data.
    fn part_data(&mut self, span: Span) {
        self.data_read = true;
        let body = self.body;
        let chunk = span.of(body);
        let Some(part) = self.part.as_mut() else {
            return;
        };
        // The line ending is held back: it belongs to the next boundary if
        // one follows.
        let reserved = if chunk.ends_with(b"\r\n") {
            2
        } else if chunk.ends_with(b"\n") {
            1
        } else {
            0
        };
        let payload_end = span.end - reserved;
        if part.file {
            if let Some(limit) = self.cfg.upload_file_limit.filter(|&l| l > 0) {
                // v3 checks on every data piece of a file part (so a
                // multi-line file at the limit trips it too).
                if self.nfiles >= limit {
                    if !self.flags.file_limit_exceeded {
                        let err = &mut self.sc.err;
                        err.clear();
                        // Writing to a Vec cannot fail.
                        let _ = write!(
                            err,
                            "Multipart: Upload file limit exceeded {limit}. Use SecUploadFileLimit to change the limit."
                        );
                        self.flags.file_limit_exceeded = true;
                    }
                } else if !part.file_started {
                    part.file_started = true;
                    self.nfiles += 1;
                }
            }
        } else if self.cfg.line_breaks == MultipartLineBreaks::DropLikeV3 {
            let start = self.sc.values.len();
            self.sc
                .values
                .extend_from_slice(&body[span.start..payload_end]);
            if part.joined.end != start {
                part.joined.start = start;
            }
            part.joined.end = self.sc.values.len();
        }
        match part.data.as_mut() {
            Some(d) => d.end = payload_end,
            None => {
                part.data = Some(Span {
                    start: span.start,
                    end: payload_end,
                })
            }
        }
    }

    /// v3 `process_boundary`: finishes the current part, starts a new one
    /// unless `last`.
    fn process_boundary(&mut self, last: bool) {
        if let Some(part) = self.part.take() {
            let sc = &mut *self.sc;
            let name = part.name.of(&sc.names);
            for line in &sc.lines {
                match *line {
                    HeaderLine::Raw(span) => {
                        self.sink.multipart_part_header(name, span.of(self.body))
                    }
                    HeaderLine::Folded { header, value_len } => {
                        if let Some(rec) = sc.headers.get(header as usize) {
                            sc.line_buf.clear();
                            sc.line_buf.extend_from_slice(rec.name.of(&sc.hdr));
                            sc.line_buf.extend_from_slice(b": ");
                            let value = rec.value.of(&sc.hdr);
                            sc.line_buf
                                .extend_from_slice(value.get(..value_len).unwrap_or(value));
                            self.sink.multipart_part_header(name, &sc.line_buf);
                        }
                    }
                }
            }
            if !name.is_empty() {
                let value = match self.cfg.line_breaks {
                    MultipartLineBreaks::DropLikeV3 if !part.file => ValueLoc::Joined(part.joined),
                    _ => ValueLoc::Body(part.data.unwrap_or_default()),
                };
                sc.parts.push(PartRec {
                    file: part.file,
                    name: part.name,
                    filename: part.filename,
                    value,
                });
            } else {
                self.flags.invalid_part = true;
            }
        }
        if !last {
            self.sc.clear_part();
            self.part = Some(Part::new(self.sc.values.len()));
            self.in_data = false;
            self.data_read = false;
        }
    }

    /// v3 `multipart_complete` up to the point where it reports the parts.
    /// Returns whether the body was complete (then the parts are reported).
    fn finish(&mut self) -> bool {
        if self.is_complete {
            return true;
        }
        if self.boundary_count == 0 {
            self.sc
                .set_err(b"Multipart: No boundaries found in payload.", b"");
            return false;
        }
        // The final boundary may end the body without a line ending.
        let rest = self.remainder.of(self.body);
        let blen = self.boundary.len();
        if self.buf_contains_line
            && rest.len() == blen + 4
            && rest.starts_with(b"--")
            && rest.ends_with(b"--")
            && rest.get(2..2 + blen) == Some(self.boundary)
        {
            if self.prev_bare_lf {
                self.flags.lf_line = true;
            }
            if !self.data_read {
                // Where part data should begin.
                self.flags.invalid_part = true;
            }
            self.process_boundary(true);
            self.is_complete = true;
            return true;
        }
        self.sc.set_err(b"Multipart: Final boundary missing.", b"");
        false
    }
}

/// Reports the parts of a complete body: `ARGS`/`ARGS_POST` and `FILES*`.
fn emit_parts<S: BodySink + ?Sized>(
    body: &[u8],
    sc: &Scratch,
    sink: &mut S,
    args: &mut ArgLimit,
    out: &mut BodyResult,
) {
    let mut combined: Option<u64> = None;
    for rec in &sc.parts {
        let name = rec.name.of(&sc.names);
        if rec.file {
            let content = match rec.value {
                ValueLoc::Body(s) | ValueLoc::Joined(s) => s.of(body),
            };
            let size = content.len() as u64;
            combined = Some(combined.unwrap_or(0).saturating_add(size));
            sink.file(&FileInfo {
                name,
                filename: rec.filename.of(&sc.names),
                size,
                content,
            });
        } else {
            let value = match rec.value {
                ValueLoc::Body(s) => s.of(body),
                ValueLoc::Joined(s) => s.of(&sc.values),
            };
            // v3 stores multipart arguments without `addArgument`, so
            // SecArgumentsLimit does not apply; they still count.
            args.count = args.count.saturating_add(1);
            sink.arg(ArgSource::Multipart, name, value);
        }
    }
    out.files_combined_size = combined;
}

/// v3 `parse_content_disposition` on a header value. Values go to `names`;
/// `Err` carries v3's negative return code.
fn parse_content_disposition<S: BodySink + ?Sized>(
    v: &[u8],
    names: &mut Vec<u8>,
    part: &mut Part,
    flags: &mut MultipartFlags,
    sink: &mut S,
) -> Result<(), i32> {
    // C-string view: 0 past the end.
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    let end = v.len();
    if !v.starts_with(b"form-data") {
        return Err(-1);
    }
    let mut p = 9;
    while matches!(at(p), b'\t' | b' ') {
        p += 1;
    }
    if p >= end {
        return Ok(());
    }
    if at(p) != b';' {
        return Err(-2);
    }
    p += 1;
    let mut filename_star = false;
    while p < end {
        while matches!(at(p), b'\t' | b' ') {
            p += 1;
        }
        if p >= end {
            return Err(-3);
        }
        let start = p;
        while p < end && !matches!(at(p), b'=' | b'\t' | b' ') {
            p += 1;
        }
        if p >= end {
            return Err(-4);
        }
        let pname = &v[start..p];
        while matches!(at(p), b'\t' | b' ') {
            p += 1;
        }
        if p >= end {
            return Err(-5);
        }
        if at(p) != b'=' {
            return Err(-13);
        }
        p += 1;
        while matches!(at(p), b'\t' | b' ') {
            p += 1;
        }
        if p >= end {
            return Err(-6);
        }

        let mut quote = 0u8;
        let val_start = names.len();
        if pname == b"filename*" {
            // charset'[language]'percent-encoded-filename
            let charset = p;
            while p < end
                && (at(p).is_ascii_alphanumeric() || MIME_CHARSET_SPECIAL.contains(&at(p)))
            {
                p += 1;
            }
            if at(p) != b'\'' || p == charset {
                return Err(-16);
            }
            p += 1;
            while p < end && at(p) != b'\'' {
                p += 1;
            }
            if at(p) != b'\'' {
                return Err(-17);
            }
            p += 1;
            let fname = p;
            while p < end && at(p) != b';' {
                if at(p) == b'%' {
                    if !at(p + 1).is_ascii_hexdigit() || !at(p + 2).is_ascii_hexdigit() {
                        return Err(-18);
                    }
                    p += 3;
                } else if at(p).is_ascii_alphanumeric() || ATTR_CHAR_SPECIAL.contains(&at(p)) {
                    p += 1;
                } else {
                    return Err(-19);
                }
            }
            names.extend_from_slice(v.get(fname..p).unwrap_or(&[]));
        } else if at(p) == b'"' || at(p) == b'\'' {
            quote = at(p);
            if quote == b'\'' {
                flags.invalid_quoting = true;
            }
            p += 1;
            if p >= end {
                return Err(-7);
            }
            while p < end {
                let c = at(p);
                if c == b'\\' {
                    if p + 1 >= end {
                        return Err(-8);
                    }
                    // Only the quote and `\` can be escaped; other escapes
                    // are kept as they are (v3 tolerates them for IE).
                    if at(p + 1) == quote || at(p + 1) == b'\\' {
                        p += 1;
                    }
                } else if c == quote {
                    break;
                }
                names.push(at(p));
                p += 1;
            }
            // Over the closing quote (deviation: an unterminated value ends
            // at the end of the header).
            p = (p + 1).min(end);
        } else {
            let s = p;
            while p < end && is_token_char(at(p)) {
                p += 1;
            }
            names.extend_from_slice(&v[s..p]);
        }
        let val = Span {
            start: val_start,
            end: names.len(),
        };
        let value = val.of(names);

        match pname {
            b"name" => {
                if quote != b'"' && value.contains(&b'\'') {
                    flags.invalid_quoting = true;
                }
                sink.multipart_name(value);
                if !part.name.is_empty() {
                    return Err(-14);
                }
                part.name = val;
            }
            b"filename" => {
                if quote != b'"' && value.contains(&b'\'') {
                    flags.invalid_quoting = true;
                }
                sink.multipart_filename(value);
                if !part.filename.is_empty() {
                    return Err(-15);
                }
                part.filename = val;
            }
            b"filename*" => {
                if filename_star {
                    return Err(-20);
                }
                filename_star = !value.is_empty();
            }
            _ => return Err(-11),
        }

        if p < end {
            while matches!(at(p), b'\t' | b' ') {
                p += 1;
            }
            if p < end {
                if at(p) != b';' {
                    if p > 0 && matches!(at(p - 1), b'\'' | b'"') {
                        flags.invalid_quoting = true;
                    }
                    return Err(-12);
                }
                p += 1;
            }
        }
    }
    if filename_star && part.filename.is_empty() {
        return Err(-21);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
