//! The one-descriptor ask (`outbox/<rid>`, no suffix): open it with
//! `O_RDWR|O_CREAT|O_EXCL`, write the request, read the answer from the
//! same descriptor, close. Driven from separate processes (python3 and a
//! shell), as clients would.

mod common;

use common::{eventually, python, Daemon};
use std::process::Command;

const CONFIG: &str =
    r#"{"permission": {"*": "ask", "bash": {"*": "ask", "git *": "allow", "rm *": "deny"}}}"#;

/// A python3 client of the one-descriptor form; prints the answer.
const CLIENT: &str = r#"
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
os.write(fd, sys.argv[2].encode())
answer = b""
while True:
    chunk = os.read(fd, 65536)
    if not chunk:
        break
    answer += chunk
os.close(fd)
sys.stdout.write(answer.decode())
"#;

fn ask(path: &std::path::Path, request: &str) -> serde_json::Value {
    let output = Command::new(python())
        .args(["-c", CLIENT])
        .arg(path)
        .arg(request)
        .output()
        .expect("python3 runs");
    assert!(output.status.success(), "{output:?}");
    serde_json::from_slice(&output.stdout).expect("the answer is JSON")
}

fn outbox(daemon: &Daemon, session: &str) -> Vec<String> {
    daemon.listing(session, "outbox")
}

#[test]
fn one_descriptor_asks_and_is_forgotten_at_close() {
    let daemon = Daemon::start(CONFIG, None);
    let path = daemon.session("main").join("outbox").join("r1");
    let allowed = ask(&path, r#"{"surface":"bash","value":"git status"}"#);
    assert_eq!(allowed["approved"], true);
    assert_eq!(allowed["decidedBy"]["kind"], "rule");
    let denied = ask(&path, r#"{"surface":"bash","value":"rm -rf /"}"#);
    assert_eq!(
        denied["outcome"], "deny",
        "the same name again: the first was forgotten"
    );
    assert!(outbox(&daemon, "main").is_empty(), "nothing left to unlink");
    let invalid = ask(&path, "{not json");
    assert_eq!(invalid["outcome"], "invalid");
    assert!(invalid["denialReason"]
        .as_str()
        .is_some_and(|r| r.contains("JSON")));
}

#[test]
fn a_shell_asks_on_one_descriptor() {
    let daemon = Daemon::start(CONFIG, None);
    let outbox = daemon.session("main").join("outbox");
    let script = format!(
        "exec 3<> '{}/r'; echo '{{\"surface\":\"bash\",\"value\":\"git log\"}}' >&3; cat <&3; exec 3>&-",
        outbox.display()
    );
    let output = Command::new("bash")
        .args(["-c", &script])
        .output()
        .expect("bash runs");
    let answer: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(answer["approved"], true, "{output:?}");
    assert!(outbox_is_empty(&daemon));
}

fn outbox_is_empty(daemon: &Daemon) -> bool {
    outbox(daemon, "main").is_empty()
}

#[test]
fn a_pending_exchange_waits_for_the_decision_and_closing_early_withdraws() {
    let daemon = Daemon::start(CONFIG, None);
    std::fs::write(daemon.session("main").join("ctl"), "spawn w").expect("spawned");
    let path = daemon.session("main/w").join("outbox").join("slow");
    let asker = std::thread::spawn(move || ask(&path, r#"{"surface":"bash","value":"make"}"#));
    eventually("the ask waits in main's inbox", || {
        daemon.inbox("main").len() == 1
    });
    assert_eq!(
        outbox(&daemon, "main/w"),
        vec!["slow.request".to_string(), "slow.response".to_string()],
        "a live exchange shows in the listing like any ask"
    );
    let entry = daemon
        .session("main")
        .join("inbox")
        .join(&daemon.inbox("main")[0]);
    std::fs::write(entry, "deny not now").expect("decided");
    let answer = asker.join().expect("the asker returns");
    assert_eq!(answer["state"], "denied_with_reason");

    // A reader that gives up (killed while blocked) withdraws its ask.
    let path = daemon.session("main/w").join("outbox").join("abandoned");
    let mut child = Command::new(python())
        .args(["-c", CLIENT])
        .arg(&path)
        .arg(r#"{"surface":"bash","value":"make install"}"#)
        .spawn()
        .expect("python3 runs");
    eventually("the second ask waits", || daemon.inbox("main").len() == 1);
    child.kill().expect("killed");
    let _ = child.wait();
    eventually("closing the exchange withdrew the ask", || {
        daemon.inbox("main").is_empty() && outbox(&daemon, "main/w").is_empty()
    });
}

#[test]
fn an_exchange_name_in_use_is_eexist_and_written_only_by_its_descriptor() {
    let daemon = Daemon::start(CONFIG, None);
    let outbox = daemon.session("main").join("outbox");
    let holder = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(outbox.join("x"))
        .expect("created");
    let again = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(outbox.join("x"));
    assert_eq!(
        again.map_err(|e| e.raw_os_error()).err(),
        Some(Some(libc::EEXIST))
    );
    let two_file = std::fs::write(outbox.join("x.request"), "{}");
    assert_eq!(
        two_file.map_err(|e| e.raw_os_error()).err(),
        Some(Some(libc::EEXIST))
    );
    // Nobody else reaches an exchange by name.
    let by_name = std::fs::OpenOptions::new()
        .read(true)
        .open(outbox.join("x"));
    assert_eq!(
        by_name.map_err(|e| e.raw_os_error()).err(),
        Some(Some(libc::ENOENT))
    );
    drop(holder);
    assert!(outbox_is_empty(&daemon), "closed unread: nothing was asked");
}
