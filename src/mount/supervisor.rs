//! `permfs mount`: the supervisor that keeps the mount alive across the
//! death, or the replacement, of the process that serves it.
//!
//! The supervisor mounts (with `mount(2)` as root, through `fusermount3`
//! otherwise) and keeps the `/dev/fuse` descriptor for the mount's whole
//! life. It serves nothing itself: it starts `permfs serve`, which
//! inherits the descriptor, and when that server dies (a crash, SIGKILL,
//! the OOM killer) it starts another on the same descriptor. The kernel
//! keeps the connection while any descriptor on it is open, so the mount
//! point never answers `ENOTCONN`: callers see a pause. The new server
//! skips the `INIT` handshake the kernel sends once per connection, and
//! asks the kernel to re-send every request the dead one had read
//! (`FUSE_NOTIFY_RESEND`); inode numbers are a keyed hash of the node
//! with the supervisor's key, so the kernel's cached names stay valid.
//! The enforcement views' connections are held here too, handed over by
//! the server that made them and on to the next (`keeper.rs`).
//!
//! Signals: SIGINT and SIGTERM stop the server (pending asks answered, as
//! before) and unmount; SIGHUP is passed to the server (re-read the global
//! config); SIGUSR2 upgrades: a new server from the binary on disk is
//! started, and once it has read its config the old one is killed and
//! the new one serves. `permfs mount --upgrade DIR` sends it and waits.
//!
//! The supervisor writes what `permfs status` shows into the state dir
//! (`mounts/<hash of the mount point>.json`). `docs/restart.md` says what
//! survives a restart and what does not yet.

use super::nodes::InodeKey;
use super::{clean_dead_mount, default_state_dir, fusermount, is_fuse_mount, MountOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long a server may take from its start to `ready` and from `go` to
/// `serving` before the supervisor gives up on it.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a stopping server may take to answer its asks and exit.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Restart delays for a server that keeps dying at once.
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// A server that served this long before dying is restarted at once; one
/// that died sooner, after [`FIRST_BACKOFF`] (a server that crashes on
/// its first requests must not make the supervisor spin).
const STABLE_AFTER: Duration = Duration::from_secs(1);

/// What the supervisor tells a server at its start.
pub struct Hello {
    /// The key inode numbers are derived with (the same for every server).
    pub key: InodeKey,
    /// Whether a server served this connection before (no `INIT` will
    /// come; requests in flight are to be re-sent).
    pub takeover: bool,
    /// The socket that hands views' descriptors to the supervisor and
    /// back (`keeper.rs`); `None` from a supervisor that keeps no views.
    pub keeper: Option<super::keeper::Keeper>,
}

/// The server's end of the control socket.
pub struct Control {
    reader: BufReader<UnixStream>,
}

impl Control {
    /// The socket inherited as descriptor `fd` (`--control-fd`).
    pub fn from_fd(fd: RawFd) -> std::io::Result<Self> {
        // SAFETY: fcntl on a descriptor number only reads its flags.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: the supervisor passed this descriptor to this process
        // alone, and nothing else here owns it.
        let stream = unsafe { UnixStream::from_raw_fd(fd) };
        Ok(Self {
            reader: BufReader::new(stream),
        })
    }

    fn line(&mut self) -> std::io::Result<String> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the supervisor closed the control socket",
            ));
        }
        Ok(line.trim_end().to_string())
    }

    fn say(&mut self, word: &str) -> std::io::Result<()> {
        self.reader
            .get_mut()
            .write_all(format!("{word}\n").as_bytes())
    }

    /// `hello <64 hex digits of key> <0|1 takeover>`.
    pub fn receive_hello(&mut self) -> std::io::Result<Hello> {
        let line = self.line()?;
        let invalid = || std::io::Error::new(std::io::ErrorKind::InvalidData, "bad hello");
        let mut words = line.split(' ');
        if words.next() != Some("hello") {
            return Err(invalid());
        }
        let key = words
            .next()
            .and_then(|k| hex::decode(k).ok())
            .ok_or_else(invalid)?;
        let key: [u8; 32] = key.try_into().map_err(|_| invalid())?;
        let takeover = match words.next() {
            Some("0") => false,
            Some("1") => true,
            _ => return Err(invalid()),
        };
        let keeper = match words.next() {
            None => None,
            Some(fd) => {
                let fd: RawFd = fd.parse().map_err(|_| invalid())?;
                Some(super::keeper::Keeper::from_fd(fd)?)
            }
        };
        Ok(Hello {
            key: InodeKey(key),
            takeover,
            keeper,
        })
    }

    /// Says `ready` and waits for `go [N]`: N views the supervisor kept
    /// are waiting on the keeper socket (`Keeper::take`).
    pub fn ready_and_wait_for_go(&mut self) -> std::io::Result<usize> {
        self.say("ready")?;
        let line = self.line()?;
        let mut words = line.split(' ');
        match (words.next(), words.next().map(str::parse::<usize>)) {
            (Some("go"), None) => Ok(0),
            (Some("go"), Some(Ok(views))) => Ok(views),
            _ => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("expected go, got {line:?}"),
            )),
        }
    }

    /// Says `serving`.
    pub fn serving(&mut self) -> std::io::Result<()> {
        self.say("serving")
    }
}

