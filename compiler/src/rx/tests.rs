//! Tests for the `@rx` layer: translation semantics, PCRE-only construct
//! detection, error ranges, required literals (with a randomized soundness
//! property test), dense DFA vs meta agreement, no-panic fuzzing and the CRS
//! v4 corpus.

use super::translate::names;
use super::*;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------- helpers

fn rx(pattern: &str) -> CompiledRx {
    match CompiledRx::compile(pattern, &RxOptions::default()) {
        Ok(r) => r,
        Err(e) => panic!("pattern {pattern:?} failed to compile: {e}"),
    }
}

fn matches(pattern: &str, haystack: &[u8]) -> bool {
    let r = rx(pattern);
    let a = r.is_match(haystack);
    let b = r.is_match_meta(haystack);
    assert_eq!(a, b, "dense DFA and meta disagree: {pattern:?} on {haystack:?}");
    a
}

fn err(pattern: &str) -> RxError {
    match CompiledRx::compile(pattern, &RxOptions::default()) {
        Ok(_) => panic!("pattern {pattern:?} unexpectedly compiled"),
        Err(e) => e,
    }
}

fn assert_unsupported(pattern: &str, construct: &str, range: Range<usize>) {
    match err(pattern) {
        RxError::Unsupported {
            construct: c,
            range: r,
        } => {
            assert_eq!(c, construct, "construct for {pattern:?}");
            assert_eq!(r, range, "range for {pattern:?}");
        }
        other => panic!("{pattern:?}: expected Unsupported({construct}), got {other:?}"),
    }
}

fn assert_invalid_at(pattern: &str, range: Range<usize>) -> String {
    match err(pattern) {
        RxError::Invalid { message, range: r } => {
            assert_eq!(r, range, "range for {pattern:?} ({message})");
            assert!(!message.contains('\n'), "message must be one line: {message:?}");
            message
        }
        other => panic!("{pattern:?}: expected Invalid at {range:?}, got {other:?}"),
    }
}

fn lits(pattern: &str) -> RequiredLiterals {
    rx(pattern).required_literals().clone()
}

fn any_of(list: &[&str]) -> RequiredLiterals {
    RequiredLiterals::AnyOf(list.iter().map(|s| s.as_bytes().to_vec()).collect())
}

/// Small deterministic PRNG (xorshift64*), so the tests need no dependency.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % (n.max(1) as u64)) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Does the (lowercased) haystack contain one of the required literals?
fn prefilter_passes(req: &RequiredLiterals, haystack: &[u8]) -> bool {
    match req {
        RequiredLiterals::None => true,
        RequiredLiterals::AnyOf(lits) => {
            let lower = haystack.to_ascii_lowercase();
            lits.iter()
                .any(|l| memchr::memmem::find(&lower, l).is_some())
        }
    }
}

/// Text fragments of a pattern (runs between regex syntax characters), used to
/// build haystacks that have a fair chance of matching.
fn fragments(pattern: &str) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = pattern
        .split(|c: char| "\\()[]{}|?*+^$.".contains(c))
        .filter(|s| !s.is_empty())
        .map(|s| s.as_bytes().to_vec())
        .collect();
    // Escaped punctuation that patterns often require.
    for s in ["../", "..\\", "${", "%2e", "(", ")", ".", "$", "\\"] {
        out.push(s.as_bytes().to_vec());
    }
    out
}

const INTERESTING: &[u8] = b" \t\n\r=<>/.-@%(){}$\\'\"#:;,_0123456789abcdefxyzABCXYZ\x00\xa0\xc2\xb4\xff";

fn random_haystack(rng: &mut Rng, frags: &[Vec<u8>]) -> Vec<u8> {
    let mut h = Vec::new();
    for _ in 0..rng.below(9) {
        match rng.below(4) {
            0 | 1 => {
                for &b in rng.pick(frags).clone().iter() {
                    let b = if b.is_ascii_alphabetic() && rng.below(3) == 0 {
                        b ^ 0x20
                    } else {
                        b
                    };
                    h.push(b);
                }
            }
            2 => h.push(*rng.pick(INTERESTING)),
            _ => h.push(rng.below(256) as u8),
        }
    }
    h
}

// ------------------------------------------------------------ translation

#[test]
fn translate_adds_flags_and_rewrites_braced_hex() {
    assert_eq!(translate(r"\x{c2}\x{b4}").unwrap(), r"(?sm-u)\xC2\xB4");
    assert_eq!(translate(r"\x41\x{0041}\x4").unwrap(), r"(?sm-u)AA\x04");
    assert_eq!(translate(r"a\x").unwrap(), r"(?sm-u)a\x00");
    assert_eq!(translate("abc").unwrap(), "(?sm-u)abc");
    assert_eq!(translate(r"[\x7f-\x{ff}]").unwrap(), r"(?sm-u)[\x7F-\xFF]");
}

#[test]
fn braced_hex_is_a_byte_not_a_code_point() {
    assert!(matches(r"\x{c2}\x{b4}", b"\xc2\xb4"));
    assert!(matches(r"^\x{c2}\x{b4}$", b"\xc2\xb4"));
    // The 4-byte UTF-8 encoding of U+00C2 U+00B4 is not what PCRE matches.
    assert!(!matches(r"^\x{c2}\x{b4}$", "\u{c2}\u{b4}".as_bytes()));
    assert!(!matches(r"\x{c2}\x{b4}", b"\xc3\x82\xc2"));
}

