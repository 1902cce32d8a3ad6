//! The mount survives its server: `permfs mount` holds the FUSE descriptor
//! and starts a new server when one dies (SIGKILL here) or is upgraded;
//! the kernel re-sends what the dead one had read, and the journal gives
//! the new server every session, grant and ask. Callers, separate python
//! processes, must never see an error across a restart: a `stat` loop
//! sees none, a reader blocked on its answer gets that answer, and no ask
//! is lost or answered twice (the soak).

use crate::common;

use common::{eventually, python, Daemon};
use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CONFIG: &str =
    r#"{"permission": {"*": "ask", "bash": {"*": "ask", "git *": "allow", "rm *": "deny"}}}"#;
const RULE_ANSWERED: &str = r#"{"surface":"bash","value":"git status"}"#;
const PERSON_ANSWERED: &str = r#"{"surface":"bash","value":"make deploy"}"#;

/// Asks through the session's `ask` file until `stop` exists (or `count`
/// asks when it is not 0); prints `{"outcomes": {...}, "errors": {...}}`,
/// errors by errno name.
const ASKER: &str = r#"
import errno, json, os, sys
path, request, count, stop = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
outcomes, errors, done = {}, {}, 0
while (count and done < count) or (not count and not os.path.exists(stop)):
    done += 1
    try:
        fd = os.open(path, os.O_RDWR)
        try:
            os.write(fd, request.encode())
            answer = b"".join(iter(lambda: os.read(fd, 65536), b""))
        finally:
            os.close(fd)
        outcome = json.loads(answer).get("outcome", "?")
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    except OSError as e:
        name = errno.errorcode.get(e.errno, str(e.errno))
        errors[name] = errors.get(name, 0) + 1
print(json.dumps({"outcomes": outcomes, "errors": errors}))
"#;

/// `stat`s, lists and reads a session until `stop` exists; prints the
/// same summary (outcome `ok` per round).
const STAT_LOOP: &str = r#"
import errno, json, os, sys, time
session, stop = sys.argv[1], sys.argv[2]
outcomes, errors = {}, {}
while not os.path.exists(stop):
    try:
        os.stat(os.path.join(session, "session.json"))
        os.listdir(os.path.join(session, "outbox"))
        with open(os.path.join(session, "session.json")) as f:
            json.loads(f.read())
        outcomes["ok"] = outcomes.get("ok", 0) + 1
    except OSError as e:
        name = errno.errorcode.get(e.errno, str(e.errno))
        errors[name] = errors.get(name, 0) + 1
    time.sleep(0.002)
print(json.dumps({"outcomes": outcomes, "errors": errors}))
"#;

struct Summary {
    outcomes: HashMap<String, u64>,
    errors: HashMap<String, u64>,
}

fn spawn(script: &str, args: &[&str]) -> Child {
    Command::new(python())
        .args(["-c", script])
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs")
}

fn summary(child: Child) -> Summary {
    let output = child.wait_with_output().expect("the client ends");
    assert!(output.status.success(), "{output:?}");
    let value: serde_json::Value = serde_json::from_slice(&output.stdout).expect("a JSON summary");
    let map = |key: &str| -> HashMap<String, u64> {
        value[key]
            .as_object()
            .map(|o| {
                o.iter()
                    .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                    .collect()
            })
            .unwrap_or_default()
    };
    Summary {
        outcomes: map("outcomes"),
        errors: map("errors"),
    }
}

