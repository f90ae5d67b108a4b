//! The hot path allocates nothing: one transaction, warmed up on benign
//! requests and reset between them, evaluates CRS PL1 on the same kinds of
//! requests again without a single heap allocation (dhat as the global
//! allocator counts every block).
//!
//! Only one test of this binary may run the profiler (a dhat restriction),
//! so all requests are in one test.

mod common;

use waf_engine::Transaction;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

struct Request {
    method: &'static [u8],
    uri: &'static [u8],
    headers: &'static [(&'static [u8], &'static [u8])],
    body: &'static [u8],
}

const BROWSER_HEADERS: [(&[u8], &[u8]); 11] = [
    (b"Host", b"www.example.com"),
    (
        b"User-Agent",
        b"Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
    ),
    (
        b"Accept",
        b"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    ),
    (b"Accept-Language", b"en-US,en;q=0.5"),
    (b"Accept-Encoding", b"gzip, deflate, br"),
    (b"Referer", b"https://www.example.com/catalog/index.html"),
    (b"Connection", b"keep-alive"),
    (b"Upgrade-Insecure-Requests", b"1"),
    (b"Sec-Fetch-Dest", b"document"),
    (b"Sec-Fetch-Mode", b"navigate"),
    (b"Cache-Control", b"max-age=0"),
];

const GET: Request = Request {
    method: b"GET",
    uri: b"/catalog/search?q=blue+shoes&page=2&sort=price",
    headers: &[
        BROWSER_HEADERS[0],
        BROWSER_HEADERS[1],
        BROWSER_HEADERS[2],
        BROWSER_HEADERS[3],
        BROWSER_HEADERS[4],
        BROWSER_HEADERS[5],
        BROWSER_HEADERS[6],
        BROWSER_HEADERS[7],
        BROWSER_HEADERS[8],
        BROWSER_HEADERS[9],
        BROWSER_HEADERS[10],
        (b"Sec-Fetch-Site", b"same-origin"),
        (b"Cookie", b"session=8f3a2b1c9d7e6f5a; lang=en; theme=dark"),
    ],
    body: b"",
};

const FORM: Request = Request {
    method: b"POST",
    uri: b"/account/profile",
    headers: &[
        BROWSER_HEADERS[0],
        BROWSER_HEADERS[1],
        BROWSER_HEADERS[2],
        BROWSER_HEADERS[3],
        BROWSER_HEADERS[4],
        BROWSER_HEADERS[5],
        (b"Content-Type", b"application/x-www-form-urlencoded"),
        (b"Content-Length", b"64"),
        (b"Cookie", b"session=8f3a2b1c9d7e6f5a"),
    ],
    body: b"name=Jane+Doe&email=jane%40example.com&age=34&city=San+Francisco",
};

const JSON: Request = Request {
    method: b"POST",
    uri: b"/api/v1/orders",
    headers: &[
        BROWSER_HEADERS[0],
        BROWSER_HEADERS[1],
        (b"Accept", b"application/json"),
        BROWSER_HEADERS[3],
        BROWSER_HEADERS[4],
        (b"Content-Type", b"application/json"),
        (b"Content-Length", b"140"),
    ],
    body: br#"{"order":{"customer":"Jane Doe","items":[{"sku":"A-1001","qty":2,"price":19.99},{"sku":"B-2002","qty":1}],"gift":false,"note":"ring twice"}}"#,
};

/// One request through phases 1 and 2; reads the outputs.
fn run(tx: &mut Transaction<'_>, r: &Request) -> (bool, usize) {
    tx.reset();
    tx.process_connection("192.168.1.20", 51234, "10.0.0.5", 443);
    tx.process_uri(r.uri, r.method, b"HTTP/1.1");
    for (k, v) in r.headers {
        tx.add_request_header(k, v);
    }
    tx.process_request_headers();
    if tx.intervention().is_none() {
        tx.append_request_body(r.body);
        tx.process_request_body();
    }
    let blocked = tx.intervention().is_some();
    let matched = tx.matched_rules().len();
    std::hint::black_box((blocked, matched))
}

fn warmed_up_transaction_allocates_nothing() {
    let Some(rs) = common::crs_pl1("warmed_up_transaction_allocates_nothing") else {
        return;
    };
    // The dense DFAs are built on a background thread after load: finish
    // them here, so that no thread allocates while dhat counts.
    rs.finish_building();
    let requests = [&GET, &FORM, &JSON];
    for r in requests {
        assert_eq!(
            r.body.len().to_string().as_bytes(),
            r.headers
                .iter()
                .find(|(k, _)| k == b"Content-Length")
                .map_or(&b"0"[..], |h| h.1),
            "Content-Length of {}",
            String::from_utf8_lossy(r.uri)
        );
    }
    let mut tx = rs.transaction();
    // The requests are benign: CRS must let them through.
    for r in requests {
        for _ in 0..3 {
            let (blocked, _) = run(&mut tx, r);
            assert!(
                !blocked,
                "{} blocked: {:?}",
                String::from_utf8_lossy(r.uri),
                tx.matched_rules()
                    .map(|m| (m.id, &m.msg))
                    .collect::<Vec<_>>()
            );
        }
    }
    // Once more, interleaved, so every buffer has seen every request kind.
    for r in requests {
        run(&mut tx, r);
    }
    // And a transaction per request, as a proxy runs them: each takes the
    // buffers a dropped one left in the ruleset's pool.
    for _ in 0..3 {
        for r in requests {
            let mut fresh = rs.transaction();
            run(&mut fresh, r);
        }
    }

    // On failure dhat writes the allocation stacks (untrimmed) here; list them
    // with a script reading its `pps` (sites) and `ftbl` (frames) fields.
    let report = std::env::temp_dir().join("waf-alloc-dhat-heap.json");
    eprintln!("dhat report: {}", report.display());
    let _profiler = dhat::Profiler::builder()
        .testing()
        .trim_backtraces(None)
        .file_name(&report)
        .build();
    for r in requests {
        run(&mut tx, r);
    }
    let stats = dhat::HeapStats::get();
    dhat::assert_eq!(stats.total_blocks, 0);

    // Nor does a transaction per request: its buffers go back to the pool
    // in the box they came in.
    for r in requests {
        let mut fresh = rs.transaction();
        run(&mut fresh, r);
    }
    let fresh_blocks = dhat::HeapStats::get().total_blocks - stats.total_blocks;
    dhat::assert_eq!(
        fresh_blocks,
        0,
        "blocks for {} fresh transactions",
        requests.len()
    );
}

/// Run without the libtest harness (`harness = false` in Cargo.toml): the
/// harness's main thread allocates (channels, timeouts) while the test runs,
/// and dhat counts every thread, which made this test flaky.
fn main() {
    warmed_up_transaction_allocates_nothing();
    println!("warmed_up_transaction_allocates_nothing: ok (and a pooled transaction per request, none either)");
}
