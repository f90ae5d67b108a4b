//! Request corpora for `waf bench`, `waf profile` and `waf suggest`
//! (`--corpus FILE...`).
//!
//! Three formats, chosen per path:
//! - a directory, `*.yaml` or `*.yml`: go-ftw test files (a directory is
//!   searched for `**/*.y*ml`, as `waf test ftw` does). Every stage's request
//!   is built as `waf test ftw` builds it (go-ftw's bytes on the wire, then
//!   the emulated front end, see [`crate::ftw`]); stages whose
//!   request cannot be built, that the front end rejects before the WAF runs,
//!   or of disabled files (`meta.enabled: false`) are skipped and counted.
//!   Ids are `<rule_id>-<test_id>`, with `-s<stage>` when a test has several
//!   stages (as `../shared/peers/corpus/ftw_to_jsonl.py`);
//! - `*.har`: HAR captures, converted exactly as `corpus/har_to_jsonl.py`
//!   converts them (see `har_entry`); ids `<file stem>:<entry index>`;
//! - anything else (`*.jsonl`, ...): request JSONL, one
//!   [`Request`](crate::request::Request) per line, read as `waf eval
//!   --corpus` reads it (an unknown field is an error naming the line). A `*.json` file holding one object with a `log` member is
//!   taken as a HAR file.
//!
//! HAR and JSONL requests use the peers' connection tuple (client
//! `10.0.0.1:40000`, server `127.0.0.1:80`); go-ftw stages use `waf test
//! ftw`'s (client `127.0.0.1`, a new port per request; server `dest_addr`
//! (`localhost` → `127.0.0.1`) and `port`).

use crate::ftw::frontend::{self, Reach};
use crate::ftw::{model, request};
use crate::request::Request as JsonRequest;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use waf_engine::Transaction;

/// The client address of JSONL and HAR requests (the peers' connection tuple).
pub const CLIENT_ADDR: &str = "10.0.0.1";
/// The client port of JSONL and HAR requests.
pub const CLIENT_PORT: u16 = 40000;
/// The server address of JSONL and HAR requests.
pub const SERVER_ADDR: &str = "127.0.0.1";
/// The server port of JSONL and HAR requests.
pub const SERVER_PORT: u16 = 80;

/// `har_to_jsonl.py --max-body` default: larger bodies are skipped.
pub const HAR_MAX_BODY: usize = 16 << 20;

/// One request, as the engine receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorpusRequest {
    /// JSONL `id` (default: line number), `<file stem>:<entry>` (HAR),
    /// `<rule_id>-<test_id>[-s<stage>]` (go-ftw).
    pub id: String,
    /// The method (`GET`).
    pub method: Vec<u8>,
    /// The request target (`/path?query`).
    pub uri: Vec<u8>,
    /// The protocol (`HTTP/1.1`).
    pub version: Vec<u8>,
    /// Header names and values, in order, repeats allowed.
    pub headers: Vec<(Vec<u8>, Vec<u8>)>,
    /// The body (empty: none).
    pub body: Vec<u8>,
    /// The client's address.
    pub client_addr: String,
    /// The client's port.
    pub client_port: u16,
    /// The server's address.
    pub server_addr: String,
    /// The server's port.
    pub server_port: u16,
}

impl CorpusRequest {
    /// Phases 1 and 2, as `waf eval` runs a request: connection, URI,
    /// headers, phase 1, then (unless phase 1 interrupted) the body and
    /// phase 2.
    pub fn feed(&self, tx: &mut Transaction<'_>) {
        tx.process_connection(
            &self.client_addr,
            self.client_port,
            &self.server_addr,
            self.server_port,
        );
        tx.process_uri(&self.uri, &self.method, &self.version);
        for (k, v) in &self.headers {
            tx.add_request_header(k, v);
        }
        tx.process_request_headers();
        if tx.intervention().is_none() {
            if !self.body.is_empty() {
                tx.append_request_body(&self.body);
            }
            tx.process_request_body();
        }
    }

    /// Request line, headers and body, in bytes.
    pub fn size(&self) -> usize {
        self.method.len()
            + self.uri.len()
            + self.version.len()
            + self
                .headers
                .iter()
                .map(|(k, v)| k.len() + v.len())
                .sum::<usize>()
            + self.body.len()
    }

    /// An empty request with the peers' connection tuple.
    pub(crate) fn peers(id: String) -> CorpusRequest {
        CorpusRequest {
            id,
            method: Vec::new(),
            uri: Vec::new(),
            version: Vec::new(),
            headers: Vec::new(),
            body: Vec::new(),
            client_addr: CLIENT_ADDR.into(),
            client_port: CLIENT_PORT,
            server_addr: SERVER_ADDR.into(),
            server_port: SERVER_PORT,
        }
    }
}

/// Every request of the given paths, in order.
#[derive(Debug, Clone, Default)]
pub struct Corpus {
    /// The requests, in the order of the paths and of each file.
    pub requests: Vec<CorpusRequest>,
    /// Entries / stages left out (see `skipped_reasons`).
    pub skipped: usize,
    /// Files read (a go-ftw directory counts its YAML files).
    pub files: usize,
    /// Why entries were skipped (`har: no-headers`, `ftw: ...`), with counts.
    pub skipped_reasons: BTreeMap<String, usize>,
    /// What was fixed or noted on the way (HAR: `har_to_jsonl.py`'s fixes,
    /// e.g. `har: host-added`; go-ftw: `ftw: phase 1 only in waf test ftw`).
    pub notes: BTreeMap<String, usize>,
}

impl Corpus {
    fn skip(&mut self, reason: impl Into<String>) {
        self.skipped += 1;
        *self.skipped_reasons.entry(reason.into()).or_default() += 1;
    }

    fn note(&mut self, what: impl Into<String>) {
        *self.notes.entry(what.into()).or_default() += 1;
    }
}

/// A corpus file that cannot be read: where, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorpusError {
    /// The file (or directory) that cannot be read.
    pub path: PathBuf,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// What is wrong, for a person.
    pub message: String,
}

