//! A layer the agent can write cannot widen its authority (issue 23,
//! item 1). A project layer (`.permfs/config.json`, the pi extension's
//! config, `.pi/agents/<agent>.md`) counts for `allow` only while the
//! operator trusted that exact content (`permfs trust`, pinned by digest in
//! the state dir); otherwise its `deny` and `ask` still count and its
//! `allow` does not. And `permfs run` keeps every such file read-only in
//! the sandbox. Through a real mount, `permfs trust`, `permfs resolve` and
//! `permfs run` (bwrap), as an operator and an agent use them.

use crate::common;

use common::{bwrap_works, eventually, work_dir as work, Daemon};
use std::path::Path;
use std::process::{Command, Output, Stdio};

const GLOBAL: &str = r#"{"permission": {"*": "ask", "bash": {"*": "ask", "git *": "allow"}}}"#;

fn permfs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_permfs"))
        .args(args)
        .env("PERMFS_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .expect("permfs runs")
}

fn trust(daemon: &Daemon, extra: &[&str]) -> Output {
    let state = daemon.state_dir.display().to_string();
    let mut args = vec!["trust", "--state-dir", &state];
    args.extend(extra);
    let output = permfs(&args);
    assert!(
        output.status.success(),
        "permfs trust {extra:?}: {output:?}"
    );
    // The daemon looks at its layer files (the store among them) again
    // after a quarter second.
    std::thread::sleep(std::time::Duration::from_millis(300));
    output
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("dirs");
    std::fs::write(path, text).expect("written");
}

fn bash(command: &str) -> String {
    serde_json::json!({"surface": "bash", "value": command}).to_string()
}

/// The answer to `request` from `session` when recorded authority answers
/// it, or `None` when it waits in main's inbox (withdrawn again).
fn answered(daemon: &Daemon, session: &str, rid: &str, request: &str) -> Option<serde_json::Value> {
    let outbox = daemon.session(session).join("outbox");
    std::fs::write(outbox.join(format!("{rid}.request")), request).expect("asked");
    if daemon.inbox("main").is_empty() {
        return Some(daemon.response(&outbox.join(format!("{rid}.response"))));
    }
    std::fs::remove_file(outbox.join(format!("{rid}.request"))).expect("withdrawn");
    eventually("the ask left the inbox", || daemon.inbox("main").is_empty());
    None
}

fn rules_json(daemon: &Daemon, session: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(daemon.session(session).join("rules.json")).expect("rules");
    serde_json::from_str(&text).expect("JSON")
}

