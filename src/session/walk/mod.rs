//! The walk: an ask raised at a session is judged there, on its fixed
//! facts, for every agent on the asker's spawn chain, and climbs to the
//! parent until a node allows or denies it or an adjudicating node hands
//! it to its chain (judges, then a person or nobody). Separate from the
//! authority because judging at a node and climbing is one concept apart
//! from inboxes, decisions and answers; those call back into it
//! (`judge_at`, `agents_for`, `decided_by_for`) to re-judge an ask that
//! waits after a grant is added.

pub mod review;

use crate::engine::{judge, Judgment};
use crate::facts::intent::Principal;
use crate::facts::request::{Request, Requester};
use crate::policy::{Origin, PermissionState, RuleLayer};
use crate::session::authority::commit::lock;
use crate::session::authority::state::{finish, State};
use crate::session::authority::{Authority, AuthorityError};
use crate::session::tree::ask::{Ask, AskId, DecidedBy, Hop, Outcome};
use crate::session::tree::{is_valid_name, SessionTree};
use std::sync::Arc;
use std::time::{Duration, Instant};

impl Authority {
    pub(super) fn raise(
        &self,
        session: &str,
        rid: &str,
        parsed: Result<Request, String>,
        request_len: u64,
    ) -> Result<AskId, AuthorityError> {
        if !is_valid_name(rid) {
            return Err(AuthorityError::Invalid(format!(
                "{rid:?} is not a valid request name"
            )));
        }
        // What the ask needs of its session, not the session (its
        // children and grants need no copy per ask).
        let Some((origin_id, agent, cwd, place)) = lock(&self.state).tree.get(session).map(|s| {
            (
                s.id.clone(),
                s.agent.clone(),
                s.cwd.clone(),
                Arc::clone(&s.canonical_cwd),
            )
        }) else {
            return Err(AuthorityError::NotFound(format!("no session {session:?}")));
        };
        // Facts touch the filesystem (symlinks): fix them outside the lock.
        let requester = Requester::of_session(
            &place,
            Principal {
                session_id: origin_id.clone(),
                agent_name: agent.clone(),
            },
        );
        let fixed = match parsed {
            Ok(request) => {
                let facts = asker_facts(&requester, &request.form);
                Ok((request, facts))
            }
            Err(reason) => Err(reason),
        };
        self.raise_fixed(session, rid, fixed, (origin_id, agent, cwd), request_len)
    }

    /// [`Self::raise`] with the facts already fixed (the enforcement view
    /// fixes them from the path it serves, without touching the
    /// filesystem again).
    pub(super) fn raise_fixed(
        &self,
        session: &str,
        rid: &str,
        fixed: Result<(Request, crate::facts::request::FactSet), String>,
        (origin_id, agent, cwd): (String, Option<String>, String),
        request_len: u64,
    ) -> Result<AskId, AuthorityError> {
        let (mut request, mut facts, mut invalid) = match fixed {
            Ok((request, facts)) => (Some(request), facts, None),
            Err(reason) => (None, Default::default(), Some(reason)),
        };
        let timeout = self
            .loader
            .policy(&cwd, agent.as_deref())
            .map(|p| p.settings.forwarding_timeout_ms)
            .unwrap_or(crate::policy::layers::DEFAULT_FORWARDING_TIMEOUT_MS);
        let chain_cwds = chain_cwds(&lock(&self.state).tree, session);
        let guarded = self.guard_met(&chain_cwds, &facts);
        let mut state = lock(&self.state);
        if state.tree.get(session).is_none() {
            return Err(AuthorityError::NotFound(format!(
                "session {session:?} ended"
            )));
        }
        let key = (session.to_string(), rid.to_string());
        if state.outboxes.contains_key(&key) {
            return Err(AuthorityError::Exists(format!("request {rid:?} exists")));
        }
        // Past a bound the ask is answered `invalid` with the reason (so
        // the asker can read it) and the write fails `ENOSPC`.
        let bound = if invalid.is_none() {
            self.pending_bound(&state, &origin_id)
        } else {
            None
        };
        if let Some(reason) = &bound {
            tracing::warn!(%session, %rid, %reason, "ask refused");
            invalid = Some(reason.clone());
            request = None;
            facts = Default::default();
        }
        state.next_id += 1;
        // `<epoch>.<serial>-<rid>`: unique across the daemon's lifetimes
        // (`epoch.rs`); `ask::serial_of` reads the serial back.
        let ask_id = format!("{}.{}-{}", state.epoch, state.next_id, rid);
        let now = Instant::now();
        state.asks.insert(
            ask_id.clone(),
            Box::new(Ask {
                id: ask_id.clone(),
                origin: origin_id.clone(),
                rid: rid.to_string(),
                agent,
                judged_for: Vec::new(),
                request,
                facts,
                hops: Vec::new(),
                pending_at: None,
                response: None,
                waiters: Vec::new(),
                created: now,
                deadline: now + Duration::from_millis(timeout),
                arrived_ms: None,
                last_error: None,
                deadline_ms: crate::session::tree::ask::now_ms() + timeout,
                retained: 0,
                read: false,
                request_len,
                restored_target: None,
                guarded,
            }),
        );
        state.outboxes.insert(key, ask_id.clone());
        state.pending.insert(ask_id.clone());
        state.mark_ask(&ask_id);
        *state
            .pending_by_origin
            .entry(origin_id.clone())
            .or_default() += 1;
        *state
            .pending_by_root
            .entry(crate::session::tree::limits::root_of(&origin_id).to_string())
            .or_default() += 1;
        let deadline = now + Duration::from_millis(timeout);
        if state.next_deadline.is_none_or(|next| deadline < next) {
            state.next_deadline = Some(deadline);
        }
        if let Some(reason) = invalid {
            finish(
                &mut state,
                &ask_id,
                Outcome::Invalid,
                DecidedBy::Invalid {
                    reason: reason.clone(),
                },
                Some(reason.clone()),
                None,
            );
            if bound.is_some() {
                return Err(AuthorityError::Full(reason));
            }
            return Err(AuthorityError::Invalid(reason));
        }
        self.walk(&mut state, &ask_id, &origin_id);
        Ok(ask_id)
    }

