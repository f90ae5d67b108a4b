//! The prefilter: one multi-literal scan per value decides which operators
//! can possibly match it.
//!
//! Every operator carries a sound [`Prefilter`] from the compiler: when it is
//! `AnyOf(lits)`, any value the operator matches contains (ASCII-case-
//! insensitively) one of `lits`. The [`Scanner`] turns the operators of a
//! program into gates:
//!
//! - [`Gate::Literal`]: all the operator's literals are at least
//!   [`MIN_SCAN_LEN`] bytes long. They go into one ASCII-case-insensitive
//!   Aho-Corasick automaton over every such literal of the program; scanning a
//!   value once (overlapping search: a leftmost search could hide a literal
//!   inside or across another) sets a bit per operator one of whose literals
//!   occurs. The scan is per value, not per rule: hundreds of rules read the
//!   same bits.
//! - [`Gate::Bytes`]: the operator has 1–2 byte literals (`;`, `|`, `$(`...).
//!   Put in the automaton they would fire on most values and make the scan
//!   slow; instead each literal becomes the set of its (lowercased) bytes, and
//!   the gate passes when all bytes of some literal are present in the value.
//!   That is weaker than "the literal occurs" but still sound, and the byte set
//!   of a value costs one pass.
//! - [`Gate::Always`]: no sound prefilter (or a negated operator, which
//!   matches when its inner operator does not): the operator always runs.
//!   So do the comparisons with a constant (`@streq`, `@beginsWith`,
//!   `@endsWith`): a length check and one `memcmp` cost less than scanning
//!   a value no other rule needs scanned (CRS's 905100 tests
//!   `REQUEST_LINE "@streq GET /"`, a value only it reads).

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use std::collections::HashMap;
use waf_compiler::ir::{Arg, OpId, OpKind, Prefilter, Program};

pub use waf_compiler::rx::MIN_SCAN_LEN;

/// How an operator is gated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    Always,
    /// Bit index in a value's scan result.
    Literal(u32),
    /// The gate's sentinel set `masks[start]`, the union of its one-byte
    /// sets `masks[start + 1]`, then its other byte sets
    /// `masks[start + 2..start + 2 + len]` (one per literal; see
    /// [`Scanner::passes`]).
    Bytes {
        start: u32,
        len: u32,
    },
}

/// A set of bytes (lowercased), as four 64-bit words.
pub type ByteMask = [u64; 4];

/// The program's literals in one automaton, and each operator's gate.
///
/// The automaton is a contiguous NFA, not a DFA: with CRS's ~8,000 literals
/// (ASCII-case-insensitive, overlapping) the DFA takes 87 MiB and a few
/// hundred milliseconds to build, the NFA a few MiB, and the NFA scans
/// within 10% of the DFA's speed (no difference measured once the
/// cross-transaction cache serves repeated values).
///
/// It is case-sensitive, over lowercased literals, and scans a lowercased
/// copy of the value: aho-corasick's own ASCII case folding doubles the
/// transitions, which made the build 3× slower (26 → 9 ms for CRS) and the
/// scan no faster (lowercasing a copy first: 9.6 ms against 10.3 ms over the
/// benign corpus's 1.7 MB of values).
#[derive(Debug)]
pub struct Scanner {
    automaton: Option<AhoCorasick>,
    /// For automaton pattern `p`: the operator bits it sets are
    /// `pattern_bits[pattern_start[p]..pattern_start[p + 1]]`.
    pattern_start: Vec<u32>,
    pattern_bits: Vec<u32>,
    gates: Vec<Gate>,
    masks: Vec<ByteMask>,
    words: usize,
    literal_ops: usize,
    byte_ops: usize,
}

