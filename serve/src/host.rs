//! The host a request is for: what sites, filters and redirects read
//! (`http.host`), and what the application gets as `Host`.
//!
//! The WAF and the application must agree on it, or a request can be
//! judged by one site's rules and served by another's application: a
//! manifest whose strict site is `http.host eq "admin.example"` and whose
//! last site takes the rest would otherwise let through
//! `Host: admin.example:80` or `Host: admin.example.` (an application's
//! virtual host, nginx's `server_name` for one, ignores the port and the
//! final dot), or two `Host` headers (the WAF reading the first, an
//! application the last). So the name is read as applications read it
//! (lower-cased, without its port or final dot), and what they could read
//! otherwise is refused with 400 as RFC 9112 section 3.2 says: no `Host` in
//! an HTTP/1.1 request, more than one, or one that is not a host. An
//! absolute-form target's authority takes the place of `Host` (RFC 9112,
//! section 3.2.2), and an HTTP/2 request's `host` header, if it has one,
//! must name its `:authority` (RFC 9113, section 8.3.1).

use hyper::header::{HeaderValue, HOST};
use hyper::http::request::Parts;
use hyper::Version;

/// The request's host, once checked.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct RequestHost {
    /// Lower-cased, without its port or final dot; empty when the request
    /// names none (HTTP/1.0 without `Host`).
    pub name: Vec<u8>,
    /// The `Host` the application gets when it is not the client's own
    /// `Host` header: an absolute-form target's authority, an HTTP/2
    /// request's `:authority`.
    pub upstream: Option<HeaderValue>,
}

/// Why a request's host is refused (each a 400).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostError {
    /// An HTTP/1.1 request without `Host`.
    Missing,
    /// More than one `Host` header.
    Several,
    /// A `Host` (or authority) that is not a host name, an IPv4 address or
    /// a bracketed IPv6 address, with an optional port.
    Invalid,
    /// An HTTP/2 request whose `host` header names another host than its
    /// `:authority`.
    Conflict,
    /// An HTTP/1 target that is a bare authority (`GET x HTTP/1.1`), which
    /// only `CONNECT` takes: neither a path nor an absolute URI.
    AuthorityTarget,
}

impl HostError {
    /// The body of the 400 answer.
    pub(crate) fn text(self) -> &'static str {
        match self {
            HostError::Missing => "no Host header\n",
            HostError::Several => "more than one Host header\n",
            HostError::Invalid => "invalid Host header\n",
            HostError::Conflict => "Host header and :authority differ\n",
            HostError::AuthorityTarget => "request target is not a path\n",
        }
    }
}

/// The host `parts` is for, or why it is refused.
pub(crate) fn request_host(parts: &Parts) -> Result<RequestHost, HostError> {
    let mut headers = parts.headers.get_all(HOST).iter();
    let header = headers.next();
    if headers.next().is_some() {
        return Err(HostError::Several);
    }
    let header_name = header.map(|h| host_name(h.as_bytes())).transpose()?;
    // An HTTP/1 request's authority is there only in absolute form (or a
    // `CONNECT`'s authority form); an HTTP/2 request's is its `:authority`.
    let authority = parts.uri.authority().map(|a| a.as_str());
    if authority.is_some()
        && parts.version < Version::HTTP_2
        && parts.uri.scheme().is_none()
        && parts.method != hyper::Method::CONNECT
    {
        return Err(HostError::AuthorityTarget);
    }
    match (authority, header_name) {
        (Some(authority), header_name) => {
            let name = host_name(authority.as_bytes())?;
            let http2 = parts.version >= Version::HTTP_2;
            if http2 && header_name.as_ref().is_some_and(|h| *h != name) {
                return Err(HostError::Conflict);
            }
            // The client's `Host` goes on if it names the host (HTTP/2: the
            // same host; HTTP/1: the same bytes); else the authority does.
            let keeps_header =
                header.is_some_and(|h| http2 || h.as_bytes() == authority.as_bytes());
            let upstream = if keeps_header {
                None
            } else {
                Some(HeaderValue::from_str(authority).map_err(|_| HostError::Invalid)?)
            };
            Ok(RequestHost { name, upstream })
        }
        (None, Some(name)) => Ok(RequestHost {
            name,
            upstream: None,
        }),
        (None, None) if parts.version == Version::HTTP_11 => Err(HostError::Missing),
        (None, None) => Ok(RequestHost {
            name: Vec::new(),
            upstream: None,
        }),
    }
}

