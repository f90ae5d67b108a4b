//! A request-id header shared with the proxies around the WAF
//! (`request_id_header: X-Request-ID`): a load balancer in front names
//! each request, and the WAF's error, audit and access logs use that name
//! as the request's `UNIQUE_ID`, so one id finds the request in every
//! log of the chain. Only a trusted proxy (`trusted_proxies`) is believed:
//! a client cannot choose the id its attack is logged under. The
//! application gets the id in the same header either way.

use hyper::header::{HeaderMap, HeaderName};

/// The longest id taken from a proxy.
pub(crate) const MAX_LEN: usize = 128;

/// The header's name, checked (a flag's or the manifest's text).
pub fn header_name(name: &str) -> Result<HeaderName, String> {
    let n = HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| format!("`{name}` is not a header name"))?;
    let reserved = [
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "cookie",
        "x-forwarded-for",
        "x-waf-unique-id",
    ];
    if reserved.contains(&n.as_str()) {
        return Err(format!(
            "`{name}` carries something else: name a header of its own, such as X-Request-ID"
        ));
    }
    Ok(n)
}

/// The id a trusted proxy sent in `name`, if it is one: 1 to [`MAX_LEN`]
/// visible ASCII characters, none of them a quote, a backslash or a space
/// (the logs quote ids; AWS's `Root=1-5759e988-bd862e3fe1be46a994272793`
/// and a UUID both pass).
pub(crate) fn from_proxy<'h>(headers: &'h HeaderMap, name: &HeaderName) -> Option<&'h str> {
    let mut values = headers.get_all(name).iter();
    let v = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let id = v.to_str().ok()?;
    let ok = (1..=MAX_LEN).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\');
    ok.then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert_eq!(
            header_name("X-Request-ID").map(|n| n.to_string()),
            Ok("x-request-id".into())
        );
        assert!(header_name("bad name").is_err());
        let e = header_name("Host").err().unwrap_or_default();
        assert!(e.contains("a header of its own"), "{e}");
    }

    #[test]
    fn only_one_plain_id_is_taken() {
        let name = HeaderName::from_static("x-request-id");
        let with = |values: &[&str]| {
            let mut h = HeaderMap::new();
            for v in values {
                if let Ok(v) = v.parse() {
                    h.append(&name, v);
                }
            }
            h
        };
        let h = with(&["Root=1-5759e988-bd862e3fe1be46a994272793"]);
        assert_eq!(
            from_proxy(&h, &name),
            Some("Root=1-5759e988-bd862e3fe1be46a994272793")
        );
        for bad in [
            with(&[]),
            with(&[""]),
            with(&["a b"]),
            with(&["a\"b"]),
            with(&["a\\b"]),
            with(&["a", "b"]),
            with(&[&"x".repeat(MAX_LEN + 1)]),
        ] {
            assert_eq!(from_proxy(&bad, &name), None, "{bad:?}");
        }
    }
}