#[test]
fn byte_classes_and_raw_bytes() {
    assert!(matches(r"[\x7f-\x{ff}]", b"\xff"));
    assert!(matches(r"[\x7f-\x{ff}]", b"\x7f"));
    assert!(matches(r"[\x7f-\x{ff}]", b"\x80"));
    assert!(!matches(r"[\x7f-\x{ff}]", b"abc"));
    assert!(matches(r"\xac\xed\x00\x05", b"junk\xac\xed\x00\x05sr"));
    assert!(!matches(r"\xac\xed\x00\x05", "\u{ac}\u{ed}\u{0}\u{5}".as_bytes()));
}

#[test]
fn dot_matches_every_byte() {
    assert!(matches(r"^.$", b"\n"));
    assert!(matches(r"^.$", b"\xff"));
    assert!(matches(r"^.$", b"\x00"));
    assert!(matches(r"a.b", b"a\nb"));
    // (?-s) restores PCRE's default.
    assert!(!matches(r"(?-s)^.$", b"\n"));
}

#[test]
fn negated_class_matches_invalid_utf8() {
    assert!(matches(r"^[^>]+$", b"\xff"));
    assert!(matches(r"^[^>]+$", b"\xc0\xaf"));
    assert!(!matches(r"^[^>]+$", b">"));
    assert!(matches(r"^\W$", b"\xff"));
    assert!(matches(r"^\D\S$", b"\xe9\xa0"));
}

#[test]
fn ascii_only_case_folding_and_classes() {
    assert!(matches(r"(?i)script", b"SCRIPT"));
    assert!(matches(r"(?i)script", b"ScRiPt"));
    assert!(!matches(r"(?i)script", "ſcript".as_bytes()));
    assert!(!matches(r"(?i)k", "\u{212a}".as_bytes())); // Kelvin sign
    assert!(!matches(r"\w", "é".as_bytes()));
    assert!(!matches(r"\d", "٣".as_bytes()));
    assert!(!matches(r"\s", "\u{a0}".as_bytes()));
    assert!(matches(r"\bfoo\b", "éfooé".as_bytes()));
}

#[test]
fn multiline_anchors() {
    assert!(matches(r"^b", b"a\nb"));
    assert!(matches(r"a$", b"a\nb"));
    assert!(matches(r"^b$", b"a\nb\nc"));
    assert!(!matches(r"\Ab", b"a\nb"));
    assert!(!matches(r"a\z", b"a\nb"));
    assert!(matches(r"b\z", b"a\nb"));
}

#[test]
fn escaped_backslashes() {
    // `\\` is a backslash; `x{41}` is then `x` repeated 41 times.
    let x41 = format!("\\{}", "x".repeat(41));
    assert!(matches(r"^\\x{41}$", x41.as_bytes()));
    assert!(!matches(r"^\\x{41}$", br"\x{41}"));
    assert!(!matches(r"\\x{41}", b"A"));
    // `\\\x{41}` is a backslash then `A`.
    assert!(matches(r"^\\\x{41}$", br"\A"));
    // In a class, `\\` is a backslash and the rest is literal.
    assert!(matches(r"^[\\x{41}]$", b"}"));
    assert!(matches(r"^[\\x{41}]$", b"\\"));
    assert!(!matches(r"^[\\x{41}]$", b"A"));
    assert!(matches(r"^[\x{41}]$", b"A"));
    // An escaped backslash before a digit is not a backreference.
    assert!(matches(r"^\\1$", br"\1"));
    assert!(matches(r"\x5c", b"\\"));
}

#[test]
fn pcre_escapes() {
    assert!(matches(r"^\0$", b"\x00"));
    assert!(matches(r"^\012$", b"\n"));
    assert!(matches(r"^[\101]$", b"A"));
    assert!(matches(r"^[\1]$", b"\x01"));
    assert!(matches(r"^\o{101}$", b"A"));
    assert!(matches(r"^\cA\cz$", b"\x01\x1a"));
    assert!(matches(r"^\e$", b"\x1b"));
    assert!(matches(r"^\a\f\t\n\r$", b"\x07\x0c\x09\x0a\x0d"));
    // PCRE's \v and \h are white-space classes, not VT.
    assert!(matches(r"^a\vb$", b"a\nb"));
    assert!(matches(r"^a\vb$", b"a\x0bb"));
    assert!(matches(r"^\h$", b"\xa0"));
    assert!(!matches(r"^\H$", b"\t"));
    assert!(matches(r"^[\h]$", b" "));
    assert!(matches(r"^[^\V]$", b"\r"));
    assert!(matches(r"^\N$", b"x"));
    assert!(!matches(r"^\N$", b"\n"));
    // `\<` and `\>` are literal in PCRE (word boundaries in regex-syntax).
    assert!(matches(r"\<script\>", b"<script>"));
    assert!(!matches(r"\<script", b"script"));
    // In a class, \b is a backspace.
    assert!(matches(r"^[\b]$", b"\x08"));
    // Superfluous punctuation escapes are literals.
    assert!(matches(r"^\'\,\!\%\@$", b"',!%@"));
    // Escaped non-ASCII character: the bytes.
    assert!(matches(r"^\é$", "é".as_bytes()));
}

