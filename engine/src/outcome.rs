//! What a transaction reports: the intervention a server applies, and the
//! rules that matched (with the fields of an error-log line).

use std::sync::Arc;
use waf_compiler::names::Severity;

/// What the server should do with the transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Intervention {
    /// The HTTP status to answer with (for `drop`, the status a log should
    /// show; the connection is closed instead).
    pub status: u16,
    /// `deny`, `drop`, `redirect` or `proxy`.
    pub action: &'static str,
    /// The rule whose disruptive action fired; 0 when the cause is not a
    /// rule (see [`Intervention::cause`]).
    pub rule_id: u64,
    /// The phase in which it happened (1-5).
    pub phase: u8,
    /// `redirect`'s location or `proxy`'s upstream, macro-expanded.
    pub url: Option<String>,
    /// Why the transaction was interrupted.
    pub cause: Cause,
}

/// Why a transaction was interrupted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cause {
    /// A rule's disruptive action (`deny`, `drop`, `redirect`, `proxy`).
    Rule,
    /// The request body grew past `SecRequestBodyLimit` (bytes) with
    /// `SecRequestBodyLimitAction Reject`.
    RequestBodyLimit {
        /// The limit crossed.
        limit: u64,
    },
    /// The request body without files grew past `SecRequestBodyNoFilesLimit`
    /// with `SecRequestBodyLimitAction Reject`.
    RequestBodyNoFilesLimit {
        /// The limit crossed.
        limit: u64,
    },
    /// The inspected response body grew past `SecResponseBodyLimit` with
    /// `SecResponseBodyLimitAction Reject`.
    ResponseBodyLimit {
        /// The limit crossed.
        limit: u64,
    },
    /// The request body, compressed (`Content-Encoding` gzip or deflate),
    /// does not decode: damaged or cut short (400; see
    /// [`Transaction::reject_request_body`](crate::Transaction::reject_request_body)).
    RequestBodyNotDecoded,
    /// The request body is in a coding that cannot be decoded for
    /// inspection (`br`, `zstd`, several stacked; 415).
    RequestBodyCodingUnsupported,
}

impl Intervention {
    /// A rejection by a body limit (no rule: `rule_id` 0).
    pub(crate) fn limit(status: u16, phase: u8, cause: Cause) -> Intervention {
        Intervention {
            status,
            action: "deny",
            rule_id: 0,
            phase,
            url: None,
            cause,
        }
    }

    /// Why, in words (what an error log or a 413 page says).
    pub fn reason(&self) -> String {
        match self.cause {
            Cause::Rule => format!("rule {} ({})", self.rule_id, self.action),
            Cause::RequestBodyLimit { limit } => {
                format!("request body is larger than the configured limit ({limit} bytes)")
            }
            Cause::RequestBodyNoFilesLimit { limit } => format!(
                "request body excluding files is larger than the configured limit ({limit} bytes)"
            ),
            Cause::ResponseBodyLimit { limit } => {
                format!("response body is larger than the configured limit ({limit} bytes)")
            }
            Cause::RequestBodyNotDecoded => {
                "request body does not decode (its content-encoding: damaged or cut short)".to_string()
            }
            Cause::RequestBodyCodingUnsupported => "request body's content-encoding cannot be decoded for inspection (gzip and deflate can)".to_string(),
        }
    }

    /// A ModSecurity-style error-log line for the intervention itself
    /// (`Access denied with code 403 (phase 2). ...`), one line, request data
    /// escaped as in [`MatchedRule::log_line`].
    pub fn log_line(&self, uri: &str, unique_id: &str) -> String {
        let what = match self.action {
            "redirect" => format!(
                "Access denied with redirection to {} using status {}",
                escape_log(self.url.as_deref().unwrap_or("")),
                self.status
            ),
            "drop" => "Access denied with connection close".to_string(),
            "proxy" => format!(
                "Access denied using proxy to {}",
                escape_log(self.url.as_deref().unwrap_or(""))
            ),
            _ => format!("Access denied with code {}", self.status),
        };
        let mut s = format!(
            "ModSecurity: {what} (phase {}). {}.",
            self.phase,
            escape_log(&self.reason())
        );
        if self.rule_id != 0 {
            s.push_str(&format!(" [id \"{}\"]", self.rule_id));
        }
        s.push_str(&format!(
            " [uri \"{}\"] [unique_id \"{}\"]",
            limit_to(uri),
            escape_log(unique_id)
        ));
        s
    }
}

/// Where a transaction's match is kept: one of its own records, or a
/// record of the ruleset's (a static block's match, the same for every
/// transaction that reaches the block: see `crate::blocks`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum MatchRef<'r> {
    Own(u32),
    Shared(&'r MatchedRule),
}

/// The rules a transaction matched, in order ([`crate::Transaction::matched_rules`]).
///
/// An iterator rather than a slice: a static block's matches are the
/// ruleset's records, read in place; copying them into each transaction
/// (a few dozen per CRS request, each with its strings) read and wrote
/// hundreds of cache lines that are cold when a proxy runs the engine.
#[derive(Clone, Debug)]
pub struct MatchedRules<'a> {
    refs: std::slice::Iter<'a, MatchRef<'a>>,
    own: &'a [MatchedRule],
}

