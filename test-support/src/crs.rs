//! Finding the OWASP CRS for the tests that run it.
//!
//! CRS is data the project reads, never copies: tests find it at
//! `$WAF_CRS_DIR`, or at `../shared/crs` beside the workspace. Without it the
//! tests that need it are skipped, and say so where it shows (a skipped test
//! must not pass for a tested one); with `WAF_REQUIRE_CRS=1`, as `.ci/run`
//! sets, they fail instead.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The environment variable that names a CRS checkout.
pub const CRS_DIR_VAR: &str = "WAF_CRS_DIR";

/// The environment variable that, set to `1`, turns a missing CRS from a
/// skip into a failure.
pub const REQUIRE_CRS_VAR: &str = "WAF_REQUIRE_CRS";

/// The CRS checkout for the test named `test`, or `None` after reporting the
/// skip (or a panic under `WAF_REQUIRE_CRS=1`).
///
/// A checkout is a directory with `crs-setup.conf.example` and `rules/`.
pub fn crs_dir(test: &str) -> Option<PathBuf> {
    let dir = match std::env::var_os(CRS_DIR_VAR) {
        Some(d) => PathBuf::from(d),
        None => workspace_root().join("../shared/crs"),
    };
    if dir.join("crs-setup.conf.example").is_file() && dir.join("rules").is_dir() {
        return Some(dir.canonicalize().unwrap_or(dir));
    }
    let msg = format!(
        "SKIP {test}: no CRS at {} (set {CRS_DIR_VAR} to a CRS checkout)",
        dir.display()
    );
    if std::env::var_os(REQUIRE_CRS_VAR).is_some_and(|v| v == "1") {
        panic!("{msg}; {REQUIRE_CRS_VAR}=1 requires it");
    }
    // Straight to the process's standard error: the test harness captures
    // `eprintln!` of a passing test, and this line must be seen.
    let _ = writeln!(std::io::stderr(), "{msg}");
    None
}

/// `crs-setup.conf.example`, then `rules/*.conf` in name order: CRS as
/// ModSecurity loads it.
pub fn crs_files(dir: &Path) -> Vec<PathBuf> {
    let mut rules: Vec<PathBuf> = std::fs::read_dir(dir.join("rules"))
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "conf"))
                .collect()
        })
        .unwrap_or_default();
    rules.sort();
    let mut files = vec![dir.join("crs-setup.conf.example")];
    files.extend(rules);
    files
}

/// The CRS configuration at paranoia level `pl` for the checkout `dir`, as
/// `corpus/crs-config.sh DIR PL` prints it (the peers' configuration: one
/// text for the tests, the benches and the comparisons).
///
/// # Panics
///
/// When the script cannot run: the tests that call this need it.
pub fn crs_config(dir: &Path, pl: u8) -> String {
    let script = workspace_root().join("corpus/crs-config.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .arg(dir)
        .arg(pl.to_string())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "{} failed: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The workspace directory (this crate's parent).
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}
