//! `waf eval`: evaluate one request or a corpus (the peers' JSONL formats, so
//! decisions compare with Coraza's and ModSecurity's via `compare.py`).

use crate::input::RuleInput;
use crate::{CliError, CmdResult};
use base64::Engine as _;
use serde::Deserialize;
use serde_json::json;
use std::io::{BufRead, BufWriter, Read, Write};
use std::path::PathBuf;
use std::time::Instant;
use waf_compiler::Options;
use waf_engine::Ruleset;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub input: RuleInput,
    /// One request as a JSON object (`-` for standard input).
    #[arg(long, value_name = "FILE", conflicts_with = "corpus")]
    pub request: Option<PathBuf>,
    /// A corpus: one JSON request per line.
    #[arg(long, value_name = "FILE.jsonl")]
    pub corpus: Option<PathBuf>,
    /// Where to write one decision per line (default: standard output).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Exit 1 when any request is blocked (interrupted), as a CI check or a
    /// shell condition would want; without it, eval exits 0 whatever the
    /// decisions.
    #[arg(long)]
    pub exit_code: bool,
    #[command(flatten)]
    pub engine: crate::input::EngineFlags,
}

/// One request of the request JSONL format (`docs/formats.md`; the peers'
/// format). A field not listed here is an error, so that a misspelt `bodyy`
/// is not silently a request without a body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    #[serde(default)]
    pub id: Option<serde_json::Value>,
    #[serde(default = "default_method")]
    pub method: String,
    #[serde(default = "default_uri")]
    pub uri: String,
    #[serde(default = "default_version")]
    pub version: String,
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub body_b64: Option<String>,
    /// Annotations that corpus generators add (the peers' `ftw_to_jsonl.py`,
    /// our `har_to_jsonl.py`): accepted and not used by the engine. What a
    /// CRS test expects:
    #[serde(default, rename = "expect_ids")]
    _expect_ids: Option<serde::de::IgnoredAny>,
    /// See `expect_ids`.
    #[serde(default, rename = "no_expect_ids")]
    _no_expect_ids: Option<serde::de::IgnoredAny>,
    /// The file the request comes from (a test file, or a HAR file for
    /// `corpus/har_to_jsonl.py`).
    #[serde(default, rename = "file")]
    _file: Option<serde::de::IgnoredAny>,
    /// The absolute URL of a request taken from a HAR file.
    #[serde(default, rename = "url")]
    _url: Option<serde::de::IgnoredAny>,
}

fn default_method() -> String {
    "GET".into()
}
fn default_uri() -> String {
    "/".into()
}
fn default_version() -> String {
    "HTTP/1.1".into()
}

impl Request {
    pub fn body_bytes(&self) -> Result<Vec<u8>, String> {
        match (&self.body_b64, &self.body) {
            (Some(b), _) => base64::engine::general_purpose::STANDARD
                .decode(b)
                .map_err(|e| format!("body_b64: {e}")),
            (None, Some(b)) => Ok(b.as_bytes().to_vec()),
            (None, None) => Ok(Vec::new()),
        }
    }
}

/// `value`, or `default` when it is empty (the peer harnesses treat an empty
/// method, URI or version as absent).
fn or_default<'a>(value: &'a str, default: &'a str) -> &'a str {
    if value.is_empty() {
        default
    } else {
        value
    }
}

