//! A linear-time *relaxation* of a PCRE-only pattern, for its prefilter.
//!
//! A pattern that `WafPcreFallback On` runs on PCRE2 cannot be parsed by
//! regex-syntax, so its required literals cannot be computed directly. But
//! the constructs that make it PCRE-only can each be replaced by one that
//! matches *at least* the same haystacks:
//!
//! * a lookaround (`(?=..)`, `(?!..)`, `(?<=..)`, `(?<!..)`) is a zero-width
//!   condition: an empty group in its place only accepts more;
//! * an atomic group `(?>x)` or a possessive quantifier `x*+` forbids
//!   backtracking into `x`: the plain group or quantifier accepts more;
//! * a backreference (`\1`, `\g{1}`, `\k<n>`, `(?P=n)`) matches one
//!   particular string: `(?s:.*)` matches it too.
//!
//! The result matches a superset of the haystacks the pattern matches, so a
//! literal that every match of the result contains is in every match of the
//! pattern: the result's required literals are a sound prefilter for it.
//! Anything else (recursion, conditionals, `\K`, verbs, ...) is not relaxed:
//! [`relaxed`] gives up, and the pattern runs on every value.

use super::translate::{names, translate};
use super::RxError;

/// Rewrites at most this many constructs before giving up.
const MAX_REWRITES: usize = 64;

/// A pattern that matches every haystack `pattern` matches and that the
/// linear-time translation accepts; `None` when that cannot be done.
pub(crate) fn relaxed(pattern: &str) -> Option<String> {
    let mut p = pattern.to_string();
    for _ in 0..MAX_REWRITES {
        let (construct, range) = match translate(&p) {
            Ok(_) => return Some(p),
            Err(RxError::Unsupported { construct, range }) => (construct, range),
            Err(_) => return None,
        };
        let head = p.get(range.clone())?;
        let rewritten = match construct {
            names::LOOKAHEAD | names::NEG_LOOKAHEAD | names::LOOKBEHIND | names::NEG_LOOKBEHIND => {
                // An empty group, not nothing: a quantifier after the
                // lookaround must not move onto the atom before it
                // (`x(?=y){2}` is not `x{2}`).
                let close = group_end(&p, range.start)?;
                format!("{}(?:){}", &p[..range.start], &p[close + 1..])
            }
            names::ATOMIC if head == "(?>" => {
                format!("{}(?:{}", &p[..range.start], &p[range.end..])
            }
            names::POSSESSIVE_STAR
            | names::POSSESSIVE_PLUS
            | names::POSSESSIVE_QUESTION
            | names::POSSESSIVE_BRACE
                if head.ends_with('+') =>
            {
                format!("{}{}", &p[..range.end - 1], &p[range.end..])
            }
            names::BACKREF | names::BACKREF_G | names::BACKREF_K | names::BACKREF_P => {
                format!("{}(?s:.*){}", &p[..range.start], &p[range.end..])
            }
            _ => return None,
        };
        p = rewritten;
    }
    None
}