impl Scanner {
    pub fn new(program: &Program) -> Scanner {
        let mut gates = Vec::with_capacity(program.operators.len());
        let mut masks = Vec::new();
        let mut literal_index: HashMap<&[u8], usize> = HashMap::new();
        let mut literals: Vec<&[u8]> = Vec::new();
        let mut bits_of: Vec<Vec<u32>> = Vec::new();
        let mut next_bit = 0u32;
        let (mut literal_ops, mut byte_ops) = (0, 0);
        for op in &program.operators {
            let cheap = matches!(
                op.kind,
                OpKind::Streq(Arg::Const(_))
                    | OpKind::BeginsWith(Arg::Const(_))
                    | OpKind::EndsWith(Arg::Const(_))
            );
            let lits = match &op.prefilter {
                Prefilter::AnyOf(lits) if !op.negated && !lits.is_empty() && !cheap => lits,
                _ => {
                    gates.push(Gate::Always);
                    continue;
                }
            };
            if lits.iter().all(|l| l.len() >= MIN_SCAN_LEN) {
                let bit = next_bit;
                next_bit += 1;
                literal_ops += 1;
                for l in lits {
                    let p = *literal_index.entry(l.as_slice()).or_insert_with(|| {
                        literals.push(l);
                        bits_of.push(Vec::new());
                        literals.len() - 1
                    });
                    if bits_of[p].last() != Some(&bit) {
                        bits_of[p].push(bit);
                    }
                }
                gates.push(Gate::Literal(bit));
            } else {
                byte_ops += 1;
                let start = masks.len();
                masks.push([0; 4]);
                for l in lits {
                    masks.push(byte_mask(l));
                }
                minimize(&mut masks, start + 1);
                masks[start] = sentinels(&masks[start + 1..]);
                let len = split_singles(&mut masks, start + 1);
                gates.push(Gate::Bytes {
                    start: start as u32,
                    len: len as u32,
                });
            }
        }
        let mut pattern_start = Vec::with_capacity(bits_of.len() + 1);
        let mut pattern_bits = Vec::new();
        for b in &bits_of {
            pattern_start.push(pattern_bits.len() as u32);
            pattern_bits.extend_from_slice(b);
        }
        pattern_start.push(pattern_bits.len() as u32);
        let automaton = if literals.is_empty() {
            None
        } else {
            // The literals come from compiled rules, so a build failure can
            // only be a size limit; without the automaton every literal gate
            // is treated as passing (see `scan`), which is slow but correct.
            let lowered: Vec<Vec<u8>> = literals.iter().map(|l| l.to_ascii_lowercase()).collect();
            AhoCorasick::builder()
                .match_kind(MatchKind::Standard)
                .kind(Some(AhoCorasickKind::ContiguousNFA))
                .build(&lowered)
                .or_else(|_| {
                    AhoCorasick::builder()
                        .match_kind(MatchKind::Standard)
                        .build(&lowered)
                })
                .ok()
        };
        Scanner {
            automaton,
            pattern_start,
            pattern_bits,
            gates,
            masks,
            words: (next_bit as usize).div_ceil(64).max(1),
            literal_ops,
            byte_ops,
        }
    }

    /// Number of `u64` words of a scan result.
    pub fn words(&self) -> usize {
        self.words
    }

    pub fn gate(&self, op: OpId) -> Gate {
        self.gates.get(op.index()).copied().unwrap_or(Gate::Always)
    }

    /// Number of operators gated by the automaton, and by byte sets.
    pub fn gated_ops(&self) -> (usize, usize) {
        (self.literal_ops, self.byte_ops)
    }

    /// Number of distinct literals in the automaton.
    pub fn literal_count(&self) -> usize {
        self.pattern_start.len().saturating_sub(1)
    }

    /// Scans `value`: `bits` (of length [`Scanner::words`]) gets the bit of
    /// every literal-gated operator one of whose literals occurs
    /// (ASCII-case-insensitively). `lowered` is scratch space for the
    /// value's lowercased copy (kept by the caller, so that it allocates
    /// only until it has grown to the largest value).
    pub fn scan(&self, value: &[u8], bits: &mut [u64], lowered: &mut Vec<u8>) {
        bits.fill(0);
        let Some(ac) = &self.automaton else {
            if !self.pattern_bits.is_empty() {
                bits.fill(u64::MAX);
            }
            return;
        };
        lowered.clear();
        lowered.extend(value.iter().map(u8::to_ascii_lowercase));
        for m in ac.find_overlapping_iter(lowered.as_slice()) {
            let p = m.pattern().as_usize();
            let (s, e) = (self.pattern_start[p], self.pattern_start[p + 1]);
            for &bit in &self.pattern_bits[s as usize..e as usize] {
                bits[(bit / 64) as usize] |= 1 << (bit % 64);
            }
        }
    }

