//! Filter expressions: the rules language of Cloudflare's Firewall Rules
//! (`wirefilter`), which the manifest uses to match sites, exceptions and
//! custom rules, e.g.
//! `http.request.uri.path matches "^/admin" and not ip.src in {10.0.0.0/8}`.
//!
//! Why not the `wirefilter-engine` crate: its only release on crates.io
//! (0.6.1, 2019) depends on `failure` 0.1, which is unmaintained
//! (RUSTSEC-2020-0036) and unsound (RUSTSEC-2019-0036, CVE-2020-25575, type
//! confusion on downcast), with no fixed version; a WAF should not link it.
//! Cloudflare's later wirefilter is not published. This module implements the
//! same syntax for the fields a proxy has, with `pest` (as the SecLang parser
//! does) and the `regex` crate for `matches` (linear time, as wirefilter's
//! own regex support is). It is the only place that knows the language: the
//! manifest holds [`Filter`]s and asks them [`Filter::matches`].
//!
//! Grammar (`filter.pest`): `or`/`||`, `xor`/`^^`, `and`/`&&`, `not`/`!`
//! (loosest to tightest), parentheses, and comparisons
//! `field op value` with `eq ne lt le gt ge` (or `== != < <= > >=`),
//! `contains`, `matches` (or `~`) and `in {...}`; a boolean field alone
//! (`ssl`). Values: `"strings"` (with `\"`, `\\` and `\xHH` escapes),
//! integers, integer ranges `1..100` (in sets), IPv4/IPv6 addresses and CIDR
//! networks. Every field, operator and value is type-checked when the
//! manifest is read, and every error names its line and column.

use crate::net::{canonical, Net};
use pest::Parser;
use regex::bytes::Regex;
use std::borrow::Cow;
use std::net::IpAddr;

/// The generated parser (private; pest's derive writes undocumented items).
mod grammar {
    #![allow(missing_docs)]
    #[derive(pest_derive::Parser)]
    #[grammar = "filter.pest"]
    pub(super) struct FilterParser;
}
use grammar::{FilterParser, Rule};

/// What a filter may look at: one request's head and its connection.
#[derive(Clone, Copy, Debug)]
pub struct RequestView<'a> {
    /// `Host` (or HTTP/2 `:authority`), lower-cased, port included if sent.
    pub host: &'a [u8],
    /// The method.
    pub method: &'a [u8],
    /// The request target as sent, in origin form: path and query.
    pub uri: &'a [u8],
    /// `HTTP/1.1`, `HTTP/2.0`, ...
    pub version: &'a [u8],
    /// The request headers.
    pub headers: &'a hyper::HeaderMap,
    /// The client's address.
    pub src: IpAddr,
    /// The port the client connected to.
    pub dst_port: u16,
    /// Whether the connection is TLS.
    pub tls: bool,
}

/// The fields, with their names and types.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Field {
    Host,
    Method,
    /// Path (normalized, see normal_path.rs) and query.
    Uri,
    Path,
    Query,
    /// The same as sent.
    RawUri,
    RawPath,
    Version,
    UserAgent,
    Referer,
    Cookie,
    XForwardedFor,
    /// `http.request.headers["name"]`: any value of that header.
    Header(hyper::header::HeaderName),
    Src,
    DstPort,
    Ssl,
}

/// A header's field lines as one value, joined by `sep`: `""` when absent,
/// the value itself (no copy) when there is one. A client that sends a
/// header twice (an HTTP/2 client its cookies as several fields, as
/// browsers do) does not hide the second from a filter that reads the
/// first, while the application reads both (RFC 9110 section 5.3; for
/// cookies, RFC 9113 section 8.2.3).
pub(crate) fn combined<'a>(headers: &'a hyper::HeaderMap, name: &str, sep: &[u8]) -> Cow<'a, [u8]> {
    let mut values = headers.get_all(name).iter();
    let Some(first) = values.next() else {
        return Cow::Borrowed(b"");
    };
    let Some(second) = values.next() else {
        return Cow::Borrowed(first.as_bytes());
    };
    let mut joined = first.as_bytes().to_vec();
    for v in std::iter::once(second).chain(values) {
        joined.extend_from_slice(sep);
        joined.extend_from_slice(v.as_bytes());
    }
    Cow::Owned(joined)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Type {
    Bytes,
    Ip,
    Int,
    Bool,
}

