//! The enforcement view's question: may this session read or write this
//! path, now?
//!
//! A file opened inside `permfs run`'s view is judged like a tool call's
//! path facts (`path_read` / `path_write`, and `external_directory_read` /
//! `_write` for a path outside the session's cwd), at the asking session
//! and, while the verdict is `ask`, at each ancestor, with grants and the
//! built-in guards, exactly as a raised ask would be walked. The walk is
//! first made dry ([`Authority::judge_paths`]): most opens are answered by
//! a rule, and those are not asks, so they leave nothing in an outbox, an
//! inbox or the audit log's answer stream (a deny is written to the audit
//! log by the view). Only an open the dry walk leaves at a node that must
//! ask someone becomes a real ask ([`Authority::raise_paths`]), with the
//! same facts, so the person sees what the program tried to open.
//!
//! One rule is the view's own: where no rule at a node speaks for a path
//! (every fact a `path` surface no explicit rule matched, and nothing
//! outside the cwd), the node allows it. The view serves the session's own
//! workspace, which `permfs run` bound read-write before the view existed;
//! path rules, grants and the guards narrow that, and a
//! `"path_write": {"*": "ask"}` rule makes every write a question. A node
//! whose rules cannot be read or evaluated denies (fail closed).

use crate::facts::access_path::{is_outside, AccessPath};
use crate::facts::intent::{AccessIntent, Principal};
use crate::facts::request::{AskForm, FactSet, Request};
use crate::policy::PermissionState;
use crate::session::authority::commit::lock;
use crate::session::authority::Authority;
use crate::session::tree::ask::AskId;
use crate::session::AuthorityError;
use std::sync::Arc;

/// What an operation does to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    Read,
    Write,
}

impl Access {
    fn surface(self) -> &'static str {
        match self {
            Self::Read => "path_read",
            Self::Write => "path_write",
        }
    }
    fn external_surface(self) -> &'static str {
        match self {
            Self::Read => "external_directory_read",
            Self::Write => "external_directory_write",
        }
    }
    pub fn word(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
        }
    }
}

/// The dry walk's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathVerdict {
    /// `by` names the session and the rule (or the view's default).
    Allow { by: String },
    /// `why` names the session, the rule and its reason.
    Deny { why: String },
    /// Some node must ask: raise it with [`Authority::raise_paths`].
    Ask,
}

/// Which paths no rule at a session speaks for: the view's screen in front
/// of the dry walk when one operation judges many names (a directory
/// rename's subtree), so a tree the policy allows costs a glob pass per
/// name rather than a walk per access.
///
/// It is exact where it says "unnamed", by the walk's own rule: a node
/// allows a path inside its cwd when no check counted and none denied
/// (the view's default), and a check counts only where a config rule or a
/// grant matched; a default that could deny, every guard on the
/// authority (of every cwd on the chain) and every outside-the-sandbox
/// guard are in the screen too. So a path none of those globs matches in
/// any of its aliases is allowed at the session's own node, and the walk
/// never climbs. Anything else ("named") is judged by the walk.
pub struct PathScreen {
    set: globset::GlobSet,
    cwd: String,
    /// The cwd as the facts resolve it, with a `/` after it.
    within: String,
    canonical: String,
    home: String,
}

impl PathScreen {
    /// True when the session's node allows every access to `path` (an
    /// absolute path as the view serves it) by the view's default.
    pub fn unnamed(&self, path: &str) -> bool {
        let matched = |values: &[&str]| {
            values
                .iter()
                .any(|v| self.set.is_match_candidate(&globset::Candidate::new(v)))
        };
        if let Some(relative) = self.simple_relative(path) {
            // Inside the cwd by its lexical form, which is then also its
            // boundary (`AccessPath` resolves nothing for a word), so
            // not outside it.
            return !matched(&[path, relative]);
        }
        let at = AccessPath::for_word_in(path, &self.cwd, &self.cwd, &self.home);
        if at.match_values.is_empty() || is_outside(&at.boundary, &self.canonical) {
            return false;
        }
        let values: Vec<&str> = at.match_values.iter().map(String::as_str).collect();
        !matched(&values)
    }

