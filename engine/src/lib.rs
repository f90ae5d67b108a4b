//! The WAF engine: runs a compiled [`waf_compiler::ir::Program`] on HTTP
//! transactions with ModSecurity v3 semantics.
//!
//! ```
//! use waf_engine::Ruleset;
//! let rs = Ruleset::from_str("inline.conf", r#"
//!     SecRuleEngine On
//!     SecRule ARGS "@rx <script" "id:1,phase:1,deny,status:403"
//! "#).expect("rules compile");
//! let mut tx = rs.transaction();
//! tx.process_connection("10.0.0.1", 40000, "127.0.0.1", 80);
//! tx.process_uri(b"/?q=<script>", b"GET", b"HTTP/1.1");
//! tx.add_request_header(b"Host", b"example.com");
//! tx.process_request_headers();
//! assert_eq!(tx.intervention().map(|i| i.status), Some(403));
//! ```
//!
//! Modules:
//! - [`ruleset`]: the shared, immutable compiled configuration;
//! - [`transaction`]: one request/response, fed phase by phase;
//! - [`operator`], [`transform`], [`body`], [`injection`]: the pieces a rule runs.

pub mod body;
pub mod collection;
pub mod injection;
pub mod operator;
mod options;
mod outcome;
mod plan;
pub mod prefilter;
pub mod ruleset;
mod sources;
mod stats;
pub mod transaction;
pub mod transform;

pub use options::EvalOptions;
pub use outcome::{Cause, Intervention, MatchedRule};
pub use ruleset::{Ruleset, DEFAULT_RULES, DEFAULT_RULES_NAME};
pub use stats::{ChainProfile, EvalStats, RuleProfile};
pub use transaction::Transaction;
pub use waf_compiler::CompileError;

/// The example of `docs/embedding.md`, run as a doctest so the document stays true.
#[cfg(doctest)]
#[doc = include_str!("../../docs/embedding.md")]
pub struct EmbeddingDoc;
