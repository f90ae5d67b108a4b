//! PCRE2 behind a small safe API, with the limits a WAF needs.
//!
//! The engine matches `@rx` on linear-time automata and rejects the PCRE-only
//! constructs (lookaround, backreferences, possessive quantifiers, ...) that
//! no automaton can run. Users migrating from ModSecurity may opt in to
//! running such patterns on PCRE2, the library libmodsecurity 3 itself uses.
//! A backtracking engine can take exponential time on a hostile input, so
//! every search here runs under a match limit and a depth limit
//! ([`Limits`]); a search that reaches one ends with
//! [`MatchError::LimitExceeded`] instead of burning the CPU.
//!
//! Patterns are compiled as libmodsecurity 3 compiles them: `PCRE2_DOTALL |
//! PCRE2_MULTILINE`, not in UTF mode (subjects are bytes), and JIT-compiled
//! when the library has a JIT.
//!
//! # Why a crate of its own
//!
//! The workspace forbids `unsafe` code; calling a C library needs it. This
//! crate is the only place that touches PCRE2, so that the rest of the
//! workspace keeps the rule. The `pcre2` crate (a safe wrapper by the same
//! author as `pcre2-sys`) is not used because it does not expose the match
//! limit.

use pcre2_sys::*;
use std::cell::RefCell;
use std::ffi::c_void;
use std::fmt;
use std::ops::Range;
use std::ptr::{self, NonNull};

/// Bounds on one search's work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// PCRE2's match limit: how many times its internal matching function
    /// may be called (backtracking points), as `SecPcreMatchLimit` sets it.
    pub match_limit: u32,
    /// PCRE2's depth limit (backtracking depth), as
    /// `SecPcreMatchLimitRecursion` sets it. The JIT ignores it; the match
    /// limit and the JIT stack's size bound JIT searches.
    pub depth_limit: u32,
}

impl Limits {
    /// The defaults: large enough for the patterns of real rule sets on
    /// request-sized values (ModSecurity v2's compiled-in 1,500 was known
    /// for false limit errors on benign traffic; CRS's maintainers
    /// recommend several hundred thousand), small enough that a
    /// catastrophic pattern stops within a few milliseconds.
    pub const DEFAULT: Limits = Limits {
        match_limit: 500_000,
        depth_limit: 500_000,
    };
}

impl Default for Limits {
    fn default() -> Limits {
        Limits::DEFAULT
    }
}

/// A pattern PCRE2 refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileError {
    /// PCRE2's message.
    pub message: String,
    /// The byte offset in the pattern where PCRE2 gave up.
    pub offset: usize,
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.message, self.offset)
    }
}

impl std::error::Error for CompileError {}

/// A search that did not come to an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchError {
    /// The match, depth, heap or JIT-stack limit was reached.
    LimitExceeded,
    /// Any other PCRE2 error (its negative error code).
    Failed(i32),
}

impl fmt::Display for MatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MatchError::LimitExceeded => f.write_str("PCRE2 match limit exceeded"),
            MatchError::Failed(code) => write!(f, "PCRE2 error {code}: {}", error_message(*code)),
        }
    }
}

impl std::error::Error for MatchError {}

/// A compiled pattern. Searches may run on many threads at once: each
/// thread has its own match data and JIT stack.
pub struct Regex {
    code: NonNull<pcre2_code_8>,
    /// Capture groups including group 0.
    captures_len: usize,
    jit: bool,
}

// SAFETY: PCRE2 documents a compiled pattern (after JIT compilation, which is
// done in `Regex::new` before the value is shared) as never modified by
// matching, so one may be used by several threads at once. All per-search
// state lives in the thread's `Scratch`.
unsafe impl Send for Regex {}
// SAFETY: as above: `&Regex` only reads the compiled code.
unsafe impl Sync for Regex {}

