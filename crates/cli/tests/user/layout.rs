//! The house's layout (issue 38, part 5): within every crate the top-level modules depend on
//! each other one way, with no circle. The engine had target → safety → scratch → target, and
//! `run` had runner ↔ status; a circle is where a module with one job quietly takes a second.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a file of `src` belongs to (`lib` or `main` for the root).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("a file under src");
    let first = rel.components().next().expect("a path").as_os_str().to_string_lossy().to_string();
    first.trim_end_matches(".rs").to_string()
}

/// A line without its comment (a `//` outside a string literal).
fn without_comment(line: &str) -> &str {
    let (mut in_str, mut escaped) = (false, false);
    let b = line.as_bytes();
    for i in 0..b.len() {
        match b[i] {
            _ if escaped => escaped = false,
            b'\\' if in_str => escaped = true,
            b'"' => in_str = !in_str,
            b'/' if !in_str && b.get(i + 1) == Some(&b'/') => return &line[..i],
            _ => {}
        }
    }
    line
}

/// A file's code: comments dropped, and every item under `#[cfg(test)]` (a `mod x;` line or a
/// braced block), which may reach anywhere.
fn code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            // Skip the item: up to its `;`, or to the end of the block it opens.
            let mut depth = 0i32;
            for l in lines.by_ref() {
                let l = without_comment(l);
                depth += l.matches('{').count() as i32 - l.matches('}').count() as i32;
                if depth <= 0 && (l.contains('}') || l.trim_end().ends_with(';')) {
                    break;
                }
            }
            continue;
        }
        out.push_str(without_comment(line));
        out.push('\n');
    }
    out
}

/// The names a module declares public (`pub struct X`, `pub fn x`, …): what `pub use m::*`
/// brings to the root.
fn public_names(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in code(text).lines() {
        let t = line.trim_start();
        let Some(rest) = t.strip_prefix("pub ") else { continue };
        for kind in ["struct ", "enum ", "fn ", "trait ", "type ", "const ", "static ", "mod "] {
            if let Some(name) = rest.strip_prefix(kind) {
                out.push(ident(name).to_string());
            }
        }
    }
    out
}

fn ident(s: &str) -> &str {
    let end = s.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..end]
}

/// The names a root re-exports from its own modules: `pub use runner::{A, B}` → A, B → runner;
/// `pub use m::*` → every public name of `m` (`module_text` gives a module's source).
fn reexports(root: &str, modules: &BTreeSet<String>, module_text: &dyn Fn(&str) -> String) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let text = code(root);
    for stmt in text.split(';') {
        let Some(at) = stmt.find("pub use ") else { continue };
        let rest = stmt[at + 8..].trim();
        let module = ident(rest);
        if !modules.contains(module) {
            continue;
        }
        let items = rest[module.len()..].trim_start_matches("::");
        if items.trim() == "*" {
            for name in public_names(&module_text(module)) {
                out.insert(name, module.to_string());
            }
            continue;
        }
        let items = items.trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let item = item.trim();
            let name = item.rsplit(" as ").next().unwrap_or(item).trim();
            let name = name.rsplit("::").next().unwrap_or(name);
            if !name.is_empty() {
                out.insert(name.to_string(), module.to_string());
            }
        }
    }
    out
}

/// The crate's modules a file's code names: `crate::m::…`, `crate::Name` of a re-export, and
/// the first segment of each item of `use crate::{…}`; `super::` too where it is the crate's
/// root (`top`: the file is a top-level module).
fn uses(text: &str, modules: &BTreeSet<String>, re: &BTreeMap<String, String>, top: bool) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut add = |name: &str| {
        if modules.contains(name) {
            out.insert(name.to_string());
        } else if let Some(m) = re.get(name) {
            out.insert(m.clone());
        }
    };
    let text = if top { text.replace("super::", "crate::") } else { text.to_string() };
    let mut rest = text.as_str();
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + 7..];
        if let Some(group) = rest.strip_prefix('{') {
            let (mut depth, mut end) = (1, group.len());
            for (i, c) in group.char_indices() {
                depth += match c {
                    '{' => 1,
                    '}' => -1,
                    _ => 0,
                };
                if depth == 0 {
                    end = i;
                    break;
                }
            }
            let mut depth = 0;
            let mut start = 0;
            let inner = &group[..end];
            for (i, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        add(ident(inner[start..i].trim()));
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            add(ident(inner[start..].trim()));
        } else {
            add(ident(rest));
        }
    }
    out
}

