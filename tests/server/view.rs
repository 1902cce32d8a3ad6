//! The enforcement view from inside `permfs run`: a shell, Python and a
//! small C program (raw `openat`, `openat2`, `O_PATH` reopen, `link`,
//! `rename`, `symlink`, `truncate`, `mmap`, `open_by_handle_at`, `mount`),
//! as root and as another uid; rule deny and allow, an ask answered
//! `allow`, `deny` and `allow session` (a grant answering the next open),
//! a revoke mid-run, a timeout, an interrupted open, and the ways around
//! the view a program might try.
//!
//! They need bubblewrap and root (the daemon must be root to hand the
//! kernel passthrough files, and `permfs run --uid` needs it) and say so
//! and pass vacuously without them.

use crate::common;

use common::{bwrap_works, eventually, run_in_background, run_script, work_dir as work, Daemon};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const CONFIG: &str = r#"{
  "permission": {
    "*": "ask",
    "path": {"*.env": "deny", "*.secret": {"action": "deny", "reason": "secrets stay out of agents"}},
    "path_read": {"*.ask": "ask"},
    "path_write": {"*.lock": "ask"},
    "external_directory": "ask"
  }
}"#;

fn root_and_bwrap() -> bool {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        common::skip("the view tests need root");
        return false;
    }
    bwrap_works()
}

/// A daemon whose main cwd holds `.env`, `notes.secret`, `a.txt`,
/// `x.ask` and the C probe.
fn daemon(config: &str) -> Daemon {
    daemon_with_env(config, &[])
}

/// [`daemon`] with `env` in the daemon's environment.
fn daemon_with_env(config: &str, env: &[(&str, &str)]) -> Daemon {
    let daemon = Daemon::start_with_env(config, env);
    let work = work(&daemon);
    std::fs::write(work.join(".env"), "SECRET=1\n").expect(".env");
    std::fs::write(work.join("notes.secret"), "s\n").expect("secret");
    std::fs::write(work.join("a.txt"), "hello\n").expect("a.txt");
    std::fs::write(work.join("x.ask"), "asked\n").expect("x.ask");
    for path in [daemon.dir.path(), work.as_path()] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).expect("mode");
    }
    for name in [".env", "notes.secret", "a.txt", "x.ask"] {
        std::fs::set_permissions(work.join(name), std::fs::Permissions::from_mode(0o666))
            .expect("mode");
    }
    compile_probe(&work);
    daemon
}

/// The C probe: `probe OP PATH [PATH2]` prints `OP=ok` or `OP=<errno>`.
const PROBE: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/openat2.h>
static int done(const char *op, int rc) {
  if (rc < 0) printf("%s=%s\n", op, strerrorname_np(errno)); else printf("%s=ok\n", op);
  return 0;
}
int main(int argc, char **argv) {
  const char *op = argv[1], *p = argv[2], *q = argc > 3 ? argv[3] : "";
  char buf[64];
  if (!strcmp(op, "openat")) { int fd = openat(AT_FDCWD, p, O_RDONLY); if (fd >= 0 && read(fd, buf, 1) < 0) fd = -1; return done(op, fd); }
  if (!strcmp(op, "openat2")) { struct open_how how = {.flags = O_RDONLY, .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH}; return done(op, syscall(SYS_openat2, AT_FDCWD, p, &how, sizeof how)); }
  if (!strcmp(op, "reopen")) { int fd = open(p, O_PATH); if (fd < 0) return done(op, fd); char proc[64]; snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd); int r = open(proc, O_RDONLY); if (r >= 0 && read(r, buf, 1) < 0) r = -1; return done(op, r); }
  if (!strcmp(op, "write")) { int fd = openat(AT_FDCWD, p, O_WRONLY | O_CREAT | O_TRUNC, 0644); if (fd >= 0 && write(fd, "x", 1) != 1) fd = -1; return done(op, fd); }
  if (!strcmp(op, "link")) return done(op, link(p, q));
  if (!strcmp(op, "rename")) return done(op, rename(p, q));
  if (!strcmp(op, "symlink")) return done(op, symlink(p, q));
  if (!strcmp(op, "truncate")) return done(op, truncate(p, 0));
  if (!strcmp(op, "mmap")) { int fd = open(p, O_RDONLY); if (fd < 0) return done(op, fd); char *m = mmap(0, 4096, PROT_READ, MAP_PRIVATE, fd, 0); if (m == MAP_FAILED) return done(op, -1); printf("mmap=ok:%c\n", m[0]); return 0; }
  if (!strcmp(op, "handle")) { struct file_handle *h = malloc(sizeof *h + 128); h->handle_bytes = 128; int mnt; int rc = syscall(SYS_name_to_handle_at, AT_FDCWD, p, h, &mnt, 0); if (rc < 0) return done(op, rc); return done(op, syscall(SYS_open_by_handle_at, AT_FDCWD, h, O_RDONLY)); }
  if (!strcmp(op, "bind")) return done(op, mount(p, q, NULL, MS_BIND, NULL));
  printf("%s=unknown-op\n", op);
  return 2;
}
"#;

