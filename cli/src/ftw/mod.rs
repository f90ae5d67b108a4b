//! `waf test ftw`: go-ftw YAML regression tests (CRS's
//! `tests/regression/tests`), run in-process against the engine.
//!
//! go-ftw sends each stage's request to a web server with the WAF in front
//! of a backend (albedo), then reads the WAF's error log between two marker
//! requests. Here every stage instead goes through:
//! 1. [`request::build`]: the bytes go-ftw would put on the wire;
//! 2. [`frontend::receive`]: the HTTP server in front of the WAF (Apache's
//!    behaviour for malformed requests: the 400s that CRS's `status`
//!    expectations describe);
//! 3. a fresh [`waf_engine::Transaction`]: connection (client 127.0.0.1, a new
//!    port per request; server `dest_addr`:`port`), URI, headers, phase 1,
//!    body, phase 2, then the [`backend`] response (albedo: `POST /reflect`
//!    returns the response its JSON body describes, anything else an empty
//!    200), phases 3 and 4, and logging;
//! 4. [`stage::check`]: go-ftw's assertions on the status the client got and
//!    on the stage's log lines (one ModSecurity-style line per matched rule
//!    that logs, with `[id "..."]`). The lines of a stage are known exactly,
//!    so no marker requests (rule 999999, `X-CRS-Test`) are needed.
//!
//! A test passes when all its stages pass; the summary counts tests.

mod backend;
pub(crate) mod frontend;
pub(crate) mod model;
pub(crate) mod request;
mod stage;
mod template;

use crate::{CliError, CmdResult};
use model::{Output, Stage, TestFile};
use regex::Regex;
use serde_json::{json, Value};
use stage::Outcome;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use waf_compiler::{compile_files, compile_str, Options};
use waf_engine::Ruleset;

/// `waf test SUITE`.
#[derive(clap::Args, Debug)]
pub struct TestArgs {
    #[command(subcommand)]
    pub suite: Suite,
}

#[derive(clap::Subcommand, Debug)]
pub enum Suite {
    /// Run go-ftw YAML regression tests (e.g. CRS's) in-process.
    #[command(after_long_help = after_help(), after_help = SHORT_HELP)]
    Ftw(Args),
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Test files, or directories searched for `**/*.y*ml` (as go-ftw does).
    /// With --crs and no DIR: CRS_DIR/tests/regression/tests.
    #[arg(value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// The WAF configuration (SecLang) to test; repeatable, read in order.
    #[arg(
        short = 'c',
        long = "config",
        value_name = "CONFIG",
        conflicts_with = "crs"
    )]
    pub configs: Vec<PathBuf>,
    /// A CRS checkout: test it with CRS's standard regression-test
    /// configuration, built in memory (see below; `--print-config` shows it).
    #[arg(long, value_name = "CRS_DIR")]
    pub crs: Option<PathBuf>,
    /// Print the configuration --crs builds, and exit.
    #[arg(long, requires = "crs")]
    pub print_config: bool,
    /// Known failures, in go-ftw's formats: `testoverride: {ignore: {"920100-4":
    /// reason}}` (also `forcepass`/`forcefail`; keys are regexes matched
    /// against the whole test id) and/or CRS's platform form
    /// (`test_overrides: [{rule_id, test_ids, reason, output}]`).
    #[arg(long, value_name = "FILE")]
    pub overrides: Option<PathBuf>,
    /// Run only tests whose id (`<rule_id>-<test_id>`) matches this regex
    /// (others count as skipped; include wins over exclude).
    #[arg(long, value_name = "REGEX")]
    pub include: Option<String>,
    /// Skip tests whose id matches this regex.
    #[arg(long, value_name = "REGEX")]
    pub exclude: Option<String>,
    /// Write a JSON report: per test, its status, reason, logged ids and expectations.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Exit 0 when passed / (passed + failed) is at least PCT percent.
    #[arg(long, value_name = "PCT", default_value = "100", value_parser = parse_pct)]
    pub min_pass_rate: f64,
    /// Also print a summary per rule file (test directory) and forced results.
    #[arg(short, long)]
    pub verbose: bool,
    /// Worker threads (default: the available parallelism).
    #[arg(short = 'j', long, value_name = "N", value_parser = crate::input::positive)]
    pub jobs: Option<usize>,
    #[command(flatten)]
    pub engine: crate::input::EngineFlags,
}

