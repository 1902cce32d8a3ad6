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
use std::time::{Duration, Instant};

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

/// Bumped whenever a read is parked or leaves a registry: the watcher
/// rebuilds its view of the parked readers only after a change.
static CHANGES: AtomicU64 = AtomicU64::new(0);

impl ParkedRead {
    /// Parks `reply` and lists it for the interrupt watcher.
    pub fn park(registry: &Parked, waiting_for: String, pid: u32, reply: ReplyData) -> Self {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let slot: ReplySlot = Arc::new(Mutex::new(Some(reply)));
        if let Ok(mut map) = registry.lock() {
            map.insert(id, (waiting_for, pid, Arc::clone(&slot)));
        }
        CHANGES.fetch_add(1, Ordering::Relaxed);
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
        CHANGES.fetch_add(1, Ordering::Relaxed);
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
    CHANGES.fetch_add(1, Ordering::Relaxed);
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

/// The signal watcher's memory: where the slow sweep stands, what it
/// knows of each parked reader, and kept `/proc/.../status` descriptors.
///
/// Two tiers. Every tick, one status read per *process* with parked
/// readers (its main thread's: `ShdPnd`, what `kill`, Ctrl-C and a fatal
/// signal's `SIGKILL` show); when it shows a signal the process does not
/// ignore, every parked reader of that process is checked at once. A
/// signal sent to one thread (`tgkill`) is seen by the per-reader sweep,
/// which covers every reader within 0.45 s reading its thread's `stat`
/// (about 3 µs against `status`'s 11 here, so 10,000 readers cost some 7 %
/// of a core), with a `status` read every [`STATUS_EVERY`]th time for the
/// real-time signals `stat` does not show. A check is one `pread` of a
/// kept descriptor (the kernel renders
/// the file afresh on every read from offset 0), not `open`, `statx`, two
/// `read`s and `close`; a kept descriptor also names the thread it was
/// opened for, so a recycled thread id cannot be mistaken for it.
pub struct SignalWatch {
    /// The parked readers (id, thread id) in id order, as of `seen`.
    callers: Vec<(u64, u32)>,
    live_processes: Vec<u32>,
    seen: Option<u64>,
    readers: HashMap<u64, Reader>,
    /// By process id: its main thread's status descriptor, and the pending
    /// signals seen there last tick (only new ones send the watcher to
    /// its readers, so a signal every thread blocks costs nothing more).
    processes: HashMap<u32, (Option<File>, u64)>,
    resume_after: u64,
    /// How many descriptors may be kept (the rest are opened per check).
    max_held: usize,
    kept: usize,
    /// What one check costs (moving average, wall-clock ns).
    read_ns: f64,
}

/// Every tick checks at least this many parked readers one by one.
const CHECKS_MIN: usize = 64;
/// A full sweep of the parked readers takes at least this many ticks
/// (cheap checks: 12 × 25 ms), and at most this many (18 × 25 ms = 0.45 s:
/// a signal sent to one thread is seen within half a second).
const SWEEP_TICKS_FEWEST: usize = 12;
const SWEEP_TICKS_MOST: usize = 18;
/// A reader's sweep reads its `stat` (a quarter of the cost of `status`),
/// whose pending mask shows only the classic signals 1–31; every this many
/// checks it reads `status` instead, which shows real-time ones too (what
/// `pthread_cancel` sends): seen within 64 × 0.45 s at most. (Every 16th
/// cost a third of the watcher's time.)
const STATUS_EVERY: u32 = 64;
/// The share of a tick the one-by-one checks may take: the sweep stretches
/// (up to [`SWEEP_TICKS_MOST`]) rather than exceed it.
const TICK_BUDGET_NS: f64 = 0.06 * 25_000_000.0;

struct Reader {
    pid: u32,
    /// The reader's process, once its status was read.
    tgid: Option<u32>,
    /// Its kept `/proc/<tid>/stat`.
    file: Option<File>,
    /// Checks so far (every [`STATUS_EVERY`]th reads `status`).
    checks: u32,
}

/// What one status read said.
struct Status {
    signalled: bool,
    tgid: Option<u32>,
    /// [`Masks::process_pending`]; all set when unreadable.
    process_pending: u64,
}

impl SignalWatch {
    pub fn new(max_held: usize) -> Self {
        Self {
            callers: Vec::new(),
            live_processes: Vec::new(),
            seen: None,
            readers: HashMap::new(),
            processes: HashMap::new(),
            resume_after: 0,
            max_held,
            kept: 0,
            read_ns: 5_000.0,
        }
    }

    /// How many of `n` parked readers this tick's sweep checks: within
    /// the tick budget at the measured cost, between a 1/12 and a 1/60 share.
    fn share(&self, n: usize) -> usize {
        let affordable = (TICK_BUDGET_NS / self.read_ns.max(1.0)) as usize;
        affordable
            .clamp(
                n.div_ceil(SWEEP_TICKS_MOST),
                n.div_ceil(SWEEP_TICKS_FEWEST).max(1),
            )
            .max(CHECKS_MIN)
            .min(n)
    }

    /// One tick: new readers and the readers of signalled processes are
    /// checked, plus the next `share(n)` of the `n` parked readers (round
    /// robin); those with a pending signal are answered `EINTR`.
    pub fn sweep(&mut self, registry: &Parked) {
        // Readers checked in full (`status`: a signal pending for their
        // whole process shows only there): new ones, and those of a
        // process with a new signal.
        let mut full = self.refresh(registry);
        let live_processes = std::mem::take(&mut self.live_processes);
        let signalled_processes: Vec<u32> = live_processes
            .iter()
            .copied()
            .filter(|tgid| self.process_signalled(*tgid))
            .collect();
        self.live_processes = live_processes;
        if !signalled_processes.is_empty() {
            full.extend(
                self.readers
                    .iter()
                    .filter(|(_, r)| r.tgid.is_some_and(|t| signalled_processes.contains(&t)))
                    .map(|(id, _)| *id),
            );
        }
        full.sort_unstable();
        full.dedup();
        let mut due = Vec::new();
        // The slow sweep.
        let callers = &self.callers;
        let start = callers.partition_point(|(id, _)| *id <= self.resume_after);
        let count = self.share(callers.len());
        let batch: Vec<u64> = callers[start..]
            .iter()
            .chain(&callers[..start])
            .take(count)
            .map(|(id, _)| *id)
            .collect();
        self.resume_after = if batch.len() < callers.len() {
            batch.last().copied().unwrap_or(0)
        } else {
            0
        };
        due.extend(
            batch
                .into_iter()
                .filter(|id| full.binary_search(id).is_err()),
        );
        let started = Instant::now();
        let checked = due.len() + full.len();
        let mut signalled: Vec<u64> = full
            .into_iter()
            .filter(|id| self.reader_signalled(*id, true))
            .collect();
        signalled.extend(
            due.into_iter()
                .filter(|id| self.reader_signalled(*id, false)),
        );
        if checked > 0 {
            let each = started.elapsed().as_nanos() as f64 / checked as f64;
            self.read_ns = 0.8 * self.read_ns + 0.2 * each;
        }
        if signalled.is_empty() {
            return;
        }
        let interrupted: Vec<ReplySlot> = match registry.lock() {
            Ok(mut map) => signalled
                .into_iter()
                .filter_map(|id| map.remove(&id).map(|(_, _, slot)| slot))
                .collect(),
            Err(_) => Vec::new(),
        };
        CHANGES.fetch_add(1, Ordering::Relaxed);
        for slot in interrupted {
            if let Some(reply) = slot.lock().ok().and_then(|mut s| s.take()) {
                reply.error(Errno::EINTR);
            }
        }
    }

    /// After a change to the registry: the parked readers anew, descriptors
    /// of those gone closed; returns the new readers (checked at once).
    fn refresh(&mut self, registry: &Parked) -> Vec<u64> {
        let changes = CHANGES.load(Ordering::Relaxed);
        let mut due = Vec::new();
        if self.seen == Some(changes) {
            // Readers whose process is not known yet are still due.
            due.extend(
                self.readers
                    .iter()
                    .filter(|(_, r)| r.tgid.is_none())
                    .map(|(id, _)| *id),
            );
            return due;
        }
        self.seen = Some(changes);
        let mut callers: Vec<(u64, u32)> = registry
            .lock()
            .map(|map| map.iter().map(|(id, (_, pid, _))| (*id, *pid)).collect())
            .unwrap_or_default();
        callers.sort_unstable();
        let kept = &mut self.kept;
        self.readers.retain(|id, reader| {
            let live = callers.binary_search_by_key(id, |(i, _)| *i).is_ok();
            if !live && reader.file.is_some() {
                *kept -= 1;
            }
            live
        });
        for (id, pid) in &callers {
            self.readers.entry(*id).or_insert_with(|| {
                due.push(*id);
                Reader {
                    pid: *pid,
                    tgid: None,
                    file: None,
                    checks: 0,
                }
            });
        }
        self.callers = callers;
        let mut live_processes: Vec<u32> = self.readers.values().filter_map(|r| r.tgid).collect();
        live_processes.sort_unstable();
        live_processes.dedup();
        let kept = &mut self.kept;
        self.processes.retain(|tgid, (file, _)| {
            let live = live_processes.binary_search(tgid).is_ok();
            if !live && file.is_some() {
                *kept -= 1;
            }
            live
        });
        self.live_processes = live_processes;
        due
    }

    /// Whether reader `id` must be released; `full` reads its `status`
    /// (signals pending for the whole process too), otherwise its `stat`
    /// is enough most times.
    fn reader_signalled(&mut self, id: u64, full: bool) -> bool {
        let Some(reader) = self.readers.get_mut(&id) else {
            return false;
        };
        reader.checks = reader.checks.wrapping_add(1);
        if let Some(tgid) = reader
            .tgid
            .filter(|_| !full && reader.checks % STATUS_EVERY != 0)
        {
            let path = format!("/proc/{tgid}/task/{}/stat", reader.pid);
            return stat_signalled(&path, &mut reader.file, &mut self.kept, self.max_held);
        }
        let status = read_status(reader.pid, &mut None, &mut self.kept, 0);
        if reader.tgid.is_none() {
            reader.tgid = status.tgid;
            if let Some(tgid) = status.tgid {
                if let Err(at) = self.live_processes.binary_search(&tgid) {
                    self.live_processes.insert(at, tgid);
                }
            }
        }
        status.signalled
    }

    fn process_signalled(&mut self, tgid: u32) -> bool {
        let (file, seen) = self.processes.entry(tgid).or_insert((None, 0));
        let pending = read_status(tgid, file, &mut self.kept, self.max_held).process_pending;
        let new = pending & !*seen != 0;
        *seen = pending;
        new
    }
}

/// Reads `/proc/<pid>/status` through `file` (kept there when the budget
/// allows). A thread that is gone, or whose status cannot be read, counts
/// as signalled: its reply is released.
fn read_status(pid: u32, file: &mut Option<File>, kept: &mut usize, max_held: usize) -> Status {
    let path = format!("/proc/{pid}/status");
    if file.is_none() && *kept < max_held {
        if let Ok(opened) = File::open(&path) {
            *file = Some(opened);
            *kept += 1;
        }
    }
    let mut buffer = [0u8; 4096];
    let read = match file {
        Some(file) => file.read_at(&mut buffer, 0),
        None => File::open(&path).and_then(|file| file.read_at(&mut buffer, 0)),
    };
    match read {
        Err(_) | Ok(0) => Status {
            signalled: true,
            tgid: None,
            process_pending: u64::MAX,
        },
        Ok(n) => {
            let (masks, tgid) = parse_status(&buffer[..n]);
            Status {
                signalled: masks.signalled(),
                tgid,
                process_pending: masks.process_pending(),
            }
        }
    }
}

/// Reads a thread's `stat` (`path`: `/proc/<tgid>/task/<tid>/stat`, the
/// thread's own; `/proc/<tid>/stat` would sum over every thread of the
/// process on each read) through `file` (kept there when the budget
/// allows): whether a classic signal (1–31) is pending for the thread that
/// it neither blocks nor ignores, or `SIGKILL`. A thread that is gone, or
/// a text that cannot be read, counts as signalled.
fn stat_signalled(path: &str, file: &mut Option<File>, kept: &mut usize, max_held: usize) -> bool {
    if file.is_none() && *kept < max_held {
        if let Ok(opened) = File::open(path) {
            *file = Some(opened);
            *kept += 1;
        }
    }
    let mut buffer = [0u8; 1024];
    let read = match file {
        Some(file) => file.read_at(&mut buffer, 0),
        None => File::open(path).and_then(|file| file.read_at(&mut buffer, 0)),
    };
    match read {
        Ok(n) if n > 0 => stat_masks(&buffer[..n]).is_none_or(|masks| masks.signalled()),
        _ => true,
    }
}

/// The masks in a `stat` line: after the command (in parentheses, which
/// may hold anything), fields 31–34 are the thread's pending, blocked,
/// ignored and caught signals, in decimal.
fn stat_masks(stat: &[u8]) -> Option<Masks> {
    let after = stat.iter().rposition(|b| *b == b')')?;
    let text = std::str::from_utf8(&stat[after + 1..]).ok()?;
    let mut fields = text.split_ascii_whitespace().skip(28);
    let mut next = || fields.next()?.parse::<u64>().ok();
    let (pending, blocked, ignored) = (next()?, next()?, next()?);
    Some(Masks {
        thread_pending: pending,
        shared_pending: 0,
        blocked: Some(blocked),
        ignored,
    })
}

/// One pass over a `status` text: the process id and the signal masks
/// (the lines after `SigIgn`, some thirty, are not looked at).
fn parse_status(status: &[u8]) -> (Masks, Option<u32>) {
    let mut masks = Masks {
        thread_pending: 0,
        shared_pending: 0,
        blocked: None,
        ignored: 0,
    };
    let mut tgid = None;
    for line in status.split(|b| *b == b'\n') {
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            continue;
        };
        let value = &line[colon + 1..];
        let number = |radix| {
            std::str::from_utf8(value)
                .ok()
                .and_then(|v| u64::from_str_radix(v.trim(), radix).ok())
        };
        match &line[..colon] {
            b"Tgid" => tgid = number(10).and_then(|t| u32::try_from(t).ok()),
            b"SigPnd" => masks.thread_pending = number(16).unwrap_or(0),
            b"ShdPnd" => masks.shared_pending = number(16).unwrap_or(0),
            b"SigBlk" => masks.blocked = number(16),
            b"SigIgn" => {
                masks.ignored = number(16).unwrap_or(0);
                break;
            }
            _ => {}
        }
    }
    (masks, tgid)
}

/// The signal masks of a `/proc/<tid>/status` text.
struct Masks {
    thread_pending: u64,
    shared_pending: u64,
    /// `None` when the text has no `SigBlk` (cut short).
    blocked: Option<u64>,
    ignored: u64,
}

const KILL: u64 = 1 << (libc::SIGKILL - 1);

impl Masks {
    fn of(status: &[u8]) -> Self {
        parse_status(status).0
    }