impl Regex {
    /// Compiles `pattern` with libmodsecurity 3's options (`DOTALL |
    /// MULTILINE`, byte subjects), then JIT-compiles it if the library can.
    pub fn new(pattern: &str) -> Result<Regex, CompileError> {
        let mut code_err: i32 = 0;
        let mut offset: usize = 0;
        // SAFETY: the pointer and length describe `pattern`'s bytes, which
        // outlive the call; the out-parameters are valid locals; a null
        // compile context asks for the defaults.
        let raw = unsafe {
            pcre2_compile_8(
                pattern.as_ptr(),
                pattern.len(),
                PCRE2_DOTALL | PCRE2_MULTILINE,
                &mut code_err,
                &mut offset,
                ptr::null_mut(),
            )
        };
        let Some(code) = NonNull::new(raw) else {
            return Err(CompileError {
                message: error_message(code_err),
                offset,
            });
        };
        // SAFETY: `code` is a valid compiled pattern that no other thread
        // sees yet.
        let jit = unsafe { pcre2_jit_compile_8(code.as_ptr(), PCRE2_JIT_COMPLETE) } == 0;
        let mut groups: u32 = 0;
        // SAFETY: PCRE2_INFO_CAPTURECOUNT writes one uint32_t to the pointer.
        let rc = unsafe {
            pcre2_pattern_info_8(
                code.as_ptr(),
                PCRE2_INFO_CAPTURECOUNT,
                (&mut groups as *mut u32).cast::<c_void>(),
            )
        };
        let regex = Regex {
            code,
            captures_len: groups as usize + 1,
            jit,
        };
        if rc != 0 {
            return Err(CompileError {
                message: error_message(rc),
                offset: 0,
            });
        }
        Ok(regex)
    }

    /// Capture groups, including group 0 (the whole match).
    pub fn captures_len(&self) -> usize {
        self.captures_len
    }

    /// Whether the pattern was JIT-compiled.
    pub fn is_jit(&self) -> bool {
        self.jit
    }

    /// Searches `haystack` from byte `start` (the bytes before it are
    /// context for lookbehind and `\b`, as PCRE2's start offset keeps them),
    /// anchored at `start` or not. On a match, `slots[i]` is the range of
    /// group i (`None` for a group that did not take part, and for slots
    /// beyond [`Regex::captures_len`]); without one, every slot is `None`.
    pub fn search(
        &self,
        haystack: &[u8],
        start: usize,
        anchored: bool,
        limits: Limits,
        slots: &mut [Option<Range<usize>>],
    ) -> Result<bool, MatchError> {
        slots.iter_mut().for_each(|s| *s = None);
        if start > haystack.len() {
            return Ok(false);
        }
        let pairs = u32::try_from(self.captures_len).unwrap_or(u32::MAX);
        let local = SCRATCH.try_with(|cell| {
            let mut cell = cell.try_borrow_mut().map_err(|_| MatchError::Failed(0))?;
            let scratch = match cell.as_mut() {
                Some(s) if s.pairs >= pairs => s,
                _ => {
                    *cell = None;
                    cell.insert(Scratch::new(pairs.max(Scratch::MIN_PAIRS))?)
                }
            };
            self.search_with(scratch, haystack, start, anchored, limits, slots)
        });
        match local {
            Ok(result) => result,
            // A thread being torn down has no thread-local scratch left: use
            // a temporary one.
            Err(_) => {
                let mut scratch = Scratch::new(pairs)?;
                self.search_with(&mut scratch, haystack, start, anchored, limits, slots)
            }
        }
    }

