//! The kernel mechanism's question to the authority: may this sandbox's
//! process do this to these paths, now? The same walk the FUSE view
//! makes (`session::view::opens`: a dry walk first, a real ask only where
//! some node must ask a person), asked from a thread that may block: the
//! fanotify and seccomp loops hand each question that could wait to a
//! thread of its own.

use crate::session::tree::ask::{Outcome, Response};
use crate::session::view::opens::{Access, PathVerdict};
use crate::session::Authority;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

/// Who does it: the process in the sandbox (pid in the daemon's pid
/// namespace), for the ask's message and the audit line.
#[derive(Debug, Clone, Copy)]
pub struct Doer {
    pub pid: u32,
    pub uid: u32,
}

/// The verdict on an operation: `Err` carries the errno the caller gets.
pub type Verdict = Result<(), i32>;

/// What the dry walk said, before any ask.
pub enum Dry {
    Allow,
    Deny(String),
    Ask(crate::facts::request::FactSet),
}

/// One sandbox's judge.
pub struct Judge {
    pub authority: Arc<Authority>,
    pub session: String,
    /// Names this sandbox's asks apart (`kernel-<tag>-…`).
    pub tag: String,
}

/// How often a waiting ask checks that its caller still waits for it.
const WAIT_POLL: Duration = Duration::from_millis(200);

impl Judge {
    /// The dry walk's verdict on `accesses` together.
    pub fn dry(&self, accesses: &[(String, Access)]) -> Dry {
        let Some(facts) = self.authority.path_facts(&self.session, accesses) else {
            return Dry::Deny("the sandbox's session ended".into());
        };
        match self.authority.judge_paths(&self.session, &facts) {
            Ok(PathVerdict::Allow { .. }) => Dry::Allow,
            Ok(PathVerdict::Deny { why }) => Dry::Deny(why),
            Ok(PathVerdict::Ask) => Dry::Ask(facts),
            Err(error) => Dry::Deny(format!("cannot be judged: {error}")),
        }
    }

    /// Judges `accesses` for `doer`, blocking while an ask waits for an
    /// answer. `gone` is polled while it waits: once the caller no longer
    /// waits (killed, interrupted), the ask is withdrawn. `what` says what
    /// the program does, for the person.
    pub fn judge(
        &self,
        doer: Doer,
        accesses: &[(String, Access)],
        what: &str,
        gone: &dyn Fn() -> bool,
    ) -> Verdict {
        match self.dry(accesses) {
            Dry::Allow => Ok(()),
            Dry::Deny(why) => {
                self.denied(doer, accesses, &why);
                Err(libc::EACCES)
            }
            Dry::Ask(facts) => self.ask(doer, accesses, facts, what, gone),
        }
    }

    /// Asks for `accesses` at once (the dry walk already said they need
    /// an answer): blocks until the answer, as [`Self::judge`].
    pub fn ask_for(
        &self,
        doer: Doer,
        accesses: &[(String, Access)],
        what: &str,
        gone: &dyn Fn() -> bool,
    ) -> Verdict {
        let Some(facts) = self.authority.path_facts(&self.session, accesses) else {
            return Err(libc::EACCES);
        };
        self.ask(doer, accesses, facts, what, gone)
    }

    fn ask(
        &self,
        doer: Doer,
        accesses: &[(String, Access)],
        facts: crate::facts::request::FactSet,
        what: &str,
        gone: &dyn Fn() -> bool,
    ) -> Verdict {
        let mut nonce = [0u8; 8];
        crate::mount::nodes::random_bytes(&mut nonce);
        let rid = format!("kernel-{}-{}", self.tag, hex::encode(nonce));
        let command = crate::view::command_line(doer.pid);
        let message = format!("{what} (pid {}, uid {}: {command})", doer.pid, doer.uid);
        let paths: Vec<String> = accesses.iter().map(|(p, _)| p.clone()).collect();
        let ask_id = match self
            .authority
            .raise_paths(&self.session, &rid, facts, message, paths)
        {
            Ok(id) => id,
            Err(error) => {
                tracing::warn!(session = %self.session, %error, "kernel: the ask could not be raised: refused");
                return Err(libc::EACCES);
            }
        };
        tracing::info!(session = %self.session, ask = %ask_id, pid = doer.pid, "kernel: an operation waits for an answer");
        let (send, answer) = mpsc::channel::<Arc<Response>>();
        let waiter: crate::session::tree::ask::Waiter = Box::new(move |response| {
            let _ = send.send(response);
        });
        let response = match self.authority.wait(&ask_id, waiter) {
            Ok(Some(response)) => response,
            Ok(None) => loop {
                match answer.recv_timeout(WAIT_POLL) {
                    Ok(response) => break response,
                    Err(mpsc::RecvTimeoutError::Timeout) if gone() => {
                        tracing::info!(session = %self.session, ask = %ask_id, "kernel: the caller stopped waiting: its ask is withdrawn");
                        let _ = self.authority.withdraw(&self.session, &rid);
                        return Err(libc::EINTR);
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => return Err(libc::EACCES),
                }
            },
            Err(error) => {
                tracing::warn!(%error, "kernel: the ask vanished: refused");
                return Err(libc::EACCES);
            }
        };
        match response.outcome {
            Outcome::Allow => Ok(()),
            Outcome::Cancelled => Err(libc::EINTR),
            _ => Err(libc::EACCES),
        }
    }

    /// Says a refusal: the daemon's log and the audit log's `view-denied`
    /// line (the same event the FUSE view writes, with its mechanism).
    pub fn denied(&self, doer: Doer, accesses: &[(String, Access)], why: &str) {
        let command = crate::view::command_line(doer.pid);
        for (path, access) in accesses {
            tracing::info!(session = %self.session, path = %path, access = access.word(), pid = doer.pid, %why, "kernel: denied");
        }
        let mut entry = serde_json::Map::new();
        entry.insert("event".into(), "view-denied".into());
        entry.insert("mechanism".into(), "kernel".into());
        entry.insert("session".into(), self.session.clone().into());
        entry.insert(
            "accesses".into(),
            accesses
                .iter()
                .map(|(p, a)| serde_json::json!({"path": p, "access": a.word()}))
                .collect::<Vec<_>>()
                .into(),
        );
        entry.insert("why".into(), why.into());
        entry.insert("pid".into(), doer.pid.into());
        entry.insert("uid".into(), doer.uid.into());
        entry.insert("command".into(), command.into());
        self.authority.audit_line(entry);
    }
}
