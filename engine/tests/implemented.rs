//! Every name the registry (`waf_compiler::names`) marks implemented has an
//! implementation, shown by running it; every other name says so at load.
//!
//! The tables below match on the name enums without a catch-all arm: a new
//! operator, transformation, action or variable does not compile here until
//! it has a case, and a case for a name marked unsupported (or none for one
//! marked implemented) fails the test.

use waf_compiler::diag::{Code, Severity};
use waf_compiler::ir::LinkAction;
use waf_compiler::names::{Action, Operator, Support, Transform, Variable};
use waf_compiler::{compile_str, Compiled, Options};
use waf_engine::{apply_transform, Ruleset};

/// Runs phase 1 on a request carrying `value` in the header `x-test` (and
/// `expected` in `x-expected`), and says whether rule 1 blocked it.
fn blocks(rules: &str, value: &[u8], expected: &[u8]) -> bool {
    let rs = Ruleset::from_str("implemented.conf", rules)
        .unwrap_or_else(|e| panic!("rules do not compile:\n{rules}\n{e}"));
    let mut tx = rs.transaction();
    tx.process_connection("10.1.2.3", 4000, "127.0.0.1", 80);
    tx.process_uri(b"/", b"GET", b"HTTP/1.1");
    tx.add_request_header(b"Host", b"example.com");
    tx.add_request_header(b"x-test", value);
    tx.add_request_header(b"x-expected", expected);
    tx.process_request_headers();
    tx.intervention().is_some_and(|i| i.rule_id == 1)
}

fn compile(text: &str) -> Compiled {
    compile_str("implemented.conf", text, &Options::default())
}

/// The `Suspicious` warnings and the errors of a compilation.
fn complaints(c: &Compiled) -> Vec<String> {
    c.diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error || d.code == Code::Suspicious)
        .map(|d| d.message.clone())
        .collect()
}

/// One operator's demonstration: its argument, a value it matches (`None`
/// for `@noMatch`), and one it does not (`None` for `@unconditionalMatch`).
struct OpCase {
    argument: String,
    matching: Option<&'static [u8]>,
    not_matching: Option<&'static [u8]>,
}

fn op_case(op: Operator, data: &std::path::Path) -> Option<OpCase> {
    use Operator as O;
    let c = |argument: &str, matching: &'static [u8], not_matching: &'static [u8]| {
        Some(OpCase {
            argument: argument.to_string(),
            matching: Some(matching),
            not_matching: Some(not_matching),
        })
    };
    match op {
        O::BeginsWith => c("abc", b"abcdef", b"xabc"),
        O::Contains => c("bcd", b"abcde", b"abd"),
        O::ContainsWord => c("select", b"a select b", b"selected"),
        O::DetectSqli => c("", b"1' or '1'='1", b"hello world"),
        O::DetectXss => c("", b"<script>alert(1)</script>", b"hello world"),
        O::EndsWith => c("xyz", b"abcxyz", b"xyza"),
        O::Eq => c("5", b"5", b"6"),
        O::Ge => c("5", b"5", b"4"),
        O::Gt => c("5", b"6", b"5"),
        O::Le => c("5", b"5", b"6"),
        O::Lt => c("5", b"4", b"5"),
        O::IpMatch => c("10.0.0.0/8", b"10.1.2.3", b"11.0.0.1"),
        O::IpMatchFromFile => c(
            &data.join("nets.txt").display().to_string(),
            b"10.1.2.3",
            b"11.0.0.1",
        ),
        O::Pm => c("foo bar", b"xxbarxx", b"baz"),
        O::PmFromFile => c(
            &data.join("words.txt").display().to_string(),
            b"xxbarxx",
            b"baz",
        ),
        O::Rx | O::RxGlobal => c("^a+b$", b"aaab", b"aaac"),
        O::Streq => c("abc", b"abc", b"abcd"),
        O::Strmatch => c("bcd", b"abcde", b"abd"),
        O::UnconditionalMatch => Some(OpCase {
            argument: String::new(),
            matching: Some(b"anything"),
            not_matching: None,
        }),
        O::NoMatch => Some(OpCase {
            argument: String::new(),
            matching: None,
            not_matching: Some(b"anything"),
        }),
        O::ValidateByteRange => c("97-122", b"abc!", b"abc"),
        O::ValidateUrlEncoding => c("", b"%zz", b"%41"),
        O::ValidateUtf8Encoding => c("", b"\xff", "é".as_bytes()),
        O::VerifyCc => c(r"\d{16}", b"4111111111111111", b"4111111111111112"),
        O::VerifyCpf => c(r"\d{11}", b"52998224725", b"52998224726"),
        O::VerifySsn => c(r"\d{9}", b"123456780", b"666123456"),
        O::VerifySvnr => c(r"\d{10}", b"1237010180", b"1238010180"),
        O::Within => c("abcdef", b"cde", b"xyz"),
        O::FuzzyHash
        | O::GeoLookup
        | O::GsbLookup
        | O::InspectFile
        | O::Rbl
        | O::Rsub
        | O::ValidateDtd
        | O::ValidateHash
        | O::ValidateSchema => None,
    }
}

