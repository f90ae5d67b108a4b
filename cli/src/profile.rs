//! `waf profile`: where rule evaluation time goes on a request corpus.
//!
//! The corpus (JSONL, HAR or go-ftw YAML, loaded as `waf bench` loads it) is
//! run through one transaction with [`EvalOptions::profile`] on, which times
//! every rule and counts the work of every node of the transform prefix tree
//! (a *chain*, e.g. `[urlDecodeUni, lowercase]`; the empty chain is `[]`).
//! The report gives:
//!
//! - the memo hit ratio, overall and per chain: the share of the values
//!   served to rules at a chain that were already transformed
//!   (`1 - misses / lookups`);
//! - the *hot entries*: chains with the targets whose values pass through
//!   them, ranked by the time spent in their transformation;
//! - per rule: time share, evaluations, prefilter skip rate, matches,
//!   location; the rules with no prefilter; the rules that never matched.
//!
//! Output: a table (`--format table`), JSON (`--format json`, every chain and
//! rule; field names below), and with `--html FILE` a self-contained page
//! with charts ([`profile_html`]).
//!
//! JSON fields (times in ns, ratios in 0..=1):
//! - `requests` (requests run: corpus × passes), `corpus_requests`, `passes`,
//!   `corpus_files`, `skipped`, `wall_s`, `requests_per_s` (instrumented),
//!   `options` {`memo`, `prefilter`, `xcache`};
//! - `summary` {`memo_hit_ratio`, `memo_lookups`, `memo_misses`,
//!   `transform_applications`, `xcache_outputs`, `transform_time_ns`,
//!   `rule_time_ns`, `prefilter_skip_rate`, `xcache_hit_ratio` (null when
//!   off), `rules_total`, `rules_evaluated`, `rules_without_prefilter`,
//!   `rules_never_matched`, `stats` (the engine's `EvalStats`, as `waf bench`
//!   reports them: its `memo_hit_ratio` is hits / (hits + misses) with hits
//!   counting every value served)};
//! - `prefilter` {`literal_ops`, `byte_ops`, `literals`};
//! - `chains[]` {`node`, `parent`, `chain` (names), `text`, `lookups`,
//!   `misses`, `hit_ratio` (null when never looked up), `computed`,
//!   `xcache`, `bytes_in`, `time_ns`},
//!   by lookups;
//! - `hot_entries[]` {`node`, `chain`, `text`, `targets[]` {`target`,
//!   `lookups`, `direct`}, `time_ns`, `time_share`, `computed`, `bytes_in`,
//!   `lookups`, `hit_ratio`}, by time;
//! - `rules[]` {`id`, `phase`, `location`, `msg`, `time_ns`, `time_share`,
//!   `us_per_request`, `evaluations`, `op_runs`, `prefilter_skips`,
//!   `prefilter_skip_rate`, `matches`, `has_prefilter`}, by time;
//! - `rules_without_prefilter[]` {`id`, `location`, `operators`,
//!   `evaluations`, `time_ns`, `time_share`, `op_runs`}, by time (every rule
//!   of the configuration, evaluated on the corpus or not);
//! - `rules_never_matched[]` {`id`, `location`, `evaluations`}, in file order.

use crate::input::{EngineFlags, RuleInput};
use crate::{CliError, CmdResult};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use waf_compiler::ir::{NodeId, Program};
use waf_engine::{ChainProfile, EvalOptions, EvalStats, RuleProfile, Ruleset};
use waf_harness::corpus::CorpusRequest;

