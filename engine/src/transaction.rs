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
//! A transaction is four parts, each in its own module, so that evaluation
//! can read one while it writes another (as regex-automata keeps a `Regex`
//! apart from its `Cache`):
//! - [`inputs`]: what the server fed (connection, request, response) and what
//!   the body processors made of it; rules never write it;
//! - [`state`]: what rules change (`TX`, `ctl`, `MATCHED_VAR(S)`, the match
//!   log, the intervention);
//! - [`cache`]: the memo table, the cross-transaction cache and scratch
//!   buffers, which change no decision;
//! - the counters of [`crate::stats`].
//!
//! [`vars`] reads variables from the first two; [`eval`] runs rules.
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

mod block;
mod cache;
mod eval;
pub(crate) mod fmt;
mod inputs;
mod memo;
mod state;
mod values;
mod vars;
mod xcache;

use crate::body::{self, ArgLimit, BodyParser, Processor};
use crate::options::EvalOptions;
use crate::outcome::{Cause, Intervention, MatchedRules};
use crate::ruleset::Ruleset;
use crate::stats::{ChainProfile, EvalStats, RuleProfile};
use cache::EvalCache;
use fmt::push_i64;
use inputs::Inputs;
use memo::Memo;
use state::{Allow, RuleState};
use std::time::{SystemTime, UNIX_EPOCH};
use waf_compiler::ir::{AuditEngine, AuditParts, EngineMode, LimitAction, Program, Settings};

/// How far [`Transaction::new_log_lines`] has reported a transaction's log
/// lines. Start from `LogCursor::default()` for each transaction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogCursor {
    rules: usize,
    intervention: bool,
}

/// One HTTP request and its response, fed phase by phase.
///
/// Create one with [`Ruleset::transaction`] per request, or keep one per
/// worker thread and call [`Transaction::reset`] between requests: its
/// buffers are then reused and evaluation allocates nothing once they have
/// grown to the traffic's size.
///
/// The calls follow the life of a proxied request; each `process_*` call runs
/// a phase, after which [`Transaction::intervention`] says whether to stop:
///
/// | call | phase | what a proxy does after it |
/// |---|---|---|
/// | [`process_connection`](Self::process_connection), [`process_uri`](Self::process_uri), [`add_request_header`](Self::add_request_header)… | | |
/// | [`process_request_headers`](Self::process_request_headers) | 1 | check the intervention |
/// | [`append_request_body`](Self::append_request_body) per chunk | | check the intervention (a body limit rejects as soon as it is crossed) |
/// | [`process_request_body`](Self::process_request_body) | 2 | check; only then forward the body upstream |
/// | [`add_response_header`](Self::add_response_header)…, [`process_response_headers`](Self::process_response_headers) | 3 | check; ask [`inspects_response_body`](Self::inspects_response_body) whether to buffer the body |
/// | [`append_response_body`](Self::append_response_body) per chunk, [`process_response_body`](Self::process_response_body) | 4 | check before sending any byte of the body |
/// | [`process_logging`](Self::process_logging) | 5 | write logs from [`matched_rules`](Self::matched_rules) |
pub struct Transaction<'r> {
    rs: &'r Ruleset,
    options: EvalOptions,
    inputs: Inputs,
    state: RuleState<'r>,
    cache: EvalCache,
    stats: EvalStats,
    profile: RuleProfile,
    /// The pool's box this transaction's buffers came in, emptied: they go
    /// back in it, so a transaction per request allocates no box (one of
    /// ~5 KB, freed and allocated again per request, was a large-chunk
    /// `malloc`/`free` pair and a consolidation of the allocator's bins).
    shell: Option<Box<Leftovers>>,
}

impl Ruleset {
    /// A new transaction with this ruleset's evaluation options. Its
    /// buffers (memo table, collections, match records) come from a dropped
    /// transaction of this ruleset when there is one, so creating a
    /// transaction per request costs little once warm; reusing one
    /// transaction per worker ([`Transaction::reset`]) costs nothing. The
    /// cross-transaction cache is the thread's: each phase borrows it.
    pub fn transaction(&self) -> Transaction<'_> {
        Transaction::with_options(self, self.eval_options())
    }

    /// A transaction with non-default evaluation options (e.g. the naive mode).
    pub fn transaction_with(&self, options: EvalOptions) -> Transaction<'_> {
        Transaction::with_options(self, options)
    }
}

