//! Where a custom rule's `redirect` sends a client (`location:
//! "https://{host}{uri}"`): the template, and the `Location` it makes for
//! a request. What every HTTPS site serves on its plain port (nginx's
//! `return 301 https://$host$request_uri`).

use hyper::header::HeaderValue;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Text(String),
    /// The request's host, without its port.
    Host,
    /// The request's path and query.
    Uri,
}

/// A `Location` template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    parts: Vec<Part>,
}

impl Location {
    /// Reads a template: text with `{host}` and `{uri}`.
    pub fn parse(text: &str) -> Result<Location, String> {
        if text.is_empty() {
            return Err("an empty location".into());
        }
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            let close = rest[open..]
                .find('}')
                .map(|c| open + c)
                .ok_or_else(|| format!("`{text}`: a `{{` without its `}}`"))?;
            if open > 0 {
                parts.push(Part::Text(rest[..open].to_string()));
            }
            parts.push(match &rest[open..=close] {
                "{host}" => Part::Host,
                "{uri}" => Part::Uri,
                other => {
                    return Err(format!(
                        "`{other}` in `{text}`: the placeholders are {{host}} and {{uri}}"
                    ))
                }
            });
            rest = &rest[close + 1..];
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_string()));
        }
        // The template's own text must make a valid header.
        let location = Location { parts };
        location.render(b"example.com", "/")?;
        Ok(location)
    }

    /// The `Location` for a request to `host` (as sent, port included or
    /// not, or as `host` reads it) and `path_and_query`; `Err` when the
    /// host is not a host name or an IP address (a client may send anything
    /// there), or is empty.
    pub(crate) fn render(&self, host: &[u8], path_and_query: &str) -> Result<HeaderValue, String> {
        let mut out = String::new();
        for p in &self.parts {
            match p {
                Part::Text(t) => out.push_str(t),
                Part::Host => {
                    let name = crate::host::host_name(host)
                        .ok()
                        .filter(|n| !n.is_empty())
                        .ok_or("not a host name")?;
                    // ASCII: letters, digits, `-_.[]:`.
                    out.push_str(&String::from_utf8_lossy(&name));
                }
                Part::Uri => out.push_str(path_and_query),
            }
        }
        HeaderValue::from_str(&out).map_err(|_| format!("`{out}` is not a valid Location"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_location_takes_the_host_without_its_port_and_the_target() {
        let l = Location::parse("https://{host}{uri}").unwrap_or_else(|e| panic!("{e}"));
        let at = |host: &str, uri: &str| {
            l.render(host.as_bytes(), uri)
                .map(|v| v.to_str().unwrap_or_default().to_string())
        };
        assert_eq!(
            at("shop.example", "/a?b=1"),
            Ok("https://shop.example/a?b=1".into())
        );
        assert_eq!(
            at("shop.example:8080", "/"),
            Ok("https://shop.example/".into())
        );
        assert_eq!(at("[::1]:80", "/x"), Ok("https://[::1]/x".into()));
        assert_eq!(at("10.0.0.5", "/"), Ok("https://10.0.0.5/".into()));
        for bad in ["evil.com/x", "a b", "a@b", "[nope]", "", "a:b", "[::1]x"] {
            assert!(at(bad, "/").is_err(), "{bad}");
        }
        let fixed =
            Location::parse("https://www.example.com/moved").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            fixed
                .render(b"x", "/y")
                .map(|v| v.to_str().unwrap_or_default().to_string()),
            Ok("https://www.example.com/moved".into())
        );
    }

    #[test]
    fn templates_are_checked() {
        for (bad, want) in [
            ("", "an empty location"),
            (
                "https://{hots}{uri}",
                "`{hots}` in `https://{hots}{uri}`: the placeholders are {host} and {uri}",
            ),
            ("https://{host", "a `{` without its `}`"),
            ("https://x/\nEvil: 1", "is not a valid Location"),
        ] {
            let e = Location::parse(bad).err().unwrap_or_default();
            assert!(e.contains(want), "{bad:?}: {e}");
        }
    }
}
