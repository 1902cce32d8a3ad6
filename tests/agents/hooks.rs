//! `permfs hook` against a real mount: real-shaped Claude Code and Codex
//! events (tests/fixtures/hooks), each answer checked for its decision and
//! validated against Codex's published PreToolUse output schema.

use crate::common;

use common::{eventually, Daemon};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const CONFIG: &str = r#"{"permission": {
  "*": "ask",
  "bash": {"*": "ask", "git *": "allow", "echo *": "allow", "rm *": "deny"},
  "path_read": {"*": "allow", "*.env": {"action": "deny", "reason": "secrets stay put"}},
  "path_write": {"*": "allow"},
  "path": "allow",
  "edit": "allow",
  "fancytool": "allow"
}}"#;

fn fixture(name: &str, vars: &[(&str, &str)]) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hooks")
        .join(name);
    let mut text = std::fs::read_to_string(path).expect("fixture");
    for (key, value) in vars {
        text = text.replace(&format!("${key}"), value);
    }
    let _: Value = serde_json::from_str(&text).expect("the fixture stays JSON");
    text
}

/// Runs `permfs hook` with `event` on stdin.
fn hook(mount: &Path, event: &str) -> Output {
    hook_with_timeout(mount, event, 20)
}

fn hook_with_timeout(mount: &Path, event: &str, timeout_secs: u64) -> Output {
    hook_in(mount, event, timeout_secs, None)
}

/// `permfs hook`, with `$PERMFS_SESSION` set when `session` is given.
fn hook_in(mount: &Path, event: &str, timeout_secs: u64, session: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_permfs"));
    if let Some(session) = session {
        command.env("PERMFS_SESSION", session);
    } else {
        command.env_remove("PERMFS_SESSION");
    }
    let mut child = command
        .arg("hook")
        .arg("--mount")
        .arg(mount)
        .args(["--timeout-secs", &timeout_secs.to_string()])
        .env("PERMFS_LOG", "error")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("permfs hook starts");
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(event.as_bytes());
    }
    child.wait_with_output().expect("permfs hook ends")
}

/// The decision and reason of a PreToolUse answer, after checking it
/// against the published schema.
fn answer_of(output: &Output) -> (String, String) {
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    validate(&text);
    let answer: Value = serde_json::from_str(&text).expect("the answer is JSON");
    let specific = &answer["hookSpecificOutput"];
    assert_eq!(specific["hookEventName"], "PreToolUse", "{text}");
    (
        specific["permissionDecision"]
            .as_str()
            .expect("a decision")
            .to_string(),
        specific["permissionDecisionReason"]
            .as_str()
            .expect("a reason")
            .to_string(),
    )
}

/// Validates with python3's jsonschema when it is installed (a Rust
/// JSON-schema crate is not in the offline registry).
fn validate(answer: &str) {
    validate_with(answer, "pre-tool-use.command.output.schema.json")
}

fn validate_with(answer: &str, schema: &str) {
    let schema = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hooks")
        .join(schema);
    let check = "import json,sys\ntry:\n import jsonschema\nexcept ImportError:\n sys.exit(3)\njsonschema.validate(json.loads(sys.argv[2]), json.load(open(sys.argv[1])))";
    let Ok(result) = Command::new("python3")
        .args(["-c", check])
        .arg(&schema)
        .arg(answer)
        .output()
    else {
        common::skip_part("the schema check: python3 is missing");
        return;
    };
    if result.status.code() == Some(3) {
        // .ci/run installs it; say so where it is missing.
        common::skip_part("the schema check: python3 has no jsonschema (pip install jsonschema)");
        return;
    }
    assert!(
        result.status.success(),
        "the answer does not fit Codex's output schema: {answer}\n{}",
        String::from_utf8_lossy(&result.stderr)
    );
}

fn work(daemon: &Daemon) -> String {
    daemon
        .dir
        .path()
        .join("work")
        .to_string_lossy()
        .into_owned()
}

