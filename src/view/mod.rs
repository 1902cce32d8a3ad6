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
//! What it does not show: the daemon's state dir and mount, wherever they
//! lie under a root (`hidden.rs`).
//!
//! A view outlives the server that made it: its `/dev/fuse` descriptor is
//! handed to the supervisor with its [`ViewDefinition`]
//! (`mount/keeper.rs`), its node table is logged (`nodelog.rs`), and the
//! next server serves it on the same connection ([`Views::adopt`]); an
//! open the dead server had read is re-sent by the kernel and finds the
//! ask it raised (`docs/restart.md`).

mod fs;
mod hidden;
pub(crate) mod moves;
mod nodelog;
mod nodes;
mod sys;
mod verdicts;

pub use fs::{open_accesses, ViewFs};
pub use hidden::{hide_dir, hide_mount};
pub use sys::{command_line, list_fd};

use crate::mount::keeper::Keeper;
use crate::session::Authority;
use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Threads serving one view: an open waiting for a person holds none, so
/// these only bound how many rule-answered operations run at once.
const VIEW_THREADS: usize = 4;

/// What a view is: what the supervisor keeps with its connection and
/// hands to the next server, which serves the view from it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ViewDefinition {
    /// The mount point's name under `views/`: unique across servers (it
    /// carries the pid of the server that made it).
    pub key: String,
    pub session: String,
    pub serial: u64,
    /// The root as the sandbox sees it (canonical).
    pub root: String,
    pub mountpoint: PathBuf,
    /// Whether the kernel took FUSE passthrough at the view's `INIT`.
    pub passthrough: bool,
}

struct View {
    key: String,
    root: String,
    mountpoint: PathBuf,
    log: PathBuf,
    session: Option<fuser::BackgroundSession>,
    /// The filesystem's shared state, trimmed when idle ([`Views::sweep`]).
    shared: Arc<fs::Inner>,
}

