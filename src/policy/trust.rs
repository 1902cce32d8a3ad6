//! Which project layers the operator trusted, pinned by content.
//!
//! A project layer (`<cwd>/.pi/extensions/pi-permission-system/config.json`,
//! `<cwd>/.permfs/config.json`, `<cwd>/.pi/agents/<agent>.md`) lives where
//! agents work, so an agent can write it. Its `allow`s widen authority only
//! when the operator trusted that exact content: `permfs trust DIR` records
//! the sha256 digest of every layer file under DIR in the state dir's
//! `trust.json` (outside every agent's reach), direnv's `allow` model. A
//! file that changed, appeared or is not recorded is untrusted until it is
//! trusted anew; an untrusted layer may only narrow (see
//! `layers::PolicyLoader::build`).
//!
//! The store is one JSON file replaced in one rename, read by the daemon
//! whenever its stamp changes. Unreadable or invalid, it trusts nothing.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Whose word makes a project layer trusted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Trust {
    /// No project layer is trusted (their `allow`s never count): the
    /// default, so a loader nobody configured fails closed.
    #[default]
    Nothing,
    /// Every layer is trusted, as the reference layers them: for offline
    /// tools judging files the operator named (`permfs resolve --project`,
    /// `check-config`), which authorize nothing.
    All,
    /// The records in this state dir's `trust.json` (the daemon's).
    Store(PathBuf),
}

/// The file that holds the records, in a state dir.
pub fn store_file(state_dir: &Path) -> PathBuf {
    state_dir.join("trust.json")
}

/// One trusted directory: the digest of each layer file it held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub dir: PathBuf,
    /// Milliseconds since the epoch.
    pub trusted_at: u64,
    pub trusted_by_uid: u32,
    /// Absolute path → `sha256:<hex>` of the content trusted.
    pub files: BTreeMap<PathBuf, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Records {
    #[serde(default)]
    pub trusted: Vec<Record>,
}

/// `sha256:<hex>` of `bytes`.
pub fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

impl Records {
    /// Reads a store; a missing one holds nothing.
    pub fn load(file: &Path) -> Result<Self, String> {
        match std::fs::read(file) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| format!("{} is not a valid trust store: {e}", file.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(format!("{} cannot be read: {e}", file.display())),
        }
    }

    /// Whether `file` under `dir` with this content is trusted; if not, why.
    pub fn verdict(&self, dir: &Path, file: &Path, content_digest: &str) -> Result<(), String> {
        let Some(record) = self.trusted.iter().find(|r| r.dir == dir) else {
            return Err(format!(
                "{} was never trusted (permfs trust {})",
                dir.display(),
                dir.display()
            ));
        };
        match record.files.get(file) {
            Some(pinned) if pinned == content_digest => Ok(()),
            Some(_) => Err(format!(
                "{} changed since {} was trusted (permfs trust {} again to trust this content)",
                file.display(),
                dir.display(),
                dir.display()
            )),
            None => Err(format!(
                "{} did not exist when {} was trusted (permfs trust {} again)",
                file.display(),
                dir.display(),
                dir.display()
            )),
        }
    }

    /// Whether some record pins `file` with this content; if not, why
    /// (for `check-config`, which is given files rather than a cwd).
    pub fn verdict_for_file(&self, file: &Path, content_digest: &str) -> Result<(), String> {
        let mut pinned = self
            .trusted
            .iter()
            .filter_map(|r| r.files.get(file).map(|d| (r, d)));
        match pinned.next() {
            None => Err(format!(
                "{} is in no trusted directory (permfs trust DIR)",
                file.display()
            )),
            Some((_, d)) if d == content_digest => Ok(()),
            Some((record, _)) => Err(format!(
                "{} changed since {} was trusted (permfs trust {} again)",
                file.display(),
                record.dir.display(),
                record.dir.display()
            )),
        }
    }

    /// Replaces `dir`'s record.
    pub fn trust(&mut self, record: Record) {
        self.trusted.retain(|r| r.dir != record.dir);
        self.trusted.push(record);
        self.trusted.sort_by(|a, b| a.dir.cmp(&b.dir));
    }

    /// Drops `dir`'s record; false when there was none.
    pub fn revoke(&mut self, dir: &Path) -> bool {
        let before = self.trusted.len();
        self.trusted.retain(|r| r.dir != dir);
        self.trusted.len() != before
    }

    /// Writes the store in one rename, readable by its owner only.
    pub fn save(&self, file: &Path) -> Result<(), String> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let dir = file.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut text = serde_json::to_vec_pretty(self).map_err(|e| e.to_string())?;
        text.push(b'\n');
        let temp = dir.join(format!(".trust.json.{}", std::process::id()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)
            .and_then(|mut f| f.write_all(&text).and_then(|()| f.sync_all()));
        if let Err(e) = written.and_then(|()| std::fs::rename(&temp, file)) {
            let _ = std::fs::remove_file(&temp);
            return Err(format!("{}: {e}", file.display()));
        }
        Ok(())
    }
}

/// The layer files a project directory may hold, whether they exist or
/// not: the two project configs and the project agents directory.
pub fn layer_files(dir: &Path) -> (Vec<PathBuf>, PathBuf) {
    (
        vec![
            super::config::reference_project_config(dir),
            super::config::permfs_project_config(dir),
        ],
        super::config::reference_project_agents_dir(dir),
    )
}

/// Reads every layer file of `dir` (through the fence: never the mount,
/// never a FIFO) and pins its content.
pub fn record_for(dir: &Path, uid: u32) -> Result<Record, String> {
    let (configs, agents_dir) = layer_files(dir);
    let mut candidates = configs;
    match std::fs::read_dir(&agents_dir) {
        Ok(entries) => {
            for entry in entries.filter_map(Result::ok) {
                let path = entry.path();
                if path.extension().is_some_and(|e| e == "md") {
                    candidates.push(path);
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("{}: {e}", agents_dir.display())),
    }
    let mut files = BTreeMap::new();
    for file in candidates {
        match crate::facts::fence::read(&file) {
            Ok(bytes) => {
                files.insert(file, digest(&bytes));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("{}: {e}", file.display())),
        }
    }
    Ok(Record {
        dir: dir.to_path_buf(),
        trusted_at: crate::session::tree::ask::now_ms(),
        trusted_by_uid: uid,
        files,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_pins_content_and_a_change_untrusts() {
        let dir = tempfile::tempdir().expect("temp");
        let root = dir.path().canonicalize().expect("canonical");
        let config = root.join(".permfs/config.json");
        std::fs::create_dir_all(config.parent().expect("parent")).expect("dir");
        std::fs::write(&config, br#"{"permission":{"bash":"allow"}}"#).expect("written");
        let mut records = Records::default();
        assert!(records
            .verdict(&root, &config, &digest(b"x"))
            .is_err_and(|why| why.contains("never trusted")));
        records.trust(record_for(&root, 0).expect("record"));
        let content = std::fs::read(&config).expect("read");
        assert_eq!(records.verdict(&root, &config, &digest(&content)), Ok(()));
        assert!(records
            .verdict(&root, &config, &digest(b"{}"))
            .is_err_and(|why| why.contains("changed")));
        let agent = root.join(".pi/agents/friend.md");
        assert!(records
            .verdict(&root, &agent, &digest(b""))
            .is_err_and(|why| why.contains("did not exist")));
        let store = root.join("state/trust.json");
        records.save(&store).expect("saved");
        assert_eq!(Records::load(&store), Ok(records.clone()));
        assert!(records.revoke(&root));
        assert!(!records.revoke(&root));
    }
}
