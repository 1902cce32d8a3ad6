//! The view's node table, logged so that the next server knows the
//! numbers the kernel holds.
//!
//! A view's inode numbers are handed out one by one (`nodes.rs`: one per
//! name, never one per backing file), so unlike the protocol mount's keyed
//! numbers they cannot be derived again. When the server dies the kernel
//! keeps every number it was given (cached names, open files, the
//! sandbox's cwd), and the next server must know which name each is. So
//! every change to the table is one line appended here, under the table's
//! lock, before the kernel is answered:
//!
//! - `n INO PARENT NAME`: a new node (`NAME` in hex: names are any bytes);
//! - `m INO PARENT NAME`: a node renamed (it now answers to that name);
//! - `u PARENT NAME`: the name was unlinked (its node stays for the
//!   kernel's references);
//! - `f INO`: the kernel forgot the node;
//! - `b INO ID DEV INODE`: passthrough backing `ID` was registered for the
//!   node (from file `DEV`/`INODE`); `c INO`: it was closed. The kernel
//!   takes one backing per inode while any passthrough handle is open, and
//!   handles the dead server opened stay open: the next server answers
//!   new opens of that node with the same backing, or the kernel would
//!   refuse them (`EIO`);
//! - `a UNIQUE RID`: the open that is kernel request `UNIQUE` raises (is
//!   about to raise) the ask `RID` in the session's outbox. A request the
//!   kernel re-sends after a crash keeps its number, and finds its ask by
//!   this line, never by a name a program could have written into the
//!   outbox first (the rid carries a random part written here before the
//!   ask exists).
//!
//! One `write(2)` a line and no sync: the log has to outlive the process,
//! not the machine (a view does not outlive a reboot). The next server
//! replays it ([`replay`]) and writes it afresh with what is alive.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The log of one view's node table.
#[derive(Debug)]
pub struct NodeLog {
    file: std::fs::File,
    path: PathBuf,
    /// Said once: a line could not be written (the next server will not
    /// know some numbers; their callers get `ENOENT` after a restart).
    failed: bool,
}

/// What a log says: the nodes, and the backings registered and not closed
/// (by node: the id and the backing file's `(dev, ino)`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Replayed {
    pub nodes: HashMap<u64, Logged>,
    pub backings: HashMap<u64, (u32, (u64, u64))>,
    /// Asks raised by opens, by kernel request number.
    pub asks: HashMap<u64, String>,
}

/// A node as the log last left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logged {
    pub parent: u64,
    pub name: OsString,
    /// Whether the name is still the node's (not unlinked or taken over
    /// by a rename onto it).
    pub named: bool,
}

impl NodeLog {
    /// A new, empty log at `path` (owner-only), replacing any file there.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC)
            .open(path)?;
        Ok(Self {
            file,
            path: path.to_path_buf(),
            failed: false,
        })
    }

    /// A log at `path` holding exactly `nodes` (written to a temporary
    /// file, then renamed over the old log).
    pub fn rewrite(path: &Path, logged: &Replayed) -> std::io::Result<Self> {
        let nodes = &logged.nodes;
        let temporary = path.with_extension("nodes.tmp");
        let mut log = Self::create(&temporary)?;
        let mut text = String::new();
        // Unnamed nodes first: a named node written after one with the
        // same name is the one the name leads to.
        let mut order: Vec<(&u64, &Logged)> = nodes.iter().collect();
        order.sort_by_key(|(ino, node)| (node.named, **ino));
        for (ino, node) in order {
            text.push_str(&line('n', *ino, node.parent, &node.name));
            if !node.named {
                text.push_str(&format!(
                    "u {} {}\n",
                    node.parent,
                    hex::encode(node.name.as_bytes())
                ));
            }
        }
        for (ino, (id, (dev, inode))) in &logged.backings {
            text.push_str(&format!("b {ino} {id} {dev} {inode}\n"));
        }
        for (unique, rid) in &logged.asks {
            text.push_str(&format!("a {unique} {}\n", hex::encode(rid)));
        }
        log.file.write_all(text.as_bytes())?;
        std::fs::rename(&temporary, path)?;
        log.path = path.to_path_buf();
        Ok(log)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn node(&mut self, ino: u64, parent: u64, name: &OsStr) {
        self.append(&line('n', ino, parent, name));
    }

    pub fn moved(&mut self, ino: u64, parent: u64, name: &OsStr) {
        self.append(&line('m', ino, parent, name));
    }

    pub fn unlinked(&mut self, parent: u64, name: &OsStr) {
        self.append(&format!("u {parent} {}\n", hex::encode(name.as_bytes())));
    }

    pub fn forgot(&mut self, ino: u64) {
        self.append(&format!("f {ino}\n"));
    }

    pub fn backing(&mut self, ino: u64, id: u32, (dev, inode): (u64, u64)) {
        self.append(&format!("b {ino} {id} {dev} {inode}\n"));
    }

    pub fn closed(&mut self, ino: u64) {
        self.append(&format!("c {ino}\n"));
    }

    pub fn asked(&mut self, unique: u64, rid: &str) {
        self.append(&format!("a {unique} {}\n", hex::encode(rid)));
    }

    fn append(&mut self, text: &str) {
        if let Err(error) = self.file.write_all(text.as_bytes()) {
            if !self.failed {
                self.failed = true;
                tracing::warn!(%error, log = %self.path.display(), "the view's node log cannot be written: after a restart of the server, names looked up from now on may read ENOENT");
            }
        }
    }
}

