//! `permfs run`: an agent in a sandbox in one command.
//!
//! It spawns a child session through the parent's `ctl` (so the daemon's
//! spawn rule decides what this caller may create), starts the command
//! under bubblewrap with only that session's directory of the mount bound,
//! at `/permfs`, and ends the session when the command exits.
//!
//! The sandbox is bubblewrap's, not ours: writing namespace code would be a
//! second, less reviewed sandbox. What this module decides is only what is
//! bound where ([`sandbox_args`], a pure function the tests read), and the
//! life around it: no child session outlives `permfs run` (it spawns with
//! `lease`, so even a SIGKILL ends the session when the kernel closes its
//! `ctl` handle), and every failure names what was wrong.
//!
//! Why the session directory is enough: the sandbox has its own mount
//! namespace, and the daemon treats a caller from another mount namespace
//! as the session's asker only, never as a decider or the operator, even
//! when it runs as the same uid or as root (`docs/security.md`). So the
//! command can ask, read its answers and spawn children under the spawn
//! rule, but not decide, and it sees nothing above its directory.

use super::hook_event::session_name;
use super::mount_client::MountClient;
use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The exit status of `permfs run`'s own failures (no mount, a refused
/// spawn, no bwrap): 125, as `env`, `timeout` and container runners use,
/// so it is told apart from the command's own statuses.
pub const FAILED: i32 = 125;

/// Where the session directory appears inside the sandbox.
pub const SESSION_PATH: &str = "/permfs";

/// The system directories bound read-only when they exist (a symlink, as
/// `/bin -> usr/bin` on merged-/usr systems, is recreated as a symlink).
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
];

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The permfs mount (default: $PERMFS_MOUNT, else ./mount).
    #[arg(long)]
    pub mount: Option<PathBuf>,
    /// The session to spawn the child under, by id (`main`, `main/team`).
    #[arg(long, default_value = "main")]
    pub parent: String,
    /// The child session's name (default: run-<pid>).
    #[arg(long)]
    pub name: Option<String>,
    /// The child's agent name (its agent rules apply on top of the chain's).
    #[arg(long)]
    pub agent: Option<String>,
    /// The child's cwd, bound read-write at the same absolute path
    /// (default: the current directory).
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// Run the command as this uid (and gid), and bind the session's asker
    /// to it (`asker=N`). Other than your own uid, this needs root.
    #[arg(long)]
    pub uid: Option<u32>,
    /// Spawn an interactive child (its asks wait in its own inbox, decided
    /// from outside the sandbox). Needs the parent's decider or the operator.
    #[arg(long)]
    pub interactive: bool,
    /// Also bind the session's pi forwarding view (`<session>/pi`) at
    /// `<agentDir>/sessions/permission-forwarding` and set
    /// PI_SUBAGENT_PARENT_SESSION, so an unmodified pi child asks permfs.
    #[arg(long)]
    pub pi: bool,
    /// Also serve DIR (outside the cwd, say `$HOME` or a second checkout)
    /// through an enforcement view at its own path (repeatable).
    #[arg(long = "view", value_name = "DIR")]
    pub views: Vec<PathBuf>,
    /// Bind the cwd plainly, without the enforcement view: programs in the
    /// sandbox then read and write the cwd with no judgment (tool calls
    /// asked through the hook are still judged).
    #[arg(long)]
    pub no_view: bool,
    /// How the views judge: `kernel` (the roots bound directly; fanotify
    /// judges reads and the kernel remembers allows, seccomp sends writes
    /// to the daemon; needs a root daemon), `fuse` (a FUSE view over each
    /// root), or `auto`: kernel where the daemon can run it, else fuse,
    /// said at start. docs/kernel-mechanism.md.
    #[arg(long, value_enum, default_value = "auto", env = "PERMFS_MECHANISM")]
    pub mechanism: Mechanism,
    /// The command to run in the sandbox, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// How a sandbox's roots are judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mechanism {
    /// The kernel mechanism where the daemon can run it, else the FUSE
    /// view (said at start).
    Auto,
    /// A FUSE view over each root (every open a round trip).
    Fuse,
    /// fanotify for reads (allows remembered by the kernel) and seccomp
    /// for writes, on the roots bound directly.
    Kernel,
}

/// Everything the sandbox is made of, decided before anything starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    /// The child's session directory on the host (bound at `/permfs`).
    pub session_dir: PathBuf,
    /// The mount point and the daemon's state dir, canonical: never
    /// visible inside. Under a view root the view itself refuses them
    /// (`view/hidden.rs`); under a directory bound from the host (a system
    /// directory, the cwd with `--no-view`, pi's agent dir) an empty
    /// read-only tmpfs covers them, after every bind that holds them.
    pub hidden: Vec<PathBuf>,
    /// The working directory, canonical, bound read-write at its own path.
    pub cwd: PathBuf,
    /// With `--pi`: the pi view and the agent dir it is bound into.
    pub pi: Option<PiBinding>,
    /// The parent session's id (what a pi child names as its target).
    pub parent: String,
    /// `$HOME`, made as an empty directory when nothing bound holds it,
    /// so tools that write caches there work (and lose them at the end).
    pub home: Option<PathBuf>,
    /// Paths under the cwd that govern an agent (permfs's and the agents'
    /// config and agent files, the global config when it lies there):
    /// read-only inside the sandbox, bound from the view's own path.
    pub protected: Vec<Protected>,
    /// Enforcement views: (root, the view's mount point on the host),
    /// each bound at its root's own path. Empty with `--no-view`.
    pub views: Vec<(PathBuf, PathBuf)>,
    /// This `permfs` binary on the host, bound in to apply the Landlock
    /// wall (`permfs wall`) before the command; `None` with `--no-view`.
    pub wall: Option<PathBuf>,
    /// The roots are judged by the kernel mechanism: `views` bind each
    /// root at itself, and the wall hands the daemon its seccomp listener.
    pub kernel: bool,
    pub command: Vec<OsString>,
}

