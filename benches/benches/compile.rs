//! Load-time cost of CRS: parsing alone (pest grammar → AST), the whole
//! compilation with every dense DFA built up front (what `waf lint` and
//! `waf compile` do), and loading a ruleset as a server does: ready to
//! evaluate (dense DFAs deferred to a background thread), and with that
//! background work finished too; the same two from a compiled artifact
//! (`waf compile -o`), and writing the artifact.

use criterion::{criterion_group, criterion_main, Criterion};
use waf_compiler::artifact::{self, Entry};
use waf_compiler::diag::Diagnostics;
use waf_compiler::{compile_files, load, Options};
use waf_engine::Ruleset;

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
    let entry = Entry::Files(files.clone());
    g.bench_function("artifact/write", |b| {
        b.iter(|| {
            artifact::build(&entry, &Options::default())
                .0
                .map(|a| a.len())
        })
    });
    let Some(bytes) = artifact::build(&entry, &Options::default()).0 else {
        panic!("CRS does not compile");
    };
    let wafc = std::env::temp_dir().join(format!("waf-bench-{}.wafc", std::process::id()));
    if let Err(e) = std::fs::write(&wafc, bytes) {
        panic!("cannot write {}: {e}", wafc.display());
    }
    let artifact_files = vec![wafc.clone()];
    for (name, paths) in [("load", &files), ("load/artifact", &artifact_files)] {
        g.bench_function(format!("{name}/ready"), |b| {
            b.iter(|| Ruleset::from_files(paths).map(|rs| rs.pending_builds()))
        });
        g.bench_function(format!("{name}/finished"), |b| {
            b.iter(|| {
                Ruleset::from_files(paths).map(|rs| {
                    rs.finish_building();
                    rs.pending_builds()
                })
            })
        });
    }
    g.finish();
    let _ = std::fs::remove_file(&wafc);
}

criterion_group!(benches, bench);
criterion_main!(benches);
