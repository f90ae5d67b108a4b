//! `waf serve`: the engine as a reverse proxy in front of an application
//! (the proxy itself is the `waf-serve` library).

use crate::input::RuleInput;
use crate::{CliError, CmdResult};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use waf_serve::{Config, ErrorLog, Logs, Manifest, ManifestError, RuleSource, Rules, SitesSource};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Rules (`-c FILE`, PATHS), or one YAML manifest (`--config waf.yaml`:
    /// listener, TLS, upstreams and sites; no other flag then).
    #[command(flatten)]
    pub input: RuleInput,
    /// Address to accept connections on [default: 127.0.0.1:8080].
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// The application: `http://host:port` or `https://host:port`
    /// (HTTP/1.1), `h2c://host:port` or `h2://host:port` (HTTP/2, e.g.
    /// gRPC); an optional path prefix is kept.
    #[arg(long, value_name = "URL")]
    pub upstream: Option<waf_serve::Uri>,
    /// ModSecurity-style error log (matched rules and interventions);
    /// standard error when absent.
    #[arg(long, value_name = "FILE")]
    pub error_log: Option<PathBuf>,
    /// JSON audit log (ModSecurity v3's layout, one record per line) of the
    /// transactions the rules' `SecAuditEngine` selects.
    #[arg(long, value_name = "FILE")]
    pub audit_log: Option<PathBuf>,
    /// Access log: one JSON line per request, with what the WAF did to it
    /// (docs/serve.md, *Logs*).
    #[arg(long, value_name = "FILE")]
    pub access_log: Option<PathBuf>,
    /// Serve `/healthz` and `/metrics` (Prometheus text) on this address.
    #[arg(long, value_name = "ADDR")]
    pub admin: Option<SocketAddr>,
    /// CA certificates (PEM) to verify an https:// upstream's certificate
    /// with [default: the system's bundle].
    #[arg(long, value_name = "FILE")]
    pub upstream_ca: Option<PathBuf>,
    /// Longest wait, in seconds, for the upstream's response headers, then for each piece of its body [default: 30].
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    pub upstream_timeout: Option<u64>,
    /// Longest wait, in seconds, to connect to the upstream (TCP and TLS)
    /// [default: 5].
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    pub connect_timeout: Option<u64>,
    /// On SIGTERM or Ctrl-C, how long requests in flight may take to finish
    /// (no new connection is accepted meanwhile) [default: 10].
    #[arg(long, value_name = "SECONDS")]
    pub shutdown_timeout: Option<u64>,
    /// How long a WebSocket (or other protocol switch) stays open with
    /// nothing passing either way [default: 60].
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    pub tunnel_idle_timeout: Option<u64>,
    /// How long sending to a client may wait for it to read before the
    /// connection is closed (a client that stopped reading) [default: 60].
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    pub send_timeout: Option<u64>,
    /// How long a client connection may go without a new request before
    /// it is closed (requests in flight finish; HTTP/2: GOAWAY)
    /// [default: 75].
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout: Option<u64>,
    /// How often to look at the rule files (and what they include) for
    /// changes, which reload the rules as SIGHUP does; 0: only on SIGHUP
    /// [default: 2].
    #[arg(long, value_name = "SECONDS")]
    pub watch_interval: Option<f64>,
    /// A proxy in front of this one (address or network, repeatable) whose
    /// `X-Forwarded-For` names the client: the rules then see that client as
    /// `REMOTE_ADDR` [default: none trusted].
    #[arg(long = "trusted-proxy", value_name = "CIDR")]
    pub trusted_proxies: Vec<String>,
    /// A request-id header (e.g. X-Request-ID): a trusted proxy's value
    /// becomes the request's UNIQUE_ID in the logs, and the application
    /// gets the request's id in it [default: none; X-WAF-Unique-ID is
    /// always sent].
    #[arg(long, value_name = "NAME")]
    pub request_id_header: Option<String>,
    /// Time every rule and export per-rule counters on `/metrics`, for
    /// `waf profile -c RULES --from-metrics FILE...` (costs engine time).
    #[arg(long)]
    pub profile: bool,
    /// Listen with SO_REUSEPORT, so that a new `waf serve` (a new binary or
    /// settings) can start on the same addresses before this one is told to
    /// stop (SIGTERM): a handoff with no moment of closed port.
    #[arg(long)]
    pub reuse_port: bool,
    /// Every connection starts with a PROXY protocol header (HAProxy's,
    /// version 1 or 2, as AWS's NLB and HAProxy's `send-proxy` write it),
    /// and the client address in it is the connection's: for a listener
    /// only a TCP load balancer can reach. Connections without one are
    /// closed.
    #[arg(long)]
    pub proxy_protocol: bool,
    /// Worker threads serving connections, each on a single-threaded runtime
    /// of its own (a connection stays on one thread); 0: one work-stealing
    /// runtime instead [default: one per CPU].
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// Values each worker's cross-transaction cache holds (what repeats in
    /// the traffic is transformed, scanned and tested once while it fits;
    /// about 2 KiB a value with CRS when full) [default: 16384].
    #[arg(long, value_name = "VALUES", value_parser = crate::input::positive)]
    pub value_cache: Option<usize>,
    #[command(flatten)]
    pub collections: CollectionArgs,
    /// TLS certificate chain (PEM); with --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM); with --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Check everything a start reads (the rules, or the manifest with its
    /// sites, filters, upstreams and rules; the TLS and CA files), then
    /// exit without listening, as `nginx -t`: 0 ok, 1 the rules or the
    /// manifest do not compile, 2 anything else.
    #[arg(long)]
    pub check: bool,
}