impl<'a> MatchedRules<'a> {
    pub(crate) fn new(refs: &'a [MatchRef<'a>], own: &'a [MatchedRule]) -> MatchedRules<'a> {
        MatchedRules {
            refs: refs.iter(),
            own,
        }
    }

    /// Whether no rule (left to iterate) matched.
    pub fn is_empty(&self) -> bool {
        self.refs.len() == 0
    }

    fn resolve(&self, r: &MatchRef<'a>) -> &'a MatchedRule {
        match *r {
            MatchRef::Shared(m) => m,
            // An own reference is to a record the transaction filled.
            MatchRef::Own(i) => &self.own[i as usize],
        }
    }
}

impl<'a> Iterator for MatchedRules<'a> {
    type Item = &'a MatchedRule;

    fn next(&mut self) -> Option<&'a MatchedRule> {
        let r = self.refs.next()?;
        Some(self.resolve(r))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.refs.size_hint()
    }

    fn nth(&mut self, n: usize) -> Option<&'a MatchedRule> {
        let r = self.refs.nth(n)?;
        Some(self.resolve(r))
    }
}

impl DoubleEndedIterator for MatchedRules<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let r = self.refs.next_back()?;
        Some(self.resolve(r))
    }
}

impl ExactSizeIterator for MatchedRules<'_> {}

impl std::iter::FusedIterator for MatchedRules<'_> {}

/// A rule that matched, with its metadata macro-expanded at match time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MatchedRule {
    /// The rule's `id`.
    pub id: u64,
    /// The phase it ran in.
    pub phase: u8,
    /// `msg`, macro-expanded.
    pub msg: String,
    /// `logdata`, macro-expanded.
    pub logdata: String,
    /// `severity`, if the rule has one.
    pub severity: Option<Severity>,
    /// `tag`s, shared with the ruleset (no copy per match).
    pub tags: Arc<[String]>,
    /// `ver`, shared with the ruleset.
    pub ver: Option<Arc<str>>,
    /// `MATCHED_VAR_NAME` of the last matched value (`ARGS:q`).
    pub matched_var_name: String,
    /// `MATCHED_VAR`: the last matched value, after transformations
    /// (invalid UTF-8 replaced by U+FFFD).
    pub matched_var: String,
    /// False for `nolog` rules: they matched but write no alert.
    pub log: bool,
    /// False for `noauditlog` rules: their match alone does not make the
    /// transaction relevant to the audit log.
    pub auditlog: bool,
    /// The rule's disruptive action fired (not `pass`), whatever the engine mode.
    pub disruptive: bool,
    /// `file:line` of the rule.
    pub location: Arc<str>,
}

impl MatchedRule {
    /// A ModSecurity-style error-log line (what go-ftw's `[id "..."]` and
    /// `match_regex` checks read). Always one line: control bytes, `\`, `"`
    /// and non-ASCII bytes of request data are written as `\xHH`, as Apache's
    /// error log does, so attacker text can neither break the line nor forge a
    /// `[id "..."]` field. `[data]` and `[uri]` keep their first 200 bytes,
    /// as libmodsecurity's do.
    pub fn log_line(&self, uri: &str, unique_id: &str) -> String {
        let e = escape_log;
        let mut s = format!(
            "ModSecurity: Warning. Matched Data: {} found within {}. [file \"{}\"] [id \"{}\"] [msg \"{}\"] [data \"{}\"]",
            e(&self.matched_var),
            e(&self.matched_var_name),
            e(&self.location),
            self.id,
            e(&self.msg),
            limit_to(&self.logdata)
        );
        if let Some(sev) = self.severity {
            s.push_str(&format!(" [severity \"{}\"]", sev.number()));
        }
        if let Some(v) = &self.ver {
            s.push_str(&format!(" [ver \"{}\"]", e(v)));
        }
        for t in self.tags.iter() {
            s.push_str(&format!(" [tag \"{}\"]", e(t)));
        }
        s.push_str(&format!(
            " [uri \"{}\"] [unique_id \"{}\"]",
            limit_to(uri),
            e(unique_id)
        ));
        s
    }
}

/// A long field of a log line as libmodsecurity writes `[data "..."]` and
/// `[uri "..."]`: its first 200 bytes, escaped, then `(N characters
/// omitted)` for the rest.
fn limit_to(s: &str) -> String {
    const LIMIT: usize = 200;
    let b = s.as_bytes();
    if b.len() <= LIMIT {
        return escape_bytes(b);
    }
    format!(
        "{} ({} characters omitted)",
        escape_bytes(&b[..LIMIT]),
        b.len() - LIMIT
    )
}

/// Escapes a log field: printable ASCII except `\` and `"` is kept, every
/// other byte becomes `\xHH`.
fn escape_log(s: &str) -> String {
    escape_bytes(s.as_bytes())
}

fn escape_bytes(s: &[u8]) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s {
        if (0x20..0x7f).contains(&b) && b != b'\\' && b != b'"' {
            out.push(b as char);
        } else {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// `*dst = src.clone()`, unless both already point at the same value.
pub(crate) fn share<T: ?Sized>(dst: &mut Arc<T>, src: &Arc<T>) {
    if !Arc::ptr_eq(dst, src) {
        dst.clone_from(src);
    }
}