#[path = "profile_html.rs"]
pub(crate) mod profile_html;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub input: RuleInput,
    /// Request corpora: JSONL (the peers' format), HAR files, or go-ftw YAML
    /// files/directories; repeatable.
    #[arg(long, value_name = "FILE", required_unless_present = "from_metrics", num_args = 1..)]
    pub corpus: Vec<PathBuf>,
    /// Instead of running a corpus: sum the per-rule counters of `/metrics`
    /// texts scraped from `waf serve --profile` instances (one file each; the
    /// rules given must be the ones those instances run). Rule times and
    /// counts only: transform chains are not exported.
    #[arg(long, value_name = "FILE", num_args = 1.., conflicts_with_all = ["corpus", "passes"])]
    pub from_metrics: Vec<PathBuf>,
    /// Passes over the corpus (the cross-transaction cache is emptied at the
    /// start of each).
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = crate::input::positive)]
    pub passes: usize,
    /// Rows of each table (JSON carries everything).
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub top: usize,
    /// Output on standard output.
    #[arg(long, value_enum, default_value = "table", value_name = "FORMAT")]
    pub format: Format,
    /// Also write a self-contained HTML report (charts and tables) to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    #[command(flatten)]
    pub engine: EngineFlags,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
}

/// What an instrumented run over a corpus measured.
#[derive(Clone, Debug, Default)]
pub struct ProfileRun {
    /// Requests run (corpus size × passes).
    pub requests: usize,
    /// Wall time of the instrumented passes.
    pub wall: Duration,
    pub stats: EvalStats,
    pub rules: RuleProfile,
    pub chains: ChainProfile,
}

/// Runs `corpus` `passes` times (at least once) through one transaction with
/// profiling on, as `waf bench` does: reset per request, phases 1 and 2, the
/// cross-transaction cache emptied at the start of each pass.
pub fn collect(
    rs: &Ruleset,
    corpus: &[CorpusRequest],
    passes: usize,
    opts: EvalOptions,
) -> ProfileRun {
    let passes = passes.max(1);
    let mut tx = rs.transaction_with(EvalOptions {
        profile: true,
        ..opts
    });
    let start = Instant::now();
    for _ in 0..passes {
        tx.clear_cache();
        for r in corpus {
            crate::bench::run_one(&mut tx, r);
        }
    }
    let wall = start.elapsed();
    ProfileRun {
        requests: corpus.len() * passes,
        wall,
        stats: tx.stats(),
        rules: tx.rule_profile().clone(),
        chains: tx.chain_profile().clone(),
    }
}

pub fn run(args: Args) -> CmdResult {
    let rs = args.input.ruleset()?;
    if !args.from_metrics.is_empty() {
        return from_metrics(&args, &rs);
    }
    let corpus = crate::input::load_corpus(&args.corpus)?;
    let passes = args.passes;
    let opts = args.engine.options();
    let run = collect(&rs, &corpus.requests, passes, opts);
    let meta = Meta {
        rules_files: if args.input.is_default() {
            vec![crate::input::DEFAULT_RULESET_NAME.to_string()]
        } else {
            args.input
                .files()
                .unwrap_or_default()
                .iter()
                .map(|p| p.display().to_string())
                .collect()
        },
        corpus_files: args
            .corpus
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        corpus_requests: corpus.requests.len(),
        files_read: corpus.files,
        skipped: corpus.skipped,
        passes,
        options: opts,
    };
    let report = Report::new(&rs, &run, meta);
    write_report(&args, &report)
}

/// `--from-metrics`: the report of live traffic's counters.
fn from_metrics(args: &Args, rs: &Ruleset) -> CmdResult {
    let mut total = waf_serve::profile::Aggregate::default();
    for p in &args.from_metrics {
        let text = std::fs::read_to_string(p)
            .map_err(|e| CliError::usage(format!("cannot read `{}`: {e}", p.display())))?;
        let a = waf_serve::profile::Aggregate::parse(&text)
            .map_err(|e| CliError::usage(format!("`{}`: {e}", p.display())))?;
        total.merge(&a);
    }
    if total.requests == 0 {
        return Err(CliError::usage(
            "no profiled requests in these files: start waf serve with --profile and save its /metrics",
        ));
    }
    let run = ProfileRun {
        requests: total.requests as usize,
        wall: Duration::from_secs_f64(total.engine_seconds.max(0.0)),
        stats: total.stats,
        rules: total.rule_profile(rs),
        chains: Default::default(),
    };
    let meta = Meta {
        rules_files: args
            .input
            .files()
            .unwrap_or_default()
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        corpus_files: args
            .from_metrics
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        corpus_requests: total.requests as usize,
        files_read: args.from_metrics.len(),
        skipped: 0,
        passes: 1,
        options: rs.eval_options(),
    };
    let report = Report::new(rs, &run, meta);
    write_report(args, &report)
}

