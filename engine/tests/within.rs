//! `@within` over a link's many values agrees with a search of each value
//! in the argument, whichever value is held and whatever its position:
//! from a link's third value on, values are first tested against the
//! argument's byte pairs (`operator::PairFilter`).

use waf_engine::Ruleset;

const LIST: &str = "/content-encoding/ /proxy/ /lock-token/ /content-range/ /if/";

/// Rules run before the one tested: none, one with the same list (its
/// pair filter is reused), one with another list (its filter must not be).
const BEFORE: [&str; 3] = [
    "",
    "SecRule ARGS \"@within /content-encoding/ /proxy/ /lock-token/ /content-range/ /if/\" \"id:3,phase:1,pass,nolog\"",
    "SecRule ARGS \"@within /user-agent/ /accept/ /zz/ /other-names-altogether/\" \"id:3,phase:1,pass,nolog\"",
];

/// Whether rule 1 blocks a GET whose arguments have these values, each
/// rule of `BEFORE` run first in turn (all must agree).
fn blocks(rule: &str, values: &[&str]) -> bool {
    let answers: Vec<bool> = BEFORE
        .iter()
        .map(|b| blocks_after(b, rule, values))
        .collect();
    assert!(
        answers.iter().all(|&a| a == answers[0]),
        "{rule} on {values:?}: {answers:?}"
    );
    answers[0]
}

fn blocks_after(before: &str, rule: &str, values: &[&str]) -> bool {
    let rules = format!(
        "SecRuleEngine On\n\
         SecAction \"id:2,phase:1,pass,nolog,setvar:'tx.list={LIST}'\"\n\
         {before}\n\
         {rule}\n"
    );
    let rs = Ruleset::from_str("within.conf", &rules).unwrap_or_else(|e| panic!("{e}"));
    let mut tx = rs.transaction();
    tx.process_connection("10.0.0.1", 40000, "127.0.0.1", 80);
    let query: Vec<String> = values
        .iter()
        .enumerate()
        .map(|(i, v)| format!("a{i}={}", v.replace(' ', "%20")))
        .collect();
    let uri = format!("/?{}", query.join("&"));
    tx.process_uri(uri.as_bytes(), b"GET", b"HTTP/1.1");
    tx.add_request_header(b"Host", b"example.com");
    tx.process_request_headers();
    tx.intervention().is_some_and(|i| i.rule_id == 1)
}

#[test]
fn within_over_many_values_agrees_with_a_search_per_value() {
    let held = ["/proxy/", "/if/", "lock-tok", "nt-r", "/ /"];
    let not_held = ["/user-agent/", "/accept/", "/proxy-x/", "/IF/", "zz"];
    for arg in [format!("@within {LIST}"), "@within %{tx.list}".to_string()] {
        let rule = format!("SecRule ARGS \"{arg}\" \"id:1,phase:1,deny,status:403\"");
        let negated = format!("SecRule ARGS \"!{arg}\" \"id:1,phase:1,deny,status:403\"");
        for h in held {
            for n in 0..=not_held.len() {
                // The held value first, in the middle or last.
                let mut values: Vec<&str> = not_held.iter().take(n).copied().collect();
                for at in 0..=values.len() {
                    let mut v = values.clone();
                    v.insert(at, h);
                    assert!(blocks(&rule, &v), "{rule} on {v:?}");
                }
                values.push(h);
            }
        }
        assert!(!blocks(&rule, &not_held), "{rule}");
        // Negated: a value not held matches.
        assert!(
            blocks(&negated, &["/proxy/", "/if/", "/accept/"]),
            "{negated}"
        );
        assert!(!blocks(&negated, &held), "{negated}");
    }
}