/// The manifest named by `--config`, if the input is one (a `.yaml` or
/// `.yml` file: SecLang files never are).
fn manifest_path(input: &RuleInput) -> Result<Option<&Path>, CliError> {
    let is_yaml = |p: &&PathBuf| {
        p.extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"))
    };
    match input.configs.iter().find(is_yaml) {
        None => Ok(None),
        Some(p) if input.configs.len() == 1 && input.paths.is_empty() => Ok(Some(p)),
        Some(p) => Err(CliError::usage(format!(
            "`{}` is a manifest: it names the rules itself, so give no other -c or PATHS",
            p.display()
        ))),
    }
}

fn open_log(p: &Path) -> Result<ErrorLog, CliError> {
    ErrorLog::to_file(p).map_err(|e| CliError::usage(format!("cannot open `{}`: {e}", p.display())))
}

/// `--error-log FILE`, or standard error (`waf serve`, `waf spoa`).
pub(crate) fn error_log(p: Option<&Path>) -> Result<ErrorLog, CliError> {
    match p {
        Some(p) => open_log(p),
        None => Ok(ErrorLog::to_writer(Box::new(std::io::stderr()))),
    }
}

/// The rules `-c`/PATHS select (or the embedded default ruleset), their
/// diagnostics printed when they do not compile (`waf serve`, `waf spoa`).
pub(crate) fn load_rules(input: &RuleInput) -> Result<Rules, CliError> {
    let source = if input.is_default() {
        RuleSource::Default
    } else {
        RuleSource::Files(input.files().map_err(CliError::usage)?)
    };
    Rules::load(source).map_err(|e| {
        crate::report::eprint(e.sources(), e.diagnostics());
        CliError::findings(format!("the rules have {} error(s)", e.error_count()))
    })
}

/// One worker thread per CPU the process may use.
fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn report(m: &str) {
    eprintln!("waf serve: {m}");
}

