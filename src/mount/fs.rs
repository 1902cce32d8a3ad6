//! The FUSE adapter: file operations translated into [`Authority`] calls.
//!
//! A blocked read of a response parks its `ReplyData` in a slot that the
//! answer (or the kernel's interrupt) takes, so no thread waits per asker.

use super::caller::Namespaces;
use super::drafts::{AwaitingRead, Draft, Drafts, EarlyRead, Raising, ReadAt, Submit, Written};
use super::nodes::{Folder, Inodes, Node, Owner, ResponseIo};
use super::parking::{Parked, ParkedRead, Woken};
use crate::facts::request::Request as AskRequest;
use crate::session::ask::{serial_of, Response};
use crate::session::control::ControlCommand;
use crate::session::pi_view::PiViews;
use crate::session::review::JudgeReader;
use crate::session::{Authority, AuthorityError, Caller, SpawnSpec};
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenFlags, PollEvents, PollFlags, PollNotifier, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyPoll, ReplyWrite, Request, WriteFlags,
};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// How long the kernel may cache the name and attributes of the tree's
/// fixed directories and files: this spares a lookup per path component.
/// What comes and goes (outbox names, inbox entries, grants, judges, the
/// pi view's entries) is never cached, so `test -e` on it is always
/// current and every lookup of it is checked by the daemon. Every operation re-checks that its node
/// exists, so an ended session's cached name leads only to ENOENT; file
/// contents are never cached (direct I/O).
const STRUCTURE_TTL: Duration = Duration::from_secs(1);

fn ttl(node: &Node) -> Duration {
    match node {
        // Names in an outbox are never cached: every lookup of one comes
        // to the daemon, which checks the caller may look inside (the
        // kernel's mode check is not used; see `check_search`). An
        // exchange is also forgotten at close, and a cached name would
        // make the next `O_CREAT|O_EXCL` of it fail in the kernel.
        Node::Exchange(..)
        | Node::Request(..)
        | Node::Response(..)
        // The pi view's entries come and go as asks are answered; pi
        // polls them by `stat`, which must always see the present.
        | Node::PiTarget(..)
        | Node::PiFolder(..)
        | Node::PiRequest(..)
        | Node::PiResponse(..)
        | Node::InboxItem(..)
        | Node::Grant(..)
        | Node::JudgeDir(_)
        | Node::JudgeNext(_)
        | Node::JudgeVerdict(_)
        | Node::JudgeLease(_) => Duration::ZERO,
        _ => STRUCTURE_TTL,
    }
}

/// How long the kernel may keep a node's attributes. A decided response
/// never changes, so its size (the answer's length) is cached like the
/// tree's: a read through the page cache then ends at that size without
/// another `READ` or `GETATTR` (see `open`). An undecided one (size 0) is
/// never cached, so the kernel asks again once it is decided.
fn attr_ttl(node: &Node, attr: &FileAttr) -> Duration {
    match node {
        Node::Response(..) if attr.size > 0 => STRUCTURE_TTL,
        _ => ttl(node),
    }
}

pub const README_TEXT: &str = include_str!("README.mount.txt");

/// A directory listing: (name, kind, inode number).
type Listing = Vec<(String, FileType, u64)>;

/// The text a `query` handle shows before anything was written to it.
const QUERY_HELP: &[u8] = b"write a request here and read the verdict on the same descriptor \
(exec 3<> query; echo '{...}' >&3; cat <&3): each open file keeps its own dry run\n";

/// What a read-only handle on `ask` shows.
const ASK_HELP: &[u8] =
    b"open read-write, write a request, read the answer on the same descriptor \
(exec 3<> ask; echo '{...}' >&3; cat <&3; exec 3<&-): each open is an ask of its own, \
shown in outbox/ as ask-<n> while it waits, forgotten at close\n";

/// A dry-run answer kept for one open `query` file. Reads are counted
/// from where the first read after the write started, so `cat <&3` after
/// `echo … >&3` (whose offset is past the written request) sees it whole.
#[derive(Debug)]
struct QueryAnswer {
    bytes: Vec<u8>,
    read_base: Option<u64>,
}

/// Removes what a handle-keyed table holds for `fh`.
fn take<V>(table: &Mutex<HashMap<u64, V>>, fh: u64) -> Option<V> {
    table.lock().ok().and_then(|mut map| map.remove(&fh))
}

pub struct PermFs {
    authority: Arc<Authority>,
    inodes: Arc<Inodes>,
    uid: u32,
    gid: u32,
    started: SystemTime,
    next_fh: AtomicU64,
    /// Numbers the asks made through `ask` files (`ask-<n>`).
    next_ask: AtomicU64,
    drafts: Mutex<Drafts>,
    /// Open response handles opened with O_NONBLOCK.
    nonblocking: Mutex<HashMap<u64, bool>>,
    /// Where an exchange's first read started: its answer is read from
    /// there (the file offset is past the request just written).
    exchange_base: Mutex<HashMap<u64, u64>>,
    /// The answer a response handle has served, so the reader can finish
    /// reading it even after its session ended.
    served: Arc<Mutex<HashMap<u64, Arc<Response>>>>,
    /// The review a judge's `next` handle was given.
    judge_payloads: Arc<Mutex<HashMap<u64, Vec<u8>>>>,
    /// Open `lease` handles → judge name.
    leases: Mutex<HashMap<u64, String>>,
    /// `ctl` handles → the sessions spawned through them with `lease`
    /// (id and serial), ended when the handle closes.
    session_leases: Mutex<HashMap<u64, Vec<(String, u64)>>>,
    /// Open `events` handles → (session, cursor).
    event_cursors: Mutex<HashMap<u64, (String, crate::session::events::Cursor)>>,
    /// Directory listings taken at `opendir`, by handle.
    listings: Mutex<HashMap<u64, Listing>>,
    /// `pending` snapshots by handle, taken at open for the opener.
    snapshots: Mutex<HashMap<u64, Vec<u8>>>,
    /// Dry-run answers by `query` handle.
    queries: Mutex<HashMap<u64, QueryAnswer>>,
    /// Where the audit log is, for `audit.log`.
    audit_path: Option<std::path::PathBuf>,
    /// The daemon's mount namespace, to tell sandboxed callers apart.
    namespaces: Namespaces,
    /// Every session's pi-compatible forwarding view (`pi/`).
    pi: PiViews,
    /// Open pi request handles that may write: only their close asks.
    pi_writers: Mutex<std::collections::HashSet<u64>>,
    pub parked: Parked,
    /// Readers a decision woke that have not closed yet (see
    /// [`super::parking::pace_release`]).
    pub woken: Woken,
    /// Sends notifications to the kernel (set once the session exists).
    pub notifier: Arc<std::sync::OnceLock<fuser::Notifier>>,
    /// Page fills under way, and how many may be at once (see
    /// [`Self::fill_pages`]).
    fills: AtomicUsize,
    max_fills: usize,
}

fn errno(error: &AuthorityError) -> Errno {
    match error {
        AuthorityError::NotFound(_) => Errno::ENOENT,
        AuthorityError::Exists(_) => Errno::EEXIST,
        AuthorityError::Invalid(_) => Errno::EINVAL,
        AuthorityError::PermissionDenied(_) => Errno::EACCES,
        AuthorityError::AlreadyDecided(_) => Errno::EALREADY,
        AuthorityError::TooLarge => Errno::EFBIG,
        AuthorityError::NotEmpty(_) => Errno::ENOTEMPTY,
        AuthorityError::Full(_) => Errno::ENOSPC,
        AuthorityError::AuditUnavailable(_, code) => Errno::from_i32(*code),
    }
}

fn slice(content: &[u8], offset: u64, size: u32) -> &[u8] {
    let start = (offset as usize).min(content.len());
    let end = start.saturating_add(size as usize).min(content.len());
    &content[start..end]
}

impl PermFs {
    /// The filesystem for `workers` FUSE worker threads.
    pub fn new(
        authority: Arc<Authority>,
        audit_path: Option<std::path::PathBuf>,
        workers: usize,
    ) -> Self {
        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        // A forgotten ask's files leave the inode table too.
        let inodes = Arc::new(Inodes::default());
        let retire = Arc::clone(&inodes);
        authority.on_forget(Arc::new(move |session: &str, rid: &str| {
            retire.retire_ask(session, rid)
        }));
        Self {
            pi: PiViews::new(Arc::clone(&authority)),
            pi_writers: Mutex::new(std::collections::HashSet::new()),
            authority,
            inodes,
            uid,
            gid,
            started: SystemTime::now(),
            next_fh: AtomicU64::new(1),
            next_ask: AtomicU64::new(1),
            drafts: Mutex::new(Drafts::default()),
            nonblocking: Mutex::new(HashMap::new()),
            exchange_base: Mutex::new(HashMap::new()),
            served: Arc::new(Mutex::new(HashMap::new())),
            judge_payloads: Arc::new(Mutex::new(HashMap::new())),
            leases: Mutex::new(HashMap::new()),
            session_leases: Mutex::new(HashMap::new()),
            event_cursors: Mutex::new(HashMap::new()),
            audit_path,
            queries: Mutex::new(HashMap::new()),
            snapshots: Mutex::new(HashMap::new()),
            namespaces: Namespaces::of_daemon(),
            listings: Mutex::new(HashMap::new()),
            parked: Arc::default(),
            woken: Arc::new(Mutex::new(std::collections::HashSet::new())),
            notifier: Arc::default(),
            fills: AtomicUsize::new(0),
            max_fills: workers.saturating_sub(1).max(1),
        }
    }

