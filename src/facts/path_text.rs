//! Pure string operations on POSIX paths: home expansion and lexical
//! normalization, with the semantics of Node's `path` module. Home
//! expansion follows the reference: `~` and `$HOME` expand, `${HOME}` is
//! literal in a path an agent typed. (A deny *pattern* written with
//! `${HOME}` also matches the expanded home: see `policy::wildcard`.)

use std::path::Path;

/// The home directory used for `~` / `$HOME` expansion: `$HOME` first (as
/// Node's `os.homedir()`), then the password database.
pub fn home_dir() -> String {
    if let Some(home) = std::env::var_os("HOME") {
        if !home.is_empty() {
            return home.to_string_lossy().into_owned();
        }
    }
    passwd_home().unwrap_or_else(|| "/".to_string())
}

fn passwd_home() -> Option<String> {
    // SAFETY: getpwuid returns a pointer into static storage or null; we copy
    // the string out before any other passwd call can overwrite it.
    unsafe {
        let entry = libc::getpwuid(libc::getuid());
        if entry.is_null() || (*entry).pw_dir.is_null() {
            return None;
        }
        let dir = std::ffi::CStr::from_ptr((*entry).pw_dir);
        Some(dir.to_string_lossy().into_owned())
    }
}

/// Expands a leading `~` or `$HOME` (alone or followed by `/`), as the
/// reference does. Everything else is returned unchanged: a `~user`, a
/// `$HOME` in the middle and `${HOME}` are literal, as in the reference.
pub fn expand_home(text: &str, home: &str) -> String {
    expand_prefixes(text, home, &["~", "$HOME"])
}

/// [`expand_home`], and a leading `${HOME}` too: for the spellings a
/// person means as their home where reading it so can only add a refusal.
pub fn expand_home_braced(text: &str, home: &str) -> String {
    expand_prefixes(text, home, &["~", "$HOME", "${HOME}"])
}

fn expand_prefixes(text: &str, home: &str, prefixes: &[&str]) -> String {
    for prefix in prefixes {
        if text == *prefix {
            return home.to_string();
        }
        if let Some(rest) = text.strip_prefix(prefix).and_then(|r| r.strip_prefix('/')) {
            return join(home, rest);
        }
    }
    text.to_string()
}

/// `path.join(a, b)`: concatenation followed by [`normalize`].
pub fn join(base: &str, rest: &str) -> String {
    if rest.is_empty() {
        return normalize(base);
    }
    if base.is_empty() {
        return normalize(rest);
    }
    normalize(&format!("{base}/{rest}"))
}

/// `path.resolve(cwd, p)` for a `cwd` that is absolute.
pub fn resolve(cwd: &str, path: &str) -> String {
    let joined = if path.starts_with('/') {
        normalize(path)
    } else {
        join(cwd, path)
    };
    strip_trailing_slash(joined)
}

fn strip_trailing_slash(mut path: String) -> String {
    while path.len() > 1 && path.ends_with('/') {
        path.pop();
    }
    path
}

/// Node's `path.posix.normalize`: collapses `//`, resolves `.` and `..`
/// lexically, keeps a trailing slash, and turns the empty path into `.`.
pub fn normalize(path: &str) -> String {
    if path.is_empty() {
        return ".".to_string();
    }
    let absolute = path.starts_with('/');
    let trailing = path.ends_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|last| *last != "..") {
                    parts.pop();
                } else if !absolute {
                    parts.push("..");
                }
            }
            other => parts.push(other),
        }
    }
    let mut out = parts.join("/");
    if absolute {
        out.insert(0, '/');
    }
    if out.is_empty() {
        return match (absolute, trailing) {
            (true, _) => "/".into(),
            (false, true) => "./".into(),
            (false, false) => ".".into(),
        };
    }
    if trailing && !out.ends_with('/') {
        out.push('/');
    }
    out
}