fn compile_probe(work: &Path) {
    let source = work.join("probe.c");
    std::fs::write(&source, PROBE).expect("probe source");
    let status = Command::new("cc")
        .arg("-O1")
        .arg("-o")
        .arg(work.join("probe"))
        .arg(&source)
        .status()
        .expect("cc runs");
    assert!(status.success(), "the C probe compiles");
}

fn field(output: &str, key: &str) -> Option<String> {
    output.lines().find_map(|l| {
        l.strip_prefix(key)
            .and_then(|rest| rest.strip_prefix('='))
            .map(str::to_string)
    })
}

/// What every program in the sandbox meets: each way to the denied file
/// is refused, the allowed ones work.
const BYPASSES: &str = r#"
cd "$PWD"
echo "cat=$(cat .env 2>/dev/null || echo denied)"
echo "cat_secret=$(cat notes.secret 2>/dev/null || echo denied)"
echo "cat_ok=$(cat a.txt)"
python3 - <<'PY'
import os, errno
def t(name, f):
    try:
        f(); print(f"py_{name}=ok")
    except OSError as e:
        print(f"py_{name}={errno.errorcode[e.errno]}")
t("open", lambda: open(".env").read())
t("open_rw", lambda: open("a.txt", "r+").read())
t("proc_root", lambda: open(f"/proc/self/root{os.getcwd()}/.env").read())
t("proc_cwd", lambda: open(f"/proc/{os.getpid()}/cwd/.env").read())
t("write_config", lambda: open(".permfs/config.json", "w").write("{}"))
t("write_claude", lambda: open(".claude/settings.json", "w").write("{}"))
t("rename_into_permfs", lambda: os.rename("a.txt", ".permfs/x"))
t("new_file", lambda: open("made.txt", "w").write("x"))
t("getxattr", lambda: os.getxattr("a.txt", "user.x"))
t("setxattr_env", lambda: os.setxattr(".env", "user.x", b"1"))
PY
./probe openat .env; ./probe openat2 .env; ./probe reopen .env; ./probe openat a.txt
./probe link .env linked; ./probe rename .env moved; ./probe truncate .env
./probe symlink .env via-link; ./probe openat via-link
./probe symlink "$PWD/.." up; ./probe openat "up/$(basename "$PWD")/.env"
./probe mmap a.txt; ./probe handle .env; ./probe bind / "$PWD/made-dir"
./probe write new.lock.txt
echo "root_listing=$(ls / >/dev/null 2>&1 && echo listed || echo refused)"
echo "etc=$(head -c 4 /etc/passwd)"
"#;

fn assert_bypasses_refused(out: &str) {
    let get = |k: &str| field(out, k).unwrap_or_else(|| panic!("{k} in {out}"));
    assert_eq!(get("cat"), "denied");
    assert_eq!(get("cat_secret"), "denied");
    assert_eq!(get("cat_ok"), "hello");
    for key in [
        "py_open",
        "py_proc_root",
        "py_proc_cwd",
        "py_write_config",
        "py_write_claude",
    ] {
        // (EPERM: the kernel mechanism's read refusal.)
        assert!(
            ["EACCES", "EROFS", "EPERM"].contains(&get(key).as_str()),
            "{key}: {out}"
        );
    }
    assert_eq!(get("py_rename_into_permfs"), "EXDEV", "a bind point: {out}");
    assert_eq!(get("py_open_rw"), "ok");
    assert_eq!(get("py_new_file"), "ok");
    // No extended attributes are shown (and no file capabilities carried
    // in); setting one is a write, judged.
    // (The kernel mechanism shows the file's own attributes: none here.)
    assert!(
        ["EOPNOTSUPP", "ENOTSUP"].contains(&get("py_getxattr").as_str())
            || (common::mechanism() == "kernel" && get("py_getxattr") == "ENODATA"),
        "{out}"
    );
    assert_eq!(get("py_setxattr_env"), "EACCES", "{out}");
    let read_refused = common::read_refusals();
    for key in ["openat", "openat2", "reopen"] {
        // The first `openat` line is the denied file's.
        assert!(read_refused.contains(&get(key).as_str()), "{key}: {out}");
    }
    for key in ["link", "rename", "truncate"] {
        assert_eq!(get(key), "EACCES", "{key}: {out}");
    }
    // The symlink is made (a name like any), but reading through it is
    // judged at its target.
    assert_eq!(get("symlink"), "ok", "{out}");
    let opens: Vec<&str> = out.lines().filter(|l| l.starts_with("openat=")).collect();
    let refused = format!("openat={}", read_refused[0]);
    assert_eq!(
        opens,
        [
            refused.as_str(),
            "openat=ok",
            refused.as_str(),
            refused.as_str()
        ],
        "{out}"
    );
    assert!(get("mmap").starts_with("ok:h"), "{out}");
    assert_ne!(get("handle"), "ok", "{out}");
    assert_ne!(get("bind"), "ok", "{out}");
    assert_eq!(
        get("write"),
        "ok",
        "a path rule that does not match writes freely: {out}"
    );
}

