//! The audit log fails closed and heals, through a real mount: while a
//! decision's line cannot be written, no `allow` reaches an asker (neither
//! a rule's nor a person's); when space returns, asks are answered again
//! and the log verifies; a deleted log is noticed and reopened.

use crate::common;

use common::Daemon;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A small tmpfs for the daemon's state, unmounted on drop (lazily, so
/// also when the test failed with the daemon still holding its log).
struct SmallTmpfs(tempfile::TempDir);

impl SmallTmpfs {
    fn mount(size: &str) -> Option<Self> {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            common::skip("mounting a tmpfs state dir needs root");
            return None;
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let status = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir.path())
            .status()
            .expect("mount runs");
        assert!(status.success(), "mount -t tmpfs failed");
        Some(Self(dir))
    }

    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for SmallTmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.0.path()).status();
    }
}

/// Fills the filesystem of `dir` with a file until the disk is full.
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut file = std::fs::File::create(&path).expect("filler");
    let chunk = vec![0u8; 4096];
    while file.write_all(&chunk).is_ok() {}
    while file.write_all(&[0u8]).is_ok() {}
    path
}

/// `permfs audit verify FILE`: (exit code, stdout + stderr).
fn verify(file: &Path) -> (i32, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_permfs"))
        .args(["audit", "verify"])
        .arg(file)
        .output()
        .expect("permfs runs");
    (
        output.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    )
}

/// The ask ids the log holds.
fn logged(file: &Path) -> HashSet<String> {
    std::fs::read_to_string(file)
        .expect("audit log read")
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["askId"].as_str().map(str::to_string))
        .collect()
}

const CONFIG: &str = r#"{"permission": {"bash": {"*": "ask", "ls": "allow"}}}"#;

fn bash(command: &str) -> String {
    json!({"surface": "bash", "value": command}).to_string()
}

/// Raises an ask a person must decide; returns (response path, inbox entry).
fn pending_ask(daemon: &Daemon, rid: &str) -> (PathBuf, PathBuf) {
    let before = daemon.inbox("main");
    let response = daemon.ask("main", rid, &bash(&format!("make {rid}")));
    let mut entry = None;
    common::eventually("the ask reaches the inbox", || {
        entry = daemon
            .inbox("main")
            .into_iter()
            .find(|e| !before.contains(e));
        entry.is_some()
    });
    let entry = entry.unwrap_or_default();
    (response, daemon.session("main").join("inbox").join(entry))
}

#[test]
fn a_full_state_dir_denies_every_ask_and_heals_when_space_returns() {
    let Some(tmpfs) = SmallTmpfs::mount("256k") else {
        return;
    };
    let daemon = Daemon::start_with_state_dir(CONFIG, tmpfs.path());
    let audit = daemon.audit_file();
    let first = daemon.response(&daemon.ask("main", "r0", &bash("ls")));
    assert_eq!(first["outcome"], "allow");
    let (person_response, person_entry) = pending_ask(&daemon, "p1");

    let filler = fill(tmpfs.path());
    // The log's last page may still take a line or two: ask until the
    // disk refuses one, then every further ask must be refused too.
    let mut allowed = vec![first["askId"].as_str().unwrap_or_default().to_string()];
    let mut refused = None;
    for n in 1..40 {
        let answer = daemon.response(&daemon.ask("main", &format!("r{n}"), &bash("ls")));
        if answer["outcome"] == "allow" {
            allowed.push(answer["askId"].as_str().unwrap_or_default().to_string());
            continue;
        }
        refused = Some((n, answer));
        break;
    }
    let (n, answer) = refused.expect("a full disk refuses an audit line");
    assert_eq!(answer["approved"], false);
    // The audit log and the journal share the state dir: whichever write
    // meets the full disk first refuses, each with its own outcome.
    let unavailable = |outcome: &serde_json::Value| {
        outcome == "audit_unavailable" || outcome == "journal_unavailable"
    };
    assert!(unavailable(&answer["outcome"]), "{answer}");
    assert!(unavailable(&answer["decidedBy"]["kind"]), "{answer}");
    let reason = answer["denialReason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("No space left on device") || reason.contains("full"),
        "{reason}"
    );
    for m in n + 1..n + 4 {
        let answer = daemon.response(&daemon.ask("main", &format!("r{m}"), &bash("ls")));
        assert!(unavailable(&answer["outcome"]), "ask r{m}: {answer}");
    }

    // A person's allow cannot be recorded: their write fails (ENOSPC),
    // the asker is denied, and the ask is not left half-decided.
    let error = std::fs::write(&person_entry, "allow").expect_err("the decision fails");
    assert_eq!(error.raw_os_error(), Some(libc::ENOSPC), "{error}");
    let answer = daemon.response(&person_response);
    assert!(unavailable(&answer["outcome"]), "{answer}");
    assert_eq!(answer["approved"], false);
    // A new ask a person would decide cannot even be kept pending (it is
    // journaled before it waits): refused at once, and no grant appears.
    let refused = daemon.response(&daemon.ask("main", "p2", &bash("make p2")));
    assert_eq!(refused["approved"], false);
    assert!(unavailable(&refused["outcome"]), "{refused}");
    assert!(
        daemon.inbox("main").is_empty(),
        "nothing waits that is not recorded"
    );
    assert!(std::fs::read_dir(daemon.session("main").join("grants"))
        .map(|d| d.count() == 0)
        .unwrap_or(true));

    // Every allow an asker saw is in the log; the log has no torn line.
    let held = logged(&audit);
    for id in &allowed {
        assert!(held.contains(id), "allow {id} was delivered but not logged");
    }
    assert!(std::fs::read(&audit).expect("log").ends_with(b"\n"));
    assert_eq!(verify(&audit).0, 0, "{}", verify(&audit).1);

    // Space returns: asks are answered and decisions delivered again.
    std::fs::remove_file(&filler).expect("space freed");
    let answer = daemon.response(&daemon.ask("main", "after", &bash("ls")));
    assert_eq!(answer["outcome"], "allow");
    let (person_response, person_entry) = pending_ask(&daemon, "p3");
    std::fs::write(&person_entry, "allow").expect("decided");
    assert_eq!(daemon.response(&person_response)["outcome"], "allow");
    let held = logged(&audit);
    for id in [
        &answer["askId"],
        &daemon.response(&person_response)["askId"],
    ] {
        assert!(
            held.contains(id.as_str().unwrap_or_default()),
            "{id} logged"
        );
    }
    let (code, output) = verify(&audit);
    assert_eq!(
        code, 0,
        "no false tampering after the disk filled: {output}"
    );
    assert!(output.contains("chain intact"), "{output}");
}

