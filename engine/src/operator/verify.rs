//! `@verifyCC`, `@verifyCPF`, `@verifySSN`, `@verifySVNR`: a regex finds
//! candidate numbers, a checksum confirms one.
//!
//! ModSecurity v3 (`src/operators/verify_*.cc`) is the reference, quirks
//! included, because rules written for it rely on what it accepts:
//!
//! * **Candidates.** `@verifyCC` runs the regex from every start offset of the
//!   value (PCRE's start offset: the bytes before it stay context) and checks
//!   each match it finds. The three others run it on every *suffix* of the
//!   value (`input.substr(i)`, so `^` and `\b` see the suffix's start as the
//!   start of the subject) and check every match in it. Both stop at the
//!   first candidate that verifies; it becomes `TX:0` with `capture`.
//!   For the suffix operators we check, for each start position, the match
//!   that begins there: every candidate v3 can accept is one of those, so the
//!   verdict is v3's; when several candidates verify, the capture may be a
//!   different one of them than v3's (v3 visits them in another order).
//!   Like v3, the last byte of a value is never a start position (its loop
//!   runs to `size() - 1`), so a one-byte value never matches.
//! * **Checksums** read the digits of the candidate and ignore everything
//!   else: Luhn for cards; CPF's two mod-11 check digits, after refusing
//!   `00000000000`, `01234567890` and the ten repeated-digit numbers; for SSN
//!   exactly nine digits, not all equal nor ascending by one, area not `000`,
//!   `666` or `740`-`999`, group not `00`, serial not `0000`; for SVNR the
//!   weighted sum (3, 7, 9 over the serial, 5, 8, 4, 2, 1, 6 over the birth
//!   date) mod 11 equals the fourth digit, after refusing v3's list of bad
//!   numbers, of which v3 checks only the first ten entries (so `8888888888`
//!   and `9999999999`, whose checksums hold, verify there and here).
//!
//! **Bounds.** A candidate is at most [`CANDIDATE_WINDOW`] bytes long: the
//! suffix operators look for a match in a window of that size from each
//! start, which keeps the work linear in the value's length whatever the
//! pattern (v3's loop is quadratic). A match that reaches the edge of a
//! window that is not the end of the value is not a candidate (it could be
//! cut short, or see a false end of input).

use waf_compiler::ir::Checksum;
use waf_compiler::rx::CompiledRx;

/// The longest candidate the suffix operators consider, in bytes. Real
/// numbers with their separators are a few dozen bytes.
pub(crate) const CANDIDATE_WINDOW: usize = 256;

/// The first candidate of `value` that `checksum` accepts.
pub(crate) fn find<'v>(checksum: Checksum, rx: &CompiledRx, value: &'v [u8]) -> Option<&'v [u8]> {
    let check: fn(&[u8]) -> bool = match checksum {
        Checksum::Luhn => return find_cc(rx, value),
        Checksum::Cpf => cpf,
        Checksum::Ssn => ssn,
        Checksum::Svnr => svnr,
    };
    let starts = value.len().saturating_sub(1);
    for start in 0..starts {
        let end = (start + CANDIDATE_WINDOW).min(value.len());
        let window = &value[start..end];
        let Some(len) = rx.prefix_match_end(window) else {
            continue;
        };
        if len == window.len() && end < value.len() {
            continue;
        }
        let candidate = &window[..len];
        if check(candidate) {
            return Some(candidate);
        }
    }
    None
}

/// `@verifyCC`: the leftmost match from each start offset; offsets up to a
/// match's start find that same match, so the next search starts after it.
fn find_cc<'v>(rx: &CompiledRx, value: &'v [u8]) -> Option<&'v [u8]> {
    let mut offset = 0;
    while offset < value.len() {
        let m = rx.find_from(value, offset)?;
        let candidate = &value[m.clone()];
        if luhn(candidate) {
            return Some(candidate);
        }
        offset = m.start + 1;
    }
    None
}

