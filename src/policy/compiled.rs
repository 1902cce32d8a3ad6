//! A rule list compiled for matching: one `GlobSet` per requested surface.
//!
//! Last-match-wins is "the highest index among the matching rules", and a
//! `GlobSet` yields every matching index in one pass, so the cost of a
//! lookup grows with the automaton, not with a scan of every rule. Surfaces
//! are indexed lazily (the set of surfaces actually asked is small) and the
//! index is cached for the life of the compiled list.

use super::rule::Rule;
use super::wildcard;
use globset::{Glob, GlobSet, GlobSetBuilder};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

/// Surfaces indexed beyond this many are compiled per lookup rather than
/// cached, so a stream of made-up tool names cannot grow memory unbounded.
const MAX_CACHED_SURFACES: usize = 1024;

/// Pairs the match memo holds before it starts afresh, and the longest
/// value it remembers: bounded whatever a stream of asks names. A batch of
/// asks (a thread with a snapshot scope open, as `permfs resolve` has)
/// may keep more, as the other per-text memos do (`facts::memo`); a daemon
/// keeps a policy per session, so each keeps few.
const MAX_MEMO_ENTRIES: usize = 1024;
const MAX_BATCH_MEMO_ENTRIES: usize = 16_384;
const MAX_MEMO_VALUE: usize = 1024;

/// (surface, value) → the rules matching, in rule order. A pure function
/// of the compiled list, so remembering it changes no answer. Keyed by
/// surface, then value, so a lookup borrows both (no key is built).
#[derive(Debug, Default)]
struct MatchMemo {
    by_surface: foldhash::HashMap<String, foldhash::HashMap<String, Box<[usize]>>>,
    /// Values remembered, over all surfaces.
    len: usize,
}

#[derive(Debug)]
pub struct CompiledRules {
    rules: Vec<Rule>,
    /// Every rule's pattern, compiled (one or two globs each).
    pattern_globs: Vec<Vec<Glob>>,
    /// Every distinct surface key, compiled, with the rules that carry it.
    surface_keys: Vec<SurfaceKey>,
    /// Keyed with foldhash, not SipHash: it is looked up for every surface
    /// of every ask, and holds at most [`MAX_CACHED_SURFACES`] entries.
    by_surface: RwLock<foldhash::HashMap<String, Arc<SurfaceIndex>>>,
    /// The rules each recent (surface, value) matched: a value is matched
    /// on every ask that names it (a path, a command), and the globset's
    /// pass over it costs more than a lookup.
    matches: Mutex<MatchMemo>,
    /// The home `~` / `$HOME` expanded to in the patterns, so a value can
    /// be spelled with the same home (a bash command typed with `~/`).
    home: String,
}

#[derive(Debug)]
struct SurfaceKey {
    matcher: GlobSet,
    rules: Vec<usize>,
}

/// The rules that apply to one requested surface.
#[derive(Debug)]
struct SurfaceIndex {
    set: GlobSet,
    /// Glob position in `set` → rule index in the compiled list.
    glob_rule: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileError {
    pub surface: String,
    pub pattern: String,
    pub message: String,
}

impl std::fmt::Display for CompileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "pattern {:?} on surface {:?} cannot be compiled: {}",
            self.pattern, self.surface, self.message
        )
    }
}

impl std::error::Error for CompileError {}

impl CompiledRules {
    pub fn compile(rules: Vec<Rule>, home: &str) -> Result<Self, CompileError> {
        let error = |rule: &Rule, e: &dyn std::fmt::Display| CompileError {
            surface: rule.surface.clone(),
            pattern: rule.pattern.clone(),
            message: e.to_string(),
        };
        let mut pattern_globs = Vec::with_capacity(rules.len());
        let mut key_positions: HashMap<&str, usize> = HashMap::new();
        let mut surface_keys: Vec<(String, Vec<usize>)> = Vec::new();
        for (index, rule) in rules.iter().enumerate() {
            let braced = if rule.action == super::PermissionState::Deny {
                wildcard::Braced::AlsoExpanded
            } else {
                wildcard::Braced::Literal
            };
            pattern_globs
                .push(wildcard::compile(&rule.pattern, home, braced).map_err(|e| error(rule, &e))?);
            let position = *key_positions
                .entry(rule.surface.as_str())
                .or_insert_with(|| {
                    surface_keys.push((rule.surface.clone(), Vec::new()));
                    surface_keys.len() - 1
                });
            surface_keys[position].1.push(index);
        }
        let surface_keys = surface_keys
            .into_iter()
            .map(|(key, members)| {
                // Surface keys match surfaces with the same wildcard language
                // (no home expansion applies to a surface name).
                let mut builder = GlobSetBuilder::new();
                let first = members[0];
                let globs = wildcard::compile(&key, "", wildcard::Braced::Literal)
                    .map_err(|e| error(&rules[first], &e))?;
                for glob in globs {
                    builder.add(glob);
                }
                let matcher = builder.build().map_err(|e| error(&rules[first], &e))?;
                Ok(SurfaceKey {
                    matcher,
                    rules: members,
                })
            })
            .collect::<Result<Vec<_>, CompileError>>()?;
        Ok(Self {
            rules,
            pattern_globs,
            surface_keys,
            by_surface: RwLock::new(foldhash::HashMap::default()),
            matches: Mutex::new(MatchMemo::default()),
            home: home.to_string(),
        })
    }