#[test]
fn a_deleted_audit_log_is_noticed_and_reopened() {
    let daemon = Daemon::start(CONFIG, None);
    let audit = daemon.audit_file();
    assert_eq!(
        daemon.response(&daemon.ask("main", "r0", &bash("ls")))["outcome"],
        "allow"
    );
    let old: Vec<Value> = std::fs::read_to_string(&audit)
        .expect("log")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    std::fs::remove_file(&audit).expect("log removed");
    let answer = daemon.response(&daemon.ask("main", "r1", &bash("ls")));
    assert_eq!(answer["outcome"], "allow");
    let new: Vec<Value> = std::fs::read_to_string(&audit)
        .expect("the log is back")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    assert_eq!(new[0]["event"], "audit_reopened");
    assert_eq!(new[0]["previousHash"], old[old.len() - 1]["hash"]);
    assert_eq!(new[1]["askId"], answer["askId"]);
    assert_eq!(verify(&audit).0, 0, "{}", verify(&audit).1);

    // A log replaced by a symlink is never written through: fail closed.
    let elsewhere = daemon.dir.path().join("elsewhere");
    std::fs::write(&elsewhere, "").expect("target");
    std::fs::remove_file(&audit).expect("log removed");
    std::os::unix::fs::symlink(&elsewhere, &audit).expect("link");
    let answer = daemon.response(&daemon.ask("main", "r2", &bash("ls")));
    assert_eq!(answer["outcome"], "audit_unavailable");
    assert_eq!(std::fs::read(&elsewhere).expect("target"), b"");
}

#[test]
fn verify_tells_a_torn_tail_from_tampering() {
    let daemon = Daemon::start(CONFIG, None);
    for n in 0..3 {
        daemon.response(&daemon.ask("main", &format!("r{n}"), &bash("ls")));
    }
    let text = std::fs::read_to_string(daemon.audit_file()).expect("log");
    let file = daemon.dir.path().join("copy.log");
    std::fs::write(&file, &text).expect("copy");
    assert_eq!(verify(&file).0, 0);
    std::fs::write(&file, format!("{text}{{\"askId\":\"cut")).expect("torn");
    let (code, output) = verify(&file);
    assert_eq!(code, 3, "{output}");
    assert!(output.contains("torn tail, not tampering"), "{output}");
    std::fs::write(&file, text.replacen("allow", "deny", 1)).expect("edited");
    let (code, output) = verify(&file);
    assert_eq!(code, 1, "{output}");
    assert!(output.contains("tampered: line 1"), "{output}");
    let (code, _) = verify(&daemon.dir.path().join("missing.log"));
    assert_eq!(code, 2);
}
