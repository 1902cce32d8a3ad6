//! Two per-thread caches that make a batch of asks cheap without changing
//! an answer.
//!
//! - [`TextMemo`]: the result of a pure function of a short text (a bash
//!   line's commands, its path words before they meet the filesystem),
//!   bounded by entry count and key length. Always on: the same text gives
//!   the same result whenever it is computed.
//! - [`Snapshot`]: what the filesystem said about a path (its canonical
//!   form, whether it exists and is a symlink), remembered only while a
//!   snapshot scope is open on this thread. Outside a scope every call
//!   asks the filesystem, as before. `permfs resolve` opens one scope per
//!   batch of input (renewed when the input runs dry and at least every
//!   second), so a batch is judged against one view of the filesystem and
//!   a symlink changed between batches is seen; the daemon opens none.
//!   What is computed from that view alone (a path's alias set, a bash
//!   line's path words at a cwd) is remembered in the scope too: within
//!   it, the same inputs give the same result, so a batch that asks about
//!   the same path or line again gets it without the string work.

use super::access_path::AccessPath;
use super::bash::BashPaths;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The maps here are looked up once or more per ask with a text as the key,
/// so they use foldhash (randomly seeded per process) rather than SipHash:
/// hashing a line was a visible share of an ask. Every map is bounded, so
/// inputs crafted to collide can slow one map down, never grow it.
type HashMap<K, V> = foldhash::HashMap<K, V>;

/// Texts longer than this are not remembered (a long line is rare, and its
/// result could be large).
pub const MAX_MEMO_KEY: usize = 1024;

/// A bounded map from text to a pure function's result; the oldest entry
/// goes first. It holds `capacity` entries, or `batch_capacity` while a
/// [`Snapshot`] scope is open on the thread (a batch of asks, such as a
/// `permfs resolve` run, repeats many lines; a daemon thread keeps few).
pub struct TextMemo<T> {
    map: HashMap<String, T>,
    order: VecDeque<String>,
    capacity: usize,
    batch_capacity: usize,
}

impl<T: Clone> TextMemo<T> {
    pub fn new(capacity: usize, batch_capacity: usize) -> Self {
        Self {
            map: HashMap::default(),
            order: VecDeque::new(),
            capacity,
            batch_capacity,
        }
    }

    /// `compute(text)`, remembered for a short `text`.
    pub fn get_or(&mut self, text: &str, compute: impl FnOnce(&str) -> T) -> T {
        if let Some(hit) = self.map.get(text) {
            return hit.clone();
        }
        let value = compute(text);
        let capacity = if in_scope() {
            self.batch_capacity
        } else {
            self.capacity
        };
        if text.len() <= MAX_MEMO_KEY && capacity > 0 {
            while self.map.len() >= capacity {
                let Some(oldest) = self.order.pop_front() else {
                    break;
                };
                self.map.remove(&oldest);
            }
            self.map.insert(text.to_string(), value.clone());
            self.order.push_back(text.to_string());
        }
        value
    }
}

/// What `lstat` said about a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    Missing,
    Symlink,
    Other,
}

#[derive(Default)]
struct Views {
    canonical: HashMap<String, String>,
    entries: HashMap<String, Entry>,
    /// Alias sets, by [`key`] of everything they were computed from.
    paths: HashMap<String, AccessPath>,
    /// Bash lines' path words, likewise.
    bash_paths: HashMap<String, Arc<BashPaths>>,
}

impl Views {
    fn len(&self) -> usize {
        self.canonical.len() + self.entries.len() + self.paths.len() + self.bash_paths.len()
    }
}

/// Entries a scope holds at most; past this it starts afresh (a run over
/// many distinct paths then costs what it cost without the cache).
const MAX_SNAPSHOT_ENTRIES: usize = 65_536;

thread_local! {
    static SNAPSHOT: RefCell<Option<Views>> = const { RefCell::new(None) };
}

fn start_views() {
    SNAPSHOT.with(|cell| {
        if let Ok(mut slot) = cell.try_borrow_mut() {
            *slot = Some(Views::default());
        }
    });
}

/// Whether a snapshot scope is open on this thread.
pub fn in_scope() -> bool {
    SNAPSHOT.with(|cell| cell.try_borrow().is_ok_and(|slot| slot.is_some()))
}

/// An open snapshot scope on this thread; closing (dropping) it forgets
/// everything it remembered.
pub struct Snapshot {
    opened: Instant,
}

impl Snapshot {
    /// Opens a scope (an open one on this thread is restarted).
    pub fn open() -> Self {
        start_views();
        Self {
            opened: Instant::now(),
        }
    }

    /// Forgets what was remembered when the scope is older than `max_age`
    /// or `now` is set: the next lookups ask the filesystem again.
    pub fn renew_if(&mut self, now: bool, max_age: Duration) {
        if now || self.opened.elapsed() >= max_age {
            // In place: replacing `self` would drop the old value after the
            // new one opened, and its `Drop` would close the scope.
            start_views();
            self.opened = Instant::now();
        }
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        SNAPSHOT.with(|cell| {
            if let Ok(mut slot) = cell.try_borrow_mut() {
                *slot = None;
            }
        });
    }
}

