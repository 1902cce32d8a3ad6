//! Path lookups that never enter permfs's own mount.
//!
//! The daemon looks at the filesystem on an agent's behalf from inside its
//! FUSE handlers: the symlinks and canonical form of every path an ask
//! names, the config layers of a session's cwd, the cwd a spawn asks for.
//! A path that leads into permfs's own mount (directly, or through a
//! symlink an agent planted) would make that handler send a FUSE request
//! to its own daemon and wait for another handler thread to answer it. A
//! few such asks at once took every thread and hung the authority for
//! everyone; a config file linked to an undecided `*.response` parked a
//! thread for good.
//!
//! So those lookups walk one component at a time on `O_PATH` descriptors:
//! a name is only ever looked up in a directory known to be outside every
//! fenced filesystem, a component that turns out to be one (the mount's
//! root, or a bind mount of part of it) ends the walk with a [`Fenced`]
//! error, and its attributes are read with `AT_STATX_DONT_SYNC`, which a
//! FUSE filesystem answers from the kernel's cache. Symlinks are read and
//! followed by the walk itself, so none leads into the fence unseen, and
//! there is no window between a check and the use of what was checked.
//! A file is read only once it is known to be a regular one: opening a
//! FIFO would block the handler until some writer came.
//!
//! The mount registers its device with [`fence_mount`] before it serves a
//! request. Until something is fenced (`permfs resolve`, unit tests) the
//! standard library's `realpath(3)` and `lstat(2)` are used instead: the
//! walk gives the same answers (its tests compare them), at about three
//! system calls per component where `realpath` needs one.

use std::collections::VecDeque;
use std::ffi::{CString, OsStr, OsString};
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

/// Symlinks followed in one walk before it gives up (`ELOOP`), as the
/// kernel's own limit.
const MAX_LINKS: usize = 40;

/// Devices (as `st_dev`) whose filesystems the daemon never looks inside.
static FENCED: RwLock<Vec<u64>> = RwLock::new(Vec::new());

/// Fences off the filesystem whose device is `dev`, for this process.
pub fn fence_device(dev: u64) {
    let mut fenced = FENCED.write().unwrap_or_else(|p| p.into_inner());
    if !fenced.contains(&dev) {
        fenced.push(dev);
    }
}

/// Fences off the filesystem mounted at `mountpoint` (read from the
/// kernel's cache: no request reaches a FUSE daemon); its device.
pub fn fence_mount(mountpoint: &Path) -> std::io::Result<u64> {
    let path = CString::new(mountpoint.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let stat = statx(libc::AT_FDCWD, &path, 0)?;
    fence_device(stat.dev);
    Ok(stat.dev)
}

/// The error of a walk that reached a fenced filesystem.
#[derive(Debug)]
pub struct Fenced {
    pub path: PathBuf,
}

impl std::fmt::Display for Fenced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} is inside permfs's own mount, which permfs does not look into",
            self.path.display()
        )
    }
}

impl std::error::Error for Fenced {}

/// Whether `error` is a walk's [`Fenced`].
pub fn is_fenced(error: &std::io::Error) -> bool {
    error.get_ref().is_some_and(|inner| inner.is::<Fenced>())
}

/// What kind of file a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Directory,
    Symlink,
    Regular,
    Other,
}

/// The attributes the daemon uses of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub kind: Kind,
    /// `st_dev`, encoded as `std::os::unix::fs::MetadataExt::dev` does.
    pub dev: u64,
    pub ino: u64,
    pub len: u64,
    pub modified: SystemTime,
}

impl Stat {
    pub fn is_dir(&self) -> bool {
        self.kind == Kind::Directory
    }

    fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        let file_type = meta.file_type();
        let kind = if file_type.is_dir() {
            Kind::Directory
        } else if file_type.is_symlink() {
            Kind::Symlink
        } else if file_type.is_file() {
            Kind::Regular
        } else {
            Kind::Other
        };
        Self {
            kind,
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
        }
    }
}

