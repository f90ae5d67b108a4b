//! Variables: where each one's values come from, copied into reusable buffers.

use super::fmt::{civil, push_i64, push_u64};
use super::inputs::Inputs;
use super::memo::Origin;
use super::state::RuleState;
use super::values::{ValItem, ValList};
use crate::body::xml::XPath;
use crate::body::Processor;
use crate::collection::{Collection, Entry};
use crate::sources::{is_volatile, stable_coll, Coll};
use std::io::Write as _;
use waf_compiler::ir::{MacroPart, MacroString, Program, Selector, Target};
use waf_compiler::names::Variable as V;

/// Whether a key passes a target's selector.
pub(super) fn selector_matches(program: &Program, sel: &Selector, key: &[u8]) -> bool {
    match sel {
        Selector::All => true,
        Selector::Key(k) => key.eq_ignore_ascii_case(k.as_bytes()),
        Selector::Regex(id) => program.selector_regexes[id.index()].is_match(key),
        Selector::XPath(_) => true,
    }
}

/// A read-only view of a transaction's variables: its inputs and the state
/// rules built. Borrowing the two parts (not the whole transaction) lets the
/// evaluation read variables while it writes into its cache.
#[derive(Clone, Copy)]
pub(super) struct Vars<'a, 'r> {
    pub i: &'a Inputs,
    pub s: &'a RuleState<'r>,
}

/// The key of an instance (for exclusions and `MATCHED_VAR_NAME`).
pub(super) fn origin_key(i: &Inputs, var: V, origin: Origin) -> &[u8] {
    match origin {
        Origin::Coll { coll, idx, .. } => {
            if coll == Coll::XmlAttrs {
                return b"//@*";
            }
            if matches!(var, V::MultipartName | V::MultipartFilename) {
                return b"";
            }
            i.coll(coll)
                .entries()
                .get(idx as usize)
                .map_or(&b""[..], |e| e.key.as_slice())
        }
        Origin::Scalar(V::Xml) => b"/*",
        Origin::Scalar(_) => b"",
    }
}

/// Calls `f(origin, key, value)` for each entry of memoizable collection
/// `id` that `target` selects (`names`: the value read is the key).
pub(super) fn for_each_stable<'a>(
    inputs: &'a Inputs,
    program: &Program,
    target: &Target,
    id: Coll,
    names: bool,
    mut f: impl FnMut(Origin, &'a [u8], &'a [u8]),
) {
    // MULTIPART_NAME/FILENAME have no keys: the selector does not apply.
    let keyless = id.keyless();
    let mut emit = |i: usize, e: &'a Entry| {
        let origin = Origin::Coll {
            coll: id,
            names,
            idx: i as u32,
        };
        let key: &[u8] = if keyless { b"" } else { &e.key };
        f(origin, key, if names { &e.key } else { &e.value });
    };
    if let (false, Selector::Key(k)) = (keyless, &target.selector) {
        // One key (`REQUEST_HEADERS:User-Agent`): its entries through the
        // collection's index, not a comparison with every entry's key.
        let mut same = inputs.coll(id).with_key(k.as_bytes());
        while let Some((i, e)) = same.next_indexed() {
            emit(i, e);
        }
        return;
    }
    for (i, e) in inputs.coll(id).iter().enumerate() {
        if keyless || selector_matches(program, &target.selector, &e.key) {
            emit(i, e);
        }
    }
}

impl Vars<'_, '_> {
    /// Appends `m` with its `%{...}` macros expanded (the first value of the
    /// named variable) to `out`.
    pub(super) fn expand_into(&self, m: &MacroString, out: &mut Vec<u8>) {
        for p in &m.parts {
            match p {
                MacroPart::Literal(s) => out.extend_from_slice(s.as_bytes()),
                MacroPart::Var { variable, key } => {
                    self.first_value_into(*variable, key.as_deref(), out)
                }
            }
        }
    }

    /// Appends the values of `target` (selector applied; `&` counts them).
    pub(super) fn collect_into(&self, program: &Program, target: &Target, out: &mut ValList) {
        let start = out.items.len();
        self.collect_all(program, target, out);
        if target.count {
            let n = out.items.len() - start;
            out.items.truncate(start);
            out.push_with(target.variable, None, |b| push_i64(b, n as i64));
        }
    }

