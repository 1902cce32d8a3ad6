//! The daemon's lifetime number (its *epoch*), folded into every ask and
//! grant id so that no id repeats across restarts.
//!
//! Ask ids name inbox files, key the audit log's lines, and are what a
//! person's decision is written to. A counter that starts at 1 on every
//! start lets an agent that survived a restart re-raise a remembered id and
//! be answered with a decision meant for another ask, and leaves the audit
//! log with two asks under one `askId` (issue 23, item 4). The epoch is a
//! counter kept in the state dir, beside the audit log it keeps unique:
//! read, incremented and made durable (written to a temporary file,
//! `fsync`ed, renamed over, the directory `fsync`ed) before the mount
//! serves anything. A file that cannot be read, holds something else than
//! a number, or cannot be written stops the daemon: it never falls back to
//! an epoch that may have been used.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The file in the state dir that holds the last epoch used.
pub const EPOCH_FILE: &str = "epoch";

/// Claims the next epoch in `state_dir` (1 for a state dir never used) and
/// records it durably before returning it.
pub fn claim_next(state_dir: &Path) -> Result<u64, String> {
    std::fs::create_dir_all(state_dir)
        .map_err(|e| format!("cannot create the state dir {}: {e}", state_dir.display()))?;
    let path = state_dir.join(EPOCH_FILE);
    let last = match std::fs::read_to_string(&path) {
        Ok(text) => text.trim().parse::<u64>().map_err(|_| {
            format!(
                "{} does not hold an epoch number ({:?}); ids could repeat, so nothing is served until it is fixed",
                path.display(),
                text.chars().take(40).collect::<String>()
            )
        })?,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => 0,
        Err(error) => return Err(format!("cannot read {}: {error}", path.display())),
    };
    let next = last
        .checked_add(1)
        .ok_or_else(|| format!("{} is exhausted ({last})", path.display()))?;
    let temporary = state_dir.join(format!(".{EPOCH_FILE}.tmp"));
    let _ = std::fs::remove_file(&temporary);
    // Owner-only, created anew: never written through a link left there.
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temporary)
        .and_then(|mut file| {
            file.write_all(format!("{next}\n").as_bytes())?;
            file.sync_all()
        })
        .and_then(|()| std::fs::rename(&temporary, &path))
        .and_then(|()| std::fs::File::open(state_dir)?.sync_all());
    if let Err(error) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(format!(
            "cannot record epoch {next} in {}: {error}",
            path.display()
        ));
    }
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_claim_is_new_and_garbage_stops() {
        let dir = tempfile::tempdir().expect("temp dir");
        assert_eq!(claim_next(dir.path()), Ok(1));
        assert_eq!(claim_next(dir.path()), Ok(2));
        std::fs::write(dir.path().join(EPOCH_FILE), "x").expect("write");
        assert!(claim_next(dir.path()).is_err());
        std::fs::write(dir.path().join("file"), "").expect("write");
        assert!(claim_next(&dir.path().join("file")).is_err());
    }
}