/// `realpath(3)` of `path`, or an error: missing components, a loop, or
/// [`Fenced`]. A relative path is taken from the daemon's cwd.
pub fn canonicalize(path: &Path) -> std::io::Result<PathBuf> {
    let fenced = fenced();
    if fenced.is_empty() && !in_asker_root() {
        return std::fs::canonicalize(path);
    }
    walk(path, true, &fenced)
        .map(|found| found.path)
        .map_err(Stop::into_error)
}

/// The canonical form of a path that may not exist: the longest prefix
/// (as written) that resolves, resolved, then the rest as written; a path
/// whose missing part holds `..` stays as written. A path that leads into
/// the fence is resolved up to the fenced component (the mount's real
/// path, whatever symlink led there) and taken lexically below it (the
/// mount has no symlinks). `Err` for a loop or no permission.
pub fn canonicalize_lenient(path: &Path) -> std::io::Result<PathBuf> {
    let fenced = fenced();
    if fenced.is_empty() && !in_asker_root() {
        return lenient_by_std(path);
    }
    match walk(path, true, &fenced) {
        Ok(found) => Ok(found.path),
        Err(Stop::Missing { lenient, .. } | Stop::Fenced { lenient, .. }) => Ok(lenient),
        Err(Stop::Failed(error)) => Err(error),
    }
}

/// `stat(2)` of `path` (symlinks followed).
pub fn metadata(path: &Path) -> std::io::Result<Stat> {
    let fenced = fenced();
    if fenced.is_empty() && !in_asker_root() {
        return std::fs::metadata(path).map(|meta| Stat::of(&meta));
    }
    walk(path, true, &fenced)
        .map(|found| found.stat)
        .map_err(Stop::into_error)
}

/// `lstat(2)` of `path` (a last component that is a symlink is described
/// itself; symlinks before it are followed).
pub fn symlink_metadata(path: &Path) -> std::io::Result<Stat> {
    let fenced = fenced();
    if fenced.is_empty() && !in_asker_root() {
        return std::fs::symlink_metadata(path).map(|meta| Stat::of(&meta));
    }
    walk(path, false, &fenced)
        .map(|found| found.stat)
        .map_err(Stop::into_error)
}

/// The contents of the regular file at `path`; anything else (a FIFO, a
/// device, a directory) is refused before it is opened. Always walked,
/// fence or not: the FIFO check is for every caller.
pub fn read(path: &Path) -> std::io::Result<Vec<u8>> {
    read_fenced(path, &fenced())
}

fn read_fenced(path: &Path, fenced: &[u64]) -> std::io::Result<Vec<u8>> {
    let found = walk(path, true, fenced).map_err(Stop::into_error)?;
    if found.stat.kind != Kind::Regular {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} is not a regular file", found.path.display()),
        ));
    }
    // Reopened through its descriptor: exactly the file that was checked,
    // whatever has been renamed since.
    let reopen = format!("/proc/self/fd/{}", found.fd.as_fd().as_raw_fd());
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(reopen)?;
    let mut data = Vec::with_capacity(found.stat.len.min(1 << 20) as usize);
    file.read_to_end(&mut data)?;
    Ok(data)
}

/// [`canonicalize_lenient`] with the standard library's calls, when
/// nothing is fenced (`permfs resolve`, tests): one `lstat` tells a missing
/// path without `realpath`'s readlink of every component.
fn lenient_by_std(path: &Path) -> std::io::Result<PathBuf> {
    let mut existing = path.to_path_buf();
    let mut tail: Vec<OsString> = Vec::new();
    loop {
        let absent = std::fs::symlink_metadata(&existing).is_err_and(|e| is_missing(&e));
        if !absent {
            match std::fs::canonicalize(&existing) {
                Ok(mut real) => {
                    for part in tail.iter().rev() {
                        real.push(part);
                    }
                    return Ok(real);
                }
                Err(e) if is_missing(&e) => {}
                Err(e) => return Err(e),
            }
        }
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                tail.push(name.to_os_string());
                existing = parent.to_path_buf();
            }
            _ => return Ok(path.to_path_buf()),
        }
    }
}

