//! go-ftw YAML regression tests (CRS's
//! `tests/regression/tests`), run in-process against the engine.
//!
//! go-ftw sends each stage's request to a web server with the WAF in front
//! of a backend (albedo), then reads the WAF's error log between two marker
//! requests. Here every stage instead goes through:
//! 1. `request::build`: the bytes go-ftw would put on the wire;
//! 2. `frontend::receive`: the HTTP server in front of the WAF (Apache's
//!    behaviour for malformed requests: the 400s that CRS's `status`
//!    expectations describe);
//! 3. a fresh [`waf_engine::Transaction`]: connection (client 127.0.0.1, a new
//!    port per request; server `dest_addr`:`port`), URI, headers, phase 1,
//!    body, phase 2, then the `backend` response (albedo: `POST /reflect`
//!    returns the response its JSON body describes, anything else an empty
//!    200), phases 3 and 4, and logging;
//! 4. `stage::check`: go-ftw's assertions on the status the client got and
//!    on the stage's log lines (one ModSecurity-style line per matched rule
//!    that logs, with `[id "..."]`). The lines of a stage are known exactly,
//!    so no marker requests (rule 999999, `X-CRS-Test`) are needed.
//!
//! A test passes when all its stages pass; the summary counts tests.

mod backend;
pub(crate) mod frontend;
mod http;
pub(crate) mod model;
pub(crate) mod request;
mod stage;
mod template;

use model::{Output, Stage, TestFile};
use regex::Regex;
use serde_json::{json, Value};
use stage::Outcome;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use waf_compiler::{compile_str, Compiled, Options};
use waf_engine::Ruleset;

pub use http::{crs_server_config, serve_backend, LogTail, Target, MARKER_RULE};

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
pub const CRS_TEST_CONFIG_NAME: &str = "waf-ftw-crs-test.conf";

/// Compiles [`CRS_TEST_CONFIG`] as `crs/`[`CRS_TEST_CONFIG_NAME`] (its
/// includes are relative to the CRS checkout `crs`).
pub fn compile_crs_test_config(crs: &Path, opts: &Options) -> Compiled {
    compile_str(crs.join(CRS_TEST_CONFIG_NAME), CRS_TEST_CONFIG, opts)
}

// ------------------------------------------------------------------ errors

/// Why a suite cannot be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FtwError {
    /// A file or directory that does not exist.
    NotFound(PathBuf),
    /// A file or directory that cannot be read.
    Io {
        /// The path.
        path: PathBuf,
        /// The system's message.
        message: String,
    },
    /// `--crs DIR` is not a CRS checkout.
    NotCrs {
        /// The directory.
        path: PathBuf,
        /// What it lacks (`crs-setup.conf.example`, `rules`).
        missing: &'static str,
    },
    /// An overrides file that does not parse, or has an invalid key regex.
    Overrides {
        /// The overrides file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// An invalid `--include`/`--exclude` regex.
    Selection {
        /// `--include` or `--exclude`.
        option: &'static str,
        /// The regex error.
        message: String,
    },
}

impl fmt::Display for FtwError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FtwError::NotFound(p) => write!(f, "no such file or directory: `{}`", p.display()),
            FtwError::Io { path, message } => {
                write!(f, "cannot read `{}`: {message}", path.display())
            }
            FtwError::NotCrs { path, missing } => write!(
                f,
                "--crs `{}`: no `{missing}` (not a CRS checkout?)",
                path.display()
            ),
            FtwError::Overrides { path, message } => write!(f, "{}: {message}", path.display()),
            FtwError::Selection { option, message } => write!(f, "{option}: {message}"),
        }
    }
}

impl std::error::Error for FtwError {}

/// `d` made absolute, if it is a CRS checkout (`crs-setup.conf.example` and
/// `rules/`).
pub fn check_crs_dir(d: &Path) -> Result<PathBuf, FtwError> {
    let d = d.canonicalize().map_err(|e| FtwError::Io {
        path: d.to_path_buf(),
        message: e.to_string(),
    })?;
    for need in ["crs-setup.conf.example", "rules"] {
        if !d.join(need).exists() {
            return Err(FtwError::NotCrs {
                path: d,
                missing: need,
            });
        }
    }
    Ok(d)
}

// ------------------------------------------------------------------ results

/// The result of one test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Every stage met its expectations (or forced to pass).
    Passed,
    /// A stage did not (or forced to fail).
    Failed,
    /// Not run.
    Skipped,
}

impl Status {
    /// `passed`, `failed` or `skipped`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Passed => "passed",
            Status::Failed => "failed",
            Status::Skipped => "skipped",
        }
    }
}

/// What to do with a test before running it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Run it.
    Run,
    /// Skip it.
    Skip {
        /// Why.
        reason: String,
        /// Whether reports list it (disabled files and overrides are listed;
        /// tests left out by `--include`/`--exclude` are not).
        listed: bool,
    },
    /// Count it as passed without running it (an override; its reason).
    ForcePass(String),
    /// Count it as failed without running it (an override; its reason).
    ForceFail(String),
}