impl Type {
    fn name(self) -> &'static str {
        match self {
            Type::Bytes => "bytes",
            Type::Ip => "an IP address",
            Type::Int => "an integer",
            Type::Bool => "a boolean",
        }
    }
}

/// The fields named without an index (docs/serve.md describes each);
/// `http.request.headers["name"]` is the one with an index.
const FIELDS: [(&str, Field); 16] = [
    ("http.host", Field::Host),
    ("http.request.method", Field::Method),
    ("http.request.uri", Field::Uri),
    ("http.request.uri.path", Field::Path),
    ("http.request.uri.query", Field::Query),
    ("raw.http.request.uri", Field::RawUri),
    ("raw.http.request.uri.path", Field::RawPath),
    ("raw.http.request.uri.query", Field::Query),
    ("http.request.version", Field::Version),
    ("http.user_agent", Field::UserAgent),
    ("http.referer", Field::Referer),
    ("http.cookie", Field::Cookie),
    ("http.x_forwarded_for", Field::XForwardedFor),
    ("ip.src", Field::Src),
    ("tcp.dstport", Field::DstPort),
    ("ssl", Field::Ssl),
];

impl Field {
    fn parse(name: &str, index: Option<String>) -> Result<Field, String> {
        match (name, index) {
            ("http.request.headers", Some(h)) => {
                hyper::header::HeaderName::from_bytes(h.to_ascii_lowercase().as_bytes())
                    .map(Field::Header)
                    .map_err(|_| format!("`{h}` is not a header name"))
            }
            ("http.request.headers", None) => Err(
                "`http.request.headers` needs a header name: `http.request.headers[\"x-api-key\"]`"
                    .into(),
            ),
            (_, index) => match FIELDS.iter().find(|(n, _)| *n == name) {
                Some(_) if index.is_some() => Err(format!("`{name}` takes no index")),
                Some((_, f)) => Ok(f.clone()),
                None => {
                    let names: Vec<&str> = FIELDS.iter().map(|f| f.0).collect();
                    Err(format!(
                        "unknown field `{name}`; the fields are {}, http.request.headers[\"name\"]",
                        names.join(", ")
                    ))
                }
            },
        }
    }

    fn ty(&self) -> Type {
        match self {
            Field::Src => Type::Ip,
            Field::DstPort => Type::Int,
            Field::Ssl => Type::Bool,
            _ => Type::Bytes,
        }
    }

    /// The value of a bytes field. A named header field (`http.cookie`...)
    /// is its lines joined ([`combined`]); `http.request.headers["name"]`
    /// its first value here, though a test tries every value (see `test`).
    fn bytes<'a>(&self, r: &RequestView<'a>) -> Cow<'a, [u8]> {
        // The target's path, and its query if it has one.
        let split = || match memchr::memchr(b'?', r.uri) {
            Some(i) => (&r.uri[..i], Some(&r.uri[i + 1..])),
            None => (r.uri, None),
        };
        Cow::Borrowed(match self {
            Field::Host => r.host,
            Field::Method => r.method,
            Field::Uri => {
                let (path, query) = split();
                return match (crate::normal_path::normalized(path), query) {
                    (Cow::Borrowed(_), _) => Cow::Borrowed(r.uri),
                    (Cow::Owned(mut p), Some(q)) => {
                        p.push(b'?');
                        p.extend_from_slice(q);
                        Cow::Owned(p)
                    }
                    (owned, None) => owned,
                };
            }
            Field::Path => return crate::normal_path::normalized(split().0),
            Field::Query => split().1.unwrap_or_default(),
            Field::RawUri => r.uri,
            Field::RawPath => split().0,
            Field::Version => r.version,
            Field::UserAgent => return combined(r.headers, "user-agent", b", "),
            Field::Referer => return combined(r.headers, "referer", b", "),
            // As the application gets them (see `join_cookies`).
            Field::Cookie => return combined(r.headers, "cookie", b"; "),
            Field::XForwardedFor => return combined(r.headers, "x-forwarded-for", b", "),
            Field::Header(h) => r.headers.get(h).map_or(b"", |v| v.as_bytes()),
            Field::Src | Field::DstPort | Field::Ssl => b"",
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Cmp {
    fn holds<T: Ord + ?Sized>(self, a: &T, b: &T) -> bool {
        match self {
            Cmp::Eq => a == b,
            Cmp::Ne => a != b,
            Cmp::Lt => a < b,
            Cmp::Le => a <= b,
            Cmp::Gt => a > b,
            Cmp::Ge => a >= b,
        }
    }
}

#[derive(Clone, Debug)]
enum Test {
    Bytes(Cmp, Vec<u8>),
    Contains(Vec<u8>),
    Matches(Regex),
    InBytes(Vec<Vec<u8>>),
    Ip(Cmp, IpAddr),
    InNets(Vec<Net>),
    Int(Cmp, i64),
    InInts(Vec<(i64, i64)>),
    True,
}

#[derive(Clone, Debug)]
enum Node {
    Or(Vec<Node>),
    Xor(Vec<Node>),
    And(Vec<Node>),
    Not(Box<Node>),
    Test(Field, Test),
}

/// A compiled filter expression.
#[derive(Clone, Debug)]
pub struct Filter {
    source: String,
    root: Node,
}

/// Why an expression was refused: where, and what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterError {
    /// 1-based line and column in the expression.
    pub line: usize,
    /// 1-based column.
    pub col: usize,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for FilterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.col, self.message)
    }
}

