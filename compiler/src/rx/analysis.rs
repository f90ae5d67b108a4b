//! Static analyses of `@rx` patterns for the rule optimizer (`waf suggest`).
//!
//! Every analysis here answers a question of the form "is this rewrite
//! equivalent?" or "what does every match contain?", and the answer is used to
//! suggest rule changes, so every positive answer must be *sound*: it holds
//! for every byte-string input under the engine's real semantics (the pattern
//! translated by [`super::translate`] and matched by [`super::CompiledRx`]).
//! When in doubt the functions return `None`.
//!
//! * [`case_flag_rewrite`]: `P` on lowercased input ⟺ `(?i)P` on raw input
//!   (drop a trailing `t:lowercase`).
//! * [`word_alternation`]: the pattern is "contains one of these words"
//!   (replace `@rx` by `@pm`).
//! * [`literal_advice`]: for a pattern without required literals (no
//!   prefilter), which top-level branch is to blame and what each branch
//!   always contains.
//!
//! # The equivalence oracle
//!
//! The first two analyses do not trust a syntactic argument alone: they build
//! a *reference* HIR whose meaning is the claimed one by construction, and
//! prove that it accepts exactly the same haystacks as the pattern with an
//! exact automaton check (`equivalent`): both HIRs are compiled to
//! unanchored dense DFAs with [`MatchKind::All`], and the product automaton is
//! explored breadth first from the two start states (the start of a haystack,
//! which is where every search begins). "The haystack read so far contains a
//! match" is a DFA state property (a match state is entered one byte after
//! the match ends, once the look-ahead byte has been seen, so later bytes can
//! no longer undo it; or the end-of-input transition reaches a match state).
//! Each side's state is replaced by "matched" as soon as it enters a match
//! state; every reachable product state is checked for "accepts if the
//! haystack ends here" on both sides. Every haystack corresponds to a path
//! from the start pair, so if no reachable pair disagrees, the two accept
//! the same set of haystacks; a disagreeing pair comes with a witness
//! haystack (the path to it). The exploration is bounded (DFA size and
//! number of pairs); running out of budget gives `None` ("don't know").

use super::literals::{required_literals, MIN_SCAN_LEN};
use super::translate::{translate_mapped, OffsetMap, FLAGS_PREFIX};
use super::{parse, CompiledRx, RxOptions};
use regex_automata::dfa::{dense, Automaton};
use regex_automata::util::primitives::StateID;
use regex_automata::util::start;
use regex_automata::{Anchored, MatchKind};
use regex_syntax::ast::{self, Ast};
use regex_syntax::hir::{self, Class, ClassBytes, ClassBytesRange, Hir, HirKind, Look};
use std::collections::{HashSet, VecDeque};
use std::ops::Range;

#[cfg(test)]
#[path = "analysis_tests.rs"]
mod tests;

/// Size budget (bytes) for each DFA built by [`equivalent`], and for the
/// memory used while determinizing it.
const DFA_BUDGET: usize = 8 * 1024 * 1024;
/// NFA size limit for [`equivalent`] (the engine's default).
const NFA_LIMIT: usize = RxOptions::DEFAULT_SIZE_LIMIT;
/// Most product states [`equivalent`] explores before giving up.
const MAX_PAIRS: usize = 200_000;

// ---------------------------------------------------------------------------
// Equivalence oracle
// ---------------------------------------------------------------------------

fn build_dfa(h: &Hir) -> Option<dense::DFA<Vec<u32>>> {
    super::matcher::dense_dfa(h, MatchKind::All, NFA_LIMIT, DFA_BUDGET)
}

/// Whether `a` and `b` match (anywhere) in exactly the same haystacks:
/// `Some(true)` proven equal, `Some(false)` proven different, `None` when the
/// automata do not fit the budget. See the module docs for the method.
pub(crate) fn equivalent(a: &Hir, b: &Hir) -> Option<bool> {
    distinguishing_input(a, b).map(|w| w.is_none())
}

