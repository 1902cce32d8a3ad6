//! The pi-compatible forwarding view (`<session>/pi/`), through a real
//! mount: the protocol from a shell, its refusals, and pi-permission-
//! system's own forwarding client (its `ParentAuthorizer`, unmodified,
//! installed from npm) asking through it.

use crate::common;

use common::{eventually, listing_of, Daemon};
use serde_json::Value;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const CONFIG: &str = r#"{"permission": {"*": "ask", "bash": {"*": "ask", "git status": "allow",
    "rm -rf *": {"action": "deny", "reason": "no recursive deletes"}}}}"#;

/// A daemon with a non-interactive child `c`: its asks climb to `main`.
fn daemon_with_child(config: &str) -> Daemon {
    let daemon = Daemon::start(config, None);
    std::fs::write(daemon.session("main").join("ctl"), "spawn c").expect("child spawned");
    daemon
}

fn pi(daemon: &Daemon) -> PathBuf {
    daemon.session("main/c").join("pi")
}

/// The target folder pi would make for parent session `target`.
fn target_dir(daemon: &Daemon, target: &str) -> PathBuf {
    let dir = pi(daemon).join("sessions").join(target);
    std::fs::create_dir_all(dir.join("requests")).expect("requests made");
    std::fs::create_dir_all(dir.join("responses")).expect("responses made");
    dir
}

/// pi's atomic write: a temporary file renamed to `<id>.json`.
fn forward(dir: &Path, id: &str, body: &str) -> std::io::Result<()> {
    let temp = dir
        .join("requests")
        .join(format!("{id}.json.4242.1700000000000.tmp"));
    std::fs::write(&temp, body)?;
    std::fs::rename(&temp, dir.join("requests").join(format!("{id}.json")))
}

fn body(id: &str, surface: &str, value: &str) -> String {
    serde_json::json!({
        "id": id, "createdAt": 1, "requesterSessionId": "pi-child", "targetSessionId": "main",
        "requesterAgentName": "worker", "message": format!("may I {value}?"),
        "source": "tool_call", "surface": surface, "value": value,
    })
    .to_string()
}

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).expect("file read");
    serde_json::from_str(&text).expect("JSON")
}

#[test]
fn a_rule_answers_at_the_rename_and_the_response_appears_complete() {
    let daemon = daemon_with_child(CONFIG);
    assert_eq!(listing_of(&pi(&daemon)), vec!["sessions"]);
    let dir = target_dir(&daemon, "main%2Fparent");
    // `mkdir -p` again is harmless; a plain `mkdir` says it exists.
    std::fs::create_dir_all(dir.join("requests")).expect("mkdir -p again");
    assert_eq!(
        std::fs::create_dir(dir.join("requests")).map_err(|e| e.kind()),
        Err(ErrorKind::AlreadyExists)
    );
    forward(&dir, "1-ok-7", &body("1-ok-7", "bash", "git status")).expect("forwarded");
    assert!(
        listing_of(&dir.join("requests")).is_empty(),
        "the request is gone once answered"
    );
    assert_eq!(listing_of(&dir.join("responses")), vec!["1-ok-7.json"]);
    let answer = json(&dir.join("responses/1-ok-7.json"));
    assert_eq!(answer["approved"], true);
    assert_eq!(answer["state"], "approved");
    assert_eq!(answer["responderSessionId"], "main/c");
    assert!(answer["respondedAt"].is_u64());
    assert_eq!(answer["decidedBy"]["pattern"], "git status");
    assert!(answer.get("denialReason").is_none(), "{answer}");

    // A deny by rule carries its reason, as the reference's
    // `denied_with_reason`; every bash unit is judged, not the first.
    forward(
        &dir,
        "2-rm-7",
        &body("2-rm-7", "bash", "git status; rm -rf /tmp/x"),
    )
    .expect("forwarded");
    let answer = json(&dir.join("responses/2-rm-7.json"));
    assert_eq!(answer["approved"], false);
    assert_eq!(answer["state"], "denied_with_reason");
    assert_eq!(answer["denialReason"], "no recursive deletes");

    // The client's clean-up: unlink both (the request is already gone),
    // then remove the emptied folders.
    for id in ["1-ok-7", "2-rm-7"] {
        std::fs::remove_file(dir.join(format!("responses/{id}.json"))).expect("response unlinked");
        assert_eq!(
            std::fs::remove_file(dir.join(format!("requests/{id}.json"))).map_err(|e| e.kind()),
            Err(ErrorKind::NotFound)
        );
    }
    std::fs::remove_dir(dir.join("requests")).expect("requests removed");
    std::fs::remove_dir(dir.join("responses")).expect("responses removed");
    std::fs::remove_dir(&dir).expect("target removed");
    assert!(listing_of(&pi(&daemon).join("sessions")).is_empty());
    // The forgotten asks left the outbox too.
    assert!(listing_of(&daemon.session("main/c").join("outbox")).is_empty());
}