    fn session_exists(&self, id: &str) -> bool {
        self.authority.with_tree(|t| t.get(id).is_some())
    }

    /// Does this node still exist?
    fn exists(&self, node: &Node) -> bool {
        match node {
            Node::Root | Node::Readme | Node::SessionsDir | Node::JudgesDir => true,
            Node::AuditLog => self.audit_path.is_some(),
            Node::JudgeDir(j)
            | Node::JudgeNext(j)
            | Node::JudgeVerdict(j)
            | Node::JudgeLease(j) => self.authority.attached_judges().contains(j),
            Node::Request(s, r) | Node::Response(s, r) | Node::Exchange(s, r) => {
                self.authority.outbox_contains(s, r) || self.draft_exists(s, r)
            }
            Node::InboxItem(s, a) => self.authority.is_pending_at(s, a),
            Node::Grant(s, g) => self.authority.has_grant(s, g),
            Node::PiTarget(s, t) => self.pi.has_target(s, t),
            Node::PiFolder(s, t, f) => self.pi.has_folder(s, t, *f),
            Node::PiRequest(s, t, n) => self.pi.has_request(s, t, n),
            Node::PiResponse(s, t, n) => self.pi.has_response(s, t, n),
            // A session's fixed files and directories live as long as it.
            other => other.session().is_some_and(|s| self.session_exists(s)),
        }
    }

    /// Opening `ask` read-write starts an exchange under a name of the
    /// daemon's choosing (`ask-<n>`, never one the outbox holds). Read-only,
    /// the handle shows how to use the file; write-only could never read
    /// its answer, so it is refused.
    fn open_ask(&self, session: &str, fh: u64, flags: i32, reply: ReplyOpen) {
        let open_flags = FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_NOFLUSH;
        match flags & libc::O_ACCMODE {
            libc::O_RDONLY => return reply.opened(FileHandle(fh), open_flags),
            libc::O_WRONLY => return reply.error(Errno::EINVAL),
            _ => {}
        }
        let Ok(mut drafts) = self.drafts.lock() else {
            return reply.error(Errno::EIO);
        };
        let rid = loop {
            let n = self.next_ask.fetch_add(1, Ordering::Relaxed);
            let rid = format!("ask-{n}");
            let taken =
                self.authority.outbox_contains(session, &rid) || drafts.has_name(session, &rid);
            if !taken {
                break rid;
            }
        };
        drafts.insert(fh, Draft::new(session, &rid, true));
        drop(drafts);
        if let Ok(mut map) = self.nonblocking.lock() {
            map.insert(fh, flags & libc::O_NONBLOCK != 0);
        }
        reply.opened(FileHandle(fh), open_flags)
    }

    /// Raises an exchange's request that a write completed (the write is
    /// already answered), then serves whoever came meanwhile: readers get
    /// the answer (or why there is none), pollers are woken, and a
    /// descriptor closed meanwhile has its ask withdrawn.
    fn raise_written(&self, fh: u64, session: &str, rid: &str, parsed: Result<AskRequest, String>) {
        let failure = match self.raise(fh, session, rid, parsed) {
            Ok(()) | Err(Errno::EINVAL) => None,
            Err(error) => Some(error),
        };
        let raising = {
            let Ok(mut drafts) = self.drafts.lock() else {
                return;
            };
            let raising = drafts.get_mut(&fh).and_then(|d| d.raising.take());
            if raising.as_ref().is_some_and(|r| r.closed) {
                drafts.remove(&fh);
            }
            raising.unwrap_or_default()
        };
        if raising.closed {
            let _ = self.authority.withdraw(session, rid);
            self.forget_handle(fh);
        }
        for early in raising.readers {
            match failure {
                Some(error) => early.reply.error(error),
                None => self.read_answer(early.at, session, rid, early.reply),
            }
        }
        for poller in raising.pollers {
            let _ = poller.notify();
        }
    }

    /// A read of an exchange whose ask is still being raised waits for the
    /// raise (or is told `EAGAIN` when non-blocking); otherwise the reply
    /// is handed back.
    fn wait_for_raise(&self, at: ReadAt, reply: ReplyData) -> Option<ReplyData> {
        let Ok(mut drafts) = self.drafts.lock() else {
            reply.error(Errno::EIO);
            return None;
        };
        let Some(raising) = drafts.get_mut(&at.fh).and_then(|d| d.raising.as_mut()) else {
            return Some(reply);
        };
        if self.is_nonblocking(at.fh) {
            reply.error(Errno::EAGAIN);
        } else {
            raising.readers.push(EarlyRead { at, reply });
        }
        None
    }

    /// Drops what the daemon kept for an open handle (its answer, cursor,
    /// snapshot, lease...): the handle was closed.
    fn forget_handle(&self, fh: u64) {
        if let Ok(mut woken) = self.woken.lock() {
            woken.remove(&fh);
        }
        take(&self.exchange_base, fh);
        take(&self.nonblocking, fh);
        take(&self.served, fh);
        take(&self.judge_payloads, fh);
        take(&self.event_cursors, fh);
        take(&self.queries, fh);
        take(&self.snapshots, fh);
        if let Some(name) = take(&self.leases, fh) {
            self.authority.judge_lease_closed(&name);
        }
        for (id, serial) in take(&self.session_leases, fh).unwrap_or_default() {
            if self.authority.end_leased(&id, serial) {
                tracing::info!(session = %id, "its spawning handle closed: ended (lease)");
            }
        }
    }

    /// Whether handle `fh` was opened `O_NONBLOCK` (response and exchange
    /// handles are noted at open).
    fn is_nonblocking(&self, fh: u64) -> bool {
        self.nonblocking
            .lock()
            .ok()
            .and_then(|m| m.get(&fh).copied())
            .unwrap_or(false)
    }