    fn collect_all(&self, program: &Program, target: &Target, out: &mut ValList) {
        let var = target.variable;
        let sel = &target.selector;
        if let Some((id, names)) = stable_coll(var) {
            for_each_stable(self.i, program, target, id, names, |origin, key, value| {
                out.push(var, key, value, Some(origin))
            });
            return;
        }
        // The selector is dispatched once per scan, not per entry.
        let from = |c: &Collection, out: &mut ValList| match sel {
            // The common case (`TX:score`): the key's entries, by the index.
            Selector::Key(k) => {
                for e in c.with_key(k.as_bytes()) {
                    out.push(var, &e.key, &e.value, None);
                }
            }
            // `TX:/^header_name_920450_/` tests every `TX` key (~120 per
            // request): its regex is looked up once, not per key.
            // A key `setvar` wrote with a constant name, or a computed one
            // whose beginning decides, carries the answer.
            Selector::Regex(id) => {
                let rx = &program.selector_regexes[id.index()];
                let matches = |e: &Entry| match e.selectors.get(id.index()) {
                    Some(m) => m,
                    None => rx.is_match(&e.key),
                };
                for e in c.iter().filter(|e| matches(e)) {
                    out.push(var, &e.key, &e.value, None);
                }
            }
            // Every key passes (as `selector_matches` answers).
            Selector::All | Selector::XPath(_) => {
                for e in c.iter() {
                    out.push(var, &e.key, &e.value, None);
                }
            }
        };
        match var {
            V::Tx => from(&self.s.tx, out),
            V::Env => from(&self.s.env, out),
            V::Ip | V::Session | V::User | V::Global | V::Resource => {
                if let Some(c) = self.s.persistent(var) {
                    from(c, out)
                }
            }
            V::MatchedVars | V::MatchedVarsNames => {
                for e in self.s.matched_vars.iter() {
                    if selector_matches(program, sel, &e.key) {
                        let v = if var == V::MatchedVars {
                            &e.value
                        } else {
                            &e.key
                        };
                        out.push(var, &e.key, v, None);
                    }
                }
            }
            V::Xml => {
                if let Selector::XPath(x) = sel {
                    match XPath::parse(x) {
                        XPath::RootText => {
                            if self.i.parsed.xml_root_set {
                                let t = &self.i.parsed.xml_root;
                                out.push(var, b"/*", t, Some(Origin::Scalar(V::Xml)));
                            }
                        }
                        XPath::Attributes => {
                            for (i, e) in self.i.parsed.xml_attrs.iter().enumerate() {
                                let origin = Origin::Coll {
                                    coll: Coll::XmlAttrs,
                                    names: false,
                                    idx: i as u32,
                                };
                                out.push(var, b"//@*", &e.value, Some(origin));
                            }
                        }
                        XPath::Unsupported => {}
                    }
                }
            }
            _ => {
                // v3's anchored variables always yield one value, empty when unset
                // (`AnchoredVariable::evaluate`), so `!@endsWith .pdf` matches an
                // absent REQUEST_BASENAME.
                let origin = (!is_volatile(var)).then_some(Origin::Scalar(var));
                let start = out.buf.len();
                if self.scalar_into(var, &mut out.buf) || is_anchored(var) {
                    out.items.push(ValItem {
                        var,
                        key: (start, start),
                        value: (start, out.buf.len()),
                        origin,
                    });
                } else {
                    out.buf.truncate(start);
                }
            }
        }
    }

    /// Appends the first value of `var` (with `key`, when given) to `out`,
    /// for macro expansion (`%{REQUEST_HEADERS.host}`, `%{TX.score}`).
    pub(super) fn first_value_into(&self, var: V, key: Option<&str>, out: &mut Vec<u8>) {
        let first = |c: &Collection, names: bool, out: &mut Vec<u8>| {
            let e = match key {
                Some(k) => c.with_key(k.as_bytes()).next(),
                None => c.iter().next(),
            };
            if let Some(e) = e {
                out.extend_from_slice(if names { &e.key } else { &e.value });
            }
        };
        if let Some((id, names)) = stable_coll(var) {
            let c = self.i.coll(id);
            if id.keyless() {
                if let Some(e) = c.iter().next() {
                    out.extend_from_slice(&e.value);
                }
            } else {
                first(c, names, out);
            }
            return;
        }
        match var {
            // `%{TX.0}`..`%{TX.9}`: captures, read back right after they
            // were written, from where they were.
            V::Tx => match key.map(str::as_bytes) {
                Some(&[d]) if d.is_ascii_digit() => {
                    if let Some(v) = self.s.capture(usize::from(d - b'0')) {
                        out.extend_from_slice(v);
                    }
                }
                _ => first(&self.s.tx, false, out),
            },
            V::Env => first(&self.s.env, false, out),
            V::Ip | V::Session | V::User | V::Global | V::Resource => {
                if let Some(c) = self.s.persistent(var) {
                    first(c, false, out)
                }
            }
            V::MatchedVars => first(&self.s.matched_vars, false, out),
            V::MatchedVarsNames => first(&self.s.matched_vars, true, out),
            V::Xml => {}
            _ => {
                self.scalar_into(var, out);
            }
        }
    }