fn parse_pct(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(v) if (0.0..=100.0).contains(&v) => Ok(v),
        _ => Err(format!("`{s}` is not a percentage between 0 and 100")),
    }
}

/// The configuration `--crs DIR` builds (DIR-relative includes). Engine
/// settings and body-processor rules as in ModSecurity's
/// `modsecurity.conf-recommended` (and `../shared/peers/coraza/main.go`),
/// response bodies inspected like CRS's test containers, then rule 900005 from
/// `tests/regression/README.md` (DetectionOnly, paranoia level 4, test limits).
pub const CRS_TEST_CONFIG: &str = r#"# The CRS regression-test configuration of `waf test ftw --crs CRS_DIR`.
SecRuleEngine On
SecRequestBodyAccess On
SecResponseBodyAccess On
SecResponseBodyMimeType text/plain text/html text/xml application/json
SecRequestBodyLimit 13107200
SecRequestBodyNoFilesLimit 131072
SecRequestBodyLimitAction Reject

SecRule REQUEST_HEADERS:Content-Type "^(?:application(?:/soap\+|/)|text/)xml" "id:200000,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=XML"
SecRule REQUEST_HEADERS:Content-Type "^application/json" "id:200001,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=JSON"
SecRule REQUEST_HEADERS:Content-Type "^application/[a-z0-9.-]+[+]json" "id:200006,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=JSON"
SecRule REQBODY_ERROR "!@eq 0" "id:200002,phase:2,t:none,log,deny,status:400,msg:'Failed to parse request body.',logdata:'%{reqbody_error_msg}',severity:2"
SecRule MULTIPART_STRICT_ERROR "!@eq 0" \
    "id:200003,phase:2,t:none,log,deny,status:400,\
    msg:'Multipart request body failed strict validation: \
PE %{REQBODY_PROCESSOR_ERROR}, \
BQ %{MULTIPART_BOUNDARY_QUOTED}, \
BW %{MULTIPART_BOUNDARY_WHITESPACE}, \
DB %{MULTIPART_DATA_BEFORE}, \
DA %{MULTIPART_DATA_AFTER}, \
HF %{MULTIPART_HEADER_FOLDING}, \
LF %{MULTIPART_LF_LINE}, \
SM %{MULTIPART_MISSING_SEMICOLON}, \
IQ %{MULTIPART_INVALID_QUOTING}, \
IP %{MULTIPART_INVALID_PART}, \
IH %{MULTIPART_INVALID_HEADER_FOLDING}, \
FL %{MULTIPART_FILE_LIMIT_EXCEEDED}'"

SecAction "id:900005,\
    phase:1,\
    nolog,\
    pass,\
    ctl:ruleEngine=DetectionOnly,\
    ctl:ruleRemoveById=910000,\
    setvar:tx.blocking_paranoia_level=4,\
    setvar:tx.crs_validate_utf8_encoding=1,\
    setvar:tx.arg_name_length=100,\
    setvar:tx.arg_length=400,\
    setvar:tx.total_arg_length=64000,\
    setvar:tx.max_num_args=255,\
    setvar:tx.max_file_size=64100,\
    setvar:tx.combined_file_sizes=65535"