/// The wall's binary as the sandbox's `uid` can reach it: bubblewrap,
/// run as that uid, binds it by its path, so a binary below a directory
/// the uid may not pass (a clone in root's 0700 home, a `mktemp -d`
/// folder) is first copied beside the views, whose directory every
/// sandbox's uid passes (0711), once per build (named by the binary's
/// identity, an earlier build's copy removed).
fn wall_binary(
    exe: PathBuf,
    uid: Option<u32>,
    views: &[(PathBuf, PathBuf)],
    stage: Option<&Path>,
) -> Result<PathBuf, String> {
    let Some(uid) = uid else {
        return Ok(exe);
    };
    let passes = |dir: &Path| {
        std::fs::metadata(dir)
            .is_ok_and(|m| m.mode() & 0o001 != 0 || (m.uid() == uid && m.mode() & 0o100 != 0))
    };
    if exe.ancestors().skip(1).all(passes) {
        return Ok(exe);
    }
    let Some(dir) = stage.or_else(|| views.first().and_then(|(_, view)| view.parent())) else {
        return Ok(exe);
    };
    let meta = std::fs::metadata(&exe)
        .map_err(|e| format!("cannot read the permfs binary {}: {e}", exe.display()))?;
    let name = format!(
        "permfs-wall-{}-{}-{}-{}",
        meta.dev(),
        meta.ino(),
        meta.mtime_nsec() + meta.mtime() * 1_000_000_000,
        meta.len()
    );
    let staged = dir.join(&name);
    if std::fs::metadata(&staged).is_ok_and(|m| m.len() == meta.len()) {
        return Ok(staged);
    }
    let failed = |e: std::io::Error| {
        format!(
            "cannot stage the permfs binary for uid {uid}'s sandbox at {}: {e}",
            staged.display()
        )
    };
    let aside = dir.join(format!("{name}.{}", std::process::id()));
    std::fs::copy("/proc/self/exe", &aside).map_err(failed)?;
    std::fs::set_permissions(&aside, std::fs::Permissions::from_mode(0o755)).map_err(failed)?;
    std::fs::rename(&aside, &staged).map_err(failed)?;
    // Earlier builds' copies: a sandbox still running one keeps its inode.
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let other = entry.file_name();
            let other = other.to_string_lossy();
            // (A name with a `.` is a copy being made by another run.)
            if other.starts_with("permfs-wall-") && !other.contains('.') && *other != *name {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    Ok(staged)
}

/// Where root stages the wall's binary for a kernel-mechanism sandbox of
/// another uid: `/run/permfs-wall`, made 0711 by root, refused when it is
/// not root's or others may write it (a binary planted there would run as
/// the sandbox's wall).
fn kernel_stage_dir() -> Result<PathBuf, String> {
    let dir = PathBuf::from("/run/permfs-wall");
    match std::fs::create_dir(&dir) {
        Ok(()) => {
            let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711));
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot make {}: {e}", dir.display())),
    }
    let meta = std::fs::symlink_metadata(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if !meta.is_dir() || meta.uid() != 0 || meta.mode() & 0o022 != 0 {
        return Err(format!(
            "{} is not a directory only root may write: the wall's binary is not staged there",
            dir.display()
        ));
    }
    Ok(dir)
}

/// Where the `permfs` binary appears inside the sandbox for the wall.
const WALL_PATH: &str = "/run/permfs/permfs";

/// A top-level entry of the cwd the sandbox may not write.
///
/// Its writes are refused by the view already: the built-in guards deny
/// `path_write` on the config, hook and settings files and on every
/// directory leading to them, so `mv .claude x`, `mv config x` and
/// `rm -r .permfs` are judged writes of the entry itself and refused. The
/// entry is still bound read-only, for what the guards do not name: they
/// cover the files permfs and the agents read their rules and hooks from,
/// not everything else in those directories that steers an agent
/// (`.claude/agents/`, `.claude/commands/`, `.claude/hooks/` scripts,
/// the files beside the global config), and a bind mount point cannot be
/// renamed or removed whatever the rules say.
///
/// What is bound is **the view's own path** of the entry (with a view; the
/// host's only with `--no-view`, where there is no view), opened by
/// `permfs run` without following a symlink and handed to bwrap as a
/// descriptor (`--ro-bind-fd`): every read below it is an open in the view,
/// judged like any other path (`*.env: deny` reaches `.claude/local.env`
/// and `config/prod.env`), and no entry swapped for a symlink between the
/// check and the bind can bring a host directory in.
///
/// One that does not exist yet is an empty read-only tmpfs, so it cannot
/// be created writable either (bwrap mounts it on an empty directory that
/// `permfs run` makes and removes afterwards); there is nothing in it to
/// read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protected {
    pub path: PathBuf,
    pub exists: bool,
}

/// The entries of the cwd that permfs or a known agent reads its rules,
/// hooks or settings from.
const GOVERNING_ENTRIES: &[&str] = &[".permfs", ".pi", ".claude", ".codex", ".claude.json"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PiBinding {
    /// `<session dir>/pi` on the host.
    pub view: PathBuf,
    /// `$PI_CODING_AGENT_DIR`, or `~/.pi/agent`.
    pub agent_dir: PathBuf,
    /// The agent dir's entries on the host (bound read-only; `sessions`
    /// excluded, it is where the view goes).
    pub agent_entries: Vec<OsString>,
}

pub fn run(args: RunArgs) -> i32 {
    match start(args) {
        Ok(code) => code,
        Err(message) => {
            tracing::debug!(%message, "permfs run failed");
            eprintln!("permfs run: {message}");
            FAILED
        }
    }
}

/// Checks everything it can before spawning, spawns, runs, ends.
fn start(args: RunArgs) -> Result<i32, String> {
    let bwrap = find_bwrap()?;
    // SAFETY: geteuid cannot fail.
    let euid = unsafe { libc::geteuid() };
    if let Some(uid) = args.uid {
        if euid != 0 && uid != euid {
            return Err(format!(
                "--uid {uid} needs root (you are uid {euid}); run without --uid to run as yourself"
            ));
        }
    }
    let tree = MountClient::from_arg(args.mount.clone());
    tree.check_mount()?;
    let mount = tree
        .mount
        .canonicalize()
        .map_err(|e| format!("the mount {}: {e}", tree.mount.display()))?;
    let tree = MountClient::new(mount);
    let cwd = working_dir(args.cwd.as_deref(), &tree.mount)?;
    let parent = args.parent.trim_matches('/').to_string();
    if !tree.exists(&parent) {
        return Err(format!(
            "the parent session {parent} does not exist at {} (check --parent: a session id such as main or main/team)",
            tree.mount.display()
        ));
    }
    let name = match &args.name {
        Some(name) if session_name(name) == *name => name.clone(),
        Some(name) => {
            return Err(format!(
                "--name {name:?} is not a session name: use letters, digits, '-', '_' and '.' (at most 64)"
            ))
        }
        None => format!("run-{}", std::process::id()),
    };
    let id = format!("{parent}/{name}");
    let pi = if args.pi {
        Some(pi_binding(&tree.dir(&id))?)
    } else {
        None
    };
    let authority = authority_paths(&tree, &parent)?;
    let hidden = hidden_dirs(&tree.mount, &authority.dirs);
    for dir in &hidden {
        if cwd.starts_with(dir) {
            return Err(format!(
                "the working directory {} is inside {}, permfs's own mount or state dir, which no sandbox may see; run from a project directory",
                cwd.display(),
                dir.display()
            ));
        }
    }
    let protected = protected_entries(&cwd, &authority.files, &hidden)?;
    let view_roots = view_roots(&args, &cwd, &hidden)?;
    if args.no_view {
        eprintln!("permfs run: --no-view: the cwd is bound plainly; programs in the sandbox read and write it without judgment");
    }
    let kernel = !view_roots.is_empty()
        && match args.mechanism {
            Mechanism::Fuse => false,
            Mechanism::Kernel => {
                if !daemon_has_kernel(&tree, &parent) {
                    return Err("--mechanism kernel: this permfs daemon cannot run it (it needs a root daemon with fanotify permission events, and a permfs that has it); use --mechanism fuse".into());
                }
                true
            }
            Mechanism::Auto => {
                let has = daemon_has_kernel(&tree, &parent);
                if !has {
                    eprintln!("permfs run: the kernel mechanism is not available from this daemon (it needs root and fanotify permission events): the FUSE view judges this sandbox's files (docs/kernel-mechanism.md)");
                }
                has
            }
        };
    let mut line = spawn_line(&name, &args, &cwd, &view_roots)?;
    if kernel {
        line = line.replace(" lease\n", " kernel lease\n");
    }
    // From here on a signal is noted, never fatal, so the session is
    // always ended; one that came before the command started stops it.
    catch_signals();
    let session = Session::spawn(&tree, &parent, &id, &line)?;
    let views = if kernel {
        view_roots.iter().map(|r| (r.clone(), r.clone())).collect()
    } else {
        session_views(&tree, &id, &view_roots)?
    };
    let sandbox = Sandbox {
        session_dir: tree.dir(&id),
        hidden,
        cwd,
        pi,
        parent,
        home: std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|home| home.is_absolute()),
        protected,
        wall: if views.is_empty() {
            None
        } else {
            let exe = std::env::current_exe().map_err(|e| {
                format!("cannot find the permfs binary for the sandbox's wall: {e}")
            })?;
            // (The kernel mechanism's views are the roots themselves: the
            // binary is staged in a root-owned directory of its own.)
            let uid = args.uid.filter(|_| euid == 0);
            let stage = if kernel {
                Some(kernel_stage_dir()?)
            } else {
                None
            };
            Some(wall_binary(exe, uid, &views, stage.as_deref())?)
        },
        views,
        kernel,
        command: args.command,
    };
    if let Some(pi) = &sandbox.pi {
        if !pi.view.is_dir() {
            return Err(format!(
                "--pi: this permfs mount has no pi view at {} (a permfs without it; update permfs)",
                pi.view.display()
            ));
        }
    }
    let signal = PENDING_SIGNAL.swap(0, Ordering::SeqCst);
    if signal != 0 && signal != libc::SIGWINCH {
        return Err(format!(
            "stopped by signal {signal} before the command started; session {id} is ended"
        ));
    }
    // The mount points of missing entries are made here (as the caller,
    // who may write the cwd where a `--uid` may not), removed afterwards.
    // One that appeared meanwhile is someone else's and stays.
    let mut made: Vec<&Path> = Vec::new();
    for entry in sandbox.protected.iter().filter(|p| !p.exists) {
        match std::fs::create_dir(&entry.path) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                tracing::debug!(path = %entry.path.display(), error = %e, "left to bwrap to make");
                made.push(&entry.path);
            }
            Ok(()) => made.push(&entry.path),
        }
    }
    let status = supervise(&bwrap, &sandbox, args.uid.filter(|_| euid == 0));
    // The empty mount points (a sandbox could not fill them).
    for path in made {
        let _ = std::fs::remove_dir(path);
    }
    let status = status?;
    let code = exit_code(status);
    tracing::debug!(session = %session.id, code, "the command exited");
    session.end().map_err(|message| {
        if message.contains(&std::io::Error::from_raw_os_error(libc::ENOTCONN).to_string()) {
            format!("the command exited with status {code}, and the permfs daemon stopped answering ({message}): restart permfs mount")
        } else {
            format!("the command exited with status {code}, but the session was left behind: {message}")
        }
    })?;
    Ok(code)
}

