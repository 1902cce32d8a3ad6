//! The session tree: who may ask whom.
//!
//! A session's identity (agent, cwd, interactivity, deciders) is fixed by
//! whoever spawned it and never by the session itself: the principal is
//! where a request was written, not what it claims.

pub mod access;
pub mod ask;
pub mod control;
pub mod decision;
pub mod generation;
pub(in crate::session) mod grants;
pub mod limits;

use crate::facts::access_path::CwdCache;
use crate::policy::{CompiledRules, Rule};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

pub type SessionId = String;

/// A grant recorded at a session: a rule with the last word on its surface.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Grant {
    pub id: String,
    pub rules: Vec<Rule>,
    /// The ask whose answer created it.
    pub from_ask: String,
    pub granted_by_uid: u32,
    /// Patterns the person chose that cover more than permfs would have
    /// suggested from the facts (or something else entirely): shown so a
    /// wide grant is never silent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub broader_than_suggested: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Session {
    pub id: SessionId,
    pub parent: Option<SessionId>,
    pub agent: Option<String>,
    pub cwd: String,
    /// The canonical form of `cwd`, checked cheaply on each ask (shared
    /// with the sessions that inherited the same cwd).
    pub canonical_cwd: Arc<CwdCache>,
    pub interactive: bool,
    pub depth: usize,
    /// The uid that may ask as this session (its outbox, `ctl`, `query`).
    pub asker_uid: u32,
    /// The uid besides root and the mount owner that may decide here.
    pub decider_uid: Option<u32>,
    pub children: BTreeMap<String, SessionId>,
    pub grants: Vec<Grant>,
    /// The grants compiled as one rule list (rebuilt when they change).
    pub compiled_grants: Arc<CompiledRules>,
    /// The enforcement views serving this session: (root, mount point).
    pub views: Vec<(String, String)>,
    /// A number no other session of this daemon's life had: tells this
    /// session from a later one under the same id (a spawn's lease ends
    /// only the session it was taken for).
    pub serial: u64,
    /// The pid that spawned it with `lease` through a `ctl` handle: the
    /// session ends when that handle closes. Journaled so a restart knows
    /// the handle is gone and ends the session (`persist.rs`).
    pub lease: Option<u32>,
    /// The `ctl` handle (its FUSE file handle number) the lease is held
    /// through: a server that takes over the same connection keeps the
    /// session while that handle stays open (`Authority::restore`).
    pub lease_handle: Option<u64>,
}

/// Attributes a spawner gives a child.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpawnSpec {
    pub agent: Option<String>,
    pub cwd: Option<String>,
    pub interactive: bool,
    /// Who may ask as the session; inherited from the spawner when unset
    /// (a root's default is the mount owner).
    pub asker_uid: Option<u32>,
    /// Who besides root and the mount owner may decide there (never
    /// inherited: deciding is granted, not passed down).
    pub decider_uid: Option<u32>,
}

impl Session {
    /// `[(session, agent)]` from the root down to this session.
    pub fn principal_chain(&self, tree: &SessionTree) -> Vec<(SessionId, Option<String>)> {
        let mut chain = Vec::new();
        let mut cursor = Some(self);
        while let Some(session) = cursor {
            chain.push((session.id.clone(), session.agent.clone()));
            cursor = session.parent.as_ref().and_then(|p| tree.get(p));
        }
        chain.reverse();
        chain
    }
}

/// Valid session, request and grant names: what may become a file name.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name != "."
        && name != ".."
        && !name.contains('/')
        && !name.chars().any(char::is_control)
}

#[derive(Debug, Default)]
pub struct SessionTree {
    sessions: BTreeMap<SessionId, Session>,
    roots: Vec<SessionId>,
    /// The last [`Session::serial`] given.
    serials: u64,
}

impl SessionTree {
    /// How many sessions the tree of root `root` holds, the root included
    /// (ids are paths, so they are one range of the map).
    pub fn count_in_tree(&self, root: &str) -> usize {
        let prefix = format!("{root}/");
        let below = self
            .sessions
            .range(prefix.clone()..)
            .take_while(|(id, _)| id.starts_with(&prefix))
            .count();
        below + usize::from(self.sessions.contains_key(root))
    }

    pub fn get(&self, id: &str) -> Option<&Session> {
        self.sessions.get(id)
    }

    pub fn get_mut(&mut self, id: &str) -> Option<&mut Session> {
        self.sessions.get_mut(id)
    }

    pub fn roots(&self) -> &[SessionId] {
        &self.roots
    }

    pub(super) fn empty_grants() -> Arc<CompiledRules> {
        // An empty rule list always compiles.
        Arc::new(
            CompiledRules::compile(Vec::new(), "")
                .unwrap_or_else(|_| unreachable!("empty rule list")),
        )
    }

