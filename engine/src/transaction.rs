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
//! This first version favours clarity: values are copied and transformed
//! per rule. Memoization of transformed values and an allocation-free hot path
//! are the fast-path work (issue 4).

use crate::body::{
    self, ArgLimit, ArgSource, BodyParser, BodyResult, BodySink, FileInfo, Processor,
};
use crate::collection::Collection;
use crate::operator::{self, Captures};
use crate::ruleset::Ruleset;
use crate::transform::{is_hex, x2c};
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use waf_compiler::ir::*;
use waf_compiler::names::{Severity, Variable as V};

/// What the server should do with the transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Intervention {
    pub status: u16,
    /// `deny`, `drop`, `redirect` or `proxy`.
    pub action: &'static str,
    pub rule_id: u64,
    pub phase: u8,
    pub url: Option<String>,
}

/// A rule that matched, with its metadata macro-expanded at match time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatchedRule {
    pub id: u64,
    pub phase: u8,
    pub msg: String,
    pub logdata: String,
    pub severity: Option<Severity>,
    pub tags: Vec<String>,
    pub ver: Option<String>,
    pub matched_var_name: String,
    pub matched_var: String,
    /// False for `nolog` rules: they matched but write no alert.
    pub log: bool,
    /// The rule's disruptive action fired (not `pass`), whatever the engine mode.
    pub disruptive: bool,
    pub location: String,
}

impl MatchedRule {
    /// A ModSecurity-style error-log line (what go-ftw's `[id "..."]` and
    /// `match_regex` checks read). Always one line: control bytes, `\`, `"`
    /// and non-ASCII bytes of request data are written as `\xHH`, as Apache's
    /// error log does, so attacker text can neither break the line nor forge a
    /// `[id "..."]` field.
    pub fn log_line(&self, uri: &str, unique_id: &str) -> String {
        let e = escape_log;
        let mut s = format!(
            "ModSecurity: Warning. Matched Data: {} found within {}. [file \"{}\"] [id \"{}\"] [msg \"{}\"] [data \"{}\"]",
            e(&self.matched_var),
            e(&self.matched_var_name),
            e(&self.location),
            self.id,
            e(&self.msg),
            e(&self.logdata)
        );
        if let Some(sev) = self.severity {
            s.push_str(&format!(" [severity \"{}\"]", sev.number()));
        }
        if let Some(v) = &self.ver {
            s.push_str(&format!(" [ver \"{}\"]", e(v)));
        }
        for t in &self.tags {
            s.push_str(&format!(" [tag \"{}\"]", e(t)));
        }
        s.push_str(&format!(
            " [uri \"{}\"] [unique_id \"{}\"]",
            e(uri),
            e(unique_id)
        ));
        s
    }
}