#[test]
fn quoting() {
    assert!(matches(r"^\Q(a+)\E+$", b"(a+)))"));
    assert!(!matches(r"^\Q(a+)\E$", b"aa"));
    assert!(matches(r"^\Q.*\E", b".*x"));
    assert!(!matches(r"^\Q.*\E", b"xx"));
    assert!(matches(r"^\Qa\\b$", br"a\\b$")); // unterminated: rest is literal
    assert!(matches(r"^[\Q]\E]$", b"]"));
    assert!(matches(r"^a\Eb$", b"ab")); // stray \E is ignored
    // \Q..\E content is not scanned for PCRE-only constructs.
    assert!(matches(r"\Q(?=\1\E", b"(?=\\1"));
}

#[test]
fn literal_braces() {
    assert!(matches(r"^a{,3}$", b"a{,3}"));
    assert!(matches(r"^{foo}$", b"{foo}"));
    assert!(matches(r"^x{2$", b"x{2"));
    assert!(matches(r"^x{a}$", b"x{a}"));
    assert!(matches(r"^x{2}$", b"xx"));
    assert!(matches(r"^x{2,}$", b"xxx"));
    assert!(matches(r"^x{1,2}$", b"xx"));
    assert!(matches(r"^\b{start}", b"b{start}") || !matches(r"\b{start}", b"foo"));
    assert!(matches(r"^a}$", b"a}"));
    assert!(matches(r"^a]$", b"a]"));
}

#[test]
fn pcre_class_syntax() {
    assert!(matches(r"^[[]$", b"["));
    assert!(matches(r"^[a[b]$", b"["));
    assert!(matches(r"^[a&&b]$", b"&"));
    assert!(matches(r"^[a&&b]$", b"b"));
    assert!(matches(r"^[~~]$", b"~"));
    assert!(matches(r"^[]a]$", b"]"));
    assert!(matches(r"^[^]a]$", b"b"));
    assert!(!matches(r"^[^]a]$", b"]"));
    assert!(matches(r"^[a\-z]$", b"-"));
    assert!(!matches(r"^[a\-z]$", b"b"));
    assert!(matches(r"^[-a]$", b"-"));
    assert!(matches(r"^[a-]$", b"-"));
    assert!(matches(r"^[\d-z]$", b"-"));
    assert!(matches(r"^[\d-z]$", b"z"));
    assert!(!matches(r"^[\d-z]$", b"m"));
    assert!(matches(r"^[a-c-e]$", b"-"));
    assert!(!matches(r"^[a-c-e]$", b"d"));
    assert!(matches(r"^[!--]$", b"+")); // range ! .. -
    assert!(matches(r"^[[:alpha:]]$", b"Q"));
    assert!(!matches(r"^[[:alpha:]]$", b"1"));
    assert!(matches(r"^[[:^digit:]]$", b"a"));
    assert!(matches(r"^[[:alpha:][:digit:]_]+$", b"a_1"));
    assert!(matches(r"^[[:alpha]$", b":")); // not a POSIX class: literal `[`, `:`...
    assert!(matches(r"^[\w.-]+$", b"a.b-c"));
    assert!(matches(r"^[\]]$", b"]"));
    assert!(matches(r"^[ ]$", b" "));
    assert!(matches(r"^[#]$", b"#"));
    assert!(matches(r"^[\^]$", b"^"));
    assert!(matches(r"^[a^]$", b"^"));
    assert!(matches(r"^[é]$", b"\xa9")); // a class of bytes
    assert!(matches(r"[[:<:]]foo[[:>:]]", b" foo "));
    assert!(!matches(r"[[:<:]]foo", b"xfoo"));
    assert!(matches(r"(?i)^[a-c]$", b"B"));
}

#[test]
fn non_ascii_pattern_text_is_bytes() {
    // PCRE (non-UTF) sees `é` as two bytes; `+` repeats only the last one.
    assert!(matches("^é+$", b"\xc3\xa9\xa9"));
    assert!(!matches("^é+$", "éé".as_bytes()));
    assert!(matches("café", "CAFÉ café".as_bytes()));
}

#[test]
fn comments_and_extended_mode() {
    assert!(matches(r"^a(?#comment (?= ignored)b$", b"ab"));
    assert!(matches("(?x)^ a b # comment (?=\n c $", b"abc"));
    assert!(matches(r"(?x)^[ ]$", b" "));
    assert!(matches(r"(?x)^a\ b$", b"a b"));
    assert!(matches(r"(?x)^a\#b$", b"a#b"));
    assert!(matches(r"(?x:a b)c d", b"abc d"));
    assert!(matches(r"^a#b$", b"a#b"));
    assert!(matches(r"^(?x-x)a b$", b"a b"));
    assert!(matches(r"^(?:(?x) a )b c$", b"ab c"));
}

#[test]
fn named_groups_and_captures() {
    for p in [r"(?<n>a)(b)", r"(?'n'a)(b)", r"(?P<n>a)(b)"] {
        let r = rx(p);
        assert_eq!(r.group_count(), 3, "{p}");
        let mut slots = vec![None; 4];
        assert!(r.captures(b"xxab", &mut slots));
        assert_eq!(slots, vec![Some(2..4), Some(2..3), Some(3..4), None]);
    }
    let r = rx(r"(a)|(b)");
    let mut slots = vec![Some(0..0); 3];
    assert!(r.captures(b"b", &mut slots));
    assert_eq!(slots, vec![Some(0..1), None, Some(0..1)]);
    assert!(!r.captures(b"c", &mut slots));
    assert_eq!(slots, vec![None, None, None]);
    // Leftmost-first, lazy quantifiers respected.
    let r = rx(r"<(.+?)>");
    let mut slots = vec![None; 2];
    assert!(r.captures(b"<a><b>", &mut slots));
    assert_eq!(slots[1], Some(1..2));
    // Fewer slots than groups is fine.
    let mut one = vec![None; 1];
    assert!(r.captures(b"<a>", &mut one));
    assert_eq!(one[0], Some(0..3));
}