#[test]
fn a_rule_allowed_bash_is_allowed_for_both_agents_and_the_session_is_spawned() {
    let daemon = Daemon::start(CONFIG, None);
    let cwd = work(&daemon);
    for (file, session) in [
        ("claude-pre-tool-use-bash.json", "c1a2"),
        ("codex-pre-tool-use-bash.json", "x9/b?"),
    ] {
        let event = fixture(
            file,
            &[
                ("SESSION", session),
                ("CWD", &cwd),
                ("COMMAND", "git status"),
            ],
        );
        let output = hook(&daemon.mountpoint, &event);
        assert!(output.status.success(), "{output:?}");
        if file.starts_with("codex") {
            // Codex takes no `allow` at PreToolUse: silence lets the call
            // go on to its approval step (the PermissionRequest hook).
            assert!(output.stdout.is_empty(), "{output:?}");
            continue;
        }
        let (decision, reason) = answer_of(&output);
        assert_eq!(decision, "allow", "{reason}");
        assert!(reason.contains("rule bash \"git *\""), "{reason}");
    }
    assert!(daemon.session("main/c1a2").join("session.json").exists());
    assert!(
        daemon.session("main/x9-b-").join("session.json").exists(),
        "a session id is made one safe name"
    );
    let end = fixture(
        "claude-session-end.json",
        &[("SESSION", "c1a2"), ("CWD", &cwd)],
    );
    let output = hook(&daemon.mountpoint, &end);
    assert!(output.status.success(), "{output:?}");
    eventually("SessionEnd ends the session", || {
        !daemon.session("main/c1a2").exists()
    });
}

#[test]
fn a_read_of_an_env_file_is_denied_with_the_rule() {
    let daemon = Daemon::start(CONFIG, None);
    let cwd = work(&daemon);
    let start = fixture(
        "claude-session-start.json",
        &[("SESSION", "s1"), ("CWD", &cwd)],
    );
    let output = hook(&daemon.mountpoint, &start);
    assert!(output.status.success(), "{output:?}");
    assert!(daemon.session("main/s1").join("session.json").exists());
    let path = format!("{cwd}/conf/.env");
    let event = fixture(
        "claude-pre-tool-use-read.json",
        &[("SESSION", "s1"), ("CWD", &cwd), ("PATH", &path)],
    );
    let output = hook(&daemon.mountpoint, &event);
    assert!(
        output.status.success(),
        "a decision, not an error: {output:?}"
    );
    let (decision, reason) = answer_of(&output);
    assert_eq!(decision, "deny");
    assert!(reason.contains("secrets stay put"), "{reason}");
}

#[test]
fn an_edit_outside_the_project_waits_for_a_person() {
    let daemon = Daemon::start(CONFIG, None);
    let cwd = work(&daemon);
    let elsewhere = tempfile::tempdir().expect("temp dir");
    let path = elsewhere.path().join("notes.txt");
    let event = fixture(
        "claude-pre-tool-use-edit.json",
        &[
            ("SESSION", "e1"),
            ("CWD", &cwd),
            ("PATH", &path.to_string_lossy()),
        ],
    );
    let mount = daemon.mountpoint.clone();
    let waiting = std::thread::spawn(move || hook(&mount, &event));
    eventually("the edit waits in main's inbox", || {
        daemon.inbox("main").len() == 1
    });
    let entry = daemon
        .session("main")
        .join("inbox")
        .join(&daemon.inbox("main")[0]);
    let shown = std::fs::read_to_string(&entry).expect("the ask is readable");
    assert!(
        shown.contains("permission_mode=acceptEdits"),
        "the mode is recorded in the message: {shown}"
    );
    std::fs::write(&entry, "allow").expect("decided");
    let output = waiting.join().expect("the hook returns");
    let (decision, reason) = answer_of(&output);
    assert_eq!(decision, "allow", "{reason}");
    assert!(reason.contains("a person at main"), "{reason}");
}

#[test]
fn a_subagents_call_climbs_from_its_child_session() {
    let daemon = Daemon::start(CONFIG, None);
    let cwd = work(&daemon);
    let start = fixture(
        "claude-subagent-start.json",
        &[("SESSION", "p1"), ("CWD", &cwd), ("AGENT", "agent-7")],
    );
    let output = hook(&daemon.mountpoint, &start);
    assert!(output.status.success(), "{output:?}");
    let info: Value = serde_json::from_str(
        &std::fs::read_to_string(daemon.session("main/p1/agent-7").join("session.json"))
            .expect("the subagent's session"),
    )
    .expect("JSON");
    assert_eq!(info["agent"], "Explore");
    let event = fixture(
        "claude-subagent-bash.json",
        &[
            ("SESSION", "p1"),
            ("CWD", &cwd),
            ("AGENT", "agent-7"),
            ("COMMAND", "make deploy"),
        ],
    );
    let mount = daemon.mountpoint.clone();
    let waiting = std::thread::spawn(move || hook(&mount, &event));
    eventually("the ask climbs to main", || daemon.inbox("main").len() == 1);
    let entry = daemon
        .session("main")
        .join("inbox")
        .join(&daemon.inbox("main")[0]);
    let shown: Value =
        serde_json::from_str(&std::fs::read_to_string(&entry).expect("readable")).expect("JSON");
    assert_eq!(shown["from"], "main/p1/agent-7", "{shown}");
    std::fs::write(&entry, "deny not from a subagent").expect("decided");
    let output = waiting.join().expect("the hook returns");
    let (decision, reason) = answer_of(&output);
    assert_eq!(decision, "deny");
    assert!(reason.contains("not from a subagent"), "{reason}");
    let stop = start.replace("SubagentStart", "SubagentStop");
    let output = hook(&daemon.mountpoint, &stop);
    assert!(output.status.success(), "{output:?}");
    eventually("SubagentStop ends the child", || {
        !daemon.session("main/p1/agent-7").exists()
    });
    assert!(
        daemon.session("main/p1").exists(),
        "the agent's session stays"
    );
}

