//! `waf spoa`: the engine as an HAProxy SPOE agent (the agent itself is
//! `waf_serve::spoa`; HAProxy's side is in `connectors/haproxy/`).

use crate::input::RuleInput;
use crate::{CliError, CmdResult};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use waf_serve::{ErrorLog, RuleSource, Rules};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub input: RuleInput,
    /// Address HAProxy's SPOE connects to.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:12345")]
    pub listen: SocketAddr,
    /// ModSecurity-style error log; standard error when absent.
    #[arg(long, value_name = "FILE")]
    pub error_log: Option<PathBuf>,
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
    let log = match &args.error_log {
        Some(p) => {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| CliError::usage(format!("cannot open `{}`: {e}", p.display())))?;
            ErrorLog::to_writer(Box::new(f))
        }
        None => ErrorLog::to_writer(Box::new(std::io::stderr())),
    };
    waf_serve::spoa::run(args.listen, Arc::new(rules), log, |m| {
        eprintln!("waf spoa: {m}")
    })
    .map_err(CliError::usage)
}
