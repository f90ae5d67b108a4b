//! What a manifest reload does with the settings besides sites and
//! upstreams.
//!
//! An operator who edits `timeouts.upstream` and reloads expects the new
//! value, as nginx gives it; a reload that kept the old one and still said
//! "rules reloaded" would leave them believing it applied. So:
//!
//! - the settings read per connection or per request (timeouts, body
//!   limits, `on_error`, `time_budget_ms`, `trusted_proxies`) take effect
//!   for every connection, request, upstream connection and tunnel that
//!   starts after the reload; those in flight keep what they started with;
//!   `collection_memory` for the next writes to the persistent collections,
//!   `collection_file` for where the shutdown writes them;
//! - the settings that shape the process (the listeners, their TLS files'
//!   paths and `proxy_protocol`, the admin address, the log files,
//!   `upstream_ca`, `workers`, `value_cache`, `watch_interval`, `profile`,
//!   `reuse_port`) keep their running value until a restart, and the reload
//!   names each one that changed.
//!
//! The certificate and key in the TLS files are read again on every reload
//! (`tls.rs`); only their paths are fixed.

use crate::manifest::Manifest;
use crate::Config;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The settings of a manifest that a running proxy keeps until it
/// restarts, as the manifest gave them when it started (`workers` as
/// written: unset means one per CPU).
#[derive(Clone, Debug, PartialEq)]
pub struct FixedSettings {
    listen: Vec<SocketAddr>,
    tls: Vec<Option<(PathBuf, PathBuf)>>,
    proxy_protocol: Vec<bool>,
    admin: Option<SocketAddr>,
    error_log: Option<PathBuf>,
    audit_log: Option<PathBuf>,
    access_log: Option<PathBuf>,
    upstream_ca: Option<PathBuf>,
    workers: Option<usize>,
    value_cache: usize,
    watch_interval: Option<Duration>,
    profile: bool,
    reuse_port: bool,
    collection_redis: Option<String>,
    collection_redis_ca: Option<PathBuf>,
}

impl FixedSettings {
    /// The fixed settings of `m`.
    pub fn of(m: &Manifest) -> FixedSettings {
        let c = &m.config;
        FixedSettings {
            listen: m.listeners.iter().map(|l| l.listen).collect(),
            tls: m.listeners.iter().map(|l| l.tls.clone()).collect(),
            proxy_protocol: m.listeners.iter().map(|l| l.proxy_protocol).collect(),
            admin: c.admin,
            error_log: m.error_log.clone(),
            audit_log: m.audit_log.clone(),
            access_log: m.access_log.clone(),
            upstream_ca: c.upstream_ca.clone(),
            workers: c.workers,
            value_cache: c.value_cache,
            watch_interval: c.watch_interval,
            profile: c.profile,
            reuse_port: c.reuse_port,
            collection_redis: c.collection_redis.clone(),
            collection_redis_ca: c.collection_redis_ca.clone(),
        }
    }

    /// The manifest's names of the fixed settings that differ in `fresh`.
    fn changed(&self, fresh: &FixedSettings) -> Vec<&'static str> {
        let mut names = Vec::new();
        let mut check = |name, differs: bool| {
            if differs {
                names.push(name);
            }
        };
        check("listen", self.listen != fresh.listen);
        check("tls", self.tls != fresh.tls);
        check(
            "proxy_protocol",
            self.proxy_protocol != fresh.proxy_protocol,
        );
        check("admin", self.admin != fresh.admin);
        check("error_log", self.error_log != fresh.error_log);
        check("audit_log", self.audit_log != fresh.audit_log);
        check("access_log", self.access_log != fresh.access_log);
        check("upstream_ca", self.upstream_ca != fresh.upstream_ca);
        check("workers", self.workers != fresh.workers);
        check("value_cache", self.value_cache != fresh.value_cache);
        check(
            "watch_interval",
            self.watch_interval != fresh.watch_interval,
        );
        check("profile", self.profile != fresh.profile);
        check("reuse_port", self.reuse_port != fresh.reuse_port);
        check(
            "collection_redis",
            self.collection_redis != fresh.collection_redis,
        );
        check(
            "collection_redis_ca",
            self.collection_redis_ca != fresh.collection_redis_ca,
        );
        names
    }
}