    /// Judges the ask at `start` and climbs until something answers or an
    /// interactive node takes it into its inbox.
    pub(super) fn walk(&self, state: &mut State, ask_id: &str, start: &str) {
        let mut node_id = start.to_string();
        // The agents judged for are the asker's spawn chain: the same at
        // every hop, so found once.
        let agents = match state.asks.get_mut(ask_id) {
            Some(ask) => {
                ask.judged_for = agents_for(&state.tree, &ask.origin);
                ask.judged_for.clone()
            }
            None => return,
        };
        loop {
            let Some(ask) = state.asks.get(ask_id) else {
                return;
            };
            let Some(node) = state.tree.get(&node_id) else {
                finish(
                    state,
                    ask_id,
                    Outcome::Deny,
                    DecidedBy::GateError {
                        reason: format!("session {node_id:?} vanished"),
                    },
                    None,
                    None,
                );
                return;
            };
            let mut families = Vec::new();
            let (verdict, decided_by, reason) = match self.judge_at(node, &agents, ask) {
                Ok(judgment) => {
                    let by = decided_by_for(&judgment);
                    families = asking_families(&judgment);
                    (judgment.state, by, judgment.reason().map(str::to_string))
                }
                Err(error) => (
                    PermissionState::Deny,
                    DecidedBy::GateError { reason: error },
                    None,
                ),
            };
            let node_name = node.id.clone();
            let interactive = node.interactive;
            let parent = node.parent.clone();
            if let Some(ask) = state.asks.get_mut(ask_id) {
                ask.hops.push(Hop {
                    session: node_name.clone(),
                    verdict,
                    decided_by: decided_by.clone(),
                });
            }
            match verdict {
                PermissionState::Allow => {
                    finish(
                        state,
                        ask_id,
                        Outcome::Allow,
                        decided_by,
                        None,
                        Some(node_name),
                    );
                    return;
                }
                PermissionState::Deny => {
                    finish(
                        state,
                        ask_id,
                        Outcome::Deny,
                        decided_by,
                        reason,
                        Some(node_name),
                    );
                    return;
                }
                PermissionState::Ask => match parent {
                    Some(parent) if !interactive => node_id = parent,
                    // This node adjudicates: its chain reviews first, then a
                    // person (interactive) or nobody (`no_decider`).
                    _ => {
                        self.start_chain(state, ask_id, &node_name, families, interactive);
                        return;
                    }
                },
            }
        }
    }

    /// The node's recorded authority on the fixed facts, for every agent
    /// on the chain: the most restrictive judgment (first on a tie).
    pub(super) fn judge_at(
        &self,
        node: &crate::session::tree::Session,
        agents: &[Option<String>],
        ask: &Ask,
    ) -> Result<Judgment, String> {
        self.judge_facts_at(node, agents, &ask.facts)
    }

