//! The ruleset the proxy runs, swapped atomically on reload.

use arc_swap::ArcSwap;
use std::path::PathBuf;
use std::sync::Arc;
use waf_compiler::CompileError;
use waf_engine::Ruleset;

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
    fn compile(&self) -> Result<Ruleset, CompileError> {
        match self {
            RuleSource::Default => Ruleset::default_rules(),
            RuleSource::Files(files) => Ruleset::from_files(files),
            RuleSource::Text { name, text } => Ruleset::from_str(name, text),
        }
    }
}

/// The current ruleset and where it came from. Readers take an `Arc` of the
/// ruleset for the whole request; a reload stores a new one, which later
/// requests see, while requests in flight keep theirs.
pub struct Rules {
    source: RuleSource,
    current: ArcSwap<Ruleset>,
}

impl Rules {
    /// Compiles `source`.
    pub fn load(source: RuleSource) -> Result<Rules, CompileError> {
        let rs = source.compile()?;
        Ok(Rules {
            source,
            current: ArcSwap::from_pointee(rs),
        })
    }

    /// The ruleset new requests use.
    pub fn current(&self) -> Arc<Ruleset> {
        self.current.load_full()
    }

    /// Compiles the source again and swaps the result in; on error the
    /// running ruleset stays.
    pub fn reload(&self) -> Result<(), CompileError> {
        let rs = self.source.compile()?;
        self.current.store(Arc::new(rs));
        Ok(())
    }
}
