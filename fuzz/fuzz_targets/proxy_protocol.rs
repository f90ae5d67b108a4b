//! `waf serve`'s PROXY protocol reader (`waf_serve::proxy_protocol`) on
//! arbitrary connection openings: the bytes a client or a balancer sends
//! first on a `proxy_protocol` listener.
//!
//! Input: the bytes, as they arrive, read a prefix at a time.
//!
//! Checks besides "no panic, hang or OOM", for every prefix of the input
//! (what the reader may have peeked so far), the two properties the reader
//! relies on to take the header's bytes and not one more:
//! - a complete `Header` stays the same `Header` (length and addresses)
//!   however many bytes follow it, and is at most 4,096 bytes long;
//! - `NeedMore` for a prefix means `NeedMore` for every shorter one (the
//!   bytes it holds are all the header's), and a refusal is never taken
//!   back by more bytes.
//!
//! Seeds (`seeds/proxy_protocol`): version 1 lines (TCP4, TCP6, UNKNOWN)
//! and version 2 headers (IPv4, IPv6, LOCAL, with a TLV), each followed by
//! the first bytes of a request.
#![no_main]

use libfuzzer_sys::fuzz_target;
use waf_serve::proxy_protocol::{prefix, Prefix, V2_MAX};

fuzz_target!(|data: &[u8]| {
    let data = &data[..data.len().min(2 * V2_MAX)];
    // The first prefix whose answer is final (a header or a refusal).
    let mut settled: Option<(usize, Prefix)> = None;
    for end in 0..=data.len() {
        let p = prefix(&data[..end]);
        if let Prefix::Header { len, .. } = p {
            assert!(len <= end && len <= V2_MAX, "length {len} at {end}");
        }
        match &settled {
            None => match p {
                Prefix::NeedMore => {}
                Prefix::Header { len, .. } => {
                    // Complete at the byte that completes it, not later.
                    assert_eq!(len, end, "a header found late");
                    settled = Some((end, p));
                }
                Prefix::Refused(_) => settled = Some((end, p)),
            },
            Some((at, first)) => match (first, &p) {
                (Prefix::Header { .. }, Prefix::Header { .. }) => {
                    assert_eq!(first, &p, "at {end}, after the header found at {at}")
                }
                (Prefix::Refused(_), Prefix::Refused(_)) => {}
                _ => panic!("{p:?} at {end} after {first:?} at {at}"),
            },
        }
    }
});
