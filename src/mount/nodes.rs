//! What each inode of the mount is, and the stable inode numbers.

use std::collections::HashMap;
use std::sync::Mutex;

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
    Query(String),
    AuditLog,
    OutboxDir(String),
    Request(String, String),
    Response(String, String),
    InboxDir(String),
    InboxItem(String, String),
    GrantsDir(String),
    Grant(String, String),
    ChildrenDir(String),
    JudgesDir,
    JudgeDir(String),
    JudgeNext(String),
    JudgeVerdict(String),
    JudgeLease(String),
}

impl Node {
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
                | Node::JudgesDir
                | Node::JudgeDir(_)
        )
    }
}

/// Inode numbers handed out on first sight and kept for the mount's life.
#[derive(Debug)]
pub struct Inodes {
    inner: Mutex<InodeMaps>,
}

#[derive(Debug)]
struct InodeMaps {
    by_node: HashMap<Node, u64>,
    by_ino: HashMap<u64, Node>,
    next: u64,
}

impl Default for Inodes {
    fn default() -> Self {
        let mut maps = InodeMaps {
            by_node: HashMap::new(),
            by_ino: HashMap::new(),
            next: 2,
        };
        maps.by_node.insert(Node::Root, 1);
        maps.by_ino.insert(1, Node::Root);
        Self {
            inner: Mutex::new(maps),
        }
    }
}

impl Inodes {
    pub fn ino(&self, node: &Node) -> u64 {
        let mut maps = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(ino) = maps.by_node.get(node) {
            return *ino;
        }
        let ino = maps.next;
        maps.next += 1;
        maps.by_node.insert(node.clone(), ino);
        maps.by_ino.insert(ino, node.clone());
        ino
    }

    pub fn node(&self, ino: u64) -> Option<Node> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .by_ino
            .get(&ino)
            .cloned()
    }
}
