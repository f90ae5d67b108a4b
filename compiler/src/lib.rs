//! The SecLang compiler: rule files → AST → checked rules → IR.
//!
//! See `docs/architecture.md` for the pipeline and the IR's invariants.

pub mod diag;
pub mod source;
