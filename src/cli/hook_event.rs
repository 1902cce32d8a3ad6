//! What a Claude Code / Codex hook event asks of permfs: pure, no I/O.
//!
//! Both agents run a command hook with one JSON event on stdin (their
//! shared convention: `session_id`, `cwd`, `hook_event_name`,
//! `permission_mode`, and for `PreToolUse` `tool_name`/`tool_input`). This
//! module turns that event into an [`Action`]: which session to ensure or
//! end, or which permfs request to ask. Kept apart from the mount client so
//! the mapping, which decides what permfs is asked to judge, is tested on
//! its own (a wrong mapping would judge the wrong thing).

use serde_json::{json, Map, Value};
use std::path::Path;

/// What one hook event asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// `SessionStart`: the agent's session must exist.
    StartSession,
    /// `SessionEnd`: end the agent's session.
    EndSession,
    /// `SubagentStart`: a child session for the subagent.
    StartSubagent {
        agent_id: String,
        agent_type: Option<String>,
    },
    /// `SubagentStop`: end the subagent's child session.
    StopSubagent { agent_id: String },
    /// `PreToolUse` / `PermissionRequest`: ask permfs this request, from
    /// the subagent's child session when the call carries an `agent_id`.
    Ask {
        request: Value,
        agent_id: Option<String>,
        agent_type: Option<String>,
    },
    /// Any other event: permfs has nothing to decide.
    Nothing,
}

/// One parsed event.
#[derive(Debug, Clone, PartialEq)]
pub struct HookEvent {
    pub event_name: String,
    pub session_id: String,
    pub cwd: String,
    pub permission_mode: Option<String>,
    pub action: Action,
}

fn text<'a>(event: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    event
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
}

/// Parses one hook event. The error says what is missing, for the deny
/// reason the agent (and the person reading its transcript) sees.
pub fn parse_event(event: &Value) -> Result<HookEvent, String> {
    let object = event
        .as_object()
        .ok_or("the hook event is not a JSON object")?;
    let event_name = text(object, "hook_event_name")
        .ok_or("the hook event has no hook_event_name")?
        .to_string();
    let session_id = text(object, "session_id")
        .ok_or("the hook event has no session_id")?
        .to_string();
    let cwd = text(object, "cwd").ok_or("the hook event has no cwd")?;
    if !cwd.starts_with('/') {
        return Err(format!("the hook event's cwd {cwd:?} is not absolute"));
    }
    let permission_mode = text(object, "permission_mode").map(str::to_string);
    let agent_id = text(object, "agent_id").map(str::to_string);
    let agent_type = text(object, "agent_type").map(str::to_string);
    let need_agent = || {
        agent_id
            .clone()
            .ok_or_else(|| format!("the {event_name} event has no agent_id"))
    };
    let action = match event_name.as_str() {
        "SessionStart" => Action::StartSession,
        "SessionEnd" => Action::EndSession,
        "SubagentStart" => Action::StartSubagent {
            agent_id: need_agent()?,
            agent_type: agent_type.clone(),
        },
        "SubagentStop" => Action::StopSubagent {
            agent_id: need_agent()?,
        },
        // PermissionRequest (Codex, and Claude Code when configured) is
        // the agent about to prompt for the same call: permfs judges it
        // alike, and its answer replaces the agent's prompt.
        "PreToolUse" | "PermissionRequest" => {
            let tool = text(object, "tool_name")
                .ok_or_else(|| format!("the {event_name} event has no tool_name"))?;
            let empty = Value::Object(Map::new());
            let input = object.get("tool_input").unwrap_or(&empty);
            let mut request = tool_request(tool, input, cwd)?;
            if let Some(request) = request.as_object_mut() {
                request.insert(
                    "message".into(),
                    Value::String(message(object, tool, permission_mode.as_deref())),
                );
            }
            Action::Ask {
                request,
                agent_id,
                agent_type,
            }
        }
        _ => Action::Nothing,
    };
    Ok(HookEvent {
        event_name,
        session_id,
        cwd: cwd.to_string(),
        permission_mode,
        action,
    })
}

