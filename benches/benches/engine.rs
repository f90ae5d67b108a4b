//! Per-request cost of the engine on CRS v4 at paranoia level 1, through the
//! public embedding API only (`Ruleset`, `Transaction`; see
//! `docs/embedding.md`).
//!
//! Every iteration is one whole transaction up to the end of phase 2: create
//! it, feed connection, request line and headers, run phase 1, feed the body,
//! run phase 2. The configuration is the peers' (`corpus/crs-config.sh`, i.e.
//! the `configTemplate` of `../shared/peers/coraza/main.go`), built at start;
//! when the script or the peers are missing, an equivalent text is built here.
//!
//! Groups:
//! - `request/*`: typical single requests (benign GET/POSTs, an attack);
//! - `body/*`: large bodies (64 KB and 1 MB);
//! - `body/scaling/*`: urlencoded bodies from 1 KB to 1 MB with
//!   `Throughput::Bytes`, so that bytes/s stays flat when the cost is linear
//!   in the body size.
//!
//! Before measuring, the benign requests are checked not to be blocked and
//! the attack to be blocked, so a broken setup cannot be measured silently.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use waf_engine::{Ruleset, Transaction};

const PARANOIA_LEVEL: u8 = 1;

/// Settings appended to the peers' configuration, for the body benchmarks
/// only to be meaningful: with the peers' values, `SecArgumentsLimit` (1000
/// by default) makes the engine skip urlencoded arguments past the 1000th and
/// cancel JSON parsing, and `SecRequestBodyNoFilesLimit 131072` lets v3 reject
/// non-file bodies over 128 KB, so the large bodies would not be inspected.
/// Small requests are unaffected.
const BENCH_OVERRIDES: &str = "\
SecArgumentsLimit 1000000
SecRequestBodyNoFilesLimit 13107200
";

// ------------------------------------------------------------------ setup

fn load_ruleset() -> Option<Ruleset> {
    let crs = waf_test_support::crs_dir("bench engine")?;
    let mut text = waf_test_support::crs_config(&crs, PARANOIA_LEVEL);
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(BENCH_OVERRIDES);
    let name = crs.join("bench-crs.conf");
    match Ruleset::from_str(&name.to_string_lossy(), &text) {
        Ok(rs) => {
            // Steady state: the dense DFAs built, as after a server's first second.
            rs.finish_building();
            Some(rs)
        }
        Err(e) => panic!("CRS does not compile:\n{e}"),
    }
}

// ------------------------------------------------------------------ requests

/// One HTTP request, as a proxy would hand it to the engine.
struct Request {
    method: &'static str,
    uri: String,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
}

impl Request {
    fn get(uri: &str) -> Request {
        Request {
            method: "GET",
            uri: uri.to_string(),
            headers: browser_headers(),
            body: Vec::new(),
        }
    }

    fn post(uri: &str, content_type: &str, body: Vec<u8>) -> Request {
        let mut headers = browser_headers();
        headers.retain(|(n, _)| !n.starts_with("Upgrade-") && !n.starts_with("Sec-Fetch-User"));
        headers.push(("Origin", "https://shop.example.com".into()));
        headers.push(("Content-Type", content_type.into()));
        headers.push(("Content-Length", body.len().to_string()));
        Request {
            method: "POST",
            uri: uri.to_string(),
            headers,
            body,
        }
    }
}

/// Typical headers of a desktop browser navigation (14 of them).
fn browser_headers() -> Vec<(&'static str, String)> {
    [
        ("Host", "shop.example.com"),
        (
            "User-Agent",
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) \
             Chrome/124.0.0.0 Safari/537.36",
        ),
        (
            "Accept",
            "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,\
             image/apng,*/*;q=0.8",
        ),
        ("Accept-Language", "en-US,en;q=0.9,fr;q=0.8"),
        ("Accept-Encoding", "gzip, deflate, br, zstd"),
        ("Referer", "https://shop.example.com/catalog/shoes?page=2"),
        (
            "Cookie",
            "session_id=8f14e45fceea167a5a36dedd4bea2543; _ga=GA1.2.1183746512.1716900000; \
             _gid=GA1.2.907123456.1716900000; theme=dark; lang=en-US; cart_items=3",
        ),
        ("Connection", "keep-alive"),
        ("Upgrade-Insecure-Requests", "1"),
        ("Sec-Fetch-Dest", "document"),
        ("Sec-Fetch-Mode", "navigate"),
        ("Sec-Fetch-Site", "same-origin"),
        ("Sec-Fetch-User", "?1"),
        ("Cache-Control", "max-age=0"),
    ]
    .into_iter()
    .map(|(n, v)| (n, v.to_string()))
    .collect()
}

