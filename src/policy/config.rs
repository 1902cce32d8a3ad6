//! One config file in the reference's format, validated strictly.
//!
//! A user's existing `config.json` must load unchanged, so every key the
//! reference accepts is accepted (the ones that only drive its terminal UI
//! are ignored). Anything else is refused with the file, the key and the
//! nearest valid key, because a misspelt `permision` silently ignored is a
//! policy that does not exist.

use super::state::PermissionState;
use serde_json::{Map, Value};
use std::io::Read;
use std::path::{Path, PathBuf};

/// A surface value: a bare state is shorthand for `{"*": state}`, and keeps
/// "replace the whole surface" merge semantics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SurfaceValue {
    State(PermissionState),
    Patterns(Vec<(String, PatternAction)>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternAction {
    pub state: PermissionState,
    pub reason: Option<String>,
}

/// A `permission` map in file order.
pub type PermissionMap = Vec<(String, SurfaceValue)>;

/// Families an authorizer link may be trusted to allow.
pub const TRUSTABLE_FAMILIES: &[&str] = &["path", "external_directory"];

/// Everything one file says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigFile {
    pub permission: PermissionMap,
    pub yolo_mode: Option<bool>,
    pub forwarding_timeout_ms: Option<u64>,
    pub authorizer_chain: Option<Vec<String>>,
    pub authorizer_trust: Option<Vec<(String, Vec<String>)>>,
    /// permfs: per-agent rules given inline (`{"agents": {"reviewer": {...}}}`).
    pub agents: Vec<(String, PermissionMap)>,
    /// permfs: keys owned by later layers of the daemon (judges, roots),
    /// kept raw so this module stays about policy.
    pub extensions: Map<String, Value>,
    /// permfs: the built-in outside-the-sandbox guards an operator set by
    /// name (`"guards": {"git-hooks": "allow"}`). Honoured only in the
    /// global config; `None` when the key is absent.
    pub guards: Option<Vec<(String, super::outside::Setting)>>,
}

/// Keys whose meaning is policy.
const POLICY_KEYS: &[&str] = &[
    "$schema",
    "permission",
    "yoloMode",
    "forwardingTimeoutMs",
    "authorizerChain",
    "authorizerTrust",
];
/// Keys the reference accepts that only concern its UI or its own logs.
const IGNORED_REFERENCE_KEYS: &[&str] = &[
    "debugLog",
    "permissionReviewLog",
    "doublePressToConfirm",
    "toolInputPreviewMaxLength",
    "toolTextSummaryMaxLength",
    "piInfrastructureReadPaths",
    "shellTools",
    "promptMaxRows",
    "promptFieldMaxWidth",
    "reviewLogFieldMaxWidth",
    "permissionDialogKeys",
    "showPersistenceSummary",
];
/// permfs's own keys.
pub const PERMFS_KEYS: &[&str] = &["agents", "guards", "judges", "limits", "roots"];

const DIRECTIONAL_KEYS: &[&str] = &[
    "path_read",
    "path_write",
    "external_directory_read",
    "external_directory_write",
];

/// A problem with a config file: always names the file and the place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: String,
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.file, self.message)
    }
}

impl std::error::Error for ConfigError {}

