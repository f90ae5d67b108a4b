//! Compiled `@rx` patterns: a meta regex (captures, lazy DFA) plus an
//! optional fully built dense DFA for yes/no matching.

use super::literals::{required_literals, RequiredLiterals};
use super::translate::{translate_mapped, OffsetMap};
use super::{RxError, RxOptions};
use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::nfa::thompson::{self, WhichCaptures};
use regex_automata::util::primitives::NonMaxUsize;
use regex_automata::{meta, Anchored, Input, MatchKind};
use regex_syntax::hir::Hir;
use std::cell::Cell;
use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// Parser nesting limit (groups, repetitions, classes), as PCRE's default
/// parenthesis nesting limit. It also bounds the recursion depth of everything
/// that walks the HIR.
pub(crate) const NEST_LIMIT: u32 = 250;

/// Translates and parses a pattern with ModSecurity semantics (see
/// [`super::translate`]); the HIR is in byte mode (`(?sm-u)`).
pub fn parse(pattern: &str) -> Result<Hir, RxError> {
    let (translated, map) = translate_mapped(pattern)?;
    parse_translated(&translated, &map)
}

fn parse_translated(translated: &str, map: &OffsetMap) -> Result<Hir, RxError> {
    hir_parser()
        .parse(translated)
        .map_err(|e| syntax_error(&e, map))
}

/// The parser of translated text, as [`parse`] uses it (`rx::analysis`
/// parses pieces of patterns with it too).
pub(crate) fn hir_parser() -> regex_syntax::Parser {
    // The flags are also in the text (`(?sm-u)`); setting them here too keeps
    // the parser's defaults from mattering.
    regex_syntax::ParserBuilder::new()
        .unicode(false)
        .utf8(false)
        .dot_matches_new_line(true)
        .multi_line(true)
        .octal(false)
        .nest_limit(NEST_LIMIT)
        .build()
}

/// Longest translated pattern [`CompiledRx::from_precompiled`] checks with
/// [`matches_whole_input`] (`(?sm-u)^.*$` is 13 bytes).
const WHOLE_INPUT_MAX_LEN: usize = 64;

/// Whether the pattern's leftmost-first match in any haystack is the whole
/// haystack, with no capture group but the implicit one: `.*` over every
/// byte (greedy, as `.` is in ModSecurity's `DOTALL` mode), with only
/// start-of-text or start-of-line assertions before it and end-of-text or
/// end-of-line ones after it (all hold at the haystack's ends). CRS's
/// 920450 captures each header name with `^.*$`: its answer and capture
/// are known without a search.
fn matches_whole_input(hir: &Hir) -> bool {
    use regex_syntax::hir::{Class, HirKind, Look};
    let items = match hir.kind() {
        HirKind::Concat(items) => items.as_slice(),
        _ => std::slice::from_ref(hir),
    };
    let is_look =
        |h: &Hir, looks: &[Look]| matches!(h.kind(), HirKind::Look(l) if looks.contains(l));
    let starts = [Look::Start, Look::StartLF, Look::StartCRLF];
    let ends = [Look::End, Look::EndLF, Look::EndCRLF];
    let first = items.iter().take_while(|h| is_look(h, &starts)).count();
    let last = items.len() - items.iter().rev().take_while(|h| is_look(h, &ends)).count();
    let [middle] = items.get(first..last).unwrap_or(&[]) else {
        return false;
    };
    let HirKind::Repetition(rep) = middle.kind() else {
        return false;
    };
    let every_byte = match rep.sub.kind() {
        HirKind::Class(Class::Bytes(c)) => {
            c.ranges().len() == 1 && c.ranges()[0].start() == 0 && c.ranges()[0].end() == 255
        }
        _ => false,
    };
    rep.min == 0 && rep.max.is_none() && rep.greedy && every_byte
}

/// Maps a regex-syntax error (whose span is in the translated text) back to
/// the original pattern.
fn syntax_error(err: &regex_syntax::Error, map: &OffsetMap) -> RxError {
    let (message, span) = match err {
        regex_syntax::Error::Parse(e) => (e.kind().to_string(), *e.span()),
        regex_syntax::Error::Translate(e) => (e.kind().to_string(), *e.span()),
        other => {
            return RxError::Invalid {
                message: one_line(&other.to_string()),
                range: map.to_original(0..usize::MAX),
            }
        }
    };
    RxError::Invalid {
        message: one_line(&message),
        range: map.to_original(span.start.offset..span.end.offset),
    }
}

