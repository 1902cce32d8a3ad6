//! Which answered asks are kept, and for how long: by age, by count and by
//! their real size in memory, answers already read going first.
//!
//! An answered ask is kept so that its asker can still read the response
//! (the retention window). Once read, it is kept only while the read
//! answers fit [`MAX_READ_BYTES`]; unread ones go only past
//! [`RETAIN_ANSWERS`], [`MAX_RETAINED_ANSWERS`] or [`MAX_RETAINED_BYTES`].
//! A forgotten answer reads `ENOENT`, never `allow`.

use super::ask::{AskId, Response};
use super::authority::State;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long an answered ask (and its response file) is kept before it is
/// forgotten, unless its request is removed first.
pub const RETAIN_ANSWERS: Duration = Duration::from_secs(600);

/// Answered asks are kept within this many answers and this many bytes
/// (real bytes, see [`retained_size`]), the oldest going first, so the
/// daemon's memory is bounded however fast, and however deep, asks come.
pub const MAX_RETAINED_ANSWERS: usize = 50_000;
pub const MAX_RETAINED_BYTES: usize = 48 << 20;

/// Answers already read are kept within this many bytes (the oldest read
/// going first): enough for a second `cat`, not a copy of every answer.
pub const MAX_READ_BYTES: usize = 4 << 20;

/// What a kept answer costs besides its strings and its JSON: the `Ask`
/// and `Response` structs, their hash table slots (`asks`, `outboxes`),
/// the retention queues, the allocator's headers, and the mount's two
/// inode entries for `<rid>.request` and `<rid>.response` (about 600
/// bytes, freed with the ask). Measured by `retained_size_is_the_real_size`
/// below: 4,496 bytes held per shallow answer without the mount, 3,785
/// accounted with 2,048 here.
const RETAINED_FIXED: usize = 2048 + 1024;

/// A hook told `(session, rid)` of every ask forgotten, so the mount can
/// drop what it holds for its files.
pub type ForgetHook = Arc<dyn Fn(&str, &str) + Send + Sync>;

/// The answered asks kept, in the order they were stored and read.
#[derive(Default)]
pub(super) struct Retention {
    /// (stored at, ask): may hold asks forgotten since (skipped).
    order: VecDeque<(Instant, AskId)>,
    /// Asks in the order they were first read: may hold forgotten ones.
    read: VecDeque<AskId>,
    bytes: usize,
    count: usize,
    read_bytes: usize,
    read_count: usize,
    /// Bytes of answers forgotten since the heap was last trimmed, and
    /// when an answer was last kept or forgotten (see [`trim_when_idle`]).
    freed_since_trim: usize,
    last_change: Option<Instant>,
    pub(super) on_forget: Option<ForgetHook>,
}

impl Retention {
    fn over_bounds(&self) -> bool {
        self.count > MAX_RETAINED_ANSWERS || self.bytes > MAX_RETAINED_BYTES
    }

    /// (answers kept, their bytes).
    pub(super) fn totals(&self) -> (usize, usize) {
        (self.count, self.bytes)
    }
}

/// The real bytes an answered ask holds while it is kept: its strings
/// (kept in several maps), its response's serialized bytes, and about as
/// much again for the response's facts and hops in memory, plus
/// [`RETAINED_FIXED`].
pub(super) fn retained_size(response: &Response, origin: &str, rid: &str) -> usize {
    let json = response.to_json().len();
    RETAINED_FIXED + 2 * json + 5 * response.ask_id.len() + 3 * (origin.len() + rid.len())
}

/// Keeps the just-committed answer of `ask_id` (its response is already
/// stored in the ask): accounts its size, drops what an answered ask no
/// longer needs (its request), and forgets old answers beyond the bounds.
/// `read`: it was delivered to a reader already.
pub(super) fn keep(state: &mut State, ask_id: &str, read: bool) {
    let Some(ask) = state.asks.get_mut(ask_id) else {
        return;
    };
    let Some(response) = ask.response.clone() else {
        return;
    };
    if ask.retained > 0 {
        return;
    }
    // The request served the walk and the grants; the response says the rest.
    ask.request = None;
    ask.facts = Default::default();
    ask.hops = Vec::new();
    let size = retained_size(&response, &ask.origin, &ask.rid);
    ask.retained = size;
    let now = Instant::now();
    let kept = &mut state.retention;
    kept.order.push_back((now, ask_id.to_string()));
    kept.bytes += size;
    kept.count += 1;
    kept.last_change = Some(now);
    if read {
        mark_read(state, ask_id);
    }
    forget_old_answers(state, now);
}

