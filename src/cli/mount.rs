//! `permfs mount`: the daemon (a supervisor and the server it runs), and
//! the hidden `permfs serve` the supervisor starts.

use crate::mount::{supervisor, MountOptions};
use clap::Args;
use std::os::fd::FromRawFd;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct MountArgs {
    /// Where to mount (an existing empty directory).
    pub mountpoint: PathBuf,
    /// The global config (default: config/permfs.json when it exists).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Directory of `<agent>.md` files.
    #[arg(long)]
    pub agents_dir: Option<PathBuf>,
    /// Where the daemon keeps its state: the audit log
    /// (default: $XDG_STATE_HOME/permfs, or ~/.local/state/permfs).
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// fdatasync the audit log after every decision batch, before the
    /// decision is delivered: no recorded line is lost even to a power
    /// loss, at the cost of a disk flush per decision (by default a line
    /// is delivered once it is wholly written to the file, which survives
    /// a daemon crash but not a kernel crash).
    #[arg(long)]
    pub audit_sync: bool,
    /// FUSE worker threads (blocked readers use none).
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// When not running as root: let other uids (sandboxed agents with
    /// their own uid, a person deciding as another user) use the mount.
    /// Needs `user_allow_other` in /etc/fuse.conf.
    #[arg(long)]
    pub allow_other: bool,
    /// Do not mount: replace the server of the running `permfs mount` at
    /// MOUNTPOINT with the binary on disk (same --state-dir), without
    /// unmounting; waits until the new server serves. Same as sending
    /// SIGUSR2 to the supervisor.
    #[arg(long)]
    pub upgrade: bool,
}

impl MountArgs {
    fn options(self) -> MountOptions {
        let default_config = PathBuf::from("config/permfs.json");
        let config = self
            .config
            .or_else(|| default_config.is_file().then_some(default_config));
        MountOptions {
            mountpoint: self.mountpoint,
            config,
            agents_dir: self.agents_dir,
            state_dir: self.state_dir,
            threads: self.threads,
            allow_other: self.allow_other,
            audit_sync: self.audit_sync,
        }
    }
}

pub fn run(args: MountArgs) -> i32 {
    if args.upgrade {
        return supervisor::request_upgrade(&args.mountpoint, args.state_dir);
    }
    supervisor::run(args.options())
}

/// `permfs serve`: one server, started by the supervisor.
#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub mount: MountArgs,
    /// The `/dev/fuse` descriptor the supervisor mounted, inherited.
    #[arg(long)]
    pub fuse_fd: i32,
    /// The supervisor's control socket, inherited.
    #[arg(long)]
    pub control_fd: i32,
}

pub fn serve(args: ServeArgs) -> i32 {
    // Before any FUSE thread allocates (see retention::one_arena).
    crate::session::store::retention::one_arena();
    let control = match supervisor::Control::from_fd(args.control_fd) {
        Ok(control) => control,
        Err(error) => {
            eprintln!("permfs serve: --control-fd {}: {error}", args.control_fd);
            return 2;
        }
    };
    // SAFETY: fcntl on a descriptor number only reads its flags.
    if unsafe { libc::fcntl(args.fuse_fd, libc::F_GETFD) } < 0 {
        eprintln!(
            "permfs serve: --fuse-fd {}: {}",
            args.fuse_fd,
            std::io::Error::last_os_error()
        );
        return 2;
    }
    // SAFETY: the supervisor passed this descriptor to this process, and
    // nothing else here owns it.
    let fuse = unsafe { std::os::fd::OwnedFd::from_raw_fd(args.fuse_fd) };
    crate::mount::serve(args.mount.options(), fuse, control)
}