#[test]
fn an_unknown_tool_is_asked_on_its_own_surface() {
    let daemon = Daemon::start(CONFIG, None);
    let cwd = work(&daemon);
    let event = fixture(
        "claude-pre-tool-use-other.json",
        &[("SESSION", "u1"), ("CWD", &cwd), ("TOOL", "FancyTool")],
    );
    let output = hook(&daemon.mountpoint, &event);
    let (decision, reason) = answer_of(&output);
    assert_eq!(decision, "allow", "{reason}");
    assert!(reason.contains("fancytool"), "{reason}");
}

#[test]
fn a_malformed_event_and_a_missing_mount_deny_and_exit_2() {
    let daemon = Daemon::start(CONFIG, None);
    for event in ["{not json", "[]", r#"{"hook_event_name":"PreToolUse"}"#] {
        let output = hook(&daemon.mountpoint, event);
        assert_eq!(output.status.code(), Some(2), "{output:?}");
        let (decision, reason) = answer_of(&output);
        assert_eq!(decision, "deny");
        assert!(!reason.is_empty());
        assert!(!output.stderr.is_empty(), "exit 2 shows stderr");
    }
    let cwd = work(&daemon);
    let event = fixture(
        "claude-pre-tool-use-bash.json",
        &[("SESSION", "m1"), ("CWD", &cwd), ("COMMAND", "git status")],
    );
    let nowhere = PathBuf::from("/nonexistent/permfs-mount");
    let output = hook(&nowhere, &event);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let (decision, reason) = answer_of(&output);
    assert_eq!(decision, "deny");
    assert!(reason.contains("no permfs mount"), "{reason}");
}

#[test]
fn the_agent_cannot_write_to_its_own_authority() {
    let daemon = Daemon::start(CONFIG, None);
    let cwd = work(&daemon);
    let inbox = daemon.session("main").join("inbox").join("x");
    let command = format!("echo allow > {}", inbox.display());
    let event = fixture(
        "claude-pre-tool-use-bash.json",
        &[("SESSION", "g1"), ("CWD", &cwd), ("COMMAND", &command)],
    );
    let output = hook(&daemon.mountpoint, &event);
    let (decision, reason) = answer_of(&output);
    assert_eq!(decision, "deny", "{reason}");
    assert!(reason.contains("own permission authority"), "{reason}");
    let audit = daemon.state_dir.join("audit.log");
    for path in [
        format!("{cwd}/.claude/settings.local.json"),
        format!("{cwd}/.codex/config.toml"),
        audit.to_string_lossy().into_owned(),
    ] {
        let event = fixture(
            "claude-pre-tool-use-edit.json",
            &[("SESSION", "g1"), ("CWD", &cwd), ("PATH", &path)],
        );
        let output = hook(&daemon.mountpoint, &event);
        let (decision, reason) = answer_of(&output);
        assert_eq!(decision, "deny", "{path}: {reason}");
    }
    // Writing elsewhere in the project is still allowed by the config.
    let event = fixture(
        "claude-pre-tool-use-edit.json",
        &[
            ("SESSION", "g1"),
            ("CWD", &cwd),
            ("PATH", &format!("{cwd}/src/main.rs")),
        ],
    );
    let (decision, reason) = answer_of(&hook(&daemon.mountpoint, &event));
    assert_eq!(decision, "allow", "{reason}");
}