fn write_report(args: &Args, report: &Report) -> CmdResult {
    if let Some(path) = &args.html {
        let page = profile_html::render(report, args.top);
        std::fs::write(path, page)
            .map_err(|e| CliError::usage(format!("cannot write `{}`: {e}", path.display())))?;
    }
    let mut out = std::io::stdout().lock();
    let written = match args.format {
        Format::Json => writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&report.json()).unwrap_or_default()
        ),
        Format::Table => out.write_all(report.table(args.top).as_bytes()),
    };
    written?;
    Ok(())
}

/// What the run was on.
pub(crate) struct Meta {
    pub rules_files: Vec<String>,
    pub corpus_files: Vec<String>,
    pub corpus_requests: usize,
    pub files_read: usize,
    pub skipped: usize,
    pub passes: usize,
    pub options: EvalOptions,
}

/// A transform chain (node of the prefix tree) and its counters.
pub(crate) struct ChainRow {
    pub node: usize,
    pub parent: Option<usize>,
    pub names: Vec<&'static str>,
    pub lookups: u64,
    pub misses: u64,
    pub hit_ratio: f64,
    pub computed: u64,
    pub xcache: u64,
    pub bytes_in: u64,
    pub nanos: u64,
}

impl ChainRow {
    /// The hit ratio, `None` when the chain was never looked up (only
    /// computed on the way to longer chains).
    pub fn hit(&self) -> Option<f64> {
        (self.lookups > 0).then_some(self.hit_ratio)
    }

    /// The hit ratio for people: `-` when never looked up.
    pub fn hit_text(&self) -> String {
        self.hit().map_or("-".into(), fmt_pct)
    }
}

/// A target whose values pass through a chain.
pub(crate) struct EntryTarget {
    pub text: String,
    /// Values served through the slots of this target at this chain or a
    /// longer one starting with it.
    pub lookups: u64,
    /// Some slot reads the target at exactly this chain.
    pub direct: bool,
}

/// A hot entry: a chain, the targets transformed by it, what it cost.
pub(crate) struct HotEntry {
    /// Index into `Report::chains`.
    pub chain: usize,
    pub targets: Vec<EntryTarget>,
    /// Share of all transformation time.
    pub time_share: f64,
}

pub(crate) struct RuleRow {
    pub id: u64,
    pub phase: u8,
    pub location: String,
    /// The rule's `msg` as written (macros unexpanded), or empty.
    pub msg: String,
    pub nanos: u64,
    pub time_share: f64,
    pub evals: u64,
    pub op_runs: u64,
    pub skips: u64,
    pub matches: u64,
    pub has_prefilter: bool,
    /// Non-negated operators of its links with no prefilter (`@rx`, ...).
    pub ungated_ops: Vec<String>,
    pub unconditional: bool,
}

impl RuleRow {
    pub fn skip_rate(&self) -> f64 {
        ratio(self.skips, self.skips + self.op_runs)
    }
}

/// Everything the three outputs show.
pub(crate) struct Report {
    pub meta: Meta,
    pub requests: usize,
    pub wall: Duration,
    pub stats: EvalStats,
    pub memo_lookups: u64,
    pub memo_misses: u64,
    pub memo_hit_ratio: f64,
    pub transform_apps: u64,
    pub xcache_outputs: u64,
    pub transform_nanos: u64,
    pub rule_nanos: u64,
    pub literal_ops: usize,
    pub byte_ops: usize,
    pub literals: usize,
    pub rules_total: usize,
    /// Chains looked up or computed at least once, by lookups (most first).
    pub chains: Vec<ChainRow>,
    /// Chains whose transformation ran, by time (most first).
    pub hot: Vec<HotEntry>,
    /// Every rule of the phases, by time (most first; never evaluated last).
    pub rules: Vec<RuleRow>,
}

