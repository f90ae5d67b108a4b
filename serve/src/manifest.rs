//! The YAML manifest (`waf serve --config waf.yaml`): listener, upstreams,
//! logs, timeouts, and sites with their rules, engine mode, paranoia level,
//! exceptions and custom rules. See `docs/serve.md` for the reference.

use crate::block_page::BlockPage;
use crate::filter::{Filter, FilterError};
use crate::health::HealthCheck;
use crate::rules::{RuleSource, Rules};
use crate::site::{CustomAction, CustomRule, Exception, Site, Sites};
use crate::upstream::{Balance, ServerSpec, Upstream};
use crate::{Config, OnError};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use waf_compiler::CompileError;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    listen: Option<SocketAddr>,
    #[serde(default)]
    tls: Option<TlsFile>,
    #[serde(default)]
    proxy_protocol: bool,
    #[serde(default)]
    listeners: Vec<ListenerFile>,
    #[serde(default)]
    admin: Option<SocketAddr>,
    #[serde(default)]
    error_log: Option<PathBuf>,
    #[serde(default)]
    audit_log: Option<PathBuf>,
    #[serde(default)]
    access_log: Option<PathBuf>,
    #[serde(default)]
    timeouts: TimeoutsFile,
    #[serde(default)]
    max_request_body: Option<usize>,
    #[serde(default)]
    max_request_head: Option<usize>,
    #[serde(default)]
    max_held_bodies: Option<u64>,
    #[serde(default)]
    on_error: Option<String>,
    #[serde(default)]
    time_budget_ms: Option<u64>,
    #[serde(default)]
    profile: bool,
    #[serde(default)]
    reuse_port: bool,
    #[serde(default)]
    workers: Option<usize>,
    #[serde(default)]
    value_cache: Option<usize>,
    /// MiB.
    #[serde(default)]
    collection_memory: Option<usize>,
    #[serde(default)]
    collection_file: Option<PathBuf>,
    #[serde(default)]
    collection_redis: Option<String>,
    #[serde(default)]
    collection_redis_ca: Option<PathBuf>,
    #[serde(default)]
    trusted_proxies: Vec<String>,
    #[serde(default)]
    request_id_header: Option<String>,
    #[serde(default)]
    watch_interval: Option<f64>,
    #[serde(default)]
    upstream_ca: Option<PathBuf>,
    upstreams: BTreeMap<String, UrlsFile>,
    #[serde(default)]
    health_checks: BTreeMap<String, HealthFile>,
    /// Per upstream: `round_robin` (the default), `ip_hash`, `least_conn`
    /// or `hash KEY` (see [`Balance::parse`]).
    #[serde(default)]
    balance: BTreeMap<String, String>,
    #[serde(default)]
    block_page: Option<PathBuf>,
    sites: Vec<SiteFile>,
}

/// An upstream's health check (see health.rs); unset fields take
/// `HealthCheck::new`'s defaults.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HealthFile {
    #[serde(default)]
    path: Option<String>,
    /// A gRPC check of this service (`""`: the server as a whole).
    #[serde(default)]
    grpc: Option<String>,
    #[serde(default)]
    host: Option<String>,
    #[serde(default)]
    interval: Option<f64>,
    #[serde(default)]
    timeout: Option<f64>,
    #[serde(default)]
    fails: Option<u32>,
    #[serde(default)]
    passes: Option<u32>,
    #[serde(default)]
    status: Option<Vec<IdSpec>>,
}

/// An upstream: one server's URL, or a list of servers.
#[derive(Deserialize)]
#[serde(untagged)]
enum UrlsFile {
    One(String),
    Several(Vec<String>),
}

