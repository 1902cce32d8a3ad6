//! The kernel mechanism's own guarantees (`permfs run --mechanism
//! kernel`): what it refuses outright (the ways around a mount mark), when
//! the kernel's remembered allows are dropped (a policy edit, a grant
//! revoked, a rename or a hard link on the host), and that a server killed
//! while an open waits allows nothing. `tests/server/view.rs` runs the view
//! suite by both mechanisms (its `by_kernel` twins).
//!
//! They need root (fanotify's permission events) and bubblewrap, and say
//! so and are counted as skipped without them.

use crate::common;

use common::{eventually, run_in_background, run_script, work_dir as work, Daemon};
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

const CONFIG: &str = r#"{
  "permission": {
    "*": "ask",
    "path": {"*.env": "deny", "*.ask": "ask"},
    "external_directory": "ask"
  }
}"#;

fn kernel_ready() -> bool {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        common::skip("the kernel mechanism needs root");
        return false;
    }
    common::set_mechanism("kernel");
    common::bwrap_works()
}

fn daemon(config: &str) -> Daemon {
    let daemon = match std::env::var_os("PERMFS_TEST_DAEMON_LOG") {
        Some(log) => Daemon::start_with_log(config, std::path::Path::new(&log)),
        None => Daemon::start(config, None),
    };
    let work = work(&daemon);
    std::fs::write(work.join("a.txt"), "hello\n").expect("a.txt");
    std::fs::write(work.join(".env"), "SECRET=1\n").expect(".env");
    std::fs::write(work.join("x.ask"), "asked\n").expect("x.ask");
    for path in [daemon.dir.path(), work.as_path()] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).expect("mode");
    }
    daemon
}

fn field(output: &str, key: &str) -> Option<String> {
    output.lines().find_map(|l| {
        l.strip_prefix(key)
            .and_then(|rest| rest.strip_prefix('='))
            .map(str::to_string)
    })
}

/// Nothing in the sandbox can step off the judged mounts: no new mount or
/// user namespace (a copied mount escapes a mount mark), no mount, no
/// `open_tree`, no `io_uring` (its opens bypass seccomp), no
/// `open_by_handle_at`, no fanotify group of its own; and the seccomp
/// listener was not left for the command to answer its own calls with.
#[test]
fn the_ways_around_the_mount_marks_are_refused() {
    if !kernel_ready() {
        return;
    }
    let daemon = daemon(CONFIG);
    let script = r#"
      unshare -Urm true 2>/dev/null; echo "unshare_user=$?"
      unshare -m true 2>/dev/null; echo "unshare_mount=$?"
      python3 - <<'PY'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def t(name, rc):
    print("%s=%s" % (name, "ok" if rc >= 0 else os.strerror(ctypes.get_errno())))
t("io_uring", libc.syscall(425, 8, ctypes.create_string_buffer(120)))
t("clone3", libc.syscall(435, 0, 0))
t("clone_newns", libc.syscall(56, 0x20000 | 17, 0, 0, 0, 0))
t("open_tree", libc.syscall(428, -100, b"/", 0))
t("mount", libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))
t("handle", libc.syscall(304, -100, 0, 0))
t("fanotify", libc.syscall(300, 0, 0))
t("setns", libc.syscall(308, 0, 0))
# No descriptor of the sandbox is the daemon's listener: an ioctl of
# SECCOMP_IOCTL_NOTIF_RECV on every open descriptor fails.
fds = [int(n) for n in os.listdir("/proc/self/fd")]
buf = ctypes.create_string_buffer(80)
listeners = [fd for fd in fds if libc.ioctl(fd, 0xc0502100, buf) == 0 or ctypes.get_errno() not in (25, 9, 22)]
print("listeners=%d" % len(listeners))
PY
      echo "read=$(cat a.txt)"
    "#;
    let output = run_script(&daemon, &[], script);
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_ne!(field(&out, "unshare_user").as_deref(), Some("0"), "{out}");
    assert_ne!(field(&out, "unshare_mount").as_deref(), Some("0"), "{out}");
    for (key, want) in [
        ("io_uring", "Function not implemented"),
        ("clone3", "Function not implemented"),
        ("clone_newns", "Operation not permitted"),
        ("open_tree", "Operation not permitted"),
        ("mount", "Operation not permitted"),
        ("handle", "Operation not permitted"),
        ("fanotify", "Operation not permitted"),
        ("setns", "Operation not permitted"),
    ] {
        assert_eq!(field(&out, key).as_deref(), Some(want), "{key}: {out}");
    }
    assert_eq!(field(&out, "listeners").as_deref(), Some("0"), "{out}");
    assert_eq!(field(&out, "read").as_deref(), Some("hello"), "{out}");
}

