//! Attached judges across a server restart (`judges.attached` in the state
//! dir).
//!
//! A judge attached through the mount (`mkdir judges/<name>`) holds its
//! `lease` open while it serves, and blocks in a read of `next`. Both
//! outlive a server that dies under `permfs mount`'s supervisor: the lease
//! handle stays open in the kernel (its close arrives at the next server),
//! and the parked read is re-sent. What only the server knew is which names
//! are attached and which handles are their leases; this file keeps that,
//! rewritten whole (aside, then renamed over, 0600) at every attach,
//! detach, lease open and lease close, which are rare. A server that takes
//! the connection over reads it before the journal is restored, so a review
//! that was under way is walked again to the same judge; a server on a new
//! connection (no handle survives) starts it empty.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The file in the state dir.
pub const FILE: &str = "judges.attached";

/// What a previous server kept: each attached judge's name and the lease
/// handles open on it.
pub fn read(state_dir: &Path) -> BTreeMap<String, Vec<u64>> {
    let path = state_dir.join(FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return BTreeMap::new(),
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "attached judges cannot be read: none is kept");
            return BTreeMap::new();
        }
    };
    serde_json::from_str(&text).unwrap_or_else(|error| {
        tracing::warn!(path = %path.display(), %error, "attached judges cannot be read: none is kept");
        BTreeMap::new()
    })
}

/// The file, once the server knows its state dir.
#[derive(Default)]
pub struct JudgeLog {
    path: Mutex<Option<PathBuf>>,
}

impl JudgeLog {
    pub fn set_path(&self, path: PathBuf) {
        *self.path.lock().unwrap_or_else(|p| p.into_inner()) = Some(path);
    }

    /// Writes `attached` with the lease handles of each. Calls are
    /// serialized, and each writes what is true when it runs, so the last
    /// write is the last state. A failure is logged: those judges then do
    /// not outlive this server (they are told by their reads, as before).
    pub fn save(&self, attached: &[String], leases: &HashMap<u64, String>) {
        let path = self.path.lock().unwrap_or_else(|p| p.into_inner());
        let Some(path) = path.as_ref() else {
            return;
        };
        let mut kept: BTreeMap<&str, Vec<u64>> = attached
            .iter()
            .map(|name| (name.as_str(), Vec::new()))
            .collect();
        for (fh, name) in leases {
            if let Some(handles) = kept.get_mut(name.as_str()) {
                handles.push(*fh);
            }
        }
        for handles in kept.values_mut() {
            handles.sort_unstable();
        }
        let text = serde_json::to_string(&kept).unwrap_or_else(|_| "{}".into());
        if let Err(error) = super::fdstore::replace_owner_only(path, &text) {
            tracing::warn!(path = %path.display(), %error, "attached judges cannot be kept: they will not outlive this server");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_saved_is_read_back_and_a_bad_file_keeps_nothing() {
        let dir = tempfile::tempdir().expect("dir");
        let log = JudgeLog::default();
        log.save(&["a".into()], &HashMap::new());
        assert!(read(dir.path()).is_empty(), "no path yet: nothing written");
        log.set_path(dir.path().join(FILE));
        let leases = HashMap::from([(7, "a".to_string()), (3, "a".into()), (9, "gone".into())]);
        log.save(&["a".into(), "b".into()], &leases);
        let kept = read(dir.path());
        assert_eq!(kept["a"], [3, 7]);
        assert!(kept["b"].is_empty());
        assert!(!kept.contains_key("gone"), "a lease of no attached judge");
        let mode = std::os::unix::fs::MetadataExt::mode(
            &std::fs::metadata(dir.path().join(FILE)).expect("stat"),
        );
        assert_eq!(mode & 0o777, 0o600);
        std::fs::write(dir.path().join(FILE), "[not").expect("spoiled");
        assert!(read(dir.path()).is_empty());
    }
}
