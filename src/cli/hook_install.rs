//! `permfs hook install` and `permfs hook check`: set-up that cannot
//! silently do nothing.
//!
//! `install` merges permfs's hooks into the agent's own settings file
//! (Claude Code's `settings.json`, Codex's `hooks.json`): other hooks and
//! settings stay as they were, an earlier permfs entry is replaced, the
//! old file is kept as a backup, and a file that is not JSON is refused,
//! never overwritten. `check` reads the same files back and says whether
//! the agent will really run the hook: installed, (for Codex) trusted, the
//! binary an executable file, the mount there, the timeouts ones the agent
//! keeps.

use super::hook_config::{
    agent_timeout, decides, events, hook_command, hooks_value, running_binary, AgentKind,
    SESSION_END_TIMEOUT_SECS,
};
use super::mount_client::MountClient;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The user's settings (`~/.claude/settings.json`, `~/.codex/hooks.json`).
    User,
    /// The project's (`<dir>/.claude/settings.json`, `<dir>/.codex/hooks.json`).
    Project,
}

/// Which settings a command works on: the user's, the project's in
/// `--dir`, or (for `check` without either) both.
#[derive(Debug, clap::Args)]
pub struct Where {
    /// The user's settings (install's default).
    #[arg(long, conflicts_with = "project")]
    pub user: bool,
    /// The project's settings, in --dir (default: the current directory).
    #[arg(long)]
    pub project: bool,
    /// The project directory for --project.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    #[arg(value_enum)]
    pub agent: AgentKind,
    #[command(flatten)]
    pub place: Where,
    /// The permfs mount the hook asks (default: $PERMFS_MOUNT); written
    /// into the command, so the agent needs no environment.
    #[arg(long)]
    pub mount: Option<PathBuf>,
    /// The hook's own deadline (seconds); the agent's timeout is set above it.
    #[arg(long, default_value_t = 605)]
    pub timeout_secs: u64,
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    #[arg(value_enum)]
    pub agent: AgentKind,
    #[command(flatten)]
    pub place: Where,
}

fn home() -> Result<PathBuf, String> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| "$HOME is not set: cannot find the user's settings".to_string())
}

/// Codex's home: `$CODEX_HOME`, else `~/.codex`.
fn codex_home() -> Result<PathBuf, String> {
    match std::env::var_os("CODEX_HOME").filter(|h| !h.is_empty()) {
        Some(dir) => Ok(PathBuf::from(dir)),
        None => Ok(home()?.join(".codex")),
    }
}

fn project_dir(dir: Option<&Path>) -> Result<PathBuf, String> {
    let dir = match dir {
        Some(dir) => dir.to_path_buf(),
        None => std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?,
    };
    std::fs::canonicalize(&dir).map_err(|e| format!("{}: {e}", dir.display()))
}

/// The settings file permfs's hooks go into.
pub fn settings_path(
    agent: AgentKind,
    scope: Scope,
    dir: Option<&Path>,
) -> Result<PathBuf, String> {
    Ok(match (agent, scope) {
        (AgentKind::ClaudeCode, Scope::User) => home()?.join(".claude/settings.json"),
        (AgentKind::ClaudeCode, Scope::Project) => project_dir(dir)?.join(".claude/settings.json"),
        (AgentKind::Codex, Scope::User) => codex_home()?.join("hooks.json"),
        (AgentKind::Codex, Scope::Project) => project_dir(dir)?.join(".codex/hooks.json"),
    })
}

/// Whether a hook entry is permfs's for `agent` (what install replaces).
fn is_ours(hook: &Value, agent: AgentKind) -> bool {
    hook["command"]
        .as_str()
        .is_some_and(|c| c.contains(&format!(" hook --agent {} ", agent.name())))
}

/// `existing` with permfs's hooks for `agent` in place of any earlier
/// ones; everything else kept in its order.
pub fn merge(existing: &Value, ours: &Value, agent: AgentKind) -> Result<Value, String> {
    let mut settings = match existing {
        Value::Null => Map::new(),
        Value::Object(map) => map.clone(),
        _ => return Err("the settings file is not a JSON object".into()),
    };
    let hooks = settings
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(hooks) = hooks.as_object_mut() else {
        return Err("its \"hooks\" is not an object".into());
    };
    let Some(ours) = ours.as_object() else {
        return Err("internal: the hooks to install are not an object".into());
    };
    for (event, groups) in ours {
        let list = hooks
            .entry(event.clone())
            .or_insert_with(|| Value::Array(Vec::new()));
        let Some(list) = list.as_array_mut() else {
            return Err(format!("its hooks.{event} is not a list"));
        };
        list.retain(|group| {
            !group["hooks"]
                .as_array()
                .is_some_and(|hs| hs.iter().any(|h| is_ours(h, agent)))
        });
        if let Some(groups) = groups.as_array() {
            list.extend(groups.iter().cloned());
        }
    }
    Ok(Value::Object(settings))
}

