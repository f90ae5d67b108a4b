//! Agreement of our `@detectSQLi`/`@detectXSS` ([`Libinjection`]) with the
//! `libinjectionrs` crate ([`LibinjectionRs`]) and, when available, with the
//! C libinjection itself.
//!
//! **Reference.** The C libinjection bundled with ModSecurity v3.0.9
//! (`others/libinjection`: the libinjection/libinjection tree after the 3.10.0
//! fixes, whose version string still says 3.9.2; 9,352 word-table entries,
//! 8,367 fingerprints). That is what the engine we are compatible with runs,
//! so its verdicts, fingerprints and quirks are ours. `libinjectionrs` 0.1.1
//! ports a later upstream and has bugs of its own; every difference between
//! it and us falls in one of these classes (each found difference is shrunk
//! to a minimal input and must match one, or the test fails):
//!
//! | class | inputs | C / ours | libinjectionrs |
//! |---|---|---|---|
//! | `sqli-into-outfile` | `1 into outfile x` | SQLi (`1kn`): the "INTO OUTFILE/DUMPFILE" whitelist exception is case-insensitive | not SQLi: compares `INTO` case-sensitively |
//! | `sqli-sp-password` | `a--sp_password\xc9`, `x--SP_PASSWORD` | the `sp_password` search is case-sensitive on raw bytes | lower-cases, and finds nothing in non-UTF-8 input |
//! | `sqli-variable-function` | `@user_id(1)`, `@current_user(1)` | a variable's text is its name, so these are functions (`f(1)`) | keeps the `@` in the text: no function, not SQLi |
//! | `sqli-bareword-phrase` | `IS DISTINCT/*`, `1 LOCK IN SHARE MODE UNION SELECT ...` | word pairs whose phrase is a type-`n` table entry (`IS DISTINCT`, `LOCK IN`, `AT TIME`...) merge into one word (`nc`) | cannot tell "type `n`" from "not in the table", so does not merge |
//! | `sqli-nul` | `$\0--`, `0x\0--`, ``@\0{` `` | C's `strspn`-style scans accept NUL as a digit/letter, its `strcspn` ones stop at it | other tokens, fingerprints, verdicts |
//! | `xss-on-attribute` | `<x onabc=1>`, `" onfoo=1` | any attribute name of 5+ bytes starting `on` is an event handler | only names in its list of known events (libinjection 4.x) |
//! | `xss-nul` | `<a\0href=javascript:x>`, `<x on\0load=1>` | NUL is HTML white space (`h5_is_white` uses `strchr`) | NUL is part of names |
//!
//! Kept from C on purpose (libinjectionrs agrees): byte 0xFF after an `=` or
//! inside a tag ends HTML tokenizing (`h5_skip_white` returns it as -1, its
//! EOF), so `<img src=x onerror=\xffalert(1)>` is not XSS.
//!
//! **Against C.** Set `WAF_LIBINJECTION_ORACLE` to that C code built with the
//! small driver `tests/c/libinjection_oracle.c` (a subprocess answering over
//! pipes: the engine forbids `unsafe`, so C is not loaded in-process) and
//! every test here also requires identical results from it:
//!
//! ```sh
//! L=modsecurity-v3.0.9/others/libinjection/src
//! gcc -O2 -I$L -o /tmp/libinjection-oracle engine/tests/c/libinjection_oracle.c \
//!     $L/libinjection_sqli.c $L/libinjection_xss.c $L/libinjection_html5.c
//! WAF_LIBINJECTION_ORACLE=/tmp/libinjection-oracle cargo test --release -p waf-engine --test injection_agreement -- --include-ignored
//! ```
//!
//! Run with 1,000,000 generated inputs, 0 differences from C (SQLi verdict +
//! fingerprint, XSS verdict); see `docs/conformance.md` for the figures.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use waf_engine::{Injection, Libinjection};

