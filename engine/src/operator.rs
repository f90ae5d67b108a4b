//! Running compiled operators on one (transformed) value.
//!
//! Semantics follow libmodsecurity v3's `src/operators/*.cc`: string operators
//! are case-sensitive byte comparisons, numeric operators read both sides the
//! way `std::stoi` does (leading blanks, sign, digits; no digits = 0), and
//! `capture` stores what matched in `TX:0` (and regex groups in `TX:1`-`TX:9`).

mod verify;

use crate::injection::Injection;
use std::net::IpAddr;
use waf_compiler::ir::{ByteSet, IpRange, OpKind, Operator, Program};

/// What an operator captured on a match (for `capture` and `TX:0`-`TX:9`).
///
/// The bytes of all groups share one buffer that is kept between calls, so
/// capturing allocates nothing once it has grown.
#[derive(Debug, Default)]
pub struct Captures {
    buf: Vec<u8>,
    /// Group i is `buf[s..e]` for `groups[i] == Some((s, e))`.
    groups: [Option<(usize, usize)>; 10],
}

impl Captures {
    pub fn clear(&mut self) {
        self.buf.clear();
        self.groups = [None; 10];
    }

    /// Group `i` (0 = the whole match), if it participated.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        let (s, e) = (*self.groups.get(i)?)?;
        Some(&self.buf[s..e])
    }

    fn push(&mut self, i: usize, v: &[u8]) {
        let s = self.buf.len();
        self.buf.extend_from_slice(v);
        self.groups[i] = Some((s, self.buf.len()));
    }

    /// Group 0 is `v`, and there is no other group.
    pub(crate) fn set0(&mut self, v: &[u8]) {
        self.clear();
        self.push(0, v);
    }

    /// Whether group 0 is `value` itself (its bytes: `@pm` captures the
    /// phrase as written) and no other group participated: then the groups
    /// are known from the value alone (see [`Captures::set0`]).
    pub(crate) fn whole_only(&self, value: &[u8]) -> bool {
        self.get(0) == Some(value) && self.groups[1..].iter().all(Option::is_none)
    }
}

/// Runs `op` on `value`; `arg` is the operator argument with macros already
/// expanded (for operators that take one). Negation is applied by the caller.
pub fn matches(
    program: &Program,
    op: &Operator,
    arg: &[u8],
    value: &[u8],
    injection: &dyn Injection,
    want_captures: bool,
    caps: &mut Captures,
) -> bool {
    caps.clear();
    match &op.kind {
        OpKind::Rx(id) => {
            let rx = &program.regexes[id.index()];
            if !want_captures {
                return rx.is_match(value);
            }
            let mut slots: [Option<std::ops::Range<usize>>; 10] = Default::default();
            if !rx.captures(value, &mut slots) {
                return false;
            }
            for (i, r) in slots.into_iter().enumerate() {
                if let Some(g) = r.and_then(|r| value.get(r)) {
                    caps.push(i, g);
                }
            }
            true
        }
        OpKind::Verify { rx, checksum } => {
            let rx = &program.regexes[rx.index()];
            match verify::find(*checksum, rx, value) {
                Some(m) => {
                    caps.set0(m);
                    true
                }
                None => false,
            }
        }
        // With `capture`, TX:0 is the phrase as written in the rule (what
        // libmodsecurity 3.0.9 stores), not the matched text.
        OpKind::Pm(id) => {
            let set = &program.phrase_sets[id.index()];
            // The capture buffer (empty here) is the lowercased copy's
            // scratch space: kept by the transaction, no allocation.
            let mut lowered = std::mem::take(&mut caps.buf);
            let found = set.find(value, &mut lowered);
            caps.buf = lowered;
            caps.clear();
            match found {
                Some(p) => {
                    if let Some(p) = set.phrases.get(p) {
                        caps.set0(p.as_bytes());
                    }
                    true
                }
                None => false,
            }
        }
        // The string operators set no TX:0 with `capture`, as in
        // libmodsecurity 3.0.9 (found by corpus/diff_fuzz.py; checked
        // operator by operator with modsec-peer).
        OpKind::Streq(_) => arg == value,
        OpKind::Contains(_) => contains(value, arg).is_some(),
        OpKind::ContainsWord(_) => contains_word(value, arg),
        OpKind::BeginsWith(_) => value.starts_with(arg),
        OpKind::EndsWith(_) => value.ends_with(arg),
        OpKind::Within(_) => contains(arg, value).is_some(),
        OpKind::Strmatch(s) => contains(value, s.as_bytes()).is_some(),
        OpKind::Eq(_) => stoi(value) == stoi(arg),
        OpKind::Ge(_) => atoll(value) >= atoll(arg),
        OpKind::Gt(_) => atoll(value) > atoll(arg),
        OpKind::Le(_) => atoll(value) <= atoll(arg),
        OpKind::Lt(_) => atoll(value) < atoll(arg),
        OpKind::IpMatch(ranges) => ip_match(ranges, value),
        OpKind::ValidateByteRange(set) => invalid_byte(set, value),
        OpKind::ValidateUrlEncoding => invalid_url_encoding(value),
        OpKind::ValidateUtf8Encoding => std::str::from_utf8(value).is_err(),
        OpKind::UnconditionalMatch => true,
        OpKind::NoMatch | OpKind::Unsupported { .. } => false,
        OpKind::DetectSqli => {
            // The fingerprint is written straight into the capture buffer.
            let hit = injection.sqli(value, &mut caps.buf);
            if hit {
                caps.groups[0] = Some((0, caps.buf.len()));
            } else {
                caps.buf.clear();
            }
            hit
        }
        OpKind::DetectXss => {
            let hit = injection.xss(value);
            if hit {
                caps.set0(value);
            }
            hit
        }
    }
}

