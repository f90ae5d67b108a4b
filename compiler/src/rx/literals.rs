//! Required literals: the prefilter for `@rx`.
//!
//! The engine scans each value once, ASCII-case-insensitively, with one
//! Aho-Corasick automaton over the literals of all rules, and skips a rule
//! none of whose literals occur. That is only correct if the set is *sound*:
//! every haystack the regex matches contains (compared ASCII-case-
//! insensitively) at least one literal of the set. Missing a cheap prefilter
//! costs time; an unsound one is a WAF bypass. So every step below comes with
//! its soundness argument, and the answer is [`RequiredLiterals::None`]
//! whenever in doubt.
//!
//! # Method
//!
//! 1. *Lowercase fold.* Every literal byte and every class of the HIR is
//!    mapped through ASCII lowercase. If the original matches `m`, the folded
//!    HIR matches `lower(m)` (position by position each byte of `lower(m)` is
//!    in the folded class/literal; look-around assertions only test `\n` and
//!    ASCII word-ness, which lowercasing preserves). So literals required by
//!    the folded HIR, which are lowercase, occur in `lower(haystack)`, which
//!    is exactly "occur ASCII-case-insensitively in the haystack". This turns
//!    `(?i)select` (a concatenation of classes `[Ss][Ee]...`) into the
//!    literal `select`.
//! 2. *Required sets* `req(e)`: a set `S` of non-empty strings such that every
//!    string matched by `e` contains some element of `S` as a substring.
//!    Computed bottom-up, keeping the best candidate (the longest minimum
//!    length, then the fewest literals; see `better` for one exception):
//!    * the prefix set of `e` (regex-syntax's `Extractor`): if it is finite
//!      and has no empty literal, every match of `e` *starts with* one of
//!      them (exact or inexact literals alike) — so it contains it;
//!    * likewise the suffix set;
//!    * capture group: `req(sub)`; repetition with `min >= 1`: `req(sub)`
//!      (a match contains at least one match of `sub`); `min == 0` has no
//!      required set (it matches the empty string);
//!    * concatenation: `req(child)` of any child (a match of the
//!      concatenation contains a match of each child as a substring), and
//!      the prefix set of any suffix `children[i..]` / the suffix set of any
//!      prefix `children[..=j]` of the children, for the same reason (this
//!      finds literals that span several children, like `all` followed by
//!      `\s` in `union\s+all\s+select`);
//!    * alternation: the union of one required set per branch (a match is a
//!      match of some branch); no set if some branch has none.
//!
//!    A child or branch that can match the empty string never yields a set:
//!    prefix/suffix sets then contain the empty literal, repetitions with
//!    `min == 0` give none, and `Empty`/look-arounds give none — so the
//!    recursion cannot claim a literal for a pattern that can match "".
//! 3. The chosen set is reduced: a literal that contains another literal of
//!    the set as a substring is redundant (wherever it occurs, the shorter one
//!    occurs too), so dropping it keeps soundness and does not change the
//!    minimum length.

use regex_syntax::hir::literal::{ExtractKind, Extractor, Seq};
use regex_syntax::hir::{self, Class, ClassBytes, ClassBytesRange, Hir, HirKind};

/// Literals of which at least one must occur (compared ASCII-case-insensitively)
/// in ANY haystack that the regex matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequiredLiterals {
    /// No sound set was found (or the pattern can match the empty string).
    None,
    /// Lowercased, deduplicated, sorted; no empty literal; never empty.
    AnyOf(Vec<Vec<u8>>),
}

impl RequiredLiterals {
    /// Length of the shortest literal (`None` for [`RequiredLiterals::None`]).
    pub fn min_len(&self) -> Option<usize> {
        match self {
            RequiredLiterals::None => None,
            RequiredLiterals::AnyOf(lits) => lits.iter().map(Vec::len).min(),
        }
    }

    /// The literals (empty for [`RequiredLiterals::None`]).
    pub fn literals(&self) -> &[Vec<u8>] {
        match self {
            RequiredLiterals::None => &[],
            RequiredLiterals::AnyOf(lits) => lits,
        }
    }
}

/// Literals shorter than this are too common to scan for: the engine's
/// prefilter gates them by byte sets instead (a value without `=` is rare),
/// and `waf suggest` and `waf lint` treat a set with one as weak.
pub const MIN_SCAN_LEN: usize = 3;

/// Largest set kept for an alternation's union of branch sets; bigger sets
/// are dropped (an Aho-Corasick automaton over every rule's literals should
/// stay small, and such sets always have short literals anyway).
const MAX_LITERALS: usize = 512;

/// A candidate set: sorted, deduplicated, no empty literal. An empty vector
/// means the expression can never match (vacuously sound, and neutral in a
/// union).
type Lits = Vec<Vec<u8>>;

