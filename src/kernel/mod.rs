//! The kernel mechanism: `permfs run --mechanism kernel` judges every open
//! and every write of its roots with the kernel's own hooks instead of a
//! FUSE view, so that what the policy allowed once costs nothing the next
//! time.
//!
//! - The sandbox binds its roots themselves (no FUSE in the way).
//! - Read opens: a fanotify group per sandbox, marks on the sandbox's own
//!   mounts of its roots, an inode ignore mark per allowed file: the
//!   kernel answers a repeated allowed open without asking the daemon
//!   (`fanotify.rs`).
//! - Everything that may write or change a name: a seccomp filter in the
//!   sandbox sends it to the daemon, which judges it and performs it
//!   itself (`filter.rs`, `notify.rs`).
//! - The Landlock wall stays, and binds the daemon's workers too.
//!
//! The daemon learns of a sandbox twice: at `spawn … view=DIR kernel`
//! (which roots, [`Kernel::plan`]), and from inside it, when `permfs wall`
//! writes `enforce listener=FD ruleset=FD` to the session's `ctl` before it
//! execs the command ([`Kernel::attach`]): the daemon takes the wall's
//! seccomp listener and Landlock ruleset with `pidfd_getfd`, marks the
//! sandbox's mounts through `/proc/<pid>/root`, and only then lets the
//! write return, so the command never runs unjudged. One `enforce` per
//! session; later ones are refused.
//!
//! It needs the daemon to be root (fanotify's content class needs
//! `CAP_SYS_ADMIN`); [`available`] says whether it can run here, and
//! `permfs run` falls back to the FUSE view when it cannot, saying so.

pub mod filter;

mod fanotify;
mod judge;
mod notify;

use crate::session::view::opens::PathScreen;
use crate::session::Authority;
use judge::Judge;
use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// Whether this process can run the kernel mechanism: a fanotify content
/// group can be made (root, a kernel with permission events).
pub fn available() -> Result<(), String> {
    fanotify::Group::new()
        .map(drop)
        .map_err(|e| format!("no fanotify permission events here ({e})"))
}

/// One sandbox judged by the kernel mechanism.
pub struct Sandbox {
    judge: Arc<Judge>,
    group: Arc<fanotify::Group>,
    /// The daemon's own `/proc`, for workers inside the sandbox.
    host_proc: OwnedFd,
    /// Held exclusively while a rename lists, judges and moves a subtree;
    /// shared while a create checks its directory and makes the name.
    namespace: RwLock<()>,
    /// The roots judged, as the sandbox sees them (canonical).
    roots: Vec<String>,
    uid: u32,
    gid: u32,
    groups: Vec<u32>,
    mnt_ns: OwnedFd,
    root: OwnedFd,
    ruleset: Option<OwnedFd>,
    stop: AtomicBool,
    /// Threads in the daemon's own context for the workers' questions:
    /// a worker lives inside the sandbox (its root, its mounts), where
    /// the policy's files, the audit log and `/proc` are not the daemon's,
    /// so it never judges itself ([`Sandbox::outside`]).
    judges: Pool,
    /// The session's [`PathScreen`] now: a path it calls unnamed is
    /// allowed by the session's own node (no rule, grant or guard speaks
    /// for it), told with a glob pass instead of a walk, and without
    /// leaving the thread (a worker inside the sandbox may use it: it
    /// reads no file). Made in the daemon's context by the policy watch,
    /// dropped at once when a verdict may change.
    screen: std::sync::Mutex<Option<Arc<PathScreen>>>,
    /// The supervisor's keys for this sandbox's descriptors.
    kept_keys: std::sync::Mutex<Vec<String>>,
    /// Groups of servers before this one: their mount marks removed, held
    /// open for good (closing one would allow what its dead reader left
    /// waiting; those opens wait until they are killed).
    retired: Vec<OwnedFd>,
}

/// A job for a thread outside the sandbox: it marks its thread free (the
/// counter given) before it hands its answer over, so the next job of the
/// same worker finds a thread free.
type Job = Box<dyn FnOnce(&std::sync::atomic::AtomicUsize) + Send>;