/// Every view the daemon serves, by session (id and serial).
pub struct Views {
    dir: PathBuf,
    authority: Arc<Authority>,
    owner: u32,
    allow_other: bool,
    next: AtomicU64,
    open: Mutex<HashMap<(String, u64), Vec<View>>>,
    /// The supervisor's keeper: views handed to it outlive this server.
    keeper: OnceLock<Keeper>,
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
            keeper: OnceLock::new(),
        }
    }

    /// Hands every view made from now on to the supervisor.
    pub fn set_keeper(&self, keeper: Keeper) {
        let _ = self.keeper.set(keeper);
    }

    /// Mounts a view of each of `roots` for session `id` (its `serial`),
    /// and records them in the session. All or nothing: a root that cannot
    /// be served unmounts the ones mounted before it.
    pub fn open(&self, id: &str, serial: u64, roots: &[String]) -> Result<(), String> {
        if roots.is_empty() {
            return Ok(());
        }
        self.make_dir()?;
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
                        self.unmount(view);
                    }
                    return Err(error);
                }
            }
        }
        self.record(id, serial, views);
        Ok(())
    }

    fn make_dir(&self) -> Result<(), String> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o711)
            .create(&self.dir)
            .map_err(|e| format!("cannot make {}: {e}", self.dir.display()))?;
        let _ = std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o711));
        Ok(())
    }

    /// Shows `views` in their session and keeps them until it ends.
    fn record(&self, id: &str, serial: u64, views: Vec<View>) {
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
    }

    fn config(&self) -> fuser::Config {
        let mut config = fuser::Config::default();
        if self.owner == 0 || self.allow_other {
            config.acl = fuser::SessionACL::All;
        }
        config.n_threads = Some(VIEW_THREADS);
        config
    }

    fn identity(&self, key: &str) -> fs::Identity {
        fs::Identity {
            tag: key.to_string(),
            first_fh: self.authority.epoch().saturating_mul(1 << 40),
        }
    }

    fn mount(&self, id: &str, serial: u64, root: &str, cwd: &str) -> Result<View, String> {
        let canonical = crate::facts::fence::canonicalize(Path::new(root))
            .map_err(|e| format!("view root {root}: {e}"))?;
        // A view inside the state dir or the mount would show what every
        // view hides.
        if let Some(dir) = hidden::contains(&canonical) {
            return Err(format!(
                "view root {root}: inside {}, the daemon's own state dir or mount, which no view shows",
                dir.display()
            ));
        }
        let root_dir = open_root(&canonical)?;
        let shown = canonical.to_string_lossy().into_owned();
        let external = crate::facts::access_path::is_outside(&shown, cwd);
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let key = format!("{serial}-{n}-{}", std::process::id());
        let mountpoint = self.dir.join(&key);
        let log_path = self.dir.join(format!("{key}.nodes"));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&mountpoint)
            .map_err(|e| format!("cannot make {}: {e}", mountpoint.display()))?;
        let definition = ViewDefinition {
            key: key.clone(),
            session: id.to_string(),
            serial,
            root: shown.clone(),
            mountpoint: mountpoint.clone(),
            passthrough: false,
        };
        match self.serve_new(definition, &canonical, root_dir, &log_path) {
            Ok((session, shared)) => {
                tracing::info!(session = %id, root = %shown, mountpoint = %mountpoint.display(), external, "view mounted");
                Ok(View {
                    key,
                    root: shown,
                    mountpoint,
                    log: log_path,
                    session: Some(session),
                    shared,
                })
            }
            Err(error) => {
                let _ = std::fs::remove_dir(&mountpoint);
                let _ = std::fs::remove_file(&log_path);
                Err(error)
            }
        }
    }

    /// Mounts the view `definition` names (its mount point made, nothing
    /// in it yet), serves it, and hands a copy of its connection to the
    /// supervisor. On an error nothing is left mounted; the caller removes
    /// the mount point and the log.
    fn serve_new(
        &self,
        mut definition: ViewDefinition,
        canonical: &Path,
        root_dir: OwnedFd,
        log_path: &Path,
    ) -> Result<(fuser::BackgroundSession, Arc<fs::Inner>), String> {
        let fs = ViewFs::new(
            Arc::clone(&self.authority),
            definition.session.clone(),
            canonical.to_path_buf(),
            root_dir,
            self.identity(&definition.key),
        )
        .map_err(|e| format!("view root {}: {e}", canonical.display()))?;
        match nodelog::NodeLog::create(log_path) {
            Ok(log) => fs.set_log(log),
            Err(error) => {
                tracing::warn!(%error, log = %log_path.display(), "the view's node log cannot be made: the view will not outlive this server")
            }
        }
        let passthrough = fs.passthrough_probe();
        let shared = fs.shared();
        let shown = &definition.root;
        let fd = mount_fd(&definition.mountpoint, self.owner, self.allow_other)
            .map_err(|e| format!("cannot mount a view of {shown}: {e}"))?;
        let kept = fd.try_clone();
        let config = self.config();
        let acl = config.acl;
        let session = fuser::Session::from_fd(fs, fd, acl, config)
            .and_then(|s| s.spawn())
            .map_err(|e| {
                let _ = crate::mount::fusermount::unmount_lazily(&definition.mountpoint);
                format!("cannot serve a view of {shown}: {e}")
            })?;
        definition.passthrough = passthrough();
        self.keep(&definition, kept);
        Ok((session, shared))
    }

    /// Hands a copy of the view's connection to the supervisor (before
    /// the view is answered to `permfs run`, so a view anyone uses is
    /// kept).
    fn keep(&self, definition: &ViewDefinition, fd: std::io::Result<OwnedFd>) {
        let Some(keeper) = self.keeper.get() else {
            return;
        };
        let kept = fd.and_then(|fd| {
            let text = serde_json::to_string(definition).map_err(std::io::Error::other)?;
            keeper.keep(&text, fd.as_fd())
        });
        if let Err(error) = kept {
            tracing::warn!(%error, key = %definition.key, "the supervisor cannot keep this view: it ends with this server");
        }
    }

    /// Serves the views the supervisor kept across the death (or the
    /// upgrade) of the server before this one: `count` of them wait on the
    /// keeper socket. A view whose session is gone is detached and let go.
    /// What the kernel mechanism kept (`"kind": "kernel"`) is returned for
    /// it to take over.
    pub fn adopt(&self, count: usize) -> Vec<(String, OwnedFd)> {
        let Some(keeper) = self.keeper.get() else {
            return Vec::new();
        };
        let mut kernel = Vec::new();
        for (text, fd) in keeper.take(count) {
            if crate::kernel::is_kept(&text) {
                kernel.push((text, fd));
                continue;
            }
            let definition: ViewDefinition = match serde_json::from_str(&text) {
                Ok(definition) => definition,
                Err(error) => {
                    tracing::error!(%error, definition = %text, "a kept view cannot be read: its connection is let go");
                    continue;
                }
            };
            let key = definition.key.clone();
            let log = self.dir.join(format!("{key}.nodes"));
            match self.serve_kept(&definition, fd, &log) {
                Ok(view) => {
                    tracing::info!(session = %definition.session, root = %definition.root, mountpoint = %definition.mountpoint.display(), "view taken over from the previous server");
                    self.record(&definition.session, definition.serial, vec![view]);
                }
                Err(reason) => {
                    tracing::warn!(%reason, session = %definition.session, root = %definition.root, "a kept view is not served again: detached");
                    if let Err(error) =
                        crate::mount::fusermount::unmount_lazily(&definition.mountpoint)
                    {
                        tracing::warn!(%error, mountpoint = %definition.mountpoint.display(), "a view could not be detached");
                    }
                    let _ = keeper.drop_view(&key);
                    let _ = std::fs::remove_file(&log);
                    let _ = std::fs::remove_dir(&definition.mountpoint);
                }
            }
        }
        kernel
    }

    fn serve_kept(
        &self,
        definition: &ViewDefinition,
        fd: OwnedFd,
        log_path: &Path,
    ) -> Result<View, String> {
        if !self
            .authority
            .is_session(&definition.session, definition.serial)
        {
            return Err("its session ended".into());
        }
        let root = PathBuf::from(&definition.root);
        let root_dir = open_root(&root)?;
        let fs = ViewFs::new(
            Arc::clone(&self.authority),
            definition.session.clone(),
            root,
            root_dir,
            self.identity(&definition.key),
        )
        .map_err(|e| format!("view root {}: {e}", definition.root))?;
        let logged = match nodelog::replay(log_path) {
            Ok(logged) => logged,
            Err(error) => {
                tracing::warn!(%error, log = %log_path.display(), "the view's node log cannot be read: names the kernel holds read ENOENT");
                nodelog::Replayed::default()
            }
        };
        fs.restore(&logged, definition.passthrough);
        match nodelog::NodeLog::rewrite(log_path, &fs.logged()) {
            Ok(log) => fs.set_log(log),
            Err(error) => {
                tracing::warn!(%error, log = %log_path.display(), "the view's node log cannot be written: the view will not outlive this server")
            }
        }
        let shared = fs.shared();
        let config = self.config();
        let acl = config.acl;
        let session = fuser::Session::from_fd_initialized(fs, fd, acl, config);
        if let Err(error) = session.notifier().resend() {
            tracing::warn!(%error, "the kernel cannot re-send a view's requests in flight (Linux < 6.9?): their callers wait until interrupted");
        }
        let session = session
            .spawn()
            .map_err(|e| format!("cannot serve it: {e}"))?;
        // New keys carry this server's pid, but a pid comes round again:
        // numbering above every kept key never makes a name already taken.
        let n: u64 = definition
            .key
            .split('-')
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        self.next.fetch_max(n + 1, Ordering::Relaxed);
        Ok(View {
            key: definition.key.clone(),
            root: definition.root.clone(),
            mountpoint: definition.mountpoint.clone(),
            log: log_path.to_path_buf(),
            session: Some(session),
            shared,
        })
    }

    /// Unmounts the views of sessions that ended, and trims what idle
    /// views no longer need (called every tick of the expiry thread).
    pub fn sweep(&self) {
        self.trim_idle();
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
            self.unmount(view);
        }
    }

    /// Gives back what large tables and caches of idle views held
    /// ([`fs::Inner::trim_when_idle`]; nothing to do costs one load a view).
    fn trim_idle(&self) {
        let shared: Vec<Arc<fs::Inner>> = match self.open.lock() {
            Ok(open) => open
                .values()
                .flatten()
                .map(|v| Arc::clone(&v.shared))
                .collect(),
            Err(_) => return,
        };
        let now = std::time::Instant::now();
        let mut trimmed = false;
        for view in shared {
            trimmed |= view.trim_when_idle(now);
        }
        if trimmed {
            fs::release_free_memory();
        }
    }

    /// Unmounts every view (the daemon stops).
    pub fn close_all(&self) {
        let all: Vec<View> = match self.open.lock() {
            Ok(mut open) => open.drain().flat_map(|(_, v)| v).collect(),
            Err(_) => Vec::new(),
        };
        for view in all {
            self.unmount(view);
        }
    }

    /// Detaches the view from the host (a sandbox still holding it keeps
    /// it until it exits), lets the supervisor's copy go, then ends its
    /// session in the background.
    fn unmount(&self, mut view: View) {
        tracing::info!(root = %view.root, mountpoint = %view.mountpoint.display(), "view unmounted");
        if let Err(error) = crate::mount::fusermount::unmount_lazily(&view.mountpoint) {
            tracing::warn!(%error, mountpoint = %view.mountpoint.display(), "a view could not be detached");
        }
        if let Some(keeper) = self.keeper.get() {
            if let Err(error) = keeper.drop_view(&view.key) {
                tracing::warn!(%error, key = %view.key, "the supervisor could not be told a view ended");
            }
        }
        let _ = std::fs::remove_file(&view.log);
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
}

/// The view's root directory, which must be one.
fn open_root(root: &Path) -> Result<OwnedFd, String> {
    std::fs::File::open(root)
        .and_then(|f| {
            if f.metadata()?.is_dir() {
                Ok(OwnedFd::from(f))
            } else {
                Err(std::io::Error::from_raw_os_error(libc::ENOTDIR))
            }
        })
        .map_err(|e| format!("view root {}: {e}", root.display()))
}

/// Mounts a view at `mountpoint` and returns its `/dev/fuse` descriptor.
fn mount_fd(mountpoint: &Path, owner: u32, allow_other: bool) -> std::io::Result<OwnedFd> {
    crate::mount::fusermount::mount_as(
        mountpoint,
        "permfs-view",
        &["default_permissions"],
        owner,
        allow_other,
    )
}
