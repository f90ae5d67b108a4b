//! The HTTP server in front of the WAF, emulated: what it does with the
//! bytes go-ftw sends before (and instead of) handing them to the WAF.
//!
//! CRS writes its regression tests against Apache httpd 2.4 with
//! ModSecurity (the platform files list the nginx and Coraza differences),
//! so the reference here is Apache's defaults (`HttpProtocolOptions Strict
//! LenientMethods Allow0.9`). Only cheap, well-defined behaviours are
//! emulated; each is one rule of thumb:
//!
//! Rejected with 400 before the WAF sees anything (Apache's
//! `ap_read_request`; ModSecurity's phase 1 runs later, so nothing is logged):
//! - **request-line**: a control character in the request line, or not
//!   exactly `METHOD SP TARGET SP VERSION` (extra or leading whitespace,
//!   whitespace inside the target);
//! - **method**: the method is not an RFC 9110 token;
//! - **version**: the version is not `HTTP/<digit>.<digit>`, or is an
//!   explicit `HTTP/0.x`;
//! - **simple-request**: an HTTP/0.9 request (no version) whose method is not GET;
//! - **connect**: a CONNECT target that is not `host:port`;
//! - **header-syntax**: a header line without `:`, a name that is not a
//!   token, a control character other than HTAB in a value (e.g. a bare CR),
//!   a continuation line before any header;
//! - **host**: an HTTP/1.1 request without a host (no `Host` header, or an
//!   empty one, and no absolute-form target), or a `Host` that fails Apache's
//!   strict host-name check (letters, digits, `-`, `.`, an optional numeric
//!   port, or a bracketed IPv6 literal);
//! - **content-length**: a `Content-Length` that is not all digits
//!   (repeated headers are merged first, so differing copies fail too);
//! - **transfer-encoding**: a `Transfer-Encoding` whose last coding is not
//!   `chunked` (501), or a malformed chunked body.
//!
//! Rejected with 400 after the WAF's phase 1 (Apache's `translate_name`,
//! which runs after ModSecurity's phase-1 hook; phases 2-4 never run,
//! logging does):
//! - **target-form**: a target that is not origin-form (`/...`), `*` or
//!   absolute-form (`scheme://...`) (AH00126 "Invalid URI in request");
//! - **fragment**: a raw `#` in the target (CRS 920610-2 and 920100-8 expect
//!   Apache's 400 there; nginx accepts it). An approximation of where Apache
//!   fails such requests.
//!
//! Requests the client gets no parsable answer for (go-ftw reports an error,
//! which a stage may expect with `expect_error: true`):
//! - **http/0.9**: `GET /` or `GET / ` without a version is an HTTP/0.9
//!   simple request: the WAF sees protocol `HTTP/0.9`, the response has no
//!   status line;
//! - **incomplete**: no empty line ends the head, a body shorter than its
//!   `Content-Length`, or a chunked body without its last chunk: the server
//!   waits for more and the client times out.
//!
//! What the WAF then sees, as Apache hands it over: header values without
//! surrounding whitespace, continuation lines joined with a space, repeated
//! headers merged into one comma-separated value (`apr_table_compress`), the
//! body framed by `Transfer-Encoding: chunked` (de-chunked; `Content-Length`
//! is then dropped) or `Content-Length` (bytes beyond it are not read), and
//! no body at all without either.

/// The request as the WAF receives it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpRequest {
    pub method: Vec<u8>,
    pub uri: Vec<u8>,
    /// As sent, or `HTTP/0.9` for a simple request.
    pub version: Vec<u8>,
    pub headers: Vec<(Vec<u8>, Vec<u8>)>,
    pub body: Vec<u8>,
}

impl HttpRequest {
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v.as_slice())
    }
}

/// How far the WAF gets with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// The front end answers before the WAF runs.
    None,
    /// Phase 1 (and logging) only.
    Phase1,
    /// Every phase, and the backend answers.
    All,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    pub request: HttpRequest,
    pub reach: Reach,
    /// The front end's own answer: status and the rule of thumb behind it.
    pub status: Option<(u16, String)>,
    /// The client gets no parsable response (go-ftw reports an error).
    pub client_error: Option<String>,
}

