//! Who may do what at a session: the caller's standing, and the spawn rule.
//!
//! A session has two bindings: the uid that may **ask** as it (its
//! outbox, `ctl`, `query`, `children/`) and the uid that may **decide**
//! there (its inbox, its grants). Root and the mount owner are the
//! **operator**, who may do everything — but only from the daemon's own
//! mount namespace. That last condition is what keeps an agent that runs
//! as the owner's uid inside a sandbox (the usual case: the harness and
//! its sandboxes share one login) from deciding its own asks: inside the
//! sandbox it is only the asker of the session bound there.
//!
//! The spawn rule: a child never has more authority than its spawner
//! could give. A session's asker may spawn children that are
//! non-interactive, work inside the spawner's own (canonical) cwd, and
//! are asked as by the spawner's own asker uid, with any agent name
//! (every node judges for every agent on the spawn chain, so a name
//! gains nothing). Interactive children, decider bindings, another asker
//! uid and a cwd elsewhere need the operator or the session's decider.
//!
//! This module knows nothing of FUSE: the mount tells it the caller's uid
//! and whether the caller runs in the daemon's mount namespace.

use crate::session::tree::{Session, SpawnSpec};
use std::path::{Path, PathBuf};

/// The process behind a file operation, as the mount saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller {
    pub uid: u32,
    /// The caller shares the daemon's mount namespace, so it is not in a
    /// sandbox that was given only part of the mount. Unknown counts as
    /// `false`: an unreadable namespace never raises a caller's standing.
    pub in_daemon_namespace: bool,
}

impl Caller {
    /// A caller with full standing, for the daemon's own work and tests.
    pub fn operator(owner_uid: u32) -> Self {
        Self {
            uid: owner_uid,
            in_daemon_namespace: true,
        }
    }
}

/// What a caller is to one session, strongest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Standing {
    /// Root or the mount owner, outside any sandbox.
    Operator,
    /// The uid bound to decide at the session, outside any sandbox.
    Decider,
    /// The uid bound to ask as the session (or root, wherever it runs).
    Asker,
    /// Nobody the session knows.
    Stranger,
}

impl Standing {
    pub fn of(caller: Caller, session: &Session, owner_uid: u32) -> Self {
        let privileged_uid = caller.uid == 0 || caller.uid == owner_uid;
        if privileged_uid && caller.in_daemon_namespace {
            Self::Operator
        } else if caller.in_daemon_namespace && session.decider_uid == Some(caller.uid) {
            Self::Decider
        } else if caller.uid == session.asker_uid || caller.uid == 0 {
            Self::Asker
        } else {
            Self::Stranger
        }
    }

    /// Ask as the session: create requests, withdraw them, read answers.
    pub fn may_ask(self) -> bool {
        matches!(self, Self::Operator | Self::Asker)
    }

    /// Write `ctl`, make and remove directories under `children/`, and
    /// run dry runs in `query`.
    pub fn may_control(self) -> bool {
        self != Self::Stranger
    }

    /// Decide inbox asks, revoke grants, read the inbox and its events.
    pub fn may_decide(self) -> bool {
        matches!(self, Self::Operator | Self::Decider)
    }
}

/// Why a spawn was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpawnRefusal {
    /// The caller may not give what it asked for (`EACCES`).
    NotAllowed(String),
    /// The request itself is wrong, e.g. a cwd that does not exist
    /// (`EINVAL`).
    Invalid(String),
}

/// Checks `spec` against what `standing` may give a child of `spawner`,
/// and fixes the child's cwd to its canonical form (so a symlink swapped
/// later cannot move the child out of its spawner's tree). Returns the
/// spec to spawn with, or why it is refused.
pub fn check_spawn(
    standing: Standing,
    spawner: &Session,
    spec: SpawnSpec,
) -> Result<SpawnSpec, SpawnRefusal> {
    check_standing(standing, spawner, &spec).map_err(SpawnRefusal::NotAllowed)?;
    resolve_cwd(standing, spawner, spec)
}

fn check_standing(standing: Standing, spawner: &Session, spec: &SpawnSpec) -> Result<(), String> {
    if !standing.may_control() {
        return Err(format!(
            "only the session's asker, its decider or the operator may spawn under {:?}",
            spawner.id
        ));
    }
    if standing == Standing::Asker {
        if spec.interactive {
            return Err("an asker may not spawn an interactive session: only the operator or this session's decider may".into());
        }
        if spec.decider_uid.is_some() {
            return Err(
                "an asker may not bind a decider: only the operator or this session's decider may"
                    .into(),
            );
        }
        if spec.asker_uid.is_some_and(|uid| uid != spawner.asker_uid) {
            return Err(format!(
                "an asker may bind only its own asker uid ({}) to a child",
                spawner.asker_uid
            ));
        }
    }
    Ok(())
}

/// The child's cwd, canonical; an asker's must lie within its own.
fn resolve_cwd(
    standing: Standing,
    spawner: &Session,
    mut spec: SpawnSpec,
) -> Result<SpawnSpec, SpawnRefusal> {
    if let Some(cwd) = spec.cwd.take() {
        let canonical = canonical_dir(&cwd).map_err(SpawnRefusal::Invalid)?;
        if standing == Standing::Asker && !is_within(&canonical, &canonical_parent_cwd(spawner)) {
            return Err(SpawnRefusal::NotAllowed(format!(
                "cwd {cwd:?} is outside the spawner's cwd {:?}: only the operator or this session's decider may choose it",
                spawner.cwd
            )));
        }
        spec.cwd = Some(canonical.to_string_lossy().into_owned());
    }
    Ok(spec)
}

