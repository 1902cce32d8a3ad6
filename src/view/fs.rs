//! The FUSE adapter of the view: kernel calls translated into "judge this
//! path access for this session" (the authority) and "do it on the real
//! directory" (`sys.rs`). Opens that are allowed are handed to the kernel
//! as FUSE passthrough (the data never crosses the daemon) when the kernel
//! and the daemon's privileges allow it, and served by the daemon
//! otherwise.

use super::moves;
use super::nodes::{is_plain_name, path_text, AtBound, Nodes, ROOT};
use super::sys;
use super::verdicts::{Cached, Verdicts};
use crate::session::tree::ask::{AskId, Outcome, Response};
use crate::session::tree::generation::generation;
use crate::session::view::opens::{Access, PathVerdict};
use crate::session::Authority;
use fuser::{
    BackingId, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow,
    WriteFlags,
};
use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::DirEntryExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long the kernel may keep names and attributes. Changes made through
/// the view update the kernel's caches themselves; this bounds how long a
/// change made outside it (on the host) can go unseen in `stat`. With
/// passthrough, reads and writes go to the backing file and never stop at
/// a stale size, so the names can be kept long: `git status` and builds
/// stat thousands of files, and each lookup is a round trip to the daemon.
const PASSTHROUGH_TTL: Duration = Duration::from_secs(5);
/// With daemon-served I/O the kernel's page cache ends a read at the size
/// it holds, so a file grown on the host must be seen soon.
const SERVED_TTL: Duration = Duration::from_secs(1);

/// A directory's entries taken at `opendir`: (name, kind, backing inode).
type Listing = Vec<(OsString, FileType, u64)>;

/// An open file: the real descriptor, and the passthrough backing the
/// kernel was given for it (held until the last handle of the node closes).
struct OpenFile {
    /// `None` for a passthrough open answered from the node's kept
    /// backing: the kernel reopens the backing file itself.
    file: Option<OwnedFd>,
    ino: u64,
    passthrough: bool,
}

pub(super) struct Inner {
    pub authority: Arc<Authority>,
    pub session: String,
    pub nodes: Mutex<Nodes>,
    verdicts: Mutex<Verdicts>,
    files: Mutex<HashMap<u64, OpenFile>>,
    /// Per node: the backing id every passthrough open of it must share
    /// (the kernel refuses a second one), with the handles using it.
    backings: Mutex<HashMap<u64, Backing>>,
    next_fh: AtomicU64,
    /// This server's first handle: one below it was given by a server
    /// before this one (the view outlived it, `docs/restart.md`).
    first_fh: u64,
    /// Names this view's asks apart from another view's of the same
    /// session (`open-<tag>-<request>`), the same across restarts.
    tag: String,
    /// The kernel took FUSE passthrough at init.
    pub passthrough: AtomicBool,
    /// Said once: passthrough was refused and I/O goes through the daemon.
    told_fallback: AtomicBool,
    /// Asks in flight by FUSE request, so an interrupted open withdraws
    /// its ask.
    asking: Mutex<HashMap<u64, String>>,
    /// Asks the previous server's opens raised (from the node log), by
    /// kernel request number: a re-sent open waits for its own.
    prior_asks: Mutex<HashMap<u64, String>>,
    /// The daemon is root: what it creates is given to the caller.
    give_to_caller: bool,
    /// Something large was freed or cached (the node table shrank, the
    /// verdict cache grew): trimmed once the view is idle
    /// ([`Inner::trim_when_idle`]).
    trim_due: AtomicBool,
    /// When the `viewNodes` bound was last said (warned and audited), and
    /// the refusals since: one line a minute at most, so a program that
    /// keeps hitting the bound cannot fill the audit log instead.
    bound_said: Mutex<Option<Instant>>,
    bound_refused: AtomicU64,
    /// Held exclusively while a rename lists, judges and moves a subtree,
    /// and shared while an operation that makes a new name checks that
    /// its directory is still where it was judged and makes it: no name
    /// appears under a directory between its listing and its move
    /// (`moves.rs`).
    namespace: RwLock<()>,
}

/// Who made a request, kept past the request itself (a rename judged
/// again after its ask is answered).
#[derive(Debug, Clone, Copy)]
struct Caller {
    unique: u64,
    pid: u32,
    uid: u32,
}

impl Caller {
    fn of(req: &Request) -> Self {
        Self {
            unique: u64::from(req.unique()),
            pid: req.pid(),
            uid: req.uid(),
        }
    }
}

/// A rename as the kernel sent it: directory nodes, names and flags.
struct RenameOp {
    parent: u64,
    name: OsString,
    newparent: u64,
    newname: OsString,
    flags: u32,
}

/// Answers to the asks one rename raised: an exchange of accesses a
/// person allowed, so its next listing is judged without them.
type Approved = HashSet<(PathBuf, Access)>;

/// Asks one rename may raise before it is refused (a subtree that keeps
/// changing while it waits).
const MAX_RENAME_ASKS: u32 = 3;

/// Accesses one rename's ask may carry: a move that needs answers for
/// more is refused, naming why.
const MAX_ASKED: usize = 1000;

/// Accesses an ask's message names one by one.
const SHOWN: usize = 20;

/// Accesses from which one judgment screens out the names no rule speaks
/// for before walking the rest (below it, building the screen costs more
/// than the walk).
const SCREEN_FROM: usize = 64;

/// The verdict on many accesses at once.
enum Many {
    Allow,
    Deny {
        path: PathBuf,
        access: Access,
        why: String,
    },
    /// No rule denied; these need an answer.
    Ask(Vec<(PathBuf, Access)>),
}

/// How often a view at its `viewNodes` bound says so, at most.
const BOUND_SAID_EVERY: Duration = Duration::from_secs(60);

pub struct ViewFs {
    pub(super) inner: Arc<Inner>,
}

/// The bit the kernel sets in a request's number when it re-sends it to
/// a new server (`FUSE_UNIQUE_RESEND`, Linux >= 6.9).
const RESENT: u64 = 1 << 63;

/// What a view is called and numbered by, the same for every server that
/// serves it.
pub struct Identity {
    /// See [`Inner::tag`].
    pub tag: String,
    /// This server's first file handle (its epoch's, like the mount's).
    pub first_fh: u64,
}

impl ViewFs {
    pub fn new(
        authority: Arc<Authority>,
        session: String,
        root: PathBuf,
        root_dir: OwnedFd,
        identity: Identity,
    ) -> std::io::Result<Self> {
        let st = sys::stat_fd(root_dir.as_raw_fd())?;
        // SAFETY: geteuid cannot fail.
        let euid = unsafe { libc::geteuid() };
        let mut nodes = Nodes::new(root, root_dir, (st.st_dev, st.st_ino));
        nodes.set_bound(authority.limits().view_nodes);
        Ok(Self {
            inner: Arc::new(Inner {
                authority,
                session,
                nodes: Mutex::new(nodes),
                verdicts: Mutex::new(Verdicts::default()),
                files: Mutex::new(HashMap::new()),
                backings: Mutex::new(HashMap::new()),
                next_fh: AtomicU64::new(identity.first_fh.max(1)),
                first_fh: identity.first_fh.max(1),
                tag: identity.tag,
                passthrough: AtomicBool::new(false),
                told_fallback: AtomicBool::new(false),
                asking: Mutex::new(HashMap::new()),
                prior_asks: Mutex::new(HashMap::new()),
                give_to_caller: euid == 0,
                namespace: RwLock::new(()),
                trim_due: AtomicBool::new(false),
                bound_said: Mutex::new(None),
                bound_refused: AtomicU64::new(0),
            }),
        })
    }
}

impl ViewFs {
    /// Logs the node table from now on (`nodelog.rs`).
    pub fn set_log(&self, log: super::nodelog::NodeLog) {
        self.inner.nodes().set_log(log);
    }

    /// Takes over the table a previous server logged, each name found
    /// again on disk, and the passthrough its `INIT` settled (no `INIT`
    /// comes to a server that takes a connection over).
    pub fn restore(&self, logged: &super::nodelog::Replayed, passthrough: bool) {
        {
            let mut backings = self
                .inner
                .backings
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            for (ino, (raw, file)) in &logged.backings {
                backings.insert(
                    *ino,
                    Backing {
                        id: Held::Adopted,
                        raw: *raw,
                        users: 1,
                        file: *file,
                    },
                );
            }
        }
        if let Ok(mut prior) = self.inner.prior_asks.lock() {
            prior.clone_from(&logged.asks);
        }
        self.inner.nodes().restore(&logged.nodes, |dir, name| {
            let st = sys::stat_at(dir.as_raw_fd(), name).ok()?;
            let dir_fd = dir_fd_of(dir, name, &st).ok()?;
            Some(((st.st_dev, st.st_ino), dir_fd))
        });
        self.inner.passthrough.store(passthrough, Ordering::Relaxed);
    }

