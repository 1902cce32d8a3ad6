//! Which answered asks are kept, and for how long: by age, by count and by
//! their real size in memory, answers already read going first.
//!
//! An answered ask is kept so that its asker can still read the response
//! (the retention window). Once read, it is kept only while the read
//! answers fit [`MAX_READ_BYTES`]; unread ones go only past
//! [`RETAIN_ANSWERS`], their session's and their tree's bounds
//! (`limits.retainedAnswers`, `treeRetainedAnswers`, `treeRetainedBytes`:
//! the oldest of that session, or of that tree, go first), or the global
//! [`MAX_RETAINED_ANSWERS`] and [`MAX_RETAINED_BYTES`] (the tree holding the
//! most gives up its oldest). So an asker that floods the daemon with
//! answers it never reads drops its own, never another tree's.
//! A forgotten answer reads `ENOENT`, never `allow`.

use crate::session::store::persist::Dirty;
use crate::session::tree::ask::{Ask, AskId, Response};
use crate::session::tree::limits::{root_of, Limits};
use crate::session::tree::SessionId;
use std::collections::{HashMap, VecDeque};
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

/// The per-session and per-tree bounds on kept answers (from `limits`).
#[derive(Debug, Clone, Copy)]
pub(in crate::session) struct Bounds {
    session_answers: usize,
    tree_answers: usize,
    tree_bytes: usize,
}

impl Bounds {
    pub(in crate::session) fn of(limits: &Limits) -> Self {
        Self {
            session_answers: limits.retained_answers,
            tree_answers: limits.tree_retained_answers,
            tree_bytes: limits.tree_retained_bytes,
        }
    }
}

impl Default for Bounds {
    fn default() -> Self {
        Self::of(&Limits::default())
    }
}

/// The answers one session (or one tree) has kept: how many, their bytes,
/// and their ids oldest first (may hold forgotten ones, skipped).
#[derive(Default)]
struct Account {
    order: VecDeque<AskId>,
    count: usize,
    bytes: usize,
}

/// Which accounts a bound counts.
#[derive(Clone, Copy)]
enum Scope {
    Session,
    Tree,
}

/// The answered asks kept, in the order they were stored and read.
#[derive(Default)]
pub(in crate::session) struct Retention {
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
    pub(in crate::session) on_forget: Option<ForgetHook>,
    /// Kept answers by asking session and by the root of its tree.
    by_session: HashMap<SessionId, Account>,
    by_tree: HashMap<String, Account>,
    pub(in crate::session) bounds: Bounds,
}

impl Retention {
    fn over_bounds(&self) -> bool {
        self.count > MAX_RETAINED_ANSWERS || self.bytes > MAX_RETAINED_BYTES
    }

    /// (answers kept, their bytes).
    pub(in crate::session) fn totals(&self) -> (usize, usize) {
        (self.count, self.bytes)
    }

    /// (answers kept, their bytes) of `session`, or of the tree of the
    /// root `session`.
    #[cfg(test)]
    pub(in crate::session) fn totals_of(&self, session: &str, tree: bool) -> (usize, usize) {
        let accounts = if tree {
            &self.by_tree
        } else {
            &self.by_session
        };
        accounts.get(session).map_or((0, 0), |a| (a.count, a.bytes))
    }

    fn accounts(&mut self, scope: Scope) -> &mut HashMap<String, Account> {
        match scope {
            Scope::Session => &mut self.by_session,
            Scope::Tree => &mut self.by_tree,
        }
    }
}

impl Retention {
    /// The heap was trimmed: count freed bytes from now.
    pub(in crate::session) fn note_trimmed(&mut self) {
        self.freed_since_trim = 0;
    }
}

/// What keeping and forgetting answers changes: the asks, their outbox
/// names, the accounts, and (when there is a journal) its marks. Borrowed
/// from the authority's state for one call (`State::kept`): retention
/// knows these and nothing else of it.
pub(in crate::session) struct Kept<'a> {
    pub(in crate::session) asks: &'a mut HashMap<AskId, Box<Ask>>,
    pub(in crate::session) outboxes: &'a mut HashMap<(SessionId, String), AskId>,
    pub(in crate::session) retention: &'a mut Retention,
    /// `None` in library use (nothing is journaled).
    pub(in crate::session) dirty: Option<&'a mut Dirty>,
}

