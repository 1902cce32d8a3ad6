//! What each inode of the mount is, and the stable inode numbers.

pub use crate::session::view::pi_view::Folder;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long the entries of a forgotten ask's files are kept after it is
/// forgotten: longer than any entry TTL the mount gives (1 s), so a name
/// the kernel still caches, and a request name used again at once, keep
/// their number until the kernel asks anew.
pub const RETIRE_AFTER: Duration = Duration::from_secs(3);

/// Every kind of file and directory the mount shows.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Node {
    Root,
    Readme,
    SessionsDir,
    SessionDir(String),
    SessionJson(String),
    RulesJson(String),
    Ctl(String),
    Events(String),
    /// Every ask waiting at the session or below that the reader may
    /// decide, oldest first (a snapshot taken at open).
    Pending(String),
    Query(String),
    /// `ask`: the one-descriptor ask at a fixed name. Each read-write open
    /// is an ask of its own, given an outbox name (`ask-<n>`) by the
    /// daemon; the name is cached by the kernel, so an ask costs no lookup.
    AskFile(String),
    AuditLog,
    OutboxDir(String),
    Request(String, String),
    Response(String, String),
    /// `outbox/<rid>` with no suffix: the one-descriptor ask, written and
    /// read through the descriptor that created it.
    Exchange(String, String),
    InboxDir(String),
    InboxItem(String, String),
    GrantsDir(String),
    Grant(String, String),
    ChildrenDir(String),
    /// `pi/`: the session's pi-compatible forwarding view, laid out as
    /// pi-permission-system's forwarding directory.
    PiDir(String),
    /// `pi/sessions/`
    PiSessions(String),
    /// `pi/sessions/<target>/`, made by the child.
    PiTarget(String, String),
    /// `pi/sessions/<target>/requests/` or `responses/`.
    PiFolder(String, String, Folder),
    /// `requests/<name>`: a temporary file, or a pending forwarded ask.
    PiRequest(String, String, String),
    /// `responses/<name>`: exists once the ask is answered.
    PiResponse(String, String, String),
    JudgesDir,
    JudgeDir(String),
    JudgeNext(String),
    JudgeVerdict(String),
    JudgeLease(String),
}

impl Node {
    /// The session a node belongs to, for the nodes inside a session's
    /// directory (and the directory itself).
    pub fn session(&self) -> Option<&str> {
        match self {
            Node::SessionDir(s)
            | Node::SessionJson(s)
            | Node::RulesJson(s)
            | Node::Ctl(s)
            | Node::Events(s)
            | Node::Pending(s)
            | Node::Query(s)
            | Node::AskFile(s)
            | Node::OutboxDir(s)
            | Node::Request(s, _)
            | Node::Response(s, _)
            | Node::Exchange(s, _)
            | Node::InboxDir(s)
            | Node::InboxItem(s, _)
            | Node::GrantsDir(s)
            | Node::Grant(s, _)
            | Node::ChildrenDir(s)
            | Node::PiDir(s)
            | Node::PiSessions(s)
            | Node::PiTarget(s, _)
            | Node::PiFolder(s, ..)
            | Node::PiRequest(s, ..)
            | Node::PiResponse(s, ..) => Some(s),
            Node::Root
            | Node::Readme
            | Node::SessionsDir
            | Node::AuditLog
            | Node::JudgesDir
            | Node::JudgeDir(_)
            | Node::JudgeNext(_)
            | Node::JudgeVerdict(_)
            | Node::JudgeLease(_) => None,
        }
    }

    /// Whose the node is: the bindings as file ownership (see
    /// `PermFs::ownership`, which turns this into a uid).
    pub fn owner(&self) -> Owner {
        match self {
            Node::Root
            | Node::SessionsDir
            | Node::Readme
            | Node::AuditLog
            | Node::JudgesDir
            | Node::JudgeDir(_)
            | Node::JudgeNext(_)
            | Node::JudgeVerdict(_)
            | Node::JudgeLease(_) => Owner::MountOwner,
            Node::InboxDir(_)
            | Node::InboxItem(..)
            | Node::Events(_)
            | Node::Pending(_)
            | Node::GrantsDir(_)
            | Node::Grant(..) => Owner::Decider,
            _ => Owner::Asker,
        }
    }