/// Phases 1 and 2 of one transaction, as an embedding proxy runs them.
fn run<'r>(rules: &'r Ruleset, req: &Request) -> Transaction<'r> {
    let mut tx = rules.transaction();
    tx.process_connection("203.0.113.7", 51234, "10.0.0.2", 443);
    tx.process_uri(req.uri.as_bytes(), req.method.as_bytes(), b"HTTP/1.1");
    for (n, v) in &req.headers {
        tx.add_request_header(n.as_bytes(), v.as_bytes());
    }
    tx.process_request_headers();
    if tx.intervention().is_none() {
        tx.append_request_body(&req.body);
        tx.process_request_body();
    }
    tx
}

/// Whether the transaction was blocked; the transaction is dropped inside
/// the measured iteration.
fn blocked(rules: &Ruleset, req: &Request) -> bool {
    run(rules, req).intervention().is_some()
}

const WORDS: &[&str] = &[
    "blue",
    "running",
    "shoes",
    "size",
    "comfortable",
    "leather",
    "summer",
    "jacket",
    "wool",
    "cotton",
    "shirt",
    "black",
    "white",
    "green",
    "classic",
    "sneakers",
    "outdoor",
    "hiking",
    "boots",
    "waterproof",
    "lightweight",
    "casual",
    "office",
    "travel",
    "backpack",
    "kitchen",
    "garden",
    "lamp",
    "chair",
    "table",
    "wooden",
    "modern",
    "vintage",
    "gift",
    "birthday",
    "delivery",
    "tomorrow",
    "thanks",
    "great",
    "quality",
    "recommend",
    "friend",
    "family",
    "weekend",
    "morning",
    "coffee",
    "mug",
    "notebook",
    "pencil",
    "paper",
];

/// A deterministic stream of words (no `rand` dependency).
struct Words(u64);

impl Words {
    fn next(&mut self) -> &'static str {
        // xorshift64
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        WORDS[(self.0 % WORDS.len() as u64) as usize]
    }

    fn phrase(&mut self, n: usize, sep: &str) -> String {
        (0..n).map(|_| self.next()).collect::<Vec<_>>().join(sep)
    }
}

/// A benign urlencoded form body of exactly `size` bytes: fields of a few
/// words (spaces as `+`), numbers, percent-encoded e-mail addresses.
fn urlencoded_body(size: usize) -> Vec<u8> {
    let mut w = Words(0x9e37_79b9_7f4a_7c15);
    let mut out = String::with_capacity(size + 128);
    let mut i = 0usize;
    while out.len() < size {
        if !out.is_empty() {
            out.push('&');
        }
        let pair = match i % 4 {
            0 => format!("item{i}_name={}", w.phrase(3, "+")),
            1 => format!("item{i}_qty={}", i % 17 + 1),
            2 => format!("item{i}_contact={}.{}%40example.com", w.next(), w.next()),
            _ => format!("item{i}_note={}", w.phrase(6, "+")),
        };
        out.push_str(&pair);
        i += 1;
    }
    let mut body = out.into_bytes();
    trim_to(&mut body, size, b'&');
    body
}

/// A benign JSON body of about `size` bytes: an array of order records.
fn json_body(size: usize) -> Vec<u8> {
    let mut w = Words(0x2545_f491_4f6c_dd1d);
    let mut out = String::with_capacity(size + 512);
    out.push_str("{\"orders\":[");
    let mut i = 0usize;
    while out.len() < size.saturating_sub(64) {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!(
            "{{\"id\":{},\"customer\":{{\"name\":\"{} {}\",\"email\":\"{}.{}@example.com\",\
             \"city\":\"{}ville\",\"zip\":\"{:05}\"}},\"items\":[{{\"sku\":\"SKU-{:06}\",\
             \"title\":\"{}\",\"qty\":{},\"price\":{}.{:02}}}],\"gift\":{},\"note\":\"{}\"}}",
            100_000 + i,
            w.next(),
            w.next(),
            w.next(),
            w.next(),
            w.next(),
            (i * 7919) % 100_000,
            (i * 104_729) % 1_000_000,
            w.phrase(3, " "),
            i % 5 + 1,
            i % 200 + 5,
            i % 100,
            i.is_multiple_of(3),
            w.phrase(5, " "),
        ));
        i += 1;
    }
    out.push_str("]}");
    out.into_bytes()
}

/// Cuts `body` to at most `size` bytes at a separator, then pads the last
/// value with letters so the length is exactly `size`.
fn trim_to(body: &mut Vec<u8>, size: usize, sep: u8) {
    if body.len() > size {
        let cut = body[..size].iter().rposition(|&b| b == sep).unwrap_or(size);
        body.truncate(cut);
    }
    body.resize(size, b'x');
}

fn benign_get() -> Request {
    Request::get(
        "/catalog/search?q=blue+running+shoes&category=footwear&size=42&sort=price_asc&page=2\
         &utm_source=newsletter&utm_medium=email",
    )
}