impl CorpusError {
    fn new(path: &Path, line: Option<usize>, message: impl Into<String>) -> CorpusError {
        CorpusError {
            path: path.to_path_buf(),
            line,
            message: message.into(),
        }
    }
}

impl fmt::Display for CorpusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{l}: {}", self.path.display(), self.message),
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

impl std::error::Error for CorpusError {}

/// How a path is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One JSON request per line.
    Jsonl,
    /// A HAR capture.
    Har,
    /// go-ftw YAML test files.
    Ftw,
}

/// The format of a path from its kind and extension (`None`: `*.json`,
/// decided from the content).
fn format_of(path: &Path) -> Option<Format> {
    if path.is_dir() {
        return Some(Format::Ftw);
    }
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    match ext.as_deref() {
        Some("har") => Some(Format::Har),
        Some("yaml" | "yml") => Some(Format::Ftw),
        Some("json") => None,
        _ => Some(Format::Jsonl),
    }
}

/// Loads every path in order (see the module documentation).
pub fn load(paths: &[PathBuf]) -> Result<Corpus, CorpusError> {
    let mut c = Corpus::default();
    for p in paths {
        load_into(p, &mut c)?;
    }
    Ok(c)
}

/// Loads one path, appending to `c`.
pub fn load_into(path: &Path, c: &mut Corpus) -> Result<(), CorpusError> {
    if !path.exists() {
        return Err(CorpusError::new(path, None, "no such file or directory"));
    }
    let format = format_of(path);
    if format == Some(Format::Ftw) {
        return load_ftw(path, c);
    }
    let bytes = std::fs::read(path).map_err(|e| CorpusError::new(path, None, e.to_string()))?;
    let format = format.unwrap_or_else(|| {
        let text = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(&bytes);
        match serde_json::from_slice::<Value>(text) {
            Ok(v) if v.get("log").is_some() => Format::Har,
            _ => Format::Jsonl,
        }
    });
    match format {
        Format::Har => load_har(path, &bytes, c),
        _ => load_jsonl(path, &bytes, c),
    }
}

// ------------------------------------------------------------------ JSONL

/// As `waf eval --corpus`: blank lines are ignored, any other line must be a
/// request; empty `method`/`uri`/`version` take the defaults.
fn load_jsonl(path: &Path, bytes: &[u8], c: &mut Corpus) -> Result<(), CorpusError> {
    c.files += 1;
    let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    for (n, line) in lines.into_iter().enumerate() {
        let n = n + 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = std::str::from_utf8(line)
            .map_err(|_| CorpusError::new(path, Some(n), "stream did not contain valid UTF-8"))?;
        if line.trim().is_empty() {
            continue;
        }
        let req = JsonRequest::parse(line)
            .and_then(|req| req.to_corpus_request(req.id_or(|| n.to_string())))
            .map_err(|e| CorpusError::new(path, Some(n), e.to_string()))?;
        c.requests.push(req);
    }
    Ok(())
}

// ------------------------------------------------------------------ go-ftw

fn load_ftw(path: &Path, c: &mut Corpus) -> Result<(), CorpusError> {
    let files = crate::ftw::find_test_files(&[path.to_path_buf()])
        .map_err(|e| CorpusError::new(path, None, e.to_string()))?;
    let mut port_seq = 0u32;
    for crate::ftw::TestFilePath { path: file, .. } in files {
        let bytes =
            std::fs::read(&file).map_err(|e| CorpusError::new(&file, None, e.to_string()))?;
        let text = String::from_utf8_lossy(&bytes);
        let tf = match model::parse_test_file(&text) {
            Ok(Some(tf)) => tf,
            Ok(None) => {
                c.files += 1;
                continue;
            }
            Err(e) => {
                let e = e.lines().next().unwrap_or_default().to_string();
                return Err(CorpusError::new(
                    &file,
                    None,
                    format!("cannot parse the test file: {e}"),
                ));
            }
        };
        c.files += 1;
        let rule_id = tf.rule_id.clone().unwrap_or_else(|| {
            file.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
        let enabled = tf.meta.enabled.unwrap_or(true);
        for t in &tf.tests {
            let several = t.stages.len() > 1;
            for (si, item) in t.stages.iter().enumerate() {
                if !enabled {
                    c.skip("ftw: disabled (meta.enabled: false)");
                    continue;
                }
                let input = item.normalized().input;
                let id = if several {
                    format!("{rule_id}-{}-s{}", t.test_id, si + 1)
                } else {
                    format!("{rule_id}-{}", t.test_id)
                };
                let Ok(raw) = request::build(&input) else {
                    c.skip("ftw: the request cannot be built");
                    continue;
                };
                let rec = frontend::receive(&request::split(&raw));
                match rec.reach {
                    Reach::None => {
                        c.skip("ftw: rejected by the front end before the WAF");
                        continue;
                    }
                    Reach::Phase1 => c.note("ftw: phase 1 only in waf test ftw"),
                    Reach::All => {}
                }
                // As `ftw::stage::execute`.
                let dest = input.dest_addr.as_deref().unwrap_or("localhost");
                let server = if dest.eq_ignore_ascii_case("localhost") {
                    "127.0.0.1"
                } else {
                    dest
                };
                let client_port = (20000 + port_seq % 40000) as u16;
                port_seq += 1;
                let r = rec.request;
                c.requests.push(CorpusRequest {
                    id,
                    method: r.method,
                    uri: r.uri,
                    version: r.version,
                    headers: r.headers,
                    body: r.body,
                    client_addr: "127.0.0.1".into(),
                    client_port,
                    server_addr: server.to_string(),
                    server_port: input.port.unwrap_or(80).min(u16::MAX as u32) as u16,
                });
            }
        }
    }
    Ok(())
}

// ------------------------------------------------------------------ HAR

/// A HAR file, converted as `corpus/har_to_jsonl.py` converts it (its
/// skips and fixes are counted with a `har: ` prefix). Unlike the script,
/// a file that is not UTF-8 JSON with a `log.entries` list is an error.
fn load_har(path: &Path, bytes: &[u8], c: &mut Corpus) -> Result<(), CorpusError> {
    let text = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    let text = std::str::from_utf8(text)
        .map_err(|e| CorpusError::new(path, None, format!("not UTF-8: {e}")))?;
    let doc: Value = serde_json::from_str(text)
        .map_err(|e| CorpusError::new(path, Some(e.line()), format!("invalid JSON: {e}")))?;
    let entries = doc
        .get("log")
        .and_then(|l| l.get("entries"))
        .and_then(Value::as_array)
        .ok_or_else(|| CorpusError::new(path, None, "not a HAR file: no log.entries list"))?;
    c.files += 1;
    let mut stats: BTreeMap<&'static str, usize> = BTreeMap::new();
    if bytes.starts_with(b"\xef\xbb\xbf") {
        *stats.entry("bom").or_default() += 1;
    }
    let fname = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = if fname.to_ascii_lowercase().ends_with(".har") {
        &fname[..fname.len() - 4]
    } else {
        &fname[..]
    };
    for (i, entry) in entries.iter().enumerate() {
        match har_entry(entry, &mut stats, HAR_MAX_BODY) {
            Ok(h) => c.requests.push(CorpusRequest {
                method: h.method.into_bytes(),
                uri: h.uri.into_bytes(),
                version: h.version.as_bytes().to_vec(),
                headers: h
                    .headers
                    .into_iter()
                    .map(|(k, v)| (k.into_bytes(), v.into_bytes()))
                    .collect(),
                body: h.body.unwrap_or_default(),
                ..CorpusRequest::peers(format!("{stem}:{i}"))
            }),
            Err(why) => c.skip(format!("har: {why}")),
        }
    }
    for (k, n) in stats {
        *c.notes.entry(format!("har: {k}")).or_default() += n;
    }
    Ok(())
}

/// One HAR entry as `har_to_jsonl.py` writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HarRequest {
    pub method: String,
    pub uri: String,
    pub version: &'static str,
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
}

type Stats = BTreeMap<&'static str, usize>;

fn bump(stats: &mut Stats, k: &'static str) {
    *stats.entry(k).or_default() += 1;
}

/// Python's `str.isspace()`.
fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// Python's `str.strip()`.
fn py_strip(s: &str) -> &str {
    s.trim_matches(py_space)
}

/// Python's truthiness of a JSON value.
fn truthy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
    }
}