/// Like [`equivalent`], but a proven difference comes with a witness: a
/// haystack that exactly one of `a` and `b` matches. `Some(None)` = equal.
pub(crate) fn distinguishing_input(a: &Hir, b: &Hir) -> Option<Option<Vec<u8>>> {
    let da = build_dfa(a)?;
    let db = build_dfa(b)?;
    let cfg = start::Config::new().anchored(Anchored::No);
    let sa = da.start_state(&cfg).ok()?;
    let sb = db.start_state(&cfg).ok()?;
    // One representative byte per pair of byte classes.
    let mut reps: Vec<u8> = Vec::new();
    let mut seen_pair = HashSet::new();
    for byte in 0..=255u8 {
        let key = (da.byte_classes().get(byte), db.byte_classes().get(byte));
        if seen_pair.insert(key) {
            reps.push(byte);
        }
    }
    // `None` = that side has already matched (and so accepts every extension).
    type Side = Option<StateID>;
    let lift = |d: &dense::DFA<Vec<u32>>, s: StateID| -> Side {
        if d.is_match_state(s) {
            None
        } else {
            Some(s)
        }
    };
    let accepts_at_end = |d: &dense::DFA<Vec<u32>>, s: Side| -> bool {
        match s {
            None => true,
            Some(s) => d.is_match_state(d.next_eoi_state(s)),
        }
    };
    let start = (lift(&da, sa), lift(&db, sb));
    // Parent links for the witness.
    let mut parent: std::collections::HashMap<(Side, Side), ((Side, Side), u8)> =
        std::collections::HashMap::new();
    let mut visited: HashSet<(Side, Side)> = HashSet::new();
    let mut queue = VecDeque::new();
    visited.insert(start);
    queue.push_back(start);
    while let Some(pair @ (p, q)) = queue.pop_front() {
        if accepts_at_end(&da, p) != accepts_at_end(&db, q) {
            let mut witness = Vec::new();
            let mut cur = pair;
            while let Some(&(prev, byte)) = parent.get(&cur) {
                witness.push(byte);
                cur = prev;
            }
            witness.reverse();
            return Some(Some(witness));
        }
        match (p, q) {
            (None, None) => continue,
            (Some(x), Some(y)) if da.is_dead_state(x) && db.is_dead_state(y) => continue,
            _ => {}
        }
        for &byte in &reps {
            let np = p.and_then(|s| lift(&da, da.next_state(s, byte)));
            let nq = q.and_then(|s| lift(&db, db.next_state(s, byte)));
            let next = (np, nq);
            if visited.insert(next) {
                if visited.len() > MAX_PAIRS {
                    return None;
                }
                parent.insert(next, (pair, byte));
                queue.push_back(next);
            }
        }
    }
    Some(None)
}

/// Parses already translated text exactly as `matcher.rs` does.
fn parse_translated_text(translated: &str) -> Option<Hir> {
    super::matcher::hir_parser().parse(translated).ok()
}

fn compiles(pattern: &str) -> bool {
    CompiledRx::compile(pattern, &RxOptions::default()).is_ok()
}

fn byte_class(members: impl IntoIterator<Item = u8>) -> Hir {
    Hir::class(Class::Bytes(ClassBytes::new(
        members.into_iter().map(|b| ClassBytesRange::new(b, b)),
    )))
}

fn class_members(cls: &ClassBytes) -> [bool; 256] {
    let mut set = [false; 256];
    for r in cls.iter() {
        for b in r.start()..=r.end() {
            set[usize::from(b)] = true;
        }
    }
    set
}

/// The bytes a class matches (as a one-byte match). Byte-mode HIRs can
/// still hold a Unicode class: regex-syntax turns an alternation of
/// single-character literals (`a|b`) into one, so ASCII-only Unicode classes
/// are converted; one with a non-ASCII character (which would match a
/// multi-byte UTF-8 sequence) gives `None`.
fn class_set(cls: &Class) -> Option<[bool; 256]> {
    match cls {
        Class::Bytes(b) => Some(class_members(b)),
        Class::Unicode(u) => {
            let mut set = [false; 256];
            for r in u.iter() {
                if u32::from(r.end()) > 0x7F {
                    return None;
                }
                for c in u32::from(r.start())..=u32::from(r.end()) {
                    set[c as usize] = true;
                }
            }
            Some(set)
        }
    }
}

