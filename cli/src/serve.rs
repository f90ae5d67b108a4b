//! `waf serve`: the engine as a reverse proxy in front of an application
//! (the proxy itself is the `waf-serve` library).

use crate::input::RuleInput;
use crate::{CliError, CmdResult};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use waf_serve::{Config, ErrorLog, Logs, RuleSource, Rules};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub input: RuleInput,
    /// Address to accept connections on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// The application: `http://host:port` (an optional path prefix is kept).
    #[arg(long, value_name = "URL")]
    pub upstream: waf_serve::Uri,
    /// ModSecurity-style error log (matched rules and interventions);
    /// standard error when absent.
    #[arg(long, value_name = "FILE")]
    pub error_log: Option<PathBuf>,
    /// JSON audit log (ModSecurity v3's layout, one record per line) of the
    /// transactions the rules' `SecAuditEngine` selects.
    #[arg(long, value_name = "FILE")]
    pub audit_log: Option<PathBuf>,
    /// Serve `/healthz` and `/metrics` (Prometheus text) on this address.
    #[arg(long, value_name = "ADDR")]
    pub admin: Option<SocketAddr>,
    /// Longest wait, in seconds, for the upstream's response headers.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub upstream_timeout: u64,
}

pub fn run(args: Args) -> CmdResult {
    let source = if args.input.is_default() {
        RuleSource::Default
    } else {
        RuleSource::Files(args.input.files().map_err(CliError::usage)?)
    };
    let rules = Rules::load(source).map_err(|e| {
        crate::report::eprint(e.sources(), e.diagnostics());
        CliError::findings(format!("the rules have {} error(s)", e.error_count()))
    })?;
    let open = |p: &PathBuf| -> Result<ErrorLog, CliError> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .map_err(|e| CliError::usage(format!("cannot open `{}`: {e}", p.display())))?;
        Ok(ErrorLog::to_writer(Box::new(f)))
    };
    let logs = Logs {
        error: match &args.error_log {
            Some(p) => open(p)?,
            None => ErrorLog::to_writer(Box::new(std::io::stderr())),
        },
        audit: args.audit_log.as_ref().map(open).transpose()?,
    };
    let mut config = Config::new(args.listen, args.upstream);
    config.upstream_timeout = Duration::from_secs(args.upstream_timeout);
    config.admin = args.admin;
    waf_serve::run(config, Arc::new(rules), logs, |m| {
        eprintln!("waf serve: {m}")
    })
    .map_err(CliError::usage)
}
