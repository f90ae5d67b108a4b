//! Compiled artifacts: an artifact compiles to the program its source
//! compiles to, on a machine without the source, and a damaged one is
//! refused with a diagnostic, never half-used and never a panic.

use std::path::{Path, PathBuf};
use waf_compiler::artifact::{self, ArtifactError, Entry};
use waf_compiler::ir::dump;
use waf_compiler::rx::Strategy;
use waf_compiler::{compile_files, Options};
use waf_test_support::{crs_dir, crs_files};

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("waf-artifact-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// The IR as text, with every dense DFA built (strategies are then final).
fn ir_of(paths: &[PathBuf]) -> String {
    let c = compile_files(paths, &Options::default());
    let p = c.program.unwrap_or_else(|| {
        panic!(
            "{}",
            c.diagnostics
                .render(c.sources_when_failed.as_ref().expect("sources"))
        )
    });
    for rx in &p.regexes {
        if let Some(job) = rx.deferred_dfa() {
            job.build();
        }
    }
    dump::text(&p)
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p
}

#[test]
fn an_artifact_compiles_without_its_files_to_the_same_program() {
    let dir = temp_dir("same");
    std::fs::create_dir_all(dir.join("rules")).expect("rules dir");
    let main = write(
        &dir,
        "main.conf",
        "SecRuleEngine On\nInclude rules/*.conf\n",
    );
    write(
        &dir.join("rules"),
        "a.conf",
        "SecRule ARGS \"@rx (?i)union\\s+select\" \"id:1,phase:2,deny,capture,msg:'sqli %{TX.0}'\"\n\
         SecRule REQUEST_URI \"@rx ^/admin(/.*)?$\" \"id:2,phase:1,deny\"\n",
    );
    write(
        &dir.join("rules"),
        "b.conf",
        "SecRule REQUEST_HEADERS:User-Agent \"@pmFromFile agents.data\" \"id:3,phase:1,deny\"\n",
    );
    write(&dir.join("rules"), "agents.data", "# bots\nsqlmap\nnikto\n");
    let paths = vec![main.clone()];
    let source_ir = ir_of(&paths);

    let (bytes, compiled) = artifact::build(&Entry::Files(paths.clone()), &Options::default());
    assert!(compiled.program.is_some());
    let bytes = bytes.expect("an artifact");
    let wafc = dir.join("rules.wafc");
    std::fs::write(&wafc, &bytes).expect("write artifact");
    let moved = temp_dir("same-moved").join("rules.wafc");
    std::fs::rename(&wafc, &moved).expect("move");
    std::fs::remove_dir_all(&dir).expect("remove the sources");

    assert!(artifact::is_artifact(&moved));
    let from_artifact = ir_of(std::slice::from_ref(&moved));
    assert_eq!(from_artifact, source_ir);

    let c = compile_files(std::slice::from_ref(&moved), &Options::default());
    let p = c.program.expect("program");
    // Patterns with a dense DFA have it at once, and captures still work
    // (the meta regex is built when first needed).
    let rx = p
        .regexes
        .iter()
        .find(|r| r.pattern().contains("union"))
        .expect("the pattern");
    assert!(matches!(rx.strategy(), Strategy::FullDfa { .. }));
    assert!(rx.is_match(b"1 UNION  select x"));
    let mut slots = vec![None; 1];
    assert!(rx.captures(b"a union select b", &mut slots));
    assert_eq!(slots[0], Some(2..14));
    // Diagnostics and locations name the original files.
    let files: Vec<String> = p
        .sources
        .files()
        .map(|(_, f)| f.path.display().to_string())
        .collect();
    assert!(
        files.iter().any(|f| f.ends_with("rules/a.conf")),
        "{files:?}"
    );
    let _ = std::fs::remove_dir_all(moved.parent().expect("dir"));
}

#[test]
fn damaged_or_foreign_artifacts_are_refused_with_a_diagnostic() {
    let (bytes, _) = artifact::build(
        &Entry::Text {
            name: "t.conf".into(),
            text: "SecRule ARGS \"@rx abc+d\" \"id:1,phase:2,deny\"\n".into(),
        },
        &Options::default(),
    );
    let bytes = bytes.expect("an artifact");
    assert!(artifact::decode(&bytes).is_ok());

    let mut flipped = bytes.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 1;
    assert_eq!(
        artifact::decode(&flipped).unwrap_err(),
        ArtifactError::Checksum
    );
    assert!(matches!(
        artifact::decode(&bytes[..bytes.len() - 8]).unwrap_err(),
        ArtifactError::Length { .. }
    ));
    let mut format = bytes.clone();
    format[8] = 99;
    assert_eq!(
        artifact::decode(&format).unwrap_err(),
        ArtifactError::Format { found: 99 }
    );
    assert_eq!(
        artifact::decode(b"SecRuleEngine On").unwrap_err(),
        ArtifactError::NotAnArtifact
    );

    // Every truncation and every single-byte change is refused or decoded,
    // never a panic (the checksum catches nearly all; the decoder bounds
    // every field for the rest).
    for cut in 0..bytes.len().min(4096) {
        let _ = artifact::decode(&bytes[..cut]);
    }
    for i in (0..bytes.len()).step_by(7) {
        let mut b = bytes.clone();
        b[i] = b[i].wrapping_add(0x55);
        assert!(artifact::decode(&b).is_err(), "byte {i} changed");
    }

    let dir = temp_dir("damaged");
    let path = dir.join("bad.wafc");
    std::fs::write(&path, &flipped).expect("write");
    let c = compile_files(std::slice::from_ref(&path), &Options::default());
    assert!(c.program.is_none());
    let text = c.diagnostics.render(c.sources());
    assert!(text.contains("checksum mismatch"), "{text}");
    assert!(text.contains("waf compile -o"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn crs_from_its_artifact_is_crs_from_source() {
    let Some(dir) = crs_dir("crs_from_its_artifact_is_crs_from_source") else {
        return;
    };
    let paths = crs_files(&dir);
    let (bytes, _) = artifact::build(&Entry::Files(paths.clone()), &Options::default());
    let bytes = bytes.expect("CRS compiles");
    let out = temp_dir("crs");
    let wafc = out.join("crs.wafc");
    std::fs::write(&wafc, &bytes).expect("write");
    assert_eq!(ir_of(&[wafc]), ir_of(&paths));
    let _ = std::fs::remove_dir_all(&out);
}
