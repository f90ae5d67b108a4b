//! XML request bodies, for the two XPath targets CRS uses: `XML:/*` and
//! `XML://@*`.
//!
//! v3 (`src/request_body_processor/xml.cc`, `src/variables/xml.cc`) builds a
//! libxml2 tree and evaluates the XPath on it, taking `xmlNodeGetContent()`
//! of every node found:
//!
//! * `/*` selects the root element; its content is the concatenation of all
//!   descendant text and CDATA, in document order, entity and character
//!   references resolved, whitespace between elements included, comments and
//!   processing instructions excluded, element and attribute *names*
//!   excluded. One value. (CRS 944120-6/7/9: names are not inspected there.)
//! * `//@*` selects every attribute, in document order: one value each,
//!   references resolved and whitespace normalised (a literal tab, CR, LF or
//!   CRLF becomes a space; `&#10;` stays a newline). Namespace declarations
//!   (`xmlns`, `xmlns:p`) are not attributes in XPath and are left out.
//!   (CRS 931100: `<a probe="http://...">` is inspected through `//@*`.)
//!
//! Any other XPath expression yields nothing here ([`XPath::Unsupported`]);
//! v3 would evaluate it with libxml2. Without `SecParseXmlIntoArgs` (not
//! supported) v3's XML processor adds no `ARGS`.
//!
//! # Well-formedness and `REQBODY_ERROR`
//!
//! libxml2 is replaced by `quick-xml` (tokenizer) plus the well-formedness
//! checks libxml2 makes that matter for inspection: one root element; only
//! whitespace, comments, PIs and one DOCTYPE outside it; matching end tags;
//! no `]]>` or unescaped `<` where they are not allowed; well-formed and
//! unique attributes; defined entities (the five predefined ones, or any name
//! when the document has a DOCTYPE: custom entities are *not* expanded, the
//! reference `&name;` is kept as is); valid character references; UTF-8 input
//! (a UTF-8 BOM is skipped; `encoding="ISO-8859-1"`, `US-ASCII` and
//! `windows-1252` are read as Latin-1; other encodings are refused); no C0
//! control characters other than tab, CR, LF; nesting at most
//! [`DEFAULT_MAX_DEPTH`] ancestors deep (libxml2's `xmlParserMaxDepth`).
//! A failure gives v3's only message, `XML parsing error: XML: Failed parsing
//! document.` (the reason is in [`BodyResult::error_detail`]). As with
//! libxml2, what was parsed before the error stays available: attributes
//! already reported, and the root element's text so far. An empty body is an
//! error too (libxml2: "Document is empty").
//!
//! # Cost
//!
//! Linear time (quick-xml is a streaming tokenizer; duplicate attributes are
//! found by sorting each element's names), memory linear in the body (the
//! root text) plus the nesting depth. Our buffers are reused across requests;
//! the one exception to "no allocation after warm-up" in the body processors
//! is here: quick-xml's `Reader` keeps its own stack of open element names,
//! which it allocates afresh for every document (two small vectors).

use std::fmt::Write as _;

use quick_xml::events::{BytesStart, Event};
use quick_xml::reader::Reader;

use super::output::{BodyResult, BodySink};

/// libxml2's default maximum nesting (`xmlParserMaxDepth`): an element with
/// more ancestors than this is an error.
pub const DEFAULT_MAX_DEPTH: usize = 256;

const ERR_MSG: &[u8] = b"XML parsing error: XML: Failed parsing document.";

/// The XPath forms the XML processor answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XPath {
    /// `/*`: the root element's text content ([`BodySink::xml_root_text`]).
    RootText,
    /// `//@*`: every attribute value ([`BodySink::xml_attribute`]).
    Attributes,
    /// Anything else: evaluates to nothing.
    Unsupported,
}

impl XPath {
    /// Classifies the selector of an `XML:<xpath>` target.
    pub fn parse(expr: &str) -> XPath {
        match expr.trim() {
            "/*" => XPath::RootText,
            "//@*" => XPath::Attributes,
            _ => XPath::Unsupported,
        }
    }
}

/// Reusable buffers of the XML processor.
#[derive(Debug, Default)]
pub struct Scratch {
    /// The root element's text content.
    text: Vec<u8>,
    /// One attribute value, decoded.
    attr: Vec<u8>,
    /// Open element names, concatenated, and where each ends.
    names: Vec<u8>,
    name_ends: Vec<usize>,
    /// One element's attribute names (duplicate check).
    keys: Vec<u8>,
    key_spans: Vec<(usize, usize)>,
}

/// How the document's bytes are to be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Enc {
    Utf8,
    Latin1,
}

/// Why the document is not well-formed: where, and what.
struct Bad {
    pos: usize,
    what: &'static str,
}