/// A remembered allow is dropped when it could be stale: the rules file
/// edited, a file renamed or hard-linked on the host. Each is followed by
/// an open that must be judged again (and is refused).
#[test]
fn a_remembered_allow_never_outlives_its_verdict() {
    if !kernel_ready() {
        return;
    }
    let daemon = daemon(CONFIG);
    let work = work(&daemon);
    std::fs::write(work.join("b.txt"), "b\n").expect("b.txt");
    std::fs::write(work.join("c.txt"), "c\n").expect("c.txt");
    std::fs::write(work.join("d.txt"), "d\n").expect("d.txt");
    let step = work.join("step");
    let script = r#"
      wait_for() { while [ "$(cat step 2>/dev/null)" != "$1" ]; do sleep 0.05; done; }
      cat a.txt b.txt c.txt d.txt >/dev/null; cat a.txt b.txt c.txt d.txt >/dev/null; echo warmed > warmed
      wait_for 1; echo "after_rule=$(cat d.txt 2>/dev/null || echo refused)"
      wait_for 2; echo "renamed=$(cat b.env 2>/dev/null || echo refused)"
      wait_for 3; echo "linked=$(cat c.env 2>/dev/null || echo refused)"
      echo "still=$(cat a.txt)"
    "#;
    let mut running = run_in_background(&daemon, &[], script);
    eventually("the sandbox read its files twice", || {
        work.join("warmed").exists()
    });
    // 1. The project's rules now deny d.txt (the loader sees the edit
    //    within its quarter second; the allow the kernel kept is dropped).
    std::fs::create_dir_all(work.join(".permfs")).expect(".permfs");
    std::fs::write(
        work.join(".permfs/config.json"),
        r#"{"permission": {"path": {"d.txt": "deny"}}}"#,
    )
    .expect("project rules");
    std::thread::sleep(Duration::from_millis(700));
    std::fs::write(&step, "1").expect("step");
    // 2. Renamed on the host to a denied name.
    std::thread::sleep(Duration::from_millis(300));
    std::fs::rename(work.join("b.txt"), work.join("b.env")).expect("rename");
    std::thread::sleep(Duration::from_millis(200));
    std::fs::write(&step, "2").expect("step");
    // 3. Hard-linked on the host under a denied name.
    std::thread::sleep(Duration::from_millis(300));
    std::fs::hard_link(work.join("c.txt"), work.join("c.env")).expect("link");
    std::thread::sleep(Duration::from_millis(200));
    std::fs::write(&step, "3").expect("step");
    let (status, out) = running.finish();
    assert!(status.success(), "{out}");
    assert_eq!(
        field(&out, "after_rule").as_deref(),
        Some("refused"),
        "{out}"
    );
    assert_eq!(field(&out, "renamed").as_deref(), Some("refused"), "{out}");
    assert_eq!(field(&out, "linked").as_deref(), Some("refused"), "{out}");
    assert_eq!(field(&out, "still").as_deref(), Some("hello"), "{out}");
}

/// A write never rides on a read the kernel remembered: after `a.txt` is
/// read (and its allow kept), writing it is still judged as a write.
#[test]
fn a_write_never_rides_on_a_remembered_read() {
    if !kernel_ready() {
        return;
    }
    let daemon = daemon(
        r#"{"permission": {"*": "ask", "path_write": {"a.txt": "deny"}, "external_directory": "ask"}}"#,
    );
    let script = r#"
      cat a.txt >/dev/null; cat a.txt >/dev/null
      echo more >> a.txt 2>/dev/null; echo "append=$?"
      python3 -c 'open("a.txt", "r+")' 2>/dev/null; echo "rw=$?"
      truncate -s 0 a.txt 2>/dev/null; echo "truncate=$?"
      echo "read=$(cat a.txt)"
    "#;
    let output = run_script(&daemon, &[], script);
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_ne!(field(&out, "append").as_deref(), Some("0"), "{out}");
    assert_ne!(field(&out, "rw").as_deref(), Some("0"), "{out}");
    assert_ne!(field(&out, "truncate").as_deref(), Some("0"), "{out}");
    assert_eq!(field(&out, "read").as_deref(), Some("hello"), "{out}");
    assert_eq!(
        std::fs::read_to_string(work(&daemon).join("a.txt")).expect("a.txt"),
        "hello\n"
    );
}

