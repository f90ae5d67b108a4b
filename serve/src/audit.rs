//! The JSON audit log: one record per relevant transaction, in ModSecurity
//! v3's `SecAuditLogFormat JSON` layout (`transaction` with `request`,
//! `response`, `producer` and `messages`).
//!
//! Which transactions and which parts: the ruleset's `SecAuditEngine` and
//! `SecAuditLogParts`, as `ctl` actions left them
//! ([`Transaction::audit_log_parts`]). One deliberate difference from v3: a
//! header that appears several times is an array of its values, in order,
//! instead of repeated keys in one JSON object (which JSON parsers keep only
//! one of).

use hyper::HeaderMap;
use serde_json::{json, Map, Value};
use std::net::SocketAddr;
use waf_engine::{AuditParts, EngineMode, Transaction};

/// What the proxy knows of a request and its response at logging time.
#[derive(Clone, Copy)]
pub(crate) struct Exchange<'a> {
    pub remote: SocketAddr,
    pub local: SocketAddr,
    pub method: &'a str,
    pub uri: &'a str,
    pub version: &'a str,
    pub request_headers: &'a HeaderMap,
    pub request_body: &'a [u8],
    /// The status the client got, and the upstream's headers when there was
    /// an upstream response.
    pub status: u16,
    pub response_headers: Option<&'a HeaderMap>,
    /// The response body as far as the proxy held it (inspected bodies only:
    /// streamed ones are not kept).
    pub response_body: &'a [u8],
}

/// Headers as a JSON object; a repeated name maps to the array of its values.
fn headers(h: &HeaderMap) -> Value {
    let mut out = Map::new();
    for name in h.keys() {
        let values: Vec<Value> = h
            .get_all(name)
            .iter()
            .map(|v| Value::String(String::from_utf8_lossy(v.as_bytes()).into_owned()))
            .collect();
        let v = match <[Value; 1]>::try_from(values) {
            Ok([one]) => one,
            Err(many) => Value::Array(many),
        };
        out.insert(name.as_str().to_string(), v);
    }
    Value::Object(out)
}

/// The record of one transaction with `parts`, as one line of JSON. As in
/// v3, the transaction header (part A), the request line and the status are
/// always there; `B` adds the request headers, `C` (or `I`) the request body,
/// `E` the response body, `F` the response headers, `H` the producer and the
/// messages, `K` the ids of every matched rule.
pub(crate) fn record(tx: &Transaction<'_>, x: &Exchange<'_>, parts: AuditParts) -> String {
    let messages: Vec<Value> = tx
        .matched_rules()
        .filter(|m| m.log)
        .map(|m| {
            let (file, line) = m.location.rsplit_once(':').unwrap_or((&m.location, ""));
            json!({
                "message": m.msg,
                "details": {
                    "match": format!("Matched Data: {} found within {}", m.matched_var, m.matched_var_name),
                    "reference": "",
                    "ruleId": m.id.to_string(),
                    "file": file,
                    "lineNumber": line,
                    "data": m.logdata,
                    "severity": m.severity.map(|s| s.number().to_string()).unwrap_or_default(),
                    "ver": m.ver.as_deref().unwrap_or(""),
                    "rev": "",
                    "tags": m.tags.iter().collect::<Vec<_>>(),
                    "maturity": "0",
                    "accuracy": "0",
                }
            })
        })
        .collect();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let mut request = Map::new();
    request.insert("method".into(), x.method.into());
    request.insert(
        "http_version".into(),
        x.version.trim_start_matches("HTTP/").into(),
    );
    request.insert("uri".into(), x.uri.into());
    if parts.contains('B') {
        request.insert("headers".into(), headers(x.request_headers));
    }
    if parts.contains('C') || parts.contains('I') {
        request.insert(
            "body".into(),
            String::from_utf8_lossy(x.request_body).into(),
        );
    }
    let mut response = Map::new();
    response.insert("http_code".into(), x.status.into());
    if parts.contains('F') {
        response.insert(
            "headers".into(),
            x.response_headers
                .map_or(Value::Object(Map::new()), headers),
        );
    }
    if parts.contains('E') {
        response.insert(
            "body".into(),
            String::from_utf8_lossy(x.response_body).into(),
        );
    }
    let mut transaction = Map::new();
    for (k, v) in [
        ("client_ip", x.remote.ip().to_string().into()),
        ("time_stamp", now.as_secs().to_string().into()),
        ("server_id", "".into()),
        ("client_port", x.remote.port().into()),
        ("host_ip", x.local.ip().to_string().into()),
        ("host_port", x.local.port().into()),
        ("unique_id", tx.unique_id().into()),
        ("request", Value::Object(request)),
        ("response", Value::Object(response)),
    ] {
        transaction.insert(k.into(), v);
    }
    if parts.contains('H') {
        let engine = match tx.rule_engine() {
            EngineMode::On => "Enabled",
            EngineMode::Off => "Disabled",
            EngineMode::DetectionOnly => "DetectionOnly",
        };
        transaction.insert(
            "producer".into(),
            json!({
                "modsecurity": concat!("waf ", env!("CARGO_PKG_VERSION")),
                "connector": "waf serve",
                "secrules_engine": engine,
                "components": [],
            }),
        );
        transaction.insert("messages".into(), Value::Array(messages));
    }
    if parts.contains('K') {
        let ids: Vec<Value> = tx.matched_rules().map(|m| m.id.into()).collect();
        transaction.insert("matched_rules".into(), Value::Array(ids));
    }
    json!({ "transaction": transaction }).to_string()
}
