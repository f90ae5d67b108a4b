//! Reading configuration files and following `Include`.
//!
//! Includes are expanded in place, in the order Apache and libmodsecurity use:
//! a glob's matches sorted by name, relative paths resolved against the
//! directory of the including file. A file that includes itself, directly or
//! through others, is an error at the `Include` that closes the cycle.

use crate::ast::Item;
use crate::diag::{Code, Diagnostic, Diagnostics};
use crate::files::Files;
use crate::parse;
use crate::source::{FileId, SourceMap, Span};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// How deep includes may nest before we assume a runaway configuration.
pub const MAX_INCLUDE_DEPTH: usize = 64;

/// The parsed configuration: every file read, and the items in execution order.
#[derive(Debug, Default)]
pub struct Parsed {
    /// Every file read, includes included.
    pub sources: SourceMap,
    /// The configuration items, in execution order.
    pub items: Vec<Item>,
}

/// Parses configuration files (each as if `Include`d in turn).
pub fn load_files(paths: &[PathBuf], diags: &mut Diagnostics) -> Parsed {
    load_files_with(paths, &HashMap::new(), diags)
}

/// [`load_files`] through `files` (the disk, a recording of it, or a
/// compiled artifact's snapshot).
pub fn load_files_in(paths: &[PathBuf], files: &Files, diags: &mut Diagnostics) -> Parsed {
    load(paths, files, &HashMap::new(), diags)
}

/// [`load_files`], reading the text of some files from `overrides` (keyed by
/// canonical path) instead of the disk: `waf suggest --verify` compiles a
/// rewritten configuration this way, with every `Include` resolved as in the
/// original.
pub fn load_files_with(
    paths: &[PathBuf],
    overrides: &HashMap<PathBuf, String>,
    diags: &mut Diagnostics,
) -> Parsed {
    load(paths, &Files::disk(), overrides, diags)
}

fn load(
    paths: &[PathBuf],
    files: &Files,
    overrides: &HashMap<PathBuf, String>,
    diags: &mut Diagnostics,
) -> Parsed {
    let mut loader = Loader {
        parsed: Parsed::default(),
        stack: Vec::new(),
        shown: Vec::new(),
        overrides,
        files,
    };
    for p in paths {
        loader.load_path(p, None, diags);
    }
    loader.parsed
}

/// Parses configuration text held in memory; `name` is shown in diagnostics and
/// is the base for relative `Include`s and data files.
pub fn load_str(name: impl Into<PathBuf>, text: &str, diags: &mut Diagnostics) -> Parsed {
    load_str_in(name, text, &Files::disk(), diags)
}

/// [`load_str`] through `files` for what the text includes.
pub fn load_str_in(
    name: impl Into<PathBuf>,
    text: &str,
    files: &Files,
    diags: &mut Diagnostics,
) -> Parsed {
    let none = HashMap::new();
    let mut loader = Loader {
        parsed: Parsed::default(),
        stack: Vec::new(),
        shown: Vec::new(),
        overrides: &none,
        files,
    };
    let id = loader.parsed.sources.add(name, text.to_string());
    loader.parse_file(id, diags);
    loader.parsed
}

struct Loader<'o> {
    parsed: Parsed,
    /// Where files are read from.
    files: &'o Files,
    /// File texts to use instead of the disk's, by canonical path.
    overrides: &'o HashMap<PathBuf, String>,
    /// Canonical paths of the files being included, outermost first (to find cycles).
    stack: Vec<PathBuf>,
    /// The same files as they were named (to show the include chain).
    shown: Vec<PathBuf>,
}