fn read_settings(path: &Path) -> Result<Option<Value>, String> {
    match std::fs::read_to_string(path) {
        Ok(text) if text.trim().is_empty() => Ok(Some(Value::Null)),
        Ok(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
            format!(
                "{} is not JSON ({e}); fix it by hand, permfs does not overwrite it",
                path.display()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

pub fn install(args: InstallArgs) -> i32 {
    match try_install(&args) {
        Ok(report) => {
            println!("{report}");
            0
        }
        Err(reason) => {
            eprintln!("permfs hook install: {reason}");
            1
        }
    }
}

fn try_install(args: &InstallArgs) -> Result<String, String> {
    let scope = if args.place.project {
        Scope::Project
    } else {
        Scope::User
    };
    let path = settings_path(args.agent, scope, args.place.dir.as_deref())?;
    let binary = running_binary()?;
    let mount = args.mount.clone().or_else(|| {
        std::env::var_os("PERMFS_MOUNT")
            .filter(|m| !m.is_empty())
            .map(PathBuf::from)
    });
    let mount = match mount {
        Some(mount) => {
            let mount = std::fs::canonicalize(&mount)
                .map_err(|e| format!("the mount {}: {e}", mount.display()))?;
            MountClient::new(mount.clone()).check_mount()?;
            Some(mount)
        }
        None => None,
    };
    let command = hook_command(&binary, args.agent, args.timeout_secs, mount.as_deref())?;
    let ours = hooks_value(args.agent, &command, args.timeout_secs);
    let existing = read_settings(&path)?;
    let merged = merge(existing.as_ref().unwrap_or(&Value::Null), &ours, args.agent)
        .map_err(|e| format!("{}: {e}; permfs does not overwrite it", path.display()))?;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    let mut report = String::new();
    if existing.is_some() {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let backup = path.with_file_name(format!(
            "{}.permfs-backup-{stamp}",
            path.file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("settings")
        ));
        std::fs::copy(&path, &backup).map_err(|e| format!("backup {}: {e}", backup.display()))?;
        report.push_str(&format!("backup: {}\n", backup.display()));
    }
    let text = serde_json::to_string_pretty(&merged).map_err(|e| e.to_string())? + "\n";
    let temporary = path.with_extension("permfs-tmp");
    std::fs::write(&temporary, text)
        .and_then(|()| std::fs::rename(&temporary, &path))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    report.push_str(&format!(
        "installed: permfs's {} hooks ({}) in {}\n",
        args.agent.name(),
        events(args.agent).join(", "),
        path.display()
    ));
    if mount.is_none() {
        report.push_str("the hook finds the mount through $PERMFS_MOUNT (else ./mount): export it where the agent starts, or install again with --mount\n");
    }
    report.push_str(&match args.agent {
        AgentKind::ClaudeCode => "Claude Code reads them at its next start; `permfs hook check claude-code` checks them.".to_string(),
        AgentKind::Codex => format!(
            "Codex runs them only once trusted (until then `codex exec` skips them in silence): start `codex`, type /hooks and trust the {} permfs hooks; or run each time with `codex --dangerously-bypass-hook-trust`. Then `permfs hook check codex`.",
            events(args.agent).len()
        ),
    });
    Ok(report)
}

pub fn check(args: CheckArgs) -> i32 {
    let scopes: &[Scope] = match (args.place.user, args.place.project) {
        (true, _) => &[Scope::User],
        (_, true) => &[Scope::Project],
        _ => &[Scope::User, Scope::Project],
    };
    let mut found = false;
    let mut problems = 0;
    for scope in scopes {
        let path = match settings_path(args.agent, *scope, args.place.dir.as_deref()) {
            Ok(path) => path,
            Err(reason) => {
                println!("?? {reason}");
                problems += 1;
                continue;
            }
        };
        let settings = match read_settings(&path) {
            Ok(Some(settings)) => settings,
            Ok(None) => continue,
            Err(reason) => {
                println!("NO {reason}");
                problems += 1;
                continue;
            }
        };
        let lines = check_file(args.agent, &path, &settings);
        if lines.is_empty() {
            continue;
        }
        found = true;
        println!("{}:", path.display());
        for (ok, line) in lines {
            println!("  {} {line}", if ok { "ok" } else { "NO" });
            problems += usize::from(!ok);
        }
    }
    if !found {
        println!(
            "NO permfs's {} hooks are not installed: `permfs hook install {}`",
            args.agent.name(),
            args.agent.name()
        );
        return 1;
    }
    if problems > 0 {
        println!("{problems} problem(s): the agent would not run every permfs hook as it should");
        1
    } else {
        println!("the agent will run permfs's hooks");
        0
    }
}

/// Every check of one settings file: (passed, what it says).
pub fn check_file(agent: AgentKind, path: &Path, settings: &Value) -> Vec<(bool, String)> {
    let mut lines = Vec::new();
    let mut any = false;
    let mut commands = Vec::new();
    for event in events(agent) {
        let groups = settings["hooks"][event]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mine: Vec<(usize, usize, Value)> = groups
            .iter()
            .enumerate()
            .flat_map(|(g, group)| {
                group["hooks"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .enumerate()
                    .filter(|(_, h)| is_ours(h, agent))
                    .map(move |(h, hook)| (g, h, hook))
            })
            .collect();
        let Some((group, handler, hook)) = mine.first().cloned() else {
            lines.push((false, format!("{event}: no permfs hook")));
            continue;
        };
        any = true;
        let command = hook["command"].as_str().unwrap_or("").to_string();
        let deadline = word_after(&command, "--timeout-secs")
            .and_then(|w| w.parse::<u64>().ok())
            .unwrap_or(605);
        let timeout = hook["timeout"].as_u64();
        let wanted = agent_timeout(event, deadline);
        let timeout_ok = match (*event, timeout) {
            ("SessionEnd", Some(t)) => {
                agent == AgentKind::ClaudeCode || t <= SESSION_END_TIMEOUT_SECS
            }
            (_, Some(t)) => t > deadline,
            (_, None) => false,
        };
        lines.push((
            timeout_ok,
            format!(
                "{event}: timeout {} (the hook denies at {deadline}s; {wanted} expected)",
                timeout
                    .map(|t| t.to_string())
                    .unwrap_or_else(|| "missing".into())
            ),
        ));
        if agent == AgentKind::ClaudeCode && decides(event) {
            let block = hook["onFailure"] == "block";
            lines.push((
                block,
                format!(
                    "{event}: onFailure {}",
                    if block {
                        "block"
                    } else {
                        "not set (a failure would not block in Claude Code 2.1.295+)"
                    }
                ),
            ));
        }
        if agent == AgentKind::Codex {
            lines.push(codex_trust(path, event, group, handler));
        }
        if !commands.contains(&command) {
            commands.push(command);
        }
    }
    if !any {
        return Vec::new();
    }
    for command in commands {
        lines.extend(check_command(&command));
    }
    lines
}

/// Whether the ELF binary at `path` asks for a program interpreter (the
/// dynamic loader, whose work is most of a small Rust process's start);
/// `None` when it is not a 64-bit little-endian ELF file or cannot be read.
fn needs_loader(path: &Path) -> Option<bool> {
    use std::io::Read;
    const PT_INTERP: u32 = 3;
    let mut head = vec![0u8; 64 * 1024];
    let mut file = std::fs::File::open(path).ok()?;
    let read = file.read(&mut head).ok()?;
    let head = &head[..read];
    if head.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let u16_at = |at: usize| Some(u16::from_le_bytes(head.get(at..at + 2)?.try_into().ok()?));
    let phoff = u64::from_le_bytes(head.get(32..40)?.try_into().ok()?) as usize;
    let (entry, count) = (usize::from(u16_at(54)?), usize::from(u16_at(56)?));
    let mut interp = false;
    for i in 0..count {
        let at = phoff.checked_add(i.checked_mul(entry)?)?;
        let kind = u32::from_le_bytes(head.get(at..at + 4)?.try_into().ok()?);
        interp |= kind == PT_INTERP;
    }
    Some(interp)
}

/// The word after `flag` in a command line.
fn word_after<'a>(command: &'a str, flag: &str) -> Option<&'a str> {
    let mut words = command.split_whitespace();
    words.find(|w| *w == flag)?;
    words.next()
}

/// The binary and the mount a permfs command names.
fn check_command(command: &str) -> Vec<(bool, String)> {
    let mut lines = Vec::new();
    // The guard ends with `' <binary> hook --agent …`.
    let binary = command
        .rsplit_once("' ")
        .and_then(|(_, rest)| rest.split_whitespace().next());
    match binary {
        Some(binary) => match super::hook_config::check_executable(Path::new(binary)) {
            Ok(()) => lines.push((
                true,
                format!(
                    "binary {binary} is an executable file{}",
                    match needs_loader(Path::new(binary)) {
                        Some(true) => ", dynamically linked (scripts/install-static-hook.sh makes each call some 0.4 to 1 ms faster)",
                        Some(false) => ", statically linked",
                        None => "",
                    }
                ),
            )),
            Err(reason) => lines.push((false, format!("binary: {reason}; install again"))),
        },
        None => lines.push((
            false,
            format!("the command is not one permfs wrote: {command}"),
        )),
    }
    let mount = word_after(command, "--mount")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("PERMFS_MOUNT")
                .filter(|m| !m.is_empty())
                .map(PathBuf::from)
        });
    match mount {
        Some(mount) => match MountClient::new(mount.clone()).check_mount() {
            Ok(()) => lines.push((true, format!("mount {} answers", mount.display()))),
            Err(reason) => lines.push((false, reason)),
        },
        None => lines.push((
            false,
            "no --mount in the command and $PERMFS_MOUNT is not set here: the hook would look for ./mount".into(),
        )),
    }
    lines
}

/// Codex's label for an event in a hook-state key.
fn codex_event_label(event: &str) -> String {
    let mut label = String::new();
    for (i, c) in event.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            label.push('_');
        }
        label.push(c.to_ascii_lowercase());
    }
    label
}

