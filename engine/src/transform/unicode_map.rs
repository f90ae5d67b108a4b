//! The `SecUnicodeMapFile` table used by `urlDecodeUni`.

/// Code point -> byte table loaded by `SecUnicodeMapFile FILE CODEPAGE`.
///
/// v3 keeps an `int` per code point U+0000-U+FFFF, `-1` meaning "not
/// mapped"; `urlDecodeUni` writes the low byte of a mapped value. We store
/// that low byte, and "not mapped" separately.
#[derive(Clone)]
pub struct UnicodeMap {
    /// `None`: not mapped.
    table: Box<[Option<u8>]>,
}

impl std::fmt::Debug for UnicodeMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mapped = self.table.iter().filter(|e| e.is_some()).count();
        f.debug_struct("UnicodeMap")
            .field("mapped", &mapped)
            .finish()
    }
}

impl Default for UnicodeMap {
    fn default() -> Self {
        UnicodeMap::empty()
    }
}

/// C `strtol`-like parse of a leading run of digits (after optional
/// whitespace and sign), saturating; `None` when there is no digit.
fn c_parse(s: &[u8], radix: u32) -> Option<i64> {
    let mut i = 0;
    while i < s.len() && super::bytes::is_c_space(s[i]) {
        i += 1;
    }
    let mut neg = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        neg = s[i] == b'-';
        i += 1;
    }
    if radix == 16
        && s.get(i) == Some(&b'0')
        && matches!(s.get(i + 1), Some(b'x' | b'X'))
        && s.get(i + 2).is_some_and(|b| b.is_ascii_hexdigit())
    {
        i += 2;
    }
    let start = i;
    let mut v: i64 = 0;
    while let Some(d) = s.get(i).and_then(|&b| char::from(b).to_digit(radix)) {
        v = v
            .saturating_mul(i64::from(radix))
            .saturating_add(i64::from(d));
        i += 1;
    }
    if i == start {
        return None;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// C `sscanf("%x")` into an `int`: the value as a 32-bit int (wrapping).
fn scan_hex_int(s: &[u8]) -> Option<i32> {
    c_parse(s, 16).map(|v| v as u32 as i32)
}

impl UnicodeMap {
    /// A table with no entry (what v3 starts from before the presets).
    pub fn empty() -> UnicodeMap {
        UnicodeMap {
            table: vec![None; 0x1_0000].into_boxed_slice(),
        }
    }

    /// The byte for `code`, if mapped.
    #[inline]
    pub fn get(&self, code: u16) -> Option<u8> {
        self.table.get(usize::from(code)).copied().flatten()
    }

    /// Sets or clears an entry.
    pub fn set(&mut self, code: u16, byte: Option<u8>) {
        if let Some(e) = self.table.get_mut(usize::from(code)) {
            *e = byte;
        }
    }

    /// Builds the table as v3's `ConfigUnicodeMap::loadConfig` does from the
    /// contents of a `unicode.mapping` file and the configured code page
    /// (the second argument of `SecUnicodeMapFile`):
    ///
    /// * the four "dots" of RFC 3490 (U+3002, U+FF61, U+FF0E, U+002E) are
    ///   always mapped to `.`;
    /// * the file is split into whitespace-separated tokens; from the token
    ///   whose leading number equals the code page on, every token with a
    ///   `:` is a `CODE:BYTE` pair in hex; the first token without `:` after
    ///   a pair ends the section;
    /// * like v3's `sscanf`, an unparsable half keeps the value of the
    ///   previous pair, and a byte value of `-1`/`ffffffff` means "not
    ///   mapped"; other values keep their low byte.
    ///
    /// The contents end at the first NUL byte, as v3 reads them into a C
    /// string.
    ///
    /// Returns `None` when `code_page` is not positive: v3 then loads the
    /// table but never consults it.
    pub fn parse(contents: &[u8], code_page: f64) -> Option<UnicodeMap> {
        if code_page.is_nan() || code_page <= 0.0 {
            return None;
        }
        let mut map = UnicodeMap::empty();
        for code in [0x3002u16, 0xff61, 0xff0e, 0x002e] {
            map.set(code, Some(b'.'));
        }
        let text = match memchr::memchr(0, contents) {
            Some(z) => &contents[..z],
            None => contents,
        };
        let mut found = false;
        let mut processing = false;
        let mut code: i32 = 0;
        let mut value: i32 = 0;
        for token in text
            .split(|&b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
            .filter(|t| !t.is_empty())
        {
            // `unsigned int codepage = atol(p);`
            let cp = c_parse(token, 10).unwrap_or(0) as u32;
            if f64::from(cp) == code_page {
                found = true;
            }
            let has_colon = token.contains(&b':');
            if found && has_colon {
                processing = true;
                // strtok_r(mapping, ":"): skip leading ':', the first field
                // ends at the next ':', the rest follows it.
                let trimmed = match token.iter().position(|&b| b != b':') {
                    Some(s) => &token[s..],
                    None => &[][..],
                };
                let (first, rest) = match trimmed.iter().position(|&b| b == b':') {
                    Some(c) => (&trimmed[..c], &trimmed[c + 1..]),
                    None => (trimmed, &[][..]),
                };
                if let Some(c) = scan_hex_int(first) {
                    code = c;
                }
                if let Some(v) = scan_hex_int(rest) {
                    value = v;
                }
                if (0..=0xffff).contains(&code) {
                    let byte = if value == -1 { None } else { Some(value as u8) };
                    map.set(code as u16, byte);
                }
            }
            if processing && !has_colon {
                break;
            }
        }
        Some(map)
    }
}

/// These expectations are derived from v3's source
/// (`rules_set_properties.cc`), not from running v3.
#[cfg(test)]
mod tests {
    use super::UnicodeMap;

    #[test]
    fn presets() {
        let m = UnicodeMap::parse(b"", 20127.0).unwrap();
        assert_eq!(m.get(0x3002), Some(b'.'));
        assert_eq!(m.get(0xff61), Some(b'.'));
        assert_eq!(m.get(0xff0e), Some(b'.'));
        assert_eq!(m.get(0x002e), Some(b'.'));
        assert_eq!(m.get(0x0041), None);
        assert_eq!(UnicodeMap::empty().get(0x3002), None);
    }

    #[test]
    fn sections() {
        let file = b"(MAC - Roman)\n10000 00a0:20 00a1:21\n\n20127 (US-ASCII)\n00a0:41 00e9:65 ff21:0141\n\n28591\n00a0:42\n";
        let m = UnicodeMap::parse(file, 20127.0).unwrap();
        assert_eq!(m.get(0x00a0), Some(b'A'));
        assert_eq!(m.get(0x00e9), Some(b'e'));
        // Low byte of a wider value.
        assert_eq!(m.get(0xff21), Some(0x41));
        assert_eq!(m.get(0x00a1), None);
        let m = UnicodeMap::parse(file, 28591.0).unwrap();
        assert_eq!(m.get(0x00a0), Some(b'B'));
        // A code page that is not in the file: presets only.
        let m = UnicodeMap::parse(file, 1252.0).unwrap();
        assert_eq!(m.get(0x00a0), None);
        assert_eq!(m.get(0x3002), Some(b'.'));
    }

    #[test]
    fn odd_tokens() {
        // `-1` means "not mapped": it clears the preset.
        let m = UnicodeMap::parse(b"1 002e:-1", 1.0).unwrap();
        assert_eq!(m.get(0x002e), None);
        // An unparsable half keeps the previous pair's value.
        let m = UnicodeMap::parse(b"1 0041:61 0042:zz 10000:62", 1.0).unwrap();
        assert_eq!(m.get(0x0041), Some(b'a'));
        assert_eq!(m.get(0x0042), Some(b'a'));
        // Out-of-range code: ignored.
        assert_eq!(m.get(0x0000), None);
        // The contents end at a NUL byte.
        let m = UnicodeMap::parse(b"1 0041:61\0 0042:62", 1.0).unwrap();
        assert_eq!(m.get(0x0041), Some(b'a'));
        assert_eq!(m.get(0x0042), None);
        // A code page that is not positive: the map is not used.
        assert!(UnicodeMap::parse(b"0 0041:61", 0.0).is_none());
        assert!(UnicodeMap::parse(b"", -1.0).is_none());
        assert!(UnicodeMap::parse(b"", f64::NAN).is_none());
        // Never panics on junk.
        let _ = UnicodeMap::parse(
            b"::: : 1: :1 0x:0x 1 -:- \xff:\xff 99999999999999999999:1",
            1.0,
        );
    }
}
