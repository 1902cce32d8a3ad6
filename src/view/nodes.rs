//! The view's inodes: one per name, never one per backing file.
//!
//! A node is `(parent, name)` plus, for a directory, an `O_PATH` descriptor
//! of the real directory. Keying nodes by name rather than by the backing
//! inode is deliberate: every open is judged by the path it was reached
//! through, so two hard links of one file are two nodes, each judged by
//! its own name, and no name can borrow the verdict of another. A rename
//! moves the node (the kernel keeps its dentry), so the path a node is
//! judged by is always the one the program sees.
//!
//! Nothing here makes a system call except closing descriptors it owns
//! and appending to the node log (`nodelog.rs`), which lets the next
//! server know the numbers the kernel holds; the adapter (`fs.rs`) opens
//! descriptors.

use super::nodelog::{Logged, NodeLog, Replayed, NODE_LINE_BYTES};
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub const ROOT: u64 = 1;

/// The lookup count a node restored from the log starts with: the kernel's
/// own count died with the previous server, so such a node is never
/// forgotten (it lives as long as the view; the table is bounded by the
/// nodes the kernel held at the restart).
const RESTORED_LOOKUPS: u64 = 1 << 48;

/// The maps are shrunk when they hold fewer than a quarter of what they
/// have room for (and the room is past this): a view that held 100,000
/// names and forgot them would otherwise keep their slots for good.
const SHRINK_ABOVE: usize = 4096;

/// A new node was refused: the table holds `held` nodes besides the
/// root, the most the view may (`limits.viewNodes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtBound {
    pub held: usize,
    pub bound: usize,
}

#[derive(Debug)]
pub struct Node {
    pub parent: u64,
    pub name: OsString,
    /// A directory's `O_PATH` descriptor (shared with operations in
    /// flight, so a `forget` never closes one under them).
    pub dir: Option<Arc<OwnedFd>>,
    /// The backing file's `(dev, ino)` when last looked up: a name that
    /// now holds another file gets its descriptor replaced.
    pub backing: (u64, u64),
    /// Lookups the kernel holds (released by `forget`).
    pub lookups: u64,
}

/// The table, with the view's root path (the path the sandbox sees).
#[derive(Debug)]
pub struct Nodes {
    root: PathBuf,
    nodes: HashMap<u64, Node>,
    names: HashMap<(u64, OsString), u64>,
    next: u64,
    log: Option<NodeLog>,
    /// The bytes of every node's name: with the count, what a snapshot of
    /// the table takes in the log (the yardstick of its compaction).
    name_bytes: u64,
    /// Nodes besides the root the table may hold (`limits.viewNodes`).
    bound: usize,
}

/// What the adapter finds of a restored node's name on disk: its backing
/// identity and, for a directory, its `O_PATH` descriptor.
pub type Found = ((u64, u64), Option<OwnedFd>);

impl Nodes {
    pub fn new(root: PathBuf, root_dir: OwnedFd, backing: (u64, u64)) -> Self {
        let mut nodes = HashMap::new();
        nodes.insert(
            ROOT,
            Node {
                parent: ROOT,
                name: OsString::new(),
                dir: Some(Arc::new(root_dir)),
                backing,
                lookups: 1,
            },
        );
        Self {
            root,
            nodes,
            names: HashMap::new(),
            next: ROOT + 1,
            log: None,
            name_bytes: 0,
            bound: usize::MAX,
        }
    }

    /// At most `bound` nodes besides the root from now on: a lookup that
    /// would make one more is refused ([`AtBound`]). Nodes a previous
    /// server left are restored whatever their number (the kernel holds
    /// them).
    pub fn set_bound(&mut self, bound: usize) {
        self.bound = bound;
    }

    /// Nodes besides the root.
    pub fn len(&self) -> usize {
        self.nodes.len().saturating_sub(1)
    }

    /// Logs every change from now on.
    pub fn set_log(&mut self, log: NodeLog) {
        self.log = Some(log);
    }