#[test]
fn a_pending_ask_has_no_response_until_decided_and_unlinking_it_withdraws() {
    let daemon = daemon_with_child(CONFIG);
    let dir = target_dir(&daemon, "main");
    // Written directly (no temporary file): it asks at close.
    std::fs::write(
        dir.join("requests/3-make-7.json"),
        body("3-make-7", "bash", "make"),
    )
    .expect("forwarded");
    eventually("the ask waits in main's inbox", || {
        daemon.inbox("main").len() == 1
    });
    assert_eq!(listing_of(&dir.join("requests")), vec!["3-make-7.json"]);
    assert_eq!(
        std::fs::metadata(dir.join("responses/3-make-7.json"))
            .map(drop)
            .map_err(|e| e.kind()),
        Err(ErrorKind::NotFound),
        "pi reads an existing response as decided"
    );
    assert_eq!(
        std::fs::remove_dir(dir.join("requests")).map_err(|e| e.raw_os_error()),
        Err(Some(libc::ENOTEMPTY))
    );
    // A person sees where it came from, as claimed, next to who asked.
    let ask = &daemon.inbox("main")[0];
    let pending = json(&daemon.session("main").join("inbox").join(ask));
    assert_eq!(pending["from"], "main/c");
    assert_eq!(pending["forwarded"]["requesterSessionId"], "pi-child");
    assert_eq!(pending["forwarded"]["target"], "main");
    assert_eq!(pending["message"], "may I make?");

    // pi gives up (its timeout): unlinking the request withdraws the ask.
    std::fs::remove_file(dir.join("requests/3-make-7.json")).expect("withdrawn");
    eventually("the ask left the inbox", || daemon.inbox("main").is_empty());
    let line = daemon.audit_lines().pop().expect("an audit line");
    assert_eq!(line["outcome"], "cancelled");
    assert_eq!(line["session"], "main/c");
    assert_eq!(line["forwarded"]["target"], "main");
    assert_eq!(line["forwarded"]["requesterSessionId"], "pi-child");
}

#[test]
fn identity_is_the_view_and_a_body_that_names_nothing_waits_for_a_person() {
    let daemon = daemon_with_child(CONFIG);
    let dir = target_dir(&daemon, "main");
    // The body claims to be `main` and names no surface: it is still
    // `main/c` asking, and no rule can answer it.
    let claim = r#"{"id":"4-x-7","createdAt":1,"requesterSessionId":"main","targetSessionId":"main",
        "requesterAgentName":"root","message":"trust me"}"#;
    forward(&dir, "4-x-7", claim).expect("forwarded");
    eventually("the ask waits for a person", || {
        daemon.inbox("main").len() == 1
    });
    let ask = daemon.inbox("main")[0].clone();
    let pending = json(&daemon.session("main").join("inbox").join(&ask));
    assert_eq!(pending["from"], "main/c");
    assert!(pending["asked"]["unjudgeable"].is_string(), "{pending}");
    std::fs::write(
        daemon.session("main").join("inbox").join(&ask),
        "deny not today",
    )
    .expect("decided");
    let answer = json(&dir.join("responses/4-x-7.json"));
    assert_eq!(answer["approved"], false);
    assert_eq!(answer["state"], "denied_with_reason");
    assert_eq!(answer["denialReason"], "not today");
    assert_eq!(answer["responderSessionId"], "main");
    let line = daemon.audit_lines().pop().expect("an audit line");
    assert_eq!(line["session"], "main/c");
    assert_eq!(line["forwarded"]["requesterSessionId"], "main");

    // Not JSON at all: the close fails `EINVAL` and the response says why.
    let file = std::fs::File::create(dir.join("requests/5-bad-7.json")).expect("created");
    std::io::Write::write_all(&mut &file, b"not json").expect("written");
    use std::os::fd::IntoRawFd;
    // SAFETY: closing a descriptor this test owns, once.
    let closed = unsafe { libc::close(file.into_raw_fd()) };
    assert_eq!(
        (closed, std::io::Error::last_os_error().raw_os_error()),
        (-1, Some(libc::EINVAL))
    );
    let answer = json(&dir.join("responses/5-bad-7.json"));
    assert_eq!(answer["approved"], false);
    assert_eq!(answer["outcome"], "invalid");
}

