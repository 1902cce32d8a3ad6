//! systemd's file-descriptor store: when `permfs mount` runs as a unit
//! with `FileDescriptorStoreMax=`, the `/dev/fuse` descriptor that serves
//! the mount is handed to systemd (`sd_notify` `FDSTORE=1`), so a crash of
//! the supervisor itself does not end the mount: systemd restarts the unit
//! and passes the descriptor back (`LISTEN_FDS`, named `permfs-fuse`), and
//! the new supervisor's server takes the connection over as after a
//! server's crash (the kernel re-sends what was in flight).
//!
//! The protocol is systemd's documented one (`sd_notify(3)`,
//! `sd_listen_fds(3)`), spoken directly: a datagram with `SCM_RIGHTS` to
//! `$NOTIFY_SOCKET`, and descriptors from 3 on named by `$LISTEN_FDNAMES`
//! for the pid in `$LISTEN_PID`. Outside systemd (no `$NOTIFY_SOCKET`)
//! nothing here does anything.
//!
//! The inode numbers the kernel holds are keyed (`InodeKey`): the key is
//! kept beside the mount's status file, owner-only, so the supervisor
//! systemd starts again derives the same numbers. Without that key a
//! stored descriptor is not used: the mount is detached and made afresh
//! (callers see an error once, never a wrong file).

use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags, UnixAddr};
use std::io::IoSlice;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

/// The name the descriptor is stored under.
pub const FD_NAME: &str = "permfs-fuse";

/// The first descriptor systemd passes (`SD_LISTEN_FDS_START`).
const LISTEN_FDS_START: RawFd = 3;

/// Sends `state` to systemd's notification socket, with `fds`; `Ok(false)`
/// when not run by systemd (no `$NOTIFY_SOCKET`).
pub fn notify(state: &str, fds: &[RawFd]) -> std::io::Result<bool> {
    let Some(socket) = std::env::var_os("NOTIFY_SOCKET") else {
        return Ok(false);
    };
    let socket = socket.to_string_lossy().into_owned();
    let address = match socket.strip_prefix('@') {
        Some(abstract_name) => UnixAddr::new_abstract(abstract_name.as_bytes())?,
        None => UnixAddr::new(Path::new(&socket))?,
    };
    let sender = std::os::unix::net::UnixDatagram::unbound()?;
    let payload = [IoSlice::new(state.as_bytes())];
    let rights = [ControlMessage::ScmRights(fds)];
    let control: &[ControlMessage] = if fds.is_empty() { &[] } else { &rights };
    sendmsg(
        sender.as_raw_fd(),
        &payload,
        control,
        MsgFlags::empty(),
        Some(&address),
    )?;
    Ok(true)
}

/// Hands the FUSE descriptor to systemd's store (and says the service is
/// ready). Whether systemd was told.
pub fn store(fuse: &OwnedFd) -> std::io::Result<bool> {
    notify(
        &format!("FDSTORE=1\nFDNAME={FD_NAME}\nREADY=1\n"),
        &[fuse.as_raw_fd()],
    )
}

/// Takes the descriptor back out of systemd's store: a deliberate stop
/// unmounts, and a stored descriptor would keep the connection alive.
pub fn remove() {
    remove_named(FD_NAME);
}

fn remove_named(name: &str) {
    if let Err(error) = notify(&format!("FDSTOREREMOVE=1\nFDNAME={name}\n"), &[]) {
        tracing::warn!(%error, name, "cannot take a FUSE descriptor out of systemd's store");
    }
}

/// The prefix of an enforcement view's descriptor's name in the store;
/// the view's key follows.
const VIEW_PREFIX: &str = "permfs-view-";

/// Puts view `key`'s connection in systemd's store (beside the mount's),
/// so the view outlives the supervisor too. Whether systemd was told.
pub fn store_view(key: &str, fd: &OwnedFd) -> std::io::Result<bool> {
    notify(
        &format!("FDSTORE=1\nFDNAME={VIEW_PREFIX}{key}\n"),
        &[fd.as_raw_fd()],
    )
}

/// Takes view `key`'s connection out of systemd's store (the view ended).
pub fn remove_view(key: &str) {
    remove_named(&format!("{VIEW_PREFIX}{key}"));
}