/// [`STAT_LOOP`] in a sandbox's view of `session`: a bind of the session
/// directory in a mount namespace of its own (it dies with the loop).
fn sandboxed_stat_loop(daemon: &Daemon, session: &Path, stop: &str) -> Child {
    let bind = daemon.dir.path().join("bound");
    std::fs::create_dir(&bind).expect("bind point");
    Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c"])
        .arg(r#"mount --bind "$1" "$2" && exec "$3" -c "$4" "$2" "$5""#)
        .args(["sh", &session.to_string_lossy(), &bind.to_string_lossy()])
        .args([python(), STAT_LOOP, stop])
        .stdout(Stdio::piped())
        .spawn()
        .expect("unshare runs")
}

/// The blocked reader `waiting` ended with one `allow` and no error.
fn assert_allowed_once(waiting: Child) {
    let waited = summary(waiting);
    assert!(waited.errors.is_empty(), "{:?}", waited.errors);
    assert_eq!(
        waited.outcomes.get("allow"),
        Some(&1),
        "{:?}",
        waited.outcomes
    );
}

fn ask_once(ask: &Path, request: &str) -> Summary {
    summary(spawn(
        ASKER,
        &[&ask.to_string_lossy(), request, "1", "/nonexistent"],
    ))
}

/// Writes `request` in two `write`s on `path` (the `ask` file, or a new
/// `outbox/<name>.request` when a response path is given), signalling
/// `ready` between them and waiting for `go`; prints the same summary.
const TWO_WRITES: &str = r#"
import errno, json, os, sys, time
path, request, ready, go, response = sys.argv[1:6]
outcomes, errors = {}, {}
half = len(request) // 2
try:
    if response:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    else:
        fd = os.open(path, os.O_RDWR)
    os.write(fd, request[:half].encode())
    open(ready, "w").close()
    while not os.path.exists(go):
        time.sleep(0.01)
    os.write(fd, request[half:].encode())
    if response:
        os.close(fd)
        with open(response) as f:
            answer = f.read()
    else:
        answer = b"".join(iter(lambda: os.read(fd, 65536), b""))
        os.close(fd)
    outcome = json.loads(answer).get("outcome", "?")
    outcomes[outcome] = 1
except OSError as e:
    errors[errno.errorcode.get(e.errno, str(e.errno))] = 1
print(json.dumps({"outcomes": outcomes, "errors": errors}))
"#;

/// A request written in two writes, the server SIGKILLed between them:
/// the first part was logged before its write was answered, so the new
/// server takes the second on the same handle and answers the whole
/// request, once (on an `ask` exchange and on a request file).
#[test]
fn a_request_half_written_when_the_server_dies_is_finished_on_the_next() {
    let daemon = Daemon::start(CONFIG, None);
    let session = daemon.session("main");
    for (path, response) in [
        (session.join("ask"), String::new()),
        (
            session.join("outbox/split.request"),
            session
                .join("outbox/split.response")
                .to_string_lossy()
                .into_owned(),
        ),
    ] {
        let ready = daemon.dir.path().join("ready");
        let go = daemon.dir.path().join("go");
        let _ = std::fs::remove_file(&ready);
        let _ = std::fs::remove_file(&go);
        let writer = spawn(
            TWO_WRITES,
            &[
                &path.to_string_lossy(),
                RULE_ANSWERED,
                &ready.to_string_lossy(),
                &go.to_string_lossy(),
                &response,
            ],
        );
        eventually("the first half is written", || ready.exists());
        daemon.kill_server();
        std::fs::write(&go, "").expect("go");
        assert_allowed_once(writer);
    }
    let allowed = daemon
        .audit_lines()
        .iter()
        .filter(|l| l["outcome"] == "allow")
        .count();
    assert_eq!(allowed, 2, "each request answered once");
}

/// Every file the server keeps under `state_dir` (the audit log, the
/// journal, the drafts log, the epoch, the status file and, under
/// systemd, the inode key: `must_hold` names some that must be there) is
/// its owner's alone. Each has no group or other permission bits, and
/// uid 65534, let through the directories on the way, reads none of
/// them: the drafts log holds requests not yet asked, the journal every
/// pending one, the key what keeps inode numbers unguessable.
fn assert_state_is_the_owners_alone(state_dir: &Path, must_hold: &[&str]) {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let mut files = Vec::new();
    let mut dirs = vec![state_dir.to_path_buf()];
    let device = std::fs::metadata(state_dir).expect("stat").dev();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("the state dir lists") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                // Not into a view mounted under `views/`: the workspace
                // it shows is not the state dir.
                if std::fs::metadata(&path).is_ok_and(|m| m.dev() == device) {
                    dirs.push(path);
                }
            } else {
                files.push(path);
            }
        }
    }
    for name in must_hold {
        assert!(
            files.iter().any(|f| f.to_string_lossy().ends_with(name)),
            "{name} is in the state dir: {files:?}"
        );
    }
    for file in &files {
        let mode = std::fs::metadata(file).expect("stat").mode() & 0o777;
        assert_eq!(mode & 0o077, 0, "{} is mode {mode:o}", file.display());
    }
    // Only the files' own modes stand in the way: every directory from
    // `/` down is opened to others for the attempt.
    let mut opened = Vec::new();
    for dir in state_dir.ancestors().chain(
        files
            .iter()
            .filter_map(|f| f.parent())
            .filter(|p| p != &state_dir),
    ) {
        let mode = std::fs::metadata(dir).expect("stat").mode() & 0o777;
        if mode & 0o005 != 0o005 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | 0o005))
                .expect("opened to others");
            opened.push((dir.to_path_buf(), mode));
        }
    }
    for file in &files {
        let output = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "cat"])
            .arg(file)
            .output()
            .expect("setpriv runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success() && stderr.contains("Permission denied"),
            "uid 65534 read {}: {output:?}",
            file.display()
        );
    }
    for (dir, mode) in opened {
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode));
    }
}

#[test]
fn the_state_dir_is_the_owners_alone() {
    let daemon = Daemon::start(CONFIG, None);
    let ask = daemon.session("main").join("ask");
    let asked = ask_once(&ask, RULE_ANSWERED);
    assert_eq!(asked.outcomes.get("allow"), Some(&1), "{:?}", asked.errors);
    // A request left undecided, so the journal holds a pending row.
    let stop = daemon.dir.path().join("stop");
    let waiting = spawn(
        ASKER,
        &[
            &ask.to_string_lossy(),
            PERSON_ANSWERED,
            "1",
            &stop.to_string_lossy(),
        ],
    );
    eventually("the ask waits in main's inbox", || {
        daemon.inbox("main").len() == 1
    });
    assert_state_is_the_owners_alone(
        &daemon.state_dir,
        &[
            "audit.log",
            "journal.sqlite",
            "journal.answers",
            "judges.attached",
            "drafts.log",
            "epoch",
            ".json",
        ],
    );
    let entries = daemon.inbox("main");
    std::fs::write(
        daemon.session("main").join("inbox").join(&entries[0]),
        "allow",
    )
    .expect("decided");
    assert_allowed_once(waiting);
}

