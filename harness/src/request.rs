//! One request in the peers' JSON format, and the decision the engine takes
//! on it (what `waf eval` prints, one JSON object per request).
//!
//! The formats are documented with examples in `docs/formats.md`.

use crate::corpus::CorpusRequest;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Instant;
use waf_engine::Ruleset;

/// One request as a JSON object (a line of a JSONL corpus, or the file given
/// to `waf eval --request`).
///
/// Every field is optional. Besides the request's own fields, the
/// annotations that the corpus converters write (`expect_ids`,
/// `no_expect_ids`, `file`, `url`) are accepted and not used; any other
/// field (a typo such as `bodyy`) is an error, not ignored.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// The request's id, any JSON value (strings are used as they are, other
    /// values as their JSON text); absent: a number chosen by the reader.
    #[serde(default)]
    pub id: Option<serde_json::Value>,
    /// The method; absent or empty: `GET`.
    #[serde(default)]
    pub method: String,
    /// The request target (path and query); absent or empty: `/`.
    #[serde(default)]
    pub uri: String,
    /// The protocol; absent or empty: `HTTP/1.1`.
    #[serde(default)]
    pub version: String,
    /// Header `[name, value]` pairs in order, repeats allowed.
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// The body as text (UTF-8).
    #[serde(default)]
    pub body: Option<String>,
    /// The body in standard base64; wins over `body` when both are given.
    #[serde(default)]
    pub body_b64: Option<String>,
    /// Annotation (`ftw_to_jsonl.py`): rule ids the request should match.
    #[serde(default)]
    pub expect_ids: Option<serde_json::Value>,
    /// Annotation (`ftw_to_jsonl.py`): rule ids it should not match.
    #[serde(default)]
    pub no_expect_ids: Option<serde_json::Value>,
    /// Annotation (`ftw_to_jsonl.py`, `har_to_jsonl.py`): the source file.
    #[serde(default)]
    pub file: Option<serde_json::Value>,
    /// Annotation (`har_to_jsonl.py`): the captured URL.
    #[serde(default)]
    pub url: Option<serde_json::Value>,
}

/// A request that parses as JSON but cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
    /// The JSON is malformed, or has an unknown field or a value of the wrong
    /// type; serde's message names the field and the column.
    Json(String),
    /// `body_b64` is not valid base64.
    Base64(String),
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::Json(e) => write!(f, "invalid request: {e}"),
            RequestError::Base64(e) => write!(f, "invalid request: body_b64: {e}"),
        }
    }
}

impl std::error::Error for RequestError {}

impl Request {
    /// Parses one JSON object.
    pub fn parse(text: &str) -> Result<Request, RequestError> {
        serde_json::from_str(text).map_err(|e| RequestError::Json(e.to_string()))
    }

    /// The body's bytes: `body_b64` decoded, else `body`, else nothing.
    pub fn body_bytes(&self) -> Result<Vec<u8>, RequestError> {
        match (&self.body_b64, &self.body) {
            (Some(b), _) => base64::engine::general_purpose::STANDARD
                .decode(b)
                .map_err(|e| RequestError::Base64(e.to_string())),
            (None, Some(b)) => Ok(b.as_bytes().to_vec()),
            (None, None) => Ok(Vec::new()),
        }
    }

    /// The id as text, or `fallback` when the request has none.
    pub fn id_or(&self, fallback: impl FnOnce() -> String) -> String {
        match &self.id {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => fallback(),
        }
    }

    /// The request as the engine receives it, with the peers' connection
    /// tuple and the defaults for an empty method, URI or version.
    pub fn to_corpus_request(&self, id: String) -> Result<CorpusRequest, RequestError> {
        let body = self.body_bytes()?;
        let or_default =
            |v: &str, d: &str| -> Vec<u8> { if v.is_empty() { d } else { v }.as_bytes().to_vec() };
        Ok(CorpusRequest {
            method: or_default(&self.method, "GET"),
            uri: or_default(&self.uri, "/"),
            version: or_default(&self.version, "HTTP/1.1"),
            headers: self
                .headers
                .iter()
                .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
                .collect(),
            body,
            ..CorpusRequest::peers(id)
        })
    }
}