/// What a dropped transaction leaves in its ruleset's pool for the next
/// one: every buffer, grown to the traffic (the memo table's among them; the
/// cross-transaction cache stays with the thread). A transaction per request
/// (what a proxy does) then allocates as little as one reset and reused.
#[derive(Default)]
struct Leftovers {
    cache: EvalCache,
    /// `None` after a request with a big body: its buffers are not worth
    /// keeping around (a pool of them would hold request-body-limit bytes each).
    inputs: Option<Inputs>,
    state: state::StateBuffers,
}

/// Bodies up to this size leave their buffers in the pool.
const POOLED_BODY_BYTES: usize = 256 << 10;

/// The buffers go back to the ruleset's pool for the next transaction (see
/// [`Ruleset::transaction`]).
impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        let small = self.inputs.body.capacity() <= POOLED_BODY_BYTES
            && self.inputs.response_body.capacity() <= POOLED_BODY_BYTES;
        let inputs = small.then(|| {
            let placeholder = Inputs::new(BodyParser::default(), ArgLimit::default());
            std::mem::replace(&mut self.inputs, placeholder)
        });
        // Each part is moved into the box by itself: a `Leftovers` built
        // first and then moved in would copy its ~4 KB twice.
        let mut shell = self.shell.take().unwrap_or_default();
        shell.cache = std::mem::take(&mut self.cache);
        shell.inputs = inputs;
        shell.state = self.state.take_buffers();
        self.rs.pool.give(shell);
    }
}

impl<'r> Transaction<'r> {
    /// A transaction with the default evaluation options.
    pub fn new(rs: &'r Ruleset) -> Transaction<'r> {
        Self::with_options(rs, EvalOptions::default())
    }

    /// A transaction with the given evaluation options.
    pub fn with_options(rs: &'r Ruleset, options: EvalOptions) -> Transaction<'r> {
        let s = &rs.program().settings;
        let config = body::BodyConfig {
            arg_separator: s.argument_separator,
            json_depth_limit: s.request_body_json_depth_limit,
            ..body::BodyConfig::default()
        };
        // A dropped transaction's buffers when there are some: grown, and
        // with a warm cross-transaction cache.
        let mut shell = rs.pool.take().and_then(|c| c.downcast::<Leftovers>().ok());
        // The parts are taken out one by one (see `Drop`).
        let (cache, inputs, state) = match shell.as_deref_mut() {
            Some(l) => (
                std::mem::take(&mut l.cache),
                l.inputs
                    .take()
                    .unwrap_or_else(|| Inputs::new(BodyParser::new(config), arg_limit(s))),
                RuleState::with_buffers(s, std::mem::take(&mut l.state)),
            ),
            None => (
                EvalCache {
                    memo: Memo::new(rs),
                    generation: 0,
                    scratch: Default::default(),
                },
                Inputs::new(BodyParser::new(config), arg_limit(s)),
                RuleState::new(s),
            ),
        };
        let mut tx = Transaction {
            rs,
            options,
            inputs,
            state,
            cache,
            stats: EvalStats::default(),
            profile: RuleProfile::default(),
            shell,
        };
        tx.set_options(options);
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
        let s = self.settings();
        self.inputs.clear(arg_limit(s));
        self.state.clear(s);
        self.inputs.unique_id.clear();
        // Writing to a String only fails if a Display impl does; these cannot.
        let _ = std::fmt::Write::write_fmt(
            &mut self.inputs.unique_id,
            format_args!("{:x}{:06x}", now.as_micros(), n & 0xff_ffff),
        );
        self.cache.memo.clear();
        self.cache.generation = self.cache.generation.wrapping_add(1);
    }

    fn program(&self) -> &'r Program {
        self.rs.program()
    }

    fn settings(&self) -> &'r Settings {
        &self.rs.program().settings
    }

    /// The evaluation options in effect.
    pub fn options(&self) -> EvalOptions {
        self.options
    }

    /// Changes the evaluation options (takes effect from the next rule).
    pub fn set_options(&mut self, options: EvalOptions) {
        self.options = options;
        self.cache.memo.x_on = options.xcache && options.memo;
        self.cache.memo.prof_on = options.profile;
    }

