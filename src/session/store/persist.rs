//! The authority's state as journal rows, and back (`journal.rs` is the
//! store). Separate from the authority because what is written, in which
//! form, and how a restart puts it back (and what it deliberately does not
//! put back) is one concept apart from the walk and the inboxes.
//!
//! Marked under the authority's lock (`mark_session`, `mark_ask`), written
//! by `flush` before the lock is released; answers are written with their
//! chunk (`answer_ops`). What is not restored here: enforcement views
//! (their connections are the supervisor's to hand over, `mount/keeper.rs`,
//! and the views themselves show them in the session again when served),
//! reviews by judges (an ask that was under review walks again from its
//! asker), parked readers and event cursors (the kernel's, not ours), and
//! sessions held by a lease: the `ctl` handle that held it belonged to the
//! old process, so at restore they are ended, as the handle's close would
//! have ended them, whether or not the pid that took it still lives.

use crate::facts::access_path::CwdCache;
use crate::facts::intent::AccessIntent;
use crate::facts::request::{FactSet, Request};
use crate::session::store::journal::{Journal, Op};
use crate::session::tree::ask::{Ask, AskId, DecidedBy, Guarded, Hop, Outcome, Response};
use crate::session::tree::{Grant, Session, SessionId, SessionTree};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What changed under the lock and is not journaled yet.
#[derive(Default)]
pub(in crate::session) struct Dirty {
    sessions: Vec<SessionId>,
    asks: Vec<AskId>,
    /// Since when deletions alone have been held back (`flush`).
    held_since: Option<Instant>,
}

/// How long `flush` may hold back a batch of nothing but deleted asks,
/// for the next write to carry. A rule-answered ask is written with its
/// answer and deleted at its close (lines of the journal's answers log,
/// `answer_log.rs`): held, that delete rides with the next ask's answer,
/// one write an ask instead of two (BENCHMARKS.md, row 26). The expiry tick (`EXPIRE_INTERVAL`, 25 ms) writes what is
/// older, and a stop writes all (`Authority::sync_journal`). What a
/// `SIGKILL` in that window costs: rows of asks already withdrawn come
/// back at the restart as answered asks nobody holds, kept until
/// retention forgets them; an answer is never lost or given twice by it.
pub(in crate::session) const HOLD_DELETES: Duration = Duration::from_millis(20);

impl Dirty {
    /// Session `id` changed (spawned, ended, a grant, a lease): journal it.
    pub(in crate::session) fn mark_session(&mut self, id: &str) {
        self.sessions.push(id.to_string());
    }

    /// Ask `id` changed (raised, entered an inbox, forgotten): journal it.
    pub(in crate::session) fn mark_ask(&mut self, id: &str) {
        self.asks.push(id.to_string());
    }
}

/// What the journal reads of the authority's state to write the rows
/// marked: the tree, the asks, and which of them are pending. Borrowed
/// for one write, so the store never holds, or reaches past, the state.
pub(in crate::session) struct Rows<'a> {
    pub(in crate::session) tree: &'a SessionTree,
    pub(in crate::session) asks: &'a HashMap<AskId, Box<Ask>>,
    pub(in crate::session) pending: &'a BTreeSet<AskId>,
}