/// One test of a suite, ready to run.
#[derive(Clone, Debug)]
pub struct TestCase {
    /// `<rule_id>-<test_id>`.
    pub id: String,
    /// The test's description.
    pub desc: Option<String>,
    /// The test file, as [`TestFilePath::shown`].
    pub file: String,
    stages: Vec<Stage>,
    /// What to do with it.
    pub plan: Plan,
    /// Expectations replaced by a platform override (its reason).
    overridden: Option<String>,
}

struct StageResult {
    outcome: Outcome,
    fails: Vec<String>,
}

/// What running one test gave.
pub struct TestResult {
    /// Passed, failed or skipped.
    pub status: Status,
    /// Why it failed or was skipped or forced (empty when it passed plainly).
    pub reason: String,
    stages: Vec<StageResult>,
}

impl TestResult {
    /// How many stages ran.
    pub fn stage_count(&self) -> usize {
        self.stages.len()
    }

    /// The stages that failed: their 0-based index and the failed checks.
    pub fn failing_stages(&self) -> impl Iterator<Item = (usize, &[String])> {
        self.stages
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.fails.is_empty())
            .map(|(i, s)| (i, s.fails.as_slice()))
    }
}

/// A test file that is not valid go-ftw YAML (it counts as one failed test).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    /// The file, as [`TestFilePath::shown`].
    pub file: String,
    /// The first line of the parser's message.
    pub message: String,
}

/// The counts a run ends with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Tests passed.
    pub passed: usize,
    /// Tests failed, unparsable files included.
    pub failed: usize,
    /// Tests skipped.
    pub skipped: usize,
    /// passed / (passed + failed), in percent (100 when nothing ran).
    pub pass_rate: f64,
    /// The minimum the run was held to, in percent.
    pub min_pass_rate: f64,
}

impl Summary {
    /// Counts `results` (and the suite's unparsable files as failures).
    pub fn of(suite: &Suite, results: &[TestResult], min_pass_rate: f64) -> Summary {
        let count = |s: Status| results.iter().filter(|r| r.status == s).count();
        let passed = count(Status::Passed);
        let failed = count(Status::Failed) + suite.load_errors.len();
        let pass_rate = if passed + failed == 0 {
            100.0
        } else {
            100.0 * passed as f64 / (passed + failed) as f64
        };
        Summary {
            passed,
            failed,
            skipped: count(Status::Skipped),
            pass_rate,
            min_pass_rate,
        }
    }

    /// Whether the pass rate reaches the minimum.
    pub fn ok(&self) -> bool {
        self.pass_rate + 1e-9 >= self.min_pass_rate
    }
}

// ------------------------------------------------------------------ loading

/// Which tests run: `include` wins over `exclude` (as go-ftw); both are
/// matched against the whole test id.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    include: Option<Regex>,
    exclude: Option<Regex>,
}

impl Selection {
    /// A selection from `--include` and `--exclude` regexes.
    pub fn new(include: Option<&str>, exclude: Option<&str>) -> Result<Selection, FtwError> {
        let re = |option: &'static str, r: Option<&str>| {
            r.map(Regex::new)
                .transpose()
                .map_err(|e| FtwError::Selection {
                    option,
                    message: e.to_string(),
                })
        };
        Ok(Selection {
            include: re("--include", include)?,
            exclude: re("--exclude", exclude)?,
        })
    }
}

/// The tests of a set of files.
#[derive(Debug, Clone, Default)]
pub struct Suite {
    /// Every test, in file order.
    pub tests: Vec<TestCase>,
    /// Files that do not parse.
    pub load_errors: Vec<LoadError>,
}

impl Suite {
    /// Reads and plans every file (selection, disabled files, overrides).
    pub fn load(
        files: &[TestFilePath],
        selection: &Selection,
        overrides: Option<&Overrides>,
    ) -> Result<Suite, FtwError> {
        let mut suite = Suite::default();
        for TestFilePath { path, shown } in files {
            let bytes = std::fs::read(path).map_err(|e| FtwError::Io {
                path: path.clone(),
                message: e.to_string(),
            })?;
            match model::parse_test_file(&String::from_utf8_lossy(&bytes)) {
                Ok(Some(tf)) => plan_file(&tf, path, shown, selection, overrides, &mut suite.tests),
                Ok(None) => {}
                Err(e) => suite.load_errors.push(LoadError {
                    file: shown.clone(),
                    message: first_line(&e),
                }),
            }
        }
        Ok(suite)
    }
}

fn first_line(e: &str) -> String {
    e.lines().next().unwrap_or(e).to_string()
}

/// A go-ftw test file: where it is, and how reports name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestFilePath {
    /// The file.
    pub path: PathBuf,
    /// Its path relative to the directory it was found in (its file name
    /// when it was given directly).
    pub shown: String,
}

