//! Test-only helpers shared by the workspace's test suites.
//!
//! This crate is a dev-dependency only; nothing in the product links it.
//!
//! [`crs_dir`] finds the OWASP CRS for the tests that run it (or reports the
//! skip where it shows). The other item is [`XorShift`], a tiny seeded pseudo-random generator. The
//! property and agreement tests (regex prefilters, the engine's fast path
//! against the naive interpreter, libinjection agreement, optimizer
//! rewrites) generate thousands of inputs; they need them to be
//! *reproducible* — the same seed gives the same inputs on every machine and
//! every run, so a failure can be replayed and snapshot files stay stable —
//! and they should not pull in the `rand` crate (whose streams can change
//! between versions) for it. The generators used to be copied into each test
//! file; they now share this one, which reproduces each copy bit for bit.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod crs;

pub use crs::{crs_config, crs_dir, crs_files, CRS_DIR_VAR, REQUIRE_CRS_VAR};

/// The multiplier of xorshift64*'s output (Vigna, "An experimental
/// exploration of Marsaglia's xorshift generators, scrambled", 2016).
const STAR_MULTIPLIER: u64 = 0x2545_F491_4F6C_DD1D;

/// 2^64 / φ: spreads small seeds (0, 1, 2, …) over the whole state space.
const SEED_MIXER: u64 = 0x9E37_79B9_7F4A_7C15;

/// Which xorshift variant a generator runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    /// xorshift64* (shifts 12, 25, 27; output multiplied by
    /// [`STAR_MULTIPLIER`]).
    Star,
    /// Marsaglia's plain xorshift64 (shifts 13, 7, 17; the output is the
    /// new state).
    Plain,
}

/// A small, seeded, deterministic pseudo-random generator for tests.
///
/// Not cryptographic and not statistically strong beyond what test-input
/// generation needs; its point is that a seed always yields the same
/// sequence (see the crate documentation for why the tests want that).
///
/// Two variants exist because the suites that adopted this type had been
/// written against both, and their generated inputs (and thus their
/// outcomes and snapshots) must not change:
///
/// * [`XorShift::new`] / [`XorShift::from_state`]: xorshift64*;
/// * [`XorShift::plain`]: Marsaglia's xorshift64 (13, 7, 17).
///
/// Range helpers: [`below`](XorShift::below) reduces the whole output modulo
/// `n`; [`below_high`](XorShift::below_high) reduces its top 31 bits, for
/// the suite written that way. [`pick`](XorShift::pick),
/// [`one_in`](XorShift::one_in) and [`bytes_from`](XorShift::bytes_from) are
/// built on [`below`](XorShift::below), [`pick_high`](XorShift::pick_high) on
/// [`below_high`](XorShift::below_high); [`percent`](XorShift::percent) and
/// [`byte`](XorShift::byte) use one raw output each.
///
/// ```
/// use waf_test_support::XorShift;
///
/// let mut a = XorShift::new(42);
/// let mut b = XorShift::new(42);
/// let xs: Vec<u64> = (0..4).map(|_| a.next_u64()).collect();
/// let ys: Vec<u64> = (0..4).map(|_| b.next_u64()).collect();
/// assert_eq!(xs, ys);
/// assert!(a.below(10) < 10);
/// ```
#[derive(Clone, Debug)]
pub struct XorShift {
    state: u64,
    variant: Variant,
}

impl XorShift {
    /// xorshift64* seeded from `seed`: the seed is multiplied by 2^64/φ and
    /// its low bit set, so every seed (0 included) gives a non-zero state and
    /// nearby seeds give unrelated streams.
    pub fn new(seed: u64) -> XorShift {
        XorShift::from_state(seed.wrapping_mul(SEED_MIXER) | 1)
    }

    /// xorshift64* starting from exactly `state` (no seed mixing). A zero
    /// state yields zeros forever.
    pub fn from_state(state: u64) -> XorShift {
        XorShift {
            state,
            variant: Variant::Star,
        }
    }

    /// Marsaglia's plain xorshift64 (shifts 13, 7, 17; each output is the
    /// new state) starting from exactly `state`. A zero state yields zeros
    /// forever.
    pub fn plain(state: u64) -> XorShift {
        XorShift {
            state,
            variant: Variant::Plain,
        }
    }

