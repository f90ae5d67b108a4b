//! The YAML manifest end to end on loopback: sites chosen by filter
//! expressions, each with its rules, engine mode, paranoia level, exceptions
//! and custom rules; reload of the manifest; TLS; and the errors a broken
//! manifest gets.

use hyper::StatusCode;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use waf_serve::{ErrorLog, Logs, Manifest, ManifestError, Server, SitesSource};

mod common;
use common::{
    backend, backends, quiet_logs, raw_exchange, scratch, self_signed, send_to_host,
    send_with_headers, skip_without_openssl, unused_port, Shared,
};

const SHOP_RULES: &str = r#"
SecRuleEngine On
SecRule ARGS "@contains attack" "id:100,phase:1,deny,status:403,log,tag:'attack-sqli',msg:'attack'"
SecRule ARGS "@contains evil" "id:101,phase:1,deny,status:403,log,tag:'attack-xss'"
SecRule TX:blocking_paranoia_level "@ge 2" "id:102,phase:1,chain,deny,status:418,log"
SecRule ARGS:pl "@streq check" "t:none"
"#;

fn manifest_text(upstream: SocketAddr, block_admin: &str) -> String {
    format!(
        r#"
listen: 127.0.0.1:0
workers: 2
timeouts: {{ upstream: 5, shutdown: 3, tunnel_idle: 120 }}
watch_interval: 0.5
max_held_bodies: 5000000
trusted_proxies: [10.0.0.0/8, "192.0.2.10"]
upstreams:
  app: http://{upstream}
sites:
  - name: shop
    when: 'http.host eq "shop.example"'
    upstream: app
    rules: [shop.conf]
    paranoia: 2
    exceptions:
      - when: 'http.request.uri.path eq "/search"'
        remove_tags: [attack-sqli]
      - when: 'http.request.uri.path eq "/comment"'
        remove_ids: [101, "200-300"]
    custom:
      - name: admin-from-outside
        when: 'http.request.uri.path matches "^/admin" and not ip.src in {{{block_admin}}}'
        action: block
        status: 403
      - name: probes
        when: 'http.user_agent contains "probe"'
        action: log
      - name: health
        when: 'http.request.uri.path eq "/health"'
        action: allow
  - name: blog
    when: 'http.host in {{"blog.example" "www.blog.example"}}'
    upstream: app
    rules: [shop.conf]
    engine: DetectionOnly
"#
    )
}

struct Running {
    server: Server,
    log: Shared,
    manifest: PathBuf,
}

async fn start(dir: &Path, block_admin: &str) -> Running {
    let up = backend(Arc::new(AtomicUsize::new(0))).await;
    let (manifest, m) = write_manifest(dir, SHOP_RULES, &manifest_text(up, block_admin));
    assert_eq!(
        (
            m.config.upstream_timeout,
            m.config.shutdown_timeout,
            m.config.tunnel_idle_timeout
        ),
        (
            std::time::Duration::from_secs(5),
            std::time::Duration::from_secs(3),
            std::time::Duration::from_secs(120)
        )
    );
    assert_eq!(
        (m.config.watch_interval, m.config.max_held_bodies),
        (Some(std::time::Duration::from_millis(500)), 5_000_000)
    );
    let (server, log) = serve_plain(&manifest, m).await;
    Running {
        server,
        log,
        manifest,
    }
}

/// Writes `rules` as `shop.conf` and `yaml` as `waf.yaml` in `dir`, and
/// loads that manifest: its path and what it says.
fn write_manifest(dir: &Path, rules: &str, yaml: &str) -> (PathBuf, Manifest) {
    std::fs::write(dir.join("shop.conf"), rules).expect("write rules");
    let manifest = dir.join("waf.yaml");
    std::fs::write(&manifest, yaml).expect("write manifest");
    let m = Manifest::load(&manifest).unwrap_or_else(|e| panic!("{e}"));
    (manifest, m)
}

/// [`write_manifest`], then [`serve_plain`]: the server and its error log.
async fn serve_manifest(dir: &Path, rules: &str, yaml: &str) -> (Server, Shared) {
    let (manifest, m) = write_manifest(dir, rules, yaml);
    serve_plain(&manifest, m).await
}

/// Serves `m` (read from `manifest`) on its one plain listener; the error
/// log is kept.
async fn serve_plain(manifest: &Path, m: Manifest) -> (Server, Shared) {
    let log = Shared::default();
    let logs = Logs {
        error: ErrorLog::to_writer(Box::new(log.clone())),
        audit: None,
        access: None,
    };
    let source = SitesSource::manifest(manifest, &m);
    let listeners = vec![waf_serve::Listener::plain(m.config.listen)];
    let server = Server::start_sites(m.config, m.sites, source, listeners, logs)
        .await
        .expect("start");
    (server, log)
}

async fn status(addr: SocketAddr, host: &str, path: &str) -> StatusCode {
    send_to_host(addr, host, "GET", path, "")
        .await
        .unwrap_or_else(|e| panic!("{host}{path}: {e}"))
        .0
}

