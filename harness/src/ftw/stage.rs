//! One stage: the request through the emulated front end, a fresh
//! [`Transaction`](waf_engine::Transaction), the emulated backend; then
//! go-ftw's checks on the status and the stage's log lines.

use super::backend;
use super::frontend::{self, Reach};
use super::model::Output;
use super::request;
use regex::Regex;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU32, Ordering};
use waf_engine::Ruleset;

/// What happened to a stage's request.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// The status the client got (`None` on an error).
    pub status: Option<u16>,
    /// What decided the status.
    pub status_source: String,
    /// The request could not be built or the client got no response.
    pub error: Option<String>,
    /// One ModSecurity-style line per matched rule that logs.
    pub log: Vec<String>,
    /// Ids of those rules, first occurrence order.
    pub logged_ids: Vec<u64>,
    /// Whether (and how far) the WAF saw the request.
    pub waf: &'static str,
    /// The response body, when a real response was read (over HTTP).
    pub response: Option<Vec<u8>>,
}

impl Outcome {
    /// A stage whose request could not be built: nothing was sent.
    pub fn unsendable(why: &str) -> Outcome {
        Outcome {
            error: Some(format!("cannot send the request: {why}")),
            status_source: "no request".into(),
            waf: "not run",
            ..Outcome::default()
        }
    }
}

/// Client ports for `REMOTE_PORT`, one per request.
static CLIENT_PORT: AtomicU32 = AtomicU32::new(0);

fn next_port() -> u16 {
    (20000 + CLIENT_PORT.fetch_add(1, Ordering::Relaxed) % 40000) as u16
}

/// Runs one stage's request (see the module documentation of `ftw`).
pub fn execute(rs: &Ruleset, input: &super::model::Input) -> Outcome {
    let bytes = match request::build(input) {
        Ok(b) => b,
        Err(e) => return Outcome::unsendable(&e),
    };
    let raw = request::split(&bytes);
    let rec = frontend::receive(&raw);
    let req = &rec.request;
    let mut out = Outcome {
        error: rec.client_error.clone(),
        ..Outcome::default()
    };
    if rec.reach == Reach::None {
        out.waf = "not run (rejected by the front end)";
        if let Some((st, why)) = &rec.status {
            out.status = Some(*st);
            out.status_source = format!("front end: {why}");
        } else {
            out.status_source = "no response".into();
        }
        return out;
    }

    let dest = input.dest_addr.as_deref().unwrap_or("localhost");
    let server = if dest.eq_ignore_ascii_case("localhost") {
        "127.0.0.1"
    } else {
        dest
    };
    let server_port = input.port.unwrap_or(80).min(u16::MAX as u32) as u16;
    let mut tx = rs.transaction();
    tx.process_connection("127.0.0.1", next_port(), server, server_port);
    tx.process_uri(&req.uri, &req.method, &req.version);
    for (k, v) in &req.headers {
        tx.add_request_header(k, v);
    }
    tx.process_request_headers();
    let mut response = None;
    if rec.reach == Reach::All && tx.intervention().is_none() {
        if !req.body.is_empty() {
            tx.append_request_body(&req.body);
        }
        tx.process_request_body();
        if tx.intervention().is_none() {
            let resp = backend::respond(req);
            for (k, v) in &resp.headers {
                tx.add_response_header(k.as_bytes(), v);
            }
            tx.process_response_headers(resp.status, b"HTTP/1.1");
            if tx.intervention().is_none() {
                if !resp.body.is_empty() {
                    tx.append_response_body(&resp.body);
                }
                tx.process_response_body();
            }
            response = Some(resp);
        }
    }
    tx.process_logging();
    out.waf = if rec.reach == Reach::Phase1 {
        "phase 1 and logging only"
    } else {
        "all phases"
    };

    let uri = String::from_utf8_lossy(&req.uri).into_owned();
    for m in tx.matched_rules().filter(|m| m.log) {
        out.log
            .push(error_log_line(&m.log_line(&uri, tx.unique_id())));
        if !out.logged_ids.contains(&m.id) {
            out.logged_ids.push(m.id);
        }
    }

    if let Some(i) = tx.intervention() {
        if i.action == "drop" {
            out.error = Some(format!("connection dropped by rule {}", i.rule_id));
            out.status_source = format!("engine: drop by rule {} (phase {})", i.rule_id, i.phase);
        } else {
            out.status = Some(i.status);
            out.status_source = format!(
                "engine: {} by rule {} (phase {})",
                i.action, i.rule_id, i.phase
            );
        }
    } else if let Some((st, why)) = &rec.status {
        out.status = Some(*st);
        out.status_source = format!("front end: {why}");
    } else if let Some(r) = response {
        out.status = Some(r.status);
        out.status_source = r.source;
    } else {
        out.status_source = "no response".into();
    }
    if out.error.is_some() {
        out.status = None;
        out.status_source = format!("no response (otherwise: {})", out.status_source);
    }
    out
}