// ---------------------------------------------------------------------------
// 1. case_flag_rewrite
// ---------------------------------------------------------------------------

/// Whether the pattern starts with an inline flag group `(?...)` (not a
/// scoped `(?...:`) that turns `i` on: then it is already wholly
/// case-insensitive and there is nothing to rewrite.
fn starts_case_insensitive(pattern: &str) -> bool {
    let Some(rest) = pattern.strip_prefix("(?") else {
        return false;
    };
    let Some(end) = rest.find(')') else {
        return false;
    };
    let flags = &rest[..end];
    if !flags.bytes().all(|b| b.is_ascii_alphabetic() || b == b'-') {
        return false;
    }
    let on = flags.split('-').next().unwrap_or("");
    on.contains('i')
}

/// The "lowercase pre-image" of `h`: every byte set `S` (literal byte or
/// class) becomes `{b : ascii_lowercase(b) ∈ S}`. By construction it matches
/// a haystack `x` at a span iff `h` matches `lower(x)` at the same span:
/// lowercasing is byte-wise and length-preserving, leaves are tested
/// position by position, and the look-around assertions kept (line/text
/// anchors, ASCII word boundaries) only look at `\n`, `\r` and ASCII
/// word-ness, which lowercasing preserves. `None` if `h` has a Unicode class
/// with a non-ASCII
/// character or a Unicode word boundary (never produced in byte mode).
fn lowercase_preimage(h: &Hir) -> Option<Hir> {
    let pre_byte = |c: u8| -> Hir {
        // {b : lower(b) == c}
        if c.is_ascii_lowercase() {
            byte_class([c, c.to_ascii_uppercase()])
        } else if c.is_ascii_uppercase() {
            byte_class([]) // never matches: lower(b) is never uppercase
        } else {
            Hir::literal(vec![c])
        }
    };
    Some(match h.kind() {
        HirKind::Empty => Hir::empty(),
        HirKind::Literal(hir::Literal(bytes)) => {
            Hir::concat(bytes.iter().map(|&c| pre_byte(c)).collect())
        }
        HirKind::Class(cls) => {
            let set = class_set(cls)?;
            byte_class((0..=255u8).filter(|b| set[usize::from(b.to_ascii_lowercase())]))
        }
        HirKind::Look(look) => match look {
            Look::Start
            | Look::End
            | Look::StartLF
            | Look::EndLF
            | Look::StartCRLF
            | Look::EndCRLF
            | Look::WordAscii
            | Look::WordAsciiNegate
            | Look::WordStartAscii
            | Look::WordEndAscii
            | Look::WordStartHalfAscii
            | Look::WordEndHalfAscii => Hir::look(*look),
            _ => return None,
        },
        HirKind::Repetition(r) => Hir::repetition(hir::Repetition {
            min: r.min,
            max: r.max,
            greedy: r.greedy,
            sub: Box::new(lowercase_preimage(&r.sub)?),
        }),
        HirKind::Capture(c) => lowercase_preimage(&c.sub)?,
        HirKind::Concat(subs) => Hir::concat(
            subs.iter()
                .map(lowercase_preimage)
                .collect::<Option<Vec<_>>>()?,
        ),
        HirKind::Alternation(subs) => Hir::alternation(
            subs.iter()
                .map(lowercase_preimage)
                .collect::<Option<Vec<_>>>()?,
        ),
    })
}

