//! The registry of SecLang names: every directive, variable, operator,
//! transformation, action and `ctl:` option that ModSecurity v3
//! (libmodsecurity 3.0.x) recognises, with the facts other modules need about
//! each one. Every other module asks here; nobody else keeps a list of names.
//!
//! # Where the lists come from
//!
//! libmodsecurity's rule language is defined by its flex scanner and bison
//! grammar (`src/parser/seclang-scanner.ll`, `src/parser/seclang-parser.yy`),
//! not by the reference manual, so the lists below follow the scanner of the
//! 3.0.x line (up to 3.0.15, which added `SecParseXmlIntoArgs`,
//! `SecAuditLogPrefix` and `ctl:parseXmlIntoArgs`). A few ModSecurity v2 names
//! that the project was asked to know about (`@noMatch`, the v2-only `ctl:`
//! options) are present too, marked [`V3Status::NotInV3`].
//!
//! # Case
//!
//! Every name pattern in the v3 scanner is wrapped in `(?i:...)`, so **every**
//! lookup here is ASCII case-insensitive (`secrule`, `@RX`, `t:LOWERCASE`,
//! `request_headers` are all accepted by v3). [`Named::name`] returns the
//! canonical spelling of the v3 reference manual.
//!
//! # Aliases
//!
//! Where v3 accepts two spellings for one thing, both map to one variant and the
//! second is listed in that enum's `ALIASES`:
//! `@pmf` = `@pmFromFile`, `@ipMatchF` = `@ipMatchFromFile`,
//! `t:normalizePath` = `t:normalisePath`, `t:normalizePathWin` =
//! `t:normalisePathWin`, `MULTIPART_SEMICOLON_MISSING` =
//! `MULTIPART_MISSING_SEMICOLON`.
//!
//! # Support
//!
//! Each directive, operator, action and `ctl:` option says what *this* engine
//! does with it ([`Support`]), and, separately, what libmodsecurity v3 does
//! with it ([`V3Status`]): v3 knows several names only to reject them with
//! "is not supported", and the checker should be able to say so.

use serde::{Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

// ---------------------------------------------------------------------------
// Shared small types
// ---------------------------------------------------------------------------

/// Whether something takes an argument / value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ArgKind {
    /// Takes nothing (`chain`, `@detectSQLi`).
    None,
    /// Must have one (`id:1`, `@rx foo`).
    Required,
    /// May have one (`allow` / `allow:phase`).
    Optional,
}

/// What this engine does with a name it recognises.
///
/// * `Implemented`: the engine acts on it.
/// * `Ignored`: parsed and accepted, has no effect here; only ever used for
///   things outside a self-contained rule engine's reach that cannot change
///   which rules match or what the verdict is (logging, audit logging, file and
///   storage locations, server/connector behaviour, performance knobs, and
///   configuration for features that are themselves reported as unsupported).
/// * `Unsupported`: would change matching or the verdict but needs something a
///   self-contained engine does not have (network look-ups, external programs
///   or Lua, GeoIP/ssdeep databases, XML schema validation, response
///   rewriting), or is not part of ModSecurity v3 at all. The checker should
///   report it rather than silently drop it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Support {
    /// The engine acts on it.
    Implemented,
    /// Accepted, without effect here.
    Ignored,
    /// Reported by the checker: it would change matching but cannot run here.
    Unsupported,
}

/// What libmodsecurity v3 does with a name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum V3Status {
    /// v3 parses it and loads the configuration (it may still be a no-op or
    /// depend on a build option; see the `v3_note`).
    Accepted,
    /// v3 accepts it only with some values (typically `Off`); any other value
    /// is a configuration error ("... is not yet supported").
    Restricted,
    /// v3 knows the name but refuses to load a configuration that uses it.
    Rejected,
    /// Not a v3 name at all (ModSecurity v2 only): a syntax error in v3.
    NotInV3,
}

/// How many arguments a directive takes (after quote processing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Arity {
    /// The fewest arguments.
    pub min: usize,
    /// `None`: no upper bound.
    pub max: Option<usize>,
}

impl Arity {
    /// Exactly `n` arguments.
    pub const fn exactly(n: usize) -> Arity {
        Arity {
            min: n,
            max: Some(n),
        }
    }
    /// From `min` to `max` arguments.
    pub const fn between(min: usize, max: usize) -> Arity {
        Arity {
            min,
            max: Some(max),
        }
    }
    /// At least `min` arguments.
    pub const fn at_least(min: usize) -> Arity {
        Arity { min, max: None }
    }
    /// Whether `n` arguments are acceptable.
    pub fn accepts(self, n: usize) -> bool {
        n >= self.min && self.max.is_none_or(|m| n <= m)
    }
}

/// Classification of actions, as in the v3 reference manual's "Actions" section.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    /// Decides the transaction's fate: allow, block, deny, drop, pass, pause, proxy, redirect.
    Disruptive,
    /// Changes rule flow: chain, skip, skipAfter.
    Flow,
    /// Describes the rule: accuracy, id, maturity, msg, phase, rev, severity, tag, ver.
    Metadata,
    /// Carries data for other actions: status, xmlns.
    Data,
    /// Everything else (setvar, t, capture, ctl, log, logdata, ...).
    NonDisruptive,
}

/// A registry enum: a closed set of SecLang names.
pub trait Named: Copy + Sized + 'static {
    /// Every variant, in declaration (alphabetical) order.
    const ALL: &'static [Self];
    /// Alternative spellings v3 accepts, and the variant each one names.
    const ALIASES: &'static [(&'static str, Self)];
    /// The canonical spelling.
    fn name(self) -> &'static str;
    /// Case-insensitive look-up of a canonical name or alias.
    fn lookup(name: &str) -> Option<Self>;
}

/// The canonical names of a registry enum, e.g. to pass to
/// [`crate::diag::closest`]: `closest(n, names::<Operator>())`.
pub fn names<T: Named>() -> impl Iterator<Item = &'static str> {
    T::ALL.iter().map(|v| v.name())
}

macro_rules! name_enum {
    (
        $(#[$meta:meta])*
        pub enum $E:ident {
            $( $(#[$vmeta:meta])* $V:ident = $s:literal, )*
        }
        aliases { $( $a:literal => $AV:ident, )* }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $E {
            $(
                #[doc = concat!("`", $s, "`")]
                $(#[$vmeta])*
                $V,
            )*
        }

        impl $E {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$E] = &[ $( $E::$V, )* ];
            /// Alternative spellings v3 accepts (compared case-insensitively).
            pub const ALIASES: &'static [(&'static str, $E)] = &[ $( ($a, $E::$AV), )* ];

            /// The canonical spelling.
            pub const fn name(self) -> &'static str {
                match self { $( $E::$V => $s, )* }
            }

            /// Case-insensitive look-up of a canonical name or an alias.
            pub fn lookup(name: &str) -> Option<$E> {
                Self::ALL
                    .iter()
                    .copied()
                    .find(|v| v.name().eq_ignore_ascii_case(name))
                    .or_else(|| {
                        Self::ALIASES
                            .iter()
                            .find(|(a, _)| a.eq_ignore_ascii_case(name))
                            .map(|&(_, v)| v)
                    })
            }

            /// The canonical names, for "did you mean" suggestions.
            pub fn all_names() -> impl Iterator<Item = &'static str> {
                Self::ALL.iter().map(|v| v.name())
            }
        }

        impl Named for $E {
            const ALL: &'static [$E] = $E::ALL;
            const ALIASES: &'static [(&'static str, $E)] = $E::ALIASES;
            fn name(self) -> &'static str {
                $E::name(self)
            }
            fn lookup(name: &str) -> Option<$E> {
                $E::lookup(name)
            }
        }

        impl fmt::Display for $E {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl Serialize for $E {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }
    };
}

// ---------------------------------------------------------------------------
// Directives
// ---------------------------------------------------------------------------

name_enum! {
    /// Every configuration directive the v3 scanner recognises (plus
    /// `Include`), including the ones v3 only parses to ignore or to reject.
    ///
    /// Surprises worth knowing:
    /// * v3 *rejects* several directives that v2 configurations still carry,
    ///   e.g. `SecRequestBodyInMemoryLimit` ("no longer supported"),
    ///   `SecServerSignature`, `SecCacheTransformations`, `SecSensorId`; see
    ///   [`Directive::v3_status`].
    /// * `SecUnicodeCodePage` is not a v3 directive: the code page is the
    ///   second argument of `SecUnicodeMapFile`.
    /// * `SecParseXmlIntoArgs` and `SecAuditLogPrefix` exist since 3.0.15.
    pub enum Directive {
        Include = "Include",
        SecAction = "SecAction",
        SecArgumentSeparator = "SecArgumentSeparator",
        SecArgumentsLimit = "SecArgumentsLimit",
        SecAuditEngine = "SecAuditEngine",
        SecAuditLog = "SecAuditLog",
        SecAuditLog2 = "SecAuditLog2",
        SecAuditLogDirMode = "SecAuditLogDirMode",
        SecAuditLogFileMode = "SecAuditLogFileMode",
        SecAuditLogFormat = "SecAuditLogFormat",
        SecAuditLogParts = "SecAuditLogParts",
        SecAuditLogPrefix = "SecAuditLogPrefix",
        SecAuditLogRelevantStatus = "SecAuditLogRelevantStatus",
        SecAuditLogStorageDir = "SecAuditLogStorageDir",
        SecAuditLogType = "SecAuditLogType",
        SecCacheTransformations = "SecCacheTransformations",
        SecChrootDir = "SecChrootDir",
        SecCollectionTimeout = "SecCollectionTimeout",
        SecComponentSignature = "SecComponentSignature",
        SecConnEngine = "SecConnEngine",
        SecConnReadStateLimit = "SecConnReadStateLimit",
        SecConnWriteStateLimit = "SecConnWriteStateLimit",
        SecContentInjection = "SecContentInjection",
        SecCookieFormat = "SecCookieFormat",
        SecCookieV0Separator = "SecCookieV0Separator",
        SecDataDir = "SecDataDir",
        SecDebugLog = "SecDebugLog",
        SecDebugLogLevel = "SecDebugLogLevel",
        SecDefaultAction = "SecDefaultAction",
        SecDisableBackendCompression = "SecDisableBackendCompression",
        SecGeoLookupDb = "SecGeoLookupDb",
        SecGsbLookupDb = "SecGsbLookupDb",
        SecGuardianLog = "SecGuardianLog",
        SecHashEngine = "SecHashEngine",
        SecHashKey = "SecHashKey",
        SecHashMethodPm = "SecHashMethodPm",
        SecHashMethodRx = "SecHashMethodRx",
        SecHashParam = "SecHashParam",
        SecHttpBlKey = "SecHttpBlKey",
        SecInterceptOnError = "SecInterceptOnError",
        SecMarker = "SecMarker",
        SecParseXmlIntoArgs = "SecParseXmlIntoArgs",
        SecPcreMatchLimit = "SecPcreMatchLimit",
        SecPcreMatchLimitRecursion = "SecPcreMatchLimitRecursion",
        SecRemoteRules = "SecRemoteRules",
        SecRemoteRulesFailAction = "SecRemoteRulesFailAction",
        SecRequestBodyAccess = "SecRequestBodyAccess",
        SecRequestBodyInMemoryLimit = "SecRequestBodyInMemoryLimit",
        SecRequestBodyJsonDepthLimit = "SecRequestBodyJsonDepthLimit",
        SecRequestBodyLimit = "SecRequestBodyLimit",
        SecRequestBodyLimitAction = "SecRequestBodyLimitAction",
        SecRequestBodyNoFilesLimit = "SecRequestBodyNoFilesLimit",
        SecResponseBodyAccess = "SecResponseBodyAccess",
        SecResponseBodyLimit = "SecResponseBodyLimit",
        SecResponseBodyLimitAction = "SecResponseBodyLimitAction",
        SecResponseBodyMimeType = "SecResponseBodyMimeType",
        SecResponseBodyMimeTypesClear = "SecResponseBodyMimeTypesClear",
        SecRule = "SecRule",
        SecRuleEngine = "SecRuleEngine",
        SecRuleInheritance = "SecRuleInheritance",
        SecRulePerfTime = "SecRulePerfTime",
        SecRuleRemoveById = "SecRuleRemoveById",
        SecRuleRemoveByMsg = "SecRuleRemoveByMsg",
        SecRuleRemoveByTag = "SecRuleRemoveByTag",
        SecRuleScript = "SecRuleScript",
        SecRuleUpdateActionById = "SecRuleUpdateActionById",
        SecRuleUpdateTargetById = "SecRuleUpdateTargetById",
        SecRuleUpdateTargetByMsg = "SecRuleUpdateTargetByMsg",
        SecRuleUpdateTargetByTag = "SecRuleUpdateTargetByTag",
        SecSensorId = "SecSensorId",
        SecServerSignature = "SecServerSignature",
        SecStatusEngine = "SecStatusEngine",
        SecStreamInBodyInspection = "SecStreamInBodyInspection",
        SecStreamOutBodyInspection = "SecStreamOutBodyInspection",
        SecTmpDir = "SecTmpDir",
        SecTmpSaveUploadedFiles = "SecTmpSaveUploadedFiles",
        SecUnicodeMapFile = "SecUnicodeMapFile",
        SecUploadDir = "SecUploadDir",
        SecUploadFileLimit = "SecUploadFileLimit",
        SecUploadFileMode = "SecUploadFileMode",
        SecUploadKeepFiles = "SecUploadKeepFiles",
        SecWebAppId = "SecWebAppId",
        SecXmlExternalEntity = "SecXmlExternalEntity",
        WafPcreFallback = "WafPcreFallback",
    }
    aliases {}
}