/// Adds a kept answer to the account of `key`.
fn credit(accounts: &mut HashMap<String, Account>, key: &str, ask_id: &str, size: usize) {
    let account = match accounts.get_mut(key) {
        Some(account) => account,
        None => accounts.entry(key.to_string()).or_default(),
    };
    account.order.push_back(ask_id.to_string());
    account.count += 1;
    account.bytes += size;
}

/// Takes a forgotten answer off the account of `key`; an account left
/// empty goes (with the forgotten names its queue may still hold).
fn debit(accounts: &mut HashMap<String, Account>, key: &str, size: usize) {
    if let Some(account) = accounts.get_mut(key) {
        account.count = account.count.saturating_sub(1);
        account.bytes = account.bytes.saturating_sub(size);
        if account.count == 0 {
            accounts.remove(key);
        }
    }
}

/// Forgets the oldest answer still kept of the account `key`; `false`
/// when it has none.
fn forget_oldest(state: &mut Kept<'_>, scope: Scope, key: &str) -> bool {
    loop {
        let next = state
            .retention
            .accounts(scope)
            .get_mut(key)
            .and_then(|a| a.order.pop_front());
        let Some(ask_id) = next else {
            return false;
        };
        if is_kept(state, &ask_id) {
            forget(state, &ask_id);
            return true;
        }
    }
}

/// Drops the names of forgotten answers from the account of `key` once
/// they are half of its queue.
fn compact(state: &mut Kept<'_>, scope: Scope, key: &str) {
    let stale = state
        .retention
        .accounts(scope)
        .get(key)
        .is_some_and(|a| a.order.len() > 2 * a.count + 64);
    if !stale {
        return;
    }
    let Some(mut order) = state
        .retention
        .accounts(scope)
        .get_mut(key)
        .map(|a| std::mem::take(&mut a.order))
    else {
        return;
    };
    order.retain(|id| is_kept(state, id));
    if let Some(account) = state.retention.accounts(scope).get_mut(key) {
        account.order = order;
    }
}

/// Keeps `session`'s answers within `limits.retainedAnswers` and its
/// tree's within `treeRetainedAnswers` and `treeRetainedBytes`, the
/// oldest going first: a session that floods the daemon with answers
/// drops its own (and its tree's), nobody else's.
fn forget_beyond_own_bounds(state: &mut Kept<'_>, session: &str) {
    let bounds = state.retention.bounds;
    while state
        .retention
        .by_session
        .get(session)
        .is_some_and(|a| a.count > bounds.session_answers)
    {
        if !forget_oldest(state, Scope::Session, session) {
            break;
        }
    }
    let root = root_of(session);
    while state
        .retention
        .by_tree
        .get(root)
        .is_some_and(|a| a.count > bounds.tree_answers || a.bytes > bounds.tree_bytes)
    {
        if !forget_oldest(state, Scope::Tree, root) {
            break;
        }
    }
    compact(state, Scope::Session, session);
    compact(state, Scope::Tree, root);
}

/// The real bytes an answered ask holds while it is kept: its strings
/// (kept in several maps), its response's serialized bytes, and about as
/// much again for the response's facts and hops in memory, plus
/// [`RETAINED_FIXED`].
pub(in crate::session) fn retained_size(response: &Response, origin: &str, rid: &str) -> usize {
    let json = response.to_json().len();
    RETAINED_FIXED + 2 * json + 5 * response.ask_id.len() + 3 * (origin.len() + rid.len())
}

