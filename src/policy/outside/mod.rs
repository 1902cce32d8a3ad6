//! Files that run outside the sandbox: the built-in `ask` floor on
//! writing them (issue 34, item 4).
//!
//! A sandbox (`permfs run`) or an agent behind the hook can write files
//! that a person's own tools run later, unsandboxed: a git hook runs at
//! the person's next `git commit`, `core.fsmonitor` at their next
//! `git status`, `.envrc` when their shell enters the directory, a VS Code
//! task when the folder opens, `~/.bashrc` at their next shell. Writing
//! one is deciding what the person runs, so it is the person's decision:
//! every write that meets one of these guards is floored to `ask`, and
//! only a person's answer (`decidedBy.kind == "user"`) may allow it. No
//! config rule, grant, yolo, judge or `allow always` rule does.
//!
//! The floor is `max(verdict, ask)`: a `deny` still denies. It is applied
//! after the whole stack has judged (`engine::judge_with_policy`), so it
//! is not a rule that last-match-wins could reorder, and it is checked
//! again by `finish` on the ask (`Ask::guarded` with `floor: true`).
//!
//! The list is data ([`TABLE_JSON`], `table.json`), each entry with its
//! name, the kind of file it names (in the reason a person reads), its
//! patterns and its examples, which are its test. An operator may lower
//! an entry to `allow` in the global config alone (`"guards":
//! {"git-hooks": "allow"}`); a project layer that tries is ignored with a
//! config issue.
//!
//! Git must stay usable inside: `git config` and `git init` write
//! `.git/config` by renaming `.git/config.lock` over it. Entries with
//! `"content": "git-config"` are judged on their content when the view
//! places a file there by a rename ([`gitconfig::judge`], [`placing`]):
//! text whose keys name no program and pull in no file is not floored.

pub mod gitconfig;

use crate::facts::intent::AccessIntent;
use crate::facts::request::FactSet;
use globset::{GlobSet, GlobSetBuilder};
use serde::Deserialize;
use std::cell::RefCell;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

/// The table, compiled into the binary.
pub const TABLE_JSON: &str = include_str!("table.json");

/// The floor's sentinel in a judgment's check (`floor`, `matchedPattern`
/// name the guard instead when it matched).
pub const FLOOR_SENTINEL: &str = "<runs-outside-the-sandbox>";

/// One entry of the table as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub name: String,
    /// What the file is, for the reason: "a git hook, which …".
    pub kind: String,
    pub patterns: Vec<String>,
    #[serde(default)]
    pub except: Vec<String>,
    /// How a rename that puts content in place is judged (`git-config`),
    /// or `None`: every write asks.
    #[serde(default)]
    pub content: Option<Content>,
    /// The entry's test: paths it floors and leaves alone.
    #[serde(default)]
    pub examples: Examples,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Content {
    GitConfig,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Examples {
    #[serde(default)]
    pub floors: Vec<String>,
    #[serde(default)]
    pub free: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct Table {
    #[serde(rename = "$comment")]
    _comment: Option<String>,
    guards: Vec<Entry>,
}

/// The table parsed once. A table that does not parse (a broken edit; the
/// tests parse it) is an error every policy carries, and then every write
/// is floored (fail closed).
static TABLE: LazyLock<Result<Vec<Entry>, String>> = LazyLock::new(|| {
    let table: Table = serde_json::from_str(TABLE_JSON).map_err(|e| e.to_string())?;
    let mut seen = std::collections::HashSet::new();
    for entry in &table.guards {
        if !seen.insert(entry.name.clone()) {
            return Err(format!("guard {:?} is listed twice", entry.name));
        }
    }
    Ok(table.guards)
});

/// The entries of the table (an error when it does not parse).
pub fn entries() -> Result<&'static [Entry], String> {
    TABLE.as_deref().map_err(Clone::clone)
}

/// The names of the guards, for validating a config's `guards` key.
pub fn names() -> Vec<&'static str> {
    entries()
        .map(|e| e.iter().map(|e| e.name.as_str()).collect())
        .unwrap_or_default()
}

/// What an operator set for one guard in the global config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Setting {
    /// The default: every write asks a person.
    Ask,
    /// Lowered: the guard is off and the rules decide.
    Allow,
}