/// Whether the daemon can judge a sandbox by the kernel mechanism (its
/// sessions' `session.json` name the mechanisms it has).
fn daemon_has_kernel(tree: &MountClient, parent: &str) -> bool {
    let path = tree.dir(parent).join("session.json");
    std::fs::read(&path)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .and_then(|v| v["mechanisms"].as_array().cloned())
        .is_some_and(|m| m.iter().any(|x| x == "kernel"))
}

/// What the parent's `rules.json` says about the authority itself.
struct AuthorityPaths {
    /// The files the daemon judges the parent by that are not in the cwd's
    /// usual places: the global config, the agents dir's files, every layer
    /// file, the trust store.
    files: Vec<PathBuf>,
    /// The mount point and the state dir, as the daemon names them
    /// (`authorityDirs`; an older daemon does not say, and then only the
    /// mount is known).
    dirs: Vec<PathBuf>,
}

/// The mount point and the daemon's state dir, canonical, without a
/// look at their last component (a `stat` of the mount point would be a
/// request to the daemon, which is fine here but pointless).
fn hidden_dirs(mount: &Path, dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut hidden = vec![mount.to_path_buf()];
    for dir in dirs {
        let canonical = match (dir.parent(), dir.file_name()) {
            (Some(parent), Some(name)) => crate::facts::fence::canonicalize_lenient(parent)
                .map(|p| p.join(name))
                .unwrap_or_else(|_| dir.clone()),
            _ => dir.clone(),
        };
        if !hidden.contains(&canonical) {
            hidden.push(canonical);
        }
    }
    hidden
}

fn authority_paths(tree: &MountClient, parent: &str) -> Result<AuthorityPaths, String> {
    let path = tree.dir(parent).join("rules.json");
    let view: serde_json::Value = std::fs::read(&path)
        .map_err(|e| e.to_string())
        .and_then(|bytes| serde_json::from_slice(&bytes).map_err(|e| e.to_string()))
        .map_err(|e| {
            format!(
                "cannot read {} to learn which config files the sandbox must not write: {e}",
                path.display()
            )
        })?;
    let mut files: Vec<PathBuf> = Vec::new();
    for key in ["sources", "layerTrust"] {
        for entry in view[key].as_array().into_iter().flatten() {
            files.extend(entry["file"].as_str().map(PathBuf::from));
        }
    }
    files.extend(view["trustStore"].as_str().map(PathBuf::from));
    let dirs = view["authorityDirs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d.as_str().map(PathBuf::from))
        .collect();
    Ok(AuthorityPaths { files, dirs })
}

/// The top-level entries of `cwd` to keep read-only: the governing names,
/// and the entry holding any of `files` that lies under the cwd. A symlink
/// is followed to what it names (when that is under the cwd, its entry is
/// protected; elsewhere the sandbox cannot write it); one that names
/// nothing is refused, since the sandbox could create its target.
///
/// `hidden` (the mount and the state dir) is never bound: a file inside it
/// (the trust store) protects no entry, and an entry that is or lies in
/// one is left to hiding. Only a plain name counts as an entry: a path
/// spelled with `..` (a state dir given as `--state-dir ../s`) names no
/// entry of the cwd, where it once named the cwd's parent.
pub fn protected_entries(
    cwd: &Path,
    files: &[PathBuf],
    hidden: &[PathBuf],
) -> Result<Vec<Protected>, String> {
    let is_hidden = |path: &Path| hidden.iter().any(|h| path.starts_with(h));
    let top = |path: &Path| -> Option<PathBuf> {
        let rest = path.strip_prefix(cwd).ok()?;
        match rest.components().next()? {
            std::path::Component::Normal(first) => Some(cwd.join(first)),
            _ => None,
        }
    };
    let mut candidates: Vec<PathBuf> = GOVERNING_ENTRIES.iter().map(|n| cwd.join(n)).collect();
    for file in files {
        let absolute = crate::facts::fence::canonicalize_lenient(file).unwrap_or(file.clone());
        if is_hidden(&absolute) || is_hidden(file) {
            continue;
        }
        candidates.extend(top(file));
        candidates.extend(top(&absolute));
    }
    let mut protected: Vec<Protected> = Vec::new();
    let mut add = |path: PathBuf, exists: bool| {
        if !is_hidden(&path) && !protected.iter().any(|p| p.path == path) {
            protected.push(Protected { path, exists });
        }
    };
    for entry in candidates {
        match std::fs::symlink_metadata(&entry) {
            Ok(meta) if meta.file_type().is_symlink() => match entry.canonicalize() {
                Ok(target) => {
                    if let Some(inner) = top(&target) {
                        add(inner, true);
                    }
                }
                Err(_) => {
                    return Err(format!(
                        "{} is a symlink to nothing: the sandbox could create what it names and write its rules there; remove it or create its target",
                        entry.display()
                    ))
                }
            },
            Ok(_) => add(entry, true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => add(entry, false),
            Err(e) => return Err(format!("{}: {e}", entry.display())),
        }
    }
    Ok(protected)
}

/// `bwrap` on `$PATH`, or how to install it.
fn find_bwrap() -> Result<PathBuf, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("bwrap"))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .map(|m| m.is_file() && m.mode() & 0o111 != 0)
                .unwrap_or(false)
        })
        .ok_or_else(|| {
            "bubblewrap (bwrap) is not installed or not on $PATH; install it: apt-get install bubblewrap (Debian, Ubuntu), dnf install bubblewrap (Fedora), pacman -S bubblewrap (Arch)".to_string()
        })
}

/// The session's cwd: canonical (the daemon stores it resolved, and the
/// sandbox must bind the same path), a directory, outside the mount, and
/// something `ctl` can carry (no blanks).
fn working_dir(cwd: Option<&Path>, mount: &Path) -> Result<PathBuf, String> {
    let given = match cwd {
        Some(cwd) => cwd.to_path_buf(),
        None => std::env::current_dir()
            .map_err(|e| format!("the current directory is unreadable: {e}"))?,
    };
    let cwd = given
        .canonicalize()
        .map_err(|e| format!("the working directory {}: {e}", given.display()))?;
    if !cwd.is_dir() {
        return Err(format!(
            "the working directory {} is not a directory",
            cwd.display()
        ));
    }
    if cwd.starts_with(mount) {
        return Err(format!(
            "the working directory {} is inside the permfs mount; run from a project directory",
            cwd.display()
        ));
    }
    match cwd.to_str() {
        Some(text) if !text.chars().any(char::is_whitespace) => Ok(cwd),
        _ => Err(format!(
            "the working directory {} holds a blank or is not UTF-8, which ctl cannot take; use --cwd with a directory without blanks",
            cwd.display()
        )),
    }
}

