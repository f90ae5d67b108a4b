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
        /// A typed index into one of [`Program`]'s tables (or, for [`NodeId`], the transform tree); typed so that one table's index cannot be used for another.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(transparent)]
        pub struct $name(pub u32);
        impl $name {
            /// The index as a `usize`, for slicing the table.
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
    /// Every file read, for locations in diagnostics and reports.
    pub sources: SourceMap,
    /// Engine settings from the `Sec*` directives.
    pub settings: Settings,
    /// Phases 1 to 5 (request headers, request body, response headers,
    /// response body, logging).
    pub phases: [Phase; 5],
    /// Every rule and `SecAction`, in file order; phases refer to them by [`RuleIdx`].
    pub rules: Vec<Rule>,
    /// Every `SecMarker`, in file order.
    pub markers: Vec<Marker>,
    /// Interned targets: each distinct (variable, selector, count) once.
    pub targets: Vec<Target>,
    /// The prefix tree of transformation chains shared by all rules.
    pub transforms: TransformTree,
    /// Interned (target, transform chain) pairs: what the engine memoizes values by.
    pub slots: Vec<ValueSlot>,
    /// Interned operators, with their prefilter literals.
    pub operators: Vec<Operator>,
    /// Compiled `@rx` (and `@verify*`) regexes.
    pub regexes: Vec<CompiledRx>,
    /// `@pm`/`@pmFromFile` phrase lists.
    pub phrase_sets: Vec<PhraseSet>,
    /// Regexes of `VAR:/regex/` selectors and exclusions (matched against keys).
    pub selector_regexes: Vec<SelectorRegex>,
}

impl Program {
    /// The rule at `idx`.
    pub fn rule(&self, idx: RuleIdx) -> &Rule {
        &self.rules[idx.index()]
    }

    /// Phase `phase` (1 to 5; out-of-range numbers are clamped).
    pub fn phase(&self, phase: u8) -> &Phase {
        &self.phases[usize::from(phase.clamp(1, 5)) - 1]
    }

    /// The rule with the `id` action `id`, if any.
    pub fn rule_by_id(&self, id: u64) -> Option<&Rule> {
        self.rules.iter().find(|r| r.id == id)
    }

    /// Checks the invariants listed in the module documentation.
    pub fn validate(&self) -> Result<(), InvalidProgram> {
        self.check().map_err(InvalidProgram)
    }

    fn check(&self) -> Result<(), String> {
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

/// A broken invariant of a [`Program`] (see the module documentation): a
/// bug in whatever built it, never a property of the rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidProgram(String);

impl std::fmt::Display for InvalidProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid program: {}", self.0)
    }
}

impl std::error::Error for InvalidProgram {}

/// Engine settings from `Sec*` directives.
#[derive(Clone, Debug, Serialize)]
pub struct Settings {
    /// `SecRuleEngine`.
    pub rule_engine: EngineMode,
    /// `SecRequestBodyAccess`.
    pub request_body_access: bool,
    /// `SecResponseBodyAccess`.
    pub response_body_access: bool,
    /// `SecRequestBodyLimit`, in bytes.
    pub request_body_limit: u64,
    /// `SecRequestBodyNoFilesLimit`: bytes of a request body other than uploaded files.
    pub request_body_no_files_limit: u64,
    /// `SecRequestBodyInMemoryLimit` (accepted; bodies are always held in memory here).
    pub request_body_in_memory_limit: u64,
    /// `SecRequestBodyLimitAction`.
    pub request_body_limit_action: LimitAction,
    /// `SecResponseBodyLimit`, in bytes.
    pub response_body_limit: u64,
    /// `SecResponseBodyLimitAction`.
    pub response_body_limit_action: LimitAction,
    /// `SecResponseBodyMimeType`: the response types whose bodies are inspected.
    pub response_body_mime_types: Vec<String>,
    /// `SecRequestBodyJsonDepthLimit`.
    pub request_body_json_depth_limit: u64,
    /// `SecArgumentsLimit`: the most arguments a request body may add.
    pub arguments_limit: u64,
    /// `SecArgumentSeparator` (a single byte, `&` by default).
    pub argument_separator: u8,
    /// `SecAuditEngine`.
    pub audit_engine: AuditEngine,
    /// `SecAuditLogParts`.
    pub audit_log_parts: AuditParts,
    /// `SecCollectionTimeout`, in seconds.
    pub collection_timeout: u64,
    /// `SecComponentSignature` values, in order.
    pub component_signatures: Vec<String>,
    /// `SecUnicodeMapFile FILE CODEPAGE`: the file's contents (up to its
    /// first NUL, as v3 reads it) and the code page as C's `atof` reads it;
    /// the engine builds `urlDecodeUni`'s table from them.
    #[serde(skip)]
    pub unicode_map: Option<UnicodeMapFile>,
    /// `WafPcreFallback`: PCRE-only `@rx` patterns run on PCRE2 instead of
    /// being load errors.
    pub pcre_fallback: bool,
    /// `SecPcreMatchLimit` and `SecPcreMatchLimitRecursion`: the limits of
    /// those PCRE2 searches.
    #[serde(skip)]
    pub pcre_limits: crate::rx::BacktrackLimits,
    /// Directives accepted but without effect in this engine (logging,
    /// storage and server settings), with where they were.
    #[serde(skip)]
    pub ignored: Vec<(crate::names::Directive, Span)>,
}