#[tokio::test]
async fn sites_exceptions_custom_rules_paranoia_and_engine_mode() {
    let dir = scratch("sites");
    let r = start(&dir, "10.0.0.0/8").await;
    let a = r.server.addr();
    let shop = "shop.example";
    assert_eq!(status(a, shop, "/?q=garden").await, StatusCode::OK);
    assert_eq!(status(a, shop, "/?q=attack").await, StatusCode::FORBIDDEN);
    // Exceptions: by tag on /search, by id on /comment; only there.
    assert_eq!(status(a, shop, "/search?q=attack").await, StatusCode::OK);
    assert_eq!(
        status(a, shop, "/search?q=evil").await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(status(a, shop, "/comment?q=evil").await, StatusCode::OK);
    assert_eq!(
        status(a, shop, "/comment?q=attack").await,
        StatusCode::FORBIDDEN
    );
    // Custom rules: block /admin from outside 10/8 (the client is 127.0.0.1),
    // allow /health whatever it carries.
    assert_eq!(status(a, shop, "/admin/users").await, StatusCode::FORBIDDEN);
    assert_eq!(status(a, shop, "/health?q=attack").await, StatusCode::OK);
    // paranoia: 2 reaches the rules as TX:blocking_paranoia_level.
    assert_eq!(status(a, shop, "/?pl=check").await, StatusCode::IM_A_TEAPOT);
    // The blog runs the same rules in DetectionOnly: logged, not blocked;
    // no paranoia set there.
    assert_eq!(
        status(a, "www.blog.example", "/?q=attack").await,
        StatusCode::OK
    );
    assert_eq!(
        status(a, "blog.example", "/?pl=check").await,
        StatusCode::OK
    );
    // No site takes this host.
    assert_eq!(status(a, "other.example", "/").await, StatusCode::NOT_FOUND);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let log = r.log.text();
    assert!(
        log.contains("custom rule \"shop/admin-from-outside\" blocked with 403"),
        "{log}"
    );
    // Rule 100 matched on the shop (blocked) and on the blog (logged only).
    let hits = log
        .lines()
        .filter(|l| l.contains("[id \"100\"]") && l.contains("[uri \"/?q=attack\"]"))
        .count();
    assert!(hits >= 2, "{log}");
    // Per site on /metrics: the shop's 9 requests, 5 answered by the WAF
    // (3 rules, the custom block, the 418); the blog blocked nothing.
    let text = r.server.metrics().render(Default::default());
    for line in [
        "waf_site_requests_total{site=\"shop\"} 9",
        "waf_site_blocked_total{site=\"shop\"} 5",
        "waf_site_responses_total{site=\"shop\",code=\"2xx\"} 4",
        "waf_site_responses_total{site=\"shop\",code=\"4xx\"} 5",
        "waf_site_requests_total{site=\"blog\"} 2",
        "waf_site_blocked_total{site=\"blog\"} 0",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
    }
}

/// The other spellings of a path a custom rule names reach the same
/// application path, so they are blocked as it is; and the application
/// gets the path as the client sent it.
#[tokio::test]
async fn a_custom_rule_on_a_path_is_not_walked_around_by_spelling_it_otherwise() {
    let dir = scratch("spellings");
    let r = start(&dir, "10.0.0.0/8").await;
    let a = r.server.addr();
    for target in [
        "/admin/users",
        "/%61dmin/users",
        "//admin/users",
        "/x/../admin/users",
        "/./admin",
        "/shop/%2e%2e/admin",
        "http://shop.example/admin/users",
    ] {
        let answer = raw_exchange(
            a,
            &format!("GET {target} HTTP/1.1\r\nHost: shop.example\r\nConnection: close\r\n\r\n"),
        )
        .await;
        assert!(answer.starts_with("HTTP/1.1 403"), "{target}: {answer}");
    }
    // Not the same path: an encoded slash is not a separator, and paths
    // are case-sensitive (`/%41dmin` is `/Admin`).
    for target in ["/x%2F..%2Fadmin", "/%41dmin"] {
        let answer = raw_exchange(
            a,
            &format!("GET {target} HTTP/1.1\r\nHost: shop.example\r\nConnection: close\r\n\r\n"),
        )
        .await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{target}: {answer}");
    }
}

/// A site chosen by host is not left for the next one by a `Host` the
/// application reads as the same host (a port, a final dot, another case,
/// an absolute-form target), nor by one it could read as another (two
/// `Host` headers, a list): those get 400.
#[tokio::test]
async fn a_site_is_not_walked_around_by_spelling_its_host_otherwise() {
    let dir = scratch("host-spellings");
    let up = backend(Arc::new(AtomicUsize::new(0))).await;
    let (server, _log) = serve_manifest(
        &dir,
        "SecRuleEngine On\n",
        &format!(
            r#"
listen: 127.0.0.1:0
upstreams:
  app: http://{up}
sites:
  - name: admin
    when: 'http.host eq "admin.example"'
    upstream: app
    rules: [shop.conf]
    custom:
      - name: closed
        when: 'not ip.src in {{10.0.0.0/8}}'
        action: block
        status: 403
  - name: public
    upstream: app
    rules: [shop.conf]
"#
        ),
    )
    .await;
    let a = server.addr();
    let answer = |head: String| async move {
        raw_exchange(a, &format!("{head}Connection: close\r\n\r\n")).await
    };
    for host in [
        "admin.example",
        "admin.example:80",
        "admin.example.",
        "ADMIN.Example.:8080",
    ] {
        let got = answer(format!("GET /headers HTTP/1.1\r\nHost: {host}\r\n")).await;
        assert!(got.starts_with("HTTP/1.1 403"), "{host}: {got}");
    }
    // An absolute-form target names the host, whatever `Host` says, and
    // the application gets that host.
    let got =
        answer("GET http://admin.example/headers HTTP/1.1\r\nHost: public.example\r\n".into())
            .await;
    assert!(got.starts_with("HTTP/1.1 403"), "{got}");
    let got =
        answer("GET http://public.example/headers HTTP/1.1\r\nHost: admin.example\r\n".into())
            .await;
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    assert!(got.contains("\nhost: public.example\n"), "{got}");
    assert!(!got.contains("admin.example"), "{got}");
    for head in [
        "GET /headers HTTP/1.1\r\nHost: public.example\r\nHost: admin.example\r\n",
        "GET /headers HTTP/1.1\r\nHost: admin.example, public.example\r\n",
        "GET /headers HTTP/1.1\r\nHost: public.example,admin.example\r\n",
        "GET /headers HTTP/1.1\r\nHost: user@admin.example\r\n",
        "GET /headers HTTP/1.1\r\n",
    ] {
        let got = answer(head.into()).await;
        assert!(got.starts_with("HTTP/1.1 400"), "{head}: {got}");
    }
    // The other site is still the other site, and HTTP/1.0 needs no host.
    let got = answer("GET /headers HTTP/1.1\r\nHost: public.example:80\r\n".into()).await;
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    assert!(got.contains("\nhost: public.example:80\n"), "{got}");
    let got = answer("GET /headers HTTP/1.0\r\n".into()).await;
    assert!(got.starts_with("HTTP/1.0 200"), "{got}");
    // HTTP/2: a `host` header that names another host than `:authority`.
    let (mut h2, _conn) = common::h2_connect(a).await;
    for (authority, host, want) in [
        ("admin.example", None, StatusCode::FORBIDDEN),
        (
            "admin.example",
            Some("public.example"),
            StatusCode::BAD_REQUEST,
        ),
        (
            "public.example",
            Some("admin.example"),
            StatusCode::BAD_REQUEST,
        ),
        ("public.example", Some("Public.example:443"), StatusCode::OK),
    ] {
        let mut request = hyper::Request::builder().uri(format!("http://{authority}/headers"));
        if let Some(host) = host {
            request = request.header("host", host);
        }
        let request = request
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .expect("request");
        let got = h2.send_request(request).await.expect("answer").status();
        assert_eq!(got, want, "{authority} {host:?}");
    }
}

/// A target that is not a path (`OPTIONS *`, a bare authority) is a bad
/// request: it never reaches an upstream server, and is not taken for a
/// server that cannot be reached (which would leave every server of the
/// upstream out, one request each).
#[tokio::test]
async fn a_target_that_is_not_a_path_is_a_bad_request_not_a_server_down() {
    let dir = scratch("asterisk");
    let (hits, ups) = backends(2).await;
    let (server, _log) = serve_manifest(
        &dir,
        "SecRuleEngine On\n",
        &format!(
            "listen: 127.0.0.1:0\nupstreams:\n  app: [http://{}, http://{}]\nsites:\n  - name: all\n    upstream: app\n    rules: [shop.conf]\n",
            ups[0], ups[1]
        ),
    )
    .await;
    let a = server.addr();
    for head in [
        "OPTIONS * HTTP/1.1\r\nHost: shop.example\r\n",
        "GET shop.example HTTP/1.1\r\nHost: shop.example\r\n",
    ] {
        for _ in 0..3 {
            let got = raw_exchange(a, &format!("{head}Connection: close\r\n\r\n")).await;
            assert!(got.starts_with("HTTP/1.1 400"), "{head}: {got}");
        }
    }
    let text = server.metrics().render(Default::default());
    assert!(
        text.lines()
            .any(|l| l == "waf_upstream_servers_down_total 0"),
        "{text}"
    );
    let total = || hits.iter().map(|h| h.load(Ordering::SeqCst)).sum::<usize>();
    assert_eq!(total(), 0);
    for _ in 0..4 {
        assert_eq!(status(a, "shop.example", "/").await, StatusCode::OK);
    }
    assert!(hits.iter().all(|h| h.load(Ordering::SeqCst) == 2));
}

#[tokio::test]
async fn a_reload_reads_the_manifest_again_and_a_broken_one_changes_nothing() {
    let dir = scratch("reload");
    let r = start(&dir, "10.0.0.0/8").await;
    let a = r.server.addr();
    assert_eq!(
        status(a, "shop.example", "/admin").await,
        StatusCode::FORBIDDEN
    );
    // Allow loopback to /admin.
    let text = std::fs::read_to_string(&r.manifest).expect("read");
    std::fs::write(
        &r.manifest,
        text.replace("{10.0.0.0/8}", "{10.0.0.0/8 127.0.0.1}"),
    )
    .expect("write");
    let notes = r.server.reload().unwrap_or_else(|e| panic!("{e}"));
    assert!(notes.is_empty(), "no setting changed: {notes:?}");
    assert_eq!(status(a, "shop.example", "/admin").await, StatusCode::OK);
    // The site kept its counters through the reload: 2 requests, 1 blocked.
    let text = r.server.metrics().render(Default::default());
    for line in [
        "waf_site_requests_total{site=\"shop\"} 2",
        "waf_site_blocked_total{site=\"shop\"} 1",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
    }
    // A broken filter: refused, the running sites stay.
    let text = std::fs::read_to_string(&r.manifest).expect("read");
    std::fs::write(
        &r.manifest,
        text.replace("matches \"^/admin\"", "matches \"(\""),
    )
    .expect("write");
    let e = r.server.reload().expect_err("broken manifest");
    assert!(e.to_string().contains("bad regex"), "{e}");
    assert_eq!(status(a, "shop.example", "/admin").await, StatusCode::OK);
    assert_eq!(
        status(a, "shop.example", "/?q=attack").await,
        StatusCode::FORBIDDEN
    );
}

#[tokio::test]
async fn a_reload_applies_per_request_settings_and_names_those_that_take_a_restart() {
    let dir = scratch("settings");
    let r = start(&dir, "10.0.0.0/8").await;
    let a = r.server.addr();
    let post = |body: &'static str| async move {
        send_to_host(a, "shop.example", "POST", "/form", body)
            .await
            .unwrap_or_else(|e| panic!("POST: {e}"))
            .0
    };
    let body = "q=garden&filler=0123456789012345678901234567890123456789";
    assert_eq!(post(body).await, StatusCode::OK);
    let text = std::fs::read_to_string(&r.manifest).expect("read");
    std::fs::write(
        &r.manifest,
        text.replace("workers: 2\n", "workers: 3\nmax_request_body: 32\n"),
    )
    .expect("write");
    let notes = r.server.reload().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        notes,
        [
            "settings applied: max_request_body",
            "settings that take a restart (the running values stay): workers"
        ]
    );
    // The new limit holds for the next request, the rules and sites too.
    assert_eq!(post(body).await, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(post("q=garden").await, StatusCode::OK);
    assert_eq!(
        status(a, "shop.example", "/?q=attack").await,
        StatusCode::FORBIDDEN
    );
}

/// An upstream of several servers: requests take them in turn; one that
/// refuses connections costs no request (the request goes to the next
/// server, its body too) and is left out for a while, said once in the
/// error log.
#[tokio::test]
async fn an_upstream_of_several_servers_takes_them_in_turn_and_skips_one_down() {
    // Bodies held for phase 2, and bodies streamed through (not inspected).
    for (case, rules) in [
        ("held", format!("SecRequestBodyAccess On\n{SHOP_RULES}")),
        ("streamed", SHOP_RULES.to_string()),
    ] {
        several_servers(case, &rules).await;
    }
}