fn one_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Which engine answers [`CompiledRx::is_match`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// A dense DFA built ahead of time.
    FullDfa {
        /// The DFA's heap size.
        bytes: usize,
    },
    /// The meta regex (a lazy DFA that builds states as the input needs
    /// them, falling back to other linear-time engines).
    LazyDfa,
    /// The meta regex for now: the dense DFA was deferred
    /// ([`RxOptions::defer_dense`]) and is not built yet.
    Pending,
    /// PCRE2, a backtracking engine, under a match limit: the pattern uses
    /// a PCRE-only construct and the configuration opted in
    /// ([`CompiledRx::compile_backtracking`]).
    Backtracking,
}

/// The engines of a linear-time pattern, each built once: when the pattern
/// is compiled, or later, by the first thread that needs it or by a
/// background thread ([`DeferredDfa::build`]).
///
/// Building the dense DFAs of CRS's patterns (and failing to fit the budget
/// on the big ones) is most of the time a load from source takes; deferring
/// them lets a server answer with the meta regex, which gives the same
/// results, while another thread builds them. A pattern read from a
/// compiled artifact has its dense DFA at once and defers its meta regex
/// instead (needed for captures only), or has its meta regex at once when
/// its DFA did not fit the budget.
#[derive(Debug)]
struct Cells {
    /// The pattern as given to regex-syntax.
    translated: String,
    /// The options the pattern was compiled with (a deferred build uses them).
    opts: RxOptions,
    /// Capture groups including group 0 (known without the meta regex).
    group_count: usize,
    /// `None` inside: the build failed (it cannot for a pattern compiled
    /// from source, whose meta regex is built at once; see [`Cells::meta`]).
    meta: OnceLock<Option<meta::Regex>>,
    /// `None` inside: the pattern does not fit the budget.
    dense: OnceLock<Option<dense::DFA<Vec<u32>>>>,
}

impl Cells {
    fn meta(&self) -> Option<&meta::Regex> {
        self.meta
            .get_or_init(|| {
                let hir = hir_parser().parse(&self.translated).ok()?;
                build_meta(&hir, &self.opts).ok()
            })
            .as_ref()
    }

    fn dense(&self) -> Option<&dense::DFA<Vec<u32>>> {
        self.dense.get().and_then(Option::as_ref)
    }

    fn build(&self) {
        self.meta();
        self.dense.get_or_init(|| {
            let hir = hir_parser().parse(&self.translated).ok()?;
            build_dense(&hir, &self.opts)
        });
    }

    fn is_built(&self) -> bool {
        self.meta.get().is_some() && self.dense.get().is_some()
    }
}

/// The handle of a pattern's deferred builds ([`CompiledRx::deferred_dfa`]):
/// any thread may run them, once; the [`CompiledRx`] uses what they built
/// from then on.
#[derive(Clone, Debug)]
pub struct DeferredDfa(Arc<Cells>);

impl DeferredDfa {
    /// Builds what is not built (the dense DFA, or learning that it does
    /// not fit; the meta regex of a pattern read from an artifact); if
    /// another thread is building it, waits for that build.
    pub fn build(&self) {
        self.0.build();
    }

    /// Whether the pattern it belongs to is still alive (a build for a
    /// dropped ruleset is wasted work).
    pub fn is_wanted(&self) -> bool {
        Arc::strong_count(&self.0) > 1
    }

    /// Whether the builds are done.
    pub fn is_built(&self) -> bool {
        self.0.is_built()
    }
}

/// What compiling a pattern computes that a compiled artifact keeps, so
/// that loading it does not compute it again.
#[derive(Debug)]
pub struct PrecompiledRx {
    /// The prefilter literals ([`CompiledRx::required_literals`]).
    pub literals: RequiredLiterals,
    /// [`CompiledRx::group_count`].
    pub group_count: usize,
    /// Where the dense DFA (serialized by [`CompiledRx::dense_dfa_bytes`])
    /// is in [`Precompiled::bytes`]; `None`: it did not fit the budget.
    pub dense: Option<Range<usize>>,
}