/// The `libinjectionrs` crate as an [`Injection`]: the reference the engine's
/// own implementation is compared with.
#[derive(Clone, Copy, Debug, Default)]
struct LibinjectionRs;

impl Injection for LibinjectionRs {
    fn sqli(&self, input: &[u8], fingerprint: &mut Vec<u8>) -> bool {
        fingerprint.clear();
        let r = libinjectionrs::detect_sqli(input);
        if !r.is_injection() {
            return false;
        }
        if let Some(fp) = &r.fingerprint {
            // `as_bytes` is the whole NUL-padded array; `as_str` stops at NUL
            fingerprint.extend_from_slice(fp.as_str().as_bytes());
        }
        true
    }

    fn xss(&self, input: &[u8]) -> bool {
        libinjectionrs::detect_xss(input).is_injection()
    }
}
use waf_test_support::XorShift;

// ---------------------------------------------------------------------------
// Verdicts

#[derive(Clone, Debug, PartialEq, Eq)]
struct Verdict {
    sqli: bool,
    fingerprint: Vec<u8>,
    xss: bool,
}

fn verdict(d: &dyn Injection, input: &[u8]) -> Verdict {
    let mut fingerprint = Vec::with_capacity(8);
    let sqli = d.sqli(input, &mut fingerprint);
    Verdict {
        sqli,
        fingerprint,
        xss: d.xss(input),
    }
}

fn sqli_of(d: &dyn Injection, input: &[u8]) -> (bool, Vec<u8>) {
    let mut fp = Vec::with_capacity(8);
    (d.sqli(input, &mut fp), fp)
}

/// The C library, run as the subprocess `$WAF_LIBINJECTION_ORACLE` (built from
/// `tests/c/libinjection_oracle.c`): the engine forbids `unsafe`, so C code
/// is not loaded into the test process.
mod c {
    use std::io::{BufReader, BufWriter, Read, Write};
    use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
    use std::sync::Mutex;

    #[derive(Debug)]
    struct Pipes {
        child: Child,
        input: BufWriter<ChildStdin>,
        output: BufReader<ChildStdout>,
    }

    #[derive(Debug)]
    pub struct CLib {
        pipes: Mutex<Pipes>,
    }

    impl CLib {
        pub fn load() -> Option<CLib> {
            let path = std::env::var_os("WAF_LIBINJECTION_ORACLE")?;
            let mut child = Command::new(&path)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot run $WAF_LIBINJECTION_ORACLE ({path:?}): {e}"));
            let input = BufWriter::new(child.stdin.take().expect("piped stdin"));
            let output = BufReader::new(child.stdout.take().expect("piped stdout"));
            Some(CLib {
                pipes: Mutex::new(Pipes {
                    child,
                    input,
                    output,
                }),
            })
        }

        /// Sends one request and reads `reply.len()` bytes of answer.
        fn ask(&self, kind: u8, input: &[u8], reply: &mut [u8]) {
            let mut p = self.pipes.lock().unwrap_or_else(|e| e.into_inner());
            let len = u32::try_from(input.len()).expect("input under 4 GiB");
            p.input.write_all(&[kind]).expect("oracle stdin");
            p.input.write_all(&len.to_le_bytes()).expect("oracle stdin");
            p.input.write_all(input).expect("oracle stdin");
            p.input.flush().expect("oracle stdin");
            p.output.read_exact(reply).expect("oracle answered");
        }
    }

    impl Drop for CLib {
        fn drop(&mut self) {
            let p = self.pipes.get_mut().unwrap_or_else(|e| e.into_inner());
            let _ = p.input.flush();
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
    }

    impl waf_engine::Injection for CLib {
        fn sqli(&self, input: &[u8], fingerprint: &mut Vec<u8>) -> bool {
            fingerprint.clear();
            let mut reply = [0u8; 9];
            self.ask(b's', input, &mut reply);
            if reply[0] == 0 {
                return false;
            }
            let fp = &reply[1..];
            let n = fp.iter().position(|&b| b == 0).unwrap_or(fp.len());
            fingerprint.extend_from_slice(&fp[..n]);
            true
        }