/// What `SecUnicodeMapFile` read.
#[derive(Clone, Debug, PartialEq)]
pub struct UnicodeMapFile {
    /// The mapping file's bytes.
    pub contents: std::sync::Arc<[u8]>,
    /// The second argument, as C's `atof` reads it (0 when it is not a
    /// number: v3 then loads the file but never consults it).
    pub code_page: f64,
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
            audit_engine: AuditEngine::Off,
            audit_log_parts: AuditParts::DEFAULT,
            collection_timeout: 3600,
            component_signatures: Vec::new(),
            unicode_map: None,
            pcre_fallback: false,
            pcre_limits: crate::rx::BacktrackLimits::DEFAULT,
            ignored: Vec::new(),
        }
    }
}

/// `SecRuleEngine` / `ctl:ruleEngine`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum EngineMode {
    /// Rules run and disruptive actions apply.
    On,
    /// No rule runs.
    Off,
    /// Rules run and log, but nothing is blocked.
    DetectionOnly,
}

/// `SecAuditEngine` / `ctl:auditEngine`: which transactions an embedder
/// writes to its audit log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum AuditEngine {
    /// None.
    Off,
    /// All.
    On,
    /// Those with an intervention or a matched rule that logs.
    RelevantOnly,
}

impl AuditEngine {
    /// The mode named `s` (any case), as `SecAuditEngine` takes it.
    pub fn parse(s: &str) -> Option<AuditEngine> {
        [
            ("off", AuditEngine::Off),
            ("on", AuditEngine::On),
            ("relevantonly", AuditEngine::RelevantOnly),
        ]
        .into_iter()
        .find_map(|(name, mode)| s.eq_ignore_ascii_case(name).then_some(mode))
    }
}

/// `SecAuditLogParts`: the parts of an audit record to write, a set of the
/// letters `A`..=`K` and `Z` (ModSecurity's part letters: `A` header, `B`
/// request headers, `C` request body, `E` response body, `F` response
/// headers, `H` trailer with the messages, `I` request body without files,
/// `J` uploaded files, `K` matched rules, `Z` end).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct AuditParts(u32);

impl AuditParts {
    /// ModSecurity's default, `ABCFHZ`.
    pub const DEFAULT: AuditParts = AuditParts(
        Self::bit(b'A')
            | Self::bit(b'B')
            | Self::bit(b'C')
            | Self::bit(b'F')
            | Self::bit(b'H')
            | Self::bit(b'Z'),
    );

    const fn bit(letter: u8) -> u32 {
        1 << (letter - b'A')
    }

    fn valid(letter: u8) -> bool {
        matches!(letter, b'A'..=b'K' | b'Z')
    }

    /// The set written as `s` (e.g. `ABIJDEFHZ`), or `None` if `s` is empty
    /// or holds anything but part letters.
    pub fn parse(s: &str) -> Option<AuditParts> {
        if s.is_empty() {
            return None;
        }
        s.bytes().try_fold(AuditParts(0), |acc, b| {
            Self::valid(b).then(|| AuditParts(acc.0 | Self::bit(b)))
        })
    }

    /// Whether part `letter` is in the set.
    pub fn contains(self, letter: char) -> bool {
        u8::try_from(letter).is_ok_and(|b| Self::valid(b) && self.0 & Self::bit(b) != 0)
    }

    /// The set after `change`.
    pub fn apply(self, change: AuditPartsChange) -> AuditParts {
        match change {
            AuditPartsChange::Set(p) => p,
            AuditPartsChange::Add(p) => AuditParts(self.0 | p.0),
            AuditPartsChange::Remove(p) => AuditParts(self.0 & !p.0),
        }
    }
}

impl std::fmt::Display for AuditParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for b in (b'A'..=b'K').chain([b'Z']) {
            if self.0 & Self::bit(b) != 0 {
                write!(f, "{}", b as char)?;
            }
        }
        Ok(())
    }
}

/// `ctl:auditLogParts`: `=ABC` sets the parts, `=+E` adds, `=-E` removes
/// (as ModSecurity v3 reads it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum AuditPartsChange {
    /// Replace the set.
    Set(AuditParts),
    /// Add these parts.
    Add(AuditParts),
    /// Remove these parts.
    Remove(AuditParts),
}

impl AuditPartsChange {
    /// The change written as `s`, or `None` if it names no valid parts.
    pub fn parse(s: &str) -> Option<AuditPartsChange> {
        if let Some(rest) = s.strip_prefix('+') {
            AuditParts::parse(rest).map(AuditPartsChange::Add)
        } else if let Some(rest) = s.strip_prefix('-') {
            AuditParts::parse(rest).map(AuditPartsChange::Remove)
        } else {
            AuditParts::parse(s).map(AuditPartsChange::Set)
        }
    }
}

