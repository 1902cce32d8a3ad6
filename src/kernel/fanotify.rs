//! Read opens, judged by fanotify permission events and remembered by the
//! kernel.
//!
//! One group per sandbox (ignore marks are per group: a stricter child
//! never rides on its parent's allows), with `FAN_OPEN_PERM` and
//! `FAN_OPEN_EXEC_PERM` on each of the sandbox's own mounts of its
//! roots. An open the policy allows is answered `FAN_ALLOW`, and the file
//! gets an inode ignore mark: the kernel lets the next open of it through
//! with no event at all, which is what makes a repeated `grep -r` cost
//! what it costs natively. A deny is `FAN_DENY` (the opener sees `EPERM`:
//! fanotify cannot say `EACCES`); an ask leaves the event pending (the
//! opener waits, killably) until the answer.
//!
//! Why the cache is only for reads: the event does not say how the file is
//! being opened, and an ignore mark lets every later open through. So
//! every open that may write is taken by the seccomp filter before the
//! kernel opens anything (`notify.rs`), and the daemon opens it itself,
//! judged as a write; the only opens left for this group are reads (and
//! the daemon's own, which it answers at once). A file with more than one
//! link is never marked (its other names may be judged otherwise), and the
//! marks are flushed whenever a verdict could have changed ([`Group::flush`]).

use super::judge::{Doer, Judge};
use crate::session::view::opens::Access;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const EVENTS: u64 = libc::FAN_OPEN_PERM | libc::FAN_OPEN_EXEC_PERM;

/// A sandbox's fanotify group.
pub struct Group {
    fd: OwnedFd,
    /// What moves a remembered file's name: see [`Watch`].
    watch: Watch,
    /// Bumped at every flush: directories prewarmed before it are
    /// prewarmed again at their next miss.
    epoch: std::sync::atomic::AtomicU64,
    /// Directories whose files were remembered ahead of their opens, with
    /// the epoch they were at ([`prewarm`]).
    prewarmed: std::sync::Mutex<std::collections::HashMap<String, u64>>,
    /// Set when the sandbox's session ended: every event is denied until
    /// its processes are gone (closing the group would allow them all).
    pub ended: AtomicBool,
}