impl Received {
    fn reject(mut self, status: u16, reach: Reach, why: impl Into<String>) -> Received {
        self.reach = reach;
        self.status = Some((status, why.into()));
        self
    }
}

fn is_tchar(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
}

fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&c| is_tchar(c))
}

fn is_ctl(c: u8) -> bool {
    c < 0x20 || c == 0x7f
}

fn trim_ows(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

fn show(b: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(b))
}

/// `HTTP/<d>.<d>` → (major, minor).
fn http_version(v: &[u8]) -> Option<(u8, u8)> {
    match v {
        [b'H', b'T', b'T', b'P', b'/', a, b'.', b] if a.is_ascii_digit() && b.is_ascii_digit() => {
            Some((a - b'0', b - b'0'))
        }
        _ => None,
    }
}

/// `scheme://...` (RFC 3986 scheme).
fn is_absolute_form(t: &[u8]) -> bool {
    let Some(p) = t.windows(3).position(|w| w == b"://") else {
        return false;
    };
    let scheme = &t[..p];
    !scheme.is_empty()
        && scheme[0].is_ascii_alphabetic()
        && scheme
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.'))
}

/// `host:port` with a non-empty host and a numeric port.
fn is_authority_form(t: &[u8]) -> bool {
    match t.iter().rposition(|&c| c == b':') {
        Some(i) => i > 0 && i + 1 < t.len() && t[i + 1..].iter().all(u8::is_ascii_digit),
        None => false,
    }
}

/// Apache's strict host-name check (`vhost.c`), with an optional port.
fn is_valid_host(h: &[u8]) -> bool {
    if let Some(rest) = h.strip_prefix(b"[") {
        let Some(end) = rest.iter().position(|&c| c == b']') else {
            return false;
        };
        let (addr, after) = (&rest[..end], &rest[end + 1..]);
        let port_ok =
            after.is_empty() || (after[0] == b':' && after[1..].iter().all(u8::is_ascii_digit));
        return !addr.is_empty()
            && addr
                .iter()
                .all(|&c| c.is_ascii_hexdigit() || c == b':' || c == b'.')
            && port_ok;
    }
    let host = match h.iter().rposition(|&c| c == b':') {
        Some(i) if h[i + 1..].iter().all(u8::is_ascii_digit) => &h[..i],
        Some(_) => return false,
        None => h,
    };
    !host.is_empty()
        && !host.windows(2).any(|w| w == b"..")
        && host
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || c == b'-' || c == b'.')
}

/// Decodes a chunked body: `Ok(None)` when the last chunk is missing.
fn dechunk(mut b: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let mut out = Vec::new();
    loop {
        let Some(nl) = b.iter().position(|&c| c == b'\n') else {
            return Ok(None);
        };
        let line = b[..nl].strip_suffix(b"\r").unwrap_or(&b[..nl]);
        let size = line.split(|&c| c == b';').next().unwrap_or_default();
        let size = trim_ows(size);
        let n = std::str::from_utf8(size)
            .ok()
            .filter(|s| !s.is_empty() && s.bytes().all(|c| c.is_ascii_hexdigit()))
            .and_then(|s| usize::from_str_radix(s, 16).ok())
            .ok_or_else(|| format!("malformed chunk size {}", show(line)))?;
        b = &b[nl + 1..];
        if n == 0 {
            // Trailers, if any, are not passed on.
            return Ok(Some(out));
        }
        if b.len() < n {
            return Ok(None);
        }
        out.extend_from_slice(&b[..n]);
        b = &b[n..];
        b = if let Some(r) = b.strip_prefix(b"\r\n") {
            r
        } else if let Some(r) = b.strip_prefix(b"\n") {
            r
        } else if b.is_empty() {
            return Ok(None);
        } else {
            return Err("chunk data not followed by CRLF".into());
        };
    }
}