/// `SecRequestBodyLimitAction` / `SecResponseBodyLimitAction`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum LimitAction {
    /// A body over the limit is refused (413 for requests, 500 for responses, as ModSecurity does).
    Reject,
    /// Only the bytes up to the limit are inspected; the rest passes.
    ProcessPartial,
}

/// One processing phase: its rules in execution order.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Phase {
    /// Indices into [`Program::rules`], in the order the rules run.
    pub rules: Vec<RuleIdx>,
}

/// A `SecMarker`: markers exist in every phase.
#[derive(Clone, Debug, Serialize)]
pub struct Marker {
    /// The marker's name, as `skipAfter` refers to it.
    pub name: String,
    /// Where the `SecMarker` is written.
    #[serde(skip)]
    pub span: Span,
    /// For each phase, the index in `phases[p].rules` of the first rule after the marker.
    pub resume_at: [usize; 5],
}

/// A `SecRule` (with its chain) or a `SecAction`.
#[derive(Clone, Debug, Serialize)]
pub struct Rule {
    /// The `id` action.
    pub id: u64,
    /// The phase (1 to 5) the rule runs in.
    pub phase: u8,
    /// Where the rule is written.
    #[serde(skip)]
    pub span: Span,
    /// `file:line` of the rule, for people.
    pub location: String,
    /// The rule and its `chain` links, in order; every link must match.
    pub links: Vec<Link>,
    /// What the rule does when it matches.
    pub disruptive: Disruptive,
    /// `block` was written: the disruptive action came from SecDefaultAction.
    pub via_block: bool,
    /// The `status` action: the HTTP status of a deny (or redirect).
    pub status: Option<u16>,
    /// What the rule reports: message, tags, severity and the like.
    pub meta: Meta,
    /// Whether a match is written to the error log (`log`/`nolog`).
    pub log: bool,
    /// Whether a match makes the transaction relevant to the audit log (`auditlog`/`noauditlog`).
    pub auditlog: bool,
    /// `skip` / `skipAfter`: where execution goes after a match.
    pub flow: Option<Flow>,
    /// True for `SecAction`: one link, no targets, an unconditional operator.
    pub unconditional: bool,
}

/// What a rule does to the transaction when it matches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Disruptive {
    /// Go on with the next rule.
    Pass,
    /// Stop processing and answer with the rule's status (403 by default).
    Deny,
    /// Close the connection (an intervention with action `drop`).
    Drop,
    /// `allow`, `allow:phase`, `allow:request`.
    Allow(AllowScope),
    /// Answer with a redirect to the (expanded) URL.
    Redirect(MacroString),
    /// `proxy:URL`: an intervention asking the server to proxy the request to the (expanded) URL.
    Proxy(MacroString),
    /// `pause:MS` (accepted; the engine does not sleep: delaying the answer is the server's business).
    Pause(u64),
}

/// What `allow` lets through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum AllowScope {
    /// `allow`: the rest of the transaction.
    All,
    /// `allow:phase`: the rest of the current phase.
    Phase,
    /// `allow:request`: the rest of the request phases (the response is still inspected).
    Request,
}

/// Metadata for logs and reports; macros are expanded at match time.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Meta {
    /// The `msg` action.
    pub msg: Option<MacroString>,
    /// The `logdata` action.
    pub logdata: Option<MacroString>,
    /// The `tag` actions, in order.
    pub tags: Vec<String>,
    /// The `severity` action.
    pub severity: Option<Severity>,
    /// The `ver` action.
    pub ver: Option<String>,
    /// The `rev` action.
    pub rev: Option<String>,
    /// The `maturity` action.
    pub maturity: Option<u8>,
    /// The `accuracy` action.
    pub accuracy: Option<u8>,
}

/// Where execution resumes after the rule matched (an index into the phase's rule list).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Flow {
    /// `skip:N`: the next `count` rules are skipped.
    Skip {
        /// How many rules are skipped (chains count as one).
        count: u32,
        /// The index in the phase's rule list where execution resumes.
        resume_at: usize,
    },
    /// `skipAfter:MARKER`: execution resumes after the marker.
    SkipAfter {
        /// The marker's name.
        marker: String,
        /// The index in the phase's rule list of the first rule after the marker.
        resume_at: usize,
    },
}

impl Flow {
    /// The index in the phase's rule list where execution resumes.
    pub fn resume_at(&self) -> usize {
        match self {
            Flow::Skip { resume_at, .. } | Flow::SkipAfter { resume_at, .. } => *resume_at,
        }
    }
}