impl UrlsFile {
    fn urls(&self) -> &[String] {
        match self {
            UrlsFile::One(u) => std::slice::from_ref(u),
            UrlsFile::Several(v) => v,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListenerFile {
    listen: SocketAddr,
    #[serde(default)]
    tls: Option<TlsFile>,
    #[serde(default)]
    proxy_protocol: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFile {
    cert: PathBuf,
    key: PathBuf,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct TimeoutsFile {
    header: Option<u64>,
    body: Option<u64>,
    upstream: Option<u64>,
    connect: Option<u64>,
    shutdown: Option<u64>,
    tunnel_idle: Option<u64>,
    send: Option<u64>,
    idle: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SiteFile {
    name: String,
    #[serde(default)]
    when: Option<String>,
    upstream: String,
    #[serde(default)]
    rules: Option<Vec<String>>,
    #[serde(default)]
    engine: Option<String>,
    #[serde(default)]
    paranoia: Option<u8>,
    #[serde(default)]
    exceptions: Vec<ExceptionFile>,
    #[serde(default)]
    custom: Vec<CustomFile>,
    #[serde(default)]
    block_page: Option<PathBuf>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExceptionFile {
    when: String,
    #[serde(default)]
    remove_ids: Vec<IdSpec>,
    #[serde(default)]
    remove_tags: Vec<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum IdSpec {
    One(u64),
    Range(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CustomFile {
    name: String,
    when: String,
    action: String,
    #[serde(default)]
    status: Option<u16>,
    #[serde(default)]
    location: Option<String>,
    /// `rate_limit`: requests allowed per `period`.
    #[serde(default)]
    requests: Option<u64>,
    /// `rate_limit`: the window, in seconds (60 by default).
    #[serde(default)]
    period: Option<u64>,
    /// `rate_limit`: what requests are counted by (`ip.src` by default).
    #[serde(default)]
    key: Option<String>,
    /// `rate_limit`: only log the requests over the limit.
    #[serde(default)]
    dry_run: Option<bool>,
}

/// A manifest that could not be used: the file, where in it, and why.
#[derive(Debug)]
pub enum ManifestError {
    /// The file could not be read or is not a valid manifest.
    Invalid {
        /// The manifest.
        path: PathBuf,
        /// Where in it (`sites[1].when`), if known.
        at: String,
        /// What is wrong, with a hint.
        message: String,
    },
    /// A site's rules did not compile.
    Rules {
        /// The site.
        site: String,
        /// The diagnostics.
        error: CompileError,
    },
}

impl std::fmt::Display for ManifestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ManifestError::Invalid { path, at, message } if at.is_empty() => {
                write!(f, "{}: {message}", path.display())
            }
            ManifestError::Invalid { path, at, message } => {
                write!(f, "{}: {at}: {message}", path.display())
            }
            ManifestError::Rules { site, error } => {
                write!(f, "site `{site}`: the rules have errors:\n{error}")
            }
        }
    }
}

impl std::error::Error for ManifestError {}

/// A listener of the manifest: its address, and its certificate and key
/// files (PEM) when it serves HTTPS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerSpec {
    /// Where to accept connections.
    pub listen: SocketAddr,
    /// Certificate chain and key files, for HTTPS.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Connections start with a PROXY protocol header (`proxy_protocol:
    /// true`).
    pub proxy_protocol: bool,
}

/// A manifest, read and checked, its rules compiled.
pub struct Manifest {
    /// Listener, timeouts, limits, admin address.
    pub config: Config,
    /// The sites, in order.
    pub sites: Sites,
    /// `error_log`, relative to the manifest's directory.
    pub error_log: Option<PathBuf>,
    /// `audit_log`.
    pub audit_log: Option<PathBuf>,
    /// `access_log`.
    pub access_log: Option<PathBuf>,
    /// The listeners (`listen` and `tls`, or `listeners`), at least one;
    /// `config.listen` is the first one's address.
    pub listeners: Vec<ListenerSpec>,
    /// The warnings of the sites' rules (see `Rules::warnings`), each line
    /// after the name of the first site that has those rules.
    pub warnings: Vec<String>,
}

/// Rule ids the manifest's own settings use (outside CRS's and the usual
/// local ranges).
const PARANOIA_RULE_ID: u64 = 4_000_000_001;

impl Manifest {
    /// Reads `path`, checks it and compiles every site's rules (sites naming
    /// the same rules, engine mode and paranoia level share one ruleset).
    pub fn load(path: &Path) -> Result<Manifest, ManifestError> {
        let invalid = |at: &str, message: String| ManifestError::Invalid {
            path: path.to_path_buf(),
            at: at.to_string(),
            message,
        };
        let text =
            std::fs::read_to_string(path).map_err(|e| invalid("", format!("cannot read: {e}")))?;
        let file: File = serde_saphyr::from_str(&text).map_err(|e| invalid("", e.to_string()))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let resolve = |p: &Path| {
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                dir.join(p)
            }
        };

        let tls_files =
            |t: &Option<TlsFile>| t.as_ref().map(|t| (resolve(&t.cert), resolve(&t.key)));
        let listeners: Vec<ListenerSpec> = match (file.listen, file.listeners.is_empty()) {
            (Some(listen), true) => vec![ListenerSpec {
                listen,
                tls: tls_files(&file.tls),
                proxy_protocol: file.proxy_protocol,
            }],
            (None, false) if file.tls.is_none() && !file.proxy_protocol => file
                .listeners
                .iter()
                .map(|l| ListenerSpec {
                    listen: l.listen,
                    tls: tls_files(&l.tls),
                    proxy_protocol: l.proxy_protocol,
                })
                .collect(),
            (None, true) => {
                return Err(invalid(
                    "listen",
                    "no listener: give `listen: ADDRESS` (with `tls` for HTTPS), or `listeners` for several".into(),
                ))
            }
            _ => {
                return Err(invalid(
                    "listeners",
                    "give `listen` (and `tls`, `proxy_protocol`) for one listener or `listeners` for several, not both"
                        .into(),
                ))
            }
        };
        for (i, l) in listeners.iter().enumerate() {
            let twice = l.listen.port() != 0 && listeners[..i].iter().any(|e| e.listen == l.listen);
            if twice {
                return Err(invalid(
                    &format!("listeners[{i}]"),
                    format!("{} is listed twice", l.listen),
                ));
            }
        }
        let mut upstreams: BTreeMap<&str, Arc<Upstream>> = BTreeMap::new();
        for (name, urls) in &file.upstreams {
            let at = format!("upstreams.{name}");
            let specs = urls
                .urls()
                .iter()
                .map(|url| ServerSpec::parse(url).map_err(|m| invalid(&at, m)))
                .collect::<Result<Vec<_>, _>>()?;
            let check =
                match file.health_checks.get(name) {
                    Some(h) => Some(health_check(h).map_err(|(field, m)| {
                        invalid(&format!("health_checks.{name}{field}"), m)
                    })?),
                    None => None,
                };
            let balance = match file.balance.get(name) {
                Some(b) => Balance::parse(b).map_err(|m| invalid(&format!("balance.{name}"), m))?,
                None => Balance::default(),
            };
            let up = Upstream::of(name, &specs, check)
                .map_err(|m| invalid(&at, m))?
                .with_balance(balance);
            if up.check.as_ref().is_some_and(|c| c.grpc.is_some()) {
                if let Some(e) = up.servers().iter().find(|e| !e.http2) {
                    return Err(invalid(
                        &format!("health_checks.{name}.grpc"),
                        format!(
                            "`{}` speaks HTTP/1.1: a gRPC check needs h2c:// or h2:// servers",
                            e.url
                        ),
                    ));
                }
            }
            upstreams.insert(name, Arc::new(up));
        }
        for (field, names) in [
            (
                "health_checks",
                file.health_checks.keys().collect::<Vec<_>>(),
            ),
            ("balance", file.balance.keys().collect()),
        ] {
            if let Some(name) = names.into_iter().find(|n| !file.upstreams.contains_key(*n)) {
                return Err(invalid(
                    &format!("{field}.{name}"),
                    no_upstream(name, &file.upstreams),
                ));
            }
        }
        let first_upstream = file
            .upstreams
            .values()
            .find_map(|u| u.urls().first())
            .ok_or_else(|| invalid("upstreams", "name at least one upstream".into()))?;
        if file.sites.is_empty() {
            return Err(invalid(
                "sites",
                "name at least one site (a site without `when` takes every request)".into(),
            ));
        }

        let mut compiled: Vec<(String, Arc<Rules>)> = Vec::new();
        let mut warnings = Vec::new();
        let mut pages: Vec<Arc<BlockPage>> = Vec::new();
        let mut sites = Vec::new();
        let mut names = Vec::new();
        for (i, s) in file.sites.iter().enumerate() {
            let at = |field: &str| format!("sites[{i}] ({}).{field}", s.name);
            if names.contains(&s.name.as_str()) {
                return Err(invalid(
                    &at("name"),
                    format!("a second site named `{}`", s.name),
                ));
            }
            names.push(&s.name);
            let filter = |field: &str, e: &str| {
                Filter::parse(e).map_err(|err: FilterError| invalid(&at(field), err.to_string()))
            };
            let when = s.when.as_deref().map(|e| filter("when", e)).transpose()?;
            let upstream = upstreams.get(s.upstream.as_str()).cloned().ok_or_else(|| {
                invalid(&at("upstream"), no_upstream(&s.upstream, &file.upstreams))
            })?;
            let text = site_rules_text(s, &resolve).map_err(|m| invalid(&at("rules"), m))?;
            let rules = match compiled.iter().find(|(t, _)| *t == text) {
                Some((_, r)) => r.clone(),
                None => {
                    let source = RuleSource::Text {
                        name: path.display().to_string(),
                        text: text.clone(),
                    };
                    let r =
                        Arc::new(Rules::load(source).map_err(|error| ManifestError::Rules {
                            site: s.name.clone(),
                            error,
                        })?);
                    warnings.extend(
                        r.warnings()
                            .into_iter()
                            .map(|w| format!("site {}: {w}", s.name)),
                    );
                    compiled.push((text, r.clone()));
                    r
                }
            };
            let mut exceptions = Vec::new();
            for (j, e) in s.exceptions.iter().enumerate() {
                let field = format!("exceptions[{j}]");
                let mut remove_ids = Vec::new();
                for id in &e.remove_ids {
                    remove_ids.push(id_range(id).map_err(|m| invalid(&at(&field), m))?);
                }
                if remove_ids.is_empty() && e.remove_tags.is_empty() {
                    return Err(invalid(
                        &at(&field),
                        "an exception removes something: `remove_ids: [942100, \"942200-942299\"]` or `remove_tags: [attack-sqli]`".into(),
                    ));
                }
                exceptions.push(Exception {
                    when: filter(&format!("{field}.when"), &e.when)?,
                    remove_ids,
                    remove_tags: e.remove_tags.clone(),
                });
            }
            let mut custom = Vec::new();
            for (j, c) in s.custom.iter().enumerate() {
                let field = format!("custom[{j}]");
                let rate_limit = c.action.eq_ignore_ascii_case("rate_limit");
                if !rate_limit {
                    let given = [
                        ("requests", c.requests.is_some()),
                        ("period", c.period.is_some()),
                        ("key", c.key.is_some()),
                        ("dry_run", c.dry_run.is_some()),
                    ];
                    if let Some((name, _)) = given.iter().find(|(_, g)| *g) {
                        return Err(invalid(
                            &at(&field),
                            format!("only `rate_limit` takes `{name}`"),
                        ));
                    }
                }
                let action = match (c.action.to_ascii_lowercase().as_str(), c.status) {
                    ("rate_limit", status) => {
                        let limit = rate_limit_of(c, status)
                            .map_err(|(sub, m)| invalid(&at(&format!("{field}{sub}")), m))?;
                        CustomAction::RateLimit(limit)
                    }
                    ("redirect", status) => {
                        let status = status.unwrap_or(301);
                        if ![301, 302, 303, 307, 308].contains(&status) {
                            return Err(invalid(
                                &at(&field),
                                format!(
                                    "status {status}: a redirect answers 301, 302, 303, 307 or 308"
                                ),
                            ));
                        }
                        let location = c.location.as_deref().ok_or_else(|| {
                            invalid(
                                &at(&field),
                                "a redirect needs `location`, e.g. \"https://{host}{uri}\"".into(),
                            )
                        })?;
                        let location = crate::redirect::Location::parse(location)
                            .map_err(|m| invalid(&at(&format!("{field}.location")), m))?;
                        CustomAction::Redirect(status, location)
                    }
                    (_, _)
                        if c.location.is_some() && !c.action.eq_ignore_ascii_case("redirect") =>
                    {
                        return Err(invalid(
                            &at(&field),
                            "only `redirect` takes a location".into(),
                        ))
                    }
                    ("block", status) => {
                        let status = status.unwrap_or(403);
                        if !(400..=599).contains(&status) {
                            return Err(invalid(
                                &at(&field),
                                format!("status {status}: a block answers 4xx or 5xx"),
                            ));
                        }
                        CustomAction::Block(status)
                    }
                    ("allow", None) => CustomAction::Allow,
                    ("log", None) => CustomAction::Log,
                    ("allow" | "log", Some(_)) => {
                        return Err(invalid(
                            &at(&field),
                            "only `block` and `redirect` take a status".into(),
                        ))
                    }
                    (other, _) => {
                        return Err(invalid(
                            &at(&field),
                            format!("unknown action `{other}`: use block, redirect, allow, log or rate_limit"),
                        ))
                    }
                };
                custom.push(CustomRule {
                    name: format!("{}/{}", s.name, c.name),
                    when: filter(&format!("{field}.when"), &c.when)?,
                    action,
                });
            }
            let block_page = match s.block_page.as_ref().or(file.block_page.as_ref()) {
                None => None,
                Some(p) => {
                    let p = resolve(p);
                    match pages.iter().find(|page| page.path == p) {
                        Some(page) => Some(page.clone()),
                        None => {
                            let field = if s.block_page.is_some() {
                                at("block_page")
                            } else {
                                "block_page".to_string()
                            };
                            let page =
                                Arc::new(BlockPage::load(&p).map_err(|m| invalid(&field, m))?);
                            pages.push(page.clone());
                            Some(page)
                        }
                    }
                }
            };
            sites.push(Site {
                name: s.name.clone(),
                when,
                rules,
                upstream,
                custom,
                exceptions,
                counts: crate::metrics::SiteCounts::new(&s.name),
                block_page,
            });
        }

        let upstream_uri = ServerSpec::parse(first_upstream)
            .map_err(|m| invalid("upstreams", m))?
            .uri;
        let mut config = Config::new(listeners[0].listen, upstream_uri);
        config.admin = file.admin;
        config.workers = file.workers;
        if let Some(n) = file.value_cache {
            if n == 0 {
                return Err(invalid(
                    "value_cache",
                    format!(
                        "0: give the number of values each worker's cache holds ({} by default)",
                        waf_engine::EvalOptions::DEFAULT_XCACHE_RECORDS
                    ),
                ));
            }
            config.value_cache = n;
        }
        if let Some(mib) = file.collection_memory {
            let bytes = mib.checked_mul(1 << 20).filter(|_| mib > 0);
            let Some(bytes) = bytes else {
                let why = "give the MiB the persistent collections may hold (64 by default)";
                return Err(invalid("collection_memory", format!("{mib}: {why}")));
            };
            config.collection_memory = bytes;
        }
        config.collection_file = file.collection_file.as_deref().map(resolve);
        if let Some(url) = &file.collection_redis {
            if config.collection_file.is_some() {
                return Err(invalid(
                    "collection_redis",
                    "excludes collection_file: Redis keeps the collections across restarts".into(),
                ));
            }
            if let Err(e) = crate::shared_collections::check_url(url, None) {
                return Err(invalid("collection_redis", e));
            }
            let ca = file.collection_redis_ca.as_deref().map(resolve);
            if let Err(e) = crate::shared_collections::check_url(url, ca.as_deref()) {
                return Err(invalid("collection_redis_ca", e));
            }
            config.collection_redis = Some(url.clone());
            config.collection_redis_ca = ca;
        } else if file.collection_redis_ca.is_some() {
            return Err(invalid(
                "collection_redis_ca",
                "is for collection_redis: give both".into(),
            ));
        }
        // Every timeout but the shutdown's must leave time for something:
        // 0 s would fail every connection, request or tunnel at once.
        let t = &file.timeouts;
        let timeouts: [(&str, Option<u64>, &mut Duration); 8] = [
            ("header", t.header, &mut config.header_timeout),
            ("body", t.body, &mut config.body_timeout),
            ("upstream", t.upstream, &mut config.upstream_timeout),
            ("connect", t.connect, &mut config.connect_timeout),
            ("shutdown", t.shutdown, &mut config.shutdown_timeout),
            (
                "tunnel_idle",
                t.tunnel_idle,
                &mut config.tunnel_idle_timeout,
            ),
            ("send", t.send, &mut config.send_timeout),
            ("idle", t.idle, &mut config.idle_timeout),
        ];
        for (name, seconds, slot) in timeouts {
            let Some(s) = seconds else { continue };
            if s == 0 && name != "shutdown" {
                return Err(invalid(
                    &format!("timeouts.{name}"),
                    "0 s would end every wait at once: give at least 1 (seconds)".into(),
                ));
            }
            *slot = Duration::from_secs(s);
        }
        if let Some(s) = file.watch_interval {
            config.watch_interval =
                crate::watch_interval(s).map_err(|m| invalid("watch_interval", m.to_string()))?;
        }
        config.trusted_proxies = crate::TrustedProxies::parse(&file.trusted_proxies)
            .map_err(|e| invalid("trusted_proxies", e))?;
        config.request_id_header = file
            .request_id_header
            .as_deref()
            .map(crate::request_id::header_name)
            .transpose()
            .map_err(|e| invalid("request_id_header", e))?;
        if let Some(m) = file.max_request_body {
            config.max_request_body = m;
        }
        if let Some(m) = file.max_request_head {
            if m < crate::MIN_REQUEST_HEAD {
                return Err(invalid(
                    "max_request_head",
                    format!(
                        "{m} is below {} bytes, the least a head buffer holds",
                        crate::MIN_REQUEST_HEAD
                    ),
                ));
            }
            config.max_request_head = m;
        }
        if let Some(m) = file.max_held_bodies {
            config.max_held_bodies = m;
        }
        config.upstream_ca = file.upstream_ca.as_deref().map(&resolve);
        config.on_error = match file
            .on_error
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            None | Some("closed") => OnError::Closed,
            Some("open") => OnError::Open,
            Some(other) => {
                return Err(invalid(
                    "on_error",
                    format!("`{other}`: use `closed` (the default) or `open`"),
                ))
            }
        };
        config.time_budget = file.time_budget_ms.map(Duration::from_millis);
        config.profile = file.profile;
        config.reuse_port = file.reuse_port;
        Ok(Manifest {
            config,
            sites: Sites { list: sites },
            error_log: file.error_log.as_deref().map(resolve),
            audit_log: file.audit_log.as_deref().map(resolve),
            access_log: file.access_log.as_deref().map(resolve),
            listeners,
            warnings,
        })
    }
}

/// The error for a name that is not one of `upstreams`, listing them.
fn no_upstream<V>(name: &str, upstreams: &BTreeMap<String, V>) -> String {
    let known: Vec<&str> = upstreams.keys().map(String::as_str).collect();
    format!(
        "no upstream named `{name}`; the upstreams are {}",
        known.join(", ")
    )
}

/// A `rate_limit` custom rule's limit, or the field that is wrong
/// (`.requests`) and why.
fn rate_limit_of(
    c: &CustomFile,
    status: Option<u16>,
) -> Result<crate::site::RateLimit, (&'static str, String)> {
    if c.location.is_some() {
        return Err(("", "only `redirect` takes a location".into()));
    }
    let requests = match c.requests {
        Some(n) if n > 0 => n,
        Some(_) => return Err((".requests", "allow at least 1 request per period".into())),
        None => {
            return Err((
                "",
                "a rate limit needs `requests` (per `period`, 60 s by default)".into(),
            ))
        }
    };
    let period = match c.period {
        None => 60,
        Some(p) if (1..=86_400).contains(&p) => p,
        Some(p) => return Err((".period", format!("{p}: seconds, 1 to 86400"))),
    };
    let key = c.key.as_deref().unwrap_or("ip.src");
    let key =
        crate::filter::Key::parse(key).map_err(|e| (".key", format!("`{key}`: {}", e.message)))?;
    let status = status.unwrap_or(429);
    if !(400..=599).contains(&status) {
        return Err((
            ".status",
            format!("status {status}: a rate limit answers 4xx or 5xx"),
        ));
    }
    Ok(crate::site::RateLimit {
        requests,
        period,
        key,
        status,
        dry_run: c.dry_run.unwrap_or(false),
    })
}

/// A health check from the manifest, or the field that is wrong (`.path`)
/// and why.
fn health_check(h: &HealthFile) -> Result<HealthCheck, (&'static str, String)> {
    let mut check = match (&h.path, &h.grpc) {
        (Some(path), None) => {
            if !path.starts_with('/') || path.parse::<hyper::http::uri::PathAndQuery>().is_err() {
                return Err((
                    ".path",
                    format!("`{path}`: a path and query, starting with `/`"),
                ));
            }
            HealthCheck::new(path.clone())
        }
        (None, Some(service)) => {
            // That every server speaks HTTP/2 (gRPC's only transport) is
            // checked once the upstream's endpoints know.
            if h.status.is_some() {
                return Err((
                    ".status",
                    "a gRPC check passes on SERVING: `status` is for HTTP checks".into(),
                ));
            }
            HealthCheck {
                grpc: Some(service.clone()),
                ..HealthCheck::new(crate::health::GRPC_HEALTH_PATH.into())
            }
        }
        (Some(_), Some(_)) => {
            return Err((
                ".grpc",
                "a check is an HTTP `path` or a `grpc` service, not both".into(),
            ))
        }
        (None, None) => {
            return Err((
                "",
                "give the `path` to GET, or the `grpc` service to check (`\"\"`: the whole server)"
                    .into(),
            ))
        }
    };
    if let Some(host) = &h.host {
        check.host = Some(
            hyper::header::HeaderValue::from_str(host)
                .map_err(|_| (".host", format!("`{host}` is not a valid Host header")))?,
        );
    }
    let seconds = |v: Option<f64>, field: &'static str, default: Duration| match v {
        None => Ok(default),
        Some(s) if s >= 0.1 => Duration::try_from_secs_f64(s)
            .map_err(|_| (field, format!("{s}: seconds, at least 0.1"))),
        Some(s) => Err((field, format!("{s}: seconds, at least 0.1"))),
    };
    check.interval = seconds(h.interval, ".interval", check.interval)?;
    check.timeout = seconds(h.timeout, ".timeout", check.timeout)?;
    for (v, field, slot) in [
        (h.fails, ".fails", &mut check.fails),
        (h.passes, ".passes", &mut check.passes),
    ] {
        match v {
            Some(0) => return Err((field, "checks in a row: at least 1".into())),
            Some(n) => *slot = n,
            None => {}
        }
    }
    if let Some(status) = &h.status {
        check.status = status
            .iter()
            .map(|s| match id_range(s) {
                Ok((a, b)) if (100..=599).contains(&a) && (100..=599).contains(&b) => {
                    Ok((a as u16, b as u16))
                }
                _ => Err((
                    ".status",
                    "statuses are codes 100-599 or ranges `first-last`".to_string(),
                )),
            })
            .collect::<Result<_, _>>()?;
        if check.status.is_empty() {
            return Err((".status", "name at least one status".into()));
        }
    }
    Ok(check)
}

/// `942100` or `"942100-942199"`.
fn id_range(id: &IdSpec) -> Result<(u64, u64), String> {
    match id {
        IdSpec::One(n) => Ok((*n, *n)),
        IdSpec::Range(s) => {
            let (a, b) = s.split_once('-').unwrap_or((s, s));
            match (a.trim().parse::<u64>(), b.trim().parse::<u64>()) {
                (Ok(a), Ok(b)) if a <= b => Ok((a, b)),
                _ => Err(format!("`{s}` is not a rule id or a range `first-last`")),
            }
        }
    }
}

/// The SecLang a site compiles: its paranoia level as TX variables set
/// before any rule runs, its rule files (or the embedded default ruleset),
/// then its engine mode, which overrides the files' `SecRuleEngine`.
fn site_rules_text(s: &SiteFile, resolve: &dyn Fn(&Path) -> PathBuf) -> Result<String, String> {
    let mut text = String::new();
    if let Some(pl) = s.paranoia {
        if !(1..=4).contains(&pl) {
            return Err(format!("paranoia {pl}: CRS has levels 1 to 4"));
        }
        // CRS's initialization (rule 901200 and the like) keeps values set
        // before it; a crs-setup that sets them itself (rule 900000) wins.
        text.push_str(&format!(
            "SecAction \"id:{PARANOIA_RULE_ID},phase:1,pass,nolog,setvar:tx.blocking_paranoia_level={pl},setvar:tx.detection_paranoia_level={pl}\"\n"
        ));
    }
    match &s.rules {
        None => {
            text.push_str(waf_engine::DEFAULT_RULES);
            text.push('\n');
        }
        Some(files) if files.is_empty() => {
            return Err(
                "list rule files, or leave `rules` out for the embedded default ruleset".into(),
            )
        }
        Some(files) => {
            for f in files {
                let p = resolve(Path::new(f));
                let p = p.display().to_string();
                if p.contains('"') || p.contains('\n') {
                    return Err(format!(
                        "`{p}`: a rule path cannot hold `\"` or a line break"
                    ));
                }
                text.push_str(&format!("Include \"{p}\"\n"));
            }
        }
    }
    if let Some(mode) = &s.engine {
        let mode = match mode.to_ascii_lowercase().as_str() {
            "on" => "On",
            "detectiononly" => "DetectionOnly",
            "off" => "Off",
            _ => return Err(format!("engine `{mode}`: use On, DetectionOnly or Off")),
        };
        text.push_str(&format!("SecRuleEngine {mode}\n"));
    }
    Ok(text)
}
