//! The verdict generation: a number bumped whenever something that can
//! change a path's verdict changes (a grant recorded or revoked, the global
//! config re-read). It sits apart, below the grants and the authority that
//! bump it and the view (`opens.rs`, `crate::view`) that reads it, so
//! neither has to reach into the other.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bumped whenever something that can change a path's verdict changes
/// (a grant recorded or revoked, the global config re-read). The view's
/// decision cache keeps an entry only while this is unchanged (and for a
/// quarter second at most, the time the policy loader takes to notice an
/// edited layer file).
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The current verdict generation (see [`GENERATION`]).
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Acquire)
}

/// What else remembers verdicts (the kernel mechanism's fanotify groups):
/// told at once, on the thread that changed the policy.
type Hook = Box<dyn Fn() + Send + Sync>;
static HOOKS: std::sync::Mutex<Vec<Hook>> = std::sync::Mutex::new(Vec::new());

/// Adds `hook`, run at every [`invalidate`] (for the daemon's life).
pub fn on_invalidate(hook: Hook) {
    HOOKS.lock().unwrap_or_else(|p| p.into_inner()).push(hook);
}

/// Marks every cached path verdict stale.
pub(crate) fn invalidate() {
    GENERATION.fetch_add(1, Ordering::AcqRel);
    for hook in HOOKS.lock().unwrap_or_else(|p| p.into_inner()).iter() {
        hook();
    }
}