/// Haystacks up to this long are searched without building `memmem`'s
/// searcher, which costs more than the search itself on short ones (`@within`
/// searches each header name in CRS's ~100-byte restricted-header lists);
/// the simple search is bounded by this length times the needle's.
const SHORT_HAY: usize = 256;

/// Position of `needle` in `hay` (an empty needle is found at 0, as `std::string::find`).
pub fn contains(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    if needle.len() > hay.len() {
        return None;
    }
    if hay.len() > SHORT_HAY {
        return memchr::memmem::find(hay, needle);
    }
    let last = hay.len() - needle.len();
    // The search is anchored on the needle's least common byte: a common
    // first byte (the `/` of every name in CRS's `/name/ /name/...` lists)
    // would stop at each of its occurrences. The anchor's occurrences are
    // found eight bytes at a time in a word, without a call per
    // occurrence (`memchr`'s set-up costs more than these short
    // haystacks' search). Candidates come in increasing order, so the
    // first one that verifies is the leftmost occurrence.
    let k = rarest(needle);
    let region = &hay[k..=last + k];
    let splat = u64::from(needle[k]) * LOW_BITS;
    let verify = |i: usize| hay.get(i..i + needle.len()) == Some(needle);
    let mut chunks = region.chunks_exact(8);
    let mut base = 0;
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let x = u64::from_le_bytes(w) ^ splat;
        // The high bit of each byte of `x` that is zero (an occurrence),
        // and possibly of a byte just above one (a borrow): every
        // candidate is verified, so a false one costs a comparison only.
        let mut zeros = x.wrapping_sub(LOW_BITS) & !x & HIGH_BITS;
        while zeros != 0 {
            let at = base + (zeros.trailing_zeros() / 8) as usize;
            if verify(at) {
                return Some(at);
            }
            zeros &= zeros - 1;
        }
        base += 8;
    }
    for (j, &b) in chunks.remainder().iter().enumerate() {
        if b == needle[k] && verify(base + j) {
            return Some(base + j);
        }
    }
    None
}

/// The byte pairs of a haystack, hashed into 4,096 bits: a needle with a
/// pair the haystack lacks is not in it ([`contains`] would answer
/// `None`). Collisions only let a needle through to the search.
pub struct PairFilter {
    bits: [u64; 64],
    /// The haystack the bits are of.
    of: Vec<u8>,
}

impl PairFilter {
    /// An empty filter, boxed (a transaction keeps one and reuses it).
    pub fn new() -> Box<PairFilter> {
        Box::new(PairFilter {
            bits: [0; 64],
            of: Vec::new(),
        })
    }

    /// Whether this is the filter of `hay` (filling one costs about as
    /// much as a search of it; CRS's lists are the same on every request).
    pub fn is_of(&self, hay: &[u8]) -> bool {
        self.of == hay
    }

