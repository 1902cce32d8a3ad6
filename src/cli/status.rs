//! `permfs status`: what runs a mount, for how long, and what it holds.
//!
//! The pids, start times and counts come from the status file the
//! supervisor writes in the state dir (`mount/supervisor.rs`), so they are
//! shown even while no server serves; sessions and pending asks are read
//! from the mount itself, with a time limit (a mount between servers
//! answers after the pause, and `status` must not hang on it).

use crate::mount::default_state_dir;
use crate::mount::supervisor::status_path;
use clap::Args;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long the mount may take to show its sessions and pending asks.
const MOUNT_TIMEOUT: Duration = Duration::from_secs(2);
/// The journal's files (part A of issue 26: SQLite in WAL mode, and the
/// answers log beside it).
const JOURNAL_FILES: [&str; 4] = [
    "journal.sqlite",
    "journal.sqlite-wal",
    "journal.sqlite-shm",
    crate::session::store::answer_log::ANSWER_LOG_FILE,
];

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The mount point (default: the only mount running with this state dir).
    #[arg(long)]
    pub mount: Option<PathBuf>,
    /// The daemon's state dir (default: $XDG_STATE_HOME/permfs).
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// One JSON object: `supervisor.pid`, `server.pid`, …
    #[arg(long)]
    pub json: bool,
}

fn alive(pid: i64) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    i32::try_from(pid).is_ok_and(|pid| pid > 0 && unsafe { libc::kill(pid, 0) } == 0)
}

fn read(path: &Path) -> Option<Value> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// The status files of supervisors still running.
fn running(state_dir: &Path) -> Vec<Value> {
    let Ok(entries) = std::fs::read_dir(state_dir.join("mounts")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .filter_map(|e| read(&e.path()))
        .filter(|s| s["supervisor"]["pid"].as_i64().is_some_and(alive))
        .collect()
}

/// Sessions, pending asks, and each sandbox's mechanism (session id, `kernel`
/// or `fuse`, from its `session.json`).
type Counted = (usize, u64, Vec<(String, String)>);

/// Sessions (every directory under `sessions/`, children included) and
/// pending asks (each root's `pending`: shown, beyond the page, and not
/// shown to this caller); `Ok(None)` when the mount does not answer in
/// time, `Err` when what is there is not a permfs mount (a lookalike
/// directory's counts would be its own inventions).
fn counts(mountpoint: PathBuf) -> Result<Option<Counted>, String> {
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        if let Err(why) = super::mount_client::verify_permfs(&mountpoint, true) {
            let _ = send.send(Err(why));
            return;
        }
        let sessions = mountpoint.join("sessions");
        let roots: Vec<PathBuf> = std::fs::read_dir(&sessions)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        let mut count = 0;
        let mut pending = 0;
        let mut sandboxes = Vec::new();
        let mut stack = roots.clone();
        while let Some(session) = stack.pop() {
            count += 1;
            if let Some(view) = read(&session.join("session.json")) {
                if let (Some(id), Some(mechanism)) =
                    (view["id"].as_str(), view["mechanism"].as_str())
                {
                    sandboxes.push((id.to_string(), mechanism.to_string()));
                }
            }
            if let Ok(children) = std::fs::read_dir(session.join("children")) {
                stack.extend(children.flatten().map(|e| e.path()));
            }
        }
        for root in roots {
            if let Some(page) = read(&root.join("pending")) {
                pending += page["pending"].as_array().map_or(0, |a| a.len() as u64)
                    + page["more"].as_u64().unwrap_or(0)
                    + page["notShown"].as_u64().unwrap_or(0);
            }
        }
        sandboxes.sort();
        let _ = send.send(Ok((count, pending, sandboxes)));
    });
    match receive.recv_timeout(MOUNT_TIMEOUT) {
        Ok(Ok(counted)) => Ok(Some(counted)),
        Ok(Err(why)) => Err(why),
        Err(_) => Ok(None),
    }
}

fn uptime(started: &Value, now: u64) -> Value {
    started
        .as_u64()
        .map_or(Value::Null, |s| json!(now.saturating_sub(s)))
}