        fn xss(&self, input: &[u8]) -> bool {
            let mut reply = [0u8; 1];
            self.ask(b'x', input, &mut reply);
            reply[0] != 0
        }
    }
}

// ---------------------------------------------------------------------------
// Differences: shrink, classify, count

/// Greedy delta debugging: the smallest input (by removing chunks, then
/// bytes) on which `differs` still holds.
fn shrink(mut input: Vec<u8>, differs: &dyn Fn(&[u8]) -> bool) -> Vec<u8> {
    let mut chunk = input.len().max(1);
    loop {
        let mut i = 0;
        let mut changed = false;
        while i < input.len() {
            let mut cand = input.clone();
            cand.drain(i..(i + chunk).min(input.len()));
            if differs(&cand) {
                input = cand;
                changed = true;
            } else {
                i += chunk;
            }
        }
        if !changed {
            if chunk == 1 {
                return input;
            }
            chunk /= 2;
        }
    }
}

fn contains_ci(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

/// The documented class of a minimal SQLi difference (see the table above).
fn sqli_class(min: &[u8], ours: bool, rs: bool) -> Option<&'static str> {
    if min.contains(&0) {
        Some("sqli-nul")
    } else if ours
        && !rs
        && (contains_ci(min, b"into outfile") || contains_ci(min, b"into dumpfile"))
    {
        Some("sqli-into-outfile")
    } else if [
        &b"@USER"[..],
        b"@DATABASE",
        b"@PASSWORD",
        b"@CURRENT_",
        b"@LOCALTIME",
    ]
    .iter()
    .any(|w| contains_ci(min, w))
        && min.contains(&b'(')
    {
        Some("sqli-variable-function")
    } else if libinjectionrs::sqli::sqli_data::SQL_KEYWORDS
        .iter()
        .filter(|k| k.token_type == b'n' && k.word.contains(' '))
        .any(|k| k.word.split(' ').all(|w| contains_ci(min, w.as_bytes())))
    {
        Some("sqli-bareword-phrase")
    } else if contains_ci(min, b"sp_password")
        && (std::str::from_utf8(min).is_err() || !min.windows(11).any(|w| w == b"sp_password"))
    {
        Some("sqli-sp-password")
    } else {
        None
    }
}

/// The documented class of a minimal XSS difference.
fn xss_class(min: &[u8], ours: bool, rs: bool) -> Option<&'static str> {
    if min.contains(&0) {
        Some("xss-nul")
    } else if ours && !rs && contains_ci(min, b"on") {
        Some("xss-on-attribute")
    } else {
        None
    }
}

#[derive(Default)]
struct Report {
    inputs: usize,
    sqli_hits: usize,
    xss_hits: usize,
    /// Differences from libinjectionrs, by class.
    classes: BTreeMap<&'static str, usize>,
    /// Example minimal input per class.
    examples: BTreeMap<&'static str, Vec<u8>>,
    unexplained: Vec<String>,
    /// Inputs checked against C, and differences from it.
    c_inputs: usize,
    c_differences: Vec<String>,
}