    /// Empties the cross-transaction cache this thread keeps for the
    /// ruleset (its buffers are kept). The cache belongs to the thread, not
    /// to the transaction: every transaction of the ruleset on this thread
    /// starts cold after this.
    pub fn clear_cache(&mut self) {
        xcache::home_clear(self.rs.id());
        self.cache.memo.x.clear();
    }

    /// Counters accumulated since creation or [`Transaction::reset_stats`].
    pub fn stats(&self) -> EvalStats {
        self.stats
    }

    /// Per-rule measurements (filled with [`EvalOptions::profile`]).
    pub fn rule_profile(&self) -> &RuleProfile {
        &self.profile
    }

    /// Per transform-chain measurements (filled with [`EvalOptions::profile`];
    /// empty otherwise).
    pub fn chain_profile(&self) -> &ChainProfile {
        &self.cache.memo.prof
    }

    /// Zeroes [`Transaction::stats`] and the profiles.
    pub fn reset_stats(&mut self) {
        self.stats = EvalStats::default();
        self.profile.clear();
        self.cache.memo.prof.clear();
    }

    // ------------------------------------------------------------ request

    /// Client and server addresses and ports (`REMOTE_ADDR`, `REMOTE_PORT`,
    /// `SERVER_ADDR`, `SERVER_PORT`).
    pub fn process_connection(
        &mut self,
        client: &str,
        client_port: u16,
        server: &str,
        server_port: u16,
    ) {
        let i = &mut self.inputs;
        inputs::set(&mut i.remote_addr, client.as_bytes());
        i.remote_port = client_port;
        inputs::set(&mut i.server_addr, server.as_bytes());
        i.server_port = server_port;
    }

    /// The request line: the URI as sent (path and query, or absolute), the
    /// method, and the protocol as sent (`HTTP/1.1`; empty for HTTP/0.9).
    /// Query-string arguments are parsed here.
    pub fn process_uri(&mut self, uri: &[u8], method: &[u8], protocol: &[u8]) {
        self.inputs.set_request_line(uri, method, protocol);
    }

    /// One request header, in arrival order (repeated names are kept).
    pub fn add_request_header(&mut self, name: &[u8], value: &[u8]) {
        self.inputs.add_request_header(name, value);
    }

    /// Phase 1: the request headers are complete.
    pub fn process_request_headers(&mut self) {
        self.run_phase(1);
    }

    /// Feeds request body bytes as they arrive; call once per chunk, then
    /// [`Transaction::process_request_body`].
    ///
    /// The limits apply as the chunks arrive, so a proxy learns of a
    /// rejection before it has read (or forwarded) the rest:
    /// - past `SecRequestBodyLimit`, `INBOUND_DATA_ERROR` is 1 and the body
    ///   keeps only its first `limit` bytes; with
    ///   `SecRequestBodyLimitAction Reject` and `SecRuleEngine On` the
    ///   transaction gets a 413 intervention whose [`Intervention::cause`] is
    ///   [`Cause::RequestBodyLimit`] (ModSecurity v3 answers 403; 413 is what
    ///   HTTP defines for it, and what ModSecurity v2 used); with
    ///   `ProcessPartial` the kept bytes are inspected;
    /// - `SecRequestBodyNoFilesLimit` is checked the same way for bodies
    ///   without files (every processor but multipart), and for multipart
    ///   bodies once parsed, on the bytes that are not file contents.
    ///
    /// Returns whether the engine still wants body bytes: false once the
    /// body is rejected or the inspected part is full (a proxy may then
    /// stream the rest upstream without feeding it).
    pub fn append_request_body(&mut self, chunk: &[u8]) -> bool {
        let s = self.settings();
        let i = &mut self.inputs;
        i.body_received += chunk.len() as u64;
        if self.state.intervention.is_some() {
            return false;
        }
        let multipart = i.processor == Some(Processor::Multipart);
        // The limit of this body as it arrives: the no-files limit counts
        // every byte unless parts may be files.
        let (limit, cause) = match (s.request_body_no_files_limit, multipart) {
            (nf, false) if nf > 0 && (nf < s.request_body_limit || s.request_body_limit == 0) => {
                (nf, Cause::RequestBodyNoFilesLimit { limit: nf })
            }
            _ => (
                s.request_body_limit,
                Cause::RequestBodyLimit {
                    limit: s.request_body_limit,
                },
            ),
        };
        let room = (limit as usize).saturating_sub(i.body.len());
        if limit > 0 && chunk.len() > room {
            i.body.extend_from_slice(&chunk[..room]);
            i.body_truncated = true;
            self.over_request_limit(cause);
            return false;
        }
        i.body.extend_from_slice(chunk);
        true
    }

