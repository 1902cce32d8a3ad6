//! Mounting and unmounting through `fusermount3`, for a daemon that is
//! not root, and cleaning up a mount point whose daemon died.
//!
//! An ordinary user may not call `mount(2)`, and on many systems may not
//! open `/dev/fuse` either (mode 0600). The standard way, libfuse's, is
//! the setuid helper `fusermount3`: it opens the device, mounts it, and
//! hands the open descriptor back over a Unix socket named by
//! `_FUSE_COMMFD`. fuser 0.18 opens the device itself before it would
//! fall back to the helper, so permfs runs the helper itself and gives the
//! descriptor to `fuser::Session::from_fd`.

use nix::sys::socket::{
    recvmsg, socketpair, AddressFamily, ControlMessageOwned, MsgFlags, SockFlag, SockType,
};
use std::io::{Error, ErrorKind, IoSliceMut, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::process::{Command, Stdio};

/// The helper: `$FUSERMOUNT_PATH`, else `fusermount3` on `PATH`.
fn helper() -> std::ffi::OsString {
    std::env::var_os("FUSERMOUNT_PATH").unwrap_or_else(|| "fusermount3".into())
}

/// Mounts FUSE filesystem `name` (its `fsname` and subtype) at
/// `mountpoint` with `options` besides, and returns the `/dev/fuse`
/// descriptor that serves it: with `mount(2)` as root (no setuid programs,
/// no devices, open to every uid: the filesystem checks who asks), through
/// `fusermount3` otherwise (`allow_other` only when asked for).
pub fn mount_as(
    mountpoint: &Path,
    name: &str,
    options: &[&str],
    owner: u32,
    allow_other: bool,
) -> Result<OwnedFd> {
    if owner != 0 {
        let mut all = vec![format!("fsname={name}"), format!("subtype={name}")];
        all.extend(options.iter().map(|o| o.to_string()));
        if allow_other {
            all.push("allow_other".into());
        }
        return mount(mountpoint, &all.join(","));
    }
    let device = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")?;
    let fd = OwnedFd::from(device);
    let mut data = format!("fd={},rootmode=40000,user_id=0,group_id=0", fd.as_raw_fd());
    for option in options.iter().chain(&["allow_other"]) {
        data.push(',');
        data.push_str(option);
    }
    nix::mount::mount(
        Some(name),
        mountpoint,
        Some(format!("fuse.{name}").as_str()),
        nix::mount::MsFlags::MS_NODEV | nix::mount::MsFlags::MS_NOSUID,
        Some(data.as_str()),
    )?;
    Ok(fd)
}

/// Mounts a FUSE filesystem at `mountpoint` with `options` (comma
/// separated, as `mount -o` takes them) and returns the `/dev/fuse`
/// descriptor that serves it.
pub fn mount(mountpoint: &Path, options: &str) -> Result<OwnedFd> {
    check_device_access()?;
    // Our end is close-on-exec; the helper's end must survive exec.
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::empty(),
    )?;
    nix::fcntl::fcntl(
        &ours,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    )?;
    let child = Command::new(helper())
        .arg("-o")
        .arg(options)
        .arg("--")
        .arg(mountpoint)
        .env("_FUSE_COMMFD", theirs.as_raw_fd().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            Error::new(
                e.kind(),
                format!(
                    "cannot run {}: {e} (install the fuse3 package)",
                    helper().to_string_lossy()
                ),
            )
        })?;
    drop(theirs);
    let received = receive_descriptor(&ours);
    let output = child.wait_with_output()?;
    match received {
        Ok(fd) if output.status.success() => Ok(fd),
        Ok(_) | Err(_) => Err(Error::other(format!(
            "{} failed ({}): {}",
            helper().to_string_lossy(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))),
    }
}

/// `fusermount3` opens `/dev/fuse` with the user's own rights (it drops
/// its setuid privilege for that), so a device the user cannot open ends
/// every unprivileged mount. Say so, and what fixes it, before trying.
fn check_device_access() -> Result<()> {
    const DEVICE: &str = "/dev/fuse";
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(DEVICE)
    {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == ErrorKind::PermissionDenied => {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(DEVICE)
                .map(|m| format!("{:o}", m.permissions().mode() & 0o777))
                .unwrap_or_else(|_| "unknown".into());
            // SAFETY: getuid cannot fail.
            let uid = unsafe { libc::getuid() };
            Err(Error::new(
                ErrorKind::PermissionDenied,
                format!(
                    "uid {uid} cannot open {DEVICE} (mode {mode}); an ordinary user mounts FUSE \
                     through fusermount3, which needs the device readable and writable by that \
                     user: distributions ship it 0666 (`chmod 0666 {DEVICE}`, or a udev rule / \
                     group for it), or run permfs as root"
                ),
            ))
        }
        Err(error) => Err(Error::new(
            error.kind(),
            format!("cannot open {DEVICE}: {error}"),
        )),
    }
}

/// Reads the one descriptor the helper sends.
fn receive_descriptor(socket: &OwnedFd) -> Result<OwnedFd> {
    let mut byte = [0u8; 1];
    let mut iov = [IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!(RawFd);
    let message = recvmsg::<()>(
        socket.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    for control in message.cmsgs()? {
        if let ControlMessageOwned::ScmRights(fds) = control {
            if let Some(&fd) = fds.first() {
                // SAFETY: the kernel just gave us this descriptor; nothing
                // else owns it.
                return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
            }
        }
    }
    Err(Error::new(
        ErrorKind::UnexpectedEof,
        "the mount helper sent no descriptor",
    ))
}

/// Detaches the mount at `mountpoint` (lazily: open files stay usable
/// until closed). Root detaches it directly; others ask the helper.
pub fn unmount_lazily(mountpoint: &Path) -> Result<()> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return nix::mount::umount2(mountpoint, nix::mount::MntFlags::MNT_DETACH)
            .map_err(Error::from);
    }
    let output = Command::new(helper())
        .args(["-u", "-z", "--"])
        .arg(mountpoint)
        .stdin(Stdio::null())
        .output()?;
    if output.status.success() {
        Ok(())
    } else {
        Err(Error::other(
            String::from_utf8_lossy(&output.stderr).trim().to_string(),
        ))
    }
}
