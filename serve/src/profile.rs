//! Per-rule counters from live traffic, in the format `waf profile
//! --from-metrics` reads: with profiling on (`waf serve --profile`), every
//! transaction's rule profile is added here by rule id, and `/metrics`
//! carries the totals as Prometheus counters. Ids, not rule indices, so that
//! instances (and reloads) of the same rules add up; Prometheus scrapes
//! many instances, and `waf profile --from-metrics FILE...` sums the files.
//!
//! Lines (all counters): `waf_profiled_requests_total`,
//! `waf_engine_<stat>_total` for each field of
//! [`waf_engine::EvalStats`], and per rule
//! `waf_rule_{nanoseconds,evaluations,matches,operator_runs,prefilter_skips}_total{rule_id="N"}`.

use std::collections::BTreeMap;
use std::fmt::Write;
use waf_engine::{EvalStats, RuleProfile, Ruleset, Transaction};

/// One rule's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuleCounters {
    /// Time spent evaluating it, ns.
    pub nanos: u64,
    /// Evaluations.
    pub evals: u64,
    /// Matches.
    pub matches: u64,
    /// Values its operators ran on.
    pub op_runs: u64,
    /// Values the prefilter skipped for it.
    pub skips: u64,
}

const RULE_METRICS: [(&str, &str); 5] = [
    (
        "waf_rule_nanoseconds_total",
        "Time spent evaluating the rule, ns.",
    ),
    (
        "waf_rule_evaluations_total",
        "Times the rule was evaluated.",
    ),
    ("waf_rule_matches_total", "Times the rule matched."),
    (
        "waf_rule_operator_runs_total",
        "Values the rule's operators ran on.",
    ),
    (
        "waf_rule_prefilter_skips_total",
        "Values the prefilter skipped for the rule.",
    ),
];

impl RuleCounters {
    fn fields(&mut self) -> [&mut u64; 5] {
        [
            &mut self.nanos,
            &mut self.evals,
            &mut self.matches,
            &mut self.op_runs,
            &mut self.skips,
        ]
    }
}

/// The Prometheus text of the engine's counters, `waf_engine_{name}_total`
/// (what [`Aggregate::parse`] reads back into [`Aggregate::stats`]).
pub(crate) fn render_stats(stats: &EvalStats, s: &mut String) {
    let mut stats = *stats;
    for (name, v) in stat_fields(&mut stats) {
        let _ = writeln!(
            s,
            "# HELP waf_engine_{name}_total The engine's {name} counter (EvalStats), over the requests finished.\n# TYPE waf_engine_{name}_total counter\nwaf_engine_{name}_total {v}"
        );
    }
}

/// Counters of [`stat_fields`].
pub(crate) const STAT_FIELDS: usize = 12;

