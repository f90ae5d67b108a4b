use super::*;
use crate::body::testutil::Rec;
use std::time::{Duration, Instant};
use waf_test_support::XorShift;

const CT: &str = "multipart/form-data; boundary=x";

fn run_cfg(ct: &str, body: &[u8], cfg: MultipartConfig) -> (Rec, BodyResult, ArgLimit) {
    let mut rec = Rec::default();
    let mut out = BodyResult::default();
    let mut args = ArgLimit::new(None);
    let mut sc = Scratch::default();
    parse(
        body,
        ct.as_bytes(),
        &cfg,
        &mut args,
        &mut sc,
        &mut rec,
        &mut out,
    );
    (rec, out, args)
}

fn run(ct: &str, body: &[u8]) -> (Rec, BodyResult) {
    let (r, o, _) = run_cfg(ct, body, MultipartConfig::default());
    (r, o)
}

/// The text with every `\n` turned into `\r\n`.
fn crlf(s: &str) -> Vec<u8> {
    s.replace('\n', "\r\n").into_bytes()
}

/// Flags from short names; everything not named is expected to be unset.
fn flags(names: &[&str]) -> MultipartFlags {
    let mut f = MultipartFlags::default();
    for n in names {
        match *n {
            "error" => f.error = true,
            "quoted" => f.boundary_quoted = true,
            "whitespace" => f.boundary_whitespace = true,
            "before" => f.data_before = true,
            "after" => f.data_after = true,
            "folding" => f.header_folding = true,
            "lf" => f.lf_line = true,
            "crlf" => f.crlf_line = true,
            "semicolon" => f.missing_semicolon = true,
            "quoting" => f.invalid_quoting = true,
            "part" => f.invalid_part = true,
            "badfolding" => f.invalid_header_folding = true,
            "filelimit" => f.file_limit_exceeded = true,
            "unmatched1" => f.unmatched_boundary = 1,
            "unmatched2" => f.unmatched_boundary = 2,
            other => panic!("unknown flag {other}"),
        }
    }
    f
}

