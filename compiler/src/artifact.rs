//! Compiled-ruleset artifacts (`waf compile -o rules.wafc`).
//!
//! Most of a load from source is spent on regexes: the literal analysis
//! that feeds the prefilter, and the dense DFAs (built on a background
//! thread after the ruleset is ready). An artifact keeps their results, so
//! that a server, a reload or a connector loads them instead:
//!
//! * every file the compilation read (configuration, includes with what
//!   their globs matched, data files), so the artifact compiles on a
//!   machine that has none of them, to the same program, with the same
//!   file names and lines in diagnostics and log lines;
//! * per `@rx` pattern, its prefilter literals, its number of capture
//!   groups, and its dense DFA serialized by regex-automata
//!   (`to_bytes_little_endian`, read back with `from_bytes`, which checks
//!   it), or the fact that it does not fit the budget.
//!
//! The rules are parsed and lowered again from the embedded texts, which
//! keeps the artifact independent of the IR's layout. Patterns with a DFA
//! get their meta regex (captures only) later, on a background thread;
//! patterns without one get it at load.
//!
//! # Format (version 1, little-endian)
//!
//! ```text
//! 0   magic "WAFC\r\n\x1a\n"
//! 8   u32 format version
//! 12  u32 CRC-32 (IEEE) of every byte from offset 24 on
//! 16  u64 total length in bytes
//! 24  str  made by ("waf-compiler <version>"); must be this build's
//!     entry: u8 0 = files (u32 n, n × path) | 1 = text (path name, str text)
//!     reads: u32 n, n × (path, bytes); canonical: u32 n, n × (path, path);
//!     globs: u32 n, n × (str, u32 m, m × path)
//!     regexes: u32 n, n × (str pattern, u32 groups,
//!              u8 0 = no literals | 1 = u32 m, m × bytes,
//!              u8 0 = no DFA | 1 = u64 offset, u64 length)
//!     u64 length of the DFA area; zero padding to a multiple of 8
//!     DFA area (offsets are from its start, each a multiple of 8)
//! ```
//!
//! `str`, `bytes` and `path` are a u32 length and the bytes. A file that
//! does not start with the magic is not an artifact (it is read as rules);
//! one that does but fails any check is refused with a diagnostic, never
//! half-used.

use crate::diag::{Code, Diagnostic, Diagnostics};
use crate::files::{Files, Snapshot};
use crate::ir::Program;
use crate::lower::{Compiled, Options};
use crate::rx::batch::Batch;
use crate::rx::{Precompiled, PrecompiledRx, RequiredLiterals, RxOptions};
use crate::source::{SourceMap, Span};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The first bytes of every artifact.
pub const MAGIC: &[u8; 8] = b"WAFC\r\n\x1a\n";

/// The format this build reads and writes.
pub const FORMAT: u32 = 1;

const HEADER_LEN: usize = 24;

/// Who made an artifact: only the same build's compiler reads it (the
/// lowering and the serialized DFAs must be the ones it would produce).
pub fn made_by() -> String {
    format!("waf-compiler {}", env!("CARGO_PKG_VERSION"))
}

/// What was compiled: files in order, or one text with its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// Configuration files, in order (as `compile_files` takes them).
    Files(Vec<PathBuf>),
    /// A configuration text and the name it is compiled under.
    Text {
        /// The name (base of relative includes, shown in diagnostics).
        name: PathBuf,
        /// The text.
        text: String,
    },
}

/// Why an artifact is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArtifactError {
    /// It does not start with [`MAGIC`].
    NotAnArtifact,
    /// Another format version.
    Format {
        /// The version found.
        found: u32,
    },
    /// Made by another build of the compiler.
    MadeBy {
        /// Who made it.
        found: String,
    },
    /// Its length is not the one its header gives.
    Length {
        /// The header's length.
        expected: u64,
        /// The file's.
        found: u64,
    },
    /// The checksum does not match: the file was damaged.
    Checksum,
    /// A field that cannot be what it claims to be.
    Corrupt(&'static str),
}

impl fmt::Display for ArtifactError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArtifactError::NotAnArtifact => write!(f, "not a compiled artifact"),
            ArtifactError::Format { found } => write!(
                f,
                "artifact format {found}, this build reads format {FORMAT}"
            ),
            ArtifactError::MadeBy { found } => write!(
                f,
                "artifact made by `{found}`, this is `{}`",
                made_by()
            ),
            ArtifactError::Length { expected, found } => write!(
                f,
                "artifact truncated or extended: its header says {expected} bytes, the file has {found}"
            ),
            ArtifactError::Checksum => write!(f, "artifact damaged: checksum mismatch"),
            ArtifactError::Corrupt(what) => write!(f, "artifact damaged: bad {what}"),
        }
    }
}