/// Whether Codex recorded trust for the hook at `group`/`handler` of
/// `event` in `path`: `[hooks.state."<path>:<event>:<g>:<h>"] trusted_hash`
/// in the user's config.toml. Codex compares that hash with the hook's
/// own, so a hook edited after trusting shows as modified in /hooks.
fn codex_trust(path: &Path, event: &str, group: usize, handler: usize) -> (bool, String) {
    let key = format!(
        "{}:{}:{group}:{handler}",
        path.display(),
        codex_event_label(event)
    );
    let config = codex_home().map(|h| h.join("config.toml"));
    let text = config
        .as_ref()
        .ok()
        .and_then(|c| std::fs::read_to_string(c).ok())
        .unwrap_or_default();
    let trusted = text.parse::<toml_edit::DocumentMut>().ok().and_then(|doc| {
        doc.get("hooks")?
            .get("state")?
            .get(&key)?
            .get("trusted_hash")?
            .as_str()
            .map(str::to_string)
    });
    match trusted {
        Some(hash) => (true, format!("{event}: trusted in Codex ({hash})")),
        None => (
            false,
            format!("{event}: not trusted in Codex, which skips it in silence: start `codex`, /hooks, trust it (or run `codex --dangerously-bypass-hook-trust`)"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binary_is_told_dynamic_or_static_by_its_interpreter() {
        // The test binary itself is linked dynamically; a shell script is
        // no ELF file at all.
        let me = std::env::current_exe().expect("the test binary");
        assert_eq!(needs_loader(&me), Some(true));
        let dir = tempfile::tempdir().expect("temp dir");
        let script = dir.path().join("hook");
        std::fs::write(&script, "#!/bin/sh\n").expect("written");
        assert_eq!(needs_loader(&script), None);
        assert_eq!(needs_loader(&dir.path().join("absent")), None);
    }
    use serde_json::json;

    #[test]
    fn merging_keeps_other_hooks_and_replaces_permfs_ones() {
        let ours = hooks_value(
            AgentKind::Codex,
            "/bin/sh -c 'x' /p hook --agent codex --timeout-secs 5",
            5,
        );
        let existing = json!({
            "model": "m",
            "hooks": {"PreToolUse": [
                {"matcher": "^Bash$", "hooks": [{"type": "command", "command": "lint"}]},
                {"hooks": [{"type": "command", "command": "/bin/sh -c 'x' /old hook --agent codex --timeout-secs 9"}]}
            ]}
        });
        let merged = merge(&existing, &ours, AgentKind::Codex).expect("merged");
        assert_eq!(merged["model"], "m");
        let pre = merged["hooks"]["PreToolUse"].as_array().expect("list");
        assert_eq!(pre.len(), 2, "{merged}");
        assert_eq!(pre[0]["hooks"][0]["command"], "lint");
        assert!(pre[1]["hooks"][0]["command"]
            .as_str()
            .unwrap_or("")
            .contains("/p hook"));
        assert!(merge(&json!([]), &ours, AgentKind::Codex).is_err());
        assert!(merge(&json!({"hooks": 3}), &ours, AgentKind::Codex).is_err());
    }

    #[test]
    fn codex_labels_are_snake_case() {
        assert_eq!(codex_event_label("PreToolUse"), "pre_tool_use");
        assert_eq!(codex_event_label("SessionEnd"), "session_end");
        assert_eq!(codex_event_label("PermissionRequest"), "permission_request");
    }
}
