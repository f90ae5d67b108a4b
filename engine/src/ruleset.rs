//! A compiled ruleset, shared by all threads.

use crate::injection::{Injection, Libinjection};
use crate::prefilter::Scanner;
use crate::transaction::{EvalOptions, Transaction};
use crate::transform::Transform;
use std::path::PathBuf;
use std::sync::Arc;
use waf_compiler::ir::Program;
use waf_compiler::{compile_files, compile_str, CompileError, Compiled, Options};

/// An immutable compiled configuration (`Send + Sync`): create one, share it
/// (e.g. in an `Arc`), and create a [`Transaction`] per request.
#[derive(Debug)]
pub struct Ruleset {
    program: Program,
    injection: Box<dyn Injection>,
    /// The prefilter automaton and gates of every operator.
    scanner: Scanner,
    /// The transformations of each transform-tree node, first to last
    /// (built once: rules read them on every value they test directly).
    chains: Vec<Vec<Transform>>,
    /// What [`Ruleset::transaction`] uses.
    options: EvalOptions,
    /// Per rule: tags, version and location, shared by every match report.
    rule_meta: Vec<RuleMeta>,
    /// Per value slot, what evaluation needs in a few bytes (read for every
    /// slot of every rule: kept dense instead of chasing the IR's structs).
    slot_info: Vec<SlotInfo>,
    plan_rules: Vec<PlanRule>,
    plan_links: Vec<PlanLink>,
    plan_slots: Vec<waf_compiler::ir::SlotId>,
}

/// A rule's hot fields, dense (the rule loop reads these for every rule;
/// the IR's `Rule` is only touched when a rule matches or is removed).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlanRule {
    /// `plan_links[links..links + n_links]`.
    pub links: u32,
    pub n_links: u32,
    pub unconditional: bool,
}

/// A link's hot fields.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlanLink {
    pub op: waf_compiler::ir::OpId,
    pub gate: crate::prefilter::Gate,
    pub node: waf_compiler::ir::NodeId,
    /// `plan_slots[slots..slots + n_slots]`.
    pub slots: u32,
    pub n_slots: u32,
    /// Index of the link in its rule.
    pub index: u32,
    pub multi_match: bool,
    pub capture: bool,
    pub has_exclusions: bool,
}

/// A slot's target and how its values are read.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SlotInfo {
    pub target: waf_compiler::ir::TargetId,
    /// Read afresh by every rule (a count, or a variable rules change).
    pub direct: bool,
    /// The request collection the target reads, if any.
    pub coll: Option<u8>,
}

/// A rule's metadata that match reports share rather than copy.
#[derive(Debug)]
pub(crate) struct RuleMeta {
    pub tags: Arc<[String]>,
    pub ver: Option<Arc<str>>,
    pub location: Arc<str>,
}

/// The project's default ruleset (`rulesets/default.conf`), embedded in the
/// library: what `waf eval` and `waf serve` use when given no rules.
pub const DEFAULT_RULES: &str = include_str!("../../rulesets/default.conf");

/// The name [`DEFAULT_RULES`] is compiled under (what its diagnostics and
/// match locations show).
pub const DEFAULT_RULES_NAME: &str = "rulesets/default.conf";

impl Ruleset {
    /// Builds the evaluation plan of a compiled program. Crate-private: a
    /// [`Program`] only comes from a compilation without errors, so the
    /// public ways in go through [`Ruleset::from_compiled`].
    pub(crate) fn new(program: Program) -> Ruleset {
        let scanner = Scanner::new(&program);
        let chains = (0..program.transforms.nodes.len())
            .map(|n| program.transforms.chain(waf_compiler::ir::NodeId(n as u32)))
            .collect();
        let rule_meta = program
            .rules
            .iter()
            .map(|r| RuleMeta {
                tags: r.meta.tags.iter().cloned().collect(),
                ver: r.meta.ver.as_deref().map(Arc::from),
                location: Arc::from(r.location.as_str()),
            })
            .collect();
        let slot_info = program
            .slots
            .iter()
            .map(|s| {
                let t = &program.targets[s.target.index()];
                SlotInfo {
                    target: s.target,
                    direct: t.count || crate::transaction::is_volatile(t.variable),
                    coll: crate::transaction::stable_coll(t.variable).map(|(c, _)| c),
                }
            })
            .collect();
        let (mut plan_rules, mut plan_links, mut plan_slots) = (Vec::new(), Vec::new(), Vec::new());
        for r in &program.rules {
            plan_rules.push(PlanRule {
                links: plan_links.len() as u32,
                n_links: r.links.len() as u32,
                unconditional: r.unconditional,
            });
            for (k, l) in r.links.iter().enumerate() {
                plan_links.push(PlanLink {
                    op: l.operator,
                    gate: scanner.gate(l.operator),
                    node: l.transforms,
                    slots: plan_slots.len() as u32,
                    n_slots: l.targets.len() as u32,
                    index: k as u32,
                    multi_match: l.multi_match,
                    capture: l.capture,
                    has_exclusions: !l.exclusions.is_empty(),
                });
                plan_slots.extend_from_slice(&l.targets);
            }
        }
        Ruleset {
            program,
            rule_meta,
            slot_info,
            plan_rules,
            plan_links,
            plan_slots,
            injection: Box::new(Libinjection),
            scanner,
            chains,
            options: EvalOptions::default(),
        }
    }

