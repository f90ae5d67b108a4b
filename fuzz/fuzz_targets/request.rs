//! Arbitrary HTTP transactions through OWASP CRS (all rules: paranoia level 4,
//! `DetectionOnly` so that every rule runs on every request).
//!
//! Must never panic or hang, whatever the request: bad encodings, invalid
//! UTF-8, hostile multipart/JSON/XML bodies, huge header counts. The input is
//! decoded as:
//!
//! ```text
//! byte 0: body processor (Content-Type): none, urlencoded, multipart, JSON, XML
//! then fields separated by NUL: method, uri, version, body, response body,
//!         then header name/value pairs (request headers)
//! ```
//!
//! CRS is read from `$WAF_CRS_DIR` or `../../shared/crs` (relative to this crate).
//!
//! After CRS, a few rules keep persistent collections under keys, names and
//! values from the request (`initcol:ip=%{REQUEST_HEADERS.X-Client}`,
//! `setsid` from an argument, `setvar` with request-made names, deletions,
//! arithmetic on request values), and a rule reads them back. The fast and
//! the naive transactions run on two rulesets compiled from the same text,
//! each with its own store: both stores see the same inputs in the same
//! order, so the counts they read back agree unless the engines do.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::OnceLock;
use waf_engine::{EvalOptions, Ruleset, Transaction};

fn crs_dir() -> PathBuf {
    std::env::var_os("WAF_CRS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/crs"))
}

/// The rules after CRS: persistent collections written from the request.
const COLLECTIONS: &str = r#"
SecAction "id:990001,phase:1,pass,nolog,initcol:ip=%{REQUEST_HEADERS.X-Client}"
SecAction "id:990002,phase:1,pass,nolog,setvar:ip.hits=+1,setvar:'ip.m_%{REQUEST_METHOD}=%{REQUEST_URI}'"
SecRule ARGS:sid "@rx ^" "id:990003,phase:2,pass,nolog,setsid:%{MATCHED_VAR}"
SecAction "id:990004,phase:2,pass,nolog,setvar:session.n=+%{ARGS.n},setvar:'session.%{ARGS.name}=%{ARGS.value}'"
SecRule ARGS:del "@rx ." "id:990005,phase:2,pass,nolog,setvar:'!ip.%{MATCHED_VAR}',setvar:'!session.%{MATCHED_VAR}'"
SecRule IP|SESSION|&IP|&SESSION "@rx ^-?[0-9]+$" "id:990006,phase:2,pass,log,msg:'%{MATCHED_VAR_NAME}'"
"#;

fn ruleset() -> &'static Ruleset {
    static RS: OnceLock<Ruleset> = OnceLock::new();
    RS.get_or_init(compile)
}

/// The naive oracle's ruleset: the same rules, its own persistent store.
fn naive_ruleset() -> &'static Ruleset {
    static RS: OnceLock<Ruleset> = OnceLock::new();
    RS.get_or_init(compile)
}

fn compile() -> Ruleset {
    let crs = crs_dir();
    let config = format!(
        r#"SecRuleEngine On
SecRequestBodyAccess On
SecResponseBodyAccess On
SecResponseBodyMimeType text/plain text/html text/xml application/json
SecRequestBodyLimit 13107200
SecRequestBodyNoFilesLimit 131072
SecRule REQUEST_HEADERS:Content-Type "^(?:application(?:/soap\+|/)|text/)xml" "id:200000,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=XML"
SecRule REQUEST_HEADERS:Content-Type "^application/json" "id:200001,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=JSON"
SecAction "id:900005,phase:1,nolog,pass,ctl:ruleEngine=DetectionOnly,setvar:tx.blocking_paranoia_level=4,setvar:tx.crs_validate_utf8_encoding=1"
Include {dir}/crs-setup.conf.example
Include {dir}/rules/*.conf
{COLLECTIONS}"#,
        dir = crs.display()
    );
    match Ruleset::from_str(&crs.join("fuzz.conf").to_string_lossy(), &config) {
        Ok(rs) => rs,
        Err(e) => panic!("CRS does not compile (set WAF_CRS_DIR):\n{e}"),
    }
}

const CONTENT_TYPES: [Option<&[u8]>; 5] = [
    None,
    Some(b"application/x-www-form-urlencoded"),
    Some(b"multipart/form-data; boundary=x"),
    Some(b"application/json"),
    Some(b"application/xml"),
];

/// Feeds one input to `tx`: all five phases.
fn feed(tx: &mut Transaction<'static>, data: &[u8]) -> bool {
    let Some((&selector, rest)) = data.split_first() else {
        return false;
    };
    let mut fields = rest.split(|&b| b == 0);
    let mut next = || fields.next().unwrap_or(b"");
    let (method, uri, version, body, response) = (next(), next(), next(), next(), next());
    tx.process_connection("10.0.0.1", 40000, "127.0.0.1", 80);
    tx.process_uri(uri, method, version);
    if let Some(ct) = CONTENT_TYPES[usize::from(selector) % CONTENT_TYPES.len()] {
        tx.add_request_header(b"Content-Type", ct);
    }
    loop {
        let (name, value) = (next(), next());
        if name.is_empty() && value.is_empty() {
            break;
        }
        tx.add_request_header(name, value);
    }
    tx.process_request_headers();
    tx.append_request_body(body);
    tx.process_request_body();
    tx.add_response_header(b"Content-Type", b"text/html");
    tx.process_response_headers(200, b"HTTP/1.1");
    tx.append_response_body(response);
    tx.process_response_body();
    tx.process_logging();
    true
}

thread_local! {
    /// One fast-path transaction reused (reset) across inputs, as a proxy
    /// worker would: memo buffers and the cross-transaction cache carry over.
    static FAST: RefCell<Option<Transaction<'static>>> = const { RefCell::new(None) };
}

fuzz_target!(|data: &[u8]| {
    let rs = ruleset();
    FAST.with(|cell| {
        let mut slot = cell.borrow_mut();
        let fast = slot.get_or_insert_with(|| rs.transaction_with(EvalOptions::default()));
        fast.reset();
        if !feed(fast, data) {
            return;
        }
        for m in fast.matched_rules() {
            let line = m.log_line("/", fast.unique_id());
            assert!(!line.contains('\n'), "log line must stay on one line");
        }
        // Differential oracle: the naive interpreter, fresh, must match the
        // same rules on the same values.
        let mut naive = naive_ruleset().transaction_with(EvalOptions::naive());
        feed(&mut naive, data);
        let key = |tx: &Transaction<'_>| {
            tx.matched_rules()
                .map(|m| (m.id, m.matched_var_name.clone(), m.matched_var.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(key(fast), key(&naive), "fast path and naive mode disagree");
    });
});