/// `path.relative(from, to)` for two absolute, normalized paths.
pub fn relative(from: &str, to: &str) -> String {
    let from_parts: Vec<&str> = from.split('/').filter(|s| !s.is_empty()).collect();
    let to_parts: Vec<&str> = to.split('/').filter(|s| !s.is_empty()).collect();
    let common = from_parts
        .iter()
        .zip(&to_parts)
        .take_while(|(a, b)| a == b)
        .count();
    let mut out: Vec<&str> = vec![".."; from_parts.len() - common];
    out.extend_from_slice(&to_parts[common..]);
    out.join("/")
}

/// True when `path` is `dir` itself or lies beneath it (both absolute and
/// normalized).
pub fn is_within(dir: &str, path: &str) -> bool {
    if dir == "/" {
        return path.starts_with('/');
    }
    path == dir
        || path
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// A cwd made absolute and normalized: a relative one is taken against
/// the process's cwd (sessions' cwds are absolute, so the mount never
/// asks the kernel for it).
pub fn absolute_cwd(cwd: &str) -> String {
    if cwd.starts_with('/') {
        resolve(cwd, cwd)
    } else {
        let base = std::env::current_dir()
            .map(|d| d.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "/".into());
        resolve(&base, cwd)
    }
}

/// The canonical (symlink-resolved) form of an absolute path that may not
/// exist: `realpath` of the longest existing ancestor, plus the missing tail.
/// Remembered while a [`super::memo::Snapshot`] is open on this thread.
pub fn canonicalize_lenient(absolute: &str) -> String {
    super::memo::canonical(absolute, || canonicalize_afresh(absolute))
}

fn canonicalize_afresh(absolute: &str) -> String {
    // Never through permfs's own mount: a path into it is resolved up to
    // the mount and lexical below it; a path that cannot be resolved for
    // another reason than a missing component (a loop, no permission)
    // keeps its lexical form.
    super::fence::canonicalize_lenient(Path::new(absolute))
        .map(|canonical| canonical.to_string_lossy().into_owned())
        .unwrap_or_else(|_| absolute.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_matches_node() {
        for (input, expected) in [
            ("/a//b/./c/..", "/a/b"),
            ("/a/b/", "/a/b/"),
            ("a/../..", ".."),
            ("", "."),
            ("/..", "/"),
            ("./", "./"),
            ("a/./b/", "a/b/"),
        ] {
            assert_eq!(normalize(input), expected, "normalize({input:?})");
        }
    }

    #[test]
    fn home_expands_only_at_the_start() {
        let home = "/home/u";
        assert_eq!(expand_home("~", home), "/home/u");
        assert_eq!(expand_home("~/x/*", home), "/home/u/x/*");
        assert_eq!(expand_home("$HOME/x", home), "/home/u/x");
        assert_eq!(
            expand_home("${HOME}/x", home),
            "${HOME}/x",
            "literal, as the reference"
        );
        assert_eq!(expand_home_braced("${HOME}/x", home), "/home/u/x");
        assert_eq!(expand_home("a/~/x", home), "a/~/x");
        assert_eq!(expand_home("~user/x", home), "~user/x");
        assert_eq!(expand_home("$HOMEDIR", home), "$HOMEDIR");
    }

    #[test]
    fn relative_and_within() {
        assert_eq!(relative("/a/b", "/a/b/c/d"), "c/d");
        assert_eq!(relative("/a/b", "/a/x"), "../x");
        assert_eq!(relative("/a/b", "/a/b"), "");
        assert!(is_within("/a/b", "/a/b/c"));
        assert!(is_within("/a/b", "/a/b"));
        assert!(!is_within("/a/b", "/a/bc"));
        assert!(is_within("/", "/x"));
    }

    #[test]
    fn resolve_strips_trailing_slash() {
        assert_eq!(resolve("/w", "src/"), "/w/src");
        assert_eq!(resolve("/w", "/etc/../tmp"), "/tmp");
        assert_eq!(resolve("/w", "."), "/w");
    }
}