/// The device number (`st_dev`) of the FUSE mount at `mountpoint`, from
/// `/proc/self/mountinfo` (a `stat` would be a request to the mount).
pub fn mount_device(mountpoint: &Path) -> std::io::Result<u64> {
    let canonical = std::fs::canonicalize(mountpoint)?;
    let table = std::fs::read_to_string("/proc/self/mountinfo")?;
    let mut found = None;
    for line in table.lines() {
        // id parent major:minor root mountpoint options... - type source
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(dash) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        let (Some(device), Some(target), Some(kind)) =
            (fields.get(2), fields.get(4), fields.get(dash + 1))
        else {
            continue;
        };
        if !kind.starts_with("fuse") || Path::new(&unescape(target)) != canonical {
            continue;
        }
        let numbers = device
            .split_once(':')
            .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)));
        // The last match is the mount on top.
        found = numbers.map(|(major, minor)| libc::makedev(major, minor));
    }
    found.ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no FUSE mount at {}", canonical.display()),
        )
    })
}

/// Undoes the mount table's octal escapes (`\040` for a space).
fn unescape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            if let Some(value) = text
                .get(i + 1..i + 4)
                .and_then(|digits| u8::from_str_radix(digits, 8).ok())
            {
                out.push(value);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where the supervisor of the mount at `mountpoint` (absolute) writes
/// its status, under `state_dir`.
pub fn status_path(state_dir: &Path, mountpoint: &Path) -> PathBuf {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(mountpoint.as_os_str().as_encoded_bytes());
    state_dir
        .join("mounts")
        .join(format!("{}.json", hex::encode(&digest[..8])))
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|c| c.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    }
}

/// One running server.
struct Server {
    child: Child,
    control: BufReader<UnixStream>,
    /// The supervisor's end of the server's keeper socket.
    keeper: OwnedFd,
    /// Start time, for the status file (seconds since the epoch).
    started: u64,
    since: Instant,
}

impl Server {
    /// Waits for the control word `word`; `Err` when the server died, or
    /// said something else, or took too long.
    fn expect(&mut self, word: &str) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        let _ = self
            .control
            .get_ref()
            .set_read_timeout(Some(Duration::from_millis(100)));
        let mut line = String::new();
        loop {
            match self.control.read_line(&mut line) {
                Ok(0) => {
                    let status = self.child.wait().map(|s| s.to_string());
                    return Err(format!(
                        "the server ended before it said {word} ({})",
                        status.unwrap_or_else(|e| e.to_string())
                    ));
                }
                Ok(_) if line.ends_with('\n') => {
                    return if line.trim_end() == word {
                        Ok(())
                    } else {
                        Err(format!("the server said {:?}, not {word}", line.trim_end()))
                    };
                }
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(format!("the control socket failed: {e}")),
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return Err(format!(
                    "the server did not say {word} within {START_TIMEOUT:?}"
                ));
            }
        }
    }

    fn say(&mut self, word: &str) -> Result<(), String> {
        self.control
            .get_mut()
            .write_all(format!("{word}\n").as_bytes())
            .map_err(|e| format!("cannot tell the server {word}: {e}"))
    }

    fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).unwrap_or(0)
    }

    fn signal(&self, signal: i32) {
        // SAFETY: signalling our own child, which is not yet reaped.
        unsafe { libc::kill(self.pid(), signal) };
    }

    /// SIGKILL and reap; the keeper socket, for what it said before.
    fn kill(mut self) -> OwnedFd {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.keeper
    }
}