impl std::error::Error for ArtifactError {}

/// A decoded artifact, ready to compile ([`compile`]).
#[derive(Debug)]
pub struct Artifact {
    /// What was compiled.
    pub entry: Entry,
    /// The file-system answers of the compilation.
    pub files: Snapshot,
    /// What the regexes' compilation computed.
    pub precompiled: Precompiled,
}

/// Whether the file at `path` starts with [`MAGIC`] (false if it cannot be read).
pub fn is_artifact(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok()
        && &head == MAGIC
}

/// Compiles `entry` and, when it compiles without errors, returns the
/// artifact's bytes beside the compilation (every dense DFA is built for
/// it, whatever `opts.rx.defer_dense` says). Without a program the bytes
/// are `None` and the diagnostics say why.
pub fn build(entry: &Entry, opts: &Options) -> (Option<Vec<u8>>, Compiled) {
    let opts = Options {
        rx: RxOptions {
            defer_dense: false,
            ..opts.rx.clone()
        },
        files: Files::recording(),
        precompiled: None,
        started: None,
    };
    let compiled = match entry {
        Entry::Files(paths) => crate::compile_files_from_source(paths, &opts),
        Entry::Text { name, text } => crate::compile_str(name.clone(), text, &opts),
    };
    let bytes = match (&compiled.program, opts.files.recorded()) {
        (Some(program), Some(files)) => Some(encode(entry, &files, program)),
        _ => None,
    };
    (bytes, compiled)
}

/// The artifact of `program`, compiled from `entry` with the file-system
/// answers `files`.
pub fn encode(entry: &Entry, files: &Snapshot, program: &Program) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(1 << 20));
    w.0.extend_from_slice(MAGIC);
    w.u32(FORMAT);
    w.u32(0); // checksum, set below
    w.u64(0); // length, set below
    w.str(&made_by());
    match entry {
        Entry::Files(paths) => {
            w.u8(0);
            w.len(paths.len());
            for p in paths {
                w.path(p);
            }
        }
        Entry::Text { name, text } => {
            w.u8(1);
            w.path(name);
            w.str(text);
        }
    }
    w.len(files.reads.len());
    for (path, bytes) in &files.reads {
        w.path(path);
        w.bytes(bytes);
    }
    w.len(files.canonical.len());
    for (path, canonical) in &files.canonical {
        w.path(path);
        w.path(canonical);
    }
    w.len(files.globs.len());
    for (pattern, matched) in &files.globs {
        w.str(pattern);
        w.len(matched.len());
        for p in matched {
            w.path(p);
        }
    }
    let mut area: Vec<u8> = Vec::new();
    let linear: Vec<_> = program
        .regexes
        .iter()
        .filter(|rx| !rx.is_backtracking())
        .collect();
    w.len(linear.len());
    for rx in linear {
        w.str(rx.pattern());
        w.len(rx.group_count());
        match rx.required_literals() {
            RequiredLiterals::None => w.u8(0),
            RequiredLiterals::AnyOf(lits) => {
                w.u8(1);
                w.len(lits.len());
                for l in lits {
                    w.bytes(l);
                }
            }
        }
        match rx.dense_dfa_bytes() {
            None => w.u8(0),
            Some((bytes, padding)) => {
                let dfa = bytes.get(padding..).unwrap_or_default();
                w.u8(1);
                w.u64(area.len() as u64);
                w.u64(dfa.len() as u64);
                area.extend_from_slice(dfa);
                area.resize(area.len().next_multiple_of(8), 0);
            }
        }
    }
    w.u64(area.len() as u64);
    let aligned = w.0.len().next_multiple_of(8);
    w.0.resize(aligned, 0);
    w.0.extend_from_slice(&area);
    let total = w.0.len() as u64;
    w.0[16..24].copy_from_slice(&total.to_le_bytes());
    let crc = crc32fast::hash(&w.0[HEADER_LEN..]);
    w.0[12..16].copy_from_slice(&crc.to_le_bytes());
    w.0
}

/// Decodes an artifact, checking its header, length, checksum and every
/// field. Never panics, whatever the bytes.
pub fn decode(bytes: &[u8]) -> Result<Artifact, ArtifactError> {
    decode_owned(bytes.to_vec())
}

