//! `@detectSQLi` and `@detectXSS`: the libinjection algorithm behind a small
//! trait, so that the implementation can be replaced.
//!
//! [`Libinjection`] (the default) is our own allocation-free implementation of
//! libinjection as bundled with ModSecurity v3.0.9 (modules `sqli`, and `xss`
//! on `html5`; the SQL word table through `keywords`). The agreement tests
//! (`engine/tests/injection_agreement.rs`) compare it with the
//! `libinjectionrs` crate, a dev-dependency, and with the C library when
//! available; the differences are listed there and in `docs/conformance.md`.

mod html5;
mod keywords;
#[rustfmt::skip]
mod keywords_table;
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
/// ModSecurity v3.0.9 (libinjection 3.10 line), SQL word and fingerprint
/// table included.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_the_classics() {
        {
            let d = Libinjection;
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
