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
        // A literal's first byte seen before its match, and a near miss.
        b"xxsesxSESS_x",
        b"x_x_x_1",
        b"sesx_",
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
        // LATIN SMALL LETTER LONG S to `s` (in the regex as written alone;
        // the compiler's are ASCII-only).
        "ſESS".as_bytes(),
        "\u{212A}".as_bytes(),
        b"\xff\xfeid",
        // An ASCII first byte, other bytes not: decided by the first byte
        // when it differs, else by the regex.
        "x\u{212A}ids".as_bytes(),
        "i\u{212A}".as_bytes(),
        "s\u{17F}ession".as_bytes(),
        "r\u{17F}i_parameter_".as_bytes(),
        // `^` after a line feed: the compiler's regexes are multi-line.
        b"x\nheader_name_920450_a",
        b"x\nid",
        b"id\nx",
        b"\nsess",
    ];
    for p in patterns {
        let lit = KeyLiteral::of(p).expect("a plain literal");
        // As the compiler builds it (multi-line, as ModSecurity's), and as
        // written alone.
        for rx in [selector(p).regex, regex(p)] {
            for &k in keys {
                let want = rx.is_match(k);
                match lit.matches(k) {
                    Some(got) => assert_eq!(got, want, "{p} on {k:?}"),
                    None => assert!(
                        !k.is_ascii() || k.contains(&b'\n'),
                        "{p} deferred on an ASCII key {k:?}"
                    ),
                }
            }
        }
    }
}

/// The selector regex as the compiler builds it.
fn selector(pattern: &str) -> waf_compiler::ir::SelectorRegex {
    let translated = waf_compiler::rx::translate(pattern).expect("pattern translates");
    waf_compiler::ir::SelectorRegex::new(pattern, &translated).expect("pattern compiles")
}

#[test]
fn first_bytes_are_known_only_for_anchored_finite_prefixes() {
    for p in [
        "^pbjs-\\w+$",
        "^_ga(?:_\\w+)?$",
        "^_pk_ref",
        "^(?:ab|cd)",
        "^a?b",
        "^k",
    ] {
        assert!(selector(p).first_bytes.is_some(), "{p}");
    }
    for p in [
        "pbjs",
        "^",
        "^a?",
        "^.*x",
        "^\\w",
        "a|^b",
        "^(?:)",
        "\\x22?\\x24Version",
    ] {
        assert!(selector(p).first_bytes.is_none(), "{p}");
    }
}

#[test]
fn a_key_ruled_out_by_its_first_byte_never_matches() {
    let patterns = [
        "^pbjs-\\w+$",
        "^_ga(?:_\\w+)?$",
        "^_pk_ref",
        "^header_name_920450_",
        "^(?:ab|cd)",
        "^a?b",
        "^k",
        "^s+x",
        "^[a-c]z",
        "^\\x22?id",
        "^(?:é|e)t",
    ];
    let mut keys: Vec<Vec<u8>> = [
        "pbjs-x",
        "PBJS-1",
        "pbjs",
        "_ga",
        "_GA_abc",
        "_gab",
        "_pk_ref.1",
        "_PK_REF",
        "ab",
        "CD",
        "b",
        "AB",
        "x",
        "k",
        "K",
        "\u{212A}",
        "\u{212A}x",
        "\u{17F}x",
        "sx",
        "Sssx",
        "cz",
        "dz",
        "\"id",
        "ID",
        "ét",
        "ÉT",
        "et",
        "",
        "\u{17F}",
        "x\npbjs-a",
        "x\n_ga",
        "\nk",
        "a\nb",
    ]
    .iter()
    .map(|k| k.as_bytes().to_vec())
    .collect();
    // Every first byte, before a tail that several patterns accept.
    for b in 0..=255u8 {
        for tail in [&b""[..], b"bjs-x", b"a", b"z", b"d", b"t"] {
            let mut k = vec![b];
            k.extend_from_slice(tail);
            keys.push(k);
        }
    }
    for p in patterns {
        let rx = selector(p);
        assert!(rx.first_bytes.is_some(), "{p}");
        for k in &keys {
            if rx.regex.is_match(k) {
                assert!(rx.may_start(k), "{p} rules out {k:?}, which it matches");
            }
        }
    }
}

/// A `setvar` name's answer known before it is expanded
/// (`SelectorRegex::answer_for_name`) is the regex's answer on every key the
/// name can expand to: constant names exactly; computed names by their
/// literal beginning, whatever the rest (line feeds and non-ASCII bytes
/// included).
#[test]
fn a_known_answer_for_a_name_holds_for_every_expansion() {
    use waf_compiler::ir::{MacroPart, MacroString};
    use waf_compiler::names::Variable;
    let patterns = [
        "^header_name_920450_",
        "^id",
        "SESS",
        "MULTIPART_HEADERS_CONTENT_TYPES_*",
        "rfi_parameter_.*",
        "^pbjs-\\w+$",
        "^h",
    ];
    let starts = [
        "header_name_920450_",
        "HEADER_NAME_920450_x",
        "header_name_",
        "x_multipart_headers_content_types_",
        "rfi_parameter_",
        "id",
        "my_sess",
        "",
        "anomaly_score",
        "pbjs-",
    ];
    let rests: &[&str] = &[
        "",
        "a",
        "content-range",
        "\nid",
        "\nheader_name_920450_",
        "SESS",
        "\u{212A}",
        "-x_y",
    ];
    for p in patterns {
        let rx = selector(p);
        for start in starts {
            // Constant names: exactly the regex's answer (keys are stored
            // lowercased).
            let constant = MacroString::literal(start);
            assert_eq!(
                rx.answer_for_name(&constant),
                Some(rx.is_match(start.to_ascii_lowercase().as_bytes())),
                "{p} on the constant {start:?}"
            );
            let computed = MacroString {
                parts: vec![
                    MacroPart::Literal(start.to_string()),
                    MacroPart::Var {
                        variable: Variable::Tx,
                        key: Some("0".into()),
                    },
                ],
            };
            let Some(known) = rx.answer_for_name(&computed) else {
                continue;
            };
            for rest in rests {
                let key = format!("{start}{rest}").to_ascii_lowercase();
                assert_eq!(
                    rx.is_match(key.as_bytes()),
                    known,
                    "{p} on {key:?}, known from {start:?}"
                );
            }
        }
    }
}
