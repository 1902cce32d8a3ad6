//! What the authority's state holds of the authorizer chain: the asks
//! under review at a node, the queues of judges attached through the
//! mount, and the jobs for configured judges. Types only, below the state
//! that holds them; running the chain is `review.rs`.

use crate::facts::intent::Family;
use crate::session::chain::JudgeSpec;
use crate::session::tree::ask::AskId;
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

/// An ask going through a node's chain.
#[derive(Debug)]
pub struct Review {
    pub ask_id: AskId,
    pub node: String,
    pub links: Vec<String>,
    pub next: usize,
    pub families: Vec<Family>,
    pub interactive: bool,
    pub trust: Vec<(String, Vec<String>)>,
    pub current: Option<CurrentLink>,
}

#[derive(Debug, Clone)]
pub struct CurrentLink {
    pub review_id: String,
    pub link: String,
    pub deadline: Instant,
}

/// A parked `read` of `judges/<name>/next`: returns false when its caller
/// went away, so the review is handed to someone else.
pub type JudgeReader = Box<dyn FnOnce(&[u8]) -> bool + Send>;

#[derive(Default)]
pub struct AttachedJudge {
    pub queue: VecDeque<String>,
    pub readers: Vec<JudgeReader>,
    /// Open handles on the judge's `lease` file. When a judge that took a
    /// lease closes the last one (or dies, and the kernel closes it), the
    /// judge has gone away.
    pub leases: usize,
}

impl std::fmt::Debug for AttachedJudge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttachedJudge")
            .field("queue", &self.queue)
            .field("readers", &self.readers.len())
            .finish()
    }
}

/// A review for a configured judge, for `review::serve_reviews`.
pub struct ReviewJob {
    pub review_id: String,
    pub link: String,
    pub spec: Arc<JudgeSpec>,
    pub payload: Value,
    /// When the review defers anyway (set when it was queued): a judge
    /// started late gets only what is left.
    pub deadline: Instant,
}
