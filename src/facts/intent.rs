//! The access intent: one surface's facts, in the ADR 0008 wire shape.
//!
//! Plain strings only, so the facts can travel to any ancestor (or be
//! written by a client in its own mount namespace) and be judged there
//! without being re-derived.
//!
//! The strings every fact of an ask repeats (the requester's cwd and
//! identity, a path's alias set and canonical form, which several surfaces
//! of one tool call share) are held by `Arc`: a fact set and the checks
//! judged from it share one copy instead of each owning its own. On the
//! wire they are plain strings as before.

use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Who is asking. Filled in by whoever knows the asker's identity (the
/// mount, from the outbox written), never taken from a request's claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Principal {
    pub session_id: String,
    /// The agent the session runs; `null` for a session with no agent.
    pub agent_name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AccessIntent {
    pub surface: String,
    pub match_values: Arc<[String]>,
    pub boundary_value: Option<Arc<str>>,
    pub requester_cwd: Arc<str>,
    pub principal: Arc<Principal>,
    /// The reference's floor marker: set when the asking side floored an
    /// `allow` it could not trust (an opaque wrapper, say). An ancestor's
    /// `allow` rule may then not answer alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor: Option<String>,
    /// The bash word a path intent was read from (`cat src/.env` gives
    /// `src/.env`), so a person sees which word decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub word: Option<String>,
    /// A bare bash word (`id_rsa`, no path shape): judged only where a
    /// specific `path` deny or ask rule names the word itself, as the
    /// reference promotes such words. The judging node decides, with its
    /// own rules.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bare_word: bool,
}

/// Surfaces whose values are paths (alias sets, judged with rule order
/// across aliases).
pub const PATH_SURFACES: &[&str] = &[
    "read",
    "write",
    "edit",
    "find",
    "grep",
    "ls",
    "path",
    "path_read",
    "path_write",
    "external_directory",
    "external_directory_read",
    "external_directory_write",
];

pub fn is_path_surface(surface: &str) -> bool {
    PATH_SURFACES.contains(&surface)
}

/// The family a surface belongs to, which fixes how it is judged and the
/// order in which a multi-surface ask reports what decided it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    Path,
    ExternalDirectory,
    Tool,
    Bash,
}

impl Family {
    pub fn of(surface: &str) -> Self {
        match surface {
            "path" | "path_read" | "path_write" => Self::Path,
            "external_directory" | "external_directory_read" | "external_directory_write" => {
                Self::ExternalDirectory
            }
            "bash" => Self::Bash,
            _ => Self::Tool,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Path => "path",
            Self::ExternalDirectory => "external_directory",
            Self::Tool => "tool",
            Self::Bash => "bash",
        }
    }
}

/// For a bare directional family (`path`, `external_directory`), the two
/// directions it stands for; `None` for any other surface.
pub fn directions_of(surface: &str) -> Option<[&'static str; 2]> {
    match surface {
        "path" => Some(["path_read", "path_write"]),
        "external_directory" => Some(["external_directory_read", "external_directory_write"]),
        _ => None,
    }
}
