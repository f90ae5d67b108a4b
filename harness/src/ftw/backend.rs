//! The backend of CRS's test setup, emulated: albedo
//! (`ghcr.io/coreruleset/albedo`, a small Go `net/http` server).
//!
//! - `POST /reflect` (and `/reflect/...`): the body is a JSON specification
//!   `{status, headers, body, encodedBody, logMessage}` of the response to
//!   send; this is how CRS tests response rules. Invalid JSON, a field of the
//!   wrong type or a status outside 100-599 gives a 400. A status of 0 (or
//!   none) is 200; `body` wins over `encodedBody` (base64). Go's
//!   `DetectContentType` sets a `Content-Type` when the specification gives
//!   none and the body is not empty (emulated for HTML, XML and text).
//! - Anything else: 200 with an empty body. Go would send no
//!   `Content-Type`; like Coraza's CRS harness we send `text/plain`, so that
//!   a WAF inspecting response bodies by MIME type has one.

use super::frontend::HttpRequest;
use base64::Engine as _;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
    /// Which behaviour produced it (for failure reasons).
    pub source: String,
}

fn path_of(uri: &[u8]) -> &[u8] {
    let mut p = uri;
    if let Some(i) = p.windows(3).position(|w| w == b"://") {
        let after = &p[i + 3..];
        p = after
            .iter()
            .position(|&c| c == b'/')
            .map(|j| &after[j..])
            .unwrap_or(b"/");
    }
    match p.iter().position(|&c| c == b'?') {
        Some(q) => &p[..q],
        None => p,
    }
}

pub fn is_reflect(req: &HttpRequest) -> bool {
    let p = path_of(&req.uri);
    req.method == b"POST" && (p == b"/reflect" || p.starts_with(b"/reflect/"))
}

pub fn respond(req: &HttpRequest) -> Response {
    if is_reflect(req) {
        return reflect(&req.body);
    }
    Response {
        status: 200,
        headers: vec![
            ("Content-Type".into(), b"text/plain".to_vec()),
            ("Content-Length".into(), b"0".to_vec()),
        ],
        body: Vec::new(),
        source: "albedo: default 200 response".into(),
    }
}

fn error(msg: &str) -> Response {
    Response {
        status: 400,
        headers: vec![
            ("Content-Type".into(), b"text/plain; charset=utf-8".to_vec()),
            ("Content-Length".into(), msg.len().to_string().into_bytes()),
        ],
        body: msg.as_bytes().to_vec(),
        source: format!("albedo /reflect: {msg}"),
    }
}

/// The value of `key` in a JSON object, matched as Go's `encoding/json` does
/// (exact name first, then case-insensitively).
fn field<'a>(
    o: &'a serde_json::Map<String, serde_json::Value>,
    key: &str,
) -> Option<&'a serde_json::Value> {
    o.get(key)
        .or_else(|| {
            o.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v)
        })
        .filter(|v| !v.is_null())
}

