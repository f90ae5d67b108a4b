//! The bytes go-ftw puts on the wire for a stage, and their split into
//! request line, header lines and the rest.
//!
//! [`build`] follows go-ftw v2 (the version CRS's CI runs: `runner/run.go`
//! `getRequestFromTest`, `ftwhttp/request.go` `BuildRequest`,
//! `ftwhttp/header.go`, `test/data.go`). `../shared/peers/corpus/ftw_to_jsonl.py`
//! describes the same steps for an older go-ftw that looked header names up
//! case-sensitively and sorted the added headers with the others; since
//! go-ftw PR #331 (2024) names are compared case-insensitively and added
//! headers come last, which matters for tests like CRS 931100-3 (a
//! `Content-type: application/xml` header with a body):
//! - defaults: method `GET`, uri `/`, version `HTTP/1.1`, `autocomplete_headers: true`;
//! - `encoded_request` (base64; CR/LF inside are ignored, as Go's decoder
//!   does) or the v1 `raw_request` are sent as they are, nothing else is used;
//! - `data` is first evaluated as a Go template (see [`super::template`]);
//!   `encoded_data` (base64) is the body when `data` is absent;
//! - headers: `ordered_headers` (a list of `{name, value}`) as given, else
//!   the `headers` map sorted by name;
//! - with autocomplete and a non-empty body: `Content-Type:
//!   application/x-www-form-urlencoded` is added when no `Content-Type`
//!   header exists (any case, even an empty one); if a `Content-Type` is that
//!   value (any case) and the body is not already escaped (Go's
//!   `url.QueryUnescape` leaves it unchanged), every key and value between
//!   `&` and `=` is `url.QueryEscape`d;
//! - a `Content-Type` containing `multipart/form-data;` (any case) turns every
//!   LF of the body into CRLF (also without autocomplete; an existing CRLF
//!   becomes CR CR LF, as in go-ftw);
//! - with autocomplete: `Connection: close` when no `Connection` header
//!   exists, and `Content-Length: <body length>` when none exists and the
//!   body is non-empty or the method matches go-ftw's regex
//!   `^POST|PUT|PATCH|DELETE$` (sic);
//! - the request line is `METHOD SP URI SP VERSION CRLF`, then the headers
//!   in order (added ones last, in the order above), an empty line, the body.
//!
//! Where go-ftw would quietly send something else (a template error sends
//! no body), [`build`] returns an error: the stage fails with the reason, or
//! passes when it expects an error. So does an undecodable `encoded_request`
//! (an error in go-ftw too).

use super::model::Input;
use super::template;
use base64::Engine as _;

const FORM: &str = "application/x-www-form-urlencoded";

/// The raw request bytes of a stage, or why they cannot be built.
pub fn build(input: &Input) -> Result<Vec<u8>, String> {
    let data_given = input.data.as_ref().is_some_and(|d| !d.0.is_empty());
    let encoded = input.encoded_request.as_deref().filter(|s| !s.is_empty());
    let raw = input.raw_request.as_deref().filter(|s| !s.is_empty());
    if (data_given && (encoded.is_some() || raw.is_some())) || (encoded.is_some() && raw.is_some())
    {
        return Err("bad test input: choose between data, encoded_request, or raw_request".into());
    }
    if let Some(e) = encoded {
        return decode_base64(e).map_err(|e| format!("encoded_request: {e}"));
    }
    if let Some(r) = raw {
        return Ok(r.as_bytes().to_vec());
    }

    let method = input.method.as_deref().unwrap_or("GET");
    let uri = input.uri.as_deref().unwrap_or("/");
    let version = input.version.as_deref().unwrap_or("HTTP/1.1");
    let auto = input.autocomplete_headers.unwrap_or(true);
    let mut headers: Vec<(String, String)> = match input.ordered_headers.as_deref() {
        Some(list) if !list.is_empty() => list
            .iter()
            .map(|h| (h.name.clone(), h.value.clone().unwrap_or_default()))
            .collect(),
        // A BTreeMap iterates sorted by name, as go-ftw's NewHeaderFromMap.
        _ => input
            .headers
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone().unwrap_or_default()))
            .collect(),
    };
    let mut data: Vec<u8> = match (&input.data, &input.encoded_data) {
        (Some(d), _) => template::render(&d.0)?.into_bytes(),
        (None, Some(e)) => decode_base64(e).map_err(|e| format!("encoded_data: {e}"))?,
        (None, None) => Vec::new(),
    };

    if !data.is_empty() && auto {
        if !has_any(&headers, "Content-Type") {
            headers.push(("Content-Type".into(), FORM.into()));
        }
        data = encode_data_parameters(&headers, data);
    }
    let multipart = values(&headers, "Content-Type")
        .any(|v| v.to_ascii_lowercase().contains("multipart/form-data;"));
    if multipart {
        data = lf_to_crlf(&data);
    }
    if auto {
        if !has_any(&headers, "Connection") {
            headers.push(("Connection".into(), "close".into()));
        }
        if !has_any(&headers, "Content-Length") && (!data.is_empty() || method_with_body(method)) {
            headers.push(("Content-Length".into(), data.len().to_string()));
        }
    }

    let mut out = Vec::with_capacity(64 + data.len());
    out.extend_from_slice(format!("{method} {uri} {version}\r\n").as_bytes());
    for (k, v) in &headers {
        out.extend_from_slice(k.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&data);
    Ok(out)
}

