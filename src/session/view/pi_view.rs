//! The pi-compatible forwarding view of a session (`<session>/pi/`).
//!
//! pi-permission-system forwards a subagent's ask by files: under its
//! forwarding directory it makes `sessions/<target>/{requests,responses}`,
//! writes `requests/<id>.json` (a temporary file renamed into place),
//! polls until `responses/<id>.json` exists, reads it, unlinks both and
//! removes the emptied directories. Bind-mounting this view at a child's
//! forwarding directory makes an unmodified pi child ask through permfs.
//!
//! The view keeps only what the protocol needs between calls (which
//! directories were made, temporary files, and which request names raised
//! which asks); the asks themselves live in the session's outbox like any
//! other, so they are judged, listed, decided and audited the same way.
//! Identity is the session whose view was written: the target directory's
//! name and the body's identity fields are recorded, never trusted.
//!
//! A request file exists while its ask is pending; once it is answered the
//! request disappears and the response appears, complete, at once (what
//! the reference's serving node does by writing the response, then deleting
//! the request). Unlinking a pending request withdraws the ask; unlinking
//! the response forgets the answered one. Everything is bounded per session
//! ([`MAX_TARGETS`], [`MAX_FILES`]); past that, creating fails `ENOSPC`.

use crate::session::authority::{Authority, AuthorityError};
use crate::session::tree::ask::Response;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

/// Target directories one session's view may hold.
pub const MAX_TARGETS: usize = 64;
/// Request files (temporary or raised) one session's view may hold.
pub const MAX_FILES: usize = 1024;

/// The two directories under a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Folder {
    Requests,
    Responses,
}

impl Folder {
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "requests" => Some(Self::Requests),
            "responses" => Some(Self::Responses),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Requests => "requests",
            Self::Responses => "responses",
        }
    }
}

#[derive(Debug, Default)]
struct Target {
    requests: bool,
    responses: bool,
    /// Request files being written, not raised yet (`<id>.json.<…>.tmp`,
    /// or a `<id>.json` written directly and not yet closed).
    drafts: BTreeMap<String, Vec<u8>>,
    /// `<id>.json` → the outbox request name of the ask it raised.
    raised: BTreeMap<String, String>,
}

#[derive(Debug, Default)]
struct View {
    targets: BTreeMap<String, Target>,
}

impl View {
    /// Bytes held by its unsubmitted request files.
    fn draft_bytes(&self) -> usize {
        self.targets
            .values()
            .flat_map(|t| t.drafts.values())
            .map(Vec::len)
            .sum()
    }

    fn files(&self) -> usize {
        self.targets
            .values()
            .map(|t| t.drafts.len() + t.raised.len())
            .sum()
    }
}

/// Where a raised request's ask stands.
enum Standing {
    Pending,
    Answered(Arc<Response>),
    Gone,
}

/// Every session's pi view. Holds no ask state of its own beyond the name
/// of the outbox request each `<id>.json` raised.
pub struct PiViews {
    authority: Arc<Authority>,
    views: Mutex<HashMap<String, View>>,
}

/// A session's target folder state, for changing it.
fn target_mut<'a>(
    views: &'a mut HashMap<String, View>,
    session: &str,
    target: &str,
) -> Result<&'a mut Target, AuthorityError> {
    views
        .get_mut(session)
        .and_then(|v| v.targets.get_mut(target))
        .ok_or_else(|| not_found("such target directory"))
}

fn not_found(what: &str) -> AuthorityError {
    AuthorityError::NotFound(format!("no {what}"))
}

/// The outbox request name a `<id>.json` raises: the id itself, so the
/// pi child's request id and permfs's are the same.
fn request_id(name: &str) -> Option<&str> {
    name.strip_suffix(".json")
        .filter(|id| crate::session::tree::is_valid_name(id))
}

