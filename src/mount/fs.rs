//! The FUSE adapter: file operations translated into [`Authority`] calls.
//!
//! A blocked read of a response parks its `ReplyData` in a slot that the
//! answer (or the kernel's interrupt) takes, so no thread waits per asker.

mod asking;
mod namespace;
mod permissions;

use super::caller::Namespaces;
use super::drafts::{
    AwaitingRead, Draft, DraftLog, Drafts, EarlyRead, Raising, ReadAt, Submit, Written,
};
use super::nodes::{Folder, InodeKey, Inodes, Node, Owner, ResponseIo};
use super::parking::{Parked, ParkedRead, Woken};
use crate::facts::request::Request as AskRequest;
use crate::session::chain::reviews::JudgeReader;
use crate::session::tree::ask::{serial_of, Response};
use crate::session::tree::control::ControlCommand;
use crate::session::view::pi_view::PiViews;
use crate::session::{Authority, AuthorityError, Caller, SpawnSpec};
use asking::Adopted;
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenFlags, PollEvents, PollFlags, PollNotifier, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyPoll, ReplyWrite, Request, WriteFlags,
};
use std::collections::{BTreeMap, HashMap};
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
    /// The enforcement views this mount makes for `spawn … view=DIR`.
    pub views: std::sync::OnceLock<Arc<crate::view::Views>>,
    /// The kernel mechanism's sandboxes (`spawn … kernel`, `enforce`);
    /// unset where the daemon cannot run it.
    pub kernel: std::sync::OnceLock<Arc<crate::kernel::Kernel>>,
    /// The outbox names created and not yet asked, for a server that takes
    /// the connection over (`DraftLog`); none without a state dir.
    pub draft_log: std::sync::OnceLock<DraftLog>,
    /// Requests a previous server's exchanges had written and not raised
    /// (from its drafts log), by (session, rid), for `adopt_stale`.
    recovered: Mutex<HashMap<(String, String), Vec<u8>>>,
    /// Requests a previous server logged in part (`drafts.log`), for the
    /// handle whose next write continues one.
    recovered_partials: Mutex<HashMap<(String, String), Vec<u8>>>,
    inodes: Arc<Inodes>,
    uid: u32,
    gid: u32,
    started: SystemTime,
    next_fh: AtomicU64,
    /// The first handle this server gave: a smaller one was given by a
    /// server before it on the same connection (`docs/restart.md`).
    first_fh: AtomicU64,
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
    /// Where the attached judges and their lease handles are kept for the
    /// next server (`judges.rs`).
    judge_log: super::judges::JudgeLog,
    /// `ctl` handles → the sessions spawned through them with `lease`
    /// (id and serial), ended when the handle closes.
    session_leases: Mutex<HashMap<u64, Vec<(String, u64)>>>,
    /// Open `events` handles → (session, cursor).
    event_cursors: Mutex<HashMap<u64, (String, crate::session::observe::events::Cursor)>>,
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
        AuthorityError::TooLarge(_) => Errno::EFBIG,
        AuthorityError::NotEmpty(_) => Errno::ENOTEMPTY,
        AuthorityError::Full(_) => Errno::ENOSPC,
        AuthorityError::AuditUnavailable(_, code) => Errno::from_i32(*code),
    }
}

/// Whether an open handle of `node` holds state of the server that gave
/// it (a draft, an exchange, a cursor, a snapshot, a review, a lease).
fn holds_handle_state(node: &Node) -> bool {
    !matches!(
        node,
        Node::Readme
            | Node::SessionJson(_)
            | Node::RulesJson(_)
            | Node::AuditLog
            | Node::Response(..)
            | Node::InboxItem(..)
            | Node::Grant(..)
            | Node::PiResponse(..)
    )
}