/// A circle in `graph`, as the modules around it, if there is one.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            let mut c = path[i..].to_vec();
            c.push(m.to_string());
            return Some(c);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for next in graph.get(m).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|m| visit(m, graph, &mut Vec::new(), &mut done))
}

/// The module graph of the crate at `src`: each top-level module → the others its code names.
fn graph_of(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rs_files(src, &mut files);
    let modules: BTreeSet<String> =
        files.iter().map(|f| module_of(src, f)).filter(|m| m != "lib" && m != "main").collect();
    let root = ["lib.rs", "main.rs"].iter().map(|r| src.join(r)).find(|p| p.exists()).expect("a crate root");
    let module_text = |m: &str| {
        [src.join(format!("{m}.rs")), src.join(m).join("mod.rs")]
            .iter()
            .find_map(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default()
    };
    let re = reexports(&std::fs::read_to_string(&root).unwrap_or_default(), &modules, &module_text);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let m = module_of(src, f);
        if m == "lib" || m == "main" {
            continue;
        }
        let text = code(&std::fs::read_to_string(f).unwrap_or_default());
        // `super::` names the root from `src/m.rs` and `src/m/mod.rs`, not from deeper files.
        let rel = f.strip_prefix(src).expect("under src");
        let top = rel.components().count() == 1
            || rel.file_name().is_some_and(|n| n == "mod.rs") && rel.components().count() == 2;
        let used = uses(&text, &modules, &re, top);
        graph.entry(m.clone()).or_default().extend(used.into_iter().filter(|u| *u != m));
    }
    graph
}

#[test]
fn no_crate_has_a_circle_of_modules() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut circles = Vec::new();
    let mut seen = 0;
    for e in std::fs::read_dir(&crates).expect("the crates directory").flatten() {
        let src = e.path().join("src");
        if !src.is_dir() {
            continue;
        }
        seen += 1;
        if let Some(c) = circle(&graph_of(&src)) {
            circles.push(format!("{}: {}", e.file_name().to_string_lossy(), c.join(" → ")));
        }
    }
    assert!(seen >= 10, "found {seen} crates under {}", crates.display());
    assert!(circles.is_empty(), "modules that use each other in a circle:\n{}", circles.join("\n"));
}

/// The reader finds circles where they are: the engine's of 5de1419 and `run`'s, as files.
#[test]
fn the_reader_sees_a_circle_through_re_exports_and_use_groups() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir(src.join("safety")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod runner;\nmod status;\npub use runner::{Outcome, Runner};\n").unwrap();
    std::fs::write(src.join("runner.rs"), "use crate::status::settle;\npub struct Outcome;\n").unwrap();
    std::fs::write(src.join("status.rs"), "use crate::{\n    Error,\n    Outcome,\n};\n").unwrap();
    std::fs::write(src.join("target.rs"), "use crate::safety::{self, Verdict};\n").unwrap();
    std::fs::write(src.join("safety/mod.rs"), "// crate::target is only named here\nuse crate::scratch;\n").unwrap();
    std::fs::write(src.join("scratch.rs"), "fn f() { crate::target::set_direct(); }\n").unwrap();
    let g = graph_of(src);
    assert_eq!(g["status"], BTreeSet::from(["runner".to_string()]));
    assert_eq!(g["safety"], BTreeSet::from(["scratch".to_string()]));
    let c = circle(&g).expect("a circle");
    assert_eq!(c.first(), c.last());
    assert!(c.len() == 3 || c.len() == 4, "{c:?}");
    std::fs::write(src.join("status.rs"), "use crate::Error;\n").unwrap();
    std::fs::write(
        src.join("scratch.rs"),
        "#[cfg(test)]\nmod tests {\n    use crate::target;\n}\n\nfn g() { let u = \"http://x\"; crate::walk::go(); }\n",
    )
    .unwrap();
    std::fs::write(src.join("walk.rs"), "pub fn go() {}\n").unwrap();
    let g = graph_of(src);
    assert_eq!(circle(&g), None);
    assert!(g["scratch"].contains("walk"), "code after a test module and after a // in a string is read: {g:?}");
    // `pub use m::*` and `super::` from a top-level file reach the root's names.
    std::fs::write(src.join("lib.rs"), "mod runner;\nmod status;\npub use runner::*;\n").unwrap();
    std::fs::write(src.join("status.rs"), "use super::Outcome;\n").unwrap();
    let g = graph_of(src);
    assert_eq!(g["status"], BTreeSet::from(["runner".to_string()]));
}
