//! The subset of Go `text/template` (+ sprig) that go-ftw applies to `data`.
//!
//! go-ftw runs every `data` value through `text/template` with the sprig
//! functions (CRS uses `{{ "1" | repeat 64200 }}` to build large bodies).
//! Supported here: text, `{{ }}` actions with `-` trim markers, comments,
//! pipelines (`a | f x`), string (`"..."`, `` `...` ``) and integer literals,
//! and the functions `repeat`, `upper`, `lower`, `trim`, `b64enc`, `b64dec`,
//! `print`. Anything else is an error (the stage then fails with the reason;
//! go-ftw itself would silently send no body).

use base64::Engine as _;

#[derive(Clone, Debug, PartialEq)]
enum Value {
    Str(String),
    Int(i64),
}

impl Value {
    fn text(&self) -> String {
        match self {
            Value::Str(s) => s.clone(),
            Value::Int(n) => n.to_string(),
        }
    }
}

/// Evaluates `text` as a template; text without `{{` is returned unchanged.
pub fn render(text: &str) -> Result<String, String> {
    if !text.contains("{{") {
        return Ok(text.to_string());
    }
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let mut literal = &rest[..start];
        let mut action = &rest[start + 2..];
        if action.starts_with("- ") || action.starts_with("-\t") || action.starts_with("-\n") {
            literal = literal.trim_end();
            action = &action[1..];
        }
        out.push_str(literal);
        let end = find_action_end(action).ok_or("unclosed `{{` in data")?;
        let mut body = &action[..end];
        rest = &action[end + 2..];
        if body.ends_with(" -") || body.ends_with("\t-") || body.ends_with("\n-") {
            body = &body[..body.len() - 1];
            rest = rest.trim_start();
        }
        let body = body.trim();
        if body.starts_with("/*") {
            if !body.ends_with("*/") {
                return Err("unclosed comment in data template".into());
            }
            continue;
        }
        out.push_str(&pipeline(body)?.text());
    }
    out.push_str(rest);
    Ok(out)
}

/// The index of the `}}` closing an action, skipping quoted strings.
fn find_action_end(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b'`' => {
                i += 1;
                while i < b.len() && b[i] != b'`' {
                    i += 1;
                }
            }
            b'}' if b.get(i + 1) == Some(&b'}') => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Lit(Value),
    Ident(String),
    Pipe,
}

fn tokens(s: &str) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    let c: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() {
            i += 1;
        } else if ch == '|' {
            out.push(Tok::Pipe);
            i += 1;
        } else if ch == '"' {
            let mut v = String::new();
            i += 1;
            loop {
                let Some(&x) = c.get(i) else {
                    return Err("unterminated string in data template".into());
                };
                i += 1;
                match x {
                    '"' => break,
                    '\\' => {
                        let e = *c.get(i).ok_or("bad escape in data template")?;
                        i += 1;
                        v.push(match e {
                            'n' => '\n',
                            'r' => '\r',
                            't' => '\t',
                            '\\' => '\\',
                            '"' => '"',
                            '\'' => '\'',
                            other => {
                                return Err(format!(
                                    "unsupported escape `\\{other}` in data template"
                                ))
                            }
                        });
                    }
                    x => v.push(x),
                }
            }
            out.push(Tok::Lit(Value::Str(v)));
        } else if ch == '`' {
            let start = i + 1;
            let end = c[start..]
                .iter()
                .position(|&x| x == '`')
                .ok_or("unterminated raw string in data template")?;
            out.push(Tok::Lit(Value::Str(c[start..start + end].iter().collect())));
            i = start + end + 1;
        } else if ch.is_ascii_digit()
            || (ch == '-' && c.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            let start = i;
            i += 1;
            while i < c.len() && c[i].is_ascii_digit() {
                i += 1;
            }
            let n: String = c[start..i].iter().collect();
            let n = n
                .parse::<i64>()
                .map_err(|e| format!("bad number `{n}` in data template: {e}"))?;
            out.push(Tok::Lit(Value::Int(n)));
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push(Tok::Ident(c[start..i].iter().collect()));
        } else {
            return Err(format!("unsupported `{ch}` in data template action"));
        }
    }
    Ok(out)
}

fn pipeline(body: &str) -> Result<Value, String> {
    let toks = tokens(body)?;
    let mut prev: Option<Value> = None;
    for cmd in toks.split(|t| *t == Tok::Pipe) {
        let (head, args) = cmd.split_first().ok_or("empty command in data template")?;
        let mut argv: Vec<Value> = Vec::new();
        for a in args {
            match a {
                Tok::Lit(v) => argv.push(v.clone()),
                Tok::Ident(f) => argv.push(call(f, Vec::new())?),
                Tok::Pipe => unreachable!(),
            }
        }
        if let Some(p) = prev.take() {
            argv.push(p);
        }
        prev = Some(match head {
            Tok::Lit(v) if argv.is_empty() => v.clone(),
            Tok::Lit(_) => return Err("a literal cannot take arguments in data template".into()),
            Tok::Ident(f) => call(f, argv)?,
            Tok::Pipe => unreachable!(),
        });
    }
    prev.ok_or_else(|| "empty action in data template".into())
}

fn call(f: &str, args: Vec<Value>) -> Result<Value, String> {
    let one_str = |args: &[Value]| -> Result<String, String> {
        match args {
            [v] => Ok(v.text()),
            _ => Err(format!("`{f}` takes 1 argument in data template")),
        }
    };
    Ok(Value::Str(match f {
        "repeat" => match args.as_slice() {
            [Value::Int(n), s] if *n >= 0 => s.text().repeat(*n as usize),
            _ => return Err("`repeat` takes a count and a string in data template".into()),
        },
        "upper" => one_str(&args)?.to_uppercase(),
        "lower" => one_str(&args)?.to_lowercase(),
        "trim" => one_str(&args)?.trim().to_string(),
        "b64enc" => base64::engine::general_purpose::STANDARD.encode(one_str(&args)?),
        "b64dec" => {
            let d = base64::engine::general_purpose::STANDARD
                .decode(one_str(&args)?)
                .map_err(|e| format!("`b64dec` in data template: {e}"))?;
            String::from_utf8_lossy(&d).into_owned()
        }
        "print" => args.iter().map(Value::text).collect(),
        other => return Err(format!("unsupported function `{other}` in data template")),
    }))
}

#[cfg(test)]
mod tests {
    use super::render;

    #[test]
    fn plain_text_is_unchanged() {
        assert_eq!(render("a=1&b={x}").unwrap(), "a=1&b={x}");
    }

    #[test]
    fn repeat_pipeline_and_call() {
        assert_eq!(render("x{{ \"ab\" | repeat 3 }}y").unwrap(), "xabababy");
        assert_eq!(render("{{ repeat 2 \"z\" }}").unwrap(), "zz");
        assert_eq!(
            render("a\n{{ \"1\" | repeat 4 }}\nb").unwrap(),
            "a\n1111\nb"
        );
    }

    #[test]
    fn trim_markers_comments_and_functions() {
        assert_eq!(render("a  {{- \"b\" -}}  c").unwrap(), "abc");
        assert_eq!(render("a{{/* note */}}b").unwrap(), "ab");
        assert_eq!(render("{{ \"x\" | upper | b64enc }}").unwrap(), "WA==");
    }

    #[test]
    fn unsupported_is_an_error() {
        assert!(render("{{ randAlpha 3 }}").is_err());
        assert!(render("{{ \"a\" ").is_err());
    }
}
