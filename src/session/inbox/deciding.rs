//! Deciding at an inbox: a person's decision on one ask (`decide`),
//! the grants an `allow session`/`allow subagent` records and a revoke
//! removes, the `allow always` rules it writes, and the re-walk that
//! answers every waiting ask a new grant covers, in chunks. Separate from
//! the authority's bookkeeping (sessions, outboxes, answers) because a
//! decision is the one place where a person widens what agents may do:
//! who may decide, what is recorded and what it releases read together
//! here.

use crate::policy::{PermissionState, Rule};
use crate::session::authority::commit::{lock, RELEASE_CHUNK};
use crate::session::authority::state::{finish, publish, publish_below, State};
use crate::session::authority::{Authority, AuthorityError};
use crate::session::tree::access::{Caller, Standing};
use crate::session::tree::ask::{Ask, AskId, DecidedBy, Outcome};
use crate::session::tree::decision::{breadth, Breadth, Decision};
use crate::session::tree::grants::{chosen_grants, derived_grants, grant_rules, recompile_grants};
use crate::session::tree::Grant;
use crate::session::walk::{agents_for, decided_by_for};
use std::sync::Arc;

impl Authority {
    /// A refused decision: kept on the ask (when it still waits here) so
    /// the person can read why, and told to the session's event stream.
    pub(in crate::session) fn record_refusal(&self, session: &str, ask_id: &str, reason: &str) {
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
        publish_below(&mut state, session, "refused", ask_id);
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
        let parsed = Decision::parse(text).and_then(|decision| {
            Ok((
                decision,
                crate::session::tree::decision::bound_digest(text)?,
            ))
        });
        let (decision, digest) = match parsed {
            Ok(parsed) => parsed,
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
        // A decision made on what a decider was shown counts only for the
        // ask that showed it.
        if let Some(digest) = digest {
            if digest != crate::session::inbox::views::facts_digest(ask) {
                drop(state);
                let reason = format!(
                    "the decision was made on other facts than ask {ask_id:?} holds (factsDigest differs): look again"
                );
                self.record_refusal(session, ask_id, &reason);
                return Err(AuthorityError::Invalid(reason));
            }
        }
        // The guards are final: an allow of a write to the authority is
        // refused here, before it could record a grant or a config rule
        // (`finish` would deny it anyway). The person reads why.
        if let Some(guard) = ask
            .guarded
            .as_ref()
            .filter(|g| !g.floor && !matches!(decision, Decision::Deny(_)))
        {
            let reason = format!(
                "refused: this ask writes to permfs's own authority ({}, guarded by {}); no decision can allow it, only deny",
                guard.reason, guard.pattern
            );
            drop(state);
            self.record_refusal(session, ask_id, &reason);
            return Err(AuthorityError::PermissionDenied(reason));
        }
        // A write that runs outside the sandbox is a person's decision each
        // time: `allow`, `allow session` and `allow subagent` allow this
        // one (a grant is recorded, but no grant outranks the floor, so
        // the next such write asks again). `allow always` would add a
        // config rule that does not lift the floor either, so it is
        // refused with what does: lowering the guard by name.
        if let Some(guard) = ask
            .guarded
            .as_ref()
            .filter(|g| g.floor && matches!(decision, Decision::AllowAlwaysGlobal(_)))
        {
            let name = guard
                .reason
                .rsplit_once("built-in guard ")
                .map(|(_, n)| n.trim_end_matches(')').trim_matches('"').to_string())
                .unwrap_or_else(|| guard.pattern.clone());
            let reason = format!(
                "refused: this write runs outside the sandbox ({}); no config rule lifts that, so allow it once (allow, allow session) or deny it; the operator can lower the guard in the global config: \"guards\": {{\"{name}\": \"allow\"}}",
                guard.reason
            );
            drop(state);
            self.record_refusal(session, ask_id, &reason);
            return Err(AuthorityError::Invalid(reason));
        }
        // `allow always` edits the global config, the authority itself, so
        // the edit is audited before it is made (fail closed, issue 23
        // item 5): its line first, then the file; a line that cannot be
        // written means no edit, and the asker is denied
        // `audit_unavailable` as for any decision that cannot be recorded.
        // A file that cannot be written refuses the decision (the ask
        // stays pending, the person reads why).
        let mut always: Option<AlwaysEdit> = None;
        if let Decision::AllowAlwaysGlobal(patterns) = &decision {
            let operator = state.tree.get(session).is_some_and(|node| {
                Standing::of(caller, node, self.owner_uid) == Standing::Operator
            });
            let prepared = if operator {
                self.prepare_always(ask, patterns)
            } else {
                Err(AuthorityError::PermissionDenied(
                    "only the operator (root or the mount owner) may change the global config"
                        .into(),
                ))
            };
            let edit = match prepared {
                Ok(edit) => edit,
                Err(error) => {
                    drop(state);
                    self.record_refusal(session, ask_id, &error.to_string());
                    return Err(error);
                }
            };
            if let Err((reason, errno)) =
                audit_edit(&state, "config_edit", ask_id, uid, &edit, None)
            {
                tracing::error!(%reason, file = %edit.file.display(), "allow always: the edit cannot be audited, so the config is not changed");
                let reason = format!(
                    "the global config was not changed, because the edit could not be recorded: {reason}"
                );
                finish(
                    &mut state,
                    ask_id,
                    Outcome::AuditUnavailable,
                    DecidedBy::AuditUnavailable {
                        reason: reason.clone(),
                    },
                    Some(reason.clone()),
                    Some(session.to_string()),
                );
                let _ = state.commit();
                self.record_refusal(session, ask_id, &reason);
                return Err(AuthorityError::AuditUnavailable(reason, errno));
            }
            if let Err(error) = self.apply_always(&edit) {
                let _ = audit_edit(
                    &state,
                    "config_edit_failed",
                    ask_id,
                    uid,
                    &edit,
                    Some(&error.to_string()),
                );
                drop(state);
                self.record_refusal(session, ask_id, &error.to_string());
                return Err(error);
            }
            always = Some(edit);
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
        // the asker was denied (`audit_unavailable`), no grant is made and
        // an `allow always` edit is rolled back.
        let audit = state.audit.clone();
        if let Err(failure) = state.commit() {
            if let Some(edit) = &always {
                self.roll_back_always(edit, audit.as_deref(), ask_id, uid);
            }
            return Err(AuthorityError::AuditUnavailable(
                format!(
                    "the decision was not recorded, so the ask was denied: {}",
                    failure.reason
                ),
                failure.errno,
            ));
        }
        if let Some(edit) = always {
            let mut state = lock(&self.state);
            let event = serde_json::json!({
                "event": "always",
                "askId": ask_id,
                "file": edit.file.display().to_string(),
                "added": edit.added,
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

    /// The edit an `allow always` makes: the ask's rules (or the person's
    /// patterns) added to the global config as `allow`. Nothing is
    /// written yet.
    pub(in crate::session) fn prepare_always(
        &self,
        ask: &Ask,
        patterns: &[String],
    ) -> Result<AlwaysEdit, AuthorityError> {
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
        let before = std::fs::read_to_string(path).map_err(|e| {
            AuthorityError::Invalid(format!("{} cannot be read: {e}", path.display()))
        })?;
        let (after, added) = crate::policy::edit::add_allow_rules(&before, &rules)
            .map_err(|e| AuthorityError::Invalid(format!("{}: {e}", path.display())))?;
        Ok(AlwaysEdit {
            file: path.to_path_buf(),
            before,
            after,
            added,
        })
    }

    /// Writes a prepared edit, replacing the file in one rename, and
    /// re-reads the global config.
    fn apply_always(&self, edit: &AlwaysEdit) -> Result<(), AuthorityError> {
        crate::policy::edit::replace_file(&edit.file, &edit.after)
            .map_err(AuthorityError::Invalid)?;
        tracing::info!(file = %edit.file.display(), added = ?edit.added, "allow always: rules added to the global config");
        if let Some(error) = self.loader.reload_global() {
            tracing::error!(%error, "the global config does not load after allow always");
        }
        Ok(())
    }

    /// Undoes an edit whose decision could not be recorded: the file gets
    /// its old text back, unless someone changed it since (then it is left
    /// alone and the error log says so). Tried in the audit log too, which
    /// most likely still refuses it.
    fn roll_back_always(
        &self,
        edit: &AlwaysEdit,
        audit: Option<&crate::session::observe::audit::AuditLog>,
        ask_id: &str,
        uid: u32,
    ) {
        let current = std::fs::read_to_string(&edit.file).ok();
        if current.as_deref() != Some(edit.after.as_str()) {
            tracing::error!(file = %edit.file.display(), added = ?edit.added, "allow always: the decision was not recorded, and the config changed since the edit: not rolled back, remove the added rules by hand");
            return;
        }
        match crate::policy::edit::replace_file(&edit.file, &edit.before) {
            Ok(()) => {
                tracing::warn!(file = %edit.file.display(), added = ?edit.added, "allow always: the decision was not recorded, so the rules added were removed again");
                if let Some(error) = self.loader.reload_global() {
                    tracing::error!(%error, "the global config does not load after the rollback");
                }
                if let Some(audit) = audit {
                    let _ = audit.append(edit_entry(
                        "config_edit_rolled_back",
                        ask_id,
                        uid,
                        edit,
                        None,
                    ));
                }
            }
            Err(error) => {
                tracing::error!(%error, file = %edit.file.display(), added = ?edit.added, "allow always: the decision was not recorded and the edit cannot be rolled back: remove the added rules by hand");
            }
        }
    }

    /// Records a grant; returns its id (`None`: the session is gone).
    pub(in crate::session) fn add_grant(
        &self,
        state: &mut State,
        session: &str,
        rules: Vec<Rule>,
        from_ask: String,
        uid: u32,
        broader_than_suggested: Vec<String>,
    ) -> Option<String> {
        state.next_id += 1;
        let id = format!("g{}.{}", state.epoch, state.next_id);
        let node = state.tree.get_mut(session)?;
        node.grants.push(Grant {
            id: id.clone(),
            rules,
            from_ask,
            granted_by_uid: uid,
            broader_than_suggested,
        });
        recompile_grants(node);
        state.mark_session(session);
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
        state.mark_session(session);
        Ok(())
    }

    /// After a grant, asks waiting at or below `session` are judged again:
    /// the ones it covers are answered by it. A chunk at a time, each under
    /// the lock and committed (logged, then delivered) when the lock is
    /// released: the first covered reader is answered after one chunk, and
    /// other asks wait for one chunk at most. An ask decided, withdrawn or
    /// ended meanwhile is skipped; a grant revoked meanwhile covers nothing.
    /// At most `chunks` chunks; true when asks were left for later.
    pub(in crate::session) fn rewalk_pending_at(&self, session: &str, chunks: usize) -> bool {
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
            crate::session::authority::commit::after_release(&self.state, released);
        }
        left_for_later
    }
}

/// An `allow always` edit of the global config, prepared before anything
/// is written: the file, its text before and after, the lines added.
pub(in crate::session) struct AlwaysEdit {
    file: std::path::PathBuf,
    before: String,
    after: String,
    added: Vec<String>,
}

/// The audit line of a config edit: what file, which lines, the digests
/// of the text before and after (so the log pins the exact content), and
/// who decided it for which ask.
fn edit_entry(
    event: &str,
    ask_id: &str,
    uid: u32,
    edit: &AlwaysEdit,
    error: Option<&str>,
) -> serde_json::Map<String, serde_json::Value> {
    let mut entry = serde_json::Map::new();
    entry.insert("time".into(), crate::session::tree::ask::now_ms().into());
    entry.insert("event".into(), event.into());
    entry.insert("askId".into(), ask_id.into());
    entry.insert("uid".into(), uid.into());
    entry.insert("file".into(), edit.file.display().to_string().into());
    entry.insert("added".into(), serde_json::json!(edit.added));
    entry.insert(
        "sha256Before".into(),
        crate::session::observe::audit::sha256_hex(edit.before.as_bytes()).into(),
    );
    entry.insert(
        "sha256After".into(),
        crate::session::observe::audit::sha256_hex(edit.after.as_bytes()).into(),
    );
    if let Some(error) = error {
        entry.insert("error".into(), error.into());
    }
    entry
}

/// Writes a config edit's audit line now (under the state lock: `allow
/// always` is rare, and the ask must not be decided meanwhile). `Err`
/// with the reason and errno when it cannot be written; a daemon without
/// an audit log (library use) records nothing and goes on.
fn audit_edit(
    state: &State,
    event: &str,
    ask_id: &str,
    uid: u32,
    edit: &AlwaysEdit,
    error: Option<&str>,
) -> Result<(), (String, i32)> {
    let Some(audit) = state.audit.as_deref() else {
        return Ok(());
    };
    audit
        .append(edit_entry(event, ask_id, uid, edit, error))
        .map_err(|e| {
            (
                format!("the audit log cannot be written: {e}"),
                e.raw_os_error().unwrap_or(libc::EIO),
            )
        })
}
