//! Issue 23, item 6: what one asker can make the daemon hold is bounded,
//! through a real mount. Past each bound the call fails `ENOSPC` and the
//! reason is readable; `pending` lists a bounded page; and one asker's
//! worst case (a deep chain of long names, many children, many large
//! waiting asks, pi drafts) keeps the daemon under 256 MiB.
//!
//! Issue 34, item 5: what a sandbox makes through its enforcement view is
//! bounded too: the view's node log stays small however many names churn
//! (and a server that takes the view over after a compaction serves it on),
//! and the node table stops at `limits.viewNodes` with `ENOSPC`. These need
//! root and bubblewrap (`permfs run`), and pass vacuously without them.

use crate::common;

use common::{bwrap_works, run_in_background, run_script, work_dir, Daemon};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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

/// Rules that let a sandbox read and write its view, with `limits` added.
fn view_config(limits: &str) -> String {
    format!(
        r#"{{"permission": {{"*": "ask", "path_read": "allow", "path_write": "allow"}}, "limits": {{{limits}}}}}"#
    )
}

fn root_and_bwrap() -> bool {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        common::skip("the view tests need root");
        return false;
    }
    bwrap_works()
}

/// The node log of the daemon's one view (`views/<key>.nodes`).
fn node_log(daemon: &Daemon) -> Option<PathBuf> {
    std::fs::read_dir(daemon.state_dir.join("views"))
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "nodes"))
}

