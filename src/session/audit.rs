//! The tamper-evident audit log: one JSON line per decision, hash-chained.
//!
//! Each line is a compact JSON object whose last field is `hash`: the
//! SHA-256 of the line's own content (the object without `hash`), which
//! includes `prev`, the previous line's hash. Editing a line breaks its own
//! hash; removing or reordering lines breaks the next line's `prev`.
//! Lines are written with one `write(2)` per batch on an `O_APPEND`
//! descriptor, so a crash loses at most the lines being written, never an
//! earlier one.

use regex::Regex;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

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

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
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

/// Appends hash-chained lines to a file.
pub struct AuditLog {
    path: PathBuf,
    inner: Mutex<(File, String)>,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog")
            .field("path", &self.path)
            .finish()
    }
}

impl AuditLog {
    /// Opens (or creates) the log; the chain continues from its last line.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        drop_incomplete_tail(path)?;
        let last = last_hash(path)?;
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self {
            path: path.to_path_buf(),
            inner: Mutex::new((file, last)),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one entry (redacted, chained, hashed) with a single write.
    pub fn append(&self, entry: Map<String, Value>) -> std::io::Result<()> {
        self.append_all(vec![entry])
    }

    /// Appends entries in order with one `write(2)`: a batch (a grant that
    /// answers thousands of asks) costs one system call, and each line is
    /// still whole or absent after a crash.
    pub fn append_all(&self, entries: Vec<Map<String, Value>>) -> std::io::Result<()> {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut previous = guard.1.clone();
        let mut batch = String::new();
        for entry in entries {
            let mut entry = Value::Object(entry);
            redact(&mut entry);
            if let Value::Object(object) = &mut entry {
                object.insert("prev".into(), Value::String(previous.clone()));
            }
            let content = serde_json::to_string(&entry).map_err(std::io::Error::other)?;
            let hash = sha256_hex(content.as_bytes());
            batch.push_str(&content[..content.len() - 1]);
            batch.push_str(",\"hash\":\"");
            batch.push_str(&hash);
            batch.push_str("\"}\n");
            previous = hash;
        }
        guard.0.write_all(batch.as_bytes())?;
        guard.1 = previous;
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

/// What `permfs audit verify` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    pub lines: usize,
    /// A final line without its newline: the line a crash interrupted.
    pub incomplete_tail: bool,
}

/// Checks every line's hash and chain link; names the first bad line.
pub fn verify(path: &Path) -> Result<Verification, String> {
    let data = std::fs::read(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let text = String::from_utf8_lossy(&data);
    let incomplete_tail = !text.is_empty() && !text.ends_with('\n');
    let mut previous = GENESIS.to_string();
    let mut count = 0;
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    for (index, raw) in lines.iter().enumerate() {
        let number = index + 1;
        if incomplete_tail && index + 1 == lines.len() {
            break;
        }
        let line = raw.trim_end_matches('\n');
        let (content, hash) =
            split_hash(line).ok_or(format!("line {number}: not an audit line (no hash)"))?;
        if sha256_hex(content.as_bytes()) != hash {
            return Err(format!(
                "line {number}: its content does not match its hash (the line was edited)"
            ));
        }
        let entry: Value =
            serde_json::from_str(&content).map_err(|e| format!("line {number}: not JSON: {e}"))?;
        let prev = entry
            .get("prev")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if prev != previous {
            return Err(format!(
                "line {number}: it does not follow the line before it (a line was removed, inserted or reordered here)"
            ));
        }
        previous = hash.to_string();
        count += 1;
    }
    Ok(Verification {
        lines: count,
        incomplete_tail,
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
                incomplete_tail: false
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
        assert!(verify(&path).expect_err("edited").starts_with("line 2:"));

        let mut removed = owned.clone();
        removed.remove(1);
        write(&removed);
        assert!(verify(&path).expect_err("removed").starts_with("line 2:"));

        let mut reordered = owned.clone();
        reordered.swap(1, 2);
        write(&reordered);
        assert!(verify(&path).expect_err("reordered").starts_with("line 2:"));

        std::fs::write(&path, format!("{}{}", original, "{\"askId\":\"partial")).expect("write");
        assert_eq!(
            verify(&path),
            Ok(Verification {
                lines: 4,
                incomplete_tail: true
            })
        );
        // Reopening after such a crash drops the partial line and goes on.
        AuditLog::open(&path)
            .expect("reopen")
            .append(entry(4))
            .expect("append");
        assert_eq!(
            verify(&path),
            Ok(Verification {
                lines: 5,
                incomplete_tail: false
            })
        );
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
