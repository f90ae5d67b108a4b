//! `waf bench`: throughput and latency of the engine on request corpora.
//!
//! Each worker thread keeps one [`Transaction`] and resets it per request, as
//! an embedding proxy would, so buffers are reused and the measured path is
//! the allocation-free one. A request's latency is the wall time from reset
//! to the end of phase 2 (what the peers' harnesses time: create, phases 1+2).
//! Warm-up passes are not timed. Per-rule times come from one extra,
//! instrumented pass (timing every rule costs two clock reads per rule, which
//! the timed passes must not pay).
//!
//! `--compare naive` runs a second transaction with memoization and the
//! prefilter off in the same process, on the same request right after the
//! fast one (alternating which goes first), and checks that both made the
//! same decision.

use crate::input::{EngineFlags, RuleInput};
use crate::progress::Progress;
use crate::{CliError, CmdResult};
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use waf_engine::{EvalOptions, EvalStats, RuleProfile, Ruleset, Transaction};
use waf_harness::corpus::{Corpus, CorpusRequest};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub input: RuleInput,
    /// Request corpora: JSONL (the peers' format), HAR files, or go-ftw YAML
    /// files/directories; repeatable.
    #[arg(long, value_name = "FILE", required = true, num_args = 1..)]
    pub corpus: Vec<PathBuf>,
    /// Timed passes over the corpus.
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = crate::input::positive)]
    pub passes: usize,
    /// Untimed passes first (fill caches, grow buffers).
    #[arg(long, default_value_t = 1, value_name = "K")]
    pub warmup: usize,
    /// Worker threads, each with its own transaction (requests are dealt
    /// round-robin).
    #[arg(long, default_value_t = 1, value_name = "T", value_parser = crate::input::positive)]
    pub threads: usize,
    /// Also run the naive mode (no memoization, no prefilter), interleaved
    /// request by request, and print the speed ratio.
    #[arg(long, value_enum, value_name = "MODE")]
    pub compare: Option<CompareMode>,
    /// Rules listed by time (0: none, and no instrumented pass).
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub top: usize,
    /// Print one JSON object on standard output instead of the report.
    #[arg(long)]
    pub json: bool,
    /// Show a progress bar on standard error even when it is not a terminal.
    #[arg(long)]
    pub progress: bool,
    /// Before each timed request, write this many KiB of a scratch buffer
    /// (a cache line at a time), so that the request starts with the CPU
    /// caches cold, as it does in a proxy, where the network stack, the
    /// HTTP code and other processes run between two requests of the
    /// engine; 0: off. Throughput then counts the requests' time only.
    #[arg(long, default_value_t = 0, value_name = "KIB")]
    pub evict_kib: usize,
    #[command(flatten)]
    pub engine: EngineFlags,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareMode {
    Naive,
}

/// What one mode measured.
#[derive(Default)]
struct Measured {
    /// Latency of each timed request, ns.
    latencies: Vec<u64>,
    /// Sum of the timed requests' latencies (the CPU the engine used).
    busy: Duration,
    stats: EvalStats,
    interrupted: usize,
}

