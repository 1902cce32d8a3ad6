//! The settings that make Claude Code and Codex run `permfs hook`, and
//! the command line they run.
//!
//! Both agents treat only exit status 2 (and a JSON deny) from a hook as
//! blocking: a hook that is not found (the shell's 127), crashes, exits 1
//! or outlives the agent's timeout is a *non-blocking* error, and the tool
//! call goes ahead. So the command written into their settings
//!
//! - names the running `permfs` by its absolute, canonical path (never a
//!   bare `permfs` looked up on an agent's PATH that may not have it);
//! - is wrapped in `/bin/sh -c '…'` (the agents run hooks through a shell,
//!   Codex through the user's `$SHELL -lc`, which may not be POSIX: the
//!   outer line is one command with single-quoted arguments, which every
//!   shell reads alike) that turns every status but 0 and 2 into 2 with a
//!   reason on stderr, so a missing or crashing binary blocks;
//! - gives the agent a timeout above the hook's own `--timeout-secs`: the
//!   hook's watchdog answers `deny` (exit 2) before the agent would give up
//!   on it, because an agent's own timeout does not block.
//!
//! Claude Code (2.1.295 and later) also takes `"onFailure": "block"` on a
//! hook, which blocks when the hook cannot start, times out or exits with
//! another status; it is set on the tool-call events as a second wall.

use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AgentKind {
    ClaudeCode,
    Codex,
}

impl AgentKind {
    pub fn name(self) -> &'static str {
        match self {
            AgentKind::ClaudeCode => "claude-code",
            AgentKind::Codex => "codex",
        }
    }
}

/// Codex clamps a `SessionEnd` hook's timeout to 3 s (and warns on every
/// run when asked for more); Claude Code gives `SessionEnd` 1.5 s unless
/// `CLAUDE_CODE_SESSIONEND_HOOKS_TIMEOUT_MS` says otherwise. Ending a
/// session is one `ctl` write.
pub const SESSION_END_TIMEOUT_SECS: u64 = 3;

/// How much longer than the hook's own deadline the agent waits: room for
/// the hook to print its deny and exit.
pub const AGENT_TIMEOUT_MARGIN_SECS: u64 = 10;

/// The events permfs takes, per agent. Claude Code answers a tool call
/// for good at `PreToolUse` (an `allow` there skips its own prompt); Codex
/// accepts only a deny at `PreToolUse` and asks `PermissionRequest` hooks
/// before any prompt of its own, so permfs answers there too.
pub fn events(agent: AgentKind) -> &'static [&'static str] {
    match agent {
        AgentKind::ClaudeCode => &[
            "PreToolUse",
            "SessionStart",
            "SessionEnd",
            "SubagentStart",
            "SubagentStop",
        ],
        AgentKind::Codex => &[
            "PreToolUse",
            "PermissionRequest",
            "SessionStart",
            "SessionEnd",
            "SubagentStart",
            "SubagentStop",
        ],
    }
}

/// The events on which a failed hook must block a tool call.
pub fn decides(event: &str) -> bool {
    matches!(event, "PreToolUse" | "PermissionRequest")
}

/// The binary the agent's settings will run, canonical and absolute:
/// `permfs-hook` beside the running `permfs` when it is there and
/// executable (it starts faster: `src/bin/permfs-hook.rs`), else the
/// running `permfs` itself, when it is an executable file.
pub fn running_binary() -> Result<PathBuf, String> {
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot tell where the running permfs is: {e}"))?;
    let exe = std::fs::canonicalize(&exe).map_err(|e| {
        format!(
            "the running permfs ({}) has no path now: {e}; reinstall it and print the config again",
            exe.display()
        )
    })?;
    if let Some(hook) = exe.parent().map(|dir| dir.join(HOOK_BINARY)) {
        if hook != exe && check_executable(&hook).is_ok() {
            if let Ok(hook) = std::fs::canonicalize(&hook) {
                return Ok(hook);
            }
        }
    }
    check_executable(&exe)?;
    Ok(exe)
}

/// The hook's own binary, installed beside `permfs`.
pub const HOOK_BINARY: &str = "permfs-hook";

/// Ok when `path` is a regular file someone may execute.
pub fn check_executable(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path)
        .map_err(|e| format!("{} cannot be run by the agent: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a file", path.display()));
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err(format!(
            "{} is not executable (mode {:o}); the agent could not run it",
            path.display(),
            meta.permissions().mode() & 0o7777
        ));
    }
    Ok(())
}

/// A path written into the command as one word: only characters no shell
/// treats specially, so the same line means the same in sh, bash, zsh and
/// fish. Anything else is refused rather than quoted.
fn plain_word(path: &Path) -> Result<&str, String> {
    let text = path.to_str().filter(|t| {
        !t.is_empty()
            && t.chars()
                .all(|c| c.is_ascii_alphanumeric() || "/._-+@:,=%".contains(c))
    });
    text.ok_or_else(|| {
        format!(
            "{} holds characters a hook command line cannot carry unquoted in every shell; move it to a path of letters, digits and / . _ - + @ : , = %",
            path.display()
        )
    })
}

