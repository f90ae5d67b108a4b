use crate::{Cause, Ruleset};

fn ruleset(rules: &str) -> Ruleset {
    match Ruleset::from_str("t.conf", rules) {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    }
}

fn ids(tx: &crate::Transaction<'_>) -> Vec<u64> {
    tx.matched_rules().map(|m| m.id).collect()
}

fn get<'r>(rs: &'r Ruleset, uri: &str, headers: &[(&str, &str)]) -> crate::Transaction<'r> {
    let mut tx = through_phase1(rs.transaction(), "GET", uri, headers);
    tx.process_request_body();
    tx
}

/// `tx` fed a request's connection, request line and headers, phase 1 run.
fn through_phase1<'r>(
    mut tx: crate::Transaction<'r>,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
) -> crate::Transaction<'r> {
    tx.process_connection("10.0.0.1", 40000, "127.0.0.1", 80);
    tx.process_uri(uri.as_bytes(), method.as_bytes(), b"HTTP/1.1");
    for (k, v) in headers {
        tx.add_request_header(k.as_bytes(), v.as_bytes());
    }
    tx.process_request_headers();
    tx
}

#[test]
fn args_transformations_and_deny() {
    let rs = ruleset(
        "SecRuleEngine On\n\
         SecRule ARGS \"@rx <script\" \"id:1,phase:1,deny,status:406,t:none,t:urlDecodeUni,t:lowercase,msg:'xss in %{MATCHED_VAR_NAME}'\"\n",
    );
    let tx = get(&rs, "/a?x=%3CSCRIPT%3E", &[("Host", "h")]);
    assert_eq!(ids(&tx), [1]);
    assert_eq!(
        tx.intervention().map(|i| (i.status, i.rule_id)),
        Some((406, 1))
    );
    assert_eq!(
        tx.matched_rules().next().expect("a match").msg,
        "xss in ARGS:x"
    );
}

#[test]
fn detection_only_logs_without_intervening() {
    let rs = ruleset("SecRuleEngine DetectionOnly\nSecRule REQUEST_METHOD \"@streq GET\" \"id:1,phase:1,deny\"\n");
    let tx = get(&rs, "/", &[]);
    assert_eq!(ids(&tx), [1]);
    assert!(tx.intervention().is_none());
}

#[test]
fn chains_setvar_and_anomaly_scoring() {
    let rs = ruleset(
        "SecRuleEngine On\n\
         SecAction \"id:1,phase:1,pass,nolog,setvar:tx.score=0\"\n\
         SecRule REQUEST_HEADERS:User-Agent \"@contains bot\" \"id:2,phase:1,pass,chain\"\n\
         SecRule REQUEST_METHOD \"@streq GET\" \"setvar:tx.score=+5\"\n\
         SecRule REQUEST_HEADERS:User-Agent \"@contains bot\" \"id:3,phase:1,pass,chain\"\n\
         SecRule REQUEST_METHOD \"@streq POST\" \"setvar:tx.score=+100\"\n\
         SecRule TX:SCORE \"@ge 5\" \"id:4,phase:1,deny,status:403,msg:'score %{tx.score}'\"\n",
    );
    let tx = get(&rs, "/", &[("User-Agent", "a bot")]);
    assert_eq!(ids(&tx), [1, 2, 4]);
    assert_eq!(tx.tx_var("score"), Some(&b"5"[..]));
    assert_eq!(tx.matched_rules().nth(2).expect("a match").msg, "score 5");
    assert!(
        !tx.matched_rules().next().expect("a match").log,
        "nolog is recorded as not logged"
    );
}

#[test]
fn skip_after_and_ctl_remove() {
    let rs = ruleset(
        "SecRule REQUEST_METHOD \"@streq GET\" \"id:1,phase:1,pass,skipAfter:END\"\n\
         SecRule REQUEST_METHOD \"@streq GET\" \"id:2,phase:1,pass\"\n\
         SecMarker END\n\
         SecRule REQUEST_METHOD \"@streq GET\" \"id:3,phase:1,pass,ctl:ruleRemoveById=4\"\n\
         SecRule REQUEST_METHOD \"@streq GET\" \"id:4,phase:1,pass\"\n\
         SecRule REQUEST_METHOD \"@streq GET\" \"id:5,phase:1,pass\"\n",
    );
    assert_eq!(ids(&get(&rs, "/", &[])), [1, 3, 5]);
}

#[test]
fn exclusions_counts_cookies_and_captures() {
    let rs = ruleset(
        "SecRule ARGS|!ARGS:safe \"@rx evil\" \"id:1,phase:1,pass\"\n\
         SecRule &REQUEST_HEADERS:Host \"@eq 0\" \"id:2,phase:1,pass\"\n\
         SecRule REQUEST_COOKIES:sid \"@rx ^(a+)(b+)$\" \"id:3,phase:1,pass,capture,setvar:tx.got=%{tx.2}\"\n\
         SecRule REQUEST_COOKIES_NAMES \"@streq theme\" \"id:4,phase:1,pass\"\n",
    );
    let tx = get(&rs, "/?safe=evil", &[("Cookie", "sid=aabbb; theme=dark")]);
    assert_eq!(ids(&tx), [2, 3, 4]);
    assert_eq!(tx.tx_var("got"), Some(&b"bbb"[..]));
    let tx = get(&rs, "/?other=evil", &[("Host", "x")]);
    assert_eq!(ids(&tx), [1]);
}

#[test]
fn urlencoded_body_and_request_body_variable() {
    let rs = ruleset(
        "SecRequestBodyAccess On\n\
         SecRule ARGS_POST:a \"@streq 1 2\" \"id:1,phase:2,pass\"\n\
         SecRule REQUEST_BODY \"@contains b=\" \"id:2,phase:2,pass\"\n\
         SecRule ARGS_GET \"@streq q\" \"id:3,phase:2,pass\"\n",
    );
    let mut tx = rs.transaction();
    tx.process_uri(b"/p?x=q", b"POST", b"HTTP/1.1");
    tx.add_request_header(b"Content-Type", b"application/x-www-form-urlencoded");
    tx.process_request_headers();
    tx.append_request_body(b"a=1+2&b=3");
    tx.process_request_body();
    assert_eq!(ids(&tx), [1, 2, 3]);
}

#[test]
fn request_line_variables_follow_v3() {
    let rs = ruleset(
        "SecRule REQUEST_FILENAME \"@streq /a b/c.php\" \"id:1,phase:1,pass\"\n\
         SecRule REQUEST_BASENAME \"@streq c.php\" \"id:2,phase:1,pass\"\n\
         SecRule QUERY_STRING \"@streq q=%41\" \"id:3,phase:1,pass\"\n\
         SecRule REQUEST_URI \"@streq /p?x\" \"id:4,phase:1,pass\"\n\
         SecRule REQUEST_LINE \"@streq GET /a%20b/c.php?q=%41 HTTP/1.1\" \"id:5,phase:1,pass\"\n",
    );
    assert_eq!(ids(&get(&rs, "/a%20b/c.php?q=%41", &[])), [1, 2, 3, 5]);
    assert_eq!(ids(&get(&rs, "http://host/p?x", &[])), [4]);
}

#[test]
fn unset_anchored_scalars_yield_one_empty_value() {
    // v3's AnchoredVariable: REQUEST_BASENAME of `/` is empty, not absent.
    let rs = ruleset(
        "SecRule REQUEST_BASENAME \"!@endsWith .pdf\" \"id:1,phase:1,pass\"\n\
         SecRule &REQUEST_BASENAME \"@eq 1\" \"id:2,phase:1,pass\"\n\
         SecRule ARGS:missing \"!@rx x\" \"id:3,phase:1,pass\"\n",
    );
    assert_eq!(
        ids(&get(&rs, "/", &[])),
        [1, 2],
        "collection members are not anchored"
    );
}

#[test]
fn request_body_variable_by_processor() {
    let rules = "SecRequestBodyAccess On\n\
         SecRule REQUEST_HEADERS:Content-Type \"^application/json\" \"id:10,phase:1,pass,nolog,ctl:requestBodyProcessor=JSON\"\n\
         SecRule REQUEST_HEADERS:Content-Type \"^application/xml\" \"id:11,phase:1,pass,nolog,ctl:requestBodyProcessor=XML\"\n\
         SecRule REQUEST_BODY \"@contains secret\" \"id:1,phase:2,pass\"\n\
         SecRule ARGS_NAMES \"@streq json.a\" \"id:2,phase:2,pass\"\n\
         SecRule XML:/* \"@contains secret\" \"id:3,phase:2,pass\"\n";
    let rs = ruleset(rules);
    let post = |ct: &str, body: &[u8]| {
        let mut tx = rs.transaction();
        tx.process_uri(b"/", b"POST", b"HTTP/1.1");
        tx.add_request_header(b"Content-Type", ct.as_bytes());
        tx.process_request_headers();
        tx.append_request_body(body);
        tx.process_request_body();
        ids(&tx).into_iter().filter(|&i| i < 10).collect::<Vec<_>>()
    };
    assert_eq!(post("application/json", br#"{"a":"secret"}"#), [1, 2]);
    // The XML processor parsed it: the raw body (element names) is not REQUEST_BODY.
    assert_eq!(
        post("application/xml", b"<secret>x</secret>"),
        Vec::<u64>::new()
    );
    assert_eq!(post("application/xml", b"<a>secret</a>"), [3]);
}

/// A POST with `content_type`, its body fed in `chunks`; returns the
/// transaction after phase 2 (or after the chunk that was rejected).
fn post_chunks<'r>(
    rs: &'r Ruleset,
    content_type: &str,
    chunks: &[&[u8]],
) -> crate::Transaction<'r> {
    let mut tx = rs.transaction();
    tx.process_uri(b"/", b"POST", b"HTTP/1.1");
    tx.add_request_header(b"Content-Type", content_type.as_bytes());
    tx.process_request_headers();
    for c in chunks {
        if !tx.append_request_body(c) {
            break;
        }
    }
    if tx.intervention().is_none() {
        tx.process_request_body();
    }
    tx
}