fn line(kind: char, ino: u64, parent: u64, name: &OsStr) -> String {
    format!("{kind} {ino} {parent} {}\n", hex::encode(name.as_bytes()))
}

/// The table the log at `path` describes: every node not forgotten, with
/// its last name. A line that cannot be read is skipped (a torn last line
/// of a server that died mid-write).
pub fn replay(path: &Path) -> std::io::Result<Replayed> {
    let text = std::fs::read(path)?;
    let mut nodes: HashMap<u64, Logged> = HashMap::new();
    let mut backings: HashMap<u64, (u32, (u64, u64))> = HashMap::new();
    let mut asks: HashMap<u64, String> = HashMap::new();
    let mut names: HashMap<(u64, OsString), u64> = HashMap::new();
    for line in text.split(|b| *b == b'\n') {
        let line = String::from_utf8_lossy(line);
        let words: Vec<&str> = line.split(' ').collect();
        let number = |i: usize| words.get(i).and_then(|w| w.parse::<u64>().ok());
        let name = |i: usize| {
            words
                .get(i)
                .and_then(|w| hex::decode(w).ok())
                .map(OsString::from_vec)
        };
        match words.first().copied() {
            Some(kind @ ("n" | "m")) => {
                let (Some(ino), Some(parent), Some(name)) = (number(1), number(2), name(3)) else {
                    continue;
                };
                if kind == "m" {
                    if let Some(old) = nodes.get(&ino) {
                        let key = (old.parent, old.name.clone());
                        if names.get(&key) == Some(&ino) {
                            names.remove(&key);
                        }
                    }
                }
                if let Some(previous) = names.insert((parent, name.clone()), ino) {
                    if previous != ino {
                        if let Some(node) = nodes.get_mut(&previous) {
                            node.named = false;
                        }
                    }
                }
                nodes.insert(
                    ino,
                    Logged {
                        parent,
                        name,
                        named: true,
                    },
                );
            }
            Some("u") => {
                let (Some(parent), Some(name)) = (number(1), name(2)) else {
                    continue;
                };
                if let Some(ino) = names.remove(&(parent, name)) {
                    if let Some(node) = nodes.get_mut(&ino) {
                        node.named = false;
                    }
                }
            }
            Some("b") => {
                let (Some(ino), Some(id), Some(dev), Some(inode)) =
                    (number(1), number(2), number(3), number(4))
                else {
                    continue;
                };
                let Ok(id) = u32::try_from(id) else { continue };
                backings.insert(ino, (id, (dev, inode)));
            }
            Some("a") => {
                let (Some(unique), Some(rid)) = (number(1), name(2)) else {
                    continue;
                };
                asks.insert(unique, rid.to_string_lossy().into_owned());
            }
            Some("c") => {
                let Some(ino) = number(1) else { continue };
                backings.remove(&ino);
            }
            Some("f") => {
                let Some(ino) = number(1) else { continue };
                if let Some(node) = nodes.remove(&ino) {
                    let key = (node.parent, node.name);
                    if names.get(&key) == Some(&ino) {
                        names.remove(&key);
                    }
                }
            }
            _ => {}
        }
    }
    Ok(Replayed {
        nodes,
        backings,
        asks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_replay_follows_renames_unlinks_and_forgets_and_survives_a_rewrite() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("v.nodes");
        let mut log = NodeLog::create(&path).expect("log");
        log.node(2, 1, OsStr::new("src"));
        log.node(3, 2, OsStr::new("a\nb"));
        log.node(4, 1, OsStr::new("old"));
        log.node(5, 1, OsStr::new("new"));
        // `old` renamed onto `new`: node 5 loses its name, 4 takes it.
        log.moved(4, 1, OsStr::new("new"));
        log.node(6, 1, OsStr::new("gone"));
        log.unlinked(1, OsStr::new("gone"));
        log.node(7, 1, OsStr::new("forgotten"));
        log.forgot(7);
        log.backing(3, 12, (5, 77));
        log.backing(4, 13, (5, 78));
        log.closed(4);
        log.asked(77, "open-1-2-77-ab");
        // A torn last line (the server died mid-write) is skipped.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(b"n 8 1 6"))
            .expect("torn");
        let replayed = replay(&path).expect("replay");
        let nodes = &replayed.nodes;
        let named = |ino: u64| nodes.get(&ino).map(|n| (n.parent, n.name.clone(), n.named));
        assert_eq!(named(3), Some((2, OsString::from("a\nb"), true)));
        assert_eq!(named(4), Some((1, OsString::from("new"), true)));
        assert_eq!(named(5), Some((1, OsString::from("new"), false)));
        assert_eq!(named(6), Some((1, OsString::from("gone"), false)));
        assert_eq!(named(7), None);
        assert_eq!(nodes.len(), 5, "{nodes:?}");
        assert_eq!(
            replayed.backings,
            HashMap::from([(3, (12, (5, 77)))]),
            "a closed backing is not reused"
        );
        assert_eq!(
            replayed.asks,
            HashMap::from([(77, "open-1-2-77-ab".into())])
        );

        let rewritten = NodeLog::rewrite(&path, &replayed).expect("rewrite");
        assert_eq!(rewritten.path(), path);
        assert_eq!(replay(&path).expect("replay again"), replayed);
    }
}
