//! libinjection's SQL word table: keyword → token type, and the fingerprint
//! blacklist (entries `0…` of type `F`).
//!
//! The data is ours, generated into `keywords_table.rs` from libinjection's
//! `sqlparse_data.json` as the `libinjectionrs` crate ships it
//! (`engine/tests/sqli_keywords.rs` regenerates it and checks it stays equal;
//! the crate is a dev-dependency only). Its 9,352 entries are identical to the
//! `sql_keywords[]` array of the C library bundled with ModSecurity v3.0.9
//! (`others/libinjection/src/libinjection_sqli_data.h`; checked entry by entry
//! when this module was written). The table is sorted by byte value and all its
//! words are upper case, which the tests below check, so a case-insensitive
//! lookup is a binary search that upper-cases the probe byte by byte: no copy,
//! no allocation.

use super::keywords_table::SQL_KEYWORDS;
use core::cmp::Ordering;

/// The token type of `word` (case-insensitive, ASCII only, as libinjection's
/// `cstrcasecmp`), or 0 when it is not in the table.
///
/// libinjection compares with signed `char`s, so its order differs from this
/// one for bytes >= 0x80; no table word contains such a byte (nor NUL), so an
/// exact match exists under one order if and only if under the other.
pub(super) fn lookup(word: &[u8]) -> u8 {
    let Some(&first) = word.first() else {
        return 0;
    };
    // Only the words with the same first byte.
    let c = usize::from(first.to_ascii_uppercase());
    let (lo, hi) = (usize::from(FIRST_BYTE[c]), usize::from(FIRST_BYTE[c + 1]));
    let Some(bucket) = SQL_KEYWORDS.get(lo..hi) else {
        return 0;
    };
    match bucket.binary_search_by(|(w, _)| cmp_upper(w.as_bytes(), word)) {
        Ok(i) => bucket.get(i).map_or(0, |&(_, token_type)| token_type),
        Err(_) => 0,
    }
}

/// `FIRST_BYTE[b]`: index of the first table word whose first byte is `b`
/// or more (computed at compile time from the crate's `const` table).
static FIRST_BYTE: [u16; 257] = first_byte_index();

const fn first_byte_index() -> [u16; 257] {
    assert!(SQL_KEYWORDS.len() < u16::MAX as usize);
    let mut index = [0u16; 257];
    let mut i = 0;
    let mut b = 0;
    while b <= 256 {
        while i < SQL_KEYWORDS.len() {
            let w = SQL_KEYWORDS[i].0.as_bytes();
            if !w.is_empty() && w[0] as usize >= b {
                break;
            }
            i += 1;
        }
        index[b] = i as u16;
        b += 1;
    }
    index
}

/// Compares a table word (upper case) with `key` upper-cased.
fn cmp_upper(table_word: &[u8], key: &[u8]) -> Ordering {
    for (&a, &b) in table_word.iter().zip(key) {
        match a.cmp(&b.to_ascii_uppercase()) {
            Ordering::Equal => {}
            o => return o,
        }
    }
    table_word.len().cmp(&key.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_upper_case_and_complete() {
        assert_eq!(SQL_KEYWORDS.len(), 9352, "libinjection data changed");
        for w in SQL_KEYWORDS.windows(2) {
            assert!(w[0].0.as_bytes() < w[1].0.as_bytes(), "{}", w[1].0);
        }
        for (word, _) in SQL_KEYWORDS {
            assert!(!word
                .bytes()
                .any(|b| b.is_ascii_lowercase() || b == 0 || b >= 0x80));
        }
        let fingerprints = SQL_KEYWORDS.iter().filter(|k| k.1 == b'F').count();
        assert_eq!(fingerprints, 8_367, "fingerprint count");
    }

    #[test]
    fn lookups() {
        assert_eq!(lookup(b"select"), b'E');
        assert_eq!(lookup(b"SeLeCt"), b'E');
        assert_eq!(lookup(b"union"), b'U');
        assert_eq!(lookup(b"union all"), b'U');
        assert_eq!(lookup(b"||"), b'&');
        assert_eq!(lookup(b"0s&1c"), b'F');
        assert_eq!(lookup(b"0X"), b'F');
        assert_eq!(lookup(b"hello"), 0);
        assert_eq!(lookup(b""), 0);
        assert_eq!(lookup(b"selec\xc3"), 0);
        assert_eq!(lookup(b"select\0"), 0);
    }
}
