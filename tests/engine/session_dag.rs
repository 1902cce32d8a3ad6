//! The session library's files form a DAG, and none is too long to read.
//!
//! `src/session/` is the authority's library: its folders name its
//! concepts (`docs/architecture.md` draws the map), and the map stays
//! drawable only while no file reaches back into one that reaches it. This
//! test reads every file's references to other files of the library (`use`
//! trees, and `super::`, `self::`, `crate::session::` paths in code) and
//! fails on a cycle among files, naming the references that close it, and
//! on a file over [`MAX_LINES`] lines.
//!
//! What counts as a reference, and why:
//! - comments and string literals are skipped (a doc link to another
//!   file is not a dependency);
//! - `#[cfg(test)]` items and files are skipped: a unit test may drive the
//!   whole authority (nothing depends on a test, so it closes no cycle in
//!   the library itself);
//! - a name a folder re-exports (`pub use`) is followed to the file that
//!   defines it, so a folder's face does not stand in for its insides;
//! - `mod` declarations are structure, not dependencies.
//!
//! Run it alone with `cargo test --test engine session_dag -- --nocapture` to see
//! the graph.

use regex::Regex;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The longest a file of the library may be.
const MAX_LINES: usize = 1200;

/// One file of the library.
struct File {
    /// Its module path below `session` (`["store", "persist"]`).
    module: Vec<String>,
    /// Relative to `src/session/`, for messages.
    name: String,
    lines: usize,
    /// Declared under `#[cfg(test)]` (or below such a module).
    test_only: bool,
    /// Comments, literals and test items removed.
    code: String,
    /// Whether it is a folder's face (`mod.rs`): children resolve below it.
    is_face: bool,
}

