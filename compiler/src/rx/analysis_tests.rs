use super::*;
use waf_test_support::XorShift;

fn compile(p: &str) -> CompiledRx {
    CompiledRx::compile(p, &RxOptions::default()).unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn lower(x: &[u8]) -> Vec<u8> {
    x.iter().map(u8::to_ascii_lowercase).collect()
}

/// Pieces to build inputs from: the pattern's own alphanumeric runs and
/// characters (and the given extra words), punctuation, white space.
fn vocabulary(pattern: &str, extra: &[&str]) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = Vec::new();
    let bytes = pattern.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_alphanumeric() {
            let s = i;
            while i < bytes.len() && bytes[i].is_ascii_alphanumeric() {
                i += 1;
            }
            v.push(bytes[s..i].to_vec());
            // Also every sub-run starting at s (escapes like `\x41` glue
            // letters onto words) and the single characters.
            for &c in &bytes[s..i] {
                v.push(vec![c]);
            }
            if i - s > 1 {
                v.push(bytes[s + 1..i].to_vec());
            }
        } else {
            v.push(vec![bytes[i]]);
            i += 1;
        }
    }
    for w in extra {
        v.push(w.as_bytes().to_vec());
    }
    for p in [
        " ", "\t", "\n", "\r\n", "=", "<", ">", "'", "\"", ";", "(", ")", "/", ".", "-", "_", "1",
        "42", "A", "z", "Z", "\x00", "\u{7f}",
    ] {
        v.push(p.as_bytes().to_vec());
    }
    v
}