/// The script's `text_of` (numbers as `json.dumps` writes them; arrays and
/// objects, which Python writes with `str()`, as JSON).
fn text_of(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) if n.is_f64() => py_float(n.as_f64().unwrap_or_default()),
        Some(other) => other.to_string(),
    }
}

/// Python's `repr(float)`.
fn py_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let e = format!("{:e}", f); // shortest digits: `-1.25e-7`
    let (mant, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mant) = match mant.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mant),
    };
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    if !(-4..16).contains(&exp) {
        let m = if digits.len() > 1 {
            format!("{}.{}", &digits[..1], &digits[1..])
        } else {
            digits
        };
        return format!(
            "{sign}{m}e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        );
    }
    let point = exp + 1; // digits before the decimal point
    let s = if point <= 0 {
        format!("0.{}{digits}", "0".repeat((-point) as usize))
    } else if point as usize >= digits.len() {
        format!("{digits}{}.0", "0".repeat(point as usize - digits.len()))
    } else {
        format!(
            "{}.{}",
            &digits[..point as usize],
            &digits[point as usize..]
        )
    };
    format!("{sign}{s}")
}

/// `norm_version`: the `HTTP/x.y` form of a recognised version.
fn norm_version(v: &str) -> Option<&'static str> {
    let s = py_strip(v).to_lowercase();
    let s = s.strip_prefix("http/").unwrap_or(&s);
    if s.starts_with("h3-") {
        return Some("HTTP/3.0");
    }
    Some(match s {
        "h2" | "h2c" | "2" | "2.0" => "HTTP/2.0",
        "h3" | "3" | "3.0" => "HTTP/3.0",
        "1.1" => "HTTP/1.1",
        "1.0" => "HTTP/1.0",
        "0.9" => "HTTP/0.9",
        _ => return None,
    })
}

const WPT_JUNK: [&str; 8] = ["me:", "od:", "ori", "th:", "ty:", "st:", "eme", "ath"];

fn is_tchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+.^_`|~-".contains(c)
}

/// `TOKEN.match(name)` (Python's `$` also matches before a final newline).
fn is_token(name: &str) -> bool {
    let n = name.strip_suffix('\n').unwrap_or(name);
    !n.is_empty() && n.chars().all(is_tchar)
}

/// `REQUEST_LINE.match(s)`: `^([A-Z]+) (\S+) (HTTP/\d(?:\.\d)?)$` → (target, version).
fn request_line(s: &str) -> Option<(&str, &str)> {
    let m = s.find(|c: char| !c.is_ascii_uppercase()).unwrap_or(s.len());
    if m == 0 {
        return None;
    }
    let rest = s[m..].strip_prefix(' ')?;
    let t = rest.find(py_space).unwrap_or(rest.len());
    if t == 0 {
        return None;
    }
    let version = rest[t..].strip_prefix(' ')?;
    let v = version.strip_prefix("HTTP/")?.as_bytes();
    let ok = match v {
        [a] => a.is_ascii_digit(),
        [a, b'.', b] => a.is_ascii_digit() && b.is_ascii_digit(),
        _ => false,
    };
    ok.then_some((&rest[..t], version))
}

/// End of `^[A-Za-z][A-Za-z0-9+.-]*://` in `u`.
fn scheme_end(u: &str) -> Option<usize> {
    let b = u.as_bytes();
    if !b.first()?.is_ascii_alphabetic() {
        return None;
    }
    let n = b
        .iter()
        .position(|&c| !(c.is_ascii_alphanumeric() || matches!(c, b'+' | b'.' | b'-')))
        .unwrap_or(b.len());
    u[n..].starts_with("://").then_some(n + 3)
}

