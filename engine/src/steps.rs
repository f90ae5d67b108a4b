//! The rule loop's dense view of each phase: per position in the phase's
//! rule list, what the loop reads of the rule there before it knows whether
//! the rule needs more than a glance.
//!
//! On a benign CRS request the loop passes ~250 positions and leaves ~190 of
//! them after a glance: the rule is stepped over (partial evaluation found
//! it never matches) or ruled out by one bit of its slot group's coarse
//! union. Read from where they live (the phase's rule list, the block
//! table, partial evaluation's decisions, the plan's rule table), those
//! facts cost five lookups in four arrays per position; here they are one
//! 20-byte record, in the order the loop reads them.

use crate::blocks::{Blocks, NONE};
use crate::fold::{Decision, Folding};
use crate::plan::Plan;
use waf_compiler::ir::{Program, RuleIdx};

/// What the rule loop reads first of the rule at one position of a phase.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Step {
    pub rule: RuleIdx,
    /// The block (see [`crate::blocks`]) that starts at this position, or
    /// [`NONE`].
    pub block: u32,
    /// The slot group and verdict bit of the rule's first link when it is
    /// grouped ([`NONE`] otherwise): the loop rules most rules out by that
    /// one bit of the group's coarse union before entering them.
    pub group: u32,
    pub verdict: u32,
    /// What partial evaluation decided about the rule.
    pub decision: Decision,
}

/// The steps of a ruleset's phases.
#[derive(Debug, Default)]
pub(crate) struct Steps {
    /// Per phase (1-5), per position in the phase's rule list.
    phases: [Vec<Step>; 5],
}

impl Steps {
    pub(crate) fn new(program: &Program, folding: &Folding, plan: &Plan, blocks: &Blocks) -> Steps {
        let mut steps = Steps::default();
        for phase in 1..=5u8 {
            steps.phases[usize::from(phase) - 1] = program
                .phase(phase)
                .rules
                .iter()
                .enumerate()
                .map(|(pos, &ri)| {
                    let pr = plan.rule(ri);
                    let first = (!pr.unconditional && pr.n_links > 0)
                        .then(|| plan.link(pr.links))
                        .and_then(|l| Some((l.group?, l.verdict)));
                    let (group, verdict) = first.unwrap_or((NONE, NONE));
                    Step {
                        rule: ri,
                        block: blocks.at(phase, pos).map_or(NONE, |(id, _)| id),
                        group,
                        verdict,
                        decision: folding.decision(ri.index()),
                    }
                })
                .collect();
        }
        steps
    }

    /// The steps of `phase` (1-5; none for any other), one per rule of the
    /// phase's list, in its order.
    #[inline]
    pub(crate) fn phase(&self, phase: u8) -> &[Step] {
        match usize::from(phase)
            .checked_sub(1)
            .and_then(|p| self.phases.get(p))
        {
            Some(s) => s,
            None => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::Ruleset;

    #[test]
    fn one_step_per_rule_of_each_phase_in_order() {
        let rs = Ruleset::from_str(
            "t.conf",
            r#"
            SecRule ARGS "@rx a" "id:1,phase:1,pass"
            SecRule ARGS "@rx b" "id:2,phase:2,pass"
            SecAction "id:3,phase:2,pass,nolog"
            SecRule RESPONSE_BODY "@rx c" "id:4,phase:4,pass"
            "#,
        )
        .expect("rules compile");
        let p = rs.program();
        for phase in 1..=5u8 {
            let rules = &p.phase(phase).rules;
            let steps = rs.steps().phase(phase);
            assert_eq!(steps.len(), rules.len(), "phase {phase}");
            for (s, r) in steps.iter().zip(rules) {
                assert_eq!(s.rule, *r);
            }
        }
        assert_eq!(rs.steps().phase(2).len(), 2);
        assert!(rs.steps().phase(0).is_empty());
        assert!(rs.steps().phase(9).is_empty());
    }
}