    /// The request body's coding, from the `Content-Encoding` request
    /// headers the transaction was given.
    pub(crate) fn request_coding(&self) -> crate::coding::Coding {
        crate::coding::Coding::of(
            self.inputs
                .headers
                .with_key(b"content-encoding")
                .map(|e| e.value.as_slice()),
        )
    }

    /// The front end rejects the request body it was feeding: a compressed
    /// body that does not decode ([`Cause::RequestBodyNotDecoded`], 400)
    /// or one in a coding it cannot decode for inspection
    /// ([`Cause::RequestBodyCodingUnsupported`], 415), which would otherwise
    /// reach the application uninspected. Whatever the engine mode (a body
    /// the rules could not read is not one they let through), unless the
    /// transaction was already interrupted; other causes are ignored (the
    /// engine sets those itself). No more body bytes are taken, and the
    /// body is not parsed.
    pub fn reject_request_body(&mut self, cause: Cause) {
        let status = match cause {
            Cause::RequestBodyNotDecoded => 400,
            Cause::RequestBodyCodingUnsupported => 415,
            _ => return,
        };
        if self.state.intervention.is_none() {
            self.state.intervention = Some(Intervention::limit(status, 2, cause));
        }
    }

    /// A request body limit was crossed: `INBOUND_DATA_ERROR`, and with
    /// `Reject` (engine `On`) a 413 intervention.
    fn over_request_limit(&mut self, cause: Cause) {
        self.inputs.inbound_data_error = true;
        let s = self.settings();
        if s.request_body_limit_action == LimitAction::Reject
            && self.state.mode == EngineMode::On
            && self.state.intervention.is_none()
        {
            self.state.intervention = Some(Intervention::limit(413, 2, cause));
        }
    }

    /// Phase 2: the request body is complete (also call it for requests
    /// without a body). Parses the body with the selected processor
    /// (`REQBODY_PROCESSOR`), then runs the phase's rules.
    pub fn process_request_body(&mut self) {
        self.parse_body();
        self.run_phase(2);
    }

    fn parse_body(&mut self) {
        if self.inputs.body_done {
            return;
        }
        self.inputs.body_done = true;
        if !self.state.request_body_access || self.state.intervention.is_some() {
            return;
        }
        let Some(p) = self.inputs.processor else {
            return;
        };
        self.inputs.parse_body(p);
        // What the processor left uninspected is never silent: rules (CRS
        // 200002) see REQBODY_ERROR, whatever the processor. ModSecurity v3
        // sets it for a truncated body too, not for skipped arguments.
        // A truncated urlencoded body parses cleanly: say it here.
        let r = &mut self.inputs.body_result;
        let uninspected = if self.inputs.body_truncated {
            Some((
                "Request body truncated at ",
                self.inputs.body.len(),
                &b" bytes (request body limit): the rest was not inspected"[..],
            ))
        } else if r.args_skipped > 0 {
            Some((
                "",
                r.args_skipped,
                &b" arguments beyond SecArgumentsLimit were not inspected"[..],
            ))
        } else {
            None
        };
        if let (false, Some((prefix, n, rest))) = (r.reqbody_error, uninspected) {
            r.set_error(prefix, b"");
            push_i64(&mut r.reqbody_error_msg, n as i64);
            r.reqbody_error_msg.extend_from_slice(rest);
        }
        if p == Processor::Multipart {
            // Multipart: the no-files limit counts what is not file content.
            let s = self.settings();
            let files = self.inputs.body_result.files_combined_size.unwrap_or(0);
            let no_files = (self.inputs.body.len() as u64).saturating_sub(files);
            let nf = s.request_body_no_files_limit;
            if nf > 0 && no_files > nf {
                self.over_request_limit(Cause::RequestBodyNoFilesLimit { limit: nf });
            }
        }
    }

