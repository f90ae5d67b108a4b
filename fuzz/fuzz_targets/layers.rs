//! Layer 2 of the parser on its own: the input is split at `\0` into up to
//! three parts, fed as verbatim texts to `parse::variables`,
//! `parse::operator` and `parse::actions`; then the same parts are unescaped
//! as a quoted directive argument would be (`Text::unescape`) and parsed again,
//! so positions go through the offset map. Every span must lie inside the text
//! it came from.
#![no_main]

use libfuzzer_sys::fuzz_target;
use waf_compiler::ast::Text;
use waf_compiler::diag::Diagnostics;
use waf_compiler::parse;
use waf_compiler::source::{FileId, Span};

fn in_bounds(span: Span, len: usize, what: &str) {
    let r = span.range();
    assert!(
        r.start <= r.end && r.end <= len,
        "{what}: span {r:?} outside the text ({len} bytes)"
    );
}

fn run(text: &Text, src_len: usize) {
    let mut diags = Diagnostics::new();
    for t in parse::variables(text, &mut diags) {
        in_bounds(t.span, src_len, "target");
        in_bounds(t.name_span, src_len, "target name");
        if let Some(s) = &t.selector {
            in_bounds(s.span, src_len, "selector");
            in_bounds(s.text.span(), src_len, "selector text");
        }
    }
    if let Some(op) = parse::operator(text, &mut diags) {
        in_bounds(op.span, src_len, "operator");
        in_bounds(op.name_span, src_len, "operator name");
        if let Some(a) = &op.argument {
            in_bounds(a.span(), src_len, "operator argument");
        }
    }
    for a in parse::actions(text, &mut diags) {
        in_bounds(a.span, src_len, "action");
        in_bounds(a.name_span, src_len, "action name");
        if let Some(v) = &a.value {
            in_bounds(v.span(), src_len, "action value");
            let _ = v.trimmed();
        }
    }
    for d in &diags {
        in_bounds(d.span, src_len, "diagnostic");
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let mut parts = s.splitn(3, '\0');
    let all = [
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
    ];
    for part in all {
        run(&Text::verbatim(FileId(0), 0, part), part.len());
        for quote in [None, Some(b'"'), Some(b'\'')] {
            let t = Text::unescape(FileId(0), 0, part, quote);
            run(&t, part.len());
            let again = t.unescape_again(b'\'');
            run(&again, part.len());
        }
    }
    // The whole input as one verbatim text too (the separators included).
    run(&Text::verbatim(FileId(0), 0, s), s.len());
});