    /// Whether an operator with `gate` may match a value whose scan result is
    /// `bits` and whose byte set is `present`.
    #[inline(always)]
    pub fn passes(&self, gate: Gate, bits: &[u64], present: &ByteMask) -> bool {
        match gate {
            Gate::Always => true,
            Gate::Literal(bit) => bits[(bit / 64) as usize] & (1 << (bit % 64)) != 0,
            Gate::Bytes { start, len } => {
                // Each set holds one of the sentinels: a value with none of
                // them passes none (most benign values; one test instead of
                // one per set). A value with one of the one-byte sets'
                // bytes passes at once (`;` in cookies and `Accept`
                // headers: one test instead of a walk of the sets).
                let (start, len) = (start as usize, len as usize);
                !disjoint(&self.masks[start], present)
                    && (!disjoint(&self.masks[start + 1], present)
                        || self.masks[start + 2..start + 2 + len]
                            .iter()
                            .any(|m| subset(m, present)))
            }
        }
    }

    /// Whether `gate` needs the value's scan result, or its byte set.
    pub fn needs(gate: Gate) -> (bool, bool) {
        match gate {
            Gate::Always => (false, false),
            Gate::Literal(_) => (true, false),
            Gate::Bytes { .. } => (false, true),
        }
    }
}

/// The set of ASCII-lowercased bytes of `value`.
pub fn byte_mask(value: &[u8]) -> ByteMask {
    let mut m = [0u64; 4];
    for &b in value {
        let b = b.to_ascii_lowercase();
        m[usize::from(b >> 6)] |= 1 << (b & 63);
    }
    m
}

/// Keeps only the minimal masks of `masks[start..]` (one of each): a mask
/// that contains another passes only when that one does, so testing it
/// adds nothing, and a value that passes none still costs a test of each
/// (CRS: 1,980 masks over 122 gates, 1,205 kept). Returns how many are left.
fn minimize(masks: &mut Vec<ByteMask>, start: usize) -> usize {
    let mut kept: Vec<ByteMask> = Vec::with_capacity(masks.len() - start);
    for (i, m) in masks[start..].iter().enumerate() {
        let redundant = masks[start..].iter().enumerate().any(|(j, o)| {
            // A smaller mask inside it, or the same mask seen earlier.
            subset(o, m) && (o != m || j < i)
        });
        if !redundant {
            kept.push(*m);
        }
    }
    masks.truncate(start);
    masks.extend_from_slice(&kept);
    kept.len()
}

/// Replaces the byte sets `masks[from..]` by the union of those of one
/// byte, then the others; returns how many others. A set of one byte is a
/// subset of a value's iff the two share that byte, so their union answers
/// for all of them in one test.
fn split_singles(masks: &mut Vec<ByteMask>, from: usize) -> usize {
    let sets = masks.split_off(from);
    let mut singles = [0u64; 4];
    let mut others = Vec::with_capacity(sets.len());
    for m in sets {
        if m.iter().map(|w| w.count_ones()).sum::<u32>() == 1 {
            for (u, w) in singles.iter_mut().zip(m) {
                *u |= w;
            }
        } else {
            others.push(m);
        }
    }
    masks.push(singles);
    let n = others.len();
    masks.extend(others);
    n
}

/// A gate's sentinel set: from each of its byte sets, the byte least
/// likely in benign values (by [`crate::operator::BYTE_RANK`]). A value
/// that has some set's bytes has that set's sentinel.
fn sentinels(masks: &[ByteMask]) -> ByteMask {
    let mut out = [0u64; 4];
    for m in masks {
        let rarest = (0..=255u8)
            .filter(|&b| m[usize::from(b >> 6)] & (1 << (b & 63)) != 0)
            .min_by_key(|&b| crate::operator::BYTE_RANK[usize::from(b)]);
        if let Some(b) = rarest {
            out[usize::from(b >> 6)] |= 1 << (b & 63);
        } else {
            // An empty set is a subset of every value's: no sentinel can
            // stand for it.
            return [u64::MAX; 4];
        }
    }
    out
}

fn disjoint(a: &ByteMask, b: &ByteMask) -> bool {
    (a[0] & b[0]) | (a[1] & b[1]) | (a[2] & b[2]) | (a[3] & b[3]) == 0
}