/// Precompiled patterns by their original text, and the bytes their dense
/// DFAs are read from.
#[derive(Debug, Default)]
pub struct Precompiled {
    patterns: std::collections::HashMap<String, PrecompiledRx>,
    /// The patterns in the order they were inserted.
    order: Vec<String>,
    /// Holds `bytes` from offset `start`, which is 4-byte aligned in memory
    /// (regex-automata reads a DFA's tables in place only when aligned).
    buffer: Vec<u8>,
    start: usize,
}

impl Precompiled {
    /// No patterns; DFA ranges refer to `buffer[start..]`, which is copied
    /// only if it is not 4-byte aligned in memory.
    pub fn new(buffer: Vec<u8>, start: usize) -> Precompiled {
        let aligned = buffer
            .as_ptr()
            .wrapping_add(start.min(buffer.len()))
            .align_offset(4)
            == 0;
        if aligned && start <= buffer.len() {
            return Precompiled {
                patterns: std::collections::HashMap::new(),
                order: Vec::new(),
                buffer,
                start,
            };
        }
        let bytes = buffer.get(start..).unwrap_or_default();
        let mut copy: Vec<u8> = Vec::with_capacity(bytes.len() + 3);
        let pad = match copy.as_ptr().align_offset(4) {
            n if n < 4 => n,
            _ => 0,
        };
        copy.resize(pad, 0);
        copy.extend_from_slice(bytes);
        Precompiled {
            patterns: std::collections::HashMap::new(),
            order: Vec::new(),
            buffer: copy,
            start: pad,
        }
    }

    /// The bytes DFA ranges refer to.
    pub fn bytes(&self) -> &[u8] {
        self.buffer.get(self.start..).unwrap_or_default()
    }

    /// Adds (or replaces) `pattern`'s entry.
    pub fn insert(&mut self, pattern: String, rx: PrecompiledRx) {
        if self.patterns.insert(pattern.clone(), rx).is_none() {
            self.order.push(pattern);
        }
    }

    /// The patterns, in the order they were first inserted.
    pub fn patterns(&self) -> impl Iterator<Item = &str> {
        self.order.iter().map(String::as_str)
    }

    /// The entry of `pattern`, if any.
    pub fn get(&self, pattern: &str) -> Option<&PrecompiledRx> {
        self.patterns.get(pattern)
    }

    /// The dense DFA at `range` of [`Precompiled::bytes`], if it reads back
    /// (regex-automata checks it). Copied out: the tables are then owned
    /// like those of a DFA built here.
    fn dense_dfa(&self, range: Range<usize>) -> Option<dense::DFA<Vec<u32>>> {
        let slice = self.bytes().get(range)?;
        let (dfa, _) = dense::DFA::from_bytes(slice).ok()?;
        Some(dfa.to_owned())
    }
}

/// A compiled `@rx`: fast yes/no matching + capture groups for `capture`.
///
/// Matching is on bytes, with no shared mutable state visible to callers:
/// `&self` methods may be called from many threads at once (the meta regex
/// keeps per-thread caches in a pool, PCRE2 per-thread match data). Time is
/// linear in the haystack, except for the patterns compiled with
/// [`CompiledRx::compile_backtracking`], which a match limit bounds instead.
pub struct CompiledRx {
    pattern: String,
    engine: Engine,
    literals: RequiredLiterals,
    /// The pattern matches every haystack, whole (see
    /// [`matches_whole_input`]): answered without searching.
    whole_input: bool,
}

enum Engine {
    Linear(Linear),
    Backtracking(Backtracking),
}

/// The default engine: regex-automata.
struct Linear(Arc<Cells>);

/// The opt-in engine for PCRE-only patterns.
struct Backtracking {
    regex: waf_pcre::Regex,
    limits: waf_pcre::Limits,
    /// Searches of this pattern that ended at a limit, on every thread.
    limit_hits: AtomicU64,
}

thread_local! {
    /// Searches that ended at a limit on this thread since the last
    /// [`take_limit_hits`]: the engine reads it after an operator ran, so
    /// that matching keeps its plain `bool` answers.
    static LIMIT_HITS: Cell<u64> = const { Cell::new(0) };
}

