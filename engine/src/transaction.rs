//! One HTTP transaction: inputs, variables, and rule evaluation by phase.
//!
//! The evaluation follows libmodsecurity v3 (`RuleWithOperator::evaluate`):
//! for each link of a rule, every target value is transformed and tested;
//! on each matching value `MATCHED_VAR(S)` are updated, `capture` fills
//! `TX:0`-`TX:9` and the link's `setvar`s run. The next chain link is tried
//! only if some value matched. When the whole chain matched, the other
//! non-disruptive actions (`ctl`, `initcol`, ...) run, the match is logged
//! (unless `nolog`), the disruptive action applies (not in `DetectionOnly`),
//! and `skip`/`skipAfter` move execution forward.
//!
//! How that is made fast (see `docs/performance.md`):
//! - values of request data are memoized per (variable instance, transform
//!   chain node) for the whole transaction ([`memo`]), so a transformation
//!   runs once per value whatever number of rules want it;
//! - each memoized value is scanned once for the prefilter literals of every
//!   operator ([`crate::prefilter`]); a rule whose operator's literals occur
//!   in none of its values is skipped without touching them;
//! - everything lives in buffers owned by the transaction and reused by
//!   [`Transaction::reset`]: a worker that keeps one transaction and resets it
//!   per request allocates nothing once warmed up.
//!
//! [`EvalOptions`] turns memoization and the prefilter off (the "naive"
//! mode), which must give the same decisions.

mod eval;
mod memo;
mod vars;
mod xcache;


use crate::body::{
    self, ArgLimit, ArgSource, BodyParser, BodyResult, BodySink, FileInfo, Processor,
};
use crate::collection::Collection;
use crate::options::EvalOptions;
use crate::outcome::{Intervention, MatchedRule};
use crate::stats::{ChainProfile, EvalStats, RuleProfile};
use crate::operator::Captures;
use crate::ruleset::Ruleset;
use crate::transform::{is_hex, x2c};
use memo::Memo;
use std::io::Write as _;

use std::time::{Instant, SystemTime, UNIX_EPOCH};
use vars::ValList;
use waf_compiler::ir::*;
use waf_compiler::names::Variable as V;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Allow {
    None,
    Phase,
    Request,
    All,
}

/// How a `ctl:ruleRemoveTarget*` selects rules.
#[derive(Clone, Copy, Debug)]
enum RuleSel<'r> {
    Ids(&'r [(u64, u64)]),
    Tag(&'r str),
    Msg(&'r str),
}

/// Request, response and state of one transaction.
///
/// Create one with [`Ruleset::transaction`] per request, or keep one per
/// worker thread and call [`Transaction::reset`] between requests: its
/// buffers are then reused and evaluation allocates nothing once they have
/// grown to the traffic's size.
pub struct Transaction<'r> {
    rs: &'r Ruleset,
    options: EvalOptions,
    started: Instant,
    unique_id: String,
    // connection
    remote_addr: Vec<u8>,
    remote_port: u16,
    server_addr: Vec<u8>,
    server_port: u16,
    // request line
    method: Vec<u8>,
    uri_raw: Vec<u8>,
    uri: Vec<u8>,
    filename: Vec<u8>,
    basename: Option<(usize, usize)>,
    query_string: Option<(usize, usize)>,
    protocol: Vec<u8>,
    request_line: Vec<u8>,
    // request headers and body
    headers: Collection,
    cookies: Collection,
    args: Collection,
    args_get: Collection,
    args_post: Collection,
    body: Vec<u8>,
    processor: Option<Processor>,
    body_result: BodyResult,
    body_done: bool,
    files: Collection,
    files_sizes: Collection,
    multipart_part_headers: Collection,
    multipart_names: Collection,
    multipart_filenames: Collection,
    /// `XML:/*` (meaningful when `xml_root_set`; the buffer is kept).
    xml_root: Vec<u8>,
    xml_root_set: bool,
    xml_attrs: Collection,
    arg_limit: ArgLimit,
    // response
    status: u16,
    response_protocol: Vec<u8>,
    response_headers: Collection,
    response_body: Vec<u8>,
    response_body_seen: bool,
    // state
    tx: Collection,
    persistent: Vec<(V, Collection)>,
    persistent_len: usize,
    env: Collection,
    mode: EngineMode,
    request_body_access: bool,
    response_body_access: bool,
    force_request_body_variable: bool,
    inbound_data_error: bool,
    removed_ids: Vec<(u64, u64)>,
    // `ctl:ruleRemove*` selections point into the program: no copies.
    removed_tags: Vec<&'r str>,
    removed_msgs: Vec<&'r str>,
    removed_targets: Vec<(RuleSel<'r>, &'r Exclusion)>,
    matched_var: Vec<u8>,
    matched_var_name: String,
    matched_vars: Collection,
    highest_severity: Option<u8>,
    allow: Allow,
    intervention: Option<Intervention>,
    /// `matches[..match_count]` are this transaction's; the rest are pooled.
    matches: Vec<MatchedRule>,
    match_count: usize,
    caps: Captures,
    parser: BodyParser,
    // evaluation
    memo: Memo,
    /// Incremented at every phase run: slot states and scalar instances of
    /// an older generation are stale.
    generation: u32,
    stats: EvalStats,
    profile: RuleProfile,
    scratch: Scratch,
}

/// Reusable buffers of the evaluation (taken out with `mem::take` while in
/// use). Each user has its own: a buffer taken by a caller would be found
/// empty (and grown anew) by a callee, which then drops it.
#[derive(Default)]
struct Scratch {
    /// The direct path's current, temporary and candidate values.
    a: Vec<u8>,
    b: Vec<u8>,
    c: Vec<u8>,
    /// The direct path's transform-chain nodes, first to last (profiling).
    nodes: Vec<u32>,
    /// setvar's and setenv's name and value.
    name: Vec<u8>,
    value: Vec<u8>,
    /// Macro-expanded msg/logdata.
    text: Vec<u8>,
    arg: Vec<u8>,
    vals: ValList,
    multi: Vec<(usize, usize)>,
    bits: Vec<u64>,
}

impl Ruleset {
    /// A new transaction with this ruleset's evaluation options.
    pub fn transaction(&self) -> Transaction<'_> {
        Transaction::with_options(self, self.eval_options())
    }

    /// A transaction with non-default evaluation options (e.g. the naive mode).
    pub fn transaction_with(&self, options: EvalOptions) -> Transaction<'_> {
        Transaction::with_options(self, options)
    }
}

