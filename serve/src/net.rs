//! IP networks (`10.0.0.0/8`, `2001:db8::/32`, or one address): what filter
//! expressions' `ip.src in {...}` and the trusted-proxy list both test
//! addresses against.

use std::net::IpAddr;

/// A network: an address and a prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Net {
    addr: IpAddr,
    prefix: u8,
}

impl Net {
    /// `ADDR/LEN`, or `ADDR` alone (the one address). The error says what
    /// is wrong, for the caller to place.
    pub fn parse(s: &str) -> Result<Net, String> {
        let (a, len) = match s.split_once('/') {
            Some((a, len)) => (a, Some(len)),
            None => (s, None),
        };
        let addr = a
            .parse::<IpAddr>()
            .map(canonical)
            .map_err(|_| format!("`{a}` is not an IP address"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match len {
            None => max,
            Some(len) => len
                .parse::<u8>()
                .ok()
                .filter(|&l| l <= max)
                .ok_or_else(|| format!("`/{len}`: the prefix length is 0 to {max}"))?,
        };
        Ok(Net { addr, prefix })
    }

    /// The network of one address.
    pub fn host(addr: IpAddr) -> Net {
        let addr = canonical(addr);
        let prefix = if addr.is_ipv4() { 32 } else { 128 };
        Net { addr, prefix }
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, canonical(ip)) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(n) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(n) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

/// An address as text, on the stack: what `Display` writes, without
/// `core::fmt` for IPv4 (most clients), whose octets are written digit by
/// digit. Every request needs two or three (`REMOTE_ADDR`, `SERVER_ADDR`,
/// `X-Forwarded-For`), and `to_string()` cost ~1,300 instructions and an
/// allocation each.
pub struct IpText {
    buf: [u8; 48],
    len: usize,
}

impl IpText {
    /// `ip` as text.
    pub fn of(ip: IpAddr) -> IpText {
        let mut t = IpText {
            buf: [0; 48],
            len: 0,
        };
        match ip {
            IpAddr::V4(a) => {
                for (i, o) in a.octets().into_iter().enumerate() {
                    if i > 0 {
                        t.push(b'.');
                    }
                    if o >= 100 {
                        t.push(b'0' + o / 100);
                    }
                    if o >= 10 {
                        t.push(b'0' + o / 10 % 10);
                    }
                    t.push(b'0' + o % 10);
                }
            }
            IpAddr::V6(a) => {
                use std::io::Write as _;
                let mut cur = std::io::Cursor::new(&mut t.buf[..]);
                // An IPv6 address is at most 45 characters
                // (`ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255`).
                let _ = write!(cur, "{a}");
                t.len = cur.position() as usize;
            }
        }
        t
    }

    fn push(&mut self, b: u8) {
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(self.buf.get(..self.len).unwrap_or_default()).unwrap_or_default()
    }
}

/// IPv4-mapped IPv6 addresses (`::ffff:10.0.0.1`, what a dual-stack socket
/// reports) compare as the IPv4 address.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("address")
    }

    #[test]
    fn addresses_are_written_as_display_writes_them() {
        for a in [
            "0.0.0.0",
            "127.0.0.1",
            "10.9.99.100",
            "192.0.2.7",
            "255.255.255.255",
            "::",
            "::1",
            "2001:db8::7",
            "::ffff:10.9.9.9",
            "fe80::1:2:3:4",
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        ] {
            let a = ip(a);
            assert_eq!(IpText::of(a).as_str(), a.to_string());
        }
        let mut rng = waf_test_support::XorShift::new(7);
        for _ in 0..10_000 {
            let a = IpAddr::from((rng.next_u64() as u32).to_be_bytes());
            assert_eq!(IpText::of(a).as_str(), a.to_string());
        }
    }

    #[test]
    fn networks_and_single_addresses() {
        let n = Net::parse("10.0.0.0/8").expect("net");
        assert!(n.contains(ip("10.255.0.1")));
        assert!(n.contains(ip("::ffff:10.1.2.3")), "IPv4-mapped");
        assert!(!n.contains(ip("11.0.0.1")));
        assert!(!n.contains(ip("::1")));
        let one = Net::parse("192.0.2.7").expect("address");
        assert!(one.contains(ip("192.0.2.7")) && !one.contains(ip("192.0.2.8")));
        let v6 = Net::parse("2001:db8::/32").expect("net");
        assert!(v6.contains(ip("2001:db8:1::5")) && !v6.contains(ip("2001:db9::1")));
        assert!(Net::parse("0.0.0.0/0")
            .expect("all")
            .contains(ip("203.0.113.9")));
        assert_eq!(Net::host(ip("::ffff:192.0.2.7")), one);
    }

    #[test]
    fn errors_say_what_is_wrong() {
        assert_eq!(
            Net::parse("10.0.0.0/33").unwrap_err(),
            "`/33`: the prefix length is 0 to 32"
        );
        assert_eq!(
            Net::parse("example.com").unwrap_err(),
            "`example.com` is not an IP address"
        );
        assert!(Net::parse("10.0.0.0/").is_err());
    }
}
