//! The lock, and what its release commits: the answers reached under it
//! are journaled, written to the audit log outside the lock, then stored
//! and delivered, a chunk at a time ([`StateGuard::release`]). No answer
//! is seen that the log does not hold, and no `allow` is delivered when it
//! cannot be recorded.

use crate::session::authority::state::{finish, publish, publish_below, Answer, State};
use crate::session::tree::ask::{Ask, DecidedBy, Hop, Outcome, Response, Waiter};
use std::sync::{Arc, Mutex, MutexGuard};

pub(in crate::session) fn lock(state: &Mutex<State>) -> StateGuard<'_> {
    StateGuard {
        mutex: state,
        guard: Some(
            state
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        ),
    }
}

/// An answer's audit line, borrowed: serialized straight into the line
/// (field order is the line format).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct AuditEntry<'a> {
    time: u64,
    ask_id: &'a str,
    session: &'a str,
    agent: Option<&'a str>,
    request: &'a str,
    facts: &'a [crate::facts::intent::AccessIntent],
    outcome: Outcome,
    decided_by: &'a DecidedBy,
    hops: &'a [Hop],
    latency_ms: f64,
    /// What a forwarded (pi view) request claimed about its origin.
    #[serde(skip_serializing_if = "Option::is_none")]
    forwarded: Option<&'a crate::facts::forwarded::Provenance>,
    /// Logged at the next start: its server died between journaling the
    /// answer and logging it (`Authority::restore`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    late: bool,
}

fn audit_entry(answer: &Answer) -> AuditEntry<'_> {
    AuditEntry {
        time: answer.response.responded_at,
        ask_id: &answer.response.ask_id,
        session: &answer.session,
        agent: answer.agent.as_deref(),
        request: &answer.rid,
        facts: &answer.response.facts,
        outcome: answer.response.outcome,
        decided_by: &answer.response.decided_by,
        hops: &answer.response.hops,
        latency_ms: answer.latency_ms,
        forwarded: answer.forwarded.as_ref(),
        late: false,
    }
}

/// How far before the journal's last answer a line that may be missing is
/// looked for: a chunk is logged right after it is journaled, so only the
/// answers of the last moments before a death can lack their lines.
const UNLOGGED_WINDOW_MS: u64 = 30_000;

/// Logs the restored answers whose lines are missing (their server died
/// between journaling and logging them; see `commit_chunk`), marked
/// `"late": true`. How many.
pub(in crate::session) fn log_unlogged(
    state: &State,
    audit: &crate::session::observe::audit::AuditLog,
) -> Result<usize, String> {
    let answered: Vec<(&Ask, &Response)> = state
        .asks
        .values()
        .filter_map(|a| a.response.as_deref().map(|r| (a.as_ref(), r)))
        .collect();
    let Some(last) = answered.iter().map(|(_, r)| r.responded_at).max() else {
        return Ok(0);
    };
    let since = last.saturating_sub(UNLOGGED_WINDOW_MS);
    let logged = crate::session::observe::audit::ask_ids_since(audit.path(), since)
        .map_err(|e| format!("the audit log cannot be read back: {e}"))?;
    let mut missing: Vec<&(&Ask, &Response)> = answered
        .iter()
        .filter(|(_, r)| r.responded_at >= since && !logged.contains(&r.ask_id))
        .collect();
    missing.sort_by_key(|(_, r)| r.responded_at);
    let entries: Vec<AuditEntry> = missing
        .iter()
        .map(|(ask, response)| AuditEntry {
            time: response.responded_at,
            ask_id: &response.ask_id,
            session: &ask.origin,
            agent: ask.agent.as_deref(),
            request: &ask.rid,
            facts: &response.facts,
            outcome: response.outcome,
            decided_by: &response.decided_by,
            hops: &response.hops,
            latency_ms: 0.0,
            forwarded: None,
            late: true,
        })
        .collect();
    if !entries.is_empty() {
        audit
            .append_all(&entries)
            .map_err(|e| format!("the answers of the previous server cannot be logged: {e}"))?;
    }
    Ok(entries.len())
}

