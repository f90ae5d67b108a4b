//! Engine settings directives (`SecRuleEngine`, body limits, ...).

use super::Lowerer;
use crate::ast::Text;
use crate::diag::{Code, Diagnostic};
use crate::ir::{AuditEngine, AuditParts, LimitAction};
use crate::names::Directive as D;
use crate::source::Span;

impl Lowerer<'_> {
    pub(super) fn setting(&mut self, d: D, args: &[Text], span: Span) {
        let v = args
            .first()
            .map(|a| a.value.trim().to_string())
            .unwrap_or_default();
        let vspan = args.first().map(|a| a.span()).unwrap_or(span);
        let s = &mut self.p.settings;
        match d {
            D::SecRuleEngine => {
                if let Some(m) = self.engine_mode(&v, vspan) {
                    self.p.settings.rule_engine = m;
                }
            }
            D::SecRequestBodyAccess => {
                if let Some(b) = self.on_off(&v, vspan) {
                    self.p.settings.request_body_access = b;
                    self.body_access_on = b.then_some(span);
                }
            }
            D::SecResponseBodyAccess => {
                if let Some(b) = self.on_off(&v, vspan) {
                    self.p.settings.response_body_access = b;
                }
            }
            D::SecRequestBodyLimit => self.number(&v, vspan, |s, n| s.request_body_limit = n),
            D::SecRequestBodyNoFilesLimit => {
                self.number(&v, vspan, |s, n| s.request_body_no_files_limit = n)
            }
            D::SecRequestBodyInMemoryLimit => {
                self.number(&v, vspan, |s, n| s.request_body_in_memory_limit = n)
            }
            D::SecResponseBodyLimit => self.number(&v, vspan, |s, n| s.response_body_limit = n),
            D::SecRequestBodyJsonDepthLimit => {
                self.number(&v, vspan, |s, n| s.request_body_json_depth_limit = n)
            }
            D::SecArgumentsLimit => self.number(&v, vspan, |s, n| s.arguments_limit = n),
            D::SecCollectionTimeout => self.number(&v, vspan, |s, n| s.collection_timeout = n),
            D::SecRequestBodyLimitAction | D::SecResponseBodyLimitAction => {
                let a = match v.to_ascii_lowercase().as_str() {
                    "reject" => LimitAction::Reject,
                    "processpartial" => LimitAction::ProcessPartial,
                    _ => {
                        self.error(
                            Diagnostic::error(
                                Code::BadArgument,
                                vspan,
                                format!("`{v}` is not a limit action"),
                            )
                            .with_hint("use Reject or ProcessPartial"),
                        );
                        return;
                    }
                };
                if d == D::SecRequestBodyLimitAction {
                    s.request_body_limit_action = a;
                } else {
                    s.response_body_limit_action = a;
                }
            }
            D::SecResponseBodyMimeType => {
                for a in args {
                    s.response_body_mime_types
                        .extend(a.value.split_ascii_whitespace().map(str::to_string));
                }
            }
            D::SecResponseBodyMimeTypesClear => s.response_body_mime_types.clear(),
            D::SecArgumentSeparator => match v.as_bytes() {
                [c] => s.argument_separator = *c,
                _ => self.error(
                    Diagnostic::error(
                        Code::BadArgument,
                        vspan,
                        "the argument separator is one character",
                    )
                    .with_hint("e.g. `SecArgumentSeparator ;`"),
                ),
            },
            D::SecAuditEngine => match AuditEngine::parse(&v) {
                Some(m) => s.audit_engine = m,
                None => self.error(
                    Diagnostic::error(
                        Code::BadArgument,
                        vspan,
                        format!("`{v}` is not an audit engine mode"),
                    )
                    .with_hint("use On, Off or RelevantOnly"),
                ),
            },
            D::SecAuditLogParts => match AuditParts::parse(&v) {
                Some(p) => s.audit_log_parts = p,
                None => self.error(
                    Diagnostic::error(
                        Code::BadArgument,
                        vspan,
                        format!("`{v}` is not a set of audit log parts"),
                    )
                    .with_hint("use letters A to K and Z, e.g. `ABIJDEFHZ`"),
                ),
            },
            D::SecComponentSignature => s.component_signatures.push(v),
            D::SecUnicodeMapFile => self.unicode_map(args, vspan),
            D::WafPcreFallback => {
                if let Some(b) = self.on_off(&v, vspan) {
                    self.p.settings.pcre_fallback = b;
                }
            }
            D::SecPcreMatchLimit | D::SecPcreMatchLimitRecursion => {
                let Some(n) = v.parse::<u32>().ok().filter(|&n| n > 0) else {
                    self.error(
                        Diagnostic::error(
                            Code::BadArgument,
                            vspan,
                            format!("`{v}` is not a limit"),
                        )
                        .with_hint(
                            "write a count from 1 to 4294967295, e.g. `SecPcreMatchLimit 500000`",
                        ),
                    );
                    return;
                };
                if d == D::SecPcreMatchLimit {
                    s.pcre_limits.match_limit = n;
                } else {
                    s.pcre_limits.depth_limit = n;
                }
            }
            // Items, not settings: the parser makes rules, markers, rule
            // exceptions and includes of them.
            D::Include
            | D::SecAction
            | D::SecDefaultAction
            | D::SecMarker
            | D::SecRule
            | D::SecRuleRemoveById
            | D::SecRuleRemoveByMsg
            | D::SecRuleRemoveByTag
            | D::SecRuleUpdateActionById
            | D::SecRuleUpdateTargetById
            | D::SecRuleUpdateTargetByMsg
            | D::SecRuleUpdateTargetByTag => {}
            // Accepted without effect (see `Directive::supported`).
            D::SecAuditLog
            | D::SecAuditLog2
            | D::SecAuditLogDirMode
            | D::SecAuditLogFileMode
            | D::SecAuditLogFormat
            | D::SecAuditLogPrefix
            | D::SecAuditLogRelevantStatus
            | D::SecAuditLogStorageDir
            | D::SecAuditLogType
            | D::SecCacheTransformations
            | D::SecChrootDir
            | D::SecConnEngine
            | D::SecConnReadStateLimit
            | D::SecConnWriteStateLimit
            | D::SecCookieFormat
            | D::SecDataDir
            | D::SecDebugLog
            | D::SecDebugLogLevel
            | D::SecDisableBackendCompression
            | D::SecGeoLookupDb
            | D::SecGsbLookupDb
            | D::SecGuardianLog
            | D::SecHttpBlKey
            | D::SecInterceptOnError
            | D::SecRemoteRulesFailAction
            | D::SecRuleInheritance
            | D::SecRulePerfTime
            | D::SecSensorId
            | D::SecServerSignature
            | D::SecStatusEngine
            | D::SecTmpDir
            | D::SecTmpSaveUploadedFiles
            | D::SecUploadDir
            | D::SecUploadFileLimit
            | D::SecUploadFileMode
            | D::SecUploadKeepFiles
            | D::SecWebAppId
            | D::SecXmlExternalEntity => s.ignored.push((d, span)),
            // Would change matching, but cannot run here: said so.
            D::SecContentInjection
            | D::SecCookieV0Separator
            | D::SecHashEngine
            | D::SecHashKey
            | D::SecHashMethodPm
            | D::SecHashMethodRx
            | D::SecHashParam
            | D::SecParseXmlIntoArgs
            | D::SecRemoteRules
            | D::SecRuleScript
            | D::SecStreamInBodyInspection
            | D::SecStreamOutBodyInspection => {
                self.error(
                    Diagnostic::warning(
                        Code::Suspicious,
                        span,
                        format!("`{}` is not supported by this engine", d.name()),
                    )
                    .with_label("this directive has no effect here")
                    .with_hint("see the list of unsupported directives in docs/architecture.md"),
                );
                self.p.settings.ignored.push((d, span));
            }
        }
    }

    /// `SecUnicodeMapFile FILE CODEPAGE`: reads the file (a relative path
    /// is taken from the directory of the file the directive is in); v3
    /// refuses to load without it.
    fn unicode_map(&mut self, args: &[Text], vspan: Span) {
        let [file, code_page] = args else { return };
        let name = file.value.trim();
        let path = self.beside_rule_file(file, name);
        let contents = match self.opts.files.read(&path) {
            Ok(c) => c,
            Err(e) => {
                self.error(
                    Diagnostic::error(Code::MissingDataFile, vspan, format!("cannot read the unicode map file `{name}`: {e}"))
                        .with_label("relative paths are read from the configuration file's directory")
                        .with_hint("ModSecurity v3 rejects this too: point it at unicode.mapping (ModSecurity ships it), or remove the directive"),
                );
                return;
            }
        };
        let (cp_text, cp_span) = (code_page.value.trim(), code_page.span());
        if cp_text.is_empty() || !cp_text.bytes().all(|b| b.is_ascii_digit()) {
            // v3's grammar takes digits only ("Invalid input").
            self.error(
                Diagnostic::error(Code::BadArgument, cp_span, format!("`{cp_text}` is not a code page number"))
                    .with_hint("give the code page number of a section of the file, e.g. 20127 (US-ASCII); ModSecurity v3 rejects this too"),
            );
            return;
        }
        // Digits only: what v3's `atof` reads of them.
        let code_page: f64 = cp_text.parse().unwrap_or(0.0);
        if code_page <= 0.0 {
            self.error(
                Diagnostic::warning(
                    Code::Suspicious,
                    cp_span,
                    format!("code page `{cp_text}`: the map is never used"),
                )
                .with_label("ModSecurity v3 loads the file and never consults it")
                .with_hint(
                    "give the code page number of a section of the file, e.g. 20127 (US-ASCII)",
                ),
            );
        }
        let end = memchr::memchr(0, &contents).unwrap_or(contents.len());
        self.p.settings.unicode_map = Some(crate::ir::UnicodeMapFile {
            contents: contents[..end].into(),
            code_page,
        });
    }

    fn on_off(&mut self, v: &str, span: Span) -> Option<bool> {
        match v.to_ascii_lowercase().as_str() {
            "on" => Some(true),
            "off" => Some(false),
            _ => {
                self.error(
                    Diagnostic::error(Code::BadArgument, span, format!("`{v}` is not On or Off"))
                        .with_hint("use On or Off"),
                );
                None
            }
        }
    }

    fn number(&mut self, v: &str, span: Span, set: impl FnOnce(&mut crate::ir::Settings, u64)) {
        match v.parse::<u64>() {
            Ok(n) => set(&mut self.p.settings, n),
            Err(_) => self.error(
                Diagnostic::error(Code::BadArgument, span, format!("`{v}` is not a number"))
                    .with_hint("write a size in bytes (or a count), without units"),
            ),
        }
    }
}