impl Loader<'_> {
    /// Reads and parses one file. `from` is the `Include` that named it.
    fn load_path(&mut self, path: &Path, from: Option<Span>, diags: &mut Diagnostics) {
        let canonical = self
            .files
            .canonicalize(path)
            .unwrap_or_else(|_| path.to_path_buf());
        if let Some(at) = from {
            if self.stack.contains(&canonical) {
                diags.push(
                    Diagnostic::error(
                        Code::Include,
                        at,
                        format!("`{}` includes itself", path.display()),
                    )
                    .with_label("this Include closes a cycle")
                    .with_hint(format!("include chain: {}", self.chain(path))),
                );
                return;
            }
            if self.stack.len() >= MAX_INCLUDE_DEPTH {
                diags.push(
                    Diagnostic::error(
                        Code::Include,
                        at,
                        format!("includes nest deeper than {MAX_INCLUDE_DEPTH} files"),
                    )
                    .with_hint("flatten the include hierarchy"),
                );
                return;
            }
        }
        let read = match self.overrides.get(&canonical) {
            Some(text) => Ok(text.clone().into_bytes()),
            None => self.files.read(path),
        };
        let bytes = match read {
            Ok(b) => b,
            Err(e) => {
                let msg = format!("cannot read `{}`: {e}", path.display());
                match from {
                    Some(at) => diags.push(
                        Diagnostic::error(Code::Include, at, msg)
                            .with_label("included here")
                            .with_hint("relative paths are resolved against the directory of the including file"),
                    ),
                    None => diags.push(Diagnostic::error(Code::Include, Span::default(), msg).with_hint("check the path")),
                }
                return;
            }
        };
        if let Some(at) = binary_at(&bytes) {
            // Parsing binary data would report an error per "line" (tens of
            // thousands for an executable): one error says it all.
            let id = self.parsed.sources.add(path, String::new());
            diags.push(
                Diagnostic::error(
                    Code::Encoding,
                    Span::new(id, 0, 0),
                    format!("this file is not text (binary data at byte {at}); it was not parsed"),
                )
                .with_label("binary file")
                .with_hint("pass rule files (SecLang text); check the path and the file's type"),
            );
            return;
        }
        let (text, bad_utf8) = match String::from_utf8(bytes) {
            Ok(t) => (t, None),
            Err(e) => {
                let at = e.utf8_error().valid_up_to();
                (String::from_utf8_lossy(e.as_bytes()).into_owned(), Some(at))
            }
        };
        let id = self.parsed.sources.add(path, text);
        if let Some(at) = bad_utf8 {
            diags.push(
                Diagnostic::error(
                    Code::Encoding,
                    Span::new(id, at, at + 1),
                    "this file is not valid UTF-8",
                )
                .with_label("invalid byte sequence")
                .with_hint(
                    "rule files must be UTF-8; write non-ASCII bytes in patterns as `\\xHH`",
                ),
            );
        }
        self.stack.push(canonical);
        self.shown.push(path.to_path_buf());
        self.parse_file(id, diags);
        self.stack.pop();
        self.shown.pop();
    }

    fn chain(&self, last: &Path) -> String {
        self.shown
            .iter()
            .map(|p| p.display().to_string())
            .chain(std::iter::once(last.display().to_string()))
            .collect::<Vec<_>>()
            .join(" → ")
    }

    fn parse_file(&mut self, id: FileId, diags: &mut Diagnostics) {
        let directives = parse::directives(&self.parsed.sources, id, diags);
        let base = self
            .parsed
            .sources
            .file(id)
            .path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        for d in directives {
            if d.name.eq_ignore_ascii_case("Include") {
                self.include(&d, &base, diags);
                continue;
            }
            if let Some(item) = parse::item(&d, diags) {
                self.parsed.items.push(item);
            }
        }
    }

    fn include(&mut self, d: &crate::ast::Directive, base: &Path, diags: &mut Diagnostics) {
        let [arg] = d.args.as_slice() else {
            diags.push(
                Diagnostic::error(
                    Code::BadArgument,
                    d.span,
                    format!("`Include` takes 1 argument, found {}", d.args.len()),
                )
                .with_hint("usage: Include PATH (globs like `rules/*.conf` allowed)"),
            );
            return;
        };
        let pattern = arg.value.trim();
        let path = base.join(pattern);
        if !pattern.contains(['*', '?', '[']) {
            self.load_path(&path, Some(arg.span()), diags);
            return;
        }
        let text = path.to_string_lossy().into_owned();
        let matches = match self.files.glob(&text) {
            Ok(v) => v,
            Err(e) => {
                // `e.pos` counts from the start of the joined path; point into the argument.
                let lead = arg.value.len() - arg.value.trim_start().len();
                let at = match e.pos.checked_sub(text.len().saturating_sub(pattern.len())) {
                    Some(i) => arg.span_of(lead + i..lead + i + 1),
                    None => arg.span(),
                };
                diags.push(
                    Diagnostic::error(
                        Code::Include,
                        at,
                        format!("invalid glob pattern: {}", e.msg),
                    )
                    .with_label("here")
                    .with_hint("globs use `*`, `?` and `[...]` (close every `[`)"),
                );
                return;
            }
        };
        if matches.is_empty() {
            diags.push(
                Diagnostic::error(
                    Code::Include,
                    arg.span(),
                    format!("`{pattern}` matches no file"),
                )
                .with_label("nothing to include")
                .with_hint(format!(
                    "looked in `{}`",
                    path.parent().unwrap_or(base).display()
                )),
            );
        }
        for m in matches {
            self.load_path(&m, Some(arg.span()), diags);
        }
    }
}

/// How much of a file is looked at to tell text from binary data, as `git`
/// and `grep` do.
const SNIFF_LEN: usize = 8192;

/// Where a file shows itself to be binary data rather than (possibly
/// mis-encoded) text: the offset of a NUL byte in its first [`SNIFF_LEN`]
/// bytes, or of the first invalid UTF-8 sequence when more than one byte in
/// eight of that prefix is invalid (a Latin-1 rule file has a few such bytes,
/// and keeps its single `encoding` error and its parse).
fn binary_at(bytes: &[u8]) -> Option<usize> {
    let head = &bytes[..bytes.len().min(SNIFF_LEN)];
    if let Some(nul) = memchr::memchr(0, head) {
        return Some(nul);
    }
    let mut invalid = 0usize;
    let mut first = None;
    let mut rest = head;
    let mut offset = 0;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(_) => break,
            Err(e) => {
                let at = e.valid_up_to();
                // A sequence cut by the end of the prefix is not an error.
                let Some(len) = e.error_len() else { break };
                first.get_or_insert(offset + at);
                invalid += len;
                offset += at + len;
                rest = &rest[at + len..];
            }
        }
    }
    (invalid * 8 > head.len()).then_some(first).flatten()
}

#[cfg(test)]
mod tests {
    use super::binary_at;

    #[test]
    fn text_is_not_binary() {
        assert_eq!(binary_at(b"SecRule ARGS \"@rx a\" \"id:1\"\n"), None);
        assert_eq!(binary_at(b""), None);
        // A Latin-1 comment: a few invalid bytes stay an encoding matter.
        assert_eq!(binary_at(b"# caf\xe9 au lait\nSecRuleEngine On\n"), None);
        // A multi-byte character cut at the sniffing limit is not binary.
        let mut long = vec![b'#'; super::SNIFF_LEN - 1];
        long.extend_from_slice("é".as_bytes());
        assert_eq!(binary_at(&long), None);
    }

    #[test]
    fn binary_data_is_found() {
        assert_eq!(binary_at(b"\x7fELF\x02\x01\x01\x00\x00"), Some(7));
        let noise: Vec<u8> = (0..4096u32)
            .map(|i| 0x80 | (i.wrapping_mul(97) % 64) as u8)
            .collect();
        assert_eq!(binary_at(&noise), Some(0));
    }
}
