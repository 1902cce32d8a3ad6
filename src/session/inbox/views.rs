//! Views: the JSON a mount shows of the authority's state, built under
//! its lock: `session.json`, `rules.json`, an inbox entry as a person
//! `cat`s it, and the `pending` listing of asks below a session. Separate
//! from the authority because they only read its state, and decide nothing.

use crate::facts::request::Request;
use crate::session::authority::commit::lock;
use crate::session::authority::state::State;
use crate::session::authority::Authority;
use crate::session::tree::access::{Caller, Standing};
use crate::session::tree::ask::Ask;
use crate::session::tree::decision::DECISION_FORMS;
use crate::session::tree::grants::{bare_grants, derived_grants, suggested_grants};
use std::time::Instant;

impl Authority {
    /// What a person sees when they `cat` an inbox entry. Holds nothing
    /// that changes while the ask waits except `lastError`, so its size
    /// (shown by `ls -l`) is the bytes a read returns.
    pub fn describe_pending(&self, session: &str, ask_id: &str) -> Option<Vec<u8>> {
        let state = lock(&self.state);
        let ask = state.asks.get(ask_id)?;
        if ask.pending_at.as_deref() != Some(session) || ask.response.is_some() {
            return None;
        }
        let mut view = pending_entry(&state, ask);
        if let serde_json::Value::Object(object) = &mut view {
            object.insert(
                "answer".into(),
                serde_json::json!(format!(
                    "write one of: {}",
                    DECISION_FORMS.trim_start_matches("write ")
                )),
            );
        }
        let mut bytes = serde_json::to_vec_pretty(&view).ok()?;
        bytes.push(b'\n');
        Some(bytes)
    }

    /// Every ask waiting in an inbox at `session` or below it where
    /// `caller` may decide, oldest first: the `pending` listing. Each
    /// entry names the inbox file (relative to `session`'s directory) a
    /// decision goes to. Asks in inboxes `caller` may not decide at are
    /// left out, and only counted (`notShown`). The listing is bounded:
    /// the oldest `limits.pendingShown` entries, and how many more wait
    /// (`more`), so one open never copies thousands of asks.
    pub fn pending_below(&self, session: &str, caller: Caller) -> Option<serde_json::Value> {
        let state = lock(&self.state);
        state.tree.get(session)?;
        let prefix = format!("{session}/");
        let now = crate::session::tree::ask::now_ms();
        let mut waiting: Vec<(u64, u64, &Ask, &str)> = Vec::new();
        let mut hidden = 0usize;
        for id in &state.pending {
            let Some(ask) = state.asks.get(id) else {
                continue;
            };
            let Some(at) = ask.pending_at.as_deref() else {
                continue;
            };
            if ask.response.is_some() || (at != session && !at.starts_with(&prefix)) {
                continue;
            }
            let may = state
                .tree
                .get(at)
                .is_some_and(|node| Standing::of(caller, node, self.owner_uid).may_decide());
            if !may {
                hidden += 1;
                continue;
            }
            let arrived = ask.arrived_ms.unwrap_or(now);
            let seq = crate::session::tree::ask::serial_of(&ask.id).unwrap_or(0);
            waiting.push((arrived, seq, ask, at));
        }
        waiting.sort_by_key(|(arrived, seq, _, _)| (*arrived, *seq));
        let shown = self.limits.pending_shown.min(waiting.len());
        let more = waiting.len() - shown;
        let mut entries = Vec::with_capacity(shown);
        for (arrived, _, ask, at) in waiting.into_iter().take(shown) {
            let mut entry = pending_entry(&state, ask);
            if let serde_json::Value::Object(object) = &mut entry {
                let relative = at
                    .strip_prefix(&prefix)
                    .map(|below| {
                        below
                            .split('/')
                            .map(|name| format!("children/{name}/"))
                            .collect::<String>()
                    })
                    .unwrap_or_default();
                object.insert(
                    "inbox".into(),
                    serde_json::json!(format!("{relative}inbox/{}", ask.id)),
                );
                object.insert(
                    "ageMs".into(),
                    serde_json::json!(now.saturating_sub(arrived)),
                );
                object.insert(
                    "remainingMs".into(),
                    serde_json::json!(ask
                        .deadline
                        .saturating_duration_since(Instant::now())
                        .as_millis() as u64),
                );
            }
            entries.push(entry);
        }
        Some(serde_json::json!({
            "session": session,
            "now": now,
            "pending": entries,
            "more": more,
            "notShown": hidden,
            // The bound on `pending`: a client that follows `events`
            // knows when a new ask falls beyond the page (into `more`).
            "pageSize": self.limits.pending_shown,
        }))
    }

    /// The principal chain and effective policy of a session, for
    /// `session.json` and `rules.json`.
    pub fn session_view(&self, id: &str) -> Option<serde_json::Value> {
        let state = lock(&self.state);
        let session = state.tree.get(id)?;
        let chain = session.principal_chain(&state.tree);
        Some(serde_json::json!({
            "id": session.id,
            "parent": session.parent,
            "agent": session.agent,
            "cwd": session.cwd,
            "interactive": session.interactive,
            "depth": session.depth,
            "principalChain": chain.iter().map(|(s, a)| serde_json::json!({"sessionId": s, "agentName": a})).collect::<Vec<_>>(),
            "askerUid": session.asker_uid,
            "deciderUid": session.decider_uid,
            "views": session.views.iter().map(|(root, mount)| serde_json::json!({"root": root, "mount": mount})).collect::<Vec<_>>(),
        }))
    }