const LIMITS: &str = "SecRuleEngine On\nSecRequestBodyAccess On\n\
    SecRequestBodyLimit 10\nSecRequestBodyNoFilesLimit 6\n\
    SecRule INBOUND_DATA_ERROR \"@eq 1\" \"id:1,phase:2,pass\"\n\
    SecRule REQUEST_BODY \"@rx ^\" \"id:2,phase:2,pass,logdata:'%{REQUEST_BODY}'\"\n";

#[test]
fn request_body_limit_rejects_with_413_and_a_reason_as_the_chunk_arrives() {
    let rs = ruleset(&format!("{LIMITS}SecRequestBodyLimitAction Reject\n"));
    // Under both limits: inspected whole.
    let tx = post_chunks(&rs, "text/plain", &[b"123", b"456"]);
    assert!(tx.intervention().is_none());
    assert_eq!(ids(&tx), [2]);
    // Over the no-files limit (a body without files): rejected by the chunk
    // that crosses it; later chunks are not wanted.
    let mut tx = rs.transaction();
    tx.process_uri(b"/", b"POST", b"HTTP/1.1");
    tx.process_request_headers();
    assert!(tx.append_request_body(b"1234"));
    assert!(!tx.append_request_body(b"567"));
    let i = tx.intervention().cloned().expect("rejected");
    assert_eq!((i.status, i.rule_id, i.phase), (413, 0, 2));
    assert_eq!(i.cause, Cause::RequestBodyNoFilesLimit { limit: 6 });
    assert!(i.reason().contains("excluding files"), "{}", i.reason());
    let line = i.log_line("/", "u1");
    assert!(
        line.starts_with("ModSecurity: Access denied with code 413 (phase 2)."),
        "{line}"
    );
    assert!(!tx.append_request_body(b"more"));
    assert_eq!(tx.request_body_received(), 11);
}

#[test]
fn a_rejected_request_body_is_refused_whatever_the_mode_and_not_parsed() {
    for mode in ["On", "DetectionOnly"] {
        let rs = ruleset(&format!(
            "SecRuleEngine {mode}\nSecRequestBodyAccess On\n\
             SecRule ARGS \"@rx .\" \"id:1,phase:2,pass\"\n"
        ));
        for (cause, status) in [
            (Cause::RequestBodyNotDecoded, 400),
            (Cause::RequestBodyCodingUnsupported, 415),
        ] {
            let mut tx = rs.transaction();
            tx.process_uri(b"/", b"POST", b"HTTP/1.1");
            tx.add_request_header(b"Content-Type", b"application/x-www-form-urlencoded");
            tx.process_request_headers();
            assert!(tx.append_request_body(b"a=1"));
            tx.reject_request_body(cause);
            // A second rejection, or a cause the engine sets itself, changes
            // nothing; no more bytes are taken, and the body is not parsed.
            tx.reject_request_body(Cause::RequestBodyCodingUnsupported);
            assert!(!tx.append_request_body(b"&b=2"));
            tx.process_request_body();
            let i = tx.intervention().cloned().expect("refused");
            assert_eq!(
                (i.status, i.rule_id, i.phase, i.cause),
                (status, 0, 2, cause)
            );
            assert!(i.reason().contains("content-encoding"), "{}", i.reason());
            assert!(ids(&tx).is_empty(), "{mode}: {:?}", ids(&tx));
        }
        let mut tx = rs.transaction();
        tx.process_uri(b"/", b"POST", b"HTTP/1.1");
        tx.process_request_headers();
        tx.reject_request_body(Cause::RequestBodyLimit { limit: 1 });
        tx.reject_request_body(Cause::Rule);
        assert!(tx.intervention().is_none());
    }
}

#[test]
fn multipart_bodies_count_files_against_the_total_limit_only() {
    let rs = ruleset(
        "SecRuleEngine On\nSecRequestBodyAccess On\n\
         SecRequestBodyLimit 300\nSecRequestBodyNoFilesLimit 120\nSecRequestBodyLimitAction Reject\n",
    );
    let ct = "multipart/form-data; boundary=b";
    let part = |disposition: &str, content: &[u8]| {
        let mut p =
            format!("--b\r\nContent-Disposition: form-data; {disposition}\r\n\r\n").into_bytes();
        p.extend_from_slice(content);
        p.extend_from_slice(b"\r\n--b--\r\n");
        p
    };
    let big = [b'x'; 150];
    // A 150-byte file: over the no-files limit as raw bytes, but files only
    // count against the total limit.
    let file = part("name=\"f\"; filename=\"a.txt\"", &big);
    let tx = post_chunks(&rs, ct, &[&file]);
    assert!(tx.intervention().is_none(), "{:?}", tx.intervention());
    // The same 150 bytes as a form field: over the no-files limit once parsed.
    let field = part("name=\"f\"", &big);
    let tx = post_chunks(&rs, ct, &[&field]);
    assert_eq!(
        tx.intervention().map(|i| (i.status, i.cause)),
        Some((413, Cause::RequestBodyNoFilesLimit { limit: 120 }))
    );
    // Over the total limit: rejected as the bytes arrive.
    let tx = post_chunks(&rs, ct, &[&file, &big]);
    assert_eq!(
        tx.intervention().map(|i| (i.status, i.cause)),
        Some((413, Cause::RequestBodyLimit { limit: 300 }))
    );
}

#[test]
fn process_partial_inspects_the_first_bytes() {
    let rs = ruleset(&format!(
        "{LIMITS}SecRequestBodyLimitAction ProcessPartial\n"
    ));
    let tx = post_chunks(&rs, "text/plain", &[b"1234", b"5678"]);
    assert!(tx.intervention().is_none());
    assert_eq!(ids(&tx), [1, 2]);
    assert_eq!(
        tx.matched_rules().nth(1).expect("a match").logdata,
        "123456"
    );
}

#[test]
fn detection_only_never_rejects_on_a_limit() {
    let rs = ruleset(&format!(
        "{LIMITS}SecRequestBodyLimitAction Reject\nSecRuleEngine DetectionOnly\n"
    ));
    let tx = post_chunks(&rs, "text/plain", &[b"123456789"]);
    assert!(tx.intervention().is_none());
    assert_eq!(ids(&tx), [1, 2]);
}

/// Response phases: headers, then the body in chunks.
fn respond<'r>(rs: &'r Ruleset, content_type: &str, chunks: &[&[u8]]) -> crate::Transaction<'r> {
    let mut tx = get(rs, "/", &[]);
    tx.add_response_header(b"Content-Type", content_type.as_bytes());
    tx.process_response_headers(200, b"HTTP/1.1");
    for c in chunks {
        if !tx.append_response_body(c) {
            break;
        }
    }
    if tx.intervention().is_none() {
        tx.process_response_body();
    }
    tx
}

#[test]
fn response_bodies_are_inspected_only_for_configured_types_and_within_the_limit() {
    let base = "SecRuleEngine On\nSecResponseBodyAccess On\nSecResponseBodyMimeType text/html\n\
        SecResponseBodyLimit 8\n\
        SecRule RESPONSE_BODY \"@rx secret\" \"id:40,phase:4,deny,status:502\"\n\
        SecRule OUTBOUND_DATA_ERROR \"@eq 1\" \"id:41,phase:4,pass\"\n";
    let rs = ruleset(&format!(
        "{base}SecResponseBodyLimitAction ProcessPartial\n"
    ));
    // A phase-4 block, decided before the body would be sent.
    let tx = respond(&rs, "text/html; charset=utf-8", &[b"a sec", b"ret"]);
    assert_eq!(
        tx.intervention().map(|i| (i.status, i.rule_id, i.phase)),
        Some((502, 40, 4))
    );
    // Another type: not buffered, not inspected.
    let mut tx = get(&rs, "/", &[]);
    tx.add_response_header(b"Content-Type", b"application/octet-stream");
    tx.process_response_headers(200, b"HTTP/1.1");
    assert!(!tx.inspects_response_body());
    assert!(!tx.append_response_body(b"secret"));
    tx.process_response_body();
    assert!(tx.intervention().is_none());
    // Past the limit with ProcessPartial: the first 8 bytes are inspected.
    let tx = respond(&rs, "text/html", &[b"12345678", b"secret"]);
    assert!(tx.intervention().is_none());
    assert_eq!(ids(&tx), [41]);
    let rs = ruleset(&format!("{base}SecResponseBodyLimitAction Reject\n"));
    let tx = respond(&rs, "text/html", &[b"12345678", b"9"]);
    assert_eq!(
        tx.intervention().map(|i| (i.status, i.phase, i.cause)),
        Some((500, 4, Cause::ResponseBodyLimit { limit: 8 }))
    );
}

#[test]
fn the_logging_phase_runs_after_an_intervention() {
    let rs = ruleset(
        "SecRuleEngine On\n\
         SecRule ARGS \"@rx x\" \"id:1,phase:1,deny,status:403\"\n\
         SecAction \"id:5,phase:5,pass,log\"\n",
    );
    let mut tx = get(&rs, "/?a=x", &[]);
    tx.process_logging();
    assert_eq!(ids(&tx), [1, 5]);
    assert_eq!(tx.intervention().map(|i| i.rule_id), Some(1));
}