/// One compiled entry.
#[derive(Debug)]
struct Compiled {
    index: usize,
    /// The entry's own patterns (the files).
    files: (GlobSet, Vec<usize>),
    /// The directories its patterns name literally, as names: a file,
    /// link or directory moved into their place.
    dirs: (GlobSet, Vec<usize>),
    except: (GlobSet, Vec<usize>),
    /// The texts matched, for the report (`files` then `dirs`).
    file_patterns: Vec<String>,
    dir_patterns: Vec<String>,
}

/// The guard a write met.
#[derive(Debug, Clone, PartialEq)]
pub struct Met {
    pub name: String,
    /// The pattern that matched, as written in the table (a directory
    /// one as the directory).
    pub pattern: String,
    /// "permfs: runs outside the sandbox: …".
    pub reason: String,
    /// The fact value (path) that matched.
    pub value: String,
}

/// The compiled guard set of one policy: the table, with the guards the
/// global config lowered left out.
#[derive(Debug, Default)]
pub struct OutsideGuards {
    compiled: Vec<Compiled>,
    /// Every guard and its setting, table order (for `check-config` and
    /// `rules.json`).
    pub settings: Vec<(String, Setting)>,
    /// Set when the table itself cannot be used: every write is floored.
    broken: Option<String>,
    /// Every enabled guard's file and directory patterns, as globs (see
    /// [`Self::screen_globs`]).
    any: Vec<globset::Glob>,
}

/// A pattern's readings: one under `~/` is the home's (and its canonical
/// spelling); any other matches as written (relative) and after any
/// directory (`*/` in front).
fn readings(pattern: &str, homes: &[String]) -> Vec<String> {
    if let Some(rest) = pattern.strip_prefix("~/") {
        homes
            .iter()
            .map(|h| format!("{}/{rest}", h.trim_end_matches('/')))
            .collect()
    } else if pattern.starts_with('/') {
        vec![pattern.to_string()]
    } else {
        vec![pattern.to_string(), format!("*/{pattern}")]
    }
}

/// The directories a pattern names literally: `.git/hooks/*` gives `.git`
/// and `.git/hooks`; `.git/modules/*/hooks/*` gives `.git`, `.git/modules`
/// and `.git/modules/*/hooks` (a prefix that ends in a wildcard would match
/// far more than a directory, and is left out). `~` itself is not one.
fn directories(pattern: &str) -> Vec<String> {
    let mut out = Vec::new();
    let parts: Vec<&str> = pattern.split('/').collect();
    for end in 1..parts.len() {
        let last = parts[end - 1];
        if last.is_empty() || last == "~" || last.contains(['*', '?']) {
            continue;
        }
        out.push(parts[..end].join("/"));
    }
    out
}

/// The globs of every reading of `patterns`, with the pattern each glob
/// came from (by index), so a match names the table's pattern.
fn glob_set(patterns: &[String], homes: &[String]) -> Result<(GlobSet, Vec<usize>), String> {
    let mut builder = GlobSetBuilder::new();
    let mut origin = Vec::new();
    for (index, pattern) in patterns.iter().enumerate() {
        for reading in readings(pattern, homes) {
            // The homes are already expanded: no `~` is left to read.
            for glob in super::wildcard::compile(&reading, "", super::wildcard::Braced::Literal)
                .map_err(|e| format!("{pattern}: {e}"))?
            {
                builder.add(glob);
                origin.push(index);
            }
        }
    }
    Ok((builder.build().map_err(|e| e.to_string())?, origin))
}

/// How many compiled sets [`OutsideGuards::shared`] keeps.
const MAX_SHARED: usize = 16;