/// What a walk ended at: a descriptor of it (`O_PATH`), its canonical
/// path, and its attributes.
struct Found {
    fd: Dir,
    path: PathBuf,
    stat: Stat,
}

/// Why a walk stopped short.
enum Stop {
    /// A component does not exist, or a non-directory has one below it:
    /// the error, and the lenient form of the path.
    Missing {
        error: std::io::Error,
        lenient: PathBuf,
    },
    /// A component is on a fenced filesystem: the [`Fenced`] error, and
    /// the path resolved up to that component, lexical below it.
    Fenced {
        error: std::io::Error,
        lenient: PathBuf,
    },
    Failed(std::io::Error),
}

impl Stop {
    fn into_error(self) -> std::io::Error {
        match self {
            Stop::Missing { error, .. } | Stop::Fenced { error, .. } | Stop::Failed(error) => error,
        }
    }
}

impl From<std::io::Error> for Stop {
    fn from(error: std::io::Error) -> Self {
        Stop::Failed(error)
    }
}

/// A directory (or, at the end of a walk, any file) held by descriptor.
enum Dir {
    /// `/`, opened once per process.
    Root(BorrowedFd<'static>),
    Entry(OwnedFd),
}

impl AsFd for Dir {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Dir::Root(fd) => *fd,
            Dir::Entry(fd) => fd.as_fd(),
        }
    }
}

/// `/` and its attributes, opened once: every walk starts there.
static ROOT: std::sync::OnceLock<Option<(OwnedFd, Stat)>> = std::sync::OnceLock::new();

fn root() -> std::io::Result<(Dir, Stat)> {
    let opened = ROOT.get_or_init(|| {
        let fd = open_path(None, OsStr::new("/")).ok()?;
        let stat = statx_fd(fd.as_fd()).ok()?;
        Some((fd, stat))
    });
    match opened {
        Some((fd, stat)) => Ok((Dir::Root(fd.as_fd()), *stat)),
        None => Err(std::io::Error::other("cannot open /")),
    }
}

/// Where a walk starts, and where an absolute symlink leads back to: the
/// asker's root inside [`within_asker_root`], else `/`.
fn start() -> std::io::Result<(Dir, Stat)> {
    let asker = ASKER_ROOT.with(|r| r.borrow().clone());
    match asker {
        Some(asker) => Ok((Dir::Entry(asker.fd.try_clone()?), asker.stat)),
        None => root(),
    }
}

/// A sandboxed asker's root directory (`/proc/<pid>/root`), held open:
/// walks inside [`within_asker_root`] start there, `..` never climbs above
/// it and an absolute symlink leads back to it, so a path is resolved as
/// the asker's own mount namespace shows it (what `openat2`'s
/// `RESOLVE_IN_ROOT` does, one component at a time on descriptors).
#[derive(Debug)]
pub struct AskerRoot {
    fd: OwnedFd,
    stat: Stat,
}

/// How the process that raised an ask sees the filesystem.
#[derive(Debug, Clone)]
pub enum AskerView {
    /// As the daemon does (same mount namespace, or outside the mount:
    /// the library, `permfs resolve`).
    Daemon,
    /// Through its own root.
    Root(Arc<AskerRoot>),
    /// It could not be looked at (why): facts that touch the filesystem
    /// then floor to `ask`.
    Unavailable(String),
}

thread_local! {
    /// The pid of the caller whose FUSE request this thread is serving
    /// (set by the mount around the handlers that raise asks).
    static ASKER_PID: std::cell::Cell<Option<u32>> = const { std::cell::Cell::new(None) };
    /// The root walks start at while facts are fixed for a sandboxed asker.
    static ASKER_ROOT: std::cell::RefCell<Option<Arc<AskerRoot>>> = const { std::cell::RefCell::new(None) };
}

pub(crate) fn in_asker_root() -> bool {
    ASKER_ROOT.with(|r| r.borrow().is_some())
}

/// Marks this thread as serving a request of process `pid` until dropped
/// (the mount's handlers that may raise an ask). Cheap: the process is
/// looked at only when an ask is raised ([`asker_view`]).
pub struct AskerScope {
    previous: Option<u32>,
}