impl Report {
    pub fn new(rs: &Ruleset, run: &ProfileRun, meta: Meta) -> Report {
        let p = rs.program();
        let ch = &run.chains;
        let n_nodes = p.transforms.nodes.len();
        let get = |v: &Vec<u64>, i: usize| v.get(i).copied().unwrap_or(0);
        let mut chains: Vec<ChainRow> = (0..n_nodes)
            .map(|i| ChainRow {
                node: i,
                parent: p.transforms.nodes[i].parent.map(NodeId::index),
                names: chain_names(p, NodeId(i as u32)),
                lookups: get(&ch.lookups, i),
                misses: get(&ch.misses, i),
                hit_ratio: if ch.is_empty() { 0.0 } else { ch.hit_ratio(i) },
                computed: get(&ch.computed, i),
                xcache: get(&ch.xcache, i),
                bytes_in: get(&ch.bytes_in, i),
                nanos: get(&ch.nanos, i),
            })
            .filter(|c| c.lookups + c.computed + c.xcache > 0)
            .collect();
        chains.sort_by(|a, b| b.lookups.cmp(&a.lookups).then(a.node.cmp(&b.node)));

        // Targets flowing through each node: every slot counts at its node
        // and at each ancestor.
        let mut through: Vec<BTreeMap<usize, (u64, bool)>> = vec![BTreeMap::new(); n_nodes];
        for (si, slot) in p.slots.iter().enumerate() {
            let lookups = get(&ch.slot_lookups, si);
            let mut n = Some(slot.node);
            let mut direct = true;
            while let Some(cur) = n {
                let e = through[cur.index()]
                    .entry(slot.target.index())
                    .or_insert((0, false));
                e.0 += lookups;
                e.1 |= direct;
                direct = false;
                n = p.transforms.nodes[cur.index()].parent;
            }
        }
        let transform_nanos: u64 = ch.nanos.iter().sum();
        let mut hot: Vec<HotEntry> = chains
            .iter()
            .enumerate()
            .filter(|(_, c)| c.computed > 0)
            .map(|(ci, c)| {
                let mut targets: Vec<EntryTarget> = through[c.node]
                    .iter()
                    .filter(|(_, (l, _))| *l > 0)
                    .map(|(&t, &(lookups, direct))| EntryTarget {
                        text: target_text(p, t),
                        lookups,
                        direct,
                    })
                    .collect();
                targets.sort_by(|a, b| b.lookups.cmp(&a.lookups).then(a.text.cmp(&b.text)));
                HotEntry {
                    chain: ci,
                    targets,
                    time_share: ratio(c.nanos, transform_nanos),
                }
            })
            .collect();
        hot.sort_by(|a, b| {
            let (x, y) = (&chains[a.chain], &chains[b.chain]);
            y.nanos
                .cmp(&x.nanos)
                .then(y.bytes_in.cmp(&x.bytes_in))
                .then(x.node.cmp(&y.node))
        });

        let rp = &run.rules;
        let rule_nanos: u64 = rp.nanos.iter().sum();
        let mut rules: Vec<RuleRow> = p
            .phases
            .iter()
            .flat_map(|ph| ph.rules.iter())
            .map(|&ri| {
                let i = ri.index();
                let r = p.rule(ri);
                let ungated_ops: Vec<String> = if r.unconditional {
                    Vec::new()
                } else {
                    r.links
                        .iter()
                        .map(|l| &p.operators[l.operator.index()])
                        .zip(r.links.iter())
                        .filter(|(op, l)| !op.negated && !rs.has_prefilter(l.operator))
                        .map(|(op, _)| format!("@{}", op.name.name()))
                        .collect()
                };
                let has_prefilter = !r.unconditional && {
                    let first = &r.links[0];
                    rs.has_prefilter(first.operator)
                };
                RuleRow {
                    id: r.id,
                    phase: r.phase,
                    location: r.location.clone(),
                    msg: r
                        .meta
                        .msg
                        .as_ref()
                        .map(|m| m.to_string())
                        .unwrap_or_default(),
                    nanos: get(&rp.nanos, i),
                    time_share: ratio(get(&rp.nanos, i), rule_nanos),
                    evals: get(&rp.evals, i),
                    op_runs: get(&rp.op_runs, i),
                    skips: get(&rp.skips, i),
                    matches: get(&rp.matches, i),
                    has_prefilter,
                    ungated_ops,
                    unconditional: r.unconditional,
                }
            })
            .collect();
        // Stable: equal times keep file order.
        rules.sort_by(|a, b| b.nanos.cmp(&a.nanos).then(b.evals.cmp(&a.evals)));

        let pf = rs.prefilter_stats();
        let memo_lookups: u64 = ch.lookups.iter().sum();
        let memo_misses: u64 = ch.misses.iter().sum();
        Report {
            requests: run.requests,
            wall: run.wall,
            stats: run.stats,
            memo_lookups,
            memo_misses,
            memo_hit_ratio: ratio(memo_lookups.saturating_sub(memo_misses), memo_lookups),
            transform_apps: ch.computed.iter().sum(),
            xcache_outputs: ch.xcache.iter().sum(),
            transform_nanos,
            rule_nanos,
            literal_ops: pf.literal_ops,
            byte_ops: pf.byte_ops,
            literals: pf.literals,
            rules_total: p.rules.len(),
            chains,
            hot,
            rules,
            meta,
        }
    }