fn remembered<T: Clone>(
    key: &str,
    pick: impl Fn(&mut Views) -> &mut HashMap<String, T>,
    compute: impl FnOnce() -> T,
) -> T {
    let hit = SNAPSHOT.with(|cell| {
        let mut slot = cell.try_borrow_mut().ok()?;
        let views = slot.as_mut()?;
        Some(pick(views).get(key).cloned())
    });
    match hit {
        // No scope open: ask the filesystem.
        None => compute(),
        Some(Some(value)) => value,
        Some(None) => {
            let value = compute();
            SNAPSHOT.with(|cell| {
                if let Ok(mut slot) = cell.try_borrow_mut() {
                    if let Some(views) = slot.as_mut() {
                        if views.len() >= MAX_SNAPSHOT_ENTRIES {
                            *views = Views::default();
                        }
                        pick(views).insert(key.to_string(), value.clone());
                    }
                }
            });
            value
        }
    }
}

/// The canonical form of `absolute`, computed by `compute` unless the open
/// scope remembers it.
pub fn canonical(absolute: &str, compute: impl FnOnce() -> String) -> String {
    remembered(absolute, |v| &mut v.canonical, compute)
}

/// One key for several texts, unambiguous whatever they contain (each is
/// prefixed by its length).
pub fn key(parts: &[&str]) -> String {
    let mut out = String::with_capacity(parts.iter().map(|p| p.len() + 4).sum());
    for part in parts {
        out.push_str(itoa::Buffer::new().format(part.len()));
        out.push(':');
        out.push_str(part);
    }
    out
}

/// An alias set computed by `compute` from the inputs `key` names, unless
/// the open scope remembers it. `compute` may look at the filesystem only
/// through this scope ([`canonical`], [`entry`]).
/// `key` is only built while a scope is open.
pub fn path(key: impl FnOnce() -> String, compute: impl FnOnce() -> AccessPath) -> AccessPath {
    if !in_scope() {
        return compute();
    }
    remembered(&key(), |v| &mut v.paths, compute)
}

/// A bash line's path words at a cwd, as [`path`] for alias sets.
pub fn bash_paths(
    key: impl FnOnce() -> String,
    compute: impl FnOnce() -> Arc<BashPaths>,
) -> Arc<BashPaths> {
    if !in_scope() {
        return compute();
    }
    remembered(&key(), |v| &mut v.bash_paths, compute)
}

/// What `lstat(path)` says, remembered in the open scope; any error counts
/// as missing (callers need only existence and the symlink bit).
pub fn entry(path: &str) -> Entry {
    remembered(
        path,
        |v| &mut v.entries,
        || match super::fence::symlink_metadata(std::path::Path::new(path)) {
            Ok(stat) if stat.kind == super::fence::Kind::Symlink => Entry::Symlink,
            Ok(_) => Entry::Other,
            // Inside permfs's own mount (not looked at): counted as there,
            // so the word is judged as a path (the mount has no symlinks).
            Err(e) if super::fence::is_fenced(&e) => Entry::Other,
            Err(_) => Entry::Missing,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memo_is_bounded_and_skips_long_keys() {
        let mut memo = TextMemo::new(2, 2);
        let mut calls = 0;
        for text in ["a", "b", "a", "c", "a"] {
            memo.get_or(text, |t| {
                calls += 1;
                t.len()
            });
        }
        // a, b, (a hit), c evicts a, a again.
        assert_eq!(calls, 4);
        let long = "x".repeat(MAX_MEMO_KEY + 1);
        memo.get_or(&long, |t| t.len());
        assert!(!memo.map.contains_key(&long));
    }

    #[test]
    fn keys_do_not_run_together() {
        assert_ne!(key(&["ab", "c"]), key(&["a", "bc"]));
        assert_ne!(key(&["1:a", ""]), key(&["1", "a"]));
    }

    #[test]
    fn an_alias_set_is_remembered_only_within_a_scope() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        let cwd = root.join("w");
        std::fs::create_dir(&cwd).expect("mkdir");
        std::fs::create_dir(root.join("a")).expect("mkdir");
        std::fs::create_dir(root.join("b")).expect("mkdir");
        std::os::unix::fs::symlink(root.join("a"), cwd.join("l")).expect("symlink");
        let cwd = cwd.to_string_lossy().into_owned();
        let boundary = || AccessPath::for_path("l/x", &cwd, "/h").boundary;
        let mut scope = Snapshot::open();
        assert!(boundary().ends_with("/a/x"));
        std::fs::remove_file(format!("{cwd}/l")).expect("rm");
        std::os::unix::fs::symlink(root.join("b"), format!("{cwd}/l")).expect("symlink");
        assert!(boundary().ends_with("/a/x"), "the scope's view");
        scope.renew_if(true, Duration::from_secs(1));
        assert!(boundary().ends_with("/b/x"), "a renewed scope looks again");
        drop(scope);
    }

    #[test]
    fn a_snapshot_remembers_only_while_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f").to_string_lossy().into_owned();
        assert_eq!(entry(&path), Entry::Missing);
        std::fs::write(&path, "x").expect("write");
        // No scope: the filesystem is asked every time.
        assert_eq!(entry(&path), Entry::Other);
        let mut scope = Snapshot::open();
        assert_eq!(entry(&path), Entry::Other);
        std::fs::remove_file(&path).expect("rm");
        assert_eq!(entry(&path), Entry::Other, "the scope's view");
        scope.renew_if(true, Duration::from_secs(1));
        assert_eq!(entry(&path), Entry::Missing, "a renewed scope looks again");
        std::fs::write(&path, "x").expect("write");
        assert_eq!(entry(&path), Entry::Missing, "and is still open");
        std::fs::remove_file(&path).expect("rm");
        drop(scope);
        std::fs::write(&path, "x").expect("write");
        assert_eq!(entry(&path), Entry::Other);
    }
}
