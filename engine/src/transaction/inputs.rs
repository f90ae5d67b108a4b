//! What the server told the transaction: the connection, the request line,
//! headers and body, what the body processors and the query string parser
//! made of them, and the response. Rules never write here (their state is
//! [`super::state`]), so memoized values of these inputs stay valid while
//! rules run.

use super::fmt::write_u64;
use crate::body::{ArgLimit, ArgSource, BodyParser, BodyResult, BodySink, FileInfo, Processor};
use crate::collection::Collection;
use crate::sources::Coll;
use crate::transform::{is_hex, x2c};
use std::time::Instant;

/// The request and response as received.
pub(super) struct Inputs {
    pub started: Instant,
    pub unique_id: String,
    // connection
    pub remote_addr: Vec<u8>,
    pub remote_port: u16,
    pub server_addr: Vec<u8>,
    pub server_port: u16,
    // request line
    pub method: Vec<u8>,
    pub uri_raw: Vec<u8>,
    pub uri: Vec<u8>,
    pub filename: Vec<u8>,
    pub basename: Option<(usize, usize)>,
    pub query_string: Option<(usize, usize)>,
    pub protocol: Vec<u8>,
    pub request_line: Vec<u8>,
    // request headers and body
    pub headers: Collection,
    pub cookies: Collection,
    pub body: Vec<u8>,
    /// Bytes of request body received, kept or not (what the limits count).
    pub body_received: u64,
    pub processor: Option<Processor>,
    pub body_result: BodyResult,
    pub body_done: bool,
    pub inbound_data_error: bool,
    /// The body kept is a prefix of the one received (a limit was crossed
    /// with `ProcessPartial`, or in DetectionOnly).
    pub body_truncated: bool,
    pub arg_limit: ArgLimit,
    pub parser: BodyParser,
    /// What the query string and body processors produced.
    pub parsed: Parsed,
    // response
    pub status: u16,
    pub response_protocol: Vec<u8>,
    pub response_headers: Collection,
    pub response_body: Vec<u8>,
    /// Bytes of response body received, kept or not.
    pub response_body_received: u64,
    pub response_body_seen: bool,
    pub outbound_data_error: bool,
}

/// Arguments, files and XML made from the query string and the body.
#[derive(Default)]
pub(super) struct Parsed {
    pub args: Collection,
    pub args_get: Collection,
    pub args_post: Collection,
    pub files: Collection,
    pub files_sizes: Collection,
    pub multipart_part_headers: Collection,
    pub multipart_names: Collection,
    pub multipart_filenames: Collection,
    /// `XML:/*` (meaningful when `xml_root_set`; the buffer is kept).
    pub xml_root: Vec<u8>,
    pub xml_root_set: bool,
    pub xml_attrs: Collection,
}

impl Inputs {
    pub(super) fn new(parser: BodyParser, arg_limit: ArgLimit) -> Inputs {
        Inputs {
            started: Instant::now(),
            // Grown by the first `reset`; empty here so that a placeholder
            // (a dropped transaction's, see `Transaction`'s `Drop`) costs no
            // allocation.
            unique_id: String::new(),
            remote_addr: Vec::new(),
            remote_port: 0,
            server_addr: Vec::new(),
            server_port: 0,
            method: Vec::new(),
            uri_raw: Vec::new(),
            uri: Vec::new(),
            filename: Vec::new(),
            basename: None,
            query_string: None,
            protocol: Vec::new(),
            request_line: Vec::new(),
            headers: Collection::default(),
            cookies: Collection::default(),
            body: Vec::new(),
            body_received: 0,
            processor: None,
            body_result: BodyResult::default(),
            body_done: false,
            inbound_data_error: false,
            body_truncated: false,
            arg_limit,
            parser,
            parsed: Parsed::default(),
            status: 0,
            response_protocol: Vec::new(),
            response_headers: Collection::default(),
            response_body: Vec::new(),
            response_body_received: 0,
            response_body_seen: false,
            outbound_data_error: false,
        }
    }

