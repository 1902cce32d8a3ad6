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
//!
//! **Compaction.** A program that creates and unlinks names in a loop
//! appends five lines a cycle (`n`, `b`, `u`, `f`, `c`) while the table
//! stays the same size, so a log rewritten only at a restart grows without
//! bound (95 bytes a cycle: a sandbox could fill the state dir's disk).
//! So the log is compacted as it goes: once it holds more than
//! [`COMPACT_FACTOR`] times what a snapshot of the live table takes (and
//! more than [`COMPACT_FLOOR`]), the table's owner ([`super::nodes::Nodes`],
//! under the lock every append is made under) writes the snapshot to
//! `<log>.tmp` and renames it over the log. The snapshot holds every node
//! with its name, every backing the log says is open and every ask it
//! says an open raised and that is not answered yet (this log keeps those
//! two itself, [`NodeLog::backings`], [`NodeLog::asks`], so it needs no
//! other table). Crash-safe without a sync, for the same reason the
//! appends are: a server that dies while the temporary file is written
//! leaves the old log whole (every append went there); one that dies
//! after the rename leaves the snapshot, and every append after it went
//! to the new file. The rename is atomic for the next server's `open`.
//! Each compaction writes what the live table takes after at least as
//! many bytes were appended, so it at most doubles what the log writes.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// A log is compacted once it holds more than this many times the bytes
/// of a snapshot of the live table: 2 keeps the file within about twice
/// the table (plus the floor), and every compaction is paid for by at
/// least as many bytes appended since the last one.
pub const COMPACT_FACTOR: u64 = 2;

/// ... and more than this: a nearly empty view is not rewritten every few
/// lines (a cycle of create and unlink is 5 lines, about 95 bytes with a
/// short name, so a churning program compacts about every 700 cycles).
pub const COMPACT_FLOOR: u64 = 64 << 10;

/// What a snapshot's line for a node takes besides its hex name, about
/// (`n INO PARENT ` and the newline, with room for an unnamed node's `u`
/// line): the yardstick [`NodeLog::wants_compaction`] is given.
pub const NODE_LINE_BYTES: u64 = 24;

/// The log of one view's node table.
#[derive(Debug)]
pub struct NodeLog {
    file: std::fs::File,
    path: PathBuf,
    /// Said once: a line could not be written (the next server will not
    /// know some numbers; their callers get `ENOENT` after a restart).
    failed: bool,
    /// Bytes in the file: the snapshot it started with and every append.
    written: u64,
    /// The backings the log says are registered and not closed, and the
    /// asks it says an open raised, not yet answered: what a compaction
    /// writes besides the nodes (the same a replay would find).
    backings: HashMap<u64, (u32, (u64, u64))>,
    asks: HashMap<u64, String>,
    /// A compaction failed (a full disk, say): not tried again before the
    /// log has grown by [`COMPACT_FLOOR`] more, so a failing rewrite is
    /// not attempted at every line.
    retry_at: u64,
}