fn operator_rule(op: Operator, argument: &str) -> String {
    let arg = if argument.is_empty() {
        String::new()
    } else {
        format!(" {argument}")
    };
    format!(
        "SecRule REQUEST_HEADERS:x-test \"@{}{arg}\" \"id:1,phase:1,t:none,deny\"\n",
        op.name()
    )
}

#[test]
fn every_implemented_operator_runs() {
    let data = std::env::temp_dir().join(format!("waf-implemented-{}", std::process::id()));
    std::fs::create_dir_all(&data).expect("temp dir");
    std::fs::write(data.join("nets.txt"), "10.0.0.0/8\n").expect("write");
    std::fs::write(data.join("words.txt"), "foo\nbar\n").expect("write");
    for &op in Operator::ALL {
        let case = op_case(op, &data);
        assert_eq!(
            case.is_some(),
            op.supported() == Support::Implemented,
            "@{}: a case exactly for the operators marked implemented",
            op.name()
        );
        match case {
            Some(case) => {
                let rules = operator_rule(op, &case.argument);
                assert!(complaints(&compile(&rules)).is_empty(), "@{}", op.name());
                if let Some(v) = case.matching {
                    assert!(blocks(&rules, v, b""), "@{} should match {v:?}", op.name());
                }
                if let Some(v) = case.not_matching {
                    assert!(
                        !blocks(&rules, v, b""),
                        "@{} should not match {v:?}",
                        op.name()
                    );
                }
            }
            None => {
                // Unsupported: loads, says so, never matches.
                let arg = match op.argument() {
                    waf_compiler::names::ArgKind::None => "",
                    _ => "x",
                };
                let rules = operator_rule(op, arg);
                let c = compile(&rules);
                assert!(
                    c.diagnostics.iter().any(|d| d.code == Code::Suspicious),
                    "@{} is unsupported and should be reported",
                    op.name()
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&data);
}

/// Inputs that transformations change; each transformation is shown on the
/// first one it changes.
const TRANSFORM_INPUTS: &[&[u8]] = &[
    b"  AB%41+c /*x*/ &#65; \\x41 0x41 \\\\a/../b\0 C:\\d ",
    b"QUJD",
    b"414243",
    b"\xc3\xa9\xe2\x82\xac",
    b"\xc1\xc2",
];

#[test]
fn every_implemented_transformation_runs() {
    for &t in Transform::ALL {
        assert_eq!(t.supported(), Support::Implemented, "t:{}", t.name());
        if t == Transform::None {
            continue;
        }
        let mut out = Vec::new();
        let input = TRANSFORM_INPUTS
            .iter()
            .copied()
            .find(|i| apply_transform(t, i, &mut out))
            .unwrap_or_else(|| panic!("t:{} changes none of the inputs", t.name()));
        apply_transform(t, input, &mut out);
        let rule = format!(
            "SecRule REQUEST_HEADERS:x-test \"@streq %{{REQUEST_HEADERS.x-expected}}\" \"id:1,phase:1,t:none,t:{},deny\"\n",
            t.name()
        );
        assert!(
            blocks(&rule, input, &out),
            "t:{} is not applied by the rule",
            t.name()
        );
        let without = rule.replace(&format!(",t:{}", t.name()), "");
        assert!(
            !blocks(&without, input, &out),
            "t:{}: the value matched without it",
            t.name()
        );
    }
}

/// A rule using `action` (and what else it needs), or `None` for the
/// actions marked unsupported or ignored (the audit-log ones among them:
/// there is no audit log in the engine).
fn action_rule(action: Action) -> Option<String> {
    use Action as A;
    let with = |a: &str| {
        Some(format!(
            "SecRule ARGS \"@rx x\" \"id:1,phase:2,{a}\"\nSecMarker M\n"
        ))
    };
    match action {
        A::Accuracy => with("pass,accuracy:5"),
        A::Allow => with("allow"),
        A::Block => with("block"),
        A::Capture => with("pass,capture"),
        A::Chain => Some(
            "SecRule ARGS \"@rx x\" \"id:1,phase:2,deny,chain\"\nSecRule ARGS \"@rx y\" \"t:none\"\n"
                .to_string(),
        ),
        A::Ctl => with("pass,ctl:ruleEngine=Off"),
        A::Deny => with("deny"),
        A::Drop => with("drop"),
        A::Id => with("pass"),
        A::InitCol => with("pass,initcol:ip=%{REMOTE_ADDR}"),
        A::ExpireVar => with("pass,initcol:ip=%{REMOTE_ADDR},expirevar:ip.x=60"),
        A::Log => with("pass,log"),
        A::LogData => with("pass,logdata:%{MATCHED_VAR}"),
        A::Maturity => with("pass,maturity:5"),
        A::Msg => with("pass,msg:m"),
        A::MultiMatch => with("pass,multiMatch"),
        A::NoLog => with("pass,nolog"),
        A::Pass => with("pass"),
        A::Phase => with("pass"),
        A::Redirect => with("redirect:http://example.com/"),
        A::Rev => with("pass,rev:1"),
        A::SetEnv => with("pass,setenv:a=b"),
        A::SetRsc => with("pass,setrsc:r"),
        A::SetSid => with("pass,setsid:s"),
        A::SetUid => with("pass,setuid:u"),
        A::SetVar => with("pass,setvar:tx.a=1"),
        A::Severity => with("pass,severity:2"),
        A::Skip => with("pass,skip:1"),
        A::SkipAfter => with("pass,skipAfter:M"),
        A::Status => with("deny,status:401"),
        A::T => with("pass,t:lowercase"),
        A::Tag => with("pass,tag:t"),
        A::Ver => with("pass,ver:1"),
        A::Append
        | A::AuditLog
        | A::NoAuditLog
        | A::DeprecateVar
        | A::Exec
        | A::Pause
        | A::Prepend
        | A::Proxy
        | A::SanitiseArg
        | A::SanitiseMatched
        | A::SanitiseMatchedBytes
        | A::SanitiseRequestHeader
        | A::SanitiseResponseHeader
        | A::XmlNs => None,
    }
}

#[test]
fn every_implemented_action_lowers_to_an_effect() {
    for &a in Action::ALL {
        let rule = action_rule(a);
        assert_eq!(
            rule.is_some(),
            a.supported() == Support::Implemented,
            "{}: a case exactly for the actions marked implemented",
            a.name()
        );
        let Some(rule) = rule else { continue };
        let c = compile(&rule);
        assert!(
            complaints(&c).is_empty(),
            "{}: {:?}",
            a.name(),
            complaints(&c)
        );
        let program = c.program.as_ref().expect("compiles");
        let ignored = program
            .rules
            .iter()
            .flat_map(|r| &r.links)
            .flat_map(|l| &l.actions)
            .any(|la| matches!(la, LinkAction::Ignored { action, .. } if *action == a));
        assert!(!ignored, "{} lowers to `Ignored`", a.name());
        // And it runs: a request through the rules does not fail.
        let rs = Ruleset::from_str("implemented.conf", &rule).expect("compiles");
        let mut tx = rs.transaction();
        tx.process_uri(b"/?a=x", b"GET", b"HTTP/1.1");
        tx.process_request_headers();
        tx.process_request_body();
    }
}

#[test]
fn unsupported_variables_are_reported_and_implemented_ones_are_not() {
    for &v in Variable::ALL {
        let rule = format!(
            "SecRule {} \"@unconditionalMatch\" \"id:1,phase:5,pass,nolog\"\n",
            v.name()
        );
        let c = compile(&rule);
        let reported = c
            .diagnostics
            .iter()
            .any(|d| d.code == Code::Suspicious && d.message.contains("not supported"));
        assert_eq!(
            reported,
            v.supported() == Support::Unsupported,
            "{}: {:?}",
            v.name(),
            complaints(&c)
        );
    }
}

#[test]
fn setsid_and_setuid_set_their_variables() {
    for (action, variable) in [("setsid", "SESSIONID"), ("setuid", "USERID")] {
        let rules = format!(
            "SecAction \"id:2,phase:1,pass,nolog,{action}:%{{REQUEST_HEADERS.x-test}}\"\n\
             SecRule {variable} \"@streq %{{REQUEST_HEADERS.x-expected}}\" \"id:1,phase:1,deny\"\n"
        );
        assert!(
            blocks(&rules, b"abc", b"abc"),
            "{action} does not set {variable}"
        );
        assert!(
            !blocks(&rules, b"abc", b"abd"),
            "{action}: {variable} matched another value"
        );
    }
}