/// Searches on this thread that ended at the backtracking engine's limit
/// since the last call (and resets the count). A search that ends at the
/// limit answers "no match", as ModSecurity does; this is how its caller
/// learns that the answer was not a real one.
pub fn take_limit_hits() -> u64 {
    LIMIT_HITS.with(|c| c.replace(0))
}

impl Backtracking {
    fn search(
        &self,
        haystack: &[u8],
        start: usize,
        anchored: bool,
        slots: &mut [Option<Range<usize>>],
    ) -> bool {
        match self
            .regex
            .search(haystack, start, anchored, self.limits, slots)
        {
            Ok(m) => m,
            Err(_) => {
                self.limit_hits.fetch_add(1, Ordering::Relaxed);
                LIMIT_HITS.with(|c| c.set(c.get() + 1));
                false
            }
        }
    }
}

impl CompiledRx {
    /// Compiles `pattern` (PCRE syntax, ModSecurity semantics).
    pub fn compile(pattern: &str, opts: &RxOptions) -> Result<CompiledRx, RxError> {
        let (translated, map) = translate_mapped(pattern)?;
        let hir = parse_translated(&translated, &map)?;
        let meta = build_meta(&hir, opts)?;
        let literals = required_literals(&hir);
        let whole_input = matches_whole_input(&hir);
        let dense = if opts.dense_dfa_budget == 0 {
            OnceLock::from(None)
        } else if opts.defer_dense {
            OnceLock::new()
        } else {
            OnceLock::from(build_dense(&hir, opts))
        };
        Ok(CompiledRx {
            pattern: pattern.to_string(),
            engine: Engine::Linear(Linear(Arc::new(Cells {
                translated,
                opts: opts.clone(),
                group_count: meta.captures_len(),
                meta: OnceLock::from(Some(meta)),
                dense,
            }))),
            literals,
            whole_input,
        })
    }

    /// `pattern` with what a compiled artifact kept of its compilation: no
    /// literal analysis; no DFA construction; the meta regex is built now
    /// only when there is no dense DFA to answer `is_match` (otherwise
    /// later, see [`DeferredDfa`]). A dense DFA that does not read back
    /// (which a checksummed artifact made by this version cannot give) is
    /// built again as from source.
    pub fn from_precompiled(
        pattern: &str,
        pre: &PrecompiledRx,
        all: &Precompiled,
        opts: &RxOptions,
    ) -> Result<CompiledRx, RxError> {
        let (translated, map) = translate_mapped(pattern)?;
        let dense = match &pre.dense {
            None => OnceLock::from(None),
            Some(range) => match all.dense_dfa(range.clone()) {
                Some(dfa) => OnceLock::from(Some(dfa)),
                None => OnceLock::new(),
            },
        };
        // Parsed for the meta regex when there is no dense DFA, and for
        // `matches_whole_input` when short: a pattern that matches every
        // haystack is a few bytes long, a longer one is not parsed for it.
        let needs_meta = !dense.get().is_some_and(Option::is_some);
        let short = translated.len() <= WHOLE_INPUT_MAX_LEN;
        let hir = if needs_meta {
            Some(parse_translated(&translated, &map)?)
        } else if short {
            parse_translated(&translated, &map).ok()
        } else {
            None
        };
        let meta = match &hir {
            Some(hir) if needs_meta => OnceLock::from(Some(build_meta(hir, opts)?)),
            _ => OnceLock::new(),
        };
        let whole_input = short && hir.as_ref().is_some_and(matches_whole_input);
        Ok(CompiledRx {
            pattern: pattern.to_string(),
            engine: Engine::Linear(Linear(Arc::new(Cells {
                translated,
                opts: opts.clone(),
                group_count: pre.group_count,
                meta,
                dense,
            }))),
            literals: pre.literals.clone(),
            whole_input,
        })
    }

    /// The dense DFA serialized (little-endian), with the number of padding
    /// bytes at its front to drop when it is written 4-byte aligned; `None`
    /// when there is none (not built yet, or does not fit).
    pub fn dense_dfa_bytes(&self) -> Option<(Vec<u8>, usize)> {
        match &self.engine {
            Engine::Linear(l) => l.0.dense().map(|d| d.to_bytes_little_endian()),
            Engine::Backtracking(_) => None,
        }
    }