/// The decimal digits of `s`, as numbers, in order.
fn digits(s: &[u8]) -> impl Iterator<Item = u32> + '_ {
    s.iter()
        .filter(|b| b.is_ascii_digit())
        .map(|b| u32::from(b - b'0'))
}

/// The Luhn checksum over the digits of `s` (v3's `luhnVerify`): at least
/// one digit, and the weighted sum from the rightmost digit is a multiple
/// of 10.
pub(crate) fn luhn(s: &[u8]) -> bool {
    let mut count = 0u32;
    let mut sum = 0;
    for b in s.iter().rev().filter(|b| b.is_ascii_digit()) {
        let d = u32::from(b - b'0');
        sum += if count % 2 == 1 {
            let twice = d * 2;
            if twice > 9 {
                twice - 9
            } else {
                twice
            }
        } else {
            d
        };
        count += 1;
    }
    count >= 1 && sum.is_multiple_of(10)
}

/// Up to 11 (CPF), 10 (SVNR) or 9 (SSN) digits, as v3 collects them: the
/// first `n` digits of `s`, and how many digits `s` has in all.
fn first_digits<const N: usize>(s: &[u8]) -> ([u32; N], usize) {
    let mut out = [0; N];
    let mut count = 0;
    for d in digits(s) {
        if count < N {
            out[count] = d;
        }
        count += 1;
    }
    (out, count)
}

/// `@verifyCPF`: a Brazilian CPF (11 digits; v3 uses the first 11 of a
/// longer run), not one of v3's refused numbers, with both check digits.
pub(crate) fn cpf(s: &[u8]) -> bool {
    let (d, count) = first_digits::<11>(s);
    if count < 11 {
        return false;
    }
    let all_same = d.iter().all(|&x| x == d[0]);
    if all_same || d == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0] {
        return false;
    }
    let check = |len: usize| {
        let sum: u32 = d[..len]
            .iter()
            .zip((2..=len as u32 + 1).rev())
            .map(|(x, w)| x * w)
            .sum();
        match sum % 11 {
            0 | 1 => 0,
            r => 11 - r,
        }
    };
    let first = check(9);
    if d[9] != first {
        return false;
    }
    // The second check digit is computed over the first nine digits and the
    // *computed* first check digit, which equals d[9] here.
    d[10] == check(10)
}

/// `@verifySSN`: a US social security number as v3 accepts it.
pub(crate) fn ssn(s: &[u8]) -> bool {
    let (d, count) = first_digits::<9>(s);
    if count != 9 {
        return false;
    }
    let pairs = d.windows(2);
    let repeated = pairs.clone().filter(|w| w[0] == w[1]).count();
    let ascending = pairs.filter(|w| w[0] + 1 == w[1]).count();
    if repeated == 8 || ascending == 8 {
        return false;
    }
    let area = d[0] * 100 + d[1] * 10 + d[2];
    let group = d[3] * 10 + d[4];
    let serial = d[5] * 1000 + d[6] * 100 + d[7] * 10 + d[8];
    !(area == 0 || group == 0 || serial == 0 || area >= 740 || area == 666)
}

/// `@verifySVNR`: an Austrian social insurance number (10 digits; the first
/// 10 of a longer run).
pub(crate) fn svnr(s: &[u8]) -> bool {
    let (d, count) = first_digits::<10>(s);
    if count < 10 {
        return false;
    }
    // v3's list holds twelve numbers but its loop reads the first ten.
    const REFUSED: [[u32; 10]; 10] = [
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 0],
        [1; 10],
        [2; 10],
        [3; 10],
        [4; 10],
        [5; 10],
        [6; 10],
        [7; 10],
    ];
    if REFUSED.contains(&d) {
        return false;
    }
    const WEIGHTS: [u32; 10] = [3, 7, 9, 0, 5, 8, 4, 2, 1, 6];
    let sum: u32 = d.iter().zip(WEIGHTS).map(|(x, w)| x * w).sum();
    let check = match sum % 11 {
        10 => 0,
        r => r,
    };
    check == d[3]
}

