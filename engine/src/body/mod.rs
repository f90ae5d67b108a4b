//! Request body processors with ModSecurity v3 (libmodsecurity) semantics.
//!
//! Each processor turns a request body (`&[u8]`, never assumed to be UTF-8)
//! into the variables CRS inspects:
//!
//! | processor | module | variables |
//! | --- | --- | --- |
//! | `URLENCODED` | [`urlencoded`] | `ARGS`/`ARGS_POST` (also `ARGS_GET` from `QUERY_STRING`), `URLENCODED_ERROR` |
//! | `MULTIPART` | [`multipart`] | `ARGS`/`ARGS_POST`, `FILES`, `FILES_NAMES`, `FILES_SIZES`, `FILES_COMBINED_SIZE`, `MULTIPART_PART_HEADERS`, `MULTIPART_NAME`, `MULTIPART_FILENAME`, every `MULTIPART_*` flag and `MULTIPART_STRICT_ERROR` |
//! | `JSON` | [`json`] | `ARGS` (v3 names such as `json.a.array_0`) |
//! | `XML` | [`xml`] | `XML:/*`, `XML://@*` |
//!
//! and, for the last three, `REQBODY_ERROR` / `REQBODY_ERROR_MSG` (which v3
//! also copies to `REQBODY_PROCESSOR_ERROR` / `REQBODY_PROCESSOR_ERROR_MSG`).
//!
//! # Allocation-free API
//!
//! Nothing here returns owned per-argument data. A caller keeps, per worker,
//! one [`BodyParser`] (configuration plus reusable scratch buffers) and one
//! [`BodyResult`] (flags plus a reusable error-message buffer), and receives
//! the extracted data through a [`BodySink`] whose callbacks borrow the bytes
//! only for the duration of the call. Once the buffers have grown to the size
//! of the largest body seen, parsing a request allocates nothing. (Error
//! *details* for logs are written into a reused `String` as well.)
//!
//! (The module's tests show the calls: `parses_json_into_a_sink`.)
//!
//! # Where the behaviour comes from
//!
//! libmodsecurity v3 (`owasp-modsecurity/ModSecurity`, v3/master):
//! `src/transaction.cc` (`extractArguments`, `addArgument`,
//! `processRequestBody`), `src/utils/decode.cc`
//! (`urldecode_nonstrict_inplace`), `src/utils/string.h` (`ssplit`,
//! `ssplit_pair`, `chomp`), `src/request_body_processor/{multipart,json,xml}.cc`
//! and `json.h`; for JSON the yajl 2 parser v3 is built with (its messages and
//! string decoding). Each module documents the details and its deliberate
//! deviations.

pub mod json;
pub mod multipart;
mod output;
pub mod urlencoded;
pub mod xml;

pub use multipart::MultipartLineBreaks;
#[cfg(test)]
pub use output::NullSink;
pub use output::{ArgLimit, ArgSource, BodyResult, BodySink, FileInfo};

use std::fmt;

/// Processor settings, from the compiled program's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BodyConfig {
    /// `SecArgumentSeparator` (default `&`).
    pub arg_separator: u8,
    /// `SecRequestBodyJsonDepthLimit` (v3 default 10000). Exceeding it is a
    /// `REQBODY_ERROR`.
    pub json_depth_limit: u64,
    /// Maximum XML element nesting, libxml2's default `xmlParserMaxDepth`
    /// (256 ancestors). Deeper documents are not well-formed for libxml2.
    pub xml_depth_limit: usize,
    /// `SecUploadFileLimit`, applied only when v3 would store uploaded files
    /// (`SecUploadKeepFiles On` or `SecTmpSaveUploadedFiles On`); `None`
    /// otherwise, which is v3's behaviour by default (the limit is then
    /// never checked and `MULTIPART_FILE_LIMIT_EXCEEDED` stays 0).
    pub upload_file_limit: Option<usize>,
    /// See [`MultipartLineBreaks`].
    pub multipart_line_breaks: MultipartLineBreaks,
}

