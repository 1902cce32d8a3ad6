//! The daemon's own permission checks: who owns each file (the modes `ls
//! -l` shows), who the caller is (uid and mount namespace), and who may
//! open, list or look inside a node. The mount does not use the kernel's
//! `default_permissions`, so these are the only gate (`docs/security.md`).

use super::*;

impl PermFs {
    /// Who a node belongs to and its mode, so that `ls -l` and `access(2)`
    /// tell the truth of the daemon's own checks. A session's asking side
    /// (outbox, ctl, query, children, pi) belongs to its asker uid, its
    /// deciding side (inbox, events, grants) to its decider (the mount
    /// owner when none is bound); the group is the mount owner's. The
    /// daemon checks the exact uid and namespace on every call that looks
    /// inside, asks, spawns or decides.
    pub(super) fn ownership(&self, node: &Node) -> (u32, u16) {
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
    pub(super) fn caller(&self, req: &Request) -> Caller {
        self.namespaces.caller(req.uid(), req.pid())
    }
    /// The operator: root or the mount owner, outside any sandbox.
    pub(super) fn is_operator(&self, caller: Caller) -> bool {
        caller.in_daemon_namespace && (caller.uid == 0 || caller.uid == self.uid)
    }
    /// The daemon's own check of who may open or list `node`, behind the
    /// kernel's mode check: the same rule, with the exact uid and the
    /// caller's namespace. The namespace can only raise a caller's
    /// standing, so it is read (a procfs lookup) only when the uid alone
    /// does not suffice: an asker opening its own files never pays for it.
    pub(super) fn check_open(&self, req: &Request, node: &Node) -> Result<(), Errno> {
        let by_uid = Caller {
            uid: req.uid(),
            in_daemon_namespace: false,
        };
        // The first look, by uid alone, is no verdict: only the answer
        // for the real caller is (and only a real refusal is logged).
        match self.allows(by_uid, node) {
            Ok(true) => Ok(()),
            _ => self.check_open_as(self.caller(req), node),
        }
    }
    /// Looking a name up in a directory that is closed to others (its mode
    /// has no search bit for them: an outbox, an inbox, a pi view, the
    /// judges) takes the standing that opening it does. The kernel's mode
    /// check is not used (see `docs/security.md`), so this is what keeps a
    /// stranger from even learning which asks exist.
    pub(super) fn check_search(&self, req: &Request, dir: &Node) -> Result<(), Errno> {
        if dir.mode() & 0o001 != 0 {
            return Ok(());
        }
        self.check_open(req, dir)
    }
    /// Refuses (`EACCES`, logged) what `caller` may not open or list.
    pub(super) fn check_open_as(&self, caller: Caller, node: &Node) -> Result<(), Errno> {
        if self.allows(caller, node)? {
            return Ok(());
        }
        tracing::info!(
            uid = caller.uid,
            sandboxed = !caller.in_daemon_namespace,
            ?node,
            "access refused"
        );
        Err(Errno::EACCES)
    }
    /// Whether `caller` may open or list `node`; says nothing.
    fn allows(&self, caller: Caller, node: &Node) -> Result<bool, Errno> {
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
        Ok(allowed)
    }
}
