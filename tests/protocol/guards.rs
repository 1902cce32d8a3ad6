//! The built-in guards on the authority are final (issue 23, item 2): no
//! rule, session grant, judge or person's `allow` authorizes a write to
//! the mount, the state dir, a config layer, or an agent's hook and
//! settings files; and a bare `allow session` records what permfs derives
//! from the facts, never an agent's broader suggestion. Through a real
//! mount, as a person and an agent use it.

use crate::common;

use common::{eventually, work_dir as work, Daemon};
use std::path::{Path, PathBuf};

fn write_ask(path: &Path) -> String {
    format!(
        r#"{{"tool":"write","input":{{"path":"{}"}}}}"#,
        path.display()
    )
}

/// The one grant at `session`, as JSON.
fn only_grant(daemon: &Daemon, session: &str) -> serde_json::Value {
    let grants: Vec<_> = std::fs::read_dir(daemon.session(session).join("grants"))
        .expect("grants")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(grants.len(), 1, "one grant at {session}");
    serde_json::from_str(&std::fs::read_to_string(&grants[0]).expect("grant read"))
        .expect("grant is JSON")
}

/// Asks from `session`, waits for the ask in main's inbox, writes
/// `decision` there and returns the answer.
fn decided(
    daemon: &Daemon,
    session: &str,
    rid: &str,
    request: &str,
    decision: &str,
) -> serde_json::Value {
    let response = daemon.ask(session, rid, request);
    eventually("the ask waits in main's inbox", || {
        daemon.inbox("main").len() == 1
    });
    let ask = daemon.inbox("main")[0].clone();
    std::fs::write(daemon.session("main").join("inbox").join(ask), decision).expect("decided");
    daemon.response(&response)
}

