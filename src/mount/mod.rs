//! The FUSE daemon: a supervisor (`supervisor.rs`) holds the mount and
//! runs a server, [`serve`], that serves [`fs::PermFs`] on its descriptor
//! until SIGINT/SIGTERM, and starts another if the server dies.

pub mod caller;
mod drafts;
pub mod fdstore;
pub mod fs;
pub mod fusermount;
mod judges;
pub mod keeper;
pub mod nodes;
pub mod parking;
pub mod supervisor;

use crate::policy::layers::{PolicyLoader, PolicySources};
use crate::session::{Authority, SpawnSpec};
use fuser::{Config, Errno, SessionACL};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often asks are checked for their deadline.
const EXPIRE_INTERVAL: Duration = Duration::from_millis(25);

#[derive(Clone)]
pub struct MountOptions {
    pub mountpoint: PathBuf,
    pub config: Option<PathBuf>,
    pub agents_dir: Option<PathBuf>,
    /// Where the audit log lives (default: `$XDG_STATE_HOME/permfs`).
    pub state_dir: Option<PathBuf>,
    pub threads: usize,
    /// Let other uids use the mount when the daemon is not root (needs
    /// `user_allow_other` in /etc/fuse.conf). Root always allows them.
    pub allow_other: bool,
    /// `fdatasync` every audit batch before delivering its decisions.
    pub audit_sync: bool,
}

/// `$XDG_STATE_HOME/permfs`, or `~/.local/state/permfs`.
pub fn default_state_dir() -> PathBuf {
    match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("permfs"),
        None => PathBuf::from(crate::facts::path_text::home_dir()).join(".local/state/permfs"),
    }
}

/// Whether `path` is already a FUSE mount point (a second daemon there
/// would fail obscurely or shadow the first).
pub(crate) fn is_fuse_mount(path: &Path) -> bool {
    let Ok(canonical) = std::fs::canonicalize(path) else {
        return false;
    };
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mounts") else {
        return false;
    };
    mounts.lines().any(|line| {
        let mut fields = line.split_whitespace();
        let (_, target, kind) = (fields.next(), fields.next(), fields.next());
        target.is_some_and(|t| Path::new(&t.replace("\\040", " ")) == canonical)
            && kind.is_some_and(|k| k.starts_with("fuse"))
    })
}

/// The FUSE init flags permfs asks for beyond fuser's defaults, each only
/// when the kernel offers it:
/// - `FUSE_PARALLEL_DIROPS`: lookups and readdirs in one directory run in
///   parallel (the kernel takes the directory's lock shared, not
///   exclusive): every ask looks up names in its session's `outbox/`, and
///   without it concurrent askers of one session queue on that lock. All
///   of permfs's state is behind its own locks, so nothing relied on the
///   kernel serializing them.
pub(crate) fn request_init_flags(config: &mut fuser::KernelConfig) {
    for flag in [fuser::InitFlags::FUSE_PARALLEL_DIROPS] {
        if let Err(unsupported) = config.add_capabilities(flag) {
            tracing::info!(?unsupported, "the kernel does not offer a FUSE init flag");
        }
    }
}

fn block_termination_signals() -> libc::sigset_t {
    let set = signal_set(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP]);
    // SAFETY: blocks a valid set in this thread.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    set
}

/// The set of `signals`.
pub(crate) fn signal_set(signals: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: plain signal-set manipulation on a zeroed set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &signal in signals {
            libc::sigaddset(&mut set, signal);
        }
        set
    }
}

/// Waits for SIGINT, SIGTERM or SIGHUP; `None` when `ended()` says the
/// FUSE session is over first (someone ran `fusermount3 -u` or `umount`):
/// the daemon then stops too, instead of waiting for a signal with no
/// mount to serve.
fn wait_for_termination(set: &libc::sigset_t, ended: impl Fn() -> bool) -> Option<i32> {
    let tick = libc::timespec {
        tv_sec: 0,
        tv_nsec: 250_000_000,
    };
    loop {
        // SAFETY: `set` is a valid signal set blocked in every thread.
        let signal = unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &tick) };
        if signal > 0 {
            return Some(signal);
        }
        if ended() {
            return None;
        }
    }
}

