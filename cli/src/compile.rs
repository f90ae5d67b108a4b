//! `waf compile`: the IR and statistics of a configuration.

use crate::input::RuleInput;
use crate::report;
use crate::{CliError, CmdResult};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;
use waf_compiler::artifact;
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
    /// Write a compiled artifact (conventionally `*.wafc`) that `waf serve`,
    /// `waf eval`, `waf bench` and the connectors load in place of the rules
    /// (it holds every file the rules read, and their regexes compiled).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutFormat {
    Text,
    Json,
}

pub fn run(args: Args) -> CmdResult {
    let start = Instant::now();
    let mut artifact = None;
    let compiled = match &args.output {
        Some(_) => {
            let (bytes, compiled) = artifact::build(
                &args.input.artifact_entry().map_err(CliError::usage)?,
                &Options::default(),
            );
            artifact = bytes;
            compiled
        }
        None => args
            .input
            .compile(&Options::default())
            .map_err(CliError::usage)?,
    };
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
    if let (Some(path), Some(bytes)) = (&args.output, &artifact) {
        write_atomically(path, bytes)?;
        let dense = program
            .regexes
            .iter()
            .filter(|r| r.dense_dfa_bytes().is_some())
            .count();
        eprintln!(
            "waf compile: wrote {} ({:.1} MiB: {} files, {} regexes, {} dense DFAs) in {} ms",
            path.display(),
            bytes.len() as f64 / (1024.0 * 1024.0),
            program.sources.files().count(),
            program.regexes.len(),
            dense,
            elapsed.as_millis()
        );
        if !args.dump_ir && !args.stats {
            return Ok(());
        }
    }
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

/// Writes `bytes` to a temporary file beside `path`, then renames it over
/// `path`: a server reloading `path` meanwhile reads the old artifact or the
/// new one, never half of one.
fn write_atomically(path: &Path, bytes: &[u8]) -> CmdResult {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "rules.wafc".into());
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let written = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(CliError::usage(format!(
            "cannot write `{}`: {e}",
            path.display()
        )));
    }
    Ok(())
}
