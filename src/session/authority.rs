//! The authority over the session tree (ADR 0008, DESIGN §2): its state,
//! the lock, and the methods that start, decide, withdraw and expire asks.
//! The walk itself is in `walk.rs`; deciding at an inbox (decisions,
//! grants, the re-walk they start) in `deciding.rs`; the decision language in
//! `decision.rs`; what a grant records in `grants.rs`; the JSON views in
//! `views.rs`; which answers are kept in `retention.rs`.
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

use super::access::{check_spawn, Caller, SpawnRefusal, Standing};
use super::ask::{AskId, DecidedBy, Outcome, Response, Waiter};
use super::commit::lock;
use super::state::{finish, State};
use super::tree::{is_valid_name, SessionId, SessionTree, SpawnSpec};
use crate::facts::request::Request;
use crate::policy::layers::PolicyLoader;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub use super::decision::{breadth, Breadth, Decision, MAX_DECISION_PATTERNS, MAX_PATTERN_BYTES};
pub use super::retention::{
    MAX_READ_BYTES, MAX_RETAINED_ANSWERS, MAX_RETAINED_BYTES, RETAIN_ANSWERS,
};

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
    pub(super) limits: super::limits::Limits,
    /// Judges defined in the global config.
    pub(super) judges: HashMap<String, Arc<super::chain::JudgeSpec>>,
    /// Reviews for configured judges, run by `review::serve_reviews`.
    pub(super) jobs: (
        crossbeam_channel::Sender<super::reviews::ReviewJob>,
        crossbeam_channel::Receiver<super::reviews::ReviewJob>,
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
        let judges = super::chain::parse_judges(loader.global_config().extensions.get("judges"))?
            .into_iter()
            .map(|(name, spec)| (name, Arc::new(spec)))
            .collect();
        let limits = super::limits::Limits::parse(loader.global_config().extensions.get("limits"))?;
        let mut state = State::default();
        state.retention.bounds = super::retention::Bounds::of(&limits);
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
        super::generation::invalidate();
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
    /// rule lets the caller give (see [`super::access`]).
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
        let root = super::limits::root_of(parent);
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
        let root = super::limits::root_of(session);
        let tree = state.pending_by_root.get(root).copied().unwrap_or(0);
        if tree >= limits.tree_pending_asks {
            return Some(format!(
                "the tree of root {root:?} has {tree} asks waiting, the most it may (limits.treePendingAsks)"
            ));
        }
        None
    }

    /// The bounds in force.
    pub fn limits(&self) -> super::limits::Limits {
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
        is_the_one: impl FnOnce(&super::tree::Session) -> bool,
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
            super::retention::forget(&mut state.kept(), ask_id);
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
        journal: Arc<super::journal::Journal>,
        takeover: bool,
    ) -> Result<super::persist::Restored, String> {
        let snapshot = journal.load()?;
        let mut state = lock(&self.state);
        if !state.asks.is_empty() || state.tree.all().next().is_some() {
            return Err(
                "the journal is restored into an authority that already holds state".into(),
            );
        }
        state.journal = Some(journal);
        let (mut restored, rewalk) = super::persist::restore(snapshot, &mut *state);
        if let Some(audit) = state.audit.clone() {
            restored.late_lines = super::commit::log_unlogged(&state, &audit)?;
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
            line.insert("time".into(), super::ask::now_ms().into());
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
    pub fn journal(&self) -> Option<Arc<super::journal::Journal>> {
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

    pub fn set_audit(&self, log: Arc<super::audit::AuditLog>) {
        lock(&self.state).audit = Some(log);
    }

    /// A new reader of `session`'s events: it sees what happens from now.
    pub fn events_open(&self, session: &str) -> Result<super::events::Cursor, AuthorityError> {
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
        cursor: &super::events::Cursor,
        max: usize,
        deliver: super::events::EventDeliver,
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
            super::retention::mark_read(&mut state.kept(), ask_id);
            return Ok(Some(response));
        }
        ask.waiters.push(waiter);
        Ok(None)
    }

    /// The answer, for a reader of the response file: marks it read (see
    /// [`super::retention`]).
    pub fn read_response(&self, ask_id: &str) -> Option<Arc<Response>> {
        let mut state = lock(&self.state);
        let response = state.asks.get(ask_id)?.response.clone()?;
        super::retention::mark_read(&mut state.kept(), ask_id);
        Some(response)
    }

    /// (answers kept, their real bytes).
    pub fn retention_totals(&self) -> (usize, usize) {
        lock(&self.state).retention.totals()
    }

    /// Tells `hook` the `(session, rid)` of every ask forgotten from now on.
    pub fn on_forget(&self, hook: super::retention::ForgetHook) {
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
        super::retention::forget(&mut state.kept(), &ask_id);
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
        let Ok(decision) = super::decision::Decision::parse(text) else {
            return false;
        };
        let denies = matches!(decision, super::decision::Decision::Deny(_));
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
        super::retention::forget_old_answers(&mut state.kept(), now);
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
mod tests {
    use super::*;
    use crate::policy::layers::PolicySources;
    use std::io::Write;

    fn authority(global: &str) -> (Authority, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("config.json");
        std::fs::File::create(&path)
            .and_then(|mut f| f.write_all(global.as_bytes()))
            .expect("config written");
        let loader = PolicyLoader::new(PolicySources {
            global: Some(path),
            ..Default::default()
        })
        .expect("loader");
        (
            Authority::new(Arc::new(loader), 1000).expect("authority"),
            dir,
        )
    }

    /// The operator (root in the daemon's namespace).
    fn root() -> Caller {
        uid(0)
    }

    fn uid(uid: u32) -> Caller {
        Caller {
            uid,
            in_daemon_namespace: true,
        }
    }

    fn add_interactive_main(authority: &Authority, cwd: &str) {
        let spec = SpawnSpec {
            interactive: true,
            ..Default::default()
        };
        authority.add_root("main", spec, cwd).expect("root");
    }

    #[test]
    fn an_ask_climbs_to_the_interactive_root_and_a_decision_answers_it() {
        let (authority, dir) =
            authority(r#"{"permission": {"bash": {"*": "ask", "ls": "allow"}}}"#);
        let cwd = dir.path().to_string_lossy().into_owned();
        add_interactive_main(&authority, &cwd);
        let child = authority
            .spawn("main", "worker", SpawnSpec::default(), root())
            .expect("child");
        let allowed = authority
            .submit(&child, "r1", br#"{"surface":"bash","value":"ls"}"#)
            .expect("ok");
        assert_eq!(
            authority.response(&allowed).map(|r| r.outcome),
            Some(Outcome::Allow)
        );

        let pending = authority
            .submit(&child, "r2", br#"{"surface":"bash","value":"make"}"#)
            .expect("ok");
        assert!(authority.response(&pending).is_none());
        assert_eq!(authority.inbox("main"), vec![pending.clone()]);
        assert!(authority.inbox(&child).is_empty());
        assert!(matches!(
            authority.decide("main", &pending, uid(4242), "allow"),
            Err(AuthorityError::PermissionDenied(_))
        ));
        assert!(matches!(
            authority.decide("main", &pending, uid(0), "maybe"),
            Err(AuthorityError::Invalid(_))
        ));
        authority
            .decide("main", &pending, uid(0), "deny not now")
            .expect("decided");
        let response = authority.response(&pending).expect("answered");
        assert_eq!(response.state, "denied_with_reason");
        assert_eq!(response.hops.len(), 2);
        assert!(matches!(
            authority.decide("main", &pending, uid(0), "allow"),
            Err(AuthorityError::AlreadyDecided(_))
        ));
    }

    #[test]
    fn a_spawner_cannot_lend_a_child_a_more_privileged_agent() {
        let (authority, dir) = authority(
            r#"{"permission": {"bash": "ask"}, "agents": {"admin": {"bash": "allow"}, "worker": {"bash": {"*": "ask", "rm *": "deny"}}}}"#,
        );
        let cwd = dir.path().to_string_lossy().into_owned();
        add_interactive_main(&authority, &cwd);
        let admin = SpawnSpec {
            agent: Some("admin".into()),
            ..Default::default()
        };
        let direct = authority
            .spawn("main", "a", admin.clone(), root())
            .expect("child");
        let ok = authority
            .submit(&direct, "r", br#"{"surface":"bash","value":"rm x"}"#)
            .expect("ok");
        assert_eq!(
            authority.response(&ok).map(|r| r.outcome),
            Some(Outcome::Allow),
            "admin itself may"
        );

        let worker = authority
            .spawn(
                "main",
                "w",
                SpawnSpec {
                    agent: Some("worker".into()),
                    ..Default::default()
                },
                root(),
            )
            .expect("child");
        let disguised = authority
            .spawn(&worker, "g", admin, root())
            .expect("grandchild");
        let denied = authority
            .submit(&disguised, "r", br#"{"surface":"bash","value":"rm x"}"#)
            .expect("ok");
        assert_eq!(
            authority.response(&denied).map(|r| r.outcome),
            Some(Outcome::Deny)
        );
        let asked = authority
            .submit(&disguised, "s", br#"{"surface":"bash","value":"make"}"#)
            .expect("ok");
        assert!(
            authority.response(&asked).is_none(),
            "worker's ask still applies"
        );
        assert_eq!(authority.inbox("main"), vec![asked]);
    }

    #[test]
    fn a_headless_root_denies_with_no_decider() {
        let (authority, dir) = authority(r#"{}"#);
        let cwd = dir.path().to_string_lossy().into_owned();
        authority
            .add_root("main", SpawnSpec::default(), &cwd)
            .expect("root");
        let ask = authority
            .submit("main", "r", br#"{"surface":"bash","value":"make"}"#)
            .expect("ok");
        let response = authority.response(&ask).expect("answered");
        assert_eq!(response.outcome, Outcome::NoDecider);
        assert!(!response.approved);
    }

    #[test]
    fn allow_session_grants_cover_later_asks() {
        let (authority, dir) = authority(r#"{}"#);
        let cwd = dir.path().to_string_lossy().into_owned();
        add_interactive_main(&authority, &cwd);
        let child = authority
            .spawn("main", "c", SpawnSpec::default(), root())
            .expect("child");
        let first = authority
            .submit(&child, "a", br#"{"surface":"bash","value":"make"}"#)
            .expect("ok");
        let second = authority
            .submit(&child, "b", br#"{"surface":"bash","value":"make"}"#)
            .expect("ok");
        authority
            .decide("main", &first, uid(0), "allow session")
            .expect("decided");
        let covered = authority.response(&second).expect("covered by the grant");
        assert!(matches!(
            covered.decided_by,
            DecidedBy::SessionApproval { .. }
        ));
        let third = authority
            .submit(&child, "c", br#"{"surface":"bash","value":"make"}"#)
            .expect("ok");
        assert_eq!(
            authority.response(&third).map(|r| r.state),
            Some("approved_for_session")
        );
        let grant = authority.grants("main")[0].id.clone();
        authority.revoke("main", &grant).expect("revoked");
        let fourth = authority
            .submit(&child, "d", br#"{"surface":"bash","value":"make"}"#)
            .expect("ok");
        assert!(authority.response(&fourth).is_none());
    }

    /// Issue 23, item 5: `allow always global` is audited before the
    /// global config is edited; when the log refuses the line, the file
    /// is not touched and the asker is denied `audit_unavailable`.
    #[test]
    fn an_allow_always_that_cannot_be_audited_leaves_the_global_config_alone() {
        let global = r#"{"permission": {"bash": {"*": "ask"}}}"#;
        let (authority, dir) = authority(global);
        let cwd = dir.path().to_string_lossy().into_owned();
        add_interactive_main(&authority, &cwd);
        let path = dir.path().join("audit.log");
        authority.set_audit(Arc::new(
            super::super::audit::AuditLog::open(&path).expect("log"),
        ));
        let deploy = br#"{"surface":"bash","value":"make deploy"}"#;
        let first = authority.submit("main", "r1", deploy).expect("ok");
        // The log's place is taken by a directory: it cannot be reopened.
        std::fs::remove_file(&path).expect("removed");
        std::fs::create_dir(&path).expect("a directory in its place");
        let error = authority
            .decide("main", &first, root(), "allow always global")
            .expect_err("cannot be recorded");
        assert!(
            matches!(error, AuthorityError::AuditUnavailable(_, _)),
            "{error:?}"
        );
        let config = std::fs::read_to_string(dir.path().join("config.json")).expect("config");
        assert_eq!(
            config, global,
            "the global config was edited without an audit line"
        );
        assert_eq!(
            authority.response(&first).map(|r| r.outcome),
            Some(Outcome::AuditUnavailable)
        );
        // Space returns: the rule is not there, the next ask still waits.
        std::fs::remove_dir(&path).expect("directory removed");
        let second = authority.submit("main", "r2", deploy).expect("ok");
        assert!(
            authority.response(&second).is_none(),
            "allowed by a rule nobody recorded"
        );

        // Recorded: the edit's line comes before the file changes, and
        // names the lines added and the text's digests.
        authority
            .decide("main", &second, root(), "allow always global")
            .expect("decided");
        let config = std::fs::read_to_string(dir.path().join("config.json")).expect("config");
        assert!(config.contains("make deploy"), "{config}");
        let lines: Vec<serde_json::Value> = std::fs::read_to_string(&path)
            .expect("log")
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON"))
            .collect();
        let edit = lines
            .iter()
            .position(|l| l["event"] == "config_edit")
            .expect("an edit line");
        let decided = lines
            .iter()
            .position(|l| l["askId"] == second.as_str() && l["outcome"] == "allow")
            .expect("the decision's line");
        assert!(edit < decided, "{lines:?}");
        assert_eq!(lines[edit]["askId"], second.as_str());
        assert_eq!(
            lines[edit]["sha256After"],
            super::super::audit::sha256_hex(config.as_bytes())
        );
    }

    #[test]
    fn nothing_is_delivered_that_the_audit_log_cannot_hold() {
        let (authority, dir) =
            authority(r#"{"permission": {"bash": {"*": "ask", "ls": "allow"}}}"#);
        let cwd = dir.path().to_string_lossy().into_owned();
        add_interactive_main(&authority, &cwd);
        let path = dir.path().join("audit.log");
        authority.set_audit(Arc::new(
            super::super::audit::AuditLog::open(&path).expect("log"),
        ));
        let ls = br#"{"surface":"bash","value":"ls"}"#;
        let make = br#"{"surface":"bash","value":"make"}"#;
        let allowed = authority.submit("main", "r1", ls).expect("ok");
        assert_eq!(
            authority.response(&allowed).map(|r| r.outcome),
            Some(Outcome::Allow)
        );
        let pending = authority.submit("main", "r2", make).expect("ok");
        let seen = Arc::new(Mutex::new(None));
        let seen_by_waiter = Arc::clone(&seen);
        let parked = authority.wait(
            &pending,
            Box::new(move |r: Arc<Response>| {
                *seen_by_waiter.lock().expect("lock") = Some(r.outcome);
            }),
        );
        assert!(matches!(parked, Ok(None)));

        // The log's place is taken by a directory: it cannot be reopened.
        std::fs::remove_file(&path).expect("removed");
        std::fs::create_dir(&path).expect("a directory in its place");
        let refused = authority.submit("main", "r3", ls).expect("ok");
        let response = authority.response(&refused).expect("answered");
        assert_eq!(response.outcome, Outcome::AuditUnavailable);
        assert!(!response.approved);
        assert!(matches!(
            &response.decided_by,
            DecidedBy::AuditUnavailable { reason } if reason.contains("withheld: allow by rule")
        ));
        // A person's decision is refused with an error, the asker (and its
        // parked reader) is denied, and no grant is made.
        let error = authority
            .decide("main", &pending, uid(0), "allow session")
            .expect_err("cannot be recorded");
        assert!(matches!(error, AuthorityError::AuditUnavailable(_, _)));
        assert_eq!(
            authority.response(&pending).map(|r| r.outcome),
            Some(Outcome::AuditUnavailable)
        );
        assert_eq!(*seen.lock().expect("lock"), Some(Outcome::AuditUnavailable));
        assert!(authority.grants("main").is_empty());

        // The log can be written again: answers flow, the chain verifies.
        std::fs::remove_dir(&path).expect("directory removed");
        let again = authority.submit("main", "r4", ls).expect("ok");
        assert_eq!(
            authority.response(&again).map(|r| r.outcome),
            Some(Outcome::Allow)
        );
        let report = super::super::audit::verify(&path).expect("verifies");
        assert_eq!((report.lines, report.torn_tail), (2, None));
    }

    /// An authority over a fresh journal in its temp dir, `ls *` allowed
    /// and every other bash line asked, with an interactive `main`.
    fn journaled_authority() -> (
        Authority,
        Arc<super::super::journal::Journal>,
        tempfile::TempDir,
    ) {
        let (authority, dir) =
            authority(r#"{"permission": {"bash": {"*": "ask", "ls *": "allow"}}}"#);
        let cwd = dir.path().to_string_lossy().into_owned();
        let state = dir.path().join("state");
        std::fs::create_dir(&state).expect("state dir");
        let journal =
            Arc::new(super::super::journal::Journal::open(&state, false).expect("journal"));
        authority
            .restore(Arc::clone(&journal), false)
            .expect("empty");
        add_interactive_main(&authority, &cwd);
        (authority, journal, dir)
    }

    /// A pi view's asks across a restart: an authority restored from the
    /// journal shows, in a new pi view, the pending request where the child
    /// wrote it and the rule-answered one's response (the journal keeps
    /// its target directory with the answer).
    #[test]
    fn a_pi_views_asks_come_back_with_the_journal() {
        use super::super::pi_view::{Folder, PiViews};
        let config = r#"{"permission": {"bash": {"*": "ask", "ls *": "allow"}}}"#;
        let (first, journal, dir) = journaled_authority();
        let first = Arc::new(first);
        let views = PiViews::new(Arc::clone(&first));
        views.make_target("main", "t").expect("target");
        for folder in [Folder::Requests, Folder::Responses] {
            views.make_folder("main", "t", folder).expect("folder");
        }
        for (id, line) in [("1", "ls -l"), ("2", "make")] {
            let draft = format!("{id}.json.tmp");
            let body = format!(r#"{{"surface":"bash","value":"{line}"}}"#);
            views.create("main", "t", &draft).expect("draft");
            views
                .write("main", "t", &draft, 0, body.as_bytes())
                .expect("written");
            views
                .rename("main", "t", &draft, &format!("{id}.json"))
                .expect("asked");
        }
        assert!(views.has_response("main", "t", "1.json"));
        assert_eq!(views.list("main", "t", Folder::Requests), ["2.json"]);
        first.sync_journal();
        drop(views);
        drop(first);
        drop(journal);

        let (again, _config_dir) = authority(config);
        let journal = Arc::new(
            super::super::journal::Journal::open(&dir.path().join("state"), false)
                .expect("journal reopened"),
        );
        again.restore(journal, false).expect("restored");
        let views = PiViews::new(Arc::new(again));
        assert_eq!(views.targets("main"), ["t"]);
        assert_eq!(views.list("main", "t", Folder::Requests), ["2.json"]);
        assert_eq!(views.list("main", "t", Folder::Responses), ["1.json"]);
        let answer: serde_json::Value = serde_json::from_slice(
            &views
                .response_bytes("main", "t", "1.json")
                .expect("the answer is where pi looks"),
        )
        .expect("JSON");
        assert_eq!(answer["approved"], true, "{answer}");
        assert!(answer.get("permfsForwardedTarget").is_none(), "{answer}");
    }

    /// Issue 26: a full journal fails closed. A rule's allow that cannot
    /// be journaled is delivered as `journal_unavailable` (deny), an ask
    /// that cannot be kept pending is denied the same way, and once there
    /// is room again answers flow and are journaled.
    #[test]
    fn nothing_is_delivered_or_kept_pending_that_the_journal_cannot_hold() {
        let (authority, journal, _dir) = journaled_authority();
        // Requests bigger than a page, so each needs a new one.
        let long = "x".repeat(9000);
        let ls = format!(r#"{{"surface":"bash","value":"ls {long}"}}"#);
        let make = format!(r#"{{"surface":"bash","value":"make {long}"}}"#);
        journal.simulate_full(true).expect("capped");
        let allowed = authority.submit("main", "r1", ls.as_bytes()).expect("ok");
        let response = authority.response(&allowed).expect("answered");
        assert_eq!(response.outcome, Outcome::JournalUnavailable);
        assert!(!response.approved);
        let pending = authority.submit("main", "r2", make.as_bytes()).expect("ok");
        assert_eq!(
            authority.response(&pending).map(|r| r.outcome),
            Some(Outcome::JournalUnavailable),
            "kept pending without a journal row"
        );
        assert!(authority.inbox("main").is_empty());
        journal.simulate_full(false).expect("room again");
        let again = authority.submit("main", "r3", ls.as_bytes()).expect("ok");
        assert_eq!(
            authority.response(&again).map(|r| r.outcome),
            Some(Outcome::Allow)
        );
        let waiting = authority.submit("main", "r4", make.as_bytes()).expect("ok");
        assert_eq!(authority.inbox("main"), vec![waiting]);
        assert_eq!(journal.counts(), Ok((1, 1)), "r4 pending, r3 answered");
    }

    /// A rule-answered ask costs one commit: its delete at close is held
    /// back (`persist::HOLD_DELETES`) and written with the next answer, or
    /// once it is older than that bound, or at a stop.
    #[test]
    fn a_closed_asks_delete_rides_with_the_next_commit() {
        let (authority, journal, _dir) = journaled_authority();
        let ls = br#"{"surface":"bash","value":"ls"}"#;
        let first = authority.submit("main", "r1", ls).expect("ok");
        assert!(authority.response(&first).is_some_and(|r| r.approved));
        assert_eq!(journal.counts(), Ok((0, 1)), "the answer is journaled");
        authority.withdraw("main", "r1").expect("withdrawn");
        assert_eq!(journal.counts(), Ok((0, 1)), "the delete is held back");
        authority.submit("main", "r2", ls).expect("ok");
        assert_eq!(
            journal.counts(),
            Ok((0, 1)),
            "r1's delete went with r2's answer"
        );
        authority.withdraw("main", "r2").expect("withdrawn");
        authority.sync_journal();
        assert_eq!(journal.counts(), Ok((0, 0)), "a stop writes what is held");
        authority.submit("main", "r3", ls).expect("ok");
        authority.withdraw("main", "r3").expect("withdrawn");
        std::thread::sleep(super::super::persist::HOLD_DELETES);
        authority.expire(Instant::now());
        assert_eq!(
            journal.counts(),
            Ok((0, 0)),
            "the expiry tick writes what is old"
        );
    }

    #[test]
    fn allowing_a_bash_line_for_the_session_grants_no_path_per_word() {
        let (authority, dir) = authority(
            r#"{"permission": {"*": "ask", "read": "allow", "path": {"*": "allow", "*.env": "deny"}}}"#,
        );
        let cwd = dir.path().to_string_lossy().into_owned();
        add_interactive_main(&authority, &cwd);
        let child = authority
            .spawn("main", "c", SpawnSpec::default(), root())
            .expect("child");
        let asked = authority
            .submit(
                &child,
                "a",
                br#"{"tool":"bash","input":{"command":"cat src/main.rs /var/log/x"}}"#,
            )
            .expect("ok");
        authority
            .decide("main", &asked, uid(0), "allow session")
            .expect("decided");
        let surfaces: Vec<String> = authority.grants("main")[0]
            .rules
            .iter()
            .map(|r| r.surface.clone())
            .collect();
        assert!(
            !surfaces.iter().any(|s| s.starts_with("path")),
            "no path grant from a bash word: {surfaces:?}"
        );
        // The config's `*.env` deny still holds next to the approved line.
        let read = authority
            .submit(
                &child,
                "b",
                br#"{"tool":"read","input":{"path":"src/.env"}}"#,
            )
            .expect("ok");
        assert_eq!(
            authority.response(&read).map(|r| r.outcome),
            Some(Outcome::Deny)
        );
    }

    #[test]
    fn invalid_requests_get_an_error_and_a_response() {
        let (authority, dir) = authority(r#"{}"#);
        let cwd = dir.path().to_string_lossy().into_owned();
        authority
            .add_root("main", SpawnSpec::default(), &cwd)
            .expect("root");
        let error = authority
            .submit("main", "r", b"{not json")
            .expect_err("invalid");
        assert!(matches!(error, AuthorityError::Invalid(_)));
        let ask = authority.ask_for("main", "r").expect("recorded");
        assert_eq!(
            authority.response(&ask).map(|r| r.outcome),
            Some(Outcome::Invalid)
        );
        assert!(matches!(
            authority.submit("main", "r", b"{}"),
            Err(AuthorityError::Exists(_))
        ));
    }

    #[test]
    fn a_narrowed_grant_records_exactly_its_patterns_and_errors_stay_readable() {
        let (authority, dir) = authority(r#"{"permission": {"*": "ask"}}"#);
        let cwd = dir.path().to_string_lossy().into_owned();
        add_interactive_main(&authority, &cwd);
        let child = authority
            .spawn("main", "c", SpawnSpec::default(), root())
            .expect("child");
        let ask = authority
            .submit(
                &child,
                "a",
                br#"{"surface":"bash","value":"git push origin main"}"#,
            )
            .expect("ok");
        assert!(matches!(
            authority.decide("main", &ask, root(), "alow"),
            Err(AuthorityError::Invalid(_))
        ));
        let view: serde_json::Value =
            serde_json::from_slice(&authority.describe_pending("main", &ask).expect("view"))
                .expect("json");
        assert!(view["lastError"]
            .as_str()
            .is_some_and(|e| e.contains("unknown decision")));
        assert!(view["arrivedAt"].as_u64().is_some());
        authority
            .decide("main", &ask, root(), r#"allow session "git push origin *""#)
            .expect("decided");
        let grants = authority.grants("main");
        assert_eq!(grants.len(), 1);
        let patterns: Vec<_> = grants[0].rules.iter().map(|r| r.pattern.clone()).collect();
        assert_eq!(patterns, vec!["git push origin *".to_string()]);
        assert_eq!(
            grants[0].broader_than_suggested,
            vec!["git push origin *".to_string()]
        );
        let covered = authority
            .submit(
                &child,
                "b",
                br#"{"surface":"bash","value":"git push origin dev"}"#,
            )
            .expect("ok");
        assert_eq!(
            authority.response(&covered).map(|r| r.outcome),
            Some(Outcome::Allow)
        );
        let other = authority
            .submit(&child, "c", br#"{"surface":"bash","value":"git pull"}"#)
            .expect("ok");
        assert!(
            authority.response(&other).is_none(),
            "the grant is exactly its pattern"
        );
    }

    #[test]
    fn pending_lists_asks_below_only_where_the_reader_may_decide() {
        let (authority, dir) = authority(r#"{"permission": {"*": "ask"}}"#);
        let cwd = dir.path().to_string_lossy().into_owned();
        add_interactive_main(&authority, &cwd);
        let mine = SpawnSpec {
            interactive: true,
            decider_uid: Some(3000),
            ..Default::default()
        };
        let theirs = SpawnSpec {
            interactive: true,
            decider_uid: Some(4000),
            ..Default::default()
        };
        let a = authority.spawn("main", "a", mine, root()).expect("a");
        let b = authority.spawn("main", "b", theirs, root()).expect("b");
        let first = authority
            .submit("main", "r1", br#"{"surface":"bash","value":"make"}"#)
            .expect("ok");
        let second = authority
            .submit(&a, "r2", br#"{"surface":"bash","value":"make"}"#)
            .expect("ok");
        let third = authority
            .submit(&b, "r3", br#"{"surface":"bash","value":"make"}"#)
            .expect("ok");
        let ids = |view: serde_json::Value| {
            view["pending"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|e| {
                            (
                                e["askId"].as_str().unwrap_or("").to_string(),
                                e["inbox"].as_str().unwrap_or("").to_string(),
                            )
                        })
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        };
        let all = ids(authority.pending_below("main", root()).expect("view"));
        assert_eq!(
            all,
            vec![
                (first.clone(), format!("inbox/{first}")),
                (second.clone(), format!("children/a/inbox/{second}")),
                (third.clone(), format!("children/b/inbox/{third}")),
            ]
        );
        // uid 3000 decides at a only; in a sandbox, nowhere.
        let view = authority.pending_below("main", uid(3000)).expect("view");
        assert_eq!(view["notShown"], 2);
        assert_eq!(
            ids(view),
            vec![(second.clone(), format!("children/a/inbox/{second}"))]
        );
        let sandboxed = Caller {
            uid: 3000,
            in_daemon_namespace: false,
        };
        assert!(ids(authority.pending_below("main", sandboxed).expect("view")).is_empty());
        let root_sandboxed = Caller {
            uid: 0,
            in_daemon_namespace: false,
        };
        assert!(ids(authority
            .pending_below("main", root_sandboxed)
            .expect("view"))
        .is_empty());
    }
}
