//! The names a glob or brace list in a read or write target gives, read
//! from the filesystem as bash would read it, so a guard or a deny on one
//! of them answers (`echo allow > /tmp/m*/sessions/main/inbox/x` writes
//! into the mount; `rm .c*/*` removes `.claude/settings.json`).
//!
//! Conservative where bash is not: dot-files are matched by `*` (an
//! agent's shell may have `dotglob` on), and a pattern that cannot be
//! expanded here (too many names, a directory inside permfs's own mount,
//! an asker in another mount namespace, a brace range) gives `None`, and
//! the caller floors the line. The expansion is a fact at the time of
//! the ask: a file created later is not among the names, which is why a
//! write through a pattern also floors the line to `ask` whatever it
//! matched.

use globset::GlobBuilder;
use std::path::Path;

/// At most this many names from one pattern.
const MAX_NAMES: usize = 256;
/// At most this many alternatives from one brace list.
const MAX_ALTERNATIVES: usize = 64;

/// True when bash would expand `token` as a glob or a brace list (and it
/// holds no expansion, which would make it unknowable anyway).
pub(super) fn is_pattern(token: &str) -> bool {
    if token.contains(['$', '`', '(']) {
        return false;
    }
    has_glob(token) || braces(token).is_some()
}

fn has_glob(text: &str) -> bool {
    let mut escaped = false;
    for c in text.chars() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '*' | '?' | '[' => return true,
            _ => {}
        }
    }
    false
}

/// The first top-level `{…,…}` group: (start, end, alternatives).
fn braces(text: &str) -> Option<(usize, usize, Vec<&str>)> {
    let bytes = text.as_bytes();
    let start = text.find('{')?;
    let mut depth = 0;
    let mut commas = Vec::new();
    for (i, &b) in bytes.iter().enumerate().skip(start) {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    if commas.is_empty() {
                        // `{}` or `{a..b}`: not a list (a range is refused
                        // by the caller through `None` below).
                        return text[start..i]
                            .contains("..")
                            .then(|| (start, i, Vec::new()));
                    }
                    let mut parts = Vec::new();
                    let mut from = start + 1;
                    for comma in commas {
                        parts.push(&text[from..comma]);
                        from = comma + 1;
                    }
                    parts.push(&text[from..i]);
                    return Some((start, i, parts));
                }
            }
            b',' if depth == 1 => commas.push(i),
            _ => {}
        }
    }
    None
}

/// Every text a brace list stands for; `None` for a range or too many.
fn brace_expand(text: &str, out: &mut Vec<String>) -> Option<()> {
    match braces(text) {
        None => {
            out.push(text.to_string());
        }
        Some((_, _, parts)) if parts.is_empty() => return None,
        Some((start, end, parts)) => {
            for part in parts {
                let joined = format!("{}{part}{}", &text[..start], &text[end + 1..]);
                brace_expand(&joined, out)?;
                if out.len() > MAX_ALTERNATIVES {
                    return None;
                }
            }
        }
    }
    Some(())
}

/// The names `absolute` (a pattern, already absolute) gives now; `None`
/// when it cannot be expanded here.
pub(super) fn expand(token: &str, base: &str, home: &str) -> Option<Vec<String>> {
    if crate::facts::fence::in_asker_root() {
        return None;
    }
    // Braces first, then the home and the directory, as bash does
    // (`{a,~/x}` names the home).
    let mut alternatives = Vec::new();
    brace_expand(token, &mut alternatives)?;
    let mut names = Vec::new();
    for alternative in alternatives {
        let alternative = crate::facts::path_text::resolve(
            base,
            &crate::facts::path_text::expand_home(&alternative, home),
        );
        if !has_glob(&alternative) {
            names.push(alternative);
            continue;
        }
        let mut found = vec![String::new()];
        for component in alternative.split('/').filter(|c| !c.is_empty()) {
            let mut next = Vec::new();
            for dir in &found {
                if !has_glob(component) {
                    next.push(format!("{dir}/{component}"));
                    continue;
                }
                let matcher = GlobBuilder::new(component)
                    .literal_separator(true)
                    .backslash_escape(true)
                    .build()
                    .ok()?
                    .compile_matcher();
                let listed = if dir.is_empty() { "/" } else { dir.as_str() };
                // Never list a directory inside permfs's own mount (the
                // daemon would wait on itself): the fence says where it is.
                match crate::facts::fence::canonicalize(Path::new(listed)) {
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => continue,
                    Err(_) => return None,
                }
                let Ok(entries) = std::fs::read_dir(listed) else {
                    continue;
                };
                for entry in entries.flatten() {
                    let name = entry.file_name();
                    let name = name.to_string_lossy();
                    if matcher.is_match(name.as_ref()) {
                        next.push(format!("{dir}/{name}"));
                        if next.len() > MAX_NAMES {
                            return None;
                        }
                    }
                }
            }
            found = next;
        }
        names.extend(found.into_iter().filter(|n| !n.is_empty()));
        if names.len() > MAX_NAMES {
            return None;
        }
    }
    Some(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_and_braces_give_the_names_bash_would() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().to_string_lossy().into_owned();
        for name in [".claude", ".codex", "src"] {
            std::fs::create_dir(dir.path().join(name)).expect("dir");
        }
        std::fs::write(dir.path().join(".claude/settings.json"), "{}").expect("file");
        let mut got = expand(".c*/*", &root, "/h").expect("expands");
        got.sort();
        assert_eq!(got, [format!("{root}/.claude/settings.json")]);
        let mut got = expand("{a,.claude,~/y}/x", &root, "/h").expect("expands");
        got.sort();
        let mut want = vec![
            format!("{root}/.claude/x"),
            format!("{root}/a/x"),
            "/h/y/x".to_string(),
        ];
        want.sort();
        assert_eq!(got, want);
        assert!(expand("{1..3}", &root, "/h").is_none());
        assert!(is_pattern("a*") && is_pattern("{a,b}") && is_pattern("[m]nt"));
        assert!(!is_pattern("$x*") && !is_pattern("plain") && !is_pattern("{}"));
    }
}