    // ------------------------------------------------------------ response

    /// One response header, in arrival order.
    pub fn add_response_header(&mut self, name: &[u8], value: &[u8]) {
        self.inputs.response_headers.push(name, value);
    }

    /// Phase 3: the response status line and headers are complete.
    pub fn process_response_headers(&mut self, status: u16, protocol: &[u8]) {
        self.inputs.status = status;
        inputs::set(&mut self.inputs.response_protocol, protocol);
        self.run_phase(3);
    }

    /// Whether the request body will be inspected: the engine is not `Off`
    /// and `SecRequestBodyAccess` is on, as `ctl` left it. Ask after
    /// [`Transaction::process_request_headers`]: when it is false, a proxy
    /// need not hold the body for phase 2 (nothing of it reaches the
    /// rules), and can run phase 2 at once and stream the body on (large
    /// uploads, gRPC streams).
    pub fn inspects_request_body(&self) -> bool {
        self.state.mode != EngineMode::Off && self.state.request_body_access
    }

    /// Whether response bodies may be inspected at all (the engine is not
    /// `Off` and `SecResponseBodyAccess` is on, as `ctl` left it): a proxy
    /// can then ask the application for encodings it can decode before the
    /// response's type is known.
    pub fn response_body_access(&self) -> bool {
        self.state.mode != EngineMode::Off && self.state.response_body_access
    }

    /// Whether phase 4 will inspect the response body: response body access
    /// is on and the response's MIME type is one of
    /// `SecResponseBodyMimeType`. Ask after
    /// [`Transaction::process_response_headers`]: a proxy buffers the body
    /// (up to `SecResponseBodyLimit`) only when this is true, and streams it
    /// untouched otherwise.
    pub fn inspects_response_body(&self) -> bool {
        self.state.mode != EngineMode::Off
            && self.state.response_body_access
            && self.response_type_inspected()
    }

    /// Feeds response body bytes as they arrive; call once per chunk, then
    /// [`Transaction::process_response_body`].
    ///
    /// Only bodies that [`Transaction::inspects_response_body`] are kept, up
    /// to `SecResponseBodyLimit`. Past it, `OUTBOUND_DATA_ERROR` is 1; with
    /// `SecResponseBodyLimitAction Reject` (engine `On`) the transaction gets
    /// a 500 intervention with [`Cause::ResponseBodyLimit`] (as ModSecurity
    /// does); with `ProcessPartial` the first `limit` bytes are inspected.
    /// Returns whether the engine still wants body bytes.
    pub fn append_response_body(&mut self, chunk: &[u8]) -> bool {
        self.inputs.response_body_received += chunk.len() as u64;
        if !self.inspects_response_body() || self.state.intervention.is_some() {
            return false;
        }
        let s = self.settings();
        let limit = s.response_body_limit;
        let room = (limit as usize).saturating_sub(self.inputs.response_body.len());
        if limit > 0 && chunk.len() > room {
            self.inputs.response_body.extend_from_slice(&chunk[..room]);
            self.inputs.outbound_data_error = true;
            if s.response_body_limit_action == LimitAction::Reject
                && self.state.mode == EngineMode::On
            {
                self.state.intervention = Some(Intervention::limit(
                    500,
                    4,
                    Cause::ResponseBodyLimit { limit },
                ));
            }
            return false;
        }
        self.inputs.response_body.extend_from_slice(chunk);
        true
    }

    /// The response body as phase 4 reads it: the bytes fed to
    /// [`Transaction::append_response_body`], up to `SecResponseBodyLimit`
    /// (a proxy that decodes a compressed body feeds the decoded bytes; its
    /// audit log shows these).
    pub fn response_body(&self) -> &[u8] {
        &self.inputs.response_body
    }

    /// Phase 4: the response body is complete. Runs only when
    /// [`Transaction::inspects_response_body`]; a phase-4 intervention must be
    /// applied before any byte of the body is sent.
    pub fn process_response_body(&mut self) {
        if self.inspects_response_body() && self.state.intervention.is_none() {
            self.inputs.response_body_seen = true;
            self.run_phase(4);
        }
    }

