//! Checking and lowering of actions.

use super::{macro_string, Lowerer};
use crate::ast::{ActionAst, RuleAst, Text};
use crate::diag::{closest, Code, Diagnostic};
use crate::ir::*;
use crate::names::{self, Action as A, ArgKind, Support, Transform};
use crate::source::Span;

/// A rule's disruptive action before `block` is resolved against the defaults.
#[derive(Clone, Debug)]
pub(super) enum DisruptiveChoice {
    Block,
    Action(Disruptive),
}

/// Per-link results of the actions.
#[derive(Clone, Debug, Default)]
pub(super) struct LinkBuilder {
    pub transforms: Vec<Transform>,
    /// `t:none` was given: the defaults' transformations do not apply.
    pub reset_transforms: bool,
    pub capture: bool,
    pub multi_match: bool,
    pub actions: Vec<LinkAction>,
}

/// Everything the actions of a rule (head and links) say.
#[derive(Debug)]
pub(super) struct RuleBuilder {
    pub id: Option<(u64, Span)>,
    pub phase: Option<u8>,
    pub disruptive: Option<DisruptiveChoice>,
    /// The last disruptive action other than `block` (what SecDefaultAction
    /// uses when `block` comes after it, as ModSecurity v3 does).
    pub last_action: Option<Disruptive>,
    pub status: Option<u16>,
    pub meta: Meta,
    pub log: Option<bool>,
    pub auditlog: Option<bool>,
    pub skip: Option<u32>,
    pub skip_after: Option<Text>,
    pub links: Vec<LinkBuilder>,
    /// Persistent collections the rule opens (`initcol`, `setsid`,
    /// `setuid`, `setrsc`), and its `setvar`s on persistent collections,
    /// each with the action's span (see `setvar_before_open`).
    pub opens: Vec<(names::Variable, Span)>,
    pub persistent_setvars: Vec<(names::Variable, Span)>,
}

impl RuleBuilder {
    pub fn new(_head: &RuleAst, links: usize) -> RuleBuilder {
        RuleBuilder {
            id: None,
            phase: None,
            disruptive: None,
            last_action: None,
            status: None,
            meta: Meta::default(),
            log: None,
            auditlog: None,
            skip: None,
            skip_after: None,
            links: vec![LinkBuilder::default(); links],
            opens: Vec::new(),
            persistent_setvars: Vec::new(),
        }
    }
}

impl RuleBuilder {
    fn set_disruptive(&mut self, choice: DisruptiveChoice) {
        if let DisruptiveChoice::Action(d) = &choice {
            self.last_action = Some(d.clone());
        }
        self.disruptive = Some(choice);
    }
}

/// Id, tags and msg of a rule as written, to select it for SecRuleUpdate*/Remove*.
pub(super) struct HeadMeta {
    pub id: Option<u64>,
    pub tags: Vec<String>,
    pub msg: Option<String>,
}

pub(super) fn head_meta(head: &RuleAst) -> HeadMeta {
    let value = |a: &ActionAst| a.value.as_ref().map(|v| v.value.clone());
    HeadMeta {
        id: head
            .action("id")
            .and_then(value)
            .and_then(|v| v.trim().parse().ok()),
        tags: head
            .actions
            .iter()
            .filter(|a| a.name.eq_ignore_ascii_case("tag"))
            .filter_map(value)
            .collect(),
        msg: head.action("msg").and_then(value),
    }
}