#[test]
fn new_log_lines_give_each_phase_its_lines_once_in_order() {
    let rs = ruleset(
        "SecRuleEngine On\n\
         SecRule ARGS \"@rx x\" \"id:1,phase:1,pass,log\"\n\
         SecRule ARGS \"@rx x\" \"id:2,phase:1,pass,nolog\"\n\
         SecRule ARGS \"@rx x\" \"id:3,phase:2,deny,status:403,log\"\n\
         SecAction \"id:5,phase:5,pass,log\"\n",
    );
    let mut tx = rs.transaction();
    tx.process_uri(b"/?a=x", b"GET", b"HTTP/1.1");
    tx.process_request_headers();
    let (first, cursor) = tx.new_log_lines(crate::LogCursor::default());
    let first: Vec<String> = first.collect();
    assert_eq!(first.len(), 1);
    assert!(first[0].contains("[id \"1\"]"), "{}", first[0]);
    let (none, same) = tx.new_log_lines(cursor);
    assert_eq!(none.count(), 0);
    assert_eq!(same, cursor);
    tx.process_request_body();
    let (second, cursor) = tx.new_log_lines(cursor);
    let second: Vec<String> = second.collect();
    // Rule 3's line, then the intervention's.
    assert_eq!(second.len(), 2, "{second:?}");
    assert!(second[0].contains("[id \"3\"]"));
    assert!(
        second[1].contains("Access denied with code 403"),
        "{}",
        second[1]
    );
    tx.process_logging();
    let (last, cursor) = tx.new_log_lines(cursor);
    let last: Vec<String> = last.collect();
    assert_eq!(last.len(), 1);
    assert!(last[0].contains("[id \"5\"]"));
    assert_eq!(tx.new_log_lines(cursor).0.count(), 0);
    // Together, as many lines as the whole transaction's.
    assert_eq!(
        tx.log_lines().count(),
        first.len() + second.len() + last.len()
    );
}

#[test]
fn missing_version_is_http_0_9() {
    let rs = ruleset("SecRule REQUEST_PROTOCOL \"@streq HTTP/0.9\" \"id:1,phase:1,pass\"\n");
    let mut tx = rs.transaction();
    tx.process_uri(b"/", b"GET", b"");
    tx.process_request_headers();
    assert_eq!(ids(&tx), [1]);
}

#[test]
fn fragment_is_kept_only_in_raw_variables() {
    let rs = ruleset(
        "SecRule ARGS:b \"@streq Today\" \"id:1,phase:1,pass\"\n\
         SecRule QUERY_STRING \"@streq a=1&b=Today\" \"id:2,phase:1,pass\"\n\
         SecRule REQUEST_URI_RAW \"@endsWith #tag\" \"id:3,phase:1,pass\"\n\
         SecRule REQUEST_FILENAME \"@streq /p\" \"id:4,phase:1,pass\"\n",
    );
    assert_eq!(ids(&get(&rs, "/p?a=1&b=Today#tag", &[])), [1, 2, 3, 4]);
    assert_eq!(ids(&get(&rs, "/p#x?y", &[])), [4]);
}

#[test]
fn log_lines_are_one_line_and_unforgeable() {
    let rs = ruleset(
        "SecRule ARGS \"@rx evil\" \"id:7,phase:1,pass,msg:'m',logdata:'%{MATCHED_VAR}'\"\n",
    );
    let tx = get(&rs, "/?a=evil%0d%0a%22%5Bid%20%22942100%22%5D", &[]);
    let line = tx
        .matched_rules()
        .next()
        .expect("a match")
        .log_line("/", "u");
    assert!(!line.contains('\n') && !line.contains('\r'), "{line}");
    assert_eq!(line.matches("[id \"").count(), 1, "{line}");
    assert!(
        line.contains("evil\\x0d\\x0a\\x22[id \\x22942100\\x22]"),
        "{line}"
    );
}

#[test]
fn body_variables_as_modsecurity_v3_writes_them() {
    // Each value checked with corpus/modsec-diff (logdata of the same rules
    // on the same bodies); found by the differential fuzzer.
    let rs = ruleset(
        "SecRequestBodyAccess On\n\
         SecRule ARGS_COMBINED_SIZE \"@unconditionalMatch\" \"id:1,phase:2,pass,log,logdata:'[%{MATCHED_VAR}]'\"\n\
         SecRule REQBODY_ERROR \"@unconditionalMatch\" \"id:2,phase:2,pass,log,logdata:'[%{MATCHED_VAR}]'\"\n\
         SecRule REQUEST_BODY_LENGTH \"@unconditionalMatch\" \"id:3,phase:2,pass,log,logdata:'[%{MATCHED_VAR}]'\"\n",
    );
    let data = |tx: &crate::Transaction<'_>| -> Vec<(u64, String)> {
        tx.matched_rules()
            .map(|m| (m.id, m.logdata.clone()))
            .collect()
    };
    // A urlencoded body: the size as a double; REQBODY_ERROR empty.
    let tx = post(&rs, "application/x-www-form-urlencoded", b"cc=1234");
    assert_eq!(
        data(&tx),
        [
            (1, "[6.000000]".into()),
            (2, "[]".into()),
            (3, "[7]".into())
        ]
    );
    // Multipart: REQUEST_BODY_LENGTH is set (REQUEST_BODY is not, a
    // deliberate difference); REQBODY_ERROR is 0. Its arguments count in
    // ARGS_COMBINED_SIZE here, not in v3 (where it stays empty).
    let body = b"--b1\r\nContent-Disposition: form-data; name=\"n\"\r\n\r\nv\r\n--b1--\r\n";
    let tx = post(&rs, "multipart/form-data; boundary=b1", body);
    assert_eq!(
        data(&tx),
        [
            (1, "[2.000000]".into()),
            (2, "[0]".into()),
            (3, format!("[{}]", body.len()))
        ]
    );
    // No argument at all: empty, as v3.
    let tx = post(&rs, "text/plain", b"x");
    assert_eq!(data(&tx)[0], (1, "[]".into()));
}

#[test]
fn matched_vars_start_empty_for_every_rule() {
    // MATCHED_VARS is "all matches for the current operator check".
    // libmodsecurity 3.0.9 keeps a matching rule's entries into the next
    // rule (here 2 + 3 = 5), a bug fixed upstream in 2025
    // (owasp-modsecurity/ModSecurity#3422); we clear them after every rule
    // as the fix does (checked with corpus/modsec-diff: 3.0.9 counts 5).
    let rs = ruleset(
        "SecRule ARGS \"@rx a\" \"id:5,phase:1,pass,log\"\n\
         SecRule ARGS|REQUEST_HEADERS:User-Agent \"@rx a\" \"id:6,phase:1,pass,log,chain\"\n\
         SecRule &MATCHED_VARS \"@eq 3\" \"t:none\"\n",
    );
    let tx = get(&rs, "/?a=xa&b=ab&c=zz", &[("User-Agent", "aaa")]);
    assert_eq!(ids(&tx), [5, 6]);
}

#[test]
fn long_log_fields_are_cut_as_modsecurity_v3_cuts_them() {
    // libmodsecurity 3.0.9 writes the first 200 bytes of `[data]` and
    // `[uri]`, then how many it left out (checked with corpus/modsec-diff:
    // `ARGS:a=` + 311 bytes gives 200 bytes and "(118 characters omitted)").
    let rs = ruleset("SecRule ARGS \"@rx y\" \"id:7,phase:1,pass,logdata:'%{MATCHED_VAR}'\"\n");
    let value = "y".repeat(318);
    let tx = get(&rs, &format!("/?a={value}"), &[]);
    let uri = format!("/{}", "u".repeat(250));
    let line = tx
        .matched_rules()
        .next()
        .expect("a match")
        .log_line(&uri, "u");
    assert!(
        line.contains(&format!(
            "[data \"{} (118 characters omitted)\"]",
            "y".repeat(200)
        )),
        "{line}"
    );
    assert!(
        line.contains(&format!(
            "[uri \"/{} (51 characters omitted)\"]",
            "u".repeat(199)
        )),
        "{line}"
    );
}

#[test]
fn embedder_exceptions_remove_rules_by_id_and_tag_until_reset() {
    let rs = ruleset(
        "SecRuleEngine On\n\
         SecRule ARGS \"@contains x\" \"id:1,phase:1,pass,log,tag:'attack-sqli'\"\n\
         SecRule ARGS \"@contains x\" \"id:2,phase:1,pass,log,tag:'attack-xss'\"\n\
         SecRule ARGS \"@contains x\" \"id:3,phase:1,pass,log\"\n\
         SecAuditEngine RelevantOnly\n",
    );
    let tag = String::from("attack-sqli");
    let mut tx = rs.transaction();
    tx.remove_rules_by_tag(&tag);
    tx.remove_rules_by_id(3, 3);
    tx.process_uri(b"/?a=x", b"GET", b"HTTP/1.1");
    tx.process_request_headers();
    assert_eq!(ids(&tx), [2]);
    assert!(
        tx.audit_log_parts().is_some(),
        "a logging match is relevant"
    );
    tx.reset();
    tx.process_uri(b"/?a=x", b"GET", b"HTTP/1.1");
    tx.process_request_headers();
    assert_eq!(ids(&tx), [1, 2, 3], "reset forgets the exceptions");
}

#[test]
fn a_transaction_from_the_pool_starts_clean() {
    let rs = ruleset(
        "SecRuleEngine On\n\
         SecRule ARGS \"@contains x\" \"id:1,phase:1,pass,log,setvar:tx.seen=1,ctl:ruleRemoveById=3\"\n\
         SecRule TX:seen \"@eq 1\" \"id:2,phase:1,pass,log\"\n\
         SecRule ARGS \"@contains y\" \"id:3,phase:1,pass,log\"\n\
         SecRule ARGS \"@contains z\" \"id:4,phase:1,deny,status:403\"\n",
    );
    for _ in 0..3 {
        let tx = get(&rs, "/?a=xyz", &[("Host", "h")]);
        assert_eq!(ids(&tx), [1, 2, 4]);
        assert!(tx.intervention().is_some());
        drop(tx);
        // The next transaction takes the dropped one's buffers.
        let tx = get(&rs, "/?a=y", &[("Host", "h")]);
        assert_eq!(ids(&tx), [3], "no TX, ctl, match or intervention left over");
        assert!(tx.intervention().is_none());
        assert_eq!(tx.tx_var("seen"), None);
    }
    // A big body's buffers are not kept, and the next transaction works.
    let mut tx = rs.transaction();
    tx.process_uri(b"/", b"POST", b"HTTP/1.1");
    tx.add_request_header(b"Content-Type", b"text/plain");
    tx.process_request_headers();
    tx.append_request_body(&vec![b'a'; 600 << 10]);
    tx.process_request_body();
    drop(tx);
    let tx = get(&rs, "/?a=y", &[("Host", "h")]);
    assert_eq!(ids(&tx), [3]);
}

