//! The security issue's attacks, run against a real mount the way an
//! attacker would: from a process with another uid, and from a sandbox
//! (a private mount namespace) that holds only its own session directory.
//! Each attack must be refused with the documented errno and leave no
//! session, grant or decision behind.
//!
//! These tests need root (to switch uids and make mount namespaces); they
//! say so and pass vacuously otherwise.

use crate::common;

use common::{eventually, Daemon};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::{Command, Output};

const CONFIG: &str = r#"{"permission": {"*": "ask", "bash": {"*": "ask", "git *": "allow"}}}"#;
const STRANGER: u32 = 4242;
const AGENT: u32 = 4343;

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        common::skip("the attack tests switch uids and need root");
    }
    root
}

/// A daemon whose temp dir other uids may traverse (tempdirs are 0700).
fn daemon() -> Daemon {
    let daemon = Daemon::start(CONFIG, None);
    std::fs::set_permissions(daemon.dir.path(), std::fs::Permissions::from_mode(0o755))
        .expect("temp dir opened to other uids");
    daemon
}

/// Runs `script` with `bash` as `uid` (and the same gid, no groups).
/// (bash, not dash: dash reports every failed write as "I/O error".)
fn as_uid(uid: u32, script: &str) -> Output {
    Command::new("setpriv")
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={uid}"))
        .args(["--clear-groups", "bash", "-c", script])
        .output()
        .expect("sh runs as another uid")
}

/// Runs `script` as root in a private mount namespace where only
/// `session` is bound, at `jail`, and the shell starts there.
fn in_sandbox(daemon: &Daemon, session: &str, script: &str) -> Output {
    sandbox_command(daemon, session, script)
        .output()
        .expect("unshare runs")
}

/// The command [`in_sandbox`] runs.
fn sandbox_command(daemon: &Daemon, session: &str, script: &str) -> Command {
    let jail = daemon
        .dir
        .path()
        .join(format!("jail-{}", session.replace('/', "-")));
    std::fs::create_dir_all(&jail).expect("jail dir");
    let script = format!(
        "mount --bind '{session}' '{jail}' && cd '{jail}' && {script}",
        session = daemon.session(session).display(),
        jail = jail.display()
    );
    let mut command = Command::new("unshare");
    command.args(["--mount", "--propagation", "private", "bash", "-c", &script]);
    command
}

/// Each `label: command` line's outcome: `ok`, or the shell's error text.
fn outcomes(output: &Output) -> Vec<(String, String)> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_once(" => "))
        .map(|(label, outcome)| (label.to_string(), outcome.to_string()))
        .collect()
}