#[test]
fn nobody_writes_a_response_nor_folders_the_protocol_does_not_have() {
    let daemon = daemon_with_child(CONFIG);
    let dir = target_dir(&daemon, "main");
    std::fs::write(
        dir.join("requests/6-make-7.json"),
        body("6-make-7", "bash", "make"),
    )
    .expect("forwarded");
    eventually("the ask waits", || daemon.inbox("main").len() == 1);
    // Answering its own ask by writing the response pi polls for.
    let forged =
        r#"{"approved":true,"state":"approved","responderSessionId":"main","respondedAt":1}"#;
    assert_eq!(
        std::fs::write(dir.join("responses/6-make-7.json"), forged).map_err(|e| e.kind()),
        Err(ErrorKind::PermissionDenied)
    );
    assert_eq!(
        std::fs::create_dir(dir.join("elsewhere")).map_err(|e| e.kind()),
        Err(ErrorKind::PermissionDenied)
    );
    assert_eq!(
        std::fs::rename(
            dir.join("requests/6-make-7.json"),
            dir.join("requests/7.json")
        )
        .map_err(|e| e.kind()),
        Err(ErrorKind::PermissionDenied),
        "a request that asked stays where it is"
    );
    assert_eq!(daemon.inbox("main").len(), 1, "still waiting for a person");
}

#[test]
fn another_uid_cannot_use_the_view_and_a_sandbox_asks_only_as_itself() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        common::skip("switching uids and mount namespaces needs root");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let daemon = daemon_with_child(CONFIG);
    std::fs::set_permissions(daemon.dir.path(), std::fs::Permissions::from_mode(0o755))
        .expect("temp dir opened to other uids");
    let view = pi(&daemon);
    let stranger = Command::new("setpriv")
        .args([
            "--reuid=4242",
            "--regid=4242",
            "--clear-groups",
            "bash",
            "-c",
        ])
        .arg(format!(
            "mkdir -p '{0}/sessions/main/requests' 2>&1 || true; ls '{0}' 2>&1 || true",
            view.display()
        ))
        .output()
        .expect("setpriv runs");
    let text = String::from_utf8_lossy(&stranger.stdout);
    assert!(text.matches("Permission denied").count() >= 2, "{text}");
    assert!(listing_of(&view.join("sessions")).is_empty());

    // Root in a private mount namespace holding only `main/c`: the view
    // answers it as `main/c`, and only as an asker.
    let jail = daemon.dir.path().join("jail");
    std::fs::create_dir_all(&jail).expect("jail");
    let script = format!(
        "mount --bind '{session}' '{jail}' && cd '{jail}/pi' && \
         mkdir -p sessions/main/requests sessions/main/responses && \
         echo '{body}' > sessions/main/requests/8.json.1.2.tmp && \
         mv sessions/main/requests/8.json.1.2.tmp sessions/main/requests/8.json && \
         cat sessions/main/responses/8.json && \
         (echo '{{\"approved\":true}}' > sessions/main/responses/9.json 2>/dev/null && echo FORGED || echo refused)",
        session = daemon.session("main/c").display(),
        jail = jail.display(),
        body = body("8", "bash", "git status"),
    );
    let output: Output = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "bash", "-c", &script])
        .output()
        .expect("unshare runs");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("\"approved\": true"),
        "{text}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(text.trim_end().ends_with("refused"), "{text}");
    let line = daemon.audit_lines().pop().expect("an audit line");
    assert_eq!(line["session"], "main/c");
}