#[tokio::test]
async fn a_custom_redirect_sends_plain_http_to_https() {
    let dir = scratch("redirect");
    let hits = Arc::new(AtomicUsize::new(0));
    let up = backend(hits.clone()).await;
    let (server, log) = serve_manifest(
        &dir,
        SHOP_RULES,
        &format!(
            r#"listen: 127.0.0.1:0
upstreams:
  app: http://{up}
sites:
  - name: shop
    upstream: app
    rules: [shop.conf]
    custom:
      - name: https-only
        when: 'not ssl and http.request.uri.path ne "/.well-known/acme-challenge/x"'
        action: redirect
        location: "https://{{host}}{{uri}}"
"#
        ),
    )
    .await;
    let addr = server.addr();
    for (host, target, want) in [
        (
            "shop.example",
            "/cart?id=7",
            "https://shop.example/cart?id=7",
        ),
        ("shop.example:8080", "/", "https://shop.example/"),
    ] {
        let (status, headers, _) = send_to_host(addr, host, "GET", target, "")
            .await
            .unwrap_or_else(|e| panic!("{host}{target}: {e}"));
        assert_eq!(status, StatusCode::MOVED_PERMANENTLY, "{host}{target}");
        assert_eq!(
            headers.get("location").and_then(|v| v.to_str().ok()),
            Some(want)
        );
    }
    // A host that is not a host name is not copied into a Location: it is
    // refused before any site.
    assert_eq!(
        status(addr, "evil.example@x", "/").await,
        StatusCode::BAD_REQUEST
    );
    // What the filter leaves out goes on to the application.
    assert_eq!(
        status(addr, "shop.example", "/.well-known/acme-challenge/x").await,
        StatusCode::OK
    );
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    log_shows(&log, "custom rule \"shop/https-only\" redirected with 301").await;
    let text = server.metrics().render(Default::default());
    assert!(
        text.contains(
            "waf_custom_rule_actions_total{rule=\"shop/https-only\",action=\"redirect\"} 2"
        ),
        "{text}"
    );
}

