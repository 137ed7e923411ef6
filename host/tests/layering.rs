//! The crates' structure, read from their sources: no import circle
//! between the modules of `weft-core` or of `weft-host`; the core's rooms
//! and the host's layers import downwards only (core: `math` … `mesh` →
//! `model` → `contact` → `physics` → `gnn` → `step`; host: `view` →
//! `learn` → `sim`, never back); and no function outside tests in the
//! core, the host or the firmware is longer than 80 lines. A module's imports are
//! the `crate::…` and `super::…` paths outside comments.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, &mut files);
    files
}

/// Module name (`learn::eval`; `` for the crate root) → source file.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    rust_files(src)
        .into_iter()
        .filter_map(|f| {
            let rel = f.strip_prefix(src).ok()?.with_extension("");
            let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
            if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
                parts.pop();
            }
            (parts != ["main"]).then(|| (parts.join("::"), f))
        })
        .collect()
}

/// The modules each module imports (itself, its ancestors and its
/// descendants left out).
fn imports(mods: &BTreeMap<String, PathBuf>) -> BTreeMap<String, BTreeSet<String>> {
    let related = |a: &str, b: &str| a == b || a.starts_with(&format!("{b}::")) || b.starts_with(&format!("{a}::"));
    let resolve = |path: &str| -> Option<String> {
        let parts: Vec<&str> = path.split("::").filter(|p| !p.is_empty()).collect();
        (1..=parts.len()).rev().map(|k| parts[..k].join("::")).find(|c| mods.contains_key(c))
    };
    let word =
        |s: &str| s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':').collect::<String>();
    let mut out = BTreeMap::new();
    for (m, file) in mods {
        let text = std::fs::read_to_string(file).unwrap();
        let mut deps = BTreeSet::new();
        for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (i, _) in line.match_indices("crate::") {
                if let Some(d) = resolve(&word(&line[i + 7..])) {
                    deps.insert(d);
                }
            }
            for (i, _) in line.match_indices("super::") {
                let parent = m.rsplit_once("::").map_or("", |(p, _)| p);
                let rest = word(&line[i + 7..]);
                if let Some(d) = resolve(&if parent.is_empty() { rest } else { format!("{parent}::{rest}") }) {
                    deps.insert(d);
                }
            }
        }
        deps.retain(|d| !d.is_empty() && !related(m, d));
        out.insert(m.clone(), deps);
    }
    out
}