impl ConfigFile {
    /// Reads and validates a file. JSON with `//` and `/* */` comments is
    /// accepted, as the reference strips them.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let error = |message: String| ConfigError {
            file: path.display().to_string(),
            message,
        };
        // Project layers sit where agents work: read without entering
        // permfs's own mount or waiting on a FIFO (see `facts::fence`).
        let raw =
            crate::facts::fence::read(path).map_err(|e| error(format!("cannot read: {e}")))?;
        Self::parse(&raw).map_err(error)
    }

    /// Like [`ConfigFile::load`], but a file that does not exist is an
    /// empty layer (the reference treats a missing layer as `{}`).
    pub fn load_optional(path: &Path) -> Result<Option<Self>, ConfigError> {
        match crate::facts::fence::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            _ => Self::load(path).map(Some),
        }
    }

    pub fn parse(raw: &[u8]) -> Result<Self, String> {
        let mut text = String::new();
        json_comments::StripComments::new(raw)
            .read_to_string(&mut text)
            .map_err(|e| format!("not UTF-8 text: {e}"))?;
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        let value: Value = serde_json::from_str(&text).map_err(|e| format!("invalid JSON: {e}"))?;
        Self::from_value(&value)
    }

    pub fn from_value(value: &Value) -> Result<Self, String> {
        let object = value
            .as_object()
            .ok_or_else(|| format!("the config must be a JSON object, got {}", kind(value)))?;
        let mut config = Self::default();
        for (key, value) in object {
            match key.as_str() {
                "$schema" => expect_string(value, key).map(drop)?,
                "permission" => config.permission = parse_permission_map(value, "permission")?,
                "yoloMode" => config.yolo_mode = Some(expect_bool(value, key)?),
                "forwardingTimeoutMs" => {
                    config.forwarding_timeout_ms = Some(expect_positive_int(value, key)?)
                }
                "authorizerChain" => config.authorizer_chain = Some(parse_chain(value)?),
                "authorizerTrust" => config.authorizer_trust = Some(parse_trust(value)?),
                "agents" => config.agents = parse_agents(value)?,
                "guards" => config.guards = Some(parse_guards(value)?),
                "judges" | "limits" | "roots" => {
                    config.extensions.insert(key.clone(), value.clone());
                }
                ignored if IGNORED_REFERENCE_KEYS.contains(&ignored) => {}
                unknown => {
                    return Err(unknown_key_message(
                        "config key",
                        unknown,
                        &all_top_level_keys(),
                    ))
                }
            }
        }
        Ok(config)
    }
}

fn all_top_level_keys() -> Vec<&'static str> {
    POLICY_KEYS
        .iter()
        .chain(IGNORED_REFERENCE_KEYS)
        .chain(PERMFS_KEYS)
        .copied()
        .collect()
}

/// "unknown config key 'permision' (did you mean 'permission'?)"
pub fn unknown_key_message(what: &str, key: &str, valid: &[&str]) -> String {
    match nearest(key, valid) {
        Some(near) => format!("unknown {what} {key:?} (did you mean {near:?}?)"),
        None => format!("unknown {what} {key:?} (valid: {})", valid.join(", ")),
    }
}

/// The valid key closest to a misspelt one, if any is reasonably close.
pub fn nearest<'a>(key: &str, valid: &[&'a str]) -> Option<&'a str> {
    valid
        .iter()
        .map(|candidate| {
            (
                strsim::jaro_winkler(&key.to_lowercase(), &candidate.to_lowercase()),
                *candidate,
            )
        })
        .filter(|(score, _)| *score >= 0.75)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, candidate)| candidate)
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn expect_string<'a>(value: &'a Value, key: &str) -> Result<&'a str, String> {
    value
        .as_str()
        .ok_or_else(|| format!("{key:?} must be a string, got {}", kind(value)))
}

fn expect_bool(value: &Value, key: &str) -> Result<bool, String> {
    value
        .as_bool()
        .ok_or_else(|| format!("{key:?} must be true or false, got {}", kind(value)))
}

fn expect_positive_int(value: &Value, key: &str) -> Result<u64, String> {
    value
        .as_u64()
        .filter(|n| *n >= 1)
        .ok_or_else(|| format!("{key:?} must be a whole number of at least 1, got {value}"))
}

fn parse_state(value: &Value, place: &str) -> Result<PermissionState, String> {
    value
        .as_str()
        .and_then(PermissionState::parse)
        .ok_or_else(|| format!("{place} must be \"allow\", \"ask\" or \"deny\", got {value}"))
}