#[test]
fn a_hook_that_times_out_denies_and_withdraws_its_ask() {
    let daemon = Daemon::start(CONFIG, None);
    let cwd = work(&daemon);
    let event = fixture(
        "claude-pre-tool-use-bash.json",
        &[("SESSION", "t1"), ("CWD", &cwd), ("COMMAND", "make")],
    );
    let output = hook_with_timeout(&daemon.mountpoint, &event, 1);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let (decision, reason) = answer_of(&output);
    assert_eq!(decision, "deny");
    assert!(reason.contains("no answer within 1s"), "{reason}");
    eventually("the ask left the inbox", || daemon.inbox("main").is_empty());
}

/// 16 hook processes at once, 1,000 events over 8 agent sessions (each
/// spawned by whichever event comes first), allowed and denied calls
/// mixed: every answer is the one its own event should get.
#[test]
fn sixteen_hooks_at_once_get_their_own_answers() {
    let daemon = Daemon::start(CONFIG, None);
    let cwd = work(&daemon);
    let mount = daemon.mountpoint.clone();
    let workers: Vec<_> = (0..16)
        .map(|worker| {
            let mount = mount.clone();
            let cwd = cwd.clone();
            std::thread::spawn(move || {
                let mut wrong = Vec::new();
                for i in (worker..1000).step_by(16) {
                    let allow = i % 3 != 0;
                    let command = if allow {
                        format!("git log -n {i}")
                    } else {
                        format!("rm -rf /tmp/x{i}")
                    };
                    let session = format!("stress-{}", i % 8);
                    let event = fixture(
                        "codex-pre-tool-use-bash.json",
                        &[("SESSION", &session), ("CWD", &cwd), ("COMMAND", &command)],
                    );
                    let output = hook(&mount, &event);
                    let text = String::from_utf8_lossy(&output.stdout).into_owned();
                    let got: Option<String> =
                        serde_json::from_str::<Value>(&text).ok().and_then(|a| {
                            a["hookSpecificOutput"]["permissionDecision"]
                                .as_str()
                                .map(str::to_string)
                        });
                    // Codex's allow is silence (see above).
                    let got = if text.is_empty() {
                        Some("allow".to_string())
                    } else {
                        got
                    };
                    let expected = if allow { "allow" } else { "deny" };
                    if got.as_deref() != Some(expected) || !output.status.success() {
                        wrong.push(format!("{i}: {command}: {text} {output:?}"));
                    }
                }
                wrong
            })
        })
        .collect();
    let wrong: Vec<String> = workers
        .into_iter()
        .flat_map(|w| w.join().expect("worker"))
        .collect();
    assert!(
        wrong.is_empty(),
        "{} wrong answers: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(3)]
    );
}

/// Concurrent hooks of one agent session spawn its session at once: every
/// spawn but one must fail with EEXIST (the name is taken), never EINVAL.
#[test]
fn racing_spawns_of_one_name_are_eexist() {
    let daemon = Daemon::start(CONFIG, None);
    for round in 0..20 {
        let ctl = daemon.session("main").join("ctl");
        let racers: Vec<_> = (0..8)
            .map(|_| {
                let ctl = ctl.clone();
                std::thread::spawn(move || {
                    std::fs::write(&ctl, format!("spawn race{round}\n"))
                        .map_err(|e| e.raw_os_error())
                })
            })
            .collect();
        let results: Vec<_> = racers
            .into_iter()
            .map(|r| r.join().expect("racer"))
            .collect();
        assert_eq!(
            results.iter().filter(|r| r.is_ok()).count(),
            1,
            "{results:?}"
        );
        assert!(
            results
                .iter()
                .all(|r| r.is_ok() || *r == Err(Some(libc::EEXIST))),
            "{results:?}"
        );
    }
}

/// Inside a session permfs made (`$PERMFS_SESSION`), the hook asks as that
/// session and spawns nothing for the agent's session id.
#[test]
fn permfs_session_names_the_asking_session() {
    let daemon = Daemon::start(CONFIG, None);
    std::fs::write(daemon.session("main").join("ctl"), "spawn w\n").expect("spawned");
    let cwd = work(&daemon);
    let event = fixture(
        "claude-pre-tool-use-bash.json",
        &[("SESSION", "zz"), ("CWD", &cwd), ("COMMAND", "make")],
    );
    let mount = daemon.mountpoint.clone();
    let waiting = std::thread::spawn(move || hook_in(&mount, &event, 20, Some("main/w")));
    eventually("the ask waits in main's inbox", || {
        daemon.inbox("main").len() == 1
    });
    let entry = daemon
        .session("main")
        .join("inbox")
        .join(&daemon.inbox("main")[0]);
    let shown: Value =
        serde_json::from_str(&std::fs::read_to_string(&entry).expect("readable")).expect("JSON");
    assert_eq!(shown["from"], "main/w", "{shown}");
    std::fs::write(&entry, "allow").expect("decided");
    let (decision, _) = answer_of(&waiting.join().expect("the hook returns"));
    assert_eq!(decision, "allow");
    assert!(
        !daemon.session("main/zz").exists(),
        "no session was spawned"
    );
}