    /// For a path `AccessPath` would leave as it is (absolute, no `.`,
    /// `..` or empty step, nothing its cleaning trims) below the cwd: the
    /// cwd-relative form, its one other alias. `None`: ask `AccessPath`.
    fn simple_relative<'p>(&self, path: &'p str) -> Option<&'p str> {
        if self.within.is_empty() {
            return None;
        }
        let relative = path.strip_prefix(self.within.as_str())?;
        let last = relative.chars().next_back()?;
        let plain = !last.is_whitespace()
            && !matches!(last, '\'' | '"' | '/')
            && relative
                .split('/')
                .all(|step| !matches!(step, "" | "." | ".."));
        plain.then_some(relative)
    }
}

impl Authority {
    /// The [`PathScreen`] of `session` now, or `None` (no such session,
    /// or a policy that cannot be compiled: then every name is walked).
    pub fn path_screen(&self, session: &str) -> Option<PathScreen> {
        let (cwd, canonical, grants, chain, agents) = {
            let state = lock(&self.state);
            let node = state.tree.get(session)?;
            (
                node.cwd.clone(),
                node.canonical_cwd.canonical(),
                Arc::clone(&node.compiled_grants),
                crate::session::walk::chain_cwds(&state.tree, session),
                crate::session::walk::agents_for(&state.tree, session),
            )
        };
        const SURFACES: [&str; 2] = ["path_read", "path_write"];
        let mut globs = grants.speaking_globs(&SURFACES);
        let mut outside: Vec<Arc<crate::policy::outside::OutsideGuards>> = Vec::new();
        let mut keep = |guards: &Arc<crate::policy::outside::OutsideGuards>| {
            if !outside.iter().any(|o| Arc::ptr_eq(o, guards)) {
                outside.push(Arc::clone(guards));
            }
        };
        for agent in &agents {
            let policy = self.loader.policy(&cwd, agent.as_deref()).ok()?;
            globs.extend(policy.rules.speaking_globs(&SURFACES));
            if let Some(narrowing) = &policy.narrowing {
                globs.extend(narrowing.speaking_globs(&SURFACES));
            }
            globs.extend(policy.guard.speaking_globs(&SURFACES));
            keep(&policy.outside);
        }
        for at in &chain {
            let policy = self.loader.policy(at, None).ok()?;
            globs.extend(policy.guard.speaking_globs(&SURFACES));
            keep(&policy.outside);
        }
        for guards in &outside {
            globs.extend(guards.screen_globs()?.iter().cloned());
        }
        let mut builder = globset::GlobSetBuilder::new();
        for glob in globs {
            builder.add(glob);
        }
        // The lexical shortcut only where the lexical cwd is the canonical
        // one: else a path below it may be outside by its boundary.
        let lexical = crate::facts::path_text::resolve(&cwd, &cwd);
        let within = if lexical == canonical && lexical != "/" {
            format!("{lexical}/")
        } else {
            String::new()
        };
        Some(PathScreen {
            set: builder.build().ok()?,
            within,
            cwd,
            canonical,
            home: crate::facts::path_text::home_dir(),
        })
    }

    /// What the policies judging `session` are now, by identity: the
    /// loader hands out the same policy until a layer file changes, so a
    /// different stamp means a verdict may have changed (the kernel
    /// mechanism then drops what the kernel remembers). A policy that
    /// cannot be had stamps as 0, which differs from any loaded one.
    pub fn policy_stamp(&self, session: &str) -> Vec<usize> {
        let (cwd, chain, agents) = {
            let state = lock(&self.state);
            let Some(node) = state.tree.get(session) else {
                return Vec::new();
            };
            (
                node.cwd.clone(),
                crate::session::walk::chain_cwds(&state.tree, session),
                crate::session::walk::agents_for(&state.tree, session),
            )
        };
        let mut stamp = Vec::new();
        for agent in &agents {
            stamp.push(
                self.loader
                    .policy(&cwd, agent.as_deref())
                    .map_or(0, |p| Arc::as_ptr(&p) as usize),
            );
        }
        for at in &chain {
            stamp.push(
                self.loader
                    .policy(at, None)
                    .map_or(0, |p| Arc::as_ptr(&p) as usize),
            );
        }
        stamp
    }