#[test]
fn every_way_to_a_denied_file_is_refused_and_the_rest_works() {
    if !root_and_bwrap() {
        return;
    }
    let daemon = daemon(CONFIG);
    let output = run_script(&daemon, &[], BYPASSES);
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_bypasses_refused(&out);
    // Nothing asked, and the real files are untouched.
    assert!(daemon.inbox("main").is_empty());
    let work = work(&daemon);
    assert_eq!(
        std::fs::read_to_string(work.join(".env")).expect(".env"),
        "SECRET=1\n"
    );
    assert!(!work.join("linked").exists() && !work.join("moved").exists());
    // Each deny is in the audit log with the rule, the path and the program.
    let lines = daemon.audit_lines();
    let denied = lines
        .iter()
        .find(|l| {
            l["event"] == "view-denied"
                && l["command"].as_str().is_some_and(|c| c.starts_with("cat"))
        })
        .unwrap_or_else(|| panic!("a view-denied line for cat in {lines:?}"));
    assert!(
        denied["why"].as_str().is_some_and(|w| w.contains("*.env")),
        "{denied}"
    );
    assert!(denied["accesses"][0]["path"]
        .as_str()
        .is_some_and(|p| p.ends_with("/.env")));
    let secret = lines
        .iter()
        .find(|l| {
            l["event"] == "view-denied"
                && l["accesses"][0]["path"]
                    .as_str()
                    .is_some_and(|p| p.ends_with(".secret"))
        })
        .expect("the secret's deny");
    assert!(
        secret["why"]
            .as_str()
            .is_some_and(|w| w.contains("secrets stay out")),
        "{secret}"
    );
}

#[test]
fn another_uid_meets_the_same_view_and_owns_what_it_makes() {
    if !root_and_bwrap() {
        return;
    }
    let daemon = daemon(CONFIG);
    let output = run_script(&daemon, &["--uid", "65534", "--name", "nobody"], BYPASSES);
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_bypasses_refused(&out);
    let made = std::fs::metadata(work(&daemon).join("made.txt")).expect("made inside");
    assert_eq!(
        made.uid(),
        65534,
        "a file made through the view is its maker's"
    );
    // The kernel's own permission check still holds for the uid.
    std::fs::set_permissions(
        work(&daemon).join("a.txt"),
        std::fs::Permissions::from_mode(0o600),
    )
    .expect("mode");
    let output = run_script(
        &daemon,
        &["--uid", "65534", "--name", "nobody2"],
        "cat a.txt 2>&1; echo rc=$?",
    );
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(field(&out, "rc").as_deref(), Some("1"), "{out}");
}

/// Waits for one ask in main's inbox and returns its id and its text.
fn next_ask(daemon: &Daemon) -> (String, String) {
    let mut found = None;
    eventually("an ask in main's inbox", || {
        found = daemon.inbox("main").into_iter().next();
        found.is_some()
    });
    let id = found.expect("an ask");
    let text = std::fs::read_to_string(daemon.session("main").join("inbox").join(&id))
        .expect("inbox entry");
    (id, text)
}

fn answer(daemon: &Daemon, id: &str, text: &str) {
    std::fs::write(daemon.session("main").join("inbox").join(id), text).expect("answered");
}

#[test]
fn an_open_that_asks_waits_for_a_person_and_a_grant_answers_the_next() {
    if !root_and_bwrap() {
        return;
    }
    let daemon = daemon(CONFIG);
    let work = work(&daemon);
    let marker = work.join("step");
    // Each step waits until the test writes its number into `step`.
    let script = r#"
      step() { while [ "$(cat step 2>/dev/null)" != "$1" ]; do sleep 0.05; done; }
      step 1; echo "first=$(cat x.ask 2>/dev/null || echo refused)"
      step 2; echo "second=$(python3 -c 'print(open("x.ask").read().strip())' 2>/dev/null || echo refused)"
      step 3; echo "third=$(cat x.ask 2>/dev/null || echo refused)"
      step 4; echo "granted=$(cat x.ask 2>/dev/null || echo refused)"
      step 5; echo "revoked=$(cat x.ask 2>/dev/null || echo refused)"
      echo done=1
    "#;
    let mut running = run_in_background(&daemon, &[], script);
    let step = |n: u32| std::fs::write(&marker, n.to_string()).expect("step");

    step(1);
    let (id, text) = next_ask(&daemon);
    assert!(text.contains("x.ask") && text.contains("read"), "{text}");
    assert!(text.contains("cat"), "the opening program is named: {text}");
    answer(&daemon, &id, "allow");

    eventually("the first open is answered", || {
        daemon.inbox("main").is_empty()
    });
    step(2);
    let (id, text) = next_ask(&daemon);
    assert!(text.contains("python3"), "{text}");
    answer(&daemon, &id, "deny not this one");

    eventually("the second open is answered", || {
        daemon.inbox("main").is_empty()
    });
    step(3);
    let (id, _) = next_ask(&daemon);
    answer(
        &daemon,
        &id,
        &format!("allow session {}/*.ask", work.display()),
    );

    eventually("the grant is recorded", || {
        daemon.inbox("main").is_empty() && !daemon.listing("main", "grants").is_empty()
    });
    step(4);
    // The grant answers the next open: nothing is asked.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        daemon.inbox("main").is_empty(),
        "a granted open asks nobody"
    );
    let grants = daemon.listing("main", "grants");
    for grant in &grants {
        std::fs::remove_file(daemon.session("main").join("grants").join(grant)).expect("revoked");
    }
    step(5);
    let (id, _) = next_ask(&daemon);
    answer(&daemon, &id, "deny");

    let (status, out) = running.finish();
    assert!(status.success(), "{out}");
    assert_eq!(field(&out, "first").as_deref(), Some("asked"), "{out}");
    assert_eq!(field(&out, "second").as_deref(), Some("refused"), "{out}");
    assert_eq!(field(&out, "third").as_deref(), Some("asked"), "{out}");
    assert_eq!(field(&out, "granted").as_deref(), Some("asked"), "{out}");
    assert_eq!(
        field(&out, "revoked").as_deref(),
        Some("refused"),
        "a revoke holds mid-run: {out}"
    );
}