#[test]
fn a_killed_server_is_replaced_under_waiting_readers() {
    let daemon = Daemon::start(CONFIG, None);
    let session = daemon.session("main");
    let ask = session.join("ask");
    let stop = daemon.dir.path().join("stop");
    let (ask_s, stop_s) = (ask.to_string_lossy(), stop.to_string_lossy());
    let stats = spawn(STAT_LOOP, &[&session.to_string_lossy(), &stop_s]);
    let rule_askers: Vec<Child> = (0..2)
        .map(|_| spawn(ASKER, &[&ask_s, RULE_ANSWERED, "0", &stop_s]))
        .collect();
    // A reader blocked on an undecided ask, in main's inbox.
    let waiting = spawn(ASKER, &[&ask_s, PERSON_ANSWERED, "1", &stop_s]);
    eventually("the undecided ask waits in main's inbox", || {
        daemon.inbox("main").len() == 1
    });
    let first = daemon.server_pid();
    let second = daemon.kill_server();
    assert_ne!(first, second);
    assert!(
        !Path::new(&format!("/proc/{first}")).exists(),
        "the old server is gone"
    );

    // The waiting reader's ask came back from the journal, in the same
    // inbox entry; its reader, blocked across the restart, is answered
    // by the decision the new server takes.
    let entries = daemon.inbox("main");
    assert_eq!(entries.len(), 1, "{entries:?}");
    std::fs::write(
        daemon.session("main").join("inbox").join(&entries[0]),
        "allow",
    )
    .expect("decided through the new server");
    assert_allowed_once(waiting);
    // New asks are served: by rule, and into the inbox.
    let ruled = ask_once(&ask, RULE_ANSWERED);
    assert_eq!(ruled.outcomes.get("allow"), Some(&1), "{:?}", ruled.errors);
    std::fs::write(&stop, "").expect("stop file");
    drop(daemon);

    let stats = summary(stats);
    assert!(
        stats.errors.is_empty(),
        "the stat loop saw errors: {:?}",
        stats.errors
    );
    assert!(stats.outcomes.get("ok").is_some_and(|&n| n > 0));
    for asker in rule_askers {
        let asked = summary(asker);
        assert!(
            asked.errors.is_empty() && asked.outcomes.get("allow").is_some_and(|&n| n > 0),
            "{:?} {:?}",
            asked.outcomes,
            asked.errors
        );
    }
}

#[test]
fn twenty_sigkills_and_the_stat_loop_sees_no_error() {
    let daemon = Daemon::start(CONFIG, None);
    let session = daemon.session("main");
    let ask = session.join("ask");
    let stop = daemon.dir.path().join("stop");
    let stop_s = stop.to_string_lossy();
    let stats = spawn(STAT_LOOP, &[&session.to_string_lossy(), &stop_s]);
    // A sandbox's view of its session: a bind of the session directory in
    // a mount namespace of its own (it dies with the loop), whose root
    // keeps the inode number the first server gave.
    let sandboxed = sandboxed_stat_loop(&daemon, &session, &stop_s);
    std::thread::sleep(Duration::from_millis(300));
    let asker = spawn(
        ASKER,
        &[&ask.to_string_lossy(), RULE_ANSWERED, "0", &stop_s],
    );
    let mut servers = vec![daemon.server_pid()];
    for _ in 0..20 {
        servers.push(daemon.kill_server());
        std::thread::sleep(Duration::from_millis(50));
    }
    let ruled = ask_once(&ask, RULE_ANSWERED);
    assert_eq!(ruled.outcomes.get("allow"), Some(&1), "{:?}", ruled.errors);
    std::fs::write(&stop, "").expect("stop file");
    let stats = summary(stats);
    let sandboxed = summary(sandboxed);
    let asked = summary(asker);
    let status = daemon.status();
    assert!(
        sandboxed.errors.is_empty() && sandboxed.outcomes.get("ok").is_some_and(|&n| n > 0),
        "the loop through a bind of the session saw errors across 20 restarts: {:?} {:?}",
        sandboxed.outcomes,
        sandboxed.errors
    );
    assert!(
        status["restarts"].as_u64().is_some_and(|r| r >= 20),
        "{status}"
    );
    let distinct: std::collections::HashSet<_> = servers.iter().collect();
    assert_eq!(
        distinct.len(),
        21,
        "every kill was followed by a new server"
    );
    assert!(
        stats.errors.is_empty(),
        "the stat loop saw errors across 20 restarts: {:?}",
        stats.errors
    );
    assert!(asked.errors.is_empty(), "{:?}", asked.errors);
    eprintln!(
        "20 restarts: stat loop {:?}; through a bind {:?}; asker {:?} {:?}",
        stats.outcomes, sandboxed.outcomes, asked.outcomes, asked.errors
    );
}

