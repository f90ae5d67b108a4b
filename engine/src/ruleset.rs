//! A compiled ruleset, shared by all threads.

use crate::injection::{Injection, LibinjectionRs};
use crate::transaction::Transaction;
use std::path::PathBuf;
use waf_compiler::ir::Program;
use waf_compiler::{compile_files, compile_str, Compiled, Options};

/// An immutable compiled configuration (`Send + Sync`): create one, share it
/// (e.g. in an `Arc`), and create a [`Transaction`] per request.
#[derive(Debug)]
pub struct Ruleset {
    program: Program,
    injection: Box<dyn Injection>,
}

impl Ruleset {
    pub fn new(program: Program) -> Ruleset {
        Ruleset {
            program,
            injection: Box::new(LibinjectionRs),
        }
    }

    /// Replaces the `@detectSQLi`/`@detectXSS` implementation.
    pub fn with_injection(mut self, injection: Box<dyn Injection>) -> Ruleset {
        self.injection = injection;
        self
    }

    /// Compiles configuration files; on errors, returns the compilation (with
    /// its diagnostics) instead.
    pub fn from_files(paths: &[PathBuf]) -> Result<Ruleset, Box<Compiled>> {
        Self::from_compiled(compile_files(paths, &Options::default()))
    }

    /// Compiles configuration text (`name` is the base of relative paths).
    pub fn from_str(name: &str, text: &str) -> Result<Ruleset, Box<Compiled>> {
        Self::from_compiled(compile_str(name, text, &Options::default()))
    }

    fn from_compiled(mut c: Compiled) -> Result<Ruleset, Box<Compiled>> {
        match c.program.take() {
            Some(p) => Ok(Ruleset::new(p)),
            None => Err(Box::new(c)),
        }
    }

    pub fn program(&self) -> &Program {
        &self.program
    }

    pub fn injection(&self) -> &dyn Injection {
        self.injection.as_ref()
    }

    pub fn transaction(&self) -> Transaction<'_> {
        Transaction::new(self)
    }
}
