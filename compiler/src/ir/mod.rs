//! The compiled program: what the engine executes.
//!
//! Invariants (relied on by the engine; checked by `Program::validate` in tests):
//! - `phases[p].rules` lists the rules of phase `p + 1` in execution order;
//!   every [`Flow`] target is an index into that same list, greater than the
//!   rule's own position (control only moves forward) and at most its length.
//! - Every rule has at least one [`Link`]; link 0 is the rule itself and links
//!   1.. are its chain, evaluated in order only while the previous link matched.
//! - A transform chain is a node of [`TransformTree`]; node 0 is the empty chain
//!   and a node's parent is the chain without its last transformation, so two
//!   chains with a common prefix share the nodes of that prefix.
//! - A [`Target`] is interned once; a [`ValueSlot`] is one (target, chain node)
//!   pair, interned once: the engine memoizes transformed values per slot (and
//!   per concrete variable instance within a collection target).
//! - Every operator's [`Prefilter`] is sound: if it is `AnyOf(lits)`, no input
//!   on which the (non-negated) operator matches lacks all of `lits`
//!   (compared ASCII-case-insensitively).

pub mod dump;

use crate::names::{Operator as OperatorName, Severity, Transform, Variable};
use crate::rx::CompiledRx;
pub use crate::rx::RequiredLiterals as Prefilter;
use crate::source::{SourceMap, Span};
use serde::Serialize;
use std::net::IpAddr;

macro_rules! id_type {
    ($name:ident) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(transparent)]
        pub struct $name(pub u32);
        impl $name {
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}
id_type!(RuleIdx);
id_type!(NodeId);
id_type!(TargetId);
id_type!(SlotId);
id_type!(OpId);
id_type!(RxId);
id_type!(PmId);
id_type!(SelectorRxId);

impl NodeId {
    /// The empty transform chain.
    pub const ROOT: NodeId = NodeId(0);
}

/// A compiled configuration.
#[derive(Debug)]
pub struct Program {
    pub sources: SourceMap,
    pub settings: Settings,
    /// Phases 1 to 5 (request headers, request body, response headers,
    /// response body, logging).
    pub phases: [Phase; 5],
    pub rules: Vec<Rule>,
    pub markers: Vec<Marker>,
    pub targets: Vec<Target>,
    pub transforms: TransformTree,
    pub slots: Vec<ValueSlot>,
    pub operators: Vec<Operator>,
    pub regexes: Vec<CompiledRx>,
    pub phrase_sets: Vec<PhraseSet>,
    /// Regexes of `VAR:/regex/` selectors and exclusions (matched against keys).
    pub selector_regexes: Vec<SelectorRegex>,
}

impl Program {
    pub fn rule(&self, idx: RuleIdx) -> &Rule {
        &self.rules[idx.index()]
    }

    pub fn phase(&self, phase: u8) -> &Phase {
        &self.phases[usize::from(phase.clamp(1, 5)) - 1]
    }

    pub fn rule_by_id(&self, id: u64) -> Option<&Rule> {
        self.rules.iter().find(|r| r.id == id)
    }

    /// Checks the invariants listed in the module documentation.
    pub fn validate(&self) -> Result<(), String> {
        for (p, phase) in self.phases.iter().enumerate() {
            for (pos, &ri) in phase.rules.iter().enumerate() {
                let rule = self.rules.get(ri.index()).ok_or(format!(
                    "phase {} names rule {}",
                    p + 1,
                    ri.0
                ))?;
                if usize::from(rule.phase) != p + 1 {
                    return Err(format!(
                        "rule {} listed in phase {} but has phase {}",
                        rule.id,
                        p + 1,
                        rule.phase
                    ));
                }
                if rule.links.is_empty() {
                    return Err(format!("rule {} has no link", rule.id));
                }
                if let Some(flow) = &rule.flow {
                    let to = flow.resume_at();
                    if to <= pos || to > phase.rules.len() {
                        return Err(format!("rule {} jumps to {to} from {pos}", rule.id));
                    }
                }
                for link in &rule.links {
                    if link.operator.index() >= self.operators.len()
                        || link.transforms.index() >= self.transforms.nodes.len()
                    {
                        return Err(format!("rule {} has a dangling reference", rule.id));
                    }
                    for s in &link.targets {
                        let slot = self
                            .slots
                            .get(s.index())
                            .ok_or(format!("rule {}: bad slot", rule.id))?;
                        if slot.node != link.transforms {
                            return Err(format!(
                                "rule {}: slot chain differs from link chain",
                                rule.id
                            ));
                        }
                    }
                }
            }
        }
        for (i, n) in self.transforms.nodes.iter().enumerate().skip(1) {
            match n.parent {
                Some(p) if p.index() < i => {}
                _ => return Err(format!("transform node {i} has a bad parent")),
            }
        }
        Ok(())
    }
}