#[test]
fn decisions_do_not_wait_for_the_dense_dfas() {
    // Rules answer through the lazy DFAs while the dense ones are built in
    // the background, and the same once they are.
    let rs = ruleset(
        "SecRuleEngine On\n\
         SecRule REQUEST_HEADERS:User-Agent \"@rx ^(?:curl|wget)/[0-9.]+$\" \"id:2,phase:1,pass,log\"\n\
         SecRule ARGS \"@rx (?i)<scr[i]pt\" \"id:1,phase:1,deny,status:403\"\n",
    );
    let run = |rs: &Ruleset| {
        let benign = get(rs, "/a?x=hello", &[("User-Agent", "Mozilla/5.0")]);
        let attack = get(rs, "/a?x=%3CScRiPt%3E", &[("User-Agent", "curl/8.1")]);
        (ids(&benign), ids(&attack))
    };
    let before = run(&rs);
    rs.finish_building();
    assert_eq!(rs.pending_builds(), 0);
    assert_eq!(before, (vec![], vec![2, 1]));
    assert_eq!(run(&rs), before);
}

const FOLDED: &str = "SecRuleEngine On\n\
     SecAction \"id:1,phase:1,pass,nolog,setvar:tx.level=1\"\n\
     SecRule &TX:level \"@eq 0\" \"id:2,phase:1,pass,nolog\"\n\
     SecRule &TX:level \"@eq 0\" \"id:3,phase:2,pass,nolog\"\n\
     SecRule TX:level \"@lt 1\" \"id:4,phase:2,pass,nolog\"\n";

#[test]
fn rules_decided_at_load_are_stepped_over() {
    let rs = ruleset(FOLDED);
    assert_eq!(rs.folded_rules(), 3);
    let tx = get(&rs, "/", &[]);
    assert_eq!(ids(&tx), [1]);
    assert_eq!(tx.stats().rules_folded, 3);
    let mut naive = rs.transaction_with(crate::EvalOptions::naive());
    naive.process_uri(b"/", b"GET", b"HTTP/1.1");
    naive.process_request_headers();
    naive.process_request_body();
    assert_eq!(ids(&naive), [1]);
    assert_eq!(naive.stats().rules_folded, 0);
}

#[test]
fn a_removed_rule_turns_partial_evaluation_off() {
    // Without rule 1, TX:level is never set: 2 and 3 match, which the
    // analysis (made for the rules as written) says they cannot.
    let rs = ruleset(FOLDED);
    let mut tx = rs.transaction();
    tx.remove_rules_by_id(1, 1);
    tx.process_uri(b"/", b"GET", b"HTTP/1.1");
    tx.process_request_headers();
    tx.process_request_body();
    assert_eq!(ids(&tx), [2, 3]);
    assert_eq!(tx.stats().rules_folded, 0);
}

#[test]
fn removing_rules_the_analysis_left_undecided_keeps_partial_evaluation() {
    // As CRS's 941010: a `ctl` removing targets of request-reading rules,
    // which the analysis already lets match or not. 21 is undecided (it
    // reads ARGS); removing it, or its ARGS, changes nothing decided.
    for ctl in [
        "ctl:ruleRemoveTargetByTag=xss;ARGS",
        "ctl:ruleRemoveById=21",
        "ctl:ruleRemoveByTag=xss",
    ] {
        let rs = ruleset(&format!(
            "{FOLDED}SecAction \"id:20,phase:1,pass,nolog,{ctl}\"\n\
             SecRule ARGS \"@rx x\" \"id:21,phase:2,pass,nolog,tag:xss,setvar:tx.level=0\"\n"
        ));
        let tx = get(&rs, "/?a=x", &[]);
        assert_eq!(ids(&tx), [1, 20], "{ctl}");
        assert_eq!(tx.stats().rules_folded, 3, "{ctl}");
    }
    // A removal that selects a decided rule (1, which sets the level)
    // turns it off: 2, 3 and 4 are evaluated and 2 and 3 match.
    let rs = ruleset(&format!(
        "SecAction \"id:5,phase:1,pass,nolog,ctl:ruleRemoveByTag=init\"\n{}",
        FOLDED.replace("id:1,", "id:1,tag:init,")
    ));
    let tx = get(&rs, "/", &[]);
    assert_eq!(ids(&tx), [5, 2, 3]);
    assert_eq!(tx.stats().rules_folded, 0);
}

#[test]
fn rules_that_always_match_are_replayed_as_evaluated() {
    // 2, 3 and 4 match on every request: replayed from the values the
    // analysis found. 2 writes what it read, after reading it. 3 matches
    // two values and reads MATCHED_VARS; 7 and 8 read what 4 left in
    // MATCHED_VAR(_NAME). 9 writes what its second target reads, after
    // its first match: evaluated.
    let rs = ruleset(
        "SecRuleEngine On\n\
         SecAction \"id:1,phase:1,pass,nolog,setvar:tx.level=2,setvar:tx.mode=abc,setvar:tx.a=1,setvar:tx.b=1\"\n\
         SecRule &TX:missing \"@eq 0\" \"id:2,phase:1,pass,log,msg:'%{MATCHED_VAR_NAME}=%{MATCHED_VAR}',setvar:tx.seen=%{MATCHED_VAR},setvar:tx.missing=1\"\n\
         SecRule TX:LEVEL|TX:MODE \"!@eq 7\" \"id:3,phase:1,pass,log,logdata:'%{MATCHED_VARS_NAMES} %{MATCHED_VARS}'\"\n\
         SecRule TX:Level \"@lt 3\" \"id:4,phase:1,pass,nolog,skipAfter:END\"\n\
         SecRule REQUEST_URI \"@rx .\" \"id:5,phase:1,pass,log\"\n\
         SecMarker END\n\
         SecRule MATCHED_VAR_NAME \"@streq TX:level\" \"id:7,phase:1,pass,log,logdata:%{TX.seen}\"\n\
         SecRule MATCHED_VAR \"@streq TX:level\" \"id:8,phase:1,pass,log\"\n\
         SecRule TX:A|TX:B \"@eq 1\" \"id:9,phase:2,pass,log,setvar:tx.b=2,logdata:'%{MATCHED_VARS_NAMES}'\"\n",
    );
    let records = |tx: &crate::Transaction<'_>| -> Vec<(u64, String, String, String, String)> {
        tx.matched_rules()
            .map(|m| {
                let (name, var) = (m.matched_var_name.clone(), m.matched_var.clone());
                (m.id, m.msg.clone(), m.logdata.clone(), name, var)
            })
            .collect()
    };
    let tx = get(&rs, "/", &[]);
    assert_eq!(tx.stats().rules_replayed, 3);
    let mut naive = rs.transaction_with(crate::EvalOptions::naive());
    naive.process_uri(b"/", b"GET", b"HTTP/1.1");
    naive.process_request_headers();
    naive.process_request_body();
    assert_eq!(naive.stats().rules_replayed, 0);
    assert_eq!(records(&tx), records(&naive));
    let s = |x: &str| x.to_string();
    assert_eq!(
        records(&tx),
        [
            (1, s(""), s(""), s(""), s("")),
            (2, s("TX=0"), s(""), s("TX"), s("0")),
            // A collection in a macro expands to its first value.
            (3, s(""), s("TX:level 2"), s("TX:mode"), s("abc")),
            (4, s(""), s(""), s("TX:level"), s("2")),
            (7, s(""), s("0"), s("MATCHED_VAR_NAME"), s("TX:level")),
            (8, s(""), s(""), s("MATCHED_VAR"), s("TX:level")),
            (9, s(""), s("TX:a"), s("TX:a"), s("1")),
        ]
    );
}

#[test]
fn phase_two_is_not_folded_without_a_complete_phase_one() {
    let rs = ruleset(FOLDED);
    let mut tx = rs.transaction();
    tx.process_uri(b"/", b"GET", b"HTTP/1.1");
    tx.process_request_body();
    assert_eq!(ids(&tx), [3]);
    // Phase 1 cut short by `allow:phase` (rule 1 never runs).
    let rs = ruleset(&format!(
        "SecRule REQUEST_URI \"@streq /\" \"id:9,phase:1,allow:phase,nolog\"\n{FOLDED}"
    ));
    let tx = get(&rs, "/", &[]);
    assert_eq!(ids(&tx), [9, 3]);
}

/// Rules decided at load in every phase: 31 (phase 3), 42 (phase 4) and 51
/// (phase 5) cannot match while rule 1's level holds; 52 would match if
/// phase 4's rule 41 ran, so it is not decided.
const FOLDED_RESPONSE: &str = "SecRuleEngine On\n\
     SecResponseBodyAccess On\n\
     SecResponseBodyMimeType text/html\n\
     SecAction \"id:1,phase:1,pass,nolog,setvar:tx.level=1\"\n\
     SecRule TX:LEVEL \"@lt 1\" \"id:31,phase:3,pass,nolog\"\n\
     SecRule RESPONSE_BODY \"@rx stop\" \"id:40,phase:4,deny,status:502\"\n\
     SecAction \"id:41,phase:4,pass,nolog,setvar:tx.other=1\"\n\
     SecRule TX:LEVEL \"@lt 1\" \"id:42,phase:4,pass,nolog\"\n\
     SecRule TX:LEVEL \"@lt 1\" \"id:51,phase:5,pass,nolog\"\n\
     SecRule TX:OTHER \"@eq 1\" \"id:52,phase:5,pass,nolog\"\n";