/// The supervisor's own state.
struct Supervisor {
    options: MountOptions,
    mountpoint: PathBuf,
    state_dir: PathBuf,
    binary: PathBuf,
    fuse: OwnedFd,
    key: InodeKey,
    started: u64,
    restarts: u64,
    upgrades: u64,
    /// Whether a server has answered `INIT` on this connection.
    initialized: bool,
    /// SIGINT and SIGTERM (blocked), to notice a stop while restarting.
    stops: libc::sigset_t,
    /// The enforcement views' connections, held for the next server.
    views: Vec<KeptView>,
    /// The mount's connection is in systemd's store: the views' go there
    /// too.
    systemd: bool,
}

/// A view's connection the supervisor holds (`keeper.rs`).
struct KeptView {
    key: String,
    definition: String,
    mountpoint: Option<PathBuf>,
    fd: OwnedFd,
}

impl KeptView {
    /// A view as its definition says (`None`: one without a key).
    fn new(definition: String, fd: OwnedFd) -> Option<Self> {
        let parsed: serde_json::Value = serde_json::from_str(&definition).unwrap_or_default();
        let Some(key) = parsed["key"].as_str().map(str::to_string) else {
            tracing::warn!(%definition, "a view without a key is not kept");
            return None;
        };
        let mountpoint = parsed["mountpoint"].as_str().map(PathBuf::from);
        Some(Self {
            key,
            definition,
            mountpoint,
            fd,
        })
    }
}

/// Waits up to `wait` for SIGINT or SIGTERM (blocked in `stops`).
fn stop_requested(stops: &libc::sigset_t, wait: Duration) -> Option<i32> {
    let timeout = libc::timespec {
        tv_sec: libc::time_t::try_from(wait.as_secs()).unwrap_or(0),
        tv_nsec: libc::c_long::from(wait.subsec_nanos() as i32),
    };
    // SAFETY: `stops` is a valid set of signals blocked in this thread.
    let signal = unsafe { libc::sigtimedwait(stops, std::ptr::null_mut(), &timeout) };
    (signal > 0).then_some(signal)
}