/// Threads that take jobs, grown while every one is busy (a judgment may
/// wait for a person). Threads are made by a thread of their own, made
/// with the pool in the daemon's context: a thread inherits its maker's
/// root, mounts, credentials and Landlock domain, so a worker inside the
/// sandbox must never make one itself.
struct Pool {
    jobs: crossbeam_channel::Sender<Job>,
    idle: Arc<std::sync::atomic::AtomicUsize>,
    /// Asks the maker for one more thread.
    grow: crossbeam_channel::Sender<()>,
}

/// Judging threads per sandbox at most.
const MAX_JUDGES: usize = 64;

impl Pool {
    fn new() -> Self {
        let (jobs, queue) = crossbeam_channel::unbounded::<Job>();
        let (grow, asks) = crossbeam_channel::unbounded::<()>();
        let idle = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let maker_idle = Arc::clone(&idle);
        let made = std::thread::Builder::new()
            .name("permfs-kernel-judges".into())
            .spawn(move || {
                let mut threads = 0usize;
                while asks.recv().is_ok() {
                    if maker_idle.load(Ordering::Acquire) > queue.len() || threads >= MAX_JUDGES {
                        continue;
                    }
                    let (queue, idle) = (queue.clone(), Arc::clone(&maker_idle));
                    let spawned = std::thread::Builder::new()
                        .name("permfs-kernel-judge".into())
                        .spawn(move || {
                            idle.fetch_add(1, Ordering::AcqRel);
                            loop {
                                let job = queue.recv();
                                idle.fetch_sub(1, Ordering::AcqRel);
                                match job {
                                    Ok(job) => job(&idle),
                                    Err(_) => return,
                                }
                            }
                        });
                    if spawned.is_ok() {
                        threads += 1;
                    }
                }
            });
        if let Err(error) = made {
            tracing::error!(%error, "kernel: no thread to make judging threads: the sandbox's writes are refused");
        }
        Self { jobs, idle, grow }
    }

    /// Queues `job`, asking for a thread first when none is free.
    fn run(&self, job: Job) {
        if self.idle.load(Ordering::Acquire) == 0 {
            let _ = self.grow.send(());
        }
        let _ = self.jobs.send(job);
        if self.idle.load(Ordering::Acquire) == 0 {
            let _ = self.grow.send(());
        }
    }
}

impl Sandbox {
    /// The current screen, if one is made.
    fn screen(&self) -> Option<Arc<PathScreen>> {
        self.screen.lock().ok().and_then(|s| s.clone())
    }

    /// Whether every access to `path` is allowed by the session's node
    /// with no rule speaking for it (see `screen`); false when unsure.
    fn unnamed(&self, path: &str) -> bool {
        self.screen().is_some_and(|screen| screen.unnamed(path))
    }

    /// Drops the screen and every remembered allow: a verdict may have
    /// changed.
    fn invalidate(&self) {
        if let Ok(mut screen) = self.screen.lock() {
            *screen = None;
        }
        self.group.flush();
    }

