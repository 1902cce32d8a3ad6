//! A path value turned into the alias set every ancestor will judge.
//!
//! Computed once at the asking session with that session's cwd (ADR 0008):
//! the absolute lexical form, the cwd-relative form (only inside cwd), the
//! literal as typed (home-expanded), and the canonical symlink-resolved
//! form, in that order, without duplicates. The canonical form is also the
//! boundary value that decides whether the path is outside the working tree.

use super::path_text::{
    absolute_cwd, canonicalize_lenient, expand_home, is_within, relative, resolve,
};
use std::sync::Arc;

/// Paths that are never "outside the working tree", whatever the cwd.
pub const SAFE_SYSTEM_PATHS: [&str; 4] = ["/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessPath {
    /// Aliases in match order (shared with every fact made from the path).
    pub match_values: Arc<[String]>,
    /// The canonical form ("" when the value was empty).
    pub boundary: Arc<str>,
}

/// Strips one pair of stray quotes and a leading `@`, then expands `~`:
/// how the reference cleans a path an agent typed.
pub fn clean_literal(value: &str, home: &str) -> String {
    let trimmed = value.trim();
    let trimmed = trimmed.strip_prefix(['\'', '"']).unwrap_or(trimmed);
    let trimmed = trimmed.strip_suffix(['\'', '"']).unwrap_or(trimmed);
    if trimmed.is_empty() {
        return String::new();
    }
    let unprefixed = trimmed.strip_prefix('@').unwrap_or(trimmed);
    expand_home(unprefixed, home)
}

/// The cleaned literal and its absolute form at `base`; `None` when the
/// value is empty.
fn cleaned(value: &str, base: &str, home: &str) -> Option<(String, String)> {
    let literal = clean_literal(value, home);
    if literal.is_empty() {
        return None;
    }
    let absolute = resolve(base, &literal);
    Some((literal, absolute))
}

/// The aliases that need no filesystem: the absolute form, the
/// cwd-relative form (only inside cwd), the literal as typed, in that
/// order, without duplicates.
fn lexical_aliases(literal: String, absolute: String, cwd: &str) -> Vec<String> {
    let lexical_cwd = resolve(cwd, cwd);
    let relative_form = is_within(&lexical_cwd, &absolute)
        .then(|| relative(&lexical_cwd, &absolute))
        .filter(|rel| !rel.is_empty());
    let mut aliases: Vec<String> = Vec::with_capacity(3);
    for alias in [Some(absolute), relative_form, Some(literal)]
        .into_iter()
        .flatten()
    {
        if !aliases.contains(&alias) {
            aliases.push(alias);
        }
    }
    aliases
}

impl AccessPath {
    /// `cwd` must be absolute.
    pub fn for_path(value: &str, cwd: &str, home: &str) -> Self {
        Self::for_path_in(value, cwd, cwd, home)
    }

    /// A path typed where the working directory was `base` (a bash word
    /// after `cd`), its cwd-relative alias still taken against the
    /// session's `cwd`. Both must be absolute.
    /// Remembered while a snapshot scope is open (`facts::memo`).
    pub fn for_path_in(value: &str, base: &str, cwd: &str, home: &str) -> Self {
        super::memo::path(
            || super::memo::key(&["path", value, base, cwd, home]),
            || Self::for_path_afresh(value, base, cwd, home),
        )
    }

    fn for_path_afresh(value: &str, base: &str, cwd: &str, home: &str) -> Self {
        let Some((literal, absolute)) = cleaned(value, base, home) else {
            return Self::empty();
        };
        let boundary = canonicalize_lenient(&absolute);
        let mut match_values = if literal == "*" {
            vec![literal]
        } else {
            lexical_aliases(literal, absolute, cwd)
        };
        if !match_values.contains(&boundary) {
            match_values.push(boundary.clone());
        }
        Self {
            match_values: match_values.into(),
            boundary: boundary.into(),
        }
    }

    /// [`Self::for_path_in`] without the symlink-resolved alias: the
    /// lexical absolute form stands for it. For a bare bash word (`commit`,
    /// `main`), which most words of a line are and which counts only when a
    /// specific rule names the word itself: resolving each would cost a
    /// `realpath` per word on every ask.
    /// Remembered while a snapshot scope is open, as [`Self::for_path_in`].
    pub fn for_word_in(value: &str, base: &str, cwd: &str, home: &str) -> Self {
        super::memo::path(
            || super::memo::key(&["word", value, base, cwd, home]),
            || Self::for_word_afresh(value, base, cwd, home),
        )
    }