    /// The mode `ls -l` shows: fixed by the kind of node, so the checks
    /// that need only the mode (may others search this directory?) take
    /// no lock.
    pub fn mode(&self) -> u16 {
        match self {
            Node::Root | Node::SessionsDir | Node::SessionDir(_) => 0o755,
            Node::Readme | Node::SessionJson(_) | Node::RulesJson(_) | Node::Grant(..) => 0o444,
            Node::AuditLog | Node::JudgeNext(_) | Node::JudgeLease(_) => 0o400,
            Node::JudgesDir | Node::JudgeDir(_) => 0o700,
            Node::JudgeVerdict(_) => 0o200,
            Node::Ctl(_) => 0o220,
            Node::Query(_)
            | Node::AskFile(_)
            | Node::Request(..)
            | Node::Exchange(..)
            | Node::InboxItem(..)
            | Node::PiRequest(..) => 0o660,
            Node::Response(..) | Node::Events(_) | Node::Pending(_) | Node::PiResponse(..) => 0o440,
            Node::OutboxDir(_)
            | Node::PiDir(_)
            | Node::PiSessions(_)
            | Node::PiTarget(..)
            | Node::PiFolder(..) => 0o770,
            Node::ChildrenDir(_) | Node::GrantsDir(_) => 0o775,
            Node::InboxDir(_) => 0o750,
        }
    }

    pub fn is_dir(&self) -> bool {
        matches!(
            self,
            Node::Root
                | Node::SessionsDir
                | Node::SessionDir(_)
                | Node::OutboxDir(_)
                | Node::InboxDir(_)
                | Node::GrantsDir(_)
                | Node::ChildrenDir(_)
                | Node::PiDir(_)
                | Node::PiSessions(_)
                | Node::PiTarget(..)
                | Node::PiFolder(..)
                | Node::JudgesDir
                | Node::JudgeDir(_)
        )
    }
}

/// Which binding owns a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// The daemon's own uid: the tree, the audit log, the judges.
    MountOwner,
    /// The session's asker: its outbox, ctl, query, children, pi view.
    Asker,
    /// The session's decider (the mount owner when none is bound).
    Decider,
}

/// Inode numbers handed out on first sight and kept while the kernel holds
/// a reference (its lookup count): a `FORGET` that brings the count to
/// zero frees the number, so serving many asks does not grow the table.
#[derive(Debug)]
pub struct Inodes {
    inner: Mutex<InodeMaps>,
}

/// Inode numbers are a keyed hash of the node, not counted up: a FUSE
/// file handle is the node id plus a generation, so a process that may
/// call `open_by_handle_at` (root or `CAP_DAC_READ_SEARCH` in a sandbox)
/// could otherwise reach any session's files by guessing small numbers.
/// 62 bits of a keyed SHA-256 cannot be guessed without the key.
///
/// They are a function of the node, not of the order nodes were seen in,
/// so a server that takes over the connection of one that died (with the
/// same key, which the supervisor holds: `docs/restart.md`) gives every
/// node the number the kernel already knows it by: a sandbox's bind of a
/// session directory keeps working across the restart.
struct InodeMaps {
    by_node: HashMap<Node, u64>,
    by_ino: HashMap<u64, (Node, u64)>,
    key: InodeKey,
    /// Nodes a previous server may have given the kernel, by number (see
    /// [`Inodes::adopt_prior`]); moved into the table when the kernel
    /// names one.
    prior: HashMap<u64, Node>,
    /// Entries of forgotten asks' files, dropped once due unless looked up
    /// again meanwhile: (due, number), and the numbers not looked up since.
    retiring: VecDeque<(Instant, u64)>,
    untouched: HashSet<u64>,
    /// Numbers retired while the kernel still held references to them,
    /// with how many: the same name asked anew gets the same number, and
    /// the kernel's `FORGET` of the old references can come after that
    /// (its old inode is evicted once our `LOOKUP` says the name is gone,
    /// and the forget is queued), so the new node starts from the old
    /// count instead of being ended by it.
    orphans: HashMap<u64, u64>,
    /// Responses whose inode has been opened: what its pages may hold.
    pages: HashMap<u64, ResponsePages>,
}

