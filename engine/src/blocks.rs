//! Static blocks: runs of rules whose whole effect partial evaluation
//! already knows, applied at once.
//!
//! Every CRS request starts with the same few dozen rules doing the same
//! thing: `SecAction`s and replayed `SecRule &TX:x "@eq 0"` defaults setting
//! `TX` (REQUEST-901), and in each rule file the paranoia-level checks
//! that match and jump. Partial evaluation ([`crate::fold`]) decides each of
//! them, but each still costs its bookkeeping on every request: `setvar`s
//! that look their names up, a match record built field by field, the rule
//! loop around it. A *block* is a run of such rules, in the order a
//! transaction runs them (following their jumps); its effect, once seen, is
//! kept with the ruleset and replaced the next time by copies: the match
//! records, `MATCHED_VAR`, the statistics and, for a block that writes
//! `TX`, the whole `TX` collection it leaves.
//!
//! What the effect depends on decides when it may be copied:
//! - a block that does not write `TX` does what it does whatever `TX`
//!   holds (its rules are decided, their outcome known): it is copied
//!   whenever partial evaluation applies;
//! - a block that writes `TX` leaves `TX` as it was plus its writes, which
//!   may read `TX` (`setvar:tx.detection_paranoia_level=%{tx.blocking_paranoia_level}`):
//!   it is copied only while the transaction's `TX` is what the blocks
//!   before it left, with nothing else written (`RuleState::tx_pristine`),
//!   and the last of those is the one before it on the path a request
//!   takes when none of its evaluated rules jumps ([`Block::prev`]).
//!   So a run's rules before its first `TX` write are a block of their
//!   own, which the first kind's rule covers.
//!
//! A rule belongs in a block when it is decided (never matches, is replayed,
//! or is a `SecAction`), passes, has no `msg`/`logdata` (their macros are
//! expanded per match), no action but `setvar`s on `TX` whose macros read
//! only `TX` or the matched value, and does not fill `MATCHED_VARS`.

use crate::collection::Packed;
use crate::fold::{Decision, Folding};
use crate::outcome::MatchedRule;
use crate::plan::Plan;
use std::sync::OnceLock;
use waf_compiler::ir::{LinkAction, MacroPart, MacroString, Program, RuleIdx, SetVarOp};
use waf_compiler::names::Variable as V;

/// No block (in [`Blocks::at`]), or no block before (in [`Block::prev`]).
pub(crate) const NONE: u32 = u32::MAX;

/// The blocks of a ruleset.
#[derive(Debug, Default)]
pub(crate) struct Blocks {
    /// Per phase (1-5), per position in the phase's rule list: the block
    /// that starts there, or [`NONE`].
    at: [Vec<u32>; 5],
    blocks: Vec<Block>,
}

/// A run of rules applied at once (see the module documentation).
///
/// A CRS request applies some 25 blocks, each read from cold memory when a
/// proxy runs the engine: the block and its effect take two cache lines,
/// what is copied from the effect is behind pointers.
#[derive(Debug)]
pub(crate) struct Block {
    /// The rules, in the order they run.
    pub rules: Box<[RuleIdx]>,
    /// The position in the phase's rule list where the run goes on.
    pub end: usize,
    /// Some rule writes `TX`.
    pub writes_tx: bool,
    /// Some rule sets `MATCHED_VAR` (a replayed match) or clears it (a
    /// `SecAction`): the block leaves it as the last did.
    pub sets_matched_var: bool,
    /// For a block that writes `TX`: the block writing `TX` before it on
    /// the path of a request whose evaluated rules do not jump ([`NONE`]:
    /// none, `TX` starts empty).
    pub prev: u32,
    /// What the block did the first time it ran.
    pub effect: OnceLock<BlockEffect>,
}

/// What a block's rules did, as it is copied into a transaction.
#[derive(Debug)]
pub(crate) struct BlockEffect {
    /// `TX` as the block left it (for a block that writes `TX`).
    pub tx: Option<Box<Packed>>,
    /// The match records of its rules, in order (read in place by the
    /// transactions that apply the block: see `crate::MatchedRules`).
    pub matches: Box<[MatchedRule]>,
    /// The most severe (lowest) severity of those records: what they do
    /// to `HIGHEST_SEVERITY`, without reading each.
    pub severity: Option<u8>,
    /// `MATCHED_VAR_NAME` and `MATCHED_VAR` as its last rule that sets
    /// them left them.
    pub matched_var: Option<Box<(String, Vec<u8>)>>,
    /// Its rules evaluated, replayed and stepped over.
    pub evaluated: u32,
    pub replayed: u32,
    pub folded: u32,
}