/// One `SecRule` statement: the rule itself or one of its chain links.
#[derive(Clone, Debug, Serialize)]
pub struct Link {
    /// Where this link's `SecRule` is written.
    #[serde(skip)]
    pub span: Span,
    /// The values to test, each a (target, transform chain) slot, in the order written.
    pub targets: Vec<SlotId>,
    /// `!VAR:key` exclusions, including those added by SecRuleUpdateTargetById.
    pub exclusions: Vec<Exclusion>,
    /// The link's transformation chain (a node of [`TransformTree`]).
    pub transforms: NodeId,
    /// The link's operator.
    pub operator: OpId,
    /// The `capture` action: regex groups go to `TX:0`..`TX:9`.
    pub capture: bool,
    /// The `multiMatch` action: the operator also runs on every intermediate transformed value.
    pub multi_match: bool,
    /// Non-disruptive actions run when this link matches, in order.
    pub actions: Vec<LinkAction>,
}

/// A variable (or collection member set) to read.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Target {
    /// The variable read.
    pub variable: Variable,
    /// Which of its members are read.
    pub selector: Selector,
    /// `&VAR`: the number of values instead of the values.
    pub count: bool,
}

/// Which members of a collection a target reads.
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

/// A `!VAR` or `!VAR:key` exclusion of a target.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Exclusion {
    /// The variable excluded from.
    pub variable: Variable,
    /// The members excluded.
    pub selector: Selector,
}

/// A compiled key regex of a selector or exclusion.
#[derive(Clone, Debug)]
pub struct SelectorRegex {
    /// The regex as written between the slashes.
    pub pattern: String,
    /// The compiled regex, matched against keys.
    pub regex: regex::bytes::Regex,
    /// The same test without the regex engine, when the pattern is a plain
    /// literal, anchored at the start or not (`^header_name_920450_`, `ids`).
    /// CRS selects `TX` variables by prefix against ~150 keys per use.
    pub literal: Option<KeyLiteral>,
    /// The bytes a key the regex matches can start with, as a 256-bit set,
    /// when the regex is anchored at the key's start and every match starts
    /// with one of finitely many literals (`^pbjs-\w+$`, `^_ga(?:_\w+)?$`:
    /// CRS's cookie exclusions, tested against every cookie by the rules
    /// that carry them). Most keys are ruled out by their first byte.
    pub first_bytes: Option<[u64; 4]>,
}

impl SelectorRegex {
    /// Compiles `pattern` (PCRE syntax) from its translation to the `regex`
    /// crate's syntax (`translated`), case-insensitively as ModSecurity
    /// matches keys.
    pub fn new(pattern: &str, translated: &str) -> Result<SelectorRegex, regex::Error> {
        let regex = regex::bytes::RegexBuilder::new(translated)
            .case_insensitive(true)
            .build()?;
        Ok(SelectorRegex {
            pattern: pattern.to_string(),
            regex,
            literal: KeyLiteral::of(pattern),
            first_bytes: first_bytes(translated),
        })
    }

    /// Whether `key` matches: by the literal when it can say, else by the
    /// regex, once the key's first byte allows it.
    #[inline]
    pub fn is_match(&self, key: &[u8]) -> bool {
        match self.literal.as_ref().and_then(|l| l.matches(key)) {
            Some(m) => m,
            None => self.may_start(key) && self.regex.is_match(key),
        }
    }

    /// Whether the regex matches every key a `setvar` named `name` stores
    /// (lowercased), if that is known before the name is expanded: for a
    /// constant name, the regex's answer; for a computed one, a literal
    /// beginning that already holds this regex's literal (at its start,
    /// for an anchored one) makes every such key match. `None` otherwise.
    pub fn answer_for_name(&self, name: &MacroString) -> Option<bool> {
        if let Some(n) = name.as_literal() {
            return Some(self.is_match(n.to_ascii_lowercase().as_bytes()));
        }
        let Some(MacroPart::Literal(start)) = name.parts.first() else {
            return None;
        };
        let start = start.as_bytes();
        let holds = match self.literal.as_ref()? {
            KeyLiteral::Prefix(lit) => {
                start.len() >= lit.len() && start[..lit.len()].eq_ignore_ascii_case(lit)
            }
            KeyLiteral::Contains(lit) => {
                !lit.is_empty()
                    && start
                        .windows(lit.len())
                        .any(|w| w.eq_ignore_ascii_case(lit))
            }
        };
        holds.then_some(true)
    }

    /// False when the regex cannot match `key` for its first byte (see
    /// [`SelectorRegex::first_bytes`]); true when it may.
    #[inline]
    pub fn may_start(&self, key: &[u8]) -> bool {
        match (&self.first_bytes, key.first()) {
            // A multi-line `^` also matches after a `\n`.
            (Some(set), Some(&b)) => {
                set[usize::from(b >> 6)] & (1 << (b & 63)) != 0 || has_line_feed(key)
            }
            _ => true,
        }
    }
}