    /// The table as it stands, for a fresh log.
    pub fn logged(&self) -> super::nodelog::Replayed {
        let mut logged = self.inner.nodes().logged();
        let backings = self
            .inner
            .backings
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        logged.backings = backings
            .iter()
            .map(|(ino, b)| (*ino, (b.raw, b.file)))
            .collect();
        // Asks of opens still waiting: an open re-sent once may be re-sent
        // again by a later restart.
        if let Ok(prior) = self.inner.prior_asks.lock() {
            logged.asks = prior
                .iter()
                .filter(|(_, rid)| {
                    self.inner
                        .authority
                        .ask_for(&self.inner.session, rid)
                        .is_some()
                })
                .map(|(unique, rid)| (*unique, rid.clone()))
                .collect();
        }
        logged
    }

    /// The view's shared state, for the idle trim ([`Inner::trim_when_idle`],
    /// from `Views::sweep`).
    pub(super) fn shared(&self) -> Arc<Inner> {
        Arc::clone(&self.inner)
    }

    /// Whether the kernel took passthrough at `INIT`: asked once the
    /// session is made (the filesystem has moved into it by then).
    pub fn passthrough_probe(&self) -> impl Fn() -> bool + use<> {
        let inner = Arc::clone(&self.inner);
        move || inner.passthrough.load(Ordering::Relaxed)
    }
}

/// An `O_PATH` descriptor of `name` in `dir` when `st` says it is a
/// directory (a node's `dir`), `None` for anything else.
fn dir_fd_of(dir: &OwnedFd, name: &OsStr, st: &libc::stat) -> std::io::Result<Option<OwnedFd>> {
    if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
        return Ok(None);
    }
    sys::open_at(dir.as_raw_fd(), name, libc::O_PATH | libc::O_DIRECTORY, 0).map(Some)
}

fn io_errno(error: std::io::Error) -> Errno {
    Errno::from(error)
}

fn time(sec: i64, nsec: i64) -> SystemTime {
    if sec >= 0 {
        UNIX_EPOCH + Duration::new(sec as u64, nsec.clamp(0, 999_999_999) as u32)
    } else {
        UNIX_EPOCH
    }
}

fn kind_of(mode: u32) -> FileType {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFLNK => FileType::Symlink,
        libc::S_IFCHR => FileType::CharDevice,
        libc::S_IFBLK => FileType::BlockDevice,
        libc::S_IFIFO => FileType::NamedPipe,
        libc::S_IFSOCK => FileType::Socket,
        _ => FileType::RegularFile,
    }
}

fn attr(ino: u64, st: &libc::stat) -> FileAttr {
    FileAttr {
        ino: INodeNo(ino),
        size: st.st_size.max(0) as u64,
        blocks: st.st_blocks.max(0) as u64,
        atime: time(st.st_atime, st.st_atime_nsec),
        mtime: time(st.st_mtime, st.st_mtime_nsec),
        ctime: time(st.st_ctime, st.st_ctime_nsec),
        crtime: UNIX_EPOCH,
        kind: kind_of(st.st_mode),
        perm: (st.st_mode & 0o7777) as u16,
        nlink: st.st_nlink as u32,
        uid: st.st_uid,
        gid: st.st_gid,
        rdev: st.st_rdev as u32,
        blksize: st.st_blksize as u32,
        flags: 0,
    }
}

/// What opening with `flags` does to the file.
/// The accesses an open with `flags` makes (a truncating open writes).
pub fn open_accesses(flags: i32) -> Vec<Access> {
    let mut accesses = Vec::with_capacity(2);
    match flags & libc::O_ACCMODE {
        libc::O_WRONLY => accesses.push(Access::Write),
        libc::O_RDWR => accesses.extend([Access::Read, Access::Write]),
        _ => accesses.push(Access::Read),
    }
    if flags & libc::O_TRUNC != 0 && !accesses.contains(&Access::Write) {
        accesses.push(Access::Write);
    }
    accesses
}

/// A node's passthrough backing: kept after its last handle closes (until
/// the kernel forgets the node, or [`MAX_IDLE_BACKINGS`] is passed), so the
/// next open of the same file needs neither an `openat` nor a
/// registration. `file` is the backing file's `(dev, ino)`: a name that
/// now holds another file is opened afresh.
///
/// A backing the previous server registered (the view outlived it) is
/// `Adopted`: its id is still open in the kernel, and handles that server
/// gave may still use it, so new opens of the node get the same id
/// (wrapped at the first, when a reply is at hand) and it is never closed
/// while the view lives (its one user is the dead server's handles).
struct Backing {
    id: Held,
    /// The id as the kernel knows it (for the node log).
    raw: u32,
    users: usize,
    file: (u64, u64),
}

enum Held {
    Id(Arc<BackingId>),
    Adopted,
}

impl Backing {
    /// The id to answer with; an adopted one is wrapped by `wrap` first.
    fn id(&mut self, wrap: impl FnOnce(u32) -> BackingId) -> Arc<BackingId> {
        match &self.id {
            Held::Id(id) => Arc::clone(id),
            Held::Adopted => {
                let id = Arc::new(wrap(self.raw));
                self.id = Held::Id(Arc::clone(&id));
                id
            }
        }
    }
}

/// Idle backings kept at most (each holds a descriptor in the kernel).
const MAX_IDLE_BACKINGS: usize = 4096;

/// The continuation of an operation once its accesses are judged.
type Then = Box<dyn FnOnce(&Arc<Inner>, Result<(), Errno>) + Send>;

impl Inner {
    fn ttl(&self) -> Duration {
        if self.passthrough.load(Ordering::Relaxed) {
            PASSTHROUGH_TTL
        } else {
            SERVED_TTL
        }
    }

    fn fh(&self) -> u64 {
        self.next_fh.fetch_add(1, Ordering::Relaxed)
    }

    fn nodes(&self) -> std::sync::MutexGuard<'_, Nodes> {
        self.nodes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Judges `accesses` for the caller of `req`, then runs `then` with
    /// the verdict: at once for a rule's answer, when the ask is answered
    /// otherwise. Nothing not judged `allow` runs `then` with `Ok`.
    fn judged(self: &Arc<Self>, req: &Request, accesses: Vec<(PathBuf, Access)>, then: Then) {
        let caller = Caller::of(req);
        let now = Instant::now();
        let generation = generation();
        // A verdict judged inside an outside-guard scope is the operation's
        // (a directory made, inert content placed), not the path's.
        let scoped = crate::policy::outside::scoped();
        let mut unjudged: Vec<(PathBuf, Access)> = Vec::new();
        {
            let verdicts = self.verdicts.lock().unwrap_or_else(|p| p.into_inner());
            for (path, access) in accesses {
                match verdicts
                    .get(&path, access, generation, now)
                    .filter(|_| !scoped)
                {
                    Some(Cached::Allow) => {}
                    Some(Cached::Deny(_)) => {
                        drop(verdicts);
                        return then(self, Err(Errno::EACCES));
                    }
                    None => unjudged.push((path, access)),
                }
            }
        }
        if unjudged.is_empty() {
            return then(self, Ok(()));
        }
        let texts: Vec<(String, Access)> =
            unjudged.iter().map(|(p, a)| (path_text(p), *a)).collect();
        let Some(facts) = self.authority.path_facts(&self.session, &texts) else {
            tracing::info!(session = %self.session, "the view's session ended: refused");
            return then(self, Err(Errno::EACCES));
        };
        let verdict = match self.authority.judge_paths(&self.session, &facts) {
            Ok(verdict) => verdict,
            Err(error) => PathVerdict::Deny {
                why: format!("cannot be judged: {error}"),
            },
        };
        match verdict {
            PathVerdict::Allow { .. } => {
                let mut verdicts = self.verdicts.lock().unwrap_or_else(|p| p.into_inner());
                for (path, access) in unjudged.iter().filter(|_| !scoped) {
                    verdicts.put(path, *access, Cached::Allow, generation, now);
                }
                if verdicts.wants_trim() {
                    self.trim_due.store(true, Ordering::Relaxed);
                }
                drop(verdicts);
                then(self, Ok(()))
            }
            PathVerdict::Deny { why } => {
                self.denied(&caller, &texts, &why);
                if let (false, [(path, access)]) = (scoped, unjudged.as_slice()) {
                    let mut verdicts = self.verdicts.lock().unwrap_or_else(|p| p.into_inner());
                    verdicts.put(path, *access, Cached::Deny(why), generation, now);
                }
                then(self, Err(Errno::EACCES))
            }
            PathVerdict::Ask => self.ask(&caller, texts, facts, None, then),
        }
    }

