//! `permfs run` against a real mount: what the sandbox sees, that the
//! command inside is only the child session's asker, the exit status, the
//! session's life, signals, `--uid`, and a missing bwrap.
//!
//! They need a working bubblewrap and say so and pass vacuously without
//! one; the tests that bind other uids or a cwd outside main's need root
//! (to be the operator) and say so too.

mod common;

use common::{
    bwrap_works, eventually, permfs_run, run_in_background, run_script, work_dir as work, Daemon,
};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

const CONFIG: &str = r#"{"permission": {"*": "ask", "bash": {"*": "ask", "git *": "allow"}}}"#;

/// A daemon to run sandboxes against, or `None` (said why) without bwrap.
fn daemon_with_bwrap() -> Option<Daemon> {
    bwrap_works().then(|| Daemon::start(CONFIG, None))
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("skipped: this test binds another uid or cwd and needs root");
    }
    root
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Each line `key=value` of the script's output, as a lookup.
fn field<'a>(output: &'a str, key: &str) -> Option<&'a str> {
    output
        .lines()
        .find_map(|l| l.strip_prefix(key).and_then(|rest| rest.strip_prefix('=')))
}

#[test]
fn the_command_sees_its_session_at_permfs_and_nothing_else_of_the_mount() {
    let Some(daemon) = daemon_with_bwrap() else {
        return;
    };
    let mnt = daemon.mountpoint.display().to_string();
    let main = daemon.session("main").display().to_string();
    let script = format!(
        r#"
        echo "session=$(tr -d '\n ' < /permfs/session.json)"
        echo "env=$PERMFS_SESSION"
        echo '{{"surface":"bash","value":"git status"}}' > /permfs/outbox/r.request
        echo "answer=$(tr -d '\n ' < /permfs/outbox/r.response)"
        echo "up=$(ls -A /permfs/.. | tr '\n' ' ')"
        echo "mount=$(ls -A {mnt} 2>&1 | tr '\n' ' ')"
        [ -e {main}/ctl ] && echo parent=visible || echo parent=hidden
        "#
    );
    let output = run_script(&daemon, &["--name", "w"], &script);
    let out = stdout(&output);
    assert!(output.status.success(), "{output:?}");
    let session = field(&out, "session").expect("session.json read");
    assert!(session.contains(r#""id":"main/w""#), "{session}");
    assert!(session.contains(r#""parent":"main""#), "{session}");
    assert_eq!(field(&out, "env"), Some("/permfs"));
    let answer = field(&out, "answer").expect("answered");
    assert!(answer.contains(r#""approved":true"#), "{answer}");
    assert!(answer.contains(r#""kind":"rule""#), "{answer}");
    let up = field(&out, "up").expect("listed");
    // `/` is refused by the Landlock wall (nothing listed); without it,
    // it is the sandbox's own root.
    assert!(
        up.is_empty() || (up.contains("permfs") && up.contains("usr")),
        "/permfs/.. is /: {up}"
    );
    assert!(!up.contains("sessions") && !up.contains("README"), "{up}");
    let mount = field(&out, "mount").expect("mount path tried");
    assert!(
        mount.is_empty() || mount.contains("No such file"),
        "the host mount path is absent or empty inside: {mount:?}"
    );
    assert_eq!(field(&out, "parent"), Some("hidden"));
    assert!(daemon.children("main").is_empty(), "the session ended");
}

#[test]
fn the_cwd_is_at_its_own_path_and_writable_and_the_system_read_only() {
    let Some(daemon) = daemon_with_bwrap() else {
        return;
    };
    let output = run_script(
        &daemon,
        &[],
        r#"
        echo "pwd=$(pwd)"
        echo made > made.txt && echo cwd=writable
        touch /usr/permfs-run-test 2>/dev/null && echo usr=writable || echo usr=read-only
        touch /etc/permfs-run-test 2>/dev/null && echo etc=writable || echo etc=read-only
        "#,
    );
    let out = stdout(&output);
    let work = work(&daemon);
    assert_eq!(field(&out, "pwd"), work.to_str(), "{output:?}");
    assert_eq!(field(&out, "cwd"), Some("writable"));
    assert_eq!(
        std::fs::read_to_string(work.join("made.txt"))
            .ok()
            .as_deref(),
        Some("made\n"),
        "written on the host, at the same path"
    );
    assert_eq!(field(&out, "usr"), Some("read-only"));
    assert_eq!(field(&out, "etc"), Some("read-only"));
}

/// The daemon's state dir (its drafts log of requests not yet asked, the
/// journal of pending ones, the audit log, the status file) is out of the
/// sandbox's sight: the command, root inside, finds none of it, by its
/// path or through `/proc/<daemon pid>/root`.
#[test]
fn the_daemons_state_dir_is_out_of_the_sandboxs_sight() {
    let Some(daemon) = daemon_with_bwrap() else {
        return;
    };
    // Something in each: an answered ask and its drafts line.
    std::fs::write(
        daemon.session("main").join("outbox/r.request"),
        r#"{"surface":"bash","value":"git status"}"#,
    )
    .expect("asked");
    let state = daemon.state_dir.display().to_string();
    for name in [
        "drafts.log",
        "journal.sqlite",
        "journal.answers",
        "judges.attached",
        "audit.log",
    ] {
        assert!(daemon.state_dir.join(name).exists(), "{name} is there");
    }
    let server = daemon.server_pid();
    let script = format!(
        r#"
        for f in drafts.log journal.sqlite journal.answers judges.attached audit.log epoch mounts views; do
          [ -e '{state}'/$f ] && echo "$f=visible" || echo "$f=absent"
        done
        cat /proc/{server}/root{state}/drafts.log >/dev/null 2>&1 && echo proc=read || echo proc=refused
        "#
    );
    let output = run_script(&daemon, &[], &script);
    let out = stdout(&output);
    assert!(output.status.success(), "{output:?}");
    for name in [
        "drafts.log",
        "journal.sqlite",
        "journal.answers",
        "judges.attached",
        "audit.log",
        "epoch",
        "mounts",
        "views",
    ] {
        assert_eq!(field(&out, name), Some("absent"), "{name}: {out}");
    }
    assert_eq!(field(&out, "proc"), Some("refused"), "{out}");
}

#[test]
fn a_mount_inside_the_cwd_is_not_carried_into_the_sandbox() {
    if !is_root() {
        return;
    }
    let Some(daemon) = daemon_with_bwrap() else {
        return;
    };
    // The temp dir holds the mount point, as a project holds ./mount.
    let dir = daemon.dir.path().canonicalize().expect("temp dir");
    let mnt = daemon.mountpoint.canonicalize().expect("mount point");
    let output = run_script(
        &daemon,
        &["--cwd", dir.to_str().expect("utf-8")],
        &format!(
            r#"echo "mount=$(ls -A {} | tr '\n' ' ')"; echo "work=$(ls -d work)""#,
            mnt.display()
        ),
    );
    let out = stdout(&output);
    assert_eq!(field(&out, "mount"), Some(""), "{output:?}");
    assert_eq!(
        field(&out, "work"),
        Some("work"),
        "the rest of the cwd is there"
    );
}

#[test]
fn the_exit_status_is_the_commands_and_the_session_ends() {
    let Some(daemon) = daemon_with_bwrap() else {
        return;
    };
    let output = run_script(&daemon, &["--name", "seven"], "exit 7");
    assert_eq!(output.status.code(), Some(7), "{output:?}");
    assert!(daemon.children("main").is_empty());
    let output = run_script(&daemon, &[], "kill -TERM $$");
    assert_eq!(output.status.code(), Some(128 + 15), "{output:?}");
    assert!(daemon.children("main").is_empty());
}

#[test]
fn the_command_cannot_decide_its_own_ask() {
    let Some(daemon) = daemon_with_bwrap() else {
        return;
    };
    // Interactive: its asks wait in its own inbox, for a person outside.
    let work = work(&daemon);
    let script = r#"
        echo '{"surface":"bash","value":"make"}' > /permfs/outbox/p.request
        while [ ! -s ask-name ]; do sleep 0.02; done
        ask=$(cat ask-name)
        ls /permfs/inbox >/dev/null 2>list.err && echo list=ok || echo "list=$(cat list.err)"
        { echo allow > "/permfs/inbox/$ask"; } 2>decide.err && echo decide=ok || echo "decide=$(cat decide.err)"
        touch tried
        echo "answer=$(tr -d '\n ' < /permfs/outbox/p.response)"
    "#;
    let mut running = run_in_background(&daemon, &["--name", "boxed", "--interactive"], script);
    eventually("the ask waits in the child's own inbox", || {
        daemon.session("main/boxed").join("inbox").is_dir() && daemon.inbox("main/boxed").len() == 1
    });
    let ask = daemon.inbox("main/boxed")[0].clone();
    std::fs::write(work.join("ask-name"), &ask).expect("ask name handed in");
    eventually("the sandbox tried to decide", || {
        work.join("tried").exists()
    });
    assert_eq!(
        daemon.inbox("main/boxed"),
        vec![ask.clone()],
        "still pending"
    );
    std::fs::write(
        daemon.session("main/boxed").join("inbox").join(&ask),
        "deny decided outside",
    )
    .expect("the person outside decides");
    let mut output_text = String::new();
    if let Some(mut out) = running.0.stdout.take() {
        use std::io::Read;
        out.read_to_string(&mut output_text).expect("output read");
    }
    let status = running.0.wait().expect("permfs run exits");
    assert!(status.success(), "{output_text}");
    assert!(
        field(&output_text, "list").is_some_and(|l| l.contains("Permission denied")),
        "{output_text}"
    );
    assert!(
        field(&output_text, "decide").is_some_and(|l| l.contains("Permission denied")),
        "{output_text}"
    );
    let answer = field(&output_text, "answer").expect("answered");
    assert!(answer.contains(r#""approved":false"#), "{answer}");
    assert!(answer.contains("decidedoutside"), "{answer}");
    assert!(daemon.children("main").is_empty());
}

#[test]
fn a_signal_is_forwarded_and_the_session_still_ends() {
    let Some(daemon) = daemon_with_bwrap() else {
        return;
    };
    let work = work(&daemon);
    let mut running = run_in_background(
        &daemon,
        &["--name", "sig"],
        "trap 'exit 3' TERM; touch started; sleep 30 & wait",
    );
    eventually("the command runs", || work.join("started").exists());
    assert_eq!(daemon.children("main"), vec!["sig".to_string()]);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(running.0.id() as i32, libc::SIGTERM) };
    let status = running.0.wait().expect("permfs run exits");
    assert_eq!(status.code(), Some(3), "the command's trap ran");
    assert!(daemon.children("main").is_empty());
}

#[test]
fn a_permfs_run_killed_by_sigkill_leaves_no_session() {
    let Some(daemon) = daemon_with_bwrap() else {
        return;
    };
    let work = work(&daemon);
    let mut running = run_in_background(&daemon, &["--name", "killed"], "touch started; sleep 30");
    eventually("the command runs", || work.join("started").exists());
    assert_eq!(daemon.children("main"), vec!["killed".to_string()]);
    // SAFETY: signalling our own child; SIGKILL runs none of its cleanup.
    unsafe { libc::kill(running.0.id() as i32, libc::SIGKILL) };
    running.0.wait().expect("permfs run is gone");
    eventually("the daemon ends the session whose lease closed", || {
        daemon.children("main").is_empty()
    });
}

#[test]
fn a_missing_bwrap_says_how_to_install_it_and_spawns_nothing() {
    let daemon = Daemon::start(CONFIG, None);
    let empty = tempfile::tempdir().expect("empty PATH dir");
    let output = permfs_run(&daemon, &[])
        .env("PATH", empty.path())
        .args(["--", "true"])
        .output()
        .expect("permfs run runs");
    assert_eq!(output.status.code(), Some(125));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("apt-get install bubblewrap"), "{stderr}");
    assert!(daemon.children("main").is_empty());
}

#[test]
fn failures_name_what_was_wrong_and_leave_no_session() {
    let daemon = Daemon::start(CONFIG, None);
    let missing = daemon.dir.path().join("nowhere");
    let output = Command::new(env!("CARGO_BIN_EXE_permfs"))
        .args(["run", "--mount"])
        .arg(&missing)
        .args(["--", "true"])
        .output()
        .expect("permfs run runs");
    assert_eq!(output.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&output.stderr).contains("no permfs mount"));
    let output = run_script(&daemon, &["--parent", "main/nope"], "true");
    assert_eq!(output.status.code(), Some(125));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("parent session main/nope does not exist"),
        "{output:?}"
    );
    std::fs::write(daemon.session("main").join("ctl"), "spawn taken").expect("spawned");
    let output = run_script(&daemon, &["--name", "taken"], "true");
    assert_eq!(output.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&output.stderr).contains("already exists"));
    assert_eq!(daemon.children("main"), vec!["taken".to_string()]);
    // Nested: a child of main/taken, named by id.
    let output = run_script(
        &daemon,
        &["--parent", "main/taken", "--name", "inner"],
        r#"echo "session=$(tr -d '\n ' < /permfs/session.json)""#,
    );
    let session = field(&stdout(&output), "session").unwrap_or("").to_string();
    assert!(session.contains(r#""id":"main/taken/inner""#), "{output:?}");
    assert!(daemon.children("main/taken").is_empty());
}

#[test]
fn a_spawn_the_rule_refuses_is_explained() {
    if !is_root() {
        return;
    }
    let Some(daemon) = daemon_with_bwrap() else {
        return;
    };
    std::fs::set_permissions(daemon.dir.path(), std::fs::Permissions::from_mode(0o755))
        .expect("temp dir opened to other uids");
    std::fs::write(daemon.session("main").join("ctl"), "spawn team asker=4343")
        .expect("the operator binds an agent uid");
    // As that uid, a child with a cwd outside the team's is refused.
    let output = Command::new("setpriv")
        .args(["--reuid=4343", "--regid=4343", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_permfs"))
        .args(["run", "--mount"])
        .arg(&daemon.mountpoint)
        .args(["--parent", "main/team", "--cwd", "/", "--", "true"])
        .output()
        .expect("permfs run runs");
    assert_eq!(output.status.code(), Some(125), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("EACCES, the spawn rule"), "{stderr}");
    assert!(daemon.children("main/team").is_empty());
}

#[test]
fn uid_runs_the_command_as_that_uid_and_binds_the_asker() {
    if !is_root() {
        return;
    }
    let Some(daemon) = daemon_with_bwrap() else {
        return;
    };
    let work = work(&daemon);
    for dir in [daemon.dir.path(), work.as_path()] {
        let mode = if dir == work { 0o777 } else { 0o755 };
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode))
            .expect("dirs opened to the uid");
    }
    let output = run_script(
        &daemon,
        &["--uid", "65534", "--name", "nobody"],
        r#"
        echo "uid=$(id -u)"
        echo "asker=$(tr -d '\n ' < /permfs/session.json | grep -o '"askerUid":[0-9]*')"
        echo '{"surface":"bash","value":"git log"}' > /permfs/outbox/r.request
        echo "answer=$(tr -d '\n ' < /permfs/outbox/r.response)"
        touch owned
        "#,
    );
    let out = stdout(&output);
    assert_eq!(field(&out, "uid"), Some("65534"), "{output:?}");
    assert_eq!(field(&out, "asker"), Some(r#""askerUid":65534"#));
    assert!(field(&out, "answer").is_some_and(|a| a.contains(r#""approved":true"#)));
    use std::os::unix::fs::MetadataExt;
    let owned = std::fs::metadata(work.join("owned")).expect("file made inside");
    assert_eq!(owned.uid(), 65534);
    assert!(daemon.children("main").is_empty());
}

#[test]
fn pi_binds_the_view_at_the_forwarding_dir_and_names_the_parent() {
    let Some(daemon) = daemon_with_bwrap() else {
        return;
    };
    let agent = tempfile::tempdir().expect("pi agent dir");
    std::fs::write(agent.path().join("settings.json"), "{}").expect("a setting");
    let agent_dir: &Path = agent.path();
    let output = permfs_run(&daemon, &["--pi", "--name", "pi"])
        .env("PI_CODING_AGENT_DIR", agent_dir)
        .args([
            "--",
            "sh",
            "-c",
            r#"echo "parent=$PI_SUBAGENT_PARENT_SESSION"
               d="$PI_CODING_AGENT_DIR/sessions/permission-forwarding"
               mkdir -p "$d/sessions/main/requests" "$d/sessions/main/responses" && echo view=ok
               r="$d/sessions/main/requests"
               echo '{"id":"1","surface":"bash","value":"git status"}' > "$r/1.json.9.9.tmp"
               mv "$r/1.json.9.9.tmp" "$r/1.json"
               echo "answer=$(tr -d '\n ' < "$d/sessions/main/responses/1.json")"
               echo "settings=$(cat "$PI_CODING_AGENT_DIR/settings.json")"
               echo x > "$PI_CODING_AGENT_DIR/settings.json" 2>/dev/null && echo ro=no || echo ro=yes"#,
        ])
        .output()
        .expect("permfs run runs");
    let out = stdout(&output);
    assert_eq!(field(&out, "parent"), Some("main"), "{output:?}");
    assert_eq!(field(&out, "view"), Some("ok"));
    // An ask through the view, answered by a rule, as the sandboxed session.
    let answer = field(&out, "answer").unwrap_or("");
    assert!(answer.contains(r#""approved":true"#), "{output:?}");
    assert!(
        answer.contains(r#""responderSessionId":"main/pi""#),
        "{answer}"
    );
    assert_eq!(field(&out, "settings"), Some("{}"));
    assert_eq!(field(&out, "ro"), Some("yes"));
    assert!(daemon.children("main").is_empty());
}

/// `permfs hook` inside the sandbox finds its session through
/// `$PERMFS_SESSION` (a directory there, the mount being out of sight):
/// a rule's allow comes back, and a subagent is spawned below the session.
#[test]
fn the_hook_inside_asks_as_the_sandboxed_session() {
    let Some(daemon) = daemon_with_bwrap() else {
        return;
    };
    let work = work(&daemon);
    // The binary must be inside the sandbox: the cwd is.
    std::fs::copy(env!("CARGO_BIN_EXE_permfs"), work.join("permfs")).expect("permfs copied");
    let event = |name: &str, tool: &str, command: &str| {
        format!(
            r#"{{"session_id":"s1","cwd":"{cwd}","hook_event_name":"{name}","tool_name":"{tool}","tool_input":{{"command":"{command}"}},"agent_id":"a1","agent_type":"rev"}}"#,
            cwd = work.display()
        )
    };
    let script = format!(
        r#"
        echo "allow=$(echo '{git}' | ./permfs hook | tr -d '\n ')"
        echo "deny=$(echo '{rm}' | ./permfs hook --timeout-secs 1 | tr -d '\n ')"
        echo "children=$(ls /permfs/children | tr '\n' ' ')"
        "#,
        git = event("PreToolUse", "Bash", "git status"),
        rm = event("PreToolUse", "Bash", "rm -rf x"),
    );
    let output = run_script(&daemon, &["--name", "hooked"], &script);
    let out = stdout(&output);
    let allow = field(&out, "allow").unwrap_or("");
    assert!(
        allow.contains(r#""permissionDecision":"allow""#),
        "{output:?}"
    );
    let deny = field(&out, "deny").unwrap_or("");
    assert!(
        deny.contains(r#""permissionDecision":"deny""#),
        "{output:?}"
    );
    assert_eq!(
        field(&out, "children"),
        Some("a1 "),
        "the subagent's session"
    );
    assert!(daemon.children("main").is_empty());
}