/// The `spawn` line for `ctl`.
/// The roots to serve through views: the cwd (unless `--no-view`), then
/// every `--view DIR`, canonical. One inside a `hidden` directory is
/// refused (the daemon would refuse it too): it would be all hidden.
fn view_roots(args: &RunArgs, cwd: &Path, hidden: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    if args.no_view {
        if !args.views.is_empty() {
            return Err("--view and --no-view contradict each other".into());
        }
        return Ok(Vec::new());
    }
    let mut roots = vec![cwd.to_path_buf()];
    for dir in &args.views {
        let root = dir
            .canonicalize()
            .map_err(|e| format!("--view {}: {e}", dir.display()))?;
        if !root.is_dir() {
            return Err(format!("--view {}: not a directory", dir.display()));
        }
        if roots
            .iter()
            .any(|r| root.starts_with(r) || r.starts_with(&root))
        {
            return Err(format!(
                "--view {}: overlaps another view root (the cwd or an earlier --view)",
                dir.display()
            ));
        }
        if SYSTEM_DIRS.iter().any(|d| root.starts_with(d)) || root == Path::new("/") {
            return Err(format!(
                "--view {}: a system directory cannot be a view",
                dir.display()
            ));
        }
        if let Some(inside) = hidden.iter().find(|h| root.starts_with(h)) {
            return Err(format!(
                "--view {}: inside {}, permfs's own mount or state dir, which no sandbox may see",
                dir.display(),
                inside.display()
            ));
        }
        roots.push(root);
    }
    Ok(roots)
}

/// The views the daemon mounted for the session, read from its
/// `session.json`, in the order of `roots`.
fn session_views(
    tree: &MountClient,
    id: &str,
    roots: &[PathBuf],
) -> Result<Vec<(PathBuf, PathBuf)>, String> {
    if roots.is_empty() {
        return Ok(Vec::new());
    }
    let path = tree.dir(id).join("session.json");
    let view: serde_json::Value = std::fs::read(&path)
        .map_err(|e| e.to_string())
        .and_then(|bytes| serde_json::from_slice(&bytes).map_err(|e| e.to_string()))
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mounted: Vec<(PathBuf, PathBuf)> = view["views"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| {
            Some((
                PathBuf::from(v["root"].as_str()?),
                PathBuf::from(v["mount"].as_str()?),
            ))
        })
        .collect();
    roots
        .iter()
        .map(|root| {
            mounted
                .iter()
                .find(|(r, _)| r == root)
                .cloned()
                .ok_or_else(|| format!("the daemon made no view of {} (an older permfs mount? restart it, or use --no-view)", root.display()))
        })
        .collect()
}

fn spawn_line(name: &str, args: &RunArgs, cwd: &Path, views: &[PathBuf]) -> Result<String, String> {
    let mut line = format!("spawn {name}");
    if let Some(agent) = &args.agent {
        if session_name(agent) != *agent {
            return Err(format!(
                "--agent {agent:?} is not an agent name: use letters, digits, '-', '_' and '.'"
            ));
        }
        line.push_str(&format!(" agent={agent}"));
    }
    line.push_str(&format!(" cwd={}", cwd.display()));
    if args.interactive {
        line.push_str(" interactive");
    }
    if let Some(uid) = args.uid {
        line.push_str(&format!(" asker={uid}"));
    }
    for root in views {
        let text = root
            .to_str()
            .filter(|t| !t.contains(char::is_whitespace))
            .ok_or_else(|| {
                format!(
                    "{}: a view root must be UTF-8 without spaces (the ctl line is split on them)",
                    root.display()
                )
            })?;
        line.push_str(&format!(" view={text}"));
    }
    // Ended by the daemon if this process dies without ending it.
    line.push_str(" lease\n");
    Ok(line)
}

/// The agent dir of pi: `$PI_CODING_AGENT_DIR` (a leading `~` is the
/// home), else `~/.pi/agent`, as pi's `getAgentDir()`.
fn pi_agent_dir() -> Result<PathBuf, String> {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty());
    let expand = |text: &OsStr| -> Option<PathBuf> {
        let bytes = text.as_bytes();
        if bytes == b"~" || bytes.starts_with(b"~/") {
            let home = home.as_ref()?;
            Some(Path::new(home).join(OsStr::from_bytes(bytes.get(2..).unwrap_or_default())))
        } else {
            Some(PathBuf::from(text))
        }
    };
    let dir = match std::env::var_os("PI_CODING_AGENT_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => expand(&dir),
        None => home.as_ref().map(|h| Path::new(h).join(".pi/agent")),
    };
    match dir {
        Some(dir) if dir.is_absolute() => Ok(dir),
        _ => Err(
            "--pi: cannot tell pi's agent dir: set $PI_CODING_AGENT_DIR (absolute) or $HOME".into(),
        ),
    }
}

fn pi_binding(session_dir: &Path) -> Result<PiBinding, String> {
    let agent_dir = pi_agent_dir()?;
    let mut agent_entries: Vec<OsString> = match std::fs::read_dir(&agent_dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .filter(|name| name != "sessions")
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(format!("--pi: pi's agent dir {}: {e}", agent_dir.display())),
    };
    agent_entries.sort();
    Ok(PiBinding {
        view: session_dir.join("pi"),
        agent_dir,
        agent_entries,
    })
}

/// The path pi's forwarding code uses under its agent dir
/// (`extension-paths.ts`: `<agentDir>/sessions/permission-forwarding`).
pub fn pi_forwarding_dir(agent_dir: &Path) -> PathBuf {
    agent_dir.join("sessions").join("permission-forwarding")
}

/// A read-only bind bwrap makes from a descriptor `permfs run` opened
/// (`--ro-bind-fd`): what is bound is exactly what was checked, with no
/// symlink followed on the way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FdBind {
    /// The canonical host path of what is bound. Under a view root it is
    /// opened through the view's mount point (so every read below it is
    /// judged); elsewhere on the host.
    pub source: PathBuf,
    /// Where it appears in the sandbox.
    pub dest: PathBuf,
}

/// The descriptor number bwrap finds the first [`FdBind`] at (3 is
/// `--info-fd`); the others follow in order.
const FIRST_BIND_FD: usize = 4;

/// The read-only binds made from descriptors, in the order of their
/// numbers: the existing protected entries, then pi's agent dir entries
/// (each resolved to what it names; one that names nothing is left out,
/// as bwrap could not bind it either).
pub fn fd_binds(sandbox: &Sandbox) -> Vec<FdBind> {
    let mut binds: Vec<FdBind> = sandbox
        .protected
        .iter()
        .filter(|p| p.exists)
        .map(|p| FdBind {
            source: p.path.clone(),
            dest: p.path.clone(),
        })
        .collect();
    if let Some(pi) = &sandbox.pi {
        for entry in &pi.agent_entries {
            let dest = pi.agent_dir.join(entry);
            match dest.canonicalize() {
                Ok(source) => binds.push(FdBind { source, dest }),
                Err(e) => {
                    tracing::debug!(path = %dest.display(), error = %e, "a pi agent dir entry that names nothing is not bound")
                }
            }
        }
    }
    binds
}