/// For a rule `@rx P` whose last transformation is `t:lowercase` (ASCII
/// `A-Z` → `a-z` only), returns `P' = "(?i)" + P` iff for every byte string
/// `x`: `P` matches `lower(x)` ⟺ `P'` matches `x`. Then the rule can drop
/// `t:lowercase` and use `P'`.
///
/// `None` when: the pattern does not translate/compile (or `P'` does not);
/// it already starts with an inline flag group turning `i` on (`(?i)`,
/// `(?is)`, ...: nothing to gain, the caller should simply drop
/// `t:lowercase`); the equivalence does not hold (an uppercase letter that
/// the lowercased input can never contain, as in `[A-Z]`, `Select`, `\x41`,
/// `[^A-Z]`, or a case-sensitive scope `(?-i:...)` over letters); or it could
/// not be decided within the automaton budget.
///
/// Note that negated classes of lowercase letters *are* fine: `[^a-z]` on
/// `lower(x)` matches a byte of `x` outside `[a-zA-Z]`, and regex-syntax (as
/// PCRE) case-folds a class before negating it, so `(?i)[^a-z]` is
/// `[^a-zA-Z]` too.
///
/// # Soundness
///
/// `lowercase_preimage(P)` matches `x` iff `P` matches `lower(x)`, by
/// construction (see that function); the result is only returned when the
/// exact DFA check (`equivalent`) proves that the HIR of `P'` — parsed
/// exactly as [`CompiledRx`] parses it — accepts the same haystacks.
/// Prefixing `(?i)` is valid PCRE, keeps a leading `^` an anchor (flags are
/// zero-width) and applies to every top-level branch (a flag set at the top
/// level lasts to the end of the pattern, across `|`, in PCRE and
/// regex-syntax alike).
pub fn case_flag_rewrite(pattern: &str) -> Option<String> {
    if starts_case_insensitive(pattern) {
        return None;
    }
    let h = parse(pattern).ok()?;
    let rewritten = format!("(?i){pattern}");
    let hi = parse(&rewritten).ok()?;
    if !compiles(pattern) || !compiles(&rewritten) {
        return None;
    }
    let reference = lowercase_preimage(&h)?;
    match equivalent(&reference, &hi) {
        Some(true) => Some(rewritten),
        _ => None,
    }
}

/// Whether `P` matches `x` exactly when it matches `lowercase(x)`, so that
/// a `t:lowercase` deciding the case of the value it reads changes nothing.
///
/// # Soundness
///
/// Either the pattern starts with a flag group that turns `i` on and no
/// later flag group turns a flag off (with ASCII case folding such a pattern
/// accepts a byte exactly when it accepts its lowercase) — a syntactic check
/// that also covers patterns too big for the DFA check — or the exact DFA
/// check proves `P` equivalent to its lowercase pre-image, which matches `x`
/// iff `P` matches `lower(x)` (see `lowercase_preimage`).
pub fn ignores_lowercasing(pattern: &str) -> bool {
    if starts_case_insensitive(pattern) && !turns_a_flag_off_later(pattern) {
        return true;
    }
    let Ok(h) = parse(pattern) else {
        return false;
    };
    match lowercase_preimage(&h) {
        Some(reference) => equivalent(&reference, &h) == Some(true),
        None => false,
    }
}

/// Any flag group after the first (`(?-i)`, `(?s-i:`...) that turns a flag off.
fn turns_a_flag_off_later(pattern: &str) -> bool {
    let tail = pattern.get(2..).unwrap_or("");
    tail.match_indices("(?").any(|(i, _)| {
        tail[i + 2..]
            .bytes()
            .take_while(|b| b.is_ascii_alphabetic() || *b == b'-')
            .any(|b| b == b'-')
    })
}

// ---------------------------------------------------------------------------
// 2. word_alternation
// ---------------------------------------------------------------------------

/// A pattern that means "the input contains at least one of `words`".
///
/// `@pm` (the intended replacement) always matches ASCII-case-insensitively,
/// so the caller must check: `@pm words` is exactly equivalent to the `@rx`
/// when `case_insensitive` is true, or when the input is lowercased
/// (`t:lowercase` is the last transformation) and every word is lowercase.
/// Otherwise it is not (e.g. `@rx foo` does not match `FOO`, `@pm foo` does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WordAlternation {
    /// The words, in pattern order (duplicates kept); each is non-empty ASCII
    /// printable without white space (`@pm` splits its argument on spaces).
    pub words: Vec<String>,
    /// The pattern matches the words ASCII-case-insensitively: `(?i)` applies
    /// to the whole alternation, or no word contains an ASCII letter.
    pub case_insensitive: bool,
}

