//! Deciding at an inbox: a person's decision on one ask (`decide`),
//! the grants an `allow session`/`allow subagent` records and a revoke
//! removes, the `allow always` rules it writes, and the re-walk that
//! answers every waiting ask a new grant covers, in chunks. Separate from
//! the authority's bookkeeping (sessions, outboxes, answers) because a
//! decision is the one place where a person widens what agents may do:
//! who may decide, what is recorded and what it releases read together
//! here.

use super::access::{Caller, Standing};
use super::ask::{Ask, AskId, DecidedBy, Outcome};
use super::authority::{
    finish, lock, publish, publish_below, Authority, AuthorityError, State, RELEASE_CHUNK,
};
use super::decision::{breadth, Breadth, Decision};
use super::grants::{chosen_grants, derived_grants, grant_rules, recompile_grants};
use super::tree::Grant;
use super::walk::{agents_for, decided_by_for};
use crate::policy::{PermissionState, Rule};
use std::sync::Arc;

impl Authority {
    /// A refused decision: kept on the ask (when it still waits here) so
    /// the person can read why, and told to the session's event stream.
    pub(super) fn record_refusal(&self, session: &str, ask_id: &str, reason: &str) {
        let mut state = lock(&self.state);
        let waiting_here = state
            .asks
            .get(ask_id)
            .is_some_and(|a| a.response.is_none() && a.pending_at.as_deref() == Some(session));
        if !waiting_here {
            return;
        }
        if let Some(ask) = state.asks.get_mut(ask_id) {
            ask.last_error = Some(reason.to_string());
        }
        let event = serde_json::json!({"event": "refused", "askId": ask_id, "error": reason});
        publish(&mut state, session, event);
        publish_below(&mut state, session, "refused");
    }