fn canonical_dir(cwd: &str) -> Result<PathBuf, String> {
    if !cwd.starts_with('/') {
        return Err(format!("cwd {cwd:?} must be absolute"));
    }
    // Never resolved through permfs's own mount: a cwd there is refused
    // (see `facts::fence`).
    let canonical = crate::facts::fence::canonicalize(Path::new(cwd))
        .map_err(|e| format!("cwd {cwd:?} cannot be resolved: {e}"))?;
    if !crate::facts::fence::metadata(&canonical).is_ok_and(|stat| stat.is_dir()) {
        return Err(format!("cwd {cwd:?} is not a directory"));
    }
    Ok(canonical)
}

/// The spawner's cwd, symlinks resolved; as written when it cannot be
/// resolved (then only a child at exactly that path passes).
fn canonical_parent_cwd(spawner: &Session) -> PathBuf {
    crate::facts::fence::canonicalize(Path::new(&spawner.cwd))
        .unwrap_or_else(|_| PathBuf::from(&spawner.cwd))
}

/// `path` is `base` or below it (component-wise: `/a/bc` is not in `/a/b`).
fn is_within(path: &Path, base: &Path) -> bool {
    path.starts_with(base)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::SessionTree;

    const OWNER: u32 = 1000;
    const AGENT: u32 = 2000;
    const PERSON: u32 = 3000;

    fn tree(cwd: &str) -> SessionTree {
        let mut tree = SessionTree::default();
        let root = SpawnSpec {
            interactive: true,
            ..Default::default()
        };
        tree.add_root("main", root, cwd, OWNER).expect("root");
        let worker = SpawnSpec {
            asker_uid: Some(AGENT),
            decider_uid: Some(PERSON),
            ..Default::default()
        };
        tree.spawn("main", "w", worker).expect("child");
        tree
    }

    fn caller(uid: u32, in_daemon_namespace: bool) -> Caller {
        Caller {
            uid,
            in_daemon_namespace,
        }
    }

    #[test]
    fn standing_needs_the_daemon_namespace_for_operator_and_decider() {
        let dir = tempfile::tempdir().expect("dir");
        let tree = tree(&dir.path().to_string_lossy());
        let w = tree.get("main/w").expect("w");
        let standing = |uid, ns| Standing::of(caller(uid, ns), w, OWNER);
        assert_eq!(standing(OWNER, true), Standing::Operator);
        assert_eq!(standing(0, true), Standing::Operator);
        assert_eq!(standing(PERSON, true), Standing::Decider);
        assert_eq!(standing(AGENT, true), Standing::Asker);
        // In a sandbox the owner's uid and the decider's are strangers
        // unless they are the session's asker; root stays an asker.
        assert_eq!(standing(OWNER, false), Standing::Stranger);
        assert_eq!(standing(PERSON, false), Standing::Stranger);
        assert_eq!(standing(0, false), Standing::Asker);
        assert_eq!(standing(4242, true), Standing::Stranger);
        assert!(!standing(AGENT, true).may_decide());
        assert!(!standing(OWNER, false).may_ask());
    }

    #[test]
    fn an_asker_cannot_raise_a_child_above_itself() {
        let dir = tempfile::tempdir().expect("dir");
        let inside = dir.path().join("sub");
        std::fs::create_dir(&inside).expect("sub");
        let outside = tempfile::tempdir().expect("outside");
        let tree = tree(&dir.path().to_string_lossy());
        let w = tree.get("main/w").expect("w");
        let asker = Standing::Asker;
        let spec = |f: fn(&mut SpawnSpec)| {
            let mut spec = SpawnSpec::default();
            f(&mut spec);
            spec
        };
        assert!(check_spawn(asker, w, spec(|s| s.interactive = true)).is_err());
        assert!(check_spawn(asker, w, spec(|s| s.decider_uid = Some(AGENT))).is_err());
        assert!(check_spawn(asker, w, spec(|s| s.asker_uid = Some(4242))).is_err());
        assert!(check_spawn(asker, w, spec(|s| s.asker_uid = Some(AGENT))).is_ok());
        let at = |path: &Path| SpawnSpec {
            cwd: Some(path.to_string_lossy().into_owned()),
            ..Default::default()
        };
        let elsewhere = at(outside.path());
        assert!(check_spawn(asker, w, elsewhere.clone()).is_err());
        assert!(check_spawn(asker, w, at(Path::new("/"))).is_err());
        assert!(check_spawn(asker, w, at(&inside)).is_ok());
        // A symlink inside that points outside is judged by its target.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(outside.path(), &link).expect("symlink");
        let via_link = at(&link);
        assert!(check_spawn(asker, w, via_link).is_err());
        // The operator and the decider may do all of it.
        for standing in [Standing::Operator, Standing::Decider] {
            let mut all = elsewhere.clone();
            all.interactive = true;
            all.decider_uid = Some(4242);
            all.asker_uid = Some(4242);
            assert!(check_spawn(standing, w, all).is_ok());
        }
        assert!(check_spawn(Standing::Stranger, w, SpawnSpec::default()).is_err());
    }
}
