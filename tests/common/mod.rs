//! A real permfs daemon on a temporary mount point, for integration tests.
//! Dropping it stops the daemon and makes sure nothing stays mounted, also
//! when the test failed.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub struct Daemon {
    pub child: Option<Child>,
    pub mountpoint: PathBuf,
    pub dir: tempfile::TempDir,
    /// The daemon's state directory (its audit log).
    pub state_dir: PathBuf,
}

pub fn is_mounted(path: &Path) -> bool {
    let target = path.to_string_lossy().into_owned();
    std::fs::read_to_string("/proc/self/mounts")
        .map(|m| {
            m.lines()
                .any(|l| l.split_whitespace().nth(1) == Some(target.as_str()))
        })
        .unwrap_or(false)
}

impl Daemon {
    /// Starts `permfs mount` with `config` as the global config, in `cwd`
    /// (the root session's cwd; a fresh temp dir when `None`).
    pub fn start(config: &str, cwd: Option<&Path>) -> Self {
        Self::start_full(config, cwd, "main", None, &[], None, &[])
    }

    /// Starts a daemon that logs at `info` into the file `log`.
    pub fn start_with_log(config: &str, log: &Path) -> Self {
        Self::start_full(
            config,
            None,
            "main",
            None,
            &[],
            Some((log, "info,fuser=error")),
            &[],
        )
    }

    /// Starts a daemon that logs into the file `log` what the `PERMFS_LOG`
    /// filter `filter` lets through (`"info,permfs::mount=debug"`, say).
    pub fn start_with_log_filter(config: &str, log: &Path, filter: &str) -> Self {
        Self::start_full(config, None, "main", None, &[], Some((log, filter)), &[])
    }

    /// Starts `permfs mount` with more options (`--threads 1`, …).
    pub fn start_with_args(config: &str, cwd: Option<&Path>, args: &[&str]) -> Self {
        Self::start_full(config, cwd, "main", None, args, None, &[])
    }

    /// Starts a daemon whose config declares its own root session `root`.
    pub fn start_with_root(config: &str, root: &str) -> Self {
        Self::start_full(config, None, root, None, &[], None, &[])
    }

    /// Starts a daemon whose root session's cwd is `cwd` and whose state
    /// is in `state_dir` (which may lie below it).
    pub fn start_in(config: &str, cwd: &Path, state_dir: &Path) -> Self {
        Self::start_full(config, Some(cwd), "main", Some(state_dir), &[], None, &[])
    }

    /// Starts a daemon that keeps its state (the audit log) in `state_dir`.
    pub fn start_with_state_dir(config: &str, state_dir: &Path) -> Self {
        Self::start_full(config, None, "main", Some(state_dir), &[], None, &[])
    }