/// The root sessions: the config's `roots` (`{"name": {"agent": …, "cwd":
/// …, "interactive": bool, "askerUid": N, "deciderUid": N}}`), or one interactive
/// `main` in the daemon's cwd.
fn root_specs(roots: Option<&serde_json::Value>) -> Result<Vec<(String, SpawnSpec)>, String> {
    let Some(roots) = roots else {
        return Ok(vec![(
            "main".into(),
            SpawnSpec {
                interactive: true,
                ..Default::default()
            },
        )]);
    };
    let object = roots
        .as_object()
        .ok_or("\"roots\" must map session names to settings")?;
    if object.is_empty() {
        return Err("\"roots\" must name at least one session".into());
    }
    const KEYS: &[&str] = &["agent", "cwd", "interactive", "askerUid", "deciderUid"];
    object
        .iter()
        .map(|(name, settings)| {
            let settings = settings
                .as_object()
                .ok_or(format!("roots.{name} must be an object"))?;
            if let Some(unknown) = settings.keys().find(|k| !KEYS.contains(&k.as_str())) {
                return Err(format!(
                    "roots.{name}: {}",
                    crate::policy::config::unknown_key_message("key", unknown, KEYS)
                ));
            }
            let text = |key: &str| -> Result<Option<String>, String> {
                match settings.get(key) {
                    None => Ok(None),
                    Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
                    Some(_) => Err(format!("roots.{name}.{key} must be a string")),
                }
            };
            let cwd = text("cwd")?;
            if cwd.as_ref().is_some_and(|c| !c.starts_with('/')) {
                return Err(format!("roots.{name}.cwd must be absolute"));
            }
            let interactive = match settings.get("interactive") {
                None => false,
                Some(value) => value
                    .as_bool()
                    .ok_or(format!("roots.{name}.interactive must be true or false"))?,
            };
            let uid = |key: &str| -> Result<Option<u32>, String> {
                match settings.get(key) {
                    None => Ok(None),
                    Some(value) => value
                        .as_u64()
                        .and_then(|u| u32::try_from(u).ok())
                        .map(Some)
                        .ok_or(format!("roots.{name}.{key} must be a uid (a number)")),
                }
            };
            Ok((
                name.clone(),
                SpawnSpec {
                    agent: text("agent")?,
                    cwd,
                    interactive,
                    asker_uid: uid("askerUid")?,
                    decider_uid: uid("deciderUid")?,
                },
            ))
        })
        .collect()
}

/// The exit code of a server whose mount was taken away (unmounted from
/// outside): its supervisor stops too instead of starting another.
pub const EXIT_MOUNT_GONE: i32 = 3;

