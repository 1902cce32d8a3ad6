//! Issue 23, item 6: what one asker can make the daemon hold is bounded,
//! through a real mount. Past each bound the call fails `ENOSPC` and the
//! reason is readable; `pending` lists a bounded page; and one asker's
//! worst case (a deep chain of long names, many children, many large
//! waiting asks, pi drafts) keeps the daemon under 256 MiB.

mod common;

use common::Daemon;
use serde_json::Value;
use std::path::{Path, PathBuf};

const CONFIG: &str = r#"{"permission": {"*": "ask", "bash": {"*": "ask", "git status": "allow"}}}"#;

fn spawn(ctl: &Path, name: &str) -> Result<(), i32> {
    std::fs::write(ctl, format!("spawn {name}")).map_err(|e| e.raw_os_error().unwrap_or(0))
}

/// Opens `name` under the directory `dir` (a descriptor): a deep chain's
/// paths are longer than `PATH_MAX`, so it is walked one level at a time,
/// as an agent that `cd`s would.
fn open_at(dir: &std::fs::File, name: &str, flags: i32) -> Result<std::fs::File, i32> {
    use std::os::fd::{AsRawFd, FromRawFd};
    let name = std::ffi::CString::new(name).map_err(|_| libc::EINVAL)?;
    // SAFETY: a valid directory descriptor and a NUL-terminated name.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { std::fs::File::from_raw_fd(fd) })
}

/// `spawn NAME` written to the `ctl` of the session directory `dir`.
fn spawn_at(dir: &std::fs::File, name: &str) -> Result<(), i32> {
    use std::io::Write;
    let mut ctl = open_at(dir, "ctl", libc::O_WRONLY)?;
    ctl.write_all(format!("spawn {name}").as_bytes())
        .map_err(|e| e.raw_os_error().unwrap_or(0))
}

fn rss_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// A name of `len` bytes, distinct per `n`.
fn long_name(n: usize, len: usize) -> String {
    let head = format!("n{n}-");
    format!("{head}{}", "x".repeat(len - head.len()))
}