    pub fn requests_per_s(&self) -> f64 {
        let s = self.wall.as_secs_f64();
        if s > 0.0 {
            self.requests as f64 / s
        } else {
            0.0
        }
    }

    pub fn xcache_hit_ratio(&self) -> Option<f64> {
        self.meta
            .options
            .xcache
            .then(|| self.stats.xcache_hit_ratio())
    }

    pub fn rules_evaluated(&self) -> usize {
        self.rules.iter().filter(|r| r.evals > 0).count()
    }

    /// Rules with an operator that always runs (no prefilter), by time.
    pub fn without_prefilter(&self) -> impl Iterator<Item = &RuleRow> {
        self.rules.iter().filter(|r| !r.ungated_ops.is_empty())
    }

    /// Rules evaluated at least once that never matched, in file order.
    pub fn never_matched(&self) -> Vec<&RuleRow> {
        let mut v: Vec<&RuleRow> = self
            .rules
            .iter()
            .filter(|r| r.evals > 0 && r.matches == 0 && !r.unconditional)
            .collect();
        v.sort_by(|a, b| file_order(&a.location, &b.location));
        v
    }

    pub fn chain(&self, h: &HotEntry) -> &ChainRow {
        &self.chains[h.chain]
    }

    pub fn json(&self) -> Value {
        let st = &self.stats;
        let req = self.requests.max(1) as f64;
        let chain_json = |c: &ChainRow| {
            json!({
                "node": c.node,
                "parent": c.parent,
                "chain": c.names,
                "text": chain_text(&c.names),
                "lookups": c.lookups,
                "misses": c.misses,
                "hit_ratio": c.hit(),
                "computed": c.computed,
                "xcache": c.xcache,
                "bytes_in": c.bytes_in,
                "time_ns": c.nanos,
            })
        };
        json!({
            "version": 1,
            "rules_files": self.meta.rules_files,
            "corpus": self.meta.corpus_files,
            "requests": self.requests,
            "corpus_requests": self.meta.corpus_requests,
            "passes": self.meta.passes,
            "corpus_files": self.meta.files_read,
            "skipped": self.meta.skipped,
            "wall_s": self.wall.as_secs_f64(),
            "requests_per_s": self.requests_per_s(),
            "options": {
                "memo": self.meta.options.memo,
                "prefilter": self.meta.options.prefilter,
                "xcache": self.meta.options.xcache,
            },
            "summary": {
                "memo_hit_ratio": self.memo_hit_ratio,
                "memo_lookups": self.memo_lookups,
                "memo_misses": self.memo_misses,
                "transform_applications": self.transform_apps,
                "xcache_outputs": self.xcache_outputs,
                "transform_time_ns": self.transform_nanos,
                "rule_time_ns": self.rule_nanos,
                "prefilter_skip_rate": st.prefilter_skip_rate(),
                "xcache_hit_ratio": self.xcache_hit_ratio(),
                "rules_total": self.rules_total,
                "rules_evaluated": self.rules_evaluated(),
                "rules_without_prefilter": self.without_prefilter().count(),
                "rules_never_matched": self.never_matched().len(),
                "stats": {
                    "memo_hits": st.memo_hits,
                    "memo_misses": st.memo_misses,
                    "memo_hit_ratio": st.memo_hit_ratio(),
                    "op_runs": st.op_runs,
                    "prefilter_skips": st.prefilter_skips,
                    "regex_evals": st.regex_evals,
                    "scans": st.scans,
                    "rules_evaluated": st.rules_evaluated,
                    "xcache_hits": st.xcache_hits,
                    "xcache_misses": st.xcache_misses,
                    "xcache_op_hits": st.xcache_op_hits,
                    "xcache_resets": st.xcache_resets,
                    "pcre_limit_hits": st.pcre_limit_hits,
                    "rules_evaluated_per_request": st.rules_evaluated as f64 / req,
                    "op_runs_per_request": st.op_runs as f64 / req,
                },
            },
            "prefilter": {
                "literal_ops": self.literal_ops,
                "byte_ops": self.byte_ops,
                "literals": self.literals,
            },
            "chains": self.chains.iter().map(chain_json).collect::<Vec<_>>(),
            "hot_entries": self.hot.iter().map(|h| {
                let c = self.chain(h);
                json!({
                    "node": c.node,
                    "chain": c.names,
                    "text": chain_text(&c.names),
                    "targets": h.targets.iter().map(|t| json!({
                        "target": t.text, "lookups": t.lookups, "direct": t.direct,
                    })).collect::<Vec<_>>(),
                    "time_ns": c.nanos,
                    "time_share": h.time_share,
                    "computed": c.computed,
                    "bytes_in": c.bytes_in,
                    "lookups": c.lookups,
                    "hit_ratio": c.hit(),
                })
            }).collect::<Vec<_>>(),
            "rules": self.rules.iter().map(|r| json!({
                "id": r.id,
                "phase": r.phase,
                "location": r.location,
                "msg": r.msg,
                "time_ns": r.nanos,
                "time_share": r.time_share,
                "us_per_request": r.nanos as f64 / 1000.0 / req,
                "evaluations": r.evals,
                "op_runs": r.op_runs,
                "prefilter_skips": r.skips,
                "prefilter_skip_rate": r.skip_rate(),
                "matches": r.matches,
                "has_prefilter": r.has_prefilter,
            })).collect::<Vec<_>>(),
            "rules_without_prefilter": self.without_prefilter().map(|r| json!({
                "id": r.id,
                "location": r.location,
                "operators": r.ungated_ops,
                "evaluations": r.evals,
                "time_ns": r.nanos,
                "time_share": r.time_share,
                "op_runs": r.op_runs,
            })).collect::<Vec<_>>(),
            "rules_never_matched": self.never_matched().iter().map(|r| json!({
                "id": r.id, "location": r.location, "evaluations": r.evals,
            })).collect::<Vec<_>>(),
        })
    }

