//! `waf spoa`: the engine as an HAProxy SPOE agent (the agent itself is
//! `waf_serve::spoa`; HAProxy's side is in `connectors/haproxy/`).

use crate::input::RuleInput;
use crate::{CliError, CmdResult};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

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
    /// How often to look at the rule files (and what they include) for
    /// changes, which reload the rules as SIGHUP does; 0: only on SIGHUP
    /// [default: 2].
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    pub watch_interval: f64,
    #[command(flatten)]
    pub collections: crate::serve::CollectionArgs,
}

pub fn run(args: Args) -> CmdResult {
    let rules = crate::serve::load_rules(&args.input)?;
    for w in rules.warnings() {
        eprintln!("waf spoa: {w}");
    }
    let log = crate::serve::error_log(args.error_log.as_deref())?;
    let watch = waf_serve::watch_interval(args.watch_interval)
        .map_err(|m| CliError::usage(format!("--watch-interval: {m}")))?;
    let collections = args.collections.settings()?;
    waf_serve::spoa::run(args.listen, Arc::new(rules), log, watch, collections, |m| {
        eprintln!("waf spoa: {m}")
    })
    .map_err(CliError::usage)
}
