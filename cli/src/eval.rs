//! `waf eval`: evaluate one request or a JSONL corpus and print one decision
//! per request (the formats are in docs/formats.md; they are the peers', so
//! decisions compare with Coraza's and ModSecurity's via `compare.py`).

use crate::error::{CliError, CmdResult};
use crate::input::RuleInput;
use std::io::{BufRead, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use waf_engine::Ruleset;
use waf_harness::request::{decide, Request};

#[derive(clap::Args, Debug)]
#[command(group = clap::ArgGroup::new("what").required(true).args(["request", "corpus"]))]
pub struct Args {
    #[command(flatten)]
    pub input: RuleInput,
    /// One request as a JSON object (`-` for standard input).
    #[arg(long, value_name = "FILE")]
    pub request: Option<PathBuf>,
    /// A corpus: one JSON request per line (blank lines are ignored).
    #[arg(long, value_name = "FILE.jsonl")]
    pub corpus: Option<PathBuf>,
    /// Where to write one decision per line (default: standard output).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Exit 1 when any request is intercepted (blocked, dropped,
    /// redirected); without it, eval exits 0 whatever it decides.
    #[arg(long)]
    pub exit_code: bool,
    #[command(flatten)]
    pub engine: crate::input::EngineFlags,
}

pub fn run(args: Args) -> CmdResult {
    let rs = args
        .input
        .ruleset()?
        .with_eval_options(args.engine.options());
    let out: Box<dyn Write> = match &args.out {
        Some(p) => Box::new(
            std::fs::File::create(p)
                .map_err(|e| CliError::usage(format!("cannot write `{}`: {e}", p.display())))?,
        ),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut out = BufWriter::new(out);
    let mut blocked = 0usize;
    match (&args.request, &args.corpus) {
        (Some(p), None) => one(&rs, p, &mut out, &mut blocked)?,
        (None, Some(p)) => corpus(&rs, p, &mut out, &mut blocked)?,
        _ => {
            return Err(CliError::usage(
                "give --request FILE or --corpus FILE.jsonl",
            ))
        }
    }
    out.flush()
        .map_err(|e| CliError::usage(format!("cannot write the decisions: {e}")))?;
    if args.exit_code && blocked > 0 {
        return Err(CliError::findings(format!("{blocked} request(s) blocked")));
    }
    Ok(())
}

fn write_decision(
    rs: &Ruleset,
    req: &Request,
    id: String,
    out: &mut dyn Write,
    blocked: &mut usize,
) -> Result<(), String> {
    let r = req.to_corpus_request(id).map_err(|e| e.to_string())?;
    let d = decide(rs, &r);
    if d.blocked() {
        *blocked += 1;
    }
    let line = serde_json::to_string(&d).map_err(|e| e.to_string())?;
    writeln!(out, "{line}").map_err(|e| format!("cannot write the decisions: {e}"))
}

fn one(rs: &Ruleset, path: &Path, out: &mut dyn Write, blocked: &mut usize) -> CmdResult {
    let mut text = String::new();
    if path.as_os_str() == "-" {
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| CliError::usage(format!("standard input: {e}")))?;
    } else {
        text = std::fs::read_to_string(path)
            .map_err(|e| CliError::usage(format!("cannot read `{}`: {e}", path.display())))?;
    }
    let shown = if path.as_os_str() == "-" {
        "<stdin>".to_string()
    } else {
        path.display().to_string()
    };
    let req = Request::parse(&text).map_err(|e| CliError::usage(format!("{shown}: {e}")))?;
    let id = req.id_or(|| "1".into());
    write_decision(rs, &req, id, out, blocked).map_err(|e| CliError::usage(format!("{shown}: {e}")))
}

fn corpus(rs: &Ruleset, path: &Path, out: &mut dyn Write, blocked: &mut usize) -> CmdResult {
    let f = std::fs::File::open(path)
        .map_err(|e| CliError::usage(format!("cannot read `{}`: {e}", path.display())))?;
    for (n, line) in std::io::BufReader::new(f).lines().enumerate() {
        let at = |e: &dyn std::fmt::Display| {
            CliError::usage(format!("{}:{}: {e}", path.display(), n + 1))
        };
        let line = line.map_err(|e| at(&e))?;
        if line.trim().is_empty() {
            continue;
        }
        let req = Request::parse(&line).map_err(|e| at(&e))?;
        let id = req.id_or(|| (n + 1).to_string());
        write_decision(rs, &req, id, out, blocked).map_err(|e| at(&e))?;
    }
    Ok(())
}