/// How a restore puts the journal's rows back into the authority's state:
/// sessions (parents first), answered asks and pending asks. The state
/// keeps its own indexes consistent; the store only reads rows.
pub(in crate::session) trait Restore {
    /// The sessions put back so far (a child finds its parent here).
    fn tree(&self) -> &SessionTree;
    /// A session with its grants (compiled by the state); `Err` when the
    /// tree refuses it.
    fn put_session(&mut self, session: Session) -> Result<(), String>;
    /// An answered ask, kept as retention keeps answers.
    fn put_answered(&mut self, ask: Ask);
    /// A pending ask, counted and timed as a raised one.
    fn put_pending(&mut self, ask: Ask);
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredSession {
    id: String,
    parent: Option<String>,
    agent: Option<String>,
    cwd: String,
    interactive: bool,
    depth: usize,
    asker_uid: u32,
    decider_uid: Option<u32>,
    serial: u64,
    grants: Vec<Grant>,
    lease: Option<u32>,
    #[serde(default)]
    lease_handle: Option<u64>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredAsk {
    agent: Option<String>,
    judged_for: Vec<Option<String>>,
    request: Option<Request>,
    facts: FactSet,
    hops: Vec<Hop>,
    pending_at: Option<String>,
    created_ms: u64,
    deadline_ms: u64,
    arrived_ms: Option<u64>,
    last_error: Option<String>,
    guarded: Option<(String, String)>,
    /// The guard met is the outside-the-sandbox floor (absent in rows
    /// written before it existed: those were deny guards).
    #[serde(default)]
    guarded_floor: bool,
}

/// A response file's JSON read back (`Response` is written by its
/// `Serialize`; its `state` is one of four fixed words).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredResponse {
    ask_id: String,
    approved: bool,
    state: String,
    denial_reason: Option<String>,
    responder_session_id: Option<String>,
    responded_at: u64,
    decided_by: DecidedBy,
    outcome: Outcome,
    facts: Vec<AccessIntent>,
    judged_for: Vec<Option<String>>,
    hops: Vec<Hop>,
    /// A pi view ask's target directory ([`answer_op`]).
    #[serde(default)]
    permfs_forwarded_target: Option<String>,
}

fn session_op(session: &Session) -> Result<Op, String> {
    let stored = StoredSession {
        id: session.id.clone(),
        parent: session.parent.clone(),
        agent: session.agent.clone(),
        cwd: session.cwd.clone(),
        interactive: session.interactive,
        depth: session.depth,
        asker_uid: session.asker_uid,
        decider_uid: session.decider_uid,
        serial: session.serial,
        grants: session.grants.clone(),
        lease: session.lease,
        lease_handle: session.lease_handle,
    };
    Ok(Op::PutSession {
        id: session.id.clone(),
        body: serde_json::to_vec(&stored).map_err(|e| e.to_string())?,
    })
}

fn pending_op(ask: &Ask) -> Result<Op, String> {
    let now_ms = crate::session::tree::ask::now_ms();
    let stored = StoredAsk {
        agent: ask.agent.clone(),
        judged_for: ask.judged_for.clone(),
        request: ask.request.clone(),
        facts: ask.facts.clone(),
        hops: ask.hops.clone(),
        pending_at: ask.pending_at.clone(),
        created_ms: now_ms.saturating_sub(ask.created.elapsed().as_millis() as u64),
        deadline_ms: ask.deadline_ms,
        arrived_ms: ask.arrived_ms,
        last_error: ask.last_error.clone(),
        guarded: ask
            .guarded
            .as_ref()
            .map(|g| (g.pattern.clone(), g.reason.clone())),
        guarded_floor: ask.guarded.as_ref().is_some_and(|g| g.floor),
    };
    Ok(Op::PutAsk {
        id: ask.id.clone(),
        origin: ask.origin.clone(),
        rid: ask.rid.clone(),
        answered: false,
        body: serde_json::to_vec(&stored).map_err(|e| e.to_string())?,
        request_len: ask.request_len,
    })
}

/// An answered ask's row: its response's bytes, as every reader reads them.
/// An answer's journal row. A pi view ask's answer also keeps the target
/// directory its request was written in (`permfsForwardedTarget`, beside
/// the response's own fields), so a new server shows the answer where the
/// waiting pi child looks (`pi_view.rs`); other answers are the response
/// as it is served.
pub(in crate::session) fn answer_op(ask: &Ask, response: &Response) -> Op {
    let mut body = response.to_json().to_vec();
    if let Some(target) = ask.forwarded_target() {
        if let Ok(serde_json::Value::Object(mut fields)) =
            serde_json::from_slice::<serde_json::Value>(&body)
        {
            fields.insert("permfsForwardedTarget".into(), target.into());
            body = serde_json::Value::Object(fields).to_string().into_bytes();
        }
    }
    Op::PutAsk {
        id: response.ask_id.clone(),
        origin: ask.origin.clone(),
        rid: ask.rid.clone(),
        answered: true,
        body,
        request_len: ask.request_len,
    }
}

/// The rows of what was marked, taken from the marks. An ask answered but
/// not yet committed (its audit line is being written) is left to its
/// chunk's [`answer_op`].
pub(in crate::session) fn take_ops(marks: &mut Dirty, state: Rows<'_>) -> Vec<Op> {
    let mut dirty = std::mem::take(marks);
    dirty.sessions.sort();
    dirty.sessions.dedup();
    let mut ops = Vec::with_capacity(dirty.sessions.len() + dirty.asks.len());
    for id in dirty.sessions {
        match state.tree.get(&id).map(session_op) {
            Some(Ok(op)) => ops.push(op),
            Some(Err(error)) => {
                tracing::error!(session = %id, %error, "a session cannot be journaled")
            }
            None => ops.push(Op::DeleteSession { id }),
        }
    }
    let mut seen = std::collections::HashSet::new();
    for id in dirty.asks {
        if !seen.insert(id.clone()) {
            continue;
        }
        match state.asks.get(&id) {
            None => ops.push(Op::DeleteAsk { id }),
            Some(ask) if ask.response.is_none() && state.pending.contains(&id) => {
                match pending_op(ask) {
                    Ok(op) => ops.push(op),
                    Err(error) => {
                        tracing::error!(ask = %id, %error, "an ask cannot be journaled")
                    }
                }
            }
            Some(ask) => {
                if let Some(response) = &ask.response {
                    ops.push(answer_op(ask, response));
                }
            }
        }
    }
    ops
}

/// Writes what was marked to `journal` (deletions alone may be held back
/// for up to [`HOLD_DELETES`]; `force` writes them too). `Err`: nothing of
/// it was written; the pending asks among it are returned so the caller
/// can deny them (fail closed).
pub(in crate::session) fn flush_with(
    journal: Option<&Journal>,
    marks: &mut Dirty,
    state: Rows<'_>,
    force: bool,
) -> Result<(), (String, Vec<AskId>)> {
    let Some(journal) = journal else {
        return Ok(());
    };
    if marks.sessions.is_empty() && marks.asks.is_empty() {
        return Ok(());
    }
    if !force && only_deletions(marks, &state) {
        let since = *marks.held_since.get_or_insert_with(Instant::now);
        if since.elapsed() < HOLD_DELETES {
            return Ok(());
        }
    }
    let pending: Vec<AskId> = marks
        .asks
        .iter()
        .filter(|id| state.pending.contains(*id))
        .cloned()
        .collect();
    let ops = take_ops(marks, state);
    journal.write(&ops).map_err(|error| {
        tracing::error!(%error, rows = ops.len(), "the journal cannot be written: pending asks in this batch are denied (journal_unavailable)");
        (error, pending)
    })
}

/// Whether what is marked writes nothing but deletions: no session, and
/// every marked ask either gone (a delete) or answered and not yet
/// committed (its chunk writes it).
fn only_deletions(marks: &Dirty, state: &Rows<'_>) -> bool {
    marks.sessions.is_empty()
        && marks.asks.iter().all(|id| {
            state
                .asks
                .get(id)
                .is_none_or(|ask| ask.response.is_none() && !state.pending.contains(id))
        })
}

/// What a restore put back, for the audit line and the log.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Restored {
    pub sessions: usize,
    pub grants: usize,
    pub pending: usize,
    pub answers: usize,
    /// Sessions held by a lease, ended at restore: (session, pid that held
    /// it, whether that pid was still alive).
    pub ended_leases: Vec<(String, u32, bool)>,
    /// Sessions held by a lease whose `ctl` handle is still open on the
    /// same FUSE connection (a server taking over from one that died):
    /// kept, and ended when that handle closes. (handle, session, serial).
    pub kept_leases: Vec<(u64, String, u64)>,
    /// Rows that could not be read back (each logged): never an allow.
    pub unreadable: usize,
    /// Asks that were under a judge's review, walked again.
    pub rewalked: Vec<AskId>,
    /// Answers journaled whose audit lines the previous server did not
    /// write before it died: written at restore, marked `late`.
    pub late_lines: usize,
}