/// The message shown to the decider: the agent's own description of the
/// call when it gave one, and the permission mode it runs in. The mode is
/// recorded, never obeyed: `bypassPermissions` does not bypass permfs.
fn message(event: &Map<String, Value>, tool: &str, mode: Option<&str>) -> String {
    let description = event
        .get("tool_input")
        .and_then(|i| i.get("description"))
        .and_then(Value::as_str)
        .filter(|d| !d.trim().is_empty());
    let mut parts = Vec::new();
    if let Some(description) = description {
        parts.push(description.to_string());
    }
    parts.push(format!("{tool} via hook"));
    if let Some(mode) = mode {
        parts.push(format!("permission_mode={mode}"));
    }
    if let Some(id) = text(event, "tool_use_id") {
        parts.push(format!("tool_use_id={id}"));
    }
    parts.join("; ")
}

/// A path the agent gave, absolute against the event's cwd: the session's
/// cwd was fixed when it was spawned and the agent may have moved since.
fn absolute(path: &str, cwd: &str) -> String {
    if path.starts_with('/') || path.starts_with('~') {
        path.to_string()
    } else {
        Path::new(cwd).join(path).to_string_lossy().into_owned()
    }
}

fn field<'a>(input: &'a Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str))
        .filter(|s| !s.trim().is_empty())
}