    /// [`Self::judge_at`] for facts that are not (yet) an ask's.
    pub(super) fn judge_facts_at(
        &self,
        node: &crate::session::tree::Session,
        agents: &[Option<String>],
        facts: &crate::facts::request::FactSet,
    ) -> Result<Judgment, String> {
        let mut worst: Option<Judgment> = None;
        for agent in agents {
            let policy = self
                .loader
                .policy(&node.cwd, agent.as_deref())
                .map_err(|e| format!("policy for {:?} cannot be compiled: {e}", node.id))?;
            // The guard list last (no grant outranks it); an untrusted
            // project layer only narrows.
            let judgment =
                crate::engine::judge_with_policy(&policy, Some(&node.compiled_grants), facts)
                    .map_err(|e| format!("rules cannot be evaluated: {e}"))?;
            if worst.as_ref().is_none_or(|w| judgment.state > w.state) {
                worst = Some(judgment);
            }
        }
        worst.ok_or_else(|| "no agent to judge for".into())
    }

    /// A dry run at `session`: the verdict its recorded authority gives the
    /// request now, with every rule that matched. Changes nothing; the
    /// answer goes back to the caller alone (the mount keeps it per open
    /// file, so nobody reads or overwrites another's dry run).
    pub fn query(&self, session: &str, text: &str) -> Result<Vec<u8>, AuthorityError> {
        let (cwd, canonical_cwd, agent, principal, grants) = {
            let state = lock(&self.state);
            let s = state
                .tree
                .get(session)
                .ok_or_else(|| AuthorityError::NotFound(format!("no session {session:?}")))?;
            let principal = Principal {
                session_id: s.id.clone(),
                agent_name: s.agent.clone(),
            };
            (
                s.cwd.clone(),
                Arc::clone(&s.canonical_cwd),
                s.agent.clone(),
                principal,
                Arc::clone(&s.compiled_grants),
            )
        };
        let request = Request::parse(text).map_err(|e| AuthorityError::Invalid(e.0))?;
        let facts = asker_facts(
            &Requester::of_session(&canonical_cwd, principal),
            &request.form,
        );
        let policy = self
            .loader
            .policy(&cwd, agent.as_deref())
            .map_err(|e| AuthorityError::Invalid(format!("policy cannot be compiled: {e}")))?;
        let stack = crate::engine::stack_for(&policy, Some(&grants), &facts)
            .map_err(|e| AuthorityError::Invalid(format!("rules cannot be evaluated: {e}")))?;
        let (_, explanation) = crate::engine::explain(&stack, &facts)
            .map_err(|e| AuthorityError::Invalid(format!("rules cannot be evaluated: {e}")))?;
        let answer = serde_json::json!({
            "session": session,
            "agent": agent,
            "dryRun": true,
            "facts": facts.intents,
            "verdict": explanation,
            "grantsConsulted": grants.rules(),
            "policyIssues": policy.issues,
            "layers": policy.sources.iter().map(|(o, p)| serde_json::json!({"origin": o, "file": p})).collect::<Vec<_>>(),
            "layerTrust": policy.layers,
        });
        let mut bytes = serde_json::to_vec_pretty(&answer)
            .map_err(|e| AuthorityError::Invalid(format!("dry run cannot be shown: {e}")))?;
        bytes.push(b'\n');
        Ok(bytes)
    }
}

impl Authority {
    /// The built-in guard these facts meet at any of `cwds` (the asker's
    /// and every ancestor's: each guards its own project layers), judged
    /// on the guard lists alone. A guard that cannot be compiled or
    /// evaluated guards everything (fail closed). A deny guard on the
    /// authority comes first; failing one, the outside-the-sandbox floor
    /// (`floor: true`: only a person may allow).
    pub(super) fn guard_met(
        &self,
        cwds: &[String],
        facts: &crate::facts::request::FactSet,
    ) -> Option<crate::session::tree::ask::Guarded> {
        for cwd in cwds {
            let policy = match self.loader.policy(cwd, None) {
                Ok(policy) => policy,
                Err(error) => {
                    return Some(crate::session::tree::ask::Guarded {
                        pattern: "*".into(),
                        reason: format!("permfs: the built-in guards for {cwd} cannot be compiled ({error}), so nothing may be allowed"),
                        floor: false,
                    })
                }
            };
            match judge(&[&policy.guard], facts) {
                Ok(judgment) if judgment.state == PermissionState::Deny => {
                    let check = judgment.deciding_check();
                    return Some(crate::session::tree::ask::Guarded {
                        pattern: check
                            .and_then(|c| c.matched_pattern.clone())
                            .unwrap_or_default(),
                        reason: check
                            .and_then(|c| c.reason.clone())
                            .unwrap_or_else(|| "permfs: a built-in guard on the authority".into()),
                        floor: false,
                    });
                }
                Ok(_) => {}
                Err(error) => {
                    return Some(crate::session::tree::ask::Guarded {
                        pattern: "*".into(),
                        reason: format!("permfs: the built-in guards cannot be evaluated ({error}), so nothing may be allowed"),
                        floor: false,
                    })
                }
            }
        }
        // The outside-the-sandbox floor is one table for every cwd (only
        // the global config lowers it), so the asker's policy says it.
        let cwd = cwds.first()?;
        match self.loader.policy(cwd, None) {
            Ok(policy) => policy
                .outside
                .met(facts)
                .map(|met| crate::session::tree::ask::Guarded {
                    pattern: met.pattern,
                    reason: met.reason,
                    floor: true,
                }),
            Err(_) => None,
        }
    }
}

