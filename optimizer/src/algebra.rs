//! Laws of the transformations that rewrites may rely on.
//!
//! A transform-chain rewrite is *equivalent* only if the new chain computes
//! the same bytes as the old one on every input. Each law here is a claim of
//! that kind about two transformations, stated for ModSecurity v3's
//! definitions (ASCII case mapping, C-locale `isspace`, and v3's quirk that
//! `removeWhitespace` also drops `0xa0` and `0xc2`):
//!
//! * [`absorbed_before`]`(a, b)`: `b(a(x)) == b(x)`, so an `a` just before `b`
//!   can be dropped, or inserted to reach a chain other rules already compute;
//! * [`noop_after`]`(a, b)`: `b(a(x)) == a(x)`, so a `b` just after `a` can be
//!   dropped;
//! * [`commute`]`(a, b)`: `b(a(x)) == a(b(x))`, so the two can be swapped.
//!
//! The tables are deliberately short: every entry has a one-line argument in
//! its comment, and `tests::laws_hold_on_generated_inputs` checks each one
//! against the engine's implementations on generated inputs. A law that is
//! missing only costs a missed suggestion; a wrong one would change what a
//! rule matches.

use waf_compiler::names::Transform;
use Transform as T;

/// Transformations `t` with `t(t(x)) == t(x)`.
pub fn idempotent(t: Transform) -> bool {
    matches!(
        t,
        // Case maps: a second pass finds nothing left to map.
        T::Lowercase
            | T::Uppercase
            // After compression no whitespace run longer than one space, and
            // no other whitespace byte, remains.
            | T::CompressWhitespace
            | T::RemoveWhitespace
            | T::RemoveNulls
            // No NUL remains after the first pass.
            | T::ReplaceNulls
            | T::Trim
            | T::TrimLeft
            | T::TrimRight
    )
}

/// Transformations that map ASCII letters only, byte for byte.
fn is_case_map(t: Transform) -> bool {
    matches!(t, T::Lowercase | T::Uppercase)
}

/// Transformations that treat every byte other than whitespace, `0xa0`,
/// `0xc2` and NUL as opaque: they delete or replace only bytes of that set,
/// keep the others in order, and decide what to do without looking at
/// letters. A case map therefore commutes with them.
fn is_letter_blind(t: Transform) -> bool {
    matches!(
        t,
        T::CompressWhitespace
            | T::RemoveWhitespace
            | T::RemoveNulls
            | T::ReplaceNulls
            | T::Trim
            | T::TrimLeft
            | T::TrimRight
    )
}

/// `b(a(x)) == b(x)` for every `x`: `a` just before `b` changes nothing.
pub fn absorbed_before(a: Transform, b: Transform) -> bool {
    if a == b && idempotent(a) {
        return true;
    }
    matches!(
        (a, b),
        // The second case map overwrites every letter the first one mapped.
        (T::Uppercase, T::Lowercase)
            | (T::Lowercase, T::Uppercase)
            // removeWhitespace drops every byte that compressWhitespace or a
            // trim touches (C `isspace`), and the space they leave behind.
            | (T::CompressWhitespace, T::RemoveWhitespace)
            | (T::Trim, T::RemoveWhitespace)
            | (T::TrimLeft, T::RemoveWhitespace)
            | (T::TrimRight, T::RemoveWhitespace)
            // trim strips both ends anyway.
            | (T::TrimLeft, T::Trim)
            | (T::TrimRight, T::Trim)
    )
}

/// `b(a(x)) == a(x)` for every `x`: `b` just after `a` changes nothing.
pub fn noop_after(a: Transform, b: Transform) -> bool {
    if a == b && idempotent(a) {
        return true;
    }
    match (a, b) {
        // Nothing removeWhitespace leaves is whitespace.
        (T::RemoveWhitespace, T::CompressWhitespace | T::Trim | T::TrimLeft | T::TrimRight) => true,
        // Both ends are already trimmed.
        (T::Trim, T::TrimLeft | T::TrimRight) => true,
        // No NUL is left for the other NUL transformation.
        (T::RemoveNulls, T::ReplaceNulls) | (T::ReplaceNulls, T::RemoveNulls) => true,
        // `length` writes decimal digits: no letter, whitespace or NUL.
        (T::Length, b) => is_case_map(b) || is_letter_blind(b),
        // The case is already the one asked for.
        (T::Lowercase, T::Lowercase) | (T::Uppercase, T::Uppercase) => true,
        _ => false,
    }
}

