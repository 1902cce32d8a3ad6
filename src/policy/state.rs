//! The three verdicts a rule can carry, and where a rule came from.
//!
//! `PermissionState` is ordered by restrictiveness (`allow < ask < deny`) so
//! "most restrictive wins" is simply `max`.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A rule's verdict. The derived `Ord` is the restrictiveness order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PermissionState {
    Allow,
    Ask,
    Deny,
}

impl PermissionState {
    /// Parses the reference's spelling exactly (`allow`, `ask`, `deny`).
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "allow" => Some(Self::Allow),
            "ask" => Some(Self::Ask),
            "deny" => Some(Self::Deny),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Ask => "ask",
            Self::Deny => "deny",
        }
    }
}

impl fmt::Display for PermissionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which source contributed a rule. Reported with every decision so a user
/// can tell which file (or runtime grant) to edit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    Global,
    Project,
    Agent,
    ProjectAgent,
    /// The universal fallback when no layer set `*`.
    Builtin,
    /// Synthesized MCP metadata allows (the reference's baseline).
    Baseline,
    /// A session grant recorded at runtime.
    Session,
    /// An `ask` rewritten to `allow` by `yoloMode`.
    Yolo,
    /// An `allow` floored to `ask` because a config layer was invalid.
    FailClosed,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Global => "global",
            Self::Project => "project",
            Self::Agent => "agent",
            Self::ProjectAgent => "project-agent",
            Self::Builtin => "builtin",
            Self::Baseline => "baseline",
            Self::Session => "session",
            Self::Yolo => "yolo",
            Self::FailClosed => "fail-closed",
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restrictiveness_order_is_allow_ask_deny() {
        assert!(PermissionState::Deny > PermissionState::Ask);
        assert!(PermissionState::Ask > PermissionState::Allow);
        assert_eq!(
            [
                PermissionState::Allow,
                PermissionState::Deny,
                PermissionState::Ask
            ]
            .into_iter()
            .max(),
            Some(PermissionState::Deny)
        );
    }

    #[test]
    fn parse_rejects_other_spellings() {
        assert_eq!(
            PermissionState::parse("allow"),
            Some(PermissionState::Allow)
        );
        assert_eq!(PermissionState::parse("Allow"), None);
        assert_eq!(PermissionState::parse(" deny"), None);
    }
}