impl AskerScope {
    pub fn enter(pid: u32) -> Self {
        Self {
            previous: ASKER_PID.with(|p| p.replace(Some(pid))),
        }
    }
}

impl Drop for AskerScope {
    fn drop(&mut self) {
        ASKER_PID.with(|p| p.set(self.previous));
    }
}

/// The daemon's mount namespace (`/proc/self/ns/mnt`), read once.
fn daemon_namespace() -> Option<&'static PathBuf> {
    static NS: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    NS.get_or_init(|| std::fs::read_link("/proc/self/ns/mnt").ok())
        .as_ref()
}

/// How the caller of the request this thread serves sees the filesystem:
/// [`AskerView::Daemon`] outside a mount handler or for a caller in the
/// daemon's mount namespace, its root for one elsewhere, or why it could
/// not be looked at.
///
/// Races: `/proc/<pid>` is opened once and everything is read through
/// that descriptor, so the namespace compared and the root opened are of
/// one process (a process that exits meanwhile fails the reads, never
/// lends its pid's successor); the namespace is read again after the root
/// is opened and must not have changed.
pub fn asker_view() -> AskerView {
    match ASKER_PID.with(std::cell::Cell::get) {
        None => AskerView::Daemon,
        Some(0) => AskerView::Unavailable("the kernel did not say which process asked".into()),
        Some(pid) => match open_process_root(pid) {
            Ok(None) => AskerView::Daemon,
            Ok(Some(root)) => AskerView::Root(Arc::new(root)),
            Err(why) => AskerView::Unavailable(format!(
                "the asker's own view of the filesystem (process {pid}) cannot be looked at: {why}"
            )),
        },
    }
}

fn open_process_root(pid: u32) -> Result<Option<AskerRoot>, String> {
    use nix::fcntl::{openat, readlinkat, OFlag, AT_FDCWD};
    let daemon = daemon_namespace().ok_or("the daemon's own mount namespace is unreadable")?;
    // Most asks come from the daemon's own namespace: one readlink tells,
    // with no descriptor to open and close (a process that is gone or
    // changes namespace meanwhile is caught by the checked path below).
    if let Ok(quick) = readlinkat(AT_FDCWD, format!("/proc/{pid}/ns/mnt").as_str()) {
        if &PathBuf::from(quick) == daemon {
            return Ok(None);
        }
    }
    let dir_flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let mode = nix::sys::stat::Mode::empty();
    let proc_dir = openat(AT_FDCWD, format!("/proc/{pid}").as_str(), dir_flags, mode)
        .map_err(|e| format!("/proc/{pid}: {e}"))?;
    let namespace = |what: &str| {
        readlinkat(&proc_dir, "ns/mnt")
            .map(PathBuf::from)
            .map_err(|e| format!("/proc/{pid}/ns/mnt ({what}): {e}"))
    };
    let before = namespace("before")?;
    if &before == daemon {
        return Ok(None);
    }
    // `root` is a magic link: followed, it is the process's root directory
    // in its own mount namespace.
    let fd =
        openat(&proc_dir, "root", dir_flags, mode).map_err(|e| format!("/proc/{pid}/root: {e}"))?;
    if namespace("after")? != before {
        return Err("it changed its mount namespace while being looked at".into());
    }
    let stat = statx_fd(fd.as_fd()).map_err(|e| format!("/proc/{pid}/root: {e}"))?;
    Ok(Some(AskerRoot { fd, stat }))
}

/// Runs `f` with every walk of this thread inside `root` (none: as the
/// daemon sees it).
pub fn within_asker_root<R>(root: Option<&Arc<AskerRoot>>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Arc<AskerRoot>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            ASKER_ROOT.with(|r| *r.borrow_mut() = previous);
        }
    }
    let previous = ASKER_ROOT.with(|r| r.replace(root.cloned()));
    let _restore = Restore(previous);
    f()
}

