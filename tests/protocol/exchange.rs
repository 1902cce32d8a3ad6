//! The one-descriptor ask: open `outbox/<rid>` (no suffix) with
//! `O_RDWR|O_CREAT|O_EXCL`, or the session's `ask` file with `O_RDWR`;
//! write the request, read the answer from the same descriptor, close. Driven from separate processes (python3 and a
//! shell), as clients would.

use crate::common;

use common::{eventually, python, Daemon};
use std::process::Command;

const CONFIG: &str =
    r#"{"permission": {"*": "ask", "bash": {"*": "ask", "git *": "allow", "rm *": "deny"}}}"#;

/// A python3 client of the one-descriptor form; prints the answer. Its
/// third argument says how the file is opened: `create` (an
/// `outbox/<rid>` of its own, `O_CREAT|O_EXCL`) or `open` (the session's
/// `ask` file).
const CLIENT: &str = r#"
import os, sys
flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if sys.argv[3] == "create" else 0)
fd = os.open(sys.argv[1], flags, 0o600)
os.write(fd, sys.argv[2].encode())
answer = b"".join(iter(lambda: os.read(fd, 65536), b""))  # to EOF
os.close(fd)
sys.stdout.write(answer.decode())
"#;

fn ask_opening(path: &std::path::Path, request: &str, how: &str) -> serde_json::Value {
    let output = Command::new(python())
        .args(["-c", CLIENT])
        .arg(path)
        .arg(request)
        .arg(how)
        .output()
        .expect("python3 runs");
    assert!(output.status.success(), "{output:?}");
    serde_json::from_slice(&output.stdout).expect("the answer is JSON")
}

/// Asks through `outbox/<rid>`, created.
fn ask(path: &std::path::Path, request: &str) -> serde_json::Value {
    ask_opening(path, request, "create")
}

/// Asks through the session's `ask` file: no name to choose, and the
/// file's name is cached by the kernel, so the ask costs no lookup.
fn ask_through_file(path: &std::path::Path, request: &str) -> serde_json::Value {
    ask_opening(path, request, "open")
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
    let answer = shell_asks_on(&outbox.join("r"));
    assert_eq!(answer["approved"], true);
    assert!(outbox_is_empty(&daemon));
}

/// A shell asks `git log` on one descriptor at `path`, as the mount's
/// README shows it; the answer.
fn shell_asks_on(path: &std::path::Path) -> serde_json::Value {
    let script = format!(
        "exec 3<> '{}'; echo '{{\"surface\":\"bash\",\"value\":\"git log\"}}' >&3; cat <&3; exec 3<&-",
        path.display()
    );
    let output = Command::new("bash")
        .args(["-c", &script])
        .output()
        .expect("bash runs");
    serde_json::from_slice(&output.stdout).unwrap_or_else(|_| panic!("JSON: {output:?}"))
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
        .arg("create")
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

#[test]
fn the_ask_file_takes_one_ask_per_open_under_a_name_of_its_own() {
    let daemon = Daemon::start(CONFIG, None);
    let file = daemon.session("main").join("ask");
    let allowed = ask_through_file(&file, r#"{"surface":"bash","value":"git status"}"#);
    assert_eq!(allowed["approved"], true);
    assert_eq!(allowed["decidedBy"]["kind"], "rule");
    let denied = ask_through_file(&file, r#"{"surface":"bash","value":"rm -rf /"}"#);
    assert_eq!(denied["outcome"], "deny");
    let invalid = ask_through_file(&file, "{not json");
    assert_eq!(invalid["outcome"], "invalid");
    assert!(outbox_is_empty(&daemon), "each ask was forgotten at close");

    // From a shell, as the mount's README shows it.
    assert_eq!(shell_asks_on(&file)["approved"], true);

    // Read-only it explains itself; write-only could never read an answer.
    let help = std::fs::read_to_string(&file).expect("readable");
    assert!(help.contains("exec 3<> ask"), "{help}");
    let write_only = std::fs::OpenOptions::new().write(true).open(&file);
    assert_eq!(
        write_only.map_err(|e| e.raw_os_error()).err(),
        Some(Some(libc::EINVAL))
    );

    // Two asks waiting at once: two names, each shown in the outbox, each
    // answered on its own descriptor.
    std::fs::write(daemon.session("main").join("ctl"), "spawn w").expect("spawned");
    let file = daemon.session("main/w").join("ask");
    let askers: Vec<_> = ["make", "make install"]
        .into_iter()
        .map(|command| {
            let file = file.clone();
            let request = format!(r#"{{"surface":"bash","value":"{command}"}}"#);
            std::thread::spawn(move || ask_through_file(&file, &request))
        })
        .collect();
    eventually("both asks wait in main's inbox", || {
        daemon.inbox("main").len() == 2
    });
    let names = outbox(&daemon, "main/w");
    assert_eq!(names.len(), 4, "{names:?}");
    assert!(
        names.iter().all(|n| n.starts_with("ask-")),
        "daemon-chosen names: {names:?}"
    );
    for entry in daemon.inbox("main") {
        let path = daemon.session("main").join("inbox").join(entry);
        std::fs::write(path, "allow").expect("decided");
    }
    for asker in askers {
        let answer = asker.join().expect("the asker returns");
        assert_eq!(answer["approved"], true);
        assert_eq!(answer["decidedBy"]["kind"], "user");
    }
    eventually("both were forgotten at close", || {
        outbox(&daemon, "main/w").is_empty()
    });
}

/// Opens `ask`, writes `parts` one by one (pausing after each), and reports
/// on stdout, a line per event, what the descriptor did.
const STEPWISE_CLIENT: &str = r#"
import os, select, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_NONBLOCK)
for part in sys.argv[2:]:
    os.write(fd, part.encode())
    print("wrote", flush=True)
    time.sleep(0.3)
try:
    os.read(fd, 65536)
    print("answered at once", flush=True)
except BlockingIOError:
    print("EAGAIN", flush=True)
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while not poller.poll(10000):
        pass
answer = b"".join(iter(lambda: os.read(fd, 65536), b""))  # to EOF
print(answer.decode().replace("\n", " "), flush=True)
os.close(fd)
"#;

#[test]
fn a_complete_write_asks_before_the_first_read_and_a_partial_one_does_not() {
    use std::io::BufRead;
    let daemon = Daemon::start(CONFIG, None);
    std::fs::write(daemon.session("main").join("ctl"), "spawn w").expect("spawned");
    let mut child = Command::new(python())
        .args(["-c", STEPWISE_CLIENT])
        .arg(daemon.session("main/w").join("ask"))
        .args([r#"{"surface": "bash", "#, r#""value": "make"}"#])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut next = || lines.next().and_then(Result::ok).unwrap_or_default();
    assert_eq!(next(), "wrote");
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(
        daemon.inbox("main").is_empty(),
        "half a request asks nothing"
    );
    assert_eq!(next(), "wrote");
    eventually("the completed request asked, with no read yet", || {
        daemon.inbox("main").len() == 1
    });
    assert_eq!(next(), "EAGAIN", "non-blocking: no answer yet");
    let entry = daemon
        .session("main")
        .join("inbox")
        .join(&daemon.inbox("main")[0]);
    std::fs::write(entry, "allow").expect("decided");
    let answer: serde_json::Value = serde_json::from_str(&next()).expect("the answer");
    assert_eq!(answer["approved"], true, "poll woke the reader");
    assert!(child.wait().expect("exits").success());
    eventually("forgotten at close", || {
        outbox(&daemon, "main/w").is_empty()
    });
}
