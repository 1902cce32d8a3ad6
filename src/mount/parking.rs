//! Reads whose answer comes later.
//!
//! A parked read keeps its fuser `ReplyData` in a shared slot and is listed
//! for the interrupt watcher. Whoever takes the slot first answers it: the
//! event it waits for, the watcher (with `EINTR`), or shutdown. Nothing
//! waits in a thread.

use fuser::{Errno, ReplyData};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A parked reader's reply, taken at most once.
pub type ReplySlot = Arc<Mutex<Option<ReplyData>>>;

/// Every parked read: id → (what it waits for, caller pid, slot).
pub type Parked = Arc<Mutex<HashMap<u64, (String, u32, ReplySlot)>>>;

/// One parked read; clones share the same slot.
#[derive(Clone)]
pub struct ParkedRead {
    id: u64,
    slot: ReplySlot,
    registry: Parked,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl ParkedRead {
    /// Parks `reply` and lists it for the interrupt watcher.
    pub fn park(registry: &Parked, waiting_for: String, pid: u32, reply: ReplyData) -> Self {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let slot: ReplySlot = Arc::new(Mutex::new(Some(reply)));
        if let Ok(mut map) = registry.lock() {
            map.insert(id, (waiting_for, pid, Arc::clone(&slot)));
        }
        Self {
            id,
            slot,
            registry: Arc::clone(registry),
        }
    }

    fn take(&self) -> Option<ReplyData> {
        if let Ok(mut map) = self.registry.lock() {
            map.remove(&self.id);
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

/// Ends every parked read with `error` (the daemon is stopping).
pub fn release_all(registry: &Parked, error: Errno) {
    let slots: Vec<ReplySlot> = registry
        .lock()
        .map(|mut map| map.drain().map(|(_, (_, _, slot))| slot).collect())
        .unwrap_or_default();
    for slot in slots {
        if let Some(reply) = slot.lock().ok().and_then(|mut s| s.take()) {
            reply.error(error);
        }
    }
}