/// Computes a sound required-literal set for `hir`; see the module docs.
pub fn required_literals(hir: &Hir) -> RequiredLiterals {
    // A pattern that can match the empty string matches every haystack at
    // some position (or at least haystacks without any literal); one that
    // can never match needs no prefilter.
    match hir.properties().minimum_len() {
        Some(n) if n > 0 => {}
        _ => return RequiredLiterals::None,
    }
    let folded = fold_lower(hir);
    let mut prefix = Extractor::new();
    prefix.kind(ExtractKind::Prefix);
    let mut suffix = Extractor::new();
    suffix.kind(ExtractKind::Suffix);
    let ctx = Ctx { prefix, suffix };
    match ctx.req(&folded) {
        Some(lits) if !lits.is_empty() => RequiredLiterals::AnyOf(drop_superstrings(lits)),
        _ => RequiredLiterals::None,
    }
}

struct Ctx {
    prefix: Extractor,
    suffix: Extractor,
}

impl Ctx {
    fn req(&self, h: &Hir) -> Option<Lits> {
        let mut best: Option<Lits> = None;
        consider(&mut best, from_seq(self.prefix.extract(h)));
        consider(&mut best, from_seq(self.suffix.extract(h)));
        match h.kind() {
            HirKind::Capture(c) => consider(&mut best, self.req(&c.sub)),
            HirKind::Repetition(r) if r.min >= 1 => consider(&mut best, self.req(&r.sub)),
            HirKind::Concat(children) => {
                for c in children {
                    consider(&mut best, self.req(c));
                }
                self.windows(children, &mut best);
            }
            HirKind::Alternation(branches) => {
                let mut all: Lits = Vec::new();
                let mut ok = true;
                for b in branches {
                    let Some(mut lits) = self.req(b) else {
                        ok = false;
                        break;
                    };
                    all.append(&mut lits);
                    if all.len() > MAX_LITERALS {
                        all.sort();
                        all.dedup();
                        if all.len() > MAX_LITERALS {
                            ok = false;
                            break;
                        }
                    }
                }
                if ok {
                    all.sort();
                    all.dedup();
                    consider(&mut best, Some(all));
                }
            }
            _ => {}
        }
        best
    }

    /// Prefix sets of `children[i..]` for `i >= 1` and suffix sets of
    /// `children[..=j]` for `j < n - 1` (the whole concatenation is already
    /// covered by extracting from `h` itself). Each window is a substring of
    /// every match of the concatenation, so its prefix/suffix set is required.
    /// The per-child sets are extracted once and crossed with the same limits
    /// as regex-syntax's `Extractor`.
    fn windows(&self, children: &[Hir], best: &mut Option<Lits>) {
        let n = children.len();
        if n < 3 {
            // With two children the windows are the children themselves.
            return;
        }
        let pre: Vec<Seq> = children.iter().map(|c| self.prefix.extract(c)).collect();
        for i in 1..n {
            let mut seq = Seq::singleton(regex_syntax::hir::literal::Literal::exact(vec![]));
            for s in &pre[i..] {
                if seq.is_inexact() {
                    break;
                }
                let mut s = s.clone();
                if seq.max_cross_len(&s).is_some_and(|len| len > LIMIT_TOTAL) {
                    s.make_infinite();
                }
                seq.cross_forward(&mut s);
                seq.keep_first_bytes(LIMIT_LITERAL_LEN);
            }
            consider(best, from_seq(seq));
        }
        let suf: Vec<Seq> = children.iter().map(|c| self.suffix.extract(c)).collect();
        for j in (0..n - 1).rev() {
            let mut seq = Seq::singleton(regex_syntax::hir::literal::Literal::exact(vec![]));
            for s in suf[..=j].iter().rev() {
                if seq.is_inexact() {
                    break;
                }
                let mut s = s.clone();
                if seq.max_cross_len(&s).is_some_and(|len| len > LIMIT_TOTAL) {
                    s.make_infinite();
                }
                seq.cross_reverse(&mut s);
                seq.keep_last_bytes(LIMIT_LITERAL_LEN);
            }
            consider(best, from_seq(seq));
        }
    }
}

/// `Extractor`'s default limits, used for the window cross products.
const LIMIT_TOTAL: usize = 250;
const LIMIT_LITERAL_LEN: usize = 100;

/// A finite sequence without an empty literal is a required set (every match
/// starts/ends with one of its literals).
fn from_seq(seq: Seq) -> Option<Lits> {
    let lits = seq.literals()?;
    if lits.iter().any(|l| l.is_empty()) {
        return None;
    }
    let mut v: Lits = lits.iter().map(|l| l.as_bytes().to_vec()).collect();
    v.sort();
    v.dedup();
    Some(v)
}

