//! The ask protocol's daemon side: a request's draft going in (at the
//! write that completes it, or at its last close), the one-descriptor ask
//! and the `ask` file, readers that wait for a request or its answer, and a
//! decided answer filled into the page cache at open.

use super::*;

impl PermFs {
    /// Opening `ask` read-write starts an exchange under a name of the
    /// daemon's choosing (`ask-<n>`, never one the outbox holds). Read-only,
    /// the handle shows how to use the file; write-only could never read
    /// its answer, so it is refused.
    pub(super) fn open_ask(&self, session: &str, fh: u64, flags: i32, reply: ReplyOpen) {
        let open_flags = FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_NOFLUSH;
        match flags & libc::O_ACCMODE {
            libc::O_RDONLY => return reply.opened(FileHandle(fh), open_flags),
            libc::O_WRONLY => return reply.error(Errno::EINVAL),
            _ => {}
        }
        let Ok(mut drafts) = self.drafts.lock() else {
            return reply.error(Errno::EIO);
        };
        // Named after the handle, so a server that takes the handle over
        // after a restart finds its ask by it (`adopt_stale`); a name a
        // client took already gets a suffix (and is then not found so).
        let mut rid = ask_name(fh);
        while self.authority.outbox_contains(session, &rid) || drafts.has_name(session, &rid) {
            let n = self.next_ask.fetch_add(1, Ordering::Relaxed);
            rid = format!("{}-{n}", ask_name(fh));
        }
        drafts.insert(fh, Draft::new(session, &rid, true));
        drop(drafts);
        if let Ok(mut map) = self.nonblocking.lock() {
            map.insert(fh, flags & libc::O_NONBLOCK != 0);
        }
        reply.opened(FileHandle(fh), open_flags)
    }
    /// Raises an exchange's request that a write completed (the write is
    /// already answered), then serves whoever came meanwhile: readers get
    /// the answer (or why there is none), pollers are woken, and a
    /// descriptor closed meanwhile has its ask withdrawn.
    pub(super) fn raise_written(
        &self,
        fh: u64,
        session: &str,
        rid: &str,
        parsed: Result<AskRequest, String>,
        request_len: Option<u64>,
    ) {
        let failure = match self.raise(fh, session, rid, parsed, request_len) {
            Ok(()) | Err(Errno::EINVAL) => None,
            Err(error) => Some(error),
        };
        let raising = {
            let Ok(mut drafts) = self.drafts.lock() else {
                return;
            };
            let raising = drafts.get_mut(&fh).and_then(|d| d.raising.take());
            if raising.as_ref().is_some_and(|r| r.closed) {
                drafts.remove(&fh);
            }
            raising.unwrap_or_default()
        };
        if raising.closed {
            let _ = self.authority.withdraw(session, rid);
            self.forget_handle(fh);
        }
        for early in raising.readers {
            match failure {
                Some(error) => early.reply.error(error),
                None => self.read_answer(early.at, session, rid, early.reply),
            }
        }
        for poller in raising.pollers {
            let _ = poller.notify();
        }
    }
    /// A read of an exchange whose ask is still being raised waits for the
    /// raise (or is told `EAGAIN` when non-blocking); otherwise the reply
    /// is handed back.
    pub(super) fn wait_for_raise(&self, at: ReadAt, reply: ReplyData) -> Option<ReplyData> {
        let Ok(mut drafts) = self.drafts.lock() else {
            reply.error(Errno::EIO);
            return None;
        };
        let Some(raising) = drafts.get_mut(&at.fh).and_then(|d| d.raising.as_mut()) else {
            return Some(reply);
        };
        if self.is_nonblocking(at.fh) {
            reply.error(Errno::EAGAIN);
        } else {
            raising.readers.push(EarlyRead { at, reply });
        }
        None
    }
    /// Puts `response` in the kernel's pages of response inode `ino`
    /// (dropping another ask's first when `stale`), so its reader costs
    /// no `READ`. Whether the pages now hold the answer and nothing else.
    ///
    /// Filling takes each page's lock, and a handle reading a page in
    /// holds it until its `READ` is answered. `Inodes::open_response`
    /// asks for a fill only while no handle is open, but a handle opened
    /// during the fill (a private mapping of a direct one) can still read
    /// a page in, and only another worker can answer that `READ`. So one
    /// worker is always left out of filling: with one worker no other open
    /// is served during a fill, with more at most all but one fill at once.
    pub(super) fn fill_pages(
        &self,
        ino: INodeNo,
        ask: u64,
        stale: bool,
        response: &Response,
    ) -> bool {
        let Some(notifier) = self.notifier.get() else {
            return false;
        };
        let taken = self
            .fills
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_fills).then_some(n + 1)
            });
        if taken.is_err() {
            return false;
        }
        let filled = (!stale || notifier.inval_inode(ino, 0, 0).is_ok()) && {
            // From here the pages hold this answer or parts of it, never another.
            self.inodes.filled_response(ino.0, ask);
            notifier.store(ino, 0, response.to_json()).is_ok()
        };
        self.fills.fetch_sub(1, Ordering::AcqRel);
        filled
    }
    /// Takes over `fh`, a handle a previous server gave on a request file,
    /// an exchange or `ask` (what that server kept for it died with it),
    /// for the operation now on it: a read at `read_at`, or a write at
    /// `write_at`. Whether it is now this server's, and how:
    ///
    /// - its ask went in (the journal kept it, with where its answer
    ///   starts): the handle is the exchange it was, already asked, so a
    ///   reader blocked across the restart (the kernel re-sends its read)
    ///   waits for the answer, and a close withdraws the ask as before;
    /// - it did not, but its request was written (the drafts log has it):
    ///   the handle is the exchange it was, its request not yet raised;
    /// - it did not, and this is a write that continues a request the
    ///   drafts log has in part: the draft goes on from that part;
    /// - it did not, and this is a write from offset 0 (the kernel
    ///   re-sending the write the old server had read but not answered): a
    ///   fresh draft takes the write;
    /// - otherwise the request the old server held is lost with it, and
    ///   the handle stays stale (`ESTALE`).
    pub(super) fn adopt_stale(
        &self,
        fh: u64,
        node: &Node,
        read_at: Option<u64>,
        write_at: Option<u64>,
    ) -> Adopted {
        let (session, rid, exchange) = match node {
            Node::Exchange(session, rid) => (session.clone(), rid.clone(), true),
            Node::AskFile(session) => (session.clone(), ask_name(fh), true),
            Node::Request(session, rid) => (session.clone(), rid.clone(), false),
            _ => return Adopted::Stale,
        };
        let Ok(mut drafts) = self.drafts.lock() else {
            return Adopted::Stale;
        };
        if drafts.get(&fh).is_some() {
            return Adopted::Draft;
        }
        if let Some(request_len) = self.authority.request_len(&session, &rid) {
            let mut draft = Draft::new(&session, &rid, exchange);
            draft.submitted = true;
            draft.awaiting = None;
            drafts.insert(fh, draft);
            drop(drafts);
            // Its answer starts after the request, or at 0 for a reader
            // that went back to the start before reading.
            if exchange {
                let base = match read_at {
                    Some(offset) if offset < request_len => 0,
                    _ => request_len,
                };
                if let Ok(mut map) = self.exchange_base.lock() {
                    map.insert(fh, base);
                }
            }
            tracing::debug!(fh, %session, %rid, "a previous server's handle taken over: its ask is in");
            return Adopted::Asked;
        }
        // What the drafts log kept of its request: written whole on an
        // exchange and not raised (it goes in at the read, as the
        // exchange it was), or written in part, for the write that
        // continues it (or re-sends a part the old server logged and did
        // not answer), which goes on where the logged part ends.
        let key = (session.clone(), rid.clone());
        let whole = self
            .recovered
            .lock()
            .ok()
            .and_then(|mut r| r.remove(&key))
            .filter(|_| exchange);
        let logged = whole.or_else(|| {
            let at = write_at?;
            let mut partials = self.recovered_partials.lock().ok()?;
            let continued = partials.get(&key)?.len() as u64 >= at;
            continued.then(|| partials.remove(&key)).flatten()
        });
        if let Some(data) = logged {
            let mut draft = Draft::new(&session, &rid, exchange);
            draft.data = data;
            drafts.insert(fh, draft);
            tracing::debug!(fh, %session, %rid, "a previous server's handle taken over with its logged request");
            return Adopted::Draft;
        }
        if write_at == Some(0) {
            drafts.insert(fh, Draft::new(&session, &rid, exchange));
            tracing::debug!(fh, %session, %rid, "a previous server's handle taken over: a fresh draft");
            return Adopted::Draft;
        }
        Adopted::Stale
    }

    /// The session and outbox name of the exchange open on `fh`.
    pub(super) fn exchange_on(&self, fh: u64) -> Option<(String, String)> {
        let drafts = self.drafts.lock().ok()?;
        let draft = drafts.get(&fh).filter(|d| d.exchange)?;
        Some((draft.session.clone(), draft.rid.clone()))
    }
    pub(super) fn draft_exists(&self, session: &str, rid: &str) -> bool {
        self.drafts
            .lock()
            .map(|d| d.has_name(session, rid))
            .unwrap_or(false)
    }
    /// Submits a request that did not go in at a write: a request file's
    /// at its last close, whatever there is (an empty or unfinished one is
    /// answered "invalid"); an exchange's at its first read (one closed
    /// without being read asked nothing).
    pub(super) fn submit_draft(&self, fh: u64, trigger: Submit) -> Result<(), Errno> {
        let (session, rid, data, oversized, exchange) = {
            let mut drafts = self.drafts.lock().map_err(|_| Errno::EIO)?;
            let Some(draft) = drafts.get_mut(&fh) else {
                return Ok(());
            };
            let now = matches!(
                (draft.exchange, trigger),
                (true, Submit::Read) | (false, Submit::Release)
            );
            if draft.submitted || !now {
                return Ok(());
            }
            draft.submitted = true;
            (
                draft.session.clone(),
                draft.rid.clone(),
                std::mem::take(&mut draft.data),
                draft.oversized,
                draft.exchange,
            )
        };
        if oversized {
            let limit = self.authority.request_limit();
            let reason = format!("request is over the {limit}-byte limit (limits.requestBytes)");
            return self
                .raise(fh, &session, &rid, Err(reason), None)
                .and(Err(Errno::EFBIG));
        }
        let parsed = self.authority.read_request(&data);
        let request_len = exchange.then_some(data.len() as u64);
        self.raise(fh, &session, &rid, parsed, request_len)
    }
    /// Puts the request of the draft on `fh` in `session`'s outbox as
    /// `rid` (one that could not be read goes in answered "invalid", and
    /// is `EINVAL` here), then serves the readers of its response that
    /// came before. `request_len`: an exchange's written bytes (where its
    /// answer starts); `None` for a request file.
    pub(super) fn raise(
        &self,
        fh: u64,
        session: &str,
        rid: &str,
        parsed: Result<AskRequest, String>,
        request_len: Option<u64>,
    ) -> Result<(), Errno> {
        let submitted = match request_len {
            Some(len) => self.authority.submit_exchange(session, rid, parsed, len),
            None => self.authority.submit_request(session, rid, parsed),
        };
        self.serve_awaiting(fh, session, rid);
        match submitted {
            Ok(_) => Ok(()),
            Err(error) => {
                tracing::warn!(%session, %rid, %error, "request refused");
                Err(errno(&error))
            }
        }
    }
    /// The draft on `fh` went in (or was refused): the reads and polls of
    /// its response that waited for it go on, and later ones find the ask.
    pub(super) fn serve_awaiting(&self, fh: u64, session: &str, rid: &str) {
        let awaiting = self
            .drafts
            .lock()
            .ok()
            .and_then(|mut drafts| drafts.get_mut(&fh).and_then(|d| d.awaiting.take()));
        let Some(awaiting) = awaiting else {
            return;
        };
        for reader in awaiting.readers {
            if let Some(reply) = reader.read.take() {
                self.read_answer(reader.at, session, rid, reply);
            }
        }
        for poller in awaiting.pollers {
            let _ = poller.notify();
        }
    }
    /// A read of a response whose request has not gone in yet (its writer
    /// has not closed it, or the close is on its way): parked until it
    /// goes in, or told `EAGAIN` when non-blocking. The reply is handed
    /// back when no draft of that name is waiting to go in.
    pub(super) fn await_request(
        &self,
        at: ReadAt,
        session: &str,
        rid: &str,
        reply: ReplyData,
    ) -> Option<ReplyData> {
        let Ok(mut drafts) = self.drafts.lock() else {
            return Some(reply);
        };
        let Some(awaiting) = drafts.awaiting(session, rid) else {
            return Some(reply);
        };
        if self.is_nonblocking(at.fh) {
            reply.error(Errno::EAGAIN);
            return None;
        }
        let read = ParkedRead::park(&self.parked, at.unique, reply);
        awaiting.readers.push(AwaitingRead { at, read });
        None
    }
    /// Reads the answer to `session`'s ask `rid` from `offset` (relative
    /// to the answer), waiting for it unless the handle is non-blocking.
    /// The answer is kept for the handle, so it can be read to the end
    /// even after the ask is forgotten.
    pub(super) fn read_answer(&self, at: ReadAt, session: &str, rid: &str, reply: ReplyData) {
        let ReadAt {
            unique,
            fh,
            offset,
            size,
        } = at;
        let Some(ask) = self.authority.ask_for(session, rid) else {
            let Some(reply) = self.await_request(at, session, rid, reply) else {
                return;
            };
            // Nothing to wait for: the request went in since the first
            // look (read it), or there is no ask of that name.
            return match self.authority.ask_for(session, rid) {
                Some(_) => self.read_answer(at, session, rid, reply),
                None => reply.error(Errno::ENOENT),
            };
        };
        let nonblocking = self.is_nonblocking(fh);
        if let Some(response) = self.authority.read_response(&ask) {
            if let Ok(mut served) = self.served.lock() {
                served.insert(fh, Arc::clone(&response));
            }
            return reply.data(slice(response.to_json(), offset, size));
        }
        if nonblocking {
            return reply.error(Errno::EAGAIN);
        }
        let read = ParkedRead::park(&self.parked, unique, reply);
        let delivery = read.clone();
        let served = Arc::clone(&self.served);
        let woken = Arc::clone(&self.woken);
        let waiter = Box::new(move |response: Arc<Response>| {
            if let Ok(mut served) = served.lock() {
                served.insert(fh, Arc::clone(&response));
            }
            // Listed before the answer goes out: the reader's close may
            // come at once, and must find it to take it off.
            if let Ok(mut woken) = woken.lock() {
                woken.insert(fh);
            }
            if !delivery.answer(slice(response.to_json(), offset, size)) {
                if let Ok(mut woken) = woken.lock() {
                    woken.remove(&fh);
                }
            }
        });
        match self.authority.wait(&ask, waiter) {
            Ok(None) => {}
            Ok(Some(response)) => {
                read.answer(slice(response.to_json(), offset, size));
            }
            Err(error) => read.fail(errno(&error)),
        }
    }
}

/// What [`PermFs::adopt_stale`] made of a previous server's handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Adopted {
    /// Its ask is in: an exchange already asked.
    Asked,
    /// A draft (this server's, or a fresh one for a re-sent write).
    Draft,
    /// What it held died with its server.
    Stale,
}

/// The outbox name of the `ask` exchange opened on handle `fh`: the
/// server's epoch and the handle's number within it (`ask-3.17`).
pub(super) fn ask_name(fh: u64) -> String {
    format!("ask-{}.{}", fh >> 40, fh & ((1 << 40) - 1))
}
