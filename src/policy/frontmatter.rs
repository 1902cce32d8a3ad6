//! Per-agent rules from `agents/<name>.md`: the `permission:` key of the
//! file's YAML frontmatter, as the reference reads them.
//!
//! Parsed as real YAML (so `"exa:*": allow` works, where the reference's
//! line parser loses it). Entries that are not rules are dropped with a
//! note, as the reference drops them; a file that exists but cannot be read
//! or parsed makes the layer invalid, which fails closed.

use super::config::{PatternAction, PermissionMap, SurfaceValue};
use super::state::PermissionState;
use serde_json::Value;
use std::path::Path;

/// What one agent file contributed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentRules {
    pub permission: PermissionMap,
    /// Entries dropped as not being rules.
    pub notes: Vec<String>,
}

/// `Ok(None)` when the file does not exist; `Err` when it exists but is
/// unusable (the caller floors the policy).
pub fn load_agent_file(path: &Path) -> Result<Option<AgentRules>, String> {
    // Agent files sit in a session's project: read without entering
    // permfs's own mount or waiting on a FIFO (see `facts::fence`).
    let bytes = match crate::facts::fence::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: cannot read: {e}", path.display())),
    };
    let text = String::from_utf8(bytes)
        .map_err(|_| format!("{}: cannot read: not UTF-8 text", path.display()))?;
    parse_agent_markdown(&text)
        .map(Some)
        .map_err(|e| format!("{}: {e}", path.display()))
}

pub fn parse_agent_markdown(text: &str) -> Result<AgentRules, String> {
    let text = text.replace("\r\n", "\n");
    let Some(body) = text.strip_prefix("---\n") else {
        return Ok(AgentRules::default());
    };
    let end = body
        .find("\n---")
        .map(|i| i + 1)
        .or_else(|| body.starts_with("---").then_some(0));
    let Some(end) = end else {
        return Err("frontmatter starts with --- but never ends".into());
    };
    let yaml = &body[..end];
    let document: Value = if yaml.trim().is_empty() {
        Value::Null
    } else {
        serde_norway::from_str(yaml).map_err(|e| format!("invalid YAML frontmatter: {e}"))?
    };
    let mut rules = AgentRules::default();
    let Some(permission) = document.get("permission") else {
        return Ok(rules);
    };
    let Some(surfaces) = permission.as_object() else {
        rules
            .notes
            .push("`permission` is not a map; ignored".into());
        return Ok(rules);
    };
    for (surface, value) in surfaces {
        match value {
            Value::String(s) => match PermissionState::parse(s) {
                Some(state) => rules
                    .permission
                    .push((surface.clone(), SurfaceValue::State(state))),
                None => rules.notes.push(format!(
                    "permission.{surface}: {s:?} is not a state; dropped"
                )),
            },
            Value::Object(patterns) => {
                let mut entries = Vec::new();
                for (pattern, action) in patterns {
                    match rule_action(action) {
                        Some(action) => entries.push((pattern.clone(), action)),
                        None => rules.notes.push(format!(
                            "permission.{surface}.{pattern}: not a rule; dropped"
                        )),
                    }
                }
                if !entries.is_empty() {
                    rules
                        .permission
                        .push((surface.clone(), SurfaceValue::Patterns(entries)));
                }
            }
            _ => rules
                .notes
                .push(format!("permission.{surface}: not a rule; dropped")),
        }
    }
    Ok(rules)
}

fn rule_action(value: &Value) -> Option<PatternAction> {
    match value {
        Value::String(s) => PermissionState::parse(s).map(|state| PatternAction {
            state,
            reason: None,
        }),
        Value::Object(object) if object.get("action").and_then(Value::as_str) == Some("deny") => {
            let reason = match object.get("reason") {
                None | Some(Value::Null) => None,
                Some(Value::String(reason)) => Some(reason.clone()),
                Some(_) => return None,
            };
            Some(PatternAction {
                state: PermissionState::Deny,
                reason,
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_permission_key_in_order() {
        let rules = parse_agent_markdown(
            "---\nname: reviewer\npermission:\n  \"bash\":\n    \"*\": ask\n    \"exa:*\": allow\n    \"rm *\":\n      action: deny\n      reason: never\n  write: deny\n  read: maybe\n---\nbody\n",
        )
        .expect("valid");
        assert_eq!(rules.permission.len(), 2);
        let SurfaceValue::Patterns(bash) = &rules.permission[0].1 else {
            panic!("map")
        };
        let patterns: Vec<&str> = bash.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(patterns, ["*", "exa:*", "rm *"]);
        assert_eq!(bash[2].1.reason.as_deref(), Some("never"));
        assert_eq!(
            rules.permission[1].1,
            SurfaceValue::State(PermissionState::Deny)
        );
        assert_eq!(rules.notes.len(), 1, "the non-state `maybe` is reported");
    }

    #[test]
    fn no_frontmatter_is_no_rules_and_broken_yaml_is_an_error() {
        assert_eq!(
            parse_agent_markdown("# just markdown\n").expect("ok"),
            AgentRules::default()
        );
        assert!(parse_agent_markdown("---\npermission: [\n---\n").is_err());
        assert!(parse_agent_markdown("---\npermission:\n  bash: allow\n").is_err());
    }
}
