//! Writes and namespace changes, judged and performed by the daemon.
//!
//! The sandbox's seccomp filter (`filter.rs`) stops every call that may
//! write or change a path; this module receives it on the listener, reads
//! its arguments out of the caller (`/proc/<tid>/mem`, its descriptors by
//! `pidfd_getfd`), judges what it would do as the FUSE view judges it
//! (a write of every path it changes; a rename moves every name below
//! it, `view::moves`), and, when allowed, **performs it itself** and
//! hands back the result (an open's descriptor with
//! `SECCOMP_IOCTL_NOTIF_ADDFD`). The call never continues in the sandbox
//! (`SECCOMP_USER_NOTIF_FLAG_CONTINUE` would let a second thread swap the
//! path after the judgment).
//!
//! Two kinds of threads, because the two halves need different powers:
//! the **dispatcher** stays root (reading another process's memory and
//! taking its descriptors needs ptrace rights), and each **worker** enters
//! the sandbox once and for all — its mount namespace and root, its
//! Landlock domain (the wall's own ruleset), its uid, gid and groups, no
//! capabilities — so a path resolves as it resolves in the sandbox and an
//! act is refused where the sandbox's own would be. Workers block while an
//! ask waits, so the pool grows when every worker is busy.

use super::judge::{Doer, Verdict};
use super::Sandbox;
use crate::session::view::opens::Access;
use std::ffi::{CStr, CString, OsStr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Workers at most per sandbox (each may hold an ask).
const MAX_WORKERS: usize = 64;

/// A call taken from the sandbox, its arguments read.
struct Call {
    id: u64,
    nr: i64,
    pid: u32,
    args: [u64; 6],
    /// Paths the call names, in argument order.
    paths: Vec<CString>,
    /// Descriptors the call names (its `dirfd`s, or the file of an
    /// `f*` call), taken from the caller; `None` for `AT_FDCWD` (then the
    /// caller's cwd is in `cwd`).
    fds: Vec<Option<OwnedFd>>,
    cwd: Option<OwnedFd>,
    /// Extra bytes: an xattr's value, an `open_how`, a times array.
    data: Vec<u8>,
    umask: u32,
    /// An open of one of the caller's own descriptors by its alias
    /// (`/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N`): that descriptor,
    /// taken from the caller (the daemon's `/proc/self` is not the
    /// caller's).
    alias: Option<OwnedFd>,
}

/// Serves the listener until it closes or the sandbox ends.
pub fn serve(sandbox: Arc<Sandbox>, listener: OwnedFd) {
    let listener = Arc::new(listener);
    let (jobs, queue) = crossbeam_channel::unbounded::<Call>();
    let idle = Arc::new(AtomicUsize::new(0));
    let mut workers = 0usize;
    let mut callers = Callers::new();
    loop {
        let mut poll = libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd on the stack.
        let ready = unsafe { libc::poll(&mut poll, 1, 500) };
        if sandbox.stopped() {
            return;
        }
        if ready <= 0 {
            continue;
        }
        if poll.revents & (libc::POLLHUP | libc::POLLERR) != 0 && poll.revents & libc::POLLIN == 0 {
            // Every process of the sandbox is gone.
            return;
        }
        // SAFETY: zeroed plain struct, as the ioctl requires.
        let mut notif: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: the ioctl fills `notif`.
        let rc = unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV as _,
                &mut notif,
            )
        };
        if rc < 0 {
            let error = std::io::Error::last_os_error();
            match error.raw_os_error() {
                Some(libc::EINTR) | Some(libc::ENOENT) => continue,
                // Never given up on an error: returning would close the
                // sandbox's fanotify group, which allows what it holds.
                // Only the listener's hang-up (no process left) ends this.
                _ => {
                    tracing::error!(%error, "kernel: the seccomp listener cannot be read; trying again");
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    continue;
                }
            }
        }
        let call = match take(&sandbox, &mut callers, &notif) {
            Ok(call) => call,
            Err(errno) => {
                reply(&listener, notif.id, Err(errno));
                continue;
            }
        };
        if !valid(&listener, call.id) {
            continue;
        }
        if idle.load(Ordering::Acquire) == 0 && workers < MAX_WORKERS {
            let (sandbox, listener, queue, idle) = (
                Arc::clone(&sandbox),
                Arc::clone(&listener),
                queue.clone(),
                Arc::clone(&idle),
            );
            let spawned = std::thread::Builder::new()
                .name("permfs-kernel-worker".into())
                .spawn(move || work(&sandbox, &listener, &queue, &idle));
            match spawned {
                Ok(_) => workers += 1,
                Err(error) => tracing::error!(%error, "kernel: no worker thread"),
            }
        }
        if jobs.send(call).is_err() {
            return;
        }
    }
}

/// Whether the kernel still waits for an answer to call `id`.
fn valid(listener: &OwnedFd, id: u64) -> bool {
    // SAFETY: reads the id from the stack.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID as _,
            &id,
        ) == 0
    }
}

/// Answers call `id`: a value, or an errno.
fn reply(listener: &OwnedFd, id: u64, result: Result<i64, i32>) {
    let resp = libc::seccomp_notif_resp {
        id,
        val: result.unwrap_or(0),
        error: result.err().map_or(0, |e| -e),
        flags: 0,
    };
    // SAFETY: the ioctl reads `resp`.
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND as _,
            &resp,
        )
    };
    if rc < 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "kernel: a call's answer was not taken (its caller is gone)");
    }
}

/// Installs `file` in the caller as the result of call `id`.
fn reply_fd(listener: &OwnedFd, id: u64, file: &OwnedFd, cloexec: bool) {
    let addfd = libc::seccomp_notif_addfd {
        id,
        flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
        srcfd: file.as_raw_fd() as u32,
        newfd: 0,
        newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
    };
    // SAFETY: the ioctl reads `addfd`.
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ADDFD as _,
            &addfd,
        )
    };
    if rc < 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "kernel: an opened file could not be handed over (its caller is gone)");
    }
}

