//! `waf serve`'s filter language (`waf_serve::filter`: sites, exceptions,
//! custom rules and `hash` keys of a manifest) on arbitrary text.
//!
//! Input: bytes, split at the first `\0`: the expression (lossy UTF-8), then
//! up to five `\n`-separated request fields (host, method, target, a
//! `user-agent` and an `x-tag` header) for one request view beside three
//! fixed ones (IPv4, IPv6 and IPv4-mapped clients, TLS or not).
//!
//! Checks besides "no panic, hang or OOM": an error names a line and a
//! column inside the text (1-based, column at most one past the line's
//! end); an expression that parses keeps its source, and on every view
//! agrees with the algebra of its own negation and repetition:
//! `not (E)` is the opposite, `(E) and (E)` and `(E) or (E)` are `E`,
//! `(E) xor (E)` is false; a wrapped expression fails only for nesting.
//! The same text is parsed as a `hash` key, whose value is read on every
//! view.
#![no_main]

use hyper::header::{HeaderMap, HeaderValue};
use libfuzzer_sys::fuzz_target;
use std::net::IpAddr;
use waf_serve::filter::{Filter, FilterError, Key, RequestView};

/// An error's position lies in `text`: line 1..=lines, column 1..=the
/// line's length in characters plus one.
fn in_text(e: &FilterError, text: &str) {
    let lines: Vec<&str> = text.split('\n').collect();
    assert!(
        e.line >= 1 && e.line <= lines.len(),
        "line {} outside the text ({} lines): {e}",
        e.line,
        lines.len()
    );
    let width = lines[e.line - 1].chars().count();
    assert!(
        e.col >= 1 && e.col <= width + 1,
        "column {} outside line {} ({width} characters): {e}",
        e.col,
        e.line
    );
    assert!(!e.message.is_empty(), "an error without a message");
}

/// The fixed views' headers: two values of one header, a user agent.
fn fixed_headers() -> HeaderMap {
    let mut h = HeaderMap::new();
    h.append("user-agent", HeaderValue::from_static("curl/8.0"));
    h.append("x-tag", HeaderValue::from_static("one"));
    h.append("x-tag", HeaderValue::from_static("two"));
    h.append("cookie", HeaderValue::from_static("a=1; b=2"));
    h
}

fn view<'a>(
    headers: &'a HeaderMap,
    host: &'a [u8],
    method: &'a [u8],
    uri: &'a [u8],
    src: IpAddr,
    dst_port: u16,
    tls: bool,
) -> RequestView<'a> {
    RequestView {
        host,
        method,
        uri,
        version: b"HTTP/1.1",
        headers,
        src,
        dst_port,
        tls,
    }
}

fuzz_target!(|data: &[u8]| {
    let (expr, request) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let expr = String::from_utf8_lossy(expr);
    let mut fields = request.splitn(5, |&b| b == b'\n');
    let host = fields.next().unwrap_or(b"example.com");
    let method = fields.next().unwrap_or(b"GET");
    let uri = fields.next().unwrap_or(b"/a/b?id=5");
    let mut own = HeaderMap::new();
    for name in ["user-agent", "x-tag"] {
        if let Some(v) = fields.next().and_then(|v| HeaderValue::from_bytes(v).ok()) {
            own.append(name, v);
        }
    }
    let fixed = fixed_headers();
    let views = [
        view(
            &fixed,
            b"example.com",
            b"GET",
            b"/a/b?id=5",
            [192, 0, 2, 7].into(),
            443,
            true,
        ),
        view(
            &fixed,
            b"",
            b"POST",
            b"",
            "2001:db8::1".parse().unwrap(),
            80,
            false,
        ),
        view(
            &fixed,
            b"x:8080",
            b"PUT",
            b"?",
            "::ffff:10.9.9.9".parse().unwrap(),
            0,
            false,
        ),
        view(&own, host, method, uri, [10, 0, 0, 1].into(), 65535, true),
    ];

    match Filter::parse(&expr) {
        Err(e) => in_text(&e, &expr),
        Ok(f) => {
            assert_eq!(f.source(), &*expr);
            let wrapped = |shape: &str| Filter::parse(&shape.replace("E", &format!("({expr})")));
            // The shapes' only capital `E` is the placeholder.
            let checks: [(&str, fn(bool) -> bool); 4] = [
                ("not E", |m| !m),
                ("E and E", |m| m),
                ("E or E", |m| m),
                ("E xor E", |_| false),
            ];
            for (shape, want) in checks {
                match wrapped(shape) {
                    Ok(w) => {
                        for v in &views {
                            let m = f.matches(v);
                            assert_eq!(w.matches(v), want(m), "{shape} with E = {expr:?}");
                        }
                    }
                    // One more parenthesis can pass the nesting limit, and
                    // two copies the length limit.
                    Err(e) => assert!(
                        e.message.contains("nested") || e.message.contains("at most"),
                        "{shape} with E = {expr:?} refused: {e}"
                    ),
                }
            }
        }
    }
    match Key::parse(&expr) {
        Err(e) => in_text(&e, &expr),
        Ok(k) => {
            assert_eq!(k.source(), expr.trim());
            for v in &views {
                k.with_value(v, |b| std::hint::black_box(b.len()));
            }
        }
    }
});