/// Keeps the just-committed answer of `ask_id` (its response is already
/// stored in the ask): accounts its size, drops what an answered ask no
/// longer needs (its request), and forgets old answers beyond the bounds.
/// `read`: it was delivered to a reader already.
pub(in crate::session) fn keep(state: &mut Kept<'_>, ask_id: &str, read: bool) {
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
    let origin = ask.origin.clone();
    let now = Instant::now();
    let kept = &mut *state.retention;
    kept.order.push_back((now, ask_id.to_string()));
    kept.bytes += size;
    kept.count += 1;
    kept.last_change = Some(now);
    credit(&mut kept.by_session, &origin, ask_id, size);
    credit(&mut kept.by_tree, root_of(&origin), ask_id, size);
    if read {
        mark_read(state, ask_id);
    }
    forget_beyond_own_bounds(state, &origin);
    forget_old_answers(state, now);
}

/// The answer of `ask_id` was read: from now on it goes before the unread.
pub(in crate::session) fn mark_read(state: &mut Kept<'_>, ask_id: &str) {
    let Some(ask) = state.asks.get_mut(ask_id) else {
        return;
    };
    if ask.read || ask.retained == 0 {
        return;
    }
    ask.read = true;
    let size = ask.retained;
    let kept = &mut *state.retention;
    kept.read.push_back(ask_id.to_string());
    kept.read_bytes += size;
    kept.read_count += 1;
    if kept.read_bytes > MAX_READ_BYTES {
        forget_old_answers(state, Instant::now());
    }
}