#[test]
fn response_phases_step_over_rules_decided_at_load() {
    let rs = ruleset(FOLDED_RESPONSE);
    assert_eq!(rs.folded_rules(), 3);
    let folded = |tx: &crate::Transaction<'_>| tx.stats().rules_folded;
    // Phase 4 runs (an inspected type) and ends: 31, 42, 51 stepped over.
    let mut tx = respond(&rs, "text/html", &[b"fine"]);
    tx.process_logging();
    assert_eq!(ids(&tx), [1, 41, 52]);
    assert_eq!(folded(&tx), 3);
    // Phase 4 never starts (a type not inspected): phase 5 still follows
    // the analysis, which joined both ends.
    let mut tx = respond(&rs, "image/png", &[b"fine"]);
    tx.process_logging();
    assert_eq!(ids(&tx), [1]);
    assert_eq!(folded(&tx), 2);
    // Phase 4 cut short by a deny: phase 5 is evaluated as written.
    let mut tx = respond(&rs, "text/html", &[b"stop"]);
    tx.process_logging();
    assert_eq!(ids(&tx), [1, 40]);
    assert_eq!(folded(&tx), 1);
    // The same decisions without partial evaluation.
    for (ty, body, want) in [
        ("text/html", b"fine", &[1, 41, 52][..]),
        ("image/png", b"fine", &[1]),
        ("text/html", b"stop", &[1, 40]),
    ] {
        let mut tx = rs.transaction_with(crate::EvalOptions::naive());
        tx.process_uri(b"/", b"GET", b"HTTP/1.1");
        tx.process_request_headers();
        tx.process_request_body();
        tx.add_response_header(b"Content-Type", ty.as_bytes());
        tx.process_response_headers(200, b"HTTP/1.1");
        tx.append_response_body(body);
        tx.process_response_body();
        tx.process_logging();
        assert_eq!(ids(&tx), want, "{ty} {body:?}");
        assert_eq!(folded(&tx), 0);
    }
}

#[test]
fn response_phases_are_not_folded_after_an_incomplete_request_phase() {
    // The analysis has rule 10 set the level, so 31 and 51 cannot match;
    // `allow:phase` cuts phase 2 short before 10 on `/`, and they must.
    let rs = ruleset(
        "SecRuleEngine On\n\
         SecRule REQUEST_URI \"@streq /\" \"id:9,phase:2,allow:phase,nolog\"\n\
         SecAction \"id:10,phase:2,pass,nolog,setvar:tx.level=1\"\n\
         SecRule &TX:LEVEL \"@eq 0\" \"id:31,phase:3,pass,nolog\"\n\
         SecRule &TX:LEVEL \"@eq 0\" \"id:51,phase:5,pass,nolog\"\n",
    );
    assert_eq!(rs.folded_rules(), 2);
    let run = |uri: &str| {
        let mut tx = get(&rs, uri, &[]);
        tx.process_response_headers(200, b"HTTP/1.1");
        tx.process_logging();
        (ids(&tx), tx.stats().rules_folded)
    };
    assert_eq!(run("/"), (vec![9, 31, 51], 0));
    assert_eq!(run("/x"), (vec![10], 2));
    // Phase 3 run twice: the second run is not the analysed one.
    let mut tx = get(&rs, "/x", &[]);
    tx.process_response_headers(200, b"HTTP/1.1");
    let once = tx.stats().rules_folded;
    assert_eq!(once, 1);
    tx.process_response_headers(200, b"HTTP/1.1");
    assert_eq!(tx.stats().rules_folded, once);
}

/// Configurations ModSecurity v3 (3.0.9) loads although they are mistakes
/// (`compat-*` warnings), evaluated as v3 evaluates them: each case was
/// run through libmodsecurity with `../shared/peers`'s modsec-peer on the
/// same request (`GET /?a=foo`), with the decision asserted here.
#[test]
fn compat_configurations_decide_as_modsecurity_v3() {
    let decide = |rules: &str| {
        let rs = ruleset(&format!("SecRuleEngine On\n{rules}"));
        let tx = get(&rs, "/?a=foo", &[("Host", "x")]);
        (ids(&tx), tx.intervention().map(|i| i.status))
    };
    // v3: 403 by rule 1; the action list runs to the end of the line.
    assert_eq!(
        decide("SecRule ARGS \"@rx foo\" \"id:1,phase:2,deny,status:403,msg:'x'\nSecRule ARGS \"@rx bar\" \"id:2,phase:2,deny\"\n"),
        (vec![1], Some(403))
    );
    // v3: nothing matches (a chain with no rule after it never matches).
    assert_eq!(
        decide("SecRule ARGS \"@rx foo\" \"id:1,phase:2,deny,chain\"\n"),
        (vec![], None)
    );
    // v3: nothing matches (`!ARGS` leaves no ARGS value).
    assert_eq!(
        decide("SecRule ARGS|!ARGS \"@rx foo\" \"id:1,phase:2,deny\"\n"),
        (vec![], None)
    );
    // v3: `block` in SecDefaultAction is ignored; deny is the default.
    assert_eq!(
        decide("SecDefaultAction \"phase:2,log,auditlog,deny,block\"\nSecRule ARGS \"@rx foo\" \"id:1,phase:2,block\"\n"),
        (vec![1], Some(403))
    );
    assert_eq!(
        decide("SecDefaultAction \"phase:2,log,block,pass\"\nSecRule ARGS \"@rx foo\" \"id:1,phase:2,block\"\n"),
        (vec![1], None)
    );
}

/// Runs a POST with `body` through phases 1 and 2, fed in 1 KiB chunks.
fn post<'r>(rs: &'r Ruleset, content_type: &str, body: &[u8]) -> crate::Transaction<'r> {
    let mut tx = rs.transaction();
    tx.process_connection("10.0.0.1", 40000, "127.0.0.1", 80);
    tx.process_uri(b"/submit", b"POST", b"HTTP/1.1");
    tx.add_request_header(b"Content-Type", content_type.as_bytes());
    tx.add_request_header(b"Content-Length", body.len().to_string().as_bytes());
    tx.process_request_headers();
    for chunk in body.chunks(1024) {
        if !tx.append_request_body(chunk) {
            break;
        }
    }
    tx.process_request_body();
    tx
}

const BODY_LIMITS: &str = "SecRuleEngine On\n\
     SecRequestBodyAccess On\n\
     SecRequestBodyLimit 65536\n\
     SecRequestBodyNoFilesLimit 16384\n\
     SecArgumentsLimit 100\n\
     SecRule REQUEST_HEADERS:Content-Type \"@rx ^application/json\" \"id:100,phase:1,pass,nolog,ctl:requestBodyProcessor=JSON\"\n\
     SecRule ARGS \"@contains zzattack\" \"id:1,phase:2,deny,status:403\"\n\
     SecRule REQBODY_ERROR \"!@eq 0\" \"id:2,phase:2,pass,log,logdata:'%{REQBODY_ERROR_MSG}'\"\n\
     SecRule INBOUND_DATA_ERROR \"!@eq 0\" \"id:3,phase:2,pass,log\"\n";

/// The attack at the end of a body over the limit is never let through
/// silently (libmodsecurity 3.0.9 answers 200 to a urlencoded body over
/// `SecRequestBodyNoFilesLimit` with `Reject`: corpus/body_limits.py).
#[test]
fn a_body_over_its_limit_is_rejected_or_flagged() {
    let mut body = b"a=".to_vec();
    body.extend(std::iter::repeat_n(b'x', 32 * 1024));
    body.extend_from_slice(b"&b=zzattack");
    let reject = ruleset(&format!("{BODY_LIMITS}SecRequestBodyLimitAction Reject\n"));
    let tx = post(&reject, "application/x-www-form-urlencoded", &body);
    assert_eq!(tx.intervention().map(|i| i.status), Some(413));
    let partial = ruleset(&format!(
        "{BODY_LIMITS}SecRequestBodyLimitAction ProcessPartial\n"
    ));
    let tx = post(&partial, "application/x-www-form-urlencoded", &body);
    // The first 16 KiB were inspected; both flags say the rest was not.
    assert_eq!(ids(&tx), [2, 3]);
    assert!(tx.intervention().is_none());
    let msg = String::from_utf8_lossy(tx.request_body_error().unwrap_or_default()).into_owned();
    assert_eq!(
        msg,
        "Request body truncated at 16384 bytes (request body limit): the rest was not inspected"
    );
}

/// Arguments beyond `SecArgumentsLimit` are not inspected, and rules can
/// tell (libmodsecurity 3.0.9 drops them silently).
#[test]
fn arguments_over_the_limit_set_reqbody_error() {
    let rs = ruleset(&format!("{BODY_LIMITS}SecRequestBodyLimitAction Reject\n"));
    let body: Vec<u8> = (0..150)
        .map(|i| format!("a{i}=1"))
        .collect::<Vec<_>>()
        .join("&")
        .into_bytes();
    let tx = post(&rs, "application/x-www-form-urlencoded", &body);
    assert_eq!(ids(&tx), [2]);
    assert_eq!(
        tx.request_body_error(),
        Some(&b"50 arguments beyond SecArgumentsLimit were not inspected"[..])
    );
}

