//! An ordered multimap of byte keys and values: the storage of every request
//! collection (`ARGS`, `REQUEST_HEADERS`, `TX`, ...).
//!
//! Order matters (ModSecurity reports and matches values in arrival order) and
//! keys repeat (a header or an argument sent twice), so this is a list, not a
//! map. Lookups compare keys ASCII-case-insensitively, as ModSecurity v3 does
//! for every collection except `ENV`/`XML`.
//!
//! Entries are pooled: [`Collection::clear`] keeps every entry's buffers, and
//! later pushes reuse them, so a transaction reused for request after request
//! stops allocating once its collections have grown to the traffic's shape.

use waf_compiler::ir::KeySelectors;

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Entry {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    /// What the program's selector regexes answer for the key, where its
    /// writer knew it ([`Collection::value_mut_with`]; none otherwise).
    pub selectors: KeySelectors,
}

impl Clone for Entry {
    fn clone(&self) -> Entry {
        Entry {
            key: self.key.clone(),
            value: self.value.clone(),
            selectors: self.selectors,
        }
    }

    /// Into this entry's buffers (a pooled entry keeps its capacity).
    fn clone_from(&mut self, source: &Entry) {
        self.key.clone_from(&source.key);
        self.value.clone_from(&source.value);
        self.selectors = source.selectors;
    }
}

#[derive(Clone, Debug, Default)]
pub struct Collection {
    /// `entries[..len]` are live; the rest are spare buffers for reuse.
    entries: Vec<Entry>,
    len: usize,
    /// Open addressing by case-folded key: entry index + 1 of the first live
    /// entry with that key, 0 = empty. Keeps `get`/`set` constant-time on
    /// big collections (CRS keeps ~100 `TX` variables and reads or writes
    /// them hundreds of times per request).
    index: Vec<u32>,
    /// Per live entry: index + 1 of the next entry with the same key, 0 for
    /// none. Reading `TX:score` visits only its entries, not every entry
    /// after the first (CRS's `TX` has ~150 by the end of phase 2, and rules
    /// read it hundreds of times per request).
    next_same: Vec<u32>,
    /// Per live entry that is the first of its key's chain: the index of
    /// the chain's last entry, where the next entry with that key is
    /// linked. Without it each append walked the chain, and n entries
    /// under one key took time in n² to file: a keyless collection's
    /// (`MULTIPART_NAME`, `XML://@*`: all under the empty key), 0.33 s for
    /// a multipart body of 16,000 parts, 2.8 s for an XML body of 40,000
    /// attributes; `ARGS` of a body repeating one name 8,000 times, 0.18 s.
    last_same: Vec<u32>,
}

/// A collection frozen for copying: its keys and values back to back in
/// one buffer, with its index ([`Collection::pack`],
/// [`Collection::copy_from_packed`]).
///
/// A static block's `TX` is copied into every transaction that reaches
/// the block (CRS: ~45 variables). From a [`Collection`], each entry's
/// key and value are allocations of their own, cold lines apart when a
/// proxy runs the engine; packed, the copy reads a few consecutive lines.
#[derive(Debug, Default)]
pub struct Packed {
    bytes: Vec<u8>,
    /// Per entry: where its key starts, where its value starts (the key's
    /// end) and ends, and its selector answers.
    spans: Vec<(u32, u32, u32, KeySelectors)>,
    index: Vec<u32>,
    next_same: Vec<u32>,
    last_same: Vec<u32>,
}

impl Collection {
    /// This collection's entries and index, packed (see [`Packed`]).
    pub fn pack(&self) -> Packed {
        let live = self.entries();
        let mut p = Packed {
            bytes: Vec::with_capacity(live.iter().map(|e| e.key.len() + e.value.len()).sum()),
            spans: Vec::with_capacity(live.len()),
            index: self.index.clone(),
            next_same: self.next_same[..self.len].to_vec(),
            last_same: self.last_same[..self.len].to_vec(),
        };
        for e in live {
            let start = p.bytes.len() as u32;
            p.bytes.extend_from_slice(&e.key);
            let mid = p.bytes.len() as u32;
            p.bytes.extend_from_slice(&e.value);
            p.spans
                .push((start, mid, p.bytes.len() as u32, e.selectors));
        }
        p
    }

