//! What a transaction reports: the intervention a server applies, and the
//! rules that matched (with the fields of an error-log line).

use std::sync::Arc;
use waf_compiler::names::Severity;


/// What the server should do with the transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Intervention {
    pub status: u16,
    /// `deny`, `drop`, `redirect` or `proxy`.
    pub action: &'static str,
    pub rule_id: u64,
    pub phase: u8,
    pub url: Option<String>,
}

/// A rule that matched, with its metadata macro-expanded at match time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MatchedRule {
    pub id: u64,
    pub phase: u8,
    pub msg: String,
    pub logdata: String,
    pub severity: Option<Severity>,
    /// Shared with the ruleset (no copy per match).
    pub tags: Arc<[String]>,
    pub ver: Option<Arc<str>>,
    pub matched_var_name: String,
    pub matched_var: String,
    /// False for `nolog` rules: they matched but write no alert.
    pub log: bool,
    /// The rule's disruptive action fired (not `pass`), whatever the engine mode.
    pub disruptive: bool,
    pub location: Arc<str>,
}

impl MatchedRule {
    /// A ModSecurity-style error-log line (what go-ftw's `[id "..."]` and
    /// `match_regex` checks read). Always one line: control bytes, `\`, `"`
    /// and non-ASCII bytes of request data are written as `\xHH`, as Apache's
    /// error log does, so attacker text can neither break the line nor forge a
    /// `[id "..."]` field.
    pub fn log_line(&self, uri: &str, unique_id: &str) -> String {
        let e = escape_log;
        let mut s = format!(
            "ModSecurity: Warning. Matched Data: {} found within {}. [file \"{}\"] [id \"{}\"] [msg \"{}\"] [data \"{}\"]",
            e(&self.matched_var),
            e(&self.matched_var_name),
            e(&self.location),
            self.id,
            e(&self.msg),
            e(&self.logdata)
        );
        if let Some(sev) = self.severity {
            s.push_str(&format!(" [severity \"{}\"]", sev.number()));
        }
        if let Some(v) = &self.ver {
            s.push_str(&format!(" [ver \"{}\"]", e(v)));
        }
        for t in self.tags.iter() {
            s.push_str(&format!(" [tag \"{}\"]", e(t)));
        }
        s.push_str(&format!(
            " [uri \"{}\"] [unique_id \"{}\"]",
            e(uri),
            e(unique_id)
        ));
        s
    }
}

/// Escapes a log field: printable ASCII except `\` and `"` is kept, every
/// other byte becomes `\xHH`.
fn escape_log(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if (0x20..0x7f).contains(&b) && b != b'\\' && b != b'"' {
            out.push(b as char);
        } else {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}