    /// Makes this the filter of `hay`'s pairs.
    pub fn fill(&mut self, hay: &[u8]) {
        self.bits = [0; 64];
        if let Some((&first, rest)) = hay.split_first() {
            let mut prev = first;
            for &b in rest {
                let i = pair_index(prev, b);
                self.bits[i >> 6] |= 1 << (i & 63);
                prev = b;
            }
        }
        self.of.clear();
        self.of.extend_from_slice(hay);
    }

    /// False when `needle` has a pair the haystack lacks; true when it
    /// may be in it (a needle of fewer than two bytes always may).
    pub fn may_hold(&self, needle: &[u8]) -> bool {
        needle.windows(2).all(|w| {
            let i = pair_index(w[0], w[1]);
            self.bits[i >> 6] & (1 << (i & 63)) != 0
        })
    }
}

/// A pair's bit: the first byte's bits shifted past the second's low four,
/// twelve bits in all.
fn pair_index(a: u8, b: u8) -> usize {
    ((usize::from(a) << 4) ^ usize::from(b)) & 0xfff
}

const LOW_BITS: u64 = 0x0101_0101_0101_0101;
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// The position in `needle` of its least common byte by [`BYTE_RANK`]
/// (the first of equals; only the first 32 bytes are looked at).
fn rarest(needle: &[u8]) -> usize {
    let mut best = 0;
    for (i, &b) in needle.iter().enumerate().take(32) {
        if BYTE_RANK[usize::from(b)] < BYTE_RANK[usize::from(needle[best])] {
            best = i;
        }
    }
    best
}

/// How common a byte is in what string operators search (header names,
/// paths, parameter values, CRS's word lists): higher is more common. A
/// coarse order by class, lower-case letters by their English frequency;
/// it steers [`contains`]'s anchor and the prefilter's sentinel bytes
/// (`crate::prefilter`), never an answer.
pub(crate) static BYTE_RANK: [u8; 256] = byte_rank();

const fn byte_rank() -> [u8; 256] {
    let mut r = [0u8; 256];
    let mut b = 0x20;
    while b < 0x7f {
        // Printable punctuation.
        r[b] = 60;
        b += 1;
    }
    let mut d = b'0';
    while d <= b'9' {
        r[d as usize] = 100;
        d += 1;
    }
    let mut u = b'A';
    while u <= b'Z' {
        r[u as usize] = 90;
        u += 1;
    }
    // Most common last.
    let letters = b"zqxjkvbpygfwmucldrhsnioate";
    let mut i = 0;
    while i < letters.len() {
        r[letters[i] as usize] = 120 + i as u8 * 4;
        i += 1;
    }
    r[b' ' as usize] = 250;
    r[b'/' as usize] = 240;
    r[b'-' as usize] = 150;
    r[b'_' as usize] = 140;
    r[b'.' as usize] = 130;
    r[b'=' as usize] = 110;
    r[b'&' as usize] = 110;
    r
}

/// `@containsWord`: `needle` bounded by non-word characters (or the ends).
fn contains_word(hay: &[u8], needle: &[u8]) -> bool {
    if needle.is_empty() {
        return true;
    }
    // As libmodsecurity 3.0.9: only ASCII letters are word bytes (a digit or
    // `_` next to the word is a boundary: `1` is a word in `4111-1111`), and
    // every occurrence is tried, overlapping ones too. Found by the
    // differential fuzzer.
    let boundary = |at: usize| hay.get(at).is_some_and(|b| !b.is_ascii_alphabetic());
    let mut from = 0;
    while let Some(off) = hay.get(from..).and_then(|h| contains(h, needle)) {
        let i = from + off;
        let end = i + needle.len();
        let before = i == 0 || boundary(i - 1);
        let after = end == hay.len() || boundary(end);
        if before && after {
            return true;
        }
        from = i + 1;
    }
    false
}

/// `@eq`'s conversion in v3, `std::stoi`: as [`atoll`], but 0 when the
/// number does not fit a 32-bit `int` (`stoi` throws `out_of_range`, and v3
/// catches it and uses 0: found by corpus/diff_fuzz.py, where `@eq 0`
/// matched `6465616462656566` in libmodsecurity 3.0.9).
pub fn stoi(s: &[u8]) -> i64 {
    let n = atoll(s);
    if i32::try_from(n).is_ok() {
        n
    } else {
        0
    }
}