    fn for_word_afresh(value: &str, base: &str, cwd: &str, home: &str) -> Self {
        let Some((literal, absolute)) = cleaned(value, base, home) else {
            return Self::empty();
        };
        Self {
            boundary: absolute.as_str().into(),
            match_values: lexical_aliases(literal, absolute, cwd).into(),
        }
    }

    fn empty() -> Self {
        Self {
            match_values: Arc::new([]),
            boundary: "".into(),
        }
    }

    /// Only the literal, for a word whose directory is unknown (after a
    /// computed `cd`): no absolute alias that could match a rule by
    /// accident, and no boundary.
    pub fn for_literal(literal: &str) -> Self {
        Self {
            match_values: if literal.is_empty() {
                Arc::new([])
            } else {
                Arc::new([literal.to_string()])
            },
            boundary: "".into(),
        }
    }

    /// Whether the canonical path lies outside the canonical cwd: what
    /// raises the `external_directory` family.
    pub fn is_outside(&self, canonical_cwd: &str) -> bool {
        is_outside(&self.boundary, canonical_cwd)
    }
}

pub fn is_outside(boundary: &str, canonical_cwd: &str) -> bool {
    if boundary.is_empty() || canonical_cwd.is_empty() || SAFE_SYSTEM_PATHS.contains(&boundary) {
        return false;
    }
    !is_within(canonical_cwd, boundary)
}

/// The canonical form of a cwd, against which boundaries are compared.
pub fn canonical_cwd(cwd: &str) -> String {
    canonicalize_lenient(&resolve(cwd, cwd))
}

/// A session's canonical cwd, looked up once and then only checked: the
/// hot ask path does no `readlink` while nothing changed.
///
/// The check is one `stat` of the canonical path (and one of the cwd as
/// written, when that differs): both must still be the directory (device
/// and inode) the canonical form was computed for. A renamed or replaced
/// directory, or a symlink on the way retargeted, fails it and the form is
/// computed afresh. (What it cannot see: the same directory reached at a
/// second canonical path, through a bind mount made meanwhile.) A cwd that
/// does not exist is looked up every time, as before.
#[derive(Debug)]
pub struct CwdCache {
    cwd: String,
    /// The home directory `~` means for this session (the daemon's, read
    /// once rather than from the environment on every ask).
    home: String,
    known: std::sync::Mutex<Option<(String, (u64, u64))>>,
}

fn directory_id(path: &str) -> Option<(u64, u64)> {
    super::fence::metadata(std::path::Path::new(path))
        .ok()
        .filter(super::fence::Stat::is_dir)
        .map(|stat| (stat.dev, stat.ino))
}

impl CwdCache {
    /// Nothing is looked up until first asked.
    pub fn new(cwd: &str) -> Self {
        Self {
            cwd: absolute_cwd(cwd),
            home: super::path_text::home_dir(),
            known: std::sync::Mutex::new(None),
        }
    }

    /// The cwd as written, made absolute and normalized.
    pub fn cwd(&self) -> &str {
        &self.cwd
    }

    pub fn home(&self) -> &str {
        &self.home
    }

    /// The canonical cwd, as [`canonical_cwd`] gives it now. Always as
    /// the daemon sees it (the session's cwd was fixed there at spawn),
    /// also while a sandboxed asker's facts are fixed in its own root: the
    /// cache is the session's, shared by every asker.
    pub fn canonical(&self) -> String {
        super::fence::within_asker_root(None, || self.canonical_here())
    }

    fn canonical_here(&self) -> String {
        let known = self.known.lock().map(|k| k.clone()).unwrap_or(None);
        if let Some((canonical, id)) = known {
            let still = directory_id(&canonical) == Some(id)
                && (canonical == self.cwd || directory_id(&self.cwd) == Some(id));
            if still {
                return canonical;
            }
        }
        let canonical = canonical_cwd(&self.cwd);
        let fresh = directory_id(&canonical).map(|id| (canonical.clone(), id));
        if let Ok(mut slot) = self.known.lock() {
            *slot = fresh;
        }
        canonical
    }
}

/// A canonical cwd found at most once per ask, and only when a fact needs
/// it: an ask whose facts hold no path (most bash lines, every plain
/// surface) costs no `stat` of the cwd. Every way to make one says where
/// the form comes from, so there is no state in which it is missing (an
/// empty canonical cwd would make nothing "outside").
#[derive(Debug, Clone)]
pub enum CanonicalCwd {
    /// Already known.
    Known(String),
    /// From a session's cache, when first needed.
    Session(std::sync::OnceLock<String>, std::sync::Arc<CwdCache>),
    /// Looked up from an absolute cwd, when first needed.
    Lookup(std::sync::OnceLock<String>, String),
}