    /// The table a previous server left (`logged`, from its node log),
    /// each node's name found again on disk by `find(parent's directory,
    /// name)`; a name that is gone leaves its node with nothing behind it
    /// (its calls read `ENOENT`), so the kernel's number never points at
    /// another file.
    pub fn restore(
        &mut self,
        logged: &HashMap<u64, Logged>,
        find: impl Fn(&OwnedFd, &OsStr) -> Option<Found>,
    ) {
        let mut order: Vec<u64> = logged.keys().copied().filter(|i| *i != ROOT).collect();
        order.sort_unstable();
        for &ino in &order {
            // A name the kernel could never have sent (a `/`, `..`) is no
            // node's: the log is the owner's, but a name is a path step.
            let Some(entry) = logged.get(&ino).filter(|e| is_plain_name(&e.name)) else {
                continue;
            };
            let previous = self.nodes.insert(
                ino,
                Node {
                    parent: entry.parent,
                    name: entry.name.clone(),
                    dir: None,
                    backing: (0, 0),
                    lookups: RESTORED_LOOKUPS,
                },
            );
            self.name_bytes += entry.name.len() as u64;
            if let Some(previous) = previous {
                self.name_bytes -= previous.name.len() as u64;
            }
            if entry.named {
                self.names.insert((entry.parent, entry.name.clone()), ino);
            }
            self.next = self.next.max(ino + 1);
        }
        // Directories are opened parents first, whatever order renames
        // left the numbers in.
        let mut opened = std::collections::HashSet::from([ROOT]);
        let mut progress = true;
        while progress {
            progress = false;
            for &ino in &order {
                if opened.contains(&ino) {
                    continue;
                }
                let Some(node) = self.nodes.get(&ino) else {
                    continue;
                };
                if !opened.contains(&node.parent) {
                    continue;
                }
                opened.insert(ino);
                progress = true;
                let named = self.names.get(&(node.parent, node.name.clone())) == Some(&ino);
                let found = match (named, self.dir(node.parent)) {
                    (true, Some(dir)) => find(&dir, &node.name),
                    _ => None,
                };
                if let (Some((backing, dir)), Some(node)) = (found, self.nodes.get_mut(&ino)) {
                    node.backing = backing;
                    node.dir = dir.map(Arc::new);
                }
            }
        }
    }

    /// Logs that passthrough backing `id` (of file `file`) was registered
    /// for `ino` (`fs.rs`).
    pub fn log_backing(&mut self, ino: u64, id: u32, file: (u64, u64)) {
        if let Some(log) = &mut self.log {
            log.backing(ino, id, file);
        }
        self.compact_when_due();
    }

    /// Logs that the backing of `ino` was closed.
    pub fn log_closed(&mut self, ino: u64) {
        if let Some(log) = &mut self.log {
            log.closed(ino);
        }
        self.compact_when_due();
    }

    /// Logs that the open that is kernel request `unique` raises `rid`.
    pub fn log_asked(&mut self, unique: u64, rid: &str) {
        if let Some(log) = &mut self.log {
            log.asked(unique, rid);
        }
        self.compact_when_due();
    }

    /// The open that is request `unique` was answered (a compaction drops
    /// its ask).
    pub fn log_answered(&mut self, unique: u64) {
        if let Some(log) = &mut self.log {
            log.answered(unique);
        }
    }

    /// Bytes in the log now (`None`: no log).
    #[cfg(test)]
    pub fn log_bytes(&self) -> Option<u64> {
        self.log.as_ref().map(NodeLog::written)
    }

    /// What a snapshot of the table's nodes takes in the log, about.
    fn live_bytes(&self) -> u64 {
        self.nodes.len() as u64 * NODE_LINE_BYTES + 2 * self.name_bytes
    }