/// The settings `--print-config` writes name this very binary by its
/// absolute path, and the line they run blocks (exit 2, a reason on
/// stderr) whatever happens to the binary: missing (the shell's 127),
/// not executable (126), exiting 1, killed by a signal. Both agents treat
/// those statuses as non-blocking, so without the guard each would let
/// the call through. Run through `bash -lc`, as Codex runs hooks.
#[test]
fn the_printed_command_names_this_binary_and_blocks_every_failure() {
    let daemon = Daemon::start(CONFIG, None);
    // The line names `permfs-hook` beside `permfs` (it starts faster).
    let binary = std::fs::canonicalize(env!("CARGO_BIN_EXE_permfs-hook")).expect("binary");
    let printed = Command::new(&binary)
        .args([
            "hook",
            "--print-config",
            "claude-code",
            "--timeout-secs",
            "20",
        ])
        .arg("--mount")
        .arg(&daemon.mountpoint)
        .output()
        .expect("print-config runs");
    assert!(printed.status.success(), "{printed:?}");
    let settings: Value = serde_json::from_slice(&printed.stdout).expect("plain JSON");
    let hook = &settings["hooks"]["PreToolUse"][0]["hooks"][0];
    let line = hook["command"].as_str().expect("a command").to_string();
    let word = format!(
        " {} hook --agent claude-code --timeout-secs 20 --mount ",
        binary.display()
    );
    assert!(line.contains(&word), "{line}");
    assert_eq!(hook["timeout"], 30, "the agent outwaits the hook");
    assert_eq!(hook["onFailure"], "block");
    let cwd = work(&daemon);
    let event = fixture(
        "claude-pre-tool-use-bash.json",
        &[("SESSION", "w1"), ("CWD", &cwd), ("COMMAND", "git status")],
    );
    let run = |line: &str| {
        let mut child = Command::new("bash")
            .args(["-lc", line])
            .env("PERMFS_LOG", "error")
            .env_remove("PERMFS_SESSION")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("bash runs");
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(event.as_bytes());
        }
        child.wait_with_output().expect("ends")
    };
    let output = run(&line);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(answer_of(&output).0, "allow");
    let dir = tempfile::tempdir().expect("temp dir");
    let script = |name: &str, body: &str, mode: u32| {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\ncat >/dev/null\n{body}\n")).expect("script");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        path
    };
    let denies = script("denies", "echo 'permfs: denied by rule' >&2; exit 2", 0o755);
    let cases = [
        (dir.path().join("gone"), "exit status 127"),
        (script("noexec", "exit 0", 0o644), "exit status 126"),
        (script("fails", "exit 1", 0o755), "exit status 1;"),
        (script("crashes", "kill -SEGV $$", 0o755), "exit status 139"),
    ];
    for (stand_in, status) in cases {
        let broken = line.replace(
            &binary.display().to_string(),
            &stand_in.display().to_string(),
        );
        let output = run(&broken);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{}: {output:?}",
            stand_in.display()
        );
        assert!(
            stderr.contains(status) && stderr.contains("blocked"),
            "{stderr}"
        );
    }
    // Exit 2 of the hook itself keeps its own reason, unchanged.
    let output = run(&line.replace(&binary.display().to_string(), &denies.display().to_string()));
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "permfs: denied by rule\n"
    );
}

/// With the daemon stopped (SIGSTOP: the mount takes requests and never
/// answers), the hook's own watchdog denies within its --timeout-secs, so
/// the agent never reaches its timeout (a non-blocking error there).
#[test]
fn a_stopped_daemon_is_denied_by_the_hooks_own_deadline() {
    let daemon = Daemon::start(CONFIG, None);
    let cwd = work(&daemon);
    let event = fixture(
        "codex-pre-tool-use-bash.json",
        &[("SESSION", "h1"), ("CWD", &cwd), ("COMMAND", "git status")],
    );
    let pid = daemon.server_pid() as i32;
    // SAFETY: signalling the daemon this test started.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    // Stopped through and through before the hook starts: a request a
    // thread read in the moment before it stopped would be waited for
    // uninterruptibly by the kernel, and no process with a thread in that
    // wait can exit (not even on the watchdog's deadline).
    eventually("every thread of the server is stopped", || all_stopped(pid));
    let started = std::time::Instant::now();
    let output = hook_with_timeout(&daemon.mountpoint, &event, 1);
    let took = started.elapsed();
    // SAFETY: as above; the daemon must run again to unmount.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(took < std::time::Duration::from_secs(5), "{took:?}");
    let (decision, reason) = answer_of(&output);
    assert_eq!(decision, "deny");
    assert!(reason.contains("no answer within 1s"), "{reason}");
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim(),
        reason,
        "exit 2 shows the reason on stderr"
    );
}

