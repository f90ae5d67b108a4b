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
//! words are upper case, which the tests below check. A case-insensitive
//! lookup hashes the probe upper-cased byte by byte into an index of the
//! table computed at compile time (no copy, no allocation): one probe
//! and one comparison, where a binary search over the ~8,000 words of a
//! first byte read a dozen entries and their words, scattered over the
//! table's 220 KiB (a cache miss each, on every `@detectSQLi` word).

use super::keywords_table::SQL_KEYWORDS;
use core::cmp::Ordering;

/// The token type of `word` (case-insensitive, ASCII only, as libinjection's
/// `cstrcasecmp`), or 0 when it is not in the table.
///
/// libinjection compares with signed `char`s, so its order differs from this
/// one for bytes >= 0x80; no table word contains such a byte (nor NUL), so an
/// exact match exists under one order if and only if under the other.
pub(super) fn lookup(word: &[u8]) -> u8 {
    let index = &INDEX;
    let mask = INDEX_LEN - 1;
    let mut i = hash_upper(word) as usize & mask;
    loop {
        let slot = usize::from(index[i]);
        let Some(&(w, token_type)) = slot.checked_sub(1).and_then(|k| SQL_KEYWORDS.get(k)) else {
            return 0;
        };
        if cmp_upper(w.as_bytes(), word) == Ordering::Equal {
            return token_type;
        }
        i = (i + 1) & mask;
    }
}

/// Slots of [`INDEX`]: at most half of them taken.
const INDEX_LEN: usize = (SQL_KEYWORDS.len() * 2).next_power_of_two();

/// Open addressing over the table: its index + 1 (0 = empty), probed from
/// the word's hash (computed at compile time from the `const` table).
static INDEX: [u16; INDEX_LEN] = build_index();

const fn build_index() -> [u16; INDEX_LEN] {
    assert!(SQL_KEYWORDS.len() < u16::MAX as usize);
    let mut index = [0u16; INDEX_LEN];
    let mut k = 0;
    while k < SQL_KEYWORDS.len() {
        let mut i = hash_upper(SQL_KEYWORDS[k].0.as_bytes()) as usize & (INDEX_LEN - 1);
        while index[i] != 0 {
            i = (i + 1) & (INDEX_LEN - 1);
        }
        index[i] = k as u16 + 1;
        k += 1;
    }
    index
}

/// FNV-1a of `word` upper-cased, its bits mixed (the index is read by its
/// low bits).
const fn hash_upper(word: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < word.len() {
        h = (h ^ word[i].to_ascii_uppercase() as u64).wrapping_mul(0x0100_0000_01b3);
        i += 1;
    }
    (h ^ (h >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9) ^ (h >> 32)
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

    /// Every word is found in any case; a word off by a byte, a prefix
    /// or an extension of it is not, as with a binary search.
    #[test]
    fn the_index_finds_exactly_the_table_words() {
        let search = |word: &[u8]| {
            SQL_KEYWORDS
                .binary_search_by(|(w, _)| cmp_upper(w.as_bytes(), word))
                .map_or(0, |i| SQL_KEYWORDS[i].1)
        };
        for &(w, t) in SQL_KEYWORDS.iter() {
            let lower = w.to_ascii_lowercase();
            assert_eq!(lookup(w.as_bytes()), t, "{w}");
            assert_eq!(lookup(lower.as_bytes()), t, "{w}");
            let mut longer = lower.clone().into_bytes();
            longer.push(b'x');
            assert_eq!(lookup(&longer), search(&longer), "{w}x");
            let shorter = &lower.as_bytes()[..lower.len() - 1];
            assert_eq!(lookup(shorter), search(shorter), "{w} cut");
            let mut changed = lower.into_bytes();
            changed[0] ^= 0x01;
            assert_eq!(lookup(&changed), search(&changed), "{w} changed");
        }
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
