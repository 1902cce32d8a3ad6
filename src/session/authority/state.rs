//! The authority's state: what the one mutex guards (the tree, the asks
//! and their indexes, the kept answers, reviews, event streams, the journal
//! marks), and the few operations every part of the authority shares on it:
//! ending an ask ([`finish`]), publishing an event, marking what the
//! journal must write.
//!
//! This file sits below everything that reads the state. The store does not
//! reach into it: the journal's rows are read through a borrowed [`Rows`], the
//! kept answers through [`State::kept`], and a restore puts the journal back
//! through the [`Restore`] trait, so `persist.rs` and `retention.rs` know
//! the pieces they change and nothing else.

use crate::session::chain::reviews::{AttachedJudge, Review};
use crate::session::store::persist::{Dirty, Restore, Rows};
use crate::session::store::retention::{Kept, Retention};
use crate::session::tree::ask::{Ask, AskId, DecidedBy, Outcome, Response, Waiter};
use crate::session::tree::{Session, SessionId, SessionTree};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

#[derive(Default)]
pub(in crate::session) struct State {
    pub(in crate::session) tree: SessionTree,
    /// Boxed: an `Ask` is some 700 bytes, and a table sized for a burst
    /// of 10,000 waiting asks keeps its buckets (doubling to 32,768 held
    /// 24 MB, 1 MB boxed) long after they were answered.
    pub(in crate::session) asks: HashMap<AskId, Box<Ask>>,
    /// (origin session, rid) → ask
    pub(in crate::session) outboxes: HashMap<(SessionId, String), AskId>,
    /// Asks not answered yet (what timeouts, inboxes and grants look at).
    pub(in crate::session) pending: std::collections::BTreeSet<AskId>,
    /// The answered asks kept, by age, count and real bytes.
    pub(in crate::session) retention: Retention,
    /// The earliest deadline of a pending ask (timeouts need no scan
    /// before then).
    pub(in crate::session) next_deadline: Option<Instant>,
    pub(in crate::session) next_id: u64,
    /// Pending asks by asking session, and by the root of its tree: what
    /// the `pendingAsks` and `treePendingAsks` limits count.
    pub(in crate::session) pending_by_origin: HashMap<SessionId, usize>,
    pub(in crate::session) pending_by_root: HashMap<String, usize>,
    /// This daemon's lifetime number (`epoch.rs`), the first part of every
    /// ask and grant id: `next_id` starts again at each start, the pair
    /// never repeats.
    pub(in crate::session) epoch: u64,
    /// Asks under review by the authorizer chain, by ask.
    pub(in crate::session) reviews: HashMap<AskId, Review>,
    /// Judges attached through the mount.
    pub(in crate::session) attached: std::collections::BTreeMap<String, AttachedJudge>,
    /// Configured links found missing (logged once each).
    pub(in crate::session) missing_logged: std::collections::HashSet<String>,
    /// Each session's inbox event stream.
    pub(in crate::session) events: HashMap<SessionId, crate::session::observe::events::EventLog>,
    pub(in crate::session) audit: Option<Arc<crate::session::observe::audit::AuditLog>>,
    pub(in crate::session) after_unlock: AfterUnlock,
    /// Where changes are journaled (`journal.rs`); `None` in library use.
    pub(in crate::session) journal: Option<Arc<crate::session::store::journal::Journal>>,
    /// What changed under the lock and is journaled before it is released.
    pub(in crate::session) journal_dirty: Dirty,
}

impl State {
    /// Session `id` changed (spawned, ended, a grant, a lease): journal it.
    pub(in crate::session) fn mark_session(&mut self, id: &str) {
        if self.journal.is_some() {
            self.journal_dirty.mark_session(id);
        }
    }

    /// Ask `id` changed (raised, entered an inbox, forgotten): journal it.
    pub(in crate::session) fn mark_ask(&mut self, id: &str) {
        if self.journal.is_some() {
            self.journal_dirty.mark_ask(id);
        }
    }

