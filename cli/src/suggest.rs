//! `waf suggest`: rewrites that make rules cheaper, applied to copies of the
//! rule files and proved on a corpus.
//!
//! The passes live in `waf-optimizer`; this module lists their results,
//! writes the rewritten files (`--apply --out`, `--diff`) and replays a
//! corpus through the original and the rewritten configuration
//! (`--verify`), comparing every decision and matched-rule list.

use crate::bench::{decision, run_one};
use crate::input::RuleInput;
use crate::{CliError, CmdResult};
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use waf_compiler::ir::Program;
use waf_compiler::Options;
use waf_engine::{EvalOptions, EvalStats};
use waf_harness::corpus::{Corpus, CorpusRequest};
use waf_optimizer::{edit, Analysis, Kind, Origin, Safety, Suggestion};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
}

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("rewrites").args(["apply", "diff", "verify"]).multiple(true)))]
pub struct Args {
    #[command(flatten)]
    pub input: RuleInput,
    /// Request corpora (JSONL, HAR, go-ftw YAML) to measure each suggestion's gain on.
    #[arg(long, value_name = "FILE|DIR", num_args = 1..)]
    pub corpus: Vec<PathBuf>,
    /// Only these kinds (repeatable): regex-flag, share-prefix,
    /// redundant-transform, missing-t-none, cheaper-target, rx-to-pm,
    /// missing-literal.
    #[arg(long, value_name = "KIND", value_parser = |s: &str| s.parse::<Kind>())]
    pub kind: Vec<Kind>,
    /// Output format of the list.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Write the rewritten rule files (equivalent suggestions only, unless
    /// --include-review) into --out.
    #[arg(long, requires = "out")]
    pub apply: bool,
    /// Directory for --apply (created; files keep their paths relative to
    /// the rules' common directory).
    #[arg(long, value_name = "DIR", requires = "apply")]
    pub out: Option<PathBuf>,
    /// Also apply suggestions that need review (those that have edits);
    /// with --apply, --diff or --verify.
    #[arg(long, requires = "rewrites")]
    pub include_review: bool,
    /// Print a unified diff of every rewritten file.
    #[arg(long)]
    pub diff: bool,
    /// Replay these corpora through the original and the rewritten rules:
    /// every decision and matched-rule list must be identical (exit 1 at the
    /// first difference). Reports memo hit ratio and time before and after.
    #[arg(long, value_name = "FILE|DIR", num_args = 1..)]
    pub verify: Vec<PathBuf>,
    /// Timed passes over the --verify corpora.
    #[arg(long, default_value_t = 3, value_name = "N", requires = "verify",
          value_parser = crate::input::positive)]
    pub passes: usize,
}

pub fn run(args: Args) -> CmdResult {
    let opts = Options::default();
    let analysis = args.input.analyse(&opts).map_err(CliError::usage)?;
    let Some(program) = analysis.program() else {
        let c = &analysis.compiled;
        crate::report::eprint(c.sources(), &c.diagnostics);
        return Err(CliError::findings(format!(
            "the rules have {} error(s)",
            c.diagnostics.error_count()
        )));
    };
    let kinds = &args.kind;
    let mut found: Vec<(Suggestion, Origin)> = analysis
        .suggestions()
        .into_iter()
        .filter(|(s, _)| kinds.is_empty() || kinds.contains(&s.kind))
        .collect();

    if !args.corpus.is_empty() {
        let corpus = crate::input::load_corpus(&args.corpus)?;
        // The engine takes a program of its own; the listing keeps the first.
        let rs = args.input.ruleset()?;
        let run = crate::profile::collect(&rs, &corpus.requests, 1, EvalOptions::default());
        waf_optimizer::measure(&mut found, &measurements(&run));
    }

    match args.format {
        Format::Table => print_table(&found, program.rules.len()),
        Format::Json => {
            let list: Vec<&Suggestion> = found.iter().map(|(s, _)| s).collect();
            let out = json!({
                "rules": program.rules.len(),
                "counts": counts_json(&found),
                "suggestions": list,
            });
            println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        }
    }

    if !(args.apply || args.diff || !args.verify.is_empty()) {
        return Ok(());
    }
    let chosen: Vec<&Suggestion> = found
        .iter()
        .map(|(s, _)| s)
        .filter(|s| s.safety == Safety::Equivalent || args.include_review)
        .filter(|s| !s.edits.is_empty())
        .collect();
    let applied = edit::apply(&program.sources, &chosen);
    eprintln!(
        "waf suggest: {} suggestion(s) applied to {} file(s){}",
        applied.applied.len(),
        applied.files.len(),
        if applied.conflicts.is_empty() {
            String::new()
        } else {
            format!(
                "; {} left out because their edits overlap an applied one",
                applied.conflicts.len()
            )
        }
    );
    if args.diff {
        let rel = relative_paths(program);
        for (path, new) in &applied.files {
            let old = program
                .sources
                .files()
                .find(|(_, f)| &f.path == path)
                .map(|(_, f)| f.text.as_str())
                .unwrap_or("");
            print!(
                "{}",
                edit::unified_diff(&rel(path).display().to_string(), old, new)
            );
        }
    }
    if args.apply {
        let Some(out) = &args.out else {
            return Err(CliError::usage("--apply needs --out DIR"));
        };
        write_out(out, program, &applied.files).map_err(CliError::usage)?;
    }
    if args.verify.is_empty() {
        return Ok(());
    }
    let corpus = crate::input::load_corpus(&args.verify)?;
    let overrides: HashMap<PathBuf, String> = applied
        .files
        .iter()
        .map(|(p, t)| (p.canonicalize().unwrap_or_else(|_| p.clone()), t.clone()))
        .collect();
    verify(&args, &opts, &overrides, &corpus)
}

