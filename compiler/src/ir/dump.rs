//! Printing a [`Program`] (`waf compile --dump-ir`), as text for people and as JSON for tools.

use super::*;
use crate::rx::Strategy;
use serde_json::{json, Value};
use std::fmt::Write;

/// A target as SecLang writes it: `&ARGS`, `REQUEST_HEADERS:User-Agent`, `ARGS:/re/`.
pub fn target_text(p: &Program, t: &Target) -> String {
    let sel = match &t.selector {
        Selector::All => String::new(),
        Selector::Key(k) => format!(":{k}"),
        Selector::Regex(id) => format!(":/{}/", p.selector_regexes[id.index()].pattern),
        Selector::XPath(x) => format!(":{x}"),
    };
    format!(
        "{}{}{}",
        if t.count { "&" } else { "" },
        t.variable.name(),
        sel
    )
}

fn exclusion_text(p: &Program, e: &Exclusion) -> String {
    format!(
        "!{}",
        target_text(
            p,
            &Target {
                variable: e.variable,
                selector: e.selector.clone(),
                count: false
            }
        )
    )
}

fn chain_text(p: &Program, node: NodeId) -> String {
    let c = p.transforms.chain(node);
    if c.is_empty() {
        "none".into()
    } else {
        c.iter().map(|t| t.name()).collect::<Vec<_>>().join(",")
    }
}

fn prefilter_text(pf: &Prefilter) -> String {
    match pf {
        Prefilter::None => "none".into(),
        Prefilter::AnyOf(lits) => {
            let shown: Vec<String> = lits
                .iter()
                .take(6)
                .map(|l| format!("{:?}", String::from_utf8_lossy(l)))
                .collect();
            let more = if lits.len() > 6 {
                format!(" +{} more", lits.len() - 6)
            } else {
                String::new()
            };
            format!("any of [{}{}]", shown.join(", "), more)
        }
    }
}

fn operator_text(p: &Program, op: &Operator) -> String {
    let neg = if op.negated { "!" } else { "" };
    let arg = match &op.kind {
        OpKind::Rx(id) | OpKind::Verify { rx: id, .. } => {
            let rx = &p.regexes[id.index()];
            let how = match rx.strategy() {
                Strategy::FullDfa { bytes } => format!("full DFA {bytes} B"),
                Strategy::LazyDfa => "lazy DFA".into(),
                Strategy::Pending => "dense DFA pending".into(),
                Strategy::Backtracking => "PCRE2, backtracking".into(),
            };
            format!("rx#{} {:?} ({how})", id.0, rx.pattern())
        }
        OpKind::Pm(id) => {
            let set = &p.phrase_sets[id.index()];
            format!("pm#{} {} phrase(s)", id.0, set.phrases.len())
        }
        k if k.argument().is_some() => match k.argument() {
            Some(Arg::Const(s)) => format!("{s:?}"),
            Some(Arg::Macro(m)) => format!("{:?}", m.to_string()),
            None => String::new(),
        },
        OpKind::Strmatch(s) => format!("{s:?}"),
        OpKind::IpMatch(r) => format!("{} network(s)", r.len()),
        OpKind::ValidateByteRange(b) => serde_json::to_value(b)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        OpKind::Unsupported { argument } => format!("{argument:?} (unsupported)"),
        _ => String::new(),
    };
    format!("{neg}@{} {arg}", op.name.name())
        .trim_end()
        .to_string()
}

