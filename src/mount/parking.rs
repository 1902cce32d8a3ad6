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

#[derive(Default)]
pub struct ParkedReads {
    /// FUSE unique id → its reply slot.
    readers: HashMap<u64, ReplySlot>,
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

/// How long an interrupt waits for its read to park. A read is parked
/// within microseconds of being taken off the queue, or answered without
/// parking; the margin covers a FUSE thread the scheduler set aside.
const EARLY_INTERRUPT_KEPT: Duration = Duration::from_secs(1);

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
        let slot: ReplySlot = Arc::new(Mutex::new(None));
        let interrupted = match registry.lock() {
            Ok(mut parked) => {
                let interrupted = parked.early.remove(&unique).is_some();
                if !interrupted {
                    if let Ok(mut held) = slot.lock() {
                        *held = Some(reply);
                    }
                    parked.readers.insert(unique, Arc::clone(&slot));
                    None
                } else {
                    Some(reply)
                }
            }
            // A poisoned registry: no interrupt could reach the read, so
            // it is not parked at all.
            Err(_) => Some(reply),
        };
        if let Some(reply) = interrupted {
            reply.error(Errno::EINTR);
        }
        Self {
            unique,
            slot,
            registry: Arc::clone(registry),
        }
    }

    fn take(&self) -> Option<ReplyData> {
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
    let slot = match registry.lock() {
        Ok(mut parked) => match parked.readers.remove(&unique) {
            Some(slot) => Some(slot),
            None => {
                let now = Instant::now();
                let due = parked
                    .early_pruned
                    .is_none_or(|at| now.duration_since(at) >= EARLY_INTERRUPT_KEPT);
                if due {
                    parked
                        .early
                        .retain(|_, came| now.duration_since(*came) < EARLY_INTERRUPT_KEPT);
                    parked.early_pruned = Some(now);
                }
                parked.early.insert(unique, now);
                None
            }
        },
        Err(_) => None,
    };
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
const PACE_IN_FLIGHT: usize = 64;
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
