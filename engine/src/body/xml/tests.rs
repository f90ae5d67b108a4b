use super::*;
use crate::body::testutil::Rec;
use std::time::{Duration, Instant};
use waf_test_support::XorShift;

fn run_depth(body: &[u8], depth: usize) -> (Rec, BodyResult) {
    let mut rec = Rec::default();
    let mut out = BodyResult::default();
    parse(body, depth, &mut Scratch::default(), &mut rec, &mut out);
    (rec, out)
}

fn run(body: &[u8]) -> (Rec, BodyResult) {
    run_depth(body, DEFAULT_MAX_DEPTH)
}

fn ok(body: &[u8]) -> Rec {
    let (rec, out) = run(body);
    assert!(
        !out.reqbody_error,
        "{:?}: {}",
        String::from_utf8_lossy(body),
        out.error_detail
    );
    rec
}

#[test]
fn xpath_forms() {
    assert_eq!(XPath::parse("/*"), XPath::RootText);
    assert_eq!(XPath::parse("//@*"), XPath::Attributes);
    assert_eq!(XPath::parse(" /* "), XPath::RootText);
    assert_eq!(XPath::parse("/a/b"), XPath::Unsupported);
    assert_eq!(XPath::parse("//*"), XPath::Unsupported);
    assert_eq!(XPath::parse(""), XPath::Unsupported);
}

#[test]
fn text_and_attributes() {
    // (body, XML:/*, XML://@*)
    let cases: &[(&str, &str, &[&str])] = &[
        // CRS 920640-? / 931100: text of nested elements
        (
            r#"<?xml version="1.0"?><data><id>123</id></data>"#,
            "123",
            &[],
        ),
        (
            r#"<?xml version="1.0" encoding="UTF-8"?><catalog><tag>ftp%3A%2F%2F1.1.1.1</tag></catalog>"#,
            "ftp%3A%2F%2F1.1.1.1",
            &[],
        ),
        // CRS 931100 (GHSA): the attribute value is in XML://@*
        (
            r#"<?xml version="1.0"?><root><a probe="http://66.240.183.75/crash.php"></a></root>"#,
            "",
            &["http://66.240.183.75/crash.php"],
        ),
        // CRS 944120-6/7: element and attribute *names* are not inspected
        (
            r#"<?xml version="1.0"?><xml><ProcessBuilder.evil.clonetransformer attribute_name="attribute_value">value</ProcessBuilder.evil.clonetransformer></xml>"#,
            "value",
            &["attribute_value"],
        ),
        (
            r#"<?xml version="1.0"?><xml><element ProcessBuilder.evil.clonetransformer="attribute_value">element_value</element></xml>"#,
            "element_value",
            &["attribute_value"],
        ),
        // CRS 944120-8/9/10: values are
        (
            r#"<?xml version="1.0"?><xml><element attribute_name="ProcessBuilder.evil.clonetransformer">element_value</element></xml>"#,
            "element_value",
            &["ProcessBuilder.evil.clonetransformer"],
        ),
        (
            r#"<?xml version="1.0"?><xml><l1><l2><l3><element attribute_name="attribute_value">ProcessBuilder.evil.clonetransformer</element></l3></l2></l1></xml>"#,
            "ProcessBuilder.evil.clonetransformer",
            &["attribute_value"],
        ),
        // whitespace between elements is part of the content
        ("<a>\n  <b>x</b>\n  <c>y</c>\n</a>", "\n  x\n  y\n", &[]),
        // CDATA, references, comments and PIs
        ("<a><![CDATA[<x>&amp;]]></a>", "<x>&amp;", &[]),
        (
            "<a>&lt;&#65;&#x42;&amp;&gt;&apos;&quot;</a>",
            "<AB&>'\"",
            &[],
        ),
        ("<a>1<!-- c -->2<?pi x?>3</a>", "123", &[]),
        ("<a>\u{e9}\u{20ac}</a>", "\u{e9}\u{20ac}", &[]),
        // line ends are normalised in text
        ("<a>x\r\ny\rz</a>", "x\ny\nz", &[]),
        // attributes: document order, references, whitespace normalisation
        (
            "<a x=\"1\" y=\"a&#10;b\" z=\"c\td\r\ne\nf\"><b w='&lt;&amp;'/><c/></a>",
            "",
            &["1", "a\nb", "c d e f", "<&"],
        ),
        // namespace declarations are not attributes
        (
            r#"<a xmlns="urn:x" xmlns:p="urn:y" p:x="1" y="2"/>"#,
            "",
            &["1", "2"],
        ),
        // an empty root, a BOM, a DOCTYPE, leading comments and whitespace
        ("<a/>", "", &[]),
        ("\u{feff}<a>x</a>", "x", &[]),
        ("<!DOCTYPE a>\n<!-- c -->\n<a>x</a>\n", "x", &[]),
        // custom entities are not expanded (the reference stays visible)
        (
            "<!DOCTYPE a [<!ENTITY e \"v\">]><a t=\"&e;\">&e;</a>",
            "&e;",
            &["&e;"],
        ),
        // end tags may have trailing whitespace
        ("<a>x</a  >", "x", &[]),
    ];
    for (body, text, attrs) in cases {
        let rec = ok(body.as_bytes());
        assert_eq!(rec.root_text.as_deref(), Some(*text), "{body}");
        assert_eq!(rec.attrs, *attrs, "{body}");
        assert!(rec.args.is_empty(), "no ARGS from XML");
    }
}