impl Lowerer<'_> {
    /// Warns about a `setvar` on a collection the same rule opens: a rule's
    /// `setvar`s run as it matches, its `initcol` (`setsid`, ...) after, as
    /// in ModSecurity v3 (v2 ran them in order), so the write goes to the
    /// collection an earlier rule opened, or nowhere. ModSecurity's issue
    /// tracker has this as "setvar never increments" (#3278).
    pub(super) fn setvar_before_open(&mut self, b: &RuleBuilder) {
        for &(coll, at) in &b.persistent_setvars {
            let Some(&(_, open)) = b.opens.iter().find(|(c, _)| *c == coll) else {
                continue;
            };
            let upper = coll.name();
            self.error(
                Diagnostic::warning(
                    Code::Suspicious,
                    at,
                    format!("this `setvar` runs before the rule opens {upper}"),
                )
                .with_label("runs as the rule matches, before its `initcol`")
                .with_related(open, format!("{upper} is opened here, after the rule's setvars"))
                .with_hint(format!(
                    "open {upper} in an earlier rule (ModSecurity v3 and this engine run a rule's setvars before its initcol: unless an earlier rule opened {upper}, the write is lost)"
                )),
            );
        }
    }

    /// Applies the actions of link `n` (0 = the rule itself) to `b`.
    pub(super) fn actions(&mut self, b: &mut RuleBuilder, n: usize, acts: &[&ActionAst]) {
        for a in acts {
            let Some(kind) = A::lookup(&a.name) else {
                let mut d = Diagnostic::error(
                    Code::UnknownAction,
                    a.name_span,
                    format!("unknown action `{}`", a.name),
                )
                .with_label("not a ModSecurity action");
                if let Some(c) = closest(&a.name, A::ALL.iter().map(|x| x.name())) {
                    d = d.with_hint(format!("did you mean `{c}`?"));
                }
                self.error(d);
                continue;
            };
            if kind.supported() == Support::Unsupported {
                self.error(
                    Diagnostic::warning(
                        Code::Suspicious,
                        a.name_span,
                        format!("`{}` is not supported by this engine", kind.name()),
                    )
                    .with_label("this action has no effect here")
                    .with_hint("see the list of unsupported actions in docs/architecture.md"),
                );
            }
            match (kind.value(), &a.value) {
                (ArgKind::Required, None) => {
                    self.error(
                        Diagnostic::error(
                            Code::BadArgument,
                            a.span,
                            format!("`{}` needs a value", kind.name()),
                        )
                        .with_hint(format!("write `{}:VALUE`", kind.name())),
                    );
                    continue;
                }
                (ArgKind::Required, Some(v))
                    if v.value.is_empty() && kind != A::Msg && kind != A::LogData =>
                {
                    self.error(
                        Diagnostic::error(
                            Code::BadArgument,
                            a.span,
                            format!("`{}` needs a value", kind.name()),
                        )
                        .with_hint(format!("write `{}:VALUE`", kind.name())),
                    );
                    continue;
                }
                (ArgKind::None, Some(v)) => {
                    self.error(
                        Diagnostic::error(
                            Code::BadArgument,
                            v.span(),
                            format!("`{}` takes no value", kind.name()),
                        )
                        .with_hint(format!("write just `{}`", kind.name())),
                    );
                    continue;
                }
                _ => {}
            }
            if n > 0 && !kind.allowed_in_chain_link() {
                self.error(
                    Diagnostic::error(Code::ActionInChainLink, a.name_span, format!("`{}` is not allowed in a chained rule", kind.name()))
                        .with_label("only the first rule of a chain may carry this")
                        .with_hint("move it to the rule that starts the chain: disruptive actions, phase, id and metadata belong there"),
                );
                continue;
            }
            let value = a.value.as_ref();
            let v = value.map(|t| t.value.trim()).unwrap_or("");
            let vspan = value.map(|t| t.span()).unwrap_or(a.span);
            match kind {
                A::Id => match v.parse::<u64>() {
                    Ok(id) if id > 0 => b.id = Some((id, vspan)),
                    _ => self.error(
                        Diagnostic::error(Code::BadArgument, vspan, format!("`{v}` is not a valid rule id"))
                            .with_hint("a rule id is a positive integer"),
                    ),
                },
                A::Phase => match names::parse_phase(v) {
                    Some(p) => b.phase = Some(p),
                    None => self.error(
                        Diagnostic::error(Code::BadArgument, vspan, format!("`{v}` is not a phase"))
                            .with_hint("phases are 1 to 5, or `request` (2), `response` (4), `logging` (5)"),
                    ),
                },
                A::T => self.transformation(&mut b.links[n], v, vspan),
                A::Msg => b.meta.msg = value.map(|t| macro_string(t, self.diags)),
                A::LogData => b.meta.logdata = value.map(|t| macro_string(t, self.diags)),
                A::Tag => b.meta.tags.push(v.to_string()),
                A::Ver => b.meta.ver = Some(v.to_string()),
                A::Rev => b.meta.rev = Some(v.to_string()),
                A::Severity => match names::Severity::parse(v) {
                    Some(s) => b.meta.severity = Some(s),
                    None => self.error(
                        Diagnostic::error(Code::BadArgument, vspan, format!("`{v}` is not a severity"))
                            .with_hint("use EMERGENCY, ALERT, CRITICAL, ERROR, WARNING, NOTICE, INFO, DEBUG or 0-7"),
                    ),
                },
                A::Maturity | A::Accuracy => match v.parse::<u8>() {
                    Ok(x) if x <= 9 => {
                        if kind == A::Maturity {
                            b.meta.maturity = Some(x)
                        } else {
                            b.meta.accuracy = Some(x)
                        }
                    }
                    _ => self.error(
                        Diagnostic::error(Code::BadArgument, vspan, format!("`{}` takes a number from 1 to 9", kind.name()))
                            .with_hint("e.g. `maturity:9`"),
                    ),
                },
                A::Block => b.set_disruptive(DisruptiveChoice::Block),
                A::Pass => b.set_disruptive(DisruptiveChoice::Action(Disruptive::Pass)),
                A::Deny => b.set_disruptive(DisruptiveChoice::Action(Disruptive::Deny)),
                A::Drop => b.set_disruptive(DisruptiveChoice::Action(Disruptive::Drop)),
                A::Allow => {
                    let scope = match v.to_ascii_lowercase().as_str() {
                        "" => Some(AllowScope::All),
                        "phase" => Some(AllowScope::Phase),
                        "request" => Some(AllowScope::Request),
                        _ => None,
                    };
                    match scope {
                        Some(s) => b.set_disruptive(DisruptiveChoice::Action(Disruptive::Allow(s))),
                        None => self.error(
                            Diagnostic::error(Code::BadArgument, vspan, format!("`allow:{v}` is not valid"))
                                .with_hint("use `allow`, `allow:phase` or `allow:request`"),
                        ),
                    }
                }
                A::Redirect | A::Proxy => {
                    if let Some(t) = value {
                        let m = macro_string(t, self.diags);
                        let d = if kind == A::Redirect { Disruptive::Redirect(m) } else { Disruptive::Proxy(m) };
                        b.set_disruptive(DisruptiveChoice::Action(d));
                    }
                }
                A::Pause => match v.parse::<u64>() {
                    Ok(ms) => b.set_disruptive(DisruptiveChoice::Action(Disruptive::Pause(ms))),
                    Err(_) => self.error(
                        Diagnostic::error(Code::BadArgument, vspan, "`pause` takes a number of milliseconds").with_hint("e.g. `pause:5000`"),
                    ),
                },
                A::Status => match v.parse::<u16>() {
                    Ok(s) if (100..=599).contains(&s) => b.status = Some(s),
                    _ => self.error(
                        Diagnostic::error(Code::BadArgument, vspan, format!("`{v}` is not an HTTP status"))
                            .with_hint("use a status code from 100 to 599, e.g. `status:403`"),
                    ),
                },
                A::Chain => {}
                A::Skip => match v.parse::<u32>() {
                    Ok(k) if k > 0 => b.skip = Some(k),
                    _ => self.error(
                        Diagnostic::error(Code::BadArgument, vspan, format!("`skip:{v}` needs a positive number of rules"))
                            .with_hint("e.g. `skip:1`; to jump to a marker use `skipAfter`"),
                    ),
                },
                A::SkipAfter => b.skip_after = value.map(Text::trimmed),
                A::Capture => b.links[n].capture = true,
                A::MultiMatch => b.links[n].multi_match = true,
                A::Log => b.log = Some(true),
                A::NoLog => {
                    b.log = Some(false);
                    b.auditlog = b.auditlog.or(Some(false));
                }
                A::AuditLog => b.auditlog = Some(true),
                A::NoAuditLog => b.auditlog = Some(false),
                A::SetVar => {
                    if let Some(t) = value {
                        if let Some(sv) = self.setvar(&t.trimmed()) {
                            if sv.collection.is_persistent() {
                                b.persistent_setvars.push((sv.collection, a.span));
                            }
                            b.links[n].actions.push(LinkAction::SetVar(sv));
                        }
                    }
                }
                A::Ctl => {
                    if let Some(t) = value {
                        if let Some(c) = self.ctl(&t.trimmed()) {
                            b.links[n].actions.push(LinkAction::Ctl(c));
                        }
                    }
                }
                A::InitCol => {
                    if let Some(t) = value {
                        if let Some((coll, key)) = self.collection_assignment(t, true) {
                            b.opens.push((coll, a.span));
                            b.links[n].actions.push(LinkAction::InitCol { collection: coll, key });
                        }
                    }
                }
                A::ExpireVar | A::DeprecateVar | A::SetEnv => {
                    if let Some(t) = value {
                        let (name, val) = split_assignment(t);
                        let name = macro_string(&name, self.diags);
                        let val = macro_string(&val, self.diags);
                        b.links[n].actions.push(match kind {
                            A::ExpireVar => LinkAction::ExpireVar { name, seconds: val },
                            A::DeprecateVar => LinkAction::DeprecateVar { name, value: val },
                            _ => LinkAction::SetEnv { name, value: val },
                        });
                    }
                }
                A::SetUid | A::SetSid | A::SetRsc => {
                    if let Some(t) = value {
                        let m = macro_string(t, self.diags);
                        let (action, opens) = match kind {
                            A::SetUid => (LinkAction::SetUid(m), names::Variable::User),
                            A::SetSid => (LinkAction::SetSid(m), names::Variable::Session),
                            _ => (LinkAction::SetRsc(m), names::Variable::Resource),
                        };
                        b.opens.push((opens, a.span));
                        b.links[n].actions.push(action);
                    }
                }
                // Accepted without effect (`Ignored`), or reported above
                // (`Unsupported`): named one by one, so that a new action
                // cannot land here unnoticed.
                A::Append
                | A::Exec
                | A::Prepend
                | A::SanitiseArg
                | A::SanitiseMatched
                | A::SanitiseMatchedBytes
                | A::SanitiseRequestHeader
                | A::SanitiseResponseHeader
                | A::XmlNs => {
                    if kind == A::XmlNs && !v.contains('=') {
                        // ModSecurity v3 rejects it ("XMLS: Bad format,
                        // missing equals sign").
                        self.error(
                            Diagnostic::error(Code::BadArgument, vspan, "`xmlns` needs `prefix=URI`")
                                .with_label("no `=` here")
                                .with_hint("e.g. `xmlns:soap=http://schemas.xmlsoap.org/soap/envelope/`"),
                        );
                    }
                    b.links[n].actions.push(LinkAction::Ignored {
                    action: kind,
                    value: value.map(|t| t.value.clone()),
                    })
                }
            }
        }
    }

    fn transformation(&mut self, link: &mut LinkBuilder, v: &str, vspan: Span) {
        match Transform::lookup(v) {
            Some(Transform::None) => {
                link.transforms.clear();
                link.reset_transforms = true;
            }
            Some(t) => link.transforms.push(t),
            None => {
                let mut d = Diagnostic::error(
                    Code::UnknownTransformation,
                    vspan,
                    format!("unknown transformation `{v}`"),
                )
                .with_label("not a ModSecurity transformation");
                if let Some(c) = closest(v, Transform::ALL.iter().map(|t| t.name())) {
                    d = d.with_hint(format!("did you mean `t:{c}`?"));
                }
                self.error(d);
            }
        }
    }

    /// `setvar:tx.name=value`, `=+`, `=-`, `!tx.name`.
    fn setvar(&mut self, t: &Text) -> Option<SetVar> {
        let s = t.as_str();
        let (delete, body) = match s.starts_with('!') {
            true => (true, t.slice(1..s.len())),
            false => (false, t.clone()),
        };
        let (lhs, rhs) = split_assignment(&body);
        let has_eq = body.value.contains('=');
        let lv = lhs.value.as_str();
        let Some((coll, _)) = lv.split_once('.') else {
            self.error(
                Diagnostic::error(Code::BadArgument, t.span(), format!("`setvar:{s}` names no collection"))
                    .with_hint("write `setvar:tx.name=value` (or `ip.`, `session.`, `user.`, `global.`, `resource.`)"),
            );
            return None;
        };
        let collection = self.collection_name(&lhs.slice(0..coll.len()))?;
        let name = macro_string(&lhs.slice(coll.len() + 1..lv.len()), self.diags);
        if name
            .parts
            .iter()
            .all(|p| matches!(p, MacroPart::Literal(l) if l.is_empty()))
        {
            self.error(
                Diagnostic::error(
                    Code::BadArgument,
                    t.span(),
                    "setvar without a variable name",
                )
                .with_hint("write `setvar:tx.name=value`"),
            );
            return None;
        }
        let op = if delete {
            SetVarOp::Delete
        } else if !has_eq {
            // ModSecurity sets a variable named without a value to "1".
            SetVarOp::Set(MacroString::literal("1"))
        } else if rhs.value.starts_with('+') {
            SetVarOp::Add(macro_string(&rhs.slice(1..rhs.value.len()), self.diags))
        } else if rhs.value.starts_with('-') {
            SetVarOp::Sub(macro_string(&rhs.slice(1..rhs.value.len()), self.diags))
        } else {
            SetVarOp::Set(macro_string(&rhs, self.diags))
        };
        let lowercase_literal = name
            .as_literal()
            .is_some_and(|n| !n.bytes().any(|b| b.is_ascii_uppercase()));
        Some(SetVar {
            collection,
            name,
            lowercase_literal,
            op,
            // Set once every selector regex is compiled (`Lower::finish`).
            key_selectors: KeySelectors::default(),
        })
    }

    fn collection_name(&mut self, t: &Text) -> Option<names::Variable> {
        match names::Variable::lookup(&t.value) {
            Some(v) if v.is_collection() => Some(v),
            Some(v) => {
                self.error(
                    Diagnostic::error(
                        Code::BadTarget,
                        t.span(),
                        format!("`{}` is not a collection", v.name()),
                    )
                    .with_hint("variables are set in TX, IP, SESSION, USER, GLOBAL or RESOURCE"),
                );
                None
            }
            None => {
                let mut d = Diagnostic::error(
                    Code::UnknownVariable,
                    t.span(),
                    format!("unknown collection `{}`", t.value),
                );
                if let Some(c) = closest(
                    &t.value,
                    ["TX", "IP", "SESSION", "USER", "GLOBAL", "RESOURCE"],
                ) {
                    d = d.with_hint(format!("did you mean `{c}`?"));
                }
                self.error(d);
                None
            }
        }
    }

    /// `initcol:ip=%{REMOTE_ADDR}`.
    fn collection_assignment(
        &mut self,
        t: &Text,
        persistent: bool,
    ) -> Option<(names::Variable, MacroString)> {
        let (lhs, rhs) = split_assignment(t);
        let coll = self.collection_name(&lhs.trimmed())?;
        if persistent && !coll.is_persistent() {
            self.error(
                Diagnostic::error(
                    Code::BadArgument,
                    lhs.span(),
                    format!("`{}` is not a persistent collection", coll.name()),
                )
                .with_hint("initcol opens IP, SESSION, USER, GLOBAL or RESOURCE"),
            );
            return None;
        }
        Some((coll, macro_string(&rhs, self.diags)))
    }

    /// `ctl:option=value`.
    fn ctl(&mut self, t: &Text) -> Option<Ctl> {
        let (lhs, rhs) = split_assignment(t);
        let name = lhs.value.trim();
        let Some(opt) = names::CtlOption::lookup(name) else {
            let mut d = Diagnostic::error(
                Code::UnknownAction,
                lhs.span(),
                format!("unknown ctl option `{name}`"),
            );
            if let Some(c) = closest(name, names::CtlOption::ALL.iter().map(|o| o.name())) {
                d = d.with_hint(format!("did you mean `ctl:{c}`?"));
            }
            self.error(d);
            return None;
        };
        if opt.supported() == Support::Unsupported {
            self.error(
                Diagnostic::warning(
                    Code::Suspicious,
                    lhs.span(),
                    format!("`ctl:{}` is not supported by this engine", opt.name()),
                )
                .with_label("this option has no effect here"),
            );
        }
        let v = rhs.value.trim();
        let vspan = rhs.span();
        let on_off = |this: &mut Self| -> Option<bool> {
            match v.to_ascii_lowercase().as_str() {
                "on" | "true" | "1" => Some(true),
                "off" | "false" | "0" => Some(false),
                _ => {
                    this.error(
                        Diagnostic::error(
                            Code::BadArgument,
                            vspan,
                            format!("`{v}` is not On or Off"),
                        )
                        .with_hint("use `On` or `Off`"),
                    );
                    None
                }
            }
        };
        let number = |this: &mut Self| -> Option<u64> {
            v.parse()
                .map_err(|_| {
                    this.error(
                        Diagnostic::error(
                            Code::BadArgument,
                            vspan,
                            format!("`{v}` is not a number"),
                        )
                        .with_hint("a size in bytes"),
                    )
                })
                .ok()
        };
        use names::CtlOption as C;
        Some(match opt {
            C::RuleEngine => Ctl::RuleEngine(self.engine_mode(v, vspan)?),
            C::RuleRemoveById => {
                let mut ids = Vec::new();
                if let Err(e) = crate::parse::parse_id_list(v, &mut ids) {
                    self.error(
                        Diagnostic::error(
                            Code::BadArgument,
                            vspan,
                            format!("invalid rule id list: {e}"),
                        )
                        .with_hint("e.g. `ctl:ruleRemoveById=920100-920199`"),
                    );
                    return None;
                }
                Ctl::RuleRemoveById(ids)
            }
            C::RuleRemoveByTag => Ctl::RuleRemoveByTag(v.to_string()),
            C::RuleRemoveByMsg => Ctl::RuleRemoveByMsg(v.to_string()),
            C::RuleRemoveTargetById | C::RuleRemoveTargetByTag | C::RuleRemoveTargetByMsg => {
                let Some(semi) = rhs.value.find(';') else {
                    self.error(
                        Diagnostic::error(
                            Code::BadArgument,
                            vspan,
                            format!("`ctl:{}` needs `RULES;TARGET`", opt.name()),
                        )
                        .with_hint("e.g. `ctl:ruleRemoveTargetById=942100;ARGS:password`"),
                    );
                    return None;
                };
                let which = rhs.value[..semi].trim().to_string();
                let target_text = rhs.slice(semi + 1..rhs.value.len()).trimmed();
                let target = self.exclusion_target(&target_text)?;
                match opt {
                    C::RuleRemoveTargetById => {
                        let mut ids = Vec::new();
                        if let Err(e) = crate::parse::parse_id_list(&which, &mut ids) {
                            self.error(
                                Diagnostic::error(
                                    Code::BadArgument,
                                    vspan,
                                    format!("invalid rule id list: {e}"),
                                )
                                .with_hint("e.g. `942100;ARGS:password`"),
                            );
                            return None;
                        }
                        Ctl::RuleRemoveTargetById { ids, target }
                    }
                    C::RuleRemoveTargetByTag => Ctl::RuleRemoveTargetByTag { tag: which, target },
                    _ => Ctl::RuleRemoveTargetByMsg { msg: which, target },
                }
            }
            C::RequestBodyProcessor => {
                let up = v.to_ascii_uppercase();
                if !matches!(up.as_str(), "URLENCODED" | "MULTIPART" | "XML" | "JSON") {
                    self.error(
                        Diagnostic::error(
                            Code::BadArgument,
                            vspan,
                            format!("unknown body processor `{v}`"),
                        )
                        .with_hint("use URLENCODED, MULTIPART, XML or JSON"),
                    );
                    return None;
                }
                Ctl::RequestBodyProcessor(up)
            }
            C::RequestBodyAccess => Ctl::RequestBodyAccess(on_off(self)?),
            C::ResponseBodyAccess => Ctl::ResponseBodyAccess(on_off(self)?),
            C::ForceRequestBodyVariable => Ctl::ForceRequestBodyVariable(on_off(self)?),
            C::RequestBodyLimit => Ctl::RequestBodyLimit(number(self)?),
            C::ResponseBodyLimit => Ctl::ResponseBodyLimit(number(self)?),
            C::AuditEngine => match AuditEngine::parse(v) {
                Some(m) => Ctl::AuditEngine(m),
                None => {
                    self.error(
                        Diagnostic::error(
                            Code::BadArgument,
                            vspan,
                            format!("`{v}` is not an audit engine mode"),
                        )
                        .with_hint("use On, Off or RelevantOnly"),
                    );
                    return None;
                }
            },
            C::AuditLogParts => match AuditPartsChange::parse(v) {
                Some(c) => Ctl::AuditLogParts(c),
                None => {
                    self.error(
                        Diagnostic::error(
                            Code::BadArgument,
                            vspan,
                            format!("`{v}` is not a set of audit log parts"),
                        )
                        .with_hint("use letters A to K and Z, e.g. `ABCFHZ`, `+E` or `-E`"),
                    );
                    return None;
                }
            },
            C::DebugLogLevel | C::HashEnforcement | C::HashEngine | C::ParseXmlIntoArgs => {
                Ctl::Ignored {
                    option: opt.name().to_string(),
                    value: v.to_string(),
                }
            }
        })
    }

    pub(super) fn engine_mode(&mut self, v: &str, span: Span) -> Option<EngineMode> {
        match v.to_ascii_lowercase().as_str() {
            "on" => Some(EngineMode::On),
            "off" => Some(EngineMode::Off),
            "detectiononly" => Some(EngineMode::DetectionOnly),
            _ => {
                self.error(
                    Diagnostic::error(
                        Code::BadArgument,
                        span,
                        format!("`{v}` is not a rule engine mode"),
                    )
                    .with_hint("use On, Off or DetectionOnly"),
                );
                None
            }
        }
    }
}

/// Splits `name=value` at the first `=` (value empty when there is none).
fn split_assignment(t: &Text) -> (Text, Text) {
    match t.value.find('=') {
        Some(i) => (t.slice(0..i), t.slice(i + 1..t.value.len())),
        None => (t.clone(), t.slice(t.value.len()..t.value.len())),
    }
}
