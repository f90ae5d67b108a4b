//! Shared test helpers, and the properties every transformation must have:
//! the `apply` contract (fast paths agree with the full algorithm), no panic
//! on arbitrary bytes, and no trouble with long values.
//!
//! The table-driven cases live next to each implementation. Their expected
//! values were checked against libmodsecurity 3.0.9 (Debian's
//! `3.0.9-1+deb12u2`), by calling each transformation's `evaluate` on the
//! same bytes; the few exceptions say so in a comment.

use super::{apply, apply_with_map, full, Transform, UnicodeMap};
use waf_test_support::XorShift;

/// Lower-case hex of `bytes`, for readable assertion messages.
pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn show(bytes: &[u8]) -> String {
    format!("{:?} (hex {})", String::from_utf8_lossy(bytes), hex(bytes))
}

/// Checks `apply` (and the full algorithm alone) on `(input, expected)`
/// pairs, including the "unchanged" half of the contract.
pub(super) fn check(t: Transform, cases: &[(&[u8], &[u8])]) {
    check_impl(t, None, cases);
}

/// [`check`] for `urlDecodeUni` with a unicode map.
pub(super) fn check_with_map(t: Transform, map: &UnicodeMap, cases: &[(&[u8], &[u8])]) {
    check_impl(t, Some(map), cases);
}

fn check_impl(t: Transform, map: Option<&UnicodeMap>, cases: &[(&[u8], &[u8])]) {
    for &(input, expected) in cases {
        // `out` starts dirty: apply must clear it.
        let mut out = b"garbage".to_vec();
        let changed = apply_with_map(t, input, &mut out, map);
        if expected == input {
            assert!(
                !changed,
                "{t}: {} should be unchanged, got {}",
                show(input),
                show(&out)
            );
            assert!(out.is_empty(), "{t}: out must be empty when unchanged");
        } else {
            assert!(
                changed,
                "{t}: {} should give {}, but apply reported no change",
                show(input),
                show(expected)
            );
            assert_eq!(
                out,
                expected,
                "{t}: {} gave {}, expected {}",
                show(input),
                show(&out),
                show(expected)
            );
        }
        let mut reference = Vec::new();
        full(t, input, &mut reference, map);
        assert_eq!(reference, expected, "{t} (full algorithm): {}", show(input));
    }
}

/// The full algorithm, always run: what `apply` must agree with.
fn reference(t: Transform, input: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    full(t, input, &mut out, None);
    out
}

/// Bytes and fragments that mean something to some transformation.
const ALPHABET: &[u8] = b"%+uUxX0123456789aAbBcdefFgG&#;\\/.*-<!>'\"^ ,;\t\r\n\x0b\x0c\0=?~qlmnopstvw:9\xa0\xc2\xc3\xa9\x80\xbf\xed\xf0\xf5\xff";
const FRAGMENTS: &[&[u8]] = &[
    b"%u",
    b"%uff",
    b"%u00",
    b"%2",
    b"&#x",
    b"&#",
    b"&lt",
    b"&amp;",
    b"&nbsp",
    b"\\u",
    b"\\x",
    b"\\0",
    b"\\ff",
    b"/*",
    b"*/",
    b"<!--",
    b"-->",
    b"--",
    b"./",
    b"../",
    b"/..",
    b"//",
    b"0x",
    b"0X4",
    b"\xc3\xa9",
    b"\xe2\x82\xac",
    b"\xf0\x9f\x98\x80",
    b"\xc0\xaf",
    b"\xed\xa0\x80",
    b"QUJD",
    b"==",
    b"\r\n",
    b"\\\\",
];

