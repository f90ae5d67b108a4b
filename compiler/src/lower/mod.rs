//! Checking and lowering: [`Item`]s → [`Program`].
//!
//! One pass over the items in file order groups chains, checks every rule and
//! action, and builds the IR tables; a second step resolves markers and skips
//! to indices. `SecRuleRemove*`/`SecRuleUpdate*` are collected first, because
//! ModSecurity applies them to rules whatever their position (CRS updates its
//! rules from a file included after them).

mod actions;
mod operator;
mod settings;
mod targets;

use crate::ast::{ActionAst, Item, RuleAst, RuleKind, RuleRef, TargetAst, Text};
use crate::diag::{closest, Code, Diagnostic, Diagnostics};
use crate::ir::*;
use crate::load::Parsed;
use crate::names::{self, Transform};
use crate::rx::RxOptions;
use crate::source::{SourceMap, Span};
use std::collections::HashMap;

/// Compiler options.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// How `@rx` patterns are compiled (DFA size limits, strategies).
    pub rx: RxOptions,
    /// Where included and data files are read from (the disk by default).
    pub files: crate::files::Files,
    /// Regexes compiled ahead of time (a compiled artifact's), used instead
    /// of compiling the same patterns again.
    pub precompiled: Option<std::sync::Arc<crate::rx::Precompiled>>,
    /// Patterns already compiling (started before the files were parsed,
    /// when they are known in advance, as in an artifact); the others are
    /// compiled as usual.
    pub started: Option<std::sync::Arc<crate::rx::batch::Batch>>,
}

/// Where compile time went.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct Timings {
    /// Reading files and parsing them (pest grammar, AST).
    pub parse: std::time::Duration,
    /// Checks and IR construction, regex compilation included.
    pub lower: std::time::Duration,
    /// Of `lower`: compiling `@rx` patterns.
    pub regex: std::time::Duration,
}

/// The result of a compilation: the program when there was no error, and every finding.
#[derive(Debug)]
pub struct Compiled {
    /// Where compile time went.
    pub timings: Timings,
    /// The compiled program, when there was no error.
    pub program: Option<Program>,
    /// The sources, also when there is no program (to render diagnostics).
    pub sources_when_failed: Option<SourceMap>,
    /// Every finding, errors and warnings.
    pub diagnostics: Diagnostics,
}

impl Compiled {
    /// The files read (from the program, or kept for rendering when there is none).
    pub fn sources(&self) -> &SourceMap {
        match (&self.program, &self.sources_when_failed) {
            (Some(p), _) => &p.sources,
            (None, Some(s)) => s,
            (None, None) => unreachable_sources(),
        }
    }
}

impl Compiled {
    /// The program, or a [`CompileError`] carrying every diagnostic (and the
    /// sources to render them) when the configuration has errors.
    pub fn into_program(mut self) -> Result<Program, CompileError> {
        match self.program.take() {
            Some(p) => Ok(p),
            None => Err(CompileError(Box::new(self))),
        }
    }
}

/// A configuration that does not compile: its diagnostics (errors and
/// warnings), with the sources needed to render them.
///
/// `Display` renders every diagnostic as a terminal would show it
/// (`file:line:col`, the source line, a caret and a hint), so
/// `eprintln!("{err}")` is the whole report.
#[derive(Debug)]
pub struct CompileError(Box<Compiled>);

impl CompileError {
    /// Every diagnostic of the compilation (errors first-class, warnings too).
    pub fn diagnostics(&self) -> &Diagnostics {
        &self.0.diagnostics
    }

    /// The sources the diagnostics point into.
    pub fn sources(&self) -> &SourceMap {
        self.0.sources()
    }

    /// The number of errors (at least one).
    pub fn error_count(&self) -> usize {
        self.0.diagnostics.error_count()
    }

    /// The whole compilation (timings, diagnostics, sources).
    pub fn into_compiled(self) -> Compiled {
        *self.0
    }
}

impl std::fmt::Display for CompileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.diagnostics().render(self.sources()))?;
        write!(f, "the rules have {} error(s)", self.error_count())
    }
}

impl std::error::Error for CompileError {}

fn unreachable_sources() -> &'static SourceMap {
    static EMPTY: std::sync::OnceLock<SourceMap> = std::sync::OnceLock::new();
    EMPTY.get_or_init(SourceMap::new)
}

