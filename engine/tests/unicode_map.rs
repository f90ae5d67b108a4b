//! `SecUnicodeMapFile FILE CODEPAGE` and `t:urlDecodeUni`, as libmodsecurity
//! 3.0.9 does them (checked with corpus/modsec-diff on the unicode.mapping
//! ModSecurity ships, code pages 20127, 1252 and 0: `%u00e9 %u2215 %uff21
//! %u3002 %u0041 %u0131 %u20ac %u00a0` decode to the same bytes): a code
//! point the code page's section maps becomes that byte; the others keep
//! their low byte (full-width ASCII folded); the four RFC 3490 dots are `.`
//! whenever a map is loaded.

use waf_engine::Ruleset;

/// A mapping file in ModSecurity's format: code page sections, each a
/// header line and a line of `CODE:BYTE` pairs in hex.
const MAPPING: &str = "(MAC - Roman)\n\n\n\
1250  (ANSI - Central Europe)\n00e9:78 0131:78\n\n\
20127  (US-ASCII)\n00e9:65 0131:69 2215:2f\n\n";

/// What rule 1 saw of `a` after `t:urlDecodeUni`, in hex.
fn decoded(config: &str, value: &str) -> String {
    let rs = Ruleset::from_str("unicode.conf", config).unwrap_or_else(|e| panic!("{e}"));
    let mut tx = rs.transaction();
    tx.process_connection("10.0.0.1", 40000, "127.0.0.1", 80);
    tx.process_uri(format!("/?a={value}").as_bytes(), b"GET", b"HTTP/1.1");
    tx.add_request_header(b"Host", b"example.com");
    tx.process_request_headers();
    tx.matched_rules()
        .find(|m| m.id == 1)
        .map(|m| m.logdata.clone())
        .unwrap_or_default()
}

fn config(map: Option<(&std::path::Path, &str)>) -> String {
    let directive = map.map_or(String::new(), |(p, cp)| {
        format!("SecUnicodeMapFile {} {cp}\n", p.display())
    });
    format!(
        "SecRuleEngine On\n{directive}SecRule ARGS:a \"@rx .\" \"id:1,phase:1,pass,log,t:urlDecodeUni,t:hexEncode,logdata:%{{MATCHED_VAR}}\"\n"
    )
}

#[test]
fn the_code_page_section_maps_code_points() {
    let dir = std::env::temp_dir().join(format!("waf-unicode-map-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("unicode.mapping");
    std::fs::write(&file, MAPPING).expect("write the map");
    let value = "%25u00e9%25u0131%25u2215%25uff21%25u3002%25u20ac";
    // No map: the low byte, full-width ASCII folded, no dot mapping.
    assert_eq!(decoded(&config(None), value), "e931154102ac");
    // 20127: its pairs, then the low byte; U+3002 is a dot.
    assert_eq!(
        decoded(&config(Some((&file, "20127"))), value),
        "65692f412eac"
    );
    // Another section, another table.
    assert_eq!(
        decoded(&config(Some((&file, "1250"))), value),
        "787815412eac"
    );
    // A code page the file has no section for: only the dots.
    assert_eq!(
        decoded(&config(Some((&file, "437"))), value),
        "e93115412eac"
    );
    // Code page 0: v3 loads the file and never consults it.
    assert_eq!(decoded(&config(Some((&file, "0"))), value), "e931154102ac");
    let _ = std::fs::remove_dir_all(&dir);
}
