//! What rules change while they run: `TX` and the other writable
//! collections, `ctl` overrides, `MATCHED_VAR(S)`, the match log and the
//! intervention.

use crate::collection::Collection;
use crate::operator::Captures;
use crate::outcome::{Intervention, MatchRef, MatchedRule};
use waf_compiler::ir::{AuditEngine, AuditParts, EngineMode, Exclusion, Rule, Settings};
use waf_compiler::names::Variable as V;

/// The state rules build up during one transaction.
pub(super) struct RuleState<'r> {
    pub tx: Collection,
    /// Collections opened by `initcol` (`persistent[..persistent_len]`; the
    /// rest are pooled).
    pub persistent: Vec<Opened>,
    pub persistent_len: usize,
    pub env: Collection,
    /// `SESSIONID`, set by `setsid`.
    pub session_id: Vec<u8>,
    /// `USERID`, set by `setuid`.
    pub user_id: Vec<u8>,
    pub mode: EngineMode,
    pub request_body_access: bool,
    pub response_body_access: bool,
    pub force_request_body_variable: bool,
    /// `SecAuditEngine` and `SecAuditLogParts`, as `ctl` left them.
    pub audit_engine: AuditEngine,
    pub audit_parts: AuditParts,
    pub removed_ids: Vec<(u64, u64)>,
    // `ctl:ruleRemove*` selections point into the program: no copies.
    pub removed_tags: Vec<&'r str>,
    pub removed_msgs: Vec<&'r str>,
    pub removed_targets: Vec<(RuleSel<'r>, &'r Exclusion)>,
    pub matched_var: Vec<u8>,
    pub matched_var_name: String,
    pub matched_vars: Collection,
    pub highest_severity: Option<u8>,
    pub allow: Allow,
    /// Bit `p - 1` set: phase `p` ran its rule list to the end (no allow,
    /// no intervention) — what partial evaluation assumes of earlier phases.
    pub phases_completed: u8,
    /// Bit `p - 1` set: phase `p`'s rule list started.
    pub phases_started: u8,
    /// No removal in effect touches a rule partial evaluation decided.
    pub fold_intact: bool,
    pub intervention: Option<Intervention>,
    /// The rules that matched, in order: records of `matches`, or of the
    /// ruleset's static blocks.
    pub match_refs: Vec<MatchRef<'r>>,
    /// `matches[..match_count]` are this transaction's records; the rest
    /// are pooled.
    pub matches: Vec<MatchedRule>,
    pub match_count: usize,
    pub caps: Captures,
    /// Where `TX:0`..`TX:9` were last written in `tx` (captures are
    /// written and read back by macros for every value some rules match:
    /// CRS 920450 does both for each header). A hint only: checked
    /// against the entry's key, so a removal or a new transaction makes it
    /// miss, not lie.
    pub capture_at: [u32; 10],
    /// Nothing but static blocks (see `crate::blocks`) wrote `TX` in this
    /// transaction, and `tx_block` is the last of those that did (or
    /// `blocks::NONE`): `TX` is what that block's effect holds.
    pub tx_pristine: bool,
    pub tx_block: u32,
}

/// The buffers of a [`RuleState`] that outlive its transaction (no borrow
/// of the program): kept in the ruleset's pool for the next transaction.
#[derive(Default)]
pub(super) struct StateBuffers {
    tx: Collection,
    persistent: Vec<Opened>,
    env: Collection,
    session_id: Vec<u8>,
    user_id: Vec<u8>,
    matched_var: Vec<u8>,
    matched_var_name: String,
    matched_vars: Collection,
    matches: Vec<MatchedRule>,
    caps: Captures,
    removed_ids: Vec<(u64, u64)>,
    // Empty, their allocations kept: see `unborrow`.
    match_refs: Vec<MatchRef<'static>>,
    removed_tags: Vec<&'static str>,
    removed_msgs: Vec<&'static str>,
    removed_targets: Vec<(RuleSel<'static>, &'static Exclusion)>,
}

/// `v`'s allocation, emptied, as a vector that borrows nothing: the
/// standard library collects an emptied `into_iter` into the same buffer
/// when the element layouts agree (they do: only the lifetime differs), so
/// the `ctl:ruleRemove*` lists and the match references of a pooled state
/// keep their capacity.
fn unborrow<T, U>(v: Vec<T>) -> Vec<U> {
    v.into_iter().filter_map(|_| None).collect()
}

/// What an `allow` action let through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Allow {
    None,
    Phase,
    Request,
    All,
}

