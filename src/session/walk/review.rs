//! Running the authorizer chain at the node that adjudicates an ask.
//!
//! A review for a configured judge is a job on a channel; [`serve_reviews`]
//! runs each on its own thread (at most [`MAX_RUNNING_REVIEWS`] at once),
//! so a judge that hangs holds only its own review, and only until its
//! timeout. A review for a judge attached through the mount waits in that
//! judge's queue until it reads `next`, holding no thread. Either way the
//! verdict comes back through [`Authority::link_verdict`], and the walk
//! goes on from there.

use crate::facts::intent::Family;
use crate::policy::PermissionState;
use crate::session::authority::commit::lock;
use crate::session::authority::state::{finish, publish, publish_below, State};
use crate::session::authority::{Authority, AuthorityError};
use crate::session::chain::reviews::{AttachedJudge, CurrentLink, JudgeReader, Review, ReviewJob};
use crate::session::chain::{checkpoint, run_judge, JudgeSpec, LinkVerdict, DEFAULT_LINK_TIMEOUT};
use crate::session::tree::ask::{DecidedBy, Hop, Outcome};
use crate::session::tree::is_valid_name;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Most command-judge reviews running at once (a thread and a process
/// group each). Past it a review waits in the queue, still bounded by its
/// own deadline (it defers when that passes).
pub const MAX_RUNNING_REVIEWS: usize = 64;

/// Runs reviews for configured judges until `stop`: each on a thread of
/// its own, so one stuck judge never delays another judge's review (the
/// old pool of two let two stuck judges starve every other review into
/// `defer`). A thread per review is proportionate: each review starts a
/// process anyway, and the thread ends with it, by the judge's timeout.
pub fn serve_reviews(authority: Arc<Authority>, stop: Arc<AtomicBool>) {
    let running = Arc::new((Mutex::new(0usize), Condvar::new()));
    while !stop.load(Ordering::Relaxed) {
        let Some(job) = authority.next_job(Duration::from_millis(100)) else {
            continue;
        };
        {
            let (count, freed) = &*running;
            let mut count = count.lock().unwrap_or_else(|p| p.into_inner());
            while *count >= MAX_RUNNING_REVIEWS && !stop.load(Ordering::Relaxed) {
                count = freed
                    .wait_timeout(count, Duration::from_millis(100))
                    .map(|(guard, _)| guard)
                    .unwrap_or_else(|p| p.into_inner().0);
            }
            *count += 1;
        }
        let slot = ReviewSlot(Arc::clone(&running));
        let worker = Arc::clone(&authority);
        let spawned = std::thread::Builder::new()
            .name("permfs-judge".into())
            .spawn(move || {
                let _slot = slot;
                worker.run_job(job);
            });
        if let Err(error) = spawned {
            // The review defers when its deadline passes.
            tracing::error!(%error, "cannot start a thread for a judge's review");
        }
    }
}

/// A running review's place under [`MAX_RUNNING_REVIEWS`], given back when
/// its thread ends (also if it panicked).
struct ReviewSlot(Arc<(Mutex<usize>, Condvar)>);

impl Drop for ReviewSlot {
    fn drop(&mut self) {
        let (count, freed) = &*self.0;
        let mut count = count.lock().unwrap_or_else(|p| p.into_inner());
        *count = count.saturating_sub(1);
        freed.notify_one();
    }
}

fn ask_of(review_id: &str) -> &str {
    review_id
        .rsplit_once('#')
        .map(|(ask, _)| ask)
        .unwrap_or(review_id)
}

impl Authority {
    /// Starts the chain of the node that adjudicates the ask.
    pub(in crate::session) fn start_chain(
        &self,
        state: &mut State,
        ask_id: &str,
        node: &str,
        families: Vec<Family>,
        interactive: bool,
    ) {
        let (cwd, agent) = match (state.asks.get(ask_id), state.tree.get(node)) {
            (Some(ask), Some(session)) => (
                session.cwd.clone(),
                state.tree.get(&ask.origin).and_then(|o| o.agent.clone()),
            ),
            _ => return,
        };
        let settings = self
            .loader
            .policy(&cwd, agent.as_deref())
            .map(|p| p.settings.clone());
        let (links, trust) = match settings {
            Ok(settings) => (settings.authorizer_chain, settings.authorizer_trust),
            Err(_) => (Vec::new(), Vec::new()),
        };
        state.reviews.insert(
            ask_id.to_string(),
            Review {
                ask_id: ask_id.to_string(),
                node: node.to_string(),
                links,
                next: 0,
                families,
                interactive,
                trust,
                current: None,
            },
        );
        self.advance(state, ask_id);
    }

    /// Hands the ask to the next link that exists, or to the terminal.
    fn advance(&self, state: &mut State, ask_id: &str) {
        loop {
            let Some(review) = state.reviews.get_mut(ask_id) else {
                return;
            };
            let Some(link) = review.links.get(review.next).cloned() else {
                let review = state.reviews.remove(ask_id);
                self.terminal(state, ask_id, review);
                return;
            };
            review.next += 1;
            let review_id = format!("{ask_id}#{}", review.next);
            let configured = self.judges.get(&link).cloned();
            let attached = state.attached.contains_key(&link);
            let timeout = configured
                .as_ref()
                .map(|s| s.timeout())
                .unwrap_or(DEFAULT_LINK_TIMEOUT);
            let runnable = configured
                .as_ref()
                .filter(|s| !matches!(s.as_ref(), JudgeSpec::Attached { .. }));
            if !attached && runnable.is_none() {
                if state.missing_logged.insert(link.clone()) {
                    tracing::warn!(%link, "authorizerChain names a link that does not exist; skipping it");
                }
                continue;
            }
            let deadline = Instant::now() + timeout;
            review.current = Some(CurrentLink {
                review_id: review_id.clone(),
                link: link.clone(),
                deadline,
            });
            if attached {
                if let Some(judge) = state.attached.get_mut(&link) {
                    judge.queue.push_back(review_id);
                }
                self.deliver(state, &link);
            } else if let Some(spec) = runnable {
                let payload = review_payload(state, ask_id, &link, &review_id);
                let job = ReviewJob {
                    review_id,
                    link,
                    spec: Arc::clone(spec),
                    payload,
                    deadline,
                };
                if self.jobs.0.send(job).is_err() {
                    tracing::error!("the review queue is closed; the link defers");
                }
            }
            return;
        }
    }

    /// Every link deferred: a person decides, or nobody can.
    fn terminal(&self, state: &mut State, ask_id: &str, review: Option<Review>) {
        let Some(review) = review else { return };
        if review.interactive {
            let Some(ask) = state.asks.get_mut(ask_id) else {
                return;
            };
            ask.pending_at = Some(review.node.clone());
            ask.arrived_ms = Some(crate::session::tree::ask::now_ms());
            let event = json!({
                "event": "arrived",
                "askId": ask.id,
                "from": ask.origin,
                "message": ask.request.as_ref().and_then(|r| r.message.clone()),
                "facts": ask.facts.intents,
            });
            publish(state, &review.node, event);
            publish_below(state, &review.node, "arrived", ask_id);
            // Written in its inbox before the asker's write returns.
            state.mark_ask(ask_id);
        } else {
            finish(
                state,
                ask_id,
                Outcome::NoDecider,
                DecidedBy::NoDecider,
                Some("nobody can answer: no interactive session on the way to the root".into()),
                Some(review.node),
            );
        }
    }

    /// A link's verdict on a review (stale verdicts are ignored).
    fn on_verdict(
        &self,
        state: &mut State,
        review_id: &str,
        link: &str,
        verdict: Result<LinkVerdict, String>,
    ) {
        let ask_id = ask_of(review_id).to_string();
        let Some(review) = state.reviews.get_mut(&ask_id) else {
            return;
        };
        let is_current = review
            .current
            .as_ref()
            .is_some_and(|c| c.review_id == review_id && c.link == link);
        if !is_current {
            return;
        }
        // A failure is a `defer` that says why (in the hop and the answer).
        let (verdict, failure) = match verdict {
            Ok(verdict) => (verdict, None),
            Err(error) => {
                tracing::warn!(%link, %error, "authorizer link failed; counting it as defer");
                (LinkVerdict::Defer, Some(error))
            }
        };
        let trusted: Vec<String> = review
            .trust
            .iter()
            .find(|(name, _)| name == link)
            .map(|(_, families)| families.clone())
            .unwrap_or_default();
        let mut effective = checkpoint(verdict.clone(), &review.families, &trusted);
        // A write that runs outside the sandbox is a person's decision: a
        // judge may deny it or pass it on, never allow it.
        let floored = state
            .asks
            .get(&ask_id)
            .and_then(|a| a.guarded.as_ref())
            .is_some_and(|g| g.floor);
        if floored && effective == LinkVerdict::Allow {
            tracing::info!(%link, "a judge's allow of a write that runs outside the sandbox became defer");
            effective = LinkVerdict::Defer;
        }
        if effective != verdict {
            tracing::info!(%link, "enforcement checkpoint: allow on a path family became defer");
        }
        let node = review.node.clone();
        if let Some(current) = review.current.take() {
            if let Some(judge) = state.attached.get_mut(&current.link) {
                judge.queue.retain(|id| id != &current.review_id);
            }
        }
        let decided_by = DecidedBy::Authorizer {
            name: link.to_string(),
            verdict: effective.name().to_string(),
            reason: effective.reason().map(str::to_string).or(failure),
        };
        if let Some(ask) = state.asks.get_mut(&ask_id) {
            ask.hops.push(Hop {
                session: node.clone(),
                verdict: match effective {
                    LinkVerdict::Allow => PermissionState::Allow,
                    LinkVerdict::Deny(_) => PermissionState::Deny,
                    LinkVerdict::Defer => PermissionState::Ask,
                },
                decided_by: decided_by.clone(),
            });
        }
        match effective {
            LinkVerdict::Allow => {
                finish(state, &ask_id, Outcome::Allow, decided_by, None, Some(node))
            }
            LinkVerdict::Deny(reason) => finish(
                state,
                &ask_id,
                Outcome::Deny,
                decided_by,
                reason,
                Some(node),
            ),
            LinkVerdict::Defer => self.advance(state, &ask_id),
        }
    }

    /// Hands queued reviews to parked readers of an attached judge.
    fn deliver(&self, state: &mut State, link: &str) {
        loop {
            let (review_id, reader) = {
                let Some(judge) = state.attached.get_mut(link) else {
                    return;
                };
                let Some(review_id) = judge.queue.front().cloned() else {
                    return;
                };
                if judge.readers.is_empty() {
                    return;
                }
                (review_id, judge.readers.remove(0))
            };
            let payload = review_payload(state, ask_of(&review_id), link, &review_id);
            let mut bytes = serde_json::to_vec_pretty(&payload).unwrap_or_default();
            bytes.push(b'\n');
            if reader(&bytes) {
                if let Some(judge) = state.attached.get_mut(link) {
                    judge.queue.retain(|id| id != &review_id);
                }
            }
        }
    }

    /// The next review for a worker, waiting at most `timeout`.
    pub fn next_job(&self, timeout: Duration) -> Option<ReviewJob> {
        self.jobs.1.recv_timeout(timeout).ok()
    }

    /// Runs a job (on its own thread) and records its verdict. A review
    /// that is over (it timed out in the queue, or its ask ended) starts
    /// no judge; a judge gets what is left of the review's time.
    pub fn run_job(&self, job: ReviewJob) {
        let waiting = {
            let state = lock(&self.state);
            state
                .reviews
                .get(ask_of(&job.review_id))
                .and_then(|r| r.current.as_ref())
                .is_some_and(|c| c.review_id == job.review_id && c.link == job.link)
        };
        let left = job.deadline.saturating_duration_since(Instant::now());
        if !waiting || left.is_zero() {
            return;
        }
        let verdict = run_judge(&job.spec, &job.payload, left);
        let mut state = lock(&self.state);
        self.on_verdict(&mut state, &job.review_id, &job.link, verdict);
    }

    fn operator_only(&self, uid: u32) -> Result<(), AuthorityError> {
        if uid == 0 || uid == self.owner_uid {
            Ok(())
        } else {
            Err(AuthorityError::PermissionDenied(format!(
                "uid {uid} is not the operator; only root or the mount owner may serve as a judge"
            )))
        }
    }

    /// Attaches a judge under `name` (an operator act).
    pub fn attach_judge(&self, name: &str, uid: u32) -> Result<(), AuthorityError> {
        self.operator_only(uid)?;
        if !is_valid_name(name) {
            return Err(AuthorityError::Invalid(format!(
                "{name:?} is not a valid judge name"
            )));
        }
        let mut state = lock(&self.state);
        if state.attached.contains_key(name) {
            return Err(AuthorityError::Exists(format!(
                "judge {name:?} is attached"
            )));
        }
        state
            .attached
            .insert(name.to_string(), AttachedJudge::default());
        state.missing_logged.remove(name);
        tracing::info!(judge = %name, "judge attached");
        Ok(())
    }

    /// Attaches `name` again as a server taking over a connection found it
    /// (`judges.attached`): with `leases` lease handles still open in the
    /// kernel, whose closes arrive here as before. Before the journal is
    /// restored, so a review that was under way at the restart and is
    /// walked again finds its judge.
    pub fn restore_judge(&self, name: &str, leases: usize) {
        if !is_valid_name(name) {
            tracing::warn!(judge = %name, "a kept judge name is not valid: not attached again");
            return;
        }
        let mut state = lock(&self.state);
        let judge = state.attached.entry(name.to_string()).or_default();
        judge.leases = leases;
        state.missing_logged.remove(name);
        tracing::info!(judge = %name, leases, "judge attached by the previous server: kept");
    }

    /// Detaches a judge: its pending reviews count as `defer`.
    pub fn detach_judge(&self, name: &str, uid: u32) -> Result<(), AuthorityError> {
        self.operator_only(uid)?;
        let mut state = lock(&self.state);
        if state.attached.remove(name).is_none() {
            return Err(AuthorityError::NotFound(format!("no judge {name:?}")));
        }
        self.defer_reviews_of(&mut state, name, "the judge detached");
        Ok(())
    }

    fn defer_reviews_of(&self, state: &mut State, link: &str, why: &str) {
        let pending: Vec<String> = state
            .reviews
            .values()
            .filter_map(|r| r.current.as_ref())
            .filter(|c| c.link == link)
            .map(|c| c.review_id.clone())
            .collect();
        for review_id in pending {
            self.on_verdict(state, &review_id, link, Err(why.to_string()));
        }
    }

    pub fn attached_judges(&self) -> Vec<String> {
        lock(&self.state).attached.keys().cloned().collect()
    }

    /// A read of `judges/<name>/next`: the next review now, or `None` with
    /// the reader parked until one comes.
    pub fn judge_next(
        &self,
        name: &str,
        uid: u32,
        reader: JudgeReader,
    ) -> Result<(), AuthorityError> {
        self.operator_only(uid)?;
        let mut state = lock(&self.state);
        let judge = state
            .attached
            .get_mut(name)
            .ok_or_else(|| AuthorityError::NotFound(format!("no judge {name:?}")))?;
        judge.readers.push(reader);
        self.deliver(&mut state, name);
        Ok(())
    }

    /// `judges/<name>/lease` opened: the judge holds a lease while alive.
    pub fn judge_lease_opened(&self, name: &str, uid: u32) -> Result<(), AuthorityError> {
        self.operator_only(uid)?;
        let mut state = lock(&self.state);
        let judge = state
            .attached
            .get_mut(name)
            .ok_or_else(|| AuthorityError::NotFound(format!("no judge {name:?}")))?;
        judge.leases += 1;
        Ok(())
    }

    /// A lease handle closed; the last one means the judge went away: it
    /// is detached and its pending reviews count as `defer`.
    pub fn judge_lease_closed(&self, name: &str) {
        let mut state = lock(&self.state);
        let Some(judge) = state.attached.get_mut(name) else {
            return;
        };
        judge.leases = judge.leases.saturating_sub(1);
        if judge.leases == 0 {
            state.attached.remove(name);
            tracing::info!(judge = %name, "judge went away (its lease closed)");
            self.defer_reviews_of(&mut state, name, "the judge went away");
        }
    }

    /// A verdict written to `judges/<name>/verdict`:
    /// `{"reviewId": "…", "verdict": "allow"|"deny"|"defer", "reason": "…"}`.
    pub fn judge_verdict(&self, name: &str, uid: u32, text: &str) -> Result<(), AuthorityError> {
        self.operator_only(uid)?;
        let value: Value = serde_json::from_str(text)
            .map_err(|e| AuthorityError::Invalid(format!("verdict is not JSON: {e}")))?;
        let review_id = value
            .get("reviewId")
            .and_then(Value::as_str)
            .ok_or_else(|| AuthorityError::Invalid("a verdict needs its \"reviewId\"".into()))?
            .to_string();
        let verdict = LinkVerdict::from_json(&value).map_err(AuthorityError::Invalid)?;
        let mut state = lock(&self.state);
        if !state.attached.contains_key(name) {
            return Err(AuthorityError::NotFound(format!("no judge {name:?}")));
        }
        let current = state
            .reviews
            .get(ask_of(&review_id))
            .and_then(|r| r.current.as_ref())
            .is_some_and(|c| c.review_id == review_id && c.link == name);
        if !current {
            return Err(AuthorityError::AlreadyDecided(format!(
                "review {review_id:?} is not waiting for {name:?}"
            )));
        }
        self.on_verdict(&mut state, &review_id, name, Ok(verdict));
        Ok(())
    }

    /// Reviews past their link's timeout count as `defer`.
    pub(in crate::session) fn expire_reviews(&self, state: &mut State, now: Instant) {
        let stale: Vec<(String, String, &'static str)> = state
            .reviews
            .values()
            .filter_map(|r| r.current.as_ref())
            .filter_map(|c| {
                if c.deadline <= now {
                    Some((
                        c.review_id.clone(),
                        c.link.clone(),
                        "the link did not answer in time",
                    ))
                } else {
                    None
                }
            })
            .collect();
        for (review_id, link, why) in stale {
            self.on_verdict(state, &review_id, &link, Err(why.to_string()));
        }
    }

    /// What each configured link is, for `rules.json`.
    pub fn chain_status(&self, links: &[String]) -> Vec<Value> {
        let state = lock(&self.state);
        links
            .iter()
            .map(|link| {
                let kind = if state.attached.contains_key(link) {
                    "attached"
                } else {
                    match self.judges.get(link).map(|s| s.as_ref()) {
                        Some(JudgeSpec::Command { .. }) => "command",
                        Some(JudgeSpec::TypoPath { .. }) => "typo-path",
                        Some(JudgeSpec::Attached { .. }) | None => "missing (skipped)",
                    }
                };
                json!({"name": link, "status": kind})
            })
            .collect()
    }
}

/// What a judge sees: the fixed facts, who asks, the hops so far.
fn review_payload(state: &State, ask_id: &str, link: &str, review_id: &str) -> Value {
    let Some(ask) = state.asks.get(ask_id) else {
        return json!({"reviewId": review_id, "link": link});
    };
    let chain = state
        .tree
        .get(&ask.origin)
        .map(|s| s.principal_chain(&state.tree))
        .unwrap_or_default();
    json!({
        "reviewId": review_id,
        "link": link,
        "askId": ask.id,
        "from": ask.origin,
        "message": ask.request.as_ref().and_then(|r| r.message.clone()),
        "principalChain": chain.iter().map(|(s, a)| json!({"sessionId": s, "agentName": a})).collect::<Vec<_>>(),
        "facts": ask.facts.intents,
        "hops": ask.hops,
        "answer": "write {\"reviewId\": …, \"verdict\": \"allow\"|\"deny\"|\"defer\", \"reason\": …} to verdict",
    })
}