    /// A pending signal the thread neither blocks nor ignores, or a
    /// pending `SIGKILL`: its blocked read must end with `EINTR` (fuser
    /// answers the kernel's interrupts with ENOSYS, so nothing else would
    /// wake it). A text cut short counts as signalled: releasing a reader
    /// early is safe, keeping a killed one is not.
    fn signalled(&self) -> bool {
        let Some(blocked) = self.blocked else {
            return true;
        };
        let pending = self.thread_pending | self.shared_pending;
        pending & KILL != 0 || pending & !blocked & !self.ignored != 0
    }

    /// Pending for the process as its main thread's status shows it (that
    /// thread's own signals too: it may be a parked reader itself).
    fn process_pending(&self) -> u64 {
        (self.shared_pending | self.thread_pending) & (!self.ignored | KILL)
    }
}

/// True when a `/proc/<tid>/status` text shows a signal that must end the
/// thread's blocked read (see [`Masks::signalled`]).
pub fn pending_in_status(status: &[u8]) -> bool {
    Masks::of(status).signalled()
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

    #[test]
    fn stat_masks_are_read_past_any_command_name() {
        // Fields 3..=30 stand in as zeros; then pending 2 (SIGINT), blocked 0, ignored 0.
        let line = |name: &str, pending: u64, blocked: u64, ignored: u64| {
            let middle = vec!["0"; 28].join(" ");
            format!("42 ({name}) {middle} {pending} {blocked} {ignored} 0 0 0\n").into_bytes()
        };
        let signalled = |text: &[u8]| stat_masks(text).is_some_and(|m| m.signalled());
        assert!(signalled(&line("cat", 2, 0, 0)));
        assert!(!signalled(&line("cat", 2, 2, 0)), "blocked");
        assert!(!signalled(&line("cat", 2, 0, 2)), "ignored");
        assert!(
            signalled(&line("cat", 1 << 8, u64::from(u32::MAX >> 1), 0)),
            "SIGKILL"
        );
        assert!(
            signalled(&line("a) (b 1 2", 2, 0, 0)),
            "a name with parentheses"
        );
        assert!(!signalled(&line("cat", 0, 0, 0)));
        assert!(stat_masks(b"42 (cut").is_none());
        let own = std::fs::read(format!("/proc/{}/stat", std::process::id())).expect("stat");
        assert!(stat_masks(&own).is_some_and(|m| !m.signalled()));
    }
}