/// What the engine decided on one request (phases 1 and 2), as `waf eval`
/// prints it: one JSON object per request, keys in alphabetical order (the
/// order of the fields).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// The disruptive action (`deny`, `drop`, `redirect`, `proxy`), or null.
    pub action: Option<&'static str>,
    /// The request's id.
    pub id: String,
    /// Whether a rule (or a limit) interrupted the transaction.
    pub interrupted: bool,
    /// The macro-expanded `logdata` of the matches of `matched_ids`, in
    /// match order, for the rules that have one (what ModSecurity writes as
    /// `[data "..."]`).
    pub logdata: Vec<LogData>,
    /// Ids of the matched rules that log (and the interrupting one), in
    /// match order, each once.
    pub matched_ids: Vec<u64>,
    /// Ids of every matched rule, in match order, each once.
    pub matched_ids_all: Vec<u64>,
    /// Time spent in the engine for this request, in nanoseconds.
    pub ns: u64,
    /// Why, for people (`rule 949110 (deny)`, or the body limit crossed), or
    /// null.
    pub reason: Option<String>,
    /// The rule that interrupted (0 when a limit did), or null.
    pub rule_id: Option<u64>,
    /// The status the client gets: the intervention's, or 200.
    pub status: u16,
}

/// One matched rule's expanded `logdata`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogData {
    /// The rule's id.
    pub id: u64,
    /// `logdata`, macro-expanded when the rule matched.
    pub data: String,
}

impl Decision {
    /// Whether the client does not get the backend's answer.
    pub fn blocked(&self) -> bool {
        self.interrupted
    }
}

/// Runs phases 1 and 2 of `req` on a fresh transaction of `rs` (stopping at
/// the first interruption) and reports the decision.
pub fn decide(rs: &Ruleset, req: &CorpusRequest) -> Decision {
    let start = Instant::now();
    let mut tx = rs.transaction();
    req.feed(&mut tx);
    let ns = start.elapsed().as_nanos() as u64;
    let mut logged: Vec<u64> = Vec::new();
    let mut all: Vec<u64> = Vec::new();
    let mut logdata: Vec<LogData> = Vec::new();
    let interrupting = tx.intervention().map(|i| i.rule_id);
    for m in tx.matched_rules() {
        if !all.contains(&m.id) {
            all.push(m.id);
        }
        let logs = m.log || interrupting == Some(m.id);
        if logs && !logged.contains(&m.id) {
            logged.push(m.id);
        }
        if logs && !m.logdata.is_empty() {
            logdata.push(LogData {
                id: m.id,
                data: m.logdata.clone(),
            });
        }
    }
    let i = tx.intervention();
    Decision {
        id: req.id.clone(),
        interrupted: i.is_some(),
        status: i.map_or(200, |i| i.status),
        action: i.map(|i| i.action),
        rule_id: i.map(|i| i.rule_id),
        reason: i.map(|i| i.reason()),
        matched_ids: logged,
        matched_ids_all: all,
        logdata,
        ns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_are_errors_naming_the_field() {
        let e = Request::parse(r#"{"uri":"/","bodyy":"x"}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field `bodyy`"), "{e}");
        let r = Request::parse(r#"{"uri":"/a","body":"x","expect_ids":[1],"file":"f"}"#).unwrap();
        assert_eq!(r.body_bytes().unwrap(), b"x");
    }

    #[test]
    fn defaults_and_body_b64() {
        let r = Request::parse(r#"{"method":"","body_b64":"AP8=","body":"ignored"}"#).unwrap();
        let c = r.to_corpus_request(r.id_or(|| "7".into())).unwrap();
        assert_eq!(
            (c.id.as_str(), &c.method[..], &c.uri[..]),
            ("7", &b"GET"[..], &b"/"[..])
        );
        assert_eq!(c.body, [0, 0xff]);
        let bad = Request::parse(r#"{"body_b64":"***"}"#).unwrap();
        assert!(matches!(bad.body_bytes(), Err(RequestError::Base64(_))));
        assert_eq!(
            Request::parse(r#"{"id":5}"#).unwrap().id_or(String::new),
            "5"
        );
    }
}