/// [`decode`], keeping the DFA area in `bytes` instead of a copy.
pub fn decode_owned(bytes: Vec<u8>) -> Result<Artifact, ArtifactError> {
    let (header, area_start) = decode_fields(&bytes)?;
    let mut precompiled = Precompiled::new(bytes, area_start);
    for (pattern, rx) in header.regexes {
        precompiled.insert(pattern, rx);
    }
    Ok(Artifact {
        entry: header.entry,
        files: header.files,
        precompiled,
    })
}

/// What [`decode_fields`] reads before the DFA area.
struct Fields {
    entry: Entry,
    files: Snapshot,
    regexes: Vec<(String, PrecompiledRx)>,
}

/// The fields of an artifact and where its DFA area starts.
fn decode_fields(bytes: &[u8]) -> Result<(Fields, usize), ArtifactError> {
    if bytes.get(..8) != Some(MAGIC.as_slice()) {
        return Err(ArtifactError::NotAnArtifact);
    }
    let mut r = Reader { bytes, pos: 8 };
    let format = r.u32()?;
    if format != FORMAT {
        return Err(ArtifactError::Format { found: format });
    }
    let crc = r.u32()?;
    let total = r.u64()?;
    if total != bytes.len() as u64 {
        return Err(ArtifactError::Length {
            expected: total,
            found: bytes.len() as u64,
        });
    }
    if crc32fast::hash(bytes.get(HEADER_LEN..).unwrap_or_default()) != crc {
        return Err(ArtifactError::Checksum);
    }
    let made = r.str()?;
    if made != made_by() {
        return Err(ArtifactError::MadeBy { found: made });
    }
    let entry = match r.u8()? {
        0 => {
            let n = r.count()?;
            let mut paths = Vec::new();
            for _ in 0..n {
                paths.push(r.path()?);
            }
            Entry::Files(paths)
        }
        1 => Entry::Text {
            name: r.path()?,
            text: r.str()?,
        },
        _ => return Err(ArtifactError::Corrupt("entry kind")),
    };
    let mut files = Snapshot::default();
    for _ in 0..r.count()? {
        let path = r.path()?;
        files.reads.insert(path, r.bytes()?.to_vec());
    }
    for _ in 0..r.count()? {
        let path = r.path()?;
        files.canonical.insert(path, r.path()?);
    }
    for _ in 0..r.count()? {
        let pattern = r.str()?;
        let mut matched = Vec::new();
        for _ in 0..r.count()? {
            matched.push(r.path()?);
        }
        files.globs.insert(pattern, matched);
    }
    let mut entries = Vec::new();
    for _ in 0..r.count()? {
        let pattern = r.str()?;
        let group_count = r.count()?;
        let literals = match r.u8()? {
            0 => RequiredLiterals::None,
            1 => {
                let mut lits = Vec::new();
                for _ in 0..r.count()? {
                    lits.push(r.bytes()?.to_vec());
                }
                if lits.is_empty() {
                    return Err(ArtifactError::Corrupt("literal set"));
                }
                RequiredLiterals::AnyOf(lits)
            }
            _ => return Err(ArtifactError::Corrupt("literal kind")),
        };
        let dense = match r.u8()? {
            0 => None,
            1 => {
                let start = r.offset()?;
                let len = r.offset()?;
                Some(
                    start
                        ..start
                            .checked_add(len)
                            .ok_or(ArtifactError::Corrupt("DFA range"))?,
                )
            }
            _ => return Err(ArtifactError::Corrupt("DFA kind")),
        };
        entries.push((
            pattern,
            PrecompiledRx {
                literals,
                group_count,
                dense,
            },
        ));
    }
    let area_len = r.offset()?;
    let area_start = r.pos.next_multiple_of(8);
    if bytes.len().checked_sub(area_start) != Some(area_len) {
        return Err(ArtifactError::Corrupt("DFA area"));
    }
    if entries
        .iter()
        .any(|(_, rx)| rx.dense.as_ref().is_some_and(|d| d.end > area_len))
    {
        return Err(ArtifactError::Corrupt("DFA range"));
    }
    Ok((
        Fields {
            entry,
            files,
            regexes: entries,
        },
        area_start,
    ))
}