pub fn run(args: Args) -> CmdResult {
    let corpus = crate::input::load_corpus(&args.corpus)?;
    let rss_start = Memory::now();
    let load_start = Instant::now();
    let rs = args.input.ruleset()?;
    let load = load_start.elapsed();
    // Timed passes measure the steady state: with the dense DFAs built.
    let build_start = Instant::now();
    rs.finish_building();
    let build = build_start.elapsed();
    let rss_loaded = Memory::now();
    let threads = args.threads;
    let passes = args.passes;
    let fast_opts = args.engine.options();
    let naive = args.compare.map(|_| EvalOptions::naive());
    let progress = Progress::new(
        "bench",
        ((passes + args.warmup) * corpus.requests.len()) as u64,
        args.progress,
    );

    let wall_start = Instant::now();
    let results: Vec<(Measured, Option<Measured>, usize)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (rs, corpus, progress) = (&rs, &corpus, &progress);
                let run = Run {
                    warmup: args.warmup,
                    passes,
                    fast_opts,
                    naive,
                    evict_bytes: args.evict_kib.saturating_mul(1024),
                };
                s.spawn(move || {
                    let mine: Vec<&CorpusRequest> =
                        corpus.requests.iter().skip(t).step_by(threads).collect();
                    worker(rs, &mine, run, progress)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let wall = wall_start.elapsed();
    progress.finish();
    let rss_run = Memory::now();

    let mut fast = Measured::default();
    let mut slow: Option<Measured> = naive.map(|_| Measured::default());
    let mut disagreements = 0;
    for (f, n, d) in results {
        merge(&mut fast, f);
        if let (Some(acc), Some(n)) = (slow.as_mut(), n) {
            merge(acc, n);
        }
        disagreements += d;
    }
    // Per-rule time: one instrumented pass on one thread, for the top list
    // (none with `--top 0`: a pass over the corpus with different
    // evaluation paths would blur instruction counts of the timed passes).
    let profile = if args.top > 0 {
        profile_pass(&rs, &corpus, fast_opts)
    } else {
        RuleProfile::default()
    };

    let report = Report {
        args: &args,
        rs: &rs,
        corpus: &corpus,
        load,
        build,
        memory: MemoryReport {
            ruleset_kib: rss_loaded.rss_kib.saturating_sub(rss_start.rss_kib),
            per_thread_kib: rss_run.rss_kib.saturating_sub(rss_loaded.rss_kib)
                / threads.max(1) as u64,
            peak_kib: rss_run.peak_kib,
        },
        wall,
        threads,
        passes,
        fast: &fast,
        naive: slow.as_ref(),
        disagreements,
        profile: &profile,
    };
    if args.json {
        println!("{}", report.json());
    } else {
        report.print();
    }
    if disagreements > 0 {
        return Err(CliError::findings(format!(
            "{disagreements} request(s) decided differently in naive mode"
        )));
    }
    Ok(())
}

/// One thread's run: warm-up, then timed passes (interleaved with the naive
/// mode when comparing). Returns the measurements and the number of requests
/// on which the two modes disagreed.
fn worker(
    rs: &Ruleset,
    reqs: &[&CorpusRequest],
    run: Run,
    progress: &Progress,
) -> (Measured, Option<Measured>, usize) {
    let Run {
        warmup,
        passes,
        fast_opts,
        naive,
        evict_bytes,
    } = run;
    let mut evictor = Evictor::new(evict_bytes);
    let mut tx = rs.transaction_with(fast_opts);
    let mut ntx = naive.map(|o| rs.transaction_with(o));
    for _ in 0..warmup {
        tx.clear_cache();
        for r in reqs {
            run_one(&mut tx, r);
            if let Some(n) = ntx.as_mut() {
                run_one(n, r);
            }
            progress.tick();
        }
    }
    tx.reset_stats();
    if let Some(n) = ntx.as_mut() {
        n.reset_stats();
    }
    let mut fast = Measured {
        latencies: Vec::with_capacity(reqs.len() * passes),
        ..Measured::default()
    };
    let mut slow = ntx.as_ref().map(|_| Measured {
        latencies: Vec::with_capacity(reqs.len() * passes),
        ..Measured::default()
    });
    let mut disagreements = 0;
    for pass in 0..passes {
        // Only repetition within the corpus may count, never across passes.
        tx.clear_cache();
        if let Some(n) = ntx.as_mut() {
            n.clear_cache();
        }
        for (i, r) in reqs.iter().enumerate() {
            let naive_first = (pass + i) % 2 == 1;
            if let (true, Some(n), Some(m)) = (naive_first, ntx.as_mut(), slow.as_mut()) {
                evictor.run();
                time_one(n, r, m);
            }
            evictor.run();
            time_one(&mut tx, r, &mut fast);
            if let (false, Some(n), Some(m)) = (naive_first, ntx.as_mut(), slow.as_mut()) {
                evictor.run();
                time_one(n, r, m);
            }
            if let Some(n) = ntx.as_ref() {
                if pass == 0 && decision(&tx) != decision(n) {
                    disagreements += 1;
                }
            }
            progress.tick();
        }
    }
    fast.stats = tx.stats();
    if let (Some(m), Some(n)) = (slow.as_mut(), ntx.as_ref()) {
        m.stats = n.stats();
    }
    (fast, slow, disagreements)
}

/// What a worker runs (see [`Args`]).
#[derive(Clone, Copy)]
struct Run {
    warmup: usize,
    passes: usize,
    fast_opts: EvalOptions,
    naive: Option<EvalOptions>,
    evict_bytes: usize,
}

/// `--evict-kib`: a scratch buffer written through between requests.
struct Evictor {
    buf: Vec<u8>,
}

impl Evictor {
    fn new(bytes: usize) -> Evictor {
        Evictor {
            buf: vec![0; bytes],
        }
    }

    /// Writes a byte of every cache line of the buffer: each line is read
    /// for ownership, which evicts what the engine left in the caches.
    fn run(&mut self) {
        for b in self.buf.iter_mut().step_by(64) {
            *b = b.wrapping_add(1);
        }
        std::hint::black_box(&mut self.buf);
    }
}

pub(crate) fn run_one(tx: &mut Transaction<'_>, r: &CorpusRequest) {
    tx.reset();
    r.feed(tx);
}

fn time_one(tx: &mut Transaction<'_>, r: &CorpusRequest, m: &mut Measured) {
    let t = Instant::now();
    run_one(tx, r);
    let d = t.elapsed();
    m.busy += d;
    m.latencies.push(d.as_nanos() as u64);
    m.interrupted += usize::from(tx.intervention().is_some());
}

/// What a request's outcome is compared on: the interruption and the ids of
/// every matched rule, in order.
pub(crate) fn decision(tx: &Transaction<'_>) -> (Option<(u16, u64)>, Vec<u64>) {
    (
        tx.intervention().map(|i| (i.status, i.rule_id)),
        tx.matched_rules().map(|m| m.id).collect(),
    )
}

fn merge(acc: &mut Measured, m: Measured) {
    acc.latencies.extend(m.latencies);
    acc.busy += m.busy;
    acc.stats.add(&m.stats);
    acc.interrupted += m.interrupted;
}

fn profile_pass(rs: &Ruleset, corpus: &Corpus, opts: EvalOptions) -> RuleProfile {
    let mut tx = rs.transaction_with(EvalOptions {
        profile: true,
        ..opts
    });
    for r in &corpus.requests {
        run_one(&mut tx, r);
    }
    tx.rule_profile().clone()
}

/// Percentile `p` (0..=100) of sorted values, nearest-rank.
fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

struct Summary {
    requests: usize,
    throughput: f64,
    p50: f64,
    p99: f64,
    p999: f64,
    max: f64,
    mean: f64,
}

/// `by_busy`: throughput from the time spent on requests, not the wall
/// time (two modes interleaved, or `--evict-kib` writing between requests).
fn summarize(m: &Measured, wall: Duration, threads: usize, by_busy: bool) -> Summary {
    let mut l = m.latencies.clone();
    l.sort_unstable();
    let us = |ns: u64| ns as f64 / 1000.0;
    let n = l.len();
    // With one mode, wall time is what the threads spent on requests; when
    // two modes are interleaved, each mode's share is its own busy time.
    let elapsed = if by_busy {
        m.busy.as_secs_f64() / threads as f64
    } else {
        wall.as_secs_f64()
    };
    Summary {
        requests: n,
        throughput: if elapsed > 0.0 {
            n as f64 / elapsed
        } else {
            0.0
        },
        p50: us(percentile(&l, 50.0)),
        p99: us(percentile(&l, 99.0)),
        p999: us(percentile(&l, 99.9)),
        max: us(l.last().copied().unwrap_or(0)),
        mean: if n == 0 {
            0.0
        } else {
            us(l.iter().sum::<u64>()) / n as f64
        },
    }
}

struct Report<'a> {
    args: &'a Args,
    rs: &'a Ruleset,
    corpus: &'a Corpus,
    load: Duration,
    build: Duration,
    memory: MemoryReport,
    wall: Duration,
    threads: usize,
    passes: usize,
    fast: &'a Measured,
    naive: Option<&'a Measured>,
    disagreements: usize,
    profile: &'a RuleProfile,
}

impl Report<'_> {
    fn fast_opts(&self) -> EvalOptions {
        self.args.engine.options()
    }

    fn top_rules(&self) -> Vec<(u64, String, f64, f64, u64, u64)> {
        let p = self.profile;
        let total: u64 = p.nanos.iter().sum();
        let reqs = self.corpus.requests.len().max(1) as f64;
        let mut idx: Vec<usize> = (0..p.nanos.len()).filter(|&i| p.evals[i] > 0).collect();
        idx.sort_by(|&a, &b| p.nanos[b].cmp(&p.nanos[a]));
        idx.truncate(self.args.top);
        let prog = self.rs.program();
        idx.into_iter()
            .map(|i| {
                let r = &prog.rules[i];
                (
                    r.id,
                    r.location.clone(),
                    p.nanos[i] as f64 / 1000.0 / reqs,
                    if total == 0 {
                        0.0
                    } else {
                        100.0 * p.nanos[i] as f64 / total as f64
                    },
                    p.op_runs[i],
                    p.skips[i],
                )
            })
            .collect()
    }

    fn machine() -> String {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split(':').nth(1))
                    .map(|m| m.trim().to_string())
            })
            .unwrap_or_else(|| "unknown CPU".into());
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        format!("{cpu}, {cores} core(s)")
    }

    fn json(&self) -> serde_json::Value {
        let by_busy = self.naive.is_some() || self.args.evict_kib > 0;
        let f = summarize(self.fast, self.wall, self.threads, by_busy);
        let n_req = f.requests.max(1) as f64;
        let st = &self.fast.stats;
        let mut v = json!({
            "requests": self.corpus.requests.len(),
            "timed_requests": f.requests,
            "passes": self.passes,
            "warmup": self.args.warmup,
            "threads": self.threads,
            "evict_kib": self.args.evict_kib,
            "machine": Self::machine(),
            "corpus_files": self.corpus.files,
            "bytes_per_request": self.corpus.requests.iter().map(CorpusRequest::size).sum::<usize>() as f64
                / self.corpus.requests.len().max(1) as f64,
            "skipped": self.corpus.skipped,
            "rule_load_ms": self.load.as_secs_f64() * 1000.0,
            "background_build_ms": self.build.as_secs_f64() * 1000.0,
            "rss_mib": {
                "ruleset": mib(self.memory.ruleset_kib),
                "per_thread": mib(self.memory.per_thread_kib),
                "peak": mib(self.memory.peak_kib),
            },
            "rules": self.rs.program().rules.len(),
            "throughput_rps": f.throughput,
            "latency_us": {"p50": f.p50, "p99": f.p99, "p99.9": f.p999, "max": f.max, "mean": f.mean},
            "interrupted": self.fast.interrupted,
            "memo_hit_ratio": st.memo_hit_ratio(),
            "xcache_hit_ratio": if self.fast_opts().xcache { json!(st.xcache_hit_ratio()) } else { serde_json::Value::Null },
            "xcache_op_hits_per_request": st.xcache_op_hits as f64 / n_req,
            "xcache_resets": st.xcache_resets,
            "prefilter_skip_rate": st.prefilter_skip_rate(),
            "regex_evals_per_request": st.regex_evals as f64 / n_req,
            "op_runs_per_request": st.op_runs as f64 / n_req,
            "scans_per_request": st.scans as f64 / n_req,
            "rules_evaluated_per_request": st.rules_evaluated as f64 / n_req,
            "rules_folded_per_request": st.rules_folded as f64 / n_req,
            "coarse_skips_per_request": st.coarse_skips as f64 / n_req,
            "rules_folded_at_load": self.rs.folded_rules(),
            "rules_replayed_per_request": st.rules_replayed as f64 / n_req,
            "rules_replayable_at_load": self.rs.replayed_rules(),
            "options": {"memo": self.fast_opts().memo, "prefilter": self.fast_opts().prefilter, "xcache": self.fast_opts().xcache, "fold": self.fast_opts().fold},
            "top_rules": self.top_rules().into_iter().map(|(id, loc, us, share, runs, skips)| json!({
                "id": id, "location": loc, "us_per_request": us, "time_share": share / 100.0,
                "op_runs": runs, "prefilter_skips": skips,
            })).collect::<Vec<_>>(),
        });
        if let Some(naive) = self.naive {
            let n = summarize(naive, self.wall, self.threads, true);
            v["naive"] = json!({
                "throughput_rps": n.throughput,
                "latency_us": {"p50": n.p50, "p99": n.p99, "p99.9": n.p999, "max": n.max, "mean": n.mean},
                "regex_evals_per_request": naive.stats.regex_evals as f64 / n.requests.max(1) as f64,
            });
            v["speedup_p50"] = json!(ratio(n.p50, f.p50));
            v["speedup_throughput"] = json!(ratio(f.throughput, n.throughput));
            v["disagreements"] = json!(self.disagreements);
        }
        v
    }

    fn print(&self) {
        let by_busy = self.naive.is_some() || self.args.evict_kib > 0;
        let f = summarize(self.fast, self.wall, self.threads, by_busy);
        let st = &self.fast.stats;
        let n_req = f.requests.max(1) as f64;
        let mut o = std::io::stdout().lock();
        let _ = writeln!(
            o,
            "waf bench: {} requests from {} file(s) ({} skipped), {} timed pass(es) after {} warm-up, {} thread(s)",
            self.corpus.requests.len(),
            self.corpus.files,
            self.corpus.skipped,
            self.passes,
            self.args.warmup,
            self.threads
        );
        if self.args.evict_kib > 0 {
            let _ = writeln!(
                o,
                "caches evicted before each timed request ({} KiB written); throughput from the requests' time",
                self.args.evict_kib
            );
        }
        let _ = writeln!(o, "machine: {}", Self::machine());
        let _ = writeln!(
            o,
            "rule load: {:.0} ms ({} rules), then {:.0} ms to finish the dense DFAs",
            self.load.as_secs_f64() * 1000.0,
            self.rs.program().rules.len(),
            self.build.as_secs_f64() * 1000.0,
        );
        let _ = writeln!(
            o,
            "memory (RSS): ruleset {:.1} MiB, per worker thread {:.1} MiB, peak {:.1} MiB",
            mib(self.memory.ruleset_kib),
            mib(self.memory.per_thread_kib),
            mib(self.memory.peak_kib),
        );
        let _ = writeln!(
            o,
            "throughput: {:.0} requests/s{}",
            f.throughput,
            if self.naive.is_some() {
                " (busy time; naive interleaved)"
            } else if by_busy {
                " (busy time)"
            } else {
                ""
            }
        );
        let _ = writeln!(
            o,
            "latency µs: p50 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}  mean {:.1}",
            f.p50, f.p99, f.p999, f.max, f.mean
        );
        let _ = writeln!(
            o,
            "interrupted: {} of {}",
            self.fast.interrupted, f.requests
        );
        let xcache = if self.fast_opts().xcache {
            let resets = match st.xcache_resets {
                0 => String::new(),
                n => format!(", full {n} time(s): --value-cache is too small for the corpus"),
            };
            format!(
                "{:.1}% ({:.1} operator results/request{resets})",
                100.0 * st.xcache_hit_ratio(),
                st.xcache_op_hits as f64 / n_req
            )
        } else {
            "off".into()
        };
        let _ = writeln!(
            o,
            "memo hit ratio: {:.1}%   xcache hit ratio: {xcache}   prefilter skip rate: {:.1}%",
            100.0 * st.memo_hit_ratio(),
            100.0 * st.prefilter_skip_rate()
        );
        let _ = writeln!(
            o,
            "per request: {:.1} rules evaluated ({:.1} stepped over and {:.1} replayed, decided at load), {:.1} regex evaluations, {:.1} operator runs, {:.1} prefilter scans",
            st.rules_evaluated as f64 / n_req,
            st.rules_folded as f64 / n_req,
            st.rules_replayed as f64 / n_req,
            st.regex_evals as f64 / n_req,
            st.op_runs as f64 / n_req,
            st.scans as f64 / n_req
        );
        if let Some(naive) = self.naive {
            let n = summarize(naive, self.wall, self.threads, true);
            let _ = writeln!(
                o,
                "naive: throughput {:.0} requests/s, p50 {:.1} µs, p99 {:.1} µs, {:.1} regex evaluations/request",
                n.throughput,
                n.p50,
                n.p99,
                naive.stats.regex_evals as f64 / n.requests.max(1) as f64
            );
            let _ = writeln!(
                o,
                "speed-up over naive: {:.1}x (p50), {:.1}x (throughput); decisions differ on {} request(s)",
                ratio(n.p50, f.p50),
                ratio(f.throughput, n.throughput),
                self.disagreements
            );
        }
        let top = self.top_rules();
        if !top.is_empty() {
            let _ = writeln!(o, "top {} rules by time (instrumented pass):", top.len());
            let _ = writeln!(
                o,
                "  {:>8}  {:>9}  {:>6}  {:>9}  {:>9}  location",
                "id", "µs/req", "share", "op runs", "skips"
            );
            for (id, loc, us, share, runs, skips) in top {
                let _ = writeln!(
                    o,
                    "  {id:>8}  {us:>9.3}  {share:>5.1}%  {runs:>9}  {skips:>9}  {loc}"
                );
            }
        }
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

/// The process's resident memory, from `/proc/self/status` (zeros where
/// that file does not exist).
#[derive(Clone, Copy, Default)]
struct Memory {
    rss_kib: u64,
    peak_kib: u64,
}

impl Memory {
    fn now() -> Memory {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or(0)
        };
        Memory {
            rss_kib: field("VmRSS:"),
            peak_kib: field("VmHWM:"),
        }
    }
}

/// Memory figures of a run: what loading the ruleset added, what each
/// worker's transaction added (its buffers and caches, after the passes),
/// and the peak.
#[derive(Clone, Copy)]
struct MemoryReport {
    ruleset_kib: u64,
    per_thread_kib: u64,
    peak_kib: u64,
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}
