//! The engine's modules depend on each other in one direction only.
//!
//! A circle between modules (the ruleset reading the transaction that reads
//! the ruleset) is what made the old `Transaction` a 67-field knot held
//! together by `mem::take`. This test reads the engine's sources, builds the
//! graph "module A names something in module B" from `crate::`, `super::` and
//! child-module paths, and fails on any strongly connected component of more
//! than one module, printing the circle. Test code (`tests.rs` files and
//! `#[cfg(test)] mod tests { .. }` blocks) is left out: tests may look
//! anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Module path (`["transaction", "vars"]`) to its source text, tests removed.
fn modules(src: &Path) -> BTreeMap<Vec<String>, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).expect("engine/src is readable") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().and_then(|e| e.to_str()) != Some("rs") {
                continue;
            }
            let rel: PathBuf = path.strip_prefix(src).expect("under src").to_path_buf();
            let mut parts: Vec<String> = rel
                .iter()
                .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
                .collect();
            if parts.last().map(String::as_str) == Some("tests") {
                continue;
            }
            if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
                parts.pop();
            }
            let text = fs::read_to_string(&path).expect("source is UTF-8");
            out.insert(parts, expand_use_groups(&strip_tests(&text)));
        }
    }
    out
}

/// The text without `#[cfg(test)]` items (a `mod tests { .. }` block or a
/// single item), and without comments, which may name modules in prose.
fn strip_tests(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("//") {
            continue;
        }
        if trimmed.starts_with("#[cfg(test)]") {
            // Skip the next item: up to its matching closing brace, or to the
            // end of a one-line item.
            let mut depth = 0i32;
            let mut opened = false;
            for item in lines.by_ref() {
                for c in item.chars() {
                    match c {
                        '{' => {
                            depth += 1;
                            opened = true;
                        }
                        '}' => depth -= 1,
                        _ => {}
                    }
                }
                if (opened && depth <= 0) || (!opened && item.trim_end().ends_with(';')) {
                    break;
                }
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// `use a::{b, c::{d, e}};` written out as `a::b a::c::d a::c::e`, so that
/// the path scanner sees every imported path whole.
fn expand_use_groups(text: &str) -> String {
    fn expand(prefix: &str, tree: &str, out: &mut Vec<String>) {
        let tree = tree.trim();
        match tree.find('{') {
            None => out.push(format!("{prefix}{tree}")),
            Some(open) => {
                let head = &tree[..open];
                let inner = tree[open + 1..].trim_end().trim_end_matches('}');
                // Split the group on top-level commas.
                let mut depth = 0;
                let mut start = 0;
                let mut items = Vec::new();
                for (k, c) in inner.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            items.push(&inner[start..k]);
                            start = k + 1;
                        }
                        _ => {}
                    }
                }
                items.push(&inner[start..]);
                let prefix = format!("{prefix}{head}");
                for item in items.into_iter().filter(|i| !i.trim().is_empty()) {
                    expand(&prefix, item, out);
                }
            }
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find("use ") {
        let boundary = pos == 0 || !rest.as_bytes()[pos - 1].is_ascii_alphanumeric();
        let Some(end) = rest[pos..].find(';').map(|e| pos + e) else {
            break;
        };
        out.push_str(&rest[..pos]);
        let stmt = &rest[pos + 4..end];
        if boundary && stmt.contains('{') {
            let mut paths = Vec::new();
            expand("", &stmt.split_whitespace().collect::<String>(), &mut paths);
            out.push_str("use ");
            out.push_str(&paths.join(";\nuse "));
        } else {
            out.push_str(&rest[pos..end]);
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Every `a::b::c` path in `text` whose first segment is `crate`, `super`
/// or one of `children`, resolved against `module` to the longest module in
/// `known`.
fn references(
    module: &[String],
    text: &str,
    known: &BTreeSet<Vec<String>>,
) -> BTreeSet<Vec<String>> {
    let mut out = BTreeSet::new();
    let bytes = text.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < bytes.len() {
        if !is_ident(bytes[i]) || (i > 0 && (is_ident(bytes[i - 1]) || bytes[i - 1] == b':')) {
            i += 1;
            continue;
        }
        // Read `seg(::seg)*`, including `{` groups only up to the brace: the
        // module named before a brace is what the item lives in.
        let mut segs = Vec::new();
        let mut j = i;
        loop {
            let s = j;
            while j < bytes.len() && is_ident(bytes[j]) {
                j += 1;
            }
            segs.push(text[s..j].to_string());
            if text[j..].starts_with("::") && bytes.get(j + 2).is_some_and(|&b| is_ident(b)) {
                j += 2;
            } else {
                break;
            }
        }
        i = j.max(i + 1);
        if segs.len() < 2 {
            continue;
        }
        let mut base: Vec<String> = match segs[0].as_str() {
            "crate" => {
                segs.remove(0);
                Vec::new()
            }
            "super" => {
                let mut b = module.to_vec();
                while segs.first().map(String::as_str) == Some("super") {
                    segs.remove(0);
                    b.pop();
                }
                b
            }
            "self" => {
                segs.remove(0);
                module.to_vec()
            }
            _ => {
                let mut child = module.to_vec();
                child.push(segs[0].clone());
                if !known.contains(&child) {
                    continue;
                }
                module.to_vec()
            }
        };
        // The deepest known module along the path is the one depended on.
        let mut target = base.clone();
        for seg in segs {
            base.push(seg);
            if known.contains(&base) {
                target = base.clone();
            } else {
                break;
            }
        }
        if target != module {
            out.insert(target);
        }
    }
    out
}

/// Tarjan's strongly connected components.
fn components(graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<Vec<String>>> {
    struct State<'a> {
        graph: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'a Vec<String>, usize>,
        low: BTreeMap<&'a Vec<String>, usize>,
        stack: Vec<&'a Vec<String>>,
        on_stack: BTreeSet<&'a Vec<String>>,
        next: usize,
        out: Vec<Vec<Vec<String>>>,
    }
    fn visit<'a>(st: &mut State<'a>, v: &'a Vec<String>) {
        st.index.insert(v, st.next);
        st.low.insert(v, st.next);
        st.next += 1;
        st.stack.push(v);
        st.on_stack.insert(v);
        if let Some(edges) = st.graph.get(v) {
            for w in edges {
                if !st.index.contains_key(w) {
                    visit(st, w);
                    let lw = st.low[w];
                    let lv = st.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if st.on_stack.contains(w) {
                    let iw = st.index[w];
                    let lv = st.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
        }
        if st.low[v] == st.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = st.stack.pop() {
                st.on_stack.remove(w);
                comp.push(w.clone());
                if w == v {
                    break;
                }
            }
            st.out.push(comp);
        }
    }
    let mut st = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !st.index.contains_key(v) {
            visit(&mut st, v);
        }
    }
    st.out
}

fn name(m: &[String]) -> String {
    if m.is_empty() {
        "crate".to_string()
    } else {
        m.join("::")
    }
}

#[test]
fn engine_modules_have_no_dependency_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mods = modules(&src);
    let known: BTreeSet<Vec<String>> = mods.keys().cloned().collect();
    assert!(
        known.len() > 20,
        "found only {} modules under {}",
        known.len(),
        src.display()
    );
    let mut graph = BTreeMap::new();
    for (m, text) in &mods {
        // The crate root only declares and re-exports: it is the public
        // surface, not a dependency of the modules it lists.
        let refs = if m.is_empty() {
            BTreeSet::new()
        } else {
            references(m, text, &known)
        };
        graph.insert(m.clone(), refs);
    }
    let circles: Vec<String> = components(&graph)
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|c| {
            let mut names: Vec<String> = c.iter().map(|m| name(m)).collect();
            names.sort();
            let edges: Vec<String> = c
                .iter()
                .flat_map(|a| {
                    graph[a]
                        .iter()
                        .filter(|b| c.contains(b))
                        .map(move |b| format!("{} -> {}", name(a), name(b)))
                })
                .collect();
            format!("{{{}}} via {}", names.join(", "), edges.join("; "))
        })
        .collect();
    assert!(
        circles.is_empty(),
        "module dependency circles:\n{}",
        circles.join("\n")
    );
}

#[test]
fn the_checker_sees_a_circle() {
    // The checker itself must be able to fail: two modules naming each other.
    let known: BTreeSet<Vec<String>> = [vec!["a".to_string()], vec!["b".to_string()]]
        .into_iter()
        .collect();
    let mut graph = BTreeMap::new();
    graph.insert(
        vec!["a".to_string()],
        references(&["a".to_string()], "use crate::b::X;", &known),
    );
    graph.insert(
        vec!["b".to_string()],
        references(&["b".to_string()], "fn f() { super::a::g() }", &known),
    );
    let circles: Vec<_> = components(&graph)
        .into_iter()
        .filter(|c| c.len() > 1)
        .collect();
    assert_eq!(circles.len(), 1);
    // And test blocks are not dependencies.
    let grouped = expand_use_groups("use crate::{a::{X, Y}, b};");
    assert_eq!(grouped, "use crate::a::X;\nuse crate::a::Y;\nuse crate::b;");
    let text = "fn f() {}\n#[cfg(test)]\nmod tests {\n    use crate::b::X;\n}\n";
    assert!(references(&["a".to_string()], &strip_tests(text), &known).is_empty());
}