/// `b(a(x)) == a(b(x))` for every `x`.
pub fn commute(a: Transform, b: Transform) -> bool {
    a == b || (is_case_map(a) && is_letter_blind(b)) || (is_case_map(b) && is_letter_blind(a))
}

/// Whether `t` maps upper-case ASCII letters the way `lowercase` does
/// after it, i.e. `t(lowercase(x)) == lowercase(t(x))`: a `lowercase`
/// followed only by such transformations still decides the case of the
/// final value.
pub fn commutes_with_lowercase(t: Transform) -> bool {
    commute(T::Lowercase, t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use waf_test_support::XorShift;

    const ALL: &[Transform] = &[
        T::Base64Decode,
        T::Base64DecodeExt,
        T::Base64Encode,
        T::CmdLine,
        T::CompressWhitespace,
        T::CssDecode,
        T::EscapeSeqDecode,
        T::HexDecode,
        T::HexEncode,
        T::HtmlEntityDecode,
        T::JsDecode,
        T::Length,
        T::Lowercase,
        T::Md5,
        T::NormalisePath,
        T::NormalisePathWin,
        T::ParityEven7bit,
        T::ParityOdd7bit,
        T::ParityZero7bit,
        T::RemoveComments,
        T::RemoveCommentsChar,
        T::RemoveNulls,
        T::RemoveWhitespace,
        T::ReplaceComments,
        T::ReplaceNulls,
        T::Sha1,
        T::SqlHexDecode,
        T::Trim,
        T::TrimLeft,
        T::TrimRight,
        T::Uppercase,
        T::UrlDecode,
        T::UrlDecodeUni,
        T::UrlEncode,
        T::Utf8ToUnicode,
    ];

    fn run(t: Transform, x: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        if waf_engine::apply_transform(t, x, &mut out) {
            out
        } else {
            x.to_vec()
        }
    }

    /// Inputs made of the bytes the laws are about: every whitespace byte,
    /// NUL, `0xa0`/`0xc2`, letters of both cases, digits and escapes.
    fn inputs() -> Vec<Vec<u8>> {
        const ALPHABET: &[u8] = b" \t\n\x0b\x0c\r\0\xa0\xc2aAzZqQ09%+/*-#;&\\'\"x\x80\xff";
        let mut out = vec![Vec::new()];
        let mut rng = XorShift::plain(0x9e37_79b9_7f4a_7c15);
        for n in 0..20_000 {
            let mut v = Vec::new();
            for _ in 0..(n % 17) {
                v.push(*rng.pick(ALPHABET));
            }
            out.push(v);
        }
        out
    }

    #[test]
    fn laws_hold_on_generated_inputs() {
        let xs = inputs();
        let mut checked = 0;
        for &a in ALL {
            for &b in ALL {
                let (ab, na, c) = (absorbed_before(a, b), noop_after(a, b), commute(a, b));
                if !(ab || na || c) {
                    continue;
                }
                for x in &xs {
                    let ba = run(b, &run(a, x));
                    if ab {
                        assert_eq!(ba, run(b, x), "{a:?} absorbed before {b:?} on {x:?}");
                    }
                    if na {
                        assert_eq!(ba, run(a, x), "{b:?} no-op after {a:?} on {x:?}");
                    }
                    if c {
                        assert_eq!(ba, run(a, &run(b, x)), "{a:?} commutes with {b:?} on {x:?}");
                    }
                }
                checked += 1;
            }
        }
        assert!(checked > 40, "only {checked} laws checked");
    }

    #[test]
    fn laws_that_do_not_hold_are_absent() {
        // Each of these looks plausible and is false in v3.
        assert!(!absorbed_before(T::ReplaceNulls, T::RemoveNulls));
        assert!(!commute(T::RemoveNulls, T::CompressWhitespace));
        assert!(!commute(T::Lowercase, T::UrlDecode));
        assert!(!commute(T::Lowercase, T::HtmlEntityDecode));
        assert!(!noop_after(T::Md5, T::Lowercase));
        assert!(!idempotent(T::UrlDecode));
    }
}
