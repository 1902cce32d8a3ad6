//! `permfs run` against a real mount: what the sandbox sees, that the
//! command inside is only the child session's asker, the exit status, the
//! session's life, signals, `--uid`, and a missing bwrap.
//!
//! They need a working bubblewrap and say so and pass vacuously without
//! one; the tests that bind other uids or a cwd outside main's need root
//! (to be the operator) and say so too.

use crate::common;

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
        common::skip("this test binds another uid or cwd and needs root");
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

/// Issue 34's layouts: where the daemon's state dir and mount lie
/// relative to what the sandbox is given. In each, the project (the cwd)
/// has `scripts/run.sh`'s shape: the global config at `config/permfs.json`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// `--state-dir <cwd>/state`.
    StateInCwd,
    /// The default state dir under `$HOME` (`~/.local/state/permfs`), with
    /// `--view $HOME`.
    StateInHome,
    /// The mount point at `<cwd>/mount`.
    MountInCwd,
}

/// Everything allowed but `*.env` (and the built-in guards).
const LAYOUT_CONFIG: &str =
    r#"{"permission": {"*": "allow", "path": {"*.env": "deny"}, "external_directory": "allow"}}"#;

/// A daemon laid out as `layout` says, and its paths (canonical).
struct Laid {
    daemon: Daemon,
    base: std::path::PathBuf,
    cwd: std::path::PathBuf,
    home: std::path::PathBuf,
}

fn lay_out(layout: Layout) -> Laid {
    use std::fs::{create_dir_all, set_permissions, write, Permissions};
    let dir = tempfile::tempdir().expect("temp dir");
    let base = dir.path().canonicalize().expect("canonical");
    let cwd = base.join("proj");
    let home = base.join("home");
    for d in [&cwd.join(".claude"), &cwd.join("config"), &home] {
        create_dir_all(d).expect("dirs");
    }
    write(cwd.join(".claude/local.env"), "CLAUDE_SECRET=1\n").expect("env");
    write(cwd.join(".claude/settings.json"), "{}\n").expect("settings");
    write(cwd.join("config/prod.env"), "PROD_SECRET=1\n").expect("env");
    write(cwd.join("notes.txt"), "notes\n").expect("notes");
    write(home.join("home.env"), "HOME_SECRET=1\n").expect("env");
    // Readable by every uid: only the view's judgment may refuse a read.
    for d in [&base, &home, &cwd.join(".claude"), &cwd.join("config")] {
        set_permissions(d, Permissions::from_mode(0o755)).expect("mode");
    }
    set_permissions(&cwd, Permissions::from_mode(0o777)).expect("mode");
    let state = match layout {
        Layout::StateInCwd => cwd.join("state"),
        Layout::StateInHome => home.join(".local/state/permfs"),
        Layout::MountInCwd => base.join("state"),
    };
    let mount = match layout {
        Layout::MountInCwd => cwd.join("mount"),
        _ => base.join("mnt"),
    };
    let home_text = home.display().to_string();
    let daemon = Daemon::start_laid_out(
        LAYOUT_CONFIG,
        dir,
        &cwd.join("config/permfs.json"),
        &state,
        &mount,
        &cwd,
        &[("HOME", home_text.as_str())],
    );
    Laid {
        daemon,
        base,
        cwd,
        home,
    }
}

impl Laid {
    /// `permfs run` from the project as `uid` (root when `None`), with
    /// `--view $HOME` in the home layout; `STATE`, `MNT` and `env` in
    /// the command's environment.
    fn run(&self, layout: Layout, uid: Option<u32>, name: &str, env: &[(&str, &str)]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_permfs"));
        command
            .arg("run")
            .arg("--mount")
            .arg(&self.daemon.mountpoint)
            .args(["--name", name])
            // The layouts of the FUSE view (whose mount points are what a
            // sandbox must not reach); the kernel mechanism binds the
            // roots themselves and covers the hidden directories
            // (tests/server/kernel.rs).
            .args(["--mechanism", "fuse"])
            .current_dir(&self.cwd)
            .env("HOME", &self.home)
            .env("STATE", &self.daemon.state_dir)
            .env("MNT", &self.daemon.mountpoint)
            .env("PERMFS_LOG", "warn")
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::null());
        if let Some(uid) = uid {
            command.arg("--uid").arg(uid.to_string());
        }
        if layout == Layout::StateInHome {
            command.arg("--view").arg(&self.home);
        }
        command
    }
}

/// The enforcement views `session` was given, as (root, mount point).
fn views_of(daemon: &Daemon, session: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(daemon.session(session).join("session.json"))
        .expect("session.json");
    let json: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    json["views"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| Some((v["root"].as_str()?.into(), v["mount"].as_str()?.into())))
        .collect()
}