#[cfg(test)]
mod tests {
    use super::*;
    use waf_compiler::rx::RxOptions;
    use waf_test_support::XorShift;

    fn rx(p: &str) -> CompiledRx {
        CompiledRx::compile(p, &RxOptions::default()).expect("pattern compiles")
    }

    fn text(d: &[u32]) -> String {
        d.iter().map(|x| char::from(b'0' + *x as u8)).collect()
    }

    /// A CPF with correct check digits, from nine random digits.
    fn valid_cpf(r: &mut XorShift) -> [u32; 11] {
        let mut d = [0u32; 11];
        for x in d.iter_mut().take(9) {
            *x = r.below(10) as u32;
        }
        for len in [9, 10] {
            let sum: u32 = (0..len).map(|i| d[i] * (len as u32 + 1 - i as u32)).sum();
            d[len] = match sum % 11 {
                0 | 1 => 0,
                r => 11 - r,
            };
        }
        d
    }

    /// An SVNR with a correct check digit (a sum of 10 mod 11 checks as 0,
    /// as in v3).
    fn valid_svnr(r: &mut XorShift) -> [u32; 10] {
        let mut d = [0u32; 10];
        for x in d.iter_mut() {
            *x = r.below(10) as u32;
        }
        let w = [3, 7, 9, 0, 5, 8, 4, 2, 1, 6];
        let sum: u32 = d.iter().zip(w).map(|(x, w)| x * w).sum();
        d[3] = match sum % 11 {
            10 => 0,
            r => r,
        };
        d
    }

    #[test]
    fn luhn_as_v3() {
        assert!(luhn(b"4111 1111 1111 1111"));
        assert!(luhn(b"4111-1111-1111-1111"));
        assert!(!luhn(b"4111 1111 1111 1112"));
        assert!(luhn(b"79927398713"));
        // v3 accepts a single 0 (one digit, sum 0) and refuses no digits.
        assert!(luhn(b"0"));
        assert!(!luhn(b"abc"));
        // Every valid number stops being valid when one digit changes.
        let mut r = XorShift::new(7);
        for _ in 0..1000 {
            let mut d: Vec<u32> = (0..15).map(|_| r.below(10) as u32).collect();
            let sum: u32 = d
                .iter()
                .rev()
                .enumerate()
                .map(|(i, &x)| {
                    if i % 2 == 0 {
                        (x * 2) % 9 + if x == 9 { 9 } else { 0 }
                    } else {
                        x
                    }
                })
                .sum();
            d.push((10 - sum % 10) % 10);
            let ok = text(&d);
            assert!(luhn(ok.as_bytes()), "{ok}");
            let i = r.below(16);
            d[i] = (d[i] + 1 + r.below(9) as u32) % 10;
            assert!(!luhn(text(&d).as_bytes()), "{}", text(&d));
        }
    }

    #[test]
    fn cpf_check_digits() {
        assert!(cpf(b"529.982.247-25"));
        assert!(!cpf(b"529.982.247-26"));
        assert!(!cpf(b"111.111.111-11"), "repeated digits are refused");
        assert!(!cpf(b"012.345.678-90"));
        assert!(!cpf(b"5299822472"), "ten digits");
        let mut r = XorShift::new(11);
        for _ in 0..1000 {
            let mut d = valid_cpf(&mut r);
            if d.iter().all(|&x| x == d[0]) {
                continue;
            }
            assert!(cpf(text(&d).as_bytes()), "{}", text(&d));
            let i = 9 + r.below(2);
            d[i] = (d[i] + 1 + r.below(9) as u32) % 10;
            assert!(!cpf(text(&d).as_bytes()), "{}", text(&d));
        }
    }