/// `setvar`'s `=+delta` (`add`) or `=-delta` on a variable holding
/// `current`, read as [`atoll`] (absent or empty: 0); saturating. The
/// transaction's `TX` and the persistent store both count this way.
pub(crate) fn setvar_arith(current: &[u8], delta: i64, add: bool) -> i64 {
    let cur = atoll(current);
    if add {
        cur.saturating_add(delta)
    } else {
        cur.saturating_sub(delta)
    }
}

/// The conversion of v3's `@gt`, `@ge`, `@lt`, `@le` (`atoll`) and of
/// `setvar` arithmetic: leading blanks, an optional sign, digits; 0 when
/// there is no digit; saturating (as glibc's `strtoll`).
pub fn atoll(s: &[u8]) -> i64 {
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let neg = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let mut n: i64 = 0;
    while let Some(d) = s.get(i).filter(|c| c.is_ascii_digit()) {
        n = n.saturating_mul(10).saturating_add(i64::from(d - b'0'));
        i += 1;
    }
    if neg {
        -n
    } else {
        n
    }
}

fn ip_match(ranges: &[IpRange], value: &[u8]) -> bool {
    let Some(ip) = std::str::from_utf8(value)
        .ok()
        .and_then(|s| s.trim().parse::<IpAddr>().ok())
    else {
        return false;
    };
    ranges.iter().any(|r| in_range(r, ip))
}

fn in_range(r: &IpRange, ip: IpAddr) -> bool {
    match (r.addr, ip) {
        (IpAddr::V4(net), IpAddr::V4(a)) => {
            let mask = if r.prefix == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(r.prefix.min(32)))
            };
            u32::from(net) & mask == u32::from(a) & mask
        }
        (IpAddr::V6(net), IpAddr::V6(a)) => {
            let mask = if r.prefix == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(r.prefix.min(128)))
            };
            u128::from(net) & mask == u128::from(a) & mask
        }
        _ => false,
    }
}

fn invalid_byte(set: &ByteSet, value: &[u8]) -> bool {
    value.iter().any(|&b| !set.contains(b))
}