impl Report {
    fn check(&mut self, input: &[u8], clib: Option<&c::CLib>) {
        self.inputs += 1;
        let ours = verdict(&Libinjection, input);
        let rs = verdict(&LibinjectionRs, input);
        self.sqli_hits += usize::from(ours.sqli);
        self.xss_hits += usize::from(ours.xss);

        if let Some(clib) = clib {
            self.c_inputs += 1;
            let reference = verdict(clib, input);
            if reference != ours && self.c_differences.len() < 50 {
                self.c_differences.push(format!(
                    "{:?}: C {:?} ours {:?}",
                    input.escape_ascii().to_string(),
                    reference,
                    ours
                ));
            }
        }

        if (ours.sqli, &ours.fingerprint) != (rs.sqli, &rs.fingerprint) {
            let differs = |i: &[u8]| sqli_of(&Libinjection, i) != sqli_of(&LibinjectionRs, i);
            let min = shrink(input.to_vec(), &differs);
            let (o, r) = (
                Libinjection.sqli(&min, &mut Vec::new()),
                LibinjectionRs.sqli(&min, &mut Vec::new()),
            );
            self.classify(sqli_class(&min, o, r), "sqli", input, &min);
        }
        if ours.xss != rs.xss {
            let differs = |i: &[u8]| Libinjection.xss(i) != LibinjectionRs.xss(i);
            let min = shrink(input.to_vec(), &differs);
            let (o, r) = (Libinjection.xss(&min), LibinjectionRs.xss(&min));
            self.classify(xss_class(&min, o, r), "xss", input, &min);
        }
    }

    fn classify(&mut self, class: Option<&'static str>, what: &str, input: &[u8], min: &[u8]) {
        match class {
            Some(c) => {
                *self.classes.entry(c).or_default() += 1;
                let e = self.examples.entry(c).or_insert_with(|| min.to_vec());
                if min.len() < e.len() {
                    *e = min.to_vec();
                }
            }
            None => self.unexplained.push(format!(
                "{what}: {:?} (minimal {:?})",
                input.escape_ascii().to_string(),
                min.escape_ascii().to_string()
            )),
        }
    }

    fn finish(self, name: &str) {
        let total: usize = self.classes.values().sum();
        println!(
            "{name}: {} inputs ({} SQLi, {} XSS); {total} differences from libinjectionrs, all documented: {:?}",
            self.inputs, self.sqli_hits, self.xss_hits, self.classes
        );
        for (c, e) in &self.examples {
            println!("  {c}: e.g. {:?}", e.escape_ascii().to_string());
        }
        if self.c_inputs > 0 {
            println!(
                "{name}: {} inputs compared with C libinjection: {} differences",
                self.c_inputs,
                self.c_differences.len()
            );
        }
        assert!(
            self.unexplained.is_empty(),
            "{} undocumented differences from libinjectionrs:\n{}",
            self.unexplained.len(),
            self.unexplained.join("\n")
        );
        assert!(
            self.c_differences.is_empty(),
            "differences from C libinjection:\n{}",
            self.c_differences.join("\n")
        );
    }
}

// ---------------------------------------------------------------------------
// CRS regression payloads

fn crs_tests(test: &str) -> Option<PathBuf> {
    let tests = waf_test_support::crs_dir(test)?.join("tests/regression/tests");
    tests.is_dir().then_some(tests)
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            yaml_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "yaml" || x == "yml") {
            out.push(p);
        }
    }
}

/// A YAML scalar's value: double-quoted (with escapes), single-quoted or
/// plain (a trailing comment removed).
fn unquote(v: &str) -> Vec<u8> {
    let v = v.trim();
    if let Some(body) = v.strip_prefix('"') {
        let mut out = Vec::new();
        let mut chars = body.chars();
        while let Some(c) = chars.next() {
            match c {
                '"' => break,
                '\\' => {
                    let hex = |chars: &mut std::str::Chars, n: usize| {
                        let h: String = chars.take(n).collect();
                        u32::from_str_radix(&h, 16).ok()
                    };
                    match chars.next() {
                        Some('n') => out.push(b'\n'),
                        Some('t') => out.push(b'\t'),
                        Some('r') => out.push(b'\r'),
                        Some('0') => out.push(0),
                        Some('x') => out.extend(hex(&mut chars, 2).map(|b| b as u8)),
                        Some('u') => {
                            let ch = hex(&mut chars, 4).and_then(char::from_u32).unwrap_or('?');
                            out.extend_from_slice(ch.to_string().as_bytes());
                        }
                        Some(o) => out.extend_from_slice(o.to_string().as_bytes()),
                        None => {}
                    }
                }
                c => out.extend_from_slice(c.to_string().as_bytes()),
            }
        }
        out
    } else if let Some(body) = v.strip_prefix('\'') {
        let body = body.strip_suffix('\'').unwrap_or(body);
        body.replace("''", "'").into_bytes()
    } else {
        let v = v.split(" #").next().unwrap_or(v);
        v.as_bytes().to_vec()
    }
}