/// Where each call keeps its paths and descriptors: (path argument,
/// its dirfd argument or `None` for cwd-relative) pairs, and the index of
/// a file-descriptor argument.
fn shape(nr: i64) -> (&'static [(usize, Option<usize>)], Option<usize>) {
    match nr {
        libc::SYS_open
        | libc::SYS_creat
        | libc::SYS_mkdir
        | libc::SYS_rmdir
        | libc::SYS_unlink
        | libc::SYS_mknod
        | libc::SYS_truncate
        | libc::SYS_chmod
        | libc::SYS_chown
        | libc::SYS_lchown
        | libc::SYS_utime
        | libc::SYS_utimes
        | libc::SYS_setxattr
        | libc::SYS_lsetxattr
        | libc::SYS_removexattr
        | libc::SYS_lremovexattr => (&[(0, None)], None),
        libc::SYS_openat
        | libc::SYS_openat2
        | libc::SYS_mkdirat
        | libc::SYS_unlinkat
        | libc::SYS_mknodat
        | libc::SYS_fchmodat
        | libc::SYS_fchmodat2
        | libc::SYS_fchownat
        | libc::SYS_futimesat => (&[(1, Some(0))], None),
        // utimensat's path may be null: then its dirfd is the file.
        libc::SYS_utimensat => (&[(1, Some(0))], None),
        libc::SYS_rename | libc::SYS_link => (&[(0, None), (1, None)], None),
        libc::SYS_renameat | libc::SYS_renameat2 | libc::SYS_linkat => {
            (&[(1, Some(0)), (3, Some(2))], None)
        }
        libc::SYS_symlink => (&[(0, None), (1, None)], None),
        libc::SYS_symlinkat => (&[(0, None), (2, Some(1))], None),
        libc::SYS_fchmod | libc::SYS_fchown | libc::SYS_fsetxattr | libc::SYS_fremovexattr => {
            (&[], Some(0))
        }
        _ => (&[], None),
    }
}

/// Reads call `notif`'s arguments out of its caller (as root).
/// A caller's memory and pidfd, kept by thread id between its calls (a
/// build makes thousands from the same few threads). A kept memory file
/// of a thread that exited or exec'd reads nothing (it holds the old
/// address space, never another process's), so a failed read opens it
/// afresh; and every call is checked valid after its arguments are read.
struct Callers {
    by_tid: std::collections::HashMap<u32, (std::fs::File, OwnedFd)>,
}

impl Callers {
    fn new() -> Self {
        Self {
            by_tid: std::collections::HashMap::new(),
        }
    }

    fn get(&mut self, pid: u32, fresh: bool) -> Result<&(std::fs::File, OwnedFd), i32> {
        if fresh || !self.by_tid.contains_key(&pid) {
            if self.by_tid.len() > 1024 {
                self.by_tid.clear();
            }
            let mem = std::fs::File::open(format!("/proc/{pid}/mem")).map_err(|_| libc::ESRCH)?;
            let pidfd = pidfd_of(pid).ok_or(libc::ESRCH)?;
            self.by_tid.insert(pid, (mem, pidfd));
        }
        self.by_tid.get(&pid).ok_or(libc::ESRCH)
    }
}

/// Reads call `notif`'s arguments out of its caller (as root): with the
/// kept memory file first, and once more with a fresh one if that fails.
fn take(
    sandbox: &Sandbox,
    callers: &mut Callers,
    notif: &libc::seccomp_notif,
) -> Result<Call, i32> {
    let kept = callers.get(notif.pid, false)?;
    match take_with(sandbox, notif, &kept.0, &kept.1) {
        Ok(call) => Ok(call),
        Err(_) => {
            let fresh = callers.get(notif.pid, true)?;
            take_with(sandbox, notif, &fresh.0, &fresh.1)
        }
    }
}

fn take_with(
    sandbox: &Sandbox,
    notif: &libc::seccomp_notif,
    mem: &std::fs::File,
    pidfd: &OwnedFd,
) -> Result<Call, i32> {
    let pid = notif.pid;
    let nr = i64::from(notif.data.nr);
    let args = notif.data.args;
    let (paths_at, fd_arg) = shape(nr);
    let mut paths = Vec::new();
    let mut fds = Vec::new();
    let mut cwd = None;
    for (path_arg, dirfd_arg) in paths_at {
        let addr = args[*path_arg];
        if addr == 0 && nr == libc::SYS_utimensat {
            paths.push(CString::default());
        } else {
            paths.push(read_cstr(mem, addr)?);
        }
        match dirfd_arg.map(|i| args[i] as i32) {
            Some(fd) if fd != libc::AT_FDCWD => fds.push(Some(get_fd(pidfd, fd)?)),
            _ => {
                fds.push(None);
                if cwd.is_none() {
                    cwd = Some(open_path(&format!("/proc/{pid}/cwd")).map_err(|_| libc::ESRCH)?);
                }
            }
        }
    }
    if let Some(i) = fd_arg {
        fds.push(Some(get_fd(pidfd, args[i] as i32)?));
    }
    // The symlink's target is text, not a path to resolve.
    let mut data = Vec::new();
    match nr {
        libc::SYS_openat2 => {
            let size = (args[3] as usize).min(64);
            data = read_bytes(mem, args[2], size)?;
        }
        libc::SYS_setxattr
        | libc::SYS_lsetxattr
        | libc::SYS_removexattr
        | libc::SYS_lremovexattr => {
            let mut name = read_cstr(mem, args[1])?.into_bytes_with_nul();
            if matches!(nr, libc::SYS_setxattr | libc::SYS_lsetxattr) {
                let size = args[3] as usize;
                if size > 64 * 1024 {
                    return Err(libc::E2BIG);
                }
                let value = read_bytes(mem, args[2], size)?;
                name.extend_from_slice(&value);
            }
            data = name;
        }
        libc::SYS_fsetxattr | libc::SYS_fremovexattr => {
            let mut name = read_cstr(mem, args[1])?.into_bytes_with_nul();
            if nr == libc::SYS_fsetxattr {
                let size = args[3] as usize;
                if size > 64 * 1024 {
                    return Err(libc::E2BIG);
                }
                name.extend_from_slice(&read_bytes(mem, args[2], size)?);
            }
            data = name;
        }
        libc::SYS_utimensat if args[2] != 0 => data = read_bytes(mem, args[2], 32)?,
        libc::SYS_utimes | libc::SYS_futimesat => {
            let at = if nr == libc::SYS_utimes {
                args[1]
            } else {
                args[2]
            };
            if at != 0 {
                data = read_bytes(mem, at, 32)?;
            }
        }
        libc::SYS_utime if args[1] != 0 => data = read_bytes(mem, args[1], 16)?,
        _ => {}
    }
    let _ = sandbox;
    let is_open = matches!(
        nr,
        libc::SYS_open | libc::SYS_openat | libc::SYS_creat | libc::SYS_openat2
    );
    let mut alias = None;
    if is_open {
        if let Some(first) = paths.first_mut() {
            match own_fd(first.to_bytes()) {
                Some(fd) => alias = Some(get_fd(pidfd, fd)?),
                None => {
                    if let Some(mapped) = own_proc(first.to_bytes(), pid) {
                        *first = mapped;
                    }
                }
            }
        }
    }
    Ok(Call {
        id: notif.id,
        nr,
        pid,
        args,
        paths,
        fds,
        cwd,
        data,
        alias,
        // Only a call that makes something needs it (a read of the status
        // file is most of a call's cost otherwise).
        umask: if makes(nr, &args) {
            umask_of(pid)
        } else {
            0o022
        },
    })
}