    /// Puts `response` in the kernel's pages of response inode `ino`
    /// (dropping another ask's first when `stale`), so its reader costs
    /// no `READ`. Whether the pages now hold the answer and nothing else.
    ///
    /// Filling takes each page's lock, and a handle reading a page in
    /// holds it until its `READ` is answered. `Inodes::open_response`
    /// asks for a fill only while no handle is open, but a handle opened
    /// during the fill (a private mapping of a direct one) can still read
    /// a page in, and only another worker can answer that `READ`. So one
    /// worker is always left out of filling: with one worker no other open
    /// is served during a fill, with more at most all but one fill at once.
    fn fill_pages(&self, ino: INodeNo, ask: u64, stale: bool, response: &Response) -> bool {
        let Some(notifier) = self.notifier.get() else {
            return false;
        };
        let taken = self
            .fills
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_fills).then_some(n + 1)
            });
        if taken.is_err() {
            return false;
        }
        let filled = (!stale || notifier.inval_inode(ino, 0, 0).is_ok()) && {
            // From here the pages hold this answer or parts of it, never another.
            self.inodes.filled_response(ino.0, ask);
            notifier.store(ino, 0, response.to_json()).is_ok()
        };
        self.fills.fetch_sub(1, Ordering::AcqRel);
        filled
    }

    /// The session and outbox name of the exchange open on `fh`.
    fn exchange_on(&self, fh: u64) -> Option<(String, String)> {
        let drafts = self.drafts.lock().ok()?;
        let draft = drafts.get(&fh).filter(|d| d.exchange)?;
        Some((draft.session.clone(), draft.rid.clone()))
    }

    fn draft_exists(&self, session: &str, rid: &str) -> bool {
        self.drafts
            .lock()
            .map(|d| d.has_name(session, rid))
            .unwrap_or(false)
    }

    fn content(&self, node: &Node) -> Option<Vec<u8>> {
        let json = |v: serde_json::Value| {
            let mut bytes = serde_json::to_vec_pretty(&v).unwrap_or_default();
            bytes.push(b'\n');
            bytes
        };
        match node {
            Node::Readme => Some(README_TEXT.as_bytes().to_vec()),
            Node::AuditLog => self.audit_path.as_ref().and_then(|p| std::fs::read(p).ok()),
            Node::SessionJson(s) => self.authority.session_view(s).map(json),
            Node::RulesJson(s) => self.authority.rules_view(s).map(json),
            Node::InboxItem(s, a) => self.authority.describe_pending(s, a),
            Node::Grant(s, g) => self
                .authority
                .grants(s)
                .into_iter()
                .find(|x| &x.id == g)
                .and_then(|grant| serde_json::to_value(grant).ok())
                .map(json),
            Node::Response(s, r) => self
                .decided_response(s, r)
                .map(|response| response.to_json().to_vec()),
            Node::PiRequest(s, t, n) => self.pi.request_bytes(s, t, n),
            Node::PiResponse(s, t, n) => self.pi.response_bytes(s, t, n),
            _ => None,
        }
    }

    /// Attributes for a reply that hands the kernel a reference to the
    /// node (lookup, create, mkdir): the reference is counted until FORGET.
    fn entry_attr(&self, node: &Node) -> FileAttr {
        self.attr_for(node, self.inodes.referenced(node))
    }

    fn attr(&self, node: &Node) -> FileAttr {
        self.attr_for(node, self.inodes.ino(node))
    }

    /// Who a node belongs to and its mode, so that `ls -l` and `access(2)`
    /// tell the truth of the daemon's own checks. A session's asking side
    /// (outbox, ctl, query, children, pi) belongs to its asker uid, its
    /// deciding side (inbox, events, grants) to its decider (the mount
    /// owner when none is bound); the group is the mount owner's. The
    /// daemon checks the exact uid and namespace on every call that looks
    /// inside, asks, spawns or decides.
    fn ownership(&self, node: &Node) -> (u32, u16) {
        let owner = match node.owner() {
            Owner::MountOwner => self.uid,
            side => node
                .session()
                .and_then(|s| {
                    self.authority
                        .with_tree(|t| t.get(s).map(|x| (x.asker_uid, x.decider_uid)))
                })
                .map(|(asker, decider)| match side {
                    Owner::Decider => decider.unwrap_or(self.uid),
                    _ => asker,
                })
                .unwrap_or(self.uid),
        };
        (owner, node.mode())
    }

    /// The calling process, with whether it shares the daemon's mount
    /// namespace.
    fn caller(&self, req: &Request) -> Caller {
        self.namespaces.caller(req.uid(), req.pid())
    }

    /// The operator: root or the mount owner, outside any sandbox.
    fn is_operator(&self, caller: Caller) -> bool {
        caller.in_daemon_namespace && (caller.uid == 0 || caller.uid == self.uid)
    }

    /// The daemon's own check of who may open or list `node`, behind the
    /// kernel's mode check: the same rule, with the exact uid and the
    /// caller's namespace. The namespace can only raise a caller's
    /// standing, so it is read (a procfs lookup) only when the uid alone
    /// does not suffice: an asker opening its own files never pays for it.
    fn check_open(&self, req: &Request, node: &Node) -> Result<(), Errno> {
        let by_uid = Caller {
            uid: req.uid(),
            in_daemon_namespace: false,
        };
        match self.check_open_as(by_uid, node) {
            Ok(()) => Ok(()),
            Err(_) => self.check_open_as(self.caller(req), node),
        }
    }

    /// Looking a name up in a directory that is closed to others (its mode
    /// has no search bit for them: an outbox, an inbox, a pi view, the
    /// judges) takes the standing that opening it does. The kernel's mode
    /// check is not used (see `docs/security.md`), so this is what keeps a
    /// stranger from even learning which asks exist.
    fn check_search(&self, req: &Request, dir: &Node) -> Result<(), Errno> {
        if dir.mode() & 0o001 != 0 {
            return Ok(());
        }
        self.check_open(req, dir)
    }

    fn check_open_as(&self, caller: Caller, node: &Node) -> Result<(), Errno> {
        let standing = |s: &str| self.authority.standing(s, caller).ok_or(Errno::ENOENT);
        let allowed = match node {
            Node::OutboxDir(s)
            | Node::Request(s, _)
            | Node::Response(s, _)
            | Node::Exchange(s, _)
            | Node::AskFile(s)
            | Node::PiDir(s)
            | Node::PiSessions(s)
            | Node::PiTarget(s, _)
            | Node::PiFolder(s, ..)
            | Node::PiRequest(s, ..)
            | Node::PiResponse(s, ..) => standing(s)?.may_ask(),
            Node::Ctl(s) | Node::Query(s) => standing(s)?.may_control(),
            // `pending` lists asks below too: the entries are filtered
            // again, per inbox, by who may decide there.
            Node::InboxDir(s) | Node::InboxItem(s, _) | Node::Events(s) | Node::Pending(s) => {
                standing(s)?.may_decide()
            }
            Node::AuditLog
            | Node::JudgesDir
            | Node::JudgeDir(_)
            | Node::JudgeNext(_)
            | Node::JudgeVerdict(_)
            | Node::JudgeLease(_) => self.is_operator(caller),
            _ => true,
        };
        if allowed {
            Ok(())
        } else {
            tracing::info!(
                uid = caller.uid,
                sandboxed = !caller.in_daemon_namespace,
                ?node,
                "access refused"
            );
            Err(Errno::EACCES)
        }
    }

    fn attr_for(&self, node: &Node, ino: u64) -> FileAttr {
        let kind = if node.is_dir() {
            FileType::Directory
        } else {
            FileType::RegularFile
        };
        let (uid, perm) = self.ownership(node);
        let size = match node {
            Node::Readme
            | Node::SessionJson(_)
            | Node::InboxItem(..)
            | Node::PiRequest(..)
            | Node::PiResponse(..) => self.content(node).map(|c| c.len() as u64).unwrap_or(0),
            Node::Response(s, r) => self
                .decided_response(s, r)
                .map(|response| response.to_json().len() as u64)
                .unwrap_or(0),
            _ => 0,
        };
        // An inbox entry's time is its ask's arrival, so `ls -lt` sorts
        // what waits by age.
        let time = match node {
            Node::InboxItem(_, ask) => self
                .authority
                .arrived_ms(ask)
                .map(|ms| SystemTime::UNIX_EPOCH + Duration::from_millis(ms))
                .unwrap_or(self.started),
            _ => self.started,
        };
        FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: 0,
            atime: time,
            mtime: time,
            ctime: time,
            crtime: self.started,
            kind,
            perm,
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            uid,
            gid: self.gid,
            rdev: 0,
            flags: 0,
            blksize: 4096,
        }
    }

    /// The answer to `session`'s ask `rid`, once there is one.
    fn decided_response(&self, session: &str, rid: &str) -> Option<Arc<Response>> {
        self.authority
            .ask_for(session, rid)
            .and_then(|ask| self.authority.response(&ask))
    }

    fn child(&self, parent: &Node, name: &str) -> Option<Node> {
        let node = match parent {
            Node::Root => match name {
                "README" => Node::Readme,
                "sessions" => Node::SessionsDir,
                "judges" => Node::JudgesDir,
                "audit.log" => Node::AuditLog,
                _ => return None,
            },
            Node::JudgesDir => Node::JudgeDir(name.to_string()),
            Node::JudgeDir(j) => match name {
                "next" => Node::JudgeNext(j.clone()),
                "verdict" => Node::JudgeVerdict(j.clone()),
                "lease" => Node::JudgeLease(j.clone()),
                _ => return None,
            },
            Node::SessionsDir => Node::SessionDir(name.to_string()),
            Node::SessionDir(s) => match name {
                "session.json" => Node::SessionJson(s.clone()),
                "rules.json" => Node::RulesJson(s.clone()),
                "ctl" => Node::Ctl(s.clone()),
                "events" => Node::Events(s.clone()),
                "pending" => Node::Pending(s.clone()),
                "query" => Node::Query(s.clone()),
                "ask" => Node::AskFile(s.clone()),
                "outbox" => Node::OutboxDir(s.clone()),
                "inbox" => Node::InboxDir(s.clone()),
                "grants" => Node::GrantsDir(s.clone()),
                "children" => Node::ChildrenDir(s.clone()),
                "pi" => Node::PiDir(s.clone()),
                _ => return None,
            },
            Node::PiDir(s) if name == "sessions" => Node::PiSessions(s.clone()),
            Node::PiSessions(s) => Node::PiTarget(s.clone(), name.to_string()),
            Node::PiTarget(s, t) => Node::PiFolder(s.clone(), t.clone(), Folder::from_name(name)?),
            Node::PiFolder(s, t, Folder::Requests) => {
                Node::PiRequest(s.clone(), t.clone(), name.to_string())
            }
            Node::PiFolder(s, t, Folder::Responses) => {
                Node::PiResponse(s.clone(), t.clone(), name.to_string())
            }
            Node::ChildrenDir(s) => Node::SessionDir(format!("{s}/{name}")),
            Node::OutboxDir(s) => {
                if let Some(rid) = name.strip_suffix(".request") {
                    Node::Request(s.clone(), rid.to_string())
                } else if let Some(rid) = name.strip_suffix(".response") {
                    Node::Response(s.clone(), rid.to_string())
                } else {
                    return None;
                }
            }
            Node::InboxDir(s) => Node::InboxItem(s.clone(), name.to_string()),
            Node::GrantsDir(s) => Node::Grant(s.clone(), name.to_string()),
            _ => return None,
        };
        if let Node::SessionDir(id) = &node {
            // Only roots live directly under sessions/.
            let is_root = self
                .authority
                .with_tree(|t| t.roots().iter().any(|r| r == id));
            if matches!(parent, Node::SessionsDir) && !is_root {
                return None;
            }
        }
        self.exists(&node).then_some(node)
    }

    fn entries(&self, node: &Node) -> Vec<(String, Node)> {
        let named =
            |names: Vec<(&str, Node)>| names.into_iter().map(|(n, x)| (n.to_string(), x)).collect();
        match node {
            Node::Root => named(vec![
                ("README", Node::Readme),
                ("sessions", Node::SessionsDir),
                ("judges", Node::JudgesDir),
                ("audit.log", Node::AuditLog),
            ]),
            Node::JudgesDir => self
                .authority
                .attached_judges()
                .into_iter()
                .map(|j| (j.clone(), Node::JudgeDir(j)))
                .collect(),
            Node::JudgeDir(j) => named(vec![
                ("next", Node::JudgeNext(j.clone())),
                ("verdict", Node::JudgeVerdict(j.clone())),
                ("lease", Node::JudgeLease(j.clone())),
            ]),
            Node::SessionsDir => self
                .authority
                .with_tree(|t| t.roots().to_vec())
                .into_iter()
                .map(|r| (r.clone(), Node::SessionDir(r)))
                .collect(),
            Node::SessionDir(s) => named(vec![
                ("session.json", Node::SessionJson(s.clone())),
                ("rules.json", Node::RulesJson(s.clone())),
                ("ctl", Node::Ctl(s.clone())),
                ("events", Node::Events(s.clone())),
                ("pending", Node::Pending(s.clone())),
                ("query", Node::Query(s.clone())),
                ("ask", Node::AskFile(s.clone())),
                ("outbox", Node::OutboxDir(s.clone())),
                ("inbox", Node::InboxDir(s.clone())),
                ("grants", Node::GrantsDir(s.clone())),
                ("children", Node::ChildrenDir(s.clone())),
                ("pi", Node::PiDir(s.clone())),
            ]),
            Node::PiDir(s) => named(vec![("sessions", Node::PiSessions(s.clone()))]),
            Node::PiSessions(s) => self
                .pi
                .targets(s)
                .into_iter()
                .map(|t| (t.clone(), Node::PiTarget(s.clone(), t)))
                .collect(),
            Node::PiTarget(s, t) => self
                .pi
                .folders(s, t)
                .into_iter()
                .map(|f| {
                    (
                        f.name().to_string(),
                        Node::PiFolder(s.clone(), t.clone(), f),
                    )
                })
                .collect(),
            Node::PiFolder(s, t, f) => self
                .pi
                .list(s, t, *f)
                .into_iter()
                .map(|n| {
                    let node = match f {
                        Folder::Requests => Node::PiRequest(s.clone(), t.clone(), n.clone()),
                        Folder::Responses => Node::PiResponse(s.clone(), t.clone(), n.clone()),
                    };
                    (n, node)
                })
                .collect(),
            Node::ChildrenDir(s) => self
                .authority
                .with_tree(|t| t.get(s).map(|x| x.children.clone()).unwrap_or_default())
                .into_iter()
                .map(|(name, id)| (name, Node::SessionDir(id)))
                .collect(),
            Node::OutboxDir(s) => self
                .authority
                .outbox(s)
                .into_iter()
                .flat_map(|rid| {
                    [
                        (
                            format!("{rid}.request"),
                            Node::Request(s.clone(), rid.clone()),
                        ),
                        (format!("{rid}.response"), Node::Response(s.clone(), rid)),
                    ]
                })
                .collect(),
            Node::InboxDir(s) => self
                .authority
                .inbox(s)
                .into_iter()
                .map(|a| (a.clone(), Node::InboxItem(s.clone(), a)))
                .collect(),
            Node::GrantsDir(s) => self
                .authority
                .grants(s)
                .into_iter()
                .map(|g| (g.id.clone(), Node::Grant(s.clone(), g.id)))
                .collect(),
            _ => Vec::new(),
        }
    }

    fn node(&self, ino: INodeNo) -> Result<Node, Errno> {
        let node = self.inodes.node(ino.0).ok_or(Errno::ENOENT)?;
        if self.exists(&node) {
            Ok(node)
        } else {
            Err(Errno::ENOENT)
        }
    }

    /// Submits a request that did not go in at a write: a request file's
    /// at its last close, whatever there is (an empty or unfinished one is
    /// answered "invalid"); an exchange's at its first read (one closed
    /// without being read asked nothing).
    fn submit_draft(&self, fh: u64, trigger: Submit) -> Result<(), Errno> {
        let (session, rid, data, oversized) = {
            let mut drafts = self.drafts.lock().map_err(|_| Errno::EIO)?;
            let Some(draft) = drafts.get_mut(&fh) else {
                return Ok(());
            };
            let now = matches!(
                (draft.exchange, trigger),
                (true, Submit::Read) | (false, Submit::Release)
            );
            if draft.submitted || !now {
                return Ok(());
            }
            draft.submitted = true;
            (
                draft.session.clone(),
                draft.rid.clone(),
                std::mem::take(&mut draft.data),
                draft.oversized,
            )
        };
        if oversized {
            let limit = crate::session::authority::MAX_REQUEST_BYTES;
            let reason = format!("request is over the {limit}-byte limit");
            return self
                .raise(fh, &session, &rid, Err(reason))
                .and(Err(Errno::EFBIG));
        }
        self.raise(fh, &session, &rid, Authority::read_request(&data))
    }

    /// Puts the request of the draft on `fh` in `session`'s outbox as
    /// `rid` (one that could not be read goes in answered "invalid", and
    /// is `EINVAL` here), then serves the readers of its response that
    /// came before.
    fn raise(
        &self,
        fh: u64,
        session: &str,
        rid: &str,
        parsed: Result<AskRequest, String>,
    ) -> Result<(), Errno> {
        let submitted = self.authority.submit_request(session, rid, parsed);
        self.serve_awaiting(fh, session, rid);
        match submitted {
            Ok(_) => Ok(()),
            Err(error) => {
                tracing::warn!(%session, %rid, %error, "request refused");
                Err(errno(&error))
            }
        }
    }

    /// The draft on `fh` went in (or was refused): the reads and polls of
    /// its response that waited for it go on, and later ones find the ask.
    fn serve_awaiting(&self, fh: u64, session: &str, rid: &str) {
        let awaiting = self
            .drafts
            .lock()
            .ok()
            .and_then(|mut drafts| drafts.get_mut(&fh).and_then(|d| d.awaiting.take()));
        let Some(awaiting) = awaiting else {
            return;
        };
        for reader in awaiting.readers {
            if let Some(reply) = reader.read.take() {
                self.read_answer(reader.at, session, rid, reply);
            }
        }
        for poller in awaiting.pollers {
            let _ = poller.notify();
        }
    }

    /// A read of a response whose request has not gone in yet (its writer
    /// has not closed it, or the close is on its way): parked until it
    /// goes in, or told `EAGAIN` when non-blocking. The reply is handed
    /// back when no draft of that name is waiting to go in.
    fn await_request(
        &self,
        at: ReadAt,
        session: &str,
        rid: &str,
        reply: ReplyData,
    ) -> Option<ReplyData> {
        let Ok(mut drafts) = self.drafts.lock() else {
            return Some(reply);
        };
        let Some(awaiting) = drafts.awaiting(session, rid) else {
            return Some(reply);
        };
        if self.is_nonblocking(at.fh) {
            reply.error(Errno::EAGAIN);
            return None;
        }
        let read = ParkedRead::park(&self.parked, at.unique, reply);
        awaiting.readers.push(AwaitingRead { at, read });
        None
    }

    /// Reads the answer to `session`'s ask `rid` from `offset` (relative
    /// to the answer), waiting for it unless the handle is non-blocking.
    /// The answer is kept for the handle, so it can be read to the end
    /// even after the ask is forgotten.
    fn read_answer(&self, at: ReadAt, session: &str, rid: &str, reply: ReplyData) {
        let ReadAt {
            unique,
            fh,
            offset,
            size,
        } = at;
        let Some(ask) = self.authority.ask_for(session, rid) else {
            let Some(reply) = self.await_request(at, session, rid, reply) else {
                return;
            };
            // Nothing to wait for: the request went in since the first
            // look (read it), or there is no ask of that name.
            return match self.authority.ask_for(session, rid) {
                Some(_) => self.read_answer(at, session, rid, reply),
                None => reply.error(Errno::ENOENT),
            };
        };
        let nonblocking = self.is_nonblocking(fh);
        if let Some(response) = self.authority.read_response(&ask) {
            if let Ok(mut served) = self.served.lock() {
                served.insert(fh, Arc::clone(&response));
            }
            return reply.data(slice(response.to_json(), offset, size));
        }
        if nonblocking {
            return reply.error(Errno::EAGAIN);
        }
        let read = ParkedRead::park(&self.parked, unique, reply);
        let delivery = read.clone();
        let served = Arc::clone(&self.served);
        let woken = Arc::clone(&self.woken);
        let waiter = Box::new(move |response: Arc<Response>| {
            if let Ok(mut served) = served.lock() {
                served.insert(fh, Arc::clone(&response));
            }
            // Listed before the answer goes out: the reader's close may
            // come at once, and must find it to take it off.
            if let Ok(mut woken) = woken.lock() {
                woken.insert(fh);
            }
            if !delivery.answer(slice(response.to_json(), offset, size)) {
                if let Ok(mut woken) = woken.lock() {
                    woken.remove(&fh);
                }
            }
        });
        match self.authority.wait(&ask, waiter) {
            Ok(None) => {}
            Ok(Some(response)) => {
                read.answer(slice(response.to_json(), offset, size));
            }
            Err(error) => read.fail(errno(&error)),
        }
    }

    /// `judges/<name>/next`: each handle is given one review (blocking
    /// until there is one); read it to the end, close, open again.
    fn read_judge_next(
        &self,
        req: &Request,
        name: &str,
        fh: u64,
        offset: u64,
        size: u32,
        reply: ReplyData,
    ) {
        if let Some(bytes) = self
            .judge_payloads
            .lock()
            .ok()
            .and_then(|m| m.get(&fh).cloned())
        {
            return reply.data(slice(&bytes, offset, size));
        }
        let read = ParkedRead::park(&self.parked, req.unique().into(), reply);
        let delivery = read.clone();
        let payloads = Arc::clone(&self.judge_payloads);
        let reader: JudgeReader = Box::new(move |bytes: &[u8]| {
            if let Ok(mut map) = payloads.lock() {
                map.insert(fh, bytes.to_vec());
            }
            let delivered = delivery.answer(slice(bytes, offset, size));
            if !delivered {
                if let Ok(mut map) = payloads.lock() {
                    map.remove(&fh);
                }
            }
            delivered
        });
        if let Err(error) = self.authority.judge_next(name, req.uid(), reader) {
            read.fail(errno(&error));
        }
    }

    /// `events`: a blocking stream; each read returns the lines this
    /// handle has not seen (waiting for the next one when there are none).
    fn read_events(&self, req: &Request, fh: u64, size: u32, reply: ReplyData) {
        let Some((session, cursor)) = self
            .event_cursors
            .lock()
            .ok()
            .and_then(|m| m.get(&fh).cloned())
        else {
            return reply.error(Errno::EBADF);
        };
        let read = ParkedRead::park(&self.parked, req.unique().into(), reply);
        let delivery = read.clone();
        let deliver: crate::session::events::EventDeliver =
            Box::new(move |bytes: Vec<u8>| delivery.answer(&bytes));
        match self
            .authority
            .events_read(&session, &cursor, size as usize, deliver)
        {
            Ok(None) => {}
            Ok(Some(bytes)) => {
                read.answer(&bytes);
            }
            Err(error) => read.fail(errno(&error)),
        }
    }

    /// A directory's entries, `.` and `..` first.
    fn listing(&self, ino: u64, node: &Node) -> Listing {
        let mut all = vec![
            (".".to_string(), FileType::Directory, ino),
            ("..".to_string(), FileType::Directory, 1),
        ];
        for (name, child) in self.entries(node) {
            let kind = if child.is_dir() {
                FileType::Directory
            } else {
                FileType::RegularFile
            };
            all.push((name, kind, self.inodes.listed(&child)));
        }
        all
    }

    /// A `ctl` write, as `caller`.
    fn control(
        &self,
        session: &str,
        caller: Caller,
        fh: u64,
        text: &str,
    ) -> Result<(), AuthorityError> {
        match ControlCommand::parse(text).map_err(AuthorityError::Invalid)? {
            ControlCommand::Spawn {
                name,
                spec,
                lease: false,
            } => self.authority.spawn(session, &name, spec, caller).map(drop),
            ControlCommand::Spawn {
                name,
                spec,
                lease: true,
            } => {
                let (id, serial) = self
                    .authority
                    .spawn_numbered(session, &name, spec, caller)?;
                match self.session_leases.lock() {
                    Ok(mut leases) => {
                        // Sessions ended meanwhile leave the handle's list:
                        // a loop of spawns and ends on one handle must not
                        // grow it without bound.
                        let held = leases.entry(fh).or_default();
                        held.retain(|(id, serial)| self.authority.is_session(id, *serial));
                        held.push((id, serial));
                        Ok(())
                    }
                    // A lease that cannot be kept: no session left behind.
                    Err(_) => {
                        self.authority.end_leased(&id, serial);
                        Err(AuthorityError::Invalid(
                            "the lease could not be recorded".into(),
                        ))
                    }
                }
            }
            ControlCommand::End { name } => self.authority.end_child(session, &name, caller),
        }
    }
}