#[tokio::test]
async fn a_rate_limit_answers_429_past_its_requests_per_key_and_keeps_counting_across_a_reload() {
    let dir = scratch("rate-limit");
    let hits = Arc::new(AtomicUsize::new(0));
    let up = backend(hits.clone()).await;
    let (server, log) = serve_manifest(
        &dir,
        SHOP_RULES,
        &format!(
            r#"listen: 127.0.0.1:0
upstreams:
  app: http://{up}
sites:
  - name: shop
    upstream: app
    rules: [shop.conf]
    custom:
      - name: login
        when: 'http.request.uri.path eq "/login"'
        action: rate_limit
        requests: 3
        period: 60
        key: http.host
      - name: seen
        when: 'http.request.uri.path eq "/login"'
        action: log
      - name: search-trial
        when: 'http.request.uri.path eq "/search"'
        action: rate_limit
        requests: 1
        dry_run: true
"#
        ),
    )
    .await;
    let addr = server.addr();
    for i in 0..3 {
        assert_eq!(
            status(addr, "a.example", "/login").await,
            StatusCode::OK,
            "request {i}"
        );
    }
    let (got, headers, _) = send_to_host(addr, "a.example", "GET", "/login", "")
        .await
        .expect("fourth request");
    assert_eq!(got, StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("Retry-After in seconds");
    assert!((1..=60).contains(&retry), "Retry-After {retry}");
    // Another key, and a request the filter leaves out, are not limited.
    assert_eq!(status(addr, "b.example", "/login").await, StatusCode::OK);
    assert_eq!(status(addr, "a.example", "/other").await, StatusCode::OK);
    assert_eq!(hits.load(Ordering::SeqCst), 5);
    log_shows(
        &log,
        "custom rule \"shop/login\" over 3 requests in 60 s by http.host: answered 429, retry after",
    )
    .await;
    // In dry run, a limit only logs what it would do.
    for _ in 0..2 {
        assert_eq!(status(addr, "a.example", "/search").await, StatusCode::OK);
    }
    log_shows(
        &log,
        "custom rule \"shop/search-trial\" over 1 requests in 60 s by ip.src: would answer 429, retry after",
    )
    .await;
    assert!(log.text().contains(" s (dry run) [when"), "{}", log.text());
    let text = server.metrics().render(Default::default());
    for line in [
        "waf_custom_rule_actions_total{rule=\"shop/login\",action=\"rate_limit\"} 1",
        // The rules after a limit see the requests it let through.
        "waf_custom_rule_actions_total{rule=\"shop/seen\",action=\"log\"} 4",
        "waf_custom_rule_actions_total{rule=\"shop/search-trial\",action=\"rate_limit_dry_run\"} 1",
    ] {
        assert!(text.contains(line), "no {line} in:\n{text}");
    }
    // The counts are the process's: a reload keeps them.
    server.reload().expect("reload");
    assert_eq!(
        status(addr, "a.example", "/login").await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(hits.load(Ordering::SeqCst), 7);
}

/// Concurrent requests of one key get exactly the limit through: the
/// count is one increment under a lock, never read then written.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rate_limit_lets_exactly_its_requests_through_under_concurrency() {
    let dir = scratch("rate-limit-concurrent");
    let hits = Arc::new(AtomicUsize::new(0));
    let up = backend(hits.clone()).await;
    let (server, _log) = serve_manifest(
        &dir,
        SHOP_RULES,
        &format!(
            "listen: 127.0.0.1:0\nupstreams:\n  app: http://{up}\nsites:\n  - name: shop\n    upstream: app\n    rules: [shop.conf]\n    custom:\n      - name: api\n        when: 'http.request.uri.path eq \"/api\"'\n        action: rate_limit\n        requests: 100\n        period: 600\n"
        ),
    )
    .await;
    let addr = server.addr();
    let clients: Vec<_> = (0..8)
        .map(|_| {
            tokio::spawn(async move {
                let mut codes = Vec::new();
                for _ in 0..25 {
                    codes.push(status(addr, "shop.example", "/api").await);
                }
                codes
            })
        })
        .collect();
    let mut ok = 0;
    let mut limited = 0;
    for c in clients {
        for code in c.await.expect("client") {
            match code {
                StatusCode::OK => ok += 1,
                StatusCode::TOO_MANY_REQUESTS => limited += 1,
                other => panic!("unexpected {other}"),
            }
        }
    }
    assert_eq!((ok, limited), (100, 100));
    assert_eq!(hits.load(Ordering::SeqCst), 100);
}

#[tokio::test]
async fn weights_share_the_load_and_a_backup_takes_over_when_the_primaries_are_down() {
    let dir = scratch("weights");
    let (hits, addrs) = backends(3).await;
    let dead: Vec<SocketAddr> = (0..2).map(|_| unused_port()).collect();
    let (server, _log) = serve_manifest(
        &dir,
        SHOP_RULES,
        &format!(
            "listen: 127.0.0.1:0\nupstreams:\n  app: [\"http://{} weight=3\", http://{}, \"http://{} backup\"]\n  gone: [\"http://{} weight=2\", http://{}, \"http://{} backup\"]\nsites:\n  - name: gone\n    when: 'http.host eq \"gone.example\"'\n    upstream: gone\n    rules: [shop.conf]\n  - name: all\n    upstream: app\n    rules: [shop.conf]\n",
            addrs[0], addrs[1], addrs[2], dead[0], dead[1], addrs[2]
        ),
    )
    .await;
    let addr = server.addr();
    for _ in 0..8 {
        assert_eq!(status(addr, "shop.example", "/").await, StatusCode::OK);
    }
    let counts: Vec<usize> = hits.iter().map(|h| h.load(Ordering::SeqCst)).collect();
    assert_eq!(counts, [6, 2, 0], "weight 3 against 1, the backup idle");
    // Both primaries refuse connections: every request goes to the backup.
    for _ in 0..4 {
        assert_eq!(status(addr, "gone.example", "/").await, StatusCode::OK);
    }
    assert_eq!(hits[2].load(Ordering::SeqCst), 4);
}

/// A proxy in front of two backends (their hit counters returned) as one
/// upstream, `app`, balanced by `balance`; `extra` goes at the top of the
/// manifest.
async fn two_servers_balanced(
    case: &str,
    balance: &str,
    extra: &str,
) -> (Server, Vec<Arc<AtomicUsize>>) {
    let dir = scratch(case);
    let (hits, addrs) = backends(2).await;
    let (server, _log) = serve_manifest(
        &dir,
        SHOP_RULES,
        &format!(
            "listen: 127.0.0.1:0\n{extra}upstreams:\n  app: [http://{}, http://{}]\nbalance:\n  app: {balance}\nsites:\n  - name: all\n    upstream: app\n    rules: [shop.conf]\n",
            addrs[0], addrs[1]
        ),
    )
    .await;
    (server, hits)
}

/// Sends 4 requests for each of 16 keys (`request(key, n)`: the path and
/// the one header that carries the key) through `server`, and checks that
/// each key's requests all went to one of the two servers `hits` counts,
/// and that the keys used both.
async fn each_key_on_one_server(
    server: &Server,
    hits: &[Arc<AtomicUsize>],
    request: impl Fn(usize, usize) -> (String, &'static str, String),
) {
    let addr = server.addr();
    let counts = || -> Vec<usize> { hits.iter().map(|h| h.load(Ordering::SeqCst)).collect() };
    let mut servers_seen = [false; 2];
    for key in 0..16 {
        let before = counts();
        for n in 0..4 {
            let (path, name, value) = request(key, n);
            let headers = [(name, value.as_str())];
            let (status, _, _) =
                send_with_headers(addr, "shop.example", "GET", &path, "", &headers)
                    .await
                    .unwrap_or_else(|e| panic!("{name}: {value}: {e}"));
            assert_eq!(status, StatusCode::OK);
        }
        let got: Vec<usize> = counts().iter().zip(&before).map(|(a, b)| a - b).collect();
        assert!(got == [4, 0] || got == [0, 4], "key {key}: {got:?}");
        servers_seen[usize::from(got[1] == 4)] = true;
    }
    assert_eq!(servers_seen, [true, true], "16 keys on both servers");
}

/// With `balance: ip_hash`, a client's requests go to one server (clients
/// named by a trusted proxy's `X-Forwarded-For` here, as behind a load
/// balancer), and different clients to both.
#[tokio::test]
async fn ip_hash_keeps_each_client_on_one_server() {
    let (server, hits) =
        two_servers_balanced("ip-hash", "ip_hash", "trusted_proxies: [127.0.0.1]\n").await;
    each_key_on_one_server(&server, &hits, |client, _| {
        ("/".into(), "X-Forwarded-For", format!("198.51.{client}.20"))
    })
    .await;
}

/// With `balance: hash KEY`, the requests with one key (a header here)
/// go to one server, whatever else differs (the URI), and different keys
/// to both.
#[tokio::test]
async fn hash_keeps_each_key_on_one_server() {
    let (server, hits) =
        two_servers_balanced("hash", "'hash http.request.headers[\"X-User-Id\"]'", "").await;
    each_key_on_one_server(&server, &hits, |user, n| {
        (format!("/cart?n={n}"), "X-User-Id", format!("user-{user}"))
    })
    .await;
}

/// With `balance: least_conn`, requests go to the server with the fewest
/// in progress: while one server is busy with a slow request, the others
/// take every request (round robin would send it half of them).
#[tokio::test]
async fn least_conn_spares_the_busy_server() {
    let (server, hits) = two_servers_balanced("least-conn", "least_conn", "").await;
    let addr = server.addr();
    let counts = || -> Vec<usize> { hits.iter().map(|h| h.load(Ordering::SeqCst)).collect() };
    // The backend's `/slow` answers after 3 s.
    let slow = tokio::spawn(async move { status(addr, "shop.example", "/slow").await });
    for _ in 0..100 {
        if counts().iter().sum::<usize>() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let busy = counts()
        .iter()
        .position(|&n| n == 1)
        .expect("the slow request arrived");
    for _ in 0..4 {
        assert_eq!(status(addr, "shop.example", "/").await, StatusCode::OK);
    }
    let mut want = vec![4, 4];
    want[busy] = 1;
    assert_eq!(counts(), want, "every quick request to the idle server");
    // `/metrics` shows what least_conn compared.
    let text = server.metrics().render(Default::default());
    let in_progress = |n: usize| {
        text.lines()
            .filter(|l| l.starts_with("waf_upstream_requests_in_progress{upstream=\"app\""))
            .filter(|l| l.ends_with(&format!("}} {n}")))
            .count()
    };
    assert_eq!((in_progress(1), in_progress(0)), (1, 1), "{text}");
    assert_eq!(slow.await.expect("join"), StatusCode::OK);
    // Both idle again: shared in turn.
    for _ in 0..4 {
        assert_eq!(status(addr, "shop.example", "/").await, StatusCode::OK);
    }
    let after = counts();
    assert!(after[busy] >= 2, "{after:?}");
}

async fn several_servers(case: &str, rules: &str) {
    let dir = scratch(&format!("servers-{case}"));
    let (hits_a, hits_b) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (addr_a, addr_b) = (backend(hits_a.clone()).await, backend(hits_b.clone()).await);
    // A port nobody listens on.
    let dead = unused_port();
    let (server, log) = serve_manifest(
        &dir,
        rules,
        &format!("listen: 127.0.0.1:0\nupstreams:\n  app: [http://{dead}, http://{addr_a}, http://{addr_b}]\nsites:\n  - name: all\n    upstream: app\n    rules: [shop.conf]\n"),
    )
    .await;
    let addr = server.addr();
    for i in 0..6 {
        let (status, _, body) = send_to_host(addr, "shop.example", "POST", "/form", "q=garden")
            .await
            .unwrap_or_else(|e| panic!("{case} request {i}: {e}"));
        assert_eq!(
            (status, body.as_str()),
            (StatusCode::OK, "q=garden"),
            "{case} request {i}: {}",
            log.text()
        );
    }
    assert_eq!(
        status(addr, "shop.example", "/?q=attack").await,
        StatusCode::FORBIDDEN
    );
    let (a, b) = (hits_a.load(Ordering::SeqCst), hits_b.load(Ordering::SeqCst));
    assert_eq!(a + b, 6, "{case}: every request answered by a live server");
    assert!(a >= 2 && b >= 2, "{case}: both in turn: {a} and {b}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let text = log.text();
    let down = format!("upstream server http://{dead}/ unreachable, left out for 10 s");
    assert_eq!(text.matches(&down).count(), 1, "{case}: {text}");
    assert!(!text.contains("upstream unavailable"), "{case}: {text}");
    // Each server's counters: the dead one tried once, unanswered; the
    // live ones' answers, all 2xx, timed.
    let metrics = server.metrics().render(Default::default());
    let label = |addr: &SocketAddr| format!("upstream=\"app\",server=\"http://{addr}/\"");
    for want in [
        format!("waf_upstream_requests_total{{{}}} 1\n", label(&dead)),
        format!("waf_upstream_failures_total{{{}}} 1\n", label(&dead)),
        format!("waf_upstream_requests_total{{{}}} {}\n", label(&addr_a), a),
        format!(
            "waf_upstream_responses_total{{{},code=\"2xx\"}} {}\n",
            label(&addr_a),
            a
        ),
        format!("waf_upstream_failures_total{{{}}} 0\n", label(&addr_b)),
        format!(
            "waf_upstream_response_seconds_count{{{}}} {}\n",
            label(&addr_b),
            b
        ),
    ] {
        assert!(
            metrics.contains(&want),
            "{case}: no {want:?} in:\n{metrics}"
        );
    }
}

/// A backend for health checks: `/healthz` answers 200 or, once `failing`
/// is set, 503, and every other path 200 (500 while failing: an
/// application that accepts connections but is broken). Counts the other
/// requests in `hits` and the checks in `checks`, and keeps the `Host` of
/// the last check.
async fn checked_backend(
    failing: Arc<AtomicBool>,
    hits: Arc<AtomicUsize>,
    checks: Arc<AtomicUsize>,
    check_host: Arc<Mutex<String>>,
) -> SocketAddr {
    use http_body_util::Full;
    common::listen(move |stream| {
        let (failing, hits, checks, check_host) = (
            failing.clone(),
            hits.clone(),
            checks.clone(),
            check_host.clone(),
        );
        async move {
            let service =
                hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let failing = failing.load(Ordering::SeqCst);
                    let status = if req.uri().path() == "/healthz" {
                        checks.fetch_add(1, Ordering::SeqCst);
                        if let Some(h) = req.headers().get("host").and_then(|h| h.to_str().ok()) {
                            *check_host.lock().expect("lock") = h.to_string();
                        }
                        if failing {
                            503
                        } else {
                            200
                        }
                    } else {
                        hits.fetch_add(1, Ordering::SeqCst);
                        if failing {
                            500
                        } else {
                            200
                        }
                    };
                    async move {
                        let mut r =
                            hyper::Response::new(Full::new(bytes::Bytes::from_static(b"ok")));
                        *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
                        Ok::<_, std::convert::Infallible>(r)
                    }
                });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        }
    })
    .await
}

/// A gRPC server's health service, over h2c: `Check` of `shop.Cart`
/// answers `SERVING`, or `NOT_SERVING` while `failing` is set (in a
/// message, status in the trailers); any other service gets
/// `grpc-status: 5` at once (Trailers-Only), as grpc-go's does. Counts
/// the checks.
async fn grpc_health_backend(failing: Arc<AtomicBool>, checks: Arc<AtomicUsize>) -> SocketAddr {
    use bytes::Bytes;
    use http_body_util::BodyExt;
    use hyper::body::Frame;
    common::listen(move |stream| {
        let (failing, checks) = (failing.clone(), checks.clone());
        async move {
            let service =
                hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let (failing, checks) = (failing.clone(), checks.clone());
                    async move {
                        let right = req.uri().path() == "/grpc.health.v1.Health/Check"
                            && req.method() == hyper::Method::POST
                            && req.headers().get("content-type").map(|v| v.as_bytes())
                                == Some(b"application/grpc");
                        let Ok(body) = req.into_body().collect().await else {
                            return Err("body");
                        };
                        checks.fetch_add(1, Ordering::SeqCst);
                        let mut trailers = hyper::HeaderMap::new();
                        let mut frames: Vec<Result<Frame<Bytes>, std::convert::Infallible>> =
                            Vec::new();
                        let mut r = hyper::Response::new(());
                        r.headers_mut()
                            .insert("content-type", "application/grpc".parse().expect("value"));
                        if right && body.to_bytes()[..] == b"\0\0\0\0\x0b\x0a\x09shop.Cart"[..] {
                            let status = if failing.load(Ordering::SeqCst) { 2 } else { 1 };
                            let message = Bytes::from(vec![0, 0, 0, 0, 2, 0x08, status]);
                            trailers.insert("grpc-status", "0".parse().expect("value"));
                            frames.push(Ok(Frame::data(message)));
                            frames.push(Ok(Frame::trailers(trailers)));
                        } else {
                            r.headers_mut()
                                .insert("grpc-status", "5".parse().expect("value"));
                            r.headers_mut()
                                .insert("grpc-message", "unknown service".parse().expect("value"));
                        }
                        let (parts, ()) = r.into_parts();
                        Ok::<_, &str>(hyper::Response::from_parts(
                            parts,
                            http_body_util::StreamBody::new(futures_util::stream::iter(frames)),
                        ))
                    }
                });
            let h2 = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new());
            let _ = h2
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        }
    })
    .await
}