/// The descriptor number an open's path names among the caller's own
/// (`/dev/stdin`, `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`,
/// `/proc/self/fd/N`, `/proc/thread-self/fd/N`).
fn own_fd(path: &[u8]) -> Option<i32> {
    let text = std::str::from_utf8(path).ok()?;
    match text {
        "/dev/stdin" => return Some(0),
        "/dev/stdout" => return Some(1),
        "/dev/stderr" => return Some(2),
        _ => {}
    }
    let number = ["/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"]
        .iter()
        .find_map(|prefix| text.strip_prefix(prefix))?;
    number.parse().ok().filter(|n: &i32| *n >= 0)
}

/// `/proc/self/…` and `/proc/thread-self/…` as the caller's own entries in
/// the sandbox's `/proc` (its pid there, from `NSpid`): the worker that
/// opens them is not in the sandbox's pid namespace, where `self` would
/// name nothing.
fn own_proc(path: &[u8], pid: u32) -> Option<CString> {
    let text = std::str::from_utf8(path).ok()?;
    let (rest, thread) = if let Some(rest) = text.strip_prefix("/proc/self") {
        (rest, false)
    } else {
        (text.strip_prefix("/proc/thread-self")?, true)
    };
    if !(rest.is_empty() || rest.starts_with('/')) {
        return None;
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let last = |key: &str| -> Option<String> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().last().map(str::to_string))
    };
    let (tgid, tid) = (last("NStgid:")?, last("NSpid:")?);
    let mapped = if thread {
        format!("/proc/{tgid}/task/{tid}{rest}")
    } else {
        format!("/proc/{tgid}{rest}")
    };
    CString::new(mapped).ok()
}

/// Whether call `nr` creates a name (its mode is masked by the umask).
fn makes(nr: i64, args: &[u64; 6]) -> bool {
    let creat = (libc::O_CREAT | 0o20000000) as u64;
    match nr {
        libc::SYS_open => args[1] & creat != 0,
        libc::SYS_openat => args[2] & creat != 0,
        libc::SYS_openat2
        | libc::SYS_creat
        | libc::SYS_mkdir
        | libc::SYS_mkdirat
        | libc::SYS_mknod
        | libc::SYS_mknodat => true,
        _ => false,
    }
}

fn pidfd_of(pid: u32) -> Option<OwnedFd> {
    const PIDFD_THREAD: libc::c_long = libc::O_EXCL as libc::c_long;
    // SAFETY: plain syscall; the result is checked.
    let mut fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_long, PIDFD_THREAD) };
    if fd < 0 {
        // SAFETY: as above.
        fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_long, 0) };
    }
    // SAFETY: a new descriptor owned here.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

fn get_fd(pidfd: &OwnedFd, fd: i32) -> Result<OwnedFd, i32> {
    // SAFETY: plain syscall; the result is checked.
    let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if got < 0 {
        return Err(libc::EBADF);
    }
    // SAFETY: a new descriptor owned here.
    Ok(unsafe { OwnedFd::from_raw_fd(got as RawFd) })
}

fn open_path(path: &str) -> std::io::Result<OwnedFd> {
    let c = CString::new(path).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: plain open; the result is checked.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor owned here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn read_bytes(mem: &std::fs::File, addr: u64, size: usize) -> Result<Vec<u8>, i32> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; size];
    mem.read_exact_at(&mut buf, addr)
        .map_err(|_| libc::EFAULT)?;
    Ok(buf)
}

/// A NUL-terminated string at `addr`, read a page at a time (a string
/// that ends just before an unmapped page must still be read).
fn read_cstr(mem: &std::fs::File, addr: u64) -> Result<CString, i32> {
    use std::os::unix::fs::FileExt;
    if addr == 0 {
        return Err(libc::EFAULT);
    }
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() <= libc::PATH_MAX as usize {
        let to_page = 4096 - (at % 4096) as usize;
        let mut chunk = vec![0u8; to_page];
        let n = mem.read_at(&mut chunk, at).map_err(|_| libc::EFAULT)?;
        if n == 0 {
            return Err(libc::EFAULT);
        }
        if let Some(end) = chunk[..n].iter().position(|b| *b == 0) {
            out.extend_from_slice(&chunk[..end]);
            return CString::new(out).map_err(|_| libc::EINVAL);
        }
        out.extend_from_slice(&chunk[..n]);
        at += n as u64;
    }
    Err(libc::ENAMETOOLONG)
}

fn umask_of(pid: u32) -> u32 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

/// A worker: enters the sandbox, then performs calls until the queue
/// closes.
fn work(
    sandbox: &Arc<Sandbox>,
    listener: &OwnedFd,
    queue: &crossbeam_channel::Receiver<Call>,
    idle: &AtomicUsize,
) {
    if let Err(error) = sandbox.enter() {
        tracing::error!(%error, "kernel: a worker could not enter the sandbox: its calls are refused");
        while let Ok(call) = queue.recv() {
            reply(listener, call.id, Err(libc::EACCES));
        }
        return;
    }
    idle.fetch_add(1, Ordering::AcqRel);
    loop {
        let call = queue.recv();
        idle.fetch_sub(1, Ordering::AcqRel);
        let Ok(call) = call else { return };
        let id = call.id;
        let done = perform(sandbox, listener, call);
        // Free again before the caller is released: its next call must
        // not find every worker busy and make a new one.
        idle.fetch_add(1, Ordering::AcqRel);
        match done {
            Done::Value(result) => reply(listener, id, result),
            Done::File(file, cloexec) => reply_fd(listener, id, &file, cloexec),
        }
    }
}