/// Escapes a log field: printable ASCII except `\` and `"` is kept, every
/// other byte becomes `\xHH`.
fn escape_log(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if (0x20..0x7f).contains(&b) && b != b'\\' && b != b'"' {
            out.push(b as char);
        } else {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// One variable instance: its collection, key, display name and value.
#[derive(Clone, Debug)]
struct Val {
    var: V,
    key: Vec<u8>,
    value: Vec<u8>,
}

impl Val {
    fn name(&self) -> String {
        if self.key.is_empty() {
            self.var.name().to_string()
        } else {
            format!("{}:{}", self.var.name(), String::from_utf8_lossy(&self.key))
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Allow {
    None,
    Phase,
    Request,
    All,
}

/// Request, response and state of one transaction.
pub struct Transaction<'r> {
    rs: &'r Ruleset,
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
    basename: Option<Vec<u8>>,
    query_string: Option<Vec<u8>>,
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
    multipart_names: Vec<Vec<u8>>,
    multipart_filenames: Vec<Vec<u8>>,
    xml_root: Option<Vec<u8>>,
    xml_attrs: Vec<Vec<u8>>,
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
    env: Collection,
    mode: EngineMode,
    request_body_access: bool,
    response_body_access: bool,
    force_request_body_variable: bool,
    inbound_data_error: bool,
    removed_ids: Vec<(u64, u64)>,
    removed_tags: Vec<String>,
    removed_msgs: Vec<String>,
    removed_targets: Vec<(RuleSel, Exclusion)>,
    matched_var: Vec<u8>,
    matched_var_name: String,
    matched_vars: Vec<(String, Vec<u8>)>,
    highest_severity: Option<u8>,
    allow: Allow,
    intervention: Option<Intervention>,
    matches: Vec<MatchedRule>,
    caps: Captures,
    parser: BodyParser,
}

/// How a `ctl:ruleRemoveTarget*` selects rules.
#[derive(Clone, Debug)]
enum RuleSel {
    Ids(Vec<(u64, u64)>),
    Tag(String),
    Msg(String),
}

impl<'r> Transaction<'r> {
    pub fn new(rs: &'r Ruleset) -> Transaction<'r> {
        let s = &rs.program().settings;
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let config = body::BodyConfig {
            arg_separator: s.argument_separator,
            json_depth_limit: s.request_body_json_depth_limit,
            ..body::BodyConfig::default()
        };
        Transaction {
            rs,
            started: Instant::now(),
            unique_id: format!("{:x}{:06x}", now.as_micros(), n & 0xff_ffff),
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
            multipart_names: Vec::new(),
            multipart_filenames: Vec::new(),
            xml_root: None,
            xml_attrs: Vec::new(),
            arg_limit: ArgLimit::new(Some(s.arguments_limit as usize)),
            status: 0,
            response_protocol: Vec::new(),
            response_headers: Collection::default(),
            response_body: Vec::new(),
            response_body_seen: false,
            tx: Collection::default(),
            persistent: Vec::new(),
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
            matched_vars: Vec::new(),
            highest_severity: None,
            allow: Allow::None,
            intervention: None,
            matches: Vec::new(),
            caps: Captures::default(),
            parser: BodyParser::new(config),
        }
    }

    fn program(&self) -> &'r Program {
        self.rs.program()
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
        self.remote_addr = client.as_bytes().to_vec();
        self.remote_port = client_port;
        self.server_addr = server.as_bytes().to_vec();
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
        self.method = method.to_vec();
        self.uri_raw = uri.to_vec();
        self.protocol = protocol.to_vec();
        self.request_line = [method, b" ", uri, b" ", protocol].concat();
        // The fragment stays in REQUEST_URI_RAW and REQUEST_LINE only (v3 processURI).
        let uri = match memchr::memchr(b'#', uri) {
            Some(f) => &uri[..f],
            None => uri,
        };
        let decoded = uri_decode(uri);
        let path = match memchr::memchr(b'?', &decoded) {
            Some(q) => &decoded[..q],
            None => &decoded[..],
        };
        self.filename = path.to_vec();
        self.basename = path
            .iter()
            .rposition(|&c| c == b'/' || c == b'\\')
            .filter(|&i| i + 1 < path.len())
            .map(|i| path[i + 1..].to_vec());
        // REQUEST_URI drops a scheme and host (`http://host/path` → `/path`).
        self.uri = strip_authority(&decoded).to_vec();
        self.query_string = memchr::memchr(b'?', uri).map(|q| uri[q + 1..].to_vec());
        if let Some(q) = self.query_string.clone().filter(|q| !q.is_empty()) {
            let mut sink = ArgsSink { tx: self };
            let mut out = BodyResult::default();
            let mut parser = std::mem::take(&mut sink.tx.parser);
            let mut limit = sink.tx.arg_limit;
            parser.query_string(&q, &mut limit, &mut sink, &mut out);
            self.parser = parser;
            self.arg_limit = limit;
            if out.urlencoded_error {
                self.body_result.urlencoded_error = true;
            }
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
        let ct = self.headers.get(b"content-type").map(<[u8]>::to_vec);
        let mut parser = std::mem::take(&mut self.parser);
        let mut limit = self.arg_limit;
        let mut out = BodyResult::default();
        {
            let mut sink = ArgsSink { tx: self };
            parser.body(p, &body, ct.as_deref(), &mut limit, &mut sink, &mut out);
        }
        let urlencoded_error = self.body_result.urlencoded_error || out.urlencoded_error;
        self.body_result = out;
        self.body_result.urlencoded_error = urlencoded_error;
        self.parser = parser;
        self.arg_limit = limit;
        self.body = body;
    }

    /// The response status line and headers, then phase 3.
    pub fn process_response_headers(&mut self, status: u16, protocol: &[u8]) {
        self.status = status;
        self.response_protocol = protocol.to_vec();
        self.run_phase(3);
    }

    pub fn add_response_header(&mut self, name: &[u8], value: &[u8]) {
        self.response_headers.push(name, value);
    }

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
        &self.matches
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

    // ------------------------------------------------------------ evaluation

    fn run_phase(&mut self, phase: u8) {
        if self.mode == EngineMode::Off {
            return;
        }
        if phase == 2 && !self.body_done {
            self.parse_body();
        }
        let program = self.program();
        let rules = &program.phase(phase).rules;
        let mut i = 0;
        while i < rules.len() {
            if self.intervention.is_some() || self.allow == Allow::All || self.allow == Allow::Phase
            {
                break;
            }
            if self.allow == Allow::Request && phase <= 2 {
                break;
            }
            let rule = program.rule(rules[i]);
            if self.is_removed(rule) {
                i += 1;
                continue;
            }
            if self.eval_rule(program, rule) {
                if let Some(flow) = &rule.flow {
                    i = flow.resume_at();
                    continue;
                }
            }
            i += 1;
        }
        if self.allow == Allow::Phase {
            self.allow = Allow::None;
        }
    }

    fn is_removed(&self, rule: &Rule) -> bool {
        self.removed_ids
            .iter()
            .any(|&(a, b)| a <= rule.id && rule.id <= b)
            || self
                .removed_tags
                .iter()
                .any(|t| rule.meta.tags.iter().any(|rt| rt == t))
            || (!self.removed_msgs.is_empty()
                && rule
                    .meta
                    .msg
                    .as_ref()
                    .and_then(|m| m.as_literal())
                    .is_some_and(|m| self.removed_msgs.iter().any(|x| x == m)))
    }

    fn eval_rule(&mut self, program: &'r Program, rule: &'r Rule) -> bool {
        self.matched_vars.clear();
        if rule.unconditional {
            self.matched_var.clear();
            self.matched_var_name.clear();
            self.per_match_actions(&rule.links[0]);
        } else {
            for link in &rule.links {
                if !self.eval_link(program, rule, link) {
                    return false;
                }
            }
        }
        for link in &rule.links {
            self.after_match_actions(link);
        }
        self.full_match(rule);
        true
    }

    fn eval_link(&mut self, program: &'r Program, rule: &'r Rule, link: &'r Link) -> bool {
        let op = &program.operators[link.operator.index()];
        let arg = self.operator_argument(op);
        let chain = program.transforms.chain(link.transforms);
        let mut any = false;
        let mut vals = Vec::new();
        for slot in &link.targets {
            let target = &program.targets[program.slots[slot.index()].target.index()];
            vals.clear();
            self.collect(program, target, &mut vals);
            vals.retain(|v| !self.excluded(program, rule, link, v));
            for v in vals.iter() {
                let candidates = transformed(&chain, &v.value, link.multi_match);
                for tv in &candidates {
                    let hit = operator::matches(
                        program,
                        op,
                        &arg,
                        tv,
                        self.rs.injection(),
                        link.capture && !op.negated,
                        &mut self.caps,
                    ) != op.negated;
                    if !hit {
                        continue;
                    }
                    any = true;
                    if link.capture && !op.negated {
                        for (i, g) in self.caps.groups.iter().enumerate().take(10) {
                            if let Some(g) = g {
                                self.tx.set(i.to_string().as_bytes(), g);
                            }
                        }
                    }
                    self.matched_var = tv.clone();
                    self.matched_var_name = v.name();
                    self.matched_vars
                        .push((self.matched_var_name.clone(), tv.clone()));
                    self.per_match_actions(link);
                }
            }
        }
        any
    }

    /// The operator's argument with macros expanded.
    fn operator_argument(&self, op: &Operator) -> Vec<u8> {
        let Some(arg) = op.kind.argument() else {
            return Vec::new();
        };
        match arg {
            Arg::Const(s) => s.as_bytes().to_vec(),
            Arg::Macro(m) => self.expand(m),
        }
    }

    fn excluded(&self, program: &Program, rule: &Rule, link: &Link, v: &Val) -> bool {
        let hit =
            |e: &Exclusion| e.variable == v.var && selector_matches(program, &e.selector, &v.key);
        link.exclusions.iter().any(hit)
            || self.removed_targets.iter().any(|(sel, e)| {
                let applies = match sel {
                    RuleSel::Ids(r) => r.iter().any(|&(a, b)| a <= rule.id && rule.id <= b),
                    RuleSel::Tag(t) => rule.meta.tags.iter().any(|x| x == t),
                    RuleSel::Msg(m) => {
                        rule.meta.msg.as_ref().and_then(|x| x.as_literal()) == Some(m.as_str())
                    }
                };
                applies && hit(e)
            })
    }

    fn per_match_actions(&mut self, link: &Link) {
        for a in &link.actions {
            if let LinkAction::SetVar(sv) = a {
                self.setvar(sv);
            }
        }
    }

    fn after_match_actions(&mut self, link: &Link) {
        for a in &link.actions {
            match a {
                LinkAction::Ctl(c) => self.ctl(c),
                LinkAction::InitCol { collection, .. }
                    if !self.persistent.iter().any(|(v, _)| v == collection) =>
                {
                    self.persistent.push((*collection, Collection::default()));
                }
                LinkAction::SetEnv { name, value } => {
                    let (n, v) = (self.expand(name), self.expand(value));
                    self.env.set(&n, &v);
                }
                _ => {}
            }
        }
    }

    fn full_match(&mut self, rule: &Rule) {
        if let Some(sev) = rule.meta.severity {
            let n = sev.number();
            self.highest_severity = Some(self.highest_severity.map_or(n, |h| h.min(n)));
        }
        let disruptive = !matches!(rule.disruptive, Disruptive::Pass);
        let m = MatchedRule {
            id: rule.id,
            phase: rule.phase,
            msg: rule
                .meta
                .msg
                .as_ref()
                .map(|m| lossy(&self.expand(m)))
                .unwrap_or_default(),
            logdata: rule
                .meta
                .logdata
                .as_ref()
                .map(|m| lossy(&self.expand(m)))
                .unwrap_or_default(),
            severity: rule.meta.severity,
            tags: rule.meta.tags.clone(),
            ver: rule.meta.ver.clone(),
            matched_var_name: self.matched_var_name.clone(),
            matched_var: lossy(&self.matched_var),
            log: rule.log,
            disruptive,
            location: rule.location.clone(),
        };
        self.matches.push(m);
        let enforce = self.mode == EngineMode::On;
        match &rule.disruptive {
            Disruptive::Pass | Disruptive::Pause(_) => {}
            Disruptive::Allow(scope) => {
                if enforce {
                    self.allow = match scope {
                        AllowScope::All => Allow::All,
                        AllowScope::Phase => Allow::Phase,
                        AllowScope::Request => Allow::Request,
                    };
                }
            }
            Disruptive::Deny | Disruptive::Drop => {
                if enforce {
                    self.intervention = Some(Intervention {
                        status: rule.status.unwrap_or(403),
                        action: if rule.disruptive == Disruptive::Drop {
                            "drop"
                        } else {
                            "deny"
                        },
                        rule_id: rule.id,
                        phase: rule.phase,
                        url: None,
                    });
                }
            }
            Disruptive::Redirect(url) | Disruptive::Proxy(url) => {
                if enforce {
                    let redirect = matches!(rule.disruptive, Disruptive::Redirect(_));
                    self.intervention = Some(Intervention {
                        status: rule.status.unwrap_or(if redirect { 302 } else { 200 }),
                        action: if redirect { "redirect" } else { "proxy" },
                        rule_id: rule.id,
                        phase: rule.phase,
                        url: Some(lossy(&self.expand(url))),
                    });
                }
            }
        }
    }

    fn setvar(&mut self, sv: &SetVar) {
        let name = self.expand(&sv.name).to_ascii_lowercase();
        let value = match &sv.op {
            SetVarOp::Set(v) | SetVarOp::Add(v) | SetVarOp::Sub(v) => self.expand(v),
            SetVarOp::Delete => Vec::new(),
        };
        let coll = match sv.collection {
            V::Tx => &mut self.tx,
            other => {
                if let Some(i) = self.persistent.iter().position(|(v, _)| *v == other) {
                    &mut self.persistent[i].1
                } else {
                    // ModSecurity ignores setvar on a collection that initcol did not open.
                    return;
                }
            }
        };
        match &sv.op {
            SetVarOp::Set(_) => coll.set(&name, &value),
            SetVarOp::Delete => coll.remove(&name),
            SetVarOp::Add(_) | SetVarOp::Sub(_) => {
                let cur = coll.get(&name).map(operator::stoi).unwrap_or(0);
                let delta = operator::stoi(&value);
                let n = if matches!(sv.op, SetVarOp::Add(_)) {
                    cur.saturating_add(delta)
                } else {
                    cur.saturating_sub(delta)
                };
                coll.set(&name, n.to_string().as_bytes());
            }
        }
    }

    fn ctl(&mut self, c: &Ctl) {
        match c {
            Ctl::RuleEngine(m) => self.mode = *m,
            Ctl::RuleRemoveById(r) => self.removed_ids.extend_from_slice(r),
            Ctl::RuleRemoveByTag(t) => self.removed_tags.push(t.clone()),
            Ctl::RuleRemoveByMsg(m) => self.removed_msgs.push(m.clone()),
            Ctl::RuleRemoveTargetById { ids, target } => self
                .removed_targets
                .push((RuleSel::Ids(ids.clone()), target.clone())),
            Ctl::RuleRemoveTargetByTag { tag, target } => self
                .removed_targets
                .push((RuleSel::Tag(tag.clone()), target.clone())),
            Ctl::RuleRemoveTargetByMsg { msg, target } => self
                .removed_targets
                .push((RuleSel::Msg(msg.clone()), target.clone())),
            Ctl::RequestBodyProcessor(p) => {
                if let Some(p) = Processor::from_name(p) {
                    self.processor = Some(p);
                }
            }
            Ctl::RequestBodyAccess(b) => self.request_body_access = *b,
            Ctl::ResponseBodyAccess(b) => self.response_body_access = *b,
            Ctl::ForceRequestBodyVariable(b) => self.force_request_body_variable = *b,
            Ctl::RequestBodyLimit(_) | Ctl::ResponseBodyLimit(_) => {}
            Ctl::AuditEngine(_) | Ctl::AuditLogParts(_) | Ctl::Ignored { .. } => {}
        }
    }

    /// Expands `%{...}` macros: the first value of the named variable.
    fn expand(&self, m: &MacroString) -> Vec<u8> {
        let mut out = Vec::new();
        let program = self.program();
        for p in &m.parts {
            match p {
                MacroPart::Literal(s) => out.extend_from_slice(s.as_bytes()),
                MacroPart::Var { variable, key } => {
                    let target = Target {
                        variable: *variable,
                        selector: match key {
                            Some(k) => Selector::Key(k.clone()),
                            None => Selector::All,
                        },
                        count: false,
                    };
                    let mut vals = Vec::new();
                    self.collect(program, &target, &mut vals);
                    if let Some(v) = vals.first() {
                        out.extend_from_slice(&v.value);
                    }
                }
            }
        }
        out
    }

    // ------------------------------------------------------------ variables

    /// Appends the values of `target` (selector applied; `&` counts them).
    fn collect(&self, program: &Program, target: &Target, out: &mut Vec<Val>) {
        let start = out.len();
        self.collect_all(program, target, out);
        if target.count {
            let n = out.len() - start;
            out.truncate(start);
            out.push(Val {
                var: target.variable,
                key: Vec::new(),
                value: n.to_string().into_bytes(),
            });
        }
    }

    fn collect_all(&self, program: &Program, target: &Target, out: &mut Vec<Val>) {
        let var = target.variable;
        let sel = &target.selector;
        let mut from = |c: &Collection, names: bool| {
            for e in c.iter() {
                if selector_matches(program, sel, &e.key) {
                    let value = if names {
                        e.key.clone()
                    } else {
                        e.value.clone()
                    };
                    out.push(Val {
                        var,
                        key: e.key.clone(),
                        value,
                    });
                }
            }
        };
        match var {
            V::Args => from(&self.args, false),
            V::ArgsNames => from(&self.args, true),
            V::ArgsGet => from(&self.args_get, false),
            V::ArgsGetNames => from(&self.args_get, true),
            V::ArgsPost => from(&self.args_post, false),
            V::ArgsPostNames => from(&self.args_post, true),
            V::RequestHeaders => from(&self.headers, false),
            V::RequestHeadersNames => from(&self.headers, true),
            V::RequestCookies => from(&self.cookies, false),
            V::RequestCookiesNames => from(&self.cookies, true),
            V::ResponseHeaders => from(&self.response_headers, false),
            V::ResponseHeadersNames => from(&self.response_headers, true),
            V::Tx => from(&self.tx, false),
            V::Env => from(&self.env, false),
            V::Files => from(&self.files, false),
            V::FilesNames => from(&self.files, true),
            V::FilesSizes => from(&self.files_sizes, false),
            V::MultipartPartHeaders => from(&self.multipart_part_headers, false),
            V::Ip | V::Session | V::User | V::Global | V::Resource => {
                if let Some((_, c)) = self.persistent.iter().find(|(v, _)| *v == var) {
                    from(c, false)
                }
            }
            V::MatchedVars | V::MatchedVarsNames => {
                for (name, value) in &self.matched_vars {
                    if selector_matches(program, sel, name.as_bytes()) {
                        let v = if var == V::MatchedVars {
                            value.clone()
                        } else {
                            name.as_bytes().to_vec()
                        };
                        out.push(Val {
                            var,
                            key: name.as_bytes().to_vec(),
                            value: v,
                        });
                    }
                }
            }
            V::MultipartName | V::MultipartFilename => {
                let list = if var == V::MultipartName {
                    &self.multipart_names
                } else {
                    &self.multipart_filenames
                };
                for n in list {
                    out.push(Val {
                        var,
                        key: Vec::new(),
                        value: n.clone(),
                    });
                }
            }
            V::Xml => {
                if let Selector::XPath(x) = sel {
                    match x.trim() {
                        "/*" => {
                            if let Some(t) = &self.xml_root {
                                out.push(Val {
                                    var,
                                    key: x.as_bytes().to_vec(),
                                    value: t.clone(),
                                });
                            }
                        }
                        "//@*" => {
                            for a in &self.xml_attrs {
                                out.push(Val {
                                    var,
                                    key: x.as_bytes().to_vec(),
                                    value: a.clone(),
                                });
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => {
                // v3's anchored variables always yield one value, empty when unset
                // (`AnchoredVariable::evaluate`), so `!@endsWith .pdf` matches an
                // absent REQUEST_BASENAME.
                match self.scalar(var) {
                    Some(value) => out.push(Val {
                        var,
                        key: Vec::new(),
                        value,
                    }),
                    None if is_anchored(var) => out.push(Val {
                        var,
                        key: Vec::new(),
                        value: Vec::new(),
                    }),
                    None => {}
                }
            }
        }
    }

    /// Whether REQUEST_BODY is set: body processing done, access on, a body,
    /// and no structured processor (XML, multipart) already parsed it, unless
    /// `ctl:forceRequestBodyVariable=On`.
    ///
    /// This deliberately differs from libmodsecurity v3, which always sets it:
    /// CRS expects the raw body of an XML or multipart request not to be
    /// inspected as text (element names would match), lists the resulting v3
    /// failures in its nginx overrides, and Coraza behaves as we do.
    fn body_seen(&self) -> bool {
        let structured = matches!(self.processor, Some(Processor::Xml | Processor::Multipart));
        self.body_done
            && self.request_body_access
            && !self.body.is_empty()
            && (!structured || self.force_request_body_variable)
    }

    /// The value of a scalar variable, or `None` when it is not set.
    fn scalar(&self, var: V) -> Option<Vec<u8>> {
        let flag = |b: bool| Some(if b { b"1".to_vec() } else { b"0".to_vec() });
        let num = |n: u64| Some(n.to_string().into_bytes());
        let mp = self.body_result.multipart.as_ref();
        let now = || {
            let secs = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs();
            civil(secs)
        };
        match var {
            V::RequestMethod => Some(self.method.clone()),
            V::RequestUri => Some(self.uri.clone()),
            V::RequestUriRaw => Some(self.uri_raw.clone()),
            V::RequestFilename | V::PathInfo => Some(self.filename.clone()),
            V::RequestBasename => self.basename.clone(),
            V::RequestLine => Some(self.request_line.clone()),
            V::RequestProtocol => Some(self.protocol.clone()),
            V::QueryString => self.query_string.clone(),
            // v3 sets these after body processing whenever the body is not empty.
            V::RequestBody => self.body_seen().then(|| self.body.clone()),
            V::RequestBodyLength => self
                .body_seen()
                .then(|| self.body.len().to_string().into_bytes()),
            V::FullRequest => self.body_done.then(|| {
                let mut full = Vec::new();
                for e in self.headers.iter() {
                    full.extend_from_slice(&e.key);
                    full.extend_from_slice(b": ");
                    full.extend_from_slice(&e.value);
                    full.push(b'\n');
                }
                full.extend_from_slice(b"\n\n");
                full.extend_from_slice(&self.body);
                full
            }),
            V::RemoteAddr => Some(self.remote_addr.clone()),
            V::RemotePort => num(u64::from(self.remote_port)),
            V::ServerAddr => Some(self.server_addr.clone()),
            V::ServerPort => num(u64::from(self.server_port)),
            V::ServerName => self
                .headers
                .get(b"host")
                .map(|h| h.split(|&c| c == b':').next().unwrap_or(h).to_vec()),
            V::UniqueId => Some(self.unique_id.as_bytes().to_vec()),
            V::ReqbodyError | V::ReqbodyProcessorError => self
                .body_done
                .then(|| flag(self.body_result.reqbody_error))
                .flatten(),
            V::ReqbodyErrorMsg | V::ReqbodyProcessorErrorMsg => self
                .body_result
                .reqbody_error
                .then(|| self.body_result.reqbody_error_msg.clone()),
            V::ReqbodyProcessor => self.processor.map(|p| p.name().as_bytes().to_vec()),
            V::UrlencodedError => flag(self.body_result.urlencoded_error),
            V::InboundDataError => flag(self.inbound_data_error),
            V::OutboundDataError | V::MscPcreError | V::MscPcreLimitsExceeded => flag(false),
            V::MultipartStrictError => mp.and_then(|m| flag(m.strict_error())),
            V::MultipartUnmatchedBoundary => mp.and_then(|m| num(u64::from(m.unmatched_boundary))),
            V::MultipartBoundaryQuoted => mp.and_then(|m| flag(m.boundary_quoted)),
            V::MultipartBoundaryWhitespace => mp.and_then(|m| flag(m.boundary_whitespace)),
            V::MultipartDataBefore => mp.and_then(|m| flag(m.data_before)),
            V::MultipartDataAfter => mp.and_then(|m| flag(m.data_after)),
            V::MultipartHeaderFolding => mp.and_then(|m| flag(m.header_folding)),
            V::MultipartLfLine => mp.and_then(|m| flag(m.lf_line)),
            V::MultipartCrlfLfLines => mp.and_then(|m| flag(m.crlf_lf_lines())),
            V::MultipartMissingSemicolon => mp.and_then(|m| flag(m.missing_semicolon)),
            V::MultipartInvalidQuoting => mp.and_then(|m| flag(m.invalid_quoting)),
            V::MultipartInvalidPart => mp.and_then(|m| flag(m.invalid_part)),
            V::MultipartInvalidHeaderFolding => mp.and_then(|m| flag(m.invalid_header_folding)),
            V::MultipartFileLimitExceeded => mp.and_then(|m| flag(m.file_limit_exceeded)),
            V::FilesCombinedSize => self.body_result.files_combined_size.and_then(num),
            V::ArgsCombinedSize => num(self
                .args
                .iter()
                .map(|e| (e.key.len() + e.value.len()) as u64)
                .sum()),
            V::FullRequestLength => num((self.request_line.len() + self.body.len()) as u64),
            V::ResponseStatus | V::Status => {
                (self.status != 0).then(|| self.status.to_string().into_bytes())
            }
            V::StatusLine => (self.status != 0).then(|| {
                format!("{} {}", lossy(&self.response_protocol), self.status).into_bytes()
            }),
            V::ResponseProtocol => {
                (!self.response_protocol.is_empty()).then(|| self.response_protocol.clone())
            }
            V::ResponseBody => self.response_body_seen.then(|| self.response_body.clone()),
            V::ResponseContentType => self.response_content_type().map(<[u8]>::to_vec),
            V::ResponseContentLength => self
                .response_body_seen
                .then(|| self.response_body.len().to_string().into_bytes()),
            V::Duration => num(self.started.elapsed().as_micros() as u64),
            V::HighestSeverity => self.highest_severity.map(u64::from).and_then(num),
            V::MatchedVar => Some(self.matched_var.clone()),
            V::MatchedVarName => Some(self.matched_var_name.as_bytes().to_vec()),
            V::AuthType => self
                .headers
                .get(b"authorization")
                .map(|a| a.split(|&c| c == b' ').next().unwrap_or(a).to_vec()),
            V::TimeEpoch => num(SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs()),
            V::Time => {
                let t = now();
                Some(format!("{:02}:{:02}:{:02}", t.3, t.4, t.5).into_bytes())
            }
            V::TimeYear => num(now().0),
            V::TimeMon => num(now().1),
            V::TimeDay => num(now().2),
            V::TimeHour => num(now().3),
            V::TimeMin => num(now().4),
            V::TimeSec => num(now().5),
            V::TimeWday => num(now().6),
            _ => None,
        }
    }
}

/// The variables libmodsecurity v3 keeps as `AnchoredVariable`s in its
/// transaction (`transaction.h`): present, possibly empty, in every phase.
fn is_anchored(var: V) -> bool {
    use V::*;
    matches!(
        var,
        ArgsCombinedSize
            | AuthType
            | FilesCombinedSize
            | FullRequest
            | FullRequestLength
            | InboundDataError
            | MatchedVar
            | MatchedVarName
            | MultipartBoundaryQuoted
            | MultipartBoundaryWhitespace
            | MultipartCrlfLfLines
            | MultipartDataAfter
            | MultipartDataBefore
            | MultipartFileLimitExceeded
            | MultipartHeaderFolding
            | MultipartInvalidHeaderFolding
            | MultipartInvalidPart
            | MultipartInvalidQuoting
            | MultipartLfLine
            | MultipartMissingSemicolon
            | MultipartStrictError
            | MultipartUnmatchedBoundary
            | OutboundDataError
            | PathInfo
            | QueryString
            | RemoteAddr
            | RemoteHost
            | RemotePort
            | ReqbodyError
            | ReqbodyErrorMsg
            | ReqbodyProcessorError
            | ReqbodyProcessorErrorMsg
            | ReqbodyProcessor
            | RequestBasename
            | RequestBody
            | RequestBodyLength
            | RequestFilename
            | RequestLine
            | RequestMethod
            | RequestProtocol
            | RequestUri
            | RequestUriRaw
            | Resource
            | ResponseBody
            | ResponseContentLength
            | ResponseProtocol
            | ResponseStatus
            | ServerAddr
            | ServerName
            | ServerPort
            | SessionId
            | UniqueId
            | UrlencodedError
            | UserId
    )
}

/// Whether a key passes a target's selector.
fn selector_matches(program: &Program, sel: &Selector, key: &[u8]) -> bool {
    match sel {
        Selector::All => true,
        Selector::Key(k) => key.eq_ignore_ascii_case(k.as_bytes()),
        Selector::Regex(id) => program.selector_regexes[id.index()].regex.is_match(key),
        Selector::XPath(_) => true,
    }
}

/// The values to test: the fully transformed value, or with `multiMatch` the
/// original and every intermediate value that differs from the one before.
fn transformed(
    chain: &[waf_compiler::names::Transform],
    value: &[u8],
    multi: bool,
) -> Vec<Vec<u8>> {
    let mut cur = value.to_vec();
    let mut all = if multi { vec![cur.clone()] } else { Vec::new() };
    let mut out = Vec::new();
    for &t in chain {
        if crate::transform::apply(t, &cur, &mut out) {
            std::mem::swap(&mut cur, &mut out);
            if multi {
                all.push(cur.clone());
            }
        }
    }
    if multi {
        all
    } else {
        vec![cur]
    }
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
        self.tx
            .files_sizes
            .push(f.name, f.size.to_string().as_bytes());
    }

    fn multipart_part_header(&mut self, part_name: &[u8], line: &[u8]) {
        self.tx.multipart_part_headers.push(part_name, line);
    }

    fn multipart_name(&mut self, name: &[u8]) {
        self.tx.multipart_names.push(name.to_vec());
    }

    fn multipart_filename(&mut self, filename: &[u8]) {
        self.tx.multipart_filenames.push(filename.to_vec());
    }

    fn xml_attribute(&mut self, value: &[u8]) {
        self.tx.xml_attrs.push(value.to_vec());
    }

    fn xml_root_text(&mut self, text: &[u8]) {
        self.tx.xml_root = Some(text.to_vec());
    }
}

/// v3's `Cookie` header parsing (`Transaction::addRequestHeader`): split on
/// `;`, name up to the first `=` with leading blanks removed, empty names skipped.
fn add_cookies(cookies: &mut Collection, value: &[u8]) {
    let mut parts: Vec<&[u8]> = value.split(|&c| c == b';').collect();
    if let Some(last) = parts.last_mut() {
        while last.last().is_some_and(|c| c.is_ascii_whitespace()) {
            *last = &last[..last.len() - 1];
        }
    }
    for c in parts {
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
fn uri_decode(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
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
    out
}

/// `scheme://host/path` → `/path` (REQUEST_URI never holds the host).
fn strip_authority(u: &[u8]) -> &[u8] {
    if u.first() == Some(&b'/') {
        return u;
    }
    let Some(colon) = memchr::memchr(b':', u) else {
        return u;
    };
    if !u[colon + 1..].starts_with(b"//") {
        return u;
    }
    let after = colon + 3;
    match memchr::memchr(b'/', &u[after..]) {
        Some(p) => &u[after + p..],
        None => u,
    }
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
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
