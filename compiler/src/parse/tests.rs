use super::*;
use crate::source::SourceMap;

fn split(text: &str) -> (SourceMap, Vec<Directive>, Diagnostics) {
    let mut sm = SourceMap::new();
    let id = sm.add("t.conf", text.to_string());
    let mut diags = Diagnostics::new();
    let ds = directives(&sm, id, &mut diags);
    (sm, ds, diags)
}

fn text(s: &str) -> Text {
    Text::verbatim(FileId(0), 0, s)
}

#[test]
fn splits_directives_and_arguments() {
    let (_, ds, diags) =
        split("# comment\nSecRuleEngine On\n\n  SecRule ARGS \"@rx a b\" 'id:1'\n");
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(ds.len(), 2);
    assert_eq!(ds[0].name, "SecRuleEngine");
    assert_eq!(ds[0].args[0].value, "On");
    assert_eq!(
        ds[1]
            .args
            .iter()
            .map(|a| a.value.as_str())
            .collect::<Vec<_>>(),
        ["ARGS", "@rx a b", "id:1"]
    );
}

#[test]
fn keyword_prefix_is_not_a_match() {
    // The PEG trap: `SecRule` must not match the front of a longer directive name.
    let (_, ds, _) = split("SecRuleUpdateTargetById 1 \"!ARGS:x\"\nSecRuleRemoveById 5\n");
    assert_eq!(ds[0].name, "SecRuleUpdateTargetById");
    assert_eq!(ds[1].name, "SecRuleRemoveById");
}

#[test]
fn continuations_join_lines_inside_and_outside_quotes() {
    let src = "SecRule ARGS \\\n    \"@rx foo\" \\\n    \"id:1,\\\n    phase:2\"\n";
    let (_, ds, diags) = split(src);
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(ds.len(), 1);
    assert_eq!(ds[0].args[2].value, "id:1,    phase:2");
    // `phase` maps back to line 4.
    let at = ds[0].args[2].value.find("phase").unwrap();
    let span = ds[0].args[2].span_of(at..at + 5);
    assert_eq!(&src[span.range()], "phase");
}

#[test]
fn crlf_line_endings() {
    let (_, ds, diags) = split("SecRuleEngine On\r\nSecRule ARGS \"@rx x\" \\\r\n  \"id:1\"\r\n");
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(ds.len(), 2);
    assert_eq!(ds[1].args[2].value, "id:1");
}