    /// Whether REQUEST_BODY is set: body processing done, access on, a body,
    /// and no structured processor (XML, multipart) already parsed it, unless
    /// `ctl:forceRequestBodyVariable=On`.
    ///
    /// This deliberately differs from libmodsecurity v3, which always sets it:
    /// CRS expects the raw body of an XML or multipart request not to be
    /// inspected as text (element names would match), lists the resulting v3
    /// failures in its nginx overrides, and Coraza behaves as we do.
    fn body_seen(&self) -> bool {
        let structured = matches!(
            self.i.processor,
            Some(Processor::Xml | Processor::Multipart)
        );
        self.i.body_done
            && self.s.request_body_access
            && !self.i.body.is_empty()
            && (!structured || self.s.force_request_body_variable)
    }

    /// Appends the value of a scalar variable to `out`; false (nothing
    /// written) when it is not set.
    pub(super) fn scalar_into(&self, var: V, out: &mut Vec<u8>) -> bool {
        let flag = |b: bool, out: &mut Vec<u8>| {
            out.push(if b { b'1' } else { b'0' });
            true
        };
        let num = |n: u64, out: &mut Vec<u8>| {
            push_u64(out, n);
            true
        };
        let bytes = |b: &[u8], out: &mut Vec<u8>| {
            out.extend_from_slice(b);
            true
        };
        let mp = self.i.body_result.multipart.as_ref();
        let now = || civil(epoch_secs());
        let mpflag = |f: fn(&crate::body::multipart::MultipartFlags) -> bool, out: &mut Vec<u8>| {
            mp.is_some_and(|m| flag(f(m), out))
        };
        match var {
            V::RequestMethod => bytes(&self.i.method, out),
            V::RequestUri => bytes(&self.i.uri, out),
            V::RequestUriRaw => bytes(&self.i.uri_raw, out),
            V::RequestFilename | V::PathInfo => bytes(&self.i.filename, out),
            V::RequestBasename => self
                .i
                .basename
                .is_some_and(|(s, e)| bytes(&self.i.filename[s..e], out)),
            V::RequestLine => bytes(&self.i.request_line, out),
            V::RequestProtocol => bytes(&self.i.protocol, out),
            V::QueryString => self
                .i
                .query_string
                .is_some_and(|(s, e)| bytes(&self.i.uri_raw[s..e], out)),
            // v3 sets these after body processing whenever the body is not empty.
            V::RequestBody => self.body_seen() && bytes(&self.i.body, out),
            // Set whatever processor read the body (REQUEST_BODY itself is
            // not, for XML and multipart: see `body_seen`), as in v3.
            V::RequestBodyLength => {
                self.i.body_done
                    && self.s.request_body_access
                    && !self.i.body.is_empty()
                    && num(self.i.body.len() as u64, out)
            }
            V::FullRequest => {
                if !self.i.body_done {
                    return false;
                }
                for e in self.i.headers.iter() {
                    out.extend_from_slice(&e.key);
                    out.extend_from_slice(b": ");
                    out.extend_from_slice(&e.value);
                    out.push(b'\n');
                }
                out.extend_from_slice(b"\n\n");
                out.extend_from_slice(&self.i.body);
                true
            }
            V::RemoteAddr => bytes(&self.i.remote_addr, out),
            V::RemotePort => num(u64::from(self.i.remote_port), out),
            V::ServerAddr => bytes(&self.i.server_addr, out),
            V::ServerPort => num(u64::from(self.i.server_port), out),
            V::ServerName => self
                .i
                .headers
                .get(b"host")
                .is_some_and(|h| bytes(h.split(|&c| c == b':').next().unwrap_or(h), out)),
            V::UniqueId => bytes(self.i.unique_id.as_bytes(), out),
            V::SessionId => bytes(&self.s.session_id, out),
            V::UserId => bytes(&self.s.user_id, out),
            // libmodsecurity 3.0.9 leaves the value empty after a urlencoded
            // body that parsed (it is `0` after the other processors and
            // without a body); numeric tests read both as 0.
            V::ReqbodyError | V::ReqbodyProcessorError => {
                if !self.i.body_done {
                    return false;
                }
                let error = self.i.body_result.reqbody_error;
                let parsed_urlencoded =
                    self.i.processor == Some(Processor::Urlencoded) && !self.i.body.is_empty();
                if !parsed_urlencoded || error {
                    flag(error, out);
                }
                true
            }
            V::ReqbodyErrorMsg | V::ReqbodyProcessorErrorMsg => {
                self.i.body_result.reqbody_error
                    && bytes(&self.i.body_result.reqbody_error_msg, out)
            }
            V::ReqbodyProcessor => self
                .i
                .processor
                .is_some_and(|p| bytes(p.name().as_bytes(), out)),
            V::UrlencodedError => flag(self.i.body_result.urlencoded_error, out),
            V::InboundDataError => flag(self.i.inbound_data_error, out),
            V::OutboundDataError => flag(self.i.outbound_data_error, out),
            V::MscPcreError | V::MscPcreLimitsExceeded => flag(false, out),
            V::MultipartStrictError => mpflag(|m| m.strict_error(), out),
            V::MultipartUnmatchedBoundary => {
                mp.is_some_and(|m| num(u64::from(m.unmatched_boundary), out))
            }
            V::MultipartBoundaryQuoted => mpflag(|m| m.boundary_quoted, out),
            V::MultipartBoundaryWhitespace => mpflag(|m| m.boundary_whitespace, out),
            V::MultipartDataBefore => mpflag(|m| m.data_before, out),
            V::MultipartDataAfter => mpflag(|m| m.data_after, out),
            V::MultipartHeaderFolding => mpflag(|m| m.header_folding, out),
            V::MultipartLfLine => mpflag(|m| m.lf_line, out),
            V::MultipartCrlfLfLines => mpflag(|m| m.crlf_lf_lines(), out),
            V::MultipartMissingSemicolon => mpflag(|m| m.missing_semicolon, out),
            V::MultipartInvalidQuoting => mpflag(|m| m.invalid_quoting, out),
            V::MultipartInvalidPart => mpflag(|m| m.invalid_part, out),
            V::MultipartInvalidHeaderFolding => mpflag(|m| m.invalid_header_folding, out),
            V::MultipartFileLimitExceeded => mpflag(|m| m.file_limit_exceeded, out),
            V::FilesCombinedSize => self
                .i
                .body_result
                .files_combined_size
                .is_some_and(|n| num(n, out)),
            // As libmodsecurity 3.0.9 writes it: a double (`6.000000`),
            // empty while no argument was counted. (It counts query and
            // urlencoded arguments only; every argument counts here, so a
            // JSON or multipart body cannot slip past a size rule.)
            V::ArgsCombinedSize => {
                let args = &self.i.parsed.args;
                if args.len() > 0 {
                    num(
                        args.iter()
                            .map(|e| (e.key.len() + e.value.len()) as u64)
                            .sum(),
                        out,
                    );
                    out.extend_from_slice(b".000000");
                }
                true
            }
            V::FullRequestLength => {
                num((self.i.request_line.len() + self.i.body.len()) as u64, out)
            }
            V::ResponseStatus | V::Status => {
                self.i.status != 0 && num(u64::from(self.i.status), out)
            }
            V::StatusLine => {
                if self.i.status == 0 {
                    return false;
                }
                out.extend_from_slice(&self.i.response_protocol);
                let _ = write!(out, " {}", self.i.status);
                true
            }
            V::ResponseProtocol => {
                !self.i.response_protocol.is_empty() && bytes(&self.i.response_protocol, out)
            }
            V::ResponseBody => self.i.response_body_seen && bytes(&self.i.response_body, out),
            V::ResponseContentType => self
                .i
                .response_content_type()
                .is_some_and(|c| bytes(c, out)),
            V::ResponseContentLength => {
                self.i.response_body_seen && num(self.i.response_body.len() as u64, out)
            }
            V::Duration => num(self.i.started.elapsed().as_micros() as u64, out),
            V::HighestSeverity => self
                .s
                .highest_severity
                .is_some_and(|h| num(u64::from(h), out)),
            V::MatchedVar => bytes(&self.s.matched_var, out),
            V::MatchedVarName => bytes(self.s.matched_var_name.as_bytes(), out),
            V::AuthType => self
                .i
                .headers
                .get(b"authorization")
                .is_some_and(|a| bytes(a.split(|&c| c == b' ').next().unwrap_or(a), out)),
            V::TimeEpoch => num(epoch_secs(), out),
            V::Time => {
                let t = now();
                let _ = write!(out, "{:02}:{:02}:{:02}", t.3, t.4, t.5);
                true
            }
            V::TimeYear => num(now().0, out),
            V::TimeMon => num(now().1, out),
            V::TimeDay => num(now().2, out),
            V::TimeHour => num(now().3, out),
            V::TimeMin => num(now().4, out),
            V::TimeSec => num(now().5, out),
            V::TimeWday => num(now().6, out),
            // Collections: read entry by entry by `collect_all` (and
            // `first_value_into`), never as one scalar.
            V::Args
            | V::ArgsGet
            | V::ArgsGetNames
            | V::ArgsNames
            | V::ArgsPost
            | V::ArgsPostNames
            | V::Env
            | V::Files
            | V::FilesNames
            | V::FilesSizes
            | V::Global
            | V::Ip
            | V::MatchedVars
            | V::MatchedVarsNames
            | V::MultipartFilename
            | V::MultipartName
            | V::MultipartPartHeaders
            | V::RequestCookies
            | V::RequestCookiesNames
            | V::RequestHeaders
            | V::RequestHeadersNames
            | V::Resource
            | V::ResponseHeaders
            | V::ResponseHeadersNames
            | V::Session
            | V::Tx
            | V::User
            | V::Xml => false,
            // Known to v3 but without a value here: nothing sets them in a
            // self-contained engine (no temporary files kept, no GeoIP
            // look-up, no `setsid`/`setuid`, no reverse DNS, no `RULE`
            // context, no `SecWebAppId`). Rules on them see an unset variable.
            V::FilesTmpContent
            | V::FilesTmpNames
            | V::Geo
            | V::ModsecBuild
            | V::RemoteHost
            | V::RemoteUser
            | V::Rule
            | V::WebAppId => false,
        }
    }
}

