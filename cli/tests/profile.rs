//! `waf profile`: the table, JSON and HTML reports, on a small ruleset with a
//! shared transform-chain prefix, and (when a CRS checkout is there) on CRS.

use std::path::{Path, PathBuf};
mod common;

use common::{assert_success, stdout, waf};

/// Rules 1 and 2 share the `urlDecodeUni` prefix; rule 3 has no prefilter;
/// rule 4 never matches. Rule 1's msg and rule 2's file name carry markup.
const RULES: &str = r#"SecRuleEngine On
SecRule ARGS|REQUEST_COOKIES "@rx union\s+select" "id:1,phase:2,pass,t:none,t:urlDecodeUni,t:lowercase,msg:'<script>alert(1)</script>'"
SecRule ARGS|REQUEST_HEADERS:User-Agent "@rx <script" "id:2,phase:2,pass,t:none,t:urlDecodeUni"
SecRule ARGS "@eq 999" "id:3,phase:2,pass,t:none"
SecRule REQUEST_URI "@rx never-ever-there" "id:4,phase:1,pass,t:none,t:lowercase"
"#;

const CORPUS: &str = r#"{"id":"a","method":"GET","uri":"/s?q=UNION%20SELECT&x=%3Cscript%3Ealert(1)%3C/script%3E","headers":[["Host","example.com"],["User-Agent","<script>alert(2)</script>"],["Cookie","a=1; b=2"]]}
{"id":"b","method":"GET","uri":"/p?z=1","headers":[["Host","example.com"],["User-Agent","curl/8"]]}
{"id":"c","method":"POST","uri":"/form","headers":[["Host","example.com"],["Content-Type","application/x-www-form-urlencoded"]],"body":"name=<script>x</script>&v=2"}
"#;