/// The profile counters in the optimizer's terms.
fn measurements(run: &crate::profile::ProfileRun) -> waf_optimizer::Measurements {
    waf_optimizer::Measurements {
        rule_nanos: run.rules.nanos.clone(),
        rule_op_runs: run.rules.op_runs.clone(),
        node_computed: run.chains.computed.clone(),
        node_bytes: run.chains.bytes_in.clone(),
        slot_lookups: run.chains.slot_lookups.clone(),
    }
}

/// The files the rules were read from (the embedded default has none: it is
/// compiled from memory).
fn rule_files(input: &RuleInput) -> Vec<PathBuf> {
    input.files().unwrap_or_default()
}

fn counts_json(found: &[(Suggestion, Origin)]) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    for &k in Kind::ALL {
        let eq = found
            .iter()
            .filter(|(s, _)| s.kind == k && s.safety == Safety::Equivalent)
            .count();
        let rv = found
            .iter()
            .filter(|(s, _)| s.kind == k && s.safety == Safety::NeedsReview)
            .count();
        m.insert(
            k.as_str().into(),
            json!({"equivalent": eq, "needs_review": rv}),
        );
    }
    m.into()
}

fn print_table(found: &[(Suggestion, Origin)], rules: usize) {
    let eq = found
        .iter()
        .filter(|(s, _)| s.safety == Safety::Equivalent)
        .count();
    println!(
        "{} suggestion(s) for {rules} rules: {eq} equivalent, {} need review\n",
        found.len(),
        found.len() - eq
    );
    for (s, _) in found {
        println!(
            "{:<20} {:<13} rule {:<8} {}",
            s.kind.as_str(),
            s.safety.as_str(),
            s.rule_id,
            s.location
        );
        println!("    change: {}", s.change);
        println!("    why:    {}", s.why);
        if let Some(g) = &s.gain {
            println!("    gain:   {}", g.summary);
        }
        if s.edits.is_empty() {
            println!("    apply:  by hand");
        }
        println!();
    }
    println!("{:<20} {:>10} {:>13}", "kind", "equivalent", "needs review");
    for &k in Kind::ALL {
        let n = |safety| {
            found
                .iter()
                .filter(|(s, _)| s.kind == k && s.safety == safety)
                .count()
        };
        println!(
            "{:<20} {:>10} {:>13}",
            k.as_str(),
            n(Safety::Equivalent),
            n(Safety::NeedsReview)
        );
    }
}

/// Writes each rewritten file under `out`, at its path relative to the
/// directory all the configuration's files share.
fn write_out(
    out: &Path,
    program: &Program,
    files: &BTreeMap<PathBuf, String>,
) -> Result<(), String> {
    let rel = relative_paths(program);
    for (path, text) in files {
        let dest = out.join(rel(path));
        if let Some(d) = dest.parent() {
            std::fs::create_dir_all(d)
                .map_err(|e| format!("cannot create `{}`: {e}", d.display()))?;
        }
        std::fs::write(&dest, text)
            .map_err(|e| format!("cannot write `{}`: {e}", dest.display()))?;
        eprintln!("wrote {}", dest.display());
    }
    Ok(())
}

/// A file's path relative to the directory all the configuration's files
/// share (what `--out` and `--diff` show).
fn relative_paths(program: &Program) -> impl Fn(&Path) -> PathBuf {
    let all: Vec<PathBuf> = program
        .sources
        .files()
        .map(|(_, f)| f.path.canonicalize().unwrap_or_else(|_| f.path.clone()))
        .collect();
    let base = common_dir(&all);
    move |path: &Path| {
        let canon = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        let rel = match &base {
            Some(b) => canon.strip_prefix(b).unwrap_or(&canon).to_path_buf(),
            None => PathBuf::from(canon.file_name().unwrap_or_default()),
        };
        rel.components()
            .filter(|c| matches!(c, std::path::Component::Normal(_)))
            .collect()
    }
}