    /// The facts of `accesses` at `session` (absolute paths, as the view
    /// serves them at their own path), or `None` for no such session.
    pub fn path_facts(&self, session: &str, accesses: &[(String, Access)]) -> Option<FactSet> {
        let (cwd, canonical, principal) = {
            let state = lock(&self.state);
            let s = state.tree.get(session)?;
            (
                s.cwd.clone(),
                s.canonical_cwd.canonical(),
                Principal {
                    session_id: s.id.clone(),
                    agent_name: s.agent.clone(),
                },
            )
        };
        let principal = Arc::new(principal);
        let fact_cwd: Arc<str> = cwd.as_str().into();
        let home = crate::facts::path_text::home_dir();
        let mut intents = Vec::with_capacity(accesses.len() * 2);
        for (path, access) in accesses {
            // Lexical aliases only: the view hands over the path the
            // kernel resolved (no symlink is left in it), so there is
            // nothing for `realpath` to add.
            let at = AccessPath::for_word_in(path, &cwd, &cwd, &home);
            let intent = |surface: &str| AccessIntent {
                surface: surface.to_string(),
                match_values: Arc::clone(&at.match_values),
                boundary_value: Some(Arc::clone(&at.boundary)),
                requester_cwd: Arc::clone(&fact_cwd),
                principal: Arc::clone(&principal),
                floor: None,
                word: None,
                bare_word: false,
            };
            intents.push(intent(access.surface()));
            if is_outside(&at.boundary, &canonical) {
                intents.push(intent(access.external_surface()));
            }
        }
        Some(FactSet {
            // Gated like a tool call: a `path` check counts only where an
            // explicit rule matched.
            tool: Some("view".into()),
            intents,
            unusable: None,
        })
    }

    /// Walks `facts` from `session` up without recording anything: the
    /// first node whose rules allow or deny answers; a node that would
    /// take the ask into its inbox (interactive, or the root) makes it
    /// [`PathVerdict::Ask`].
    pub fn judge_paths(
        &self,
        session: &str,
        facts: &FactSet,
    ) -> Result<PathVerdict, AuthorityError> {
        let chain_cwds = crate::session::walk::chain_cwds(&lock(&self.state).tree, session);
        if chain_cwds.is_empty() {
            return Err(AuthorityError::NotFound(format!("no session {session:?}")));
        }
        // A deny guard refuses here; the outside-the-sandbox floor is in
        // every node's judgment (an `ask` a person answers).
        if let Some(guard) = self.guard_met(&chain_cwds, facts).filter(|g| !g.floor) {
            return Ok(PathVerdict::Deny {
                why: format!("built-in guard {:?}: {}", guard.pattern, guard.reason),
            });
        }
        let state = lock(&self.state);
        let agents = crate::session::walk::agents_for(&state.tree, session);
        let mut node_id = session.to_string();
        loop {
            let Some(node) = state.tree.get(&node_id) else {
                return Ok(PathVerdict::Deny {
                    why: format!("session {node_id:?} vanished"),
                });
            };
            let judgment = match self.judge_facts_at(node, &agents, facts) {
                Ok(judgment) => judgment,
                Err(error) => {
                    return Ok(PathVerdict::Deny {
                        why: format!("at {node_id}: {error} (fail closed)"),
                    })
                }
            };
            let by = || match judgment.deciding_check() {
                Some(check) => format!(
                    "{} rule {:?} ({:?}) at {}",
                    check.rule_surface,
                    check.matched_pattern.as_deref().unwrap_or("*"),
                    check.origin,
                    node.id
                ),
                None => format!("no rule at {}", node.id),
            };
            match judgment.state {
                PermissionState::Allow => return Ok(PathVerdict::Allow { by: by() }),
                PermissionState::Deny => {
                    let mut why = by();
                    if let Some(reason) = judgment.reason() {
                        why.push_str(": ");
                        why.push_str(reason);
                    }
                    return Ok(PathVerdict::Deny { why });
                }
                PermissionState::Ask => {}
            }
            let spoke = judgment.checks.iter().any(|c| c.counted);
            if !spoke && judgment.unjudgeable.is_some() && !judgment.checks.is_empty() {
                return Ok(PathVerdict::Allow {
                    by: format!("the view's default at {} (no rule names the path)", node.id),
                });
            }
            match &node.parent {
                Some(parent) if !node.interactive => node_id = parent.clone(),
                _ => return Ok(PathVerdict::Ask),
            }
        }
    }

    /// The outside-the-sandbox guards of `session`'s policy (the view
    /// asks before it judges what a rename puts in place), or `None` when
    /// there is no such session or its policy cannot be had (the rename is
    /// then judged as any other, and the floor asks).
    pub fn outside_guards(
        &self,
        session: &str,
    ) -> Option<Arc<crate::policy::outside::OutsideGuards>> {
        let cwd = lock(&self.state).tree.get(session)?.cwd.clone();
        let policy = self.loader.policy(&cwd, None).ok()?;
        Some(Arc::clone(&policy.outside))
    }