/// Everything the registry knows about a directive: one row per name in
/// [`Directive::info`], matched without a catch-all arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirectiveInfo {
    /// See [`Directive::args`].
    pub args: Arity,
    /// See [`Directive::supported`].
    pub support: Support,
    /// See [`Directive::v3_status`].
    pub v3: V3Status,
    /// See [`Directive::v3_only_value`].
    pub v3_only_value: Option<&'static str>,
    /// See [`Directive::v3_note`].
    pub v3_note: Option<&'static str>,
}

impl Directive {
    /// The directive's row of facts.
    #[rustfmt::skip]
    pub const fn info(self) -> DirectiveInfo {
        use Directive as D;
        use Support::*;
        use V3Status::*;
        // arguments, support, v3 status, the only value v3 accepts, a note on v3
        const fn dir(args: Arity, support: Support, v3: V3Status, v3_only_value: Option<&'static str>, v3_note: Option<&'static str>) -> DirectiveInfo {
            DirectiveInfo { args, support, v3, v3_only_value, v3_note }
        }
        match self {
            D::Include => dir(Arity::exactly(1), Implemented, Accepted, None, None),
            D::SecAction => dir(Arity::exactly(1), Implemented, Accepted, None, None),
            D::SecArgumentSeparator => dir(Arity::exactly(1), Implemented, Accepted, None, None),
            D::SecArgumentsLimit => dir(Arity::exactly(1), Implemented, Accepted, None, None),
            D::SecAuditEngine => dir(Arity::exactly(1), Ignored, Accepted, None, None),
            D::SecAuditLog => dir(Arity::exactly(1), Ignored, Accepted, None, None),
            D::SecAuditLog2 => dir(Arity::exactly(1), Ignored, Accepted, None, None),
            D::SecAuditLogDirMode => dir(Arity::exactly(1), Ignored, Accepted, None, None),
            D::SecAuditLogFileMode => dir(Arity::exactly(1), Ignored, Accepted, None, None),
            D::SecAuditLogFormat => dir(Arity::exactly(1), Ignored, Accepted, None, None),
            D::SecAuditLogParts => dir(Arity::exactly(1), Ignored, Accepted, None, None),
            D::SecAuditLogPrefix => dir(Arity::exactly(1), Ignored, Accepted, None, Some("since libmodsecurity 3.0.15")),
            D::SecAuditLogRelevantStatus => dir(Arity::exactly(1), Ignored, Accepted, None, None),
            D::SecAuditLogStorageDir => dir(Arity::exactly(1), Ignored, Accepted, None, None),
            D::SecAuditLogType => dir(Arity::exactly(1), Ignored, Accepted, None, None),
            D::SecCacheTransformations => dir(Arity::between(1, 2), Ignored, Rejected, None, Some("v3 refuses to load it (\"not supported\")")),
            D::SecChrootDir => dir(Arity::exactly(1), Ignored, Rejected, None, Some("v3 refuses to load it (\"not supported\")")),
            D::SecCollectionTimeout => dir(Arity::exactly(1), Ignored, Accepted, None, Some("accepted and ignored by v3")),
            D::SecComponentSignature => dir(Arity::exactly(1), Ignored, Accepted, None, None),
            D::SecConnEngine => dir(Arity::exactly(1), Ignored, Restricted, Some("Off"), Some("v3 accepts only `Off`; other values are \"not yet supported\"")),
            D::SecConnReadStateLimit => dir(Arity::between(1, 2), Ignored, Rejected, None, Some("v3 refuses to load it (\"not supported\")")),
            D::SecConnWriteStateLimit => dir(Arity::between(1, 2), Ignored, Rejected, None, Some("v3 refuses to load it (\"not supported\")")),
            D::SecContentInjection => dir(Arity::exactly(1), Unsupported, Restricted, Some("Off"), Some("v3 accepts only `Off`; other values are \"not yet supported\"")),
            D::SecCookieFormat => dir(Arity::exactly(1), Ignored, Restricted, Some("0"), Some("v3 accepts only `SecCookieFormat 0`")),
            D::SecCookieV0Separator => dir(Arity::exactly(1), Unsupported, Rejected, None, Some("v3 refuses to load it (\"not supported\")")),
            D::SecDataDir => dir(Arity::exactly(1), Ignored, Accepted, None, Some("accepted and ignored by v3")),
            D::SecDebugLog => dir(Arity::exactly(1), Ignored, Accepted, None, None),
            D::SecDebugLogLevel => dir(Arity::exactly(1), Ignored, Accepted, None, None),
            D::SecDefaultAction => dir(Arity::exactly(1), Implemented, Accepted, None, None),
            D::SecDisableBackendCompression => dir(Arity::exactly(1), Ignored, Restricted, Some("Off"), Some("v3 accepts only `Off`; other values are \"not yet supported\"")),
            D::SecGeoLookupDb => dir(Arity::exactly(1), Ignored, Accepted, None, Some("needs a v3 build with GeoIP or MaxMind")),
            D::SecGsbLookupDb => dir(Arity::exactly(1), Ignored, Rejected, None, Some("v3 refuses to load it (\"not supported\")")),
            D::SecGuardianLog => dir(Arity::exactly(1), Ignored, Rejected, None, Some("v3 refuses to load it (\"not supported\")")),
            D::SecHashEngine => dir(Arity::exactly(1), Unsupported, Restricted, Some("Off"), Some("v3 accepts only `Off`; other values are \"not yet supported\"")),
            D::SecHashKey => dir(Arity::between(1, 2), Unsupported, Rejected, None, Some("v3 refuses to load it (\"not supported\")")),
            D::SecHashMethodPm => dir(Arity::exactly(2), Unsupported, Rejected, None, Some("v3 refuses to load it (\"not supported\")")),
            D::SecHashMethodRx => dir(Arity::exactly(2), Unsupported, Rejected, None, Some("v3 refuses to load it (\"not supported\")")),
            D::SecHashParam => dir(Arity::exactly(1), Unsupported, Rejected, None, Some("v3 refuses to load it (\"not supported\")")),
            D::SecHttpBlKey => dir(Arity::exactly(1), Ignored, Accepted, None, None),
            D::SecInterceptOnError => dir(Arity::exactly(1), Ignored, Restricted, Some("Off"), Some("v3 accepts only `Off`; other values are \"not yet supported\"")),
            D::SecMarker => dir(Arity::exactly(1), Implemented, Accepted, None, None),
            D::SecParseXmlIntoArgs => dir(Arity::exactly(1), Unsupported, Accepted, None, Some("since libmodsecurity 3.0.15")),
            D::SecPcreMatchLimit => dir(Arity::exactly(1), Implemented, Accepted, None, Some("accepted and ignored by v3 (3.0.9); here the match limit of the patterns `WafPcreFallback On` runs on PCRE2")),
            D::SecPcreMatchLimitRecursion => dir(Arity::exactly(1), Implemented, Accepted, None, Some("accepted and ignored by v3; here the depth limit of the patterns `WafPcreFallback On` runs on PCRE2")),
            D::SecRemoteRules => dir(Arity::between(2, 3), Unsupported, Accepted, None, Some("needs a v3 build with libcurl")),
            D::SecRemoteRulesFailAction => dir(Arity::exactly(1), Ignored, Accepted, None, None),
            D::SecRequestBodyAccess => dir(Arity::exactly(1), Implemented, Accepted, None, None),
            D::SecRequestBodyInMemoryLimit => dir(Arity::exactly(1), Ignored, Rejected, None, Some("rejected by v3: \"no longer supported\", the web server controls buffering")),
            D::SecRequestBodyJsonDepthLimit => dir(Arity::exactly(1), Implemented, Accepted, None, None),
            D::SecRequestBodyLimit => dir(Arity::exactly(1), Implemented, Accepted, None, None),
            D::SecRequestBodyLimitAction => dir(Arity::exactly(1), Implemented, Accepted, None, None),
            D::SecRequestBodyNoFilesLimit => dir(Arity::exactly(1), Implemented, Accepted, None, None),
            D::SecResponseBodyAccess => dir(Arity::exactly(1), Implemented, Accepted, None, None),
            D::SecResponseBodyLimit => dir(Arity::exactly(1), Implemented, Accepted, None, None),
            D::SecResponseBodyLimitAction => dir(Arity::exactly(1), Implemented, Accepted, None, None),
            D::SecResponseBodyMimeType => dir(Arity::at_least(1), Implemented, Accepted, None, None),
            D::SecResponseBodyMimeTypesClear => dir(Arity::exactly(0), Implemented, Accepted, None, None),
            D::SecRule => dir(Arity::between(2, 3), Implemented, Accepted, None, None),
            D::SecRuleEngine => dir(Arity::exactly(1), Implemented, Accepted, None, None),
            D::SecRuleInheritance => dir(Arity::exactly(1), Ignored, Restricted, Some("Off"), Some("v3 accepts only `Off`; other values are \"not yet supported\"")),
            D::SecRulePerfTime => dir(Arity::exactly(1), Ignored, Rejected, None, Some("v3 refuses to load it (\"not supported\")")),
            D::SecRuleRemoveById => dir(Arity::at_least(1), Implemented, Accepted, None, None),
            D::SecRuleRemoveByMsg => dir(Arity::at_least(1), Implemented, Accepted, None, None),
            D::SecRuleRemoveByTag => dir(Arity::at_least(1), Implemented, Accepted, None, None),
            D::SecRuleScript => dir(Arity::between(1, 2), Unsupported, Accepted, None, Some("needs a v3 build with Lua")),
            D::SecRuleUpdateActionById => dir(Arity::exactly(2), Implemented, Accepted, None, None),
            D::SecRuleUpdateTargetById => dir(Arity::between(2, 3), Implemented, Accepted, None, None),
            D::SecRuleUpdateTargetByMsg => dir(Arity::between(2, 3), Implemented, Accepted, None, None),
            D::SecRuleUpdateTargetByTag => dir(Arity::between(2, 3), Implemented, Accepted, None, None),
            D::SecSensorId => dir(Arity::exactly(1), Ignored, Rejected, None, Some("v3 refuses to load it (\"not supported\")")),
            D::SecServerSignature => dir(Arity::exactly(1), Ignored, Rejected, None, Some("v3 refuses to load it (\"not supported\")")),
            D::SecStatusEngine => dir(Arity::exactly(1), Ignored, Accepted, None, Some("accepted and ignored by v3")),
            D::SecStreamInBodyInspection => dir(Arity::exactly(1), Unsupported, Rejected, None, Some("v3 refuses to load it (\"not supported\")")),
            D::SecStreamOutBodyInspection => dir(Arity::exactly(1), Unsupported, Rejected, None, Some("v3 refuses to load it (\"not supported\")")),
            D::SecTmpDir => dir(Arity::exactly(1), Ignored, Accepted, None, Some("accepted and ignored by v3")),
            D::SecTmpSaveUploadedFiles => dir(Arity::exactly(1), Ignored, Accepted, None, None),
            D::SecUnicodeMapFile => dir(Arity::exactly(2), Implemented, Accepted, None, None),
            D::SecUploadDir => dir(Arity::exactly(1), Ignored, Accepted, None, None),
            D::SecUploadFileLimit => dir(Arity::exactly(1), Ignored, Accepted, None, None),
            D::SecUploadFileMode => dir(Arity::exactly(1), Ignored, Accepted, None, None),
            D::SecUploadKeepFiles => dir(Arity::exactly(1), Ignored, Accepted, None, None),
            D::SecWebAppId => dir(Arity::exactly(1), Ignored, Accepted, None, None),
            D::SecXmlExternalEntity => dir(Arity::exactly(1), Ignored, Accepted, None, None),
            D::WafPcreFallback => dir(Arity::exactly(1), Implemented, Rejected, None, Some("this engine's own: PCRE-only `@rx` patterns run on PCRE2 under a match limit instead of failing to load; v3 does not know the directive")),
        }
    }

    /// How many arguments the directive takes.
    pub fn args(self) -> Arity {
        self.info().args
    }