/// The server SIGKILLed twice while an open waits for a person: the open
/// is never allowed by the kernel (the supervisor holds the fanotify group
/// and the seccomp listener, whose closing would allow it), and the
/// sandbox is judged on by the next server: a new open of a denied file is
/// refused, an allowed one works, a write is judged.
#[test]
fn a_server_killed_while_an_open_waits_allows_nothing() {
    if !kernel_ready() {
        return;
    }
    let daemon = daemon(CONFIG);
    let work = work(&daemon);
    let script = r#"
      (cat x.ask > waited.out 2>&1; echo "waited=$?" >> waited.out) &
      while [ ! -e step ]; do sleep 0.05; done
      echo "env=$(cat .env 2>/dev/null || echo refused)"
      echo "a=$(cat a.txt)"
      echo made > made.txt; echo "made=$?"
      echo no > no.env 2>/dev/null; echo "no_env=$?"
    "#;
    let mut running = run_in_background(&daemon, &[], script);
    eventually("the open's ask in main's inbox", || {
        !daemon.inbox("main").is_empty()
    });
    for _ in 0..2 {
        let old = daemon.server_pid();
        daemon.kill_server();
        eventually("a new server", || {
            let now = daemon.server_pid();
            now != 0 && now != old
        });
        // Served again (a read of the mount waits for the new server),
        // the ask restored from the journal.
        eventually("the ask still waits", || !daemon.inbox("main").is_empty());
        std::thread::sleep(Duration::from_millis(300));
        let waited = std::fs::read_to_string(work.join("waited.out")).unwrap_or_default();
        assert!(
            waited.is_empty(),
            "the waiting open was answered by a server's death: {waited:?}"
        );
    }
    std::fs::write(work.join("step"), "go").expect("step");
    // The sandbox's own steps, judged by the third server.
    let started = std::time::Instant::now();
    loop {
        let text = std::fs::read_to_string(work.join("made.txt")).unwrap_or_default();
        if text == "made\n" || started.elapsed() > Duration::from_secs(20) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let waited = std::fs::read_to_string(work.join("waited.out")).unwrap_or_default();
    assert!(
        waited.is_empty(),
        "still waiting, never allowed: {waited:?}"
    );
    // End the waiting open (killable): the sandbox's command exits.
    let _ = std::process::Command::new("pkill")
        .args(["-KILL", "-f", "^cat x.ask$"])
        .status();
    let (_, out) = running.finish();
    assert_eq!(field(&out, "env").as_deref(), Some("refused"), "{out}");
    assert_eq!(field(&out, "a").as_deref(), Some("hello"), "{out}");
    assert_eq!(field(&out, "made").as_deref(), Some("0"), "{out}");
    assert_ne!(field(&out, "no_env").as_deref(), Some("0"), "{out}");
    assert!(!work.join("no.env").exists());
    assert!(
        !std::fs::read_to_string(work.join("waited.out"))
            .unwrap_or_default()
            .contains("asked"),
        "the waiting open never read the file"
    );
}

/// Files made in the sandbox by `--uid` are that uid's, as through the
/// FUSE view, and its own permission checks hold (the daemon's workers act
/// with the sandbox's credentials, not root's).
#[test]
fn another_uids_writes_are_its_own_and_its_limits_hold() {
    if !kernel_ready() {
        return;
    }
    use std::os::unix::fs::MetadataExt;
    let daemon = daemon(CONFIG);
    let work = work(&daemon);
    std::fs::write(work.join("root-only.txt"), "r\n").expect("file");
    std::fs::set_permissions(
        work.join("root-only.txt"),
        std::fs::Permissions::from_mode(0o644),
    )
    .expect("mode");
    let script = r#"
      echo x > mine.txt; echo "mine=$?"
      mkdir -p d/e; echo "mkdir=$?"
      echo y >> root-only.txt 2>/dev/null; echo "other=$?"
      chmod 777 root-only.txt 2>/dev/null; echo "chmod=$?"
      rm -f root-only.txt 2>/dev/null; echo "rm=$?"
    "#;
    let output = run_script(&daemon, &["--uid", "65534", "--name", "nobody"], script);
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(field(&out, "mine").as_deref(), Some("0"), "{out}");
    assert_eq!(field(&out, "mkdir").as_deref(), Some("0"), "{out}");
    assert_eq!(
        std::fs::metadata(work.join("mine.txt"))
            .expect("made")
            .uid(),
        65534
    );
    assert_eq!(
        std::fs::metadata(work.join("d/e")).expect("made").uid(),
        65534
    );
    assert_ne!(field(&out, "other").as_deref(), Some("0"), "{out}");
    assert_ne!(field(&out, "chmod").as_deref(), Some("0"), "{out}");
    // The work dir is 0777: removing a name in it is the directory's to
    // allow (as natively).
    assert_eq!(field(&out, "rm").as_deref(), Some("0"), "{out}");
}

/// The daemon's state dir under the sandbox's root is out of its sight
/// (an empty read-only tmpfs covers it: the kernel mechanism binds the
/// root itself, so nothing like the view's hiding stands in front of it).
#[test]
fn the_state_dir_under_the_root_is_covered() {
    if !kernel_ready() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).expect("work");
    let state = work.join(".state");
    let daemon = Daemon::start_in(CONFIG, &work, &state);
    let script = r#"
      echo "listed=$(ls -A .state 2>/dev/null | wc -l)"
      echo "audit=$(cat .state/audit.log 2>/dev/null | wc -c)"
      touch .state/x 2>/dev/null; echo "write=$?"
    "#;
    let output = common::permfs_run(&daemon, &[])
        .current_dir(&work)
        .args(["--", "sh", "-c", script])
        .output()
        .expect("permfs run");
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(
        field(&out, "listed").as_deref(),
        Some("0"),
        "{out} {output:?}"
    );
    assert_eq!(field(&out, "audit").as_deref(), Some("0"), "{out}");
    assert_ne!(field(&out, "write").as_deref(), Some("0"), "{out}");
    assert!(
        state.join("audit.log").exists(),
        "the daemon's state is there on the host"
    );
}

