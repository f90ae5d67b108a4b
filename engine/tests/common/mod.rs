//! Shared by the integration tests that run the OWASP CRS: its PL1
//! configuration (`corpus/crs-config.sh CRS 1`) compiled.

#![allow(dead_code)]

use waf_engine::Ruleset;

pub use waf_test_support::{crs_config, crs_dir};

/// CRS PL1 compiled, or `None` when CRS is absent.
pub fn crs_pl1(test: &str) -> Option<Ruleset> {
    let crs = crs_dir(test)?;
    let text = crs_config(&crs, 1);
    let name = crs.join("waf-test.conf");
    match Ruleset::from_str(&name.to_string_lossy(), &text) {
        Ok(rs) => Some(rs),
        Err(e) => panic!("CRS does not compile:\n{e}"),
    }
}