    /// Raises the ask the dry walk could not answer, with its facts fixed:
    /// it waits in an inbox like any other (see [`Self::wait`]).
    pub fn raise_paths(
        &self,
        session: &str,
        rid: &str,
        facts: FactSet,
        message: String,
        paths: Vec<String>,
    ) -> Result<AskId, AuthorityError> {
        let (origin_id, agent, cwd) = {
            let state = lock(&self.state);
            let s = state
                .tree
                .get(session)
                .ok_or_else(|| AuthorityError::NotFound(format!("no session {session:?}")))?;
            (s.id.clone(), s.agent.clone(), s.cwd.clone())
        };
        let request = Request {
            form: AskForm::Intents(Ok(facts.intents.clone())),
            message: Some(message),
            suggested_patterns: paths,
            agent: None,
            suggested_surface: None,
            forwarded: None,
        };
        self.raise_fixed(
            session,
            rid,
            Ok((request, facts)),
            (origin_id, agent, cwd),
            0,
        )
    }

    /// Records a line in the audit log (a view's deny), if there is one.
    pub fn audit_line(&self, entry: serde_json::Map<String, serde_json::Value>) {
        let log = lock(&self.state).audit.clone();
        if let Some(log) = log {
            if let Err(error) = log.append(entry) {
                tracing::error!(%error, "the audit log cannot be written");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::layers::{PolicyLoader, PolicySources};
    use crate::session::SpawnSpec;

    fn authority(config: &str) -> (Authority, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("permfs.json");
        std::fs::write(&path, config).expect("config");
        let loader = PolicyLoader::new(PolicySources {
            global: Some(path),
            ..Default::default()
        })
        .expect("loader");
        let authority = Authority::new(Arc::new(loader), 0).expect("authority");
        let cwd = dir.path().join("work");
        std::fs::create_dir(&cwd).expect("cwd");
        authority
            .add_root(
                "main",
                SpawnSpec {
                    interactive: true,
                    ..Default::default()
                },
                cwd.to_str().expect("utf-8"),
            )
            .expect("root");
        (authority, dir)
    }

    fn verdict(a: &Authority, path: &str, access: Access) -> PathVerdict {
        let facts = a
            .path_facts("main", &[(path.to_string(), access)])
            .expect("session");
        a.judge_paths("main", &facts).expect("judged")
    }

    #[test]
    fn rules_guards_and_the_default_decide_a_path() {
        let (a, dir) = authority(
            r#"{"permission": {"*": "ask", "path": {"*.env": "deny", "*.lock": "ask"}, "external_directory": "ask"}}"#,
        );
        let work = dir.path().join("work");
        let w = |name: &str| format!("{}/{name}", work.display());
        assert!(matches!(
            verdict(&a, &w("src/a.rs"), Access::Read),
            PathVerdict::Allow { .. }
        ));
        assert!(matches!(
            verdict(&a, &w("src/a.rs"), Access::Write),
            PathVerdict::Allow { .. }
        ));
        let PathVerdict::Deny { why } = verdict(&a, &w(".env"), Access::Read) else {
            panic!("denied");
        };
        assert!(why.contains("*.env"), "{why}");
        assert_eq!(
            verdict(&a, &w("Cargo.lock"), Access::Write),
            PathVerdict::Ask
        );
        assert_eq!(verdict(&a, "/elsewhere/x", Access::Read), PathVerdict::Ask);
        // The built-in guards: a project layer is never written.
        assert!(matches!(
            verdict(&a, &w(".permfs/config.json"), Access::Write),
            PathVerdict::Deny { .. }
        ));
    }

    #[test]
    fn a_write_everywhere_rule_makes_every_write_a_question() {
        let (a, dir) = authority(r#"{"permission": {"*": "allow", "path_write": {"*": "ask"}}}"#);
        let file = format!("{}/work/a", dir.path().display());
        assert_eq!(verdict(&a, &file, Access::Write), PathVerdict::Ask);
        assert!(matches!(
            verdict(&a, &file, Access::Read),
            PathVerdict::Allow { .. }
        ));
    }

    #[test]
    fn an_unknown_session_is_an_error_not_a_verdict() {
        let (a, _dir) = authority(r#"{"permission": {"*": "allow"}}"#);
        assert!(a
            .path_facts("nobody", &[("/x".into(), Access::Read)])
            .is_none());
        let facts = a
            .path_facts("main", &[("/x".into(), Access::Read)])
            .expect("facts");
        assert!(a.judge_paths("nobody", &facts).is_err());
    }

    /// The screen's shortcut gives exactly the aliases `AccessPath` gives,
    /// where it applies, and stands aside for every path it could misread.
    #[test]
    fn the_screens_shortcut_spells_a_path_as_the_facts_do() {
        let (a, dir) = authority(r#"{"permission": {"*": "allow"}}"#);
        let work = dir.path().join("work");
        let screen = a.path_screen("main").expect("screen");
        let w = work.display().to_string();
        let simple = [
            "a.txt", "d/e/f.rs", "x y.txt", "in'side", "@at", "-dash", "ünï",
        ];
        for name in simple {
            let path = format!("{w}/{name}");
            let relative = screen.simple_relative(&path).expect("simple");
            let at = AccessPath::for_word_in(&path, &screen.cwd, &screen.cwd, &screen.home);
            assert_eq!(
                &*at.match_values,
                [path.clone(), relative.to_string()],
                "{name}"
            );
            assert!(!is_outside(&at.boundary, &screen.canonical), "{name}");
        }
        let odd = [
            "a/", "a/./b", "a/../b", "a//b", "trail ", "quote'", "dq\"", ".", "..",
        ];
        for name in odd {
            assert!(
                screen.simple_relative(&format!("{w}/{name}")).is_none(),
                "{name:?}"
            );
        }
        assert!(screen.simple_relative(&w).is_none());
        assert!(screen.simple_relative(&format!("{w}x/a")).is_none());
        assert!(screen.simple_relative("/elsewhere/a").is_none());
    }

    /// The screen is exact where it says "unnamed": each such path is
    /// allowed for reading and writing by the walk itself.
    #[test]
    fn a_path_the_screen_lets_through_is_one_the_walk_allows() {
        let configs = [
            r#"{"permission": {"*": "ask", "path": {"*.env": "deny", "*.env.*": "deny", "*.env.example": "allow"}, "external_directory": "ask"}}"#,
            r#"{"permission": {"*": "allow", "path_read": {"*/private/*": "deny"}, "path_write": {"*.lock": "ask"}}}"#,
            r#"{"permission": {"*": "deny", "path": {"src/*": "allow"}}}"#,
            r#"{"permission": {"*": "ask", "path_write": {"*": "ask"}}}"#,
        ];
        let names = [
            "a.txt",
            ".env",
            "x.env.local",
            "b.env.example",
            "private/k",
            "deep/private/k",
            "src/main.rs",
            "Cargo.lock",
            ".git/hooks/pre-commit",
            ".git/config",
            ".envrc",
            ".permfs/config.json",
            ".vscode/tasks.json",
            "tree/d1/f1.txt",
        ];
        for config in configs {
            let (a, dir) = authority(config);
            let work = dir.path().join("work");
            let screen = a.path_screen("main").expect("screen");
            let mut through = 0;
            for name in names {
                let path = format!("{}/{name}", work.display());
                if !screen.unnamed(&path) {
                    continue;
                }
                through += 1;
                for access in [Access::Read, Access::Write] {
                    assert!(
                        matches!(verdict(&a, &path, access), PathVerdict::Allow { .. }),
                        "{config}: the screen let {name} through, the walk does not allow {access:?}"
                    );
                }
            }
            let outside = "/elsewhere/a.txt";
            assert!(
                !screen.unnamed(outside),
                "a path outside the cwd is always walked"
            );
            let plain = format!("{}/tree/d1/f1.txt", work.display());
            let expected =
                config.contains("\"*\": \"ask\", \"path\"") || config.contains("private");
            assert_eq!(screen.unnamed(&plain), expected, "{config}");
            let guarded = [".git/hooks/pre-commit", ".permfs/config.json", ".envrc"];
            for name in guarded {
                assert!(
                    !screen.unnamed(&format!("{}/{name}", work.display())),
                    "{config}: {name} is named by a rule or a guard"
                );
            }
            assert!(
                through > 0 || !expected,
                "{config}: the screen lets some names through"
            );
        }
    }
}
