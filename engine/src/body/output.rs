//! What every body processor produces: the arguments and files it hands to a
//! [`BodySink`], the flags and error text of a [`BodyResult`], and the
//! `SecArgumentsLimit` count they share.
//!
//! A leaf of the body module: the processors write these types and the
//! parser that dispatches to them returns them, so they live apart from both
//! (otherwise each processor would import its own caller).

/// Which request variables an argument belongs to, as v3 files it
/// (`Transaction::addArgument` and `Multipart::multipart_complete`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArgSource {
    /// `QUERY_STRING`: `ARGS` and `ARGS_GET`.
    QueryString,
    /// An `application/x-www-form-urlencoded` body: `ARGS` and `ARGS_POST`.
    UrlencodedBody,
    /// A non-file part of a `multipart/form-data` body: `ARGS` and `ARGS_POST`.
    Multipart,
    /// A JSON body: `ARGS` only. v3 calls `addArgument("JSON", ...)`, which
    /// fills neither `ARGS_GET` nor `ARGS_POST`.
    Json,
}

impl ArgSource {
    /// Whether v3 puts this argument into `ARGS_GET` (and `ARGS_GET_NAMES`).
    pub fn in_args_get(self) -> bool {
        self == ArgSource::QueryString
    }

    /// Whether v3 puts this argument into `ARGS_POST` (and `ARGS_POST_NAMES`).
    pub fn in_args_post(self) -> bool {
        matches!(self, ArgSource::UrlencodedBody | ArgSource::Multipart)
    }
}

/// One uploaded file of a multipart body (a part with a non-empty
/// `filename`), reported once parsing completed successfully.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileInfo<'a> {
    /// The part's `name`: the key of `FILES`, `FILES_NAMES`, `FILES_SIZES`
    /// (and the value of `FILES_NAMES`).
    pub name: &'a [u8],
    /// The `filename` as sent (the value of `FILES`).
    pub filename: &'a [u8],
    /// The file size in bytes (the value of `FILES_SIZES`).
    pub size: u64,
    /// The file content itself, a slice of the body (not copied). v3 keeps it
    /// only in a temporary file (and `FILES_TMP_CONTENT` when files are
    /// stored); it is here for `@inspectFile`-like uses and magic-byte checks.
    pub content: &'a [u8],
}

/// Receives what a body processor extracts. Every slice is borrowed for the
/// duration of the call only; copy what must be kept.
///
/// Only [`BodySink::arg`] is required; the others default to doing nothing.
pub trait BodySink {
    /// One argument: `ARGS` plus the collections [`ArgSource`] names.
    fn arg(&mut self, source: ArgSource, name: &[u8], value: &[u8]);

    /// One uploaded file (`FILES`, `FILES_NAMES`, `FILES_SIZES`). Called in
    /// part order, after all of the parsing succeeded; the running total is
    /// in [`BodyResult::files_combined_size`].
    fn file(&mut self, file: &FileInfo<'_>) {
        let _ = file;
    }

    /// One `MULTIPART_PART_HEADERS` entry: key `part_name`, value the whole
    /// header line without its line ending (`Content-Type: text/plain`).
    fn multipart_part_header(&mut self, part_name: &[u8], line: &[u8]) {
        let _ = (part_name, line);
    }

    /// One `MULTIPART_NAME` value (every `name=` seen in a
    /// `Content-Disposition`, even of parts later found invalid).
    fn multipart_name(&mut self, name: &[u8]) {
        let _ = name;
    }

    /// One `MULTIPART_FILENAME` value (every `filename=` seen).
    fn multipart_filename(&mut self, filename: &[u8]) {
        let _ = filename;
    }

    /// One `XML://@*` value: an attribute value, entity references resolved
    /// and whitespace normalised, in document order.
    fn xml_attribute(&mut self, value: &[u8]) {
        let _ = value;
    }

    /// The `XML:/*` value: the text content of the root element (all
    /// descendant text and CDATA, concatenated). Called at most once.
    fn xml_root_text(&mut self, text: &[u8]) {
        let _ = text;
    }
}

/// A sink that discards everything (tests of the parsers' own results).
#[cfg(test)]
#[derive(Clone, Copy, Debug, Default)]
pub struct NullSink;

#[cfg(test)]
impl BodySink for NullSink {
    fn arg(&mut self, _source: ArgSource, _name: &[u8], _value: &[u8]) {}
}

/// `SecArgumentsLimit` bookkeeping for one transaction.
///
/// v3 (`Transaction::addArgument`): when the limit is *set* and `ARGS`
/// already holds `max` entries, a further argument is dropped. For
/// urlencoded data (query string and body) the drop is silent: parsing goes
/// on and no error is raised. The JSON processor instead aborts parsing,
/// which sets `REQBODY_ERROR` (see [`json`]). Multipart values bypass the
/// check in v3 (they are stored without `addArgument`) but are counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArgLimit {
    /// `None` when `SecArgumentsLimit` is not configured (v3: no limit).
    pub max: Option<usize>,
    /// Arguments (`ARGS` entries) added so far in this transaction.
    pub count: usize,
}

impl ArgLimit {
    /// A fresh counter for one transaction.
    pub fn new(max: Option<usize>) -> Self {
        ArgLimit { max, count: 0 }
    }