/// What the kernel may hold for one response inode. A number outlives an
/// ask (a name asked again at once keeps it), so its pages can hold an
/// older ask's answer, and every handle open on it can fill them with the
/// answer it was opened for (a read after its pages were dropped, or a
/// private mapping): only one ask's handles may read through them.
/// Asks are told apart by their serial (`session::tree::ask::serial_of`), 0
/// when there was none yet. An inode's record goes when it holds nothing
/// and nothing is open, or with its number.
#[derive(Debug, Default)]
struct ResponsePages {
    /// The ask whose answer the pages may hold; `None`: never filled.
    holds: Option<u64>,
    /// Handles open on the inode, and the ask each was opened for. Direct
    /// ones count too: a private mapping of a direct handle still reads
    /// through the pages.
    open: Vec<(u64, u64)>,
}

/// How a response handle reads its answer, decided at its open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseIo {
    /// Through the pages, which hold this ask's answer or nothing.
    Cached,
    /// The daemon fills the pages with the answer before the open is
    /// answered (no handle is open, so no read can be holding a page),
    /// then reads are cached. `stale`: another ask's answer may be in
    /// them, to be dropped first.
    Fill { stale: bool },
    /// Every read comes to the daemon: the answer is not there yet, or
    /// another ask's handle is open on the same inode.
    Direct,
}

impl std::fmt::Debug for InodeMaps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InodeMaps")
            .field("nodes", &self.by_ino.len())
            .finish_non_exhaustive()
    }
}

impl InodeMaps {
    /// The node's number: unpredictable, never 0 or 1 (the root), below
    /// the stand-ins of [`Inodes::listed`] (bit 63), and not in use. The
    /// first candidate is what every server with this key gives the node;
    /// the next ones (a collision in 62 bits) only this one.
    fn allocate(&mut self, node: &Node) -> u64 {
        let mut probe = 0;
        loop {
            let ino = self.key.number(node, probe);
            if ino > 1 && !self.by_ino.contains_key(&ino) {
                return ino;
            }
            probe += 1;
        }
    }
}

/// The secret inode numbers are derived with (32 bytes).
#[derive(Clone, Copy)]
pub struct InodeKey(pub [u8; 32]);

impl InodeKey {
    /// A fresh random key (from the kernel; a hasher's random state if
    /// `getrandom` fails, which it does not on Linux >= 3.17).
    pub fn random() -> Self {
        let mut key = [0u8; 32];
        random_bytes(&mut key);
        Self(key)
    }

    /// Candidate `probe` for `node`. The node is named by its `Debug`
    /// form (variant and fields), which a new build keeps unless a variant
    /// is renamed.
    fn number(&self, node: &Node, probe: u32) -> u64 {
        use sha2::{Digest, Sha256};
        let mut hash = Sha256::new();
        hash.update(self.0);
        hash.update(probe.to_le_bytes());
        hash.update(format!("{node:?}").as_bytes());
        let digest = hash.finalize();
        let mut word = [0u8; 8];
        word.copy_from_slice(&digest[..8]);
        u64::from_le_bytes(word) & ((1 << 62) - 1)
    }
}

/// How many references a node adopted from a previous server is taken to
/// have: the kernel's count is unknown, so the entry stays (a FORGET
/// never brings it to zero; only a retired ask's entries leave).
const PRIOR_REFERENCES: u64 = 1 << 40;

