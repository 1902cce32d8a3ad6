//! Requests being written, from the `create` of their name to the moment
//! they go in (are raised), and who waits for that moment.
//!
//! A two-file request (`<rid>.request`) goes in at the write that leaves
//! one whole JSON object in it, or that makes it one that can never be
//! (so the writer's `write(2)` reports a bad request); whatever is left
//! goes in at the last close. Its file is opened without a `FLUSH` at
//! close, so a reader of `<rid>.response` can come before a request that
//! only goes in at the last close: it waits here ([`Awaiting`]) instead of
//! being told the name has no ask. An exchange (one descriptor) goes in at
//! a complete write or its first read, and its own reads and polls that
//! come while it is being raised wait in its [`Raising`].

use super::parking::ParkedRead;
use fuser::{Errno, PollNotifier, ReplyData};
use std::collections::HashMap;

/// A request being written: a `<rid>.request` file, or an exchange.
#[derive(Debug)]
pub struct Draft {
    pub session: String,
    pub rid: String,
    pub data: Vec<u8>,
    pub submitted: bool,
    /// A write went past the size limit: the request is refused whole.
    pub oversized: bool,
    /// The one-descriptor form: asked at its first complete write (or its
    /// first read), forgotten at close.
    pub exchange: bool,
    /// Set while an exchange's request, complete at a write, is being
    /// raised on the writer's thread after the write was answered.
    pub raising: Option<Raising>,
    /// Readers and pollers of `<rid>.response` that came before the ask
    /// was in the outbox; `None` once it is (they then find the ask).
    pub awaiting: Option<Awaiting>,
}

impl Draft {
    pub fn new(session: &str, rid: &str, exchange: bool) -> Self {
        Self {
            session: session.to_string(),
            rid: rid.to_string(),
            data: Vec::new(),
            submitted: false,
            oversized: false,
            exchange,
            raising: None,
            awaiting: Some(Awaiting::default()),
        }
    }
}

/// A draft that goes away without its ask going in (its descriptor was
/// closed with nothing raised, or the daemon stops): whoever waited for
/// the ask is told there is none.
impl Drop for Draft {
    fn drop(&mut self) {
        if let Some(awaiting) = self.awaiting.take() {
            awaiting.no_ask();
        }
    }
}

/// Readers of a response whose request has not gone in yet.
#[derive(Default)]
pub struct Awaiting {
    pub readers: Vec<AwaitingRead>,
    pub pollers: Vec<PollNotifier>,
}

impl std::fmt::Debug for Awaiting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Awaiting")
            .field("readers", &self.readers.len())
            .field("pollers", &self.pollers.len())
            .finish()
    }
}

impl Awaiting {
    fn no_ask(self) {
        for reader in self.readers {
            reader.read.fail(Errno::ENOENT);
        }
        for poller in self.pollers {
            let _ = poller.notify();
        }
    }
}

/// Which part of an answer a read asks for, on which handle, in which
/// FUSE request (what its interrupt names).
#[derive(Debug, Clone, Copy)]
pub struct ReadAt {
    pub unique: u64,
    pub fh: u64,
    /// From the answer's start.
    pub offset: u64,
    pub size: u32,
}

/// A parked read of `<rid>.response`.
pub struct AwaitingRead {
    pub at: ReadAt,
    pub read: ParkedRead,
}

/// Who came to an exchange while its ask was still being raised: they are
/// served when the raise ends (see `PermFs::raise_written`).
#[derive(Default)]
pub struct Raising {
    pub readers: Vec<EarlyRead>,
    pub pollers: Vec<PollNotifier>,
    /// The descriptor was closed meanwhile: the ask is withdrawn once raised.
    pub closed: bool,
}

impl std::fmt::Debug for Raising {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Raising")
            .field("readers", &self.readers.len())
            .field("pollers", &self.pollers.len())
            .field("closed", &self.closed)
            .finish()
    }
}

/// A read that arrived before its exchange's ask existed.
pub struct EarlyRead {
    pub at: ReadAt,
    pub reply: ReplyData,
}

/// The requests being written, by handle, and their names: whether a
/// name is a draft's is asked on every lookup of a new outbox name and
/// every `ask` open, so it is one hash lookup, not a scan of every open
/// handle (10,000 parked exchanges are 10,000 drafts).
#[derive(Debug, Default)]
pub struct Drafts {
    by_handle: HashMap<u64, Draft>,
    names: HashMap<(String, String), u64>,
}