/// The devices fenced now (written once, at mount).
fn fenced() -> std::sync::RwLockReadGuard<'static, Vec<u64>> {
    FENCED.read().unwrap_or_else(|p| p.into_inner())
}

fn walk(path: &Path, follow_last: bool, fenced: &[u64]) -> Result<Found, Stop> {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else if in_asker_root() {
        // The daemon's cwd means nothing in the asker's filesystem.
        return Err(Stop::Failed(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} is relative", path.display()),
        )));
    } else {
        std::env::current_dir()?.join(path)
    };
    let is_fenced = |stat: &Stat| fenced.contains(&stat.dev);
    // Stopped at a fenced component: the path as resolved so far, then
    // what was still to walk, taken lexically.
    let fence_stop = |mut lenient: PathBuf, pending: &VecDeque<(OsString, Option<usize>)>| {
        let error = std::io::Error::other(Fenced {
            path: lenient.clone(),
        });
        for (name, _) in pending {
            if name == ".." {
                lenient.pop();
            } else {
                lenient.push(name);
            }
        }
        Stop::Fenced { error, lenient }
    };

    let (mut current, mut stat) = start()?;
    if is_fenced(&stat) {
        let error = std::io::Error::other(Fenced {
            path: PathBuf::from("/"),
        });
        return Err(Stop::Fenced {
            error,
            lenient: absolute,
        });
    }
    let mut resolved = PathBuf::from("/");
    // The directories above `current`, for `..`.
    let mut above: Vec<(Dir, Stat)> = Vec::new();
    // The path's own components, and where the walk is among them: a
    // missing component leaves the path resolved up to the one (as
    // written) whose walk it broke, plus the rest as written.
    let written: Vec<OsString> = components(&absolute).into();
    let mut pending: VecDeque<(OsString, Option<usize>)> = written
        .iter()
        .enumerate()
        .map(|(index, name)| (name.clone(), Some(index)))
        .collect();
    let mut checkpoint = (resolved.clone(), 0);
    let mut links = 0;
    while let Some((name, index)) = pending.pop_front() {
        if let Some(index) = index {
            checkpoint = (resolved.clone(), index);
        }
        if name == ".." {
            if let Some((parent, parent_stat)) = above.pop() {
                current = parent;
                stat = parent_stat;
                resolved.pop();
            }
            continue;
        }
        // `current` is a directory outside the fence: looking `name` up in
        // it sends no request to permfs.
        let fd = match open_path(Some(current.as_fd()), &name) {
            Ok(fd) => fd,
            Err(error) if is_missing(&error) => {
                let (mut lenient, from) = checkpoint;
                let rest = &written[from..];
                if rest.iter().any(|part| part == "..") {
                    lenient = absolute.clone();
                } else {
                    lenient.extend(rest);
                }
                return Err(Stop::Missing { error, lenient });
            }
            Err(error) => return Err(Stop::Failed(error)),
        };
        let found = statx_fd(fd.as_fd())?;
        if is_fenced(&found) {
            return Err(fence_stop(resolved.join(&name), &pending));
        }
        let last = pending.is_empty();
        if found.kind == Kind::Symlink && (follow_last || !last) {
            links += 1;
            if links > MAX_LINKS {
                return Err(Stop::Failed(std::io::Error::from_raw_os_error(libc::ELOOP)));
            }
            let target = read_link(fd.as_fd())?;
            if target.is_absolute() {
                (current, stat) = start()?;
                above.clear();
                resolved = PathBuf::from("/");
            }
            for part in components(&target).into_iter().rev() {
                pending.push_front((part, None));
            }
            continue;
        }
        above.push((std::mem::replace(&mut current, Dir::Entry(fd)), stat));
        stat = found;
        resolved.push(&name);
    }
    Ok(Found {
        fd: current,
        path: resolved,
        stat,
    })
}

/// A component that does not exist, or a non-directory with one below.
fn is_missing(error: &std::io::Error) -> bool {
    error.kind() == std::io::ErrorKind::NotFound || error.raw_os_error() == Some(libc::ENOTDIR)
}

