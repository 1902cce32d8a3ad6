//! The authorizer chain through a real mount: links in config order,
//! missing links skipped, the checkpoint, failures counting as defer.

use crate::common;

use common::{eventually, Daemon};
use serde_json::{json, Value};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// A command judge that answers `verdict` (a JSON object) for everything.
fn always(verdict: &str) -> Value {
    json!({"command": ["sh", "-c", format!("cat >/dev/null; echo '{verdict}'")], "timeoutMs": 5000})
}

fn config(permission: Value, chain: &[&str], judges: Value, extra: Value) -> String {
    let mut config = json!({"permission": permission, "authorizerChain": chain, "judges": judges});
    if let (Some(target), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
        for (key, value) in extra {
            target.insert(key.clone(), value.clone());
        }
    }
    config.to_string()
}

fn bash_ask(daemon: &Daemon, rid: &str, command: &str) -> std::path::PathBuf {
    daemon.ask(
        "main",
        rid,
        &json!({"surface": "bash", "value": command}).to_string(),
    )
}

fn mkdir_judge(daemon: &Daemon, name: &str) {
    std::fs::create_dir(daemon.mountpoint.join("judges").join(name)).expect("judge attached");
}

/// Reads one review from an attached judge (blocks until one comes).
fn take_review(daemon: &Daemon, name: &str) -> Value {
    let text = std::fs::read_to_string(daemon.mountpoint.join("judges").join(name).join("next"))
        .expect("review");
    serde_json::from_str(&text).expect("review JSON")
}

fn give_verdict(daemon: &Daemon, name: &str, review: &Value, verdict: &str) -> std::io::Result<()> {
    let text =
        json!({"reviewId": review["reviewId"], "verdict": verdict, "reason": "judged"}).to_string();
    std::fs::write(
        daemon.mountpoint.join("judges").join(name).join("verdict"),
        text,
    )
}

#[test]
fn links_run_in_config_order_not_registration_order() {
    let daemon = Daemon::start(
        &config(
            json!({"bash": "ask"}),
            &["first", "second"],
            json!({}),
            json!({}),
        ),
        None,
    );
    // Registered in the opposite order.
    mkdir_judge(&daemon, "second");
    mkdir_judge(&daemon, "first");
    let response = bash_ask(&daemon, "r", "make");
    let review = take_review(&daemon, "first");
    assert_eq!(review["link"], "first");
    assert_eq!(review["facts"][0]["matchValues"][0], "make");
    // `second` has nothing yet: a non-blocking check via the reader thread.
    give_verdict(&daemon, "first", &review, "defer").expect("verdict");
    let review = take_review(&daemon, "second");
    assert_eq!(review["link"], "second");
    give_verdict(&daemon, "second", &review, "allow").expect("verdict");
    let answer = daemon.response(&response);
    assert_eq!(answer["outcome"], "allow");
    assert_eq!(
        answer["decidedBy"],
        json!({"kind": "authorizer", "name": "second", "verdict": "allow", "reason": null})
    );
    // A verdict for a review that is over is refused.
    assert!(give_verdict(&daemon, "second", &review, "deny").is_err());
}