#[test]
fn a_bare_allow_session_records_the_derived_pattern_not_the_agents_star() {
    let daemon = Daemon::start(r#"{"permission": {"*": "ask"}}"#, None);
    let work = work(&daemon);
    std::fs::write(daemon.session("main").join("ctl"), "spawn c").expect("spawned");
    let request = r#"{"tool":"write","input":{"path":"notes.txt"},"suggestedPatterns":["*"]}"#;
    let response = daemon.ask("main/c", "n", request);
    eventually("the ask waits in main's inbox", || {
        daemon.inbox("main").len() == 1
    });
    // What the pending view offers a bare `allow session`: not the `*`.
    let ask = daemon.inbox("main")[0].clone();
    let entry = daemon.session("main").join("inbox").join(&ask);
    let view: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&entry).expect("entry")).expect("JSON");
    let offered = view["suggestedGrants"].to_string();
    assert!(
        !offered.contains(r#""pattern":"*""#),
        "a bare allow session would record the agent's *: {offered}"
    );
    std::fs::write(&entry, "allow session").expect("decided");
    assert_eq!(daemon.response(&response)["approved"], true);
    let grant = only_grant(&daemon, "main").to_string();
    assert!(
        !grant.contains(r#""pattern":"*""#),
        "the grant holds the agent's *: {grant}"
    );
    assert!(
        grant.contains(&format!(r#""pattern":"{}/*""#, work.display())),
        "the grant is the derived directory: {grant}"
    );
    // Outside the derived directory the grant covers nothing: asked again.
    let _elsewhere = daemon.ask("main/c", "e", &write_ask(Path::new("/var/tmp/x")));
    eventually("a write elsewhere waits again", || {
        daemon.inbox("main").len() == 1
    });
}

#[test]
fn no_grant_outranks_the_guards_on_the_authority() {
    let daemon = Daemon::start(r#"{"permission": {"*": "ask"}}"#, None);
    let work = work(&daemon);
    // main asks and decides: its grants judge its own asks. The person
    // grants everything, explicitly.
    let first = decided(
        &daemon,
        "main",
        "n",
        &write_ask(&work.join("notes.txt")),
        "allow session *",
    );
    assert_eq!(first["approved"], true);
    assert!(only_grant(&daemon, "main")
        .to_string()
        .contains(r#""pattern":"*""#));
    // Ordinary writes are now the grant's.
    let ordinary = daemon.response(&daemon.ask("main", "o", &write_ask(&work.join("a.txt"))));
    assert_eq!(ordinary["decidedBy"]["kind"], "session_approval");
    // The authority is not: project configs (whether they exist or not),
    // agent files, hook and settings files, the mount, the state dir.
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let guarded = [
        work.join(".permfs/config.json"),
        work.join(".pi/extensions/pi-permission-system/config.json"),
        work.join(".pi/agents/friend.md"),
        work.join(".claude/settings.json"),
        work.join(".codex/config.toml"),
        Path::new(&home).join(".claude/settings.local.json"),
        daemon.mountpoint.join("sessions/main/inbox/x"),
        daemon.state_dir.join("audit.log"),
        daemon.dir.path().join("config.json"),
    ];
    for (index, path) in guarded.iter().enumerate() {
        let answer = daemon.response(&daemon.ask("main", &format!("g{index}"), &write_ask(path)));
        assert_eq!(
            answer["outcome"],
            "deny",
            "a write to {} was not denied: {answer}",
            path.display()
        );
        assert_eq!(answer["decidedBy"]["origin"], "builtin", "{answer}");
        assert!(
            answer["denialReason"]
                .as_str()
                .is_some_and(|r| r.starts_with("permfs:")),
            "{answer}"
        );
    }
    // So are a shell's redirects into them.
    let bash = format!(
        r#"{{"tool":"bash","input":{{"command":"echo '{{}}' > {}"}}}}"#,
        work.join(".permfs/config.json").display()
    );
    let first_bash = decided(
        &daemon,
        "main",
        "b1",
        r#"{"surface":"bash","value":"echo hi"}"#,
        "allow session *",
    );
    assert_eq!(first_bash["approved"], true);
    let redirect = daemon.response(&daemon.ask("main", "b2", &bash));
    assert_eq!(redirect["outcome"], "deny", "{redirect}");
}

#[test]
fn a_child_elsewhere_cannot_be_allowed_to_write_its_parents_layers() {
    // Recorded authority allows every write; the child works in a
    // subdirectory, whose own guards do not name the parent's project
    // config. The parent's guard still holds, as the final check on the
    // answer (its node never sees the ask: the child's rules allow it).
    let daemon = Daemon::start(
        r#"{"permission": {"*": "ask", "write": "allow", "path_write": {"*": "allow"}, "external_directory": "allow"}}"#,
        None,
    );
    let work = work(&daemon);
    std::fs::create_dir(work.join("sub")).expect("sub");
    std::fs::write(
        daemon.session("main").join("ctl"),
        format!("spawn g cwd={}", work.join("sub").display()),
    )
    .expect("spawned");
    let ordinary = daemon.response(&daemon.ask("main/g", "o", &write_ask(&work.join("sub/a.txt"))));
    assert_eq!(ordinary["outcome"], "allow", "{ordinary}");
    let answer =
        daemon.response(&daemon.ask("main/g", "p", &write_ask(&work.join(".permfs/config.json"))));
    assert_eq!(answer["outcome"], "deny", "{answer}");
    assert_eq!(answer["decidedBy"]["kind"], "guard", "{answer}");
    assert_eq!(answer["decidedBy"]["overruled"], "rule", "{answer}");
    let audit = daemon.audit_lines();
    let line = audit
        .iter()
        .find(|l| l.to_string().contains("\"guard\""))
        .expect("the audit log names the guard");
    assert!(line.to_string().contains("deny"), "{line}");
}

#[test]
fn every_agents_settings_and_policy_file_is_guarded() {
    // Rules that allow every write: only the guards stand.
    let daemon = Daemon::start(
        r#"{"permission": {"*": "ask", "write": "allow", "path_write": {"*": "allow"}, "external_directory": "allow"}}"#,
        None,
    );
    let work = work(&daemon);
    let home = PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into()));
    let ordinary = daemon.response(&daemon.ask("main", "o", &write_ask(&work.join("a.txt"))));
    assert_eq!(ordinary["outcome"], "allow", "{ordinary}");
    let guarded = [
        PathBuf::from("/etc/claude-code/managed-settings.json"),
        PathBuf::from("/etc/codex/config.toml"),
        PathBuf::from("/etc/codex/requirements.toml"),
        home.join(".codex/requirements.toml"),
        home.join(".claude.json"),
        home.join(".claude/settings.json"),
        home.join(".pi/agent/settings.json"),
        home.join(".pi/agent/extensions/pi-permission-system/config.json"),
        work.join(".pi/settings.json"),
        work.join(".pi/extensions/pi-permission-system/config.json"),
        work.join(".codex/requirements.toml"),
    ];
    for (index, path) in guarded.iter().enumerate() {
        let answer = daemon.response(&daemon.ask("main", &format!("s{index}"), &write_ask(path)));
        assert_eq!(
            answer["outcome"],
            "deny",
            "a write to {} was allowed: {answer}",
            path.display()
        );
    }
}

/// The files a person's own tools run later (issue 34, item 4): every
/// write asks, whatever the rules allow, and the person's answer decides.
#[test]
fn files_that_run_outside_the_sandbox_ask_whatever_the_rules_allow() {
    let daemon = Daemon::start(
        r#"{"permission": {"*": "allow", "write": "allow", "path_write": {"*": "allow"}, "external_directory": "allow"}}"#,
        None,
    );
    let work = work(&daemon);
    let home = PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into()));
    let ordinary = daemon.response(&daemon.ask("main", "o", &write_ask(&work.join("a.txt"))));
    assert_eq!(ordinary["outcome"], "allow", "{ordinary}");
    // The inert sample hooks git init writes, and git's own lock file.
    for (rid, path) in [
        ("s", work.join(".git/hooks/pre-commit.sample")),
        ("l", work.join(".git/config.lock")),
    ] {
        let answer = daemon.response(&daemon.ask("main", rid, &write_ask(&path)));
        assert_eq!(answer["outcome"], "allow", "{answer}");
    }
    let planted = [
        (work.join(".git/hooks/pre-commit"), "a git hook"),
        (work.join("sub/.git/config"), "a git config file"),
        (work.join(".envrc"), "a direnv file"),
        (work.join(".vscode/tasks.json"), "a VS Code workspace file"),
        (
            work.join(".devcontainer/devcontainer.json"),
            "a dev container",
        ),
        (home.join(".bashrc"), "a shell start-up file"),
        (home.join(".ssh/authorized_keys"), "ssh"),
        (home.join(".local/bin/git"), "PATH"),
    ];
    for (index, (path, kind)) in planted.iter().enumerate() {
        let response = daemon.ask("main", &format!("p{index}"), &write_ask(path));
        eventually("the write waits for a person", || {
            daemon.inbox("main").len() == 1
        });
        let ask = daemon.inbox("main")[0].clone();
        let entry = daemon.session("main").join("inbox").join(&ask);
        let shown = std::fs::read_to_string(&entry).expect("entry");
        assert!(
            shown.contains("runs outside the sandbox") && shown.contains(kind),
            "{}: {shown}",
            path.display()
        );
        std::fs::write(&entry, "deny").expect("decided");
        let answer = daemon.response(&response);
        assert_eq!(answer["outcome"], "deny", "{answer}");
        assert_eq!(answer["decidedBy"]["kind"], "user", "{answer}");
    }
    // A shell's redirect into a hook is the same write; a person allows it.
    let bash = format!(
        r#"{{"tool":"bash","input":{{"command":"echo x > {}"}}}}"#,
        work.join(".git/hooks/post-checkout").display()
    );
    let answer = decided(&daemon, "main", "b", &bash, "allow");
    assert_eq!(answer["outcome"], "allow", "{answer}");
    assert_eq!(answer["decidedBy"]["kind"], "user", "{answer}");
}

/// The floor is `max(verdict, ask)`: a deny stays a deny, and no grant
/// or `allow always` lifts it; each write asks again.
#[test]
fn no_grant_outranks_the_outside_floor_and_a_deny_still_denies() {
    let daemon = Daemon::start(
        r#"{"permission": {"*": "ask", "write": "allow", "path_write": {"*": "allow", "*/.vscode/*": "deny"}, "external_directory": "allow"}}"#,
        None,
    );
    let work = work(&daemon);
    let denied =
        daemon.response(&daemon.ask("main", "v", &write_ask(&work.join(".vscode/tasks.json"))));
    assert_eq!(denied["outcome"], "deny", "{denied}");
    assert_eq!(denied["decidedBy"]["kind"], "rule", "{denied}");
    let first = decided(
        &daemon,
        "main",
        "e1",
        &write_ask(&work.join(".envrc")),
        "allow session *",
    );
    assert_eq!(first["approved"], true, "{first}");
    assert_eq!(first["decidedBy"]["kind"], "user", "{first}");
    // The grant covers ordinary writes, never this one: it asks again.
    let response = daemon.ask("main", "e2", &write_ask(&work.join(".envrc")));
    eventually("the second write asks again", || {
        daemon.inbox("main").len() == 1
    });
    let entry = daemon
        .session("main")
        .join("inbox")
        .join(&daemon.inbox("main")[0]);
    // `allow always` is refused, saying how the operator lowers the guard.
    let refused = std::fs::write(&entry, "allow always global");
    assert!(refused.is_err(), "allow always was taken");
    let shown = std::fs::read_to_string(&entry).expect("entry");
    assert!(shown.contains(r#"\"direnv\": \"allow\""#), "{shown}");
    std::fs::write(&entry, "deny").expect("decided");
    assert_eq!(daemon.response(&response)["outcome"], "deny");
}

/// Only the global config lowers a guard, by name; a project layer that
/// tries is ignored with a config issue; `check-config` shows each guard.
#[test]
fn an_operator_lowers_an_outside_guard_in_the_global_config_only() {
    let config = r#"{"permission": {"*": "allow", "write": "allow", "path_write": {"*": "allow"}, "external_directory": "allow"}, "guards": {"git-hooks": "allow"}}"#;
    let daemon = Daemon::start(config, None);
    let work = work(&daemon);
    let hook =
        daemon.response(&daemon.ask("main", "h", &write_ask(&work.join(".git/hooks/pre-commit"))));
    assert_eq!(hook["outcome"], "allow", "{hook}");
    std::fs::create_dir_all(work.join(".permfs")).expect("dir");
    std::fs::write(
        work.join(".permfs/config.json"),
        r#"{"guards": {"direnv": "allow"}}"#,
    )
    .expect("project layer");
    eventually("the project layer's guards are reported ignored", || {
        std::fs::read_to_string(daemon.session("main").join("rules.json"))
            .is_ok_and(|r| r.contains("guards can be lowered only in the global config"))
    });
    let response = daemon.ask("main", "e", &write_ask(&work.join(".envrc")));
    eventually(".envrc still asks", || daemon.inbox("main").len() == 1);
    let entry = daemon
        .session("main")
        .join("inbox")
        .join(&daemon.inbox("main")[0]);
    std::fs::write(&entry, "deny").expect("decided");
    assert_eq!(daemon.response(&response)["outcome"], "deny");

    let global = daemon.dir.path().join("config.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_permfs"))
        .arg("check-config")
        .arg(&global)
        .output()
        .expect("check-config runs");
    assert!(out.status.success(), "{out:?}");
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let state = |name: &str| {
        shown["outsideGuards"]
            .as_array()
            .and_then(|g| g.iter().find(|g| g["name"] == name))
            .map(|g| g["state"].clone())
    };
    assert_eq!(state("git-hooks"), Some("allow".into()), "{shown}");
    assert_eq!(state("direnv"), Some("ask".into()), "{shown}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("git-hooks"));
}