    fn response_type_inspected(&self) -> bool {
        let types = &self.settings().response_body_mime_types;
        let ct = self.inputs.response_content_type().unwrap_or(b"");
        types.is_empty() || types.iter().any(|t| t.as_bytes() == ct)
    }

    /// Phase 5 (logging): runs whatever happened before, interventions
    /// included.
    pub fn process_logging(&mut self) {
        let saved = self.state.allow;
        let intervention = self.state.intervention.take();
        // Neither `allow` nor an earlier intervention skips the logging phase.
        self.state.allow = Allow::None;
        self.run_phase(5);
        self.state.allow = saved;
        if intervention.is_some() {
            self.state.intervention = intervention;
        }
    }

    // ------------------------------------------------------------ outputs

    /// What the server should do, once a disruptive rule fired (engine
    /// `On`) or a body limit rejected the request: stop feeding phases and
    /// apply it (only [`Transaction::process_logging`] still runs).
    pub fn intervention(&self) -> Option<&Intervention> {
        self.state.intervention.as_ref()
    }

    /// Every rule that matched, in order (including `nolog` ones).
    pub fn matched_rules(&self) -> MatchedRules<'_> {
        MatchedRules::new(&self.state.match_refs, &self.state.matches)
    }

    /// The transaction's error-log lines as ModSecurity writes them: one per
    /// matched rule that logs ([`crate::MatchedRule::log_line`]), then the
    /// intervention's ([`Intervention::log_line`]). Ask after
    /// [`Transaction::process_logging`].
    pub fn log_lines(&self) -> impl Iterator<Item = String> + '_ {
        self.new_log_lines(LogCursor::default()).0
    }

    /// The log lines that came after `cursor` (see [`Transaction::log_lines`]),
    /// and the cursor past them. A connector asks after each phase and writes
    /// what is new before it answers, as ModSecurity logs while it evaluates:
    /// whoever reads the log after a response finds that response's lines.
    pub fn new_log_lines(
        &self,
        cursor: LogCursor,
    ) -> (impl Iterator<Item = String> + '_, LogCursor) {
        let uri = String::from_utf8_lossy(self.uri_raw());
        let id = self.unique_id();
        let matched = self.matched_rules();
        let count = matched.len();
        let rules = matched.skip(cursor.rules).filter(|m| m.log).map(Ok);
        let intervention = self.intervention().filter(|_| !cursor.intervention);
        let next = LogCursor {
            rules: count,
            intervention: cursor.intervention || intervention.is_some(),
        };
        let lines = rules
            .chain(intervention.map(Err))
            .map(move |line| match line {
                Ok(m) => m.log_line(&uri, id),
                Err(i) => i.log_line(&uri, id),
            });
        (lines, next)
    }

    /// `UNIQUE_ID`: this transaction's id (what log lines carry).
    pub fn unique_id(&self) -> &str {
        &self.inputs.unique_id
    }

    /// Replaces `UNIQUE_ID` with the server's own request id (nginx's
    /// `$request_id`, an `X-Request-ID`), so that the WAF's log lines and the
    /// server's can be joined. Call it before phase 1 (rules read it from
    /// then on); it lasts until [`Transaction::reset`] makes a new one.
    pub fn set_unique_id(&mut self, id: &str) {
        self.inputs.unique_id.clear();
        self.inputs.unique_id.push_str(id);
    }

    /// The value of a TX variable (for tests and embedding).
    pub fn tx_var(&self, name: &str) -> Option<&[u8]> {
        self.state.tx.get(name.as_bytes())
    }

    /// `REQUEST_URI_RAW`: the URI as given to [`Transaction::process_uri`].
    pub fn uri_raw(&self) -> &[u8] {
        &self.inputs.uri_raw
    }

    /// `REQBODY_ERROR_MSG` when the body processor failed (`REQBODY_ERROR` 1).
    pub fn request_body_error(&self) -> Option<&[u8]> {
        let r = &self.inputs.body_result;
        r.reqbody_error.then_some(r.reqbody_error_msg.as_slice())
    }

    /// Removes the rules with ids `first..=last` from this transaction, as
    /// `ctl:ruleRemoveById` does: an embedder's per-request exception (a
    /// site's exclusions in `waf serve`'s manifest). Call it before the
    /// phase the rules run in; it lasts until [`Transaction::reset`].
    pub fn remove_rules_by_id(&mut self, first: u64, last: u64) {
        self.state.removed_ids.push((first, last));
        self.note_removal(state::RuleSel::Ids(&[(first, last)]));
    }

    /// Removes the rules tagged `tag` from this transaction, as
    /// `ctl:ruleRemoveByTag` does (see [`Transaction::remove_rules_by_id`]).
    pub fn remove_rules_by_tag(&mut self, tag: &'r str) {
        self.state.removed_tags.push(tag);
        self.note_removal(state::RuleSel::Tag(tag));
    }

    /// The ruleset this transaction runs (e.g. to name the rules of
    /// [`Transaction::rule_profile`], which is indexed like its program's rules).
    pub fn ruleset(&self) -> &'r Ruleset {
        self.rs
    }

    /// `SecRuleEngine`, as `ctl:ruleEngine` left it.
    pub fn rule_engine(&self) -> EngineMode {
        self.state.mode
    }

    /// The audit-log parts to write for this transaction (`SecAuditLogParts`,
    /// as `ctl:auditLogParts` left it), or `None` when `SecAuditEngine` (or
    /// `ctl:auditEngine`) says it is not logged: `Off`, or `RelevantOnly`
    /// with neither an intervention nor a matched rule that logs to the
    /// audit log. Ask after [`Transaction::process_logging`].
    pub fn audit_log_parts(&self) -> Option<AuditParts> {
        let relevant = match self.state.audit_engine {
            AuditEngine::Off => false,
            AuditEngine::On => true,
            AuditEngine::RelevantOnly => {
                self.state.intervention.is_some()
                    || self.matched_rules().any(|m| m.auditlog && m.log)
            }
        };
        relevant.then_some(self.state.audit_parts)
    }

    /// Request body bytes fed so far, kept or not.
    pub fn request_body_received(&self) -> u64 {
        self.inputs.body_received
    }
}