/// Serves the FUSE connection on `fd` until SIGINT/SIGTERM (or until the
/// mount is taken away); returns the process exit code. Started by the
/// supervisor (`permfs serve`, `supervisor.rs`), which holds the same
/// descriptor, mounted and unmounts it, and talks to this server over
/// `control`: the inode key first, then `ready` from here once the
/// config is read, `go` from there (the previous server, if any, is gone
/// by then), `serving` from here once requests are read.
pub fn serve(
    options: MountOptions,
    fd: std::os::fd::OwnedFd,
    mut control: supervisor::Control,
) -> i32 {
    let mountpoint = &options.mountpoint;
    let hello = match control.receive_hello() {
        Ok(hello) => hello,
        Err(error) => {
            eprintln!("permfs serve: no word from the supervisor: {error}");
            return 2;
        }
    };
    let state_dir = options.state_dir.clone().unwrap_or_else(default_state_dir);
    // The mount point and the state dir are the authority itself: no
    // agent's path_write may reach them (built-in deny rules).
    let absolute = |dir: PathBuf| {
        if dir.is_absolute() {
            dir
        } else {
            std::env::current_dir().map(|c| c.join(&dir)).unwrap_or(dir)
        }
    };
    let state_dir = absolute(state_dir);
    let authority_dirs = vec![absolute(mountpoint.to_path_buf()), state_dir.clone()];
    // Absolute, so the views (`rules.json` sources) name the file itself
    // and `permfs run` can keep a sandbox from writing it.
    let global = options.config.clone().map(absolute);
    let loader = match PolicyLoader::new(PolicySources {
        global,
        agents_dir: options.agents_dir.clone().map(absolute),
        authority_dirs,
        // Project layers widen only as the operator trusted them, pinned
        // in the state dir (`permfs trust`).
        trust: crate::policy::trust::Trust::Store(state_dir.clone()),
        ..Default::default()
    }) {
        Ok(loader) => loader,
        Err(error) => {
            eprintln!("permfs mount: invalid global config: {error}");
            return 2;
        }
    };
    let cwd = std::env::current_dir()
        .map(|d| d.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "/".into());
    // SAFETY: getuid cannot fail.
    let owner = unsafe { libc::getuid() };
    // A root's cwd the daemon cannot list (started as an ordinary user in
    // root's home, say): the facts of an ask that depend on it cannot be
    // established, so such asks go to a person, never to a rule's allow.
    // Said at start, where the operator looks, not found as a wait later.
    if let Err(error) = std::fs::read_dir(&cwd) {
        tracing::warn!(%cwd, uid = owner, %error, "the root sessions' cwd cannot be read by this daemon: asks whose facts need it (a bash line's paths, a file's aliases) will wait for a person; start permfs in a directory it can read");
    }
    let roots = match root_specs(loader.global_config().extensions.get("roots")) {
        Ok(roots) => roots,
        Err(error) => {
            eprintln!("permfs mount: invalid \"roots\" in the global config: {error}");
            return 2;
        }
    };
    let authority = match Authority::new(Arc::new(loader), owner) {
        Ok(authority) => Arc::new(authority),
        Err(error) => {
            eprintln!(
                "permfs mount: invalid \"judges\" or \"limits\" in the global config: {error}"
            );
            return 2;
        }
    };

    // Command judges run under this binary's `judge-reaper`, a subreaper
    // that kills everything a judge started when its review ends.
    match std::env::current_exe() {
        Ok(binary) => crate::session::chain::use_reaper(binary),
        Err(error) => {
            eprintln!("permfs mount: cannot find its own executable to contain judges: {error}");
            return 2;
        }
    }
    let signals = block_termination_signals();
    // Ready: the config is good. What follows touches the state dir (the
    // epoch, the audit chain), which the previous server, during an
    // upgrade, still owns until the supervisor says `go`.
    let kept_views = match control.ready_and_wait_for_go() {
        Ok(kept_views) => kept_views,
        Err(error) => {
            eprintln!("permfs serve: the supervisor did not say go: {error}");
            return 2;
        }
    };
    // Ids must never repeat across lifetimes (`session/store/epoch.rs`): the
    // epoch is claimed, durably, before anything can be asked.
    let epoch = match crate::session::store::epoch::claim_next(&state_dir) {
        Ok(epoch) => {
            tracing::info!(epoch, "ask ids start with this epoch");
            authority.set_epoch(epoch);
            epoch
        }
        Err(error) => {
            eprintln!("permfs mount: {error}");
            return 2;
        }
    };
    let audit_path = state_dir.join("audit.log");
    match crate::session::observe::audit::AuditLog::open_with(&audit_path, options.audit_sync) {
        Ok(log) => authority.set_audit(Arc::new(log)),
        Err(error) => {
            eprintln!(
                "permfs mount: cannot open the audit log {}: {error}",
                audit_path.display()
            );
            return 2;
        }
    }
    tracing::info!(audit = %audit_path.display(), "recording decisions");
    // What the previous process left (sessions, grants, pending asks,
    // kept answers) comes back before anything is served; every change
    // from now on is journaled before it is acknowledged.
    let journal =
        match crate::session::store::journal::Journal::open(&state_dir, options.audit_sync) {
            Ok(journal) => Arc::new(journal),
            Err(error) => {
                eprintln!("permfs mount: {error}");
                return 2;
            }
        };
    // Judges attached through the previous server, attached again first,
    // so a review under way at its death is walked again to them.
    let kept_judges = if hello.takeover {
        judges::read(&state_dir)
    } else {
        Default::default()
    };
    for (name, handles) in &kept_judges {
        authority.restore_judge(name, handles.len());
    }
    let started = Instant::now();
    let kept_leases = match authority.restore(Arc::clone(&journal), hello.takeover) {
        Ok(restored) => {
            tracing::info!(
                journal = %journal.path().display(),
                sessions = restored.sessions,
                grants = restored.grants,
                pending = restored.pending,
                answers = restored.answers,
                ended_leases = restored.ended_leases.len(),
                kept_leases = restored.kept_leases.len(),
                unreadable = restored.unreadable,
                ms = started.elapsed().as_secs_f64() * 1000.0,
                "restored from the journal"
            );
            restored.kept_leases
        }
        Err(error) => {
            eprintln!("permfs mount: {error}");
            return 2;
        }
    };
    // Roots from the config that the journal did not bring back.
    for (name, spec) in roots {
        if authority.has_session(&name) {
            continue;
        }
        if let Err(error) = authority.add_root(&name, spec, &cwd) {
            eprintln!("permfs mount: cannot create root session {name:?}: {error}");
            return 2;
        }
    }
    let filesystem = fs::PermFs::with_inode_key(
        Arc::clone(&authority),
        Some(audit_path),
        options.threads.max(1),
        hello.key,
    );
    filesystem.start_handles_at_epoch(epoch);
    // Leases whose `ctl` handles outlived the previous server: ended when
    // those handles close, as before.
    filesystem.adopt_leases(kept_leases);
    filesystem.adopt_judges(&state_dir, &kept_judges);
    let views = Arc::new(crate::view::Views::new(
        &state_dir,
        Arc::clone(&authority),
        owner,
        options.allow_other,
    ));
    // No view shows the state dir or the mount, wherever a view's root
    // holds them (`view/hidden.rs`).
    crate::view::hide_dir(&state_dir);
    crate::view::hide_mount(
        &absolute(mountpoint.to_path_buf()),
        supervisor::mount_device(mountpoint).ok(),
    );
    let kernel_keeper = hello.keeper.as_ref().and_then(|k| k.try_clone().ok());
    if let Some(keeper) = hello.keeper {
        views.set_keeper(keeper);
    }
    // Views the previous server served, their connections kept by the
    // supervisor: served again before anything else, so an open the dead
    // server had read is re-sent here.
    let kept_kernel = views.adopt(kept_views);
    let _ = filesystem.views.set(Arc::clone(&views));
    match crate::kernel::available() {
        Ok(()) => {
            let kernel = crate::kernel::Kernel::new(Arc::clone(&authority), kernel_keeper);
            // Sandboxes the previous server judged: their groups and
            // listeners were kept, so nothing they waited on was allowed.
            kernel.adopt(kept_kernel);
            let _ = filesystem.kernel.set(kernel);
        }
        Err(reason) => {
            if !kept_kernel.is_empty() {
                tracing::error!(%reason, "kernel-mechanism sandboxes were kept but this server cannot judge them: their calls wait until they are killed");
                // Held for the server's life: closing a fanotify group
                // would allow everything it holds.
                std::mem::forget(kept_kernel);
            }
            tracing::info!(%reason, "the kernel mechanism is not available: permfs run uses FUSE views")
        }
    }
    let woken = Arc::clone(&filesystem.woken);
    authority.set_release_pacer(move || parking::pace_release(&woken));
    let parked_at_exit = Arc::clone(&filesystem.parked);
    let notifier = Arc::clone(&filesystem.notifier);
    // Issue 26 part A's seam: `Authority::restore(&state_dir)` belongs
    // before this point (after the epoch and the audit log, which the
    // restore continues), so the sessions it brings back are adopted by
    // the numbers the kernel knows them by.
    // Names a previous server created and had not asked, and requests
    // written on them: kept in the new log while no ask has them.
    let mut prior_drafts = drafts::Logged::default();
    if hello.takeover {
        let logged = drafts::DraftLog::read(&state_dir);
        prior_drafts.names = logged
            .names
            .into_iter()
            .filter(|(_, session, rid)| !authority.outbox_contains(session, rid))
            .collect();
        prior_drafts.bodies = logged
            .bodies
            .into_iter()
            .filter(|((session, rid), _)| !authority.outbox_contains(session, rid))
            .collect();
        prior_drafts.partials = logged
            .partials
            .into_iter()
            .filter(|((session, rid), _)| !authority.outbox_contains(session, rid))
            .collect();
    }
    let _ = filesystem
        .draft_log
        .set(drafts::DraftLog::start(&state_dir, &prior_drafts));
    if hello.takeover {
        filesystem.recover_requests(prior_drafts.bodies.clone(), prior_drafts.partials.clone());
        let adopted = filesystem.adopt_prior_nodes(&prior_drafts.names);
        tracing::info!(
            adopted,
            drafts = prior_drafts.names.len(),
            requests = prior_drafts.bodies.len(),
            "taking over the connection of a previous server"
        );
    }
    let mut config = Config::default();
    if owner == 0 || options.allow_other {
        config.acl = SessionACL::All;
    }
    config.n_threads = Some(options.threads.max(1));
    let started = start_session(
        filesystem,
        fd,
        config,
        mountpoint,
        hello.takeover,
        &notifier,
    );
    let session = match started {
        Ok(session) => session,
        Err(error) => {
            eprintln!(
                "permfs mount: cannot serve the mount at {}: {error}",
                mountpoint.display()
            );
            return 1;
        }
    };
    if let Err(error) = control.serving() {
        tracing::warn!(%error, "cannot tell the supervisor this server serves");
    }
    tracing::info!(mountpoint = %mountpoint.display(), takeover = hello.takeover, "permfs serving");

    let stop = Arc::new(AtomicBool::new(false));
    // Asks past their deadline end in their timeout answer. (A reader
    // that gets a signal is the kernel's business: its FUSE_INTERRUPT
    // reaches `PermFs::interrupt`.)
    let expiry = {
        let stop = Arc::clone(&stop);
        let authority = Arc::clone(&authority);
        std::thread::Builder::new()
            .name("permfs-expire".into())
            .spawn({
                let views = Arc::clone(&views);
                move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(EXPIRE_INTERVAL);
                        authority.expire(Instant::now());
                        // Views of sessions ended some other way (a parent
                        // ended, say).
                        views.sweep();
                    }
                }
            })
    };

    // Configured judges run on a thread per review (bounded); an ask
    // waiting for one holds no thread of its own.
    let reviews = {
        let stop = Arc::clone(&stop);
        let authority = Arc::clone(&authority);
        std::thread::Builder::new()
            .name("permfs-reviews".into())
            .spawn(move || crate::session::walk::review::serve_reviews(authority, stop))
    };

    // A grant covering thousands of asks answers its decider after the
    // first chunk; the rest are released here, paced.
    let releases = {
        let stop = Arc::clone(&stop);
        let authority = Arc::clone(&authority);
        std::thread::Builder::new()
            .name("permfs-release".into())
            .spawn(move || authority.serve_releases(&stop))
    };

    // SIGHUP re-reads the global config (an edit is also picked up on its
    // own, within a quarter second); SIGINT and SIGTERM stop.
    let signal = loop {
        let Some(signal) = wait_for_termination(&signals, || session.guard.is_finished()) else {
            tracing::warn!("the mount was taken away (unmounted from outside): stopping");
            break None;
        };
        if signal != libc::SIGHUP {
            break Some(signal);
        }
        match authority.reload_global() {
            None => tracing::info!("SIGHUP: the global config was re-read"),
            Some(error) => {
                tracing::error!(%error, "SIGHUP: the global config is invalid; failing closed")
            }
        }
    };
    // Pending asks stay pending in the journal: the next start on this
    // state dir puts them back in their inboxes. (Without a journal they
    // would be answered `cancelled`.)
    if authority.is_journaled() {
        tracing::info!(
            ?signal,
            "stopping: pending asks stay in the journal; unmounting"
        );
        authority.sync_journal();
    } else {
        tracing::info!(?signal, "stopping: answering pending asks and unmounting");
        authority.cancel_all();
    }
    // Readers still parked (judges waiting for reviews, event watchers) are
    // released so the mount is not busy.
    parking::release_all(&parked_at_exit, Errno::from_i32(libc::ESHUTDOWN));
    stop.store(true, Ordering::Relaxed);
    if let Ok(handle) = expiry {
        let _ = handle.join();
    }
    if let Ok(handle) = reviews {
        let _ = handle.join();
    }
    if let Ok(handle) = releases {
        let _ = handle.join();
    }
    // No judge outlives the daemon.
    crate::session::chain::kill_running_judges();
    views.close_all();
    // The supervisor unmounts: it holds the descriptor too. The session's
    // threads, blocked reading it, end with the process.
    match signal {
        None => EXIT_MOUNT_GONE,
        Some(_) => 0,
    }
}