fn bad(pos: usize, what: &'static str) -> Bad {
    Bad { pos, what }
}

/// Parses an XML body; results go to `sink`, errors to `out`.
pub fn parse<S: BodySink + ?Sized>(
    body: &[u8],
    max_depth: usize,
    scratch: &mut Scratch,
    sink: &mut S,
    out: &mut BodyResult,
) {
    scratch.text.clear();
    scratch.attr.clear();
    scratch.names.clear();
    scratch.name_ends.clear();
    scratch.keys.clear();
    scratch.key_spans.clear();

    let mut root_seen = false;
    let result = run(body, max_depth, scratch, sink, &mut root_seen);
    if root_seen {
        sink.xml_root_text(&scratch.text);
    }
    if let Err(e) = result {
        out.reqbody_error = true;
        out.reqbody_error_msg.clear();
        out.reqbody_error_msg.extend_from_slice(ERR_MSG);
        out.error_detail.clear();
        // Writing to a String cannot fail.
        let _ = write!(out.error_detail, "at byte {}: {}", e.pos, e.what);
    }
}

fn run<S: BodySink + ?Sized>(
    body: &[u8],
    max_depth: usize,
    sc: &mut Scratch,
    sink: &mut S,
    root_seen: &mut bool,
) -> Result<(), Bad> {
    let mut start = 0;
    if body.starts_with(b"\xEF\xBB\xBF") {
        start = 3;
    } else if body.starts_with(b"\xFE\xFF")
        || body.starts_with(b"\xFF\xFE")
        || body.starts_with(b"\x00<")
        || body.starts_with(b"<\x00")
    {
        return Err(bad(0, "unsupported encoding (UTF-16/UCS-4)"));
    }
    let doc = &body[start..];
    if doc
        .iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
    {
        return Err(bad(body.len(), "Document is empty"));
    }

    // The declared encoding, from the XML declaration if any. Only a document
    // starting with `<?` (after the BOM quick-xml also strips) can have one;
    // the probe is skipped otherwise, since a reader whose first event is a
    // start tag allocates its stack of open names.
    let mut enc = Enc::Utf8;
    if doc
        .strip_prefix(b"\xEF\xBB\xBF")
        .unwrap_or(doc)
        .starts_with(b"<?")
    {
        let mut r = Reader::from_reader(doc);
        if let Ok(Event::Decl(d)) = r.read_event() {
            match d.encoding() {
                None => {}
                Some(Ok(name)) => {
                    enc = classify_encoding(&name)
                        .ok_or_else(|| bad(start, "unsupported encoding"))?
                }
                Some(Err(_)) => return Err(bad(start, "malformed encoding declaration")),
            }
        }
    }

    // Parse only the prefix libxml2 would accept byte-wise; fail after it.
    let mut limit = doc.len();
    let mut late: Option<Bad> = None;
    if enc == Enc::Utf8 {
        if let Err(e) = std::str::from_utf8(doc) {
            limit = e.valid_up_to();
            late = Some(bad(start + limit, "Input is not proper UTF-8"));
        }
    }
    if let Some(i) = doc[..limit]
        .iter()
        .position(|&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r'))
    {
        limit = i;
        late = Some(bad(start + i, "invalid character (C0 control)"));
    }

    let mut p = Doc {
        doc: &doc[..limit],
        base: start,
        enc,
        max_depth,
        sc,
        sink,
        root_seen,
        root_closed: false,
        has_dtd: false,
        events: 0,
    };
    let parsed = p.events();
    // The byte that cut the document short is the real reason.
    match late {
        Some(e) => Err(e),
        None => parsed,
    }
}

fn classify_encoding(name: &[u8]) -> Option<Enc> {
    let n = name.trim_ascii();
    let is = |s: &str| n.eq_ignore_ascii_case(s.as_bytes());
    if is("utf-8") || is("utf8") {
        Some(Enc::Utf8)
    } else if is("iso-8859-1")
        || is("iso_8859-1")
        || is("latin1")
        || is("latin-1")
        || is("us-ascii")
        || is("ascii")
        || is("windows-1252")
        || is("cp1252")
    {
        Some(Enc::Latin1)
    } else {
        None
    }
}

struct Doc<'a, 'b, S: ?Sized> {
    doc: &'a [u8],
    base: usize,
    enc: Enc,
    max_depth: usize,
    sc: &'b mut Scratch,
    sink: &'b mut S,
    root_seen: &'b mut bool,
    root_closed: bool,
    has_dtd: bool,
    events: usize,
}

impl<S: BodySink + ?Sized> Doc<'_, '_, S> {
    fn events(&mut self) -> Result<(), Bad> {
        let mut reader = Reader::from_reader(self.doc);
        {
            let cfg = reader.config_mut();
            // Our own name stack checks end tags (no allocation in quick-xml).
            cfg.check_end_names = false;
            cfg.allow_unmatched_ends = true;
            cfg.expand_empty_elements = false;
            cfg.check_comments = true;
            cfg.allow_dangling_amp = false;
            cfg.trim_text_start = false;
            cfg.trim_text_end = false;
            cfg.trim_markup_names_in_closing_tags = true;
        }
        loop {
            let here = self.base + reader.buffer_position() as usize;
            let ev = match reader.read_event() {
                Ok(ev) => ev,
                Err(_) => {
                    let at = self.base + reader.error_position() as usize;
                    return Err(bad(at, "malformed markup"));
                }
            };
            self.events += 1;
            let depth = self.sc.name_ends.len();
            match ev {
                Event::Eof => break,
                Event::Decl(_) => {
                    if self.events != 1 {
                        return Err(bad(
                            here,
                            "XML declaration allowed only at the start of the document",
                        ));
                    }
                }
                Event::PI(pi) => {
                    let target = pi.target();
                    if target.eq_ignore_ascii_case(b"xml") {
                        return Err(bad(
                            here,
                            "XML declaration allowed only at the start of the document",
                        ));
                    }
                    if !valid_name(target) {
                        return Err(bad(here, "invalid processing instruction target"));
                    }
                }
                Event::Comment(_) => {}
                Event::DocType(_) => {
                    if self.has_dtd || *self.root_seen {
                        return Err(bad(here, "misplaced DOCTYPE"));
                    }
                    self.has_dtd = true;
                }
                Event::Start(e) => {
                    self.start_element(&e, here)?;
                    let name = e.name();
                    self.sc.names.extend_from_slice(name.as_ref());
                    self.sc.name_ends.push(self.sc.names.len());
                }
                Event::Empty(e) => {
                    self.start_element(&e, here)?;
                    if depth == 0 {
                        self.root_closed = true;
                    }
                }
                Event::End(e) => {
                    let name = e.name();
                    let Some(&end) = self.sc.name_ends.last() else {
                        return Err(bad(here, "end tag without start tag"));
                    };
                    self.sc.name_ends.pop();
                    let begin = self.sc.name_ends.last().copied().unwrap_or(0);
                    if self.sc.names.get(begin..end) != Some(name.as_ref()) {
                        return Err(bad(here, "opening and ending tag mismatch"));
                    }
                    self.sc.names.truncate(begin);
                    if self.sc.name_ends.is_empty() {
                        self.root_closed = true;
                    }
                }
                Event::Text(t) => {
                    if depth == 0 {
                        if !t.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n')) {
                            return Err(bad(
                                here,
                                if *self.root_seen {
                                    "Extra content at the end of the document"
                                } else {
                                    "Start tag expected, '<' not found"
                                },
                            ));
                        }
                    } else {
                        if memchr::memmem::find(&t, b"]]>").is_some() {
                            return Err(bad(here, "Sequence ']]>' not allowed in content"));
                        }
                        push_text(&t, self.enc, &mut self.sc.text);
                    }
                }
                Event::CData(c) => {
                    if depth == 0 {
                        return Err(bad(here, "CDATA outside the root element"));
                    }
                    push_text(&c, self.enc, &mut self.sc.text);
                }
                Event::GeneralRef(r) => {
                    if depth == 0 {
                        return Err(bad(here, "entity reference outside the root element"));
                    }
                    resolve_ref(&r, self.has_dtd, self.enc, &mut self.sc.text)
                        .map_err(|w| bad(here, w))?;
                }
            }
        }
        if !*self.root_seen {
            return Err(bad(
                self.base + self.doc.len(),
                "Start tag expected, '<' not found",
            ));
        }
        if !self.sc.name_ends.is_empty() {
            return Err(bad(self.base + self.doc.len(), "Premature end of data"));
        }
        Ok(())
    }

    /// A start or empty-element tag: checks and reports its attributes.
    fn start_element(&mut self, e: &BytesStart<'_>, here: usize) -> Result<(), Bad> {
        if self.root_closed {
            return Err(bad(here, "Extra content at the end of the document"));
        }
        let depth = self.sc.name_ends.len();
        if depth > self.max_depth {
            return Err(bad(here, "Excessive depth in document"));
        }
        *self.root_seen = true;
        if !valid_name(e.name().as_ref()) {
            return Err(bad(here, "invalid element name"));
        }
        self.sc.keys.clear();
        self.sc.key_spans.clear();
        let mut attrs = e.attributes();
        attrs.with_checks(false);
        for a in attrs {
            let a = a.map_err(|_| bad(here, "malformed attribute"))?;
            let key = a.key.as_ref();
            if !valid_name(key) {
                return Err(bad(here, "invalid attribute name"));
            }
            let s = self.sc.keys.len();
            self.sc.keys.extend_from_slice(key);
            self.sc.key_spans.push((s, self.sc.keys.len()));
            decode_attr(&a.value, self.has_dtd, self.enc, &mut self.sc.attr)
                .map_err(|w| bad(here, w))?;
            if !(key == b"xmlns" || key.starts_with(b"xmlns:")) {
                self.sink.xml_attribute(&self.sc.attr);
            }
        }
        if self.sc.key_spans.len() > 1 {
            let keys = &self.sc.keys;
            let span = |&(a, b): &(usize, usize)| keys.get(a..b).unwrap_or(&[]);
            self.sc
                .key_spans
                .sort_unstable_by(|x, y| span(x).cmp(span(y)));
            if self
                .sc
                .key_spans
                .windows(2)
                .any(|w| span(&w[0]) == span(&w[1]))
            {
                return Err(bad(here, "attribute redefined"));
            }
        }
        Ok(())
    }
}

