//! The authority's unit tests: asks, decisions, grants, the audit log
//! and the journal, driven through its API.

use super::*;
use crate::policy::layers::PolicySources;
use std::io::Write;

fn authority(global: &str) -> (Authority, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("config.json");
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(global.as_bytes()))
        .expect("config written");
    let loader = PolicyLoader::new(PolicySources {
        global: Some(path),
        ..Default::default()
    })
    .expect("loader");
    (
        Authority::new(Arc::new(loader), 1000).expect("authority"),
        dir,
    )
}

/// The operator (root in the daemon's namespace).
fn root() -> Caller {
    uid(0)
}

fn uid(uid: u32) -> Caller {
    Caller {
        uid,
        in_daemon_namespace: true,
    }
}

fn add_interactive_main(authority: &Authority, cwd: &str) {
    let spec = SpawnSpec {
        interactive: true,
        ..Default::default()
    };
    authority.add_root("main", spec, cwd).expect("root");
}

#[test]
fn an_ask_climbs_to_the_interactive_root_and_a_decision_answers_it() {
    let (authority, dir) = authority(r#"{"permission": {"bash": {"*": "ask", "ls": "allow"}}}"#);
    let cwd = dir.path().to_string_lossy().into_owned();
    add_interactive_main(&authority, &cwd);
    let child = authority
        .spawn("main", "worker", SpawnSpec::default(), root())
        .expect("child");
    let allowed = authority
        .submit(&child, "r1", br#"{"surface":"bash","value":"ls"}"#)
        .expect("ok");
    assert_eq!(
        authority.response(&allowed).map(|r| r.outcome),
        Some(Outcome::Allow)
    );

    let pending = authority
        .submit(&child, "r2", br#"{"surface":"bash","value":"make"}"#)
        .expect("ok");
    assert!(authority.response(&pending).is_none());
    assert_eq!(authority.inbox("main"), vec![pending.clone()]);
    assert!(authority.inbox(&child).is_empty());
    assert!(matches!(
        authority.decide("main", &pending, uid(4242), "allow"),
        Err(AuthorityError::PermissionDenied(_))
    ));
    assert!(matches!(
        authority.decide("main", &pending, uid(0), "maybe"),
        Err(AuthorityError::Invalid(_))
    ));
    authority
        .decide("main", &pending, uid(0), "deny not now")
        .expect("decided");
    let response = authority.response(&pending).expect("answered");
    assert_eq!(response.state, "denied_with_reason");
    assert_eq!(response.hops.len(), 2);
    assert!(matches!(
        authority.decide("main", &pending, uid(0), "allow"),
        Err(AuthorityError::AlreadyDecided(_))
    ));
}

#[test]
fn a_spawner_cannot_lend_a_child_a_more_privileged_agent() {
    let (authority, dir) = authority(
        r#"{"permission": {"bash": "ask"}, "agents": {"admin": {"bash": "allow"}, "worker": {"bash": {"*": "ask", "rm *": "deny"}}}}"#,
    );
    let cwd = dir.path().to_string_lossy().into_owned();
    add_interactive_main(&authority, &cwd);
    let admin = SpawnSpec {
        agent: Some("admin".into()),
        ..Default::default()
    };
    let direct = authority
        .spawn("main", "a", admin.clone(), root())
        .expect("child");
    let ok = authority
        .submit(&direct, "r", br#"{"surface":"bash","value":"rm x"}"#)
        .expect("ok");
    assert_eq!(
        authority.response(&ok).map(|r| r.outcome),
        Some(Outcome::Allow),
        "admin itself may"
    );

    let worker = authority
        .spawn(
            "main",
            "w",
            SpawnSpec {
                agent: Some("worker".into()),
                ..Default::default()
            },
            root(),
        )
        .expect("child");
    let disguised = authority
        .spawn(&worker, "g", admin, root())
        .expect("grandchild");
    let denied = authority
        .submit(&disguised, "r", br#"{"surface":"bash","value":"rm x"}"#)
        .expect("ok");
    assert_eq!(
        authority.response(&denied).map(|r| r.outcome),
        Some(Outcome::Deny)
    );
    let asked = authority
        .submit(&disguised, "s", br#"{"surface":"bash","value":"make"}"#)
        .expect("ok");
    assert!(
        authority.response(&asked).is_none(),
        "worker's ask still applies"
    );
    assert_eq!(authority.inbox("main"), vec![asked]);
}

#[test]
fn a_headless_root_denies_with_no_decider() {
    let (authority, dir) = authority(r#"{}"#);
    let cwd = dir.path().to_string_lossy().into_owned();
    authority
        .add_root("main", SpawnSpec::default(), &cwd)
        .expect("root");
    let ask = authority
        .submit("main", "r", br#"{"surface":"bash","value":"make"}"#)
        .expect("ok");
    let response = authority.response(&ask).expect("answered");
    assert_eq!(response.outcome, Outcome::NoDecider);
    assert!(!response.approved);
}

#[test]
fn allow_session_grants_cover_later_asks() {
    let (authority, dir) = authority(r#"{}"#);
    let cwd = dir.path().to_string_lossy().into_owned();
    add_interactive_main(&authority, &cwd);
    let child = authority
        .spawn("main", "c", SpawnSpec::default(), root())
        .expect("child");
    let first = authority
        .submit(&child, "a", br#"{"surface":"bash","value":"make"}"#)
        .expect("ok");
    let second = authority
        .submit(&child, "b", br#"{"surface":"bash","value":"make"}"#)
        .expect("ok");
    authority
        .decide("main", &first, uid(0), "allow session")
        .expect("decided");
    let covered = authority.response(&second).expect("covered by the grant");
    assert!(matches!(
        covered.decided_by,
        DecidedBy::SessionApproval { .. }
    ));
    let third = authority
        .submit(&child, "c", br#"{"surface":"bash","value":"make"}"#)
        .expect("ok");
    assert_eq!(
        authority.response(&third).map(|r| r.state),
        Some("approved_for_session")
    );
    let grant = authority.grants("main")[0].id.clone();
    authority.revoke("main", &grant).expect("revoked");
    let fourth = authority
        .submit(&child, "d", br#"{"surface":"bash","value":"make"}"#)
        .expect("ok");
    assert!(authority.response(&fourth).is_none());
}

/// Issue 23, item 5: `allow always global` is audited before the
/// global config is edited; when the log refuses the line, the file
/// is not touched and the asker is denied `audit_unavailable`.
#[test]
fn an_allow_always_that_cannot_be_audited_leaves_the_global_config_alone() {
    let global = r#"{"permission": {"bash": {"*": "ask"}}}"#;
    let (authority, dir) = authority(global);
    let cwd = dir.path().to_string_lossy().into_owned();
    add_interactive_main(&authority, &cwd);
    let path = dir.path().join("audit.log");
    authority.set_audit(Arc::new(
        crate::session::observe::audit::AuditLog::open(&path).expect("log"),
    ));
    let deploy = br#"{"surface":"bash","value":"make deploy"}"#;
    let first = authority.submit("main", "r1", deploy).expect("ok");
    // The log's place is taken by a directory: it cannot be reopened.
    std::fs::remove_file(&path).expect("removed");
    std::fs::create_dir(&path).expect("a directory in its place");
    let error = authority
        .decide("main", &first, root(), "allow always global")
        .expect_err("cannot be recorded");
    assert!(
        matches!(error, AuthorityError::AuditUnavailable(_, _)),
        "{error:?}"
    );
    let config = std::fs::read_to_string(dir.path().join("config.json")).expect("config");
    assert_eq!(
        config, global,
        "the global config was edited without an audit line"
    );
    assert_eq!(
        authority.response(&first).map(|r| r.outcome),
        Some(Outcome::AuditUnavailable)
    );
    // Space returns: the rule is not there, the next ask still waits.
    std::fs::remove_dir(&path).expect("directory removed");
    let second = authority.submit("main", "r2", deploy).expect("ok");
    assert!(
        authority.response(&second).is_none(),
        "allowed by a rule nobody recorded"
    );

    // Recorded: the edit's line comes before the file changes, and
    // names the lines added and the text's digests.
    authority
        .decide("main", &second, root(), "allow always global")
        .expect("decided");
    let config = std::fs::read_to_string(dir.path().join("config.json")).expect("config");
    assert!(config.contains("make deploy"), "{config}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&path)
        .expect("log")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    let edit = lines
        .iter()
        .position(|l| l["event"] == "config_edit")
        .expect("an edit line");
    let decided = lines
        .iter()
        .position(|l| l["askId"] == second.as_str() && l["outcome"] == "allow")
        .expect("the decision's line");
    assert!(edit < decided, "{lines:?}");
    assert_eq!(lines[edit]["askId"], second.as_str());
    assert_eq!(
        lines[edit]["sha256After"],
        crate::session::observe::audit::sha256_hex(config.as_bytes())
    );
}

#[test]
fn nothing_is_delivered_that_the_audit_log_cannot_hold() {
    let (authority, dir) = authority(r#"{"permission": {"bash": {"*": "ask", "ls": "allow"}}}"#);
    let cwd = dir.path().to_string_lossy().into_owned();
    add_interactive_main(&authority, &cwd);
    let path = dir.path().join("audit.log");
    authority.set_audit(Arc::new(
        crate::session::observe::audit::AuditLog::open(&path).expect("log"),
    ));
    let ls = br#"{"surface":"bash","value":"ls"}"#;
    let make = br#"{"surface":"bash","value":"make"}"#;
    let allowed = authority.submit("main", "r1", ls).expect("ok");
    assert_eq!(
        authority.response(&allowed).map(|r| r.outcome),
        Some(Outcome::Allow)
    );
    let pending = authority.submit("main", "r2", make).expect("ok");
    let seen = Arc::new(Mutex::new(None));
    let seen_by_waiter = Arc::clone(&seen);
    let parked = authority.wait(
        &pending,
        Box::new(move |r: Arc<Response>| {
            *seen_by_waiter.lock().expect("lock") = Some(r.outcome);
        }),
    );
    assert!(matches!(parked, Ok(None)));

    // The log's place is taken by a directory: it cannot be reopened.
    std::fs::remove_file(&path).expect("removed");
    std::fs::create_dir(&path).expect("a directory in its place");
    let refused = authority.submit("main", "r3", ls).expect("ok");
    let response = authority.response(&refused).expect("answered");
    assert_eq!(response.outcome, Outcome::AuditUnavailable);
    assert!(!response.approved);
    assert!(matches!(
        &response.decided_by,
        DecidedBy::AuditUnavailable { reason } if reason.contains("withheld: allow by rule")
    ));
    // A person's decision is refused with an error, the asker (and its
    // parked reader) is denied, and no grant is made.
    let error = authority
        .decide("main", &pending, uid(0), "allow session")
        .expect_err("cannot be recorded");
    assert!(matches!(error, AuthorityError::AuditUnavailable(_, _)));
    assert_eq!(
        authority.response(&pending).map(|r| r.outcome),
        Some(Outcome::AuditUnavailable)
    );
    assert_eq!(*seen.lock().expect("lock"), Some(Outcome::AuditUnavailable));
    assert!(authority.grants("main").is_empty());

    // The log can be written again: answers flow, the chain verifies.
    std::fs::remove_dir(&path).expect("directory removed");
    let again = authority.submit("main", "r4", ls).expect("ok");
    assert_eq!(
        authority.response(&again).map(|r| r.outcome),
        Some(Outcome::Allow)
    );
    let report = crate::session::observe::audit::verify(&path).expect("verifies");
    assert_eq!((report.lines, report.torn_tail), (2, None));
}

/// An authority over a fresh journal in its temp dir, `ls *` allowed
/// and every other bash line asked, with an interactive `main`.
fn journaled_authority() -> (
    Authority,
    Arc<crate::session::store::journal::Journal>,
    tempfile::TempDir,
) {
    let (authority, dir) = authority(r#"{"permission": {"bash": {"*": "ask", "ls *": "allow"}}}"#);
    let cwd = dir.path().to_string_lossy().into_owned();
    let state = dir.path().join("state");
    std::fs::create_dir(&state).expect("state dir");
    let journal =
        Arc::new(crate::session::store::journal::Journal::open(&state, false).expect("journal"));
    authority
        .restore(Arc::clone(&journal), false)
        .expect("empty");
    add_interactive_main(&authority, &cwd);
    (authority, journal, dir)
}

/// A pi view's asks across a restart: an authority restored from the
/// journal shows, in a new pi view, the pending request where the child
/// wrote it and the rule-answered one's response (the journal keeps
/// its target directory with the answer).
#[test]
fn a_pi_views_asks_come_back_with_the_journal() {
    use crate::session::view::pi_view::{Folder, PiViews};
    let config = r#"{"permission": {"bash": {"*": "ask", "ls *": "allow"}}}"#;
    let (first, journal, dir) = journaled_authority();
    let first = Arc::new(first);
    let views = PiViews::new(Arc::clone(&first));
    views.make_target("main", "t").expect("target");
    for folder in [Folder::Requests, Folder::Responses] {
        views.make_folder("main", "t", folder).expect("folder");
    }
    for (id, line) in [("1", "ls -l"), ("2", "make")] {
        let draft = format!("{id}.json.tmp");
        let body = format!(r#"{{"surface":"bash","value":"{line}"}}"#);
        views.create("main", "t", &draft).expect("draft");
        views
            .write("main", "t", &draft, 0, body.as_bytes())
            .expect("written");
        views
            .rename("main", "t", &draft, &format!("{id}.json"))
            .expect("asked");
    }
    assert!(views.has_response("main", "t", "1.json"));
    assert_eq!(views.list("main", "t", Folder::Requests), ["2.json"]);
    first.sync_journal();
    drop(views);
    drop(first);
    drop(journal);

    let (again, _config_dir) = authority(config);
    let journal = Arc::new(
        crate::session::store::journal::Journal::open(&dir.path().join("state"), false)
            .expect("journal reopened"),
    );
    again.restore(journal, false).expect("restored");
    let views = PiViews::new(Arc::new(again));
    assert_eq!(views.targets("main"), ["t"]);
    assert_eq!(views.list("main", "t", Folder::Requests), ["2.json"]);
    assert_eq!(views.list("main", "t", Folder::Responses), ["1.json"]);
    let answer: serde_json::Value = serde_json::from_slice(
        &views
            .response_bytes("main", "t", "1.json")
            .expect("the answer is where pi looks"),
    )
    .expect("JSON");
    assert_eq!(answer["approved"], true, "{answer}");
    assert!(answer.get("permfsForwardedTarget").is_none(), "{answer}");
}

/// Issue 26: a full journal fails closed. A rule's allow that cannot
/// be journaled is delivered as `journal_unavailable` (deny), an ask
/// that cannot be kept pending is denied the same way, and once there
/// is room again answers flow and are journaled.
#[test]
fn nothing_is_delivered_or_kept_pending_that_the_journal_cannot_hold() {
    let (authority, journal, _dir) = journaled_authority();
    // Requests bigger than a page, so each needs a new one.
    let long = "x".repeat(9000);
    let ls = format!(r#"{{"surface":"bash","value":"ls {long}"}}"#);
    let make = format!(r#"{{"surface":"bash","value":"make {long}"}}"#);
    journal.simulate_full(true).expect("capped");
    let allowed = authority.submit("main", "r1", ls.as_bytes()).expect("ok");
    let response = authority.response(&allowed).expect("answered");
    assert_eq!(response.outcome, Outcome::JournalUnavailable);
    assert!(!response.approved);
    let pending = authority.submit("main", "r2", make.as_bytes()).expect("ok");
    assert_eq!(
        authority.response(&pending).map(|r| r.outcome),
        Some(Outcome::JournalUnavailable),
        "kept pending without a journal row"
    );
    assert!(authority.inbox("main").is_empty());
    journal.simulate_full(false).expect("room again");
    let again = authority.submit("main", "r3", ls.as_bytes()).expect("ok");
    assert_eq!(
        authority.response(&again).map(|r| r.outcome),
        Some(Outcome::Allow)
    );
    let waiting = authority.submit("main", "r4", make.as_bytes()).expect("ok");
    assert_eq!(authority.inbox("main"), vec![waiting]);
    assert_eq!(journal.counts(), Ok((1, 1)), "r4 pending, r3 answered");
}

/// A rule-answered ask costs one commit: its delete at close is held
/// back (`persist::HOLD_DELETES`) and written with the next answer, or
/// once it is older than that bound, or at a stop.
#[test]
fn a_closed_asks_delete_rides_with_the_next_commit() {
    let (authority, journal, _dir) = journaled_authority();
    let ls = br#"{"surface":"bash","value":"ls"}"#;
    let first = authority.submit("main", "r1", ls).expect("ok");
    assert!(authority.response(&first).is_some_and(|r| r.approved));
    assert_eq!(journal.counts(), Ok((0, 1)), "the answer is journaled");
    authority.withdraw("main", "r1").expect("withdrawn");
    assert_eq!(journal.counts(), Ok((0, 1)), "the delete is held back");
    authority.submit("main", "r2", ls).expect("ok");
    assert_eq!(
        journal.counts(),
        Ok((0, 1)),
        "r1's delete went with r2's answer"
    );
    authority.withdraw("main", "r2").expect("withdrawn");
    authority.sync_journal();
    assert_eq!(journal.counts(), Ok((0, 0)), "a stop writes what is held");
    authority.submit("main", "r3", ls).expect("ok");
    authority.withdraw("main", "r3").expect("withdrawn");
    std::thread::sleep(crate::session::store::persist::HOLD_DELETES);
    authority.expire(Instant::now());
    assert_eq!(
        journal.counts(),
        Ok((0, 0)),
        "the expiry tick writes what is old"
    );
}

#[test]
fn allowing_a_bash_line_for_the_session_grants_no_path_per_word() {
    let (authority, dir) = authority(
        r#"{"permission": {"*": "ask", "read": "allow", "path": {"*": "allow", "*.env": "deny"}}}"#,
    );
    let cwd = dir.path().to_string_lossy().into_owned();
    add_interactive_main(&authority, &cwd);
    let child = authority
        .spawn("main", "c", SpawnSpec::default(), root())
        .expect("child");
    let asked = authority
        .submit(
            &child,
            "a",
            br#"{"tool":"bash","input":{"command":"cat src/main.rs /var/log/x"}}"#,
        )
        .expect("ok");
    authority
        .decide("main", &asked, uid(0), "allow session")
        .expect("decided");
    let surfaces: Vec<String> = authority.grants("main")[0]
        .rules
        .iter()
        .map(|r| r.surface.clone())
        .collect();
    assert!(
        !surfaces.iter().any(|s| s.starts_with("path")),
        "no path grant from a bash word: {surfaces:?}"
    );
    // The config's `*.env` deny still holds next to the approved line.
    let read = authority
        .submit(
            &child,
            "b",
            br#"{"tool":"read","input":{"path":"src/.env"}}"#,
        )
        .expect("ok");
    assert_eq!(
        authority.response(&read).map(|r| r.outcome),
        Some(Outcome::Deny)
    );
}

#[test]
fn invalid_requests_get_an_error_and_a_response() {
    let (authority, dir) = authority(r#"{}"#);
    let cwd = dir.path().to_string_lossy().into_owned();
    authority
        .add_root("main", SpawnSpec::default(), &cwd)
        .expect("root");
    let error = authority
        .submit("main", "r", b"{not json")
        .expect_err("invalid");
    assert!(matches!(error, AuthorityError::Invalid(_)));
    let ask = authority.ask_for("main", "r").expect("recorded");
    assert_eq!(
        authority.response(&ask).map(|r| r.outcome),
        Some(Outcome::Invalid)
    );
    assert!(matches!(
        authority.submit("main", "r", b"{}"),
        Err(AuthorityError::Exists(_))
    ));
}

#[test]
fn a_narrowed_grant_records_exactly_its_patterns_and_errors_stay_readable() {
    let (authority, dir) = authority(r#"{"permission": {"*": "ask"}}"#);
    let cwd = dir.path().to_string_lossy().into_owned();
    add_interactive_main(&authority, &cwd);
    let child = authority
        .spawn("main", "c", SpawnSpec::default(), root())
        .expect("child");
    let ask = authority
        .submit(
            &child,
            "a",
            br#"{"surface":"bash","value":"git push origin main"}"#,
        )
        .expect("ok");
    assert!(matches!(
        authority.decide("main", &ask, root(), "alow"),
        Err(AuthorityError::Invalid(_))
    ));
    let view: serde_json::Value =
        serde_json::from_slice(&authority.describe_pending("main", &ask).expect("view"))
            .expect("json");
    assert!(view["lastError"]
        .as_str()
        .is_some_and(|e| e.contains("unknown decision")));
    assert!(view["arrivedAt"].as_u64().is_some());
    authority
        .decide("main", &ask, root(), r#"allow session "git push origin *""#)
        .expect("decided");
    let grants = authority.grants("main");
    assert_eq!(grants.len(), 1);
    let patterns: Vec<_> = grants[0].rules.iter().map(|r| r.pattern.clone()).collect();
    assert_eq!(patterns, vec!["git push origin *".to_string()]);
    assert_eq!(
        grants[0].broader_than_suggested,
        vec!["git push origin *".to_string()]
    );
    let covered = authority
        .submit(
            &child,
            "b",
            br#"{"surface":"bash","value":"git push origin dev"}"#,
        )
        .expect("ok");
    assert_eq!(
        authority.response(&covered).map(|r| r.outcome),
        Some(Outcome::Allow)
    );
    let other = authority
        .submit(&child, "c", br#"{"surface":"bash","value":"git pull"}"#)
        .expect("ok");
    assert!(
        authority.response(&other).is_none(),
        "the grant is exactly its pattern"
    );
}

#[test]
fn pending_lists_asks_below_only_where_the_reader_may_decide() {
    let (authority, dir) = authority(r#"{"permission": {"*": "ask"}}"#);
    let cwd = dir.path().to_string_lossy().into_owned();
    add_interactive_main(&authority, &cwd);
    let mine = SpawnSpec {
        interactive: true,
        decider_uid: Some(3000),
        ..Default::default()
    };
    let theirs = SpawnSpec {
        interactive: true,
        decider_uid: Some(4000),
        ..Default::default()
    };
    let a = authority.spawn("main", "a", mine, root()).expect("a");
    let b = authority.spawn("main", "b", theirs, root()).expect("b");
    let first = authority
        .submit("main", "r1", br#"{"surface":"bash","value":"make"}"#)
        .expect("ok");
    let second = authority
        .submit(&a, "r2", br#"{"surface":"bash","value":"make"}"#)
        .expect("ok");
    let third = authority
        .submit(&b, "r3", br#"{"surface":"bash","value":"make"}"#)
        .expect("ok");
    let ids = |view: serde_json::Value| {
        view["pending"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|e| {
                        (
                            e["askId"].as_str().unwrap_or("").to_string(),
                            e["inbox"].as_str().unwrap_or("").to_string(),
                        )
                    })
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    let all = ids(authority.pending_below("main", root()).expect("view"));
    assert_eq!(
        all,
        vec![
            (first.clone(), format!("inbox/{first}")),
            (second.clone(), format!("children/a/inbox/{second}")),
            (third.clone(), format!("children/b/inbox/{third}")),
        ]
    );
    // uid 3000 decides at a only; in a sandbox, nowhere.
    let view = authority.pending_below("main", uid(3000)).expect("view");
    assert_eq!(view["notShown"], 2);
    assert_eq!(
        ids(view),
        vec![(second.clone(), format!("children/a/inbox/{second}"))]
    );
    let sandboxed = Caller {
        uid: 3000,
        in_daemon_namespace: false,
    };
    assert!(ids(authority.pending_below("main", sandboxed).expect("view")).is_empty());
    let root_sandboxed = Caller {
        uid: 0,
        in_daemon_namespace: false,
    };
    assert!(ids(authority
        .pending_below("main", root_sandboxed)
        .expect("view"))
    .is_empty());
}