impl OutsideGuards {
    /// [`Self::compile`], shared with the policies built before for the
    /// same `homes` and `lowered` guards: the set is a function of those
    /// and of the table alone, and compiling it (a globset per guard) is
    /// most of the cost of building a policy, which a daemon does for every
    /// session cwd and again whenever a config layer changes. A few sets
    /// are kept (a daemon has one home; the global config's `guards` may
    /// change); past [`MAX_SHARED`] they are let go and compiled anew.
    pub fn shared(homes: &[String], lowered: &[(String, Setting)]) -> Arc<Self> {
        type Kept = Vec<(Vec<String>, Vec<(String, Setting)>, Arc<OutsideGuards>)>;
        static KEPT: Mutex<Kept> = Mutex::new(Vec::new());
        let mut kept = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, _, guards)) = kept
            .iter()
            .find(|(h, l, _)| h.as_slice() == homes && l.as_slice() == lowered)
        {
            return Arc::clone(guards);
        }
        if kept.len() >= MAX_SHARED {
            kept.clear();
        }
        let guards = Arc::new(Self::compile(homes, lowered));
        kept.push((homes.to_vec(), lowered.to_vec(), Arc::clone(&guards)));
        guards
    }

    /// The table compiled for `homes` (the daemon's home and its
    /// canonical spelling), with `lowered` guards off.
    pub fn compile(homes: &[String], lowered: &[(String, Setting)]) -> Self {
        let entries = match entries() {
            Ok(entries) => entries,
            Err(error) => {
                tracing::error!(%error, "the outside-the-sandbox guard table does not parse: every write asks");
                return Self::broken(format!("the guard table does not parse: {error}"));
            }
        };
        let setting_of = |name: &str| {
            lowered
                .iter()
                .rev()
                .find(|(n, _)| n == name)
                .map(|(_, s)| *s)
                .unwrap_or(Setting::Ask)
        };
        let mut compiled = Vec::new();
        let mut settings = Vec::new();
        for (index, entry) in entries.iter().enumerate() {
            let setting = setting_of(&entry.name);
            settings.push((entry.name.clone(), setting));
            if setting == Setting::Allow {
                continue;
            }
            let mut dir_patterns: Vec<String> = Vec::new();
            for pattern in &entry.patterns {
                for dir in directories(pattern) {
                    if !dir_patterns.contains(&dir) {
                        dir_patterns.push(dir);
                    }
                }
            }
            let built = (|| -> Result<Compiled, String> {
                Ok(Compiled {
                    index,
                    files: glob_set(&entry.patterns, homes)?,
                    dirs: glob_set(&dir_patterns, homes)?,
                    except: glob_set(&entry.except, homes)?,
                    file_patterns: entry.patterns.clone(),
                    dir_patterns,
                })
            })();
            match built {
                Ok(c) => compiled.push(c),
                Err(error) => {
                    tracing::error!(guard = %entry.name, %error, "an outside-the-sandbox guard does not compile: every write asks");
                    return Self::broken(format!(
                        "guard {:?} does not compile: {error}",
                        entry.name
                    ));
                }
            }
        }
        let every: Vec<String> = compiled
            .iter()
            .flat_map(|c| c.file_patterns.iter().chain(&c.dir_patterns).cloned())
            .collect();
        let mut any = Vec::new();
        for pattern in &every {
            for reading in readings(pattern, homes) {
                match super::wildcard::compile(&reading, "", super::wildcard::Braced::Literal) {
                    Ok(globs) => any.extend(globs),
                    Err(error) => return Self::broken(format!("{pattern}: {error}")),
                }
            }
        }
        Self {
            compiled,
            settings,
            broken: None,
            any,
        }
    }

    fn broken(why: String) -> Self {
        Self {
            compiled: Vec::new(),
            settings: Vec::new(),
            broken: Some(why),
            any: Vec::new(),
        }
    }

    /// Why the set cannot be used, if it cannot (every write then asks).
    pub fn broken_reason(&self) -> Option<&str> {
        self.broken.as_deref()
    }

    /// The globs of every enabled guard's file and directory patterns,
    /// exceptions aside: a value none of them matches meets no guard (a
    /// superset of [`Self::met_value`], for a screen that must never miss:
    /// `session::view::opens::PathScreen`). `None` when the set is broken, and
    /// so meets everything.
    pub fn screen_globs(&self) -> Option<&[globset::Glob]> {
        self.broken.is_none().then_some(self.any.as_slice())
    }

    /// The guard `value` (one path spelling) meets, if any.
    pub fn met_value(&self, value: &str) -> Option<Met> {
        let entries = entries().ok()?;
        for c in &self.compiled {
            let entry = &entries[c.index];
            if c.except.0.is_match(value) {
                continue;
            }
            let first = |(set, origin): &(GlobSet, Vec<usize>)| {
                set.matches(value).iter().map(|g| origin[*g]).min()
            };
            let file = first(&c.files);
            let dir = first(&c.dirs);
            let (pattern, what) = match (file, dir) {
                (Some(i), _) => (c.file_patterns[i].clone(), entry.kind.clone()),
                (None, Some(i)) => (
                    c.dir_patterns[i].clone(),
                    format!("the directory that holds {}", entry.kind),
                ),
                (None, None) => continue,
            };
            // A directory made or removed there is not a program; the
            // view says so with a scope (see [`Scope`]).
            if file.is_none() && scope_is(Scope::DirectoryOnly) {
                continue;
            }
            return Some(Met {
                name: entry.name.clone(),
                pattern,
                reason: format!(
                    "permfs: runs outside the sandbox: {what}; only a person may allow writing it (built-in guard {:?})",
                    entry.name
                ),
                value: value.to_string(),
            });
        }
        None
    }

    /// The guard a write among `facts` meets, if any. Only write facts
    /// count (`path_write` and the tools' `write`/`edit`); a bare bash
    /// word is not a path. A file the view is placing with judged-inert
    /// content (see [`placing`]) is not floored by a content-judged guard.
    pub fn met(&self, facts: &FactSet) -> Option<Met> {
        for intent in facts.intents.iter().filter(|i| is_write(i)) {
            if let Some(why) = &self.broken {
                return Some(Met {
                    name: "*".into(),
                    pattern: "*".into(),
                    reason: format!("permfs: the outside-the-sandbox guards cannot be used ({why}), so every write asks a person"),
                    value: intent.match_values.first().cloned().unwrap_or_default(),
                });
            }
            for value in intent.match_values.iter() {
                if let Some(met) = self.met_value(value) {
                    if self.placed_inert(&met, intent) {
                        continue;
                    }
                    return Some(met);
                }
            }
        }
        None
    }

    /// Whether this write is the view placing content judged inert for a
    /// guard that judges content.
    fn placed_inert(&self, met: &Met, intent: &AccessIntent) -> bool {
        let content_judged = entries()
            .ok()
            .and_then(|e| e.iter().find(|e| e.name == met.name))
            .is_some_and(|e| e.content.is_some());
        content_judged
            && PLACING.with(|p| {
                p.borrow()
                    .iter()
                    .any(|placed| intent.match_values.iter().any(|v| v == placed))
            })
    }
}