    /// The home the patterns were compiled with.
    pub fn home(&self) -> &str {
        &self.home
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn rule(&self, index: usize) -> &Rule {
        &self.rules[index]
    }

    /// The globs of every rule on a surface key matching one of
    /// `surfaces` that a judgment counts (a config rule or a grant, not
    /// the universal default) or that denies. A value none of them
    /// matches meets, on those surfaces, only defaults that do not deny.
    pub fn speaking_globs(&self, surfaces: &[&str]) -> Vec<Glob> {
        let mut out = Vec::new();
        for key in &self.surface_keys {
            if !surfaces.iter().any(|s| key.matcher.is_match(s)) {
                continue;
            }
            for &index in &key.rules {
                let rule = &self.rules[index];
                if rule.reported_pattern().is_some() || rule.action == super::PermissionState::Deny
                {
                    out.extend(self.pattern_globs[index].iter().cloned());
                }
            }
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// For each value, the index of the last rule on `surface` matching it.
    pub fn last_matches(
        &self,
        surface: &str,
        values: &[String],
    ) -> Result<Vec<Option<usize>>, CompileError> {
        let mut out = vec![None; values.len()];
        self.each_last_match(surface, values, |value, rule| out[value] = Some(rule))?;
        Ok(out)
    }

    /// [`Self::last_matches`] without building the list: `found(value,
    /// rule)` for each value (by position) that some rule matches. The
    /// judging path calls this for every value of every fact.
    pub fn each_last_match<S: AsRef<str>>(
        &self,
        surface: &str,
        values: &[S],
        mut found: impl FnMut(usize, usize),
    ) -> Result<(), CompileError> {
        for (position, value) in values.iter().enumerate() {
            if let Some(rule) =
                self.with_matching_rules(surface, value.as_ref(), |rules| rules.last().copied())?
            {
                found(position, rule);
            }
        }
        Ok(())
    }

    /// Every rule on `surface` that matches `value`, in rule order (for
    /// explanations; judging needs only the last).
    pub fn all_matches(&self, surface: &str, value: &str) -> Result<Vec<usize>, CompileError> {
        self.with_matching_rules(surface, value, <[usize]>::to_vec)
    }

    /// Whether any rule on `surface` matching `value` passes `test` (given
    /// rule indices in rule order), without listing them. `test` runs under
    /// the match memo's lock, so it must not look up this list again.
    pub fn any_match(
        &self,
        surface: &str,
        value: &str,
        mut test: impl FnMut(usize) -> bool,
    ) -> Result<bool, CompileError> {
        self.with_matching_rules(surface, value, |rules| rules.iter().any(|&i| test(i)))
    }

    /// Whether rule `index` matches `value` (used to report which alias the
    /// winning rule matched).
    pub fn rule_matches(
        &self,
        surface: &str,
        index: usize,
        value: &str,
    ) -> Result<bool, CompileError> {
        self.with_matching_rules(surface, value, |rules| rules.binary_search(&index).is_ok())
    }

    /// `read(the rules on surface matching value, in rule order)`, from the
    /// memo when it holds them. A memo another thread is using right now is
    /// not waited for: the rules are matched afresh instead.
    fn with_matching_rules<R>(
        &self,
        surface: &str,
        value: &str,
        read: impl FnOnce(&[usize]) -> R,
    ) -> Result<R, CompileError> {
        if value.len() > MAX_MEMO_VALUE {
            return Ok(read(&self.matching_rules(surface, value)?));
        }
        let Ok(mut memo) = self.matches.try_lock() else {
            return Ok(read(&self.matching_rules(surface, value)?));
        };
        if let Some(rules) = memo.by_surface.get(surface).and_then(|m| m.get(value)) {
            return Ok(read(rules));
        }
        let rules = self.matching_rules(surface, value)?;
        let answer = read(&rules);
        let capacity = if crate::facts::memo::in_scope() {
            MAX_BATCH_MEMO_ENTRIES
        } else {
            MAX_MEMO_ENTRIES
        };
        if memo.len >= capacity {
            memo.by_surface.clear();
            memo.len = 0;
        }
        let values = match memo.by_surface.get_mut(surface) {
            Some(values) => values,
            None => memo.by_surface.entry(surface.to_string()).or_default(),
        };
        values.insert(value.to_string(), rules);
        memo.len += 1;
        Ok(answer)
    }

    /// The rules on `surface` matching `value`, in rule order, from the
    /// globset (one rule may own two globs).
    fn matching_rules(&self, surface: &str, value: &str) -> Result<Box<[usize]>, CompileError> {
        self.with_surface_index(surface, |index| {
            let mut rules: Vec<usize> = index
                .set
                .matches(value)
                .into_iter()
                .map(|glob| index.glob_rule[glob])
                .collect();
            rules.sort_unstable();
            rules.dedup();
            rules.into_boxed_slice()
        })
    }

    /// `read(index of surface)`, under the cache's read lock when the
    /// index is cached (no reference count taken and dropped per lookup;
    /// an index is only ever added, so a writer waits at most one match).
    fn with_surface_index<R>(
        &self,
        surface: &str,
        read: impl FnOnce(&SurfaceIndex) -> R,
    ) -> Result<R, CompileError> {
        if let Ok(cache) = self.by_surface.read() {
            if let Some(found) = cache.get(surface) {
                return Ok(read(found));
            }
        }
        let built = Arc::new(self.build_surface_index(surface)?);
        if let Ok(mut cache) = self.by_surface.write() {
            if cache.len() < MAX_CACHED_SURFACES {
                cache.insert(surface.to_string(), Arc::clone(&built));
            }
        }
        Ok(read(&built))
    }

    fn build_surface_index(&self, surface: &str) -> Result<SurfaceIndex, CompileError> {
        let mut members: Vec<usize> = self
            .surface_keys
            .iter()
            .filter(|key| key.matcher.is_match(surface))
            .flat_map(|key| key.rules.iter().copied())
            .collect();
        members.sort_unstable();
        let mut builder = GlobSetBuilder::new();
        let mut glob_rule = Vec::with_capacity(members.len());
        for index in members {
            for glob in &self.pattern_globs[index] {
                builder.add(glob.clone());
                glob_rule.push(index);
            }
        }
        let set = builder.build().map_err(|e| CompileError {
            surface: surface.to_string(),
            pattern: "*".to_string(),
            message: e.to_string(),
        })?;
        Ok(SurfaceIndex { set, glob_rule })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::state::{Origin, PermissionState::*};

    fn compiled(rules: &[(&str, &str, crate::policy::state::PermissionState)]) -> CompiledRules {
        let rules = rules
            .iter()
            .map(|(s, p, a)| Rule::new(s, p, *a, Origin::Global))
            .collect();
        CompiledRules::compile(rules, "/home/u").expect("compiles")
    }

    #[test]
    fn last_matching_rule_wins() {
        let rules = compiled(&[
            ("bash", "*", Allow),
            ("bash", "rm *", Deny),
            ("read", "*", Deny),
        ]);
        let values = vec!["rm -rf x".to_string(), "ls".to_string()];
        assert_eq!(
            rules.last_matches("bash", &values).unwrap(),
            vec![Some(1), Some(0)]
        );
        assert_eq!(
            rules.last_matches("write", &values).unwrap(),
            vec![None, None]
        );
    }

    #[test]
    fn remembered_matches_are_the_globsets() {
        let rules = compiled(&[
            ("*", "*", Ask),
            ("ab", "c", Deny),
            ("a", "bc", Allow),
            ("a", "b*", Deny),
        ]);
        for _ in 0..2 {
            // "ab"+"c" and "a"+"bc" must not share a memo entry.
            assert_eq!(rules.all_matches("ab", "c").unwrap(), vec![0, 1]);
            assert_eq!(rules.all_matches("a", "bc").unwrap(), vec![0, 2, 3]);
            assert!(rules.rule_matches("a", 2, "bc").unwrap());
            assert!(!rules.rule_matches("a", 1, "bc").unwrap());
            let values = vec!["bc".to_string(), "c".to_string(), "x".repeat(2000)];
            assert_eq!(
                rules.last_matches("a", &values).unwrap(),
                vec![Some(3), Some(0), Some(0)]
            );
        }
    }

    #[test]
    fn surface_keys_are_wildcards() {
        let rules = compiled(&[("mcp_*", "*", Deny), ("*", "*", Ask)]);
        let values = vec!["x".to_string()];
        assert_eq!(
            rules.last_matches("mcp_fs", &values).unwrap(),
            vec![Some(1)]
        );
        assert_eq!(rules.last_matches("bash", &values).unwrap(), vec![Some(1)]);
        assert!(rules.rule_matches("mcp_fs", 0, "x").unwrap());
        assert!(!rules.rule_matches("bash", 0, "x").unwrap());
    }
}
