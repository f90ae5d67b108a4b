//! `waf lint`: diagnostics for rule pull requests.

use crate::input::RuleInput;
use crate::report::{self, Format};
use crate::{CliError, CmdResult};
use waf_compiler::diag::Severity;
use waf_compiler::Options;
use waf_optimizer::perf::PerfOptions;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub input: RuleInput,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Treat warnings as findings (exit 1 when there is any).
    #[arg(long, value_name = "warnings", value_parser = ["warnings"])]
    pub deny: Option<String>,
    /// Colour for the human format.
    #[arg(long, value_enum, default_value_t = report::Color::Auto)]
    pub color: report::Color,
    /// Report rules whose estimated cost exceeds this many value tests per
    /// request (`perf-cost`; see docs/optimizer.md for the estimate).
    #[arg(long, value_name = "N", default_value_t = waf_optimizer::perf::DEFAULT_BUDGET,
          conflicts_with = "no_perf")]
    pub perf_budget: f64,
    /// Leave out the performance checks (`perf-*` codes).
    #[arg(long)]
    pub no_perf: bool,
    /// Show at most N diagnostics per file; the rest are counted in a note
    /// (and still decide the exit code).
    #[arg(long, value_name = "N", default_value_t = report::DEFAULT_MAX_PER_FILE,
          value_parser = clap::builder::TypedValueParser::map(clap::value_parser!(u32).range(1..), |n| n as usize))]
    pub max_diagnostics: usize,
}

pub fn run(args: Args) -> CmdResult {
    let analysis = args
        .input
        .analyse(&Options::default())
        .map_err(CliError::usage)?;
    let mut diags = analysis.compiled.diagnostics.clone();
    // What ModSecurity v3 accepts and we load with a warning does not
    // belong in a rule pull request.
    diags.escalate_compat();
    if !args.no_perf {
        let opts = PerfOptions {
            budget: args.perf_budget,
        };
        for d in waf_optimizer::perf::diagnostics(&analysis, &opts) {
            diags.push(d);
        }
        diags.sort();
    }
    let diags = &diags;
    let sources = analysis.compiled.sources();
    let shown = report::Shown::capped(sources, diags, args.max_diagnostics);
    report::write(args.format, args.color, sources, &shown)?;
    let deny_warnings = args.deny.is_some();
    let findings = diags
        .iter()
        .any(|d| d.severity == Severity::Error || deny_warnings);
    if findings {
        Err(CliError::reported())
    } else {
        Ok(())
    }
}