/// An XML Name, approximately: not empty, no leading digit, `-` or `.`,
/// only name characters (ASCII letters, digits, `_:.-`, any non-ASCII).
fn valid_name(n: &[u8]) -> bool {
    match n.first() {
        None => false,
        Some(&c) if c.is_ascii_digit() || c == b'-' || c == b'.' => false,
        Some(_) => n.iter().all(|&c| {
            c.is_ascii_alphanumeric() || matches!(c, b'_' | b':' | b'.' | b'-') || c >= 0x80
        }),
    }
}

/// Appends character data with XML line-end normalisation (CRLF and CR
/// become LF), transcoding Latin-1 if needed.
fn push_text(t: &[u8], enc: Enc, out: &mut Vec<u8>) {
    let mut i = 0;
    while i < t.len() {
        let b = t[i];
        i += 1;
        match b {
            b'\r' => {
                out.push(b'\n');
                if t.get(i) == Some(&b'\n') {
                    i += 1;
                }
            }
            0x80..=0xff if enc == Enc::Latin1 => push_char(u32::from(b), out),
            _ => out.push(b),
        }
    }
}

fn push_char(c: u32, out: &mut Vec<u8>) {
    let ch = char::from_u32(c).unwrap_or('\u{fffd}');
    let mut buf = [0u8; 4];
    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
}

