//! The authorizer chain (ADR 0007): named, non-terminal judges that review
//! an ask at the node that adjudicates it, before the terminal authority.
//!
//! A link answers `allow`, `deny` or `defer`; the first non-`defer` ends the
//! walk. The order is the config's `authorizerChain`; a named link with
//! nothing behind it is skipped; a link's `allow` on the `path` or
//! `external_directory` families (or on facts whose family cannot be told)
//! becomes `defer` unless `authorizerTrust` lists that family for the link.
//! A failing, erroring or silent link counts as `defer`, never as `allow`.

use crate::facts::intent::Family;
use regex::Regex;
use serde_json::Value;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;
use wait_timeout::ChildExt;

/// How long a link may take when its config says nothing.
pub const DEFAULT_LINK_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkVerdict {
    Allow,
    Deny(Option<String>),
    Defer,
}

impl LinkVerdict {
    pub fn name(&self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny(_) => "deny",
            Self::Defer => "defer",
        }
    }

    pub fn reason(&self) -> Option<&str> {
        match self {
            Self::Deny(reason) => reason.as_deref(),
            _ => None,
        }
    }

    /// `{"verdict": "allow"|"deny"|"defer", "reason": "…"}`; anything else
    /// is an error (which the caller counts as `defer`).
    pub fn from_json(value: &Value) -> Result<Self, String> {
        let verdict = value
            .get("verdict")
            .and_then(Value::as_str)
            .ok_or("a verdict needs \"verdict\": \"allow\" | \"deny\" | \"defer\"")?;
        let reason = value
            .get("reason")
            .and_then(Value::as_str)
            .map(str::to_string);
        match verdict {
            "allow" => Ok(Self::Allow),
            "deny" => Ok(Self::Deny(reason)),
            "defer" => Ok(Self::Defer),
            other => Err(format!("unknown verdict {other:?}")),
        }
    }
}

/// The enforcement checkpoint: a link's `allow` on a path-like family it
/// is not trusted for (or on facts with no family) becomes `defer`.
pub fn checkpoint(verdict: LinkVerdict, families: &[Family], trusted: &[String]) -> LinkVerdict {
    if verdict != LinkVerdict::Allow {
        return verdict;
    }
    if families.is_empty() {
        return LinkVerdict::Defer;
    }
    let capped = families.iter().any(|family| {
        matches!(family, Family::Path | Family::ExternalDirectory)
            && !trusted.iter().any(|t| t == family.name())
    });
    if capped {
        LinkVerdict::Defer
    } else {
        LinkVerdict::Allow
    }
}

/// A judge defined in the config (`"judges": {name: …}`).
#[derive(Debug, Clone)]
pub enum JudgeSpec {
    /// Runs `command` with the review as JSON on stdin; reads the verdict
    /// as JSON on stdout.
    Command {
        command: Vec<String>,
        timeout: Duration,
    },
    /// The typo-path judge: denies an `external_directory` ask whose facts
    /// look like a typo of a path, once a confirmation command agrees.
    TypoPath {
        patterns: Vec<Regex>,
        confirm: Vec<String>,
        timeout: Duration,
        reason: String,
    },
    /// A judge attached through the mount; only its timeout is configured.
    Attached { timeout: Duration },
}

impl JudgeSpec {
    pub fn timeout(&self) -> Duration {
        match self {
            Self::Command { timeout, .. }
            | Self::TypoPath { timeout, .. }
            | Self::Attached { timeout } => *timeout,
        }
    }
}

const DEFAULT_TYPO_REASON: &str =
    "This path looks like a typo (for example /hmoe instead of /home). \
Check the spelling of the directory and ask again with the path you meant.";