#[test]
fn one_askers_worst_case_is_bounded_with_clear_errors() {
    let daemon = Daemon::start(CONFIG, None);
    let pid = daemon.server_pid();
    let before = rss_kib(pid, "VmRSS:");

    // A chain of 200-byte names: the 33rd level is refused (depth 32).
    let mut dir = std::fs::File::open(daemon.session("main")).expect("main");
    let mut depth = 0;
    loop {
        let name = long_name(depth, 200);
        match spawn_at(&dir, &name) {
            Ok(()) => {
                depth += 1;
                let children = open_at(&dir, "children", libc::O_RDONLY | libc::O_DIRECTORY)
                    .expect("children");
                dir = open_at(&children, &name, libc::O_RDONLY | libc::O_DIRECTORY)
                    .expect("the child's directory");
            }
            Err(errno) => {
                assert_eq!(errno, libc::ENOSPC, "the chain ends with ENOSPC");
                break;
            }
        }
        assert!(depth <= 32, "a chain deeper than 32 was accepted");
    }
    assert_eq!(depth, 32);

    // Many children of one session: the 257th is refused.
    let ctl = daemon.session("main").join("ctl");
    let mut children = 1; // the chain's first link
    while spawn(&ctl, &long_name(1000 + children, 200)).is_ok() {
        children += 1;
        assert!(children <= 256, "more than 256 children accepted");
    }
    assert_eq!(children, 256);
    // The tree is bounded too: 32 + 256 sessions, and then some more
    // under a child until the tree holds 1024.
    let first = daemon
        .children("main")
        .into_iter()
        .find(|c| c.starts_with("n1001-"))
        .expect("a child");
    let mut tree = 1 + 32 + 255;
    'fill: for branch in daemon
        .children("main")
        .into_iter()
        .filter(|c| c.starts_with("n1"))
    {
        let ctl = daemon
            .session("main")
            .join("children")
            .join(&branch)
            .join("ctl");
        for n in 0..256 {
            match spawn(&ctl, &long_name(n, 200)) {
                Ok(()) => tree += 1,
                Err(errno) => {
                    assert_eq!(errno, libc::ENOSPC);
                    if tree >= 1024 {
                        break 'fill;
                    }
                    break;
                }
            }
        }
    }
    assert_eq!(tree, 1024, "the tree holds at most 1024 sessions");
    let _ = first;

    // Large asks that wait: 256 per session, then ENOSPC with the reason
    // in the response.
    let value = "y".repeat(60 * 1024);
    let request =
        serde_json::json!({"surface": "bash", "value": format!("make {value}")}).to_string();
    let asker = "main";
    let outbox = daemon.session(asker).join("outbox");
    let mut raised = 0;
    let refused: PathBuf = loop {
        let path = outbox.join(format!("r{raised}.request"));
        match std::fs::write(&path, &request) {
            Ok(()) => raised += 1,
            Err(error) => {
                assert_eq!(error.raw_os_error(), Some(libc::ENOSPC), "{error}");
                break outbox.join(format!("r{raised}.response"));
            }
        }
        assert!(raised <= 256, "more than 256 asks waiting in one session");
    };
    assert_eq!(raised, 256);
    let answer: Value =
        serde_json::from_str(&std::fs::read_to_string(&refused).expect("response")).expect("JSON");
    assert_eq!(answer["outcome"], "invalid");
    assert!(
        answer["denialReason"]
            .as_str()
            .unwrap_or_default()
            .contains("limits.pendingAsks"),
        "{answer}"
    );
    // Another session of the tree is stopped by the tree's bound (256).
    let third = daemon
        .children("main")
        .into_iter()
        .find(|c| c.starts_with("n1001-"))
        .expect("another child");
    let outbox3 = daemon
        .session("main")
        .join("children")
        .join(&third)
        .join("outbox");
    let error = std::fs::write(outbox3.join("t.request"), &request).expect_err("the tree is full");
    assert_eq!(error.raw_os_error(), Some(libc::ENOSPC));
    let answer: Value = serde_json::from_str(
        &std::fs::read_to_string(outbox3.join("t.response")).expect("response"),
    )
    .expect("JSON");
    assert!(
        answer["denialReason"]
            .as_str()
            .unwrap_or_default()
            .contains("limits.treePendingAsks"),
        "{answer}"
    );

    // `pending` is a bounded page: the oldest 100, and the rest counted.
    let pending: Value = serde_json::from_slice(
        &std::fs::read(daemon.session("main").join("pending")).expect("pending"),
    )
    .expect("JSON");
    assert_eq!(pending["pending"].as_array().map(Vec::len), Some(100));
    assert_eq!(pending["more"], 156);

    // pi drafts: a session's view holds at most 1 MiB of unsubmitted
    // requests.
    let pi = daemon
        .session("main")
        .join("children")
        .join(&first)
        .join("pi")
        .join("sessions")
        .join("main");
    std::fs::create_dir_all(pi.join("requests")).expect("requests");
    let draft = vec![b' '; 60 * 1024];
    let mut drafts = 0;
    let full = loop {
        let path = pi.join("requests").join(format!("d{drafts}.json.1.2.tmp"));
        match std::fs::write(&path, &draft) {
            Ok(()) => drafts += 1,
            Err(error) => break error,
        }
        assert!(drafts <= 20, "more than 1 MiB of drafts held");
    };
    assert_eq!(full.raw_os_error(), Some(libc::ENOSPC), "{full}");

    let after = rss_kib(pid, "VmRSS:");
    let peak = rss_kib(pid, "VmHWM:");
    eprintln!("daemon RSS: {before} KiB before, {after} KiB after, peak {peak} KiB");
    assert!(peak < 256 * 1024, "one asker took the daemon to {peak} KiB");
    // The daemon still serves.
    assert!(daemon.session("main").join("session.json").exists());
}

