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

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

#[derive(Clone, Debug, Default)]
pub struct Collection {
    /// `entries[..len]` are live; the rest are spare buffers for reuse.
    entries: Vec<Entry>,
    len: usize,
}

impl Collection {
    pub fn clear(&mut self) {
        self.len = 0;
    }

    pub fn push(&mut self, key: &[u8], value: &[u8]) {
        if self.len == self.entries.len() {
            self.entries.push(Entry::default());
        }
        let e = &mut self.entries[self.len];
        e.key.clear();
        e.key.extend_from_slice(key);
        e.value.clear();
        e.value.extend_from_slice(value);
        self.len += 1;
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

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first value whose key equals `key`, ignoring ASCII case.
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        self.iter()
            .find(|e| e.key.eq_ignore_ascii_case(key))
            .map(|e| e.value.as_slice())
    }

    /// Replaces the value of the first entry with this key, or appends one.
    pub fn set(&mut self, key: &[u8], value: &[u8]) {
        match self.entries[..self.len]
            .iter_mut()
            .find(|e| e.key.eq_ignore_ascii_case(key))
        {
            Some(e) => {
                e.value.clear();
                e.value.extend_from_slice(value);
            }
            None => self.push(key, value),
        }
    }

    /// Removes every entry with this key (order of the others kept; the
    /// removed entries' buffers stay in the pool).
    pub fn remove(&mut self, key: &[u8]) {
        let mut i = 0;
        while i < self.len {
            if self.entries[i].key.eq_ignore_ascii_case(key) {
                self.entries[i..self.len].rotate_left(1);
                self.len -= 1;
            } else {
                i += 1;
            }
        }
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
    fn clear_reuses_entries() {
        let mut c = Collection::default();
        c.push(b"a", b"1");
        c.push(b"b", b"2");
        c.clear();
        assert!(c.is_empty());
        assert_eq!(c.get(b"a"), None);
        c.push(b"c", b"3");
        assert_eq!(c.iter().count(), 1);
        assert_eq!(c.get(b"c"), Some(&b"3"[..]));
        c.remove(b"c");
        c.push(b"d", b"4");
        assert_eq!(c.entries().len(), 1);
        assert_eq!(c.entries()[0].key, b"d");
    }
}
