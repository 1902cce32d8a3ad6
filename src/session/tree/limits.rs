//! Bounds on what one asker can make the daemon hold (issue 23, item 6),
//! configurable in the global config's `"limits"` object.
//!
//! Without them a sandbox could spawn a 600-deep chain of long names (each
//! session id is the whole path: 314 MB in under a second), 20,000
//! children, or a thousand pending 60 KB asks, and one open of `pending`
//! copied them all. Every bound is per session or per root session's tree
//! (everything a sandbox can make lies under the session bound into it,
//! so under one root): past a bound the call fails `ENOSPC` and the reason
//! names the bound and its config key (in the response of a refused ask,
//! in the daemon's log for a refused spawn).
//!
//! `viewNodes` bounds one enforcement view's node table (issue 34, item
//! 5): the names a sandbox's kernel holds in its view, each a node in the
//! daemon (`src/view/nodes.rs`).
//!
//! Only the global config sets limits: an agent-writable project layer
//! must not raise them.

use serde_json::Value;

/// The bounds in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Deepest session (a root is depth 0): `depth`.
    pub depth: usize,
    /// Children one session may have at once: `children`.
    pub children: usize,
    /// Sessions one root's tree may hold, the root included: `sessions`.
    pub sessions: usize,
    /// Asks one session may have waiting at once: `pendingAsks`.
    pub pending_asks: usize,
    /// Asks one root's tree may have waiting at once: `treePendingAsks`.
    pub tree_pending_asks: usize,
    /// Entries the `pending` listing shows (the oldest; the rest are
    /// counted in `more`): `pendingShown`.
    pub pending_shown: usize,
    /// Bytes of unsubmitted request files one session's pi view may hold:
    /// `piDraftBytes`.
    pub pi_draft_bytes: usize,
    /// The same for every pi view in one root's tree: `treePiDraftBytes`.
    pub tree_pi_draft_bytes: usize,
    /// Bytes of one request (an outbox request, an exchange, a pi
    /// request file): `requestBytes`. Its facts, kept while it waits and
    /// shown in every inbox it reaches, grow with it.
    pub request_bytes: usize,
    /// Answered asks of one session kept for their asker to read:
    /// `retainedAnswers`.
    pub retained_answers: usize,
    /// The same for one root's tree, by count and by bytes (as
    /// `retention.rs` accounts them): `treeRetainedAnswers`,
    /// `treeRetainedBytes`. Half the global bytes bound (48 MiB): one
    /// tree's flood of answers drops its own oldest, and the global bound
    /// is reached only when several trees are full (then the fullest
    /// gives up its oldest).
    pub tree_retained_answers: usize,
    pub tree_retained_bytes: usize,
    /// Nodes (names the kernel holds) one enforcement view may hold:
    /// `viewNodes`. A view gives every name the sandbox looks up a node
    /// (about 300 bytes and its name twice: 690 bytes with 200-byte
    /// names, BENCHMARKS.md "View bounds") for as long as the kernel
    /// caches the name, so a sandbox that makes and keeps names would
    /// otherwise grow the daemon without end; past the bound a name the
    /// view does not know yet is refused `ENOSPC`. The default keeps one
    /// view near the rest of one asker's worst case here (262,000 names of
    /// 255 bytes: 217 MiB over the server's start, measured), and is
    /// above what `git status` or a build
    /// holds in most trees (a repository of 100,000 files holds 100,000);
    /// an operator whose sandboxes walk larger trees raises it. Per view:
    /// the views of a run are the person's choice, not the sandbox's.
    pub view_nodes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            depth: 32,
            children: 256,
            sessions: 1024,
            pending_asks: 256,
            tree_pending_asks: 256,
            pending_shown: 100,
            pi_draft_bytes: 1 << 20,
            tree_pi_draft_bytes: 8 << 20,
            request_bytes: 64 << 10,
            retained_answers: 8192,
            tree_retained_answers: 16_384,
            tree_retained_bytes: 24 << 20,
            view_nodes: 1 << 18,
        }
    }
}

/// The config keys, with the field each sets.
const KEYS: &[&str] = &[
    "depth",
    "children",
    "sessions",
    "pendingAsks",
    "treePendingAsks",
    "pendingShown",
    "piDraftBytes",
    "treePiDraftBytes",
    "requestBytes",
    "retainedAnswers",
    "treeRetainedAnswers",
    "treeRetainedBytes",
    "viewNodes",
];

impl Limits {
    /// The global config's `"limits"` (absent: the defaults). Each value is
    /// a positive integer; an unknown key is an error, so a typo does not
    /// silently leave a bound at its default.
    pub fn parse(value: Option<&Value>) -> Result<Self, String> {
        let mut limits = Self::default();
        let Some(value) = value else {
            return Ok(limits);
        };
        let object = value
            .as_object()
            .ok_or("\"limits\" must be an object of positive integers")?;
        for (key, value) in object {
            let n = value
                .as_u64()
                .filter(|n| *n >= 1)
                .and_then(|n| usize::try_from(n).ok())
                .ok_or(format!("limits.{key} must be a positive integer"))?;
            match key.as_str() {
                "depth" => limits.depth = n,
                "children" => limits.children = n,
                "sessions" => limits.sessions = n,
                "pendingAsks" => limits.pending_asks = n,
                "treePendingAsks" => limits.tree_pending_asks = n,
                "pendingShown" => limits.pending_shown = n,
                "piDraftBytes" => limits.pi_draft_bytes = n,
                "treePiDraftBytes" => limits.tree_pi_draft_bytes = n,
                "requestBytes" => limits.request_bytes = n,
                "retainedAnswers" => limits.retained_answers = n,
                "treeRetainedAnswers" => limits.tree_retained_answers = n,
                "treeRetainedBytes" => limits.tree_retained_bytes = n,
                "viewNodes" => limits.view_nodes = n,
                unknown => {
                    return Err(format!(
                        "limits: {}",
                        crate::policy::config::unknown_key_message("key", unknown, KEYS)
                    ))
                }
            }
        }
        Ok(limits)
    }
}

/// The root session of `session` (the first component of its id).
pub fn root_of(session: &str) -> &str {
    session.split('/').next().unwrap_or(session)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_with_defaults_and_refuse_typos() {
        assert_eq!(Limits::parse(None), Ok(Limits::default()));
        let limits =
            Limits::parse(Some(&serde_json::json!({"depth": 4, "pendingAsks": 2}))).expect("valid");
        assert_eq!(
            (limits.depth, limits.pending_asks, limits.children),
            (4, 2, 256)
        );
        assert_eq!(Limits::default().request_bytes, 64 << 10);
        let limits =
            Limits::parse(Some(&serde_json::json!({"requestBytes": 1024}))).expect("valid");
        assert_eq!(limits.request_bytes, 1024);
        let limits = Limits::parse(Some(&serde_json::json!({"viewNodes": 500}))).expect("valid");
        assert_eq!(limits.view_nodes, 500);
        assert_eq!(Limits::default().view_nodes, 262_144);
        assert!(Limits::parse(Some(&serde_json::json!({"dept": 4}))).is_err());
        assert!(Limits::parse(Some(&serde_json::json!({"depth": 0}))).is_err());
        assert!(Limits::parse(Some(&serde_json::json!([1]))).is_err());
        assert_eq!(root_of("main/a/b"), "main");
    }
}
