//! The `permfs` binary.

use clap::Parser;
use permfs::cli::{Cli, Command};

fn main() {
    // `permfs hook` runs before every tool call, and the agent waits for
    // its whole process: it builds only its own arguments (not the whole
    // command tree) and sets up no logging (it logs nothing; its answers
    // and reasons go to stdout and stderr). BENCHMARKS.md section 9.
    if std::env::args_os().nth(1).is_some_and(|a| a == "hook") {
        std::process::exit(permfs::cli::hook::main(std::env::args_os().skip(1)));
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("PERMFS_LOG")
                .unwrap_or_else(|_| "info,fuser=error".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Resolve(args) => permfs::cli::resolve::run(args),
        Command::CheckConfig(args) => permfs::cli::check_config::run(args),
        Command::Mount(args) => permfs::cli::mount::run(args),
        Command::Serve(args) => permfs::cli::mount::serve(args),
        Command::Status(args) => permfs::cli::status::run(args),
        Command::Audit(command) => permfs::cli::audit::run(command),
        Command::Prompt(args) => permfs::cli::prompt::run(args),
        Command::Hook(args) => permfs::cli::hook::run(args),
        Command::Run(args) => permfs::cli::run::run(args),
        Command::JudgeReaper(args) => {
            permfs::session::chain::reaper::run(args.lifeline, &args.command)
        }
        Command::Wall(args) => permfs::cli::wall::run(args),
        Command::Trust(args) => permfs::cli::trust::run(args),
    };
    std::process::exit(code);
}
