//! `permfs wall`: the second wall inside `permfs run`'s sandbox.
//!
//! bubblewrap builds the sandbox's filesystem (system directories
//! read-only, the views, the session directory, a few tmpfs); this then
//! applies a Landlock ruleset to itself and execs the command, so that
//! even what bubblewrap shows is reachable only as listed: system
//! directories for reading and running, the views and scratch places for
//! writing. A path outside them is refused by the kernel, whatever
//! namespace trick brought it into view. It runs inside the sandbox, after
//! bubblewrap's mounts (a Landlock-restricted process may not mount), and
//! is best effort where the kernel's Landlock is older (its ABI decides
//! how much is enforced, and that is said once).

use landlock::{
    path_beneath_rules, Access, AccessFs, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus,
    ABI,
};
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct WallArgs {
    /// Readable and runnable beneath DIR.
    #[arg(long = "read", value_name = "DIR")]
    pub read: Vec<PathBuf>,
    /// Readable, runnable and writable beneath DIR.
    #[arg(long = "write", value_name = "DIR")]
    pub write: Vec<PathBuf>,
    /// The kernel mechanism: install the seccomp filter and hand its
    /// listener and this Landlock ruleset to the daemon through the
    /// session's `ctl` (at `/permfs/ctl`) before the command runs.
    #[arg(long)]
    pub kernel: bool,
    /// The command, after `--`.
    #[arg(last = true, required = true)]
    pub command: Vec<OsString>,
}

/// The newest ABI this build knows; an older kernel gets what it has.
const ABI_WANTED: ABI = ABI::V6;

pub fn run(args: WallArgs) -> i32 {
    match restrict(&args) {
        Ok((RulesetStatus::FullyEnforced, ruleset)) => {
            if args.kernel {
                if let Err(error) = enforce(ruleset) {
                    eprintln!("permfs run: the kernel mechanism could not start: {error}");
                    return super::run::FAILED;
                }
            }
        }
        Ok(_) if args.kernel => {
            eprintln!("permfs run: the kernel mechanism needs the kernel's full Landlock (ABI 6 or later); use --mechanism fuse");
            return super::run::FAILED;
        }
        Ok((status, _)) => {
            eprintln!("permfs run: the kernel's Landlock enforces the second wall only in part ({status:?}); the view still judges every open");
        }
        Err(error) => {
            eprintln!("permfs run: the second wall (Landlock) could not be applied: {error}");
            return super::run::FAILED;
        }
    }
    let Some((program, rest)) = args.command.split_first() else {
        return super::run::FAILED;
    };
    let error = std::process::Command::new(program).args(rest).exec();
    eprintln!("permfs run: {}: {error}", program.to_string_lossy());
    if error.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    }
}

/// Applies the ruleset; returns its status and, for the kernel mechanism,
/// a copy of the ruleset (the daemon's workers take the same wall).
fn restrict(
    args: &WallArgs,
) -> Result<(RulesetStatus, Option<std::os::fd::OwnedFd>), landlock::RulesetError> {
    let all = AccessFs::from_all(ABI_WANTED);
    let read = AccessFs::from_read(ABI_WANTED);
    let created = Ruleset::default()
        .handle_access(all)?
        .create()?
        // A directory this sandbox lacks (`/lib32`, say) is no rule.
        .add_rules(path_beneath_rules(
            args.read.iter().filter(|p| p.exists()),
            read,
        ))?
        .add_rules(path_beneath_rules(
            args.write.iter().filter(|p| p.exists()),
            all,
        ))?;
    // A copy the ruleset cannot be made of leaves the daemon's workers
    // without it: the daemon then refuses the sandbox (`enforce` below
    // names no ruleset, and the kernel mechanism requires one).
    let copy = if args.kernel {
        created
            .try_clone()
            .ok()
            .and_then(Option::<std::os::fd::OwnedFd>::from)
    } else {
        None
    };
    let status = created.restrict_self()?;
    Ok((status.ruleset, copy))
}

/// Installs the kernel mechanism's seccomp filter and tells the daemon,
/// which takes the listener and the ruleset from this process and marks
/// the sandbox's mounts before the write returns. The listener is closed
/// here before the command runs (it would let the command answer its own
/// calls).
fn enforce(ruleset: Option<std::os::fd::OwnedFd>) -> Result<(), String> {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    let ctl_path = std::path::Path::new(super::run::SESSION_PATH).join("ctl");
    // Opened before the filter: an open for writing is one of the calls
    // the filter sends to the daemon, which has no listener yet.
    let mut ctl = std::fs::OpenOptions::new()
        .write(true)
        .open(&ctl_path)
        .map_err(|e| format!("{}: {e}", ctl_path.display()))?;
    let listener = crate::kernel::filter::install().map_err(|e| format!("seccomp: {e}"))?;
    let mut line = format!("enforce listener={}", listener.as_raw_fd());
    if let Some(ruleset) = &ruleset {
        line.push_str(&format!(" ruleset={}", ruleset.as_raw_fd()));
    }
    line.push('\n');
    ctl.write_all(line.as_bytes())
        .map_err(|e| format!("the daemon refused the sandbox: {e}"))?;
    drop(listener);
    drop(ruleset);
    drop(ctl);
    Ok(())
}