/// Parses a `permission` map (also used for inline agent rules).
pub fn parse_permission_map(value: &Value, place: &str) -> Result<PermissionMap, String> {
    let object = value
        .as_object()
        .ok_or_else(|| format!("{place} must be an object of surfaces, got {}", kind(value)))?;
    let mut map = Vec::with_capacity(object.len());
    for (surface, value) in object {
        let where_ = format!("{place}.{surface}");
        if surface.trim().is_empty() {
            return Err(format!("{place} has an empty surface key"));
        }
        let directional_like =
            surface.starts_with("path_") || surface.starts_with("external_directory_");
        if directional_like && !DIRECTIONAL_KEYS.contains(&surface.as_str()) {
            return Err(unknown_key_message(
                "directional surface key",
                surface,
                DIRECTIONAL_KEYS,
            ));
        }
        let parsed = match value {
            Value::String(_) => SurfaceValue::State(parse_state(value, &where_)?),
            Value::Object(patterns) => {
                let mut entries = Vec::with_capacity(patterns.len());
                for (pattern, action) in patterns {
                    if pattern.is_empty() {
                        return Err(format!("{where_} has an empty pattern key"));
                    }
                    entries.push((
                        pattern.clone(),
                        parse_pattern_action(action, &format!("{where_}.{pattern}"))?,
                    ));
                }
                SurfaceValue::Patterns(entries)
            }
            other => {
                return Err(format!(
                    "{where_} must be a state or an object of patterns, got {}",
                    kind(other)
                ))
            }
        };
        map.push((surface.clone(), parsed));
    }
    Ok(map)
}

fn parse_pattern_action(value: &Value, place: &str) -> Result<PatternAction, String> {
    match value {
        Value::String(_) => Ok(PatternAction {
            state: parse_state(value, place)?,
            reason: None,
        }),
        Value::Object(object) => {
            if let Some(extra) = object.keys().find(|k| *k != "action" && *k != "reason") {
                return Err(format!(
                    "{place}: {}",
                    unknown_key_message("key", extra, &["action", "reason"])
                ));
            }
            if object.get("action").and_then(Value::as_str) != Some("deny") {
                return Err(format!(
                    "{place}: an object rule must be {{\"action\": \"deny\", \"reason\": \"…\"}}"
                ));
            }
            let reason = match object.get("reason") {
                None => None,
                Some(Value::String(reason)) if reason.chars().count() <= 500 => {
                    Some(reason.clone())
                }
                Some(Value::String(_)) => {
                    return Err(format!("{place}.reason must be at most 500 characters"))
                }
                Some(other) => {
                    return Err(format!(
                        "{place}.reason must be a string, got {}",
                        kind(other)
                    ))
                }
            };
            Ok(PatternAction {
                state: PermissionState::Deny,
                reason,
            })
        }
        other => Err(format!(
            "{place} must be a state or a deny object, got {}",
            kind(other)
        )),
    }
}

fn parse_chain(value: &Value) -> Result<Vec<String>, String> {
    let items = value.as_array().ok_or_else(|| {
        format!(
            "\"authorizerChain\" must be an array of link names, got {}",
            kind(value)
        )
    })?;
    items
        .iter()
        .map(|item| {
            item.as_str()
                .filter(|s| !s.trim().is_empty())
                .map(str::to_string)
                .ok_or_else(|| {
                    format!("\"authorizerChain\" entries must be non-empty strings, got {item}")
                })
        })
        .collect()
}