/// Every thread of process `pid` is stopped.
fn all_stopped(pid: i32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks.flatten().all(|task| {
                std::fs::read_to_string(task.path().join("stat"))
                    .ok()
                    .and_then(|stat| stat.rsplit(')').next().map(|r| r.trim().starts_with('T')))
                    .unwrap_or(false)
            })
        })
        .unwrap_or(false)
}

/// The server stops while the hook's read of its answer waits for a
/// person. A signal to a process reading from FUSE makes the kernel send
/// an interrupt and then wait, uninterruptibly, for the server to answer
/// it: a stopped (or hung) server would hold the hook past the agent's
/// own timeout, which does not block the call. So the hook reads in a
/// child process that holds none of the agent's pipes, and itself still
/// answers deny at its deadline and exits.
#[test]
fn a_server_stopped_mid_ask_cannot_hold_the_hook_past_its_deadline() {
    let daemon = Daemon::start(CONFIG, None);
    let cwd = work(&daemon);
    let event = fixture(
        "codex-pre-tool-use-bash.json",
        &[("SESSION", "h2"), ("CWD", &cwd), ("COMMAND", "make deploy")],
    );
    let (sender, receiver) = std::sync::mpsc::channel();
    let mount = daemon.mountpoint.clone();
    std::thread::spawn(move || {
        let started = std::time::Instant::now();
        let output = hook_with_timeout(&mount, &event, 2);
        let _ = sender.send((output, started.elapsed()));
    });
    eventually("the hook's ask waits in main's inbox", || {
        daemon.inbox("main").len() == 1
    });
    let pid = daemon.server_pid() as i32;
    // SAFETY: signalling the server of the daemon this test started.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    eventually("every thread of the server is stopped", || all_stopped(pid));
    let answered = receiver.recv_timeout(std::time::Duration::from_secs(10));
    // SAFETY: as above; the server must run again for the test to end.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let (output, took) = answered.expect("the hook answered while the server was stopped");
    assert!(took < std::time::Duration::from_secs(5), "{took:?}");
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let (decision, reason) = answer_of(&output);
    assert_eq!(decision, "deny");
    assert!(reason.contains("no answer within 2s"), "{reason}");
    // Running again, the server hears the interrupt: the ask is withdrawn.
    eventually("the ask is withdrawn", || daemon.inbox("main").is_empty());
}

/// `--print-config` refuses a binary path it cannot write as one word.
#[test]
fn print_config_refuses_a_binary_it_cannot_name() {
    // A hard link (not a copy: a file just written may be "busy" when
    // another test forks) in a directory whose name holds a blank.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let odd = dir.path().join("odd dir");
    std::fs::create_dir(&odd).expect("dir");
    let copy = odd.join("permfs");
    std::fs::hard_link(env!("CARGO_BIN_EXE_permfs"), &copy).expect("linked");
    let output = Command::new(&copy)
        .args(["hook", "--print-config", "codex"])
        .env_remove("PERMFS_MOUNT")
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(output.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("cannot carry unquoted"),
        "{output:?}"
    );
}

