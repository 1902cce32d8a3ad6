//! The judge reaper: a small intermediary between the daemon and a
//! command judge, so that everything a judge starts dies with its review
//! (issue 23, item 8).
//!
//! A process group alone does not hold a judge's descendants: one that
//! calls `setsid()` (or `setpgid`) leaves the group, and when its parent
//! exits it is reparented to init and lives on. So the daemon does not
//! start a judge itself; it starts `permfs judge-reaper FD -- COMMAND…`,
//! which
//!
//! 1. marks itself a child subreaper (`prctl(PR_SET_CHILD_SUBREAPER)`):
//!    every descendant of the judge that is orphaned, whatever its session
//!    or group, becomes the reaper's child instead of init's;
//! 2. starts the judge in a process group of its own, handing it stdin and
//!    stdout, and keeps no copy of either (so end of file and a closed
//!    input mean what they meant without it);
//! 3. waits until the judge exits, the daemon closes its end of the
//!    *lifeline* pipe `FD` (the review ended: answered, timed out or cut
//!    off; or the daemon died), or a `SIGTERM`/`SIGINT`/`SIGHUP` arrives
//!    (the daemon stops);
//! 4. then kills the judge's group and every child it has, reaps them,
//!    and repeats until it has no child left (a killed process's orphans
//!    are already the reaper's children when it is reaped, so the loop
//!    finds them; new ones are checked for every 2 ms);
//! 5. exits with the judge's status (`128 + signal` when it was killed).
//!
//! Children are found in `/proc` (every process whose parent is the
//! reaper), which needs nothing but procfs.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::Command;
use std::time::Duration;

/// How often the reaper looks for a judge that exited, and for children
/// that appeared, while it cleans up.
const TICK: Duration = Duration::from_millis(2);

/// Runs `command` as a contained judge with `lifeline` as the daemon's
/// pipe (see the module doc); the exit code for the reaper's process.
pub fn run(lifeline: i32, command: &[String]) -> i32 {
    let Some((program, arguments)) = command.split_first() else {
        eprintln!("permfs judge-reaper: no command");
        return 127;
    };
    // SAFETY: plain prctl; it only changes how this process's orphaned
    // descendants are reparented.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        eprintln!(
            "permfs judge-reaper: cannot become a subreaper: {}",
            std::io::Error::last_os_error()
        );
        return 126;
    }
    let signals = match termination_signals() {
        Ok(fd) => fd,
        Err(error) => {
            eprintln!("permfs judge-reaper: cannot watch signals: {error}");
            return 126;
        }
    };
    // The judge inherits neither the lifeline nor the signal descriptor.
    for fd in [lifeline, signals] {
        // SAFETY: fcntl on descriptors this process owns.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    let mut judge = Command::new(program);
    judge.args(arguments).process_group(0);
    // SAFETY: only sigprocmask (async-signal-safe) between fork and exec:
    // the judge starts with the signals unblocked that the reaper blocked.
    unsafe {
        judge.pre_exec(|| {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
                libc::sigaddset(&mut set, signal);
            }
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            Ok(())
        });
    }
    let judge = match judge.spawn() {
        Ok(judge) => judge,
        Err(error) => {
            eprintln!("permfs judge-reaper: cannot start {program:?}: {error}");
            return 127;
        }
    };
    let judge_pid = judge.id() as i32;
    // The judge holds stdin and stdout now; the reaper lets go of its
    // copies, so the daemon sees the judge's end of input and output only.
    hand_over_stdio();
    let mut status = None;
    loop {
        if let Some(exited) = reap(judge_pid, libc::WNOHANG) {
            status = Some(exited);
            break;
        }
        if ended(lifeline, signals) {
            break;
        }
    }
    // SAFETY: the judge's group: its leader is this process's child, not
    // reaped yet (or reaped just now, its orphans now ours and killed
    // below by pid).
    unsafe { libc::killpg(judge_pid, libc::SIGKILL) };
    kill_all_children(judge_pid, &mut status);
    match status {
        Some(status) => status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(libc::SIGKILL)),
        None => 128 + libc::SIGKILL,
    }
}

/// Kills and reaps every child until none is left; the judge's status
/// when it is among them.
fn kill_all_children(judge: i32, status: &mut Option<std::process::ExitStatus>) {
    loop {
        for child in children_of(std::process::id() as i32) {
            // SAFETY: signalling our own child (not reaped: it is listed).
            unsafe { libc::kill(child, libc::SIGKILL) };
        }
        let mut raw = 0;
        // SAFETY: reaping any child of this process.
        let pid = unsafe { libc::waitpid(-1, &mut raw, libc::WNOHANG) };
        if pid > 0 {
            if pid == judge && status.is_none() {
                *status = Some(std::process::ExitStatus::from_raw(raw));
            }
            continue;
        }
        if pid < 0 {
            let error = std::io::Error::last_os_error();
            if error.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            // ECHILD: nothing is left.
            return;
        }
        std::thread::sleep(TICK);
    }
}

/// Reaps `pid` when it exited.
fn reap(pid: i32, flags: i32) -> Option<std::process::ExitStatus> {
    let mut raw = 0;
    // SAFETY: waiting for our own child.
    let done = unsafe { libc::waitpid(pid, &mut raw, flags) };
    (done == pid).then(|| std::process::ExitStatus::from_raw(raw))
}

/// Waits one tick for the lifeline to close or a termination signal;
/// `true` when either came.
fn ended(lifeline: i32, signals: i32) -> bool {
    let mut fds = [
        libc::pollfd {
            fd: lifeline,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: signals,
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    // SAFETY: `fds` is a valid array of two pollfd.
    let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, 10) };
    // The daemon never writes the lifeline: readable means closed.
    ready > 0 && fds.iter().any(|fd| fd.revents != 0)
}

/// Blocks the signals that mean "stop" and returns a signalfd for them.
fn termination_signals() -> std::io::Result<i32> {
    // SAFETY: an empty set filled by sigemptyset/sigaddset, then used to
    // block the signals and to create the descriptor.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, signal);
        }
        if libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let fd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(fd)
    }
}

/// Points stdin and stdout at `/dev/null`.
fn hand_over_stdio() {
    let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    else {
        // SAFETY: closing our own standard descriptors.
        unsafe {
            libc::close(0);
            libc::close(1);
        }
        return;
    };
    use std::os::fd::AsRawFd;
    // SAFETY: dup2 onto our own standard descriptors.
    unsafe {
        libc::dup2(null.as_raw_fd(), 0);
        libc::dup2(null.as_raw_fd(), 1);
    }
}

/// The processes whose parent is `parent`, from `/proc/<pid>/stat`.
pub fn children_of(parent: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    // `pid (comm) state ppid …`; comm may hold anything.
                    let (_, rest) = stat.rsplit_once(')')?;
                    rest.split_whitespace().nth(1)?.parse::<i32>().ok()
                })
                == Some(parent)
        })
        .collect()
}
