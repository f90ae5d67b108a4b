//! What the CLI test files share: running the built `waf` binary.

use std::process::{Command, Output};

/// Runs `waf` with `args`, in the crate directory (fixture paths are relative to it).
pub fn waf(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_waf"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run waf")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Asserts exit code 0, showing stdout and stderr otherwise.
#[allow(dead_code)] // not every test file checks a success this way
pub fn assert_success(o: &Output) {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        stdout(o),
        String::from_utf8_lossy(&o.stderr)
    );
}
