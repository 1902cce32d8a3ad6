//! Files that run outside the sandbox (issue 34, item 4), from inside
//! `permfs run` with the real git: git works with no ask, and each plant
//! (a hook, `core.fsmonitor`, `.envrc`, a VS Code task) asks a person;
//! denied, nothing runs when the person's own git runs outside.

use crate::common;

use common::{bwrap_works, run_in_background, work_dir as work, Daemon};
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

/// Rules that allow everything: only the outside guards stand.
const CONFIG: &str = r#"{"permission": {"*": "allow", "write": "allow", "path_write": {"*": "allow"}, "external_directory": "allow"}}"#;

fn root_bwrap_and_git() -> bool {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        common::skip("needs root");
        return false;
    }
    let git = std::process::Command::new("git").arg("--version").output();
    if !git.is_ok_and(|o| o.status.success()) {
        common::skip("no git");
        return false;
    }
    bwrap_works()
}

/// git inside, with no ask; then the four plants, each of which must fail.
const SCRIPT: &str = r#"
  export HOME=/tmp GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
  git init -q repo && cd repo || exit 10
  git config user.email x@example.com || exit 11
  git config user.name X || exit 12
  echo a > a && git add a && git commit -qm one || exit 13
  echo GIT-OK
  printf '#!/bin/sh\ntouch HOOK_RAN\n' > .git/hooks/pre-commit 2>/dev/null && echo PLANTED-HOOK
  chmod +x .git/hooks/pre-commit 2>/dev/null
  git config core.fsmonitor "touch FSMONITOR_RAN" 2>/dev/null && echo PLANTED-FSMONITOR
  echo 'touch ENVRC_RAN' > .envrc 2>/dev/null && echo PLANTED-ENVRC
  mkdir -p .vscode && echo '{"tasks":[{"label":"x","command":"touch TASK_RAN","runOptions":{"runOn":"folderOpen"}}]}' > .vscode/tasks.json 2>/dev/null && echo PLANTED-TASK
  echo DONE
"#;

fn plants_ask_and_nothing_runs(args: &[&str]) {
    let daemon = Daemon::start(CONFIG, None);
    let work = work(&daemon);
    std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o777)).expect("mode");
    let mut running = run_in_background(&daemon, args, SCRIPT);
    // Every ask is answered `deny`; each must be a plant.
    let mut asked: Vec<String> = Vec::new();
    let start = Instant::now();
    while running.0.try_wait().expect("wait").is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the sandbox hangs"
        );
        for id in daemon.inbox("main") {
            let entry = daemon.session("main").join("inbox").join(&id);
            let Ok(text) = std::fs::read_to_string(&entry) else {
                continue;
            };
            assert!(
                text.contains("runs outside the sandbox"),
                "an ask that is not a plant: {text}"
            );
            let _ = std::fs::write(&entry, "deny");
            asked.push(text);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let (status, out) = running.finish();
    assert!(status.success(), "{status:?}: {out}");
    assert!(out.contains("GIT-OK"), "git did not work inside: {out}");
    assert!(out.contains("DONE"), "{out}");
    assert!(!out.contains("PLANTED"), "a plant was written: {out}");
    for kind in [
        "a git hook",
        "a git config file",
        "a direnv file",
        "a VS Code workspace file",
    ] {
        assert!(
            asked.iter().any(|a| a.contains(kind)),
            "no ask for {kind}: {asked:?}"
        );
    }
    // The person's own git, outside, with the repository as the sandbox
    // left it: nothing planted runs.
    let repo = work.join("repo");
    let config = std::fs::read_to_string(repo.join(".git/config")).expect("config");
    assert!(
        config.contains("x@example.com") && !config.contains("fsmonitor"),
        "{config}"
    );
    for git in [
        vec!["status"],
        vec!["commit", "--allow-empty", "-qm", "person"],
    ] {
        // The repository may be another uid's (`--uid`): the person's
        // git is told it is theirs.
        let out = std::process::Command::new("git")
            .args(["-c", "safe.directory=*"])
            .args(&git)
            .current_dir(&repo)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .expect("git runs");
        assert!(out.status.success(), "{git:?}: {out:?}");
    }
    for marker in ["HOOK_RAN", "FSMONITOR_RAN", "ENVRC_RAN", "TASK_RAN"] {
        assert!(!repo.join(marker).exists(), "{marker}: a payload ran");
    }
}

#[test]
fn git_works_inside_and_its_plants_ask_as_root() {
    if root_bwrap_and_git() {
        plants_ask_and_nothing_runs(&[]);
    }
}

#[test]
fn git_works_inside_and_its_plants_ask_as_another_uid() {
    if root_bwrap_and_git() {
        plants_ask_and_nothing_runs(&["--uid", "65534"]);
    }
}