/// `%XX` and `+` decoding.
fn url_decode(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'%' if i + 2 < s.len() => {
                let h = std::str::from_utf8(&s[i + 1..i + 3]).ok();
                match h.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    out
}

/// Request data of the CRS regression tests: URIs, their query strings and
/// parameters, bodies and their form fields, header values; each also
/// URL-decoded.
fn crs_inputs(dir: &Path) -> BTreeSet<Vec<u8>> {
    const SKIP: &[&str] = &[
        "author",
        "description",
        "desc",
        "rule_id",
        "test_id",
        "test_title",
        "dest_addr",
        "port",
        "method",
        "version",
        "protocol",
        "expect_ids",
        "no_expect_ids",
        "status",
        "log_contains",
        "no_log_contains",
        "response_contains",
        "encoded_request",
        "name",
        "enabled",
        "retry_once",
        "save_cookie",
        "stop_magic",
        "autocomplete_headers",
    ];
    let mut files = Vec::new();
    yaml_files(dir, &mut files);
    files.sort();
    let mut out = BTreeSet::new();
    let add = |v: Vec<u8>, out: &mut BTreeSet<Vec<u8>>| {
        if v.is_empty() {
            return;
        }
        let decoded = url_decode(&v);
        // the whole value, and its parameters (for URIs and form bodies)
        let query = match v.iter().position(|&b| b == b'?') {
            Some(q) => v[q + 1..].to_vec(),
            None => v.clone(),
        };
        for pair in query.split(|&b| b == b'&') {
            let mut kv = pair.splitn(2, |&b| b == b'=');
            for part in [kv.next(), kv.next()].into_iter().flatten() {
                if !part.is_empty() {
                    out.insert(part.to_vec());
                    out.insert(url_decode(part));
                }
            }
        }
        out.insert(decoded);
        out.insert(v);
    };
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        let lines: Vec<&str> = text.lines().collect();
        let mut i = 0;
        while i < lines.len() {
            let line = lines[i];
            i += 1;
            let t = line.trim_start().trim_start_matches("- ");
            let Some((key, value)) = t.split_once(':') else {
                continue;
            };
            let key = key.trim().trim_matches('"');
            if SKIP.contains(&key) || key.contains(' ') {
                continue;
            }
            let value = value.trim();
            if value.starts_with('|') || value.starts_with('>') {
                // block scalar: the more indented lines that follow
                let indent = line.len() - line.trim_start().len();
                let mut block = Vec::new();
                while i < lines.len()
                    && (lines[i].trim().is_empty()
                        || lines[i].len() - lines[i].trim_start().len() > indent)
                {
                    block.push(lines[i].trim());
                    i += 1;
                }
                let sep = if value.starts_with('>') { " " } else { "\n" };
                add(block.join(sep).trim_end().as_bytes().to_vec(), &mut out);
            } else if !value.is_empty() && !value.starts_with('[') && !value.starts_with('{') {
                add(unquote(value), &mut out);
            }
        }
    }
    out
}

#[test]
fn crs_regression_payloads_agree() {
    let Some(dir) = crs_tests("crs_regression_payloads_agree") else {
        return;
    };
    let inputs = crs_inputs(&dir);
    assert!(
        inputs.len() > 1000,
        "too few CRS payloads: {}",
        inputs.len()
    );
    let clib = c::CLib::load();
    let mut report = Report::default();
    for input in &inputs {
        report.check(input, clib.as_ref());
    }
    report.finish("CRS regression payloads");
}

// ---------------------------------------------------------------------------
// Generated inputs

