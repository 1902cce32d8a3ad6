//! Decisions: the language a person writes into an inbox (`allow`,
//! `allow session [PATTERN…]`, `allow subagent [PATTERN…]`, `allow always
//! global [PATTERN…]`, `deny [reason]`), its parser and the validation of
//! the patterns it records, and how a chosen pattern compares with the
//! suggested ones. Separate from the authority because it is pure text
//! handling: it knows nothing of sessions, asks or state.

use crate::facts::path_text::home_dir;

/// A decision written to an inbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// A grant at the deciding session, for the given patterns (none: the
    /// suggested ones).
    AllowSession(Vec<String>),
    /// A grant at the asking session, for the given patterns (none: the
    /// suggested ones).
    AllowSubagent(Vec<String>),
    /// Allow, and add `allow` rules for the given patterns (none: the
    /// suggested ones) to the global config, so the decision outlives the
    /// daemon. The operator's alone.
    AllowAlwaysGlobal(Vec<String>),
    Deny(Option<String>),
}

/// The digest of the ask a JSON decision was made on (`"factsDigest"`,
/// as the `pending` listing and an inbox entry show it), when it names
/// one: the decision then counts only for that ask (`views::facts_digest`).
/// `Err` when the field is there but not a string.
pub fn bound_digest(text: &str) -> Result<Option<String>, String> {
    let text = text.trim();
    if !text.starts_with('{') {
        return Ok(None);
    }
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("decision is not valid JSON: {e}"))?;
    match value.get("factsDigest") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(digest)) => Ok(Some(digest.clone())),
        Some(_) => Err("\"factsDigest\" must be a string".into()),
    }
}

/// Most patterns one decision may record.
pub const MAX_DECISION_PATTERNS: usize = 64;
/// Longest pattern a decision may record, in bytes.
pub const MAX_PATTERN_BYTES: usize = 4096;

pub(in crate::session) const DECISION_FORMS: &str =
    "write allow, allow session [PATTERN…], allow subagent [PATTERN…], deny, or deny <reason>";

impl Decision {
    /// `allow`, `allow session [PATTERN…]`, `allow subagent [PATTERN…]`,
    /// `deny`, `deny <reason>`, or JSON `{"decision": "...", "reason":
    /// "...", "patterns": [...]}`. Patterns in the text form are separated
    /// by blanks (quote one that holds a blank: `"git push *"`) or given one
    /// per line.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.starts_with('{') {
            let value: serde_json::Value = serde_json::from_str(text)
                .map_err(|e| format!("decision is not valid JSON: {e}"))?;
            let decision = value
                .get("decision")
                .and_then(|d| d.as_str())
                .ok_or("JSON decision needs a string \"decision\"")?;
            let reason = value
                .get("reason")
                .and_then(|r| r.as_str())
                .map(str::to_string);
            let patterns = match value.get("patterns") {
                None | Some(serde_json::Value::Null) => None,
                Some(serde_json::Value::Array(items)) => Some(
                    items
                        .iter()
                        .map(|p| {
                            p.as_str()
                                .map(str::to_string)
                                .ok_or_else(|| "\"patterns\" must be a list of strings".to_string())
                        })
                        .collect::<Result<Vec<_>, _>>()?,
                ),
                Some(_) => return Err("\"patterns\" must be a list of strings".into()),
            };
            if decision.trim() == "allow always" {
                if reason.is_some() {
                    return Err("only a deny takes a reason".into());
                }
                return always(
                    value.get("layer").and_then(|l| l.as_str()).unwrap_or(""),
                    patterns.unwrap_or_default(),
                );
            }
            return match (decision.trim(), reason, patterns) {
                ("deny", reason, None) => Ok(Self::Deny(reason)),
                (_, Some(_), _) => Err("only a deny takes a reason".into()),
                ("allow session", None, Some(patterns)) => {
                    Ok(Self::AllowSession(validate_patterns(patterns)?))
                }
                ("allow subagent", None, Some(patterns)) => {
                    Ok(Self::AllowSubagent(validate_patterns(patterns)?))
                }
                (_, None, Some(_)) => {
                    Err("only allow session and allow subagent take patterns".into())
                }
                (other, None, None) if !other.starts_with('{') => Self::parse(other),
                (other, None, None) => Err(format!("unknown decision {other:?}: {DECISION_FORMS}")),
            };
        }
        if let Some(rest) = text.strip_prefix("allow always") {
            if rest.is_empty() || rest.starts_with(char::is_whitespace) {
                let mut words = split_patterns(rest)?;
                let layer = if words.is_empty() {
                    String::new()
                } else {
                    words.remove(0)
                };
                return always(&layer, words);
            }
        }
        for (prefix, session) in [("allow session", true), ("allow subagent", false)] {
            let Some(rest) = text.strip_prefix(prefix) else {
                continue;
            };
            if !rest.is_empty() && !rest.starts_with(char::is_whitespace) {
                continue;
            }
            let patterns = validate_patterns(split_patterns(rest)?)?;
            return Ok(if session {
                Self::AllowSession(patterns)
            } else {
                Self::AllowSubagent(patterns)
            });
        }
        match text {
            "allow" => Ok(Self::Allow),
            "deny" => Ok(Self::Deny(None)),
            _ => match text.strip_prefix("deny ") {
                Some(reason) if !reason.trim().is_empty() => {
                    Ok(Self::Deny(Some(reason.trim().to_string())))
                }
                _ => Err(format!("unknown decision {text:?}: {DECISION_FORMS}")),
            },
        }
    }
}

