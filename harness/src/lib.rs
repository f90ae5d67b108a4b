//! The test and measurement harness of the `waf` command, as a library:
//!
//! - [`request`]: one request in the peers' JSON format (unknown fields are
//!   errors) and the [`Decision`](request::Decision) the engine takes on it
//!   (what `waf eval` prints);
//! - [`corpus`]: request corpora from JSONL, HAR captures and go-ftw YAML
//!   test files, as the engine receives them;
//! - [`ftw`]: go-ftw regression tests (CRS's) run in-process, with an
//!   emulated Apache front end and albedo backend.
//!
//! The formats are documented with examples in `docs/formats.md`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod corpus;
pub mod ftw;
pub mod request;