fn string_field(o: &serde_json::Map<String, serde_json::Value>, key: &str) -> Result<String, ()> {
    match field(o, key) {
        None => Ok(String::new()),
        Some(serde_json::Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(()),
    }
}

fn reflect(body: &[u8]) -> Response {
    const INVALID: &str = "Invalid JSON in request body";
    let Ok(spec) = serde_json::from_slice::<serde_json::Value>(body) else {
        return error(INVALID);
    };
    let empty = serde_json::Map::new();
    let o = match &spec {
        serde_json::Value::Object(o) => o,
        serde_json::Value::Null => &empty,
        _ => return error(INVALID),
    };
    let status = match field(o, "status") {
        None => 0,
        Some(v) => match v.as_i64() {
            Some(n) => n,
            None => return error(INVALID),
        },
    };
    let mut headers: Vec<(String, Vec<u8>)> = Vec::new();
    match field(o, "headers") {
        None => {}
        Some(serde_json::Value::Object(h)) => {
            let mut names: Vec<&String> = h.keys().collect();
            names.sort();
            for k in names {
                match &h[k] {
                    serde_json::Value::String(v) => {
                        // Go's server drops invalid header fields.
                        let name_ok = !k.is_empty()
                            && k.bytes().all(|c| {
                                c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
                            });
                        if name_ok && !v.bytes().any(|c| c == b'\r' || c == b'\n') {
                            headers.push((canonical(k), v.as_bytes().to_vec()));
                        }
                    }
                    serde_json::Value::Null => headers.push((canonical(k), Vec::new())),
                    _ => return error(INVALID),
                }
            }
        }
        Some(_) => return error(INVALID),
    }
    let (Ok(text), Ok(encoded), Ok(_log)) = (
        string_field(o, "body"),
        string_field(o, "encodedBody"),
        string_field(o, "logMessage"),
    ) else {
        return error(INVALID);
    };
    if status != 0 && !(100..600).contains(&status) {
        return error(&format!("Invalid status code: {status}"));
    }
    let status = if status == 0 { 200 } else { status as u16 };
    let body: Vec<u8> = if !text.is_empty() {
        text.into_bytes()
    } else if encoded.is_empty() {
        Vec::new()
    } else {
        let clean: String = encoded
            .chars()
            .filter(|&c| c != '\r' && c != '\n')
            .collect();
        match base64::engine::general_purpose::STANDARD.decode(clean) {
            Ok(b) => b,
            // The status line is already written: only the body says so.
            Err(_) => b"invalid base64 encoding of response body".to_vec(),
        }
    };
    if !body.is_empty() && !headers.iter().any(|(k, _)| k == "Content-Type") {
        headers.push(("Content-Type".into(), sniff(&body).as_bytes().to_vec()));
    }
    if !headers.iter().any(|(k, _)| k == "Content-Length") {
        headers.push(("Content-Length".into(), body.len().to_string().into_bytes()));
    }
    Response {
        status,
        headers,
        body,
        source: format!("albedo /reflect: status {status}"),
    }
}

/// Go's `CanonicalMIMEHeaderKey`.
fn canonical(k: &str) -> String {
    let mut up = true;
    k.chars()
        .map(|c| {
            let out = if up {
                c.to_ascii_uppercase()
            } else {
                c.to_ascii_lowercase()
            };
            up = c == '-';
            out
        })
        .collect()
}

/// A subset of Go's `http.DetectContentType`.
fn sniff(body: &[u8]) -> &'static str {
    let start = body
        .iter()
        .position(|c| !matches!(c, b'\t' | b'\n' | 0x0c | b'\r' | b' '))
        .unwrap_or(body.len());
    let b = &body[start..];
    const HTML: [&[u8]; 17] = [
        b"<!DOCTYPE HTML",
        b"<HTML",
        b"<HEAD",
        b"<SCRIPT",
        b"<IFRAME",
        b"<H1",
        b"<DIV",
        b"<FONT",
        b"<TABLE",
        b"<A",
        b"<STYLE",
        b"<TITLE",
        b"<B",
        b"<BODY",
        b"<BR",
        b"<P",
        b"<!--",
    ];
    for sig in HTML {
        if b.len() > sig.len()
            && b[..sig.len()].eq_ignore_ascii_case(sig)
            && matches!(b[sig.len()], b' ' | b'>')
        {
            return "text/html; charset=utf-8";
        }
    }
    if b.starts_with(b"<?xml") {
        return "text/xml; charset=utf-8";
    }
    if b.starts_with(b"%PDF-") {
        return "application/pdf";
    }
    let binary = body.iter().take(512).any(|&c| {
        c <= 0x08 || c == 0x0b || (0x0e..=0x1a).contains(&c) || (0x1c..=0x1f).contains(&c)
    });
    if binary {
        "application/octet-stream"
    } else {
        "text/plain; charset=utf-8"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(uri: &str, body: &str) -> HttpRequest {
        HttpRequest {
            method: b"POST".to_vec(),
            uri: uri.as_bytes().to_vec(),
            version: b"HTTP/1.1".to_vec(),
            headers: Vec::new(),
            body: body.as_bytes().to_vec(),
        }
    }

    fn header<'a>(r: &'a Response, k: &str) -> Option<&'a [u8]> {
        r.headers
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_slice())
    }

    #[test]
    fn default_response() {
        let r = respond(&post("/post", "{}"));
        assert_eq!((r.status, r.body.len()), (200, 0));
        assert_eq!(header(&r, "Content-Type"), Some(&b"text/plain"[..]));
    }

    #[test]
    fn reflect_spec() {
        let r = respond(&post(
            "/reflect?x=1",
            r#"{"status": 503, "headers": {"x-a": "1"}, "body": "<html><body>hi"}"#,
        ));
        assert_eq!(r.status, 503);
        assert_eq!(header(&r, "X-A"), Some(&b"1"[..]));
        assert_eq!(
            header(&r, "Content-Type"),
            Some(&b"text/html; charset=utf-8"[..])
        );
        assert_eq!(r.body, b"<html><body>hi");
        let r = respond(&post("/reflect", r#"{"Body": "SQL error"}"#));
        assert_eq!((r.status, r.body.as_slice()), (200, &b"SQL error"[..]));
        assert_eq!(
            header(&r, "Content-Type"),
            Some(&b"text/plain; charset=utf-8"[..])
        );
        let r = respond(&post("/reflect", r#"{"encodedBody": "aGk="}"#));
        assert_eq!(r.body, b"hi");
        // Non-spec JSON: an empty 200.
        let r = respond(&post("/reflect", r#"{"foo": 1}"#));
        assert_eq!((r.status, r.body.len()), (200, 0));
    }

    #[test]
    fn reflect_errors() {
        assert_eq!(respond(&post("/reflect", "not json")).status, 400);
        assert_eq!(respond(&post("/reflect", "[1]")).status, 400);
        assert_eq!(
            respond(&post("/reflect", r#"{"status": "200"}"#)).status,
            400
        );
        assert_eq!(respond(&post("/reflect", r#"{"status": 99}"#)).status, 400);
        // GET /reflect is the default handler.
        let mut g = post("/reflect", "not json");
        g.method = b"GET".to_vec();
        assert_eq!(respond(&g).status, 200);
    }
}