/// The facts of `form` as the process that asked sees the filesystem
/// (ADR 0008: the child owns the facts). A sandboxed asker's paths are
/// resolved in its own mount namespace, through its root; when that
/// cannot be looked at, facts that touch the filesystem are unusable and
/// the ask floors to `ask` (a bash line or surface that names no path
/// does not depend on it).
pub(super) fn asker_facts(
    requester: &Requester,
    form: &crate::facts::request::AskForm,
) -> crate::facts::request::FactSet {
    use crate::facts::fence::{asker_view, within_asker_root, AskerView};
    use crate::facts::intent::Family;
    match asker_view() {
        AskerView::Daemon => requester.facts(form),
        AskerView::Root(root) => within_asker_root(Some(&root), || requester.facts(form)),
        AskerView::Unavailable(why) => {
            let mut facts = requester.facts(form);
            let touches_files = facts.intents.iter().any(|i| {
                matches!(
                    Family::of(&i.surface),
                    Family::Path | Family::ExternalDirectory
                )
            });
            if touches_files && facts.unusable.is_none() {
                tracing::warn!(%why, "an ask's paths cannot be seen as its asker sees them: floored to ask");
                facts.unusable = Some(why);
            }
            facts
        }
    }
}

/// The cwds of `session` and every session above it, each once: where
/// the built-in guards of the chain's project layers are looked for
/// (`Authority::guard_met`). Empty for no such session.
pub(super) fn chain_cwds(tree: &SessionTree, session: &str) -> Vec<String> {
    let mut cwds: Vec<String> = Vec::new();
    let mut cursor = tree.get(session);
    while let Some(node) = cursor {
        if !cwds.contains(&node.cwd) {
            cwds.push(node.cwd.clone());
        }
        cursor = node.parent.as_ref().and_then(|p| tree.get(p));
    }
    cwds
}

/// The agents every node judges an ask for: the asking session's own,
/// then the agent of each session above it on its spawn chain (sessions
/// with no agent add nothing). The most restrictive judgment wins, so a
/// session cannot gain anywhere, not even at its own node, by being
/// spawned under a more privileged agent's name: a spawner never lends a
/// child more than the agents above it have. This covers the brief's rule
/// (at a node, every agent on the chain below it) and closes the gap it
/// leaves at the lower nodes.
pub(super) fn agents_for(tree: &SessionTree, origin: &str) -> Vec<Option<String>> {
    let mut agents: Vec<Option<String>> = Vec::new();
    let mut cursor = tree.get(origin);
    while let Some(session) = cursor {
        let is_origin = session.id == origin;
        if (is_origin || session.agent.is_some()) && !agents.contains(&session.agent) {
            agents.push(session.agent.clone());
        }
        cursor = session.parent.as_ref().and_then(|p| tree.get(p));
    }
    agents
}

/// The families of the checks that left this ask unresolved here: what the
/// chain's checkpoint looks at.
fn asking_families(judgment: &Judgment) -> Vec<crate::facts::intent::Family> {
    let mut families: Vec<_> = judgment
        .checks
        .iter()
        .filter(|c| c.counted && c.state != PermissionState::Allow)
        .map(|c| c.family)
        .collect();
    families.dedup();
    families
}

pub(super) fn decided_by_for(judgment: &Judgment) -> DecidedBy {
    if let Some(why) = &judgment.unjudgeable {
        return DecidedBy::Escalated {
            reason: why.clone(),
        };
    }
    match judgment.deciding_check() {
        Some(check) if check.layer == RuleLayer::Session => DecidedBy::SessionApproval {
            surface: check.rule_surface.clone(),
            pattern: check.matched_pattern.clone(),
            command: check.command.clone(),
            word: check.word.clone(),
        },
        Some(check) if check.origin == Origin::Yolo => DecidedBy::Yolo {
            pattern: check.matched_pattern.clone(),
            command: check.command.clone(),
            word: check.word.clone(),
        },
        Some(check) => DecidedBy::Rule {
            surface: check.surface.clone(),
            pattern: check.matched_pattern.clone(),
            origin: check.origin,
            command: check.command.clone(),
            word: check.word.clone(),
        },
        None => DecidedBy::Escalated {
            reason: "no surface to judge".into(),
        },
    }
}