fn common_dir(paths: &[PathBuf]) -> Option<PathBuf> {
    let mut it = paths.iter().filter_map(|p| p.parent());
    let mut base = it.next()?.to_path_buf();
    for p in it {
        while !p.starts_with(&base) {
            if !base.pop() {
                return None;
            }
        }
    }
    Some(base)
}

/// Both configurations on the same requests, interleaved: decisions must
/// agree on every request; memo hit ratio and time are reported for each.
fn verify(
    args: &Args,
    opts: &Options,
    overrides: &HashMap<PathBuf, String>,
    corpus: &Corpus,
) -> CmdResult {
    let files = rule_files(&args.input);
    if files.is_empty() {
        return Err(CliError::usage(
            "--verify needs rule files (-c/PATHS), not the embedded default",
        ));
    }
    let compile = |ov: &HashMap<PathBuf, String>, what: &str| {
        let a = Analysis::files(&files, ov, opts);
        crate::input::ruleset_or_report(a.compiled)
            .map_err(|e| format!("the {what} rules do not compile: {e}"))
    };
    let (before, after) = match (
        compile(&HashMap::new(), "original"),
        compile(overrides, "rewritten"),
    ) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => return Err(CliError::findings(e)),
    };
    let mut tb = before.transaction();
    let mut ta = after.transaction();
    let mut lat_b = Vec::with_capacity(corpus.requests.len() * args.passes);
    let mut lat_a = Vec::with_capacity(corpus.requests.len() * args.passes);
    let (mut busy_b, mut busy_a) = (Duration::ZERO, Duration::ZERO);
    let passes = args.passes.max(1);
    let mut first: Option<(EvalStats, EvalStats)> = None;
    for pass in 0..passes {
        tb.clear_cache();
        ta.clear_cache();
        for (i, r) in corpus.requests.iter().enumerate() {
            let after_first = (pass + i) % 2 == 1;
            if after_first {
                timed(&mut ta, r, &mut lat_a, &mut busy_a);
            }
            timed(&mut tb, r, &mut lat_b, &mut busy_b);
            if !after_first {
                timed(&mut ta, r, &mut lat_a, &mut busy_a);
            }
            if pass == 0 {
                let (db, da) = (decision(&tb), decision(&ta));
                if db != da {
                    println!(
                        "verify: NOT EQUIVALENT at request {} ({} of {}):\n  original:  {:?}\n  rewritten: {:?}",
                        r.id,
                        i + 1,
                        corpus.requests.len(),
                        db,
                        da
                    );
                    return Err(CliError::reported());
                }
            }
        }
        // Counters of one pass give the ratios; later passes only repeat them.
        first.get_or_insert((tb.stats(), ta.stats()));
    }
    let (sb, sa) = first.unwrap_or_default();
    lat_b.sort_unstable();
    lat_a.sort_unstable();
    let med = |v: &[u64]| v.get(v.len() / 2).copied().unwrap_or(0) as f64 / 1000.0;
    println!(
        "verify: {} requests, decisions and matched rules identical on every one",
        corpus.requests.len()
    );
    println!(
        "{:<28} {:>12} {:>12} {:>9}",
        "", "original", "rewritten", "change"
    );
    let row = |name: &str, b: f64, a: f64, unit: &str| {
        let change = if b == 0.0 { 0.0 } else { (a - b) / b * 100.0 };
        println!("{name:<28} {b:>10.2}{unit} {a:>10.2}{unit} {change:>+8.1}%");
    };
    let (hb, ha) = (sb.memo_hit_ratio() * 100.0, sa.memo_hit_ratio() * 100.0);
    println!(
        "{:<28} {hb:>10.2} % {ha:>10.2} % {:>+7.1}pp",
        "memo hit ratio",
        ha - hb
    );
    row(
        "transformations / request",
        per_req(&sb, corpus, |s| s.memo_misses),
        per_req(&sa, corpus, |s| s.memo_misses),
        "  ",
    );
    row(
        "operator runs / request",
        per_req(&sb, corpus, |s| s.op_runs),
        per_req(&sa, corpus, |s| s.op_runs),
        "  ",
    );
    row("median latency", med(&lat_b), med(&lat_a), "µs");
    row(
        "total time",
        busy_b.as_secs_f64() * 1000.0,
        busy_a.as_secs_f64() * 1000.0,
        "ms",
    );
    println!(
        "({} timed passes, interleaved; counters from the first pass)",
        passes
    );
    Ok(())
}

fn per_req(s: &EvalStats, c: &Corpus, f: impl Fn(&EvalStats) -> u64) -> f64 {
    f(s) as f64 / c.requests.len().max(1) as f64
}

fn timed(
    tx: &mut waf_engine::Transaction<'_>,
    r: &CorpusRequest,
    lat: &mut Vec<u64>,
    busy: &mut Duration,
) {
    let t = Instant::now();
    run_one(tx, r);
    let d = t.elapsed();
    *busy += d;
    lat.push(d.as_nanos() as u64);
}
