//! Who the client is when `waf serve` sits behind other proxies (a load
//! balancer, a CDN), and what the application behind it is told.
//!
//! The address a connection comes from is the client's unless that peer is
//! a trusted proxy: then `X-Forwarded-For` is read from the right (each
//! proxy appends the address it was connected from) past every trusted
//! address, and the first address that is not trusted is the client, as
//! nginx's `set_real_ip_from` + `real_ip_recursive on` do. That address is
//! what the rules see as `REMOTE_ADDR`, what `ip.src` in filter expressions
//! tests, and what the logs name. A peer that is not trusted cannot choose
//! its address this way: its `X-Forwarded-*` headers are not believed.
//!
//! Upstream, the application gets `X-Forwarded-For` (the incoming list with
//! the peer appended when the peer is trusted, else the peer alone),
//! `X-Forwarded-Proto` and `X-Forwarded-Host` (kept from a trusted peer,
//! else set from this connection), as Caddy does; RFC 7239's `Forwarded`
//! the same way (an element for this hop appended to a trusted peer's,
//! else alone); and `X-Real-IP`, the client as the rules see it, as
//! Traefik sets it and nginx deployments do (`proxy_set_header X-Real-IP
//! $remote_addr`). Applications and their frameworks read any of these for
//! the client's address (Spring and Rails read `Forwarded`, Echo and many
//! others `X-Real-IP`): a header a client made up never reaches the
//! application as if a proxy had written it. Nor does it under another
//! spelling: servers that hand headers to the application as CGI-style
//! variables (Rack servers such as Puma, PHP, WSGI servers) turn
//! `X-Forwarded_For` into the same `HTTP_X_FORWARDED_FOR` as
//! `X-Forwarded-For`, and the one they keep is not always the proxy's
//! (Puma's CVE-2024-45614), so a header spelled with `_` where one of these
//! has `-` is removed.

use crate::net::Net;
use hyper::header::{HeaderMap, HeaderName, HeaderValue, FORWARDED, HOST};
use std::net::IpAddr;

const XFF: HeaderName = HeaderName::from_static("x-forwarded-for");
const XF_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const XF_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
const X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");

/// The proxies in front of `waf serve` whose `X-Forwarded-For` is believed
/// (none by default).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    nets: Vec<Net>,
}

impl TrustedProxies {
    /// Networks (`10.0.0.0/8`) or addresses; the error names the bad one.
    pub fn parse<S: AsRef<str>>(items: &[S]) -> Result<TrustedProxies, String> {
        let nets = items
            .iter()
            .map(|s| {
                let s = s.as_ref().trim();
                Net::parse(s).map_err(|e| format!("trusted proxy `{s}`: {e}"))
            })
            .collect::<Result<_, _>>()?;
        Ok(TrustedProxies { nets })
    }

    /// Whether `ip` is one of the trusted proxies.
    pub fn trusts(&self, ip: IpAddr) -> bool {
        self.nets.iter().any(|n| n.contains(ip))
    }

