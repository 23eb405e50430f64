//! `modcycles`: finds the modules of a crate that import each other in a
//! cycle, from its sources alone, for `tests/lint.sh`.
//!
//!     modcycles [--deny] CRATE_SRC_DIR...
//!
//! A module is a source file (`lib.rs` the crate root, `a.rs` or
//! `a/mod.rs` module `a`, `a/b.rs` module `a::b`). Module A depends on B
//! when A's code (comments and string literals left out) names a path into
//! B: `crate::b::...`, or `super::...` resolved from A. A path names the
//! deepest module it starts with (`crate::a::b::Item`: `a::b` if that
//! module exists, else `a`); a module's own submodules and its ancestors
//! (declaring a child, or a child naming its parent's items) are edges like
//! any other. Bare paths into a child (`b::Item` in `a`) are not followed.
//!
//! It prints every strongly connected component of more than one module,
//! as the modules and one cycle through them; with `--deny` it exits 1 if
//! any crate has one. The layers are meant to be acyclic inside: a reader
//! can stop at any file and know that nothing it uses leads back to it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut deny = false;
    let mut crates = Vec::new();
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--deny" => deny = true,
            "-h" | "--help" => {
                eprintln!("usage: modcycles [--deny] CRATE_SRC_DIR...");
                return ExitCode::from(2);
            }
            _ => crates.push(PathBuf::from(arg)),
        }
    }
    let mut cyclic = false;
    for src in &crates {
        let modules = match read_crate(src) {
            Ok(modules) => modules,
            Err(error) => {
                eprintln!("modcycles: {}: {error}", src.display());
                return ExitCode::from(2);
            }
        };
        let graph = dependencies(&modules);
        let components = cycles(&graph);
        if components.is_empty() {
            println!("modcycles: {}: {} modules, no cycle", src.display(), modules.len());
        }
        for component in components {
            cyclic = true;
            println!("modcycles: {}: {} modules in a cycle: {}", src.display(), component.len(), component.join(", "));
            if let Some(path) = one_cycle(&graph, &component) {
                println!("  for example: {}", path.join(" -> "));
            }
        }
    }
    if deny && cyclic {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Every module of the crate under `src`: its path (`""` for the root)
/// and its source.
fn read_crate(src: &Path) -> std::io::Result<BTreeMap<String, String>> {
    let mut modules = BTreeMap::new();
    let mut pending = vec![src.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                let relative = path.strip_prefix(src).expect("under src");
                modules.insert(module_of(relative), std::fs::read_to_string(&path)?);
            }
        }
    }
    Ok(modules)
}

/// The module a source file (relative to `src`) holds.
fn module_of(relative: &Path) -> String {
    let mut parts: Vec<String> = relative.iter().map(|part| part.to_string_lossy().into_owned()).collect();
    let file = parts.pop().unwrap_or_default();
    let stem = file.trim_end_matches(".rs");
    if !matches!(stem, "lib" | "main" | "mod") || !parts.is_empty() && stem != "mod" {
        parts.push(stem.to_string());
    }
    parts.join("::")
}