/// Runs phases 1 and 2 as the peers do, stopping at the first interruption.
pub fn decide(rs: &Ruleset, req: &Request, id: &str) -> Result<serde_json::Value, String> {
    let body = req.body_bytes()?;
    let method = or_default(&req.method, "GET");
    let uri = or_default(&req.uri, "/");
    let version = or_default(&req.version, "HTTP/1.1");
    let start = Instant::now();
    let mut tx = rs.transaction();
    tx.process_connection("10.0.0.1", 40000, "127.0.0.1", 80);
    tx.process_uri(uri.as_bytes(), method.as_bytes(), version.as_bytes());
    for (k, v) in &req.headers {
        tx.add_request_header(k.as_bytes(), v.as_bytes());
    }
    tx.process_request_headers();
    if tx.intervention().is_none() {
        if !body.is_empty() {
            tx.append_request_body(&body);
        }
        tx.process_request_body();
    }
    let ns = start.elapsed().as_nanos() as u64;
    let mut logged: Vec<u64> = Vec::new();
    let mut all: Vec<u64> = Vec::new();
    for m in tx.matched_rules() {
        if !all.contains(&m.id) {
            all.push(m.id);
        }
        let interrupting = tx.intervention().is_some_and(|i| i.rule_id == m.id);
        if (m.log || interrupting) && !logged.contains(&m.id) {
            logged.push(m.id);
        }
    }
    let i = tx.intervention();
    Ok(json!({
        "id": id,
        "interrupted": i.is_some(),
        "status": i.map_or(200, |i| i.status),
        "action": i.map(|i| i.action),
        "rule_id": i.map(|i| i.rule_id),
        "reason": i.map(|i| i.reason()),
        "matched_ids": logged,
        "matched_ids_all": all,
        "ns": ns,
    }))
}

pub fn run(args: Args) -> CmdResult {
    if args.request.is_none() && args.corpus.is_none() {
        return Err(CliError::usage(
            "give --request FILE or --corpus FILE.jsonl",
        ));
    }
    let rs = args
        .input
        .ruleset(&Options::default())?
        .with_eval_options(args.engine.options());
    let out: Box<dyn Write> = match &args.out {
        Some(p) => Box::new(
            std::fs::File::create(p)
                .map_err(|e| CliError::usage(format!("cannot write `{}`: {e}", p.display())))?,
        ),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut out = BufWriter::new(out);
    let blocked = match (&args.request, &args.corpus) {
        (Some(p), _) => one(&rs, p, &mut out),
        (None, Some(p)) => corpus(&rs, p, &mut out),
        (None, None) => Ok(0),
    }
    .map_err(CliError::usage)?;
    out.flush()?;
    if args.exit_code && blocked > 0 {
        return Err(CliError::findings(format!("{blocked} request(s) blocked")));
    }
    Ok(())
}

/// Evaluates the request in `path` (`-`: standard input); returns how many
/// requests were blocked (0 or 1).
fn one(rs: &Ruleset, path: &PathBuf, out: &mut dyn Write) -> Result<usize, String> {
    let mut text = String::new();
    if path.as_os_str() == "-" {
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| format!("stdin: {e}"))?;
    } else {
        text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    }
    let req: Request =
        serde_json::from_str(&text).map_err(|e| format!("invalid request JSON: {e}"))?;
    let id = req.id.as_ref().map(id_text).unwrap_or_else(|| "1".into());
    let d = decide(rs, &req, &id)?;
    writeln!(out, "{d}").map_err(|e| e.to_string())?;
    Ok(usize::from(d["interrupted"] == true))
}

/// Evaluates every request of the JSONL file `path`; returns how many were
/// blocked.
fn corpus(rs: &Ruleset, path: &PathBuf, out: &mut dyn Write) -> Result<usize, String> {
    let mut blocked = 0;
    let f =
        std::fs::File::open(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    for (n, line) in std::io::BufReader::new(f).lines().enumerate() {
        let line = line.map_err(|e| format!("{}:{}: {e}", path.display(), n + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let req: Request = serde_json::from_str(&line)
            .map_err(|e| format!("{}:{}: invalid request: {e}", path.display(), n + 1))?;
        let id = req
            .id
            .as_ref()
            .map(id_text)
            .unwrap_or_else(|| (n + 1).to_string());
        let d = decide(rs, &req, &id).map_err(|e| format!("{}:{}: {e}", path.display(), n + 1))?;
        writeln!(out, "{d}").map_err(|e| e.to_string())?;
        blocked += usize::from(d["interrupted"] == true);
    }
    Ok(blocked)
}

fn id_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