#[test]
fn an_unanswered_open_times_out_and_an_interrupted_one_is_withdrawn() {
    if !root_and_bwrap() {
        return;
    }
    let config = CONFIG.replace(
        "\"external_directory\": \"ask\"\n  }",
        "\"external_directory\": \"ask\"\n  },\n  \"forwardingTimeoutMs\": 1500",
    );
    let daemon = daemon(&config);
    let started = Instant::now();
    let output = run_script(&daemon, &[], "cat x.ask 2>/dev/null; echo rc=$?");
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(
        field(&out, "rc").as_deref(),
        Some("1"),
        "a timeout refuses: {out}"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(1400),
        "it waited for the timeout"
    );

    let output = run_script(
        &daemon,
        &[],
        "timeout -s INT 0.7 cat x.ask 2>/dev/null; echo rc=$?",
    );
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(field(&out, "rc").as_deref(), Some("124"), "{out}");
    assert!(
        daemon.inbox("main").is_empty(),
        "the interrupted open's ask is withdrawn"
    );
}

#[test]
fn no_view_binds_the_cwd_plainly_and_says_so() {
    if !root_and_bwrap() {
        return;
    }
    let daemon = daemon(CONFIG);
    let output = run_script(&daemon, &["--no-view"], "cat .env");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "SECRET=1\n");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("without judgment"),
        "{output:?}"
    );
}

#[test]
fn a_file_replaced_on_the_host_is_read_afresh() {
    if !root_and_bwrap() {
        return;
    }
    let daemon = daemon(CONFIG);
    let work = work(&daemon);
    let script = r#"
      echo "before=$(cat a.txt)"
      echo go > ready
      while [ ! -e replaced ]; do sleep 0.05; done
      echo "after=$(cat a.txt)"
    "#;
    let mut running = run_in_background(&daemon, &[], script);
    eventually("the sandbox read the file once", || {
        work.join("ready").exists()
    });
    // An editor's save: a new file renamed over the old name.
    std::fs::write(work.join("a.new"), "edited\n").expect("new file");
    std::fs::rename(work.join("a.new"), work.join("a.txt")).expect("renamed over");
    std::fs::write(work.join("replaced"), "").expect("marker");
    let (_, out) = running.finish();
    assert_eq!(field(&out, "before").as_deref(), Some("hello"), "{out}");
    assert_eq!(field(&out, "after").as_deref(), Some("edited"), "{out}");
}

/// `view=` opens files as the daemon, so only the operator outside any
/// sandbox may have a view made: a sandboxed child (root inside, or
/// another uid) asking for a view of `/` is refused, and nothing is
/// mounted.
#[test]
fn a_sandboxed_child_cannot_have_a_view_made() {
    if !root_and_bwrap() {
        return;
    }
    let daemon = daemon(CONFIG);
    for args in [&[][..], &["--uid", "65534", "--name", "nobody"][..]] {
        let output = run_script(
            &daemon,
            args,
            r#"echo "spawn peek view=/ lease" > /permfs/ctl 2>/dev/null; echo "rc=$?""#,
        );
        let out = String::from_utf8_lossy(&output.stdout).into_owned();
        assert_eq!(field(&out, "rc").as_deref(), Some("1"), "{args:?}: {out}");
    }
    // The same spawn without `view=` is one the sandbox may make: the
    // refusal above is the view's.
    let output = run_script(
        &daemon,
        &[],
        r#"echo "spawn peek" > /permfs/ctl; echo "rc=$?""#,
    );
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(field(&out, "rc").as_deref(), Some("0"), "{out}");
    let views = daemon.state_dir.join("views");
    let mounted = std::fs::read_dir(&views)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| common::is_mounted(&e.path()))
        .count();
    assert_eq!(mounted, 0, "no view is left mounted");
}