/// The argument-count limit of a fresh transaction (`SecArgumentsLimit`).
fn arg_limit(s: &Settings) -> ArgLimit {
    ArgLimit::new(Some(s.arguments_limit as usize))
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod chain_profile_tests {
    use super::{xcache, EvalOptions, Transaction};
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
    fn the_cache_holds_as_many_values_as_the_options_say() {
        // 40 requests of 40 distinct values, three times over: a cache of
        // the default size learns them in the first two rounds and serves
        // all of the third; one of 16 values starts over again and again.
        let hits_in_third_round = |records: usize| {
            let rs = Ruleset::from_str("t.conf", RULES)
                .expect("compiles")
                .with_eval_options(EvalOptions {
                    xcache_records: records,
                    ..EvalOptions::default()
                });
            let mut tx = rs.transaction();
            for round in 0..3 {
                if round == 2 {
                    tx.reset_stats();
                }
                for i in 0..40 {
                    tx.reset();
                    tx.process_uri(format!("/?a=value{i}").as_bytes(), b"GET", b"HTTP/1.1");
                    tx.process_request_headers();
                }
            }
            tx.stats().xcache_hits
        };
        assert_eq!(hits_in_third_round(EvalOptions::DEFAULT_XCACHE_RECORDS), 40);
        assert!(hits_in_third_round(16) < 20);
    }

    #[test]
    fn a_threads_caches_of_a_dropped_ruleset_go_at_its_next_phase() {
        let phase = |rs: &Ruleset| {
            let mut tx = rs.transaction();
            tx.process_uri(b"/?a=x", b"GET", b"HTTP/1.1");
            tx.process_request_headers();
        };
        let old = Ruleset::from_str("old.conf", RULES).expect("compiles");
        let new = Ruleset::from_str("new.conf", RULES).expect("compiles");
        phase(&old);
        phase(&new);
        let (old_id, new_id) = (old.id(), new.id());
        assert_eq!(xcache::home_ids()[..2], [new_id, old_id]);
        drop(old);
        phase(&new);
        let ids = xcache::home_ids();
        assert!(ids.contains(&new_id) && !ids.contains(&old_id), "{ids:?}");
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
