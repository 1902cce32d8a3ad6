//! What a person allowed at Codex's `PreToolUse`, remembered for the
//! `PermissionRequest` of the same call.
//!
//! Codex takes no `allow` at `PreToolUse`: a call permfs allowed goes on
//! to Codex's own approval step, which asks the `PermissionRequest` hook
//! before prompting. permfs judges the call again there; a rule or a grant
//! answers the same at once, but an ask a person decided with a one-time
//! `allow` would reach the person a second time. So the hook notes each
//! `PreToolUse` allow here (one file per call: the agent session, the
//! asking session and the request), and the `PermissionRequest` of the
//! same call within [`MEMO_TTL`] takes it, once.
//!
//! The note is in a directory of the user's own (0700, checked), so the
//! agent, running as that user, could write one; it gains nothing by it:
//! Codex runs `PreToolUse` before the approval step of every call, so a
//! note only ever skips Codex's prompt for a call permfs already let
//! through, never a call permfs denied. Any trouble with the directory
//! means no note: permfs is asked again.

use sha2::{Digest, Sha256};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::PathBuf;
use std::time::Duration;

/// How long a note answers: longer than Codex takes from `PreToolUse` to
/// its approval step, shorter than a person would remember the call.
pub const MEMO_TTL: Duration = Duration::from_secs(600);

/// The notes' directory, when it is safely the user's own.
fn dir() -> Option<PathBuf> {
    // SAFETY: getuid has no failure mode.
    let uid = unsafe { libc::getuid() };
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = base.join(format!("permfs-hook-{uid}"));
    let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
    let meta = std::fs::symlink_metadata(&dir).ok()?;
    (meta.is_dir() && meta.uid() == uid && meta.mode() & 0o077 == 0).then_some(dir)
}

/// The note's name for one call.
fn key(agent_session: &str, asker: &str, request: &serde_json::Value) -> String {
    let mut request = request.clone();
    // The message carries the event's own ids and mode, which differ
    // between the two events of one call.
    if let Some(object) = request.as_object_mut() {
        object.remove("message");
    }
    let mut hash = Sha256::new();
    for part in [agent_session, asker, &request.to_string()] {
        hash.update(part.as_bytes());
        hash.update([0]);
    }
    hex::encode(hash.finalize())
}

/// Notes that permfs allowed this call, with the reason it gave.
pub fn remember(agent_session: &str, asker: &str, request: &serde_json::Value, reason: &str) {
    let Some(dir) = dir() else { return };
    let path = dir.join(key(agent_session, asker, request));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut file| std::io::Write::write_all(&mut file, reason.as_bytes()));
    if let Err(error) = written {
        tracing::debug!(%error, "no note of the allow; PermissionRequest will ask permfs again");
    }
}

/// Takes the note of this call, when one younger than [`MEMO_TTL`] is
/// there: the reason permfs allowed it with.
pub fn take(agent_session: &str, asker: &str, request: &serde_json::Value) -> Option<String> {
    let path = dir()?.join(key(agent_session, asker, request));
    let meta = std::fs::symlink_metadata(&path).ok()?;
    let reason = std::fs::read_to_string(&path).ok();
    // Taken once, whatever follows.
    std::fs::remove_file(&path).ok()?;
    let fresh = meta
        .modified()
        .ok()
        .and_then(|m| m.elapsed().ok())
        .is_some_and(|age| age < MEMO_TTL);
    if !meta.is_file() || meta.nlink() != 1 || !fresh {
        return None;
    }
    reason
}