/// A readable listing: settings, the transform tree, then each phase's rules.
pub fn text(p: &Program) -> String {
    let mut s = String::new();
    let st = &p.settings;
    let _ = writeln!(
        s,
        "settings: rule_engine={:?} request_body_access={} response_body_access={} request_body_limit={} ({:?})",
        st.rule_engine, st.request_body_access, st.response_body_access, st.request_body_limit, st.request_body_limit_action
    );
    let _ = writeln!(
        s,
        "\ntransform tree ({} nodes):",
        p.transforms.nodes.len() - 1
    );
    for (i, n) in p.transforms.nodes.iter().enumerate().skip(1) {
        let parent = n.parent.map(|x| x.0).unwrap_or(0);
        let _ = writeln!(
            s,
            "  n{i} = n{parent} → {}",
            n.transform.map(|t| t.name()).unwrap_or("?")
        );
    }
    let _ = writeln!(s, "\nvalue slots ({}):", p.slots.len());
    for (i, slot) in p.slots.iter().enumerate() {
        let t = &p.targets[slot.target.index()];
        let _ = writeln!(
            s,
            "  s{i} = {} | n{} [{}]",
            target_text(p, t),
            slot.node.0,
            chain_text(p, slot.node)
        );
    }
    for (pi, phase) in p.phases.iter().enumerate() {
        let _ = writeln!(s, "\nphase {} ({} rules):", pi + 1, phase.rules.len());
        for (pos, ri) in phase.rules.iter().enumerate() {
            let r = p.rule(*ri);
            let _ = writeln!(
                s,
                "  [{pos}] id {} at {}: {:?}{}{}{}",
                r.id,
                r.location,
                r.disruptive,
                if r.via_block { " (block)" } else { "" },
                r.status.map(|x| format!(" status {x}")).unwrap_or_default(),
                if r.log { "" } else { " nolog" }
            );
            for (n, link) in r.links.iter().enumerate() {
                let op = &p.operators[link.operator.index()];
                let targets: Vec<String> =
                    link.targets.iter().map(|sl| format!("s{}", sl.0)).collect();
                let excl: Vec<String> = link
                    .exclusions
                    .iter()
                    .map(|e| exclusion_text(p, e))
                    .collect();
                let _ = writeln!(
                    s,
                    "      {} targets [{}]{} t:{} {} prefilter {}{}{}",
                    if n == 0 { "rule " } else { "chain" },
                    targets.join(" "),
                    if excl.is_empty() {
                        String::new()
                    } else {
                        format!(" except [{}]", excl.join(" "))
                    },
                    chain_text(p, link.transforms),
                    operator_text(p, op),
                    prefilter_text(&op.prefilter),
                    if link.capture { " capture" } else { "" },
                    if link.multi_match { " multiMatch" } else { "" },
                );
                for a in &link.actions {
                    let _ = writeln!(
                        s,
                        "            {}",
                        serde_json::to_string(a).unwrap_or_default()
                    );
                }
            }
            if let Some(f) = &r.flow {
                let _ = writeln!(s, "      flow {:?}", f);
            }
        }
    }
    let _ = writeln!(s, "\nmarkers ({}):", p.markers.len());
    for m in &p.markers {
        let _ = writeln!(s, "  {} resumes at {:?}", m.name, m.resume_at);
    }
    s
}

fn prefilter_json(pf: &Prefilter) -> Value {
    match pf {
        Prefilter::None => Value::Null,
        Prefilter::AnyOf(lits) => json!(lits
            .iter()
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .collect::<Vec<_>>()),
    }
}

/// The whole IR as JSON (ids are indices into the top-level arrays).
pub fn json(p: &Program) -> String {
    let operators: Vec<Value> = p
        .operators
        .iter()
        .map(|op| {
            let mut v = serde_json::to_value(op).unwrap_or(Value::Null);
            v["prefilter"] = prefilter_json(&op.prefilter);
            v
        })
        .collect();
    let regexes: Vec<Value> = p
        .regexes
        .iter()
        .map(|rx| {
            let strategy = match rx.strategy() {
                Strategy::FullDfa { bytes } => json!({"full_dfa_bytes": bytes}),
                Strategy::LazyDfa => json!("lazy_dfa"),
                Strategy::Pending => json!("pending"),
                Strategy::Backtracking => json!("backtracking"),
            };
            json!({"pattern": rx.pattern(), "strategy": strategy, "required_literals": prefilter_json(rx.required_literals())})
        })
        .collect();
    let phrase_sets: Vec<Value> = p
        .phrase_sets
        .iter()
        .map(|ps| json!({"phrases": ps.phrases, "files": ps.files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>()}))
        .collect();
    let doc = json!({
        "settings": p.settings,
        "phases": p.phases,
        "rules": p.rules,
        "markers": p.markers,
        "targets": p.targets,
        "selector_regexes": p.selector_regexes.iter().map(|r| r.pattern.clone()).collect::<Vec<_>>(),
        "transforms": p.transforms,
        "slots": p.slots,
        "operators": operators,
        "regexes": regexes,
        "phrase_sets": phrase_sets,
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}