/// What systemd passed back to this process.
pub struct Stored {
    /// The mount's connection.
    pub fuse: OwnedFd,
    /// The enforcement views' connections, by key.
    pub views: Vec<(String, OwnedFd)>,
}

/// The FUSE descriptors systemd passed back to this process, if the
/// mount's is among them (the `LISTEN_*` variables are then removed, so no
/// child reads them). Only character devices are taken.
pub fn take_stored() -> Option<Stored> {
    let pid = std::env::var("LISTEN_PID").ok()?;
    if pid.trim() != std::process::id().to_string() {
        return None;
    }
    let count: RawFd = std::env::var("LISTEN_FDS").ok()?.trim().parse().ok()?;
    let names = std::env::var("LISTEN_FDNAMES").unwrap_or_default();
    // SAFETY: single-threaded at this point of start-up (the supervisor
    // has started no thread yet), so nothing reads the environment
    // concurrently.
    unsafe {
        std::env::remove_var("LISTEN_PID");
        std::env::remove_var("LISTEN_FDS");
        std::env::remove_var("LISTEN_FDNAMES");
    }
    let mut fuse = None;
    let mut views = Vec::new();
    for (index, name) in names.split(':').enumerate() {
        let Ok(index) = RawFd::try_from(index) else {
            break;
        };
        if index >= count {
            break;
        }
        let view = name.strip_prefix(VIEW_PREFIX);
        if name != FD_NAME && view.is_none() {
            continue;
        }
        let Some(fd) = take_device(LISTEN_FDS_START + index, name) else {
            continue;
        };
        match view {
            Some(key) => views.push((key.to_string(), fd)),
            None => fuse = Some(fd),
        }
    }
    Some(Stored { fuse: fuse?, views })
}

/// Descriptor `fd` passed by systemd under `name`, if it is a device.
fn take_device(fd: RawFd, name: &str) -> Option<OwnedFd> {
    // SAFETY: fstat on a descriptor number; a closed one fails.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut stat) } != 0 || stat.st_mode & libc::S_IFMT != libc::S_IFCHR {
        tracing::warn!(
            fd,
            name,
            "systemd passed a descriptor that is not a device: ignored"
        );
        return None;
    }
    // SAFETY: systemd passed this descriptor to this process, and nothing
    // else owns it.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    // Close-on-exec like every descriptor of the supervisor's.
    // SAFETY: fcntl on a descriptor this process owns.
    unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    Some(owned)
}

/// Where the definitions of the views whose connections are in systemd's
/// store are kept, for the mount whose status file is `status`.
pub fn views_path(status: &Path) -> PathBuf {
    let mut path = status.as_os_str().to_owned();
    path.push(".views");
    PathBuf::from(path)
}

/// Writes `definitions` (one JSON text each) to `path`, owner-only.
pub fn save_views(path: &Path, definitions: &[&str]) -> std::io::Result<()> {
    let mut text = String::new();
    for definition in definitions {
        text.push_str(definition);
        text.push('\n');
    }
    replace_owner_only(path, &text)
}

/// Writes `text` to `path`, owner-only, replacing what was there at once
/// (a temporary file beside it, renamed over it).
pub fn replace_owner_only(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    let temporary = PathBuf::from(temporary);
    let _ = std::fs::remove_file(&temporary);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temporary)?;
    file.write_all(text.as_bytes())?;
    std::fs::rename(&temporary, path)
}

/// The definitions kept at `path` (none when it is missing).
pub fn load_views(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .map(|text| {
            text.lines()
                .filter(|l| !l.trim().is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Where the inode key of the mount whose status file is `status` is kept.
pub fn key_path(status: &Path) -> PathBuf {
    let mut path = status.as_os_str().to_owned();
    path.push(".key");
    PathBuf::from(path)
}

/// Keeps `key` (hex) at `path`, owner-only.
pub fn save_key(path: &Path, key: &[u8; 32]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(hex::encode(key).as_bytes())
}

/// The key kept at `path`.
pub fn load_key(path: &Path) -> Option<[u8; 32]> {
    let text = std::fs::read_to_string(path).ok()?;
    let bytes = hex::decode(text.trim()).ok()?;
    bytes.try_into().ok()
}