/// Parses the strict grammar `[(?i)] ( alts | (?:alts) | (alts) | (?i:alts) )`
/// with `alts = word (| word)*` and words made of plain printable bytes,
/// escaped ASCII punctuation (`\.`) and one-byte classes (`[.]`, `[\.]`).
/// Returns the words and whether `i` was set. Only proposes a candidate:
/// [`word_alternation`] proves it.
fn scan_words(pattern: &str) -> Option<(Vec<String>, bool)> {
    let mut p = pattern.as_bytes();
    let mut ci = false;
    if let Some(rest) = p.strip_prefix(b"(?i)") {
        p = rest;
        ci = true;
    }
    let body = if let Some(rest) = p.strip_prefix(b"(?:") {
        rest.strip_suffix(b")")?
    } else if let Some(rest) = p.strip_prefix(b"(?i:") {
        ci = true;
        rest.strip_suffix(b")")?
    } else if p.first() == Some(&b'(') && p.get(1) != Some(&b'?') {
        p[1..].strip_suffix(b")")?
    } else {
        p
    };
    let mut words = Vec::new();
    let mut cur = Vec::new();
    let mut i = 0;
    while i < body.len() {
        let b = body[i];
        match b {
            b'|' => {
                if cur.is_empty() {
                    return None;
                }
                words.push(String::from_utf8(std::mem::take(&mut cur)).ok()?);
                i += 1;
            }
            b'\\' => {
                let e = *body.get(i + 1)?;
                if !e.is_ascii_punctuation() {
                    return None;
                }
                cur.push(e);
                i += 2;
            }
            b'[' => {
                // `[x]` or `[\x]` with x punctuation.
                let (byte, len) = match (body.get(i + 1), body.get(i + 2), body.get(i + 3)) {
                    (Some(b'\\'), Some(&e), Some(b']')) if e.is_ascii_punctuation() => (e, 4),
                    (Some(&c), Some(b']'), _)
                        if c.is_ascii_graphic() && !matches!(c, b']' | b'\\' | b'^' | b'[') =>
                    {
                        (c, 3)
                    }
                    _ => return None,
                };
                cur.push(byte);
                i += len;
            }
            b'^' | b'$' | b'.' | b'?' | b'*' | b'+' | b'(' | b')' | b']' | b'{' | b'}' => {
                return None
            }
            _ if b.is_ascii_graphic() => {
                cur.push(b);
                i += 1;
            }
            _ => return None, // white space, control, non-ASCII
        }
    }
    if cur.is_empty() {
        return None;
    }
    words.push(String::from_utf8(cur).ok()?);
    Some((words, ci))
}

/// Some iff the pattern is equivalent to "the input contains at least one of
/// these words as a substring" (ASCII-case-insensitively when
/// `case_insensitive`): an unanchored alternation of plain literals (or a
/// single literal), optionally inside one group spanning the whole pattern,
/// optionally after a leading `(?i)` or as `(?i:...)`; no quantifiers,
/// anchors, `\b`, or classes other than one-byte ones. See
/// [`WordAlternation`] for when `@pm` is an exact replacement.
///
/// # Soundness
///
/// The grammar scan only proposes the words; the result is returned only
/// when the exact DFA check (`equivalent`) proves that the pattern's HIR
/// accepts the same haystacks as the reference alternation of the words
/// (each byte `c` a literal, or `[cC]`-style ASCII fold when case-insensitive).
pub fn word_alternation(pattern: &str) -> Option<WordAlternation> {
    let (words, ci_flag) = scan_words(pattern)?;
    if words.iter().any(|w| {
        w.is_empty()
            || !w
                .bytes()
                .all(|b| b.is_ascii_graphic() && !b.is_ascii_whitespace())
    }) {
        return None;
    }
    let has_letter = words
        .iter()
        .any(|w| w.bytes().any(|b| b.is_ascii_alphabetic()));
    let case_insensitive = ci_flag || !has_letter;
    let h = parse(pattern).ok()?;
    if !compiles(pattern) {
        return None;
    }
    let reference = Hir::alternation(
        words
            .iter()
            .map(|w| {
                Hir::concat(
                    w.bytes()
                        .map(|c| {
                            if case_insensitive && c.is_ascii_alphabetic() {
                                byte_class([c.to_ascii_lowercase(), c.to_ascii_uppercase()])
                            } else {
                                Hir::literal(vec![c])
                            }
                        })
                        .collect(),
                )
            })
            .collect(),
    );
    match equivalent(&reference, &h) {
        Some(true) => Some(WordAlternation {
            words,
            case_insensitive,
        }),
        _ => None,
    }
}

