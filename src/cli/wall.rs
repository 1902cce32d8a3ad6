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
    /// The command, after `--`.
    #[arg(last = true, required = true)]
    pub command: Vec<OsString>,
}

/// The newest ABI this build knows; an older kernel gets what it has.
const ABI_WANTED: ABI = ABI::V6;

pub fn run(args: WallArgs) -> i32 {
    match restrict(&args) {
        Ok(RulesetStatus::FullyEnforced) => {}
        Ok(status) => {
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

fn restrict(args: &WallArgs) -> Result<RulesetStatus, landlock::RulesetError> {
    let all = AccessFs::from_all(ABI_WANTED);
    let read = AccessFs::from_read(ABI_WANTED);
    let status = Ruleset::default()
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
        ))?
        .restrict_self()?;
    Ok(status.ruleset)
}