/// Builds the state from `snapshot` into an empty `state`. Rows that
/// cannot be read are skipped and counted: a session that is not restored
/// takes its grants with it (less is allowed, never more), and an ask
/// that is not restored reads `ENOENT`.
pub(in crate::session) fn restore(
    snapshot: crate::session::store::journal::Snapshot,
    state: &mut impl Restore,
) -> (Restored, Vec<AskId>) {
    let mut restored = Restored::default();
    let now = Instant::now();
    let now_ms = crate::session::tree::ask::now_ms();
    for (id, body) in snapshot.sessions {
        let stored: StoredSession = match serde_json::from_slice(&body) {
            Ok(stored) => stored,
            Err(error) => {
                tracing::error!(session = %id, %error, "a journaled session cannot be read: not restored");
                restored.unreadable += 1;
                continue;
            }
        };
        let canonical_cwd = stored
            .parent
            .as_ref()
            .and_then(|p| state.tree().get(p))
            .filter(|p| p.cwd == stored.cwd)
            .map(|p| Arc::clone(&p.canonical_cwd))
            .unwrap_or_else(|| Arc::new(CwdCache::new(&stored.cwd)));
        let session = Session {
            id: stored.id,
            parent: stored.parent,
            agent: stored.agent,
            cwd: stored.cwd,
            canonical_cwd,
            interactive: stored.interactive,
            depth: stored.depth,
            asker_uid: stored.asker_uid,
            decider_uid: stored.decider_uid,
            children: Default::default(),
            grants: stored.grants,
            // Compiled from `grants` as it is put back; a set that does
            // not compile stays empty (less allowed, never more).
            compiled_grants: SessionTree::empty_grants(),
            views: Vec::new(),
            serial: stored.serial,
            lease: stored.lease,
            lease_handle: stored.lease_handle,
        };
        let grants = session.grants.len();
        match state.put_session(session) {
            Ok(()) => {
                restored.sessions += 1;
                restored.grants += grants;
            }
            Err(error) => {
                tracing::error!(session = %id, %error, "a journaled session cannot be put back: not restored");
                restored.unreadable += 1;
            }
        }
    }
    let mut rewalk = Vec::new();
    for row in snapshot.asks {
        let crate::session::store::journal::AskRow {
            id,
            origin,
            rid,
            answered,
            body,
            request_len,
        } = row;
        if state.tree().get(&origin).is_none() {
            // Its session was not restored: the row is stale.
            restored.unreadable += 1;
            continue;
        }
        let ask = if answered {
            answered_ask(&id, &origin, &rid, &body, now)
        } else {
            pending_ask(&id, &origin, &rid, &body, now, now_ms)
        };
        let mut ask = match ask {
            Ok(ask) => ask,
            Err(error) => {
                tracing::error!(ask = %id, %error, "a journaled ask cannot be read: not restored");
                restored.unreadable += 1;
                continue;
            }
        };
        ask.request_len = request_len;
        if answered {
            state.put_answered(ask);
            restored.answers += 1;
            continue;
        }
        if ask.pending_at.is_none() {
            ask.hops.clear();
            rewalk.push(id.clone());
        }
        state.put_pending(ask);
        restored.pending += 1;
    }
    restored.rewalked = rewalk.clone();
    (restored, rewalk)
}