/// `url_target`: path + `?query` of a URL as recorded (no re-encoding).
fn url_target(url: &str) -> Option<String> {
    let u = url.split('#').next().unwrap_or_default();
    let rest = if let Some(s) = scheme_end(u) {
        let a = u[s..].find(['/', '?']).map_or(u.len(), |i| s + i);
        &u[a..]
    } else if u.starts_with('/') || u == "*" {
        u
    } else {
        return None;
    };
    Some(if rest.is_empty() {
        "/".into()
    } else if rest.starts_with('?') {
        format!("/{rest}")
    } else {
        rest.into()
    })
}

/// `url_authority`: host[:port] of an absolute URL, without userinfo and
/// the scheme's default port.
fn url_authority(url: &str) -> Option<String> {
    let s = scheme_end(url)?;
    let end = url[s..].find(['/', '?', '#']).map_or(url.len(), |i| s + i);
    let mut auth = &url[s..end];
    if let Some(i) = auth.rfind('@') {
        auth = &auth[i + 1..];
    }
    let scheme = url.split(':').next().unwrap_or_default().to_lowercase();
    if (scheme == "http" && auth.ends_with(":80")) || (scheme == "https" && auth.ends_with(":443"))
    {
        auth = &auth[..auth.rfind(':').unwrap_or(auth.len())];
    }
    (!auth.is_empty()).then(|| auth.to_string())
}

/// Python's `base64.b64decode(s, validate=False)` (binascii's non-strict
/// `a2b_base64`): characters outside the alphabet are ignored, decoding
/// stops at a complete padding.
fn py_b64decode(s: &str) -> Result<Vec<u8>, ()> {
    if !s.is_ascii() {
        return Err(());
    }
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut quad, mut left, mut pads) = (0u8, 0u32, 0u8);
    for c in s.bytes() {
        if c == b'=' {
            if quad >= 2 {
                pads += 1;
                if quad + pads >= 4 {
                    return Ok(out);
                }
            }
            continue;
        }
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => continue,
        } as u32;
        pads = 0;
        match quad {
            0 => {
                left = v;
                quad = 1;
            }
            1 => {
                out.push(((left << 2) | (v >> 4)) as u8);
                left = v & 0x0f;
                quad = 2;
            }
            2 => {
                out.push(((left << 4) | (v >> 2)) as u8);
                left = v & 0x03;
                quad = 3;
            }
            _ => {
                out.push(((left << 6) | v) as u8);
                quad = 0;
            }
        }
    }
    if quad == 0 {
        Ok(out)
    } else {
        Err(())
    }
}

/// `boundary="?([^";]+)"?` (case-insensitive search) → the boundary.
fn multipart_boundary(ct: &str) -> Option<&str> {
    let lower = ct.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find("boundary=") {
        let start = from + i + "boundary=".len();
        let run = |s: &str| s.find(['"', ';']).unwrap_or(s.len());
        let rest = &ct[start..];
        if let Some(q) = rest.strip_prefix('"') {
            let n = run(q);
            if n > 0 {
                return Some(&q[..n]);
            }
        }
        let n = run(rest);
        if n > 0 {
            return Some(&rest[..n]);
        }
        from = start;
    }
    None
}

/// `body_from_postdata`: the recorded body, or `None`.
fn body_from_postdata(
    pd: Option<&Value>,
    content_type: Option<&str>,
    stats: &mut Stats,
) -> Option<Vec<u8>> {
    let pd = pd?.as_object()?;
    if let Some(Value::String(text)) = pd.get("text") {
        if !text.is_empty() {
            if text_of(pd.get("encoding")).to_lowercase() == "base64" {
                match py_b64decode(text) {
                    Ok(b) => return Some(b),
                    Err(()) => bump(stats, "bad-base64-kept-as-text"),
                }
            }
            let binary = text
                .chars()
                .any(|c| (c < ' ' && !"\t\r\n".contains(c)) || ('\x7f'..'\u{a0}').contains(&c));
            if binary && text.chars().all(|c| (c as u32) < 256) {
                bump(stats, "binary-body");
                return Some(text.chars().map(|c| c as u8).collect());
            }
            return Some(text.as_bytes().to_vec());
        }
    }
    let params = pd.get("params")?.as_array().filter(|p| !p.is_empty())?;
    let ct_raw = match content_type {
        Some(ct) if !ct.is_empty() => ct.to_string(),
        _ => text_of(pd.get("mimeType")),
    };
    if ct_raw.to_lowercase().contains("multipart/form-data") {
        let Some(b) = multipart_boundary(&ct_raw) else {
            bump(stats, "params-without-boundary");
            return None;
        };
        let mut out = String::new();
        for p in params.iter().filter_map(Value::as_object) {
            let mut disp = format!("form-data; name=\"{}\"", text_of(p.get("name")));
            if p.get("fileName").is_some_and(|f| !f.is_null()) {
                disp += &format!("; filename=\"{}\"", text_of(p.get("fileName")));
            }
            out += &format!("--{b}\r\nContent-Disposition: {disp}\r\n");
            if truthy(p.get("contentType")) {
                out += &format!("Content-Type: {}\r\n", text_of(p.get("contentType")));
            }
            out += &format!("\r\n{}\r\n", text_of(p.get("value")));
        }
        out += &format!("--{b}--\r\n");
        bump(stats, "body-from-params");
        return Some(out.into_bytes());
    }
    bump(stats, "body-from-params");
    let pairs: Vec<String> = params
        .iter()
        .filter_map(Value::as_object)
        .map(|p| format!("{}={}", text_of(p.get("name")), text_of(p.get("value"))))
        .collect();
    Some(pairs.join("&").into_bytes())
}