    /// Becomes a copy of the collection `p` was packed from (its entries
    /// in order, and its index), in this collection's buffers: once they
    /// have grown to its size, without allocating.
    pub fn copy_from_packed(&mut self, p: &Packed) {
        let n = p.spans.len();
        if self.entries.len() < n {
            self.entries.resize_with(n, Entry::default);
        }
        for (e, &(start, mid, end, selectors)) in self.entries.iter_mut().zip(&p.spans) {
            let (start, mid, end) = (start as usize, mid as usize, end as usize);
            e.key.clear();
            e.key
                .extend_from_slice(p.bytes.get(start..mid).unwrap_or_default());
            e.value.clear();
            e.value
                .extend_from_slice(p.bytes.get(mid..end).unwrap_or_default());
            e.selectors = selectors;
        }
        self.len = n;
        self.index.clone_from(&p.index);
        // One per entry, pooled ones included (unlinked until reused).
        self.next_same.clear();
        self.next_same.extend_from_slice(&p.next_same);
        self.next_same.resize(self.entries.len(), 0);
        self.last_same.clear();
        self.last_same.extend_from_slice(&p.last_same);
        self.last_same.resize(self.entries.len(), 0);
    }

    pub fn clear(&mut self) {
        // An empty collection's index is already all zeros (every path to
        // `len == 0` zeroes it): `MATCHED_VARS` is cleared before every
        // rule and is empty for most, so skip the fill.
        if self.len == 0 {
            return;
        }
        self.len = 0;
        self.index.fill(0);
    }

    pub fn push(&mut self, key: &[u8], value: &[u8]) {
        let new = self.append(key, value);
        if (self.len * 2) > self.index.len() {
            // Links every same-key chain, the new entry's too.
            self.reindex();
        } else {
            self.link(new);
        }
    }

    /// Stores a live entry after the others, not indexed yet; its index.
    fn append(&mut self, key: &[u8], value: &[u8]) -> usize {
        if self.len == self.entries.len() {
            self.entries.push(Entry::default());
            self.next_same.push(0);
            self.last_same.push(0);
        }
        let i = self.len;
        let e = &mut self.entries[i];
        e.key.clear();
        e.key.extend_from_slice(key);
        e.value.clear();
        e.value.extend_from_slice(value);
        e.selectors = KeySelectors::default();
        self.len += 1;
        self.next_same[i] = 0;
        self.last_same[i] = i as u32;
        i
    }

    /// Indexes entry `i` (appended: the last with its key) and appends it
    /// to its key's chain (one hash, one probe sequence for both).
    fn link(&mut self, i: usize) {
        match self.index_insert(i) {
            Some(first) => {
                let last = self.last_same[first] as usize;
                self.next_same[last] = i as u32 + 1;
                self.last_same[first] = i as u32;
            }
            None => self.last_same[i] = i as u32,
        }
    }

    /// Rebuilds the index (growing it to at least twice the live entries).
    fn reindex(&mut self) {
        let want = (self.len * 2).next_power_of_two().max(16);
        if self.index.len() < want {
            self.index.resize(want, 0);
        }
        self.index.fill(0);
        for i in 0..self.len {
            self.next_same[i] = 0;
            self.link(i);
        }
    }

    /// Indexes entry `i`; returns the first entry with the same key if
    /// there is one (which stays the one the index finds).
    fn index_insert(&mut self, i: usize) -> Option<usize> {
        match self.probe(&self.entries[i].key) {
            Ok(first) => Some(first),
            Err(slot) => {
                self.index[slot] = i as u32 + 1;
                None
            }
        }
    }