fn benign_post_json() -> Request {
    let body = br#"{"cart_id":"c-7741","items":[{"sku":"SKU-004217","qty":2,"size":"42","color":"blue"},{"sku":"SKU-118802","qty":1,"size":"M","color":"black"}],"coupon":"SUMMER24","shipping":{"method":"standard","name":"Alice Martin","street":"12 Garden Lane","city":"Springfield","zip":"62704","country":"US"},"newsletter":false}"#;
    let mut r = Request::post("/api/v1/cart/checkout", "application/json", body.to_vec());
    r.headers.retain(|(n, _)| *n != "Accept");
    r.headers.push(("Accept", "application/json".into()));
    r
}

fn benign_post_urlencoded() -> Request {
    let body = b"csrf_token=5f2b7c9e1a3d4e6f8a0b2c4d6e8f0a1b&email=alice.martin%40example.com\
&password=correct-horse-battery-staple&remember_me=on&return_to=%2Faccount%2Forders";
    Request::post(
        "/account/login",
        "application/x-www-form-urlencoded",
        body.to_vec(),
    )
}

fn attack() -> Request {
    Request::get(
        "/products?id=1%27%20UNION%20SELECT%20username%2Cpassword%20FROM%20users--%20\
         &q=%3Cscript%3Ealert(1)%3C%2Fscript%3E",
    )
}

fn urlencoded_post(size: usize) -> Request {
    Request::post(
        "/orders/bulk",
        "application/x-www-form-urlencoded",
        urlencoded_body(size),
    )
}

fn json_post(size: usize) -> Request {
    let mut r = Request::post("/api/v1/orders/import", "application/json", json_body(size));
    r.headers.retain(|(n, _)| *n != "Accept");
    r.headers.push(("Accept", "application/json".into()));
    r
}

// ------------------------------------------------------------------ benches

/// Panics unless each request gets the expected verdict.
fn check(rules: &Ruleset, cases: &[(&str, &Request, bool)]) {
    for (name, req, want_blocked) in cases {
        let tx = run(rules, req);
        let got = tx.intervention().is_some();
        let logged: Vec<u64> = tx.matched_rules().filter(|m| m.log).map(|m| m.id).collect();
        if !want_blocked && !logged.is_empty() {
            eprintln!("note: {name} is not blocked but matches rules {logged:?}");
        }
        if got != *want_blocked {
            let ids: Vec<u64> = tx.matched_rules().map(|m| m.id).collect();
            panic!(
                "{name}: expected {}, got {} (intervention {:?}, matched rules {ids:?})",
                if *want_blocked {
                    "blocked"
                } else {
                    "not blocked"
                },
                if got { "blocked" } else { "not blocked" },
                tx.intervention()
            );
        }
    }
}

const KB: usize = 1024;
const SCALING: &[(&str, usize)] = &[
    ("1k", KB),
    ("4k", 4 * KB),
    ("16k", 16 * KB),
    ("64k", 64 * KB),
    ("256k", 256 * KB),
    ("1m", 1024 * KB),
];

fn bench(c: &mut Criterion) {
    let Some(rules) = load_ruleset() else { return };

    let get = benign_get();
    let post_json = benign_post_json();
    let post_form = benign_post_urlencoded();
    let attack = attack();
    let form_64k = urlencoded_post(64 * KB);
    let form_1m = urlencoded_post(1024 * KB);
    let json_1m = json_post(1024 * KB);
    let scaling: Vec<(&str, Request)> = SCALING
        .iter()
        .map(|&(name, size)| (name, urlencoded_post(size)))
        .collect();

    let mut cases = vec![
        ("request/benign_get", &get, false),
        ("request/benign_post_json", &post_json, false),
        ("request/benign_post_urlencoded", &post_form, false),
        ("request/attack", &attack, true),
        ("body/urlencoded_64k", &form_64k, false),
        ("body/urlencoded_1m", &form_1m, false),
        ("body/json_1m", &json_1m, false),
    ];
    cases.extend(scaling.iter().map(|(_, r)| ("body/scaling", r, false)));
    check(&rules, &cases);

    let mut g = c.benchmark_group("request");
    for (name, req) in [
        ("benign_get", &get),
        ("benign_post_json", &post_json),
        ("benign_post_urlencoded", &post_form),
        ("attack", &attack),
    ] {
        g.bench_function(name, |b| b.iter(|| blocked(&rules, black_box(req))));
    }
    g.finish();

    let mut g = c.benchmark_group("body");
    for (name, req, samples) in [
        ("urlencoded_64k", &form_64k, 100),
        ("urlencoded_1m", &form_1m, 10),
        ("json_1m", &json_1m, 10),
    ] {
        g.sample_size(samples);
        g.throughput(Throughput::Bytes(req.body.len() as u64));
        g.bench_function(name, |b| b.iter(|| blocked(&rules, black_box(req))));
    }
    g.finish();

    let mut g = c.benchmark_group("body/scaling");
    for (name, req) in &scaling {
        g.sample_size(if req.body.len() >= 256 * KB { 10 } else { 100 });
        g.throughput(Throughput::Bytes(req.body.len() as u64));
        g.bench_with_input(BenchmarkId::from_parameter(name), req, |b, req| {
            b.iter(|| blocked(&rules, black_box(req)))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