#[test]
fn an_upgrade_under_load_replaces_the_server_without_unmounting() {
    let daemon = Daemon::start(CONFIG, None);
    let session = daemon.session("main");
    let ask = session.join("ask");
    let stop = daemon.dir.path().join("stop");
    let (ask_s, stop_s) = (ask.to_string_lossy(), stop.to_string_lossy());
    let stats = spawn(STAT_LOOP, &[&session.to_string_lossy(), &stop_s]);
    let askers: Vec<Child> = (0..2)
        .map(|_| spawn(ASKER, &[&ask_s, RULE_ANSWERED, "0", &stop_s]))
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let before = daemon.status();
    daemon.upgrade();
    let after = daemon.status();
    assert_eq!(after["supervisor"]["pid"], before["supervisor"]["pid"]);
    assert_ne!(after["server"]["pid"], before["server"]["pid"]);
    assert_eq!(after["upgrades"], 1);
    std::thread::sleep(Duration::from_millis(200));
    std::fs::write(&stop, "").expect("stop file");
    let stats = summary(stats);
    assert!(stats.errors.is_empty(), "{:?}", stats.errors);
    for asker in askers {
        let asked = summary(asker);
        assert!(asked.errors.is_empty(), "{:?}", asked.errors);
        assert!(asked.outcomes.get("allow").is_some_and(|&n| n > 0));
    }
    let ruled = ask_once(&ask, RULE_ANSWERED);
    assert_eq!(ruled.outcomes.get("allow"), Some(&1), "{:?}", ruled.errors);
}

#[test]
fn stopping_the_supervisor_stops_the_server_and_unmounts() {
    let mut daemon = Daemon::start(CONFIG, None);
    let server = daemon.server_pid();
    let status = daemon.stop().expect("stopped");
    assert!(status.success(), "{status:?}");
    assert!(!common::is_mounted(&daemon.mountpoint), "unmounted");
    assert!(
        !Path::new(&format!("/proc/{server}")).exists(),
        "the server ended"
    );
}

/// A lease outlives the server that recorded it: under the supervisor the
/// `ctl` handle that holds it stays open in the kernel, so the new server
/// keeps the session (the journal says which handle) and ends it when
/// that handle closes, as the old one would have.
#[test]
fn a_lease_outlives_the_server_and_ends_when_its_handle_closes() {
    let daemon = Daemon::start(CONFIG, None);
    let ctl = daemon.session("main").join("ctl");
    let held = daemon.dir.path().join("release");
    // Holds the ctl handle until the file `release` exists.
    let holder = spawn(
        r#"
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY)
os.write(fd, b"spawn leased lease")
while not os.path.exists(sys.argv[2]):
    time.sleep(0.02)
os.close(fd)
print("{}")
"#,
        &[&ctl.to_string_lossy(), &held.to_string_lossy()],
    );
    eventually("the leased child exists", || {
        daemon.children("main").contains(&"leased".to_string())
    });
    daemon.kill_server();
    // The new server restored it and kept it: its holder is alive.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        daemon.children("main").contains(&"leased".to_string()),
        "the lease's handle is still open: the session stays"
    );
    std::fs::write(&held, "").expect("release");
    let output = holder.wait_with_output().expect("the holder ends");
    assert!(output.status.success(), "{output:?}");
    eventually("the handle's close ends the session", || {
        !daemon.children("main").contains(&"leased".to_string())
    });
}

/// One soak asker: asks until `stop` exists, turn by turn a rule-allowed,
/// a rule-denied and a person-answered command, each naming the asker and
/// the turn; even askers through the `ask` file, odd ones through an
/// outbox name of their own opened read-write (the hook's form). Prints
/// every answer (`[kind, outcome, askId, state]`) and every error.
const SOAK_ASKER: &str = r#"
import errno, json, os, sys
session, me, stop = sys.argv[1], int(sys.argv[2]), sys.argv[3]
kinds = [("rule-allow", "git status %d-%d"), ("rule-deny", "rm x%d-%d"),
         ("person", "make deploy-%d-%d")]