    /// Runs `ask` with the sandbox's judge on a thread in the daemon's own
    /// context and returns its answer (a worker inside the sandbox waits);
    /// `None` if no thread could answer (the caller refuses).
    fn outside<T: Send + 'static>(
        &self,
        ask: impl FnOnce(&Judge) -> T + Send + 'static,
    ) -> Option<T> {
        let (send, answer) = crossbeam_channel::bounded(1);
        let judge = Arc::clone(&self.judge);
        self.judges.run(Box::new(move |idle| {
            let answer = ask(&judge);
            idle.fetch_add(1, Ordering::AcqRel);
            let _ = send.send(answer);
        }));
        answer.recv().ok()
    }

    /// Whether `path` lies in one of the roots (judged there).
    fn inside(&self, path: &str) -> bool {
        self.roots.iter().any(|root| {
            path == root
                || (path.starts_with(root.as_str())
                    && (root == "/" || path.as_bytes().get(root.len()) == Some(&b'/')))
        })
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Makes the calling thread a worker of this sandbox for good: its
    /// mount namespace and root, its Landlock domain, its credentials, no
    /// capabilities.
    fn enter(&self) -> std::io::Result<()> {
        let fail = |rc: libc::c_long| {
            if rc < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(())
            }
        };
        // SAFETY: thread-local changes of this worker thread alone
        // (CLONE_FS is unshared first, so root, cwd and umask are its own;
        // credentials and Landlock domains are per thread in Linux).
        unsafe {
            fail(libc::unshare(libc::CLONE_FS).into())?;
            fail(libc::setns(self.mnt_ns.as_raw_fd(), libc::CLONE_NEWNS).into())?;
            fail(libc::fchdir(self.root.as_raw_fd()).into())?;
            fail(libc::chroot(c".".as_ptr()).into())?;
            if let Some(ruleset) = &self.ruleset {
                fail(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0).into())?;
                fail(libc::syscall(
                    libc::SYS_landlock_restrict_self,
                    ruleset.as_raw_fd(),
                    0,
                ))?;
            }
            fail(libc::syscall(
                libc::SYS_setgroups,
                self.groups.len(),
                self.groups.as_ptr(),
            ))?;
            libc::setfsgid(self.gid);
            libc::setfsuid(self.uid);
            // No capability is left: the worker may do what the sandbox
            // may, not what root may.
            let header = CapHeader {
                version: 0x2008_0522,
                pid: 0,
            };
            let data = [CapData::default(); 2];
            fail(libc::syscall(
                libc::SYS_capset,
                std::ptr::addr_of!(header),
                data.as_ptr(),
            ))?;
        }
        Ok(())
    }
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Every kernel-mechanism sandbox the daemon judges.
pub struct Kernel {
    authority: Arc<Authority>,
    /// The supervisor's keeper: each sandbox's group, listener, ruleset,
    /// mount namespace and root are handed to it, so a server that dies
    /// closes none of them (closing the group would allow every open it
    /// holds) and the next server takes them over ([`Kernel::adopt`]).
    keeper: Option<crate::mount::keeper::Keeper>,
    /// Roots planned at spawn, by (session, serial), until `enforce`.
    planned: Mutex<HashMap<(String, u64), Vec<String>>>,
    running: Mutex<HashMap<(String, u64), Arc<Sandbox>>>,
}

impl Kernel {
    pub fn new(
        authority: Arc<Authority>,
        keeper: Option<crate::mount::keeper::Keeper>,
    ) -> Arc<Self> {
        let kernel = Arc::new(Self {
            authority,
            keeper,
            planned: Mutex::new(HashMap::new()),
            running: Mutex::new(HashMap::new()),
        });
        // A verdict that may have changed (a grant recorded or revoked,
        // the global config re-read) drops what every group remembers.
        let weak = Arc::downgrade(&kernel);
        crate::session::tree::generation::on_invalidate(Box::new(move || {
            if let Some(kernel) = weak.upgrade() {
                kernel.flush_all();
            }
        }));
        kernel
    }

    fn flush_all(&self) {
        if let Ok(running) = self.running.lock() {
            for sandbox in running.values() {
                sandbox.invalidate();
            }
        }
    }

    /// Notes the roots of a session spawned `kernel`.
    pub fn plan(&self, id: &str, serial: u64, roots: &[String]) -> Result<(), String> {
        available()?;
        if let Ok(mut planned) = self.planned.lock() {
            planned.insert((id.to_string(), serial), roots.to_vec());
        }
        Ok(())
    }