/// `source` with comments and string and character literals blanked out,
/// so that a path in them is not taken for code.
fn code_only(source: &str) -> String {
    let bytes = source.as_bytes();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    while i < bytes.len() {
        let rest = &source[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').unwrap_or(rest.len());
            i += end;
        } else if rest.starts_with("/*") {
            let end = rest.find("*/").map_or(rest.len(), |at| at + 2);
            i += end;
        } else if rest.starts_with('"') || rest.starts_with("r#\"") || rest.starts_with("r\"") {
            let (open, close) = if rest.starts_with("r#\"") {
                (3, "\"#")
            } else if rest.starts_with('r') {
                (2, "\"")
            } else {
                (1, "\"")
            };
            let mut j = open;
            loop {
                match rest[j..].find(close) {
                    Some(at)
                        if close == "\"" && open == 1 && rest[..j + at].ends_with('\\') && !rest[..j + at].ends_with("\\\\") =>
                    {
                        j += at + 1;
                    }
                    Some(at) => {
                        j += at + close.len();
                        break;
                    }
                    None => {
                        j = rest.len();
                        break;
                    }
                }
            }
            out.push(' ');
            i += j;
        } else if rest.starts_with('\'') && rest.len() > 2 && (rest.as_bytes()[2] == b'\'' || rest.starts_with("'\\")) {
            let end = rest[1..].find('\'').map_or(1, |at| at + 2);
            out.push(' ');
            i += end;
        } else {
            let c = rest.chars().next().expect("not at the end");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// The paths `code` names: each `crate::a::b` or `super::...` (resolved
/// from `module`) as its segments from the crate root; a brace group
/// (`crate::{a, b::{c, d}}`) names each of its paths.
fn paths(module: &str, code: &str) -> Vec<Vec<String>> {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let mut found = Vec::new();
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let starts_word = i == 0 || !word(chars[i - 1]) && chars[i - 1] != ':';
        let ahead: String = chars[i..chars.len().min(i + 7)].iter().collect();
        if starts_word && (ahead.starts_with("crate::") || ahead.starts_with("super::")) {
            let base: Vec<String> = if ahead.starts_with("crate::") {
                i += 7;
                Vec::new()
            } else {
                let mut base: Vec<String> = module.split("::").filter(|s| !s.is_empty()).map(String::from).collect();
                base.pop();
                i += 7;
                while chars[i..].starts_with(&['s', 'u', 'p', 'e', 'r', ':', ':']) {
                    base.pop();
                    i += 7;
                }
                base
            };
            i = path_tail(&chars, i, base, &mut found);
        } else {
            i += 1;
        }
    }
    found
}

/// Reads the rest of a path from `chars[i]` on (segments, `::`, brace
/// groups), each complete path onto `found`; answers where it ended.
fn path_tail(chars: &[char], mut i: usize, mut segments: Vec<String>, found: &mut Vec<Vec<String>>) -> usize {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    loop {
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        if i < chars.len() && chars[i] == '{' {
            i += 1;
            loop {
                while i < chars.len() && (chars[i].is_whitespace() || chars[i] == ',') {
                    i += 1;
                }
                if i >= chars.len() || chars[i] == '}' {
                    // The group's own prefix names nothing more (`self` would).
                    return i + 1;
                }
                let before = i;
                i = path_tail(chars, i, segments.clone(), found);
                // `as name` and anything else up to the next item.
                while i < chars.len() && chars[i] != ',' && chars[i] != '}' {
                    i += 1;
                }
                if i == before {
                    i += 1;
                }
            }
        }
        let start = i;
        while i < chars.len() && word(chars[i]) {
            i += 1;
        }
        if i == start {
            found.push(segments);
            return i;
        }
        segments.push(chars[start..i].iter().collect());
        if chars[i..].starts_with(&[':', ':']) {
            i += 2;
        } else {
            found.push(segments);
            return i;
        }
    }
}

/// Which module each module depends on (never itself).
fn dependencies(modules: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph = BTreeMap::new();
    for (module, source) in modules {
        let code = code_only(source);
        let mut targets = BTreeSet::new();
        for path in paths(module, &code) {
            // The deepest module the path starts with.
            let target = (0..=path.len())
                .rev()
                .map(|len| path[..len].join("::"))
                .find(|prefix| modules.contains_key(prefix))
                .unwrap_or_default();
            if &target != module {
                targets.insert(target);
            }
        }
        graph.insert(module.clone(), targets);
    }
    graph
}

/// The strongly connected components of more than one module (Tarjan),
/// each sorted.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        next: usize,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(state: &mut State<'a>, node: &'a str) {
        state.index.insert(node, state.next);
        state.low.insert(node, state.next);
        state.next += 1;
        state.stack.push(node);
        state.on_stack.insert(node);
        for target in state.graph.get(node).into_iter().flatten() {
            let target = target.as_str();
            if !state.graph.contains_key(target) {
                continue;
            }
            if !state.index.contains_key(target) {
                visit(state, target);
                let low = state.low[node].min(state.low[target]);
                state.low.insert(node, low);
            } else if state.on_stack.contains(target) {
                let low = state.low[node].min(state.index[target]);
                state.low.insert(node, low);
            }
        }
        if state.low[node] == state.index[node] {
            let mut component = Vec::new();
            while let Some(top) = state.stack.pop() {
                state.on_stack.remove(top);
                component.push(top.to_string());
                if top == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                state.found.push(component);
            }
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !state.index.contains_key(node.as_str()) {
            visit(&mut state, node);
        }
    }
    state.found
}

/// One cycle through the first module of `component`, by breadth-first
/// search inside it.
fn one_cycle(graph: &BTreeMap<String, BTreeSet<String>>, component: &[String]) -> Option<Vec<String>> {
    let members: BTreeSet<&str> = component.iter().map(String::as_str).collect();
    let start = component.first()?.as_str();
    let mut previous: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for target in graph.get(node).into_iter().flatten().map(String::as_str).filter(|t| members.contains(t)) {
            if target == start {
                let mut path = vec![start.to_string()];
                let mut at = node;
                while at != start {
                    path.push(at.to_string());
                    at = previous[at];
                }
                path.push(start.to_string());
                let last = path.len() - 1;
                path[1..last].reverse();
                return Some(path.into_iter().map(|m| if m.is_empty() { "crate".into() } else { m }).collect());
            }
            if !previous.contains_key(target) && target != start {
                previous.insert(target, node);
                queue.push_back(target);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crate_of(files: &[(&str, &str)]) -> BTreeMap<String, String> {
        files.iter().map(|(path, source)| (module_of(Path::new(path)), source.to_string())).collect()
    }

    #[test]
    fn files_name_their_modules() {
        assert_eq!(module_of(Path::new("lib.rs")), "");
        assert_eq!(module_of(Path::new("a.rs")), "a");
        assert_eq!(module_of(Path::new("a/mod.rs")), "a");
        assert_eq!(module_of(Path::new("a/b.rs")), "a::b");
        assert_eq!(module_of(Path::new("a/lib.rs")), "a::lib");
    }

    #[test]
    fn comments_and_strings_name_nothing() {
        let code = code_only("use crate::a; // crate::b\n/* crate::c */ let s = \"crate::d\"; let c = 'x'; crate::e::f();");
        let found: Vec<String> = paths("m", &code).into_iter().map(|p| p.join("::")).collect();
        assert_eq!(found, ["a", "e::f"]);
    }

    #[test]
    fn brace_groups_name_each_path() {
        let found: Vec<String> = paths("m", "use crate::{a, b::{c, d as e}, f::G};").into_iter().map(|p| p.join("::")).collect();
        assert_eq!(found, ["a", "b::c", "b::d", "f::G"]);
        let found: Vec<String> = paths("x::y", "use super::{gdt, smp};").into_iter().map(|p| p.join("::")).collect();
        assert_eq!(found, ["x::gdt", "x::smp"]);
    }

    #[test]
    fn super_paths_resolve_from_the_module() {
        let found: Vec<String> = paths("a::b", "super::c::X; super::super::d::Y").into_iter().map(|p| p.join("::")).collect();
        assert_eq!(found, ["a::c::X", "d::Y"]);
    }

    #[test]
    fn a_path_names_the_deepest_module_it_starts_with() {
        let modules =
            crate_of(&[("lib.rs", ""), ("a.rs", "crate::b::c::Item; crate::b::Other;"), ("b/mod.rs", ""), ("b/c.rs", "")]);
        let graph = dependencies(&modules);
        assert_eq!(graph["a"], BTreeSet::from(["b::c".to_string(), "b".to_string()]));
    }

    #[test]
    fn cycles_are_found_and_shown() {
        let modules = crate_of(&[
            ("lib.rs", ""),
            ("a.rs", "use crate::b::X;"),
            ("b.rs", "use crate::c::Y;"),
            ("c.rs", "use crate::a::Z;"),
            ("d.rs", "use crate::a::Z;"),
        ]);
        let graph = dependencies(&modules);
        let found = cycles(&graph);
        assert_eq!(found, [vec!["a".to_string(), "b".to_string(), "c".to_string()]]);
        assert_eq!(one_cycle(&graph, &found[0]).unwrap(), ["a", "b", "c", "a"]);
    }

    #[test]
    fn an_acyclic_crate_has_none() {
        let modules = crate_of(&[("lib.rs", "mod a; mod b;"), ("a.rs", "use crate::b::X;"), ("b.rs", "")]);
        assert!(cycles(&dependencies(&modules)).is_empty());
    }
}
