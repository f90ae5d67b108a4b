//! `@detectSQLi` and `@detectXSS`: the libinjection algorithm behind a small
//! trait, so that the implementation can be replaced.
//!
//! [`Libinjection`] (the default) is our own allocation-free implementation of
//! libinjection as bundled with ModSecurity v3.0.9 (modules `sqli`, and `xss`
//! on `html5`; the SQL word table through `keywords`); [`LibinjectionRs`]
//! wraps the `libinjectionrs` crate and is kept as a reference
//! (`engine/tests/injection_agreement.rs` compares the two, and with the C
//! library when available; the differences are listed there and in
//! `docs/conformance.md`).

mod html5;
mod keywords;
mod sqli;
mod xss;

/// A libinjection-compatible detector.
pub trait Injection: Send + Sync + std::fmt::Debug {
    /// Whether `input` is SQL injection; on a hit, writes libinjection's
    /// fingerprint (e.g. `s&1c`) to `fingerprint` (cleared first), which
    /// `capture` stores in `TX:0`.
    fn sqli(&self, input: &[u8], fingerprint: &mut Vec<u8>) -> bool;

    /// Whether `input` is cross-site scripting.
    fn xss(&self, input: &[u8]) -> bool;
}

/// libinjection's algorithm, implemented here: no heap allocation, no panic,
/// linear time. Its behaviour is that of the C libinjection bundled with
/// ModSecurity v3.0.9 (libinjection 3.10 line); the SQL word and fingerprint
/// table is read from the `libinjectionrs` crate (identical to the C one).
#[derive(Clone, Copy, Debug, Default)]
pub struct Libinjection;

impl Injection for Libinjection {
    fn sqli(&self, input: &[u8], fingerprint: &mut Vec<u8>) -> bool {
        fingerprint.clear();
        let mut fp = [0u8; sqli::FINGERPRINT_SIZE];
        match sqli::detect(input, &mut fp) {
            Some(n) => {
                // at most 8 bytes: no allocation if the caller reserved them
                fingerprint.extend_from_slice(fp.get(..n).unwrap_or(&[]));
                true
            }
            None => false,
        }
    }

    fn xss(&self, input: &[u8]) -> bool {
        xss::detect(input)
    }
}

/// The `libinjectionrs` crate: a pure-Rust port of libinjection (a later
/// upstream than ModSecurity 3.0.9's). It allocates per call and differs from
/// the C library on a few inputs; kept as the reference for [`Libinjection`].
#[derive(Clone, Copy, Debug, Default)]
#[allow(dead_code)] // moved to the agreement tests (they cannot reach it now)
pub struct LibinjectionRs;

impl Injection for LibinjectionRs {
    fn sqli(&self, input: &[u8], fingerprint: &mut Vec<u8>) -> bool {
        fingerprint.clear();
        let r = libinjectionrs::detect_sqli(input);
        if !r.is_injection() {
            return false;
        }
        if let Some(fp) = &r.fingerprint {
            // `as_bytes` is the whole NUL-padded array; `as_str` stops at NUL
            fingerprint.extend_from_slice(fp.as_str().as_bytes());
        }
        true
    }

    fn xss(&self, input: &[u8]) -> bool {
        libinjectionrs::detect_xss(input).is_injection()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_the_classics() {
        let impls: [&dyn Injection; 2] = [&LibinjectionRs, &Libinjection];
        for d in impls {
            let mut fp = Vec::new();
            assert!(d.sqli(b"1' or '1'='1", &mut fp));
            assert_eq!(fp, b"s&sos");
            assert!(!d.sqli(b"hello world", &mut fp));
            assert!(fp.is_empty());
            assert!(d.xss(b"<script>alert(1)</script>"));
            assert!(!d.xss(b"just text"));
        }
    }
}