/// `host [":" port]` as a name: lower-cased, without the port and a final
/// dot. A name is letters, digits, `-`, `_` and dots between non-empty
/// labels (an IPv4 address is one); an IPv6 address is in brackets. Other
/// bytes (a comma, a space, `@`, `/`), which an application or a framework
/// may read otherwise (the first of a comma-separated list, a user before
/// `@`), are refused. An empty value is an empty name (RFC 9112 section
/// 3.2: a target without an authority).
pub(crate) fn host_name(value: &[u8]) -> Result<Vec<u8>, HostError> {
    if value.is_empty() {
        return Ok(Vec::new());
    }
    let (host, port) = if value.first() == Some(&b'[') {
        let end = value
            .iter()
            .position(|&b| b == b']')
            .ok_or(HostError::Invalid)?;
        let inner = std::str::from_utf8(&value[1..end]).map_err(|_| HostError::Invalid)?;
        inner
            .parse::<std::net::Ipv6Addr>()
            .map_err(|_| HostError::Invalid)?;
        (&value[..=end], &value[end + 1..])
    } else {
        let colon = value.iter().position(|&b| b == b':');
        let (host, port) = value.split_at(colon.unwrap_or(value.len()));
        let host = host.strip_suffix(b".").unwrap_or(host);
        let name_byte = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_');
        if host.is_empty()
            || !host
                .split(|&b| b == b'.')
                .all(|label| !label.is_empty() && label.iter().all(name_byte))
        {
            return Err(HostError::Invalid);
        }
        (host, port)
    };
    // RFC 3986's port is `*DIGIT`: `host:` is a host.
    match port {
        [] | [b':'] => {}
        [b':', digits @ ..] if std::str::from_utf8(digits).is_ok_and(crate::forwarded::is_port) => {
        }
        _ => return Err(HostError::Invalid),
    }
    Ok(host.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(version: Version, target: &str, hosts: &[&str]) -> Parts {
        let mut request = hyper::Request::builder().version(version).uri(target);
        for h in hosts {
            request = request.header(HOST, *h);
        }
        request
            .body(())
            .map(|r| r.into_parts().0)
            .expect("a request")
    }

    fn name(version: Version, target: &str, hosts: &[&str]) -> Result<String, HostError> {
        request_host(&parts(version, target, hosts))
            .map(|h| String::from_utf8(h.name).expect("ASCII"))
    }

    #[test]
    fn the_name_is_read_as_an_application_reads_it() {
        let v = Version::HTTP_11;
        for (host, want) in [
            ("admin.example", "admin.example"),
            ("Admin.EXAMPLE", "admin.example"),
            ("admin.example:8080", "admin.example"),
            ("admin.example.", "admin.example"),
            ("admin.example.:443", "admin.example"),
            ("admin.example:", "admin.example"),
            ("10.0.0.1:80", "10.0.0.1"),
            ("[::1]:8080", "[::1]"),
            ("[::1]", "[::1]"),
            ("my_host", "my_host"),
            ("", ""),
        ] {
            assert_eq!(name(v, "/", &[host]).as_deref(), Ok(want), "{host}");
        }
    }

    #[test]
    fn what_an_application_could_read_otherwise_is_refused() {
        let v = Version::HTTP_11;
        for host in [
            "admin.example, public.example",
            "admin.example,public.example",
            "admin.example public.example",
            "user@admin.example",
            "admin.example/x",
            "admin..example",
            ".admin.example",
            "admin.example..",
            ".",
            "admin.example:80:80",
            "admin.example:http",
            "admin.example:123456",
            "[::1",
            "[::1]x",
            "[not-v6]:80",
            "adm\u{e9}n.example",
        ] {
            let Ok(value) = HeaderValue::from_bytes(host.as_bytes()) else {
                continue;
            };
            let mut p = parts(v, "/", &[]);
            p.headers.insert(HOST, value);
            assert_eq!(request_host(&p), Err(HostError::Invalid), "{host}");
        }
        assert_eq!(
            name(v, "/", &["public.example", "admin.example"]),
            Err(HostError::Several)
        );
        assert_eq!(name(v, "/", &[]), Err(HostError::Missing));
        assert_eq!(
            name(v, "admin.example", &["public.example"]),
            Err(HostError::AuthorityTarget)
        );
        assert_eq!(name(Version::HTTP_10, "/", &[]).as_deref(), Ok(""));
    }

    #[test]
    fn an_absolute_target_names_the_host_the_application_gets() {
        let p = parts(
            Version::HTTP_11,
            "http://Admin.example:8080/x",
            &["public.example"],
        );
        let host = request_host(&p).expect("a host");
        assert_eq!(host.name, b"admin.example");
        assert_eq!(
            host.upstream,
            Some(HeaderValue::from_static("Admin.example:8080"))
        );
        // Without Host, and with the same Host: nothing to replace there.
        let host = request_host(&parts(Version::HTTP_11, "http://a.example/", &[]));
        assert_eq!(
            host.map(|h| h.upstream),
            Ok(Some(HeaderValue::from_static("a.example")))
        );
        let host = request_host(&parts(
            Version::HTTP_11,
            "http://a.example/",
            &["a.example"],
        ));
        assert_eq!(host.map(|h| h.upstream), Ok(None));
        assert_eq!(
            name(Version::HTTP_11, "http://user@a.example/", &[]),
            Err(HostError::Invalid)
        );
    }

    #[test]
    fn an_http2_host_header_must_name_the_authority() {
        let v = Version::HTTP_2;
        let host = request_host(&parts(v, "https://a.example/x", &[]));
        assert_eq!(
            host,
            Ok(RequestHost {
                name: b"a.example".to_vec(),
                upstream: Some(HeaderValue::from_static("a.example")),
            })
        );
        // The same host, spelt otherwise: the client's header goes on.
        let host = request_host(&parts(v, "https://a.example/x", &["A.example:443"]));
        assert_eq!(
            host,
            Ok(RequestHost {
                name: b"a.example".to_vec(),
                upstream: None,
            })
        );
        assert_eq!(
            name(v, "https://a.example/x", &["b.example"]),
            Err(HostError::Conflict)
        );
    }
}