// ---- pi-permission-system's own client --------------------------------

/// The reference package, installed once per target dir with npm, and
/// the test's driver copied into it; `None` (with a note) without node.
fn reference_client() -> Option<PathBuf> {
    // Tests run as threads of one process: install once, not concurrently.
    static INSTALLED: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    INSTALLED.get_or_init(install_reference_client).clone()
}

fn install_reference_client() -> Option<PathBuf> {
    let has = |tool: &str| {
        Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !has("node") || !has("npm") {
        common::skip(
            "node and npm are needed to run pi's forwarding client (.ci/run installs them)",
        );
        return None;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pi-reference");
    let output = Command::new("bash")
        .arg(root.join("scripts/pi-reference.sh"))
        .arg(&cache)
        .output()
        .expect("the installer runs");
    assert!(
        output.status.success(),
        "installing pi-permission-system with npm failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let package = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    std::fs::copy(
        root.join("tests/fixtures/pi/forward-client.ts"),
        package.join("src/zz-permfs-forward-client.ts"),
    )
    .expect("driver copied");
    Some(package)
}

/// Starts pi's `ParentAuthorizer.authorize` on `details`, forwarding to
/// parent session `main` through `forwarding_dir`.
fn start_client(package: &Path, forwarding_dir: &Path, details: Value) -> Child {
    Command::new("npx")
        .args(["--no-install", "tsx", "src/zz-permfs-forward-client.ts"])
        .arg(forwarding_dir)
        .args(["main", "pi-child-session"])
        .arg(details.to_string())
        .current_dir(package)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tsx starts")
}

/// The client's decision (and its review log events).
fn finish_client(child: Child) -> Value {
    let output = child.wait_with_output().expect("client finished");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "client failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("client output {line:?}: {e}"))
}

fn bash_details(command: &str) -> Value {
    serde_json::json!({
        "requestId": "r", "source": "tool_call", "agentName": "worker",
        "message": format!("worker wants to run {command}"),
        "toolName": "bash", "command": command,
        "sessionApproval": {"surface": "bash", "patterns": [format!("{command} *")]},
    })
}

/// Waits (up to 60 s: tsx starts slowly on a busy machine) for one ask in
/// main's inbox and answers it.
fn decide(daemon: &Daemon, decision: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while daemon.inbox("main").is_empty() {
        assert!(
            Instant::now() < deadline,
            "the forwarded ask never reached main's inbox"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let ask = daemon.inbox("main")[0].clone();
    std::fs::write(daemon.session("main").join("inbox").join(ask), decision).expect("decided");
}

#[test]
fn pi_s_own_forwarding_client_asks_through_the_view() {
    let Some(package) = reference_client() else {
        return;
    };
    let daemon = daemon_with_child(CONFIG);
    let view = pi(&daemon);

    // Answered by a rule.
    let result = finish_client(start_client(&package, &view, bash_details("git status")));
    assert_eq!(result["decision"]["approved"], true, "{result}");
    assert_eq!(result["decision"]["state"], "approved");
    assert_eq!(result["decision"]["responderSessionId"], "main/c");

    // A person allows.
    let child = start_client(&package, &view, bash_details("make"));
    decide(&daemon, "allow");
    let result = finish_client(child);
    assert_eq!(result["decision"]["approved"], true, "{result}");
    assert_eq!(result["decision"]["state"], "approved");
    assert_eq!(result["decision"]["responderSessionId"], "main");

    // A person denies, with a reason the agent is told.
    let child = start_client(&package, &view, bash_details("make install"));
    decide(&daemon, "deny use a staging dir");
    let result = finish_client(child);
    assert_eq!(result["decision"]["approved"], false, "{result}");
    assert_eq!(result["decision"]["state"], "denied_with_reason");
    assert_eq!(result["decision"]["denialReason"], "use a staging dir");

    // `allow session`: permfs records the grant and the child is told
    // `approved`, so it keeps asking permfs, where the grant answers and
    // can be revoked. The child suggested `cargo build *`, broader than
    // what permfs derives from the facts: a bare `allow session` records
    // the derived `cargo build` (the person types a broader one).
    let child = start_client(&package, &view, bash_details("cargo build"));
    decide(&daemon, "allow session");
    let result = finish_client(child);
    assert_eq!(result["decision"]["state"], "approved", "{result}");
    let grants = listing_of(&daemon.session("main").join("grants"));
    assert_eq!(grants.len(), 1, "{grants:?}");
    let grant = json(&daemon.session("main").join("grants").join(&grants[0]));
    assert_eq!(grant["rules"][0]["surface"], "bash", "{grant}");
    assert_eq!(grant["rules"][0]["pattern"], "cargo build", "{grant}");
    let result = finish_client(start_client(&package, &view, bash_details("cargo build")));
    assert_eq!(
        result["decision"]["approved"], true,
        "the grant answers: {result}"
    );
    assert!(daemon.inbox("main").is_empty());

    // Every exchange cleaned up after itself.
    assert!(listing_of(&view.join("sessions")).is_empty());
    let lines = daemon.audit_lines();
    assert!(lines.len() >= 5);
    for line in &lines {
        assert_eq!(line["session"], "main/c");
        assert_eq!(line["forwarded"]["target"], "main");
        assert_eq!(line["forwarded"]["requesterSessionId"], "pi-child-session");
        assert_eq!(line["forwarded"]["requesterAgentName"], "worker");
    }
}

#[test]
fn pi_s_client_is_denied_when_permfs_times_out() {
    let Some(package) = reference_client() else {
        return;
    };
    let config = r#"{"permission": {"*": "ask"}, "forwardingTimeoutMs": 1500}"#;
    let daemon = daemon_with_child(config);
    let started = Instant::now();
    let result = finish_client(start_client(&package, &pi(&daemon), bash_details("make")));
    assert_eq!(result["decision"]["approved"], false, "{result}");
    assert_eq!(result["decision"]["state"], "denied_with_reason");
    assert!(
        result["decision"]["denialReason"]
            .as_str()
            .is_some_and(|r| r.contains("timeout")),
        "{result}"
    );
    assert!(started.elapsed() < Duration::from_secs(60));
    let line = daemon.audit_lines().pop().expect("an audit line");
    assert_eq!(line["outcome"], "timeout");
    assert!(listing_of(&pi(&daemon).join("sessions")).is_empty());
}

#[test]
fn pi_s_client_in_permfs_run_asks_as_its_sandboxed_session() {
    let Some(package) = reference_client() else {
        return;
    };
    if !Command::new("bwrap")
        .args(["--ro-bind", "/", "/", "--", "true"])
        .status()
        .is_ok_and(|s| s.success())
    {
        common::skip("bwrap cannot make a sandbox here (.ci/run installs bubblewrap)");
        return;
    }
    let daemon = Daemon::start(CONFIG, None);
    let agent = tempfile::tempdir().expect("pi agent dir");
    // The driver runs from the package (the sandbox's cwd), and finds the
    // view where pi itself looks: under its agent dir.
    let script = format!(
        "node node_modules/tsx/dist/cli.mjs src/zz-permfs-forward-client.ts \
         \"$PI_CODING_AGENT_DIR/sessions/permission-forwarding\" \"$PI_SUBAGENT_PARENT_SESSION\" \
         boxed-pi '{}'",
        bash_details("git status")
    );
    let output = Command::new(env!("CARGO_BIN_EXE_permfs"))
        .args(["run", "--mount"])
        .arg(&daemon.mountpoint)
        .args(["--pi", "--name", "boxed", "--cwd"])
        .arg(&package)
        .args(["--", "sh", "-c", &script])
        .env("PI_CODING_AGENT_DIR", agent.path())
        .output()
        .expect("permfs run runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("client output {stdout:?}: {e}"));
    assert_eq!(result["decision"]["approved"], true, "{result}");
    assert_eq!(result["decision"]["responderSessionId"], "main/boxed");
    let line = daemon.audit_lines().pop().expect("an audit line");
    assert_eq!(line["session"], "main/boxed");
    assert_eq!(line["forwarded"]["requesterSessionId"], "boxed-pi");
    // The session ended with the command.
    assert!(listing_of(&daemon.session("main").join("children")).is_empty());
}

/// The daemon killed while a pi child's ask waits for a person: the child
/// would poll its dead view until its own 10 minutes; `permfs run --pi`
/// stops it within seconds and says why.
#[test]
fn a_pi_child_stops_within_seconds_when_the_daemon_dies() {
    pi_child_when_the_daemon(libc::SIGKILL);
}

fn pi_child_when_the_daemon(signal: i32) {
    let Some(package) = reference_client() else {
        return;
    };
    if !Command::new("bwrap")
        .args(["--ro-bind", "/", "/", "--", "true"])
        .status()
        .is_ok_and(|s| s.success())
    {
        common::skip("bwrap cannot make a sandbox here (.ci/run installs bubblewrap)");
        return;
    }
    let daemon = Daemon::start(CONFIG, None);
    let agent = tempfile::tempdir().expect("pi agent dir");
    let script = format!(
        "node node_modules/tsx/dist/cli.mjs src/zz-permfs-forward-client.ts \
         \"$PI_CODING_AGENT_DIR/sessions/permission-forwarding\" \"$PI_SUBAGENT_PARENT_SESSION\" \
         boxed-pi '{}'",
        bash_details("make deploy")
    );
    let mut run = Command::new(env!("CARGO_BIN_EXE_permfs"))
        .args(["run", "--mount"])
        .arg(&daemon.mountpoint)
        .args(["--pi", "--name", "doomed", "--cwd"])
        .arg(&package)
        .args(["--", "sh", "-c", &script])
        .env("PI_CODING_AGENT_DIR", agent.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("permfs run starts");
    eventually("the child's ask waits in main's inbox", || {
        daemon.inbox("main").len() == 1
    });
    // A stopped daemon is a stopped server (stopping the supervisor would
    // stop nothing that serves); a killed one is the supervisor, whose
    // death ends the mount.
    let target = if signal == libc::SIGSTOP {
        daemon.server_pid()
    } else {
        daemon.pid()
    };
    // SAFETY: killing the daemon this test started.
    unsafe { libc::kill(target as i32, signal) };
    let killed = std::time::Instant::now();
    let status = loop {
        if let Some(status) = run.try_wait().expect("waits") {
            break status;
        }
        if killed.elapsed() > std::time::Duration::from_secs(30) {
            // SAFETY: as above.
            unsafe { libc::kill(target as i32, libc::SIGCONT) };
            let _ = run.kill();
            let _ = run.wait();
            panic!("permfs run --pi still waits 30 s after the daemon died");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    // SAFETY: as above; a stopped daemon must run to unmount.
    unsafe { libc::kill(target as i32, libc::SIGCONT) };
    let mut stderr = String::new();
    if let Some(mut pipe) = run.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
    }
    assert!(!status.success(), "{stderr}");
    assert!(
        killed.elapsed() < std::time::Duration::from_secs(15),
        "{:?}",
        killed.elapsed()
    );
    // Stopped by permfs run, or ended by the client itself on the dead
    // view: either way, within seconds and saying why.
    let mut stdout = String::new();
    if let Some(mut pipe) = run.stdout.take() {
        let _ = std::io::Read::read_to_string(&mut pipe, &mut stdout);
    }
    assert!(
        stderr.contains("permfs daemon stopped answering"),
        "{stderr}\n{stdout}"
    );
    assert!(!stdout.contains("\"approved\":true"), "{stdout}");
}