    /// Compiles `pattern` on PCRE2 (as libmodsecurity 3 does: `DOTALL |
    /// MULTILINE`, bytes), for the patterns [`CompiledRx::compile`] rejects
    /// as PCRE-only when the configuration opts in. Searches run under
    /// [`waf_pcre::Limits::DEFAULT`] until [`CompiledRx::set_limits`]; one
    /// that reaches a limit answers "no match" and is counted
    /// ([`take_limit_hits`], [`CompiledRx::limit_hits`]). Its prefilter
    /// literals are those of a linear-time relaxation that matches more
    /// (`rx::relax`), when there is one; otherwise it runs on every value.
    pub fn compile_backtracking(pattern: &str) -> Result<CompiledRx, RxError> {
        let regex = waf_pcre::Regex::new(pattern).map_err(|e| {
            let at = e.offset.min(pattern.len());
            RxError::Invalid {
                message: e.message,
                range: at..(at + 1).min(pattern.len()).max(at),
            }
        })?;
        // The literals of a relaxation that matches more (see
        // `super::relax`): sound for the pattern itself.
        let literals = super::relax::relaxed(pattern)
            .and_then(|r| parse(&r).ok())
            .map_or(RequiredLiterals::None, |hir| required_literals(&hir));
        Ok(CompiledRx {
            pattern: pattern.to_string(),
            engine: Engine::Backtracking(Backtracking {
                regex,
                limits: waf_pcre::Limits::DEFAULT,
                limit_hits: AtomicU64::new(0),
            }),
            literals,
            whole_input: false,
        })
    }

    /// Sets the backtracking engine's limits (`SecPcreMatchLimit`,
    /// `SecPcreMatchLimitRecursion`); no effect on a linear-time pattern.
    pub fn set_limits(&mut self, limits: waf_pcre::Limits) {
        if let Engine::Backtracking(b) = &mut self.engine {
            b.limits = limits;
        }
    }

    /// Whether the pattern runs on the backtracking engine.
    pub fn is_backtracking(&self) -> bool {
        matches!(self.engine, Engine::Backtracking(_))
    }

    /// Searches of this pattern that ended at the backtracking engine's
    /// limit, on every thread (always 0 for a linear-time pattern).
    pub fn limit_hits(&self) -> u64 {
        match &self.engine {
            Engine::Backtracking(b) => b.limit_hits.load(Ordering::Relaxed),
            Engine::Linear(_) => 0,
        }
    }

    /// The original pattern.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// The pattern as given to regex-syntax (see [`super::translate`]); the
    /// original pattern for one that runs on PCRE2.
    pub fn translated(&self) -> &str {
        match &self.engine {
            Engine::Linear(l) => &l.0.translated,
            Engine::Backtracking(_) => &self.pattern,
        }
    }

    /// Which engine answers [`CompiledRx::is_match`].
    pub fn strategy(&self) -> Strategy {
        let l = match &self.engine {
            Engine::Linear(l) => l,
            Engine::Backtracking(_) => return Strategy::Backtracking,
        };
        match l.0.dense.get() {
            Some(Some(dfa)) => Strategy::FullDfa {
                bytes: dfa.memory_usage(),
            },
            Some(None) => Strategy::LazyDfa,
            None => Strategy::Pending,
        }
    }

    /// The dense DFA still to build, if it was deferred and is not built.
    pub fn deferred_dfa(&self) -> Option<DeferredDfa> {
        match &self.engine {
            Engine::Linear(l) => (!l.0.is_built()).then(|| DeferredDfa(Arc::clone(&l.0))),
            Engine::Backtracking(_) => None,
        }
    }

    /// Whether the pattern matches anywhere in `haystack`. Stops at the first
    /// position where a match is certain (no need to find where it ends).
    pub fn is_match(&self, haystack: &[u8]) -> bool {
        let l = match &self.engine {
            Engine::Linear(l) => l,
            Engine::Backtracking(b) => return b.search(haystack, 0, false, &mut []),
        };
        if self.whole_input {
            return true;
        }
        if let Some(dfa) = l.0.dense() {
            // No quit bytes and no Unicode word boundaries were configured,
            // so the search cannot fail; fall back to the meta regex anyway
            // rather than trusting that.
            if let Ok(m) = dfa.try_search_fwd(&Input::new(haystack).earliest(true)) {
                return m.is_some();
            }
        }
        l.0.meta().is_some_and(|m| m.is_match(haystack))
    }