impl Supervisor {
    /// Starts a server and brings it to `ready`.
    fn spawn(&self) -> Result<Server, String> {
        let (ours, theirs) =
            UnixStream::pair().map_err(|e| format!("cannot make a control socket: {e}"))?;
        let (keeper, their_keeper) =
            super::keeper::pair().map_err(|e| format!("cannot make a keeper socket: {e}"))?;
        let fuse_fd = self.fuse.as_raw_fd();
        let control_fd = theirs.as_raw_fd();
        let keeper_fd = their_keeper.as_raw_fd();
        let mut command = Command::new(&self.binary);
        command
            .arg("serve")
            .arg("--fuse-fd")
            .arg(fuse_fd.to_string())
            .arg("--control-fd")
            .arg(control_fd.to_string())
            .arg("--state-dir")
            .arg(&self.state_dir)
            .arg("--threads")
            .arg(self.options.threads.to_string());
        if let Some(config) = &self.options.config {
            command.arg("--config").arg(absolute(config));
        }
        if let Some(agents) = &self.options.agents_dir {
            command.arg("--agents-dir").arg(absolute(agents));
        }
        if self.options.allow_other {
            command.arg("--allow-other");
        }
        if self.options.audit_sync {
            command.arg("--audit-sync");
        }
        command.arg(&self.mountpoint).stdin(Stdio::null());
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            command.pre_exec(move || {
                // The two descriptors survive exec (both are close-on-exec
                // in the supervisor, so no other child gets them).
                for fd in [fuse_fd, control_fd, keeper_fd] {
                    if libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                // The server dies with its supervisor: the mount ends
                // with the process that owns it, as it always did.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // Signals reach the server through the supervisor (a
                // terminal's Ctrl-C goes to the supervisor's group only).
                libc::setpgid(0, 0);
                let mut none: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut none);
                libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
                Ok(())
            });
        }
        let child = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.binary.display()))?;
        drop(theirs);
        drop(their_keeper);
        let mut server = Server {
            child,
            control: BufReader::new(ours),
            keeper,
            started: unix_now(),
            since: Instant::now(),
        };
        let hello = format!(
            "hello {} {} {keeper_fd}",
            hex::encode(self.key.0),
            u8::from(self.initialized)
        );
        server.say(&hello)?;
        server.expect("ready")?;
        Ok(server)
    }

    /// Tells a ready server to serve, and waits until it does: the views
    /// held are handed to it first (`keep` messages on its keeper socket,
    /// counted in `go N`).
    fn go(&mut self, server: &mut Server) -> Result<(), String> {
        let mut handed = 0;
        for view in &self.views {
            match super::keeper::send_keep(&server.keeper, &view.definition, &view.fd) {
                Ok(()) => handed += 1,
                Err(error) => {
                    return Err(format!(
                        "cannot hand view {} to the server: {error}",
                        view.key
                    ))
                }
            }
        }
        server.say(&format!("go {handed}"))?;
        server.expect("serving")?;
        self.initialized = true;
        Ok(())
    }

    /// Takes what `server` said of its views: connections to keep, views
    /// that ended.
    fn collect_views(&mut self, keeper: &OwnedFd) {
        let mut kept: Vec<String> = Vec::new();
        let mut dropped: Vec<String> = Vec::new();
        for message in super::keeper::drain(keeper) {
            match message {
                super::keeper::Kept::Keep { definition, fd } => {
                    let Some(view) = KeptView::new(definition, fd) else {
                        continue;
                    };
                    tracing::debug!(key = %view.key, "keeping a view's connection");
                    self.views.retain(|v| v.key != view.key);
                    kept.push(view.key.clone());
                    self.views.push(view);
                }
                super::keeper::Kept::Drop { key } => {
                    tracing::debug!(%key, "a view ended: its connection is let go");
                    self.views.retain(|v| v.key != key);
                    kept.retain(|k| *k != key);
                    dropped.push(key);
                }
            }
        }
        if self.systemd && !(kept.is_empty() && dropped.is_empty()) {
            self.store_views(&kept, &dropped);
        }
    }

    /// Under systemd: the definitions of the views held now beside the
    /// status file first, then the connections of `kept` into the store
    /// and those of `dropped` out of it.
    fn store_views(&self, kept: &[String], dropped: &[String]) {
        let path = super::fdstore::views_path(&status_path(&self.state_dir, &self.mountpoint));
        let definitions: Vec<&str> = self.views.iter().map(|v| v.definition.as_str()).collect();
        if let Err(error) = super::fdstore::save_views(&path, &definitions) {
            tracing::warn!(%error, path = %path.display(), "cannot keep the views' definitions: they end with this supervisor");
            return;
        }
        for view in self.views.iter().filter(|v| kept.contains(&v.key)) {
            if let Err(error) = super::fdstore::store_view(&view.key, &view.fd) {
                tracing::warn!(%error, key = %view.key, "a view's connection cannot be put in systemd's store");
            }
        }
        for key in dropped {
            super::fdstore::remove_view(key);
        }
    }

    /// A server that serves, started after `previous` died (or at first).
    fn start(&mut self) -> Result<Server, String> {
        let mut server = self.spawn()?;
        self.go(&mut server)?;
        Ok(server)
    }

    fn write_status(&self, server: Option<&Server>) {
        let status = serde_json::json!({
            "mountpoint": self.mountpoint,
            "stateDir": self.state_dir,
            "supervisor": {
                "pid": std::process::id(),
                "started": self.started,
                "binary": self.binary,
            },
            "server": server.map(|s| serde_json::json!({
                "pid": s.child.id(),
                "started": s.started,
            })),
            "restarts": self.restarts,
            "upgrades": self.upgrades,
        });
        let path = status_path(&self.state_dir, &self.mountpoint);
        let write = || -> std::io::Result<()> {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            // Owner-only like everything else in the state dir: pids, the
            // binary and the mount are nobody else's business.
            super::fdstore::replace_owner_only(&path, &format!("{status}\n"))
        };
        if let Err(error) = write() {
            tracing::warn!(%error, path = %path.display(), "cannot write the status file");
        }
    }

    /// Replaces `old` with a server of the binary on disk. The old one
    /// keeps serving until the new one has read its config; then it is
    /// killed (as a crash would: nothing is cancelled) and the new one
    /// takes over. A new server that fails leaves the old one serving.
    fn upgrade(&mut self, old: Server) -> Result<Server, i32> {
        tracing::info!(binary = %self.binary.display(), "upgrading the server");
        let mut new = match self.spawn() {
            Ok(new) => new,
            Err(error) => {
                tracing::error!(%error, "upgrade failed: the old server keeps serving");
                return Ok(old);
            }
        };
        // Views the old server made until it died are handed over too.
        let old_keeper = old.kill();
        self.collect_views(&old_keeper);
        match self.go(&mut new) {
            Ok(()) => {
                self.upgrades += 1;
                tracing::info!(pid = new.child.id(), "upgraded: the new server serves");
                Ok(new)
            }
            Err(error) => {
                tracing::error!(%error, "the new server failed after the old one stopped; starting another");
                new.kill();
                self.restart_until_serving()
            }
        }
    }

    /// Starts servers until one serves, backing off while they die at
    /// once; `Err(signal)` when SIGINT or SIGTERM came meanwhile.
    fn restart_until_serving(&mut self) -> Result<Server, i32> {
        let mut delay = FIRST_BACKOFF;
        loop {
            self.restarts += 1;
            match self.start() {
                Ok(server) => return Ok(server),
                Err(error) => {
                    tracing::error!(%error, ?delay, "the server did not start; trying again");
                    if let Some(signal) = stop_requested(&self.stops, delay) {
                        return Err(signal);
                    }
                    delay = (delay * 2).min(MAX_BACKOFF);
                }
            }
        }
    }
}