fn msg(out: &BodyResult) -> String {
    out.reqbody_error_msg_lossy().into_owned()
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

fn headers(v: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs(v)
}

// ---------------------------------------------------------------------------
// Well-formed bodies

/// v3 regression test `misc/00-multipart-parser.t` "multipart parser
/// (normal)", with CRLF line endings.
#[test]
fn normal_body() {
    let body = crlf(
        "--0000\n\
         Content-Disposition: form-data; name=\"name\"\n\
         \n\
         Brian Rectanus\n\
         --0000\n\
         Content-Disposition: form-data; name=\"email\"\n\
         \n\
         brian.rectanus@breach.com\n\
         --0000\n\
         Content-Disposition: form-data; name=\"image\"; filename=\"image.jpg\"\n\
         Content-Type: image/jpeg\n\
         \n\
         BINARYDATA\n\
         --0000--\n",
    );
    let (rec, out) = run("multipart/form-data; boundary=0000", &body);
    assert!(!out.reqbody_error, "{}", msg(&out));
    let f = out.multipart.unwrap_or_default();
    assert_eq!(f, flags(&["crlf", "unmatched2"]));
    assert!(!f.strict_error());
    assert!(!f.crlf_lf_lines());
    assert_eq!(
        rec.pairs(),
        pairs(&[
            ("name", "Brian Rectanus"),
            ("email", "brian.rectanus@breach.com")
        ])
    );
    assert!(rec.args.iter().all(|a| a.0 == ArgSource::Multipart));
    assert_eq!(
        rec.files,
        vec![(
            "image".into(),
            "image.jpg".into(),
            10,
            b"BINARYDATA".to_vec()
        )]
    );
    assert_eq!(out.files_combined_size, Some(10));
    assert_eq!(
        rec.part_headers,
        headers(&[
            ("name", "Content-Disposition: form-data; name=\"name\""),
            ("email", "Content-Disposition: form-data; name=\"email\""),
            (
                "image",
                "Content-Disposition: form-data; name=\"image\"; filename=\"image.jpg\""
            ),
            ("image", "Content-Type: image/jpeg"),
        ])
    );
    assert_eq!(rec.names, vec!["name", "email", "image"]);
    assert_eq!(rec.filenames, vec!["image.jpg"]);
}

/// v3 regression "multipart parser (final CRLF)": no line ending after the
/// final boundary is fine.
#[test]
fn final_boundary_without_line_ending() {
    let mut body = crlf("--x\nContent-Disposition: form-data; name=\"a\"\n\nb\n");
    body.extend_from_slice(b"--x--");
    let (rec, out) = run(CT, &body);
    assert!(!out.reqbody_error, "{}", msg(&out));
    assert_eq!(rec.pairs(), pairs(&[("a", "b")]));
    assert_eq!(out.multipart, Some(flags(&["crlf"])));
}

#[test]
fn empty_values_and_files() {
    let body = crlf(
        "--x\n\
         Content-Disposition: form-data; name=\"a\"\n\
         \n\
         \n\
         --x\n\
         Content-Disposition: form-data; name=\"f\"; filename=\"\"\n\
         Content-Type: application/octet-stream\n\
         \n\
         \n\
         --x\n\
         Content-Disposition: form-data; name=\"g\"; filename=\"e.txt\"\n\
         \n\
         \n\
         --x--\n",
    );
    let (rec, out) = run(CT, &body);
    assert!(!out.reqbody_error, "{}", msg(&out));
    // An empty filename makes an ordinary argument (v3: type FORMDATA).
    assert_eq!(rec.pairs(), pairs(&[("a", ""), ("f", "")]));
    assert_eq!(rec.files, vec![("g".into(), "e.txt".into(), 0, vec![])]);
    assert_eq!(out.files_combined_size, Some(0));
}

#[test]
fn multi_line_values() {
    let body = crlf(
        "--x\n\
         Content-Disposition: form-data; name=\"t\"\n\
         \n\
         line1\n\
         \n\
         line3\n\
         --x\n\
         Content-Disposition: form-data; name=\"f\"; filename=\"a.txt\"\n\
         \n\
         l1\n\
         l2\n\
         --x--\n",
    );
    let (rec, out) = run(CT, &body);
    assert!(!out.reqbody_error);
    assert_eq!(rec.pairs(), pairs(&[("t", "line1\r\n\r\nline3")]));
    assert_eq!(rec.files[0].2, 6);
    assert_eq!(rec.files[0].3, b"l1\r\nl2");

    // v3's exact bytes: line breaks inside form values vanish, files keep them.
    let cfg = MultipartConfig {
        line_breaks: MultipartLineBreaks::DropLikeV3,
        upload_file_limit: None,
    };
    let (rec, out, _) = run_cfg(CT, &body, cfg);
    assert!(!out.reqbody_error);
    assert_eq!(rec.pairs(), pairs(&[("t", "line1line3")]));
    assert_eq!(rec.files[0].2, 6);
}

#[test]
fn values_are_bytes() {
    let mut body = crlf("--x\nContent-Disposition: form-data; name=\"n\"\n\n");
    body.extend_from_slice(b"\xff\x00\xfe\r\n--x--\r\n");
    struct Raw(Vec<u8>);
    impl BodySink for Raw {
        fn arg(&mut self, _: ArgSource, _: &[u8], v: &[u8]) {
            self.0 = v.to_vec();
        }
    }
    let mut raw = Raw(Vec::new());
    let mut out = BodyResult::default();
    parse(
        &body,
        CT.as_bytes(),
        &MultipartConfig::default(),
        &mut ArgLimit::new(None),
        &mut Scratch::default(),
        &mut raw,
        &mut out,
    );
    assert!(!out.reqbody_error);
    assert_eq!(raw.0, b"\xff\x00\xfe");
}

#[test]
fn line_exactly_at_buffer_size() {
    // A data line whose `\r` falls on the buffer's last byte.
    let long = "a".repeat(BUF_SIZE - 1);
    let body = crlf(&format!(
        "--x\nContent-Disposition: form-data; name=\"a\"\n\n{long}\n--x--\n"
    ));
    let (rec, out) = run(CT, &body);
    assert!(!out.reqbody_error, "{}", msg(&out));
    assert_eq!(rec.args[0].2.len(), BUF_SIZE - 1);
    // And a data line much longer than the buffer, containing `--x` past
    // its first piece (not at a line start: no flag).
    let long = format!("{}--x{}", "b".repeat(5000), "c".repeat(5000));
    let body = crlf(&format!(
        "--x\nContent-Disposition: form-data; name=\"a\"\n\n{long}\n--x--\n"
    ));
    let (rec, out) = run(CT, &body);
    assert!(!out.reqbody_error, "{}", msg(&out));
    assert_eq!(rec.args[0].2, long);
    assert_eq!(out.multipart, Some(flags(&["crlf", "unmatched2"])));
}

#[test]
fn quoted_name_escapes() {
    let cases: &[(&str, &str, &[&str])] = &[
        (r#"name="a\"b""#, "a\"b", &[]),
        (r#"name="a\\b""#, "a\\b", &[]),
        (r#"name="a\xb""#, "a\\xb", &[]),
        (r#"name="a'b""#, "a'b", &[]),
        (r#"name='ab'"#, "ab", &["quoting"]),
        (r#"name=a'b"#, "a'b", &["quoting"]),
        (r#"name=plain"#, "plain", &[]),
        (r#"name = "sp""#, "sp", &[]),
        ("name=\"tab\"\t", "tab", &[]),
    ];
    for (param, name, extra) in cases {
        let body = crlf(&format!(
            "--x\nContent-Disposition: form-data; {param}\n\nv\n--x--\n"
        ));
        let (rec, out) = run(CT, &body);
        assert!(!out.reqbody_error, "{param}: {}", msg(&out));
        assert_eq!(rec.pairs(), pairs(&[(name, "v")]), "{param}");
        let mut want = vec!["crlf", "unmatched2"];
        want.extend_from_slice(extra);
        assert_eq!(out.multipart, Some(flags(&want)), "{param}");
    }
}

#[test]
fn filename_star() {
    let ok = crlf(
        "--x\nContent-Disposition: form-data; name=\"f\"; filename=\"a b.txt\"; filename*=UTF-8''a%20b.txt\n\nDATA\n--x--\n",
    );
    let (rec, out) = run(CT, &ok);
    assert!(!out.reqbody_error, "{}", msg(&out));
    assert_eq!(rec.files[0].1, "a b.txt");
    // (C-D parameters, v3 return code)
    let bad: &[(&str, i32)] = &[
        (r#"name="f"; filename*=UTF-8''a.txt"#, -21),
        (r#"name="f"; filename="a"; filename*=''a.txt"#, -16),
        (r#"name="f"; filename="a"; filename*=UTF-8"#, -16),
        (r#"name="f"; filename="a"; filename*=UTF-8'en"#, -17),
        (r#"name="f"; filename="a"; filename*=UTF-8''a%2"#, -18),
        (r#"name="f"; filename="a"; filename*=UTF-8''a%zz"#, -18),
        (r#"name="f"; filename="a"; filename*=UTF-8''a b"#, -19),
        (
            r#"name="f"; filename="a"; filename*=UTF-8''a; filename*=UTF-8''b"#,
            -20,
        ),
    ];
    for (params, rc) in bad {
        // The final boundary ends the body, so the header error is the last
        // one and survives (the part, named before the error, is reported
        // with an empty value and flagged as invalid).
        let mut body = crlf(&format!(
            "--x\nContent-Disposition: form-data; {params}\n\n"
        ));
        body.extend_from_slice(b"--x--");
        let (_, out) = run(CT, &body);
        assert_eq!(
            msg(&out),
            format!("Multipart parsing error: Multipart: Invalid Content-Disposition header ({rc}): form-data; {params}"),
            "{params}"
        );
        assert!(out.multipart.unwrap_or_default().invalid_part);
    }
}

#[test]
fn content_disposition_codes() {
    let cases: &[(&str, Result<(), i32>)] = &[
        ("form-data", Ok(())),
        ("form-data  ", Ok(())),
        ("form-data; name=a", Ok(())),
        ("form-data; name=a;", Ok(())),
        ("attachment; name=a", Err(-1)),
        ("Form-Data; name=a", Err(-1)),
        ("form-data x", Err(-2)),
        ("form-data; ", Err(-3)),
        ("form-data; name=a; ", Err(-3)),
        ("form-data; name", Err(-4)),
        ("form-data; name ", Err(-5)),
        ("form-data; name x", Err(-13)),
        ("form-data; name= ", Err(-6)),
        ("form-data; name=\"", Err(-7)),
        ("form-data; name=\"a\\", Err(-8)),
        ("form-data; foo=a", Err(-11)),
        ("form-data; name=\"a\"x", Err(-12)),
        ("form-data; name=a b", Err(-12)),
        ("form-data; name=a; name=b", Err(-14)),
        ("form-data; name=a; filename=b; filename=c", Err(-15)),
        // unterminated quote: ends at the end of the header (deviation)
        ("form-data; name=\"abc", Ok(())),
    ];
    for (v, want) in cases {
        let mut part = Part::new(0);
        let mut f = MultipartFlags::default();
        let mut names = Vec::new();
        let got = parse_content_disposition(
            v.as_bytes(),
            &mut names,
            &mut part,
            &mut f,
            &mut Rec::default(),
        );
        assert_eq!(got, *want, "{v}");
    }
    // -12 after a closing quote also flags invalid quoting
    let mut f = MultipartFlags::default();
    let _ = parse_content_disposition(
        b"form-data; name=\"a\"x",
        &mut Vec::new(),
        &mut Part::new(0),
        &mut f,
        &mut Rec::default(),
    );
    assert!(f.invalid_quoting);
}

// ---------------------------------------------------------------------------
// Content-Type (Multipart::init)

#[test]
fn content_type_table() {
    // (Content-Type, expected v3 error or "" for none, flags set by init)
    let long = format!("multipart/form-data; boundary={}", "a".repeat(1000));
    let cases: &[(&str, &str, &[&str])] = &[
        ("multipart/form-data; boundary=x", "", &[]),
        ("Multipart/Form-Data; boundary=x", "", &[]),
        ("multipart/form-data;boundary=x", "", &[]),
        ("multipart/form-data boundary=x", "", &["semicolon"]),
        ("multipart/form-data; boundary =x", "", &["whitespace"]),
        ("multipart/form-data; boundary= x", "", &["whitespace"]),
        ("multipart/form-data; boundary=\"x\"", "", &["quoted"]),
        ("multipart/form-data; boundary=x; charset=utf-8", "", &[]),
        ("", "Multipart: Content-Type header not available.", &[]),
        (&long, "Multipart: Invalid boundary in C-T (length).", &[]),
        (
            "multipart/mixed; boundary=x",
            "Multipart: Invalid MIME type.",
            &[],
        ),
        ("text/plain", "Multipart: Invalid MIME type.", &[]),
        (
            "multipart/form-data; boundary=x; boundary=y",
            "Multipart: Multiple boundary parameters in C-T.",
            &[],
        ),
        (
            "multipart/form-data; BOUNDARY=x",
            "Multipart: Invalid boundary in C-T (case sensitivity).",
            &[],
        ),
        (
            "multipart/form-data",
            "Multipart: Boundary not found in C-T.",
            &[],
        ),
        (
            "multipart/form-data; charset=utf-8; boundary=x",
            "Multipart: Invalid boundary in C-T (malformed).",
            &[],
        ),
        (
            "multipart/form-data;; boundary=x",
            "Multipart: Invalid boundary in C-T (malformed).",
            &[],
        ),
        (
            "multipart/form-data; boundary",
            "Multipart: Invalid boundary in C-T (malformed).",
            &[],
        ),
        (
            "multipart/form-data; boundaryx=y",
            "Multipart: Invalid boundary in C-T (parameter name).",
            &[],
        ),
        (
            "multipart/form-data; boundary=\"x",
            "Multipart: Invalid boundary in C-T (quote).",
            &[],
        ),
        (
            "multipart/form-data; boundary=x\"",
            "Multipart: Invalid boundary in C-T (quote).",
            &[],
        ),
        (
            "multipart/form-data; boundary=\"x\"; charset=utf-8",
            "Multipart: Invalid boundary in C-T (quote).",
            &[],
        ),
        (
            "multipart/form-data; boundary=x{y",
            "Multipart: Invalid boundary in C-T (characters).",
            &[],
        ),
        (
            "multipart/form-data; boundary=x ",
            "Multipart: Invalid boundary in C-T (characters).",
            &[],
        ),
        (
            "multipart/form-data; boundary=;x",
            "Multipart: Invalid boundary in C-T (empty).",
            &[],
        ),
    ];
    for (ct, err, extra) in cases {
        let (rec, out) = run(ct, b"");
        assert!(rec.args.is_empty());
        let f = out.multipart.unwrap_or_default();
        if err.is_empty() {
            assert!(!out.reqbody_error, "{ct}: {}", msg(&out));
            assert_eq!(f, flags(extra), "{ct}");
        } else {
            assert_eq!(msg(&out), format!("Multipart parsing error: {err}"), "{ct}");
            assert!(f.error && f.strict_error(), "{ct}");
        }
    }
}

#[test]
fn boundary_word_in_boundary_value() {
    // v3 counts "boundary" only when an `=` follows somewhere: a boundary
    // named "boundary" is fine...
    let body = crlf("--boundary\nContent-Disposition: form-data; name=\"a\"\n\nb\n--boundary--\n");
    let (rec, out) = run("multipart/form-data; boundary=boundary", &body);
    assert!(!out.reqbody_error, "{}", msg(&out));
    assert_eq!(rec.pairs(), pairs(&[("a", "b")]));
    // ...but "boundary=" inside the value is a second parameter.
    let (_, out) = run("multipart/form-data; boundary=a_boundary=b", b"");
    assert_eq!(
        msg(&out),
        "Multipart parsing error: Multipart: Multiple boundary parameters in C-T."
    );
}

#[test]
fn empty_boundary_is_silently_ignored() {
    // v3 returns from init without message or flag: the body is not parsed.
    for ct in [
        "multipart/form-data; boundary=\"\"",
        "multipart/form-data; boundary=",
    ] {
        let body = crlf("--\nContent-Disposition: form-data; name=\"a\"\n\nb\n----\n");
        let (rec, out) = run(ct, &body);
        assert!(!out.reqbody_error, "{ct}");
        assert!(rec.args.is_empty(), "{ct}");
        assert_eq!(out.multipart, Some(MultipartFlags::default()), "{ct}");
    }
}

#[test]
fn boundary_with_tolerated_parameter() {
    let body = crlf("--abc\nContent-Disposition: form-data; name=\"a\"\n\nb\n--abc--\n");
    let (rec, out) = run("multipart/form-data; boundary=abc; charset=UTF-8", &body);
    assert!(!out.reqbody_error, "{}", msg(&out));
    assert_eq!(rec.pairs(), pairs(&[("a", "b")]));
}

#[test]
fn quoted_boundary() {
    let body = crlf("--a b\nContent-Disposition: form-data; name=\"a\"\n\nb\n--a b--\n");
    let (rec, out) = run("multipart/form-data; boundary=\"a b\"", &body);
    assert!(!out.reqbody_error, "{}", msg(&out));
    assert_eq!(rec.pairs(), pairs(&[("a", "b")]));
    let f = out.multipart.unwrap_or_default();
    assert!(f.boundary_quoted && f.strict_error());
    // A body using the quotes literally is rejected (fatal, reported as
    // "final boundary missing" like v3).
    let body = crlf("--\"a b\"\nContent-Disposition: form-data; name=\"a\"\n\nb\n--\"a b\"--\n");
    let (rec, out) = run("multipart/form-data; boundary=\"a b\"", &body);
    assert!(rec.args.is_empty());
    assert_eq!(
        msg(&out),
        "Multipart parsing error: Multipart: No boundaries found in payload."
    );
    assert_eq!(out.error_detail, "Multipart: Invalid boundary (quotes).");
}

// ---------------------------------------------------------------------------
// Every flag, triggered

#[test]
fn lf_line_endings() {
    let body = b"--x\nContent-Disposition: form-data; name=\"a\"\n\nb\n--x--\n";
    let (rec, out) = run(CT, body);
    assert!(!out.reqbody_error);
    assert_eq!(rec.pairs(), pairs(&[("a", "b")]));
    let f = out.multipart.unwrap_or_default();
    assert_eq!(f, flags(&["lf", "unmatched2"]));
    assert!(f.strict_error());
    assert!(!f.crlf_lf_lines());
}

#[test]
fn mixed_line_endings() {
    let body = b"--x\r\nContent-Disposition: form-data; name=\"a\"\n\r\nb\r\n--x--\r\n";
    let (_, out) = run(CT, body);
    let f = out.multipart.unwrap_or_default();
    assert_eq!(f, flags(&["lf", "crlf", "unmatched2"]));
    assert!(f.crlf_lf_lines() && f.strict_error());
}

#[test]
fn lf_before_final_boundary_without_line_ending() {
    // The line before a final boundary that ends the body ended with a bare
    // LF: v3 sets MULTIPART_LF_LINE in multipart_complete.
    let body = b"--x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nb\n--x--";
    let (rec, out) = run(CT, body);
    assert!(!out.reqbody_error);
    assert_eq!(rec.pairs(), pairs(&[("a", "b")]));
    assert_eq!(out.multipart, Some(flags(&["crlf", "lf"])));
}

#[test]
fn data_before_first_boundary() {
    let body = crlf("preamble\n--x\nContent-Disposition: form-data; name=\"a\"\n\nb\n--x--\n");
    let (rec, out) = run(CT, &body);
    assert!(!out.reqbody_error);
    assert_eq!(rec.pairs(), pairs(&[("a", "b")]));
    let f = out.multipart.unwrap_or_default();
    assert_eq!(f, flags(&["crlf", "before", "unmatched2"]));
    assert!(f.strict_error());
}

#[test]
fn data_after_last_boundary() {
    let body = crlf("--x\nContent-Disposition: form-data; name=\"a\"\n\nb\n--x--\nepilogue");
    let (rec, out) = run(CT, &body);
    assert!(!out.reqbody_error);
    assert_eq!(rec.pairs(), pairs(&[("a", "b")]));
    assert_eq!(out.multipart, Some(flags(&["crlf", "after", "unmatched2"])));
    // Stefan Esser's CRS evasion (SpiderLabs/owasp-modsecurity-crs#76): a
    // final boundary first hides the real parts; v3 flags DATA_AFTER.
    let body = crlf("--x--\n--x\nContent-Disposition: form-data; name=\"a\"\n\nb\n--x--\n");
    let (rec, out) = run(CT, &body);
    assert!(rec.args.is_empty());
    let f = out.multipart.unwrap_or_default();
    assert!(f.data_after && f.strict_error());
}

#[test]
fn header_folding() {
    let body = crlf(
        "--x\nContent-Disposition: form-data;\n name=\"a\"\nContent-Type: text/plain;\n\tcharset=utf-8\n\nb\n--x--\n",
    );
    let (rec, out) = run(CT, &body);
    assert!(!out.reqbody_error, "{}", msg(&out));
    assert_eq!(rec.pairs(), pairs(&[("a", "b")]));
    assert_eq!(
        out.multipart,
        Some(flags(&["crlf", "folding", "unmatched2"]))
    );
    assert_eq!(
        rec.part_headers,
        headers(&[
            ("a", "Content-Disposition: form-data; name=\"a\""),
            ("a", "Content-Type: text/plain; charset=utf-8"),
        ])
    );
}

#[test]
fn invalid_header_folding() {
    // A vertical tab starts the continuation line.
    let body = crlf("--x\nContent-Disposition: form-data;\n\x0bname=\"a\"\n\nb\n--x--\n");
    let (rec, out) = run(CT, &body);
    assert!(!out.reqbody_error, "{}", msg(&out));
    assert_eq!(rec.pairs(), pairs(&[("a", "b")]));
    assert_eq!(
        out.multipart,
        Some(flags(&["crlf", "folding", "badfolding", "unmatched2"]))
    );
    // A space then a form feed in the folding prefix counts too.
    let body = crlf("--x\nContent-Disposition: form-data;\n \x0cname=\"a\"\n\nb\n--x--\n");
    let (_, out) = run(CT, &body);
    assert_eq!(
        out.multipart,
        Some(flags(&["crlf", "folding", "badfolding", "unmatched2"]))
    );
}

#[test]
fn folding_without_previous_header() {
    let body = crlf("--x\n folded\nContent-Disposition: form-data; name=\"a\"\n\nb\n--x--\n");
    let (rec, out) = run(CT, &body);
    assert_eq!(
        msg(&out),
        "Multipart parsing error: Multipart: Invalid part header (folding error)."
    );
    // parsing went on
    assert_eq!(rec.pairs(), pairs(&[("a", "b")]));
    let f = out.multipart.unwrap_or_default();
    assert!(f.header_folding && f.strict_error());
}

#[test]
fn folded_header_too_long() {
    let chunk = format!(" {}\n", "a".repeat(1000));
    let body = crlf(&format!(
        "--x\nContent-Disposition: form-data; name=\"a\"\nX-Long: v\n{}\nb\n--x--\n",
        chunk.repeat(5)
    ));
    let (rec, out) = run(CT, &body);
    assert_eq!(
        msg(&out),
        "Multipart parsing error: Multipart: Part header too long."
    );
    assert_eq!(rec.pairs(), pairs(&[("a", "b")]));
}

#[test]
fn missing_semicolon() {
    let body = crlf("--x\nContent-Disposition: form-data; name=\"a\"\n\nb\n--x--\n");
    let (rec, out) = run("multipart/form-data boundary=x", &body);
    assert_eq!(rec.pairs(), pairs(&[("a", "b")]));
    let f = out.multipart.unwrap_or_default();
    assert_eq!(f, flags(&["crlf", "semicolon", "unmatched2"]));
    assert!(f.strict_error());
}

#[test]
fn boundary_whitespace() {
    let body = crlf("--x\nContent-Disposition: form-data; name=\"a\"\n\nb\n--x--\n");
    let (rec, out) = run("multipart/form-data; boundary =x", &body);
    assert_eq!(rec.pairs(), pairs(&[("a", "b")]));
    assert_eq!(
        out.multipart,
        Some(flags(&["crlf", "whitespace", "unmatched2"]))
    );
}

#[test]
fn invalid_quoting() {
    let body = crlf("--x\nContent-Disposition: form-data; name='a'\n\nb\n--x--\n");
    let (rec, out) = run(CT, &body);
    assert_eq!(rec.pairs(), pairs(&[("a", "b")]));
    let f = out.multipart.unwrap_or_default();
    assert_eq!(f, flags(&["crlf", "quoting", "unmatched2"]));
    assert!(f.strict_error());
}

#[test]
fn invalid_part_boundary_where_data_should_begin() {
    // The blank line ending the headers is directly followed by the final
    // boundary (no line of data): not a boundary for v3.
    let body = crlf("--x\nContent-Disposition: form-data; name=\"a\"\n\n--x--\n");
    let (rec, out) = run(CT, &body);
    assert!(rec.args.is_empty());
    assert_eq!(
        msg(&out),
        "Multipart parsing error: Multipart: Final boundary missing."
    );
    let f = out.multipart.unwrap_or_default();
    assert!(f.invalid_part && f.strict_error());
    // The same at the very end of the body without line ending: accepted,
    // but flagged.
    let mut body = crlf("--x\nContent-Disposition: form-data; name=\"a\"\n\n");
    body.extend_from_slice(b"--x--");
    let (rec, out) = run(CT, &body);
    assert!(!out.reqbody_error, "{}", msg(&out));
    assert_eq!(rec.pairs(), pairs(&[("a", "")]));
    assert_eq!(out.multipart, Some(flags(&["crlf", "part"])));
}

#[test]
fn invalid_part_missing_name() {
    let body = crlf("--x\nContent-Disposition: form-data\n\nb\n--x--\n");
    let (rec, out) = run(CT, &body);
    assert!(rec.args.is_empty());
    // "missing name field", then "b" and the boundary are read as headers;
    // the last error is from completion.
    assert_eq!(
        msg(&out),
        "Multipart parsing error: Multipart: Final boundary missing."
    );
    assert!(out.multipart.unwrap_or_default().invalid_part);
}

#[test]
fn file_limit_exceeded() {
    let body = crlf(
        "--x\n\
         Content-Disposition: form-data; name=\"f1\"; filename=\"1.txt\"\n\
         \n\
         one\n\
         --x\n\
         Content-Disposition: form-data; name=\"f2\"; filename=\"2.txt\"\n\
         \n\
         two\n\
         --x--\n",
    );
    // Default: files are not stored, v3 never checks the limit.
    let (rec, out) = run(CT, &body);
    assert_eq!(rec.files.len(), 2);
    assert!(!out.multipart.unwrap_or_default().file_limit_exceeded);
    let cfg = MultipartConfig {
        line_breaks: MultipartLineBreaks::Keep,
        upload_file_limit: Some(1),
    };
    let (rec, out, _) = run_cfg(CT, &body, cfg);
    assert_eq!(rec.files.len(), 2, "files are still reported");
    assert_eq!(out.files_combined_size, Some(6));
    let f = out.multipart.unwrap_or_default();
    assert_eq!(f, flags(&["crlf", "unmatched2", "filelimit"]));
    assert!(f.strict_error());
    assert_eq!(
        msg(&out),
        "Multipart parsing error: Multipart: Upload file limit exceeded 1. Use SecUploadFileLimit to change the limit."
    );
    // v3 quirk: at the limit, the second data line of the same file trips it.
    let body = crlf(
        "--x\nContent-Disposition: form-data; name=\"f1\"; filename=\"1.txt\"\n\nline1\nline2\n--x--\n",
    );
    let (_, out, _) = run_cfg(CT, &body, cfg);
    assert!(out.multipart.unwrap_or_default().file_limit_exceeded);
    let (_, out, _) = run_cfg(
        CT,
        &body,
        MultipartConfig {
            upload_file_limit: Some(2),
            ..cfg
        },
    );
    assert!(!out.multipart.unwrap_or_default().file_limit_exceeded);
}

#[test]
fn unmatched_boundary() {
    // A line starting with "--" that is not our boundary, in the last part,
    // with the final boundary ending the body: stays 1.
    let mut body = crlf("--x\nContent-Disposition: form-data; name=\"a\"\n\n--not-it\nb\n");
    body.extend_from_slice(b"--x--");
    let (rec, out) = run(CT, &body);
    assert!(!out.reqbody_error, "{}", msg(&out));
    assert_eq!(rec.pairs(), pairs(&[("a", "--not-it\r\nb")]));
    let f = out.multipart.unwrap_or_default();
    assert_eq!(f.unmatched_boundary, 1);
    assert!(
        !f.strict_error(),
        "UNMATCHED_BOUNDARY is not part of STRICT_ERROR"
    );
    // `--x` inside a line
    let mut body = crlf("--x\nContent-Disposition: form-data; name=\"a\"\n\nfoo --x bar\n");
    body.extend_from_slice(b"--x--");
    let (_, out) = run(CT, &body);
    assert_eq!(out.multipart.unwrap_or_default().unmatched_boundary, 1);
    // A later real boundary overwrites it with 2.
    let body = crlf("--x\nContent-Disposition: form-data; name=\"a\"\n\n--not-it\n--x--\n");
    let (_, out) = run(CT, &body);
    assert_eq!(out.multipart.unwrap_or_default().unmatched_boundary, 2);
    // Lines with `-` but no boundary: nothing (issue #1325 is "---" at the
    // start of a line, which is 1 in the last part).
    let mut body = crlf("--x\nContent-Disposition: form-data; name=\"a\"\n\na-b--c\n");
    body.extend_from_slice(b"--x--");
    let (_, out) = run(CT, &body);
    assert_eq!(out.multipart.unwrap_or_default().unmatched_boundary, 0);
}

// ---------------------------------------------------------------------------
// Every flag, not triggered

#[test]
fn clean_body_sets_no_strict_flag() {
    let body = crlf(
        "--x\nContent-Disposition: form-data; name=\"a\"\n\n1\n--x\nContent-Disposition: form-data; name=\"b\"\n\n2\n--x--\n",
    );
    let (rec, out) = run(CT, &body);
    assert!(!out.reqbody_error);
    assert_eq!(rec.pairs(), pairs(&[("a", "1"), ("b", "2")]));
    let f = out.multipart.unwrap_or_default();
    assert_eq!(f, flags(&["crlf", "unmatched2"]));
    assert!(!f.strict_error());
    assert_eq!(out.files_combined_size, None);
}

#[test]
fn empty_body() {
    let (rec, out) = run(CT, b"");
    assert!(!out.reqbody_error);
    assert!(rec.args.is_empty());
    assert_eq!(out.multipart, Some(MultipartFlags::default()));
}

// ---------------------------------------------------------------------------
// Errors

#[test]
fn fatal_errors_become_final_boundary_missing() {
    // (body after the first boundary and a part header, v3's original error)
    let cases: &[(&str, &str)] = &[
        ("--xyz\n", "Multipart: Invalid boundary: --xyz\r\n"),
        ("--x-- \n", "Multipart: Invalid boundary: --x-- \r\n"),
        ("-- x\n", "Multipart: Invalid boundary (whitespace)."),
    ];
    for (line, detail) in cases {
        let body = crlf(&format!(
            "--x\nContent-Disposition: form-data; name=\"a\"\n\nb\n{line}--x--\n"
        ));
        let (rec, out) = run(CT, &body);
        assert!(rec.args.is_empty(), "{line}");
        assert_eq!(
            msg(&out),
            "Multipart parsing error: Multipart: Final boundary missing.",
            "{line}"
        );
        assert_eq!(out.error_detail, *detail, "{line}");
        let f = out.multipart.unwrap_or_default();
        assert!(f.error && f.strict_error(), "{line}");
    }
}

#[test]
fn header_line_too_long() {
    let body = crlf(&format!(
        "--x\nX-Long: {}\nContent-Disposition: form-data; name=\"a\"\n\nb\n--x--\n",
        "a".repeat(BUF_SIZE)
    ));
    let (rec, out) = run(CT, &body);
    assert!(rec.args.is_empty());
    assert_eq!(
        msg(&out),
        "Multipart parsing error: Multipart: Final boundary missing."
    );
    assert_eq!(
        out.error_detail,
        "Multipart: Part header line over 4096 bytes long"
    );
    assert!(out.multipart.unwrap_or_default().strict_error());
}

#[test]
fn no_boundary_in_body() {
    let (rec, out) = run(CT, b"just some text\r\n");
    assert!(rec.args.is_empty());
    assert_eq!(
        msg(&out),
        "Multipart parsing error: Multipart: No boundaries found in payload."
    );
    assert!(out.multipart.unwrap_or_default().data_before);
}

#[test]
fn missing_final_boundary_reports_no_args() {
    let body = crlf("--x\nContent-Disposition: form-data; name=\"a\"\n\nb\n--x\nContent-Disposition: form-data; name=\"c\"\n\nd\n");
    let (rec, out) = run(CT, &body);
    assert!(rec.args.is_empty(), "v3 returns before filling ARGS");
    assert_eq!(
        msg(&out),
        "Multipart parsing error: Multipart: Final boundary missing."
    );
    // The completed first part's headers were reported.
    assert_eq!(
        rec.part_headers,
        headers(&[("a", "Content-Disposition: form-data; name=\"a\"")])
    );
}

#[test]
fn part_header_errors_do_not_stop_parsing() {
    // (bad header line, v3 message)
    let cases: &[(&[u8], &str)] = &[
        (
            b"no colon here\r\n",
            "Multipart: Invalid part header (colon missing): no colon here\r\n",
        ),
        (
            b": no name\r\n",
            "Multipart: Invalid part header (header name missing).",
        ),
        (
            b"Bad Name: v\r\n",
            "Multipart: Invalid part header (contains invalid character).",
        ),
        (
            b"Bad\xe9: v\r\n",
            "Multipart: Invalid part header (contains invalid character).",
        ),
        (b"X-A: \x00\r\n", "Multipart: Nul byte in part headers."),
    ];
    for (line, want) in cases {
        let mut body = b"--x\r\n".to_vec();
        body.extend_from_slice(line);
        body.extend_from_slice(&crlf(
            "Content-Disposition: form-data; name=\"a\"\n\nb\n--x--\n",
        ));
        let (rec, out) = run(CT, &body);
        assert_eq!(
            msg(&out),
            format!("Multipart parsing error: {want}"),
            "{line:?}"
        );
        assert_eq!(rec.pairs(), pairs(&[("a", "b")]), "{line:?}");
        let f = out.multipart.unwrap_or_default();
        assert!(!f.error, "{line:?}: header errors are not m_flag_error");
    }
}

#[test]
fn missing_content_disposition() {
    let body = crlf("--x\nContent-Type: text/plain\n\nb\n--x--\n");
    let (rec, out) = run(CT, &body);
    assert!(rec.args.is_empty());
    // then "b" is a header line without colon, the final boundary is not a
    // boundary (no data read): final boundary missing.
    assert_eq!(
        msg(&out),
        "Multipart parsing error: Multipart: Final boundary missing."
    );
    let mut body = crlf("--x\nContent-Type: text/plain\n\n");
    body.extend_from_slice(b"--x--");
    let (_, out) = run(CT, &body);
    assert_eq!(
        msg(&out),
        "Multipart parsing error: Multipart: Part missing Content-Disposition header."
    );
}

#[test]
fn duplicate_headers_are_ignored_case_insensitively() {
    let body = crlf(
        "--x\nContent-Disposition: form-data; name=\"a\"\ncontent-disposition: form-data; name=\"evil\"\n\nb\n--x--\n",
    );
    let (rec, out) = run(CT, &body);
    assert!(!out.reqbody_error, "{}", msg(&out));
    assert_eq!(rec.pairs(), pairs(&[("a", "b")]));
    // The duplicate is not a MULTIPART_PART_HEADERS line either.
    assert_eq!(rec.part_headers.len(), 1);
    // and the C-D lookup is case-insensitive (922120 test 2 uses
    // "Content-disposition").
    let body = crlf("--x\nCONTENT-DISPOSITION: form-data; name=\"a\"\n\nb\n--x--\n");
    let (rec, _) = run(CT, &body);
    assert_eq!(rec.pairs(), pairs(&[("a", "b")]));
}

#[test]
fn filename_requires_literal_filename_eq() {
    let body =
        crlf("--x\nContent-Disposition: form-data; name=\"a\"; filename = \"f\"\n\nb\n--x--\n");
    let (_, out) = run(CT, &body);
    assert!(out.reqbody_error);
    let mut body = crlf("--x\nContent-Disposition: form-data; name=\"a\"; filename = \"f\"\n\n");
    body.extend_from_slice(b"--x--");
    let (_, out) = run(CT, &body);
    assert_eq!(
        msg(&out),
        "Multipart parsing error: Multipart: Invalid Content-Disposition header (filename)."
    );
}

#[test]
fn duplicate_name_parameter() {
    let mut body = crlf("--x\nContent-Disposition: form-data; name=\"a\"; name=\"b\"\n\n");
    body.extend_from_slice(b"--x--");
    let (rec, out) = run(CT, &body);
    assert_eq!(
        msg(&out),
        "Multipart parsing error: Multipart: Invalid Content-Disposition header (-14): form-data; name=\"a\"; name=\"b\""
    );
    // MULTIPART_NAME saw both
    assert_eq!(rec.names, vec!["a", "b"]);
}

// ---------------------------------------------------------------------------
// CRS regression tests (REQUEST-922-MULTIPART-ATTACK, REQUEST-920)

/// 922130-1: `\x0E` before the first Content-Disposition (the exact body of
/// the test's encoded request). v3 logs "Multipart parsing error:
/// Multipart: Invalid part header (contains invalid character)".
#[test]
fn crs_922130_1_invalid_char_first() {
    let body = b"--boundary\r\n\x0eContent-Disposition: form-data; name=\"file\"; filename=\"1.php\"\r\nContent-Disposition: form-data; name=\"post\"\r\n\r\n<?php var_dump(file_get_contents(\"/etc/passwd\"));\r\n--boundary--";
    let (rec, out) = run("multipart/form-data; boundary=boundary", body);
    assert_eq!(
        msg(&out),
        "Multipart parsing error: Multipart: Invalid part header (contains invalid character)."
    );
    let f = out.multipart.unwrap_or_default();
    assert!(
        !f.strict_error(),
        "v3: header errors do not set STRICT_ERROR"
    );
    assert_eq!(
        rec.pairs(),
        pairs(&[(
            "post",
            "<?php var_dump(file_get_contents(\"/etc/passwd\"));"
        )])
    );
    assert!(rec.files.is_empty());
    assert_eq!(
        rec.part_headers,
        headers(&[("post", "Content-Disposition: form-data; name=\"post\"")])
    );
}

/// 922130-2 (`\x0E` last in the name), 922130-4 (space), 922130-7 (`\x7F`).
#[test]
fn crs_922130_2_4_7_invalid_chars() {
    for bad in [
        &b"Content-Disposition\x0e"[..],
        b"Content- Disposition",
        b"Content\x7f-Disposition",
    ] {
        let mut body = b"--boundary\r\n".to_vec();
        body.extend_from_slice(bad);
        body.extend_from_slice(b": form-data; name=\"file\"; filename=\"1.php\"\r\nContent-Disposition: form-data; name=\"post\"\r\n\r\n<?php var_dump(file_get_contents(\"/etc/passwd\"));\r\n--boundary--");
        let (rec, out) = run("multipart/form-data; boundary=boundary", &body);
        assert_eq!(
            msg(&out),
            "Multipart parsing error: Multipart: Invalid part header (contains invalid character).",
            "{bad:?}"
        );
        assert_eq!(rec.args.len(), 1);
    }
}

/// 922130-3, 5, 6: valid header names (including `!` and `~`, the ends of
/// the valid range) parse without error; the YAML `data: |` bodies use bare
/// LF line endings.
#[test]
fn crs_922130_3_5_6_valid_names() {
    for first in [
        "Content-Disposition",
        "Content-!Disposition",
        "Content~Disposition",
    ] {
        let body = format!(
            "--boundary\n{first}: form-data; name=\"file\"; filename=\"1.php\"\n\n<?php var_dump(file_get_contents(\"/etc/passwd\")); ?>\n--boundary--\n"
        );
        let (rec, out) = run("multipart/form-data; boundary=boundary", body.as_bytes());
        if first == "Content-Disposition" {
            assert!(!out.reqbody_error, "{first}: {}", msg(&out));
            assert_eq!(rec.files.len(), 1);
            assert_eq!(rec.files[0].1, "1.php");
        } else {
            // The only header is not Content-Disposition.
            assert!(!msg(&out).contains("invalid character"), "{first}");
        }
        let f = out.multipart.unwrap_or_default();
        assert!(
            f.lf_line && f.strict_error(),
            "LF-only bodies are strict errors in v3"
        );
    }
}

/// 922130-8: parts without headers.
#[test]
fn crs_922130_8_no_headers() {
    let body = b"--boundary123\ntest\n--boundary123\nyet another test\n--boundary123--\n";
    let (rec, out) = run("multipart/form-data; boundary=boundary123", body);
    assert!(rec.part_headers.is_empty());
    assert!(rec.args.is_empty());
    assert_eq!(
        msg(&out),
        "Multipart parsing error: Multipart: Final boundary missing."
    );
    let f = out.multipart.unwrap_or_default();
    assert!(f.invalid_part && f.lf_line);
}

/// 922110-1..14 read MULTIPART_PART_HEADERS lines `content-type: ...`.
#[test]
fn crs_922110_part_content_types() {
    // 922110-4: duplicate part names, first one with charset=utf-7.
    let body = "------WebKitFormBoundary\n\
                Content-Disposition: form-data; name=\"username\"\n\
                Content-Type: text/plain; charset=utf-7\n\
                \n\
                +ADw-img+ACA-src+AD0-x+AD4-\n\
                ------WebKitFormBoundary\n\
                Content-Disposition: form-data; name=\"username\"\n\
                Content-Type: text/plain; charset=utf-8\n\
                \n\
                legitimate\n\
                ------WebKitFormBoundary--\n";
    let (rec, out) = run(
        "multipart/form-data; boundary=----WebKitFormBoundary",
        body.as_bytes(),
    );
    assert!(!out.reqbody_error, "{}", msg(&out));
    assert_eq!(
        rec.part_headers,
        headers(&[
            (
                "username",
                "Content-Disposition: form-data; name=\"username\""
            ),
            ("username", "Content-Type: text/plain; charset=utf-7"),
            (
                "username",
                "Content-Disposition: form-data; name=\"username\""
            ),
            ("username", "Content-Type: text/plain; charset=utf-8"),
        ])
    );
    assert_eq!(
        rec.pairs(),
        pairs(&[
            ("username", "+ADw-img+ACA-src+AD0-x+AD4-"),
            ("username", "legitimate")
        ])
    );
    // 922110-13: whitespace around the charset parameter is kept verbatim.
    let body = "------WebKitFormBoundary\n\
                Content-Disposition: form-data; name=\"field1\"\n\
                Content-Type: text/plain;  charset = utf-8\n\
                \n\
                value\n\
                ------WebKitFormBoundary--\n";
    let (rec, _) = run(
        "multipart/form-data; boundary=----WebKitFormBoundary",
        body.as_bytes(),
    );
    assert_eq!(
        rec.part_headers[1].1,
        "Content-Type: text/plain;  charset = utf-8"
    );
}

/// 922120-1: Content-Transfer-Encoding shows up in MULTIPART_PART_HEADERS.
#[test]
fn crs_922120_content_transfer_encoding() {
    let body = "--boundary\n\
                Content-Disposition: form-data; name=\"flavors\"\n\
                Content-Transfer-Encoding: 8bit\n\
                Content-Type: text/plain; charset=utf-7\n\
                \n\
                Pineapple. Pizza.\n\
                --boundary--\n";
    let (rec, _) = run("multipart/form-data; boundary=boundary", body.as_bytes());
    assert!(rec
        .part_headers
        .iter()
        .any(|(k, v)| k == "flavors" && v == "Content-Transfer-Encoding: 8bit"));
}

/// 922100: `&MULTIPART_PART_HEADERS:_charset_` counts the `_charset_` part's
/// header lines, and `ARGS:_charset_` holds its value.
#[test]
fn crs_922100_charset_part() {
    let body = crlf(
        "--x\nContent-Disposition: form-data; name=\"_charset_\"\n\nutf-7\n--x\nContent-Disposition: form-data; name=\"a\"\n\nb\n--x--\n",
    );
    let (rec, _) = run(CT, &body);
    assert_eq!(
        rec.part_headers
            .iter()
            .filter(|(k, _)| k == "_charset_")
            .count(),
        1
    );
    assert_eq!(
        rec.pairs()[0],
        ("_charset_".to_string(), "utf-7".to_string())
    );
}

/// 920400/920410 read FILES_COMBINED_SIZE; 920120 reads FILES and
/// FILES_NAMES.
#[test]
fn crs_920_files_variables() {
    let body = crlf(
        "--x\nContent-Disposition: form-data; name=\"f1\"; filename=\"a;b.txt\"\n\n12345\n--x\nContent-Disposition: form-data; name=\"f2\"; filename=\"c.txt\"\n\n1234567890\n--x--\n",
    );
    let (rec, out) = run(CT, &body);
    assert!(!out.reqbody_error, "{}", msg(&out));
    assert_eq!(
        rec.files
            .iter()
            .map(|f| (f.0.as_str(), f.1.as_str(), f.2))
            .collect::<Vec<_>>(),
        vec![("f1", "a;b.txt", 5), ("f2", "c.txt", 10)]
    );
    assert_eq!(out.files_combined_size, Some(15));
    assert_eq!(rec.filenames, vec!["a;b.txt", "c.txt"]);
}

#[test]
fn multipart_args_bypass_the_arguments_limit() {
    let body = crlf(
        "--x\nContent-Disposition: form-data; name=\"a\"\n\n1\n--x\nContent-Disposition: form-data; name=\"b\"\n\n2\n--x--\n",
    );
    let mut rec = Rec::default();
    let mut out = BodyResult::default();
    let mut args = ArgLimit::new(Some(1));
    parse(
        &body,
        CT.as_bytes(),
        &MultipartConfig::default(),
        &mut args,
        &mut Scratch::default(),
        &mut rec,
        &mut out,
    );
    assert_eq!(rec.args.len(), 2);
    assert_eq!(args.count, 2);
}

// ---------------------------------------------------------------------------
// Robustness

#[test]
fn scratch_reuse_gives_same_results() {
    let bodies: Vec<Vec<u8>> = vec![
        crlf("--x\nContent-Disposition: form-data; name=\"a\"\nX: 1\n\n1\n--x--\n"),
        crlf("--x\nContent-Disposition: form-data;\n name=\"b\"\n\n2\n--x\nContent-Disposition: form-data; name=\"c\"; filename=\"f\"\n\nzz\n--x--\n"),
        b"garbage".to_vec(),
    ];
    let mut sc = Scratch::default();
    for _ in 0..3 {
        for body in &bodies {
            let mut fresh = Rec::default();
            let mut fresh_out = BodyResult::default();
            parse(
                body,
                CT.as_bytes(),
                &MultipartConfig::default(),
                &mut ArgLimit::new(None),
                &mut Scratch::default(),
                &mut fresh,
                &mut fresh_out,
            );
            let mut reused = Rec::default();
            let mut reused_out = BodyResult::default();
            parse(
                body,
                CT.as_bytes(),
                &MultipartConfig::default(),
                &mut ArgLimit::new(None),
                &mut sc,
                &mut reused,
                &mut reused_out,
            );
            assert_eq!(fresh.args, reused.args);
            assert_eq!(fresh.files, reused.files);
            assert_eq!(fresh.part_headers, reused.part_headers);
            assert_eq!(fresh_out, reused_out);
        }
    }
}

#[test]
fn random_inputs_do_not_panic() {
    let mut rng = XorShift::from_state(0x5eed_0001);
    let alphabet: &[&[u8]] = &[
        b"--x",
        b"--x--",
        b"--",
        b"\r\n",
        b"\n",
        b"\r",
        b"Content-Disposition: form-data; name=\"a\"",
        b"; filename=\"f\"",
        b"filename*=UTF-8''a%20",
        b"Content-Type: text/plain",
        b": ",
        b" ",
        b"\t",
        b"\"",
        b"'",
        b"\\",
        b";",
        b"=",
        b"\x00",
        b"x",
        b"value",
    ];
    let cts = [
        "multipart/form-data; boundary=x",
        "multipart/form-data; boundary=\"x\"",
        "multipart/form-data boundary =x",
    ];
    let mut sc = Scratch::default();
    let start = Instant::now();
    for i in 0..20_000 {
        let body = rng.bytes_from(alphabet, 80);
        let ct = cts[i % cts.len()];
        let mut rec = Rec::default();
        let mut out = BodyResult::default();
        let cfg = MultipartConfig {
            line_breaks: if i % 2 == 0 {
                MultipartLineBreaks::Keep
            } else {
                MultipartLineBreaks::DropLikeV3
            },
            upload_file_limit: if i % 3 == 0 { Some(1) } else { None },
        };
        parse(
            &body,
            ct.as_bytes(),
            &cfg,
            &mut ArgLimit::new(None),
            &mut sc,
            &mut rec,
            &mut out,
        );
        let f = out.multipart.unwrap_or_default();
        // Invariants: a fatal error always ends with a completion message.
        if f.error {
            assert!(out.reqbody_error);
        }
        if out.reqbody_error {
            assert!(msg(&out).starts_with("Multipart parsing error: Multipart: "));
        }
        // Every file's size is its content length, and the total adds up.
        let total: u64 = rec.files.iter().map(|f| f.2).sum();
        assert!(rec.files.iter().all(|f| f.2 == f.3.len() as u64));
        assert_eq!(
            out.files_combined_size,
            (!rec.files.is_empty()).then_some(total)
        );
    }
    // Random content types too.
    let ct_alphabet: &[&[u8]] = &[
        b"multipart/form-data",
        b";",
        b" ",
        b"boundary",
        b"BOUNDARY",
        b"=",
        b"\"",
        b"x",
        b"\t",
        b"\x00",
    ];
    for _ in 0..5000 {
        let ct = rng.bytes_from(ct_alphabet, 12);
        let body = rng.bytes_from(alphabet, 40);
        let mut out = BodyResult::default();
        parse(
            &body,
            &ct,
            &MultipartConfig::default(),
            &mut ArgLimit::new(None),
            &mut sc,
            &mut Rec::default(),
            &mut out,
        );
    }
    assert!(start.elapsed() < Duration::from_secs(120));
}

fn time_it(ct: &str, body: &[u8]) -> (Duration, BodyResult) {
    struct Count(usize);
    impl BodySink for Count {
        fn arg(&mut self, _: ArgSource, _: &[u8], _: &[u8]) {
            self.0 += 1;
        }
        fn multipart_part_header(&mut self, _: &[u8], _: &[u8]) {
            self.0 += 1;
        }
    }
    let mut out = BodyResult::default();
    let start = Instant::now();
    parse(
        body,
        ct.as_bytes(),
        &MultipartConfig::default(),
        &mut ArgLimit::new(None),
        &mut Scratch::default(),
        &mut Count(0),
        &mut out,
    );
    (start.elapsed(), out)
}

#[test]
fn adversarial_bodies_finish_quickly() {
    let ten_mb = 10 * 1024 * 1024;
    let limit = Duration::from_secs(120);
    let part = crlf("--x\nContent-Disposition: form-data; name=\"a\"\n\nb\n");
    let cases: Vec<(&str, Vec<u8>)> = vec![
        // a huge number of parts
        ("many parts", {
            let mut b = part.repeat(ten_mb / part.len());
            b.extend_from_slice(b"--x--\r\n");
            b
        }),
        // missing final boundary
        ("no final boundary", part.repeat(ten_mb / part.len())),
        // boundary prefixes inside data (fatal at the first one)
        ("boundary prefixes", {
            let mut b = crlf("--x\nContent-Disposition: form-data; name=\"a\"\n\n");
            b.extend_from_slice(&b"--xx\r\n".repeat(ten_mb / 6));
            b
        }),
        // `--x` in the middle of every line
        ("dashed boundary inside lines", {
            let mut b = crlf("--x\nContent-Disposition: form-data; name=\"a\"\n\n");
            b.extend_from_slice(&b"a--x\r\n".repeat(ten_mb / 6));
            b
        }),
        // header lines without colon
        ("colon-less header lines", {
            let mut b = b"--x\r\n".to_vec();
            b.extend_from_slice(&b"nocolon\r\n".repeat(ten_mb / 9));
            b
        }),
        // a huge number of headers in one part
        ("many headers", {
            let mut b = b"--x\r\n".to_vec();
            for i in 0..(ten_mb / 16) {
                b.extend_from_slice(format!("H{i}: v\r\n").as_bytes());
            }
            b.extend_from_slice(&crlf(
                "Content-Disposition: form-data; name=\"a\"\n\nb\n--x--\n",
            ));
            b
        }),
        // endless folding of one header
        ("endless folding", {
            let mut b = crlf("--x\nContent-Disposition: form-data; name=\"a\"\nX: v\n");
            b.extend_from_slice(&b" folded\r\n".repeat(ten_mb / 9));
            b
        }),
        // one very long header line
        ("long header line", {
            let mut b = b"--x\r\nX: ".to_vec();
            b.resize(b.len() + ten_mb, b'a');
            b
        }),
        // one very long data line and only newlines
        ("long data line", {
            let mut b = crlf("--x\nContent-Disposition: form-data; name=\"a\"; filename=\"f\"\n\n");
            b.resize(b.len() + ten_mb, b'z');
            b.extend_from_slice(b"\r\n--x--\r\n");
            b
        }),
        ("only newlines", b"\n".repeat(ten_mb)),
        ("only boundaries", b"--x\r\n".repeat(ten_mb / 5)),
    ];
    for (what, body) in cases {
        let (took, out) = time_it(CT, &body);
        assert!(took < limit, "{what}: {took:?}");
        let _ = out;
    }
}

#[test]
fn many_parts_are_all_reported() {
    let part = crlf("--x\nContent-Disposition: form-data; name=\"a\"\n\nb\n");
    let n = 100_000;
    let mut body = part.repeat(n);
    body.extend_from_slice(b"--x--\r\n");
    let (rec, out) = run(CT, &body);
    assert!(!out.reqbody_error);
    assert_eq!(rec.args.len(), n);
    assert_eq!(rec.part_headers.len(), n);
}
