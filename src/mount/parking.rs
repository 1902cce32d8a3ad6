//! Reads whose answer comes later.
//!
//! A parked read keeps its fuser `ReplyData` in a shared slot, listed under
//! the FUSE request's unique id. Whoever takes the slot first answers it:
//! the event it waits for, the kernel's `FUSE_INTERRUPT` for that request
//! (with `EINTR`: its caller got a signal), or shutdown. Nothing waits in a
//! thread, and nothing polls: see `docs/interrupts.md`.

use fuser::{Errno, ReplyData, ReplyEmpty};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A parked reader's reply, taken at most once.
pub type ReplySlot = Arc<Mutex<Option<ReplyData>>>;

/// Every parked read, and the interrupts that came before their read.
pub type Parked = Arc<Mutex<ParkedReads>>;

/// The bookkeeping of parked reads by FUSE request id, over any slot type
/// (fuser's replies cannot be made outside fuser, so the tests use
/// numbers).
pub struct ParkedReads<S = ReplySlot> {
    /// FUSE unique id → its reply slot.
    readers: HashMap<u64, S>,
    /// Interrupts for requests not parked (yet), with when they came. The
    /// kernel sends an interrupt as soon as the daemon has taken the
    /// request off the queue, so it can overtake the read on another FUSE
    /// thread; the read then finds it here when it parks. An interrupt
    /// for a request answered without parking is never claimed: such
    /// entries are dropped once older than [`EARLY_INTERRUPT_KEPT`], in a
    /// pass at most that often, so the table holds at most two periods'
    /// worth of interrupts however many signals a caller sends itself.
    early: HashMap<u64, Instant>,
    early_pruned: Option<Instant>,
}

impl<S> Default for ParkedReads<S> {
    fn default() -> Self {
        Self {
            readers: HashMap::new(),
            early: HashMap::new(),
            early_pruned: None,
        }
    }
}

/// How long an interrupt waits for its read to park. A read is parked
/// within microseconds of being taken off the queue, or answered without
/// parking; the margin covers a FUSE thread the scheduler set aside.
const EARLY_INTERRUPT_KEPT: Duration = Duration::from_secs(1);

impl<S> ParkedReads<S> {
    /// Lists `slot` for request `unique`; false (and not listed) when the
    /// request's interrupt already came: the read must end with `EINTR`.
    fn park(&mut self, unique: u64, slot: S) -> bool {
        if self.early.remove(&unique).is_some() {
            return false;
        }
        self.readers.insert(unique, slot);
        true
    }

    /// The interrupt for request `unique` came at `now`: its slot, when
    /// parked; otherwise it is remembered for the read to find.
    fn interrupted(&mut self, unique: u64, now: Instant) -> Option<S> {
        if let Some(slot) = self.readers.remove(&unique) {
            return Some(slot);
        }
        let due = self
            .early_pruned
            .is_none_or(|at| now.duration_since(at) >= EARLY_INTERRUPT_KEPT);
        if due {
            self.early
                .retain(|_, came| now.duration_since(*came) < EARLY_INTERRUPT_KEPT);
            self.early_pruned = Some(now);
        }
        self.early.insert(unique, now);
        None
    }
}

/// One parked read; clones share the same slot.
#[derive(Clone)]
pub struct ParkedRead {
    unique: u64,
    slot: ReplySlot,
    registry: Parked,
}

impl ParkedRead {
    /// Parks `reply` of FUSE request `unique` until it is answered or
    /// interrupted. When its interrupt came first, the read ends with
    /// `EINTR` at once, and every later answer finds the slot empty.
    pub fn park(registry: &Parked, unique: u64, reply: ReplyData) -> Self {
        let slot: ReplySlot = Arc::new(Mutex::new(Some(reply)));
        let parked = registry
            .lock()
            .map(|mut parked| parked.park(unique, Arc::clone(&slot)))
            // A poisoned registry: no interrupt could reach the read, so
            // it is not parked at all.
            .unwrap_or(false);
        if !parked {
            if let Some(reply) = slot.lock().ok().and_then(|mut s| s.take()) {
                reply.error(Errno::EINTR);
            }
        }
        Self {
            unique,
            slot,
            registry: Arc::clone(registry),
        }
    }

    /// Takes the read back, to be answered elsewhere (`None` when it was
    /// answered or interrupted meanwhile).
    pub fn take(&self) -> Option<ReplyData> {
        if let Ok(mut parked) = self.registry.lock() {
            parked.readers.remove(&self.unique);
        }
        self.slot.lock().ok().and_then(|mut slot| slot.take())
    }