impl Default for Inodes {
    fn default() -> Self {
        Self::with_key(InodeKey::random())
    }
}

impl Inodes {
    /// A table whose numbers are derived with `key`.
    pub fn with_key(key: InodeKey) -> Self {
        let mut maps = InodeMaps {
            by_node: HashMap::new(),
            by_ino: HashMap::new(),
            key,
            prior: HashMap::new(),
            retiring: VecDeque::new(),
            untouched: HashSet::new(),
            orphans: HashMap::new(),
            pages: HashMap::new(),
        };
        maps.by_node.insert(Node::Root, 1);
        maps.by_ino.insert(1, (Node::Root, 1));
        Self {
            inner: Mutex::new(maps),
        }
    }

    fn maps(&self) -> std::sync::MutexGuard<'_, InodeMaps> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The node's number, allocated if it has none (no reference taken).
    pub fn ino(&self, node: &Node) -> u64 {
        let mut maps = self.maps();
        if let Some(ino) = maps.by_node.get(node) {
            return *ino;
        }
        let ino = maps.allocate(node);
        maps.prior.remove(&ino);
        let references = maps.orphans.remove(&ino).unwrap_or(0);
        maps.by_node.insert(node.clone(), ino);
        maps.by_ino.insert(ino, (node.clone(), references));
        ino
    }

    /// The node's number for a reply that gives the kernel a reference
    /// (lookup, create, mkdir): counts it.
    pub fn referenced(&self, node: &Node) -> u64 {
        let ino = self.ino(node);
        let mut maps = self.maps();
        if let Some((_, count)) = maps.by_ino.get_mut(&ino) {
            *count += 1;
        }
        if !maps.retiring.is_empty() {
            // Looked up again (the same name asked anew): not dropped.
            maps.untouched.remove(&ino);
            maps.drop_retired(Instant::now());
        }
        ino
    }

    /// The number a directory listing shows: the real one when the node has
    /// one, else a stable stand-in (listing must not allocate what the
    /// kernel will never forget).
    pub fn listed(&self, node: &Node) -> u64 {
        if let Some(ino) = self.maps().by_node.get(node) {
            return *ino;
        }
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        node.hash(&mut hasher);
        hasher.finish() | (1 << 63)
    }

    /// The kernel dropped `count` references.
    pub fn forget(&self, ino: u64, count: u64) {
        if ino == 1 {
            return;
        }
        let mut maps = self.maps();
        let gone = match maps.by_ino.get_mut(&ino) {
            Some((_, references)) => {
                *references = references.saturating_sub(count);
                *references == 0
            }
            None => {
                if let Some(references) = maps.orphans.get_mut(&ino) {
                    *references = references.saturating_sub(count);
                    if *references == 0 {
                        maps.orphans.remove(&ino);
                    }
                }
                false
            }
        };
        if gone {
            maps.remove(ino);
            maps.shrink_if_sparse();
        }
    }

    /// Handle `fh` opens response inode `ino` for the ask numbered `ask`
    /// (its answer decided or not): how it must read. Registered until
    /// [`Self::close_response`].
    pub fn open_response(&self, ino: u64, fh: u64, ask: Option<u64>, decided: bool) -> ResponseIo {
        let mut maps = self.maps();
        if !maps.by_ino.contains_key(&ino) {
            return ResponseIo::Direct;
        }
        let pages = maps.pages.entry(ino).or_default();
        let ask = ask.unwrap_or(0);
        let io = if !decided || ask == 0 || pages.open.iter().any(|&(_, a)| a != ask) {
            ResponseIo::Direct
        } else if pages.holds == Some(ask) {
            ResponseIo::Cached
        } else if pages.open.is_empty() {
            ResponseIo::Fill {
                stale: pages.holds.is_some(),
            }
        } else {
            // This ask's handles that read directly are open, and one of
            // them may be reading a page in: filling could wait on it.
            ResponseIo::Direct
        };
        pages.open.push((fh, ask));
        io
    }