    fn search_with(
        &self,
        scratch: &mut Scratch,
        haystack: &[u8],
        start: usize,
        anchored: bool,
        limits: Limits,
        slots: &mut [Option<Range<usize>>],
    ) -> Result<bool, MatchError> {
        let options = if anchored { PCRE2_ANCHORED } else { 0 };
        // SAFETY: the match context belongs to this thread's scratch;
        // setting a limit writes one field of it.
        unsafe {
            pcre2_set_match_limit_8(scratch.ctx.as_ptr(), limits.match_limit);
            pcre2_set_depth_limit_8(scratch.ctx.as_ptr(), limits.depth_limit);
        }
        // SAFETY: `code` is a valid compiled pattern (read-only); the subject
        // pointer and length describe `haystack`, `start <= len` was checked;
        // the match data has room for `captures_len` pairs (checked by the
        // caller) and, with the match context, belongs to this thread only.
        let rc = unsafe {
            pcre2_match_8(
                self.code.as_ptr(),
                haystack.as_ptr(),
                haystack.len(),
                start,
                options,
                scratch.data.as_ptr(),
                scratch.ctx.as_ptr(),
            )
        };
        match rc {
            PCRE2_ERROR_NOMATCH => return Ok(false),
            PCRE2_ERROR_MATCHLIMIT
            | PCRE2_ERROR_DEPTHLIMIT
            | PCRE2_ERROR_HEAPLIMIT
            | PCRE2_ERROR_JIT_STACKLIMIT => return Err(MatchError::LimitExceeded),
            rc if rc < 0 => return Err(MatchError::Failed(rc)),
            _ => {}
        }
        // SAFETY: after a successful match the ovector holds `2 * pairs`
        // offsets, `pairs` being the match data's size.
        let ovector = unsafe {
            let p = pcre2_get_ovector_pointer_8(scratch.data.as_ptr());
            std::slice::from_raw_parts(p, 2 * scratch.pairs as usize)
        };
        let filled = self.captures_len.min(slots.len());
        for (i, slot) in slots.iter_mut().take(filled).enumerate() {
            let (s, e) = (ovector[2 * i], ovector[2 * i + 1]);
            *slot = (s != PCRE2_UNSET && e != PCRE2_UNSET && s <= e && e <= haystack.len())
                .then_some(s..e);
        }
        Ok(true)
    }
}

impl Drop for Regex {
    fn drop(&mut self) {
        // SAFETY: `code` came from pcre2_compile_8 and is freed once.
        unsafe { pcre2_code_free_8(self.code.as_ptr()) }
    }
}

impl fmt::Debug for Regex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Regex")
            .field("captures_len", &self.captures_len)
            .field("jit", &self.jit)
            .finish()
    }
}

/// A thread's match data, match context and JIT stack, reused by every
/// search of that thread (a search allocates nothing once it exists).
struct Scratch {
    data: NonNull<pcre2_match_data_8>,
    /// Offset pairs `data` holds.
    pairs: u32,
    ctx: NonNull<pcre2_match_context_8>,
    jit_stack: Option<NonNull<pcre2_jit_stack_8>>,
}

impl Scratch {
    /// Room for this many groups is made in any case (CRS-style patterns
    /// have few), so that growing is rare.
    const MIN_PAIRS: u32 = 16;
    /// The JIT stack starts at PCRE2's default and may grow to this: deep
    /// patterns on long values then end with a limit, not a crash.
    const JIT_STACK_MAX: usize = 1 << 20;

