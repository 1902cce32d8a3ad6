//! A pi child's forwarded ask, read as a permfs request.
//!
//! pi-permission-system's subagent forwarding writes a
//! `ForwardedPermissionRequest` (`id`, `createdAt`, `requesterSessionId`,
//! `targetSessionId`, `requesterAgentName`, `message`, and optionally
//! `source`, `surface`, `value`, `sessionApproval`) into its parent's
//! forwarding directory. permfs serves that directory as a view of a
//! session (see `docs/pi-forwarding.md`), so the body is turned into a
//! [`Request`] here.
//!
//! What the body says about identity (`requesterSessionId`,
//! `targetSessionId`, the agent name) is kept for the person and the audit
//! log only: the asker is the session whose view was written. What it says
//! about the action is judged more strictly than the reference's serving
//! node does, because a sandboxed agent can write any body it likes:
//! `bash` and the built-in path tools are judged as the tool call they name
//! (every bash unit, the bash path gates, `external_directory`), other
//! surfaces as `{surface, value}`. A body without both a surface and a
//! value names nothing a rule could judge and floors to `ask`, as the
//! reference's serving node floors it.

use super::request::{is_built_in_path_tool, AskForm, Request};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// What a forwarded request claimed about where it came from. Never
/// identity: recorded so a person and the audit log see the claim next to
/// the session that really asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Provenance {
    /// The directory name under `pi/sessions/` the request was written in
    /// (the child's idea of its parent session, URI-encoded).
    pub target: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requester_session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requester_agent_name: Option<String>,
    /// The prompt source (`tool_call`, `skill_input`, `skill_read`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// Reads a forwarded request body written in the view directory `target`.
///
/// Only a body that is not a JSON object is an error (the ask is then
/// answered `invalid`); anything else about it that is missing or
/// malformed makes it unjudgeable, never allowed.
pub fn parse(body: &[u8], target: &str) -> Result<Request, String> {
    let text = std::str::from_utf8(body).map_err(|_| "request is not UTF-8 text".to_string())?;
    let value: Value = serde_json::from_str(text)
        .map_err(|e| format!("forwarded request is not valid JSON: {e}"))?;
    let object = value
        .as_object()
        .ok_or("forwarded request must be a JSON object")?;
    let string = |key: &str| object.get(key).and_then(Value::as_str).map(str::to_string);
    let surface = string("surface").map(|s| s.trim().to_string());
    let value = string("value");
    let form = match (surface, value) {
        (Some(surface), Some(value)) if !surface.is_empty() && !value.is_empty() => {
            form_for(surface, value)
        }
        _ => AskForm::Unjudgeable(
            "the forwarded request names no surface and value; the reference's serving node floors it to ask"
                .into(),
        ),
    };
    let (suggested_surface, suggested_patterns) = session_approval(object)
        .map(|(surface, patterns)| (Some(surface), patterns))
        .unwrap_or_default();
    Ok(Request {
        form,
        message: string("message"),
        suggested_patterns,
        agent: None,
        suggested_surface,
        forwarded: Some(Provenance {
            target: target.to_string(),
            id: string("id"),
            requester_session_id: string("requesterSessionId"),
            target_session_id: string("targetSessionId"),
            requester_agent_name: string("requesterAgentName"),
            source: string("source"),
        }),
    })
}

fn form_for(surface: String, value: String) -> AskForm {
    // `bash` and the built-in path tools forward their own argument:
    // judged as that tool call, with all of permfs's gates.
    if surface != "bash" && !is_built_in_path_tool(&surface) {
        return AskForm::Surface { surface, value };
    }
    let input = if surface == "bash" {
        json!({ "command": value })
    } else {
        json!({ "path": value })
    };
    AskForm::ToolCall {
        tool: surface,
        input,
    }
}

