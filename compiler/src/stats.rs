//! Counts that describe a compiled program (`waf compile --stats`).

use crate::ir::{Prefilter, Program};
use crate::rx::Strategy;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

/// Counts that describe a compiled program: what `waf compile --stats` prints.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Stats {
    /// Rule files read.
    pub files: usize,
    /// Rules that run (SecRule chains and SecActions), removed ones excluded.
    pub rules: usize,
    /// Rules that run, per phase (1 to 5).
    pub rules_per_phase: [usize; 5],
    /// Of `rules`: `SecAction`s.
    pub sec_actions: usize,
    /// Rules removed by SecRuleRemoveBy*.
    pub removed_rules: usize,
    /// Rules with at least one `chain` link.
    pub chained_rules: usize,
    /// Chain links after the first statement, over all rules.
    pub chain_links: usize,
    /// `SecMarker`s.
    pub markers: usize,
    /// Rules with `skipAfter`.
    pub skip_after: usize,
    /// Distinct transform chains used by some rule (the empty chain included).
    pub transform_chains: usize,
    /// Nodes of the transform prefix tree, root excluded.
    pub transform_nodes: usize,
    /// Tree nodes that two or more distinct chains go through (their result is shared).
    pub shared_prefix_nodes: usize,
    /// Distinct targets (variable, selector, count).
    pub targets: usize,
    /// Distinct (target, transform chain) pairs: the values the engine memoizes.
    pub value_slots: usize,
    /// Operators by name.
    pub operators_by_kind: BTreeMap<String, usize>,
    /// Compiled regexes (`@rx` and the `@verify*` patterns).
    pub regexes: usize,
    /// Of `regexes`: matched with a full DFA.
    pub regexes_full_dfa: usize,
    /// Of `regexes`: matched with a lazy DFA (a full one would be too large).
    pub regexes_lazy_dfa: usize,
    /// Of `regexes`: PCRE-only patterns run on PCRE2 (`WafPcreFallback On`).
    pub regexes_backtracking: usize,
    /// Memory of the full DFAs, in bytes.
    pub full_dfa_bytes: usize,
    /// `@pm`/`@pmFromFile` phrase lists.
    pub phrase_sets: usize,
    /// Phrases over all lists.
    pub phrases: usize,
    /// Rule statements (rules and chain links) whose operator has a prefilter.
    pub links_with_prefilter: usize,
    /// Rule statements whose operator has no prefilter (run on every value).
    pub links_without_prefilter: usize,
    /// Rules whose first statement has a prefilter (skippable by the literal scan).
    pub rules_with_prefilter: usize,
    /// Rules whose first statement has no prefilter (never skipped by the literal scan).
    pub rules_without_prefilter: usize,
    /// Shortest required literal of each prefiltered statement: length → count.
    pub prefilter_min_len: BTreeMap<usize, usize>,
    /// Whole compilation time, in milliseconds, when measured.
    pub compile_ms: Option<f64>,
    /// Of `compile_ms`: reading and parsing (pest), checks and IR, regex compilation.
    pub parse_ms: Option<f64>,
    /// Of `compile_ms`: checks and IR construction.
    pub lower_ms: Option<f64>,
    /// Of `compile_ms`: regex compilation.
    pub regex_ms: Option<f64>,
}

impl Stats {
    /// Records the timings of the compilation that produced the program.
    pub fn with_timings(mut self, total: std::time::Duration, t: &crate::Timings) -> Stats {
        let ms = |d: std::time::Duration| Some(d.as_secs_f64() * 1000.0);
        self.compile_ms = ms(total);
        self.parse_ms = ms(t.parse);
        self.lower_ms = ms(t.lower);
        self.regex_ms = ms(t.regex);
        self
    }