fn random_input(rng: &mut XorShift, vocab: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    let n = rng.below(7);
    for _ in 0..n {
        match rng.below(10) {
            0 => out.push(rng.byte()),
            1 => out.push(b"AZaz09 _-=<>\n\xff\x80"[rng.below(15)]),
            _ => {
                let w = &vocab[rng.below(vocab.len())];
                for &b in w {
                    // Random case flips.
                    let b = if b.is_ascii_alphabetic() && rng.one_in(3) {
                        b ^ 0x20
                    } else {
                        b
                    };
                    out.push(b);
                }
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Oracle
// ---------------------------------------------------------------------------

#[test]
fn equivalent_oracle_basics() {
    let h = |p: &str| parse(p).unwrap();
    assert_eq!(equivalent(&h("a|b"), &h("[ab]")), Some(true));
    assert_eq!(equivalent(&h("foo|far"), &h("f(?:oo|ar)")), Some(true));
    assert_eq!(equivalent(&h("ab"), &h("abc")), Some(false));
    // Unanchored "contains" semantics: `a+` and `a` match the same haystacks.
    assert_eq!(equivalent(&h("a+"), &h("a")), Some(true));
    assert_eq!(equivalent(&h("a$"), &h("a")), Some(false));
    assert_eq!(equivalent(&h(r"\bfoo"), &h("foo")), Some(false));
    assert_eq!(equivalent(&h("^"), &h("x*")), Some(true));
    // Witnesses really distinguish.
    for (a, b) in [
        ("a$", "a"),
        (r"\bfoo", "foo"),
        ("ab", "abc"),
        ("[A-Z]", "[a-z]"),
        ("^a", "a"),
    ] {
        let w = distinguishing_input(&h(a), &h(b)).unwrap().unwrap();
        assert_ne!(
            compile(a).is_match(&w),
            compile(b).is_match(&w),
            "{a} vs {b}: {w:?}"
        );
    }
}

// ---------------------------------------------------------------------------
// 1. case_flag_rewrite
// ---------------------------------------------------------------------------

/// Patterns for which the rewrite must be found.
const CASE_SOME: &[&str] = &[
    r"(?:select|union)\s+from",
    r"<script[^>]*>",
    r"\bon\w+\s*=",
    r"[a-z]+\d",
    r"union\s+all\s+select",
    r"^foo",
    r"^(?:get|post)$",
    r"foo$",
    r"\d+",
    r"[^a-z]",
    r"[^a]",
    r"[^>]+",
    r".",
    r"\w+@\w+\.\w+",
    r"(?s)a.b",
    r"(?m)^x",
    r"\x61\x62",
    r"[[:lower:]]+",
    r"[[:alpha:]]",
    r"[[:^alpha:]]",
    r"[a-zA-Z]",
    r"[Aa]bc",
    r"(?i:abc)d",
    r"java\s*script:",
    r"on(?:load|error|mouseover)\s*=",
    r"<\?php",
    r"\.\./",
    r"%(?:2e|2f|5c)",
    r"(?:^|[^\w])eval\(",
    r"document\.cookie",
    r"\bor\b\s+\d+\s*=\s*\d+",
    r"[\x00-\x1f]",
    r"\x{e9}t\x{e9}",
    r"\x80+",
    r"a{2,3}b",
    r"\Qa.b\E",
    r"(?x) a b # comment",
    r"(a)(b)",
    r"",
    r"^$",
    r"\W\S\D",
];

/// Patterns for which the rewrite must be refused.
const CASE_NONE: &[&str] = &[
    r"[A-Z]",
    r"Select",
    r"\x41",
    r"[^A-Z]",
    r"(?-i)ABC",
    r"(?-i)abc\d", // `(?i)(?-i)abc` is case-sensitive: `ABC1` differs
    r"(?-i:A)",
    r"a(?-i:B)",
    r"[[:upper:]]",
    r"[A-Za]",
    r"[^A-Za]",
    r"x|Y",
    r"(?i)select",  // already case-insensitive: nothing to gain
    r"(?is)select", // likewise
    r"(?=a)",       // does not translate
    r"a)",          // does not parse
];

#[test]
fn case_flag_rewrite_expected() {
    for p in CASE_SOME {
        assert_eq!(
            case_flag_rewrite(p),
            Some(format!("(?i){p}")),
            "expected a rewrite for {p:?}"
        );
    }
    for p in CASE_NONE {
        assert_eq!(case_flag_rewrite(p), None, "expected None for {p:?}");
    }
}

#[test]
fn case_flag_rewrite_none_cases_are_really_different() {
    // Every refused pattern that compiles and is not already `(?i)` has an
    // input on which the rewrite would change the verdict.
    for p in CASE_NONE {
        let Ok(h) = parse(p) else { continue };
        if p.starts_with("(?i") {
            continue;
        }
        let pi = format!("(?i){p}");
        let hi = parse(&pi).unwrap();
        let w = distinguishing_input(&lowercase_preimage(&h).unwrap(), &hi)
            .unwrap()
            .unwrap_or_else(|| panic!("{p}: no witness"));
        assert_ne!(
            compile(p).is_match(&lower(&w)),
            compile(&pi).is_match(&w),
            "{p}: witness {w:?}"
        );
    }
}

#[test]
fn case_flag_rewrite_differential() {
    let mut rng = XorShift::new(0xCA5E);
    let mut checked = 0;
    for p in CASE_SOME {
        let rewritten = case_flag_rewrite(p).unwrap();
        let (orig, new) = (compile(p), compile(&rewritten));
        let vocab = vocabulary(p, &["SELECT", "Union", "FROM", "<SCRIPT>", "OnLoad="]);
        for _ in 0..3000 {
            let x = random_input(&mut rng, &vocab);
            assert_eq!(
                orig.is_match(&lower(&x)),
                new.is_match(&x),
                "{p} / {rewritten} on {x:?}"
            );
            checked += 1;
        }
    }
    assert!(checked > 100_000);
}

/// The differential also agrees with the refusals: for refused patterns some
/// random input usually shows the difference (not required for soundness,
/// but shows the test inputs are good enough to find real differences).
#[test]
fn case_flag_rewrite_differential_finds_refused_differences() {
    let mut rng = XorShift::new(0xD1FF);
    for p in [r"[A-Z]", "Select", r"\x41", r"[^A-Z]", r"(?-i)ABC", "x|Y"] {
        let (orig, new) = (compile(p), compile(&format!("(?i){p}")));
        let vocab = vocabulary(p, &[]);
        let found = (0..5000).any(|_| {
            let x = random_input(&mut rng, &vocab);
            orig.is_match(&lower(&x)) != new.is_match(&x)
        });
        assert!(found, "{p}: no difference found");
    }
}

// ---------------------------------------------------------------------------
// 2. word_alternation
// ---------------------------------------------------------------------------

fn wa(words: &[&str], ci: bool) -> Option<WordAlternation> {
    Some(WordAlternation {
        words: words.iter().map(|w| w.to_string()).collect(),
        case_insensitive: ci,
    })
}

#[test]
fn word_alternation_positive() {
    assert_eq!(word_alternation("foo|bar"), wa(&["foo", "bar"], false));
    assert_eq!(word_alternation("(?:foo|bar)"), wa(&["foo", "bar"], false));
    assert_eq!(word_alternation("(foo|bar)"), wa(&["foo", "bar"], false));
    assert_eq!(
        word_alternation("(?i)(?:union|select)"),
        wa(&["union", "select"], true)
    );
    assert_eq!(
        word_alternation("(?i)union|select"),
        wa(&["union", "select"], true)
    );
    assert_eq!(
        word_alternation("(?i:Union|SELECT)"),
        wa(&["Union", "SELECT"], true)
    );
    assert_eq!(word_alternation(r"a\.b|c"), wa(&["a.b", "c"], false));
    assert_eq!(word_alternation("foo"), wa(&["foo"], false));
    assert_eq!(
        word_alternation(r"\.\./|\.\.\\"),
        wa(&["../", r"..\"], true)
    );
    assert_eq!(word_alternation(r"[.]x|[\$]y"), wa(&[".x", "$y"], false));
    assert_eq!(word_alternation("<?php|<%"), None); // `?` is a quantifier
    assert_eq!(word_alternation(r"<\?php|<%"), wa(&["<?php", "<%"], false));
    assert_eq!(word_alternation("Foo|BAR"), wa(&["Foo", "BAR"], false));
    assert_eq!(word_alternation("%00|%0a"), wa(&["%00", "%0a"], false));
    assert_eq!(word_alternation("12|34"), wa(&["12", "34"], true));
}

#[test]
fn word_alternation_negative() {
    for p in [
        "^foo|bar",
        "foo|bar$",
        r"foo\b",
        r"\bfoo",
        "fo+",
        "fo?",
        "foo bar|baz",
        r"foo\ bar",
        "[ab]c|d",
        "[a-c]",
        "(?:)",
        "foo|",
        "|foo",
        "foo||bar",
        "(?:foo|bar)baz",
        "(?:foo)|(?:bar)",
        ".foo",
        r"\d",
        r"\x41",
        "(?s)foo",
        "a{2}",
        "caf\u{e9}",
        "(?=foo)",
        "",
        "(?i)",
        "(foo|bar",
    ] {
        assert_eq!(word_alternation(p), None, "{p:?}");
    }
}

#[test]
fn word_alternation_differential() {
    let mut rng = XorShift::new(0x0A1E);
    for p in [
        "foo|bar",
        "(?:foo|bar)",
        "(?i)(?:union|select)",
        r"a\.b|c",
        "Foo|BAR",
        "(?i:Union|SELECT)",
        r"\.\./|\.\.\\",
        "<script|javascript:|vbscript:",
        "12|34",
        "ab|abc|b",
        "x",
    ] {
        let w = word_alternation(p).unwrap_or_else(|| panic!("{p}"));
        let rx = compile(p);
        let vocab = vocabulary(p, &[]);
        for _ in 0..4000 {
            let x = random_input(&mut rng, &vocab);
            let hay = if w.case_insensitive {
                lower(&x)
            } else {
                x.clone()
            };
            let expected = w.words.iter().any(|word| {
                let word = if w.case_insensitive {
                    word.to_ascii_lowercase()
                } else {
                    word.clone()
                };
                memchr::memmem::find(&hay, word.as_bytes()).is_some()
            });
            assert_eq!(rx.is_match(&x), expected, "{p} on {x:?}");
        }
    }
}

// ---------------------------------------------------------------------------
// 3. literal_advice
// ---------------------------------------------------------------------------

fn bytes(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

#[test]
fn required_byte_set_basics() {
    let rbs = |p: &str| required_byte_set(&parse(p).unwrap());
    assert_eq!(rbs(r"\w+\s*=\s*\d"), Some(bytes("=")));
    assert_eq!(rbs(r"\d+\s*[<>]\s*\d+"), Some(bytes("<>")));
    assert_eq!(rbs("a|b"), Some(bytes("ab")));
    assert_eq!(rbs("x*"), None);
    assert_eq!(rbs(r"\w+").map(|s| s.len()), Some(63)); // just below the limit
    assert_eq!(rbs(r"[\w-]+"), None); // 64 bytes
    assert_eq!(rbs("."), None);
    assert_eq!(rbs("^$"), None);
    // The rarest byte of a literal: punctuation over letters.
    assert_eq!(rbs("ab;cd"), Some(bytes(";")));
    assert_eq!(rbs("(?i)sel"), Some(bytes("Ll")));
    assert_eq!(rbs(r"(?:a|)x"), Some(bytes("x")));
}

#[test]
fn literal_advice_examples() {
    let texts = |p: &'static str, adv: &LiteralAdvice| -> Vec<&'static str> {
        adv.branches.iter().map(|b| &p[b.range.clone()]).collect()
    };
    // `=` and `<`/`>` are 1-2-byte required literals here (classes of up to
    // 10 bytes are expanded by literals.rs): weak, so there is advice, and
    // the branch with a strong literal is told apart from the weak one.
    let adv = literal_advice(r"\w+\s*=\s*\d").unwrap();
    assert_eq!(adv.branches.len(), 1);
    assert!(adv.branches[0]
        .literals
        .iter()
        .all(|l| l.len() < MIN_SCAN_LEN));
    let p = r"(?:select.*from|\d+\s*[<>]\s*\d+)";
    let adv = literal_advice(p).unwrap();
    assert_eq!(adv.branches[0].literals, vec![bytes("select")]);
    assert!(adv.branches[1]
        .literals
        .iter()
        .all(|l| l.len() < MIN_SCAN_LEN));
    // A strong literal in every match: nothing to advise.
    assert_eq!(literal_advice(r"(?:union\s+select|select.*from)"), None);

    // One empty-matching branch spoils the prefilter of the whole.
    let p = r"(?:select.*from|\d+\s*[<>]\s*\d+|x*)";
    let adv = literal_advice(p).unwrap();
    assert_eq!(texts(p, &adv), ["select.*from", r"\d+\s*[<>]\s*\d+", "x*"]);
    assert_eq!(adv.branches[0].literals, vec![bytes("select")]);
    assert!(!adv.branches[1].literals.is_empty());
    assert!(adv.branches[1]
        .literals
        .iter()
        .all(|l| l[0] == b'<' || l[0] == b'>'));
    assert_eq!(adv.branches[1].required_bytes, None);
    assert!(!adv.branches[0].matches_empty && !adv.branches[1].matches_empty);
    assert!(adv.branches[2].matches_empty);
    assert_eq!(adv.branches[2].literals, Vec::<Vec<u8>>::new());
    assert_eq!(adv.branches[2].required_bytes, None);

    // Leading flags and anchors around the outer group.
    let p = r"(?i)^(?:abc|x*|[<>]+)$";
    let adv = literal_advice(p).unwrap();
    assert_eq!(texts(p, &adv), ["abc", "x*", "[<>]+"]);
    assert_eq!(adv.branches[0].literals, vec![bytes("abc")]);
    assert!(adv.branches[1].matches_empty);
    assert_eq!(adv.branches[2].literals, vec![bytes("<"), bytes(">")]);

    // Wide classes: required bytes instead of literals.
    let p = r"[\x00-\x08\x0b\x0c\x0e-\x1f]";
    let adv = literal_advice(p).unwrap();
    assert_eq!(adv.branches.len(), 1);
    assert_eq!(adv.branches[0].range, 0..p.len());
    let expected: Vec<u8> = (0u8..0x20).filter(|b| ![9, 10, 13].contains(b)).collect();
    assert_eq!(adv.branches[0].required_bytes, Some(expected));
    let adv = literal_advice(r"[a-z]+[A-Z0-9]+").unwrap();
    assert_eq!(
        adv.branches[0].required_bytes,
        Some((b'a'..=b'z').collect::<Vec<u8>>())
    );
    assert_eq!(
        literal_advice(r"[^\w]{3}").unwrap().branches[0].required_bytes,
        None
    );

    // Top-level alternation without a group; the first branch keeps `(?i)`.
    let p = r"(?i)[p-z][\x00-\x1f]|[\x00-\x1f]\W|x*";
    let adv = literal_advice(p).unwrap();
    assert_eq!(
        texts(p, &adv),
        [r"(?i)[p-z][\x00-\x1f]", r"[\x00-\x1f]\W", "x*"]
    );
    // `(?i)` applies: 22 letters, not 11.
    let mut pz: Vec<u8> = (b'P'..=b'Z').chain(b'p'..=b'z').collect();
    pz.sort();
    assert_eq!(adv.branches[0].required_bytes, Some(pz.clone()));
    assert_eq!(
        adv.branches[1].required_bytes,
        Some((0u8..0x20).collect::<Vec<u8>>())
    );

    // Flags set inside one branch carry into the next.
    let p = r"a(?i)\w|[p-z][\x00-\x1f]|x*";
    let adv = literal_advice(p).unwrap();
    assert_eq!(texts(p, &adv), [r"a(?i)\w", r"[p-z][\x00-\x1f]", "x*"]);
    assert_eq!(adv.branches[1].required_bytes, Some(pz));

    // An empty branch, located where it is.
    let adv = literal_advice("(?:ab|)").unwrap();
    assert_eq!(adv.branches.len(), 2);
    assert!(adv.branches[1].matches_empty);
    assert_eq!(adv.branches[1].range, 6..6);

    // Escapes, classes and `\Q..\E` with `|` inside do not split.
    let p = r"[|(]\d|\Q|(\E\w|\|\s|x*";
    let adv = literal_advice(p).unwrap();
    assert_eq!(texts(p, &adv), [r"[|(]\d", r"\Q|(\E\w", r"\|\s", "x*"]);
    assert_eq!(adv.branches[1].literals, vec![bytes("|(")]);

    let p = r"\Qa|\E(?#x|y)|(?:)";
    let adv = literal_advice(p).unwrap();
    assert_eq!(texts(p, &adv), [r"\Qa|\E(?#x|y)", "(?:)"]);
    let p = r"^(?:\Q<\E[\x00-\x1f]|)$";
    let adv = literal_advice(p).unwrap();
    assert_eq!(texts(p, &adv), [r"\Q<\E[\x00-\x1f]", ""]);
    assert_eq!(adv.branches[1].range, 21..21);

    // Extended mode: comments are dropped by the translation.
    let p = "(?x) [\\x00-\\x1f] # c|d\n | x*";
    let adv = literal_advice(p).unwrap();
    assert_eq!(adv.branches.len(), 2);
    assert_eq!(
        adv.branches[0].required_bytes.as_ref().map(Vec::len),
        Some(32)
    );

    // Patterns with required literals need no advice; broken ones get none.
    assert_eq!(literal_advice(r"(?i)union\s+select"), None);
    assert_eq!(literal_advice("foo|bar"), None);
    assert_eq!(literal_advice("(?=x)"), None);
    assert_eq!(literal_advice("a)"), None);
}

const ADVICE_PATTERNS: &[&str] = &[
    r"(?:select.*from|\d+\s*[<>]\s*\d+|x*)",
    r"(?i)^(?:abc|x*|[<>]+)$",
    r"[\x00-\x08\x0b\x0c\x0e-\x1f]",
    r"[a-z]+[A-Z0-9]+",
    r"(?i)[p-z][\x00-\x1f]|[\x00-\x1f]\W|x*",
    r"a(?i)\w|[p-z][\x00-\x1f]|x*",
    r"[^\w]{3}",
    r"(?:[g-z]{2}|[\x00-\x1f])+[^a]",
    r"\s*[!-/]+\w|[:-@]{2}",
    r"^\W+$|[0-9a-f]{4}",
    r"(?:ab|)",
];

/// Soundness of `required_bytes`: every random input that a branch (compiled
/// alone, with the branch's flags) matches contains one of its bytes; and a
/// branch with `matches_empty == false` never matches "".
#[test]
fn literal_advice_differential() {
    let mut rng = XorShift::new(0xADF1CE);
    let mut hits = 0;
    for p in ADVICE_PATTERNS {
        let adv = literal_advice(p).unwrap_or_else(|| panic!("{p}: expected advice"));
        let (translated, map) = translate_mapped(p).unwrap();
        let ast = parse_ast(&translated).unwrap();
        let raws = top_branches(&translated, &ast, &map);
        assert_eq!(raws.len(), adv.branches.len());
        for (raw, b) in raws.iter().zip(&adv.branches) {
            // Compile the branch alone, as the analysis parsed it.
            let text = format!(
                "{FLAGS_PREFIX}{}{}",
                raw.flags,
                &translated[raw.span.clone()]
            );
            let h = parse_translated_text(&text).unwrap();
            let re = regex_automata::meta::Builder::new()
                .configure(regex_automata::meta::Config::new().utf8_empty(false))
                .build_from_hir(&h)
                .unwrap();
            if !b.matches_empty {
                assert!(!re.is_match(&b""[..]), "{p}: branch matched empty");
            }
            let Some(req) = &b.required_bytes else {
                continue;
            };
            let mut vocab = vocabulary(p, &["select", "from", "OR", "and"]);
            for &c in req {
                vocab.push(vec![c]);
            }
            for _ in 0..4000 {
                let x = random_input(&mut rng, &vocab);
                if re.is_match(&x) {
                    hits += 1;
                    assert!(
                        x.iter().any(|c| req.contains(c)),
                        "{p}: branch {:?} matched {x:?} without any of {req:?}",
                        &p[b.range.clone()]
                    );
                }
            }
        }
    }
    assert!(hits > 1000, "too few matching inputs: {hits}");
}

#[test]
fn ignores_lowercasing_examples() {
    for p in [
        "(?i)select",
        "(?is)union.*select",
        r"[a-zA-Z]+\d",
        r"\d+\s*=",
        "(?i)(?:a|b)c",
    ] {
        assert!(ignores_lowercasing(p), "{p}");
    }
    for p in [
        "select",
        "[a-z]+",
        "(?i)a(?-i)b",
        "(?i)x(?s-i:y)",
        "[A-Z]",
        "(?i",
    ] {
        assert!(!ignores_lowercasing(p), "{p}");
    }
    // What it claims, checked on the engine: P(x) == P(lower(x)).
    let mut rng = XorShift::new(7);
    for p in ["(?i)select", r"[a-zA-Z]+\d", r"\d+\s*="] {
        let rx = CompiledRx::compile(p, &RxOptions::default()).unwrap();
        for _ in 0..2000 {
            let x: Vec<u8> = (0..rng.below(8))
                .map(|_| *rng.pick(b"sSeElLcCtT1= aZ".as_slice()))
                .collect();
            assert_eq!(
                rx.is_match(&x),
                rx.is_match(&x.to_ascii_lowercase()),
                "{p} {x:?}"
            );
        }
    }
}