fn answered_ask(
    id: &str,
    origin: &str,
    rid: &str,
    body: &[u8],
    now: Instant,
) -> Result<Ask, String> {
    let stored: StoredResponse = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    if stored.ask_id != id {
        return Err(format!("its response names ask {:?}", stored.ask_id));
    }
    let state = match stored.state.as_str() {
        "approved_for_session" => "approved_for_session",
        "approved" => "approved",
        "denied_with_reason" => "denied_with_reason",
        "denied" => "denied",
        other => return Err(format!("unknown response state {other:?}")),
    };
    // An allow is only ever read back as it was written.
    if stored.approved != (stored.outcome == Outcome::Allow) {
        return Err("its approval and outcome disagree".into());
    }
    let mut response = Response::new(
        stored.ask_id,
        stored.approved,
        state,
        stored.denial_reason,
        stored.responder_session_id,
        stored.decided_by,
        stored.outcome,
        stored.facts,
        stored.judged_for,
        stored.hops,
    );
    response.responded_at = stored.responded_at;
    let mut ask = empty_ask(id, origin, rid, now);
    ask.response = Some(Arc::new(response));
    ask.restored_target = stored.permfs_forwarded_target;
    Ok(ask)
}

fn pending_ask(
    id: &str,
    origin: &str,
    rid: &str,
    body: &[u8],
    now: Instant,
    now_ms: u64,
) -> Result<Ask, String> {
    let stored: StoredAsk = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let mut ask = empty_ask(id, origin, rid, now);
    ask.agent = stored.agent;
    ask.judged_for = stored.judged_for;
    ask.request = stored.request;
    ask.facts = stored.facts;
    ask.hops = stored.hops;
    ask.pending_at = stored.pending_at;
    ask.created = now
        .checked_sub(Duration::from_millis(
            now_ms.saturating_sub(stored.created_ms),
        ))
        .unwrap_or(now);
    // The same wall-clock deadline: one that passed while nobody served
    // ends in `timeout` at the first scan.
    ask.deadline = now + Duration::from_millis(stored.deadline_ms.saturating_sub(now_ms));
    ask.deadline_ms = stored.deadline_ms;
    ask.arrived_ms = stored.arrived_ms;
    ask.last_error = stored.last_error;
    let floor = stored.guarded_floor;
    ask.guarded = stored.guarded.map(|(pattern, reason)| Guarded {
        pattern,
        reason,
        floor,
    });
    Ok(ask)
}

fn empty_ask(id: &str, origin: &str, rid: &str, now: Instant) -> Ask {
    Ask {
        id: id.to_string(),
        origin: origin.to_string(),
        agent: None,
        judged_for: Vec::new(),
        rid: rid.to_string(),
        request: None,
        facts: FactSet::default(),
        hops: Vec::new(),
        pending_at: None,
        response: None,
        waiters: Vec::new(),
        created: now,
        deadline: now,
        arrived_ms: None,
        deadline_ms: 0,
        last_error: None,
        retained: 0,
        read: false,
        request_len: 0,
        restored_target: None,
        guarded: None,
    }
}