/// The answer of `ask_id` was read: from now on it goes before the unread.
pub(super) fn mark_read(state: &mut State, ask_id: &str) {
    let Some(ask) = state.asks.get_mut(ask_id) else {
        return;
    };
    if ask.read || ask.retained == 0 {
        return;
    }
    ask.read = true;
    let size = ask.retained;
    let kept = &mut state.retention;
    kept.read.push_back(ask_id.to_string());
    kept.read_bytes += size;
    kept.read_count += 1;
    if kept.read_bytes > MAX_READ_BYTES {
        forget_old_answers(state, Instant::now());
    }
}

/// Forgets an ask (answered or not) and its outbox name, keeping the
/// accounts, and tells the hook.
pub(super) fn forget(state: &mut State, ask_id: &str) {
    let Some(ask) = state.asks.remove(ask_id) else {
        return;
    };
    let kept = &mut state.retention;
    kept.freed_since_trim += ask.retained.max(RETAINED_FIXED);
    kept.last_change = Some(Instant::now());
    if ask.retained > 0 {
        kept.bytes = kept.bytes.saturating_sub(ask.retained);
        kept.count = kept.count.saturating_sub(1);
        if ask.read {
            kept.read_bytes = kept.read_bytes.saturating_sub(ask.retained);
            kept.read_count = kept.read_count.saturating_sub(1);
        }
    }
    let hook = kept.on_forget.clone();
    let key = (ask.origin, ask.rid);
    if state.outboxes.get(&key) == Some(&ask.id) {
        state.outboxes.remove(&key);
    }
    if let Some(hook) = hook {
        hook(&key.0, &key.1);
    }
}

/// Whether `ask_id` is an answer still kept (queues may name forgotten ones).
fn is_kept(state: &State, ask_id: &str) -> bool {
    state.asks.get(ask_id).is_some_and(|a| a.retained > 0)
}

/// Forgets answers stored more than [`RETAIN_ANSWERS`] ago, read answers
/// beyond [`MAX_READ_BYTES`], and the oldest beyond the count and byte
/// bounds (read ones first).
pub(super) fn forget_old_answers(state: &mut State, now: Instant) {
    while let Some((stored_at, _)) = state.retention.order.front() {
        if now.saturating_duration_since(*stored_at) < RETAIN_ANSWERS {
            break;
        }
        if let Some((_, ask_id)) = state.retention.order.pop_front() {
            forget(state, &ask_id);
        }
    }
    while state.retention.read_bytes > MAX_READ_BYTES
        || (state.retention.over_bounds() && state.retention.read_count > 0)
    {
        let Some(ask_id) = state.retention.read.pop_front() else {
            break;
        };
        if is_kept(state, &ask_id) {
            forget(state, &ask_id);
        }
    }
    while state.retention.over_bounds() {
        let Some((_, ask_id)) = state.retention.order.pop_front() else {
            break;
        };
        forget(state, &ask_id);
    }
    // Asks forgotten through the other queue, or withdrawn, leave names
    // behind: drop them once they are half of a queue.
    if state.retention.order.len() > 2 * state.retention.count + 1024 {
        let mut order = std::mem::take(&mut state.retention.order);
        order.retain(|(_, id)| is_kept(state, id));
        order.shrink_to_fit();
        state.retention.order = order;
    }
    if state.retention.read.len() > 2 * state.retention.read_count + 1024 {
        let mut read = std::mem::take(&mut state.retention.read);
        read.retain(|id| state.asks.get(id).is_some_and(|a| a.read));
        read.shrink_to_fit();
        state.retention.read = read;
    }
}

/// A release of at least this many answers gives the heap's free pages
/// back to the system afterwards.
pub const TRIM_AFTER_ANSWERS: usize = 1000;

/// After a release of `answers` answers. A big one leaves the asks' hash
/// tables sized for everything that was pending, with the slots of the
/// asks it ended left as tombstones; the next round of as many pending
/// asks would then double them (about 10 MiB more for 10,000 asks each
/// time a table grows). And it leaves megabytes of freed memory (its audit
/// lines, the asks it ended) that glibc's malloc keeps between live
/// blocks. So: the tables are shrunk to what they hold, and the free pages
/// go back to the system (measured by `scripts/bench/soak.py`,
/// BENCHMARKS.md section 12).
pub(super) fn after_release(state: &std::sync::Mutex<State>, answers: usize) {
    if answers < TRIM_AFTER_ANSWERS {
        return;
    }
    {
        let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
        state.asks.shrink_to_fit();
        state.outboxes.shrink_to_fit();
        state.retention.freed_since_trim = 0;
    }
    trim_heap();
}