impl Default for BodyConfig {
    fn default() -> Self {
        BodyConfig {
            arg_separator: b'&',
            json_depth_limit: 10_000,
            xml_depth_limit: xml::DEFAULT_MAX_DEPTH,
            upload_file_limit: None,
            multipart_line_breaks: MultipartLineBreaks::Keep,
        }
    }
}

/// The request body processor (`REQBODY_PROCESSOR`, `ctl:requestBodyProcessor`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Processor {
    Urlencoded,
    Multipart,
    Json,
    Xml,
}

impl Processor {
    /// The processor named by `ctl:requestBodyProcessor=NAME` (case-insensitive).
    pub fn from_name(name: &str) -> Option<Self> {
        let name = name.trim();
        [
            Processor::Urlencoded,
            Processor::Multipart,
            Processor::Json,
            Processor::Xml,
        ]
        .into_iter()
        .find(|p| p.name().eq_ignore_ascii_case(name))
    }

    /// The `REQBODY_PROCESSOR` value.
    pub fn name(self) -> &'static str {
        match self {
            Processor::Urlencoded => "URLENCODED",
            Processor::Multipart => "MULTIPART",
            Processor::Json => "JSON",
            Processor::Xml => "XML",
        }
    }

    /// The processor v3 picks from the `Content-Type` request header before
    /// any rule runs (`Transaction::addRequestHeader`): a case-insensitive
    /// prefix match on `multipart/form-data` or
    /// `application/x-www-form-urlencoded`. JSON and XML are only ever chosen
    /// by `ctl:requestBodyProcessor` (CRS's engine rules 200000/200001).
    pub fn from_content_type(content_type: &[u8]) -> Option<Self> {
        fn prefix(s: &[u8], p: &[u8]) -> bool {
            s.len() >= p.len() && s[..p.len()].eq_ignore_ascii_case(p)
        }
        if prefix(content_type, b"multipart/form-data") {
            Some(Processor::Multipart)
        } else if prefix(content_type, b"application/x-www-form-urlencoded") {
            Some(Processor::Urlencoded)
        } else {
            None
        }
    }
}

impl fmt::Display for Processor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Reusable buffers of all processors. Grows to the largest body seen.
#[derive(Debug, Default)]
pub struct Scratch {
    pub(crate) urlencoded: urlencoded::Scratch,
    pub(crate) multipart: multipart::Scratch,
    pub(crate) json: json::Scratch,
    pub(crate) xml: xml::Scratch,
}

/// Configuration plus reusable scratch space: keep one per worker thread.
#[derive(Debug, Default)]
pub struct BodyParser {
    pub config: BodyConfig,
    scratch: Scratch,
}

impl BodyParser {
    pub fn new(config: BodyConfig) -> Self {
        BodyParser {
            config,
            scratch: Scratch::default(),
        }
    }

    /// Parses `QUERY_STRING` into `ARGS_GET` (v3 `extractArguments("GET")`).
    /// Sets [`BodyResult::urlencoded_error`] and counts skipped arguments;
    /// `out` is cleared first.
    pub fn query_string<S: BodySink + ?Sized>(
        &mut self,
        query: &[u8],
        args: &mut ArgLimit,
        sink: &mut S,
        out: &mut BodyResult,
    ) {
        out.clear();
        let stats = urlencoded::parse(
            query,
            self.config.arg_separator,
            ArgSource::QueryString,
            args,
            &mut self.scratch.urlencoded,
            sink,
        );
        out.urlencoded_error = stats.invalid_encoding;
        out.args_skipped = stats.args_skipped;
    }

