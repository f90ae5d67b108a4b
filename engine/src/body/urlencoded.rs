//! `application/x-www-form-urlencoded` bodies and `QUERY_STRING`, as v3's
//! `Transaction::extractArguments` parses them.
//!
//! * Split on the argument separator (`SecArgumentSeparator`, default `&`)
//!   the way `std::getline` splits (`utils::string::ssplit`): empty pieces
//!   are kept (`a=1&&b=2` has an argument with an empty name and value
//!   between), except a single trailing empty piece (`a=1&` has one
//!   argument); an empty input has none.
//! * Each piece splits at its first `=` (`ssplit_pair`): `a` is name `a` with
//!   an empty value, `=b` an empty name with value `b`, `a=b=c` name `a`,
//!   value `b=c`.
//! * Name and value are decoded with `urldecode_nonstrict_inplace`: `+` is a
//!   space, `%XX` with two hex digits is that byte, and any other `%` is kept
//!   as is and counts as invalid, which sets `URLENCODED_ERROR` to 1.
//! * `SecArgumentsLimit` ([`ArgLimit`]): once `ARGS` holds the limit, further
//!   arguments are skipped silently (v3 only writes a debug log line); the
//!   rest of the input is still scanned for `URLENCODED_ERROR`.
//!
//! No allocation: names and values without `%`/`+` are passed straight from
//! the input; the others are decoded into two reused buffers.

use super::output::{ArgLimit, ArgSource, BodySink};

/// Reusable decode buffers.
#[derive(Debug, Default)]
pub struct Scratch {
    name: Vec<u8>,
    value: Vec<u8>,
}

/// What a run found besides the arguments themselves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UrlencodedStats {
    /// An invalid `%` escape was seen (`URLENCODED_ERROR`).
    pub invalid_encoding: bool,
    /// Arguments handed to the sink.
    pub args_added: usize,
    /// Arguments dropped because of `SecArgumentsLimit`.
    pub args_skipped: usize,
}

/// Parses `input` and reports every argument to `sink` with `source`.
pub fn parse<S: BodySink + ?Sized>(
    input: &[u8],
    separator: u8,
    source: ArgSource,
    args: &mut ArgLimit,
    scratch: &mut Scratch,
    sink: &mut S,
) -> UrlencodedStats {
    let mut stats = UrlencodedStats::default();
    let mut start = 0;
    while start < input.len() {
        let end = memchr::memchr(separator, &input[start..]).map_or(input.len(), |i| start + i);
        let piece = &input[start..end];
        start = end + 1;

        let (name, value) = match memchr::memchr(b'=', piece) {
            Some(i) => (&piece[..i], &piece[i + 1..]),
            None => (piece, &piece[piece.len()..]),
        };
        if args.admit() {
            let (n, bad_n) = decode(name, &mut scratch.name);
            let (v, bad_v) = decode(value, &mut scratch.value);
            stats.invalid_encoding |= bad_n | bad_v;
            let name = if n { &scratch.name[..] } else { name };
            let value = if v { &scratch.value[..] } else { value };
            sink.arg(source, name, value);
            stats.args_added += 1;
        } else {
            stats.invalid_encoding |= has_invalid_escape(name) | has_invalid_escape(value);
            stats.args_skipped += 1;
        }
    }
    stats
}

/// Decodes `src` into `dst` if it needs decoding. Returns (whether `dst`
/// holds the result, whether an invalid `%` escape was seen).
fn decode(src: &[u8], dst: &mut Vec<u8>) -> (bool, bool) {
    if memchr::memchr2(b'%', b'+', src).is_none() {
        return (false, false);
    }
    dst.clear();
    (true, urldecode_nonstrict(src, dst))
}

/// v3's `urldecode_nonstrict_inplace` (without the in-place part): appends
/// the decoded `src` to `dst` and returns whether an invalid `%` escape was
/// seen (a `%` not followed by two hex digits, kept literally). The same
/// function as the `urlDecode` transformation, as in v3.
pub use crate::transform::url_decode as urldecode_nonstrict;