/// Whether `b` holds a `\n`, eight bytes at a time: keys are short, and
/// CRS's `TX` selections test ~120 of them per request.
#[inline]
fn has_line_feed(b: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // A byte of `x` is zero where `w` has a `\n`; the expression is
    // non-zero exactly when some byte of `x` is.
    let any = |w: [u8; 8]| {
        let x = u64::from_le_bytes(w) ^ (ONES * u64::from(b'\n'));
        x.wrapping_sub(ONES) & !x & HIGH != 0
    };
    let word = |c: &[u8]| {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        w
    };
    if b.len() < 8 {
        return b.contains(&b'\n');
    }
    let mut chunks = b.chunks_exact(8);
    if chunks.by_ref().any(|c| any(word(c))) {
        return true;
    }
    // The last eight bytes, overlapping the last word read.
    !chunks.remainder().is_empty() && any(word(&b[b.len() - 8..]))
}

/// The first bytes of every match of `translated` (compiled as
/// [`SelectorRegex::new`] compiles it: case-insensitive, with the flags
/// the translation sets), if every match starts at the haystack's start
/// or a line's with one of a finite set of non-empty literals.
fn first_bytes(translated: &str) -> Option<[u64; 4]> {
    use regex_syntax::hir::literal::Extractor;
    use regex_syntax::hir::Look;
    let hir = regex_syntax::ParserBuilder::new()
        .case_insensitive(true)
        .utf8(false)
        .build()
        .parse(translated)
        .ok()?;
    // Selector regexes are multi-line (`translate`'s flags): a match starts
    // at the key's start or after a `\n` (which `may_start` lets through).
    let starts = hir.properties().look_set_prefix();
    if !starts.contains(Look::Start) && !starts.contains(Look::StartLF) {
        return None;
    }
    // Every match starts with one of the extracted literals (exact or
    // not), if their number is finite.
    let seq = Extractor::new().extract(&hir);
    let mut set = [0u64; 4];
    for lit in seq.literals()? {
        let &b = lit.as_bytes().first()?;
        set[usize::from(b >> 6)] |= 1 << (b & 63);
    }
    Some(set)
}

/// A selector regex that is a plain literal (ASCII letters, digits, `_`,
/// `-`), possibly followed by `.*` or one such character and `*`, which
/// matches a key case-insensitively.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyLiteral {
    /// `^lit`: the key starts with it.
    Prefix(Vec<u8>),
    /// `lit`: the key contains it.
    Contains(Vec<u8>),
}

impl KeyLiteral {
    /// The literal form of `pattern` (PCRE syntax), if it has one.
    pub fn of(pattern: &str) -> Option<KeyLiteral> {
        let (anchored, body) = match pattern.strip_prefix('^') {
            Some(rest) => (true, rest),
            None => (false, pattern),
        };
        let plain = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
        // A trailing repetition that may be empty (`rfi_parameter_.*`,
        // CRS 922110's `MULTIPART_HEADERS_CONTENT_TYPES_*`) changes nothing
        // about whether a key has a match: the literal before it decides.
        let body = if let Some(b) = body.strip_suffix(".*") {
            b
        } else if let Some(b) = body.strip_suffix('*') {
            let mut chars = b.chars();
            match chars.next_back() {
                Some(c) if plain(c) => chars.as_str(),
                _ => return None,
            }
        } else {
            body
        };
        if body.is_empty() || !body.chars().all(plain) {
            return None;
        }
        let lit = body.as_bytes().to_ascii_lowercase();
        Some(if anchored {
            KeyLiteral::Prefix(lit)
        } else {
            KeyLiteral::Contains(lit)
        })
    }

    /// Whether `key` matches, or `None` when only the regex can say: a key
    /// with a non-ASCII byte (case folding is the regex's), or, for a
    /// prefix, with a `\n` (after which a multi-line `^` matches too).
    pub fn matches(&self, key: &[u8]) -> Option<bool> {
        if let KeyLiteral::Prefix(lit) = self {
            // Selector regexes are multi-line, as ModSecurity compiles them:
            // `^` also matches after each `\n`, which the regex decides.
            if has_line_feed(key) {
                return None;
            }
            // Most keys differ from the prefix in their first byte: an
            // ASCII character folds to no other ASCII letter than its
            // other case, so the answer needs no more.
            if let Some(&k) = key.first() {
                if k.is_ascii() && lit.first() != Some(&k.to_ascii_lowercase()) {
                    return Some(false);
                }
            }
        }
        if !key.is_ascii() {
            return None;
        }
        Some(match self {
            KeyLiteral::Prefix(lit) => {
                key.len() >= lit.len() && key[..lit.len()].eq_ignore_ascii_case(lit)
            }
            KeyLiteral::Contains(lit) => match lit.split_first() {
                // Compared only where the key has the literal's first byte
                // (at few positions), not window by window.
                Some((&first, rest)) if key.len() >= lit.len() => key[..=key.len() - lit.len()]
                    .iter()
                    .enumerate()
                    .any(|(i, &b)| {
                        b.to_ascii_lowercase() == first
                            && key[i + 1..i + lit.len()].eq_ignore_ascii_case(rest)
                    }),
                Some(_) => false,
                None => true,
            },
        })
    }
}

/// One (target, transform chain) pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct ValueSlot {
    /// The variable to read.
    pub target: TargetId,
    /// The transformation chain applied to each value.
    pub node: NodeId,
}