fn subset(a: &ByteMask, b: &ByteMask) -> bool {
    (a[0] & !b[0]) | (a[1] & !b[1]) | (a[2] & !b[2]) | (a[3] & !b[3]) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Ruleset;

    /// Every value made of a subset of `bytes` (each at most once, in
    /// order): all the byte sets a gate can meet over that alphabet.
    fn every_subset(bytes: &[u8]) -> impl Iterator<Item = Vec<u8>> + '_ {
        (0u32..1 << bytes.len()).map(move |bits| {
            (0..bytes.len())
                .filter(|i| bits & (1 << i) != 0)
                .map(|i| bytes[i])
                .collect()
        })
    }

    fn scanner(rules: &str) -> (Ruleset, Scanner) {
        let rs = Ruleset::from_str("t.conf", rules).expect("compiles");
        let s = Scanner::new(rs.program());
        (rs, s)
    }

    fn passes(s: &Scanner, op: u32, value: &[u8]) -> bool {
        let mut bits = vec![0; s.words()];
        s.scan(value, &mut bits, &mut Vec::new());
        s.passes(s.gate(OpId(op)), &bits, &byte_mask(value))
    }

    #[test]
    fn literal_and_byte_gates() {
        let (_rs, s) = scanner(
            r#"
            SecRule ARGS "@rx (?i)union\s+select" "id:1,phase:1,pass"
            SecRule ARGS "@rx [;|]" "id:2,phase:1,pass"
            SecRule ARGS "@validateByteRange 1-255" "id:3,phase:1,pass"
            SecRule ARGS "!@rx select" "id:4,phase:1,pass"
            SecRule ARGS "@rx ^\d+$" "id:5,phase:1,pass"
            "#,
        );
        assert_eq!(s.gate(OpId(0)), Gate::Literal(0));
        assert!(matches!(s.gate(OpId(1)), Gate::Bytes { .. }));
        assert!(matches!(s.gate(OpId(2)), Gate::Bytes { .. }));
        assert_eq!(s.gate(OpId(3)), Gate::Always);
        assert!(matches!(s.gate(OpId(4)), Gate::Bytes { .. }));
        assert!(passes(&s, 0, b"1 UNION   SeLeCt 2"));
        assert!(!passes(&s, 0, b"hello world"));
        assert!(passes(&s, 1, b"a|b"));
        assert!(!passes(&s, 1, b"ab"));
        assert!(passes(&s, 2, b"a\0b"));
        assert!(!passes(&s, 2, b"anything"));
        assert!(passes(&s, 4, b"x7"));
        assert!(!passes(&s, 4, b"none"));
    }

    /// The validators' gates never rule out a value they would match:
    /// every byte value alone, and random byte strings around the bytes
    /// that decide (`%`, hex digits, high bytes, NUL, letters of both cases).
    #[test]
    fn validator_gates_never_rule_out_a_match() {
        let (rs, s) = scanner(
            r#"
            SecRule ARGS "@validateByteRange 1-255" "id:1,phase:1,pass"
            SecRule ARGS "@validateByteRange 32-64,91-126" "id:2,phase:1,pass"
            SecRule ARGS "@validateByteRange 9,10,13,32-126,128-255" "id:3,phase:1,pass"
            SecRule ARGS "@validateUrlEncoding" "id:4,phase:1,pass"
            SecRule ARGS "@validateUtf8Encoding" "id:5,phase:1,pass"
            "#,
        );
        let program = rs.program();
        let mut values: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        let pool = b"%%%0aF9gG zZ\0\x7f\x80\xc3\xa9\xff\xe2\x82";
        let mut rng = waf_test_support::XorShift::new(7);
        for _ in 0..20_000 {
            let n = rng.below(8);
            values.push((0..n).map(|_| pool[rng.below(pool.len())]).collect());
        }
        let (mut ran, mut ruled_out) = (0, 0);
        for (i, op) in program.operators.iter().enumerate() {
            for v in &values {
                let hit = crate::operator::matches(
                    program,
                    op,
                    b"",
                    v,
                    &crate::Libinjection,
                    false,
                    &mut crate::operator::Captures::default(),
                );
                let pass = passes(&s, i as u32, v);
                assert!(
                    pass || !hit,
                    "op {i} matches {v:?} but its gate ruled it out"
                );
                ran += usize::from(pass);
                ruled_out += usize::from(!pass);
            }
        }
        assert!(ran > 0 && ruled_out > 0, "{ran} {ruled_out}");
    }

    #[test]
    fn overlapping_literals_all_fire() {
        // `select` hides inside `selection`; a leftmost scan would report only one.
        let (_rs, s) = scanner(
            r#"
            SecRule ARGS "@rx selection" "id:1,phase:1,pass"
            SecRule ARGS "@rx select" "id:2,phase:1,pass"
            SecRule ARGS "@rx ection" "id:3,phase:1,pass"
            "#,
        );
        for op in 0..3 {
            assert!(passes(&s, op, b"the SELECTION"), "op {op}");
        }
    }

    #[test]
    fn byte_gates_keep_only_minimal_masks_and_pass_alike() {
        let m = |b: &[u8]| byte_mask(b);
        let given = [m(b"ab"), m(b"a"), m(b"A"), m(b"abc"), m(b"bd"), m(b"db")];
        let mut masks = vec![m(b"zz")];
        masks.extend_from_slice(&given);
        assert_eq!(minimize(&mut masks, 1), 2);
        assert_eq!(masks, [m(b"zz"), m(b"a"), m(b"bd")]);
        // The same verdict as the full list for every set of these bytes.
        let bytes = b"abcdz";
        for value in every_subset(bytes) {
            let present = m(&value);
            let full = given.iter().any(|g| subset(g, &present));
            let kept = masks[1..].iter().any(|g| subset(g, &present));
            assert_eq!(full, kept, "{:?}", String::from_utf8_lossy(&value));
        }
    }

    #[test]
    fn one_byte_sets_are_tested_as_one_union() {
        let m = |b: &[u8]| byte_mask(b);
        let given = [m(b";"), m(b"$("), m(b"|"), m(b"aa"), m(b"<?")];
        let mut masks = vec![m(b"zz")];
        masks.extend_from_slice(&given);
        assert_eq!(split_singles(&mut masks, 1), 2);
        assert_eq!(masks, [m(b"zz"), m(b";|a"), m(b"$("), m(b"<?")]);
        // The same verdict as the sets one by one, for every set of these
        // bytes.
        let bytes = b";$(|a<?z";
        for value in every_subset(bytes) {
            let present = m(&value);
            let one_by_one = given.iter().any(|g| subset(g, &present));
            let split =
                !disjoint(&masks[1], &present) || masks[2..].iter().any(|g| subset(g, &present));
            assert_eq!(one_by_one, split, "{:?}", String::from_utf8_lossy(&value));
        }
    }

    #[test]
    fn sentinels_reject_only_values_no_set_passes() {
        let m = |b: &[u8]| byte_mask(b);
        // Each set's sentinel is its least common byte: punctuation before
        // letters, `b` before `a` (English frequency).
        assert_eq!(sentinels(&[m(b"a;"), m(b"$(")]), m(b";$"));
        assert_eq!(sentinels(&[m(b"ab")]), m(b"b"));
        // Every value made of these bytes: the sentinel test never rejects
        // a value some set passes.
        let sets = [m(b"a;"), m(b"$("), m(b"<s"), m(b"|"), m(b"x1")];
        let sent = sentinels(&sets);
        let bytes = b"a;$(<s|x1 ";
        for value in every_subset(bytes) {
            let present = m(&value);
            if sets.iter().any(|g| subset(g, &present)) {
                assert!(
                    !disjoint(&sent, &present),
                    "{:?}",
                    String::from_utf8_lossy(&value)
                );
            }
        }
    }

    #[test]
    fn byte_gates_agree_with_their_literals() {
        let (_rs, s) = scanner(
            r#"
            SecRule ARGS "@rx (?:;|\$\(|`|<\?)" "id:1,phase:1,pass"
            SecRule ARGS "@rx [<>]" "id:2,phase:1,pass"
            "#,
        );
        for (op, lits) in [
            (0u32, &[&b";"[..], b"$(", b"`", b"<?"][..]),
            (1, &[b"<", b">"]),
        ] {
            assert!(matches!(s.gate(OpId(op)), Gate::Bytes { .. }));
            for value in [
                &b"plain value"[..],
                b"a;b",
                b"$x(",
                b"(x$",
                b"`",
                b"<?php",
                b"?<",
                b"a<b",
                b"x>",
                b"Mozilla/5.0 (X11; Linux)",
                b"",
            ] {
                let present = byte_mask(value);
                let want = lits.iter().any(|l| subset(&byte_mask(l), &present));
                assert_eq!(
                    passes(&s, op, value),
                    want,
                    "op {op} {:?}",
                    String::from_utf8_lossy(value)
                );
            }
        }
    }
}