/// Opens `bind`'s source for bwrap: under a view root through the view's
/// mount point, else on the host; the components below the view's mount
/// point (or the last one, on the host) one at a time with `O_NOFOLLOW`,
/// so a symlink put in their place since they were checked is refused
/// rather than followed to a host directory.
fn open_bind_source(sandbox: &Sandbox, bind: &FdBind) -> Result<std::os::fd::OwnedFd, String> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let failed = |e: std::io::Error| {
        format!(
            "cannot open {} to bind it read-only into the sandbox: {e}",
            bind.source.display()
        )
    };
    let (base, rest) = match sandbox
        .views
        .iter()
        .find(|(root, _)| bind.source.starts_with(root))
    {
        Some((root, view)) => (
            view.clone(),
            bind.source
                .strip_prefix(root)
                .map(Path::to_path_buf)
                .unwrap_or_default(),
        ),
        None => match (bind.source.parent(), bind.source.file_name()) {
            (Some(parent), Some(name)) => (parent.to_path_buf(), PathBuf::from(name)),
            _ => return Err(failed(std::io::ErrorKind::InvalidInput.into())),
        },
    };
    let open = |dir: i32, name: &std::ffi::CStr, flags: i32| -> std::io::Result<OwnedFd> {
        // SAFETY: `name` is NUL-terminated; the descriptor returned is new
        // and owned by the caller.
        let fd =
            unsafe { libc::openat(dir, name.as_ptr(), flags | libc::O_PATH | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: just opened, owned by nobody else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    };
    let text = |path: &OsStr| {
        std::ffi::CString::new(path.as_bytes())
            .map_err(|_| failed(std::io::ErrorKind::InvalidInput.into()))
    };
    let mut current =
        open(libc::AT_FDCWD, &text(base.as_os_str())?, libc::O_DIRECTORY).map_err(failed)?;
    let parts: Vec<&OsStr> = rest
        .components()
        .map(|c| match c {
            std::path::Component::Normal(name) => Ok(name),
            _ => Err(failed(std::io::ErrorKind::InvalidInput.into())),
        })
        .collect::<Result<_, _>>()?;
    if parts.is_empty() {
        return Err(failed(std::io::ErrorKind::InvalidInput.into()));
    }
    for (i, name) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let flags = libc::O_NOFOLLOW | if last { 0 } else { libc::O_DIRECTORY };
        current = open(current.as_raw_fd(), &text(name)?, flags).map_err(failed)?;
    }
    // SAFETY: an all-zero stat is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: the descriptor is open and `st` a valid out pointer.
    if unsafe { libc::fstat(current.as_raw_fd(), &mut st) } != 0 {
        return Err(failed(std::io::Error::last_os_error()));
    }
    if st.st_mode & libc::S_IFMT == libc::S_IFLNK {
        return Err(format!(
            "{} became a symlink after it was checked: not bound (run again; if it persists, see what changes it)",
            bind.source.display()
        ));
    }
    Ok(current)
}

/// bwrap's arguments for `sandbox`, the command last.
///
/// Order matters to bwrap (each operation applies on top of the ones
/// before): the system first, then `/tmp`, then the cwd (which may lie in
/// `/tmp`) and the other views, then the protected entries over them, then
/// the session at `/permfs`, then pi's agent dir, and last the mount point
/// and the state dir under empty read-only tmpfs wherever a directory
/// bound from the host holds them (a recursive bind would otherwise carry
/// the whole mount, or every session's journal and views, in). Under a
/// view they need no cover: the view does not show them.
pub fn sandbox_args(sandbox: &Sandbox) -> Vec<OsString> {
    sandbox_plan(sandbox).0
}

/// [`sandbox_args`] and the [`FdBind`]s its `--ro-bind-fd` numbers name,
/// computed once, so the numbers and the descriptors agree.
fn sandbox_plan(sandbox: &Sandbox) -> (Vec<OsString>, Vec<FdBind>) {
    let binds = fd_binds(sandbox);
    let fd_of = |dest: &Path| -> Option<OsString> {
        binds
            .iter()
            .position(|b| b.dest == dest)
            .map(|i| (FIRST_BIND_FD + i).to_string().into())
    };
    let mut args: Vec<OsString> = Vec::new();
    let mut push = |words: &[&OsStr]| args.extend(words.iter().map(|w| w.to_os_string()));
    for dir in SYSTEM_DIRS {
        let path = Path::new(dir);
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(path) {
                    push(&["--symlink".as_ref(), target.as_os_str(), path.as_os_str()]);
                }
            }
            Ok(meta) if meta.is_dir() => {
                push(&["--ro-bind".as_ref(), path.as_ref(), path.as_ref()])
            }
            _ => {}
        }
    }
    // /etc/resolv.conf often points into /run (systemd-resolved); without
    // its target the sandbox has no DNS.
    if let Ok(target) = std::fs::canonicalize("/etc/resolv.conf") {
        if !target.starts_with("/etc") {
            push(&["--ro-bind-try".as_ref(), target.as_ref(), target.as_ref()]);
        }
    }
    for word in [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
    ] {
        push(&[word.as_ref()]);
    }
    if let Some(home) = &sandbox.home {
        if !SYSTEM_DIRS.iter().any(|d| home.starts_with(d)) && !home.starts_with(&sandbox.cwd) {
            push(&["--dir".as_ref(), home.as_ref()]);
        }
    }
    // The cwd (and every further root) is its view when there is one:
    // the real directory, with every open judged.
    match sandbox.views.iter().find(|(root, _)| *root == sandbox.cwd) {
        Some((root, view)) => push(&["--bind".as_ref(), view.as_ref(), root.as_ref()]),
        None => push(&[
            "--bind".as_ref(),
            sandbox.cwd.as_ref(),
            sandbox.cwd.as_ref(),
        ]),
    }
    for (root, view) in sandbox
        .views
        .iter()
        .filter(|(root, _)| *root != sandbox.cwd)
    {
        push(&["--bind".as_ref(), view.as_ref(), root.as_ref()]);
    }
    // What governs an agent stays read-only (after the cwd's bind, which
    // it covers), bound from the view's own path: reads stay judged.
    for entry in &sandbox.protected {
        if entry.exists {
            if let Some(fd) = fd_of(&entry.path) {
                push(&["--ro-bind-fd".as_ref(), fd.as_ref(), entry.path.as_ref()]);
            }
        } else {
            push(&["--tmpfs".as_ref(), entry.path.as_ref()]);
            push(&["--remount-ro".as_ref(), entry.path.as_ref()]);
        }
    }
    push(&[
        "--bind".as_ref(),
        sandbox.session_dir.as_ref(),
        SESSION_PATH.as_ref(),
    ]);
    push(&[
        "--setenv".as_ref(),
        "PERMFS_SESSION".as_ref(),
        SESSION_PATH.as_ref(),
    ]);
    push(&["--unsetenv".as_ref(), "PERMFS_MOUNT".as_ref()]);
    if let Some(pi) = &sandbox.pi {
        // The agent dir is read-only (the agent may not rewrite its own
        // permission config), on a tmpfs so pi can still create files;
        // its sessions are the view and a throwaway tmpfs.
        push(&["--tmpfs".as_ref(), pi.agent_dir.as_ref()]);
        for entry in &pi.agent_entries {
            let path = pi.agent_dir.join(entry);
            if let Some(fd) = fd_of(&path) {
                push(&["--ro-bind-fd".as_ref(), fd.as_ref(), path.as_ref()]);
            }
        }
        let forwarding = pi_forwarding_dir(&pi.agent_dir);
        push(&["--bind".as_ref(), pi.view.as_ref(), forwarding.as_ref()]);
        push(&[
            "--setenv".as_ref(),
            "PI_SUBAGENT_PARENT_SESSION".as_ref(),
            sandbox.parent.as_ref(),
        ]);
        // pi forwards only when it knows it is a subagent: this is one of
        // the hint variables it checks (`SUBAGENT_ENV_HINT_KEYS`).
        push(&[
            "--setenv".as_ref(),
            "PI_SUBAGENT_CHILD".as_ref(),
            "1".as_ref(),
        ]);
    }
    // The mount and the state dir: under a view the view refuses them;
    // under a directory bound from the host, an empty read-only tmpfs
    // covers them, after every bind that could hold them.
    let in_view = |path: &Path| {
        !sandbox.kernel && sandbox.views.iter().any(|(root, _)| path.starts_with(root))
    };
    let mut from_host: Vec<PathBuf> = SYSTEM_DIRS.iter().map(PathBuf::from).collect();
    if !in_view(&sandbox.cwd) {
        from_host.push(sandbox.cwd.clone());
    }
    if sandbox.kernel {
        from_host.extend(sandbox.views.iter().map(|(root, _)| root.clone()));
    }
    from_host.extend(
        binds
            .iter()
            .filter(|b| !in_view(&b.source))
            .map(|b| b.dest.clone()),
    );
    for dir in &sandbox.hidden {
        if !in_view(dir) && from_host.iter().any(|bound| dir.starts_with(bound)) {
            push(&["--tmpfs".as_ref(), dir.as_ref()]);
            push(&["--remount-ro".as_ref(), dir.as_ref()]);
        }
    }
    if let Some(exe) = &sandbox.wall {
        push(&["--ro-bind".as_ref(), exe.as_ref(), WALL_PATH.as_ref()]);
    }
    push(&["--chdir".as_ref(), sandbox.cwd.as_ref(), "--".as_ref()]);
    if sandbox.wall.is_some() {
        args.extend(wall_words(sandbox));
    }
    args.extend(sandbox.command.iter().cloned());
    (args, binds)
}