/// The options that compile a decoded artifact's entry: its files and its
/// regexes; `opts.rx` applies to what is built at load (meta regexes).
///
/// The patterns start compiling now, on the other cores, while the files
/// are parsed: the artifact knows them (in the order the lowering needs
/// them), the source does not until it is parsed.
pub fn options(artifact: Artifact, opts: &Options) -> (Entry, Options) {
    let precompiled = Arc::new(artifact.precompiled);
    let patterns: Vec<&str> = precompiled.patterns().collect();
    let started = Batch::start(&patterns, &opts.rx, Some(Arc::clone(&precompiled)));
    let opts = Options {
        rx: opts.rx.clone(),
        files: Files::snapshot(artifact.files),
        precompiled: Some(precompiled),
        started: Some(Arc::new(started)),
    };
    (artifact.entry, opts)
}

/// Compiles a decoded artifact: the same program its source compiles to,
/// with what it kept of the regexes' compilation (see [`options`]).
pub fn compile(artifact: Artifact, opts: &Options) -> Compiled {
    let (entry, opts) = options(artifact, opts);
    match &entry {
        Entry::Files(paths) => crate::compile_files_from_source(paths, &opts),
        Entry::Text { name, text } => crate::compile_str(name.clone(), text, &opts),
    }
}

/// Reads and decodes the artifact at `path`, or gives the compilation
/// that reports (file:line:col, with a hint) why it cannot be used.
pub fn open(path: &Path) -> Result<Artifact, Box<Compiled>> {
    let bytes = std::fs::read(path).map_err(|e| {
        refused(
            path,
            format!("cannot read `{}`: {e}", path.display()),
            "check the path",
        )
    })?;
    decode_owned(bytes).map_err(|e| {
        refused(
            path,
            e.to_string(),
            "make it again with `waf compile -o` (an artifact is read by the build that made it only), or load the rules from source",
        )
    })
}

/// Reads, decodes and compiles the artifact at `path`; a file that cannot
/// be read or is refused gives a compilation with that diagnostic.
pub fn compile_path(path: &Path, opts: &Options) -> Compiled {
    let start = std::time::Instant::now();
    match open(path) {
        Ok(artifact) => {
            let read = start.elapsed();
            let mut compiled = compile(artifact, opts);
            compiled.timings.parse += read;
            compiled
        }
        Err(refusal) => *refusal,
    }
}

fn refused(path: &Path, message: String, hint: &str) -> Box<Compiled> {
    let mut sources = SourceMap::new();
    let id = sources.add(path, String::new());
    let mut diagnostics = Diagnostics::new();
    diagnostics.push(
        Diagnostic::error(Code::Encoding, Span::new(id, 0, 0), message)
            .with_label("compiled artifact")
            .with_hint(hint.to_string()),
    );
    Box::new(Compiled {
        timings: Default::default(),
        program: None,
        sources_when_failed: Some(sources),
        diagnostics,
    })
}

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    /// Counts and lengths are u32: a configuration with more than 4 Gi of
    /// anything does not compile in the first place.
    fn len(&mut self, n: usize) {
        self.u32(u32::try_from(n).unwrap_or(u32::MAX));
    }
    fn bytes(&mut self, b: &[u8]) {
        self.len(b.len());
        self.0.extend_from_slice(b);
    }
    fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }
    fn path(&mut self, p: &Path) {
        self.bytes(p.as_os_str().as_encoded_bytes());
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ArtifactError> {
        let end = self
            .pos
            .checked_add(n)
            .ok_or(ArtifactError::Corrupt("length"))?;
        let b = self
            .bytes
            .get(self.pos..end)
            .ok_or(ArtifactError::Corrupt("length"))?;
        self.pos = end;
        Ok(b)
    }
    fn u8(&mut self) -> Result<u8, ArtifactError> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, ArtifactError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64, ArtifactError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    fn count(&mut self) -> Result<usize, ArtifactError> {
        usize::try_from(self.u32()?).map_err(|_| ArtifactError::Corrupt("count"))
    }
    fn offset(&mut self) -> Result<usize, ArtifactError> {
        usize::try_from(self.u64()?).map_err(|_| ArtifactError::Corrupt("offset"))
    }
    fn bytes(&mut self) -> Result<&'a [u8], ArtifactError> {
        let n = self.count()?;
        self.take(n)
    }
    fn str(&mut self) -> Result<String, ArtifactError> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| ArtifactError::Corrupt("text"))
    }
    fn path(&mut self) -> Result<PathBuf, ArtifactError> {
        let b = self.bytes()?;
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            Ok(PathBuf::from(std::ffi::OsStr::from_bytes(b)))
        }
        #[cfg(not(unix))]
        {
            String::from_utf8(b.to_vec())
                .map(PathBuf::from)
                .map_err(|_| ArtifactError::Corrupt("path"))
        }
    }
}
