//! Command judges are contained, through a real mount: a judge that never
//! reads its input, one that prints without end, and one whose background
//! child holds its stdout each end as `defer` (with a reason) or answer in
//! time; meanwhile other reviews are answered within their own timeout;
//! no judge process is left behind; the daemon's memory stays small.

use crate::common;

use common::{eventually, Daemon};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The judges' timeout (the stuck ones end by it).
const TIMEOUT_MS: u64 = 1500;

/// A judge that answers `deny` ("fast") unless `dir/stuck` exists, in
/// which case it runs `stuck`. Every run appends its pid (= its process
/// group) to `dir/pids`.
fn judge(dir: &Path, stuck: &str, timeout_ms: u64) -> Value {
    let d = dir.display();
    let script = format!(
        "echo $$ >> {d}/pids; if [ -e {d}/stuck ]; then {stuck}; \
         else cat >/dev/null; echo '{{\"verdict\":\"deny\",\"reason\":\"fast\"}}'; fi"
    );
    json!({"command": ["sh", "-c", script], "timeoutMs": timeout_ms})
}

/// A headless root whose only link is `gate`: when the link defers,
/// nobody decides (`no_decider`).
fn start(dir: &Path, stuck: &str) -> Daemon {
    start_with_timeout(dir, stuck, TIMEOUT_MS)
}

fn start_with_timeout(dir: &Path, stuck: &str, timeout_ms: u64) -> Daemon {
    let config = json!({
        "permission": {"bash": "ask"},
        "authorizerChain": ["gate"],
        "judges": {"gate": judge(dir, stuck, timeout_ms)},
        "roots": {"ci": {"interactive": false}},
    });
    Daemon::start_with_root(&config.to_string(), "ci")
}

fn ask(daemon: &Daemon, rid: &str, command: &str, message: &str) -> PathBuf {
    let request = json!({"surface": "bash", "value": command, "message": message});
    daemon.ask("ci", rid, &request.to_string())
}

/// Live (not zombie) processes in process group `group`.
fn live_in_group(group: i32) -> usize {
    std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
                .filter(|stat| {
                    let fields: Vec<&str> = stat
                        .rsplit_once(')')
                        .map(|(_, rest)| rest.split_whitespace().collect())
                        .unwrap_or_default();
                    fields.first() != Some(&"Z")
                        && fields.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(group)
                })
                .count()
        })
        .unwrap_or(0)
}