impl Drafts {
    pub fn insert(&mut self, fh: u64, draft: Draft) {
        if let Some(old) = self.remove(&fh) {
            tracing::error!(fh, rid = %old.rid, "a handle number was given twice");
        }
        self.names
            .insert((draft.session.clone(), draft.rid.clone()), fh);
        self.by_handle.insert(fh, draft);
    }

    pub fn remove(&mut self, fh: &u64) -> Option<Draft> {
        let draft = self.by_handle.remove(fh)?;
        self.names
            .remove(&(draft.session.clone(), draft.rid.clone()));
        Some(draft)
    }

    pub fn get(&self, fh: &u64) -> Option<&Draft> {
        self.by_handle.get(fh)
    }

    pub fn get_mut(&mut self, fh: &u64) -> Option<&mut Draft> {
        self.by_handle.get_mut(fh)
    }

    pub fn has_name(&self, session: &str, rid: &str) -> bool {
        self.names
            .contains_key(&(session.to_string(), rid.to_string()))
    }

    /// Where a reader of `session`'s `<rid>.response` waits, while the
    /// draft of that name has not gone in.
    pub fn awaiting(&mut self, session: &str, rid: &str) -> Option<&mut Awaiting> {
        let fh = self.names.get(&(session.to_string(), rid.to_string()))?;
        self.by_handle.get_mut(fh)?.awaiting.as_mut()
    }
}

/// What the bytes written so far make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// One whole JSON object (whitespace around it allowed).
    Complete,
    /// The start of one: more may come.
    Incomplete,
    /// Never a JSON object, whatever comes after.
    Malformed,
}

impl Written {
    pub fn of(data: &[u8]) -> Self {
        let text = data.trim_ascii();
        match text.first() {
            None => return Self::Incomplete,
            Some(b'{') => {}
            Some(_) => return Self::Malformed,
        }
        match serde_json::from_slice::<serde::de::IgnoredAny>(text) {
            Ok(_) => Self::Complete,
            Err(error) if error.is_eof() => Self::Incomplete,
            Err(_) => Self::Malformed,
        }
    }
}

/// What made a draft's request go in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submit {
    /// The last close of a request file: whatever there is.
    Release,
    /// The first read of an exchange.
    Read,
}

/// The outbox names created and not yet asked, kept in a file of the
/// state dir (`drafts.log`) so that a server taking the connection over
/// knows the numbers the kernel holds for them: a name created just before
/// its server died is written to (the kernel re-sends or sends the write)
/// on a node the new server could not otherwise name, since its number is
/// keyed from a name no journal holds yet.
///
/// One `write(2)` per create, never synced: the file must outlive the
/// process, not the machine (a FUSE connection does not outlive the
/// machine either), and the page cache keeps it across a `SIGKILL`. Lines
/// are `<e|r>\t<session>\t<rid>` (`e`: an exchange; names hold no control
/// characters), `b\t<session>\t<rid>\t<hex>` for a whole request written
/// on an exchange and `p\t…` for a request so far, written in part. When it grows past [`DraftLog::LIMIT`] it is rewritten
/// from the drafts open now.
pub struct DraftLog {
    path: std::path::PathBuf,
    file: std::sync::Mutex<Option<std::fs::File>>,
    bytes: std::sync::atomic::AtomicU64,
}

impl DraftLog {
    /// Past this size the log is rewritten from the open drafts.
    pub const LIMIT: u64 = 1 << 20;

    /// The log in `state_dir`, started afresh with `kept` (what a previous
    /// server logged that no ask has yet: names that may still be open,
    /// requests written on them). Without a usable file the log is off: a
    /// name created just before a restart then reads `ESTALE` at its first
    /// write, as it did before the log.
    pub fn start(state_dir: &std::path::Path, kept: &Logged) -> Self {
        let path = state_dir.join("drafts.log");
        let log = Self {
            path,
            file: std::sync::Mutex::new(None),
            bytes: std::sync::atomic::AtomicU64::new(0),
        };
        log.rewrite(
            kept.names
                .iter()
                .map(|(e, s, r)| (*e, s.as_str(), r.as_str())),
            kept.partials
                .iter()
                .map(|((s, r), d)| (s.as_str(), r.as_str(), d.as_slice())),
        );
        for ((session, rid), body) in &kept.bodies {
            log.append(&Self::body_line(session, rid, body));
        }
        log
    }