#[test]
fn latin1_documents() {
    let body = b"<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><a t=\"\xe9\">caf\xe9</a>";
    let rec = ok(body);
    assert_eq!(rec.root_text.as_deref(), Some("caf\u{e9}"));
    assert_eq!(rec.attrs, vec!["\u{e9}"]);
    // the same bytes without the declaration are not UTF-8
    let (_, out) = run(b"<a>caf\xe9</a>");
    assert!(out.reqbody_error);
    assert!(out.error_detail.contains("UTF-8"), "{}", out.error_detail);
}

#[test]
fn malformed_documents() {
    let cases: &[&[u8]] = &[
        b"",
        b"   \n",
        b"<a>",
        b"<a><b></a>",
        b"<a></b>",
        b"</a>",
        b"<a></a><b/>",
        b"<a/><a/>",
        b"text",
        b"x<a/>",
        b"<a>x</a>junk",
        b"<a>&foo;</a>",
        b"<a>&amp</a>",
        b"<a>&#0;</a>",
        b"<a>&#xD800;</a>",
        b"<a>&#xFFFFFFFF;</a>",
        b"<a>&#;</a>",
        b"<a x='1' x='2'/>",
        b"<a x=1/>",
        b"<a x/>",
        b"<a x='<'/>",
        b"<a x='&bogus;'/>",
        b"<a x='&amp'/>",
        b"<a>\x01</a>",
        b"<a>\x00</a>",
        b"<a>\xff</a>",
        b"<a><!-- a -- b --></a>",
        b"<a>]]></a>",
        b"<1a/>",
        b"<-a/>",
        b"<a><?xml version='1.0'?></a>",
        b" <?xml version=\"1.0\"?><a/>",
        b"<?xml version=\"1.0\" encoding=\"UTF-16\"?><a/>",
        b"<?xml version=\"1.0\" encoding=\"EBCDIC\"?><a/>",
        b"\xFF\xFE<\x00a\x00/\x00>\x00",
        b"\xFE\xFF\x00<\x00a\x00/\x00>",
        b"<!DOCTYPE a><!DOCTYPE a><a/>",
        b"<a/><!DOCTYPE a>",
        b"<a/><![CDATA[y]]>",
        b"<a><b",
        b"<a x=\"1\"",
        b"<a><!-- unterminated",
        b"<a><![CDATA[ unterminated",
    ];
    for body in cases {
        let (_, out) = run(body);
        assert!(out.reqbody_error, "{:?}", String::from_utf8_lossy(body));
        assert_eq!(
            out.reqbody_error_msg_lossy(),
            "XML parsing error: XML: Failed parsing document."
        );
        assert!(
            out.error_detail.starts_with("at byte "),
            "{}",
            out.error_detail
        );
    }
}

#[test]
fn partial_results_survive_errors() {
    // libxml2 keeps the tree built before the error; v3 evaluates XPath on it.
    let (rec, out) = run(b"<a x=\"1\">text<b y=\"2\">more</c>");
    assert!(out.reqbody_error);
    assert_eq!(rec.attrs, vec!["1", "2"]);
    assert_eq!(rec.root_text.as_deref(), Some("textmore"));
    // nothing parsed: no root text at all
    let (rec, _) = run(b"junk");
    assert_eq!(rec.root_text, None);
    // an invalid byte late in the document: the part before it is parsed
    let (rec, out) = run(b"<a>ok \xff</a>");
    assert!(out.reqbody_error);
    assert_eq!(rec.root_text.as_deref(), Some("ok "));
}