/// How a `ctl:ruleRemoveTarget*` selects rules.
#[derive(Clone, Copy, Debug)]
pub(super) enum RuleSel<'r> {
    Ids(&'r [(u64, u64)]),
    Tag(&'r str),
    Msg(&'r str),
}

impl RuleSel<'_> {
    /// Whether the selector picks `rule`.
    pub(super) fn applies(&self, rule: &Rule) -> bool {
        match self {
            RuleSel::Ids(r) => r.iter().any(|&(a, b)| a <= rule.id && rule.id <= b),
            RuleSel::Tag(t) => rule.meta.tags.iter().any(|x| x == *t),
            RuleSel::Msg(m) => rule.meta.msg.as_ref().and_then(|x| x.as_literal()) == Some(*m),
        }
    }
}

impl<'r> RuleState<'r> {
    pub(super) fn new(s: &Settings) -> RuleState<'r> {
        RuleState {
            tx: Collection::default(),
            persistent: Vec::new(),
            persistent_len: 0,
            env: Collection::default(),
            session_id: Vec::new(),
            user_id: Vec::new(),
            mode: s.rule_engine,
            request_body_access: s.request_body_access,
            response_body_access: s.response_body_access,
            force_request_body_variable: false,
            audit_engine: s.audit_engine,
            audit_parts: s.audit_log_parts,
            removed_ids: Vec::new(),
            removed_tags: Vec::new(),
            removed_msgs: Vec::new(),
            removed_targets: Vec::new(),
            matched_var: Vec::new(),
            matched_var_name: String::new(),
            matched_vars: Collection::default(),
            highest_severity: None,
            allow: Allow::None,
            phases_completed: 0,
            phases_started: 0,
            fold_intact: true,
            intervention: None,
            match_refs: Vec::new(),
            matches: Vec::new(),
            match_count: 0,
            caps: Captures::default(),
            capture_at: [u32::MAX; 10],
            tx_pristine: true,
            tx_block: crate::blocks::NONE,
        }
    }

    /// The name of capture `n` in `TX` (`0`..`9`).
    fn capture_name(n: usize) -> &'static [u8] {
        const NAMES: [&[u8]; 10] = [b"0", b"1", b"2", b"3", b"4", b"5", b"6", b"7", b"8", b"9"];
        NAMES[n]
    }

    /// `TX:n` (n < 10), found where it was last written when it still is.
    pub(super) fn capture(&self, n: usize) -> Option<&[u8]> {
        let name = Self::capture_name(n);
        match self.tx.value_at(self.capture_at[n] as usize, name) {
            Some(v) => Some(v),
            None => self.tx.get(name),
        }
    }

    /// Sets `TX:n` to group n of the operator's last captures, for each
    /// group that participated (`capture` after a match). The groups are
    /// read in place: `caps` and `tx` are separate fields.
    pub(super) fn store_captures(&mut self) {
        let RuleState {
            caps,
            tx,
            capture_at,
            tx_pristine,
            ..
        } = self;
        for (n, at) in capture_at.iter_mut().enumerate() {
            let Some(value) = caps.get(n) else { continue };
            *tx_pristine = false;
            let name = Self::capture_name(n);
            if tx.value_at(*at as usize, name).is_none() {
                *at = tx.position_mut(name) as u32;
            }
            if let Some(v) = tx.value_at_mut(*at as usize, name) {
                v.clear();
                v.extend_from_slice(value);
            }
        }
    }

    /// A state on `b`'s buffers (cleared by the caller's `clear`).
    pub(super) fn with_buffers(s: &Settings, b: StateBuffers) -> RuleState<'r> {
        RuleState {
            tx: b.tx,
            persistent: b.persistent,
            env: b.env,
            session_id: b.session_id,
            user_id: b.user_id,
            matched_var: b.matched_var,
            matched_var_name: b.matched_var_name,
            matched_vars: b.matched_vars,
            matches: b.matches,
            match_refs: unborrow(b.match_refs),
            caps: b.caps,
            removed_ids: b.removed_ids,
            removed_tags: b.removed_tags,
            removed_msgs: b.removed_msgs,
            removed_targets: b.removed_targets,
            ..RuleState::new(s)
        }
    }

    /// Takes the buffers out (the state is left empty).
    pub(super) fn take_buffers(&mut self) -> StateBuffers {
        use std::mem::take;
        StateBuffers {
            tx: take(&mut self.tx),
            persistent: take(&mut self.persistent),
            env: take(&mut self.env),
            session_id: take(&mut self.session_id),
            user_id: take(&mut self.user_id),
            matched_var: take(&mut self.matched_var),
            matched_var_name: take(&mut self.matched_var_name),
            matched_vars: take(&mut self.matched_vars),
            matches: take(&mut self.matches),
            match_refs: unborrow(take(&mut self.match_refs)),
            caps: take(&mut self.caps),
            removed_ids: take(&mut self.removed_ids),
            removed_tags: unborrow(take(&mut self.removed_tags)),
            removed_msgs: unborrow(take(&mut self.removed_msgs)),
            removed_targets: unborrow(take(&mut self.removed_targets)),
        }
    }

    /// Back to the configuration's state, keeping the buffers.
    pub(super) fn clear(&mut self, s: &Settings) {
        self.tx.clear();
        self.env.clear();
        self.session_id.clear();
        self.user_id.clear();
        self.matched_vars.clear();
        self.persistent_len = 0;
        self.mode = s.rule_engine;
        self.request_body_access = s.request_body_access;
        self.response_body_access = s.response_body_access;
        self.force_request_body_variable = false;
        self.audit_engine = s.audit_engine;
        self.audit_parts = s.audit_log_parts;
        self.removed_ids.clear();
        self.removed_tags.clear();
        self.removed_msgs.clear();
        self.removed_targets.clear();
        self.matched_var.clear();
        self.matched_var_name.clear();
        self.highest_severity = None;
        self.allow = Allow::None;
        self.phases_completed = 0;
        self.phases_started = 0;
        self.fold_intact = true;
        self.intervention = None;
        self.match_refs.clear();
        self.match_count = 0;
        self.caps.clear();
        self.tx_pristine = true;
        self.tx_block = crate::blocks::NONE;
    }

    /// A rule of severity `n` matched: `HIGHEST_SEVERITY` is the most
    /// severe (lowest number) so far.
    pub(super) fn note_severity(&mut self, n: u8) {
        self.highest_severity = Some(self.highest_severity.map_or(n, |h| h.min(n)));
    }

    /// Whether phase `phase`'s rule loop stops before its next rule: an
    /// intervention, or an `allow` that covers the rest of the phase.
    #[inline]
    pub(super) fn stops(&self, phase: u8) -> bool {
        self.intervention.is_some()
            || match self.allow {
                Allow::None => false,
                Allow::All | Allow::Phase => true,
                Allow::Request => phase <= 2,
            }
    }

    /// Whether some `ctl:ruleRemove*` is in effect (else no rule needs checking).
    pub(super) fn any_removed(&self) -> bool {
        !(self.removed_ids.is_empty()
            && self.removed_tags.is_empty()
            && self.removed_msgs.is_empty())
    }

    /// Whether a `ctl:ruleRemove*` removed `rule`.
    pub(super) fn is_removed(&self, rule: &Rule) -> bool {
        RuleSel::Ids(&self.removed_ids).applies(rule)
            || self
                .removed_tags
                .iter()
                .any(|t| RuleSel::Tag(t).applies(rule))
            || self
                .removed_msgs
                .iter()
                .any(|m| RuleSel::Msg(m).applies(rule))
    }

    /// The writable collection `var` (`TX`, or one `initcol` opened).
    pub(super) fn writable(&mut self, var: V) -> Option<&mut Collection> {
        match var {
            V::Tx => {
                self.tx_pristine = false;
                Some(&mut self.tx)
            }
            other => self.opened_mut(other).map(|o| &mut o.coll),
        }
    }

    /// The persistent collection `var`, if `initcol` opened it.
    pub(super) fn persistent(&self, var: V) -> Option<&Collection> {
        self.persistent[..self.persistent_len]
            .iter()
            .find(|o| o.var == var)
            .map(|o| &o.coll)
    }

    /// The persistent collection `var` and its record id, if opened.
    pub(super) fn opened_mut(&mut self, var: V) -> Option<&mut Opened> {
        self.persistent[..self.persistent_len]
            .iter_mut()
            .find(|o| o.var == var)
    }

    /// `initcol` (or `setsid`...): opens `collection`, empty, under record
    /// `key` (the caller reads the record into it), unless it is open
    /// already (the first key stays, as in ModSecurity v2).
    pub(super) fn init_collection(&mut self, collection: V, key: &[u8]) -> Option<&mut Opened> {
        if self.persistent(collection).is_some() {
            return None;
        }
        if self.persistent_len == self.persistent.len() {
            self.persistent.push(Opened {
                var: collection,
                coll: Collection::default(),
                id: Vec::new(),
            });
        }
        let slot = &mut self.persistent[self.persistent_len];
        slot.var = collection;
        slot.coll.clear();
        crate::store::record_id(collection, key, &mut slot.id);
        self.persistent_len += 1;
        Some(slot)
    }
}

/// A persistent collection a transaction opened.
pub(super) struct Opened {
    pub var: V,
    /// Its variables: read from the store when opened, then kept in step
    /// with it by every write.
    pub coll: Collection,
    /// Its record in the store (see `store::record_id`).
    pub id: Vec<u8>,
}