/// Codex's forms: a deny at PreToolUse (its schema), silence for an
/// allow there, and the decision at PermissionRequest, where Codex asks
/// hooks before any prompt of its own: permfs's allow replaces that
/// prompt, its deny is final ("any deny wins"), whatever Codex's
/// permission mode says.
#[test]
fn codex_gets_its_own_answer_forms() {
    let daemon = Daemon::start(CONFIG, None);
    let cwd = work(&daemon);
    let pre = fixture(
        "codex-pre-tool-use-bash.json",
        &[
            ("SESSION", "cx"),
            ("CWD", &cwd),
            ("COMMAND", "rm -rf /tmp/x"),
        ],
    );
    let output = hook(&daemon.mountpoint, &pre);
    assert!(output.status.success(), "{output:?}");
    let (decision, reason) = answer_of(&output);
    assert_eq!(decision, "deny");
    assert!(reason.contains("rule bash \"rm *\""), "{reason}");
    for (command, mode, behavior) in [
        ("git log", "default", "allow"),
        ("rm -rf /tmp/x", "bypassPermissions", "deny"),
    ] {
        let event = fixture(
            "codex-permission-request-bash.json",
            &[
                ("SESSION", "cx"),
                ("CWD", &cwd),
                ("COMMAND", command),
                ("MODE", mode),
            ],
        );
        let output = hook(&daemon.mountpoint, &event);
        assert!(output.status.success(), "{output:?}");
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        validate_with(&text, "permission-request.command.output.schema.json");
        let answer: Value = serde_json::from_str(&text).expect("JSON");
        let decision = &answer["hookSpecificOutput"]["decision"];
        assert_eq!(decision["behavior"], behavior, "{text}");
        if behavior == "deny" {
            assert!(
                decision["message"].as_str().unwrap_or("").contains("rm *"),
                "{text}"
            );
        }
    }
}

/// Runs `permfs hook` with `$XDG_RUNTIME_DIR` at `runtime`.
fn hook_at_runtime(mount: &Path, event: &str, runtime: &Path) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_permfs"))
        .arg("hook")
        .arg("--mount")
        .arg(mount)
        .args(["--timeout-secs", "20"])
        .env("PERMFS_LOG", "error")
        .env("XDG_RUNTIME_DIR", runtime)
        .env_remove("PERMFS_SESSION")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("permfs hook starts");
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(event.as_bytes());
    }
    child.wait_with_output().expect("permfs hook ends")
}

/// A person's `allow` at Codex's PreToolUse also answers the
/// PermissionRequest Codex raises for the same call (no second ask), once;
/// the next PermissionRequest asks permfs again.
#[test]
fn a_persons_allow_at_codex_pre_tool_use_is_not_asked_twice() {
    let daemon = Daemon::start(CONFIG, None);
    let cwd = work(&daemon);
    let runtime = tempfile::tempdir().expect("temp dir");
    let vars = [
        ("SESSION", "px"),
        ("CWD", cwd.as_str()),
        ("COMMAND", "make deploy"),
    ];
    let pre = fixture("codex-pre-tool-use-bash.json", &vars);
    let mount = daemon.mountpoint.clone();
    let dir = runtime.path().to_path_buf();
    let waiting = std::thread::spawn(move || hook_at_runtime(&mount, &pre, &dir));
    eventually("the call waits in main's inbox", || {
        daemon.inbox("main").len() == 1
    });
    let entry = daemon
        .session("main")
        .join("inbox")
        .join(&daemon.inbox("main")[0]);
    std::fs::write(&entry, "allow").expect("decided");
    let output = waiting.join().expect("the hook returns");
    assert!(
        output.status.success() && output.stdout.is_empty(),
        "{output:?}"
    );
    let request = fixture(
        "codex-permission-request-bash.json",
        &[vars[0], vars[1], vars[2], ("MODE", "default")],
    );
    let output = hook_at_runtime(&daemon.mountpoint, &request, runtime.path());
    let answer: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(
        answer["hookSpecificOutput"]["decision"]["behavior"], "allow",
        "{answer}"
    );
    assert!(daemon.inbox("main").is_empty(), "no second ask");
    // The note is taken once: Codex asking again asks permfs again.
    let mount = daemon.mountpoint.clone();
    let dir = runtime.path().to_path_buf();
    let again = std::thread::spawn(move || hook_at_runtime(&mount, &request, &dir));
    eventually("the second request is a new ask", || {
        daemon.inbox("main").len() == 1
    });
    let entry = daemon
        .session("main")
        .join("inbox")
        .join(&daemon.inbox("main")[0]);
    std::fs::write(&entry, "deny not twice").expect("decided");
    let output = again.join().expect("the hook returns");
    let answer: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let decision = &answer["hookSpecificOutput"]["decision"];
    assert_eq!(decision["behavior"], "deny", "{answer}");
    assert!(decision["message"]
        .as_str()
        .unwrap_or("")
        .contains("not twice"));
}

/// `permfs hook …` with `$HOME` and `$CODEX_HOME` in `home`.
fn hook_cli(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_permfs"))
        .arg("hook")
        .args(args)
        .env("HOME", home)
        .env("CODEX_HOME", home.join(".codex"))
        .env_remove("PERMFS_MOUNT")
        .env("PERMFS_LOG", "error")
        .output()
        .expect("permfs hook runs")
}

