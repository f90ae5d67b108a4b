//! The `waf` binary: exit codes and output formats.

mod common;

use common::{assert_success, stdout, waf};
use std::process::{Command, Output};

#[test]
fn lint_exit_codes() {
    assert_eq!(
        waf(&["lint", "tests/fixtures/clean.conf"]).status.code(),
        Some(0)
    );
    assert_eq!(
        waf(&["lint", "tests/fixtures/bad.conf"]).status.code(),
        Some(1)
    );
    // Warnings alone pass, unless denied.
    assert_eq!(
        waf(&["lint", "tests/fixtures/warn.conf"]).status.code(),
        Some(0)
    );
    assert_eq!(
        waf(&["lint", "--deny", "warnings", "tests/fixtures/warn.conf"])
            .status
            .code(),
        Some(1)
    );
    // Usage and I/O errors.
    assert_eq!(
        waf(&["lint", "tests/fixtures/no-such.conf"]).status.code(),
        Some(2)
    );
    assert_eq!(
        waf(&["lint", "--format", "xml", "tests/fixtures/clean.conf"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        waf(&["lint", "--deny", "everything", "tests/fixtures/clean.conf"])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn lint_human_output_has_locations_snippets_and_hints() {
    let o = waf(&["lint", "--color", "never", "tests/fixtures/bad.conf"]);
    let text = stdout(&o);
    assert!(text.contains("tests/fixtures/bad.conf:1:15"), "{text}");
    assert!(text.contains("did you mean `@rx`?"), "{text}");
    assert!(
        text.contains("tests/fixtures/bad.conf:2:19"),
        "lookahead inside the regex: {text}"
    );
    assert!(text.contains("duplicate rule id 1"), "{text}");
    assert!(text.contains("did you mean `t:lowercase`?"), "{text}");
    assert!(
        text.contains("1 file(s) checked: 4 error(s), 0 warning(s)"),
        "{text}"
    );
}

#[test]
fn lint_json() {
    let o = waf(&["lint", "--format", "json", "tests/fixtures/bad.conf"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["errors"], 4);
    let d = &v["diagnostics"][0];
    assert_eq!(d["code"], "unknown-operator");
    assert_eq!(d["file"], "tests/fixtures/bad.conf");
    assert_eq!(
        (d["line"].as_u64(), d["column"].as_u64()),
        (Some(1), Some(15))
    );
    assert_eq!(d["hint"], "did you mean `@rx`?");
}

#[test]
fn lint_sarif() {
    let o = waf(&["lint", "--format", "sarif", "tests/fixtures/bad.conf"]);
    assert_eq!(o.status.code(), Some(1));
    let mut v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("sarif json");
    // The tool version changes with releases; everything else is stable.
    v["runs"][0]["tool"]["driver"]["version"] = "VERSION".into();
    insta::assert_json_snapshot!("lint_bad_conf.sarif", v);
}

#[test]
fn compile_stats_and_dump_of_the_default_ruleset() {
    let o = waf(&["compile", "--stats"]);
    assert_success(&o);
    let text = stdout(&o);
    assert!(text.contains("rules "), "{text}");
    assert!(text.contains("transform chains"), "{text}");

    let o = waf(&["compile", "--dump-ir", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json IR");
    assert!(v["rules"].as_array().is_some_and(|r| !r.is_empty()));
    assert!(v["transforms"]["nodes"]
        .as_array()
        .is_some_and(|n| n.len() > 1));

    let o = waf(&["compile", "--dump-ir"]);
    assert!(stdout(&o).contains("phase 2 ("));
    let o = waf(&["compile", "--stats", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json stats");
    assert!(v["rules"].as_u64().is_some_and(|n| n > 10));
}

#[test]
fn compile_writes_an_artifact_that_eval_loads_alone() {
    let dir = std::env::temp_dir().join(format!("waf-compile-o-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let rules = dir.join("rules.conf");
    std::fs::write(
        &rules,
        "SecRuleEngine On\nSecRule ARGS \"@rx (?i)<script\" \"id:10,phase:2,deny,status:406,msg:'xss'\"\n",
    )
    .expect("write rules");
    let wafc = dir.join("rules.wafc");
    let o = waf(&[
        "compile",
        "-o",
        wafc.to_str().expect("path"),
        rules.to_str().expect("path"),
    ]);
    assert_success(&o);
    assert!(String::from_utf8_lossy(&o.stderr).contains("1 dense DFAs"));
    std::fs::remove_file(&rules).expect("the artifact must not need its source");
    let request = dir.join("r.jsonl");
    std::fs::write(
        &request,
        r#"{"uri":"/?q=%3CSCRIPT%3E","headers":[["Host","h"]]}"#,
    )
    .expect("write request");
    let o = waf(&[
        "eval",
        "-c",
        wafc.to_str().expect("path"),
        "--request",
        request.to_str().expect("path"),
    ]);
    assert_success(&o);
    let d: serde_json::Value = serde_json::from_slice(&o.stdout).expect("decision json");
    assert_eq!(d["status"], 406, "{d}");
    // A damaged artifact is refused with a diagnostic, exit 1.
    let mut bytes = std::fs::read(&wafc).expect("read artifact");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&wafc, &bytes).expect("damage");
    let o = waf(&["lint", wafc.to_str().expect("path")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("checksum mismatch"), "{}", stdout(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn compile_fails_with_errors() {
    let o = waf(&["compile", "tests/fixtures/bad.conf"]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn embedded_default_ruleset_lints_clean() {
    let o = waf(&["lint", "--deny", "warnings"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
}

#[test]
fn eval_one_request_and_a_corpus() {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_waf"))
        .args(["eval", "--request", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run waf");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(br#"{"id":"x1","uri":"/?q=%3Cscript%3Ealert(1)%3C/script%3E","headers":[["Host","h"]]}"#)
        .expect("write");
    let o = child.wait_with_output().expect("wait");
    assert_eq!(o.status.code(), Some(0));
    let d: serde_json::Value = serde_json::from_slice(&o.stdout).expect("decision json");
    assert_eq!(d["id"], "x1");
    assert_eq!(d["interrupted"], true);
    assert_eq!(d["status"], 403);

    let dir = std::env::temp_dir().join(format!("waf-eval-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let corpus = dir.join("c.jsonl");
    std::fs::write(
        &corpus,
        concat!(
            r#"{"id":"ok","uri":"/index.html","headers":[["Host","h"]]}"#,
            "\n",
            r#"{"id":"post","method":"POST","uri":"/f","headers":[["Host","h"],["Content-Type","application/x-www-form-urlencoded"]],"body_b64":"YT0xJyBvciAnMSc9JzE="}"#,
            "\n"
        ),
    )
    .expect("write corpus");
    let out = dir.join("d.jsonl");
    let o = waf(&[
        "eval",
        "--corpus",
        corpus.to_str().expect("path"),
        "--out",
        out.to_str().expect("path"),
    ]);
    assert_success(&o);
    let text = std::fs::read_to_string(&out).expect("decisions");
    let d: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("line"))
        .collect();
    assert_eq!(d.len(), 2);
    assert_eq!(
        (d[0]["id"].as_str(), d[0]["interrupted"].as_bool()),
        (Some("ok"), Some(false))
    );
    assert_eq!(
        (d[1]["id"].as_str(), d[1]["interrupted"].as_bool()),
        (Some("post"), Some(true)),
        "SQLi in a form body"
    );
    // --exit-code: 1 when any request is blocked, 0 when none is.
    let corpus_arg = corpus.to_str().expect("path");
    let o = waf(&["eval", "--corpus", corpus_arg, "--exit-code"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("1 request(s) blocked"));
    let benign = dir.join("benign.jsonl");
    std::fs::write(&benign, r#"{"uri":"/index.html","headers":[["Host","h"]]}"#).expect("write");
    let o = waf(&[
        "eval",
        "--corpus",
        benign.to_str().expect("path"),
        "--exit-code",
    ]);
    assert_success(&o);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn eval_rejects_unknown_request_fields() {
    let path = temp_file("eval-unknown", "r.jsonl", br#"{"uri":"/","bodyy":"a=1"}"#);
    let o = waf(&["eval", "--corpus", path.to_str().expect("utf-8 temp path")]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("r.jsonl:1") && err.contains("unknown field `bodyy`"),
        "{err}"
    );
    // The annotations corpus generators add are accepted.
    let path = temp_file(
        "eval-annotated",
        "r.jsonl",
        br#"{"uri":"/","expect_ids":[1],"no_expect_ids":[],"file":"x.yaml","url":"http://h/"}"#,
    );
    assert_success(&waf(&[
        "eval",
        "--corpus",
        path.to_str().expect("utf-8 temp path"),
    ]));
}

#[test]
fn flags_that_make_no_sense_are_usage_errors() {
    for args in [
        &["suggest", "--out", "/tmp/x"][..],
        &["suggest", "--include-review"],
        &["suggest", "--passes", "2"],
        &["bench", "--corpus", "x.jsonl", "--passes", "0"],
        &["bench", "--corpus", "x.jsonl", "--threads", "0"],
        &["profile", "--corpus", "x.jsonl", "--passes", "0"],
        &["eval"],
        &["lint", "--max-diagnostics", "0"],
        &["serve"],
        &[
            "serve",
            "--tls-cert",
            "c.pem",
            "--upstream",
            "http://127.0.0.1:9",
        ],
        &["serve", "--config", "missing.yaml"],
        &["profile", "--from-metrics", "a.prom", "--corpus", "x.jsonl"],
        &["test", "ftw", "--crs", "x", "--http", "127.0.0.1:1"],
        &["test", "ftw", "--crs", "x", "--error-log", "x.log"],
    ] {
        let o = waf(args);
        assert_eq!(
            o.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn every_subcommand_help_has_an_example_and_the_exit_codes() {
    for cmd in [
        &["lint"][..],
        &["compile"],
        &["eval"],
        &["bench"],
        &["suggest"],
        &["profile"],
        &["serve"],
        &["test", "ftw"],
        &["test", "backend"],
    ] {
        let mut args = cmd.to_vec();
        args.push("--help");
        let o = waf(&args);
        assert_success(&o);
        let help = stdout(&o);
        let examples = help.split_once("Examples:\n").map(|(_, e)| e);
        assert!(
            examples.is_some_and(|e| e.contains("waf ")),
            "{cmd:?}:\n{help}"
        );
        assert!(help.contains("Exit codes: 0 ok; 1 "), "{cmd:?}:\n{help}");
    }
}

const INEFFICIENT: &str = "../rulesets/inefficient.conf";

fn codes(o: &Output) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    v["diagnostics"]
        .as_array()
        .expect("diagnostics")
        .iter()
        .map(|d| d["code"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn lint_perf_checks_in_every_format() {
    // Warnings: exit 0, unless denied.
    let o = waf(&["lint", INEFFICIENT]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let human = stdout(&o);
    assert!(
        human.contains("warning[perf-redundant-transform]"),
        "{human}"
    );
    assert!(human.contains("warning[perf-no-prefilter]"), "{human}");
    assert_eq!(
        waf(&["lint", "--deny", "warnings", INEFFICIENT])
            .status
            .code(),
        Some(1)
    );

    let json = codes(&waf(&["lint", "--format", "json", INEFFICIENT]));
    for c in ["perf-redundant-transform", "perf-no-prefilter"] {
        assert!(json.iter().any(|x| x == c), "{c} missing from {json:?}");
    }
    assert!(!json.iter().any(|x| x == "perf-cost"), "{json:?}");
    let tight = codes(&waf(&[
        "lint",
        "--format",
        "json",
        "--perf-budget",
        "1",
        INEFFICIENT,
    ]));
    assert!(tight.iter().any(|x| x == "perf-cost"), "{tight:?}");
    let off = codes(&waf(&[
        "lint",
        "--format",
        "json",
        "--no-perf",
        INEFFICIENT,
    ]));
    assert!(!off.iter().any(|x| x.starts_with("perf-")), "{off:?}");

    let o = waf(&["lint", "--format", "sarif", INEFFICIENT]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("sarif json");
    let results = v["runs"][0]["results"].as_array().expect("results");
    assert!(results
        .iter()
        .any(|r| r["ruleId"] == "perf-redundant-transform" && r["level"] == "warning"));
    let rules = v["runs"][0]["tool"]["driver"]["rules"]
        .as_array()
        .expect("rules");
    assert!(rules.iter().any(|r| r["id"] == "perf-no-prefilter"));
}

/// A corpus that reaches the rewritten rules of inefficient.conf, and one
/// request (`twice`) that ARGS|ARGS_GET counts twice.
fn suggest_corpus(dir: &std::path::Path) -> std::path::PathBuf {
    let corpus = dir.join("c.jsonl");
    let lines = [
        r#"{"id":"plain","uri":"/index.html","headers":[["Host","h"],["User-Agent","Mozilla/5.0"]]}"#,
        r#"{"id":"sqli","uri":"/?q=SELECT%20a%20FROM%20b&r=Union%09All","headers":[["Host","h"]]}"#,
        r#"{"id":"ua","uri":"/","headers":[["Host","h"],["User-Agent","Nikto/2.1"],["Referer","  javascript:x"]]}"#,
        r#"{"id":"ws","uri":"/?a=on%20error%20%3D1&__PROTO__=1","headers":[["Host","h"]]}"#,
        r#"{"id":"pm","uri":"/?cmd=EVAL(x)","headers":[["Host","h"],["User-Agent","MASSCAN/1.0"]]}"#,
        r#"{"id":"twice","uri":"/?a=%3C%3Fphp&b=%3C%3Fphp","headers":[["Host","h"]]}"#,
    ];
    std::fs::write(&corpus, lines.join("\n")).expect("write corpus");
    corpus
}

#[test]
fn suggest_lists_applies_diffs_and_verifies() {
    let dir = std::env::temp_dir().join(format!("waf-suggest-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("tmp");
    let corpus = suggest_corpus(&dir);
    let corpus = corpus.to_str().expect("utf-8 path");

    // The list, as JSON, with counts by kind.
    let o = waf(&["suggest", "--format", "json", INEFFICIENT]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["counts"]["share-prefix"]["equivalent"], 2);
    let first = &v["suggestions"][0];
    for field in [
        "kind", "safety", "rule_id", "location", "change", "why", "edits",
    ] {
        assert!(!first[field].is_null(), "{field} missing in {first}");
    }

    // With a corpus: measured gains.
    let o = waf(&["suggest", INEFFICIENT, "--corpus", corpus]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).contains("gain:   rule time"), "{}", stdout(&o));

    // Equivalent rewrites: written, diffed, and proved on the corpus.
    let out = dir.join("out");
    let o = waf(&[
        "suggest",
        INEFFICIENT,
        "--apply",
        "--out",
        out.to_str().expect("utf-8"),
        "--diff",
        "--verify",
        corpus,
        "--passes",
        "1",
    ]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(text.contains("+++ b/"), "{text}");
    assert!(text.contains("identical on every one"), "{text}");
    assert!(text.contains("memo hit ratio"), "{text}");
    let written = std::fs::read_to_string(out.join("inefficient.conf")).expect("rewritten file");
    assert!(written.contains("@pm eval system passthru"));
    assert!(
        written.contains("# A ruleset written badly on purpose"),
        "comments kept"
    );

    // With the rewrites that need review, the corpus finds a difference.
    let o = waf(&[
        "suggest",
        INEFFICIENT,
        "--include-review",
        "--verify",
        corpus,
    ]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("NOT EQUIVALENT at request twice"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A file for one test, in a directory of its own under the system's temp dir.
fn temp_file(test: &str, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("waf-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write");
    path
}

#[test]
fn lint_reports_a_binary_file_as_one_error() {
    // The test binary itself: megabytes of machine code, NUL bytes and all.
    let exe = std::fs::read(env!("CARGO_BIN_EXE_waf")).expect("read the waf binary");
    let path = temp_file("lint-binary", "waf.conf", &exe);
    let o = waf(&["lint", path.to_str().expect("utf-8 temp path")]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.lines().count() <= 100,
        "{} lines:\n{out}",
        out.lines().count()
    );
    assert!(
        out.contains("error[encoding]: this file is not text"),
        "{out}"
    );
    assert!(out.contains("1 error(s)"), "{out}");
}

#[test]
fn lint_caps_diagnostics_per_file() {
    let text = "NotADirective x\n".repeat(200);
    let path = temp_file("lint-cap", "many.conf", text.as_bytes());
    let path = path.to_str().expect("utf-8 temp path");
    let o = waf(&["lint", "--max-diagnostics", "5", path]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert_eq!(out.matches("error[unknown-directive]").count(), 5, "{out}");
    assert!(out.contains("note: 195 more diagnostic(s) in "), "{out}");
    // The summary counts every diagnostic, shown or not.
    assert!(out.contains("200 error(s)"), "{out}");
    // The default is 50; JSON lists what is shown and counts the rest.
    let o = waf(&["lint", "--format", "json", path]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["errors"], 200);
    assert_eq!(v["diagnostics"].as_array().map(Vec::len), Some(50));
    assert_eq!(v["suppressed"][0]["count"], 150);
    // Zero would hide every finding: a usage error.
    assert_eq!(
        waf(&["lint", "--max-diagnostics", "0", path]).status.code(),
        Some(2)
    );
}

#[test]
fn lint_shows_a_window_of_a_long_line() {
    // An unknown operator in the middle of a 100 KB line.
    let pad = "a".repeat(50_000);
    let text =
        format!("SecRule ARGS \"@rx {pad}\" \"id:1,phase:2,pass,t:none,t:nosuchthing,{pad}\"\n");
    let path = temp_file("lint-long", "long.conf", text.as_bytes());
    let o = waf(&["lint", "--no-perf", path.to_str().expect("utf-8 temp path")]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.len() < 4096, "{} bytes:\n{out}", out.len());
    assert!(out.contains("nosuchthing"), "{out}");
    // The column is the real one, not the window's.
    let col = text.find("nosuchthing").expect("in text") + 1;
    assert!(out.contains(&format!("long.conf:1:{col}")), "{out}");
}

/// `waf serve` on SIGTERM: no new client, the request in flight answered,
/// then a clean exit that says what it did.
#[test]
fn serve_drains_the_request_in_flight_on_sigterm() {
    use std::io::{Read, Write};
    use std::time::Duration;
    let upstream = common::backend(16, Duration::from_secs(1), "finished\n");
    let (child, listen) = common::start_serve(&[
        "tests/fixtures/clean.conf",
        "--upstream",
        &format!("http://{upstream}"),
        "--workers",
        "2",
    ]);
    let client = {
        let listen = listen.clone();
        std::thread::spawn(move || {
            let mut c = std::net::TcpStream::connect(&listen).expect("connect");
            c.set_read_timeout(Some(Duration::from_secs(10)))
                .expect("timeout");
            c.write_all(b"GET /slow HTTP/1.1\r\nHost: example.com\r\n\r\n")
                .expect("write");
            let mut answer = String::new();
            let _ = c.read_to_string(&mut answer);
            answer
        })
    };
    std::thread::sleep(Duration::from_millis(400));
    let (code, stderr) = common::stop(child);
    let answer = client.join().expect("client");
    assert_eq!(code, Some(0), "exits 0 within 10 s of SIGTERM: {stderr}");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}\n{stderr}");
    assert!(answer.ends_with("finished\n"), "{answer}");
    assert!(
        stderr.contains(
            "stopped: 1 connection(s) open at the signal, 1 closed after their requests, 0 cut"
        ),
        "{stderr}"
    );
    assert!(
        std::net::TcpStream::connect(&listen).is_err(),
        "nothing listens after the exit"
    );
}

/// `waf serve` reloads when a rule file, or a file its `Include` glob
/// matches, changes on disk; an edit that does not compile keeps the
/// running rules, and fixing it reloads again.
#[test]
fn serve_reloads_when_the_rule_files_change() {
    use std::time::{Duration, Instant};
    let upstream = common::backend(500, Duration::ZERO, "ok\n");
    let dir = std::env::temp_dir().join(format!("waf-cli-watch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("extra")).expect("dir");
    let rule = |id: u32, word: &str| {
        format!("SecRule ARGS \"@contains {word}\" \"id:{id},phase:1,deny,status:403\"\n")
    };
    let main = dir.join("main.conf");
    std::fs::write(
        &main,
        format!("SecRuleEngine On\nInclude {}/extra/*.conf\n", dir.display()),
    )
    .expect("write");
    std::fs::write(dir.join("extra/a.conf"), rule(10, "alpha")).expect("write");
    let (child, listen) = common::start_serve(&[
        &main.display().to_string(),
        "--upstream",
        &format!("http://{upstream}"),
        "--workers",
        "1",
        "--watch-interval",
        "0.2",
    ]);
    let status_of = |word: &str| common::status(&listen, &format!("/?q={word}"));
    // Polls (bounded) until `word` gets `want`.
    let wait_for = |word: &str, want: u16| {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if status_of(word) == want {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let steps = [
        wait_for("alpha", 403) && status_of("beta") == 200,
        // The included file changes.
        {
            std::fs::write(dir.join("extra/a.conf"), rule(10, "beta")).expect("write");
            wait_for("beta", 403) && status_of("alpha") == 200
        },
        // A new file matches the glob.
        {
            std::fs::write(dir.join("extra/b.conf"), rule(11, "gamma")).expect("write");
            wait_for("gamma", 403)
        },
        // A broken edit: the running rules stay...
        {
            std::fs::write(dir.join("extra/b.conf"), "SecRule ARGS\n").expect("write");
            std::thread::sleep(Duration::from_millis(1500));
            status_of("gamma") == 403 && status_of("beta") == 403
        },
        // ...until it is fixed.
        {
            std::fs::write(dir.join("extra/b.conf"), rule(11, "delta")).expect("write");
            wait_for("delta", 403) && status_of("gamma") == 200
        },
    ];
    let (_, stderr) = common::stop(child);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(steps, [true; 5], "{stderr}");
    assert!(
        stderr.contains("a.conf changed: reloading"),
        "the report names the file: {stderr}"
    );
    assert!(
        stderr.contains("reload refused: the running rules stay"),
        "{stderr}"
    );
}

/// A fresh temporary directory `waf-cli-NAME-PID` with `count.conf`, rules
/// that count each `?client=` in `IP` and answer 429 past `limit`
/// requests, and the `waf serve` arguments for them in front of
/// `upstream` with `--collection-file DIR/collections.bin`.
fn counting_client_setup(
    name: &str,
    limit: u32,
    upstream: std::net::SocketAddr,
) -> (std::path::PathBuf, Vec<String>) {
    let dir = std::env::temp_dir().join(format!("waf-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let rules = dir.join("count.conf");
    std::fs::write(
        &rules,
        format!(
            "SecRuleEngine On\n\
             SecAction \"id:1,phase:1,pass,nolog,initcol:ip=%{{ARGS.client}}\"\n\
             SecAction \"id:2,phase:1,pass,nolog,setvar:ip.hits=+1\"\n\
             SecRule IP:hits \"@gt {limit}\" \"id:3,phase:1,deny,status:429\"\n"
        ),
    )
    .expect("write");
    let args = vec![
        rules.display().to_string(),
        "--upstream".into(),
        format!("http://{upstream}"),
        "--collection-file".into(),
        dir.join("collections.bin").display().to_string(),
    ];
    (dir, args)
}

/// `--collection-file`: a client's count, written when the process stops,
/// is read by the next one, which blocks the client's fourth request; a
/// damaged file is reported and the process starts anyway.
#[test]
fn serve_keeps_persistent_collections_across_a_restart_in_a_file() {
    use std::time::Duration;
    let upstream = common::backend(100, Duration::ZERO, "ok\n");
    let (dir, args) = counting_client_setup("collections", 3, upstream);
    let file = dir.join("collections.bin");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (child, listen) = common::start_serve(&args);
    let first: Vec<u16> = (0..3)
        .map(|_| common::status(&listen, "/?client=a"))
        .collect();
    let (code, stderr1) = common::stop(child);
    let (child, listen) = common::start_serve(&args);
    let after = [
        common::status(&listen, "/?client=a"),
        common::status(&listen, "/?client=b"),
    ];
    let (_, stderr2) = common::stop(child);
    std::fs::write(&file, b"not a snapshot").expect("write");
    let (child, listen) = common::start_serve(&args);
    let damaged = common::status(&listen, "/?client=a");
    let (_, stderr3) = common::stop(child);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(first, [200, 200, 200], "{stderr1}");
    assert_eq!(code, Some(0), "{stderr1}");
    assert!(
        stderr1.contains("persistent collections: no ") && stderr1.contains("records written to"),
        "{stderr1}"
    );
    assert!(
        stderr2.contains("persistent collections: 1 records read from"),
        "{stderr2}"
    );
    assert_eq!(after, [429, 200], "{stderr2}");
    assert!(stderr3.contains("not a collections snapshot"), "{stderr3}");
    assert_eq!(damaged, 200, "{stderr3}");
}

/// `--reuse-port` with `--collection-file`: the process that takes the
/// port over merges what the old one writes as it stops, with what it
/// counted itself meanwhile replayed on it, so a client's count holds the
/// requests both processes served.
#[test]
fn serve_merges_persistent_collections_across_a_handoff() {
    use std::io::BufRead;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};
    let upstream = common::backend(100, Duration::ZERO, "ok\n");
    // 3 requests before the handoff and 10 while both processes serve:
    // the 14th is over the limit only if the counts add up.
    let (dir, mut args) = counting_client_setup("handoff", 13, upstream);
    args.push("--reuse-port".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (old, listen) = common::start_serve(&args);
    let before: Vec<u16> = (0..3)
        .map(|_| common::status(&listen, "/?client=a"))
        .collect();
    let mut new = std::process::Command::new(env!("CARGO_BIN_EXE_waf"))
        .arg("serve")
        .args(&args)
        .args(["--listen", &listen])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the new waf serve");
    let said = Arc::new(Mutex::new(String::new()));
    let reader = new.stderr.take().map(|e| {
        let said = said.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(e).lines().map_while(Result::ok) {
                if let Ok(mut s) = said.lock() {
                    s.push_str(&line);
                    s.push('\n');
                }
            }
        })
    });
    let wait_for = |text: &str| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !said.lock().is_ok_and(|s| s.contains(text)) {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    };
    let listening = wait_for("listening on");
    // New connections go to either process.
    let during: Vec<u16> = (0..10)
        .map(|_| common::status(&listen, "/?client=a"))
        .collect();
    let other = common::status(&listen, "/?client=b");
    let (code, stderr_old) = common::stop(old);
    let merged = wait_for("records merged from");
    let after = [
        common::status(&listen, "/?client=a"),
        common::status(&listen, "/?client=b"),
    ];
    common::signal(&new, "TERM");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !matches!(new.try_wait(), Ok(Some(_))) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = new.kill();
    let _ = new.wait();
    if let Some(r) = reader {
        let _ = r.join();
    }
    let stderr_new = said.lock().map(|s| s.clone()).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(before, [200; 3], "{stderr_old}");
    assert!(listening, "{stderr_new}");
    assert!(
        stderr_new.contains("another process listens on"),
        "{stderr_new}"
    );
    assert_eq!(during, [200; 10], "{stderr_old}\n{stderr_new}");
    assert_eq!(other, 200);
    assert_eq!(code, Some(0), "{stderr_old}");
    assert!(stderr_old.contains("records written to"), "{stderr_old}");
    assert!(merged, "{stderr_new}");
    assert_eq!(after, [429, 200], "{stderr_old}\n{stderr_new}");
    assert!(stderr_new.contains("records written to"), "{stderr_new}");
}

/// `waf spoa` takes `waf serve`'s persistent-collection flags and checks
/// them before it listens (what it does with them is checked behind real
/// HAProxy front ends by corpus/spoa-collections.sh).
#[test]
fn spoa_checks_its_persistent_collection_flags() {
    let bad_url = common::waf(&[
        "spoa",
        "--listen",
        "127.0.0.1:0",
        "--collection-redis",
        "http://127.0.0.1:6379",
    ]);
    let stderr = String::from_utf8_lossy(&bad_url.stderr);
    assert_eq!(bad_url.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("give redis://"), "{stderr}");
    let both = common::waf(&[
        "spoa",
        "--collection-file",
        "/tmp/x",
        "--collection-redis",
        "redis://127.0.0.1:6379",
    ]);
    let stderr = String::from_utf8_lossy(&both.stderr);
    assert_eq!(both.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot be used with"), "{stderr}");
}

/// `RULES --upstream http://UPSTREAM --collection-redis URL`: the Redis
/// tests' instances.
fn redis_sharing_args(
    rules: &std::path::Path,
    upstream: std::net::SocketAddr,
    url: String,
) -> Vec<String> {
    vec![
        rules.display().to_string(),
        "--upstream".into(),
        format!("http://{upstream}"),
        "--collection-redis".into(),
        url,
    ]
}

/// Client `a` on two instances sharing a counter with a limit of 5: its 3
/// requests to `one` and 2 to `two` (under the limit on each and
/// together), then, once both have exchanged, its 6th on each (over it).
fn count_a_client_on_two(one: &str, two: &str) -> (Vec<u16>, [u16; 2]) {
    let mut counted: Vec<u16> = (0..3).map(|_| common::status(one, "/?client=a")).collect();
    counted.extend((0..2).map(|_| common::status(two, "/?client=a")));
    std::thread::sleep(std::time::Duration::from_millis(400));
    let over = [
        common::status(two, "/?client=a"),
        common::status(one, "/?client=a"),
    ];
    (counted, over)
}

/// `--collection-redis`: two instances sharing a Redis (started here, on
/// loopback) count a client together and see each other's blocks, and an
/// instance whose Redis went away goes on serving.
#[test]
fn serve_shares_persistent_collections_between_instances_through_redis() {
    use std::time::{Duration, Instant};
    let Some(redis) = common::redis_server() else {
        return;
    };
    let upstream = common::backend(200, Duration::ZERO, "ok\n");
    let dir = std::env::temp_dir().join(format!("waf-cli-redis-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let rules = dir.join("count.conf");
    std::fs::write(
        &rules,
        "SecRuleEngine On\n\
         SecAction \"id:1,phase:1,pass,nolog,initcol:ip=%{ARGS.client}\"\n\
         SecRule ARGS:ban \"@streq 1\" \"id:2,phase:1,deny,status:403,setvar:ip.banned=1,expirevar:ip.banned=60\"\n\
         SecRule IP:banned \"@eq 1\" \"id:3,phase:1,deny,status:403\"\n\
         SecAction \"id:4,phase:1,pass,nolog,setvar:ip.hits=+1\"\n\
         SecRule IP:hits \"@gt 5\" \"id:5,phase:1,deny,status:429\"\n",
    )
    .expect("write");
    let args = redis_sharing_args(&rules, upstream, format!("redis://{}", redis.addr));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let admin = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .to_string();
    let with_admin: Vec<&str> = args.iter().copied().chain(["--admin", &admin]).collect();
    let (one, at_one) = common::start_serve(&with_admin);
    let (two, at_two) = common::start_serve(&args);
    let exchange = || std::thread::sleep(Duration::from_millis(400));
    let metric = |name: &str| -> Option<u64> {
        let m = common::get(&admin, "/metrics");
        let line = m.lines().find(|l| l.starts_with(&format!("{name} ")))?;
        line.split(' ').nth(1)?.parse().ok()
    };
    let (counted, over) = count_a_client_on_two(&at_one, &at_two);
    // A client banned by one instance is refused by the other once both
    // have exchanged (two intervals of 100 ms at most, then a request).
    let banned = common::status(&at_one, "/?client=c&ban=1");
    let start = Instant::now();
    let refused = loop {
        if common::status(&at_two, "/?client=c") == 403 {
            break Some(start.elapsed());
        }
        if start.elapsed() > Duration::from_secs(5) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let up = [
        metric("waf_collection_redis_up"),
        metric("waf_collection_redis_failures_total"),
    ];
    let exchanged = metric("waf_collection_redis_exchanges_total");
    // Redis gone: both go on serving, each counting on its own.
    drop(redis);
    exchange();
    let without = [
        common::status(&at_one, "/?client=d"),
        common::status(&at_two, "/?client=d"),
    ];
    exchange();
    let down = [
        metric("waf_collection_redis_up"),
        metric("waf_collection_redis_failures_total").map(|n| n.min(1)),
    ];
    let (_, stderr_one) = common::stop(one);
    let (_, stderr_two) = common::stop(two);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(counted, [200; 5], "{stderr_one}\n{stderr_two}");
    assert_eq!(over, [429, 429], "{stderr_one}\n{stderr_two}");
    assert_eq!(banned, 403);
    assert!(
        refused.is_some_and(|t| t < Duration::from_secs(1)),
        "{refused:?}\n{stderr_two}"
    );
    assert_eq!(without, [200, 200]);
    assert_eq!(up, [Some(1), Some(0)]);
    assert!(exchanged.is_some_and(|n| n > 0), "{exchanged:?}");
    assert_eq!(down, [Some(0), Some(1)]);
    assert!(
        stderr_one.contains("each instance counts on its own until it answers"),
        "{stderr_one}"
    );
}

/// `--collection-redis rediss://` with `--collection-redis-ca`: two
/// instances share through a Redis that speaks TLS only, with a
/// certificate a private CA signed; an instance without that CA (the
/// system's roots) does not trust the server, says so, and serves on alone.
#[test]
fn serve_shares_persistent_collections_through_redis_over_tls() {
    use std::time::Duration;
    let dir = std::env::temp_dir().join(format!("waf-cli-redis-tls-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let Some((redis, ca)) = common::redis_server_tls(&dir) else {
        return;
    };
    let upstream = common::backend(200, Duration::ZERO, "ok\n");
    let rules = dir.join("count.conf");
    std::fs::write(
        &rules,
        "SecRuleEngine On\n\
         SecAction \"id:1,phase:1,pass,nolog,initcol:ip=%{ARGS.client}\"\n\
         SecAction \"id:2,phase:1,pass,nolog,setvar:ip.hits=+1\"\n\
         SecRule IP:hits \"@gt 5\" \"id:3,phase:1,deny,status:429\"\n",
    )
    .expect("write");
    let args = redis_sharing_args(&rules, upstream, format!("rediss://{}", redis.addr));
    let untrusting: Vec<&str> = args.iter().map(String::as_str).collect();
    let ca = ca.display().to_string();
    let trusting: Vec<&str> = untrusting
        .iter()
        .copied()
        .chain(["--collection-redis-ca", &ca])
        .collect();
    let (one, at_one) = common::start_serve(&trusting);
    let (two, at_two) = common::start_serve(&trusting);
    let (three, at_three) = common::start_serve(&untrusting);
    let alone = common::status(&at_three, "/?client=a");
    let (counted, over) = count_a_client_on_two(&at_one, &at_two);
    let (_, stderr_one) = common::stop(one);
    let (_, stderr_two) = common::stop(two);
    let (_, stderr_three) = common::stop(three);
    drop(redis);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(counted, [200; 5], "{stderr_one}\n{stderr_two}");
    assert_eq!(over, [429, 429], "{stderr_one}\n{stderr_two}");
    assert_eq!(alone, 200, "{stderr_three}");
    for stderr in [&stderr_one, &stderr_two] {
        assert!(!stderr.contains("Redis at"), "{stderr}");
    }
    assert!(
        stderr_three.contains("each instance counts on its own until it answers")
            && stderr_three.contains("certificate"),
        "{stderr_three}"
    );
}

/// A manifest's files are watched with it: an edit to a site's block page
/// reloads, and the next block shows the new page.
#[test]
fn serve_reloads_a_manifest_when_its_block_page_changes() {
    use std::time::{Duration, Instant};
    let upstream = common::backend(100, Duration::ZERO, "ok\n");
    let dir = std::env::temp_dir().join(format!("waf-cli-page-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(
        dir.join("rules.conf"),
        "SecRuleEngine On\nSecRule ARGS \"@contains alpha\" \"id:10,phase:1,deny,status:403\"\n",
    )
    .expect("write");
    std::fs::write(dir.join("page.html"), "<p>first {{status}}</p>").expect("write");
    let listen = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .to_string();
    std::fs::write(
        dir.join("waf.yaml"),
        format!("listen: {listen}\nworkers: 1\nwatch_interval: 0.2\nupstreams:\n  app: http://{upstream}\nsites:\n  - name: a\n    upstream: app\n    rules: [rules.conf]\n    block_page: page.html\n"),
    )
    .expect("write");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_waf"))
        .args(["serve", "--config"])
        .arg(dir.join("waf.yaml"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start waf serve");
    let body_shows = |text: &str| {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if common::get(&listen, "/?q=alpha").contains(text) {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let first = body_shows("<p>first 403</p>");
    std::fs::write(dir.join("page.html"), "<p>second {{status}}</p>").expect("write");
    let second = body_shows("<p>second 403</p>");
    let (_, stderr) = common::stop(child);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(first && second, "{stderr}");
    assert!(stderr.contains("page.html changed: reloading"), "{stderr}");
}

/// `waf serve` reopens its log files on SIGUSR1, as logrotate expects:
/// lines before the signal stay in the renamed files, lines after go to new
/// ones at the configured paths.
#[test]
fn serve_reopens_its_logs_on_sigusr1() {
    use std::time::{Duration, Instant};
    let upstream = common::backend(100, Duration::ZERO, "ok\n");
    let dir = std::env::temp_dir().join(format!("waf-cli-reopen-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(
        dir.join("rules.conf"),
        "SecRuleEngine On\nSecRule ARGS \"@contains alpha\" \"id:10,phase:1,deny,status:403,log,msg:'alpha'\"\n",
    )
    .expect("write");
    let path = |name: &str| dir.join(name).display().to_string();
    let (child, listen) = common::start_serve(&[
        &path("rules.conf"),
        "--upstream",
        &format!("http://{upstream}"),
        "--error-log",
        &path("error.log"),
        "--access-log",
        &path("access.log"),
        "--workers",
        "1",
    ]);
    let requests = std::cell::Cell::new(0);
    let blocked = || {
        requests.set(requests.get() + 1);
        common::get(&listen, "/?q=alpha").starts_with("HTTP/1.1 403")
    };
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
    assert!(blocked());
    // Written off the request path: wait (bounded) for the access line.
    let deadline = Instant::now() + Duration::from_secs(5);
    while read("access.log").lines().count() < 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    for name in ["error.log", "access.log"] {
        std::fs::rename(dir.join(name), dir.join(format!("{name}.1"))).expect("rename");
    }
    common::signal(&child, "USR1");
    // Until the new files appear (bounded), one blocked request at a time.
    // The server takes the signal in its own time: a request answered
    // before it did has its lines in the renamed files.
    let deadline = Instant::now() + Duration::from_secs(10);
    while (read("error.log").is_empty() || read("access.log").is_empty())
        && Instant::now() < deadline
    {
        blocked();
        std::thread::sleep(Duration::from_millis(100));
    }
    let (_, stderr) = common::stop(child);
    let (old_error, old_access) = (read("error.log.1"), read("access.log.1"));
    let (new_error, new_access) = (read("error.log"), read("access.log"));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(stderr.contains("logs reopened"), "{stderr}");
    assert!(old_error.contains("[id \"10\"]"), "{old_error}");
    // Every request has its line, in one file or the other.
    assert!(old_access.lines().count() >= 1, "{old_access}");
    assert_eq!(
        old_access.lines().count() + new_access.lines().count(),
        requests.get(),
        "{old_access}\n{new_access}"
    );
    assert!(new_error.contains("[id \"10\"]"), "{new_error}\n{stderr}");
    assert!(
        new_access.contains("\"status\":403"),
        "{new_access}\n{stderr}"
    );
}

/// `waf serve --check` (as `nginx -t`): reads everything a start reads and
/// exits without listening: 0 when all is usable, 1 when the rules or the
/// manifest do not compile (with their diagnostics), 2 for anything else
/// (here a CA file that is not one).
#[test]
fn serve_check_validates_without_listening() {
    let dir = std::env::temp_dir().join(format!("waf-cli-serve-check-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("ok.conf"), "SecRuleEngine On\n").expect("write");
    std::fs::write(dir.join("bad.conf"), "SecRule ARGS \"@rxx a\" \"id:1\"\n").expect("write");
    std::fs::write(dir.join("not-a-ca.pem"), "nothing here\n").expect("write");
    let manifest = |rules: &str| {
        let p = dir.join(format!("waf-{rules}.yaml"));
        std::fs::write(
            &p,
            format!("listeners:\n  - listen: 127.0.0.1:1\n  - listen: 127.0.0.1:2\nupstreams:\n  app: [http://127.0.0.1:9, h2c://127.0.0.1:10]\nsites:\n  - name: shop\n    upstream: app\n    rules: [{rules}]\n"),
        )
        .expect("write");
        p
    };
    let ok = manifest("ok.conf");
    let o = waf(&["serve", "--config", ok.to_str().unwrap_or(""), "--check"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("ok: 2 listener(s), sites shop"), "{err}");
    assert!(!err.contains("listening"), "{err}");
    let bad = manifest("bad.conf");
    let o = waf(&["serve", "--config", bad.to_str().unwrap_or(""), "--check"]);
    assert_eq!(o.status.code(), Some(1));
    let out = format!("{}{}", stdout(&o), String::from_utf8_lossy(&o.stderr));
    assert!(
        out.contains("bad.conf:1:"),
        "file:line:col of the error: {out}"
    );
    let ca = dir.join("not-a-ca.pem");
    let o = waf(&[
        "serve",
        "-c",
        dir.join("ok.conf").to_str().unwrap_or(""),
        "--upstream",
        "https://127.0.0.1:9",
        "--upstream-ca",
        ca.to_str().unwrap_or(""),
        "--check",
    ]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("not-a-ca.pem"));
    // Rules that load but are probably a mistake are reported, with
    // file:line:col, by the manifest and by the quick start alike; the
    // rules still serve.
    std::fs::write(
        dir.join("lax.conf"),
        "SecRequestBodyAccess On\nSecRule ARGS \"@contains x\" \"id:1,phase:2,deny\"\n",
    )
    .expect("write");
    let lax = manifest("lax.conf");
    for args in [
        vec!["serve", "--config", lax.to_str().unwrap_or(""), "--check"],
        vec![
            "serve",
            "-c",
            dir.join("lax.conf").to_str().unwrap_or(""),
            "--upstream",
            "http://127.0.0.1:9",
            "--check",
        ],
    ] {
        let o = waf(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{err}");
        assert!(
            err.contains("lax.conf:1:1: warning[suspicious]: request bodies are inspected, but no rule refuses one that cannot be parsed"),
            "{err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bench_can_start_each_request_with_cold_caches() {
    let corpus = temp_file(
        "bench-evict",
        "c.jsonl",
        br#"{"id":"a","uri":"/?q=1","headers":[["Host","h"]]}
{"id":"b","uri":"/?q=%3Cscript%3E","headers":[["Host","h"]]}
"#,
    );
    let corpus = corpus.to_str().expect("utf-8 path");
    let run = |extra: &[&str]| {
        let mut args = vec!["bench", "--corpus", corpus, "--passes", "2", "--top", "0"];
        args.extend_from_slice(extra);
        let o = waf(&args);
        assert_success(&o);
        o
    };
    let o = run(&["--json", "--evict-kib", "64"]);
    let d: serde_json::Value = serde_json::from_slice(&o.stdout).expect("bench json");
    assert_eq!(d["evict_kib"], 64);
    assert_eq!(d["timed_requests"], 4);
    assert_eq!(d["interrupted"], 2, "the same decisions with cold caches");
    let text = stdout(&run(&["--evict-kib", "64"]));
    assert!(
        text.contains("caches evicted before each timed request (64 KiB written)"),
        "{text}"
    );
    assert!(text.contains("requests/s (busy time)"), "{text}");
    let d: serde_json::Value =
        serde_json::from_slice(&run(&["--json"]).stdout).expect("bench json");
    assert_eq!(d["evict_kib"], 0);
}