const SQL_WORDS: &[&[u8]] = &[
    b"SELECT",
    b"select",
    b"UNION",
    b"union all",
    b"ALL",
    b"OR",
    b"or",
    b"AND",
    b"and",
    b"FROM",
    b"WHERE",
    b"NOT",
    b"IN",
    b"not in",
    b"LIKE",
    b"not like",
    b"IF",
    b"if",
    b"USER",
    b"user",
    b"DATABASE",
    b"password",
    b"current_user",
    b"COLLATE",
    b"INTO",
    b"into outfile",
    b"INTO DUMPFILE",
    b"DROP",
    b"TABLE",
    b"CASE",
    b"WHEN",
    b"THEN",
    b"END",
    b"benchmark",
    b"sleep",
    b"char",
    b"concat",
    b"NULL",
    b"\\N",
    b"CAST",
    b"AS",
    b"INT",
    b"varchar",
    b"utf8_general_ci",
    b"sp_password",
    b"ORDER BY",
    b"GROUP BY",
    b"HAVING",
    b"LIMIT",
    b"xor",
    b"DIV",
    b"MOD",
    b"BETWEEN",
    b"IS",
    b"EXEC",
    b"xp_cmdshell",
    b"waitfor delay",
    b"DECLARE",
    b"BEGIN",
    b"version",
    b"@@version",
    b"information_schema.tables",
    b"admin",
    b"foo",
    b"a",
    b"x",
    b"n",
    b"e",
    b"b",
    b"q",
    b"u",
    b"N",
    b"E",
    b"B",
    b"X",
    b"Q",
    b"U",
    b"nq",
    b"user_id",
    b"localtime",
    b"SELECT.1",
    b"select`x`",
    b"binary",
    b"ascii",
    b"substring",
    b"INSERT",
    b"VALUES",
    b"UPDATE",
    b"SET",
    b"DELETE",
    b"TRUE",
    b"false",
    b"ELSE",
    b"DISTINCT",
    b"TOP",
    b"_utf8",
    b"char(",
    b"sqlite_version",
    b"pg_sleep",
];

const SQL_PUNCT: &[&[u8]] = &[
    b"'", b"'", b"\"", b"`", b"''", b"\\'", b"\\\\", b"\\", b"/*", b"*/", b"/*!", b"/**/", b"--",
    b"-- ", b"--x", b"#", b"=", b"<>", b"!=", b"||", b"&&", b"::", b"<=>", b"+", b"-", b"*", b"/",
    b"%", b"^", b"~", b"!", b"!!", b"(", b")", b",", b";", b";;", b".", b"{", b"}", b"[", b"]",
    b":", b":=", b"<", b">", b"<=", b">=", b"|", b"&", b"?", b"@", b"@@", b"@`", b"$", b"$$",
    b"$a$", b"$1,000", b"$.", b"0x", b"0x4f", b"0b01", b"0b", b"1e5", b"1e", b"1.5f", b"1d",
    b"1fUNION", b".5", b".", b"1.", b"q'[", b"]'", b"q'<x>'", b"nq'(x)'", b"N'x'", b"E'x'",
    b"U&'x'", b"b'01'", b"x'4f'", b"x'", b"b'", b"`x`", b"[x]", b"{``", b"\\%1",
];

const SQL_SPACE: &[&[u8]] = &[
    b" ", b" ", b" ", b"\t", b"\n", b"\r\n", b"\0", b"\xa0", b"\x0b", b"\x0c", b"+", b"%20", b"",
];