/// The generated files a handle reads as they were at its open (a handle
/// of a previous server, which kept no snapshot, reads them afresh).
fn is_snapshotted(node: &Node) -> bool {
    matches!(
        node,
        Node::SessionJson(_) | Node::RulesJson(_) | Node::InboxItem(..) | Node::Grant(..)
    )
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
        Self::with_inode_key(authority, audit_path, workers, InodeKey::random())
    }

    /// The filesystem, its inode numbers derived with `key` (the
    /// supervisor's, so every server it starts numbers nodes alike).
    pub fn with_inode_key(
        authority: Arc<Authority>,
        audit_path: Option<std::path::PathBuf>,
        workers: usize,
        key: InodeKey,
    ) -> Self {
        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        // A forgotten ask's files leave the inode table too.
        let inodes = Arc::new(Inodes::with_key(key));
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
            first_fh: AtomicU64::new(1),
            next_ask: AtomicU64::new(1),
            drafts: Mutex::new(Drafts::default()),
            nonblocking: Mutex::new(HashMap::new()),
            exchange_base: Mutex::new(HashMap::new()),
            served: Arc::new(Mutex::new(HashMap::new())),
            judge_payloads: Arc::new(Mutex::new(HashMap::new())),
            leases: Mutex::new(HashMap::new()),
            judge_log: Default::default(),
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
            views: std::sync::OnceLock::new(),
            kernel: std::sync::OnceLock::new(),
            draft_log: std::sync::OnceLock::new(),
            recovered: Mutex::new(HashMap::new()),
            recovered_partials: Mutex::new(HashMap::new()),
        }
    }

    /// Handles start at `epoch << 40`: the epoch grows with every start,
    /// so a handle a previous server gave (still open in some process
    /// across a restart) is never one this server gives, and is told
    /// apart by [`Self::is_stale`].
    pub fn start_handles_at_epoch(&self, epoch: u64) {
        let first = epoch.saturating_mul(1 << 40).max(1);
        self.first_fh.store(first, Ordering::Relaxed);
        self.next_fh.store(first, Ordering::Relaxed);
    }

    /// Whether `fh` was given by a server before this one: what that
    /// server kept for it (a draft, an exchange, a cursor) is gone.
    fn is_stale(&self, fh: u64) -> bool {
        fh != 0 && fh < self.first_fh.load(Ordering::Relaxed)
    }

    /// This server took over a connection another one served: the nodes
    /// the mount shows now are found by the numbers the kernel knows them
    /// by (`Inodes::adopt_prior`). Returns how many.
    ///
    /// `drafts`: the outbox names the previous server had created and not
    /// yet asked (its `DraftLog`), so their first write is taken.
    pub fn adopt_prior_nodes(&self, drafts: &[(bool, String, String)]) -> usize {
        /// A bound on the walk (a tree this size is far past the limits).
        const MAX_NODES: usize = 4_000_000;
        let mut found: Vec<Node> = drafts
            .iter()
            .map(|(exchange, session, rid)| match exchange {
                true => Node::Exchange(session.clone(), rid.clone()),
                false => Node::Request(session.clone(), rid.clone()),
            })
            .collect();
        let mut queue = std::collections::VecDeque::from([Node::Root]);
        while let Some(node) = queue.pop_front() {
            if found.len() >= MAX_NODES {
                break;
            }
            if node.is_dir() {
                queue.extend(self.entries(&node).into_iter().map(|(_, child)| child));
            }
            // An outbox name lists as its request; the same name opened
            // read-write was an exchange, a node of its own number.
            if let Node::Request(session, rid) = &node {
                found.push(Node::Exchange(session.clone(), rid.clone()));
            }
            found.push(node);
        }
        // Inbox entries a person decided and that have left their inbox:
        // a decision in flight at the restart is re-sent to them.
        for (session, ask) in self.authority.person_decisions() {
            found.push(Node::InboxItem(session, ask));
        }
        self.inodes.adopt_prior(found)
    }

    /// Requests a previous server's exchanges had written and not raised
    /// (its drafts log): a handle of theirs is taken over with its request.
    pub fn recover_requests(
        &self,
        bodies: HashMap<(String, String), Vec<u8>>,
        partials: HashMap<(String, String), Vec<u8>>,
    ) {
        if let Ok(mut recovered) = self.recovered_partials.lock() {
            recovered.extend(partials);
        }
        if let Ok(mut recovered) = self.recovered.lock() {
            recovered.extend(bodies);
        }
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
            self.save_judges();
        }
    }

    /// Keeps the attached judges and their lease handles for the next
    /// server (`judges.attached`).
    fn save_judges(&self) {
        let leases = self.leases.lock().map(|l| l.clone()).unwrap_or_default();
        self.judge_log
            .save(&self.authority.attached_judges(), &leases);
    }

    /// The judges a previous server on this connection had attached
    /// (`kept`: name → lease handles still open in the kernel, already
    /// attached in the authority), and where to keep them from now on.
    pub fn adopt_judges(&self, state_dir: &std::path::Path, kept: &BTreeMap<String, Vec<u64>>) {
        if let Ok(mut leases) = self.leases.lock() {
            for (name, handles) in kept {
                for fh in handles {
                    leases.insert(*fh, name.clone());
                }
            }
        }
        self.judge_log.set_path(state_dir.join(super::judges::FILE));
        self.save_judges();
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
        let deliver: crate::session::observe::events::EventDeliver =
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

    /// A `ctl` write, as `caller`.
    fn control(
        &self,
        session: &str,
        caller: Caller,
        (fh, pid): (u64, u32),
        text: &str,
    ) -> Result<(), AuthorityError> {
        match ControlCommand::parse(text).map_err(AuthorityError::Invalid)? {
            ControlCommand::Spawn {
                name,
                spec,
                lease,
                views,
                kernel,
            } => {
                if !views.is_empty() {
                    self.may_open_views(caller)?;
                }
                let (id, serial) = if lease || !views.is_empty() {
                    self.authority
                        .spawn_numbered(session, &name, spec, caller)?
                } else {
                    return self.authority.spawn(session, &name, spec, caller).map(drop);
                };
                let opened = if kernel {
                    match self.kernel.get() {
                        Some(k) => k.plan(&id, serial, &views),
                        None => Err("this daemon cannot run the kernel mechanism (it needs root and fanotify permission events)".into()),
                    }
                } else {
                    self.open_views(&id, serial, &views)
                };
                if let Err(error) = opened {
                    // No session without the views it was spawned for.
                    self.authority.end_leased(&id, serial);
                    return Err(AuthorityError::Invalid(error));
                }
                if !lease {
                    return Ok(());
                }
                match self.session_leases.lock() {
                    Ok(mut leases) => {
                        // Sessions ended meanwhile leave the handle's list:
                        // a loop of spawns and ends on one handle must not
                        // grow it without bound.
                        let held = leases.entry(fh).or_default();
                        held.retain(|(id, serial)| self.authority.is_session(id, *serial));
                        self.authority.note_lease(&id, serial, pid, fh);
                        held.push((id, serial));
                        Ok(())
                    }
                    // A lease that cannot be kept: no session left behind.
                    Err(_) => {
                        self.authority.end_leased(&id, serial);
                        self.sweep_views();
                        Err(AuthorityError::Invalid(
                            "the lease could not be recorded".into(),
                        ))
                    }
                }
            }
            ControlCommand::End { name } => {
                let ended = self.authority.end_child(session, &name, caller);
                self.sweep_views();
                ended
            }
            ControlCommand::Enforce { listener, ruleset } => {
                // Only from inside the sandbox, which holds the
                // descriptors named (the operator has no standing here).
                if caller.in_daemon_namespace {
                    return Err(AuthorityError::PermissionDenied(
                        "enforce is said by permfs wall inside a sandbox".into(),
                    ));
                }
                let kernel = self.kernel.get().ok_or_else(|| {
                    AuthorityError::Invalid("this daemon runs no kernel mechanism".into())
                })?;
                let serial = self
                    .authority
                    .with_tree(|t| t.get(session).map(|s| s.serial))
                    .ok_or_else(|| AuthorityError::NotFound(format!("no session {session:?}")))?;
                kernel
                    .attach(session, serial, pid, listener, ruleset)
                    .map_err(AuthorityError::Invalid)
            }
        }
    }

    /// Leases held through `ctl` handles a previous server on this
    /// connection opened: (handle, session, serial), as
    /// `Authority::restore` kept them.
    pub fn adopt_leases(&self, leases: Vec<(u64, String, u64)>) {
        if let Ok(mut held) = self.session_leases.lock() {
            for (handle, id, serial) in leases {
                tracing::info!(session = %id, handle, "a lease's ctl handle outlived the previous server: kept");
                held.entry(handle).or_default().push((id, serial));
            }
        }
    }

    /// A view opens files as the daemon: only the operator, from the
    /// daemon's own mount namespace, may have one made (never a sandboxed
    /// caller, whatever its uid).
    fn may_open_views(&self, caller: Caller) -> Result<(), AuthorityError> {
        if caller.in_daemon_namespace && (caller.uid == 0 || caller.uid == self.uid) {
            return Ok(());
        }
        Err(AuthorityError::PermissionDenied(
            "view= is for the operator, outside any sandbox".into(),
        ))
    }

    fn open_views(&self, id: &str, serial: u64, roots: &[String]) -> Result<(), String> {
        if roots.is_empty() {
            return Ok(());
        }
        match self.views.get() {
            Some(views) => views.open(id, serial, roots),
            None => Err("this mount serves no enforcement views".into()),
        }
    }

    /// Unmounts the views of sessions that ended.
    pub fn sweep_views(&self) {
        if let Some(views) = self.views.get() {
            views.sweep();
        }
        if let Some(kernel) = self.kernel.get() {
            kernel.sweep();
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
            self.save_judges();
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
            // Each open copies a page of asks: an operator finds here who
            // reads `pending` how often (`permfs prompt` reads it at start
            // and when its event stream lost track, not per event).
            tracing::debug!(
                %session,
                listed = view["pending"].as_array().map_or(0, Vec::len),
                more = %view["more"],
                "pending listing opened"
            );
            let mut bytes = serde_json::to_vec_pretty(&view).unwrap_or_default();
            bytes.push(b'\n');
            if let Ok(mut snapshots) = self.snapshots.lock() {
                snapshots.insert(fh, bytes);
            }
        }
        if is_snapshotted(&node) {
            // One handle reads one version: read in several calls while
            // the session changes (a view added, a grant recorded), a
            // generated file would otherwise mix two (a torn JSON).
            if let Some(bytes) = self.content(&node) {
                if let Ok(mut snapshots) = self.snapshots.lock() {
                    snapshots.insert(fh, bytes);
                }
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
            if let Some(log) = self.draft_log.get() {
                log.created(exchange, &session, rid, &drafts);
            }
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
        // An ask raised here fixes its facts as this caller sees the
        // filesystem (its own mount namespace when it is sandboxed).
        let _asker = crate::facts::fence::AskerScope::enter(req.pid());
        // What this read's interrupt, if any, will name.
        let unique: u64 = req.unique().into();
        // A previous server's handle on an exchange whose ask went in is
        // taken over first, with where its answer starts.
        if self.is_stale(fh.0) {
            if let Some(node) = self.inodes.node(ino.0) {
                let _ = self.adopt_stale(fh.0, &node, Some(offset), None);
            }
        }
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
        // A previous server's handle reads on where the node alone says
        // what to read (a view, an answer by its name); where the handle
        // held state (a draft, a cursor, a snapshot) that died with that
        // server, it is stale. A judge's `next` is the exception: a read
        // from its start held nothing yet (a judge waiting for a review,
        // the read re-sent after a restart) and is served like a new one;
        // a read further on was the end of a review the judge has whole
        // (one read takes it) and ends it. A review in the judge's hands
        // then is walked again (under a new id) by the new server.
        if self.is_stale(fh.0) {
            if let Node::JudgeNext(_) = &node {
                if offset > 0 {
                    return reply.data(&[]);
                }
            } else if holds_handle_state(&node) && self.exchange_on(fh.0).is_none() {
                return reply.error(Errno::ESTALE);
            }
        }
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
        if is_snapshotted(&node) {
            let snapshot = self.snapshots.lock().ok().and_then(|snapshots| {
                snapshots
                    .get(&fh.0)
                    .map(|bytes| slice(bytes, offset, size).to_vec())
            });
            if let Some(bytes) = snapshot {
                return reply.data(&bytes);
            }
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
        // An ask raised here fixes its facts as this caller sees the
        // filesystem (its own mount namespace when it is sandboxed).
        let _asker = crate::facts::fence::AskerScope::enter(req.pid());
        // A decision names its ask (the inbox entry): it holds no state in
        // its handle, so one in flight across a restart is taken.
        if self.is_stale(fh.0) {
            match self.inodes.node(ino.0) {
                // A decision the previous server took and journaled before
                // it could answer the write, re-sent by the kernel.
                Some(Node::InboxItem(session, ask))
                    if self.authority.decided_by_person(
                        &session,
                        &ask,
                        &String::from_utf8_lossy(data),
                    ) =>
                {
                    return reply.written(data.len() as u32);
                }
                Some(Node::InboxItem(..)) => {}
                Some(node) => match self.adopt_stale(fh.0, &node, None, Some(offset)) {
                    // The kernel re-sent the write whose ask went in
                    // before the old server could answer it.
                    Adopted::Asked => return reply.written(data.len() as u32),
                    Adopted::Draft => {}
                    Adopted::Stale => return reply.error(Errno::ESTALE),
                },
                None => return reply.error(Errno::ESTALE),
            }
        }
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
                        if end > self.authority.request_limit() {
                            draft.oversized = true;
                            draft.data.clear();
                            if !draft.exchange {
                                // As for a request file that completes: the
                                // refusal is in the outbox before the write
                                // returns, so the writer's read of the
                                // response finds it (at the asynchronous
                                // release it raced that read).
                                draft.submitted = true;
                                let (session, rid) = (draft.session.clone(), draft.rid.clone());
                                drop(drafts);
                                let limit = self.authority.request_limit();
                                let reason = format!(
                                    "request is over the {limit}-byte limit (limits.requestBytes)"
                                );
                                if let Err(error) =
                                    self.raise(fh.0, &session, &rid, Err(reason), None)
                                {
                                    tracing::debug!(?error, "an oversized request was refused");
                                }
                            }
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
                            let parsed = self.authority.read_request(&request);
                            return match self.raise(fh.0, &session, &rid, parsed, None) {
                                Ok(()) => reply.written(data.len() as u32),
                                Err(error) => reply.error(error),
                            };
                        }
                        if draft.exchange && written == Written::Complete {
                            // Answer the write, then raise: the asker's
                            // way to its read overlaps the judging. The
                            // request is in the drafts log first, so a
                            // server that dies before the ask is journaled
                            // leaves it to the next one (`adopt_stale`).
                            draft.submitted = true;
                            draft.raising = Some(Raising::default());
                            let written = (
                                draft.session.clone(),
                                draft.rid.clone(),
                                std::mem::take(&mut draft.data),
                            );
                            drop(drafts);
                            let (session, rid, request) = written;
                            if let Some(log) = self.draft_log.get() {
                                log.written(&session, &rid, &request, &self.drafts);
                            }
                            reply.written(data.len() as u32);
                            let request_len = Some(request.len() as u64);
                            let parsed = self.authority.read_request(&request);
                            return self.raise_written(fh.0, &session, &rid, parsed, request_len);
                        }
                        if !draft.oversized {
                            if let Some(log) = self.draft_log.get() {
                                let (session, rid, data) =
                                    (draft.session.clone(), draft.rid.clone(), draft.data.clone());
                                log.partial(&session, &rid, &data, &drafts);
                            }
                        }
                        Ok(())
                    }
                    // The newline a client writes after its request.
                    Some(_) if data.trim_ascii().is_empty() => Ok(()),
                    // Bytes after the write that made it oversized: the
                    // refusal stands, whatever comes after.
                    Some(draft) if draft.oversized => Ok(()),
                    _ => Err(AuthorityError::Exists(
                        "the request was already submitted".into(),
                    )),
                }
            }
            Node::PiRequest(s, t, name) => self.pi.write(s, t, name, offset, data),
            Node::InboxItem(session, ask) => self.authority.decide(session, ask, caller(), &text()),
            Node::Ctl(session) => self.control(session, caller(), (fh.0, req.pid()), &text()),
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
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // An ask raised here fixes its facts as this caller sees the
        // filesystem (its own mount namespace when it is sandboxed).
        let _asker = crate::facts::fence::AskerScope::enter(req.pid());
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
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        // An ask raised here fixes its facts as this caller sees the
        // filesystem (its own mount namespace when it is sandboxed).
        let _asker = crate::facts::fence::AskerScope::enter(req.pid());
        let node = self.inodes.node(ino.0);
        match &node {
            // Only a written handle raises at its last close; a reader's
            // close leaves the draft as it is.
            Some(Node::PiRequest(s, t, name))
                if self.pi_writers.lock().is_ok_and(|mut w| w.remove(&fh.0)) =>
            {
                let _ = self.pi.close(s, t, name, true);
            }
            Some(Node::Response(..)) => self.inodes.close_response(ino.0, fh.0),
            Some(Node::Ctl(_)) => {
                for (id, serial) in take(&self.session_leases, fh.0).unwrap_or_default() {
                    if self.authority.end_leased(&id, serial) {
                        tracing::info!(session = %id, "its spawning handle closed: ended (lease)");
                    }
                }
                self.sweep_views();
            }
            // A previous server's exchange: closing it withdraws its ask,
            // as it would have there.
            Some(node) if self.is_stale(fh.0) => {
                let _ = self.adopt_stale(fh.0, node, None, None);
            }
            _ => {}
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
        // An ask raised here fixes its facts as this caller sees the
        // filesystem (its own mount namespace when it is sandboxed).
        let _asker = crate::facts::fence::AskerScope::enter(req.pid());
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
                Ok(()) => {
                    self.save_judges();
                    reply.entry(
                        &Duration::ZERO,
                        &self.entry_attr(&Node::JudgeDir(name.to_string())),
                        Generation(0),
                    )
                }
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
                Ok(()) => {
                    self.save_judges();
                    reply.ok()
                }
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
        if self.is_stale(fh.0) && self.adopt_stale(fh.0, &node, None, None) == Adopted::Stale {
            return reply.error(Errno::ESTALE);
        }
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