/// A fresh directory with the rules and the corpus.
fn setup(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("waf-profile-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(dir.join("rules.conf"), RULES).expect("write rules");
    std::fs::write(dir.join("corpus.jsonl"), CORPUS).expect("write corpus");
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

#[test]
fn table_names_chains_targets_and_rules() {
    let dir = setup("table");
    let (rules, corpus) = (dir.join("rules.conf"), dir.join("corpus.jsonl"));
    let o = waf(&["profile", "-c", s(&rules), "--corpus", s(&corpus)]);
    let text = stdout(&o);
    assert_success(&o);
    assert!(text.contains("waf profile: 3 requests"), "{text}");
    assert!(
        text.contains("memo hit ratio per transform chain"),
        "{text}"
    );
    // The hot entries: each chain with the targets it transforms.
    let entry = text
        .lines()
        .find(|l| l.contains("[urlDecodeUni, lowercase] "))
        .unwrap_or_else(|| panic!("no hot entry for the deep chain: {text}"));
    assert!(
        entry.contains("ARGS") && entry.contains("REQUEST_COOKIES"),
        "{entry}"
    );
    let shared = text
        .lines()
        .find(|l| l.trim_end().contains("[urlDecodeUni] "))
        .unwrap_or_else(|| panic!("no hot entry for the shared prefix: {text}"));
    assert!(shared.contains("REQUEST_HEADERS:user-agent"), "{shared}");
    assert!(text.contains("rules without prefilter (1,"), "{text}");
    assert!(text.contains("@eq"), "{text}");
    assert!(text.contains("rules never matched"), "{text}");
    assert!(text.contains("rules.conf:5"), "rule locations: {text}");
    // Usage errors.
    assert_eq!(
        waf(&[
            "profile",
            "-c",
            s(&rules),
            "--corpus",
            s(&dir.join("none.jsonl"))
        ])
        .status
        .code(),
        Some(2)
    );
    assert_eq!(
        waf(&[
            "profile",
            "-c",
            s(&rules),
            "--corpus",
            s(&corpus),
            "--format",
            "xml"
        ])
        .status
        .code(),
        Some(2)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn json_has_chain_hit_ratios_and_rule_fields() {
    let dir = setup("json");
    let (rules, corpus) = (dir.join("rules.conf"), dir.join("corpus.jsonl"));
    let o = waf(&[
        "profile",
        "-c",
        s(&rules),
        "--corpus",
        s(&corpus),
        "--format",
        "json",
        "--passes",
        "2",
    ]);
    assert_success(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(v["requests"], 6);
    assert_eq!(v["corpus_requests"], 3);
    assert_eq!(v["passes"], 2);
    let sum = &v["summary"];
    let overall = sum["memo_hit_ratio"].as_f64().expect("memo_hit_ratio");
    assert!((0.0..=1.0).contains(&overall), "{sum}");
    assert!(sum["memo_lookups"].as_u64().unwrap_or(0) > 0, "{sum}");
    assert!(sum["prefilter_skip_rate"].is_number(), "{sum}");
    assert!(sum["xcache_hit_ratio"].is_number(), "{sum}");
    assert_eq!(sum["rules_without_prefilter"], 1, "{sum}");

    let chains = v["chains"].as_array().expect("chains");
    let chain = |text: &str| {
        chains
            .iter()
            .find(|c| c["text"] == text)
            .unwrap_or_else(|| panic!("no chain {text}: {chains:?}"))
    };
    let deep = chain("[urlDecodeUni, lowercase]");
    assert_eq!(
        deep["chain"],
        serde_json::json!(["urlDecodeUni", "lowercase"])
    );
    // Every value at the deep chain is computed there once per transaction.
    assert_eq!(deep["hit_ratio"], 0.0, "{deep}");
    assert_eq!(deep["lookups"], deep["misses"], "{deep}");
    // The shared prefix: rule 2's ARGS values were computed for rule 1.
    let mid = chain("[urlDecodeUni]");
    let hit = mid["hit_ratio"].as_f64().expect("hit ratio");
    assert!(hit > 0.0 && hit < 1.0, "{mid}");
    assert!(mid["computed"].as_u64().unwrap_or(0) > 0, "{mid}");
    for c in chains {
        assert!(
            c["hit_ratio"].is_null() || c["hit_ratio"].is_number(),
            "{c}"
        );
        for k in [
            "node", "lookups", "misses", "computed", "xcache", "bytes_in", "time_ns",
        ] {
            assert!(c[k].is_u64(), "{k} in {c}");
        }
    }

    let hot = v["hot_entries"].as_array().expect("hot_entries");
    assert!(!hot.is_empty());
    let targets: Vec<&str> = hot
        .iter()
        .find(|h| h["text"] == "[urlDecodeUni, lowercase]")
        .expect("hot deep chain")["targets"]
        .as_array()
        .expect("targets")
        .iter()
        .filter_map(|t| t["target"].as_str())
        .collect();
    assert!(targets.contains(&"ARGS"), "{targets:?}");

    let rules_json = v["rules"].as_array().expect("rules");
    assert_eq!(rules_json.len(), 4);
    let r1 = rules_json.iter().find(|r| r["id"] == 1).expect("rule 1");
    for k in ["time_share", "us_per_request", "prefilter_skip_rate"] {
        assert!(r1[k].is_number(), "{k} in {r1}");
    }
    for k in [
        "time_ns",
        "evaluations",
        "op_runs",
        "prefilter_skips",
        "matches",
    ] {
        assert!(r1[k].is_u64(), "{k} in {r1}");
    }
    assert_eq!(r1["evaluations"], 6);
    assert_eq!(r1["matches"], 2, "one request in each pass: {r1}");
    assert!(r1["location"]
        .as_str()
        .unwrap_or("")
        .ends_with("rules.conf:2"));
    assert_eq!(r1["msg"], "<script>alert(1)</script>");
    assert_eq!(r1["has_prefilter"], true);

    let nopf = v["rules_without_prefilter"].as_array().expect("list");
    assert_eq!(nopf[0]["id"], 3);
    assert_eq!(nopf[0]["operators"], serde_json::json!(["@eq"]));
    let never: Vec<u64> = v["rules_never_matched"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|r| r["id"].as_u64())
        .collect();
    assert!(never.contains(&4) && !never.contains(&1), "{never:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn html_is_self_contained_with_charts_and_escapes_untrusted_text() {
    let dir = setup("html");
    // A rule file whose name and a target selector carry markup.
    let evil = dir.join("<img onerror=x>.conf");
    std::fs::write(
        &evil,
        "SecRule REQUEST_HEADERS:<b>x \"@rx zzz\" \"id:9,phase:1,pass,t:none,t:urlDecodeUni,msg:'<script>alert(9)</script>'\"\n",
    )
    .expect("write");
    let (rules, corpus, html) = (
        dir.join("rules.conf"),
        dir.join("corpus.jsonl"),
        dir.join("report.html"),
    );
    let o = waf(&[
        "profile",
        "-c",
        s(&rules),
        s(&evil),
        "--corpus",
        s(&corpus),
        "--html",
        s(&html),
        "--top",
        "50",
    ]);
    assert_success(&o);
    // The table still goes to stdout.
    assert!(stdout(&o).contains("hot entries"));
    let page = std::fs::read_to_string(&html).expect("HTML written");
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.contains("<svg"), "charts are inline SVG");
    assert!(page.contains("<style>"), "inline CSS");
    for forbidden in [
        "http://", "https://", "src=", "href=", "@import", "url(http",
    ] {
        assert!(
            !page.contains(forbidden),
            "external reference `{forbidden}`"
        );
    }
    // Untrusted text: rule messages, selectors, file names.
    assert!(!page.contains("<script>alert"), "rule msg not escaped");
    assert!(
        page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "msg shown, escaped"
    );
    assert!(!page.contains("<img onerror"), "file name not escaped");
    assert!(page.contains("&lt;img onerror=x&gt;.conf"));
    assert!(!page.contains("<b>x"), "selector not escaped");
    // The parts of the page.
    for part in [
        "Time per rule",
        "Memo hit ratio per transform chain",
        "Hot entries",
        "Rules without prefilter",
        "Rules never matched",
        "[urlDecodeUni, lowercase]",
    ] {
        assert!(page.contains(part), "missing {part}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// CRS (`WAF_CRS_DIR`, default `../shared/crs`), a couple of requests: the
/// report is complete and consistent. Skipped without CRS.
#[test]
fn crs_profile() {
    let Some(crs) = waf_test_support::crs_dir("crs_profile") else {
        return;
    };
    let dir = setup("crs");
    let corpus = dir.join("corpus.jsonl");
    let o = waf(&[
        "profile",
        "-c",
        s(&crs.join("crs-setup.conf.example")),
        s(&crs.join("rules")),
        "--corpus",
        s(&corpus),
        "--format",
        "json",
        "--html",
        s(&dir.join("crs.html")),
    ]);
    assert_success(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let sum = &v["summary"];
    assert!(sum["rules_evaluated"].as_u64().unwrap_or(0) > 100, "{sum}");
    assert!(sum["memo_hit_ratio"].as_f64().unwrap_or(0.0) > 0.0, "{sum}");
    assert!(
        sum["rules_without_prefilter"].as_u64().unwrap_or(0) > 0,
        "{sum}"
    );
    assert!(!v["hot_entries"].as_array().expect("hot").is_empty());
    let matched: Vec<u64> = v["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .filter(|r| r["matches"].as_u64().unwrap_or(0) > 0)
        .filter_map(|r| r["id"].as_u64())
        .collect();
    // The SQL injection in request `a` is caught by some 942xxx rule.
    assert!(
        matched.iter().any(|id| (942000..943000).contains(id)),
        "{matched:?}"
    );
    let shares: f64 = v["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .filter_map(|r| r["time_share"].as_f64())
        .sum();
    assert!((shares - 1.0).abs() < 1e-6, "time shares sum to {shares}");
    let page = std::fs::read_to_string(dir.join("crs.html")).expect("HTML");
    assert!(page.contains("<svg") && !page.contains("https://"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn from_metrics_sums_instances_by_rule_id() {
    let dir = setup("metrics");
    let rules = dir.join("rules.conf");
    // What two `waf serve --profile` instances' /metrics would carry (other
    // metrics are ignored).
    let one = "# HELP waf_requests_total x\nwaf_requests_total 9\nwaf_profiled_requests_total 3\nwaf_engine_rules_evaluated_total 12\nwaf_rule_evaluations_total{rule_id=\"1\"} 3\nwaf_rule_matches_total{rule_id=\"1\"} 1\nwaf_rule_nanoseconds_total{rule_id=\"1\"} 3000\nwaf_rule_evaluations_total{rule_id=\"4\"} 3\nwaf_rule_nanoseconds_total{rule_id=\"4\"} 600\nwaf_phase_seconds_sum{phase=\"1\"} 0.001\n";
    let two = "waf_profiled_requests_total 2\nwaf_rule_evaluations_total{rule_id=\"1\"} 2\nwaf_rule_matches_total{rule_id=\"1\"} 2\nwaf_rule_nanoseconds_total{rule_id=\"1\"} 1000\nwaf_rule_evaluations_total{rule_id=\"99\"} 5\n";
    let (m1, m2) = (dir.join("a.prom"), dir.join("b.prom"));
    std::fs::write(&m1, one).expect("write");
    std::fs::write(&m2, two).expect("write");
    let o = waf(&[
        "profile",
        "-c",
        s(&rules),
        "--from-metrics",
        s(&m1),
        s(&m2),
        "--format",
        "json",
    ]);
    assert_success(&o);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("JSON");
    assert_eq!(v["requests"], 5);
    let rule = |id: u64| {
        v["rules"]
            .as_array()
            .and_then(|r| r.iter().find(|x| x["id"] == id))
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(rule(1)["evaluations"], 5);
    assert_eq!(rule(1)["matches"], 3);
    assert_eq!(rule(1)["time_ns"], 4000);
    assert_eq!(rule(4)["evaluations"], 3);
    assert_eq!(rule(2)["evaluations"], 0, "not in the metrics");
    // A file that is not metrics text, and no profiled requests, are usage errors.
    std::fs::write(&m2, "waf_rule_matches_total{rule_id=\"1\"} many\n").expect("write");
    assert_eq!(
        waf(&["profile", "-c", s(&rules), "--from-metrics", s(&m2)])
            .status
            .code(),
        Some(2)
    );
    std::fs::write(&m2, "waf_requests_total 1\n").expect("write");
    assert_eq!(
        waf(&["profile", "-c", s(&rules), "--from-metrics", s(&m2)])
            .status
            .code(),
        Some(2)
    );
}