/// Compiles parsed items. Diagnostics of parsing in `diags` are kept.
pub fn lower(parsed: Parsed, opts: &Options, mut diags: Diagnostics) -> Compiled {
    let start = std::time::Instant::now();
    let Parsed { sources, items } = parsed;
    let mut l = Lowerer::new(&sources, opts, &mut diags);
    l.run(&items);
    let mut timings = l.timings;
    let mut program = l.finish();
    timings.lower = start.elapsed();
    diags.sort();
    if diags.has_errors() {
        return Compiled {
            timings,
            program: None,
            sources_when_failed: Some(sources),
            diagnostics: diags,
        };
    }
    program.sources = sources;
    Compiled {
        timings,
        program: Some(program),
        sources_when_failed: None,
        diagnostics: diags,
    }
}

/// What `SecDefaultAction` sets for one phase.
#[derive(Clone, Debug)]
struct Defaults {
    transforms: Vec<Transform>,
    disruptive: Disruptive,
    status: Option<u16>,
    log: Option<bool>,
    auditlog: Option<bool>,
    tags: Vec<String>,
}

/// `SecRuleUpdateTargetBy*`: selection, added targets, replaced targets, where, and whether it selected a rule.
type TargetUpdate<'a> = (
    &'a RuleRef,
    &'a [TargetAst],
    Option<&'a [TargetAst]>,
    Span,
    bool,
);

/// The updates that `SecRuleUpdate*`/`SecRuleRemove*` make, by target rule.
#[derive(Default)]
struct Updates<'a> {
    removes: Vec<(&'a RuleRef, Span, bool)>,
    targets: Vec<TargetUpdate<'a>>,
    actions: Vec<(&'a RuleRef, &'a [ActionAst], Span, bool)>,
}

struct Lowerer<'a> {
    sources: &'a SourceMap,
    opts: &'a Options,
    diags: &'a mut Diagnostics,
    p: Program,
    target_index: HashMap<Target, TargetId>,
    slot_index: HashMap<ValueSlot, SlotId>,
    rx_index: HashMap<String, RxId>,
    /// Patterns compiled ahead of the lowering pass, on every core
    /// ([`crate::rx::batch`]); [`Lowerer::regex`] takes them from here.
    rx_ready: Option<std::sync::Arc<crate::rx::batch::Batch>>,
    pm_index: HashMap<Vec<String>, PmId>,
    selector_rx_index: HashMap<String, SelectorRxId>,
    defaults: [Option<Defaults>; 5],
    ids: HashMap<u64, Span>,
    /// Global position of each lowered rule (index in `p.rules`) and whether it was removed.
    positions: Vec<(usize, bool)>,
    /// Markers as (name, span, global position).
    markers: Vec<(String, Span, usize)>,
    /// skipAfter requests: (rule index, marker name text).
    skip_afters: Vec<(usize, Text)>,
    /// Where `SecRequestBodyAccess On` was last set, unless set `Off` since.
    body_access_on: Option<Span>,
    timings: Timings,
}

impl<'a> Lowerer<'a> {
    fn new(sources: &'a SourceMap, opts: &'a Options, diags: &'a mut Diagnostics) -> Self {
        Lowerer {
            sources,
            opts,
            diags,
            p: Program {
                sources: SourceMap::new(),
                settings: Settings::default(),
                phases: Default::default(),
                rules: Vec::new(),
                markers: Vec::new(),
                targets: Vec::new(),
                transforms: TransformTree::default(),
                slots: Vec::new(),
                operators: Vec::new(),
                regexes: Vec::new(),
                phrase_sets: Vec::new(),
                selector_regexes: Vec::new(),
            },
            target_index: HashMap::new(),
            slot_index: HashMap::new(),
            rx_index: HashMap::new(),
            rx_ready: None,
            pm_index: HashMap::new(),
            selector_rx_index: HashMap::new(),
            defaults: Default::default(),
            ids: HashMap::new(),
            positions: Vec::new(),
            markers: Vec::new(),
            skip_afters: Vec::new(),
            body_access_on: None,
            timings: Timings::default(),
        }
    }