/// The child's `sessionApproval`, when well formed (a non-empty surface
/// and an array of strings), as the reference reads it; otherwise none.
fn session_approval(object: &Map<String, Value>) -> Option<(String, Vec<String>)> {
    let approval = object.get("sessionApproval")?.as_object()?;
    let surface = approval.get("surface")?.as_str()?.trim();
    let patterns = approval.get("patterns")?.as_array()?;
    let patterns = patterns
        .iter()
        .map(|p| p.as_str().map(str::to_string))
        .collect::<Option<Vec<String>>>()?;
    if surface.is_empty() {
        return None;
    }
    Some((surface.to_string(), patterns))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(extra: &str) -> Vec<u8> {
        format!(
            r#"{{"id":"1-a-2","createdAt":1,"requesterSessionId":"root","targetSessionId":"root",
                "requesterAgentName":"worker","message":"may I?"{extra}}}"#
        )
        .into_bytes()
    }

    #[test]
    fn bash_is_judged_as_the_tool_call_it_names() {
        let r = parse(
            &body(r#","source":"tool_call","surface":"bash","value":"git status; rm -rf /""#),
            "root",
        )
        .expect("parsed");
        assert_eq!(
            r.form,
            AskForm::ToolCall {
                tool: "bash".into(),
                input: json!({"command": "git status; rm -rf /"})
            }
        );
        assert_eq!(r.message.as_deref(), Some("may I?"));
        let from = r.forwarded.expect("provenance");
        assert_eq!(from.target, "root");
        assert_eq!(from.requester_session_id.as_deref(), Some("root"));
        assert_eq!(from.requester_agent_name.as_deref(), Some("worker"));
    }

    #[test]
    fn path_tools_carry_their_path_and_other_surfaces_their_value() {
        let r = parse(&body(r#","surface":"read","value":"notes.txt""#), "t").expect("parsed");
        assert_eq!(
            r.form,
            AskForm::ToolCall {
                tool: "read".into(),
                input: json!({"path": "notes.txt"})
            }
        );
        let r = parse(&body(r#","surface":"skill","value":"deploy""#), "t").expect("parsed");
        assert_eq!(
            r.form,
            AskForm::Surface {
                surface: "skill".into(),
                value: "deploy".into()
            }
        );
    }

    #[test]
    fn what_names_nothing_floors_to_ask_and_only_non_objects_are_invalid() {
        for extra in [
            "",
            r#","surface":"bash""#,
            r#","surface":"","value":"ls""#,
            r#","surface":null,"value":null"#,
            r#","surface":3,"value":"x""#,
        ] {
            let r = parse(&body(extra), "t").expect("parsed");
            assert!(matches!(r.form, AskForm::Unjudgeable(_)), "{extra}: {r:?}");
        }
        assert!(parse(b"[]", "t").is_err());
        assert!(parse(b"{not json", "t").is_err());
        // Identity fields are not required: a bare body still asks.
        let r = parse(br#"{"surface":"bash","value":"ls"}"#, "t").expect("parsed");
        assert!(matches!(r.form, AskForm::ToolCall { .. }));
    }

    #[test]
    fn session_approval_becomes_the_suggested_grant_only_when_well_formed() {
        let r = parse(
            &body(r#","surface":"bash","value":"git push","sessionApproval":{"surface":"bash","patterns":["git push *"]}"#),
            "t",
        )
        .expect("parsed");
        assert_eq!(r.suggested_surface.as_deref(), Some("bash"));
        assert_eq!(r.suggested_patterns, vec!["git push *".to_string()]);
        for bad in [
            r#","sessionApproval":{"surface":"","patterns":["x"]}"#,
            r#","sessionApproval":{"surface":"bash","patterns":["x",1]}"#,
            r#","sessionApproval":{"surface":"bash"}"#,
            r#","sessionApproval":"bash""#,
        ] {
            let r = parse(&body(bad), "t").expect("parsed");
            assert_eq!(r.suggested_surface, None, "{bad}");
            assert!(r.suggested_patterns.is_empty(), "{bad}");
        }
    }
}
