//! The `@rx` operator's regex layer: PCRE-compatible byte regexes on
//! linear-time engines.
//!
//! ModSecurity compiles `@rx` patterns with PCRE in non-UTF mode (libmodsecurity
//! v3 and Coraza use DOTALL|MULTILINE) and matches them against raw bytes,
//! which may be anything but UTF-8 in attack traffic. This module keeps those
//! semantics on top of `regex-syntax` / `regex-automata`:
//!
//! 1. [`translate`] rewrites the PCRE text into regex-syntax text with the
//!    flags `(?sm-u)`: bytes not code points (`\x{c2}` is one byte, `[^>]`
//!    matches `\xff`, `.` matches every byte including `\n`), ASCII-only
//!    `\w \d \s \b` and case folding (`(?i)s` does not match `ſ`). PCRE-only
//!    constructs (lookaround, backreferences, possessive quantifiers, ...)
//!    are rejected with [`RxError::Unsupported`] naming the construct, with
//!    its byte range in the original pattern; every other syntax error is a
//!    [`RxError::Invalid`] whose range is mapped back through the rewrite.
//! 2. [`CompiledRx`] holds a `regex_automata::meta::Regex` (captures, and
//!    the lazy DFA) and, when it fits in [`RxOptions::dense_dfa_budget`], a
//!    fully built dense DFA for yes/no matching. Both run in time linear in
//!    the haystack, so no pattern can be used for ReDoS.
//! 3. [`required_literals`] computes a sound prefilter: literals, at least one
//!    of which (ASCII-case-insensitively) occurs in every haystack the
//!    pattern matches, so the engine can skip a rule with one shared
//!    Aho-Corasick scan.

//!
//! # Decisions worth knowing
//!
//! * Outside a class, `\1`..`\9` (and longer `\NN`) are backreferences in
//!   PCRE and are rejected; PCRE would read `\12` as octal when fewer than 12
//!   groups exist, which is rejected too rather than guessed. Inside a class
//!   PCRE has no backreferences: `[\1]` is octal (byte 0x01), `[\8]` is `8`.
//!   `\0`, `\0oo` and `\o{..}` are octal everywhere.
//! * `\R` (atomic in PCRE), `\X`, `\C`, `\G`, `\K`, `\Z` and `\p{..}` are
//!   rejected; `\h`, `\H`, `\v`, `\V` (PCRE's white-space classes, *not*
//!   regex-syntax's VT) and `\N` are expanded to byte classes.
//! * A quantifier on a quantifier (`a**`, `a{2}{3}`) is an error, as in PCRE.
//! * Remaining known deviation: with `(?m)` (the default), PCRE's `^` does
//!   not match after a newline that ends the subject, regex-syntax's does
//!   (so `^$` matches `"a\n"` here, as it does in Coraza / RE2). It can only
//!   matter when what follows `^` can match the empty string at the end.
//!   See `translate.rs` for the minor syntax-level ones.

pub mod analysis;
pub mod batch;
mod literals;
mod matcher;
mod relax;
mod translate;

#[cfg(test)]
mod tests;

pub use literals::{required_literals, RequiredLiterals, MIN_SCAN_LEN};
pub use matcher::{
    parse, take_limit_hits, CompiledRx, DeferredDfa, Precompiled, PrecompiledRx, Strategy,
};
pub use translate::{translate, FLAGS_PREFIX};
pub use waf_pcre::Limits as BacktrackLimits;

use std::fmt;
use std::ops::Range;

/// Options for compiling one pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RxOptions {
    /// Largest dense DFA (in bytes of transition table) to build for
    /// [`CompiledRx::is_match`]; 0 = never build a full DFA (use the lazy
    /// DFA of the meta regex). Also used as the determinization memory limit,
    /// so an attempt on a pattern that does not fit aborts early.
    pub dense_dfa_budget: usize,
    /// regex-automata NFA size limit (bytes); a bigger pattern is
    /// [`RxError::TooBig`].
    pub size_limit: usize,
    /// Upper bound of the lazy DFA's cache per pattern and thread (bytes).
    pub lazy_dfa_cache: usize,
    /// Leave the dense DFA unbuilt at compile time: [`CompiledRx`] answers
    /// with the meta regex (same results) until [`DeferredDfa::build`] is
    /// called, typically on a background thread (the engine does this, so
    /// that a ruleset loads in a fraction of the time).
    pub defer_dense: bool,
}

impl RxOptions {
    /// Default [`RxOptions::dense_dfa_budget`]: 256 KiB. On CRS v4 this gives
    /// most small and medium patterns a full DFA while a failing attempt on
    /// one of the big keyword alternations costs milliseconds, not seconds.
    pub const DEFAULT_DENSE_DFA_BUDGET: usize = 256 * 1024;
    /// Default [`RxOptions::size_limit`]: 10 MiB, the `regex` crate's default;
    /// the biggest CRS pattern needs far less.
    pub const DEFAULT_SIZE_LIMIT: usize = 10 * 1024 * 1024;
    /// Default [`RxOptions::lazy_dfa_cache`]: 16 MiB.
    pub const DEFAULT_LAZY_DFA_CACHE: usize = 16 * 1024 * 1024;
}

impl Default for RxOptions {
    fn default() -> Self {
        RxOptions {
            dense_dfa_budget: Self::DEFAULT_DENSE_DFA_BUDGET,
            size_limit: Self::DEFAULT_SIZE_LIMIT,
            lazy_dfa_cache: Self::DEFAULT_LAZY_DFA_CACHE,
            defer_dense: false,
        }
    }
}

/// Why an `@rx` pattern cannot be compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RxError {
    /// A PCRE-only construct. `construct` is a human name like "lookahead `(?=...)`".
    Unsupported {
        /// A human name of the construct, like "lookahead `(?=...)`".
        construct: &'static str,
        /// Where it is in the pattern.
        range: Range<usize>,
    },
    /// Any other syntax error; `message` is regex-syntax's message (one line).
    Invalid {
        /// regex-syntax's message (one line).
        message: String,
        /// Where the error is in the pattern.
        range: Range<usize>,
    },
    /// The pattern is too big for the configured limits.
    TooBig {
        /// The limit's message.
        message: String,
    },
}

impl RxError {
    /// The byte range in the original pattern, if the error has one.
    pub fn range(&self) -> Option<Range<usize>> {
        match self {
            RxError::Unsupported { range, .. } | RxError::Invalid { range, .. } => {
                Some(range.clone())
            }
            RxError::TooBig { .. } => None,
        }
    }
}

impl fmt::Display for RxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RxError::Unsupported { construct, range } => write!(
                f,
                "unsupported PCRE construct at bytes {}..{}: {} (only constructs that \
                 can be matched in linear time are supported)",
                range.start, range.end, construct
            ),
            RxError::Invalid { message, range } => write!(
                f,
                "invalid regular expression at bytes {}..{}: {}",
                range.start, range.end, message
            ),
            RxError::TooBig { message } => write!(f, "regular expression too big: {message}"),
        }
    }
}

impl std::error::Error for RxError {}