#[test]
fn session_files_form_a_dag_of_short_files() {
    // Another tree may be checked (an old commit's `src/session`, say).
    let root = std::env::var_os("SESSION_DAG_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("src/session"));
    let report = check(&root);
    println!("{}", report.text);
    assert!(report.ok, "{}", report.problems.join("\n"));
}

struct Report {
    ok: bool,
    problems: Vec<String>,
    text: String,
}

fn check(root: &Path) -> Report {
    let mut paths = Vec::new();
    collect(root, &mut paths);
    paths.sort();
    let mut files: Vec<File> = paths.iter().map(|p| read(root, p)).collect();
    mark_test_only(root, &mut files);
    let by_module: BTreeMap<Vec<String>, usize> = files
        .iter()
        .enumerate()
        .map(|(i, f)| (f.module.clone(), i))
        .collect();
    let aliases: Vec<BTreeMap<String, Vec<String>>> = files.iter().map(re_exports).collect();

    let mut problems = Vec::new();
    for file in &files {
        if file.lines > MAX_LINES {
            problems.push(format!(
                "{} has {} lines, over {MAX_LINES}: split it along a concept",
                file.name, file.lines
            ));
        }
    }

    // from → to → the references that make the edge.
    let mut edges: BTreeMap<usize, BTreeMap<usize, BTreeSet<String>>> = BTreeMap::new();
    for (from, file) in files.iter().enumerate() {
        if file.test_only {
            continue;
        }
        for reference in references(file, &files) {
            let Some(to) = resolve(&file.module, &reference, &by_module, &aliases, 0) else {
                continue;
            };
            if to != from && !files[to].test_only {
                edges
                    .entry(from)
                    .or_default()
                    .entry(to)
                    .or_default()
                    .insert(reference.join("::"));
            }
        }
    }

    let mut text = String::from("session/ file graph (file -> files it uses):\n");
    for (from, tos) in &edges {
        let names: Vec<&str> = tos.keys().map(|to| files[*to].name.as_str()).collect();
        text.push_str(&format!(
            "  {} -> {}\n",
            files[*from].name,
            names.join(", ")
        ));
    }
    let (folders, folder_circles) = folder_graph(&files, &edges);
    text.push_str(&folders);
    problems.extend(folder_circles);

    for component in cycles(files.len(), &edges) {
        let members: BTreeSet<usize> = component.iter().copied().collect();
        let mut lines = vec![format!(
            "a circle of {} files: {}",
            component.len(),
            component
                .iter()
                .map(|i| files[*i].name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )];
        for from in &component {
            for (to, why) in edges.get(from).into_iter().flatten() {
                if members.contains(to) {
                    let why: Vec<&str> = why.iter().map(String::as_str).take(3).collect();
                    lines.push(format!(
                        "    {} -> {} ({})",
                        files[*from].name,
                        files[*to].name,
                        why.join(", ")
                    ));
                }
            }
        }
        problems.push(lines.join("\n"));
    }
    Report {
        ok: problems.is_empty(),
        problems,
        text,
    }
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        panic!("{} cannot be read", dir.display());
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn read(root: &Path, path: &Path) -> File {
    let source = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{} cannot be read: {e}", path.display()));
    let relative = path.strip_prefix(root).unwrap_or(path);
    let name = relative.to_string_lossy().into_owned();
    let mut module: Vec<String> = relative
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let is_face = module.last().is_some_and(|m| m == "mod");
    if is_face {
        module.pop();
    }
    File {
        module,
        name,
        lines: source.lines().count(),
        test_only: false,
        code: drop_visibility_paths(&drop_test_items(&strip(&source))),
        is_face,
    }
}

/// Files declared by `#[cfg(test)] mod x;`, and everything below them.
fn mark_test_only(root: &Path, files: &mut [File]) {
    let declared = Regex::new(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;")
        .expect("a valid pattern");
    let mut test_modules: Vec<Vec<String>> = Vec::new();
    for file in files.iter() {
        // The test items were dropped from `code`; read the source again.
        let base = file.module.clone();
        let source = std::fs::read_to_string(root.join(&file.name)).unwrap_or_default();
        for capture in declared.captures_iter(&strip(&source)) {
            let mut module = base.clone();
            module.push(capture[1].to_string());
            test_modules.push(module);
        }
    }
    for file in files.iter_mut() {
        file.test_only = test_modules
            .iter()
            .any(|m| file.module.starts_with(m.as_slice()));
    }
}

/// The source without comments, string and char literals (each replaced
/// by a space, so positions of code stay apart).
fn strip(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && !chars
                .get(i.wrapping_sub(1))
                .is_some_and(|p| p.is_alphanumeric() || *p == '_')
        {
            // A raw string: r"…", r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= chars.len() {
                    break;
                }
                if chars[j] == '"' && (0..hashes).all(|k| chars.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            i = j;
            out.push(' ');
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push(' ');
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}'), or a lifetime ('a).
            if next == Some('\\') {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
                out.push(' ');
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push(' ');
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// `pub(in crate::session)` names who may see an item, not what it uses:
/// it is read as `pub`.
fn drop_visibility_paths(code: &str) -> String {
    Regex::new(r"\bpub\s*\(\s*in\s+[^)]*\)")
        .expect("a valid pattern")
        .replace_all(code, "pub")
        .into_owned()
}

/// Drops each item under `#[cfg(test)]`: up to its `;`, or its braced
/// body, whichever comes first.
fn drop_test_items(code: &str) -> String {
    let marker = "#[cfg(test)]";
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find(marker) {
        out.push_str(&rest[..at]);
        let after = &rest[at + marker.len()..];
        let mut depth = 0usize;
        let mut end = after.len();
        for (k, c) in after.char_indices() {
            match c {
                ';' if depth == 0 => {
                    end = k + 1;
                    break;
                }
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Every path in `file` that may name another file: its `use` trees
/// expanded, and the `crate::`/`super::`/`self::` paths (and, in a
/// folder's face, paths through its children) in its code.
fn references(file: &File, files: &[File]) -> Vec<Vec<String>> {
    let use_decl =
        Regex::new(r"\b(?:pub(?:\s*\([^)]*\))?\s+)?use\s+([^;]+);").expect("a valid pattern");
    let mut found = Vec::new();
    for capture in use_decl.captures_iter(&file.code) {
        expand(&capture[1], &mut Vec::new(), &mut found);
    }
    let without_uses = use_decl.replace_all(&file.code, " ");
    let path = Regex::new(r"\b(?:crate|super|self)(?:\s*::\s*\w+)+").expect("a valid pattern");
    for m in path.find_iter(&without_uses) {
        found.push(segments(m.as_str()));
    }
    if file.is_face {
        let children: Vec<&str> = files
            .iter()
            .filter(|f| {
                f.module.len() == file.module.len() + 1 && f.module.starts_with(&file.module)
            })
            .filter_map(|f| f.module.last().map(String::as_str))
            .collect();
        let child_path = Regex::new(r"(?:^|[^\w:])(\w+(?:\s*::\s*\w+)+)").expect("a valid pattern");
        for capture in child_path.captures_iter(&without_uses) {
            let segs = segments(&capture[1]);
            if children.contains(&segs[0].as_str()) {
                let mut full = vec!["self".to_string()];
                full.extend(segs);
                found.push(full);
            }
        }
    }
    found
}

fn segments(path: &str) -> Vec<String> {
    path.split("::")
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Expands a `use` tree (`a::{b, c::{d as e}, *}`) into its paths.
fn expand(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head = segments(&tree[..open]);
        let close = tree.rfind('}').unwrap_or(tree.len());
        let inner = &tree[open + 1..close];
        let depth_before = prefix.len();
        prefix.extend(head);
        for part in split_top(inner) {
            expand(part, prefix, out);
        }
        prefix.truncate(depth_before);
    } else {
        let tree = tree.split(" as ").next().unwrap_or(tree);
        let mut path = prefix.clone();
        path.extend(segments(tree));
        if !path.is_empty() {
            out.push(path);
        }
    }
}

fn split_top(inner: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (k, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

/// The names a file re-exports (`pub use a::b::Name;`, `… as Other`), with
/// the path they stand for.
fn re_exports(file: &File) -> BTreeMap<String, Vec<String>> {
    let re_export =
        Regex::new(r"\bpub(?:\s*\([^)]*\))?\s+use\s+([^;]+);").expect("a valid pattern");
    let mut names = BTreeMap::new();
    for capture in re_export.captures_iter(&file.code) {
        let mut paths = Vec::new();
        expand_named(&capture[1], &mut Vec::new(), &mut paths);
        for (name, path) in paths {
            names.insert(name, path);
        }
    }
    names
}

/// [`expand`], keeping the name each path is known by.
fn expand_named(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<(String, Vec<String>)>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head = segments(&tree[..open]);
        let close = tree.rfind('}').unwrap_or(tree.len());
        let depth_before = prefix.len();
        prefix.extend(head);
        for part in split_top(&tree[open + 1..close]) {
            expand_named(part, prefix, out);
        }
        prefix.truncate(depth_before);
    } else {
        let mut halves = tree.split(" as ");
        let path_text = halves.next().unwrap_or(tree);
        let mut path = prefix.clone();
        path.extend(segments(path_text));
        let name = halves
            .next()
            .map(|s| s.trim().to_string())
            .or_else(|| path.last().cloned());
        if let Some(name) = name.filter(|n| n != "*" && n != "self") {
            out.push((name, path));
        }
    }
}

/// The file `path` (written in module `from`) names, if it is in the
/// library: the deepest module it reaches, or the file that defines the
/// name a folder re-exports.
fn resolve(
    from: &[String],
    path: &[String],
    by_module: &BTreeMap<Vec<String>, usize>,
    aliases: &[BTreeMap<String, Vec<String>>],
    depth: usize,
) -> Option<usize> {
    if depth > 8 || path.is_empty() {
        return None;
    }
    let mut module: Vec<String> = from.to_vec();
    let mut rest = path;
    match rest[0].as_str() {
        "crate" => {
            if rest.get(1).map(String::as_str) != Some("session") {
                return None;
            }
            module.clear();
            rest = &rest[2..];
        }
        "super" => {
            while rest.first().map(String::as_str) == Some("super") {
                // Above `session` is outside the library.
                module.pop()?;
                rest = &rest[1..];
            }
        }
        "self" => rest = &rest[1..],
        first => {
            // A 2018 relative path through a child module of `from`.
            let mut child = from.to_vec();
            child.push(first.to_string());
            if !by_module.contains_key(&child) {
                return None;
            }
        }
    }
    while let Some(next) = rest.first() {
        let mut child = module.clone();
        child.push(next.clone());
        if by_module.contains_key(&child) {
            module = child;
            rest = &rest[1..];
        } else {
            break;
        }
    }
    let at = *by_module.get(&module)?;
    if let Some(name) = rest.first() {
        if let Some(target) = aliases[at].get(name) {
            let mut followed = target.clone();
            followed.extend(rest[1..].iter().cloned());
            if let Some(defined) = resolve(&module, &followed, by_module, aliases, depth + 1) {
                return Some(defined);
            }
        }
    }
    Some(at)
}

/// The folders' graph: which folder's files use which other folder's, and
/// a problem for each circle among folders (the map in
/// `docs/architecture.md` is drawn by folder, so it must stay a DAG too).
fn folder_graph(
    files: &[File],
    edges: &BTreeMap<usize, BTreeMap<usize, BTreeSet<String>>>,
) -> (String, Vec<String>) {
    let folder = |f: &File| -> String {
        let depth = if f.is_face {
            f.module.len()
        } else {
            f.module.len().saturating_sub(1)
        };
        if depth == 0 {
            "session/".to_string()
        } else {
            format!("{}/", f.module[..depth].join("/"))
        }
    };
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, tos) in edges {
        for to in tos.keys() {
            let (a, b) = (folder(&files[*from]), folder(&files[*to]));
            if a != b {
                graph.entry(a).or_default().insert(b);
            }
        }
    }
    let mut text = String::from("folder graph (folder -> folders it uses):\n");
    for (from, tos) in &graph {
        let tos: Vec<&str> = tos.iter().map(String::as_str).collect();
        text.push_str(&format!("  {from} -> {}\n", tos.join(", ")));
    }
    let names: Vec<&String> = graph
        .keys()
        .chain(graph.values().flatten())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let index = |name: &String| names.iter().position(|n| *n == name).unwrap_or(0);
    let mut folder_edges: BTreeMap<usize, BTreeMap<usize, BTreeSet<String>>> = BTreeMap::new();
    for (from, tos) in &graph {
        for to in tos {
            folder_edges
                .entry(index(from))
                .or_default()
                .insert(index(to), BTreeSet::new());
        }
    }
    let circles = cycles(names.len(), &folder_edges)
        .into_iter()
        .map(|c| {
            let members: Vec<&str> = c.iter().map(|i| names[*i].as_str()).collect();
            format!("a circle of folders: {}", members.join(", "))
        })
        .collect();
    (text, circles)
}

/// The strongly connected components of more than one file (Tarjan).
fn cycles(
    count: usize,
    edges: &BTreeMap<usize, BTreeMap<usize, BTreeSet<String>>>,
) -> Vec<Vec<usize>> {
    struct Tarjan<'a> {
        edges: &'a BTreeMap<usize, BTreeMap<usize, BTreeSet<String>>>,
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        found: Vec<Vec<usize>>,
    }
    impl Tarjan<'_> {
        fn visit(&mut self, v: usize) {
            self.index[v] = Some(self.next);
            self.low[v] = self.next;
            self.next += 1;
            self.stack.push(v);
            self.on_stack[v] = true;
            let targets: Vec<usize> = self
                .edges
                .get(&v)
                .map(|t| t.keys().copied().collect())
                .unwrap_or_default();
            for w in targets {
                match self.index[w] {
                    None => {
                        self.visit(w);
                        self.low[v] = self.low[v].min(self.low[w]);
                    }
                    Some(index) if self.on_stack[w] => self.low[v] = self.low[v].min(index),
                    Some(_) => {}
                }
            }
            if Some(self.low[v]) == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort_unstable();
                    self.found.push(component);
                }
            }
        }
    }
    let mut tarjan = Tarjan {
        edges,
        index: vec![None; count],
        low: vec![0; count],
        on_stack: vec![false; count],
        stack: Vec::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in 0..count {
        if tarjan.index[v].is_none() {
            tarjan.visit(v);
        }
    }
    tarjan.found
}

#[cfg(test)]
mod checker {
    use super::*;

    #[test]
    fn use_trees_expand_to_their_paths() {
        let mut out = Vec::new();
        expand("super::{a::{B, c as D}, e, *}", &mut Vec::new(), &mut out);
        let joined: Vec<String> = out.iter().map(|p| p.join("::")).collect();
        assert_eq!(
            joined,
            ["super::a::B", "super::a::c", "super::e", "super::*"]
        );
    }

    #[test]
    fn comments_and_strings_are_not_references() {
        let code =
            strip("// super::a\nlet x = \"super::b\"; /* super::c */ let y = 'a'; super::d::f();");
        assert!(
            !code.contains("super::a") && !code.contains("super::b") && !code.contains("super::c")
        );
        assert!(code.contains("super::d::f"));
    }

    #[test]
    fn test_items_are_dropped() {
        let code = drop_test_items(
            "use super::a;\n#[cfg(test)]\nmod tests { use super::b; fn f() {} }\nuse super::c;",
        );
        assert!(
            code.contains("super::a") && code.contains("super::c") && !code.contains("super::b")
        );
    }

    #[test]
    fn a_visibility_path_is_not_a_reference() {
        let code =
            drop_visibility_paths("pub(in crate::session) fn f() { crate::session::tree::g() }");
        assert!(code.starts_with("pub fn f()") && code.contains("crate::session::tree::g"));
    }

    #[test]
    fn a_circle_is_found() {
        let mut edges: BTreeMap<usize, BTreeMap<usize, BTreeSet<String>>> = BTreeMap::new();
        for (a, b) in [(0, 1), (1, 2), (2, 0), (2, 3)] {
            edges.entry(a).or_default().insert(b, BTreeSet::new());
        }
        assert_eq!(cycles(4, &edges), vec![vec![0, 1, 2]]);
    }
}