impl PiViews {
    /// The pi views of `authority`'s sessions. A server started on a
    /// journal (after a restart) shows again each ask a pi view raised, in
    /// its target's `requests/` while it is pending and its response in
    /// `responses/` once answered, where the waiting pi child polls.
    /// Drafts not yet raised and emptied target directories are not
    /// brought back: a child in the middle of writing a request gets an
    /// error from that write or rename.
    pub fn new(authority: Arc<Authority>) -> Self {
        let mut views: HashMap<String, View> = HashMap::new();
        for (session, target, rid) in authority.forwarded_asks() {
            let t = views
                .entry(session)
                .or_default()
                .targets
                .entry(target)
                .or_default();
            t.requests = true;
            t.responses = true;
            t.raised.insert(format!("{rid}.json"), rid);
        }
        Self {
            authority,
            views: Mutex::new(views),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, View>> {
        self.views.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn standing(&self, session: &str, rid: &str) -> Standing {
        match self.authority.ask_for(session, rid) {
            None => Standing::Gone,
            Some(ask) => match self.authority.response(&ask) {
                Some(response) => Standing::Answered(response),
                None => Standing::Pending,
            },
        }
    }

    pub fn targets(&self, session: &str) -> Vec<String> {
        self.lock()
            .get(session)
            .map(|v| v.targets.keys().cloned().collect())
            .unwrap_or_default()
    }

    pub fn has_target(&self, session: &str, target: &str) -> bool {
        self.lock()
            .get(session)
            .is_some_and(|v| v.targets.contains_key(target))
    }

    pub fn has_folder(&self, session: &str, target: &str, folder: Folder) -> bool {
        self.lock()
            .get(session)
            .and_then(|v| v.targets.get(target))
            .is_some_and(|t| match folder {
                Folder::Requests => t.requests,
                Folder::Responses => t.responses,
            })
    }

    /// The folders a target holds.
    pub fn folders(&self, session: &str, target: &str) -> Vec<Folder> {
        [Folder::Requests, Folder::Responses]
            .into_iter()
            .filter(|f| self.has_folder(session, target, *f))
            .collect()
    }

    /// `mkdir pi/sessions/<target>`: any valid name; `EEXIST` if made.
    pub fn make_target(&self, session: &str, target: &str) -> Result<(), AuthorityError> {
        if !crate::session::tree::is_valid_name(target) {
            return Err(AuthorityError::Invalid(format!(
                "{target:?} is not a valid directory name"
            )));
        }
        let live = self.authority.with_tree(|t| t.get(session).is_some());
        let mut views = self.lock();
        // Views of ended sessions are dropped as new ones are made.
        views.retain(|s, _| s == session || self.authority.with_tree(|t| t.get(s).is_some()));
        if !live {
            return Err(not_found("such session"));
        }
        let view = views.entry(session.to_string()).or_default();
        if view.targets.contains_key(target) {
            return Err(AuthorityError::Exists(format!("{target:?} exists")));
        }
        if view.targets.len() >= MAX_TARGETS {
            return Err(AuthorityError::Full(format!(
                "a session's pi view holds at most {MAX_TARGETS} target directories"
            )));
        }
        view.targets.insert(target.to_string(), Target::default());
        tracing::debug!(%session, %target, "pi view: target directory made");
        Ok(())
    }

    /// `mkdir requests` / `mkdir responses` under a target.
    pub fn make_folder(
        &self,
        session: &str,
        target: &str,
        folder: Folder,
    ) -> Result<(), AuthorityError> {
        self.set_folder(session, target, folder, true)
    }

    /// Makes (`present`) or removes a folder; `EEXIST`/`ENOENT` when it
    /// already is or is not there.
    fn set_folder(
        &self,
        session: &str,
        target: &str,
        folder: Folder,
        present: bool,
    ) -> Result<(), AuthorityError> {
        let mut views = self.lock();
        let t = target_mut(&mut views, session, target)?;
        let made = match folder {
            Folder::Requests => &mut t.requests,
            Folder::Responses => &mut t.responses,
        };
        match (*made, present) {
            (true, true) => Err(AuthorityError::Exists(format!("{} exists", folder.name()))),
            (false, false) => Err(not_found(folder.name())),
            _ => {
                *made = present;
                Ok(())
            }
        }
    }

    /// `rmdir` of a target: only once its folders are gone.
    pub fn remove_target(&self, session: &str, target: &str) -> Result<(), AuthorityError> {
        let mut views = self.lock();
        let view = views
            .get_mut(session)
            .ok_or_else(|| not_found("such target directory"))?;
        let t = view
            .targets
            .get(target)
            .ok_or_else(|| not_found("such target directory"))?;
        if t.requests || t.responses {
            return Err(AuthorityError::NotEmpty(format!("{target:?} is not empty")));
        }
        view.targets.remove(target);
        Ok(())
    }

    /// `rmdir requests` / `rmdir responses`: only when nothing is listed.
    pub fn remove_folder(
        &self,
        session: &str,
        target: &str,
        folder: Folder,
    ) -> Result<(), AuthorityError> {
        if !self.list(session, target, folder).is_empty() {
            return Err(AuthorityError::NotEmpty(format!(
                "{} is not empty",
                folder.name()
            )));
        }
        self.set_folder(session, target, folder, false)
    }

    /// The names a folder lists: drafts and pending requests, or answers.
    pub fn list(&self, session: &str, target: &str, folder: Folder) -> Vec<String> {
        let (drafts, raised) = {
            let views = self.lock();
            match views.get(session).and_then(|v| v.targets.get(target)) {
                Some(t) => (
                    t.drafts.keys().cloned().collect::<Vec<_>>(),
                    t.raised.clone(),
                ),
                None => return Vec::new(),
            }
        };
        let mut names = match folder {
            Folder::Requests => drafts,
            Folder::Responses => Vec::new(),
        };
        for (name, rid) in raised {
            let shown = match self.standing(session, &rid) {
                Standing::Pending => folder == Folder::Requests,
                Standing::Answered(_) => folder == Folder::Responses,
                Standing::Gone => false,
            };
            if shown {
                names.push(name);
            }
        }
        names.sort();
        names
    }

    fn raised_rid(&self, session: &str, target: &str, name: &str) -> Option<String> {
        self.lock()
            .get(session)
            .and_then(|v| v.targets.get(target))
            .and_then(|t| t.raised.get(name).cloned())
    }

    fn draft(&self, session: &str, target: &str, name: &str) -> Option<Vec<u8>> {
        self.lock()
            .get(session)
            .and_then(|v| v.targets.get(target))
            .and_then(|t| t.drafts.get(name).cloned())
    }

    /// Whether `requests/<name>` exists: a draft, or a pending ask.
    pub fn has_request(&self, session: &str, target: &str, name: &str) -> bool {
        self.request_bytes(session, target, name).is_some()
    }

    /// A request file's content: a draft's bytes so far, or a pending
    /// ask's request as permfs read it.
    pub fn request_bytes(&self, session: &str, target: &str, name: &str) -> Option<Vec<u8>> {
        if let Some(bytes) = self.draft(session, target, name) {
            return Some(bytes);
        }
        let rid = self.raised_rid(session, target, name)?;
        match self.standing(session, &rid) {
            Standing::Pending => {
                Some(format!("{{\"pending\":true,\"request\":{rid:?}}}\n").into_bytes())
            }
            _ => None,
        }
    }

    /// Whether `responses/<name>` exists: its ask is answered.
    pub fn has_response(&self, session: &str, target: &str, name: &str) -> bool {
        self.raised_rid(session, target, name)
            .is_some_and(|rid| matches!(self.standing(session, &rid), Standing::Answered(_)))
    }

    /// `responses/<name>`'s content, once the ask is answered: the
    /// reference's `ForwardedPermissionResponse` plus permfs's fields.
    pub fn response_bytes(&self, session: &str, target: &str, name: &str) -> Option<Vec<u8>> {
        let rid = self.raised_rid(session, target, name)?;
        match self.standing(session, &rid) {
            Standing::Answered(response) => Some(pi_response(&response, session)),
            _ => None,
        }
    }

    /// `creat` in `requests/`: a new, empty draft.
    pub fn create(&self, session: &str, target: &str, name: &str) -> Result<(), AuthorityError> {
        if !crate::session::tree::is_valid_name(name) {
            return Err(AuthorityError::Invalid(format!(
                "{name:?} is not a valid file name"
            )));
        }
        if self.has_request(session, target, name) {
            return Err(AuthorityError::Exists(format!("{name:?} exists")));
        }
        let mut views = self.lock();
        let view = views
            .get_mut(session)
            .ok_or_else(|| not_found("such target directory"))?;
        if view.files() >= MAX_FILES {
            return Err(AuthorityError::Full(format!(
                "a session's pi view holds at most {MAX_FILES} request files"
            )));
        }
        let t = view
            .targets
            .get_mut(target)
            .filter(|t| t.requests)
            .ok_or_else(|| not_found("requests directory"))?;
        t.drafts.insert(name.to_string(), Vec::new());
        Ok(())
    }

    /// A write into a draft; a raised request cannot be rewritten.
    pub fn write(
        &self,
        session: &str,
        target: &str,
        name: &str,
        offset: u64,
        data: &[u8],
    ) -> Result<(), AuthorityError> {
        let limits = self.authority.limits();
        let mut views = self.lock();
        let end = usize::try_from(offset)
            .ok()
            .and_then(|o| o.checked_add(data.len()))
            .filter(|end| *end <= limits.request_bytes)
            .ok_or(AuthorityError::TooLarge(limits.request_bytes))?;
        // What this write adds to the bytes held (drafts only grow here).
        let held = target_mut(&mut views, session, target)?
            .drafts
            .get(name)
            .map(Vec::len);
        let growth = end.saturating_sub(held.unwrap_or(end));
        if growth > 0 {
            let own = views.get(session).map_or(0, View::draft_bytes);
            if own + growth > limits.pi_draft_bytes {
                return Err(AuthorityError::Full(format!(
                    "session {session:?}'s pi view holds {own} bytes of unsubmitted requests; at most {} (limits.piDraftBytes)",
                    limits.pi_draft_bytes
                )));
            }
            let root = crate::session::tree::limits::root_of(session);
            let tree: usize = views
                .iter()
                .filter(|(s, _)| crate::session::tree::limits::root_of(s) == root)
                .map(|(_, v)| v.draft_bytes())
                .sum();
            if tree + growth > limits.tree_pi_draft_bytes {
                return Err(AuthorityError::Full(format!(
                    "the pi views of root {root:?}'s tree hold {tree} bytes of unsubmitted requests; at most {} (limits.treePiDraftBytes)",
                    limits.tree_pi_draft_bytes
                )));
            }
        }
        let t = target_mut(&mut views, session, target)?;
        let Some(draft) = t.drafts.get_mut(name) else {
            return Err(AuthorityError::Exists(
                "the request was already submitted".into(),
            ));
        };
        if draft.len() < end {
            draft.resize(end, 0);
        }
        draft[end - data.len()..end].copy_from_slice(data);
        Ok(())
    }

    /// `O_TRUNC` / `truncate` of a draft.
    pub fn truncate(&self, session: &str, target: &str, name: &str, size: u64) {
        let mut views = self.lock();
        if let Some(draft) = views
            .get_mut(session)
            .and_then(|v| v.targets.get_mut(target))
            .and_then(|t| t.drafts.get_mut(name))
        {
            draft.truncate(usize::try_from(size).unwrap_or(usize::MAX));
        }
    }

    /// A draft named `<id>.json` was closed: it asks (unless still empty
    /// and `last` is false: a shell's `>` closes a duplicate descriptor
    /// before the data arrives). Other drafts stay as they are.
    pub fn close(
        &self,
        session: &str,
        target: &str,
        name: &str,
        last: bool,
    ) -> Result<(), AuthorityError> {
        let Some(bytes) = self.draft(session, target, name) else {
            return Ok(());
        };
        if request_id(name).is_none() || (bytes.is_empty() && !last) {
            return Ok(());
        }
        self.raise(session, target, name, name)
    }

    /// `rename(requests/<from>, requests/<to>)`: a draft moves; renamed to
    /// `<id>.json` it asks (the pi child's atomic write).
    pub fn rename(
        &self,
        session: &str,
        target: &str,
        from: &str,
        to: &str,
    ) -> Result<(), AuthorityError> {
        if self.draft(session, target, from).is_none() {
            return Err(match self.has_request(session, target, from) {
                true => AuthorityError::PermissionDenied(
                    "a request that asked cannot be renamed".into(),
                ),
                false => not_found("such request file"),
            });
        }
        if !crate::session::tree::is_valid_name(to) {
            return Err(AuthorityError::Invalid(format!(
                "{to:?} is not a valid file name"
            )));
        }
        if self.has_request(session, target, to) || self.raised_rid(session, target, to).is_some() {
            return Err(AuthorityError::Exists(format!("{to:?} exists")));
        }
        if request_id(to).is_some() {
            return self.raise(session, target, from, to);
        }
        let mut views = self.lock();
        if let Ok(t) = target_mut(&mut views, session, target) {
            if let Some(bytes) = t.drafts.remove(from) {
                t.drafts.insert(to.to_string(), bytes);
            }
        }
        Ok(())
    }

    /// Raises the draft `draft` as the request `name` (`<id>.json`). The
    /// draft is consumed whatever happens: a body that cannot be read is
    /// answered `invalid` (its response says why) and the caller is told.
    fn raise(
        &self,
        session: &str,
        target: &str,
        draft: &str,
        name: &str,
    ) -> Result<(), AuthorityError> {
        let rid = request_id(name)
            .ok_or_else(|| AuthorityError::Invalid(format!("{name:?} is not <id>.json")))?
            .to_string();
        let bytes = {
            let mut views = self.lock();
            let t = target_mut(&mut views, session, target)?;
            let bytes = t
                .drafts
                .remove(draft)
                .ok_or_else(|| not_found("such request file"))?;
            // Named before it asks, so the answer is found however fast
            // it comes.
            t.raised.insert(name.to_string(), rid.clone());
            bytes
        };
        let parsed = crate::facts::forwarded::parse(&bytes, target);
        let raised = self.authority.submit_request(session, &rid, parsed);
        if let Err(error @ (AuthorityError::Exists(_) | AuthorityError::NotFound(_))) = &raised {
            // Nothing was raised under this name: forget it.
            self.forget(session, target, name);
            return Err(error.clone());
        }
        tracing::debug!(%session, %target, %rid, ok = raised.is_ok(), "pi view: forwarded request raised");
        raised.map(drop)
    }

    fn forget(&self, session: &str, target: &str, name: &str) {
        if let Ok(t) = target_mut(&mut self.lock(), session, target) {
            t.raised.remove(name);
        }
    }

    /// `unlink requests/<name>`: a draft is dropped; a pending ask is
    /// withdrawn (answered `cancelled`).
    pub fn unlink_request(
        &self,
        session: &str,
        target: &str,
        name: &str,
    ) -> Result<(), AuthorityError> {
        {
            let mut views = self.lock();
            if let Ok(t) = target_mut(&mut views, session, target) {
                if t.drafts.remove(name).is_some() {
                    return Ok(());
                }
            }
        }
        let rid = self
            .raised_rid(session, target, name)
            .ok_or_else(|| not_found("such request file"))?;
        match self.standing(session, &rid) {
            Standing::Pending => {
                self.forget(session, target, name);
                self.authority.withdraw(session, &rid)
            }
            _ => Err(not_found("such request file")),
        }
    }

    /// `unlink responses/<name>`: the answered ask is forgotten.
    pub fn unlink_response(
        &self,
        session: &str,
        target: &str,
        name: &str,
    ) -> Result<(), AuthorityError> {
        let rid = self
            .raised_rid(session, target, name)
            .ok_or_else(|| not_found("such response file"))?;
        match self.standing(session, &rid) {
            Standing::Answered(_) => {
                self.forget(session, target, name);
                // Already answered: withdrawing only forgets it.
                self.authority.withdraw(session, &rid)
            }
            Standing::Gone => {
                self.forget(session, target, name);
                Err(not_found("such response file"))
            }
            Standing::Pending => Err(not_found("such response file")),
        }
    }
}

/// The response a pi child reads: the reference's
/// `ForwardedPermissionResponse` fields first, then permfs's own.
///
/// `approved_for_session` is answered as `approved`: on that state a pi
/// child records a session approval of its own and stops forwarding the
/// matching asks, so a grant revoked in permfs would go on allowing in the
/// child, unseen and unaudited. permfs has recorded the grant where the
/// person gave it; the child's next matching ask is answered by it at
/// once. This is what the reference's serving node does for a grant it
/// records itself (`approved_for_serving_session` → `approved`). The
/// original state is kept as `permfsState`.
pub fn pi_response(response: &Response, session: &str) -> Vec<u8> {
    let responder = response
        .responder_session_id
        .clone()
        .or_else(|| response.hops.last().map(|h| h.session.clone()))
        .unwrap_or_else(|| session.to_string());
    let state = match response.state {
        "approved_for_session" => "approved",
        other => other,
    };
    let mut object = serde_json::Map::new();
    object.insert("approved".into(), response.approved.into());
    object.insert("state".into(), state.into());
    if let Some(reason) = &response.denial_reason {
        object.insert("denialReason".into(), reason.clone().into());
    }
    object.insert("responderSessionId".into(), responder.into());
    object.insert("respondedAt".into(), response.responded_at.into());
    object.insert("permfsState".into(), response.state.into());
    if let Ok(serde_json::Value::Object(own)) = serde_json::to_value(response) {
        for (key, value) in own {
            if !value.is_null() {
                object.entry(key).or_insert(value);
            }
        }
    }
    let mut bytes = serde_json::to_vec_pretty(&object).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::layers::{PolicyLoader, PolicySources};
    use crate::session::SpawnSpec;

    /// A view over an authority whose root `main` takes asks by rule.
    fn views() -> (PiViews, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("config.json");
        std::fs::write(
            &path,
            r#"{"permission": {"*": "ask", "bash": {"*": "ask", "git status": "allow"}}}"#,
        )
        .expect("config written");
        let loader = PolicyLoader::new(PolicySources {
            global: Some(path),
            ..Default::default()
        })
        .expect("loader");
        let authority = Arc::new(Authority::new(Arc::new(loader), 1000).expect("authority"));
        let spec = SpawnSpec {
            interactive: true,
            ..Default::default()
        };
        authority
            .add_root("main", spec, &dir.path().to_string_lossy())
            .expect("root");
        (PiViews::new(authority), dir)
    }

    fn prepared() -> (PiViews, tempfile::TempDir) {
        let (views, dir) = views();
        views.make_target("main", "t").expect("target");
        views
            .make_folder("main", "t", Folder::Requests)
            .expect("requests");
        views
            .make_folder("main", "t", Folder::Responses)
            .expect("responses");
        (views, dir)
    }

    const ASK: &[u8] = br#"{"surface":"bash","value":"make"}"#;

    /// Writes `ASK` as a temporary file and renames it to `7.json`, as the
    /// child does; `close` first when `closed` (a close asks nothing).
    fn raise_seven(views: &PiViews, closed: bool) {
        views.create("main", "t", "7.json.1.2.tmp").expect("draft");
        views
            .write("main", "t", "7.json.1.2.tmp", 0, ASK)
            .expect("written");
        if closed {
            views
                .close("main", "t", "7.json.1.2.tmp", true)
                .expect("closed");
            assert_eq!(
                views.list("main", "t", Folder::Requests),
                ["7.json.1.2.tmp"]
            );
        }
        views
            .rename("main", "t", "7.json.1.2.tmp", "7.json")
            .expect("asked");
    }

    /// A person at `main` (the operator) decides `ask` with `word`.
    fn decide(views: &PiViews, ask: &str, word: &str) {
        let operator = crate::session::Caller {
            uid: 0,
            in_daemon_namespace: true,
        };
        views
            .authority
            .decide("main", ask, operator, word)
            .expect("decided");
    }

    #[test]
    fn folders_are_made_once_and_removed_only_when_empty() {
        let (views, _dir) = prepared();
        assert!(matches!(
            views.make_folder("main", "t", Folder::Requests),
            Err(AuthorityError::Exists(_))
        ));
        assert!(matches!(
            views.remove_target("main", "t"),
            Err(AuthorityError::NotEmpty(_))
        ));
        views.create("main", "t", "1.json.tmp").expect("draft");
        assert!(matches!(
            views.remove_folder("main", "t", Folder::Requests),
            Err(AuthorityError::NotEmpty(_))
        ));
        views
            .unlink_request("main", "t", "1.json.tmp")
            .expect("dropped");
        views
            .remove_folder("main", "t", Folder::Requests)
            .expect("empty now");
        views
            .remove_folder("main", "t", Folder::Responses)
            .expect("removed");
        views.remove_target("main", "t").expect("removed");
        assert!(views.targets("main").is_empty());
        assert!(matches!(
            views.make_target("gone", "t"),
            Err(AuthorityError::NotFound(_))
        ));
    }

    #[test]
    fn a_rename_asks_and_the_request_turns_into_a_response() {
        let (views, _dir) = prepared();
        // A temporary file asks nothing when closed; the rename asks.
        raise_seven(&views, true);
        assert_eq!(views.list("main", "t", Folder::Requests), ["7.json"]);
        assert!(!views.has_response("main", "t", "7.json"));
        assert!(matches!(
            views.rename("main", "t", "7.json", "8.json"),
            Err(AuthorityError::PermissionDenied(_))
        ));
        // A person at `main` decides; the request gives way to the answer.
        let ask = views.authority.inbox("main").pop().expect("waiting");
        decide(&views, &ask, "allow session");
        assert!(views.list("main", "t", Folder::Requests).is_empty());
        let answer: serde_json::Value =
            serde_json::from_slice(&views.response_bytes("main", "t", "7.json").expect("answer"))
                .expect("JSON");
        assert_eq!(answer["approved"], true);
        assert_eq!(answer["state"], "approved", "{answer}");
        assert_eq!(answer["permfsState"], "approved_for_session");
        assert_eq!(answer["responderSessionId"], "main");
        views
            .unlink_response("main", "t", "7.json")
            .expect("forgotten");
        assert!(views.authority.ask_for("main", "7").is_none());
    }

    /// What a new server's pi view shows on an authority restored with a
    /// forwarded ask pending (the journal keeps its provenance): the
    /// request where the child wrote it, then its answer; a draft and an
    /// outbox ask of the same session are not shown.
    #[test]
    fn a_new_view_shows_the_pending_forwarded_asks_of_its_authority() {
        let (views, _dir) = prepared();
        raise_seven(&views, false);
        views.create("main", "t", "8.json.tmp").expect("a draft");
        views
            .authority
            .submit("main", "9", ASK)
            .expect("an outbox ask");
        let again = PiViews::new(Arc::clone(&views.authority));
        assert_eq!(again.targets("main"), ["t"]);
        assert_eq!(
            again.folders("main", "t"),
            [Folder::Requests, Folder::Responses]
        );
        assert_eq!(again.list("main", "t", Folder::Requests), ["7.json"]);
        assert!(!again.has_response("main", "t", "7.json"));
        let ask = again
            .authority
            .inbox("main")
            .into_iter()
            .find(|a| again.authority.ask_for("main", "7").as_ref() == Some(a))
            .expect("waiting");
        decide(&again, &ask, "deny");
        let answer: serde_json::Value =
            serde_json::from_slice(&again.response_bytes("main", "t", "7.json").expect("answer"))
                .expect("JSON");
        assert_eq!(answer["approved"], false, "{answer}");
        assert!(again.list("main", "t", Folder::Requests).is_empty());
    }

    #[test]
    fn drafts_are_bounded_and_a_raised_request_cannot_be_rewritten() {
        let (views, _dir) = prepared();
        assert!(matches!(
            views.write("main", "t", "missing", 0, ASK),
            Err(AuthorityError::Exists(_))
        ));
        views.create("main", "t", "big.tmp").expect("draft");
        assert!(matches!(
            views.write("main", "t", "big.tmp", 64 << 10, b"x"),
            Err(AuthorityError::TooLarge(_))
        ));
        for i in 1..MAX_FILES {
            views
                .create("main", "t", &format!("{i}.tmp"))
                .expect("within the bound");
        }
        assert!(matches!(
            views.create("main", "t", "one-more.tmp"),
            Err(AuthorityError::Full(_))
        ));
        for i in 0..MAX_TARGETS - 1 {
            views
                .make_target("main", &format!("t{i}"))
                .expect("within the bound");
        }
        assert!(matches!(
            views.make_target("main", "one-more"),
            Err(AuthorityError::Full(_))
        ));
    }
}