/// A `grpc` health check calls the servers' gRPC health service: a server
/// that answers `NOT_SERVING` goes out and comes back when `SERVING`
/// again; a service the server does not know fails with its gRPC status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_health_checks_call_the_health_service() {
    let dir = scratch("grpc-health");
    let failing = Arc::new(AtomicBool::new(false));
    let (checks_a, checks_b) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let a = grpc_health_backend(Arc::new(AtomicBool::new(false)), checks_a.clone()).await;
    let b = grpc_health_backend(failing.clone(), checks_b.clone()).await;
    let (server, log) = serve_manifest(
        &dir,
        SHOP_RULES,
        &format!("listen: 127.0.0.1:0\nupstreams:\n  cart: [h2c://{a}, h2c://{b}]\n  other: h2c://{a}\nhealth_checks:\n  cart: {{ grpc: shop.Cart, interval: 0.1, timeout: 1, fails: 2, passes: 2 }}\n  other: {{ grpc: other.Svc, interval: 0.1, fails: 1 }}\nsites:\n  - name: other\n    when: 'http.host eq \"other.example\"'\n    upstream: other\n    rules: [shop.conf]\n  - name: cart\n    upstream: cart\n    rules: [shop.conf]\n"),
    )
    .await;
    let healthy = |server_url: String, up: &str, want: u8| {
        format!("waf_upstream_server_healthy{{upstream=\"{up}\",server=\"{server_url}\"}} {want}")
    };
    // A service the server does not know: its status and message.
    log_shows(
        &log,
        &format!("upstream other server h2c://{a}/ failed 1 health checks in a row, left out until it passes 2: gRPC status 5: unknown service [grpc \"other.Svc\"]"),
    )
    .await;
    // Both SERVING: in; b turns NOT_SERVING: out after two checks.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(checks_a.load(Ordering::SeqCst) >= 2 && checks_b.load(Ordering::SeqCst) >= 2);
    assert!(
        !log.text().contains("upstream cart server"),
        "{}",
        log.text()
    );
    failing.store(true, Ordering::SeqCst);
    log_shows(
        &log,
        &format!("upstream cart server h2c://{b}/ failed 2 health checks in a row, left out until it passes 2: NOT_SERVING [grpc \"shop.Cart\"]"),
    )
    .await;
    let text = server.metrics().render(Default::default());
    for line in [
        healthy(format!("h2c://{a}/"), "cart", 1),
        healthy(format!("h2c://{b}/"), "cart", 0),
        healthy(format!("h2c://{a}/"), "other", 0),
    ] {
        assert!(text.contains(&line), "no {line} in:\n{text}");
    }
    failing.store(false, Ordering::SeqCst);
    log_shows(
        &log,
        &format!("upstream cart server h2c://{b}/ passed 2 health checks in a row, back in"),
    )
    .await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Waits (at most 10 s) for `line` in the log.
