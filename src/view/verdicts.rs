//! The view's decision cache: a rule's verdict on `(path, access)`,
//! kept while nothing that could change it has changed.
//!
//! An entry is used only while the authority's verdict generation
//! ([`crate::session::tree::generation::generation`]: grants recorded or revoked, the
//! global config re-read) is the one it was judged under, and for at most
//! [`FRESH_FOR`], the time the policy loader itself takes to notice an
//! edited layer file. Only rule answers are kept: an `ask` is never cached
//! (each open that meets one is a question, or joins the one in flight),
//! and a person's one-time `allow` answers the open it was asked for.

use crate::session::view::opens::Access;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a cached verdict stands without a re-judgment.
pub const FRESH_FOR: Duration = Duration::from_millis(250);

/// Entries kept at most (a bound on memory that a program walking a huge
/// tree cannot push past). An entry stands [`FRESH_FOR`] (250 ms), so this
/// is a window of 65,000 judged operations a second, more than the view
/// serves; at the bound the stale entries go first, and the cache starts
/// afresh only when most are fresh. At most about 5 MiB with long paths.
const MAX_ENTRIES: usize = 16_384;

/// Past this many entries the cache asks to be trimmed once the view is
/// idle ([`Verdicts::trim`]): a burst of opens leaves nothing behind.
const TRIM_ABOVE: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cached {
    Allow,
    Deny(String),
}

#[derive(Debug, Default)]
pub struct Verdicts {
    entries: HashMap<(PathBuf, Access), (Cached, u64, Instant)>,
    /// When the newest entry was put.
    newest: Option<Instant>,
}

impl Verdicts {
    pub fn get(
        &self,
        path: &Path,
        access: Access,
        generation: u64,
        now: Instant,
    ) -> Option<&Cached> {
        let (verdict, at_generation, at) = self.entries.get(&(path.to_path_buf(), access))?;
        (*at_generation == generation && now.duration_since(*at) < FRESH_FOR).then_some(verdict)
    }

    pub fn put(
        &mut self,
        path: &Path,
        access: Access,
        verdict: Cached,
        generation: u64,
        now: Instant,
    ) {
        if self.entries.len() >= MAX_ENTRIES {
            self.entries
                .retain(|_, (_, _, at)| now.duration_since(*at) < FRESH_FOR);
            if self.entries.len() >= MAX_ENTRIES / 2 {
                self.entries.clear();
            }
        }
        self.entries
            .insert((path.to_path_buf(), access), (verdict, generation, now));
        self.newest = Some(now);
    }

    /// Whether the cache holds enough to be worth trimming when idle.
    pub fn wants_trim(&self) -> bool {
        self.entries.capacity() > TRIM_ABOVE
    }

    /// Drops every entry and the room for them once none is fresh (the
    /// view has been idle for [`FRESH_FOR`]): `true` when it did. A cache
    /// that held thousands of paths would otherwise keep their memory
    /// until the next burst.
    pub fn trim(&mut self, now: Instant) -> bool {
        if self
            .newest
            .is_some_and(|newest| now.duration_since(newest) < FRESH_FOR)
        {
            return false;
        }
        self.entries = HashMap::new();
        true
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_stands_only_in_its_generation_and_while_fresh() {
        let mut v = Verdicts::default();
        let now = Instant::now();
        let p = Path::new("/w/a");
        v.put(p, Access::Read, Cached::Allow, 3, now);
        assert_eq!(v.get(p, Access::Read, 3, now), Some(&Cached::Allow));
        assert_eq!(v.get(p, Access::Write, 3, now), None);
        assert_eq!(v.get(p, Access::Read, 4, now), None);
        assert_eq!(v.get(p, Access::Read, 3, now + FRESH_FOR), None);
    }

    #[test]
    fn the_cache_is_bounded() {
        let mut v = Verdicts::default();
        let now = Instant::now();
        for i in 0..MAX_ENTRIES + 10 {
            v.put(
                &PathBuf::from(format!("/w/{i}")),
                Access::Read,
                Cached::Allow,
                0,
                now,
            );
        }
        assert!(v.len() <= MAX_ENTRIES);
    }

    #[test]
    fn stale_entries_go_first_and_an_idle_cache_is_emptied() {
        let mut v = Verdicts::default();
        let now = Instant::now();
        for i in 0..MAX_ENTRIES - 1 {
            let path = PathBuf::from(format!("/w/{i}"));
            v.put(&path, Access::Read, Cached::Allow, 0, now);
        }
        let soon = now + FRESH_FOR / 2;
        v.put(Path::new("/w/soon"), Access::Read, Cached::Allow, 0, soon);
        assert!(v.wants_trim());
        // At the bound: the stale entries go, the fresh one stays.
        let later = now + FRESH_FOR;
        v.put(Path::new("/w/later"), Access::Read, Cached::Allow, 0, later);
        assert_eq!(v.len(), 2);
        assert_eq!(
            v.get(Path::new("/w/soon"), Access::Read, 0, later),
            Some(&Cached::Allow)
        );
        assert!(!v.trim(later), "not while an entry is fresh");
        assert!(v.trim(later + FRESH_FOR));
        assert_eq!(v.len(), 0);
        assert!(!v.wants_trim());
    }
}