/// How permfs judges calls of one tool the agents offer their model: the
/// one table `tool_request` reads, and what `tests/agents/real_clients.rs` checks
/// the installed CLIs' real tool lists against, so that a tool a new
/// version adds fails that test by name instead of drifting in unnoticed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolMap {
    /// A shell command: the `bash` tool, its command in `keys`.
    Shell(&'static [&'static str]),
    /// A file the call reads, writes or edits (`read`/`write`/`edit`), its
    /// path in `keys`: the engine raises the path facts.
    File(&'static str, &'static [&'static str]),
    /// A search rooted at `path` (the cwd when absent): `grep`/`find`/`ls`.
    Search(&'static str),
    /// A surface with the value of the first of `keys` the call has.
    Surface(&'static str, &'static [&'static str]),
    /// Codex's patch tool: the envelope, read for the files it writes.
    Patch,
    /// Claude Code's `Monitor`: a shell command (`command`), or a
    /// WebSocket (`ws.url`) asked on the `monitor` surface.
    Monitor,
    /// Known, and deliberately asked on its own surface (the tool name in
    /// lower case, no value): what it does touches no file or command
    /// permfs can name, or it only talks to the agent's own machinery, so a
    /// config rule on that surface, or the default, answers.
    OwnSurface,
}

/// The tool map: every tool name of Claude Code and Codex permfs knows
/// (after [`bare_tool_name`] strips Codex's namespace). `None` is a tool
/// permfs has not looked at; it is asked on its own surface all the same.
pub fn tool_map(tool: &str) -> Option<ToolMap> {
    use ToolMap::*;
    Some(match bare_tool_name(tool) {
        // Codex's `exec_command` reaches hooks as `Bash` too.
        "Bash" => Shell(&["command"]),
        "exec_command" => Shell(&["cmd"]),
        "Read" => File("read", &["file_path", "path"]),
        "NotebookRead" => File("read", &["notebook_path", "file_path"]),
        // Codex's image viewer reads a local file.
        "view_image" => File("read", &["path"]),
        "Write" => File("write", &["file_path", "path"]),
        "Edit" | "MultiEdit" => File("edit", &["file_path", "path"]),
        "NotebookEdit" => File("edit", &["notebook_path", "file_path"]),
        "Grep" => Search("grep"),
        "Glob" => Search("find"),
        "LS" => Search("ls"),
        "WebFetch" => Surface("webfetch", &["url"]),
        "WebSearch" | "web_search" => Surface("websearch", &["query"]),
        // Claude Code's sub-agent tool is `Agent` (2.1.x); the SDK's tool
        // list still says `Task`: one surface, so one rule covers both.
        "Agent" | "Task" => Surface("agent", &["subagent_type"]),
        "apply_patch" | "ApplyPatch" => Patch,
        "Monitor" => Monitor,
        // Claude Code 2.1.x: its own machinery (skills, deferred-tool
        // loading, tasks, schedules, worktrees, workflows of sub-agents
        // whose own calls come through the hooks), and the todo list.
        "Skill"
        | "ToolSearch"
        | "DeferredToolPlaceholder"
        | "ListAgents"
        | "ReportFindings"
        | "ScheduleWakeup"
        | "Workflow"
        | "CronCreate"
        | "CronDelete"
        | "CronList"
        | "EnterWorktree"
        | "ExitWorktree"
        | "SendMessage"
        | "TaskStop"
        | "TodoWrite"
        | "ExitPlanMode"
        | "KillShell"
        | "BashOutput" => OwnSurface,
        // Codex 0.171: input to a running `exec_command` (its own surface:
        // a rule must say whether a running shell may be fed), questions
        // to the user, goals, and the multi-agent tools.
        "write_stdin" | "request_user_input" | "get_goal" | "create_goal" | "update_goal"
        | "spawn_agent" | "wait_agent" | "close_agent" | "resume_agent" | "send_input" => {
            OwnSurface
        }
        _ => return None,
    })
}

/// Maps one tool call to the permfs request that judges it, with every
/// field the engine can use. A tool permfs does not know is asked on its
/// own surface (the tool name in lower case, pi's convention), with no
/// value: a config rule on that surface, or the default, answers.
pub fn tool_request(tool: &str, input: &Value, cwd: &str) -> Result<Value, String> {
    let required = |keys: &[&str]| {
        field(input, keys).ok_or_else(|| format!("the {tool} call has no {}", keys.join(" or ")))
    };
    if let Some(rest) = tool.strip_prefix("mcp__") {
        let (server, name) = rest
            .split_once("__")
            .filter(|(s, t)| !s.is_empty() && !t.is_empty())
            .ok_or_else(|| format!("the MCP tool name {tool:?} is not mcp__<server>__<tool>"))?;
        return Ok(json!({"tool": "mcp", "input": {
            "server": server,
            "tool": name,
            "arguments": input,
        }}));
    }
    let own_surface = || surface(&bare_tool_name(tool).to_lowercase(), None);
    let Some(map) = tool_map(tool) else {
        return Ok(own_surface());
    };
    Ok(match map {
        ToolMap::Shell(keys) => {
            // Not `field`: an empty command is still the command asked.
            let command = keys
                .iter()
                .find_map(|k| input.get(*k).and_then(Value::as_str))
                .ok_or_else(|| format!("the {tool} call has no {}", keys.join(" or ")))?;
            json!({"tool": "bash", "input": {"command": command}})
        }
        ToolMap::File(permfs_tool, keys) => {
            json!({"tool": permfs_tool, "input": {"path": absolute(required(keys)?, cwd)}})
        }
        // A search tool without a path searches the cwd.
        ToolMap::Search(permfs_tool) => {
            let path = field(input, &["path"]).unwrap_or(cwd);
            json!({"tool": permfs_tool, "input": {"path": absolute(path, cwd)}})
        }
        ToolMap::Surface(name, keys) => surface(name, field(input, keys)),
        // The envelope is read for the files it writes
        // (`src/facts/patch.rs`); one that cannot be read floors to ask.
        ToolMap::Patch => {
            let patch = field(input, &["patch", "input", "command"])
                .or_else(|| input.as_str())
                .unwrap_or_default();
            json!({"tool": "apply_patch", "input": {"patch": patch}})
        }
        ToolMap::Monitor => match (field(input, &["command"]), input.pointer("/ws/url")) {
            (Some(command), _) => json!({"tool": "bash", "input": {"command": command}}),
            (None, Some(Value::String(url))) => surface("monitor", Some(url)),
            _ => return Err(format!("the {tool} call has no command or ws.url")),
        },
        ToolMap::OwnSurface => own_surface(),
    })
}

/// Codex's multi-agent tools arrive with their namespace glued on
/// (`multi_agent_v1wait_agent`, and `multi_agent_v1.wait_agent` /
/// `multi_agent_v1__wait_agent` elsewhere): the surface is the tool's own
/// name (`wait_agent`), so a rule on `spawn_agent` holds whichever
/// namespace version the agent runs.
fn bare_tool_name(tool: &str) -> &str {
    let Some(rest) = tool.strip_prefix("multi_agent_v") else {
        return tool;
    };
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    let rest = rest.trim_start_matches(['.', '_', ':', '/']);
    if rest.is_empty() {
        tool
    } else {
        rest
    }
}

fn surface(surface: &str, value: Option<&str>) -> Value {
    match value {
        Some(value) => json!({"surface": surface, "value": value}),
        None => json!({"surface": surface}),
    }
}

/// A session name made from an agent's id: what `ctl` takes as one word
/// and the tree takes as a name. Anything but ASCII letters, digits, `-`,
/// `_` and `.` becomes `-`; a name that would be `.`/`..` or empty gets a
/// prefix; at most 64 bytes.
pub fn session_name(id: &str) -> String {
    let mut name: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .take(64)
        .collect();
    if name.is_empty() || name.chars().all(|c| c == '.') {
        name = format!("s-{name}");
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(event: Value) -> Value {
        match parse_event(&event).expect("valid").action {
            Action::Ask { mut request, .. } => {
                request.as_object_mut().map(|o| o.remove("message"));
                request
            }
            other => panic!("not an ask: {other:?}"),
        }
    }

    fn pre(tool: &str, input: Value) -> Value {
        ask(json!({
            "session_id": "abc", "cwd": "/w", "hook_event_name": "PreToolUse",
            "permission_mode": "default", "tool_name": tool, "tool_input": input,
            "tool_use_id": "t1", "transcript_path": null, "model": "m"
        }))
    }

    #[test]
    fn tools_map_to_permfs_requests() {
        assert_eq!(
            pre("Bash", json!({"command": "git status", "description": "d"})),
            json!({"tool": "bash", "input": {"command": "git status"}})
        );
        assert_eq!(
            pre("Read", json!({"file_path": "/w/.env"})),
            json!({"tool": "read", "input": {"path": "/w/.env"}})
        );
        assert_eq!(
            pre("Write", json!({"file_path": "a.rs", "content": "x"})),
            json!({"tool": "write", "input": {"path": "/w/a.rs"}})
        );
        assert_eq!(
            pre("MultiEdit", json!({"file_path": "/x/a", "edits": []})),
            json!({"tool": "edit", "input": {"path": "/x/a"}})
        );
        assert_eq!(
            pre("NotebookEdit", json!({"notebook_path": "/w/n.ipynb"})),
            json!({"tool": "edit", "input": {"path": "/w/n.ipynb"}})
        );
        assert_eq!(
            pre("Grep", json!({"pattern": "x"})),
            json!({"tool": "grep", "input": {"path": "/w"}})
        );
        assert_eq!(
            pre("Glob", json!({"pattern": "*.rs", "path": "src"})),
            json!({"tool": "find", "input": {"path": "/w/src"}})
        );
        assert_eq!(
            pre("WebFetch", json!({"url": "https://x.org", "prompt": "p"})),
            json!({"surface": "webfetch", "value": "https://x.org"})
        );
        assert_eq!(
            pre("WebSearch", json!({"query": "rust"})),
            json!({"surface": "websearch", "value": "rust"})
        );
        assert_eq!(
            pre("mcp__github__create_issue", json!({"title": "t"})),
            json!({"tool": "mcp", "input": {"server": "github", "tool": "create_issue", "arguments": {"title": "t"}}})
        );
        assert_eq!(
            pre("TodoWrite", json!({"todos": []})),
            json!({"surface": "todowrite"})
        );
    }

    #[test]
    fn shells_and_files_by_other_names_are_judged_as_such() {
        assert_eq!(
            pre(
                "exec_command",
                json!({"cmd": "cat .env", "yield_time_ms": 10})
            ),
            json!({"tool": "bash", "input": {"command": "cat .env"}})
        );
        assert_eq!(
            pre(
                "Monitor",
                json!({"command": "tail -f log", "description": "d"})
            ),
            json!({"tool": "bash", "input": {"command": "tail -f log"}})
        );
        assert_eq!(
            pre(
                "Monitor",
                json!({"ws": {"url": "wss://x.org/s"}, "description": "d"})
            ),
            json!({"surface": "monitor", "value": "wss://x.org/s"})
        );
        assert_eq!(
            pre("view_image", json!({"path": "shot.png"})),
            json!({"tool": "read", "input": {"path": "/w/shot.png"}})
        );
        assert_eq!(
            pre(
                "write_stdin",
                json!({"session_id": 3, "chars": "rm -rf /\n"})
            ),
            json!({"surface": "write_stdin"})
        );
        assert_eq!(tool_map("Workflow"), Some(ToolMap::OwnSurface));
        assert_eq!(
            tool_map("multi_agent_v1spawn_agent"),
            Some(ToolMap::OwnSurface)
        );
        assert_eq!(tool_map("SomethingNew"), None);
    }

    #[test]
    fn a_codex_patch_is_asked_with_its_envelope() {
        let patch = "*** Begin Patch\n*** Update File: .env\n*** End Patch\n";
        assert_eq!(
            tool_request("apply_patch", &json!({"command": patch}), "/w").expect("maps"),
            json!({"tool": "apply_patch", "input": {"patch": patch}})
        );
    }

    #[test]
    fn drifting_tool_names_land_on_one_surface() {
        for tool in [
            "multi_agent_v1wait_agent",
            "multi_agent_v1.wait_agent",
            "multi_agent_v2__wait_agent",
            "wait_agent",
        ] {
            assert_eq!(
                pre(tool, json!({"ids": ["a"]})),
                json!({"surface": "wait_agent"}),
                "{tool}"
            );
        }
        assert_eq!(
            pre("multi_agent_v1", json!({})),
            json!({"surface": "multi_agent_v1"})
        );
        for tool in ["Agent", "Task"] {
            assert_eq!(
                pre(tool, json!({"subagent_type": "Explore", "prompt": "p"})),
                json!({"surface": "agent", "value": "Explore"})
            );
        }
        let request = parse_event(&json!({
            "session_id": "s", "turn_id": "t", "cwd": "/w",
            "hook_event_name": "PermissionRequest", "permission_mode": "bypassPermissions",
            "tool_name": "Bash", "tool_input": {"command": "ls"}
        }))
        .expect("valid");
        assert!(matches!(request.action, Action::Ask { .. }));
    }

    #[test]
    fn a_call_missing_what_permfs_judges_is_an_error() {
        let event = |tool: &str, input: Value| {
            parse_event(&json!({
                "session_id": "a", "cwd": "/w", "hook_event_name": "PreToolUse",
                "tool_name": tool, "tool_input": input
            }))
        };
        assert!(event("Bash", json!({})).is_err());
        assert!(event("Read", json!({"file_path": ""})).is_err());
        assert!(event("mcp__x", json!({})).is_err());
        assert!(event("exec_command", json!({"command": "ls"})).is_err());
        assert!(event("Monitor", json!({"description": "d"})).is_err());
        assert!(event("view_image", json!({})).is_err());
        assert!(parse_event(&json!({"session_id": "a", "cwd": "/w"})).is_err());
        assert!(parse_event(
            &json!({"session_id": "a", "cwd": "rel", "hook_event_name": "SessionStart"})
        )
        .is_err());
        assert!(parse_event(&json!([])).is_err());
    }

    #[test]
    fn lifecycle_events_and_the_message() {
        let start = parse_event(&json!({
            "session_id": "s", "cwd": "/w", "hook_event_name": "SubagentStart",
            "agent_id": "a1", "agent_type": "Explore"
        }))
        .expect("valid");
        assert_eq!(
            start.action,
            Action::StartSubagent {
                agent_id: "a1".into(),
                agent_type: Some("Explore".into())
            }
        );
        let call = parse_event(&json!({
            "session_id": "s", "cwd": "/w", "hook_event_name": "PreToolUse",
            "permission_mode": "bypassPermissions", "tool_name": "Bash",
            "tool_input": {"command": "ls", "description": "list"}, "agent_id": "a1"
        }))
        .expect("valid");
        let Action::Ask {
            request, agent_id, ..
        } = call.action
        else {
            panic!("an ask")
        };
        assert_eq!(agent_id.as_deref(), Some("a1"));
        assert_eq!(
            request["message"],
            "list; Bash via hook; permission_mode=bypassPermissions"
        );
        let other =
            parse_event(&json!({"session_id": "s", "cwd": "/w", "hook_event_name": "Stop"}));
        assert_eq!(other.map(|e| e.action), Ok(Action::Nothing));
    }

    #[test]
    fn session_names_are_one_safe_word() {
        assert_eq!(session_name("3f2a-9b"), "3f2a-9b");
        assert_eq!(session_name("a b/c\n"), "a-b-c-");
        assert_eq!(session_name(".."), "s-..");
        assert_eq!(session_name(""), "s-");
        assert_eq!(session_name(&"x".repeat(100)).len(), 64);
    }
}
