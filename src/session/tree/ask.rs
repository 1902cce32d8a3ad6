//! An ask in flight and the answer it ends with.

use crate::facts::intent::AccessIntent;
use crate::facts::request::{FactSet, Request};
use crate::policy::{Origin, PermissionState};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

pub type AskId = String;

/// Who or what answered, in the reference's `decidedBy` vocabulary plus
/// the outcomes that are not a decision (silence is never a denial).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DecidedBy {
    Rule {
        surface: String,
        pattern: Option<String>,
        origin: Origin,
        /// The bash command (unit) that decided, so a person sees why.
        #[serde(skip_serializing_if = "Option::is_none")]
        command: Option<String>,
        /// The bash path word that decided.
        #[serde(skip_serializing_if = "Option::is_none")]
        word: Option<String>,
    },
    SessionApproval {
        surface: String,
        pattern: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        command: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        word: Option<String>,
    },
    Yolo {
        pattern: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        command: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        word: Option<String>,
    },
    User {
        session: String,
        uid: u32,
    },
    Timeout,
    NoDecider,
    Cancelled,
    SessionEnded,
    Invalid {
        reason: String,
    },
    GateError {
        reason: String,
    },
    /// A link of the authorizer chain.
    Authorizer {
        name: String,
        verdict: String,
        reason: Option<String>,
    },
    /// Recorded authority said `ask`: the ask moves on (a hop only).
    Escalated {
        reason: String,
    },
    /// The decision's audit line could not be written, so it was not
    /// delivered: the ask is denied instead (fail closed). The reason
    /// names the error and the decision that was withheld.
    AuditUnavailable {
        reason: String,
    },
    /// The answer could not be written to the journal (`journal.rs`), so
    /// it would not survive a restart: the ask is denied instead (fail
    /// closed), the reason naming the error and what was withheld.
    JournalUnavailable {
        reason: String,
    },
    /// A built-in guard on the authority (the mount, the state dir, a
    /// config layer, an agent's hook or settings file) named a path this
    /// ask writes: final, whatever allowed it. `overruled` says what
    /// would have allowed it (`rule`, `session_approval`, `authorizer`,
    /// `user`, …).
    Guard {
        pattern: String,
        reason: String,
        overruled: String,
    },
}

impl DecidedBy {
    /// The `kind` this serializes with, for saying what a guard overruled.
    pub fn kind(&self) -> &'static str {
        match self {
            DecidedBy::Rule { .. } => "rule",
            DecidedBy::SessionApproval { .. } => "session_approval",
            DecidedBy::Yolo { .. } => "yolo",
            DecidedBy::User { .. } => "user",
            DecidedBy::Timeout => "timeout",
            DecidedBy::NoDecider => "no_decider",
            DecidedBy::Cancelled => "cancelled",
            DecidedBy::SessionEnded => "session_ended",
            DecidedBy::Invalid { .. } => "invalid",
            DecidedBy::GateError { .. } => "gate_error",
            DecidedBy::Authorizer { .. } => "authorizer",
            DecidedBy::Escalated { .. } => "escalated",
            DecidedBy::AuditUnavailable { .. } => "audit_unavailable",
            DecidedBy::JournalUnavailable { .. } => "journal_unavailable",
            DecidedBy::Guard { .. } => "guard",
        }
    }
}

/// The guard an ask's facts meet: the pattern of the built-in guard that
/// denies one of its writes, and its reason. Fixed when the ask is raised,
/// from the guards of every cwd on the asker's spawn chain, and checked
/// again by `finish`, the one place every ask ends.
#[derive(Debug, Clone, PartialEq)]
pub struct Guarded {
    pub pattern: String,
    pub reason: String,
    /// `false`: a guard on the authority, which nothing may allow.
    /// `true`: a file that runs outside the sandbox (`policy::outside`),
    /// which only a person's answer may allow.
    pub floor: bool,
}

/// Why the ask ended, beyond allow/deny.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Allow,
    Deny,
    Timeout,
    NoDecider,
    Cancelled,
    SessionEnded,
    Invalid,
    /// Denied because its audit line could not be written.
    AuditUnavailable,
    /// Denied because it could not be written to the journal.
    JournalUnavailable,
}

/// One node's verdict on the way up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hop {
    pub session: String,
    pub verdict: PermissionState,
    pub decided_by: DecidedBy,
}

/// The number that tells an ask from every other one this daemon raised:
/// an ask's id is `<epoch>.<serial>-<rid>` (minted in `walk::raise`; the
/// epoch is the same for every ask of one daemon, `epoch.rs`).
pub fn serial_of(ask_id: &str) -> Option<u64> {
    let (number, _) = ask_id.split_once('-')?;
    let (epoch, serial) = number.split_once('.')?;
    epoch.parse::<u64>().ok()?;
    serial.parse().ok()
}