/// The prefix tree of transform chains.
#[derive(Clone, Debug, Serialize)]
pub struct TransformTree {
    /// Node 0 is the root (the empty chain); every other node adds one transformation to its parent's chain.
    pub nodes: Vec<TransformNode>,
}

/// One transformation applied after its parent's chain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TransformNode {
    /// The chain this node extends; `None` only for the root.
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

    /// The number of transformations in the chain ending at `node`.
    pub fn depth(&self, node: NodeId) -> usize {
        self.chain(node).len()
    }
}

/// A compiled operator.
#[derive(Clone, Debug, Serialize)]
pub struct Operator {
    /// The operator as written (`@rx`, `@pm`...).
    pub name: OperatorName,
    /// What the engine runs, with its compiled argument.
    pub kind: OpKind,
    /// `!@op`: the result is inverted.
    pub negated: bool,
    /// Literals one of which every value the operator matches contains (see the module's invariants), or none when that cannot be proved.
    #[serde(skip)]
    pub prefilter: Prefilter,
    /// Where the operator is written.
    #[serde(skip)]
    pub span: Span,
}

/// An operator argument that may hold `%{...}` macros (expanded per transaction).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Arg {
    /// A string without macros.
    Const(String),
    /// A string with `%{...}` macros, expanded per transaction.
    Macro(MacroString),
}

/// What an operator does, with its argument compiled.
#[derive(Clone, Debug, Serialize)]
pub enum OpKind {
    /// `@rx`: the compiled regex.
    Rx(RxId),
    /// `@pm`, `@pmFromFile`.
    Pm(PmId),
    /// `@streq`.
    Streq(Arg),
    /// `@contains`.
    Contains(Arg),
    /// `@containsWord`.
    ContainsWord(Arg),
    /// `@beginsWith`.
    BeginsWith(Arg),
    /// `@endsWith`.
    EndsWith(Arg),
    /// `@within`: the value is a substring of the argument.
    Within(Arg),
    /// `@strmatch`.
    Strmatch(String),
    /// `@eq`: integer comparison (ModSecurity's `stoi` semantics).
    Eq(Arg),
    /// `@ge`.
    Ge(Arg),
    /// `@gt`.
    Gt(Arg),
    /// `@le`.
    Le(Arg),
    /// `@lt`.
    Lt(Arg),
    /// `@ipMatch` / `@ipMatchFromFile`: the networks.
    IpMatch(Vec<IpRange>),
    /// `@validateByteRange`: the bytes allowed.
    ValidateByteRange(ByteSet),
    /// `@validateUrlEncoding`.
    ValidateUrlEncoding,
    /// `@validateUtf8Encoding`.
    ValidateUtf8Encoding,
    /// `@unconditionalMatch` (and the operator of `SecAction`).
    UnconditionalMatch,
    /// `@noMatch`.
    NoMatch,
    /// `@detectSQLi` (libinjection).
    DetectSqli,
    /// `@detectXSS` (libinjection).
    DetectXss,
    /// `@verifyCC` and friends: a regex finds candidates, a checksum confirms.
    Verify {
        /// The regex that finds candidates.
        rx: RxId,
        /// The check a candidate must pass.
        checksum: Checksum,
    },
    /// Parsed but not executable here (needs an external service or file
    /// format this engine does not have); never matches. A lint warning says so.
    Unsupported {
        /// The text of an unsupported operator's argument, for the lint warning.
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

    /// The compiled regex the operator runs (`@rx` and the `@verify*`
    /// operators' candidate finder).
    pub fn regex(&self) -> Option<RxId> {
        match self {
            OpKind::Rx(id) | OpKind::Verify { rx: id, .. } => Some(*id),
            _ => None,
        }
    }
}

/// The checksum of a `@verify*` operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Checksum {
    /// `@verifyCC`: Luhn.
    Luhn,
    /// `@verifyCPF`: the Brazilian CPF's two mod-11 check digits.
    Cpf,
    /// `@verifySSN`: the US social security number's rules.
    Ssn,
    /// `@verifySVNR`: the Austrian social insurance number's check digit.
    Svnr,
}

/// `@ipMatch` network: address and prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct IpRange {
    /// The network address.
    pub addr: IpAddr,
    /// The prefix length in bits.
    pub prefix: u8,
}

/// A set of bytes (`@validateByteRange`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ByteSet(pub [u64; 4]);