fn indices(headers: &[(String, String)], name: &str) -> Vec<usize> {
    headers
        .iter()
        .enumerate()
        .filter(|(_, (n, _))| n.to_lowercase() == name)
        .map(|(i, _)| i)
        .collect()
}

/// One HAR entry (`convert_entry` of `corpus/har_to_jsonl.py`), or the
/// reason it is skipped. Known differences: a body re-compressed because
/// `Content-Encoding: gzip`/`deflate` says so is compressed by flate2
/// (miniz_oxide), not CPython's zlib, at the same levels (9 / 6), so its
/// bytes and `Content-Length` may differ from the script's; and arrays or objects where
/// the script expects text are written as JSON, not as Python `str()`.
pub(crate) fn har_entry(
    entry: &Value,
    stats: &mut Stats,
    max_body: usize,
) -> Result<HarRequest, &'static str> {
    let r = entry
        .get("request")
        .and_then(Value::as_object)
        .ok_or("bad-entry")?;
    let url = py_strip(&text_of(r.get("url"))).to_string();
    let method = py_strip(&text_of(r.get("method"))).to_string();
    let mut method = if method.is_empty() {
        "GET".to_string()
    } else {
        method
    };
    let raw_headers: &[Value] = r
        .get("headers")
        .and_then(Value::as_array)
        .map_or(&[], |v| v);

    const AUTHORITY: &str = "\0authority";
    let mut pseudo: BTreeMap<String, String> = BTreeMap::new();
    let mut line: Option<(String, String)> = None;
    let mut headers: Vec<(String, String)> = Vec::new();
    for h in raw_headers {
        let Some(h) = h.as_object() else {
            bump(stats, "bad-header-dropped");
            continue;
        };
        let name = text_of(h.get("name"));
        let value = text_of(h.get("value"));
        if py_strip(&name).is_empty() {
            bump(stats, "empty-name-header-dropped");
            continue;
        }
        if name.starts_with(':') {
            let lname = name.to_lowercase();
            let is_authority = lname == ":authority";
            pseudo.entry(lname).or_insert_with(|| value.clone());
            if is_authority {
                headers.push((AUTHORITY.into(), value));
            }
            continue;
        }
        if !is_token(&name) {
            let joined = format!("{name}:{value}");
            match request_line(py_strip(&joined)) {
                Some((t, v)) if line.is_none() => {
                    line = Some((t.to_string(), v.to_string()));
                    bump(stats, "request-line-header");
                }
                _ => bump(stats, "invalid-name-header-dropped"),
            }
            continue;
        }
        headers.push((name, value.replace(['\r', '\n'], " ")));
    }
    if headers.is_empty() && pseudo.is_empty() && line.is_none() {
        return Err("no-headers");
    }

    // uri
    let mut uri = pseudo
        .get(":path")
        .filter(|p| !p.is_empty())
        .cloned()
        .or_else(|| line.as_ref().map(|l| l.0.clone()))
        .unwrap_or_default();
    if uri.is_empty() {
        if url.is_empty() {
            return Err("no-url");
        }
        uri = url_target(&url).ok_or("no-url")?;
    }
    if let Some(m) = pseudo.get(":method") {
        if !py_strip(m).is_empty() {
            method = py_strip(m).to_string();
        }
    }

    // version
    let raw_v = text_of(r.get("httpVersion"));
    let version = match norm_version(&raw_v) {
        Some(v) => v,
        None => {
            let resp_v = entry
                .get("response")
                .filter(|v| v.is_object())
                .and_then(|resp| norm_version(&text_of(resp.get("httpVersion"))));
            let resp_h2 = matches!(resp_v, Some("HTTP/2.0" | "HTTP/3.0"));
            let v = if let Some((_, lv)) = &line {
                norm_version(lv).unwrap_or("HTTP/1.1")
            } else if !pseudo.is_empty()
                || WPT_JUNK.contains(&py_strip(&raw_v).to_lowercase().as_str())
                || resp_h2
            {
                if resp_h2 {
                    resp_v.unwrap_or("HTTP/2.0")
                } else {
                    "HTTP/2.0"
                }
            } else {
                resp_v.unwrap_or("HTTP/1.1")
            };
            bump(stats, "version-inferred");
            v
        }
    };
    let h2 = matches!(version, "HTTP/2.0" | "HTTP/3.0");

    // :authority -> Host (only when there is no Host header already)
    let mut has_host = headers.iter().any(|(n, _)| n.to_lowercase() == "host");
    let mut fixed = Vec::with_capacity(headers.len() + 2);
    for (n, v) in headers {
        if n == AUTHORITY {
            if !has_host {
                fixed.push(("Host".to_string(), v));
                has_host = true;
            }
            continue;
        }
        fixed.push((n, v));
    }
    let mut headers = fixed;
    if !has_host {
        if let Some(auth) = url_authority(&url) {
            headers.push(("Host".into(), auth));
            bump(stats, "host-added");
        }
    }

    // cookies
    let cookie_idx = indices(&headers, "cookie");
    if h2 && cookie_idx.len() > 1 {
        let joined: Vec<&str> = cookie_idx.iter().map(|&i| headers[i].1.as_str()).collect();
        let joined = joined.join("; ");
        let first = cookie_idx[0];
        headers[first].1 = joined;
        headers = headers
            .into_iter()
            .enumerate()
            .filter(|(i, _)| *i == first || !cookie_idx.contains(i))
            .map(|(_, h)| h)
            .collect();
        bump(stats, "cookie-fields-joined");
    } else if cookie_idx.is_empty() {
        if let Some(cookies) = r.get("cookies").and_then(Value::as_array) {
            let parts: Vec<String> = cookies
                .iter()
                .filter_map(Value::as_object)
                .filter(|c| !text_of(c.get("name")).is_empty())
                .map(|c| format!("{}={}", text_of(c.get("name")), text_of(c.get("value"))))
                .collect();
            if !parts.is_empty() {
                headers.push(("Cookie".into(), parts.join("; ")));
                bump(stats, "cookie-header-from-cookies");
            }
        }
    }

    // body
    let ct = headers
        .iter()
        .find(|(n, _)| n.to_lowercase() == "content-type")
        .map(|(_, v)| v.clone());
    let mut body = body_from_postdata(r.get("postData"), ct.as_deref(), stats);
    let cl_idx = indices(&headers, "content-length");
    if body.as_ref().is_some_and(Vec::is_empty) {
        body = None;
    }
    if let Some(b) = &mut body {
        let ce_idx = indices(&headers, "content-encoding");
        if let Some(&last) = ce_idx.last() {
            let enc = py_strip(&headers[last].1).to_lowercase();
            let zipped = matches!(enc.as_str(), "gzip" | "x-gzip" | "deflate");
            if zipped && !is_compressed(b, enc == "deflate") {
                *b = if enc == "deflate" { zlib(b) } else { gzip(b) };
                bump(stats, "body-recompressed");
            } else if !zipped && enc != "identity" {
                headers = headers
                    .into_iter()
                    .enumerate()
                    .filter(|(i, _)| !ce_idx.contains(i))
                    .map(|(_, h)| h)
                    .collect();
                bump(stats, "content-encoding-dropped");
            }
        }
        if b.len() > max_body {
            return Err("body-too-large");
        }
        let len = b.len().to_string();
        if cl_idx.is_empty() {
            headers.push(("Content-Length".into(), len));
            bump(stats, "content-length-added");
        } else {
            // The script's indices, taken before a Content-Encoding header
            // was dropped.
            for &i in &cl_idx {
                if let Some(h) = headers.get_mut(i) {
                    if py_strip(&h.1) != len {
                        h.1 = len.clone();
                        bump(stats, "content-length-corrected");
                    }
                }
            }
        }
    } else if cl_idx
        .iter()
        .any(|&i| !matches!(py_strip(&headers[i].1), "" | "0"))
    {
        bump(stats, "body-not-recorded");
    }

    Ok(HarRequest {
        method,
        uri,
        version,
        headers,
        body,
    })
}