// ---------------------------------------------------------------------------
// 3. literal_advice
// ---------------------------------------------------------------------------

/// Why a pattern has no required literals, branch by branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiteralAdvice {
    /// Top-level alternatives (or the whole pattern as one), in pattern order.
    pub branches: Vec<BranchAdvice>,
}

/// One top-level alternative of a pattern without required literals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchAdvice {
    /// Byte range of the branch in the ORIGINAL pattern text (as written by
    /// the rule author). The first branch of an unwrapped top-level
    /// alternation includes a leading inline flag group like `(?i)`.
    pub range: Range<usize>,
    /// The branch's own required literals (what [`required_literals`] finds
    /// for this branch alone, lowercased), possibly empty.
    pub literals: Vec<Vec<u8>>,
    /// When `literals` is empty: a small set of bytes of which every match of
    /// the branch contains at least one (see [`required_byte_set`]); `None`
    /// when no set of fewer than [`MAX_REQUIRED_BYTES`] bytes was found (the
    /// branch can match "" or only via wide classes), and always `None` when
    /// `literals` is not empty.
    pub required_bytes: Option<Vec<u8>>,
    /// True when the branch can match the empty string (then nothing can help
    /// but a restructuring).
    pub matches_empty: bool,
}

/// A required byte set must have fewer bytes than this to be reported.
pub const MAX_REQUIRED_BYTES: usize = 64;

/// How common a byte is in typical request data (lower = rarer), used to
/// choose which byte of a literal to report and to break ties between equally
/// small sets: bytes >= 0x80 and control bytes 0, ASCII punctuation and
/// symbols 1, digits 2, letters 3 (rare English letters `jqxz`) to 7
/// (`etaoins` and their capitals), space 8. A heuristic only: any choice is
/// sound.
fn rarity(b: u8) -> u32 {
    match b {
        b' ' => 8,
        b'0'..=b'9' => 2,
        b'a'..=b'z' | b'A'..=b'Z' => match b.to_ascii_lowercase() {
            b'e' | b't' | b'a' | b'o' | b'i' | b'n' | b's' => 7,
            b'h' | b'r' | b'd' | b'l' | b'c' | b'u' => 6,
            b'm' | b'w' | b'f' | b'g' | b'y' | b'p' => 5,
            b'b' | b'v' | b'k' => 4,
            _ => 3,
        },
        _ if b.is_ascii_punctuation() => 1,
        _ => 0,
    }
}

/// A byte set as a bitmap.
type ByteSet = [bool; 256];

fn set_len(s: &ByteSet) -> usize {
    s.iter().filter(|&&x| x).count()
}

fn set_cost(s: &ByteSet) -> (usize, u32) {
    let score = (0..=255u8).filter(|&b| s[usize::from(b)]).map(rarity).sum();
    (set_len(s), score)
}

/// A set of bytes such that every string matched by `hir` contains at least
/// one of them (sorted), or `None` when no such set with fewer than
/// [`MAX_REQUIRED_BYTES`] bytes is found — in particular when `hir` can
/// match the empty string.
///
/// # Soundness
///
/// By induction on the HIR, every match `m` of `e` contains a byte of
/// `set(e)`: a literal's match is the literal (one of its bytes is chosen);
/// a class's match is one of its bytes; a match of a concatenation contains
/// a match of each child (so of the chosen child); a match of an
/// alternation is a match of one branch (the union is taken); a repetition
/// with `min >= 1` contains a match of its sub-expression. Empty
/// expressions, look-arounds and `min == 0` repetitions give no set, so a
/// set is never claimed for something that can match "".
pub fn required_byte_set(hir: &Hir) -> Option<Vec<u8>> {
    let set = byte_set(hir)?;
    Some((0..=255u8).filter(|&b| set[usize::from(b)]).collect())
}

