//! The authority over the session tree (ADR 0008, DESIGN §2): the one
//! owner of its state, and the methods that start, withdraw and expire
//! asks, end sessions and restore the journal. Beside it: the state and
//! `finish` (`state.rs`), the lock and what its release commits
//! (`commit.rs`). Above it, calling it and never called by it: the walk
//! (`walk/`), deciding at an inbox and its views (`inbox/`), and the
//! mounts' questions (`view/`); below it, handed only what they need: the
//! tree and its words (`tree/`), the store (`store/`), the audit log and
//! events (`observe/`) and the chain's judges (`chain/`).
//!
//! Facts are fixed once at the asking session; every node then judges them
//! anew with its own recorded authority (config layers for its cwd plus its
//! grants), scoped to every agent on the principal chain below it. `allow`
//! and `deny` answer; `ask` waits in an interactive node's inbox or climbs
//! to the parent; a root nobody sits at denies with `no_decider`.
//!
//! All state sits behind one mutex: the work per operation is small and
//! bounded, and a single lock makes "first valid decision wins" trivially
//! true. Answers are delivered to parked waiters without any thread per
//! waiter.

pub(in crate::session) mod commit;
pub(in crate::session) mod state;

use crate::facts::request::Request;
use crate::policy::layers::PolicyLoader;
use crate::session::authority::commit::lock;
use crate::session::authority::state::{finish, State};
use crate::session::tree::access::{check_spawn, Caller, SpawnRefusal, Standing};
use crate::session::tree::ask::{AskId, DecidedBy, Outcome, Response, Waiter};
use crate::session::tree::{is_valid_name, SessionId, SessionTree, SpawnSpec};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthorityError {
    NotFound(String),
    Exists(String),
    Invalid(String),
    PermissionDenied(String),
    AlreadyDecided(String),
    /// A request over the size limit (`limits.requestBytes`, in force).
    TooLarge(usize),
    /// A directory that still holds entries cannot be removed.
    NotEmpty(String),
    /// A bound on what one session may keep was reached.
    Full(String),
    /// A decision could not be written to the audit log (so it was not
    /// delivered); with the write's errno.
    AuditUnavailable(String, i32),
}

impl std::fmt::Display for AuthorityError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotFound(m)
            | Self::Exists(m)
            | Self::Invalid(m)
            | Self::PermissionDenied(m)
            | Self::AlreadyDecided(m)
            | Self::NotEmpty(m)
            | Self::Full(m)
            | Self::AuditUnavailable(m, _) => f.write_str(m),
            Self::TooLarge(limit) => write!(
                f,
                "request is over the {limit}-byte limit (limits.requestBytes)"
            ),
        }
    }
}

pub struct Authority {
    pub(super) loader: Arc<PolicyLoader>,
    pub(super) owner_uid: u32,
    pub(super) state: Mutex<State>,
    /// The bounds on what an asker can make the daemon hold (the global
    /// config's `"limits"`).
    pub(super) limits: crate::session::tree::limits::Limits,
    /// Judges defined in the global config.
    pub(super) judges: HashMap<String, Arc<crate::session::chain::JudgeSpec>>,
    /// Reviews for configured judges, run by `review::serve_reviews`.
    pub(super) jobs: (
        crossbeam_channel::Sender<crate::session::chain::reviews::ReviewJob>,
        crossbeam_channel::Receiver<crate::session::chain::reviews::ReviewJob>,
    ),
    /// Called between the chunks of a grant's release: waits until most
    /// readers already woken have come back, so the requests they make
    /// next do not queue up ahead of every other asker's. Set by the mount
    /// ([`Self::set_release_pacer`]); without one nothing waits.
    pub(super) release_pacer: std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>,
    /// Big releases finished in the background: the session whose grant
    /// still has asks to re-judge. Served by [`Self::serve_releases`];
    /// until something serves them, a release runs whole in the decider's
    /// call.
    pub(super) releases: (
        crossbeam_channel::Sender<String>,
        crossbeam_channel::Receiver<String>,
    ),
    pub(super) releases_served: std::sync::atomic::AtomicBool,
}