// ------------------------------------------------------------------ gzip / zlib

/// The script's `is_compressed`: a gzip magic number, or a zlib or raw
/// deflate stream that inflates.
fn is_compressed(data: &[u8], deflate: bool) -> bool {
    if !deflate {
        return data.starts_with(b"\x1f\x8b");
    }
    inflates(data, true) || inflates(data, false)
}

/// `zlib.decompress(data)` (`zlib`) or `zlib.decompress(data, -15)` (raw
/// deflate) succeeds: the stream is valid and complete (bytes after its end
/// are ignored). The output is thrown away as it comes, so a small
/// compressed body cannot make this allocate much.
fn inflates(data: &[u8], zlib: bool) -> bool {
    let mut d = flate2::Decompress::new(zlib);
    let mut scratch = vec![0u8; 32 << 10];
    loop {
        let (in_before, out_before) = (d.total_in(), d.total_out());
        let rest = data.get(in_before as usize..).unwrap_or_default();
        match d.decompress(rest, &mut scratch, flate2::FlushDecompress::None) {
            Ok(flate2::Status::StreamEnd) => return true,
            Ok(_) if d.total_in() == in_before && d.total_out() == out_before => return false,
            Ok(_) => {}
            Err(_) => return false,
        }
    }
}

/// `gzip.compress(data, mtime=0)` (level 9; flate2's encoder, so the bytes
/// may differ from CPython's zlib, the payload does not).
fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut e = flate2::GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), flate2::Compression::best());
    // Writing to a Vec cannot fail.
    let _ = e.write_all(data);
    e.finish().unwrap_or_default()
}