    pub fn table(&self, top: usize) -> String {
        use std::fmt::Write as _;
        let mut o = String::new();
        let st = &self.stats;
        let req = self.requests.max(1) as f64;
        let _ = writeln!(
            o,
            "waf profile: {} requests ({} × {} pass(es)) from {} file(s), {} skipped; {} instrumented, {} req/s",
            thousands(self.requests as u64),
            thousands(self.meta.corpus_requests as u64),
            self.meta.passes,
            self.meta.files_read,
            self.meta.skipped,
            fmt_ns(self.wall.as_nanos() as u64),
            thousands(self.requests_per_s().round() as u64),
        );
        let xcache = self.xcache_hit_ratio().map_or("off".to_string(), fmt_pct);
        let _ = writeln!(
            o,
            "memo hit ratio {} ({} lookups, {} misses)   prefilter skip rate {}   xcache hit ratio {}",
            fmt_pct(self.memo_hit_ratio),
            thousands(self.memo_lookups),
            thousands(self.memo_misses),
            fmt_pct(st.prefilter_skip_rate()),
            xcache,
        );
        if st.pcre_limit_hits > 0 {
            let _ = writeln!(
                o,
                "PCRE2 searches stopped at the match limit: {} (they did not match; TX:MSC_PCRE_LIMITS_EXCEEDED was set)",
                thousands(st.pcre_limit_hits),
            );
        }
        let _ = writeln!(
            o,
            "rule time {} ({}/request), of which transformations {} ({})",
            fmt_ns(self.rule_nanos),
            fmt_ns((self.rule_nanos as f64 / req) as u64),
            fmt_ns(self.transform_nanos),
            fmt_pct(ratio(self.transform_nanos, self.rule_nanos)),
        );
        let _ = writeln!(
            o,
            "rules: {} evaluated of {}, {} without prefilter ({} evaluated), {} never matched",
            self.rules_evaluated(),
            self.rules_total,
            self.without_prefilter().count(),
            self.without_prefilter().filter(|r| r.evals > 0).count(),
            self.never_matched().len()
        );

        let _ = writeln!(
            o,
            "\nmemo hit ratio per transform chain (top {} by lookups):",
            top.min(self.chains.len())
        );
        let _ = writeln!(
            o,
            "  {:>6}  {:>10}  {:>10}  {:>10}  {:>9}  chain",
            "hit", "lookups", "misses", "computed", "xcache"
        );
        for c in self.chains.iter().take(top) {
            let _ = writeln!(
                o,
                "  {:>6}  {:>10}  {:>10}  {:>10}  {:>9}  {}",
                c.hit_text(),
                thousands(c.lookups),
                thousands(c.misses),
                thousands(c.computed),
                thousands(c.xcache),
                chain_text(&c.names)
            );
        }

        let _ = writeln!(
            o,
            "\nhot entries (top {} by transformation time):",
            top.min(self.hot.len())
        );
        let _ = writeln!(
            o,
            "  {:>9}  {:>6}  {:>9}  {:>9}  {:>6}  entry",
            "time", "share", "computed", "bytes", "hit"
        );
        for h in self.hot.iter().take(top) {
            let c = self.chain(h);
            let _ = writeln!(
                o,
                "  {:>9}  {:>6}  {:>9}  {:>9}  {:>6}  {} {}",
                fmt_ns(c.nanos),
                fmt_pct(h.time_share),
                thousands(c.computed),
                fmt_bytes(c.bytes_in),
                c.hit_text(),
                chain_text(&c.names),
                targets_text(&h.targets, 6)
            );
        }

        let _ = writeln!(o, "\nrules by time (top {}):", top.min(self.rules.len()));
        let _ = writeln!(
            o,
            "  {:>9}  {:>6}  {:>9}  {:>9}  {:>9}  {:>6}  {:>8}  location",
            "id", "share", "µs/req", "evals", "op runs", "skip", "matches"
        );
        for r in self.rules.iter().filter(|r| r.evals > 0).take(top) {
            let _ = writeln!(
                o,
                "  {:>9}  {:>6}  {:>9.3}  {:>9}  {:>9}  {:>6}  {:>8}  {}",
                r.id,
                fmt_pct(r.time_share),
                r.nanos as f64 / 1000.0 / req,
                thousands(r.evals),
                thousands(r.op_runs),
                if r.has_prefilter {
                    fmt_pct(r.skip_rate())
                } else {
                    "-".into()
                },
                thousands(r.matches),
                r.location
            );
        }

        let nopf: Vec<&RuleRow> = self.without_prefilter().collect();
        let _ = writeln!(
            o,
            "\nrules without prefilter ({}, {} evaluated on the corpus; top {} by time):",
            nopf.len(),
            nopf.iter().filter(|r| r.evals > 0).count(),
            top.min(nopf.len())
        );
        for r in nopf.iter().take(top) {
            let _ = writeln!(
                o,
                "  {:>9}  {:>6}  {:>9} op runs  {:<24}  {}",
                r.id,
                fmt_pct(r.time_share),
                thousands(r.op_runs),
                r.ungated_ops.join(" "),
                r.location
            );
        }

        let never = self.never_matched();
        let _ = writeln!(
            o,
            "\nrules never matched ({} of {} evaluated):",
            never.len(),
            self.rules_evaluated()
        );
        let ids: Vec<String> = never.iter().map(|r| r.id.to_string()).collect();
        for line in ids.chunks(12).take(top.div_ceil(2).max(1)) {
            let _ = writeln!(o, "  {}", line.join(" "));
        }
        if ids.len() > 12 * top.div_ceil(2).max(1) {
            let _ = writeln!(o, "  … (all in --format json)");
        }
        o
    }
}