fn byte_set(h: &Hir) -> Option<ByteSet> {
    let small = |s: ByteSet| (set_len(&s) < MAX_REQUIRED_BYTES).then_some(s);
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => None,
        HirKind::Literal(hir::Literal(bytes)) => {
            let &b = bytes.iter().min_by_key(|&&b| (rarity(b), b))?;
            let mut s = [false; 256];
            s[usize::from(b)] = true;
            Some(s)
        }
        HirKind::Class(cls) => {
            let s = class_set(cls)?;
            if set_len(&s) == 0 {
                // Never matches: vacuously any set works, but keep it simple.
                return None;
            }
            small(s)
        }
        HirKind::Repetition(r) if r.min >= 1 => byte_set(&r.sub),
        HirKind::Repetition(_) => None,
        HirKind::Capture(c) => byte_set(&c.sub),
        HirKind::Concat(children) => children.iter().filter_map(byte_set).min_by_key(set_cost),
        HirKind::Alternation(branches) => {
            let mut all = [false; 256];
            for b in branches {
                let s = byte_set(b)?;
                for i in 0..256 {
                    all[i] |= s[i];
                }
            }
            small(all)
        }
    }
}

/// Parses translated text into an AST (as the HIR parser would).
fn parse_ast(translated: &str) -> Option<Ast> {
    ast::parse::ParserBuilder::new()
        .octal(false)
        .nest_limit(super::matcher::NEST_LIMIT)
        .build()
        .parse(translated)
        .ok()
}

/// One branch found in the translated text: its span there, the flag
/// settings (translated text) in force at its start, and its range in the
/// original pattern.
struct RawBranch {
    span: Range<usize>,
    flags: String,
    original: Range<usize>,
}

/// Finds the top-level branches of the translated pattern (see
/// [`literal_advice`]).
///
/// Original ranges run from just after the separator before the branch (the
/// `|`, the group opener, or the start of the pattern) to just before the
/// one after it, so they include text the translation drops or moves, like
/// `\Q`/`\E` and comments. A separator is always exactly one translated
/// byte (`|`, the `:` or `(` ending a group opener, `)`), as the translation
/// emits no white space.
fn top_branches(translated: &str, ast: &Ast, map: &OffsetMap) -> Vec<RawBranch> {
    let text = |s: &ast::Span| translated[s.start.offset..s.end.offset].to_string();
    // Original end of the translated byte at `i` / original start of it.
    let end_of = |i: usize| map.to_original(i..i + 1).end;
    let start_of = |i: usize| map.to_original(i..i + 1).start;
    let pattern_len = map.to_original(translated.len()..translated.len()).end;
    let whole = || {
        vec![RawBranch {
            span: 0..translated.len(),
            flags: String::new(),
            original: 0..pattern_len,
        }]
    };
    let span_of = |a: &Ast| a.span().start.offset..a.span().end.offset;
    // Flag settings at this level carry into later branches (PCRE and
    // regex-syntax both keep a `(?i)` in force up to the end of the group).
    // `outer`: the translated range inside the enclosing group, or `None` at
    // the top level.
    let split = |alts: &[Ast], mut flags: String, outer: Option<Range<usize>>| {
        let mut out = Vec::new();
        for (k, a) in alts.iter().enumerate() {
            let span = span_of(a);
            let start = if k > 0 {
                end_of(span.start - 1)
            } else {
                match &outer {
                    Some(o) => end_of(o.start - 1),
                    None => 0,
                }
            };
            let end = if k + 1 < alts.len() {
                start_of(span.end)
            } else {
                match &outer {
                    Some(o) => start_of(o.end),
                    None => pattern_len,
                }
            };
            out.push(RawBranch {
                span,
                flags: flags.clone(),
                original: start..end.max(start),
            });
            match a {
                Ast::Flags(f) => flags.push_str(&text(&f.span)),
                Ast::Concat(c) => {
                    for item in &c.asts {
                        if let Ast::Flags(f) = item {
                            flags.push_str(&text(&f.span));
                        }
                    }
                }
                _ => {}
            }
        }
        out
    };
    match ast {
        Ast::Alternation(alt) => split(&alt.asts, String::new(), None),
        Ast::Concat(c) => {
            // Leading flags, then assertions, one group, assertions.
            let mut flags = String::new();
            let mut items = c.asts.iter().peekable();
            while let Some(Ast::Flags(f)) = items.peek() {
                flags.push_str(&text(&f.span));
                items.next();
            }
            let rest: Vec<&Ast> = items.collect();
            let groups: Vec<&Ast> = rest
                .iter()
                .copied()
                .filter(|a| !matches!(a, Ast::Assertion(_)))
                .collect();
            let [Ast::Group(g)] = groups[..] else {
                return whole();
            };
            if let ast::GroupKind::NonCapturing(f) = &g.kind {
                if !f.items.is_empty() {
                    flags.push_str(&format!("(?{})", text(&f.span)));
                }
            }
            // The inner AST spans exactly the text between the opener and
            // the closing `)`.
            let outer = span_of(&g.ast);
            match &*g.ast {
                Ast::Alternation(alt) => split(&alt.asts, flags, Some(outer)),
                one => split(std::slice::from_ref(one), flags, Some(outer)),
            }
        }
        _ => whole(),
    }
}