/// A node as a compaction writes it: number, parent, name, and whether
/// the name is still its own.
pub type SnapshotNode<'a> = (u64, u64, &'a OsStr, bool);

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
            written: 0,
            backings: HashMap::new(),
            asks: HashMap::new(),
            retry_at: 0,
        })
    }

    /// A log at `path` holding exactly `logged` (written to a temporary
    /// file, then renamed over the old log).
    pub fn rewrite(path: &Path, logged: &Replayed) -> std::io::Result<Self> {
        let nodes = |named: bool| {
            logged
                .nodes
                .iter()
                .filter(move |(_, node)| node.named == named)
                .map(|(ino, node)| (*ino, node.parent, node.name.as_os_str(), node.named))
        };
        let mut log = Self::snapshot(
            path,
            nodes(false).chain(nodes(true)),
            &logged.backings,
            &logged.asks,
        )?;
        log.backings.clone_from(&logged.backings);
        log.asks.clone_from(&logged.asks);
        Ok(log)
    }

    /// Whether the log has grown past [`COMPACT_FACTOR`] times a snapshot
    /// of the live table (`live_bytes`: its nodes, as the table's owner
    /// estimates them with [`NODE_LINE_BYTES`]) and past the floor.
    pub fn wants_compaction(&self, live_bytes: u64) -> bool {
        let live = live_bytes
            .saturating_add(self.backings.len() as u64 * 48)
            .saturating_add(self.asks.len() as u64 * 96);
        self.written >= self.retry_at
            && self.written > live.saturating_mul(COMPACT_FACTOR).max(COMPACT_FLOOR)
    }

    /// Replaces the log by a snapshot of the live table, `nodes` (called
    /// twice: unnamed nodes are written first), with the backings and asks
    /// this log holds. On an error the old log is kept and appended to as
    /// before (it is still whole), and the next try waits for
    /// [`COMPACT_FLOOR`] more bytes.
    pub fn compact<'a, I>(&mut self, nodes: impl Fn() -> I) -> std::io::Result<()>
    where
        I: Iterator<Item = SnapshotNode<'a>>,
    {
        let started = std::time::Instant::now();
        let unnamed = nodes().filter(|node| !node.3);
        let named = nodes().filter(|node| node.3);
        match Self::snapshot(&self.path, unnamed.chain(named), &self.backings, &self.asks) {
            Ok(fresh) => {
                let micros = started.elapsed().as_micros() as u64;
                tracing::debug!(log = %self.path.display(), before = self.written, after = fresh.written, micros, "the view's node log compacted");
                self.file = fresh.file;
                self.written = fresh.written;
                self.retry_at = 0;
                // The snapshot is whole again, whatever append failed.
                self.failed = false;
                Ok(())
            }
            Err(error) => {
                self.retry_at = self.written.saturating_add(COMPACT_FLOOR);
                Err(error)
            }
        }
    }

    /// Writes `nodes` (unnamed ones first: a named node written after one
    /// with the same name is the one the name leads to), `backings` and
    /// `asks` to `<path>.tmp`, then renames it over `path`.
    fn snapshot<'a>(
        path: &Path,
        nodes: impl Iterator<Item = SnapshotNode<'a>>,
        backings: &HashMap<u64, (u32, (u64, u64))>,
        asks: &HashMap<u64, String>,
    ) -> std::io::Result<Self> {
        let temporary = path.with_extension("nodes.tmp");
        let written = (|| -> std::io::Result<Self> {
            let mut log = Self::create(&temporary)?;
            let mut out = std::io::BufWriter::with_capacity(64 << 10, &mut log.file);
            let mut written = 0u64;
            let mut put = |text: &str| -> std::io::Result<()> {
                written += text.len() as u64;
                out.write_all(text.as_bytes())
            };
            let mut unnamed_seen = false;
            for (ino, parent, name, named) in nodes {
                if named {
                    unnamed_seen = true;
                } else if unnamed_seen {
                    // A caller's order broke the rule replay relies on.
                    return Err(std::io::Error::other("an unnamed node after a named one"));
                }
                put(&line('n', ino, parent, name))?;
                if !named {
                    put(&format!("u {parent} {}\n", hex::encode(name.as_bytes())))?;
                }
            }
            for (ino, (id, (dev, inode))) in backings {
                put(&format!("b {ino} {id} {dev} {inode}\n"))?;
            }
            for (unique, rid) in asks {
                put(&format!("a {unique} {}\n", hex::encode(rid)))?;
            }
            out.flush()?;
            drop(out);
            log.written = written;
            Ok(log)
        })();
        let mut log = match written {
            Ok(log) => log,
            Err(error) => {
                let _ = std::fs::remove_file(&temporary);
                return Err(error);
            }
        };
        if let Err(error) = std::fs::rename(&temporary, path) {
            let _ = std::fs::remove_file(&temporary);
            return Err(error);
        }
        log.path = path.to_path_buf();
        Ok(log)
    }

    /// Bytes in the file now.
    pub fn written(&self) -> u64 {
        self.written
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
        self.backings.insert(ino, (id, (dev, inode)));
        self.append(&format!("b {ino} {id} {dev} {inode}\n"));
    }

    pub fn closed(&mut self, ino: u64) {
        self.backings.remove(&ino);
        self.append(&format!("c {ino}\n"));
    }

    pub fn asked(&mut self, unique: u64, rid: &str) {
        self.asks.insert(unique, rid.to_string());
        self.append(&format!("a {unique} {}\n", hex::encode(rid)));
    }

    /// The open that is request `unique` was answered: a compaction no
    /// longer keeps its ask (no line: a replay keeps it, and the next
    /// server drops it when its ask is gone from the journal).
    pub fn answered(&mut self, unique: u64) {
        self.asks.remove(&unique);
    }

    fn append(&mut self, text: &str) {
        self.written = self.written.saturating_add(text.len() as u64);
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