/// `allow always LAYER [PATTERN…]`: only the global config for now.
fn always(layer: &str, patterns: Vec<String>) -> Result<Decision, String> {
    match layer {
        "global" => Ok(Decision::AllowAlwaysGlobal(validate_patterns(patterns)?)),
        "project" => Err("allow always project is not supported yet: use allow always global, or edit the project config".into()),
        "" => Err("allow always needs the layer to write: allow always global [PATTERN…]".into()),
        other => Err(format!("unknown layer {other:?} for allow always: write allow always global [PATTERN…]")),
    }
}

/// The patterns after `allow session`: one per line when there are
/// several lines, else separated by blanks, with `"…"` or `'…'` quoting a
/// pattern that holds blanks.
fn split_patterns(rest: &str) -> Result<Vec<String>, String> {
    if rest.contains('\n') {
        return Ok(rest
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect());
    }
    let mut out = Vec::new();
    let mut chars = rest.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(first) = chars.next() else {
            return Ok(out);
        };
        let mut token = String::new();
        if first == '"' || first == '\'' {
            loop {
                match chars.next() {
                    Some(c) if c == first => break,
                    Some(c) => token.push(c),
                    None => return Err(format!("unclosed {first} in the patterns")),
                }
            }
        } else {
            token.push(first);
            while let Some(c) = chars.peek().copied() {
                if c.is_whitespace() {
                    break;
                }
                token.push(c);
                chars.next();
            }
        }
        out.push(token);
    }
}

/// Patterns a person wrote: non-empty, printable, bounded, and valid in
/// the rule language, so what is recorded is exactly what was meant.
fn validate_patterns(patterns: Vec<String>) -> Result<Vec<String>, String> {
    if patterns.len() > MAX_DECISION_PATTERNS {
        return Err(format!(
            "{} patterns; at most {MAX_DECISION_PATTERNS} per decision",
            patterns.len()
        ));
    }
    for pattern in &patterns {
        if pattern.trim().is_empty() {
            return Err("a pattern may not be empty".into());
        }
        if pattern.len() > MAX_PATTERN_BYTES {
            return Err(format!(
                "a pattern is {} bytes; at most {MAX_PATTERN_BYTES}",
                pattern.len()
            ));
        }
        if pattern.chars().any(char::is_control) {
            return Err(format!("pattern {pattern:?} holds a control character"));
        }
        crate::policy::wildcard::compile(
            pattern,
            &home_dir(),
            crate::policy::wildcard::Braced::Literal,
        )
        .map_err(|e| format!("pattern {pattern:?} is not valid: {e}"))?;
    }
    Ok(patterns)
}

/// How a pattern a person chose relates to what permfs derived from the
/// facts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Breadth {
    /// One of the suggested patterns.
    Same,
    /// Covered by a suggested pattern.
    Narrower,
    /// Covers a suggested pattern, and more.
    Broader,
    /// Neither: a grant for something that was not asked.
    Elsewhere,
}

/// Compares `pattern` with the `suggested` patterns (as wildcards: a
/// pattern that matches a suggestion's text covers it).
pub fn breadth(pattern: &str, suggested: &[String]) -> Breadth {
    if suggested.iter().any(|s| s == pattern) {
        return Breadth::Same;
    }
    let home = home_dir();
    let matches = |pattern: &str, text: &str| {
        crate::policy::wildcard::compile(pattern, &home, crate::policy::wildcard::Braced::Literal)
            .map(|globs| globs.iter().any(|g| g.compile_matcher().is_match(text)))
            .unwrap_or(false)
    };
    if suggested.iter().any(|s| matches(pattern, s)) {
        Breadth::Broader
    } else if suggested.iter().any(|s| matches(s, pattern)) {
        Breadth::Narrower
    } else {
        Breadth::Elsewhere
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_parse_patterns_and_refuse_what_they_cannot_record() {
        assert_eq!(
            Decision::parse("allow session\n"),
            Ok(Decision::AllowSession(vec![]))
        );
        assert_eq!(
            Decision::parse(r#"allow session /w/a.txt "git push *""#),
            Ok(Decision::AllowSession(vec![
                "/w/a.txt".into(),
                "git push *".into()
            ]))
        );
        assert_eq!(
            Decision::parse("allow subagent\n/a/*\n/b/*\n"),
            Ok(Decision::AllowSubagent(vec!["/a/*".into(), "/b/*".into()]))
        );
        assert_eq!(
            Decision::parse(r#"{"decision":"allow session","patterns":["/w/*"]}"#),
            Ok(Decision::AllowSession(vec!["/w/*".into()]))
        );
        for bad in [
            "alow",
            "allow always",
            "allow sessionx",
            r#"allow session "open"#,
            r#"{"decision":"allow","patterns":["x"]}"#,
            r#"{"decision":"allow session","patterns":[1]}"#,
            r#"{"decision":"allow session","patterns":["a\u001bb"]}"#,
        ] {
            assert!(Decision::parse(bad).is_err(), "{bad:?} must be refused");
        }
        let derived = vec!["/tmp/x/*".to_string()];
        assert_eq!(breadth("/tmp/x/*", &derived), Breadth::Same);
        assert_eq!(breadth("/tmp/x/notes.txt", &derived), Breadth::Narrower);
        assert_eq!(breadth("/tmp/*", &derived), Breadth::Broader);
        assert_eq!(breadth("*", &derived), Breadth::Broader);
        assert_eq!(breadth("/etc/*", &derived), Breadth::Elsewhere);
    }
}