/// `@validateUrlEncoding`: a `%` not followed by two hex digits.
fn invalid_url_encoding(value: &[u8]) -> bool {
    let mut i = 0;
    while let Some(p) = memchr::memchr(b'%', &value[i..]) {
        let at = i + p;
        match (value.get(at + 1), value.get(at + 2)) {
            (Some(a), Some(b)) if a.is_ascii_hexdigit() && b.is_ascii_hexdigit() => i = at + 3,
            _ => return true,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pair_filter_never_rules_out_a_needle_the_haystack_holds() {
        let hays: [&[u8]; 4] = [
            b"/content-encoding/ /proxy/ /lock-token/ /content-range/ /if/ /x-http-method-override/",
            b"",
            b"a",
            &[0, 0x0f, 0xf0, 0xff, 0x10, 0x01, 0xff, 0x00],
        ];
        let mut f = PairFilter::new();
        for hay in hays {
            f.fill(hay);
            assert!(f.is_of(hay));
            // Every substring is held.
            for i in 0..hay.len() {
                for j in i..=hay.len() {
                    assert!(f.may_hold(&hay[i..j]), "{:?} in {hay:?}", &hay[i..j]);
                }
            }
            // Any needle ruled out is not in the haystack, over needles of
            // every pair of bytes and longer ones.
            for a in 0..=255u8 {
                for b in [0u8, 1, 0x0f, 0x10, 0x2d, 0x2f, 0x65, 0x6e, 0xf0, 0xff] {
                    for needle in [&[a, b][..], &[b'/', a, b], &[a, b, b'/']] {
                        if !f.may_hold(needle) {
                            assert_eq!(contains(hay, needle), None, "{needle:?} in {hay:?}");
                        }
                    }
                }
            }
        }
        // It does rule out: a header name not in the list.
        f.fill(hays[0]);
        assert!(!f.may_hold(b"/user-agent/"));
        assert!(!f.may_hold(b"/accept/"));
    }

    #[test]
    fn contains_finds_what_memmem_finds() {
        let mut rng = waf_test_support::XorShift::new(7);
        // A small alphabet, so that needles occur, partially and overlapping.
        // The second alphabet pairs bytes that differ in their lowest bit
        // only (`a` and `` ` ``), the bytes a word-at-a-time search can
        // flag falsely next to a true occurrence.
        let text = |n: usize, rng: &mut waf_test_support::XorShift, alphabet: &[u8]| -> Vec<u8> {
            (0..n)
                .map(|_| alphabet[rng.below(alphabet.len())])
                .collect()
        };
        for round in 0..40_000 {
            let alphabet: &[u8] = if (round / 4) % 2 == 0 {
                b"aab-/e"
            } else {
                b"a`a`b/."
            };
            let hay_len = rng.below(300);
            // Long needles too: the anchor is chosen among the first 32.
            let needle_len = if round % 4 == 0 {
                rng.below(40)
            } else {
                rng.below(6)
            };
            let hay = text(hay_len, &mut rng, alphabet);
            let needle = match round % 3 {
                // A piece of the haystack: found, at its first occurrence.
                0 if needle_len <= hay.len() => {
                    let at = rng.below(hay.len() - needle_len + 1);
                    hay[at..at + needle_len].to_vec()
                }
                _ => text(needle_len, &mut rng, alphabet),
            };
            let want = if needle.is_empty() {
                Some(0)
            } else {
                memchr::memmem::find(&hay, &needle)
            };
            assert_eq!(contains(&hay, &needle), want, "{hay:?} {needle:?}");
        }
        assert_eq!(contains(b"ab", b"abc"), None);
        assert_eq!(contains(b"", b""), Some(0));
        assert_eq!(contains(b"xyz", b"z"), Some(2));
    }

    #[test]
    fn stoi_like_v3() {
        assert_eq!(stoi(b" 42abc"), 42);
        assert_eq!(stoi(b"-7"), -7);
        assert_eq!(stoi(b"abc"), 0);
        assert_eq!(stoi(b""), 0);
        // Out of a 32-bit int's range: v3's std::stoi throws, and v3 uses 0.
        assert_eq!(stoi(b"99999999999999999999999"), 0);
        assert_eq!(stoi(b"6465616462656566"), 0);
        assert_eq!(stoi(b"2147483647"), 2147483647);
        assert_eq!(stoi(b"2147483648"), 0);
        assert_eq!(stoi(b"-2147483648"), -2147483648);
        assert_eq!(stoi(b"-2147483649"), 0);
        // `@gt`/`@lt`... use atoll: saturating, no 32-bit limit.
        assert_eq!(atoll(b"6465616462656566"), 6465616462656566);
        assert_eq!(atoll(b"99999999999999999999999"), i64::MAX);
        assert_eq!(atoll(b" -12x"), -12);
    }

    #[test]
    fn words_and_encodings() {
        assert!(contains_word(b"a select b", b"select"));
        assert!(!contains_word(b"selected", b"select"));
        // libmodsecurity 3.0.9: digits and `_` are boundaries, letters are
        // not (checked with corpus/modsec-diff).
        assert!(contains_word(b"4111-1111", b"1"));
        assert!(contains_word(b"x_1", b"x"));
        assert!(contains_word(b"select1", b"select"));
        assert!(!contains_word(b"abc123", b"1"));
        assert!(contains_word(b"1", b"1"));
        assert!(!contains_word(b"", b"1"));
        assert!(contains_word(b"", b""));
        // Overlapping occurrences are tried too.
        assert!(contains_word(b"ba-a-a", b"a-a"));
        assert!(invalid_url_encoding(b"a%2"));
        assert!(invalid_url_encoding(b"%zz"));
        assert!(!invalid_url_encoding(b"a%20b%41"));
    }

    #[test]
    fn ip_ranges() {
        let r = IpRange {
            addr: "10.0.0.0".parse().unwrap(),
            prefix: 8,
        };
        assert!(in_range(&r, "10.1.2.3".parse().unwrap()));
        assert!(!in_range(&r, "11.0.0.1".parse().unwrap()));
        let r6 = IpRange {
            addr: "::1".parse().unwrap(),
            prefix: 128,
        };
        assert!(in_range(&r6, "::1".parse().unwrap()));
    }
}
