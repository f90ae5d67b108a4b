//! `waf test ftw`: go-ftw YAML regression tests (CRS's
//! `tests/regression/tests`) run in-process against the engine. The runner,
//! its emulated front end and backend live in [`waf_harness::ftw`]; this
//! module reads the arguments and prints the results.

use crate::error::{CliError, CmdResult};
use crate::progress::Progress;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;
use waf_compiler::compile_files;
use waf_engine::Ruleset;
use waf_harness::ftw::{
    self, Plan, Selection, Status, Suite, Summary, CRS_TEST_CONFIG, CRS_TEST_CONFIG_NAME,
};

/// `waf test SUITE`.
#[derive(clap::Args, Debug)]
pub struct TestArgs {
    #[command(subcommand)]
    pub suite: TestSuite,
}

#[derive(clap::Subcommand, Debug)]
pub enum TestSuite {
    /// Run go-ftw YAML regression tests (e.g. CRS's) in-process, or over HTTP against a running WAF (--http).
    #[command(after_long_help = after_help(), after_help = SHORT_HELP)]
    Ftw(Box<Args>),
    /// Serve CRS's test backend (albedo's behaviour: `POST /reflect` answers the response its JSON body describes, anything else an empty 200), for `waf test ftw --http`.
    #[command(after_help = BACKEND_HELP, after_long_help = BACKEND_HELP)]
    Backend(BackendArgs),
}

const BACKEND_HELP: &str = crate::help!(
    "  waf test ftw --crs ../shared/crs --print-server-config > /tmp/crs-test.conf
  waf test backend --listen 127.0.0.1:9000 &
  waf serve -c /tmp/crs-test.conf --upstream http://127.0.0.1:9000 --error-log /tmp/waf.log &
  waf test ftw --crs ../shared/crs --http 127.0.0.1:8080 --error-log /tmp/waf.log",
    "1 never (it serves until stopped); the address cannot be bound is 2"
);

#[derive(clap::Args, Debug)]
pub struct BackendArgs {
    /// Address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9000")]
    pub listen: std::net::SocketAddr,
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
    #[arg(long, requires = "crs", conflicts_with_all = ["json", "overrides", "include", "exclude", "dirs"])]
    pub print_config: bool,
    /// Print the configuration for a server under test with --http (the
    /// same, with absolute includes and go-ftw's marker rule 999999; it loads
    /// in ModSecurity v3 too), and exit.
    #[arg(long, requires = "crs", conflicts_with_all = ["json", "overrides", "include", "exclude", "dirs", "print_config"])]
    pub print_server_config: bool,
    /// Send each stage over HTTP to the WAF listening at ADDR (one at a
    /// time), as go-ftw does, instead of running the engine in-process; the
    /// server must load `--print-server-config` and log to --error-log.
    #[arg(long, value_name = "ADDR", requires = "error_log", conflicts_with_all = ["configs", "jobs"])]
    pub http: Option<std::net::SocketAddr>,
    /// With --http: the WAF's error log, where each stage's lines are found
    /// between go-ftw's marker requests.
    #[arg(long, value_name = "FILE", requires = "http")]
    pub error_log: Option<PathBuf>,
    /// With --http: seconds to wait for a response or a marker's log line.
    #[arg(long, value_name = "SECONDS", default_value_t = 3, requires = "http")]
    pub timeout: u64,
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
    /// Worker threads, at least 1 (default: the available parallelism).
    #[arg(short = 'j', long, value_name = "N", value_parser = crate::input::positive)]
    pub jobs: Option<usize>,
    /// Show a progress bar on standard error even when it is not a terminal.
    #[arg(long)]
    pub progress: bool,
    #[command(flatten)]
    pub engine: crate::input::EngineFlags,
}

fn parse_pct(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(v) if (0.0..=100.0).contains(&v) => Ok(v),
        _ => Err(format!("`{s}` is not a percentage between 0 and 100")),
    }
}