    /// Compacts the log (`nodelog.rs`) once it has outgrown the table:
    /// called after every append, under the table's lock, so the snapshot
    /// and the appends around it are in the table's order.
    fn compact_when_due(&mut self) {
        let live = self.live_bytes();
        let Some(log) = &mut self.log else {
            return;
        };
        if !log.wants_compaction(live) {
            return;
        }
        // A node answers to its name when the name leads to it.
        let named: std::collections::HashSet<u64> = self
            .names
            .iter()
            .filter(|((parent, name), ino)| {
                self.nodes
                    .get(ino)
                    .is_some_and(|n| n.parent == *parent && n.name == *name)
            })
            .map(|(_, ino)| *ino)
            .collect();
        let nodes = &self.nodes;
        let snapshot = || {
            nodes
                .iter()
                .filter(|(ino, _)| **ino != ROOT)
                .map(|(ino, n)| (*ino, n.parent, n.name.as_os_str(), named.contains(ino)))
        };
        if let Err(error) = log.compact(snapshot) {
            tracing::warn!(%error, log = %log.path().display(), "the view's node log cannot be compacted: it is appended to as it is, and tried again later");
        }
    }

    /// Gives back the room of maps far larger than what they hold; `true`
    /// when it did (the adapter then trims its own caches and the
    /// allocator: a large table just went).
    fn shrink_when_sparse(&mut self) -> bool {
        let sparse = |len: usize, capacity: usize| capacity > SHRINK_ABOVE && len < capacity / 4;
        let mut shrunk = false;
        if sparse(self.nodes.len(), self.nodes.capacity()) {
            self.nodes.shrink_to_fit();
            shrunk = true;
        }
        if sparse(self.names.len(), self.names.capacity()) {
            self.names.shrink_to_fit();
            shrunk = true;
        }
        shrunk
    }

    /// The table as the log would say it: what a fresh log is written
    /// from (the backings are the adapter's to add).
    pub fn logged(&self) -> Replayed {
        let nodes = self
            .nodes
            .iter()
            .filter(|(ino, _)| **ino != ROOT)
            .map(|(ino, node)| {
                let named = self.names.get(&(node.parent, node.name.clone())) == Some(ino);
                (
                    *ino,
                    Logged {
                        parent: node.parent,
                        name: node.name.clone(),
                        named,
                    },
                )
            })
            .collect();
        Replayed {
            nodes,
            ..Replayed::default()
        }
    }

    #[cfg(test)]
    pub fn get(&self, ino: u64) -> Option<&Node> {
        self.nodes.get(&ino)
    }

    /// The directory descriptor of `ino`.
    pub fn dir(&self, ino: u64) -> Option<Arc<OwnedFd>> {
        self.nodes.get(&ino).and_then(|n| n.dir.clone())
    }

    /// The parent's directory descriptor and the name, for a `*at` call.
    pub fn at(&self, ino: u64) -> Option<(Arc<OwnedFd>, OsString)> {
        let node = self.nodes.get(&ino)?;
        if ino == ROOT {
            return None;
        }
        Some((self.dir(node.parent)?, node.name.clone()))
    }

    /// The path the sandbox sees for `ino` (`None`: forgotten).
    pub fn path(&self, ino: u64) -> Option<PathBuf> {
        let mut names: Vec<&OsStr> = Vec::new();
        let mut cursor = ino;
        while cursor != ROOT {
            let node = self.nodes.get(&cursor)?;
            names.push(&node.name);
            cursor = node.parent;
            if names.len() > 4096 {
                return None;
            }
        }
        let mut path = self.root.clone();
        for name in names.iter().rev() {
            path.push(name);
        }
        Some(path)
    }

    /// The path of `name` in directory `parent`.
    /// The node named `name` in `parent`, when the kernel knows one.
    pub fn child(&self, parent: u64, name: &OsStr) -> Option<u64> {
        self.names.get(&(parent, name.to_os_string())).copied()
    }

    pub fn child_path(&self, parent: u64, name: &OsStr) -> Option<PathBuf> {
        self.path(parent).map(|p| p.join(name))
    }