/// Parses the config's `judges` object.
pub fn parse_judges(value: Option<&Value>) -> Result<Vec<(String, JudgeSpec)>, String> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    let object = value
        .as_object()
        .ok_or("\"judges\" must map link names to judge settings")?;
    object
        .iter()
        .map(|(name, settings)| {
            let place = format!("judges.{name}");
            let settings = settings
                .as_object()
                .ok_or(format!("{place} must be an object"))?;
            const KEYS: &[&str] = &[
                "command",
                "timeoutMs",
                "builtin",
                "typoPatterns",
                "confirmCommand",
                "reason",
            ];
            if let Some(unknown) = settings.keys().find(|k| !KEYS.contains(&k.as_str())) {
                return Err(format!(
                    "{place}: {}",
                    crate::policy::config::unknown_key_message("key", unknown, KEYS)
                ));
            }
            let timeout = match settings.get("timeoutMs") {
                None => DEFAULT_LINK_TIMEOUT,
                Some(v) => Duration::from_millis(v.as_u64().filter(|n| *n >= 1).ok_or(format!(
                    "{place}.timeoutMs must be a whole number of at least 1"
                ))?),
            };
            let strings = |key: &str| -> Result<Option<Vec<String>>, String> {
                match settings.get(key) {
                    None => Ok(None),
                    Some(Value::Array(items)) if !items.is_empty() => items
                        .iter()
                        .map(|i| {
                            i.as_str()
                                .map(str::to_string)
                                .ok_or(format!("{place}.{key} must hold strings"))
                        })
                        .collect::<Result<Vec<_>, _>>()
                        .map(Some),
                    Some(_) => Err(format!("{place}.{key} must be a non-empty list of strings")),
                }
            };
            let spec = match settings.get("builtin").map(|b| b.as_str()) {
                Some(Some("typo-path")) => {
                    let patterns = strings("typoPatterns")?
                        .ok_or(format!(
                            "{place}: the typo-path judge needs \"typoPatterns\""
                        ))?
                        .iter()
                        .map(|p| {
                            Regex::new(p).map_err(|e| format!("{place}.typoPatterns: {p:?}: {e}"))
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    let confirm = strings("confirmCommand")?.ok_or(format!(
                        "{place}: the typo-path judge needs \"confirmCommand\""
                    ))?;
                    let reason = match settings.get("reason") {
                        None => DEFAULT_TYPO_REASON.to_string(),
                        Some(Value::String(r)) => r.clone(),
                        Some(_) => return Err(format!("{place}.reason must be a string")),
                    };
                    JudgeSpec::TypoPath {
                        patterns,
                        confirm,
                        timeout,
                        reason,
                    }
                }
                Some(other) => {
                    return Err(format!(
                        "{place}.builtin: unknown built-in judge {other:?} (known: typo-path)"
                    ))
                }
                None => match strings("command")? {
                    Some(command) => JudgeSpec::Command { command, timeout },
                    None => JudgeSpec::Attached { timeout },
                },
            };
            Ok((name.clone(), spec))
        })
        .collect()
}

/// Runs a command with `input` on stdin; its stdout when it exits 0 in time.
pub fn run_command(command: &[String], input: &[u8], timeout: Duration) -> Result<Vec<u8>, String> {
    let (program, arguments) = command.split_first().ok_or("empty command")?;
    let mut child = Command::new(program)
        .args(arguments)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {program:?}: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A judge that does not read its input must not block us.
        let _ = stdin.write_all(input);
    }
    let mut stdout = child.stdout.take().ok_or("no stdout")?;
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = stdout.read_to_end(&mut out);
        out
    });
    let status = match child.wait_timeout(timeout).map_err(|e| e.to_string())? {
        Some(status) => status,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{program:?} did not answer within {timeout:?}"));
        }
    };
    let output = reader
        .join()
        .map_err(|_| "reading the judge's output failed")?;
    if !status.success() {
        return Err(format!("{program:?} exited with {status}"));
    }
    Ok(output)
}

/// Runs a configured judge on a review. Errors count as `defer`.
pub fn run_judge(spec: &JudgeSpec, review: &Value) -> Result<LinkVerdict, String> {
    let payload = serde_json::to_vec(review).map_err(|e| e.to_string())?;
    match spec {
        JudgeSpec::Command { command, timeout } => {
            let output = run_command(command, &payload, *timeout)?;
            let value: Value =
                serde_json::from_slice(&output).map_err(|e| format!("verdict is not JSON: {e}"))?;
            LinkVerdict::from_json(&value)
        }
        JudgeSpec::TypoPath {
            patterns,
            confirm,
            timeout,
            reason,
        } => {
            let Some(suspect) = typo_candidate(patterns, review) else {
                return Ok(LinkVerdict::Defer);
            };
            let question = serde_json::json!({"path": suspect, "review": review});
            let output = run_command(
                confirm,
                &serde_json::to_vec(&question).map_err(|e| e.to_string())?,
                *timeout,
            )?;
            let answer = String::from_utf8_lossy(&output);
            let confirmed = match serde_json::from_str::<Value>(&answer) {
                Ok(value) => value.get("typo").and_then(Value::as_bool).unwrap_or(false),
                Err(_) => answer.trim().eq_ignore_ascii_case("yes"),
            };
            Ok(if confirmed {
                LinkVerdict::Deny(Some(format!("{reason} (path: {suspect})")))
            } else {
                LinkVerdict::Defer
            })
        }
        JudgeSpec::Attached { .. } => Err("an attached judge is served through the mount".into()),
    }
}