    /// The daemon's process id: the supervisor (`permfs mount`), whose
    /// death ends the mount.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).unwrap_or(0)
    }

    /// `permfs status --json` of this mount.
    pub fn status(&self) -> serde_json::Value {
        let output = Command::new(env!("CARGO_BIN_EXE_permfs"))
            .args(["status", "--json", "--mount"])
            .arg(&self.mountpoint)
            .arg("--state-dir")
            .arg(&self.state_dir)
            .output()
            .expect("permfs status runs");
        assert!(output.status.success(), "permfs status: {output:?}");
        serde_json::from_slice(&output.stdout).expect("status is JSON")
    }

    /// The process that serves the mount now (the supervisor's child):
    /// the one whose memory, stop or death a test means by "the daemon's"
    /// when the mount is to survive it.
    pub fn server_pid(&self) -> u32 {
        self.status()["server"]["pid"]
            .as_u64()
            .and_then(|p| u32::try_from(p).ok())
            .expect("a server pid")
    }

    /// SIGKILLs the server and waits until another serves; its pid.
    pub fn kill_server(&self) -> u32 {
        let old = self.server_pid();
        // SAFETY: signalling the server of the daemon this test started.
        unsafe { libc::kill(old as i32, libc::SIGKILL) };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let status = self.status();
            if let Some(new) = status["server"]["pid"].as_u64() {
                if new != u64::from(old) {
                    return new as u32;
                }
            }
            assert!(Instant::now() < deadline, "no new server: {status}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// `permfs mount` with `env` added to its environment (and so its
    /// servers').
    pub fn start_with_env(config: &str, env: &[(&str, &str)]) -> Self {
        Self::start_full(config, None, "main", None, &[], None, env)
    }

    /// `permfs mount --upgrade`: a server of the binary on disk replaces
    /// the one that serves; asserts it did.
    pub fn upgrade(&self) {
        let upgrade = Command::new(env!("CARGO_BIN_EXE_permfs"))
            .args(["mount", "--upgrade"])
            .arg(&self.mountpoint)
            .arg("--state-dir")
            .arg(&self.state_dir)
            .output()
            .expect("permfs mount --upgrade runs");
        assert!(upgrade.status.success(), "{upgrade:?}");
    }

    fn start_full(
        config: &str,
        cwd: Option<&Path>,
        root: &str,
        state: Option<&Path>,
        args: &[&str],
        log: Option<(&Path, &str)>,
        env: &[(&str, &str)],
    ) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let state_dir = state
            .map(Path::to_path_buf)
            .unwrap_or_else(|| dir.path().join("state"));
        let mountpoint = dir.path().join("mnt");
        std::fs::create_dir(&mountpoint).expect("mount point");
        let config_path = dir.path().join("config.json");
        std::fs::write(&config_path, config).expect("config written");
        let work = dir.path().join("work");
        std::fs::create_dir(&work).expect("work dir");
        let child = Command::new(env!("CARGO_BIN_EXE_permfs"))
            .arg("mount")
            .arg(&mountpoint)
            .arg("--config")
            .arg(&config_path)
            .arg("--state-dir")
            .arg(&state_dir)
            .args(args)
            .envs(env.iter().copied())
            .current_dir(cwd.unwrap_or(&work))
            .env(
                "PERMFS_LOG",
                log.map_or("warn,fuser=error", |(_, filter)| filter),
            )
            .stdin(Stdio::null())
            .stderr(match log {
                Some((path, _)) => Stdio::from(std::fs::File::create(path).expect("log file")),
                None => Stdio::inherit(),
            })
            .spawn()
            .expect("permfs starts");
        let daemon = Self {
            child: Some(child),
            mountpoint,
            dir,
            state_dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !daemon.session(root).join("session.json").exists() {
            assert!(Instant::now() < deadline, "the mount did not come up");
            std::thread::sleep(Duration::from_millis(20));
        }
        daemon
    }

    /// Starts `permfs mount` with every path chosen by the caller, all
    /// inside `dir` (kept by the daemon and removed with it): the global
    /// config (written with `config`) at `config_path`, the state dir, the
    /// mount point (made here), the root session's cwd, and `env` added
    /// to the daemon's environment. For layouts where the cwd or `$HOME`
    /// holds the state dir, the mount or the config.
    pub fn start_laid_out(
        config: &str,
        dir: tempfile::TempDir,
        config_path: &Path,
        state_dir: &Path,
        mountpoint: &Path,
        cwd: &Path,
        env: &[(&str, &str)],
    ) -> Self {
        std::fs::create_dir_all(mountpoint).expect("mount point");
        if let Some(parent) = config_path.parent() {
            std::fs::create_dir_all(parent).expect("config dir");
        }
        std::fs::write(config_path, config).expect("config written");
        std::fs::create_dir_all(cwd).expect("cwd");
        let child = Command::new(env!("CARGO_BIN_EXE_permfs"))
            .arg("mount")
            .arg(mountpoint)
            .arg("--config")
            .arg(config_path)
            .arg("--state-dir")
            .arg(state_dir)
            .envs(env.iter().copied())
            .current_dir(cwd)
            .env("PERMFS_LOG", "warn,fuser=error")
            .stdin(Stdio::null())
            .spawn()
            .expect("permfs starts");
        let daemon = Self {
            child: Some(child),
            mountpoint: mountpoint.to_path_buf(),
            dir,
            state_dir: state_dir.to_path_buf(),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !daemon.session("main").join("session.json").exists() {
            assert!(Instant::now() < deadline, "the mount did not come up");
            std::thread::sleep(Duration::from_millis(20));
        }
        daemon
    }

    /// The daemon's audit log file (in its state directory).
    pub fn audit_file(&self) -> PathBuf {
        self.state_dir.join("audit.log")
    }

    /// A session directory by id (`main`, `main/worker`, …).
    pub fn session(&self, id: &str) -> PathBuf {
        permfs::cli::mount_client::MountClient::new(self.mountpoint.clone()).dir(id)
    }

    /// Writes a request and returns the response path.
    pub fn ask(&self, session: &str, rid: &str, request: &str) -> PathBuf {
        let outbox = self.session(session).join("outbox");
        std::fs::write(outbox.join(format!("{rid}.request")), request).expect("request written");
        outbox.join(format!("{rid}.response"))
    }

    pub fn response(&self, path: &Path) -> serde_json::Value {
        let text = std::fs::read_to_string(path).expect("response read");
        serde_json::from_str(&text).expect("response is JSON")
    }

    pub fn inbox(&self, session: &str) -> Vec<String> {
        self.listing(session, "inbox")
    }

    /// The names in a session's child sessions, sorted.
    pub fn children(&self, session: &str) -> Vec<String> {
        self.listing(session, "children")
    }

    /// The names in one of a session's directories (`inbox`, `outbox`,
    /// `children`, …), sorted.
    pub fn listing(&self, session: &str, dir: &str) -> Vec<String> {
        listing_of(&self.session(session).join(dir))
    }

    /// Every audit line written so far, parsed (unparsable lines skipped).
    pub fn audit_lines(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.audit_file())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn stop(&mut self) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                return child.wait().ok();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
        if is_mounted(&self.mountpoint) {
            let _ = Command::new("umount")
                .arg("-l")
                .arg(&self.mountpoint)
                .status();
        }
        // Enforcement views the daemon could not take down itself (it was
        // killed, say).
        let views = self.state_dir.join("views");
        for entry in std::fs::read_dir(&views).into_iter().flatten().flatten() {
            if is_mounted(&entry.path()) {
                let _ = Command::new("umount").arg("-l").arg(entry.path()).status();
            }
        }
    }
}

/// A directory's names, sorted.
pub fn listing_of(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{} listed: {e}", dir.display()))
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Waits until `f` holds, or panics with `what`.
pub fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The sessions an answer's hops went through, in order.
pub fn hop_sessions(answer: &serde_json::Value) -> Vec<String> {
    answer["hops"]
        .as_array()
        .map(|hops| {
            hops.iter()
                .filter_map(|h| h["session"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// A dry run on one descriptor: write the request, read the verdict.
pub fn dry_run(query: &Path, request: &str) -> serde_json::Value {
    use std::io::{Read, Seek, Write};
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(query)
        .expect("query opened");
    file.write_all(request.as_bytes()).expect("query written");
    file.rewind().expect("rewound");
    let mut text = String::new();
    file.read_to_string(&mut text).expect("query read");
    serde_json::from_str(&text).expect("JSON")
}

/// The python3 to run client scripts with (the system one when present).
pub fn python() -> &'static str {
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

/// Whether `program` runs (`program arg` succeeds); when it does not, says
/// that the test skips and why (`missing`: what is missing, how to get it).
pub fn runs(program: &str, arg: &str, missing: &str) -> bool {
    let found = Command::new(program)
        .arg(arg)
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        skip(missing);
    }
    found
}

/// Whether bwrap can make a sandbox here; prints why not when it cannot.
#[allow(dead_code)] // not every test binary starts a sandbox
pub fn bwrap_works() -> bool {
    let works = Command::new("bwrap")
        .args(["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"])
        .args(["--unshare-pid", "--", "true"])
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !works {
        skip("bubblewrap (bwrap) cannot make a sandbox on this machine (install it: apt-get install bubblewrap)");
    }
    works
}

/// The daemon's work dir (main's cwd, where `permfs run` starts), canonical.
pub fn work_dir(daemon: &Daemon) -> PathBuf {
    daemon
        .dir
        .path()
        .join("work")
        .canonicalize()
        .expect("work dir")
}

thread_local! {
    /// The `--mechanism` this test's `permfs run`s use (`fuse` unless a
    /// test runs by [`kernel`]).
    static MECHANISM: std::cell::Cell<&'static str> = const { std::cell::Cell::new("fuse") };
}

/// The mechanism this test's sandboxes judge by.
pub fn mechanism() -> &'static str {
    MECHANISM.with(|m| m.get())
}

/// Runs test `body` with every `permfs run` by `--mechanism kernel` (the
/// same suite, the other mechanism). Skipped where the kernel mechanism
/// cannot run (not root: the daemon needs fanotify permission events).
pub fn kernel(body: fn()) {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        skip("the kernel mechanism needs a root daemon");
        return;
    }
    set_mechanism("kernel");
    body();
}

/// Sets the `--mechanism` of this test's `permfs run`s.
pub fn set_mechanism(mechanism: &'static str) {
    MECHANISM.with(|m| m.set(mechanism));
}

/// The errors a program meets when a read of a denied file is refused:
/// the FUSE view says `EACCES`; fanotify can only say `EPERM`.
pub fn read_refusals() -> &'static [&'static str] {
    match mechanism() {
        "kernel" => &["EPERM", "EACCES"],
        _ => &["EACCES"],
    }
}

/// `permfs run --mount <the daemon's mount> ARGS`, started in the work dir.
pub fn permfs_run(daemon: &Daemon, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_permfs"));
    command
        .arg("run")
        .arg("--mount")
        .arg(&daemon.mountpoint)
        .args(["--mechanism", mechanism()])
        .args(args)
        .current_dir(work_dir(daemon))
        .env("PERMFS_LOG", "warn")
        .stdin(Stdio::null());
    command
}

/// Runs `script` with `sh` in a `permfs run` sandbox and returns its output.
pub fn run_script(daemon: &Daemon, args: &[&str], script: &str) -> Output {
    permfs_run(daemon, args)
        .args(["--", "sh", "-c", script])
        .output()
        .expect("permfs run runs")
}

/// `script` run with `sh` in a `permfs run` sandbox in the background, its
/// standard output piped (read by [`Running::finish`]).
pub fn run_in_background(daemon: &Daemon, args: &[&str], script: &str) -> Running {
    let child = permfs_run(daemon, args)
        .args(["--", "sh", "-c", script])
        .stdout(Stdio::piped())
        .spawn()
        .expect("permfs run starts");
    Running(child)
}

/// A `permfs run` in the background, killed (and so its sandbox, which
/// dies with it) when the test ends, passed or not.
pub struct Running(pub Child);

impl Running {
    /// Waits for the command and returns its status and standard output
    /// (which must have been piped).
    pub fn finish(&mut self) -> (std::process::ExitStatus, String) {
        use std::io::Read;
        let status = self.0.wait().expect("permfs run exits");
        let mut out = String::new();
        if let Some(mut stdout) = self.0.stdout.take() {
            stdout.read_to_string(&mut out).expect("output");
        }
        (status, out)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Says that the running test skips, and why: a test whose prerequisite
/// (root, bubblewrap, an agent CLI…) is missing returns at once, and
/// libtest would count it as passed. The line goes to
/// `target/tmp/permfs-skipped.txt`, which `scripts/test.sh` reads to say
/// `N passed, N failed, N skipped` with the reasons. With
/// `PERMFS_TESTS_REQUIRE_ALL=1` (`.ci/run`, which installs every
/// prerequisite) a skip fails the test instead: CI never skips silently.
#[allow(dead_code)] // not every test binary can skip
pub fn skip(reason: &str) {
    record_skip("skipped", reason);
}

/// [`skip`] for a part of a test (a check it cannot make here), the rest
/// of which ran.
#[allow(dead_code)]
pub fn skip_part(reason: &str) {
    record_skip("part skipped", reason);
}

fn record_skip(kind: &str, reason: &str) {
    use std::io::Write;
    if std::env::var_os("PERMFS_TESTS_REQUIRE_ALL").is_some_and(|v| v != "0") {
        panic!(
            "{kind}: {reason} (PERMFS_TESTS_REQUIRE_ALL is set: every prerequisite must be here)"
        );
    }
    eprintln!("{kind}: {reason}");
    let test = std::thread::current().name().unwrap_or("?").to_string();
    let binary = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|stem| match stem.rsplit_once('-') {
            Some((name, hash)) if hash.chars().all(|c| c.is_ascii_hexdigit()) => name.to_string(),
            _ => stem,
        })
        .unwrap_or_default();
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("permfs-skipped.txt");
    // One short line in one append: whole even with tests side by side.
    let line = format!(
        "{kind}\t{binary}::{test}\t{}\n",
        reason.replace(['\n', '\t'], " ")
    );
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
    {
        let _ = file.write_all(line.as_bytes());
    }
}