enum Done {
    Value(Result<i64, i32>),
    File(OwnedFd, bool),
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

fn check(rc: libc::c_long) -> Result<i64, i32> {
    if rc < 0 {
        Err(errno())
    } else {
        Ok(rc)
    }
}

/// Where a path resolves from: the call's dirfd, or the caller's cwd;
/// an absolute path from the sandbox's root (the worker's own).
fn base(call: &Call, i: usize) -> RawFd {
    match call.fds.get(i) {
        Some(Some(fd)) => fd.as_raw_fd(),
        _ => call.cwd.as_ref().map_or(libc::AT_FDCWD, |c| c.as_raw_fd()),
    }
}

/// The directory holding the last step of `path` (from `at`), and that
/// step: what a create, remove or rename acts on.
fn parent(at: RawFd, path: &CStr) -> Result<(OwnedFd, CString), i32> {
    let bytes = path.to_bytes();
    if bytes.is_empty() {
        return Err(libc::ENOENT);
    }
    let trimmed = {
        let mut end = bytes.len();
        while end > 1 && bytes[end - 1] == b'/' {
            end -= 1;
        }
        &bytes[..end]
    };
    let (dir, last): (&[u8], &[u8]) = match trimmed.iter().rposition(|b| *b == b'/') {
        Some(0) => (b"/", &trimmed[1..]),
        Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
        None => (b".", trimmed),
    };
    let last = if last.is_empty() { b"." as &[u8] } else { last };
    let dir = CString::new(dir).map_err(|_| libc::EINVAL)?;
    let dirfd = openat(at, &dir, libc::O_PATH | libc::O_DIRECTORY, 0)?;
    Ok((dirfd, CString::new(last).map_err(|_| libc::EINVAL)?))
}

/// `openat`, or `openat2` when the caller asked for `RESOLVE_*`
/// restrictions (kept: the lookup is as narrow as the caller's).
fn lookup(at: RawFd, path: &CStr, flags: i32, mode: u32, resolve: u64) -> Result<OwnedFd, i32> {
    if resolve == 0 {
        return openat(at, path, flags, mode);
    }
    // struct open_how { u64 flags; u64 mode; u64 resolve; }
    let how: [u64; 3] = [
        (flags | libc::O_CLOEXEC) as u64,
        if flags & (libc::O_CREAT | 0o20000000) != 0 {
            u64::from(mode)
        } else {
            0
        },
        resolve,
    ];
    // SAFETY: plain syscall with a struct on the stack; the result is checked.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            at,
            path.as_ptr(),
            how.as_ptr(),
            std::mem::size_of_val(&how),
        )
    };
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: a new descriptor owned here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