/// The mount points at or below `base` in this process's mount table.
fn mounts_under(base: &Path) -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(str::to_string))
        .filter(|m| Path::new(m).starts_with(base))
        .collect()
}

/// What the sandbox tries, each printed `what=yes` (it worked) or
/// `what=no`.
const LAYOUT_SCRIPT: &str = r#"
try() { if sh -c "$2" >/dev/null 2>&1; then echo "$1=yes"; else echo "$1=no"; fi; }
try claude_env 'cat .claude/local.env'
try prod_env 'cat config/prod.env'
try home_env 'cat "$HOME/home.env"'
try config_read 'cat config/permfs.json'
try settings_read 'cat .claude/settings.json'
try notes 'cat notes.txt'
try claude_write 'echo x >> .claude/local.env'
try config_write 'echo x >> config/prod.env'
try claude_move 'mv .claude moved-claude'
try config_move 'mv config moved-config'
try state_seen '[ -e "$STATE" ]'
try state_listed 'ls -A "$(dirname "$STATE")" | grep -qx "$(basename "$STATE")"'
try journal 'cat "$STATE/journal.sqlite"'
try audit 'cat "$STATE/audit.log"'
try views 'ls "$STATE/views"'
try other_view 'ls -A "$OTHER_VIEW" | grep -q .'
try other_view_notes 'cat "$OTHER_VIEW/notes.txt"'
try mount_seen 'ls -A "$MNT" | grep -q .'
try mount_listed 'ls -A "$(dirname "$MNT")" | grep -qx "$(basename "$MNT")"'
try mount_audit 'cat "$MNT/audit.log"'
try mount_session 'cat "$MNT/sessions/main/session.json"'
"#;