    fn error(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    fn run(&mut self, items: &[Item]) {
        self.precompile_regexes(items);
        let mut updates = Updates::default();
        for item in items {
            match item {
                // Whatever its position, the setting decides how every
                // pattern compiles (as `SecPcreMatchLimit` applies to all):
                // read it before the rules. `setting` checks its argument
                // (and sets it again, or leaves it off when it is invalid).
                Item::Setting {
                    directive: names::Directive::WafPcreFallback,
                    args,
                    ..
                } => {
                    if let Some(a) = args.first() {
                        self.p.settings.pcre_fallback = a.value.trim().eq_ignore_ascii_case("on");
                    }
                }
                Item::Remove { by, span } => updates.removes.push((by, *span, false)),
                Item::UpdateTarget {
                    by,
                    targets,
                    replaced,
                    span,
                } => updates
                    .targets
                    .push((by, targets, replaced.as_deref(), *span, false)),
                Item::UpdateAction { by, actions, span } => {
                    for a in actions.iter() {
                        if let Some(k) = names::Action::lookup(&a.name) {
                            if matches!(
                                k,
                                names::Action::Id | names::Action::Phase | names::Action::Chain
                            ) {
                                self.error(
                                    Diagnostic::error(Code::BadArgument, a.span, format!("`{}` cannot be changed by SecRuleUpdateActionById", k.name()))
                                        .with_hint("write a new rule instead; ids, phases and chains are fixed when a rule is defined"),
                                );
                            }
                        }
                    }
                    updates.actions.push((by, actions, *span, false))
                }
                _ => {}
            }
        }

        let mut i = 0;
        while i < items.len() {
            let pos = i;
            match &items[i] {
                Item::Rule(head) => {
                    // Gather the chain: every link with `chain` pulls in the next SecRule.
                    let mut links: Vec<&RuleAst> = vec![head];
                    let mut dangling = None;
                    while let Some(chain) = links.last().and_then(|r| r.action("chain")) {
                        match items.get(i + 1) {
                            Some(Item::Rule(next)) if next.kind == RuleKind::SecRule => {
                                links.push(next);
                                i += 1;
                            }
                            None => {
                                // ModSecurity v3 loads a chain on the last
                                // rule; the rule then never matches.
                                self.error(
                                    Diagnostic::warning(Code::CompatDanglingChain, chain.span, "`chain` with no rule after it")
                                        .with_label("the configuration ends here: this rule never matches (as in ModSecurity v3)")
                                        .with_hint("add the chained SecRule right after this one, or remove `chain`"),
                                );
                                dangling = Some(chain.span);
                                break;
                            }
                            Some(other) => {
                                // v3 would chain the next SecRule even
                                // across other directives; that is never
                                // what a rule author meant.
                                let d = Diagnostic::error(Code::DanglingChain, chain.span, "`chain` with no rule after it")
                                    .with_label("this rule chains to the next SecRule, but there is none")
                                    .with_hint("add the chained SecRule right after this one, or remove `chain`")
                                    .with_related(other.span(), "this follows instead");
                                self.error(d);
                                break;
                            }
                        }
                    }
                    let before = self.p.rules.len();
                    self.rule(&links, pos, &mut updates);
                    if let (Some(span), true) = (dangling, self.p.rules.len() > before) {
                        self.never_matching_link(span);
                    }
                }
                Item::DefaultAction { actions, span } => self.default_action(actions, *span),
                Item::Marker { name, span } => {
                    if name.value.is_empty() {
                        self.error(
                            Diagnostic::error(Code::BadArgument, *span, "SecMarker needs a name")
                                .with_hint("usage: SecMarker NAME"),
                        );
                    } else if let Some((_, first, _)) =
                        self.markers.iter().find(|m| m.0 == name.value)
                    {
                        let first = *first;
                        self.error(
                            Diagnostic::warning(Code::Suspicious, name.span(), format!("marker `{}` is defined twice", name.value))
                                .with_label("defined again here")
                                .with_related(first, "first defined here")
                                .with_hint("skipAfter jumps to the first definition after the rule; give markers unique names"),
                        );
                    }
                    self.markers.push((name.value.clone(), name.span(), pos));
                }
                Item::Setting {
                    directive,
                    args,
                    span,
                } => self.setting(*directive, args, *span),
                Item::Remove { .. } | Item::UpdateTarget { .. } | Item::UpdateAction { .. } => {}
            }
            i += 1;
        }

        self.unchecked_body_errors();
        for (by, span, used) in &updates.removes {
            if !used {
                self.unused_ref(by, *span);
            }
        }
        for (by, _, _, span, used) in &updates.targets {
            if !used {
                self.unused_ref(by, *span);
            }
        }
        for (by, _, span, used) in &updates.actions {
            if !used {
                self.unused_ref(by, *span);
            }
        }
    }

    /// Request bodies are inspected (`SecRequestBodyAccess On`) and rules
    /// read what the body processors make of them, but no rule reads
    /// `REQBODY_ERROR`: a body its processor cannot read (a multipart
    /// `Content-Type` with `charset=` before `boundary=`, or `BOUNDARY=`,
    /// both of which applications' parsers take; broken JSON or XML) then
    /// reaches the application with none of its values inspected. That is
    /// why ModSecurity's recommended configuration denies it (its rule
    /// 200002); CRS does not, and expects the engine's configuration to.
    fn unchecked_body_errors(&mut self) {
        use names::Variable as V;
        let Some(on) = self.body_access_on else {
            return;
        };
        let mut reads_body = false;
        for (ri, rule) in self.p.rules.iter().enumerate() {
            if self.positions.get(ri).is_some_and(|p| p.1) {
                continue;
            }
            for slot in rule.links.iter().flat_map(|l| &l.targets) {
                let target = &self.p.targets[self.p.slots[slot.index()].target.index()];
                match target.variable {
                    V::ReqbodyError | V::ReqbodyProcessorError => return,
                    V::Args
                    | V::ArgsNames
                    | V::ArgsPost
                    | V::ArgsPostNames
                    | V::RequestBody
                    | V::Files
                    | V::FilesNames
                    | V::Xml => reads_body = true,
                    _ => {}
                }
            }
        }
        if reads_body {
            self.error(
                Diagnostic::warning(Code::Suspicious, on, "request bodies are inspected, but no rule refuses one that cannot be parsed")
                    .with_label("a body its parser rejects (a multipart `Content-Type` with `charset=` before `boundary=`, broken JSON) reaches the application uninspected")
                    .with_hint("deny on the parser's error as ModSecurity's recommended configuration does: SecRule REQBODY_ERROR \"!@eq 0\" \"id:200002,phase:2,t:none,log,deny,status:400,msg:'Failed to parse request body.'\""),
            );
        }
    }

    fn unused_ref(&mut self, by: &RuleRef, span: Span) {
        let (what, at) = match by {
            RuleRef::Ids(ranges, at) => {
                let list: Vec<String> = ranges
                    .iter()
                    .map(|&(a, b)| {
                        if a == b {
                            a.to_string()
                        } else {
                            format!("{a}-{b}")
                        }
                    })
                    .collect();
                let what = match ranges.as_slice() {
                    [(a, b)] if a == b => format!("no rule has id {a}"),
                    _ => format!("no rule has an id in {}", list.join(" ")),
                };
                (what, *at)
            }
            RuleRef::Tag(t) => (format!("no rule has the tag `{}`", t.value), t.span()),
            RuleRef::Msg(m) => (format!("no rule has the msg `{}`", m.value), m.span()),
        };
        let at = if at == Span::default() { span } else { at };
        self.error(
            Diagnostic::warning(Code::UnknownRuleRef, at, format!("this directive changes no rule: {what}"))
                .with_label("selects nothing")
                .with_hint("check the id, tag or message (rules are matched wherever they are defined); the directive has no effect"),
        );
    }

    /// Lowers one rule and its chain links.
    fn rule(&mut self, links: &[&RuleAst], pos: usize, updates: &mut Updates<'_>) {
        let head = links[0];
        let meta = actions::head_meta(head);
        // Apply pending updates that select this rule.
        let select = |r: &RuleRef| match r {
            RuleRef::Ids(..) => meta.id.is_some_and(|id| r.matches_id(id)),
            RuleRef::Tag(t) => meta.tags.iter().any(|tag| tag == &t.value),
            RuleRef::Msg(m) => meta.msg.as_deref() == Some(m.value.as_str()),
        };
        let mut removed = false;
        for (by, _, used) in updates.removes.iter_mut() {
            if select(by) {
                *used = true;
                removed = true;
            }
        }
        let mut extra_actions: Vec<&ActionAst> = Vec::new();
        for (by, acts, _, used) in updates.actions.iter_mut() {
            if select(by) {
                *used = true;
                extra_actions.extend(acts.iter());
            }
        }
        let mut extra_targets: Vec<(&TargetAst, Option<&[TargetAst]>)> = Vec::new();
        for (by, ts, replaced, _, used) in updates.targets.iter_mut() {
            if select(by) {
                *used = true;
                for t in ts.iter() {
                    extra_targets.push((t, *replaced));
                }
            }
        }

        let mut b = actions::RuleBuilder::new(head, links.len());
        // Head actions first, then SecRuleUpdateActionById's (which override).
        let head_actions: Vec<&ActionAst> = head.actions.iter().chain(extra_actions).collect();
        self.actions(&mut b, 0, &head_actions);
        for (n, link) in links.iter().enumerate().skip(1) {
            let acts: Vec<&ActionAst> = link.actions.iter().collect();
            self.actions(&mut b, n, &acts);
        }
        self.setvar_before_open(&b);

        // id and phase checks (SecRule and SecAction heads).
        let id = match b.id {
            Some((id, span)) => {
                if let Some(first) = self.ids.get(&id) {
                    let first = *first;
                    self.error(
                        Diagnostic::error(
                            Code::DuplicateId,
                            span,
                            format!("duplicate rule id {id}"),
                        )
                        .with_label("this id is already used")
                        .with_related(first, "first used here")
                        .with_hint("every SecRule and SecAction needs a unique id"),
                    );
                } else {
                    self.ids.insert(id, span);
                }
                id
            }
            // An `id` whose value is invalid was reported where it is written.
            None if head.action("id").is_some() => 0,
            None => {
                let kind = if head.kind == RuleKind::SecAction {
                    "SecAction"
                } else {
                    "SecRule"
                };
                self.error(
                    Diagnostic::error(Code::MissingId, head.actions_span, format!("{kind} without an `id`"))
                        .with_label("no `id` action here")
                        .with_hint("add `id:N` with a number unique in the configuration (CRS reserves 900000-999999)"),
                );
                0
            }
        };
        let phase = match b.phase {
            Some(p) => p,
            // A `phase` whose value is invalid was reported where it is written,
            // and a misspelt action (`phse:2`) may well be the phase.
            None if head.action("phase").is_some()
                || head
                    .actions
                    .iter()
                    .any(|a| names::Action::lookup(&a.name).is_none()) =>
            {
                2
            }
            None => {
                let rule = if b.id.is_some() {
                    format!("rule {id}")
                } else {
                    "this rule".to_string()
                };
                self.error(
                    Diagnostic::warning(Code::MissingPhase, head.actions_span, format!("{rule} has no `phase`"))
                        .with_label("no `phase` action here")
                        .with_hint("add `phase:N`; without it ModSecurity runs the rule in phase 2 (request body)"),
                );
                2
            }
        };

        // Defaults of the phase apply where the rule is silent.
        let defaults = self.defaults[usize::from(phase) - 1].clone();
        let mut rule_links = Vec::with_capacity(links.len());
        for (n, link) in links.iter().enumerate() {
            let lb = &b.links[n];
            let chain: Vec<Transform> = match (&defaults, lb.reset_transforms) {
                (Some(d), false) => d
                    .transforms
                    .iter()
                    .copied()
                    .chain(lb.transforms.iter().copied())
                    .collect(),
                _ => lb.transforms.clone(),
            };
            let node = self.p.transforms.intern(&chain);
            let (targets, exclusions) = if link.kind == RuleKind::SecAction {
                (Vec::new(), Vec::new())
            } else {
                let extra: &[(&TargetAst, Option<&[TargetAst]>)] =
                    if n == 0 { &extra_targets } else { &[] };
                self.targets(link, extra, node, phase)
            };
            let operator = match &link.operator {
                Some(op) => self.operator(op, link),
                None => self.unconditional(link.span),
            };
            rule_links.push(Link {
                span: link.span,
                targets,
                exclusions,
                transforms: node,
                operator,
                capture: lb.capture,
                multi_match: lb.multi_match,
                actions: lb.actions.clone(),
            });
        }

        let (disruptive, via_block) = match (&b.disruptive, &defaults) {
            (Some(actions::DisruptiveChoice::Block), Some(d)) => (d.disruptive.clone(), true),
            (Some(actions::DisruptiveChoice::Block), None) => (Disruptive::Pass, true),
            (Some(actions::DisruptiveChoice::Action(a)), _) => (a.clone(), false),
            (None, Some(d)) => (d.disruptive.clone(), false),
            (None, None) => (Disruptive::Pass, false),
        };
        let mut meta = b.meta;
        if let Some(d) = &defaults {
            for t in &d.tags {
                if !meta.tags.contains(t) {
                    meta.tags.push(t.clone());
                }
            }
        }
        let rule = Rule {
            id,
            phase,
            span: head.span,
            location: {
                let f = self.sources.file(head.span.file);
                format!("{}:{}", f.name(), f.line_col(head.span.start as usize).line)
            },
            links: rule_links,
            disruptive,
            via_block,
            status: b.status.or(defaults.as_ref().and_then(|d| d.status)),
            meta,
            log: b
                .log
                .or(defaults.as_ref().and_then(|d| d.log))
                .unwrap_or(true),
            auditlog: b
                .auditlog
                .or(defaults.as_ref().and_then(|d| d.auditlog))
                .unwrap_or(true),
            flow: b.skip.map(|count| Flow::Skip {
                count,
                resume_at: 0,
            }),
            unconditional: head.kind == RuleKind::SecAction,
        };
        let index = self.p.rules.len();
        if let Some(marker) = b.skip_after {
            self.skip_afters.push((index, marker));
        }
        self.p.rules.push(rule);
        self.positions.push((pos, removed));
    }

    fn unconditional(&mut self, span: Span) -> OpId {
        self.push_operator(Operator {
            name: names::Operator::UnconditionalMatch,
            kind: OpKind::UnconditionalMatch,
            negated: false,
            prefilter: Prefilter::None,
            span,
        })
    }

    /// `name` as a path: absolute as written, else relative to the
    /// directory of the file `arg` is written in (data files, the unicode
    /// map).
    fn beside_rule_file(&self, arg: &Text, name: &str) -> std::path::PathBuf {
        let dir = self.sources.file(arg.span().file).path.parent();
        dir.map(std::path::Path::to_path_buf)
            .unwrap_or_default()
            .join(name)
    }

    /// Appends to the last rule a link that reads nothing and never matches
    /// (what a `chain` with no rule after it leaves in ModSecurity v3).
    fn never_matching_link(&mut self, span: Span) {
        let operator = self.push_operator(Operator {
            name: names::Operator::NoMatch,
            kind: OpKind::NoMatch,
            negated: false,
            prefilter: Prefilter::None,
            span,
        });
        if let Some(rule) = self.p.rules.last_mut() {
            rule.links.push(Link {
                span,
                targets: Vec::new(),
                exclusions: Vec::new(),
                transforms: self.p.transforms.intern(&[]),
                operator,
                capture: false,
                multi_match: false,
                actions: Vec::new(),
            });
        }
    }

    fn push_operator(&mut self, op: Operator) -> OpId {
        self.p.operators.push(op);
        OpId((self.p.operators.len() - 1) as u32)
    }

    fn default_action(&mut self, acts: &[ActionAst], span: Span) {
        let head = RuleAst {
            kind: RuleKind::SecAction,
            span,
            targets: Vec::new(),
            operator: None,
            actions: acts.to_vec(),
            actions_span: span,
        };
        let mut b = actions::RuleBuilder::new(&head, 1);
        let refs: Vec<&ActionAst> = acts.iter().collect();
        self.actions(&mut b, 0, &refs);
        for a in acts {
            if let Some(k) = names::Action::lookup(&a.name) {
                if matches!(
                    k,
                    names::Action::Id
                        | names::Action::Msg
                        | names::Action::LogData
                        | names::Action::Chain
                        | names::Action::Skip
                        | names::Action::SkipAfter
                        | names::Action::Rev
                        | names::Action::Ver
                        | names::Action::Severity
                ) {
                    self.error(
                        Diagnostic::error(Code::BadArgument, a.span, format!("SecDefaultAction cannot contain `{}`", k.name()))
                            .with_hint("SecDefaultAction sets the phase, disruptive action, logging and transformations inherited by later rules"),
                    );
                }
            }
        }
        let Some(phase) = b.phase else {
            self.error(
                Diagnostic::error(
                    Code::MissingPhase,
                    span,
                    "SecDefaultAction without a `phase`",
                )
                .with_hint("SecDefaultAction applies to one phase: add e.g. `phase:2`"),
            );
            return;
        };
        if self.defaults[usize::from(phase) - 1].is_some() {
            // As ModSecurity v3: one per phase and configuration.
            self.error(
                Diagnostic::error(
                    Code::BadArgument,
                    span,
                    format!("a second SecDefaultAction for phase {phase}"),
                )
                .with_label("phase already has its defaults")
                .with_hint("ModSecurity v3 rejects this too: keep one SecDefaultAction per phase"),
            );
            return;
        }
        let block = acts.iter().find(|a| a.name.eq_ignore_ascii_case("block"));
        // ModSecurity v3 ignores `block` here when another disruptive
        // action is given, wherever it is in the list.
        let choice = b.last_action.clone();
        if let (Some(block), Some(_)) = (block, &choice) {
            self.error(
                Diagnostic::warning(Code::CompatDefaultBlock, block.span, "`block` in SecDefaultAction")
                    .with_label("ignored, as ModSecurity v3 does: the other disruptive action is the default")
                    .with_hint("remove `block`: SecDefaultAction names the action that `block` in rules stands for"),
            );
        }
        let disruptive = match choice {
            Some(d) => d,
            None => {
                self.error(
                    Diagnostic::error(
                        Code::BadArgument,
                        block.map_or(span, |a| a.span),
                        "SecDefaultAction without a disruptive action",
                    )
                    .with_label(if block.is_some() { "`block` names no action" } else { "no disruptive action" })
                    .with_hint("add one of `pass`, `deny`, `drop`, `allow`, `redirect` (ModSecurity v3 rejects this too)"),
                );
                return;
            }
        };
        self.defaults[usize::from(phase) - 1] = Some(Defaults {
            transforms: b.links[0].transforms.clone(),
            disruptive,
            status: b.status,
            log: b.log,
            auditlog: b.auditlog,
            tags: b.meta.tags,
        });
    }

    fn finish(mut self) -> Program {
        let limits = self.p.settings.pcre_limits;
        for rx in &mut self.p.regexes {
            rx.set_limits(limits);
        }
        // What each `setvar`'s key answers to the selector regexes, now
        // that all of them are compiled.
        let selectors = &self.p.selector_regexes;
        for rule in &mut self.p.rules {
            for link in &mut rule.links {
                for a in &mut link.actions {
                    if let LinkAction::SetVar(sv) = a {
                        sv.key_selectors = KeySelectors::of(selectors, &sv.name);
                    }
                }
            }
        }
        // Phase lists: rules in file order; removed rules are checked but not run.
        let mut phase_pos: Vec<Option<usize>> = vec![None; self.p.rules.len()];
        for (ri, rule) in self.p.rules.iter().enumerate() {
            if self.positions[ri].1 {
                continue;
            }
            let ph = &mut self.p.phases[usize::from(rule.phase) - 1];
            phase_pos[ri] = Some(ph.rules.len());
            ph.rules.push(RuleIdx(ri as u32));
        }
        // Markers: per phase, the index of the first rule after them.
        for (name, span, gpos) in &self.markers {
            let mut resume_at = [0usize; 5];
            for (p, phase) in self.p.phases.iter().enumerate() {
                resume_at[p] = phase
                    .rules
                    .iter()
                    .filter(|r| self.positions[r.index()].0 < *gpos)
                    .count();
            }
            self.p.markers.push(Marker {
                name: name.clone(),
                span: *span,
                resume_at,
            });
        }
        // skip N.
        for (ri, &pos) in phase_pos.iter().enumerate() {
            let (Some(pos), Some(Flow::Skip { count, .. })) = (pos, self.p.rules[ri].flow.clone())
            else {
                continue;
            };
            let len = self.p.phases[usize::from(self.p.rules[ri].phase) - 1]
                .rules
                .len();
            let to = (pos + 1 + count as usize).min(len);
            self.p.rules[ri].flow = Some(Flow::Skip {
                count,
                resume_at: to,
            });
        }
        // skipAfter MARKER: the first marker of that name after the rule.
        let skip_afters = std::mem::take(&mut self.skip_afters);
        for (ri, name) in skip_afters {
            let gpos = self.positions[ri].0;
            let phase = usize::from(self.p.rules[ri].phase) - 1;
            let candidates: Vec<usize> = (0..self.markers.len())
                .filter(|&m| self.markers[m].0 == name.value)
                .collect();
            let after = candidates
                .iter()
                .copied()
                .find(|&m| self.markers[m].2 > gpos);
            match after {
                Some(m) => {
                    if let Some(pos) = phase_pos[ri] {
                        let to = self.p.markers[m].resume_at[phase].max(pos + 1);
                        self.p.rules[ri].flow = Some(Flow::SkipAfter {
                            marker: name.value.clone(),
                            resume_at: to,
                        });
                    }
                }
                None if !candidates.is_empty() => {
                    let at = self.markers[candidates[0]].1;
                    self.error(
                        Diagnostic::error(Code::BackwardSkip, name.span(), format!("marker `{}` lies before this rule", name.value))
                            .with_label("skipAfter only jumps forward")
                            .with_related(at, "the marker is here")
                            .with_hint("move the SecMarker after the rule; a backward skip would skip the rest of the phase"),
                    );
                }
                None => {
                    let known: Vec<&str> = self.markers.iter().map(|m| m.0.as_str()).collect();
                    let mut d = Diagnostic::error(
                        Code::UnknownMarker,
                        name.span(),
                        format!("no marker named `{}`", name.value),
                    )
                    .with_label("skipAfter target is not defined");
                    d = match closest(&name.value, known.iter().copied()) {
                        Some(c) => d.with_hint(format!("did you mean `{c}`?")),
                        None => d.with_hint(format!(
                            "define it with `SecMarker {}` after this rule",
                            name.value
                        )),
                    };
                    self.error(d);
                }
            }
        }
        // A skip on a rule that is not run has no target: drop it.
        for (ri, pos) in phase_pos.iter().enumerate() {
            if pos.is_none()
                || matches!(self.p.rules[ri].flow, Some(Flow::Skip { resume_at: 0, .. }))
            {
                self.p.rules[ri].flow = None;
            }
        }
        self.p
    }
}

/// Parses a `%{VAR}`/`%{COLL.key}` string. Unknown variables are reported.
pub(crate) fn macro_string(text: &Text, diags: &mut Diagnostics) -> MacroString {
    let s = text.as_str();
    let mut parts = Vec::new();
    let mut lit = String::new();
    let mut i = 0;
    while i < s.len() {
        if s[i..].starts_with("%{") {
            if let Some(end) = s[i + 2..].find('}') {
                let inner = &s[i + 2..i + 2 + end];
                let (name, key) = match inner.split_once(['.', ':']) {
                    Some((n, k)) => (n, Some(k)),
                    None => (inner, None),
                };
                match names::Variable::lookup(name) {
                    Some(variable) => {
                        if !lit.is_empty() {
                            parts.push(MacroPart::Literal(std::mem::take(&mut lit)));
                        }
                        let key = key.map(|k| {
                            if variable.keys_case_insensitive() {
                                k.to_ascii_lowercase()
                            } else {
                                k.to_string()
                            }
                        });
                        parts.push(MacroPart::Var { variable, key });
                    }
                    None => {
                        let span = text.span_of(i + 2..i + 2 + name.len());
                        let mut d = Diagnostic::error(
                            Code::UnknownVariable,
                            span,
                            format!("unknown variable `{name}` in macro"),
                        )
                        .with_label("not a ModSecurity variable");
                        if let Some(c) =
                            closest(name, names::Variable::ALL.iter().map(|v| v.name()))
                        {
                            d = d.with_hint(format!("did you mean `{c}`?"));
                        }
                        diags.push(d);
                        lit.push_str(&s[i..i + 3 + end]);
                    }
                }
                i += 3 + end;
                continue;
            }
        }
        let ch = s[i..].chars().next().unwrap_or(' ');
        lit.push(ch);
        i += ch.len_utf8();
    }
    if !lit.is_empty() || parts.is_empty() {
        parts.push(MacroPart::Literal(lit));
    }
    MacroString { parts }
}

#[cfg(test)]
mod tests;