#[test]
fn escaped_quotes_are_unescaped_other_backslashes_kept() {
    let (_, ds, _) = split(r#"SecRule ARGS "@rx a\"b\\c\d" "id:1,msg:'it\'s'""#);
    assert_eq!(ds[0].args[1].value, r#"@rx a"b\\c\d"#);
    let acts = actions(&ds[0].args[2], &mut Diagnostics::new());
    assert_eq!(acts[1].value.as_ref().unwrap().value, "it's");
}

#[test]
fn unterminated_string_is_reported_at_the_quote() {
    let (sm, ds, diags) = split("SecRule ARGS \"@rx foo\n");
    assert!(ds.is_empty());
    let d = diags.iter().next().unwrap();
    assert_eq!(d.code, Code::Syntax);
    assert_eq!(sm.location(d.span), "t.conf:1:14");
}

#[test]
fn text_glued_after_closing_quote() {
    let (_, ds, diags) = split("SecRule ARGS \"@rx foo\"\"id:1\"\n");
    assert!(ds.is_empty());
    assert!(diags
        .iter()
        .any(|d| d.message.contains("after a closing quote")));
}

#[test]
fn line_not_starting_with_a_name() {
    let (_, _, diags) = split("\"SecRule\" ARGS\n@rx\n");
    assert_eq!(diags.len(), 2);
}

#[test]
fn comment_continuation_warns_only_when_next_line_is_code() {
    let (_, _, diags) = split("# a \\\n# b\n");
    assert!(diags.is_empty());
    let (_, ds, diags) = split("# a \\\nSecRuleEngine On\n");
    assert_eq!(diags.len(), 1);
    assert_eq!(ds.len(), 1, "v3 reads the next line as a directive");
}

#[test]
fn no_trailing_newline_and_empty_input() {
    for src in [
        "",
        "\n",
        "   ",
        "SecRuleEngine On",
        "# x",
        "SecRuleEngine On \\",
    ] {
        let (_, _, _) = split(src);
    }
    let (_, ds, _) = split("SecRuleEngine On");
    assert_eq!(ds[0].args[0].value, "On");
}

#[test]
fn variables_with_selectors_exclusions_counts() {
    let t = text("ARGS|!ARGS:foo|&REQUEST_HEADERS:Host|REQUEST_COOKIES:/^_ga(?:_\\w+)?$/|XML:/*|XML://@*|TX:/^a|b/");
    let mut d = Diagnostics::new();
    let vs = variables(&t, &mut d);
    assert!(d.is_empty(), "{d:?}");
    let shown: Vec<String> = vs
        .iter()
        .map(|v| {
            format!(
                "{}{}{}{}",
                if v.exclude { "!" } else { "" },
                if v.count { "&" } else { "" },
                v.name,
                match &v.selector {
                    Some(s) if s.kind == SelectorKind::Regex => format!(":/{}/", s.text.value),
                    Some(s) => format!(":{}", s.text.value),
                    None => String::new(),
                }
            )
        })
        .collect();
    assert_eq!(
        shown,
        [
            "ARGS",
            "!ARGS:foo",
            "&REQUEST_HEADERS:Host",
            "REQUEST_COOKIES:/^_ga(?:_\\w+)?$/",
            "XML:/*",
            "XML://@*",
            "TX:/^a|b/",
        ]
    );
}

#[test]
fn bad_variable_is_reported() {
    let mut d = Diagnostics::new();
    let vs = variables(&text("ARGS|%%|TX"), &mut d);
    assert_eq!(vs.len(), 2);
    assert_eq!(d.len(), 1);
}

#[test]
fn operator_forms() {
    let mut d = Diagnostics::new();
    let op = operator(&text("!@rx ^a b $"), &mut d).unwrap();
    assert!(op.negated);
    assert_eq!(op.name, "rx");
    assert_eq!(
        op.argument.unwrap().value,
        "^a b $",
        "trailing space is significant"
    );
    let op = operator(&text("@detectSQLi"), &mut d).unwrap();
    assert_eq!(op.name, "detectSQLi");
    assert!(op.argument.is_none());
    let op = operator(&text("^foo$"), &mut d).unwrap();
    assert!(op.implicit);
    assert_eq!(op.argument.unwrap().value, "^foo$");
    let op = operator(&text("!bar"), &mut d).unwrap();
    assert!(op.implicit && op.negated);
    assert!(d.is_empty());
}

#[test]
fn action_lists() {
    let mut d = Diagnostics::new();
    let acts = actions(
        &text("id:1, phase:2,t:none,msg:'a, b',setvar:'tx.x=+%{tx.y}', ctl:ruleRemoveTargetByTag=x;ARGS:a, nolog,"),
        &mut d,
    );
    assert!(d.is_empty(), "{d:?}");
    let shown: Vec<(String, Option<String>)> = acts
        .iter()
        .map(|a| (a.name.clone(), a.value.as_ref().map(|v| v.value.clone())))
        .collect();
    assert_eq!(
        shown,
        [
            ("id".into(), Some("1".into())),
            ("phase".into(), Some("2".into())),
            ("t".into(), Some("none".into())),
            ("msg".into(), Some("a, b".into())),
            ("setvar".into(), Some("tx.x=+%{tx.y}".into())),
            ("ctl".into(), Some("ruleRemoveTargetByTag=x;ARGS:a".into())),
            ("nolog".into(), None),
        ]
    );
}

#[test]
fn unterminated_action_quote() {
    let mut d = Diagnostics::new();
    let acts = actions(&text("id:1,msg:'oops,phase:2"), &mut d);
    assert_eq!(acts.len(), 1);
    assert_eq!(
        d.iter().next().unwrap().message,
        "unterminated quoted action value"
    );
}

#[test]
fn id_lists() {
    let mut v = Vec::new();
    parse_id_list("1 2,10-20", &mut v).unwrap();
    assert_eq!(v, [(1, 1), (2, 2), (10, 20)]);
    assert!(parse_id_list("5-1", &mut v).is_err());
    assert!(parse_id_list("x", &mut v).is_err());
}