fn has_invalid_escape(src: &[u8]) -> bool {
    memchr::memchr_iter(b'%', src).any(|i| {
        !matches!((src.get(i + 1), src.get(i + 2)),
            (Some(h), Some(l)) if h.is_ascii_hexdigit() && l.is_ascii_hexdigit())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::testutil::Rec;
    use std::time::{Duration, Instant};
    use waf_test_support::XorShift;

    fn run(input: &[u8], sep: u8, max: Option<usize>) -> (Vec<(String, String)>, UrlencodedStats) {
        let mut rec = Rec::default();
        let mut scratch = Scratch::default();
        let mut limit = ArgLimit::new(max);
        let stats = parse(
            input,
            sep,
            ArgSource::UrlencodedBody,
            &mut limit,
            &mut scratch,
            &mut rec,
        );
        (rec.pairs(), stats)
    }

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    /// (input, expected args, URLENCODED_ERROR)
    type Case<'a> = (&'a [u8], &'a [(&'a str, &'a str)], bool);

    #[test]
    fn table() {
        let cases: &[Case] = &[
            (b"", &[], false),
            (b"a=1", &[("a", "1")], false),
            (b"a=1&b=2", &[("a", "1"), ("b", "2")], false),
            (b"a", &[("a", "")], false),
            (b"a=", &[("a", "")], false),
            (b"=b", &[("", "b")], false),
            (b"=", &[("", "")], false),
            (b"a=b=c", &[("a", "b=c")], false),
            // getline splitting: inner empty pieces are arguments, one
            // trailing empty piece is not.
            (b"a=1&&b=2", &[("a", "1"), ("", ""), ("b", "2")], false),
            (b"a=1&", &[("a", "1")], false),
            (b"a=1&&", &[("a", "1"), ("", "")], false),
            (b"&", &[("", "")], false),
            (b"&a", &[("", ""), ("a", "")], false),
            // decoding
            (b"a+b=c+d", &[("a b", "c d")], false),
            (b"%41%42=%63%64", &[("AB", "cd")], false),
            (b"a=%2B%26%3d", &[("a", "+&=")], false),
            (b"a%3Db=1", &[("a=b", "1")], false),
            (b"a=%00", &[("a", "\0")], false),
            // invalid escapes are kept and flagged
            (b"a=%", &[("a", "%")], true),
            (b"a=%4", &[("a", "%4")], true),
            (b"a=%zz", &[("a", "%zz")], true),
            (b"a=%4g1", &[("a", "%4g1")], true),
            (b"%=1", &[("%", "1")], true),
            (b"a=100%", &[("a", "100%")], true),
            (b"a=%%41", &[("a", "%A")], true),
            // no double decoding
            (b"a=%2541", &[("a", "%41")], false),
            // bytes are bytes
            (b"\xff=\xfe", &[("\u{fffd}", "\u{fffd}")], false),
        ];
        for (input, want, err) in cases {
            let (got, stats) = run(input, b'&', None);
            assert_eq!(
                got,
                pairs(want),
                "input {:?}",
                String::from_utf8_lossy(input)
            );
            assert_eq!(
                stats.invalid_encoding,
                *err,
                "input {:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn custom_separator() {
        let (got, _) = run(b"a=1;b=2&c=3", b';', None);
        assert_eq!(got, pairs(&[("a", "1"), ("b", "2&c=3")]));
    }

    #[test]
    fn raw_bytes_are_exact() {
        let mut rec = Rec::default();
        struct Raw(Vec<(Vec<u8>, Vec<u8>)>);
        impl BodySink for Raw {
            fn arg(&mut self, _: ArgSource, n: &[u8], v: &[u8]) {
                self.0.push((n.to_vec(), v.to_vec()));
            }
        }
        let mut raw = Raw(Vec::new());
        let mut scratch = Scratch::default();
        parse(
            b"%ff%FE=%80+\x81",
            b'&',
            ArgSource::QueryString,
            &mut ArgLimit::new(None),
            &mut scratch,
            &mut raw,
        );
        assert_eq!(raw.0, vec![(vec![0xff, 0xfe], vec![0x80, b' ', 0x81])]);
        // the source is passed through
        parse(
            b"q=1",
            b'&',
            ArgSource::QueryString,
            &mut ArgLimit::new(None),
            &mut scratch,
            &mut rec,
        );
        assert_eq!(rec.args[0].0, ArgSource::QueryString);
    }

    #[test]
    fn arguments_limit_skips_and_counts() {
        let (got, stats) = run(b"a=1&b=2&c=%zz&d=4", b'&', Some(2));
        assert_eq!(got, pairs(&[("a", "1"), ("b", "2")]));
        assert_eq!(stats.args_added, 2);
        assert_eq!(stats.args_skipped, 2);
        // an invalid escape in a skipped argument still sets URLENCODED_ERROR
        assert!(stats.invalid_encoding);
    }

    #[test]
    fn limit_counts_across_calls() {
        // QUERY_STRING arguments count towards the body's limit (v3 checks
        // the size of ARGS).
        let mut rec = Rec::default();
        let mut scratch = Scratch::default();
        let mut limit = ArgLimit::new(Some(3));
        parse(
            b"a=1&b=2",
            b'&',
            ArgSource::QueryString,
            &mut limit,
            &mut scratch,
            &mut rec,
        );
        let s = parse(
            b"c=3&d=4",
            b'&',
            ArgSource::UrlencodedBody,
            &mut limit,
            &mut scratch,
            &mut rec,
        );
        assert_eq!(rec.args.len(), 3);
        assert_eq!(s.args_skipped, 1);
    }

    // REQUEST-920-PROTOCOL-ENFORCEMENT 920240 (`@validateUrlEncoding` on the
    // body) relies on the raw body; the processor itself must not choke on
    // the invalid escapes used there.
    #[test]
    fn crs_920240_style_invalid_escapes() {
        let (got, stats) = run(b"param=%1G&x=%%", b'&', None);
        assert_eq!(got, pairs(&[("param", "%1G"), ("x", "%%")]));
        assert!(stats.invalid_encoding);
    }

    #[test]
    fn decode_matches_reference() {
        // Property: our decoder against a straightforward model.
        let mut rng = XorShift::from_state(0x1234_5678);
        let alphabet: &[&[u8]] = &[b"%", b"+", b"a", b"F", b"0", b"9", b"g", b"%4", b"%41"];
        let mut out = Vec::new();
        for _ in 0..5000 {
            let s = rng.bytes_from(alphabet, 24);
            out.clear();
            let invalid = urldecode_nonstrict(&s, &mut out);
            let mut model = Vec::new();
            let mut bad = false;
            let mut i = 0;
            while i < s.len() {
                if s[i] == b'%' && i + 2 < s.len() {
                    let h = s[i + 1] as char;
                    let l = s[i + 2] as char;
                    if let (Some(h), Some(l)) = (h.to_digit(16), l.to_digit(16)) {
                        model.push((h * 16 + l) as u8);
                        i += 3;
                        continue;
                    }
                    bad = true;
                    model.push(b'%');
                } else if s[i] == b'%' {
                    bad = true;
                    model.push(b'%');
                } else if s[i] == b'+' {
                    model.push(b' ');
                } else {
                    model.push(s[i]);
                }
                i += 1;
            }
            assert_eq!(out, model, "{s:?}");
            assert_eq!(invalid, bad, "{s:?}");
            assert_eq!(has_invalid_escape(&s), bad, "{s:?}");
        }
    }

    #[test]
    fn random_inputs_do_not_panic() {
        let mut rng = XorShift::from_state(42);
        let alphabet: &[&[u8]] = &[b"&", b"=", b"%", b"+", b"a", b"%2", b"%41", b";"];
        let mut scratch = Scratch::default();
        for i in 0..5000 {
            let s = rng.bytes_from(alphabet, 64);
            let mut rec = Rec::default();
            let mut limit = ArgLimit::new(if i % 2 == 0 { Some(3) } else { None });
            let stats = parse(
                &s,
                b'&',
                ArgSource::UrlencodedBody,
                &mut limit,
                &mut scratch,
                &mut rec,
            );
            assert_eq!(stats.args_added, rec.args.len());
            // every piece is either added or skipped
            let pieces = if s.is_empty() {
                0
            } else {
                s.iter().filter(|&&b| b == b'&').count()
                    + usize::from(*s.last().unwrap_or(&0) != b'&')
            };
            assert_eq!(stats.args_added + stats.args_skipped, pieces, "{s:?}");
        }
    }

    #[test]
    fn ten_megabytes_of_empty_args_is_fast() {
        let body = b"a=&".repeat(10 * 1024 * 1024 / 3);
        let start = Instant::now();
        let (got, stats) = run(&body, b'&', Some(1000));
        assert_eq!(got.len(), 1000);
        assert_eq!(stats.args_added + stats.args_skipped, body.len() / 3);
        // and without a limit every argument reaches the sink
        struct Count(usize);
        impl BodySink for Count {
            fn arg(&mut self, _: ArgSource, _: &[u8], _: &[u8]) {
                self.0 += 1;
            }
        }
        let mut c = Count(0);
        parse(
            &body,
            b'&',
            ArgSource::UrlencodedBody,
            &mut ArgLimit::new(None),
            &mut Scratch::default(),
            &mut c,
        );
        assert_eq!(c.0, body.len() / 3);
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "{:?}",
            start.elapsed()
        );
    }
}
