//! go-ftw test files (ftw-tests-schema v2) and override files, as serde types.
//!
//! Unknown keys are ignored (as go-ftw's YAML decoder does). A few spellings
//! of the v1 schema that go-ftw still reads are accepted too: singular
//! `expect_id`/`no_expect_id`, `log_contains`/`no_log_contains`, `raw_request`,
//! `stage:`-wrapped stages, `data` as a list of lines, and `status` as a list.

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;

/// A null (`meta:` with nothing after it) is the default, as in Go's decoder.
fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// One YAML test file.
#[derive(Debug, Default, Deserialize)]
pub struct TestFile {
    #[serde(default, deserialize_with = "nullable")]
    pub meta: Meta,
    /// Kept as written (`920100`); the file stem when absent.
    #[serde(default)]
    pub rule_id: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub tests: Vec<Test>,
}

#[derive(Debug, Default, Deserialize)]
pub struct Meta {
    /// `enabled: false` skips every test of the file (go-ftw).
    #[serde(default)]
    pub enabled: Option<bool>,
}

#[derive(Debug, Deserialize)]
pub struct Test {
    pub test_id: String,
    #[serde(default)]
    pub desc: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub stages: Vec<StageItem>,
}

/// A stage: `{input, output}` (v2) or `{stage: {input, output}}` (v1).
#[derive(Debug, Default, Deserialize)]
pub struct StageItem {
    #[serde(default)]
    pub stage: Option<Stage>,
    #[serde(default)]
    pub input: Option<Input>,
    #[serde(default)]
    pub output: Option<Output>,
}

#[derive(Debug, Default, Clone, Deserialize)]
pub struct Stage {
    #[serde(default, deserialize_with = "nullable")]
    pub input: Input,
    #[serde(default, deserialize_with = "nullable")]
    pub output: Output,
}

impl StageItem {
    pub fn normalized(&self) -> Stage {
        match &self.stage {
            Some(s) => s.clone(),
            None => Stage {
                input: self.input.clone().unwrap_or_default(),
                output: self.output.clone().unwrap_or_default(),
            },
        }
    }
}

/// The request of a stage. Absent fields take go-ftw's defaults
/// (`GET`, `/`, `HTTP/1.1`, `localhost`, port 80, autocomplete on).
#[derive(Debug, Default, Clone, Deserialize)]
pub struct Input {
    #[serde(default)]
    pub dest_addr: Option<String>,
    #[serde(default)]
    pub port: Option<u32>,
    #[serde(default)]
    pub method: Option<String>,
    #[serde(default)]
    pub uri: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
    /// go-ftw keeps one value per name and writes them sorted by name; a null
    /// value is an empty string.
    #[serde(default)]
    pub headers: Option<BTreeMap<String, Option<String>>>,
    /// Headers in order, repeats allowed; used instead of `headers` when given.
    #[serde(default)]
    pub ordered_headers: Option<Vec<HeaderTuple>>,
    #[serde(default)]
    pub data: Option<Data>,
    /// Base64 body (newer go-ftw); `data` wins when both are present.
    #[serde(default)]
    pub encoded_data: Option<String>,
    /// Base64 of the whole raw HTTP request, sent as is.
    #[serde(default)]
    pub encoded_request: Option<String>,
    /// The whole raw HTTP request (v1), sent as is.
    #[serde(default)]
    pub raw_request: Option<String>,
    #[serde(default)]
    pub autocomplete_headers: Option<bool>,
}

#[derive(Debug, Default, Clone, Deserialize)]
pub struct HeaderTuple {
    pub name: String,
    #[serde(default)]
    pub value: Option<String>,
}

/// `data`: a string, or (v1) a list of lines joined with CRLF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Data(pub String);