    /// The pages of `ino` were emptied of any other ask's answer, and
    /// filled (or partly filled) with the answer of ask `ask`.
    pub fn filled_response(&self, ino: u64, ask: u64) {
        if let Some(pages) = self.maps().pages.get_mut(&ino) {
            pages.holds = Some(ask);
        }
    }

    /// Handle `fh` on `ino` was closed (nothing when it was no response's).
    pub fn close_response(&self, ino: u64, fh: u64) {
        let mut maps = self.maps();
        let Some(pages) = maps.pages.get_mut(&ino) else {
            return;
        };
        pages.open.retain(|&(open, _)| open != fh);
        if pages.open.is_empty() && pages.holds.is_none() {
            maps.pages.remove(&ino);
        }
    }

    pub fn node(&self, ino: u64) -> Option<Node> {
        let mut maps = self.maps();
        if let Some((node, _)) = maps.by_ino.get(&ino) {
            return Some(node.clone());
        }
        // A number the kernel had from the server before this one.
        let node = maps.prior.remove(&ino)?;
        if maps.by_node.contains_key(&node) {
            return None;
        }
        maps.by_node.insert(node.clone(), ino);
        maps.by_ino.insert(ino, (node.clone(), PRIOR_REFERENCES));
        Some(node)
    }

    /// This server took over a connection from one that died: `nodes`
    /// (everything the mount shows now) may be known to the kernel by the
    /// numbers that server gave them, which are the ones this key gives
    /// them first. They are found by number when the kernel names one.
    pub fn adopt_prior(&self, nodes: impl IntoIterator<Item = Node>) -> usize {
        let mut maps = self.maps();
        for node in nodes {
            let ino = maps.key.number(&node, 0);
            if ino > 1 && !maps.by_ino.contains_key(&ino) {
                maps.prior.insert(ino, node);
            }
        }
        maps.prior.len()
    }

    /// The ask `rid` of `session` was forgotten: the entries of its files
    /// (which the kernel may keep cached, sending no FORGET) are dropped
    /// after [`RETIRE_AFTER`], unless looked up again meanwhile. A number
    /// dropped reads `ENOENT`.
    pub fn retire_ask(&self, session: &str, rid: &str) {
        let now = Instant::now();
        let mut maps = self.maps();
        maps.drop_retired(now);
        let (session, rid) = (session.to_string(), rid.to_string());
        let nodes = [
            Node::Request(session.clone(), rid.clone()),
            Node::Response(session.clone(), rid.clone()),
            Node::Exchange(session, rid),
        ];
        for node in &nodes {
            let Some(&ino) = maps.by_node.get(node) else {
                continue;
            };
            maps.retiring.push_back((now + RETIRE_AFTER, ino));
            maps.untouched.insert(ino);
        }
    }

    /// Entries in the table (for tests and diagnostics).
    pub fn entries(&self) -> usize {
        self.maps().by_ino.len()
    }
}

impl InodeMaps {
    /// Tables sized for a peak (10,000 pending asks' files) are shrunk once
    /// they hold under a quarter of it: a hash table never shrinks by
    /// itself, and its tombstones would make the next peak double it.
    fn shrink_if_sparse(&mut self) {
        if self.by_ino.capacity() > 4 * self.by_ino.len() + 4096 {
            self.by_ino.shrink_to_fit();
            self.by_node.shrink_to_fit();
            self.pages.shrink_to_fit();
        }
    }

    fn drop_retired(&mut self, now: Instant) {
        while let Some(&(due, ino)) = self.retiring.front() {
            if due > now {
                break;
            }
            self.retiring.pop_front();
            if self.untouched.remove(&ino) {
                let references = self.by_ino.get(&ino).map_or(0, |(_, count)| *count);
                self.remove(ino);
                if references > 0 {
                    self.orphans.insert(ino, references);
                }
            }
        }
        self.shrink_if_sparse();
    }