/// go-ftw's `Header.HasAny`: a header of that name (any case) exists.
fn has_any(h: &[(String, String)], name: &str) -> bool {
    h.iter().any(|(k, _)| k.eq_ignore_ascii_case(name))
}

fn values<'a>(h: &'a [(String, String)], name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    h.iter()
        .filter(move |(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// go-ftw's `^POST|PUT|PATCH|DELETE$`: starts with POST, contains PUT or
/// PATCH, or ends with DELETE.
fn method_with_body(m: &str) -> bool {
    m.starts_with("POST") || m.contains("PUT") || m.contains("PATCH") || m.ends_with("DELETE")
}

fn lf_to_crlf(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + data.len() / 16);
    for &b in data {
        if b == b'\n' {
            out.push(b'\r');
        }
        out.push(b);
    }
    out
}

/// go-ftw's `encodeDataParameters`.
fn encode_data_parameters(h: &[(String, String)], data: Vec<u8>) -> Vec<u8> {
    if !values(h, "Content-Type").any(|v| v.eq_ignore_ascii_case(FORM)) {
        return data;
    }
    match go_query_unescape(&data) {
        Some(u) if u == data => {}
        // Already escaped, or not unescapable: sent as is.
        _ => return data,
    }
    let mut out = Vec::with_capacity(data.len() * 2);
    for (i, token) in data.split(|&b| b == b'&').enumerate() {
        if i > 0 {
            out.push(b'&');
        }
        match token.iter().position(|&b| b == b'=') {
            None => go_query_escape(token, &mut out),
            Some(eq) => {
                go_query_escape(&token[..eq], &mut out);
                out.push(b'=');
                go_query_escape(&token[eq + 1..], &mut out);
            }
        }
    }
    out
}

/// Go's `url.QueryEscape`.
fn go_query_escape(s: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &c in s {
        if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.' | b'~') {
            out.push(c);
        } else if c == b' ' {
            out.push(b'+');
        } else {
            out.extend_from_slice(&[b'%', HEX[(c >> 4) as usize], HEX[(c & 15) as usize]]);
        }
    }
}

/// Go's `url.QueryUnescape` (`None` on a malformed `%` escape).
fn go_query_unescape(s: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'%' => {
                let h = s.get(i + 1..i + 3)?;
                let v = std::str::from_utf8(h)
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())?;
                if !h.iter().all(u8::is_ascii_hexdigit) {
                    return None;
                }
                out.push(v);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Some(out)
}

/// Go's `base64.StdEncoding.DecodeString`, which skips CR and LF.
fn decode_base64(s: &str) -> Result<Vec<u8>, String> {
    let clean: String = s.chars().filter(|&c| c != '\r' && c != '\n').collect();
    base64::engine::general_purpose::STANDARD
        .decode(clean.as_bytes())
        .map_err(|e| format!("invalid base64: {e}"))
}

/// A request split as an HTTP/1.x server reads it: lines end at LF (a CR
/// before it is dropped), the head ends at the first empty line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRequest {
    pub request_line: Vec<u8>,
    /// Header lines as received (continuation lines not yet joined).
    pub header_lines: Vec<Vec<u8>>,
    /// Everything after the empty line (the body and whatever follows it).
    pub rest: Vec<u8>,
    /// False when no empty line ends the head (the server keeps waiting).
    pub complete: bool,
}

