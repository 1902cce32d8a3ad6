//! The journal: what the authority must not lose when its process dies
//! (issue 26), kept in an embedded transactional store in the state dir
//! and read back at the next start.
//!
//! It holds the sessions (tree, cwd, agent, interactivity, asker and
//! decider uids, serial, grants, and whether a `ctl` handle holds a lease
//! on them, with the pid that took it), the pending asks (their request,
//! the facts fixed at the asker, hops, inbox and deadline) and the
//! answers still retained (their response, as readers read it). Trust
//! records are not here: they already live in the state dir
//! (`trust.json`); ids need no counter here either, since every id carries
//! the daemon's epoch (`epoch.rs`), claimed durably at each start.
//!
//! **Why SQLite (through `rusqlite`, `bundled`).** A write is one small
//! transaction of a few rows, read back only at start; SQLite in WAL mode
//! commits such a transaction with one append to its log, survives a
//! `SIGKILL` at any instant with every committed transaction intact, and
//! is the store the most people have read the failure modes of. `redb`
//! would do the same in pure Rust, but its commits rewrite tree pages
//! (copy-on-write), more bytes per small commit, and its file format has
//! changed across versions; `bundled` compiles SQLite's C with `cc`, so no
//! system library is needed.
//!
//! **Durability follows the audit log's.** Without `--audit-sync` the audit
//! log's lines reach the kernel, not the disk, before an answer is
//! delivered; the journal then runs `synchronous=NORMAL`: a committed
//! transaction survives the death of the process (the case this journal is
//! for), and a power loss can take the last ones with the audit lines
//! beside them, never leave the file inconsistent. With `--audit-sync` it
//! runs `synchronous=FULL`: every commit is on disk before it returns.
//!
//! **What is written when.** The authority marks what it changed under its
//! lock (`State::journal_dirty`) and writes it, in one transaction, before
//! it releases that lock (`StateGuard::release`), so the journal sees the
//! changes in the order the authority made them and a change is on record
//! before the caller (a FUSE `write`, `mkdir`, …) is answered. Answers are
//! written with their chunk (up to `RELEASE_CHUNK` in one transaction),
//! before their audit line, which comes before they are delivered. A
//! rule-answered ask is written once, answered: it was never seen
//! pending, so it is no SQLite row but a line of the journal's answers
//! log (`answer_log.rs`: one append instead of a transaction, read back
//! with the rows). Its delete at close is held back to ride with the next commit
//! (`persist::HOLD_DELETES`), so such an ask costs one commit, not two.

use crate::session::store::answer_log::{AnswerLog, LoggedAnswer};
use rusqlite::{params, Connection, OptionalExtension};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The journal's file in the state dir (SQLite adds `-wal` and `-shm`).
pub const JOURNAL_FILE: &str = "journal.sqlite";

/// The schema's version, kept in `user_version`: a journal written by a
/// newer permfs is refused rather than misread.
/// Version 2 added `asks.request_len`; a version 1 journal is brought
/// up to it at open.
const SCHEMA_VERSION: i64 = 2;

/// One change to write.
#[derive(Debug)]
pub(in crate::session) enum Op {
    /// A session as it is now (its JSON, `StoredSession`).
    PutSession {
        id: String,
        body: Vec<u8>,
    },
    DeleteSession {
        id: String,
    },
    /// An ask as it is now: pending (`StoredAsk`) or answered (the
    /// response's bytes).
    PutAsk {
        id: String,
        origin: String,
        rid: String,
        answered: bool,
        body: Vec<u8>,
        /// Where its answer starts on the descriptor that wrote it
        /// (`Ask::request_len`).
        request_len: u64,
    },
    DeleteAsk {
        id: String,
    },
}

/// What the journal held at start, rows in the order they were written.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// (id, body) of every session, parents before children.
    pub sessions: Vec<(String, Vec<u8>)>,
    pub asks: Vec<AskRow>,
}

/// One ask as the journal holds it.
#[derive(Debug)]
pub struct AskRow {
    pub id: String,
    /// The session that asked.
    pub origin: String,
    pub rid: String,
    pub answered: bool,
    /// Pending: its `StoredAsk`; answered: its response's bytes.
    pub body: Vec<u8>,
    pub request_len: u64,
}