/// The line the agent runs: the binary by its absolute path, inside a
/// `/bin/sh -c` guard that makes every failure a blocking exit 2 with a
/// reason.
pub fn hook_command(
    binary: &Path,
    agent: AgentKind,
    timeout_secs: u64,
    mount: Option<&Path>,
) -> Result<String, String> {
    let binary = plain_word(binary)?;
    let mut line = format!(
        "/bin/sh -c '\"$0\" \"$@\" || {{ s=$?; [ \"$s\" -eq 2 ] || echo \"permfs hook failed (exit status $s; 127: $0 is missing, 126: not executable, above 128: killed by a signal): the call is blocked\" >&2; exit 2; }}' {binary} hook --agent {} --timeout-secs {timeout_secs}",
        agent.name()
    );
    if let Some(mount) = mount {
        line.push_str(&format!(" --mount {}", plain_word(mount)?));
    }
    Ok(line)
}

/// The agent's hook timeout for one event, in seconds.
pub fn agent_timeout(event: &str, timeout_secs: u64) -> u64 {
    if event == "SessionEnd" {
        SESSION_END_TIMEOUT_SECS
    } else {
        timeout_secs.max(1) + AGENT_TIMEOUT_MARGIN_SECS
    }
}

/// The `hooks` object (event → matcher groups) for `agent`: the same shape
/// in Claude Code's settings.json and Codex's hooks.json.
pub fn hooks_value(agent: AgentKind, command: &str, timeout_secs: u64) -> Value {
    let mut hooks = Map::new();
    for event in events(agent) {
        let mut hook = json!({
            "type": "command",
            "command": command,
            "timeout": agent_timeout(event, timeout_secs),
        });
        if agent == AgentKind::ClaudeCode && decides(event) {
            hook["onFailure"] = json!("block");
        }
        // Claude Code needs a matcher on tool events ("*": every tool);
        // Codex's matcher is a regex, and none means every tool.
        let group = match (agent, decides(event)) {
            (AgentKind::ClaudeCode, true) => json!({"matcher": "*", "hooks": [hook]}),
            _ => json!({"hooks": [hook]}),
        };
        hooks.insert((*event).to_string(), json!([group]));
    }
    Value::Object(hooks)
}

/// The settings to paste or install: `{"hooks": …}`, plain JSON, for
/// Claude Code's `settings.json` and Codex's `hooks.json` alike.
pub fn settings_snippet(agent: AgentKind, command: &str, timeout_secs: u64) -> String {
    let settings = json!({"hooks": hooks_value(agent, command, timeout_secs)});
    format!(
        "{}\n",
        serde_json::to_string_pretty(&settings).unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_names_the_binary_and_blocks_every_failure() {
        let line = hook_command(
            Path::new("/opt/bin/permfs"),
            AgentKind::Codex,
            605,
            Some(Path::new("/m")),
        )
        .expect("plain paths");
        assert!(line.starts_with("/bin/sh -c '"), "{line}");
        assert!(
            line.ends_with("' /opt/bin/permfs hook --agent codex --timeout-secs 605 --mount /m"),
            "{line}"
        );
        assert!(hook_command(Path::new("/a b/permfs"), AgentKind::Codex, 605, None).is_err());
        assert!(hook_command(Path::new("/a'b"), AgentKind::Codex, 605, None).is_err());
    }

    #[test]
    fn timeouts_outlast_the_hook_and_session_end_fits_codex() {
        let claude: Value =
            serde_json::from_str(&settings_snippet(AgentKind::ClaudeCode, "x", 590)).expect("JSON");
        let pre = &claude["hooks"]["PreToolUse"][0];
        assert_eq!(pre["matcher"], "*");
        assert_eq!(pre["hooks"][0]["timeout"], 600);
        assert_eq!(pre["hooks"][0]["onFailure"], "block");
        assert_eq!(claude["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"], 3);
        assert!(claude["hooks"].get("PermissionRequest").is_none());
        let codex: Value =
            serde_json::from_str(&settings_snippet(AgentKind::Codex, "x", 590)).expect("JSON");
        assert_eq!(codex["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"], 3);
        assert_eq!(
            codex["hooks"]["PermissionRequest"][0]["hooks"][0]["timeout"],
            600
        );
        assert!(codex["hooks"]["PreToolUse"][0].get("matcher").is_none());
        assert!(codex["hooks"]["PreToolUse"][0]["hooks"][0]
            .get("onFailure")
            .is_none());
    }

    #[test]
    fn a_file_that_is_not_executable_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("permfs");
        std::fs::write(&file, "x").expect("written");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert!(check_executable(&file)
            .expect_err("not executable")
            .contains("not executable"));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        assert!(check_executable(&file).is_ok());
        assert!(check_executable(dir.path()).is_err());
        assert!(check_executable(&dir.path().join("gone")).is_err());
    }
}