impl std::error::Error for FilterError {}

type Pair<'i> = pest::iterators::Pair<'i, Rule>;

fn error_at(p: &Pair<'_>, message: impl Into<String>) -> FilterError {
    let (line, col) = p.as_span().start_pos().line_col();
    FilterError {
        line,
        col,
        message: message.into(),
    }
}

/// Regexes in filters are bounded as the SecLang compiler bounds its own.
const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// The parser and the evaluator recurse once per parenthesis (a run of
/// `not`s is a loop, folded to its parity).
const MAX_NESTING: usize = 64;
const MAX_LEN: usize = 64 << 10;

/// The deepest nesting of parentheses outside strings, and where it
/// first goes past [`MAX_NESTING`].
fn too_deep(source: &str) -> Option<(usize, usize)> {
    let (mut depth, mut line, mut col, mut in_string, mut escaped) = (0usize, 1, 0, false, false);
    for c in source.chars() {
        col += 1;
        if c == '\n' {
            line += 1;
            col = 0;
        }
        if in_string {
            match (escaped, c) {
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => escaped = false,
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '(' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Some((line, col));
                }
            }
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

impl Filter {
    /// Parses and type-checks `source`.
    pub fn parse(source: &str) -> Result<Filter, FilterError> {
        within_max_len(source, "an expression")?;
        if let Some((line, col)) = too_deep(source) {
            return Err(FilterError {
                line,
                col,
                message: format!("nested more than {MAX_NESTING} deep"),
            });
        }
        let mut pairs = FilterParser::parse(Rule::filter, source).map_err(|e| {
            syntax_error(e, "a field (`http.request.uri.path`), a comparison (`eq`, `contains`, `matches`, `in`), a value (`\"text\"`, `10.0.0.0/8`, `{...}`), `and`, `or`, `not` or a parenthesis")
        })?;
        let top = pairs.next().and_then(|f| f.into_inner().next());
        let Some(top) = top else {
            return Err(FilterError {
                line: 1,
                col: 1,
                message: "empty expression".into(),
            });
        };
        Ok(Filter {
            source: source.to_string(),
            root: build(top)?,
        })
    }

    /// The expression as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether the request matches.
    pub fn matches(&self, r: &RequestView<'_>) -> bool {
        eval(&self.root, r)
    }
}

/// Refuses a `what` (an expression, a key) longer than [`MAX_LEN`].
fn within_max_len(source: &str, what: &str) -> Result<(), FilterError> {
    if source.len() > MAX_LEN {
        return Err(FilterError {
            line: 1,
            col: 1,
            message: format!("{what} is at most {MAX_LEN} bytes"),
        });
    }
    Ok(())
}

/// A pest error as a [`FilterError`]: where, and what was `expected` there.
fn syntax_error(e: pest::error::Error<Rule>, expected: &str) -> FilterError {
    let (line, col) = match e.line_col {
        pest::error::LineColLocation::Pos(p) => p,
        pest::error::LineColLocation::Span(p, _) => p,
    };
    let message = match &e.variant {
        pest::error::ErrorVariant::ParsingError { .. } => {
            format!("syntax error: expected {expected} here")
        }
        pest::error::ErrorVariant::CustomError { message } => message.clone(),
    };
    FilterError { line, col, message }
}

/// A field named alone, whose value keys a request: what an upstream's
/// `hash` balance sends to one server (`http.request.uri`,
/// `http.request.headers["x-user-id"]`, `ip.src`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key {
    source: String,
    field: Field,
}

impl Key {
    /// Parses `source`, a bytes field or `ip.src`.
    pub fn parse(source: &str) -> Result<Key, FilterError> {
        within_max_len(source, "a key")?;
        let mut pairs = FilterParser::parse(Rule::key, source).map_err(|e| {
            syntax_error(
                e,
                "one field (`http.request.uri`, `http.request.headers[\"x-user-id\"]`, `ip.src`)",
            )
        })?;
        let Some(p) = pairs.next().and_then(|k| k.into_inner().next()) else {
            return Err(FilterError {
                line: 1,
                col: 1,
                message: "empty key: name a field".into(),
            });
        };
        let f = field(p.clone())?;
        if matches!(f.ty(), Type::Int | Type::Bool) {
            return Err(error_at(
                &p,
                format!(
                    "`{}` is {}: a key is a bytes field or `ip.src`",
                    p.as_str(),
                    f.ty().name()
                ),
            ));
        }
        Ok(Key {
            source: source.trim().to_string(),
            field: f,
        })
    }

    /// The key as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// `f` of the key's value in the request (an address: its bytes, 4 or
    /// 16, an IPv4-mapped one as IPv4; a header: its first value, empty
    /// when absent).
    pub fn with_value<T>(&self, r: &RequestView<'_>, f: impl FnOnce(&[u8]) -> T) -> T {
        match (&self.field, canonical(r.src)) {
            (Field::Src, IpAddr::V4(a)) => f(&a.octets()),
            (Field::Src, IpAddr::V6(a)) => f(&a.octets()),
            (other, _) => f(&other.bytes(r)),
        }
    }
}

fn build(p: Pair<'_>) -> Result<Node, FilterError> {
    match p.as_rule() {
        Rule::or_expr | Rule::xor_expr | Rule::and_expr => {
            let rule = p.as_rule();
            let mut kids = p
                .into_inner()
                .filter(|k| !matches!(k.as_rule(), Rule::kw_or | Rule::kw_xor | Rule::kw_and))
                .map(build)
                .collect::<Result<Vec<Node>, FilterError>>()?;
            if kids.len() == 1 {
                if let Some(only) = kids.pop() {
                    return Ok(only);
                }
            }
            Ok(match rule {
                Rule::or_expr => Node::Or(kids),
                Rule::xor_expr => Node::Xor(kids),
                _ => Node::And(kids),
            })
        }
        Rule::not_expr => {
            let mut nots = 0;
            let mut inner = None;
            for k in p.into_inner() {
                if k.as_rule() == Rule::not_op {
                    nots += 1;
                } else {
                    inner = Some(build(k)?);
                }
            }
            let mut node = inner.ok_or_else(|| FilterError {
                line: 1,
                col: 1,
                message: "`not` needs an operand".into(),
            })?;
            if nots % 2 == 1 {
                node = Node::Not(Box::new(node));
            }
            Ok(node)
        }
        Rule::primary => match p.clone().into_inner().next() {
            Some(k) => build(k),
            None => Err(error_at(&p, "empty expression")),
        },
        Rule::bool_field => {
            let fp = p.clone().into_inner().next();
            let field = match fp {
                Some(fp) => field(fp)?,
                None => return Err(error_at(&p, "expected a field")),
            };
            if field.ty() != Type::Bool {
                return Err(error_at(
                    &p,
                    format!(
                        "`{}` is {}, not a boolean: compare it (e.g. `{} eq \"...\"`)",
                        p.as_str().trim(),
                        field.ty().name(),
                        p.as_str().trim()
                    ),
                ));
            }
            Ok(Node::Test(field, Test::True))
        }
        Rule::comparison => comparison(p),
        _ => Err(error_at(&p, "unexpected token")),
    }
}

fn field(p: Pair<'_>) -> Result<Field, FilterError> {
    let mut name = "";
    let mut index = None;
    for k in p.clone().into_inner() {
        match k.as_rule() {
            Rule::field_name => name = k.as_str(),
            Rule::index => {
                if let Some(s) = k.into_inner().next() {
                    index = Some(string(s)?);
                }
            }
            _ => {}
        }
    }
    Field::parse(name, index).map_err(|m| error_at(&p, m))
}

/// The text of a `string` pair, escapes resolved.
fn string(p: Pair<'_>) -> Result<String, FilterError> {
    let raw = p.as_str();
    let inner = raw
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(raw);
    let mut out = Vec::with_capacity(inner.len());
    let mut bytes = inner.bytes();
    while let Some(b) = bytes.next() {
        if b != b'\\' {
            out.push(b);
            continue;
        }
        match bytes.next() {
            Some(b'x') => {
                let hex: Vec<u8> = bytes.by_ref().take(2).collect();
                let v = std::str::from_utf8(&hex)
                    .ok()
                    .filter(|h| h.len() == 2)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| error_at(&p, "`\\x` needs two hex digits"))?;
                out.push(v);
            }
            Some(c @ (b'"' | b'\\')) => out.push(c),
            Some(c) => {
                return Err(error_at(
                    &p,
                    format!(
                        "unknown escape `\\{}`: use `\\\"`, `\\\\` or `\\xHH`",
                        c as char
                    ),
                ))
            }
            None => return Err(error_at(&p, "a string ends in `\\`")),
        }
    }
    String::from_utf8(out).map_err(|_| error_at(&p, "a string is not UTF-8"))
}

