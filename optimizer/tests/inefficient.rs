//! The optimizer on `rulesets/inefficient.conf`, a ruleset written badly on
//! purpose: a snapshot of what `waf suggest` says about it, and, for every
//! rewrite kind, a replay of generated requests through the original and the
//! rewritten rules that must give the same decisions and matched rules.

use std::collections::BTreeMap;
use waf_compiler::Options;
use waf_engine::Ruleset;
use waf_optimizer::{edit, Analysis, Kind, Safety, Suggestion};
use waf_test_support::XorShift;

const NAME: &str = "rulesets/inefficient.conf";
const TEXT: &str = include_str!("../../rulesets/inefficient.conf");

fn analysis(text: &str) -> Analysis {
    let a = Analysis::text(NAME, text, &Options::default());
    assert!(
        a.program().is_some(),
        "{}",
        a.compiled.diagnostics.render(a.compiled.sources())
    );
    a
}

fn suggestions() -> (Analysis, Vec<Suggestion>) {
    let a = analysis(TEXT);
    let s = a.suggestions().into_iter().map(|(s, _)| s).collect();
    (a, s)
}

fn render(list: &[Suggestion]) -> String {
    let mut out = String::new();
    for s in list {
        out.push_str(&format!(
            "{} | {} | rule {} | {}\n  change: {}\n  why: {}\n  edits: {}\n",
            s.kind,
            s.safety.as_str(),
            s.rule_id,
            s.location,
            s.change,
            s.why,
            s.edits.len()
        ));
    }
    out
}

/// The text after applying `chosen`.
fn rewritten(a: &Analysis, chosen: &[&Suggestion]) -> String {
    let p = a.program().expect("compiled");
    let applied = edit::apply(&p.sources, chosen);
    assert!(
        applied.conflicts.is_empty(),
        "overlapping edits: {:?}",
        applied.conflicts
    );
    applied
        .files
        .values()
        .next()
        .cloned()
        .unwrap_or_else(|| TEXT.to_string())
}

#[test]
fn suggestions_snapshot() {
    let (_, list) = suggestions();
    insta::assert_snapshot!("suggestions", render(&list));
}

#[test]
fn every_kind_is_found() {
    let (_, list) = suggestions();
    for &k in Kind::ALL {
        assert!(
            list.iter().any(|s| s.kind == k),
            "no `{k}` suggestion on the inefficient ruleset:\n{}",
            render(&list)
        );
    }
}

#[test]
fn applying_every_equivalent_suggestion_diff_snapshot() {
    let (a, list) = suggestions();
    let chosen: Vec<&Suggestion> = list
        .iter()
        .filter(|s| s.safety == Safety::Equivalent && !s.edits.is_empty())
        .collect();
    let new = rewritten(&a, &chosen);
    insta::assert_snapshot!("apply_diff", edit::unified_diff(NAME, TEXT, &new));
    // The rewritten file compiles, and has nothing equivalent left to suggest
    // of the kinds that were applied.
    let again = analysis(&new);
    let left: Vec<Suggestion> = again
        .suggestions()
        .into_iter()
        .map(|(s, _)| s)
        .filter(|s| s.safety == Safety::Equivalent && !s.edits.is_empty())
        .collect();
    assert!(left.is_empty(), "still suggested:\n{}", render(&left));
}

// ---------------------------------------------------------------------------
// Decision preservation on generated requests.

/// Pieces the rules look for, spelled in ways the transformations change:
/// case, whitespace runs, percent-encoding, NULs.
const PIECES: &[&str] = &[
    "select",
    "SeLeCt",
    "union",
    "UNION",
    " ",
    "  ",
    "\t",
    "%20",
    "%09",
    "from",
    "FROM",
    "all",
    "select from",
    "UNION  ALL",
    "Union%09All",
    "SELECT\tFrom",
    "unionall",
    "<script",
    "<ScRiPt",
    "javascript:",
    "JavaScript:",
    "onerror=",
    "on error =",
    "onerror%3d",
    "__proto__",
    "__PROTO__",
    "constructor",
    "[prototype]",
    "[PROTOTYPE]",
    "../",
    "..%2f",
    "%00",
    "<?php",
    ".git/",
    "eval",
    "EVAL",
    "system",
    "passthru",
    "x=1--",
    "a = 12 --",
    "1<2",
    "3 > 4",
    "abc",
    "%",
    "+",
    "'",
    "=",
    "nikto/2",
    "SQLMAP/1",
    "masscan",
    "ZGrab",
    "zmeu",
    "Havij",
    "w3af",
    "%2e%2e/",
    "&#x41;",
];

fn value(rng: &mut XorShift) -> String {
    let n = 1 + rng.next_u64() % 5;
    (0..n).map(|_| *rng.pick(PIECES)).collect()
}

/// Percent-encodes what cannot go raw into a URI.
fn uri_escape(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b' ' | b'\t' | b'#' | b'&' | b'=' | b'?' => format!("%{b:02X}"),
            _ => (b as char).to_string(),
        })
        .collect()
}

struct Request {
    uri: String,
    headers: Vec<(String, String)>,
    body: String,
}

