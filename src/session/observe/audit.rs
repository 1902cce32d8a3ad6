//! The tamper-evident audit log: one JSON line per decision, hash-chained.
//!
//! Each line is a compact JSON object whose last field is `hash`: the
//! SHA-256 of the line's own content (the object without `hash`), which
//! includes `prev`, the previous line's hash. Editing a line breaks its own
//! hash; removing or reordering lines breaks the next line's `prev`.
//! Lines are written with one `write(2)` per batch on an `O_APPEND`
//! descriptor, so a crash loses at most the lines being written, never an
//! earlier one.
//!
//! The log fails closed (see `docs/audit.md`): an append either lands whole
//! or not at all (a partial write is cut off again), and the caller does
//! not deliver a decision whose line did not land. A removed or replaced
//! file is noticed before each append (the path's device and inode against
//! the open file's) and reopened, its first line saying so. A torn last
//! line is told apart from tampering by [`verify`].

use aho_corasick::AhoCorasick;
use regex::Regex;
use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

/// The `prev` of the first line.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
const REDACTED: &str = "[redacted]";

/// Key names that hold secrets (the reference's list; `*key` as a word).
static SECRET_KEY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)authorization|api[-_]?keys?|private[-_]?keys?|secret|token|password|passwd|credential|cookie|(?:^|[-_])keys?(?:$|[-_])")
        .unwrap_or_else(|_| unreachable!("the secret-key pattern is valid"))
});
/// camelCase `…Key` names (`apiKey`, `signingKeys`), case-sensitive.
static CAMEL_KEY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[a-z0-9](?:Key|Keys)(?:$|[A-Z_-])")
        .unwrap_or_else(|_| unreachable!("the camel-key pattern is valid"))
});

fn is_secret_name(name: &str) -> bool {
    SECRET_KEY.is_match(name) || CAMEL_KEY.is_match(name)
}
/// `NAME=value` words and `Authorization: …` headers inside strings.
static SECRET_ASSIGNMENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?i)\b([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|'[^']*'|[^\s;&|]+)|(authorization|cookie|x-api-key):\s*[^"'\n]+"#)
        .unwrap_or_else(|_| unreachable!("the secret-assignment pattern is valid"))
});

pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// Replaces secret-looking values: whole values under secret-named keys,
/// and the value part of secret-named `NAME=value` words in strings.
pub fn redact(value: &mut Value) {
    match value {
        Value::Object(object) => {
            for (key, inner) in object.iter_mut() {
                if is_secret_name(key) && !inner.is_null() {
                    *inner = Value::String(REDACTED.into());
                } else {
                    redact(inner);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact),
        Value::String(text)
            if (text.contains('=') || text.contains(':')) && SECRET_ASSIGNMENT.is_match(text) =>
        {
            *text = SECRET_ASSIGNMENT
                .replace_all(text, |captures: &regex::Captures<'_>| {
                    match (captures.get(1), captures.get(3)) {
                        (Some(name), _) if is_secret_name(name.as_str()) => {
                            format!("{}={REDACTED}", name.as_str())
                        }
                        (_, Some(header)) => format!("{}: {REDACTED}", header.as_str()),
                        _ => captures[0].to_string(),
                    }
                })
                .into_owned();
        }
        _ => {}
    }
}

/// Words every secret-named key, `NAME=value` word and header that
/// [`redact`] replaces contains (ASCII, any case): a text holding none of
/// them has nothing to redact.
const SECRET_NEEDLES: [&[u8]; 7] = [
    b"key",
    b"secret",
    b"token",
    b"passw",
    b"credential",
    b"cookie",
    b"authorization",
];

/// The needles as one case-insensitive automaton, built once.
static SECRET_WORDS: LazyLock<Option<AhoCorasick>> = LazyLock::new(|| {
    AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .build(SECRET_NEEDLES)
        .ok()
});

/// Whether [`redact`] could change something in `text` (false means it
/// certainly would not); no regex, one pass over the bytes. Should the
/// automaton be unusable, every text is taken to hold a secret.
pub fn may_hold_secret(text: &str) -> bool {
    match SECRET_WORDS.as_ref() {
        Some(words) => words.is_match(text),
        None => true,
    }
}

/// The content of one line (what its hash covers): `entry` serialized as a
/// JSON object with `"prev"` added last. Serialized directly; only a line
/// whose text holds a secret-looking word (or a `prev` key of its own) goes
/// through a `Value` tree and [`redact`], which then gives exactly the
/// bytes it always gave. Every key name the daemon writes is free of those
/// words, so the direct text is the redacted text whenever the check
/// passes.
fn entry_content<T: Serialize>(entry: &T, prev: &str) -> std::io::Result<String> {
    let direct = serde_json::to_string(entry).map_err(std::io::Error::other)?;
    if !direct.starts_with('{') || !direct.ends_with('}') {
        return Err(std::io::Error::other("an audit entry is not a JSON object"));
    }
    if !may_hold_secret(&direct) && !direct.contains("\"prev\":") {
        let mut content = direct;
        content.pop();
        if content.len() > 1 {
            content.push(',');
        }
        content.push_str("\"prev\":");
        content.push_str(&serde_json::to_string(prev).map_err(std::io::Error::other)?);
        content.push('}');
        return Ok(content);
    }
    let mut value: Value = serde_json::from_str(&direct).map_err(std::io::Error::other)?;
    redact(&mut value);
    if let Value::Object(object) = &mut value {
        object.insert("prev".into(), Value::String(prev.to_string()));
    }
    serde_json::to_string(&value).map_err(std::io::Error::other)
}

/// Appends hash-chained lines to a file, and fails closed: an append
/// either lands whole (every line of the batch, with its newline, in the
/// kernel; and on disk too with `sync`) or leaves the file as it was, so
/// the caller can refuse to deliver what could not be recorded.
pub struct AuditLog {
    path: PathBuf,
    /// `fdatasync` after every batch (the mount's `--audit-sync`).
    sync: bool,
    inner: Mutex<Inner>,
}

/// The open file and what was last committed to it.
struct Inner {
    /// `None` once the path could not be reopened (each append retries).
    file: Option<File>,
    /// The hash of the last committed line (`prev` of the next one).
    last: String,
    /// (device, inode) of the open file: a removed or replaced log is
    /// noticed by comparing them with the path's.
    identity: (u64, u64),
    /// A failed write may have left part of a batch past the committed
    /// end, and cutting it off failed too: cut it before the next append.
    torn_at: Option<u64>,
    /// Whether the last append failed (to log the recovery once).
    failing: bool,
    /// The `audit_reopened` line owed to a reopened file: it goes first
    /// in every batch until one is written.
    note: Option<Map<String, Value>>,
    /// When the path was last compared with the open file.
    path_checked: Option<Instant>,
}

/// The log's path is compared with the open file at most this often. In
/// between, only the open file's link count is read (by the one `fstat`
/// the committed length needs anyway): an unlinked log, whose lines would
/// be lost for good, is noticed at the next append; a renamed one (a
/// rotation) within this interval, its lines meanwhile ending the renamed
/// file's chain. A path lookup per decision was a tenth of an ask's cost.
const PATH_CHECK_EVERY: Duration = Duration::from_millis(100);

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog")
            .field("path", &self.path)
            .field("sync", &self.sync)
            .finish()
    }
}

/// An open log file: the file, its identity, the hash its chain ends with.
fn open_file(path: &Path) -> std::io::Result<(File, (u64, u64), String)> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    // Only a regular file is a log: nothing is read, cut or appended
    // through a symlink (or a device) put in its place.
    match std::fs::symlink_metadata(path) {
        Ok(meta) if !meta.file_type().is_file() => {
            return Err(std::io::Error::other(format!(
                "{} is not a regular file",
                path.display()
            )))
        }
        _ => {}
    }
    drop_incomplete_tail(path)?;
    let last = last_hash(path)?;
    // Owner-only, and never through a symlink: a log replaced by a link
    // must not make the daemon append to whatever it points at.
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    let meta = file.metadata()?;
    Ok((file, (meta.dev(), meta.ino()), last))
}