/// Issue 34, "nothing beside the view escapes judgment": in each layout,
/// as root and as uid 65534, the cwd's protected entries are read through
/// the view (`*.env: deny` reaches `.claude/local.env` and
/// `config/prod.env`, and the audit log says the view refused them) and
/// stay unwritable and unmovable; the state dir (journal, audit log,
/// `views/`), another session's view and the mount are nowhere to be
/// seen; and through the view itself (from the host, past any tmpfs) the
/// state dir and the mount are not found, and a rename of `.claude` or
/// `config` as a whole is refused by the guard on the directory.
#[test]
fn no_layout_shows_the_state_dir_the_mount_or_an_unjudged_file() {
    if !is_root() || !bwrap_works() {
        return;
    }
    for layout in [Layout::StateInCwd, Layout::StateInHome, Layout::MountInCwd] {
        let laid = lay_out(layout);
        let daemon = &laid.daemon;
        // Another session's sandbox, running meanwhile: its view must be
        // out of reach.
        let mut other = laid
            .run(layout, None, "other", &[])
            .args([
                "--",
                "sh",
                "-c",
                "while [ ! -e stop-other ]; do sleep 0.05; done",
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .map(common::Running)
            .expect("the other sandbox starts");
        eventually("the other sandbox has its views", || {
            daemon.session("main/other").join("session.json").exists()
                && !views_of(daemon, "main/other").is_empty()
        });
        let other_views = views_of(daemon, "main/other");
        let other_cwd_view = other_views
            .iter()
            .find(|(root, _)| Path::new(root) == laid.cwd)
            .map(|(_, mount)| mount.clone())
            .expect("a view of the cwd");
        through_the_view(&laid, layout, &other_views, &other_cwd_view);
        for uid in [None, Some(65534)] {
            let name = format!("probe-{}", uid.unwrap_or(0));
            let output = laid
                .run(
                    layout,
                    uid,
                    &name,
                    &[("OTHER_VIEW", other_cwd_view.as_str())],
                )
                .args(["--", "sh", "-c", LAYOUT_SCRIPT])
                .output()
                .expect("permfs run runs");
            let out = stdout(&output);
            let context = format!("{layout:?} as uid {}: {output:?}", uid.unwrap_or(0));
            assert!(output.status.success(), "{context}");
            for (what, expected) in [
                ("claude_env", "no"),
                ("prod_env", "no"),
                ("config_read", "yes"),
                ("settings_read", "yes"),
                ("notes", "yes"),
                ("claude_write", "no"),
                ("config_write", "no"),
                ("claude_move", "no"),
                ("config_move", "no"),
                ("state_seen", "no"),
                ("state_listed", "no"),
                ("journal", "no"),
                ("audit", "no"),
                ("views", "no"),
                ("other_view", "no"),
                ("other_view_notes", "no"),
                ("mount_seen", "no"),
                ("mount_listed", "no"),
                ("mount_audit", "no"),
                ("mount_session", "no"),
            ] {
                assert_eq!(field(&out, what), Some(expected), "{what}: {context}");
            }
            if layout == Layout::StateInHome {
                assert_eq!(field(&out, "home_env"), Some("no"), "{context}");
            }
            // Refused by the view (judged, and logged), not by a missing file.
            let session = format!("main/{name}");
            let refused: Vec<String> = daemon
                .audit_lines()
                .into_iter()
                .filter(|l| l["event"] == "view-denied" && l["session"] == session.as_str())
                .flat_map(|l| {
                    l["accesses"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|a| a["path"].as_str().map(str::to_string))
                        .collect::<Vec<_>>()
                })
                .collect();
            for file in [".claude/local.env", "config/prod.env"] {
                let path = laid.cwd.join(file).display().to_string();
                assert!(
                    refused.contains(&path),
                    "{file} refused by the view: {refused:?} ({context})"
                );
            }
        }
        std::fs::write(laid.cwd.join("stop-other"), "").expect("stop the other sandbox");
        let (status, _) = other.finish();
        assert!(status.success(), "{layout:?}: the other sandbox");
        assert!(
            daemon.children("main").is_empty(),
            "{layout:?}: sessions ended"
        );
        assert_eq!(
            std::fs::read_to_string(laid.cwd.join(".claude/local.env"))
                .ok()
                .as_deref(),
            Some("CLAUDE_SECRET=1\n"),
            "{layout:?}"
        );
        assert_eq!(
            std::fs::read_to_string(laid.cwd.join("config/prod.env"))
                .ok()
                .as_deref(),
            Some("PROD_SECRET=1\n"),
            "{layout:?}"
        );
        for gone in ["moved-claude", "moved-config"] {
            assert!(!laid.cwd.join(gone).exists(), "{layout:?}: {gone}");
        }
        for made in [".pi", ".codex", ".permfs", ".claude.json"] {
            assert!(
                !laid.cwd.join(made).exists(),
                "{layout:?}: {made} left behind"
            );
        }
        let base = laid.base.clone();
        drop(laid);
        assert_eq!(
            mounts_under(&base),
            Vec::<String>::new(),
            "{layout:?}: mounts left"
        );
    }
}

/// From the host, through a running sandbox's own view (past the binds
/// and tmpfs that `permfs run` adds inside): the state dir and the mount
/// are not found, a protected file's read is judged, and renaming
/// `.claude` or `config` as a whole is refused by the guard on the
/// directory itself.
fn through_the_view(laid: &Laid, layout: Layout, views: &[(String, String)], cwd_view: &str) {
    let daemon = &laid.daemon;
    let cwd_view = Path::new(cwd_view);
    let state = daemon.state_dir.canonicalize().expect("state dir");
    let mount = daemon.mountpoint.clone();
    for hidden in [&state, &mount] {
        for (root, view) in views {
            if let Ok(rest) = hidden.strip_prefix(root) {
                let through = Path::new(view).join(rest);
                let error = std::fs::symlink_metadata(&through).expect_err("hidden");
                assert_eq!(
                    error.raw_os_error(),
                    Some(libc::ENOENT),
                    "{layout:?}: {} through the view",
                    through.display()
                );
                let parent = through.parent().expect("a parent");
                let listed: Vec<String> = std::fs::read_dir(parent)
                    .expect("listed")
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect();
                let name = through
                    .file_name()
                    .expect("a name")
                    .to_string_lossy()
                    .into_owned();
                assert!(
                    !listed.contains(&name),
                    "{layout:?}: {name} listed: {listed:?}"
                );
            }
        }
    }
    let hidden_somewhere = [&state, &mount]
        .iter()
        .any(|h| views.iter().any(|(root, _)| h.starts_with(root)));
    // Each layout puts one of them under a view root: the lookups above ran.
    assert!(
        hidden_somewhere,
        "{layout:?}: nothing hidden lay under a view"
    );
    let read = std::fs::read(cwd_view.join(".claude/local.env")).expect_err("judged");
    assert_eq!(read.raw_os_error(), Some(libc::EACCES), "{layout:?}");
    for entry in [".claude", "config"] {
        let moved = std::fs::rename(cwd_view.join(entry), cwd_view.join("moved"))
            .expect_err("the guard on the directory");
        assert_eq!(
            moved.raw_os_error(),
            Some(libc::EACCES),
            "{layout:?}: mv {entry}"
        );
        assert!(laid.cwd.join(entry).is_dir(), "{layout:?}: {entry} stays");
    }
}

/// Runs `permfs ARGS` in `dir` with `stdin`, without `$PERMFS_MOUNT` or
/// `$PERMFS_SESSION` unless `env` sets them.
fn permfs_in(dir: &Path, args: &[&str], env: &[(&str, &str)], stdin: &str) -> Output {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_permfs"))
        .args(args)
        .current_dir(dir)
        .env_remove("PERMFS_MOUNT")
        .env_remove("PERMFS_SESSION")
        .env("PERMFS_LOG", "error")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("permfs runs");
    if let Some(mut input) = child.stdin.take() {
        let _ = input.write_all(stdin.as_bytes());
    }
    child.wait_with_output().expect("permfs exits")
}

/// The reason in a Claude Code PreToolUse answer, when it denies.
fn hook_denial(output: &Output) -> Option<String> {
    let answer: serde_json::Value = serde_json::from_slice(&output.stdout).ok()?;
    let specific = &answer["hookSpecificOutput"];
    (specific["permissionDecision"] == "deny")
        .then(|| {
            specific["permissionDecisionReason"]
                .as_str()
                .map(str::to_string)
        })
        .flatten()
}

/// Issue 34: a directory that looks like the mount (`sessions/`,
/// `README`, a session's `session.json`, `pending`, `ask`) is refused by
/// every client that finds the mount by path, with the reason; the hook
/// blocks the call (exit 2, a deny the agent sees), also where it falls
/// back to `./mount` with neither `--mount` nor `$PERMFS_MOUNT`. The real
/// mount still answers.
#[test]
fn a_lookalike_mount_is_refused_by_every_client() {
    let daemon = Daemon::start(CONFIG, None);
    let project = tempfile::tempdir().expect("project");
    let project = project.path();
    let fake = project.join("mount");
    let main = fake.join("sessions/main");
    std::fs::create_dir_all(main.join("outbox")).expect("lookalike");
    std::fs::write(fake.join("README"), "permfs\n").expect("README");
    std::fs::copy(
        daemon.session("main").join("session.json"),
        main.join("session.json"),
    )
    .expect("session.json");
    std::fs::write(main.join("pending"), r#"{"pending":[]}"#).expect("pending");
    std::fs::write(main.join("events"), "").expect("events");
    std::fs::write(
        main.join("ask"),
        r#"{"approved":true,"state":"approved","outcome":"allow"}"#,
    )
    .expect("a planted answer");
    let cwd = project.display().to_string();
    let event = format!(
        r#"{{"session_id":"s1","cwd":"{cwd}","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{{"command":"git status"}}}}"#
    );
    let refused = |output: &Output| {
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        text.contains("is not a permfs mount") && text.contains("not FUSE's")
    };
    let fake_text = fake.display().to_string();
    let main_text = main.display().to_string();
    // The hook: ./mount by default, --mount, $PERMFS_MOUNT, $PERMFS_SESSION.
    for (args, env) in [
        (vec!["hook"], vec![]),
        (vec!["hook", "--mount", fake_text.as_str()], vec![]),
        (vec!["hook"], vec![("PERMFS_MOUNT", fake_text.as_str())]),
        (vec!["hook"], vec![("PERMFS_SESSION", main_text.as_str())]),
    ] {
        let output = permfs_in(project, &args, &env, &event);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?} {env:?}: {output:?}"
        );
        let reason = hook_denial(&output).unwrap_or_default();
        assert!(
            reason.contains("is not a permfs mount"),
            "{args:?} {env:?}: {output:?}"
        );
        assert!(refused(&output), "{output:?}");
    }
    // The real mount, found the same ways, answers.
    let real = daemon.mountpoint.display().to_string();
    let output = permfs_in(project, &["hook", "--mount", &real], &[], &event);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(hook_denial(&output), None, "{output:?}");
    // status, prompt, run.
    let state = daemon.state_dir.display().to_string();
    let output = permfs_in(
        project,
        &["status", "--mount", &fake_text, "--state-dir", &state],
        &[],
        "",
    );
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(refused(&output), "{output:?}");
    assert!(
        daemon.status()["server"]["pid"].is_u64(),
        "the real mount's status"
    );
    for args in [vec!["prompt", main_text.as_str()], vec!["prompt"]] {
        let output = permfs_in(project, &args, &[], "");
        assert_eq!(output.status.code(), Some(1), "{args:?}: {output:?}");
        assert!(refused(&output), "{args:?}: {output:?}");
    }
    let output = permfs_in(
        project,
        &["run", "--mount", &fake_text, "--", "true"],
        &[],
        "",
    );
    assert_eq!(output.status.code(), Some(125), "{output:?}");
    assert!(refused(&output), "{output:?}");
    // Only the real hook's agent session was spawned, nothing for the
    // lookalikes.
    assert_eq!(
        daemon.children("main").len(),
        1,
        "{:?}",
        daemon.children("main")
    );
}
