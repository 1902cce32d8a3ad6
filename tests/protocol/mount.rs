//! The mount, driven as users drive it: plain file calls, from separate
//! processes where it matters, against a real FUSE filesystem.

use crate::common;

use common::{eventually, Daemon};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CONFIG: &str = r#"{"permission": {"*": "ask", "bash": {"*": "ask", "git status": "allow", "rm *": {"action": "deny", "reason": "no deletes"}}}}"#;

#[test]
fn recorded_authority_answers_at_once() {
    let daemon = Daemon::start(CONFIG, None);
    let allowed =
        daemon.response(&daemon.ask("main", "a", r#"{"surface":"bash","value":"git status"}"#));
    assert_eq!(allowed["approved"], true);
    assert_eq!(allowed["outcome"], "allow");
    assert_eq!(allowed["decidedBy"]["kind"], "rule");
    assert_eq!(allowed["decidedBy"]["pattern"], "git status");
    assert_eq!(allowed["hops"][0]["session"], "main");

    let denied =
        daemon.response(&daemon.ask("main", "d", r#"{"surface":"bash","value":"rm -rf x"}"#));
    assert_eq!(denied["approved"], false);
    assert_eq!(denied["state"], "denied_with_reason");
    assert_eq!(denied["denialReason"], "no deletes");
}

#[test]
fn a_blocked_reader_in_another_process_wakes_on_the_decision() {
    let daemon = Daemon::start(CONFIG, None);
    let response = daemon.ask("main", "r", r#"{"surface":"bash","value":"make"}"#);
    let reader = Command::new("cat")
        .arg(&response)
        .stdout(Stdio::piped())
        .spawn()
        .expect("cat");
    eventually("the ask is in the inbox", || {
        daemon.inbox("main").len() == 1
    });
    let ask = &daemon.inbox("main")[0];
    let shown = std::fs::read_to_string(daemon.session("main").join("inbox").join(ask))
        .expect("inbox entry");
    assert!(
        shown.contains("\"make\""),
        "the inbox entry shows the facts: {shown}"
    );
    std::thread::sleep(Duration::from_millis(100));
    std::fs::write(
        daemon.session("main").join("inbox").join(ask),
        "deny not today\n",
    )
    .expect("decided");
    let output = reader.wait_with_output().expect("cat ends");
    let answer: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(answer["denialReason"], "not today");
    assert_eq!(answer["decidedBy"]["kind"], "user");
    assert!(
        daemon.inbox("main").is_empty(),
        "a decided ask leaves the inbox"
    );
    // A later decision on the same ask is refused.
    let late = std::fs::write(daemon.session("main").join("inbox").join(ask), "allow");
    assert!(late.is_err(), "a second decision must fail");
}

fn blocked_cat(daemon: &Daemon, rid: &str) -> std::process::Child {
    let response = daemon.ask("main", rid, r#"{"surface":"bash","value":"make"}"#);
    let child = interruptible(Command::new("cat").arg(&response))
        .stdout(Stdio::null())
        .spawn()
        .expect("cat");
    std::thread::sleep(Duration::from_millis(200));
    child
}

/// `command` with SIGINT at its default action, whatever this test
/// process inherited (a job started in the background of a
/// non-interactive shell ignores SIGINT, and so would its `cat`).
fn interruptible(command: &mut Command) -> &mut Command {
    // SAFETY: only `signal(2)`, async-signal-safe, between fork and exec.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        })
    }
}

fn ends_within(child: &mut std::process::Child, limit: Duration) -> Duration {
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "the blocked reader did not end within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn signals_end_a_blocked_reader_promptly_and_the_ask_stays_pending() {
    let daemon = Daemon::start(CONFIG, None);
    for (rid, signal) in [("sigint", libc::SIGINT), ("sigkill", libc::SIGKILL)] {
        let mut cat = blocked_cat(&daemon, rid);
        assert!(
            cat.try_wait().expect("wait").is_none(),
            "cat blocks while pending"
        );
        // SAFETY: signalling our own child.
        unsafe { libc::kill(cat.id() as i32, signal) };
        ends_within(&mut cat, Duration::from_millis(500));
    }
    assert_eq!(
        daemon.inbox("main").len(),
        2,
        "interrupted asks stay pending"
    );
    // A new read waits again and gets the answer.
    let response = daemon
        .session("main")
        .join("outbox")
        .join("sigint.response");
    let reader = Command::new("cat")
        .arg(&response)
        .stdout(Stdio::piped())
        .spawn()
        .expect("cat");
    std::thread::sleep(Duration::from_millis(100));
    let ask = daemon
        .inbox("main")
        .into_iter()
        .find(|a| a.ends_with("sigint"))
        .expect("pending");
    std::fs::write(daemon.session("main").join("inbox").join(ask), "allow").expect("decided");
    let output = reader.wait_with_output().expect("cat ends");
    assert!(String::from_utf8_lossy(&output.stdout).contains("\"approved\": true"));
}

/// One thread of a python3 process reads a pending response through
/// libc (so an `EINTR` is seen, not retried); another sends that thread
/// alone signals (`pthread_kill`, i.e. `tgkill`): first `SIGUSR2`, which
/// the reading thread blocks, then `argv[2]`, which it catches. Prints
/// whether the read survived the blocked signal, the read's result, its
/// errno, and how long after the second signal it returned.
const THREAD_SIGNAL_CLIENT: &str = r#"
import ctypes, os, signal, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
caught = int(sys.argv[2])
signal.signal(caught, lambda *_: None)
signal.signal(signal.SIGUSR2, lambda *_: None)
fd = os.open(sys.argv[1], os.O_RDONLY)
result = {}
def reader():
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR2])
    buffer = ctypes.create_string_buffer(65536)
    result["n"] = libc.read(fd, buffer, 65536)
    result["errno"] = ctypes.get_errno()
    result["at"] = time.monotonic()
thread = threading.Thread(target=reader)
thread.start()
time.sleep(0.3)
signal.pthread_kill(thread.ident, signal.SIGUSR2)
time.sleep(0.3)
survived = "n" not in result
sent = time.monotonic()
signal.pthread_kill(thread.ident, caught)
thread.join(10)
print(survived, result.get("n"), result.get("errno"), result.get("at", sent + 99) - sent)
"#;

#[test]
fn a_signal_to_the_reading_thread_alone_ends_its_read() {
    let daemon = Daemon::start(CONFIG, None);
    // A classic signal, and a real-time one (what `pthread_cancel` sends).
    for (rid, signal) in [("t", libc::SIGUSR1), ("rt", libc::SIGRTMIN() + 2)] {
        let response = daemon.ask("main", rid, r#"{"surface":"bash","value":"make"}"#);
        let output = Command::new("python3")
            .args(["-c", THREAD_SIGNAL_CLIENT])
            .arg(&response)
            .arg(signal.to_string())
            .output()
            .expect("python3 runs");
        let text = String::from_utf8_lossy(&output.stdout);
        let fields: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(
            fields.first(),
            Some(&"True"),
            "a signal the reading thread blocks leaves its read waiting: {output:?}"
        );
        assert_eq!(
            fields.get(1..3),
            Some(&["-1", "4"][..]),
            "EINTR on signal {signal}: {output:?}"
        );
        let after: f64 = fields.get(3).and_then(|f| f.parse().ok()).unwrap_or(99.0);
        // The kernel's interrupt comes within a millisecond; slack for a
        // busy machine.
        assert!(
            after < 0.5,
            "the read ended {after} s after signal {signal}"
        );
    }
    assert_eq!(daemon.inbox("main").len(), 2, "the asks stay pending");
}

#[test]
fn nonblocking_reads_and_poll_report_pending_then_ready() {
    let daemon = Daemon::start(CONFIG, None);
    let response = daemon.ask("main", "p", r#"{"surface":"bash","value":"make"}"#);
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&response)
        .expect("open");
    let mut buffer = [0u8; 64];
    let error = file.read(&mut buffer).expect_err("pending");
    assert_eq!(error.raw_os_error(), Some(libc::EAGAIN));
    let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
    let mut pollfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let ready = unsafe { libc::poll(&mut pollfd, 1, 100) };
    assert_eq!(ready, 0, "not readable while pending");
    let ask = daemon.inbox("main")[0].clone();
    std::fs::write(daemon.session("main").join("inbox").join(ask), "allow").expect("decided");
    pollfd.revents = 0;
    // SAFETY: as above.
    let ready = unsafe { libc::poll(&mut pollfd, 1, 2000) };
    assert_eq!(ready, 1, "readable once decided");
    assert!(pollfd.revents & libc::POLLIN != 0);
}

#[test]
fn unlinking_withdraws_and_reusing_a_name_is_refused() {
    let daemon = Daemon::start(CONFIG, None);
    let outbox = daemon.session("main").join("outbox");
    daemon.ask("main", "w", r#"{"surface":"bash","value":"make"}"#);
    assert_eq!(daemon.inbox("main").len(), 1);
    let again = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(outbox.join("w.request"));
    assert_eq!(
        again.err().and_then(|e| e.raw_os_error()),
        Some(libc::EEXIST)
    );
    std::fs::remove_file(outbox.join("w.request")).expect("withdrawn");
    assert!(
        daemon.inbox("main").is_empty(),
        "a withdrawn ask leaves the inbox"
    );
}

/// A decided response is read through the kernel's page cache (one
/// `READ`, its size known): what a reader sees must still be exactly the
/// answer of the ask that has the name now.
#[test]
fn a_decided_response_has_its_size_and_a_reused_name_reads_the_new_answer() {
    let daemon = Daemon::start(CONFIG, None);
    let outbox = daemon.session("main").join("outbox");
    let response = daemon.ask("main", "a", r#"{"surface":"bash","value":"git status"}"#);
    let whole = std::fs::read(&response).expect("read");
    let size = std::fs::metadata(&response).expect("stat").len();
    assert_eq!(size, whole.len() as u64, "stat shows the answer's size");
    // Seven bytes at a time, from another open: the same bytes.
    let mut file = std::fs::File::open(&response).expect("opened");
    let (mut pieces, mut chunk) = (Vec::new(), [0u8; 7]);
    loop {
        let n = file.read(&mut chunk).expect("read");
        if n == 0 {
            break;
        }
        pieces.extend_from_slice(&chunk[..n]);
    }
    assert_eq!(pieces, whole);
    assert_eq!(daemon.response(&response)["outcome"], "allow");

    // The name is freed and asked again, for a denial of another size.
    std::fs::remove_file(outbox.join("a.request")).expect("forgotten");
    daemon.ask(
        "main",
        "a",
        r#"{"surface":"bash","value":"rm -rf somewhere"}"#,
    );
    let again = std::fs::read(&response).expect("read");
    assert_ne!(again.len(), whole.len());
    let answer: serde_json::Value = serde_json::from_slice(&again).expect("JSON");
    assert_eq!(
        answer["outcome"], "deny",
        "not the cached answer of the old ask"
    );

    // Pending: size 0, and a stat meanwhile does not hide the answer later.
    let pending = daemon.ask("main", "p", r#"{"surface":"bash","value":"make"}"#);
    assert_eq!(std::fs::metadata(&pending).expect("stat").len(), 0);
    eventually("the ask is in the inbox", || {
        daemon.inbox("main").len() == 1
    });
    let ask = daemon.inbox("main")[0].clone();
    std::fs::write(daemon.session("main").join("inbox").join(ask), "allow\n").expect("decided");
    let decided = std::fs::read(&pending).expect("read");
    assert_eq!(
        std::fs::metadata(&pending).expect("stat").len(),
        decided.len() as u64
    );
    let answer: serde_json::Value = serde_json::from_slice(&decided).expect("JSON");
    assert_eq!(answer["decidedBy"]["kind"], "user");
}

/// A response's pages belong to one ask. A handle still open on the old
/// ask of a reused name must neither see the new answer nor, by reading
/// again, put its old answer where a reader of the new ask finds it.
#[test]
fn an_old_handle_and_a_reused_name_never_share_an_answer() {
    use std::os::unix::fs::FileExt;
    let daemon = Daemon::start(CONFIG, None);
    let outbox = daemon.session("main").join("outbox");
    let request = r#"{"surface":"bash","value":"git status"}"#;
    let response = daemon.ask("main", "a", request);
    let old_handle = std::fs::File::open(&response).expect("opened");
    let mut first = Vec::new();
    (&old_handle).read_to_end(&mut first).expect("read");
    let first_id =
        serde_json::from_slice::<serde_json::Value>(&first).expect("JSON")["askId"].clone();

    std::fs::remove_file(outbox.join("a.request")).expect("forgotten");
    daemon.ask("main", "a", request);
    let new_handle = std::fs::File::open(&response).expect("opened");
    // The old handle reads again from the start, as a reader that lost
    // its pages (or any reader with `pread`) does.
    let mut again = vec![0u8; first.len()];
    let n = old_handle.read_at(&mut again, 0).expect("read");
    assert_eq!(
        String::from_utf8_lossy(&again[..n]),
        String::from_utf8_lossy(&first),
        "the old handle keeps its own answer"
    );
    let mut second = Vec::new();
    (&new_handle).read_to_end(&mut second).expect("read");
    let second: serde_json::Value = serde_json::from_slice(&second).expect("JSON");
    assert_ne!(
        second["askId"], first_id,
        "a reader of the new ask reads the new answer"
    );
    assert_eq!(
        second,
        daemon.response(&response),
        "and the answer of the name now"
    );

    // Both closed, the name asked a third time (an answer of the same
    // size): the pages the second ask's reader filled are not read for it.
    drop((old_handle, new_handle));
    std::fs::remove_file(outbox.join("a.request")).expect("forgotten");
    daemon.ask("main", "a", request);
    let third = std::fs::read(&response).expect("read");
    let third: serde_json::Value = serde_json::from_slice(&third).expect("JSON");
    assert_ne!(third["askId"], second["askId"]);
    assert_eq!(third, daemon.response(&response));
}

/// `spawn … lease`: the child lives as long as the `ctl` handle that
/// spawned it (every descriptor of it, a forked copy included), and a
/// closed lease ends only the session it was taken for.
#[test]
fn a_leased_child_ends_when_its_spawning_handle_closes() {
    use std::io::Write;
    let daemon = Daemon::start(CONFIG, None);
    let ctl = daemon.session("main").join("ctl");
    let mut lease = std::fs::OpenOptions::new()
        .write(true)
        .open(&ctl)
        .expect("ctl");
    lease.write_all(b"spawn leased lease\n").expect("spawned");
    assert_eq!(daemon.children("main"), vec!["leased".to_string()]);
    // A pending ask of the child is answered when the lease ends it.
    let pending = daemon.ask("main/leased", "p", r#"{"surface":"bash","value":"make"}"#);
    let reader = std::thread::spawn(move || std::fs::read(pending));
    // A forked process holds a copy of the handle: the lease lasts.
    let mut holder = Command::new("sleep")
        .arg("30")
        .stdin(Stdio::from(lease.try_clone().expect("dup")))
        .spawn()
        .expect("holder");
    drop(lease);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        daemon.children("main"),
        vec!["leased".to_string()],
        "a descriptor of the handle is still open"
    );
    let _ = holder.kill();
    let _ = holder.wait();
    eventually("the last descriptor closed: the child ended", || {
        daemon.children("main").is_empty()
    });
    let answer = reader.join().expect("reader").expect("answered");
    let answer: serde_json::Value = serde_json::from_slice(&answer).expect("JSON");
    assert_eq!(answer["outcome"], "session_ended");

    // Ended by hand, then spawned again under the same name without a
    // lease: the old handle's close leaves the new session alone.
    let mut old = std::fs::OpenOptions::new()
        .write(true)
        .open(&ctl)
        .expect("ctl");
    old.write_all(b"spawn again lease\n").expect("spawned");
    std::fs::write(&ctl, "end again\n").expect("ended");
    std::fs::write(&ctl, "spawn again\n").expect("spawned anew");
    drop(old);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(daemon.children("main"), vec!["again".to_string()]);
    let refused = std::fs::write(&ctl, "spawn twice lease lease\n");
    assert_eq!(
        refused.err().and_then(|e| e.raw_os_error()),
        Some(libc::EINVAL)
    );
}

#[test]
fn a_bad_request_fails_at_its_write_and_says_why() {
    let daemon = Daemon::start(CONFIG, None);
    let outbox = daemon.session("main").join("outbox");
    let mut file = std::fs::File::create(outbox.join("bad.request")).expect("created");
    // A value that is not a string (a missing one is a surface-level check).
    let written = std::io::Write::write(&mut file, b"{\"surface\": \"bash\", \"value\": 1}");
    assert_eq!(
        written.err().and_then(|e| e.raw_os_error()),
        Some(libc::EINVAL),
        "the write that completes a bad request reports it"
    );
    // The newline after it is taken (and ignored), and close has nothing to report.
    assert!(std::io::Write::write(&mut file, b"\n").is_ok());
    let fd = std::os::fd::IntoRawFd::into_raw_fd(file);
    // SAFETY: closing the descriptor we own.
    assert_eq!(unsafe { libc::close(fd) }, 0);
    let answer = daemon.response(&outbox.join("bad.response"));
    assert_eq!(answer["outcome"], "invalid");
    assert!(answer["denialReason"]
        .as_str()
        .unwrap_or("")
        .contains("\"value\" must be a string"));

    // What can never be a request fails at once, from a shell too.
    let shell = Command::new("sh")
        .arg("-c")
        .arg(format!("echo hello > {}/hello.request", outbox.display()))
        .output()
        .expect("sh");
    assert!(!shell.status.success(), "the shell sees its write fail");
    assert_eq!(
        daemon.response(&outbox.join("hello.response"))["outcome"],
        "invalid"
    );
    let name = std::fs::write(outbox.join("..request"), "{}");
    assert!(name.is_err(), "a bad name is refused");
}

/// A request that ends before its object does goes in at its last close
/// (answered "invalid"); a reader of its response that came first, from
/// another process, waits for that instead of finding no ask.
#[test]
fn an_unfinished_request_goes_in_at_its_last_close_and_its_early_reader_waits() {
    let daemon = Daemon::start(CONFIG, None);
    let outbox = daemon.session("main").join("outbox");
    let mut file = std::fs::File::create(outbox.join("half.request")).expect("created");
    std::io::Write::write_all(&mut file, b"{\"surface\": \"bash\", \"value\"").expect("written");
    let mut reader = Command::new("cat")
        .arg(outbox.join("half.response"))
        .stdout(Stdio::piped())
        .spawn()
        .expect("cat");
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        reader.try_wait().expect("cat").is_none(),
        "the reader waits for the request to go in"
    );
    assert!(
        daemon.inbox("main").is_empty(),
        "nothing went in before the close"
    );
    drop(file);
    let output = reader.wait_with_output().expect("cat ends");
    assert!(output.status.success(), "the early reader gets the answer");
    let answer: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(answer["outcome"], "invalid");

    // The waiting reader is a parked read: a signal ends it.
    let mut file = std::fs::File::create(outbox.join("slow.request")).expect("created");
    std::io::Write::write_all(&mut file, b"{").expect("written");
    let mut reader = interruptible(Command::new("cat").arg(outbox.join("slow.response")))
        .stdout(Stdio::null())
        .spawn()
        .expect("cat");
    std::thread::sleep(Duration::from_millis(200));
    assert!(reader.try_wait().expect("cat").is_none(), "it waits");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(reader.id() as i32, libc::SIGINT) };
    ends_within(&mut reader, Duration::from_millis(500));
    drop(file);

    // A whole request written in two pieces goes in at the second.
    let mut file = std::fs::File::create(outbox.join("two.request")).expect("created");
    std::io::Write::write_all(&mut file, b"{\"surface\": \"bash\", ").expect("written");
    std::io::Write::write_all(&mut file, b"\"value\": \"git status\"}").expect("written");
    let answer = daemon.response(&outbox.join("two.response"));
    assert_eq!(answer["outcome"], "allow", "answered before its close");
    drop(file);
}

#[test]
fn only_a_decider_may_decide() {
    let daemon = Daemon::start(CONFIG, None);
    daemon.ask("main", "u", r#"{"surface":"bash","value":"make"}"#);
    let ask = daemon.inbox("main")[0].clone();
    let entry = daemon.session("main").join("inbox").join(&ask);
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!("echo allow > '{}'", entry.display()))
        .uid(65534)
        .gid(65534)
        .status()
        .expect("sh runs");
    assert!(!status.success(), "another uid may not decide");
    assert_eq!(daemon.inbox("main"), vec![ask], "the ask stays pending");
}

#[test]
fn asks_climb_to_the_interactive_ancestor_and_sessions_end_cleanly() {
    let daemon = Daemon::start(CONFIG, None);
    std::fs::create_dir(daemon.session("main").join("children").join("worker")).expect("spawned");
    std::fs::write(
        daemon.session("main").join("ctl"),
        "spawn helper agent=reviewer",
    )
    .expect("spawned");
    let info: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(daemon.session("main/helper").join("session.json"))
            .expect("session.json"),
    )
    .expect("JSON");
    assert_eq!(info["agent"], "reviewer");
    assert_eq!(info["depth"], 1);
    assert_eq!(info["interactive"], false);
    assert!(std::fs::write(daemon.session("main/helper").join("session.json"), "{}").is_err());

    daemon.ask("main/worker", "x", r#"{"surface":"bash","value":"make"}"#);
    assert_eq!(
        daemon.inbox("main").len(),
        1,
        "the child's ask waits at the root"
    );
    assert!(daemon.inbox("main/worker").is_empty());
    let response = daemon
        .session("main/worker")
        .join("outbox")
        .join("x.response");
    let reader = Command::new("cat")
        .arg(&response)
        .stdout(Stdio::piped())
        .spawn()
        .expect("cat");
    std::thread::sleep(Duration::from_millis(100));
    std::fs::remove_dir(daemon.session("main").join("children").join("worker")).expect("ended");
    let output = reader.wait_with_output().expect("cat ends");
    let answer: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(answer["outcome"], "session_ended");
    assert!(daemon.inbox("main").is_empty());
}

#[test]
fn a_headless_root_answers_no_decider() {
    let config = r#"{"permission": {"bash": {"*": "ask", "git status": "allow"}}, "roots": {"ci": {"interactive": false}}}"#;
    let daemon = Daemon::start_with_root(config, "ci");
    std::fs::write(daemon.session("ci").join("ctl"), "spawn lead").expect("spawned");
    std::fs::write(daemon.session("ci/lead").join("ctl"), "spawn sub").expect("spawned");
    let allowed = daemon.response(&daemon.ask(
        "ci/lead/sub",
        "ok",
        r#"{"surface":"bash","value":"git status"}"#,
    ));
    assert_eq!(allowed["outcome"], "allow");
    assert_eq!(
        allowed["hops"].as_array().map(Vec::len),
        Some(1),
        "answered at the asking node"
    );
    let refused =
        daemon.response(&daemon.ask("ci/lead/sub", "no", r#"{"surface":"bash","value":"make"}"#));
    assert_eq!(refused["outcome"], "no_decider");
    assert_eq!(refused["approved"], false);
    let hops = common::hop_sessions(&refused);
    assert_eq!(
        hops,
        ["ci/lead/sub", "ci/lead", "ci"],
        "the ask climbed every hop"
    );
}

#[test]
fn allow_session_records_a_grant_that_covers_and_can_be_revoked() {
    let daemon = Daemon::start(CONFIG, None);
    std::fs::write(daemon.session("main").join("ctl"), "spawn c").expect("spawned");
    daemon.ask(
        "main/c",
        "one",
        r#"{"surface":"bash","value":"cargo build"}"#,
    );
    let ask = daemon.inbox("main")[0].clone();
    std::fs::write(
        daemon.session("main").join("inbox").join(ask),
        "allow session",
    )
    .expect("decided");
    let grants: Vec<_> = std::fs::read_dir(daemon.session("main").join("grants"))
        .expect("grants")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(grants.len(), 1);
    let covered = daemon.response(&daemon.ask(
        "main/c",
        "two",
        r#"{"surface":"bash","value":"cargo build"}"#,
    ));
    assert_eq!(covered["decidedBy"]["kind"], "session_approval");
    assert_eq!(covered["state"], "approved_for_session");
    std::fs::remove_file(&grants[0]).expect("revoked");
    daemon.ask(
        "main/c",
        "three",
        r#"{"surface":"bash","value":"cargo build"}"#,
    );
    assert_eq!(
        daemon.inbox("main").len(),
        1,
        "after revocation the ask waits again"
    );
}

#[test]
fn facts_are_fixed_at_the_asking_session() {
    // The root works in `main-tree`; the child works in a worktree
    // elsewhere. The root's project config allows the relative `src/*`
    // and its own absolute tree.
    let base = tempfile::tempdir().expect("temp");
    let main_tree = base.path().join("main-tree");
    let worktree = base.path().join("worktree");
    let project = main_tree.join(".pi/extensions/pi-permission-system");
    std::fs::create_dir_all(&project).expect("dirs");
    std::fs::create_dir_all(worktree.join("src")).expect("dirs");
    let daemon_cwd = std::fs::canonicalize(&main_tree).expect("canonical");
    let write_project = |rule: &str| {
        std::fs::write(
            project.join("config.json"),
            format!(r#"{{"permission": {{"read": {{{rule}: "allow"}}}}}}"#),
        )
        .expect("project config")
    };
    write_project(r#""src/*""#);
    let daemon = Daemon::start(r#"{"permission": {"*": "ask"}}"#, Some(&daemon_cwd));
    // The operator trusts the project's layer as written (else its allow
    // would not count).
    let trust = || {
        let status = Command::new(env!("CARGO_BIN_EXE_permfs"))
            .arg("trust")
            .arg("--state-dir")
            .arg(&daemon.state_dir)
            .arg(&daemon_cwd)
            .stderr(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .expect("permfs trust runs");
        assert!(status.success());
    };
    trust();
    let worktree = std::fs::canonicalize(&worktree).expect("canonical");
    std::fs::write(
        daemon.session("main").join("ctl"),
        format!("spawn wt cwd={}", worktree.display()),
    )
    .expect("spawned");
    let relative = daemon.response(&daemon.ask(
        "main/wt",
        "rel",
        r#"{"tool":"read","input":{"path":"src/foo.rs"}}"#,
    ));
    assert_eq!(
        relative["outcome"], "allow",
        "the parent's relative rule covers the child's relative alias"
    );
    assert_eq!(
        relative["facts"][0]["requesterCwd"],
        worktree.display().to_string()
    );

    write_project(&format!("\"{}/src/*\"", daemon_cwd.display()));
    trust();
    // The daemon re-reads layer files at most every 250 ms.
    std::thread::sleep(Duration::from_millis(300));
    daemon.ask(
        "main/wt",
        "abs",
        r#"{"tool":"read","input":{"path":"src/foo.rs"}}"#,
    );
    assert_eq!(
        daemon.inbox("main").len(),
        1,
        "the parent's absolute rule on its own tree does not match the worktree's file"
    );
}

/// A stop keeps pending asks in the journal (issue 26): the blocked
/// reader's read ends, never with an answer (no `cancelled`, no allow),
/// the daemon exits 0 and unmounts, and the ask waits again after a start
/// on the same state dir.
#[test]
fn sigterm_keeps_pending_asks_and_unmounts() {
    let mut daemon = Daemon::start(CONFIG, None);
    let response = daemon.ask("main", "t", r#"{"surface":"bash","value":"make"}"#);
    let reader = Command::new("cat")
        .arg(&response)
        .stdout(Stdio::piped())
        .spawn()
        .expect("cat");
    std::thread::sleep(Duration::from_millis(150));
    let status = daemon.stop().expect("daemon exits");
    assert!(status.success(), "exit 0 on SIGTERM, got {status:?}");
    let output = reader.wait_with_output().expect("cat ends");
    assert!(
        !output.status.success() && output.stdout.is_empty(),
        "the read ended with an answer: {output:?}"
    );
    assert!(!common::is_mounted(&daemon.mountpoint), "no stale mount");
    assert!(
        !daemon
            .audit_lines()
            .iter()
            .any(|l| l["outcome"].is_string()),
        "an answer was recorded at the stop"
    );
    let again = Daemon::start_with_state_dir(CONFIG, &daemon.state_dir);
    assert_eq!(again.inbox("main").len(), 1, "the ask waits again");
}

#[test]
fn a_second_daemon_on_a_busy_mount_point_says_so() {
    let daemon = Daemon::start(CONFIG, None);
    let output = Command::new(env!("CARGO_BIN_EXE_permfs"))
        .arg("mount")
        .arg(&daemon.mountpoint)
        .output()
        .expect("runs");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("already a FUSE mount point"));
}

#[test]
fn a_timeout_is_its_own_outcome_and_leaves_the_inbox() {
    let daemon = Daemon::start(r#"{"forwardingTimeoutMs": 300}"#, None);
    let response = daemon.ask("main", "slow", r#"{"surface":"bash","value":"make"}"#);
    assert_eq!(daemon.inbox("main").len(), 1);
    let answer = daemon.response(&response);
    assert_eq!(answer["outcome"], "timeout");
    assert_eq!(answer["decidedBy"]["kind"], "timeout");
    assert_eq!(answer["approved"], false);
    assert!(daemon.inbox("main").is_empty());
}

#[test]
fn allow_subagent_grants_at_the_asking_session_only() {
    let daemon = Daemon::start(CONFIG, None);
    std::fs::write(daemon.session("main").join("ctl"), "spawn a").expect("spawned");
    std::fs::write(daemon.session("main").join("ctl"), "spawn b").expect("spawned");
    daemon.ask("main/a", "one", r#"{"surface":"bash","value":"npm test"}"#);
    let ask = daemon.inbox("main")[0].clone();
    std::fs::write(
        daemon.session("main").join("inbox").join(ask),
        "allow subagent",
    )
    .expect("decided");
    assert_eq!(
        std::fs::read_dir(daemon.session("main/a").join("grants"))
            .expect("grants")
            .count(),
        1
    );
    assert_eq!(
        std::fs::read_dir(daemon.session("main").join("grants"))
            .expect("grants")
            .count(),
        0
    );
    let again =
        daemon.response(&daemon.ask("main/a", "two", r#"{"surface":"bash","value":"npm test"}"#));
    assert_eq!(again["decidedBy"]["kind"], "session_approval");
    daemon.ask(
        "main/b",
        "three",
        r#"{"surface":"bash","value":"npm test"}"#,
    );
    assert_eq!(daemon.inbox("main").len(), 1, "the sibling is not covered");
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let daemon = Daemon::start(CONFIG, None);
    let session = daemon.session("main");
    let outbox = session.join("outbox");
    let errno_of = |result: std::io::Result<()>| result.err().and_then(|e| e.raw_os_error());

    // Oversized requests.
    let big = format!(
        r#"{{"surface":"bash","value":"{}"}}"#,
        "x".repeat(70 * 1024)
    );
    assert_eq!(
        errno_of(std::fs::write(outbox.join("big.request"), big)),
        Some(libc::EFBIG)
    );
    let refused = daemon.response(&outbox.join("big.response"));
    assert_eq!(refused["outcome"], "invalid");
    assert!(
        refused["denialReason"]
            .as_str()
            .unwrap_or("")
            .contains("limit"),
        "the response says why: {refused}"
    );
    // Once over the limit, a request stays refused: a whole request
    // written afterwards at a lower offset does not go in instead.
    let file = std::fs::File::create(outbox.join("bigger.request")).expect("created");
    let too_big = format!(r#"{{"surface":"bash","value":"{}"#, "x".repeat(70 * 1024));
    assert_eq!(
        errno_of(std::os::unix::fs::FileExt::write_all_at(
            &file,
            too_big.as_bytes(),
            0
        )),
        Some(libc::EFBIG)
    );
    let small = br#"{"surface":"bash","value":"git status"}"#;
    assert!(std::os::unix::fs::FileExt::write_all_at(&file, small, 0).is_ok());
    drop(file);
    let refused = daemon.response(&outbox.join("bigger.response"));
    assert_eq!(refused["outcome"], "invalid", "still refused: {refused}");
    // Bad names: control characters, too long.
    assert_eq!(
        errno_of(std::fs::write(outbox.join("a\u{1}b.request"), "{}")),
        Some(libc::EINVAL)
    );
    let long = format!("{}.request", "n".repeat(250));
    assert_eq!(
        errno_of(std::fs::write(outbox.join(long), "{}")),
        Some(libc::ENAMETOOLONG)
    );
    // Files where none may be created, and read-only files.
    assert_eq!(
        errno_of(std::fs::write(session.join("notes.txt"), "x")),
        Some(libc::EACCES)
    );
    // (A name with no suffix is a one-descriptor ask; a response is never
    // created by its reader.)
    assert_eq!(
        errno_of(std::fs::write(outbox.join("x.response"), "x")),
        Some(libc::EINVAL)
    );
    assert_eq!(
        errno_of(std::fs::write(session.join("rules.json"), "{}")),
        Some(libc::EACCES)
    );
    assert_eq!(
        errno_of(std::fs::write(session.join("ctl"), "explode")),
        Some(libc::EINVAL)
    );
    assert_eq!(
        errno_of(std::fs::write(session.join("ctl"), "spawn ../x")),
        Some(libc::EINVAL)
    );

    // Nothing else changed, and the daemon still serves.
    assert!(daemon.inbox("main").is_empty());
    let names: Vec<String> = std::fs::read_dir(&outbox)
        .expect("outbox")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("big.") || n.starts_with("bigger.")),
        "only the refused big requests are recorded: {names:?}"
    );
    assert_eq!(
        std::fs::read_dir(session.join("children"))
            .expect("children")
            .count(),
        0
    );
    let ok = daemon.response(&daemon.ask(
        "main",
        "after",
        r#"{"surface":"bash","value":"git status"}"#,
    ));
    assert_eq!(ok["outcome"], "allow");
}

#[test]
fn a_python_client_asks_with_plain_file_calls() {
    let daemon = Daemon::start(CONFIG, None);
    let outbox = daemon.session("main").join("outbox");
    let script = format!(
        "import json\nopen('{0}/py.request','w').write(json.dumps({{'tool':'bash','input':{{'command':'git status'}}}}))\nprint(json.load(open('{0}/py.response'))['outcome'])",
        outbox.display()
    );
    let output = Command::new("python3")
        .arg("-c")
        .arg(script)
        .output()
        .expect("python3 runs");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "allow",
        "{output:?}"
    );
}

#[test]
fn a_storm_of_asks_and_decisions_loses_and_duplicates_nothing() {
    let daemon = Daemon::start(CONFIG, None);
    std::fs::write(daemon.session("main").join("ctl"), "spawn storm").expect("spawned");
    let outbox = daemon.session("main/storm").join("outbox");
    const ASKERS: usize = 8;
    const EACH: usize = 10;
    // Askers: separate shell processes, each asking and reading its answers.
    let askers: Vec<_> = (0..ASKERS)
        .map(|p| {
            let script = format!(
                "for i in $(seq 1 {EACH}); do echo '{{\"surface\":\"bash\",\"value\":\"job {p} '$i'\"}}' > {dir}/p{p}-$i.request; done; \
                 for i in $(seq 1 {EACH}); do cat {dir}/p{p}-$i.response | grep -c '\"outcome\"'; done",
                dir = outbox.display()
            );
            Command::new("sh").arg("-c").arg(script).stdout(Stdio::piped()).spawn().expect("asker")
        })
        .collect();
    // Deciders: two processes racing on every inbox entry.
    let inbox = daemon.session("main").join("inbox");
    let stop = daemon.dir.path().join("stop-deciding");
    let decider = |verdict: &str| {
        let script = format!(
            "end=$(( $(date +%s) + 20 )); n=0; while [ $(date +%s) -lt $end ] && [ ! -e {stop} ]; do \
               for f in {inbox}/*; do [ -e \"$f\" ] && echo {verdict} > \"$f\" 2>/dev/null && n=$((n+1)); done; done; echo $n",
            stop = stop.display(),
            inbox = inbox.display()
        );
        Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdout(Stdio::piped())
            .spawn()
            .expect("decider")
    };
    let deciders = [decider("allow"), decider("deny")];
    let mut answers = 0;
    for asker in askers {
        let output = asker.wait_with_output().expect("asker ends");
        answers += String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter(|l| l.trim() == "1")
            .count();
    }
    std::fs::write(&stop, "").expect("stop marker");
    assert_eq!(answers, ASKERS * EACH, "every ask got exactly one answer");
    let decided: usize = deciders
        .into_iter()
        .map(|d| {
            let output = d.wait_with_output().expect("decider ends");
            String::from_utf8_lossy(&output.stdout)
                .trim()
                .parse::<usize>()
                .unwrap_or(0)
        })
        .sum();
    assert_eq!(decided, ASKERS * EACH, "exactly one decision won per ask");
    assert!(daemon.inbox("main").is_empty());
}

#[test]
fn a_sandbox_bound_to_its_session_sees_only_that_subtree() {
    let daemon = Daemon::start(CONFIG, None);
    std::fs::write(daemon.session("main").join("ctl"), "spawn boxed").expect("spawned");
    std::fs::write(daemon.session("main").join("ctl"), "spawn sibling").expect("spawned");
    let jail = daemon.dir.path().join("jail");
    std::fs::create_dir(&jail).expect("jail dir");
    // In a private mount namespace, only the child's directory is visible
    // at /…/jail; from there the sandbox asks with plain file calls.
    let script = format!(
        "mount --bind '{session}' '{jail}' && cd '{jail}' && ls && \
         echo '{{\"surface\":\"bash\",\"value\":\"git status\"}}' > outbox/s.request && \
         grep -c '\"approved\": true' outbox/s.response && ls .. | grep -c sibling; true",
        session = daemon.session("main/boxed").display(),
        jail = jail.display()
    );
    let output = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .output()
        .expect("unshare runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines.contains(&"outbox") && lines.contains(&"inbox"),
        "the session's own files: {stdout}"
    );
    assert!(!lines.contains(&"sibling"), "no sibling in view: {stdout}");
    assert_eq!(
        lines.iter().rev().nth(1),
        Some(&"1"),
        "the sandbox asked and was answered: {stdout}"
    );
    assert_eq!(
        lines.last(),
        Some(&"0"),
        "the jail's parent is the host directory, not main: {stdout}"
    );
}

#[test]
fn a_surface_without_a_value_is_answered_and_its_grant_covers_the_surface() {
    let daemon = Daemon::start(
        r#"{"permission": {"*": "ask", "webfetch": {"*": "deny"}}}"#,
        None,
    );
    // Before surface-level checks this close failed with EINVAL.
    let denied = daemon.response(&daemon.ask("main", "w", r#"{"surface":"webfetch"}"#));
    assert_eq!(denied["outcome"], "deny");
    assert_eq!(denied["decidedBy"]["kind"], "rule");
    assert_eq!(denied["decidedBy"]["pattern"], "*");
    // The dry run takes the same form.
    let query = daemon.session("main").join("query");
    let answer = common::dry_run(&query, r#"{"surface":"webfetch","value":null}"#);
    assert_eq!(answer["verdict"]["state"], "deny");
    assert_eq!(answer["facts"][0]["matchValues"], serde_json::json!(["*"]));

    std::fs::write(daemon.session("main").join("ctl"), "spawn c").expect("spawned");
    daemon.ask("main/c", "one", r#"{"surface":"deploy","value":null}"#);
    eventually("the ask is in the inbox", || {
        daemon.inbox("main").len() == 1
    });
    let ask = daemon.inbox("main")[0].clone();
    std::fs::write(
        daemon.session("main").join("inbox").join(ask),
        "allow session",
    )
    .expect("decided");
    let grants: Vec<_> = std::fs::read_dir(daemon.session("main").join("grants"))
        .expect("grants")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(grants.len(), 1);
    let grant: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&grants[0]).expect("grant read"))
            .expect("grant is JSON");
    let text = grant.to_string();
    assert!(
        text.contains(r#""surface":"deploy""#) && text.contains(r#""pattern":"*""#),
        "the grant is (deploy, *): {text}"
    );
    // The grant answers the surface asked with a value and the tool call.
    for (rid, request) in [
        ("two", r#"{"surface":"deploy","value":"prod"}"#),
        ("three", r#"{"tool":"deploy","input":{"target":"prod"}}"#),
    ] {
        let covered = daemon.response(&daemon.ask("main/c", rid, request));
        assert_eq!(
            covered["decidedBy"]["kind"], "session_approval",
            "{request}"
        );
        assert_eq!(covered["approved"], true, "{request}");
    }
}

#[test]
fn an_mcp_value_grant_covers_the_references_targets_too() {
    let daemon = Daemon::start(r#"{"permission": {"*": "ask"}}"#, None);
    std::fs::write(daemon.session("main").join("ctl"), "spawn c").expect("spawned");
    daemon.ask("main/c", "one", r#"{"surface":"mcp","value":"exa:search"}"#);
    eventually("the ask is in the inbox", || {
        daemon.inbox("main").len() == 1
    });
    let ask = daemon.inbox("main")[0].clone();
    std::fs::write(
        daemon.session("main").join("inbox").join(ask),
        "allow session",
    )
    .expect("decided");
    let mut grants: Vec<String> = std::fs::read_dir(daemon.session("main").join("grants"))
        .expect("grants")
        .map(|e| {
            let text = std::fs::read_to_string(e.expect("entry").path()).expect("grant read");
            // Compact, whatever the file's layout.
            serde_json::from_str::<serde_json::Value>(&text)
                .expect("grant is JSON")
                .to_string()
        })
        .collect();
    grants.sort();
    let text = grants.join("\n");
    // The value, and the status target the reference judges for it: no
    // grant on all of `mcp`.
    assert!(text.contains("\"exa:search\""), "{text}");
    assert!(text.contains("\"mcp_status\""), "{text}");
    assert!(!text.contains("\"pattern\":\"*\""), "{text}");
    let covered =
        daemon.response(&daemon.ask("main/c", "two", r#"{"surface":"mcp","value":"exa:search"}"#));
    assert_eq!(covered["decidedBy"]["kind"], "session_approval");
    assert_eq!(covered["approved"], true);
}

#[test]
fn pending_lists_every_ask_below_oldest_first_and_refusals_are_readable() {
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;
    let daemon = Daemon::start(CONFIG, None);
    let main = daemon.session("main");
    std::fs::write(main.join("ctl"), "spawn a").expect("a");
    std::fs::write(main.join("ctl"), "spawn i interactive").expect("i");
    let first = daemon.ask("main/a", "r1", r#"{"surface":"bash","value":"make"}"#);
    eventually("r1 waits in main", || daemon.inbox("main").len() == 1);
    std::thread::sleep(Duration::from_millis(20));
    let _second = daemon.ask(
        "main/i",
        "r2",
        r#"{"tool":"write","input":{"path":"../x.txt"},"message":"save"}"#,
    );
    eventually("r2 waits in main/i", || daemon.inbox("main/i").len() == 1);

    let view: serde_json::Value =
        serde_json::from_slice(&std::fs::read(main.join("pending")).expect("pending read"))
            .expect("JSON");
    let pending = view["pending"].as_array().expect("a list");
    assert_eq!(pending.len(), 2, "{view:#}");
    assert_eq!(pending[0]["from"], "main/a");
    assert_eq!(pending[1]["from"], "main/i");
    assert_eq!(pending[1]["at"], "main/i");
    assert_eq!(pending[1]["message"], "save");
    let inbox = pending[1]["inbox"].as_str().expect("inbox path");
    assert!(inbox.starts_with("children/i/inbox/"), "{inbox}");
    assert!(pending[0]["remainingMs"].as_u64().is_some_and(|ms| ms > 0));
    assert!(pending[0]["arrivedAt"].as_u64() <= pending[1]["arrivedAt"].as_u64());

    // The inbox entry's size is what a read gives; its time, the arrival.
    let entry = main.join(pending[0]["inbox"].as_str().expect("path"));
    let meta = std::fs::metadata(&entry).expect("entry");
    let text = std::fs::read(&entry).expect("entry read");
    assert_eq!(meta.size(), text.len() as u64);
    let arrived = pending[0]["arrivedAt"].as_u64().expect("ms") as i64;
    assert!(
        (meta.mtime() * 1000 - arrived).abs() < 1000,
        "mtime is the arrival"
    );

    // A mistyped decision fails and says why, in the entry.
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(&entry)
        .expect("open to decide");
    let error = file.write_all(b"alow\n").expect_err("refused");
    assert_eq!(error.raw_os_error(), Some(libc::EINVAL));
    drop(file);
    let view: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&entry).expect("entry read")).expect("JSON");
    assert!(
        view["lastError"]
            .as_str()
            .is_some_and(|e| e.contains("unknown decision \"alow\"")),
        "{view:#}"
    );
    // A narrowed grant: exactly the pattern given.
    std::fs::write(&entry, "allow session 'make -j*'").expect("decided");
    assert_eq!(daemon.response(&first)["state"], "approved_for_session");
    let grants: Vec<_> = std::fs::read_dir(main.join("grants"))
        .expect("grants")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(grants.len(), 1);
    let grant: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&grants[0]).expect("grant")).expect("JSON");
    assert_eq!(grant["rules"][0]["pattern"], "make -j*");
    assert_eq!(grant["broaderThanSuggested"][0], "make -j*");
    let after: serde_json::Value =
        serde_json::from_slice(&std::fs::read(main.join("pending")).expect("pending"))
            .expect("JSON");
    assert_eq!(after["pending"].as_array().map(Vec::len), Some(1));
}

#[test]
fn global_config_edits_take_effect_and_an_invalid_edit_fails_closed() {
    let daemon = Daemon::start(CONFIG, None);
    let config = daemon.dir.path().join("config.json");
    let rules = daemon.session("main").join("rules.json");
    let status = r#"{"surface":"bash","value":"git status"}"#;
    assert_eq!(
        daemon.response(&daemon.ask("main", "s1", status))["outcome"],
        "allow"
    );

    // Make is allowed by an edit, picked up without a restart.
    std::fs::write(
        &config,
        r#"{"permission": {"*": "ask", "bash": {"*": "ask", "git status": "allow", "make": "allow"}}}"#,
    )
    .expect("config edited");
    let query = daemon.session("main").join("query");
    eventually("the edit is picked up", || {
        common::dry_run(&query, r#"{"surface":"bash","value":"make"}"#)["verdict"]["state"]
            == "allow"
    });

    // An invalid edit: what was allowed now asks, and rules.json says why.
    std::fs::write(&config, r#"{"permission": {"bash": "allow""#).expect("broken");
    eventually("the floor is in place", || {
        std::fs::read_to_string(&rules).is_ok_and(|r| {
            r.contains("invalid global configuration") && r.contains("\"failedClosed\": true")
        })
    });
    let floored = daemon.ask("main", "s2", status);
    eventually("the ask waits for a person", || {
        daemon.inbox("main").len() == 1
    });
    let ask = daemon.inbox("main")[0].clone();
    std::fs::write(daemon.session("main").join("inbox").join(ask), "deny").expect("decided");
    assert_eq!(daemon.response(&floored)["outcome"], "deny");

    // Corrected, and SIGHUP re-reads it at once.
    std::fs::write(&config, CONFIG).expect("fixed");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(daemon.pid() as i32, libc::SIGHUP) };
    eventually("the floor is lifted", || {
        std::fs::read_to_string(&rules).is_ok_and(|r| r.contains("\"failedClosed\": false"))
    });
    assert_eq!(
        daemon.response(&daemon.ask("main", "s3", status))["outcome"],
        "allow"
    );
}

#[test]
fn allow_always_writes_the_rule_into_the_global_config() {
    let daemon = Daemon::start(CONFIG, None);
    let config = daemon.dir.path().join("config.json");
    let main = daemon.session("main");
    std::fs::write(main.join("ctl"), "spawn c").expect("spawned");
    let first = daemon.ask("main/c", "one", r#"{"surface":"bash","value":"make all"}"#);
    eventually("the ask waits", || daemon.inbox("main").len() == 1);
    let entry = main.join("inbox").join(&daemon.inbox("main")[0]);
    // The layer must be named.
    assert!(std::fs::write(&entry, "allow always").is_err());
    std::fs::write(&entry, "allow always global 'make *'").expect("decided");
    assert_eq!(daemon.response(&first)["outcome"], "allow");
    let text = std::fs::read_to_string(&config).expect("config");
    assert!(text.contains(r#""make *": "allow""#), "{text}");
    assert!(text.contains(r#""rm *""#), "the rest is kept: {text}");
    // Later asks are answered by the rule, by the global layer.
    let later =
        daemon.response(&daemon.ask("main/c", "two", r#"{"surface":"bash","value":"make test"}"#));
    assert_eq!(later["outcome"], "allow");
    assert_eq!(later["decidedBy"]["kind"], "rule");
    assert_eq!(later["decidedBy"]["origin"], "global");
}

#[test]
fn a_grant_releases_every_covered_ask_past_the_first_chunk() {
    let daemon = Daemon::start(CONFIG, None);
    std::fs::write(daemon.session("main").join("ctl"), "spawn c").expect("spawned");
    // More than two chunks: the decider is answered after the first, the
    // rest are released in the background.
    let count = 150;
    let responses: Vec<_> = (0..count)
        .map(|i| {
            daemon.ask(
                "main/c",
                &format!("b{i}"),
                r#"{"surface":"bash","value":"cargo build"}"#,
            )
        })
        .collect();
    eventually("every ask waits in main's inbox", || {
        daemon.inbox("main").len() == count
    });
    let first = daemon.inbox("main")[0].clone();
    std::fs::write(
        daemon.session("main").join("inbox").join(first),
        "allow session",
    )
    .expect("decided");
    let (sender, answers) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for response in responses {
            let answer = std::fs::read_to_string(&response).unwrap_or_default();
            let _ = sender.send(answer);
        }
    });
    for _ in 0..count {
        let answer = answers
            .recv_timeout(Duration::from_secs(20))
            .expect("every covered ask is answered");
        assert!(answer.contains("\"approved\": true"), "{answer}");
    }
    assert!(daemon.inbox("main").is_empty());
}

/// A generated file is read as it was at its open: `rules.json` read in
/// two calls around a config edit is one version, never a torn mix (seen
/// as "trailing characters" from a `session.json` read while a view was
/// added).
#[test]
fn a_generated_file_reads_one_version_per_open() {
    let daemon = Daemon::start(r#"{"permission": {"*": "ask"}}"#, None);
    let rules = daemon.session("main").join("rules.json");
    let mut file = std::fs::File::open(&rules).expect("open rules.json");
    let mut head = [0u8; 16];
    file.read_exact(&mut head).expect("first read");
    let before = std::fs::read_to_string(&rules).expect("read whole");
    let config = daemon.dir.path().join("config.json");
    let long = format!(
        r#"{{"permission": {{"*": "ask", "bash": {{{}}}}}}}"#,
        (0..50)
            .map(|i| format!(r#""command-{i} *": "allow""#))
            .collect::<Vec<_>>()
            .join(", ")
    );
    std::fs::write(&config, long).expect("config edited");
    eventually("the edit is read", || {
        std::fs::read_to_string(&rules).is_ok_and(|now| now.contains("command-49"))
    });
    let mut rest = Vec::new();
    file.read_to_end(&mut rest).expect("rest");
    let mut whole = head.to_vec();
    whole.extend(rest);
    let text = String::from_utf8(whole).expect("utf-8");
    assert_eq!(text, before, "the handle read the version of its open");
    serde_json::from_str::<serde_json::Value>(&text).expect("one whole JSON");
}
