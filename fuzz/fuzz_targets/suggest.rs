//! The optimizer: arbitrary bytes → (lossy UTF-8) rule file → `waf suggest`'s
//! passes, `waf lint`'s performance checks, and the application of every
//! suggestion that has edits.
//!
//! Must never panic, hang or blow up memory. Besides "no panic", it checks:
//! * every suggestion's edits lie inside one file, on character boundaries;
//! * applying the **equivalent** suggestions gives a file that still
//!   compiles, with the same rule ids in the same phases (an edit that broke
//!   the syntax, or swallowed a neighbour, would show here);
//! * applying all of them (review ones too) never panics, compiling or not.
//!
//! Inputs that read files (`Include`, `@pmFromFile`, `@ipMatchFromFile`) are
//! skipped: the `compile` target covers file access, and rewrites only touch
//! the text of the rule file itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use waf_compiler::Options;
use waf_optimizer::{edit, Analysis, Safety, Suggestion};

fn ids(a: &Analysis) -> Vec<(u64, u8)> {
    a.program()
        .map(|p| p.rules.iter().map(|r| (r.id, r.phase)).collect())
        .unwrap_or_default()
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let lower = text.to_ascii_lowercase();
    if ["include", "pmf", "ipmatchf"].iter().any(|w| lower.contains(w)) {
        return;
    }
    let a = Analysis::text("fuzz.conf", &text, &Options::default());
    let _ = waf_optimizer::perf::diagnostics(&a, &Default::default());
    let Some(p) = a.program() else { return };
    let found: Vec<Suggestion> = a.suggestions().into_iter().map(|(s, _)| s).collect();
    for s in &found {
        for e in &s.edits {
            let src = &p.sources.file(e.span.file).text;
            let r = e.span.range();
            assert!(r.start <= r.end && r.end <= src.len(), "edit out of the file: {s:?}");
            assert!(
                src.is_char_boundary(r.start) && src.is_char_boundary(r.end),
                "edit splits a character: {s:?}"
            );
        }
    }
    let equivalent: Vec<&Suggestion> = found
        .iter()
        .filter(|s| s.safety == Safety::Equivalent && !s.edits.is_empty())
        .collect();
    let applied = edit::apply(&p.sources, &equivalent);
    if let Some(new) = applied.files.values().next() {
        let b = Analysis::text("fuzz.conf", new, &Options::default());
        assert!(
            b.program().is_some(),
            "equivalent rewrites broke the file:\n--- before\n{text}\n--- after\n{new}\n{}",
            b.compiled.diagnostics.render(b.compiled.sources())
        );
        assert_eq!(ids(&a), ids(&b), "rules changed:\n{text}\n---\n{new}");
    }
    let all: Vec<&Suggestion> = found.iter().filter(|s| !s.edits.is_empty()).collect();
    if let Some(new) = edit::apply(&p.sources, &all).files.values().next() {
        let _ = Analysis::text("fuzz.conf", new, &Options::default());
    }
});
