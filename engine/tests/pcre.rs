//! PCRE-only patterns under `WafPcreFallback On`: they run on PCRE2, a
//! search that reaches `SecPcreMatchLimit` does not match and sets
//! `TX:MSC_PCRE_LIMITS_EXCEEDED` (as ModSecurity v2 does, and as
//! `modsecurity.conf-recommended`'s rule 200005 expects), and the count of
//! such searches is in the transaction's stats.

use waf_engine::{EvalStats, Ruleset};

const RULES: &str = r#"
WafPcreFallback On
SecPcreMatchLimit 2000
SecRule REQUEST_HEADERS:x-test "@rx (?<=user=)admin\b" "id:1,phase:1,deny,status:403"
SecRule REQUEST_HEADERS:x-test "@rx ^(a|aa)+(?!b)c$" "id:2,phase:1,deny,status:406"
SecRule REQUEST_HEADERS:x-test "@rx (\w+)=\1" "id:3,phase:1,deny,status:409,capture,setvar:tx.word=%{tx.1}"
SecRule TX:MSC_PCRE_LIMITS_EXCEEDED "!@streq 0" "id:4,phase:1,deny,status:500,msg:'ModSecurity internal error flagged: %{MATCHED_VAR_NAME}'"
"#;

/// The status and rule of the intervention (if any), and the stats.
fn run(rs: &Ruleset, value: &[u8]) -> (Option<(u16, u64)>, EvalStats) {
    let mut tx = rs.transaction();
    tx.process_connection("10.1.2.3", 4000, "127.0.0.1", 80);
    tx.process_uri(b"/", b"GET", b"HTTP/1.1");
    tx.add_request_header(b"Host", b"example.com");
    tx.add_request_header(b"x-test", value);
    tx.process_request_headers();
    let i = tx.intervention().map(|i| (i.status, i.rule_id));
    (i, tx.stats())
}

#[test]
fn pcre_only_patterns_run_and_limits_are_flagged() {
    let rs = Ruleset::from_str("pcre.conf", RULES).expect("loads with the opt-in");
    assert_eq!(run(&rs, b"user=admin").0, Some((403, 1)), "lookbehind");
    assert_eq!(run(&rs, b"admin").0, None);
    assert_eq!(run(&rs, b"aaac").0, Some((406, 2)), "negative lookahead");
    assert_eq!(run(&rs, b"foo=foo").0, Some((409, 3)), "backreference");
    assert_eq!(run(&rs, b"foo=bar").0, None);
    // 2^n ways to split the a's before the final mismatch: the search ends
    // at the limit, the rule does not match, the flag is set and rule 4
    // sees it. Every time: the result is not cached across transactions.
    // (The `c` defeats PCRE2's required-character check.)
    let hostile = [&[b'a'; 48][..], b"xc"].concat();
    for _ in 0..3 {
        let (i, stats) = run(&rs, &hostile);
        assert_eq!(i, Some((500, 4)));
        assert_eq!(stats.pcre_limit_hits, 1);
    }
    let (_, stats) = run(&rs, b"benign value");
    assert_eq!(stats.pcre_limit_hits, 0);
}

#[test]
fn without_the_opt_in_they_do_not_load() {
    let err = Ruleset::from_str("pcre.conf", &RULES.replace("WafPcreFallback On", ""))
        .expect_err("PCRE-only patterns are load errors by default");
    let text = err.to_string();
    assert!(text.contains("unsupported-regex"), "{text}");
    assert!(
        text.contains("WafPcreFallback On"),
        "the hint names the opt-in: {text}"
    );
}