/// `zlib.compress(data)` (level 6; see [`gzip`]).
fn zlib(data: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    let _ = e.write_all(data);
    e.finish().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/corpus")
            .join(name)
    }

    fn gunzip(b: &[u8]) -> Vec<u8> {
        use std::io::Read as _;
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(b)
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    fn text(b: &[u8]) -> &str {
        std::str::from_utf8(b).unwrap()
    }

    fn headers(r: &CorpusRequest) -> Vec<(&str, &str)> {
        r.headers.iter().map(|(k, v)| (text(k), text(v))).collect()
    }

    #[test]
    fn jsonl_as_waf_eval_reads_it() {
        let c = load(&[fixture("requests.jsonl")]).unwrap();
        assert_eq!((c.files, c.skipped, c.requests.len()), (1, 0, 4));
        let ids: Vec<&str> = c.requests.iter().map(|r| r.id.as_str()).collect();
        // Default id: the line number (blank lines count).
        assert_eq!(ids, ["get", "3", "7", "text"]);
        let r = &c.requests[0];
        assert_eq!(text(&r.uri), "/search?q=shoes");
        assert_eq!(
            headers(r),
            [
                ("Host", "example.com"),
                ("Accept", "*/*"),
                ("Accept", "text/html")
            ]
        );
        assert_eq!(
            (
                r.client_addr.as_str(),
                r.client_port,
                r.server_addr.as_str(),
                r.server_port
            ),
            ("10.0.0.1", 40000, "127.0.0.1", 80)
        );
        // Empty fields take the defaults.
        let r = &c.requests[1];
        assert_eq!(
            (text(&r.method), text(&r.uri), text(&r.version)),
            ("GET", "/", "HTTP/1.1")
        );
        // body_b64 wins over body.
        assert_eq!(c.requests[2].body, b"\x00\xff\nA");
        assert_eq!(c.requests[3].body, b"user=a&pass=b");
    }

    #[test]
    fn malformed_jsonl_line_is_an_error_with_its_line() {
        let e = load(&[fixture("malformed.jsonl")]).unwrap_err();
        assert_eq!(e.line, Some(3));
        assert!(e.path.ends_with("malformed.jsonl"));
        let shown = e.to_string();
        assert!(
            shown.contains("malformed.jsonl:3: invalid request"),
            "{shown}"
        );
        let e = load(&[fixture("nosuchfile.jsonl")]).unwrap_err();
        assert_eq!(e.line, None);
        assert!(e
            .to_string()
            .ends_with("nosuchfile.jsonl: no such file or directory"));
    }

    #[test]
    fn har_as_har_to_jsonl_converts_it() {
        let c = load(&[fixture("tiny.har")]).unwrap();
        assert_eq!((c.files, c.requests.len(), c.skipped), (1, 3, 1));
        assert_eq!(c.skipped_reasons["har: no-headers"], 1);
        let r = &c.requests[0];
        assert_eq!(r.id, "tiny:0");
        assert_eq!(
            (text(&r.method), text(&r.uri), text(&r.version)),
            ("POST", "/cart/add?item=42&qty=1", "HTTP/2.0")
        );
        // Pseudo-headers dropped, `:authority` → Host, h2 cookies joined.
        assert_eq!(
            headers(r),
            [
                ("Host", "shop.example.com"),
                ("content-type", "application/x-www-form-urlencoded"),
                ("cookie", "a=1; b=2"),
                ("user-agent", "Mozilla/5.0"),
                ("Content-Length", "13")
            ]
        );
        assert_eq!(r.body, b"item=42&qty=1");
        // Host from the URL, Cookie from request.cookies, version inferred.
        let r = &c.requests[1];
        assert_eq!(r.id, "tiny:1");
        assert_eq!(
            (text(&r.uri), text(&r.version)),
            ("/img/logo.png", "HTTP/1.1")
        );
        assert_eq!(
            headers(r),
            [
                ("Accept", "image/*"),
                ("Host", "static.example.com:8080"),
                ("Cookie", "sid=xyz")
            ]
        );
        // base64 postData; Content-Length corrected.
        let r = &c.requests[2];
        assert_eq!(r.id, "tiny:3");
        assert_eq!(r.body, b"\x00\xff");
        assert_eq!(
            headers(r),
            [("Host", "api.example.com"), ("Content-Length", "2")]
        );
        for fix in [
            "content-length-added",
            "content-length-corrected",
            "cookie-fields-joined",
            "cookie-header-from-cookies",
            "host-added",
            "version-inferred",
        ] {
            assert_eq!(c.notes[&format!("har: {fix}")], 1, "{fix}");
        }
    }

    #[test]
    fn har_helpers() {
        assert_eq!(
            url_target("https://h/a/b?c=1#f").as_deref(),
            Some("/a/b?c=1")
        );
        assert_eq!(url_target("https://h?x").as_deref(), Some("/?x"));
        assert_eq!(url_target("https://h").as_deref(), Some("/"));
        assert_eq!(url_target("h/x"), None);
        assert_eq!(url_authority("http://u:p@h:80/x").as_deref(), Some("h"));
        assert_eq!(url_authority("https://h:80/x").as_deref(), Some("h:80"));
        assert_eq!(norm_version(" HTTP/2 "), Some("HTTP/2.0"));
        assert_eq!(norm_version("h3-29"), Some("HTTP/3.0"));
        assert_eq!(norm_version("unknown"), None);
        assert_eq!(
            request_line("GET /a?b HTTP/1.1"),
            Some(("/a?b", "HTTP/1.1"))
        );
        assert_eq!(request_line("GET /a b HTTP/1.1"), None);
        assert!(is_token("X-A\n") && !is_token("X A"));
        assert_eq!(py_b64decode("AP 8=\n=junk"), Ok(vec![0, 0xff]));
        assert_eq!(py_b64decode("AP8"), Err(()));
        assert_eq!(py_float(1.0), "1.0");
        assert_eq!(py_float(1e16), "1e+16");
        assert_eq!(py_float(0.0001), "0.0001");
        assert_eq!(py_float(1.5e-5), "1.5e-05");
        assert_eq!(
            multipart_boundary("multipart/form-data; BOUNDARY=\"x y\"; a=b"),
            Some("x y")
        );
        // Re-compressed gzip / zlib streams inflate back, and are seen as compressed.
        let data = b"hello hello hello".repeat(5000);
        let gz = gzip(&data);
        assert!(is_compressed(&gz, false));
        assert_eq!(gunzip(&gz), data);
        assert!(is_compressed(&zlib(&data), true));
        assert!(!is_compressed(b"plain text", true));
        // zlib.compress(b"hello"), with and without its header; truncated.
        let z = b"\x78\x9c\xcb\x48\xcd\xc9\xc9\x07\x00\x06\x2c\x02\x15";
        assert!(inflates(z, true) && is_compressed(z, true));
        assert!(inflates(&z[2..], false) && is_compressed(&z[2..], true));
        assert!(!inflates(&z[..8], true) && !is_compressed(&z[2..6], true));
        // A wrong Adler-32 is not a zlib stream.
        let mut bad = z.to_vec();
        bad[12] ^= 1;
        assert!(!inflates(&bad, true));
    }

    #[test]
    fn ftw_stages_as_waf_test_ftw_builds_them() {
        let c = load(&[fixture("ftw")]).unwrap();
        // 100.yaml, sub/200.yml, sub/disabled.yaml (not notes.txt).
        assert_eq!(c.files, 3);
        let ids: Vec<&str> = c.requests.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["100-1", "100-2-s1", "100-2-s2", "200-1"]);
        assert_eq!(c.skipped, 3);
        assert_eq!(c.skipped_reasons["ftw: the request cannot be built"], 1);
        assert_eq!(
            c.skipped_reasons["ftw: rejected by the front end before the WAF"],
            1
        );
        assert_eq!(c.skipped_reasons["ftw: disabled (meta.enabled: false)"], 1);
        let r = &c.requests[0];
        assert_eq!((text(&r.method), text(&r.uri)), ("POST", "/post"));
        // Sorted headers, then the autocompleted ones; form data encoded.
        assert_eq!(
            headers(r),
            [
                ("Host", "localhost"),
                ("User-Agent", "fixture"),
                ("Content-Type", "application/x-www-form-urlencoded"),
                ("Connection", "close"),
                ("Content-Length", "11")
            ]
        );
        assert_eq!(r.body, b"a=%3Cb+c%3E");
        assert_eq!(
            (
                r.client_addr.as_str(),
                r.server_addr.as_str(),
                r.server_port
            ),
            ("127.0.0.1", "127.0.0.1", 8080)
        );
        assert_eq!(text(&c.requests[2].uri), "/second");
        let r = &c.requests[3];
        assert_eq!((text(&r.uri), text(&r.version)), ("/raw?x=1", "HTTP/1.1"));
        assert_eq!(headers(r), [("Host", "localhost")]);
        // A single file works too.
        let one = load(&[fixture("ftw/sub/200.yml")]).unwrap();
        assert_eq!((one.files, one.requests.len()), (1, 1));
    }

    #[test]
    fn feed_runs_phases_1_and_2_as_waf_eval() {
        let rules = r#"
SecRuleEngine On
SecRequestBodyAccess On
SecRule REMOTE_ADDR "@streq 10.0.0.1" "id:1,phase:1,pass,log"
SecRule REQUEST_PROTOCOL "@streq HTTP/1.1" "id:2,phase:1,pass,log"
SecRule ARGS:pass "@streq b" "id:3,phase:2,deny,status:403,log"
SecRule REQUEST_URI "@beginsWith /upload" "id:4,phase:1,deny,status:403,log"
SecRule REQUEST_BODY "@rx ." "id:5,phase:2,pass,log"
"#;
        let compiled = waf_compiler::compile_str("t.conf", rules, &Default::default());
        let rs = waf_engine::Ruleset::from_compiled(compiled).unwrap();
        let c = load(&[fixture("requests.jsonl")]).unwrap();
        assert!(!c.requests.is_empty());
        for r in &c.requests {
            let mut tx = rs.transaction();
            r.feed(&mut tx);
            let ids: Vec<u64> = tx.matched_rules().map(|m| m.id).collect();
            let d = crate::request::decide(&rs, r);
            assert_eq!(ids, d.matched_ids_all, "{}", r.id);
            assert_eq!(tx.intervention().map(|i| i.rule_id), d.rule_id, "{}", r.id);
            // The peers' client address reaches the rules.
            assert!(ids.contains(&1), "{}", r.id);
        }
    }

    /// `../shared` (or `$WAF_SHARED_DIR`), when present.
    fn shared() -> Option<PathBuf> {
        let d = std::env::var_os("WAF_SHARED_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared"));
        if d.is_dir() {
            Some(d)
        } else {
            eprintln!(
                "skipped: no shared directory at `{}` (set WAF_SHARED_DIR)",
                d.display()
            );
            None
        }
    }

    #[test]
    fn real_har_files_as_the_script() {
        let Some(shared) = shared() else { return };
        let mut files: Vec<PathBuf> = std::fs::read_dir(shared.join("corpus/har"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "har"))
            .collect();
        files.sort();
        let c = load(&files).unwrap();
        eprintln!(
            "HAR: {} files, {} requests, {} skipped {:?}; notes {:?}",
            c.files,
            c.requests.len(),
            c.skipped,
            c.skipped_reasons,
            c.notes
        );
        assert_eq!(c.files, files.len());
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus/har_to_jsonl.py");
        let out = std::env::temp_dir().join(format!("waf-corpus-har-{}.jsonl", std::process::id()));
        let run = std::process::Command::new("python3")
            .arg(&script)
            .args(&files)
            .arg("--out")
            .arg(&out)
            .output();
        let run = match run {
            Ok(r) if r.status.success() => r,
            other => {
                eprintln!("python3 unavailable or failed ({other:?}): only loaded");
                return;
            }
        };
        let py = load(std::slice::from_ref(&out)).unwrap();
        std::fs::remove_file(&out).ok();
        assert_eq!(c.requests.len(), py.requests.len());
        let mut recompressed = 0;
        for (a, b) in c.requests.iter().zip(&py.requests) {
            let gz = a.headers.iter().any(|(k, v)| {
                k.eq_ignore_ascii_case(b"content-encoding") && v.trim_ascii() == b"gzip"
            });
            if gz && a.body != b.body {
                // flate2 here, CPython's zlib there: same payload.
                recompressed += 1;
                assert_eq!(gunzip(&a.body), gunzip(&b.body));
                let strip = |r: &CorpusRequest| {
                    let mut h = r.headers.clone();
                    h.retain(|(k, _)| !k.eq_ignore_ascii_case(b"content-length"));
                    h
                };
                assert_eq!(strip(a), strip(b), "{}", a.id);
                continue;
            }
            assert_eq!(a, b);
        }
        // mitmproxy-diff_data.har:3 (`content-encoding: gzip`).
        assert!(recompressed <= 1, "{recompressed}");
        eprintln!("HAR: identical to the script's, but for {recompressed} re-compressed body");
        // The script's summary counts: skips and fixes.
        let summary = String::from_utf8_lossy(&run.stderr);
        let fixes = summary.rsplit("fixes: ").next().unwrap().trim();
        let mut ours: Vec<String> = c
            .notes
            .iter()
            .map(|(k, n)| format!("{} {n}", k.trim_start_matches("har: ")))
            .collect();
        ours.sort();
        assert_eq!(ours.join(", "), fixes, "{summary}");
        assert!(
            summary.contains(&format!("{} skipped", c.skipped)),
            "{summary}"
        );
    }

    #[test]
    fn crs_regression_tests() {
        let Some(shared) = shared() else { return };
        let dir = shared.join("crs/tests/regression/tests");
        let c = load(&[dir]).unwrap();
        eprintln!(
            "CRS regression tests: {} files, {} requests, {} skipped {:?}; notes {:?}",
            c.files,
            c.requests.len(),
            c.skipped,
            c.skipped_reasons,
            c.notes
        );
        assert!(c.requests.len() > 4000);
    }
}
