//! The C ABI from C: `tests/c/waf_test.c` compiled with the system's C
//! compiler against the static library and the committed header, run under
//! AddressSanitizer with leak detection (0 leaks, 0 errors, or it fails).

use std::path::{Path, PathBuf};
use std::process::Command;

/// `target/<profile>`, from this test executable's path (`.../deps/c_abi-*`).
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    exe.parent()
        .and_then(Path::parent)
        .expect("target directory")
        .to_path_buf()
}

#[test]
fn the_c_test_program_passes_under_address_sanitizer() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    // `cargo test` builds the static library in deps/ (it uplifts it to the
    // profile directory only on `cargo build`).
    let lib = [
        target_dir().join("deps/libwaf.a"),
        target_dir().join("libwaf.a"),
    ]
    .into_iter()
    .filter(|p| p.is_file())
    .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
    .expect("libwaf.a built by cargo");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    if Command::new(&cc).arg("--version").output().is_err() {
        eprintln!("SKIP the_c_test_program_passes_under_address_sanitizer: no C compiler `{cc}`");
        assert!(
            std::env::var_os("WAF_REQUIRE_CC").is_none(),
            "a C compiler is required"
        );
        return;
    }
    let exe = std::env::temp_dir().join(format!("waf-ffi-test-{}", std::process::id()));
    let built = Command::new(&cc)
        .args([
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-g",
            "-fsanitize=address,undefined",
            "-fno-omit-frame-pointer",
        ])
        .arg("-I")
        .arg(here.join("include"))
        .arg(here.join("tests/c/waf_test.c"))
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&exe)
        .output()
        .expect("run the C compiler");
    assert!(
        built.status.success(),
        "compiling waf_test.c failed:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let run = Command::new(&exe)
        .env("ASAN_OPTIONS", "detect_leaks=1:halt_on_error=1")
        .env("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1")
        .output()
        .expect("run the C test");
    let _ = std::fs::remove_file(&exe);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "waf_test failed ({}):\n{stderr}",
        run.status
    );
    assert!(String::from_utf8_lossy(&run.stdout).starts_with("ok"));
    assert!(!stderr.contains("LeakSanitizer"), "{stderr}");
}

#[test]
fn the_committed_header_is_what_cbindgen_generates() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::env::temp_dir().join(format!("waf-h-{}.h", std::process::id()));
    let generated = Command::new("cbindgen")
        .arg("--config")
        .arg(here.join("cbindgen.toml"))
        .args(["--crate", "waf-ffi", "--output"])
        .arg(&out)
        .arg(here)
        .output();
    let Ok(generated) = generated else {
        eprintln!("SKIP the_committed_header_is_what_cbindgen_generates: no `cbindgen` (cargo install cbindgen)");
        return;
    };
    assert!(
        generated.status.success(),
        "{}",
        String::from_utf8_lossy(&generated.stderr)
    );
    let fresh = std::fs::read_to_string(&out).expect("generated header");
    let _ = std::fs::remove_file(&out);
    let committed = std::fs::read_to_string(here.join("include/waf.h")).expect("committed header");
    assert!(
        fresh == committed,
        "ffi/include/waf.h is stale: regenerate it with cbindgen (see ffi/cbindgen.toml)"
    );
}