/// Engine settings from `Sec*` directives.
#[derive(Clone, Debug, Serialize)]
pub struct Settings {
    pub rule_engine: EngineMode,
    pub request_body_access: bool,
    pub response_body_access: bool,
    pub request_body_limit: u64,
    pub request_body_no_files_limit: u64,
    pub request_body_in_memory_limit: u64,
    pub request_body_limit_action: LimitAction,
    pub response_body_limit: u64,
    pub response_body_limit_action: LimitAction,
    pub response_body_mime_types: Vec<String>,
    pub request_body_json_depth_limit: u64,
    pub arguments_limit: u64,
    pub argument_separator: u8,
    pub audit_engine: String,
    pub collection_timeout: u64,
    pub component_signatures: Vec<String>,
    /// Directives accepted but without effect in this engine (logging,
    /// storage and server settings), with where they were.
    #[serde(skip)]
    pub ignored: Vec<(crate::names::Directive, Span)>,
}

impl Default for Settings {
    fn default() -> Settings {
        // The defaults of libmodsecurity v3.
        Settings {
            rule_engine: EngineMode::On,
            request_body_access: false,
            response_body_access: false,
            request_body_limit: 13_107_200,
            request_body_no_files_limit: 1_048_576,
            request_body_in_memory_limit: 131_072,
            request_body_limit_action: LimitAction::Reject,
            response_body_limit: 524_288,
            response_body_limit_action: LimitAction::Reject,
            response_body_mime_types: vec!["text/plain".into(), "text/html".into()],
            request_body_json_depth_limit: 10_000,
            arguments_limit: 1000,
            argument_separator: b'&',
            audit_engine: "Off".into(),
            collection_timeout: 3600,
            component_signatures: Vec::new(),
            ignored: Vec::new(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum EngineMode {
    On,
    Off,
    DetectionOnly,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum LimitAction {
    Reject,
    ProcessPartial,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Phase {
    pub rules: Vec<RuleIdx>,
}

/// A `SecMarker`: markers exist in every phase.
#[derive(Clone, Debug, Serialize)]
pub struct Marker {
    pub name: String,
    #[serde(skip)]
    pub span: Span,
    /// For each phase, the index in `phases[p].rules` of the first rule after the marker.
    pub resume_at: [usize; 5],
}

/// A `SecRule` (with its chain) or a `SecAction`.
#[derive(Clone, Debug, Serialize)]
pub struct Rule {
    pub id: u64,
    pub phase: u8,
    #[serde(skip)]
    pub span: Span,
    /// `file:line` of the rule, for people.
    pub location: String,
    pub links: Vec<Link>,
    pub disruptive: Disruptive,
    /// `block` was written: the disruptive action came from SecDefaultAction.
    pub via_block: bool,
    pub status: Option<u16>,
    pub meta: Meta,
    pub log: bool,
    pub auditlog: bool,
    pub flow: Option<Flow>,
    /// True for `SecAction`: one link, no targets, an unconditional operator.
    pub unconditional: bool,
}

/// What a rule does to the transaction when it matches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Disruptive {
    Pass,
    Deny,
    Drop,
    /// `allow`, `allow:phase`, `allow:request`.
    Allow(AllowScope),
    Redirect(MacroString),
    Proxy(MacroString),
    Pause(u64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum AllowScope {
    All,
    Phase,
    Request,
}

/// Metadata for logs and reports; macros are expanded at match time.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Meta {
    pub msg: Option<MacroString>,
    pub logdata: Option<MacroString>,
    pub tags: Vec<String>,
    pub severity: Option<Severity>,
    pub ver: Option<String>,
    pub rev: Option<String>,
    pub maturity: Option<u8>,
    pub accuracy: Option<u8>,
}

/// Where execution resumes after the rule matched (an index into the phase's rule list).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Flow {
    Skip { count: u32, resume_at: usize },
    SkipAfter { marker: String, resume_at: usize },
}

impl Flow {
    pub fn resume_at(&self) -> usize {
        match self {
            Flow::Skip { resume_at, .. } | Flow::SkipAfter { resume_at, .. } => *resume_at,
        }
    }
}

/// One `SecRule` statement: the rule itself or one of its chain links.
#[derive(Clone, Debug, Serialize)]
pub struct Link {
    #[serde(skip)]
    pub span: Span,
    /// The values to test, each a (target, transform chain) slot, in the order written.
    pub targets: Vec<SlotId>,
    /// `!VAR:key` exclusions, including those added by SecRuleUpdateTargetById.
    pub exclusions: Vec<Exclusion>,
    pub transforms: NodeId,
    pub operator: OpId,
    pub capture: bool,
    pub multi_match: bool,
    /// Non-disruptive actions run when this link matches, in order.
    pub actions: Vec<LinkAction>,
}

/// A variable (or collection member set) to read.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Target {
    pub variable: Variable,
    pub selector: Selector,
    /// `&VAR`: the number of values instead of the values.
    pub count: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Selector {
    /// The whole collection (or the scalar).
    All,
    /// One key; lowercased when the collection's keys are case-insensitive.
    Key(String),
    /// Keys matching a regex (`VAR:/re/`).
    Regex(SelectorRxId),
    /// An XPath expression (`XML:/*`).
    XPath(String),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Exclusion {
    pub variable: Variable,
    pub selector: Selector,
}

/// A compiled key regex of a selector or exclusion.
#[derive(Clone, Debug)]
pub struct SelectorRegex {
    pub pattern: String,
    pub regex: regex::bytes::Regex,
}

/// One (target, transform chain) pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct ValueSlot {
    pub target: TargetId,
    pub node: NodeId,
}

/// The prefix tree of transform chains.
#[derive(Clone, Debug, Serialize)]
pub struct TransformTree {
    pub nodes: Vec<TransformNode>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TransformNode {
    pub parent: Option<NodeId>,
    /// `None` only for the root.
    pub transform: Option<Transform>,
}

impl Default for TransformTree {
    fn default() -> Self {
        TransformTree {
            nodes: vec![TransformNode {
                parent: None,
                transform: None,
            }],
        }
    }
}

impl TransformTree {
    /// The node for `chain`, creating the missing suffix of nodes.
    pub fn intern(&mut self, chain: &[Transform]) -> NodeId {
        let mut node = NodeId::ROOT;
        for &t in chain {
            let found = self
                .nodes
                .iter()
                .position(|n| n.parent == Some(node) && n.transform == Some(t));
            node = match found {
                Some(i) => NodeId(i as u32),
                None => {
                    self.nodes.push(TransformNode {
                        parent: Some(node),
                        transform: Some(t),
                    });
                    NodeId((self.nodes.len() - 1) as u32)
                }
            };
        }
        node
    }

    /// The transformations of a chain, first to last.
    pub fn chain(&self, mut node: NodeId) -> Vec<Transform> {
        let mut out = Vec::new();
        while let Some(n) = self.nodes.get(node.index()) {
            match (n.transform, n.parent) {
                (Some(t), Some(p)) => {
                    out.push(t);
                    node = p;
                }
                _ => break,
            }
        }
        out.reverse();
        out
    }

    pub fn depth(&self, node: NodeId) -> usize {
        self.chain(node).len()
    }
}

/// A compiled operator.
#[derive(Clone, Debug, Serialize)]
pub struct Operator {
    pub name: OperatorName,
    pub kind: OpKind,
    pub negated: bool,
    #[serde(skip)]
    pub prefilter: Prefilter,
    #[serde(skip)]
    pub span: Span,
}

/// An operator argument that may hold `%{...}` macros (expanded per transaction).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Arg {
    Const(String),
    Macro(MacroString),
}

#[derive(Clone, Debug, Serialize)]
pub enum OpKind {
    Rx(RxId),
    /// `@pm`, `@pmFromFile`.
    Pm(PmId),
    Streq(Arg),
    Contains(Arg),
    ContainsWord(Arg),
    BeginsWith(Arg),
    EndsWith(Arg),
    Within(Arg),
    Strmatch(String),
    Eq(Arg),
    Ge(Arg),
    Gt(Arg),
    Le(Arg),
    Lt(Arg),
    IpMatch(Vec<IpRange>),
    ValidateByteRange(ByteSet),
    ValidateUrlEncoding,
    ValidateUtf8Encoding,
    UnconditionalMatch,
    NoMatch,
    DetectSqli,
    DetectXss,
    /// `@verifyCC` and friends: a regex finds candidates, a checksum confirms.
    Verify {
        rx: RxId,
    },
    /// Parsed but not executable here (needs an external service or file
    /// format this engine does not have); never matches. A lint warning says so.
    Unsupported {
        argument: String,
    },
}

impl OpKind {
    /// The argument of the operators that take a (possibly macro) string.
    pub fn argument(&self) -> Option<&Arg> {
        match self {
            OpKind::Streq(a)
            | OpKind::Contains(a)
            | OpKind::ContainsWord(a)
            | OpKind::BeginsWith(a)
            | OpKind::EndsWith(a)
            | OpKind::Within(a)
            | OpKind::Eq(a)
            | OpKind::Ge(a)
            | OpKind::Gt(a)
            | OpKind::Le(a)
            | OpKind::Lt(a) => Some(a),
            _ => None,
        }
    }
}

/// `@ipMatch` network: address and prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct IpRange {
    pub addr: IpAddr,
    pub prefix: u8,
}

/// A set of bytes (`@validateByteRange`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ByteSet(pub [u64; 4]);

impl ByteSet {
    pub fn insert(&mut self, b: u8) {
        self.0[usize::from(b >> 6)] |= 1 << (b & 63);
    }
    pub fn contains(&self, b: u8) -> bool {
        self.0[usize::from(b >> 6)] & (1 << (b & 63)) != 0
    }
}

impl Serialize for ByteSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut ranges = Vec::new();
        let mut b = 0u16;
        while b < 256 {
            if self.contains(b as u8) {
                let start = b;
                while b < 256 && self.contains(b as u8) {
                    b += 1;
                }
                ranges.push(if b - 1 == start {
                    format!("{start}")
                } else {
                    format!("{start}-{}", b - 1)
                });
            } else {
                b += 1;
            }
        }
        s.serialize_str(&ranges.join(","))
    }
}

/// A phrase list for `@pm`/`@pmFromFile`, matched case-insensitively.
#[derive(Clone, Debug)]
pub struct PhraseSet {
    pub phrases: Vec<String>,
    /// Where the phrases came from (the data files of `@pmFromFile`).
    pub files: Vec<std::path::PathBuf>,
    pub automaton: aho_corasick::AhoCorasick,
}

/// A string with `%{VAR}` / `%{COLLECTION.key}` references.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct MacroString {
    pub parts: Vec<MacroPart>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum MacroPart {
    Literal(String),
    Var {
        variable: Variable,
        key: Option<String>,
    },
}

impl MacroString {
    pub fn literal(s: &str) -> MacroString {
        MacroString {
            parts: vec![MacroPart::Literal(s.to_string())],
        }
    }

    /// The text, if it holds no macro.
    pub fn as_literal(&self) -> Option<&str> {
        match self.parts.as_slice() {
            [] => Some(""),
            [MacroPart::Literal(s)] => Some(s),
            _ => None,
        }
    }
}

impl std::fmt::Display for MacroString {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for p in &self.parts {
            match p {
                MacroPart::Literal(s) => f.write_str(s)?,
                MacroPart::Var {
                    variable,
                    key: Some(k),
                } => write!(f, "%{{{}.{k}}}", variable.name())?,
                MacroPart::Var {
                    variable,
                    key: None,
                } => write!(f, "%{{{}}}", variable.name())?,
            }
        }
        Ok(())
    }
}

/// Non-disruptive actions attached to a link.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum LinkAction {
    SetVar(SetVar),
    Ctl(Ctl),
    InitCol {
        collection: Variable,
        key: MacroString,
    },
    ExpireVar {
        name: MacroString,
        seconds: MacroString,
    },
    DeprecateVar {
        name: MacroString,
        value: MacroString,
    },
    SetEnv {
        name: MacroString,
        value: MacroString,
    },
    SetUid(MacroString),
    SetSid(MacroString),
    SetRsc(MacroString),
    /// Accepted, no effect in this engine (exec, sanitise*, append, prepend...).
    Ignored {
        action: crate::names::Action,
        value: Option<String>,
    },
}

/// `setvar:collection.name=value` (`=+`, `=-`, `!` delete).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SetVar {
    pub collection: Variable,
    pub name: MacroString,
    pub op: SetVarOp,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum SetVarOp {
    Set(MacroString),
    Add(MacroString),
    Sub(MacroString),
    Delete,
}

/// `ctl:` — per-transaction configuration changes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Ctl {
    RuleEngine(EngineMode),
    RuleRemoveById(Vec<(u64, u64)>),
    RuleRemoveByTag(String),
    RuleRemoveByMsg(String),
    RuleRemoveTargetById {
        ids: Vec<(u64, u64)>,
        target: Exclusion,
    },
    RuleRemoveTargetByTag {
        tag: String,
        target: Exclusion,
    },
    RuleRemoveTargetByMsg {
        msg: String,
        target: Exclusion,
    },
    RequestBodyProcessor(String),
    RequestBodyAccess(bool),
    ResponseBodyAccess(bool),
    ForceRequestBodyVariable(bool),
    RequestBodyLimit(u64),
    ResponseBodyLimit(u64),
    AuditEngine(String),
    AuditLogParts(String),
    /// Options accepted without effect here (debugLogLevel, hashEngine...).
    Ignored {
        option: String,
        value: String,
    },
}