    /// What this engine does with the directive. The groups:
    ///
    /// * **Rules and rule exceptions** (`SecRule`, `SecAction`,
    ///   `SecDefaultAction`, `SecMarker`, `SecRuleRemove*`, `SecRuleUpdate*`,
    ///   `Include`): implemented, they are the rule set.
    /// * **Engine and body-processing settings** (`SecRuleEngine`,
    ///   `SecRequestBody*`/`SecResponseBody*` access, limits and actions, MIME
    ///   types, JSON depth, `SecArgumentsLimit`, `SecArgumentSeparator`,
    ///   `SecParseXmlIntoArgs`, `SecUploadFileLimit`, `SecUnicodeMapFile`,
    ///   `SecWebAppId`): implemented, they change what variables hold or what
    ///   the verdict is.
    /// * **Logging and audit logging** (`SecAudit*`, `SecDebugLog*`,
    ///   `SecComponentSignature`, `SecGuardianLog`, `SecStatusEngine`,
    ///   `SecRulePerfTime`, `SecSensorId`): ignored, the engine reports matches
    ///   to its host and writes no logs of its own.
    /// * **Files and storage** (`SecDataDir`, `SecTmpDir`, `SecUploadDir`,
    ///   `SecUploadFileMode`, `SecUploadKeepFiles`, `SecTmpSaveUploadedFiles`,
    ///   `SecCollectionTimeout`, `SecChrootDir`): ignored, the engine keeps
    ///   everything in memory and writes nothing.
    /// * **Server / connector behaviour and performance knobs**
    ///   (`SecServerSignature`, `SecConnEngine`, `SecConnRead/WriteStateLimit`,
    ///   `SecDisableBackendCompression`, `SecInterceptOnError`,
    ///   `SecRequestBodyInMemoryLimit`, `SecCacheTransformations`,
    ///   `SecRuleInheritance` (no Apache contexts),
    ///   `SecCookieFormat` (only version 0 cookies exist in v3),
    ///   `SecXmlExternalEntity` (external entities are never loaded),
    ///   `SecRemoteRulesFailAction`): ignored.
    /// * **Configuration of unsupported features** (`SecGeoLookupDb`,
    ///   `SecGsbLookupDb`, `SecHttpBlKey`): ignored; the operators that would
    ///   use them (`@geoLookup`, `@gsbLookup`, `@rbl`) are reported instead.
    /// * **Backtracking regexes**: `WafPcreFallback On` (a directive of this
    ///   engine's own) runs PCRE-only `@rx` patterns on PCRE2 instead of
    ///   refusing them, under `SecPcreMatchLimit` and
    ///   `SecPcreMatchLimitRecursion` (which v3 accepts and ignores).
    /// * **Unsupported**: `SecRemoteRules` (downloads rules), `SecRuleScript`
    ///   (Lua), `SecContentInjection`, `SecStreamIn/OutBodyInspection` and the
    ///   `SecHash*` family (response rewriting / v2-only stream variables),
    ///   `SecCookieV0Separator` (changes cookie parsing; v3 rejects it).
    pub fn supported(self) -> Support {
        self.info().support
    }

    /// What libmodsecurity v3 does with the directive (from `seclang-parser.yy`).
    pub fn v3_status(self) -> V3Status {
        self.info().v3
    }

    /// The value a [`V3Status::Restricted`] directive must have for v3 to
    /// accept it (compared case-insensitively).
    pub fn v3_only_value(self) -> Option<&'static str> {
        self.info().v3_only_value
    }

    /// A short remark on v3's behaviour, where it is not the obvious one.
    pub fn v3_note(self) -> Option<&'static str> {
        self.info().v3_note
    }
}

// ---------------------------------------------------------------------------
// Variables
// ---------------------------------------------------------------------------

name_enum! {
    /// Every variable (collection or scalar) the v3 scanner recognises.
    ///
    /// Surprises worth knowing:
    /// * v3 spells `SESSIONID`, `USERID`, `WEBAPPID` and `FILES_TMPNAMES`
    ///   without the underscore one might expect.
    /// * `MULTIPART_SEMICOLON_MISSING` is an alias of
    ///   `MULTIPART_MISSING_SEMICOLON`.
    /// * `STATUS_LINE` exists but v3 resolves it to the same value as `STATUS`
    ///   (the response status), not to the status line of v2.
    /// * `MULTIPART_FILENAME` and `MULTIPART_NAME` are collections in v3
    ///   (scalars in v2).
    /// * v2-only variables (`PERF_*`, `SCRIPT_*`, `STREAM_*_BODY`,
    ///   `USERAGENT_IP`, `WEBSERVER_ERROR_LOG`, ...) are not here; see
    ///   [`V2_ONLY_VARIABLES`] for a better diagnostic.
    pub enum Variable {
        Args = "ARGS",
        ArgsCombinedSize = "ARGS_COMBINED_SIZE",
        ArgsGet = "ARGS_GET",
        ArgsGetNames = "ARGS_GET_NAMES",
        ArgsNames = "ARGS_NAMES",
        ArgsPost = "ARGS_POST",
        ArgsPostNames = "ARGS_POST_NAMES",
        AuthType = "AUTH_TYPE",
        Duration = "DURATION",
        Env = "ENV",
        Files = "FILES",
        FilesCombinedSize = "FILES_COMBINED_SIZE",
        FilesNames = "FILES_NAMES",
        FilesSizes = "FILES_SIZES",
        FilesTmpContent = "FILES_TMP_CONTENT",
        FilesTmpNames = "FILES_TMPNAMES",
        FullRequest = "FULL_REQUEST",
        FullRequestLength = "FULL_REQUEST_LENGTH",
        Geo = "GEO",
        Global = "GLOBAL",
        HighestSeverity = "HIGHEST_SEVERITY",
        InboundDataError = "INBOUND_DATA_ERROR",
        Ip = "IP",
        MatchedVar = "MATCHED_VAR",
        MatchedVarName = "MATCHED_VAR_NAME",
        MatchedVars = "MATCHED_VARS",
        MatchedVarsNames = "MATCHED_VARS_NAMES",
        ModsecBuild = "MODSEC_BUILD",
        MscPcreError = "MSC_PCRE_ERROR",
        MscPcreLimitsExceeded = "MSC_PCRE_LIMITS_EXCEEDED",
        MultipartBoundaryQuoted = "MULTIPART_BOUNDARY_QUOTED",
        MultipartBoundaryWhitespace = "MULTIPART_BOUNDARY_WHITESPACE",
        MultipartCrlfLfLines = "MULTIPART_CRLF_LF_LINES",
        MultipartDataAfter = "MULTIPART_DATA_AFTER",
        MultipartDataBefore = "MULTIPART_DATA_BEFORE",
        MultipartFileLimitExceeded = "MULTIPART_FILE_LIMIT_EXCEEDED",
        MultipartFilename = "MULTIPART_FILENAME",
        MultipartHeaderFolding = "MULTIPART_HEADER_FOLDING",
        MultipartInvalidHeaderFolding = "MULTIPART_INVALID_HEADER_FOLDING",
        MultipartInvalidPart = "MULTIPART_INVALID_PART",
        MultipartInvalidQuoting = "MULTIPART_INVALID_QUOTING",
        MultipartLfLine = "MULTIPART_LF_LINE",
        MultipartMissingSemicolon = "MULTIPART_MISSING_SEMICOLON",
        MultipartName = "MULTIPART_NAME",
        MultipartPartHeaders = "MULTIPART_PART_HEADERS",
        MultipartStrictError = "MULTIPART_STRICT_ERROR",
        MultipartUnmatchedBoundary = "MULTIPART_UNMATCHED_BOUNDARY",
        OutboundDataError = "OUTBOUND_DATA_ERROR",
        PathInfo = "PATH_INFO",
        QueryString = "QUERY_STRING",
        RemoteAddr = "REMOTE_ADDR",
        RemoteHost = "REMOTE_HOST",
        RemotePort = "REMOTE_PORT",
        RemoteUser = "REMOTE_USER",
        ReqbodyError = "REQBODY_ERROR",
        ReqbodyErrorMsg = "REQBODY_ERROR_MSG",
        ReqbodyProcessor = "REQBODY_PROCESSOR",
        ReqbodyProcessorError = "REQBODY_PROCESSOR_ERROR",
        ReqbodyProcessorErrorMsg = "REQBODY_PROCESSOR_ERROR_MSG",
        RequestBasename = "REQUEST_BASENAME",
        RequestBody = "REQUEST_BODY",
        RequestBodyLength = "REQUEST_BODY_LENGTH",
        RequestCookies = "REQUEST_COOKIES",
        RequestCookiesNames = "REQUEST_COOKIES_NAMES",
        RequestFilename = "REQUEST_FILENAME",
        RequestHeaders = "REQUEST_HEADERS",
        RequestHeadersNames = "REQUEST_HEADERS_NAMES",
        RequestLine = "REQUEST_LINE",
        RequestMethod = "REQUEST_METHOD",
        RequestProtocol = "REQUEST_PROTOCOL",
        RequestUri = "REQUEST_URI",
        RequestUriRaw = "REQUEST_URI_RAW",
        Resource = "RESOURCE",
        ResponseBody = "RESPONSE_BODY",
        ResponseContentLength = "RESPONSE_CONTENT_LENGTH",
        ResponseContentType = "RESPONSE_CONTENT_TYPE",
        ResponseHeaders = "RESPONSE_HEADERS",
        ResponseHeadersNames = "RESPONSE_HEADERS_NAMES",
        ResponseProtocol = "RESPONSE_PROTOCOL",
        ResponseStatus = "RESPONSE_STATUS",
        Rule = "RULE",
        ServerAddr = "SERVER_ADDR",
        ServerName = "SERVER_NAME",
        ServerPort = "SERVER_PORT",
        Session = "SESSION",
        SessionId = "SESSIONID",
        Status = "STATUS",
        StatusLine = "STATUS_LINE",
        Time = "TIME",
        TimeDay = "TIME_DAY",
        TimeEpoch = "TIME_EPOCH",
        TimeHour = "TIME_HOUR",
        TimeMin = "TIME_MIN",
        TimeMon = "TIME_MON",
        TimeSec = "TIME_SEC",
        TimeWday = "TIME_WDAY",
        TimeYear = "TIME_YEAR",
        Tx = "TX",
        UniqueId = "UNIQUE_ID",
        UrlencodedError = "URLENCODED_ERROR",
        User = "USER",
        UserId = "USERID",
        WebAppId = "WEBAPPID",
        Xml = "XML",
    }
    aliases {
        "MULTIPART_SEMICOLON_MISSING" => MultipartMissingSemicolon,
    }
}

/// ModSecurity v2 variables that v3 does not know (a syntax error in v3).
/// Only for diagnostics ("`X` is a ModSecurity v2 variable"); [`Variable::lookup`]
/// does not accept them.
pub const V2_ONLY_VARIABLES: &[&str] = &[
    "PERF_ALL",
    "PERF_COMBINED",
    "PERF_GC",
    "PERF_LOGGING",
    "PERF_PHASE1",
    "PERF_PHASE2",
    "PERF_PHASE3",
    "PERF_PHASE4",
    "PERF_PHASE5",
    "PERF_RULES",
    "PERF_SREAD",
    "PERF_SWRITE",
    "SCRIPT_BASENAME",
    "SCRIPT_FILENAME",
    "SCRIPT_GID",
    "SCRIPT_GROUPNAME",
    "SCRIPT_MODE",
    "SCRIPT_UID",
    "SCRIPT_USERNAME",
    "SDBM_DELETE_ERROR",
    "STREAM_INPUT_BODY",
    "STREAM_OUTPUT_BODY",
    "USERAGENT_IP",
    "WEBSERVER_ERROR_LOG",
];

/// Whether `name` is a ModSecurity v2 variable that v3 does not have.
pub fn is_v2_only_variable(name: &str) -> bool {
    V2_ONLY_VARIABLES
        .iter()
        .any(|v| v.eq_ignore_ascii_case(name))
}

/// Everything the registry knows about a variable: one row per name in
/// [`Variable::info`], matched without a catch-all arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VariableInfo {
    /// See [`Variable::supported`].
    pub support: Support,
    /// See [`Variable::is_collection`].
    pub collection: bool,
    /// See [`Variable::keys_case_insensitive`].
    pub keys_case_insensitive: bool,
    /// See [`Variable::earliest_phase`].
    pub earliest_phase: u8,
    /// See [`Variable::is_persistent`].
    pub persistent: bool,
}

