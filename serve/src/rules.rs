//! The ruleset the proxy runs, swapped atomically on reload.

use crate::watch::Inputs;
use arc_swap::ArcSwap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use waf_compiler::files::Files;
use waf_compiler::CompileError;
use waf_engine::{CollectionStore, Ruleset};

/// Where the rules come from, so that a reload can read them again.
#[derive(Clone, Debug)]
pub enum RuleSource {
    /// The embedded default ruleset.
    Default,
    /// Rule files, read in order.
    Files(Vec<PathBuf>),
    /// Rules given as text (tests, embedding), with the name diagnostics use.
    Text {
        /// The name shown in diagnostics (and the base of relative paths).
        name: String,
        /// The SecLang text.
        text: String,
    },
}

impl RuleSource {
    /// Compiles the rules, and says what the compilation read (whether it
    /// succeeded or not: a fix to a broken include must be seen too) and
    /// what it warned of (see [`deployment_warnings`]).
    fn compile(&self) -> (Result<Ruleset, CompileError>, Inputs, Vec<String>) {
        let files = Files::recording();
        let opts = waf_compiler::Options {
            files: files.clone(),
            ..Ruleset::compile_options()
        };
        let compiled = match self {
            RuleSource::Default => {
                let rs = Ruleset::default_rules().map(with_shared_store);
                return (rs, Inputs::default(), Vec::new());
            }
            RuleSource::Files(paths) => waf_compiler::compile_files(paths, &opts),
            RuleSource::Text { name, text } => waf_compiler::compile_str(name, text, &opts),
        };
        let mut inputs = Inputs::default();
        if let Some(read) = files.recorded() {
            inputs.extend(Inputs {
                files: read
                    .reads
                    .iter()
                    .map(|(path, bytes)| (path.clone(), Some(crate::watch::digest(bytes))))
                    .collect(),
                globs: read.globs.into_iter().collect(),
            });
        }
        if let RuleSource::Files(paths) = self {
            // A compiled artifact is read outside the recording.
            inputs.extend(Inputs {
                files: paths.iter().map(|p| (p.clone(), None)).collect(),
                globs: vec![],
            });
        }
        let warnings = deployment_warnings(&compiled);
        (
            Ruleset::from_compiled(compiled).map(with_shared_store),
            inputs,
            warnings,
        )
    }
}

/// The warnings of a compilation that the proxy reports when it loads the
/// rules, one line each (`file:line:col: warning[code]: message (hint)`):
/// rules that load but are probably a mistake (`suspicious`, `compat-*`),
/// such as request bodies inspected with nothing refusing one that cannot
/// be parsed. The performance findings are left to `waf lint`.
fn deployment_warnings(c: &waf_compiler::Compiled) -> Vec<String> {
    use waf_compiler::diag::{Code, Severity};
    c.diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Warning)
        .filter(|d| d.code == Code::Suspicious || d.code.is_compat())
        .map(|d| {
            let mut line = format!(
                "{}: warning[{}]: {}",
                c.sources().location(d.span),
                d.code.as_str(),
                d.message
            );
            if let Some(hint) = &d.hint {
                line.push_str(&format!(" (hint: {hint})"));
            }
            line
        })
        .collect()
}

/// The persistent collections (`initcol`, `setsid`, ...) of this process.
/// Every ruleset compiled here uses it, those of reloads and of every site
/// too: counters and flags survive reloads, and the sites of a manifest
/// see the same `IP` collection (as libmodsecurity's in-memory backend,
/// one per process). The manifest's `rate_limit` rules count in it too, and
/// `collection_file` keeps it across restarts and handoffs (collection_file.rs).
pub fn collection_store() -> &'static Arc<CollectionStore> {
    static STORE: std::sync::OnceLock<Arc<CollectionStore>> = std::sync::OnceLock::new();
    STORE.get_or_init(Default::default)
}

fn with_shared_store(rs: Ruleset) -> Ruleset {
    rs.with_collection_store(collection_store().clone())
}

/// The current ruleset and where it came from. Readers take an `Arc` of the
/// ruleset for the whole request; a reload stores a new one, which later
/// requests see, while requests in flight keep theirs.
pub struct Rules {
    source: RuleSource,
    current: ArcSwap<Ruleset>,
    /// What the last compilation (refused or not) read.
    inputs: Mutex<Inputs>,
    /// What the last compilation that succeeded warned of.
    warnings: Mutex<Vec<String>>,
}

impl Rules {
    /// Compiles `source`.
    pub fn load(source: RuleSource) -> Result<Rules, CompileError> {
        let (rs, inputs, warnings) = source.compile();
        Ok(Rules {
            source,
            current: ArcSwap::from_pointee(rs?),
            inputs: Mutex::new(inputs),
            warnings: Mutex::new(warnings),
        })
    }

    /// The ruleset new requests use.
    pub fn current(&self) -> Arc<Ruleset> {
        self.current.load_full()
    }

    /// Compiles the source again and swaps the result in; on error the
    /// running ruleset stays.
    pub fn reload(&self) -> Result<(), CompileError> {
        let (rs, inputs, warnings) = self.source.compile();
        if let Ok(mut i) = self.inputs.lock() {
            *i = inputs;
        }
        let new = Arc::new(rs?);
        if let Ok(mut w) = self.warnings.lock() {
            *w = warnings;
        }
        let mut retired = crate::memory::Retired::default();
        retired.new_ruleset(&new);
        retired.old(&self.current.swap(new));
        retired.release();
        Ok(())
    }

    /// The warnings of the running rules' compilation, one line each (see
    /// [`deployment_warnings`]), for the proxy to report at start and
    /// after a reload.
    pub fn warnings(&self) -> Vec<String> {
        self.warnings.lock().map(|w| w.clone()).unwrap_or_default()
    }

    /// What the last compilation read (see watch.rs).
    pub(crate) fn inputs(&self) -> Inputs {
        self.inputs.lock().map(|i| i.clone()).unwrap_or_default()
    }
}