    /// Notes the request written on `session`'s exchange `rid`, before
    /// its write is answered: the write then returns while the ask is
    /// raised (the asker's way to its read overlaps the judging), and a
    /// server that dies before the ask is journaled leaves the request
    /// here for the next one.
    ///
    /// `drafts` is locked only when the log is due to be rewritten.
    pub fn written(
        &self,
        session: &str,
        rid: &str,
        body: &[u8],
        drafts: &std::sync::Mutex<Drafts>,
    ) {
        if self.bytes.load(std::sync::atomic::Ordering::Relaxed) > Self::LIMIT {
            if let Ok(drafts) = drafts.lock() {
                self.rewrite(drafts.names(), drafts.partials());
            }
        }
        self.append(&Self::body_line(session, rid, body));
    }

    /// What the log in `state_dir` holds (a previous server's): the names,
    /// and the requests written on exchanges whose ask had not gone in.
    pub fn read(state_dir: &std::path::Path) -> Logged {
        let mut logged = Logged::default();
        let Ok(text) = std::fs::read_to_string(state_dir.join("drafts.log")) else {
            return logged;
        };
        for line in text.lines() {
            let mut parts = line.splitn(4, '\t');
            let (Some(kind), Some(session), Some(rid)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let (session, rid) = (session.to_string(), rid.to_string());
            match kind {
                "e" => logged.names.push((true, session, rid)),
                "r" => logged.names.push((false, session, rid)),
                "b" => {
                    if let Some(body) = parts.next().and_then(|h| hex::decode(h).ok()) {
                        logged.partials.remove(&(session.clone(), rid.clone()));
                        logged.bodies.insert((session, rid), body);
                    }
                }
                "p" => {
                    if let Some(data) = parts.next().and_then(|h| hex::decode(h).ok()) {
                        logged.partials.insert((session, rid), data);
                    }
                }
                _ => {}
            }
        }
        logged
    }

    fn body_line(session: &str, rid: &str, body: &[u8]) -> String {
        format!("b\t{session}\t{rid}\t{}\n", hex::encode(body))
    }

    fn partial_line(session: &str, rid: &str, data: &[u8]) -> String {
        format!("p\t{session}\t{rid}\t{}\n", hex::encode(data))
    }

    /// Notes what a write left of a request not yet whole on `session`'s
    /// `rid` (all of it, so the last line is the request so far), before
    /// the write is answered: a server that dies between two writes of
    /// one request leaves the first part to the next, which takes the
    /// rest on the same handle (`adopt_stale`). Most requests are one
    /// write and never come here. `drafts` (locked by the caller) rewrites
    /// the log when it is due.
    pub fn partial(&self, session: &str, rid: &str, data: &[u8], drafts: &Drafts) {
        if self.bytes.load(std::sync::atomic::Ordering::Relaxed) > Self::LIMIT {
            self.rewrite(drafts.names(), drafts.partials());
        }
        self.append(&Self::partial_line(session, rid, data));
    }

    fn line(exchange: bool, session: &str, rid: &str) -> String {
        format!("{}\t{session}\t{rid}\n", if exchange { 'e' } else { 'r' })
    }

    /// Notes `session`'s new outbox name `rid`; `open` (locked by the
    /// caller) is the drafts open now, for a rewrite when the log is past
    /// its bound.
    pub fn created(&self, exchange: bool, session: &str, rid: &str, open: &Drafts) {
        use std::sync::atomic::Ordering;
        if self.bytes.load(Ordering::Relaxed) > Self::LIMIT {
            self.rewrite(open.names(), open.partials());
        }
        self.append(&Self::line(exchange, session, rid));
    }

    fn append(&self, line: &str) {
        use std::io::Write;
        use std::sync::atomic::Ordering;
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(handle) = file.as_mut() {
            if let Err(error) = handle.write_all(line.as_bytes()) {
                tracing::warn!(path = %self.path.display(), %error, "the drafts log cannot be written: a name created just before a restart will read ESTALE");
                *file = None;
            } else {
                self.bytes.fetch_add(line.len() as u64, Ordering::Relaxed);
            }
        }
    }

    /// Replaces the log with `names` (written aside, then renamed over).
    fn rewrite<'a>(
        &self,
        names: impl Iterator<Item = (bool, &'a str, &'a str)>,
        partials: impl Iterator<Item = (&'a str, &'a str, &'a [u8])>,
    ) {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut text: String = names.map(|(e, s, r)| Self::line(e, s, r)).collect();
        text.extend(partials.map(|(s, r, d)| Self::partial_line(s, r, d)));
        let aside = self.path.with_extension("log.new");
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&aside)
            .and_then(|mut f| f.write_all(text.as_bytes()).map(|()| f))
            .and_then(|f| std::fs::rename(&aside, &self.path).map(|()| f));
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        match written {
            Ok(handle) => {
                // The handle still names the file renamed into place; it
                // appends from its end.
                *file = Some(handle);
                self.bytes
                    .store(text.len() as u64, std::sync::atomic::Ordering::Relaxed);
            }
            Err(error) => {
                tracing::warn!(path = %self.path.display(), %error, "the drafts log cannot be written: a name created just before a restart will read ESTALE");
                *file = None;
            }
        }
    }
}