/// Once this many bytes of answers were forgotten since the last trim...
pub const TRIM_AFTER_FREED: usize = 8 << 20;
/// ...and nothing was kept or forgotten for this long, with no ask
/// pending, the heap's free pages go back to the system.
pub const TRIM_WHEN_IDLE_FOR: Duration = Duration::from_secs(1);

/// Called on every timeout scan (under the lock): after many asks came and
/// went (rule-answered ones, withdrawn ones) and the daemon went quiet, its
/// RSS returns to what it holds instead of staying at the burst's level.
/// Idle, so the few milliseconds `malloc_trim` takes hold up nobody.
pub(super) fn trim_when_idle(state: &mut State, now: Instant) {
    let kept = &mut state.retention;
    let quiet = kept
        .last_change
        .is_some_and(|at| now.saturating_duration_since(at) >= TRIM_WHEN_IDLE_FOR);
    if kept.freed_since_trim >= TRIM_AFTER_FREED && quiet && state.pending.is_empty() {
        kept.freed_since_trim = 0;
        // Tables sized for the burst hold their buckets until shrunk.
        state.asks.shrink_to_fit();
        state.outboxes.shrink_to_fit();
        state.reviews.shrink_to_fit();
        trim_heap();
    }
}

/// One malloc arena for the daemon (glibc; nothing elsewhere), unless
/// `MALLOC_ARENA_MAX` is set. With one arena per FUSE thread, the blocks
/// that outlive each release are spread over several heaps and pin pages
/// in each, which `malloc_trim` cannot return: over the 20-round soak the
/// RSS ended 1.38x its level after round 1 with the default arenas, 1.11x
/// with one (BENCHMARKS.md section 12). Small allocations still go
/// through each thread's cache without the arena lock.
pub fn one_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only sets a malloc parameter.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 1);
        }
    }
}

