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
//! The public surface is small, and everything else is private:
//! - [`Ruleset`]: the shared, immutable compiled configuration (`Send +
//!   Sync`); [`CompileError`] when rules do not compile;
//! - [`Transaction`]: one request and its response, fed phase by phase
//!   (see its table of calls, and `docs/embedding.md`), reporting an
//!   [`Intervention`] and the [`MatchedRule`]s;
//! - [`EvalOptions`], [`EvalStats`], [`RuleProfile`], [`ChainProfile`]: the
//!   fast path's switches and counters (`waf bench`, `waf profile`);
//! - [`Injection`]: the `@detectSQLi`/`@detectXSS` implementation, replaceable;
//! - [`apply_transform`]: one SecLang transformation, as rules run it.
//! - [`coding`]: compressed request and response bodies (`Content-Encoding`
//!   gzip, deflate) decoded for inspection, as every front end feeds them.
//!
//! Inside, arrows point one way: `plan` (built at load) and `transaction`
//! (per request) both read `sources`, `prefilter` and `transform`; the
//! transaction reads the ruleset, never the other way round.

#![warn(missing_docs)]

mod background;
mod blocks;
mod body;
pub mod coding;
mod collection;
mod fold;
mod hash;
mod injection;
mod operator;
mod options;
mod outcome;
mod plan;
mod prefilter;
mod ruleset;
mod sources;
mod stats;
mod steps;
mod store;
mod transaction;
mod transform;

pub use injection::{Injection, Libinjection};
pub use options::EvalOptions;
pub use outcome::{Cause, Intervention, MatchedRule, MatchedRules};
pub use ruleset::{PrefilterStats, Ruleset, DEFAULT_RULES, DEFAULT_RULES_NAME};
pub use stats::{ChainProfile, EvalStats, RuleProfile};
pub use store::{epoch_secs, CollectionStore, DeltaKind, DeltaOp, RecordDelta, StoreLimits};
pub use transaction::{LogCursor, Transaction};
pub use transform::apply as apply_transform;
pub use waf_compiler::ir::{AuditParts, EngineMode};
pub use waf_compiler::names::Transform;
pub use waf_compiler::CompileError;

/// The example of `docs/embedding.md`, run as a doctest so the document stays true.
#[cfg(doctest)]
#[doc = include_str!("../../docs/embedding.md")]
pub struct EmbeddingDoc;