impl Variable {
    /// The variable's row of facts.
    #[rustfmt::skip]
    pub const fn info(self) -> VariableInfo {
        use Support::*;
        use Variable as V;
        // support, collection, case-insensitive keys, earliest phase, persistent
        const fn var(support: Support, collection: bool, keys_case_insensitive: bool, earliest_phase: u8, persistent: bool) -> VariableInfo {
            VariableInfo { support, collection, keys_case_insensitive, earliest_phase, persistent }
        }
        match self {
            V::Args => var(Implemented, true, true, 1, false),
            V::ArgsCombinedSize => var(Implemented, false, false, 1, false),
            V::ArgsGet => var(Implemented, true, true, 1, false),
            V::ArgsGetNames => var(Implemented, true, true, 1, false),
            V::ArgsNames => var(Implemented, true, true, 1, false),
            V::ArgsPost => var(Implemented, true, true, 2, false),
            V::ArgsPostNames => var(Implemented, true, true, 2, false),
            V::AuthType => var(Implemented, false, false, 1, false),
            V::Duration => var(Implemented, false, false, 1, false),
            V::Env => var(Implemented, true, false, 1, false),
            V::Files => var(Implemented, true, true, 2, false),
            V::FilesCombinedSize => var(Implemented, false, false, 2, false),
            V::FilesNames => var(Implemented, true, true, 2, false),
            V::FilesSizes => var(Implemented, true, true, 2, false),
            V::FilesTmpContent => var(Unsupported, true, true, 2, false),
            V::FilesTmpNames => var(Unsupported, true, true, 2, false),
            V::FullRequest => var(Implemented, false, false, 2, false),
            V::FullRequestLength => var(Implemented, false, false, 2, false),
            V::Geo => var(Unsupported, true, true, 1, false),
            V::Global => var(Implemented, true, true, 1, true),
            V::HighestSeverity => var(Implemented, false, false, 1, false),
            V::InboundDataError => var(Implemented, false, false, 2, false),
            V::Ip => var(Implemented, true, true, 1, true),
            V::MatchedVar => var(Implemented, false, false, 1, false),
            V::MatchedVarName => var(Implemented, false, false, 1, false),
            V::MatchedVars => var(Implemented, true, true, 1, false),
            V::MatchedVarsNames => var(Implemented, true, true, 1, false),
            V::ModsecBuild => var(Unsupported, false, false, 1, false),
            V::MscPcreError => var(Implemented, false, false, 1, false),
            V::MscPcreLimitsExceeded => var(Implemented, false, false, 1, false),
            V::MultipartBoundaryQuoted => var(Implemented, false, false, 2, false),
            V::MultipartBoundaryWhitespace => var(Implemented, false, false, 2, false),
            V::MultipartCrlfLfLines => var(Implemented, false, false, 2, false),
            V::MultipartDataAfter => var(Implemented, false, false, 2, false),
            V::MultipartDataBefore => var(Implemented, false, false, 2, false),
            V::MultipartFileLimitExceeded => var(Implemented, false, false, 2, false),
            V::MultipartFilename => var(Implemented, true, true, 2, false),
            V::MultipartHeaderFolding => var(Implemented, false, false, 2, false),
            V::MultipartInvalidHeaderFolding => var(Implemented, false, false, 2, false),
            V::MultipartInvalidPart => var(Implemented, false, false, 2, false),
            V::MultipartInvalidQuoting => var(Implemented, false, false, 2, false),
            V::MultipartLfLine => var(Implemented, false, false, 2, false),
            V::MultipartMissingSemicolon => var(Implemented, false, false, 2, false),
            V::MultipartName => var(Implemented, true, true, 2, false),
            V::MultipartPartHeaders => var(Implemented, true, true, 2, false),
            V::MultipartStrictError => var(Implemented, false, false, 2, false),
            V::MultipartUnmatchedBoundary => var(Implemented, false, false, 2, false),
            V::OutboundDataError => var(Implemented, false, false, 4, false),
            V::PathInfo => var(Implemented, false, false, 1, false),
            V::QueryString => var(Implemented, false, false, 1, false),
            V::RemoteAddr => var(Implemented, false, false, 1, false),
            V::RemoteHost => var(Unsupported, false, false, 1, false),
            V::RemotePort => var(Implemented, false, false, 1, false),
            V::RemoteUser => var(Unsupported, false, false, 1, false),
            V::ReqbodyError => var(Implemented, false, false, 2, false),
            V::ReqbodyErrorMsg => var(Implemented, false, false, 2, false),
            V::ReqbodyProcessor => var(Implemented, false, false, 1, false),
            V::ReqbodyProcessorError => var(Implemented, false, false, 2, false),
            V::ReqbodyProcessorErrorMsg => var(Implemented, false, false, 2, false),
            V::RequestBasename => var(Implemented, false, false, 1, false),
            V::RequestBody => var(Implemented, false, false, 2, false),
            V::RequestBodyLength => var(Implemented, false, false, 2, false),
            V::RequestCookies => var(Implemented, true, true, 1, false),
            V::RequestCookiesNames => var(Implemented, true, true, 1, false),
            V::RequestFilename => var(Implemented, false, false, 1, false),
            V::RequestHeaders => var(Implemented, true, true, 1, false),
            V::RequestHeadersNames => var(Implemented, true, true, 1, false),
            V::RequestLine => var(Implemented, false, false, 1, false),
            V::RequestMethod => var(Implemented, false, false, 1, false),
            V::RequestProtocol => var(Implemented, false, false, 1, false),
            V::RequestUri => var(Implemented, false, false, 1, false),
            V::RequestUriRaw => var(Implemented, false, false, 1, false),
            V::Resource => var(Implemented, true, true, 1, true),
            V::ResponseBody => var(Implemented, false, false, 4, false),
            V::ResponseContentLength => var(Implemented, false, false, 3, false),
            V::ResponseContentType => var(Implemented, false, false, 3, false),
            V::ResponseHeaders => var(Implemented, true, true, 3, false),
            V::ResponseHeadersNames => var(Implemented, true, true, 3, false),
            V::ResponseProtocol => var(Implemented, false, false, 3, false),
            V::ResponseStatus => var(Implemented, false, false, 3, false),
            V::Rule => var(Unsupported, true, false, 1, false),
            V::ServerAddr => var(Implemented, false, false, 1, false),
            V::ServerName => var(Implemented, false, false, 1, false),
            V::ServerPort => var(Implemented, false, false, 1, false),
            V::Session => var(Implemented, true, true, 1, true),
            V::SessionId => var(Implemented, false, false, 1, false),
            V::Status => var(Implemented, false, false, 3, false),
            V::StatusLine => var(Implemented, false, false, 3, false),
            V::Time => var(Implemented, false, false, 1, false),
            V::TimeDay => var(Implemented, false, false, 1, false),
            V::TimeEpoch => var(Implemented, false, false, 1, false),
            V::TimeHour => var(Implemented, false, false, 1, false),
            V::TimeMin => var(Implemented, false, false, 1, false),
            V::TimeMon => var(Implemented, false, false, 1, false),
            V::TimeSec => var(Implemented, false, false, 1, false),
            V::TimeWday => var(Implemented, false, false, 1, false),
            V::TimeYear => var(Implemented, false, false, 1, false),
            V::Tx => var(Implemented, true, true, 1, false),
            V::UniqueId => var(Implemented, false, false, 1, false),
            V::UrlencodedError => var(Implemented, false, false, 1, false),
            V::User => var(Implemented, true, true, 1, true),
            V::UserId => var(Implemented, false, false, 1, false),
            V::WebAppId => var(Unsupported, false, false, 1, false),
            V::Xml => var(Implemented, true, false, 2, false),
        }
    }

    /// What this engine does with the variable: `Unsupported` for those v3
    /// knows but nothing sets in a self-contained engine (`FILES_TMPNAMES`
    /// and `FILES_TMP_CONTENT`: no temporary files are kept; `GEO`: no GeoIP
    /// database; `REMOTE_HOST`: no reverse DNS; `REMOTE_USER`: no server
    /// authentication; `WEBAPPID`, `MODSEC_BUILD`, `RULE`): rules on them see
    /// an unset variable, and the checker says so. (`SESSIONID` and `USERID`
    /// are set by `setsid` and `setuid`.)
    pub fn supported(self) -> Support {
        self.info().support
    }

    /// Whether it accepts a `:selector` and yields several values. These are
    /// exactly the variables the v3 grammar accepts with a dictionary element
    /// (`ARGS:foo`, `TX:/^x/`, `XML:/xpath`, `ENV:PATH`, `RULE:id`...).
    pub fn is_collection(self) -> bool {
        self.info().collection
    }

    /// Whether selector keys are compared case-insensitively (always `false`
    /// for scalars). In v3 every request/response collection and every
    /// `TX`/persistent collection is stored with case-insensitive keys
    /// (`REQUEST_HEADERS:user-agent` = `REQUEST_HEADERS:User-Agent`,
    /// `TX:FOO` = `setvar:tx.foo`). The exceptions, compared exactly: `ENV`
    /// (environment variable names), `XML` (the selector is an XPath
    /// expression) and `RULE` (v3 compares the key with `id`, `msg`, ...
    /// verbatim).
    pub fn keys_case_insensitive(self) -> bool {
        self.info().keys_case_insensitive
    }

    /// The first phase in which the variable has a value (1 request headers,
    /// 2 request body, 3 response headers, 4 response body, 5 logging). Used
    /// for "not available in this phase" warnings, so it errs early:
    /// `ARGS`, `ARGS_NAMES` and `ARGS_COMBINED_SIZE` say 1 because they
    /// already hold the query-string arguments there; `REQBODY_PROCESSOR` is
    /// chosen from `Content-Type` in phase 1; transaction-scoped values
    /// (`TX`, `MATCHED_*`, `RULE`, persistent collections, time) exist from 1.
    pub fn earliest_phase(self) -> u8 {
        self.info().earliest_phase
    }

    /// Persistent collections (opened with `initcol`/`setsid`/`setuid`/`setrsc`).
    pub fn is_persistent(self) -> bool {
        self.info().persistent
    }
}

// ---------------------------------------------------------------------------
// Operators
// ---------------------------------------------------------------------------

name_enum! {
    /// Every operator the v3 scanner recognises, named without the `@`.
    ///
    /// Surprises worth knowing:
    /// * `pmf` and `ipMatchF` are aliases of `pmFromFile` and `ipMatchFromFile`.
    /// * v3 lexes `@gsbLookup`, `@rsub` and `@validateHash` only to reject them.
    /// * `@noMatch` is ModSecurity v2 only (v3's scanner does not know it).
    /// * A rule with no `@` operator means `@rx`.
    pub enum Operator {
        BeginsWith = "beginsWith",
        Contains = "contains",
        ContainsWord = "containsWord",
        DetectSqli = "detectSQLi",
        DetectXss = "detectXSS",
        EndsWith = "endsWith",
        Eq = "eq",
        FuzzyHash = "fuzzyHash",
        Ge = "ge",
        GeoLookup = "geoLookup",
        GsbLookup = "gsbLookup",
        Gt = "gt",
        InspectFile = "inspectFile",
        IpMatch = "ipMatch",
        IpMatchFromFile = "ipMatchFromFile",
        Le = "le",
        Lt = "lt",
        NoMatch = "noMatch",
        Pm = "pm",
        PmFromFile = "pmFromFile",
        Rbl = "rbl",
        Rsub = "rsub",
        Rx = "rx",
        RxGlobal = "rxGlobal",
        Streq = "streq",
        Strmatch = "strmatch",
        UnconditionalMatch = "unconditionalMatch",
        ValidateByteRange = "validateByteRange",
        ValidateDtd = "validateDTD",
        ValidateHash = "validateHash",
        ValidateSchema = "validateSchema",
        ValidateUrlEncoding = "validateUrlEncoding",
        ValidateUtf8Encoding = "validateUtf8Encoding",
        VerifyCc = "verifyCC",
        VerifyCpf = "verifyCPF",
        VerifySsn = "verifySSN",
        VerifySvnr = "verifySVNR",
        Within = "within",
    }
    aliases {
        "pmf" => PmFromFile,
        "ipMatchF" => IpMatchFromFile,
    }
}

/// Everything the registry knows about an operator. Each name has one row in
/// [`Operator::info`], whose `match` has no catch-all arm: a new operator
/// does not compile until its row says what it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OperatorInfo {
    /// See [`Operator::argument`].
    pub argument: ArgKind,
    /// See [`Operator::supported`].
    pub support: Support,
    /// See [`Operator::v3_status`].
    pub v3: V3Status,
    /// See [`Operator::takes_file`].
    pub takes_file: bool,
    /// See [`Operator::allows_macros`].
    pub allows_macros: bool,
}