impl ByteSet {
    /// Adds `b` to the set.
    pub fn insert(&mut self, b: u8) {
        self.0[usize::from(b >> 6)] |= 1 << (b & 63);
    }
    /// Whether `b` is in the set.
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

/// A phrase list for `@pm`/`@pmFromFile`, matched ASCII-case-insensitively.
#[derive(Clone, Debug)]
pub struct PhraseSet {
    /// The phrases, as written.
    pub phrases: Vec<String>,
    /// Where the phrases came from (the data files of `@pmFromFile`).
    pub files: Vec<std::path::PathBuf>,
    /// The Aho-Corasick automaton over the phrases lowercased, case-sensitive
    /// (see [`PhraseSet::new`]); [`PhraseSet::find`] matches with it.
    automaton: aho_corasick::AhoCorasick,
}

impl PhraseSet {
    /// The set of `phrases`. The automaton is built case-sensitive over the
    /// lowercased phrases, and values are lowercased before the search:
    /// aho-corasick's ASCII case folding doubles the transitions, which
    /// made CRS's phrase lists 3× slower to build (27 ms of its load).
    pub fn new(
        phrases: Vec<String>,
        files: Vec<std::path::PathBuf>,
    ) -> Result<PhraseSet, aho_corasick::BuildError> {
        let lowered: Vec<String> = phrases.iter().map(|p| p.to_ascii_lowercase()).collect();
        let automaton = aho_corasick::AhoCorasick::new(&lowered)?;
        Ok(PhraseSet {
            phrases,
            files,
            automaton,
        })
    }

    /// The index of the phrase of the first match in `value`
    /// (ASCII-case-insensitive; the match that ends first, as
    /// ModSecurity's `@pm` reports). `lowered` is scratch space for the
    /// value's lowercased copy (reused: it allocates only while it grows).
    pub fn find(&self, value: &[u8], lowered: &mut Vec<u8>) -> Option<usize> {
        lowered.clear();
        lowered.extend(value.iter().map(u8::to_ascii_lowercase));
        self.automaton
            .find(lowered.as_slice())
            .map(|m| m.pattern().as_usize())
    }
}

/// A string with `%{VAR}` / `%{COLLECTION.key}` references.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct MacroString {
    /// Literal text and variable references, in order.
    pub parts: Vec<MacroPart>,
}

/// A piece of a [`MacroString`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum MacroPart {
    /// Text copied as is.
    Literal(String),
    /// A `%{VAR}` or `%{COLLECTION.key}` reference.
    Var {
        /// The variable (or collection).
        variable: Variable,
        /// The collection key, if any.
        key: Option<String>,
    },
}

impl MacroString {
    /// A string that holds no macro.
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
    /// `setvar`.
    SetVar(SetVar),
    /// `ctl`.
    Ctl(Ctl),
    /// `initcol:COLLECTION=KEY`.
    InitCol {
        /// The persistent collection (IP, SESSION, USER, GLOBAL, RESOURCE).
        collection: Variable,
        /// Its key, expanded per transaction.
        key: MacroString,
    },
    /// `expirevar:NAME=SECONDS`.
    ExpireVar {
        /// The variable, `collection.name`.
        name: MacroString,
        /// Its lifetime in seconds.
        seconds: MacroString,
    },
    /// `deprecatevar:NAME=VALUE/SECONDS`.
    DeprecateVar {
        /// The variable, `collection.name`.
        name: MacroString,
        /// The decrement and period, as written.
        value: MacroString,
    },
    /// `setenv:NAME=VALUE`.
    SetEnv {
        /// The environment variable's name.
        name: MacroString,
        /// Its value.
        value: MacroString,
    },
    /// `setuid`: initialises the USER collection.
    SetUid(MacroString),
    /// `setsid`: initialises the SESSION collection.
    SetSid(MacroString),
    /// `setrsc`: initialises the RESOURCE collection.
    SetRsc(MacroString),
    /// Accepted, no effect in this engine (exec, sanitise*, append, prepend...).
    Ignored {
        /// The action.
        action: crate::names::Action,
        /// Its argument, if any.
        value: Option<String>,
    },
}

/// `setvar:collection.name=value` (`=+`, `=-`, `!` delete).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SetVar {
    /// The collection (usually TX).
    pub collection: Variable,
    /// The member's name, expanded per transaction.
    pub name: MacroString,
    /// The name is one literal without ASCII capitals: the engine (which
    /// stores names lowercased) uses it as written, without a look at each
    /// byte on every `setvar`.
    pub lowercase_literal: bool,
    /// What is done to it.
    pub op: SetVarOp,
    /// Which selector regexes the stored name is known to match or not,
    /// whatever the request: a scan of `TX` by a selector (`TX:/^header_name_920450_/`,
    /// ~150 keys per request) reads the answer kept with each key instead of
    /// testing it.
    pub key_selectors: KeySelectors,
}

/// The answers of the program's first 64 selector regexes
/// ([`Program::selector_regexes`], bit `i` for regex `i`) for a collection
/// key, where they are known before the key is: for a `setvar` with a
/// constant name, every answer; with a computed name
/// (`tx.header_name_920450_%{tx.0}`), those its literal beginning decides.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct KeySelectors {
    /// The regexes whose answer is known.
    pub known: u64,
    /// Of those, the ones that match.
    pub matched: u64,
}

impl KeySelectors {
    /// What the selector regexes of `regexes` say of a key named by
    /// `name` (stored lowercased, as `setvar` stores names).
    pub fn of(regexes: &[SelectorRegex], name: &MacroString) -> KeySelectors {
        let mut k = KeySelectors::default();
        for (i, rx) in regexes.iter().enumerate().take(64) {
            if let Some(m) = rx.answer_for_name(name) {
                k.known |= 1 << i;
                k.matched |= u64::from(m) << i;
            }
        }
        k
    }