/// What a drafts log held.
#[derive(Debug, Default)]
pub struct Logged {
    /// (exchange, session, rid) of names created.
    pub names: Vec<(bool, String, String)>,
    /// Requests written on exchanges, by (session, rid).
    pub bodies: HashMap<(String, String), Vec<u8>>,
    /// Requests written in part (request files and exchanges), by
    /// (session, rid): the bytes every answered `write` had put there.
    pub partials: HashMap<(String, String), Vec<u8>>,
}

impl Drafts {
    /// The requests written in part on the drafts open now.
    pub fn partials(&self) -> impl Iterator<Item = (&str, &str, &[u8])> {
        self.by_handle
            .values()
            .filter(|d| !d.submitted && !d.data.is_empty())
            .map(|d| (d.session.as_str(), d.rid.as_str(), d.data.as_slice()))
    }

    /// The drafts open now, as the drafts log lists them.
    pub fn names(&self) -> impl Iterator<Item = (bool, &str, &str)> {
        self.by_handle
            .values()
            .filter(|d| !d.submitted)
            .map(|d| (d.exchange, d.session.as_str(), d.rid.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::{Draft, DraftLog, Drafts, Logged, Written};

    /// The last part logged of a request is what comes back; a whole
    /// request logged later supersedes it; and a rewrite keeps the parts
    /// of the drafts still open.
    #[test]
    fn parts_of_requests_come_back_and_a_whole_one_supersedes_them() {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = DraftLog::start(dir.path(), &Logged::default());
        let mut drafts = Drafts::default();
        log.partial("main", "a", b"{\"surf", &drafts);
        log.partial("main", "a", b"{\"surface\":", &drafts);
        log.partial("main", "b", b"{", &drafts);
        log.append(&DraftLog::body_line("main", "b", b"{}"));
        let read = DraftLog::read(dir.path());
        let key = |rid: &str| ("main".to_string(), rid.to_string());
        assert_eq!(
            read.partials.get(&key("a")),
            Some(&b"{\"surface\":".to_vec())
        );
        assert_eq!(read.partials.get(&key("b")), None, "b was whole at last");
        assert_eq!(read.bodies.get(&key("b")), Some(&b"{}".to_vec()));
        let mut open = Draft::new("main", "c", true);
        open.data = b"{\"x".to_vec();
        drafts.insert(7, open);
        log.rewrite(drafts.names(), drafts.partials());
        let read = DraftLog::read(dir.path());
        assert_eq!(read.partials.len(), 1);
        assert_eq!(read.partials.get(&key("c")), Some(&b"{\"x".to_vec()));
        assert_eq!(
            read.names,
            vec![(true, "main".to_string(), "c".to_string())]
        );
    }

    #[test]
    fn a_request_is_whole_once_its_object_closes() {
        assert_eq!(Written::of(b""), Written::Incomplete);
        assert_eq!(Written::of(b"  \n"), Written::Incomplete);
        assert_eq!(Written::of(b"{\"surface\": \"ba"), Written::Incomplete);
        assert_eq!(Written::of(b"{\"a\": tr"), Written::Incomplete);
        assert_eq!(Written::of(b"{\"a\": \"\\u00"), Written::Incomplete);
        assert_eq!(Written::of(b"{\"a\": 12"), Written::Incomplete);
        assert_eq!(Written::of(b"{\"a\": \"\xc3"), Written::Incomplete);
        assert_eq!(Written::of(b"{\"a\": 1}\n"), Written::Complete);
        assert_eq!(Written::of(b"\n {} \t"), Written::Complete);
    }

    #[test]
    fn what_can_never_be_a_request_is_malformed_at_once() {
        assert_eq!(Written::of(b"hello"), Written::Malformed);
        assert_eq!(Written::of(b"[1, 2"), Written::Malformed);
        assert_eq!(Written::of(b"{a: 1"), Written::Malformed);
        assert_eq!(Written::of(b"{\"a\": 1} {"), Written::Malformed);
        assert_eq!(Written::of(b"{\"a\" 1"), Written::Malformed);
        assert_eq!(Written::of(b"\xef\xbb\xbf{}"), Written::Malformed);
    }
}
