//! CRS v4 as a whole: it must compile cleanly and give the expected IR shape.
//! CRS is read from `../shared/crs` (or `$WAF_CRS_DIR`); never copied here.

use waf_compiler::{compile_files, Options};
use waf_test_support::{crs_dir, crs_files};

#[test]
fn crs_compiles_without_diagnostics() {
    let Some(dir) = crs_dir("crs_compiles_without_diagnostics") else {
        return;
    };
    let c = compile_files(&crs_files(&dir), &Options::default());
    assert!(
        c.diagnostics.is_empty(),
        "{}",
        c.diagnostics.render(c.sources())
    );
    let p = c.program.expect("program");
    p.validate().expect("IR invariants");

    let mut ids: Vec<u64> = p.rules.iter().map(|r| r.id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 630, "every CRS rule id");
    let stats = waf_compiler::stats::Stats::of(&p);
    assert_eq!(stats.rules, 630);
    assert_eq!(stats.chained_rules, 55);
    assert_eq!(stats.chain_links, 73);
    assert_eq!(stats.markers, 30);
    assert_eq!(stats.transform_chains, 42);
    assert_eq!(stats.transform_nodes, 56);
    assert_eq!(stats.operators_by_kind["rx"], 318, "every @rx compiled");
    assert_eq!(stats.regexes, 294, "distinct patterns");
    // The exclusions of REQUEST-999 reach their rules.
    let r = p.rule_by_id(942200).expect("942200");
    assert!(!r.links[0].exclusions.is_empty());
}