    /// The dry walk's verdict on `accesses` together.
    fn dry(&self, accesses: &[(PathBuf, Access)]) -> PathVerdict {
        let texts: Vec<(String, Access)> =
            accesses.iter().map(|(p, a)| (path_text(p), *a)).collect();
        let Some(facts) = self.authority.path_facts(&self.session, &texts) else {
            return PathVerdict::Deny {
                why: "the view's session ended".into(),
            };
        };
        self.authority
            .judge_paths(&self.session, &facts)
            .unwrap_or_else(|error| PathVerdict::Deny {
                why: format!("cannot be judged: {error}"),
            })
    }

    /// Judges many accesses (a rename's subtree), `approved` ones aside:
    /// one walk for all of them first (the common case: rules allow
    /// everything), and only when that is not `allow`, one walk each, to
    /// name the first denied access or every one that needs an answer.
    fn judge_many(&self, accesses: Vec<(PathBuf, Access)>, approved: &Approved) -> Many {
        let now = Instant::now();
        let generation = generation();
        // As in `judged`: a verdict inside an outside-guard scope is the
        // operation's, not the path's, so the cache is neither read nor fed.
        let scoped = crate::policy::outside::scoped();
        // Many names (a directory's subtree): the paths no rule names are
        // allowed at the session's node by the view's default, told in one
        // glob pass each (`PathScreen`); the rest are judged below.
        let screen = (accesses.len() > SCREEN_FROM)
            .then(|| self.authority.path_screen(&self.session))
            .flatten();
        let mut unnamed: HashMap<&Path, bool> = HashMap::new();
        let mut unjudged: Vec<(PathBuf, Access)> = Vec::new();
        {
            let verdicts = self.verdicts.lock().unwrap_or_else(|p| p.into_inner());
            for (path, access) in &accesses {
                if !approved.is_empty() && approved.contains(&(path.clone(), *access)) {
                    continue;
                }
                if let Some(screen) = &screen {
                    let allowed =
                        *unnamed
                            .entry(path.as_path())
                            .or_insert_with(|| match path.to_str() {
                                Some(text) => screen.unnamed(text),
                                None => screen.unnamed(&path_text(path)),
                            });
                    if allowed {
                        continue;
                    }
                }
                match verdicts
                    .get(path, *access, generation, now)
                    .filter(|_| !scoped)
                {
                    Some(Cached::Allow) => {}
                    Some(Cached::Deny(why)) => {
                        return Many::Deny {
                            path: path.clone(),
                            access: *access,
                            why: why.clone(),
                        }
                    }
                    None => unjudged.push((path.clone(), *access)),
                }
            }
        }
        if unjudged.is_empty() {
            return Many::Allow;
        }
        let cache = |list: &[(PathBuf, Access)], verdict: Cached| {
            if scoped {
                return;
            }
            let mut verdicts = self.verdicts.lock().unwrap_or_else(|p| p.into_inner());
            for (path, access) in list {
                verdicts.put(path, *access, verdict.clone(), generation, now);
            }
        };
        if let PathVerdict::Allow { .. } = self.dry(&unjudged) {
            cache(&unjudged, Cached::Allow);
            return Many::Allow;
        }
        let mut pending = Vec::new();
        for one in unjudged {
            match self.dry(std::slice::from_ref(&one)) {
                PathVerdict::Allow { .. } => cache(std::slice::from_ref(&one), Cached::Allow),
                PathVerdict::Deny { why } => {
                    cache(std::slice::from_ref(&one), Cached::Deny(why.clone()));
                    let (path, access) = one;
                    return Many::Deny { path, access, why };
                }
                PathVerdict::Ask => pending.push(one),
            }
        }
        if pending.is_empty() {
            Many::Allow
        } else {
            Many::Ask(pending)
        }
    }

