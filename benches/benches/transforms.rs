//! Cost of every transformation (`t:...`) through the engine's public
//! `waf_engine::transform::apply`, on two inputs each:
//!
//! - `plain`: a typical ~100-byte benign value (lower-case words and single
//!   spaces), which most transformations leave unchanged (their fast path);
//! - `active`: a ~1 KB value made of what the transformation rewrites
//!   (escapes, entities, comments, whitespace runs, mixed case, ...).
//!
//! Transformations are enumerated from `Transform::ALL`, so a new one is
//! benchmarked without editing this file (on a generic mixed input until it
//! gets its own case in `active_unit`). Ids: `transform/<name>/<input>`,
//! with `Throughput::Bytes` of the input.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use waf_engine::{apply_transform as apply, Transform};

/// ~100 bytes of benign text, as in a search box or a form field.
const PLAIN: &[u8] =
    b"the quick brown fox jumps over the lazy dog near the river bank on a sunny afternoon in june 2024";

/// Size the active inputs are built up to.
const ACTIVE_SIZE: usize = 1024;

/// Text with something for every transformation, for those without a case of
/// their own (hashes, encoders, `length`, parity, future transformations).
const MIXED: &[u8] = b"  Hello%20World+%3Cscript%3E &lt;b&gt;Caf\xc3\xa9&#39; \\x41\\n \
/* c */ a--b #x\0 ../Dir//./File.TXT 0x4142 \\3c \t\r\n  ";

/// One repetition of what `t` rewrites, and whether the case is specific to
/// `t` (a specific case must make `apply` report a change).
fn active_unit(t: Transform) -> (Vec<u8>, bool) {
    use Transform as T;
    let unit: &[u8] = match t {
        T::Base64Decode | T::Base64DecodeExt => return (encoded(T::Base64Encode, 3, 4), true),
        T::HexDecode => return (encoded(T::HexEncode, 1, 2), true),
        T::CmdLine => b"C:\\> \"P^i^N^g\" , ;  127.0.0.1  /C  'EcHo'  \\\"x\\\" ( calc ) ; ",
        T::CompressWhitespace | T::RemoveWhitespace => {
            b"first  name\t\tlast   name \r\n city\x0b\x0c  zip   code    \t"
        }
        T::CssDecode => {
            b"\\3c script\\3e alert\\28 1\\29 \\000041 \\\"x\\\" bg:url(\\6a avascript) "
        }
        T::EscapeSeqDecode => b"\\x3cscript\\x3e\\n\\t\\101\\102\\\\\\'\\\"\\a\\b\\f\\v\\r\\? ",
        T::HtmlEntityDecode => {
            b"&lt;script&gt;alert(&#39;x&#39;)&#x3C;/script&#x3E; &amp; &quot;q&quot; &nbsp; "
        }
        T::JsDecode => b"\\x3cscript\\x3e\\u0061lert(1)\\n\\t\\'\\\"\\\\\\101\\/ ",
        T::Lowercase | T::Uppercase => b"Hello World SELECT Name FROM Users WhErE Id=1 ",
        T::NormalisePath => b"/a/./b/../c//d/./e/../../f/g/./h/../",
        T::NormalisePathWin => b"\\a\\.\\b\\..\\c\\\\d/./e\\..\\..\\f\\g\\.\\h\\..\\",
        T::ParityZero7bit => b"caf\xc3\xa9 na\xc3\xafve \xe2\x82\xac10 \xe6\x97\xa5\xe6\x9c\xac ",
        T::RemoveComments | T::ReplaceComments => b"SELECT/* c */1/**/FROM<!-- x -->t/* y */ ",
        T::RemoveCommentsChar => b"a/*b*/c--d#e<!--f-->g/*h*/ ",
        T::RemoveNulls | T::ReplaceNulls => b"abc\0def\0\0ghi\0jkl\0 ",
        T::SqlHexDecode => b"0x414243 SELECT 0x3c7363726970743e, 0x27 ",
        T::Trim | T::TrimLeft | T::TrimRight => {
            // Whitespace at both ends only; the middle is plain text.
            let mut v = b" \t\r\n  ".to_vec();
            v.extend(PLAIN.iter().cycle().take(ACTIVE_SIZE - 16));
            v.extend_from_slice(b"  \t\r\n ");
            return (v, true);
        }
        T::UrlDecode => b"%3Cscript%3Ealert(%27x%27)%3C%2Fscript%3E+a%20b%2B%zz ",
        T::UrlDecodeUni => b"%u003Cscript%u003E%3C%uFF1C%u0041+a%20b%zz ",
        T::UrlEncode => b"a b<c>&d=e\"f'g \xc3\xa9 100% ",
        T::Utf8ToUnicode => {
            b"caf\xc3\xa9 na\xc3\xafve \xe2\x82\xac10 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 "
        }
        _ => return (MIXED.to_vec(), false),
    };
    (unit.to_vec(), true)
}

/// Text encoded with `enc` (`base64Encode`, `hexEncode`), in whole blocks
/// (`inb` input bytes give `outb` output bytes) of ~1 KB.
fn encoded(enc: Transform, inb: usize, outb: usize) -> Vec<u8> {
    let n = ACTIVE_SIZE / outb * inb;
    let text: Vec<u8> = MIXED.iter().copied().cycle().take(n).collect();
    let mut out = Vec::new();
    assert!(apply(enc, &text, &mut out), "{enc} changes its input");
    out
}

/// Whole repetitions of `unit` up to ~1 KB.
fn repeat_to_size(unit: &[u8]) -> Vec<u8> {
    if unit.len() >= ACTIVE_SIZE {
        return unit.to_vec();
    }
    let mut v = Vec::with_capacity(ACTIVE_SIZE);
    while v.len() + unit.len() <= ACTIVE_SIZE {
        v.extend_from_slice(unit);
    }
    v
}

fn active_input(t: Transform) -> Vec<u8> {
    let (unit, specific) = active_unit(t);
    let input = repeat_to_size(&unit);
    let mut out = Vec::new();
    if t != Transform::None && !apply(t, &input, &mut out) {
        let msg = format!("transform {t}: the active input leaves the value unchanged");
        if specific {
            panic!("{msg}");
        }
        eprintln!("warning: {msg}; add a case to active_unit()");
    }
    input
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("transform");
    for &t in Transform::ALL {
        let active = active_input(t);
        for (label, input) in [("plain", PLAIN), ("active", active.as_slice())] {
            let mut out = Vec::with_capacity(4 * input.len());
            g.throughput(Throughput::Bytes(input.len() as u64));
            g.bench_with_input(BenchmarkId::new(t.name(), label), input, |b, input| {
                b.iter(|| apply(t, black_box(input), &mut out))
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
