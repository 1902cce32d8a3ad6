//! The journal's append-only side: answers of asks that were never
//! pending.
//!
//! An ask a rule (or a judge) answers when it is raised was never seen
//! pending, so all the journal must keep of it is its answer, from before
//! the answer is delivered until the ask is forgotten. As a SQLite row that
//! was one transaction on the asker's path: two 4 KiB WAL frames (table and
//! key index) and SQLite's own work, about 40 µs of a 200 µs ask on this
//! machine (BENCHMARKS.md, row 26). Here it is one appended line, and its
//! delete another; the same durability (the page cache keeps a `write(2)`
//! across a `SIGKILL`, as it keeps SQLite's WAL under
//! `synchronous=NORMAL`; with `--audit-sync` each append is followed by
//! `fdatasync`), read back at the next start with the SQLite rows
//! (`Journal::load`). An ask that was pending keeps its SQLite row, and
//! its answer updates that row.
//!
//! Each line is one JSON array: `["a", id, origin, rid, request_len,
//! body]` (the response's JSON text as a string) or `["d", id]`. A torn
//! last line (a death mid-write) does not parse and is skipped, with the
//! answer it would have held never delivered (delivery comes after the
//! append returns). Past [`AnswerLog::LIMIT`] the file is rewritten with
//! the answers still held, read back from the file itself: in memory the
//! log keeps only which asks it holds, since the authority keeps the
//! answers themselves as long as their asks live.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The answers log's file in the state dir, beside the journal's.
pub const ANSWER_LOG_FILE: &str = "journal.answers";

/// An answer as the log holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedAnswer {
    pub origin: String,
    pub rid: String,
    pub request_len: u64,
    pub body: String,
}

pub struct AnswerLog {
    path: PathBuf,
    file: Option<std::fs::File>,
    /// Bytes in the file, for the rewrite past [`Self::LIMIT`].
    bytes: u64,
    /// Bytes the last rewrite left (what was held then): the next rewrite
    /// waits until the file is twice that, so a log that holds more than
    /// the limit is not rewritten whole at every append.
    rewritten: u64,
    /// Rewrites since open (the one at open included).
    rewrites: u64,
    /// The asks whose answers the file holds now (the log's meaning).
    held: HashSet<String>,
    /// Each append reaches the disk before it returns.
    sync: bool,
    /// A full disk, simulated for tests of failing closed.
    full: bool,
}

impl AnswerLog {
    /// Past this size (or twice what the last rewrite left, if more) the
    /// file is rewritten with what it holds.
    pub const LIMIT: u64 = 8 << 20;

    /// Reads the log in `state_dir` (a previous server's) and starts it
    /// afresh with what it held; `Err` when it cannot be written.
    pub fn open(state_dir: &Path, sync: bool) -> Result<Self, String> {
        let mut log = Self {
            path: state_dir.join(ANSWER_LOG_FILE),
            file: None,
            bytes: 0,
            rewritten: 0,
            rewrites: 0,
            held: HashSet::new(),
            sync,
            full: false,
        };
        log.rewrite()?;
        Ok(log)
    }