impl Group {
    /// A new content-class group (needs `CAP_SYS_ADMIN`).
    pub fn new() -> std::io::Result<Self> {
        // SAFETY: plain syscall; the result is checked.
        let fd = unsafe {
            libc::fanotify_init(
                libc::FAN_CLASS_CONTENT
                    | libc::FAN_CLOEXEC
                    | libc::FAN_UNLIMITED_QUEUE
                    | libc::FAN_UNLIMITED_MARKS,
                (libc::O_RDONLY | libc::O_LARGEFILE | libc::O_CLOEXEC) as u32,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Self {
            // SAFETY: a new descriptor this process owns alone.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            watch: Watch::new()?,
            epoch: std::sync::atomic::AtomicU64::new(0),
            prewarmed: std::sync::Mutex::new(std::collections::HashMap::new()),
            ended: AtomicBool::new(false),
        })
    }

    /// Flushes the group whenever a remembered file, or a directory above
    /// one, is renamed or linked, wherever that happens (on the host too):
    /// runs until `stopped`.
    pub fn watch_names(&self, stopped: &dyn Fn() -> bool) {
        let mut buf = vec![0u8; 16 * 1024];
        while !stopped() {
            let mut poll = libc::pollfd {
                fd: self.watch.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one pollfd on the stack.
            if unsafe { libc::poll(&mut poll, 1, 200) } <= 0 {
                continue;
            }
            // SAFETY: reads into a buffer this function owns.
            let n = unsafe {
                libc::read(
                    self.watch.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                )
            };
            if n > 0 {
                tracing::debug!("kernel: a remembered name moved or gained a link: allows dropped");
                self.flush();
            }
        }
    }

    /// The group's descriptor (kept by the supervisor across restarts).
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub fn borrow(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.fd.as_fd()
    }

    /// Marks the mount at `path` (reached through the sandbox's
    /// `/proc/<pid>/root`, so it is the sandbox's own mount).
    pub fn mark_mount(&self, path: &std::ffi::CStr) -> std::io::Result<()> {
        // SAFETY: `path` is NUL-terminated.
        let rc = unsafe {
            libc::fanotify_mark(
                self.fd.as_raw_fd(),
                libc::FAN_MARK_ADD | libc::FAN_MARK_MOUNT,
                EVENTS,
                libc::AT_FDCWD,
                path.as_ptr(),
            )
        };
        if rc < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    fn mark(&self, flags: libc::c_uint, mask: u64, fd: RawFd) -> std::io::Result<()> {
        // SAFETY: `fd` is open; a null path names the descriptor itself.
        let rc =
            unsafe { libc::fanotify_mark(self.fd.as_raw_fd(), flags, mask, fd, std::ptr::null()) };
        if rc < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Drops every remembered allow: the next open of every file is judged
    /// again.
    pub fn flush(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        if let Err(error) = self.mark(libc::FAN_MARK_FLUSH, 0, libc::AT_FDCWD) {
            tracing::error!(%error, "kernel: the allow cache could not be flushed");
        }
    }

    fn respond(&self, fd: RawFd, allow: bool) {
        let response = libc::fanotify_response {
            fd,
            response: if allow {
                libc::FAN_ALLOW
            } else {
                libc::FAN_DENY
            },
        };
        // SAFETY: writes one response struct from the stack.
        let rc = unsafe {
            libc::write(
                self.fd.as_raw_fd(),
                std::ptr::addr_of!(response).cast(),
                std::mem::size_of::<libc::fanotify_response>(),
            )
        };
        if rc < 0 {
            tracing::error!(error = %std::io::Error::last_os_error(), "kernel: a fanotify answer could not be written");
        }
    }
}

/// Reads and answers `group`'s events until the group is closed, judging
/// each by `judge`. Events of the daemon itself (the seccomp side opening
/// a file it judged) are allowed at once.
pub fn serve(
    group: Arc<Group>,
    judge: Arc<Judge>,
    stopped: &dyn Fn() -> bool,
    unnamed: &dyn Fn(&str) -> bool,
) {
    let me = std::process::id() as i32;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if stopped() {
            return;
        }
        let mut poll = libc::pollfd {
            fd: group.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd on the stack.
        let ready = unsafe { libc::poll(&mut poll, 1, 200) };
        if ready <= 0 {
            continue;
        }
        // SAFETY: reads into a buffer this function owns.
        let n = unsafe { libc::read(group.fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            let error = std::io::Error::last_os_error();
            if error.raw_os_error() == Some(libc::EINTR)
                || error.raw_os_error() == Some(libc::EAGAIN)
            {
                continue;
            }
            tracing::error!(%error, "kernel: the fanotify group cannot be read");
            return;
        }
        let mut at = 0usize;
        let size = std::mem::size_of::<libc::fanotify_event_metadata>();
        while at + size <= n as usize {
            // SAFETY: the kernel wrote whole records; read_unaligned copes
            // with the byte buffer's alignment.
            let event: libc::fanotify_event_metadata =
                unsafe { std::ptr::read_unaligned(buf.as_ptr().add(at).cast()) };
            if event.event_len as usize == 0 {
                break;
            }
            at += event.event_len as usize;
            if event.fd < 0 {
                continue;
            }
            // SAFETY: the event's descriptor is this process's to close.
            let file = unsafe { OwnedFd::from_raw_fd(event.fd) };
            if event.pid == me {
                group.respond(event.fd, true);
                continue;
            }
            if group.ended.load(Ordering::Acquire) {
                group.respond(event.fd, false);
                continue;
            }
            answer(&group, &judge, file, event.pid as u32, unnamed);
        }
    }
}

/// Judges one open: rule-answered at once, an ask on a thread of its own.
fn answer(
    group: &Arc<Group>,
    judge: &Arc<Judge>,
    file: OwnedFd,
    pid: u32,
    unnamed: &dyn Fn(&str) -> bool,
) {
    let raw = file.as_raw_fd();
    let Some(path) = path_of(raw) else {
        group.respond(raw, false);
        return;
    };
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat into a stat on the stack.
    if unsafe { libc::fstat(raw, &mut st) } != 0 {
        group.respond(raw, false);
        return;
    }
    if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
        // Listing a directory is not judged (as in the FUSE view).
        group.respond(raw, true);
        return;
    }
    let cacheable = st.st_nlink == 1 && st.st_mode & libc::S_IFMT == libc::S_IFREG;
    let epoch = group.epoch.load(Ordering::Acquire);
    // No rule speaks for the path: allowed by the session's node, without
    // a walk (the common case).
    if unnamed(&path) {
        if cacheable {
            remember(group, raw, &path, epoch);
        }
        group.respond(raw, true);
        prewarm(group, &path, unnamed);
        return;
    }
    let accesses = vec![(path, Access::Read)];
    let doer = Doer {
        pid,
        uid: owner_of(pid),
    };
    match judge.dry(&accesses) {
        super::judge::Dry::Allow => {
            if cacheable {
                remember(group, raw, &accesses[0].0, epoch);
            }
            group.respond(raw, true);
        }
        super::judge::Dry::Deny(why) => {
            judge.denied(doer, &accesses, &why);
            group.respond(raw, false);
        }
        super::judge::Dry::Ask(_) => {
            let (waiting, judge) = (Arc::clone(group), Arc::clone(judge));
            let spawned = std::thread::Builder::new()
                .name("permfs-kernel-ask".into())
                .spawn(move || {
                    let what = format!(
                        "a program in the sandbox opens a file: read {}",
                        accesses[0].0
                    );
                    let gone = || !std::path::Path::new(&format!("/proc/{pid}")).exists();
                    let verdict = judge.judge(doer, &accesses, &what, &gone);
                    waiting.respond(file.as_raw_fd(), verdict.is_ok());
                    drop(file);
                });
            if let Err(error) = spawned {
                tracing::error!(%error, "kernel: no thread for an ask: refused");
                group.respond(raw, false);
            }
        }
    }
}

/// Sets the inode ignore mark that makes the kernel answer the next opens
/// of this file itself, once what would move its name is watched.
/// `epoch` is the group's when the verdict was reached: a flush since
/// (a verdict changed meanwhile) drops the mark again.
fn remember(group: &Group, fd: RawFd, path: &str, epoch: u64) {
    if !group.watch.file(fd, path) {
        return;
    }
    let flags = libc::FAN_MARK_ADD | libc::FAN_MARK_IGNORE_SURV | libc::FAN_MARK_EVICTABLE;
    if let Err(error) = group.mark(flags, EVENTS, fd) {
        tracing::debug!(%error, "kernel: an allow could not be remembered");
    }
    if group.epoch.load(Ordering::Acquire) != epoch {
        group.flush();
    }
}

/// Remembers, ahead of their opens, the other files of the directory of
/// `path` (a first miss there) that no rule speaks for: a tree read for
/// the first time (`grep -r` in a fresh sandbox) then pays about one miss
/// per directory, not one per file. Each is watched first, and a file with
/// more than one link is left to be judged at its open (checked again
/// after the mark: a link made meanwhile drops it).
fn prewarm(group: &Group, path: &str, unnamed: &dyn Fn(&str) -> bool) {
    /// Files remembered ahead in one directory at most.
    const MAX_AHEAD: usize = 4096;
    let Some(dir) = std::path::Path::new(path).parent() else {
        return;
    };
    let dir_text = dir.to_string_lossy().into_owned();
    let epoch = group.epoch.load(Ordering::Acquire);
    {
        let Ok(mut done) = group.prewarmed.lock() else {
            return;
        };
        if done.get(&dir_text) == Some(&epoch) {
            return;
        }
        if done.len() > 65_536 {
            done.clear();
        }
        done.insert(dir_text.clone(), epoch);
    }
    let Ok(c) = std::ffi::CString::new(dir_text.clone()) else {
        return;
    };
    // SAFETY: plain open; the result is checked.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return;
    }
    // SAFETY: a new descriptor owned here.
    let dirfd = unsafe { OwnedFd::from_raw_fd(fd) };
    let Ok(entries) = crate::view::list_fd(dirfd.as_raw_fd()) else {
        return;
    };
    let stat = |name: &std::ffi::CStr| -> Option<libc::stat> {
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstatat into a stat on the stack.
        let rc = unsafe {
            libc::fstatat(
                dirfd.as_raw_fd(),
                name.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        (rc == 0).then_some(st)
    };
    let single = |st: &libc::stat| st.st_nlink == 1 && st.st_mode & libc::S_IFMT == libc::S_IFREG;
    for (name, is_dir) in entries.into_iter().take(MAX_AHEAD) {
        if is_dir || group.epoch.load(Ordering::Acquire) != epoch {
            continue;
        }
        use std::os::unix::ffi::OsStrExt;
        let Ok(cname) = std::ffi::CString::new(name.as_bytes()) else {
            continue;
        };
        let full = format!("{dir_text}/{}", name.to_string_lossy());
        if !unnamed(&full) || !stat(&cname).is_some_and(|st| single(&st)) {
            continue;
        }
        if !group.watch.mark(
            libc::FAN_MOVE_SELF | libc::FAN_ATTRIB,
            dirfd.as_raw_fd(),
            Some(&cname),
        ) {
            continue;
        }
        let flags = libc::FAN_MARK_ADD
            | libc::FAN_MARK_IGNORE_SURV
            | libc::FAN_MARK_EVICTABLE
            | libc::FAN_MARK_DONT_FOLLOW;
        // SAFETY: `cname` is NUL-terminated; `dirfd` is open.
        let rc = unsafe {
            libc::fanotify_mark(group.fd(), flags, EVENTS, dirfd.as_raw_fd(), cname.as_ptr())
        };
        if rc == 0
            && (!stat(&cname).is_some_and(|st| single(&st))
                || group.epoch.load(Ordering::Acquire) != epoch)
        {
            // Linked (or replaced) while it was marked, or a verdict
            // changed meanwhile: judged at its open.
            group.flush();
            return;
        }
    }
}

/// A notification group beside the permission group: the inode of every
/// remembered file (renamed: `FAN_MOVE_SELF`; linked, its link count
/// changed: `FAN_ATTRIB`) and every directory above it (renamed) are
/// watched, so a remembered allow never outlives the name it was judged
/// at, whoever renames (the sandbox's renames go through the daemon; the
/// host's do not). Any such event flushes the permission group: coarse,
/// and rare.
struct Watch {
    fd: OwnedFd,
    /// Directories watched already (by path; a flush keeps them).
    dirs: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl Watch {
    fn new() -> std::io::Result<Self> {
        // SAFETY: plain syscall; the result is checked.
        let fd = unsafe {
            libc::fanotify_init(
                libc::FAN_CLASS_NOTIF
                    | libc::FAN_CLOEXEC
                    | libc::FAN_NONBLOCK
                    | libc::FAN_REPORT_FID
                    | libc::FAN_UNLIMITED_QUEUE
                    | libc::FAN_UNLIMITED_MARKS,
                libc::O_RDONLY as u32,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Self {
            // SAFETY: a new descriptor owned here alone.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            dirs: std::sync::Mutex::new(std::collections::HashSet::new()),
        })
    }

    fn mark(&self, mask: u64, fd: RawFd, path: Option<&std::ffi::CStr>) -> bool {
        let flags = libc::FAN_MARK_ADD | libc::FAN_MARK_EVICTABLE | libc::FAN_MARK_DONT_FOLLOW;
        // SAFETY: `fd` is open; `path`, when given, is NUL-terminated.
        let rc = unsafe {
            libc::fanotify_mark(
                self.fd.as_raw_fd(),
                flags,
                mask,
                fd,
                path.map_or(std::ptr::null(), |p| p.as_ptr()),
            )
        };
        rc == 0
    }

    /// Watches the file open at `fd` (named `path`) and the directories
    /// above it; false when any of it cannot be watched (then the allow is
    /// not remembered).
    fn file(&self, fd: RawFd, path: &str) -> bool {
        if !self.mark(libc::FAN_MOVE_SELF | libc::FAN_ATTRIB, fd, None) {
            return false;
        }
        let mut dirs = self.dirs.lock().unwrap_or_else(|p| p.into_inner());
        let mut at = std::path::Path::new(path).parent();
        while let Some(dir) = at {
            let text = dir.to_string_lossy().into_owned();
            if dirs.contains(&text) {
                break;
            }
            let Ok(c) = std::ffi::CString::new(text.clone()) else {
                return false;
            };
            // (The roots are bound at their own paths: the directory the
            // daemon reaches by this name is the sandbox's.)
            if !self.mark(
                libc::FAN_MOVE_SELF | libc::FAN_ONDIR,
                libc::AT_FDCWD,
                Some(&c),
            ) {
                return false;
            }
            dirs.insert(text);
            at = dir.parent();
        }
        true
    }
}

/// The path of an open descriptor as its opener sees it.
pub fn path_of(fd: RawFd) -> Option<String> {
    let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
    let text = link.to_str()?.to_string();
    // An unlinked file or one outside the reader's root: not a path the
    // policy can judge.
    if !text.starts_with('/') || text.ends_with(" (deleted)") {
        return None;
    }
    Some(text)
}

/// The uid a process runs as (0 when it cannot be read).
pub fn owner_of(pid: u32) -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}")).map_or(0, |m| m.uid())
}