fn request(rng: &mut XorShift) -> Request {
    let path = *rng.pick(&[
        "/",
        "/index.php",
        "/.git/config",
        "/a/../etc/passwd",
        "/etc%252fpasswd",
        "/x.PHP",
    ]);
    let mut q = Vec::new();
    for i in 0..rng.next_u64() % 3 {
        q.push(format!("p{i}={}", uri_escape(&value(rng))));
    }
    let uri = if q.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{}", q.join("&"))
    };
    let mut headers = vec![
        ("Host".to_string(), "example.com".to_string()),
        ("User-Agent".to_string(), value(rng)),
    ];
    if rng.next_u64().is_multiple_of(2) {
        headers.push(("Referer".into(), format!(" {}", value(rng))));
    }
    if rng.next_u64().is_multiple_of(2) {
        headers.push(("Cookie".into(), format!("c={}", uri_escape(&value(rng)))));
    }
    let body = (0..rng.next_u64() % 3)
        .map(|i| format!("{}{i}={}", uri_escape(&value(rng)), uri_escape(&value(rng))))
        .collect::<Vec<_>>()
        .join("&");
    if !body.is_empty() {
        headers.push((
            "Content-Type".into(),
            "application/x-www-form-urlencoded".into(),
        ));
    }
    Request { uri, headers, body }
}

type Outcome = (Option<u16>, Vec<u64>);

fn outcome(rs: &Ruleset, r: &Request) -> Outcome {
    let mut tx = rs.transaction();
    tx.process_connection("10.0.0.1", 40000, "10.0.0.2", 80);
    tx.process_uri(r.uri.as_bytes(), b"POST", b"HTTP/1.1");
    for (k, v) in &r.headers {
        tx.add_request_header(k.as_bytes(), v.as_bytes());
    }
    tx.process_request_headers();
    if tx.intervention().is_none() {
        tx.append_request_body(r.body.as_bytes());
        tx.process_request_body();
    }
    (
        tx.intervention().map(|i| i.status),
        tx.matched_rules().map(|m| m.id).collect(),
    )
}

fn ruleset(text: &str) -> Ruleset {
    Ruleset::from_compiled(analysis(text).compiled).expect("compiled")
}

/// Applies the equivalent suggestions of `kind`, replays generated requests
/// through both rulesets, and returns how many requests matched at least
/// one rewritten rule (so a test can insist the inputs reached them).
fn replay_kind(kind: Kind) -> (usize, usize) {
    let (a, list) = suggestions();
    let chosen: Vec<&Suggestion> = list
        .iter()
        .filter(|s| s.kind == kind && s.safety == Safety::Equivalent && !s.edits.is_empty())
        .collect();
    assert!(
        !chosen.is_empty(),
        "no equivalent `{kind}` suggestion to apply"
    );
    let ids: Vec<u64> = chosen.iter().map(|s| s.rule_id).collect();
    let new = rewritten(&a, &chosen);
    assert_ne!(new, TEXT);
    let (before, after) = (ruleset(TEXT), ruleset(&new));
    let mut rng = XorShift::plain(0x2545_f491_4f6c_dd1d ^ kind as u64);
    let mut reached = 0;
    let n = 3000;
    for i in 0..n {
        let r = request(&mut rng);
        let (b, a) = (outcome(&before, &r), outcome(&after, &r));
        assert_eq!(
            b, a,
            "`{kind}` rewrite changed request {i}: uri {:?} headers {:?} body {:?}",
            r.uri, r.headers, r.body
        );
        reached += usize::from(b.1.iter().any(|id| ids.contains(id)));
    }
    (reached, n)
}

#[test]
fn regex_flag_rewrites_keep_decisions() {
    let (reached, n) = replay_kind(Kind::RegexFlag);
    assert!(
        reached > n / 50,
        "only {reached} of {n} requests reached the rule"
    );
}

#[test]
fn share_prefix_rewrites_keep_decisions() {
    let (reached, n) = replay_kind(Kind::SharePrefix);
    assert!(
        reached > n / 50,
        "only {reached} of {n} requests reached the rules"
    );
}

#[test]
fn redundant_transform_rewrites_keep_decisions() {
    let (reached, n) = replay_kind(Kind::RedundantTransform);
    assert!(
        reached > n / 50,
        "only {reached} of {n} requests reached the rules"
    );
}

#[test]
fn rx_to_pm_rewrites_keep_decisions() {
    let (reached, n) = replay_kind(Kind::RxToPm);
    assert!(
        reached > n / 50,
        "only {reached} of {n} requests reached the rules"
    );
}

/// The kinds that need review are not equivalent in general, and the
/// generated requests show it: applying them changes some outcome. (If this
/// ever finds no difference, the safety verdict may be too cautious, or the
/// inputs too weak.)
#[test]
fn review_kinds_can_change_decisions() {
    let (a, list) = suggestions();
    let mut differs: BTreeMap<Kind, bool> = BTreeMap::new();
    for kind in [Kind::MissingTNone, Kind::CheaperTarget] {
        let chosen: Vec<&Suggestion> = list
            .iter()
            .filter(|s| s.kind == kind && !s.edits.is_empty())
            .collect();
        assert!(chosen.iter().all(|s| s.safety == Safety::NeedsReview));
        let new = rewritten(&a, &chosen);
        let (before, after) = (ruleset(TEXT), ruleset(&new));
        let mut rng = XorShift::plain(0x9e37_79b9_7f4a_7c15 ^ kind as u64);
        let d = (0..3000).any(|_| {
            let r = request(&mut rng);
            outcome(&before, &r) != outcome(&after, &r)
        });
        differs.insert(kind, d);
    }
    assert!(differs.values().all(|&d| d), "{differs:?}");
}