/// The names a path is made of, `..` kept (resolved against what the walk
/// found, as `realpath` does), `.` and repeated slashes dropped.
fn components(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|component| match component {
            Component::Normal(name) => Some(name.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

/// `openat(dir, name, O_PATH | O_NOFOLLOW)`: a descriptor that names the
/// file without opening it (no FUSE `OPEN`, no FIFO wait). `dir` is `None`
/// for the daemon's cwd.
fn open_path(dir: Option<BorrowedFd<'_>>, name: &OsStr) -> std::io::Result<OwnedFd> {
    use nix::fcntl::{openat, OFlag, AT_FDCWD};
    let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mode = nix::sys::stat::Mode::empty();
    match dir {
        Some(dir) => openat(dir, name, flags, mode),
        None => openat(AT_FDCWD, name, flags, mode),
    }
    .map_err(std::io::Error::from)
}

/// The target of the symlink `fd` (opened `O_PATH | O_NOFOLLOW`: the
/// empty path reads the link itself).
fn read_link(fd: BorrowedFd<'_>) -> std::io::Result<PathBuf> {
    nix::fcntl::readlinkat(fd, "")
        .map(PathBuf::from)
        .map_err(std::io::Error::from)
}

fn statx_fd(fd: BorrowedFd<'_>) -> std::io::Result<Stat> {
    statx(fd.as_raw_fd(), c"", libc::AT_EMPTY_PATH)
}

/// `statx` from the kernel's cache where it has one (a FUSE filesystem
/// is not asked), never following a last symlink.
fn statx(dirfd: i32, path: &std::ffi::CStr, flags: i32) -> std::io::Result<Stat> {
    let mut buffer = std::mem::MaybeUninit::<libc::statx>::zeroed();
    // SAFETY: `path` is a valid C string and `buffer` is large enough for
    // the `statx` the kernel writes.
    let result = unsafe {
        libc::statx(
            dirfd,
            path.as_ptr(),
            flags | libc::AT_SYMLINK_NOFOLLOW | libc::AT_STATX_DONT_SYNC,
            libc::STATX_TYPE | libc::STATX_INO | libc::STATX_SIZE | libc::STATX_MTIME,
            buffer.as_mut_ptr(),
        )
    };
    if result < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `statx` succeeded, so it filled the buffer.
    let raw = unsafe { buffer.assume_init() };
    let kind = match u32::from(raw.stx_mode) & libc::S_IFMT {
        libc::S_IFDIR => Kind::Directory,
        libc::S_IFLNK => Kind::Symlink,
        libc::S_IFREG => Kind::Regular,
        _ => Kind::Other,
    };
    let modified = if raw.stx_mtime.tv_sec >= 0 {
        SystemTime::UNIX_EPOCH + Duration::new(raw.stx_mtime.tv_sec as u64, raw.stx_mtime.tv_nsec)
    } else {
        SystemTime::UNIX_EPOCH
    };
    Ok(Stat {
        kind,
        dev: libc::makedev(raw.stx_dev_major, raw.stx_dev_minor),
        ino: raw.stx_ino,
        len: raw.stx_size,
        modified,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn tree() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        std::fs::create_dir_all(root.join("a/b")).expect("dirs");
        std::fs::write(root.join("a/b/file"), b"hello").expect("file");
        std::os::unix::fs::symlink("b", root.join("a/rel")).expect("link");
        std::os::unix::fs::symlink(root.join("a"), root.join("abs")).expect("link");
        std::os::unix::fs::symlink("loop", root.join("loop")).expect("link");
        std::os::unix::fs::symlink("missing/x", root.join("dangling")).expect("link");
        (dir, root)
    }

    /// The walk with nothing fenced (what the mount's own walk does
    /// apart from its fence).
    fn walked(path: &Path) -> std::io::Result<PathBuf> {
        walk(path, true, &[])
            .map(|found| found.path)
            .map_err(Stop::into_error)
    }

    fn walked_leniently(path: &Path) -> std::io::Result<PathBuf> {
        match walk(path, true, &[]) {
            Ok(found) => Ok(found.path),
            Err(Stop::Missing { lenient, .. } | Stop::Fenced { lenient, .. }) => Ok(lenient),
            Err(Stop::Failed(error)) => Err(error),
        }
    }

    #[test]
    fn it_resolves_as_realpath_does() {
        let (_dir, root) = tree();
        for path in [
            "a/b/file",
            "a/rel/file",
            "abs/rel/file",
            "abs/rel/../b/./file",
            "a/rel/..",
            "abs/../a//b",
        ] {
            let path = root.join(path);
            assert_eq!(
                walked(&path).ok(),
                std::fs::canonicalize(&path).ok(),
                "{}",
                path.display()
            );
        }
        for missing in ["a/nothing", "dangling", "a/b/file/below", "loop"] {
            let path = root.join(missing);
            let ours = walked(&path).expect_err("fails").raw_os_error();
            let theirs = std::fs::canonicalize(&path)
                .expect_err("fails")
                .raw_os_error();
            assert_eq!(ours, theirs, "{missing}");
        }
    }

    #[test]
    fn a_missing_tail_is_kept_as_the_standard_library_way_keeps_it() {
        let (_dir, root) = tree();
        for path in [
            "a/b/file",
            "abs/rel/new/deeper",
            "a/nothing",
            "a/nothing/../b",
            "dangling/more",
            "abs/dangling",
            "a/b/file/below",
            "abs/rel/file/below/x",
        ] {
            let path = root.join(path);
            let walked = walked_leniently(&path).expect("lenient");
            assert_eq!(
                Some(walked),
                lenient_by_std(&path).ok(),
                "{}",
                path.display()
            );
        }
        let looped = root.join("loop/x");
        assert_eq!(
            walked_leniently(&looped)
                .expect_err("a loop")
                .raw_os_error(),
            Some(libc::ELOOP)
        );
        assert!(lenient_by_std(&looped).is_err());
    }

    #[test]
    fn stat_and_lstat_describe_what_std_does() {
        let (_dir, root) = tree();
        let link = root.join("a/rel");
        let lstat = walk(&link, false, &[])
            .map_err(Stop::into_error)
            .expect("lstat");
        assert_eq!(lstat.stat.kind, Kind::Symlink);
        let std_lstat = std::fs::symlink_metadata(&link).expect("std lstat");
        assert_eq!(Stat::of(&std_lstat), lstat.stat);
        let followed = walk(&link, true, &[])
            .map_err(Stop::into_error)
            .expect("stat")
            .stat;
        let std_meta = std::fs::metadata(&link).expect("std stat");
        assert!(followed.is_dir());
        assert_eq!(Stat::of(&std_meta), followed);
        let file = walk(&root.join("abs/b/file"), true, &[])
            .map_err(Stop::into_error)
            .expect("stat")
            .stat;
        assert_eq!((file.kind, file.len), (Kind::Regular, 5));
        assert_eq!(read(&root.join("abs/rel/file")).expect("read"), b"hello");
    }

    #[test]
    fn a_fifo_is_refused_without_being_opened() {
        let (_dir, root) = tree();
        let fifo = root.join("a/fifo");
        let path = CString::new(fifo.as_os_str().as_bytes()).expect("c path");
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
        // `std::fs::read` would wait here for a writer that never comes.
        let error = read(&fifo).expect_err("refused");
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
        assert_eq!(metadata(&fifo).expect("stat").kind, Kind::Other);
    }

    #[test]
    fn a_fenced_device_is_never_entered_nor_reached_through_a_symlink() {
        // /proc stands in for the mount: another filesystem, fenced for
        // these walks only.
        let fence = [std::fs::metadata("/proc").expect("proc").dev()];
        let canonicalize = |path: &Path| {
            walk(path, true, &fence)
                .map(|found| found.path)
                .map_err(Stop::into_error)
        };
        let (_dir, root) = tree();
        std::os::unix::fs::symlink("/proc/self", root.join("into")).expect("link");
        for path in [
            PathBuf::from("/proc/self/status"),
            PathBuf::from("/proc"),
            root.join("into"),
            root.join("into/status"),
        ] {
            let error = canonicalize(&path).expect_err("fenced");
            assert!(is_fenced(&error), "{}: {error}", path.display());
            assert!(is_fenced(&read_fenced(&path, &fence).expect_err("fenced")));
        }
        // The link itself is outside: describing it does not enter.
        let lstat = walk(&root.join("into"), false, &fence)
            .map_err(Stop::into_error)
            .expect("lstat");
        assert_eq!(lstat.stat.kind, Kind::Symlink);
        assert!(canonicalize(&root.join("a/b")).is_ok());
        // A missing path under the fence is not "missing": it is fenced.
        let below = walk(Path::new("/proc/nothing/here"), true, &fence);
        assert!(matches!(below, Err(Stop::Fenced { error, .. }) if is_fenced(&error)));
        // Leniently, a path through a link into the fence is the fenced
        // filesystem's real path, lexical below it.
        let through = walk(&root.join("into/./a/../status"), true, &fence);
        assert!(matches!(
            through,
            Err(Stop::Fenced { lenient, .. }) if lenient == Path::new("/proc/self/status")
        ));
    }

    /// A directory as an asker's root, as `/proc/<pid>/root` would be.
    fn root_at(path: &Path) -> Arc<AskerRoot> {
        let fd = open_path(None, path.as_os_str()).expect("root opened");
        let stat = statx_fd(fd.as_fd()).expect("root stat");
        Arc::new(AskerRoot { fd, stat })
    }

    #[test]
    fn inside_an_askers_root_paths_resolve_as_the_asker_sees_them() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        std::fs::create_dir_all(root.join("tmp")).expect("dirs");
        std::fs::create_dir_all(root.join("etc")).expect("dirs");
        std::fs::create_dir_all(root.join("work")).expect("dirs");
        std::fs::write(root.join("etc/shadow"), b"secret").expect("file");
        // An absolute link means the asker's /etc, a relative one climbs
        // no higher than its root.
        std::os::unix::fs::symlink("/etc/shadow", root.join("tmp/x")).expect("link");
        std::os::unix::fs::symlink("/tmp/x", root.join("work/innocent.txt")).expect("link");
        std::os::unix::fs::symlink("../../../../etc/shadow", root.join("work/up")).expect("link");
        let asker = root_at(&root);
        let seen = within_asker_root(Some(&asker), || {
            (
                canonicalize(Path::new("/work/innocent.txt")).ok(),
                canonicalize(Path::new("/work/up")).ok(),
                canonicalize_lenient(Path::new("/tmp/missing/a")).ok(),
                symlink_metadata(Path::new("/tmp/x")).map(|s| s.kind).ok(),
                canonicalize(Path::new("relative")).is_err(),
            )
        });
        assert_eq!(seen.0, Some(PathBuf::from("/etc/shadow")));
        assert_eq!(seen.1, Some(PathBuf::from("/etc/shadow")));
        assert_eq!(seen.2, Some(PathBuf::from("/tmp/missing/a")));
        assert_eq!(seen.3, Some(Kind::Symlink));
        assert!(seen.4, "a relative path means nothing in the asker's root");
        // Outside the scope, the daemon's own view again.
        assert!(canonicalize(Path::new("/work/innocent.txt")).is_err());
    }

    #[test]
    fn this_process_is_seen_as_the_daemon_sees_and_pid_zero_is_unknown() {
        let own = {
            let _scope = AskerScope::enter(std::process::id());
            asker_view()
        };
        assert!(matches!(own, AskerView::Daemon), "{own:?}");
        let unknown = {
            let _scope = AskerScope::enter(0);
            asker_view()
        };
        assert!(matches!(unknown, AskerView::Unavailable(_)), "{unknown:?}");
        let gone = {
            let _scope = AskerScope::enter(u32::MAX);
            asker_view()
        };
        assert!(matches!(gone, AskerView::Unavailable(_)), "{gone:?}");
        assert!(matches!(asker_view(), AskerView::Daemon));
    }
}