const HTML_PARTS: &[&[u8]] = &[
    b"<",
    b">",
    b"</",
    b"/>",
    b"/",
    b"<script>",
    b"</script>",
    b"<img",
    b"<svg",
    b"<a",
    b"<b>",
    b"<iframe",
    b"<div",
    b"<style",
    b"<x",
    b"<xss",
    b"<sCrIpT",
    b"<\0script",
    b"<scr\0ipt",
    b"<xsl:x",
    b"<embed",
    b"<meta",
    b"<base",
    b"<link",
    b"<p",
    b"<span",
    b"<form",
    b"<input",
    b"<body",
    b"<video",
    b" src=",
    b" href=",
    b" onerror=",
    b" onload=",
    b" onfoo=",
    b" one=",
    b" on=",
    b" ONCLICK=",
    b" style=",
    b" xmlns=",
    b" xmlns:x=",
    b" xlink:href=",
    b" attributename=",
    b" formaction=",
    b" data=",
    b" values=",
    b" from=",
    b" to=",
    b" by=",
    b" class=",
    b" id=",
    b" title=",
    b" alt=",
    b" width=",
    b" filter=",
    b" datasrc=",
    b" background=",
    b" action=",
    b" lowsrc=",
    b" dynsrc=",
    b" poster=",
    b" folder=",
    b" handler=",
    b"=",
    b"\"",
    b"'",
    b"`",
    b"javascript:",
    b"JaVaScRiPt:",
    b"java\0script:",
    b"jav&#x09;ascript:",
    b"&#106;avascript:",
    b"&#x6A;avascript:",
    b"&#0000106;",
    b"&#x6a",
    b"&#",
    b"&#x",
    b"&#x14A;",
    b"&amp;",
    b"&lt;",
    b"data:",
    b"vbscript:",
    b"view-source:",
    b"alert(1)",
    b"x",
    b"1",
    b" ",
    b"\t",
    b"\n",
    b"\0",
    b"\x0b",
    b"<!--",
    b"-->",
    b"--!>",
    b"-\0->",
    b"<!DOCTYPE",
    b"<!doctype html>",
    b"<![CDATA[",
    b"]]>",
    b"<?",
    b"<%",
    b"%>",
    b"[if",
    b"xml",
    b"import",
    b"entity",
    b"<!",
    b"<!-",
    b"<!x",
    b"onmouseover",
    b"\xc3\xa9",
    b"\xff",
    b"\x80",
    b"&",
    b"#",
    b";",
    b"http://example.com/",
    b"?a=1&b=2",
];

const TEXT_WORDS: &[&[u8]] = &[
    b"hello",
    b"world",
    b"the",
    b"quick",
    b"brown",
    b"fox",
    b"O'Reilly",
    b"it's",
    b"\"quoted\"",
    b"a-b",
    b"a--b",
    b"1-2",
    b"2020-01-01",
    b"user@example.com",
    b"C++",
    b"50%",
    b"#tag",
    b"/path/to/file",
    b"key=value",
    b"a,b,c",
    b"(x)",
    b"3.14",
    b"1,000",
    b"$5",
    b"caf\xc3\xa9",
    b"\xe6\x97\xa5\xe6\x9c\xac",
    b"Mozilla/5.0",
    b"{\"a\":1}",
    b"[1,2]",
    b"a;b",
    b"a|b",
];