    /// The client's address: `peer`, or when `peer` is trusted, the nearest
    /// address in `X-Forwarded-For` (all its lines, in order) that is not
    /// trusted; the leftmost when all are. An entry that is not an address
    /// (`unknown`, garbage) ends the walk at the address before it.
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if self.nets.is_empty() || !self.trusts(peer) {
            return peer;
        }
        let mut client = peer;
        for entry in headers
            .get_all(&XFF)
            .iter()
            .rev()
            .flat_map(|line| line.as_bytes().split(|&b| b == b',').rev())
        {
            match parse_entry(entry) {
                Some(ip) => client = ip,
                None => break,
            }
            if !self.trusts(client) {
                break;
            }
        }
        client
    }

    /// Sets the forwarding headers of the request sent upstream (`headers`,
    /// a copy of the client's; `client`, [`TrustedProxies::client`]'s
    /// answer): see the module's comment.
    pub fn set_forwarded(&self, headers: &mut HeaderMap, peer: IpAddr, client: IpAddr, tls: bool) {
        remove_underscore_spellings(headers);
        let trusted = self.trusts(peer);
        let peer_text = crate::net::IpText::of(crate::net::canonical(peer));
        let peer_text = peer_text.as_str();
        let forwarded = forwarded_element(peer_text, tls, headers.get(HOST));
        let forwarded = if trusted && headers.contains_key(FORWARDED) {
            join_lines(headers, FORWARDED, &forwarded)
        } else {
            HeaderValue::from_bytes(&forwarded).ok()
        };
        match forwarded {
            Some(v) => {
                headers.insert(FORWARDED, v);
            }
            None => {
                headers.remove(FORWARDED);
            }
        }
        let client_text = crate::net::IpText::of(crate::net::canonical(client));
        if let Ok(v) = HeaderValue::from_str(client_text.as_str()) {
            headers.insert(X_REAL_IP, v);
        }
        let xff = if trusted && headers.contains_key(&XFF) {
            join_lines(headers, XFF, peer_text.as_bytes())
        } else {
            None
        };
        let xff = xff.or_else(|| HeaderValue::from_str(peer_text).ok());
        if let Some(v) = xff {
            headers.insert(XFF, v);
        }
        if !(trusted && headers.contains_key(&XF_PROTO)) {
            headers.insert(
                XF_PROTO,
                HeaderValue::from_static(if tls { "https" } else { "http" }),
            );
        }
        if !(trusted && headers.contains_key(&XF_HOST)) {
            match headers.get(HOST).cloned() {
                Some(h) => {
                    headers.insert(XF_HOST, h);
                }
                None => {
                    headers.remove(&XF_HOST);
                }
            }
        }
    }
}

/// Removes the headers whose names are a forwarding header's with `_` for
/// one or more of its `-` (see the module's comment). Names with no `_`, by
/// far the most, cost one scan of the names and no allocation.
fn remove_underscore_spellings(headers: &mut HeaderMap) {
    let spoofs: Vec<HeaderName> = headers
        .keys()
        .filter(|name| is_underscore_spelling(name.as_str()))
        .cloned()
        .collect();
    for name in spoofs {
        headers.remove(name);
    }
}

fn is_underscore_spelling(name: &str) -> bool {
    name.contains('_')
        && [XFF, XF_PROTO, XF_HOST, X_REAL_IP].iter().any(|h| {
            let h = h.as_str();
            h.len() == name.len()
                && h.bytes()
                    .zip(name.bytes())
                    .all(|(a, b)| a == b || (a == b'-' && b == b'_'))
        })
}

/// A header's lines as one comma-separated list, with `last` appended.
fn join_lines(headers: &HeaderMap, name: HeaderName, last: &[u8]) -> Option<HeaderValue> {
    let mut list = Vec::new();
    for line in headers.get_all(name) {
        list.extend_from_slice(line.as_bytes());
        list.extend_from_slice(b", ");
    }
    list.extend_from_slice(last);
    HeaderValue::from_bytes(&list).ok()
}

/// This hop's `Forwarded` element (RFC 7239): `for=` the peer (an IPv6
/// address quoted, in brackets), `proto=`, and `host=` the request's
/// `Host` when it has one (quoted: a port's `:` is not a token character).
fn forwarded_element(peer: &str, tls: bool, host: Option<&HeaderValue>) -> Vec<u8> {
    let mut e = Vec::with_capacity(64);
    if peer.contains(':') {
        e.extend_from_slice(b"for=\"[");
        e.extend_from_slice(peer.as_bytes());
        e.extend_from_slice(b"]\"");
    } else {
        e.extend_from_slice(b"for=");
        e.extend_from_slice(peer.as_bytes());
    }
    e.extend_from_slice(if tls { b";proto=https" } else { b";proto=http" });
    // A quoted string holds any visible byte but `"` and `\\`, which a
    // checked host (see `host`) never has; one that has them is left out.
    if let Some(h) =
        host.filter(|h| !h.is_empty() && !h.as_bytes().iter().any(|b| matches!(b, b'"' | b'\\')))
    {
        e.extend_from_slice(b";host=\"");
        e.extend_from_slice(h.as_bytes());
        e.push(b'"');
    }
    e
}