fn gen_input(rng: &mut XorShift, buf: &mut Vec<u8>) {
    buf.clear();
    let len = match rng.below(20) {
        0 => 0,
        1..=14 => rng.below(24),
        15..=18 => rng.below(200),
        _ => rng.below(2000),
    };
    let mode = rng.below(4);
    while buf.len() < len {
        match mode {
            // Uniform random bytes.
            0 => buf.push(rng.byte()),
            // Interesting bytes.
            1 => buf.push(ALPHABET[rng.below(ALPHABET.len())]),
            // Mostly fragments.
            _ => {
                if rng.below(3) == 0 {
                    buf.push(ALPHABET[rng.below(ALPHABET.len())]);
                } else {
                    buf.extend_from_slice(FRAGMENTS[rng.below(FRAGMENTS.len())]);
                }
            }
        }
    }
}

/// For every transformation, ~20k seeded random inputs: no panic, and the
/// `apply` contract holds against the full algorithm (so every fast path
/// is right: it may only say "unchanged" when the result is the input).
#[test]
fn contract_and_no_panic_on_random_inputs() {
    let mut rng = XorShift::from_state(0x9e37_79b9_7f4a_7c15);
    let mut input = Vec::new();
    let mut out = Vec::new();
    for &t in Transform::ALL {
        let iterations = if matches!(t, Transform::Md5 | Transform::Sha1) {
            4_000
        } else {
            20_000
        };
        for _ in 0..iterations {
            gen_input(&mut rng, &mut input);
            let expected = reference(t, &input);
            out.extend_from_slice(b"dirty");
            if apply(t, &input, &mut out) {
                assert_eq!(
                    out,
                    expected,
                    "{t}: apply and the full algorithm disagree on {}",
                    show(&input)
                );
                assert_ne!(
                    out,
                    input,
                    "{t}: reported a change for an unchanged {}",
                    show(&input)
                );
            } else {
                assert!(out.is_empty(), "{t}: out not empty after 'unchanged'");
                assert_eq!(
                    expected,
                    input,
                    "{t}: fast path said unchanged for {}",
                    show(&input)
                );
            }
        }
    }
}

/// Every single byte and every pair of bytes from the alphabet, through
/// every transformation: catches boundary slips at the end of the value.
#[test]
fn contract_on_all_short_inputs() {
    let mut out = Vec::new();
    let mut inputs: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for &a in ALPHABET {
        for &b in ALPHABET {
            inputs.push(vec![a, b]);
        }
    }
    for &t in Transform::ALL {
        for input in &inputs {
            let expected = reference(t, input);
            if apply(t, input, &mut out) {
                assert_eq!(out, expected, "{t}: {}", show(input));
                assert_ne!(out, *input, "{t}: {}", show(input));
            } else {
                assert_eq!(expected, *input, "{t}: {}", show(input));
            }
        }
    }
}

/// `out` is reused across calls: results must not depend on what it held.
#[test]
fn out_buffer_is_reused() {
    let mut out = Vec::with_capacity(4);
    assert!(apply(Transform::UrlDecode, b"a%20b", &mut out));
    assert_eq!(out, b"a b");
    assert!(!apply(Transform::UrlDecode, b"plain", &mut out));
    assert!(out.is_empty());
    assert!(apply(Transform::Lowercase, b"ABC", &mut out));
    assert_eq!(out, b"abc");
    assert!(apply(Transform::HexEncode, b"\xff", &mut out));
    assert_eq!(out, b"ff");
}

/// `t:none` never changes anything.
#[test]
fn none() {
    check(
        Transform::None,
        &[(b"", b""), (b"abc", b"abc"), (b"%41\0\xff", b"%41\0\xff")],
    );
}

/// Keeps the compiler's claim in `names.rs` honest: the transformations it
/// says are the identity on `[a-z0-9]*` are, and the others are not.
#[test]
fn identity_on_lowercase_alnum_matches_names() {
    let mut rng = XorShift::from_state(42);
    let mut out = Vec::new();
    const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let samples: Vec<Vec<u8>> = (0..2000)
        .map(|_| {
            let len = rng.below(12);
            (0..len).map(|_| ALNUM[rng.below(ALNUM.len())]).collect()
        })
        .collect();
    for &t in Transform::ALL {
        let changes_some = samples.iter().any(|s| apply(t, s, &mut out));
        assert_eq!(
            !changes_some,
            t.is_identity_on_ascii_lowercase_alnum(),
            "{t}: names.rs says identity = {}",
            t.is_identity_on_ascii_lowercase_alnum()
        );
    }
}