fn is_write(intent: &AccessIntent) -> bool {
    !intent.bare_word && matches!(intent.surface.as_str(), "path_write" | "write" | "edit")
}

/// What the view is doing while it judges, on this thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Making or removing a directory (`mkdir`, `rmdir`, `unlink`):
    /// a guarded directory's own name is then not floored, as `git init`
    /// makes `.git` and `.git/hooks`; the files in it still are.
    DirectoryOnly,
}

thread_local! {
    static SCOPE: RefCell<Vec<Scope>> = const { RefCell::new(Vec::new()) };
    static PLACING: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

fn scope_is(scope: Scope) -> bool {
    SCOPE.with(|s| s.borrow().contains(&scope))
}

/// Whether a scope is open on this thread: the view neither reads nor
/// keeps a cached verdict judged inside one (the verdict is this
/// operation's, not the path's).
pub fn scoped() -> bool {
    SCOPE.with(|s| !s.borrow().is_empty()) || PLACING.with(|p| !p.borrow().is_empty())
}

/// Runs `f` with `scope` open on this thread.
pub fn within<T>(scope: Scope, f: impl FnOnce() -> T) -> T {
    SCOPE.with(|s| s.borrow_mut().push(scope));
    let _close = Close(|| {
        SCOPE.with(|s| {
            s.borrow_mut().pop();
        })
    });
    f()
}

/// Runs `f` while the view places `paths` (absolute) with content that a
/// content-judged guard found inert: the guard does not floor writing
/// them. The caller has judged the very bytes it places (see
/// `docs/security.md`, "Files that run outside the sandbox").
pub fn placing<T>(paths: &[String], f: impl FnOnce() -> T) -> T {
    PLACING.with(|p| p.borrow_mut().extend(paths.iter().cloned()));
    let count = paths.len();
    let _close = Close(move || {
        PLACING.with(|p| {
            let mut p = p.borrow_mut();
            let keep = p.len().saturating_sub(count);
            p.truncate(keep);
        })
    });
    f()
}

/// A scope open on this thread until this is dropped (see [`enter`],
/// [`enter_placing`]): for a caller whose judging runs through code it
/// does not want to wrap in a closure.
#[must_use = "the scope closes when this is dropped"]
pub struct Entered {
    scope: Option<Scope>,
    placed: usize,
}

impl Drop for Entered {
    fn drop(&mut self) {
        if self.scope.is_some() {
            SCOPE.with(|s| {
                s.borrow_mut().pop();
            });
        }
        PLACING.with(|p| {
            let mut p = p.borrow_mut();
            let keep = p.len().saturating_sub(self.placed);
            p.truncate(keep);
        });
    }
}

/// Opens `scope` on this thread until the result is dropped.
pub fn enter(scope: Scope) -> Entered {
    SCOPE.with(|s| s.borrow_mut().push(scope));
    Entered {
        scope: Some(scope),
        placed: 0,
    }
}

/// [`placing`] until the result is dropped.
pub fn enter_placing(paths: &[String]) -> Entered {
    PLACING.with(|p| p.borrow_mut().extend(paths.iter().cloned()));
    Entered {
        scope: None,
        placed: paths.len(),
    }
}

/// Runs its closure when dropped (also on unwind).
struct Close<F: FnMut()>(F);

impl<F: FnMut()> Drop for Close<F> {
    fn drop(&mut self) {
        (self.0)()
    }
}

/// The entry `name`, when the table has it.
pub fn entry(name: &str) -> Option<&'static Entry> {
    entries().ok()?.iter().find(|e| e.name == name)
}