/// An error-log entry is one line: control characters (e.g. the CR LF of a
/// matched value) are written as `\xHH`, as ModSecurity and Apache escape
/// them in the error log that go-ftw reads. `MatchedRule::log_line` leaves
/// them raw, which would split the entry and defeat `match_regex` checks
/// such as CRS 932300-10's.
fn error_log_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if (c as u32) < 0x20 || c as u32 == 0x7f {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

fn list(ids: &[u64]) -> String {
    let v: Vec<String> = ids.iter().map(u64::to_string).collect();
    format!("[{}]", v.join(", "))
}

fn regex(what: &str, re: &str) -> Result<Regex, String> {
    Regex::new(re).map_err(|e| format!("invalid {what} `{re}`: {e}"))
}

/// go-ftw's checks; an empty list means the stage passed.
///
/// As go-ftw: an expected error passes the stage when there is one (and
/// fails it when there is none); an unexpected error fails it; otherwise
/// `status`, then the log: `match_regex`/`expect_ids` (all must be logged)/
/// `isolated`, `no_match_regex`/`no_expect_ids`. Regexes apply to the
/// stage's log lines joined with newlines (`.` does not cross lines). All
/// failing checks are reported, not only the first.
pub fn check(expected: &Output, o: &Outcome) -> Vec<String> {
    let mut fails = Vec::new();
    let expect_error = expected.expect_error == Some(true);
    match (&o.error, expect_error) {
        (Some(_), true) => return fails,
        (Some(e), false) => {
            fails.push(format!("request failed: {e}"));
            return fails;
        }
        (None, true) => fails.push(format!(
            "expected an error, got status {} ({})",
            o.status.map_or("-".into(), |s| s.to_string()),
            o.status_source
        )),
        (None, false) => {}
    }
    if let Some(want) = &expected.status {
        if !want.0.is_empty() && !o.status.is_some_and(|s| want.0.contains(&(s as u64))) {
            let want = if want.0.len() == 1 {
                want.0[0].to_string()
            } else {
                list(&want.0)
            };
            let got = o.status.map_or("none".into(), |s| s.to_string());
            let hint = if o.status_source.starts_with("albedo") && want.starts_with('4') {
                "; no emulated front-end rule rejects this request"
            } else {
                ""
            };
            fails.push(format!(
                "expected status {want}, got {got} ({}{hint})",
                o.status_source
            ));
        }
    }
    if let Some(want) = expected
        .response_contains
        .as_deref()
        .filter(|s| !s.is_empty())
    {
        match &o.response {
            None => fails
                .push("response_contains cannot be checked in-process (no raw response)".into()),
            Some(body) => match regex("response_contains", want) {
                Err(e) => fails.push(e),
                Ok(r) if !r.is_match(&String::from_utf8_lossy(body)) => fails.push(format!(
                    "response_contains `{want}` not found in the response"
                )),
                Ok(_) => {}
            },
        }
    }
    let text = o.log.join("\n");
    let log = expected.log.clone().unwrap_or_default();
    for (what, re, want) in [
        ("match_regex", &log.match_regex, true),
        ("no_match_regex", &log.no_match_regex, false),
        ("log_contains", &expected.log_contains, true),
        ("no_log_contains", &expected.no_log_contains, false),
    ] {
        let Some(re) = re.as_deref().filter(|r| !r.is_empty()) else {
            continue;
        };
        match regex(what, re) {
            Err(e) => fails.push(e),
            Ok(r) => match (r.find(&text), want) {
                (None, true) => fails.push(format!(
                    "{what} `{re}` not found in the log; logged {}",
                    list(&o.logged_ids)
                )),
                (Some(m), false) => {
                    let line = o
                        .log
                        .iter()
                        .find(|l| l.contains(m.as_str()))
                        .map_or(m.as_str(), String::as_str);
                    let short: String = line.chars().take(200).collect();
                    fails.push(format!("{what} `{re}` found in the log: {short}"));
                }
                _ => {}
            },
        }
    }
    let exp = log.expected();
    let missing: Vec<u64> = exp
        .iter()
        .copied()
        .filter(|i| !o.logged_ids.contains(i))
        .collect();
    if !missing.is_empty() {
        fails.push(format!(
            "expected ids {} not logged; logged {}",
            list(&missing),
            list(&o.logged_ids)
        ));
    }
    let unwanted: Vec<u64> = log
        .not_expected()
        .into_iter()
        .filter(|i| o.logged_ids.contains(i))
        .collect();
    if !unwanted.is_empty() {
        fails.push(format!(
            "unexpected ids {} logged; logged {}",
            list(&unwanted),
            list(&o.logged_ids)
        ));
    }
    if expected.isolated == Some(true) && o.logged_ids.len() != 1 {
        fails.push(format!(
            "isolated: expected exactly one logged id; logged {}",
            list(&o.logged_ids)
        ));
    }
    fails
}

/// The expected output as JSON (for the report).
pub fn expected_json(o: &Output) -> Value {
    let log = o.log.clone().unwrap_or_default();
    let mut v = serde_json::Map::new();
    if let Some(s) = &o.status {
        let st = if s.0.len() == 1 {
            json!(s.0[0])
        } else {
            json!(s.0)
        };
        v.insert("status".into(), st);
    }
    if let Some(e) = o.expect_error {
        v.insert("expect_error".into(), json!(e));
    }
    let exp = log.expected();
    if !exp.is_empty() {
        v.insert("expect_ids".into(), json!(exp));
    }
    let no = log.not_expected();
    if !no.is_empty() {
        v.insert("no_expect_ids".into(), json!(no));
    }
    for (k, val) in [
        ("match_regex", &log.match_regex),
        ("no_match_regex", &log.no_match_regex),
        ("log_contains", &o.log_contains),
        ("no_log_contains", &o.no_log_contains),
        ("response_contains", &o.response_contains),
    ] {
        if let Some(x) = val {
            v.insert(k.into(), json!(x));
        }
    }
    if let Some(i) = o.isolated {
        v.insert("isolated".into(), json!(i));
    }
    Value::Object(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ftw::model::{IdList, LogExpect};

    fn outcome(status: Option<u16>, ids: &[u64], error: Option<&str>) -> Outcome {
        Outcome {
            status,
            status_source: "test".into(),
            error: error.map(str::to_string),
            log: ids
                .iter()
                .map(|i| format!("[id \"{i}\"] [msg \"m\"]"))
                .collect(),
            logged_ids: ids.to_vec(),
            waf: "all phases",
            response: None,
        }
    }

    fn expect(ids: &[u64], no: &[u64]) -> Output {
        Output {
            log: Some(LogExpect {
                expect_ids: Some(IdList(ids.to_vec())),
                no_expect_ids: Some(IdList(no.to_vec())),
                ..LogExpect::default()
            }),
            ..Output::default()
        }
    }

    #[test]
    fn log_lines_are_single_lines() {
        assert_eq!(error_log_line("a\r\nb\tc\u{7f}"), "a\\x0d\\x0ab\\x09c\\x7f");
    }

    #[test]
    fn errors() {
        let mut e = Output {
            expect_error: Some(true),
            ..Output::default()
        };
        assert!(check(&e, &outcome(None, &[], Some("x"))).is_empty());
        assert_eq!(check(&e, &outcome(Some(200), &[], None)).len(), 1);
        e.expect_error = None;
        let f = check(&e, &outcome(None, &[], Some("boom")));
        assert_eq!(f, vec!["request failed: boom".to_string()]);
    }

    #[test]
    fn ids_status_and_regexes() {
        assert!(check(&expect(&[1], &[2]), &outcome(Some(200), &[1, 3], None)).is_empty());
        let f = check(&expect(&[1, 4], &[3]), &outcome(Some(200), &[1, 3], None));
        assert_eq!(
            f,
            vec![
                "expected ids [4] not logged; logged [1, 3]".to_string(),
                "unexpected ids [3] logged; logged [1, 3]".to_string()
            ]
        );
        let st = Output {
            status: Some(IdList(vec![400])),
            ..Output::default()
        };
        assert_eq!(check(&st, &outcome(Some(200), &[], None)).len(), 1);
        assert!(check(&st, &outcome(Some(400), &[], None)).is_empty());
        let re = Output {
            log: Some(LogExpect {
                match_regex: Some(r#"\[id "1"\]"#.into()),
                no_match_regex: Some(r#"\[id "\d+"\].*nope"#.into()),
                ..LogExpect::default()
            }),
            ..Output::default()
        };
        assert!(check(&re, &outcome(Some(200), &[1], None)).is_empty());
        assert_eq!(check(&re, &outcome(Some(200), &[2], None)).len(), 1);
        let iso = Output {
            isolated: Some(true),
            ..expect(&[1], &[])
        };
        assert_eq!(check(&iso, &outcome(Some(200), &[1, 2], None)).len(), 1);
    }
}
