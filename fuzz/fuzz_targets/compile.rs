//! Whole pipeline: arbitrary bytes → (lossy UTF-8) rule file → `compile_str`.
//!
//! Must never panic, hang or blow up memory. Besides "no panic", it checks:
//! * every diagnostic renders (codespan slices the source with its spans),
//! * a compiled program passes `Program::validate` and dumps as text and JSON.
//!
//! File access: `Include` and the data files of `@pmFromFile`/`@ipMatchFromFile`
//! are resolved against the directory of the rule file, so the input is compiled
//! as `<sandbox>/fuzz.conf`, where `<sandbox>` is a temporary directory holding a
//! few small rule and data files (see `sandbox()`). When an input names one of
//! those file-reading constructs, every `/` in it becomes `_`, so no path can
//! leave the sandbox (`Include /dev/zero`, `@pmFromFile /proc/kcore`, a `/**`
//! glob would otherwise hang or exhaust memory in the *environment*, not in the
//! compiler). Inputs without them are compiled unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::OnceLock;
use waf_compiler::{compile_str, Options};

fn sandbox() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // One directory shared by every fuzzing process (bump the version when
        // the files change). Each file is written in a side directory and
        // renamed into place, so a concurrent process (or an `Include *`) never
        // sees half a file.
        let dir = std::env::temp_dir().join("waf-compiler-fuzz-sandbox-v1");
        let side = std::env::temp_dir().join("waf-compiler-fuzz-sandbox-v1.tmp");
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::create_dir_all(&side);
        let files: &[(&str, &[u8])] = &[
            ("inc.conf", b"SecRule ARGS \"@rx a\" \"id:9001,phase:2,pass\"\nSecMarker END_INC\n"),
            ("loop.conf", b"Include loop.conf\n"),
            ("a.conf", b"Include b.conf\nSecAction \"id:9002,pass,nolog\"\n"),
            ("b.conf", b"SecRule REQUEST_URI \"@pm x y\" \"id:9003,phase:1,deny,chain\"\n    SecRule ARGS \"@rx z\"\n"),
            ("bad.conf", b"SecRule ARGS \"@rx \xff\xfe\" \"id:9004,phase:2,deny\"\n\x00\n"),
            ("data.txt", b"# comment\nfoo\n  bar  \n\nbaz qux\n"),
            ("ips.txt", b"10.0.0.0/8\n::1\n192.168.1.1\nnot-an-ip\n"),
            ("empty.data", b""),
            ("latin1.data", b"caf\xe9\nna\xefve\n"),
        ];
        for (name, bytes) in files {
            let tmp = side.join(format!("{name}.{}", std::process::id()));
            if std::fs::write(&tmp, bytes).is_ok() {
                let _ = std::fs::rename(&tmp, dir.join(name));
            }
        }
        dir
    })
}

/// Whether `text` may make the compiler read a file (case-insensitive, as
/// directive and operator names are): `Include`, `@pmf`/`@pmFromFile`,
/// `@ipMatchF`/`@ipMatchFromFile`.
fn reads_files(text: &[u8]) -> bool {
    let lower = text.to_ascii_lowercase();
    [&b"include"[..], b"pmf", b"ipmatchf"]
        .iter()
        .any(|k| lower.windows(k.len()).any(|w| w == *k))
}

fuzz_target!(|data: &[u8]| {
    let mut text = String::from_utf8_lossy(data).into_owned();
    if reads_files(text.as_bytes()) {
        text = text.replace('/', "_");
    }
    let name = sandbox().join("fuzz.conf");
    let compiled = compile_str(&name, &text, &Options::default());

    // Rendering slices the sources with every span (primary and related).
    let rendered = compiled.diagnostics.render(compiled.sources());
    assert!(compiled.diagnostics.is_empty() || !rendered.is_empty());

    match &compiled.program {
        Some(program) => {
            assert!(
                !compiled.diagnostics.has_errors(),
                "a program was produced despite errors"
            );
            if let Err(e) = program.validate() {
                panic!("compiled program violates an IR invariant: {e}");
            }
            let _ = waf_compiler::ir::dump::text(program);
            let _ = waf_compiler::ir::dump::json(program);
            let _ = waf_compiler::stats::Stats::of(program);
        }
        None => assert!(compiled.diagnostics.has_errors(), "no program and no error"),
    }
});