impl Operator {
    /// The operator's row of facts.
    #[rustfmt::skip]
    pub const fn info(self) -> OperatorInfo {
        use ArgKind::{None as NoArg, Required};
        use Operator as O;
        use Support::*;
        use V3Status::*;
        // argument, support, v3 status, takes a file, allows macros
        const fn op(argument: ArgKind, support: Support, v3: V3Status, takes_file: bool, allows_macros: bool) -> OperatorInfo {
            OperatorInfo { argument, support, v3, takes_file, allows_macros }
        }
        match self {
            O::BeginsWith => op(Required, Implemented, Accepted, false, true),
            O::Contains => op(Required, Implemented, Accepted, false, true),
            O::ContainsWord => op(Required, Implemented, Accepted, false, true),
            O::DetectSqli => op(NoArg, Implemented, Accepted, false, false),
            O::DetectXss => op(NoArg, Implemented, Accepted, false, false),
            O::EndsWith => op(Required, Implemented, Accepted, false, true),
            O::Eq => op(Required, Implemented, Accepted, false, true),
            O::FuzzyHash => op(Required, Unsupported, Accepted, true, false),
            O::Ge => op(Required, Implemented, Accepted, false, true),
            O::GeoLookup => op(NoArg, Unsupported, Accepted, false, false),
            O::GsbLookup => op(Required, Unsupported, Rejected, false, false),
            O::Gt => op(Required, Implemented, Accepted, false, true),
            O::InspectFile => op(Required, Unsupported, Accepted, true, false),
            O::IpMatch => op(Required, Implemented, Accepted, false, false),
            O::IpMatchFromFile => op(Required, Implemented, Accepted, true, false),
            O::Le => op(Required, Implemented, Accepted, false, true),
            O::Lt => op(Required, Implemented, Accepted, false, true),
            O::NoMatch => op(NoArg, Implemented, NotInV3, false, false),
            O::Pm => op(Required, Implemented, Accepted, false, false),
            O::PmFromFile => op(Required, Implemented, Accepted, true, false),
            O::Rbl => op(Required, Unsupported, Accepted, false, false),
            O::Rsub => op(Required, Unsupported, Rejected, false, false),
            O::Rx => op(Required, Implemented, Accepted, false, true),
            O::RxGlobal => op(Required, Implemented, Accepted, false, true),
            O::Streq => op(Required, Implemented, Accepted, false, true),
            O::Strmatch => op(Required, Implemented, Accepted, false, true),
            O::UnconditionalMatch => op(NoArg, Implemented, Accepted, false, false),
            O::ValidateByteRange => op(Required, Implemented, Accepted, false, false),
            O::ValidateDtd => op(Required, Unsupported, Accepted, true, false),
            O::ValidateHash => op(Required, Unsupported, Rejected, false, false),
            O::ValidateSchema => op(Required, Unsupported, Accepted, true, false),
            O::ValidateUrlEncoding => op(NoArg, Implemented, Accepted, false, false),
            O::ValidateUtf8Encoding => op(NoArg, Implemented, Accepted, false, false),
            O::VerifyCc => op(Required, Implemented, Accepted, false, false),
            O::VerifyCpf => op(Required, Implemented, Accepted, false, false),
            O::VerifySsn => op(Required, Implemented, Accepted, false, false),
            O::VerifySvnr => op(Required, Implemented, Accepted, false, false),
            O::Within => op(Required, Implemented, Accepted, false, true),
        }
    }

    /// Whether the operator takes an argument. The v3 scanner lexes
    /// `@detectSQLi`, `@detectXSS`, `@geoLookup`, `@validateUrlEncoding`,
    /// `@validateUtf8Encoding` (and `@unconditionalMatch`) without one.
    pub fn argument(self) -> ArgKind {
        self.info().argument
    }

    /// What this engine does with the operator.
    ///
    /// Implemented: string, numeric, set (`pm`, `ipMatch`, from files read at
    /// compile time), regex, libinjection-style detection, validation and
    /// checksum (`verify*`) operators. Unsupported: `@rbl` (DNS),
    /// `@geoLookup` (GeoIP database), `@fuzzyHash` (ssdeep database),
    /// `@inspectFile` (runs an external program), `@validateDTD` /
    /// `@validateSchema` (libxml2 validation against external files),
    /// `@gsbLookup` / `@rsub` / `@validateHash` (rejected by v3 too).
    /// `@noMatch` is not a v3 operator (ModSecurity v2's); it is implemented:
    /// it never matches.
    pub fn supported(self) -> Support {
        self.info().support
    }

    /// What libmodsecurity v3 does with the operator.
    pub fn v3_status(self) -> V3Status {
        self.info().v3
    }

    /// Whether the argument names a file (resolved relative to the rule
    /// file): the data file of `pmFromFile` / `ipMatchFromFile`, the DTD or
    /// schema of `validateDTD` / `validateSchema`, the hash database of
    /// `fuzzyHash` (followed by a threshold), the script of `inspectFile`.
    pub fn takes_file(self) -> bool {
        self.info().takes_file
    }

    /// Whether `%{...}` in the argument is expanded at run time in v3. v3
    /// hands every operator a run-time string, but only these evaluate it per
    /// transaction: `rx` and `rxGlobal` (recompiling the regex when the
    /// pattern has a macro), `streq`, `strmatch`, `contains`, `containsWord`,
    /// `beginsWith`, `endsWith`, `within`, and the numeric comparisons. All
    /// others (`pm`, `ipMatch`, the `*FromFile` ones, `validate*`, `verify*`,
    /// `rbl`, ...) read their argument once at load time.
    pub fn allows_macros(self) -> bool {
        self.info().allows_macros
    }
}

// ---------------------------------------------------------------------------
// Transformations
// ---------------------------------------------------------------------------

name_enum! {
    /// Every transformation (`t:`) the v3 scanner recognises.
    ///
    /// Surprises worth knowing:
    /// * `normalizePath` / `normalizePathWin` are aliases of `normalisePath` /
    ///   `normalisePathWin` (one function, two spellings).
    /// * The canonical spelling is `utf8toUnicode` (lower-case `t`).
    /// * `phpArgsNames` only ever lived on a v3 development branch; it is not
    ///   in any 3.0.x release and not here.
    pub enum Transform {
        Base64Decode = "base64Decode",
        Base64DecodeExt = "base64DecodeExt",
        Base64Encode = "base64Encode",
        CmdLine = "cmdLine",
        CompressWhitespace = "compressWhitespace",
        CssDecode = "cssDecode",
        EscapeSeqDecode = "escapeSeqDecode",
        HexDecode = "hexDecode",
        HexEncode = "hexEncode",
        HtmlEntityDecode = "htmlEntityDecode",
        JsDecode = "jsDecode",
        Length = "length",
        Lowercase = "lowercase",
        Md5 = "md5",
        None = "none",
        NormalisePath = "normalisePath",
        NormalisePathWin = "normalisePathWin",
        ParityEven7bit = "parityEven7bit",
        ParityOdd7bit = "parityOdd7bit",
        ParityZero7bit = "parityZero7bit",
        RemoveComments = "removeComments",
        RemoveCommentsChar = "removeCommentsChar",
        RemoveNulls = "removeNulls",
        RemoveWhitespace = "removeWhitespace",
        ReplaceComments = "replaceComments",
        ReplaceNulls = "replaceNulls",
        Sha1 = "sha1",
        SqlHexDecode = "sqlHexDecode",
        Trim = "trim",
        TrimLeft = "trimLeft",
        TrimRight = "trimRight",
        Uppercase = "uppercase",
        UrlDecode = "urlDecode",
        UrlDecodeUni = "urlDecodeUni",
        UrlEncode = "urlEncode",
        Utf8ToUnicode = "utf8toUnicode",
    }
    aliases {
        "normalizePath" => NormalisePath,
        "normalizePathWin" => NormalisePathWin,
    }
}

/// Everything the registry knows about a transformation: one row per name
/// in [`Transform::info`], matched without a catch-all arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransformInfo {
    /// Every transformation is implemented (byte-exact with v3), but the
    /// column exists so that one that is not cannot be added silently.
    pub support: Support,
    /// See [`Transform::is_identity_on_ascii_lowercase_alnum`].
    pub identity_on_ascii_lowercase_alnum: bool,
}

impl Transform {
    /// The transformation's row of facts.
    #[rustfmt::skip]
    pub const fn info(self) -> TransformInfo {
        use Support::*;
        use Transform as T;
        // support, identity on ASCII lower-case letters and digits
        const fn tr(support: Support, identity_on_ascii_lowercase_alnum: bool) -> TransformInfo {
            TransformInfo { support, identity_on_ascii_lowercase_alnum }
        }
        match self {
            T::Base64Decode => tr(Implemented, false),
            T::Base64DecodeExt => tr(Implemented, false),
            T::Base64Encode => tr(Implemented, false),
            T::CmdLine => tr(Implemented, true),
            T::CompressWhitespace => tr(Implemented, true),
            T::CssDecode => tr(Implemented, true),
            T::EscapeSeqDecode => tr(Implemented, true),
            T::HexDecode => tr(Implemented, false),
            T::HexEncode => tr(Implemented, false),
            T::HtmlEntityDecode => tr(Implemented, true),
            T::JsDecode => tr(Implemented, true),
            T::Length => tr(Implemented, false),
            T::Lowercase => tr(Implemented, true),
            T::Md5 => tr(Implemented, false),
            T::None => tr(Implemented, true),
            T::NormalisePath => tr(Implemented, true),
            T::NormalisePathWin => tr(Implemented, true),
            T::ParityEven7bit => tr(Implemented, false),
            T::ParityOdd7bit => tr(Implemented, false),
            T::ParityZero7bit => tr(Implemented, true),
            T::RemoveComments => tr(Implemented, true),
            T::RemoveCommentsChar => tr(Implemented, true),
            T::RemoveNulls => tr(Implemented, true),
            T::RemoveWhitespace => tr(Implemented, true),
            T::ReplaceComments => tr(Implemented, true),
            T::ReplaceNulls => tr(Implemented, true),
            T::Sha1 => tr(Implemented, false),
            T::SqlHexDecode => tr(Implemented, false),
            T::Trim => tr(Implemented, true),
            T::TrimLeft => tr(Implemented, true),
            T::TrimRight => tr(Implemented, true),
            T::Uppercase => tr(Implemented, false),
            T::UrlDecode => tr(Implemented, true),
            T::UrlDecodeUni => tr(Implemented, true),
            T::UrlEncode => tr(Implemented, true),
            T::Utf8ToUnicode => tr(Implemented, true),
        }
    }

    /// What this engine does with the transformation.
    pub fn supported(self) -> Support {
        self.info().support
    }

    /// Whether the transformation returns its input unchanged when the input
    /// consists only of ASCII lower-case letters and digits (`[a-z0-9]*`):
    /// true for the decoders whose escapes need a punctuation character
    /// (`%`, `&`, `\`), the case folders to lower case, whitespace, NUL and
    /// comment removers, path normalisers, `cmdLine`, `urlEncode`,
    /// `utf8toUnicode` and `parityZero7bit`. False for everything that
    /// rewrites such input: hashes, `length`, encoders to hex/base64,
    /// `uppercase`, `hexDecode`, `sqlHexDecode` (`0x41` is alphanumeric),
    /// `base64Decode*`, `parityEven7bit` / `parityOdd7bit` (set bit 8).
    pub fn is_identity_on_ascii_lowercase_alnum(self) -> bool {
        self.info().identity_on_ascii_lowercase_alnum
    }
}

// ---------------------------------------------------------------------------
// Actions
// ---------------------------------------------------------------------------

name_enum! {
    /// Every action the v3 scanner recognises.
    ///
    /// Surprises worth knowing:
    /// * v3 lexes `append`, `prepend`, `deprecatevar`, `pause`, `proxy` and
    ///   the five `sanitise*` actions only to reject them ("not supported").
    /// * v3 accepted `expirevar` without effect before 3.0.11 (Debian's 3.0.9
    ///   still does).
    /// * Only the British `sanitise*` spellings exist in v3.
    /// * `t` is an action; its value is a [`Transform`]. `ctl`'s value starts
    ///   with a [`CtlOption`].
    pub enum Action {
        Accuracy = "accuracy",
        Allow = "allow",
        Append = "append",
        AuditLog = "auditlog",
        Block = "block",
        Capture = "capture",
        Chain = "chain",
        Ctl = "ctl",
        Deny = "deny",
        DeprecateVar = "deprecatevar",
        Drop = "drop",
        Exec = "exec",
        ExpireVar = "expirevar",
        Id = "id",
        InitCol = "initcol",
        Log = "log",
        LogData = "logdata",
        Maturity = "maturity",
        Msg = "msg",
        MultiMatch = "multiMatch",
        NoAuditLog = "noauditlog",
        NoLog = "nolog",
        Pass = "pass",
        Pause = "pause",
        Phase = "phase",
        Prepend = "prepend",
        Proxy = "proxy",
        Redirect = "redirect",
        Rev = "rev",
        SanitiseArg = "sanitiseArg",
        SanitiseMatched = "sanitiseMatched",
        SanitiseMatchedBytes = "sanitiseMatchedBytes",
        SanitiseRequestHeader = "sanitiseRequestHeader",
        SanitiseResponseHeader = "sanitiseResponseHeader",
        SetEnv = "setenv",
        SetRsc = "setrsc",
        SetSid = "setsid",
        SetUid = "setuid",
        SetVar = "setvar",
        Severity = "severity",
        Skip = "skip",
        SkipAfter = "skipAfter",
        Status = "status",
        T = "t",
        Tag = "tag",
        Ver = "ver",
        XmlNs = "xmlns",
    }
    aliases {}
}