    pub fn rules_view(&self, id: &str) -> Option<serde_json::Value> {
        let (cwd, agent, grants) = {
            let state = lock(&self.state);
            let session = state.tree.get(id)?;
            (
                session.cwd.clone(),
                session.agent.clone(),
                session.grants.clone(),
            )
        };
        let policy = self.loader.policy(&cwd, agent.as_deref());
        Some(match policy {
            Ok(policy) => serde_json::json!({
                "rules": policy.rules.rules(),
                "grants": grants,
                "issues": policy.issues,
                "failedClosed": policy.failed_closed,
                "sources": policy.sources.iter().map(|(o, p)| serde_json::json!({"origin": o, "file": p})).collect::<Vec<_>>(),
                // Which project layers may widen, and why not: an untrusted
                // one only narrows (its rules are in `narrowingRules`).
                "layerTrust": policy.layers,
                "trustStore": self.loader.trust_store(),
                // The mount point and the state dir: `permfs run` keeps
                // them out of its sandbox.
                "authorityDirs": self.loader.authority_dirs(),
                "narrowingRules": policy.narrowing.as_ref().map(|n| n.rules()),
                "authorizerChain": self.chain_status(&policy.settings.authorizer_chain),
                "yoloMode": policy.settings.yolo,
                "forwardingTimeoutMs": policy.settings.forwarding_timeout_ms,
            }),
            Err(error) => serde_json::json!({"error": error.to_string(), "failedClosed": true}),
        })
    }
}

/// What was asked, as the asker put it (the facts are shown apart).
fn asked_view(request: Option<&Request>) -> serde_json::Value {
    use crate::facts::request::AskForm;
    match request.map(|r| &r.form) {
        Some(AskForm::ToolCall { tool, input }) => {
            serde_json::json!({"tool": tool, "input": input})
        }
        Some(AskForm::Surface { surface, value }) => {
            serde_json::json!({"surface": surface, "value": value})
        }
        Some(AskForm::SurfaceOnly { surface }) => serde_json::json!({"surface": surface}),
        Some(AskForm::Intents(_)) => serde_json::json!({"accessIntent": "pre-fixed facts"}),
        Some(AskForm::Unjudgeable(why)) => serde_json::json!({"unjudgeable": why}),
        None => serde_json::Value::Null,
    }
}

/// One waiting ask as a person sees it: who asks, what, why it reached a
/// person, until when; the asker's message is a field of its own.
fn pending_entry(state: &State, ask: &Ask) -> serde_json::Value {
    let chain = state
        .tree
        .get(&ask.origin)
        .map(|s| s.principal_chain(&state.tree))
        .unwrap_or_default();
    let grants = |pairs: Vec<(String, String)>| {
        pairs
            .into_iter()
            .map(|(surface, pattern)| serde_json::json!({"surface": surface, "pattern": pattern}))
            .collect::<Vec<_>>()
    };
    serde_json::json!({
        "askId": ask.id,
        "at": ask.pending_at,
        "from": ask.origin,
        "agent": ask.agent,
        "request": ask.rid,
        "arrivedAt": ask.arrived_ms,
        "deadlineAt": ask.deadline_ms,
        "asked": asked_view(ask.request.as_ref()),
        "message": ask.request.as_ref().and_then(|r| r.message.clone()),
        "forwarded": ask.request.as_ref().and_then(|r| r.forwarded.as_ref()),
        "principalChain": chain.iter().map(|(s, a)| serde_json::json!({"sessionId": s, "agentName": a})).collect::<Vec<_>>(),
        "facts": ask.facts.intents,
        "hops": ask.hops,
        // What a bare `allow session` records: never an asker's
        // suggestion broader than the derived patterns.
        "suggestedGrants": grants(bare_grants(ask)),
        "askerSuggestedGrants": grants(suggested_grants(ask)),
        "derivedGrants": grants(derived_grants(ask)),
        "lastError": ask.last_error,
        // A built-in guard the facts meet: why this write asks whatever
        // the rules say (a file that runs outside the sandbox: only a
        // person allows it).
        "guard": ask.guarded.as_ref().map(|g| serde_json::json!({
            "pattern": g.pattern,
            "reason": g.reason,
            "onlyAPerson": g.floor,
        })),
        "factsDigest": facts_digest(ask),
    })
}

/// A digest of what a person is shown of an ask and decides on: who asks
/// (session and agent), what was asked, its facts and the asker's message.
/// A decider that sends it back with its decision (`"factsDigest"`) has
/// its decision refused unless the ask it reaches is the one it saw; none
/// of these change while an ask waits.
pub(in crate::session) fn facts_digest(ask: &Ask) -> String {
    let shown = serde_json::json!({
        "askId": ask.id,
        "from": ask.origin,
        "agent": ask.agent,
        "asked": asked_view(ask.request.as_ref()),
        "message": ask.request.as_ref().and_then(|r| r.message.clone()),
        "facts": ask.facts.intents,
    });
    crate::session::observe::audit::sha256_hex(shown.to_string().as_bytes())
}