/// The response file's content: the reference's forwarded response plus
/// permfs's outcome, facts and hops.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    pub ask_id: String,
    pub approved: bool,
    pub state: &'static str,
    pub denial_reason: Option<String>,
    pub responder_session_id: Option<String>,
    pub responded_at: u64,
    pub decided_by: DecidedBy,
    pub outcome: Outcome,
    pub facts: Vec<AccessIntent>,
    /// The agents every node judged for: the asker's and every agent above
    /// it on its spawn chain.
    pub judged_for: Vec<Option<String>>,
    pub hops: Vec<Hop>,
    /// The serialized form, made once: every read serves these bytes.
    #[serde(skip)]
    json: std::sync::OnceLock<Vec<u8>>,
}

impl Response {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        ask_id: String,
        approved: bool,
        state: &'static str,
        denial_reason: Option<String>,
        responder_session_id: Option<String>,
        decided_by: DecidedBy,
        outcome: Outcome,
        facts: Vec<AccessIntent>,
        judged_for: Vec<Option<String>>,
        hops: Vec<Hop>,
    ) -> Self {
        Self {
            ask_id,
            approved,
            state,
            denial_reason,
            responder_session_id,
            responded_at: now_ms(),
            decided_by,
            outcome,
            facts,
            judged_for,
            hops,
            json: std::sync::OnceLock::new(),
        }
    }

    /// The response file's bytes (pretty JSON and a newline).
    pub fn to_json(&self) -> &[u8] {
        self.json.get_or_init(|| {
            let mut bytes = serde_json::to_vec_pretty(self).unwrap_or_else(|e| {
                format!("{{\"approved\":false,\"outcome\":\"invalid\",\"error\":\"{e}\"}}")
                    .into_bytes()
            });
            bytes.push(b'\n');
            // Kept as long as the answer is: no spare capacity.
            bytes.shrink_to_fit();
            bytes
        })
    }
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Called with the answer once it exists (a parked FUSE read, say).
pub type Waiter = Box<dyn FnOnce(Arc<Response>) + Send>;

pub struct Ask {
    pub id: AskId,
    pub origin: String,
    /// The asking session's agent, kept for the audit log.
    pub agent: Option<String>,
    /// The agents the walk judges for (set when the walk starts).
    pub judged_for: Vec<Option<String>>,
    pub rid: String,
    pub request: Option<Request>,
    pub facts: FactSet,
    pub hops: Vec<Hop>,
    /// The session whose inbox holds it while it waits for a person.
    pub pending_at: Option<String>,
    pub response: Option<Arc<Response>>,
    pub waiters: Vec<Waiter>,
    pub created: Instant,
    pub deadline: Instant,
    /// Wall-clock time (ms) the ask entered an inbox: the inbox entry's
    /// `mtime` and the order of the `pending` listing, so a person can
    /// sort what waits by age.
    pub arrived_ms: Option<u64>,
    /// The deadline as wall-clock time (ms), for people.
    pub deadline_ms: u64,
    /// The last decision a person wrote here that the daemon refused, with
    /// why: a `write` can only return an errno, so the reason is shown
    /// where the person looks (the inbox entry, `pending`).
    pub last_error: Option<String>,
    /// Bytes this ask is accounted for while kept as an answer (0: not
    /// kept; see `retention`).
    pub retained: usize,
    /// Its answer was read (delivered to a reader): it may go first.
    pub read: bool,
    /// A built-in guard its facts meet: it can then never be allowed.
    pub guarded: Option<Guarded>,
    /// The request's length as its asker wrote it (0: not written through
    /// a descriptor that reads the answer back). An exchange's answer
    /// starts where its writer's file offset stood after the request, so a
    /// server that takes the descriptor over after a restart knows where
    /// the answer begins in the offsets the kernel sends.
    pub request_len: u64,
    /// For an answer restored from the journal, which keeps no request:
    /// the pi target directory its forwarded request was written in (see
    /// [`Ask::forwarded_target`]).
    pub restored_target: Option<String>,
}

impl Ask {
    /// The pi view target directory this ask's request was written in, if
    /// the pi view raised it: its request's provenance, or what the
    /// journal kept with its answer. Only the pi view sets a provenance.
    pub fn forwarded_target(&self) -> Option<&str> {
        self.request
            .as_ref()
            .and_then(|r| r.forwarded.as_ref())
            .map(|f| f.target.as_str())
            .or(self.restored_target.as_deref())
    }
}

impl std::fmt::Debug for Ask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ask")
            .field("id", &self.id)
            .field("origin", &self.origin)
            .field("pending_at", &self.pending_at)
            .field("decided", &self.response.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::serial_of;

    #[test]
    fn an_asks_serial_is_read_back_from_its_id_and_nothing_else_has_one() {
        assert_eq!(serial_of("3.17-r1"), Some(17));
        assert_eq!(serial_of("17-r1"), None);
        assert_eq!(
            serial_of("1.5-ask-3"),
            Some(5),
            "an `ask` file's name has dashes"
        );
        assert_eq!(serial_of("r1"), None);
        assert_eq!(serial_of("x-1"), None);
    }
}