fn parse_trust(value: &Value) -> Result<Vec<(String, Vec<String>)>, String> {
    let object = value.as_object().ok_or_else(|| {
        format!(
            "\"authorizerTrust\" must map link names to families, got {}",
            kind(value)
        )
    })?;
    object
        .iter()
        .map(|(link, families)| {
            let families = families
                .as_array()
                .ok_or_else(|| format!("authorizerTrust.{link} must be an array of families"))?
                .iter()
                .map(|family| match family.as_str() {
                    Some(name) if TRUSTABLE_FAMILIES.contains(&name) => Ok(name.to_string()),
                    Some(name) => Err(format!(
                        "authorizerTrust.{link}: {}",
                        unknown_key_message("family", name, TRUSTABLE_FAMILIES)
                    )),
                    None => Err(format!("authorizerTrust.{link} entries must be strings")),
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok((link.clone(), families))
        })
        .collect()
}

/// `"guards": {"<name>": "allow" | "ask"}`: an unknown name is an error
/// (a typo would leave the guard on while the operator believes it off,
/// or the reverse), and so is any other state: a guard is only lowered
/// to `allow` or kept at `ask` (a `deny` is a rule's business).
fn parse_guards(value: &Value) -> Result<Vec<(String, super::outside::Setting)>, String> {
    use super::outside::{names, Setting};
    let object = value.as_object().ok_or_else(|| {
        format!(
            "guards must be an object of guard names, got {}",
            kind(value)
        )
    })?;
    let valid = names();
    let mut out = Vec::with_capacity(object.len());
    for (name, state) in object {
        if !valid.contains(&name.as_str()) {
            return Err(unknown_key_message("guard", name, &valid));
        }
        let setting = match state.as_str() {
            Some("allow") => Setting::Allow,
            Some("ask") => Setting::Ask,
            _ => {
                return Err(format!(
                "guards.{name} must be \"allow\" (lowered) or \"ask\" (the default), got {state}"
            ))
            }
        };
        out.push((name.clone(), setting));
    }
    Ok(out)
}

fn parse_agents(value: &Value) -> Result<Vec<(String, PermissionMap)>, String> {
    let object = value.as_object().ok_or_else(|| {
        format!(
            "\"agents\" must map agent names to permission maps, got {}",
            kind(value)
        )
    })?;
    object
        .iter()
        .map(|(agent, map)| {
            if !is_valid_agent_name(agent) {
                return Err(format!("agents: {agent:?} is not a valid agent name"));
            }
            let map = match map.get("permission") {
                Some(inner) if map.as_object().is_some_and(|o| o.len() == 1) => inner,
                _ => map,
            };
            Ok((
                agent.clone(),
                parse_permission_map(map, &format!("agents.{agent}"))?,
            ))
        })
        .collect()
}

/// Agent names become file names (`agents/<name>.md`): no separators, no
/// dot-dot, no control characters.
pub fn is_valid_agent_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name != "."
        && name != ".."
        && !name
            .chars()
            .any(|c| c == '/' || c == '\\' || c.is_control())
}

/// Where the reference keeps a project's config, relative to its cwd.
pub fn reference_project_config(cwd: &Path) -> PathBuf {
    cwd.join(".pi/extensions/pi-permission-system/config.json")
}

/// permfs's own project file, layered after the reference's one.
pub fn permfs_project_config(cwd: &Path) -> PathBuf {
    cwd.join(".permfs/config.json")
}

/// Where the reference keeps a project's agent files.
pub fn reference_project_agents_dir(cwd: &Path) -> PathBuf {
    cwd.join(".pi/agents")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ConfigFile, String> {
        ConfigFile::parse(text.as_bytes())
    }

    #[test]
    fn reference_config_with_comments_loads() {
        let config = parse(
            r#"{
              // a comment
              "$schema": "x", "debugLog": true, /* block */
              "permission": {"*": "ask", "bash": {"git *": "allow", "rm *": {"action": "deny", "reason": "no"}}},
              "yoloMode": false, "forwardingTimeoutMs": 1000, "authorizerChain": ["lint"],
              "authorizerTrust": {"lint": ["path"]}
            }"#,
        )
        .expect("valid");
        assert_eq!(config.permission.len(), 2);
        assert_eq!(config.forwarding_timeout_ms, Some(1000));
        let SurfaceValue::Patterns(bash) = &config.permission[1].1 else {
            panic!("map expected")
        };
        assert_eq!(bash[1].1.reason.as_deref(), Some("no"));
    }

    #[test]
    fn errors_name_the_problem_and_the_nearest_key() {
        for (text, needle) in [
            (r#"{"permision": {}}"#, "did you mean \"permission\""),
            (r#"{"yolomode": true}"#, "did you mean \"yoloMode\""),
            (
                r#"{"permission": {"bash": "maybe"}}"#,
                "permission.bash must be",
            ),
            (
                r#"{"permission": {"bash": {"x": {"action": "allow"}}}}"#,
                "permission.bash.x",
            ),
            (
                r#"{"permission": {"path_wrote": "deny"}}"#,
                "did you mean \"path_write\"",
            ),
            (r#"{"authorizerTrust": {"j": ["bash"]}}"#, "family"),
            (r#"{"forwardingTimeoutMs": 0}"#, "at least 1"),
            (r#"[1]"#, "must be a JSON object"),
            (r#"{"permission": "#, "invalid JSON"),
        ] {
            let error = parse(text).expect_err(text);
            assert!(error.contains(needle), "{text}: {error}");
        }
    }

    #[test]
    fn nearest_is_none_for_gibberish() {
        assert_eq!(nearest("zzzzzz", &["permission", "yoloMode"]), None);
    }
}