fn ip(p: &Pair<'_>) -> Result<IpAddr, FilterError> {
    p.as_str()
        .parse::<IpAddr>()
        .map(canonical)
        .map_err(|_| error_at(p, format!("`{}` is not an IP address", p.as_str())))
}

fn net(p: &Pair<'_>) -> Result<Net, FilterError> {
    Net::parse(p.as_str()).map_err(|m| error_at(p, m))
}

fn int(p: &Pair<'_>) -> Result<i64, FilterError> {
    p.as_str()
        .parse::<i64>()
        .map_err(|_| error_at(p, format!("`{}` is not a 64-bit integer", p.as_str())))
}

fn range(p: &Pair<'_>) -> Result<(i64, i64), FilterError> {
    let (a, b) = p.as_str().split_once("..").unwrap_or((p.as_str(), ""));
    let parse = |s: &str| {
        s.parse::<i64>()
            .map_err(|_| error_at(p, format!("`{s}` is not a 64-bit integer")))
    };
    let (a, b) = (parse(a)?, parse(b)?);
    if a > b {
        return Err(error_at(p, format!("the range {a}..{b} is empty")));
    }
    Ok((a, b))
}

fn comparison(p: Pair<'_>) -> Result<Node, FilterError> {
    let whole = p.clone();
    let mut it = p.into_inner();
    let (Some(fp), Some(op), Some(value)) = (it.next(), it.next(), it.next()) else {
        return Err(error_at(&whole, "expected `field operator value`"));
    };
    let field = field(fp)?;
    let ty = field.ty();
    let op_text = op.as_str().to_ascii_lowercase();
    let Some(v) = value.clone().into_inner().next() else {
        return Err(error_at(&value, "expected a value"));
    };
    let mismatch = |what: &str| {
        error_at(
            &value,
            format!(
                "`{}` is {}; `{op_text}` cannot take {what}",
                whole.as_str().split_whitespace().next().unwrap_or(""),
                ty.name()
            ),
        )
    };
    let cmp = match op_text.as_str() {
        "eq" | "==" => Some(Cmp::Eq),
        "ne" | "!=" => Some(Cmp::Ne),
        "lt" | "<" => Some(Cmp::Lt),
        "le" | "<=" => Some(Cmp::Le),
        "gt" | ">" => Some(Cmp::Gt),
        "ge" | ">=" => Some(Cmp::Ge),
        _ => None,
    };
    let test = match (op_text.as_str(), ty, v.as_rule()) {
        (_, Type::Bool, _) => {
            return Err(error_at(
                &op,
                "a boolean field stands alone (`ssl`, `not ssl`)",
            ))
        }
        (_, Type::Bytes, Rule::string) if cmp.is_some() => {
            Test::Bytes(cmp.unwrap_or(Cmp::Eq), string(v)?.into_bytes())
        }
        ("contains", Type::Bytes, Rule::string) => Test::Contains(string(v)?.into_bytes()),
        ("matches" | "~", Type::Bytes, Rule::string) => {
            let pattern = string(v.clone())?;
            let re = regex::bytes::RegexBuilder::new(&pattern)
                .size_limit(REGEX_SIZE_LIMIT)
                .build()
                .map_err(|e| error_at(&v, format!("bad regex: {e}")))?;
            Test::Matches(re)
        }
        ("in", Type::Bytes, Rule::set) => {
            let mut items = Vec::new();
            for item in v.into_inner().filter_map(|i| i.into_inner().next()) {
                if item.as_rule() != Rule::string {
                    return Err(mismatch("a non-string set member"));
                }
                items.push(string(item)?.into_bytes());
            }
            Test::InBytes(items)
        }
        ("eq" | "==" | "ne" | "!=", Type::Ip, Rule::ip) => {
            Test::Ip(cmp.unwrap_or(Cmp::Eq), ip(&v)?)
        }
        ("in", Type::Ip, Rule::set) => {
            let mut nets = Vec::new();
            for item in v.into_inner().filter_map(|i| i.into_inner().next()) {
                match item.as_rule() {
                    Rule::cidr => nets.push(net(&item)?),
                    Rule::ip => nets.push(Net::host(ip(&item)?)),
                    _ => return Err(mismatch("a set member that is not an address or a network")),
                }
            }
            Test::InNets(nets)
        }
        (_, Type::Int, Rule::int) if cmp.is_some() => Test::Int(cmp.unwrap_or(Cmp::Eq), int(&v)?),
        ("in", Type::Int, Rule::set) => {
            let mut ranges = Vec::new();
            for item in v.into_inner().filter_map(|i| i.into_inner().next()) {
                match item.as_rule() {
                    Rule::int => {
                        let n = int(&item)?;
                        ranges.push((n, n));
                    }
                    Rule::range => ranges.push(range(&item)?),
                    _ => return Err(mismatch("a set member that is not an integer or a range")),
                }
            }
            Test::InInts(ranges)
        }
        (_, _, Rule::set) => return Err(mismatch("a set (only `in` does)")),
        (_, Type::Bytes, _) => return Err(mismatch("this value (bytes compare with \"strings\")")),
        (_, Type::Ip, _) => {
            return Err(mismatch(
                "this value (use `eq 10.0.0.1` or `in {10.0.0.0/8 192.0.2.1}`)",
            ))
        }
        (_, Type::Int, _) => {
            return Err(mismatch(
                "this value (use an integer, or `in {80 443 8000..8999}`)",
            ))
        }
    };
    Ok(Node::Test(field, test))
}