pub fn run(args: StatusArgs) -> i32 {
    let state_dir = args.state_dir.unwrap_or_else(default_state_dir);
    if let Some(mount) = &args.mount {
        // Named by path: refused unless it is a real permfs mount, before
        // the state dir's record of it is believed. A mount between
        // servers answers `statfs` only after the pause: the check then
        // waits no longer than the counts do (which check it again).
        let (send, receive) = std::sync::mpsc::channel();
        let named = mount.clone();
        std::thread::spawn(move || {
            let _ = send.send(super::mount_client::verify_permfs(&named, true));
        });
        if let Ok(Err(why)) = receive.recv_timeout(MOUNT_TIMEOUT) {
            eprintln!("permfs status: {why}");
            return 1;
        }
    }
    let status = match &args.mount {
        Some(mount) => {
            let mount = std::fs::canonicalize(mount).unwrap_or_else(|_| mount.clone());
            read(&status_path(&state_dir, &mount))
                .filter(|s| s["supervisor"]["pid"].as_i64().is_some_and(alive))
        }
        None => {
            let mut all = running(&state_dir);
            if all.len() > 1 {
                eprintln!(
                    "permfs status: {} mounts run with the state dir {}; name one with --mount",
                    all.len(),
                    state_dir.display()
                );
                return 2;
            }
            all.pop()
        }
    };
    let Some(status) = status else {
        eprintln!(
            "permfs status: no running permfs mount recorded in {}",
            state_dir.display()
        );
        return 1;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mountpoint = status["mountpoint"].as_str().map(PathBuf::from);
    let counted = match mountpoint.clone().map(counts).transpose() {
        Ok(counted) => counted.flatten(),
        Err(why) => {
            eprintln!("permfs status: the recorded mount: {why}");
            return 1;
        }
    };
    let journal: u64 = JOURNAL_FILES
        .iter()
        .filter_map(|f| std::fs::metadata(state_dir.join(f)).ok())
        .map(|m| m.len())
        .sum();
    let journal_exists = std::fs::metadata(state_dir.join(JOURNAL_FILES[0])).is_ok();
    let server_pid = status["server"]["pid"].as_i64().filter(|p| alive(*p));
    let report = json!({
        "mountpoint": mountpoint,
        "supervisor": {
            "pid": status["supervisor"]["pid"],
            "uptimeSecs": uptime(&status["supervisor"]["started"], now),
            "binary": status["supervisor"]["binary"],
        },
        "server": {
            "pid": server_pid,
            "uptimeSecs": server_pid.map_or(Value::Null, |_| uptime(&status["server"]["started"], now)),
        },
        "restarts": status["restarts"],
        "upgrades": status["upgrades"],
        "sessions": counted.as_ref().map(|(s, _, _)| *s),
        "pendingAsks": counted.as_ref().map(|(_, p, _)| *p),
        "sandboxes": counted.as_ref().map(|(_, _, b)| {
            b.iter()
                .map(|(id, m)| json!({"session": id, "mechanism": m}))
                .collect::<Vec<_>>()
        }),
        "journalBytes": journal_exists.then_some(journal),
    });
    if args.json {
        println!("{report}");
        return 0;
    }
    let show = |v: &Value| match v {
        Value::Null => "-".to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    println!("mount       {}", show(&report["mountpoint"]));
    println!(
        "supervisor  pid {}, up {} s",
        show(&report["supervisor"]["pid"]),
        show(&report["supervisor"]["uptimeSecs"])
    );
    println!(
        "server      pid {}, up {} s",
        show(&report["server"]["pid"]),
        show(&report["server"]["uptimeSecs"])
    );
    println!(
        "restarts    {} (upgrades {})",
        show(&report["restarts"]),
        show(&report["upgrades"])
    );
    println!("sessions    {}", show(&report["sessions"]));
    println!("pending     {}", show(&report["pendingAsks"]));
    // Which mechanism judges each running sandbox's files.
    if let Some(sandboxes) = report["sandboxes"].as_array().filter(|s| !s.is_empty()) {
        let each: Vec<String> = sandboxes
            .iter()
            .map(|b| format!("{} {}", show(&b["session"]), show(&b["mechanism"])))
            .collect();
        println!("sandboxes   {}", each.join(", "));
    }
    println!("journal     {} bytes", show(&report["journalBytes"]));
    0
}
