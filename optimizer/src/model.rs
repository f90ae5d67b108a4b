//! What a suggestion is: a kind, a place, a change, a reason, a safety
//! verdict, and the text edits that apply it.

use serde::Serialize;
use waf_compiler::source::Span;

/// The kinds of rewrite `waf suggest` knows (see `docs/optimizer.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// `t:lowercase` whose work a `(?i)` flag on the regex does.
    RegexFlag,
    /// A transform chain extended or reordered to reuse a chain other rules
    /// already compute on the same values.
    SharePrefix,
    /// A transformation that changes nothing the operator can see.
    RedundantTransform,
    /// Transformations of `SecDefaultAction` that apply because the rule does
    /// not start with `t:none`.
    MissingTNone,
    /// A target that makes the rule read values it already reads, or more
    /// than it needs.
    CheaperTarget,
    /// An `@rx` that is a list of plain words: `@pm` does it with one scan.
    RxToPm,
    /// An `@rx` with no literal the prefilter can use.
    MissingLiteral,
}

impl Kind {
    /// Every kind, in a stable order.
    pub const ALL: &'static [Kind] = &[
        Kind::RegexFlag,
        Kind::SharePrefix,
        Kind::RedundantTransform,
        Kind::MissingTNone,
        Kind::CheaperTarget,
        Kind::RxToPm,
        Kind::MissingLiteral,
    ];

    /// The kind's stable name (JSON, lint codes, `--kind`).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::RegexFlag => "regex-flag",
            Kind::SharePrefix => "share-prefix",
            Kind::RedundantTransform => "redundant-transform",
            Kind::MissingTNone => "missing-t-none",
            Kind::CheaperTarget => "cheaper-target",
            Kind::RxToPm => "rx-to-pm",
            Kind::MissingLiteral => "missing-literal",
        }
    }
}

/// A name that is not one of [`Kind::ALL`]'s.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownKind(pub String);

impl std::fmt::Display for UnknownKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
        write!(
            f,
            "unknown kind `{}` (one of: {})",
            self.0,
            names.join(", ")
        )
    }
}

impl std::error::Error for UnknownKind {}

impl std::str::FromStr for Kind {
    type Err = UnknownKind;

    fn from_str(s: &str) -> Result<Kind, UnknownKind> {
        Kind::ALL
            .iter()
            .copied()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownKind(s.to_string()))
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether a suggestion may be applied without reading it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Safety {
    /// The rewritten rule matches exactly the same requests, with the same
    /// matched values: `--apply` writes it.
    Equivalent,
    /// The rewrite can change what matches, or what a later action sees; a
    /// person must decide. `--apply` leaves it out unless asked.
    NeedsReview,
}

impl Safety {
    /// How the safety is printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Safety::Equivalent => "equivalent",
            Safety::NeedsReview => "needs review",
        }
    }
}

/// One replacement of source text: `span` (a byte range of one file) becomes
/// `text`. An insertion has an empty span.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Edit {
    /// The source text replaced.
    #[serde(skip)]
    pub span: Span,
    /// The new text.
    pub text: String,
}

/// A rewrite candidate.
#[derive(Clone, Debug, Serialize)]
pub struct Suggestion {
    /// What kind of rewrite.
    pub kind: Kind,
    /// Whether the rewrite is proved equivalent or needs review.
    pub safety: Safety,
    /// The rule's `id`.
    pub rule_id: u64,
    /// `file:line` of the rule (or chain link) the change is in.
    pub location: String,
    /// Where the change is, for diagnostics.
    #[serde(skip)]
    pub span: Span,
    /// What to change, e.g. "`t:lowercase` → `(?i)` at the start of the pattern".
    pub change: String,
    /// Why it is cheaper, and why it is (or may not be) equivalent.
    pub why: String,
    /// The text edits that apply it; empty when only a person can (a
    /// restructured regex, say).
    pub edits: Vec<Edit>,
    /// With a corpus: what it would save, measured.
    pub gain: Option<Gain>,
}

/// Work a suggestion removes, measured on a corpus with `waf profile`'s
/// counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Gain {
    /// Share of the whole rule-evaluation time spent in this rule.
    pub rule_time_share: f64,
    /// Transformation applications the rewrite no longer needs, over the corpus.
    pub transforms_saved: u64,
    /// Bytes those applications read.
    pub bytes_saved: u64,
    /// Values the rule no longer tests (a target dropped).
    pub values_dropped: u64,
    /// Operator runs the rule made on the corpus (for `missing-literal`: runs a
    /// prefilter would have had the chance to skip).
    pub op_runs: u64,
    /// A sentence for people.
    pub summary: String,
}