    /// Records a lookup of `name` in `parent` (a new node, or one more
    /// reference to the existing one); `dir` is the new descriptor when
    /// the name is a directory. Returns the node's number, or [`AtBound`]
    /// when a new node would pass the table's bound.
    pub fn looked_up(
        &mut self,
        parent: u64,
        name: &OsStr,
        backing: (u64, u64),
        dir: Option<OwnedFd>,
    ) -> Result<u64, AtBound> {
        let key = (parent, name.to_os_string());
        if let Some(&ino) = self.names.get(&key) {
            if let Some(node) = self.nodes.get_mut(&ino) {
                node.lookups += 1;
                if node.backing != backing || (dir.is_some() != node.dir.is_some()) {
                    node.backing = backing;
                    node.dir = dir.map(Arc::new);
                }
                return Ok(ino);
            }
        }
        if self.len() >= self.bound {
            return Err(AtBound {
                held: self.len(),
                bound: self.bound,
            });
        }
        let ino = self.next;
        self.next += 1;
        if let Some(log) = &mut self.log {
            log.node(ino, parent, name);
        }
        self.nodes.insert(
            ino,
            Node {
                parent,
                name: name.to_os_string(),
                dir: dir.map(Arc::new),
                backing,
                lookups: 1,
            },
        );
        self.name_bytes += name.len() as u64;
        self.names.insert(key, ino);
        self.compact_when_due();
        Ok(ino)
    }

    /// Whether a lookup of `name` in `parent` would be given a node:
    /// always when the name has one, else only below the bound (checked
    /// before a create makes its file, so a refused create leaves no name
    /// on disk behind).
    pub fn room_for(&self, parent: u64, name: &OsStr) -> Result<(), AtBound> {
        if self.len() < self.bound || self.names.contains_key(&(parent, name.to_os_string())) {
            return Ok(());
        }
        Err(AtBound {
            held: self.len(),
            bound: self.bound,
        })
    }

    /// One more lookup of a name already known as the same file (and, for
    /// a directory, already holding its descriptor): its number, or `None`
    /// when the name is new or now holds another file.
    pub fn looked_up_again(
        &mut self,
        parent: u64,
        name: &OsStr,
        backing: (u64, u64),
        is_dir: bool,
    ) -> Option<u64> {
        let ino = *self.names.get(&(parent, name.to_os_string()))?;
        let node = self.nodes.get_mut(&ino)?;
        if node.backing != backing || node.dir.is_some() != is_dir {
            return None;
        }
        node.lookups += 1;
        Some(ino)
    }

    /// The kernel dropped `count` references to `ino`. `true` when the
    /// table's maps were shrunk (far fewer nodes than room for them).
    pub fn forget(&mut self, ino: u64, count: u64) -> bool {
        if ino == ROOT {
            return false;
        }
        let gone = match self.nodes.get_mut(&ino) {
            Some(node) => {
                node.lookups = node.lookups.saturating_sub(count);
                node.lookups == 0
            }
            None => false,
        };
        if gone {
            if let Some(log) = &mut self.log {
                log.forgot(ino);
            }
            if let Some(node) = self.nodes.remove(&ino) {
                self.name_bytes = self.name_bytes.saturating_sub(node.name.len() as u64);
                let key = (node.parent, node.name);
                if self.names.get(&key) == Some(&ino) {
                    self.names.remove(&key);
                }
            }
            self.compact_when_due();
            return self.shrink_when_sparse();
        }
        false
    }

    /// `name` in `parent` no longer exists (unlink, rmdir): the node stays
    /// for the kernel's references but answers to no name.
    pub fn unlinked(&mut self, parent: u64, name: &OsStr) {
        if self.names.remove(&(parent, name.to_os_string())).is_some() {
            if let Some(log) = &mut self.log {
                log.unlinked(parent, name);
            }
            self.compact_when_due();
        }
    }