/// Everything the registry knows about an action: one row per name in
/// [`Action::info`], matched without a catch-all arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActionInfo {
    /// See [`Action::kind`].
    pub kind: ActionKind,
    /// See [`Action::value`].
    pub value: ArgKind,
    /// See [`Action::supported`].
    pub support: Support,
    /// See [`Action::v3_status`].
    pub v3: V3Status,
    /// See [`Action::allowed_in_chain_link`].
    pub in_chain_link: bool,
    /// See [`Action::v3_rejects_in_chain_link`].
    pub v3_rejects_in_chain_link: bool,
}

impl Action {
    /// The action's row of facts.
    #[rustfmt::skip]
    pub const fn info(self) -> ActionInfo {
        use Action as A;
        use ActionKind::*;
        use ArgKind::{None as NoArg, Optional, Required};
        use Support::*;
        use V3Status::*;
        // kind, value, support, v3 status, allowed in a chain link, v3 rejects it in a chain link
        const fn act(kind: ActionKind, value: ArgKind, support: Support, v3: V3Status, in_chain_link: bool, v3_rejects_in_chain_link: bool) -> ActionInfo {
            ActionInfo { kind, value, support, v3, in_chain_link, v3_rejects_in_chain_link }
        }
        match self {
            A::Accuracy => act(Metadata, Required, Implemented, Accepted, false, false),
            A::Allow => act(Disruptive, Optional, Implemented, Accepted, false, true),
            A::Append => act(NonDisruptive, Required, Unsupported, Rejected, true, false),
            A::AuditLog => act(NonDisruptive, NoArg, Ignored, Accepted, true, false),
            A::Block => act(Disruptive, NoArg, Implemented, Accepted, false, false),
            A::Capture => act(NonDisruptive, NoArg, Implemented, Accepted, true, false),
            A::Chain => act(Flow, NoArg, Implemented, Accepted, true, false),
            A::Ctl => act(NonDisruptive, Required, Implemented, Accepted, true, false),
            A::Deny => act(Disruptive, NoArg, Implemented, Accepted, false, true),
            A::DeprecateVar => act(NonDisruptive, Required, Unsupported, Rejected, true, false),
            A::Drop => act(Disruptive, NoArg, Implemented, Accepted, false, true),
            A::Exec => act(NonDisruptive, Required, Unsupported, Accepted, true, false),
            A::ExpireVar => act(NonDisruptive, Required, Implemented, Accepted, true, false),
            A::Id => act(Metadata, Required, Implemented, Accepted, false, false),
            A::InitCol => act(NonDisruptive, Required, Implemented, Accepted, true, false),
            A::Log => act(NonDisruptive, NoArg, Implemented, Accepted, true, false),
            A::LogData => act(NonDisruptive, Required, Implemented, Accepted, false, false),
            A::Maturity => act(Metadata, Required, Implemented, Accepted, false, false),
            A::Msg => act(Metadata, Required, Implemented, Accepted, false, false),
            A::MultiMatch => act(NonDisruptive, NoArg, Implemented, Accepted, true, false),
            A::NoAuditLog => act(NonDisruptive, NoArg, Ignored, Accepted, true, false),
            A::NoLog => act(NonDisruptive, NoArg, Implemented, Accepted, true, false),
            A::Pass => act(Disruptive, NoArg, Implemented, Accepted, false, true),
            A::Pause => act(Disruptive, Required, Unsupported, Rejected, false, true),
            A::Phase => act(Metadata, Required, Implemented, Accepted, false, false),
            A::Prepend => act(NonDisruptive, Required, Unsupported, Rejected, true, false),
            A::Proxy => act(Disruptive, Required, Unsupported, Rejected, false, true),
            A::Redirect => act(Disruptive, Required, Implemented, Accepted, false, true),
            A::Rev => act(Metadata, Required, Implemented, Accepted, false, false),
            A::SanitiseArg => act(NonDisruptive, Required, Ignored, Rejected, true, false),
            A::SanitiseMatched => act(NonDisruptive, NoArg, Ignored, Rejected, true, false),
            A::SanitiseMatchedBytes => act(NonDisruptive, Optional, Ignored, Rejected, true, false),
            A::SanitiseRequestHeader => act(NonDisruptive, Required, Ignored, Rejected, true, false),
            A::SanitiseResponseHeader => act(NonDisruptive, Required, Ignored, Rejected, true, false),
            A::SetEnv => act(NonDisruptive, Required, Implemented, Accepted, true, false),
            A::SetRsc => act(NonDisruptive, Required, Implemented, Accepted, true, false),
            A::SetSid => act(NonDisruptive, Required, Implemented, Accepted, true, false),
            A::SetUid => act(NonDisruptive, Required, Implemented, Accepted, true, false),
            A::SetVar => act(NonDisruptive, Required, Implemented, Accepted, true, false),
            A::Severity => act(Metadata, Required, Implemented, Accepted, false, false),
            A::Skip => act(Flow, Required, Implemented, Accepted, false, false),
            A::SkipAfter => act(Flow, Required, Implemented, Accepted, false, false),
            A::Status => act(Data, Required, Implemented, Accepted, true, false),
            A::T => act(NonDisruptive, Required, Implemented, Accepted, true, false),
            A::Tag => act(Metadata, Required, Implemented, Accepted, false, false),
            A::Ver => act(Metadata, Required, Implemented, Accepted, false, false),
            A::XmlNs => act(Data, Required, Ignored, Accepted, true, false),
        }
    }

    /// The v3 reference manual's classification.
    pub fn kind(self) -> ActionKind {
        self.info().kind
    }

    /// Whether the action takes a value (`name:value`). `allow` may be
    /// `allow`, `allow:phase` or `allow:request`; `sanitiseMatchedBytes` may
    /// carry `:1/4`.
    pub fn value(self) -> ArgKind {
        self.info().value
    }

    /// What this engine does with the action.
    ///
    /// Unsupported: what v3 rejects and would change the outcome
    /// (`append`, `prepend`: response rewriting; `pause`, `proxy`;
    /// `deprecatevar`) and `exec` (runs a Lua script). Ignored: `auditlog` /
    /// `noauditlog` (no audit log) and the `sanitise*` family (they only
    /// mask audit-log output).
    /// Everything else is implemented.
    pub fn supported(self) -> Support {
        self.info().support
    }

    /// What libmodsecurity v3 does with the action.
    pub fn v3_status(self) -> V3Status {
        self.info().v3
    }

    /// Whether the action may appear in a chained rule other than the chain
    /// starter, per the reference manual: "disruptive actions, execution
    /// phases, metadata actions (id, rev, msg, tag, severity, logdata),
    /// skip, and skipAfter actions can be used only by the chain starter".
    /// So: every disruptive action, `skip`, `skipAfter`, every metadata
    /// action (`accuracy`, `id`, `maturity`, `msg`, `phase`, `rev`,
    /// `severity`, `tag`, `ver`) and `logdata` are starter-only; everything
    /// else (`chain`, `t`, `setvar`, `capture`, `ctl`, `initcol`,
    /// `multiMatch`, `log`/`nolog`, `status`, ...) is allowed. CRS v4 chain
    /// links use `chain`, `t`, `setvar`, `capture`, `ctl` and `initcol`.
    ///
    /// libmodsecurity v3 enforces only part of this: it refuses a chain link
    /// with a disruptive action other than `block` (see
    /// [`Action::v3_rejects_in_chain_link`]) and silently ignores the rest
    /// (a link's `phase` is overwritten with the starter's; its `id`, `msg`,
    /// `tag`... are kept but never used for the chain).
    pub fn allowed_in_chain_link(self) -> bool {
        self.info().in_chain_link
    }

    /// Whether libmodsecurity v3 refuses to load a chain link that carries
    /// this action ("Disruptive actions can only be specified by chain
    /// starter rules."). `block` is not counted as disruptive there.
    pub fn v3_rejects_in_chain_link(self) -> bool {
        self.info().v3_rejects_in_chain_link
    }
}

// ---------------------------------------------------------------------------
// ctl: options
// ---------------------------------------------------------------------------

name_enum! {
    /// Options of the `ctl:` action (`ctl:NAME=VALUE`).
    ///
    /// v3 knows `auditEngine`, `auditLogParts`, `forceRequestBodyVariable`,
    /// `parseXmlIntoArgs` (3.0.15+), `requestBodyAccess`,
    /// `requestBodyProcessor` (`URLENCODED`, `XML`, `JSON` only),
    /// `ruleEngine`, `ruleRemoveById`, `ruleRemoveByTag`,
    /// `ruleRemoveTargetById` and `ruleRemoveTargetByTag`. The others are
    /// ModSecurity v2 options, a syntax error in v3
    /// ([`V3Status::NotInV3`]). v3 accepts `auditEngine` and
    /// `forceRequestBodyVariable` but does nothing with them.
    pub enum CtlOption {
        AuditEngine = "auditEngine",
        AuditLogParts = "auditLogParts",
        DebugLogLevel = "debugLogLevel",
        ForceRequestBodyVariable = "forceRequestBodyVariable",
        HashEnforcement = "hashEnforcement",
        HashEngine = "hashEngine",
        ParseXmlIntoArgs = "parseXmlIntoArgs",
        RequestBodyAccess = "requestBodyAccess",
        RequestBodyLimit = "requestBodyLimit",
        RequestBodyProcessor = "requestBodyProcessor",
        ResponseBodyAccess = "responseBodyAccess",
        ResponseBodyLimit = "responseBodyLimit",
        RuleEngine = "ruleEngine",
        RuleRemoveById = "ruleRemoveById",
        RuleRemoveByMsg = "ruleRemoveByMsg",
        RuleRemoveByTag = "ruleRemoveByTag",
        RuleRemoveTargetById = "ruleRemoveTargetById",
        RuleRemoveTargetByMsg = "ruleRemoveTargetByMsg",
        RuleRemoveTargetByTag = "ruleRemoveTargetByTag",
    }
    aliases {}
}

/// Everything the registry knows about a `ctl:` option: one row per name in
/// [`CtlOption::info`], matched without a catch-all arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CtlInfo {
    /// See [`CtlOption::supported`].
    pub support: Support,
    /// See [`CtlOption::v3_status`].
    pub v3: V3Status,
    /// See [`CtlOption::values`].
    pub values: Option<&'static [&'static str]>,
}

impl CtlOption {
    /// The option's row of facts.
    #[rustfmt::skip]
    pub const fn info(self) -> CtlInfo {
        use CtlOption as C;
        use Support::*;
        use V3Status::*;
        // support, v3 status, the values it takes (None: free-form)
        const fn ctl(support: Support, v3: V3Status, values: Option<&'static [&'static str]>) -> CtlInfo {
            CtlInfo { support, v3, values }
        }
        match self {
            C::AuditEngine => ctl(Ignored, Accepted, Some(&["On", "Off", "RelevantOnly"])),
            C::AuditLogParts => ctl(Ignored, Accepted, None),
            C::DebugLogLevel => ctl(Unsupported, NotInV3, None),
            C::ForceRequestBodyVariable => ctl(Ignored, Accepted, Some(&["On", "Off"])),
            C::HashEnforcement => ctl(Unsupported, NotInV3, Some(&["On", "Off"])),
            C::HashEngine => ctl(Unsupported, NotInV3, Some(&["On", "Off"])),
            C::ParseXmlIntoArgs => ctl(Unsupported, Accepted, Some(&["On", "Off", "OnlyArgs"])),
            C::RequestBodyAccess => ctl(Implemented, Accepted, Some(&["On", "Off"])),
            C::RequestBodyLimit => ctl(Unsupported, NotInV3, None),
            C::RequestBodyProcessor => ctl(Implemented, Accepted, Some(&["URLENCODED", "XML", "JSON"])),
            C::ResponseBodyAccess => ctl(Implemented, NotInV3, Some(&["On", "Off"])),
            C::ResponseBodyLimit => ctl(Unsupported, NotInV3, None),
            C::RuleEngine => ctl(Implemented, Accepted, Some(&["On", "Off", "DetectionOnly"])),
            C::RuleRemoveById => ctl(Implemented, Accepted, None),
            C::RuleRemoveByMsg => ctl(Implemented, NotInV3, None),
            C::RuleRemoveByTag => ctl(Implemented, Accepted, None),
            C::RuleRemoveTargetById => ctl(Implemented, Accepted, None),
            C::RuleRemoveTargetByMsg => ctl(Implemented, NotInV3, None),
            C::RuleRemoveTargetByTag => ctl(Implemented, Accepted, None),
        }
    }

    /// What libmodsecurity v3 does with the option.
    pub fn v3_status(self) -> V3Status {
        self.info().v3
    }

    /// What this engine does with the option. Ignored: `auditEngine`,
    /// `auditLogParts` (audit log), and `forceRequestBodyVariable`
    /// (`REQUEST_BODY` is always populated, as in v3). Implemented although
    /// v3 does not know them (ModSecurity v2 options, cheap to honour):
    /// `ruleRemoveByMsg`, `ruleRemoveTargetByMsg`, `responseBodyAccess`.
    /// Unsupported: `parseXmlIntoArgs` (v3.0.15 and later), the per-request
    /// body limits and the v2-only `debugLogLevel` and `hash*` options.
    pub fn supported(self) -> Support {
        self.info().support
    }

    /// The values v3 accepts after `=` (case-insensitively), for options with
    /// a closed set; `None` for free-form values (ids, tags, `id;TARGET`,
    /// `+E`, numbers).
    pub fn values(self) -> Option<&'static [&'static str]> {
        self.info().values
    }
}