// ------------------------------------------------- PCRE-only constructs

#[test]
fn pcre_only_constructs_are_named_with_ranges() {
    use names::*;
    let cases: &[(&str, &str, Range<usize>)] = &[
        ("a(?=b)", LOOKAHEAD, 1..4),
        ("a(?!b)", NEG_LOOKAHEAD, 1..4),
        ("(?<=a)b", LOOKBEHIND, 0..4),
        ("(?<!a)b", NEG_LOOKBEHIND, 0..4),
        ("a(?*b)", NON_ATOMIC_LOOKAROUND, 1..4),
        (r"(a)\1", BACKREF, 3..5),
        (r"(a)\9", BACKREF, 3..5),
        (r"(a)\12x", BACKREF, 3..6),
        (r"(a)\g{1}", BACKREF_G, 3..8),
        (r"(a)\g1", BACKREF_G, 3..6),
        (r"(a)\g-1", BACKREF_G, 3..7),
        (r"(a)\g{-1}", BACKREF_G, 3..9),
        (r"(?<n>a)\g<n>", SUBROUTINE_G, 7..12),
        (r"(?<n>a)\k<n>", BACKREF_K, 7..12),
        (r"(?<n>a)\k'n'", BACKREF_K, 7..12),
        (r"(?<n>a)\k{n}", BACKREF_K, 7..12),
        ("(?P<n>a)(?P=n)", BACKREF_P, 8..14),
        ("(?P<n>a)(?P>n)", SUBROUTINE_P, 8..14),
        ("x(?>a+)", ATOMIC, 1..4),
        ("a*+", POSSESSIVE_STAR, 1..3),
        ("a++", POSSESSIVE_PLUS, 1..3),
        ("a?+", POSSESSIVE_QUESTION, 1..3),
        ("a{2}+", POSSESSIVE_BRACE, 1..5),
        ("a{2,3}+", POSSESSIVE_BRACE, 1..7),
        ("(a)*+", POSSESSIVE_STAR, 3..5),
        ("[ab]++", POSSESSIVE_PLUS, 4..6),
        ("a(?R)", RECURSION, 1..5),
        ("(a)(?1)", SUBROUTINE_NUM, 3..7),
        ("(a)(?-1)", SUBROUTINE_NUM, 3..8),
        ("(a)(?+1)(b)", SUBROUTINE_NUM, 3..8),
        ("(?0)", SUBROUTINE_NUM, 0..4),
        ("(?<n>a)(?&n)", SUBROUTINE_NAME, 7..12),
        ("(?|(a)|(b))", BRANCH_RESET, 0..3),
        ("(?(1)a|b)", CONDITIONAL, 0..3),
        ("(?(?=a)a|b)", CONDITIONAL, 0..3),
        ("a(?C1)b", CALLOUT, 1..6),
        ("a(?C)b", CALLOUT, 1..5),
        ("(*SKIP)a", VERB, 0..7),
        ("(*UTF)a", VERB, 0..6),
        ("a(*FAIL)", VERB, 1..8),
        ("(*pla:a)", VERB, 0..8),
        (r"a\G", ESC_G, 1..3),
        (r"a\Kb", ESC_K, 1..3),
        (r"a\Cb", ESC_C, 1..3),
        (r"a\R", ESC_R, 1..3),
        (r"a\X", ESC_X, 1..3),
        (r"a\Z", ESC_Z, 1..3),
        (r"\p{L}", UNICODE_PROPERTY, 0..5),
        (r"a\pL", UNICODE_PROPERTY, 1..4),
        (r"\P{Lu}x", UNICODE_PROPERTY, 0..6),
        (r"[\p{L}]", UNICODE_PROPERTY, 1..6),
        ("[[.a.]]", POSIX_COLLATING, 1..6),
        ("[[=a=]]", POSIX_COLLATING, 1..6),
        ("(?J)(?<n>a)", OPTION_J, 0..4),
        ("(?n)(a)", OPTION_N, 0..4),
        ("(?xx)a", OPTION_XX, 0..5),
        ("(?^)a", OPTION_CARET, 0..4),
        ("(?X)a", OPTION_OTHER, 0..4),
        // Position inside a longer pattern, after rewritten escapes.
        (r"\x{41}\x{42}[\x{43}](?=x)", LOOKAHEAD, 20..23),
        ("é(?=x)", LOOKAHEAD, 2..5),
    ];
    for (pattern, construct, range) in cases {
        assert_unsupported(pattern, construct, range.clone());
        // translate reports the same thing.
        assert!(matches!(translate(pattern), Err(RxError::Unsupported { .. })), "{pattern}");
    }
}