/// The first `external_directory` match value a typo pattern matches.
fn typo_candidate(patterns: &[Regex], review: &Value) -> Option<String> {
    review
        .get("facts")?
        .as_array()?
        .iter()
        .filter(|f| {
            f.get("surface")
                .and_then(Value::as_str)
                .is_some_and(|s| Family::of(s) == Family::ExternalDirectory)
        })
        .filter_map(|f| f.get("matchValues").and_then(Value::as_array))
        .flatten()
        .filter_map(Value::as_str)
        .find(|value| patterns.iter().any(|p| p.is_match(value)))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn checkpoint_caps_path_families_unless_trusted() {
        use Family::*;
        assert_eq!(
            checkpoint(LinkVerdict::Allow, &[Bash], &[]),
            LinkVerdict::Allow
        );
        assert_eq!(
            checkpoint(LinkVerdict::Allow, &[Path, Tool], &[]),
            LinkVerdict::Defer
        );
        assert_eq!(
            checkpoint(LinkVerdict::Allow, &[ExternalDirectory], &[]),
            LinkVerdict::Defer
        );
        assert_eq!(checkpoint(LinkVerdict::Allow, &[], &[]), LinkVerdict::Defer);
        assert_eq!(
            checkpoint(LinkVerdict::Allow, &[Path], &["path".to_string()]),
            LinkVerdict::Allow
        );
        assert_eq!(
            checkpoint(
                LinkVerdict::Allow,
                &[Path, ExternalDirectory],
                &["path".to_string()]
            ),
            LinkVerdict::Defer
        );
        assert_eq!(
            checkpoint(LinkVerdict::Deny(None), &[Path], &[]),
            LinkVerdict::Deny(None)
        );
    }

    #[test]
    fn command_judges_that_fail_are_errors() {
        let review = json!({"facts": []});
        let ok = JudgeSpec::Command {
            command: vec![
                "sh".into(),
                "-c".into(),
                "cat >/dev/null; echo '{\"verdict\":\"deny\",\"reason\":\"no\"}'".into(),
            ],
            timeout: Duration::from_secs(5),
        };
        assert_eq!(
            run_judge(&ok, &review),
            Ok(LinkVerdict::Deny(Some("no".into())))
        );
        let crash = JudgeSpec::Command {
            command: vec!["sh".into(), "-c".into(), "exit 3".into()],
            timeout: Duration::from_secs(5),
        };
        assert!(run_judge(&crash, &review).is_err());
        let slow = JudgeSpec::Command {
            command: vec!["sleep".into(), "5".into()],
            timeout: Duration::from_millis(100),
        };
        assert!(run_judge(&slow, &review).is_err());
        let garbage = JudgeSpec::Command {
            command: vec!["echo".into(), "allow".into()],
            timeout: Duration::from_secs(5),
        };
        assert!(run_judge(&garbage, &review).is_err());
    }

    #[test]
    fn judges_config_is_validated() {
        let parsed = parse_judges(Some(&json!({
            "lint": {"command": ["python3", "judge.py"], "timeoutMs": 2000},
            "typo": {"builtin": "typo-path", "typoPatterns": ["^/hmoe/"], "confirmCommand": ["true"]},
            "human-bot": {}
        })))
        .expect("valid");
        assert_eq!(parsed.len(), 3);
        assert!(matches!(parsed[2].1, JudgeSpec::Attached { .. }));
        for (bad, needle) in [
            (json!({"x": {"comand": ["a"]}}), "did you mean \"command\""),
            (json!({"x": {"builtin": "magic"}}), "unknown built-in"),
            (
                json!({"x": {"builtin": "typo-path", "typoPatterns": ["("], "confirmCommand": ["true"]}}),
                "typoPatterns",
            ),
            (json!({"x": {"command": []}}), "non-empty"),
        ] {
            let error = parse_judges(Some(&bad)).expect_err("invalid");
            assert!(error.contains(needle), "{error}");
        }
    }
}