impl<'r> Transaction<'r> {
    pub fn new(rs: &'r Ruleset) -> Transaction<'r> {
        Self::with_options(rs, EvalOptions::default())
    }

    pub fn with_options(rs: &'r Ruleset, options: EvalOptions) -> Transaction<'r> {
        let s = &rs.program().settings;
        let config = body::BodyConfig {
            arg_separator: s.argument_separator,
            json_depth_limit: s.request_body_json_depth_limit,
            ..body::BodyConfig::default()
        };
        let mut tx = Transaction {
            rs,
            options,
            started: Instant::now(),
            unique_id: String::with_capacity(32),
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
            args: Collection::default(),
            args_get: Collection::default(),
            args_post: Collection::default(),
            body: Vec::new(),
            processor: None,
            body_result: BodyResult::default(),
            body_done: false,
            files: Collection::default(),
            files_sizes: Collection::default(),
            multipart_part_headers: Collection::default(),
            multipart_names: Collection::default(),
            multipart_filenames: Collection::default(),
            xml_root: Vec::new(),
            xml_root_set: false,
            xml_attrs: Collection::default(),
            arg_limit: ArgLimit::new(Some(s.arguments_limit as usize)),
            status: 0,
            response_protocol: Vec::new(),
            response_headers: Collection::default(),
            response_body: Vec::new(),
            response_body_seen: false,
            tx: Collection::default(),
            persistent: Vec::new(),
            persistent_len: 0,
            env: Collection::default(),
            mode: s.rule_engine,
            request_body_access: s.request_body_access,
            response_body_access: s.response_body_access,
            force_request_body_variable: false,
            inbound_data_error: false,
            removed_ids: Vec::new(),
            removed_tags: Vec::new(),
            removed_msgs: Vec::new(),
            removed_targets: Vec::new(),
            matched_var: Vec::new(),
            matched_var_name: String::new(),
            matched_vars: Collection::default(),
            highest_severity: None,
            allow: Allow::None,
            intervention: None,
            matches: Vec::new(),
            match_count: 0,
            caps: Captures::default(),
            parser: BodyParser::new(config),
            memo: Memo::new(rs),
            generation: 0,
            stats: EvalStats::default(),
            profile: RuleProfile::default(),
            scratch: Scratch::default(),
        };
        tx.memo.x_on = options.xcache && options.memo;
        tx.memo.prof_on = options.profile;
        tx.reset();
        tx
    }

    /// Makes this a fresh transaction for the next request, keeping every
    /// buffer (and the evaluation options and counters).
    pub fn reset(&mut self) {
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let s = &self.rs.program().settings;
        self.started = Instant::now();
        self.unique_id.clear();
        // Writing to a String only fails if a Display impl does; these cannot.
        let _ = std::fmt::Write::write_fmt(
            &mut self.unique_id,
            format_args!("{:x}{:06x}", now.as_micros(), n & 0xff_ffff),
        );
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
        for c in [
            &mut self.headers,
            &mut self.cookies,
            &mut self.args,
            &mut self.args_get,
            &mut self.args_post,
            &mut self.files,
            &mut self.files_sizes,
            &mut self.multipart_part_headers,
            &mut self.multipart_names,
            &mut self.multipart_filenames,
            &mut self.xml_attrs,
            &mut self.response_headers,
            &mut self.tx,
            &mut self.env,
            &mut self.matched_vars,
        ] {
            c.clear();
        }
        self.body.clear();
        self.processor = None;
        self.body_result.clear();
        self.body_done = false;
        self.xml_root.clear();
        self.xml_root_set = false;
        self.arg_limit = ArgLimit::new(Some(s.arguments_limit as usize));
        self.status = 0;
        self.response_protocol.clear();
        self.response_body.clear();
        self.response_body_seen = false;
        self.persistent_len = 0;
        self.mode = s.rule_engine;
        self.request_body_access = s.request_body_access;
        self.response_body_access = s.response_body_access;
        self.force_request_body_variable = false;
        self.inbound_data_error = false;
        self.removed_ids.clear();
        self.removed_tags.clear();
        self.removed_msgs.clear();
        self.removed_targets.clear();
        self.matched_var.clear();
        self.matched_var_name.clear();
        self.highest_severity = None;
        self.allow = Allow::None;
        self.intervention = None;
        self.match_count = 0;
        self.caps.clear();
        self.memo.clear();
        self.generation = self.generation.wrapping_add(1);
    }

    fn program(&self) -> &'r Program {
        self.rs.program()
    }

    /// The evaluation options in effect.
    pub fn options(&self) -> EvalOptions {
        self.options
    }

    /// Changes the evaluation options (takes effect from the next rule).
    pub fn set_options(&mut self, options: EvalOptions) {
        self.options = options;
        self.memo.x_on = options.xcache && options.memo;
        self.memo.prof_on = options.profile;
    }

    /// Empties the cross-transaction cache (its buffers are kept).
    pub fn clear_cache(&mut self) {
        self.memo.x.clear();
    }

    /// Counters accumulated since creation or [`Transaction::reset_stats`].
    pub fn stats(&self) -> EvalStats {
        EvalStats {
            xcache_hits: self.memo.x.hits,
            xcache_misses: self.memo.x.misses,
            ..self.stats
        }
    }

    /// Per-rule measurements (filled with [`EvalOptions::profile`]).
    pub fn rule_profile(&self) -> &RuleProfile {
        &self.profile
    }

    /// Per transform-chain measurements (filled with [`EvalOptions::profile`];
    /// empty otherwise).
    pub fn chain_profile(&self) -> &ChainProfile {
        &self.memo.prof
    }

    pub fn reset_stats(&mut self) {
        self.stats = EvalStats::default();
        self.memo.x.hits = 0;
        self.memo.x.misses = 0;
        self.profile.clear();
        self.memo.prof.clear();
    }

    // ------------------------------------------------------------ inputs

    /// Client and server addresses and ports.
    pub fn process_connection(
        &mut self,
        client: &str,
        client_port: u16,
        server: &str,
        server_port: u16,
    ) {
        set(&mut self.remote_addr, client.as_bytes());
        self.remote_port = client_port;
        set(&mut self.server_addr, server.as_bytes());
        self.server_port = server_port;
    }

    /// The request line. `protocol` is as sent (`HTTP/1.1`).
    pub fn process_uri(&mut self, uri: &[u8], method: &[u8], protocol: &[u8]) {
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
        let mut decoded = std::mem::take(&mut self.uri);
        uri_decode(uri, &mut decoded);
        let path_end = memchr::memchr(b'?', &decoded).unwrap_or(decoded.len());
        set(&mut self.filename, &decoded[..path_end]);
        let path = &self.filename;
        self.basename = path
            .iter()
            .rposition(|&c| c == b'/' || c == b'\\')
            .filter(|&i| i + 1 < path.len())
            .map(|i| (i + 1, path.len()));
        let strip = strip_authority(&decoded);
        if strip > 0 {
            decoded.drain(..strip);
        }
        self.uri = decoded;
        self.query_string = memchr::memchr(b'?', uri).map(|q| (q + 1, uri.len()));
        if let Some((s, e)) = self.query_string.filter(|(s, e)| e > s) {
            // The query is a slice of `uri_raw` (before any fragment).
            let raw = std::mem::take(&mut self.uri_raw);
            let mut parser = std::mem::take(&mut self.parser);
            let mut limit = self.arg_limit;
            // Only URLENCODED_ERROR outlives the query parse (no allocation
            // unless the parser reports an error).
            let mut out = BodyResult::default();
            parser.query_string(&raw[s..e], &mut limit, &mut ArgsSink { tx: self }, &mut out);
            self.body_result.urlencoded_error |= out.urlencoded_error;
            self.parser = parser;
            self.arg_limit = limit;
            self.uri_raw = raw;
        }
    }

    /// One request header, in arrival order.
    pub fn add_request_header(&mut self, name: &[u8], value: &[u8]) {
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

    /// Phase 1.
    pub fn process_request_headers(&mut self) {
        self.run_phase(1);
    }

    /// Appends request body bytes (up to `SecRequestBodyLimit`).
    ///
    /// Past the limit, `INBOUND_DATA_ERROR` is 1; with `Reject` (and the engine
    /// `On`) the transaction is denied with 403, as in v3; with
    /// `ProcessPartial` the first `limit` bytes are inspected.
    pub fn append_request_body(&mut self, chunk: &[u8]) {
        let settings = &self.program().settings;
        let limit = settings.request_body_limit as usize;
        let room = limit.saturating_sub(self.body.len());
        if limit > 0 && chunk.len() > room {
            self.inbound_data_error = true;
            if settings.request_body_limit_action == LimitAction::Reject {
                if self.mode == EngineMode::On && self.intervention.is_none() {
                    self.intervention = Some(Intervention {
                        status: 403,
                        action: "deny",
                        rule_id: 0,
                        phase: 2,
                        url: None,
                    });
                }
                return;
            }
        }
        self.body.extend_from_slice(&chunk[..chunk.len().min(room)]);
    }

    /// Parses the body with the selected processor, then runs phase 2.
    pub fn process_request_body(&mut self) {
        self.parse_body();
        self.run_phase(2);
    }

    fn parse_body(&mut self) {
        if self.body_done {
            return;
        }
        self.body_done = true;
        if !self.request_body_access {
            return;
        }
        let Some(p) = self.processor else { return };
        let body = std::mem::take(&mut self.body);
        let headers = std::mem::take(&mut self.headers);
        let ct = headers.get(b"content-type");
        let mut parser = std::mem::take(&mut self.parser);
        let mut limit = self.arg_limit;
        let mut out = std::mem::take(&mut self.body_result);
        let urlencoded_error = out.urlencoded_error;
        out.clear();
        parser.body(
            p,
            &body,
            ct,
            &mut limit,
            &mut ArgsSink { tx: self },
            &mut out,
        );
        out.urlencoded_error |= urlencoded_error;
        self.body_result = out;
        self.parser = parser;
        self.arg_limit = limit;
        self.body = body;
        self.headers = headers;
    }

    /// The response status line and headers, then phase 3.
    pub fn process_response_headers(&mut self, status: u16, protocol: &[u8]) {
        self.status = status;
        set(&mut self.response_protocol, protocol);
        self.run_phase(3);
    }

    pub fn add_response_header(&mut self, name: &[u8], value: &[u8]) {
        self.response_headers.push(name, value);
    }

    /// Appends response body bytes (up to `SecResponseBodyLimit`).
    ///
    /// Only bodies of the inspected MIME types (`SecResponseBodyMimeType`) are kept.
    pub fn append_response_body(&mut self, chunk: &[u8]) {
        if !self.response_type_inspected() {
            return;
        }
        let limit = self.program().settings.response_body_limit as usize;
        let room = limit.saturating_sub(self.response_body.len());
        self.response_body
            .extend_from_slice(&chunk[..chunk.len().min(room)]);
    }

    /// Phase 4 (only when response body access is on and the MIME type is inspected).
    pub fn process_response_body(&mut self) {
        if self.response_body_access && self.response_type_inspected() {
            self.response_body_seen = true;
            self.run_phase(4);
        }
    }

    /// `RESPONSE_CONTENT_TYPE`: the response `Content-Type` up to its `;`.
    fn response_content_type(&self) -> Option<&[u8]> {
        let v = self.response_headers.get(b"content-type")?;
        Some(v.split(|&c| c == b';').next().unwrap_or(v))
    }

    fn response_type_inspected(&self) -> bool {
        let types = &self.program().settings.response_body_mime_types;
        let ct = self.response_content_type().unwrap_or(b"");
        types.is_empty() || types.iter().any(|t| t.as_bytes() == ct)
    }

    /// Phase 5.
    pub fn process_logging(&mut self) {
        let saved = self.allow;
        // `allow` never skips the logging phase.
        self.allow = Allow::None;
        self.run_phase(5);
        self.allow = saved;
    }

    // ------------------------------------------------------------ outputs

    pub fn intervention(&self) -> Option<&Intervention> {
        self.intervention.as_ref()
    }

    /// Every rule that matched, in order (including `nolog` ones).
    pub fn matched_rules(&self) -> &[MatchedRule] {
        &self.matches[..self.match_count]
    }

    pub fn unique_id(&self) -> &str {
        &self.unique_id
    }

    /// The value of a TX variable (for tests and embedding).
    pub fn tx_var(&self, name: &str) -> Option<&[u8]> {
        self.tx.get(name.as_bytes())
    }

    pub fn uri_raw(&self) -> &[u8] {
        &self.uri_raw
    }

    pub fn request_body_error(&self) -> Option<&[u8]> {
        self.body_result
            .reqbody_error
            .then_some(self.body_result.reqbody_error_msg.as_slice())
    }
}

/// Replaces the contents of `buf` with `value`, keeping its capacity.
fn set(buf: &mut Vec<u8>, value: &[u8]) {
    buf.clear();
    buf.extend_from_slice(value);
}

/// Receives arguments and body-processor results into the transaction.
struct ArgsSink<'a, 'r> {
    tx: &'a mut Transaction<'r>,
}

impl BodySink for ArgsSink<'_, '_> {
    fn arg(&mut self, source: ArgSource, name: &[u8], value: &[u8]) {
        self.tx.args.push(name, value);
        if source.in_args_get() {
            self.tx.args_get.push(name, value);
        }
        if source.in_args_post() {
            self.tx.args_post.push(name, value);
        }
    }

    fn file(&mut self, f: &FileInfo<'_>) {
        self.tx.files.push(f.name, f.filename);
        let mut n = [0u8; 20];
        let len = write_u64(&mut n, f.size);
        self.tx.files_sizes.push(f.name, &n[..len]);
    }

    fn multipart_part_header(&mut self, part_name: &[u8], line: &[u8]) {
        self.tx.multipart_part_headers.push(part_name, line);
    }

    fn multipart_name(&mut self, name: &[u8]) {
        self.tx.multipart_names.push(b"", name);
    }

    fn multipart_filename(&mut self, filename: &[u8]) {
        self.tx.multipart_filenames.push(b"", filename);
    }

    fn xml_attribute(&mut self, value: &[u8]) {
        self.tx.xml_attrs.push(b"", value);
    }

    fn xml_root_text(&mut self, text: &[u8]) {
        set(&mut self.tx.xml_root, text);
        self.tx.xml_root_set = true;
    }
}

/// Writes `n` in decimal into `buf`; returns the length.
fn write_u64(buf: &mut [u8; 20], n: u64) -> usize {
    let mut cur = std::io::Cursor::new(&mut buf[..]);
    // 20 bytes hold any u64.
    let _ = write!(cur, "{n}");
    cur.position() as usize
}

/// Writes `n` in decimal into `out` (appending).
fn push_i64(out: &mut Vec<u8>, n: i64) {
    let _ = write!(out, "{n}");
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

/// (year, month, day, hour, minute, second, weekday) in UTC from epoch seconds.
fn civil(secs: u64) -> (u64, u64, u64, u64, u64, u64, u64) {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    let wday = (days + 4) % 7;
    // Howard Hinnant's days-from-civil inverse.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if mo <= 2 { y + 1 } else { y };
    (y as u64, mo as u64, d as u64, h, m, s, wday)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod chain_profile_tests {
    use super::{EvalOptions, Transaction};
    use crate::Ruleset;
    use waf_compiler::ir::NodeId;

    /// Two rules whose chains share the `urlDecodeUni` prefix.
    const RULES: &str = r#"
        SecRule ARGS "@rx zzz" "id:1,phase:1,pass,t:none,t:urlDecodeUni,t:lowercase"
        SecRule ARGS "@rx yyy" "id:2,phase:1,pass,t:none,t:urlDecodeUni"
    "#;

    fn run<'r>(rs: &'r Ruleset, options: EvalOptions) -> Transaction<'r> {
        let mut tx = rs.transaction_with(options);
        tx.process_uri(b"/?a=A%20B&b=plain", b"GET", b"HTTP/1.1");
        tx.add_request_header(b"Host", b"h");
        tx.process_request_headers();
        tx
    }

    /// (mid, deep): the `[urlDecodeUni]` and `[urlDecodeUni, lowercase]` nodes.
    fn nodes(rs: &Ruleset) -> (usize, usize) {
        let tree = &rs.program().transforms;
        let deep = tree.nodes.len() - 1;
        let mid = tree.nodes[deep].parent.expect("parent").index();
        assert_eq!(tree.depth(NodeId(deep as u32)), 2);
        (mid, deep)
    }

    #[test]
    fn shared_prefix_is_computed_once_per_value() {
        let rs = Ruleset::from_str("t.conf", RULES).expect("compiles");
        let (mid, deep) = nodes(&rs);
        let opts = EvalOptions {
            profile: true,
            xcache: false,
            ..EvalOptions::default()
        };
        let tx = run(&rs, opts);
        let p = tx.chain_profile();
        // Rule 1 reads both arguments at the deep node: both computed there,
        // through the mid node. Rule 2 then finds them at the mid node.
        assert_eq!(
            (p.lookups[deep], p.misses[deep], p.computed[deep]),
            (2, 2, 2)
        );
        assert_eq!((p.lookups[mid], p.misses[mid], p.computed[mid]), (2, 0, 2));
        assert_eq!(p.computed[0], 0, "the root transforms nothing");
        assert_eq!(p.hit_ratio(mid), 1.0);
        assert_eq!(p.hit_ratio(deep), 0.0);
        assert_eq!(p.total_hit_ratio(), 0.5);
        // ARGS values arrive URL-decoded: `A B` and `plain`.
        assert_eq!(p.bytes_in[mid], ("A B".len() + "plain".len()) as u64);
        assert_eq!(p.slot_lookups.iter().sum::<u64>(), 4);
        assert_eq!(p.xcache.iter().sum::<u64>(), 0);

        // Without memoization every lookup computes its whole chain.
        let naive = run(
            &rs,
            EvalOptions {
                profile: true,
                ..EvalOptions::naive()
            },
        );
        let p = naive.chain_profile();
        assert_eq!(
            (p.lookups[deep], p.misses[deep], p.computed[deep]),
            (2, 2, 2)
        );
        assert_eq!((p.lookups[mid], p.misses[mid], p.computed[mid]), (2, 2, 4));
        assert_eq!(p.total_hit_ratio(), 0.0);

        // reset_stats clears the counters (and keeps their size).
        let mut tx = tx;
        tx.reset_stats();
        let p = tx.chain_profile();
        assert_eq!(p.lookups.len(), rs.program().transforms.nodes.len());
        assert!(p.lookups.iter().chain(&p.computed).all(|&n| n == 0));
    }

    #[test]
    fn cross_transaction_cache_outputs_are_counted() {
        let rs = Ruleset::from_str("t.conf", RULES).expect("compiles");
        let (mid, _) = nodes(&rs);
        let opts = EvalOptions {
            profile: true,
            ..EvalOptions::default()
        };
        let mut tx = rs.transaction_with(opts);
        // A value is admitted to the cache the second time it is seen, and
        // served from it the third.
        for _ in 0..3 {
            tx.reset();
            tx.process_uri(b"/?a=A%20B", b"GET", b"HTTP/1.1");
            tx.process_request_headers();
        }
        let p = tx.chain_profile();
        assert!(p.xcache[mid] >= 1, "{:?}", p.xcache);
        assert_eq!(p.lookups[mid], 3);
    }

    #[test]
    fn profile_off_leaves_the_counters_empty() {
        let rs = Ruleset::from_str("t.conf", RULES).expect("compiles");
        let tx = run(&rs, EvalOptions::default());
        assert!(tx.chain_profile().is_empty());
        let tx = run(&rs, EvalOptions::naive());
        assert!(tx.chain_profile().is_empty());
    }
}