#[test]
fn look_alikes_are_not_reported() {
    for p in [
        "[(?=]",
        r"\(?=",
        "(?:a)",
        "(?i)a",
        "(?i:a)",
        "(?s)a",
        "(?is)a",
        "(?-i)a",
        "(?i-s:a)",
        "(?U)a+",
        "a{2}",
        "a{2,3}?",
        "a{2,}?",
        "a+?",
        "a*?",
        "a??",
        r"\\1",
        r"[\1]",
        r"[\12]",
        r"\++",
        r"a+\+",
        r"a\*+",
        r"\Q*+\E",
        r"\Q(?=\E",
        "[*+]",
        "[?+]+",
        "[(?<=]",
        "(?<name>x)",
        r"\(\?<=",
        "(a)|b",
        "(?#(?=)a",
        r"\\g1",
        r"\\k<n>",
        r"\\G\\K",
        "[(?R)]",
        r"\x{28}?=",
    ] {
        if let Err(e) = CompiledRx::compile(p, &RxOptions::default()) {
            panic!("{p:?} should compile: {e}");
        }
    }
}

// ------------------------------------------------------------ error ranges

#[test]
fn invalid_patterns_map_errors_to_the_original() {
    // Reported by regex-syntax, mapped back.
    assert_invalid_at("(abc", 0..1);
    assert_invalid_at("ab(c(d)", 2..3);
    assert_invalid_at("abc)", 3..4);
    assert_invalid_at("*a", 0..1);
    assert_invalid_at("a|*", 2..3);
    assert_invalid_at("a{3,2}", 1..6);
    assert_invalid_at("(?z)a", 2..3);
    assert_invalid_at(r"a\i", 1..3);
    assert_invalid_at(r"a\y", 1..3);
    // After `\x{..}` rewrites (which shorten the text) and non-ASCII bytes
    // (which lengthen it), positions still point into the original.
    assert_invalid_at(r"\x{41}\x{42}(", 12..13);
    assert_invalid_at(r"\x{41}\x{42}\i", 12..14);
    assert_invalid_at(r"\x{41}\x{000042}x{3,1}", 16..21);
    assert_invalid_at("é(", 2..3);
    assert_invalid_at("ééé)", 6..7);
    assert_invalid_at("[é]{2,1}", 4..9);
    assert_invalid_at(r"[\x{41}-\x{5a}]{9,3}", 15..20);
    assert_invalid_at(r"\Q(((\E)", 7..8);
    // Reported by the scanner itself.
    assert_invalid_at("[abc", 0..4);
    assert_invalid_at("x[^]", 1..4);
    assert_invalid_at("[z-a]", 1..4);
    assert_invalid_at(r"[\x{7a}-a]", 1..9);
    assert_invalid_at(r"a\x{100}", 1..8);
    assert_invalid_at(r"a\x{fffffffffffffffffff}", 1..23);
    assert_invalid_at(r"[\x{100}]", 1..8);
    assert_invalid_at(r"a\x{41", 1..6);
    assert_invalid_at(r"a\x{}", 1..5);
    assert_invalid_at(r"a\x{4g}", 1..6);
    assert_invalid_at(r"a\o{400}", 1..8);
    assert_invalid_at(r"[\777]", 1..5);
    assert_invalid_at(r"a\", 1..2);
    assert_invalid_at(r"a\c", 1..3);
    assert_invalid_at(r"a\u0041", 1..3);
    assert_invalid_at(r"a\U", 1..3);
    assert_invalid_at(r"[\N]", 1..3);
    assert_invalid_at(r"[\B]", 1..3);
    assert_invalid_at("[[:foo:]]", 1..8);
    assert_invalid_at("a(?#xx", 1..6);
    assert_invalid_at("(?<1a>x)", 3..6);
    assert_invalid_at("(?<a b>x)", 3..7);
    assert_invalid_at("(?<ab", 0..5);
    assert_invalid_at("(?u)a", 2..3);
    let m = assert_invalid_at(r"\x{100}", 0..7);
    assert!(m.contains("too large"), "{m}");
}

#[test]
fn error_display_names_the_construct() {
    let e = err("a(?=b)");
    let s = e.to_string();
    assert!(s.contains("lookahead `(?=...)`") && s.contains("1..4"), "{s}");
    assert_eq!(e.range(), Some(1..4));
    let s = err("(abc").to_string();
    assert!(s.starts_with("invalid regular expression at bytes 0..1"), "{s}");
}

#[test]
fn too_big() {
    let opts = RxOptions {
        dense_dfa_budget: 0,
        size_limit: 10_000,
    };
    match CompiledRx::compile(r"\w{200}[a-z]{50}", &opts) {
        Err(RxError::TooBig { message }) => assert!(!message.is_empty()),
        other => panic!("expected TooBig, got {other:?}"),
    }
}

// ---------------------------------------------------------- strategies

#[test]
fn strategy_follows_budget() {
    let small = rx("foo|bar");
    assert!(matches!(small.strategy(), Strategy::FullDfa { bytes } if bytes > 0));
    let lazy = CompiledRx::compile(
        "foo|bar",
        &RxOptions {
            dense_dfa_budget: 0,
            ..RxOptions::default()
        },
    )
    .unwrap();
    assert_eq!(lazy.strategy(), Strategy::LazyDfa);
    assert!(lazy.is_match(b"xbarx"));
    // A pattern whose DFA explodes gets the lazy DFA under a small budget.
    let big = CompiledRx::compile(
        r"[01]*1[01]{20}",
        &RxOptions {
            dense_dfa_budget: 64 * 1024,
            ..RxOptions::default()
        },
    )
    .unwrap();
    assert_eq!(big.strategy(), Strategy::LazyDfa);
    assert!(big.is_match(b"100000000000000000000"));
    let dbg = format!("{big:?}");
    assert!(dbg.contains("LazyDfa") && dbg.contains("[01]*1"), "{dbg}");
}

#[test]
fn compiled_rx_is_send_sync() {
    fn check<T: Send + Sync + std::fmt::Debug>() {}
    check::<CompiledRx>();
    let r = std::sync::Arc::new(rx(r"(?i)union\s+select"));
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let r = r.clone();
            std::thread::spawn(move || {
                let h = format!("{i} UNION  select");
                r.is_match(h.as_bytes()) && r.captures(h.as_bytes(), &mut [None])
            })
        })
        .collect();
    for h in handles {
        assert!(h.join().unwrap());
    }
}

