//! The view's decision cache: a rule's verdict on `(path, access)`,
//! kept while nothing that could change it has changed.
//!
//! An entry is used only while the authority's verdict generation
//! ([`crate::session::opens::generation`]: grants recorded or revoked, the
//! global config re-read) is the one it was judged under, and for at most
//! [`FRESH_FOR`], the time the policy loader itself takes to notice an
//! edited layer file. Only rule answers are kept: an `ask` is never cached
//! (each open that meets one is a question, or joins the one in flight),
//! and a person's one-time `allow` answers the open it was asked for.

use crate::session::opens::Access;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a cached verdict stands without a re-judgment.
pub const FRESH_FOR: Duration = Duration::from_millis(250);

/// Entries kept before the cache starts afresh (a bound on memory that a
/// program walking a huge tree cannot push past).
const MAX_ENTRIES: usize = 65_536;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cached {
    Allow,
    Deny(String),
}

#[derive(Debug, Default)]
pub struct Verdicts {
    entries: HashMap<(PathBuf, Access), (Cached, u64, Instant)>,
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
            self.entries.clear();
        }
        self.entries
            .insert((path.to_path_buf(), access), (verdict, generation, now));
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
}