    /// The sandbox of session `id` says where it is: process `pid` holds
    /// its seccomp listener at `listener` and its Landlock ruleset at
    /// `ruleset`. Returns once every root is marked and both are taken.
    pub fn attach(
        self: &Arc<Self>,
        id: &str,
        serial: u64,
        pid: u32,
        listener: i32,
        ruleset: Option<i32>,
    ) -> Result<(), String> {
        let key = (id.to_string(), serial);
        let roots = self
            .planned
            .lock()
            .ok()
            .and_then(|mut planned| planned.remove(&key))
            .ok_or_else(|| {
                format!("session {id} was not spawned for the kernel mechanism, or has said enforce already")
            })?;
        let pid = thread_group(pid);
        let pidfd = pidfd(pid).map_err(|e| format!("the sandbox's process {pid}: {e}"))?;
        let take = |fd: i32| -> Result<OwnedFd, String> {
            // SAFETY: plain syscall; the result is checked.
            let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
            if got < 0 {
                return Err(format!(
                    "descriptor {fd} of process {pid}: {}",
                    std::io::Error::last_os_error()
                ));
            }
            // SAFETY: a new descriptor owned here.
            Ok(unsafe { OwnedFd::from_raw_fd(got as i32) })
        };
        let listener = take(listener)?;
        // The workers act in the sandbox under its own Landlock wall: a
        // sandbox that cannot hand it over is not judged at all.
        let ruleset = Some(take(ruleset.ok_or("enforce names no Landlock ruleset")?)?);
        let open = |path: String, flags: i32| -> Result<OwnedFd, String> {
            let c = CString::new(path.clone()).map_err(|_| format!("{path}: a NUL"))?;
            // SAFETY: plain open; the result is checked.
            let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC) };
            if fd < 0 {
                return Err(format!("{path}: {}", std::io::Error::last_os_error()));
            }
            // SAFETY: a new descriptor owned here.
            Ok(unsafe { OwnedFd::from_raw_fd(fd) })
        };
        let (uid, gid, groups) = credentials(pid)?;
        let group = Arc::new(fanotify::Group::new().map_err(|e| format!("fanotify: {e}"))?);
        // Every mount of the sandbox at or below a root: the root's own
        // bind and what is bound over parts of it (the read-only
        // governing entries, a hidden directory's tmpfs).
        let mounts = mount_points(pid)?;
        let within = |mp: &str| {
            roots.iter().any(|root| {
                mp == root
                    || (mp.starts_with(root.as_str())
                        && mp.as_bytes().get(root.len()) == Some(&b'/'))
            })
        };
        let mut marked = 0;
        let judged_mounts: Vec<String> = mounts.iter().filter(|mp| within(mp)).cloned().collect();
        for mp in &judged_mounts {
            let at = CString::new(format!("/proc/{pid}/root{mp}"))
                .map_err(|_| format!("{mp}: a NUL"))?;
            group
                .mark_mount(&at)
                .map_err(|e| format!("marking the sandbox's mount {mp}: {e}"))?;
            marked += 1;
        }
        if roots.iter().any(|root| !mounts.iter().any(|mp| mp == root)) {
            return Err(format!(
                "a root is not a mount of its own in the sandbox (roots {roots:?}): nothing would judge it"
            ));
        }
        let sandbox = Arc::new(Sandbox {
            judge: Arc::new(Judge {
                authority: Arc::clone(&self.authority),
                session: id.to_string(),
                tag: format!("{serial}"),
            }),
            group: Arc::clone(&group),
            host_proc: open_dir("/proc").map_err(|e| format!("/proc: {e}"))?,
            namespace: RwLock::new(()),
            roots: roots.clone(),
            uid,
            gid,
            groups,
            mnt_ns: open(format!("/proc/{pid}/ns/mnt"), libc::O_RDONLY)?,
            root: open(
                format!("/proc/{pid}/root"),
                libc::O_PATH | libc::O_DIRECTORY,
            )?,
            ruleset,
            stop: AtomicBool::new(false),
            judges: Pool::new(),
            screen: std::sync::Mutex::new(None),
            kept_keys: std::sync::Mutex::new(Vec::new()),
            retired: Vec::new(),
        });
        let definition = Kept {
            kind: "kernel".into(),
            key: String::new(),
            part: String::new(),
            session: id.to_string(),
            serial,
            roots: roots.clone(),
            mounts: judged_mounts,
            uid,
            gid,
            groups: sandbox.groups.clone(),
        };
        self.keep(&definition, &sandbox, &listener);
        self.start(key.clone(), Arc::clone(&sandbox), listener)?;
        tracing::info!(session = %id, pid, roots = ?roots, mounts = marked, "kernel: the sandbox is judged by fanotify and seccomp");
        Ok(())
    }

    /// Serves `sandbox`: its fanotify group, the names its allows stand
    /// on, its seccomp listener and its policy.
    fn start(
        self: &Arc<Self>,
        key: (String, u64),
        sandbox: Arc<Sandbox>,
        listener: OwnedFd,
    ) -> Result<(), String> {
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(f)
                .map(drop)
                .map_err(|e| format!("no thread: {e}"))
        };
        if let Ok(mut running) = self.running.lock() {
            running.insert(key.clone(), Arc::clone(&sandbox));
        }
        let (group, judge, watched) = (
            Arc::clone(&sandbox.group),
            Arc::clone(&sandbox.judge),
            Arc::clone(&sandbox),
        );
        spawn(
            "permfs-kernel-fanotify",
            Box::new(move || {
                let unnamed = |path: &str| watched.unnamed(path);
                fanotify::serve(group, judge, &|| watched.stopped(), &unnamed)
            }),
        )?;
        let watched = Arc::clone(&sandbox);
        spawn(
            "permfs-kernel-names",
            Box::new(move || watched.group.watch_names(&|| watched.stopped())),
        )?;
        let (served, kernel) = (Arc::clone(&sandbox), Arc::clone(self));
        spawn(
            "permfs-kernel-seccomp",
            Box::new(move || {
                notify::serve(Arc::clone(&served), listener);
                // Every process of the sandbox is gone: nothing waits on
                // its group any more, and the supervisor lets it go.
                served.stop.store(true, Ordering::Release);
                kernel.forget(&key, &served);
            }),
        )?;
        let (watched, authority) = (Arc::clone(&sandbox), Arc::clone(&self.authority));
        spawn(
            "permfs-kernel-watch",
            Box::new(move || watch_policy(&authority, &watched.judge.session, &watched)),
        )
    }

    /// Hands the sandbox's descriptors to the supervisor.
    fn keep(&self, definition: &Kept, sandbox: &Sandbox, listener: &OwnedFd) {
        use std::os::fd::AsFd;
        let Some(keeper) = &self.keeper else { return };
        let mut parts: Vec<(&str, std::os::fd::BorrowedFd<'_>)> = vec![
            ("group", sandbox.group.borrow()),
            ("listener", listener.as_fd()),
            ("mntns", sandbox.mnt_ns.as_fd()),
            ("root", sandbox.root.as_fd()),
        ];
        if let Some(ruleset) = &sandbox.ruleset {
            parts.push(("ruleset", ruleset.as_fd()));
        }
        for (part, fd) in parts {
            let mut kept = definition.clone();
            // Each server's group is a group of its own (see `adopt`).
            kept.key = if part == "group" {
                format!("kernel-{}-group-{}", definition.serial, std::process::id())
            } else {
                format!("kernel-{}-{}", definition.serial, part)
            };
            kept.part = part.into();
            if let Ok(mut keys) = sandbox.kept_keys.lock() {
                keys.push(kept.key.clone());
            }
            let text = serde_json::to_string(&kept).unwrap_or_default();
            if let Err(error) = keeper.keep(&text, fd) {
                tracing::warn!(%error, session = %definition.session, "the supervisor cannot keep this sandbox's descriptors: a server crash would end its judging");
            }
        }
    }

    /// The sandbox `key` is gone: forgotten here and by the supervisor.
    fn forget(&self, key: &(String, u64), sandbox: &Sandbox) {
        if let Ok(mut running) = self.running.lock() {
            running.remove(key);
        }
        if let Some(keeper) = &self.keeper {
            let keys = sandbox
                .kept_keys
                .lock()
                .map(|k| k.clone())
                .unwrap_or_default();
            for kept in keys {
                let _ = keeper.drop_view(&kept);
            }
        }
    }

    /// Whether session `id`'s sandbox is judged (or about to be) by the
    /// kernel mechanism.
    pub fn judges(&self, id: &str) -> bool {
        let has = |keys: Vec<(String, u64)>| keys.iter().any(|(k, _)| k == id);
        self.running
            .lock()
            .is_ok_and(|r| has(r.keys().cloned().collect()))
            || self
                .planned
                .lock()
                .is_ok_and(|p| has(p.keys().cloned().collect()))
    }

    /// Forgets sandboxes whose processes are gone; a session that ended
    /// while its sandbox still runs has every later open refused.
    pub fn sweep(&self) {
        if let Ok(mut planned) = self.planned.lock() {
            planned.retain(|(id, serial), _| self.authority.is_session(id, *serial));
        }
        if let Ok(mut running) = self.running.lock() {
            running.retain(|(id, serial), sandbox| {
                if !self.authority.is_session(id, *serial) {
                    sandbox.group.ended.store(true, Ordering::Release);
                }
                !sandbox.stopped()
            });
        }
    }

    /// Takes over the sandboxes a previous server judged, from what the
    /// supervisor kept. A sandbox missing a part is held, never closed:
    /// its calls wait until its processes are killed (closing its group
    /// would allow them).
    pub fn adopt(self: &Arc<Self>, kept: Vec<(String, OwnedFd)>) {
        type Parts = (
            Option<Kept>,
            Vec<OwnedFd>,
            HashMap<String, OwnedFd>,
            Vec<String>,
        );
        let mut by_serial: HashMap<u64, Parts> = HashMap::new();
        for (text, fd) in kept {
            let Ok(definition) = serde_json::from_str::<Kept>(&text) else {
                tracing::error!(definition = %text, "a kept kernel sandbox cannot be read: held");
                std::mem::forget(fd);
                continue;
            };
            let entry = by_serial.entry(definition.serial).or_default();
            entry.3.push(definition.key.clone());
            if definition.part == "group" {
                entry.1.push(fd);
            } else {
                entry.2.insert(definition.part.clone(), fd);
            }
            entry.0 = Some(definition);
        }
        for (_, (definition, old_groups, mut parts, keys)) in by_serial {
            let Some(definition) = definition else {
                continue;
            };
            let taken = (
                parts.remove("listener"),
                parts.remove("mntns"),
                parts.remove("root"),
                parts.remove("ruleset"),
            );
            // The groups of the servers before: no new event reaches them
            // (their mount marks go), and they stay open (what a dead
            // reader left waiting would be allowed by their closing). A
            // new group of this server's takes the sandbox's opens, so no
            // answer of this server can meet an event a dead one read
            // (fanotify matches an answer to its event by descriptor
            // number, and numbers repeat across processes).
            for group in &old_groups {
                // SAFETY: plain syscall on a kept group descriptor.
                let rc = unsafe {
                    libc::fanotify_mark(
                        group.as_raw_fd(),
                        libc::FAN_MARK_FLUSH | libc::FAN_MARK_MOUNT,
                        0,
                        libc::AT_FDCWD,
                        std::ptr::null(),
                    )
                };
                if rc < 0 {
                    tracing::error!(error = %std::io::Error::last_os_error(), session = %definition.session, "a previous server's group keeps its marks: the sandbox's opens may wait for good");
                }
            }
            let (Some(listener), Some(mnt_ns), Some(root), ruleset) = taken else {
                tracing::error!(session = %definition.session, "a kept kernel sandbox lacks a part: its calls wait until it is killed");
                std::mem::forget((taken, old_groups));
                continue;
            };
            let group = match fanotify::Group::new() {
                Ok(group) => Arc::new(group),
                Err(error) => {
                    tracing::error!(%error, session = %definition.session, "a kept kernel sandbox cannot be served: its calls wait until it is killed");
                    std::mem::forget((listener, old_groups));
                    continue;
                }
            };
            let mut marked = true;
            for mp in &definition.mounts {
                let relative = mp.trim_start_matches('/');
                let path = if relative.is_empty() { "." } else { relative };
                let Ok(c) = CString::new(path) else {
                    marked = false;
                    continue;
                };
                // SAFETY: `root` is the sandbox's root; `c` NUL-terminated.
                let rc = unsafe {
                    libc::fanotify_mark(
                        group.fd(),
                        libc::FAN_MARK_ADD | libc::FAN_MARK_MOUNT,
                        libc::FAN_OPEN_PERM | libc::FAN_OPEN_EXEC_PERM,
                        root.as_raw_fd(),
                        c.as_ptr(),
                    )
                };
                marked &= rc == 0;
            }
            if !marked || definition.mounts.is_empty() {
                tracing::error!(session = %definition.session, "a kept kernel sandbox's mounts cannot be marked again: its calls wait until it is killed");
                std::mem::forget((listener, old_groups, group));
                continue;
            }
            let Ok(host_proc) = open_dir("/proc") else {
                std::mem::forget((listener, old_groups));
                continue;
            };
            let ended = !self
                .authority
                .is_session(&definition.session, definition.serial);
            group.ended.store(ended, Ordering::Release);
            let sandbox = Arc::new(Sandbox {
                judge: Arc::new(Judge {
                    authority: Arc::clone(&self.authority),
                    session: definition.session.clone(),
                    tag: format!("{}", definition.serial),
                }),
                group,
                host_proc,
                namespace: RwLock::new(()),
                roots: definition.roots.clone(),
                uid: definition.uid,
                gid: definition.gid,
                groups: definition.groups.clone(),
                mnt_ns,
                root,
                ruleset,
                stop: AtomicBool::new(false),
                judges: Pool::new(),
                screen: std::sync::Mutex::new(None),
                kept_keys: std::sync::Mutex::new(keys),
                retired: old_groups,
            });
            // This server's group, kept beside the old ones.
            if let Some(keeper) = &self.keeper {
                let mut kept = definition.clone();
                kept.key = format!("kernel-{}-group-{}", definition.serial, std::process::id());
                kept.part = "group".into();
                let text = serde_json::to_string(&kept).unwrap_or_default();
                match keeper.keep(&text, sandbox.group.borrow()) {
                    Ok(()) => {
                        if let Ok(mut keys) = sandbox.kept_keys.lock() {
                            keys.push(kept.key);
                        }
                    }
                    Err(error) => {
                        tracing::warn!(%error, "the supervisor cannot keep this sandbox's new group")
                    }
                }
            }
            let key = (definition.session.clone(), definition.serial);
            tracing::info!(session = %definition.session, ended, retired = sandbox.retired.len(), "kernel: a sandbox taken over from the previous server (a new group; what the old one held waits until killed)");
            if let Err(error) = self.start(key, sandbox, listener) {
                tracing::error!(%error, "kernel: a kept sandbox cannot be served");
            }
        }
    }
}