    /// A rename: the node of the old name now has the new one; a node the
    /// new name had is unlinked. With `exchange`, the two swap names.
    pub fn renamed(
        &mut self,
        parent: u64,
        name: &OsStr,
        new_parent: u64,
        new_name: &OsStr,
        exchange: bool,
    ) {
        let from = self.names.remove(&(parent, name.to_os_string()));
        let to = self.names.remove(&(new_parent, new_name.to_os_string()));
        if let Some(ino) = from {
            if let Some(node) = self.nodes.get_mut(&ino) {
                self.name_bytes = (self.name_bytes + new_name.len() as u64)
                    .saturating_sub(node.name.len() as u64);
                node.parent = new_parent;
                node.name = new_name.to_os_string();
            }
            self.names
                .insert((new_parent, new_name.to_os_string()), ino);
            if let Some(log) = &mut self.log {
                log.moved(ino, new_parent, new_name);
            }
        } else if to.is_some() {
            // The target's node lost its name to a file this table never
            // saw.
            if let Some(log) = &mut self.log {
                log.unlinked(new_parent, new_name);
            }
        }
        if let (true, Some(ino)) = (exchange, to) {
            if let Some(node) = self.nodes.get_mut(&ino) {
                self.name_bytes =
                    (self.name_bytes + name.len() as u64).saturating_sub(node.name.len() as u64);
                node.parent = parent;
                node.name = name.to_os_string();
            }
            self.names.insert((parent, name.to_os_string()), ino);
            if let Some(log) = &mut self.log {
                log.moved(ino, parent, name);
            }
        }
        self.compact_when_due();
    }
}

/// A name the view refuses outright: empty, `.`/`..`, or one with a `/`
/// or a NUL (the kernel never sends them; a refusal costs nothing).
pub fn is_plain_name(name: &OsStr) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes != b"."
        && bytes != b".."
        && !bytes.contains(&b'/')
        && !bytes.contains(&0)
}