/// The value of a reference `&name;` (`name` without `&` and `;`).
fn resolve_ref(
    name: &[u8],
    has_dtd: bool,
    enc: Enc,
    out: &mut Vec<u8>,
) -> Result<(), &'static str> {
    match name {
        b"lt" => out.push(b'<'),
        b"gt" => out.push(b'>'),
        b"amp" => out.push(b'&'),
        b"apos" => out.push(b'\''),
        b"quot" => out.push(b'"'),
        [b'#', num @ ..] => {
            let v = match num {
                [b'x', hex @ ..] => parse_num(hex, 16),
                dec => parse_num(dec, 10),
            };
            match v {
                Some(c) if valid_xml_char(c) => push_char(c, out),
                _ => return Err("invalid character reference"),
            }
        }
        _ if has_dtd && valid_name(name) => {
            // Custom entities are not expanded: the reference stays visible.
            out.push(b'&');
            push_text(name, enc, out);
            out.push(b';');
        }
        _ => return Err("Entity not defined"),
    }
    Ok(())
}

fn parse_num(digits: &[u8], radix: u32) -> Option<u32> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u32, |acc, &d| {
        let v = (d as char).to_digit(radix)?;
        acc.checked_mul(radix)?.checked_add(v)
    })
}

/// XML 1.0 `Char`.
fn valid_xml_char(c: u32) -> bool {
    matches!(c, 0x9 | 0xA | 0xD | 0x20..=0xD7FF | 0xE000..=0xFFFD | 0x10000..=0x10FFFF)
}

/// An attribute value as libxml2 reports it: references resolved, literal
/// whitespace normalised to spaces.
fn decode_attr(raw: &[u8], has_dtd: bool, enc: Enc, out: &mut Vec<u8>) -> Result<(), &'static str> {
    out.clear();
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        i += 1;
        match b {
            b'<' => return Err("Unescaped '<' not allowed in attributes values"),
            b'&' => {
                let Some(semi) = memchr::memchr(b';', &raw[i..]) else {
                    return Err("malformed reference in attribute value");
                };
                resolve_ref(&raw[i..i + semi], has_dtd, enc, out)?;
                i += semi + 1;
            }
            b'\r' => {
                out.push(b' ');
                if raw.get(i) == Some(&b'\n') {
                    i += 1;
                }
            }
            b'\n' | b'\t' => out.push(b' '),
            0x80..=0xff if enc == Enc::Latin1 => push_char(u32::from(b), out),
            _ => out.push(b),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