    /// Counts one more argument if the limit allows it.
    pub fn admit(&mut self) -> bool {
        if let Some(max) = self.max {
            if self.count >= max {
                return false;
            }
        }
        self.count += 1;
        true
    }
}

/// What a processor run yields besides the sink callbacks. Keep one per
/// worker and pass it to every call: it is cleared at the start of each run
/// and its buffers are reused.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BodyResult {
    /// `REQBODY_ERROR` (and `REQBODY_PROCESSOR_ERROR`): 1 when the body could
    /// not be parsed. Never set by the urlencoded processor (v3 does not).
    pub reqbody_error: bool,
    /// `REQBODY_ERROR_MSG` (and `REQBODY_PROCESSOR_ERROR_MSG`), byte-exact v3
    /// text such as `Multipart parsing error: Multipart: Final boundary
    /// missing.`; bytes because v3 quotes body data in some messages.
    pub reqbody_error_msg: Vec<u8>,
    /// Extra detail for logs only (not a v3 variable): e.g. the multipart
    /// error that v3 reports only as "Final boundary missing", or where the
    /// XML parser failed.
    pub error_detail: String,
    /// `URLENCODED_ERROR`: an invalid `%` encoding was seen (v3 sets it to 1,
    /// and never resets it, when a key or value has an invalid escape).
    pub urlencoded_error: bool,
    /// The `MULTIPART_*` flags; `None` unless the multipart processor ran
    /// (v3 leaves those variables unset then).
    pub multipart: Option<MultipartFlags>,
    /// `FILES_COMBINED_SIZE`; `None` when no file part was found (v3 leaves
    /// the variable unset then).
    pub files_combined_size: Option<u64>,
    /// Arguments dropped because of `SecArgumentsLimit`.
    pub args_skipped: usize,
}

impl BodyResult {
    /// Resets everything, keeping the buffers' capacity.
    pub fn clear(&mut self) {
        self.reqbody_error = false;
        self.reqbody_error_msg.clear();
        self.error_detail.clear();
        self.urlencoded_error = false;
        self.multipart = None;
        self.files_combined_size = None;
        self.args_skipped = 0;
    }

    /// Marks a processor error with v3's message (`prefix` + `msg`).
    pub(crate) fn set_error(&mut self, prefix: &str, msg: &[u8]) {
        self.reqbody_error = true;
        self.reqbody_error_msg.clear();
        self.reqbody_error_msg.extend_from_slice(prefix.as_bytes());
        self.reqbody_error_msg.extend_from_slice(msg);
    }

    /// `REQBODY_ERROR_MSG` as text (lossy for the rare non-UTF-8 messages).
    #[cfg(test)]
    pub fn reqbody_error_msg_lossy(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.reqbody_error_msg)
    }
}

/// The `MULTIPART_*` variables (v3 `Multipart::multipart_complete`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MultipartFlags {
    /// v3's internal `m_flag_error`: the `Content-Type` was rejected or a
    /// fatal line error stopped parsing. Part of `MULTIPART_STRICT_ERROR`.
    pub error: bool,
    /// `MULTIPART_BOUNDARY_QUOTED`
    pub boundary_quoted: bool,
    /// `MULTIPART_BOUNDARY_WHITESPACE`
    pub boundary_whitespace: bool,
    /// `MULTIPART_DATA_BEFORE`
    pub data_before: bool,
    /// `MULTIPART_DATA_AFTER`
    pub data_after: bool,
    /// `MULTIPART_HEADER_FOLDING`
    pub header_folding: bool,
    /// `MULTIPART_LF_LINE`
    pub lf_line: bool,
    /// A CRLF line was seen (only visible through `MULTIPART_CRLF_LF_LINES`).
    pub crlf_line: bool,
    /// `MULTIPART_MISSING_SEMICOLON` (`MULTIPART_SEMICOLON_MISSING` in v2)
    pub missing_semicolon: bool,
    /// `MULTIPART_INVALID_QUOTING`
    pub invalid_quoting: bool,
    /// `MULTIPART_INVALID_PART`
    pub invalid_part: bool,
    /// `MULTIPART_INVALID_HEADER_FOLDING`
    pub invalid_header_folding: bool,
    /// `MULTIPART_FILE_LIMIT_EXCEEDED`
    pub file_limit_exceeded: bool,
    /// `MULTIPART_UNMATCHED_BOUNDARY`: 0, 1 (a line looked like a boundary
    /// but was not ours) or 2 (a real boundary came after the first one;
    /// overwrites an earlier 1).
    pub unmatched_boundary: u8,
}

impl MultipartFlags {
    /// `MULTIPART_STRICT_ERROR`, computed exactly as v3 does.
    pub fn strict_error(&self) -> bool {
        self.error
            || self.boundary_quoted
            || self.boundary_whitespace
            || self.data_before
            || self.data_after
            || self.header_folding
            || self.lf_line
            || self.missing_semicolon
            || self.invalid_quoting
            || self.invalid_part
            || self.invalid_header_folding
            || self.file_limit_exceeded
    }

    /// `MULTIPART_CRLF_LF_LINES`: both CRLF and bare LF line endings seen.
    pub fn crlf_lf_lines(&self) -> bool {
        self.crlf_line && self.lf_line
    }
}