fn wait_for_file(path: &Path, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn field(output: &str, key: &str) -> Option<String> {
    output.lines().find_map(|l| {
        l.strip_prefix(key)
            .and_then(|rest| rest.strip_prefix('='))
            .map(str::to_string)
    })
}

/// Creates and unlinks one name `N` times (Python, so no process a cycle).
const CHURN: &str = r#"
import os, sys
for _ in range(int(sys.argv[1])):
    os.close(os.open("churn", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
    os.unlink("churn")
"#;

/// 6,000 create+unlink cycles of one name beside 200 names that stay: the
/// node log (five lines a cycle, about 470 KB before issue 34) is compacted
/// as it goes and never holds much more than its 64 KiB floor.
#[test]
fn churning_names_in_a_view_keeps_its_node_log_bounded() {
    if !root_and_bwrap() {
        return;
    }
    let daemon = Daemon::start_with_env(&view_config(""), &[]);
    let work = work_dir(&daemon);
    let script = format!(
        r#"mkdir kept && for i in $(seq 1 200); do echo $i > kept/k$i; done
        python3 -c '{CHURN}' 6000 && touch churned
        while [ ! -e done ]; do sleep 0.02; done"#
    );
    let mut running = run_in_background(&daemon, &[], &script);
    let mut largest = 0;
    while !work.join("churned").exists() {
        let size = node_log(&daemon)
            .and_then(|p| std::fs::metadata(p).ok())
            .map_or(0, |m| m.len());
        largest = largest.max(size);
        std::thread::sleep(Duration::from_millis(5));
    }
    let log = node_log(&daemon).expect("the view's node log");
    let last = std::fs::metadata(&log).expect("log").len();
    let text = std::fs::read_to_string(&log).expect("log text");
    std::fs::write(work.join("done"), "").expect("done");
    let (status, out) = running.finish();
    assert!(status.success(), "{out}");
    assert!(largest > 0, "the log was seen");
    assert!(
        largest <= 80 << 10 && last <= 80 << 10,
        "the node log reached {largest} bytes (now {last}) for 200 names"
    );
    // The names that stay are in it (a snapshot keeps the live table).
    let kept = hex::encode("k200");
    assert!(
        text.lines()
            .any(|l| l.starts_with("n ") && l.ends_with(&kept)),
        "{text}"
    );
}

/// A view whose node log was compacted is taken over by the next server:
/// after 4,000 cycles (several compactions) the server is SIGKILLed, and
/// the program, whose cwd and held file are numbers the kernel got before
/// the compaction, reads, lists and creates in it with no error.
#[test]
fn a_view_whose_node_log_was_compacted_outlives_its_server() {
    if !root_and_bwrap() {
        return;
    }
    let daemon = Daemon::start_with_env(&view_config(""), &[]);
    let work = work_dir(&daemon);
    let script = format!(
        r#"mkdir d && cd d
        for i in $(seq 0 49); do echo k$i > keep-$i; done
        exec 3<keep-0
        python3 -c '{CHURN}' 4000 && touch ../churned
        while [ ! -e ../go ]; do sleep 0.02; done
        errors=0
        for i in $(seq 0 49); do [ "$(cat keep-$i)" = k$i ] || {{ errors=$((errors+1)); echo "keep-$i unread" >&2; }}; done
        [ "$(cat <&3)" = k0 ] || {{ errors=$((errors+1)); echo "held file unread" >&2; }}
        echo new > new.txt && [ "$(cat new.txt)" = new ] || {{ errors=$((errors+1)); echo "no create" >&2; }}
        echo listed=$(ls | wc -l)
        echo errors=$errors"#
    );
    let mut running = run_in_background(&daemon, &[], &script);
    wait_for_file(&work.join("churned"), "the churn");
    let log = node_log(&daemon).expect("the view's node log");
    let size = std::fs::metadata(&log).expect("log").len();
    assert!(
        size <= 80 << 10,
        "4,000 cycles were compacted away: {size} bytes"
    );
    daemon.kill_server();
    std::fs::write(work.join("go"), "").expect("go");
    let (status, out) = running.finish();
    assert!(status.success(), "{out}");
    assert_eq!(field(&out, "errors").as_deref(), Some("0"), "{out}");
    assert_eq!(field(&out, "listed").as_deref(), Some("51"), "{out}");
}

/// `limits.viewNodes`: a sandbox that makes names past it is refused
/// `ENOSPC` (create and mkdir, with nothing left on disk), names it holds
/// still open, and the refusal is said once in the audit log, naming the
/// bound.
#[test]
fn a_view_refuses_new_names_past_view_nodes() {
    if !root_and_bwrap() {
        return;
    }
    let daemon = Daemon::start_with_env(&view_config(r#""viewNodes": 100"#), &[]);
    let work = work_dir(&daemon);
    let script = r#"python3 - <<'PY'
import errno, os
made, error = 0, None
for i in range(200):
    try:
        open(f"f{i}", "w").close()
        made += 1
    except OSError as e:
        error = errno.errorcode[e.errno]
        break
print(f"made={made}")
print(f"error={error}")
def t(name, f):
    try:
        f(); print(f"{name}=ok")
    except OSError as e:
        print(f"{name}={errno.errorcode[e.errno]}")
t("known", lambda: open("f0").read())
t("mkdir", lambda: os.mkdir("past"))
PY"#;
    let output = run_script(&daemon, &[], script);
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{output:?}");
    let made: usize = field(&out, "made")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!((50..100).contains(&made), "{out}");
    assert_eq!(field(&out, "error").as_deref(), Some("ENOSPC"), "{out}");
    assert_eq!(field(&out, "known").as_deref(), Some("ok"), "{out}");
    assert_eq!(field(&out, "mkdir").as_deref(), Some("ENOSPC"), "{out}");
    assert!(
        !work.join(format!("f{made}")).exists(),
        "a refused create made nothing"
    );
    assert!(!work.join("past").exists(), "a refused mkdir made nothing");
    let said: Vec<Value> = daemon
        .audit_lines()
        .into_iter()
        .filter(|l| l["event"] == "view-bound")
        .collect();
    assert_eq!(said.len(), 1, "said once, not at every refusal: {said:?}");
    assert_eq!(said[0]["limit"], "viewNodes");
    assert_eq!(said[0]["bound"], 100);
    assert!(
        said[0]["why"]
            .as_str()
            .is_some_and(|w| w.contains("limits.viewNodes")),
        "{said:?}"
    );
}