    /// Where `key` is in the (non-empty) index: `Ok` with the first live
    /// entry that has it, or `Err` with the empty slot its probe sequence
    /// ended on.
    fn probe(&self, key: &[u8]) -> Result<usize, usize> {
        let mask = self.index.len() - 1;
        let mut h = crate::hash::bytes_ascii_nocase(key) as usize & mask;
        loop {
            match self.index[h] {
                0 => return Err(h),
                j => {
                    let j = (j - 1) as usize;
                    if self.entries[j].key.eq_ignore_ascii_case(key) {
                        return Ok(j);
                    }
                    h = (h + 1) & mask;
                }
            }
        }
    }

    /// The index of the first live entry with this key.
    fn position(&self, key: &[u8]) -> Option<usize> {
        if self.index.is_empty() {
            return None;
        }
        self.probe(key).ok()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Entry> {
        self.entries[..self.len].iter()
    }

    /// The live entries, in order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries[..self.len]
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The entries with this key (ASCII case ignored), in order.
    pub fn with_key(&self, key: &[u8]) -> SameKey<'_> {
        SameKey {
            c: self,
            next: self.position(key),
        }
    }

    /// The first value whose key equals `key`, ignoring ASCII case.
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        self.position(key).map(|i| self.entries[i].value.as_slice())
    }

    /// Replaces the value of the first entry with this key, or appends one.
    pub fn set(&mut self, key: &[u8], value: &[u8]) {
        let v = self.value_mut(key);
        v.clear();
        v.extend_from_slice(value);
    }

    /// The value of the first entry with this key, appending an entry with
    /// an empty value if there is none: one hash and one probe sequence
    /// for both (`setvar` runs hundreds of times per CRS request, most of
    /// them on new keys).
    pub fn value_mut(&mut self, key: &[u8]) -> &mut Vec<u8> {
        let i = self.position_mut(key);
        &mut self.entries[i].value
    }

    /// [`Collection::value_mut`], keeping with a new entry what the selector
    /// regexes answer for its key (an entry found keeps its own: a key equal
    /// but for ASCII case gets the same answers from case-insensitive
    /// regexes).
    pub fn value_mut_with(&mut self, key: &[u8], selectors: KeySelectors) -> &mut Vec<u8> {
        let len = self.len;
        let i = self.position_mut(key);
        let e = &mut self.entries[i];
        if self.len > len {
            e.selectors = selectors;
        }
        &mut e.value
    }

    /// [`Collection::value_mut`]'s entry: its index among the live entries.
    pub fn position_mut(&mut self, key: &[u8]) -> usize {
        if self.index.is_empty() {
            self.push(key, b"");
            self.len - 1
        } else {
            match self.probe(key) {
                Ok(first) => first,
                // A new key, and the index has room (as `push` would find):
                // it takes the empty slot the probe ended on.
                Err(slot) if (self.len + 1) * 2 <= self.index.len() => {
                    let i = self.append(key, b"");
                    self.index[slot] = i as u32 + 1;
                    i
                }
                Err(_) => {
                    self.push(key, b"");
                    self.len - 1
                }
            }
        }
    }

    /// The value of live entry `i`, if its key is `key` (compared exactly:
    /// for callers that remember where a key was).
    pub fn value_at(&self, i: usize, key: &[u8]) -> Option<&[u8]> {
        self.entries[..self.len]
            .get(i)
            .filter(|e| e.key == key)
            .map(|e| e.value.as_slice())
    }

    /// [`Collection::value_at`], to be changed in place.
    pub fn value_at_mut(&mut self, i: usize, key: &[u8]) -> Option<&mut Vec<u8>> {
        self.entries[..self.len]
            .get_mut(i)
            .filter(|e| e.key == key)
            .map(|e| &mut e.value)
    }

    /// Removes every entry with this key (order of the others kept; the
    /// removed entries' buffers stay in the pool).
    pub fn remove(&mut self, key: &[u8]) {
        if self.position(key).is_none() {
            return;
        }
        // The kept entries move down in order, in one pass (not a shift of
        // the rest per removed entry).
        let mut kept = 0;
        for i in 0..self.len {
            if !self.entries[i].key.eq_ignore_ascii_case(key) {
                self.entries.swap(kept, i);
                kept += 1;
            }
        }
        self.len = kept;
        self.reindex();
    }
}