// ---------------------------------------------------------------------------
// Severity and phase
// ---------------------------------------------------------------------------

name_enum! {
    /// Rule severities (`severity:` action), syslog levels: EMERGENCY = 0 ...
    /// DEBUG = 7. v3 accepts the name (any case) or the number; ordering
    /// follows the number, so `Emergency < Debug`.
    pub enum Severity {
        Emergency = "EMERGENCY",
        Alert = "ALERT",
        Critical = "CRITICAL",
        Error = "ERROR",
        Warning = "WARNING",
        Notice = "NOTICE",
        Info = "INFO",
        Debug = "DEBUG",
    }
    aliases {}
}

impl Severity {
    /// The syslog number, 0 (EMERGENCY) to 7 (DEBUG).
    pub const fn number(self) -> u8 {
        self as u8
    }

    /// The severity with syslog number `n` (0 to 7), if any.
    pub fn from_number(n: u8) -> Option<Severity> {
        Severity::ALL.get(usize::from(n)).copied()
    }

    /// A name (case-insensitive) or a number 0-7, as `severity:` accepts.
    pub fn parse(s: &str) -> Option<Severity> {
        if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
            return s.parse::<u8>().ok().and_then(Severity::from_number);
        }
        Severity::lookup(s)
    }
}

/// The error of [`Severity::from_str`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownSeverity(pub String);

impl fmt::Display for UnknownSeverity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown severity `{}` (expected EMERGENCY..DEBUG or 0-7)",
            self.0
        )
    }
}

impl std::error::Error for UnknownSeverity {}

impl FromStr for Severity {
    type Err = UnknownSeverity;
    fn from_str(s: &str) -> Result<Severity, UnknownSeverity> {
        Severity::parse(s).ok_or_else(|| UnknownSeverity(s.to_string()))
    }
}

