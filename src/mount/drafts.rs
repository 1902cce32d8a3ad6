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

#[cfg(test)]
mod tests {
    use super::Written;

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
