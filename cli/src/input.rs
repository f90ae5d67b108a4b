//! Which rule files a command reads: `-c` files, then PATHS (files or
//! directories of `*.conf`), or the embedded default ruleset when none is given.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use waf_compiler::{compile_files, compile_str, Compiled, Options};
use waf_engine::Ruleset;
use waf_optimizer::Analysis;

/// Our default ruleset, compiled into the binary (the engine embeds it).
pub use waf_engine::{
    DEFAULT_RULES as DEFAULT_RULESET, DEFAULT_RULES_NAME as DEFAULT_RULESET_NAME,
};

#[derive(clap::Args, Debug, Clone)]
pub struct RuleInput {
    /// A configuration file loaded before PATHS (e.g. crs-setup.conf); repeatable.
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    pub configs: Vec<PathBuf>,
    /// Rule files, or directories whose `*.conf` files are read in name order.
    /// Without any, the embedded default ruleset is used.
    #[arg(value_name = "PATHS")]
    pub paths: Vec<PathBuf>,
}

impl RuleInput {
    /// The files to read in order, or an error message for a missing path.
    pub fn files(&self) -> Result<Vec<PathBuf>, String> {
        let mut out = Vec::new();
        for p in self.configs.iter().chain(&self.paths) {
            if p.is_dir() {
                let mut confs: Vec<PathBuf> = std::fs::read_dir(p)
                    .map_err(|e| format!("cannot read directory `{}`: {e}", p.display()))?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|f| f.extension().is_some_and(|x| x == "conf") && f.is_file())
                    .collect();
                confs.sort();
                if confs.is_empty() {
                    return Err(format!("no `*.conf` file in `{}`", p.display()));
                }
                out.extend(confs);
            } else if p.is_file() {
                out.push(p.clone());
            } else {
                return Err(format!("no such file or directory: `{}`", p.display()));
            }
        }
        Ok(out)
    }

    pub fn is_default(&self) -> bool {
        self.configs.is_empty() && self.paths.is_empty()
    }

    /// Compiles the selected files (or the default ruleset).
    pub fn compile(&self, opts: &Options) -> Result<Compiled, String> {
        if self.is_default() {
            return Ok(compile_str(
                Path::new(DEFAULT_RULESET_NAME),
                DEFAULT_RULESET,
                opts,
            ));
        }
        Ok(compile_files(&self.files()?, opts))
    }

    /// What `waf compile -o` puts in an artifact: the selected files, or
    /// the default ruleset's text.
    pub fn artifact_entry(&self) -> Result<waf_compiler::artifact::Entry, String> {
        use waf_compiler::artifact::Entry;
        if self.is_default() {
            return Ok(Entry::Text {
                name: PathBuf::from(DEFAULT_RULESET_NAME),
                text: DEFAULT_RULESET.to_string(),
            });
        }
        Ok(Entry::Files(self.files()?))
    }

    /// Compiles the selected files keeping their AST (for `waf suggest` and
    /// the performance checks of `waf lint`).
    pub fn analyse(&self, opts: &Options) -> Result<Analysis, String> {
        if self.is_default() {
            return Ok(Analysis::text(
                Path::new(DEFAULT_RULESET_NAME),
                DEFAULT_RULESET,
                opts,
            ));
        }
        Ok(Analysis::files(&self.files()?, &HashMap::new(), opts))
    }
}

/// The requests of `paths` (JSONL, HAR, go-ftw YAML; see docs/formats.md):
/// at least one, or a usage error.
pub fn load_corpus(paths: &[PathBuf]) -> Result<waf_harness::corpus::Corpus, crate::CliError> {
    match waf_harness::corpus::load(paths) {
        Ok(c) if !c.requests.is_empty() => Ok(c),
        Ok(_) => Err(crate::CliError::usage("the corpus has no request")),
        Err(e) => Err(crate::CliError::usage(e)),
    }
}

/// A clap value parser for counts that must be at least 1 (passes, threads):
/// zero would silently mean one, or nothing.
pub fn positive(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// Switches of the engine's fast path. Decisions are identical in every
/// combination; they exist to prove that, and to measure what each part buys.
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub struct EngineFlags {
    /// Run every operator on every value (no prefilter gating).
    #[arg(long)]
    pub no_prefilter: bool,
    /// Transform values for each rule anew (no memoization; implies --no-xcache).
    #[arg(long)]
    pub no_memo: bool,
    /// No cross-transaction cache of per-value results.
    #[arg(long)]
    pub no_xcache: bool,
    /// Evaluate the rules that partial evaluation at load proved cannot match.
    #[arg(long)]
    pub no_fold: bool,
    /// Values each thread's cross-transaction cache holds before it starts
    /// over (its memory grows with use, up to about 2 KiB per value with
    /// CRS).
    #[arg(long, value_name = "VALUES", default_value_t = waf_engine::EvalOptions::DEFAULT_XCACHE_RECORDS, value_parser = positive)]
    pub value_cache: usize,
}

impl EngineFlags {
    pub fn options(&self) -> waf_engine::EvalOptions {
        waf_engine::EvalOptions {
            memo: !self.no_memo,
            prefilter: !self.no_prefilter,
            xcache: !self.no_xcache && !self.no_memo,
            fold: !self.no_fold,
            xcache_records: self.value_cache,
            ..waf_engine::EvalOptions::default()
        }
    }
}

impl RuleInput {
    /// The engine's ruleset for a command: a usage error for a missing path;
    /// for rules that do not compile, the diagnostics on standard error and a
    /// findings error.
    /// Compiled with [`Ruleset::compile_options`].
    pub fn ruleset(&self) -> Result<Ruleset, crate::CliError> {
        let compiled = self
            .compile(&Ruleset::compile_options())
            .map_err(crate::CliError::usage)?;
        ruleset_or_report(compiled).map_err(crate::CliError::findings)
    }
}

/// The engine's ruleset, or the rendered diagnostics on stderr and an error
/// message when the rules do not compile.
pub fn ruleset_or_report(compiled: Compiled) -> Result<Ruleset, String> {
    Ruleset::from_compiled(compiled).map_err(|e| {
        crate::report::eprint(e.sources(), e.diagnostics());
        format!("the rules have {} error(s)", e.error_count())
    })
}
