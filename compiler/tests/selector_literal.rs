//! A selector regex's literal fast path (`KeyLiteral`) decides every key as
//! the case-insensitive regex does, or defers to it.

use waf_compiler::ir::KeyLiteral;

fn regex(pattern: &str) -> regex::bytes::Regex {
    regex::bytes::RegexBuilder::new(pattern)
        .case_insensitive(true)
        .build()
        .expect("pattern compiles")
}

#[test]
fn only_plain_literals_have_a_literal_form() {
    assert_eq!(
        KeyLiteral::of("^header_name_920450_"),
        Some(KeyLiteral::Prefix(b"header_name_920450_".to_vec()))
    );
    assert_eq!(
        KeyLiteral::of("Msc-Pcre"),
        Some(KeyLiteral::Contains(b"msc-pcre".to_vec()))
    );
    // A trailing repetition that may be empty leaves the literal before it.
    assert_eq!(
        KeyLiteral::of("MULTIPART_HEADERS_CONTENT_TYPES_*"),
        Some(KeyLiteral::Contains(
            b"multipart_headers_content_types".to_vec()
        ))
    );
    assert_eq!(
        KeyLiteral::of("^rfi_parameter_.*"),
        Some(KeyLiteral::Prefix(b"rfi_parameter_".to_vec()))
    );
    for p in [
        "", "^", "^a.b", "a|b", "^id$", "a+", "[ab]", "\\d", "^a b", "(a)", "é", "a*", "^.*",
        "a\\.*", "a.+", "ab**", "a(b)*", "a]*",
    ] {
        assert_eq!(KeyLiteral::of(p), None, "{p}");
    }
}

#[test]
fn the_literal_form_agrees_with_the_regex() {
    let patterns = [
        "^header_name_920450_",
        "^id",
        "SESS",
        "^a-b",
        "x_1",
        "MULTIPART_HEADERS_CONTENT_TYPES_*",
        "rfi_parameter_.*",
        "^ids*",
        "^sess.*",
    ];
    let keys: &[&[u8]] = &[
        b"header_name_920450_content-range",
        b"HEADER_NAME_920450_X",
        b"header_name_920450",
        b"xheader_name_920450_",
        b"id",
        b"ID_card",
        b"pid",
        b"my_sess_id",
        b"SeSs",
        b"a-b-c",
        b"A-B",
        b"ab",
        b"xx_1y",
        b"",
        b"multipart_headers_content_types_text/plain",
        b"MULTIPART_HEADERS_CONTENT_TYPES",
        b"multipart_headers_content_type",
        b"x_multipart_headers_content_types",
        b"rfi_parameter_url",
        b"rfi_parameter",
        b"idss",
        b"i",
        b"session",
        b"ses",
        // Unicode case folding: U+212A KELVIN SIGN folds to `k`, U+017F
        // LATIN SMALL LETTER LONG S to `s`; the regex matches them.
        "ſESS".as_bytes(),
        "\u{212A}".as_bytes(),
        b"\xff\xfeid",
        // An ASCII first byte, other bytes not: decided by the first byte
        // when it differs, else by the regex.
        "x\u{212A}ids".as_bytes(),
        "i\u{212A}".as_bytes(),
        "s\u{17F}ession".as_bytes(),
        "r\u{17F}i_parameter_".as_bytes(),
    ];
    for p in patterns {
        let lit = KeyLiteral::of(p).expect("a plain literal");
        let rx = regex(p);
        for &k in keys {
            let want = rx.is_match(k);
            match lit.matches(k) {
                Some(got) => assert_eq!(got, want, "{p} on {k:?}"),
                None => assert!(!k.is_ascii(), "{p} deferred on an ASCII key {k:?}"),
            }
        }
    }
}
