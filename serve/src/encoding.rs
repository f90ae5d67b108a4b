//! Compressed responses and phase 4 (the decoding itself, shared with the
//! other front ends, is `waf_engine::coding`).
//!
//! Response-body rules read a page as the browser renders it, not as it
//! travels: to them a gzip-compressed HTML page is noise, and a leak in it
//! goes through unseen. So while response bodies may be inspected, the
//! application is asked (by the request's `Accept-Encoding`) only for the
//! codings the proxy decodes, gzip and deflate; a response in one of them is
//! decoded for the engine while the client gets its original bytes (the
//! compression is kept). `SecResponseBodyLimit` counts decoded bytes, so a
//! small compressed body that inflates to gigabytes (a decompression bomb)
//! costs at most the limit. A response in another coding (the application
//! ignored `Accept-Encoding`), or one that does not decode, cannot be
//! inspected: it is counted and logged, and passes as it is.

use hyper::header::{HeaderMap, HeaderValue, ACCEPT_ENCODING, CONTENT_ENCODING};
pub(crate) use waf_engine::coding::{Coding, Decoder, FeedError};

/// The codings a response body can be decoded from for inspection.
const DECODED: [&str; 4] = ["gzip", "x-gzip", "deflate", "identity"];

/// Keeps only the codings the proxy decodes in the request's
/// `Accept-Encoding` (their q-values as given); with none left the header
/// goes, which asks for the body as it is.
pub(crate) fn restrict_accept_encoding(headers: &mut HeaderMap) {
    let mut kept = Vec::new();
    for value in headers.get_all(ACCEPT_ENCODING) {
        let Ok(text) = value.to_str() else { continue };
        for item in text.split(',') {
            let coding = item.split(';').next().unwrap_or("").trim();
            if DECODED.iter().any(|d| coding.eq_ignore_ascii_case(d)) {
                kept.push(item.trim().to_string());
            }
        }
    }
    headers.remove(ACCEPT_ENCODING);
    if !kept.is_empty() {
        if let Ok(v) = HeaderValue::from_str(&kept.join(", ")) {
            headers.insert(ACCEPT_ENCODING, v);
        }
    }
}

/// A message's coding, from its `Content-Encoding` headers.
pub(crate) fn coding(headers: &HeaderMap) -> Coding {
    Coding::of(
        headers
            .get_all(CONTENT_ENCODING)
            .iter()
            .map(|v| v.as_bytes()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coding_reads_every_content_encoding_header() {
        let with = |v: &[&str]| {
            let mut h = HeaderMap::new();
            for x in v {
                h.append(CONTENT_ENCODING, HeaderValue::from_str(x).expect("value"));
            }
            coding(&h)
        };
        assert_eq!(with(&[]), Coding::Identity);
        assert_eq!(with(&["GZIP"]), Coding::Gzip);
        assert_eq!(with(&["identity", "deflate"]), Coding::Deflate);
        assert_eq!(with(&["gzip", "gzip"]), Coding::Other);
    }

    #[test]
    fn accept_encoding_keeps_what_can_be_decoded() {
        let restricted = |v: Option<&str>| {
            let mut h = HeaderMap::new();
            if let Some(v) = v {
                h.insert(ACCEPT_ENCODING, HeaderValue::from_str(v).expect("value"));
            }
            restrict_accept_encoding(&mut h);
            h.get(ACCEPT_ENCODING)
                .map(|v| v.to_str().expect("text").to_string())
        };
        assert_eq!(
            restricted(Some("gzip, deflate, br, zstd")).as_deref(),
            Some("gzip, deflate")
        );
        assert_eq!(
            restricted(Some("br;q=1.0, gzip;q=0.8, *;q=0.1")).as_deref(),
            Some("gzip;q=0.8")
        );
        assert_eq!(restricted(Some("br")), None);
        assert_eq!(restricted(None), None);
    }
}