fn supervisor_signals() -> libc::sigset_t {
    let set = super::signal_set(&[
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGUSR2,
        libc::SIGCHLD,
    ]);
    // SAFETY: blocks a valid set in this thread.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    set
}

/// SIGINT and SIGTERM, as a set.
fn stop_signals() -> libc::sigset_t {
    super::signal_set(&[libc::SIGINT, libc::SIGTERM])
}

/// Mounts and returns the `/dev/fuse` descriptor that serves the mount.
fn mount(mountpoint: &Path, owner: u32, allow_other: bool) -> std::io::Result<OwnedFd> {
    fusermount::mount_as(mountpoint, "permfs", &[], owner, owner == 0 || allow_other)
}

/// Unmounts (lazily when something still holds it); the exit code.
fn unmount(mountpoint: &Path, owner: u32) -> i32 {
    if !is_fuse_mount(mountpoint) {
        return 0;
    }
    let result = if owner == 0 {
        nix::mount::umount2(mountpoint, nix::mount::MntFlags::empty()).map_err(std::io::Error::from)
    } else {
        Command::new(std::env::var_os("FUSERMOUNT_PATH").unwrap_or_else(|| "fusermount3".into()))
            .args(["-u", "--"])
            .arg(mountpoint)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .and_then(|s| {
                s.success()
                    .then_some(())
                    .ok_or_else(|| std::io::Error::other(format!("fusermount3 -u: {s}")))
            })
    };
    match result {
        Ok(()) => 0,
        Err(error) => {
            // Something still has a file open or its cwd inside the
            // mount: detach it lazily so no stale mount point is left.
            tracing::warn!(%error, "unmount failed; detaching the mount lazily");
            match fusermount::unmount_lazily(mountpoint) {
                Ok(()) => 0,
                Err(detach) => {
                    eprintln!("permfs mount: unmount failed: {error}; {detach}");
                    1
                }
            }
        }
    }
}