    /// Empties every input, keeping the buffers.
    pub(super) fn clear(&mut self, arg_limit: ArgLimit) {
        self.started = Instant::now();
        self.remote_addr.clear();
        self.remote_port = 0;
        self.server_addr.clear();
        self.server_port = 0;
        self.method.clear();
        self.uri_raw.clear();
        self.uri.clear();
        self.filename.clear();
        self.basename = None;
        self.query_string = None;
        self.protocol.clear();
        self.request_line.clear();
        self.headers.clear();
        self.cookies.clear();
        self.body.clear();
        self.body_received = 0;
        self.processor = None;
        self.body_result.clear();
        self.body_done = false;
        self.inbound_data_error = false;
        self.body_truncated = false;
        self.arg_limit = arg_limit;
        self.parsed.clear();
        self.status = 0;
        self.response_protocol.clear();
        self.response_headers.clear();
        self.response_body.clear();
        self.response_body_received = 0;
        self.response_body_seen = false;
        self.outbound_data_error = false;
    }

    /// The request line: method, URI (decoded, split into path, basename
    /// and query, whose arguments are parsed) and protocol.
    pub(super) fn set_request_line(&mut self, uri: &[u8], method: &[u8], protocol: &[u8]) {
        // A request line without a version is HTTP/0.9 (as servers read it).
        let protocol: &[u8] = if protocol.is_empty() {
            b"HTTP/0.9"
        } else {
            protocol
        };
        set(&mut self.method, method);
        set(&mut self.uri_raw, uri);
        set(&mut self.protocol, protocol);
        self.request_line.clear();
        for part in [method, b" ", uri, b" ", protocol] {
            self.request_line.extend_from_slice(part);
        }
        // The fragment stays in REQUEST_URI_RAW and REQUEST_LINE only (v3 processURI).
        let uri = match memchr::memchr(b'#', uri) {
            Some(f) => &uri[..f],
            None => uri,
        };
        // REQUEST_URI is the decoded URI without scheme and host; the
        // filename and basename are its path.
        uri_decode(uri, &mut self.uri);
        let path_end = memchr::memchr(b'?', &self.uri).unwrap_or(self.uri.len());
        set(&mut self.filename, &self.uri[..path_end]);
        let path = &self.filename;
        self.basename = path
            .iter()
            .rposition(|&c| c == b'/' || c == b'\\')
            .filter(|&i| i + 1 < path.len())
            .map(|i| (i + 1, path.len()));
        let strip = strip_authority(&self.uri);
        if strip > 0 {
            self.uri.drain(..strip);
        }
        self.query_string = memchr::memchr(b'?', uri).map(|q| (q + 1, uri.len()));
        if let Some((s, e)) = self.query_string.filter(|(s, e)| e > s) {
            // Only URLENCODED_ERROR outlives the query parse (no allocation
            // unless the parser reports an error).
            let mut out = BodyResult::default();
            self.parser.query_string(
                &self.uri_raw[s..e],
                &mut self.arg_limit,
                &mut self.parsed,
                &mut out,
            );
            self.body_result.urlencoded_error |= out.urlencoded_error;
        }
    }

    /// One request header, in arrival order: cookies are split out, and the
    /// `Content-Type` selects the body processor.
    pub(super) fn add_request_header(&mut self, name: &[u8], value: &[u8]) {
        self.headers.push(name, value);
        if name.eq_ignore_ascii_case(b"cookie") {
            add_cookies(&mut self.cookies, value);
        }
        if name.eq_ignore_ascii_case(b"content-type") {
            if let Some(p) = Processor::from_content_type(value) {
                self.processor = Some(p);
            }
        }
    }

    /// Runs processor `p` on the body received so far.
    pub(super) fn parse_body(&mut self, p: Processor) {
        let ct = self.headers.get(b"content-type");
        let urlencoded_error = self.body_result.urlencoded_error;
        self.body_result.clear();
        self.parser.body(
            p,
            &self.body,
            ct,
            &mut self.arg_limit,
            &mut self.parsed,
            &mut self.body_result,
        );
        self.body_result.urlencoded_error |= urlencoded_error;
    }

    /// `RESPONSE_CONTENT_TYPE`: the response `Content-Type` up to its `;`.
    pub(super) fn response_content_type(&self) -> Option<&[u8]> {
        let v = self.response_headers.get(b"content-type")?;
        Some(v.split(|&c| c == b';').next().unwrap_or(v))
    }