impl CanonicalCwd {
    pub fn known(canonical: String) -> Self {
        Self::Known(canonical)
    }

    pub fn of_session(cache: std::sync::Arc<CwdCache>) -> Self {
        Self::Session(std::sync::OnceLock::new(), cache)
    }

    pub fn of(cwd: &str) -> Self {
        Self::Lookup(std::sync::OnceLock::new(), cwd.to_string())
    }

    pub fn get(&self) -> &str {
        match self {
            Self::Known(canonical) => canonical,
            Self::Session(found, cache) => found.get_or_init(|| cache.canonical()),
            Self::Lookup(found, cwd) => found.get_or_init(|| canonical_cwd(cwd)),
        }
    }
}

impl From<&str> for CanonicalCwd {
    fn from(canonical: &str) -> Self {
        Self::known(canonical.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alias_order_and_dedup() {
        let path = AccessPath::for_path("src/a.rs", "/nonexistent-w", "/home/u");
        assert_eq!(*path.match_values, ["/nonexistent-w/src/a.rs", "src/a.rs"]);
        assert_eq!(&*path.boundary, "/nonexistent-w/src/a.rs");

        let path = AccessPath::for_path("../x", "/nonexistent-w/sub", "/home/u");
        assert_eq!(*path.match_values, ["/nonexistent-w/x", "../x"]);
        assert!(path.is_outside("/nonexistent-w/sub"));

        let path = AccessPath::for_path("~/notes", "/nonexistent-w", "/nonexistent-home");
        assert_eq!(*path.match_values, ["/nonexistent-home/notes"]);

        let path = AccessPath::for_path("'@src/b'", "/nonexistent-w", "/h");
        assert_eq!(*path.match_values, ["/nonexistent-w/src/b", "src/b"]);

        let path = AccessPath::for_path(".", "/nonexistent-w", "/h");
        assert_eq!(*path.match_values, ["/nonexistent-w", "."]);
    }

    #[test]
    fn canonical_form_follows_symlinks_of_existing_ancestors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let real = dir.path().join("real");
        std::fs::create_dir(&real).expect("mkdir");
        let outside = dir.path().join("outside");
        std::fs::create_dir(&outside).expect("mkdir");
        std::os::unix::fs::symlink(&outside, real.join("link")).expect("symlink");
        let cwd = std::fs::canonicalize(&real)
            .expect("canonical")
            .to_string_lossy()
            .into_owned();
        let path = AccessPath::for_path("link/new/file.txt", &cwd, "/h");
        let canonical_outside = std::fs::canonicalize(&outside).expect("canonical");
        let expected = format!("{}/new/file.txt", canonical_outside.display());
        assert_eq!(*path.boundary, expected);
        assert_eq!(path.match_values.last(), Some(&expected));
        assert!(path.is_outside(&canonical_cwd(&cwd)));
        let inside = AccessPath::for_path("plain.txt", &cwd, "/h");
        assert!(!inside.is_outside(&canonical_cwd(&cwd)));
    }

    #[test]
    fn a_cached_cwd_follows_a_retargeted_symlink() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        let (a, b) = (root.join("a"), root.join("b"));
        std::fs::create_dir(&a).expect("mkdir");
        std::fs::create_dir(&b).expect("mkdir");
        let link = root.join("link");
        std::os::unix::fs::symlink(&a, &link).expect("symlink");
        let cache = CwdCache::new(&link.to_string_lossy());
        assert_eq!(cache.canonical(), a.to_string_lossy());
        assert_eq!(cache.canonical(), a.to_string_lossy());
        std::fs::remove_file(&link).expect("rm");
        std::os::unix::fs::symlink(&b, &link).expect("symlink");
        assert_eq!(cache.canonical(), b.to_string_lossy());
        // The directory itself renamed: its old canonical path is gone.
        let c = root.join("c");
        std::fs::rename(&b, &c).expect("rename");
        std::fs::remove_file(&link).expect("rm");
        std::os::unix::fs::symlink(&c, &link).expect("symlink");
        assert_eq!(cache.canonical(), c.to_string_lossy());
        let missing = CwdCache::new("/nonexistent-w/x");
        assert_eq!(missing.canonical(), "/nonexistent-w/x");
    }

    #[test]
    fn device_paths_are_never_outside() {
        let path = AccessPath::for_path("/dev/null", "/nonexistent-w", "/h");
        assert!(!path.is_outside("/nonexistent-w"));
    }
}