/// What a reload of the manifest does with its settings: the configuration
/// to run with from now on (`running` with `fresh`'s per-request settings),
/// and one line per setting that changed, saying whether it applied.
pub(crate) fn apply(
    running: &Config,
    started: &FixedSettings,
    fresh: &Manifest,
) -> (Config, Vec<String>) {
    let new = &fresh.config;
    let mut next = running.clone();
    let mut applied = Vec::new();
    macro_rules! live {
        ($field:ident, $name:literal) => {
            if next.$field != new.$field {
                next.$field = new.$field.clone();
                applied.push($name);
            }
        };
    }
    live!(header_timeout, "timeouts.header");
    live!(body_timeout, "timeouts.body");
    live!(upstream_timeout, "timeouts.upstream");
    live!(connect_timeout, "timeouts.connect");
    live!(shutdown_timeout, "timeouts.shutdown");
    live!(tunnel_idle_timeout, "timeouts.tunnel_idle");
    live!(send_timeout, "timeouts.send");
    live!(idle_timeout, "timeouts.idle");
    live!(max_request_body, "max_request_body");
    live!(max_request_head, "max_request_head");
    live!(max_held_bodies, "max_held_bodies");
    live!(on_error, "on_error");
    live!(time_budget, "time_budget_ms");
    live!(trusted_proxies, "trusted_proxies");
    live!(request_id_header, "request_id_header");
    live!(collection_memory, "collection_memory");
    live!(collection_file, "collection_file");
    let mut notes = Vec::new();
    if !applied.is_empty() {
        notes.push(format!("settings applied: {}", applied.join(", ")));
    }
    let fixed = started.changed(&FixedSettings::of(fresh));
    if !fixed.is_empty() {
        notes.push(format!(
            "settings that take a restart (the running values stay): {}",
            fixed.join(", ")
        ));
    }
    (next, notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::ListenerSpec;
    use crate::site::Sites;
    use crate::OnError;

    fn manifest(config: Config) -> Manifest {
        Manifest {
            listeners: vec![ListenerSpec {
                listen: config.listen,
                tls: None,
                proxy_protocol: false,
            }],
            config,
            sites: Sites { list: Vec::new() },
            error_log: None,
            audit_log: None,
            access_log: None,
            warnings: Vec::new(),
        }
    }

    fn config() -> Config {
        let upstream = "http://127.0.0.1:9000".parse().unwrap_or_default();
        Config::new(SocketAddr::from(([127, 0, 0, 1], 8080)), upstream)
    }

    #[test]
    fn an_unchanged_manifest_changes_nothing() {
        let m = manifest(config());
        let (next, notes) = apply(&m.config, &FixedSettings::of(&m), &m);
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(next.upstream_timeout, m.config.upstream_timeout);
    }

    #[test]
    fn per_request_settings_apply_and_are_named() {
        let running = config();
        let started = FixedSettings::of(&manifest(running.clone()));
        let mut c = config();
        c.upstream_timeout = Duration::from_secs(3);
        c.max_request_body = 1024;
        c.on_error = OnError::Open;
        c.time_budget = Some(Duration::from_millis(5));
        c.trusted_proxies = crate::TrustedProxies::parse(&["10.0.0.0/8"]).unwrap_or_default();
        c.collection_memory = 8 << 20;
        let (next, notes) = apply(&running, &started, &manifest(c.clone()));
        assert_eq!(next.collection_memory, 8 << 20);
        assert_eq!(next.upstream_timeout, Duration::from_secs(3));
        assert_eq!(next.max_request_body, 1024);
        assert_eq!(next.on_error, OnError::Open);
        assert_eq!(next.time_budget, Some(Duration::from_millis(5)));
        assert_eq!(next.trusted_proxies, c.trusted_proxies);
        assert_eq!(
            notes,
            ["settings applied: timeouts.upstream, max_request_body, on_error, time_budget_ms, trusted_proxies, collection_memory"]
        );
    }

    #[test]
    fn process_settings_keep_their_running_value_and_are_named() {
        let running = config();
        let started = FixedSettings::of(&manifest(running.clone()));
        let mut c = config();
        c.listen = SocketAddr::from(([127, 0, 0, 1], 8081));
        c.admin = Some(SocketAddr::from(([127, 0, 0, 1], 9901)));
        c.workers = Some(4);
        c.value_cache = 100_000;
        c.profile = true;
        let mut m = manifest(c);
        m.error_log = Some(PathBuf::from("/var/log/waf/error.log"));
        m.listeners.push(ListenerSpec {
            listen: SocketAddr::from(([127, 0, 0, 1], 8443)),
            tls: Some((PathBuf::from("c.pem"), PathBuf::from("k.pem"))),
            proxy_protocol: true,
        });
        let (next, notes) = apply(&running, &started, &m);
        assert_eq!(next.listen, running.listen);
        assert_eq!(next.admin, None);
        assert_eq!(next.workers, None);
        assert_eq!(next.value_cache, running.value_cache);
        assert!(!next.profile);
        assert_eq!(
            notes,
            ["settings that take a restart (the running values stay): listen, tls, proxy_protocol, admin, error_log, workers, value_cache, profile"]
        );
    }

    #[test]
    fn a_reload_compares_with_the_start_not_the_last_reload() {
        // A fixed setting changed then changed back is not reported again.
        let running = config();
        let started = FixedSettings::of(&manifest(running.clone()));
        let mut c = config();
        c.listen = SocketAddr::from(([127, 0, 0, 1], 8081));
        let (next, notes) = apply(&running, &started, &manifest(c));
        assert_eq!(notes.len(), 1);
        let (_, notes) = apply(&next, &started, &manifest(config()));
        assert!(notes.is_empty(), "{notes:?}");
    }
}