/// One `X-Forwarded-For` entry: `1.2.3.4`, `1.2.3.4:5678`, `2001:db8::1`,
/// `[2001:db8::1]`, `[2001:db8::1]:5678` (spaces around ignored).
fn parse_entry(entry: &[u8]) -> Option<IpAddr> {
    let s = std::str::from_utf8(entry).ok()?.trim();
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(crate::net::canonical(ip));
    }
    if let Some(rest) = s.strip_prefix('[') {
        let (inner, after) = rest.split_once(']')?;
        if !(after.is_empty() || after.strip_prefix(':').is_some_and(is_port)) {
            return None;
        }
        return inner.parse::<IpAddr>().ok().map(crate::net::canonical);
    }
    let (host, port) = s.rsplit_once(':')?;
    if !is_port(port) {
        return None;
    }
    host.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

/// A port number as text: 1 to 5 digits.
pub(crate) fn is_port(s: &str) -> bool {
    !s.is_empty() && s.len() <= 5 && s.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("address")
    }

    fn xff(lines: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for l in lines {
            h.append(XFF, HeaderValue::from_str(l).expect("value"));
        }
        h
    }

    fn trusted(items: &[&str]) -> TrustedProxies {
        TrustedProxies::parse(items).expect("trusted proxies")
    }

    #[test]
    fn a_peer_that_is_not_trusted_is_the_client() {
        let t = trusted(&["10.0.0.0/8"]);
        assert_eq!(
            t.client(ip("198.51.100.1"), &xff(&["203.0.113.7"])),
            ip("198.51.100.1")
        );
        // Nothing trusted: never read.
        let none = TrustedProxies::default();
        assert_eq!(
            none.client(ip("10.0.0.1"), &xff(&["203.0.113.7"])),
            ip("10.0.0.1")
        );
    }

    #[test]
    fn the_nearest_untrusted_address_is_the_client() {
        let t = trusted(&["10.0.0.0/8", "192.0.2.1"]);
        // The client made up the first entry; the load balancer appended
        // the client's real address.
        let h = xff(&["1.1.1.1, 203.0.113.7, 192.0.2.1"]);
        assert_eq!(t.client(ip("10.0.0.5"), &h), ip("203.0.113.7"));
        // Several header lines are one list, in order.
        let h = xff(&["1.1.1.1", "203.0.113.7", "192.0.2.1"]);
        assert_eq!(t.client(ip("10.0.0.5"), &h), ip("203.0.113.7"));
        // All trusted: the leftmost.
        let h = xff(&["10.1.1.1, 192.0.2.1"]);
        assert_eq!(t.client(ip("10.0.0.5"), &h), ip("10.1.1.1"));
        // No header: the peer.
        assert_eq!(t.client(ip("10.0.0.5"), &HeaderMap::new()), ip("10.0.0.5"));
    }

    #[test]
    fn garbage_ends_the_walk() {
        let t = trusted(&["10.0.0.0/8"]);
        let h = xff(&["203.0.113.7, unknown, 10.9.9.9"]);
        assert_eq!(t.client(ip("10.0.0.5"), &h), ip("10.9.9.9"));
        let h = xff(&["203.0.113.7, "]);
        assert_eq!(t.client(ip("10.0.0.5"), &h), ip("10.0.0.5"));
    }

    #[test]
    fn entries_with_ports_and_brackets() {
        for (e, want) in [
            ("203.0.113.7:4711", Some("203.0.113.7")),
            ("2001:db8::1", Some("2001:db8::1")),
            ("[2001:db8::1]", Some("2001:db8::1")),
            ("[2001:db8::1]:443", Some("2001:db8::1")),
            (" ::ffff:203.0.113.7 ", Some("203.0.113.7")),
            ("[2001:db8::1]x", None),
            ("203.0.113.7:http", None),
            ("example.com", None),
            ("", None),
        ] {
            assert_eq!(parse_entry(e.as_bytes()), want.map(ip), "{e:?}");
        }
    }

    #[test]
    fn upstream_headers_believe_only_trusted_peers() {
        let t = trusted(&["10.0.0.0/8"]);
        let mut h = xff(&["203.0.113.7"]);
        h.insert(XF_PROTO, HeaderValue::from_static("https"));
        h.insert(XF_HOST, HeaderValue::from_static("shop.example"));
        h.insert(HOST, HeaderValue::from_static("internal:8080"));
        h.append(FORWARDED, HeaderValue::from_static("for=203.0.113.7"));
        h.append(
            FORWARDED,
            HeaderValue::from_static("for=10.0.0.9;proto=https"),
        );
        h.insert(X_REAL_IP, HeaderValue::from_static("192.0.2.1"));
        // From a trusted proxy: appended to, kept.
        let mut from_lb = h.clone();
        let client = t.client(ip("10.0.0.5"), &from_lb);
        t.set_forwarded(&mut from_lb, ip("10.0.0.5"), client, false);
        assert_eq!(from_lb[&XFF], "203.0.113.7, 10.0.0.5");
        assert_eq!(from_lb[&XF_PROTO], "https");
        assert_eq!(from_lb[&XF_HOST], "shop.example");
        assert_eq!(
            from_lb[FORWARDED],
            "for=203.0.113.7, for=10.0.0.9;proto=https, for=10.0.0.5;proto=http;host=\"internal:8080\""
        );
        assert_eq!(from_lb[&X_REAL_IP], "203.0.113.7");
        // From anyone else: replaced.
        let mut spoofed = h.clone();
        t.set_forwarded(&mut spoofed, ip("198.51.100.1"), ip("198.51.100.1"), true);
        assert_eq!(spoofed[&XFF], "198.51.100.1");
        assert_eq!(spoofed[&XF_PROTO], "https");
        assert_eq!(spoofed[&XF_HOST], "internal:8080");
        assert_eq!(spoofed.get_all(&XFF).iter().count(), 1);
        assert_eq!(
            spoofed[FORWARDED],
            "for=198.51.100.1;proto=https;host=\"internal:8080\""
        );
        assert_eq!(spoofed.get_all(FORWARDED).iter().count(), 1);
        assert_eq!(spoofed[&X_REAL_IP], "198.51.100.1");
        let mut plain = HeaderMap::new();
        let v6 = ip("2001:db8::1");
        t.set_forwarded(&mut plain, v6, v6, false);
        assert_eq!(plain[&XFF], "2001:db8::1");
        assert_eq!(plain[&XF_PROTO], "http");
        assert!(!plain.contains_key(&XF_HOST));
        assert_eq!(plain[FORWARDED], "for=\"[2001:db8::1]\";proto=http");
        assert_eq!(plain[&X_REAL_IP], "2001:db8::1");
        let mut mapped = HeaderMap::new();
        let v4 = ip("::ffff:198.51.100.1");
        t.set_forwarded(&mut mapped, v4, v4, false);
        assert_eq!(mapped[&XFF], "198.51.100.1");
        assert_eq!(mapped[FORWARDED], "for=198.51.100.1;proto=http");
        assert_eq!(mapped[&X_REAL_IP], "198.51.100.1");
    }

    #[test]
    fn underscore_spellings_of_forwarding_headers_are_removed() {
        let t = trusted(&["10.0.0.0/8"]);
        let mut h = HeaderMap::new();
        for (name, value) in [
            ("x-forwarded_for", "1.1.1.1"),
            ("x_forwarded_for", "1.1.1.2"),
            ("x_real_ip", "1.1.1.3"),
            ("x-forwarded_proto", "https"),
            ("x_forwarded-host", "admin.example"),
            ("x_custom_header", "kept"),
            ("x-forwarded_for_me", "kept"),
        ] {
            h.append(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        // From a trusted proxy as from anyone: a spelling no proxy writes.
        for peer in ["10.0.0.5", "198.51.100.1"] {
            let mut sent = h.clone();
            t.set_forwarded(&mut sent, ip(peer), ip(peer), false);
            let mut names: Vec<&str> = sent.keys().map(|k| k.as_str()).collect();
            names.sort_unstable();
            assert_eq!(
                names,
                [
                    "forwarded",
                    "x-forwarded-for",
                    "x-forwarded-proto",
                    "x-forwarded_for_me",
                    "x-real-ip",
                    "x_custom_header",
                ],
                "{peer}"
            );
            assert_eq!(sent[&XFF], peer);
            assert_eq!(sent[&XF_PROTO], "http");
        }
    }

    #[test]
    fn bad_entries_are_named() {
        assert_eq!(
            TrustedProxies::parse(&["10.0.0.0/8", "lb.internal"]).unwrap_err(),
            "trusted proxy `lb.internal`: `lb.internal` is not an IP address"
        );
    }
}