fn openat(at: RawFd, path: &CStr, flags: i32, mode: u32) -> Result<OwnedFd, i32> {
    // SAFETY: plain openat; the result is checked.
    let fd = unsafe { libc::openat(at, path.as_ptr(), flags | libc::O_CLOEXEC, mode) };
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: a new descriptor owned here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl Sandbox {
    /// The path of `fd` as the sandbox sees it (the worker's root is the
    /// sandbox's).
    fn name_of(&self, fd: RawFd) -> Option<String> {
        let link = format!("thread-self/fd/{fd}");
        let c = CString::new(link).ok()?;
        let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
        // SAFETY: reads into `buf`.
        let n = unsafe {
            libc::readlinkat(
                self.host_proc.as_raw_fd(),
                c.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if n <= 0 {
            return None;
        }
        buf.truncate(n as usize);
        let text = String::from_utf8(buf).ok()?;
        (text.starts_with('/') && !text.ends_with(" (deleted)")).then_some(text)
    }

    /// `dir/last` as a path the policy judges, or `None` when `dir` has
    /// no name (then nothing is judged: refused).
    fn child_name(&self, dir: &OwnedFd, last: &CStr) -> Option<String> {
        let dir = self.name_of(dir.as_raw_fd())?;
        let last = last.to_str().ok()?;
        Some(if dir == "/" {
            format!("/{last}")
        } else {
            format!("{dir}/{last}")
        })
    }

    /// The magic link naming `fd` (for calls that take a path and must act
    /// on exactly the file judged).
    fn link_of(&self, fd: &OwnedFd) -> CString {
        CString::new(format!("thread-self/fd/{}", fd.as_raw_fd())).unwrap_or_default()
    }

    /// Judges `paths` as writes (those inside the sandbox's roots) for
    /// call `call`.
    fn judge_writes(&self, call: &Call, accesses: Vec<(String, Access)>, what: &str) -> Verdict {
        // Outside the roots nothing is judged here; inside, a path no rule
        // speaks for is allowed by the session's node (the screen).
        let inside: Vec<(String, Access)> = accesses
            .into_iter()
            .filter(|(p, _)| self.inside(p) && !self.unnamed(p))
            .collect();
        if inside.is_empty() {
            return Ok(());
        }
        let doer = Doer {
            pid: call.pid,
            uid: self.uid,
        };
        let what = what.to_string();
        self.outside(move |judge| {
            let gone = || !Path::new(&format!("/proc/{}", doer.pid)).exists();
            judge.judge(doer, &inside, &what, &gone)
        })
        .unwrap_or(Err(libc::EACCES))
    }
}

/// Performs one call as the sandbox would, judged.
fn perform(sandbox: &Sandbox, _listener: &OwnedFd, call: Call) -> Done {
    let nr = call.nr;
    let value = |r: Result<i64, i32>| Done::Value(r);
    // SAFETY (every libc call below): plain syscalls on descriptors and
    // strings this function owns; each result is checked.
    unsafe { libc::umask(call.umask) };
    match nr {
        libc::SYS_open | libc::SYS_openat | libc::SYS_creat | libc::SYS_openat2 => {
            open(sandbox, &call)
        }
        libc::SYS_mkdir | libc::SYS_mkdirat | libc::SYS_mknod | libc::SYS_mknodat => {
            value(make(sandbox, &call))
        }
        libc::SYS_symlink | libc::SYS_symlinkat => value(symlink(sandbox, &call)),
        libc::SYS_unlink | libc::SYS_unlinkat | libc::SYS_rmdir => value(remove(sandbox, &call)),
        libc::SYS_rename | libc::SYS_renameat | libc::SYS_renameat2 => {
            value(rename(sandbox, &call))
        }
        libc::SYS_link | libc::SYS_linkat => value(link(sandbox, &call)),
        libc::SYS_fchmod | libc::SYS_fchown | libc::SYS_fsetxattr | libc::SYS_fremovexattr => {
            value(on_fd(sandbox, &call))
        }
        libc::SYS_truncate
        | libc::SYS_chmod
        | libc::SYS_fchmodat
        | libc::SYS_fchmodat2
        | libc::SYS_chown
        | libc::SYS_lchown
        | libc::SYS_fchownat
        | libc::SYS_utime
        | libc::SYS_utimes
        | libc::SYS_utimensat
        | libc::SYS_futimesat
        | libc::SYS_setxattr
        | libc::SYS_lsetxattr
        | libc::SYS_removexattr
        | libc::SYS_lremovexattr => value(on_path(sandbox, &call)),
        _ => value(Err(libc::ENOSYS)),
    }
}

/// An open's accesses as the FUSE view counts them, and a write for one
/// that creates (the view sees a create as its own request).
fn open_accesses(flags: i32) -> Vec<Access> {
    let mut accesses = crate::view::open_accesses(flags);
    if flags & (libc::O_CREAT | 0o20000000) != 0 && !accesses.contains(&Access::Write) {
        accesses.push(Access::Write);
    }
    accesses
}

/// Judges an open with `flags` of the file named `name` (what it does
/// said by `doing`, for the person).
fn judge_open(sandbox: &Sandbox, call: &Call, flags: i32, name: &str, doing: &str) -> Verdict {
    let accesses: Vec<(String, Access)> = open_accesses(flags)
        .into_iter()
        .map(|a| (name.to_string(), a))
        .collect();
    let what = format!("a program in the sandbox {doing}: {name}");
    sandbox.judge_writes(call, accesses, &what)
}

/// Opens `file` (a descriptor of exactly the file judged) afresh with the
/// caller's `flags`, as the kernel reopens a `/proc/self/fd/N`.
fn reopen(sandbox: &Sandbox, file: &OwnedFd, flags: i32, cloexec: bool) -> Done {
    let flags = flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW);
    match openat(
        sandbox.host_proc.as_raw_fd(),
        &sandbox.link_of(file),
        flags,
        0,
    ) {
        Ok(opened) => Done::File(opened, cloexec),
        Err(e) => Done::Value(Err(e)),
    }
}

fn open(sandbox: &Sandbox, call: &Call) -> Done {
    let (flags, mode, resolve) = match call.nr {
        libc::SYS_open => (call.args[1] as i32, call.args[2] as u32, 0u64),
        libc::SYS_creat => (
            libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC,
            call.args[1] as u32,
            0,
        ),
        libc::SYS_openat => (call.args[2] as i32, call.args[3] as u32, 0),
        _ => {
            // struct open_how { u64 flags; u64 mode; u64 resolve; }
            let word = |i: usize| {
                call.data
                    .get(i * 8..i * 8 + 8)
                    .and_then(|b| b.try_into().ok())
                    .map_or(0, u64::from_le_bytes)
            };
            if call.data.len() < 24 {
                return Done::Value(Err(libc::EINVAL));
            }
            (word(0) as i32, word(1) as u32, word(2))
        }
    };
    let cloexec = flags & libc::O_CLOEXEC != 0;
    if let Some(own) = &call.alias {
        // The caller's own descriptor, reopened as the kernel reopens a
        // `/proc/self/fd/N` (the same file), judged at its name if it has
        // one (a pipe or a socket has none, and no root holds it).
        if flags & libc::O_CREAT != 0 && flags & libc::O_EXCL != 0 {
            return Done::Value(Err(libc::EEXIST));
        }
        if let Some(name) = sandbox.name_of(own.as_raw_fd()) {
            if let Err(e) = judge_open(sandbox, call, flags, &name, "opens a file to write") {
                return Done::Value(Err(e));
            }
        }
        return reopen(sandbox, own, flags, cloexec);
    }
    let Some(path) = call.paths.first() else {
        return Done::Value(Err(libc::EFAULT));
    };
    let at = base(call, 0);
    let guard = sandbox.namespace.read().unwrap_or_else(|p| p.into_inner());
    let nofollow = flags & libc::O_NOFOLLOW != 0;
    let excl = flags & libc::O_CREAT != 0 && flags & libc::O_EXCL != 0;
    // An existing file: judged at its own (resolved) name, then reopened
    // through the descriptor judged, so the file opened is the file judged.
    let found = if excl {
        Err(libc::ENOENT)
    } else {
        lookup(
            at,
            path,
            libc::O_PATH | if nofollow { libc::O_NOFOLLOW } else { 0 },
            0,
            resolve,
        )
    };
    match found {
        Ok(file) => {
            let Some(name) = sandbox.name_of(file.as_raw_fd()) else {
                return Done::Value(Err(libc::EACCES));
            };
            drop(guard);
            if let Err(e) = judge_open(sandbox, call, flags, &name, "opens a file to write") {
                return Done::Value(Err(e));
            }
            reopen(sandbox, &file, flags, cloexec)
        }
        Err(libc::ENOENT) if flags & libc::O_CREAT != 0 || flags & 0o20000000 != 0 => {
            let tmpfile = flags & 0o20000000 != 0;
            let (dir, last) = if tmpfile {
                match openat(at, path, libc::O_PATH | libc::O_DIRECTORY, 0) {
                    Ok(dir) => (dir, CString::new(".").unwrap_or_default()),
                    Err(e) => return Done::Value(Err(e)),
                }
            } else {
                match parent(at, path) {
                    Ok(p) => p,
                    Err(e) => return Done::Value(Err(e)),
                }
            };
            let Some(name) = sandbox.child_name(&dir, &last) else {
                return Done::Value(Err(libc::EACCES));
            };
            drop(guard);
            if let Err(e) = judge_open(sandbox, call, flags, &name, "creates a file") {
                return Done::Value(Err(e));
            }
            let _guard = sandbox.namespace.read().unwrap_or_else(|p| p.into_inner());
            if sandbox.child_name(&dir, &last).as_deref() != Some(name.as_str()) {
                // The directory moved while the ask waited.
                return Done::Value(Err(libc::EACCES));
            }
            // O_EXCL: a name that appeared meanwhile (or a dangling
            // symlink, which would create its target elsewhere) is not
            // the one judged.
            let flags = if tmpfile {
                flags
            } else {
                flags | libc::O_EXCL | libc::O_NOFOLLOW
            };
            match lookup(dir.as_raw_fd(), &last, flags, mode, resolve) {
                Ok(opened) => Done::File(opened, cloexec),
                Err(e) => Done::Value(Err(e)),
            }
        }
        Err(e) => Done::Value(Err(e)),
    }
}

fn make(sandbox: &Sandbox, call: &Call) -> Result<i64, i32> {
    let at_args = matches!(call.nr, libc::SYS_mkdirat | libc::SYS_mknodat);
    let mode_arg = if at_args { 2 } else { 1 };
    let mode = call.args[mode_arg] as u32;
    let dev = call.args[mode_arg + 1];
    let path = call.paths.first().ok_or(libc::EFAULT)?;
    let (dir, last) = parent(base(call, 0), path)?;
    let name = sandbox.child_name(&dir, &last).ok_or(libc::EACCES)?;
    let what = format!("a program in the sandbox creates {name}");
    sandbox.judge_writes(call, vec![(name.clone(), Access::Write)], &what)?;
    let _guard = sandbox.namespace.read().unwrap_or_else(|p| p.into_inner());
    if sandbox.child_name(&dir, &last).as_deref() != Some(name.as_str()) {
        return Err(libc::EACCES);
    }
    // SAFETY: see `perform`.
    let rc = unsafe {
        if matches!(call.nr, libc::SYS_mkdir | libc::SYS_mkdirat) {
            libc::mkdirat(dir.as_raw_fd(), last.as_ptr(), mode)
        } else {
            libc::mknodat(dir.as_raw_fd(), last.as_ptr(), mode, dev)
        }
    };
    check(rc.into())
}

fn symlink(sandbox: &Sandbox, call: &Call) -> Result<i64, i32> {
    let target = call.paths.first().ok_or(libc::EFAULT)?;
    let path = call.paths.get(1).ok_or(libc::EFAULT)?;
    // The link path's base: symlinkat's dirfd is the second fd slot.
    let (dir, last) = parent(base(call, 1), path)?;
    let name = sandbox.child_name(&dir, &last).ok_or(libc::EACCES)?;
    let what = format!(
        "a program in the sandbox makes a symbolic link {name} -> {}",
        target.to_string_lossy()
    );
    sandbox.judge_writes(call, vec![(name.clone(), Access::Write)], &what)?;
    let _guard = sandbox.namespace.read().unwrap_or_else(|p| p.into_inner());
    // SAFETY: see `perform`.
    check(unsafe { libc::symlinkat(target.as_ptr(), dir.as_raw_fd(), last.as_ptr()) }.into())
}

fn remove(sandbox: &Sandbox, call: &Call) -> Result<i64, i32> {
    let flags = match call.nr {
        libc::SYS_unlinkat => call.args[2] as i32,
        libc::SYS_rmdir => libc::AT_REMOVEDIR,
        _ => 0,
    };
    let path = call.paths.first().ok_or(libc::EFAULT)?;
    let (dir, last) = parent(base(call, 0), path)?;
    let name = sandbox.child_name(&dir, &last).ok_or(libc::EACCES)?;
    let what = format!("a program in the sandbox removes {name}");
    sandbox.judge_writes(call, vec![(name.clone(), Access::Write)], &what)?;
    let _guard = sandbox.namespace.read().unwrap_or_else(|p| p.into_inner());
    // SAFETY: see `perform`.
    check(unsafe { libc::unlinkat(dir.as_raw_fd(), last.as_ptr(), flags) }.into())
}

fn rename(sandbox: &Sandbox, call: &Call) -> Result<i64, i32> {
    let flags = if call.nr == libc::SYS_renameat2 {
        call.args[4] as u32
    } else {
        0
    };
    let from_path = call.paths.first().ok_or(libc::EFAULT)?;
    let to_path = call.paths.get(1).ok_or(libc::EFAULT)?;
    let (from_dir, from_last) = parent(base(call, 0), from_path)?;
    let (to_dir, to_last) = parent(base(call, 1), to_path)?;
    let exchange = flags & libc::RENAME_EXCHANGE != 0;
    let mut approved = std::collections::HashSet::new();
    for _ in 0..3 {
        let guard = sandbox.namespace.write().unwrap_or_else(|p| p.into_inner());
        let from = sandbox
            .child_name(&from_dir, &from_last)
            .ok_or(libc::EACCES)?;
        let to = sandbox.child_name(&to_dir, &to_last).ok_or(libc::EACCES)?;
        let list = |dir: &OwnedFd, last: &CStr| -> Result<Vec<PathBuf>, i32> {
            let enter = |_: &Path| true;
            match crate::view::moves::subtree(dir, OsStr::from_bytes(last.to_bytes()), &enter) {
                Ok(Some(names)) => Ok(names),
                Ok(None) => Err(libc::ENOENT),
                Err(e) => Err(e.raw_os_error().map_or(libc::EIO, |e| {
                    if e == libc::E2BIG {
                        libc::EACCES
                    } else {
                        e
                    }
                })),
            }
        };
        let moved = if sandbox.inside(&from) || sandbox.inside(&to) {
            list(&from_dir, &from_last)?
        } else {
            Vec::new()
        };
        let swapped = if exchange && (sandbox.inside(&from) || sandbox.inside(&to)) {
            list(&to_dir, &to_last)?
        } else {
            Vec::new()
        };
        let accesses: Vec<(String, Access)> =
            crate::view::moves::accesses(Path::new(&from), Path::new(&to), &moved, &swapped)
                .into_iter()
                .filter(|a| !approved.contains(a))
                .map(|(p, a)| (p.to_string_lossy().into_owned(), a))
                .filter(|(p, _)| sandbox.inside(p))
                .collect();
        let entries = moved.len() + swapped.len();
        let doer = Doer {
            pid: call.pid,
            uid: sandbox.uid,
        };
        // One walk for all (the common case: rules allow everything);
        // otherwise one each, to name the first denied access, or every
        // one that needs an answer (as the FUSE view's `judge_many`).
        let mut pending: Vec<(String, Access)> = Vec::new();
        let batch = if accesses.is_empty() {
            super::judge::Dry::Allow
        } else {
            let all = accesses.clone();
            sandbox
                .outside(move |judge| judge.dry(&all))
                .unwrap_or(super::judge::Dry::Deny("no judge answered".into()))
        };
        if !matches!(batch, super::judge::Dry::Allow) {
            let each = accesses.clone();
            let denied = sandbox
                .outside(move |judge| {
                    let mut pending = Vec::new();
                    for one in each {
                        match judge.dry(std::slice::from_ref(&one)) {
                            super::judge::Dry::Allow => {}
                            super::judge::Dry::Deny(why) => return Err((one, why)),
                            super::judge::Dry::Ask(_) => pending.push(one),
                        }
                    }
                    Ok(pending)
                })
                .unwrap_or(Err((
                    (from.clone(), Access::Write),
                    "no judge answered".to_string(),
                )));
            match denied {
                Ok(asked) => pending = asked,
                Err((one, why)) => {
                    drop(guard);
                    let why = if entries > 1 {
                        format!("renaming {from} moves {}: {why}", one.0)
                    } else {
                        why
                    };
                    sandbox
                        .outside(move |judge| judge.denied(doer, std::slice::from_ref(&one), &why));
                    return Err(libc::EACCES);
                }
            }
        }
        if pending.is_empty() {
            // SAFETY: see `perform`.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_renameat2,
                    from_dir.as_raw_fd(),
                    from_last.as_ptr(),
                    to_dir.as_raw_fd(),
                    to_last.as_ptr(),
                    flags,
                )
            };
            let result = check(rc);
            drop(guard);
            if result.is_ok() {
                // Names moved: what the kernel remembers by inode may
                // now stand under a name judged otherwise.
                sandbox.group.flush();
            }
            return result;
        }
        drop(guard);
        if pending.len() > 1000 {
            let why = format!(
                "renaming {from} needs answers for {} accesses, more than one ask may carry (1000)",
                pending.len()
            );
            let shown: Vec<(String, Access)> = pending[..20].to_vec();
            sandbox.outside(move |judge| judge.denied(doer, &shown, &why));
            return Err(libc::EACCES);
        }
        let shown: Vec<(PathBuf, Access)> = pending
            .iter()
            .map(|(p, a)| (PathBuf::from(p), *a))
            .collect();
        let what =
            crate::view::moves::describe(Path::new(&from), Path::new(&to), entries, &shown, 20);
        let asked = pending.clone();
        sandbox
            .outside(move |judge| {
                let gone = || !Path::new(&format!("/proc/{}", doer.pid)).exists();
                judge.ask_for(doer, &asked, &what, &gone)
            })
            .unwrap_or(Err(libc::EACCES))?;
        approved.extend(shown);
    }
    Err(libc::EACCES)
}

