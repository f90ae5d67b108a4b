//! Where a variable's values come from, as far as evaluation cares: which
//! request collection holds them (memoizable: collections only grow while
//! rules run), or whether they may change between two rules (volatile: read
//! afresh every time).
//!
//! A leaf module: the plan (at load) and the transaction (per request) both
//! ask here, so neither needs the other to classify a variable.

use waf_compiler::names::Variable as V;

/// A request or response collection whose entries can be memoized.
///
/// Each has a slot in the transaction's inputs; `Coll::ALL` lists them in
/// index order (the memo table keeps one instance list per collection and
/// "names or values" flag, see [`Coll::index`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Coll {
    Args,
    ArgsGet,
    ArgsPost,
    RequestHeaders,
    RequestCookies,
    ResponseHeaders,
    Files,
    FilesSizes,
    MultipartPartHeaders,
    MultipartNames,
    MultipartFilenames,
    /// `XML://@*`: attribute values of the parsed XML body.
    XmlAttrs,
}

impl Coll {
    /// Every collection, in [`Coll::index`] order.
    pub(crate) const ALL: [Coll; 12] = [
        Coll::Args,
        Coll::ArgsGet,
        Coll::ArgsPost,
        Coll::RequestHeaders,
        Coll::RequestCookies,
        Coll::ResponseHeaders,
        Coll::Files,
        Coll::FilesSizes,
        Coll::MultipartPartHeaders,
        Coll::MultipartNames,
        Coll::MultipartFilenames,
        Coll::XmlAttrs,
    ];

    /// A dense index, `0..Coll::ALL.len()`.
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// Collections whose entries have no key of their own (the selector of a
    /// target does not apply; `MATCHED_VAR_NAME` has no `:key`).
    pub(crate) fn keyless(self) -> bool {
        matches!(self, Coll::MultipartNames | Coll::MultipartFilenames)
    }
}

/// The memoizable collection a variable reads, and whether it reads the
/// entries' names (`ARGS_NAMES`) rather than their values. `None` for
/// scalars, volatile collections (`TX`, `ENV`, ...) and `XML` (whose
/// attribute values are reached through its XPath selector).
pub(crate) fn stable_coll(var: V) -> Option<(Coll, bool)> {
    Some(match var {
        V::Args => (Coll::Args, false),
        V::ArgsNames => (Coll::Args, true),
        V::ArgsGet => (Coll::ArgsGet, false),
        V::ArgsGetNames => (Coll::ArgsGet, true),
        V::ArgsPost => (Coll::ArgsPost, false),
        V::ArgsPostNames => (Coll::ArgsPost, true),
        V::RequestHeaders => (Coll::RequestHeaders, false),
        V::RequestHeadersNames => (Coll::RequestHeaders, true),
        V::RequestCookies => (Coll::RequestCookies, false),
        V::RequestCookiesNames => (Coll::RequestCookies, true),
        V::ResponseHeaders => (Coll::ResponseHeaders, false),
        V::ResponseHeadersNames => (Coll::ResponseHeaders, true),
        V::Files => (Coll::Files, false),
        V::FilesNames => (Coll::Files, true),
        V::FilesSizes => (Coll::FilesSizes, false),
        V::MultipartPartHeaders => (Coll::MultipartPartHeaders, false),
        V::MultipartName => (Coll::MultipartNames, false),
        V::MultipartFilename => (Coll::MultipartFilenames, false),
        _ => return None,
    })
}

/// Whether a variable's values may change while the rules of one phase run
/// (rule actions write them, or they are clocks): such values are read
/// afresh for every rule, never memoized.
pub(crate) fn is_volatile(var: V) -> bool {
    use V::*;
    matches!(
        var,
        Tx | Env
            | Ip
            | Session
            | User
            | Global
            | Resource
            | MatchedVar
            | MatchedVarName
            | MatchedVars
            | MatchedVarsNames
            | HighestSeverity
            | Duration
            | Time
            | TimeEpoch
            | TimeYear
            | TimeMon
            | TimeDay
            | TimeHour
            | TimeMin
            | TimeSec
            | TimeWday
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_are_dense_and_in_order() {
        for (i, c) in Coll::ALL.iter().enumerate() {
            assert_eq!(c.index(), i);
        }
    }

    #[test]
    fn a_stable_collection_is_never_volatile() {
        for v in V::ALL {
            if stable_coll(*v).is_some() {
                assert!(!is_volatile(*v), "{v:?}");
            }
        }
    }
}