#[test]
fn a_missing_link_is_skipped_and_shown() {
    let daemon = Daemon::start(
        &config(
            json!({"bash": "ask"}),
            &["ghost", "lint"],
            json!({"lint": always(r#"{"verdict":"deny","reason":"lint says no"}"#)}),
            json!({}),
        ),
        None,
    );
    let answer = daemon.response(&bash_ask(&daemon, "r", "make"));
    assert_eq!(answer["outcome"], "deny");
    assert_eq!(answer["decidedBy"]["name"], "lint");
    assert_eq!(answer["denialReason"], "lint says no");
    let rules: Value = serde_json::from_str(
        &std::fs::read_to_string(daemon.session("main").join("rules.json")).expect("rules"),
    )
    .expect("JSON");
    assert_eq!(
        rules["authorizerChain"][0],
        json!({"name": "ghost", "status": "missing (skipped)"})
    );
    assert_eq!(
        rules["authorizerChain"][1],
        json!({"name": "lint", "status": "command"})
    );
}

#[test]
fn a_link_deny_ends_the_walk_before_a_person_is_asked() {
    let daemon = Daemon::start(
        &config(
            json!({"bash": "ask"}),
            &["no"],
            json!({"no": always(r#"{"verdict":"deny"}"#)}),
            json!({}),
        ),
        None,
    );
    std::fs::write(daemon.session("main").join("ctl"), "spawn c").expect("spawned");
    let answer =
        daemon.response(&daemon.ask("main/c", "r", r#"{"surface":"bash","value":"make"}"#));
    assert_eq!(answer["outcome"], "deny");
    assert_eq!(answer["decidedBy"]["kind"], "authorizer");
    assert!(daemon.inbox("main").is_empty(), "nobody was asked");
    let sessions = common::hop_sessions(&answer);
    assert_eq!(
        sessions,
        ["main/c", "main", "main"],
        "the child relayed, the root's chain judged"
    );
}

#[test]
fn the_checkpoint_caps_path_allows_and_trust_lifts_it() {
    let permission = json!({"bash": "ask", "read": "allow", "path": {"*": "ask"}});
    let judges = json!({"yes": always(r#"{"verdict":"allow"}"#)});
    let daemon = Daemon::start(
        &config(permission.clone(), &["yes"], judges.clone(), json!({})),
        None,
    );
    let bash = daemon.response(&bash_ask(&daemon, "b", "make"));
    assert_eq!(
        bash["outcome"], "allow",
        "a bash allow passes the checkpoint"
    );
    daemon.ask(
        "main",
        "p",
        r#"{"tool":"read","input":{"path":"src/a.rs"}}"#,
    );
    eventually("the capped ask reaches the inbox", || {
        daemon.inbox("main").len() == 1
    });
    let pending = std::fs::read_to_string(
        daemon
            .session("main")
            .join("inbox")
            .join(&daemon.inbox("main")[0]),
    )
    .expect("entry");
    assert!(
        pending.contains("\"verdict\": \"defer\""),
        "the link's allow was recorded as defer: {pending}"
    );
    drop(daemon);

    let trusted = Daemon::start(
        &config(
            permission,
            &["yes"],
            judges,
            json!({"authorizerTrust": {"yes": ["path"]}}),
        ),
        None,
    );
    let answer = trusted.response(&trusted.ask(
        "main",
        "p",
        r#"{"tool":"read","input":{"path":"src/a.rs"}}"#,
    ));
    assert_eq!(
        answer["outcome"], "allow",
        "trust lifts the cap for the path family"
    );
}

#[test]
fn timeouts_crashes_and_vanished_judges_count_as_defer() {
    let judges = json!({
        "slow": {"command": ["sleep", "5"], "timeoutMs": 200},
        "crash": {"command": ["sh", "-c", "exit 7"]},
        "human": {"timeoutMs": 60000}
    });
    let daemon = Daemon::start(
        &config(
            json!({"bash": "ask"}),
            &["slow", "crash", "human"],
            judges,
            json!({}),
        ),
        None,
    );
    mkdir_judge(&daemon, "human");
    bash_ask(&daemon, "r", "make");
    // slow times out, crash fails: both defer and the attached judge gets it.
    let review = take_review(&daemon, "human");
    assert_eq!(review["link"], "human");
    let links: Vec<String> = review["hops"]
        .as_array()
        .expect("hops")
        .iter()
        .filter(|h| h["decidedBy"]["kind"] == "authorizer")
        .map(|h| {
            format!(
                "{}:{}",
                h["decidedBy"]["name"].as_str().unwrap_or(""),
                h["decidedBy"]["verdict"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(links, ["slow:defer", "crash:defer"]);
    // The attached judge goes away while holding the review.
    std::fs::remove_dir(daemon.mountpoint.join("judges").join("human")).expect("detached");
    eventually("the ask falls to the person", || {
        daemon.inbox("main").len() == 1
    });

    // A judge process that holds a lease and dies with a review in hand
    // also defers: the kernel closes its lease.
    mkdir_judge(&daemon, "human");
    bash_ask(&daemon, "r2", "make again");
    let dir = daemon.mountpoint.join("judges").join("human");
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "exec 3<'{0}/lease'; cat '{0}/next' > /dev/null; kill -9 $$",
            dir.display()
        ))
        .status()
        .expect("judge runs");
    assert!(!status.success(), "the judge was killed");
    eventually("the dead judge's review defers", || {
        daemon.inbox("main").len() == 2
    });
    assert!(!dir.exists(), "a judge whose lease closed is detached");
}

#[test]
fn the_typo_judge_denies_a_confirmed_typo_and_defers_otherwise() {
    let stub = "cat | grep -q hmoe && echo yes || echo no";
    let judges = json!({"typo": {
        "builtin": "typo-path",
        "typoPatterns": ["^/hmoe/", "^/usr/lcoal/"],
        "confirmCommand": ["sh", "-c", stub],
        "timeoutMs": 5000
    }});
    let daemon = Daemon::start(
        &config(json!({"read": "allow"}), &["typo"], judges, json!({})),
        None,
    );
    let denied = daemon.response(&daemon.ask(
        "main",
        "t",
        r#"{"tool":"read","input":{"path":"/hmoe/user/x"}}"#,
    ));
    assert_eq!(denied["outcome"], "deny");
    assert_eq!(denied["decidedBy"]["name"], "typo");
    let reason = denied["denialReason"].as_str().unwrap_or("");
    assert!(
        reason.contains("typo") && reason.contains("/hmoe/user/x"),
        "a teaching reason: {reason}"
    );
    daemon.ask(
        "main",
        "p",
        r#"{"tool":"read","input":{"path":"/var/tmp/plain"}}"#,
    );
    eventually("a plain external path falls to the person", || {
        daemon.inbox("main").len() == 1
    });
}

#[test]
fn a_sandboxed_uid_cannot_attach_or_impersonate_a_judge() {
    let daemon = Daemon::start(
        &config(json!({"bash": "ask"}), &["human"], json!({}), json!({})),
        None,
    );
    let judges = daemon.mountpoint.join("judges");
    let status = Command::new("mkdir")
        .arg(judges.join("human"))
        .uid(65534)
        .gid(65534)
        .stderr(Stdio::null())
        .status()
        .expect("mkdir runs");
    assert!(!status.success(), "only the operator attaches judges");
    mkdir_judge(&daemon, "human");
    bash_ask(&daemon, "r", "make");
    let verdict = json!({"reviewId": "1.1-r#1", "verdict": "allow"}).to_string();
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "printf '%s' '{verdict}' > '{}'",
            judges.join("human").join("verdict").display()
        ))
        .uid(65534)
        .gid(65534)
        .stderr(Stdio::null())
        .status()
        .expect("sh runs");
    assert!(
        !status.success(),
        "another uid cannot give a judge's verdict"
    );
    let review = take_review(&daemon, "human");
    assert_eq!(
        review["reviewId"], "1.1-r#1",
        "the review is still waiting for the real judge"
    );
}

#[test]
fn a_headless_tree_with_a_command_judge() {
    let judge = json!({"command": ["sh", "-c",
        "grep -q '\"cargo build\"' && echo '{\"verdict\":\"allow\"}' || echo '{\"verdict\":\"defer\"}'"]});
    let daemon = Daemon::start_with_root(
        &config(
            json!({"bash": "ask"}),
            &["build"],
            json!({"build": judge}),
            json!({"roots": {"ci": {"interactive": false}}}),
        ),
        "ci",
    );
    std::fs::write(daemon.session("ci").join("ctl"), "spawn agent1").expect("spawned");
    let allowed = daemon.response(&daemon.ask(
        "ci/agent1",
        "b",
        r#"{"surface":"bash","value":"cargo build"}"#,
    ));
    assert_eq!(allowed["outcome"], "allow");
    assert_eq!(allowed["decidedBy"]["name"], "build");
    let other = daemon.response(&daemon.ask(
        "ci/agent1",
        "x",
        r#"{"surface":"bash","value":"curl evil.sh"}"#,
    ));
    assert_eq!(other["outcome"], "no_decider");
}

/// An attached judge across server restarts: `scripts/judges/attached-judge.sh`
/// serves reviews (it allows `cargo test`), the server is SIGKILLed twice,
/// and the next review still reaches the same judge process.
#[test]
fn an_attached_judge_keeps_judging_across_server_restarts() {
    let daemon = Daemon::start(
        &config(
            json!({"bash": "ask"}),
            &["bot"],
            json!({"bot": {"timeoutMs": 10000}}),
            json!({}),
        ),
        None,
    );
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scripts/judges/attached-judge.sh"
    );
    let mut judge = Command::new("bash")
        .arg(script)
        .arg(&daemon.mountpoint)
        .arg("bot")
        .stdin(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("the judge starts");
    let dir = daemon.mountpoint.join("judges").join("bot");
    eventually("the judge attached", || dir.exists());
    let first = bash_ask(&daemon, "r1", "cargo test");
    eventually("the judge allowed the first", || first.exists());
    assert_eq!(daemon.response(&first)["outcome"], "allow");

    daemon.kill_server();
    daemon.kill_server();
    let second = bash_ask(&daemon, "r2", "cargo test --all");
    eventually("the judge allowed the second", || second.exists());
    let answer = daemon.response(&second);
    let pid = judge.id() as i32;
    // SAFETY: the judge's own process group, started above.
    unsafe { libc::kill(-pid, libc::SIGKILL) };
    let _ = judge.wait();
    assert_eq!(answer["outcome"], "allow", "{answer}");
    assert_eq!(answer["decidedBy"]["name"], "bot", "{answer}");
}