/// The server dies (SIGKILL) three times and is upgraded once while a
/// program in the sandbox reads, writes, lists, renames and holds a file
/// open in the view, and dies once while an open waits for a person: the
/// view is served again on the same connection each time, the program
/// sees no error (the held file and new opens of it share the backing the
/// dead server registered), the waiting open
/// keeps its one ask (no second one is raised when the kernel re-sends
/// it), and the person's answer reaches it.
#[test]
fn the_view_outlives_its_server_and_a_waiting_open_keeps_its_ask() {
    outlives_its_server(&[]);
}

/// The same where the kernel's passthrough is not used: the file held
/// open is read through the daemon, and the next server opens it again
/// from its node (its open was judged by the server that died).
#[test]
fn without_passthrough_the_view_outlives_its_server_too() {
    outlives_its_server(&[("PERMFS_VIEW_NO_PASSTHROUGH", "1")]);
}

fn outlives_its_server(env: &[(&str, &str)]) {
    if !root_and_bwrap() {
        return;
    }
    let daemon = daemon_with_env(CONFIG, env);
    let work = work(&daemon);
    let marker = work.join("step");
    let script = r#"
      step() { while [ "$(cat step 2>/dev/null)" != "$1" ]; do sleep 0.02; done; }
      exec 3<a.txt
      exec 4>>held.out
      echo before >&4
      mkdir -p d
      errors=0; n=0
      step 1
      while [ "$(cat step 2>/dev/null)" = 1 ]; do
        n=$((n+1))
        [ "$(cat a.txt)" = hello ] || { errors=$((errors+1)); echo "read failed at $n" >&2; }
        ls d >/dev/null || { errors=$((errors+1)); echo "ls failed at $n" >&2; }
        echo $n > d/out.$((n % 5)) || { errors=$((errors+1)); echo "write failed at $n" >&2; }
        [ "$(cat d/out.$((n % 5)))" = $n ] || { errors=$((errors+1)); echo "read back failed at $n" >&2; }
        mv d/out.$((n % 5)) d/moved && mv d/moved d/out.$((n % 5)) || { errors=$((errors+1)); echo "rename failed at $n" >&2; }
        python3 -c 'open("a.txt").read()' || { errors=$((errors+1)); echo "python failed at $n" >&2; }
      done
      echo loops=$n
      echo errors=$errors
      echo held=$(cat <&3)
      echo after >&4 && echo wrote=1
      echo denied=$(cat .env 2>/dev/null || echo refused)
      step 3
      echo "asked=$(cat x.ask 2>/dev/null || echo refused)"
      echo done=1
    "#;
    let mut running = run_in_background(&daemon, &[], script);
    let step = |n: u32| std::fs::write(&marker, n.to_string()).expect("step");
    eventually("the sandbox's view is mounted", || {
        std::fs::read_to_string("/proc/self/mounts").is_ok_and(|m| m.contains("permfs-view"))
    });

    step(1);
    let mut servers = vec![daemon.server_pid()];
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(600));
        servers.push(daemon.kill_server());
    }
    // An upgrade hands the views over the same way.
    std::thread::sleep(Duration::from_millis(600));
    daemon.upgrade();
    servers.push(daemon.server_pid());
    std::thread::sleep(Duration::from_millis(600));
    step(2);

    // An open waiting for a person when the server dies.
    step(3);
    let (id, text) = next_ask(&daemon);
    assert!(text.contains("x.ask"), "{text}");
    // Twice: the open re-sent to the second server is re-sent again to
    // the third, and finds its ask each time: still one, the same.
    for _ in 0..2 {
        servers.push(daemon.kill_server());
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(
            daemon.inbox("main"),
            vec![id.clone()],
            "the ask survives the restart, and only it"
        );
    }
    answer(&daemon, &id, "allow");

    let (status, out) = running.finish();
    assert!(status.success(), "{out}");
    let loops: u32 = field(&out, "loops")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(loops > 3, "the program ran throughout: {out}");
    assert_eq!(
        field(&out, "errors").as_deref(),
        Some("0"),
        "no call failed across {} servers: {out}",
        servers.len()
    );
    assert_eq!(field(&out, "held").as_deref(), Some("hello"), "{out}");
    assert_eq!(field(&out, "wrote").as_deref(), Some("1"), "{out}");
    assert_eq!(
        std::fs::read_to_string(work.join("held.out"))
            .ok()
            .as_deref(),
        Some("before\nafter\n"),
        "a file held open for writing across the restarts"
    );
    assert_eq!(field(&out, "denied").as_deref(), Some("refused"), "{out}");
    assert_eq!(field(&out, "asked").as_deref(), Some("asked"), "{out}");
    let answers = daemon
        .audit_lines()
        .into_iter()
        .filter(|l| l["askId"].as_str() == Some(id.as_str()))
        .count();
    assert_eq!(answers, 1, "the ask is answered once");
    // A new server every time: five kills and an upgrade, seven servers.
    servers.dedup();
    assert_eq!(servers.len(), 7, "{servers:?}");
}