    pub fn add_root(
        &mut self,
        name: &str,
        spec: SpawnSpec,
        default_cwd: &str,
        owner_uid: u32,
    ) -> Result<SessionId, String> {
        if !is_valid_name(name) {
            return Err(format!("{name:?} is not a valid session name"));
        }
        if self.roots.iter().any(|r| r == name) {
            return Err(format!("root session {name:?} exists"));
        }
        let id = name.to_string();
        let cwd = spec.cwd.unwrap_or_else(|| default_cwd.to_string());
        self.serials += 1;
        self.sessions.insert(
            id.clone(),
            Session {
                id: id.clone(),
                parent: None,
                agent: spec.agent,
                canonical_cwd: Arc::new(CwdCache::new(&cwd)),
                cwd,
                interactive: spec.interactive,
                depth: 0,
                asker_uid: spec.asker_uid.unwrap_or(owner_uid),
                decider_uid: spec.decider_uid,
                children: BTreeMap::new(),
                grants: Vec::new(),
                compiled_grants: Self::empty_grants(),
                views: Vec::new(),
                serial: self.serials,
                lease: None,
                lease_handle: None,
            },
        );
        self.roots.push(id.clone());
        Ok(id)
    }

    /// Spawns `name` under `parent`; unspecified attributes are inherited
    /// (agent and cwd), and a child is non-interactive unless told.
    pub fn spawn(
        &mut self,
        parent: &str,
        name: &str,
        spec: SpawnSpec,
    ) -> Result<SessionId, String> {
        if !is_valid_name(name) {
            return Err(format!("{name:?} is not a valid session name"));
        }
        let parent_session = self
            .sessions
            .get(parent)
            .ok_or_else(|| format!("no session {parent:?}"))?;
        if parent_session.children.contains_key(name) {
            return Err(format!("session {parent:?} already has a child {name:?}"));
        }
        let id = format!("{parent}/{name}");
        let (cwd, canonical_cwd) = match spec.cwd {
            Some(cwd) if cwd != parent_session.cwd => {
                let cache = Arc::new(CwdCache::new(&cwd));
                (cwd, cache)
            }
            _ => (
                parent_session.cwd.clone(),
                Arc::clone(&parent_session.canonical_cwd),
            ),
        };
        self.serials += 1;
        let child = Session {
            id: id.clone(),
            parent: Some(parent.to_string()),
            agent: spec.agent.or_else(|| parent_session.agent.clone()),
            cwd,
            canonical_cwd,
            interactive: spec.interactive,
            depth: parent_session.depth + 1,
            asker_uid: spec.asker_uid.unwrap_or(parent_session.asker_uid),
            decider_uid: spec.decider_uid,
            children: BTreeMap::new(),
            grants: Vec::new(),
            compiled_grants: Self::empty_grants(),
            views: Vec::new(),
            serial: self.serials,
            lease: None,
            lease_handle: None,
        };
        self.sessions.insert(id.clone(), child);
        if let Some(parent_session) = self.sessions.get_mut(parent) {
            parent_session.children.insert(name.to_string(), id.clone());
        }
        Ok(id)
    }

    /// Puts back a session read from the journal (`persist.rs`): under
    /// its parent, which must be back already, or as a root. Later serials
    /// continue after the largest one restored.
    pub fn restore(&mut self, session: Session) -> Result<(), String> {
        if self.sessions.contains_key(&session.id) {
            return Err(format!("session {:?} is restored twice", session.id));
        }
        match &session.parent {
            Some(parent) => {
                let name = session
                    .id
                    .strip_prefix(parent.as_str())
                    .and_then(|rest| rest.strip_prefix('/'))
                    .filter(|name| is_valid_name(name))
                    .ok_or_else(|| {
                        format!("session {:?} is not a child of {parent:?}", session.id)
                    })?
                    .to_string();
                let parent_session = self
                    .sessions
                    .get_mut(parent)
                    .ok_or_else(|| format!("session {:?} has no parent {parent:?}", session.id))?;
                parent_session.children.insert(name, session.id.clone());
            }
            None => {
                if !is_valid_name(&session.id) {
                    return Err(format!("{:?} is not a root's name", session.id));
                }
                self.roots.push(session.id.clone());
            }
        }
        self.serials = self.serials.max(session.serial);
        self.sessions.insert(session.id.clone(), session);
        Ok(())
    }

    /// Every session, parents before children (ids are paths).
    pub fn all(&self) -> impl Iterator<Item = &Session> {
        self.sessions.values()
    }

    /// Removes a session and its descendants; returns every removed id.
    pub fn remove(&mut self, id: &str) -> Vec<SessionId> {
        let mut removed = Vec::new();
        let mut stack = vec![id.to_string()];
        while let Some(current) = stack.pop() {
            if let Some(session) = self.sessions.remove(&current) {
                stack.extend(session.children.values().cloned());
                removed.push(current);
                if let Some(parent) = session.parent.and_then(|p| self.sessions.get_mut(&p)) {
                    parent.children.retain(|_, child| child != id);
                }
            }
        }
        self.roots.retain(|r| r != id);
        removed
    }
}
