//! The rule optimizer: rewrites that make SecLang rules cheaper to run, each
//! with a safety verdict, and the text edits that apply them.
//!
//! ```text
//! files ──load──▶ AST ──lower──▶ IR ──suggest──▶ Suggestions ──apply──▶ rewritten files
//!                  └──────────── spans ───────────────┘
//! ```
//!
//! Suggestions are found on the IR, where transform chains are interned and
//! sharing between rules is visible ([`suggest`]); they are written back as
//! edits of the original text, so comments and layout survive ([`edit`]).
//! Every transform-chain rewrite rests on a law of [`algebra`], and every
//! regex rewrite on an analysis of `waf_compiler::rx::analysis`; both are
//! tested against the engine's own implementations. `waf lint` reports the
//! performance findings of [`perf`] from the same passes. `docs/optimizer.md`
//! describes each kind and when it is safe.

#![warn(missing_docs)]

pub mod algebra;
pub mod edit;
pub mod model;
pub mod perf;
pub mod rules;
pub mod suggest;

pub use model::{Edit, Gain, Kind, Safety, Suggestion};
pub use suggest::Origin;

use std::collections::HashMap;
use std::path::PathBuf;
use waf_compiler::ast::Item;
use waf_compiler::diag::Diagnostics;
use waf_compiler::ir::Program;
use waf_compiler::{artifact, load, lower, Compiled, Options};

/// A configuration compiled with its AST kept: what the passes need.
pub struct Analysis {
    /// The compilation: program (when there was no error), sources and diagnostics.
    pub compiled: Compiled,
    /// The parsed items, which the program's spans point into.
    pub items: Vec<Item>,
}

impl Analysis {
    /// Reads and compiles `paths`, taking the text of the files named in
    /// `overrides` (by canonical path) from there instead of the disk.
    pub fn files(
        paths: &[PathBuf],
        overrides: &HashMap<PathBuf, String>,
        opts: &Options,
    ) -> Analysis {
        if let [only] = paths {
            if overrides.is_empty() && artifact::is_artifact(only) {
                return Analysis::artifact(only, opts);
            }
        }
        let mut diags = Diagnostics::new();
        let parsed = load::load_files_with(paths, overrides, &mut diags);
        Analysis::lower(parsed, opts, diags)
    }

    /// The sources a compiled artifact holds, compiled with its regexes.
    fn artifact(path: &std::path::Path, opts: &Options) -> Analysis {
        let a = match artifact::open(path) {
            Ok(a) => a,
            Err(refusal) => {
                return Analysis {
                    compiled: *refusal,
                    items: Vec::new(),
                }
            }
        };
        let (entry, opts) = artifact::options(a, opts);
        let mut diags = Diagnostics::new();
        let parsed = match &entry {
            artifact::Entry::Files(paths) => load::load_files_in(paths, &opts.files, &mut diags),
            artifact::Entry::Text { name, text } => {
                load::load_str_in(name.clone(), text, &opts.files, &mut diags)
            }
        };
        Analysis::lower(parsed, &opts, diags)
    }

    /// Compiles configuration text held in memory.
    pub fn text(name: impl Into<PathBuf>, text: &str, opts: &Options) -> Analysis {
        let mut diags = Diagnostics::new();
        let parsed = load::load_str(name, text, &mut diags);
        Analysis::lower(parsed, opts, diags)
    }

    fn lower(parsed: load::Parsed, opts: &Options, diags: Diagnostics) -> Analysis {
        let items = parsed.items.clone();
        let compiled = lower::lower(parsed, opts, diags);
        Analysis { compiled, items }
    }

    /// The program, when the configuration compiled without error.
    pub fn program(&self) -> Option<&Program> {
        self.compiled.program.as_ref()
    }

    /// Every suggestion, with the IR origin of each (empty without a program).
    pub fn suggestions(&self) -> Vec<(Suggestion, Origin)> {
        match self.program() {
            Some(p) => suggest::suggest(p, &self.items),
            None => Vec::new(),
        }
    }
}

/// What a corpus run measured, in the IR's terms (filled by `waf suggest
/// --corpus` from the engine's profile counters).
#[derive(Clone, Debug, Default)]
pub struct Measurements {
    /// Per rule (`Program::rules` index): nanoseconds, operator runs.
    pub rule_nanos: Vec<u64>,
    /// Per rule: operator runs.
    pub rule_op_runs: Vec<u64>,
    /// Per transform node: applications and bytes read.
    pub node_computed: Vec<u64>,
    /// Per transform node: bytes read.
    pub node_bytes: Vec<u64>,
    /// Per value slot: values served.
    pub slot_lookups: Vec<u64>,
}

/// Fills each suggestion's [`Gain`] from measurements.
pub fn measure(suggestions: &mut [(Suggestion, Origin)], m: &Measurements) {
    let total: u64 = m.rule_nanos.iter().sum();
    for (s, o) in suggestions.iter_mut() {
        let at = |v: &[u64], i: usize| v.get(i).copied().unwrap_or(0);
        let share = if total == 0 {
            0.0
        } else {
            at(&m.rule_nanos, o.rule) as f64 / total as f64
        };
        let transforms_saved: u64 = o
            .freed_nodes
            .iter()
            .map(|n| at(&m.node_computed, n.index()))
            .sum();
        let bytes_saved: u64 = o
            .freed_nodes
            .iter()
            .map(|n| at(&m.node_bytes, n.index()))
            .sum();
        let values_dropped: u64 = o
            .dropped_slots
            .iter()
            .map(|sl| at(&m.slot_lookups, sl.index()))
            .sum();
        let op_runs = at(&m.rule_op_runs, o.rule);
        let mut parts = vec![format!("rule time {:.2}%", share * 100.0)];
        if transforms_saved > 0 {
            parts.push(format!(
                "{transforms_saved} transformations ({bytes_saved} bytes) no longer computed"
            ));
        } else if matches!(
            s.kind,
            Kind::RegexFlag | Kind::SharePrefix | Kind::RedundantTransform
        ) {
            parts.push("no transformation saved here: other rules compute the same chain".into());
        }
        if values_dropped > 0 {
            parts.push(format!("{values_dropped} value tests no longer made"));
        }
        if matches!(s.kind, Kind::MissingLiteral | Kind::RxToPm) {
            parts.push(format!("{op_runs} operator runs"));
        }
        s.gain = Some(Gain {
            rule_time_share: share,
            transforms_saved,
            bytes_saved,
            values_dropped,
            op_runs,
            summary: parts.join(", "),
        });
    }
}