/// An import circle, if there is one.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        u: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(u.to_string(), 1);
        stack.push(u.to_string());
        for v in graph.get(u).into_iter().flatten() {
            match state.get(v) {
                Some(1) => {
                    let start = stack.iter().position(|s| s == v).unwrap_or(0);
                    let mut c = stack[start..].to_vec();
                    c.push(v.clone());
                    return Some(c);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(v, graph, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state.insert(u.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for u in graph.keys() {
        if !state.contains_key(u) {
            if let Some(c) = visit(u, graph, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

fn src(krate: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(krate).join("src")
}

#[test]
fn no_import_circles_in_core_or_host() {
    for krate in ["core", "host"] {
        let graph = imports(&modules(&src(krate)));
        assert!(graph.len() > 10, "{krate}: only {} modules found", graph.len());
        if let Some(c) = circle(&graph) {
            panic!("{krate}: import circle {}", c.join(" → "));
        }
    }
}

/// The imports of `krate` that go from a module to one of a higher rank
/// (`ranks`: a top-level module's name and its rank; modules not named
/// are not ranked).
fn upward_imports(krate: &str, ranks: &[(&str, u32)]) -> Vec<String> {
    let rank = |m: &str| {
        let top = m.split("::").next().unwrap_or("");
        ranks.iter().find(|(name, _)| *name == top).map(|&(_, r)| r)
    };
    let graph = imports(&modules(&src(krate)));
    for (name, _) in ranks {
        assert!(graph.keys().any(|m| m.split("::").next() == Some(name)), "{krate}: no {name} module");
    }
    upward(&graph, rank)
}

/// The imports of `graph` from a module to one `rank` puts above it.
fn upward(graph: &BTreeMap<String, BTreeSet<String>>, rank: impl Fn(&str) -> Option<u32>) -> Vec<String> {
    let mut up = Vec::new();
    for (m, deps) in graph {
        for d in deps {
            if let (Some(a), Some(b)) = (rank(m), rank(d)) {
                if b > a {
                    up.push(format!("{m} → {d}"));
                }
            }
        }
    }
    up
}

#[test]
fn host_layers_import_downwards() {
    let up = upward_imports("host", &[("sim", 0), ("learn", 1), ("view", 2)]);
    assert!(up.is_empty(), "host: imports of a layer above: {up:?}");
    // Inside `learn`: data, the network, quantisation, evaluation, training.
    let graph = imports(&modules(&src("host")));
    let ranks = ["learn::data", "learn::network", "learn::quantise", "learn::eval", "learn::train"];
    let rank = |m: &str| ranks.iter().position(|r| m == *r || m.starts_with(&format!("{r}::"))).map(|r| r as u32);
    let up = upward(&graph, rank);
    assert!(up.is_empty(), "learn: imports of a room above: {up:?}");
    assert!(graph["learn::eval::gain"].contains("learn::quantise"), "the check sees learn's rooms");
}

#[test]
fn core_rooms_import_downwards() {
    let ranks = [
        ("math", 0),
        ("flags", 0),
        ("probe", 0),
        ("mesh", 1),
        ("model", 2),
        ("contact", 3),
        ("physics", 4),
        ("gnn", 5),
        ("step", 6),
        ("storage", 7),
    ];
    let up = upward_imports("core", &ranks);
    assert!(up.is_empty(), "core: imports of a room above: {up:?}");
    // The check measures: with `physics` ranked below `model`, its imports
    // of the model are upward.
    let swapped = [("model", 1), ("physics", 0)];
    assert!(!upward_imports("core", &swapped).is_empty());
}

/// The checks see what they check: a circle and an upward import made up
/// here are found.
#[test]
fn the_checks_find_a_circle() {
    let g: BTreeMap<String, BTreeSet<String>> = [
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        ("b".to_string(), BTreeSet::from(["c".to_string()])),
        ("c".to_string(), BTreeSet::from(["a".to_string()])),
    ]
    .into_iter()
    .collect();
    assert_eq!(circle(&g), Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
    let host = imports(&modules(&src("host")));
    assert!(host["learn::eval::command"].contains("learn::data"), "{:?}", host["learn::eval::command"]);
}

/// Lines of each function (outside `#[cfg(test)]` modules): from its `fn`
/// line to the closing brace at the same indentation.
fn long_functions(src: &Path, limit: usize) -> Vec<String> {
    let mut out = Vec::new();
    for file in rust_files(src) {
        let module = file.strip_prefix(src).unwrap_or(&file).display().to_string();
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().take_while(|l| l.trim() != "#[cfg(test)]").collect();
        for (i, line) in lines.iter().enumerate() {
            let body = line.trim_start();
            let indent = line.len() - body.len();
            let words: Vec<&str> = body.split_whitespace().collect();
            let Some(at) = words.iter().position(|w| *w == "fn") else { continue };
            let prefix_ok = words[..at].iter().all(|w| ["pub", "pub(crate)", "const", "unsafe", "async"].contains(w));
            if !prefix_ok || body.ends_with(';') {
                continue;
            }
            let close = " ".repeat(indent) + "}";
            if let Some(end) = lines[i..].iter().position(|l| l.trim_end() == close) {
                if end + 1 > limit {
                    out.push(format!("{module}: {} ({} lines)", words[at + 1], end + 1));
                }
            }
        }
    }
    out
}

#[test]
fn functions_fit_a_reader() {
    for krate in ["core", "host", "firmware"] {
        let long = long_functions(&src(krate), 80);
        assert!(long.is_empty(), "{krate}: functions over 80 lines: {long:?}");
    }
    // The check measures: the host has functions over 40 lines.
    assert!(!long_functions(&src("host"), 40).is_empty());
}