impl Authority {
    /// Fails when the global config's `judges` are invalid.
    pub fn new(loader: Arc<PolicyLoader>, owner_uid: u32) -> Result<Self, String> {
        let judges =
            crate::session::chain::parse_judges(loader.global_config().extensions.get("judges"))?
                .into_iter()
                .map(|(name, spec)| (name, Arc::new(spec)))
                .collect();
        let limits = crate::session::tree::limits::Limits::parse(
            loader.global_config().extensions.get("limits"),
        )?;
        let mut state = State::default();
        state.retention.bounds = crate::session::store::retention::Bounds::of(&limits);
        Ok(Self {
            loader,
            owner_uid,
            state: Mutex::new(state),
            limits,
            judges,
            jobs: crossbeam_channel::unbounded(),
            release_pacer: std::sync::OnceLock::new(),
            releases: crossbeam_channel::unbounded(),
            releases_served: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Finishes big releases in the background until `stop`: a grant's
    /// decider is answered after the first chunk of the asks it covers,
    /// not after the last of 10,000 (the mount runs this on a thread).
    pub fn serve_releases(&self, stop: &std::sync::atomic::AtomicBool) {
        use std::sync::atomic::{AtomicBool, Ordering};
        /// Grants go back to releasing whole in the decider's call when
        /// this server ends, even by a panic.
        struct Serving<'a>(&'a AtomicBool);
        impl Drop for Serving<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::SeqCst);
            }
        }
        self.releases_served.store(true, Ordering::SeqCst);
        let serving = Serving(&self.releases_served);
        while !stop.load(Ordering::Relaxed) {
            if let Ok(session) = self
                .releases
                .1
                .recv_timeout(std::time::Duration::from_millis(100))
            {
                self.rewalk_pending_at(&session, usize::MAX);
            }
        }
        drop(serving);
        // What was still queued is finished here, not dropped.
        while let Ok(session) = self.releases.1.try_recv() {
            self.rewalk_pending_at(&session, usize::MAX);
        }
    }

    /// Sets what a big release waits on between chunks (once; later calls
    /// are ignored). It must return within a bounded time.
    pub fn set_release_pacer(&self, pacer: impl Fn() + Send + Sync + 'static) {
        let _ = self.release_pacer.set(Box::new(pacer));
    }

    pub fn add_root(
        &self,
        name: &str,
        spec: SpawnSpec,
        default_cwd: &str,
    ) -> Result<SessionId, AuthorityError> {
        let mut state = lock(&self.state);
        let id = state
            .tree
            .add_root(name, spec, default_cwd, self.owner_uid)
            .map_err(AuthorityError::Invalid)?;
        state.mark_session(&id);
        Ok(id)
    }

    /// Whether a session `id` exists (a root restored from the journal is
    /// not added again).
    pub fn has_session(&self, id: &str) -> bool {
        lock(&self.state).tree.get(id).is_some()
    }

    /// Re-reads the global config now (the daemon's `SIGHUP`); the error
    /// when it is invalid (the policies then fail closed).
    pub fn reload_global(&self) -> Option<String> {
        crate::session::tree::generation::invalidate();
        self.loader.reload_global()
    }

    /// What `caller` is to `session` (`None`: no such session).
    pub fn standing(&self, session: &str, caller: Caller) -> Option<Standing> {
        lock(&self.state)
            .tree
            .get(session)
            .map(|s| Standing::of(caller, s, self.owner_uid))
    }

    /// Spawns `name` under `parent` for `caller`, within what the spawn
    /// rule lets the caller give (see [`crate::session::tree::access`]).
    pub fn spawn(
        &self,
        parent: &str,
        name: &str,
        spec: SpawnSpec,
        caller: Caller,
    ) -> Result<SessionId, AuthorityError> {
        self.spawn_numbered(parent, name, spec, caller)
            .map(|(id, _)| id)
    }

    /// [`Self::spawn`], with the new session's serial: what a lease on it
    /// names ([`Self::end_leased`]).
    pub fn spawn_numbered(
        &self,
        parent: &str,
        name: &str,
        spec: SpawnSpec,
        caller: Caller,
    ) -> Result<(SessionId, u64), AuthorityError> {
        let spawner = lock(&self.state)
            .tree
            .get(parent)
            .cloned()
            .ok_or_else(|| AuthorityError::NotFound(format!("no session {parent:?}")))?;
        let standing = Standing::of(caller, &spawner, self.owner_uid);
        // The cwd is resolved on the filesystem: outside the lock.
        let spec = check_spawn(standing, &spawner, spec).map_err(|refusal| {
            tracing::warn!(uid = caller.uid, %parent, %name, ?refusal, "spawn refused");
            match refusal {
                SpawnRefusal::NotAllowed(reason) => AuthorityError::PermissionDenied(reason),
                SpawnRefusal::Invalid(reason) => AuthorityError::Invalid(reason),
            }
        })?;
        // Checked again under the lock: two spawns of one name that both
        // passed the checks above race here, and the loser is told EEXIST
        // (the name is taken), not EINVAL (nothing was wrong with it).
        let mut state = lock(&self.state);
        let id = format!("{parent}/{name}");
        if state.tree.get(&id).is_some() {
            return Err(AuthorityError::Exists(format!(
                "session {parent:?} already has a child {name:?}"
            )));
        }
        if let Some(reason) = self.spawn_bound(&state, parent) {
            tracing::warn!(uid = caller.uid, %parent, %name, %reason, "spawn refused");
            return Err(AuthorityError::Full(reason));
        }
        let id = state
            .tree
            .spawn(parent, name, spec)
            .map_err(AuthorityError::Invalid)?;
        let serial = state.tree.get(&id).map_or(0, |s| s.serial);
        state.mark_session(&id);
        // A session the journal does not hold would vanish at a restart:
        // none is spawned that could not be written.
        if let Err(error) = self.write_journal(&mut state) {
            state.tree.remove(&id);
            tracing::error!(%error, session = %id, "spawn refused: the journal cannot be written");
            return Err(AuthorityError::Full(format!(
                "the session could not be journaled: {error}"
            )));
        }
        Ok((id, serial))
    }

    /// Why `parent` may not have another child now, when a limit says so.
    fn spawn_bound(&self, state: &State, parent: &str) -> Option<String> {
        let limits = &self.limits;
        let node = state.tree.get(parent)?;
        if node.depth + 1 > limits.depth {
            return Some(format!(
                "a session may be at most {} deep (limits.depth): {parent:?} is at depth {}",
                limits.depth, node.depth
            ));
        }
        if node.children.len() >= limits.children {
            return Some(format!(
                "session {parent:?} has {} children, the most one may have (limits.children)",
                node.children.len()
            ));
        }
        let root = crate::session::tree::limits::root_of(parent);
        let in_tree = state.tree.count_in_tree(root);
        if in_tree >= limits.sessions {
            return Some(format!(
                "the tree of root {root:?} holds {in_tree} sessions, the most it may (limits.sessions)"
            ));
        }
        None
    }

    /// Why `session` may not raise another ask now, when a limit says so.
    pub(super) fn pending_bound(&self, state: &State, session: &str) -> Option<String> {
        let limits = &self.limits;
        let own = state.pending_by_origin.get(session).copied().unwrap_or(0);
        if own >= limits.pending_asks {
            return Some(format!(
                "session {session:?} has {own} asks waiting, the most one may (limits.pendingAsks); wait for an answer or withdraw one"
            ));
        }
        let root = crate::session::tree::limits::root_of(session);
        let tree = state.pending_by_root.get(root).copied().unwrap_or(0);
        if tree >= limits.tree_pending_asks {
            return Some(format!(
                "the tree of root {root:?} has {tree} asks waiting, the most it may (limits.treePendingAsks)"
            ));
        }
        None
    }

    /// The bounds in force.
    pub fn limits(&self) -> crate::session::tree::limits::Limits {
        self.limits
    }

    /// The largest request accepted, in bytes (`limits.requestBytes`).
    pub fn request_limit(&self) -> usize {
        self.limits.request_bytes
    }

    /// Ends `parent`'s child `name` for `caller` (its asker, decider or
    /// the operator).
    pub fn end_child(
        &self,
        parent: &str,
        name: &str,
        caller: Caller,
    ) -> Result<(), AuthorityError> {
        // A name is one path component: `end a/b` must not reach a
        // grandchild by building its id.
        if !is_valid_name(name) {
            return Err(AuthorityError::Invalid(format!(
                "{name:?} is not a child's name"
            )));
        }
        match self.standing(parent, caller) {
            None => Err(AuthorityError::NotFound(format!("no session {parent:?}"))),
            Some(standing) if !standing.may_control() => Err(AuthorityError::PermissionDenied(
                format!("uid {} may not end children of {parent:?}", caller.uid),
            )),
            Some(_) => self.end_session(&format!("{parent}/{name}")),
        }
    }

    /// Read access to the tree (for listing and `session.json`).
    pub fn with_tree<T>(&self, f: impl FnOnce(&SessionTree) -> T) -> T {
        f(&lock(&self.state).tree)
    }

    /// Ends a session and its descendants: their pending asks are answered
    /// `session_ended` and leave every inbox.
    /// Records the enforcement views serving `id` (shown in its
    /// `session.json`, where `permfs run` finds what to bind).
    pub fn set_views(&self, id: &str, views: Vec<(String, String)>) {
        if let Some(session) = lock(&self.state).tree.get_mut(id) {
            session.views.extend(views);
        }
    }

    pub fn end_session(&self, id: &str) -> Result<(), AuthorityError> {
        self.end_session_if(id, |_| true)
    }

    /// Ends session `id` if it is still the one numbered `serial` (its
    /// lease was taken for it; a later session under the same id is not
    /// ended). False when it is gone or another.
    pub fn end_leased(&self, id: &str, serial: u64) -> bool {
        self.end_session_if(id, |session| session.serial == serial)
            .is_ok()
    }

    /// Whether session `id` is still the one numbered `serial`.
    pub fn is_session(&self, id: &str, serial: u64) -> bool {
        lock(&self.state)
            .tree
            .get(id)
            .is_some_and(|session| session.serial == serial)
    }

    fn end_session_if(
        &self,
        id: &str,
        is_the_one: impl FnOnce(&crate::session::tree::Session) -> bool,
    ) -> Result<(), AuthorityError> {
        let mut state = lock(&self.state);
        if !state.tree.get(id).is_some_and(is_the_one) {
            return Err(AuthorityError::NotFound(format!("no session {id:?}")));
        }
        let removed = state.tree.remove(id);
        for session in &removed {
            state.mark_session(session);
            if let Some(mut log) = state.events.remove(session) {
                log.close();
            }
        }
        let ended: Vec<AskId> = state
            .asks
            .values()
            .filter(|a| removed.contains(&a.origin))
            .map(|a| a.id.clone())
            .collect();
        for ask_id in &ended {
            finish(
                &mut state,
                ask_id,
                Outcome::SessionEnded,
                DecidedBy::SessionEnded,
                None,
                None,
            );
            crate::session::store::retention::forget(&mut state.kept(), ask_id);
        }
        state
            .outboxes
            .retain(|(origin, _), _| !removed.contains(origin));
        Ok(())
    }

    pub fn outbox_contains(&self, session: &str, rid: &str) -> bool {
        lock(&self.state)
            .outboxes
            .contains_key(&(session.to_string(), rid.to_string()))
    }

    /// The rids in a session's outbox.
    pub fn outbox(&self, session: &str) -> Vec<String> {
        let state = lock(&self.state);
        let mut rids: Vec<String> = state
            .outboxes
            .keys()
            .filter(|(origin, _)| origin == session)
            .map(|(_, rid)| rid.clone())
            .collect();
        rids.sort();
        rids
    }

    /// The asks a session's pi view raised, pending or answered, as
    /// `(session, target directory, request name)`: what a server started
    /// on a journal shows again in its pi views, so a pi child that was
    /// waiting when the last server died finds its request, then its
    /// response, where it looks. Only the pi view sets a provenance
    /// (`facts::forwarded::parse`); the journal keeps it with an answer.
    pub fn forwarded_asks(&self) -> Vec<(String, String, String)> {
        let state = lock(&self.state);
        state
            .asks
            .values()
            .filter_map(|ask| {
                let target = ask.forwarded_target()?.to_string();
                Some((ask.origin.clone(), target, ask.rid.clone()))
            })
            .collect()
    }

    pub fn ask_for(&self, session: &str, rid: &str) -> Option<AskId> {
        lock(&self.state)
            .outboxes
            .get(&(session.to_string(), rid.to_string()))
            .cloned()
    }

    /// Raises an ask from `session`'s outbox and walks it at once. A
    /// request that cannot be understood still gets a response (outcome
    /// `invalid`, with the reason) and the error is returned to the writer.
    pub fn submit(&self, session: &str, rid: &str, text: &[u8]) -> Result<AskId, AuthorityError> {
        self.raise(session, rid, self.read_request(text), 0)
    }

    /// A request file's bytes as a request, or why they are not one (what
    /// its "invalid" answer says). [`Self::submit`] reads them so; a
    /// caller that must know before raising reads them first and raises
    /// with [`Self::submit_request`].
    pub fn read_request(&self, text: &[u8]) -> Result<Request, String> {
        let limit = self.limits.request_bytes;
        if text.len() > limit {
            return Err(format!(
                "request is {} bytes; the limit is {limit} (limits.requestBytes)",
                text.len()
            ));
        }
        std::str::from_utf8(text)
            .map_err(|_| "request is not UTF-8 text".to_string())
            .and_then(|t| Request::parse(t).map_err(|e| e.0))
    }

    /// Raises an ask read by another reader than [`Self::submit`]'s (a
    /// forwarded pi request): `Err` holds why it could not be read, and the
    /// ask is then answered `invalid` with that reason.
    pub fn submit_request(
        &self,
        session: &str,
        rid: &str,
        parsed: Result<Request, String>,
    ) -> Result<AskId, AuthorityError> {
        self.raise(session, rid, parsed, 0)
    }

    /// [`Self::submit_request`] for a request written on a descriptor that
    /// reads its answer back (an exchange): `request_len` bytes were
    /// written, so the answer starts at that offset. Journaled with the
    /// ask, so a server taking the descriptor over after a restart serves
    /// the answer from where the reader's offsets say it starts.
    pub fn submit_exchange(
        &self,
        session: &str,
        rid: &str,
        parsed: Result<Request, String>,
        request_len: u64,
    ) -> Result<AskId, AuthorityError> {
        self.raise(session, rid, parsed, request_len)
    }

    /// Where the answer of `session`'s ask `rid` starts on the descriptor
    /// that wrote it (see [`Self::submit_exchange`]); `None` when there is
    /// no such ask.
    pub fn request_len(&self, session: &str, rid: &str) -> Option<u64> {
        let state = lock(&self.state);
        let id = state
            .outboxes
            .get(&(session.to_string(), rid.to_string()))?;
        state.asks.get(id).map(|ask| ask.request_len)
    }

    /// Records a request that was refused before it could be read (too
    /// large, say): it gets a response saying why, like any bad request.
    pub fn submit_refused(
        &self,
        session: &str,
        rid: &str,
        reason: String,
    ) -> Result<AskId, AuthorityError> {
        self.raise(session, rid, Err(reason), 0)
    }

    /// Journals what was marked now, under the lock (before the caller is
    /// answered), rather than when the lock is released.
    pub(super) fn write_journal(&self, state: &mut State) -> Result<(), String> {
        state.flush().map_err(|(error, pending)| {
            // Marked again: the next release tries once more (and denies
            // the pending asks among them if it fails too).
            for id in pending {
                state.mark_ask(&id);
            }
            error
        })
    }

    /// Puts back what `journal` holds and journals every change from now
    /// on (the mount calls this once, before serving, after the audit log
    /// is set): sessions and their grants, pending asks in the same inboxes
    /// with the same ids and deadlines, retained answers. The restart is an
    /// audit line (`"event": "restored"`), so the chain shows it. Sessions
    /// held by a lease are then ended (the handle that held them belonged
    /// to the process that died). `Err` when the journal cannot be read or
    /// the authority already holds asks.
    ///
    /// With `takeover` (a new server on the connection a dead one served,
    /// under `permfs mount`'s supervisor), a `ctl` handle that held a lease
    /// is still open in the kernel: a session whose holder is alive and
    /// whose handle is known is kept (`Restored::kept_leases`), for the
    /// mount to end when that handle closes.
    pub fn restore(
        &self,
        journal: Arc<crate::session::store::journal::Journal>,
        takeover: bool,
    ) -> Result<crate::session::store::persist::Restored, String> {
        let snapshot = journal.load()?;
        let mut state = lock(&self.state);
        if !state.asks.is_empty() || state.tree.all().next().is_some() {
            return Err(
                "the journal is restored into an authority that already holds state".into(),
            );
        }
        state.journal = Some(journal);
        let (mut restored, rewalk) = crate::session::store::persist::restore(snapshot, &mut *state);
        if let Some(audit) = state.audit.clone() {
            restored.late_lines = crate::session::authority::commit::log_unlogged(&state, &audit)?;
        }
        // Under a judge's review when the process died: walked again from
        // the asker, on the facts it had.
        for ask_id in &rewalk {
            if let Some(origin) = state.asks.get(ask_id).map(|a| a.origin.clone()) {
                self.walk(&mut state, ask_id, &origin);
            }
        }
        let mut leased: Vec<(String, u64, u32)> = Vec::new();
        let all: Vec<(String, u64, u32, Option<u64>)> = state
            .tree
            .all()
            .filter_map(|s| {
                s.lease
                    .map(|pid| (s.id.clone(), s.serial, pid, s.lease_handle))
            })
            .collect();
        for (id, serial, pid, handle) in all {
            // SAFETY: kill with signal 0 only checks that the pid exists.
            let alive = unsafe { libc::kill(pid as libc::pid_t, 0) } == 0;
            match handle {
                Some(handle) if takeover && alive => {
                    restored.kept_leases.push((handle, id, serial));
                }
                _ => {
                    restored.ended_leases.push((id.clone(), pid, alive));
                    leased.push((id, serial, pid));
                }
            }
        }
        // A first start (an empty journal) has nothing to tell.
        let anything = restored.sessions + restored.unreadable > 0;
        if let Some(audit) = state.audit.clone().filter(|_| anything) {
            let mut line = serde_json::Map::new();
            line.insert("time".into(), crate::session::tree::ask::now_ms().into());
            line.insert("event".into(), "restored".into());
            line.insert("epoch".into(), state.epoch.into());
            if let Ok(serde_json::Value::Object(counts)) = serde_json::to_value(&restored) {
                line.extend(counts);
            }
            audit
                .append(line)
                .map_err(|e| format!("the restart cannot be audited: {e}"))?;
        }
        drop(state);
        for (id, serial, pid) in &leased {
            if self.end_leased(id, *serial) {
                tracing::info!(session = %id, pid, "its lease's handle died with the previous process: ended");
            }
        }
        Ok(restored)
    }

    /// The journal in use, for `permfs status` (its size).
    pub fn journal(&self) -> Option<Arc<crate::session::store::journal::Journal>> {
        lock(&self.state).journal.clone()
    }

    /// Whether changes are journaled (a restart keeps pending asks).
    pub fn is_journaled(&self) -> bool {
        lock(&self.state).journal.is_some()
    }

    /// Records that `pid` holds a lease on session `id` (numbered
    /// `serial`) through a `ctl` handle: journaled, so a restart, which
    /// loses the handle, ends the session (`persist.rs`).
    pub fn note_lease(&self, id: &str, serial: u64, pid: u32, handle: u64) {
        let mut state = lock(&self.state);
        if let Some(session) = state.tree.get_mut(id).filter(|s| s.serial == serial) {
            session.lease = Some(pid);
            session.lease_handle = Some(handle);
            state.mark_session(id);
        }
    }

    /// Records every decision from now on in `log`.
    /// Sets the lifetime number folded into every id minted from now on
    /// (`epoch::claim_next`); the mount sets it before serving anything.
    pub fn set_epoch(&self, epoch: u64) {
        lock(&self.state).epoch = epoch;
    }

    /// This daemon's lifetime number (see [`Self::set_epoch`]).
    pub fn epoch(&self) -> u64 {
        lock(&self.state).epoch
    }

    pub fn set_audit(&self, log: Arc<crate::session::observe::audit::AuditLog>) {
        lock(&self.state).audit = Some(log);
    }

    /// A new reader of `session`'s events: it sees what happens from now.
    pub fn events_open(
        &self,
        session: &str,
    ) -> Result<crate::session::observe::events::Cursor, AuthorityError> {
        let mut state = lock(&self.state);
        if state.tree.get(session).is_none() {
            return Err(AuthorityError::NotFound(format!("no session {session:?}")));
        }
        let next = state
            .events
            .entry(session.to_string())
            .or_default()
            .next_seq();
        Ok(Arc::new(Mutex::new(next)))
    }

    /// Events after `cursor` now, or `None` with `deliver` parked until
    /// there are some.
    pub fn events_read(
        &self,
        session: &str,
        cursor: &crate::session::observe::events::Cursor,
        max: usize,
        deliver: crate::session::observe::events::EventDeliver,
    ) -> Result<Option<Vec<u8>>, AuthorityError> {
        let mut state = lock(&self.state);
        if state.tree.get(session).is_none() {
            return Ok(Some(Vec::new()));
        }
        let log = state.events.entry(session.to_string()).or_default();
        if log.has_news(cursor) {
            return Ok(Some(log.take(cursor, max)));
        }
        log.park(Arc::clone(cursor), max, deliver);
        Ok(None)
    }

    /// Whether `ask_id` is known and already answered (a late decision is
    /// then `EALREADY`, not "no such file").
    pub fn is_answered(&self, ask_id: &str) -> bool {
        lock(&self.state)
            .asks
            .get(ask_id)
            .is_some_and(|a| a.response.is_some())
    }

    /// Parks `waiter` until the ask is answered, or returns the answer now.
    pub fn wait(
        &self,
        ask_id: &str,
        waiter: Waiter,
    ) -> Result<Option<Arc<Response>>, AuthorityError> {
        let mut state = lock(&self.state);
        let ask = state
            .asks
            .get_mut(ask_id)
            .ok_or_else(|| AuthorityError::NotFound(format!("no ask {ask_id:?}")))?;
        if let Some(response) = ask.response.clone() {
            crate::session::store::retention::mark_read(&mut state.kept(), ask_id);
            return Ok(Some(response));
        }
        ask.waiters.push(waiter);
        Ok(None)
    }

    /// The answer, for a reader of the response file: marks it read (see
    /// [`crate::session::store::retention`]).
    pub fn read_response(&self, ask_id: &str) -> Option<Arc<Response>> {
        let mut state = lock(&self.state);
        let response = state.asks.get(ask_id)?.response.clone()?;
        crate::session::store::retention::mark_read(&mut state.kept(), ask_id);
        Some(response)
    }

    /// (answers kept, their real bytes).
    pub fn retention_totals(&self) -> (usize, usize) {
        lock(&self.state).retention.totals()
    }

    /// Tells `hook` the `(session, rid)` of every ask forgotten from now on.
    pub fn on_forget(&self, hook: crate::session::store::retention::ForgetHook) {
        lock(&self.state).retention.on_forget = Some(hook);
    }

    pub fn response(&self, ask_id: &str) -> Option<Arc<Response>> {
        lock(&self.state)
            .asks
            .get(ask_id)
            .and_then(|a| a.response.clone())
    }

    /// Withdraws a request (its file was unlinked).
    pub fn withdraw(&self, session: &str, rid: &str) -> Result<(), AuthorityError> {
        let mut state = lock(&self.state);
        let key = (session.to_string(), rid.to_string());
        let ask_id = state
            .outboxes
            .remove(&key)
            .ok_or_else(|| AuthorityError::NotFound(format!("no request {rid:?}")))?;
        finish(
            &mut state,
            &ask_id,
            Outcome::Cancelled,
            DecidedBy::Cancelled,
            None,
            None,
        );
        crate::session::store::retention::forget(&mut state.kept(), &ask_id);
        Ok(())
    }

    /// Asks waiting in `session`'s inbox.
    pub fn inbox(&self, session: &str) -> Vec<AskId> {
        let state = lock(&self.state);
        state
            .pending
            .iter()
            .filter(|id| {
                state
                    .asks
                    .get(*id)
                    .is_some_and(|a| a.pending_at.as_deref() == Some(session))
            })
            .cloned()
            .collect()
    }

    /// The answers a person gave that are still kept, with the inbox they
    /// were given at: a decision written just before a restart is re-sent
    /// by the kernel to an entry that has left its inbox (the mount gives
    /// those entries their numbers back, see [`Self::decided_by_person`]).
    pub fn person_decisions(&self) -> Vec<(String, AskId)> {
        let state = lock(&self.state);
        state
            .asks
            .values()
            .filter_map(|a| {
                let response = a.response.as_ref()?;
                let at = response.responder_session_id.clone()?;
                matches!(response.decided_by, DecidedBy::User { .. }).then(|| (at, a.id.clone()))
            })
            .collect()
    }

    /// Whether ask `ask_id` was answered by a person at `session` the way
    /// `text` decides (an allow, or a deny): the decision a re-sent write
    /// carries was then taken. Another decision on it is not (its writer
    /// is told the ask was decided, as before the restart).
    pub fn decided_by_person(&self, session: &str, ask_id: &str, text: &str) -> bool {
        let Ok(decision) = crate::session::tree::decision::Decision::parse(text) else {
            return false;
        };
        let denies = matches!(decision, crate::session::tree::decision::Decision::Deny(_));
        let state = lock(&self.state);
        state
            .asks
            .get(ask_id)
            .and_then(|a| a.response.as_ref())
            .is_some_and(|r| {
                matches!(r.decided_by, DecidedBy::User { .. })
                    && r.responder_session_id.as_deref() == Some(session)
                    && r.approved != denies
            })
    }

    /// Whether `ask_id` is waiting in `session`'s inbox.
    pub fn is_pending_at(&self, session: &str, ask_id: &str) -> bool {
        let state = lock(&self.state);
        state.pending.contains(ask_id)
            && state
                .asks
                .get(ask_id)
                .is_some_and(|a| a.pending_at.as_deref() == Some(session))
    }

    /// Whether `session` holds the grant `grant_id`.
    pub fn has_grant(&self, session: &str, grant_id: &str) -> bool {
        lock(&self.state)
            .tree
            .get(session)
            .is_some_and(|s| s.grants.iter().any(|g| g.id == grant_id))
    }

    /// When the ask entered the inbox it waits in (ms since the epoch).
    pub fn arrived_ms(&self, ask_id: &str) -> Option<u64> {
        lock(&self.state)
            .asks
            .get(ask_id)
            .and_then(|a| a.arrived_ms)
    }

    /// May `caller` decide at `session`?
    pub fn may_decide(&self, session: &str, caller: Caller) -> bool {
        self.standing(session, caller)
            .is_some_and(Standing::may_decide)
    }

    /// Ends asks past their deadline (`timeout`). Returns how many.
    pub fn expire(&self, now: Instant) -> usize {
        let mut state = lock(&self.state);
        self.expire_reviews(&mut state, now);
        crate::session::store::retention::forget_old_answers(&mut state.kept(), now);
        state.trim_when_idle(now);
        if state.next_deadline.is_none_or(|deadline| now < deadline) {
            return 0;
        }
        let mut expired: Vec<AskId> = Vec::new();
        let mut next: Option<Instant> = None;
        for id in &state.pending {
            let Some(ask) = state.asks.get(id) else {
                continue;
            };
            if ask.deadline <= now {
                expired.push(id.clone());
            } else if next.is_none_or(|n| ask.deadline < n) {
                next = Some(ask.deadline);
            }
        }
        state.next_deadline = next;
        for ask_id in &expired {
            finish(
                &mut state,
                ask_id,
                Outcome::Timeout,
                DecidedBy::Timeout,
                Some("no decision before the forwarding timeout".into()),
                None,
            );
        }
        expired.len()
    }

    /// Writes to the journal whatever is marked, deletions held back
    /// included (`persist::HOLD_DELETES`): for a server that stops and
    /// leaves its state to the next.
    pub fn sync_journal(&self) {
        let mut state = lock(&self.state);
        if let Err((error, _)) = state.flush_with(true) {
            tracing::error!(%error, "the journal could not be brought up to date at the stop");
        }
    }

    /// Answers every pending ask `cancelled` (the daemon is stopping).
    pub fn cancel_all(&self) {
        let mut state = lock(&self.state);
        let pending: Vec<AskId> = state.pending.iter().cloned().collect();
        for ask_id in pending {
            finish(
                &mut state,
                &ask_id,
                Outcome::Cancelled,
                DecidedBy::Cancelled,
                Some("permfs is shutting down".into()),
                None,
            );
        }
    }
}

#[cfg(test)]
mod tests;
