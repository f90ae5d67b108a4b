//! Source files and byte spans.
//!
//! Every diagnostic and every IR rule points back into a [`SourceMap`] by a
//! [`Span`]: a file id plus a byte range. Line and column are computed only when
//! a location is shown, so spans stay two words wide and cheap to copy.

use std::path::{Path, PathBuf};

/// Index of a file in a [`SourceMap`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct FileId(pub u32);

/// A byte range `start..end` in one source file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Span {
    /// The file.
    pub file: FileId,
    /// Byte offset of the first byte.
    pub start: u32,
    /// Byte offset just past the last byte.
    pub end: u32,
}

impl Span {
    /// A span of `file` from `start` to `end` (offsets beyond 4 GiB are clamped; `end` is at least `start`).
    pub fn new(file: FileId, start: usize, end: usize) -> Span {
        Span {
            file,
            start: clamp_u32(start),
            end: clamp_u32(end.max(start)),
        }
    }

    /// A span covering `self` and `other` (which must be in the same file).
    pub fn to(self, other: Span) -> Span {
        Span {
            file: self.file,
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }

    /// The sub-span `start..end`, relative to the start of `self`, clamped to `self`.
    pub fn sub(self, start: usize, end: usize) -> Span {
        let len = (self.end - self.start) as usize;
        let s = start.min(len);
        let e = end.clamp(s, len);
        Span {
            file: self.file,
            start: self.start + s as u32,
            end: self.start + e as u32,
        }
    }

    /// The span as a byte range, for slicing the file's text.
    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
}

fn clamp_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// A 1-based line and column; the column counts Unicode scalar values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineCol {
    /// Line number, from 1.
    pub line: usize,
    /// Column number, from 1, in Unicode scalar values.
    pub col: usize,
}

/// One loaded rule file.
#[derive(Debug)]
pub struct SourceFile {
    /// The path the file was read from (as given, or as resolved from an `Include`).
    pub path: PathBuf,
    /// The text, with invalid UTF-8 replaced by U+FFFD (a diagnostic says so).
    pub text: String,
    line_starts: Vec<usize>,
}

impl SourceFile {
    fn new(path: PathBuf, text: String) -> SourceFile {
        let mut line_starts = vec![0];
        line_starts.extend(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1));
        SourceFile {
            path,
            text,
            line_starts,
        }
    }

    /// The name shown in diagnostics.
    pub fn name(&self) -> String {
        self.path.display().to_string()
    }

    /// 0-based line index of a byte offset.
    pub fn line_index(&self, offset: usize) -> usize {
        match self.line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i - 1,
        }
    }

    /// Byte range of a 0-based line, without its line terminator.
    pub fn line_range(&self, line: usize) -> std::ops::Range<usize> {
        let start = self
            .line_starts
            .get(line)
            .copied()
            .unwrap_or(self.text.len());
        let mut end = self
            .line_starts
            .get(line + 1)
            .copied()
            .unwrap_or(self.text.len());
        let bytes = self.text.as_bytes();
        while end > start && matches!(bytes[end - 1], b'\n' | b'\r') {
            end -= 1;
        }
        start..end
    }

    /// How many lines the file has.
    pub fn line_count(&self) -> usize {
        self.line_starts.len()
    }

    /// 1-based line and column of a byte offset (clamped to the text).
    pub fn line_col(&self, offset: usize) -> LineCol {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.line_index(offset);
        let start = self.line_starts[line];
        let col = self.text[start..offset].chars().count() + 1;
        LineCol {
            line: line + 1,
            col,
        }
    }
}

/// All files read while compiling one configuration.
#[derive(Debug, Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    /// No files.
    pub fn new() -> SourceMap {
        SourceMap::default()
    }

    /// Adds a file and returns its id.
    pub fn add(&mut self, path: impl Into<PathBuf>, text: String) -> FileId {
        let id = FileId(clamp_u32(self.files.len()));
        self.files.push(SourceFile::new(path.into(), text));
        id
    }

    /// The file `id`. Ids come from [`SourceMap::add`] of this map; for an id
    /// that may be another map's, use [`SourceMap::get`].
    pub fn file(&self, id: FileId) -> &SourceFile {
        &self.files[id.0 as usize]
    }

    /// The file `id`, if this map has it.
    pub fn get(&self, id: FileId) -> Option<&SourceFile> {
        self.files.get(id.0 as usize)
    }

    /// Every file, in the order added.
    pub fn files(&self) -> impl Iterator<Item = (FileId, &SourceFile)> {
        self.files
            .iter()
            .enumerate()
            .map(|(i, f)| (FileId(i as u32), f))
    }

    /// The id of an already loaded file with this (canonical) path.
    pub fn find(&self, path: &Path) -> Option<FileId> {
        self.files
            .iter()
            .position(|f| f.path == path)
            .map(|i| FileId(i as u32))
    }

    /// The text of `span` (empty if it is out of range).
    pub fn snippet(&self, span: Span) -> &str {
        self.get(span.file)
            .and_then(|f| f.text.get(span.range()))
            .unwrap_or("")
    }

    /// The line and column where `span` starts.
    pub fn line_col(&self, span: Span) -> LineCol {
        self.file(span.file).line_col(span.start as usize)
    }

    /// `path:line:col` of the start of a span.
    pub fn location(&self, span: Span) -> String {
        let f = self.file(span.file);
        let lc = f.line_col(span.start as usize);
        format!("{}:{}:{}", f.name(), lc.line, lc.col)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_from_one_and_chars() {
        let mut sm = SourceMap::new();
        let id = sm.add("a.conf", "ab\nçd\r\nx".to_string());
        let f = sm.file(id);
        assert_eq!(f.line_col(0), LineCol { line: 1, col: 1 });
        assert_eq!(f.line_col(3), LineCol { line: 2, col: 1 });
        assert_eq!(f.line_col(5), LineCol { line: 2, col: 2 }); // after the 2-byte ç
        assert_eq!(f.line_col(8), LineCol { line: 3, col: 1 });
        assert_eq!(f.line_range(1), 3..6);
        assert_eq!(f.line_col(999), LineCol { line: 3, col: 2 });
    }

    #[test]
    fn sub_span_is_clamped() {
        let s = Span::new(FileId(0), 10, 20);
        assert_eq!(s.sub(2, 4), Span::new(FileId(0), 12, 14));
        assert_eq!(s.sub(8, 100), Span::new(FileId(0), 18, 20));
        assert_eq!(s.sub(100, 1), Span::new(FileId(0), 20, 20));
    }
}