fn eval(n: &Node, r: &RequestView<'_>) -> bool {
    match n {
        Node::Or(k) => k.iter().any(|n| eval(n, r)),
        Node::And(k) => k.iter().all(|n| eval(n, r)),
        Node::Xor(k) => k.iter().filter(|n| eval(n, r)).count() % 2 == 1,
        Node::Not(k) => !eval(k, r),
        Node::Test(f, t) => test(f, t, r),
    }
}

fn test(f: &Field, t: &Test, r: &RequestView<'_>) -> bool {
    // A header field is true when any of its values passes.
    if let Field::Header(h) = f {
        return r
            .headers
            .get_all(h)
            .iter()
            .any(|v| test_bytes(t, v.as_bytes()));
    }
    match t {
        Test::Ip(c, a) => c.holds(&canonical(r.src), a),
        Test::InNets(nets) => nets.iter().any(|n| n.contains(r.src)),
        Test::Int(c, v) => c.holds(&i64::from(r.dst_port), v),
        Test::InInts(ranges) => {
            let p = i64::from(r.dst_port);
            ranges.iter().any(|&(a, b)| a <= p && p <= b)
        }
        Test::True => r.tls,
        _ => test_bytes(t, &f.bytes(r)),
    }
}

fn test_bytes(t: &Test, v: &[u8]) -> bool {
    match t {
        Test::Bytes(c, s) => c.holds(v, s.as_slice()),
        Test::Contains(s) => memchr::memmem::find(v, s).is_some(),
        Test::Matches(re) => re.is_match(v),
        Test::InBytes(items) => items.iter().any(|i| i == v),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view<'a>(headers: &'a hyper::HeaderMap, uri: &'a str, src: &str) -> RequestView<'a> {
        RequestView {
            host: b"example.com",
            method: b"GET",
            uri: uri.as_bytes(),
            version: b"HTTP/1.1",
            headers,
            src: src.parse().unwrap(),
            dst_port: 8443,
            tls: true,
        }
    }

    fn check(expr: &str, uri: &str, src: &str) -> bool {
        let mut h = hyper::HeaderMap::new();
        h.append("user-agent", "curl/8.0".parse().unwrap());
        h.append("x-tag", "one".parse().unwrap());
        h.append("x-tag", "two".parse().unwrap());
        Filter::parse(expr)
            .unwrap_or_else(|e| panic!("{expr}: {e}"))
            .matches(&view(&h, uri, src))
    }

    #[test]
    fn the_issue_example() {
        let e = r#"http.request.uri.path matches "^/admin" and not ip.src in {10.0.0.0/8}"#;
        assert!(check(e, "/admin/users?x=1", "192.0.2.7"));
        assert!(!check(e, "/admin/users", "10.1.2.3"));
        assert!(!check(e, "/shop", "192.0.2.7"));
        // A dual-stack socket reports IPv4 clients as mapped IPv6.
        assert!(!check(e, "/admin", "::ffff:10.9.9.9"));
    }

    #[test]
    fn the_path_is_read_normalized_and_raw_as_sent() {
        let e = r#"http.request.uri.path matches "^/admin""#;
        for uri in [
            "/admin",
            "/%61dmin",
            "//admin",
            "/x/../admin",
            "/./admin/users",
        ] {
            assert!(check(e, uri, "192.0.2.7"), "{uri}");
        }
        assert!(!check(e, "/%2Fadmin", "192.0.2.7"));
        let cases: &[(&str, bool)] = &[
            (r#"http.request.uri eq "/admin/?q=%61""#, true),
            (r#"raw.http.request.uri eq "/x/../%61dmin/?q=%61""#, true),
            (r#"raw.http.request.uri.path eq "/x/../%61dmin/""#, true),
            (r#"raw.http.request.uri.query eq "q=%61""#, true),
            (r#"http.request.uri.query eq "q=%61""#, true),
        ];
        for (expr, want) in cases {
            assert_eq!(
                check(expr, "/x/../%61dmin/?q=%61", "192.0.2.7"),
                *want,
                "{expr}"
            );
        }
    }

    #[test]
    fn a_header_sent_twice_is_read_whole() {
        let mut h = hyper::HeaderMap::new();
        h.append("cookie", "a=1".parse().unwrap());
        h.append("cookie", "debug=1".parse().unwrap());
        h.append("user-agent", "curl/8.0".parse().unwrap());
        h.append("user-agent", "bad-bot".parse().unwrap());
        h.append("x-forwarded-for", "192.0.2.1".parse().unwrap());
        let cases: &[(&str, bool)] = &[
            (r#"http.cookie contains "debug=1""#, true),
            (r#"http.cookie eq "a=1; debug=1""#, true),
            (r#"http.user_agent contains "bad-bot""#, true),
            (r#"http.user_agent eq "curl/8.0, bad-bot""#, true),
            (r#"http.x_forwarded_for eq "192.0.2.1""#, true),
            (r#"http.referer eq """#, true),
        ];
        for (expr, want) in cases {
            let f = Filter::parse(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
            assert_eq!(f.matches(&view(&h, "/", "192.0.2.7")), *want, "{expr}");
        }
    }

    #[test]
    fn operators_and_fields() {
        let cases: &[(&str, bool)] = &[
            (r#"http.host eq "example.com""#, true),
            (r#"http.host == "example.org""#, false),
            (r#"http.host ne "example.org""#, true),
            (r#"http.request.method in {"GET" "HEAD"}"#, true),
            (r#"http.request.method in {"POST", "PUT"}"#, false),
            (r#"http.request.uri.query contains "id=""#, true),
            (r#"http.request.uri.query eq "id=5""#, true),
            (r#"http.request.uri ~ "^/a/b\\?""#, true),
            (r#"http.user_agent matches "(?i)^CURL/""#, true),
            (r#"http.request.headers["X-Tag"] eq "two""#, true),
            (r#"http.request.headers["x-missing"] eq """#, false),
            (r#"http.referer eq """#, true),
            ("ip.src eq 192.0.2.7", true),
            ("ip.src ne 192.0.2.7", false),
            ("ip.src in {2001:db8::/32 192.0.2.0/24}", true),
            ("tcp.dstport in {80 443 8000..8999}", true),
            ("tcp.dstport lt 1024", false),
            ("tcp.dstport ge 8443", true),
            ("ssl", true),
            ("not ssl", false),
            ("!ssl || ssl", true),
            ("ssl xor ssl", false),
            ("ssl ^^ not ssl", true),
            (
                r#"(http.host eq "x" or ssl) and not (tcp.dstport eq 1)"#,
                true,
            ),
            (r#"http.host eq "x" or ssl and tcp.dstport eq 1"#, false),
            (r#"http.request.uri.path eq "\x2fa\x2fb""#, true),
            (r#"http.request.uri.path lt "/b""#, true),
            ("not not ssl", true),
        ];
        for (expr, want) in cases {
            assert_eq!(check(expr, "/a/b?id=5", "192.0.2.7"), *want, "{expr}");
        }
    }

    #[test]
    fn errors_name_the_place_and_the_fix() {
        let cases: &[(&str, (usize, usize), &str)] = &[
            ("http.hots eq \"a\"", (1, 1), "unknown field `http.hots`"),
            ("ip.src eq \"10.0.0.1\"", (1, 11), "is an IP address"),
            (
                "ip.src in {10.0.0.0/33}",
                (1, 12),
                "prefix length is 0 to 32",
            ),
            ("http.host contains 5", (1, 20), "bytes compare with"),
            ("http.host matches \"(\"", (1, 19), "bad regex"),
            ("http.host eq", (1, 13), "syntax error"),
            ("ssl eq 1", (1, 5), "boolean field stands alone"),
            ("http.host", (1, 1), "not a boolean"),
            ("tcp.dstport in {5..1}", (1, 17), "is empty"),
            (
                "http.host eq \"a\" and\n  http.cookie eq \"\\q\"",
                (2, 18),
                "unknown escape",
            ),
            (
                "http.request.headers eq \"a\"",
                (1, 1),
                "needs a header name",
            ),
            (
                "http.host in {\"a\" 10.0.0.1}",
                (1, 14),
                "non-string set member",
            ),
            ("", (1, 1), "syntax error"),
        ];
        for (expr, at, text) in cases {
            let e = Filter::parse(expr).expect_err(expr);
            assert_eq!((e.line, e.col), *at, "{expr}: {e}");
            assert!(e.message.contains(text), "{expr}: {e}");
        }
    }

    #[test]
    fn hostile_expressions_are_errors_not_panics() {
        let ok = format!("{}ssl{}", "(".repeat(60), ")".repeat(60));
        assert!(Filter::parse(&ok).is_ok());
        let deep = format!("{}ssl{}", "(".repeat(10_000), ")".repeat(10_000));
        let e = Filter::parse(&deep).expect_err("too deep");
        assert!(e.message.contains("nested"), "{e}");
        let nots = format!("{}ssl", "not ".repeat(100_000));
        assert!(
            Filter::parse(&nots).is_err(),
            "`not` chains are bounded by length"
        );
        let nots = format!("{}ssl", "! ".repeat(30_001));
        assert!(!Filter::parse(&nots).expect("parses").matches(&{
            let h = Box::leak(Box::new(hyper::HeaderMap::new()));
            view(h, "/", "192.0.2.1")
        }));
        for bad in [
            "((((",
            "\"",
            "{",
            "http.host in {",
            "ip.src in {::::::/1}",
            "\u{0}",
            "tcp.dstport eq 99999999999999999999",
            "http.host eq \"\\x4\"",
            "http.host matches \"a{100000}{100000}\"",
        ] {
            assert!(Filter::parse(bad).is_err(), "{bad:?}");
        }
    }
}