/// The index of the `)` that closes the group opened at `open` (which holds
/// `(`), skipping escapes, `\Q...\E` quotes, character classes and
/// `(?#...)` comments. `None` if the group is not closed.
fn group_end(p: &str, open: usize) -> Option<usize> {
    let b = p.as_bytes();
    if b.get(open) != Some(&b'(') {
        return None;
    }
    let mut depth = 0usize;
    let mut i = open;
    while i < b.len() {
        match b[i] {
            b'\\' if b.get(i + 1) == Some(&b'Q') => {
                // Literal text up to `\E` (or the end).
                i = find(b, i + 2, b"\\E").map_or(b.len(), |e| e + 2);
                continue;
            }
            b'\\' => i += 2,
            b'[' => i = class_end(b, i)? + 1,
            b'(' if b[i..].starts_with(b"(?#") => i = find(b, i, b")")? + 1,
            b'(' => {
                depth += 1;
                i += 1;
            }
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    None
}

/// The index of the `]` that ends the class opened at `open`: a `]` first
/// (after an optional `^`) is a literal, as are escaped bytes and POSIX
/// classes `[:name:]`.
fn class_end(b: &[u8], open: usize) -> Option<usize> {
    let mut i = open + 1;
    if b.get(i) == Some(&b'^') {
        i += 1;
    }
    if b.get(i) == Some(&b']') {
        i += 1;
    }
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'[' if b.get(i + 1) == Some(&b':') => {
                i = find(b, i + 2, b":]").map_or(i + 1, |e| e + 2);
            }
            b']' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

fn find(b: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    b.get(from..)
        .and_then(|rest| memchr::memmem::find(rest, needle))
        .map(|at| from + at)
}

#[cfg(test)]
mod tests {
    use super::relaxed;

    #[test]
    fn each_construct_is_relaxed_to_a_superset() {
        for (pattern, want) in [
            ("select(?!\\s+1)", "select(?:)"),
            ("(?<=user)name", "(?:)name"),
            ("x(?<!y)z", "x(?:)z"),
            ("a(?=(b|c))d", "a(?:)d"),
            ("(?>ab|a)b", "(?:ab|a)b"),
            ("a++b", "a+b"),
            ("a*+b?+c{2,3}+", "a*b?c{2,3}"),
            ("(\\w)\\1", "(\\w)(?s:.*)"),
            ("(?<n>a)\\k<n>", "(?<n>a)(?s:.*)"),
            ("(a)\\g{1}", "(a)(?s:.*)"),
            ("(?=[)(])x", "(?:)x"),
            ("(?=[]a])x", "(?:)x"),
            ("(?=[[:alpha:])])x", "(?:)x"),
            ("(?=\\))x", "(?:)x"),
            ("(?=\\Q)(\\E)x", "(?:)x"),
            ("(?=(?#(a)x)y", "(?:)y"),
            ("^(?:(?!script).)*$", "^(?:(?:).)*$"),
            ("x(?=y){2}", "x(?:){2}"),
        ] {
            assert_eq!(relaxed(pattern).as_deref(), Some(want), "{pattern}");
        }
    }

    #[test]
    fn what_cannot_be_relaxed_gives_up() {
        for pattern in [
            "a(?R)b",
            "(a)(?(1)b|c)",
            "a\\Kb",
            "(*FAIL)",
            "(?=a",
            "(?=[a)x",
        ] {
            assert_eq!(relaxed(pattern), None, "{pattern}");
        }
        // Linear-time patterns are their own relaxation.
        assert_eq!(relaxed("a+b").as_deref(), Some("a+b"));
    }

    /// Whenever PCRE2 matches a haystack, it holds one of the literals of
    /// the relaxation (ASCII case-insensitively): the prefilter never skips
    /// a value the pattern matches.
    #[test]
    fn the_relaxations_literals_are_sound_on_pcre2s_matches() {
        use crate::rx::{CompiledRx, RequiredLiterals};
        let patterns = [
            "(?<=user)name",
            "(?<!x)select\\s",
            "select(?!\\s+1)",
            "(?=.*admin)passwd",
            "(\\w)\\1zz",
            "(ab|cd)\\1",
            "a++bc",
            "(?>ab|a)bc",
            "(?i)(?<=\\.)\\.ex",
            "^(?:(?!script).)*$",
            "(\\d)(?=\\d{3})x",
            "\\b(\\w+)=\\1\\b",
            "x(?=y){2}",
            "(?i)UNION(?=\\s)",
        ];
        let frags: &[&[u8]] = &[
            b"user", b"name", b"x", b"select", b" ", b"1", b"admin", b"passwd", b"zz", b"ab",
            b"cd", b"a", b"bc", b".", b"EX", b"script", b"=", b"y", b"union", b"\n", b"7",
        ];
        let mut rng = waf_test_support::XorShift::new(0x00c0_ffee);
        let mut matched = 0;
        for pattern in patterns {
            let rx = CompiledRx::compile_backtracking(pattern).expect("compiles");
            let lits = match rx.required_literals() {
                RequiredLiterals::AnyOf(l) => l.clone(),
                RequiredLiterals::None => continue,
            };
            for _ in 0..5000 {
                let mut h = Vec::new();
                for _ in 0..rng.below(8) {
                    h.extend_from_slice(rng.pick::<&[u8]>(frags));
                }
                if rx.is_match(&h) {
                    matched += 1;
                    let lower = h.to_ascii_lowercase();
                    assert!(
                        lits.iter()
                            .any(|l| memchr::memmem::find(&lower, l).is_some()),
                        "{pattern} matches {:?} but none of {lits:?} is in it",
                        String::from_utf8_lossy(&h)
                    );
                }
            }
        }
        assert!(
            matched > 500,
            "the haystacks exercise the patterns ({matched} matches)"
        );
    }
}