/// The transformation names of `node`'s chain, first to last.
pub(crate) fn chain_names(p: &Program, node: NodeId) -> Vec<&'static str> {
    p.transforms.chain(node).iter().map(|t| t.name()).collect()
}

/// `[urlDecodeUni, lowercase]`; `[]` for the root.
pub(crate) fn chain_text(names: &[&str]) -> String {
    format!("[{}]", names.join(", "))
}

/// A target as SecLang writes it (`REQUEST_HEADERS:User-Agent`, `&ARGS`).
pub(crate) fn target_text(p: &Program, t: usize) -> String {
    waf_compiler::ir::dump::target_text(p, &p.targets[t])
}

/// `ARGS, REQUEST_COOKIES, … +3` (at most `max` names).
pub(crate) fn targets_text(t: &[EntryTarget], max: usize) -> String {
    let mut s: Vec<&str> = t.iter().take(max).map(|t| t.text.as_str()).collect();
    let more = t.len().saturating_sub(max);
    let extra = format!("+{more}");
    if more > 0 {
        s.push(&extra);
    }
    s.join(", ")
}

/// `file:line` compared by file, then line number.
fn file_order(a: &str, b: &str) -> std::cmp::Ordering {
    let split = |s: &str| match s.rsplit_once(':') {
        Some((f, l)) => (f.to_string(), l.parse::<u64>().unwrap_or(0)),
        None => (s.to_string(), 0),
    };
    split(a).cmp(&split(b))
}