    /// A live decision written to `session`'s inbox entry `ask_id`.
    pub fn decide(
        &self,
        session: &str,
        ask_id: &str,
        caller: Caller,
        text: &str,
    ) -> Result<(), AuthorityError> {
        let uid = caller.uid;
        if !self.may_decide(session, caller) {
            return Err(AuthorityError::PermissionDenied(format!(
                "uid {uid} may not decide for session {session:?} (from here)"
            )));
        }
        let decision = match Decision::parse(text) {
            Ok(decision) => decision,
            Err(reason) => {
                self.record_refusal(session, ask_id, &reason);
                return Err(AuthorityError::Invalid(reason));
            }
        };
        let mut state = lock(&self.state);
        let ask = state
            .asks
            .get(ask_id)
            .ok_or_else(|| AuthorityError::NotFound(format!("no ask {ask_id:?}")))?;
        if ask.response.is_some() || ask.pending_at.as_deref() != Some(session) {
            return Err(AuthorityError::AlreadyDecided(format!(
                "ask {ask_id:?} is no longer pending here"
            )));
        }
        // The guards are final: an allow of a write to the authority is
        // refused here, before it could record a grant or a config rule
        // (`finish` would deny it anyway). The person reads why.
        if let Some(guard) = ask
            .guarded
            .as_ref()
            .filter(|_| !matches!(decision, Decision::Deny(_)))
        {
            let reason = format!(
                "refused: this ask writes to permfs's own authority ({}, guarded by {}); no decision can allow it, only deny",
                guard.reason, guard.pattern
            );
            drop(state);
            self.record_refusal(session, ask_id, &reason);
            return Err(AuthorityError::PermissionDenied(reason));
        }
        // `allow always` writes the global config first: when that fails
        // nothing is decided, and the person reads why.
        let mut always = None;
        if let Decision::AllowAlwaysGlobal(patterns) = &decision {
            let operator = state.tree.get(session).is_some_and(|node| {
                Standing::of(caller, node, self.owner_uid) == Standing::Operator
            });
            let written = if operator {
                self.write_always(ask, patterns)
            } else {
                Err(AuthorityError::PermissionDenied(
                    "only the operator (root or the mount owner) may change the global config"
                        .into(),
                ))
            };
            match written {
                Ok(done) => always = Some(done),
                Err(error) => {
                    drop(state);
                    self.record_refusal(session, ask_id, &error.to_string());
                    return Err(error);
                }
            }
        }
        let by = DecidedBy::User {
            session: session.to_string(),
            uid,
        };
        // A grant is recorded only once the decision that makes it is.
        let grant = match &decision {
            Decision::AllowSession(patterns) | Decision::AllowSubagent(patterns) => {
                let grant_at = if matches!(decision, Decision::AllowSession(_)) {
                    session.to_string()
                } else {
                    ask.origin.clone()
                };
                let chosen = chosen_grants(ask, patterns);
                // Compared with what the facts alone suggest: an asker's
                // own suggestion is no yardstick.
                let derived: Vec<String> =
                    derived_grants(ask).into_iter().map(|(_, p)| p).collect();
                let mut broader: Vec<String> = Vec::new();
                for (_, pattern) in &chosen {
                    let wide = matches!(
                        breadth(pattern, &derived),
                        Breadth::Broader | Breadth::Elsewhere
                    );
                    if wide && !broader.contains(pattern) {
                        broader.push(pattern.clone());
                    }
                }
                let rules = chosen
                    .iter()
                    .flat_map(|(surface, pattern)| grant_rules(surface, pattern))
                    .collect::<Vec<_>>();
                let patterns: Vec<String> = chosen.into_iter().map(|(_, p)| p).collect();
                Some((grant_at, rules, patterns, broader))
            }
            Decision::Allow | Decision::AllowAlwaysGlobal(_) | Decision::Deny(_) => None,
        };
        // Patterns with no surface to put them on (an ask whose facts
        // could not be fixed) would record an empty grant: refused.
        let patterns_given = matches!(
            &decision,
            Decision::AllowSession(p) | Decision::AllowSubagent(p) if !p.is_empty()
        );
        if patterns_given
            && grant
                .as_ref()
                .is_some_and(|(_, rules, _, _)| rules.is_empty())
        {
            drop(state);
            let reason = "this ask has no surface a grant could cover: allow it once or deny it";
            self.record_refusal(session, ask_id, reason);
            return Err(AuthorityError::Invalid(reason.into()));
        }
        let (outcome, reason) = match decision {
            Decision::Deny(reason) => (Outcome::Deny, reason),
            _ => (Outcome::Allow, None),
        };
        finish(
            &mut state,
            ask_id,
            outcome,
            by,
            reason,
            Some(session.to_string()),
        );
        // A person's `allow session`/`allow subagent` is a session
        // approval in the reference's vocabulary: the asker reads
        // `approved_for_session`, not a one-off `approved`.
        if grant.is_some() {
            if let Some(answer) = state.after_unlock.last_response_mut() {
                if let Some(response) = Arc::get_mut(answer) {
                    if response.approved && response.ask_id == ask_id {
                        response.state = "approved_for_session";
                    }
                }
            }
        }
        // The person is told when their decision could not be recorded:
        // the asker was denied (`audit_unavailable`) and no grant is made.
        state.commit().map_err(|failure| {
            AuthorityError::AuditUnavailable(
                format!(
                    "the decision was not recorded, so the ask was denied: {}",
                    failure.reason
                ),
                failure.errno,
            )
        })?;
        if let Some((file, added)) = always {
            let mut state = lock(&self.state);
            let event = serde_json::json!({
                "event": "always",
                "askId": ask_id,
                "file": file,
                "added": added,
            });
            publish(&mut state, session, event);
        }
        if let Some((grant_at, rules, patterns, broader)) = grant {
            if !broader.is_empty() {
                tracing::warn!(%session, ask = %ask_id, ?broader, "a grant broader than the suggestion was recorded");
            }
            let mut state = lock(&self.state);
            let id = self.add_grant(
                &mut state,
                &grant_at,
                rules,
                ask_id.to_string(),
                uid,
                broader.clone(),
            );
            let event = serde_json::json!({
                "event": "granted",
                "askId": ask_id,
                "grant": id,
                "at": grant_at,
                "patterns": patterns,
                "broaderThanSuggested": broader,
            });
            publish(&mut state, session, event);
            drop(state);
            // The first chunk now; the rest in the background when a
            // release server runs (its decider need not wait for them).
            let served = self
                .releases_served
                .load(std::sync::atomic::Ordering::SeqCst);
            let chunks = if served { 1 } else { usize::MAX };
            if self.rewalk_pending_at(&grant_at, chunks) && served {
                let _ = self.releases.0.send(grant_at);
            }
        }
        Ok(())
    }

