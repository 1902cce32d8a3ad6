//! `permfs audit verify FILE`: check the hash chain of an audit log.

use crate::session::audit::verify;
use clap::Subcommand;
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Verify every line's hash and its link to the line before; name the
    /// first line that was edited, removed, inserted or reordered.
    Verify {
        /// The audit log (e.g. ~/.local/state/permfs/audit.log).
        file: PathBuf,
    },
}

pub fn run(command: AuditCommand) -> i32 {
    match command {
        AuditCommand::Verify { file } => match verify(&file) {
            Ok(report) => {
                println!("{}: {} lines, chain intact", file.display(), report.lines);
                if report.incomplete_tail {
                    println!("{}: the last line is incomplete (written when the daemon stopped abruptly)", file.display());
                }
                0
            }
            Err(problem) => {
                eprintln!("{}: {problem}", file.display());
                1
            }
        },
    }
}