/// `permfs wall --read … --write … --`: what the Landlock wall leaves
/// reachable inside the sandbox. Reading and running: the system
/// directories, `/proc`, the wall's own binary, the resolver's file.
/// Writing too: the views, the session directory, `/tmp`, `/dev`, the home
/// directory and pi's agent dir (both throwaway or read-only binds where
/// they are not views).
fn wall_words(sandbox: &Sandbox) -> Vec<OsString> {
    let mut words: Vec<OsString> = vec![WALL_PATH.into(), "wall".into()];
    if sandbox.kernel {
        words.push("--kernel".into());
    }
    let mut read: Vec<PathBuf> = SYSTEM_DIRS.iter().map(PathBuf::from).collect();
    read.push("/proc".into());
    read.push("/run/permfs".into());
    if let Ok(target) = std::fs::canonicalize("/etc/resolv.conf") {
        read.push(target);
    }
    let mut write: Vec<PathBuf> = sandbox.views.iter().map(|(root, _)| root.clone()).collect();
    write.extend([SESSION_PATH, "/tmp", "/dev"].map(PathBuf::from));
    write.extend(sandbox.home.iter().cloned());
    if let Some(pi) = &sandbox.pi {
        write.push(pi.agent_dir.clone());
    }
    for dir in read {
        words.extend(["--read".into(), dir.into_os_string()]);
    }
    for dir in write {
        words.extend(["--write".into(), dir.into_os_string()]);
    }
    words.push("--".into());
    words
}

/// The spawned child session; dropping it ends the session, so no error
/// path (nor a panic) leaves it behind.
struct Session<'a> {
    tree: &'a MountClient,
    id: String,
    ended: bool,
    /// The `ctl` handle that spawned the session with `lease`: if this
    /// process dies without ending it (SIGKILL), the kernel closes the
    /// handle and the daemon ends the session.
    _lease: std::fs::File,
}

impl<'a> Session<'a> {
    fn spawn(tree: &'a MountClient, parent: &str, id: &str, line: &str) -> Result<Self, String> {
        tracing::debug!(%parent, line = line.trim_end(), "spawning");
        match tree.control_kept(parent, line) {
            Ok(lease) => Ok(Self {
                tree,
                id: id.to_string(),
                ended: false,
                _lease: lease,
            }),
            Err(e) => Err(spawn_refusal(id, parent, line, &e)),
        }
    }

    fn end(mut self) -> Result<(), String> {
        self.ended = true;
        self.tree.end(&self.id)
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        if !self.ended {
            if let Err(message) = self.tree.end(&self.id) {
                tracing::warn!(%message, "the child session could not be ended");
                eprintln!("permfs run: {message}");
            }
        }
    }
}

/// What the daemon's refusal of a spawn means, in words.
fn spawn_refusal(id: &str, parent: &str, line: &str, error: &std::io::Error) -> String {
    let line = line.trim_end();
    match error.raw_os_error() {
        Some(libc::EEXIST) => format!(
            "a session {id} already exists: pick another --name"
        ),
        Some(libc::EACCES) => format!(
            "permfs refused to spawn {id} (EACCES, the spawn rule): `{line}` on {parent}'s ctl. You may spawn only non-interactive children inside {parent}'s cwd asked as by your own uid, unless you are {parent}'s decider or the operator; the daemon's log says which part was refused"
        ),
        Some(libc::EINVAL) => format!(
            "permfs refused `{line}` on {parent}'s ctl (EINVAL): a cwd that does not exist, or a name it cannot take; the daemon's log says why"
        ),
        Some(libc::ENOENT) => format!("the parent session {parent} is gone"),
        _ => format!("cannot spawn {id} under {parent}: {error}"),
    }
}

/// The last signal `permfs run` received and not yet forwarded (0: none).
static PENDING_SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn note_signal(signal: libc::c_int) {
    PENDING_SIGNAL.store(signal, Ordering::SeqCst);
}

/// The signals forwarded into the sandbox (SIGWINCH too: a TUI agent in
/// a new session no longer gets its terminal's resizes).
const FORWARDED: &[libc::c_int] = &[
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGWINCH,
];