/// Whether `a` is a better required set than `b`: the longer minimum length
/// wins, then the smaller set — except that, once literals have 3 bytes or
/// more, one more byte of minimum length is not worth a set four or more
/// times as big. That exception keeps
/// `select` rather than the six literals `[\t\n\v\f\r ]select` of
/// `union\s+select`, and `abc` rather than `0abc`..`9abc` for `\d+abc`: such
/// class expansions multiply the set (the engine's Aho-Corasick automaton
/// holds every rule's literals) for little extra selectivity. Every candidate
/// is sound; this only picks the most useful one.
fn better(a: &Lits, b: &Lits) -> bool {
    let min = |l: &Lits| l.iter().map(Vec::len).min().unwrap_or(usize::MAX);
    let (ma, mb) = (min(a), min(b));
    let (na, nb) = (a.len(), b.len());
    if mb >= 3 && ma == mb + 1 && na >= nb.saturating_mul(4) {
        return false;
    }
    if ma >= 3 && mb == ma + 1 && nb >= na.saturating_mul(4) {
        return true;
    }
    ma > mb || (ma == mb && na < nb)
}

fn consider(best: &mut Option<Lits>, cand: Option<Lits>) {
    let Some(cand) = cand else { return };
    match best {
        Some(b) if !better(&cand, b) => {}
        _ => *best = Some(cand),
    }
}

/// Drops every literal that contains another (shorter or different) literal
/// of the set; the result is sorted.
fn drop_superstrings(mut lits: Lits) -> Lits {
    lits.sort_by(|a, b| a.len().cmp(&b.len()).then_with(|| a.cmp(b)));
    lits.dedup();
    let mut kept: Lits = Vec::with_capacity(lits.len());
    for l in lits {
        if !kept.iter().any(|k| memchr::memmem::find(&l, k).is_some()) {
            kept.push(l);
        }
    }
    kept.sort();
    kept
}

/// The HIR with every literal byte and class member mapped through ASCII
/// lowercase (see the module docs for why this is sound).
fn fold_lower(h: &Hir) -> Hir {
    match h.kind() {
        HirKind::Empty => Hir::empty(),
        HirKind::Literal(hir::Literal(bytes)) => Hir::literal(
            bytes
                .iter()
                .map(u8::to_ascii_lowercase)
                .collect::<Vec<u8>>(),
        ),
        HirKind::Class(Class::Bytes(cls)) => fold_class_bytes(cls),
        HirKind::Class(Class::Unicode(cls)) => fold_class_unicode(cls),
        HirKind::Look(look) => Hir::look(*look),
        HirKind::Repetition(r) => Hir::repetition(hir::Repetition {
            min: r.min,
            max: r.max,
            greedy: r.greedy,
            sub: Box::new(fold_lower(&r.sub)),
        }),
        HirKind::Capture(c) => Hir::capture(hir::Capture {
            index: c.index,
            name: c.name.clone(),
            sub: Box::new(fold_lower(&c.sub)),
        }),
        HirKind::Concat(subs) => Hir::concat(subs.iter().map(fold_lower).collect()),
        HirKind::Alternation(subs) => Hir::alternation(subs.iter().map(fold_lower).collect()),
    }
}

fn fold_class_bytes(cls: &ClassBytes) -> Hir {
    let mut set = [false; 256];
    for r in cls.iter() {
        for b in r.start()..=r.end() {
            set[usize::from(b.to_ascii_lowercase())] = true;
        }
    }
    let members: Vec<u8> = (0..=255u8).filter(|&b| set[usize::from(b)]).collect();
    if let [only] = members[..] {
        return Hir::literal(vec![only]);
    }
    let ranges = members.iter().map(|&b| ClassBytesRange::new(b, b));
    Hir::class(Class::Bytes(ClassBytes::new(ranges)))
}

fn fold_class_unicode(cls: &hir::ClassUnicode) -> Hir {
    let mut ranges = Vec::new();
    for r in cls.iter() {
        let (lo, hi) = (r.start(), r.end());
        // Part below 'A', part above 'Z' unchanged; 'A'..='Z' part shifted.
        if lo < 'A' {
            ranges.push(hir::ClassUnicodeRange::new(lo, hi.min('@')));
        }
        if hi > 'Z' {
            ranges.push(hir::ClassUnicodeRange::new(lo.max('['), hi));
        }
        let (ulo, uhi) = (lo.max('A'), hi.min('Z'));
        if ulo <= uhi {
            ranges.push(hir::ClassUnicodeRange::new(
                ulo.to_ascii_lowercase(),
                uhi.to_ascii_lowercase(),
            ));
        }
    }
    let folded = hir::ClassUnicode::new(ranges);
    let mut chars = folded.iter().flat_map(|r| r.start()..=r.end());
    if let (Some(c), None) = (chars.next(), chars.next()) {
        let mut buf = [0u8; 4];
        return Hir::literal(c.encode_utf8(&mut buf).as_bytes().to_vec());
    }
    Hir::class(Class::Unicode(folded))
}