    /// Runs `processor` on a request body; `out` is cleared first.
    ///
    /// `content_type` is the request's `Content-Type` header value; only the
    /// multipart processor uses it (for the boundary). As in v3, a multipart
    /// body without any `Content-Type` header is not processed at all (no
    /// error), while an empty header value is an error.
    pub fn body<S: BodySink + ?Sized>(
        &mut self,
        processor: Processor,
        body: &[u8],
        content_type: Option<&[u8]>,
        args: &mut ArgLimit,
        sink: &mut S,
        out: &mut BodyResult,
    ) {
        out.clear();
        match processor {
            Processor::Urlencoded => {
                let stats = urlencoded::parse(
                    body,
                    self.config.arg_separator,
                    ArgSource::UrlencodedBody,
                    args,
                    &mut self.scratch.urlencoded,
                    sink,
                );
                out.urlencoded_error = stats.invalid_encoding;
                out.args_skipped = stats.args_skipped;
            }
            Processor::Multipart => {
                if let Some(ct) = content_type {
                    let cfg = multipart::MultipartConfig {
                        line_breaks: self.config.multipart_line_breaks,
                        upload_file_limit: self.config.upload_file_limit,
                    };
                    multipart::parse(body, ct, &cfg, args, &mut self.scratch.multipart, sink, out);
                }
            }
            Processor::Json => json::parse(
                body,
                self.config.json_depth_limit,
                args,
                &mut self.scratch.json,
                sink,
                out,
            ),
            Processor::Xml => xml::parse(
                body,
                self.config.xml_depth_limit,
                &mut self.scratch.xml,
                sink,
                out,
            ),
        }
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    //! A recording sink and a seeded generator shared by the processors' tests.

    use super::{ArgSource, BodySink, FileInfo};

    /// Records every callback, as lossy strings for readable assertions.
    #[derive(Debug, Default)]
    pub struct Rec {
        pub args: Vec<(ArgSource, String, String)>,
        pub files: Vec<(String, String, u64, Vec<u8>)>,
        pub part_headers: Vec<(String, String)>,
        pub names: Vec<String>,
        pub filenames: Vec<String>,
        pub attrs: Vec<String>,
        pub root_text: Option<String>,
    }

    fn s(b: &[u8]) -> String {
        String::from_utf8_lossy(b).into_owned()
    }

    impl Rec {
        /// `(name, value)` pairs of the arguments.
        pub fn pairs(&self) -> Vec<(String, String)> {
            self.args
                .iter()
                .map(|(_, n, v)| (n.clone(), v.clone()))
                .collect()
        }
    }

    impl BodySink for Rec {
        fn arg(&mut self, source: ArgSource, name: &[u8], value: &[u8]) {
            self.args.push((source, s(name), s(value)));
        }
        fn file(&mut self, f: &FileInfo<'_>) {
            self.files
                .push((s(f.name), s(f.filename), f.size, f.content.to_vec()));
        }
        fn multipart_part_header(&mut self, part_name: &[u8], line: &[u8]) {
            self.part_headers.push((s(part_name), s(line)));
        }
        fn multipart_name(&mut self, name: &[u8]) {
            self.names.push(s(name));
        }
        fn multipart_filename(&mut self, filename: &[u8]) {
            self.filenames.push(s(filename));
        }
        fn xml_attribute(&mut self, value: &[u8]) {
            self.attrs.push(s(value));
        }
        fn xml_root_text(&mut self, text: &[u8]) {
            assert!(self.root_text.is_none(), "root text reported twice");
            self.root_text = Some(s(text));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_json_into_a_sink() {
        #[derive(Default)]
        struct Args(Vec<(Vec<u8>, Vec<u8>)>);
        impl BodySink for Args {
            fn arg(&mut self, _source: ArgSource, name: &[u8], value: &[u8]) {
                self.0.push((name.to_vec(), value.to_vec()));
            }
        }

        let mut parser = BodyParser::default();
        let mut result = BodyResult::default();
        let mut args = ArgLimit::new(None);
        let mut sink = Args::default();
        parser.body(
            Processor::Json,
            br#"{"a":[1,2],"b":{"c":"x"}}"#,
            None,
            &mut args,
            &mut sink,
            &mut result,
        );
        assert!(!result.reqbody_error);
        assert_eq!(sink.0[0], (b"json.a.array_0".to_vec(), b"1".to_vec()));
        assert_eq!(sink.0[2], (b"json.b.c".to_vec(), b"x".to_vec()));
    }

    #[test]
    fn processor_names() {
        for p in [
            Processor::Urlencoded,
            Processor::Multipart,
            Processor::Json,
            Processor::Xml,
        ] {
            assert_eq!(Processor::from_name(p.name()), Some(p));
            assert_eq!(Processor::from_name(&p.name().to_lowercase()), Some(p));
        }
        assert_eq!(Processor::from_name("Json"), Some(Processor::Json));
        assert_eq!(Processor::from_name("YAML"), None);
        assert_eq!(Processor::from_name(""), None);
    }

    #[test]
    fn processor_from_content_type() {
        let cases: &[(&[u8], Option<Processor>)] = &[
            (
                b"multipart/form-data; boundary=x",
                Some(Processor::Multipart),
            ),
            (
                b"Multipart/Form-Data;boundary=x",
                Some(Processor::Multipart),
            ),
            (
                b"application/x-www-form-urlencoded",
                Some(Processor::Urlencoded),
            ),
            (
                b"application/x-www-form-urlencoded; charset=UTF-8",
                Some(Processor::Urlencoded),
            ),
            (b"application/json", None),
            (b"text/xml", None),
            (b"multipart/mixed", None),
            (b"", None),
        ];
        for (ct, want) in cases {
            assert_eq!(Processor::from_content_type(ct), *want, "{ct:?}");
        }
    }

    #[test]
    fn arg_limit() {
        let mut l = ArgLimit::new(Some(2));
        assert!(l.admit());
        assert!(l.admit());
        assert!(!l.admit());
        assert_eq!(l.count, 2);
        let mut l = ArgLimit::new(None);
        for _ in 0..10_000 {
            assert!(l.admit());
        }
        let mut l = ArgLimit::new(Some(0));
        assert!(!l.admit());
    }

    #[test]
    fn arg_sources() {
        assert!(ArgSource::QueryString.in_args_get());
        assert!(!ArgSource::QueryString.in_args_post());
        assert!(ArgSource::UrlencodedBody.in_args_post());
        assert!(ArgSource::Multipart.in_args_post());
        assert!(!ArgSource::Json.in_args_post());
        assert!(!ArgSource::Json.in_args_get());
    }

    #[test]
    fn result_is_reset_between_runs() {
        let mut p = BodyParser::default();
        let mut out = BodyResult::default();
        let mut sink = NullSink;
        p.body(
            Processor::Json,
            b"{",
            None,
            &mut ArgLimit::new(None),
            &mut sink,
            &mut out,
        );
        assert!(out.reqbody_error);
        p.body(
            Processor::Json,
            b"{}",
            None,
            &mut ArgLimit::new(None),
            &mut sink,
            &mut out,
        );
        assert!(!out.reqbody_error);
        assert!(out.reqbody_error_msg.is_empty());
    }

    #[test]
    fn multipart_without_content_type_is_skipped() {
        let mut p = BodyParser::default();
        let mut out = BodyResult::default();
        p.body(
            Processor::Multipart,
            b"--x\r\n",
            None,
            &mut ArgLimit::new(None),
            &mut NullSink,
            &mut out,
        );
        assert!(!out.reqbody_error);
        assert!(out.multipart.is_none());
        p.body(
            Processor::Multipart,
            b"--x\r\n",
            Some(b""),
            &mut ArgLimit::new(None),
            &mut NullSink,
            &mut out,
        );
        assert!(out.reqbody_error);
        assert_eq!(
            out.reqbody_error_msg_lossy(),
            "Multipart parsing error: Multipart: Content-Type header not available."
        );
    }
}
