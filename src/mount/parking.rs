//! Reads whose answer comes later.
//!
//! A parked read keeps its fuser `ReplyData` in a shared slot and is listed
//! for the interrupt watcher. Whoever takes the slot first answers it: the
//! event it waits for, the watcher (with `EINTR`), or shutdown. Nothing
//! waits in a thread.

use fuser::{Errno, ReplyData};
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
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

/// The signal watcher's memory: where the round-robin sweep stands, and a
/// kept `/proc/<tid>/status` descriptor per parked reader it has checked.
///
/// A check is then one `pread` (the kernel renders the file afresh on
/// every read from offset 0), not `open`, `statx`, two `read`s and
/// `close`: about half the cost, which is what 10,000 parked readers pay
/// several times a second. A kept descriptor also names the thread it was
/// opened for, so a recycled thread id cannot be mistaken for it.
pub struct SignalWatch {
    held: HashMap<u64, Option<File>>,
    resume_after: u64,
    /// How many descriptors may be kept (the rest are opened per check).
    max_held: usize,
    kept: usize,
}

impl SignalWatch {
    pub fn new(max_held: usize) -> Self {
        Self {
            held: HashMap::new(),
            resume_after: 0,
            max_held,
            kept: 0,
        }
    }

    /// Checks the next `share(n)` of the `n` parked readers (round robin)
    /// and answers those with a pending signal `EINTR`.
    pub fn sweep(&mut self, registry: &Parked, share: impl Fn(usize) -> usize) {
        let mut callers: Vec<(u64, u32)> = registry
            .lock()
            .map(|map| map.iter().map(|(id, (_, pid, _))| (*id, *pid)).collect())
            .unwrap_or_default();
        callers.sort_unstable();
        // Forget the descriptors of readers no longer parked.
        let kept = &mut self.kept;
        self.held.retain(|id, file| {
            let live = callers.binary_search_by_key(id, |(i, _)| *i).is_ok();
            if !live && file.is_some() {
                *kept -= 1;
            }
            live
        });
        let start = callers.partition_point(|(id, _)| *id <= self.resume_after);
        let count = share(callers.len()).min(callers.len());
        let batch: Vec<(u64, u32)> = callers[start..]
            .iter()
            .chain(&callers[..start])
            .take(count)
            .copied()
            .collect();
        self.resume_after = if batch.len() < callers.len() {
            batch.last().map(|(id, _)| *id).unwrap_or(0)
        } else {
            0
        };
        let signalled: Vec<u64> = batch
            .into_iter()
            .filter(|(id, pid)| self.signalled(*id, *pid))
            .map(|(id, _)| id)
            .collect();
        let interrupted: Vec<ReplySlot> = match registry.lock() {
            Ok(mut map) => signalled
                .into_iter()
                .filter_map(|id| map.remove(&id).map(|(_, _, slot)| slot))
                .collect(),
            Err(_) => Vec::new(),
        };
        for slot in interrupted {
            if let Some(reply) = slot.lock().ok().and_then(|mut s| s.take()) {
                reply.error(Errno::EINTR);
            }
        }
    }

    fn signalled(&mut self, id: u64, pid: u32) -> bool {
        let path = format!("/proc/{pid}/status");
        let entry = self.held.entry(id).or_insert(None);
        if entry.is_none() && self.kept < self.max_held {
            if let Ok(file) = File::open(&path) {
                *entry = Some(file);
                self.kept += 1;
            }
        }
        let mut buffer = [0u8; 4096];
        let read = match entry {
            Some(file) => file.read_at(&mut buffer, 0),
            None => File::open(&path).and_then(|file| file.read_at(&mut buffer, 0)),
        };
        match read {
            // The caller is gone (or its status unreadable): release its
            // reply.
            Err(_) | Ok(0) => true,
            Ok(n) => pending_in_status(&buffer[..n]),
        }
    }
}

/// True when a `/proc/<tid>/status` text shows a pending signal the thread
/// neither blocks nor ignores, or a pending `SIGKILL`: its blocked read
/// must end with `EINTR` (fuser answers the kernel's interrupts with
/// ENOSYS, so nothing else would wake it). A field that cannot be read
/// counts as empty, except that a text without `SigBlk` (cut short) counts
/// as signalled: releasing a reader early is safe, keeping a killed one is
/// not.
pub fn pending_in_status(status: &[u8]) -> bool {
    let (mut pending, mut blocked, mut ignored) = (0u64, None, 0u64);
    for line in status.split(|b| *b == b'\n') {
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            continue;
        };
        let (name, value) = line.split_at(colon);
        let hex = || {
            std::str::from_utf8(&value[1..])
                .ok()
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
                .unwrap_or(0)
        };
        match name {
            b"SigPnd" | b"ShdPnd" => pending |= hex(),
            b"SigBlk" => blocked = Some(hex()),
            b"SigIgn" => ignored = hex(),
            _ => {}
        }
    }
    let Some(blocked) = blocked else {
        return true;
    };
    let kill = 1u64 << (libc::SIGKILL - 1);
    pending & kill != 0 || pending & !blocked & !ignored != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_fields_are_read() {
        let quiet = b"Name:\tcat\nSigQ:\t0/1\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000000\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n";
        assert!(!pending_in_status(quiet));
        let int = b"SigPnd:\t0000000000000000\nShdPnd:\t0000000000000002\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n";
        assert!(pending_in_status(int));
        let ignored = b"SigPnd:\t0000000000000000\nShdPnd:\t0000000000000002\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000000002\n";
        assert!(!pending_in_status(ignored));
        let blocked_kill = b"SigPnd:\t0000000000000100\nShdPnd:\t0000000000000000\nSigBlk:\tffffffffffffffff\nSigIgn:\t0000000000000000\n";
        assert!(pending_in_status(blocked_kill));
        assert!(pending_in_status(b"Name:\tcut"));
        let own = std::fs::read(format!("/proc/{}/status", std::process::id())).expect("status");
        assert!(!pending_in_status(&own));
    }
}