    /// Selector regex `i`'s answer, if known.
    #[inline]
    pub fn get(&self, i: usize) -> Option<bool> {
        let bit = 1u64.checked_shl(i as u32)?;
        (self.known & bit != 0).then_some(self.matched & bit != 0)
    }
}

/// What a `setvar` does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum SetVarOp {
    /// `=value`.
    Set(MacroString),
    /// `=+value`: add to the current integer value.
    Add(MacroString),
    /// `=-value`: subtract from it.
    Sub(MacroString),
    /// `!name`: delete it.
    Delete,
}

/// `ctl:` — per-transaction configuration changes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Ctl {
    /// `ctl:ruleEngine`.
    RuleEngine(EngineMode),
    /// `ctl:ruleRemoveById`: id ranges.
    RuleRemoveById(Vec<(u64, u64)>),
    /// `ctl:ruleRemoveByTag`: a regex over tags.
    RuleRemoveByTag(String),
    /// `ctl:ruleRemoveByMsg`: a regex over messages.
    RuleRemoveByMsg(String),
    /// `ctl:ruleRemoveTargetById`.
    RuleRemoveTargetById {
        /// The id ranges.
        ids: Vec<(u64, u64)>,
        /// The target removed from them.
        target: Exclusion,
    },
    /// `ctl:ruleRemoveTargetByTag`.
    RuleRemoveTargetByTag {
        /// The tag regex.
        tag: String,
        /// The target removed from the rules.
        target: Exclusion,
    },
    /// `ctl:ruleRemoveTargetByMsg`.
    RuleRemoveTargetByMsg {
        /// The message regex.
        msg: String,
        /// The target removed from the rules.
        target: Exclusion,
    },
    /// `ctl:requestBodyProcessor` (URLENCODED, MULTIPART, JSON, XML).
    RequestBodyProcessor(String),
    /// `ctl:requestBodyAccess`.
    RequestBodyAccess(bool),
    /// `ctl:responseBodyAccess`.
    ResponseBodyAccess(bool),
    /// `ctl:forceRequestBodyVariable`.
    ForceRequestBodyVariable(bool),
    /// `ctl:requestBodyLimit`.
    RequestBodyLimit(u64),
    /// `ctl:responseBodyLimit`.
    ResponseBodyLimit(u64),
    /// `ctl:auditEngine`.
    AuditEngine(AuditEngine),
    /// `ctl:auditLogParts`.
    AuditLogParts(AuditPartsChange),
    /// Options accepted without effect here (debugLogLevel, hashEngine...).
    Ignored {
        /// The option's name.
        option: String,
        /// Its value.
        value: String,
    },
}

#[cfg(test)]
mod audit_tests {
    use super::{AuditEngine, AuditParts, AuditPartsChange};

    #[test]
    fn audit_parts_parse_print_and_change() {
        assert_eq!(AuditParts::DEFAULT.to_string(), "ABCFHZ");
        let p = AuditParts::parse("ZBA").expect("valid");
        assert_eq!(p.to_string(), "ABZ");
        assert!(p.contains('B') && !p.contains('C') && !p.contains('a'));
        for bad in ["", "ABX", "abc", "A B", "L"] {
            assert_eq!(AuditParts::parse(bad), None, "{bad:?}");
        }
        let add = AuditPartsChange::parse("+EK").expect("valid");
        assert_eq!(p.apply(add).to_string(), "ABEKZ");
        let remove = AuditPartsChange::parse("-BZ").expect("valid");
        assert_eq!(p.apply(remove).to_string(), "A");
        let set = AuditPartsChange::parse("HZ").expect("valid");
        assert_eq!(p.apply(set).to_string(), "HZ");
        assert_eq!(AuditPartsChange::parse("+"), None);
    }

    #[test]
    fn audit_engine_modes_ignore_case() {
        assert_eq!(
            AuditEngine::parse("relevantONLY"),
            Some(AuditEngine::RelevantOnly)
        );
        assert_eq!(AuditEngine::parse("On"), Some(AuditEngine::On));
        assert_eq!(AuditEngine::parse("sometimes"), None);
    }
}

#[cfg(test)]
mod line_feed_tests {
    use super::has_line_feed;

    #[test]
    fn finds_a_line_feed_at_every_position_of_every_length() {
        // Bytes around `\n` and with its low bits, which a word trick
        // could confuse with it.
        for filler in [b'a', 0x0b, 0x09, 0x8a, 0x00, 0xff, 0x0a ^ 0x80] {
            for len in 0..=40 {
                let mut b = vec![filler; len];
                assert!(!has_line_feed(&b), "{filler:#x} x {len}");
                for at in 0..len {
                    b[at] = b'\n';
                    assert!(has_line_feed(&b), "{filler:#x} x {len}, at {at}");
                    b[at] = filler;
                }
            }
        }
    }
}
