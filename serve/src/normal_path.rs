//! A request path as the filters see it: the forms of one path that
//! applications take as the same made one, so that a rule on
//! `http.request.uri.path` cannot be walked around. `/%61dmin`, `//admin`,
//! `/x/../admin` and `/./admin` all reach an application's `/admin` (most
//! decode unreserved characters, and nginx, Express and the Python and Go
//! routers resolve dot segments or merge slashes), so a filter that reads
//! them as sent lets `not /admin` through; Cloudflare's rules, whose
//! language the filters speak, see the same normalization by default (its
//! "Cloudflare" URL normalization of incoming requests). The path sent
//! upstream is the client's, untouched; `raw.` fields give it to the
//! filters as sent.
//!
//! In this order (RFC 3986, 6.2.2):
//! - a percent-encoded unreserved character (`A-Z a-z 0-9 - . _ ~`) is
//!   decoded, and other percent-encodings are upper-cased (`%2f` is `%2F`,
//!   still encoded: a slash sent encoded is not a separator);
//! - runs of `/` become one;
//! - dot segments are removed (RFC 3986, 5.2.4): `.` goes, `..` takes the
//!   segment before it with it, never above the root.

use std::borrow::Cow;

/// `path` normalized (see the module documentation); borrowed when it is
/// already normal, which is what a request without `%`, `//` or `/.`
/// costs: one scan.
pub(crate) fn normalized(path: &[u8]) -> Cow<'_, [u8]> {
    let may_change = memchr::memchr(b'%', path).is_some()
        || memchr::memmem::find(path, b"//").is_some()
        || memchr::memmem::find(path, b"/.").is_some();
    if !may_change || !path.starts_with(b"/") {
        return Cow::Borrowed(path);
    }
    let out = remove_dot_segments(&decode_unreserved(path));
    if out == path {
        Cow::Borrowed(path)
    } else {
        Cow::Owned(out)
    }
}

fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn decode_unreserved(path: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(path.len());
    let mut i = 0;
    while i < path.len() {
        let b = path[i];
        if b == b'%' && i + 2 < path.len() {
            if let (Some(h), Some(l)) = (hex(path[i + 1]), hex(path[i + 2])) {
                let v = h * 16 + l;
                if unreserved(v) {
                    out.push(v);
                } else {
                    out.extend_from_slice(&[
                        b'%',
                        path[i + 1].to_ascii_uppercase(),
                        path[i + 2].to_ascii_uppercase(),
                    ]);
                }
                i += 3;
                continue;
            }
        }
        out.push(b);
        i += 1;
    }
    out
}

/// For a path that starts with `/`; empty segments go too (runs of `/`
/// become one).
fn remove_dot_segments(path: &[u8]) -> Vec<u8> {
    let mut kept: Vec<&[u8]> = Vec::new();
    // Whether the path ends in a directory (`/a/.`, `/a/b/..`: `/a/`).
    let mut ends_in_slash = false;
    let segments = path.get(1..).unwrap_or_default().split(|&b| b == b'/');
    for segment in segments {
        match segment {
            b"" | b"." => ends_in_slash = true,
            b".." => {
                kept.pop();
                ends_in_slash = true;
            }
            _ => {
                kept.push(segment);
                ends_in_slash = false;
            }
        }
    }
    let mut out = Vec::with_capacity(path.len());
    for segment in &kept {
        out.push(b'/');
        out.extend_from_slice(segment);
    }
    if ends_in_slash || out.is_empty() {
        out.push(b'/');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(path: &str) -> String {
        String::from_utf8_lossy(&normalized(path.as_bytes())).into_owned()
    }

    #[test]
    fn forms_of_one_path_are_made_one() {
        for (sent, seen) in [
            ("/admin", "/admin"),
            ("/%61dmin", "/admin"),
            ("/%41DMIN", "/ADMIN"),
            ("//admin", "/admin"),
            ("/x//y///z", "/x/y/z"),
            ("/./admin", "/admin"),
            ("/x/../admin", "/admin"),
            ("/x/%2e%2e/admin", "/admin"),
            ("/x/%2E./admin", "/admin"),
            ("/../../admin", "/admin"),
            ("/a/b/.", "/a/b/"),
            ("/a/b/..", "/a/"),
            ("/..", "/"),
            ("/", "/"),
            ("/a/", "/a/"),
            ("/a/..b/.c", "/a/..b/.c"),
            // Reserved characters stay encoded, upper-cased.
            ("/a%2fb", "/a%2Fb"),
            ("/a%2F..%2Fb", "/a%2F..%2Fb"),
            ("/%7euser/%7E", "/~user/~"),
            ("/caf%c3%a9", "/caf%C3%A9"),
            // Not a percent-encoding: as sent.
            ("/100%", "/100%"),
            ("/a%zz", "/a%zz"),
            ("/a%4", "/a%4"),
            // Not a path.
            ("*", "*"),
        ] {
            assert_eq!(n(sent), seen, "{sent}");
        }
    }

    #[test]
    fn a_normal_path_is_borrowed() {
        for path in ["/", "/shop/cart", "/a/b.html", "/a/..b", "/a/%41"] {
            let out = normalized(path.as_bytes());
            let borrowed = matches!(out, Cow::Borrowed(_));
            assert_eq!(borrowed, path != "/a/%41", "{path}");
        }
    }

    #[test]
    fn normalizing_twice_changes_nothing_more() {
        for path in [
            "/%2561dmin",
            "/a/%2e%2e%2f",
            "//%2e/x/../../y",
            "/%252e%252e/",
        ] {
            let once = normalized(path.as_bytes()).into_owned();
            assert_eq!(normalized(&once).into_owned(), once, "{path}");
        }
    }
}