answers, errors, turn = [], {}, 0
while not os.path.exists(stop):
    kind, command = kinds[turn % 3]
    request = json.dumps({"surface": "bash", "value": command % (me, turn)}).encode()
    turn += 1
    step = "open"
    try:
        if me % 2 == 0:
            fd = os.open(os.path.join(session, "ask"), os.O_RDWR)
        else:
            name = "soak-%d-%d" % (me, turn)
            fd = os.open(os.path.join(session, "outbox", name),
                         os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            step = "write"
            os.write(fd, request)
            step = "read"
            answer = b"".join(iter(lambda: os.read(fd, 65536), b""))
            step = "close"
        finally:
            os.close(fd)
        step = "json"
        value = json.loads(answer)
        answers.append([kind, value.get("outcome"), value.get("askId"), value.get("state")])
    except (OSError, ValueError) as e:
        name = step + " " + errno.errorcode.get(getattr(e, "errno", None) or 0, type(e).__name__)
        errors[name] = errors.get(name, 0) + 1
print(json.dumps({"answers": answers, "errors": errors}))
"#;

/// The person: allows every ask that reaches main's inbox, once each,
/// until `stop` exists; prints what it decided and its errors.
const SOAK_DECIDER: &str = r#"
import errno, json, os, sys, time
inbox, stop = sys.argv[1], sys.argv[2]
decided, errors = set(), {}
while not os.path.exists(stop):
    try:
        entries = os.listdir(inbox)
    except OSError as e:
        name = errno.errorcode.get(e.errno, str(e.errno))
        errors["list " + name] = errors.get("list " + name, 0) + 1
        entries = []
    for entry in entries:
        if entry in decided:
            continue
        step = "open"
        try:
            fd = os.open(os.path.join(inbox, entry), os.O_WRONLY)
            try:
                step = "write"
                os.write(fd, b"allow")
            finally:
                os.close(fd)
            decided.add(entry)
        except OSError as e:
            name = step + " " + errno.errorcode.get(e.errno, str(e.errno)) + " " + entry
            errors[name] = errors.get(name, 0) + 1
    time.sleep(0.002)
print(json.dumps({"outcomes": {"decided": len(decided)}, "errors": errors,
                  "decided": sorted(decided)}))
"#;

/// The soak the issue names: 16 askers asking all the time (rule-allowed,
/// rule-denied and person-answered asks, through both exchange forms), a
/// person deciding, a `stat` loop in a sandbox bound to the session, and
/// 20 SIGKILLs of the server. Every ask gets its answer (no error at any
/// caller), the right one for its kind; no ask id is answered twice (to
/// two readers, or twice in the audit log); every answer a reader got is
/// in the audit log once, and the log has no answer nobody read (0 lost).
/// `PERMFS_SOAK_KILLS` and `PERMFS_SOAK_MIN_ASKS` make it longer.
#[test]
fn soak_sixteen_askers_twenty_sigkills_no_ask_lost_or_answered_twice() {
    let kills = std::env::var("PERMFS_SOAK_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20u32);
    let min_asks = std::env::var("PERMFS_SOAK_MIN_ASKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000usize);
    // A decision lost would leave its reader waiting for the timeout: 30 s.
    let config = CONFIG.replacen('{', r#"{"forwardingTimeoutMs": 30000, "#, 1);
    let daemon = Daemon::start(&config, None);
    let session = daemon.session("main");
    let session_s = session.to_string_lossy().into_owned();
    let stop = daemon.dir.path().join("stop");
    let stop_s = stop.to_string_lossy().into_owned();
    let sandboxed = sandboxed_stat_loop(&daemon, &session, &stop_s);
    let inbox = session.join("inbox");
    // The person stops after the askers (their last asks need it).
    let person_stop = daemon.dir.path().join("person-stop");
    let decider = spawn(
        SOAK_DECIDER,
        &[&inbox.to_string_lossy(), &person_stop.to_string_lossy()],
    );
    let decider_log = daemon.dir.path().join("decider.json");
    let askers: Vec<Child> = (0..16)
        .map(|me| spawn(SOAK_ASKER, &[&session_s, &me.to_string(), &stop_s]))
        .collect();
    let started = Instant::now();
    let mut servers = vec![daemon.server_pid()];
    for _ in 0..kills {
        std::thread::sleep(Duration::from_millis(150));
        servers.push(daemon.kill_server());
    }
    // Asking goes on until at least `min_asks` are answered in all.
    let answered = || {
        daemon
            .audit_lines()
            .iter()
            .filter(|l| l["askId"].is_string())
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    while answered() < min_asks && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::write(&stop, "").expect("stop file");
    let asked: Vec<serde_json::Value> = askers
        .into_iter()
        .map(|child| {
            let output = child.wait_with_output().expect("an asker ends");
            assert!(output.status.success(), "{output:?}");
            serde_json::from_slice(&output.stdout).expect("an asker's JSON")
        })
        .collect();
    std::fs::write(&person_stop, "").expect("stop file");
    let decided_raw = decider.wait_with_output().expect("the person ends");
    let _ = std::fs::write(&decider_log, &decided_raw.stdout);
    let decided_list: serde_json::Value =
        serde_json::from_slice(&decided_raw.stdout).expect("the person's JSON");
    let decided = Summary {
        outcomes: HashMap::from([(
            "decided".to_string(),
            decided_list["decided"]
                .as_array()
                .map_or(0, |a| a.len() as u64),
        )]),
        errors: decided_list["errors"]
            .as_object()
            .map(|o| {
                o.iter()
                    .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                    .collect()
            })
            .unwrap_or_default(),
    };
    let sandboxed = summary(sandboxed);
    let elapsed = started.elapsed();
    let status = daemon.status();

    let mut ids = std::collections::HashSet::new();
    let mut by_kind: HashMap<String, u64> = HashMap::new();
    for (me, report) in asked.iter().enumerate() {
        let errors = report["errors"].as_object().expect("errors");
        assert!(errors.is_empty(), "asker {me} saw errors: {errors:?}");
        for answer in report["answers"].as_array().expect("answers") {
            let kind = answer[0].as_str().unwrap_or("?");
            let outcome = answer[1].as_str().unwrap_or("?");
            let expected = if kind == "rule-deny" { "deny" } else { "allow" };
            if outcome != expected {
                let id = answer[2].as_str().unwrap_or("?");
                let lines: Vec<_> = daemon
                    .audit_lines()
                    .into_iter()
                    .filter(|l| l.to_string().contains(id) || l["event"].is_string())
                    .collect();
                let was_decided = decided_list["decided"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|e| e.as_str() == Some(id)));
                panic!(
                    "asker {me}: {answer}; decided by the person: {was_decided} (its errors {}); audit: {lines:#?}",
                    decided_list["errors"]
                );
            }
            let id = answer[2].as_str().expect("an askId").to_string();
            assert!(ids.insert(id.clone()), "ask {id} was answered twice");
            *by_kind.entry(kind.to_string()).or_default() += 1;
        }
    }
    assert!(ids.len() >= min_asks, "only {} asks answered", ids.len());
    let mut logged: HashMap<String, u64> = HashMap::new();
    for line in daemon.audit_lines() {
        if let Some(id) = line["askId"].as_str() {
            *logged.entry(id.to_string()).or_default() += 1;
        }
    }
    let twice: Vec<_> = logged.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "answered twice in the audit log: {twice:?}"
    );
    let unread: Vec<_> = logged.keys().filter(|id| !ids.contains(*id)).collect();
    assert!(
        unread.is_empty(),
        "answers no reader got (lost asks): {unread:?}"
    );
    let missing: Vec<_> = ids.iter().filter(|id| !logged.contains_key(*id)).collect();
    assert!(
        missing.is_empty(),
        "answers not in the audit log: {missing:?}"
    );
    // The person's write may fail where a restart cut it: the server died
    // after taking the decision and before answering the write, and the
    // asker read the answer and closed its handle meanwhile, so the
    // re-sent write finds no ask (`ESTALE`); or an entry listed just
    // before a restart is looked up as the new server starts. Either way
    // the decision must have been taken (the person retries an entry whose
    // write failed): the audit log shows the ask allowed by the person.
    for error in decided.errors.keys() {
        let entry = error.rsplit(' ').next().unwrap_or_default();
        let by_person = daemon.audit_lines().iter().any(|l| {
            l["askId"] == entry && l["outcome"] == "allow" && l["decidedBy"]["kind"] == "user"
        });
        assert!(
            by_person,
            "the person saw {error} on {entry}, and the ask was not decided by them"
        );
    }
    assert!(
        sandboxed.errors.is_empty() && sandboxed.outcomes.get("ok").is_some_and(|&n| n > 0),
        "the sandbox's stat loop: {:?} {:?}",
        sandboxed.outcomes,
        sandboxed.errors
    );
    let distinct: std::collections::HashSet<_> = servers.iter().collect();
    assert_eq!(
        distinct.len(),
        kills as usize + 1,
        "a new server after every kill"
    );
    assert!(
        status["restarts"]
            .as_u64()
            .is_some_and(|r| r >= u64::from(kills)),
        "{status}"
    );
    eprintln!(
        "soak: {} asks ({by_kind:?}) by 16 askers across {kills} SIGKILLs in {:.1} s; the person decided {:?} (writes a restart cut: {:?}); the sandbox's stat loop {:?}",
        ids.len(),
        elapsed.as_secs_f64(),
        decided.outcomes,
        decided.errors,
        sandboxed.outcomes
    );
}

/// Receives one datagram on `socket` (within 10 s): its text and the
/// descriptors it carried.
fn receive_notification(socket: &std::os::unix::net::UnixDatagram) -> (String, Vec<i32>) {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    use std::os::fd::AsRawFd;
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a timeout");
    let mut buffer = [0u8; 4096];
    let mut space = nix::cmsg_space!([std::os::fd::RawFd; 4]);
    let mut iov = [std::io::IoSliceMut::new(&mut buffer)];
    let message = recvmsg::<()>(
        socket.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::empty(),
    )
    .expect("a notification from permfs within 10 s");
    let mut fds = Vec::new();
    for control in message.cmsgs().expect("control messages") {
        if let ControlMessageOwned::ScmRights(rights) = control {
            fds.extend(rights);
        }
    }
    let length = message.bytes;
    (String::from_utf8_lossy(&buffer[..length]).into_owned(), fds)
}

/// `permfs mount` as systemd would start it: `NOTIFY_SOCKET` set, and the
/// descriptors of `stored` (its store, name by name) passed from fd 3 on
/// with `LISTEN_FDS`, `LISTEN_FDNAMES` and `LISTEN_PID`.
fn start_under_systemd(
    dir: &Path,
    socket: &Path,
    stored: &[(&str, &std::os::fd::OwnedFd)],
) -> Child {
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(r#"LISTEN_PID=$$ exec "$0" "$@""#)
        .arg(env!("CARGO_BIN_EXE_permfs"))
        .arg("mount")
        .arg(dir.join("mnt"))
        .arg("--config")
        .arg(dir.join("config.json"))
        .arg("--state-dir")
        .arg(dir.join("state"))
        .current_dir(dir.join("work"))
        .env("NOTIFY_SOCKET", socket)
        .env("PERMFS_LOG", "warn,fuser=error")
        .stdin(Stdio::null());
    if !stored.is_empty() {
        let names: Vec<&str> = stored.iter().map(|(name, _)| *name).collect();
        command
            .env("LISTEN_FDS", stored.len().to_string())
            .env("LISTEN_FDNAMES", names.join(":"));
    }
    let fds: Vec<i32> = stored
        .iter()
        .map(|(_, fd)| std::os::fd::AsRawFd::as_raw_fd(*fd))
        .collect();
    // SAFETY: dup2 is async-signal-safe; fds 3.. are then the stored
    // descriptors, without close-on-exec. The stored descriptors are
    // first moved above the range they are put in.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut command, move || {
            let mut high = Vec::with_capacity(fds.len());
            for fd in &fds {
                let moved = libc::fcntl(*fd, libc::F_DUPFD, 100);
                if moved < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                high.push(moved);
            }
            for (i, fd) in high.iter().enumerate() {
                if libc::dup2(*fd, 3 + i as i32) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    command.spawn().expect("permfs mount starts")
}

/// SIGKILLs the supervisor (as systemd would see it die) and waits until
/// its server died with it.
fn kill_supervisor(daemon: &mut Daemon) {
    let old_server = daemon.server_pid();
    let mut old = daemon.child.take().expect("the supervisor");
    old.kill().expect("the supervisor is SIGKILLed");
    let _ = old.wait();
    eventually("its server died with it", || {
        !Path::new(&format!("/proc/{old_server}")).exists()
    });
}

/// A directory laid out for [`start_under_systemd`]: `mnt`, `state`,
/// `work`, `config.json` (with `config`), and the notification socket.
fn systemd_dir(config: &str) -> (tempfile::TempDir, std::os::unix::net::UnixDatagram) {
    let dir = tempfile::tempdir().expect("temp dir");
    let socket =
        std::os::unix::net::UnixDatagram::bind(dir.path().join("notify")).expect("a notify socket");
    for sub in ["mnt", "state", "work"] {
        std::fs::create_dir(dir.path().join(sub)).expect("a directory");
    }
    std::fs::write(dir.path().join("config.json"), config).expect("config");
    (dir, socket)
}

/// Run by systemd (here a test in systemd's place, speaking its
/// documented protocol), `permfs mount` puts its FUSE descriptor in the
/// file-descriptor store (`FDSTORE=1`, named `permfs-fuse`, with
/// `READY=1`). When the supervisor itself is SIGKILLed, the mount lives on
/// in the descriptor "systemd" holds; the supervisor started again with
/// it (`LISTEN_FDS`) takes the connection over: the reader blocked on an
/// undecided ask gets the answer the person then gives, a `stat` loop
/// sees no error. A deliberate stop takes the descriptor out of the store
/// (`FDSTOREREMOVE=1`) and unmounts.
#[test]
fn under_systemd_the_mount_outlives_its_supervisor_through_the_fd_store() {
    let (dir, socket) = systemd_dir(CONFIG);
    let socket_path = dir.path().join("notify");
    let mountpoint = dir.path().join("mnt");
    let state_dir = dir.path().join("state");
    let first = start_under_systemd(dir.path(), &socket_path, &[]);
    let mut daemon = Daemon {
        child: Some(first),
        mountpoint: mountpoint.clone(),
        dir,
        state_dir: state_dir.clone(),
    };
    let (text, fds) = receive_notification(&socket);
    assert!(
        text.contains("FDSTORE=1") && text.contains("FDNAME=permfs-fuse"),
        "{text:?}"
    );
    assert!(text.contains("READY=1"), "{text:?}");
    assert_eq!(fds.len(), 1, "one descriptor stored: {text:?}");
    // SAFETY: the descriptor was just received and is owned here.
    let stored = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fds[0]) };

    let session = daemon.session("main");
    let ask = session.join("ask");
    let stop = daemon.dir.path().join("stop");
    let (ask_s, stop_s) = (ask.to_string_lossy(), stop.to_string_lossy());
    let stats = spawn(STAT_LOOP, &[&session.to_string_lossy(), &stop_s]);
    let waiting = spawn(ASKER, &[&ask_s, PERSON_ANSWERED, "1", &stop_s]);
    eventually("the undecided ask waits in main's inbox", || {
        daemon.inbox("main").len() == 1
    });
    kill_supervisor(&mut daemon);
    assert!(
        common::is_mounted(&mountpoint),
        "the mount lives on in the stored descriptor"
    );

    // "systemd" starts the unit again, passing the descriptor as fd 3.
    daemon.child = Some(start_under_systemd(
        daemon.dir.path(),
        &socket_path,
        &[("permfs-fuse", &stored)],
    ));
    let (text, fds) = receive_notification(&socket);
    assert!(text.contains("FDSTORE=1"), "stored again: {text:?}");
    drop(fds);
    let status = daemon.status();
    assert_eq!(
        status["supervisor"]["pid"].as_u64(),
        daemon.child.as_ref().map(|c| u64::from(c.id())),
        "{status}"
    );

    let entries = daemon.inbox("main");
    assert_eq!(entries.len(), 1, "the ask came back: {entries:?}");
    assert_state_is_the_owners_alone(&state_dir, &[".json.key", "drafts.log"]);
    std::fs::write(session.join("inbox").join(&entries[0]), "allow").expect("decided");
    assert_allowed_once(waiting);
    std::fs::write(&stop, "").expect("stop file");
    let stats = summary(stats);
    assert!(
        stats.errors.is_empty() && stats.outcomes.get("ok").is_some_and(|&n| n > 0),
        "the stat loop across the supervisor's death: {:?} {:?}",
        stats.outcomes,
        stats.errors
    );

    // A deliberate stop takes the descriptor out of the store.
    let stopped = daemon.stop().expect("stopped");
    assert!(stopped.success(), "{stopped:?}");
    let (text, _) = receive_notification(&socket);
    assert!(
        text.contains("FDSTOREREMOVE=1") && text.contains("FDNAME=permfs-fuse"),
        "{text:?}"
    );
    drop(stored);
    eventually("unmounted", || !common::is_mounted(&mountpoint));
}

/// Reads notifications until one contains every word of `wanted`; the
/// descriptors that came with it.
fn notification_with(
    socket: &std::os::unix::net::UnixDatagram,
    wanted: &[&str],
) -> (String, Vec<std::os::fd::OwnedFd>) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (text, fds) = receive_notification(socket);
        // SAFETY: the descriptors were just received and are owned here.
        let fds: Vec<std::os::fd::OwnedFd> = fds
            .into_iter()
            .map(|fd| unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
            .collect();
        if wanted.iter().all(|w| text.contains(w)) {
            return (text, fds);
        }
        assert!(Instant::now() < deadline, "no notification with {wanted:?}");
    }
}

/// Under systemd an enforcement view outlives the supervisor too: its
/// connection goes into the store beside the mount's (`permfs-view-KEY`),
/// and the supervisor started again with both serves it on. A program in
/// the `permfs run` sandbox reads, writes and lists in its view and holds
/// a file open throughout, and sees no error; when its session ends the
/// view's connection is taken out of the store.
#[test]
fn under_systemd_a_view_outlives_its_supervisor() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 || !common::bwrap_works() {
        common::skip("needs root and bubblewrap");
        return;
    }
    let (dir, socket) = systemd_dir(r#"{"permission": {"*": "ask"}}"#);
    let socket_path = dir.path().join("notify");
    let first = start_under_systemd(dir.path(), &socket_path, &[]);
    let mut daemon = Daemon {
        child: Some(first),
        mountpoint: dir.path().join("mnt"),
        state_dir: dir.path().join("state"),
        dir,
    };
    let (_, mut fds) = notification_with(&socket, &["FDSTORE=1", "FDNAME=permfs-fuse"]);
    let fuse = fds.pop().expect("the mount's descriptor");
    eventually("the mount serves", || {
        daemon.session("main").join("session.json").exists()
    });
    let work = common::work_dir(&daemon);
    std::fs::write(work.join("a.txt"), "hello\n").expect("a.txt");
    let script = r#"
      exec 3<a.txt
      errors=0; n=0
      while [ ! -e stop ]; do
        n=$((n+1))
        [ "$(cat a.txt)" = hello ] || { errors=$((errors+1)); echo "read failed at $n" >&2; }
        echo $n > out || { errors=$((errors+1)); echo "write failed at $n" >&2; }
        ls >/dev/null || { errors=$((errors+1)); echo "ls failed at $n" >&2; }
      done
      echo loops=$n errors=$errors held=$(cat <&3)
    "#;
    let mut running = common::run_in_background(&daemon, &[], script);
    let (text, mut fds) = notification_with(&socket, &["FDSTORE=1", "FDNAME=permfs-view-"]);
    let name = text
        .lines()
        .find_map(|l| l.strip_prefix("FDNAME="))
        .expect("a name")
        .to_string();
    let view = fds.pop().expect("the view's descriptor");
    std::thread::sleep(Duration::from_millis(300));
    // The view's node log and its definition are the owner's alone.
    assert_state_is_the_owners_alone(&daemon.state_dir, &[".nodes", ".json.views"]);

    kill_supervisor(&mut daemon);
    std::thread::sleep(Duration::from_millis(200));
    daemon.child = Some(start_under_systemd(
        daemon.dir.path(),
        &socket_path,
        &[("permfs-fuse", &fuse), (&name, &view)],
    ));
    notification_with(&socket, &["FDSTORE=1", &format!("FDNAME={name}")]);
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(work.join("stop"), "").expect("stop");
    let (status, out) = running.finish();
    assert!(status.success(), "{out}");
    assert!(out.contains("errors=0"), "no call failed: {out}");
    assert!(out.contains("held=hello"), "the held file reads on: {out}");
    assert!(!out.contains("loops=0 "), "{out}");
    // The session ended with `permfs run`: the view leaves the store.
    notification_with(&socket, &["FDSTOREREMOVE=1", &format!("FDNAME={name}")]);
    let stopped = daemon.stop().expect("stopped");
    assert!(stopped.success(), "{stopped:?}");
    drop((fuse, view));
    eventually("unmounted", || !common::is_mounted(&daemon.mountpoint));
}
