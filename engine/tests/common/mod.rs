//! Shared by the integration tests that run the OWASP CRS: locating it and
//! building its PL1 configuration as `corpus/crs-config.sh CRS 1` prints it.

#![allow(dead_code)]

use std::path::Path;
use waf_engine::Ruleset;

pub use waf_test_support::crs_dir;

/// The PL1 configuration: the output of `corpus/crs-config.sh CRS 1` when the
/// script runs, else an equivalent minimal text.
pub fn crs_config(crs: &Path) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus/crs-config.sh");
    if script.is_file() {
        if let Ok(o) = std::process::Command::new("bash")
            .arg(&script)
            .arg(crs)
            .arg("1")
            .output()
        {
            if o.status.success() && !o.stdout.is_empty() {
                return String::from_utf8_lossy(&o.stdout).into_owned();
            }
        }
    }
    let c = crs.display();
    format!(
        "SecRuleEngine On\n\
         SecRequestBodyAccess On\n\
         SecRule REQUEST_HEADERS:Content-Type \"^(?:application(?:/soap\\+|/)|text/)xml\" \"id:200000,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=XML\"\n\
         SecRule REQUEST_HEADERS:Content-Type \"^application/json\" \"id:200001,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=JSON\"\n\
         Include {c}/crs-setup.conf.example\n\
         SecAction \"id:900000,phase:1,pass,t:none,nolog,setvar:tx.blocking_paranoia_level=1\"\n\
         SecAction \"id:900001,phase:1,pass,t:none,nolog,setvar:tx.detection_paranoia_level=1\"\n\
         Include {c}/rules/*.conf\n"
    )
}

/// CRS PL1 compiled, or `None` when CRS is absent.
pub fn crs_pl1(test: &str) -> Option<Ruleset> {
    let crs = crs_dir(test)?;
    let text = crs_config(&crs);
    let name = crs.join("waf-test.conf");
    match Ruleset::from_str(&name.to_string_lossy(), &text) {
        Ok(rs) => Some(rs),
        Err(e) => panic!("CRS does not compile:\n{e}"),
    }
}