    /// The number leaves the table, and what was known of its pages.
    fn remove(&mut self, ino: u64) {
        if let Some((node, _)) = self.by_ino.remove(&ino) {
            self.by_node.remove(&node);
        }
        self.pages.remove(&ino);
    }
}

/// Fills `buffer` from the kernel's random source (`getrandom(2)`), or,
/// where that fails, from the standard library's per-process random keys.
pub fn random_bytes(buffer: &mut [u8]) {
    // SAFETY: the buffer is valid for its length.
    let got = unsafe { libc::getrandom(buffer.as_mut_ptr().cast(), buffer.len(), 0) };
    if usize::try_from(got).ok() != Some(buffer.len()) {
        use std::hash::BuildHasher;
        for (i, chunk) in buffer.chunks_mut(8).enumerate() {
            let word = std::collections::hash_map::RandomState::new().hash_one(i);
            chunk.copy_from_slice(&word.to_le_bytes()[..chunk.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inode_numbers_cannot_be_guessed_from_one_another() {
        let inodes = Inodes::default();
        let numbers: Vec<u64> = (0..64)
            .map(|i| inodes.ino(&Node::SessionDir(format!("s{i}"))))
            .collect();
        // Sequential numbers would all sit below 100; random 62-bit ones
        // almost never come within 2^32 of each other or of zero.
        assert!(
            numbers.iter().all(|&n| n > 1 << 32 && n < 1 << 62),
            "{numbers:?}"
        );
        let mut sorted = numbers.clone();
        sorted.sort_unstable();
        assert!(
            sorted.windows(2).all(|w| w[1] - w[0] > 1 << 20),
            "{sorted:?}"
        );
        assert_eq!(
            inodes.ino(&Node::SessionDir("s3".into())),
            numbers[3],
            "stable"
        );
        assert_eq!(inodes.ino(&Node::Root), 1);
    }

    #[test]
    fn one_key_gives_a_node_one_number_in_every_server() {
        let key = InodeKey::random();
        let (first, second) = (Inodes::with_key(key), Inodes::with_key(key));
        let node = Node::SessionJson("main".into());
        // The second server meets other nodes first: the number is the same.
        second.ino(&Node::SessionDir("other".into()));
        let ino = first.referenced(&node);
        assert_eq!(second.ino(&node), ino);
        assert_ne!(Inodes::default().ino(&node), ino, "another key");
        // A third server that never looked it up finds it by number once
        // it adopted what the mount shows.
        let third = Inodes::with_key(key);
        assert_eq!(third.node(ino), None);
        third.adopt_prior([Node::SessionDir("main".into()), node.clone()]);
        assert_eq!(third.node(ino), Some(node.clone()));
        // Held for the kernel's unknown count: a FORGET does not drop it.
        third.forget(ino, 5);
        assert_eq!(third.node(ino), Some(node));
    }

    #[test]
    fn a_response_reads_through_its_pages_only_while_one_asks_handles_use_them() {
        let inodes = Inodes::default();
        let ino = inodes.referenced(&Node::Response("main".into(), "a".into()));
        let decided = true;
        // Undecided: direct, and it keeps the next opener of a decided
        // answer from filling under it.
        assert_eq!(
            inodes.open_response(ino, 1, Some(1), !decided),
            ResponseIo::Direct
        );
        assert_eq!(
            inodes.open_response(ino, 2, Some(1), decided),
            ResponseIo::Direct
        );
        inodes.close_response(ino, 1);
        inodes.close_response(ino, 2);
        // Nothing open: filled, then cached for the same ask.
        assert_eq!(
            inodes.open_response(ino, 3, Some(1), decided),
            ResponseIo::Fill { stale: false }
        );
        inodes.filled_response(ino, 1);
        assert_eq!(
            inodes.open_response(ino, 4, Some(1), decided),
            ResponseIo::Cached
        );
        // The name asked anew while the old ask's handles are open: direct.
        assert_eq!(
            inodes.open_response(ino, 5, Some(2), decided),
            ResponseIo::Direct
        );
        for fh in [3, 4, 5] {
            inodes.close_response(ino, fh);
        }
        // All closed: the old answer's pages are dropped before the fill.
        assert_eq!(
            inodes.open_response(ino, 6, Some(2), decided),
            ResponseIo::Fill { stale: true }
        );
        // No ask under the name yet (a reader before its request), or a
        // number the table does not know: direct.
        assert_eq!(
            inodes.open_response(ino, 7, None, decided),
            ResponseIo::Direct
        );
        assert_eq!(
            inodes.open_response(12345, 8, Some(2), decided),
            ResponseIo::Direct
        );
        // A number the kernel forgot takes what was known of its pages.
        inodes.forget(ino, 1);
        assert_eq!(inodes.node(ino), None);
        assert_eq!(
            inodes.open_response(ino, 9, Some(2), decided),
            ResponseIo::Direct
        );
    }

    #[test]
    fn a_forgotten_asks_entries_go_after_a_while_unless_looked_up_again() {
        let inodes = Inodes::default();
        let request = Node::Request("main".into(), "a".into());
        let response = Node::Response("main".into(), "a".into());
        let kept = Node::Response("main".into(), "b".into());
        let (req_ino, resp_ino) = (inodes.referenced(&request), inodes.referenced(&response));
        let kept_ino = inodes.referenced(&kept);
        assert_eq!(inodes.entries(), 4);
        // `c`: the kernel held two references, drops one, looks it up again.
        let again = Node::Response("main".into(), "c".into());
        let again_ino = inodes.referenced(&again);
        inodes.referenced(&again);
        inodes.retire_ask("main", "a");
        inodes.retire_ask("main", "b");
        inodes.retire_ask("main", "c");
        inodes.forget(again_ino, 1);
        assert_eq!(inodes.referenced(&again), again_ino);
        // Still there until due: a cached name keeps working.
        assert_eq!(inodes.node(resp_ino), Some(response.clone()));
        // `b` is asked anew: looked up again, it stays.
        assert_eq!(inodes.referenced(&kept), kept_ino);
        inodes
            .maps()
            .drop_retired(Instant::now() + RETIRE_AFTER + Duration::from_millis(1));
        assert_eq!(inodes.node(req_ino), None);
        assert_eq!(inodes.node(resp_ino), None);
        assert_eq!(inodes.node(kept_ino), Some(kept));
        assert_eq!(inodes.node(again_ino), Some(again));
        assert_eq!(inodes.entries(), 3);
        // A late FORGET of a dropped number is harmless.
        inodes.forget(resp_ino, 1);
        assert_eq!(inodes.entries(), 3);
    }

    /// A name asked anew after its number was retired gets the same
    /// number; the kernel's FORGET of the old inode's references, queued
    /// when our LOOKUP said the name was gone, can come after the new
    /// CREATE. It must not end the new node (it did: the next `write`
    /// read ENOENT).
    #[test]
    fn a_late_forget_of_a_retired_number_does_not_end_its_next_node() {
        let inodes = Inodes::default();
        let exchange = Node::Exchange("main".into(), "x0".into());
        let old = inodes.referenced(&exchange);
        inodes.referenced(&exchange);
        inodes.retire_ask("main", "x0");
        inodes
            .maps()
            .drop_retired(Instant::now() + RETIRE_AFTER + Duration::from_millis(1));
        assert_eq!(inodes.node(old), None, "retired");
        let new = inodes.referenced(&exchange);
        assert_eq!(new, old, "the same name, the same number");
        inodes.forget(old, 2);
        assert_eq!(
            inodes.node(new),
            Some(exchange.clone()),
            "the new node stays"
        );
        inodes.forget(new, 1);
        assert_eq!(inodes.node(new), None, "its own forget ends it");
    }
}