#[test]
fn depth_limit() {
    let (_, out) = run_depth(b"<a><b><c/></b></a>", 2);
    assert!(!out.reqbody_error, "{}", out.error_detail);
    let (_, out) = run_depth(b"<a><b><c><d/></c></b></a>", 2);
    assert!(out.reqbody_error);
    assert!(
        out.error_detail.contains("Excessive depth"),
        "{}",
        out.error_detail
    );
    // libxml2's default: 256 ancestors are fine, 257 are not
    let nest = |n: usize| {
        let mut b = b"<a>".repeat(n);
        b.extend_from_slice(&b"</a>".repeat(n));
        b
    };
    assert!(!run(&nest(257)).1.reqbody_error);
    assert!(run(&nest(258)).1.reqbody_error);
}

#[test]
fn scratch_reuse() {
    let mut sc = Scratch::default();
    for body in [&b"<a x='1'>t<b y='2'/></a>"[..], b"<a><b></a>", b"<r>z</r>"] {
        let mut fresh = Rec::default();
        let mut fo = BodyResult::default();
        parse(body, 256, &mut Scratch::default(), &mut fresh, &mut fo);
        let mut reused = Rec::default();
        let mut ro = BodyResult::default();
        parse(body, 256, &mut sc, &mut reused, &mut ro);
        assert_eq!(fresh.attrs, reused.attrs);
        assert_eq!(fresh.root_text, reused.root_text);
        assert_eq!(fo, ro);
    }
}

#[test]
fn random_inputs_do_not_panic() {
    let mut rng = XorShift::from_state(0x0bad_cafe);
    let alphabet: &[&[u8]] = &[
        b"<a>",
        b"</a>",
        b"<b x='1'>",
        b"</b>",
        b"<c/>",
        b"text",
        b"&amp;",
        b"&#65;",
        b"&",
        b"<",
        b">",
        b"<!--",
        b"-->",
        b"<![CDATA[",
        b"]]>",
        b"<?xml version='1.0'?>",
        b"<!DOCTYPE a>",
        b"\"",
        b"'",
        b"=",
        b" ",
        b"\r\n",
        b"\xc3\xa9",
        b"\xff",
    ];
    let mut sc = Scratch::default();
    for _ in 0..20_000 {
        let body = rng.bytes_from(alphabet, 40);
        let mut rec = Rec::default();
        let mut out = BodyResult::default();
        parse(&body, 8, &mut sc, &mut rec, &mut out);
        if !out.reqbody_error {
            assert!(
                rec.root_text.is_some(),
                "{:?}",
                String::from_utf8_lossy(&body)
            );
        }
    }
}

#[test]
fn adversarial_documents_finish_quickly() {
    let ten_mb = 10 * 1024 * 1024;
    let cases: Vec<(&str, Vec<u8>, bool)> = vec![
        ("deep nesting", b"<a>".repeat(ten_mb / 3), false),
        (
            "wide",
            {
                let mut b = b"<r>".to_vec();
                b.extend_from_slice(&b"<a x='1'/>".repeat(ten_mb / 10));
                b.extend_from_slice(b"</r>");
                b
            },
            true,
        ),
        (
            "many attributes",
            {
                let mut b = b"<r".to_vec();
                for i in 0..200_000 {
                    b.extend_from_slice(format!(" a{i}='v'").as_bytes());
                }
                b.extend_from_slice(b"/>");
                b
            },
            true,
        ),
        (
            "long text",
            {
                let mut b = b"<r>".to_vec();
                b.resize(b.len() + ten_mb, b'x');
                b.extend_from_slice(b"</r>");
                b
            },
            true,
        ),
        (
            "many references",
            {
                let mut b = b"<r>".to_vec();
                b.extend_from_slice(&b"&amp;".repeat(ten_mb / 5));
                b.extend_from_slice(b"</r>");
                b
            },
            true,
        ),
        (
            "unclosed",
            b"<a>"
                .to_vec()
                .repeat(200)
                .into_iter()
                .chain(b"x".repeat(ten_mb))
                .collect(),
            false,
        ),
    ];
    for (what, body, well_formed) in cases {
        struct Nop;
        impl BodySink for Nop {
            fn arg(&mut self, _: crate::body::ArgSource, _: &[u8], _: &[u8]) {}
        }
        let mut out = BodyResult::default();
        let start = Instant::now();
        parse(
            &body,
            DEFAULT_MAX_DEPTH,
            &mut Scratch::default(),
            &mut Nop,
            &mut out,
        );
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "{what}: {:?}",
            start.elapsed()
        );
        assert_eq!(
            !out.reqbody_error, well_formed,
            "{what}: {}",
            out.error_detail
        );
    }
}