/// `permfs mount`: mounts, supervises servers until SIGINT/SIGTERM (or
/// until the mount is taken away), unmounts; the exit code.
pub fn run(options: MountOptions) -> i32 {
    let mountpoint = absolute(&options.mountpoint);
    // Run by systemd again after this supervisor died: the connection it
    // kept in its store is taken over, not mounted anew.
    if let Some(stored) = super::fdstore::take_stored() {
        let view_keys: Vec<String> = stored.views.iter().map(|(k, _)| k.clone()).collect();
        match resume_stored(&options, &mountpoint, stored) {
            Ok(resumed) => return supervise(resumed),
            Err(reason) => {
                tracing::error!(%reason, "the FUSE descriptor systemd kept cannot be taken over: the mount is made afresh");
                super::fdstore::remove();
                for key in &view_keys {
                    super::fdstore::remove_view(key);
                }
                let _ = nix::mount::umount2(&mountpoint, nix::mount::MntFlags::MNT_DETACH);
            }
        }
    }
    if let Err(message) = clean_dead_mount(&mountpoint) {
        eprintln!("permfs mount: {message}");
        return 2;
    }
    if !mountpoint.is_dir() {
        eprintln!("permfs mount: {} is not a directory", mountpoint.display());
        return 2;
    }
    if is_fuse_mount(&mountpoint) {
        eprintln!(
            "permfs mount: {} is already a FUSE mount point (another permfs running?); unmount it first",
            mountpoint.display()
        );
        return 2;
    }
    let mountpoint = std::fs::canonicalize(&mountpoint).unwrap_or(mountpoint);
    let state_dir = absolute(&options.state_dir.clone().unwrap_or_else(default_state_dir));
    let binary = match std::env::current_exe() {
        Ok(binary) => binary,
        Err(error) => {
            eprintln!("permfs mount: cannot find its own executable: {error}");
            return 2;
        }
    };
    // Blocked before the mount, so a stop during it is seen, not fatal.
    let _ = supervisor_signals();
    // SAFETY: getuid cannot fail.
    let owner = unsafe { libc::getuid() };
    let fuse = match mount(&mountpoint, owner, options.allow_other) {
        Ok(fd) => fd,
        Err(error) => {
            eprintln!(
                "permfs mount: cannot mount at {}: {error}",
                mountpoint.display()
            );
            return 1;
        }
    };
    let stops = stop_signals();
    let supervisor = Supervisor {
        stops,
        options,
        mountpoint: mountpoint.clone(),
        state_dir,
        binary,
        fuse,
        key: InodeKey::random(),
        started: unix_now(),
        restarts: 0,
        upgrades: 0,
        initialized: false,
        views: Vec::new(),
        systemd: false,
    };
    supervise(supervisor)
}

/// A supervisor over the descriptor systemd kept (`fdstore`), with the
/// inode key the previous supervisor kept beside its status file.
fn resume_stored(
    options: &MountOptions,
    mountpoint: &Path,
    stored: super::fdstore::Stored,
) -> Result<Supervisor, String> {
    let super::fdstore::Stored { fuse, views } = stored;
    if !is_fuse_mount(mountpoint) {
        return Err(format!("{} is not mounted", mountpoint.display()));
    }
    let mountpoint = std::fs::canonicalize(mountpoint).unwrap_or(mountpoint.to_path_buf());
    let state_dir = absolute(&options.state_dir.clone().unwrap_or_else(default_state_dir));
    let key_path = super::fdstore::key_path(&status_path(&state_dir, &mountpoint));
    let key = super::fdstore::load_key(&key_path)
        .ok_or_else(|| format!("no inode key at {}", key_path.display()))?;
    let binary =
        std::env::current_exe().map_err(|e| format!("cannot find its own executable: {e}"))?;
    let _ = supervisor_signals();
    tracing::info!(mountpoint = %mountpoint.display(), "taking over the connection systemd kept");
    let status = status_path(&state_dir, &mountpoint);
    let definitions = super::fdstore::load_views(&super::fdstore::views_path(&status));
    let mut kept = Vec::new();
    for (key, fd) in views {
        let definition = definitions
            .iter()
            .find_map(|d| KeptView::new(d.clone(), fd.try_clone().ok()?).filter(|v| v.key == key));
        match definition {
            Some(view) => kept.push(view),
            None => {
                tracing::warn!(%key, "systemd kept a view's connection without its definition: detached");
                let _ = fusermount::unmount_lazily(&state_dir.join("views").join(&key));
                super::fdstore::remove_view(&key);
            }
        }
    }
    Ok(Supervisor {
        stops: stop_signals(),
        options: options.clone(),
        mountpoint,
        state_dir,
        binary,
        fuse,
        key: InodeKey(key),
        started: unix_now(),
        restarts: 0,
        upgrades: 0,
        initialized: true,
        views: kept,
        systemd: false,
    })
}