pub fn run(args: Args) -> CmdResult {
    if let Some(path) = manifest_path(&args.input)? {
        return run_manifest(path, &args);
    }
    let Some(upstream) = args.upstream.clone() else {
        return Err(CliError::usage(
            "give the application with --upstream http://host:port (or a manifest with --config waf.yaml)",
        ));
    };
    let rules = load_rules(&args.input)?;
    let logs = Logs {
        error: error_log(args.error_log.as_deref())?,
        audit: args.audit_log.as_deref().map(open_log).transpose()?,
        access: args.access_log.as_deref().map(open_log).transpose()?,
    };
    let listen = args
        .listen
        .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 8080)));
    let mut config = Config::new(listen, upstream.clone());
    config.upstream_timeout = Duration::from_secs(args.upstream_timeout.unwrap_or(30));
    config.connect_timeout = Duration::from_secs(args.connect_timeout.unwrap_or(5));
    config.shutdown_timeout = Duration::from_secs(args.shutdown_timeout.unwrap_or(10));
    config.tunnel_idle_timeout = Duration::from_secs(args.tunnel_idle_timeout.unwrap_or(60));
    config.send_timeout = Duration::from_secs(args.send_timeout.unwrap_or(60));
    config.idle_timeout = Duration::from_secs(args.idle_timeout.unwrap_or(75));
    if let Some(s) = args.watch_interval {
        config.watch_interval = waf_serve::watch_interval(s)
            .map_err(|m| CliError::usage(format!("--watch-interval: {m}")))?;
    }
    config.admin = args.admin;
    config.upstream_ca = args.upstream_ca.clone();
    config.profile = args.profile;
    config.reuse_port = args.reuse_port;
    config.trusted_proxies =
        waf_serve::TrustedProxies::parse(&args.trusted_proxies).map_err(CliError::usage)?;
    config.request_id_header = args
        .request_id_header
        .as_deref()
        .map(waf_serve::request_id_header)
        .transpose()
        .map_err(|e| CliError::usage(format!("--request-id-header: {e}")))?;
    config.workers = Some(args.workers.unwrap_or_else(default_workers));
    if let Some(n) = args.value_cache {
        config.value_cache = n;
    }
    let collections = args.collections.settings()?;
    if let Some(bytes) = collections.memory {
        config.collection_memory = bytes;
    }
    config.collection_file = collections.file;
    config.collection_redis = collections.redis;
    config.collection_redis_ca = collections.redis_ca;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(c), Some(k)) => Some(waf_serve::tls::load(c, k).map_err(CliError::usage)?),
        _ => None,
    };
    let rules = Arc::new(rules);
    rules.warnings().iter().for_each(|w| report(w));
    let sites = waf_serve::Sites::single(rules.clone(), &upstream).map_err(CliError::usage)?;
    if args.check {
        waf_serve::check_settings(&config).map_err(CliError::usage)?;
        report("configuration ok: the rules compile, the upstream and files are usable");
        return Ok(());
    }
    let listeners = vec![waf_serve::Listener {
        addr: listen,
        tls,
        proxy_protocol: args.proxy_protocol,
    }];
    waf_serve::run_sites(
        config,
        sites,
        SitesSource::Single(rules),
        listeners,
        logs,
        report,
    )
    .map_err(CliError::usage)
}