    /// Fills `slots[i]` with the byte range of group i (0 = whole match) of the
    /// leftmost-first match; returns false if no match. Slots beyond
    /// [`CompiledRx::group_count`] and groups that did not participate are set
    /// to `None`. Allocates nothing for up to [`CompiledRx::STACK_GROUPS`] slots.
    pub fn captures(&self, haystack: &[u8], slots: &mut [Option<Range<usize>>]) -> bool {
        let l = match &self.engine {
            Engine::Linear(l) => l,
            Engine::Backtracking(b) => return b.search(haystack, 0, false, slots),
        };
        if self.whole_input {
            for (i, slot) in slots.iter_mut().enumerate() {
                *slot = (i == 0).then_some(0..haystack.len());
            }
            return true;
        }
        let want = slots.len().min(self.group_count());
        let Some(meta) = l.0.meta() else {
            slots.fill(None);
            return false;
        };
        let input = Input::new(haystack);
        let matched = if want <= Self::STACK_GROUPS {
            let mut raw = [None::<NonMaxUsize>; 2 * Self::STACK_GROUPS];
            let matched = meta
                .search_slots(&input, &mut raw[..2 * want.max(1)])
                .is_some();
            for (i, slot) in slots.iter_mut().enumerate() {
                *slot = match (matched && i < want, raw.get(2 * i), raw.get(2 * i + 1)) {
                    (true, Some(Some(s)), Some(Some(e))) => Some(s.get()..e.get()),
                    _ => None,
                };
            }
            matched
        } else {
            let mut caps = meta.create_captures();
            meta.search_captures(&input, &mut caps);
            let matched = caps.is_match();
            for (i, slot) in slots.iter_mut().enumerate() {
                *slot = if matched {
                    caps.get_group(i).map(|s| s.range())
                } else {
                    None
                };
            }
            matched
        };
        matched
    }

    /// The leftmost-first match that starts at or after `start` (with the
    /// bytes before `start` as context, as PCRE's start offset keeps them).
    pub fn find_from(&self, haystack: &[u8], start: usize) -> Option<Range<usize>> {
        if start > haystack.len() {
            return None;
        }
        match &self.engine {
            Engine::Linear(l) => {
                l.0.meta()?
                    .search(&Input::new(haystack).range(start..))
                    .map(|m| m.range())
            }
            Engine::Backtracking(b) => {
                let mut slot = [None];
                b.search(haystack, start, false, &mut slot);
                slot[0].take()
            }
        }
    }

    /// The end of the leftmost-first match that starts at the beginning of
    /// `haystack`, if there is one.
    pub fn prefix_match_end(&self, haystack: &[u8]) -> Option<usize> {
        match &self.engine {
            Engine::Linear(l) => {
                l.0.meta()?
                    .search(&Input::new(haystack).anchored(Anchored::Yes))
                    .map(|m| m.end())
            }
            Engine::Backtracking(b) => {
                let mut slot = [None];
                b.search(haystack, 0, true, &mut slot);
                slot[0].take().map(|r| r.end)
            }
        }
    }

    /// Groups [`CompiledRx::captures`] fills without allocating.
    pub const STACK_GROUPS: usize = 16;

    /// Number of capture groups including the implicit group 0 (the whole
    /// match): `captures` fills at most this many slots.
    pub fn group_count(&self) -> usize {
        match &self.engine {
            Engine::Linear(l) => l.0.group_count,
            Engine::Backtracking(b) => b.regex.captures_len(),
        }
    }

    /// The prefilter literals (see [`RequiredLiterals`]).
    pub fn required_literals(&self) -> &RequiredLiterals {
        &self.literals
    }

    /// Whether searches are skipped as [`matches_whole_input`] allows.
    #[cfg(test)]
    pub(crate) fn whole_input(&self) -> bool {
        self.whole_input
    }

