//! The SecLang compiler: rule files → AST → checked rules → IR.
//!
//! ```text
//! files ──load/parse──▶ Items (AST with spans) ──lower──▶ Program (IR) + Diagnostics
//! ```
//!
//! [`compile_files`] and [`compile_str`] run the whole pipeline; the result
//! carries every diagnostic, and the [`ir::Program`] when there was no error.
//! See `docs/architecture.md` for the pipeline and the IR's invariants.

#![warn(missing_docs)]

pub mod artifact;
pub mod ast;
pub mod diag;
pub mod files;
pub mod ir;
pub mod load;
pub mod lower;
pub mod names;
pub mod parse;
pub mod rx;
pub mod source;
pub mod stats;

pub use lower::{CompileError, Compiled, Options, Timings};
use std::path::PathBuf;

/// Compiles configuration files, in order, as one configuration. One path
/// that is a compiled artifact ([`artifact`]) loads that artifact.
pub fn compile_files(paths: &[PathBuf], opts: &Options) -> Compiled {
    if let [only] = paths {
        if opts.precompiled.is_none() && artifact::is_artifact(only) {
            return artifact::compile_path(only, opts);
        }
    }
    compile_files_from_source(paths, opts)
}

/// [`compile_files`], reading every path as configuration text.
pub fn compile_files_from_source(paths: &[PathBuf], opts: &Options) -> Compiled {
    let mut diags = diag::Diagnostics::new();
    let start = std::time::Instant::now();
    let parsed = load::load_files_in(paths, &opts.files, &mut diags);
    let parse = start.elapsed();
    let mut compiled = lower::lower(parsed, opts, diags);
    compiled.timings.parse = parse;
    compiled
}

/// Compiles configuration text; `name` is used in diagnostics and as the base
/// of relative `Include` and data-file paths.
pub fn compile_str(name: impl Into<PathBuf>, text: &str, opts: &Options) -> Compiled {
    let mut diags = diag::Diagnostics::new();
    let start = std::time::Instant::now();
    let parsed = load::load_str_in(name, text, &opts.files, &mut diags);
    let parse = start.elapsed();
    let mut compiled = lower::lower(parsed, opts, diags);
    compiled.timings.parse = parse;
    compiled
}