/// Gives free heap pages back to the system (glibc); nothing elsewhere.
pub fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory; no pointer is given.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::layers::{PolicyLoader, PolicySources};
    use crate::session::authority::Authority;
    use crate::session::tree::SpawnSpec;
    use std::io::Write;

    fn authority() -> (Authority, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("config.json");
        std::fs::File::create(&path)
            .and_then(|mut f| {
                f.write_all(br#"{"permission": {"bash": {"*": "ask", "ls": "allow"}}}"#)
            })
            .expect("config written");
        let loader = PolicyLoader::new(PolicySources {
            global: Some(path),
            ..Default::default()
        })
        .expect("loader");
        let authority = Authority::new(Arc::new(loader), 1000).expect("authority");
        let cwd = dir.path().to_string_lossy().into_owned();
        let spec = SpawnSpec {
            interactive: true,
            ..Default::default()
        };
        authority.add_root("main", spec, &cwd).expect("root");
        (authority, dir)
    }

    /// Allocator that counts, per thread, the bytes it holds (usable size
    /// plus the allocator's header), to measure what an answer costs.
    mod counting {
        use std::alloc::{GlobalAlloc, Layout, System};
        use std::cell::Cell;

        pub struct Counting;

        thread_local! {
            static HELD: Cell<isize> = const { Cell::new(0) };
        }

        fn real(ptr: *mut u8) -> isize {
            // SAFETY: `ptr` came from the system allocator (malloc).
            (unsafe { libc::malloc_usable_size(ptr.cast()) } + 8) as isize
        }

        // SAFETY: every call goes to `System`; only counts are added.
        unsafe impl GlobalAlloc for Counting {
            unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
                let ptr = unsafe { System.alloc(layout) };
                if !ptr.is_null() {
                    let _ = HELD.try_with(|h| h.set(h.get() + real(ptr)));
                }
                ptr
            }
            unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
                let _ = HELD.try_with(|h| h.set(h.get() - real(ptr)));
                unsafe { System.dealloc(ptr, layout) }
            }
        }

        pub fn held() -> isize {
            HELD.with(|h| h.get())
        }
    }

    #[global_allocator]
    static ALLOCATOR: counting::Counting = counting::Counting;

    #[test]
    fn retained_size_is_the_real_size() {
        let (authority, _dir) = authority();
        // Warm up: the maps, the event log and the rules are built once.
        for i in 0..2000 {
            authority
                .submit(
                    "main",
                    &format!("w{i}"),
                    br#"{"surface":"bash","value":"ls"}"#,
                )
                .expect("ask");
        }
        let asks = 2000;
        let before = counting::held();
        let (count0, bytes0) = authority.retention_totals();
        for i in 0..asks {
            let id = authority
                .submit(
                    "main",
                    &format!("r{i}"),
                    br#"{"surface":"bash","value":"ls"}"#,
                )
                .expect("ask");
            let response = authority.response(&id).expect("answered by the rule");
            assert!(response.approved);
        }
        let held = (counting::held() - before) as f64 / asks as f64;
        let (count1, bytes1) = authority.retention_totals();
        assert_eq!(count1 - count0, asks);
        let accounted = (bytes1 - bytes0) as f64 / asks as f64;
        eprintln!("an answered ask holds {held:.0} bytes; accounted {accounted:.0}");
        // The accounted size also covers the mount's inode entries, which
        // this test (no mount) does not make.
        assert!(
            accounted >= held && accounted <= held * 1.5,
            "accounted {accounted:.0} bytes per answer, real {held:.0}"
        );
    }

    #[test]
    fn read_answers_go_first_and_unread_ones_stay_readable() {
        let (authority, _dir) = authority();
        let body = br#"{"surface":"bash","value":"ls"}"#;
        let unread = authority.submit("main", "unread", body).expect("ask");
        let per = authority.retention_totals().1;
        // Read answers past their budget are forgotten, oldest first.
        let reads = MAX_READ_BYTES / per + 50;
        let mut read_ids = Vec::new();
        for i in 0..reads {
            let id = authority
                .submit("main", &format!("r{i}"), body)
                .expect("ask");
            assert!(authority.read_response(&id).is_some());
            read_ids.push(id);
        }
        assert!(
            authority.response(&read_ids[0]).is_none(),
            "oldest read one forgotten"
        );
        assert!(!authority.outbox_contains("main", "r0"));
        assert!(authority.response(&read_ids[reads - 1]).is_some());
        // The unread one, older than all of them, is still there.
        assert!(authority.response(&unread).is_some_and(|r| r.approved));
        let (count, bytes) = authority.retention_totals();
        assert!(bytes <= MAX_READ_BYTES + per, "{bytes}");
        assert!(count < reads, "{count}");
    }

    /// `count` rule-answered asks `r0`.. from main, each withdrawn (`rm`).
    fn ask_and_withdraw(authority: &Authority, count: usize) {
        let body = br#"{"surface":"bash","value":"ls"}"#;
        for i in 0..count {
            let rid = format!("r{i}");
            authority.submit("main", &rid, body).expect("ask");
            authority.withdraw("main", &rid).expect("withdrawn");
        }
    }

    #[test]
    fn the_heap_is_trimmed_once_quiet_after_many_asks_came_and_went() {
        let (authority, _dir) = authority();
        ask_and_withdraw(&authority, TRIM_AFTER_FREED / RETAINED_FIXED + 10);
        let freed = |a: &Authority| {
            a.state
                .lock()
                .map(|s| s.retention.freed_since_trim)
                .unwrap_or(0)
        };
        assert!(freed(&authority) >= TRIM_AFTER_FREED);
        // Not yet quiet: nothing happens.
        authority.expire(Instant::now());
        assert!(freed(&authority) >= TRIM_AFTER_FREED);
        authority.expire(Instant::now() + TRIM_WHEN_IDLE_FOR);
        assert_eq!(freed(&authority), 0);
    }

    #[test]
    fn withdrawn_and_forgotten_asks_leave_no_accounts_and_tell_the_hook() {
        let (authority, _dir) = authority();
        let told = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = Arc::clone(&told);
        authority.on_forget(Arc::new(move |session: &str, rid: &str| {
            if let Ok(mut told) = sink.lock() {
                told.push(format!("{session}/{rid}"));
            }
        }));
        ask_and_withdraw(&authority, 100);
        assert_eq!(authority.retention_totals(), (0, 0));
        assert_eq!(told.lock().map(|t| t.len()).unwrap_or(0), 100);
        assert!(told.lock().is_ok_and(|t| t[0] == "main/r0"));
        // A pending ask that is forgotten is never answered `allow`.
        let pending = authority
            .submit("main", "p", br#"{"surface":"bash","value":"make"}"#)
            .expect("ask");
        authority.withdraw("main", "p").expect("withdrawn");
        assert!(authority.response(&pending).is_none());
        assert!(!authority.outbox_contains("main", "p"));
    }
}
