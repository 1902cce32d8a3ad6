//! What the mount shows: which node a name or an inode number is, the
//! entries of each directory, the attributes and the contents of the
//! fixed files. Nothing here changes state.

use super::*;

impl PermFs {
    pub(super) fn session_exists(&self, id: &str) -> bool {
        self.authority.with_tree(|t| t.get(id).is_some())
    }
    /// Does this node still exist?
    pub(super) fn exists(&self, node: &Node) -> bool {
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
    pub(super) fn content(&self, node: &Node) -> Option<Vec<u8>> {
        let json = |v: serde_json::Value| {
            let mut bytes = serde_json::to_vec_pretty(&v).unwrap_or_default();
            bytes.push(b'\n');
            bytes
        };
        match node {
            Node::Readme => Some(README_TEXT.as_bytes().to_vec()),
            Node::AuditLog => self.audit_path.as_ref().and_then(|p| std::fs::read(p).ok()),
            Node::SessionJson(s) => self.authority.session_view(s).map(|mut view| {
                // How this daemon can judge a sandbox's files, and how
                // this session's are judged (`permfs run --mechanism`).
                let kernel = self.kernel.get();
                let mut mechanisms = vec!["fuse"];
                if kernel.is_some() {
                    mechanisms.push("kernel");
                }
                view["mechanisms"] = serde_json::json!(mechanisms);
                if kernel.is_some_and(|k| k.judges(s)) {
                    view["mechanism"] = "kernel".into();
                } else if view["views"].as_array().is_some_and(|v| !v.is_empty()) {
                    view["mechanism"] = "fuse".into();
                }
                json(view)
            }),
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
    pub(super) fn entry_attr(&self, node: &Node) -> FileAttr {
        self.attr_for(node, self.inodes.referenced(node))
    }
    pub(super) fn attr(&self, node: &Node) -> FileAttr {
        self.attr_for(node, self.inodes.ino(node))
    }
    pub(super) fn attr_for(&self, node: &Node, ino: u64) -> FileAttr {
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
    pub(super) fn decided_response(&self, session: &str, rid: &str) -> Option<Arc<Response>> {
        self.authority
            .ask_for(session, rid)
            .and_then(|ask| self.authority.response(&ask))
    }
    pub(super) fn child(&self, parent: &Node, name: &str) -> Option<Node> {
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
    pub(super) fn entries(&self, node: &Node) -> Vec<(String, Node)> {
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
    pub(super) fn node(&self, ino: INodeNo) -> Result<Node, Errno> {
        let node = self.inodes.node(ino.0).ok_or(Errno::ENOENT)?;
        if self.exists(&node) {
            Ok(node)
        } else {
            Err(Errno::ENOENT)
        }
    }
    /// A directory's entries, `.` and `..` first.
    pub(super) fn listing(&self, ino: u64, node: &Node) -> Listing {
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
}