    /// The counts of `p`.
    pub fn of(p: &Program) -> Stats {
        let mut s = Stats {
            files: p.sources.files().count(),
            markers: p.markers.len(),
            ..Stats::default()
        };
        let active: HashSet<u32> = p
            .phases
            .iter()
            .flat_map(|ph| ph.rules.iter().map(|r| r.0))
            .collect();
        s.removed_rules = p.rules.len() - active.len();
        let mut chains_used = HashSet::new();
        for (i, rule) in p.rules.iter().enumerate() {
            if !active.contains(&(i as u32)) {
                continue;
            }
            s.rules += 1;
            s.rules_per_phase[usize::from(rule.phase) - 1] += 1;
            s.sec_actions += usize::from(rule.unconditional);
            if rule.links.len() > 1 {
                s.chained_rules += 1;
                s.chain_links += rule.links.len() - 1;
            }
            s.skip_after +=
                usize::from(matches!(rule.flow, Some(crate::ir::Flow::SkipAfter { .. })));
            for (n, link) in rule.links.iter().enumerate() {
                let op = &p.operators[link.operator.index()];
                if !rule.unconditional {
                    chains_used.insert(link.transforms);
                    *s.operators_by_kind
                        .entry(op.name.name().to_string())
                        .or_default() += 1;
                }
                let has = matches!(op.prefilter, Prefilter::AnyOf(_));
                if !rule.unconditional {
                    if has {
                        s.links_with_prefilter += 1;
                    } else {
                        s.links_without_prefilter += 1;
                    }
                    if let Some(m) = op.prefilter.min_len() {
                        *s.prefilter_min_len.entry(m).or_default() += 1;
                    }
                }
                if n == 0 && !rule.unconditional {
                    if has {
                        s.rules_with_prefilter += 1;
                    } else {
                        s.rules_without_prefilter += 1;
                    }
                }
            }
        }
        s.transform_chains = chains_used.len();
        s.transform_nodes = p.transforms.nodes.len() - 1;
        let mut through: HashMap<u32, usize> = HashMap::new();
        for &c in &chains_used {
            let mut node = Some(c);
            while let Some(nid) = node.filter(|n| n.0 != 0) {
                *through.entry(nid.0).or_default() += 1;
                node = p.transforms.nodes[nid.index()].parent;
            }
        }
        s.shared_prefix_nodes = through.values().filter(|&&n| n >= 2).count();
        s.targets = p.targets.len();
        s.value_slots = p.slots.len();
        s.regexes = p.regexes.len();
        for rx in &p.regexes {
            match rx.strategy() {
                Strategy::FullDfa { bytes } => {
                    s.regexes_full_dfa += 1;
                    s.full_dfa_bytes += bytes;
                }
                // Not built (yet): the lazy DFA answers.
                Strategy::LazyDfa | Strategy::Pending => s.regexes_lazy_dfa += 1,
                Strategy::Backtracking => s.regexes_backtracking += 1,
            }
        }
        s.phrase_sets = p.phrase_sets.len();
        s.phrases = p.phrase_sets.iter().map(|ps| ps.phrases.len()).sum();
        s
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "files                      {}", self.files)?;
        writeln!(
            f,
            "rules                      {} (phase 1: {}, 2: {}, 3: {}, 4: {}, 5: {}; SecAction: {})",
            self.rules,
            self.rules_per_phase[0],
            self.rules_per_phase[1],
            self.rules_per_phase[2],
            self.rules_per_phase[3],
            self.rules_per_phase[4],
            self.sec_actions
        )?;
        if self.removed_rules > 0 {
            writeln!(f, "removed rules              {}", self.removed_rules)?;
        }
        writeln!(
            f,
            "chained rules              {} ({} chain links)",
            self.chained_rules, self.chain_links
        )?;
        writeln!(
            f,
            "markers                    {} (rules with skipAfter: {})",
            self.markers, self.skip_after
        )?;
        writeln!(
            f,
            "transform chains           {} distinct, {} prefix-tree nodes, {} shared by several chains",
            self.transform_chains, self.transform_nodes, self.shared_prefix_nodes
        )?;
        writeln!(
            f,
            "targets                    {} distinct, {} (target, chain) value slots",
            self.targets, self.value_slots
        )?;
        let ops: Vec<String> = self
            .operators_by_kind
            .iter()
            .map(|(k, v)| format!("@{k} {v}"))
            .collect();
        writeln!(f, "operators                  {}", ops.join(", "))?;
        writeln!(
            f,
            "regexes                    {} distinct: {} full DFA ({:.1} MiB), {} lazy DFA",
            self.regexes,
            self.regexes_full_dfa,
            self.full_dfa_bytes as f64 / (1024.0 * 1024.0),
            self.regexes_lazy_dfa
        )?;
        if self.regexes_backtracking > 0 {
            writeln!(
                f,
                "                           {} on PCRE2 (backtracking, under a match limit)",
                self.regexes_backtracking
            )?;
        }
        writeln!(
            f,
            "phrase sets                {} ({} phrases)",
            self.phrase_sets, self.phrases
        )?;
        writeln!(
            f,
            "prefilter                  rules: {} with, {} without; statements: {} with, {} without",
            self.rules_with_prefilter, self.rules_without_prefilter, self.links_with_prefilter, self.links_without_prefilter
        )?;
        let hist: Vec<String> = self
            .prefilter_min_len
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect();
        writeln!(f, "prefilter min literal len  {}", hist.join(" "))?;
        if let Some(ms) = self.compile_ms {
            write!(f, "compile time               {ms:.1} ms")?;
            if let (Some(p), Some(l), Some(r)) = (self.parse_ms, self.lower_ms, self.regex_ms) {
                write!(f, " (read+parse {p:.1} ms = {:.0}%, checks+IR {l:.1} ms of which regex compilation {r:.1} ms)", 100.0 * p / ms.max(1e-9))?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}