/// How many answers a release writes and delivers at a time. Each chunk's
/// readers come back with their next requests (the read to the end, the
/// close) into the one FUSE queue every other ask waits in, and need the
/// same two cores: during a release of 10,000, chunks of 64 let an
/// unrelated ask wait over 20 ms about 4 times a round, chunks of 4 about
/// once in 9 rounds, and the release took as long (BENCHMARKS.md section
/// 16, in its git history).
pub(in crate::session) const RELEASE_CHUNK: usize = 4;

/// The audit log refused a batch of answers: they were denied instead.
#[derive(Debug, Clone)]
pub(in crate::session) struct AuditFailure {
    pub(in crate::session) reason: String,
    /// The write's errno (`ENOSPC`, `EIO`, …), for a decider's `write`.
    pub(in crate::session) errno: i32,
}

/// What the asker is told instead of a decision that could not be
/// recorded: `deny`, outcome and `decidedBy` `audit_unavailable`, with
/// the error and the decision that was withheld.
fn audit_unavailable(original: &Response, error: &str) -> Response {
    let name = |value: serde_json::Result<serde_json::Value>| {
        value
            .ok()
            .and_then(|v| match v {
                serde_json::Value::String(s) => Some(s),
                other => other
                    .get("kind")
                    .and_then(|k| k.as_str())
                    .map(str::to_string),
            })
            .unwrap_or_default()
    };
    let reason = format!(
        "{error}; permfs does not deliver a decision it cannot record (withheld: {} by {})",
        name(serde_json::to_value(original.outcome)),
        name(serde_json::to_value(&original.decided_by)),
    );
    Response::new(
        original.ask_id.clone(),
        false,
        "denied_with_reason",
        Some(reason.clone()),
        original.responder_session_id.clone(),
        DecidedBy::AuditUnavailable { reason },
        Outcome::AuditUnavailable,
        original.facts.clone(),
        original.judged_for.clone(),
        original.hops.clone(),
    )
}

/// What the asker is told instead of an answer that could not be
/// journaled: `deny`, `journal_unavailable`, naming what was withheld.
fn journal_unavailable(original: &Response, error: &str) -> Response {
    let withheld = audit_unavailable(original, error);
    let reason = match &withheld.decided_by {
        DecidedBy::AuditUnavailable { reason } => reason.clone(),
        _ => error.to_string(),
    };
    let mut response = withheld;
    response.decided_by = DecidedBy::JournalUnavailable {
        reason: reason.clone(),
    };
    response.outcome = Outcome::JournalUnavailable;
    response.denial_reason = Some(reason);
    response
}

/// Writes a chunk's answers to the journal (those whose ask is still
/// there), with what else was marked. When that fails, each answer is
/// replaced by its `journal_unavailable` denial (which is then what the
/// audit log records and the reader gets).
fn journal_answers(state: &mut State, answers: &mut [Answer]) -> Result<(), AuditFailure> {
    let Some(journal) = state.journal.clone() else {
        return Ok(());
    };
    let mut ops = state.take_ops();
    ops.extend(answers.iter().filter_map(|a| {
        let ask = state.asks.get(&a.response.ask_id)?;
        Some(crate::session::store::persist::answer_op(ask, &a.response))
    }));
    let Err(error) = journal.write(&ops) else {
        return Ok(());
    };
    tracing::error!(%error, asks = answers.len(), "answers that cannot be journaled are not delivered: answering deny (journal_unavailable)");
    for answer in answers.iter_mut() {
        answer.response = Arc::new(journal_unavailable(&answer.response, &error));
    }
    // A decider's `write` is told why: a full disk as such.
    let errno = if error.contains("full") {
        libc::ENOSPC
    } else {
        libc::EIO
    };
    Err(AuditFailure {
        reason: error,
        errno,
    })
}

/// The state, locked; dropping it unlocks, then runs [`AfterUnlock`].
pub(in crate::session) struct StateGuard<'a> {
    mutex: &'a Mutex<State>,
    guard: Option<MutexGuard<'a, State>>,
}