fn no_judge_left(dir: &Path) {
    let pids = std::fs::read_to_string(dir.join("pids")).unwrap_or_default();
    let groups: Vec<i32> = pids.lines().filter_map(|l| l.trim().parse().ok()).collect();
    assert!(!groups.is_empty(), "the judges ran");
    eventually("every judge's process group is gone", || {
        groups.iter().all(|g| live_in_group(*g) == 0)
    });
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// Several stuck reviews at once (more than the old pool of two
/// workers), then an ordinary one: the ordinary one is answered by the
/// judge well within its own timeout; the stuck ones defer with `reason`.
fn stuck_judges_hold_up_nobody(stuck: &str, message: &str, reason: &str) {
    let dir = tempfile::tempdir().expect("temp");
    let daemon = start(dir.path(), stuck);
    std::fs::write(dir.path().join("stuck"), "").expect("marker");
    let started = Instant::now();
    let stuck_asks: Vec<PathBuf> = (0..4)
        .map(|n| ask(&daemon, &format!("stuck{n}"), "make", message))
        .collect();
    eventually("the stuck judges are running", || {
        std::fs::read_to_string(dir.path().join("pids"))
            .map(|p| p.lines().count() >= 4)
            .unwrap_or(false)
    });
    std::fs::remove_file(dir.path().join("stuck")).expect("marker removed");

    let asked = Instant::now();
    let answer = daemon.response(&ask(&daemon, "ordinary", "make", "hi"));
    let took = asked.elapsed();
    assert_eq!(answer["outcome"], "deny", "{answer}");
    assert_eq!(answer["decidedBy"]["reason"], "fast");
    assert!(
        took < Duration::from_millis(TIMEOUT_MS),
        "the ordinary review waited {took:?} behind the stuck ones"
    );

    for path in &stuck_asks {
        let answer = daemon.response(path);
        assert_eq!(answer["outcome"], "no_decider", "{answer}");
        let hop = answer["hops"]
            .as_array()
            .and_then(|hops| hops.iter().find(|h| h["decidedBy"]["kind"] == "authorizer"))
            .cloned()
            .unwrap_or_default();
        assert_eq!(hop["decidedBy"]["verdict"], "defer", "{answer}");
        let why = hop["decidedBy"]["reason"].as_str().unwrap_or_default();
        assert!(why.contains(reason), "defer reason {why:?}");
    }
    assert!(
        started.elapsed() < Duration::from_millis(TIMEOUT_MS) * 3,
        "the stuck reviews ended by their timeout, not after each other"
    );
    no_judge_left(dir.path());
    let rss = rss_kib(daemon.server_pid());
    eprintln!("daemon VmRSS after the stuck judges: {rss} KiB");
    assert!(rss > 0 && rss < 100 * 1024, "daemon VmRSS {rss} KiB");
}

#[test]
fn a_judge_that_never_reads_its_input_holds_up_no_other_review() {
    // A request near the 64 KiB limit: its review is larger than a pipe
    // holds, so writing it to a judge that never reads would block.
    let message = "m".repeat(60 * 1024);
    stuck_judges_hold_up_nobody("sleep 100 & exec sleep 100", &message, "did not answer");
}

#[test]
fn a_judge_that_prints_without_end_is_cut_off_and_memory_stays_small() {
    stuck_judges_hold_up_nobody("exec yes", "", "printed more than");
}

#[test]
fn a_judge_whose_background_child_holds_stdout_answers_and_leaves_nothing() {
    let dir = tempfile::tempdir().expect("temp");
    let daemon = start(
        dir.path(),
        "cat >/dev/null; sleep 100 & echo '{\"verdict\":\"deny\",\"reason\":\"background\"}'",
    );
    std::fs::write(dir.path().join("stuck"), "").expect("marker");
    let asked = Instant::now();
    let answers: Vec<Value> = (0..3)
        .map(|n| ask(&daemon, &format!("bg{n}"), "make", ""))
        .collect::<Vec<_>>()
        .iter()
        .map(|path| daemon.response(path))
        .collect();
    for answer in &answers {
        assert_eq!(answer["outcome"], "deny", "{answer}");
        assert_eq!(answer["decidedBy"]["reason"], "background");
    }
    assert!(
        asked.elapsed() < Duration::from_millis(TIMEOUT_MS),
        "a background child held the reviews for {:?}",
        asked.elapsed()
    );
    std::fs::remove_file(dir.path().join("stuck")).expect("marker removed");
    let answer = daemon.response(&ask(&daemon, "ordinary", "make", ""));
    assert_eq!(answer["decidedBy"]["reason"], "fast");
    no_judge_left(dir.path());
}

#[test]
fn a_stopping_daemon_leaves_no_judge_behind() {
    let dir = tempfile::tempdir().expect("temp");
    // A timeout far beyond the test: only the daemon's stop can end it.
    let mut daemon = start_with_timeout(dir.path(), "sleep 100 & exec sleep 100", 60_000);
    std::fs::write(dir.path().join("stuck"), "").expect("marker");
    let response = ask(&daemon, "stuck", "make", "");
    eventually("the judge runs", || {
        std::fs::read_to_string(dir.path().join("pids")).is_ok_and(|p| !p.is_empty())
    });
    let stopping = Instant::now();
    let status = daemon.stop().expect("stopped");
    assert!(status.success(), "{status}");
    assert!(stopping.elapsed() < Duration::from_secs(5));
    assert!(!common::is_mounted(&daemon.mountpoint));
    let _ = response;
    no_judge_left(dir.path());
}

/// Whether `pid` is alive (a zombie counts as gone).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next().map(|s| s != "Z"))
        })
        .unwrap_or(false)
}

/// Issue 23, item 8: a judge's child that leaves the judge's process group
/// and session (`setsid`) dies with the review all the same, whether the
/// judge answered (and exited) or was cut off by its timeout.
#[test]
fn a_judges_setsid_child_dies_with_its_review() {
    let dir = tempfile::tempdir().expect("temp");
    let d = dir.path().display();
    let daemon = start(
        dir.path(),
        &format!(
            "cat >/dev/null; setsid sh -c 'echo $$ >> {d}/escaped; exec sleep 100' </dev/null >/dev/null 2>&1 & \
             while [ ! -s {d}/escaped ]; do sleep 0.01; done; \
             if [ -e {d}/hang ]; then exec sleep 100; fi; \
             echo '{{\"verdict\":\"deny\",\"reason\":\"answered\"}}'"
        ),
    );
    std::fs::write(dir.path().join("stuck"), "").expect("marker");
    let answer = daemon.response(&ask(&daemon, "answered", "make", ""));
    assert_eq!(answer["decidedBy"]["reason"], "answered", "{answer}");
    // Once more, with a judge that never answers (its timeout ends it).
    std::fs::write(dir.path().join("hang"), "").expect("marker");
    let answer = daemon.response(&ask(&daemon, "hung", "make", ""));
    assert_eq!(answer["outcome"], "no_decider", "{answer}");
    let escaped: Vec<i32> = std::fs::read_to_string(dir.path().join("escaped"))
        .expect("the judges started their children")
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    assert_eq!(escaped.len(), 2, "{escaped:?}");
    eventually("every setsid child is gone", || {
        escaped.iter().all(|pid| !alive(*pid))
    });
    no_judge_left(dir.path());
}