    /// Memoizable collection `c`.
    pub(super) fn coll(&self, c: Coll) -> &Collection {
        let p = &self.parsed;
        match c {
            Coll::Args => &p.args,
            Coll::ArgsGet => &p.args_get,
            Coll::ArgsPost => &p.args_post,
            Coll::RequestHeaders => &self.headers,
            Coll::RequestCookies => &self.cookies,
            Coll::ResponseHeaders => &self.response_headers,
            Coll::Files => &p.files,
            Coll::FilesSizes => &p.files_sizes,
            Coll::MultipartPartHeaders => &p.multipart_part_headers,
            Coll::MultipartNames => &p.multipart_names,
            Coll::MultipartFilenames => &p.multipart_filenames,
            Coll::XmlAttrs => &p.xml_attrs,
        }
    }
}

impl Parsed {
    fn clear(&mut self) {
        for c in [
            &mut self.args,
            &mut self.args_get,
            &mut self.args_post,
            &mut self.files,
            &mut self.files_sizes,
            &mut self.multipart_part_headers,
            &mut self.multipart_names,
            &mut self.multipart_filenames,
            &mut self.xml_attrs,
        ] {
            c.clear();
        }
        self.xml_root.clear();
        self.xml_root_set = false;
    }
}

/// Receives arguments and body-processor results.
impl BodySink for Parsed {
    fn arg(&mut self, source: ArgSource, name: &[u8], value: &[u8]) {
        self.args.push(name, value);
        if source.in_args_get() {
            self.args_get.push(name, value);
        }
        if source.in_args_post() {
            self.args_post.push(name, value);
        }
    }

    fn file(&mut self, f: &FileInfo<'_>) {
        self.files.push(f.name, f.filename);
        let mut n = [0u8; 20];
        let len = write_u64(&mut n, f.size);
        self.files_sizes.push(f.name, &n[..len]);
    }

    fn multipart_part_header(&mut self, part_name: &[u8], line: &[u8]) {
        self.multipart_part_headers.push(part_name, line);
    }

    fn multipart_name(&mut self, name: &[u8]) {
        self.multipart_names.push(b"", name);
    }

    fn multipart_filename(&mut self, filename: &[u8]) {
        self.multipart_filenames.push(b"", filename);
    }

    fn xml_attribute(&mut self, value: &[u8]) {
        self.xml_attrs.push(b"", value);
    }

    fn xml_root_text(&mut self, text: &[u8]) {
        set(&mut self.xml_root, text);
        self.xml_root_set = true;
    }
}

/// Replaces the contents of `buf` with `value`, keeping its capacity.
pub(super) fn set(buf: &mut Vec<u8>, value: &[u8]) {
    buf.clear();
    buf.extend_from_slice(value);
}
/// v3's `Cookie` header parsing (`Transaction::addRequestHeader`): split on
/// `;`, name up to the first `=` with leading blanks removed, empty names
/// skipped; trailing blanks of the last cookie are dropped.
fn add_cookies(cookies: &mut Collection, value: &[u8]) {
    let mut end = value.len();
    while end > 0 && value[end - 1].is_ascii_whitespace() {
        end -= 1;
    }
    // Trimming the whole value equals trimming its last `;`-part unless that
    // part is all blanks, which is then empty either way (and skipped).
    for c in value[..end].split(|&c| c == b';') {
        if c.is_empty() {
            continue;
        }
        let (k, v) = match memchr::memchr(b'=', c) {
            Some(i) => (&c[..i], &c[i + 1..]),
            None => (c, &b""[..]),
        };
        let k = &k[k
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .unwrap_or(k.len())..];
        if !k.is_empty() {
            cookies.push(k, v);
        }
    }
}
/// v3's `uri_decode`: `%XX` decoded where valid, everything else kept.
fn uri_decode(s: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%' && i + 2 < s.len() && is_hex(s[i + 1]) && is_hex(s[i + 2]) {
            out.push(x2c(s[i + 1], s[i + 2]));
            i += 3;
            continue;
        }
        out.push(s[i]);
        i += 1;
    }
}
/// How many leading bytes of `u` are `scheme://host` (REQUEST_URI never
/// holds the host): 0 unless `u` is absolute with a path.
fn strip_authority(u: &[u8]) -> usize {
    if u.first() == Some(&b'/') {
        return 0;
    }
    let Some(colon) = memchr::memchr(b':', u) else {
        return 0;
    };
    if !u[colon + 1..].starts_with(b"//") {
        return 0;
    }
    let after = colon + 3;
    match memchr::memchr(b'/', &u[after..]) {
        Some(p) => after + p,
        None => 0,
    }
}
