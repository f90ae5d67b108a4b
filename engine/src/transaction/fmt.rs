//! Small text helpers of variables and actions: numbers, dates and
//! variable names written into reused buffers without allocating.

use waf_compiler::names::Variable as V;

/// Writes `n` in decimal into `buf`; returns the length.
pub(super) fn write_u64(buf: &mut [u8; 20], n: u64) -> usize {
    let mut b = itoa::Buffer::new();
    let text = b.format(n).as_bytes();
    // 20 bytes hold any u64.
    buf[..text.len()].copy_from_slice(text);
    text.len()
}
/// Writes `n` in decimal into `out` (appending). `TX` numbers are read as
/// text ~15 times per CRS request: `itoa` writes them in tens of
/// instructions, `write!` through `core::fmt` in ~250.
pub(super) fn push_i64(out: &mut Vec<u8>, n: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}
/// Writes `n` in decimal into `out` (appending).
pub(super) fn push_u64(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}
/// (year, month, day, hour, minute, second, weekday) in UTC from epoch seconds.
pub(super) fn civil(secs: u64) -> (u64, u64, u64, u64, u64, u64, u64) {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    let wday = (days + 4) % 7;
    // Howard Hinnant's days-from-civil inverse.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if mo <= 2 { y + 1 } else { y };
    (y as u64, mo as u64, d as u64, h, m, s, wday)
}

/// Appends `b` as text, invalid UTF-8 replaced by U+FFFD (as
/// `String::from_utf8_lossy`, without its allocation).
#[inline]
pub(super) fn push_lossy(out: &mut String, b: &[u8]) {
    // Short ASCII values (the `0`, `1` and empty values CRS's bookkeeping
    // rules match, ~60 per request) are copied in place, without a call.
    if b.len() <= 8 && b.is_ascii() {
        out.extend(b.iter().map(|&c| char::from(c)));
        return;
    }
    push_lossy_long(out, b);
}

/// [`push_lossy`] for longer or non-ASCII values.
#[inline(never)]
fn push_lossy_long(out: &mut String, b: &[u8]) {
    // Most values are valid (mostly ASCII): validated a word at a time.
    if let Ok(s) = std::str::from_utf8(b) {
        out.push_str(s);
        return;
    }
    for chunk in b.utf8_chunks() {
        out.push_str(chunk.valid());
        if !chunk.invalid().is_empty() {
            out.push(char::REPLACEMENT_CHARACTER);
        }
    }
}

/// `VAR` or `VAR:key`, as ModSecurity names a matched value.
pub(crate) fn push_name(out: &mut String, var: V, key: &[u8]) {
    out.push_str(var.name());
    if !key.is_empty() {
        out.push(':');
        push_lossy(out, key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_as_format_writes_them() {
        for n in [0, 1, 9, 10, 99, 100, -1, -10, 12_345, i64::MAX, i64::MIN] {
            let mut out = b"x=".to_vec();
            push_i64(&mut out, n);
            assert_eq!(out, format!("x={n}").into_bytes(), "{n}");
        }
        for n in [0, 7, 10, 1_000_000, u64::MAX] {
            let mut buf = [0u8; 20];
            let len = write_u64(&mut buf, n);
            assert_eq!(&buf[..len], n.to_string().as_bytes(), "{n}");
        }
    }

    #[test]
    fn push_lossy_appends_what_from_utf8_lossy_makes() {
        let cases: &[&[u8]] = &[
            b"",
            b"0",
            b"12345678",
            b"123456789",
            b"caf\xc3\xa9",
            b"\xc3",
            b"ab\xffcd",
            b"\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xf7",
            "a longer value, é and all".as_bytes(),
        ];
        for &b in cases {
            let mut out = String::from("x=");
            push_lossy(&mut out, b);
            assert_eq!(out, format!("x={}", String::from_utf8_lossy(b)), "{b:?}");
        }
    }
}