    /// The same pattern with every search run (for cross-checking
    /// [`matches_whole_input`]).
    #[cfg(test)]
    pub(crate) fn searching(mut self) -> CompiledRx {
        self.whole_input = false;
        self
    }

    /// `is_match` through the meta regex only (for cross-checking the DFA).
    #[cfg(test)]
    pub(crate) fn is_match_meta(&self, haystack: &[u8]) -> bool {
        match &self.engine {
            Engine::Linear(l) => l.0.meta().is_some_and(|m| m.is_match(haystack)),
            Engine::Backtracking(_) => self.is_match(haystack),
        }
    }
}

impl fmt::Debug for CompiledRx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledRx")
            .field("pattern", &self.pattern)
            .field("strategy", &self.strategy())
            .field("group_count", &self.group_count())
            .field("required_literals", &self.literals)
            .finish()
    }
}

/// The meta regex of a parsed pattern (captures, and the lazy DFA).
fn build_meta(hir: &Hir, opts: &RxOptions) -> Result<meta::Regex, RxError> {
    meta::Builder::new()
        .configure(
            meta::Config::new()
                .match_kind(MatchKind::LeftmostFirst)
                // Empty matches may split UTF-8 sequences: the haystack
                // is bytes, not text.
                .utf8_empty(false)
                .nfa_size_limit(Some(opts.size_limit))
                // The lazy DFA's per-thread cache: CRS's big keyword
                // alternations need more states than the 2 MiB default
                // holds, and a cache that keeps being cleared makes the
                // lazy DFA give up for the (much slower) NFA engines.
                // States are built on demand, so this bounds memory
                // rather than allocating it.
                .hybrid_cache_capacity(opts.lazy_dfa_cache),
        )
        .build_from_hir(hir)
        .map_err(|e| build_error(&e))
}

fn build_error(e: &regex_automata::meta::BuildError) -> RxError {
    match e.syntax_error() {
        // Not reachable when building from an HIR, but keep the information.
        Some(se) => RxError::Invalid {
            message: one_line(&se.to_string()),
            range: 0..0,
        },
        None => RxError::TooBig {
            message: one_line(&e.to_string()),
        },
    }
}

/// Builds a dense DFA for yes/no searches if it fits in the budget.
///
/// Unanchored start (an `@rx` matches anywhere), leftmost-first match kind
/// (the same automaton the meta regex would use; with `earliest` searches it
/// reports a match as soon as any match is certain, which is all `is_match`
/// needs), no minimization (too slow for big patterns). Both the final size
/// and the memory used while determinizing are capped by the budget, so an
/// attempt on a pattern that does not fit gives up after using at most that
/// much memory, and returns `None` (the meta regex's lazy DFA is used).
fn build_dense(hir: &Hir, opts: &RxOptions) -> Option<dense::DFA<Vec<u32>>> {
    dense_dfa(
        hir,
        MatchKind::LeftmostFirst,
        opts.size_limit,
        opts.dense_dfa_budget,
    )
}

/// An unanchored dense DFA of `hir` in byte semantics, with `kind` matches,
/// if its NFA and DFA fit the limits (also what `rx::analysis` compares
/// patterns with, using [`MatchKind::All`]).
pub(crate) fn dense_dfa(
    hir: &Hir,
    kind: MatchKind,
    nfa_limit: usize,
    dfa_budget: usize,
) -> Option<dense::DFA<Vec<u32>>> {
    let nfa = thompson::Compiler::new()
        .configure(
            thompson::Config::new()
                // Byte semantics. The default (`true`) makes DFA searches skip
                // any match ending inside what looks like a UTF-8 sequence
                // when the pattern can match the empty string, which on
                // binary input silently loses real matches (e.g.
                // `^$|exi` on b"exi\x83").
                .utf8(false)
                .nfa_size_limit(Some(nfa_limit))
                .which_captures(WhichCaptures::None),
        )
        .build_from_hir(hir)
        .ok()?;
    dense::Builder::new()
        .configure(
            dense::Config::new()
                .match_kind(kind)
                .start_kind(StartKind::Unanchored)
                .minimize(false)
                .dfa_size_limit(Some(dfa_budget))
                .determinize_size_limit(Some(dfa_budget)),
        )
        .build_from_nfa(&nfa)
        .ok()
}