/// Malformed and deeply nested bodies set REQBODY_ERROR with a message,
/// in bounded time (also what libmodsecurity 3.0.9 does for these).
#[test]
fn hostile_bodies_set_reqbody_error() {
    let rs = ruleset(&format!(
        "{BODY_LIMITS}SecRequestBodyLimitAction Reject\nSecRequestBodyNoFilesLimit 1048576\nSecRequestBodyLimit 1048576\n"
    ));
    // Deeper than the JSON depth limit (10,000, libmodsecurity's default).
    let deep = format!("{}{}", "[".repeat(20_000), "]".repeat(20_000));
    for (ct, body) in [
        ("application/json", deep.as_str()),
        ("application/json", "{\"a\": [1, 2,"),
        (
            "multipart/form-data; boundary=x",
            "--x\r\nContent-Disposition: form-data; name=a\r\n\r\nfoo",
        ),
    ] {
        let tx = post(&rs, ct, body.as_bytes());
        let logged: Vec<u64> = ids(&tx).into_iter().filter(|&id| id != 100).collect();
        assert_eq!(logged, [2], "{ct}: {:.40}", body);
        assert!(!tx.request_body_error().unwrap_or_default().is_empty());
    }
}

/// `capture` sets TX:0 for `@rx` (the matched text) and `@pm` (the phrase
/// as written), and not for the string operators: what libmodsecurity
/// 3.0.9 does, checked operator by operator with modsec-peer (the
/// differential fuzzer, corpus/diff_fuzz.py, found the difference).
#[test]
fn capture_sets_tx0_as_modsecurity_v3_does() {
    let tx0 = |op: &str| {
        let rs = ruleset(&format!(
            "SecRule ARGS:a \"{op}\" \"id:1,phase:1,pass,capture\"\n\
             SecRule TX:0 \"@rx ^(.*)$\" \"id:2,phase:1,pass,capture,setvar:tx.seen=%{{TX.1}}\"\n"
        ));
        let tx = get(&rs, "/?a=xxSeLeCtyy", &[]);
        tx.tx_var("seen")
            .map(|v| String::from_utf8_lossy(v).into_owned())
    };
    assert_eq!(tx0("@rx (?i)select").as_deref(), Some("SeLeCt"));
    assert_eq!(tx0("@pm select").as_deref(), Some("select"));
    for op in [
        "@contains SeLeCt",
        "@beginsWith xxSe",
        "@endsWith Ctyy",
        "@strmatch SeLeCt",
    ] {
        assert_eq!(tx0(op), None, "{op}");
    }
}

/// A redirect keeps the rule's status only when it is 301-307, else 302,
/// as libmodsecurity 3.0.9 answers (checked with modsec-peer for 300,
/// 301, 303, 304, 305, 307, 308, 399, 403, 404 and none).
#[test]
fn redirect_status_as_modsecurity_v3() {
    let status = |s: &str| {
        let rs = ruleset(&format!(
            "SecRuleEngine On\nSecRule ARGS:a \"@rx foo\" \"id:1,phase:1,redirect:http://x/{s}\"\n"
        ));
        let tx = get(&rs, "/?a=foo", &[]);
        tx.intervention().map(|i| (i.status, i.url.clone()))
    };
    let url = Some("http://x/".to_string());
    assert_eq!(status(""), Some((302, url.clone())));
    for (given, got) in [
        (301, 301),
        (303, 303),
        (307, 307),
        (300, 302),
        (308, 302),
        (403, 302),
    ] {
        assert_eq!(
            status(&format!(",status:{given}")),
            Some((got, url.clone())),
            "status:{given}"
        );
    }
}

/// With `capture`, a negated `@rx` still stores the groups of the values
/// the regex matched, though those values do not match the rule: what
/// libmodsecurity 3.0.9 does (found by corpus/diff_fuzz.py).
#[test]
fn a_negated_regex_captures_as_modsecurity_v3() {
    let rs = ruleset(
        "SecRule ARGS \"!@rx (a|b)c\" \"id:1,phase:1,pass,log,capture\"\n\
         SecRule TX:1 \"@streq b\" \"id:2,phase:1,pass,log\"\n",
    );
    assert_eq!(ids(&get(&rs, "/?a=xbc&b=zzz", &[])), [1, 2]);
    assert_eq!(ids(&get(&rs, "/?a=xbc", &[])), [2]);
}

/// Links that read the same slots (targets through one chain) share one
/// union of scan results per phase: it rules out the links whose literal
/// occurs in no value, and lets the others test each value as before,
/// also after the phase's values changed (a body in phase 2).
#[test]
fn slot_groups_rule_links_out_and_keep_the_rest_exact() {
    let rs = ruleset(
        "SecRuleEngine On\n\
         SecRequestBodyAccess On\n\
         SecRule ARGS|ARGS_NAMES \"@rx alpha[0-9]\" \"id:1,phase:1,pass,t:none,t:lowercase\"\n\
         SecRule ARGS|ARGS_NAMES \"@rx bravo[0-9]\" \"id:2,phase:1,pass,t:none,t:lowercase\"\n\
         SecRule ARGS_NAMES|ARGS \"@rx charlie[0-9]\" \"id:3,phase:2,pass,t:none,t:lowercase\"\n\
         SecRule ARGS|ARGS_NAMES \"@rx alpha[0-9]\" \"id:4,phase:2,pass,t:none,t:lowercase\"\n",
    );
    let form = [("Content-Type", "application/x-www-form-urlencoded")];
    let mut tx = through_phase1(rs.transaction(), "POST", "/?a=ALPHA1&x=y", &form);
    assert_eq!(ids(&tx), [1]);
    let skips = tx.stats().prefilter_skips;
    assert!(skips >= 3, "rule 2's slots ruled out at once: {skips}");
    // Phase 2 sees the body's argument: its group union is new.
    tx.append_request_body(b"charlie7=1");
    tx.process_request_body();
    assert_eq!(ids(&tx), [1, 3, 4]);
    // Naive evaluation agrees.
    let naive = rs.transaction_with(crate::EvalOptions::naive());
    let mut naive = through_phase1(naive, "POST", "/?a=ALPHA1&x=y", &form);
    naive.append_request_body(b"charlie7=1");
    naive.process_request_body();
    assert_eq!(ids(&naive), [1, 3, 4]);
}

/// A slot group's coarse union (one union per value over every chain its
/// source is read through, cached across transactions per class of
/// chains) rules a link out only when no value holds its literal through
/// any of those chains. The same bytes are read in two classes here:
/// arguments through `none` and `urlDecodeUni` (which reveals `alpha1`),
/// headers through `removeWhitespace` (which reveals `charlie2`); each
/// class's union finds its literal, whether computed or read from the
/// thread's cache, and never stands for the other's.
#[test]
fn coarse_unions_rule_links_out_and_see_through_every_chain() {
    let rs = ruleset(
        "SecRuleEngine On\n\
         SecRule REQUEST_HEADERS \"@rx charlie[0-9]\" \"id:4,phase:1,pass,t:none,t:removeWhitespace\"\n\
         SecRule ARGS|ARGS_NAMES \"@rx alpha[0-9]\" \"id:1,phase:1,pass,t:none,t:urlDecodeUni\"\n\
         SecRule ARGS|ARGS_NAMES \"@rx bravo[0-9]\" \"id:2,phase:1,pass,t:none,t:urlDecodeUni\"\n\
         SecRule ARGS \"@rx charlie[0-9]\" \"id:3,phase:1,pass,t:none\"\n",
    );
    // `a` and the header hold `%61lpha1 char lie2`.
    let target = "/?a=%2561lpha1%20char%20lie2";
    let headers = [("X-Test", "%61lpha1 char lie2")];
    // Four times: the value is admitted to the thread's cache on its
    // second sighting (the argument, in the first request), and its
    // unions are read from there after that.
    for round in 0..4 {
        let tx = get(&rs, target, &headers);
        assert_eq!(ids(&tx), [4, 1], "round {round}");
        // Rule 2's literal is in no value through any chain.
        assert!(
            tx.stats().coarse_skips >= 1,
            "round {round}: {:?}",
            tx.stats()
        );
    }
    let naive = rs.transaction_with(crate::EvalOptions::naive());
    let mut naive = through_phase1(naive, "GET", target, &headers);
    naive.process_request_body();
    assert_eq!(ids(&naive), [4, 1]);
}

/// `multiMatch` links get coarse unions over their whole chain, apart from
/// the other links' classes: rule 1 matches `alpha1`, which only
/// `urlDecodeUni` reveals and `base64Decode` hides again; rule 2's literal
/// is nowhere; rule 3 reads the same argument at the end of the chain
/// only, where `alpha` is not, and is ruled out coarsely too (it would
/// not be if its class took in rule 1's chain).
#[test]
fn multi_match_links_are_ruled_out_over_their_whole_chain() {
    let rs = ruleset(
        "SecRuleEngine On\n\
         SecRule ARGS \"@rx alpha[0-9]\" \"id:1,phase:1,pass,multiMatch,t:none,t:urlDecodeUni,t:base64Decode\"\n\
         SecRule ARGS \"@rx bravo[0-9]\" \"id:2,phase:1,pass,multiMatch,t:none,t:urlDecodeUni,t:base64Decode\"\n\
         SecRule ARGS \"@rx alpha[0-9]\" \"id:3,phase:1,pass,t:none,t:urlDecodeUni,t:base64Decode\"\n",
    );
    let target = "/?a=%61lpha1";
    for round in 0..4 {
        let tx = get(&rs, target, &[]);
        assert_eq!(ids(&tx), [1], "round {round}");
        assert_eq!(
            tx.stats().coarse_skips,
            2,
            "round {round}: {:?}",
            tx.stats()
        );
    }
    let naive = rs.transaction_with(crate::EvalOptions::naive());
    let mut naive = through_phase1(naive, "GET", target, &[]);
    naive.process_request_body();
    assert_eq!(ids(&naive), [1]);
}