fn link(sandbox: &Sandbox, call: &Call) -> Result<i64, i32> {
    let flags = if call.nr == libc::SYS_linkat {
        call.args[4] as i32
    } else {
        0
    };
    let old = call.paths.first().ok_or(libc::EFAULT)?;
    let new = call.paths.get(1).ok_or(libc::EFAULT)?;
    let follow = flags & libc::AT_SYMLINK_FOLLOW != 0;
    let file = if old.to_bytes().is_empty() && flags & libc::AT_EMPTY_PATH != 0 {
        return Err(libc::EPERM);
    } else {
        openat(
            base(call, 0),
            old,
            libc::O_PATH | if follow { 0 } else { libc::O_NOFOLLOW },
            0,
        )?
    };
    let old_name = sandbox.name_of(file.as_raw_fd()).ok_or(libc::EACCES)?;
    let (dir, last) = parent(base(call, 1), new)?;
    let new_name = sandbox.child_name(&dir, &last).ok_or(libc::EACCES)?;
    let what = format!("a program in the sandbox links {old_name} as {new_name}");
    sandbox.judge_writes(
        call,
        vec![
            (old_name.clone(), Access::Read),
            (old_name, Access::Write),
            (new_name, Access::Write),
        ],
        &what,
    )?;
    let _guard = sandbox.namespace.read().unwrap_or_else(|p| p.into_inner());
    // SAFETY: see `perform`.
    let rc = unsafe {
        libc::linkat(
            sandbox.host_proc.as_raw_fd(),
            sandbox.link_of(&file).as_ptr(),
            dir.as_raw_fd(),
            last.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    let result = check(rc.into());
    if result.is_ok() {
        sandbox.group.flush();
    }
    result
}

/// `fchmod`, `fchown`, `fsetxattr`, `fremovexattr`: on the caller's own
/// descriptor, judged at its name.
fn on_fd(sandbox: &Sandbox, call: &Call) -> Result<i64, i32> {
    let file = call
        .fds
        .last()
        .and_then(|f| f.as_ref())
        .ok_or(libc::EBADF)?;
    let name = sandbox.name_of(file.as_raw_fd());
    // (None: a pipe, a socket, an unlinked file: no path in any root.)
    if let Some(name) = &name {
        let what = format!("a program in the sandbox changes {name}'s attributes");
        sandbox.judge_writes(call, vec![(name.clone(), Access::Write)], &what)?;
    }
    let fd = file.as_raw_fd();
    let a = &call.args;
    // SAFETY: see `perform`.
    let rc: libc::c_long = unsafe {
        match call.nr {
            libc::SYS_fchmod => libc::fchmod(fd, a[1] as u32).into(),
            libc::SYS_fchown => libc::fchown(fd, a[1] as u32, a[2] as u32).into(),
            libc::SYS_fsetxattr => {
                let (attr, value) = split_xattr(&call.data)?;
                libc::fsetxattr(
                    fd,
                    attr.as_ptr(),
                    value.as_ptr().cast(),
                    value.len(),
                    a[4] as i32,
                )
                .into()
            }
            _ => {
                let (attr, _) = split_xattr(&call.data)?;
                libc::fremovexattr(fd, attr.as_ptr()).into()
            }
        }
    };
    check(rc)
}

fn split_xattr(data: &[u8]) -> Result<(&CStr, &[u8]), i32> {
    let end = data.iter().position(|b| *b == 0).ok_or(libc::EINVAL)?;
    let name = CStr::from_bytes_with_nul(&data[..=end]).map_err(|_| libc::EINVAL)?;
    Ok((name, &data[end + 1..]))
}

/// Attribute changes by path: resolved to the object, judged at its name,
/// done through the descriptor judged.
fn on_path(sandbox: &Sandbox, call: &Call) -> Result<i64, i32> {
    let a = &call.args;
    let nofollow = match call.nr {
        libc::SYS_lchown | libc::SYS_lsetxattr | libc::SYS_lremovexattr => true,
        libc::SYS_fchownat | libc::SYS_utimensat => {
            a[if call.nr == libc::SYS_fchownat { 4 } else { 3 }] as i32 & libc::AT_SYMLINK_NOFOLLOW
                != 0
        }
        libc::SYS_fchmodat2 => a[3] as i32 & libc::AT_SYMLINK_NOFOLLOW != 0,
        _ => false,
    };
    let path = call.paths.first().ok_or(libc::EFAULT)?;
    let object = if path.to_bytes().is_empty() && call.nr == libc::SYS_utimensat {
        // utimensat(fd, NULL, …): the dirfd is the file.
        let fd = call
            .fds
            .first()
            .and_then(|f| f.as_ref())
            .ok_or(libc::EBADF)?;
        openat(fd.as_raw_fd(), c".", 0, 0).or_else(|_| {
            openat(
                sandbox.host_proc.as_raw_fd(),
                &sandbox.link_of(fd),
                libc::O_PATH,
                0,
            )
        })?
    } else {
        openat(
            base(call, 0),
            path,
            libc::O_PATH | if nofollow { libc::O_NOFOLLOW } else { 0 },
            0,
        )?
    };
    let name = sandbox.name_of(object.as_raw_fd()).ok_or(libc::EACCES)?;
    let what = match call.nr {
        libc::SYS_truncate => format!("a program in the sandbox truncates {name}"),
        _ => format!("a program in the sandbox changes {name}'s attributes"),
    };
    sandbox.judge_writes(call, vec![(name, Access::Write)], &what)?;
    let link = sandbox.link_of(&object);
    let proc_fd = sandbox.host_proc.as_raw_fd();
    // SAFETY: see `perform`.
    let rc: libc::c_long = unsafe {
        match call.nr {
            libc::SYS_truncate => {
                let file = openat(proc_fd, &link, libc::O_WRONLY, 0)?;
                libc::ftruncate(file.as_raw_fd(), a[1] as i64).into()
            }
            libc::SYS_chmod => libc::fchmodat(proc_fd, link.as_ptr(), a[1] as u32, 0).into(),
            libc::SYS_fchmodat | libc::SYS_fchmodat2 => {
                libc::fchmodat(proc_fd, link.as_ptr(), a[2] as u32, 0).into()
            }
            libc::SYS_chown | libc::SYS_lchown => libc::fchownat(
                object.as_raw_fd(),
                c"".as_ptr(),
                a[1] as u32,
                a[2] as u32,
                libc::AT_EMPTY_PATH,
            )
            .into(),
            libc::SYS_fchownat => libc::fchownat(
                object.as_raw_fd(),
                c"".as_ptr(),
                a[2] as u32,
                a[3] as u32,
                libc::AT_EMPTY_PATH,
            )
            .into(),
            libc::SYS_utimensat => {
                let times = timespecs(&call.data);
                libc::utimensat(
                    proc_fd,
                    link.as_ptr(),
                    times.as_ref().map_or(std::ptr::null(), |t| t.as_ptr()),
                    0,
                )
                .into()
            }
            libc::SYS_utime | libc::SYS_utimes | libc::SYS_futimesat => {
                let times = if call.data.is_empty() {
                    None
                } else if call.nr == libc::SYS_utime {
                    let w = |i: usize| {
                        i64::from_le_bytes(
                            call.data[i * 8..i * 8 + 8].try_into().unwrap_or_default(),
                        )
                    };
                    Some([
                        libc::timespec {
                            tv_sec: w(0),
                            tv_nsec: 0,
                        },
                        libc::timespec {
                            tv_sec: w(1),
                            tv_nsec: 0,
                        },
                    ])
                } else {
                    let w = |i: usize| {
                        i64::from_le_bytes(
                            call.data[i * 8..i * 8 + 8].try_into().unwrap_or_default(),
                        )
                    };
                    Some([
                        libc::timespec {
                            tv_sec: w(0),
                            tv_nsec: w(1) * 1000,
                        },
                        libc::timespec {
                            tv_sec: w(2),
                            tv_nsec: w(3) * 1000,
                        },
                    ])
                };
                libc::utimensat(
                    proc_fd,
                    link.as_ptr(),
                    times.as_ref().map_or(std::ptr::null(), |t| t.as_ptr()),
                    0,
                )
                .into()
            }
            libc::SYS_setxattr | libc::SYS_lsetxattr => {
                let (attr, value) = split_xattr(&call.data)?;
                let file = openat(proc_fd, &link, libc::O_RDONLY, 0)?;
                libc::fsetxattr(
                    file.as_raw_fd(),
                    attr.as_ptr(),
                    value.as_ptr().cast(),
                    value.len(),
                    a[4] as i32,
                )
                .into()
            }
            _ => {
                let (attr, _) = split_xattr(&call.data)?;
                let file = openat(proc_fd, &link, libc::O_RDONLY, 0)?;
                libc::fremovexattr(file.as_raw_fd(), attr.as_ptr()).into()
            }
        }
    };
    check(rc)
}

fn timespecs(data: &[u8]) -> Option<[libc::timespec; 2]> {
    if data.len() < 32 {
        return None;
    }
    let w = |i: usize| i64::from_le_bytes(data[i * 8..i * 8 + 8].try_into().unwrap_or_default());
    Some([
        libc::timespec {
            tv_sec: w(0),
            tv_nsec: w(1),
        },
        libc::timespec {
            tv_sec: w(2),
            tv_nsec: w(3),
        },
    ])
}