/// `path` as the UTF-8 the policy judges (lossy: a name that is not UTF-8
/// is judged with replacement characters, which no rule matches by
/// accident more than it would the real bytes).
pub fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fd() -> OwnedFd {
        std::fs::File::open("/").expect("/").into()
    }

    #[test]
    fn paths_follow_renames_and_links_stay_apart() {
        let mut nodes = Nodes::new("/w".into(), fd(), (1, 1));
        let a = nodes
            .looked_up(ROOT, OsStr::new("a"), (1, 2), Some(fd()))
            .expect("room");
        let f = nodes
            .looked_up(a, OsStr::new(".env"), (1, 3), None)
            .expect("room");
        // A hard link of the same file is its own node, judged by its name.
        let g = nodes
            .looked_up(ROOT, OsStr::new("public"), (1, 3), None)
            .expect("room");
        assert_ne!(f, g);
        assert_eq!(nodes.path(f).as_deref(), Some(Path::new("/w/a/.env")));
        assert_eq!(nodes.path(g).as_deref(), Some(Path::new("/w/public")));
        nodes.renamed(ROOT, OsStr::new("a"), ROOT, OsStr::new("b"), false);
        assert_eq!(nodes.path(f).as_deref(), Some(Path::new("/w/b/.env")));
        // The same name looked up again is the same node.
        assert_eq!(
            nodes
                .looked_up(a, OsStr::new(".env"), (1, 3), None)
                .expect("room"),
            f
        );
        nodes.forget(f, 2);
        assert!(nodes.get(f).is_none());
        assert_eq!(nodes.path(f), None);
    }

    #[test]
    fn a_restored_table_keeps_the_numbers_and_finds_names_parents_first() {
        use super::super::nodelog::Logged;
        let logged: HashMap<u64, Logged> = [
            // A directory renamed under one made after it: opened after
            // its new parent all the same.
            (
                5,
                Logged {
                    parent: 9,
                    name: "d".into(),
                    named: true,
                },
            ),
            (
                9,
                Logged {
                    parent: ROOT,
                    name: "top".into(),
                    named: true,
                },
            ),
            (
                6,
                Logged {
                    parent: 5,
                    name: "f".into(),
                    named: true,
                },
            ),
            (
                7,
                Logged {
                    parent: ROOT,
                    name: "old".into(),
                    named: false,
                },
            ),
            (
                8,
                Logged {
                    parent: ROOT,
                    name: "..".into(),
                    named: true,
                },
            ),
        ]
        .into_iter()
        .collect();
        let mut nodes = Nodes::new("/w".into(), fd(), (1, 1));
        let found = std::cell::RefCell::new(Vec::new());
        nodes.restore(&logged, |_, name| {
            found.borrow_mut().push(name.to_os_string());
            let dir = (name != "f").then(fd);
            Some(((1, 100), dir))
        });
        assert_eq!(nodes.path(6).as_deref(), Some(Path::new("/w/top/d/f")));
        assert_eq!(
            *found.borrow(),
            ["top", "d", "f"].map(OsString::from),
            "parents first; an unnamed node is not looked for"
        );
        assert!(nodes.get(7).is_some() && nodes.get(8).is_none());
        // New numbers start above the restored ones; a restored node is
        // not forgotten by the kernel's counts.
        let new = nodes
            .looked_up(ROOT, OsStr::new("new"), (1, 2), None)
            .expect("room");
        assert_eq!(new, 10);
        nodes.forget(6, 1_000);
        assert!(nodes.get(6).is_some());
    }

    #[test]
    fn an_exchange_swaps_names_and_an_unlink_frees_the_name() {
        let mut nodes = Nodes::new("/w".into(), fd(), (1, 1));
        let x = nodes
            .looked_up(ROOT, OsStr::new("x"), (1, 2), None)
            .expect("room");
        let y = nodes
            .looked_up(ROOT, OsStr::new("y"), (1, 3), None)
            .expect("room");
        nodes.renamed(ROOT, OsStr::new("x"), ROOT, OsStr::new("y"), true);
        assert_eq!(nodes.path(x).as_deref(), Some(Path::new("/w/y")));
        assert_eq!(nodes.path(y).as_deref(), Some(Path::new("/w/x")));
        nodes.unlinked(ROOT, OsStr::new("y"));
        let again = nodes
            .looked_up(ROOT, OsStr::new("y"), (1, 9), None)
            .expect("room");
        assert_ne!(again, x);
        assert!(!is_plain_name(OsStr::new("..")) && is_plain_name(OsStr::new(".env")));
    }

    /// A table churned through many create/unlink/forget cycles, renames,
    /// backings and asks: its log is compacted as it goes (it never holds
    /// much more than the table), and a replay of the compacted log, and a
    /// table restored from it, are the live table.
    #[test]
    fn a_compacted_log_replays_to_the_same_table() {
        use super::super::nodelog::{replay, COMPACT_FACTOR, COMPACT_FLOOR};
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("v.nodes");
        let mut nodes = Nodes::new("/w".into(), fd(), (1, 1));
        nodes.set_log(NodeLog::create(&path).expect("log"));
        let src = nodes
            .looked_up(ROOT, OsStr::new("src"), (1, 2), Some(fd()))
            .expect("room");
        // Names that stay: some renamed, one unlinked but still held by
        // the kernel, one with a backing open, one open waiting for an ask.
        let mut kept = Vec::new();
        for i in 0..50u64 {
            let name = format!("kept-{i}");
            kept.push(
                nodes
                    .looked_up(src, OsStr::new(&name), (1, 100 + i), None)
                    .expect("room"),
            );
        }
        nodes.renamed(src, OsStr::new("kept-1"), ROOT, OsStr::new("moved"), false);
        nodes.renamed(src, OsStr::new("kept-2"), src, OsStr::new("kept-3"), false);
        nodes.unlinked(src, OsStr::new("kept-4"));
        nodes.log_backing(kept[5], 7, (1, 105));
        nodes.log_asked(99, "open-t-99-00");
        nodes.log_asked(98, "open-t-98-00");
        nodes.log_answered(98);
        let mut largest = 0;
        for i in 0..20_000u64 {
            let ino = nodes
                .looked_up(src, OsStr::new("churn"), (1, 1_000_000 + i), None)
                .expect("room");
            nodes.log_backing(ino, 8, (1, 1_000_000 + i));
            nodes.unlinked(src, OsStr::new("churn"));
            nodes.forget(ino, 1);
            nodes.log_closed(ino);
            largest = largest.max(nodes.log_bytes().expect("a log"));
        }
        let on_disk = std::fs::metadata(&path).expect("log").len();
        assert_eq!(on_disk, nodes.log_bytes().expect("a log"));
        // 20,000 cycles of five lines were ~1.9 MB before compaction.
        let table = nodes.live_bytes() + 2 * 48 + 96;
        assert!(
            largest <= (COMPACT_FACTOR * table).max(COMPACT_FLOOR) + 256,
            "the log reached {largest} bytes for a table of about {table}"
        );
        assert!(!dir.path().join("v.nodes.tmp").exists());

        let replayed = replay(&path).expect("replay");
        assert_eq!(replayed.nodes, nodes.logged().nodes);
        assert_eq!(replayed.backings, HashMap::from([(kept[5], (7, (1, 105)))]));
        assert_eq!(replayed.asks, HashMap::from([(99, "open-t-99-00".into())]));
        assert_eq!(replayed.nodes.get(&kept[4]).map(|n| n.named), Some(false));
        assert_eq!(replayed.nodes.get(&kept[2]).map(|n| n.named), Some(true));
        // `kept-3`'s old node lost its name to the rename onto it.
        assert_eq!(replayed.nodes.get(&kept[3]).map(|n| n.named), Some(false));

        // A table restored from it (as the next server does) is the same.
        let mut next = Nodes::new("/w".into(), fd(), (1, 1));
        next.restore(&replayed.nodes, |_, name| {
            let dir = (name == "src").then(fd);
            Some(((1, 7), dir))
        });
        assert_eq!(next.logged().nodes, nodes.logged().nodes);
        assert_eq!(next.path(kept[1]).as_deref(), Some(Path::new("/w/moved")));
        assert_eq!(
            next.path(kept[9]).as_deref(),
            Some(Path::new("/w/src/kept-9"))
        );
    }

    /// Past `limits.viewNodes` a new name gets no node; a known one does,
    /// and a forgotten node makes room again.
    #[test]
    fn the_table_is_bounded_and_known_names_pass() {
        let mut nodes = Nodes::new("/w".into(), fd(), (1, 1));
        nodes.set_bound(3);
        let inos: Vec<u64> = (0..3u64)
            .map(|i| {
                nodes
                    .looked_up(ROOT, OsStr::new(&format!("n{i}")), (1, 10 + i), None)
                    .expect("room")
            })
            .collect();
        let refused = nodes.looked_up(ROOT, OsStr::new("n3"), (1, 13), None);
        assert_eq!(refused, Err(AtBound { held: 3, bound: 3 }));
        assert!(nodes.room_for(ROOT, OsStr::new("n3")).is_err());
        assert!(nodes.room_for(ROOT, OsStr::new("n0")).is_ok());
        assert_eq!(
            nodes.looked_up(ROOT, OsStr::new("n0"), (1, 10), None),
            Ok(inos[0])
        );
        nodes.forget(inos[1], 1);
        assert!(nodes
            .looked_up(ROOT, OsStr::new("n3"), (1, 13), None)
            .is_ok());
    }

    /// A table that held many nodes gives their room back when they go.
    #[test]
    fn a_table_that_emptied_shrinks() {
        let mut nodes = Nodes::new("/w".into(), fd(), (1, 1));
        let inos: Vec<u64> = (0..50_000u64)
            .map(|i| {
                nodes
                    .looked_up(ROOT, OsStr::new(&format!("n{i}")), (1, i), None)
                    .expect("room")
            })
            .collect();
        let full = nodes.nodes.capacity();
        let mut shrunk = 0;
        for ino in inos {
            shrunk += usize::from(nodes.forget(ino, 1));
        }
        assert!(shrunk > 0);
        assert!(
            nodes.nodes.capacity() < full / 4,
            "{} of {full}",
            nodes.nodes.capacity()
        );
        assert!(nodes.names.capacity() <= 2 * SHRINK_ABOVE);
        assert_eq!(nodes.name_bytes, 0);
    }
}
