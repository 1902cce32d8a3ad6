//! `permfs mount`: the daemon.

use crate::mount::{run as run_mount, MountOptions};
use clap::Args;
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
}

pub fn run(args: MountArgs) -> i32 {
    // Before any FUSE thread allocates (see retention::one_arena).
    crate::session::retention::one_arena();
    let default_config = PathBuf::from("config/permfs.json");
    let config = args
        .config
        .or_else(|| default_config.is_file().then_some(default_config));
    run_mount(MountOptions {
        mountpoint: args.mountpoint,
        config,
        agents_dir: args.agents_dir,
        state_dir: args.state_dir,
        threads: args.threads,
        allow_other: args.allow_other,
        audit_sync: args.audit_sync,
    })
}