/// The open journal. Its connection is used only under the authority's
/// lock (or at start), so its own mutex is never contended.
pub struct Journal {
    path: PathBuf,
    connection: Mutex<Connection>,
    /// Answers of asks never pending (`answer_log.rs`), and the asks that
    /// have SQLite rows. Taken before `connection` wherever both are.
    side: Mutex<Side>,
}

struct Side {
    answers: AnswerLog,
    in_sqlite: HashSet<String>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal").field("path", &self.path).finish()
    }
}

impl Journal {
    /// Opens (or creates) the journal in `state_dir`. `sync`: every commit
    /// reaches the disk before it returns (`synchronous=FULL`).
    pub fn open(state_dir: &Path, sync: bool) -> Result<Self, String> {
        let path = state_dir.join(JOURNAL_FILE);
        let fail =
            |what: &str, e: rusqlite::Error| format!("the journal {} {what}: {e}", path.display());
        let connection = Connection::open(&path).map_err(|e| fail("cannot be opened", e))?;
        // Owner-only: it holds every pending request.
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
        }
        // Exclusive: this connection is the journal's only user, so it
        // takes its lock once and keeps the WAL index in its own memory,
        // instead of locking a shared-memory file around every commit
        // (about a fifth of a small commit's cost). The lock dies with the
        // process, so the next server (a restart, an upgrade, which kills
        // the old one first) opens it; a second server on the same state
        // dir while one serves is refused here, as it should be.
        connection
            .execute_batch("PRAGMA locking_mode=EXCLUSIVE;")
            .map_err(|e| fail("cannot be locked", e))?;
        let mode: String = connection
            .query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))
            .map_err(|e| fail("cannot use WAL mode", e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(format!(
                "the journal {} cannot use WAL mode (it is in {mode:?})",
                path.display()
            ));
        }
        let synchronous = if sync { "FULL" } else { "NORMAL" };
        connection
            .execute_batch(&format!(
                "PRAGMA synchronous={synchronous};
                 PRAGMA foreign_keys=OFF;"
            ))
            .map_err(|e| fail("cannot be set up", e))?;
        let version: i64 = connection
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .map_err(|e| fail("cannot be read", e))?;
        if version > SCHEMA_VERSION {
            return Err(format!(
                "the journal {} was written by a newer permfs (schema {version}, this one reads {SCHEMA_VERSION}); nothing is served rather than a state misread",
                path.display()
            ));
        }
        connection
            .execute_batch(
                "CREATE TABLE IF NOT EXISTS sessions (
                     id TEXT PRIMARY KEY NOT NULL,
                     body BLOB NOT NULL
                 );
                 CREATE TABLE IF NOT EXISTS asks (
                     id TEXT PRIMARY KEY NOT NULL,
                     origin TEXT NOT NULL,
                     rid TEXT NOT NULL,
                     answered INTEGER NOT NULL,
                     body BLOB NOT NULL,
                     request_len INTEGER NOT NULL DEFAULT 0
                 );",
            )
            .map_err(|e| fail("cannot be created", e))?;
        if version == 1 {
            connection
                .execute_batch("ALTER TABLE asks ADD COLUMN request_len INTEGER NOT NULL DEFAULT 0")
                .map_err(|e| fail("cannot be brought to schema 2", e))?;
        }
        connection
            .execute_batch(&format!("PRAGMA user_version={SCHEMA_VERSION};"))
            .map_err(|e| fail("cannot be created", e))?;
        let answers = AnswerLog::open(state_dir, sync)?;
        // Which asks have rows decides where their answers go, from the
        // first write on (whether or not the journal is loaded first).
        let in_sqlite = {
            let mut ids = connection
                .prepare("SELECT id FROM asks")
                .map_err(|e| fail("cannot be read", e))?;
            let rows = ids
                .query_map([], |row| row.get::<_, String>(0))
                .map_err(|e| fail("cannot be read", e))?;
            rows.collect::<Result<HashSet<String>, _>>()
                .map_err(|e| fail("cannot be read", e))?
        };
        Ok(Self {
            path,
            connection: Mutex::new(connection),
            side: Mutex::new(Side { answers, in_sqlite }),
        })
    }

    fn side(&self) -> std::sync::MutexGuard<'_, Side> {
        self.side
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The journal's bytes on disk (the file and its write-ahead log), for
    /// `permfs status`.
    pub fn size_bytes(&self) -> u64 {
        let size = |path: &Path| std::fs::metadata(path).map_or(0, |m| m.len());
        let mut wal = self.path.clone().into_os_string();
        wal.push("-wal");
        let answers = self.side().answers.path().to_path_buf();
        size(&self.path) + size(Path::new(&wal)) + size(&answers)
    }

    /// Caps the journal at its present size (`true`) or lifts the cap: what
    /// a full disk does to it (`SQLITE_FULL`), for tests of failing closed.
    #[doc(hidden)]
    pub fn simulate_full(&self, full: bool) -> Result<(), String> {
        self.side().answers.simulate_full(full);
        let connection = self
            .connection
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let pages: i64 = if full {
            connection
                .query_row("PRAGMA page_count", [], |row| row.get(0))
                .map_err(|e| e.to_string())?
        } else {
            1 << 30
        };
        connection
            .query_row(&format!("PRAGMA max_page_count={pages}"), [], |row| {
                row.get::<_, i64>(0)
            })
            .map(drop)
            .map_err(|e| e.to_string())
    }

    /// Writes `ops`: the answers of asks that have no SQLite row (they were
    /// never pending) and their deletes to the answers log, the rest in one
    /// SQLite transaction, all of it or none; the transaction first, so an
    /// answer is never on record beside a failed change it came with.
    pub(in crate::session) fn write(&self, ops: &[Op]) -> Result<(), String> {
        if ops.is_empty() {
            return Ok(());
        }
        let mut side = self.side();
        let mut to_sqlite: Vec<&Op> = Vec::with_capacity(ops.len());
        let mut answers: Vec<(String, LoggedAnswer)> = Vec::new();
        let mut logged: HashSet<&str> = HashSet::new();
        let mut deletes: Vec<String> = Vec::new();
        let mut rows_added: HashSet<&str> = HashSet::new();
        let mut rows_gone: Vec<&str> = Vec::new();
        for op in ops {
            match op {
                Op::PutAsk {
                    id,
                    origin,
                    rid,
                    answered: true,
                    body,
                    request_len,
                } if !side.in_sqlite.contains(id) && !rows_added.contains(id.as_str()) => {
                    match std::str::from_utf8(body) {
                        Ok(body) => {
                            logged.insert(id);
                            answers.push((
                                id.clone(),
                                LoggedAnswer {
                                    origin: origin.clone(),
                                    rid: rid.clone(),
                                    request_len: *request_len,
                                    body: body.to_string(),
                                },
                            ));
                        }
                        Err(_) => {
                            rows_added.insert(id);
                            to_sqlite.push(op);
                        }
                    }
                }
                Op::PutAsk { id, .. } => {
                    rows_added.insert(id);
                    to_sqlite.push(op);
                }
                Op::DeleteAsk { id } if side.answers.holds(id) || logged.contains(id.as_str()) => {
                    deletes.push(id.clone());
                }
                Op::DeleteAsk { id } => {
                    rows_gone.push(id);
                    to_sqlite.push(op);
                }
                Op::PutSession { .. } | Op::DeleteSession { .. } => to_sqlite.push(op),
            }
        }
        self.write_sqlite(&to_sqlite)?;
        for id in rows_added {
            side.in_sqlite.insert(id.to_string());
        }
        for id in rows_gone {
            side.in_sqlite.remove(id);
        }
        side.answers.append(answers, deletes)
    }

    /// Writes `ops` in one SQLite transaction: all of them or none.
    fn write_sqlite(&self, ops: &[&Op]) -> Result<(), String> {
        if ops.is_empty() {
            return Ok(());
        }
        let mut connection = self
            .connection
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let transaction = connection
            .transaction()
            .map_err(|e| format!("the journal cannot be written: {e}"))?;
        for op in ops {
            let done = match *op {
                Op::PutSession { id, body } => transaction
                    .prepare_cached(
                        "INSERT INTO sessions (id, body) VALUES (?1, ?2)
                         ON CONFLICT(id) DO UPDATE SET body = excluded.body",
                    )
                    .and_then(|mut s| s.execute(params![id, body])),
                Op::DeleteSession { id } => transaction
                    .prepare_cached("DELETE FROM sessions WHERE id = ?1")
                    .and_then(|mut s| s.execute(params![id])),
                Op::PutAsk {
                    id,
                    origin,
                    rid,
                    answered,
                    body,
                    request_len,
                } => transaction
                    .prepare_cached(
                        "INSERT INTO asks (id, origin, rid, answered, body, request_len)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                         ON CONFLICT(id) DO UPDATE SET answered = excluded.answered,
                             body = excluded.body, request_len = excluded.request_len",
                    )
                    .and_then(|mut s| {
                        s.execute(params![
                            id,
                            origin,
                            rid,
                            answered,
                            body,
                            *request_len as i64
                        ])
                    }),
                Op::DeleteAsk { id } => transaction
                    .prepare_cached("DELETE FROM asks WHERE id = ?1")
                    .and_then(|mut s| s.execute(params![id])),
            };
            done.map_err(|e| format!("the journal cannot be written: {e}"))?;
        }
        transaction
            .commit()
            .map_err(|e| format!("the journal cannot be committed: {e}"))
    }

    /// Everything the journal holds: its SQLite rows, then the answers in
    /// its answers log.
    pub fn load(&self) -> Result<Snapshot, String> {
        let side = self.side();
        let connection = self
            .connection
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let fail = |e: rusqlite::Error| format!("the journal cannot be read: {e}");
        let mut snapshot = Snapshot::default();
        // Ids are paths: a parent's id sorts before its children's.
        let mut sessions = connection
            .prepare("SELECT id, body FROM sessions ORDER BY id")
            .map_err(fail)?;
        let rows = sessions
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .map_err(fail)?;
        for row in rows {
            snapshot.sessions.push(row.map_err(fail)?);
        }
        let mut asks = connection
            .prepare("SELECT id, origin, rid, answered, body, request_len FROM asks ORDER BY rowid")
            .map_err(fail)?;
        let rows = asks
            .query_map([], |row| {
                Ok(AskRow {
                    id: row.get(0)?,
                    origin: row.get(1)?,
                    rid: row.get(2)?,
                    answered: row.get(3)?,
                    body: row.get(4)?,
                    request_len: row.get::<_, i64>(5)?.max(0) as u64,
                })
            })
            .map_err(fail)?;
        for row in rows {
            snapshot.asks.push(row.map_err(fail)?);
        }
        let mut logged: Vec<(String, LoggedAnswer)> = side
            .answers
            .read()?
            .into_iter()
            .filter(|(id, _)| !side.in_sqlite.contains(id))
            .collect();
        // A stable order (the log's own is lost with its map).
        logged.sort_by(|a, b| a.0.cmp(&b.0));
        let logged: Vec<AskRow> = logged
            .into_iter()
            .map(|(id, answer)| AskRow {
                id,
                origin: answer.origin,
                rid: answer.rid,
                answered: true,
                body: answer.body.into_bytes(),
                request_len: answer.request_len,
            })
            .collect();
        snapshot.asks.extend(logged);
        Ok(snapshot)
    }

    /// How many asks the journal holds (pending, answered), for tests and
    /// `permfs status`.
    pub fn counts(&self) -> Result<(u64, u64), String> {
        let logged = self.side().answers.held_count() as u64;
        let connection = self
            .connection
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let count = |answered: bool| {
            connection
                .query_row(
                    "SELECT count(*) FROM asks WHERE answered = ?1",
                    params![answered],
                    |row| row.get::<_, i64>(0),
                )
                .optional()
                .map(|n| n.unwrap_or(0).max(0) as u64)
                .map_err(|e| format!("the journal cannot be read: {e}"))
        };
        Ok((count(false)?, count(true)? + logged))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_batch_is_read_back_and_a_delete_removes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let journal = Journal::open(dir.path(), false).expect("opened");
        journal
            .write(&[
                Op::PutSession {
                    id: "main/a".into(),
                    body: b"{\"a\":1}".to_vec(),
                },
                Op::PutSession {
                    id: "main".into(),
                    body: b"{}".to_vec(),
                },
                Op::PutAsk {
                    id: "1.1-r".into(),
                    origin: "main".into(),
                    rid: "r".into(),
                    answered: false,
                    body: b"p".to_vec(),
                    request_len: 7,
                },
                Op::PutAsk {
                    id: "1.1-r".into(),
                    origin: "main".into(),
                    rid: "r".into(),
                    answered: true,
                    body: b"a".to_vec(),
                    request_len: 9,
                },
            ])
            .expect("written");
        drop(journal);
        let journal = Journal::open(dir.path(), true).expect("reopened");
        let snapshot = journal.load().expect("loaded");
        let ids: Vec<&str> = snapshot.sessions.iter().map(|(i, _)| i.as_str()).collect();
        assert_eq!(ids, vec!["main", "main/a"], "parents first");
        assert_eq!(snapshot.asks.len(), 1);
        assert!(snapshot.asks[0].answered, "the later write wins");
        assert_eq!(snapshot.asks[0].body, b"a".to_vec());
        assert_eq!(snapshot.asks[0].request_len, 9);
        journal
            .write(&[Op::DeleteAsk { id: "1.1-r".into() }])
            .expect("deleted");
        assert_eq!(journal.counts(), Ok((0, 0)));
    }

    #[test]
    fn an_answer_never_pending_is_logged_beside_the_rows_and_read_back() {
        let dir = tempfile::tempdir().expect("temp dir");
        let journal = Journal::open(dir.path(), false).expect("opened");
        let answered = |id: &str| Op::PutAsk {
            id: id.into(),
            origin: "main".into(),
            rid: id.into(),
            answered: true,
            body: b"{\"outcome\": \"allow\"}".to_vec(),
            request_len: 5,
        };
        journal
            .write(&[answered("1.1-a"), answered("1.2-b")])
            .expect("written");
        journal
            .write(&[Op::DeleteAsk { id: "1.1-a".into() }])
            .expect("deleted");
        assert_eq!(journal.counts(), Ok((0, 1)));
        {
            let connection = journal.connection.lock().expect("connection");
            let rows: i64 = connection
                .query_row("SELECT count(*) FROM asks", [], |row| row.get(0))
                .expect("counted");
            assert_eq!(rows, 0, "no SQLite row for an answer never pending");
        }
        drop(journal);
        let journal = Journal::open(dir.path(), false).expect("reopened");
        let snapshot = journal.load().expect("loaded");
        assert_eq!(snapshot.asks.len(), 1);
        let row = &snapshot.asks[0];
        assert_eq!(
            (row.id.as_str(), row.answered, row.request_len),
            ("1.2-b", true, 5)
        );
        assert_eq!(row.body, b"{\"outcome\": \"allow\"}".to_vec());
        // A full disk refuses the log too.
        journal.simulate_full(true).expect("capped");
        let error = journal.write(&[answered("1.3-c")]).expect_err("refused");
        assert!(error.contains("full"), "{error}");
    }

    #[test]
    fn a_journal_of_a_newer_schema_is_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        drop(Journal::open(dir.path(), false).expect("opened"));
        let connection = Connection::open(dir.path().join(JOURNAL_FILE)).expect("sqlite");
        connection
            .execute_batch("PRAGMA user_version=99;")
            .expect("set");
        drop(connection);
        let error = Journal::open(dir.path(), false).expect_err("refused");
        assert!(error.contains("newer permfs"), "{error}");
    }

    #[test]
    fn a_version_1_journal_is_brought_to_version_2_and_keeps_its_rows() {
        let dir = tempfile::tempdir().expect("temp dir");
        {
            let connection =
                Connection::open(dir.path().join(JOURNAL_FILE)).expect("a journal file");
            connection
                .execute_batch(
                    "PRAGMA journal_mode=WAL;
                     CREATE TABLE sessions (id TEXT PRIMARY KEY NOT NULL, body BLOB NOT NULL);
                     CREATE TABLE asks (id TEXT PRIMARY KEY NOT NULL, origin TEXT NOT NULL,
                         rid TEXT NOT NULL, answered INTEGER NOT NULL, body BLOB NOT NULL);
                     INSERT INTO asks VALUES ('1.1-r', 'main', 'r', 1, x'61');
                     PRAGMA user_version=1;",
                )
                .expect("a version 1 journal");
        }
        let journal = Journal::open(dir.path(), false).expect("opened");
        let snapshot = journal.load().expect("loaded");
        assert_eq!(snapshot.asks.len(), 1);
        assert_eq!(snapshot.asks[0].body, b"a".to_vec());
        assert_eq!(snapshot.asks[0].request_len, 0, "unknown: 0");
        drop(journal);
        let reopened = Journal::open(dir.path(), false).expect("opened again at version 2");
        assert_eq!(reopened.load().expect("loaded").asks.len(), 1);
    }
}