    /// The shared side of the namespace lock for an operation that makes
    /// `name` in `parent`, once `parent` is checked to be still where it
    /// was when `judged` was judged: a directory renamed while an ask
    /// waited would otherwise get a name no one judged at its new path.
    fn still_at(
        &self,
        parent: u64,
        name: &OsStr,
        judged: &Path,
    ) -> Result<RwLockReadGuard<'_, ()>, Errno> {
        let guard = self.namespace.read().unwrap_or_else(|p| p.into_inner());
        match self.nodes().child_path(parent, name) {
            Some(now) if now == judged => Ok(guard),
            now => {
                tracing::info!(session = %self.session, judged = %judged.display(), now = ?now, "view: the directory moved while the operation was judged: refused");
                Err(Errno::EACCES)
            }
        }
    }

    /// One step of a rename: under the namespace lock, list what it moves,
    /// judge it (`moves.rs`) and, when every access is allowed, rename.
    /// Accesses that need an answer are asked in one ask, outside the
    /// lock; once allowed, the rename starts again from a fresh listing
    /// with those accesses approved (a subtree that changed while the ask
    /// waited is judged again).
    fn rename_step(
        self: &Arc<Self>,
        caller: Caller,
        op: RenameOp,
        mut approved: Approved,
        asked: u32,
        reply: ReplyEmpty,
    ) {
        let lock = self.namespace.write().unwrap_or_else(|p| p.into_inner());
        let found = {
            let nodes = self.nodes();
            (
                nodes.child_path(op.parent, &op.name),
                nodes.child_path(op.newparent, &op.newname),
                nodes.dir(op.parent),
                nodes.dir(op.newparent),
            )
        };
        let (Some(from), Some(to), Some(from_dir), Some(to_dir)) = found else {
            return reply.error(Errno::ENOENT);
        };
        let exchange = op.flags & libc::RENAME_EXCHANGE != 0;
        // The daemon's own mount and state dir are never entered (their
        // names are judged, and the guards deny them).
        let listed = |dir: &OwnedFd, name: &OsStr, base: &Path| {
            let enter = |rel: &Path| !super::hidden::is_hidden_path(&moves::join(base, rel));
            match moves::subtree(dir, name, &enter) {
                Ok(Some(names)) => Ok(names),
                Ok(None) => Err(Errno::ENOENT),
                Err(error) if error.raw_os_error() == Some(libc::E2BIG) => {
                    tracing::warn!(session = %self.session, from = %from.display(), "view: a rename moves more than {} entries: refused", moves::MAX_MOVED);
                    Err(Errno::EACCES)
                }
                Err(error) => Err(io_errno(error)),
            }
        };
        let moved = match listed(&from_dir, &op.name, &from) {
            Ok(names) => names,
            Err(e) => return reply.error(e),
        };
        let swapped = if exchange {
            match listed(&to_dir, &op.newname, &to) {
                Ok(names) => names,
                Err(e) => return reply.error(e),
            }
        } else {
            Vec::new()
        };
        let entries = moved.len() + swapped.len();
        // git's `config.lock` → `config`: inert content is placed without
        // the outside floor (`policy::outside`). The namespace lock keeps
        // names still, and `inert_placement` refuses a source any handle
        // could still write, so the bytes judged are the bytes placed.
        let placed = (op.flags == 0)
            .then(|| self.inert_placement(op.parent, &op.name, &to))
            .flatten();
        let placing = crate::policy::outside::enter_placing(&placed.unwrap_or_default());
        let verdict = self.judge_many(moves::accesses(&from, &to, &moved, &swapped), &approved);
        drop(placing);
        match verdict {
            Many::Allow => {
                let result = sys::rename_at(
                    from_dir.as_raw_fd(),
                    &op.name,
                    to_dir.as_raw_fd(),
                    &op.newname,
                    op.flags,
                );
                match result {
                    Ok(()) => {
                        self.nodes().renamed(
                            op.parent,
                            &op.name,
                            op.newparent,
                            &op.newname,
                            exchange,
                        );
                        drop(lock);
                        reply.ok()
                    }
                    Err(e) => reply.error(io_errno(e)),
                }
            }
            Many::Deny { path, access, why } => {
                drop(lock);
                let why = if entries > 1 {
                    format!(
                        "renaming {} moves {}: {why}",
                        from.display(),
                        path.display()
                    )
                } else {
                    why
                };
                self.denied(&caller, &[(path_text(&path), access)], &why);
                reply.error(Errno::EACCES)
            }
            Many::Ask(pending) => {
                drop(lock);
                let refuse = |why: String| {
                    let texts: Vec<(String, Access)> = pending
                        .iter()
                        .take(SHOWN)
                        .map(|(p, a)| (path_text(p), *a))
                        .collect();
                    self.denied(&caller, &texts, &why);
                    Errno::EACCES
                };
                if asked >= MAX_RENAME_ASKS {
                    return reply.error(refuse(format!(
                        "renaming {} still needs answers after {asked} asks (what it moves kept changing)",
                        from.display()
                    )));
                }
                if pending.len() > MAX_ASKED {
                    return reply.error(refuse(format!(
                        "renaming {} needs answers for {} accesses, more than one ask may carry ({MAX_ASKED})",
                        from.display(),
                        pending.len()
                    )));
                }
                let texts: Vec<(String, Access)> =
                    pending.iter().map(|(p, a)| (path_text(p), *a)).collect();
                let Some(facts) = self.authority.path_facts(&self.session, &texts) else {
                    return reply.error(Errno::EACCES);
                };
                let message = moves::describe(&from, &to, entries, &pending, SHOWN);
                self.ask(
                    &caller,
                    texts,
                    facts,
                    Some(message),
                    Box::new(move |inner, verdict| match verdict {
                        Err(e) => reply.error(e),
                        Ok(()) => {
                            approved.extend(pending);
                            inner.rename_step(caller, op, approved, asked + 1, reply)
                        }
                    }),
                );
            }
        }
    }

    fn denied(&self, caller: &Caller, texts: &[(String, Access)], why: &str) {
        let command = sys::command_line(caller.pid);
        for (path, access) in texts {
            tracing::info!(session = %self.session, path = %path, access = access.word(), pid = caller.pid, %why, "view: denied");
        }
        let mut entry = serde_json::Map::new();
        entry.insert("event".into(), "view-denied".into());
        entry.insert("session".into(), self.session.clone().into());
        entry.insert(
            "accesses".into(),
            texts
                .iter()
                .map(|(p, a)| serde_json::json!({"path": p, "access": a.word()}))
                .collect::<Vec<_>>()
                .into(),
        );
        entry.insert("why".into(), why.into());
        entry.insert("pid".into(), caller.pid.into());
        entry.insert("uid".into(), caller.uid.into());
        entry.insert("command".into(), command.into());
        self.authority.audit_line(entry);
    }

    /// Raises the ask and parks `then` on its answer. `what` says what
    /// the program does (by default: opens the files of `texts`).
    fn ask(
        self: &Arc<Self>,
        caller: &Caller,
        texts: Vec<(String, Access)>,
        facts: crate::facts::request::FactSet,
        what: Option<String>,
        then: Then,
    ) {
        let unique: u64 = caller.unique & !RESENT;
        // An open the kernel re-sends to this server after a crash finds
        // the ask it raised (restored from the journal) by the node log's
        // record of it, instead of asking twice.
        let prior = self
            .prior_asks
            .lock()
            .ok()
            .and_then(|mut prior| prior.remove(&unique));
        if let Some(rid) = prior {
            if let Some(ask_id) = self.authority.ask_for(&self.session, &rid) {
                tracing::info!(session = %self.session, ask = %ask_id, "view: a re-sent open waits for the ask it raised before the restart");
                return self.wait_for(unique, rid, ask_id, then);
            }
        }
        // Unpredictable, so no program can have written an ask by that
        // name into the session's outbox beforehand.
        let mut nonce = [0u8; 8];
        crate::mount::nodes::random_bytes(&mut nonce);
        let rid = format!("open-{}-{unique}-{}", self.tag, hex::encode(nonce));
        self.nodes().log_asked(unique, &rid);
        let command = sys::command_line(caller.pid);
        let what = what.unwrap_or_else(|| {
            let accesses: Vec<String> = texts
                .iter()
                .map(|(p, a)| format!("{} {p}", a.word()))
                .collect();
            format!(
                "a program in the sandbox opens a file: {}",
                accesses.join(", ")
            )
        });
        let message = format!("{what} (pid {}, uid {}: {command})", caller.pid, caller.uid);
        let paths: Vec<String> = texts.iter().map(|(p, _)| p.clone()).collect();
        let ask_id = match self
            .authority
            .raise_paths(&self.session, &rid, facts, message, paths)
        {
            Ok(id) => id,
            Err(error) => {
                tracing::warn!(session = %self.session, %error, "view: the ask could not be raised: refused");
                then(self, Err(Errno::EACCES));
                // Never raised: a compaction drops its line (a program
                // refused at `pendingAsks` again and again would otherwise
                // grow the log's snapshot with each try).
                self.nodes().log_answered(unique);
                return;
            }
        };
        tracing::info!(session = %self.session, ask = %ask_id, "view: an open waits for an answer");
        self.wait_for(unique, rid, ask_id, then)
    }

    /// Parks `then` on the answer to `ask_id`, raised for request `unique`.
    fn wait_for(self: &Arc<Self>, unique: u64, rid: String, ask_id: AskId, then: Then) {
        if let Ok(mut asking) = self.asking.lock() {
            asking.insert(unique, rid);
        }
        let slot: Arc<Mutex<Option<Then>>> = Arc::new(Mutex::new(Some(then)));
        let finish = {
            let me = Arc::clone(self);
            let slot = Arc::clone(&slot);
            move |result: Result<(), Errno>| {
                if let Ok(mut asking) = me.asking.lock() {
                    asking.remove(&unique);
                }
                let then = slot.lock().ok().and_then(|mut s| s.take());
                if let Some(then) = then {
                    then(&me, result);
                    // Answered: a compaction of the node log drops its ask
                    // (after the reply, so a server that dies before it
                    // still finds the ask for the re-sent open).
                    me.nodes().log_answered(unique);
                }
            }
        };
        let outcome = |response: &Response| match response.outcome {
            Outcome::Allow => Ok(()),
            Outcome::Cancelled => Err(Errno::EINTR),
            _ => Err(Errno::EACCES),
        };
        let parked = finish.clone();
        let waiter: crate::session::tree::ask::Waiter =
            Box::new(move |response: Arc<Response>| parked(outcome(&response)));
        match self.authority.wait(&ask_id, waiter) {
            Ok(None) => {}
            // Answered before the wait was parked (the waiter was dropped).
            Ok(Some(response)) => finish(outcome(&response)),
            Err(error) => {
                tracing::warn!(%error, "view: the ask vanished: refused");
                finish(Err(Errno::EACCES))
            }
        }
    }

    /// The kernel interrupted request `unique`: its ask is withdrawn.
    pub fn interrupt(&self, unique: u64) {
        let unique = unique & !RESENT;
        let rid = self.asking.lock().ok().and_then(|mut a| a.remove(&unique));
        if let Some(rid) = rid {
            let _ = self.authority.withdraw(&self.session, &rid);
        }
    }

    fn lookup_at(&self, parent: u64, name: &OsStr) -> Result<FileAttr, Errno> {
        // The daemon's state dir and mount are not there (`hidden.rs`):
        // by name before the host is asked, by what it found after.
        if let Some(path) = self.nodes().child_path(parent, name) {
            if super::hidden::is_hidden_path(&path) {
                return Err(Errno::ENOENT);
            }
        }
        let dir = self.nodes().dir(parent).ok_or(Errno::ENOENT)?;
        let st = sys::stat_at(dir.as_raw_fd(), name).map_err(io_errno)?;
        if super::hidden::is_hidden_inode(st.st_dev, st.st_ino) {
            return Err(Errno::ENOENT);
        }
        let is_dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
        // A directory already known by this name keeps its descriptor.
        if let Some(ino) =
            self.nodes()
                .looked_up_again(parent, name, (st.st_dev, st.st_ino), is_dir)
        {
            return Ok(attr(ino, &st));
        }
        let dir_fd = dir_fd_of(&dir, name, &st).map_err(io_errno)?;
        let looked_up = self
            .nodes()
            .looked_up(parent, name, (st.st_dev, st.st_ino), dir_fd);
        match looked_up {
            Ok(ino) => Ok(attr(ino, &st)),
            Err(at) => Err(self.past_bound(parent, name, at)),
        }
    }

    /// `ENOSPC` unless the table has room for `name` in `parent` (a name
    /// it knows needs none): asked before a create or mkdir makes the
    /// name on disk, so a refused one leaves nothing behind.
    fn room_for(&self, parent: u64, name: &OsStr) -> Result<(), Errno> {
        let full = self.nodes().room_for(parent, name).err();
        match full {
            Some(at) => Err(self.past_bound(parent, name, at)),
            None => Ok(()),
        }
    }

    /// A new node was refused at the view's `viewNodes` bound: `ENOSPC`,
    /// said (a warning and an audit line naming the bound) at most once
    /// every [`BOUND_SAID_EVERY`], with the refusals since.
    fn past_bound(&self, parent: u64, name: &OsStr, at: AtBound) -> Errno {
        self.bound_refused.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let due = {
            let mut said = self.bound_said.lock().unwrap_or_else(|p| p.into_inner());
            let due = said.is_none_or(|at| now.duration_since(at) >= BOUND_SAID_EVERY);
            if due {
                *said = Some(now);
            }
            due
        };
        if !due {
            return Errno::ENOSPC;
        }
        let refused = self.bound_refused.swap(0, Ordering::Relaxed);
        let path = self
            .nodes()
            .child_path(parent, name)
            .map(|p| path_text(&p))
            .unwrap_or_default();
        let why = format!(
            "the view holds {} names, the most one may (limits.viewNodes: {}); names the sandbox has not looked up before are refused ENOSPC until the kernel forgets some",
            at.held, at.bound
        );
        tracing::warn!(session = %self.session, %path, refused, %why, "view: a new name refused");
        let mut entry = serde_json::Map::new();
        entry.insert("event".into(), "view-bound".into());
        entry.insert("session".into(), self.session.clone().into());
        entry.insert("path".into(), path.into());
        entry.insert("limit".into(), "viewNodes".into());
        entry.insert("bound".into(), at.bound.into());
        entry.insert("refused".into(), refused.into());
        entry.insert("why".into(), why.into());
        self.authority.audit_line(entry);
        Errno::ENOSPC
    }

    /// Gives back what a large table or cache held, once the view has
    /// been idle long enough that no cached verdict is fresh: the verdict
    /// cache, the room of the handle and backing maps, and the
    /// allocator's free memory (glibc keeps freed memory in its arenas:
    /// without `malloc_trim`, the 100,000 nodes a sandbox made and removed
    /// stayed in the daemon's RSS). Cheap when nothing is due (one load).
    /// `true` when it trimmed: the caller then calls
    /// [`release_free_memory`], once for all the views it trimmed.
    pub(super) fn trim_when_idle(&self, now: Instant) -> bool {
        if !self.trim_due.load(Ordering::Relaxed) {
            return false;
        }
        if !self
            .verdicts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .trim(now)
        {
            return false;
        }
        self.trim_due.store(false, Ordering::Relaxed);
        self.backings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .shrink_to_fit();
        if let Ok(mut files) = self.files.lock() {
            files.shrink_to_fit();
        }
        tracing::debug!(session = %self.session, "view: caches trimmed");
        true
    }

    /// An `O_PATH` descriptor of node `ino` itself.
    fn node_fd(&self, ino: u64) -> Result<OwnedFd, Errno> {
        let nodes = self.nodes();
        if let Some(dir) = nodes.dir(ino) {
            drop(nodes);
            return sys::open_at(dir.as_raw_fd(), OsStr::new("."), libc::O_PATH, 0)
                .map_err(io_errno);
        }
        let (dir, name) = nodes.at(ino).ok_or(Errno::ENOENT)?;
        drop(nodes);
        sys::path_fd(dir.as_raw_fd(), &name).map_err(io_errno)
    }

    fn getattr_of(&self, ino: u64) -> Result<FileAttr, Errno> {
        let fd = self.node_fd(ino)?;
        let st = sys::stat_fd(fd.as_raw_fd()).map_err(io_errno)?;
        Ok(attr(ino, &st))
    }

    fn path_of(&self, ino: u64) -> Result<PathBuf, Errno> {
        self.nodes().path(ino).ok_or(Errno::ENOENT)
    }

    fn child_path(&self, parent: u64, name: &OsStr) -> Result<PathBuf, Errno> {
        if !is_plain_name(name) {
            return Err(Errno::EINVAL);
        }
        self.nodes().child_path(parent, name).ok_or(Errno::ENOENT)
    }

    /// Gives what the daemon (root) just made to the caller.
    fn give(&self, (uid, gid): (u32, u32), dir: &OwnedFd, name: &OsStr) {
        if !self.give_to_caller || uid == 0 {
            return;
        }
        if let Ok(fd) = sys::path_fd(dir.as_raw_fd(), name) {
            if let Err(error) = sys::chown_fd(&fd, uid, gid) {
                tracing::warn!(%error, "view: a new file could not be given to its creator");
            }
        }
    }

    /// Opens the real file and answers the kernel (passthrough when it can).
    fn finish_open(&self, ino: u64, file: OwnedFd, reply: ReplyOpen) {
        let fh = self.fh();
        if self.passthrough.load(Ordering::Relaxed) {
            let opened = self.backing(
                ino,
                &file,
                |fd| reply.open_backing(fd).map(BackingId::into_raw),
                // SAFETY: the id is open on this connection (registered just
                // now, or by the previous server and logged as not closed),
                // and only the returned wrapper's drop closes it.
                |raw| unsafe { reply.wrap_backing(raw) },
            );
            match opened {
                Ok(id) => {
                    self.files_insert(fh, Some(file), ino, true);
                    return reply.opened_passthrough(FileHandle(fh), FopenFlags::empty(), &id);
                }
                Err(error) => self.fall_back(error),
            }
        }
        self.files_insert(fh, Some(file), ino, false);
        reply.opened(FileHandle(fh), FopenFlags::empty())
    }

    fn files_insert(&self, fh: u64, file: Option<OwnedFd>, ino: u64, passthrough: bool) {
        if let Ok(mut files) = self.files.lock() {
            files.insert(
                fh,
                OpenFile {
                    file,
                    ino,
                    passthrough,
                },
            );
        }
    }

    /// The node's backing id, registered from `file` on its first open
    /// (`open_backing`; `wrap` makes an adopted id usable).
    fn backing(
        &self,
        ino: u64,
        file: &OwnedFd,
        open_backing: impl FnOnce(&OwnedFd) -> std::io::Result<u32>,
        wrap: impl FnOnce(u32) -> BackingId,
    ) -> std::io::Result<Arc<BackingId>> {
        let identity = sys::stat_fd(file.as_raw_fd()).map(|st| (st.st_dev, st.st_ino))?;
        let mut backings = self.backings.lock().unwrap_or_else(|p| p.into_inner());
        match backings.get_mut(&ino) {
            // The kernel takes one backing per inode while any handle is
            // open: a second open shares it.
            Some(backing) if backing.users > 0 || backing.file == identity => {
                backing.users += 1;
                return Ok(backing.id(wrap));
            }
            Some(_) => {
                backings.remove(&ino);
                self.log_closed(&[ino]);
            }
            None => {}
        }
        let raw = open_backing(file)?;
        let id = Arc::new(wrap(raw));
        backings.insert(
            ino,
            Backing {
                id: Held::Id(Arc::clone(&id)),
                raw,
                users: 1,
                file: identity,
            },
        );
        self.nodes().log_backing(ino, raw, identity);
        Ok(id)
    }

    /// Logs that the backings of `inos` were closed (called with the
    /// backings' lock held, so the log's order is the table's; the nodes'
    /// lock is never held while the backings' is taken).
    fn log_closed(&self, inos: &[u64]) {
        if inos.is_empty() {
            return;
        }
        let mut nodes = self.nodes();
        for ino in inos {
            nodes.log_closed(*ino);
        }
    }

    /// The node's kept backing, when the name still holds that file:
    /// one `fstatat` instead of an `openat` and a registration.
    fn kept_backing(
        &self,
        ino: u64,
        wrap: impl FnOnce(u32) -> BackingId,
    ) -> Option<Arc<BackingId>> {
        let (dir, name) = self.nodes().at(ino)?;
        let st = sys::stat_at(dir.as_raw_fd(), &name).ok()?;
        let mut backings = self.backings.lock().unwrap_or_else(|p| p.into_inner());
        let backing = backings.get_mut(&ino)?;
        if backing.file != (st.st_dev, st.st_ino) {
            return None;
        }
        backing.users += 1;
        Some(backing.id(wrap))
    }

    /// The kernel forgot `ino`: its kept backing goes.
    fn forget_backing(&self, ino: u64) {
        let mut backings = self.backings.lock().unwrap_or_else(|p| p.into_inner());
        if backings.get(&ino).is_some_and(|b| b.users == 0) {
            backings.remove(&ino);
            self.log_closed(&[ino]);
        }
    }

    /// The descriptor of handle `fh`, or, for a handle that holds none (a
    /// passthrough open from a kept backing), node `ino` opened afresh with
    /// `flags` (kept alive by the first member).
    fn fd_of(&self, fh: u64, ino: u64, flags: i32) -> Result<(Option<OwnedFd>, i32), Errno> {
        if let Some(fd) = self.file_fd(fh) {
            return Ok((None, fd));
        }
        let (dir, name) = self.nodes().at(ino).ok_or(Errno::EBADF)?;
        let file = sys::open_at(dir.as_raw_fd(), &name, flags, 0).map_err(io_errno)?;
        let fd = file.as_raw_fd();
        Ok((Some(file), fd))
    }

    fn fall_back(&self, error: std::io::Error) {
        if !self.told_fallback.swap(true, Ordering::Relaxed) {
            tracing::warn!(%error, "view: FUSE passthrough refused; file I/O is served by the daemon");
        }
        self.passthrough.store(false, Ordering::Relaxed);
    }

    fn release_file(&self, fh: u64) {
        let file = self.files.lock().ok().and_then(|mut f| f.remove(&fh));
        if let Some(file) = file {
            if file.passthrough {
                let mut backings = self.backings.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(backing) = backings.get_mut(&file.ino) {
                    backing.users = backing.users.saturating_sub(1);
                }
                if backings.len() > MAX_IDLE_BACKINGS {
                    let idle: Vec<u64> = backings
                        .iter()
                        .filter(|(_, b)| b.users == 0)
                        .map(|(ino, _)| *ino)
                        .collect();
                    for ino in &idle {
                        backings.remove(ino);
                    }
                    self.log_closed(&idle);
                }
            }
        }
    }

    /// The descriptor daemon-served I/O on `fh` uses. A handle a previous
    /// server gave (the view outlived it) is opened again from its node
    /// with the flags the kernel sends along: its open was judged then.
    fn handle_fd(&self, fh: u64, ino: u64, flags: i32) -> Result<i32, Errno> {
        if let Some(fd) = self.file_fd(fh) {
            return Ok(fd);
        }
        if fh >= self.first_fh {
            return Err(Errno::EBADF);
        }
        let (dir, name) = self.nodes().at(ino).ok_or(Errno::ESTALE)?;
        let flags = flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC | libc::O_NOCTTY);
        let file = sys::open_at(dir.as_raw_fd(), &name, flags, 0).map_err(io_errno)?;
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        let open = files.entry(fh).or_insert(OpenFile {
            file: Some(file),
            ino,
            passthrough: false,
        });
        open.file
            .as_ref()
            .map(|f| f.as_raw_fd())
            .ok_or(Errno::EBADF)
    }

    /// When renaming `name` in `parent` to `to` puts a file in place that
    /// an outside-the-sandbox guard judges by content (`.git/config`),
    /// and that file's bytes are inert (`policy::outside::gitconfig`):
    /// the path to place without the floor. `None` (judged as any rename,
    /// so the floor asks) for anything else, and whenever the content
    /// could change after it was read: a source that is not one regular
    /// file with one link, or that a handle of this view holds open for
    /// writing (one with no descriptor of its own counts as writing).
    fn inert_placement(&self, parent: u64, name: &OsStr, to: &Path) -> Option<Vec<String>> {
        use std::io::Read;
        let to_text = path_text(to);
        let guards = self.authority.outside_guards(&self.session)?;
        let (met, _) = crate::policy::outside::content_guard(&guards, &to_text)?;
        let (dir, node) = {
            let nodes = self.nodes();
            (nodes.dir(parent)?, nodes.child(parent, name))
        };
        let file =
            sys::open_at(dir.as_raw_fd(), name, libc::O_RDONLY | libc::O_NONBLOCK, 0).ok()?;
        let st = sys::stat_fd(file.as_raw_fd()).ok()?;
        let max = crate::policy::outside::gitconfig::MAX_BYTES as u64;
        let regular = st.st_mode & libc::S_IFMT == libc::S_IFREG;
        if !regular || st.st_nlink != 1 || st.st_size as u64 > max {
            tracing::info!(session = %self.session, path = %to_text, "view: a file put in a guarded place is not one small regular file: the floor asks");
            return None;
        }
        let writers = self.files.lock().map_or(true, |files| {
            files.values().any(|open| match &open.file {
                Some(fd) => {
                    let same = sys::stat_fd(fd.as_raw_fd())
                        .is_ok_and(|o| (o.st_dev, o.st_ino) == (st.st_dev, st.st_ino));
                    same && sys::access_mode(fd.as_raw_fd()).map_or(true, |m| m != libc::O_RDONLY)
                }
                None => Some(open.ino) == node,
            })
        });
        if writers {
            tracing::info!(session = %self.session, path = %to_text, "view: a file put in a guarded place is still open for writing: the floor asks");
            return None;
        }
        let mut bytes = Vec::new();
        std::fs::File::from(file)
            .take(max + 1)
            .read_to_end(&mut bytes)
            .ok()?;
        match crate::policy::outside::gitconfig::judge(&bytes) {
            Ok(()) => Some(vec![to_text]),
            Err(found) => {
                tracing::info!(session = %self.session, path = %to_text, guard = %met.name, ?found, "view: content that runs outside the sandbox: the floor asks");
                None
            }
        }
    }

    fn file_fd(&self, fh: u64) -> Option<i32> {
        self.files.lock().ok().and_then(|f| {
            f.get(&fh)
                .and_then(|o| o.file.as_ref().map(|f| f.as_raw_fd()))
        })
    }
}

