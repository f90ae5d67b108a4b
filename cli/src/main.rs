//! `waf`: a thin command line over the compiler (and, later, the engine).

mod bench;
mod compile;
mod corpus;
mod eval;
mod ftw;
mod input;
mod lint;
mod profile;
mod report;
mod suggest;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// A ModSecurity-compatible WAF rule compiler and engine.
#[derive(Parser)]
#[command(name = "waf", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check rule files and report problems (exit 0: clean, 1: findings, 2: usage or I/O error).
    Lint(lint::Args),
    /// Compile rule files and print the IR (`--dump-ir`) or statistics (`--stats`).
    Compile(compile::Args),
    /// Evaluate one request or a request corpus (JSONL) and print decisions.
    Eval(eval::Args),
    /// Run test suites in-process (`waf test ftw`: go-ftw YAML regression tests).
    Test(ftw::TestArgs),
    /// Measure throughput and latency on request corpora (JSONL, HAR, go-ftw YAML).
    Bench(bench::Args),
    /// List rewrites that make rules cheaper (equivalent or needing review); apply them to copies (--apply --out DIR, --diff) and prove them on a corpus (--verify).
    Suggest(suggest::Args),
    /// Report where rule evaluation time goes on a corpus: memo hit ratio per transform chain, hot entries, per-rule cost (table, JSON, HTML).
    Profile(profile::Args),
}

/// Exit codes shared by the subcommands.
pub const EXIT_OK: u8 = 0;
pub const EXIT_FINDINGS: u8 = 1;
pub const EXIT_USAGE: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Lint(a) => lint::run(a),
        Command::Compile(a) => compile::run(a),
        Command::Eval(a) => eval::run(a),
        Command::Test(a) => ftw::run_test(a),
        Command::Bench(a) => bench::run(a),
        Command::Suggest(a) => suggest::run(a),
        Command::Profile(a) => profile::run(a),
    };
    ExitCode::from(code)
}