/// What the supervisor keeps with each of a sandbox's descriptors.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Kept {
    /// `"kernel"`: told apart from the views' definitions.
    kind: String,
    key: String,
    part: String,
    session: String,
    serial: u64,
    roots: Vec<String>,
    /// The sandbox's mount points at or below a root (each marked).
    #[serde(default)]
    mounts: Vec<String>,
    uid: u32,
    gid: u32,
    groups: Vec<u32>,
}

/// Whether a kept definition is the kernel mechanism's.
pub fn is_kept(definition: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(definition).is_ok_and(|v| v["kind"] == "kernel")
}

fn open_dir(path: &str) -> std::io::Result<OwnedFd> {
    let c = CString::new(path).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: plain open; the result is checked.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor owned here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Flushes the group when the policy that judges the session changes (an
/// edited rules file, seen by the loader within its quarter second), and
/// keeps the session's screen made (in the daemon's context).
fn watch_policy(authority: &Authority, session: &str, sandbox: &Sandbox) {
    let mut last = authority.policy_stamp(session);
    loop {
        if sandbox.screen().is_none() {
            let made = authority.path_screen(session).map(Arc::new);
            // A screen made while the policy changed would be stale: kept
            // only if the stamp held across its making.
            if authority.policy_stamp(session) == last {
                if let Ok(mut screen) = sandbox.screen.lock() {
                    *screen = made;
                }
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
        if sandbox.stopped() {
            return;
        }
        let now = authority.policy_stamp(session);
        if now != last {
            tracing::info!(%session, "kernel: the policy changed: remembered allows dropped");
            sandbox.invalidate();
            last = now;
        }
    }
}

fn thread_group(tid: u32) -> u32 {
    std::fs::read_to_string(format!("/proc/{tid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Tgid:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(tid)
}

fn pidfd(pid: u32) -> std::io::Result<OwnedFd> {
    // SAFETY: plain syscall; the result is checked.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_long, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor owned here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// The filesystem uid, gid and groups of process `pid`.
fn credentials(pid: u32) -> Result<(u32, u32, Vec<u32>), String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("the sandbox's process {pid}: {e}"))?;
    let field = |name: &str| -> Vec<u32> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| {
                v.split_whitespace()
                    .filter_map(|n| n.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    let uid = field("Uid:").get(3).copied();
    let gid = field("Gid:").get(3).copied();
    match (uid, gid) {
        (Some(uid), Some(gid)) => Ok((uid, gid, field("Groups:"))),
        _ => Err(format!("the credentials of process {pid} cannot be read")),
    }
}

/// The mount points of process `pid`, as it sees them.
fn mount_points(pid: u32) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/mountinfo"))
        .map_err(|e| format!("the sandbox's mounts: {e}"))?;
    Ok(text
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(unescape)
        .collect())
}

/// mountinfo's octal escapes (`\040` for a space).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match octal {
            Some(d) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(super::unescape("/a\\040b/c"), "/a b/c");
        assert_eq!(super::unescape("/plain"), "/plain");
        assert_eq!(super::unescape("/end\\"), "/end\\");
    }
}