/// The variables libmodsecurity v3 keeps as `AnchoredVariable`s in its
/// transaction (`transaction.h`): present, possibly empty, in every phase.
fn is_anchored(var: V) -> bool {
    use V::*;
    matches!(
        var,
        ArgsCombinedSize
            | AuthType
            | FilesCombinedSize
            | FullRequest
            | FullRequestLength
            | InboundDataError
            | MatchedVar
            | MatchedVarName
            | MultipartBoundaryQuoted
            | MultipartBoundaryWhitespace
            | MultipartCrlfLfLines
            | MultipartDataAfter
            | MultipartDataBefore
            | MultipartFileLimitExceeded
            | MultipartHeaderFolding
            | MultipartInvalidHeaderFolding
            | MultipartInvalidPart
            | MultipartInvalidQuoting
            | MultipartLfLine
            | MultipartMissingSemicolon
            | MultipartStrictError
            | MultipartUnmatchedBoundary
            | OutboundDataError
            | PathInfo
            | QueryString
            | RemoteAddr
            | RemoteHost
            | RemotePort
            | ReqbodyError
            | ReqbodyErrorMsg
            | ReqbodyProcessorError
            | ReqbodyProcessorErrorMsg
            | ReqbodyProcessor
            | RequestBasename
            | RequestBody
            | RequestBodyLength
            | RequestFilename
            | RequestLine
            | RequestMethod
            | RequestProtocol
            | RequestUri
            | RequestUriRaw
            | Resource
            | ResponseBody
            | ResponseContentLength
            | ResponseProtocol
            | ResponseStatus
            | ServerAddr
            | ServerName
            | ServerPort
            | SessionId
            | UniqueId
            | UrlencodedError
            | UserId
    )
}

pub(super) use crate::store::epoch_secs;