/// Examples and exit codes (`-h`; `--help` adds how stages run and the
/// configuration `--crs` builds).
const SHORT_HELP: &str = crate::help!(
    "  waf test ftw --crs ../shared/crs                 # CRS's whole regression suite
  waf test ftw --crs ../shared/crs --include '^920' --json report.json
  waf test ftw -c my-waf.conf tests/               # your own configuration and tests",
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

pub fn run_test(args: TestArgs) -> CmdResult {
    match args.suite {
        TestSuite::Ftw(a) => run(*a),
        TestSuite::Backend(b) => {
            let l = std::net::TcpListener::bind(b.listen)
                .map_err(|e| CliError::usage(format!("cannot listen on {}: {e}", b.listen)))?;
            eprintln!("waf test backend: listening on {}", b.listen);
            ftw::serve_backend(l);
            Ok(())
        }
    }
}

pub fn run(args: Args) -> CmdResult {
    let crs = args.crs.as_deref().map(ftw::check_crs_dir).transpose()?;
    if args.print_config {
        print!("{CRS_TEST_CONFIG}");
        return Ok(());
    }
    if let (true, Some(c)) = (args.print_server_config, &crs) {
        print!("{}", ftw::crs_server_config(c));
        return Ok(());
    }
    let selection = Selection::new(args.include.as_deref(), args.exclude.as_deref())?;
    let overrides = args
        .overrides
        .as_deref()
        .map(ftw::Overrides::load)
        .transpose()?;
    let mut dirs = args.dirs.clone();
    if dirs.is_empty() {
        match &crs {
            Some(c) => dirs.push(c.join("tests/regression/tests")),
            None => {
                return Err(CliError::usage(
                    "give test directories (DIR...), or --crs CRS_DIR",
                ))
            }
        }
    }
    let files = ftw::find_test_files(&dirs)?;

    if let (Some(addr), Some(log)) = (args.http, &args.error_log) {
        let suite = Suite::load(&files, &selection, overrides.as_ref())?;
        let target = ftw::Target {
            addr,
            log: log.clone(),
            timeout: std::time::Duration::from_secs(args.timeout.max(1)),
        };
        let run_start = Instant::now();
        let progress = Progress::new("ftw", suite.tests.len() as u64, args.progress);
        let results = ftw::run_http(&target, &suite.tests, &|| progress.tick());
        progress.finish();
        let header = format!(
            "waf test ftw: {} test files, {} tests; ran over HTTP against {addr} in {:.1} s",
            files.len(),
            suite.tests.len(),
            run_start.elapsed().as_secs_f64()
        );
        return report(&args, &suite, &results, header);
    }

    // The configuration.
    let start = Instant::now();
    let compiled = match (&crs, args.configs.is_empty()) {
        (Some(c), _) => ftw::compile_crs_test_config(c, &Ruleset::compile_options()),
        (None, false) => {
            if let Some(missing) = args.configs.iter().find(|p| !p.is_file()) {
                return Err(CliError::usage(format!(
                    "no such file: `{}`",
                    missing.display()
                )));
            }
            compile_files(&args.configs, &Ruleset::compile_options())
        }
        (None, true) => {
            return Err(CliError::usage(
                "give the WAF configuration with -c CONFIG, or --crs CRS_DIR",
            ))
        }
    };
    // Rules that do not compile are findings, as in every command.
    let rs = crate::input::ruleset_or_report(compiled)
        .map_err(CliError::findings)?
        .with_eval_options(args.engine.options());
    let compile_time = start.elapsed();

    // Tests.
    let suite = Suite::load(&files, &selection, overrides.as_ref())?;
    let workers = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let run_start = Instant::now();
    let progress = Progress::new("ftw", suite.tests.len() as u64, args.progress);
    let results = ftw::run(&rs, &suite.tests, workers, &|| progress.tick());
    progress.finish();
    let run_time = run_start.elapsed();
    let header = format!(
        "waf test ftw: {} test files, {} tests; compiled in {:.1} s, ran in {:.1} s with {workers} workers",
        files.len(),
        suite.tests.len(),
        compile_time.as_secs_f64(),
        run_time.as_secs_f64()
    );
    report(&args, &suite, &results, header)
}

/// Prints the results (and writes --json); `Err` under --min-pass-rate.
fn report(args: &Args, suite: &Suite, results: &[ftw::TestResult], header: String) -> CmdResult {
    for e in &suite.load_errors {
        println!("FAIL {}: cannot parse the test file: {}", e.file, e.message);
    }
    let mut per_dir: BTreeMap<String, [usize; 3]> = BTreeMap::new();
    for (job, res) in suite.tests.iter().zip(results) {
        let counts = per_dir.entry(dir_of(&job.file)).or_default();
        match res.status {
            Status::Passed => {
                counts[0] += 1;
                if args.verbose && matches!(job.plan, Plan::ForcePass(_)) {
                    println!("PASS {} ({}): {}", job.id, job.file, res.reason);
                }
            }
            Status::Failed => {
                counts[1] += 1;
                let n = res.stage_count();
                let mut printed = false;
                for (i, fails) in res.failing_stages() {
                    let st = if n > 1 {
                        format!(" stage {}/{n}", i + 1)
                    } else {
                        String::new()
                    };
                    println!("FAIL {}{st} ({}): {}", job.id, job.file, fails.join("; "));
                    printed = true;
                }
                if !printed {
                    println!("FAIL {} ({}): {}", job.id, job.file, res.reason);
                }
            }
            Status::Skipped => {
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
    let summary = Summary::of(suite, results, args.min_pass_rate);
    eprintln!("{header}");
    if let Some(p) = &args.json {
        let report = ftw::json_report(suite, results, &summary);
        let text = serde_json::to_string_pretty(&report).unwrap_or_default();
        std::fs::write(p, text + "\n")
            .map_err(|e| CliError::usage(format!("cannot write `{}`: {e}", p.display())))?;
    }
    println!(
        "pass rate: {} (minimum {}%)",
        pct(summary.pass_rate),
        args.min_pass_rate
    );
    println!(
        "{} passed, {} failed, {} skipped",
        summary.passed, summary.failed, summary.skipped
    );
    if summary.ok() {
        Ok(())
    } else {
        Err(CliError::findings(""))
    }
}

fn pct(r: f64) -> String {
    format!("{:.2}%", (r * 100.0).floor() / 100.0)
}

fn dir_of(shown: &str) -> String {
    match shown.rsplit_once('/') {
        Some((d, _)) => d.to_string(),
        None => ".".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages() {
        assert_eq!(parse_pct("97.5"), Ok(97.5));
        assert_eq!(parse_pct("100%"), Ok(100.0));
        assert!(parse_pct("101").is_err());
        assert_eq!(pct(99.999), "99.99%");
    }
}
