//! `permfs trust [DIR]`: the operator trusts a project's layers as they
//! are now (direnv's `allow`). The digest of every project layer file
//! under DIR is recorded in the state dir's `trust.json`; the daemon lets
//! those files widen authority only while their content is the one
//! recorded. `--revoke` forgets DIR, `--list` shows every record and
//! whether its files still match.

use crate::policy::trust::{digest, layer_files, record_for, store_file, Records};
use clap::Args;
use serde_json::json;
use std::path::{Path, PathBuf};

#[derive(Debug, Args)]
pub struct TrustArgs {
    /// The project directory (a session's cwd; default: the current one).
    pub dir: Option<PathBuf>,
    /// Forget DIR: its layers may only narrow again.
    #[arg(long, conflicts_with = "list")]
    pub revoke: bool,
    /// Show every trusted directory and whether its files still match.
    #[arg(long)]
    pub list: bool,
    /// The daemon's state dir (default: $XDG_STATE_HOME/permfs, or
    /// ~/.local/state/permfs, as `permfs mount`).
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
}

pub fn run(args: TrustArgs) -> i32 {
    match trust(args) {
        Ok(()) => 0,
        Err(message) => {
            eprintln!("permfs trust: {message}");
            1
        }
    }
}

fn trust(args: TrustArgs) -> Result<(), String> {
    let state_dir = args
        .state_dir
        .clone()
        .unwrap_or_else(crate::mount::default_state_dir);
    let store = store_file(&state_dir);
    let mut records = Records::load(&store)?;
    if args.list {
        for record in &records.trusted {
            println!("{}", status(record));
        }
        return Ok(());
    }
    let given = match &args.dir {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().map_err(|e| format!("the current directory: {e}"))?,
    };
    if args.revoke {
        // A directory that is gone can still be forgotten.
        let dir = crate::facts::fence::canonicalize_lenient(&given).unwrap_or(given);
        if !records.revoke(&dir) {
            return Err(format!("{} was not trusted", dir.display()));
        }
        records.save(&store)?;
        eprintln!(
            "permfs trust: {} revoked: its layers may only narrow now",
            dir.display()
        );
        return Ok(());
    }
    let dir = crate::facts::fence::canonicalize(&given)
        .map_err(|e| format!("{}: {e}", given.display()))?;
    if !dir.is_dir() {
        return Err(format!("{} is not a directory", dir.display()));
    }
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let record = record_for(&dir, uid)?;
    if record.files.is_empty() {
        eprintln!(
            "permfs trust: {} holds no project layer yet; trusted as empty (a layer added later is untrusted until trusted again)",
            dir.display()
        );
    }
    let shown = status(&record);
    records.trust(record);
    records.save(&store)?;
    println!("{shown}");
    eprintln!(
        "permfs trust: {} trusted as it is now (recorded in {}); a changed or new layer file is untrusted until you trust it again",
        dir.display(),
        store.display()
    );
    Ok(())
}

/// A record with each file's state now: `trusted`, `changed`, `gone`,
/// and layer files that are there but not recorded (`untrusted`).
fn status(record: &crate::policy::trust::Record) -> serde_json::Value {
    let mut files = serde_json::Map::new();
    for (file, pinned) in &record.files {
        let now = match crate::facts::fence::read(file) {
            Ok(bytes) if digest(&bytes) == *pinned => "trusted",
            Ok(_) => "changed",
            Err(_) => "gone",
        };
        files.insert(
            file.display().to_string(),
            json!({"digest": pinned, "now": now}),
        );
    }
    for file in unrecorded(&record.dir, record) {
        files.insert(file.display().to_string(), json!({"now": "untrusted"}));
    }
    json!({
        "dir": record.dir,
        "trustedAt": record.trusted_at,
        "trustedByUid": record.trusted_by_uid,
        "files": files,
    })
}

fn unrecorded(dir: &Path, record: &crate::policy::trust::Record) -> Vec<PathBuf> {
    let (mut candidates, agents) = layer_files(dir);
    if let Ok(entries) = std::fs::read_dir(&agents) {
        candidates.extend(
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "md")),
        );
    }
    candidates
        .into_iter()
        .filter(|f| !record.files.contains_key(f) && f.exists())
        .collect()
}