fn catch_signals() {
    for &signal in FORWARDED {
        // SAFETY: the handler only stores into an atomic, which is
        // async-signal-safe; the sigaction struct is fully initialised.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = note_signal as *const () as usize;
            libc::sigemptyset(&mut action.sa_mask);
            action.sa_flags = libc::SA_RESTART;
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// Starts bwrap, forwards signals into the sandbox until it exits, and
/// returns its status. bwrap runs in a process group of its own, so a
/// terminal's Ctrl-C reaches `permfs run` alone and is forwarded, rather
/// than killing bwrap's monitor (which would SIGKILL the command).
fn supervise(bwrap: &Path, sandbox: &Sandbox, uid: Option<u32>) -> Result<ExitStatus, String> {
    let (info_read, info_write) = info_pipe()?;
    let (args, binds) = sandbox_plan(sandbox);
    let sources: Vec<std::os::fd::OwnedFd> = binds
        .iter()
        .map(|bind| open_bind_source(sandbox, bind))
        .collect::<Result<_, _>>()?;
    let mut command = Command::new(bwrap);
    command.arg("--info-fd").arg("3").args(args);
    command.process_group(0);
    // bwrap's descriptors, at 3 (--info-fd), then from FIRST_BIND_FD on.
    let mut placed: Vec<i32> = vec![std::os::fd::AsRawFd::as_raw_fd(&info_write)];
    placed.extend(sources.iter().map(std::os::fd::AsRawFd::as_raw_fd));
    let mut scratch: Vec<i32> = vec![-1; placed.len()];
    // SAFETY: fcntl and dup2 are async-signal-safe and nothing here
    // allocates. Each descriptor is first copied above every target
    // number (close-on-exec), so placing one never overwrites another
    // still to be placed; dup2 then puts the copy at its number without
    // close-on-exec.
    unsafe {
        command.pre_exec(move || {
            let floor = 3 + placed.len() as i32;
            for (slot, fd) in scratch.iter_mut().zip(&placed) {
                *slot = libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, floor);
                if *slot < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            for (target, copy) in (3..).zip(scratch.iter()) {
                if libc::dup2(*copy, target) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    if let Some(uid) = uid {
        // Root dropping to the uid before bwrap: bwrap then runs
        // unprivileged, in a user namespace of its own, and the command's
        // files and the daemon's caller check see that uid. (std clears
        // the supplementary groups when root sets a uid.)
        command.uid(uid).gid(uid);
    }
    tracing::debug!(args = ?command, "starting bwrap");
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", bwrap.display()))?;
    drop(info_write);
    drop(sources);
    let namespace = Arc::new(AtomicU64::new(0));
    let reaper = Arc::new(AtomicI32::new(0));
    // A pi child polls its forwarding view for an answer and would wait
    // out its own 10 minutes on a dead one: when the authority stops
    // answering, the agent is stopped within seconds instead.
    // The kernel mechanism's marks end with the daemon and its supervisor:
    // a sandbox left running then would read its files unjudged, so it is
    // stopped too.
    let gone = (sandbox.pi.is_some() || sandbox.kernel)
        .then(|| watch_authority(sandbox.session_dir.join("session.json")));
    let mut stopped_for: Option<String> = None;
    let mut stopped_at: Option<std::time::Instant> = None;
    let reader = {
        let (namespace, reaper) = (namespace.clone(), reaper.clone());
        std::thread::spawn(move || read_info(info_read, &namespace, &reaper))
    };
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                // The pipe closes once the sandbox is gone: whether bwrap
                // got as far as the command is known for sure then.
                let _ = reader.join();
                if let Some(reason) = stopped_for {
                    return Err(format!(
                        "the permfs daemon stopped answering ({reason}): the agent was stopped, so nothing it asked waits on a dead authority and nothing it asked runs unanswered; its session could not be ended (restart permfs mount)"
                    ));
                }
                if namespace.load(Ordering::SeqCst) == 0 && status.code() == Some(1) {
                    return Err(
                        "bwrap could not set up the sandbox (its message is above); as another uid (--uid) it needs unprivileged user namespaces and that uid's access to the cwd and the mount".into(),
                    );
                }
                return Ok(status);
            }
            Ok(None) => {}
            Err(e) => return Err(format!("waiting for bwrap: {e}")),
        }
        if stopped_for.is_none() {
            if let Some(reason) = gone.as_ref().and_then(|g| g.lock().ok()?.clone()) {
                tracing::warn!(%reason, "the permfs daemon stopped answering; stopping the agent");
                forward(
                    libc::SIGTERM,
                    child.id(),
                    namespace.load(Ordering::SeqCst),
                    reaper.load(Ordering::SeqCst),
                );
                stopped_for = Some(reason);
                stopped_at = Some(std::time::Instant::now());
            }
        } else if stopped_at.is_some_and(|t| t.elapsed() > AUTHORITY_PATIENCE) {
            // It did not stop on SIGTERM: it does now.
            forward(
                libc::SIGKILL,
                child.id(),
                namespace.load(Ordering::SeqCst),
                reaper.load(Ordering::SeqCst),
            );
            stopped_at = None;
        }
        let signal = PENDING_SIGNAL.swap(0, Ordering::SeqCst);
        if signal != 0 {
            forward(
                signal,
                child.id(),
                namespace.load(Ordering::SeqCst),
                reaper.load(Ordering::SeqCst),
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How long a read of the session's `session.json` may take before the
/// authority counts as gone (a daemon stopped, not dead, never answers).
const AUTHORITY_PATIENCE: Duration = Duration::from_secs(5);

/// Reads `probe` (the session's `session.json`: a read, which the kernel
/// cannot answer from its caches, reaches the daemon) every second; the
/// returned slot gets the reason once a read fails (`ENOTCONN` once the
/// daemon is dead, `ENOENT` once the session is gone) or outlasts
/// [`AUTHORITY_PATIENCE`].
fn watch_authority(probe: PathBuf) -> Arc<std::sync::Mutex<Option<String>>> {
    let slot = Arc::new(std::sync::Mutex::new(None));
    let out = slot.clone();
    std::thread::spawn(move || loop {
        let (sender, receiver) = std::sync::mpsc::channel();
        let path = probe.clone();
        std::thread::spawn(move || {
            let _ = sender.send(std::fs::read(&path).map(drop));
        });
        let failure = match receiver.recv_timeout(AUTHORITY_PATIENCE) {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(format!("{}: {e}", probe.display())),
            Err(_) => Some(format!(
                "{} unanswered for {}s",
                probe.display(),
                AUTHORITY_PATIENCE.as_secs()
            )),
        };
        if let Some(reason) = failure {
            if let Ok(mut slot) = out.lock() {
                *slot = Some(reason);
            }
            return;
        }
        std::thread::sleep(Duration::from_secs(1));
    });
    slot
}

fn info_pipe() -> Result<(std::fs::File, std::os::fd::OwnedFd), String> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!(
            "cannot make a pipe for bwrap: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: both descriptors were just created and are owned here.
    unsafe {
        Ok((
            std::os::fd::FromRawFd::from_raw_fd(fds[0]),
            std::os::fd::FromRawFd::from_raw_fd(fds[1]),
        ))
    }
}

/// Reads bwrap's `--info-fd` JSON: the sandbox's pid namespace and its
/// first process (bwrap's reaper), which signals are forwarded past.
fn read_info(mut pipe: std::fs::File, namespace: &AtomicU64, reaper: &AtomicI32) {
    let mut text = Vec::new();
    let mut chunk = [0u8; 512];
    while let Ok(n) = pipe.read(&mut chunk) {
        if n == 0 {
            return;
        }
        text.extend_from_slice(chunk.get(..n).unwrap_or_default());
        if let Ok(info) = serde_json::from_slice::<serde_json::Value>(&text) {
            let pid = info["child-pid"].as_i64().unwrap_or(0);
            reaper.store(i32::try_from(pid).unwrap_or(0), Ordering::SeqCst);
            namespace.store(
                info["pid-namespace"].as_u64().unwrap_or(0),
                Ordering::SeqCst,
            );
            return;
        }
    }
}

/// Sends `signal` to every process of the sandbox's pid namespace but its
/// reaper (a namespace's first process ignores signals it has no handler
/// for). Before the sandbox is up, bwrap itself gets it.
fn forward(signal: i32, bwrap: u32, namespace: u64, reaper: i32) {
    tracing::debug!(signal, namespace, "forwarding a signal into the sandbox");
    let mut sent = 0;
    if namespace != 0 {
        if let Ok(entries) = std::fs::read_dir("/proc") {
            for entry in entries.filter_map(Result::ok) {
                let Some(pid) = entry
                    .file_name()
                    .to_str()
                    .and_then(|p| p.parse::<i32>().ok())
                else {
                    continue;
                };
                let in_sandbox = std::fs::metadata(entry.path().join("ns/pid"))
                    .map(|m| m.ino() == namespace)
                    .unwrap_or(false);
                if in_sandbox && pid != reaper {
                    // SAFETY: sending a signal has no memory effects.
                    unsafe { libc::kill(pid, signal) };
                    sent += 1;
                }
            }
        }
    }
    if sent == 0 && signal != libc::SIGWINCH {
        // SAFETY: as above; bwrap is our child.
        unsafe { libc::kill(bwrap as i32, signal) };
    }
}

/// The command's exit status as a shell reports it: its code, or 128 plus
/// the signal that killed it.
pub fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(FAILED)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox(mount: &str, cwd: &str) -> Sandbox {
        Sandbox {
            session_dir: PathBuf::from(mount).join("sessions/main/children/w"),
            hidden: vec![PathBuf::from(mount)],
            cwd: PathBuf::from(cwd),
            pi: None,
            parent: "main".into(),
            home: Some(PathBuf::from("/home/u")),
            protected: Vec::new(),
            views: Vec::new(),
            wall: None,
            kernel: false,
            command: vec!["sh".into(), "-c".into(), "true".into()],
        }
    }

    #[test]
    fn what_governs_an_agent_is_read_only_and_what_is_missing_cannot_be_made() {
        let dir = tempfile::tempdir().expect("temp");
        let cwd = dir.path().canonicalize().expect("canonical");
        std::fs::create_dir(cwd.join(".permfs")).expect("dir");
        std::fs::create_dir_all(cwd.join("config")).expect("dir");
        std::fs::create_dir_all(cwd.join(".local/state/permfs")).expect("dir");
        let global = cwd.join("config/permfs.json");
        std::fs::write(&global, "{}").expect("config");
        let state = cwd.join(".local/state/permfs");
        let protected = protected_entries(
            &cwd,
            &[
                global,
                PathBuf::from("/etc/elsewhere.json"),
                state.join("trust.json"),
                // A state dir named through `..` names the cwd's parent,
                // never an entry of the cwd.
                cwd.join("../s/trust.json"),
            ],
            std::slice::from_ref(&state),
        )
        .expect("protected");
        let entry = |name: &str| protected.iter().find(|p| p.path == cwd.join(name)).cloned();
        assert_eq!(entry(".permfs").map(|p| p.exists), Some(true));
        assert_eq!(entry(".pi").map(|p| p.exists), Some(false));
        assert_eq!(
            entry("config").map(|p| p.exists),
            Some(true),
            "{protected:?}"
        );
        assert!(!protected.iter().any(|p| p.path.starts_with("/etc")));
        assert!(
            !protected
                .iter()
                .any(|p| p.path == cwd.join(".local") || !p.path.starts_with(&cwd)),
            "the state dir's trust store protects nothing, and `..` names no entry: {protected:?}"
        );
        let mut sandbox = sandbox("/srv/mnt", &cwd.to_string_lossy());
        sandbox.protected = protected;
        let view = PathBuf::from("/state/views/1-1-1");
        sandbox.views = vec![(cwd.clone(), view.clone())];
        let (args, binds) = sandbox_plan(&sandbox);
        let args = words(&args);
        let permfs = cwd.join(".permfs").display().to_string();
        let pi = cwd.join(".pi").display().to_string();
        // Bound from a descriptor of the view's own path, never the host's.
        let at = binds
            .iter()
            .position(|b| b.dest == cwd.join(".permfs"))
            .expect("bound from a descriptor");
        let fd = (FIRST_BIND_FD + at).to_string();
        assert!(has(&args, &["--ro-bind-fd", &fd, &permfs]), "{args:?}");
        assert!(
            !has(&args, &["--ro-bind", &permfs, &permfs]),
            "the host's entry is not bound over the view: {args:?}"
        );
        assert!(
            has(&args, &["--tmpfs", &pi, "--remount-ro", &pi]),
            "{args:?}"
        );
        std::os::unix::fs::symlink(cwd.join("nowhere"), cwd.join(".codex")).expect("link");
        assert!(
            protected_entries(&cwd, &[], &[]).is_err_and(|why| why.contains("symlink to nothing"))
        );
    }

    #[test]
    fn the_mount_and_the_state_dir_are_covered_only_where_the_host_is_bound() {
        // With the cwd a view: the view refuses them, no tmpfs (bwrap could
        // not even make its mount point through the view).
        let mut sandbox = sandbox("/home/u/proj/mount", "/home/u/proj");
        sandbox
            .hidden
            .push(PathBuf::from("/home/u/proj/.local/state/permfs"));
        sandbox.hidden.push(PathBuf::from("/opt/permfs/state"));
        sandbox.views = vec![(
            PathBuf::from("/home/u/proj"),
            PathBuf::from("/opt/permfs/state/views/1-1-1"),
        )];
        let args = words(&sandbox_args(&sandbox));
        for dir in ["/home/u/proj/mount", "/home/u/proj/.local/state/permfs"] {
            assert!(!has(&args, &["--tmpfs", dir]), "{args:?}");
        }
        // A system directory bound from the host holds the state dir: it is
        // covered there, read-only.
        assert!(
            has(
                &args,
                &[
                    "--tmpfs",
                    "/opt/permfs/state",
                    "--remount-ro",
                    "/opt/permfs/state"
                ]
            ),
            "{args:?}"
        );
        // Without a view the cwd is the host's: both are covered there.
        sandbox.views.clear();
        let args = words(&sandbox_args(&sandbox));
        for dir in ["/home/u/proj/mount", "/home/u/proj/.local/state/permfs"] {
            assert!(
                has(&args, &["--tmpfs", dir, "--remount-ro", dir]),
                "{args:?}"
            );
        }
    }

    fn words(args: &[OsString]) -> Vec<String> {
        args.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    fn has(args: &[String], run: &[&str]) -> bool {
        args.windows(run.len()).any(|w| w == run)
    }

    #[test]
    fn the_session_is_bound_at_permfs_and_the_cwd_at_its_own_path() {
        let args = words(&sandbox_args(&sandbox("/srv/mnt", "/home/u/proj")));
        assert!(has(
            &args,
            &["--bind", "/srv/mnt/sessions/main/children/w", "/permfs"]
        ));
        assert!(has(&args, &["--bind", "/home/u/proj", "/home/u/proj"]));
        assert!(has(
            &args,
            &["--chdir", "/home/u/proj", "--", "sh", "-c", "true"]
        ));
        assert!(has(&args, &["--setenv", "PERMFS_SESSION", "/permfs"]));
        assert!(has(&args, &["--cap-drop", "ALL"]));
        assert!(has(&args, &["--dir", "/home/u"]));
        assert!(!args.iter().any(|a| a == "/srv/mnt"), "{args:?}");
    }

    #[test]
    fn a_mount_inside_the_cwd_is_hidden_after_the_cwd_is_bound() {
        let args = words(&sandbox_args(&sandbox(
            "/home/u/proj/mount",
            "/home/u/proj",
        )));
        let cwd = args
            .iter()
            .position(|a| a == "/home/u/proj")
            .unwrap_or(usize::MAX);
        let hidden = args
            .windows(2)
            .position(|w| w[0] == "--tmpfs" && w[1] == "/home/u/proj/mount")
            .unwrap_or(0);
        assert!(hidden > cwd, "{args:?}");
    }

    #[test]
    fn pi_gets_the_view_at_its_forwarding_dir_and_its_parent() {
        let home = tempfile::tempdir().expect("home");
        let agent_dir = home
            .path()
            .canonicalize()
            .expect("canonical")
            .join(".pi/agent");
        std::fs::create_dir_all(&agent_dir).expect("agent dir");
        std::fs::write(agent_dir.join("settings.json"), "{}").expect("settings");
        let agent = agent_dir.display().to_string();
        let settings = agent_dir.join("settings.json");
        let mut sandbox = sandbox("/srv/mnt", "/home/u/proj");
        sandbox.parent = "main/team".into();
        sandbox.pi = Some(PiBinding {
            view: sandbox.session_dir.join("pi"),
            agent_dir: agent_dir.clone(),
            agent_entries: vec!["settings.json".into(), "gone".into()],
        });
        let (args, binds) = sandbox_plan(&sandbox);
        let args = words(&args);
        assert!(has(
            &args,
            &[
                "--bind",
                "/srv/mnt/sessions/main/children/w/pi",
                &format!("{agent}/sessions/permission-forwarding")
            ]
        ));
        assert!(has(&args, &["--tmpfs", &agent]));
        // Read-only from a descriptor of what the entry names; an entry
        // that names nothing is left out.
        assert_eq!(
            binds,
            vec![FdBind {
                source: settings.clone(),
                dest: settings.clone()
            }]
        );
        let fd = FIRST_BIND_FD.to_string();
        assert!(
            has(
                &args,
                &["--ro-bind-fd", &fd, &settings.display().to_string()]
            ),
            "{args:?}"
        );
        assert!(has(
            &args,
            &["--setenv", "PI_SUBAGENT_PARENT_SESSION", "main/team"]
        ));
    }

    #[test]
    fn a_signal_death_is_128_plus_the_signal() {
        assert_eq!(exit_code(ExitStatus::from_raw(7 << 8)), 7);
        assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGTERM)), 128 + 15);
    }
}