/// Starts the FUSE session on `fd`: with the `INIT` handshake for the
/// first server of a connection, without it (and with the kernel asked to
/// re-send what the dead server had read) for a server that takes over.
fn start_session(
    filesystem: fs::PermFs,
    fd: std::os::fd::OwnedFd,
    config: Config,
    mountpoint: &Path,
    takeover: bool,
    notifier: &std::sync::OnceLock<fuser::Notifier>,
) -> std::io::Result<fuser::BackgroundSession> {
    // The mount is fenced off from the daemon's own path lookups (facts,
    // config layers, cwds; see `facts::fence`) before any request is
    // served: a handler that looked inside its own mount would wait for a
    // request only another handler could answer. By the device number the
    // mount table gives: a `stat` of the mount point would wait for a
    // server, and this is the server.
    let device = supervisor::mount_device(mountpoint)?;
    crate::facts::fence::fence_device(device);
    tracing::debug!(
        device,
        "the mount is fenced off from the daemon's own lookups"
    );
    let acl = config.acl;
    let session = if takeover {
        fuser::Session::from_fd_initialized(filesystem, fd, acl, config)
    } else {
        fuser::Session::from_fd(filesystem, fd, acl, config)?
    };
    let kernel = session.notifier();
    if takeover {
        // What the dead server had read and not answered goes back to the
        // pending queue, to be read by this one.
        match kernel.resend() {
            Ok(()) => tracing::info!("asked the kernel to re-send requests in flight"),
            Err(error) => tracing::warn!(
                %error,
                "the kernel cannot re-send requests in flight (Linux < 6.9?): their callers wait until interrupted"
            ),
        }
    }
    // The filesystem fills decided responses' pages through it.
    let _ = notifier.set(kernel);
    session.spawn()
}

/// A mount point whose daemon died answers every call with `ENOTCONN`
/// ("Transport endpoint is not connected"). Detach it so a new daemon can
/// mount there, or say exactly what to run.
pub(crate) fn clean_dead_mount(mountpoint: &Path) -> Result<(), String> {
    let not_connected = |result: std::io::Result<()>| {
        result.is_err_and(|e| e.raw_os_error() == Some(libc::ENOTCONN))
    };
    // The kernel may answer `stat` from its attribute cache for a moment
    // after the daemon died; listing the directory always asks it.
    let dead = not_connected(std::fs::metadata(mountpoint).map(drop))
        || not_connected(std::fs::read_dir(mountpoint).map(drop));
    if !dead {
        return Ok(());
    }
    match fusermount::unmount_lazily(mountpoint) {
        Ok(()) => {
            tracing::warn!(mountpoint = %mountpoint.display(), "detached a dead FUSE mount left by a daemon that died");
            Ok(())
        }
        Err(detach) => Err(format!(
            "{} is a dead FUSE mount (its daemon died) and could not be detached ({detach}); run: fusermount3 -u -z {}",
            mountpoint.display(),
            mountpoint.display()
        )),
    }
}
