//! Checking and compiling operators, with their prefilters.

use super::{macro_string, Lowerer};
use crate::ast::{Item, OperatorAst, RuleAst, Text};
use crate::diag::{closest, Code, Diagnostic};
use crate::ir::*;
use crate::names::{ArgKind, Operator as O};
use crate::rx::CompiledRx;
use std::net::IpAddr;
use std::path::PathBuf;

impl Lowerer<'_> {
    pub(super) fn operator(&mut self, op: &OperatorAst, _link: &RuleAst) -> OpId {
        let Some(name) = O::lookup(&op.name) else {
            let mut d = Diagnostic::error(
                Code::UnknownOperator,
                op.name_span,
                format!("unknown operator `@{}`", op.name),
            )
            .with_label("not a ModSecurity operator");
            if let Some(c) = closest(&op.name, O::ALL.iter().map(|o| o.name())) {
                d = d.with_hint(format!("did you mean `@{c}`?"));
            }
            self.error(d);
            return self.placeholder(op);
        };
        let empty = Text::verbatim(op.span.file, op.span.end as usize, "");
        let arg = op.argument.clone().unwrap_or(empty);
        let has_arg = !arg.value.trim().is_empty();
        match name.argument() {
            ArgKind::Required if !has_arg => {
                self.error(
                    Diagnostic::error(
                        Code::BadArgument,
                        op.span,
                        format!("`@{}` needs an argument", name.name()),
                    )
                    .with_hint(format!("write `@{} ARGUMENT`", name.name())),
                );
                return self.placeholder(op);
            }
            ArgKind::None if has_arg => {
                self.error(
                    Diagnostic::error(
                        Code::BadArgument,
                        arg.span(),
                        format!("`@{}` takes no argument", name.name()),
                    )
                    .with_hint(format!("write just `@{}`", name.name())),
                );
                return self.placeholder(op);
            }
            _ => {}
        }
        if arg.value.contains("%{")
            && matches!(
                name,
                O::Rx | O::Pm | O::PmFromFile | O::IpMatch | O::ValidateByteRange
            )
        {
            // ModSecurity v3 recompiles a regex with macros on every evaluation;
            // we compile patterns and phrase sets once, when rules load.
            self.error(
                Diagnostic::error(Code::BadArgument, arg.span(), format!("macros in `@{}` arguments are not supported", name.name()))
                    .with_label("compiled once when the rules load, not per request")
                    .with_hint("compare with a variable using @streq, @within, @contains, @beginsWith or @endsWith, which expand macros"),
            );
            return self.placeholder(op);
        }
        if arg.value.contains("%{") && !name.allows_macros() {
            self.error(
                Diagnostic::warning(Code::Suspicious, arg.span(), format!("`@{}` does not expand macros", name.name()))
                    .with_label("matched literally")
                    .with_hint("`%{...}` is expanded only in the arguments of operators like @streq, @within, @eq, @contains"),
            );
        }
        let kind = match self.op_kind(name, &arg) {
            Some(k) => k,
            None => return self.placeholder(op),
        };
        let prefilter = if op.negated {
            Prefilter::None
        } else {
            self.prefilter(&kind)
        };
        self.push_operator(Operator {
            name,
            kind,
            negated: op.negated,
            prefilter,
            span: op.span,
        })
    }

    /// An operator that never matches, standing in after an error (no program is produced).
    fn placeholder(&mut self, op: &OperatorAst) -> OpId {
        self.push_operator(Operator {
            name: O::NoMatch,
            kind: OpKind::NoMatch,
            negated: op.negated,
            prefilter: Prefilter::None,
            span: op.span,
        })
    }

    fn op_kind(&mut self, name: O, arg: &Text) -> Option<OpKind> {
        let macro_arg = |this: &mut Self| -> Arg {
            if name.allows_macros() && arg.value.contains("%{") {
                Arg::Macro(macro_string(arg, this.diags))
            } else {
                Arg::Const(arg.value.clone())
            }
        };
        Some(match name {
            // `@rxGlobal` matches exactly when `@rx` does (some match
            // exists); with `capture`, TX:0-9 hold the first match's groups
            // here, where v3 keeps looking through later matches.
            O::Rx | O::RxGlobal => OpKind::Rx(self.regex(arg)?),
            O::Pm => {
                let phrases: Vec<String> = arg
                    .value
                    .split_ascii_whitespace()
                    .map(str::to_string)
                    .collect();
                OpKind::Pm(self.phrase_set(phrases, Vec::new(), arg)?)
            }
            O::PmFromFile => {
                let (phrases, files) = self.data_files(arg)?;
                OpKind::Pm(self.phrase_set(phrases, files, arg)?)
            }
            O::Streq => OpKind::Streq(macro_arg(self)),
            O::Contains => OpKind::Contains(macro_arg(self)),
            O::ContainsWord => OpKind::ContainsWord(macro_arg(self)),
            O::BeginsWith => OpKind::BeginsWith(macro_arg(self)),
            O::EndsWith => OpKind::EndsWith(macro_arg(self)),
            O::Within => OpKind::Within(macro_arg(self)),
            O::Strmatch => OpKind::Strmatch(arg.value.clone()),
            O::Eq | O::Ge | O::Gt | O::Le | O::Lt => {
                let a = macro_arg(self);
                if let Arg::Const(c) = &a {
                    if c.trim().parse::<i64>().is_err() {
                        self.error(
                            Diagnostic::error(
                                Code::BadArgument,
                                arg.span(),
                                format!("`@{}` needs an integer, found `{c}`", name.name()),
                            )
                            .with_hint("compare with a number, or a macro like `%{tx.threshold}`"),
                        );
                        return None;
                    }
                }
                match name {
                    O::Eq => OpKind::Eq(a),
                    O::Ge => OpKind::Ge(a),
                    O::Gt => OpKind::Gt(a),
                    O::Le => OpKind::Le(a),
                    _ => OpKind::Lt(a),
                }
            }
            O::IpMatch => OpKind::IpMatch(self.ip_list(arg, &arg.value)?),
            O::IpMatchFromFile => {
                let (lines, _) = self.data_files(arg)?;
                OpKind::IpMatch(self.ip_list(arg, &lines.join(","))?)
            }
            O::ValidateByteRange => OpKind::ValidateByteRange(self.byte_ranges(arg)?),
            O::ValidateUrlEncoding => OpKind::ValidateUrlEncoding,
            O::ValidateUtf8Encoding => OpKind::ValidateUtf8Encoding,
            O::UnconditionalMatch => OpKind::UnconditionalMatch,
            O::NoMatch => OpKind::NoMatch,
            O::DetectSqli => OpKind::DetectSqli,
            O::DetectXss => OpKind::DetectXss,
            O::VerifyCc => OpKind::Verify {
                rx: self.regex(arg)?,
                checksum: Checksum::Luhn,
            },
            O::VerifyCpf => OpKind::Verify {
                rx: self.regex(arg)?,
                checksum: Checksum::Cpf,
            },
            O::VerifySsn => OpKind::Verify {
                rx: self.regex(arg)?,
                checksum: Checksum::Ssn,
            },
            O::VerifySvnr => OpKind::Verify {
                rx: self.regex(arg)?,
                checksum: Checksum::Svnr,
            },
            // The operators the registry marks unsupported, named one by
            // one so that a new operator cannot land here unnoticed.
            unsupported @ (O::FuzzyHash
            | O::GeoLookup
            | O::GsbLookup
            | O::InspectFile
            | O::Rbl
            | O::Rsub
            | O::ValidateDtd
            | O::ValidateHash
            | O::ValidateSchema) => {
                self.error(
                    Diagnostic::warning(
                        Code::Suspicious,
                        arg.span(),
                        format!("`@{}` is not supported by this engine", unsupported.name()),
                    )
                    .with_label("this operator never matches here")
                    .with_hint(
                        "it needs an external service or file format; see docs/architecture.md",
                    ),
                );
                OpKind::Unsupported {
                    argument: arg.value.clone(),
                }
            }
        })
    }

    /// Starts compiling the pattern of every regex operator of `items` on
    /// the other cores; [`Lowerer::regex`] takes the results in file order
    /// (see [`crate::rx::batch::Batch`]).
    pub(super) fn precompile_regexes(&mut self, items: &[Item]) {
        if let Some(started) = &self.opts.started {
            self.rx_ready = Some(std::sync::Arc::clone(started));
            return;
        }
        let patterns: Vec<&str> = items
            .iter()
            .filter_map(|item| match item {
                Item::Rule(r) => r.operator.as_ref(),
                _ => None,
            })
            .filter(|op| {
                matches!(
                    O::lookup(&op.name),
                    Some(
                        O::Rx
                            | O::RxGlobal
                            | O::VerifyCc
                            | O::VerifyCpf
                            | O::VerifySsn
                            | O::VerifySvnr
                    )
                )
            })
            .filter_map(|op| op.argument.as_ref())
            .map(|arg| arg.value.as_str())
            .filter(|v| !v.contains("%{"))
            .collect();
        self.rx_ready = Some(std::sync::Arc::new(crate::rx::batch::Batch::start(
            &patterns,
            &self.opts.rx,
            self.opts.precompiled.clone(),
        )));
    }

    fn regex(&mut self, arg: &Text) -> Option<RxId> {
        if let Some(&id) = self.rx_index.get(&arg.value) {
            return Some(id);
        }
        let start = std::time::Instant::now();
        let ready = self.rx_ready.as_ref().and_then(|b| b.take(&arg.value));
        self.timings.regex += start.elapsed();
        let compiled = match ready {
            Some(ready) => ready,
            None => {
                let start = std::time::Instant::now();
                let compiled = crate::rx::batch::compile_one(
                    &arg.value,
                    &self.opts.rx,
                    self.opts.precompiled.as_deref(),
                );
                self.timings.regex += start.elapsed();
                compiled
            }
        };
        let compiled = match compiled {
            Err(crate::rx::RxError::Unsupported { construct, range })
                if self.p.settings.pcre_fallback =>
            {
                let start = std::time::Instant::now();
                let backtracking = CompiledRx::compile_backtracking(&arg.value);
                self.timings.regex += start.elapsed();
                if backtracking.is_ok() {
                    self.error(
                        Diagnostic::warning(
                            Code::PcreBacktracking,
                            arg.span_of(range),
                            format!("{construct}: this pattern runs on PCRE2, a backtracking engine, under a match limit"),
                        )
                        .with_label("PCRE-only")
                        .with_hint("allowed by `WafPcreFallback On`; a value that reaches the limit does not match and sets TX:MSC_PCRE_LIMITS_EXCEEDED. Rewrite without it to keep matching linear-time"),
                    );
                }
                backtracking
            }
            other => other,
        };
        match compiled {
            Ok(rx) => {
                let id = RxId(self.p.regexes.len() as u32);
                self.p.regexes.push(rx);
                self.rx_index.insert(arg.value.clone(), id);
                Some(id)
            }
            Err(e) => {
                self.regex_error(arg, &e, true);
                None
            }
        }
    }

    fn phrase_set(
        &mut self,
        phrases: Vec<String>,
        files: Vec<PathBuf>,
        arg: &Text,
    ) -> Option<PmId> {
        if phrases.is_empty() {
            self.error(
                Diagnostic::error(Code::BadArgument, arg.span(), "empty phrase list")
                    .with_hint("@pm takes phrases separated by spaces; @pmFromFile files with one phrase per line"),
            );
            return None;
        }
        if let Some(&id) = self.pm_index.get(&phrases) {
            return Some(id);
        }
        let set = match PhraseSet::new(phrases.clone(), files) {
            Ok(set) => set,
            Err(e) => {
                self.error(
                    Diagnostic::error(
                        Code::BadArgument,
                        arg.span(),
                        format!("cannot build the phrase matcher: {e}"),
                    )
                    .with_hint("use fewer or shorter phrases"),
                );
                return None;
            }
        };
        let id = PmId(self.p.phrase_sets.len() as u32);
        self.pm_index.insert(phrases, id);
        self.p.phrase_sets.push(set);
        Some(id)
    }

    /// Reads the data files named by `@pmFromFile`/`@ipMatchFromFile`: one
    /// entry per line, `#` comments and blank lines skipped, surrounding
    /// blanks trimmed. Paths are relative to the rule file's directory.
    fn data_files(&mut self, arg: &Text) -> Option<(Vec<String>, Vec<PathBuf>)> {
        let mut lines = Vec::new();
        let mut files = Vec::new();
        let mut ok = true;
        let v = arg.value.as_str();
        let mut offset = 0;
        for name in v.split_ascii_whitespace() {
            let start = offset + v[offset..].find(name).unwrap_or(0);
            offset = start + name.len();
            if name.starts_with("http://") || name.starts_with("https://") {
                self.error(
                    Diagnostic::error(
                        Code::MissingDataFile,
                        arg.span_of(start..offset),
                        "remote data files are not supported",
                    )
                    .with_hint("download the file and name its local path"),
                );
                ok = false;
                continue;
            }
            let path = self.beside_rule_file(arg, name);
            match self.opts.files.read(&path) {
                Ok(bytes) => {
                    let text = String::from_utf8_lossy(&bytes);
                    for line in text.lines() {
                        let line = line.trim();
                        if line.is_empty() || line.starts_with('#') {
                            continue;
                        }
                        lines.push(line.to_string());
                    }
                    files.push(path);
                }
                Err(e) => {
                    self.error(
                        Diagnostic::error(
                            Code::MissingDataFile,
                            arg.span_of(start..offset),
                            format!("cannot read data file `{}`: {e}", path.display()),
                        )
                        .with_label("named here")
                        .with_hint(
                            "data file paths are relative to the directory of the rule file",
                        ),
                    );
                    ok = false;
                }
            }
        }
        ok.then_some((lines, files))
    }

    fn ip_list(&mut self, arg: &Text, list: &str) -> Option<Vec<IpRange>> {
        let mut out = Vec::new();
        for item in list
            .split([',', ' ', '\t'])
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            match parse_ip_range(item) {
                Some(r) => out.push(r),
                None => {
                    let at = arg.value.find(item).unwrap_or(0);
                    self.error(
                        Diagnostic::error(
                            Code::BadArgument,
                            arg.span_of(at..at + item.len()),
                            format!("`{item}` is not an IP address or network"),
                        )
                        .with_hint("use addresses or CIDR networks, e.g. `10.0.0.0/8,::1`"),
                    );
                    return None;
                }
            }
        }
        Some(out)
    }

    fn byte_ranges(&mut self, arg: &Text) -> Option<ByteSet> {
        let mut set = ByteSet::default();
        let v = arg.value.as_str();
        let mut offset = 0;
        for part in v.split(',') {
            let start = offset;
            offset += part.len() + 1;
            let p = part.trim();
            let parsed = match p.split_once('-') {
                Some((a, b)) => a.trim().parse::<u8>().ok().zip(b.trim().parse::<u8>().ok()),
                None => p.parse::<u8>().ok().map(|x| (x, x)),
            };
            match parsed {
                Some((a, b)) if a <= b => (a..=b).for_each(|x| set.insert(x)),
                _ => {
                    self.error(
                        Diagnostic::error(Code::BadArgument, arg.span_of(start..start + part.len()), format!("`{p}` is not a byte or byte range"))
                            .with_hint("use numbers from 0 to 255 and ranges like `32-126`, separated by commas"),
                    );
                    return None;
                }
            }
        }
        Some(set)
    }

    /// The literals one of which any input matched by `kind` contains.
    fn prefilter(&self, kind: &OpKind) -> Prefilter {
        // Literals are ASCII-lowercased: the prefilter ignores case.
        let bytes = |bs: &mut dyn Iterator<Item = u8>| {
            let mut lits: Vec<Vec<u8>> = bs.map(|b| vec![b.to_ascii_lowercase()]).collect();
            lits.sort();
            lits.dedup();
            if lits.is_empty() {
                // Nothing can make the value invalid: it never matches.
                Prefilter::None
            } else {
                Prefilter::AnyOf(lits)
            }
        };
        let lit = |a: &Arg| match a {
            Arg::Const(s) if !s.is_empty() => {
                Prefilter::AnyOf(vec![s.to_ascii_lowercase().into_bytes()])
            }
            _ => Prefilter::None,
        };
        match kind {
            OpKind::Rx(id) => self.p.regexes[id.index()].required_literals().clone(),
            OpKind::Pm(id) => {
                let set = &self.p.phrase_sets[id.index()];
                let mut lits: Vec<Vec<u8>> = set
                    .phrases
                    .iter()
                    .map(|p| p.to_ascii_lowercase().into_bytes())
                    .collect();
                lits.sort();
                lits.dedup();
                if lits.iter().any(Vec::is_empty) {
                    Prefilter::None
                } else {
                    Prefilter::AnyOf(lits)
                }
            }
            OpKind::Streq(a)
            | OpKind::Contains(a)
            | OpKind::ContainsWord(a)
            | OpKind::BeginsWith(a)
            | OpKind::EndsWith(a) => lit(a),
            OpKind::Strmatch(s) if !s.is_empty() => {
                Prefilter::AnyOf(vec![s.to_ascii_lowercase().into_bytes()])
            }
            // The validators match only on a byte that can make a value
            // invalid: one outside the range, a `%`, a byte of 0x80 or
            // more (ASCII is valid UTF-8). One-byte literals: the engine
            // tests them against the value's byte set, so most values are
            // ruled out without running the check.
            OpKind::ValidateByteRange(set) => bytes(&mut (0..=255).filter(|&b| !set.contains(b))),
            OpKind::ValidateUrlEncoding => bytes(&mut std::iter::once(b'%')),
            OpKind::ValidateUtf8Encoding => bytes(&mut (0x80..=0xff)),
            _ => Prefilter::None,
        }
    }
}

fn parse_ip_range(s: &str) -> Option<IpRange> {
    let (addr, prefix) = match s.split_once('/') {
        Some((a, p)) => (a, Some(p.parse::<u8>().ok()?)),
        None => (s, None),
    };
    let addr: IpAddr = addr.parse().ok()?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let prefix = prefix.unwrap_or(max);
    (prefix <= max).then_some(IpRange { addr, prefix })
}