    /// Answers with `bytes`; false when the read was already answered
    /// (interrupted), so the caller can give its item to someone else.
    pub fn answer(&self, bytes: &[u8]) -> bool {
        match self.take() {
            Some(reply) => {
                reply.data(bytes);
                true
            }
            None => false,
        }
    }

    pub fn fail(&self, error: Errno) {
        if let Some(reply) = self.take() {
            reply.error(error);
        }
    }
}

/// The kernel's `FUSE_INTERRUPT` for request `unique`: a parked read ends
/// with `EINTR` (the ask stays pending; a new read waits again). An
/// interrupt for a request not parked is kept for the read to find (see
/// [`ParkedReads::early`]). `reply` answers the interrupt itself, which
/// the kernel does not wait for; never `ENOSYS`, which would turn
/// interrupts off for the whole mount.
pub fn interrupt(registry: &Parked, unique: u64, reply: ReplyEmpty) {
    let slot = registry
        .lock()
        .ok()
        .and_then(|mut parked| parked.interrupted(unique, Instant::now()));
    reply.ok();
    if let Some(reply) = slot.and_then(|slot| slot.lock().ok().and_then(|mut s| s.take())) {
        reply.error(Errno::EINTR);
    }
}

/// Ends every parked read with `error` (the daemon is stopping).
pub fn release_all(registry: &Parked, error: Errno) {
    let slots: Vec<ReplySlot> = registry
        .lock()
        .map(|mut parked| parked.readers.drain().map(|(_, slot)| slot).collect())
        .unwrap_or_default();
    for slot in slots {
        if let Some(reply) = slot.lock().ok().and_then(|mut s| s.take()) {
            reply.error(error);
        }
    }
}

/// Handles whose parked read was answered by a waiter (a decision, a
/// grant's release) and that have not been closed yet: the readers a
/// release has woken and that are still on their way out.
pub type Woken = Arc<Mutex<std::collections::HashSet<u64>>>;

/// A big release goes on once no more than this many woken readers are
/// still on their way out...
const PACE_IN_FLIGHT: usize = 4;
/// ...or after this long, whichever comes first (a reader may keep its
/// handle open: it must not hold the release up).
const PACE_AT_MOST: Duration = Duration::from_millis(5);

/// Between the chunks of a big release: each woken reader's next requests
/// (its read to the end, its close) join the one queue every asker's
/// requests wait in, so releasing 10,000 at once would put 20,000 requests
/// ahead of an unrelated ask. Waiting for most of a chunk to come back
/// keeps that queue short; the readers keep both cores busy meanwhile, so
/// the release as a whole takes about as long.
pub fn pace_release(woken: &Woken) {
    let deadline = Instant::now() + PACE_AT_MOST;
    while Instant::now() < deadline {
        let in_flight = woken.lock().map(|w| w.len()).unwrap_or(0);
        if in_flight <= PACE_IN_FLIGHT {
            return;
        }
        std::thread::sleep(Duration::from_micros(250));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interrupt_before_the_read_parks_ends_it_when_it_parks() {
        let mut parked = ParkedReads::<&str>::default();
        let now = Instant::now();
        assert_eq!(parked.interrupted(7, now), None, "nothing parked yet");
        assert!(parked.park(8, "other"), "another request is not touched");
        assert!(!parked.park(7, "late"), "the read finds its interrupt");
        assert!(parked.early.is_empty(), "and claims it");
        assert!(parked.park(7, "again"), "a later read of the id parks");
    }

    #[test]
    fn an_interrupt_takes_the_parked_slot_once() {
        let mut parked = ParkedReads::<&str>::default();
        let now = Instant::now();
        assert!(parked.park(3, "reply"));
        assert_eq!(parked.interrupted(3, now), Some("reply"));
        assert!(parked.readers.is_empty());
        // A second interrupt finds nothing to take, and is only remembered.
        assert_eq!(parked.interrupted(3, now), None);
    }

    #[test]
    fn unclaimed_interrupts_are_forgotten() {
        let mut parked = ParkedReads::<&str>::default();
        let start = Instant::now();
        for unique in 0..1000 {
            parked.interrupted(unique, start);
        }
        // Within the period nothing is scanned or dropped...
        parked.interrupted(1000, start + EARLY_INTERRUPT_KEPT / 2);
        assert_eq!(parked.early.len(), 1001);
        // ...after it, everything older than the period goes at once.
        parked.interrupted(1001, start + EARLY_INTERRUPT_KEPT * 2);
        assert_eq!(parked.early.len(), 1);
        assert!(
            parked.park(1000, "read"),
            "a forgotten interrupt ends nothing"
        );
    }
}
