//! An ordered multimap of byte keys and values: the storage of every request
//! collection (`ARGS`, `REQUEST_HEADERS`, `TX`, ...).
//!
//! Order matters (ModSecurity reports and matches values in arrival order) and
//! keys repeat (a header or an argument sent twice), so this is a list, not a
//! map. Lookups compare keys ASCII-case-insensitively, as ModSecurity v3 does
//! for every collection except `ENV`/`XML`.

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

#[derive(Clone, Debug, Default)]
pub struct Collection {
    entries: Vec<Entry>,
}

impl Collection {
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    pub fn push(&mut self, key: &[u8], value: &[u8]) {
        self.entries.push(Entry {
            key: key.to_vec(),
            value: value.to_vec(),
        });
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Entry> {
        self.entries.iter()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The first value whose key equals `key`, ignoring ASCII case.
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        self.entries
            .iter()
            .find(|e| e.key.eq_ignore_ascii_case(key))
            .map(|e| e.value.as_slice())
    }

    /// Replaces the value of the first entry with this key, or appends one.
    pub fn set(&mut self, key: &[u8], value: &[u8]) {
        match self
            .entries
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

    /// Removes every entry with this key.
    pub fn remove(&mut self, key: &[u8]) {
        self.entries.retain(|e| !e.key.eq_ignore_ascii_case(key));
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
}
