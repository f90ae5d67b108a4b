use super::*;
use crate::body::testutil::Rec;
use std::time::{Duration, Instant};
use waf_test_support::XorShift;

fn run_with(
    body: &[u8],
    depth: u64,
    max_args: Option<usize>,
) -> (Vec<(String, String)>, BodyResult) {
    let mut rec = Rec::default();
    let mut out = BodyResult::default();
    let mut sc = Scratch::default();
    parse(
        body,
        depth,
        &mut ArgLimit::new(max_args),
        &mut sc,
        &mut rec,
        &mut out,
    );
    assert!(rec.args.iter().all(|a| a.0 == ArgSource::Json));
    (rec.pairs(), out)
}

fn run(body: &[u8]) -> (Vec<(String, String)>, BodyResult) {
    run_with(body, 10_000, None)
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

fn msg(out: &BodyResult) -> String {
    out.reqbody_error_msg_lossy().into_owned()
}

#[test]
fn naming() {
    let cases: &[(&str, &[(&str, &str)])] = &[
        // The brief's example.
        (
            r#"{"a":[1,2],"b":{"c":"x"}}"#,
            &[
                ("json.a.array_0", "1"),
                ("json.a.array_1", "2"),
                ("json.b.c", "x"),
            ],
        ),
        (r#"{"a":1,"b":2}"#, &[("json.a", "1"), ("json.b", "2")]),
        (r#"{"a":{"b":{"c":1}}}"#, &[("json.a.b.c", "1")]),
        (
            r#"{"a":{"b":1},"c":2}"#,
            &[("json.a.b", "1"), ("json.c", "2")],
        ),
        // top-level arrays
        (r#"[1,2]"#, &[("json.array_0", "1"), ("json.array_1", "2")]),
        (
            r#"[1,[2,3],{"k":4}]"#,
            &[
                ("json.array_0", "1"),
                ("json.array_1.array_0", "2"),
                ("json.array_1.array_1", "3"),
                ("json.array_2.k", "4"),
            ],
        ),
        (
            r#"[[1],[2]]"#,
            &[("json.array_0.array_0", "1"), ("json.array_1.array_0", "2")],
        ),
        (
            r#"{"a":[{"b":1},{"b":2}]}"#,
            &[("json.a.array_0.b", "1"), ("json.a.array_1.b", "2")],
        ),
        (r#"{"a":[[],{},3]}"#, &[("json.a.array_2", "3")]),
        // top-level scalars
        (r#""s""#, &[("json", "s")]),
        ("42", &[("json", "42")]),
        ("true", &[("json", "true")]),
        ("null", &[("json", "")]),
        // empty keys
        (r#"{"":1}"#, &[("json.empty-key", "1")]),
        (r#"{"":{"b":1}}"#, &[("json.empty-key.b", "1")]),
        (r#"{"":[1]}"#, &[("json.empty-key.array_0", "1")]),
        // empty containers produce nothing
        ("{}", &[]),
        ("[]", &[]),
        (r#"{"a":{}}"#, &[]),
        (r#"{"a":[],"b":1}"#, &[("json.b", "1")]),
        // scalar kinds
        (
            r#"{"t":true,"f":false,"n":null,"i":-12,"d":1.50e+3,"z":0,"e":1E5}"#,
            &[
                ("json.t", "true"),
                ("json.f", "false"),
                ("json.n", ""),
                ("json.i", "-12"),
                ("json.d", "1.50e+3"),
                ("json.z", "0"),
                ("json.e", "1E5"),
            ],
        ),
        // whitespace (yajl also skips \v and \f)
        ("\t{ \"a\" :\r\n 1 \u{b}\u{c}}  ", &[("json.a", "1")]),
        // keys with escapes and dots are used verbatim
        (
            r#"{"a\"b":1,"c.d":2}"#,
            &[("json.a\"b", "1"), ("json.c.d", "2")],
        ),
        // CRS 944120-12/13: application/json names and values.
        (
            r#"{"test": "ProcessBuilder.evil.clonetransformer"}"#,
            &[("json.test", "ProcessBuilder.evil.clonetransformer")],
        ),
        (
            r#"{"ProcessBuilder.evil.clonetransformer": "test"}"#,
            &[("json.ProcessBuilder.evil.clonetransformer", "test")],
        ),
        // REQUEST-999 excludes ARGS_NAMES:json.profile: a top-level key.
        (r#"{"profile":"x"}"#, &[("json.profile", "x")]),
        // CRS 920540-3: an escaped backslash before "u0065" stays literal.
        (
            r#"{"testarg": "\\u0065val"}"#,
            &[("json.testarg", "\\u0065val")],
        ),
    ];
    for (body, want) in cases {
        let (got, out) = run(body.as_bytes());
        assert!(!out.reqbody_error, "{body}: {}", msg(&out));
        assert_eq!(got, pairs(want), "{body}");
    }
}

#[test]
fn string_decoding() {
    let cases: &[(&str, &[u8])] = &[
        (r#""a\nb\tc\r\\\/\"""#, b"a\nb\tc\r\\/\""),
        (r#""\b\f""#, b"\x08\x0c"),
        (r#""\u0041\u00e9\u20ac""#, "A\u{e9}\u{20ac}".as_bytes()),
        (r#""\ud83d\ude00""#, "\u{1F600}".as_bytes()),
        (r#""\u0000x""#, b"\0x"),
        // a lone high surrogate: '?', and yajl drops the following byte
        (r#""\ud800xyz""#, b"?yz"),
        (r#""\ud800""#, b"?"),
        (r#""\ud800\n""#, b"?n"),
        // a lone low surrogate is encoded as is (not valid UTF-8)
        (r#""\udc00""#, b"\xed\xb0\x80"),
        // a high surrogate followed by another escape: yajl's formula
        (r#""\ud800\u0041""#, b"\xf0\x90\x81\x81"),
        // raw UTF-8 passes, including what yajl's loose check accepts
        ("\"\u{e9}\"", "\u{e9}".as_bytes()),
    ];
    for (body, want) in cases {
        struct Raw(Vec<u8>);
        impl BodySink for Raw {
            fn arg(&mut self, _: ArgSource, _: &[u8], v: &[u8]) {
                self.0 = v.to_vec();
            }
        }
        let mut raw = Raw(Vec::new());
        let mut out = BodyResult::default();
        parse(
            body.as_bytes(),
            100,
            &mut ArgLimit::new(None),
            &mut Scratch::default(),
            &mut raw,
            &mut out,
        );
        assert!(!out.reqbody_error, "{body}: {}", msg(&out));
        assert_eq!(raw.0, *want, "{body}");
    }
    // overlong and surrogate encodings pass yajl's UTF-8 check
    for body in [
        &b"\"\xc0\x80\""[..],
        b"\"\xed\xa0\x80\"",
        b"\"\xf7\xbf\xbf\xbf\"",
    ] {
        let (_, out) = run(body);
        assert!(!out.reqbody_error, "{body:?}");
    }
}

#[test]
fn errors() {
    let cases: &[(&[u8], &str)] = &[
        (b"{", "parse error: premature EOF\n"),
        (b"[", "parse error: premature EOF\n"),
        (b"   ", "parse error: premature EOF\n"),
        (b"\"abc", "parse error: premature EOF\n"),
        (b"{\"a\":", "parse error: premature EOF\n"),
        (
            b"{\"a\":1,}",
            "parse error: invalid object key (must be a string)\n",
        ),
        (
            b"{1:2}",
            "parse error: invalid object key (must be a string)\n",
        ),
        (
            b"[1,]",
            "parse error: unallowed token at this point in JSON text\n",
        ),
        (
            b"]",
            "parse error: unallowed token at this point in JSON text\n",
        ),
        (
            b"[}",
            "parse error: unallowed token at this point in JSON text\n",
        ),
        (
            b"{\"a\":}",
            "parse error: unallowed token at this point in JSON text\n",
        ),
        (
            b"[1 2]",
            "parse error: after array element, I expect ',' or ']'\n",
        ),
        (
            b"[1}",
            "parse error: after array element, I expect ',' or ']'\n",
        ),
        (
            b"{\"a\" 1}",
            "parse error: object key and value must be separated by a colon (':')\n",
        ),
        (
            b"{\"a\":1 \"b\"}",
            "parse error: after key and value, inside map, I expect ',' or '}'\n",
        ),
        (b"{} x", "parse error: trailing garbage\n"),
        (b"{}{}", "parse error: trailing garbage\n"),
        (b"1 2", "parse error: trailing garbage\n"),
        (b"01", "parse error: trailing garbage\n"),
        (
            b"[01]",
            "parse error: after array element, I expect ',' or ']'\n",
        ),
        (b"[tru]", "lexical error: invalid string in json text.\n"),
        (b"tr", "lexical error: invalid string in json text.\n"),
        (b"nul", "lexical error: invalid string in json text.\n"),
        (b"[x]", "lexical error: invalid char in json text.\n"),
        (b"'a'", "lexical error: invalid char in json text.\n"),
        (
            b"[-]",
            "lexical error: malformed number, a digit is required after the minus sign.\n",
        ),
        (
            b"-",
            "lexical error: malformed number, a digit is required after the minus sign.\n",
        ),
        (
            b"[1.]",
            "lexical error: malformed number, a digit is required after the decimal point.\n",
        ),
        (
            b"1.",
            "lexical error: malformed number, a digit is required after the decimal point.\n",
        ),
        (
            b"[1e]",
            "lexical error: malformed number, a digit is required after the exponent.\n",
        ),
        (
            b"[1e+]",
            "lexical error: malformed number, a digit is required after the exponent.\n",
        ),
        (
            b"\"\\x\"",
            "lexical error: inside a string, '\\' occurs before a character which it may not.\n",
        ),
        (
            b"\"\\",
            "lexical error: inside a string, '\\' occurs before a character which it may not.\n",
        ),
        (
            b"\"\\u12g4\"",
            "lexical error: invalid (non-hex) character occurs after '\\u' inside string.\n",
        ),
        (
            b"\"\\u12",
            "lexical error: invalid (non-hex) character occurs after '\\u' inside string.\n",
        ),
        (
            b"\"a\x01\"",
            "lexical error: invalid character inside string.\n",
        ),
        (
            b"\"a\tb\"",
            "lexical error: invalid character inside string.\n",
        ),
        (
            b"\"\xff\"",
            "lexical error: invalid bytes in UTF8 string.\n",
        ),
        (
            b"\"\x80\"",
            "lexical error: invalid bytes in UTF8 string.\n",
        ),
        (
            b"\"\xc3\"",
            "lexical error: invalid bytes in UTF8 string.\n",
        ),
        (b"\"\xc3", "lexical error: invalid bytes in UTF8 string.\n"),
        (
            b"{\"\xe9\":1}",
            "lexical error: invalid bytes in UTF8 string.\n",
        ),
        (
            b"// c\n{}",
            "lexical error: probable comment found in input text, comments are not enabled.\n",
        ),
        (
            b"[1,/*c*/2]",
            "lexical error: probable comment found in input text, comments are not enabled.\n",
        ),
    ];
    for (body, want) in cases {
        let (_, out) = run(body);
        assert!(out.reqbody_error, "{body:?}");
        assert_eq!(msg(&out), format!("JSON parsing error: {want}"), "{body:?}");
        assert_eq!(out.error_detail, *want, "{body:?}");
    }
}

#[test]
fn empty_body_is_not_an_error() {
    let (got, out) = run(b"");
    assert!(got.is_empty());
    assert!(!out.reqbody_error);
}

#[test]
fn arguments_before_an_error_stay() {
    let (got, out) = run(br#"{"a":1,"b":[true,x]}"#);
    assert_eq!(got, pairs(&[("json.a", "1"), ("json.b.array_0", "true")]));
    assert_eq!(
        msg(&out),
        "JSON parsing error: lexical error: invalid char in json text.\n"
    );
}

#[test]
fn depth_limit() {
    let (got, out) = run_with(b"[[[1]]]", 3, None);
    assert!(!out.reqbody_error);
    assert_eq!(got, pairs(&[("json.array_0.array_0.array_0", "1")]));
    let (got, out) = run_with(b"[[[[1]]]]", 3, None);
    assert!(got.is_empty());
    assert_eq!(
        msg(&out),
        "JSON parsing error: parse error: client cancelled parse via callback return value\n. Parsing depth limit exceeded"
    );
    // objects count alike
    let (_, out) = run_with(br#"{"a":{"b":{"c":{}}}}"#, 3, None);
    assert!(out.reqbody_error);
    let (_, out) = run_with(br#"{"a":{"b":{"c":1}}}"#, 3, None);
    assert!(!out.reqbody_error);
    // siblings do not add up
    let (_, out) = run_with(b"[[1],[2],[3]]", 2, None);
    assert!(!out.reqbody_error);
}

#[test]
fn arguments_limit_cancels_parsing() {
    let (got, out) = run_with(b"[1,2,3]", 100, Some(2));
    assert_eq!(got.len(), 2);
    assert_eq!(
        msg(&out),
        "JSON parsing error: parse error: client cancelled parse via callback return value\n"
    );
    assert_eq!(out.args_skipped, 1);
    let (got, out) = run_with(b"[1,2]", 100, Some(2));
    assert_eq!(got.len(), 2);
    assert!(!out.reqbody_error);
}

#[test]
fn scratch_reuse() {
    let mut sc = Scratch::default();
    for body in [
        &br#"{"a":[1,{"b":2}]}"#[..],
        b"[[[",
        br#"{"x":"\u0041"}"#,
        b"{\"k\":1",
    ] {
        for _ in 0..2 {
            let mut fresh = Rec::default();
            let mut fo = BodyResult::default();
            parse(
                body,
                100,
                &mut ArgLimit::new(None),
                &mut Scratch::default(),
                &mut fresh,
                &mut fo,
            );
            let mut reused = Rec::default();
            let mut ro = BodyResult::default();
            parse(
                body,
                100,
                &mut ArgLimit::new(None),
                &mut sc,
                &mut reused,
                &mut ro,
            );
            assert_eq!(fresh.args, reused.args);
            assert_eq!(fo, ro);
        }
    }
}

/// A random JSON tree, its text, and the arguments v3 derives from it
/// (computed by a straightforward recursive model of `json.cc`).
#[derive(Debug)]
enum J {
    Num(i64),
    Str(String),
    Bool(bool),
    Null,
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

fn gen(rng: &mut XorShift, depth: usize) -> J {
    let k = if depth > 5 {
        rng.below(4)
    } else {
        rng.below(6)
    };
    match k {
        0 => J::Num(rng.next_u64() as i64 % 1000),
        1 => J::Str(["", "a", "x y", "é", "q\"", "\\", "\n"][rng.below(7)].to_string()),
        2 => J::Bool(rng.below(2) == 0),
        3 => J::Null,
        4 => J::Arr((0..rng.below(4)).map(|_| gen(rng, depth + 1)).collect()),
        _ => J::Obj(
            (0..rng.below(4))
                .map(|i| {
                    (
                        ["k", "", "a.b", "ü"][(i + rng.below(4)) % 4].to_string(),
                        gen(rng, depth + 1),
                    )
                })
                .collect(),
        ),
    }
}

fn text(j: &J, out: &mut String) {
    fn s(v: &str, out: &mut String) {
        out.push('"');
        for c in v.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    match j {
        J::Num(n) => out.push_str(&n.to_string()),
        J::Str(v) => s(v, out),
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Null => out.push_str("null"),
        J::Arr(v) => {
            out.push('[');
            for (i, e) in v.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                text(e, out);
            }
            out.push(']');
        }
        J::Obj(v) => {
            out.push('{');
            for (i, (k, e)) in v.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                s(k, out);
                out.push(':');
                text(e, out);
            }
            out.push('}');
        }
    }
}

/// `prefix` is the rendered path of the enclosing containers; `name` the
/// name this node gets (as `getCurrentKey()` would give it).
fn model(j: &J, prefix: &str, name: &str, out: &mut Vec<(String, String)>) {
    match j {
        J::Num(n) => out.push((format!("{prefix}{name}"), n.to_string())),
        J::Str(v) => out.push((format!("{prefix}{name}"), v.clone())),
        J::Bool(b) => out.push((format!("{prefix}{name}"), b.to_string())),
        J::Null => out.push((format!("{prefix}{name}"), String::new())),
        J::Arr(v) => {
            for (i, e) in v.iter().enumerate() {
                model(e, &format!("{prefix}{name}.array_{i}"), "", out);
            }
        }
        J::Obj(v) => {
            for (k, e) in v {
                let k = if k.is_empty() { "empty-key" } else { k };
                model(e, &format!("{prefix}{name}."), k, out);
            }
        }
    }
}

#[test]
fn random_trees_match_the_model() {
    let mut rng = XorShift::from_state(0xdead_beef);
    let mut sc = Scratch::default();
    for _ in 0..3000 {
        let j = gen(&mut rng, 0);
        let mut t = String::new();
        text(&j, &mut t);
        let mut want = Vec::new();
        model(&j, "", "json", &mut want);
        let mut rec = Rec::default();
        let mut out = BodyResult::default();
        parse(
            t.as_bytes(),
            10_000,
            &mut ArgLimit::new(None),
            &mut sc,
            &mut rec,
            &mut out,
        );
        assert!(!out.reqbody_error, "{t}: {}", msg(&out));
        assert_eq!(rec.pairs(), want, "{t}");
    }
}

#[test]
fn random_inputs_do_not_panic() {
    let mut rng = XorShift::from_state(7);
    let alphabet: &[&[u8]] = &[
        b"{", b"}", b"[", b"]", b":", b",", b"\"", b"\"k\"", b"1", b"-", b".", b"e", b"true",
        b"nul", b"\\", b"\\u", b"d800", b" ", b"\n", b"\xc3", b"\xa9", b"/",
    ];
    let mut sc = Scratch::default();
    for i in 0..20_000 {
        let body = rng.bytes_from(alphabet, 48);
        let mut rec = Rec::default();
        let mut out = BodyResult::default();
        let depth = if i % 2 == 0 { 3 } else { 10_000 };
        parse(
            &body,
            depth,
            &mut ArgLimit::new(Some(5)),
            &mut sc,
            &mut rec,
            &mut out,
        );
        assert!(rec.args.len() <= 5);
        if out.reqbody_error {
            assert!(msg(&out).starts_with("JSON parsing error: "));
        }
    }
}

#[test]
fn deep_nesting_is_bounded_and_fast() {
    // 10 MB of `[`: the depth limit stops it at once.
    let body = vec![b'['; 10 * 1024 * 1024];
    let start = Instant::now();
    let (_, out) = run(&body);
    assert!(out.reqbody_error);
    assert!(msg(&out).ends_with(". Parsing depth limit exceeded"));
    assert!(start.elapsed() < Duration::from_secs(120));

    // Without a practical limit the parser is iterative: a million levels,
    // opened and closed, neither overflow the stack nor take long.
    let n = 1_000_000;
    let mut body = vec![b'['; n];
    body.push(b'1');
    body.resize(body.len() + n, b']');
    let start = Instant::now();
    let mut count = 0usize;
    struct Count<'a>(&'a mut usize);
    impl BodySink for Count<'_> {
        fn arg(&mut self, _: ArgSource, name: &[u8], _: &[u8]) {
            *self.0 += 1;
            assert!(name.ends_with(b".array_0"));
        }
    }
    let mut out = BodyResult::default();
    parse(
        &body,
        u64::MAX,
        &mut ArgLimit::new(None),
        &mut Scratch::default(),
        &mut Count(&mut count),
        &mut out,
    );
    assert!(!out.reqbody_error, "{}", msg(&out));
    assert_eq!(count, 1);
    assert!(start.elapsed() < Duration::from_secs(120));

    // Wide: 10 MB of array elements.
    let mut body = b"[".to_vec();
    body.extend_from_slice(&b"1,".repeat(5 * 1024 * 1024));
    body.extend_from_slice(b"1]");
    let start = Instant::now();
    let (got, out) = run_with(&body, 10_000, Some(1000));
    assert_eq!(got.len(), 1000);
    assert!(out.reqbody_error, "the arguments limit cancels");
    let mut out = BodyResult::default();
    struct Nop;
    impl BodySink for Nop {
        fn arg(&mut self, _: ArgSource, _: &[u8], _: &[u8]) {}
    }
    parse(
        &body,
        10_000,
        &mut ArgLimit::new(None),
        &mut Scratch::default(),
        &mut Nop,
        &mut out,
    );
    assert!(!out.reqbody_error);
    assert!(start.elapsed() < Duration::from_secs(120));
}