Include crs-setup.conf.example
Include rules/*.conf
"#;

/// The virtual file name of [`CRS_TEST_CONFIG`] inside the CRS directory.
const CRS_TEST_CONFIG_NAME: &str = "waf-ftw-crs-test.conf";

/// Examples and exit codes (`-h`; `--help` adds the details of [`after_help`]).
const SHORT_HELP: &str = crate::help!(
    "  waf test ftw --crs ../shared/crs                  # CRS's suite, CRS's test configuration
  waf test ftw -c my.conf my-tests/ --include '^9421' --json report.json",
    "1 the pass rate is under --min-pass-rate, or the rules do not compile"
);

fn after_help() -> String {
    format!(
        "{SHORT_HELP}\n\nHow stages run: each stage's request is built as go-ftw builds it, passes an emulated \
Apache front end (malformed requests get its 400 before or after the WAF's phase 1), a fresh \
transaction of the engine (all phases), and an emulated albedo backend (POST /reflect returns the \
response its JSON body describes); its log lines are those of the matched rules that log. A test \
passes when all its stages pass.\n\n\
Output: one `FAIL <id> (<file>): <reason>` line per failing stage, `SKIP` lines for tests \
ignored by --overrides or disabled, then `pass rate: ...` and, last, `N passed, N failed, N skipped`.\n\n\
--crs CRS_DIR compiles this configuration as CRS_DIR/{CRS_TEST_CONFIG_NAME}:\n\n{CRS_TEST_CONFIG}"
    )
}

// ------------------------------------------------------------------ results

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Passed,
    Failed,
    Skipped,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Passed => "passed",
            Status::Failed => "failed",
            Status::Skipped => "skipped",
        }
    }
}

/// What to do with a test before running it.
#[derive(Clone, Debug)]
enum Plan {
    Run,
    /// Skipped; `listed` ones are printed with their reason.
    Skip {
        reason: String,
        listed: bool,
    },
    ForcePass(String),
    ForceFail(String),
}

struct Job {
    id: String,
    desc: Option<String>,
    file: String,
    stages: Vec<Stage>,
    plan: Plan,
    /// Expectations replaced by a platform override (its reason).
    overridden: Option<String>,
}

struct StageResult {
    outcome: Outcome,
    fails: Vec<String>,
}

struct TestResult {
    status: Status,
    reason: String,
    stages: Vec<StageResult>,
}

// ------------------------------------------------------------------ entry

pub fn run_test(args: TestArgs) -> CmdResult {
    match args.suite {
        Suite::Ftw(a) => run(a),
    }
}

fn usage(msg: impl std::fmt::Display) -> CmdResult {
    Err(CliError::usage(msg))
}

pub fn run(args: Args) -> CmdResult {
    let crs = match &args.crs {
        Some(d) => match check_crs_dir(d) {
            Ok(d) => Some(d),
            Err(e) => return usage(e),
        },
        None => None,
    };
    if args.print_config {
        print!("{CRS_TEST_CONFIG}");
        return Ok(());
    }
    let include = match args.include.as_deref().map(Regex::new).transpose() {
        Ok(r) => r,
        Err(e) => return usage(format!("--include: {e}")),
    };
    let exclude = match args.exclude.as_deref().map(Regex::new).transpose() {
        Ok(r) => r,
        Err(e) => return usage(format!("--exclude: {e}")),
    };
    let overrides = match &args.overrides {
        Some(p) => match load_overrides(p) {
            Ok(o) => Some(o),
            Err(e) => return usage(e),
        },
        None => None,
    };
    let mut dirs = args.dirs.clone();
    if dirs.is_empty() {
        match &crs {
            Some(c) => dirs.push(c.join("tests/regression/tests")),
            None => return usage("give test directories (DIR...), or --crs CRS_DIR"),
        }
    }
    let files = match find_test_files(&dirs) {
        Ok(f) => f,
        Err(e) => return usage(e),
    };

    // The configuration.
    let start = Instant::now();
    let compiled = match (&crs, args.configs.is_empty()) {
        (Some(c), _) => compile_str(
            c.join(CRS_TEST_CONFIG_NAME),
            CRS_TEST_CONFIG,
            &Options::default(),
        ),
        (None, false) => {
            if let Some(missing) = args.configs.iter().find(|p| !p.is_file()) {
                return usage(format!("no such file: `{}`", missing.display()));
            }
            compile_files(&args.configs, &Options::default())
        }
        (None, true) => {
            return usage("give the WAF configuration with -c CONFIG, or --crs CRS_DIR")
        }
    };
    let rs = crate::input::ruleset_or_report(compiled)
        .map_err(CliError::findings)?
        .with_eval_options(args.engine.options());
    let compile_time = start.elapsed();

    // Tests.
    let mut jobs: Vec<Job> = Vec::new();
    let mut load_errors: Vec<(String, String)> = Vec::new();
    for (path, shown) in &files {
        let text = match std::fs::read(path) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) => return usage(format!("cannot read `{}`: {e}", path.display())),
        };
        match model::parse_test_file(&text) {
            Ok(Some(tf)) => plan_file(
                &tf,
                path,
                shown,
                include.as_ref(),
                exclude.as_ref(),
                overrides.as_ref(),
                &mut jobs,
            ),
            Ok(None) => {}
            Err(e) => load_errors.push((shown.clone(), first_line(&e))),
        }
    }

    let workers = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let run_start = Instant::now();
    let results = run_jobs(&rs, &jobs, workers);
    let run_time = run_start.elapsed();

    // Report.
    let (mut passed, mut failed, mut skipped) = (0usize, 0usize, 0usize);
    for (shown, e) in &load_errors {
        println!("FAIL {shown}: cannot parse the test file: {e}");
        failed += 1;
    }
    let mut per_dir: BTreeMap<String, [usize; 3]> = BTreeMap::new();
    for (job, res) in jobs.iter().zip(&results) {
        let counts = per_dir.entry(dir_of(&job.file)).or_default();
        match res.status {
            Status::Passed => {
                passed += 1;
                counts[0] += 1;
                if args.verbose && matches!(job.plan, Plan::ForcePass(_)) {
                    println!("PASS {} ({}): {}", job.id, job.file, res.reason);
                }
            }
            Status::Failed => {
                failed += 1;
                counts[1] += 1;
                let n = res.stages.len();
                let mut printed = false;
                for (i, s) in res
                    .stages
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| !s.fails.is_empty())
                {
                    let st = if n > 1 {
                        format!(" stage {}/{n}", i + 1)
                    } else {
                        String::new()
                    };
                    println!("FAIL {}{st} ({}): {}", job.id, job.file, s.fails.join("; "));
                    printed = true;
                }
                if !printed {
                    println!("FAIL {} ({}): {}", job.id, job.file, res.reason);
                }
            }
            Status::Skipped => {
                skipped += 1;
                counts[2] += 1;
                if let Plan::Skip {
                    reason,
                    listed: true,
                } = &job.plan
                {
                    println!("SKIP {} ({}): {reason}", job.id, job.file);
                }
            }
        }
    }
    if args.verbose {
        for (dir, [p, f, s]) in &per_dir {
            println!("{dir}: {p} passed, {f} failed, {s} skipped");
        }
    }
    let rate = if passed + failed == 0 {
        100.0
    } else {
        100.0 * passed as f64 / (passed + failed) as f64
    };
    eprintln!(
        "waf test ftw: {} test files, {} tests; compiled in {:.1} s, ran in {:.1} s with {workers} workers",
        files.len(),
        jobs.len(),
        compile_time.as_secs_f64(),
        run_time.as_secs_f64()
    );
    if let Some(p) = &args.json {
        let report = json_report(
            &jobs,
            &results,
            &load_errors,
            [passed, failed, skipped],
            rate,
            args.min_pass_rate,
        );
        let text = serde_json::to_string_pretty(&report).unwrap_or_default();
        if let Err(e) = std::fs::write(p, text + "\n") {
            return usage(format!("cannot write `{}`: {e}", p.display()));
        }
    }
    println!("pass rate: {} (minimum {}%)", pct(rate), args.min_pass_rate);
    println!("{passed} passed, {failed} failed, {skipped} skipped");
    if rate + 1e-9 >= args.min_pass_rate {
        Ok(())
    } else {
        Err(CliError::findings(format!(
            "pass rate {} is under the minimum {}%",
            pct(rate),
            args.min_pass_rate
        )))
    }
}

fn pct(r: f64) -> String {
    format!("{:.2}%", (r * 100.0).floor() / 100.0)
}

fn first_line(e: &str) -> String {
    e.lines().next().unwrap_or(e).to_string()
}

fn check_crs_dir(d: &Path) -> Result<PathBuf, String> {
    let d = d
        .canonicalize()
        .map_err(|e| format!("--crs `{}`: {e}", d.display()))?;
    for need in ["crs-setup.conf.example", "rules"] {
        if !d.join(need).exists() {
            return Err(format!(
                "--crs `{}`: no `{need}` (not a CRS checkout?)",
                d.display()
            ));
        }
    }
    Ok(d)
}

/// `(path, shown)`: files matching go-ftw's `**/*.y*ml` under each DIR
/// (sorted), shown relative to that DIR; files given directly are taken as is.
pub(crate) fn find_test_files(dirs: &[PathBuf]) -> Result<Vec<(PathBuf, String)>, String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
        let rd = std::fs::read_dir(dir)
            .map_err(|e| format!("cannot read directory `{}`: {e}", dir.display()))?;
        for entry in rd {
            let p = entry
                .map_err(|e| format!("cannot read directory `{}`: {e}", dir.display()))?
                .path();
            if p.is_dir() {
                walk(&p, out)?;
            } else if p
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(is_yaml_name)
            {
                out.push(p);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    for d in dirs {
        if d.is_file() {
            let shown = d.file_name().map_or_else(
                || d.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            );
            out.push((d.clone(), shown));
        } else if d.is_dir() {
            let mut found = Vec::new();
            walk(d, &mut found)?;
            found.sort();
            for p in found {
                let shown = p
                    .strip_prefix(d)
                    .unwrap_or(&p)
                    .to_string_lossy()
                    .into_owned();
                out.push((p, shown));
            }
        } else {
            return Err(format!("no such file or directory: `{}`", d.display()));
        }
    }
    Ok(out)
}

/// go-ftw's glob `*.y*ml`.
fn is_yaml_name(n: &str) -> bool {
    n.match_indices(".y")
        .any(|(i, _)| n.len() >= i + 4 && n.ends_with("ml"))
}

fn dir_of(shown: &str) -> String {
    match shown.rsplit_once('/') {
        Some((d, _)) => d.to_string(),
        None => ".".into(),
    }
}

// ------------------------------------------------------------------ overrides

struct Overrides {
    ignore: Vec<(Regex, String)>,
    forcepass: Vec<(Regex, String)>,
    forcefail: Vec<(Regex, String)>,
    /// (rule id, test ids, reason, replacement output).
    platform: Vec<(u64, Vec<u64>, String, Option<Output>)>,
}

fn load_overrides(p: &Path) -> Result<Overrides, String> {
    let text =
        std::fs::read_to_string(p).map_err(|e| format!("cannot read `{}`: {e}", p.display()))?;
    let f = model::parse_overrides(&text)
        .map_err(|e| format!("{}: {}", p.display(), first_line(&e)))?;
    let compile = |m: &BTreeMap<String, Option<String>>| -> Result<Vec<(Regex, String)>, String> {
        m.iter()
            .map(|(k, v)| {
                // Anchored (go-ftw matches unanchored, so `920100-4` would also match 920100-40).
                Regex::new(&format!("^(?:{k})$"))
                    .map(|r| (r, v.clone().unwrap_or_default()))
                    .map_err(|e| format!("{}: override key `{k}`: {e}", p.display()))
            })
            .collect()
    };
    let t = f.testoverride.unwrap_or_default();
    Ok(Overrides {
        ignore: compile(&t.ignore)?,
        forcepass: compile(&t.forcepass)?,
        forcefail: compile(&t.forcefail)?,
        platform: f
            .test_overrides
            .unwrap_or_default()
            .into_iter()
            .map(|o| {
                (
                    o.rule_id,
                    o.test_ids.map(|t| t.0).unwrap_or_default(),
                    o.reason.unwrap_or_default(),
                    o.output,
                )
            })
            .collect(),
    })
}

fn plan_file(
    tf: &TestFile,
    path: &Path,
    shown: &str,
    include: Option<&Regex>,
    exclude: Option<&Regex>,
    overrides: Option<&Overrides>,
    jobs: &mut Vec<Job>,
) {
    let rule_id = tf.rule_id.clone().unwrap_or_else(|| {
        path.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    let enabled = tf.meta.enabled.unwrap_or(true);
    for t in &tf.tests {
        let id = format!("{rule_id}-{}", t.test_id);
        let mut stages: Vec<Stage> = t.stages.iter().map(|s| s.normalized()).collect();
        let mut overridden = None;
        let mut plan = Plan::Run;
        // go-ftw: disabled files, then include (wins) / exclude.
        let filtered = match (include, exclude) {
            (Some(i), _) if i.is_match(&id) => false,
            (Some(_), _) => true,
            (None, Some(e)) => e.is_match(&id),
            (None, None) => false,
        };
        if !enabled {
            plan = Plan::Skip {
                reason: "disabled (meta.enabled: false)".into(),
                listed: true,
            };
        } else if filtered {
            plan = Plan::Skip {
                reason: "not selected by --include/--exclude".into(),
                listed: false,
            };
        } else if let Some(o) = overrides {
            let found = |l: &[(Regex, String)]| {
                l.iter()
                    .find(|(r, _)| r.is_match(&id))
                    .map(|(_, s)| s.clone())
            };
            if let Some(r) = found(&o.ignore) {
                plan = Plan::Skip {
                    reason: format!("ignored: {r}"),
                    listed: true,
                };
            } else if let Some(r) = found(&o.forcefail) {
                plan = Plan::ForceFail(r);
            } else if let Some(r) = found(&o.forcepass) {
                plan = Plan::ForcePass(r);
            } else {
                let rid = rule_id.parse::<u64>().ok();
                let tid = t.test_id.parse::<u64>().ok();
                for (r, tids, reason, out) in &o.platform {
                    if Some(*r) != rid || !tid.is_some_and(|t| tids.contains(&t)) {
                        continue;
                    }
                    match out {
                        Some(out) => {
                            for s in &mut stages {
                                s.output = out.clone();
                            }
                            overridden = Some(reason.clone());
                        }
                        None => {
                            plan = Plan::Skip {
                                reason: format!("overridden without expectations: {reason}"),
                                listed: true,
                            }
                        }
                    }
                }
            }
        }
        jobs.push(Job {
            id,
            desc: t.desc.clone(),
            file: shown.to_string(),
            stages,
            plan,
            overridden,
        });
    }
}

// ------------------------------------------------------------------ running

fn run_jobs(rs: &Ruleset, jobs: &[Job], workers: usize) -> Vec<TestResult> {
    let next = AtomicUsize::new(0);
    let mut slots: Vec<Option<TestResult>> = (0..jobs.len()).map(|_| None).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers.max(1))
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(job) = jobs.get(i) else { break };
                        done.push((i, run_job(rs, job)));
                    }
                    done
                })
            })
            .collect();
        for h in handles {
            for (i, r) in h.join().expect("test worker") {
                slots[i] = Some(r);
            }
        }
    });
    slots
        .into_iter()
        .map(|r| r.expect("every test ran"))
        .collect()
}

fn run_job(rs: &Ruleset, job: &Job) -> TestResult {
    match &job.plan {
        Plan::Skip { reason, .. } => {
            return TestResult {
                status: Status::Skipped,
                reason: reason.clone(),
                stages: Vec::new(),
            }
        }
        Plan::ForcePass(r) => {
            return TestResult {
                status: Status::Passed,
                reason: format!("forced to pass: {r}"),
                stages: Vec::new(),
            }
        }
        Plan::ForceFail(r) => {
            return TestResult {
                status: Status::Failed,
                reason: format!("forced to fail: {r}"),
                stages: Vec::new(),
            }
        }
        Plan::Run => {}
    }
    if job.stages.is_empty() {
        return TestResult {
            status: Status::Failed,
            reason: "the test has no stages".into(),
            stages: Vec::new(),
        };
    }
    let mut stages = Vec::new();
    for st in &job.stages {
        let outcome = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            stage::execute(rs, &st.input)
        })) {
            Ok(o) => o,
            Err(p) => {
                let msg = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                stages.push(StageResult {
                    outcome: Outcome::default(),
                    fails: vec![format!("the engine panicked: {msg}")],
                });
                continue;
            }
        };
        let fails = stage::check(&st.output, &outcome);
        stages.push(StageResult { outcome, fails });
    }
    let failing: Vec<String> = stages
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.fails.is_empty())
        .map(|(i, s)| {
            if job.stages.len() > 1 {
                format!("stage {}: {}", i + 1, s.fails.join("; "))
            } else {
                s.fails.join("; ")
            }
        })
        .collect();
    let mut reason = failing.join(" | ");
    if let Some(o) = &job.overridden {
        let note = format!("expectations from --overrides: {o}");
        reason = if reason.is_empty() {
            note
        } else {
            format!("{reason} ({note})")
        };
    }
    TestResult {
        status: if failing.is_empty() {
            Status::Passed
        } else {
            Status::Failed
        },
        reason,
        stages,
    }
}

// ------------------------------------------------------------------ JSON

fn json_report(
    jobs: &[Job],
    results: &[TestResult],
    load_errors: &[(String, String)],
    [passed, failed, skipped]: [usize; 3],
    rate: f64,
    min: f64,
) -> Value {
    let mut tests: Vec<Value> = Vec::new();
    for (file, e) in load_errors {
        tests.push(json!({"id": null, "file": file, "status": "failed", "reason": format!("cannot parse the test file: {e}")}));
    }
    for (job, res) in jobs.iter().zip(results) {
        let mut logged: Vec<u64> = Vec::new();
        let stages: Vec<Value> = job
            .stages
            .iter()
            .enumerate()
            .map(|(i, st)| {
                let mut v = json!({"stage": i + 1, "expected": stage::expected_json(&st.output)});
                if let Some(r) = res.stages.get(i) {
                    let o = &r.outcome;
                    for id in &o.logged_ids {
                        if !logged.contains(id) {
                            logged.push(*id);
                        }
                    }
                    v["status"] = json!(o.status);
                    v["status_source"] = json!(o.status_source);
                    v["error"] = json!(o.error);
                    v["waf"] = json!(o.waf);
                    v["logged_ids"] = json!(o.logged_ids);
                    v["log"] = json!(o.log);
                    v["reasons"] = json!(r.fails);
                }
                v
            })
            .collect();
        tests.push(json!({
            "id": job.id,
            "file": job.file,
            "desc": job.desc,
            "status": res.status.as_str(),
            "reason": res.reason,
            "logged_ids": logged,
            "stages": stages,
        }));
    }
    json!({
        "summary": {
            "passed": passed,
            "failed": failed,
            "skipped": skipped,
            "pass_rate": rate,
            "min_pass_rate": min,
        },
        "tests": tests,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_glob() {
        assert!(is_yaml_name("920100.yaml"));
        assert!(is_yaml_name("999999.yml"));
        assert!(!is_yaml_name("base_positive_rules.py"));
        assert!(!is_yaml_name("positivetest.yaml.skeleton"));
        assert!(!is_yaml_name("x.conf"));
    }

    #[test]
    fn percentages() {
        assert_eq!(parse_pct("97.5"), Ok(97.5));
        assert_eq!(parse_pct("100%"), Ok(100.0));
        assert!(parse_pct("101").is_err());
        assert_eq!(pct(99.999), "99.99%");
    }
}
