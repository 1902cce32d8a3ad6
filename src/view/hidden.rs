//! What no view ever shows: the daemon's own state dir and its mount.
//!
//! A view serves a real directory to a sandbox, and that directory can
//! hold the state dir (the default `~/.local/state/permfs` is inside the
//! cwd whenever `permfs run` starts in `$HOME`, or `--view $HOME` serves
//! it) or the mount point (`scripts/run.sh` mounts at `./mount`). Through
//! the view the sandbox would reach the journal and the audit log of every
//! session, `views/`, which carries every other sandbox's view (judged by
//! that sandbox's policy, not this one's), and the whole mount (every
//! session's inbox). Hiding them in the sandbox's mount table alone (a
//! tmpfs over the path) is not enough: the view's backing directory is
//! reached by other names too (a parent renamed, a host-side bind), so the
//! view itself refuses them: a lookup is `ENOENT` and a listing leaves the
//! name out, at whatever name or depth the lookup comes.
//!
//! Recognised two ways. By path, before the name is looked at on the host
//! (a `stat` of the mount point would be a request to this very daemon):
//! the canonical state dir and mount point. And by what the host's `stat`
//! found: the state dir's device and inode (the same directory bound
//! elsewhere), and the mount's device (any part of the mount, bound
//! anywhere).
//!
//! One per process, like the fence of `facts::fence`: a server has one
//! state dir and one mount, and every view it serves hides the same two.

use std::path::{Path, PathBuf};
use std::sync::RwLock;

#[derive(Default)]
struct Hidden {
    /// Canonical paths.
    paths: Vec<PathBuf>,
    /// (device, inode) of hidden directories.
    inodes: Vec<(u64, u64)>,
    /// Devices whose every inode is hidden (the mount's).
    devices: Vec<u64>,
}

static HIDDEN: RwLock<Hidden> = RwLock::new(Hidden {
    paths: Vec::new(),
    inodes: Vec::new(),
    devices: Vec::new(),
});

fn hidden() -> std::sync::RwLockReadGuard<'static, Hidden> {
    HIDDEN.read().unwrap_or_else(|p| p.into_inner())
}

/// The canonical spelling of `path` without looking at its last component
/// (which may be a FUSE mount point served by this process).
fn canonical(path: &Path) -> PathBuf {
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => crate::facts::fence::canonicalize_lenient(parent)
            .map(|dir| dir.join(name))
            .unwrap_or_else(|_| path.to_path_buf()),
        _ => path.to_path_buf(),
    }
}

/// Hides the directory `dir` (the state dir) from every view.
pub fn hide_dir(dir: &Path) {
    let path = canonical(dir);
    let inode = std::fs::symlink_metadata(&path).ok().map(|m| {
        use std::os::unix::fs::MetadataExt;
        (m.dev(), m.ino())
    });
    let mut hidden = HIDDEN.write().unwrap_or_else(|p| p.into_inner());
    if !hidden.paths.contains(&path) {
        hidden.paths.push(path);
    }
    if let Some(inode) = inode {
        if !hidden.inodes.contains(&inode) {
            hidden.inodes.push(inode);
        }
    }
}

/// Hides the mount at `mountpoint`, whose device is `device` (read from
/// the mount table: a `stat` of it would be a request to this process).
pub fn hide_mount(mountpoint: &Path, device: Option<u64>) {
    let path = canonical(mountpoint);
    let mut hidden = HIDDEN.write().unwrap_or_else(|p| p.into_inner());
    if !hidden.paths.contains(&path) {
        hidden.paths.push(path);
    }
    if let Some(device) = device {
        if !hidden.devices.contains(&device) {
            hidden.devices.push(device);
        }
    }
}

/// Whether the host path `path` (canonical, as a view's nodes name them)
/// is hidden. What lies below a hidden directory is never looked up (its
/// lookup would start at the hidden one), so equality is enough for a
/// lookup; a view root below one is refused by [`contains`].
pub fn is_hidden_path(path: &Path) -> bool {
    hidden().paths.iter().any(|p| p == path)
}

/// Whether what `stat` found (`dev`, `ino`) is hidden.
pub fn is_hidden_inode(dev: u64, ino: u64) -> bool {
    let hidden = hidden();
    hidden.devices.contains(&dev) || hidden.inodes.contains(&(dev, ino))
}

/// The hidden directory that is `root` or holds it, if any: such a root
/// cannot be a view.
pub fn contains(root: &Path) -> Option<PathBuf> {
    hidden().paths.iter().find(|p| root.starts_with(p)).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_by_path_by_inode_and_by_device() {
        let dir = tempfile::tempdir().expect("temp");
        let state = dir.path().join("state");
        std::fs::create_dir(&state).expect("state");
        hide_dir(&state);
        hide_mount(&dir.path().join("mnt"), Some(u64::MAX - 7));
        let canonical_dir = dir.path().canonicalize().expect("canonical");
        assert!(is_hidden_path(&canonical_dir.join("state")));
        assert!(is_hidden_path(&canonical_dir.join("mnt")));
        assert!(!is_hidden_path(&canonical_dir.join("work")));
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(&state).expect("stat");
        assert!(is_hidden_inode(meta.dev(), meta.ino()));
        assert!(is_hidden_inode(u64::MAX - 7, 1));
        assert!(!is_hidden_inode(meta.dev(), meta.ino() + 1_000_000));
        assert_eq!(
            contains(&canonical_dir.join("state/views")),
            Some(canonical_dir.join("state"))
        );
        assert_eq!(contains(&canonical_dir), None);
    }
}
