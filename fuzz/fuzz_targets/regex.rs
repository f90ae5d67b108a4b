//! The `@rx` layer: arbitrary bytes → pattern → `translate` and
//! `CompiledRx::compile` (default options); when it compiles, `is_match` and
//! `captures` on a few fixed haystacks.
//!
//! Checks besides "no panic": errors carry a byte range inside the pattern,
//! `translate` and `compile` agree on Unsupported errors, and the dense-DFA
//! `is_match` agrees with the meta regex `captures` on every haystack.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::ops::Range;
use waf_compiler::rx::{translate, CompiledRx, RxError, RxOptions};

const HAYSTACKS: &[&[u8]] = &[
    b"",
    b"a",
    b"GET /index.php?id=1' OR '1'='1 HTTP/1.1\r\nHost: example.com\r\n\r\n",
    b"<script>alert(document.cookie)</script>",
    b"../../etc/passwd\x00.png",
    b"\xff\xfe\x00\x80\xc2\xa0\xe2\x80\xa8 \t\n\r\x0b\x0cABCabc_019",
    b"SELECT * FROM users WHERE name = 'admin' -- \nunion select 1,2,3",
    b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab",
];

fn check_range(pattern: &str, e: &RxError) {
    if let Some(r) = e.range() {
        assert!(
            r.start <= r.end && r.end <= pattern.len(),
            "error range {r:?} outside the pattern ({} bytes): {e}",
            pattern.len()
        );
    }
    let _ = e.to_string();
}

fuzz_target!(|data: &[u8]| {
    let Ok(pattern) = std::str::from_utf8(data) else {
        return;
    };
    let translated = translate(pattern);
    if let Err(e) = &translated {
        check_range(pattern, e);
    }
    match CompiledRx::compile(pattern, &RxOptions::default()) {
        Ok(rx) => {
            assert!(
                translated.is_ok(),
                "compile succeeded where translate failed: {translated:?}"
            );
            let _ = rx.strategy();
            let _ = rx.required_literals().min_len();
            let n = rx.group_count();
            let mut slots: Vec<Option<Range<usize>>> = vec![None; n + 1];
            for h in HAYSTACKS {
                let m = rx.is_match(h);
                let c = rx.captures(h, &mut slots);
                assert_eq!(
                    m,
                    c,
                    "is_match and captures disagree on {:?}",
                    String::from_utf8_lossy(h)
                );
                if c {
                    let whole = slots[0].clone().expect("a match has group 0");
                    assert!(whole.start <= whole.end && whole.end <= h.len());
                    for s in slots.iter().flatten() {
                        assert!(s.start <= s.end && s.end <= h.len());
                    }
                }
                assert!(slots[n].is_none(), "slot past group_count was filled");
            }
        }
        Err(e) => {
            check_range(pattern, &e);
            if let (Ok(_), RxError::Unsupported { .. }) = (&translated, &e) {
                panic!("translate accepted what compile calls unsupported: {e}");
            }
        }
    }
});