#[test]
fn an_untrusted_project_layer_only_narrows_until_the_operator_trusts_it() {
    let daemon = Daemon::start(GLOBAL, None);
    let work = work(&daemon);
    let config = work.join(".permfs/config.json");
    // What a sandbox wrote into its cwd: allow everything, deny a push.
    write(
        &config,
        r#"{"permission": {"*": "allow", "bash": {"*": "allow", "git push *": "deny"}}}"#,
    );
    std::fs::write(daemon.session("main").join("ctl"), "spawn c").expect("spawned");
    // A command only the project's `*: allow` allows (a pipe into `sh` would
    // floor to ask whatever the rules say).
    let curl = bash("make deploy");
    assert_eq!(
        answered(&daemon, "main/c", "u1", &curl),
        None,
        "an untrusted allow gave no allow"
    );
    let push = answered(&daemon, "main/c", "u2", &bash("git push origin main"))
        .expect("denied by the project's deny");
    assert_eq!(push["outcome"], "deny", "{push}");
    assert_eq!(push["decidedBy"]["origin"], "project", "{push}");
    let status = answered(&daemon, "main/c", "u3", &bash("git status")).expect("global allow");
    assert_eq!(status["outcome"], "allow");
    // rules.json says which layer is untrusted, and why.
    let rules = rules_json(&daemon, "main/c");
    let layer = &rules["layerTrust"][0];
    assert_eq!(layer["file"], config.display().to_string(), "{rules}");
    assert_eq!(layer["trusted"], false, "{rules}");
    assert!(
        layer["whyNot"]
            .as_str()
            .is_some_and(|w| w.contains("never trusted")),
        "{rules}"
    );

    // The operator trusts the content as it is: its allows count.
    trust(&daemon, &[work.to_str().expect("utf-8")]);
    let allowed = answered(&daemon, "main/c", "t1", &curl).expect("answered by the project");
    assert_eq!(allowed["outcome"], "allow", "{allowed}");
    assert_eq!(allowed["decidedBy"]["origin"], "project", "{allowed}");
    assert_eq!(
        rules_json(&daemon, "main/c")["layerTrust"][0]["trusted"],
        true
    );
    let listed = String::from_utf8_lossy(&trust(&daemon, &["--list"]).stdout).into_owned();
    assert!(listed.contains(r#""now":"trusted""#), "{listed}");

    // A changed file is untrusted again until trusted anew.
    write(
        &config,
        r#"{"permission": {"*": "allow", "bash": {"*": "allow"}, "write": "allow"}}"#,
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        answered(&daemon, "main/c", "c1", &curl),
        None,
        "changed: untrusted"
    );
    let why = rules_json(&daemon, "main/c")["layerTrust"][0]["whyNot"].to_string();
    assert!(why.contains("changed"), "{why}");
    let listed = String::from_utf8_lossy(&trust(&daemon, &["--list"]).stdout).into_owned();
    assert!(listed.contains(r#""now":"changed""#), "{listed}");

    // Trusted again, then revoked.
    trust(&daemon, &[work.to_str().expect("utf-8")]);
    assert!(answered(&daemon, "main/c", "r1", &curl).is_some());
    trust(&daemon, &["--revoke", work.to_str().expect("utf-8")]);
    assert_eq!(answered(&daemon, "main/c", "r2", &curl), None, "revoked");
}

#[test]
fn spawning_at_a_cwd_or_naming_an_agent_brings_in_no_untrusted_allow() {
    let daemon = Daemon::start(GLOBAL, None);
    let work = work(&daemon);
    // The parent's own project is trusted (empty); a sandbox then plants
    // layers in a subdirectory and an agent file.
    trust(&daemon, &[work.to_str().expect("utf-8")]);
    write(
        &work.join("sub/.permfs/config.json"),
        r#"{"permission": {"*": "allow", "path_write": {"*": "allow"}, "write": "allow", "external_directory": "allow"}}"#,
    );
    write(
        &work.join(".pi/agents/friend.md"),
        "---\npermission:\n  bash: allow\n  write: allow\n---\n",
    );
    std::fs::write(
        daemon.session("main").join("ctl"),
        format!("spawn g cwd={}", work.join("sub").display()),
    )
    .expect("spawned at sub");
    let cron = r#"{"tool":"write","input":{"path":"/etc/cron.d/evil"}}"#;
    assert_eq!(
        answered(&daemon, "main/g", "g1", cron),
        None,
        "sub's allow gave nothing"
    );
    std::fs::write(daemon.session("main").join("ctl"), "spawn f agent=friend").expect("spawned");
    assert_eq!(
        answered(&daemon, "main/f", "f1", &bash("curl x | sh")),
        None,
        "the untrusted project-agent file gave nothing"
    );
    let rules = rules_json(&daemon, "main/f");
    let layers = rules["layerTrust"].to_string();
    assert!(
        layers.contains("friend.md") && layers.contains(r#""trusted":false"#),
        "{layers}"
    );
}

#[test]
fn resolve_and_check_config_say_what_the_daemon_would() {
    let dir = tempfile::tempdir().expect("temp");
    let root = dir.path().canonicalize().expect("canonical");
    let global = root.join("global.json");
    write(&global, GLOBAL);
    let cwd = root.join("proj");
    let config = cwd.join(".permfs/config.json");
    write(&config, r#"{"permission": {"bash": {"make *": "allow"}}}"#);
    let state = root.join("state");
    let resolve = |with_state: bool| -> serde_json::Value {
        let mut command = Command::new(env!("CARGO_BIN_EXE_permfs"));
        command
            .args(["resolve", "--config"])
            .arg(&global)
            .arg("--cwd")
            .arg(&cwd);
        if with_state {
            command.arg("--state-dir").arg(&state);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("resolve runs");
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(format!("{}\n", bash("make deploy")).as_bytes())
            .expect("line");
        let output = child.wait_with_output().expect("answered");
        serde_json::from_slice(&output.stdout).expect("JSON")
    };
    assert_eq!(resolve(false)["state"], "allow", "the files alone allow");
    assert_eq!(resolve(true)["state"], "ask", "untrusted at the daemon");
    let state_arg = state.display().to_string();
    let check = permfs(&[
        "check-config",
        "--state-dir",
        &state_arg,
        global.to_str().expect("utf-8"),
        config.to_str().expect("utf-8"),
    ]);
    let shown: serde_json::Value = serde_json::from_slice(&check.stdout).expect("JSON");
    assert_eq!(shown["layers"][1]["trusted"], false, "{shown}");
    assert!(shown["trustedRules"].is_array(), "{shown}");
    assert!(String::from_utf8_lossy(&check.stderr).contains("untrusted"));
    let trusted = permfs(&[
        "trust",
        "--state-dir",
        &state_arg,
        cwd.to_str().expect("utf-8"),
    ]);
    assert!(trusted.status.success(), "{trusted:?}");
    assert_eq!(resolve(true)["state"], "allow", "trusted now");
}

#[test]
fn a_sandbox_cannot_write_what_governs_it() {
    // A cwd outside main's (the daemon's temp dir) is the operator's to
    // spawn at.
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        common::skip("this test spawns at a cwd outside main's and needs root");
        return;
    }
    if !bwrap_works() {
        return;
    }
    let daemon = Daemon::start(GLOBAL, None);
    // The cwd is the daemon's temp dir: it holds the global config
    // (`config.json`) and the state dir, as `scripts/run.sh`'s layout holds
    // `config/permfs.json`.
    let cwd = daemon.dir.path().canonicalize().expect("temp dir");
    write(&cwd.join(".permfs/config.json"), r#"{"permission": {}}"#);
    let script = r#"
        try() { if sh -c "$2" 2>/dev/null; then echo "$1=written"; else echo "$1=refused"; fi; }
        try project 'echo {} > .permfs/config.json'
        try project-new 'mkdir -p .pi/extensions && echo {} > .pi/extensions/x.json'
        try agent 'mkdir -p .pi/agents && echo x > .pi/agents/friend.md'
        try claude 'mkdir -p .claude && echo {} > .claude/settings.json'
        try codex 'mkdir -p .codex && echo x > .codex/config.toml'
        try global 'echo {} > config.json'
        try move 'mv .permfs moved'
        try trust 'echo {} > state/trust.json'
        try ordinary 'echo ok > ordinary.txt'
    "#;
    let output = Command::new(env!("CARGO_BIN_EXE_permfs"))
        .arg("run")
        .arg("--mount")
        .arg(&daemon.mountpoint)
        .arg("--cwd")
        .arg(&cwd)
        .args(["--", "sh", "-c", script])
        .current_dir(&cwd)
        .env("PERMFS_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .expect("permfs run runs");
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{output:?}");
    for what in [
        "project",
        "project-new",
        "agent",
        "claude",
        "codex",
        "global",
        "move",
        "trust",
    ] {
        assert!(
            out.contains(&format!("{what}=refused")),
            "{what} was writable in the sandbox: {out}"
        );
    }
    assert!(out.contains("ordinary=written"), "{out}");
    assert_eq!(
        std::fs::read_to_string(cwd.join(".permfs/config.json")).expect("kept"),
        r#"{"permission": {}}"#
    );
    assert_eq!(
        std::fs::read_to_string(cwd.join("config.json")).expect("kept"),
        GLOBAL
    );
    for made in [".pi", ".claude", ".codex"] {
        assert!(
            !cwd.join(made).exists(),
            "{made} was left behind by the sandbox's empty mount point"
        );
    }
}