/// A script that runs each `(label, command)` and prints `label => ok` or
/// `label => <error>` (the command's stderr), whatever happened before.
fn attempts(commands: &[(&str, String)]) -> String {
    commands
        .iter()
        .map(|(label, command)| {
            format!(
                "if out=$( ({command}) 2>&1 >/dev/null); then echo '{label} => ok'; \
                 else echo \"{label} => $out\"; fi"
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn assert_refused(outcomes: &[(String, String)], label: &str, error: &str) {
    let outcome = outcomes
        .iter()
        .find(|(l, _)| l == label)
        .map(|(_, o)| o.as_str())
        .unwrap_or_else(|| panic!("{label} did not run: {outcomes:?}"));
    assert!(
        outcome.contains(error),
        "{label}: expected {error:?}, got {outcome:?}"
    );
}

fn assert_ok(outcomes: &[(String, String)], label: &str) {
    assert!(
        outcomes.iter().any(|(l, o)| l == label && o == "ok"),
        "{label} should succeed: {outcomes:?}"
    );
}

fn grants(daemon: &Daemon, session: &str) -> usize {
    std::fs::read_dir(daemon.session(session).join("grants"))
        .expect("grants listed")
        .count()
}

const DENIED: &str = "Permission denied";

#[test]
fn another_uid_cannot_spawn_ask_withdraw_read_or_decide() {
    if !is_root() {
        return;
    }
    let daemon = daemon();
    let pending = daemon.ask("main", "p", r#"{"surface":"bash","value":"make"}"#);
    eventually("the ask reaches main's inbox", || {
        daemon.inbox("main").len() == 1
    });
    let ask = daemon.inbox("main")[0].clone();
    // A decided answer: the one a reader's open fills into the page cache.
    let decided = daemon.ask("main", "d", r#"{"surface":"bash","value":"git status"}"#);
    assert_eq!(daemon.response(&decided)["outcome"], "allow");
    let m = daemon.session("main");
    let m = m.display();
    let mnt = daemon.mountpoint.display();
    let output = as_uid(
        STRANGER,
        &attempts(&[
            (
                "spawn",
                format!("echo 'spawn evil interactive decider={STRANGER}' > {m}/ctl"),
            ),
            (
                "spawn-lease",
                format!("exec 3>{m}/ctl; echo 'spawn leased lease' >&3"),
            ),
            ("read-decided", format!("cat {m}/outbox/d.response")),
            ("mkdir", format!("mkdir {m}/children/evil")),
            (
                "ask",
                format!(
                    "echo '{{\"surface\":\"bash\",\"value\":\"rm -rf /\"}}' > {m}/outbox/x.request"
                ),
            ),
            ("exchange", format!("exec 3<> {m}/outbox/y")),
            ("ask-file", format!("exec 3<> {m}/ask")),
            ("ask-file-read", format!("cat {m}/ask")),
            ("list-outbox", format!("ls {m}/outbox")),
            ("read-response", format!("cat {m}/outbox/p.response")),
            ("withdraw", format!("rm {m}/outbox/p.request")),
            ("list-inbox", format!("ls {m}/inbox")),
            ("read-ask", format!("cat {m}/inbox/{ask}")),
            ("decide", format!("echo allow > {m}/inbox/{ask}")),
            ("events", format!("cat {m}/events")),
            ("audit", format!("cat {mnt}/audit.log")),
            ("judges", format!("mkdir {mnt}/judges/evil")),
            (
                "query",
                format!("echo '{{\"surface\":\"bash\",\"value\":\"ls\"}}' > {m}/query"),
            ),
            ("chmod", format!("chmod 777 {m}/ctl")),
            ("revoke", format!("rm -f {m}/grants/g1")),
            ("read-rules", format!("cat {m}/rules.json")),
            // What the kernel's mode check used to stop, now the daemon's:
            // learning that an ask exists, `access(2)`, a path truncate.
            ("stat-ask", format!("stat {m}/inbox/{ask}")),
            ("stat-request", format!("stat {m}/outbox/p.request")),
            ("access-ctl", format!("test -w {m}/ctl")),
            ("cd-inbox", format!("cd {m}/inbox")),
            (
                "truncate-request",
                format!("truncate -s 0 {m}/outbox/p.request"),
            ),
            ("pi-view", format!("mkdir -p {m}/pi/sessions/x/requests")),
        ]),
    );
    let outcomes = outcomes(&output);
    for label in [
        "stat-ask",
        "stat-request",
        "cd-inbox",
        "truncate-request",
        "pi-view",
    ] {
        assert_refused(&outcomes, label, DENIED);
    }
    assert!(
        outcomes.iter().any(|(l, o)| l == "access-ctl" && o != "ok"),
        "test -w ctl must say no to a stranger: {outcomes:?}"
    );
    for label in [
        "spawn",
        "spawn-lease",
        "read-decided",
        "mkdir",
        "ask",
        "exchange",
        "ask-file",
        "ask-file-read",
        "list-outbox",
        "read-response",
        "withdraw",
        "list-inbox",
        "read-ask",
        "decide",
        "events",
        "audit",
        "judges",
        "query",
    ] {
        assert_refused(&outcomes, label, DENIED);
    }
    assert_refused(&outcomes, "chmod", "Operation not permitted");
    assert_ok(&outcomes, "read-rules");

    std::fs::remove_file(daemon.session("main").join("outbox/d.request")).expect("withdrawn");
    // Nothing changed: no session, the ask still pending, no grant.
    assert!(daemon.children("main").is_empty());
    assert_eq!(daemon.inbox("main"), vec![ask]);
    assert!(std::fs::metadata(&pending).is_ok());
    assert_eq!(grants(&daemon, "main"), 0);
    let outbox: Vec<_> = std::fs::read_dir(daemon.session("main").join("outbox"))
        .expect("outbox")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(outbox.len(), 2, "only p.request and p.response: {outbox:?}");
}

/// A response whose request is still being written is one a reader may
/// wait for: a stranger must be refused at once, not parked on it.
#[test]
fn another_uid_cannot_wait_for_a_request_being_written() {
    if !is_root() {
        return;
    }
    let daemon = daemon();
    let outbox = daemon.session("main").join("outbox");
    let mut half = std::fs::File::create(outbox.join("h.request")).expect("created");
    std::io::Write::write_all(&mut half, b"{\"surface\": \"bash\"").expect("written");
    let o = outbox.display();
    let started = std::time::Instant::now();
    let output = as_uid(
        STRANGER,
        &attempts(&[
            ("wait", format!("timeout 5 cat {o}/h.response")),
            ("stat", format!("stat {o}/h.response")),
            ("write", format!("echo '}}' >> {o}/h.request")),
        ]),
    );
    let outcomes = outcomes(&output);
    for label in ["wait", "stat", "write"] {
        assert_refused(&outcomes, label, DENIED);
    }
    assert!(
        started.elapsed() < std::time::Duration::from_secs(4),
        "refused at once, not after waiting: {:?}",
        started.elapsed()
    );
    // The owner's draft is untouched: finished, it is an ask like any other.
    std::io::Write::write_all(&mut half, b", \"value\": \"git status\"}").expect("finished");
    drop(half);
    assert_eq!(
        daemon.response(&outbox.join("h.response"))["outcome"],
        "allow"
    );
}

#[test]
fn an_asker_uid_asks_but_cannot_raise_a_child_or_decide() {
    if !is_root() {
        return;
    }
    let daemon = daemon();
    let elsewhere = tempfile::tempdir().expect("a permissive project elsewhere");
    std::fs::create_dir(elsewhere.path().join(".pi")).expect(".pi");
    std::fs::write(
        elsewhere.path().join(".pi/permission-system.json"),
        r#"{"permission": {"*": "allow"}}"#,
    )
    .expect("project config");
    std::fs::write(
        daemon.session("main").join("ctl"),
        format!("spawn w asker={AGENT}"),
    )
    .expect("the operator binds the agent's uid");
    let w = daemon.session("main/w");

    // The bindings are visible as ownership and modes.
    let outbox = std::fs::metadata(w.join("outbox")).expect("outbox");
    assert_eq!(
        (outbox.uid(), outbox.mode() & 0o777),
        (AGENT, 0o770),
        "outbox belongs to the asker"
    );
    let ctl = std::fs::metadata(w.join("ctl")).expect("ctl");
    assert_eq!((ctl.uid(), ctl.mode() & 0o777), (AGENT, 0o220));
    let inbox = std::fs::metadata(daemon.session("main").join("inbox")).expect("inbox");
    assert_eq!((inbox.uid(), inbox.mode() & 0o777), (0, 0o750));

    let wd = w.display();
    let main = daemon.session("main");
    let md = main.display();
    let ask = |rid: &str, command: &str| {
        format!(
            "echo '{{\"surface\":\"bash\",\"value\":\"{command}\"}}' > {wd}/outbox/{rid}.request"
        )
    };
    let output = as_uid(
        AGENT,
        &attempts(&[
            ("ask", ask("r1", "git status")),
            (
                "answer",
                format!("grep -q '\"approved\": true' {wd}/outbox/r1.response"),
            ),
            ("pending-ask", ask("r2", "make")),
            (
                "interactive",
                format!("echo 'spawn g interactive' > {wd}/ctl"),
            ),
            (
                "bind-decider",
                format!("echo 'spawn g decider={AGENT}' > {wd}/ctl"),
            ),
            (
                "bind-asker",
                format!("echo 'spawn g asker={STRANGER}' > {wd}/ctl"),
            ),
            ("cwd-root", format!("echo 'spawn g cwd=/' > {wd}/ctl")),
            (
                "cwd-elsewhere",
                format!(
                    "echo 'spawn g cwd={}' > {wd}/ctl",
                    elsewhere.path().display()
                ),
            ),
            ("plain-child", format!("echo 'spawn c' > {wd}/ctl")),
            ("mkdir-child", format!("mkdir {wd}/children/d")),
            ("rmdir-child", format!("rmdir {wd}/children/d")),
            (
                "decide-at-parent",
                format!("for f in {md}/inbox/*; do echo allow > \"$f\"; done"),
            ),
            ("spawn-at-parent", format!("echo 'spawn sib' > {md}/ctl")),
        ]),
    );
    let outcomes = outcomes(&output);
    for label in [
        "ask",
        "answer",
        "pending-ask",
        "plain-child",
        "mkdir-child",
        "rmdir-child",
    ] {
        assert_ok(&outcomes, label);
    }
    for label in [
        "interactive",
        "bind-decider",
        "bind-asker",
        "cwd-root",
        "cwd-elsewhere",
        "decide-at-parent",
        "spawn-at-parent",
    ] {
        assert_refused(&outcomes, label, DENIED);
    }
    assert_eq!(daemon.children("main/w"), vec!["c".to_string()]);
    assert_eq!(daemon.children("main"), vec!["w".to_string()]);
    eventually("w's pending ask waits at main", || {
        daemon.inbox("main").len() == 1
    });
    let c = std::fs::metadata(daemon.session("main/w/c").join("outbox")).expect("c");
    assert_eq!(c.uid(), AGENT, "a child inherits its spawner's asker");
}

/// `spawn … lease` from a sandbox: the leased child goes when the
/// sandboxed process that held the handle exits, and a lease can end
/// nothing its writer did not spawn (a sibling of the same name spawned
/// later from outside stays).
#[test]
fn a_lease_from_a_sandbox_ends_only_what_it_spawned() {
    if !is_root() {
        return;
    }
    let daemon = daemon();
    std::fs::write(daemon.session("main").join("ctl"), "spawn boxed").expect("spawned");
    let output = in_sandbox(
        &daemon,
        "main/boxed",
        "exec 3>ctl && echo 'spawn leased lease' >&3 && ls children && \
         echo 'spawn kept' > ctl && echo 'end kept' >&3 && \
         (echo 'spawn kept' > ctl; true) && echo 'spawn ../main lease' >&3 || echo refused",
    );
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(printed.contains("leased"), "spawned inside: {printed}");
    assert!(
        printed.contains("refused"),
        "a name that reaches outside is refused: {printed}"
    );
    // The sandbox exited, and with it the handle: the leased child is gone,
    // the one spawned without a lease (ended and spawned again) stays, and
    // the sandbox's own session is untouched.
    eventually("the leased child ended", || {
        !daemon
            .children("main/boxed")
            .contains(&"leased".to_string())
    });
    assert_eq!(daemon.children("main/boxed"), vec!["kept".to_string()]);
    assert_eq!(daemon.children("main"), vec!["boxed".to_string()]);
}

#[test]
fn a_sandbox_cannot_decide_or_raise_its_own_authority() {
    if !is_root() {
        return;
    }
    let daemon = daemon();
    // The operator gives the boxed session an inbox of its own (a person
    // watches it from outside); the agent inside runs as the same uid.
    std::fs::write(
        daemon.session("main").join("ctl"),
        "spawn boxed interactive",
    )
    .expect("spawned");
    let evil = tempfile::tempdir().expect("evil project");
    daemon.ask(
        "main/boxed",
        "first",
        r#"{"surface":"bash","value":"make"}"#,
    );
    eventually("the boxed session's own ask waits in its inbox", || {
        daemon.inbox("main/boxed").len() == 1
    });
    let ask = daemon.inbox("main/boxed")[0].clone();
    let output = in_sandbox(
        &daemon,
        "main/boxed",
        &attempts(&[
            (
                "ask",
                "echo '{\"surface\":\"bash\",\"value\":\"git log\"}' > outbox/r.request".into(),
            ),
            (
                "answer",
                "grep -q '\"approved\": true' outbox/r.response".into(),
            ),
            (
                "exchange",
                "exec 3<> outbox/x; echo '{\"surface\":\"bash\",\"value\":\"git log\"}' >&3; grep -q '\"approved\": true' <&3".into(),
            ),
            // The `ask` file asks as the session it sits in.
            (
                "ask-file",
                "exec 3<> ask; echo '{\"surface\":\"bash\",\"value\":\"git log\"}' >&3; grep -q '\"sessionId\": \"main/boxed\"' <&3".into(),
            ),
            ("list-inbox", "ls inbox".into()),
            ("read-own-ask", format!("cat inbox/{ask}")),
            ("self-approve", format!("echo allow > inbox/{ask}")),
            (
                "self-approve-json",
                format!("echo '{{\"decision\":\"allow session\"}}' > inbox/{ask}"),
            ),
            ("events", "cat events".into()),
            (
                "interactive-child",
                "echo 'spawn g interactive' > ctl".into(),
            ),
            ("decider-child", "echo 'spawn g decider=0' > ctl".into()),
            (
                "evil-cwd",
                format!("echo 'spawn p cwd={}' > ctl", evil.path().display()),
            ),
            ("root-cwd", "echo 'spawn p cwd=/' > ctl".into()),
            ("plain-child", "echo 'spawn ok' > ctl".into()),
            ("chmod", "chmod 666 ctl".into()),
        ]),
    );
    let outcomes = outcomes(&output);
    assert_ok(&outcomes, "ask");
    assert_ok(&outcomes, "answer");
    assert_ok(&outcomes, "exchange");
    assert_ok(&outcomes, "ask-file");
    assert_ok(&outcomes, "plain-child");
    for label in [
        "list-inbox",
        "read-own-ask",
        "self-approve",
        "self-approve-json",
        "events",
        "interactive-child",
        "decider-child",
        "evil-cwd",
        "root-cwd",
    ] {
        assert_refused(&outcomes, label, DENIED);
    }
    assert_refused(&outcomes, "chmod", "Operation not permitted");
    // From outside: the ask still waits, no grant, only the plain child.
    assert_eq!(
        daemon.inbox("main/boxed"),
        vec![ask.clone()],
        "{outcomes:?}"
    );
    assert_eq!(grants(&daemon, "main/boxed"), 0);
    assert_eq!(daemon.children("main/boxed"), vec!["ok".to_string()]);
    let session: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(daemon.session("main/boxed/ok").join("session.json"))
            .expect("session.json"),
    )
    .expect("JSON");
    assert_eq!(session["interactive"], false);
    // The person outside decides it.
    std::fs::write(
        daemon.session("main/boxed").join("inbox").join(&ask),
        "deny not in a sandbox",
    )
    .expect("the operator decides");
}

#[test]
fn mount_files_refuse_chmod_chown_and_utimes_and_late_decisions_say_ealready() {
    if !is_root() {
        return;
    }
    let daemon = daemon();
    let ctl = daemon.session("main").join("ctl");
    let eperm = Some(libc::EPERM);
    let chmod = std::fs::set_permissions(&ctl, std::fs::Permissions::from_mode(0o777));
    assert_eq!(chmod.map_err(|e| e.raw_os_error()), Err(eperm));
    let chown = std::os::unix::fs::chown(&ctl, Some(STRANGER), None);
    assert_eq!(chown.map_err(|e| e.raw_os_error()), Err(eperm));
    let touch = Command::new("touch")
        .arg(daemon.session("main").join("session.json"))
        .output()
        .expect("touch runs");
    assert!(
        String::from_utf8_lossy(&touch.stderr).contains("Operation not permitted"),
        "{touch:?}"
    );
    assert_eq!(std::fs::metadata(&ctl).expect("ctl").mode() & 0o777, 0o220);

    daemon.ask("main", "p", r#"{"surface":"bash","value":"make"}"#);
    eventually("pending", || daemon.inbox("main").len() == 1);
    let entry = daemon
        .session("main")
        .join("inbox")
        .join(&daemon.inbox("main")[0]);
    std::fs::write(&entry, "deny").expect("first decision");
    let second = std::fs::write(&entry, "allow");
    assert_eq!(
        second.map_err(|e| e.raw_os_error()),
        Err(Some(libc::EALREADY)),
        "a second decision is told the ask was decided"
    );
}

/// Sanity for the helpers: the stranger can reach the mount at all (else
/// every refusal above would be vacuous).
#[test]
fn a_stranger_can_read_what_is_public() {
    if !is_root() {
        return;
    }
    let daemon = daemon();
    let output = as_uid(
        STRANGER,
        &attempts(&[
            (
                "readme",
                format!("cat {}/README", daemon.mountpoint.display()),
            ),
            (
                "session",
                format!("cat {}/session.json", daemon.session("main").display()),
            ),
        ]),
    );
    let outcomes = outcomes(&output);
    assert_ok(&outcomes, "readme");
    assert_ok(&outcomes, "session");
}

#[test]
fn a_sandbox_cannot_read_pending_nor_widen_a_grant() {
    if !is_root() {
        return;
    }
    let daemon = daemon();
    std::fs::write(daemon.session("main").join("ctl"), "spawn w interactive")
        .expect("the operator spawns an interactive child");
    let _pending = daemon.ask("main/w", "p", r#"{"surface":"bash","value":"make"}"#);
    eventually("the ask waits in w's inbox", || {
        daemon.inbox("main/w").len() == 1
    });
    let ask = daemon.inbox("main/w")[0].clone();
    let output = in_sandbox(
        &daemon,
        "main/w",
        &attempts(&[
            ("pending", "cat pending".to_string()),
            ("read-ask", format!("cat inbox/{ask}")),
            ("widen", format!("echo \"allow session '*'\" > inbox/{ask}")),
            (
                "always",
                format!("echo 'allow always global *' > inbox/{ask}"),
            ),
            (
                "widen-json",
                format!(
                    "echo '{{\"decision\":\"allow session\",\"patterns\":[\"*\"]}}' > inbox/{ask}"
                ),
            ),
        ]),
    );
    let outcomes = outcomes(&output);
    for label in ["pending", "read-ask", "widen", "widen-json", "always"] {
        assert_refused(&outcomes, label, DENIED);
    }
    // A stranger uid in the daemon's namespace gets nothing either.
    let main = daemon.session("main");
    let output = as_uid(
        STRANGER,
        &attempts(&[("pending", format!("cat {}/pending", main.display()))]),
    );
    assert_refused(&outcomes_of(&output), "pending", DENIED);
    // A bound decider (not the operator) may decide, but not change the
    // global config.
    const PERSON: u32 = 4545;
    std::fs::write(
        daemon.session("main").join("ctl"),
        format!("spawn d interactive decider={PERSON}"),
    )
    .expect("the operator binds a decider");
    let _theirs = daemon.ask("main/d", "q", r#"{"surface":"bash","value":"make"}"#);
    eventually("the ask waits in d's inbox", || {
        daemon.inbox("main/d").len() == 1
    });
    let theirs = daemon.inbox("main/d")[0].clone();
    let d = daemon.session("main/d");
    let output = as_uid(
        PERSON,
        &attempts(&[(
            "always",
            format!(
                "echo 'allow always global *' > {}/inbox/{theirs}",
                d.display()
            ),
        )]),
    );
    assert_refused(&outcomes_of(&output), "always", DENIED);
    let config = std::fs::read_to_string(daemon.dir.path().join("config.json")).expect("config");
    assert_eq!(config, CONFIG, "the global config is untouched");
    let view = std::fs::read_to_string(d.join("inbox").join(&theirs)).expect("entry");
    assert!(view.contains("only the operator"), "{view}");
    assert_eq!(daemon.inbox("main/w"), vec![ask]);
    assert_eq!(grants(&daemon, "main/w"), 0);
    assert_eq!(grants(&daemon, "main"), 0);
}

fn outcomes_of(output: &Output) -> Vec<(String, String)> {
    outcomes(output)
}

/// An agent that names paths inside the mount itself cannot make the
/// daemon wait on its own mount: directly, through a symlink it planted,
/// as its project's config (linked to an undecided response, or a FIFO),
/// or as a child's cwd. With one FUSE thread, a single lookup of its own
/// mount from a handler would hang every ask for good; with the default
/// four, a burst of such asks did.
#[test]
fn paths_into_the_mount_itself_never_hang_the_daemon() {
    let work = tempfile::tempdir().expect("work dir");
    let work_dir = std::fs::canonicalize(work.path()).expect("canonical");
    // Everything but bash is allowed: what is tested is that asks are
    // answered at all; `make` stays undecided.
    let config = r#"{"permission": {"*": "allow", "bash": {"*": "ask", "cat *": "allow"}}}"#;
    let daemon = Daemon::start_with_args(config, Some(&work_dir), &["--threads", "1"]);
    let mnt = daemon.mountpoint.clone();
    let main = daemon.session("main");

    // An ask that stays undecided: its response parks whoever reads it.
    let hold = daemon.ask("main", "hold", r#"{"surface":"bash","value":"make"}"#);
    // The traps, planted where the daemon looks on its own.
    std::os::unix::fs::symlink(&main, work_dir.join("into")).expect("link");
    std::fs::create_dir_all(work_dir.join(".permfs")).expect("dir");
    std::os::unix::fs::symlink(&hold, work_dir.join(".permfs/config.json")).expect("link");
    let fifo_dir = work_dir.join(".pi/extensions/pi-permission-system");
    std::fs::create_dir_all(&fifo_dir).expect("dir");
    let fifo = std::ffi::CString::new(fifo_dir.join("config.json").to_string_lossy().as_bytes())
        .expect("c path");
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    // Project layers are re-read within 250 ms of a change.
    std::thread::sleep(std::time::Duration::from_millis(400));

    let (done, finished) = std::sync::mpsc::channel();
    let (trap_mnt, trap_main, trap_work) = (mnt.clone(), main.clone(), work_dir.clone());
    std::thread::spawn(move || {
        let outbox = trap_main.join("outbox");
        let requests = [
            format!(
                r#"{{"tool":"read","input":{{"path":"{}"}}}}"#,
                trap_main.join("session.json").display()
            ),
            format!(
                r#"{{"tool":"read","input":{{"path":"{}"}}}}"#,
                trap_main.join("outbox/hold.response").display()
            ),
            format!(
                r#"{{"tool":"bash","input":{{"command":"cat {}/README {}/into/session.json"}}}}"#,
                trap_mnt.display(),
                trap_work.display()
            ),
        ];
        for (n, request) in requests.iter().enumerate() {
            std::fs::write(outbox.join(format!("trap{n}.request")), request)
                .expect("request written");
        }
        let spawn = std::fs::write(
            trap_main.join("ctl"),
            format!("spawn c cwd={}", trap_main.display()),
        );
        let _ = done.send(spawn.map_err(|e| e.to_string()));
    });
    let spawn = finished
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the daemon answered every request about its own mount");
    assert!(spawn.is_err(), "a child cannot work inside the mount");

    // Every ask went in and was walked; the mount still serves everyone.
    let outbox = common::listing_of(&main.join("outbox"));
    for n in 0..3 {
        assert!(outbox.contains(&format!("trap{n}.response")), "{outbox:?}");
    }
    assert!(std::fs::read_to_string(mnt.join("README")).is_ok());
    assert!(
        std::fs::metadata(&hold).is_ok(),
        "the held ask is still there, undecided"
    );

    // A write through a link into the mount is judged at the mount's own
    // path (the built-in deny on the mount point), not at the link's.
    let through_link = format!(
        r#"{{"tool":"write","input":{{"path":"{}"}}}}"#,
        work_dir.join("into/ctl").display()
    );
    let verdict = common::dry_run(&main.join("query"), &through_link);
    assert_eq!(verdict["verdict"]["state"], "deny", "{verdict}");

    // A sandboxed child holding only its own session directory names the
    // mount's real path (which it cannot see): refused the same way.
    if !is_root() {
        return;
    }
    let request = format!(
        r#"{{"tool":"read","input":{{"path":"{}"}}}}"#,
        main.join("session.json").display()
    );
    let script = format!(
        "printf '%s' '{request}' > outbox/sandboxed.request && cat outbox/sandboxed.response"
    );
    // Without the traps in its cwd, main's layers allow `read` again.
    std::fs::remove_file(work_dir.join(".permfs/config.json")).expect("link removed");
    std::fs::remove_file(fifo_dir.join("config.json")).expect("fifo removed");
    std::thread::sleep(std::time::Duration::from_millis(400));
    eprintln!("DRYRUN {}", common::dry_run(&main.join("query"), &request));
    let mut sandboxed = sandbox_command(&daemon, "main", &script);
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(sandboxed.output().map(|o| o.stdout));
    });
    let stdout = finished
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the sandbox's ask was answered")
        .expect("unshare runs");
    let answer: serde_json::Value = serde_json::from_slice(&stdout).expect("a response");
    assert_eq!(answer["state"], "approved", "{answer}");
}