    /// The answers the file holds, by ask id, read back from it.
    pub fn read(&self) -> Result<HashMap<String, LoggedAnswer>, String> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => Ok(replay(&text)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(HashMap::new()),
            Err(error) => Err(format!(
                "the journal's answers {} cannot be read: {error}",
                self.path.display()
            )),
        }
    }

    /// How many answers the log holds.
    pub fn held_count(&self) -> usize {
        self.held.len()
    }

    pub fn holds(&self, id: &str) -> bool {
        self.held.contains(id)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn simulate_full(&mut self, full: bool) {
        self.full = full;
    }

    /// Appends `answers` and `deletes` in one `write(2)`.
    pub fn append(
        &mut self,
        answers: Vec<(String, LoggedAnswer)>,
        deletes: Vec<String>,
    ) -> Result<(), String> {
        if answers.is_empty() && deletes.is_empty() {
            return Ok(());
        }
        if self.full {
            return Err("the journal cannot be written: database or disk is full".into());
        }
        if self.bytes > Self::LIMIT.max(2 * self.rewritten) {
            self.rewrite()?;
        }
        let mut text = String::new();
        for (id, answer) in &answers {
            text.push_str(&answer_line(id, answer));
        }
        for id in &deletes {
            text.push_str(&delete_line(id));
        }
        let file = self.file.as_mut().ok_or_else(|| {
            "the journal cannot be written: its answers log is closed".to_string()
        })?;
        let written = file.write_all(text.as_bytes()).and_then(|()| {
            if self.sync {
                file.sync_data()
            } else {
                Ok(())
            }
        });
        if let Err(error) = written {
            // What was written in part is a torn line; the next append
            // starts on a line of its own.
            let _ = file.write_all(b"\n");
            return Err(format!("the journal cannot be written: {error}"));
        }
        self.bytes += text.len() as u64;
        for (id, _) in answers {
            self.held.insert(id);
        }
        for id in deletes {
            self.held.remove(&id);
        }
        Ok(())
    }

    /// Replaces the file with what it holds (read back from it, written
    /// aside, renamed over). Lines that do not parse (a torn one) go.
    fn rewrite(&mut self) -> Result<(), String> {
        let held = self.read()?;
        let mut text = String::new();
        for (id, answer) in &held {
            text.push_str(&answer_line(id, answer));
        }
        let mut aside = self.path.as_os_str().to_owned();
        aside.push(".new");
        let aside = PathBuf::from(aside);
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&aside)
            .and_then(|mut f| {
                f.set_len(0)?;
                f.write_all(text.as_bytes())?;
                if self.sync {
                    f.sync_data()?;
                }
                std::fs::rename(&aside, &self.path)?;
                Ok(f)
            })
            .map_err(|e| {
                format!(
                    "the journal's answers {} cannot be written: {e}",
                    self.path.display()
                )
            })?;
        self.file = Some(file);
        self.bytes = text.len() as u64;
        self.rewritten = self.bytes;
        self.rewrites += 1;
        self.held = held.into_keys().collect();
        Ok(())
    }
}

fn answer_line(id: &str, answer: &LoggedAnswer) -> String {
    let line = serde_json::json!([
        "a",
        id,
        answer.origin,
        answer.rid,
        answer.request_len,
        answer.body
    ]);
    format!("{line}\n")
}

fn delete_line(id: &str) -> String {
    format!("{}\n", serde_json::json!(["d", id]))
}