/// `assert_eq!` for long values, without printing them.
#[track_caller]
fn same(got: &[u8], want: &[u8]) {
    if got != want {
        let at = got
            .iter()
            .zip(want)
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(want.len()));
        panic!(
            "lengths {} vs {}, first difference at {at}",
            got.len(),
            want.len()
        );
    }
}

/// Long values: linear time, no recursion, no overflow of any counter.
#[test]
fn long_inputs() {
    let n = 1 << 20;
    let mut out = Vec::new();

    let input = b"%41".repeat(n / 3);
    assert!(apply(Transform::UrlDecode, &input, &mut out));
    assert_eq!(out.len(), n / 3);
    assert!(out.iter().all(|&b| b == b'A'));

    let input = b"%uff21".repeat(n / 6);
    assert!(apply(Transform::UrlDecodeUni, &input, &mut out));
    same(&out, &b"A".repeat(n / 6));

    // One numeric entity with a million digits.
    let mut input = b"&#".to_vec();
    input.extend_from_slice(&vec![b'9'; n]);
    input.push(b';');
    assert!(apply(Transform::HtmlEntityDecode, &input, &mut out));
    same(&out, b"\xff");

    let input = b"a/".repeat(n / 2);
    assert!(!apply(Transform::NormalisePath, &input, &mut out));
    let mut input = b"/a".repeat(n / 4);
    input.extend(b"/..".repeat(n / 4));
    input.push(b'/');
    assert!(apply(Transform::NormalisePath, &input, &mut out));
    same(&out, b"/");

    let mut input = b"/*".to_vec();
    input.extend_from_slice(&vec![b'x'; n]);
    assert!(apply(Transform::ReplaceComments, &input, &mut out));
    same(&out, b" ");
    assert!(apply(Transform::RemoveComments, &input, &mut out));
    same(&out, b" ");
    // `/*/*/*/*/*/*`: comments `/*/*/` alternate with kept `*`.
    let input = b"/*".repeat(n / 2);
    assert!(apply(Transform::ReplaceComments, &input, &mut out));
    same(&out[..6], b" * * *");

    let input = vec![b' '; n];
    assert!(apply(Transform::CompressWhitespace, &input, &mut out));
    same(&out, b" ");
    assert!(apply(Transform::Trim, &input, &mut out));
    assert!(out.is_empty());
    assert!(apply(Transform::Length, &input, &mut out));
    same(&out, n.to_string().as_bytes());

    let input = "é".repeat(n / 2).into_bytes();
    assert!(apply(Transform::Utf8ToUnicode, &input, &mut out));
    same(&out, &b"%u00e9".repeat(n / 2));

    let input = b"QUJD".repeat(n / 4);
    assert!(apply(Transform::Base64Decode, &input, &mut out));
    same(&out, &b"ABC".repeat(n / 4));
    assert!(apply(Transform::Base64DecodeExt, &input, &mut out));
    same(&out, &b"ABC".repeat(n / 4));

    let input = vec![b'a'; n];
    assert!(apply(Transform::Base64Encode, &input, &mut out));
    assert_eq!(out.len(), n.div_ceil(3) * 4);
    assert!(apply(Transform::HexEncode, &input, &mut out));
    assert_eq!(out.len(), 2 * n);
    assert!(apply(Transform::Md5, &input, &mut out));
    assert_eq!(out.len(), 16);
    assert!(apply(Transform::Sha1, &input, &mut out));
    assert_eq!(out.len(), 20);
}