/// The content-judged guard `path` meets, with its kind of content.
pub fn content_guard(guards: &OutsideGuards, path: &str) -> Option<(Met, Content)> {
    let met = guards.met_value(path)?;
    let content = entry(&met.name)?.content?;
    Some((met, content))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::intent::Principal;
    use std::sync::Arc;

    const HOME: &str = "/home/u";
    const CWD: &str = "/w";

    fn guards() -> OutsideGuards {
        OutsideGuards::compile(&[HOME.to_string()], &[])
    }

    /// An example path as a fact's values: `~/x` in the home, a relative
    /// one under the cwd (absolute and relative spellings, as the facts
    /// carry them), an absolute one as it is.
    fn values(example: &str) -> Vec<String> {
        if let Some(rest) = example.strip_prefix("~/") {
            vec![format!("{HOME}/{rest}")]
        } else if example.starts_with('/') {
            vec![example.to_string()]
        } else {
            vec![format!("{CWD}/{example}"), example.to_string()]
        }
    }

    fn write_facts(values: Vec<String>) -> FactSet {
        FactSet {
            tool: Some("view".into()),
            intents: vec![AccessIntent {
                surface: "path_write".into(),
                match_values: values.into(),
                boundary_value: None,
                requester_cwd: CWD.into(),
                principal: Arc::new(Principal {
                    session_id: "main".into(),
                    agent_name: None,
                }),
                floor: None,
                word: None,
                bare_word: false,
            }],
            unusable: None,
        }
    }

    #[test]
    fn the_table_parses_and_every_entry_has_examples() {
        let entries = entries().expect("the table parses");
        assert!(entries.len() >= 10);
        for entry in entries {
            assert!(
                !entry.examples.floors.is_empty() && !entry.examples.free.is_empty(),
                "{} has no examples both ways",
                entry.name
            );
            assert!(!entry.kind.is_empty() && !entry.patterns.is_empty());
        }
        for wanted in [
            "git-hooks",
            "git-config",
            "direnv",
            "vscode",
            "jetbrains",
            "devcontainer",
            "shell-startup",
            "ssh",
            "home-git-config",
            "home-git",
            "npmrc",
            "systemd-user",
            "user-bin",
        ] {
            assert!(names().contains(&wanted), "{wanted} is not in the table");
        }
    }

    /// Each entry's examples are its test: what it floors, it floors (by
    /// this entry, naming the file's kind), and what it leaves alone no
    /// entry of its own floors.
    #[test]
    fn every_entry_floors_its_examples_and_nothing_else() {
        let entries = entries().expect("the table parses");
        for entry in entries {
            let alone = OutsideGuards::compile(
                &[HOME.to_string()],
                &entries
                    .iter()
                    .filter(|e| e.name != entry.name)
                    .map(|e| (e.name.clone(), Setting::Allow))
                    .collect::<Vec<_>>(),
            );
            for example in &entry.examples.floors {
                let met = alone
                    .met(&write_facts(values(example)))
                    .unwrap_or_else(|| panic!("{}: {example} is not floored", entry.name));
                assert_eq!(met.name, entry.name);
                assert!(
                    met.reason.contains("runs outside the sandbox")
                        && met.reason.contains(entry.kind.as_str()),
                    "{}",
                    met.reason
                );
            }
            for example in &entry.examples.free {
                assert_eq!(
                    alone.met(&write_facts(values(example))),
                    None,
                    "{}: {example} is floored",
                    entry.name
                );
            }
        }
    }

    #[test]
    fn only_writes_are_floored() {
        let mut facts = write_facts(values(".git/hooks/pre-commit"));
        assert!(guards().met(&facts).is_some());
        facts.intents[0].surface = "path_read".into();
        assert!(guards().met(&facts).is_none());
        facts.intents[0].surface = "path_write".into();
        facts.intents[0].bare_word = true;
        assert!(guards().met(&facts).is_none());
    }

    #[test]
    fn a_lowered_guard_is_off_and_the_others_stay() {
        let lowered = OutsideGuards::compile(
            &[HOME.to_string()],
            &[("git-hooks".to_string(), Setting::Allow)],
        );
        assert!(lowered
            .met(&write_facts(values(".git/hooks/pre-commit")))
            .is_none());
        assert!(lowered.met(&write_facts(values(".envrc"))).is_some());
        assert!(lowered
            .settings
            .contains(&("git-hooks".to_string(), Setting::Allow)));
        assert!(lowered
            .settings
            .contains(&("direnv".to_string(), Setting::Ask)));
    }

    #[test]
    fn a_shared_set_is_the_one_compiled_for_the_same_homes_and_lowered_guards() {
        let homes = [format!("{HOME}-shared")];
        let lowered = [("git-hooks".to_string(), Setting::Allow)];
        let first = OutsideGuards::shared(&homes, &lowered);
        assert!(Arc::ptr_eq(
            &first,
            &OutsideGuards::shared(&homes, &lowered)
        ));
        // Another home, or the guard left on, is compiled afresh.
        let other = OutsideGuards::shared(&homes, &[]);
        assert!(!Arc::ptr_eq(&first, &other));
        assert!(other
            .met(&write_facts(values(".git/hooks/pre-commit")))
            .is_some());
        let elsewhere = OutsideGuards::shared(&[format!("{HOME}-other")], &[]);
        assert!(!Arc::ptr_eq(&other, &elsewhere));
        assert!(first
            .settings
            .contains(&("git-hooks".to_string(), Setting::Allow)));
    }

    #[test]
    fn a_directory_made_there_is_not_floored_but_a_file_in_its_place_is() {
        let g = guards();
        for dir in [".git", ".git/hooks", ".vscode", "~/.ssh"] {
            let facts = write_facts(values(dir));
            assert!(g.met(&facts).is_some(), "{dir} as a file");
            assert!(
                within(Scope::DirectoryOnly, || g.met(&facts)).is_none(),
                "{dir} as a directory"
            );
        }
        let hook = write_facts(values(".git/hooks/pre-commit"));
        assert!(within(Scope::DirectoryOnly, || g.met(&hook)).is_some());
        assert!(!scoped());
    }

    #[test]
    fn placing_inert_content_lifts_only_a_content_judged_guard() {
        let g = guards();
        let config = values(".git/config");
        let facts = write_facts(config.clone());
        assert!(g.met(&facts).is_some());
        assert!(placing(&config[..1], || g.met(&facts)).is_none());
        assert!(g.met(&facts).is_some(), "the scope closed");
        let hook = values(".git/hooks/pre-commit");
        let hook_facts = write_facts(hook.clone());
        assert!(placing(&hook[..1], || g.met(&hook_facts)).is_some());
    }
}