/// A policy of deny rules on paths, for the moves tests: `*/private/*`
/// refuses reads and writes, `*/secret/*` asks.
const MOVES_CONFIG: &str = r#"{
  "permission": {
    "*": "allow",
    "path": {"*/private/*": "deny", "*/secret/*": "ask"},
    "external_directory": "ask"
  }
}"#;

/// `mv private pub` is `cp -r` plus `rm -r`: a directory rename is judged
/// for every name beneath it, at both ends, and so is an exchange.
fn a_directory_rename_is_judged_for_every_name_it_moves(args: &[&str]) {
    let daemon = daemon(MOVES_CONFIG);
    let work = work(&daemon);
    for dir in ["private/deep", "free/sub", "empty"] {
        std::fs::create_dir_all(work.join(dir)).expect("dirs");
    }
    std::fs::write(work.join("private/deep/key.txt"), "KEY\n").expect("key");
    std::fs::write(work.join("free/sub/f.txt"), "free\n").expect("free");
    Command::new("chmod")
        .args(["-R", "a+rwX"])
        .arg(&work)
        .status()
        .expect("chmod");
    let script = r#"
      mv private pub 2>/dev/null; echo mv=$?
      echo "read=$(cat pub/deep/key.txt 2>/dev/null || echo refused)"
      mv private/deep elsewhere 2>/dev/null; echo mv_deep=$?
      mv free moved; echo mv_free=$?
      echo "free=$(cat moved/sub/f.txt)"
      mv moved private/moved 2>/dev/null; echo into=$?
      python3 - <<'PY'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
rc = libc.renameat2(-100, b"empty", -100, b"private", 2)
print("exchange=%s" % ("ok" if rc == 0 else os.strerror(ctypes.get_errno())))
PY
      echo "empty_key=$(cat empty/deep/key.txt 2>/dev/null || echo refused)"
    "#;
    let output = run_script(&daemon, args, script);
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(field(&out, "mv").as_deref(), Some("1"), "{out}");
    assert_eq!(field(&out, "read").as_deref(), Some("refused"), "{out}");
    assert_eq!(field(&out, "mv_deep").as_deref(), Some("1"), "{out}");
    assert_eq!(field(&out, "mv_free").as_deref(), Some("0"), "{out}");
    assert_eq!(field(&out, "free").as_deref(), Some("free"), "{out}");
    assert_eq!(
        field(&out, "into").as_deref(),
        Some("1"),
        "a tree moved under a denied name is written there: {out}"
    );
    assert_eq!(
        field(&out, "exchange").as_deref(),
        Some("Permission denied"),
        "{out}"
    );
    assert_eq!(
        field(&out, "empty_key").as_deref(),
        Some("refused"),
        "{out}"
    );
    // On the host: nothing moved out of `private/`.
    assert_eq!(
        std::fs::read_to_string(work.join("private/deep/key.txt")).expect("still there"),
        "KEY\n"
    );
    assert!(!work.join("pub").exists() && !work.join("elsewhere").exists());
    assert!(work.join("moved/sub/f.txt").exists());
    // The refusal is in the audit log, naming the first denied path and
    // the directory that was renamed.
    let lines = daemon.audit_lines();
    let denied = lines
        .iter()
        .find(|l| {
            l["event"] == "view-denied"
                && l["command"].as_str().is_some_and(|c| c.starts_with("mv"))
        })
        .unwrap_or_else(|| panic!("a view-denied line for mv in {lines:?}"));
    assert!(
        denied["accesses"][0]["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("/private/deep")),
        "{denied}"
    );
    let why = denied["why"].as_str().unwrap_or_default();
    assert!(
        why.contains("renaming") && why.contains("*/private/*"),
        "{why}"
    );
    assert!(
        daemon.inbox("main").is_empty(),
        "nothing asked: {:?}",
        daemon.inbox("main")
    );
}

#[test]
fn a_directory_rename_is_judged_for_every_name_it_moves_as_root() {
    if !root_and_bwrap() {
        return;
    }
    a_directory_rename_is_judged_for_every_name_it_moves(&[]);
}

#[test]
fn a_directory_rename_is_judged_for_every_name_it_moves_as_another_uid() {
    if !root_and_bwrap() {
        return;
    }
    a_directory_rename_is_judged_for_every_name_it_moves(&["--uid", "65534", "--name", "nobody"]);
}

#[test]
fn a_rename_that_moves_asked_names_raises_one_ask_and_waits_for_it() {
    if !root_and_bwrap() {
        return;
    }
    let daemon = daemon(MOVES_CONFIG);
    let work = work(&daemon);
    std::fs::create_dir_all(work.join("secret/sub")).expect("dirs");
    for (i, name) in ["a", "b", "sub/c"].iter().enumerate() {
        std::fs::write(work.join("secret").join(name), format!("S{i}\n")).expect("file");
    }
    let marker = work.join("step");
    let script = r#"
      step() { while [ "$(cat step 2>/dev/null)" != "$1" ]; do sleep 0.05; done; }
      step 1; mv secret kept 2>/dev/null; echo first=$?
      step 2; mv secret out; echo second=$?
      echo "read=$(cat out/sub/c)"
    "#;
    let mut running = run_in_background(&daemon, &[], script);
    let step = |n: u32| std::fs::write(&marker, n.to_string()).expect("step");
    step(1);
    let (id, text) = next_ask(&daemon);
    assert!(
        text.contains("renames") && text.contains("/secret") && text.contains("5 entries"),
        "the ask names the directory and how many entries move: {text}"
    );
    assert!(
        text.contains("read ") && text.contains("/secret/sub/c"),
        "{text}"
    );
    assert_eq!(daemon.inbox("main").len(), 1, "one ask for the whole move");
    answer(&daemon, &id, "deny");
    eventually("the first rename is answered", || {
        daemon.inbox("main").is_empty()
    });
    step(2);
    let (id, _) = next_ask(&daemon);
    answer(&daemon, &id, "allow");
    let (status, out) = running.finish();
    assert!(status.success(), "{out}");
    assert_eq!(field(&out, "first").as_deref(), Some("1"), "{out}");
    assert_eq!(field(&out, "second").as_deref(), Some("0"), "{out}");
    assert_eq!(field(&out, "read").as_deref(), Some("S2"), "{out}");
    assert!(!work.join("kept").exists() && work.join("out/sub/c").exists());
}

/// The random programs of the moves property: renames (plain, no-replace,
/// exchange), links, symbolic links, mkdir, unlink, rmdir and creates
/// among a few names up to three deep, each followed by an attempt to
/// read every file in the tree. Prints `READ <path> <content>` for each
/// read that succeeded.
const MOVES_PROGRAM: &str = r#"
import ctypes, os, random, sys
seed, steps = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(seed)
os.chdir(sys.argv[3])
libc = ctypes.CDLL(None, use_errno=True)
names = ["private", "pub", "a", "b", "k.key", "k"]
def path():
    return "/".join(rng.choice(names) for _ in range(rng.randint(1, 3)))
def read_all():
    for d, _, files in os.walk("."):
        for f in files:
            p = os.path.join(d, f)[2:]
            try:
                with open(p) as fh:
                    print("READ", p, fh.read().strip())
            except (OSError, UnicodeDecodeError):
                pass
for _ in range(steps):
    op, a, b = rng.choice(["rename", "rename", "noreplace", "exchange", "link", "symlink", "mkdir", "unlink", "rmdir", "create"]), path(), path()
    try:
        if op == "rename": os.rename(a, b)
        elif op in ("noreplace", "exchange"):
            if libc.renameat2(-100, a.encode(), -100, b.encode(), 1 if op == "noreplace" else 2) != 0:
                raise OSError(ctypes.get_errno(), op)
        elif op == "link": os.link(a, b)
        elif op == "symlink": os.symlink(rng.choice([a, os.path.abspath(a)]), b)
        elif op == "mkdir": os.mkdir(a)
        elif op == "unlink": os.unlink(a)
        elif op == "rmdir": os.rmdir(a)
        elif op == "create":
            fd = os.open(a, os.O_CREAT | os.O_WRONLY, 0o644); os.write(fd, b"NEW"); os.close(fd)
        print("OP", op, a, b, "ok")
    except OSError as e:
        print("OP", op, a, b, e.errno)
    read_all()
"#;

/// The reference's wildcard: `*` any run (`/` included), `?` one
/// character, the rest literal, anchored.
fn wildcard(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => (0..=text.len()).any(|i| wildcard(rest, &text[i..])),
        Some((&c, rest)) => {
            text.first().is_some_and(|&t| c == b'?' || c == t) && wildcard(rest, &text[1..])
        }
    }
}