impl PermFs {
    /// `creat` in a pi view's `requests/`: a new draft, written and then
    /// renamed (or closed, for a `<id>.json` written directly) to ask.
    fn create_pi_request(
        &self,
        req: &Request,
        session: String,
        target: String,
        name: &str,
        reply: ReplyCreate,
    ) {
        let folder = Node::PiFolder(session.clone(), target.clone(), Folder::Requests);
        if let Err(e) = self.check_open(req, &folder) {
            return reply.error(e);
        }
        if let Err(error) = self.pi.create(&session, &target, name) {
            return reply.error(errno(&error));
        }
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut writers) = self.pi_writers.lock() {
            writers.insert(fh);
        }
        let node = Node::PiRequest(session, target, name.to_string());
        reply.created(
            &ttl(&node),
            &self.entry_attr(&node),
            Generation(0),
            FileHandle(fh),
            FopenFlags::FOPEN_DIRECT_IO,
        );
    }
}

impl Filesystem for PermFs {
    fn init(&mut self, _req: &Request, config: &mut fuser::KernelConfig) -> std::io::Result<()> {
        super::request_init_flags(config);
        Ok(())
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let Some(name) = name.to_str() else {
            return reply.error(Errno::ENOENT);
        };
        let parent = match self.node(parent) {
            Ok(parent) => parent,
            Err(e) => return reply.error(e),
        };
        if let Err(e) = self.check_search(req, &parent) {
            return reply.error(e);
        }
        match self.child(&parent, name) {
            Some(node) => {
                let attr = self.entry_attr(&node);
                reply.entry_with_ttls(&attr_ttl(&node, &attr), &ttl(&node), &attr, Generation(0))
            }
            None => reply.error(Errno::ENOENT),
        }
    }