// ------------------------------------------------------ required literals

#[test]
fn required_literal_examples() {
    assert_eq!(lits(r"(?i)union\s+select"), any_of(&["select"]));
    assert_eq!(lits("foo|bar"), any_of(&["bar", "foo"]));
    assert_eq!(lits("a*"), RequiredLiterals::None);
    assert_eq!(lits("^$"), RequiredLiterals::None);
    assert_eq!(lits(""), RequiredLiterals::None);
    assert_eq!(lits(r"\b"), RequiredLiterals::None);
    assert_eq!(lits("abc|"), RequiredLiterals::None);
    assert_eq!(lits("(?:abc){0,3}"), RequiredLiterals::None);
    assert_eq!(lits("(?:abc)?def"), any_of(&["def"]));
    assert_eq!(lits("(abc)+"), any_of(&["abc"]));
    assert_eq!(lits("[Ff][Oo][Oo]"), any_of(&["foo"]));
    assert_eq!(lits("(?i)FOO"), any_of(&["foo"]));
    assert_eq!(lits("[aA]b"), any_of(&["ab"]));
    assert_eq!(lits("[ab]c"), any_of(&["ac", "bc"]));
    assert_eq!(lits(r"\d+abc"), any_of(&["abc"]));
    assert_eq!(lits("foo|foobar"), any_of(&["foo"]));
    assert_eq!(lits("x(?:foo|barbaz)y"), any_of(&["xbarbazy", "xfooy"]));
    assert_eq!(lits(r"\bunion\s+all\s+select\b"), any_of(&["select"]));
    assert_eq!(lits(r"(?i)\bor\b\s+\d"), any_of(&["or"]));
    assert_eq!(lits(r"[a-z]+@example\.com"), any_of(&["@example.com"]));
    assert_eq!(lits(r"(?i)java\.lang\.(?:runtime|processbuilder)"), any_of(&["java.lang."]));
    assert_eq!(lits(r"\x{c2}\x{b4}"), any_of(&["\u{c2}\u{b4}"]).map_bytes(|_| vec![0xc2, 0xb4]));
    assert_eq!(lits("[^a]"), RequiredLiterals::None);
    assert_eq!(lits(r"[^\x00-\xff]"), RequiredLiterals::None);
    assert_eq!(lits("a"), any_of(&["a"]));
    // Per-branch best factor: each branch contributes its own required set.
    assert_eq!(lits(r"\d+select\d+|\d+union\d+"), any_of(&["select", "union"]));
    let l = lits(r"(?i)union\s+select");
    assert_eq!(l.min_len(), Some(6));
    assert_eq!(RequiredLiterals::None.min_len(), None);
}

impl RequiredLiterals {
    fn map_bytes(self, f: impl Fn(&[u8]) -> Vec<u8>) -> RequiredLiterals {
        match self {
            RequiredLiterals::None => RequiredLiterals::None,
            RequiredLiterals::AnyOf(v) => RequiredLiterals::AnyOf(v.iter().map(|l| f(l)).collect()),
        }
    }
}

#[test]
fn required_literal_sets_are_normalized() {
    for p in [
        r"(?i)union\s+select",
        "foo|bar|Foo|BAR|baz",
        "(?i)(?:a|b|c)d",
        r"(?i)(?:on(?:load|error|click))\s*=",
    ] {
        if let RequiredLiterals::AnyOf(v) = lits(p) {
            assert!(!v.is_empty());
            assert!(v.iter().all(|l| !l.is_empty()), "{p}");
            assert!(v.iter().all(|l| !l.iter().any(u8::is_ascii_uppercase)), "{p}");
            let mut sorted = v.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(sorted, v, "{p}");
        }
    }
}

/// Patterns for the soundness property test: alternations, classes,
/// repetitions, optional groups, `(?i)`, anchors, `\b`, lazy quantifiers.
const PROPERTY_PATTERNS: &[&str] = &[
    "foo|bar",
    r"(?i)union\s+select",
    "(?:abc)?def",
    "a*",
    "^$",
    "ab+c",
    r"(?i)<script[^>]*>",
    "[0-9]{3}-[0-9]{4}",
    r"\bselect\b",
    "x(?:foo|barbaz)?y",
    "(?i)(?:a|b|c)d",
    "(?:ab|cd)+ef",
    "(?i)[Ss]elect|[Uu]nion",
    r"\d+\.\d+",
    "^admin",
    "admin$",
    r"(?i)\bor\b\s+\d",
    "a.b",
    "a(?:b|c)*d",
    "(?:hello)?world|(?:foo)+",
    "[a-c][d-f]",
    r"(?i)\x41\x42",
    r"\x{c2}\x{b4}",
    "a.*z",
    r"(?i)java\.lang\.(?:runtime|processbuilder)",
    "(?:ab){2,3}",
    "q(?:ab){0,2}r",
    r"(?i)(?:on(?:load|error|click))\s*=",
    r"[\r\n]\s*(?:content-type|set-cookie)",
    r"(?:\.\./|\.\.\\)",
    r"(?i)(?:etc/passwd|boot\.ini)",
    r"eval\(|exec\(",
    r"^\s*from\b",
    r"(?i:select)|(?i:insert)\s+into",
    r"(?:[a-z]+)@example\.com",
    "abc|ab|a",
    "(?:x|yz)w",
    r"\bunion\s+all\s+select\b",
    "a{3}",
    "[^a-z]foo[^a-z]",
    r"\$\{jndi:",
    r"(?i)%(?:2e|c0%ae)",
    "(?U)a+b",
    r"(?i)\b(?:s(?:elect|leep)|benchmark)\b.*?\(",
    r"\d+select\d+|\d+union\d+",
    r"[Ff][Oo]+[Oo]?",
    r"(?:a|b)?(?:c|d)?e",
    r"^(?:GET|POST|HEAD)$",
];