/// Forgets an ask (answered or not) and its outbox name, keeping the
/// accounts, and tells the hook.
pub(in crate::session) fn forget(state: &mut Kept<'_>, ask_id: &str) {
    let Some(ask) = state.asks.remove(ask_id) else {
        return;
    };
    if let Some(dirty) = state.dirty.as_mut() {
        dirty.mark_ask(ask_id);
    }
    let kept = &mut *state.retention;
    kept.freed_since_trim += ask.retained.max(RETAINED_FIXED);
    kept.last_change = Some(Instant::now());
    if ask.retained > 0 {
        kept.bytes = kept.bytes.saturating_sub(ask.retained);
        kept.count = kept.count.saturating_sub(1);
        debit(&mut kept.by_session, &ask.origin, ask.retained);
        debit(&mut kept.by_tree, root_of(&ask.origin), ask.retained);
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
fn is_kept(state: &Kept<'_>, ask_id: &str) -> bool {
    state.asks.get(ask_id).is_some_and(|a| a.retained > 0)
}

/// Forgets answers stored more than [`RETAIN_ANSWERS`] ago, read answers
/// beyond [`MAX_READ_BYTES`], and beyond the global count and byte bounds
/// read ones first, then the oldest of the tree holding the most.
pub(in crate::session) fn forget_old_answers(state: &mut Kept<'_>, now: Instant) {
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
    // Only when many trees are full at once (each stays within its own
    // bounds): the tree holding the most gives up its oldest, so one that
    // holds little keeps its answers.
    while state.retention.over_bounds() {
        let by_count = state.retention.count > MAX_RETAINED_ANSWERS;
        let largest = state
            .retention
            .by_tree
            .iter()
            .max_by_key(|(_, a)| if by_count { a.count } else { a.bytes })
            .map(|(root, _)| root.clone());
        match largest {
            Some(root) if forget_oldest(state, Scope::Tree, &root) => {}
            _ => break,
        }
    }
    // The accounts cover every kept answer; should they not, the oldest
    // of all go.
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

/// Once this many bytes of answers were forgotten since the last trim...
pub const TRIM_AFTER_FREED: usize = 8 << 20;
/// ...and nothing was kept or forgotten for this long, with no ask
/// pending, the heap's free pages go back to the system.
pub const TRIM_WHEN_IDLE_FOR: Duration = Duration::from_secs(1);

/// Whether the heap is due a trim now (and, if so, counts from zero
/// again): called on every timeout scan (under the lock, through
/// `State::trim_when_idle`), so after many asks came and went
/// (rule-answered ones, withdrawn ones) and the daemon went quiet, its RSS
/// returns to what it holds instead of staying at the burst's level.
/// Idle (`nothing_pending`, nothing kept or forgotten for
/// [`TRIM_WHEN_IDLE_FOR`]), so the few milliseconds `malloc_trim` takes
/// hold up nobody.
pub(in crate::session) fn idle_trim_due(
    kept: &mut Retention,
    nothing_pending: bool,
    now: Instant,
) -> bool {
    let quiet = kept
        .last_change
        .is_some_and(|at| now.saturating_duration_since(at) >= TRIM_WHEN_IDLE_FOR);
    if kept.freed_since_trim >= TRIM_AFTER_FREED && quiet && nothing_pending {
        kept.freed_since_trim = 0;
        return true;
    }
    false
}

/// One malloc arena for the daemon (glibc; nothing elsewhere), unless
/// `MALLOC_ARENA_MAX` is set. With one arena per FUSE thread, the blocks
/// that outlive each release are spread over several heaps and pin pages
/// in each, which `malloc_trim` cannot return: over the 20-round soak the
/// RSS ended 1.38x its level after round 1 with the default arenas, 1.11x
/// with one (BENCHMARKS.md section 12, in its git history). Small allocations still go
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
        authority_with(r#"{"permission": {"bash": {"*": "ask", "ls": "allow"}}}"#)
    }

    fn authority_with(config: &str) -> (Authority, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("config.json");
        std::fs::File::create(&path)
            .and_then(|mut f| f.write_all(config.as_bytes()))
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
        // The per-session and per-tree bounds stay out of the way.
        let (authority, _dir) = authority_with(
            r#"{"permission": {"bash": {"*": "ask", "ls": "allow"}},
                "limits": {"retainedAnswers": 100000, "treeRetainedBytes": 1000000000}}"#,
        );
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

    /// `limits.retainedAnswers` and `treeRetainedAnswers`: a session's
    /// answers beyond its bound go oldest first, then its tree's, and
    /// another tree's unread answer stays readable however many come.
    #[test]
    fn each_session_and_tree_drops_its_own_oldest_answers() {
        let (authority, dir) = authority_with(
            r#"{"permission": {"bash": {"*": "ask", "ls": "allow"}},
                "roots": {"main": {"interactive": true}, "other": {"interactive": true}},
                "limits": {"retainedAnswers": 5, "treeRetainedAnswers": 8}}"#,
        );
        let cwd = dir.path().to_string_lossy().into_owned();
        let spec = SpawnSpec {
            interactive: true,
            ..Default::default()
        };
        authority.add_root("other", spec, &cwd).expect("root");
        let operator = crate::session::tree::access::Caller::operator(1000);
        for child in ["a", "b"] {
            authority
                .spawn("main", child, SpawnSpec::default(), operator)
                .expect("child");
        }
        let body = br#"{"surface":"bash","value":"ls"}"#;
        let others = authority.submit("other", "kept", body).expect("ask");
        let ask = |session: &str, n: usize| {
            (0..n)
                .map(|i| {
                    authority
                        .submit(session, &format!("r{i}"), body)
                        .expect("ask")
                })
                .collect::<Vec<_>>()
        };
        let totals = |session: &str, tree: bool| {
            authority
                .state
                .lock()
                .map(|s| s.retention.totals_of(session, tree).0)
                .unwrap_or(0)
        };
        // A session: its 5 newest stay, its 3 oldest went.
        let a = ask("main/a", 8);
        assert!(a[..3].iter().all(|id| authority.response(id).is_none()));
        assert!(a[3..].iter().all(|id| authority.response(id).is_some()));
        assert_eq!(totals("main/a", false), 5);
        // Its tree: 8 at most, the tree's oldest (main/a's) going first.
        let b = ask("main/b", 5);
        assert_eq!(totals("main", true), 8);
        assert!(authority.response(&a[3]).is_none() && authority.response(&a[4]).is_none());
        assert!(a[5..].iter().all(|id| authority.response(id).is_some()));
        assert!(b.iter().all(|id| authority.response(id).is_some()));
        // Another tree's unread answer is untouched.
        assert!(authority.response(&others).is_some_and(|r| r.approved));
        assert_eq!(totals("other", true), 1);
        // Withdrawn answers leave the accounts.
        for i in 0..5 {
            authority
                .withdraw("main/b", &format!("r{i}"))
                .expect("withdrawn");
        }
        assert_eq!((totals("main/b", false), totals("main", true)), (0, 3));
    }
}