mod moves_property {
    use super::*;
    use common::permfs_run;
    use proptest::prelude::*;

    const PATTERNS: &[&str] = &[
        "*/private/*",
        "*/private",
        "*.key",
        "*/a/*",
        "*/b/k",
        "*/pub/*",
    ];
    const SURFACES: &[&str] = &["path", "path_read", "path_write"];
    /// Where the files start, each holding `T<index>`.
    const FILES: &[&str] = &[
        "private/k",
        "private/a/k.key",
        "pub/k",
        "a/b/k",
        "k.key",
        "k",
        "b/k",
    ];

    /// Is `path` refused for `access` (`path_read`/`path_write`) by the deny rules?
    fn refused(rules: &[(usize, usize)], path: &str, access: &str) -> bool {
        rules.iter().any(|&(p, s)| {
            (SURFACES[s] == "path" || SURFACES[s] == access)
                && wildcard(PATTERNS[p].as_bytes(), path.as_bytes())
        })
    }

    fn one_case(rules: &[(usize, usize)], seed: u64) -> Result<(), TestCaseError> {
        let mut by_surface: std::collections::BTreeMap<
            &str,
            serde_json::Map<String, serde_json::Value>,
        > = Default::default();
        for &(p, s) in rules {
            by_surface
                .entry(SURFACES[s])
                .or_default()
                .insert(PATTERNS[p].into(), "deny".into());
        }
        let mut permission = serde_json::json!({"*": "allow", "external_directory": "ask"});
        for (surface, map) in by_surface {
            permission[surface] = serde_json::Value::Object(map);
        }
        let config = serde_json::json!({ "permission": permission }).to_string();
        let daemon = Daemon::start_with_env(&config, &[]);
        let work = work(&daemon);
        let tree = work.join("t");
        for (i, file) in FILES.iter().enumerate() {
            let at = tree.join(file);
            std::fs::create_dir_all(at.parent().expect("parent")).expect("dirs");
            std::fs::write(&at, format!("T{i}")).expect("file");
        }
        let output = permfs_run(&daemon, &[])
            .args([
                "--",
                "python3",
                "-c",
                MOVES_PROGRAM,
                &seed.to_string(),
                "40",
            ])
            .arg(&tree)
            .output()
            .expect("permfs run");
        let out = String::from_utf8_lossy(&output.stdout).into_owned();
        prop_assert!(
            out.contains("OP "),
            "the program ran: {out} {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let origin = |token: &str| -> Option<String> {
            let i: usize = token.strip_prefix('T')?.parse().ok()?;
            Some(format!("{}/{}", tree.display(), FILES.get(i)?))
        };
        // No byte of a file whose first name refuses reads is read, at any name.
        for line in out.lines().filter_map(|l| l.strip_prefix("READ ")) {
            let Some((_, token)) = line.rsplit_once(' ') else {
                continue;
            };
            if let Some(first) = origin(token) {
                prop_assert!(
                    !refused(rules, &first, "path_read"),
                    "read {token} (from {first}) as {line}: rules {rules:?}, seed {seed}\n{out}"
                );
            }
        }
        // Every file away from its first name got there by writes the
        // policy allows, from a first name whose reads it allows.
        let mut stack = vec![tree.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).expect("listed").flatten() {
                let kind = entry.file_type().expect("type");
                let at = entry.path();
                if kind.is_dir() {
                    stack.push(at);
                    continue;
                }
                if !kind.is_file() {
                    continue;
                }
                let here = at.display().to_string();
                let content = std::fs::read_to_string(&at).unwrap_or_default();
                let first = origin(content.trim());
                if first.as_deref() == Some(here.as_str()) {
                    continue;
                }
                prop_assert!(
                    !refused(rules, &here, "path_write"),
                    "{content:?} reached {here}, where writes are refused: rules {rules:?}, seed {seed}\n{out}"
                );
                if let Some(first) = first {
                    prop_assert!(
                        !refused(rules, &first, "path_read"),
                        "{content:?} left {first}, whose reads are refused, for {here}: rules {rules:?}, seed {seed}\n{out}"
                    );
                }
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: std::env::var("PERMFS_MOVES_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(10),
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// Random deny policies × random sequences of renames, links,
        /// symbolic links, mkdir, unlink and creates from a sandboxed
        /// process (`PERMFS_MOVES_CASES` sets how many).
        #[test]
        fn no_operation_sequence_walks_a_file_around_its_rule(
            rules in proptest::collection::vec((0..PATTERNS.len(), 0..SURFACES.len()), 1..4),
            seed in any::<u64>(),
        ) {
            if root_and_bwrap() {
                one_case(&rules, seed)?;
            }
        }
    }
}

/// The same suite by the kernel mechanism (`permfs run --mechanism
/// kernel`): fanotify judges the reads, seccomp the writes. The restart
/// tests above are the FUSE view's own (its connection and node log);
/// the kernel mechanism's restart is `tests/server/kernel.rs`'s.
mod by_kernel {
    macro_rules! twins {
        ($($name:ident),* $(,)?) => {
            $(
                #[test]
                fn $name() {
                    super::common::kernel(super::$name);
                }
            )*
        };
    }
    twins!(
        every_way_to_a_denied_file_is_refused_and_the_rest_works,
        another_uid_meets_the_same_view_and_owns_what_it_makes,
        an_open_that_asks_waits_for_a_person_and_a_grant_answers_the_next,
        an_unanswered_open_times_out_and_an_interrupted_one_is_withdrawn,
        a_file_replaced_on_the_host_is_read_afresh,
        a_directory_rename_is_judged_for_every_name_it_moves_as_root,
        a_directory_rename_is_judged_for_every_name_it_moves_as_another_uid,
        a_rename_that_moves_asked_names_raises_one_ask_and_waits_for_it,
    );
}