/// `limits.requestBytes` bounds one request (64 KiB by default): past it
/// the write fails `EFBIG` and the response says which bound, by its config
/// key; the operator may lower it, or raise it for large patches.
#[test]
fn request_bytes_is_a_configurable_bound() {
    let request = |len: usize| {
        serde_json::json!({"surface": "bash", "value": format!("make {}", "z".repeat(len))})
            .to_string()
    };
    let errno_of = |result: std::io::Result<()>| result.err().and_then(|e| e.raw_os_error());

    // Lowered to 1 KiB: a 2 KiB request is refused, with the reason.
    let config = r#"{"permission": {"*": "ask"}, "limits": {"requestBytes": 1024}}"#;
    let daemon = Daemon::start(config, None);
    let outbox = daemon.session("main").join("outbox");
    assert_eq!(
        errno_of(std::fs::write(outbox.join("big.request"), request(2048))),
        Some(libc::EFBIG)
    );
    let answer = daemon.response(&outbox.join("big.response"));
    assert_eq!(answer["outcome"], "invalid");
    assert!(
        answer["denialReason"]
            .as_str()
            .unwrap_or_default()
            .contains("1024-byte limit (limits.requestBytes)"),
        "{answer}"
    );
    // One under the bound waits for a decision.
    std::fs::write(outbox.join("small.request"), request(900)).expect("within the bound");
    assert_eq!(daemon.inbox("main").len(), 1);
    drop(daemon);

    // Raised to 256 KiB: a 100 KiB request goes in (the default refuses it).
    let config = r#"{"permission": {"*": "ask"}, "limits": {"requestBytes": 262144}}"#;
    let daemon = Daemon::start(config, None);
    let outbox = daemon.session("main").join("outbox");
    std::fs::write(outbox.join("large.request"), request(100 << 10)).expect("within the bound");
    assert_eq!(daemon.inbox("main").len(), 1);
    let over = errno_of(std::fs::write(
        outbox.join("larger.request"),
        request(300 << 10),
    ));
    assert_eq!(over, Some(libc::EFBIG));
    let answer = daemon.response(&outbox.join("larger.response"));
    assert!(
        answer["denialReason"]
            .as_str()
            .unwrap_or_default()
            .contains("262144"),
        "{answer}"
    );
}

/// Kept answers are bounded per session and per root's tree
/// (`limits.retainedAnswers`, `treeRetainedAnswers`, `treeRetainedBytes`):
/// a sandboxed child that floods the daemon with large rule-answered asks
/// it never reads drops its own oldest answers, never another tree's. On
/// the old main the flood (600 answers of about 125 KB each, past the
/// global 48 MiB) dropped the oldest answers of all, the other tree's
/// first.
#[test]
fn one_tree_cannot_evict_another_trees_answers() {
    let config = r#"{"permission": {"*": "ask", "bash": {"*": "ask", "echo *": "allow"}, "skill": "allow"},
        "roots": {"main": {"interactive": true}, "other": {"interactive": true}}}"#;
    let daemon = Daemon::start_with_root(config, "other");
    let other = daemon.ask("other", "kept", r#"{"surface":"bash","value":"echo kept"}"#);
    std::fs::write(daemon.session("main").join("ctl"), "spawn sb").expect("spawned");
    let outbox = daemon.session("main/sb").join("outbox");
    let value = "y".repeat(60 * 1024);
    let request =
        serde_json::json!({"surface": "skill", "value": format!("notes-{value}")}).to_string();
    for i in 0..600 {
        std::fs::write(outbox.join(format!("f{i}.request")), &request).expect("answered");
    }
    // The flood's oldest answers are gone (ENOENT, never an answer
    // made up), its newest are kept.
    let gone = std::fs::read(outbox.join("f0.response")).expect_err("the oldest dropped");
    assert_eq!(gone.raw_os_error(), Some(libc::ENOENT), "{gone}");
    assert_eq!(
        daemon.response(&outbox.join("f599.response"))["outcome"],
        "allow"
    );
    // The other tree's unread answer is still there to read.
    let answer = daemon.response(&other);
    assert_eq!(answer["outcome"], "allow", "{answer}");
    assert_eq!(answer["decidedBy"]["kind"], "rule");
}
