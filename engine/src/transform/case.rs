//! Byte-wise mappings: `lowercase`, `uppercase`, `parityEven7bit`,
//! `parityOdd7bit`, `parityZero7bit`.

/// `lowercase` changes only ASCII `A`-`Z`.
#[inline]
pub(super) fn lowercase_unchanged(input: &[u8]) -> bool {
    !input.iter().any(u8::is_ascii_uppercase)
}

/// `lowercase`: ASCII letters only (v3 uses `std::tolower` with the classic
/// locale), so `É` in Latin-1 or UTF-8 is left alone.
pub(super) fn lowercase(input: &[u8], out: &mut Vec<u8>) {
    out.extend(input.iter().map(u8::to_ascii_lowercase));
}

#[inline]
pub(super) fn uppercase_unchanged(input: &[u8]) -> bool {
    !input.iter().any(u8::is_ascii_lowercase)
}

/// `uppercase`: ASCII letters only.
pub(super) fn uppercase(input: &[u8], out: &mut Vec<u8>) {
    out.extend(input.iter().map(u8::to_ascii_uppercase));
}

/// Whether the byte has an odd number of set bits, **all eight** counted:
/// v3 computes the parity of the whole byte before it sets or clears bit 7.
#[inline]
fn odd_bits(b: u8) -> bool {
    b.count_ones() % 2 == 1
}

/// `parityEven7bit`: bit 7 is set when the byte (all 8 bits) has odd parity,
/// cleared otherwise.
pub(super) fn parity_even(input: &[u8], out: &mut Vec<u8>) {
    out.extend(
        input
            .iter()
            .map(|&b| if odd_bits(b) { b | 0x80 } else { b & 0x7f }),
    );
}

/// `parityOdd7bit`: bit 7 is cleared when the byte (all 8 bits) has odd
/// parity, set otherwise.
pub(super) fn parity_odd(input: &[u8], out: &mut Vec<u8>) {
    out.extend(
        input
            .iter()
            .map(|&b| if odd_bits(b) { b & 0x7f } else { b | 0x80 }),
    );
}

/// `parityZero7bit`: bit 7 cleared.
pub(super) fn parity_zero(input: &[u8], out: &mut Vec<u8>) {
    out.extend(input.iter().map(|&b| b & 0x7f));
}

#[cfg(test)]
mod tests {
    use super::super::tests::check;
    use super::super::Transform as T;

    #[test]
    fn lowercase() {
        check(
            T::Lowercase,
            &[
                (b"", b""),
                (b"abc123", b"abc123"),
                (b"ABC", b"abc"),
                (b"aBcD", b"abcd"),
                (b"@[`{", b"@[`{"),
                (b"\xc9\xc3\x89", b"\xc9\xc3\x89"),
                (b"A\0B", b"a\0b"),
                (b"SELECT * FROM T", b"select * from t"),
            ],
        );
    }

    #[test]
    fn uppercase() {
        check(
            T::Uppercase,
            &[
                (b"", b""),
                (b"ABC123", b"ABC123"),
                (b"abc", b"ABC"),
                (b"aBcD", b"ABCD"),
                (b"@[`{", b"@[`{"),
                (b"\xe9\xc3\xa9", b"\xe9\xc3\xa9"),
                (b"a\0b", b"A\0B"),
            ],
        );
    }

    #[test]
    fn parity_even() {
        check(
            T::ParityEven7bit,
            &[
                (b"", b""),
                (b"\x00", b"\x00"),
                (b"\x01", b"\x81"),
                (b"\x03", b"\x03"),
                (b"A", b"A"),
                (b"C", b"\xc3"),
                (b"\x80", b"\x80"),
                (b"\x81", b"\x01"),
                (b"\xff", b"\x7f"),
                (b"\xfe", b"\xfe"),
                (b"abc", b"\xe1\xe2c"),
            ],
        );
    }

    #[test]
    fn parity_odd() {
        check(
            T::ParityOdd7bit,
            &[
                (b"", b""),
                (b"\x00", b"\x80"),
                (b"\x01", b"\x01"),
                (b"\x03", b"\x83"),
                (b"A", b"\xc1"),
                (b"C", b"C"),
                (b"\x80", b"\x00"),
                (b"\x81", b"\x81"),
                (b"\xff", b"\xff"),
                (b"\xfe", b"\x7e"),
                (b"abc", b"ab\xe3"),
            ],
        );
    }

    #[test]
    fn parity_zero() {
        check(
            T::ParityZero7bit,
            &[
                (b"", b""),
                (b"abc", b"abc"),
                (b"\x80\xff\xc1", b"\x00\x7fA"),
            ],
        );
    }
}