impl Filesystem for ViewFs {
    fn init(&mut self, _req: &Request, config: &mut fuser::KernelConfig) -> std::io::Result<()> {
        let _ = config.add_capabilities(fuser::InitFlags::FUSE_PARALLEL_DIROPS);
        // PERMFS_VIEW_NO_PASSTHROUGH=1 serves file I/O through the daemon
        // even where passthrough works: what an unprivileged daemon gets,
        // measured and tested on a kernel that has it.
        let refused = std::env::var_os("PERMFS_VIEW_NO_PASSTHROUGH").is_some_and(|v| v == "1");
        let passthrough = !refused
            && config
                .add_capabilities(fuser::InitFlags::FUSE_PASSTHROUGH)
                .is_ok()
            && config.set_max_stack_depth(2).is_ok();
        self.inner.passthrough.store(passthrough, Ordering::Relaxed);
        if !passthrough {
            tracing::warn!(
                "view: the kernel offers no FUSE passthrough; file I/O is served by the daemon"
            );
        }
        Ok(())
    }

    fn interrupt(&self, _req: &Request, unique: fuser::RequestId, reply: ReplyEmpty) {
        self.inner.interrupt(unique.into());
        reply.ok();
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if !is_plain_name(name) {
            return reply.error(Errno::ENOENT);
        }
        match self.inner.lookup_at(parent.0, name) {
            Ok(attr) => reply.entry(&self.inner.ttl(), &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        let (gone, shrunk) = {
            let mut nodes = self.inner.nodes();
            let shrunk = nodes.forget(ino.0, nlookup);
            (nodes.path(ino.0).is_none(), shrunk)
        };
        if gone {
            self.inner.forget_backing(ino.0);
        }
        if shrunk {
            self.inner.trim_due.store(true, Ordering::Relaxed);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        if let Some(fd) = fh.and_then(|fh| self.inner.file_fd(fh.0)) {
            return match sys::stat_fd(fd) {
                Ok(st) => reply.attr(&self.inner.ttl(), &attr(ino.0, &st)),
                Err(e) => reply.error(io_errno(e)),
            };
        }
        match self.inner.getattr_of(ino.0) {
            Ok(attr) => reply.attr(&self.inner.ttl(), &attr),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let path = match self.inner.path_of(ino.0) {
            Ok(path) => path,
            Err(e) => return reply.error(e),
        };
        let ino = ino.0;
        let fh = fh.map(|f| f.0);
        self.inner.judged(
            req,
            vec![(path, Access::Write)],
            Box::new(move |inner, verdict| {
                if let Err(e) = verdict {
                    return reply.error(e);
                }
                let result = (|| -> Result<FileAttr, Errno> {
                    let fd = inner.node_fd(ino)?;
                    if let Some(mode) = mode {
                        sys::chmod_fd(&fd, mode & 0o7777).map_err(io_errno)?;
                    }
                    if uid.is_some() || gid.is_some() {
                        sys::chown_fd(&fd, uid.unwrap_or(u32::MAX), gid.unwrap_or(u32::MAX))
                            .map_err(io_errno)?;
                    }
                    if let Some(size) = size {
                        match fh.and_then(|fh| inner.file_fd(fh)) {
                            Some(file) => sys::ftruncate(file, size).map_err(io_errno)?,
                            None => sys::truncate_fd(&fd, size).map_err(io_errno)?,
                        }
                    }
                    if atime.is_some() || mtime.is_some() {
                        let spec = |t: Option<TimeOrNow>| match t {
                            None => libc::timespec {
                                tv_sec: 0,
                                tv_nsec: libc::UTIME_OMIT,
                            },
                            Some(TimeOrNow::Now) => libc::timespec {
                                tv_sec: 0,
                                tv_nsec: libc::UTIME_NOW,
                            },
                            Some(TimeOrNow::SpecificTime(t)) => {
                                let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
                                libc::timespec {
                                    tv_sec: d.as_secs() as libc::time_t,
                                    tv_nsec: d.subsec_nanos() as libc::c_long,
                                }
                            }
                        };
                        sys::utimens_fd(&fd, [spec(atime), spec(mtime)]).map_err(io_errno)?;
                    }
                    let st = sys::stat_fd(fd.as_raw_fd()).map_err(io_errno)?;
                    Ok(attr(ino, &st))
                })();
                match result {
                    Ok(attr) => reply.attr(&inner.ttl(), &attr),
                    Err(e) => reply.error(e),
                }
            }),
        );
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let Some((dir, name)) = self.inner.nodes().at(ino.0) else {
            return reply.error(Errno::ENOENT);
        };
        match sys::readlink_at(dir.as_raw_fd(), &name) {
            Ok(target) => reply.data(&target),
            Err(e) => reply.error(io_errno(e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let name = name.to_os_string();
        self.make(req, parent.0, name.clone(), reply, move |dir| {
            sys::mknod_at(dir, &name, mode & !umask, rdev)
        });
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let name = name.to_os_string();
        // `git init` makes `.git` and `.git/hooks`: a directory made there
        // is not a program (what is put in it is judged on its own).
        let _scope = crate::policy::outside::enter(crate::policy::outside::Scope::DirectoryOnly);
        self.make(req, parent.0, name.clone(), reply, move |dir| {
            sys::mkdir_at(dir, &name, mode & !umask)
        });
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let name = link_name.to_os_string();
        let target = target.as_os_str().to_os_string();
        self.make(req, parent.0, name.clone(), reply, move |dir| {
            sys::symlink_at(&target, dir, &name)
        });
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        // Removing a name runs nothing: a guarded directory's own name is
        // not floored (a hook file in it still is).
        let _scope = crate::policy::outside::enter(crate::policy::outside::Scope::DirectoryOnly);
        self.remove(req, parent.0, name, 0, reply);
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _scope = crate::policy::outside::enter(crate::policy::outside::Scope::DirectoryOnly);
        self.remove(req, parent.0, name, libc::AT_REMOVEDIR, reply);
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        // Every name the rename moves is judged, beneath a directory too
        // (`moves.rs`): `mv private pub` is `cp -r` plus `rm -r`.
        let op = RenameOp {
            parent: parent.0,
            name: name.to_os_string(),
            newparent: newparent.0,
            newname: newname.to_os_string(),
            flags: flags.bits(),
        };
        self.inner
            .rename_step(Caller::of(req), op, Approved::new(), 0, reply);
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let (from, to) = match (
            self.inner.path_of(ino.0),
            self.inner.child_path(newparent.0, newname),
        ) {
            (Ok(from), Ok(to)) => (from, to),
            (Err(e), _) | (_, Err(e)) => return reply.error(e),
        };
        let newname = newname.to_os_string();
        let (ino, newparent) = (ino.0, newparent.0);
        // A new name for a file is a way to reach it: both the old name
        // (read and write: the link gives both) and the new are judged.
        self.inner.judged(
            req,
            vec![
                (from.clone(), Access::Read),
                (from, Access::Write),
                (to.clone(), Access::Write),
            ],
            Box::new(move |inner, verdict| {
                if let Err(e) = verdict {
                    return reply.error(e);
                }
                let result = (|| -> Result<FileAttr, Errno> {
                    let _made = inner.still_at(newparent, &newname, &to)?;
                    inner.room_for(newparent, &newname)?;
                    let fd = inner.node_fd(ino)?;
                    let dir = inner.nodes().dir(newparent).ok_or(Errno::ENOENT)?;
                    sys::link_fd(&fd, dir.as_raw_fd(), &newname).map_err(io_errno)?;
                    inner.lookup_at(newparent, &newname)
                })();
                match result {
                    Ok(attr) => reply.entry(&inner.ttl(), &attr, Generation(0)),
                    Err(e) => reply.error(e),
                }
            }),
        );
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let path = match self.inner.path_of(ino.0) {
            Ok(path) => path,
            Err(e) => return reply.error(e),
        };
        let flags = flags.0;
        let accesses = open_accesses(flags)
            .into_iter()
            .map(|a| (path.clone(), a))
            .collect();
        let ino = ino.0;
        let writes = flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0;
        self.inner.judged(
            req,
            accesses,
            Box::new(move |inner, verdict| {
                if let Err(e) = verdict {
                    return reply.error(e);
                }
                // An open that may write holds the namespace lock's shared
                // side until its handle is recorded, at the name it was
                // judged at: a rename that places content by what it holds
                // (`inert_placement`) sees every writer, and no writer
                // judged at `config.lock` opens what is now `.git/config`.
                let _writing = if writes {
                    let guard = inner.namespace.read().unwrap_or_else(|p| p.into_inner());
                    if inner.nodes().path(ino).as_ref() != Some(&path) {
                        tracing::info!(session = %inner.session, path = %path.display(), "view: the file moved while its open was judged: refused");
                        return reply.error(Errno::EACCES);
                    }
                    Some(guard)
                } else {
                    None
                };
                if inner.passthrough.load(Ordering::Relaxed) {
                    // SAFETY: as in `finish_open`.
                    if let Some(id) =
                        inner.kept_backing(ino, |raw| unsafe { reply.wrap_backing(raw) })
                    {
                        let fh = inner.fh();
                        inner.files_insert(fh, None, ino, true);
                        return reply.opened_passthrough(FileHandle(fh), FopenFlags::empty(), &id);
                    }
                }
                let Some((dir, name)) = inner.nodes().at(ino) else {
                    return reply.error(Errno::ENOENT);
                };
                let open_flags = flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_NOCTTY);
                match sys::open_at(dir.as_raw_fd(), &name, open_flags, 0) {
                    Ok(file) => inner.finish_open(ino, file, reply),
                    Err(e) => reply.error(io_errno(e)),
                }
            }),
        );
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let path = match self.inner.child_path(parent.0, name) {
            Ok(path) => path,
            Err(e) => return reply.error(e),
        };
        let mut accesses = vec![(path.clone(), Access::Write)];
        if flags & libc::O_ACCMODE == libc::O_RDWR {
            accesses.push((path.clone(), Access::Read));
        }
        let name = name.to_os_string();
        let parent = parent.0;
        let uid = req.uid();
        let gid = req.gid();
        self.inner.judged(
            req,
            accesses,
            Box::new(move |inner, verdict| {
                if let Err(e) = verdict {
                    return reply.error(e);
                }
                let _made = match inner.still_at(parent, &name, &path) {
                    Ok(made) => made,
                    Err(e) => return reply.error(e),
                };
                if let Err(e) = inner.room_for(parent, &name) {
                    return reply.error(e);
                }
                let Some(dir) = inner.nodes().dir(parent) else {
                    return reply.error(Errno::ENOENT);
                };
                let file = match sys::open_at(
                    dir.as_raw_fd(),
                    &name,
                    flags | libc::O_CREAT,
                    mode & !umask,
                ) {
                    Ok(file) => file,
                    Err(e) => return reply.error(io_errno(e)),
                };
                if inner.give_to_caller && uid != 0 {
                    if let Err(error) = sys::chown_fd(&file, uid, gid) {
                        tracing::warn!(%error, "view: a new file could not be given to its creator");
                    }
                }
                let attr = match inner.lookup_at(parent, &name) {
                    Ok(attr) => attr,
                    Err(e) => return reply.error(e),
                };
                let ino = attr.ino.0;
                let fh = inner.fh();
                if inner.passthrough.load(Ordering::Relaxed) {
                    let opened = inner.backing(
                        ino,
                        &file,
                        |fd| reply.open_backing(fd).map(BackingId::into_raw),
                        // SAFETY: as in `finish_open`.
                        |raw| unsafe { reply.wrap_backing(raw) },
                    );
                    match opened {
                        Ok(id) => {
                            inner.files_insert(fh, Some(file), ino, true);
                            return reply.created_passthrough(
                                &inner.ttl(),
                                &attr,
                                Generation(0),
                                FileHandle(fh),
                                FopenFlags::empty(),
                                &id,
                            );
                        }
                        Err(error) => inner.fall_back(error),
                    }
                }
                inner.files_insert(fh, Some(file), ino, false);
                reply.created(&inner.ttl(), &attr, Generation(0), FileHandle(fh), FopenFlags::empty())
            }),
        );
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let fd = match self.inner.handle_fd(fh.0, ino.0, flags.0) {
            Ok(fd) => fd,
            Err(e) => return reply.error(e),
        };
        match sys::pread(fd, size as usize, offset) {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(io_errno(e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let fd = match self.inner.handle_fd(fh.0, ino.0, flags.0) {
            Ok(fd) => fd,
            Err(e) => return reply.error(e),
        };
        match sys::pwrite(fd, data, offset) {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(io_errno(e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // Writes are never buffered here: nothing to flush, and ENOSYS
        // tells the kernel not to send a FLUSH at every close again.
        reply.error(Errno::ENOSYS);
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.inner.release_file(fh.0);
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        let result = self
            .inner
            .fd_of(fh.0, ino.0, libc::O_RDONLY)
            .and_then(|(_held, fd)| sys::fsync(fd, datasync).map_err(io_errno));
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    /// `ENOSYS`: the kernel then opens directories without asking (no
    /// `OPENDIR`/`RELEASEDIR` round trips) and keeps their listings in its
    /// page cache (`FOPEN_CACHE_DIR | FOPEN_KEEP_CACHE`, its default for a
    /// server without `opendir`) until the directory changes. A listing is
    /// judged when it is read from here (`readdir`), as a read of the
    /// directory; one the kernel serves from its cache shows names it was
    /// already allowed to show.
    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.error(Errno::ENOSYS);
    }

    fn readdir(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        let path = match self.inner.path_of(ino.0) {
            Ok(path) => path,
            Err(e) => return reply.error(e),
        };
        let ino = ino.0;
        let listed = path.clone();
        self.inner.judged(
            req,
            vec![(path, Access::Read)],
            Box::new(move |inner, verdict| {
                if let Err(e) = verdict {
                    return reply.error(e);
                }
                let Some(dir) = inner.nodes().dir(ino) else {
                    return reply.error(Errno::ENOTDIR);
                };
                match list(&dir) {
                    Ok(mut listing) => {
                        // What a lookup would not find is not listed.
                        listing.retain(|(name, _, _)| {
                            !super::hidden::is_hidden_path(&listed.join(name))
                        });
                        fill(reply, INodeNo(ino), offset, &listing)
                    }
                    Err(e) => reply.error(io_errno(e)),
                }
            }),
        );
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let Some(dir) = self.inner.nodes().dir(ROOT) else {
            return reply.error(Errno::EIO);
        };
        match sys::statfs(dir.as_raw_fd()) {
            Ok(st) => reply.statfs(
                st.f_blocks,
                st.f_bfree,
                st.f_bavail,
                st.f_files,
                st.f_ffree,
                st.f_bsize as u32,
                st.f_namemax as u32,
                st.f_frsize as u32,
            ),
            Err(e) => reply.error(io_errno(e)),
        }
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let (name, value) = (name.to_os_string(), value.to_vec());
        self.write_node(req, ino.0, reply, move |fd| {
            sys::set_xattr(fd, &name, &value, flags)
        });
    }

    /// The view shows no extended attributes. `ENOSYS` makes the kernel
    /// stop asking for good: otherwise every write first asks for
    /// `security.capability` (to drop it), a round trip per `write(2)`,
    /// and a binary in the workspace could carry file capabilities into
    /// the sandbox. Setting and removing them is still judged (a write).
    fn getxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _size: u32,
        reply: ReplyXattr,
    ) {
        reply.error(Errno::ENOSYS);
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, _size: u32, reply: ReplyXattr) {
        reply.error(Errno::ENOSYS);
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = name.to_os_string();
        self.write_node(req, ino.0, reply, move |fd| sys::remove_xattr(fd, &name));
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let result = self
            .inner
            .fd_of(fh.0, ino.0, libc::O_WRONLY)
            .and_then(|(_held, fd)| sys::fallocate(fd, mode, offset, length).map_err(io_errno));
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}

impl ViewFs {
    /// setxattr, removexattr: a write of the node's name, then `change`
    /// on an `O_PATH` descriptor of it.
    fn write_node(
        &self,
        req: &Request,
        ino: u64,
        reply: ReplyEmpty,
        change: impl FnOnce(&OwnedFd) -> std::io::Result<()> + Send + 'static,
    ) {
        let path = match self.inner.path_of(ino) {
            Ok(path) => path,
            Err(e) => return reply.error(e),
        };
        self.inner.judged(
            req,
            vec![(path, Access::Write)],
            Box::new(move |inner, verdict| {
                let result = verdict.and_then(|()| change(&inner.node_fd(ino)?).map_err(io_errno));
                match result {
                    Ok(()) => reply.ok(),
                    Err(e) => reply.error(e),
                }
            }),
        );
    }

    /// mknod, mkdir, symlink: a write of the new name, then `make`.
    fn make(
        &self,
        req: &Request,
        parent: u64,
        name: OsString,
        reply: ReplyEntry,
        make: impl FnOnce(i32) -> std::io::Result<()> + Send + 'static,
    ) {
        let path = match self.inner.child_path(parent, &name) {
            Ok(path) => path,
            Err(e) => return reply.error(e),
        };
        let (uid, gid) = (req.uid(), req.gid());
        self.inner.judged(
            req,
            vec![(path.clone(), Access::Write)],
            Box::new(move |inner, verdict| {
                if let Err(e) = verdict {
                    return reply.error(e);
                }
                let _made = match inner.still_at(parent, &name, &path) {
                    Ok(made) => made,
                    Err(e) => return reply.error(e),
                };
                if let Err(e) = inner.room_for(parent, &name) {
                    return reply.error(e);
                }
                let Some(dir) = inner.nodes().dir(parent) else {
                    return reply.error(Errno::ENOENT);
                };
                if let Err(e) = make(dir.as_raw_fd()) {
                    return reply.error(io_errno(e));
                }
                inner.give((uid, gid), &dir, &name);
                match inner.lookup_at(parent, &name) {
                    Ok(attr) => reply.entry(&inner.ttl(), &attr, Generation(0)),
                    Err(e) => reply.error(e),
                }
            }),
        );
    }

    /// unlink, rmdir: a write of the name.
    fn remove(&self, req: &Request, parent: u64, name: &OsStr, flags: i32, reply: ReplyEmpty) {
        let path = match self.inner.child_path(parent, name) {
            Ok(path) => path,
            Err(e) => return reply.error(e),
        };
        let name = name.to_os_string();
        self.inner.judged(
            req,
            vec![(path, Access::Write)],
            Box::new(move |inner, verdict| {
                if let Err(e) = verdict {
                    return reply.error(e);
                }
                let Some(dir) = inner.nodes().dir(parent) else {
                    return reply.error(Errno::ENOENT);
                };
                match sys::unlink_at(dir.as_raw_fd(), &name, flags) {
                    Ok(()) => {
                        inner.nodes().unlinked(parent, &name);
                        reply.ok()
                    }
                    Err(e) => reply.error(io_errno(e)),
                }
            }),
        );
    }
}

/// Hands the allocator's free memory back to the kernel. glibc's malloc
/// keeps what a burst of small allocations freed (the view's nodes, names
/// and paths) in its arenas, one per thread that allocated, and gives
/// little of it back by itself; `malloc_trim(0)` releases every free page.
/// Called only after a large table or cache went (it walks the heap).
pub(super) fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free pages of the allocator's own
    // arenas; it is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Answers a `readdir` at `offset` from `listing`: `.` and `..` are
/// offsets 1 and 2, the entries follow (offsets count from a fresh
/// listing, as the real directory's order is stable while it is unchanged).
fn fill(mut reply: ReplyDirectory, ino: INodeNo, offset: u64, listing: &Listing) {
    let mut index = offset as usize;
    if index == 0 {
        if reply.add(ino, 1, FileType::Directory, ".") {
            return reply.ok();
        }
        index = 1;
    }
    if index == 1 {
        if reply.add(ino, 2, FileType::Directory, "..") {
            return reply.ok();
        }
        index = 2;
    }
    for (i, (name, kind, backing_ino)) in listing.iter().enumerate().skip(index - 2) {
        if reply.add(INodeNo(*backing_ino), (i + 3) as u64, *kind, name) {
            break;
        }
    }
    reply.ok()
}

/// A directory's entries (without `.` and `..`), read from a fresh
/// descriptor of it.
fn list(dir: &OwnedFd) -> std::io::Result<Listing> {
    let path = format!("/proc/self/fd/{}", dir.as_raw_fd());
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(path)? {
        let entry = entry?;
        let kind = match entry.file_type() {
            Ok(t) if t.is_dir() => FileType::Directory,
            Ok(t) if t.is_symlink() => FileType::Symlink,
            Ok(t) if t.is_file() => FileType::RegularFile,
            Ok(_) => FileType::NamedPipe,
            Err(_) => FileType::RegularFile,
        };
        entries.push((entry.file_name(), kind, entry.ino()));
    }
    Ok(entries)
}