fn run_manifest(path: &Path, args: &Args) -> CmdResult {
    let flags = [
        ("--listen", args.listen.is_some()),
        ("--upstream", args.upstream.is_some()),
        ("--error-log", args.error_log.is_some()),
        ("--audit-log", args.audit_log.is_some()),
        ("--access-log", args.access_log.is_some()),
        ("--admin", args.admin.is_some()),
        ("--upstream-timeout", args.upstream_timeout.is_some()),
        ("--connect-timeout", args.connect_timeout.is_some()),
        ("--upstream-ca", args.upstream_ca.is_some()),
        ("--shutdown-timeout", args.shutdown_timeout.is_some()),
        ("--tunnel-idle-timeout", args.tunnel_idle_timeout.is_some()),
        ("--send-timeout", args.send_timeout.is_some()),
        ("--idle-timeout", args.idle_timeout.is_some()),
        ("--watch-interval", args.watch_interval.is_some()),
        ("--tls-cert", args.tls_cert.is_some()),
        ("--profile", args.profile),
        ("--reuse-port", args.reuse_port),
        ("--proxy-protocol", args.proxy_protocol),
        ("--workers", args.workers.is_some()),
        ("--value-cache", args.value_cache.is_some()),
        (
            "--collection-memory",
            args.collections.collection_memory.is_some(),
        ),
        (
            "--collection-file",
            args.collections.collection_file.is_some(),
        ),
        (
            "--collection-redis",
            args.collections.collection_redis.is_some(),
        ),
        (
            "--collection-redis-ca",
            args.collections.collection_redis_ca.is_some(),
        ),
        ("--trusted-proxy", !args.trusted_proxies.is_empty()),
        ("--request-id-header", args.request_id_header.is_some()),
    ];
    if let Some((flag, _)) = flags.iter().find(|f| f.1) {
        return Err(CliError::usage(format!(
            "{flag} is a setting of the manifest `{}` when one is given: write it there",
            path.display()
        )));
    }
    let mut m = Manifest::load(path).map_err(|e| match e {
        ManifestError::Rules { site, error } => {
            crate::report::eprint(error.sources(), error.diagnostics());
            CliError::findings(format!(
                "site `{site}`: the rules have {} error(s)",
                error.error_count()
            ))
        }
        invalid => CliError::usage(invalid.to_string()),
    })?;
    let logs = Logs {
        error: error_log(m.error_log.as_deref())?,
        audit: m.audit_log.as_deref().map(open_log).transpose()?,
        access: m.access_log.as_deref().map(open_log).transpose()?,
    };
    let mut listeners = Vec::with_capacity(m.listeners.len());
    for l in &m.listeners {
        let tls = match &l.tls {
            Some((c, k)) => Some(waf_serve::tls::load(c, k).map_err(CliError::usage)?),
            None => None,
        };
        listeners.push(waf_serve::Listener {
            addr: l.listen,
            tls,
            proxy_protocol: l.proxy_protocol,
        });
    }
    // Taken before the defaults below: a reload compares what the file says.
    let source = SitesSource::manifest(path, &m);
    m.config.workers = Some(m.config.workers.unwrap_or_else(default_workers));
    let names: Vec<&str> = m.sites.names().collect();
    m.warnings.iter().for_each(|w| report(w));
    if args.check {
        waf_serve::check_settings(&m.config).map_err(CliError::usage)?;
        report(&format!(
            "{}: ok: {} listener(s), sites {} (every site's rules compile)",
            path.display(),
            listeners.len(),
            names.join(", ")
        ));
        return Ok(());
    }
    report(&format!("sites: {}", names.join(", ")));
    waf_serve::run_sites(m.config, m.sites, source, listeners, logs, report)
        .map_err(CliError::usage)
}

/// The persistent collections' flags, of `waf serve` and `waf spoa`.
#[derive(clap::Args, Debug, Default)]
pub struct CollectionArgs {
    /// MiB the persistent collections (`initcol`: per-client counters,
    /// flags) may hold; past it the least recently written records are
    /// evicted [default: 64].
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub collection_memory: Option<u64>,
    /// Keep the persistent collections (and `rate_limit` counts) across
    /// restarts in FILE: read at start, written at shutdown (SIGTERM,
    /// Ctrl-C); with `waf serve --reuse-port`, a process that takes the
    /// port over merges what the old one writes [default: in memory only].
    #[arg(long, value_name = "FILE")]
    pub collection_file: Option<PathBuf>,
    /// Share the persistent collections (and `rate_limit` counts) with the
    /// other instances (`waf serve`, `waf spoa`) given the same Redis
    /// (redis://[user:password@]host[:port][/db]): each sends its writes
    /// and brings back the shared state every 100 ms, off the request path.
    #[arg(long, value_name = "URL", conflicts_with = "collection_file")]
    pub collection_redis: Option<String>,
    /// The roots (PEM) the certificate of a rediss:// --collection-redis
    /// must chain to, for a private CA [default: the system's].
    #[arg(long, value_name = "FILE", requires = "collection_redis")]
    pub collection_redis_ca: Option<PathBuf>,
}

impl CollectionArgs {
    /// The settings the flags give, the Redis URL checked (nothing is
    /// connected).
    pub fn settings(&self) -> Result<waf_serve::Collections, CliError> {
        if let Some(url) = &self.collection_redis {
            waf_serve::shared_collections::check_url(url, self.collection_redis_ca.as_deref())
                .map_err(CliError::usage)?;
        }
        Ok(waf_serve::Collections {
            memory: self.collection_memory.map(|mib| (mib as usize) << 20),
            file: self.collection_file.clone(),
            redis: self.collection_redis.clone(),
            redis_ca: self.collection_redis_ca.clone(),
        })
    }
}