pub(crate) fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// `12,345,678`.
pub(crate) fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `850 ns`, `12.3 µs`, `4.56 ms`, `1.23 s`.
pub(crate) fn fmt_ns(ns: u64) -> String {
    let f = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{} µs", sig3(f / 1e3))
    } else if ns < 1_000_000_000 {
        format!("{} ms", sig3(f / 1e6))
    } else {
        format!("{} s", sig3(f / 1e9))
    }
}

/// Three significant digits (at most one decimal above 100).
fn sig3(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// `84.2%` (`100%`, `0%` exactly at the ends).
pub(crate) fn fmt_pct(r: f64) -> String {
    let p = 100.0 * r;
    if p >= 99.95 && r >= 1.0 {
        "100%".into()
    } else if p == 0.0 {
        "0%".into()
    } else if p < 0.1 {
        "<0.1%".into()
    } else {
        format!("{p:.1}%")
    }
}

/// `512 B`, `12.3 KB`, `4.56 MB`.
pub(crate) fn fmt_bytes(n: u64) -> String {
    let f = n as f64;
    if n < 1_000 {
        format!("{n} B")
    } else if n < 1_000_000 {
        format!("{} KB", sig3(f / 1e3))
    } else if n < 1_000_000_000 {
        format!("{} MB", sig3(f / 1e6))
    } else {
        format!("{} GB", sig3(f / 1e9))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_for_people() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(fmt_ns(850), "850 ns");
        assert_eq!(fmt_ns(12_345), "12.3 µs");
        assert_eq!(fmt_ns(4_560_000), "4.56 ms");
        assert_eq!(fmt_ns(123_000_000_000), "123 s");
        assert_eq!(fmt_pct(0.842), "84.2%");
        assert_eq!(fmt_pct(1.0), "100%");
        assert_eq!(fmt_pct(0.0), "0%");
        assert_eq!(fmt_pct(0.9999), "100.0%");
        assert_eq!(fmt_bytes(2048), "2.05 KB");
        assert_eq!(chain_text(&[]), "[]");
        assert_eq!(
            chain_text(&["urlDecodeUni", "lowercase"]),
            "[urlDecodeUni, lowercase]"
        );
    }
}