/// Files matching go-ftw's `**/*.y*ml` under each of `dirs` (sorted), shown
/// relative to that directory; files given directly are taken as they are.
pub fn find_test_files(dirs: &[PathBuf]) -> Result<Vec<TestFilePath>, FtwError> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), FtwError> {
        let io = |e: std::io::Error| FtwError::Io {
            path: dir.to_path_buf(),
            message: e.to_string(),
        };
        for entry in std::fs::read_dir(dir).map_err(io)? {
            let p = entry.map_err(io)?.path();
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
            out.push(TestFilePath {
                path: d.clone(),
                shown,
            });
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
                out.push(TestFilePath { path: p, shown });
            }
        } else {
            return Err(FtwError::NotFound(d.clone()));
        }
    }
    Ok(out)
}

/// go-ftw's glob `*.y*ml`.
fn is_yaml_name(n: &str) -> bool {
    n.match_indices(".y")
        .any(|(i, _)| n.len() >= i + 4 && n.ends_with("ml"))
}

// ------------------------------------------------------------------ overrides

/// Known failures, in go-ftw's formats: `testoverride: {ignore: {"920100-4":
/// reason}}` (also `forcepass`/`forcefail`; keys are regexes matched against
/// the whole test id) and/or CRS's platform form (`test_overrides:
/// [{rule_id, test_ids, reason, output}]`).
pub struct Overrides {
    ignore: Vec<(Regex, String)>,
    forcepass: Vec<(Regex, String)>,
    forcefail: Vec<(Regex, String)>,
    /// (rule id, test ids, reason, replacement output).
    platform: Vec<(u64, Vec<u64>, String, Option<Output>)>,
}

impl Overrides {
    /// Reads an overrides file.
    pub fn load(p: &Path) -> Result<Overrides, FtwError> {
        let text = std::fs::read_to_string(p).map_err(|e| FtwError::Io {
            path: p.to_path_buf(),
            message: e.to_string(),
        })?;
        let err = |message: String| FtwError::Overrides {
            path: p.to_path_buf(),
            message,
        };
        let f = model::parse_overrides(&text).map_err(|e| err(first_line(&e)))?;
        let compile =
            |m: &BTreeMap<String, Option<String>>| -> Result<Vec<(Regex, String)>, FtwError> {
                m.iter()
                    .map(|(k, v)| {
                        // Anchored (go-ftw matches unanchored, so `920100-4` would also match 920100-40).
                        Regex::new(&format!("^(?:{k})$"))
                            .map(|r| (r, v.clone().unwrap_or_default()))
                            .map_err(|e| err(format!("override key `{k}`: {e}")))
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
}

fn plan_file(
    tf: &TestFile,
    path: &Path,
    shown: &str,
    selection: &Selection,
    overrides: Option<&Overrides>,
    jobs: &mut Vec<TestCase>,
) {
    let (include, exclude) = (selection.include.as_ref(), selection.exclude.as_ref());
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
        jobs.push(TestCase {
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

/// Runs `tests` on `workers` threads (at least one), calling `on_done` after
/// each test (for a progress bar); the results are in the order of `tests`.
/// A panic of the engine fails the stage it happened in.
pub fn run(
    rs: &Ruleset,
    tests: &[TestCase],
    workers: usize,
    on_done: &(dyn Fn() + Sync),
) -> Vec<TestResult> {
    let jobs = tests;
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
                        done.push((i, run_job(job, &mut |input| stage::execute(rs, input))));
                        on_done();
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

/// Runs `tests` one at a time over HTTP against a running WAF (see
/// [`http`]'s module documentation: go-ftw's marker requests bracket each
/// stage's lines in the WAF's error log), calling `on_done` after each.
pub fn run_http(target: &Target, tests: &[TestCase], on_done: &dyn Fn()) -> Vec<TestResult> {
    let mut tail = LogTail::new(&target.log);
    tests
        .iter()
        .map(|job| {
            let r = run_job(job, &mut |input| http::execute(target, &mut tail, input));
            on_done();
            r
        })
        .collect()
}

fn run_job(job: &TestCase, exec: &mut dyn FnMut(&model::Input) -> Outcome) -> TestResult {
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
        let outcome =
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| exec(&st.input))) {
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

/// The JSON report of `waf test ftw --json`: the summary, then per test its
/// status, reason, logged ids and, per stage, what was expected and seen.
pub fn json_report(suite: &Suite, results: &[TestResult], summary: &Summary) -> Value {
    let (jobs, load_errors) = (&suite.tests, &suite.load_errors);
    let Summary {
        passed,
        failed,
        skipped,
        pass_rate: rate,
        min_pass_rate: min,
    } = *summary;
    let mut tests: Vec<Value> = Vec::new();
    for LoadError { file, message: e } in load_errors {
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
    fn selection_errors_name_the_option() {
        let e = Selection::new(Some("("), None).unwrap_err();
        assert!(e.to_string().starts_with("--include: "), "{e}");
    }
}
