//! `waf compile`: the IR and statistics of a configuration.

use crate::input::RuleInput;
use crate::report;
use crate::{CliError, CmdResult};
use std::io::Write;
use std::time::Instant;
use waf_compiler::stats::Stats;
use waf_compiler::Options;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub input: RuleInput,
    /// Print the compiled IR.
    #[arg(long)]
    pub dump_ir: bool,
    /// Print counts: rules, chains, transform chains, operators, regexes, prefilters, compile time.
    #[arg(long)]
    pub stats: bool,
    /// Output format of --dump-ir and --stats.
    #[arg(long, value_enum, default_value_t = OutFormat::Text)]
    pub format: OutFormat,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutFormat {
    Text,
    Json,
}

pub fn run(args: Args) -> CmdResult {
    let start = Instant::now();
    let compiled = args
        .input
        .compile(&Options::default())
        .map_err(CliError::usage)?;
    let elapsed = start.elapsed();
    let Some(program) = &compiled.program else {
        let sources = compiled.sources();
        let shown =
            report::Shown::capped(sources, &compiled.diagnostics, report::DEFAULT_MAX_PER_FILE);
        report::write(report::Format::Human, report::Color::Auto, sources, &shown)?;
        return Err(CliError::findings(format!(
            "{} error(s); nothing compiled",
            compiled.diagnostics.error_count()
        )));
    };
    let mut out = std::io::stdout().lock();
    let mut text = String::new();
    if args.dump_ir {
        text.push_str(&match args.format {
            OutFormat::Text => waf_compiler::ir::dump::text(program),
            OutFormat::Json => waf_compiler::ir::dump::json(program),
        });
        text.push('\n');
    }
    if args.stats || !args.dump_ir {
        let stats = Stats::of(program).with_timings(elapsed, &compiled.timings);
        match args.format {
            OutFormat::Text => text.push_str(&stats.to_string()),
            OutFormat::Json => {
                text.push_str(&serde_json::to_string_pretty(&stats).unwrap_or_default());
                text.push('\n');
            }
        }
    }
    out.write_all(text.as_bytes())?;
    if compiled.diagnostics.warning_count() > 0 {
        eprintln!(
            "waf compile: {} warning(s); run `waf lint` to see them",
            compiled.diagnostics.warning_count()
        );
    }
    Ok(())
}