impl Blocks {
    /// The blocks of `program`'s phases, from partial evaluation's
    /// decisions.
    pub(crate) fn new(program: &Program, folding: &Folding, plan: &Plan) -> Blocks {
        let mut b = Blocks::default();
        let mut last_writer = NONE;
        for phase in 1..=5u8 {
            let rules = &program.phase(phase).rules;
            let mut at = vec![NONE; rules.len()];
            let mut pos = 0;
            while pos < rules.len() {
                let start = pos;
                let mut members = Vec::new();
                let mut block = Block {
                    rules: Box::default(),
                    end: 0,
                    writes_tx: false,
                    sets_matched_var: false,
                    prev: last_writer,
                    effect: OnceLock::new(),
                };
                while pos < rules.len() {
                    let ri = rules[pos];
                    let Some(writes) = static_rule(program, folding, plan, ri) else {
                        break;
                    };
                    // The rules before a first `TX` write make a block of
                    // their own: copied whatever `TX` holds, where the
                    // writes are copied only while it is pristine (CRS's
                    // paranoia-level skips of a file, then REQUEST-949's
                    // score sums after a request's own writes).
                    if writes && !block.writes_tx && !members.is_empty() {
                        break;
                    }
                    // A rule that matches takes its jump, as the rule loop
                    // does (markers and skips lead forwards; a block would
                    // not follow anything else).
                    let decision = folding.decision(ri.index());
                    let next = match (&program.rule(ri).flow, decision) {
                        (Some(f), Decision::Replay | Decision::Evaluate) => f.resume_at(),
                        _ => pos + 1,
                    };
                    if next <= pos {
                        break;
                    }
                    members.push(ri);
                    block.writes_tx |= writes;
                    block.sets_matched_var |= decision != Decision::Never;
                    pos = next;
                }
                if members.is_empty() {
                    // An evaluated rule: a request whose rules do not jump
                    // goes on with the next.
                    pos += 1;
                    continue;
                }
                block.rules = members.into_boxed_slice();
                block.end = pos.min(rules.len());
                let id = b.blocks.len() as u32;
                if block.writes_tx {
                    last_writer = id;
                }
                at[start] = id;
                b.blocks.push(block);
            }
            b.at[usize::from(phase) - 1] = at;
        }
        b
    }

    /// The block starting at position `pos` of phase `phase`'s rules.
    #[inline]
    pub(crate) fn at(&self, phase: u8, pos: usize) -> Option<(u32, &Block)> {
        let id = *self.at.get(usize::from(phase).wrapping_sub(1))?.get(pos)?;
        self.blocks.get(id as usize).map(|b| (id, b))
    }

    /// Block `id` (an id [`Blocks::at`] gave).
    #[inline]
    pub(crate) fn get(&self, id: u32) -> Option<&Block> {
        self.blocks.get(id as usize)
    }

    /// How many blocks there are.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.blocks.len()
    }

    /// How many blocks have their effect recorded.
    #[cfg(test)]
    pub(crate) fn recorded(&self) -> usize {
        self.blocks
            .iter()
            .filter(|b| b.effect.get().is_some())
            .count()
    }
}

/// Whether rule `ri` may be part of a block (see the module
/// documentation), and whether it writes `TX`.
fn static_rule(program: &Program, folding: &Folding, plan: &Plan, ri: RuleIdx) -> Option<bool> {
    let rule = program.rule(ri);
    let meta = plan.rule_meta(ri);
    if !meta.pass || meta.text || meta.after_actions || meta.matched_vars {
        return None;
    }
    match folding.decision(ri.index()) {
        Decision::Never => return Some(false),
        Decision::Replay => {}
        Decision::Evaluate if rule.unconditional => {}
        Decision::Evaluate => return None,
    }
    let mut writes = false;
    for link in &rule.links {
        for a in &link.actions {
            match a {
                LinkAction::SetVar(sv) if sv.collection == V::Tx => {
                    let value = match &sv.op {
                        SetVarOp::Set(m) | SetVarOp::Add(m) | SetVarOp::Sub(m) => Some(m),
                        SetVarOp::Delete => None,
                    };
                    if !reads_only_tx(&sv.name) || !value.is_none_or(reads_only_tx) {
                        return None;
                    }
                    writes = true;
                }
                // `after_actions` is false: nothing else runs on a match.
                LinkAction::Ignored { .. } => {}
                _ => return None,
            }
        }
    }
    Some(writes)
}

/// Whether the macros of `m` read only `TX` (what the blocks before leave)
/// and the matched value (the replayed one, or none after a `SecAction`).
fn reads_only_tx(m: &MacroString) -> bool {
    m.parts.iter().all(|p| match p {
        MacroPart::Literal(_) => true,
        MacroPart::Var { variable, .. } => {
            matches!(variable, V::Tx | V::MatchedVar | V::MatchedVarName)
        }
    })
}