#[test]
fn required_literals_are_sound_on_random_haystacks() {
    let mut rng = Rng::new(0x5eed_1234);
    let mut checked = 0usize;
    let mut matched = 0usize;
    for &p in PROPERTY_PATTERNS {
        let r = rx(p);
        let req = r.required_literals().clone();
        let frags = fragments(p);
        for _ in 0..3000 {
            let h = random_haystack(&mut rng, &frags);
            let m = r.is_match(&h);
            assert_eq!(m, r.is_match_meta(&h), "DFA vs meta: {p:?} on {h:?}");
            let mut slot = [None];
            assert_eq!(m, r.captures(&h, &mut slot), "captures vs is_match: {p:?} on {h:?}");
            if m {
                matched += 1;
                assert!(
                    prefilter_passes(&req, &h),
                    "UNSOUND prefilter {req:?} for {p:?}: haystack {h:?} matches"
                );
            }
            checked += 1;
        }
    }
    // The generator must actually produce matches for the test to mean much.
    assert!(matched > checked / 10, "only {matched} of {checked} haystacks matched");
}

#[test]
fn required_literals_are_sound_exhaustively_on_a_small_alphabet() {
    // Every string of length <= 6 over {a, b, c, A, \n}.
    const ALPHA: &[u8] = b"abcA\n";
    let patterns = [
        "ab|c",
        "(?i)abc",
        "a(?:b|c)*a",
        "(?:ab)?c",
        "^ab",
        "b$",
        "a+b+",
        "[ab]c",
        "(?:a|bc){2}",
        r"\bab\b",
        "a?b?c",
        "(?:aa|b)+c|ca",
    ];
    let compiled: Vec<CompiledRx> = patterns.iter().map(|p| rx(p)).collect();
    let mut buf = Vec::new();
    for len in 0..=6u32 {
        for n in 0..ALPHA.len().pow(len) {
            buf.clear();
            let mut k = n;
            for _ in 0..len {
                buf.push(ALPHA[k % ALPHA.len()]);
                k /= ALPHA.len();
            }
            for r in &compiled {
                let m = r.is_match(&buf);
                assert_eq!(m, r.is_match_meta(&buf), "{:?} on {buf:?}", r.pattern());
                if m {
                    assert!(
                        prefilter_passes(r.required_literals(), &buf),
                        "UNSOUND {:?} for {:?} on {buf:?}",
                        r.required_literals(),
                        r.pattern()
                    );
                }
            }
        }
    }
}

// ------------------------------------------------------------ robustness

#[test]
fn random_patterns_never_panic() {
    const PIECES: &[&str] = &[
        "\\", "(", ")", "[", "]", "{", "}", "?", "*", "+", "|", "^", "$", ".", "-", ":", "=", "!",
        "<", ">", "'", "P", "R", "&", "x", "0", "1", "2", "9", "a", "z", "Q", "E", "#", " ",
        "\n", "é", "g", "k", "c", "o", "p", "{2}", "{1,", ",", "x{", "(?", "(?<", "[:", ":]",
        "[[:alpha:]]", "\\x{", "ff", "100", "\\Q", "\\E", "(?x)", "(?i)", "(*", "~", "\u{2603}",
        "\\b", "\\B", "\\d", "\\w", "\\s", "\\h", "\\v", "\\N", "\\0", "\\c", "\\e", "\\o{",
    ];
    let mut rng = Rng::new(42);
    let opts = RxOptions {
        dense_dfa_budget: 16 * 1024,
        size_limit: 1 << 20,
    };
    let mut ok = 0usize;
    for _ in 0..4000 {
        let mut p = String::new();
        for _ in 0..rng.below(16) {
            p.push_str(*rng.pick(PIECES));
        }
        let translated = translate(&p);
        let compiled = CompiledRx::compile(&p, &opts);
        if let Err(e) = &compiled {
            if let Some(r) = e.range() {
                assert!(r.start <= r.end && r.end <= p.len(), "{p:?}: {e:?}");
                let _ = e.to_string();
            }
        }
        if let Ok(r) = &compiled {
            ok += 1;
            assert!(translated.is_ok());
            let h = random_haystack(&mut rng, &fragments(&p));
            assert_eq!(r.is_match(&h), r.is_match_meta(&h), "{p:?} on {h:?}");
            let _ = r.captures(&h, &mut [None, None, None]);
        }
        if let Ok(t) = &translated {
            assert!(t.is_ascii(), "{p:?} -> {t:?}");
        }
    }
    assert!(ok > 100, "only {ok} random patterns compiled");
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let deep = format!("{}a{}", "(".repeat(5000), ")".repeat(5000));
    assert!(matches!(err(&deep), RxError::Invalid { .. }));
    let ok = format!("{}a{}", "(?:".repeat(100), ")".repeat(100));
    assert!(rx(&ok).is_match(b"a"));
}