    /// What retention changes: the asks, their outbox names, its own
    /// accounts, and the journal's marks (only when there is a journal).
    pub(in crate::session) fn kept(&mut self) -> Kept<'_> {
        Kept {
            asks: &mut self.asks,
            outboxes: &mut self.outboxes,
            retention: &mut self.retention,
            dirty: self.journal.as_ref().map(|_| &mut self.journal_dirty),
        }
    }

    /// The rows of what was marked, taken from the marks (see
    /// [`crate::session::store::persist::take_ops`]).
    pub(in crate::session) fn take_ops(&mut self) -> Vec<crate::session::store::journal::Op> {
        let rows = Rows {
            tree: &self.tree,
            asks: &self.asks,
            pending: &self.pending,
        };
        crate::session::store::persist::take_ops(&mut self.journal_dirty, rows)
    }

    /// Writes what was marked (see [`crate::session::store::persist::flush_with`]).
    pub(in crate::session) fn flush(&mut self) -> Result<(), (String, Vec<AskId>)> {
        self.flush_with(false)
    }

    /// [`Self::flush`]; `force` writes deletions held back too.
    pub(in crate::session) fn flush_with(
        &mut self,
        force: bool,
    ) -> Result<(), (String, Vec<AskId>)> {
        let rows = Rows {
            tree: &self.tree,
            asks: &self.asks,
            pending: &self.pending,
        };
        crate::session::store::persist::flush_with(
            self.journal.as_deref(),
            &mut self.journal_dirty,
            rows,
            force,
        )
    }

    /// Called on every timeout scan: after many asks came and went and the
    /// daemon went quiet, the tables sized for the burst are shrunk and
    /// the heap's free pages go back to the system (see
    /// [`crate::session::store::retention::idle_trim_due`]).
    pub(in crate::session) fn trim_when_idle(&mut self, now: Instant) {
        if crate::session::store::retention::idle_trim_due(
            &mut self.retention,
            self.pending.is_empty(),
            now,
        ) {
            // Tables sized for the burst hold their buckets until shrunk.
            self.asks.shrink_to_fit();
            self.outboxes.shrink_to_fit();
            self.reviews.shrink_to_fit();
            crate::session::store::retention::trim_heap();
        }
    }
}

/// A restore puts the journal's rows back through these four calls; the
/// state keeps its indexes (outboxes, pending counts, the next deadline,
/// the kept answers' accounts) consistent on its side.
impl Restore for State {
    fn tree(&self) -> &SessionTree {
        &self.tree
    }

    fn put_session(&mut self, mut session: Session) -> Result<(), String> {
        crate::session::tree::grants::recompile_grants(&mut session);
        self.tree.restore(session)
    }

    fn put_answered(&mut self, ask: Ask) {
        let id = ask.id.clone();
        let key = (ask.origin.clone(), ask.rid.clone());
        self.asks.insert(id.clone(), Box::new(ask));
        self.outboxes.insert(key, id.clone());
        crate::session::store::retention::keep(&mut self.kept(), &id, false);
    }

    fn put_pending(&mut self, ask: Ask) {
        let id = ask.id.clone();
        let origin = ask.origin.clone();
        let key = (origin.clone(), ask.rid.clone());
        if self.next_deadline.is_none_or(|next| ask.deadline < next) {
            self.next_deadline = Some(ask.deadline);
        }
        self.asks.insert(id.clone(), Box::new(ask));
        self.outboxes.insert(key, id.clone());
        self.pending.insert(id);
        *self.pending_by_origin.entry(origin.clone()).or_default() += 1;
        *self
            .pending_by_root
            .entry(crate::session::tree::limits::root_of(&origin).to_string())
            .or_default() += 1;
    }
}

/// Work an operation leaves for after the lock is released: the answers it
/// reached. Each is written to the audit log outside the lock (a grant
/// that answers thousands of asks must not stall every other ask while
/// their lines are hashed and written), then stored and delivered; see
/// [`crate::session::authority::commit::StateGuard`].
#[derive(Default)]
pub(in crate::session) struct AfterUnlock {
    pub(in crate::session) answers: Vec<Answer>,
}

impl AfterUnlock {
    /// The answer reached last, still unrecorded (to amend its state).
    pub(in crate::session) fn last_response_mut(&mut self) -> Option<&mut Arc<Response>> {
        self.answers.last_mut().map(|answer| &mut answer.response)
    }
}

/// An answer reached under the lock and not yet recorded: until its audit
/// line is written nobody sees it (the ask is neither pending nor
/// answered; a reader that comes meanwhile parks until it is).
pub(in crate::session) struct Answer {
    pub(in crate::session) response: Arc<Response>,
    pub(in crate::session) session: String,
    pub(in crate::session) agent: Option<String>,
    pub(in crate::session) rid: String,
    pub(in crate::session) latency_ms: f64,
    /// What a forwarded request claimed about its origin.
    pub(in crate::session) forwarded: Option<crate::facts::forwarded::Provenance>,
    pub(in crate::session) waiters: Vec<Waiter>,
    /// The inbox it waited in: its event stream hears how it ended.
    pub(in crate::session) waited_at: Option<String>,
}

/// Drops a finished review from any judge queue.
pub(in crate::session) fn forget_review(state: &mut State, review: &Review) {
    if let Some(current) = &review.current {
        if let Some(judge) = state.attached.get_mut(&current.link) {
            judge.queue.retain(|id| id != &current.review_id);
        }
    }
}