    /// Replaces the `@detectSQLi`/`@detectXSS` implementation.
    pub fn with_injection(mut self, injection: Box<dyn Injection>) -> Ruleset {
        self.injection = injection;
        self
    }

    /// Compiles configuration files, in order, as one configuration. On
    /// errors, the [`CompileError`] renders every diagnostic (`Display`).
    pub fn from_files(paths: &[PathBuf]) -> Result<Ruleset, CompileError> {
        Self::from_compiled(compile_files(paths, &Options::default()))
    }

    /// Compiles configuration text (`name` is the base of relative `Include`
    /// and data-file paths, and what diagnostics call the text).
    pub fn from_str(name: &str, text: &str) -> Result<Ruleset, CompileError> {
        Self::from_compiled(compile_str(name, text, &Options::default()))
    }

    /// The embedded default ruleset ([`DEFAULT_RULES`]).
    pub fn default_rules() -> Result<Ruleset, CompileError> {
        Self::from_str(DEFAULT_RULES_NAME, DEFAULT_RULES)
    }

    /// The ruleset of a compilation made with the compiler's own API (e.g.
    /// with non-default [`Options`] or loader overrides), or its error.
    pub fn from_compiled(c: Compiled) -> Result<Ruleset, CompileError> {
        c.into_program().map(Ruleset::new)
    }

    pub fn program(&self) -> &Program {
        &self.program
    }

    pub fn injection(&self) -> &dyn Injection {
        self.injection.as_ref()
    }

    pub fn transaction(&self) -> Transaction<'_> {
        Transaction::with_options(self, self.options)
    }

    /// Sets the evaluation options of the transactions [`Ruleset::transaction`]
    /// creates (the default is memoization and prefilter on).
    pub fn with_eval_options(mut self, options: EvalOptions) -> Ruleset {
        self.options = options;
        self
    }

    /// A transaction with non-default evaluation options (e.g. the naive mode).
    pub fn transaction_with(&self, options: EvalOptions) -> Transaction<'_> {
        Transaction::with_options(self, options)
    }

    pub(crate) fn plan_rule(&self, ri: waf_compiler::ir::RuleIdx) -> PlanRule {
        self.plan_rules[ri.index()]
    }

    pub(crate) fn plan_link(&self, i: u32) -> PlanLink {
        self.plan_links[i as usize]
    }

    pub(crate) fn plan_slots(&self, l: &PlanLink) -> &[waf_compiler::ir::SlotId] {
        &self.plan_slots[l.slots as usize..(l.slots + l.n_slots) as usize]
    }

    pub(crate) fn slot_info(&self, slot: waf_compiler::ir::SlotId) -> SlotInfo {
        self.slot_info[slot.index()]
    }

    pub(crate) fn rule_meta(&self, rule: usize) -> Option<&RuleMeta> {
        self.rule_meta.get(rule)
    }

    /// The prefilter of this ruleset's operators.
    pub fn scanner(&self) -> &Scanner {
        &self.scanner
    }

    /// The transformations of transform-tree node `node`, first to last.
    pub fn chain(&self, node: waf_compiler::ir::NodeId) -> &[Transform] {
        self.chains.get(node.index()).map_or(&[], Vec::as_slice)
    }
}