/// What the lines of `text` hold; lines that do not parse are skipped.
fn replay(text: &str) -> HashMap<String, LoggedAnswer> {
    let mut held = HashMap::new();
    let mut deleted = HashSet::new();
    for line in text.lines() {
        let Ok(serde_json::Value::Array(fields)) = serde_json::from_str(line) else {
            continue;
        };
        let text = |i: usize| fields.get(i).and_then(|f| f.as_str()).map(str::to_string);
        match fields.first().and_then(|f| f.as_str()) {
            Some("a") => {
                let (Some(id), Some(origin), Some(rid), Some(request_len), Some(body)) = (
                    text(1),
                    text(2),
                    text(3),
                    fields.get(4).and_then(|f| f.as_u64()),
                    text(5),
                ) else {
                    continue;
                };
                deleted.remove(&id);
                held.insert(
                    id,
                    LoggedAnswer {
                        origin,
                        rid,
                        request_len,
                        body,
                    },
                );
            }
            Some("d") => {
                if let Some(id) = text(1) {
                    held.remove(&id);
                    deleted.insert(id);
                }
            }
            _ => {}
        }
    }
    held
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(rid: &str) -> LoggedAnswer {
        LoggedAnswer {
            origin: "main".into(),
            rid: rid.into(),
            request_len: 12,
            body: "{\n  \"outcome\": \"allow\"\n}".into(),
        }
    }

    #[test]
    fn answers_and_deletes_are_read_back_and_a_torn_line_is_skipped() {
        let dir = tempfile::tempdir().expect("dir");
        let mut log = AnswerLog::open(dir.path(), false).expect("opened");
        log.append(
            vec![("1.1-a".into(), answer("a")), ("1.2-b".into(), answer("b"))],
            vec![],
        )
        .expect("appended");
        log.append(vec![("1.3-c".into(), answer("c"))], vec!["1.1-a".into()])
            .expect("appended");
        drop(log);
        // A death mid-write leaves part of a line.
        let path = dir.path().join(ANSWER_LOG_FILE);
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("file");
        file.write_all(br#"["a","1.4-d","main","d",1,"{\n"#)
            .expect("torn");
        drop(file);
        let log = AnswerLog::open(dir.path(), false).expect("reopened");
        let held = log.read().expect("read back");
        let mut ids: Vec<&String> = held.keys().collect();
        ids.sort();
        assert_eq!(ids, ["1.2-b", "1.3-c"]);
        assert_eq!(held["1.3-c"], answer("c"));
        assert_eq!(log.held_count(), 2);
        assert!(log.holds("1.2-b") && !log.holds("1.1-a") && !log.holds("1.4-d"));
        // Rewritten at open: only what is held.
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(text.lines().count(), 2, "{text}");
        let mode = std::os::unix::fs::MetadataExt::mode(&std::fs::metadata(&path).expect("stat"));
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_full_disk_refuses_and_changes_nothing() {
        let dir = tempfile::tempdir().expect("dir");
        let mut log = AnswerLog::open(dir.path(), false).expect("opened");
        log.simulate_full(true);
        let error = log
            .append(vec![("1.1-a".into(), answer("a"))], vec![])
            .expect_err("refused");
        assert!(error.contains("full"), "{error}");
        assert_eq!(log.held_count(), 0);
        assert!(log.read().expect("read back").is_empty());
    }

    #[test]
    fn a_rewrite_past_the_limit_keeps_what_is_held_and_only_that() {
        let dir = tempfile::tempdir().expect("dir");
        let mut log = AnswerLog::open(dir.path(), false).expect("opened");
        log.append(vec![("1.1-a".into(), answer("a"))], vec![])
            .expect("appended");
        let mut n = 0u64;
        // Answers and their deletes until the file passes the limit.
        while log.bytes <= AnswerLog::LIMIT {
            let id = format!("2.{n}-x");
            log.append(vec![(id.clone(), answer("x"))], vec![])
                .expect("appended");
            log.append(vec![], vec![id]).expect("deleted");
            n += 1;
        }
        log.append(vec![("1.2-b".into(), answer("b"))], vec![])
            .expect("appended after the rewrite");
        let size = std::fs::metadata(log.path()).expect("stat").len();
        assert!(size < 4096, "rewritten: {size} bytes");
        let held = log.read().expect("read back");
        let mut ids: Vec<&String> = held.keys().collect();
        ids.sort();
        assert_eq!(ids, ["1.1-a", "1.2-b"]);
        assert_eq!(held["1.1-a"], answer("a"));
        assert_eq!(log.held_count(), 2);
    }

    /// A log holding more than the limit is rewritten once it has doubled,
    /// not at every append (each rewrite reads and writes all it holds:
    /// 600 answers of 60 KiB took 200 s when every append rewrote).
    #[test]
    fn a_log_holding_more_than_the_limit_is_not_rewritten_at_every_append() {
        let dir = tempfile::tempdir().expect("dir");
        let mut log = AnswerLog::open(dir.path(), false).expect("opened");
        let big = LoggedAnswer {
            body: "y".repeat(1 << 20),
            ..answer("big")
        };
        for i in 0..10 {
            log.append(vec![(format!("1.{i}-big"), big.clone())], vec![])
                .expect("appended");
        }
        assert!(log.bytes > AnswerLog::LIMIT);
        let before = log.rewrites;
        for i in 0..200 {
            log.append(vec![(format!("2.{i}-s"), answer("s"))], vec![])
                .expect("appended");
        }
        assert!(
            log.rewrites - before <= 1,
            "{} rewrites for 200 small appends",
            log.rewrites - before
        );
        assert_eq!(log.read().expect("read back").len(), 210);
    }
}