/// Starts the first server and supervises until a stop; the exit code.
fn supervise(mut supervisor: Supervisor) -> i32 {
    let signals = supervisor_signals();
    let mountpoint = supervisor.mountpoint.clone();
    // SAFETY: getuid cannot fail.
    let owner = unsafe { libc::getuid() };
    // The first server's failure (an invalid config, say) is the
    // command's failure, as it always was.
    let mut server = match supervisor.start() {
        Ok(server) => server,
        Err(error) => {
            tracing::error!(%error, "the first server did not start");
            super::fdstore::remove();
            drop(supervisor.fuse);
            unmount(&mountpoint, owner);
            return 2;
        }
    };
    supervisor.write_status(Some(&server));
    // Under systemd, the connection outlives this process too: its key
    // beside the status file, its descriptor in systemd's store.
    if std::env::var_os("NOTIFY_SOCKET").is_some() {
        let key_path = super::fdstore::key_path(&status_path(&supervisor.state_dir, &mountpoint));
        let stored = super::fdstore::save_key(&key_path, &supervisor.key.0)
            .and_then(|()| super::fdstore::store(&supervisor.fuse));
        match stored {
            Ok(_) => {
                tracing::info!("the FUSE descriptor is in systemd's store");
                supervisor.systemd = true;
                // Views handed over from a previous supervisor.
                let keys: Vec<String> = supervisor.views.iter().map(|v| v.key.clone()).collect();
                if !keys.is_empty() {
                    supervisor.store_views(&keys, &[]);
                }
            }
            Err(error) => {
                tracing::warn!(%error, "the FUSE descriptor cannot be put in systemd's store: the mount ends with this process")
            }
        }
    }
    tracing::info!(mountpoint = %mountpoint.display(), server = server.child.id(), "permfs mounted");
    let tick = libc::timespec {
        tv_sec: 0,
        tv_nsec: 100_000_000,
    };
    let stop_signal = loop {
        // SAFETY: `signals` is blocked in this (single) thread.
        let signal = unsafe { libc::sigtimedwait(&signals, std::ptr::null_mut(), &tick) };
        // Views made or ended since the last tick (a view sent just before
        // the server died is read here too: the message outlives it).
        supervisor.collect_views(&server.keeper);
        match signal {
            libc::SIGINT | libc::SIGTERM => break signal,
            libc::SIGHUP => server.signal(libc::SIGHUP),
            libc::SIGUSR2 => {
                match supervisor.upgrade(server) {
                    Ok(new) => server = new,
                    Err(signal) => return supervisor.stop(None, signal),
                }
                supervisor.write_status(Some(&server));
                continue;
            }
            _ => {}
        }
        let exited = match server.child.try_wait() {
            Ok(Some(status)) => status,
            Ok(None) => continue,
            Err(error) => {
                tracing::error!(%error, "cannot wait for the server");
                continue;
            }
        };
        if exited.code() == Some(super::EXIT_MOUNT_GONE) {
            tracing::warn!("the mount was taken away (unmounted from outside): stopping");
            super::fdstore::remove();
            let _ = std::fs::remove_file(status_path(&supervisor.state_dir, &mountpoint));
            return 0;
        }
        // What it said of its views up to its death.
        supervisor.collect_views(&server.keeper);
        let served_for = server.since.elapsed();
        tracing::error!(%exited, pid = server.child.id(), "the server died; starting another on the same mount");
        if served_for < STABLE_AFTER {
            std::thread::sleep(FIRST_BACKOFF);
        }
        server = match supervisor.restart_until_serving() {
            Ok(server) => server,
            Err(signal) => return supervisor.stop(None, signal),
        };
        supervisor.write_status(Some(&server));
        tracing::info!(
            pid = server.child.id(),
            restarts = supervisor.restarts,
            "a new server serves"
        );
    };
    supervisor.stop(Some(server), stop_signal)
}

