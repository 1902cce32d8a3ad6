//! Watching and auditing through a real mount: event streams, dry runs,
//! the hash-chained audit log (also across a SIGKILL).

use crate::common;

use common::{eventually, Daemon};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

const CONFIG: &str = r#"{"permission": {"bash": {"*": "ask", "git status": "allow", "rm *": "deny"}, "path": {"*.env": "deny"}, "read": "allow"}}"#;

fn lines_from(child: &mut std::process::Child, count: usize) -> Vec<Value> {
    let stdout = child.stdout.take().expect("piped");
    let mut reader = BufReader::new(stdout);
    let mut out = Vec::new();
    for _ in 0..count {
        let mut line = String::new();
        reader.read_line(&mut line).expect("event line");
        out.push(serde_json::from_str(&line).expect("event JSON"));
    }
    out
}

#[test]
fn every_watcher_sees_every_inbox_event() {
    let daemon = Daemon::start(CONFIG, None);
    let events = daemon.session("main").join("events");
    let mut watchers: Vec<_> = (0..2)
        .map(|_| {
            Command::new("cat")
                .arg(&events)
                .stdout(Stdio::piped())
                .spawn()
                .expect("watcher")
        })
        .collect();
    std::thread::sleep(Duration::from_millis(150));
    daemon.ask(
        "main",
        "one",
        r#"{"surface":"bash","value":"make","message":"build please"}"#,
    );
    daemon.ask(
        "main",
        "two",
        r#"{"surface":"bash","value":"make install"}"#,
    );
    eventually("both asks wait", || daemon.inbox("main").len() == 2);
    let inbox = daemon.session("main").join("inbox");
    let first = daemon.inbox("main")[0].clone();
    std::fs::write(inbox.join(&first), "allow").expect("decided");
    std::fs::remove_file(daemon.session("main").join("outbox").join("two.request"))
        .expect("withdrawn");
    for watcher in &mut watchers {
        let events = lines_from(watcher, 4);
        let kinds: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
        assert_eq!(kinds, ["arrived", "arrived", "decided", "left"]);
        assert_eq!(events[0]["message"], "build please");
        assert_eq!(events[2]["decidedBy"]["kind"], "user");
        assert_eq!(events[3]["outcome"], "cancelled");
        let _ = watcher.kill();
        let _ = watcher.wait();
    }
}