/// The engine's counters by their names in `/metrics`
/// (`waf_engine_{name}_total`).
pub(crate) fn stat_fields(s: &mut EvalStats) -> [(&'static str, &mut u64); STAT_FIELDS] {
    [
        ("memo_hits", &mut s.memo_hits),
        ("memo_misses", &mut s.memo_misses),
        ("op_runs", &mut s.op_runs),
        ("prefilter_skips", &mut s.prefilter_skips),
        ("regex_evals", &mut s.regex_evals),
        ("scans", &mut s.scans),
        ("rules_evaluated", &mut s.rules_evaluated),
        ("xcache_hits", &mut s.xcache_hits),
        ("xcache_misses", &mut s.xcache_misses),
        ("xcache_op_hits", &mut s.xcache_op_hits),
        ("xcache_resets", &mut s.xcache_resets),
        ("pcre_limit_hits", &mut s.pcre_limit_hits),
    ]
}

/// Totals over many transactions (and, parsed, over many instances).
#[derive(Clone, Debug, Default)]
pub struct Aggregate {
    /// Transactions added.
    pub requests: u64,
    /// The engine's counters, summed: filled by [`Aggregate::parse`] from
    /// `/metrics`, not by [`Aggregate::add`] (a live proxy counts them for
    /// every transaction, profiled or not, in `Metrics::engine_stats`).
    pub stats: EvalStats,
    /// Per rule id.
    pub rules: BTreeMap<u64, RuleCounters>,
    /// WAF time over all phases, seconds (from the `waf_phase_seconds`
    /// histograms' sums, when parsed from `/metrics`).
    pub engine_seconds: f64,
}

impl Aggregate {
    /// Adds one finished transaction (run with profiling on).
    pub fn add(&mut self, tx: &Transaction<'_>) {
        self.requests += 1;
        let p = tx.rule_profile();
        let rules = &tx.ruleset().program().rules;
        for (i, rule) in rules.iter().enumerate() {
            let evals = p.evals.get(i).copied().unwrap_or(0);
            if evals == 0 {
                continue;
            }
            let c = self.rules.entry(rule.id).or_default();
            c.nanos += p.nanos.get(i).copied().unwrap_or(0);
            c.evals += evals;
            c.matches += p.matches.get(i).copied().unwrap_or(0);
            c.op_runs += p.op_runs.get(i).copied().unwrap_or(0);
            c.skips += p.skips.get(i).copied().unwrap_or(0);
        }
    }

    /// Adds another aggregate.
    pub fn merge(&mut self, o: &Aggregate) {
        self.requests += o.requests;
        self.engine_seconds += o.engine_seconds;
        self.stats.add(&o.stats);
        for (id, c) in &o.rules {
            let mine = self.rules.entry(*id).or_default();
            let mut theirs = *c;
            for (a, b) in mine.fields().into_iter().zip(theirs.fields()) {
                *a += *b;
            }
        }
    }

    /// The Prometheus text of the per-rule totals (the engine's counters
    /// are [`render_stats`]'s, from every transaction, profiled or not).
    pub fn render(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "# HELP waf_profiled_requests_total Transactions whose rule profile is counted below.\n# TYPE waf_profiled_requests_total counter\nwaf_profiled_requests_total {}",
            self.requests
        );
        for (k, (name, help)) in RULE_METRICS.iter().enumerate() {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} counter");
            for (id, c) in &self.rules {
                let mut c = *c;
                let v = *c.fields()[k];
                let _ = writeln!(s, "{name}{{rule_id=\"{id}\"}} {v}");
            }
        }
    }

    /// Reads the counters of a `/metrics` text (other lines are ignored).
    pub fn parse(text: &str) -> Result<Aggregate, String> {
        let mut a = Aggregate::default();
        for (n, line) in text.lines().enumerate() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let Some((key, text)) = line.rsplit_once(' ') else {
                continue;
            };
            let bad = || format!("line {}: `{line}` is not `name value`", n + 1);
            let seconds = || text.trim().parse::<f64>().map_err(|_| bad());
            let value = || seconds().map(|v| v as u64);
            if key.starts_with("waf_phase_seconds_sum{") {
                a.engine_seconds += seconds()?;
                continue;
            }
            if key == "waf_profiled_requests_total" {
                a.requests += value()?;
                continue;
            }
            if let Some(stat) = key
                .strip_prefix("waf_engine_")
                .and_then(|k| k.strip_suffix("_total"))
            {
                if let Some((_, f)) = stat_fields(&mut a.stats)
                    .into_iter()
                    .find(|(n, _)| *n == stat)
                {
                    *f += value()?;
                }
                continue;
            }
            let Some((name, labels)) = key.split_once('{') else {
                continue;
            };
            let Some(k) = RULE_METRICS.iter().position(|(m, _)| *m == name) else {
                continue;
            };
            let id = labels
                .strip_prefix("rule_id=\"")
                .and_then(|l| l.strip_suffix("\"}"))
                .and_then(|l| l.parse::<u64>().ok())
                .ok_or_else(bad)?;
            let v = value()?;
            *a.rules.entry(id).or_default().fields()[k] += v;
        }
        Ok(a)
    }

    /// The totals as a [`RuleProfile`] of `rs` (rules matched by id: the
    /// rules running where the counters came from should be these).
    pub fn rule_profile(&self, rs: &Ruleset) -> RuleProfile {
        let rules = &rs.program().rules;
        let n = rules.len();
        let mut p = RuleProfile {
            nanos: vec![0; n],
            evals: vec![0; n],
            matches: vec![0; n],
            op_runs: vec![0; n],
            skips: vec![0; n],
        };
        let mut seen = std::collections::BTreeSet::new();
        for (i, rule) in rules.iter().enumerate() {
            // A rule id counts once (the first rule with it).
            if !seen.insert(rule.id) {
                continue;
            }
            if let Some(c) = self.rules.get(&rule.id) {
                p.nanos[i] = c.nanos;
                p.evals[i] = c.evals;
                p.matches[i] = c.matches;
                p.op_runs[i] = c.op_runs;
                p.skips[i] = c.skips;
            }
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_survive_render_parse_and_merge() {
        let rs = Ruleset::from_str(
            "t.conf",
            "SecRuleEngine On\nSecRule ARGS \"@contains x\" \"id:7,phase:1,pass,log\"\nSecRule ARGS \"@contains y\" \"id:8,phase:1,pass,log\"\n",
        )
        .expect("rules");
        let mut a = Aggregate::default();
        let mut stats = EvalStats::default();
        for q in [&b"/?a=x"[..], b"/?a=y", b"/?a=z"] {
            let mut tx = rs.transaction_with(waf_engine::EvalOptions {
                profile: true,
                ..rs.eval_options()
            });
            tx.process_uri(q, b"GET", b"HTTP/1.1");
            tx.process_request_headers();
            a.add(&tx);
            stats.add(&tx.stats());
        }
        assert_eq!(a.requests, 3);
        assert_eq!(a.rules[&7].evals, 3);
        assert_eq!(a.rules[&7].matches, 1);
        let mut text = String::new();
        a.render(&mut text);
        render_stats(&stats, &mut text);
        let b = Aggregate::parse(&text).expect("parse");
        assert_eq!(b.rules, a.rules);
        assert_eq!(b.requests, 3);
        assert!(stats.rules_evaluated > 0);
        assert_eq!(b.stats.rules_evaluated, stats.rules_evaluated);
        let mut twice = b.clone();
        twice.merge(&b);
        assert_eq!(twice.rules[&8].matches, 2);
        let p = twice.rule_profile(&rs);
        assert_eq!(p.evals, vec![6, 6]);
        assert!(Aggregate::parse("waf_rule_matches_total{rule_id=\"x\"} 1").is_err());
    }
}
