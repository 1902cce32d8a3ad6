//! The enforcement view: a FUSE filesystem that serves a real directory
//! to one session's sandbox and judges every open, create, rename, link,
//! unlink, `chmod`, truncate and `setxattr` in it by that session's
//! authority (`session::opens`), the second filesystem over the same
//! session tree as the protocol mount (`src/mount/`).
//!
//! `permfs run` spawns its session with `view=DIR` (the cwd, and every
//! `--view DIR`); the protocol mount calls [`Views::open`], which mounts one
//! view per root under the state dir's `views/` (reachable by root and the
//! daemon's user only) and records where in the session (`session.json`'s
//! `views`), and `permfs run` binds each at its root's own absolute path
//! inside the sandbox. A view lives as long as its session: ending the
//! session (its `ctl` lease closing, `end`, its parent ending) unmounts it.
//!
//! What the view does not see: the network, other processes, devices,
//! and anything outside its roots (the sandbox's other binds, read-only).

mod fs;
mod nodes;
mod sys;
mod verdicts;

pub use fs::ViewFs;

use crate::session::Authority;
use std::collections::HashMap;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Threads serving one view: an open waiting for a person holds none, so
/// these only bound how many rule-answered operations run at once.
const VIEW_THREADS: usize = 4;

struct View {
    root: String,
    mountpoint: PathBuf,
    session: Option<fuser::BackgroundSession>,
}

/// Every view the daemon serves, by session (id and serial).
pub struct Views {
    dir: PathBuf,
    authority: Arc<Authority>,
    owner: u32,
    allow_other: bool,
    next: AtomicU64,
    open: Mutex<HashMap<(String, u64), Vec<View>>>,
}

impl Views {
    /// Views are mounted under `<state_dir>/views`.
    pub fn new(state_dir: &Path, authority: Arc<Authority>, owner: u32, allow_other: bool) -> Self {
        Self {
            dir: state_dir.join("views"),
            authority,
            owner,
            allow_other,
            next: AtomicU64::new(1),
            open: Mutex::new(HashMap::new()),
        }
    }

    /// Mounts a view of each of `roots` for session `id` (its `serial`),
    /// and records them in the session. All or nothing: a root that cannot
    /// be served unmounts the ones mounted before it.
    pub fn open(&self, id: &str, serial: u64, roots: &[String]) -> Result<(), String> {
        if roots.is_empty() {
            return Ok(());
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o711)
            .create(&self.dir)
            .map_err(|e| format!("cannot make {}: {e}", self.dir.display()))?;
        let _ = std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o711));
        let cwd = self
            .authority
            .with_tree(|t| t.get(id).map(|s| s.canonical_cwd.canonical()))
            .ok_or_else(|| format!("no session {id:?}"))?;
        let mut views: Vec<View> = Vec::new();
        for root in roots {
            match self.mount(id, serial, root, &cwd) {
                Ok(view) => views.push(view),
                Err(error) => {
                    for view in views {
                        unmount(view);
                    }
                    return Err(error);
                }
            }
        }
        let shown: Vec<(String, String)> = views
            .iter()
            .map(|v| (v.root.clone(), v.mountpoint.to_string_lossy().into_owned()))
            .collect();
        self.authority.set_views(id, shown);
        if let Ok(mut open) = self.open.lock() {
            open.entry((id.to_string(), serial))
                .or_default()
                .extend(views);
        }
        Ok(())
    }

    fn mount(&self, id: &str, serial: u64, root: &str, cwd: &str) -> Result<View, String> {
        let canonical = crate::facts::fence::canonicalize(Path::new(root))
            .map_err(|e| format!("view root {root}: {e}"))?;
        let root_dir = std::fs::File::open(&canonical)
            .and_then(|f| {
                if f.metadata()?.is_dir() {
                    Ok(f)
                } else {
                    Err(std::io::Error::from_raw_os_error(libc::ENOTDIR))
                }
            })
            .map_err(|e| format!("view root {}: {e}", canonical.display()))?;
        let shown = canonical.to_string_lossy().into_owned();
        let external = crate::facts::access_path::is_outside(&shown, cwd);
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let mountpoint = self
            .dir
            .join(format!("{serial}-{n}-{}", std::process::id()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&mountpoint)
            .map_err(|e| format!("cannot make {}: {e}", mountpoint.display()))?;
        let fs = ViewFs::new(
            Arc::clone(&self.authority),
            id.to_string(),
            canonical.clone(),
            root_dir.into(),
        )
        .map_err(|e| format!("view root {}: {e}", canonical.display()))?;
        let mut config = fuser::Config::default();
        config.mount_options = vec![
            fuser::MountOption::FSName("permfs-view".into()),
            fuser::MountOption::Subtype("permfs-view".into()),
            fuser::MountOption::DefaultPermissions,
        ];
        if self.owner == 0 || self.allow_other {
            config.acl = fuser::SessionACL::All;
        }
        config.n_threads = Some(VIEW_THREADS);
        let session = if self.owner == 0 {
            fuser::Session::new(fs, &mountpoint, &config).and_then(|s| s.spawn())
        } else {
            let mut options = vec![
                "fsname=permfs-view",
                "subtype=permfs-view",
                "default_permissions",
            ];
            if config.acl == fuser::SessionACL::All {
                options.push("allow_other");
            }
            let acl = config.acl;
            crate::mount::fusermount::mount(&mountpoint, &options.join(","))
                .and_then(|fd| fuser::Session::from_fd(fs, fd, acl, config))
                .and_then(|s| s.spawn())
        };
        match session {
            Ok(session) => {
                tracing::info!(session = %id, root = %shown, mountpoint = %mountpoint.display(), external, "view mounted");
                Ok(View {
                    root: shown,
                    mountpoint,
                    session: Some(session),
                })
            }
            Err(error) => {
                let _ = std::fs::remove_dir(&mountpoint);
                Err(format!("cannot mount a view of {shown}: {error}"))
            }
        }
    }

    /// Unmounts the views of sessions that ended.
    pub fn sweep(&self) {
        let ended: Vec<View> = match self.open.lock() {
            Ok(mut open) => {
                let gone: Vec<(String, u64)> = open
                    .keys()
                    .filter(|(id, serial)| !self.authority.is_session(id, *serial))
                    .cloned()
                    .collect();
                gone.into_iter()
                    .flat_map(|key| open.remove(&key).unwrap_or_default())
                    .collect()
            }
            Err(_) => Vec::new(),
        };
        for view in ended {
            unmount(view);
        }
    }

    /// Unmounts every view (the daemon stops).
    pub fn close_all(&self) {
        let all: Vec<View> = match self.open.lock() {
            Ok(mut open) => open.drain().flat_map(|(_, v)| v).collect(),
            Err(_) => Vec::new(),
        };
        for view in all {
            unmount(view);
        }
    }
}

/// Detaches the view from the host (a sandbox still holding it keeps it
/// until it exits), then ends its session in the background.
fn unmount(mut view: View) {
    tracing::info!(root = %view.root, mountpoint = %view.mountpoint.display(), "view unmounted");
    if let Err(error) = crate::mount::fusermount::unmount_lazily(&view.mountpoint) {
        tracing::warn!(%error, mountpoint = %view.mountpoint.display(), "a view could not be detached");
    }
    let mountpoint = view.mountpoint.clone();
    if let Some(session) = view.session.take() {
        let _ = std::thread::Builder::new()
            .name("permfs-view-end".into())
            .spawn(move || {
                let _ = session.join();
                let _ = std::fs::remove_dir(&mountpoint);
            });
    }
}