    #[test]
    fn ssn_rules() {
        assert!(ssn(b"123-45-6780"));
        assert!(!ssn(b"123-45-678"), "eight digits");
        assert!(!ssn(b"000-12-3456"), "area 000");
        assert!(!ssn(b"666-12-3456"), "area 666");
        assert!(!ssn(b"740-12-3456"), "area 740 and up");
        assert!(!ssn(b"123-00-4567"), "group 00");
        assert!(!ssn(b"123-45-0000"), "serial 0000");
        assert!(!ssn(b"222-22-2222"), "all digits equal");
        assert!(!ssn(b"123-45-6789"), "ascending by one");
        assert!(ssn(b"739-99-9998"));
    }

    #[test]
    fn svnr_checksum_and_v3_list() {
        // 1237 010180: serial 123, check 7, born 01.01.80.
        assert!(svnr(b"1237 010180"));
        assert!(!svnr(b"1238 010180"));
        assert!(!svnr(b"0000000000"));
        assert!(!svnr(b"7777777777"));
        // v3 reads only ten of its twelve refused numbers.
        assert!(svnr(b"8888888888"));
        assert!(svnr(b"9999999999"));
        let mut r = XorShift::new(13);
        for _ in 0..1000 {
            let mut d = valid_svnr(&mut r);
            if d.iter().all(|&x| x == d[0] && x < 8) {
                continue;
            }
            assert!(svnr(text(&d).as_bytes()), "{}", text(&d));
            d[3] = (d[3] + 1 + r.below(9) as u32) % 10;
            assert!(!svnr(text(&d).as_bytes()), "{}", text(&d));
        }
    }

    #[test]
    fn every_candidate_is_tried() {
        // A first candidate that fails the checksum does not hide a later one.
        let cc = rx(r"\d{4}[- ]?\d{4}[- ]?\d{4}[- ]?\d{4}");
        let v = b"order 4111 1111 1111 1112 paid with 4111 1111 1111 1111.";
        assert_eq!(
            find(Checksum::Luhn, &cc, v),
            Some(&b"4111 1111 1111 1111"[..])
        );
        assert_eq!(find(Checksum::Luhn, &cc, b"4111 1111 1111 1112"), None);
        let ssn_rx = rx(r"\d{3}-?\d{2}-?\d{4}");
        let v = b"ids 666-12-3456 and 123-45-6780";
        assert_eq!(find(Checksum::Ssn, &ssn_rx, v), Some(&b"123-45-6780"[..]));
        // Inside a longer digit run, the first offset whose nine digits
        // verify: area 666 is refused, 661 is not.
        assert_eq!(
            find(Checksum::Ssn, &ssn_rx, b"x6661234567801"),
            Some(&b"661234567"[..])
        );
    }

    #[test]
    fn suffixes_see_their_own_start() {
        // v3 runs the regex on each suffix: `^` matches at every position.
        let anchored = rx(r"^\d{3}-\d{2}-\d{4}$");
        assert_eq!(
            find(Checksum::Ssn, &anchored, b"ssn: 123-45-6780"),
            Some(&b"123-45-6780"[..])
        );
        // The last byte is never a start: a one-byte value never matches.
        let one = rx(r"\d");
        assert_eq!(find(Checksum::Cpf, &one, b"5"), None);
    }

    #[test]
    fn long_values_stay_linear_and_windows_do_not_invent_matches() {
        // A megabyte of digits: each start looks at one window at most.
        let digits_rx = rx(r"\d+$");
        let v = vec![b'1'; 1 << 20];
        assert_eq!(find(Checksum::Svnr, &digits_rx, &v), None);
        // `$` inside a window that is not the end of the value is not the end.
        let mut v = vec![b'7'; CANDIDATE_WINDOW * 2];
        v.extend_from_slice(b"x");
        assert_eq!(find(Checksum::Svnr, &rx(r"\d{10}$"), &v), None);
    }
}