    /// Its caller got a signal: a parked read ends with `EINTR`.
    fn interrupt(&self, _req: &Request, unique: fuser::RequestId, reply: ReplyEmpty) {
        super::parking::interrupt(&self.parked, unique.into(), reply);
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.inodes.forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.node(ino) {
            Ok(node) => {
                let attr = self.attr(&node);
                reply.attr(&attr_ttl(&node, &attr), &attr)
            }
            Err(e) => reply.error(e),
        }
    }

    fn opendir(&self, req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let node = match self.node(ino) {
            Ok(node) if node.is_dir() => node,
            Ok(_) => return reply.error(Errno::ENOTDIR),
            Err(e) => return reply.error(e),
        };
        if let Err(e) = self.check_open(req, &node) {
            return reply.error(e);
        }
        // The listing is taken once per open: reading it in chunks then
        // costs nothing more, however large the directory.
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        let listing = self.listing(ino.0, &node);
        if let Ok(mut listings) = self.listings.lock() {
            listings.insert(fh, listing);
        }
        reply.opened(FileHandle(fh), FopenFlags::empty());
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        // Reading from the start (a fresh open, or a rewind) takes a new
        // listing; later chunks come from the one taken.
        let kept = self.listings.lock().ok().and_then(|mut l| l.remove(&fh.0));
        let listing = match kept.filter(|_| offset > 0) {
            Some(listing) => listing,
            None => match self.node(ino) {
                Ok(node) if node.is_dir() => self.listing(ino.0, &node),
                Ok(_) => return reply.error(Errno::ENOTDIR),
                Err(e) => return reply.error(e),
            },
        };
        for (index, (name, kind, child_ino)) in listing.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*child_ino), (index + 1) as u64, *kind, name) {
                break;
            }
        }
        if let Ok(mut listings) = self.listings.lock() {
            listings.insert(fh.0, listing);
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        if let Ok(mut listings) = self.listings.lock() {
            listings.remove(&fh.0);
        }
        reply.ok();
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let node = match self.node(ino) {
            Ok(node) => node,
            Err(e) => return reply.error(e),
        };
        if let Err(e) = self.check_open(req, &node) {
            return reply.error(e);
        }
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        if let Node::AskFile(session) = &node {
            return self.open_ask(session, fh, flags.0, reply);
        }
        if let Node::JudgeLease(name) = &node {
            if let Err(error) = self.authority.judge_lease_opened(name, req.uid()) {
                return reply.error(errno(&error));
            }
            if let Ok(mut leases) = self.leases.lock() {
                leases.insert(fh, name.clone());
            }
        }
        if let Node::Events(session) = &node {
            match self.authority.events_open(session) {
                Ok(cursor) => {
                    if let Ok(mut cursors) = self.event_cursors.lock() {
                        cursors.insert(fh, (session.clone(), cursor));
                    }
                }
                Err(error) => return reply.error(errno(&error)),
            }
        }
        if let Node::Pending(session) = &node {
            // Filtered for this caller (its namespace included): each
            // entry's inbox must be one it may decide at.
            let caller = self.caller(req);
            let Some(view) = self.authority.pending_below(session, caller) else {
                return reply.error(Errno::ENOENT);
            };
            let mut bytes = serde_json::to_vec_pretty(&view).unwrap_or_default();
            bytes.push(b'\n');
            if let Ok(mut snapshots) = self.snapshots.lock() {
                snapshots.insert(fh, bytes);
            }
        }
        if matches!(node, Node::PiRequest(..)) && flags.0 & libc::O_ACCMODE != libc::O_RDONLY {
            if let Ok(mut writers) = self.pi_writers.lock() {
                writers.insert(fh);
            }
        }
        if let Node::Response(session, rid) = &node {
            let ask = self.authority.ask_for(session, rid);
            let response = ask
                .as_deref()
                .and_then(|ask| self.authority.read_response(ask));
            let serial = ask.as_deref().and_then(serial_of);
            let io = self
                .inodes
                .open_response(ino.0, fh, serial, response.is_some());
            if let (Some(response), Some(serial)) = (response, serial) {
                // Decided: the handle reads this answer. Through the page
                // cache when only this ask's handles use it, filled here
                // before the open is answered: the kernel knows its size
                // (from the lookup), so reading it to the end costs no
                // request at all.
                let cached = match io {
                    ResponseIo::Cached => true,
                    ResponseIo::Fill { stale } => self.fill_pages(ino, serial, stale, &response),
                    ResponseIo::Direct => false,
                };
                let kept = self
                    .served
                    .lock()
                    .map(|mut served| served.insert(fh, response));
                if kept.is_ok() {
                    let flags = if cached {
                        FopenFlags::FOPEN_NOFLUSH | FopenFlags::FOPEN_KEEP_CACHE
                    } else {
                        FopenFlags::FOPEN_NOFLUSH | FopenFlags::FOPEN_DIRECT_IO
                    };
                    return reply.opened(FileHandle(fh), flags);
                }
            }
            if let Ok(mut map) = self.nonblocking.lock() {
                map.insert(fh, flags.0 & libc::O_NONBLOCK != 0);
            }
        }
        // Other contents are never cached (direct I/O). Only a pi request
        // has anything to do at close; other files skip the FLUSH round trip.
        let flags = if matches!(node, Node::PiRequest(..)) {
            FopenFlags::FOPEN_DIRECT_IO
        } else {
            FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_NOFLUSH
        };
        reply.opened(FileHandle(fh), flags);
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let Some(name) = name.to_str() else {
            return reply.error(Errno::EINVAL);
        };
        if name.len() > 255 {
            return reply.error(Errno::ENAMETOOLONG);
        }
        let session = match self.node(parent) {
            Ok(Node::PiFolder(s, t, Folder::Requests)) => {
                return self.create_pi_request(req, s, t, name, reply)
            }
            Ok(Node::OutboxDir(s)) => s,
            // A decision written after the ask left the inbox: the shell's
            // `>` creates when the name is gone. Say it was decided.
            Ok(Node::InboxDir(_)) if self.authority.is_answered(name) => {
                return reply.error(Errno::EALREADY)
            }
            Ok(Node::InboxDir(_)) => return reply.error(Errno::ENOENT),
            Ok(_) => return reply.error(Errno::EACCES),
            Err(e) => return reply.error(e),
        };
        if let Err(e) = self.check_open(req, &Node::OutboxDir(session.clone())) {
            return reply.error(e);
        }
        // `<rid>.request` is the two-file ask; a name with no suffix is an
        // exchange (the one-descriptor ask).
        let (rid, exchange) = match name.strip_suffix(".request") {
            Some(rid) => (rid, false),
            None if name.ends_with(".response") => return reply.error(Errno::EINVAL),
            None => (name, true),
        };
        if !crate::session::tree::is_valid_name(rid) {
            return reply.error(Errno::EINVAL);
        }
        if self.authority.outbox_contains(&session, rid) || self.draft_exists(&session, rid) {
            return reply.error(Errno::EEXIST);
        }
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut drafts) = self.drafts.lock() {
            drafts.insert(fh, Draft::new(&session, rid, exchange));
        }
        if exchange {
            if let Ok(mut map) = self.nonblocking.lock() {
                map.insert(fh, flags & libc::O_NONBLOCK != 0);
            }
        }
        let node = if exchange {
            Node::Exchange(session, rid.to_string())
        } else {
            Node::Request(session, rid.to_string())
        };
        // Neither form has work at `close`: a request goes in at the write
        // that completes it (or at the last close, `release`), and an
        // exchange is forgotten at `release`. No FLUSH round trip.
        let open_flags = FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_NOFLUSH;
        reply.created(
            &ttl(&node),
            &self.entry_attr(&node),
            Generation(0),
            FileHandle(fh),
            open_flags,
        );
    }

    fn read(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        // What this read's interrupt, if any, will name.
        let unique: u64 = req.unique().into();
        // An exchange's answer is read from where its first read started.
        let base = self
            .exchange_base
            .lock()
            .ok()
            .and_then(|m| m.get(&fh.0).copied());
        let relative = offset.saturating_sub(base.unwrap_or(0));
        if let Some(response) = self.served.lock().ok().and_then(|m| m.get(&fh.0).cloned()) {
            return reply.data(slice(response.to_json(), relative, size));
        }
        let node = match self.node(ino) {
            Ok(node) => node,
            Err(e) => return reply.error(e),
        };
        if let Node::Events(_) = &node {
            return self.read_events(req, fh.0, size, reply);
        }
        if let Node::Pending(_) = &node {
            let Ok(snapshots) = self.snapshots.lock() else {
                return reply.error(Errno::EIO);
            };
            return match snapshots.get(&fh.0) {
                Some(bytes) => reply.data(slice(bytes, offset, size)),
                None => reply.error(Errno::EBADF),
            };
        }
        if let Node::JudgeNext(name) = &node {
            return self.read_judge_next(req, name, fh.0, offset, size, reply);
        }
        if let Node::Query(_) = &node {
            let Ok(mut queries) = self.queries.lock() else {
                return reply.error(Errno::EIO);
            };
            return match queries.get_mut(&fh.0) {
                Some(answer) => {
                    let base = *answer.read_base.get_or_insert(offset);
                    reply.data(slice(&answer.bytes, offset.saturating_sub(base), size))
                }
                None => reply.data(slice(QUERY_HELP, offset, size)),
            };
        }
        let exchange = match &node {
            Node::Exchange(session, rid) => Some((session.clone(), rid.clone())),
            Node::AskFile(_) => match self.exchange_on(fh.0) {
                Some(exchange) => Some(exchange),
                None => return reply.data(slice(ASK_HELP, offset, size)),
            },
            _ => None,
        };
        if let Some((session, rid)) = &exchange {
            let relative = match base {
                Some(_) => relative,
                None => {
                    if let Ok(mut map) = self.exchange_base.lock() {
                        map.insert(fh.0, offset);
                    }
                    0
                }
            };
            // The first read asks, unless a complete write did. An invalid
            // request still has an answer (outcome "invalid", with the
            // reason): the read returns it.
            match self.submit_draft(fh.0, Submit::Read) {
                Ok(()) | Err(Errno::EINVAL) | Err(Errno::EFBIG) => {}
                Err(e) => return reply.error(e),
            }
            let at = ReadAt {
                unique,
                fh: fh.0,
                offset: relative,
                size,
            };
            let Some(reply) = self.wait_for_raise(at, reply) else {
                return;
            };
            return self.read_answer(at, session, rid, reply);
        }
        if let Node::Response(session, rid) = &node {
            let at = ReadAt {
                unique,
                fh: fh.0,
                offset,
                size,
            };
            return self.read_answer(at, session, rid, reply);
        }
        match self.content(&node) {
            Some(content) => reply.data(slice(&content, offset, size)),
            None if matches!(node, Node::Request(..) | Node::Ctl(_)) => reply.data(&[]),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        // A decision on an ask that has just left the inbox is told
        // `EALREADY` by the authority, not `ENOENT` here.
        let node = match self.inodes.node(ino.0) {
            Some(node @ Node::InboxItem(..)) => node,
            _ => match self.node(ino) {
                Ok(node) => node,
                Err(e) => return reply.error(e),
            },
        };
        // Read only by the calls that decide or spawn (a request's bytes
        // go to the draft its creator opened).
        let caller = || self.caller(req);
        let text = || String::from_utf8_lossy(data).into_owned();
        let result = match &node {
            Node::Request(..) | Node::Exchange(..) | Node::AskFile(_) => {
                let Ok(mut drafts) = self.drafts.lock() else {
                    return reply.error(Errno::EIO);
                };
                match drafts.get_mut(&fh.0) {
                    Some(draft) if !draft.submitted => {
                        let end = offset as usize + data.len();
                        if end > crate::session::authority::MAX_REQUEST_BYTES {
                            draft.oversized = true;
                            draft.data.clear();
                            return reply.error(Errno::EFBIG);
                        }
                        if draft.data.len() < end {
                            draft.data.resize(end, 0);
                        }
                        draft.data[offset as usize..end].copy_from_slice(data);
                        // One already over the limit goes in at its
                        // last close, refused for its size.
                        let written = if draft.oversized {
                            Written::Incomplete
                        } else {
                            Written::of(&draft.data)
                        };
                        if !draft.exchange && written != Written::Incomplete {
                            // A request file goes in at the write that
                            // completes it, or that makes it something
                            // that never will be: this write reports a bad
                            // request, and `close` has nothing to do. It
                            // is raised before the write is answered, so
                            // once the writer's `write` (or `echo`)
                            // returns, the ask is in the outbox and every
                            // inbox it reaches.
                            draft.submitted = true;
                            let (session, rid, request) = (
                                draft.session.clone(),
                                draft.rid.clone(),
                                std::mem::take(&mut draft.data),
                            );
                            drop(drafts);
                            let parsed = Authority::read_request(&request);
                            return match self.raise(fh.0, &session, &rid, parsed) {
                                Ok(()) => reply.written(data.len() as u32),
                                Err(error) => reply.error(error),
                            };
                        }
                        if draft.exchange && written == Written::Complete {
                            // Answer the write, then raise: the asker's
                            // way to its read overlaps the judging.
                            draft.submitted = true;
                            draft.raising = Some(Raising::default());
                            let written = (
                                draft.session.clone(),
                                draft.rid.clone(),
                                std::mem::take(&mut draft.data),
                            );
                            drop(drafts);
                            reply.written(data.len() as u32);
                            let (session, rid, request) = written;
                            let parsed = Authority::read_request(&request);
                            return self.raise_written(fh.0, &session, &rid, parsed);
                        }
                        Ok(())
                    }
                    // The newline a client writes after its request.
                    Some(_) if data.trim_ascii().is_empty() => Ok(()),
                    _ => Err(AuthorityError::Exists(
                        "the request was already submitted".into(),
                    )),
                }
            }
            Node::PiRequest(s, t, name) => self.pi.write(s, t, name, offset, data),
            Node::InboxItem(session, ask) => self.authority.decide(session, ask, caller(), &text()),
            Node::Ctl(session) => self.control(session, caller(), fh.0, &text()),
            Node::Query(session) => match self.check_open(req, &node) {
                Err(e) => return reply.error(e),
                Ok(()) => self.authority.query(session, &text()).and_then(|bytes| {
                    let mut queries = self
                        .queries
                        .lock()
                        .map_err(|_| AuthorityError::Invalid("query state is unusable".into()))?;
                    queries.insert(
                        fh.0,
                        QueryAnswer {
                            bytes,
                            read_base: None,
                        },
                    );
                    Ok(())
                }),
            },
            Node::JudgeVerdict(_) if !self.is_operator(caller()) => {
                return reply.error(Errno::EACCES)
            }
            Node::JudgeVerdict(name) => self.authority.judge_verdict(name, req.uid(), &text()),
            _ => return reply.error(Errno::EACCES),
        };
        match result {
            Ok(()) => reply.written(data.len() as u32),
            Err(error) => {
                tracing::info!(?node, %error, "write refused");
                reply.error(errno(&error))
            }
        }
    }

    fn flush(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        if let Some(Node::PiRequest(s, t, name)) = self.inodes.node(ino.0) {
            let writer = self.pi_writers.lock().is_ok_and(|w| w.contains(&fh.0));
            return match writer.then(|| self.pi.close(&s, &t, &name, false)) {
                Some(Err(error)) => reply.error(errno(&error)),
                _ => reply.ok(),
            };
        }
        // Request files and exchanges are opened without FLUSH (they go
        // in at a write or the last close); nothing else has work here.
        reply.ok()
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        if let Some(Node::PiRequest(s, t, name)) = self.inodes.node(ino.0) {
            // Only a written handle raises at its last close; a reader's
            // close leaves the draft as it is.
            if self.pi_writers.lock().is_ok_and(|mut w| w.remove(&fh.0)) {
                let _ = self.pi.close(&s, &t, &name, true);
            }
        }
        let _ = self.submit_draft(fh.0, Submit::Release);
        let draft = match self.drafts.lock() {
            Ok(mut drafts) => match drafts.get_mut(&fh.0).and_then(|d| d.raising.as_mut()) {
                // Still being raised: the raiser withdraws it and forgets
                // the handle when it is done.
                Some(raising) => {
                    raising.closed = true;
                    return reply.ok();
                }
                None => drafts.remove(&fh.0),
            },
            Err(_) => None,
        };
        if let Some(draft) = draft.filter(|d| d.exchange && d.submitted) {
            // Closing an exchange forgets its ask: an answered one is
            // dropped, a pending one is withdrawn (`cancelled`).
            let _ = self.authority.withdraw(&draft.session, &draft.rid);
        }
        self.inodes.close_response(ino.0, fh.0);
        self.forget_handle(fh.0);
        reply.ok();
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<fuser::TimeOrNow>,
        mtime: Option<fuser::TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        // Ownership and modes are the bindings themselves: they change only
        // through `ctl`. Truncation on open (O_TRUNC from `echo >`, which
        // also stamps the times) is accepted and ignored; times alone
        // (`touch`, `utimes`) are refused like the rest.
        let changes_binding = mode.is_some() || uid.is_some() || gid.is_some() || flags.is_some();
        let changes_times = atime.is_some() || mtime.is_some() || crtime.is_some();
        if changes_binding || (changes_times && size.is_none()) {
            return reply.error(Errno::EPERM);
        }
        match self.node(ino) {
            Ok(node) => {
                if let (Node::PiRequest(s, t, name), Some(size)) = (&node, size) {
                    if let Err(e) = self.check_open(req, &node) {
                        return reply.error(e);
                    }
                    self.pi.truncate(s, t, name, size);
                }
                reply.attr(&ttl(&node), &self.attr(&node))
            }
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: fuser::RenameFlags,
        reply: ReplyEmpty,
    ) {
        // Only within a pi view's `requests/`: the pi child's atomic write
        // (`<id>.json.<pid>.<ms>.tmp` → `<id>.json`), which asks.
        let (Some(name), Some(newname)) = (name.to_str(), newname.to_str()) else {
            return reply.error(Errno::ENOENT);
        };
        let (from, to) = match (self.node(parent), self.node(newparent)) {
            (Ok(from), Ok(to)) => (from, to),
            (Err(e), _) | (_, Err(e)) => return reply.error(e),
        };
        let Node::PiFolder(s, t, Folder::Requests) = &from else {
            return reply.error(Errno::EACCES);
        };
        if from != to {
            return reply.error(Errno::EXDEV);
        }
        if flags.contains(fuser::RenameFlags::RENAME_EXCHANGE) {
            return reply.error(Errno::EINVAL);
        }
        if let Err(e) = self.check_open(req, &from) {
            return reply.error(e);
        }
        match self.pi.rename(s, t, name, newname) {
            Ok(()) => reply.ok(),
            Err(error) => {
                tracing::info!(session = %s, target = %t, %newname, %error, "pi request refused");
                reply.error(errno(&error))
            }
        }
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let Some(name) = name.to_str() else {
            return reply.error(Errno::ENOENT);
        };
        let result = match self.node(parent) {
            Ok(Node::OutboxDir(s)) => {
                if let Err(e) = self.check_open(req, &Node::OutboxDir(s.clone())) {
                    return reply.error(e);
                }
                let rid = name
                    .strip_suffix(".request")
                    .or_else(|| name.strip_suffix(".response"))
                    .unwrap_or(name);
                self.authority.withdraw(&s, rid)
            }
            Ok(folder @ Node::PiFolder(..)) => {
                if let Err(e) = self.check_open(req, &folder) {
                    return reply.error(e);
                }
                match &folder {
                    Node::PiFolder(s, t, Folder::Requests) => self.pi.unlink_request(s, t, name),
                    Node::PiFolder(s, t, Folder::Responses) => self.pi.unlink_response(s, t, name),
                    _ => return reply.error(Errno::EACCES),
                }
            }
            Ok(Node::GrantsDir(s)) => {
                if self.authority.may_decide(&s, self.caller(req)) {
                    self.authority.revoke(&s, name)
                } else {
                    Err(AuthorityError::PermissionDenied(
                        "only a decider may revoke a grant".into(),
                    ))
                }
            }
            Ok(_) => return reply.error(Errno::EACCES),
            Err(e) => return reply.error(e),
        };
        match result {
            Ok(()) => reply.ok(),
            Err(error) => reply.error(errno(&error)),
        }
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let Some(name) = name.to_str() else {
            return reply.error(Errno::EINVAL);
        };
        if name.len() > 255 {
            return reply.error(Errno::ENAMETOOLONG);
        }
        let caller = self.caller(req);
        match self.node(parent) {
            Ok(Node::JudgesDir) if !self.is_operator(caller) => reply.error(Errno::EACCES),
            Ok(Node::JudgesDir) => match self.authority.attach_judge(name, req.uid()) {
                Ok(()) => reply.entry(
                    &Duration::ZERO,
                    &self.entry_attr(&Node::JudgeDir(name.to_string())),
                    Generation(0),
                ),
                Err(error) => reply.error(errno(&error)),
            },
            Ok(parent @ (Node::PiSessions(_) | Node::PiTarget(..))) => {
                if let Err(e) = self.check_open_as(caller, &parent) {
                    return reply.error(e);
                }
                let (made, node) = match &parent {
                    Node::PiSessions(s) => (
                        self.pi.make_target(s, name),
                        Node::PiTarget(s.clone(), name.to_string()),
                    ),
                    Node::PiTarget(s, t) => match Folder::from_name(name) {
                        Some(folder) => (
                            self.pi.make_folder(s, t, folder),
                            Node::PiFolder(s.clone(), t.clone(), folder),
                        ),
                        None => return reply.error(Errno::EACCES),
                    },
                    _ => return reply.error(Errno::EACCES),
                };
                match made {
                    Ok(()) => reply.entry(&ttl(&node), &self.entry_attr(&node), Generation(0)),
                    Err(error) => reply.error(errno(&error)),
                }
            }
            Ok(Node::ChildrenDir(s)) => {
                match self.authority.spawn(&s, name, SpawnSpec::default(), caller) {
                    Ok(id) => reply.entry(
                        &STRUCTURE_TTL,
                        &self.entry_attr(&Node::SessionDir(id)),
                        Generation(0),
                    ),
                    Err(error) => reply.error(errno(&error)),
                }
            }
            Ok(_) => reply.error(Errno::EACCES),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let Some(name) = name.to_str() else {
            return reply.error(Errno::ENOENT);
        };
        let caller = self.caller(req);
        match self.node(parent) {
            Ok(Node::JudgesDir) if !self.is_operator(caller) => reply.error(Errno::EACCES),
            Ok(Node::JudgesDir) => match self.authority.detach_judge(name, req.uid()) {
                Ok(()) => reply.ok(),
                Err(error) => reply.error(errno(&error)),
            },
            Ok(Node::ChildrenDir(s)) => match self.authority.end_child(&s, name, caller) {
                Ok(()) => reply.ok(),
                Err(error) => reply.error(errno(&error)),
            },
            Ok(parent @ (Node::PiSessions(_) | Node::PiTarget(..))) => {
                if let Err(e) = self.check_open_as(caller, &parent) {
                    return reply.error(e);
                }
                let removed = match &parent {
                    Node::PiSessions(s) => self.pi.remove_target(s, name),
                    Node::PiTarget(s, t) => match Folder::from_name(name) {
                        Some(folder) => self.pi.remove_folder(s, t, folder),
                        None => return reply.error(Errno::ENOENT),
                    },
                    _ => return reply.error(Errno::EACCES),
                };
                match removed {
                    Ok(()) => reply.ok(),
                    Err(error) => reply.error(errno(&error)),
                }
            }
            Ok(_) => reply.error(Errno::EACCES),
            Err(e) => reply.error(e),
        }
    }

    /// `access(2)` and `chdir`: answered from the modes `ls -l` shows
    /// and, for what needs a standing, the daemon's own check, so
    /// `test -w ctl` says what a write would meet.
    fn access(&self, req: &Request, ino: INodeNo, mask: fuser::AccessFlags, reply: ReplyEmpty) {
        let node = match self.node(ino) {
            Ok(node) => node,
            Err(e) => return reply.error(e),
        };
        if mask == fuser::AccessFlags::F_OK {
            return reply.ok();
        }
        let (owner, mode) = self.ownership(&node);
        let bits = if req.uid() == 0 {
            // Root reads and writes anything; it executes (searches)
            // what anyone may.
            0o6 | u32::from(mode & 0o111 != 0)
        } else if req.uid() == owner {
            u32::from(mode >> 6) & 0o7
        } else if req.gid() == self.gid {
            u32::from(mode >> 3) & 0o7
        } else {
            u32::from(mode) & 0o7
        };
        let wanted = mask.bits() as u32 & 0o7;
        if bits & wanted != wanted {
            return reply.error(Errno::EACCES);
        }
        let needs_standing = match &node {
            dir if dir.is_dir() => self.check_search(req, dir),
            file => self.check_open(req, file),
        };
        match needs_standing {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn poll(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        notifier: PollNotifier,
        _events: PollEvents,
        _flags: PollFlags,
        reply: ReplyPoll,
    ) {
        let node = match self.node(ino) {
            Ok(node) => node,
            Err(e) => return reply.error(e),
        };
        // An exchange still being raised is ready when the raise ends.
        if let Ok(mut drafts) = self.drafts.lock() {
            if let Some(raising) = drafts.get_mut(&fh.0).and_then(|d| d.raising.as_mut()) {
                raising.pollers.push(notifier);
                return reply.poll(PollEvents::empty());
            }
        }
        let node = match node {
            Node::AskFile(_) => match self.exchange_on(fh.0) {
                Some((session, rid)) => Node::Exchange(session, rid),
                None => return reply.poll(PollEvents::POLLIN),
            },
            node => node,
        };
        let (session, rid) = match node {
            Node::Response(session, rid) => (session, rid),
            // An exchange not yet read has no ask: it can be written.
            Node::Exchange(session, rid) if self.authority.ask_for(&session, &rid).is_some() => {
                (session, rid)
            }
            Node::Exchange(..) => return reply.poll(PollEvents::POLLOUT),
            _ => return reply.poll(PollEvents::POLLIN | PollEvents::POLLOUT),
        };
        let ask = match self.authority.ask_for(&session, &rid) {
            Some(ask) => ask,
            None => {
                // Its request has not gone in: ready when it does.
                if let Ok(mut drafts) = self.drafts.lock() {
                    if let Some(awaiting) = drafts.awaiting(&session, &rid) {
                        awaiting.pollers.push(notifier);
                        return reply.poll(PollEvents::empty());
                    }
                }
                match self.authority.ask_for(&session, &rid) {
                    Some(ask) => ask,
                    None => return reply.error(Errno::ENOENT),
                }
            }
        };
        let waiter = Box::new(move |_: Arc<Response>| {
            let _ = notifier.notify();
        });
        match self.authority.wait(&ask, waiter) {
            Ok(Some(_)) => reply.poll(PollEvents::POLLIN),
            Ok(None) => reply.poll(PollEvents::empty()),
            Err(error) => reply.error(errno(&error)),
        }
    }
}