    fn new(pairs: u32) -> Result<Scratch, MatchError> {
        // SAFETY: null general contexts ask for malloc/free; each result is
        // checked before use and freed by `Drop` (or below on failure).
        unsafe {
            let data = NonNull::new(pcre2_match_data_create_8(pairs.max(1), ptr::null_mut()))
                .ok_or(MatchError::Failed(PCRE2_ERROR_NOMEMORY))?;
            let Some(ctx) = NonNull::new(pcre2_match_context_create_8(ptr::null_mut())) else {
                pcre2_match_data_free_8(data.as_ptr());
                return Err(MatchError::Failed(PCRE2_ERROR_NOMEMORY));
            };
            let jit_stack = NonNull::new(pcre2_jit_stack_create_8(
                32 * 1024,
                Self::JIT_STACK_MAX,
                ptr::null_mut(),
            ));
            if let Some(stack) = jit_stack {
                // A null callback with a stack as data: JIT searches with
                // this context use that stack.
                pcre2_jit_stack_assign_8(ctx.as_ptr(), None, stack.as_ptr().cast::<c_void>());
            }
            Ok(Scratch {
                data,
                pairs: pairs.max(1),
                ctx,
                jit_stack,
            })
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // SAFETY: each pointer was created in `Scratch::new` and is freed once.
        unsafe {
            pcre2_match_data_free_8(self.data.as_ptr());
            pcre2_match_context_free_8(self.ctx.as_ptr());
            if let Some(stack) = self.jit_stack {
                pcre2_jit_stack_free_8(stack.as_ptr());
            }
        }
    }
}

thread_local! {
    static SCRATCH: RefCell<Option<Scratch>> = const { RefCell::new(None) };
}

fn error_message(code: i32) -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer and its length are valid; PCRE2 writes at most
    // `len` bytes, NUL included, and returns the message length.
    let n = unsafe { pcre2_get_error_message_8(code, buf.as_mut_ptr(), buf.len()) };
    match usize::try_from(n) {
        Ok(n) => String::from_utf8_lossy(&buf[..n.min(buf.len())]).into_owned(),
        Err(_) => format!("PCRE2 error {code}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(pattern: &str, haystack: &[u8]) -> Option<Vec<Option<Range<usize>>>> {
        let re = Regex::new(pattern).expect("compiles");
        let mut slots = vec![None; re.captures_len()];
        re.search(haystack, 0, false, Limits::DEFAULT, &mut slots)
            .expect("no limit")
            .then_some(slots)
    }

    #[test]
    fn pcre_only_constructs_run() {
        assert!(find(r"(?<=x)y", b"xy").is_some());
        assert!(find(r"(?<=x)y", b"zy").is_none());
        assert!(find(r"foo(?!bar)", b"foobaz").is_some());
        assert!(find(r"foo(?!bar)", b"foobar").is_none());
        assert!(find(r"(a)\1", b"xaa").is_some());
        assert!(find(r"(a)\1", b"xab").is_none());
        assert!(find(r"a++b", b"aaab").is_some());
    }

    #[test]
    fn options_are_modsecuritys() {
        // DOTALL: `.` matches a newline; MULTILINE: `^` after one.
        assert!(find(r"a.b", b"a\nb").is_some());
        assert!(find(r"^b", b"a\nb").is_some());
        // Bytes, not UTF-8: an invalid sequence is a subject like any other.
        assert!(find(r"\xff", b"a\xffb").is_some());
        assert!(find(r"(?i)ABC", b"xabc").is_some());
    }

    #[test]
    fn groups_and_offsets() {
        let slots = find(r"(\d+)-(x)?(\d+)", b"ab 12-34").expect("match");
        assert_eq!(slots, vec![Some(3..8), Some(3..5), None, Some(6..8)]);
        let re = Regex::new(r"\d+").expect("compiles");
        let mut slots = [None; 1];
        // Anchored at the start offset, with the bytes before it as context.
        assert_eq!(
            re.search(b"ab12", 2, true, Limits::DEFAULT, &mut slots),
            Ok(true)
        );
        assert_eq!(slots[0], Some(2..4));
        assert_eq!(
            re.search(b"ab12", 1, true, Limits::DEFAULT, &mut slots),
            Ok(false)
        );
        assert_eq!(
            re.search(b"ab12", 9, false, Limits::DEFAULT, &mut slots),
            Ok(false)
        );
    }

    #[test]
    fn catastrophic_backtracking_stops_at_the_limit() {
        let re = Regex::new(r"^(a|aa)+$").expect("compiles");
        let mut hostile = vec![b'a'; 60];
        hostile.push(b'b');
        let limits = Limits {
            match_limit: 10_000,
            depth_limit: 10_000,
        };
        assert_eq!(
            re.search(&hostile, 0, false, limits, &mut []),
            Err(MatchError::LimitExceeded)
        );
        // The same pattern on a benign value stays under it.
        assert_eq!(re.search(b"aaaa", 0, false, limits, &mut []), Ok(true));
    }

    #[test]
    fn bad_patterns_are_errors_with_offsets() {
        let e = Regex::new(r"ab(c").expect_err("unclosed group");
        assert_eq!(e.offset, 4);
        assert!(e.message.contains("parenthesis"), "{}", e.message);
        assert!(Regex::new(r"(?<=a+)b").is_err(), "unbounded lookbehind");
    }

    #[test]
    fn threads_share_a_pattern() {
        let re = std::sync::Arc::new(Regex::new(r"(?<=k)v(\d)").expect("compiles"));
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let re = std::sync::Arc::clone(&re);
                std::thread::spawn(move || {
                    let hay = format!("kv{i}");
                    let mut slots = [None, None];
                    (0..1000).all(|_| {
                        re.search(hay.as_bytes(), 0, false, Limits::DEFAULT, &mut slots) == Ok(true)
                            && slots[1] == Some(2..3)
                    })
                })
            })
            .collect();
        for h in handles {
            assert!(h.join().expect("thread"));
        }
    }
}