/// A value's verdict loses a link's bit once the link is known not to
/// match it, so that links without a prefilter (`@detectSQLi`, a
/// `multiMatch` `@detectXSS`) and links whose byte gate lets a value
/// through are ruled out without running once their values are known;
/// a new value, or one that matches, still runs them.
#[test]
fn verdicts_rule_out_links_known_not_to_match_and_never_hide_a_match() {
    let rs = ruleset(
        "SecRuleEngine On\n\
         SecRule ARGS \"@detectSQLi\" \"id:1,phase:1,pass,t:none,t:urlDecodeUni\"\n\
         SecRule ARGS \"@rx ^e.i.$\" \"id:2,phase:1,pass,t:none,t:urlDecodeUni\"\n\
         SecRule ARGS \"@detectXSS\" \"id:3,phase:1,pass,multiMatch,t:none,t:urlDecodeUni\"\n\
         SecRule ARGS \"!@rx ^[a-z]\" \"id:4,phase:1,pass,capture,t:none\"\n",
    );
    let decide = |target: &str| {
        let tx = get(&rs, target, &[]);
        let naive = rs.transaction_with(crate::EvalOptions::naive());
        let mut naive = through_phase1(naive, "GET", target, &[]);
        naive.process_request_body();
        assert_eq!(ids(&tx), ids(&naive), "{target}");
        (ids(&tx), tx.stats().op_runs, tx.stats().coarse_skips)
    };
    let benign = "/?a=fine&b=hello";
    let mut runs = Vec::new();
    for _ in 0..4 {
        let (ids, op_runs, skips) = decide(benign);
        assert_eq!(ids, [] as [u64; 0]);
        runs.push((op_runs, skips));
    }
    // Admitted to the thread's cache on their second sighting, tested by
    // every link then: from the third request on, rules 1-3 are ruled out
    // by the values' verdicts without an operator run (rule 4 is negated
    // with `capture`: it runs on every value, as it sets `TX:0`).
    assert!(runs[0].0 > runs[3].0, "{runs:?}");
    assert_eq!(runs[3], (2, 3), "{runs:?}");
    // A new value beside the known ones: its links run, on it alone.
    assert_eq!(
        decide("/?a=fine&b=hello&c=1%27%20or%20%271%27%3D%271").0,
        [1, 4]
    );
    assert_eq!(decide("/?a=fine&b=evil").0, [2]);
    assert_eq!(
        decide("/?a=%3Cscript%3Ealert(1)%3C/script%3E&b=hello").0,
        [3, 4]
    );
    // Known values in another argument's place decide the same.
    assert_eq!(decide("/?b=fine&a=hello").0, [] as [u64; 0]);
    assert_eq!(decide(benign), (Vec::new(), 2, 3));
}

/// Captures are found again where they were written (`TX:0` is written
/// and read back for every value a capturing rule matches), and never
/// stale: after `TX:0` is removed and other variables move into its place,
/// the next capture and the macros reading it agree with a transaction
/// that never saw the first.
#[test]
fn captures_are_read_back_from_where_they_were_written() {
    let rs = ruleset(
        "SecRuleEngine On\n\
         SecRule ARGS:a \"@rx (b+)\" \"id:1,phase:1,pass,capture,setvar:tx.first=%{tx.0}/%{tx.1}\"\n\
         SecAction \"id:2,phase:1,pass,setvar:!tx.0,setvar:!tx.1,setvar:tx.filler=x\"\n\
         SecRule ARGS:c \"@rx (d+)e\" \"id:3,phase:1,pass,capture,setvar:tx.second=%{tx.0}/%{tx.1}\"\n\
         SecRule TX:first \"@streq bb/bb\" \"id:4,phase:1,pass\"\n\
         SecRule TX:second \"@streq dde/dd\" \"id:5,phase:1,pass\"\n\
         SecRule TX:0 \"@streq dde\" \"id:6,phase:1,pass\"\n",
    );
    for _ in 0..3 {
        let tx = get(&rs, "/?a=xbb&c=dde", &[]);
        assert_eq!(ids(&tx), [1, 2, 3, 4, 5, 6]);
    }
    let tx = get(&rs, "/?c=dde", &[]);
    assert_eq!(ids(&tx), [2, 3, 5, 6]);
}

/// Rule 2 reads `ARGS` in phase 1 (its values get their instances and
/// records then); rule 1, in phase 2, has no literal of 3+ bytes, so its
/// byte gate lets `fine` through as well as `evil`: it runs on both, and
/// its result is cached per value.
const THREAD_CACHE_RULES: &str = "SecRuleEngine On\n\
    SecRule ARGS \"@rx zzz\" \"id:2,phase:1,pass,t:none,t:urlDecodeUni\"\n\
    SecRule ARGS \"@rx ^e.i.$\" \"id:1,phase:2,deny,t:none,t:urlDecodeUni\"\n";

/// The cross-transaction cache belongs to the thread: transactions in
/// flight together share what it learnt, and one whose phases run on two
/// threads (a proxy's task moved between workers) never reads the other
/// thread's records for its own values (record ids repeat across caches;
/// their epochs do not).
#[test]
fn the_thread_cache_is_shared_and_never_read_across_threads() {
    let rs = ruleset(THREAD_CACHE_RULES);
    // Two transactions alive at once on this thread: the second is served
    // from what the first taught the thread's cache.
    let first = get(&rs, "/?a=evil", &[]);
    let second = get(&rs, "/?a=evil", &[]);
    let third = get(&rs, "/?a=evil", &[]);
    assert_eq!((ids(&first), ids(&third)), (vec![1], vec![1]));
    assert!(third.stats().xcache_hits > 0, "{:?}", third.stats());
    drop((first, second, third));

    let mut tx = through_phase1(rs.transaction(), "GET", "/?a=evil", &[]);
    let rs = &rs;
    std::thread::scope(|s| {
        s.spawn(move || {
            // This thread's cache learns another value, under the same
            // record ids, with rule 1's result for it.
            for _ in 0..3 {
                assert!(ids(&get(rs, "/?a=fine", &[])).is_empty());
            }
            tx.process_request_body();
            assert_eq!(ids(&tx), [1]);
        });
    });
}

/// A cross-transaction cache too small for the values that repeat starts
/// over when full, and each transaction counts the resets it caused (what
/// `waf serve` exports, to size the cache by).
#[test]
fn a_full_cache_starts_over_and_is_counted() {
    let rs = ruleset(THREAD_CACHE_RULES);
    let opts = crate::EvalOptions {
        xcache_records: 16,
        ..rs.eval_options()
    };
    let mut resets = 0;
    for _ in 0..2 {
        for i in 0..40 {
            let tx = through_phase1(rs.transaction_with(opts), "GET", &format!("/?a=v{i}"), &[]);
            resets += tx.stats().xcache_resets;
        }
    }
    // 40 values, each admitted on its second sighting, into 16 records.
    assert!(resets > 0);
    // Values that fit never reset the cache.
    let rs = ruleset(THREAD_CACHE_RULES);
    let mut resets = 0;
    for _ in 0..3 {
        for i in 0..10 {
            resets += get(&rs, &format!("/?a=v{i}"), &[]).stats().xcache_resets;
        }
    }
    assert_eq!(resets, 0);
}

/// A transaction whose next phase runs on another thread looks its values
/// up again in that thread's cache, rather than missing it for the rest of
/// the request.
#[test]
fn values_are_found_again_in_the_next_threads_cache() {
    let rs = ruleset(THREAD_CACHE_RULES);
    // This thread's cache admits the value (seen twice).
    for _ in 0..2 {
        assert_eq!(ids(&get(&rs, "/?a=evil", &[])), [1]);
    }
    let mut tx = through_phase1(rs.transaction(), "GET", "/?a=evil", &[]);
    let rs = &rs;
    std::thread::scope(|s| {
        s.spawn(move || {
            for _ in 0..2 {
                assert_eq!(ids(&get(rs, "/?a=evil", &[])), [1]);
            }
            let before = tx.stats().xcache_hits;
            tx.process_request_body();
            assert_eq!(ids(&tx), [1]);
            assert!(tx.stats().xcache_hits > before, "{:?}", tx.stats());
        });
    });
}

/// A `capture` link's match whose only group is the whole value (CRS
/// 920450's `@rx ^.*$` on every header name) is served from the
/// cross-transaction cache with the same groups; a match with other groups,
/// or whose group 0 is not the value's bytes (`@pm` captures the phrase as
/// written), runs the operator again.
#[test]
fn whole_value_captures_come_from_the_cache_unchanged() {
    let rs = ruleset(
        "SecRule REQUEST_HEADERS_NAMES \"@rx ^.*$\" \"id:1,phase:1,pass,capture,t:lowercase,setvar:'tx.seen_%{tx.0}=%{tx.0}'\"\n\
         SecRule ARGS:a \"@pm select\" \"id:2,phase:1,pass,capture,setvar:tx.pm=%{tx.0}\"\n\
         SecRule ARGS:b \"@rx ^(x)y$\" \"id:3,phase:1,pass,capture,setvar:tx.g=%{tx.0}/%{tx.1}\"\n",
    );
    let mut hits = Vec::new();
    for _ in 0..4 {
        let tx = get(&rs, "/?a=SELECT&b=xy", &[("X-Name", "v")]);
        assert_eq!(ids(&tx), [1, 2, 3]);
        assert_eq!(tx.tx_var("seen_x-name"), Some(&b"x-name"[..]));
        assert_eq!(tx.tx_var("pm"), Some(&b"select"[..]));
        assert_eq!(tx.tx_var("g"), Some(&b"xy/x"[..]));
        hits.push(tx.stats().xcache_op_hits);
    }
    // Once the cache admitted the values (the second time it saw them),
    // rule 1's result is served from it; rules 2 and 3 always run.
    assert_eq!(hits[0], 0, "{hits:?}");
    assert!(hits[3] >= 1, "{hits:?}");
    let naive = {
        let mut tx = through_phase1(
            rs.transaction_with(crate::EvalOptions::naive()),
            "GET",
            "/?a=SELECT&b=xy",
            &[("X-Name", "v")],
        );
        tx.process_request_body();
        tx
    };
    assert_eq!(naive.tx_var("seen_x-name"), Some(&b"x-name"[..]));
}

