//! Load-time cost of CRS: parsing alone (pest grammar → AST) against the
//! whole compilation (checks, IR, regex compilation), so the parser's share
//! of load time is measured rather than assumed.

use criterion::{criterion_group, criterion_main, Criterion};
use std::path::PathBuf;
use waf_compiler::diag::Diagnostics;
use waf_compiler::{compile_files, load, Options};

fn crs_files() -> Option<Vec<PathBuf>> {
    let dir = std::env::var_os("WAF_CRS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/crs"));
    let mut rules: Vec<PathBuf> = std::fs::read_dir(dir.join("rules"))
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "conf"))
        .collect();
    rules.sort();
    let mut files = vec![dir.join("crs-setup.conf.example")];
    files.extend(rules);
    Some(files)
}

fn bench(c: &mut Criterion) {
    let Some(files) = crs_files() else {
        eprintln!("CRS not found (set WAF_CRS_DIR): nothing to measure");
        return;
    };
    let mut g = c.benchmark_group("crs");
    g.sample_size(10);
    g.bench_function("parse", |b| {
        b.iter(|| {
            let mut d = Diagnostics::new();
            load::load_files(&files, &mut d)
        })
    });
    g.bench_function("compile", |b| {
        b.iter(|| compile_files(&files, &Options::default()))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