/// A program's own descriptors by their aliases (`/dev/stderr`,
/// `/dev/fd/N`, `/proc/self/fd/N`) open as they do natively: the daemon,
/// which opens for the sandbox, takes the caller's descriptor rather than
/// its own `/proc/self`; one that names a denied file is still refused.
#[test]
fn a_programs_own_descriptors_open_by_their_aliases() {
    if !kernel_ready() {
        return;
    }
    let daemon = daemon(CONFIG);
    let script = r#"
      echo to-stderr > /dev/stderr 2>/dev/null; echo "stderr=$?"
      exec 3>out3.txt; echo via3 > /dev/fd/3; echo "fd3=$?"; echo "out3=$(cat out3.txt)"
      echo via-proc > /proc/self/fd/3; echo "proc=$?"
      (exec 4<.env) 2>/dev/null; echo "env_fd=$?"
      (echo y > /dev/fd/9) 2>/dev/null; echo "missing=$?"
    "#;
    let output = common::permfs_run(&daemon, &[])
        .args(["--", "sh", "-c", script])
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("permfs run");
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(field(&out, "stderr").as_deref(), Some("0"), "{out}");
    assert_eq!(field(&out, "fd3").as_deref(), Some("0"), "{out}");
    assert_eq!(field(&out, "out3").as_deref(), Some("via3"), "{out}");
    assert_eq!(field(&out, "proc").as_deref(), Some("0"), "{out}");
    assert_ne!(field(&out, "env_fd").as_deref(), Some("0"), "{out}");
    assert_ne!(field(&out, "missing").as_deref(), Some("0"), "{out}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("to-stderr"));
}
