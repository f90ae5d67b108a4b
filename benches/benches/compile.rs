//! Load-time cost of CRS: parsing alone (pest grammar → AST) against the
//! whole compilation (checks, IR, regex compilation), so the parser's share
//! of load time is measured rather than assumed.

use criterion::{criterion_group, criterion_main, Criterion};
use waf_compiler::diag::Diagnostics;
use waf_compiler::{compile_files, load, Options};

fn bench(c: &mut Criterion) {
    let Some(files) =
        waf_test_support::crs_dir("bench crs").map(|d| waf_test_support::crs_files(&d))
    else {
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