/// For a pattern whose [`required_literals`] set is empty or weak (its
/// shortest literal is under [`MIN_SCAN_LEN`] bytes, so the prefilter can
/// only check for a byte most values contain), tells which top-level branch
/// is to blame: each branch's own required literals, or failing that a small
/// set of bytes every match of the branch contains, and whether it can match
/// "". `None` if the pattern has strong required literals (nothing to
/// advise) or cannot be parsed.
///
/// Top-level branches are the alternatives at group depth 0, or inside the
/// one group that spans the whole pattern, after leading inline flags and
/// ignoring surrounding anchors (`(?i)(?:a|b)`, `^(?:a|b)$`); otherwise the
/// whole pattern is one branch. Each branch is parsed alone from the
/// translated text (so escapes, classes, `\Q..\E` and `(?x)` comments are
/// handled by the real parser), with the flags in force at its start: the
/// `(?sm-u)` prefix, leading flag groups, the outer group's flags, and flag
/// settings of earlier branches at the same level.
///
/// # Soundness
///
/// A match of the whole pattern through a branch contains a match of that
/// branch alone (anchors and flag groups around it are zero-width), so the
/// branch's literals and byte set (see [`required_byte_set`]) are facts
/// about the whole pattern's matches through it.
pub fn literal_advice(pattern: &str) -> Option<LiteralAdvice> {
    let (translated, map) = translate_mapped(pattern).ok()?;
    let full = parse_translated_text(&translated)?;
    if required_literals(&full)
        .min_len()
        .is_some_and(|n| n >= MIN_SCAN_LEN)
    {
        return None;
    }
    let ast = parse_ast(&translated)?;
    let mut branches = Vec::new();
    for raw in top_branches(&translated, &ast, &map) {
        let text = format!(
            "{FLAGS_PREFIX}{}{}",
            raw.flags,
            &translated[raw.span.clone()]
        );
        let h = parse_translated_text(&text)?;
        let literals = required_literals(&h).literals().to_vec();
        let required_bytes = if literals.is_empty() {
            required_byte_set(&h)
        } else {
            None
        };
        branches.push(BranchAdvice {
            range: raw.original,
            literals,
            required_bytes,
            matches_empty: h.properties().minimum_len() == Some(0),
        });
    }
    Some(LiteralAdvice { branches })
}