/// The `askId`s of the lines of the log at `path` whose `time` is at or
/// after `since_ms`, read from its end (at most its last 16 MiB): what a
/// restart checks its journaled answers against.
pub fn ask_ids_since(
    path: &Path,
    since_ms: u64,
) -> std::io::Result<std::collections::HashSet<String>> {
    use std::io::{Read, Seek, SeekFrom};
    const MAX_TAIL: u64 = 16 << 20;
    let mut ids = std::collections::HashSet::new();
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ids),
        Err(e) => return Err(e),
    };
    let len = file.metadata()?.len();
    let start = len.saturating_sub(MAX_TAIL);
    file.seek(SeekFrom::Start(start))?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail)?;
    // A first line cut by the tail's start does not parse, and is skipped.
    for line in tail.split(|b| *b == b'\n').rev() {
        let Ok(value) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        let time = value.get("time").and_then(Value::as_u64).unwrap_or(0);
        if let Some(id) = value.get("askId").and_then(Value::as_str) {
            ids.insert(id.to_string());
        }
        // Lines are in time order but for chunks logged concurrently:
        // stop well before `since`.
        if time.saturating_add(60_000) < since_ms {
            break;
        }
    }
    Ok(ids)
}

impl AuditLog {
    /// Opens (or creates) the log; the chain continues from its last line.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        Self::open_with(path, false)
    }

    /// Opens the log; with `sync`, every append is `fdatasync`ed before it
    /// counts as written (durable across a power loss, at the cost of a
    /// disk flush per batch).
    pub fn open_with(path: &Path, sync: bool) -> std::io::Result<Self> {
        let (file, identity, last) = open_file(path)?;
        Ok(Self {
            path: path.to_path_buf(),
            sync,
            inner: Mutex::new(Inner {
                file: Some(file),
                last,
                identity,
                torn_at: None,
                failing: false,
                note: None,
                path_checked: None,
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one entry (redacted, chained, hashed) with a single write.
    pub fn append(&self, entry: Map<String, Value>) -> std::io::Result<()> {
        self.append_all(&[entry])
    }

    /// Appends entries in order with one `write(2)`: a batch (a grant that
    /// answers thousands of asks) costs one system call. `Ok` means every
    /// line is in the file; on `Err` none of the batch is (a partial write
    /// is cut off again), so the chain never holds a torn line in its
    /// middle and the caller must not deliver the batch's decisions.
    ///
    /// An entry is anything that serializes as a JSON object without a
    /// `prev` key (a borrowed struct needs no `Value` tree; see
    /// [`entry_content`] for how the line is made and redacted).
    pub fn append_all<T: Serialize>(&self, entries: &[T]) -> std::io::Result<()> {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let result = self.append_locked(&mut guard, entries);
        match &result {
            Ok(()) if guard.failing => {
                guard.failing = false;
                tracing::warn!(path = %self.path.display(), "the audit log is writable again; decisions are delivered again");
            }
            Err(error) => {
                guard.failing = true;
                tracing::error!(path = %self.path.display(), %error, "cannot append to the audit log");
            }
            Ok(()) => {}
        }
        result
    }

    fn append_locked<T: Serialize>(&self, inner: &mut Inner, entries: &[T]) -> std::io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        // A removed or replaced log is noticed here: lines written to an
        // unlinked file would be lost for good.
        let open = match inner.file.as_ref() {
            Some(file) => Some(file.metadata()?),
            None => None,
        };
        let unlinked = open.as_ref().is_none_or(|meta| meta.nlink() == 0);
        let check_path = inner
            .path_checked
            .is_none_or(|at| at.elapsed() >= PATH_CHECK_EVERY);
        let replaced = unlinked
            || (check_path
                && match std::fs::symlink_metadata(&self.path) {
                    Ok(meta) => (meta.dev(), meta.ino()) != inner.identity,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
                    Err(e) => return Err(e),
                });
        if check_path {
            inner.path_checked = Some(Instant::now());
        }
        let mut committed = open.map(|meta| meta.len());
        if replaced {
            committed = None;
            let why = if inner.file.is_none() {
                "the audit log could not be reopened before"
            } else {
                "the audit log was removed or replaced while permfs was writing it"
            };
            tracing::error!(path = %self.path.display(), "{why}; reopening it");
            inner.file = None;
            let (file, identity, last) = open_file(&self.path)?;
            let mut note = Map::new();
            note.insert(
                "time".into(),
                Value::from(crate::session::tree::ask::now_ms()),
            );
            note.insert("event".into(), Value::from("audit_reopened"));
            note.insert("reason".into(), Value::from(why));
            // The chain the daemon was writing ended here: the link to the
            // lines that went with the old file.
            note.insert(
                "previousHash".into(),
                Value::String(std::mem::replace(&mut inner.last, last)),
            );
            inner.note = Some(note);
            inner.file = Some(file);
            inner.identity = identity;
            inner.torn_at = None;
        }
        let Some(file) = inner.file.as_mut() else {
            return Err(std::io::Error::other("the audit log is not open"));
        };
        if let Some(end) = inner.torn_at {
            file.set_len(end)?;
            inner.torn_at = None;
            committed = Some(end);
        }
        let committed = match committed {
            Some(length) => length,
            None => file.metadata()?.len(),
        };
        let mut previous = inner.last.clone();
        let mut batch = String::new();
        let mut push = |content: String, previous: &mut String| {
            let hash = sha256_hex(content.as_bytes());
            batch.push_str(&content[..content.len() - 1]);
            batch.push_str(",\"hash\":\"");
            batch.push_str(&hash);
            batch.push_str("\"}\n");
            *previous = hash;
        };
        if let Some(note) = &inner.note {
            push(entry_content(note, &previous)?, &mut previous);
        }
        for entry in entries {
            push(entry_content(entry, &previous)?, &mut previous);
        }
        let written = file.write_all(batch.as_bytes()).and_then(|()| {
            if self.sync {
                file.sync_data()
            } else {
                Ok(())
            }
        });
        if let Err(error) = written {
            // Part of the batch may be in the file (a disk that filled up
            // half way): cut it off now, or before the next append.
            if let Err(cut) = file.set_len(committed) {
                tracing::error!(path = %self.path.display(), %cut, "cannot cut a partial audit write off; retrying before the next append");
                inner.torn_at = Some(committed);
            }
            return Err(error);
        }
        inner.last = previous;
        inner.note = None;
        Ok(())
    }
}

/// A line cut short by a crash was never committed: drop it, so the next
/// line does not glue onto it.
fn drop_incomplete_tail(path: &Path) -> std::io::Result<()> {
    let data = match std::fs::read(path) {
        Ok(data) => data,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if data.is_empty() || data.ends_with(b"\n") {
        return Ok(());
    }
    let keep = data
        .iter()
        .rposition(|b| *b == b'\n')
        .map(|i| i + 1)
        .unwrap_or(0);
    tracing::warn!(path = %path.display(), dropped_bytes = data.len() - keep, "dropping an incomplete last audit line");
    OpenOptions::new()
        .write(true)
        .open(path)?
        .set_len(keep as u64)
}

/// The hash of the last complete line of an existing log.
fn last_hash(path: &Path) -> std::io::Result<String> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(GENESIS.into()),
        Err(e) => return Err(e),
    };
    let mut last = GENESIS.to_string();
    for line in BufReader::new(file).lines() {
        let line = line?;
        if let Some((_, hash)) = split_hash(&line) {
            last = hash.to_string();
        }
    }
    Ok(last)
}

/// `(content, hash)` of a line, where content is what the hash covers.
fn split_hash(line: &str) -> Option<(String, &str)> {
    const SUFFIX_LEN: usize = ",\"hash\":\"".len() + 64 + "\"}".len();
    if line.len() < SUFFIX_LEN || !line.ends_with("\"}") {
        return None;
    }
    let start = line.len() - SUFFIX_LEN;
    let suffix = line.get(start..)?;
    let hash = suffix.strip_prefix(",\"hash\":\"")?.strip_suffix("\"}")?;
    if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some((format!("{}}}", &line[..start]), hash))
}

/// What `permfs audit verify` found in a log whose chain holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    /// Lines whose hash and link check out.
    pub lines: usize,
    /// The last line is torn (cut off without its newline, or not an audit
    /// line at all): what a crash or a full disk leaves behind, not an
    /// edit. The daemon cuts it off when it next opens the log. Says what
    /// is wrong with it.
    pub torn_tail: Option<String>,
}

/// Why a log does not verify.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyError {
    /// The file cannot be read.
    Unreadable(String),
    /// A line was edited, removed, inserted or reordered: names the first.
    Tampered(String),
}

impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unreadable(m) | Self::Tampered(m) => f.write_str(m),
        }
    }
}

/// Checks every line's hash and chain link; names the first bad line.
///
/// Only the last line may be torn: a final line without its newline, or a
/// final line that carries no hash at all, is reported as a torn tail (a
/// write cut short), never as tampering. A line that carries a hash that
/// does not match, or a bad line before the last, is tampering.
pub fn verify(path: &Path) -> Result<Verification, VerifyError> {
    let data = std::fs::read(path)
        .map_err(|e| VerifyError::Unreadable(format!("{}: cannot read: {e}", path.display())))?;
    let text = String::from_utf8_lossy(&data);
    let mut previous = GENESIS.to_string();
    let mut count = 0;
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    for (index, raw) in lines.iter().enumerate() {
        let number = index + 1;
        let last = index + 1 == lines.len();
        if last && !raw.ends_with('\n') {
            return Ok(Verification {
                lines: count,
                torn_tail: Some(format!(
                    "line {number} is cut off ({} bytes without a newline): a write that did not finish",
                    raw.len()
                )),
            });
        }
        let line = raw.trim_end_matches('\n');
        let Some((content, hash)) = split_hash(line) else {
            if last {
                return Ok(Verification {
                    lines: count,
                    torn_tail: Some(format!(
                        "line {number} is not a complete audit line (it has no hash): a write that did not finish"
                    )),
                });
            }
            return Err(VerifyError::Tampered(format!(
                "line {number}: not an audit line (no hash)"
            )));
        };
        if sha256_hex(content.as_bytes()) != hash {
            return Err(VerifyError::Tampered(format!(
                "line {number}: its content does not match its hash (the line was edited)"
            )));
        }
        let entry: Value = serde_json::from_str(&content)
            .map_err(|e| VerifyError::Tampered(format!("line {number}: not JSON: {e}")))?;
        let prev = entry
            .get("prev")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if prev != previous {
            return Err(VerifyError::Tampered(format!(
                "line {number}: it does not follow the line before it (a line was removed, inserted or reordered here)"
            )));
        }
        previous = hash.to_string();
        count += 1;
    }
    Ok(Verification {
        lines: count,
        torn_tail: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(n: u64) -> Map<String, Value> {
        match json!({"askId": format!("a{n}"), "outcome": "allow"}) {
            Value::Object(map) => map,
            _ => unreachable!(),
        }
    }

    #[test]
    fn a_chain_verifies_and_every_tampering_is_named() {
        let dir = tempfile::tempdir().expect("temp");
        let path = dir.path().join("audit.log");
        {
            let log = AuditLog::open(&path).expect("open");
            for n in 0..3 {
                log.append(entry(n)).expect("append");
            }
        }
        // Reopening continues the chain.
        AuditLog::open(&path)
            .expect("reopen")
            .append(entry(3))
            .expect("append");
        assert_eq!(
            verify(&path),
            Ok(Verification {
                lines: 4,
                torn_tail: None
            })
        );

        let original = std::fs::read_to_string(&path).expect("read");
        let lines: Vec<&str> = original.lines().collect();
        let write =
            |lines: &[String]| std::fs::write(&path, lines.join("\n") + "\n").expect("write");
        let owned: Vec<String> = lines.iter().map(|l| l.to_string()).collect();

        let mut edited = owned.clone();
        edited[1] = edited[1].replace("allow", "deny");
        write(&edited);
        let tampered = |what: &str| match verify(&path) {
            Err(VerifyError::Tampered(m)) => m,
            other => panic!("{what}: expected tampering, got {other:?}"),
        };
        assert!(tampered("edited").starts_with("line 2:"));

        let mut removed = owned.clone();
        removed.remove(1);
        write(&removed);
        assert!(tampered("removed").starts_with("line 2:"));

        let mut reordered = owned.clone();
        reordered.swap(1, 2);
        write(&reordered);
        assert!(tampered("reordered").starts_with("line 2:"));

        std::fs::write(&path, format!("{}{}", original, "{\"askId\":\"partial")).expect("write");
        let torn = verify(&path).expect("a torn tail is not tampering");
        assert_eq!(torn.lines, 4);
        assert!(torn.torn_tail.expect("torn").contains("line 5 is cut off"));
        // Reopening after such a crash drops the partial line and goes on.
        AuditLog::open(&path)
            .expect("reopen")
            .append(entry(4))
            .expect("append");
        assert_eq!(
            verify(&path),
            Ok(Verification {
                lines: 5,
                torn_tail: None
            })
        );
    }

    #[test]
    fn verify_tells_a_torn_tail_from_tampering() {
        let dir = tempfile::tempdir().expect("temp");
        let path = dir.path().join("audit.log");
        let log = AuditLog::open(&path).expect("open");
        for n in 0..3 {
            log.append(entry(n)).expect("append");
        }
        let original = std::fs::read_to_string(&path).expect("read");
        let lines: Vec<&str> = original.lines().collect();

        // A last line with its newline but no hash: a write that did not
        // finish (or junk at the end), not an edit of the chain.
        std::fs::write(&path, format!("{original}{{\"askId\":\"a3\"\n")).expect("write");
        let report = verify(&path).expect("torn, not tampered");
        assert_eq!(report.lines, 3);
        assert!(report.torn_tail.expect("torn").contains("line 4"));

        // The same junk before the last line is tampering.
        std::fs::write(
            &path,
            format!(
                "{}\n{{\"askId\":\"x\"\n{}\n{}\n",
                lines[0], lines[1], lines[2]
            ),
        )
        .expect("write");
        assert!(matches!(verify(&path), Err(VerifyError::Tampered(m)) if m.starts_with("line 2:")));

        // What the old daemon did on a full disk: a torn line with the next
        // line glued onto it. Its hash no longer matches: tampering.
        let glued = format!(
            "{}\n{}\n{{\"askId\":\"par{}\n",
            lines[0], lines[1], lines[2]
        );
        std::fs::write(&path, glued).expect("write");
        assert!(matches!(verify(&path), Err(VerifyError::Tampered(m)) if m.starts_with("line 3:")));

        assert!(matches!(
            verify(&dir.path().join("missing.log")),
            Err(VerifyError::Unreadable(_))
        ));
    }

    /// A small tmpfs mounted for a test, unmounted on drop (also when the
    /// test fails). `None` when not root (mounting needs it).
    struct SmallTmpfs(tempfile::TempDir);

    impl SmallTmpfs {
        fn mount(size: &str) -> Option<Self> {
            // SAFETY: geteuid cannot fail.
            if unsafe { libc::geteuid() } != 0 {
                eprintln!("skipped: mounting a tmpfs needs root");
                return None;
            }
            let dir = tempfile::tempdir().expect("temp");
            let status = std::process::Command::new("mount")
                .args([
                    "-t",
                    "tmpfs",
                    "-o",
                    &format!("size={size},mode=0700"),
                    "tmpfs",
                ])
                .arg(dir.path())
                .status()
                .expect("mount runs");
            assert!(status.success(), "mount -t tmpfs failed");
            Some(Self(dir))
        }
    }

    impl Drop for SmallTmpfs {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(self.0.path())
                .status();
        }
    }

    fn big_entry(n: u64, bytes: usize) -> Map<String, Value> {
        match json!({"askId": format!("a{n}"), "outcome": "allow", "message": "m".repeat(bytes)}) {
            Value::Object(map) => map,
            _ => unreachable!(),
        }
    }

    #[test]
    fn a_full_disk_fails_the_append_and_leaves_no_torn_line() {
        let Some(tmpfs) = SmallTmpfs::mount("64k") else {
            return;
        };
        let path = tmpfs.0.path().join("audit.log");
        let log = AuditLog::open(&path).expect("open");
        log.append(entry(0)).expect("append");
        // Fill the disk but for a little, so the next batch fits in part.
        let filler = tmpfs.0.path().join("filler");
        let mut file = File::create(&filler).expect("filler");
        let chunk = vec![0u8; 4096];
        while file.write_all(&chunk).is_ok() {}
        drop(file);
        let before = std::fs::read(&path).expect("read");
        let mut failures = 0;
        for n in 1..6 {
            if log
                .append_all(&[big_entry(n, 3000), big_entry(n + 100, 3000)])
                .is_err()
            {
                failures += 1;
            }
            // Whatever happened, the file holds whole lines only.
            let now = std::fs::read(&path).expect("read");
            assert!(now.ends_with(b"\n"), "no torn tail after append {n}");
            assert_eq!(verify(&path).map(|v| v.torn_tail), Ok(None));
        }
        assert!(failures > 0, "the disk was full");
        assert!(std::fs::read(&path).expect("read").starts_with(&before));
        // Space returns: appending goes on, on the same chain.
        std::fs::remove_file(&filler).expect("space freed");
        log.append_all(&[big_entry(7, 3000), entry(8)])
            .expect("append after space returned");
        let report = verify(&path).expect("intact");
        assert_eq!(report.torn_tail, None);
        assert!(report.lines >= 3);
    }

    #[test]
    fn a_removed_log_is_reopened_and_says_so() {
        let dir = tempfile::tempdir().expect("temp");
        let path = dir.path().join("audit.log");
        let log = AuditLog::open(&path).expect("open");
        log.append(entry(0)).expect("append");
        let old = std::fs::read_to_string(&path).expect("read");
        let old_last = old
            .lines()
            .last()
            .and_then(split_hash)
            .map(|(_, h)| h.to_string());
        std::fs::remove_file(&path).expect("removed");
        log.append(entry(1)).expect("append after removal");
        let text = std::fs::read_to_string(&path).expect("a new log");
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON"))
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["event"], "audit_reopened");
        assert_eq!(lines[0]["previousHash"].as_str(), old_last.as_deref());
        assert_eq!(lines[1]["askId"], "a1");
        assert_eq!(verify(&path).map(|v| v.lines), Ok(2));

        // Replaced by a symlink: never followed.
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, "").expect("target");
        std::fs::remove_file(&path).expect("removed");
        std::os::unix::fs::symlink(&elsewhere, &path).expect("link");
        assert!(log.append(entry(2)).is_err(), "fails closed");
        assert_eq!(std::fs::read(&elsewhere).expect("read"), b"");
        // Once a real file is back, appending resumes.
        std::fs::remove_file(&path).expect("link removed");
        log.append(entry(3)).expect("append");
        assert_eq!(verify(&path).map(|v| v.lines), Ok(2));
    }

    #[test]
    fn a_rotated_log_is_followed_by_a_new_one_at_the_path() {
        let dir = tempfile::tempdir().expect("temp");
        let path = dir.path().join("audit.log");
        let rotated = dir.path().join("audit.log.1");
        let log = AuditLog::open(&path).expect("open");
        log.append(entry(0)).expect("append");
        std::fs::rename(&path, &rotated).expect("rotated");
        std::thread::sleep(PATH_CHECK_EVERY + Duration::from_millis(20));
        log.append(entry(1)).expect("append after rotation");
        let text = std::fs::read_to_string(&path).expect("a new log at the path");
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON"))
            .collect();
        assert_eq!(lines[0]["event"], "audit_reopened");
        assert_eq!(lines[1]["askId"], "a1");
        assert_eq!(verify(&rotated).map(|v| v.lines), Ok(1));
    }

    #[test]
    fn a_direct_line_is_the_line_a_value_tree_gives() {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Line<'a> {
            ask_id: &'a str,
            agent: Option<&'a str>,
            values: Vec<&'a str>,
            latency_ms: f64,
        }
        let old = |line: &Line<'_>, prev: &str| {
            let mut value = serde_json::to_value(line).expect("value");
            redact(&mut value);
            if let Value::Object(object) = &mut value {
                object.insert("prev".into(), Value::String(prev.to_string()));
            }
            serde_json::to_string(&value).expect("text")
        };
        for values in [
            vec!["git status", "/w/a \"b\"\n\u{7}"],
            vec!["GITHUB_TOKEN=ghp_1 git push", "x"],
            vec!["curl -H 'Authorization: Bearer abc'"],
            vec!["monkey=banana", "ünïcode"],
        ] {
            for latency_ms in [0.0, 1.25, 1e-7, f64::NAN] {
                let line = Line {
                    ask_id: "1-r1",
                    agent: None,
                    values: values.clone(),
                    latency_ms,
                };
                assert_eq!(
                    entry_content(&line, GENESIS).expect("content"),
                    old(&line, GENESIS)
                );
            }
        }
        let empty: Map<String, Value> = Map::new();
        assert_eq!(
            entry_content(&empty, GENESIS).expect("content"),
            format!("{{\"prev\":\"{GENESIS}\"}}")
        );
        assert!(!may_hold_secret("git status /w/a.rs"));
        assert!(may_hold_secret("x MY_KEY=1"));
        assert!(may_hold_secret("PassWord"));
    }

    #[test]
    fn secrets_are_redacted() {
        let mut value = json!({
            "apiKey": "sk-1", "signing_key": "s", "password": "p", "monkey": "banana", "keyboard": "k", "Authorization": "Bearer x",
            "facts": [{"matchValues": ["GITHUB_TOKEN=ghp_123 git push", "curl -H 'Authorization: Bearer abc'", "FOO=bar make"]}]
        });
        redact(&mut value);
        assert_eq!(value["apiKey"], REDACTED);
        assert_eq!(value["password"], REDACTED);
        assert_eq!(value["signing_key"], REDACTED);
        assert_eq!(value["Authorization"], REDACTED);
        assert_eq!(value["keyboard"], "k");
        assert_eq!(value["monkey"], "banana");
        assert_eq!(
            value["facts"][0]["matchValues"][0],
            "GITHUB_TOKEN=[redacted] git push"
        );
        assert_eq!(
            value["facts"][0]["matchValues"][1],
            "curl -H 'Authorization: [redacted]'"
        );
        assert_eq!(value["facts"][0]["matchValues"][2], "FOO=bar make");
    }
}