pub fn split(bytes: &[u8]) -> RawRequest {
    let mut lines: Vec<Vec<u8>> = Vec::new();
    let mut pos = 0;
    let mut complete = false;
    while pos < bytes.len() {
        let (line, next) = match bytes[pos..].iter().position(|&b| b == b'\n') {
            Some(n) => (&bytes[pos..pos + n], pos + n + 1),
            None => (&bytes[pos..], bytes.len()),
        };
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        pos = next;
        if line.is_empty() && !lines.is_empty() {
            complete = true;
            break;
        }
        // RFC 7230 3.5: empty lines before the request line are ignored.
        if !line.is_empty() {
            lines.push(line.to_vec());
        }
    }
    let mut lines = lines.into_iter();
    RawRequest {
        request_line: lines.next().unwrap_or_default(),
        header_lines: lines.collect(),
        rest: if complete {
            bytes[pos..].to_vec()
        } else {
            Vec::new()
        },
        complete,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ftw::model::{Data, HeaderTuple, Input};

    fn input(method: &str, headers: &[(&str, &str)], data: Option<&str>) -> Input {
        Input {
            method: Some(method.into()),
            uri: Some("/p".into()),
            headers: Some(
                headers
                    .iter()
                    .map(|(k, v)| (k.to_string(), Some(v.to_string())))
                    .collect(),
            ),
            data: data.map(|d| Data(d.into())),
            ..Input::default()
        }
    }

    fn text(b: &[u8]) -> String {
        String::from_utf8_lossy(b).into_owned()
    }

    #[test]
    fn defaults_and_sorted_headers() {
        let b = build(&Input {
            headers: Some(
                [
                    ("User-Agent".to_string(), Some("x".to_string())),
                    ("Host".to_string(), None),
                ]
                .into(),
            ),
            ..Input::default()
        })
        .unwrap();
        assert_eq!(
            text(&b),
            "GET / HTTP/1.1\r\nHost: \r\nUser-Agent: x\r\nConnection: close\r\n\r\n"
        );
        // ordered_headers: as given, repeats allowed.
        let b = build(&Input {
            ordered_headers: Some(vec![
                HeaderTuple {
                    name: "X".into(),
                    value: Some("2".into()),
                },
                HeaderTuple {
                    name: "A".into(),
                    value: Some("1".into()),
                },
                HeaderTuple {
                    name: "X".into(),
                    value: None,
                },
            ]),
            headers: Some([("Ignored".to_string(), None)].into()),
            ..Input::default()
        })
        .unwrap();
        assert_eq!(
            text(&b),
            "GET / HTTP/1.1\r\nX: 2\r\nA: 1\r\nX: \r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn autocomplete_adds_content_type_and_length() {
        let b = build(&input("POST", &[("Host", "h")], Some("a=1 2&b"))).unwrap();
        assert_eq!(
            text(&b),
            "POST /p HTTP/1.1\r\nHost: h\r\nContent-Type: application/x-www-form-urlencoded\r\n\
             Connection: close\r\nContent-Length: 7\r\n\r\na=1+2&b"
        );
        // A method "with a body" gets Content-Length: 0 without data.
        let b = build(&input("PUT", &[], None)).unwrap();
        assert!(text(&b).contains("Content-Length: 0\r\n"));
        let b = build(&input("GET", &[], None)).unwrap();
        assert!(!text(&b).contains("Content-Length"));
        // Existing headers win, whatever the case of their name, even empty.
        let b = build(&input(
            "POST",
            &[("connection", "keep-alive"), ("content-length", "")],
            Some("x"),
        ))
        .unwrap();
        assert_eq!(
            text(&b),
            "POST /p HTTP/1.1\r\nconnection: keep-alive\r\ncontent-length: \r\n\
             Content-Type: application/x-www-form-urlencoded\r\n\r\nx"
        );
        // CRS 931100-3: `Content-type: application/xml` is a Content-Type.
        let b = build(&input(
            "POST",
            &[("Content-type", "application/xml")],
            Some("<a>%3A</a>"),
        ))
        .unwrap();
        assert_eq!(
            text(&b),
            "POST /p HTTP/1.1\r\nContent-type: application/xml\r\nConnection: close\r\n\
             Content-Length: 10\r\n\r\n<a>%3A</a>"
        );
    }

    #[test]
    fn without_autocomplete_nothing_is_added_or_encoded() {
        let mut i = input(
            "POST",
            &[("Content-Type", "application/x-www-form-urlencoded")],
            Some("a=<b c>"),
        );
        i.autocomplete_headers = Some(false);
        let b = build(&i).unwrap();
        assert_eq!(
            text(&b),
            "POST /p HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\n\r\na=<b c>"
        );
    }

    #[test]
    fn urlencoding_of_data() {
        let ct = [("Content-Type", "application/x-www-form-urlencoded")];
        let body = |d: &str| {
            let b = build(&input("POST", &ct, Some(d))).unwrap();
            let t = text(&b);
            t[t.find("\r\n\r\n").unwrap() + 4..].to_string()
        };
        assert_eq!(
            body("q=<script>alert(1)</script>&x=a b"),
            "q=%3Cscript%3Ealert%281%29%3C%2Fscript%3E&x=a+b"
        );
        assert_eq!(body("a=b=c&&d"), "a=b%3Dc&&d");
        assert_eq!(body("k=caf\u{e9}"), "k=caf%C3%A9");
        // Already escaped (unescaping changes it): as is.
        assert_eq!(body("q=%3Cscript%3E"), "q=%3Cscript%3E");
        assert_eq!(body("q=a+b"), "q=a+b");
        // Not unescapable: as is.
        assert_eq!(body("q=100%"), "q=100%");
        // Only for exactly this content type.
        let b = build(&input(
            "POST",
            &[("Content-Type", "text/plain")],
            Some("a=<"),
        ))
        .unwrap();
        assert!(text(&b).ends_with("\r\n\r\na=<"));
    }

    #[test]
    fn multipart_lf_becomes_crlf() {
        let ct = [("Content-Type", "multipart/form-data; boundary=b")];
        let b = build(&input(
            "POST",
            &ct,
            Some("--b\nContent-Disposition: form-data; name=\"a\"\n\n1\n--b--\n"),
        ))
        .unwrap();
        let t = text(&b);
        let body = &t[t.find("\r\n\r\n").unwrap() + 4..];
        assert_eq!(
            body,
            "--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--b--\r\n"
        );
        assert!(t.contains(&format!("Content-Length: {}\r\n", body.len())));
        // go-ftw also doubles the CR of an existing CRLF.
        let b = build(&input("POST", &ct, Some("x\r\ny"))).unwrap();
        assert!(text(&b).ends_with("x\r\r\ny"));
        // Any case.
        let ct = [("content-type", "Multipart/Form-Data; boundary=b")];
        let b = build(&input("POST", &ct, Some("x\ny"))).unwrap();
        assert!(text(&b).ends_with("x\r\ny"));
        // Without the `;` it is not multipart for go-ftw.
        let b = build(&input(
            "POST",
            &[("Content-Type", "multipart/form-data")],
            Some("x\ny"),
        ))
        .unwrap();
        assert!(text(&b).ends_with("\r\n\r\nx\ny"));
    }

    #[test]
    fn data_templates_are_evaluated() {
        let ct = [("Content-Type", "text/plain")];
        let b = build(&input("POST", &ct, Some("{{ \"1\" | repeat 5 }}"))).unwrap();
        assert!(text(&b).ends_with("\r\n\r\n11111"));
        assert!(text(&b).contains("Content-Length: 5\r\n"));
        assert!(build(&input("POST", &ct, Some("{{ nosuchfunc }}"))).is_err());
    }

    #[test]
    fn encoded_request_is_sent_as_is() {
        let raw = "POST / HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nHi \r\n0\r\n\r\n";
        let mut b64 = base64::engine::general_purpose::STANDARD.encode(raw);
        b64.insert(20, '\n');
        let i = Input {
            encoded_request: Some(b64),
            uri: Some("/ignored".into()),
            headers: Some([("X".to_string(), Some("ignored".to_string()))].into()),
            ..Input::default()
        };
        let bytes = build(&i).unwrap();
        assert_eq!(bytes, raw.as_bytes());
        let r = split(&bytes);
        assert_eq!(r.request_line, b"POST / HTTP/1.1");
        assert_eq!(
            r.header_lines,
            vec![
                b"Host: localhost".to_vec(),
                b"Transfer-Encoding: chunked".to_vec()
            ]
        );
        assert_eq!(r.rest, b"3\r\nHi \r\n0\r\n\r\n");
        assert!(r.complete);
    }

    #[test]
    fn bad_encoded_request_and_mixed_inputs_fail() {
        let i = Input {
            encoded_request: Some("not base64!".into()),
            ..Input::default()
        };
        assert!(build(&i).unwrap_err().contains("encoded_request"));
        let i = Input {
            encoded_request: Some("R0VU".into()),
            data: Some(Data("x".into())),
            ..Input::default()
        };
        assert!(build(&i).unwrap_err().contains("choose between"));
    }

    #[test]
    fn split_handles_bare_lf_cr_and_incomplete_heads() {
        let r = split(b"\r\nGET / HTTP/1.0\nA: 1\r\nB: x\ry\n\nbody\n");
        assert_eq!(r.request_line, b"GET / HTTP/1.0");
        assert_eq!(r.header_lines, vec![b"A: 1".to_vec(), b"B: x\ry".to_vec()]);
        assert_eq!(r.rest, b"body\n");
        let r = split(b"GET / HTTP/1.1\r\nHost: a\r\n");
        assert!(!r.complete);
    }
}
