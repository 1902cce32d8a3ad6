//! `permfs audit verify FILE`: check the hash chain of an audit log.
//!
//! Exit status: 0 the chain is intact; 1 tampering (a line was edited,
//! removed, inserted or reordered); 2 the file cannot be read; 3 the chain
//! is intact but its last line is torn (a write cut short by a crash or a
//! full disk: not tampering; the daemon cuts it off when it next opens
//! the log).

use crate::session::observe::audit::{verify, VerifyError};
use clap::Subcommand;
use std::path::PathBuf;

/// `audit verify`: the chain holds, and its last line is torn.
pub const EXIT_TORN_TAIL: i32 = 3;
/// `audit verify`: a line was edited, removed, inserted or reordered.
pub const EXIT_TAMPERED: i32 = 1;
/// `audit verify`: the log cannot be read.
pub const EXIT_UNREADABLE: i32 = 2;

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Verify every line's hash and its link to the line before; name the
    /// first line that was edited, removed, inserted or reordered (exit 1).
    /// A torn last line (a write cut short) is told apart: exit 3.
    #[command(after_help = "See docs/operations.md, \"Audit log\", and docs/audit.md.")]
    Verify {
        /// The audit log (e.g. ~/.local/state/permfs/audit.log).
        file: PathBuf,
    },
}

pub fn run(command: AuditCommand) -> i32 {
    match command {
        AuditCommand::Verify { file } => match verify(&file) {
            Ok(report) => match report.torn_tail {
                None => {
                    println!("{}: {} lines, chain intact", file.display(), report.lines);
                    0
                }
                Some(torn) => {
                    println!(
                        "{}: {} lines, chain intact; torn tail, not tampering: {torn} \
                         (permfs cuts it off when it next opens the log)",
                        file.display(),
                        report.lines
                    );
                    EXIT_TORN_TAIL
                }
            },
            Err(VerifyError::Tampered(problem)) => {
                eprintln!("{}: tampered: {problem}", file.display());
                EXIT_TAMPERED
            }
            Err(VerifyError::Unreadable(problem)) => {
                eprintln!("{problem}");
                EXIT_UNREADABLE
            }
        },
    }
}