/// An event line longer than the watcher's read (an `arrived` line carries
/// the ask's facts, a large ask's run past 100 KB) comes in its short form,
/// naming the ask, instead of failing the read: on the old main the read
/// failed `EIO` and the event was lost, so `permfs prompt` stopped following.
#[test]
fn an_event_longer_than_the_read_comes_short_and_the_stream_goes_on() {
    use std::io::Read;
    let daemon = Daemon::start(CONFIG, None);
    let mut events = std::fs::File::open(daemon.session("main").join("events")).expect("events");
    let value = format!("make {}", "y".repeat(20_000));
    let request = serde_json::json!({"surface": "bash", "value": value}).to_string();
    daemon.ask("main", "big", &request);
    daemon.ask("main", "small", r#"{"surface":"bash","value":"make"}"#);
    let mut buffer = vec![0u8; 4096];
    let n = events.read(&mut buffer).expect("a read of 4 KiB succeeds");
    let text = String::from_utf8_lossy(&buffer[..n]).into_owned();
    let first: Value = serde_json::from_str(text.lines().next().unwrap_or_default()).expect("JSON");
    assert_eq!(first["event"], "arrived");
    assert_eq!(first["detailsOmitted"], true);
    assert!(
        first["askId"]
            .as_str()
            .is_some_and(|id| id.ends_with("-big")),
        "{first}"
    );
    // The entry holds the details; the next event follows whole.
    let id = first["askId"].as_str().unwrap_or_default();
    let entry =
        std::fs::read_to_string(daemon.session("main").join("inbox").join(id)).expect("entry");
    assert!(entry.contains("yyyy"));
    let mut rest = text.lines().nth(1).map(str::to_string);
    if rest.is_none() {
        let n = events.read(&mut buffer).expect("the stream goes on");
        rest = Some(String::from_utf8_lossy(&buffer[..n]).into_owned());
    }
    let second: Value =
        serde_json::from_str(rest.unwrap_or_default().lines().next().unwrap_or_default())
            .expect("JSON");
    assert_eq!(second["event"], "arrived");
    assert!(second["facts"].is_array(), "{second}");
}

#[test]
fn a_dry_run_explains_and_changes_nothing() {
    let daemon = Daemon::start(CONFIG, None);
    let query = daemon.session("main").join("query");
    let answer = common::dry_run(&query, r#"{"tool":"read","input":{"path":"conf/.env"}}"#);
    assert_eq!(answer["dryRun"], true);
    assert_eq!(answer["verdict"]["state"], "deny");
    assert_eq!(answer["verdict"]["decidedBy"]["ruleSurface"], "path_read");
    let matched = answer["verdict"]["surfaces"][0]["rulesMatched"]
        .as_array()
        .expect("rules");
    assert!(matched
        .iter()
        .any(|r| r["pattern"] == "*.env" && r["wins"] == true && r["origin"] == "global"));

    let answer = common::dry_run(&query, r#"{"surface":"bash","value":"make"}"#);
    assert_eq!(answer["verdict"]["state"], "ask");
    assert!(
        daemon.inbox("main").is_empty(),
        "a dry run escalates nothing"
    );
    assert_eq!(
        std::fs::read_dir(daemon.session("main").join("outbox"))
            .expect("outbox")
            .count(),
        0
    );
}

#[test]
fn a_dry_run_is_private_to_its_open_file() {
    use std::io::{Read, Write};
    let daemon = Daemon::start(CONFIG, None);
    let query = daemon.session("main").join("query");
    // One file writes a dry run; another open file of the same session
    // neither sees it nor can replace it.
    let mut mine = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&query)
        .expect("opened");
    mine.write_all(br#"{"surface":"bash","value":"make"}"#)
        .expect("written");
    let theirs = std::fs::read_to_string(&query).expect("other read");
    assert!(theirs.contains("same descriptor"), "{theirs}");
    let _ = common::dry_run(&query, r#"{"tool":"read","input":{"path":"conf/.env"}}"#);
    let mut text = String::new();
    mine.read_to_string(&mut text).expect("mine read");
    let answer: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(answer["verdict"]["state"], "ask", "still my own dry run");
}

#[test]
fn decisions_are_audited_and_the_chain_verifies() {
    let daemon = Daemon::start(CONFIG, None);
    daemon.response(&daemon.ask("main", "a", r#"{"surface":"bash","value":"git status"}"#));
    daemon.response(&daemon.ask(
        "main",
        "b",
        r#"{"surface":"bash","value":"API_TOKEN=s3cret rm -rf /"}"#,
    ));
    let view = std::fs::read_to_string(daemon.mountpoint.join("audit.log"))
        .expect("audit.log in the mount");
    let lines: Vec<Value> = view
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["askId"], "1.1-a");
    assert_eq!(lines[0]["session"], "main");
    assert_eq!(lines[0]["outcome"], "allow");
    assert!(lines[0]["latencyMs"].as_f64().is_some());
    assert!(!view.contains("s3cret"), "secrets are redacted: {view}");
    assert!(
        std::fs::write(daemon.mountpoint.join("audit.log"), "x").is_err(),
        "read-only"
    );
    let verify = Command::new(env!("CARGO_BIN_EXE_permfs"))
        .args(["audit", "verify"])
        .arg(daemon.audit_file())
        .output()
        .expect("verify runs");
    assert!(verify.status.success(), "{verify:?}");

    // Tampering is caught and the line named.
    let text = std::fs::read_to_string(daemon.audit_file()).expect("read");
    let copy = daemon.dir.path().join("tampered.log");
    std::fs::write(&copy, text.replacen("\"allow\"", "\"deny\"", 1)).expect("write");
    let verify = Command::new(env!("CARGO_BIN_EXE_permfs"))
        .args(["audit", "verify"])
        .arg(&copy)
        .output()
        .expect("runs");
    assert!(!verify.status.success());
    assert!(
        String::from_utf8_lossy(&verify.stderr).contains("line 1"),
        "{verify:?}"
    );
}

#[test]
fn a_sigkill_mid_stream_loses_at_most_the_line_being_written() {
    let mut daemon = Daemon::start(CONFIG, None);
    let outbox = daemon.session("main").join("outbox");
    // A stream of decisions from another process.
    let script = format!(
        "i=0; while :; do i=$((i+1)); echo '{{\"surface\":\"bash\",\"value\":\"git status\"}}' > {0}/s$i.request || exit 0; done",
        outbox.display()
    );
    let mut stream = Command::new("sh")
        .arg("-c")
        .arg(script)
        .stderr(Stdio::null())
        .spawn()
        .expect("stream");
    eventually("some decisions are logged", || {
        std::fs::read_to_string(daemon.audit_file())
            .map(|t| t.lines().count() > 50)
            .unwrap_or(false)
    });
    let child = daemon.child.take().expect("running");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = stream.kill();
    let _ = stream.wait();
    let mut child = child;
    let _ = child.wait();
    let _ = Command::new("umount")
        .arg("-l")
        .arg(&daemon.mountpoint)
        .status();
    let verify = Command::new(env!("CARGO_BIN_EXE_permfs"))
        .args(["audit", "verify"])
        .arg(daemon.audit_file())
        .output()
        .expect("verify runs");
    assert!(
        verify.status.success(),
        "every complete line verifies: {verify:?}"
    );
    drop(daemon);
}

/// Issue 23, item 8: the daemon's log says only true things. The
/// operator's reads of operator-only files succeed and log no refusal
/// (before, the first check by uid alone logged `access refused uid=0
/// sandboxed=true` for each); a real refusal is logged.
#[test]
fn the_log_names_a_refusal_only_when_a_request_is_refused() {
    let dir = tempfile::tempdir().expect("temp");
    let log = dir.path().join("daemon.log");
    let daemon = Daemon::start_with_log(CONFIG, &log);
    daemon.response(&daemon.ask("main", "a", r#"{"surface":"bash","value":"git status"}"#));
    std::fs::read(daemon.mountpoint.join("audit.log")).expect("the operator reads the audit log");
    std::fs::read(daemon.session("main").join("pending")).expect("the operator reads pending");
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        let refused = Command::new("cat")
            .arg(daemon.mountpoint.join("audit.log"))
            .uid(65534)
            .gid(65534)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("cat runs");
        assert!(!refused.success(), "another uid may not read the audit log");
    }
    let mut daemon = daemon;
    daemon.stop();
    let text = std::fs::read_to_string(&log).expect("the daemon's log");
    let refusals: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("access refused"))
        .collect();
    assert!(
        refusals.iter().all(|l| l.contains("65534")),
        "a refusal logged for a read that succeeded: {refusals:?}"
    );
    if root {
        assert_eq!(refusals.len(), 1, "the real refusal is logged: {text}");
    }
}
