//! One error type for every subcommand: why it stopped, and the exit code.
//!
//! Commands return [`Result<(), CliError>`](CmdResult); `main` prints the
//! message (prefixed `waf COMMAND:`) and exits with the code. Every
//! subcommand uses the same codes, listed with examples in its `--help`.

use std::fmt;

/// The command did what was asked and found nothing to report.
pub const EXIT_OK: u8 = 0;
/// Findings: lint errors, a blocked request (`eval --exit-code`), decisions
/// that differ (`bench --compare`, `suggest --verify`), a pass rate under
/// the minimum (`test ftw`), rules that do not compile.
pub const EXIT_FINDINGS: u8 = 1;
/// Usage or I/O: bad flags, a path that cannot be read or written, a corpus
/// that cannot be parsed.
pub const EXIT_USAGE: u8 = 2;

/// Why a command stopped short of success.
#[derive(Debug)]
pub struct CliError {
    code: u8,
    /// Printed as `waf COMMAND: message`; `None` when the command already
    /// reported (a lint report, a failed verification).
    message: Option<String>,
}

/// What every command returns.
pub type CmdResult = Result<(), CliError>;

impl CliError {
    /// A usage or I/O error (exit 2).
    pub fn usage(message: impl fmt::Display) -> CliError {
        CliError {
            code: EXIT_USAGE,
            message: Some(message.to_string()),
        }
    }

    /// Findings, with a closing message (exit 1).
    pub fn findings(message: impl fmt::Display) -> CliError {
        CliError {
            code: EXIT_FINDINGS,
            message: Some(message.to_string()),
        }
    }

    /// Findings the command has already reported (exit 1).
    pub fn reported() -> CliError {
        CliError {
            code: EXIT_FINDINGS,
            message: None,
        }
    }

    /// The process exit code.
    pub fn code(&self) -> u8 {
        self.code
    }

    /// What to print, if anything.
    pub fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.message {
            Some(m) => f.write_str(m),
            None => write!(f, "exit code {}", self.code),
        }
    }
}

impl std::error::Error for CliError {}

/// A corpus that cannot be read or parsed: a usage error.
impl From<waf_harness::corpus::CorpusError> for CliError {
    fn from(e: waf_harness::corpus::CorpusError) -> CliError {
        CliError::usage(e)
    }
}

/// Tests, overrides or selections that cannot be read: a usage error.
impl From<waf_harness::ftw::FtwError> for CliError {
    fn from(e: waf_harness::ftw::FtwError) -> CliError {
        CliError::usage(e)
    }
}

/// Writing to standard output or a file failed: an I/O error.
impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> CliError {
        CliError::usage(format!("cannot write the output: {e}"))
    }
}