/// One generated input: SQL-ish, HTML-ish, benign text, a mix, or random
/// bytes biased towards syntax (non-UTF-8 included).
fn generate(rng: &mut XorShift) -> Vec<u8> {
    let mut out = Vec::new();
    let flavour = rng.below_high(10);
    let n = 1 + rng.below_high(if flavour == 9 { 40 } else { 12 });
    for _ in 0..n {
        match flavour {
            0..=3 => {
                let part = match rng.below_high(3) {
                    0 => *rng.pick_high(SQL_WORDS),
                    1 => *rng.pick_high(SQL_PUNCT),
                    _ => *rng.pick_high::<&[u8]>(&[b"1", b"0", b"42", b"9999", b"-1", b"3.5"]),
                };
                out.extend_from_slice(part);
                if rng.below_high(3) != 0 {
                    out.extend_from_slice(rng.pick_high::<&[u8]>(SQL_SPACE));
                }
            }
            4..=6 => out.extend_from_slice(rng.pick_high::<&[u8]>(HTML_PARTS)),
            7 => {
                out.extend_from_slice(rng.pick_high::<&[u8]>(TEXT_WORDS));
                out.push(b' ');
            }
            8 => {
                let part = match rng.below_high(4) {
                    0 => *rng.pick_high(SQL_WORDS),
                    1 => *rng.pick_high(SQL_PUNCT),
                    2 => *rng.pick_high(HTML_PARTS),
                    _ => *rng.pick_high(TEXT_WORDS),
                };
                out.extend_from_slice(part);
            }
            _ => {
                let special = b"'\"`\\/*-#=<>!|&:;(),.{}[]@$%^~+?0123456789abenqux \t\n\0\xa0";
                if rng.below_high(3) == 0 {
                    out.push(rng.byte());
                } else {
                    out.push(special[rng.below_high(special.len())]);
                }
            }
        }
    }
    if !out.is_empty() && rng.below_high(8) == 0 {
        let i = rng.below_high(out.len());
        out[i] = rng.byte();
    }
    out
}

fn generated(n: usize, seed: u64, name: &str) {
    let clib = c::CLib::load();
    let mut rng = XorShift::new(seed);
    let mut report = Report::default();
    for _ in 0..n {
        let input = generate(&mut rng);
        report.check(&input, clib.as_ref());
    }
    report.finish(name);
}

#[test]
fn generated_inputs_agree() {
    generated(20_000, 1, "generated inputs");
}

/// `WAF_INJ_N` inputs (default 1,000,000) from seed `WAF_INJ_SEED` (default 2).
#[test]
#[ignore = "long: cargo test --release -p waf-engine --test injection_agreement -- --ignored"]
fn generated_inputs_agree_many() {
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let n = env("WAF_INJ_N", 1_000_000) as usize;
    generated(n, env("WAF_INJ_SEED", 2), "generated inputs (many)");
}

/// Long and adversarial inputs: no panic, and time linear in the length.
#[test]
fn long_inputs_agree_and_stay_linear() {
    let clib = c::CLib::load();
    let mut report = Report::default();
    let patterns: &[&[u8]] = &[
        b"$a",
        b"$a$",
        b"\\",
        b"'",
        b"\\'",
        b"/*",
        b"-",
        b"<!--",
        b"<%",
        b"]",
        b"<a ",
        b"x=",
        b"&#",
        b"((",
        b"1,",
        b"@",
        b"q'[",
        b"\0",
        b"--x",
        b"<![CDATA[",
        b"a",
        b"`",
    ];
    for p in patterns {
        for n in [1_000, 8_000] {
            let input: Vec<u8> = p.iter().copied().cycle().take(n * p.len()).collect();
            report.check(&input, clib.as_ref());
        }
    }
    // $tag$ ... $tag$ quoting with a long tag: quadratic in a naive search
    let mut tag = b"$".to_vec();
    tag.extend(std::iter::repeat_n(b'a', 20_000));
    tag.push(b'$');
    let mut input = tag.clone();
    input.extend_from_slice(&tag[..tag.len() - 1]);
    report.check(&input, clib.as_ref());
    report.finish("long inputs");

    // Timing: 16x the input must not take much more than 16x the time.
    let time = |n: usize| {
        let input: Vec<u8> = b"$aaaa$ '\\'<a x=&#1 /*-"
            .iter()
            .copied()
            .cycle()
            .take(n)
            .collect();
        let start = std::time::Instant::now();
        for _ in 0..5 {
            let mut fp = Vec::with_capacity(8);
            std::hint::black_box(Libinjection.sqli(&input, &mut fp));
            std::hint::black_box(Libinjection.xss(&input));
        }
        start.elapsed().as_secs_f64()
    };
    let (small, large) = (time(20_000), time(320_000));
    assert!(
        large < small * 64.0 + 0.05,
        "not linear: {small}s vs {large}s"
    );
}