/// What the front end does with a request (see the module documentation).
pub fn receive(raw: &super::request::RawRequest) -> Received {
    let line = &raw.request_line;
    let parts: Vec<&[u8]> = line.split(|&c| c == b' ').collect();
    let mut r = Received {
        request: HttpRequest {
            method: parts.first().map(|p| p.to_vec()).unwrap_or_default(),
            uri: parts.get(1).map(|p| p.to_vec()).unwrap_or_default(),
            version: parts.get(2).map(|p| p.to_vec()).unwrap_or_default(),
            ..HttpRequest::default()
        },
        reach: Reach::All,
        status: None,
        client_error: None,
    };

    // The request line.
    if line.iter().any(|&c| is_ctl(c)) {
        return r.reject(
            400,
            Reach::None,
            format!("request-line: control character in {}", show(line)),
        );
    }
    let simple = parts.len() == 2 || (parts.len() == 3 && parts[2].is_empty());
    if parts.len() < 2 || parts.len() > 3 || parts[0].is_empty() || parts[1].is_empty() {
        return r.reject(
            400,
            Reach::None,
            format!(
                "request-line: not `METHOD SP TARGET SP VERSION`: {}",
                show(line)
            ),
        );
    }
    if !is_token(parts[0]) {
        return r.reject(
            400,
            Reach::None,
            format!("method: {} is not a token", show(parts[0])),
        );
    }
    let (major, minor) = if simple {
        if parts[0] != b"GET" {
            return r.reject(400, Reach::None, "simple-request: HTTP/0.9 allows only GET");
        }
        r.request.version = b"HTTP/0.9".to_vec();
        r.client_error = Some(
            "http/0.9: a request without a version gets an HTTP/0.9 response without a status line"
                .into(),
        );
        (0, 9)
    } else {
        match http_version(parts[2]) {
            Some((0, _)) => {
                return r.reject(
                    400,
                    Reach::None,
                    format!("version: explicit {}", show(parts[2])),
                )
            }
            Some(v) => v,
            None => {
                return r.reject(
                    400,
                    Reach::None,
                    format!("version: {} is not HTTP/<digit>.<digit>", show(parts[2])),
                )
            }
        }
    };
    let target = parts[1];
    let is_connect = parts[0] == b"CONNECT";
    if is_connect && !is_authority_form(target) {
        return r.reject(
            400,
            Reach::None,
            format!("connect: target {} is not host:port", show(target)),
        );
    }

    // Headers.
    let mut headers: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    for l in &raw.header_lines {
        if matches!(l.first(), Some(b' ' | b'\t')) {
            let Some(last) = headers.last_mut() else {
                return r.reject(
                    400,
                    Reach::None,
                    "header-syntax: continuation line before any header",
                );
            };
            let v = trim_ows(l);
            if v.iter().any(|&c| is_ctl(c) && c != b'\t') {
                return r.reject(
                    400,
                    Reach::None,
                    format!("header-syntax: control character in {}", show(l)),
                );
            }
            if !v.is_empty() {
                last.1.push(b' ');
                last.1.extend_from_slice(v);
            }
            continue;
        }
        let Some(colon) = l.iter().position(|&c| c == b':') else {
            return r.reject(
                400,
                Reach::None,
                format!("header-syntax: no `:` in header line {}", show(l)),
            );
        };
        let (name, value) = (&l[..colon], trim_ows(&l[colon + 1..]));
        if !is_token(name) {
            return r.reject(
                400,
                Reach::None,
                format!("header-syntax: header name {} is not a token", show(name)),
            );
        }
        if value.iter().any(|&c| is_ctl(c) && c != b'\t') {
            return r.reject(
                400,
                Reach::None,
                format!(
                    "header-syntax: control character in the value of {}",
                    show(name)
                ),
            );
        }
        match headers
            .iter_mut()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
        {
            Some((_, v)) => {
                v.extend_from_slice(b", ");
                v.extend_from_slice(value);
            }
            None => headers.push((name.to_vec(), value.to_vec())),
        }
    }
    r.request.headers = headers;
    if !raw.complete {
        r.reach = Reach::None;
        r.client_error = Some("incomplete: no empty line ends the request head; the server waits and the client times out".into());
        return r;
    }

    // Host.
    if !is_absolute_form(target) && !is_connect {
        match r.request.header("Host").map(<[u8]>::to_vec) {
            Some(h) if !h.is_empty() => {
                if !is_valid_host(&h) {
                    let why = format!("host: invalid host name {}", show(&h));
                    return r.reject(400, Reach::None, why);
                }
            }
            _ => {
                if (major, minor) >= (1, 1) {
                    return r.reject(400, Reach::None, "host: HTTP/1.1 request without a host");
                }
            }
        }
    }

    // Body framing.
    let te = r.request.header("Transfer-Encoding").map(<[u8]>::to_vec);
    let cl = r.request.header("Content-Length").map(<[u8]>::to_vec);
    if let Some(te) = te {
        let last = te
            .rsplit(|&c| c == b',')
            .next()
            .map(trim_ows)
            .unwrap_or_default();
        if !last.eq_ignore_ascii_case(b"chunked") {
            return r.reject(
                501,
                Reach::None,
                format!("transfer-encoding: {} is not chunked", show(&te)),
            );
        }
        r.request
            .headers
            .retain(|(k, _)| !k.eq_ignore_ascii_case(b"content-length"));
        match dechunk(&raw.rest) {
            Ok(Some(body)) => r.request.body = body,
            Ok(None) => {
                r.reach = Reach::Phase1;
                r.client_error = Some("incomplete: the chunked body has no last chunk; the server waits and the client times out".into());
                return r;
            }
            Err(e) => return r.reject(400, Reach::None, format!("transfer-encoding: {e}")),
        }
    } else if let Some(cl) = cl {
        let n = std::str::from_utf8(&cl)
            .ok()
            .filter(|s| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()))
            .and_then(|s| s.parse::<usize>().ok());
        let Some(n) = n else {
            return r.reject(
                400,
                Reach::None,
                format!("content-length: {} is not a number", show(&cl)),
            );
        };
        if raw.rest.len() < n {
            r.request.body = raw.rest.clone();
            r.reach = Reach::Phase1;
            r.client_error = Some(format!(
                "incomplete: {} body bytes for Content-Length {n}; the server waits and the client times out",
                raw.rest.len()
            ));
            return r;
        }
        r.request.body = raw.rest[..n].to_vec();
    }

    // Rejections after phase 1.
    let known_form = target.starts_with(b"/") || target == b"*" || is_absolute_form(target);
    if !is_connect && !known_form {
        return r.reject(
            400,
            Reach::Phase1,
            format!("target-form: {} is not /path, * or scheme://", show(target)),
        );
    }
    if !is_connect && target.contains(&b'#') {
        return r.reject(
            400,
            Reach::Phase1,
            format!("fragment: raw `#` in the target {}", show(target)),
        );
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ftw::request::split;

    fn recv(s: &[u8]) -> Received {
        receive(&split(s))
    }

    fn rejected(s: &[u8]) -> (u16, Reach, String) {
        let r = recv(s);
        let (st, why) = r
            .status
            .clone()
            .unwrap_or_else(|| panic!("not rejected: {r:?}"));
        (st, r.reach, why)
    }

    #[test]
    fn valid_request_is_framed() {
        let r = recv(b"POST /a?b=1 HTTP/1.1\r\nHost: localhost:80\r\nContent-Length: 3\r\nX: 1\r\nx:  2 \r\n\r\nabcdef");
        assert_eq!(r.status, None);
        assert_eq!(r.reach, Reach::All);
        assert_eq!(r.request.method, b"POST");
        assert_eq!(r.request.uri, b"/a?b=1");
        assert_eq!(r.request.body, b"abc");
        assert_eq!(r.request.header("x"), Some(&b"1, 2"[..]));
        // No framing header: no body.
        assert_eq!(
            recv(b"POST / HTTP/1.1\r\nHost: h\r\n\r\nabc").request.body,
            b""
        );
    }

    #[test]
    fn chunked_bodies() {
        let r = recv(b"GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 99\r\n\r\n3\r\nHi \r\n3;x=y\r\nCRS\r\n0\r\n\r\n");
        assert_eq!(r.status, None);
        assert_eq!(r.request.body, b"Hi CRS");
        assert_eq!(r.request.header("content-length"), None);
        assert_eq!(
            rejected(b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n").0,
            501
        );
        assert_eq!(
            rejected(b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").0,
            400
        );
        assert!(
            recv(b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab")
                .client_error
                .is_some()
        );
    }

    #[test]
    fn request_line_rules() {
        for bad in [
            &b"     GET /get HTTP/1.1\r\nHost: h\r\n\r\n"[..],
            b"\tGET /get HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET /a b HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET / HTTP\\1.0\r\nHost: h\r\n\r\n",
            b"GET / HTTP/0.9\r\nHost: h\r\n\r\n",
            b"GET / 1.1\r\nHost: h\r\n\r\n",
            b"GET / JUNK/1.0\r\nHost: h\r\n\r\n",
            b"GET / HTTP/2\r\nHost: h\r\n\r\n",
            b"G(T / HTTP/1.1\r\nHost: h\r\n\r\n",
            b"CONNECT www.example.org HTTP/1.1\r\nHost: h\r\n\r\n",
            b"POST / \r\nHost: h\r\n\r\n",
        ] {
            let (st, reach, _) = rejected(bad);
            assert_eq!(
                (st, reach),
                (400, Reach::None),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        for ok in [
            &b"|GET / HTTP/1.1\r\nHost: h\r\n\r\n"[..],
            b"REALLYLONGUNREALMETHOD / HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET / HTTP/4.0\r\nHost: h\r\n\r\n",
            b"CONNECT 1.2.3.4:80 HTTP/1.1\r\nHost: h\r\n\r\n",
            b"OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET http://localhost HTTP/1.1\r\n\r\n",
            b"GET / HTTP/1.0\r\n\r\n",
        ] {
            let r = recv(ok);
            assert_eq!(
                (r.status.clone(), r.reach),
                (None, Reach::All),
                "{}",
                String::from_utf8_lossy(ok)
            );
        }
    }

    #[test]
    fn simple_requests_are_http_0_9() {
        let r = recv(b"GET / \r\nHost: localhost\r\n\r\n");
        assert_eq!(r.request.version, b"HTTP/0.9");
        assert_eq!(r.reach, Reach::All);
        assert!(r.client_error.is_some());
    }

    #[test]
    fn header_and_host_rules() {
        for bad in [
            &b"GET / HTTP/1.1\r\nHost: h\r\nX: a\rb\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nHost: h\r\nBad Name: a\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h\r\nno colon\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: localhost%1F\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a_b\r\n\r\n",
            b"GET / HTTP/1.1\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: \r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 3;\r\n\r\nabc",
            b"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\na",
        ] {
            let (st, reach, _) = rejected(bad);
            assert_eq!(
                (st, reach),
                (400, Reach::None),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(
            recv(b"GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n").status,
            None
        );
        assert_eq!(
            recv(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").status,
            None
        );
        // Folded header.
        let r = recv(b"GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n  b\r\n\r\n");
        assert_eq!(r.request.header("X"), Some(&b"a b"[..]));
    }

    #[test]
    fn rejections_after_phase_1() {
        assert_eq!(
            rejected(b"GET \\ HTTP/1.1\r\nHost: h\r\n\r\n").1,
            Reach::Phase1
        );
        assert_eq!(
            rejected(b"GET /#fragment HTTP/1.1\r\nHost: h\r\n\r\n").1,
            Reach::Phase1
        );
    }

    #[test]
    fn incomplete_requests_time_out() {
        assert!(recv(b"GET / HTTP/1.1\r\nHost: h\r\n")
            .client_error
            .is_some());
        let r = recv(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc");
        assert_eq!(r.reach, Reach::Phase1);
        assert!(r.client_error.is_some());
    }
}