// -------------------------------------------------------------------- CRS

fn crs_root() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("WAF_CRS_DIR") {
        return Some(PathBuf::from(dir));
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/crs");
    dir.join("rules").is_dir().then_some(dir)
}

/// Reads one SecLang argument starting at `s` (after leading white space):
/// a double-quoted string (with `\"` meaning `"`) or a bare word.
fn seclang_arg(s: &str) -> Option<(String, &str)> {
    let s = s.trim_start();
    if let Some(rest) = s.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = rest.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' if rest[i + 1..].starts_with('"') => {
                    out.push('"');
                    chars.next();
                }
                '"' => return Some((out, &rest[i + 1..])),
                _ => out.push(c),
            }
        }
        None
    } else {
        let end = s.find(char::is_whitespace).unwrap_or(s.len());
        (end > 0).then(|| (s[..end].to_string(), &s[end..]))
    }
}

/// `(label, pattern)` of every `@rx` in `rules/*.conf`; a quick reader for
/// this test only (the real parser lives elsewhere).
fn crs_rx_patterns(root: &Path) -> Vec<(String, String)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("rules"))
        .expect("read rules dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "conf"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("read rule file");
        let mut logical = String::new();
        let mut statements = Vec::new();
        for line in text.lines() {
            if let Some(stripped) = line.strip_suffix('\\') {
                logical.push_str(stripped);
                continue;
            }
            logical.push_str(line);
            statements.push(std::mem::take(&mut logical));
        }
        for st in statements {
            let Some(rest) = st.trim_start().strip_prefix("SecRule") else {
                continue;
            };
            let Some((_vars, rest)) = seclang_arg(rest) else {
                continue;
            };
            let Some((op, rest)) = seclang_arg(rest) else {
                continue;
            };
            let op = op.strip_prefix('!').unwrap_or(&op);
            let Some(pattern) = op.strip_prefix("@rx") else {
                continue;
            };
            let pattern = pattern.trim_start_matches(' ').to_string();
            let id = rest
                .split("id:")
                .nth(1)
                .map(|s| s.chars().take_while(char::is_ascii_digit).collect::<String>())
                .unwrap_or_else(|| "chain".to_string());
            let file = f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            out.push((format!("{file}:{id}"), pattern));
        }
    }
    out
}

#[test]
fn crs_rx_patterns_compile() {
    let Some(root) = crs_root() else {
        eprintln!("skipping: no CRS at ../shared/crs (set WAF_CRS_DIR to a CRS root)");
        return;
    };
    let patterns = crs_rx_patterns(&root);
    let opts = RxOptions::default();
    let mut full = 0usize;
    let mut lazy = 0usize;
    let mut dfa_bytes = 0usize;
    let mut hist: BTreeMap<String, usize> = BTreeMap::new();
    let mut slowest: Vec<(Duration, String)> = Vec::new();
    let mut failures = Vec::new();
    let mut compiled = Vec::new();
    let start = Instant::now();
    for (label, p) in &patterns {
        let t = Instant::now();
        match CompiledRx::compile(p, &opts) {
            Ok(r) => {
                slowest.push((t.elapsed(), label.clone()));
                match r.strategy() {
                    Strategy::FullDfa { bytes } => {
                        full += 1;
                        dfa_bytes += bytes;
                    }
                    Strategy::LazyDfa => lazy += 1,
                }
                let bucket = match r.required_literals().min_len() {
                    None => "none".to_string(),
                    Some(n @ 1..=4) => format!("{n}"),
                    Some(_) => ">=5".to_string(),
                };
                *hist.entry(bucket).or_default() += 1;
                compiled.push(r);
            }
            Err(e) => failures.push(format!("{label}: {e}")),
        }
    }
    let total = start.elapsed();
    slowest.sort_by(|a, b| b.0.cmp(&a.0));
    eprintln!(
        "CRS @rx: {} patterns, {} compiled in {:.2?} (budget {} KiB): {full} full DFA \
         ({} KiB total), {lazy} lazy DFA",
        patterns.len(),
        compiled.len(),
        total,
        opts.dense_dfa_budget / 1024,
        dfa_bytes / 1024,
    );
    eprintln!("required-literal min length histogram: {hist:?}");
    eprintln!("slowest: {:?}", &slowest[..slowest.len().min(5)]);
    assert!(failures.is_empty(), "CRS patterns failed:\n{}", failures.join("\n"));
    assert_eq!(patterns.len(), 318, "expected 318 @rx operators in CRS v4.28");

    // Light cross-check on every pattern: DFA == meta and prefilter soundness
    // on haystacks built from the pattern's own fragments.
    let mut rng = Rng::new(7);
    for r in &compiled {
        let frags = fragments(r.pattern());
        for _ in 0..50 {
            let h = random_haystack(&mut rng, &frags);
            let m = r.is_match(&h);
            assert_eq!(m, r.is_match_meta(&h), "{:?} on {h:?}", r.pattern());
            if m {
                assert!(
                    prefilter_passes(r.required_literals(), &h),
                    "UNSOUND {:?} for {:?} on {h:?}",
                    r.required_literals(),
                    r.pattern()
                );
            }
        }
    }
}
