//! `@detectSQLi` and `@detectXSS`: the libinjection algorithm behind a small
//! trait, so that the implementation can be replaced (the fast-path work needs
//! an allocation-free one; see issue 4).

/// A libinjection-compatible detector.
pub trait Injection: Send + Sync + std::fmt::Debug {
    /// Whether `input` is SQL injection; on a hit, writes libinjection's
    /// fingerprint (e.g. `s&1c`) to `fingerprint` (cleared first), which
    /// `capture` stores in `TX:0`.
    fn sqli(&self, input: &[u8], fingerprint: &mut Vec<u8>) -> bool;

    /// Whether `input` is cross-site scripting.
    fn xss(&self, input: &[u8]) -> bool;
}

/// The `libinjectionrs` crate: a pure-Rust port of libinjection. It allocates
/// per call and differs from the C library on a few inputs (issue 4 tracks an
/// allocation-free implementation of our own).
#[derive(Clone, Copy, Debug, Default)]
pub struct LibinjectionRs;

impl Injection for LibinjectionRs {
    fn sqli(&self, input: &[u8], fingerprint: &mut Vec<u8>) -> bool {
        fingerprint.clear();
        let r = libinjectionrs::detect_sqli(input);
        if !r.is_injection() {
            return false;
        }
        if let Some(fp) = &r.fingerprint {
            fingerprint.extend_from_slice(fp.as_bytes());
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
        let d = LibinjectionRs;
        let mut fp = Vec::new();
        assert!(d.sqli(b"1' or '1'='1", &mut fp));
        assert!(!fp.is_empty());
        assert!(!d.sqli(b"hello world", &mut fp));
        assert!(d.xss(b"<script>alert(1)</script>"));
        assert!(!d.xss(b"just text"));
    }
}