    /// Adds the ask's rules (or the person's patterns) to the global
    /// config file as `allow`, replacing the file in one rename, and
    /// re-reads it. Returns the file and the lines added.
    pub(super) fn write_always(
        &self,
        ask: &Ask,
        patterns: &[String],
    ) -> Result<(String, Vec<String>), AuthorityError> {
        let path = self.loader.global_path().ok_or_else(|| {
            AuthorityError::Invalid("permfs runs without a global config file (--config)".into())
        })?;
        let rules = chosen_grants(ask, patterns);
        if rules.is_empty() {
            return Err(AuthorityError::Invalid(
                "this ask has no surface a rule could cover: allow it once or deny it".into(),
            ));
        }
        // A rule on a bare family covers both directions, as grants do.
        let rules: Vec<(String, String)> = rules
            .iter()
            .flat_map(|(surface, pattern)| {
                grant_rules(surface, pattern)
                    .into_iter()
                    .map(|rule| (rule.surface, rule.pattern))
            })
            .collect();
        let text = std::fs::read_to_string(path).map_err(|e| {
            AuthorityError::Invalid(format!("{} cannot be read: {e}", path.display()))
        })?;
        let (edited, added) = crate::policy::edit::add_allow_rules(&text, &rules)
            .map_err(|e| AuthorityError::Invalid(format!("{}: {e}", path.display())))?;
        crate::policy::edit::replace_file(path, &edited).map_err(AuthorityError::Invalid)?;
        tracing::info!(file = %path.display(), ?added, "allow always: rules added to the global config");
        if let Some(error) = self.loader.reload_global() {
            tracing::error!(%error, "the global config does not load after allow always");
        }
        Ok((path.display().to_string(), added))
    }

    /// Records a grant; returns its id (`None`: the session is gone).
    pub(super) fn add_grant(
        &self,
        state: &mut State,
        session: &str,
        rules: Vec<Rule>,
        from_ask: String,
        uid: u32,
        broader_than_suggested: Vec<String>,
    ) -> Option<String> {
        state.next_id += 1;
        let id = format!("g{}", state.next_id);
        let node = state.tree.get_mut(session)?;
        node.grants.push(Grant {
            id: id.clone(),
            rules,
            from_ask,
            granted_by_uid: uid,
            broader_than_suggested,
        });
        recompile_grants(node);
        Some(id)
    }

    /// Grants at a session, for listing under `grants/`.
    pub fn grants(&self, session: &str) -> Vec<Grant> {
        lock(&self.state)
            .tree
            .get(session)
            .map(|s| s.grants.clone())
            .unwrap_or_default()
    }

    /// Revokes a grant (its file was removed).
    pub fn revoke(&self, session: &str, grant_id: &str) -> Result<(), AuthorityError> {
        let mut state = lock(&self.state);
        let node = state
            .tree
            .get_mut(session)
            .ok_or_else(|| AuthorityError::NotFound(format!("no session {session:?}")))?;
        let before = node.grants.len();
        node.grants.retain(|g| g.id != grant_id);
        if node.grants.len() == before {
            return Err(AuthorityError::NotFound(format!("no grant {grant_id:?}")));
        }
        recompile_grants(node);
        Ok(())
    }

    /// After a grant, asks waiting at or below `session` are judged again:
    /// the ones it covers are answered by it. A chunk at a time, each under
    /// the lock and committed (logged, then delivered) when the lock is
    /// released: the first covered reader is answered after one chunk, and
    /// other asks wait for one chunk at most. An ask decided, withdrawn or
    /// ended meanwhile is skipped; a grant revoked meanwhile covers nothing.
    /// At most `chunks` chunks; true when asks were left for later.
    pub(super) fn rewalk_pending_at(&self, session: &str, chunks: usize) -> bool {
        let below = format!("{session}/");
        let is_here = |at: &Option<String>| {
            at.as_deref()
                .is_some_and(|at| at == session || at.starts_with(&below))
        };
        let pending: Vec<AskId> = {
            let state = lock(&self.state);
            state
                .pending
                .iter()
                .filter(|id| state.asks.get(*id).is_some_and(|a| is_here(&a.pending_at)))
                .cloned()
                .collect()
        };
        let mut released = 0;
        let left_for_later = 'chunks: {
            for (index, chunk) in pending.chunks(RELEASE_CHUNK).enumerate() {
                if index == chunks {
                    break 'chunks true;
                }
                if index > 0 {
                    if let Some(pace) = self.release_pacer.get() {
                        pace();
                    }
                }
                let mut state = lock(&self.state);
                for ask_id in chunk {
                    let Some(ask) = state.asks.get(ask_id) else {
                        continue;
                    };
                    if !is_here(&ask.pending_at) {
                        continue;
                    }
                    let Some(node) = state.tree.get(session) else {
                        break 'chunks false;
                    };
                    let agents = agents_for(&state.tree, &ask.origin);
                    let covered = self
                        .judge_at(node, &agents, ask)
                        .map(|j| (j.state, decided_by_for(&j)))
                        .ok();
                    if let Some((PermissionState::Allow, by)) = covered {
                        finish(
                            &mut state,
                            ask_id,
                            Outcome::Allow,
                            by,
                            None,
                            Some(session.to_string()),
                        );
                        released += 1;
                    }
                }
            }
            false
        };
        // A release in chunks commits each on its own (the chunk's guard,
        // dropped above), so the trim after a big release is asked for
        // once, for all of them.
        if released > 0 {
            super::retention::after_release(&self.state, released);
        }
        left_for_later
    }
}