async fn log_shows(log: &Shared, line: &str) {
    for _ in 0..200 {
        if log.text().contains(line) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no {line:?} in the log:\n{}", log.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_checks_take_a_failing_server_out_and_back_in() {
    let dir = scratch("health");
    let failing = Arc::new(AtomicBool::new(false));
    let (hits_a, hits_b) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (checks_a, checks_b) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let host_b = Arc::new(Mutex::new(String::new()));
    let a = checked_backend(
        Arc::new(AtomicBool::new(false)),
        hits_a.clone(),
        checks_a.clone(),
        Arc::new(Mutex::new(String::new())),
    )
    .await;
    let b = checked_backend(
        failing.clone(),
        hits_b.clone(),
        checks_b.clone(),
        host_b.clone(),
    )
    .await;
    let (server, log) = serve_manifest(
        &dir,
        SHOP_RULES,
        &format!("listen: 127.0.0.1:0\nupstreams:\n  app: [http://{a}, http://{b}]\nhealth_checks:\n  app: {{ path: /healthz, host: app.internal, interval: 0.1, timeout: 1, fails: 2, passes: 3 }}\nsites:\n  - name: all\n    upstream: app\n    rules: [shop.conf]\n"),
    )
    .await;
    let addr = server.addr();
    let get_all = |n: usize| async move {
        for i in 0..n {
            let got = status(addr, "shop.example", "/page").await;
            assert_eq!(got, StatusCode::OK, "request {i}");
        }
    };
    get_all(6).await;
    assert!(hits_a.load(Ordering::SeqCst) >= 2 && hits_b.load(Ordering::SeqCst) >= 2);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(checks_b.load(Ordering::SeqCst) >= 1);
    assert_eq!(*host_b.lock().expect("lock"), "app.internal");

    // B breaks: out after two failed checks; every request goes to A.
    failing.store(true, Ordering::SeqCst);
    let out = format!("upstream app server http://{b}/ failed 2 health checks in a row, left out until it passes 3: HTTP 503 [path \"/healthz\"]");
    log_shows(&log, &out).await;
    let before = hits_b.load(Ordering::SeqCst);
    get_all(10).await;
    assert_eq!(
        hits_b.load(Ordering::SeqCst),
        before,
        "no request to the failing server"
    );
    let text = server.metrics().render(Default::default());
    for line in [
        format!("waf_upstream_server_healthy{{upstream=\"app\",server=\"http://{a}/\"}} 1"),
        format!("waf_upstream_server_healthy{{upstream=\"app\",server=\"http://{b}/\"}} 0"),
        "waf_upstream_servers_unhealthy_total 1".to_string(),
    ] {
        assert!(text.contains(&line), "no {line} in:\n{text}");
    }

    // A reload keeps B out, and the replaced upstream's checks stop; the
    // servers' request counters go on from where they were.
    let served_by_a = |text: &str| {
        let line =
            format!("waf_upstream_requests_total{{upstream=\"app\",server=\"http://{a}/\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&line))
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let before_reload = served_by_a(&server.metrics().render(Default::default()));
    assert!(before_reload >= 12, "{before_reload}");
    server.reload().expect("reload");
    get_all(6).await;
    let after_reload = served_by_a(&server.metrics().render(Default::default()));
    assert_eq!(after_reload, before_reload + 6);
    assert_eq!(
        hits_b.load(Ordering::SeqCst),
        before,
        "still out after the reload"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let n0 = checks_a.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let per_s = checks_a.load(Ordering::SeqCst) - n0;
    assert!(
        per_s <= 12,
        "{per_s} checks in 1 s at 0.1 s intervals: the old upstream's still run"
    );

    // B recovers: back after three passed checks.
    failing.store(false, Ordering::SeqCst);
    log_shows(
        &log,
        &format!("upstream app server http://{b}/ passed 3 health checks in a row, back in"),
    )
    .await;
    get_all(6).await;
    assert!(hits_b.load(Ordering::SeqCst) >= before + 2, "back in turn");
    let text = server.metrics().render(Default::default());
    let line = format!("waf_upstream_server_healthy{{upstream=\"app\",server=\"http://{b}/\"}} 1");
    assert!(text.contains(&line), "no {line} in:\n{text}");
    assert_eq!(
        log.text().matches("failed 2 health checks").count(),
        1,
        "{}",
        log.text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_pages_carry_the_request_id_and_reload_with_their_file() {
    let dir = scratch("block-page");
    let up = backend(Arc::new(AtomicUsize::new(0))).await;
    std::fs::create_dir_all(dir.join("pages")).expect("dir");
    let page = dir.join("pages/blocked.html");
    std::fs::write(
        &page,
        "<h1>Blocked ({{status}})</h1><p>Quote {{unique_id}}</p>{{other}}",
    )
    .expect("write page");
    std::fs::write(dir.join("default.json"), "{\"blocked\": \"{{unique_id}}\"}")
        .expect("write page");
    let (server, log) = serve_manifest(
        &dir,
        SHOP_RULES,
        &format!(
            r#"listen: 127.0.0.1:0
watch_interval: 0.2
block_page: default.json
upstreams:
  app: http://{up}
sites:
  - name: shop
    when: 'http.host eq "shop.example"'
    upstream: app
    rules: [shop.conf]
    block_page: pages/blocked.html
    custom:
      - name: no-admin
        when: 'http.request.uri.path eq "/admin"'
        action: block
        status: 451
  - name: other
    upstream: app
    rules: [shop.conf]
"#
        ),
    )
    .await;
    let addr = server.addr();
    let blocked = |host: &'static str, path: &'static str| async move {
        let (status, headers, body) = send_to_host(addr, host, "GET", path, "")
            .await
            .unwrap_or_else(|e| panic!("{host}{path}: {e}"));
        let id = headers
            .get("x-waf-unique-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let ctype = headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        (status, ctype, id, body)
    };
    // A rule's block.
    let (status, ctype, id, body) = blocked("shop.example", "/?q=attack").await;
    assert_eq!(
        (status, ctype.as_str()),
        (StatusCode::FORBIDDEN, "text/html; charset=utf-8")
    );
    assert!(id.len() >= 16, "{id}");
    assert_eq!(
        body,
        format!("<h1>Blocked (403)</h1><p>Quote {id}</p>{{{{other}}}}")
    );
    // A custom rule's block, its id in the error log too.
    let (status, _, id, body) = blocked("shop.example", "/admin").await;
    assert_eq!(status.as_u16(), 451);
    assert_eq!(
        body,
        format!("<h1>Blocked (451)</h1><p>Quote {id}</p>{{{{other}}}}")
    );
    log_shows(&log, &format!("custom rule \"shop/no-admin\" blocked with 451 [when \"http.request.uri.path eq \\\"/admin\\\"\"] [client \"127.0.0.1\"] [uri \"/admin\"] [unique_id \"{id}\"]")).await;
    // The manifest's default page for a site without its own.
    let (status, ctype, id, body) = blocked("blog.example", "/?q=attack").await;
    assert_eq!(
        (status, ctype.as_str()),
        (StatusCode::FORBIDDEN, "application/json")
    );
    assert_eq!(body, format!("{{\"blocked\": \"{id}\"}}"));
    // A reload reads the page again (that a change to it reloads is
    // cli/tests/cli.rs's `serve_reloads_a_manifest_when_its_block_page_changes`).
    std::fs::write(&page, "<p>Still blocked: {{unique_id}}</p>").expect("write page");
    server.reload().expect("reload");
    let (_, _, id, body) = blocked("shop.example", "/?q=attack").await;
    assert_eq!(body, format!("<p>Still blocked: {id}</p>"));
}

fn load_err(dir: &Path, text: &str) -> String {
    let p = dir.join("bad.yaml");
    std::fs::write(&p, text).expect("write");
    match Manifest::load(&p) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(ManifestError::Rules { site, error }) => format!("site {site}: {error}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn broken_manifests_say_where_and_why() {
    let dir = scratch("errors");
    std::fs::write(dir.join("ok.conf"), "SecRuleEngine On\n").expect("write");
    std::fs::write(
        dir.join("broken.conf"),
        "SecRule ARGS \"@nope x\" \"id:1\"\n",
    )
    .expect("write");
    let base = "listen: 127.0.0.1:0\nupstreams:\n  app: http://127.0.0.1:9\n";
    let cases: &[(&str, &str)] = &[
        ("sites:\n  - name: a\n    upstream: app\n    when: 'http.hots eq \"x\"'\n", "sites[0] (a).when: 1:1: unknown field `http.hots`"),
        ("sites:\n  - name: a\n    upstream: nope\n", "no upstream named `nope`; the upstreams are app"),
        ("sites:\n  - name: a\n    upstream: app\n    paranoia: 5\n", "paranoia 5: CRS has levels 1 to 4"),
        ("sites:\n  - name: a\n    upstream: app\n    engine: Maybe\n", "engine `Maybe`"),
        ("sites:\n  - name: a\n    upstream: app\n    colour: red\n", "colour"),
        ("sites:\n  - name: a\n    upstream: app\n  - name: a\n    upstream: app\n", "a second site named `a`"),
        ("sites:\n  - name: a\n    upstream: app\n    exceptions:\n      - when: ssl\n", "an exception removes something"),
        ("sites:\n  - name: a\n    upstream: app\n    exceptions:\n      - when: ssl\n        remove_ids: [\"9-1\"]\n", "`9-1` is not a rule id or a range"),
        ("sites:\n  - name: a\n    upstream: app\n    custom:\n      - name: c\n        when: ssl\n        action: explode\n", "unknown action `explode`"),
        ("sites:\n  - name: a\n    upstream: app\n    custom:\n      - name: c\n        when: ssl\n        action: block\n        status: 200\n", "a block answers 4xx or 5xx"),
        ("sites:\n  - name: a\n    upstream: app\n    custom:\n      - name: c\n        when: ssl\n        action: rate_limit\n", "custom[0]: a rate limit needs `requests`"),
        ("sites:\n  - name: a\n    upstream: app\n    custom:\n      - name: c\n        when: ssl\n        action: rate_limit\n        requests: 0\n", "custom[0].requests: allow at least 1 request per period"),
        ("sites:\n  - name: a\n    upstream: app\n    custom:\n      - name: c\n        when: ssl\n        action: rate_limit\n        requests: 5\n        period: 0\n", "custom[0].period: 0: seconds, 1 to 86400"),
        ("sites:\n  - name: a\n    upstream: app\n    custom:\n      - name: c\n        when: ssl\n        action: rate_limit\n        requests: 5\n        key: http.request.uri.path.length\n", "custom[0].key: `http.request.uri.path.length`"),
        ("sites:\n  - name: a\n    upstream: app\n    custom:\n      - name: c\n        when: ssl\n        action: rate_limit\n        requests: 5\n        status: 200\n", "custom[0].status: status 200: a rate limit answers 4xx or 5xx"),
        ("sites:\n  - name: a\n    upstream: app\n    custom:\n      - name: c\n        when: ssl\n        action: block\n        requests: 5\n", "only `rate_limit` takes `requests`"),
        ("sites:\n  - name: a\n    upstream: app\n    custom:\n      - name: c\n        when: ssl\n        action: log\n        dry_run: true\n", "only `rate_limit` takes `dry_run`"),
        ("sites:\n  - name: a\n    upstream: app\n    rules: [broken.conf]\n", "site a: "),
        ("sites:\n  - name: a\n    upstream: app\n    rules: [missing.conf]\n", "site a: "),
        ("sites: []\n", "name at least one site"),
        ("trusted_proxies: [10.0.0.0/33]\nsites:\n  - name: a\n    upstream: app\n", "trusted_proxies: trusted proxy `10.0.0.0/33`: `/33`: the prefix length is 0 to 32"),
        ("watch_interval: -1\nsites:\n  - name: a\n    upstream: app\n", "watch_interval: seconds between looks at the rule files: 0 (off) or at least 0.1"),
        ("timeouts: { connect: 0 }\nsites:\n  - name: a\n    upstream: app\n", "timeouts.connect: 0 s would end every wait at once: give at least 1 (seconds)"),
        ("upstreams2: {}\nsites:\n  - name: a\n    upstream: app\n", "upstreams2"),
        ("health_checks:\n  nope: { path: /h }\nsites:\n  - name: a\n    upstream: app\n", "health_checks.nope: no upstream named `nope`; the upstreams are app"),
        ("health_checks:\n  app: { path: h }\nsites:\n  - name: a\n    upstream: app\n", "health_checks.app.path: `h`: a path and query, starting with `/`"),
        ("health_checks:\n  app: { grpc: shop.Cart }\nsites:\n  - name: a\n    upstream: app\n", "health_checks.app.grpc: `http://127.0.0.1:9/` speaks HTTP/1.1: a gRPC check needs h2c:// or h2:// servers"),
        ("health_checks:\n  app: { path: /h, grpc: shop.Cart }\nsites:\n  - name: a\n    upstream: app\n", "health_checks.app.grpc: a check is an HTTP `path` or a `grpc` service, not both"),
        ("health_checks:\n  app: { interval: 1 }\nsites:\n  - name: a\n    upstream: app\n", "health_checks.app: give the `path` to GET, or the `grpc` service to check (`\"\"`: the whole server)"),
        ("health_checks:\n  app: { path: /h, fails: 0 }\nsites:\n  - name: a\n    upstream: app\n", "health_checks.app.fails: checks in a row: at least 1"),
        ("health_checks:\n  app: { path: /h, interval: 0.01 }\nsites:\n  - name: a\n    upstream: app\n", "health_checks.app.interval: 0.01: seconds, at least 0.1"),
        ("health_checks:\n  app: { path: /h, status: [200, 700] }\nsites:\n  - name: a\n    upstream: app\n", "health_checks.app.status: statuses are codes 100-599"),
        ("health_checks:\n  app: { path: /h, method: HEAD }\nsites:\n  - name: a\n    upstream: app\n", "method"),
        ("sites:\n  - name: a\n    upstream: app\n    block_page: nowhere.html\n", "sites[0] (a).block_page: "),
        ("value_cache: 0\nsites:\n  - name: a\n    upstream: app\n", "value_cache: 0: give the number of values each worker's cache holds (16384 by default)"),
        ("max_request_head: 4096\nsites:\n  - name: a\n    upstream: app\n", "max_request_head: 4096 is below 8192 bytes, the least a head buffer holds"),
        ("collection_memory: 0\nsites:\n  - name: a\n    upstream: app\n", "collection_memory: 0: give the MiB the persistent collections may hold (64 by default)"),
        ("collection_redis: http://127.0.0.1:6379\nsites:\n  - name: a\n    upstream: app\n", "collection_redis: http://127.0.0.1:6379: "),
        ("collection_redis: redis://u:secret@127.0.0.1:6379\ncollection_file: c.bin\nsites:\n  - name: a\n    upstream: app\n", "collection_redis: excludes collection_file"),
        ("collection_redis_ca: ca.pem\nsites:\n  - name: a\n    upstream: app\n", "collection_redis_ca: is for collection_redis: give both"),
        ("collection_redis: redis://127.0.0.1:6379\ncollection_redis_ca: ca.pem\nsites:\n  - name: a\n    upstream: app\n", "collection_redis_ca: redis://127.0.0.1:6379: a CA file is for TLS: give rediss://"),
        ("collection_redis: rediss://127.0.0.1:6379\ncollection_redis_ca: nowhere.pem\nsites:\n  - name: a\n    upstream: app\n", "collection_redis_ca: CA file "),
        ("request_id_header: Host\nsites:\n  - name: a\n    upstream: app\n", "request_id_header: `Host` carries something else"),
        ("sites:\n  - name: a\n    upstream: app\n    custom:\n      - name: c\n        when: ssl\n        action: redirect\n", "a redirect needs `location`"),
        ("sites:\n  - name: a\n    upstream: app\n    custom:\n      - name: c\n        when: ssl\n        action: redirect\n        status: 200\n        location: https://x/\n", "status 200: a redirect answers 301, 302, 303, 307 or 308"),
        ("sites:\n  - name: a\n    upstream: app\n    custom:\n      - name: c\n        when: ssl\n        action: redirect\n        location: \"https://{hots}/\"\n", "sites[0] (a).custom[0].location: `{hots}` in `https://{hots}/`: the placeholders are {host} and {uri}"),
        ("sites:\n  - name: a\n    upstream: app\n    custom:\n      - name: c\n        when: ssl\n        action: block\n        location: https://x/\n", "only `redirect` takes a location"),
        ("block_page: nowhere.html\nsites:\n  - name: a\n    upstream: app\n", ": block_page: "),
        ("balance:\n  app: random\nsites:\n  - name: a\n    upstream: app\n", "balance.app: `random`: an upstream balances by `round_robin` (the default), `ip_hash`, `least_conn` or `hash KEY`"),
        ("balance:\n  app: hash tcp.dstport\nsites:\n  - name: a\n    upstream: app\n", "balance.app: `hash tcp.dstport`: the key (`tcp.dstport`): `tcp.dstport` is an integer: a key is a bytes field or `ip.src`"),
        ("balance:\n  nope: ip_hash\nsites:\n  - name: a\n    upstream: app\n", "balance.nope: no upstream named `nope`; the upstreams are app"),
    ];
    for (sites, want) in cases {
        let e = load_err(&dir, &format!("{base}{sites}"));
        assert!(e.contains(want), "want {want:?} in:\n{e}");
    }
    let e = load_err(
        &dir,
        "listen: 127.0.0.1:0\nupstreams:\n  app: [\"http://127.0.0.1:9 weight=0\"]\nsites:\n  - name: a\n    upstream: app\n",
    );
    assert!(
        e.contains("upstreams.app: `weight=0`: a weight is a whole number from 1 to 100"),
        "{e}"
    );
    let e = load_err(&dir, "listen: nowhere\n");
    assert!(e.contains("bad.yaml"), "{e}");
    let rest = "upstreams:\n  app: http://127.0.0.1:9\nsites:\n  - name: a\n    upstream: app\n";
    for (listeners, want) in [
        ("", "listen: no listener: give `listen: ADDRESS`"),
        (
            "listen: 127.0.0.1:0\nlisteners:\n  - listen: 127.0.0.1:0\n",
            "listeners: give `listen` (and `tls`, `proxy_protocol`) for one listener or `listeners` for several, not both",
        ),
        (
            "tls: { cert: c.pem, key: k.pem }\nlisteners:\n  - listen: 127.0.0.1:0\n",
            "not both",
        ),
        (
            "proxy_protocol: true\nlisteners:\n  - listen: 127.0.0.1:0\n",
            "not both",
        ),
        (
            "listen: 127.0.0.1:0\nproxy_protocol: yes please\n",
            "proxy_protocol",
        ),
        (
            "listeners:\n  - listen: 127.0.0.1:8080\n  - listen: 127.0.0.1:8080\n",
            "listeners[1]: 127.0.0.1:8080 is listed twice",
        ),
        ("listeners:\n  - listen: 127.0.0.1:0\n    port: 3\n", "port"),
    ] {
        let e = load_err(&dir, &format!("{listeners}{rest}"));
        assert!(e.contains(want), "want {want:?} in:\n{e}");
    }
    // On a good manifest, rules: [ok.conf] compiles, and the size of the
    // value cache is taken.
    let p = dir.join("good.yaml");
    std::fs::write(
        &p,
        format!("{base}value_cache: 50000\ncollection_memory: 16\ncollection_redis: redis://127.0.0.1:6390/2\nsites:\n  - name: a\n    upstream: app\n    rules: [ok.conf]\n"),
    )
    .expect("write");
    let m = Manifest::load(&p).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(m.config.value_cache, 50_000);
    assert_eq!(m.config.collection_memory, 16 << 20);
    assert_eq!(
        m.config.collection_redis.as_deref(),
        Some("redis://127.0.0.1:6390/2")
    );
}

#[tokio::test]
async fn plain_and_tls_listeners_side_by_side_and_ssl_tells_them_apart() {
    use tokio_rustls::rustls;
    let dir = scratch("tls");
    let Some((cert, _key)) = self_signed(&dir) else {
        skip_without_openssl("plain_and_tls_listeners_side_by_side_and_ssl_tells_them_apart");
        return;
    };
    let up = backend(Arc::new(AtomicUsize::new(0))).await;
    let manifest = dir.join("waf.yaml");
    std::fs::write(
        &manifest,
        format!(
            "listeners:\n  - listen: 127.0.0.1:0\n  - listen: 127.0.0.1:0\n    tls: {{ cert: cert.pem, key: key.pem }}\nupstreams:\n  app: http://{up}\nsites:\n  - name: secure\n    when: ssl\n    upstream: app\n  - name: plain\n    upstream: app\n    custom:\n      - name: no-plain\n        when: not ssl and http.request.uri.path ne \"/\"\n        action: block\n        status: 421\n"
        ),
    )
    .expect("write");
    let m = Manifest::load(&manifest).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(m.listeners.len(), 2);
    let mut listeners = Vec::new();
    for l in &m.listeners {
        let tls = l
            .tls
            .as_ref()
            .map(|(c, k)| waf_serve::tls::load(c, k).expect("certificate"));
        listeners.push(waf_serve::Listener {
            addr: l.listen,
            tls,
            proxy_protocol: l.proxy_protocol,
        });
    }
    let source = SitesSource::manifest(&manifest, &m);
    let server = Server::start_sites(m.config, m.sites, source, listeners, quiet_logs())
        .await
        .expect("start");
    // The plain listener takes plain HTTP, and its requests are not `ssl`.
    let plain = server.addrs()[0];
    assert_eq!(status(plain, "localhost", "/").await, StatusCode::OK);
    assert_eq!(
        status(plain, "localhost", "/hello").await,
        StatusCode::MISDIRECTED_REQUEST
    );
    let tls_addr = server.addrs()[1];
    for (alpn, want) in [(b"http/1.1".to_vec(), "HTTP/1.1"), (b"h2".to_vec(), "h2")] {
        let mut cfg = client_trusting(&cert);
        cfg.alpn_protocols = vec![alpn];
        let connector = tokio_rustls::TlsConnector::from(Arc::new(cfg));
        let tcp = tokio::net::TcpStream::connect(tls_addr)
            .await
            .expect("connect");
        let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
        let tls = connector.connect(name, tcp).await.expect("handshake");
        let io = hyper_util::rt::TokioIo::new(tls);
        let req = hyper::Request::builder()
            .uri(format!("https://localhost:{}/hello", tls_addr.port()))
            .header("host", "localhost")
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .expect("request");
        let status = if want == "h2" {
            let (mut send, conn) =
                hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io)
                    .await
                    .expect("h2 handshake");
            tokio::spawn(conn);
            send.send_request(req).await.expect("response").status()
        } else {
            let (mut send, conn) = hyper::client::conn::http1::handshake(io)
                .await
                .expect("h1 handshake");
            tokio::spawn(conn);
            send.send_request(req).await.expect("response").status()
        };
        assert_eq!(status, StatusCode::OK, "{want}");
    }
}

/// A renewed certificate is served to new handshakes once reloaded; a pair
/// that does not load (here a key that is not the certificate's) is refused
/// and the running one stays.
#[tokio::test]
async fn the_listener_certificate_is_reloaded_in_place() {
    use tokio_rustls::rustls;
    let (old_dir, new_dir, live) = (
        scratch("cert-old"),
        scratch("cert-new"),
        scratch("cert-live"),
    );
    let (Some((old_cert, old_key)), Some((new_cert, new_key))) =
        (self_signed(&old_dir), self_signed(&new_dir))
    else {
        skip_without_openssl("the_listener_certificate_is_reloaded_in_place");
        return;
    };
    let (cert, key) = (live.join("cert.pem"), live.join("key.pem"));
    std::fs::copy(&old_cert, &cert).expect("copy");
    std::fs::copy(&old_key, &key).expect("copy");
    let tls = waf_serve::tls::load(&cert, &key).expect("certificate");
    let up = backend(Arc::new(AtomicUsize::new(0))).await;
    let rules = Arc::new(
        waf_serve::Rules::load(waf_serve::RuleSource::Text {
            name: "t.conf".into(),
            text: "SecRuleEngine On\n".into(),
        })
        .expect("rules"),
    );
    let upstream: hyper::Uri = format!("http://{up}").parse().expect("uri");
    let config = waf_serve::Config::new("127.0.0.1:0".parse().expect("addr"), upstream.clone());
    let sites = waf_serve::Sites::single(rules.clone(), &upstream).expect("sites");
    let listener = waf_serve::Listener {
        addr: config.listen,
        tls: Some(tls.clone()),
        proxy_protocol: false,
    };
    let server = Server::start_sites(
        config,
        sites,
        SitesSource::Single(rules),
        vec![listener],
        quiet_logs(),
    )
    .await
    .expect("start");
    // Whether a handshake trusting only `trusted` succeeds.
    let addr = server.addr();
    let handshake = |trusted: PathBuf| async move {
        let cfg = client_trusting(&trusted);
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
        tokio_rustls::TlsConnector::from(Arc::new(cfg))
            .connect(name, tcp)
            .await
            .is_ok()
    };
    assert!(handshake(old_cert.clone()).await);
    assert!(!handshake(new_cert.clone()).await);
    // Renewed on disk: still the old one until reloaded.
    std::fs::copy(&new_cert, &cert).expect("copy");
    std::fs::copy(&new_key, &key).expect("copy");
    assert!(handshake(old_cert.clone()).await);
    tls.reload().expect("reload");
    assert!(
        handshake(new_cert.clone()).await,
        "new handshakes get the new one"
    );
    assert!(!handshake(old_cert.clone()).await);
    // A key that is not the certificate's: refused, the running pair stays.
    std::fs::copy(&old_key, &key).expect("copy");
    let e = tls.reload().expect_err("a mismatched pair");
    assert!(e.contains("do not go together"), "{e}");
    assert!(handshake(new_cert.clone()).await);
    for d in [old_dir, new_dir, live] {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// A TLS client (ring, the safe default versions, no client certificate)
/// that trusts the certificates of a PEM file.
fn client_trusting(pem: &Path) -> tokio_rustls::rustls::ClientConfig {
    use tokio_rustls::rustls;
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(trusting(pem))
        .with_no_client_auth()
}

/// A root store trusting the certificates of a PEM file.
fn trusting(pem: &Path) -> tokio_rustls::rustls::RootCertStore {
    use tokio_rustls::rustls::pki_types::{pem::PemObject, CertificateDer};
    let mut roots = tokio_rustls::rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(pem).expect("cert") {
        roots.add(c.expect("pem")).expect("root");
    }
    roots
}

/// A server of an upstream that accepts no connection (its accept queue is
/// full, so the kernel drops the SYNs, as for a host that is down) is left
/// out after the connect timeout, and the request goes to the next server
/// well within the upstream timeout.
#[tokio::test]
async fn a_server_that_does_not_connect_is_left_out_after_the_connect_timeout() {
    let dir = scratch("connect");
    // A listener with a backlog of one, filled and never accepted.
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind("127.0.0.1:0".parse().expect("addr"))
        .expect("bind");
    let stuck = socket.listen(1).expect("listen");
    let stuck_addr = stuck.local_addr().expect("addr");
    let mut fillers = Vec::new();
    for _ in 0..4 {
        if let Ok(Ok(c)) = tokio::time::timeout(
            Duration::from_millis(200),
            tokio::net::TcpStream::connect(stuck_addr),
        )
        .await
        {
            fillers.push(c);
        }
    }
    let hits = Arc::new(AtomicUsize::new(0));
    let live = backend(hits.clone()).await;
    let (manifest, m) = write_manifest(
        &dir,
        SHOP_RULES,
        &format!("listen: 127.0.0.1:0\ntimeouts: {{ connect: 1, upstream: 10 }}\nupstreams:\n  app: [http://{stuck_addr}, http://{live}]\nsites:\n  - name: all\n    upstream: app\n    rules: [shop.conf]\n"),
    );
    assert_eq!(m.config.connect_timeout, Duration::from_secs(1));
    let (server, log) = serve_plain(&manifest, m).await;
    let start = std::time::Instant::now();
    for i in 0..4 {
        assert_eq!(
            status(server.addr(), "shop.example", "/").await,
            StatusCode::OK,
            "request {i}: {}",
            log.text()
        );
    }
    // One wait of the connect timeout, not of the upstream timeout.
    let took = start.elapsed();
    assert!(took < Duration::from_secs(4), "{took:?}");
    assert_eq!(hits.load(Ordering::SeqCst), 4);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let text = log.text();
    assert!(
        text.contains(&format!("upstream server http://{stuck_addr}/ unreachable, left out for 10 s: client error (Connect): connecting took over 1 s")),
        "{text}"
    );
    drop((stuck, fillers));
}

/// Behind a TCP load balancer: each connection's PROXY header (version 1
/// or 2) names the client, and the rules (`REMOTE_ADDR`), the filter
/// expressions (`ip.src`, `tcp.dstport`) and the access log see that
/// client; a connection without a header is closed unanswered and logged,
/// and a balancer's TCP check (connect, close) is neither.
#[tokio::test]
async fn a_proxy_protocol_listener_takes_the_client_from_the_header() {
    use ppp::v2;
    use tokio::io::AsyncWriteExt;
    let dir = scratch("proxy-protocol");
    let up = backend(Arc::new(AtomicUsize::new(0))).await;
    let rules = "SecRuleEngine On\nSecRule REMOTE_ADDR \"@ipMatch 203.0.113.7\" \"id:200,phase:1,deny,status:403,log,msg:'banned client'\"\n";
    let yaml = format!(
        "listeners:\n  - listen: 127.0.0.1:0\n    proxy_protocol: true\nupstreams:\n  app: http://{up}\nsites:\n  - name: shop\n    upstream: app\n    rules: [shop.conf]\n    custom:\n      - name: v6-clients\n        when: 'ip.src in {{2001:db8::/32}} and tcp.dstport eq 8443'\n        action: block\n        status: 451\n"
    );
    let (manifest, m) = write_manifest(&dir, rules, &yaml);
    assert!(m.listeners[0].proxy_protocol);
    let (log, access) = (Shared::default(), Shared::default());
    let logs = Logs {
        error: ErrorLog::to_writer(Box::new(log.clone())),
        audit: None,
        access: Some(ErrorLog::to_writer(Box::new(access.clone()))),
    };
    let listeners = vec![waf_serve::Listener {
        addr: m.listeners[0].listen,
        tls: None,
        proxy_protocol: true,
    }];
    let source = SitesSource::manifest(&manifest, &m);
    let server = Server::start_sites(m.config, m.sites, source, listeners, logs)
        .await
        .expect("start");
    let addr = server.addrs()[0];
    let request = b"GET /shop HTTP/1.1\r\nHost: shop\r\nConnection: close\r\n\r\n";
    let ask = |header: Vec<u8>| async move {
        let mut bytes = header;
        bytes.extend_from_slice(request);
        common::raw_answer(addr, &bytes, Duration::from_secs(5)).await
    };
    let status_of = |answer: &str| answer.get(9..12).unwrap_or("").to_string();

    let (answer, _) = ask(b"PROXY TCP4 203.0.113.7 192.0.2.1 56324 443\r\n".to_vec()).await;
    assert_eq!(status_of(&answer), "403", "{answer}");
    let (answer, _) = ask(b"PROXY TCP4 198.51.100.9 192.0.2.1 56325 443\r\n".to_vec()).await;
    assert_eq!(status_of(&answer), "200", "{answer}");
    let v6 = |port: u16| {
        v2::Builder::with_addresses(
            v2::Version::Two | v2::Command::Proxy,
            v2::Protocol::Stream,
            (
                "[2001:db8::7]:40000".parse::<SocketAddr>().expect("addr"),
                SocketAddr::from(([0x2001, 0xdb8, 0, 0, 0, 0, 0, 1], port)),
            ),
        )
        .build()
        .expect("header")
    };
    let (answer, _) = ask(v6(8443)).await;
    assert_eq!(status_of(&answer), "451", "{answer}");
    let (answer, _) = ask(v6(443)).await;
    assert_eq!(status_of(&answer), "200", "{answer}");
    // The balancer's own connection: the socket's addresses stand.
    let local = v2::Builder::with_addresses(
        v2::Version::Two | v2::Command::Local,
        v2::Protocol::Unspecified,
        v2::Addresses::Unspecified,
    )
    .build()
    .expect("header");
    let (answer, _) = ask(local).await;
    assert_eq!(status_of(&answer), "200", "{answer}");

    // No header: closed without a byte, and logged.
    let (answer, closed) = ask(Vec::new()).await;
    assert_eq!((answer.as_str(), closed), ("", true));
    log_shows(&log, "PROXY protocol header refused").await;
    // A TCP check: connect and close, nothing logged.
    let before = log.text();
    let mut check = tokio::net::TcpStream::connect(addr).await.expect("connect");
    check.shutdown().await.expect("close");
    drop(check);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(log.text(), before);

    let lines = access.text();
    for client in ["203.0.113.7", "198.51.100.9", "2001:db8::7", "127.0.0.1"] {
        assert!(
            lines.contains(&format!("\"client_ip\":\"{client}\"")),
            "{client} in {lines}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