/// The value of `phase:`: a number 1-5 or a name (`request` = 2, `response`
/// = 4, `logging` = 5; case-insensitive). Quotes are the caller's business.
/// v3 also takes `phase:0` as an undocumented internal "connection" phase;
/// it is refused here.
pub fn parse_phase(s: &str) -> Option<u8> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse::<u8>().ok().filter(|p| (1..=5).contains(p));
    }
    if s.eq_ignore_ascii_case("request") {
        Some(2)
    } else if s.eq_ignore_ascii_case("response") {
        Some(4)
    } else if s.eq_ignore_ascii_case("logging") {
        Some(5)
    } else {
        None
    }
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::path::Path;

    fn round_trip<T: Named + PartialEq + fmt::Debug>() {
        for &v in T::ALL {
            assert_eq!(T::lookup(v.name()), Some(v), "{v:?}");
            assert_eq!(
                T::lookup(&v.name().to_ascii_uppercase()),
                Some(v),
                "{v:?} upper"
            );
            assert_eq!(
                T::lookup(&v.name().to_ascii_lowercase()),
                Some(v),
                "{v:?} lower"
            );
        }
        for &(alias, v) in T::ALIASES {
            assert_eq!(T::lookup(alias), Some(v), "alias {alias}");
            assert_eq!(
                T::lookup(&alias.to_ascii_uppercase()),
                Some(v),
                "alias {alias} upper"
            );
        }
        // No two spellings collide once case is ignored.
        let mut seen = BTreeSet::new();
        for s in T::ALL
            .iter()
            .map(|v| v.name())
            .chain(T::ALIASES.iter().map(|a| a.0))
        {
            assert!(
                seen.insert(s.to_ascii_lowercase()),
                "duplicate spelling {s}"
            );
        }
        // ALL is in declaration order and without duplicates.
        assert!(T::ALL.windows(2).all(|w| w[0] != w[1]));
        assert_eq!(names::<T>().count(), T::ALL.len());
    }

    #[test]
    fn names_round_trip() {
        round_trip::<Directive>();
        round_trip::<Variable>();
        round_trip::<Operator>();
        round_trip::<Transform>();
        round_trip::<Action>();
        round_trip::<CtlOption>();
        round_trip::<Severity>();
    }

    #[test]
    fn names_counts() {
        // Guards against accidental deletions; update when a name is added.
        assert_eq!(Directive::ALL.len(), 84);
        assert_eq!(Variable::ALL.len(), 104);
        assert_eq!(Operator::ALL.len(), 38);
        assert_eq!(Transform::ALL.len(), 36);
        assert_eq!(Action::ALL.len(), 47);
        assert_eq!(CtlOption::ALL.len(), 19);
        assert_eq!(Severity::ALL.len(), 8);
    }

    #[test]
    fn names_case_insensitive_and_aliases() {
        assert_eq!(Directive::lookup("secrule"), Some(Directive::SecRule));
        assert_eq!(
            Directive::lookup("SECRULEUPDATETARGETBYID"),
            Some(Directive::SecRuleUpdateTargetById)
        );
        assert_eq!(
            Directive::lookup("SecGeoLookupDB"),
            Some(Directive::SecGeoLookupDb)
        );
        assert_eq!(
            Variable::lookup("request_headers"),
            Some(Variable::RequestHeaders)
        );
        assert_eq!(
            Variable::lookup("MULTIPART_SEMICOLON_MISSING"),
            Some(Variable::MultipartMissingSemicolon)
        );
        assert_eq!(Operator::lookup("pmf"), Some(Operator::PmFromFile));
        assert_eq!(Operator::lookup("PMF"), Some(Operator::PmFromFile));
        assert_eq!(
            Operator::lookup("ipMatchF"),
            Some(Operator::IpMatchFromFile)
        );
        assert_eq!(Operator::lookup("detectsqli"), Some(Operator::DetectSqli));
        assert_eq!(
            Transform::lookup("normalizePath"),
            Some(Transform::NormalisePath)
        );
        assert_eq!(
            Transform::lookup("normalizepathwin"),
            Some(Transform::NormalisePathWin)
        );
        assert_eq!(
            Transform::lookup("base64decode"),
            Some(Transform::Base64Decode)
        );
        assert_eq!(
            Transform::lookup("utf8ToUnicode"),
            Some(Transform::Utf8ToUnicode)
        );
        assert_eq!(Action::lookup("SKIPAFTER"), Some(Action::SkipAfter));
        assert_eq!(Action::lookup("multimatch"), Some(Action::MultiMatch));
        assert_eq!(
            CtlOption::lookup("ruleremovetargetbytag"),
            Some(CtlOption::RuleRemoveTargetByTag)
        );
        assert_eq!(Transform::NormalisePath.name(), "normalisePath");
        assert_eq!(Operator::PmFromFile.name(), "pmFromFile");
        assert_eq!(
            Directive::SecRuleUpdateTargetById.to_string(),
            "SecRuleUpdateTargetById"
        );
    }

    #[test]
    fn names_unknown_are_none() {
        assert_eq!(Directive::lookup("SecRules"), None);
        assert_eq!(Directive::lookup("SecUnicodeCodePage"), None);
        assert_eq!(Directive::lookup(""), None);
        assert_eq!(Variable::lookup("ARGS_RAW"), None);
        assert_eq!(Variable::lookup("PERF_ALL"), None);
        assert!(is_v2_only_variable("perf_all"));
        assert!(!is_v2_only_variable("ARGS"));
        assert_eq!(Variable::lookup("WEBSERVER_ERROR_LOG"), None);
        assert_eq!(
            Operator::lookup("@rx"),
            None,
            "names are given without the @"
        );
        assert_eq!(Operator::lookup("rxx"), None);
        assert_eq!(Transform::lookup("phpArgsNames"), None);
        assert_eq!(Transform::lookup("t:none"), None);
        assert_eq!(Action::lookup("sanitizeArg"), None);
        assert_eq!(CtlOption::lookup("ruleRemoveByIdx"), None);
        assert_eq!(Severity::lookup("FATAL"), None);
    }

    #[test]
    fn names_severity_and_phase() {
        use std::str::FromStr;
        assert_eq!(Severity::from_str("critical"), Ok(Severity::Critical));
        assert_eq!(Severity::from_str("2"), Ok(Severity::Critical));
        assert_eq!("DEBUG".parse::<Severity>(), Ok(Severity::Debug));
        assert!(Severity::from_str("8").is_err());
        assert!(Severity::from_str("").is_err());
        assert!(Severity::from_str("-1").is_err());
        for (i, &s) in Severity::ALL.iter().enumerate() {
            assert_eq!(usize::from(s.number()), i);
            assert_eq!(Severity::parse(&i.to_string()), Some(s));
        }
        assert_eq!(Severity::Emergency.number(), 0);
        assert_eq!(Severity::Debug.number(), 7);
        assert!(Severity::Emergency < Severity::Debug);

        assert_eq!(parse_phase("request"), Some(2));
        assert_eq!(parse_phase("RESPONSE"), Some(4));
        assert_eq!(parse_phase("Logging"), Some(5));
        for p in 1..=5u8 {
            assert_eq!(parse_phase(&p.to_string()), Some(p));
        }
        assert_eq!(parse_phase("0"), None);
        assert_eq!(parse_phase("6"), None);
        assert_eq!(parse_phase("+2"), None);
        assert_eq!(parse_phase(""), None);
        assert_eq!(parse_phase("headers"), None);
    }

    #[test]
    fn names_facts() {
        assert_eq!(Directive::SecRule.args(), Arity::between(2, 3));
        assert_eq!(Directive::SecAction.args(), Arity::exactly(1));
        assert_eq!(Directive::SecMarker.args(), Arity::exactly(1));
        assert_eq!(Directive::SecRuleRemoveById.args(), Arity::at_least(1));
        assert!(Directive::SecRuleRemoveById.args().accepts(5));
        assert!(!Directive::SecRule.args().accepts(4));
        assert!(Directive::SecResponseBodyMimeTypesClear.args().accepts(0));
        for &d in Directive::ALL {
            let a = d.args();
            assert!(a.max.is_none_or(|m| m >= a.min), "{d:?}");
            if d.v3_status() == V3Status::Restricted {
                assert!(d.v3_only_value().is_some(), "{d:?}");
            }
        }
        assert_eq!(
            Directive::SecRequestBodyInMemoryLimit.v3_status(),
            V3Status::Rejected
        );
        assert_eq!(Directive::SecAuditLog.supported(), Support::Ignored);
        assert_eq!(Directive::SecRemoteRules.supported(), Support::Unsupported);

        assert!(Variable::RequestHeaders.is_collection());
        assert!(Variable::Xml.is_collection());
        assert!(!Variable::RequestUri.is_collection());
        assert!(Variable::Tx.keys_case_insensitive());
        assert!(Variable::RequestHeaders.keys_case_insensitive());
        assert!(!Variable::Xml.keys_case_insensitive());
        assert!(!Variable::QueryString.keys_case_insensitive());
        assert_eq!(Variable::RequestHeaders.earliest_phase(), 1);
        assert_eq!(Variable::ArgsPost.earliest_phase(), 2);
        assert_eq!(Variable::ResponseHeaders.earliest_phase(), 3);
        assert_eq!(Variable::ResponseBody.earliest_phase(), 4);
        let persistent: Vec<_> = Variable::ALL.iter().filter(|v| v.is_persistent()).collect();
        assert_eq!(persistent.len(), 5);
        assert!(persistent.iter().all(|v| v.is_collection()));

        assert_eq!(Operator::DetectSqli.argument(), ArgKind::None);
        assert_eq!(Operator::Rx.argument(), ArgKind::Required);
        assert!(Operator::PmFromFile.takes_file());
        assert!(!Operator::Pm.takes_file());
        assert!(Operator::Streq.allows_macros());
        assert!(!Operator::Pm.allows_macros());
        assert_eq!(Operator::Rbl.supported(), Support::Unsupported);
        assert_eq!(Operator::NoMatch.v3_status(), V3Status::NotInV3);

        assert_eq!(Action::Deny.kind(), ActionKind::Disruptive);
        assert_eq!(Action::SkipAfter.kind(), ActionKind::Flow);
        assert_eq!(Action::Id.kind(), ActionKind::Metadata);
        assert_eq!(Action::Status.kind(), ActionKind::Data);
        assert_eq!(Action::SetVar.kind(), ActionKind::NonDisruptive);
        assert_eq!(Action::Chain.value(), ArgKind::None);
        assert_eq!(Action::Id.value(), ArgKind::Required);
        assert_eq!(Action::Allow.value(), ArgKind::Optional);
        assert_eq!(Action::Block.value(), ArgKind::None);
        assert!(Action::Chain.allowed_in_chain_link());
        assert!(!Action::SkipAfter.allowed_in_chain_link());
        assert!(!Action::LogData.allowed_in_chain_link());
        assert!(!Action::Block.allowed_in_chain_link());
        assert!(!Action::Block.v3_rejects_in_chain_link());
        assert!(Action::Deny.v3_rejects_in_chain_link());
        for &a in Action::ALL {
            if a.v3_rejects_in_chain_link() {
                assert!(!a.allowed_in_chain_link(), "{a:?}");
            }
        }

        assert_eq!(CtlOption::RuleRemoveByMsg.v3_status(), V3Status::NotInV3);
        assert_eq!(CtlOption::RuleRemoveByMsg.supported(), Support::Implemented);
        assert_eq!(
            CtlOption::RequestBodyLimit.supported(),
            Support::Unsupported
        );
        assert_eq!(CtlOption::RuleEngine.supported(), Support::Implemented);
        assert!(Transform::Lowercase.is_identity_on_ascii_lowercase_alnum());
        assert!(!Transform::SqlHexDecode.is_identity_on_ascii_lowercase_alnum());
    }

    #[test]
    fn names_serialize_as_canonical_name() {
        let s = serde_json::to_string(&(
            Variable::RequestHeaders,
            Operator::PmFromFile,
            Transform::Utf8ToUnicode,
            Action::SkipAfter,
            Directive::SecRule,
            CtlOption::RuleEngine,
            Severity::Critical,
            Support::Ignored,
            V3Status::NotInV3,
            Arity::between(2, 3),
        ))
        .unwrap();
        assert_eq!(
            s,
            r#"["REQUEST_HEADERS","pmFromFile","utf8toUnicode","skipAfter","SecRule","ruleEngine","CRITICAL","ignored","not_in_v3",{"min":2,"max":3}]"#
        );
    }

    // --- CRS scan: every name CRS uses must be known ------------------------

    /// Joins `\`-continued lines and drops comment lines. Crude but enough for CRS.
    fn logical_lines(text: &str) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        let mut buf = String::new();
        let mut start = 0;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim_end();
            if buf.is_empty() {
                if line.trim_start().starts_with('#') {
                    continue;
                }
                start = i + 1;
            }
            if let Some(l) = line.strip_suffix('\\') {
                buf.push_str(l);
                continue;
            }
            buf.push_str(line);
            if !buf.trim().is_empty() {
                out.push((start, buf.trim().to_string()));
            }
            buf.clear();
        }
        out
    }

    /// Splits a directive line into words, honouring double quotes (`\x` escapes kept).
    fn words(line: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut chars = line.chars().peekable();
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() {
                chars.next();
                continue;
            }
            let mut w = String::new();
            if c == '"' {
                chars.next();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            w.push(c);
                            if let Some(n) = chars.next() {
                                w.push(n);
                            }
                        }
                        '"' => break,
                        _ => w.push(c),
                    }
                }
            } else {
                while let Some(&c) = chars.peek() {
                    if c.is_whitespace() {
                        break;
                    }
                    w.push(c);
                    chars.next();
                }
            }
            out.push(w);
        }
        out
    }

    /// Splits an action list on commas outside single quotes.
    fn split_actions(s: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut cur = String::new();
        let mut quoted = false;
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => {
                    cur.push(c);
                    if let Some(n) = chars.next() {
                        cur.push(n);
                    }
                }
                '\'' => {
                    quoted = !quoted;
                    cur.push(c);
                }
                ',' if !quoted => out.push(std::mem::take(&mut cur)),
                _ => cur.push(c),
            }
        }
        out.push(cur);
        out.into_iter()
            .map(|a| a.trim().to_string())
            .filter(|a| !a.is_empty())
            .collect()
    }

    /// Variable names of a target list (`!ARGS:/a|b/|&TX:x|XML:/*`).
    fn target_names(s: &str) -> Vec<String> {
        let mut out = Vec::new();
        let b: Vec<char> = s.chars().collect();
        let mut i = 0;
        while i < b.len() {
            while i < b.len() && matches!(b[i], '|' | ',' | '!' | '&' | ' ') {
                i += 1;
            }
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            if i > start {
                out.push(b[start..i].iter().collect());
            } else if i < b.len() {
                out.push(b[i].to_string()); // garbage: reported as unknown
                i += 1;
            }
            if i < b.len() && b[i] == ':' {
                i += 1;
                if i < b.len() && b[i] == '/' {
                    i += 1;
                    while i < b.len() && b[i] != '/' {
                        i += if b[i] == '\\' { 2 } else { 1 };
                    }
                    i += 1;
                }
                while i < b.len() && b[i] != '|' && b[i] != ',' {
                    i += 1;
                }
            }
        }
        out
    }

    fn unquote(s: &str) -> &str {
        s.strip_prefix('\'')
            .and_then(|s| s.strip_suffix('\''))
            .unwrap_or(s)
    }

    #[derive(Default)]
    struct Scan {
        rules: usize,
        unknown: BTreeSet<String>,
        chain_link_actions: BTreeSet<String>,
        chain_link_forbidden: BTreeSet<String>,
        early_variables: BTreeSet<String>,
    }

    impl Scan {
        fn bad(&mut self, what: &str, name: &str, at: &str) {
            self.unknown.insert(format!("{what} `{name}` at {at}"));
        }

        fn variables(&mut self, list: &str, phase: u8, at: &str) {
            for n in target_names(list) {
                match Variable::lookup(&n) {
                    Some(v) if v.earliest_phase() > phase => {
                        self.early_variables
                            .insert(format!("{n} in phase {phase} at {at}"));
                    }
                    Some(_) => {}
                    None => self.bad("variable", &n, at),
                }
            }
        }

        fn macros(&mut self, text: &str, at: &str) {
            let mut rest = text;
            while let Some(p) = rest.find("%{") {
                rest = &rest[p + 2..];
                let end = rest.find('}').unwrap_or(rest.len());
                let name = rest[..end].split(['.', ':']).next().unwrap_or("");
                if Variable::lookup(name).is_none() {
                    self.bad("macro variable", name, at);
                }
                rest = &rest[end..];
            }
        }

        /// Checks an action list; returns its names and the phase it sets.
        fn actions(&mut self, list: &str, at: &str) -> (Vec<Action>, Option<u8>) {
            self.macros(list, at);
            let mut out = Vec::new();
            let mut phase = None;
            for a in split_actions(list) {
                let (name, value) = match a.split_once(':') {
                    Some((n, v)) => (n.trim(), Some(v.trim())),
                    None => (a.as_str(), None),
                };
                let Some(action) = Action::lookup(name) else {
                    self.bad("action", name, at);
                    continue;
                };
                out.push(action);
                let value = value.map(unquote).unwrap_or("");
                match action {
                    Action::T if Transform::lookup(value).is_none() => {
                        self.bad("transformation", value, at);
                    }
                    Action::Ctl => {
                        let (opt, v) = value.split_once('=').unwrap_or((value, ""));
                        match CtlOption::lookup(opt) {
                            None => self.bad("ctl option", opt, at),
                            Some(o) => {
                                let ok = o.values().is_none_or(|vals| {
                                    vals.iter().any(|x| x.eq_ignore_ascii_case(v))
                                });
                                if !ok {
                                    self.bad("ctl value", &format!("{opt}={v}"), at);
                                }
                            }
                        }
                    }
                    Action::Severity if Severity::parse(value).is_none() => {
                        self.bad("severity", value, at);
                    }
                    Action::Phase => match parse_phase(value) {
                        Some(p) => phase = Some(p),
                        None => self.bad("phase", value, at),
                    },
                    _ => {}
                }
            }
            (out, phase)
        }
    }

    fn scan_crs(root: &Path) -> Scan {
        let mut scan = Scan::default();
        for file in waf_test_support::crs_files(root) {
            let text = std::fs::read_to_string(&file).unwrap();
            let fname = file.file_name().unwrap().to_string_lossy().to_string();
            let mut in_chain = false;
            let mut chain_phase = 2;
            for (line, l) in logical_lines(&text) {
                let at = format!("{fname}:{line}");
                let w = words(&l);
                let Some(directive) = Directive::lookup(&w[0]) else {
                    scan.bad("directive", &w[0], &at);
                    continue;
                };
                let args = &w[1..];
                if !directive.args().accepts(args.len()) {
                    scan.bad("argument count of", &w[0], &at);
                    continue;
                }
                match directive {
                    Directive::SecRule => {
                        scan.rules += 1;
                        let (actions, phase) = match args.get(2) {
                            Some(a) => scan.actions(a, &at),
                            None => (Vec::new(), None),
                        };
                        let phase = if in_chain {
                            chain_phase
                        } else {
                            phase.unwrap_or(2)
                        };
                        scan.variables(&args[0], phase, &at);
                        let op = args[1].trim_start();
                        let op = op.strip_prefix('!').unwrap_or(op).trim_start();
                        if let Some(op) = op.strip_prefix('@') {
                            let name = op.split_whitespace().next().unwrap_or("");
                            if Operator::lookup(name).is_none() {
                                scan.bad("operator", name, &at);
                            }
                        }
                        scan.macros(&args[1], &at);
                        if in_chain {
                            for a in &actions {
                                scan.chain_link_actions.insert(a.name().to_string());
                                if !a.allowed_in_chain_link() {
                                    scan.chain_link_forbidden
                                        .insert(format!("{} at {at}", a.name()));
                                }
                            }
                        } else {
                            chain_phase = phase;
                        }
                        in_chain = actions.contains(&Action::Chain);
                    }
                    Directive::SecAction | Directive::SecDefaultAction => {
                        scan.actions(&args[0], &at);
                        in_chain = false;
                    }
                    Directive::SecRuleUpdateActionById => {
                        scan.actions(&args[1], &at);
                    }
                    Directive::SecRuleUpdateTargetById
                    | Directive::SecRuleUpdateTargetByTag
                    | Directive::SecRuleUpdateTargetByMsg => {
                        for a in &args[1..] {
                            scan.variables(a, 5, &at);
                        }
                    }
                    _ => {}
                }
            }
        }
        scan
    }

    #[test]
    fn names_crs_uses_only_known_names() {
        let Some(root) = waf_test_support::crs_dir("names_crs_uses_only_known_names") else {
            return;
        };
        let scan = scan_crs(&root);
        assert!(
            scan.rules > 500,
            "scanned only {} SecRules under {}",
            scan.rules,
            root.display()
        );
        assert!(
            scan.unknown.is_empty(),
            "names CRS uses but the registry does not know:\n{:#?}",
            scan.unknown
        );
        assert!(
            scan.early_variables.is_empty(),
            "CRS reads these before their earliest_phase (the warning would be a false positive):\n{:#?}",
            scan.early_variables
        );
    }

    #[test]
    fn names_crs_chain_link_actions_are_allowed() {
        let Some(root) = waf_test_support::crs_dir("names_crs_chain_link_actions_are_allowed")
        else {
            return;
        };
        let scan = scan_crs(&root);
        assert!(
            !scan.chain_link_actions.is_empty(),
            "found no chain links in CRS"
        );
        assert!(
            scan.chain_link_forbidden.is_empty(),
            "CRS chain links use actions not allowed_in_chain_link:\n{:#?}",
            scan.chain_link_forbidden
        );
        eprintln!(
            "actions used in CRS chain links: {:?}",
            scan.chain_link_actions
        );
    }

    #[test]
    fn names_test_helpers() {
        assert_eq!(
            target_names("!ARGS:/a|b/|&TX:x|XML:/*"),
            vec!["ARGS", "TX", "XML"]
        );
        assert_eq!(
            split_actions("id:1, msg:'a, b',t:none"),
            vec!["id:1", "msg:'a, b'", "t:none"]
        );
        assert_eq!(
            words(r#"SecRule ARGS "@rx a\"b" "id:1""#),
            vec!["SecRule", "ARGS", r#"@rx a\"b"#, "id:1"]
        );
        let lines = logical_lines("# c\nSecRule A \\\n  B C\n\nSecMarker X\n");
        assert_eq!(
            lines,
            vec![
                (2, "SecRule A   B C".to_string()),
                (5, "SecMarker X".to_string())
            ]
        );
    }
}
