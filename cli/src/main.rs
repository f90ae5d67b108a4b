//! `waf`: a thin command line over the compiler (and, later, the engine).

mod bench;
mod compile;
mod error;
mod eval;
mod ftw;
mod input;
mod lint;
mod profile;
mod progress;
mod report;
mod serve;
mod spoa;
mod suggest;

use clap::{Parser, Subcommand};
pub use error::{CliError, CmdResult, EXIT_FINDINGS, EXIT_OK, EXIT_USAGE};

/// A subcommand's `--help` epilogue: examples, then the exit codes with what
/// "findings" means for it.
macro_rules! help {
    ($examples:literal, $findings:literal) => {
        concat!(
            "Examples:\n",
            $examples,
            "\n\nExit codes: 0 ok; ",
            $findings,
            "; 2 usage or I/O error."
        )
    };
}
pub(crate) use help;
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
    /// Check rule files and report problems.
    #[command(after_help = help!(
        "  waf lint                                       # the embedded default ruleset
  waf lint -c crs/crs-setup.conf.example crs/rules # CRS: setup first, then its rules
  waf lint --format sarif my-rules.conf > lint.sarif",
        "1 errors (or warnings with --deny warnings)"
    ))]
    Lint(lint::Args),
    /// Compile rule files and print the IR (`--dump-ir`) or statistics (`--stats`).
    #[command(after_help = help!(
        "  waf compile --stats                            # the embedded default ruleset
  waf compile --dump-ir --format json my-rules.conf",
        "1 the rules do not compile"
    ))]
    Compile(compile::Args),
    /// Evaluate one request or a request corpus (JSONL) and print decisions.
    #[command(after_help = help!(
        "  echo '{\"uri\": \"/?id=1%27%20or%201=1--\"}' | waf eval --request - --exit-code
  waf eval -c crs.conf --corpus requests.jsonl --out decisions.jsonl
(request and decision formats: docs/formats.md)",
        "1 the rules do not compile, or (with --exit-code) a request was blocked"
    ))]
    Eval(eval::Args),
    /// Run test suites in-process (`waf test ftw`: go-ftw YAML regression tests).
    Test(ftw::TestArgs),
    /// Measure throughput and latency on request corpora (JSONL, HAR, go-ftw YAML).
    #[command(after_help = help!(
        "  waf bench --corpus requests.jsonl                # the embedded default ruleset
  waf bench -c crs.conf --corpus requests.jsonl --compare naive --json",
        "1 the rules do not compile, or --compare naive decided a request differently"
    ))]
    Bench(bench::Args),
    /// List rewrites that make rules cheaper (equivalent or needing review); apply them to copies (--apply --out DIR, --diff) and prove them on a corpus (--verify).
    #[command(after_help = help!(
        "  waf suggest -c crs/crs-setup.conf.example crs/rules
  waf suggest my-rules.conf --apply --out /tmp/rewritten --verify requests.jsonl",
        "1 the rules do not compile, or --verify found a request decided differently"
    ))]
    Suggest(suggest::Args),
    /// Report where rule evaluation time goes on a corpus: memo hit ratio per transform chain, hot entries, per-rule cost (table, JSON, HTML).
    #[command(after_help = help!(
        "  waf profile -c crs.conf --corpus requests.jsonl --html profile.html",
        "1 the rules do not compile"
    ))]
    Profile(profile::Args),
    /// Run the WAF as a reverse proxy in front of an application: all five phases, bodies held until inspected, phase-4 blocks before any byte is sent, ModSecurity-style error log, WebSocket pass-through, reload on SIGHUP or a change to the rule files, SIGTERM drains.
    #[command(after_help = help!(
        "  waf serve --upstream http://127.0.0.1:9000             # the embedded default ruleset
  waf serve -c /tmp/crs-pl1.conf --listen 0.0.0.0:8080 --upstream http://10.0.0.5:80 --error-log waf.log
  waf serve --config waf.yaml                             # sites, TLS, exceptions: see docs/serve.md
  waf serve --config waf.yaml --check                     # check it all, then exit (as nginx -t)
  kill -HUP <pid>                                         # reload the rules (errors keep the old ones)
  kill -USR1 <pid>                                        # reopen the log files (log rotation)
  kill -TERM <pid>                                        # stop: requests in flight finish (--shutdown-timeout)",
        "1 the rules (or the manifest) do not compile"
    ))]
    Serve(Box<serve::Args>),
    /// Run the WAF as an HAProxy SPOE agent: HAProxy sends each request (line, headers, buffered body), the agent runs phases 1, 2 and 5 and answers with txn.waf.* variables that HAProxy's rules act on (see connectors/haproxy/).
    #[command(after_help = help!(
        "  waf spoa -c /tmp/crs-pl1.conf --listen 127.0.0.1:12345 --error-log waf.log
  haproxy -f connectors/haproxy/haproxy.cfg                # with the shipped SPOE configuration
  waf spoa -c rules.conf --collection-redis redis://10.0.0.5:6379  # counters shared by the agents",
        "1 the rules do not compile"
    ))]
    Spoa(spoa::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (name, result) = match cli.command {
        Command::Lint(a) => ("lint", lint::run(a)),
        Command::Compile(a) => ("compile", compile::run(a)),
        Command::Eval(a) => ("eval", eval::run(a)),
        Command::Test(a) => ("test ftw", ftw::run_test(a)),
        Command::Bench(a) => ("bench", bench::run(a)),
        Command::Suggest(a) => ("suggest", suggest::run(a)),
        Command::Profile(a) => ("profile", profile::run(a)),
        Command::Serve(a) => ("serve", serve::run(*a)),
        Command::Spoa(a) => ("spoa", spoa::run(a)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if let Some(m) = e.message() {
                eprintln!("waf {name}: {m}");
            }
            ExitCode::from(e.code())
        }
    }
}
