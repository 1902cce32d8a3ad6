//! A rule: the atomic unit of policy, and the ordered list it lives in.

use super::state::{Origin, PermissionState};
use serde::{Deserialize, Serialize};

/// Where in the composed list a rule sits. Only `Config` and `Session` rules
/// report a `matchedPattern`; a `Default` match means "no rule spoke".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleLayer {
    Default,
    Baseline,
    Config,
    Session,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// The surface key, itself a wildcard pattern matched against the
    /// requested surface (`bash`, `path_read`, `mcp`, …).
    pub surface: String,
    pub pattern: String,
    pub action: PermissionState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub origin: Origin,
    pub layer: RuleLayer,
}

impl Rule {
    pub fn new(surface: &str, pattern: &str, action: PermissionState, origin: Origin) -> Self {
        Self {
            surface: surface.to_string(),
            pattern: pattern.to_string(),
            action,
            reason: None,
            origin,
            layer: RuleLayer::Config,
        }
    }

    pub fn with_layer(mut self, layer: RuleLayer) -> Self {
        self.layer = layer;
        self
    }

    pub fn with_reason(mut self, reason: Option<String>) -> Self {
        self.reason = reason;
        self
    }

    /// The pattern a user can act on: only config and session rules have one.
    pub fn reported_pattern(&self) -> Option<&str> {
        matches!(self.layer, RuleLayer::Config | RuleLayer::Session)
            .then_some(self.pattern.as_str())
    }
}

/// `yoloMode`: every `ask` becomes a standing `allow` tagged `yolo`; `deny`
/// and `allow` pass through, so yolo silences prompts but keeps hard denies.
pub fn rewrite_asks_to_yolo(rules: &mut [Rule]) {
    for rule in rules
        .iter_mut()
        .filter(|r| r.action == PermissionState::Ask)
    {
        rule.action = PermissionState::Allow;
        rule.origin = Origin::Yolo;
    }
}

/// The fail-closed floor for an invalid config layer: no rule may grant
/// without a person, so every `allow` becomes `ask` tagged `fail-closed`.
pub fn floor_allows_to_ask(rules: &mut [Rule]) {
    for rule in rules
        .iter_mut()
        .filter(|r| r.action == PermissionState::Allow)
    {
        rule.action = PermissionState::Ask;
        rule.origin = Origin::FailClosed;
    }
}
