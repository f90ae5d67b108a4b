//! `waf test ftw`: go-ftw YAML tests run in-process (fixtures in
//! `tests/fixtures/ftw/`: a tiny rules file, YAML tests that pass and fail,
//! overrides, and a stand-in CRS directory for `--crs`).

mod common;

use common::{stdout, waf};
use std::process::{Command, Output};

fn last_line(o: &Output) -> String {
    stdout(o).lines().last().unwrap_or_default().to_string()
}

const TESTS: &str = "tests/fixtures/ftw/tests";
const RULES: &str = "tests/fixtures/ftw/rules.conf";

#[test]
fn summary_failures_and_exit_codes() {
    let o = waf(&["test", "ftw", TESTS, "-c", RULES]);
    let out = stdout(&o);
    assert_eq!(last_line(&o), "10 passed, 4 failed, 1 skipped", "{out}");
    assert_eq!(o.status.code(), Some(1), "{out}");
    // One line per failure, with the reason.
    assert!(
        out.contains("FAIL 2000-1 (sub/fail.yaml): expected ids [1001] not logged; logged []"),
        "{out}"
    );
    assert!(
        out.contains("FAIL 2000-2 (sub/fail.yaml): unexpected ids [1002] logged; logged [1002]"),
        "{out}"
    );
    assert!(
        out.contains("FAIL 2000-3 (sub/fail.yaml): expected status 400, got 200"),
        "{out}"
    );
    assert!(
        out.contains("FAIL 2000-4 (sub/fail.yaml): match_regex `found within ARGS:nope` not found"),
        "{out}"
    );
    assert_eq!(out.matches("FAIL ").count(), 4, "{out}");
    // Disabled files are skipped and listed.
    assert!(
        out.contains("SKIP 3000-1 (sub/disabled.yml): disabled"),
        "{out}"
    );
    // 10 / 14 = 71.4%.
    let o = waf(&["test", "ftw", TESTS, "-c", RULES, "--min-pass-rate", "71"]);
    assert_eq!(o.status.code(), Some(0));
    let o = waf(&["test", "ftw", TESTS, "-c", RULES, "--min-pass-rate", "72"]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn passing_tests_cover_every_input_kind() {
    // pass.yaml: expect_ids, no_expect_ids, match_regex, no_match_regex,
    // multi-stage, encoded_request (chunked), front-end status 400,
    // intervention status 403, albedo /reflect (phase 4), nolog, expect_error.
    let o = waf(&["test", "ftw", TESTS, "-c", RULES, "--include", "^1001-"]);
    assert_eq!(
        last_line(&o),
        "10 passed, 0 failed, 5 skipped",
        "{}",
        stdout(&o)
    );
    assert_eq!(o.status.code(), Some(0));
    // A single file, and --exclude.
    let o = waf(&[
        "test",
        "ftw",
        "tests/fixtures/ftw/tests/pass.yaml",
        "-c",
        RULES,
        "--exclude",
        "^1001-(4|8)$",
    ]);
    assert_eq!(
        last_line(&o),
        "8 passed, 0 failed, 2 skipped",
        "{}",
        stdout(&o)
    );
}

#[test]
fn overrides_skip_with_reason_and_replace_expectations() {
    let o = waf(&[
        "test",
        "ftw",
        TESTS,
        "-c",
        RULES,
        "--overrides",
        "tests/fixtures/ftw/overrides.yaml",
    ]);
    let out = stdout(&o);
    assert_eq!(last_line(&o), "11 passed, 2 failed, 2 skipped", "{out}");
    assert!(
        out.contains(
            "SKIP 2000-1 (sub/fail.yaml): ignored: known failure: no attack in this request"
        ),
        "{out}"
    );
    assert!(!out.contains("FAIL 2000-3"), "{out}");
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn json_report() {
    let path = std::env::temp_dir().join(format!("waf-ftw-report-{}.json", std::process::id()));
    let p = path.to_str().unwrap();
    let o = waf(&["test", "ftw", TESTS, "-c", RULES, "--json", p]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    std::fs::remove_file(&path).ok();
    assert_eq!(v["summary"]["passed"], 10);
    assert_eq!(v["summary"]["failed"], 4);
    assert_eq!(v["summary"]["skipped"], 1);
    let tests = v["tests"].as_array().unwrap();
    let find = |id: &str| tests.iter().find(|t| t["id"] == id).unwrap();
    let t = find("2000-2");
    assert_eq!(t["status"], "failed");
    assert_eq!(t["logged_ids"], serde_json::json!([1002]));
    assert_eq!(
        t["stages"][0]["expected"]["no_expect_ids"],
        serde_json::json!([1002])
    );
    assert!(t["reason"]
        .as_str()
        .unwrap()
        .contains("unexpected ids [1002]"));
    let t = find("1001-4");
    assert_eq!(t["status"], "passed");
    assert_eq!(t["stages"].as_array().unwrap().len(), 2);
    let t = find("1001-7");
    assert_eq!(t["stages"][0]["status"], 403);
    assert_eq!(find("3000-1")["status"], "skipped");
}

#[test]
fn crs_option_builds_the_test_configuration() {
    // A stand-in CRS directory: rule 100 checks that 900005 ran, 200002 (one
    // of the generated body-processor rules) fires on a bad JSON body, and
    // the default test directory is CRS_DIR/tests/regression/tests.
    let o = waf(&["test", "ftw", "--crs", "tests/fixtures/ftw/crs"]);
    assert_eq!(
        last_line(&o),
        "2 passed, 0 failed, 0 skipped",
        "{}",
        stdout(&o)
    );
    assert_eq!(o.status.code(), Some(0));
    let o = waf(&[
        "test",
        "ftw",
        "--crs",
        "tests/fixtures/ftw/crs",
        "--print-config",
    ]);
    let out = stdout(&o);
    assert!(out.contains("id:900005"), "{out}");
    assert!(out.contains("Include rules/*.conf"), "{out}");
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &["test", "ftw", TESTS][..],
        &["test", "ftw", "tests/fixtures/ftw/no-such-dir", "-c", RULES],
        &[
            "test",
            "ftw",
            TESTS,
            "-c",
            "tests/fixtures/ftw/no-such.conf",
        ],
        &["test", "ftw", TESTS, "-c", RULES, "--include", "("],
        &["test", "ftw", TESTS, "-c", RULES, "--min-pass-rate", "120"],
        &[
            "test",
            "ftw",
            TESTS,
            "-c",
            RULES,
            "--crs",
            "tests/fixtures/ftw/crs",
        ],
        &["test", "ftw", TESTS, "--crs", "tests/fixtures"],
        &["test", "ftw", TESTS, "-c", RULES, "-j", "0"],
    ] {
        assert_eq!(waf(args).status.code(), Some(2), "{args:?}");
    }
    // Rules that do not compile are findings, as in every other command.
    let bad = waf(&["test", "ftw", TESTS, "-c", "tests/fixtures/bad.conf"]);
    assert_eq!(bad.status.code(), Some(1));
}

/// A few real CRS tests (skipped, visibly, without CRS: see `waf_test_support::crs_dir`).
#[test]
fn real_crs_smoke() {
    let Some(crs) = waf_test_support::crs_dir("real_crs_smoke") else {
        return;
    };
    let crs = crs.to_string_lossy();
    let o = waf(&[
        "test",
        "ftw",
        "--crs",
        &crs,
        "--include",
        "^9(11100|20430)-",
    ]);
    let last = last_line(&o);
    let shape = last.split(", ").collect::<Vec<_>>();
    assert_eq!(shape.len(), 3, "{last}");
    assert!(
        shape[0].ends_with(" passed")
            && shape[1].ends_with(" failed")
            && shape[2].ends_with(" skipped")
    );
}

/// What a CRS go-ftw run reported for each test, with the per-run unique id
/// taken out of the log lines.
fn ftw_results(report: &serde_json::Value) -> Vec<serde_json::Value> {
    fn strip_unique_id(line: &str) -> String {
        match line.find("[unique_id \"") {
            Some(s) => {
                let rest = &line[s..];
                let e = rest.find("\"]").map_or(rest.len(), |e| e + 2);
                format!("{}{}", &line[..s], &rest[e..])
            }
            None => line.to_string(),
        }
    }
    report["tests"]
        .as_array()
        .expect("tests")
        .iter()
        .map(|t| {
            let stages: Vec<serde_json::Value> = t["stages"]
                .as_array()
                .map(|s| s.as_slice())
                .unwrap_or_default()
                .iter()
                .map(|s| {
                    let log: Vec<String> = s["log"]
                        .as_array()
                        .map(|l| l.as_slice())
                        .unwrap_or_default()
                        .iter()
                        .map(|l| strip_unique_id(l.as_str().unwrap_or_default()))
                        .collect();
                    serde_json::json!({
                        "status": s["status"],
                        "status_source": s["status_source"],
                        "error": s["error"],
                        "waf": s["waf"],
                        "logged_ids": s["logged_ids"],
                        "log": log,
                    })
                })
                .collect();
            serde_json::json!({
                "id": t["id"],
                "file": t["file"],
                "status": t["status"],
                "reason": t["reason"],
                "logged_ids": t["logged_ids"],
                "stages": stages,
            })
        })
        .collect()
}

/// The whole CRS regression suite gives the same result for every test (status,
/// logged ids, log lines) with memoization and the prefilter on and off.
/// Skipped when there is no CRS (`WAF_CRS_DIR`, default `../shared/crs`
/// beside the workspace).
#[test]
fn crs_results_identical_in_every_engine_mode() {
    let Some(crs) = waf_test_support::crs_dir("crs_results_identical_in_every_engine_mode") else {
        return;
    };
    assert!(
        crs.join("tests/regression/tests").is_dir(),
        "the CRS checkout at {} has no regression tests",
        crs.display()
    );
    let crs = crs.to_str().expect("UTF-8 CRS path").to_string();
    let modes: [&[&str]; 4] = [
        &[],
        &["--no-memo"],
        &["--no-prefilter"],
        &["--no-memo", "--no-prefilter"],
    ];
    // The four runs at once (each is a separate process).
    let runs: Vec<_> = modes
        .iter()
        .enumerate()
        .map(|(i, flags)| {
            let path =
                std::env::temp_dir().join(format!("waf-ftw-modes-{}-{i}.json", std::process::id()));
            let child = Command::new(env!("CARGO_BIN_EXE_waf"))
                .args(["test", "ftw", "--crs", &crs, "--json"])
                .arg(&path)
                .args(*flags)
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("run waf");
            (flags, path, child)
        })
        .collect();
    let mut results = Vec::new();
    for (flags, path, child) in runs {
        let o = child.wait_with_output().expect("wait for waf");
        assert!(
            matches!(o.status.code(), Some(0 | 1)),
            "waf test ftw {flags:?}: {:?}\n{}{}",
            o.status,
            stdout(&o),
            String::from_utf8_lossy(&o.stderr)
        );
        let text = std::fs::read_to_string(&path).expect("JSON report");
        std::fs::remove_file(&path).ok();
        let v: serde_json::Value = serde_json::from_str(&text).expect("JSON report parses");
        let passed = v["summary"]["passed"].as_u64().expect("passed count");
        assert!(passed > 4300, "{flags:?}: only {passed} CRS tests passed");
        results.push((flags, passed, ftw_results(&v)));
    }
    let (_, passed, want) = &results[0];
    for (flags, p, got) in &results[1..] {
        assert_eq!(
            p, passed,
            "{flags:?}: pass count differs from the default mode"
        );
        assert_eq!(got.len(), want.len(), "{flags:?}: number of tests");
        for (w, g) in want.iter().zip(got) {
            assert_eq!(
                g, w,
                "{flags:?}: test {} differs from the default mode",
                w["id"]
            );
        }
    }
}