impl<'de> Deserialize<'de> for Data {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Data;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or a list of strings")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Data, E> {
                Ok(Data(v.to_string()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Data, E> {
                Ok(Data(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Data, E> {
                Ok(Data(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Data, E> {
                Ok(Data(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Data, E> {
                Ok(Data(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Data, E> {
                Ok(Data(v.to_string()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Data, A::Error> {
                let mut lines: Vec<String> = Vec::new();
                while let Some(l) = seq.next_element::<String>()? {
                    lines.push(l);
                }
                Ok(Data(lines.join("\r\n")))
            }
        }
        d.deserialize_any(V)
    }
}

/// What a stage expects.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct Output {
    /// One status, or (v1) any of a list.
    #[serde(default)]
    pub status: Option<IdList>,
    #[serde(default)]
    pub response_contains: Option<String>,
    /// v1: a regular expression the stage's log must (not) match.
    #[serde(default)]
    pub log_contains: Option<String>,
    #[serde(default)]
    pub no_log_contains: Option<String>,
    #[serde(default)]
    pub log: Option<LogExpect>,
    #[serde(default)]
    pub expect_error: Option<bool>,
    /// Exactly one rule id may be logged.
    #[serde(default)]
    pub isolated: Option<bool>,
}

#[derive(Debug, Default, Clone, Deserialize)]
pub struct LogExpect {
    #[serde(default)]
    pub expect_ids: Option<IdList>,
    #[serde(default)]
    pub expect_id: Option<IdList>,
    #[serde(default)]
    pub no_expect_ids: Option<IdList>,
    #[serde(default)]
    pub no_expect_id: Option<IdList>,
    #[serde(default)]
    pub match_regex: Option<String>,
    #[serde(default)]
    pub no_match_regex: Option<String>,
}

impl LogExpect {
    pub fn expected(&self) -> Vec<u64> {
        join_ids(&self.expect_ids, &self.expect_id)
    }
    pub fn not_expected(&self) -> Vec<u64> {
        join_ids(&self.no_expect_ids, &self.no_expect_id)
    }
}

fn join_ids(a: &Option<IdList>, b: &Option<IdList>) -> Vec<u64> {
    let mut v: Vec<u64> = Vec::new();
    for l in [a, b].into_iter().flatten() {
        for &id in &l.0 {
            if !v.contains(&id) {
                v.push(id);
            }
        }
    }
    v
}

/// A number or a list of numbers (`expect_ids: [920100]`, `expect_id: 920100`,
/// `status: 400`, `status: [200, 403]`, `test_ids: [1, 2]`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct IdList(pub Vec<u64>);

impl<'de> Deserialize<'de> for IdList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = IdList;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number or a list of numbers")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<IdList, E> {
                Ok(IdList(vec![v]))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<IdList, E> {
                u64::try_from(v)
                    .map(|v| IdList(vec![v]))
                    .map_err(|_| E::custom(format!("negative number {v}")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<IdList, E> {
                v.trim()
                    .parse::<u64>()
                    .map(|v| IdList(vec![v]))
                    .map_err(|_| E::custom(format!("`{v}` is not a number")))
            }
            fn visit_unit<E: de::Error>(self) -> Result<IdList, E> {
                Ok(IdList(Vec::new()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<IdList, A::Error> {
                let mut v = Vec::new();
                while let Some(x) = seq.next_element::<IdList>()? {
                    v.extend(x.0);
                }
                Ok(IdList(v))
            }
        }
        d.deserialize_any(V)
    }
}

/// `--overrides FILE`: go-ftw's configuration form (`testoverride:` with
/// `ignore`/`forcepass`/`forcefail` maps of test-id regex → reason) and/or the
/// platform-override form of CRS's `tests/regression/*-overrides.yaml`
/// (`test_overrides:` entries replacing the expected output of some tests).
#[derive(Debug, Default, Deserialize)]
pub struct OverridesFile {
    #[serde(default)]
    pub testoverride: Option<TestOverride>,
    #[serde(default)]
    pub test_overrides: Option<Vec<PlatformOverride>>,
}

#[derive(Debug, Default, Deserialize)]
pub struct TestOverride {
    #[serde(default, deserialize_with = "nullable")]
    pub ignore: BTreeMap<String, Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    pub forcepass: BTreeMap<String, Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    pub forcefail: BTreeMap<String, Option<String>>,
}

#[derive(Debug, Deserialize)]
pub struct PlatformOverride {
    pub rule_id: u64,
    #[serde(default)]
    pub test_ids: Option<IdList>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub output: Option<Output>,
}

/// Parses one test file; `Ok(None)` for a document without content (e.g. a
/// file whose every line is commented out).
pub fn parse_test_file(text: &str) -> Result<Option<TestFile>, String> {
    serde_saphyr::from_str::<Option<TestFile>>(text).map_err(|e| e.to_string())
}

pub fn parse_overrides(text: &str) -> Result<OverridesFile, String> {
    serde_saphyr::from_str::<Option<OverridesFile>>(text)
        .map(Option::unwrap_or_default)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_v2_and_v1_shapes() {
        let f = parse_test_file(
            r#"---
meta:
  author: "x"
rule_id: 920100
tests:
  - test_id: 1
    stages:
      - input:
          port: 80
          headers:
            Keep-Alive: 300
            Empty:
          data:
            - "a=1"
            - "b=2"
        output:
          status: [200, 403]
          log:
            expect_id: 920100
            no_expect_ids: [1, 2]
  - test_id: 2
    stages:
      - stage:
          input:
            uri: "/x"
          output:
            log_contains: 'id "1"'
"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!(f.rule_id.as_deref(), Some("920100"));
        let s = f.tests[0].stages[0].normalized();
        let h = s.input.headers.unwrap();
        assert_eq!(h["Keep-Alive"].as_deref(), Some("300"));
        assert_eq!(h["Empty"], None);
        assert_eq!(s.input.data.unwrap().0, "a=1\r\nb=2");
        assert_eq!(s.output.status.unwrap().0, vec![200, 403]);
        let log = s.output.log.unwrap();
        assert_eq!(log.expected(), vec![920100]);
        assert_eq!(log.not_expected(), vec![1, 2]);
        let s2 = f.tests[1].stages[0].normalized();
        assert_eq!(s2.input.uri.as_deref(), Some("/x"));
        assert_eq!(s2.output.log_contains.as_deref(), Some("id \"1\""));
    }

    #[test]
    fn null_sections_are_defaults() {
        // CRS 932271.yaml: `meta:` is null and `author` a stray top-level key.
        let f = parse_test_file("meta:\nauthor: x\nrule_id: 1\ntests:\n  - test_id: 1\n    stages:\n      - input:\n        output:\n").unwrap().unwrap();
        assert_eq!(f.meta.enabled, None);
        assert_eq!(f.tests[0].stages.len(), 1);
        assert!(parse_test_file("rule_id: 1\ntests:\n")
            .unwrap()
            .unwrap()
            .tests
            .is_empty());
    }

    #[test]
    fn empty_document_has_no_tests() {
        assert!(parse_test_file("# ---\n# meta:\n").unwrap().is_none());
    }

    #[test]
    fn overrides_both_forms() {
        let o = parse_overrides(
            "testoverride:\n  ignore:\n    '920100-4': 'front end'\ntest_overrides:\n  - rule_id: 920100\n    test_ids: [8]\n    reason: r\n    output:\n      status: 200\n",
        )
        .unwrap();
        assert_eq!(
            o.testoverride.unwrap().ignore["920100-4"].as_deref(),
            Some("front end")
        );
        let p = &o.test_overrides.unwrap()[0];
        assert_eq!(p.test_ids.as_ref().unwrap().0, vec![8]);
        assert_eq!(
            p.output.as_ref().unwrap().status.as_ref().unwrap().0,
            vec![200]
        );
    }
}