/// Ends an ask with an answer. The answer is committed when the lock is
/// released: its audit line is written first, and only then is it stored
/// and delivered (see [`crate::session::authority::commit::StateGuard`]). From here on the ask is
/// no longer pending, so nothing answers it twice.
pub(in crate::session) fn finish(
    state: &mut State,
    ask_id: &str,
    outcome: Outcome,
    decided_by: DecidedBy,
    reason: Option<String>,
    responder: Option<String>,
) {
    if let Some(review) = state.reviews.remove(ask_id) {
        forget_review(state, &review);
    }
    let Some(ask) = state.asks.get_mut(ask_id) else {
        return;
    };
    // Answered, or being committed (its audit line is being written).
    if ask.response.is_some() || !state.pending.remove(ask_id) {
        return;
    }
    for (counts, key) in [
        (&mut state.pending_by_origin, ask.origin.as_str()),
        (
            &mut state.pending_by_root,
            crate::session::tree::limits::root_of(&ask.origin),
        ),
    ] {
        if let Some(count) = counts.get_mut(key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(key);
            }
        }
    }
    // The guards are final: whatever allowed a write to the authority (a
    // rule, a grant, a judge, a person), it is denied, naming the guard.
    // A write that runs outside the sandbox (`floor`) may be allowed by a
    // person's answer alone; any other allow of it is denied (fail
    // closed: the walk and the chain hand it to a person first, so this
    // is the last line, not the usual way).
    let person = matches!(decided_by, DecidedBy::User { .. });
    let (outcome, decided_by, reason) = match (&ask.guarded, outcome) {
        (Some(guard), Outcome::Allow) if !(guard.floor && person) => {
            tracing::warn!(ask = %ask.id, pattern = %guard.pattern, overruled = decided_by.kind(), floor = guard.floor, "an allow of a guarded write was overruled by its built-in guard");
            (
                Outcome::Deny,
                DecidedBy::Guard {
                    pattern: guard.pattern.clone(),
                    reason: guard.reason.clone(),
                    overruled: decided_by.kind().to_string(),
                },
                Some(guard.reason.clone()),
            )
        }
        _ => (outcome, decided_by, reason),
    };
    let approved = outcome == Outcome::Allow;
    let for_session = matches!(decided_by, DecidedBy::SessionApproval { .. });
    let response = Arc::new(Response::new(
        ask.id.clone(),
        approved,
        match (approved, for_session, reason.is_some()) {
            (true, true, _) => "approved_for_session",
            (true, false, _) => "approved",
            (false, _, true) => "denied_with_reason",
            (false, _, false) => "denied",
        },
        if approved { None } else { reason },
        responder,
        decided_by,
        outcome,
        // An answered ask needs its facts and hops only in its response.
        std::mem::take(&mut ask.facts.intents),
        ask.judged_for.clone(),
        std::mem::take(&mut ask.hops),
    ));
    let waited_at = ask.pending_at.take();
    let latency = ask.created.elapsed();
    tracing::debug!(ask = %ask.id, origin = %ask.origin, outcome = ?outcome, latency_us = latency.as_micros() as u64, "ask answered");
    state.after_unlock.answers.push(Answer {
        response,
        session: ask.origin.clone(),
        agent: ask.agent.clone(),
        rid: ask.rid.clone(),
        latency_ms: latency.as_secs_f64() * 1000.0,
        forwarded: ask.request.as_ref().and_then(|r| r.forwarded.clone()),
        waiters: ask.waiters.drain(..).collect(),
        waited_at,
    });
}

/// Adds an event to a session's stream (created on first use).
pub(in crate::session) fn publish(state: &mut State, session: &str, event: serde_json::Value) {
    if state.tree.get(session).is_some() {
        state
            .events
            .entry(session.to_string())
            .or_default()
            .publish(event);
    }
}

/// Tells every session above `inbox` that something changed in an inbox
/// below it (`arrived`, `decided`, `left`, `refused`), naming the ask
/// and the inbox but without the ask's details: a reader reads the entry
/// (`inbox/<askId>` under that session, refused unless it may decide
/// there) or `pending`, which show only the asks it may decide. This is
/// what lets one `events` stream drive a tree-wide view, one ask at a time.
pub(in crate::session) fn publish_below(
    state: &mut State,
    inbox: &str,
    change: &str,
    ask_id: &str,
) {
    let mut above = inbox.rsplit_once('/').map(|(parent, _)| parent.to_string());
    while let Some(session) = above {
        let event =
            serde_json::json!({"event": "below", "change": change, "at": inbox, "askId": ask_id});
        publish(state, &session, event);
        above = session
            .rsplit_once('/')
            .map(|(parent, _)| parent.to_string());
    }
}