impl Supervisor {
    /// Stops `server` (which keeps its pending asks in the journal, or
    /// answers them without one), unmounts; the exit code.
    fn stop(mut self, server: Option<Server>, signal: i32) -> i32 {
        tracing::info!(signal, "stopping: the server, then the mount");
        if let Some(mut server) = server {
            server.signal(libc::SIGTERM);
            let deadline = Instant::now() + STOP_TIMEOUT;
            let keeper = loop {
                match server.child.try_wait() {
                    Ok(Some(_)) | Err(_) => break server.keeper,
                    Ok(None) if Instant::now() > deadline => {
                        tracing::warn!("the server did not stop in time; killing it");
                        break server.kill();
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                }
            };
            // The views it ended as it stopped, and any it made meanwhile.
            self.collect_views(&keeper);
        }
        let status = status_path(&self.state_dir, &self.mountpoint);
        let _ = std::fs::remove_file(super::fdstore::key_path(&status));
        let _ = std::fs::remove_file(&status);
        super::fdstore::remove();
        // Views the server did not end itself (it was killed, or died):
        // detached, their connections let go.
        if self.systemd {
            let _ = std::fs::remove_file(super::fdstore::views_path(&status));
        }
        for view in self.views {
            if self.systemd {
                super::fdstore::remove_view(&view.key);
            }
            if let Some(mountpoint) = &view.mountpoint {
                if let Err(error) = fusermount::unmount_lazily(mountpoint) {
                    tracing::warn!(%error, mountpoint = %mountpoint.display(), "a view could not be detached");
                }
            }
            drop(view.fd);
        }
        drop(self.fuse);
        // SAFETY: getuid cannot fail.
        unmount(&self.mountpoint, unsafe { libc::getuid() })
    }
}

/// `permfs mount --upgrade DIR`: asks the supervisor of the mount at DIR
/// to replace its server with the binary on disk, and waits until the new
/// one serves; the exit code.
pub fn request_upgrade(mountpoint: &Path, state_dir: Option<PathBuf>) -> i32 {
    let state_dir = absolute(&state_dir.unwrap_or_else(default_state_dir));
    let mountpoint = std::fs::canonicalize(mountpoint).unwrap_or_else(|_| absolute(mountpoint));
    let path = status_path(&state_dir, &mountpoint);
    let read = || -> Option<serde_json::Value> {
        serde_json::from_slice(&std::fs::read(&path).ok()?).ok()
    };
    let Some(before) = read() else {
        eprintln!(
            "permfs mount --upgrade: no supervisor of {} recorded in {} (a different --state-dir?)",
            mountpoint.display(),
            path.display()
        );
        return 2;
    };
    let pid = |status: &serde_json::Value, who: &str| status[who]["pid"].as_i64();
    let Some(supervisor) = pid(&before, "supervisor").and_then(|p| i32::try_from(p).ok()) else {
        eprintln!(
            "permfs mount --upgrade: {} names no supervisor",
            path.display()
        );
        return 2;
    };
    let upgrades = before["upgrades"].as_u64().unwrap_or(0);
    // SAFETY: sending a signal to a pid; no memory is involved.
    if unsafe { libc::kill(supervisor, libc::SIGUSR2) } != 0 {
        eprintln!(
            "permfs mount --upgrade: cannot signal supervisor {supervisor}: {}",
            std::io::Error::last_os_error()
        );
        return 1;
    }
    let deadline = Instant::now() + START_TIMEOUT;
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        if let Some(now) = read() {
            if now["upgrades"].as_u64().unwrap_or(0) > upgrades {
                println!(
                    "upgraded: server {} serves (was {})",
                    pid(&now, "server").unwrap_or(0),
                    pid(&before, "server").unwrap_or(0)
                );
                return 0;
            }
        }
    }
    eprintln!("permfs mount --upgrade: the supervisor did not report an upgrade (see its log)");
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mount_tables_escapes_are_undone() {
        assert_eq!(unescape("/tmp/a\\040b"), "/tmp/a b");
        assert_eq!(unescape("/tmp/tab\\011x\\134y"), "/tmp/tab\tx\\y");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(unescape("/odd\\9"), "/odd\\9", "not octal: kept");
    }

    #[test]
    fn a_status_file_is_named_by_the_mount_point() {
        let dir = Path::new("/state");
        let a = status_path(dir, Path::new("/mnt/a"));
        assert_eq!(a, status_path(dir, Path::new("/mnt/a")));
        assert_ne!(a, status_path(dir, Path::new("/mnt/b")));
        assert!(a.starts_with("/state/mounts"));
    }
}
