//! The `permfs` command line: thin wrappers over the library.

pub mod audit;
pub mod check_config;
pub mod hook;
pub mod hook_config;
pub mod hook_event;
pub mod hook_install;
pub mod hook_memo;
pub mod mount;
pub mod mount_client;
pub mod prompt;
pub mod resolve;
pub mod run;
pub mod status;
pub mod trust;
pub mod untrusted;
pub mod wall;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "permfs",
    version,
    about = "The permission authority for a tree of AI agent sessions",
    after_help = "The book: docs/SUMMARY.md (start at README.md). Each command's --help names its page."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Evaluate requests (JSON lines on stdin) against a config, offline.
    #[command(after_help = "See docs/configuration.md.")]
    Resolve(resolve::ResolveArgs),
    /// Validate config files and agent files; print the rules they compose to.
    #[command(after_help = "See docs/configuration.md.")]
    CheckConfig(check_config::CheckConfigArgs),
    /// Work with the audit log.
    #[command(after_help = "See docs/operations.md (the audit log) and docs/audit.md.")]
    #[command(subcommand)]
    Audit(audit::AuditCommand),
    /// Mount the permission authority at MOUNTPOINT (foreground). A small
    /// supervisor holds the mount and runs the server; a server that dies
    /// is replaced on the same mount (callers see a pause). SIGINT/SIGTERM
    /// stop and unmount, SIGHUP re-reads the config, SIGUSR2 (or
    /// `--upgrade`) replaces the server with the binary on disk.
    #[command(after_help = "See docs/operations.md and docs/restart.md.")]
    Mount(mount::MountArgs),
    /// The supervisor's and the server's pids, uptime, restarts, sessions,
    /// pending asks and the journal's size, of a running mount.
    #[command(after_help = "See docs/operations.md.")]
    Status(status::StatusArgs),
    /// Internal: one server of a mount, started by `permfs mount` with the
    /// mount's descriptor.
    #[command(hide = true)]
    Serve(mount::ServeArgs),
    /// Decide pending asks in the terminal: the queue below a session, one
    /// ask per screen, keys to allow or deny (decisions go to the inbox).
    #[command(after_help = "See docs/deciding.md.")]
    Prompt(prompt::PromptArgs),
    /// The command hook for Claude Code and Codex: one event on stdin,
    /// the decision on stdout (never `allow` unless permfs allowed).
    Hook(hook::HookArgs),
    /// Run COMMAND in a bubblewrap sandbox as a new child session: it sees
    /// the session at /permfs, its cwd at the same path through the
    /// enforcement view (every open, create, rename, link and unlink judged
    /// by the session: deny is EACCES, ask waits for an answer; --no-view
    /// binds it plainly), the system read-only under a Landlock wall,
    /// nothing else of the mount; the session ends with it. The view does
    /// not see the network, processes or devices. Its cost: reads and
    /// writes at native speed, but every open is a round trip to the daemon
    /// (tens of microseconds; BENCHMARKS.md, "View").
    #[command(after_help = "See docs/sandbox.md (and docs/pi.md for --pi).")]
    Run(run::RunArgs),
    /// Trust a project's layers (its .permfs/, .pi/ configs and agent
    /// files) as they are now, so their allow rules count; pinned by
    /// digest in the state dir. `--revoke` forgets, `--list` shows.
    #[command(after_help = "See docs/configuration.md, \"Trusted layers\".")]
    Trust(trust::TrustArgs),
    /// Internal: runs a command judge under a subreaper that kills
    /// everything it started when the review ends (the daemon starts it).
    #[command(hide = true)]
    JudgeReaper(JudgeReaperArgs),
    /// Internal: applies `permfs run`'s Landlock wall inside the sandbox,
    /// then execs the command.
    #[command(hide = true)]
    Wall(wall::WallArgs),
}

#[derive(Debug, clap::Args)]
pub struct JudgeReaperArgs {
    /// The read end of the daemon's lifeline pipe.
    pub lifeline: i32,
    /// The judge command and its arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}
