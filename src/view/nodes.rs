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

use super::nodelog::{Logged, NodeLog, Replayed};
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
        }
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
            self.nodes.insert(
                ino,
                Node {
                    parent: entry.parent,
                    name: entry.name.clone(),
                    dir: None,
                    backing: (0, 0),
                    lookups: RESTORED_LOOKUPS,
                },
            );
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

    /// The log, to record a backing in (`fs.rs`).
    pub fn log(&mut self) -> Option<&mut NodeLog> {
        self.log.as_mut()
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
    /// the name is a directory. Returns the node's number.
    pub fn looked_up(
        &mut self,
        parent: u64,
        name: &OsStr,
        backing: (u64, u64),
        dir: Option<OwnedFd>,
    ) -> u64 {
        let key = (parent, name.to_os_string());
        if let Some(&ino) = self.names.get(&key) {
            if let Some(node) = self.nodes.get_mut(&ino) {
                node.lookups += 1;
                if node.backing != backing || (dir.is_some() != node.dir.is_some()) {
                    node.backing = backing;
                    node.dir = dir.map(Arc::new);
                }
                return ino;
            }
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
        self.names.insert(key, ino);
        ino
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

    /// The kernel dropped `count` references to `ino`.
    pub fn forget(&mut self, ino: u64, count: u64) {
        if ino == ROOT {
            return;
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
                let key = (node.parent, node.name);
                if self.names.get(&key) == Some(&ino) {
                    self.names.remove(&key);
                }
            }
        }
    }

    /// `name` in `parent` no longer exists (unlink, rmdir): the node stays
    /// for the kernel's references but answers to no name.
    pub fn unlinked(&mut self, parent: u64, name: &OsStr) {
        if self.names.remove(&(parent, name.to_os_string())).is_some() {
            if let Some(log) = &mut self.log {
                log.unlinked(parent, name);
            }
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
                node.parent = parent;
                node.name = name.to_os_string();
            }
            self.names.insert((parent, name.to_os_string()), ino);
            if let Some(log) = &mut self.log {
                log.moved(ino, parent, name);
            }
        }
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
        let a = nodes.looked_up(ROOT, OsStr::new("a"), (1, 2), Some(fd()));
        let f = nodes.looked_up(a, OsStr::new(".env"), (1, 3), None);
        // A hard link of the same file is its own node, judged by its name.
        let g = nodes.looked_up(ROOT, OsStr::new("public"), (1, 3), None);
        assert_ne!(f, g);
        assert_eq!(nodes.path(f).as_deref(), Some(Path::new("/w/a/.env")));
        assert_eq!(nodes.path(g).as_deref(), Some(Path::new("/w/public")));
        nodes.renamed(ROOT, OsStr::new("a"), ROOT, OsStr::new("b"), false);
        assert_eq!(nodes.path(f).as_deref(), Some(Path::new("/w/b/.env")));
        // The same name looked up again is the same node.
        assert_eq!(nodes.looked_up(a, OsStr::new(".env"), (1, 3), None), f);
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
        let new = nodes.looked_up(ROOT, OsStr::new("new"), (1, 2), None);
        assert_eq!(new, 10);
        nodes.forget(6, 1_000);
        assert!(nodes.get(6).is_some());
    }

    #[test]
    fn an_exchange_swaps_names_and_an_unlink_frees_the_name() {
        let mut nodes = Nodes::new("/w".into(), fd(), (1, 1));
        let x = nodes.looked_up(ROOT, OsStr::new("x"), (1, 2), None);
        let y = nodes.looked_up(ROOT, OsStr::new("y"), (1, 3), None);
        nodes.renamed(ROOT, OsStr::new("x"), ROOT, OsStr::new("y"), true);
        assert_eq!(nodes.path(x).as_deref(), Some(Path::new("/w/y")));
        assert_eq!(nodes.path(y).as_deref(), Some(Path::new("/w/x")));
        nodes.unlinked(ROOT, OsStr::new("y"));
        let again = nodes.looked_up(ROOT, OsStr::new("y"), (1, 9), None);
        assert_ne!(again, x);
        assert!(!is_plain_name(OsStr::new("..")) && is_plain_name(OsStr::new(".env")));
    }
}