impl std::ops::Deref for StateGuard<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        match &self.guard {
            Some(guard) => guard,
            None => unreachable!("the guard is only emptied while dropping"),
        }
    }
}

impl std::ops::DerefMut for StateGuard<'_> {
    fn deref_mut(&mut self) -> &mut State {
        match &mut self.guard {
            Some(guard) => guard,
            None => unreachable!("the guard is only emptied while dropping"),
        }
    }
}

impl Drop for StateGuard<'_> {
    fn drop(&mut self) {
        // A failure is logged and every answer of the batch was denied.
        let _ = self.release();
    }
}

impl StateGuard<'_> {
    /// Unlocks and commits the answers reached: `Err` when their audit
    /// lines could not be written (they were then denied, as
    /// `audit_unavailable`), for a caller that must tell its writer.
    pub(in crate::session) fn commit(mut self) -> Result<(), AuditFailure> {
        self.release()
    }

    /// Unlocks; writes the answers' audit lines (outside the lock); then,
    /// locked again briefly, stores them (or their `audit_unavailable`
    /// denials, when the log refused them), publishes their events, and
    /// finally wakes the waiters. No answer is ever seen that the log does
    /// not hold, and no `allow` is delivered when it cannot be recorded.
    fn release(&mut self) -> Result<(), AuditFailure> {
        let Some(mut guard) = self.guard.take() else {
            return Ok(());
        };
        // What changed is journaled before anyone is told (fail closed: a
        // pending ask that could not be written is denied, since it would
        // not survive a restart).
        if let Err((error, pending)) = guard.flush() {
            let reason = format!("{error}; permfs does not keep an ask it cannot journal");
            for ask_id in &pending {
                finish(
                    &mut guard,
                    ask_id,
                    Outcome::JournalUnavailable,
                    DecidedBy::JournalUnavailable {
                        reason: reason.clone(),
                    },
                    Some(reason.clone()),
                    None,
                );
            }
        }
        let answers = std::mem::take(&mut guard.after_unlock.answers);
        let audit = guard.audit.clone();
        drop(guard);
        // A grant that answers thousands of asks commits them a chunk at a
        // time: a chunk's lines are written, then its readers woken, so the
        // first reader need not wait for the last line, and an unrelated
        // ask's line and lock wait for one chunk at most. "Logged before
        // delivered" holds per chunk.
        let mut result = Ok(());
        let mut delivered = 0;
        let mut answers = answers.into_iter().peekable();
        while answers.peek().is_some() {
            let chunk: Vec<Answer> = answers.by_ref().take(RELEASE_CHUNK).collect();
            let (committed, count) = self.commit_chunk(audit.as_deref(), chunk);
            delivered += count;
            if let Err(failure) = committed {
                result = result.and(Err(failure));
            }
        }
        // Once per release (not per chunk): a big one leaves tables and
        // heap pages to give back.
        after_release(self.mutex, delivered);
        result
    }

    /// Writes the lines of `answers`, then stores and delivers them (or
    /// their `audit_unavailable` denials when the log refused them); with
    /// how many readers were woken.
    fn commit_chunk(
        &self,
        audit: Option<&crate::session::observe::audit::AuditLog>,
        mut answers: Vec<Answer>,
    ) -> (Result<(), AuditFailure>, usize) {
        if answers.is_empty() {
            return (Ok(()), 0);
        }
        // Journaled first, under the lock (so after any earlier change to
        // the same ask, and an ask forgotten meanwhile is not written
        // back), then logged, then delivered. A server that dies between
        // the journal and the log leaves answers without their lines: the
        // next start writes them (`Authority::restore`), so every answer
        // is logged once and none is answered again. (Logged first, a
        // death before the journal would leave a line for an answer the
        // next server gives again.)
        let mut result = {
            let mut state = self.mutex.lock().unwrap_or_else(|p| p.into_inner());
            journal_answers(&mut state, &mut answers)
        };
        let written = match audit {
            // Every answer has its line, or none is delivered.
            Some(audit) => {
                let entries: Vec<_> = answers.iter().map(audit_entry).collect();
                audit.append_all(&entries)
            }
            None => Ok(()),
        };
        let mut audit_failed = false;
        if let Err(error) = written {
            let failure = AuditFailure {
                reason: format!("the audit log cannot be written: {error}"),
                errno: error.raw_os_error().unwrap_or(libc::EIO),
            };
            tracing::error!(
                %error,
                asks = answers.len(),
                first = %answers[0].response.ask_id,
                "decisions that cannot be recorded are not delivered: answering deny (audit_unavailable)"
            );
            for answer in &mut answers {
                answer.response = Arc::new(audit_unavailable(&answer.response, &failure.reason));
            }
            audit_failed = true;
            result = result.and(Err(failure));
        }
        // Kept answers are accounted by their serialized size: made here,
        // outside the lock (every reader serves these bytes anyway).
        for answer in &answers {
            let _ = answer.response.to_json();
        }
        let mut deliveries: Vec<(Waiter, Arc<Response>)> = Vec::new();
        {
            let mut state = self.mutex.lock().unwrap_or_else(|p| p.into_inner());
            // The journal holds what is delivered: the denials that
            // replaced answers the log refused.
            if audit_failed && journal_answers(&mut state, &mut answers).is_err() {
                tracing::error!("the audit log's denials cannot be journaled either");
            }
            for answer in answers {
                let Answer {
                    response,
                    session,
                    waiters,
                    waited_at,
                    ..
                } = answer;
                // Readers that came while the line was written parked on
                // the ask; it may also be gone (withdrawn, session ended).
                let delivered = deliveries.len();
                if let Some(ask) = state.asks.get_mut(&response.ask_id) {
                    ask.response = Some(Arc::clone(&response));
                    deliveries.extend(ask.waiters.drain(..).map(|w| (w, Arc::clone(&response))));
                }
                deliveries.extend(waiters.into_iter().map(|w| (w, Arc::clone(&response))));
                let read = deliveries.len() > delivered;
                crate::session::store::retention::keep(&mut state.kept(), &response.ask_id, read);
                if let Some(inbox) = waited_at {
                    let change = if matches!(response.decided_by, DecidedBy::User { .. }) {
                        "decided"
                    } else {
                        "left"
                    };
                    let event = serde_json::json!({
                        "event": change,
                        "askId": response.ask_id,
                        "from": session,
                        "outcome": response.outcome,
                        "decidedBy": response.decided_by,
                    });
                    publish(&mut state, &inbox, event);
                    publish_below(&mut state, &inbox, change, &response.ask_id);
                }
            }
            // Answers forgotten to keep the bounds (`retention::keep`).
            if let Err((error, _)) = state.flush() {
                tracing::error!(%error, "forgotten answers are still in the journal");
            }
        }
        let delivered = deliveries.len();
        for (waiter, response) in deliveries {
            waiter(response);
        }
        (result, delivered)
    }
}

/// After a release of `answers` answers. A big one leaves the asks' hash
/// tables sized for everything that was pending, with the slots of the
/// asks it ended left as tombstones; the next round of as many pending
/// asks would then double them (about 10 MiB more for 10,000 asks each
/// time a table grows). And it leaves megabytes of freed memory (its audit
/// lines, the asks it ended) that glibc's malloc keeps between live
/// blocks. So: the tables are shrunk to what they hold, and the free pages
/// go back to the system (measured by `scripts/bench/soak.py`,
/// BENCHMARKS.md section 12 in its git history).
pub(in crate::session) fn after_release(state: &Mutex<State>, answers: usize) {
    if answers < crate::session::store::retention::TRIM_AFTER_ANSWERS {
        return;
    }
    {
        let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
        state.asks.shrink_to_fit();
        state.outboxes.shrink_to_fit();
        state.retention.note_trimmed();
    }
    crate::session::store::retention::trim_heap();
}