/// The entries of one key ([`Collection::with_key`]).
pub struct SameKey<'a> {
    c: &'a Collection,
    next: Option<usize>,
}

impl<'a> SameKey<'a> {
    /// The next entry with its position among the collection's entries.
    pub fn next_indexed(&mut self) -> Option<(usize, &'a Entry)> {
        let i = self.next?;
        let n = self.c.next_same[i];
        self.next = (n != 0).then(|| (n - 1) as usize);
        Some((i, &self.c.entries[i]))
    }
}

impl<'a> Iterator for SameKey<'a> {
    type Item = &'a Entry;

    fn next(&mut self) -> Option<&'a Entry> {
        self.next_indexed().map(|(_, e)| e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_case_insensitive_and_ordered() {
        let mut c = Collection::default();
        c.push(b"Host", b"a");
        c.push(b"X", b"1");
        c.push(b"host", b"b");
        assert_eq!(c.get(b"HOST"), Some(&b"a"[..]));
        c.set(b"x", b"2");
        assert_eq!(c.get(b"X"), Some(&b"2"[..]));
        c.remove(b"HoSt");
        assert_eq!(c.len(), 1);
        c.set(b"new", b"v");
        assert_eq!(
            c.iter().map(|e| e.key.as_slice()).collect::<Vec<_>>(),
            [&b"X"[..], b"new"]
        );
    }

    #[test]
    fn a_key_s_entries_come_with_their_positions_as_a_scan_finds_them() {
        // Enough entries to grow the index several times, keys repeated in
        // different cases.
        let mut c = Collection::default();
        for i in 0..200u32 {
            let key = match i % 4 {
                0 => b"Cookie".to_vec(),
                1 => b"cookie".to_vec(),
                _ => format!("k{}", i % 7).into_bytes(),
            };
            c.push(&key, &i.to_le_bytes());
        }
        for key in [&b"COOKIE"[..], b"k3", b"K5", b"absent"] {
            let scanned: Vec<usize> = c
                .iter()
                .enumerate()
                .filter(|(_, e)| e.key.eq_ignore_ascii_case(key))
                .map(|(i, _)| i)
                .collect();
            let mut same = c.with_key(key);
            let mut indexed = Vec::new();
            while let Some((i, e)) = same.next_indexed() {
                assert!(std::ptr::eq(e, &c.entries()[i]));
                indexed.push(i);
            }
            assert_eq!(indexed, scanned, "{key:?}");
        }
    }

    #[test]
    fn a_packed_copy_is_the_same_collection() {
        let mut src = Collection::default();
        for i in 0..40 {
            src.push(
                format!("Key{}", i % 13).as_bytes(),
                format!("v{i}").as_bytes(),
            );
        }
        src.push(b"", b"");
        src.push(b"empty-value", b"");
        *src.value_mut_with(
            b"sel",
            KeySelectors {
                known: 3,
                matched: 1,
            },
        ) = b"x".to_vec();
        // A destination with more pooled entries than the source, and
        // entries of its own, left behind by an earlier request.
        let mut dst = Collection::default();
        for i in 0..60 {
            dst.push(format!("old{i}").as_bytes(), b"stale");
        }
        let mut want = src.clone();
        dst.copy_from_packed(&src.pack());
        assert_eq!(dst.entries(), want.entries());
        for k in ["key0", "KEY12", "", "empty-value", "sel", "old1", "missing"] {
            let got: Vec<_> = dst
                .with_key(k.as_bytes())
                .map(|e| e.value.clone())
                .collect();
            let exp: Vec<_> = want
                .with_key(k.as_bytes())
                .map(|e| e.value.clone())
                .collect();
            assert_eq!(got, exp, "{k}");
        }
        // Still a collection that grows as one.
        dst.push(b"key0", b"new");
        want.push(b"key0", b"new");
        assert_eq!(
            dst.with_key(b"key0").count(),
            want.with_key(b"key0").count()
        );
        assert_eq!(dst.get(b"SEL"), Some(&b"x"[..]));
    }

    #[test]
    fn a_keyless_collection_chains_all_its_entries_in_order() {
        // As `MULTIPART_NAME` and `XML://@*` are filled: every entry under
        // the empty key, the index growing many times, other keys between.
        let mut c = Collection::default();
        for i in 0..5000u32 {
            c.push(b"", i.to_string().as_bytes());
            if i % 1000 == 0 {
                c.push(b"other", b"o");
            }
        }
        let values = |c: &Collection, k: &[u8]| -> Vec<Vec<u8>> {
            c.with_key(k).map(|e| e.value.clone()).collect()
        };
        let want: Vec<Vec<u8>> = (0..5000u32).map(|i| i.to_string().into_bytes()).collect();
        assert_eq!(values(&c, b""), want);
        // A packed copy goes on chaining at the end.
        let mut copy = Collection::default();
        copy.copy_from_packed(&c.pack());
        copy.push(b"", b"last");
        let mut longer = want.clone();
        longer.push(b"last".to_vec());
        assert_eq!(values(&copy, b""), longer);
        // So does the collection once another key is removed.
        c.remove(b"OTHER");
        assert_eq!(c.len(), 5000);
        c.push(b"", b"last");
        assert_eq!(values(&c, b""), longer);
        assert_eq!(c.get(b"other"), None);
    }

    #[test]
    fn clear_reuses_entries() {
        let mut c = Collection::default();
        c.push(b"a", b"1");
        c.push(b"b", b"2");
        c.clear();
        assert_eq!(c.len(), 0);
        assert_eq!(c.get(b"a"), None);
        c.push(b"c", b"3");
        assert_eq!(c.iter().count(), 1);
        assert_eq!(c.get(b"c"), Some(&b"3"[..]));
        c.remove(b"c");
        c.push(b"d", b"4");
        assert_eq!(c.entries().len(), 1);
        assert_eq!(c.entries()[0].key, b"d");
        // Emptied by a removal, then cleared (a no-op on the index).
        c.remove(b"d");
        c.clear();
        c.clear();
        assert_eq!(c.get(b"d"), None);
        c.push(b"d", b"5");
        c.push(b"D", b"6");
        assert_eq!(c.with_key(b"d").count(), 2);
        assert_eq!(c.get(b"d"), Some(&b"5"[..]));
    }

    #[test]
    fn index_agrees_with_a_linear_search() {
        let mut c = Collection::default();
        for round in 0..3 {
            c.clear();
            for i in 0..200u32 {
                let k = format!("Key{}", i % 70);
                c.push(k.as_bytes(), i.to_string().as_bytes());
                if i % 7 == 0 {
                    c.set(format!("KEY{}", i % 13).as_bytes(), b"s");
                }
                if i % 11 == 0 {
                    // New keys (most) and existing ones, by the one-probe path.
                    let v = c.value_mut(format!("new{}", i % 17).as_bytes());
                    v.push(b'x');
                }
                if i % 31 == 0 {
                    c.remove(format!("key{}", i % 5).as_bytes());
                }
            }
            for q in 0..100 {
                let k = if q < 80 {
                    format!("kEy{q}")
                } else {
                    format!("NEW{}", q - 80)
                };
                let linear = c
                    .iter()
                    .find(|e| e.key.eq_ignore_ascii_case(k.as_bytes()))
                    .map(|e| e.value.as_slice());
                assert_eq!(c.get(k.as_bytes()), linear, "round {round} key {k}");
                let all: Vec<&Entry> = c
                    .iter()
                    .filter(|e| e.key.eq_ignore_ascii_case(k.as_bytes()))
                    .collect();
                let chained: Vec<&Entry> = c.with_key(k.as_bytes()).collect();
                assert_eq!(chained, all, "round {round} key {k}");
            }
        }
    }
}
