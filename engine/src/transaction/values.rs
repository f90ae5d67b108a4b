//! Lists of variable values copied into one reused buffer.

use super::memo::Origin;
use waf_compiler::names::Variable as V;

/// One value: its variable, key and bytes (ranges into [`ValList::buf`]),
/// and where it comes from when it can be memoized.
#[derive(Clone, Copy, Debug)]
pub(super) struct ValItem {
    pub var: V,
    pub key: (usize, usize),
    pub value: (usize, usize),
    pub origin: Option<Origin>,
}

/// A reusable list of values.
#[derive(Debug, Default)]
pub(super) struct ValList {
    pub buf: Vec<u8>,
    pub items: Vec<ValItem>,
}

impl ValList {
    pub fn clear(&mut self) {
        self.buf.clear();
        self.items.clear();
    }

    pub(super) fn push(&mut self, var: V, key: &[u8], value: &[u8], origin: Option<Origin>) {
        let k = self.buf.len();
        self.buf.extend_from_slice(key);
        let v = self.buf.len();
        self.buf.extend_from_slice(value);
        self.items.push(ValItem {
            var,
            key: (k, v),
            value: (v, self.buf.len()),
            origin,
        });
    }

    /// Pushes a value written by `fill` into the buffer.
    pub(super) fn push_with(
        &mut self,
        var: V,
        origin: Option<Origin>,
        fill: impl FnOnce(&mut Vec<u8>),
    ) {
        let v = self.buf.len();
        fill(&mut self.buf);
        self.items.push(ValItem {
            var,
            key: (v, v),
            value: (v, self.buf.len()),
            origin,
        });
    }

    pub fn key(&self, i: usize) -> &[u8] {
        let (s, e) = self.items[i].key;
        &self.buf[s..e]
    }

    pub fn value(&self, i: usize) -> &[u8] {
        let (s, e) = self.items[i].value;
        &self.buf[s..e]
    }
}
