//! Snapshot tests of the rendered diagnostics of malformed rule files.
//!
//! Every `*.conf` directly in `tests/fixtures/diagnostics/` is one case (files
//! in subdirectories are helpers that fixtures `Include`). A fixture's first
//! line states its intent:
//!
//! ```text
//! # expect: unknown-operator[, missing-phase...]
//! ```
//!
//! and the test checks that compiling it does not panic, reports at least one
//! diagnostic, reports exactly that set of codes, and renders the diagnostics
//! as in `tests/snapshots/diagnostics/<fixture>.snap`. Update the snapshots
//! after an intended change with
//! `INSTA_UPDATE=always cargo test -p waf-compiler --test diagnostics`, then
//! review the diff.
//!
//! A second test corrupts every fixture at random (deterministically) and
//! checks that the compiler never panics on the result.

use std::collections::BTreeSet;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use waf_compiler::diag::Code;
use waf_compiler::{compile_files, compile_str, Options};
use waf_test_support::XorShift;

/// Relative to the crate directory (the working directory of `cargo test`),
/// so that the file names in rendered diagnostics are stable.
const FIXTURES: &str = "tests/fixtures/diagnostics";

/// The fixtures, sorted by name.
fn fixtures() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(FIXTURES)
        .unwrap_or_else(|e| panic!("cannot list {FIXTURES}: {e}"))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "conf"))
        .collect();
    paths.sort();
    assert!(
        paths.len() >= 45,
        "expected at least 45 fixtures in {FIXTURES}, found {}",
        paths.len()
    );
    paths
}

fn fixture_name(path: &Path) -> String {
    path.file_stem()
        .expect("fixture file name")
        .to_string_lossy()
        .into_owned()
}

/// The codes listed by the fixture's `# expect:` first line.
fn expected_codes(path: &Path, bytes: &[u8]) -> BTreeSet<&'static str> {
    let text = String::from_utf8_lossy(bytes);
    let first = text.lines().next().unwrap_or("").trim_end_matches('\r');
    let Some(list) = first.strip_prefix("# expect:") else {
        panic!(
            "{}: the first line must be `# expect: <code>[, <code>...]`, found `{first}`",
            path.display()
        );
    };
    let codes: BTreeSet<&'static str> = list
        .split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(|c| {
            Code::ALL
                .iter()
                .map(|k| k.as_str())
                .find(|k| *k == c)
                .unwrap_or_else(|| panic!("{}: `{c}` is not a diagnostic code", path.display()))
        })
        .collect();
    assert!(
        !codes.is_empty(),
        "{}: `# expect:` lists no code",
        path.display()
    );
    codes
}

/// Makes the rendered text independent of where the repository is checked
/// out (the include-cycle hint shows canonical paths).
fn normalise(rendered: &str) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = rendered.to_string();
    let mut prefixes = vec![dir.display().to_string()];
    if let Ok(canonical) = dir.canonicalize() {
        prefixes.push(canonical.display().to_string());
    }
    prefixes.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in prefixes {
        out = out.replace(&format!("{p}/"), "[crate]/");
    }
    out
}

fn join(set: &BTreeSet<&str>) -> String {
    set.iter().copied().collect::<Vec<_>>().join(", ")
}

#[test]
fn fixtures_render_expected_diagnostics() {
    let opts = Options::default();
    let mut failures = Vec::new();
    for path in fixtures() {
        let name = fixture_name(&path);
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let expected = expected_codes(&path, &bytes);

        let compiled = match panic::catch_unwind(AssertUnwindSafe(|| {
            compile_files(std::slice::from_ref(&path), &opts)
        })) {
            Ok(c) => c,
            Err(_) => {
                failures.push(format!("{name}: the compiler panicked"));
                continue;
            }
        };
        let got: BTreeSet<&'static str> = compiled
            .diagnostics
            .iter()
            .map(|d| d.code.as_str())
            .collect();
        if compiled.diagnostics.is_empty() {
            failures.push(format!("{name}: no diagnostic"));
        } else if got != expected {
            failures.push(format!(
                "{name}: expected codes [{}], got [{}]",
                join(&expected),
                join(&got)
            ));
        }

        let rendered = normalise(&compiled.diagnostics.render(compiled.sources()));
        let snapshot = panic::catch_unwind(AssertUnwindSafe(|| {
            insta::with_settings!({
                snapshot_path => "snapshots/diagnostics",
                prepend_module_to_snapshot => false,
                description => path.display().to_string(),
                omit_expression => true,
            }, {
                insta::assert_snapshot!(name.as_str(), rendered);
            });
        }));
        if snapshot.is_err() {
            failures.push(format!(
                "{name}: the rendered diagnostics differ from the snapshot"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} fixture(s) failed:\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
}

/// Bytes that are meaningful to SecLang's tokenizer and sub-parsers.
const SPECIAL: &[&[u8]] = &[
    b"\"", b"'", b"\\", b"\n", b"\r\n", b"\\\n", b"%{", b"}", b"|", b",", b":", b"!", b"&", b"@",
    b"/", b"(", b"[", b"{", b"#", b" ", b"\t", b"=", b";",
];

fn mutate(rng: &mut XorShift, text: &mut Vec<u8>) {
    let len = text.len();
    match rng.below(7) {
        // Delete a run of bytes.
        0 if len > 0 => {
            let at = rng.below(len);
            let n = 1 + rng.below(4.min(len - at));
            text.drain(at..at + n);
        }
        // Insert a random byte.
        1 => {
            let at = rng.below(len + 1);
            text.insert(at, rng.byte());
        }
        // Duplicate a run of bytes.
        2 if len > 0 => {
            let at = rng.below(len);
            let n = 1 + rng.below(16.min(len - at));
            let run: Vec<u8> = text[at..at + n].to_vec();
            let to = rng.below(len + 1);
            text.splice(to..to, run);
        }
        // Swap two bytes.
        3 if len > 1 => {
            let (a, b) = (rng.below(len), rng.below(len));
            text.swap(a, b);
        }
        // Replace a byte.
        4 if len > 0 => {
            let at = rng.below(len);
            text[at] = SPECIAL[rng.below(SPECIAL.len())][0];
        }
        // Insert a special token (quotes, backslashes, newlines, `%{`, `|`, `,`...).
        _ => {
            let at = rng.below(len + 1);
            let tok = SPECIAL[rng.below(SPECIAL.len())];
            text.splice(at..at, tok.iter().copied());
        }
    }
}

#[test]
fn corrupted_fixtures_never_panic() {
    // `DIAGNOSTICS_FUZZ_VARIANTS=20000` for a longer run by hand.
    let variants: usize = std::env::var("DIAGNOSTICS_FUZZ_VARIANTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let opts = Options::default();
    let mut rng = XorShift::from_state(0x9e37_79b9_7f4a_7c15);
    let mut failures = Vec::new();
    for path in fixtures() {
        let name = fixture_name(&path);
        let original = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for variant in 0..variants {
            let mut bytes = original.clone();
            for _ in 0..1 + rng.below(4) {
                mutate(&mut rng, &mut bytes);
            }
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let result = panic::catch_unwind(AssertUnwindSafe(|| {
                let compiled = compile_str("fuzz.conf", &text, &opts);
                // Rendering must not panic either.
                compiled.diagnostics.render(compiled.sources())
            }));
            if let Err(e) = result {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failures.push(format!(
                    "{name} variant {variant}: panicked ({msg}) on {text:?}"
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} corrupted input(s) made the compiler panic:\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
}