#[test]
fn persistent_collections_carry_from_one_transaction_to_the_next() {
    // A brute-force rule in ModSecurity's classic shape: count requests per
    // client in IP, block from the fourth, and flag the client for a while.
    let rs = ruleset(
        "SecRuleEngine On\n\
         SecAction \"id:1,phase:1,pass,nolog,initcol:ip=%{REQUEST_HEADERS.X-Client}\"\n\
         SecAction \"id:2,phase:1,pass,nolog,setvar:ip.hits=+1\"\n\
         SecAction \"id:5,phase:1,pass,nolog,initcol:global=global\"\n\
         SecAction \"id:6,phase:1,pass,nolog,setvar:global.seen=+1\"\n\
         SecRule IP:blocked \"@eq 1\" \"id:4,phase:1,pass,log\"\n\
         SecRule IP:hits \"@gt 3\" \"id:3,phase:1,deny,status:429,setvar:ip.blocked=1,expirevar:ip.blocked=60\"\n\
",
    );
    let status = |client: &str| {
        let tx = get(&rs, "/", &[("X-Client", client)]);
        (tx.intervention().map(|i| i.status), ids(&tx).contains(&4))
    };
    for _ in 0..3 {
        assert_eq!(status("a"), (None, false));
    }
    assert_eq!(status("a"), (Some(429), false));
    // Another key is another record.
    assert_eq!(status("b"), (None, false));
    // The flag 3 set is read by 4 on the next requests.
    assert_eq!(status("a"), (Some(429), true));
    assert_eq!(status("a"), (Some(429), true));
    let mut global = Vec::new();
    crate::store::record_id(
        waf_compiler::names::Variable::Global,
        b"global",
        &mut global,
    );
    let mut seen = Vec::new();
    rs.collection_store().load(
        &global,
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        3600,
        |n, v| seen.push((n.to_vec(), v.to_vec())),
    );
    assert_eq!(seen, [(b"seen".to_vec(), b"7".to_vec())]);
    // A ruleset built with another's store sees its records (a reload).
    let next = ruleset(
        "SecRuleEngine On\n\
         SecAction \"id:1,phase:1,pass,nolog,initcol:ip=%{REQUEST_HEADERS.X-Client}\"\n\
         SecRule IP:hits \"@ge 6\" \"id:9,phase:1,deny,status:403\"\n",
    )
    .with_collection_store(rs.collection_store().clone());
    let tx = get(&next, "/", &[("X-Client", "a")]);
    assert_eq!(tx.intervention().map(|i| i.status), Some(403));
    let tx = get(&next, "/", &[("X-Client", "b")]);
    assert_eq!(tx.intervention().map(|i| i.status), None);
}

#[test]
fn a_persistent_collection_not_opened_is_not_written() {
    let rs = ruleset(
        "SecRuleEngine On\n\
         SecAction \"id:1,phase:1,pass,nolog,setvar:ip.hits=+1\"\n\
         SecAction \"id:2,phase:1,pass,nolog,initcol:ip=x\"\n\
         SecRule IP:hits \"@ge 1\" \"id:3,phase:1,deny\"\n",
    );
    for _ in 0..3 {
        assert!(get(&rs, "/", &[]).intervention().is_none());
    }
    assert_eq!(rs.collection_store().records(), 0);
}

/// A scan of `TX` by a selector regex reads the answers `setvar` kept with
/// the keys it wrote (constant names, and computed names whose beginning
/// decides) and tests the others: the same keys either way, line feeds in
/// a computed name included.
#[test]
fn tx_scans_by_selector_find_every_key_however_it_was_written() {
    let rs = ruleset(
        "SecAction \"id:1,phase:1,pass,nolog,setvar:tx.h_const=1,setvar:tx.other=2,setvar:'tx.H_UPPER=3'\"\n\
         SecRule REQUEST_HEADERS_NAMES \"@rx ^.*$\" \"id:2,phase:1,pass,nolog,capture,t:lowercase,setvar:'tx.h_%{tx.0}=%{tx.0}',setvar:'tx.x%{tx.0}=1'\"\n\
         SecRule ARGS:n \"@rx (.*)\" \"id:3,phase:1,pass,nolog,capture,setvar:'tx.%{tx.1}=1'\"\n\
         SecRule &TX:/^h_/ \"@eq 0\" \"id:10,phase:1,pass,nolog,setvar:tx.n_h=0\"\n\
         SecRule TX:/^h_/ \"@rx .\" \"id:11,phase:1,pass,nolog,setvar:'tx.seen=%{MATCHED_VARS_NAMES}'\"\n\
         SecRule TX:/h_upp/ \"@rx .\" \"id:12,phase:1,pass,nolog\"\n\
         SecRule TX:/^xa/ \"@rx .\" \"id:13,phase:1,pass,nolog\"\n\
         SecRule TX:/^other/ \"@rx .\" \"id:14,phase:1,pass,nolog\"\n\
         SecRule TX:/^h_line/ \"@rx .\" \"id:15,phase:1,pass,nolog\"\n",
    );
    let tx = get(&rs, "/?n=x%0Ah_line", &[("A", "1"), ("B", "2")]);
    // 10: `h_const`, `h_upper`, `h_a`, `h_b` exist. 12: `h_upper` (stored
    // lowercased) contains `h_upp`. 13: `xa`. 14: `other`. 15: the key
    // `x\nh_line`, written by a name the regex cannot know before it is
    // expanded, matches after its line feed.
    assert_eq!(ids(&tx), [1, 2, 3, 11, 12, 13, 14, 15]);
    let names = tx.tx_var("seen").map(<[u8]>::to_vec).unwrap_or_default();
    assert_eq!(String::from_utf8_lossy(&names), "TX:h_const");
}

#[test]
fn static_blocks_do_what_their_rules_would_whatever_ran_before() {
    // 1-4: a block writing TX (4 jumps over 5 to END). 10: evaluated,
    // writes TX when it matches. 8-9: a block that does not write TX,
    // copied whatever TX holds. 11: a third block, whose setvar reads
    // what the first left; it may be copied only while nothing but
    // blocks wrote TX. 12 reads the score.
    let rs = ruleset(
        "SecRuleEngine On\n\
         SecAction \"id:1,phase:1,pass,nolog,setvar:tx.level=1,setvar:tx.score=0\"\n\
         SecRule &TX:limit \"@eq 0\" \"id:2,phase:1,pass,log,setvar:tx.limit=%{tx.level}0\"\n\
         SecRule TX:LEVEL \"@lt 1\" \"id:3,phase:1,pass,nolog,skipAfter:END\"\n\
         SecRule TX:LEVEL \"@lt 2\" \"id:4,phase:1,pass,log,severity:2,skipAfter:END\"\n\
         SecRule ARGS \"@rx .\" \"id:5,phase:1,pass,log,setvar:tx.level=9\"\n\
         SecMarker END\n\
         SecRule ARGS:a \"@rx x\" \"id:10,phase:1,pass,log,setvar:tx.score=+5\"\n\
         SecRule TX:LEVEL \"@lt 1\" \"id:8,phase:2,pass,nolog\"\n\
         SecRule TX:LEVEL \"@lt 2\" \"id:9,phase:2,pass,nolog\"\n\
         SecAction \"id:11,phase:2,pass,log,setvar:tx.total=%{tx.limit}%{tx.score}\"\n\
         SecRule TX:SCORE \"@ge 5\" \"id:12,phase:2,deny,status:403,log\"\n",
    );
    assert_eq!(rs.blocks().len(), 3);
    let uris = ["/", "/?a=x", "/", "/?a=x", "/?b=1", "/"];
    let run = |tx: &mut crate::Transaction<'_>, uri: &str| {
        tx.reset();
        tx.process_connection("10.0.0.1", 40000, "127.0.0.1", 80);
        tx.process_uri(uri.as_bytes(), b"GET", b"HTTP/1.1");
        tx.process_request_headers();
        tx.process_request_body();
        let vars = ["level", "score", "limit", "total"].map(|v| tx.tx_var(v).map(<[u8]>::to_vec));
        let matched: Vec<_> = tx
            .matched_rules()
            .map(|m| (m.id, m.matched_var_name.clone(), m.matched_var.clone()))
            .collect();
        let stats = tx.stats();
        (
            matched,
            vars,
            tx.intervention().map(|i| i.status),
            tx.state.highest_severity,
            stats.rules_evaluated,
            stats.rules_replayed + stats.rules_folded,
        )
    };
    let mut fast = rs.transaction();
    let mut naive = rs.transaction_with(crate::EvalOptions {
        fold: false,
        ..crate::EvalOptions::default()
    });
    // Twice round: the first run of a block records it, the later ones copy.
    for uri in uris.iter().chain(&uris) {
        let (want, got) = (run(&mut naive, uri), run(&mut fast, uri));
        assert_eq!(got.0, want.0, "{uri}");
        assert_eq!(got.1, want.1, "{uri}");
        assert_eq!(got.2, want.2, "{uri}");
        assert_eq!(got.3, want.3, "{uri}");
    }
    let (matched, vars, status, ..) = run(&mut fast, "/?a=x");
    let ids: Vec<u64> = matched.iter().map(|m| m.0).collect();
    assert_eq!(ids, [1, 2, 4, 10, 9, 11, 12]);
    assert_eq!(vars[3].as_deref(), Some(&b"105"[..]));
    assert_eq!(status, Some(403));
    // Without 10's write, the second block is copied too.
    let (_, vars, status, ..) = run(&mut fast, "/");
    assert_eq!(vars[3].as_deref(), Some(&b"100"[..]));
    assert_eq!(status, None);
    assert_eq!(rs.blocks().recorded(), 3);
}