    /// The next 64 pseudo-random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        match self.variant {
            Variant::Star => {
                x ^= x >> 12;
                x ^= x << 25;
                x ^= x >> 27;
                self.state = x;
                x.wrapping_mul(STAR_MULTIPLIER)
            }
            Variant::Plain => {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                self.state = x;
                x
            }
        }
    }

    /// A pseudo-random byte: the low 8 bits of [`next_u64`](Self::next_u64).
    pub fn byte(&mut self) -> u8 {
        self.next_u64() as u8
    }

    /// A number in `0..n`: [`next_u64`](Self::next_u64) modulo `n`
    /// (slightly biased for large `n`, which tests do not mind). `below(0)`
    /// is 0 (it still consumes one output).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % (n.max(1) as u64)) as usize
    }

    /// A number in `0..n` from the top 31 bits of
    /// [`next_u64`](Self::next_u64) (`(next >> 33) % n`). A different
    /// sequence from [`below`](Self::below) for the same stream. `n` must
    /// be positive.
    pub fn below_high(&mut self, n: usize) -> usize {
        (self.next_u64() >> 33) as usize % n
    }

    /// A pseudo-random element of `items` (chosen with
    /// [`below`](Self::below)). Panics if `items` is empty.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// A pseudo-random element of `items` chosen with
    /// [`below_high`](Self::below_high). Panics if `items` is empty.
    pub fn pick_high<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below_high(items.len())]
    }

    /// True with probability 1/`n` (`below(n) == 0`; always true for
    /// `n` ≤ 1).
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    /// True with probability `p`/100 (`next_u64() % 100 < p`; always true
    /// for `p` ≥ 100).
    pub fn percent(&mut self, p: u64) -> bool {
        self.next_u64() % 100 < p
    }

    /// A pseudo-random byte string of up to `max` bytes (the length is
    /// `below(max + 1)`, possibly overshot by the last piece), made mostly
    /// of pieces of `alphabet` so that parsers' interesting paths are hit:
    /// each step appends a random byte with probability 1/8, otherwise one
    /// piece picked from `alphabet` (which must not be empty).
    pub fn bytes_from(&mut self, alphabet: &[&[u8]], max: usize) -> Vec<u8> {
        let n = self.below(max + 1);
        let mut v = Vec::with_capacity(n);
        while v.len() < n {
            if self.below(8) == 0 {
                v.push(self.byte());
            } else {
                v.extend_from_slice(alphabet[self.below(alphabet.len())]);
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference xorshift64* the test suites were written against.
    fn star_reference(state: &mut u64) -> u64 {
        let mut x = *state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        *state = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// The reference plain xorshift64 (13, 7, 17).
    fn plain_reference(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn star_matches_the_reference_streams() {
        for seed in [0, 1, 7, 42, 0x5eed_1234, u64::MAX] {
            let mut rng = XorShift::new(seed);
            let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            for _ in 0..1000 {
                assert_eq!(rng.next_u64(), star_reference(&mut s));
            }
        }
        let mut rng = XorShift::from_state(0x9e37_79b9_7f4a_7c15);
        let mut s = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..1000 {
            assert_eq!(rng.next_u64(), star_reference(&mut s));
        }
    }

    #[test]
    fn plain_matches_the_reference_stream() {
        let mut rng = XorShift::plain(0x2545_f491_4f6c_dd1d);
        let mut s = 0x2545_f491_4f6c_dd1d;
        for _ in 0..1000 {
            assert_eq!(rng.next_u64(), plain_reference(&mut s));
        }
    }

    /// Pinned first outputs: a change to the algorithm would silently change
    /// every suite's generated inputs, so it must fail here first.
    #[test]
    fn first_outputs_are_pinned() {
        let mut star = XorShift::new(1);
        let mut plain = XorShift::plain(1);
        let star_first: Vec<u64> = (0..3).map(|_| star.next_u64()).collect();
        let plain_first: Vec<u64> = (0..3).map(|_| plain.next_u64()).collect();
        assert_eq!(star_first, PINNED_STAR);
        assert_eq!(plain_first, PINNED_PLAIN);
    }

    // Computed independently (Python, arbitrary-precision integers masked to
    // 64 bits).
    const PINNED_STAR: [u64; 3] = [
        973_819_730_272_012_410,
        6_108_091_081_255_984_487,
        12_125_365_036_566_318_712,
    ];
    const PINNED_PLAIN: [u64; 3] = [
        1_082_269_761,
        1_152_992_998_833_853_505,
        11_177_516_664_432_764_457,
    ];

    #[test]
    fn range_helpers() {
        let mut rng = XorShift::new(3);
        let mut seen = [false; 10];
        for _ in 0..1000 {
            let a = rng.below(10);
            let b = rng.below_high(10);
            assert!(a < 10 && b < 10);
            seen[a] = true;
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(rng.below(0), 0);
        assert_eq!(rng.below(1), 0);
        assert!(rng.one_in(1));
        assert!(rng.percent(100));
        assert!(!rng.percent(0));
        let items = ["a", "b", "c"];
        assert!(items.contains(rng.pick(&items)));
        assert!(items.contains(rng.pick_high(&items)));

        // below_high uses the top bits, below the whole value.
        let (mut x, mut y) = (XorShift::new(9), XorShift::new(9));
        let v = y.next_u64();
        assert_eq!(x.below_high(1000), ((v >> 33) % 1000) as usize);
        let v = y.next_u64();
        assert_eq!(x.below(1000), (v % 1000) as usize);
    }

    #[test]
    fn bytes_from_respects_the_length_bound() {
        const ALPHABET: &[&[u8]] = &[b"a", b"%2", b"<x"];
        let mut rng = XorShift::new(11);
        for _ in 0..500 {
            let v = rng.bytes_from(ALPHABET, 16);
            assert!(v.len() <= 17, "{v:?}");
        }
        // Same seed, same strings.
        let (mut a, mut b) = (XorShift::new(5), XorShift::new(5));
        for _ in 0..50 {
            assert_eq!(a.bytes_from(ALPHABET, 32), b.bytes_from(ALPHABET, 32));
        }
    }
}