/// `install` merges into the agent's settings (other hooks and keys
/// kept, a backup made, a file that is not JSON refused and left alone),
/// and `check` tells whether the agent will run the hooks: Codex's are
/// not until trusted, a missing binary or mount is reported.
#[test]
fn install_merges_and_check_tells_whether_the_hooks_will_run() {
    let daemon = Daemon::start(CONFIG, None);
    let home = tempfile::tempdir().expect("home");
    let codex = home.path().join(".codex");
    std::fs::create_dir_all(&codex).expect("codex home");
    let hooks_json = codex.join("hooks.json");
    std::fs::write(
        &hooks_json,
        r#"{"hooks": {"PreToolUse": [{"matcher": "^Bash$", "hooks": [{"type": "command", "command": "lint"}]}]}, "x": 1}"#,
    )
    .expect("existing hooks");
    let mount = daemon.mountpoint.to_string_lossy().into_owned();
    let output = hook_cli(home.path(), &["install", "codex", "--mount", &mount]);
    assert!(output.status.success(), "{output:?}");
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        said.contains("backup:") && said.contains("/hooks"),
        "{said}"
    );
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&hooks_json).expect("written"))
            .expect("JSON");
    assert_eq!(written["x"], 1);
    let pre = written["hooks"]["PreToolUse"].as_array().expect("list");
    assert_eq!(pre.len(), 2, "{written}");
    assert_eq!(pre[0]["hooks"][0]["command"], "lint");
    assert_eq!(written["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"], 3);
    // Installing again replaces permfs's entries, never doubles them.
    assert!(
        hook_cli(home.path(), &["install", "codex", "--mount", &mount])
            .status
            .success()
    );
    let again: Value =
        serde_json::from_str(&std::fs::read_to_string(&hooks_json).expect("written"))
            .expect("JSON");
    assert_eq!(
        again["hooks"]["PreToolUse"].as_array().map(Vec::len),
        Some(2)
    );
    // Not trusted yet: check says so, and fails.
    let output = hook_cli(home.path(), &["check", "codex"]);
    let said = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(said.contains("not trusted in Codex"), "{said}");
    assert!(said.contains("answers"), "the mount is reachable: {said}");
    // Trust recorded as Codex's /hooks records it: check passes.
    let mut state = String::new();
    for (event, group) in [
        ("pre_tool_use", 1),
        ("permission_request", 0),
        ("session_start", 0),
        ("session_end", 0),
        ("subagent_start", 0),
        ("subagent_stop", 0),
    ] {
        state.push_str(&format!(
            "[hooks.state.\"{}:{event}:{group}:0\"]\ntrusted_hash = \"sha256:00\"\n",
            hooks_json.display()
        ));
    }
    std::fs::write(codex.join("config.toml"), state).expect("config");
    let output = hook_cli(home.path(), &["check", "codex"]);
    let said = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{said}");
    // A binary that is gone is a problem check names.
    let text = std::fs::read_to_string(&hooks_json).expect("read");
    // The line names `permfs-hook` beside `permfs` (it starts faster).
    let binary = std::fs::canonicalize(env!("CARGO_BIN_EXE_permfs-hook")).expect("binary");
    std::fs::write(
        &hooks_json,
        text.replace(&binary.display().to_string(), "/gone/permfs"),
    )
    .expect("edited");
    let output = hook_cli(home.path(), &["check", "codex", "--user"]);
    let said = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(said.contains("NO binary: /gone/permfs"), "{said}");
    // Claude Code, in a project; a settings file that is not JSON is left alone.
    let project = tempfile::tempdir().expect("project");
    let dir = project.path().to_string_lossy().into_owned();
    let settings = project.path().join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().expect("parent")).expect("dir");
    std::fs::write(&settings, "{ not json").expect("broken");
    let output = hook_cli(
        home.path(),
        &[
            "install",
            "claude-code",
            "--project",
            "--dir",
            &dir,
            "--mount",
            &mount,
        ],
    );
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert_eq!(
        std::fs::read_to_string(&settings).expect("kept"),
        "{ not json"
    );
    std::fs::remove_file(&settings).expect("removed");
    let output = hook_cli(
        home.path(),
        &[
            "install",
            "claude-code",
            "--project",
            "--dir",
            &dir,
            "--mount",
            &mount,
        ],
    );
    assert!(output.status.success(), "{output:?}");
    let output = hook_cli(
        home.path(),
        &["check", "claude-code", "--project", "--dir", &dir],
    );
    let said = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{said}");
    assert!(said.contains("onFailure block"), "{said}");
}
